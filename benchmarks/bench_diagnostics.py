"""Mutation benchmark of the checks' diagnoses.

Each mutation (benchmarks/mutations/nbNN.py) is one beginner mistake written
as a substitution on a solution answer cell. In-process, per mutation: the
notebook's setup cell and every other answer cell (solutions) run in a fresh
namespace, then the mutated cell, then the visible part of that exercise's
check cell. Outcome:

  missed         the check passed
  named          it failed and a diagnosis contains one of the mutation's
                 expected keywords (case-insensitive)
  located        not named, but the failure points at the learner's line
                 (CheckFailed.diagnosis.located) and that line is one the
                 mutation changed: a line of the mutated cell that holds part
                 of the replacement text (or of the appended `extra`); a
                 located pair of lines (a step missing between them, a value
                 used in another's place) counts when either is, or, for a
                 step missing between two lines at most SPAN apart, a line
                 between them
  located wrongly it points at a line the mutation did not change
  named wrongly  it failed with a "Likely bug:" line, but no diagnosis
                 contains an expected keyword: it blames a specific other bug
  unnamed        it failed without any diagnosis

The diagnosis is read from the failure's fields (CheckFailed.diagnosis: the
likely bugs, measured facts, the regime and, for a failure that stops the
check without an error of the learner's, its stop line), never from the
learner's own words: the located line's code, a line of theirs quoted in a
message, and the text of the error their code raised (a keyword that only
torch's error message holds, "matrix" in "self must be a matrix", names
nothing) are left out. A failure without fields falls back to the lines of
its message after the summary ("X failed N of M checks: ..."). Any located
line shown, whatever the verdict, must be one the mutation changed: a wrong
pointer is counted ("wrong line") and is a problem.

A mutation that passes its visible check is run against the whole check
cell, hidden tests included (what the grader runs): "hidden fails" counts
the missed ones the hidden tests catch, each a problem of its own (the
visible check let through a mistake the grade takes points for).

    python benchmarks/bench_diagnostics.py [--notebooks 01 03] [--set NAME] [-v] [--json]

--set NAME runs the further set benchmarks/mutations/NAME.py (e.g. heldout:
written without reading the checks) instead of the nbNN.py ones, and reports
it on its own, with the rates among its mistakes that are in none of the
other sets ("unlisted"). A new set is a new module there, no code change.

"right line" counts the failures, whatever their verdict, that show a
located line the mutation changed; "wrong line" those that show another
as the place of the bug (the line an error was raised at is shown as such,
not as the bug's place, and counts only when it is a changed line).

Rows in parentheses, e.g. "(learner-reports)", count again the mutations written
after the checks they test (Mutation.added), so the named rate on mistakes
the checks were not first tuned on is reported on its own.

Every diagnosis line a failure prints is classified by its evidence
(`claims`): a measured fact ("Measured:"), candidates ("Candidates:", the
record's own field: a measured line that offers causes as candidates; one
kept among the measured facts is a problem), or a cause printed as
certain ("Likely bug:"), which is read against the mistake actually made: it
names it (one of the mutation's expected words), it is a cause the mistake
is not (one of Mutation.untrue: another mistake with the same numbers), or
it says another cause (an extra finding, true or not: the `--claims` table
counts them per set, for reading). "untrue" counts the causes a mistake is
not; any is a problem.

A set may hold SAME, edits that are no mistake (the cell computes what the
solution computes, another way): each is run against its visible check, and
one the check fails is a false alarm, a problem of its own.

Exits non-zero when anything is missed or named wrongly, when an edit of SAME
fails its check, when a cause a mistake is not is printed as certain, or when
the named rate is below 85%.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import linecache
import re
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)] if str(ROOT) not in sys.path else []

import torch  # noqa: E402
from autograder.authoring.build import source_cells  # noqa: E402
from autograder.checks import CheckFailed  # noqa: E402
from autograder.checks.core import torch_settings_kept  # noqa: E402
from autograder.course import NOTEBOOK_SOURCES  # noqa: E402
from autograder.notebook_format import nbg, visible_part  # noqa: E402
from benchmarks.mutations import SETS, Mutation, same_edits, set_names  # noqa: E402

NAMED_RATE_REQUIRED = 0.85
SUMMARY = re.compile(r"^\S.* failed \d+ of \d+ checks")
VERDICTS = ("named", "located", "located wrongly", "named wrongly", "unnamed", "missed")
QUOTED = re.compile(r"\(line \d+: `[^`]*`\)")  # the learner's own line, as framework.failure.learner_place quotes it


@dataclass
class Outcome:
    notebook: str
    mutation: Mutation
    verdict: str  # one of VERDICTS
    message: str
    diagnosis: dict | None = None
    wrong_line: bool = False  # a located line was shown that the mutation did not change
    right_line: bool = False  # a located line was shown and the mutation changed it (whatever the verdict)
    hidden: bool | None = None  # missed only: True when the hidden tests fail it (None: not run)
    claims: list = None  # (evidence class, line) of each diagnosis line printed (CLAIMS)

    @property
    def last_line(self) -> str:
        lines = [l.strip() for l in self.message.strip().splitlines() if l.strip()]
        return lines[-1] if lines else "(check passed)"


CLAIMS = ("measured fact", "candidates", "cause: the mistake made", "cause: another", "cause: untrue")
OFFERS = re.compile(r"\bcandidates?\b *:", re.I)  # a line that offers causes ("candidates: ...") is no measured fact


def claims(mutation: Mutation, message: str | None, diagnosis: dict | None) -> list[tuple[str, str]]:
    """(evidence class, line) of every diagnosis line a failure printed
    (its measured facts and its causes printed as certain), see CLAIMS."""
    if message is None or (diagnosis or {}).get("crashed"):
        return []
    if diagnosis is not None:
        facts, bugs = list(diagnosis.get("facts") or []), list(diagnosis.get("likely_bugs") or [])
        offered = list(diagnosis.get("candidates") or [])
    else:
        lines = diagnosis_lines(message)

        def said(label: str) -> list[str]:
            return [l.removeprefix(label).strip() for l in lines if l.startswith(label)]
        facts, bugs, offered = said("Measured:"), said("Likely bug:"), said("Candidates:")
    found = [("measured fact", f) for f in facts] + [("candidates", c) for c in offered]
    for bug in bugs:
        text = QUOTED.sub("", bug).lower()
        if any(w.lower() in text for w in mutation.untrue):
            found.append(("cause: untrue", bug))
        elif any(k.lower() in text for k in mutation.expect):
            found.append(("cause: the mistake made", bug))
        else:
            found.append(("cause: another", bug))
    return found


def source_file(notebook: str) -> Path:
    (path,) = sorted(Path(NOTEBOOK_SOURCES).glob(f"{notebook}_*.py"))
    return path


def notebook_cells(notebook: str, hidden: bool = False):
    """(setup sources, {answer id: source}, {answer id: check source}), in
    notebook order; the check's visible part, or with `hidden` the whole
    cell (hidden tests included)."""
    cells = [c for c in source_cells(source_file(notebook)) if c.cell_type == "code"]
    setup, answers, checks = [], {}, {}
    for i, cell in enumerate(cells):
        meta = nbg(cell)
        if meta.get("locked") and not meta.get("grade"):
            setup.append(cell.source)
        elif meta.get("solution"):
            answers[meta["grade_id"]] = cell.source
            nxt = cells[i + 1] if i + 1 < len(cells) else None
            if nxt is not None and nbg(nxt).get("grade"):
                checks[meta["grade_id"]] = nxt.source if hidden else visible_part(nxt.source)
    return setup, answers, checks


def diagnosis_lines(message: str) -> list[str]:
    lines = [l.strip() for l in message.strip().splitlines() if l.strip()]
    if lines and SUMMARY.match(lines[0]):
        lines = lines[1:]
    return [l for l in lines if not l.startswith("Where:")]  # the learner's own code, not a diagnosis


def field_texts(diagnosis: dict) -> tuple[list[str], list[str]]:
    """(texts that may name the bug, the likely bugs) of a diagnosis's
    fields; the learner's own line, quoted where their code raised, and the
    stop line of a call that raised (the learner's error message) are left out."""
    texts = [*(diagnosis.get("likely_bugs") or []), *(diagnosis.get("facts") or []), *(diagnosis.get("candidates") or [])]
    regime = diagnosis.get("regime") or {}
    texts += [regime.get("text") or ""]
    if diagnosis.get("kind") != "raised":
        texts += [diagnosis.get("stop") or ""]
    return [QUOTED.sub("", t) for t in texts if t], list(diagnosis.get("likely_bugs") or [])


def classify(message: str | None, expect: tuple[str, ...], diagnosis: dict | None = None,
             changed: tuple[str, set[int]] | None = None) -> str:
    """The verdict (VERDICTS) of one failure; changed = (cell file, the
    line numbers the mutation changed there)."""
    if message is None:
        return "missed"
    if diagnosis is not None:
        texts, bugs = field_texts(diagnosis)
    else:
        texts = diagnosis_lines(message)
        bugs = [l for l in texts if l.startswith("Likely bug:")]
    if any(k.lower() in t.lower() for t in texts for k in expect):
        return "named"
    located = (diagnosis or {}).get("located")
    if located and changed is not None and (located.get("kind") != "raises" or on_changed_line(located, changed)):
        return "located" if on_changed_line(located, changed) else "located wrongly"
    if bugs:
        return "named wrongly"
    return "unnamed"


SPAN = 4  # the most lines a located pair "a step is missing between line a and line b" may span to count as a place


def on_changed_line(located: dict, changed: tuple[str, set[int]]) -> bool:
    """The located line, or the second line of a located pair, is a changed
    one; for a step missing between two lines (kinds "missing", "output"),
    a changed line between them counts too when they are at most SPAN apart."""
    if located.get("file") != changed[0]:
        return False
    line, also = located.get("line"), located.get("also")
    lines = {line, also}
    if also and located.get("kind") in ("missing", "output") and abs(also - line) <= SPAN:
        lines |= set(range(min(line, also), max(line, also) + 1))
    return bool(lines & changed[1])


def changed_lines(mutation: Mutation, source: str) -> set[int]:
    """The 1-based lines of the mutated cell that hold the replacement text
    (for an empty replacement, the line it was cut from) or `extra`."""
    start = source.index(mutation.old)
    mutated = mutation.apply(source)
    first = source.count("\n", 0, start) + 1
    lines = set(range(first, first + max(mutation.new.count("\n"), 0) + 1))
    if mutation.extra:
        begins = len(source.replace(mutation.old, mutation.new)) + 2  # apply() appends "\n\n" + extra
        lines |= set(range(mutated.count("\n", 0, begins) + 1, mutated.count("\n") + 2))
    return lines


def cell_file(notebook: str, gid: str) -> str:
    return f"<{notebook}:{gid}>"


def _compile(source: str, filename: str):
    """compile() with the source kept for tracebacks and located lines, as IPython keeps a cell's."""
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    return compile(source, filename, "exec")


def run_mutation(notebook: str, mutation: Mutation, cells, hidden_checks: dict | None = None) -> Outcome:
    setup, answers, checks = cells
    if mutation.cell not in answers:
        raise ValueError(f"notebook {notebook}: no answer cell {mutation.cell!r} (have {sorted(answers)})")
    if mutation.cell not in checks:
        raise ValueError(f"notebook {notebook}: answer cell {mutation.cell!r} has no check cell after it")
    changed = (cell_file(notebook, mutation.cell), changed_lines(mutation, answers[mutation.cell]))
    message, diagnosis = _run_check(notebook, mutation, setup, answers, checks[mutation.cell])
    verdict = classify(message, mutation.expect, diagnosis, changed)
    located = (diagnosis or {}).get("located")
    points = bool(located) and located.get("kind") != "raises"  # "it raises here" is a fact, not a claim of the bug's line
    hidden = None
    if verdict == "missed" and hidden_checks and mutation.cell in hidden_checks:
        hidden = _run_check(notebook, mutation, setup, answers, hidden_checks[mutation.cell])[0] is not None
    return Outcome(notebook, mutation, verdict, message or "", diagnosis,
                   wrong_line=points and not on_changed_line(located, changed),
                   right_line=bool(located) and on_changed_line(located, changed), hidden=hidden,
                   claims=claims(mutation, message, diagnosis))


def _run_check(notebook: str, mutation: Mutation, setup: list, answers: dict, check: str):
    """(the failure's message or None when the check passed, its diagnosis
    fields) of one check cell run on the mutated answers in a fresh namespace."""
    with torch_settings_kept():  # a mutation may leave grad mode off (a generate): each is measured alone
        return _run_check_here(notebook, mutation, setup, answers, check)


def _run_check_here(notebook: str, mutation: Mutation, setup: list, answers: dict, check: str):
    mutated = mutation.apply(answers[mutation.cell])
    ns: dict = {"__name__": f"bench_{notebook}"}
    message, diagnosis = None, None
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for src in setup:
            exec(_compile(src, f"<{notebook}:setup>"), ns)
        for gid, src in answers.items():  # notebook order: a later answer may use an earlier one
            code = mutated if gid == mutation.cell else src
            try:
                exec(_compile(code, cell_file(notebook, gid)), ns)
            except Exception as err:  # a mutation that breaks its own cell at definition time
                message = f"the cell {gid} raised {type(err).__name__}: {err}"
        if message is None:
            try:
                exec(_compile(check, f"<{notebook}:check {mutation.cell}>"), ns)
            except CheckFailed as err:
                message = str(err)
                diagnosis = err.diagnosis.to_dict() if err.diagnosis is not None else None
            except Exception as err:  # noqa: BLE001: the check itself broke on this answer: nothing was diagnosed
                message = f"THE CHECK ITSELF RAISED {type(err).__name__}: {err}"
                diagnosis = {"crashed": True}
    return message, diagnosis


def run(notebooks: list[str] | None = None, mutation_set: str = "default") -> list[Outcome]:
    import os
    os.environ.setdefault("TINYLM_DEVICE", "cpu")
    found = SETS[mutation_set]()
    outcomes = []
    for nb in sorted(found):
        if notebooks and nb not in notebooks:
            continue
        cells = notebook_cells(nb)
        hidden = notebook_cells(nb, hidden=True)[2]
        outcomes += [run_mutation(nb, m, cells, hidden) for m in found[nb]]
    return outcomes


def false_alarms(notebooks: list[str] | None = None, mutation_set: str = "default") -> tuple[int, list[tuple]]:
    """(how many of the set's SAME edits were run, (notebook, edit, the
    failure's message) of each one the visible check failed): an edit that
    computes what the solution computes must pass."""
    found, alarms, ran = same_edits(mutation_set), [], 0
    for nb in sorted(found):
        if notebooks and nb not in notebooks:
            continue
        setup, answers, checks = notebook_cells(nb)
        for edit in found[nb]:
            ran += 1
            message, _ = _run_check(nb, edit, setup, answers, checks[edit.cell])
            if message is not None:
                alarms.append((nb, edit, message))
    return ran, alarms


def alarm_line(nb: str, edit: Mutation, message: str) -> str:
    last = [l.strip() for l in message.strip().splitlines() if l.strip()][-1]
    return f"{nb} {edit.cell}: fails an edit that computes the same: {edit.why} -> {last}"


def listed(sets: list[str], exclude: str) -> set[tuple]:
    """(notebook, cell, old, new) of every mutation of the named sets but `exclude`."""
    return {(nb, m.cell, m.old, m.new) for name in sets if name != exclude for nb, ms in SETS[name]().items() for m in ms}


def _count(outcomes: list[Outcome]) -> dict[str, int]:
    row = dict.fromkeys(("mutations", "caught", *VERDICTS, "hidden fails", "right line", "wrong line", "untrue"), 0)
    for o in outcomes:
        row["untrue"] += sum(kind == "cause: untrue" for kind, _ in o.claims or [])
        row["mutations"] += 1
        row["caught"] += o.verdict != "missed"
        row[o.verdict] += 1
        row["hidden fails"] += bool(o.hidden)
        row["right line"] += o.right_line
        row["wrong line"] += o.wrong_line
    return row


def _rate(r: dict) -> float:
    return 100 * (r["named"] + r["located"]) / r["mutations"] if r["mutations"] else 0.0


def table(outcomes: list[Outcome], unlisted: set[tuple] | None = None) -> tuple[str, dict]:
    """The per-notebook table; rows in parentheses count a subset again:
    "(learner-reports)" the mutations written after the checks they test
    (Mutation.added), "(unlisted)" those in none of the other sets."""
    per_nb = {nb: _count([o for o in outcomes if o.notebook == nb]) for nb in sorted({o.notebook for o in outcomes})}
    total = _count(outcomes)
    added = {tag: _count([o for o in outcomes if o.mutation.added == tag])
             for tag in sorted({o.mutation.added for o in outcomes if o.mutation.added})}
    extra = [(f"({tag})", r) for tag, r in added.items()]
    if unlisted is not None:
        extra.append(("(unlisted)", _count([o for o in outcomes if (o.notebook, o.mutation.cell, o.mutation.old,
                                                                   o.mutation.new) in unlisted])))
    columns = ("mutations", *VERDICTS, "hidden fails", "right line", "wrong line", "untrue")
    header = f"{'notebook':<12}" + "".join(f"{c:>16}" for c in columns) + f"{'named+located':>15}"
    lines = [header]
    for name, r in [*per_nb.items(), ("total", total), *extra]:
        lines.append(f"{name:<12}" + "".join(f"{r[c]:>16}" for c in columns) + f"{_rate(r):>14.1f}%")
    figures = {"notebooks": per_nb, "total": total, "added": added}
    if unlisted is not None:
        figures["unlisted"] = dict(extra)["(unlisted)"]
    return "\n".join(lines), figures


def claim_counts(outcomes: list[Outcome]) -> dict[str, int]:
    """How many printed diagnosis lines of each evidence class (CLAIMS)."""
    counts = dict.fromkeys(CLAIMS, 0)
    for o in outcomes:
        for kind, _ in o.claims or []:
            counts[kind] += 1
    return counts


def problems(outcomes: list[Outcome]) -> list[str]:
    bad = [f"{o.notebook} {o.mutation.cell}: {o.verdict}: {o.mutation.why} -> {o.last_line}"
           for o in outcomes if o.verdict in ("missed", "named wrongly", "located wrongly")]
    bad += [f"{o.notebook} {o.mutation.cell}: passes its visible check, the hidden tests fail it: {o.mutation.why}"
            for o in outcomes if o.hidden]
    bad += [f"{o.notebook} {o.mutation.cell}: the check itself raised instead of failing: {o.mutation.why} -> "
            f"{o.last_line}" for o in outcomes if (o.diagnosis or {}).get("crashed")]
    bad += [f"{o.notebook} {o.mutation.cell}: shows a line the mistake did not change "
            f"({o.diagnosis['located']['line']}): {o.mutation.why}" for o in outcomes
            if o.wrong_line and o.verdict != "located wrongly"]
    bad += [f"{o.notebook} {o.mutation.cell}: prints as certain a cause it is not: {o.mutation.why} -> {line}"
            for o in outcomes for kind, line in o.claims or [] if kind == "cause: untrue"]
    bad += [f"{o.notebook} {o.mutation.cell}: prints candidates among its measured facts: {o.mutation.why} -> {line}"
            for o in outcomes for kind, line in o.claims or [] if kind == "measured fact" and OFFERS.search(line)]
    bad += [f"{o.notebook} {o.mutation.cell}: prints candidates as a likely bug: {o.mutation.why} -> {line}"
            for o in outcomes for kind, line in o.claims or [] if kind.startswith("cause") and OFFERS.search(line)]
    found = sum(o.verdict in ("named", "located") for o in outcomes)
    if outcomes and found / len(outcomes) < NAMED_RATE_REQUIRED:
        bad.append(f"named or located {found}/{len(outcomes)} = {found / len(outcomes):.1%} is below "
                   f"{NAMED_RATE_REQUIRED:.0%}")
    return bad


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--notebooks", nargs="*", help="notebook numbers, e.g. 01 03 (default: all)")
    p.add_argument("-v", "--verbose", action="store_true", help="each mutation's verdict and last message line")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument("--claims", action="store_true",
                   help="count the printed diagnosis lines by evidence, and list the causes other than the mistake made")
    p.add_argument("--set", dest="mutation_set", choices=set_names(), default="default",
                   help="which mistakes: the nbNN.py modules (default) or a further set in benchmarks/mutations")
    args = p.parse_args(argv)
    start = time.perf_counter()
    outcomes = run(args.notebooks, args.mutation_set)
    unlisted = None
    if args.mutation_set != "default":
        others = listed(set_names(), args.mutation_set)
        unlisted = {(o.notebook, o.mutation.cell, o.mutation.old, o.mutation.new) for o in outcomes} - others
    text, figures = table(outcomes, unlisted)
    same_run, alarms = false_alarms(args.notebooks, args.mutation_set)
    found = problems(outcomes) + [alarm_line(*a) for a in alarms]
    if args.verbose:
        for o in outcomes:
            where = (o.diagnosis or {}).get("located")
            shown = (f"\n    at line {where['line']}: {where['code']}" + (f" | line {where['also']}" if where.get("also") else "")
                     + f" [{where.get('kind')}]") if where else ""
            hidden = {True: " (the hidden tests fail it)", False: " (the hidden tests pass it too)"}.get(o.hidden, "")
            print(f"[{o.notebook} {o.mutation.cell}] {o.verdict:<15} {o.mutation.why}{hidden}\n    -> {o.last_line}{shown}")
        for nb, edit, message in alarms:
            print(f"[{nb} {edit.cell}] FALSE ALARM on an edit that computes the same: {edit.why}\n{message}")
        print()
    if args.claims:
        print("printed lines by evidence: " + ", ".join(f"{k} {n}" for k, n in claim_counts(outcomes).items()))
        for o in outcomes:
            for kind, line in o.claims or []:
                if kind in ("cause: another", "cause: untrue"):
                    print(f"  [{o.notebook} {o.mutation.cell}] {kind}: {o.mutation.why[:60]} -> {line[:160]}")
        print()
    if args.json:
        print(json.dumps(figures | {"set": args.mutation_set, "problems": found,
                                    "same_edits": {"run": same_run, "failed": len(alarms)},
                                    "claims": claim_counts(outcomes)}, indent=1))
    else:
        print(f"mutation set: {args.mutation_set}")
        print(text)
        print(f"({len(outcomes)} mutations in {time.perf_counter() - start:.1f} s)")
        if same_run:
            print(f"edits that compute the same (SAME): {same_run}, passed {same_run - len(alarms)}")
        for line in found:
            print(f"PROBLEM: {line}")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
