"""The pretrained model in the course: the learner's decoder holds
SmolLM2's weights and computes what tinylm's does; the notebooks' real-model
cells run on without the weights and while grading.

The tests that need the weights skip where tinylm.pretrained.why_unavailable()
says they are missing, and are slow (135 M parameters on a CPU)."""
from __future__ import annotations

import contextlib
import io
import re

import pytest
import torch

import tinylm
from tinylm import pretrained
from autograder import course
from autograder.checks.learner_model import learner_cache
from autograder.checks.real_model import greedy_ids, load_into, pretrained_learner_model
from autograder.notebook_format import read, setup_cells

from ..helpers import run_solution_notebook

REAL_MODEL_NOTEBOOKS = ["05_swiglu", "06_kv_cache", "08_sampling", "10_perplexity"]
needs_weights = pytest.mark.skipif(pretrained.why_unavailable() is not None,
                                   reason=str(pretrained.why_unavailable()))


def test_weights_that_do_not_fit_name_the_exercise():
    config = tinylm.ModelConfig(d_model=32, n_layers=2, n_heads=4, max_seq_len=16)
    state = tinylm.Transformer(config).state_dict()
    renamed = {k.replace("attn.q_proj", "attn.query"): v for k, v in state.items()}
    with pytest.raises(ValueError, match=r"no parameter named blocks\.0\.attn\.query\.weight.*notebook 05's `Transformer`"):
        load_into(tinylm.Transformer(config), renamed)
    wider = tinylm.Transformer(tinylm.ModelConfig(d_model=32, n_layers=2, n_heads=4, d_ff=128, max_seq_len=16))
    with pytest.raises(ValueError, match=r"shapes differ: blocks\.0\.mlp\.gate_proj\.weight: yours \(128, 32\)"):
        load_into(wider, state)


def _real_model_cells(assignment: str) -> list[str]:
    """The setup cell and every cell that uses the real weights (they mention tinylm.pretrained or `why`)."""
    nb = read(course.source_notebook(assignment))
    real = [c.source for c in nb.cells if c.cell_type == "code" and re.search(r"\bpretrained\b|\bif not why\b", c.source)]
    assert real, f"{assignment} has no real-model cell"
    return [c.source for c in setup_cells(nb)] + real


@pytest.mark.parametrize("grading", [False, True], ids=["weights missing", "grading"])
@pytest.mark.parametrize("assignment", REAL_MODEL_NOTEBOOKS)
def test_real_model_cells_run_on_without_the_weights_and_while_grading(assignment, grading, monkeypatch):
    monkeypatch.setenv("TINYLM_PRETRAINED_OFF", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    if grading:
        monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    else:
        monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    out, err = io.StringIO(), io.StringIO()
    ns = {"__name__": "__main__"}
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        for source in _real_model_cells(assignment):
            exec(compile(source, f"<{assignment} cell>", "exec"), ns)
    printed = out.getvalue()
    expected = "real weights: skipped while grading" if grading else "real weights: TINYLM_PRETRAINED_OFF is set"
    assert expected in printed and printed.count("real weights:") == 1, printed
    assert "pip install" in printed or grading
    assert err.getvalue() == "", err.getvalue()


@pytest.mark.slow
@needs_weights
def test_the_learners_decoder_with_the_solutions_answers_computes_what_tinylm_does(course_dir, monkeypatch):
    for assignment in ("01_embeddings", "02_rmsnorm", "03_causal_attention", "04_rope", "06_kv_cache", "07_gqa",
                       "05_swiglu"):
        run_solution_notebook(assignment, course_dir, monkeypatch)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        mine, tokenizer = pretrained_learner_model(max_seq_len=256)
    assert type(mine).__module__ == "mylm.nb05_swiglu", out.getvalue()
    for part in ("attention: yours (03)", "RoPE: yours (04)", "GQA: yours (07)", "KV cache: yours (06)"):
        assert part in out.getvalue(), out.getvalue()
    reference, _ = pretrained.load_pretrained(max_seq_len=256)
    prompt = tokenizer.chat_ids("What is the capital of France?")
    ids = torch.tensor([prompt])
    with torch.no_grad():
        torch.testing.assert_close(mine(ids), reference(ids), atol=1e-4, rtol=1e-4)
        cache = learner_cache(mine, batch_size=1)  # the learner's cache_update, 30 layers of 3 kv heads
        assert type(cache).__name__ == "LearnerCache"
        mine(ids[:, :-3], cache=cache)
        steps = torch.cat([mine(ids[:, t:t + 1], cache=cache) for t in range(ids.shape[1] - 3, ids.shape[1])], dim=1)
        torch.testing.assert_close(steps, reference(ids)[:, -3:], atol=1e-4, rtol=1e-4)
    want = tinylm.generate(reference, ids, 12, temperature=0)[0, len(prompt):].tolist()
    assert greedy_ids(mine, prompt, 12) == want
