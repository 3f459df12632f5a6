"""The course's notebooks as a learner runs them (the learner_run fixture).

`learner_run` executes the ten release notebooks with every answer filled
in (the solutions' code, without the nbgrader markers), in course order, at
full size (NBGRADER_EXECUTION unset), on the CPU, each in a fresh kernel in
its own folder of a scratch course folder, with a scratch mylm/ (the
learner's saved answers, which later notebooks build their model from) and
cache (notebook 09's checkpoint, which notebook 10 evaluates). A cell that
raises stops the run: NotebookClient's default.

Two kinds of test read it, where each used to execute every notebook
itself: the gate that each notebook reproduces its checked outputs within
its stated run time (test_notebook_gates.py), and the learner's own model
end to end (test_mylm_course.py). The run takes about as long as the ten
notebooks' stated run times together; conftest.py's fixture runs it once
per session, and the tests that use it are grouped on one pytest-xdist
worker (xdist_group "learner_run", with `--dist loadgroup`).
"""
from __future__ import annotations

import os
import resource
import time
from contextlib import contextmanager
from unittest import mock

from autograder import course, specimens
from autograder.selfcheck import private_kernel_config


# Appended to notebook 10: which model it evaluated, and the modules of the functions inside it.
REPORT = '''
import json
print("MYLM-REPORT " + json.dumps({
    "class": type(model).__module__ + "." + type(model).__name__,
    "report": model.learner_report,
    "functions": {name: c.function.__module__ for name, c in model.learner_choices.items()},
    "trained_steps": state["step"] if "state" in globals() else None,
}))
'''


@contextmanager
def _environ(**values):
    """os.environ with `values` set (None: removed), restored afterwards."""
    with mock.patch.dict(os.environ):
        for k, v in values.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        yield


def _cpu_s() -> float:
    """CPU seconds of this process and of its children waited for (the kernel, once shut down)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def run_notebooks(folder) -> dict:
    import nbformat
    from nbclient import NotebookClient

    runs = {}
    # The kernels import this checkout's autograder and tinylm, whatever the venv's install points at.
    path = os.pathsep.join(filter(None, (str(course.ROOT), os.environ.get("PYTHONPATH"))))
    with _environ(TINYLM_MYLM=str(folder / "mylm"), TINYLM_CACHE=str(folder / "cache"), TINYLM_DEVICE="cpu",
                  NBGRADER_EXECUTION=None, PYTHONPATH=path, OMP_NUM_THREADS="1"):
        for assignment in course.assignments():
            nb = specimens.honest(assignment)
            if assignment.startswith("10"):
                nb.cells.append(nbformat.v4.new_code_cell(REPORT))
            (folder / assignment).mkdir()
            start, cpu = time.perf_counter(), _cpu_s()
            try:
                with private_kernel_config() as config:
                    NotebookClient(nb, timeout=600, kernel_name="python3", config=config,
                                   resources={"metadata": {"path": str(folder / assignment)}}).execute()
                error = None
            except Exception as err:  # noqa: BLE001: the tests of this notebook report it; later ones cannot run
                error = f"{type(err).__name__}: {err}"[-4000:]
            runs[assignment] = {"wall_s": time.perf_counter() - start, "cpu_s": _cpu_s() - cpu, "error": error,
                                "notebook": str(folder / assignment / "executed.ipynb")}
            nbformat.write(nb, runs[assignment]["notebook"])
            if error:
                break
    return {"runs": runs}


def _text(cell) -> str:
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream")


def learner_run_of(learner_run, assignment: str):
    """The executed notebook of `assignment` in the shared learner run (conftest.py)."""
    import nbformat
    run = learner_run["runs"].get(assignment)
    assert run is not None, f"{assignment} did not run: an earlier notebook failed"
    assert run["error"] is None, f"{assignment} failed:\n{run['error']}"
    return nbformat.read(run["notebook"], as_version=4)


def same_checked_outputs(assignment: str, executed) -> None:
    """The # NBVAL_CHECK_OUTPUT cells (e.g. "cached logits equal the full
    recompute: True") print what the committed solution printed: the
    learner's model must not change a verdict."""
    from autograder.notebook_format import read
    committed = {c.source: _text(c) for c in read(course.source_notebook(assignment)).cells
                 if c.cell_type == "code" and "NBVAL_CHECK_OUTPUT" in c.source}
    checked = [cell for cell in executed.cells if cell.cell_type == "code" and cell.source in committed]
    assert len(checked) == len(committed), f"{assignment}: the run lacks checked cells of the solution"
    for cell in checked:
        assert _text(cell) == committed[cell.source], f"{assignment}: {cell.source[:300]}\n-> {_text(cell)}"
