"""Save the learner's passing answers into their own package, `mylm/`.

When a check passes (autograder.checks.framework.check.PASS_HOOKS), `record` finds the
notebook cell that defined the checked function or class and writes that
cell's code into `mylm/nbNN_name.py`, one module per notebook, and the PASS
line says so and from which notebook on the answer is used:

    mylm/
      __init__.py
      manifest.json        per module: the saved cells, the names that passed a check, the names
                           whose latest run failed, and the sha256 of the file the checks verified
      nb01_embeddings.py   a generated header (the imports the cells use), then the answer cells
      nb04_rope.py ...

A later failing run of a saved answer (FAIL_HOOKS, `note_failure`) keeps the
last passing copy, marks the name as failing since, and the failure says
so; the next pass replaces the copy. A saved file that no longer matches
its hash (edited by hand) is not used by the loader (learner_model.py),
which says so in its yours/reference line.

Where mylm/ lives: $TINYLM_MYLM if set, else next to the notebook folders
(the parent of the kernel's working folder: notebooks/04_rope/ ->
notebooks/mylm/; on JupyterHub ~/<course>/04_rope/ -> ~/<course>/mylm/),
so every notebook of the course writes to and reads from the same package.

Nothing is saved while grading (NBGRADER_EXECUTION set), for code not typed
into a notebook cell (tests, autograder/checks/pitfalls.py, the grader's recheck),
for a pitfall shown with show_check, or in a folder that is not a notebook
folder (NN_name). autograder/checks/learner_model.py reads the package back.
"""
from __future__ import annotations

import ast
import builtins
import json
import linecache
import os
import re
import sys
from pathlib import Path
from typing import Any, Callable

from ..mylm_manifest import ENV, MANIFEST, load_manifest, source_hash, used_from
from ..mylm_manifest import passing as passing_in
from ..notebook_format import defined_names
from .framework import failure
from .framework.check import FAIL_HOOKS, PASS_HOOKS

NOTEBOOK_FOLDER = re.compile(r"^(\d\d)_(\w+)$")
# Where IPython compiles a cell: ipykernel >= 6 writes /tmp/ipykernel_<pid>/<hash>.py,
# older IPython <ipython-input-N-hash>. Only these count as a learner's cell.
CELL_FILE = re.compile(r"ipykernel_\d+[/\\]|<ipython-input-")


def mylm_dir() -> Path:
    """The learner's package folder (not created here)."""
    override = os.environ.get(ENV)
    return Path(override).expanduser() if override else Path.cwd().parent / "mylm"


def notebook_module() -> str | None:
    """'nb04_rope' when the kernel runs in a notebook folder 04_rope/, else None."""
    match = NOTEBOOK_FOLDER.match(Path.cwd().name)
    return f"nb{match.group(1)}_{match.group(2)}" if match else None


def _function_of(obj: Any):
    """The function itself, or for a class the first method its own body defines."""
    if isinstance(obj, type):
        methods = [v for v in vars(obj).values() if hasattr(v, "__code__")]
        return methods[0] if methods else None
    return obj if hasattr(obj, "__code__") else None


def cell_file(obj: Any) -> str | None:
    """The pseudo-file of the notebook cell that defined a function or class,
    or None when it was not defined in a notebook cell."""
    function = _function_of(obj)
    if function is None or getattr(obj, "__module__", None) != "__main__":
        return None
    name = function.__code__.co_filename
    return name if CELL_FILE.search(name) and linecache.getlines(name) else None


def _showing_a_pitfall() -> bool:
    """True inside show_check (a deliberately wrong function that happens to pass)."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "show_check" and frame.f_globals.get("__name__") == failure.__name__:
            return True
        frame = frame.f_back
    return False


def _used_names(source: str) -> set[str]:
    """Names the cell reads but never binds itself: the globals it needs
    (a name bound anywhere in the cell, a loop variable or an argument, is not one)."""
    read, bound = set(), set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    return read - bound


def _import_line(name: str, value: Any) -> str | None:
    """The import that gives `name` the same object outside the notebook, or None."""
    if type(value).__name__ == "module":
        module = value.__name__
        return f"import {module}" if module == name else f"import {module} as {name}"
    module = getattr(value, "__module__", None)
    if not module or module == "__main__" or module not in sys.modules:
        return None
    top = module.split(".")[0]  # prefer the package's public name: `from tinylm import rms_norm`
    for source in (top, module):
        if getattr(sys.modules.get(source), name, None) is value:
            return f"from {source} import {name}"
    return None


def header(notebook: str, cells: list[dict], namespace: dict) -> str:
    """Docstring and the imports the saved cells use, resolved in the notebook's namespace."""
    defined = {n for c in cells for n in c["names"]}
    used = set().union(*(_used_names(c["source"]) for c in cells)) - defined - set(dir(builtins))
    imports, missing = [], []
    for name in sorted(used):
        if name not in namespace:
            continue  # a local variable, or a name the cell defines inside a function
        line = _import_line(name, namespace[name])
        (imports.append(line) if line else missing.append(name))
    lines = [f'"""Your answers from notebook {notebook[2:]}, saved when their checks passed.',
             "", "Generated by autograder/checks/answers.py: edit the notebook and re-run the check, not this file."]
    if missing:
        lines.append(f"Not saved (defined outside an answer cell): {', '.join(missing)}.")
    return "\n".join(lines + ['"""', *sorted(set(imports)), ""])


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)  # a reader never sees half a file


def save_cell(folder: Path, notebook: str, source: str, passed: list[str], namespace: dict) -> Path:
    """Put one answer cell into mylm/<notebook>.py, replacing a saved cell that
    defines any of the same names, and mark `passed` as passing."""
    folder.mkdir(parents=True, exist_ok=True)
    init = folder / "__init__.py"
    if not init.exists():
        _write(init, '"""Your model\'s code, saved from the notebooks by autograder/checks/answers.py."""\n')
    manifest = load_manifest(folder)
    entry = manifest.setdefault(notebook, {"cells": [], "passed": []})
    names = defined_names(source)
    new = {"names": names, "source": source.rstrip() + "\n"}
    positions = [i for i, c in enumerate(entry["cells"]) if set(c["names"]) & set(names)]
    if positions:  # a re-run: the new cell takes the place of the first one it replaces
        replaced = {n for i in positions for n in entry["cells"][i]["names"]}
        entry["passed"] = [p for p in entry["passed"] if p not in replaced]
        entry["cells"][positions[0]] = new
        entry["cells"] = [c for i, c in enumerate(entry["cells"]) if i not in positions[1:]]
    else:
        entry["cells"].append(new)
    entry["passed"] = sorted(set(entry["passed"]) | set(passed))
    entry["failing"] = sorted(set(entry.get("failing", [])) - set(passed))
    body = "\n\n".join(c["source"] for c in entry["cells"])
    module = folder / f"{notebook}.py"
    text = header(notebook, entry["cells"], namespace) + "\n\n" + body
    entry["sha256"] = source_hash(text)
    _write(module, text)
    _write(folder / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True))
    return module


def mark_failing(folder: Path, notebook: str, name: str) -> bool:
    """Note in the manifest that `name`'s latest check run failed; True when a
    passing copy of it is saved (and so is kept)."""
    manifest = load_manifest(folder)
    entry = manifest.get(notebook)
    if not entry or name not in entry.get("passed", []):
        return False
    if name not in entry.get("failing", []):
        entry["failing"] = sorted(set(entry.get("failing", [])) | {name})
        _write(folder / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True))
    return True


def _answer_cell(subject) -> tuple[str, str] | None:
    """(cell pseudo-file, notebook module) when `subject` is an answer typed
    into a notebook cell of a course notebook folder, outside grading and
    outside a pitfall shown with show_check; None otherwise."""
    if subject is None or os.environ.get("NBGRADER_EXECUTION") or _showing_a_pitfall():
        return None
    filename, notebook = cell_file(subject), notebook_module()
    return None if filename is None or notebook is None else (filename, notebook)


def _where_used(name: str) -> str:
    first = used_from(name)
    return f"used from notebook {first} on" if first else "no later notebook uses it"


def record(subject: Callable) -> str | None:
    """PASS_HOOKS entry: save the cell that defined `subject` (see the module
    docstring); the note for the PASS line."""
    found = _answer_cell(subject)
    if found is None:
        return None
    filename, notebook = found
    source = "".join(linecache.getlines(filename))
    try:
        namespace = _function_of(subject).__globals__
        save_cell(mylm_dir(), notebook, source, [subject.__name__], namespace)
    except (OSError, SyntaxError, AttributeError) as err:  # saving must never fail the learner's check
        return f"your answer was not saved to mylm/: {type(err).__name__}: {err}"
    return f"saved to mylm/{notebook}.py ({_where_used(subject.__name__)})"


def note_failure(subject) -> str | None:
    """FAIL_HOOKS entry: a failing run of an answer saved earlier keeps the
    last passing copy; say so (the manifest marks it as failing since)."""
    found = _answer_cell(subject)
    if found is None:
        return None
    name, notebook = subject.__name__, found[1]
    try:
        kept = mark_failing(mylm_dir(), notebook, name)
    except OSError:
        return None
    if not kept:
        return None
    return (f"your last passing {name} stays in mylm/{notebook}.py ({_where_used(name)}); "
            f"it is replaced when this check passes again")


def passing(folder: Path | None = None) -> dict[str, str]:
    """{name: notebook module} of every saved name whose check passed."""
    return passing_in(mylm_dir() if folder is None else folder)


if record not in PASS_HOOKS:
    PASS_HOOKS.append(record)
if note_failure not in FAIL_HOOKS:
    FAIL_HOOKS.append(note_failure)
