"""The learner's own model: answers.py saves each passing answer
cell into mylm/, learner_model builds the model from it. Answer cells are
executed here the way IPython does: compiled under a cell pseudo-file name
that linecache knows, in a namespace called __main__."""
from __future__ import annotations

import contextlib
import io
import re

import torch

import tinylm
from autograder import specimens
from autograder.checks import answers, check_rms_norm, show_check
from autograder.checks.core import independent_copy
from autograder.checks.learner_model import learner_cache, learner_model

from ..helpers import run_as_cell, run_solution_notebook


def test_a_passing_answer_is_saved_once_with_its_imports(course_dir, monkeypatch):
    ns = run_solution_notebook("02_rmsnorm", course_dir, monkeypatch, {"rms_norm"})
    saved = (course_dir / "mylm" / "nb02_rmsnorm.py").read_text()
    assert "def rms_norm(" in saved and "import torch" in saved
    assert answers.passing(course_dir / "mylm") == {"rms_norm": "nb02_rmsnorm"}
    # a re-run of the cell (edited) replaces the saved one
    run_as_cell(ns, specimens.solution_answers("02_rmsnorm")["rms_norm"].replace('"""', '"""Edited. ', 1), 99)
    with contextlib.redirect_stdout(io.StringIO()):
        check_rms_norm(ns["rms_norm"])
    saved = (course_dir / "mylm" / "nb02_rmsnorm.py").read_text()
    assert saved.count("def rms_norm(") == 1 and "Edited." in saved
    # the saved module imports on its own and its function passes the check
    namespace = {}
    exec(compile(saved, "nb02_rmsnorm.py", "exec"), namespace)
    with contextlib.redirect_stdout(io.StringIO()):
        check_rms_norm(namespace["rms_norm"])


def test_nothing_is_saved_for_code_outside_cells_pitfalls_or_grading(course_dir, monkeypatch):
    (course_dir / "02_rmsnorm").mkdir()
    monkeypatch.chdir(course_dir / "02_rmsnorm")
    ns = {"__name__": "__main__"}
    exec(specimens.solution_answers("02_rmsnorm")["rms_norm"], {**ns, "torch": torch})  # not a notebook cell
    with contextlib.redirect_stdout(io.StringIO()):
        check_rms_norm(independent_copy(tinylm.rms_norm))  # defined in a file, not a cell
        ns["torch"] = torch
        run_as_cell(ns, specimens.solution_answers("02_rmsnorm")["rms_norm"], 7)
        show_check(check_rms_norm, ns["rms_norm"])  # a "pitfall" that passes
        monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
        check_rms_norm(ns["rms_norm"])  # grading
    assert not (course_dir / "mylm").exists()


def test_the_model_is_built_from_the_saved_answers(course_dir, monkeypatch):
    run_solution_notebook("04_rope", course_dir, monkeypatch, {"rope_cache", "apply_rope"})
    run_solution_notebook("05_swiglu", course_dir, monkeypatch)
    monkeypatch.chdir(course_dir / "05_swiglu")
    config = tinylm.ModelConfig(d_model=32, n_layers=2, n_heads=4, max_seq_len=24)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        torch.manual_seed(0)
        model = learner_model(config)
    assert type(model).__module__ == "mylm.nb05_swiglu"
    report = out.getvalue()
    for part in ("embedding: reference (finish 01", "RoPE: yours (04)", "SwiGLU: yours (05)", "decoder: yours (05)"):
        assert part in report, report
    assert model.learner_choices["apply_rope"].function.__module__ == "mylm.nb04_rope"
    assert model.learner_choices["rms_norm"].function is tinylm.rms_norm
    # tinylm's names: the same weights load into the reference and give the same logits, with and without a cache
    reference = tinylm.Transformer(config).eval()
    reference.load_state_dict(model.state_dict())
    ids = torch.randint(256, (2, 10), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(model.eval()(ids), reference(ids), atol=1e-5, rtol=1e-5)
        cache = learner_cache(model, batch_size=2)
        model(ids[:, :7], cache=cache)
        step = model(ids[:, 7:], cache=cache)
        torch.testing.assert_close(step, reference(ids)[:, 7:], atol=1e-5, rtol=1e-5)
    # the learner's apply_rope really runs inside: a wrong one in mylm changes the logits
    module = __import__("sys").modules["mylm.nb05_swiglu"]
    module.apply_rope = lambda x, cos, sin, start_pos=0: x
    with torch.no_grad():
        assert not torch.allclose(model(ids), reference(ids), atol=1e-3)


def test_grading_and_a_late_start_use_tinylm(course_dir, monkeypatch):
    config = tinylm.ModelConfig(d_model=32, n_layers=1, n_heads=2, max_seq_len=16)
    (course_dir / "07_gqa").mkdir()
    monkeypatch.chdir(course_dir / "07_gqa")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        late = learner_model(config)
        monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
        graded = learner_model(config)
    assert type(late) is tinylm.Transformer and type(graded) is tinylm.Transformer
    assert re.search(r"tinylm's model: no answers saved in .* every piece in it is tinylm's, the reference",
                     out.getvalue())
    assert "grading: tinylm's reference model" in out.getvalue()


def test_without_a_decoder_the_report_names_the_learners_saved_pieces(course_dir, monkeypatch):
    """Pieces of 01-04 saved and passing, no decoder yet: the model is tinylm's, and the line says which of the
    learner's pieces wait for the decoder instead of calling every piece the reference."""
    run_solution_notebook("02_rmsnorm", course_dir, monkeypatch, {"rms_norm"})
    run_solution_notebook("04_rope", course_dir, monkeypatch, {"rope_cache", "apply_rope"})
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        model = learner_model(tinylm.ModelConfig(d_model=32, n_layers=1, n_heads=2, max_seq_len=16))
    assert type(model) is tinylm.Transformer
    assert ("every piece in it is tinylm's, yours (RMSNorm (02), RoPE (04)) join it once your decoder is saved"
            in out.getvalue()), out.getvalue()
    assert "every piece is the reference" not in out.getvalue()


def test_grouped_query_attention_uses_the_learners_repeat_kv_and_keeps_the_cache_exact(course_dir, monkeypatch):
    """Notebook 03's causal_attention (bottom-right mask, so a cache works) with notebook 07's repeat_kv."""
    run_solution_notebook("03_causal_attention", course_dir, monkeypatch, {"causal_mask", "causal_attention"})
    run_solution_notebook("07_gqa", course_dir, monkeypatch, {"repeat_kv"})
    run_solution_notebook("05_swiglu", course_dir, monkeypatch)
    config = tinylm.ModelConfig(d_model=48, n_layers=2, n_heads=6, n_kv_heads=2, max_seq_len=24)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        model = learner_model(config).eval()
    assert "attention: yours (03)" in out.getvalue() and "GQA: yours (07)" in out.getvalue(), out.getvalue()
    reference = tinylm.Transformer(config).eval()
    reference.load_state_dict(model.state_dict())
    ids = torch.randint(256, (2, 11), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        full = reference(ids)
        torch.testing.assert_close(model(ids), full, atol=1e-5, rtol=1e-5)
        cache = learner_cache(model, batch_size=2)
        model(ids[:, :8], cache=cache)
        for t in range(8, 11):  # one token at a time, as generation does
            torch.testing.assert_close(model(ids[:, t:t + 1], cache=cache)[:, 0], full[:, t], atol=1e-5, rtol=1e-5)
