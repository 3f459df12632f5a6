"""A cell in the recheck's child runs as the IPython kernel ran it: magics
that change the namespace run, display and timing magics are skipped, and
what the grader does not run (shell escapes, other magics) is skipped and
noted, never a silent failure. No jail: the child's cell runner alone."""
from __future__ import annotations

import pytest

from autograder.grading.recheck.ipython_cells import NOTES, run_cell, source_to_run


def _run(*cells: str) -> tuple[dict, list[str]]:
    ns: dict = {}
    notes: list[str] = []
    for n, cell in enumerate(cells):
        notes += run_cell(cell, f"<cell {n}>", ns)
    return ns, notes


def test_a_plain_python_cell_runs_as_it_is():
    source = "x = 1\n"
    assert source_to_run(source) is source
    ns, notes = _run(source)
    assert ns["x"] == 1 and notes == [] and "get_ipython" not in ns


@pytest.mark.parametrize("cell", ["%%time\ndef double(x):\n    return 2 * x\n",
                                  "%%capture\ndef double(x):\n    return 2 * x\n",
                                  "%matplotlib inline\ndef double(x):\n    return 2 * x\n",
                                  "%timeit 1 + 1\ndef double(x):\n    return 2 * x\n",
                                  "%time def_ok = True\ndef double(x):\n    return 2 * x\n",
                                  "double = %time lambda x: 2 * x\n",
                                  "len?\ndef double(x):\n    return 2 * x\n"])
def test_an_answer_with_ipython_syntax_defines_its_function_and_notes_nothing(cell):
    ns, notes = _run(cell)
    assert ns["double"](4) == 8 and notes == []
    assert "get_ipython" not in ns, "the stand-in shell lives only while its cell runs"


def test_a_time_magic_runs_its_statement_in_the_namespace():
    ns, _ = _run("y = 2", "%time z = y * 3", "w = %time z + 1")
    assert (ns["z"], ns["w"]) == (6, 7)


def test_a_shell_escape_is_not_run_and_is_noted(tmp_path):
    marker = tmp_path / "ran"
    ns, notes = _run(f"!touch {marker}\nfiles = !ls\ndef double(x):\n    return 2 * x\n")
    assert not marker.exists(), "a shell command ran in the recheck"
    assert ns["double"](2) == 4 and ns["files"] == [] and notes == ["shell"]


def test_another_magic_is_not_run_and_is_noted(tmp_path):
    ns, notes = _run(f"%%writefile {tmp_path / 'helper.py'}\nprint(1)\n", "%cd /\nx = 1")
    assert not (tmp_path / "helper.py").exists() and ns["x"] == 1 and notes == ["magic", "magic"]
    assert set(notes) <= set(NOTES)


def test_an_error_inside_a_cell_magic_names_the_cells_own_line():
    with pytest.raises(ZeroDivisionError) as raised:
        _run("%%time\nx = 1\ny = x / 0\n")
    frame = raised.traceback[-1]
    assert (str(frame.path), frame.lineno + 1) == ("<cell 0>", 3)


def test_a_cell_that_is_not_python_nor_ipython_still_fails():
    with pytest.raises(SyntaxError):
        _run("def broken(:\n")
