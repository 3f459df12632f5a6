"""Two-sided proofs through the whole grader, for every notebook
in solutions/: the solution answers get full marks, the untouched release
notebook gets zero, and seed bugs of the notebooks' bug lists
(tests/checks/test_seed_bugs_*.py) lose exactly their exercise's points, with HTML
feedback that names the bug and shows no hidden test source.

To keep `make test` within its time, each exercise's first seed bug is
graded there; `make test-long` grades every seed bug (about five times as
many submissions), as TINYLM_GRADER_ALL_BUGS=1 makes this batch do. Bugs
share a submission when their exercises are apart:
neither answer calls the other, directly or through another answer, nor
does either check (dependents()), so each exercise's check sees only its
own bug; a bug in an exercise another bugged one calls would confound that
one's diagnosis (03: a causal_mask bug hides causal_attention's own) and
goes in another submission. Every seed bug is also proven against the
visible checks in-process by test_seed_bugs_*.py."""
from __future__ import annotations

import html
import importlib.util
import os
import re
from pathlib import Path

import pytest

from autograder import course, specimens
from autograder.authoring.gates import exercises
from autograder.grading.recheck.run import KERNEL_ONLY
from autograder.notebook_format import HIDDEN_BLOCK, nbg, read

from .batches import shared_batch

pytestmark = [pytest.mark.grader, pytest.mark.slow]
ASSIGNMENTS = course.assignments()
# Where the bug lists of the check tests live.
SEED_BUG_LISTS = Path(__file__).resolve().parents[1] / "checks"


def seed_bugs() -> list[tuple]:
    """(assignment, answer grade id, old, new, phrase) from every bug list."""
    bugs = []
    for path in sorted(SEED_BUG_LISTS.glob("test_seed_bugs_*.py")):
        spec = importlib.util.spec_from_file_location(f"_bugs_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        bugs += [b for b in getattr(module, "BUGS", []) if b[0] in ASSIGNMENTS]
    return bugs


def bug_submissions(everything: bool = False) -> dict[str, tuple[str, list[tuple]]]:
    """{student: (assignment, bugs)}: the seed bugs (each exercise's first,
    or all with `everything` or TINYLM_GRADER_ALL_BUGS) packed into as few
    submissions per notebook as keep every member's exercise apart from the
    others'."""
    everything = everything or bool(os.environ.get("TINYLM_GRADER_ALL_BUGS"))
    groups: dict[str, tuple[str, list[tuple]]] = {}
    seen = set()
    for bug in seed_bugs():
        first = (bug[0], bug[1]) not in seen
        seen.add((bug[0], bug[1]))
        if not (first or everything):
            continue
        n = 0
        while True:
            _, members = groups.setdefault(f"bugs_{bug[0][:2]}_{n}", (bug[0], []))
            if all(apart(bug[0], m[1], bug[1]) for m in members):
                members.append(bug)
                break
            n += 1
    return groups


def apart(assignment: str, one: str, other: str) -> bool:
    """Two exercises whose bugs can share a submission: different, and neither uses the other."""
    return one != other and one not in dependents(assignment, other) and other not in dependents(assignment, one)


def dependents(assignment: str, grade_id: str) -> set[str]:
    """Answer grade ids whose answer or check uses a function that grade_id's
    answer defines, directly or through another answer."""
    exs = {ex.grade_id: ex for ex in exercises(read(course.source_notebook(assignment)))}
    sources = {g: ex.answer.source + "\n" + (ex.check.source if ex.check is not None else "") for g, ex in exs.items()}
    found, frontier = set(), [grade_id]
    while frontier:
        names = exs[frontier.pop()].defines
        for other, source in sources.items():
            if other not in found and other != grade_id and any(re.search(rf"\b{re.escape(n)}\b", source) for n in names):
                found.add(other)
                frontier.append(other)
    return found


def test_dependents_follow_calls_between_answers():
    assert "attention_step" in dependents("06_kv_cache", "cache_update")
    assert dependents("05_swiglu", "swiglu") == {"Transformer"}  # pre_norm_block takes any mlp
    assert dependents("05_swiglu", "swiglu_hidden") == set()


def check_of(assignment: str) -> dict[str, str]:
    """answer grade id -> grade id of its test cell."""
    return {ex.grade_id: nbg(ex.check)["grade_id"] for ex in exercises(read(course.source_notebook(assignment)))}


def _grade_proofs(data: Path, every_bug: bool = False) -> dict:
    """The solutions, the untouched releases and the seed bugs graded in one batch; every_bug: the seed bugs
    alone, all of them."""
    from autograder.grading.publish.feedback import write_feedback
    from autograder.grading.batch import Options, grade_all

    for a in ASSIGNMENTS if not every_bug else ():
        specimens.submit(data, f"solution_{a[:2]}", a, specimens.honest(a))
        specimens.submit(data, f"release_{a[:2]}", a, specimens.notebook(a))
    bugs = bug_submissions(every_bug)
    for student, (a, members) in bugs.items():
        specimens.submit(data, student, a, specimens.with_bugs(a, [(g, old, new) for _, g, old, new, _ in members]))
    results = grade_all(Options(assignments=ASSIGNMENTS, workers=2, progress=False))
    write_feedback(results)
    return {"results": {f"{r['student']}/{r['assignment']}": r for r in results}, "bugs": bugs}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    return shared_batch(tmp_path_factory, "grader_proofs", _grade_proofs)


@pytest.fixture(scope="module")
def graded_every_bug(tmp_path_factory):
    return shared_batch(tmp_path_factory, "grader_proofs_every_bug", lambda data: _grade_proofs(data, every_bug=True))


def _feedback(data: Path, student: str, assignment: str) -> str:
    return html.unescape((data / "feedback" / student / assignment / f"{assignment}.html").read_text())


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_solution_gets_full_marks(graded, assignment):
    r = graded["results"][f"solution_{assignment[:2]}/{assignment}"]
    assert r["score"] == r["max_score"] > 0 and not r["flags"], r
    assert all(c["recheck"] == "pass" for c in r["cells"].values()), "every exercise is rechecked, and passes"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_untouched_release_gets_zero(graded, assignment):
    r = graded["results"][f"release_{assignment[:2]}/{assignment}"]
    assert r["score"] == 0 and r["max_score"] > 0, r
    rechecked = {cell: c for cell, c in r["cells"].items() if cell not in KERNEL_ONLY}
    assert rechecked and all(c["recheck"] == "fail" for c in rechecked.values()), "the recheck must agree: every stub fails"
    # and each failure says why as a diagnosis of its own kind, not as a traceback
    said = {cell: {d.get("kind") for d in c["diagnoses"]} for cell, c in rechecked.items()}
    assert all(kinds == {"not implemented"} for kinds in said.values()), said


def test_every_seed_bug_is_graded():
    assert seed_bugs(), "no bug list found in tests/checks/test_seed_bugs_*.py"
    covered = {(b[0], b[1]) for b in seed_bugs()}
    for a in ASSIGNMENTS:
        missing = set(check_of(a)) - {g for x, g in covered if x == a}
        assert not missing, f"{a}: exercises without a seed bug: {missing}"


def test_each_seed_bug_loses_its_exercise_and_is_named(graded):
    _each_bug_loses_its_exercise_and_is_named(graded)


@pytest.mark.long
def test_every_seed_bug_loses_its_exercise_and_is_named(graded_every_bug):
    """Every seed bug, not each exercise's first alone: the recheck names them too, where the kernel's check
    measured the cause with a hook or the global random state (a final norm that never ran, a generator not
    used, eval mode left on)."""
    _each_bug_loses_its_exercise_and_is_named(graded_every_bug)
    _no_hidden_test_source_in_the_feedback(graded_every_bug)


def _each_bug_loses_its_exercise_and_is_named(graded) -> None:
    assert {a for a, _ in graded["bugs"].values()} == set(ASSIGNMENTS), "every notebook's seed bugs go through the grader"
    for student, (a, members) in graded["bugs"].items():
        r = graded["results"][f"{student}/{a}"]
        checks = check_of(a)
        broken = {checks[g] for _, g, *_ in members}
        may_break = {checks[d] for _, g, *_ in members for d in dependents(a, g)}
        for cell, c in r["cells"].items():
            if cell in broken:
                assert c["score"] == 0, f"{student}: {cell} kept its points despite the bug"
            elif cell not in may_break:
                assert c["score"] == c["max_score"], f"{student}: untouched exercise {cell} lost points: {c}"
        text = _feedback(graded["data"], student, a)
        for *_, phrase in members:
            assert phrase in text, f"{student}: feedback does not name the bug ({phrase!r})"


def test_feedback_shows_no_hidden_test_source(graded):
    _no_hidden_test_source_in_the_feedback(graded)


def _no_hidden_test_source_in_the_feedback(graded) -> None:
    for key in graded["results"]:
        student, a = key.split("/")
        text = _feedback(graded["data"], student, a)
        hidden = [l.strip() for c in read(course.source_notebook(a)).cells for block in HIDDEN_BLOCK.findall(c.source)
                  for l in block.splitlines() if len(l.strip()) >= 12]
        assert hidden, f"{a}: no hidden test lines found to look for"
        leaked = [l for l in hidden if l in text]
        assert not leaked, f"{student}/{a}: hidden test source in the feedback: {leaked[:3]}"
        assert not re.search(r"BEGIN HIDDEN TESTS", text)
