"""Build the source notebooks in solutions/ from readable percent-format files.

Each notebook is written as autograder/notebook_src/NN_name.py, a Python
file whose cells start with a header line:

    # %% [markdown]               prose; every line starts with "# " (stripped)
    # %%                          an ordinary code cell (demos, plots)
    # %% setup id=setup           a locked, read-only code cell (imports, warning filters)
    # %% answer id=embed          an exercise: the solution sits between
                                  ### BEGIN SOLUTION / ### END SOLUTION
    # %% check id=check_embed points=2
                                  a locked, graded test cell: the visible check,
                                  then ### BEGIN HIDDEN TESTS ... ### END HIDDEN TESTS

`build` turns each file into an nbgrader source notebook, executes it in a
fresh kernel from its own folder and writes solutions/NN_name/NN_name.ipynb
with outputs. The committed notebook is what nbgrader reads; the test suite
checks that its cells equal a fresh parse of the .py file.
"""
from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

import nbformat

from .course import NOTEBOOK_SOURCES, SOURCE_DIR

HEADER = re.compile(r"^# %%(?: (?P<kind>\[markdown\]|setup|answer|check))?(?P<attrs>(?: \w+=\S+)*)\s*$")
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


def parse(path: Path) -> list[nbformat.NotebookNode]:
    """The cells of one percent-format source file."""
    cells, kind, attrs, lines = [], None, {}, []

    def flush():
        if kind is not None:
            cells.append(_make_cell(kind, attrs, lines, path))

    for number, line in enumerate(path.read_text().splitlines(), 1):
        m = HEADER.match(line)
        if m:
            flush()
            kind = m["kind"] or "code"
            attrs = dict(a.split("=", 1) for a in m["attrs"].split())
            lines = []
        elif kind is None:
            if line.strip():
                raise ValueError(f"{path}:{number}: text before the first '# %%' cell header")
        else:
            lines.append(line)
    flush()
    return cells


def _make_cell(kind: str, attrs: dict, lines: list[str], path: Path):
    while lines and not lines[-1].strip():  # a blank line separates cells in the .py file
        lines.pop()
    if kind == "[markdown]":
        bad = [l for l in lines if l and not (l == "#" or l.startswith("# "))]
        if bad:
            raise ValueError(f"{path}: markdown line without '# ' prefix: {bad[0]!r}")
        cell = nbformat.v4.new_markdown_cell("\n".join(l[2:] for l in lines))
    else:
        cell = nbformat.v4.new_code_cell("\n".join(lines))
    grade_id = attrs.get("id")
    if kind in ("setup", "answer", "check"):
        if not grade_id:
            raise ValueError(f"{path}: a '{kind}' cell needs id=...")
        meta = {"grade": kind == "check", "solution": kind == "answer", "locked": kind != "answer",
                "grade_id": grade_id, "schema_version": 3}
        if kind == "check":
            meta["points"] = int(attrs.get("points", 1))
        cell.metadata["nbgrader"] = meta
    if kind == "answer" and "### BEGIN SOLUTION" not in cell.source:
        raise ValueError(f"{path}: answer cell {grade_id} has no ### BEGIN SOLUTION block")
    return cell


def new_notebook(cells) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata["language_info"] = {"name": "python"}
    for i, cell in enumerate(nb.cells):
        # Stable cell ids: nbgrader and git diffs stay quiet between builds.
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        cell["id"] = gid or f"cell-{i:02d}"
    return nb


def execute(nb: nbformat.NotebookNode, cwd: Path, timeout: int = 600) -> float:
    """Run every cell in a fresh kernel from `cwd`; returns wall seconds."""
    from nbclient import NotebookClient

    start = time.perf_counter()
    NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(cwd)}}).execute()
    for cell in nb.cells:  # timestamps would make every rebuild a diff
        cell.metadata.pop("execution", None)
    return time.perf_counter() - start


def source_files(names: list[str] | None = None) -> list[Path]:
    files = sorted(NOTEBOOK_SOURCES.glob("[0-9][0-9]_*.py"))
    if names:
        files = [f for f in files if any(f.stem.startswith(n) for n in names)]
    return files


def build(names: list[str] | None = None, run: bool = True) -> dict[str, float]:
    timings = {}
    for src in source_files(names):
        nb = new_notebook(parse(src))
        out_dir = SOURCE_DIR / src.stem
        out_dir.mkdir(parents=True, exist_ok=True)
        if run:
            timings[src.stem] = execute(nb, out_dir)
            print(f"{src.stem}: executed in {timings[src.stem]:.1f} s")
        nbformat.validate(nb)
        nbformat.write(nb, out_dir / f"{src.stem}.ipynb")
    return timings


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("names", nargs="*", help="notebook prefixes, e.g. 01 03_causal (default: all)")
    p.add_argument("--no-run", action="store_true", help="write without executing (no outputs)")
    args = p.parse_args(argv)
    build(args.names, run=not args.no_run)
    return 0


if __name__ == "__main__":
    sys.exit(main())
