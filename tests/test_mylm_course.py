"""Issue 17's proof: with every answer filled in (the solutions, without the
nbgrader markers), executing notebooks 01-10 in order trains and evaluates a
model made of the learner's code.

The notebooks run in a temporary course folder (one folder per notebook, as
on a JupyterHub), with TINYLM_MYLM pointing at a temporary mylm/ and
TINYLM_CACHE at a temporary cache (notebook 09's checkpoint goes there, and
notebook 10 loads it). NBGRADER_EXECUTION is not set: under grading the
loader uses tinylm's model, which would prove nothing. A last cell appended
to notebook 10 reports the evaluated model's class and the modules of the
functions inside it.

Slow: about as long as executing the ten notebooks (notebook 09 trains for
its preset time limit)."""
from __future__ import annotations

import json
import os

import pytest

from autograder import course
from autograder.authoring import specimens

pytestmark = pytest.mark.slow

REPORT = '''
import json
print("MYLM-REPORT " + json.dumps({
    "class": type(model).__module__ + "." + type(model).__name__,
    "report": model.learner_report,
    "functions": {name: c.function.__module__ for name, c in model.learner_choices.items()},
    "trained_steps": state["step"] if "state" in globals() else None,
}))
'''


def _text(cell) -> str:
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream")


def _same_checked_outputs(assignment: str, executed) -> None:
    """The # NBVAL_CHECK_OUTPUT cells (e.g. "cached logits equal the full
    recompute: True") print what they print with tinylm's pieces: the
    learner's model must not change a verdict."""
    from autograder.notebook_format import read
    committed = {c.source: _text(c) for c in read(course.source_notebook(assignment)).cells
                 if c.cell_type == "code" and "NBVAL_CHECK_OUTPUT" in c.source}
    for cell in executed.cells:
        if cell.cell_type == "code" and cell.source in committed:
            assert _text(cell) == committed[cell.source], f"{assignment}: {cell.source[:300]}\n-> {_text(cell)}"


def test_notebooks_01_to_10_train_and_evaluate_the_learners_model(tmp_path, monkeypatch):
    import nbformat
    from nbclient import NotebookClient

    monkeypatch.setenv("TINYLM_MYLM", str(tmp_path / "mylm"))
    monkeypatch.setenv("TINYLM_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("TINYLM_DEVICE", "cpu")
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    # The kernels must import this checkout's autograder and tinylm, whatever the venv's install points at.
    root = str(course.ROOT)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, (root, os.environ.get("PYTHONPATH")))))
    for assignment in course.assignments():
        nb = specimens.honest(assignment)
        if assignment.startswith("10"):
            nb.cells.append(nbformat.v4.new_code_cell(REPORT))
        folder = tmp_path / assignment
        folder.mkdir()
        NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(folder)}}).execute()
        _same_checked_outputs(assignment, nb)
    printed = "".join(o.get("text", "") for o in nb.cells[-1].outputs)
    report = json.loads(printed.split("MYLM-REPORT ", 1)[1])

    assert report["class"] == "mylm.nb05_swiglu.Transformer", report
    assert report["trained_steps"], "notebook 10 evaluated a stand-in, not notebook 09's trained model"
    want = {"embed": "nb01", "tied_logits": "nb01", "rms_norm": "nb02", "causal_attention": "nb03",
            "rope_cache": "nb04", "apply_rope": "nb04", "swiglu": "nb05", "cache_update": "nb06"}
    for name, nb_prefix in want.items():
        assert report["functions"][name].startswith(f"mylm.{nb_prefix}_"), (name, report["functions"][name])
    assert "reference" not in report["report"], report["report"]
    saved = json.loads((tmp_path / "mylm" / "manifest.json").read_text())
    for module in ("nb08_sampling", "nb09_training", "nb10_perplexity"):
        assert saved[module]["passed"], f"{module}: no answer saved"
