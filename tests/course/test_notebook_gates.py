"""Gates on the course notebooks. Each one fails loudly and none
can pass vacuously: every test first asserts that it found what it checks.

Fast gates read JSON only; the ones that start kernels are marked slow."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from autograder import checks, course
from autograder.authoring.build import new_notebook, source_cells
from autograder.authoring.gates import (
    NUMBERS_BLOCK, exercises, is_tied, leaked_lines, output_text, readable_functions, solution_lines,
    solutions_in_plain_sight, stated_run_time, untied_document_numbers, untied_notebook_numbers,
)
from autograder.notebook_format import MARKERS, is_answer, is_check, nbg, read

from ..helpers import ACCOUNTING_CHECK_MODULE
from .learner_run import learner_run_of, same_checked_outputs

ACCOUNTING_CHECKS = {n for n in dir(checks) if n.startswith("check_") and getattr(checks, n).__module__ == ACCOUNTING_CHECK_MODULE}
# Exercises on a bug that shipped in public projects (a real-world edge of the notebook's component): at most one per
# notebook, on top of the spine's exercises.
SHIPPED_BUG_CHECKS = {"check_train_step_accumulated"}
PART_1 = ("01_embeddings", "02_rmsnorm", "03_causal_attention", "04_rope", "05_swiglu")
ASSIGNMENTS = course.assignments()


def test_part_one_notebooks_exist():
    missing = [a for a in PART_1 if a not in ASSIGNMENTS]
    assert not missing, f"source notebooks missing from solutions/: {missing}"
    for a in ASSIGNMENTS:
        assert course.release_notebook(a).is_file(), f"{a}: no release notebook; run `python -m autograder release`"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_solution_matches_its_source_file(assignment):
    """solutions/ is built from autograder/authoring/notebook_src/: their cells agree
    (the source read by jupytext, as `python -m autograder build` reads it)."""
    built = new_notebook(source_cells(course.NOTEBOOK_SOURCES / f"{assignment}.py"))
    committed = read(course.source_notebook(assignment))
    assert len(built.cells) == len(committed.cells), f"{assignment}: rebuild with `python -m autograder build {assignment[:2]}`"
    for b, c in zip(built.cells, committed.cells):
        assert (b.cell_type, b.source, nbg(b)) == (c.cell_type, c.source, nbg(c)), \
            f"{assignment}: cell {c.get('id')} differs from its source; rebuild with `python -m autograder build {assignment[:2]}`"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_solutions_are_committed_executed_without_errors(assignment):
    nb = read(course.source_notebook(assignment))
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code
    not_run = [c.id for c in code if c.execution_count is None]
    assert not not_run, f"{assignment}: cells never executed: {not_run}"
    for c in code:
        for out in c.outputs:
            assert out.output_type != "error", f"{assignment}: cell {c.id} has an error output"
            assert not (out.output_type == "stream" and out.name == "stderr"), \
                f"{assignment}: cell {c.id} wrote to stderr, which nbgrader scores as a failure:\n{out.text[:500]}"


def test_release_equals_a_fresh_generation():
    """notebooks/ is exactly what nbgrader generates from solutions/ now."""
    assert ASSIGNMENTS
    problems = course.release_diff()
    assert not problems, "\n".join(problems + ["run `python -m autograder release`"])


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_no_solution_or_hidden_test_reaches_release(assignment):
    source, release = read(course.source_notebook(assignment)), read(course.release_notebook(assignment))
    secret = solution_lines(source)
    assert len(secret) >= len(exercises(source)), f"{assignment}: found too few solution lines to check"
    text = json.dumps(release)
    assert not [m for m in MARKERS if m in text], f"{assignment}: nbgrader markers left in the release notebook"
    leaked = leaked_lines(source, release)
    assert not leaked, f"{assignment}: solution or hidden-test lines in notebooks/: {leaked}"
    for cell in release.cells:
        assert not cell.get("outputs"), f"{assignment}: release cell {cell.id} has outputs"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_no_code_outside_the_answers_passes_a_check(assignment):
    """A pitfall printed as code one line away from the answer is the answer
    (notebook 06's old `buggy_step` with its default flags was): every function
    a learner can read outside the answer cells must fail every check it could
    be handed to."""
    release = read(course.release_notebook(assignment))
    assert any(is_answer(c) for c in release.cells)
    found = solutions_in_plain_sight(assignment, release)
    assert not found, "solutions readable outside the answer cells (move them to autograder/checks/pitfalls.py and " \
                      "show them with show_check(check, pitfalls.NAME)):\n" + "\n".join(found)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_grade_ids_unique_and_cells_well_formed(assignment):
    nb = read(course.source_notebook(assignment))
    ids = [nbg(c)["grade_id"] for c in nb.cells if nbg(c)]
    assert ids and len(ids) == len(set(ids)), f"{assignment}: duplicate grade ids: {sorted(i for i in ids if ids.count(i) > 1)}"
    cell_ids = [c.id for c in nb.cells]
    assert len(cell_ids) == len(set(cell_ids)), f"{assignment}: duplicate cell ids"
    for c in nb.cells:
        if is_check(c):
            assert nbg(c).get("locked") and nbg(c).get("points", 0) > 0, f"{assignment}: {nbg(c)['grade_id']} must be locked with points"
            assert "### BEGIN HIDDEN TESTS" in c.source, f"{assignment}: {nbg(c)['grade_id']} has no hidden tests"


def test_grade_ids_unique_across_the_course():
    """Exercise names are unique course-wide, so grade exports need no prefix juggling."""
    seen = {}
    for a in ASSIGNMENTS:
        for c in read(course.source_notebook(a)).cells:
            gid = nbg(c).get("grade_id")
            if gid and gid != "setup":
                assert gid not in seen, f"grade id {gid} in both {seen[gid]} and {a}"
                seen[gid] = a
    assert seen


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_answer_is_followed_by_its_check(assignment):
    nb = read(course.source_notebook(assignment))
    exs = exercises(nb)
    # 2-4 exercises on the component, and at most one accounting exercise (what it costs, autograder/checks/accounting.py)
    # and at most one on a bug that shipped (SHIPPED_BUG_CHECKS)
    accounting = [ex for ex in exs if ex.check is not None and ex.check.source.split("(")[0] in ACCOUNTING_CHECKS]
    shipped = [ex for ex in exs if ex.check is not None and ex.check.source.split("(")[0] in SHIPPED_BUG_CHECKS]
    spine = len(exs) - len(accounting) - len(shipped)
    assert 2 <= spine <= 4 and len(accounting) <= 1 and len(shipped) <= 1, \
        f"{assignment}: {spine} exercises, {len(accounting)} of accounting and {len(shipped)} on a shipped bug; the " \
        "spine asks for 2-4, and at most one of each of the others"
    for ex in exs:
        assert ex.check is not None, f"{assignment}: answer cell {ex.grade_id} is not followed by a graded check cell"
        names = ex.defines
        assert names, f"{assignment}: answer cell {ex.grade_id} defines no function or class"
        first = ex.check.source.splitlines()[0]
        assert first.startswith("check_") and any(f"({n}" in first or f", {n}" in first for n in names), \
            f"{assignment}: the check after {ex.grade_id} must call a check_ function with {names}: {first!r}"
    n_checks = sum(is_check(c) for c in nb.cells)
    assert n_checks == len(exs), f"{assignment}: {n_checks} graded cells for {len(exs)} answers"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_some_outputs_are_compared_by_nbval(assignment):
    """At least one deterministic cell per notebook has its output checked, and
    none of the checked outputs is an image or a timing."""
    nb = read(course.source_notebook(assignment))
    marked = [c for c in nb.cells if c.cell_type == "code" and c.source.startswith("# NBVAL_CHECK_OUTPUT")]
    assert marked, f"{assignment}: no cell marked # NBVAL_CHECK_OUTPUT"
    for c in marked:
        assert c.outputs and all(o.output_type == "stream" for o in c.outputs), f"{assignment}: {c.id} output is not plain text"
        assert " ms" not in "".join(o.text for o in c.outputs), f"{assignment}: {c.id} prints a timing"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_run_time_is_stated(assignment):
    # 09 trains for a minute, then on Shakespeare, then runs its experiment: the one longer notebook.
    limit = 210 if assignment == "09_training" else 120
    assert 0 < stated_run_time(read(course.source_notebook(assignment))) <= limit


def _validator(socket_dir: Path, **kw):
    """nbgrader's Validator, its kernels on Unix sockets in socket_dir: on
    TCP a port picked free can be taken by another process on a shared
    machine before the kernel binds it ("Address already in use")."""
    from nbgrader.validator import Validator

    from autograder.selfcheck import kernel_transport_config

    cfg = kernel_transport_config(socket_dir)
    cfg.Execute.timeout = 300
    return Validator(config=cfg, **kw)


# nbgrader validate (the learner's Validate button) runs here on the first notebook, the solution and the
# untouched stubs: proof that it works with the course's configuration. That every solution passes every test
# cell, hidden ones included, and that every stub fails each with "not implemented yet", is proven for all ten
# notebooks through the grader (grading/test_grade_proofs.py), which executes the same cells; the browser tests
# press the Validate button itself.
VALIDATED = ASSIGNMENTS[:1]


@pytest.mark.slow
@pytest.mark.parametrize("assignment", VALIDATED)
def test_solutions_pass_nbgrader_validate(assignment, tmp_path):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    results = _validator(tmp_path).validate(str(course.source_notebook(assignment)))
    assert results == {}, f"{assignment}: solution fails validation:\n" + "\n".join(
        f.get("raw_error", "")[:800] for f in results.get("failed", []))


@pytest.mark.slow
@pytest.mark.parametrize("assignment", VALIDATED)
def test_untouched_release_fails_every_graded_cell(assignment, tmp_path):
    """A learner who submits the stubs scores zero: every test cell fails."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    release = course.release_notebook(assignment)
    graded = {c.source.strip() for c in read(release).cells if is_check(c)}
    assert graded
    failed = _validator(tmp_path, ignore_checksums=True).validate(str(release)).get("failed", [])
    assert {f["source"] for f in failed} == graded, f"{assignment}: some graded cells pass on the untouched stubs"
    # Equal sets mean `nbgrader validate --invert` finds no passing cell: a
    # graded cell either scores full marks (passed) or less (failed).
    for f in failed:  # and each failure says why in one line, not a bare traceback
        assert "not implemented yet" in f["raw_error"], f"{assignment}: unexpected failure:\n{f['raw_error'][:800]}"


@pytest.mark.slow
@pytest.mark.long
@pytest.mark.xdist_group("learner_run")
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_each_notebook_runs_reproduces_its_checked_outputs_and_keeps_its_stated_time(assignment, learner_run):
    """The learner's run on CPU (conftest.py: the release notebook, every
    answer filled in, full size): every cell runs, the # NBVAL_CHECK_OUTPUT
    cells print what the committed solution printed (what `make nbval`
    checks), and the whole run fits the promise."""
    same_checked_outputs(assignment, learner_run_of(learner_run, assignment))
    run = learner_run["runs"][assignment]
    # "About N s" is the time measured on a 2-core machine; twice that is a
    # regression (a heavy cell that forgot to shrink, a slow check). Compared
    # in CPU seconds of the kernel and its client (one thread each): wall time
    # on a machine shared with other jobs measures the other jobs (a fresh-clone
    # run beside four builds took 42 s of wall time for 02's 20 s).
    stated = stated_run_time(read(course.source_notebook(assignment)))
    assert run["cpu_s"] <= 2 * stated, (f"{assignment}: the run used {run['cpu_s']:.1f} s of CPU time "
                                        f"({run['wall_s']:.1f} s of wall time), the notebook promises about {stated} s")
    print(f"{assignment}: {run['cpu_s']:.1f} s CPU, {run['wall_s']:.1f} s wall (stated: about {stated} s)")


# -- the gates can fail: each detector is shown to fire on a planted defect --


def test_leak_detector_fires_on_a_planted_solution_line():
    source, release = read(course.source_notebook(PART_1[1])), read(course.release_notebook(PART_1[1]))
    assert not leaked_lines(source, release)
    answer = next(c for c in release.cells if is_answer(c))
    answer.source += "\n" + solution_lines(source)[0]
    assert leaked_lines(source, release)


def test_release_diff_fires_on_a_changed_byte(tmp_path):
    from autograder.course import _tree_diff

    a, b = tmp_path / "a" / "x", tmp_path / "b" / "x"
    a.mkdir(parents=True), b.mkdir(parents=True)
    (a / "n.ipynb").write_text("{}"), (b / "n.ipynb").write_text("{} ")
    assert _tree_diff(a.parent, b.parent)
    (b / "n.ipynb").write_text("{}")
    assert not _tree_diff(a.parent, b.parent)
    (b / "extra.txt").write_text("")
    assert _tree_diff(a.parent, b.parent)


def test_exercise_pairing_fires_on_a_missing_check():
    nb = read(course.source_notebook(PART_1[0]))
    first = exercises(nb)[0]
    nb.cells.remove(first.check)
    assert exercises(nb)[0].check is None


# Notebook 06's former pitfall cell: with both flags False it is exercise 2's answer.
OLD_BUGGY_STEP = """\
def buggy_step(x, attn, cos, sin, past_k, past_v, restart_positions=False, is_causal=False):
    B, T = x.shape[:2]
    split = lambda t, n: t.view(B, T, n, attn.head_dim).transpose(1, 2)  # (B, T, n*hd) -> (B, n, T, hd)
    start = 0 if restart_positions else past_k.shape[2]
    q = tinylm.apply_rope(split(attn.q_proj(x), attn.n_heads), cos, sin, start)
    k = tinylm.apply_rope(split(attn.k_proj(x), attn.n_kv_heads), cos, sin, start)
    k_all, v_all = cache_update(past_k, past_v, k, split(attn.v_proj(x), attn.n_kv_heads))
    if is_causal:
        y = F.scaled_dot_product_attention(q, k_all, v_all, is_causal=True)
    else:
        y = F.scaled_dot_product_attention(q, k_all, v_all, attn_mask=tinylm.causal_mask(T, k_all.shape[2]))
    return attn.o_proj(y.transpose(1, 2).flatten(2)), k_all, v_all  # (B, nh, T, hd) -> (B, T, d)

show_check(check_attention_step, lambda *args: buggy_step(*args, restart_positions=True))
"""


def _plant(nb, source):
    import nbformat

    nb.cells.append(nbformat.v4.new_code_cell(source, id="planted"))
    return nb


def test_readable_solution_gate_fires_on_the_old_buggy_step():
    release = read(course.release_notebook("06_kv_cache"))
    assert not solutions_in_plain_sight("06_kv_cache", release)
    found = solutions_in_plain_sight("06_kv_cache", _plant(release, OLD_BUGGY_STEP))
    assert [f for f in found if "buggy_step (cell planted) passes check_attention_step" in f], found
    # the lambda in the same cell (restart_positions=True) is a real bug: it is not reported
    assert not [f for f in found if "lambda" in f], found


def test_readable_solution_gate_fires_on_a_copied_answer_and_a_lambda():
    source = read(course.source_notebook("09_training"))
    answer = next(ex.answer.source for ex in exercises(source) if ex.grade_id == "lr_schedule")
    copied = answer.replace("def lr_schedule(", "def schedule_for_the_plot(")
    release = _plant(read(course.release_notebook("09_training")), copied)
    assert any("schedule_for_the_plot" in f for f in solutions_in_plain_sight("09_training", release))
    lam = "show_check(check_lm_loss, lambda logits, targets: F.cross_entropy(logits.flatten(0, 1), targets.flatten()))"
    release = _plant(read(course.release_notebook("09_training")), lam)
    assert any("lambda" in f and "check_lm_loss" in f for f in solutions_in_plain_sight("09_training", release))
    named = "loss_fn = lambda logits, targets: F.cross_entropy(logits.flatten(0, 1), targets.flatten())"
    release = _plant(read(course.release_notebook("09_training")), named)
    assert any("lambda assigned" in f and "check_lm_loss" in f for f in solutions_in_plain_sight("09_training", release))
    assert len(readable_functions(release)) > len(readable_functions(read(course.release_notebook("09_training"))))


# -- numbers in prose come from executed outputs --

DOCUMENTS = [course.ROOT / "README.md", *sorted((course.ROOT / "docs").glob("*.md"))]


def _outputs_of(name):
    return output_text(read(course.source_notebook(name)))


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_prose_numbers_in_a_notebook_come_from_its_outputs(assignment):
    """Decimals, step counts, nats, bits, seconds and percentages in the
    markdown are printed by the notebook's executed cells (or are its code's or
    preset's own values). After a rebuild that changes a result, this names
    every sentence that still quotes the old one."""
    nb = read(course.source_notebook(assignment))
    assert output_text(nb).strip(), f"{assignment}: no executed outputs to compare with"
    untied = untied_notebook_numbers(nb)
    assert not untied, f"{assignment}: numbers in the prose that no output shows:\n" + "\n".join(untied)


def test_numbers_blocks_in_readme_and_docs_come_from_the_notebooks():
    blocks = {doc.name: NUMBERS_BLOCK.findall(doc.read_text()) for doc in DOCUMENTS}
    assert blocks["README.md"] and blocks["benchmarks.md"], "the training results lost their numbers block"
    untied = [f"{doc.name}: {u}" for doc in DOCUMENTS for u in untied_document_numbers(doc.read_text(), _outputs_of)]
    assert not untied, "numbers that the executed notebooks do not show (rebuild, then copy them):\n" + "\n".join(untied)


def test_number_gates_fire_on_planted_numbers():
    import nbformat

    assert is_tied("0.26", {"0.259"}) and is_tied("1,200", {"1200"})
    assert not is_tied("0.27", {"0.259"}) and not is_tied("0.259", {"0.26"}) and not is_tied("1500", {"1200"})
    nb = read(course.source_notebook("09_training"))
    assert not untied_notebook_numbers(nb)
    nb.cells.append(nbformat.v4.new_markdown_cell("The run takes 1,500 steps and ends at 0.123 nats per byte."))
    assert len(untied_notebook_numbers(nb)) == 2
    block = "<!-- numbers from: 09_training -->In notebook 09 the loss reaches 0.123 nats/byte.<!-- /numbers -->"
    untied = untied_document_numbers(block, _outputs_of)
    assert len(untied) == 1 and "0.123" in untied[0], untied


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_pitfall_shown_fails_its_check(assignment):
    """A pitfall cell prints what the check says about a wrong function from
    autograder/checks/pitfalls.py; a 'wrong' function that passes would teach nothing."""
    import ast
    import contextlib
    import io

    from autograder.checks import pitfalls
    from autograder.checks.core import CheckFailed
    from autograder.authoring.gates import exercise_namespace

    nb = read(course.source_notebook(assignment))
    calls = [node for c in nb.cells if c.cell_type == "code" and "show_check" in c.source
             for node in ast.walk(ast.parse(c.source))
             if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "show_check"]
    shown = [call for call in calls if any(isinstance(a, ast.Attribute) and getattr(a.value, "id", None) == "pitfalls"
                                           for a in call.args)]
    assert len(shown) == len(calls) > 0, f"{assignment}: a pitfall is shown with code written in the notebook"
    ns = dict(exercise_namespace(assignment), pitfalls=pitfalls)
    for call in shown:
        check, *args = (eval(compile(ast.Expression(a), "<pitfall>", "eval"), ns) for a in call.args)
        with pytest.raises(CheckFailed), contextlib.redirect_stdout(io.StringIO()):
            check(*args)
