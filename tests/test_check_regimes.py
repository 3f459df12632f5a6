"""Issue 25: the checks as a learner meets them. Each class of missed or
misnamed mistake has its tests here: the mistakes of benchmarks/mutations
marked added="issue-25" must be named (they were missed or named wrongly
before), plus the properties behind them: notebook 05's modules checked in
the cached and grouped regimes, later notebooks' comparisons traced back to
the notebook that owns a bug, the inputs-unchanged and dtype-kept
contracts, measured facts that are true, bounded generation checks, and the
exercise texts naming what the exercise needs."""
from __future__ import annotations

import contextlib
import io
import re
import sys
from pathlib import Path

import pytest
import torch

import tinylm
from autograder.checks import CheckFailed, check_causal_mask
from autograder.checks.contracts import call_keeping_inputs
from autograder.checks.core import Check
from autograder.course import NOTEBOOK_SOURCES

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_diagnostics  # noqa: E402
from benchmarks.mutations import all_mutations  # noqa: E402

ADDED = [(nb, m) for nb, ms in sorted(all_mutations().items()) for m in ms if m.added == "issue-25"]


def test_the_issue_25_mistakes_exist_in_every_class():
    whys = " | ".join(m.why for _, m in ADDED)
    for mistake in ("start_pos", "n_heads heads", "layer index", "cache to the blocks", "in place",
                    "does not cast", "plain Python list", "not the values", "after the top-k/top-p", "never reached"):
        assert mistake in whys, mistake


@pytest.mark.parametrize("notebook, mutation", ADDED, ids=[f"{nb}-{m.cell}-{m.why[:40]}" for nb, m in ADDED])
def test_an_issue_25_mistake_is_named(notebook, mutation):
    outcome = bench_diagnostics.run_mutation(notebook, mutation, bench_diagnostics.notebook_cells(notebook))
    assert outcome.verdict == "named", f"{outcome.verdict}: {outcome.last_line}"


# -- contracts -------------------------------------------------------------------
def test_an_input_changed_in_place_fails_its_row_and_names_the_argument():
    chk = Check("centre", expects="a tensor")
    x = torch.arange(6.0).view(2, 3)
    call_keeping_inputs(chk, lambda t: t.sub_(t.mean(-1, keepdim=True)), x, names=("x",))
    row = next(r for r in chk.rows if r.name == "inputs unchanged")
    assert not row.ok and "`x` in place" in chk.diagnoses[0]


def test_an_untouched_input_passes_the_row():
    chk = Check("centre", expects="a tensor")
    call_keeping_inputs(chk, lambda t: t - t.mean(-1, keepdim=True), torch.arange(6.0).view(2, 3), names=("x",))
    assert chk.passed and [r.name for r in chk.rows] == ["inputs unchanged"]


# -- measured facts are true --------------------------------------------------------
def test_a_float_mask_of_the_right_pattern_gets_no_false_diagonal():
    def float_mask(q_len, kv_len):
        return torch.ones(q_len, kv_len).tril(diagonal=kv_len - q_len)
    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(CheckFailed) as err:
        check_causal_mask(float_mask)
    assert "tril(diagonal=" not in str(err.value)
    assert "bool" in str(err.value)


# -- later notebooks' comparisons name the owner ----------------------------------------
def _solution_cell(notebook: str, gid: str) -> str:
    return bench_diagnostics.notebook_cells(notebook)[1][gid]


def _save_decoder(folder: Path, source: str) -> None:
    """Save notebook 05's decoder cell as if its check had passed (a learner's mylm/ from before this check)."""
    from autograder.checks import answers
    ns = {"__name__": "__main__"}
    setup, cells, _ = bench_diagnostics.notebook_cells("05")
    with contextlib.redirect_stdout(io.StringIO()):
        for src in setup:
            exec(src, ns)
        exec(cells["swiglu"], ns)
        exec(source, ns)
    answers.save_cell(folder, "nb05_swiglu", cells["swiglu"], ["swiglu"], ns)  # a correct swiglu of the learner's
    answers.save_cell(folder, "nb05_swiglu", source, ["Transformer", "Attention", "Block"], ns)


@pytest.fixture
def mylm(tmp_path, monkeypatch):
    monkeypatch.setenv("TINYLM_MYLM", str(tmp_path / "mylm"))
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    return tmp_path / "mylm"


def _cached_check(model, ids):
    from autograder.checks.learner_model import cached_matches_full, check_model_agrees
    with contextlib.redirect_stdout(io.StringIO()) as out:
        check_model_agrees("cached logits equal the full recompute", lambda m: cached_matches_full(m, ids), model)
    return out.getvalue()


def test_a_saved_decoder_that_ignores_start_pos_is_traced_back_to_notebook_05(mylm):
    from autograder.checks.learner_model import learner_model
    good = _solution_cell("05", "Transformer")
    bad = good.replace("q, k = apply_rope(q, cos, sin, start_pos), apply_rope(k, cos, sin, start_pos)",
                       "q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)")
    assert bad != good
    _save_decoder(mylm, bad)
    cfg = tinylm.ModelConfig(d_model=32, n_layers=2, n_heads=4, max_seq_len=32)
    with contextlib.redirect_stdout(io.StringIO()):
        model = learner_model(cfg).eval()
    assert type(model).__module__ == "mylm.nb05_swiglu"
    ids = torch.randint(256, (2, 9), generator=torch.Generator().manual_seed(0))
    with pytest.raises(CheckFailed) as err:
        _cached_check(model, ids)
    message = str(err.value)
    assert "notebook-05 decoder" in message and "Fix it in 05" in message
    assert "start_pos" in message  # notebook 05's own check, run again on the saved answer, names the bug


def test_a_correct_saved_decoder_passes_the_cached_comparison(mylm):
    from autograder.checks.learner_model import learner_model
    _save_decoder(mylm, _solution_cell("05", "Transformer"))
    cfg = tinylm.ModelConfig(d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, max_seq_len=32)
    with contextlib.redirect_stdout(io.StringIO()):
        model = learner_model(cfg).eval()
    ids = torch.randint(256, (1, 7), generator=torch.Generator().manual_seed(1))
    assert "cached logits equal the full recompute: True" in _cached_check(model, ids)


def _sources() -> dict[str, str]:
    return {p.stem[:2]: p.read_text() for p in sorted(Path(NOTEBOOK_SOURCES).glob("[0-9][0-9]_*.py"))}


def test_no_comparison_of_a_learners_answer_is_a_bare_print():
    """A cell that compares the learner's code with tinylm must be a check (require_agreement or
    check_model_agrees), so a False names its owner instead of scrolling past."""
    bare = re.compile(r"^print\(.*\byours?\b.*(torch\.allclose|torch\.equal)\(", re.M)
    for nb in ("02", "03", "04", "05", "06"):
        source = _sources()[nb]
        assert not bare.findall(source), nb
        assert "require_agreement(" in source or "check_model_agrees(" in source, nb


# -- the 06 timing cells --------------------------------------------------------------
def test_the_06_timing_cells_are_sized_by_work_and_say_when_they_are_too_noisy():
    source = _sources()["06"]
    assert source.count("too noisy on this machine to tell") == 2
    assert "positions = [16, 64, 128, 256]" in source and "1023" not in source
    assert "max_seq_len=48" in source  # 16-token prompt + 32 new tokens, whatever the machine


# -- texts ---------------------------------------------------------------------------------
def test_notebook_05_names_every_config_field_its_answer_cell_reads():
    source = _sources()["05"]
    cell = _solution_cell("05", "Transformer")
    answer = "".join(re.findall(r"### BEGIN SOLUTION(.*?)### END SOLUTION", cell, re.S))  # what the learner writes
    assert answer
    text = source[:source.index("class Attention(nn.Module):")]
    for field in sorted(set(re.findall(r"config\.(\w+)", answer))):
        assert f"config.{field}" in text, field


def test_04_says_the_new_key_is_rotated_too_and_03_says_where_the_mask_lives():
    assert "only the new query is rotated" not in _sources()["04"]
    assert "new key" in _sources()["04"]
    assert ".to(q.device)" in _sources()["03"].split("## 4. Attention with the mask")[1].split("# %%")[0]
