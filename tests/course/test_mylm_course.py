"""The learner's own model, end to end: with every answer filled in (the solutions, without the
nbgrader markers), executing notebooks 01-10 in order trains and evaluates a
model made of the learner's code.

The notebooks are the session's learner run (tests/course/conftest.py): a
scratch course folder, one folder per notebook as on a JupyterHub, a
scratch mylm/ and cache (notebook 09's checkpoint goes there, and notebook
10 loads it). NBGRADER_EXECUTION is not set: under grading the loader uses
tinylm's model, which would prove nothing. A last cell appended to notebook
10 reports the evaluated model's class and the modules of the functions
inside it.

Slow: about as long as executing the ten notebooks (notebook 09 trains for
its preset time limit), shared with the notebooks' run-time gate."""
from __future__ import annotations

import contextlib
import io
import json
import re

import pytest

import tinylm
from autograder import course, mylm_manifest, specimens
from autograder.checks import CheckFailed, check_rms_norm
from autograder.checks.learner_model import learner_function, learner_model

from ..helpers import run_as_cell, run_solution_notebook
from .learner_run import learner_run_of, same_checked_outputs

@pytest.mark.slow
@pytest.mark.long
@pytest.mark.xdist_group("learner_run")
def test_notebooks_01_to_10_train_and_evaluate_the_learners_model(learner_run):
    for assignment in course.assignments():
        same_checked_outputs(assignment, learner_run_of(learner_run, assignment))
    nb = learner_run_of(learner_run, course.assignments()[-1])
    printed = "".join(o.get("text", "") for o in nb.cells[-1].outputs)
    report = json.loads(printed.split("MYLM-REPORT ", 1)[1])

    assert report["class"] == "mylm.nb05_swiglu.Transformer", report
    assert report["trained_steps"], "notebook 10 evaluated a stand-in, not notebook 09's trained model"
    want = {"embed": "nb01", "tied_logits": "nb01", "rms_norm": "nb02", "causal_attention": "nb03",
            "rope_cache": "nb04", "apply_rope": "nb04", "swiglu": "nb05", "cache_update": "nb06"}
    for name, nb_prefix in want.items():
        assert report["functions"][name].startswith(f"mylm.{nb_prefix}_"), (name, report["functions"][name])
    assert "reference" not in report["report"], report["report"]
    saved = json.loads((learner_run["folder"] / "mylm" / "manifest.json").read_text())
    for module in ("nb08_sampling", "nb09_training", "nb10_perplexity"):
        assert saved[module]["passed"], f"{module}: no answer saved"


# -- what the learner is told about saved answers ----------------------------------------

def _run(fn) -> tuple[str, str | None]:
    """(printed output, failure message or None) of check_rms_norm(fn)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            check_rms_norm(fn)
        except CheckFailed as err:
            return out.getvalue(), str(err)
    return out.getvalue(), None


WRONG_RMS_NORM = ("import torch\n\ndef rms_norm(x, weight, eps=1e-6):\n"
                  "    return weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True))\n")


def _report(course_dir, monkeypatch) -> str:
    monkeypatch.chdir(course_dir / "05_swiglu")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        model = learner_model(tinylm.ModelConfig(d_model=32, n_layers=1, n_heads=4, max_seq_len=16))
    return out.getvalue(), model


def test_the_pass_line_says_where_the_answer_is_saved_and_from_when_it_is_used(course_dir, monkeypatch):
    ns = run_solution_notebook("02_rmsnorm", course_dir, monkeypatch, {"rms_norm"})
    printed, failure = _run(ns["rms_norm"])
    assert failure is None
    assert re.search(r"^PASS rms_norm: \d+/\d+ checks; saved to mylm/nb02_rmsnorm.py \(used from notebook 05 on\)$",
                     printed, re.M), printed


def test_a_failing_rerun_keeps_the_last_passing_copy_and_says_so(course_dir, monkeypatch):
    run_solution_notebook("05_swiglu", course_dir, monkeypatch)
    ns = run_solution_notebook("02_rmsnorm", course_dir, monkeypatch, {"rms_norm"})
    saved = (course_dir / "mylm" / "nb02_rmsnorm.py").read_text()
    run_as_cell(ns, WRONG_RMS_NORM, 2001)
    printed, failure = _run(ns["rms_norm"])
    assert failure is not None
    assert ("Saved: your last passing rms_norm stays in mylm/nb02_rmsnorm.py (used from notebook 05 on); "
            "it is replaced when this check passes again") in failure, failure
    assert failure.strip().splitlines()[-1].lstrip().startswith("Likely bug:")  # the diagnosis stays last
    assert (course_dir / "mylm" / "nb02_rmsnorm.py").read_text() == saved
    report, model = _report(course_dir, monkeypatch)
    assert "RMSNorm: yours (02, the last version that passed; your latest rms_norm failed its check)" in report, report
    assert model.learner_choices["rms_norm"].function.__module__ == "mylm.nb02_rmsnorm"
    # passing again replaces the copy and clears the mark
    monkeypatch.chdir(course_dir / "02_rmsnorm")
    run_as_cell(ns, specimens.solution_answers("02_rmsnorm")["rms_norm"], 2002)
    assert _run(ns["rms_norm"])[1] is None
    assert mylm_manifest.failing_since(course_dir / "mylm") == set()
    assert "RMSNorm: yours (02) ·" in _report(course_dir, monkeypatch)[0]


def test_a_hand_edited_saved_module_is_not_used_and_the_report_says_so(course_dir, monkeypatch):
    run_solution_notebook("05_swiglu", course_dir, monkeypatch)
    run_solution_notebook("02_rmsnorm", course_dir, monkeypatch, {"rms_norm"})
    path = course_dir / "mylm" / "nb02_rmsnorm.py"
    path.write_text(path.read_text().replace("def rms_norm(", "def rms_norm_unused(x):\n    return x\n\n\ndef rms_norm(", 1))
    assert mylm_manifest.edited(course_dir / "mylm") == ["nb02_rmsnorm"]
    report, model = _report(course_dir, monkeypatch)
    assert ("RMSNorm: reference (mylm/'s notebook-02 file was changed after its check passed: re-run its check in 02)"
            in report), report
    assert model.learner_choices["rms_norm"].function is tinylm.rms_norm
    # the decoder's own module edited: tinylm's model, and why
    decoder = course_dir / "mylm" / "nb05_swiglu.py"
    decoder.write_text(decoder.read_text() + "\n# my note\n")
    report, model = _report(course_dir, monkeypatch)
    assert type(model) is tinylm.Transformer and "mylm/nb05_swiglu.py was changed after its check passed" in report


def test_learner_function_flags_an_edited_module(course_dir, monkeypatch):
    folder = course_dir / "mylm"
    folder.mkdir()
    text = "def generate(*args, **kwargs):\n    return 'mine'\n"
    (folder / "nb08_sampling.py").write_text(text + "# edited\n")
    (folder / mylm_manifest.MANIFEST).write_text(json.dumps({"nb08_sampling": {
        "cells": [], "passed": ["generate"], "sha256": mylm_manifest.source_hash(text)}}))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        function = learner_function("generate", tinylm.generate)
    assert function is tinylm.generate
    assert "generate: reference (mylm/'s notebook-08 file was changed after its check passed" in out.getvalue()


def test_each_used_from_entry_is_the_first_notebook_that_loads_that_answer():
    """The notebook named in mylm_manifest.USED_FROM calls the loader (after
    the answer's own cell when it is the same notebook), and no notebook in
    between does; every name the loaders take is listed."""
    from autograder.checks import learner_model as loader

    sources = {a[:2]: (course.NOTEBOOK_SOURCES / f"{a}.py").read_text() for a in course.assignments()}
    owner = {name: nb for name, (_, nb) in loader.FUNCTIONS.items()} | {loader.DECODER: "05", "generate": "08"}
    assert set(mylm_manifest.USED_FROM) == set(owner)
    for name, (first, call) in mylm_manifest.USED_FROM.items():
        own = owner[name]
        definition = re.search(rf"^(def|class) {name}\b", sources[own], re.M)
        assert definition, (name, own)
        if first == own:
            assert call in sources[own][definition.end():], (name, call)
        else:
            assert call in sources[first], (name, first, call)
        between = [nb for nb in sorted(sources) if own < nb < first and call in sources[nb]]
        assert between == [], (name, between)
