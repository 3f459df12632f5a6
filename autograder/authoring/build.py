"""Build the source notebooks in solutions/ from percent-format files.

Each notebook is written as autograder/authoring/notebook_src/NN_name.py in jupytext's
percent format, so an instructor can edit it as a text file or open it in
JupyterLab as a notebook (right-click, Open With > Jupytext Notebook). The
folder's jupytext.toml limits the notebook metadata to the kernel (a short
YAML header) and the cell metadata to nbgrader's, which sits in each cell header:

    # %% [markdown]             prose; every line starts with "# "
    # %%                        an ordinary code cell (demos, plots)
    # %% nbgrader={"grade": false, "grade_id": "embed", "locked": false, "schema_version": 3, "solution": true}
                                an exercise (nbgrader's own cell metadata, as JSON)

`build` reads each file with jupytext, checks the nbgrader metadata with
nbgrader's validator, executes the notebook in a fresh kernel from its own
folder and writes solutions/NN_name/NN_name.ipynb with outputs. The committed
notebook is what nbgrader reads; the test suite checks that its cells equal a
fresh read of the .py file, and that jupytext writes them back as that file.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import jupytext
import nbformat
from jupytext.config import load_jupytext_config
from nbgrader.nbgraderformat import MetadataValidator, SchemaTooNewError, SchemaTooOldError, ValidationError

from ..course import NOTEBOOK_SOURCES, SOURCE_DIR
from ..selfcheck import private_kernel_config

SOURCE_FORMAT = "py:percent"
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
# How the .py file is laid out (blank lines after a cell, a cell written as a
# """ string): jupytext keeps it as cell metadata, but it is not the notebook's.
JUPYTEXT_LAYOUT_METADATA = ("lines_to_next_cell", "cell_marker", "lines_to_end_of_cell_marker")
HEADER_SYNTAX = '# %% nbgrader={"grade": false, "grade_id": "NAME", "locked": true, "schema_version": 3, "solution": false}'


def source_config(path: Path):
    """The jupytext configuration that governs a source file (notebook_src/jupytext.toml)."""
    config = load_jupytext_config(str(path))
    if config is None:
        raise FileNotFoundError(f"{path}: no jupytext configuration found for this file; "
                                f"the sources need {NOTEBOOK_SOURCES / 'jupytext.toml'}")
    return config


def read_source(path: Path) -> nbformat.NotebookNode:
    """One source file as a notebook, read by jupytext; its nbgrader metadata
    is checked by nbgrader's own validator, cell by cell, then for duplicate ids."""
    nb = jupytext.read(path, fmt=SOURCE_FORMAT, config=source_config(path))
    validator = MetadataValidator()
    for number, cell in enumerate(nb.cells, 1):
        for key in JUPYTEXT_LAYOUT_METADATA:
            cell.metadata.pop(key, None)
        _check_cell_metadata(path, number, cell)
        _nbgrader_valid(path, f"cell {number}", validator.validate_cell, cell)
    _nbgrader_valid(path, "notebook", validator.validate_nb, nb)
    return nb


def source_cells(path: Path) -> list[nbformat.NotebookNode]:
    """The cells of one source file (for the tests and benchmarks that execute them)."""
    return read_source(path).cells


def _check_cell_metadata(path: Path, number: int, cell) -> None:
    """Fail on headers jupytext could not decode (it keeps them as text and
    reads an ordinary cell): a typo there would silently ungrade an exercise."""
    header = cell.metadata.get("incorrectly_encoded_metadata") or cell.metadata.get("title")
    if header is not None:
        raise ValueError(f"{path}: cell {number}: header '# %% ... {header}' is not valid jupytext metadata; "
                         f"write nbgrader's metadata as JSON, e.g. {HEADER_SYNTAX}")
    extra = sorted(set(cell.metadata) - {"nbgrader"})
    if extra:
        raise ValueError(f"{path}: cell {number}: metadata {extra} in the header; the sources carry only "
                         f"nbgrader's (jupytext.toml drops anything else on the next save)")
    meta = cell.metadata.get("nbgrader", {})
    if meta.get("solution") and cell.cell_type == "code" and "### BEGIN SOLUTION" not in cell.source:
        raise ValueError(f"{path}: cell {number}: answer cell {meta.get('grade_id')!r} has no "
                         f"### BEGIN SOLUTION block (nbgrader would blank the whole cell)")


def _nbgrader_valid(path: Path, where: str, validate, node) -> None:
    try:
        validate(node)
    except (ValidationError, SchemaTooOldError, SchemaTooNewError) as err:
        # jsonschema's message is one line; its str() appends the whole schema.
        raise ValueError(f"{path}: {where}: nbgrader metadata: {getattr(err, 'message', err)}") from err


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
    with private_kernel_config() as config:  # Unix sockets, not TCP (see selfcheck.kernel_transport_config)
        NotebookClient(nb, timeout=timeout, kernel_name="python3", config=config,
                       resources={"metadata": {"path": str(cwd)}}).execute()
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
        nb = new_notebook(source_cells(src))
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
