"""The class report: `python -m autograder report`.

Synthetic classes (autograder/specimens/synthetic_class.py) go into a real
nbgrader gradebook and result files; every count the report gives is
computed again here, straight from the synthetic class's ground truth
(who submitted what, which exercise failed with which mistake), never from
the report's own code. One end-to-end test grades a small real batch and
finds the mistake a wrong submission made in the report."""
from __future__ import annotations

import csv
import html
import json
import statistics
import time
from collections import defaultdict
from html.parser import HTMLParser

import pytest

from autograder import course, specimens
from autograder.specimens import synthetic_class as sc
from autograder.grading import gradebook
from autograder.grading.publish import report
from ..batches import course_data, shared_batch

STRUCTURE = {"alpha": {"check_embed": 2.0, "check_rms_norm": 3.0, "check_plain": 1.0},
             "beta": {"check_causal_attention": 3.0, "check_apply_rope": 2.0},
             "gamma": {"check_lm_loss": 2.0, "check_other": 2.0}}


def known_class() -> sc.SyntheticClass:
    klass = sc.random_class(40, STRUCTURE, seed=7)
    klass.work["nobody"] = {}                                          # in the gradebook, submitted nothing
    klass.work["perfect"] = {a: dict.fromkeys(ex) for a, ex in STRUCTURE.items()}
    return klass


def write(klass: sc.SyntheticClass, url: str, data) -> None:
    with course_data(data):
        sc.write_class(klass, url, data)


def make_report(url: str, data, **kwargs) -> dict:
    with course_data(data):
        return report.build_report(report.load(url, **{k: v for k, v in kwargs.items() if k != "rule"}),
                                   kwargs.get("rule", report.RiskRule()))


@pytest.fixture(scope="module")
def known(tmp_path_factory):
    data = tmp_path_factory.mktemp("report-known")
    klass, url = known_class(), f"sqlite:///{data / 'gradebook.db'}"
    write(klass, url, data)
    return klass, url, data


# -- the expected report, from the ground truth alone -----------------------

def expected_label(exercise: str, mistake: str) -> str:
    if mistake == sc.NOT_ATTEMPTED:
        return report.NOT_ATTEMPTED
    if mistake == sc.UNNAMED:  # what the synthetic check said, first sentence
        return f"{exercise.removeprefix('check_')} failed 2 of 5 checks: float32; float64."
    return mistake


def percent(klass, student, a) -> float:
    answers = klass.work[student][a]
    return 100 * sum(p for e, p in klass.structure[a].items() if answers[e] is None) / sum(klass.structure[a].values())


def test_mistakes_in_real_recheck_messages():
    """Messages as a real grading run of notebook 01 wrote them (a stub,
    a .detach() bug, a transposed weight that raises, an unnamed failure)."""
    stub = ("embed: embed is not implemented yet (it raised NotImplementedError). Replace the `raise "
            "NotImplementedError()` line with your code; it should return a (batch, seq, d_model) = (2, 5, 7) tensor "
            "of rows of weight.\n\nembed: embed is not implemented yet (it raised NotImplementedError). Replace the "
            "`raise NotImplementedError()` line with your code; it should return a (batch, seq, d_model) = (3, 7, 4) "
            "tensor of rows of weight.")
    detach = ("embed failed 1 of 5 checks: gradient reaches weight.\n  Likely bug: the result does not depend on "
              "weight through autograd (a .detach(), .data or a new tensor built from .tolist() cuts the gradient)"
              "\n\nembed failed 1 of 4 checks: gradient reaches weight.\n  Likely bug: the result does not depend on "
              "weight through autograd (a .detach(), .data or a new tensor built from .tolist() cuts the gradient)")
    raised = ("tied_logits: tied_logits raised RuntimeError: mat1 and mat2 shapes cannot be multiplied (6x5 and 9x5)"
              "\n  Called with a torch.float32 tensor of shape (2, 3, 5), a torch.float32 tensor of shape (9, 5); "
              "it should return (batch, seq, vocab) logits, here (2, 3, 9).\n  Likely bug: transposed weight: "
              "multiplied by weight instead of weight.T (the embedding is [vocab, d_model], the head needs "
              "[d_model, vocab])")
    two = "f failed 1 of 3 checks: a.\n  Likely bug: the second best\n  Likely bug: the most useful"
    assert report.mistakes_in(stub) == [report.Mistake(report.NOT_ATTEMPTED, True)]
    assert [m.label for m in report.mistakes_in(detach)] == [
        "the result does not depend on weight through autograd (a .detach(), .data or a new tensor built from "
        ".tolist() cuts the gradient)"]
    assert [m.label for m in report.mistakes_in(raised)] == [
        "transposed weight: multiplied by weight instead of weight.T (the embedding is [vocab, d_model], "
        "the head needs [d_model, vocab])"]
    assert report.mistakes_in(two) == [report.Mistake("the most useful", True)], "the check prints its best last"
    unnamed = report.mistakes_in("f: f raised RuntimeError: shapes cannot be multiplied (6x5 and 9x5) (line 3: `x @ w`)"
                                 "\n\nf: f raised RuntimeError: shapes cannot be multiplied (6x4 and 17x4) (line 3: `x @ w`)")
    assert unnamed == [report.Mistake("f: f raised RuntimeError: shapes cannot be multiplied (6x5 and 9x5) "
                                      "(line 3: `x @ w`)", False)], "the same failure on other shapes counts once"
    assert report.mistakes_in("") == []


def test_rewording_the_messages_changes_no_report(known, tmp_path):
    """The report reads the diagnosis fields the recheck stores, not the
    message text: the same class with every message reworded (no "Likely
    bug:" line left, other sentences) gives the same tables."""
    klass, url, data = known
    other = tmp_path / "reworded"
    other_url = f"sqlite:///{other / 'gradebook.db'}"
    other.mkdir()

    def reworded(exercise: str, mistake: str) -> str:
        return f"Your {exercise} is not right yet. Probable cause => {mistake[::-1]}\n\n(see the notebook)"
    with course_data(other):
        sc.write_class(klass, other_url, other, message=reworded)
    first, second = make_report(url, data), make_report(other_url, other)
    for table in ("notebooks", "exercises", "mistakes", "students", "at_risk"):
        assert first[table] == second[table], table
    assert any(m["named"] for m in second["mistakes"]), "the named mistakes are read from the fields"


def test_a_diagnosis_without_a_named_bug_is_described_by_its_fields():
    regime = {"exercise": "rms_norm", "kind": "failed", "rows": ["a", "regime: float64"],
              "failed_rows": ["regime: float64"], "regime": {"name": "float64", "text": "right in float32, wrong in "
                                                                                        "float64"}, "likely_bugs": []}
    raised = {"exercise": "embed", "kind": "raised", "error": "RuntimeError", "likely_bugs": [],
              "stop": "embed raised RuntimeError inside your embed (line 3: `x.view(-1)`): view size is not compatible"}
    stub = {"exercise": "embed", "kind": "not implemented", "likely_bugs": []}
    named = {"exercise": "f", "likely_bugs": ["the second best", "the most useful"], "regime": regime["regime"]}
    assert report.mistakes_from([regime]) == [report.Mistake("rms_norm: right in float32, wrong in float64", False)]
    assert report.mistakes_from([raised, raised]) == [report.Mistake("embed raised RuntimeError", False)]
    assert report.mistakes_from([stub]) == [report.Mistake(report.NOT_ATTEMPTED, True)]
    assert report.mistakes_from([named]) == [report.Mistake("the most useful", True)]


def test_counts_of_a_known_class_are_exact(known):
    klass, url, data = known
    got = make_report(url, data)
    students = sorted(klass.work)
    assert got["students_total"] == len(students)
    assert got["assignments"] == list(STRUCTURE)

    notebooks = {n["assignment"]: n for n in got["notebooks"]}
    for a, exercises in STRUCTURE.items():
        subs = [s for s in students if a in klass.work[s]]
        percents = [percent(klass, s, a) for s in subs]
        n = notebooks[a]
        assert (n["submitted"], n["missing"], n["max_score"]) == (len(subs), len(students) - len(subs),
                                                                 sum(exercises.values()))
        assert n["full_marks"] == sum(p == 100 for p in percents) and n["zero"] == sum(p == 0 for p in percents)
        assert n["mean_percent"] == round(statistics.fmean(percents), 1)
        assert n["median_percent"] == round(statistics.median(percents), 1)
        bands = {b["band"]: b["students"] for b in got["score_distribution"] if b["assignment"] == a}
        assert sum(bands.values()) == len(subs)
        assert bands["100%"] == n["full_marks"] and bands["0-9%"] == sum(p < 10 for p in percents)

    failed = {(a, e): [s for s in students if a in klass.work[s] and klass.work[s][a][e] is not None]
              for a, ex in STRUCTURE.items() for e in ex}
    rows = {(r["assignment"], r["exercise"]): r for r in got["exercises"]}
    for (a, e), who in failed.items():
        submitted = sum(a in klass.work[s] for s in students)
        assert (rows[a, e]["failed"], rows[a, e]["passed"]) == (len(who), submitted - len(who)), (a, e)
    order = [key for key in failed]
    ranked = sorted(order, key=lambda k: (-len(failed[k]), order.index(k)))
    assert [(r["assignment"], r["exercise"]) for r in got["exercises"]] == ranked
    assert [r["rank"] for r in got["exercises"]] == list(range(1, len(ranked) + 1))

    expected = defaultdict(list)
    for (a, e), who in failed.items():
        for s in who:
            expected[a, e, expected_label(e, klass.work[s][a][e])].append(s)
    assert {(m["assignment"], m["exercise"], m["mistake"]): m["students"] for m in got["mistakes"]} == expected
    assert all(m["students_count"] == len(m["students"]) for m in got["mistakes"])
    unnamed = {expected_label(e, sc.UNNAMED) for (a, e), who in failed.items() for s in who
               if klass.work[s][a][e] == sc.UNNAMED}
    assert unnamed and {m["mistake"] for m in got["mistakes"] if not m["named"]} == unnamed

    due = [a for a in STRUCTURE if any(a in klass.work[s] for s in students)]
    risky = {}
    for s in students:
        missing = [a for a in due if a not in klass.work[s]]
        average = statistics.fmean(percent(klass, s, a) if a in klass.work[s] else 0.0 for a in due)
        if len(missing) >= 2 or average < 50:
            risky[s] = (len(missing), round(average, 1))
    assert {r["student"]: (r["missing"], r["average_percent"]) for r in got["at_risk"]} == risky
    assert "nobody" in risky and "perfect" not in risky
    assert "missing at least 2 of the 3 notebooks" in got["rule"] and "below 50%" in got["rule"]

    path = {(r["student"], r["assignment"]): r for r in got["students"]}
    assert len(path) == len(students) * len(STRUCTURE)
    for s in students:
        for a in STRUCTURE:
            r = path[s, a]
            if a not in klass.work[s]:
                assert (r["status"], r["percent"], r["failed"]) == ("missing", None, {})
            else:
                assert r["status"] == "graded" and r["percent"] == round(percent(klass, s, a), 1)
                assert r["failed"] == {e: [expected_label(e, m)] for e, m in klass.work[s][a].items() if m}


def test_a_stricter_rule_picks_more(known):
    klass, url, data = known
    loose = make_report(url, data)
    strict = make_report(url, data, rule=report.RiskRule(missing=1, below_percent=80))
    assert {r["student"] for r in loose["at_risk"]} < {r["student"] for r in strict["at_risk"]}
    assert "missing at least 1 of the 3" in strict["rule"] and "below 80%" in strict["rule"]


def test_files_and_the_command(known, tmp_path):
    """The CLI writes the HTML page and the same tables as CSV and JSON."""
    from autograder.__main__ import main
    klass, url, data = known
    out = tmp_path / "out"
    with course_data(data):
        assert main(["report", "--db-url", url, "--out", str(out), "--at-risk-missing", "1"]) == 0
    saved = json.loads((out / "class_report.json").read_text())
    assert saved["assignments"] == list(STRUCTURE) and "missing at least 1 of" in saved["rule"]
    assert make_report(url, data, assignments=["alpha", "gamma"])["assignments"] == ["alpha", "gamma"]
    for table, header in report.COLUMNS.items():
        rows = list(csv.DictReader(open(out / f"{table}.csv", encoding="utf-8")))
        assert list(rows[0]) == header if rows else True
        assert len(rows) == len(saved[table]), table
        assert all(set(r) == set(header) for r in saved[table]), table
    mistakes = list(csv.DictReader(open(out / "mistakes.csv", encoding="utf-8")))
    assert [int(m["students_count"]) for m in mistakes] == [m["students_count"] for m in saved["mistakes"]]
    assert [m["students"].split() for m in mistakes] == [m["students"] for m in saved["mistakes"]]
    page = (out / "class_report.html").read_text()
    from autograder.grading.publish.report_html import INSTRUCTOR_ONLY
    assert page.index(html.escape(INSTRUCTOR_ONLY)) < page.index("At a glance"), "the warning comes first"
    assert html.escape(saved["rule"]) in page
    top = saved["exercises"][0]
    assert html.escape(top["top_mistake"]) in page


class Tags(HTMLParser):
    """Every element and attribute of a page, and its text."""

    def __init__(self):
        super().__init__()
        self.tags, self.attributes, self.text = [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attributes += [name for name, _ in attrs]

    def handle_data(self, data):
        self.text.append(data)


def test_learner_strings_are_escaped(tmp_path):
    evil_id = "<script>alert(1)"
    quoted = '"><b onmouseover=alert(2)>x'
    formula = "=HYPERLINK(3)"
    evil_mistake = "<img src=x onerror=alert(4)> </table></script><script>alert(5)</script>"
    structure = {"alpha": {"check_x": 1.0}}
    klass = sc.SyntheticClass(structure, {evil_id: {"alpha": {"check_x": evil_mistake}},
                                          quoted: {"alpha": {"check_x": evil_mistake}},
                                          formula: {}})
    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    write(klass, url, tmp_path)
    got = make_report(url, tmp_path)
    assert got["mistakes"][0]["mistake"] == evil_mistake and got["mistakes"][0]["students"] == sorted([evil_id, quoted])
    with course_data(tmp_path):
        report.write_report(got, tmp_path / "out", url)
    page = (tmp_path / "out" / "class_report.html").read_text()
    parsed = Tags()
    parsed.feed(page)
    assert "script" not in parsed.tags and "b" not in parsed.tags and parsed.tags.count("table") == page.count("<table>")
    assert not [a for a in parsed.attributes if a.startswith("on")]
    text = "".join(parsed.text)
    assert evil_id in text and quoted in text and evil_mistake in text, "shown, as text"
    rows = list(csv.reader(open(tmp_path / "out" / "at_risk.csv", encoding="utf-8")))
    assert ["'" + formula] in [r[:1] for r in rows], "a spreadsheet must not run a student id as a formula"


def test_an_empty_class(tmp_path):
    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    got = make_report(url, tmp_path)
    assert (got["students_total"], got["assignments"], got["notebooks"], got["at_risk"]) == (0, [], [], [])
    with course_data(tmp_path):
        paths = report.write_report(got, tmp_path / "out", url)
    assert "no graded notebooks or no students" in paths[0].read_text()
    for table, header in report.COLUMNS.items():
        assert list(csv.reader(open(tmp_path / "out" / f"{table}.csv"))) == [header]
    # students and notebooks, nothing submitted yet: nobody is due, so nobody is at risk
    write(sc.SyntheticClass({"alpha": {"check_x": 1.0}}, {"ann": {}, "bob": {}}), url, tmp_path)
    got = make_report(url, tmp_path)
    assert [(n["submitted"], n["missing"], n["mean_percent"]) for n in got["notebooks"]] == [(0, 2, None)]
    assert got["at_risk"] == [] and "0 notebooks" in got["rule"]
    with course_data(tmp_path):
        report.write_report(got, tmp_path / "out2", url)


def test_late_columns_from_a_lateness_lookup(known):
    """What deadlines.py will give: an optional submitted_at / late_by per submission."""
    klass, url, data = known
    late_ones = {(s, a) for s in sorted(klass.work)[::3] for a in klass.work[s]}

    def late(student, assignment):
        return {"submitted_at": "2026-12-01T10:00:00+00:00",
                "late_by": "2 h" if (student, assignment) in late_ones else ""}
    got = make_report(url, data, late=late)
    assert got["with_late"]
    for n in got["notebooks"]:
        assert n["late"] == sum(a == n["assignment"] for _, a in late_ones)
    rows = {(r["student"], r["assignment"]): r for r in got["students"]}
    assert all(rows[key]["late_by"] == "2 h" for key in late_ones)
    assert all(set(r) == set(report.columns(t, True)) for t in report.COLUMNS for r in got[t])
    assert not make_report(url, data)["with_late"]


@pytest.mark.slow
def test_a_class_of_500(tmp_path):
    klass = sc.random_class(500)
    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    write(klass, url, tmp_path)
    began = time.perf_counter()
    got = make_report(url, tmp_path)
    with course_data(tmp_path):
        report.write_report(got, tmp_path / "out", url)
    seconds = time.perf_counter() - began
    assert got["students_total"] == 500
    assert sum(n["submitted"] for n in got["notebooks"]) == sum(len(w) for w in klass.work.values())
    failures = sum(m is not None for w in klass.work.values() for answers in w.values() for m in answers.values())
    assert sum(r["failed"] for r in got["exercises"]) == failures
    assert seconds < 60, f"the report of 500 students took {seconds:.1f} s"


def test_postgres_gives_the_sqlite_report(pg_database, known, tmp_path):
    klass, sqlite_url, data = known
    write(klass, pg_database, data)  # the same result files: the gradebook is the only difference
    strip = ("generated_at",)
    from_pg = {k: v for k, v in make_report(pg_database, data).items() if k not in strip}
    from_sqlite = {k: v for k, v in make_report(sqlite_url, data).items() if k not in strip}
    assert from_pg == from_sqlite


# -- end to end: a real graded batch ------------------------------------------

A = "01_embeddings"
TRANSPOSED = ("tied_logits", "x @ weight.T", "x @ weight")


def _grade_small_batch(data) -> dict:
    from autograder.grading.batch import Options, grade_all
    specimens.submit(data, "ann", A, specimens.honest(A))
    specimens.submit(data, "bob", A, specimens.notebook(A))
    specimens.submit(data, "cat", A, specimens.with_bugs(A, [TRANSPOSED]))
    return {"results": grade_all(Options(assignments=[A], workers=2, progress=False))}


@pytest.mark.grader
@pytest.mark.slow
@pytest.mark.skipif(A not in course.assignments(), reason="notebook 01 is not built")
def test_a_graded_batch_names_the_mistake(tmp_path_factory, tmp_path):
    batch = shared_batch(tmp_path_factory, "grader_report", _grade_small_batch)
    data = batch["data"]
    url = f"sqlite:///{data / 'gradebook.db'}"
    got = make_report(url, data)
    with course_data(data):
        report.write_report(got, tmp_path, gradebook.db_url())
    mistakes = {(m["exercise"], m["mistake"]): m["students"] for m in got["mistakes"]}
    transposed = [k for k in mistakes if k[0] == "check_tied_logits" and k[1].startswith("transposed weight")]
    assert transposed and mistakes[transposed[0]] == ["cat"], mistakes
    assert mistakes["check_tied_logits", report.NOT_ATTEMPTED] == ["bob"]
    assert {k for k, who in mistakes.items() if "ann" in who} == set(), "the solution made no mistake"
    cat = {r["assignment"]: r for r in got["students"] if r["student"] == "cat"}[A]
    assert list(cat["failed"]) == ["check_tied_logits"]
    page = html.unescape((tmp_path / "class_report.html").read_text())
    assert transposed[0][1] in page
