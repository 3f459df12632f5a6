"""The class report as one self-contained HTML page: inline CSS, figures
drawn with matplotlib and embedded as base64 PNG, no script, nothing
fetched from anywhere.

Escaping is feedback's: every learner-controlled string (student ids,
diagnoses, which can quote a learner's error message) goes through
html.escape, then each section goes through escape.sanitized, the same
nh3 second pass feedback pages get, so no script, style or event handler
survives even if a string slipped past the first. The figures are added
after that pass (nh3 drops images) and show no learner text: their labels
are notebook and exercise names from the gradebook's grade cells.
"""
from __future__ import annotations

import base64
import html
import io
from collections import defaultdict

from ..escape import PAGE_ATTRIBUTES, sanitized

INSTRUCTOR_ONLY = ("For the instructor only. This page names students, their scores and the mistakes they made: "
                   "do not publish it or share it with learners.")
CSS = """
body { font-family: system-ui, sans-serif; max-width: 72rem; margin: 1.5rem auto; padding: 0 1rem; color: #222; }
.private { border: 2px solid #a22; background: #fdeaea; padding: 0.5rem 1rem; font-weight: 600; }
table { border-collapse: collapse; margin: 0.6rem 0; font-size: 0.92rem; }
td, th { border: 1px solid #bbb; padding: 0.15rem 0.5rem; vertical-align: top; text-align: left; }
td.num, th.num { text-align: right; }
.rule { border-left: 4px solid #335; background: #f4f4fb; padding: 0.3rem 0.8rem; }
.unnamed { color: #666; font-style: italic; }
.missing { color: #a22; }
.who { color: #555; font-size: 0.85rem; }
figure { margin: 0.8rem 0; }
h3 + table { width: 100%; }
summary code { white-space: pre; background: #f4f4f4; }
figure img { max-width: 100%; }
details { margin: 0.15rem 0; }
summary { cursor: pointer; }
"""
# Section anchors and per-student ids are the report's own (student-N), never a student's id.
REPORT_ATTRIBUTES = {**PAGE_ATTRIBUTES, "*": PAGE_ATTRIBUTES["*"] | {"id"}}
TOP_ROWS = 25      # exercises shown in the ranking (the CSV has them all)
PASS, FAIL, GONE = "#4c8c4a", "#c0504d", "#bbbbbb"


def _e(value) -> str:
    return html.escape(str(value))


def _num(value, suffix: str = "") -> str:
    return "–" if value is None else f"{value:g}{suffix}"


def _table(header: list[str], rows: list[list[str]], numeric: set[int] = frozenset()) -> str:
    """Cells are HTML already (escaped by the caller)."""
    head = "".join(f'<th class="num">{h}</th>' if i in numeric else f"<th>{h}</th>" for i, h in enumerate(header))
    body = "".join("<tr>" + "".join(f'<td class="num">{c}</td>' if i in numeric else f"<td>{c}</td>"
                                    for i, c in enumerate(row)) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=72)
    return base64.b64encode(buf.getvalue()).decode("ascii")


class Picture(str):
    """HTML of a figure the report drew: added to the page after the sanitizing pass."""


def _figure(fig, alt: str) -> Picture:
    return Picture(f'<figure><img alt="{_e(alt)}" src="data:image/png;base64,{_png(fig)}"></figure>')


def _short(assignment: str) -> str:
    return assignment.split("_", 1)[0]


def figure_notebooks(report: dict) -> Picture:
    """Submitted and missing per notebook, and the spread of scores."""
    from matplotlib.figure import Figure
    nbs = report["notebooks"]
    names = [_short(n["assignment"]) for n in nbs]
    percents = defaultdict(list)
    for row in report["students"]:
        if row["percent"] is not None:
            percents[row["assignment"]].append(row["percent"])
    fig = Figure(figsize=(10, 3.2), layout="constrained")
    left, right = fig.subplots(1, 2)
    left.bar(names, [n["submitted"] for n in nbs], color=PASS, label="submitted")
    left.bar(names, [n["missing"] for n in nbs], bottom=[n["submitted"] for n in nbs], color=GONE, label="missing")
    left.set(title="Submissions per notebook", ylabel="students")
    left.legend(loc="lower left", fontsize=8)
    data = [percents[n["assignment"]] or [float("nan")] for n in nbs]
    right.boxplot(data, tick_labels=names)
    right.set(title="Scores of the submitted notebooks", ylabel="score (% of the points)", ylim=(-5, 105))
    return _figure(fig, "submissions and scores per notebook")


def figure_stuck(report: dict) -> Picture:
    """The exercises that stopped most students."""
    from matplotlib.figure import Figure
    top = [r for r in report["exercises"] if r["failed"]][:15][::-1]
    fig = Figure(figsize=(9, 0.3 * len(top) + 1), layout="constrained")
    ax = fig.subplots()
    ax.barh([f"{r['assignment']} / {r['exercise']}" for r in top], [r["failed"] for r in top], color=FAIL)
    ax.set(title="Exercises by students stopped (submitted, not passed)", xlabel="students")
    ax.tick_params(axis="y", labelsize=8)
    return _figure(fig, "exercises ranked by students stopped")


def figure_class(report: dict) -> Picture:
    """Every student (a row, weakest on top) across the notebooks: score, or grey when missing."""
    import numpy as np
    from matplotlib.colors import ListedColormap
    from matplotlib.figure import Figure
    order = report["assignments"]
    grid: dict[str, list[float]] = defaultdict(lambda: [np.nan] * len(order))
    for row in report["students"]:
        grid[row["student"]][order.index(row["assignment"])] = np.nan if row["percent"] is None else row["percent"]
    values = np.array(sorted(grid.values(), key=lambda r: np.nan_to_num(r).mean())) if grid else np.zeros((0, 0))
    fig = Figure(figsize=(6, min(8, 1.5 + 0.02 * len(values))), layout="constrained")
    ax = fig.subplots()
    cmap = ListedColormap(["#c0504d", "#e8a33d", "#f2dc5d", "#9bc26b", "#4c8c4a"]).with_extremes(bad=GONE)
    image = ax.imshow(np.ma.masked_invalid(values), aspect="auto", cmap=cmap, vmin=0, vmax=100,
                      interpolation="nearest")
    ax.set_xticks(range(len(order)), [_short(a) for a in order])
    ax.set_yticks([])
    ax.set(title="The class, weakest average on top (grey: missing)", ylabel=f"{len(values)} students")
    fig.colorbar(image, ax=ax, label="score (%)")
    return _figure(fig, "every student's scores across the notebooks")


def _mistake(label: str, named: bool) -> str:
    return _e(label) if named else f'<span class="unnamed">{_e(label)} (no named mistake)</span>'


def section_glance(report: dict) -> str:
    """Monday morning in four lines."""
    stuck = [r for r in report["exercises"] if r["failed"]][:3]
    named = sorted((m for m in report["mistakes"] if m["named"]), key=lambda m: -m["students_count"])[:3]
    lines = [f"{len(report['at_risk'])} of {report['students_total']} students at risk "
             '(<a href="#at-risk">the list and the rule</a>).']
    if stuck:
        lines.append("Stopped most students: " + "; ".join(
            f'{_e(r["assignment"])} / {_e(r["exercise"])} ({r["failed"]} of {r["submitted"]})' for r in stuck) + ".")
    if named:
        lines.append("Most common mistakes: " + "; ".join(
            f'{_e(m["mistake"])} ({_e(m["exercise"])}, {m["students_count"]} students)' for m in named) + ".")
    return "<h2>At a glance</h2><ul>" + "".join(f"<li>{line}</li>" for line in lines) + "</ul>"


def section_risk(report: dict, anchors: dict[str, str]) -> str:
    rows = [[f'<a href="#{anchors[r["student"]]}">{_e(r["student"])}</a>', _num(r["submitted"]), _num(r["missing"]),
             _num(r["average_percent"], "%"), _e(r["reasons"])] + ([_num(r["late"])] if "late" in r else [])
            for r in report["at_risk"]]
    header = ["student", "submitted", "missing", "average", "why"] + (["late"] if report["with_late"] else [])
    return (f'<h2 id="at-risk">Students at risk ({len(rows)})</h2><p class="rule">{_e(report["rule"])}</p>'
            + (_table(header, rows, {1, 2, 3, 5}) if rows else "<p>No student meets the rule.</p>"))


def section_notebooks(report: dict) -> str:
    late = report["with_late"]
    rows = [[_e(n["assignment"]), _num(n["submitted"]), _num(n["missing"]), _num(n["not_graded"]),
             _num(n["flagged"]), _num(n["mean_percent"], "%"), _num(n["median_percent"], "%"),
             _num(n["full_marks"]), _num(n["zero"])] + ([_num(n["late"])] if late else []) for n in report["notebooks"]]
    header = ["notebook", "submitted", "missing", "not graded", "flagged", "mean", "median", "full marks",
              "zero"] + (["late"] if late else [])
    return ('<h2 id="notebooks">Notebooks</h2><p>Of the class of '
            f'{report["students_total"]} students in the gradebook. "Not graded": malformed, or the grader failed '
            'on it (scored 0). "Flagged": the recheck disagreed with the notebook kernel (see the feedback page).</p>'
            + _table(header, rows, set(range(1, len(header)))))


def section_bands(report: dict) -> str:
    by_nb = defaultdict(dict)
    for row in report["score_distribution"]:
        by_nb[row["assignment"]][row["band"]] = row["students"]
    bands = [row["band"] for row in report["score_distribution"][:11]]
    rows = [[_e(a)] + [_num(counts[b]) for b in bands] for a, counts in by_nb.items()]
    return ("<h3>Score distribution (students per band of the score, submitted notebooks only)</h3>"
            + _table(["notebook", *bands], rows, set(range(1, len(bands) + 1))))


def section_stuck(report: dict) -> str:
    rows = [[_num(r["rank"]), _e(r["assignment"]), _e(r["exercise"]), _num(r["submitted"]), _num(r["failed"]),
             _num(r["pass_rate"], "%"), (f'{_e(r["top_mistake"])} <span class="who">({r["top_mistake_students"]})'
                                         '</span>') if r["top_mistake"] else ""]
            for r in report["exercises"][:TOP_ROWS] if r["failed"]]
    return ('<h2 id="stuck">Where the class is stuck</h2><p>Exercises ranked by how many students they stopped: '
            'students who submitted the notebook and did not get the exercise\'s full points. '
            f'The first {TOP_ROWS} are shown; exercises.csv has every exercise.</p>'
            + _table(["rank", "notebook", "exercise", "submitted", "stopped", "pass rate", "most common mistake"],
                     rows, {0, 3, 4, 5}))


WHO_INLINE = 20    # students listed inline; more go behind a "show" toggle


def _who(students: list[str]) -> str:
    names = _e(", ".join(students))
    if len(students) <= WHO_INLINE:
        return f'<span class="who">{names}</span>'
    return f'<details><summary class="who">show {len(students)}</summary><span class="who">{names}</span></details>'


def section_mistakes(report: dict) -> str:
    parts = ['<h2 id="mistakes">Mistakes per exercise</h2><p>For every exercise that stopped someone, the mistakes '
             "the check named (the named bug of each failing check call; a student counts once per mistake, and "
             "may have made more than one), how many students made each, and who. A failure no known bug explains "
             "is shown by what the check said, in grey.</p>"]
    by_ex = defaultdict(list)
    for m in report["mistakes"]:
        by_ex[m["assignment"], m["exercise"]].append(m)
    for r in sorted(report["exercises"], key=lambda r: (report["assignments"].index(r["assignment"]), r["rank"])):
        found = by_ex.get((r["assignment"], r["exercise"]))
        if not found:
            continue
        rows = [[_num(m["students_count"]), _mistake(m["mistake"], m["named"])
                 + (f' <span class="who">(worded {m["wordings"]} ways)</span>' if m["wordings"] > 1 else ""),
                 _who(m["students"])] for m in found]
        parts.append(f'<h3>{_e(r["assignment"])} / {_e(r["exercise"])}: {r["failed"]} of {r["submitted"]} '
                     f'stopped</h3>' + _table(["students", "mistake", "who"], rows, {0}))
    return "".join(parts)


STUDENTS_INTRO = ('<h2 id="students">Students</h2><p>Each student\'s path through the notebooks, in course order: '
                  "the score in percent per notebook (— where missing); open a student for the exercises they did "
                  "not pass and the mistake named.</p>")


def section_students(report: dict, anchors: dict[str, str]) -> str:
    named = {(m["assignment"], m["exercise"], m["mistake"]): m["named"] for m in report["mistakes"]}
    by_student = defaultdict(list)
    for row in report["students"]:
        by_student[row["student"]].append(row)
    late = report["with_late"]
    risky = {r["student"] for r in report["at_risk"]}
    parts = []
    for student, rows in by_student.items():
        lines = []
        for r in rows:
            status = (f'<span class="missing">{_e(r["status"])}</span>' if r["status"] != "graded" else "")
            score = "" if r["percent"] is None else f'{r["score"]:g} / {r["max_score"]:g} ({r["percent"]:g}%)'
            failed = "<br>".join(f'{_e(e)}: ' + "; ".join(_mistake(m, named.get((r["assignment"], e, m), True))
                                                          for m in ms) for e, ms in r["failed"].items())
            lines.append([_e(r["assignment"]), score, status, failed]
                         + ([_e(r["submitted_at"]), _e(r["late_by"])] if late else []))
        done = [r["percent"] for r in rows if r["percent"] is not None]
        path = " ".join("  —" if r["percent"] is None else f'{r["percent"]:3.0f}' for r in rows)
        summary = (f'<code>{path}</code> {_e(student)}: {len(done)} of {len(rows)} submitted'
                   + (f', {sum(done) / len(done):.0f}% on average over those' if done else "")
                   + (' <span class="missing">(at risk)</span>' if student in risky else ""))
        header = ["notebook", "score", "status", "not passed"] + (["submitted at", "late by"] if late else [])
        parts.append(f'<details id="{anchors[student]}"><summary>{summary}</summary>{_table(header, lines)}</details>')
    return "".join(parts)


def render(report: dict, gradebook_label: str = "") -> str:
    """The page. Sections of text are sanitized one by one; figures go in between."""
    anchors = {s: f"student-{i}" for i, s in enumerate(dict.fromkeys(r["student"] for r in report["students"]))}
    where = f" from the gradebook {_e(gradebook_label)}" if gradebook_label else ""
    head = (f'<h1>Class report</h1><p class="private">{_e(INSTRUCTOR_ONLY)}</p>'
            f'<p>Made {_e(report["generated_at"])}{where}: {report["students_total"]} students, notebooks '
            f'{_e(", ".join(report["assignments"]) or "none")}. The same tables are in the CSV and JSON files '
            'next to this page.</p><p><a href="#notebooks">Notebooks</a> · '
            '<a href="#stuck">Where the class is stuck</a> · <a href="#mistakes">Mistakes</a> · '
            '<a href="#at-risk">At risk</a> · <a href="#students">Students</a></p>')
    if not report["assignments"] or not report["students_total"]:
        parts = [head + "<p>The gradebook has no graded notebooks or no students yet: run "
                        "<code>python -m autograder grade</code> first.</p>"]
    else:
        parts = [head + section_glance(report) + section_notebooks(report), figure_notebooks(report),
                 section_bands(report), section_stuck(report)]
        if any(r["failed"] for r in report["exercises"]):
            parts.append(figure_stuck(report))
        parts += [section_mistakes(report) + section_risk(report, anchors) + STUDENTS_INTRO, figure_class(report),
                  section_students(report, anchors)]
    body = "".join(p if isinstance(p, Picture) else sanitized(p, REPORT_ATTRIBUTES) for p in parts)
    return (f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>Class report (instructor only)</title>'
            f"<style>{CSS}</style></head>\n<body>{body}</body></html>\n")
