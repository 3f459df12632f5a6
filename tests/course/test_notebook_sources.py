"""The notebook sources (autograder/authoring/notebook_src/NN_name.py) are jupytext
percent-format files: `python -m autograder build` reads them with jupytext,
jupytext writes a built notebook back as the same file, and an instructor's
JupyterLab opens and saves them as notebooks through jupytext's contents
manager with the folder's jupytext.toml.

The gate that the committed solutions equal a fresh read of their source is
test_solution_matches_its_source_file in course/test_notebook_gates.py."""
from __future__ import annotations

import asyncio
import difflib
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jupytext
import pytest
from jupytext.config import find_global_jupytext_configuration_file, find_jupytext_configuration_file

from autograder import course
from autograder.authoring.build import KERNELSPEC, SOURCE_FORMAT, read_source, source_cells, source_config, source_files
from autograder.notebook_format import nbg, read

CONFIG_FILE = course.NOTEBOOK_SOURCES / "jupytext.toml"
ASSIGNMENTS = course.assignments()
JUPYTER = Path(sys.executable).parent / "jupyter"


def _cells(cells) -> list[tuple]:
    return [(c.cell_type, c.source, dict(c.metadata)) for c in cells]


def test_every_source_is_governed_by_the_folders_jupytext_config():
    sources = source_files()
    assert len(sources) == len(course.ASSIGNMENTS), f"expected one source per assignment, found {sources}"
    for src in sources:
        assert find_jupytext_configuration_file(src.parent) == str(CONFIG_FILE), \
            f"jupytext does not find {CONFIG_FILE} for {src}"
    config = source_config(sources[0])
    assert (config.notebook_metadata_filter, config.cell_metadata_filter) == ("kernelspec,-all", "nbgrader,-all")
    assert config.formats == ["py:percent"]


def test_the_config_does_not_reach_the_ipynb_notebooks():
    """Only the sources are text notebooks: a config at the root would pair
    every notebook in solutions/ and notebooks/ with a .py file on save."""
    for assignment in ASSIGNMENTS:
        for notebook in (course.source_notebook(assignment), course.release_notebook(assignment)):
            found = find_jupytext_configuration_file(notebook.parent)
            assert found is None or course.ROOT not in Path(found).parents, \
                f"{found} applies to {notebook.relative_to(course.ROOT)}"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_jupytext_writes_the_built_notebook_back_as_its_source(assignment):
    """The executed notebook in solutions/, written by jupytext with the
    folder's config, is the committed source byte for byte: opening a source
    in JupyterLab and saving it changes nothing."""
    src = course.NOTEBOOK_SOURCES / f"{assignment}.py"
    built = read(course.source_notebook(assignment))
    assert any(c.get("outputs") for c in built.cells if c.cell_type == "code"), "solutions/ should be executed"
    written = jupytext.writes(built, fmt=SOURCE_FORMAT, config=source_config(src))
    committed = src.read_text()
    diff = "".join(difflib.unified_diff(committed.splitlines(True), written.splitlines(True),
                                        f"{src.name} (committed)", f"{src.name} (as jupytext writes it)", n=1))
    assert written == committed, f"{src.name} is not laid out as jupytext writes it:\n{diff[:3000]}"


@pytest.fixture
def sources_copy(tmp_path):
    """The source folder (files and jupytext.toml) copied under a fresh root."""
    shutil.copytree(course.NOTEBOOK_SOURCES, tmp_path / "notebook_src",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def _run(coroutine):
    """asyncio.run in a thread of its own: in a process where the browser
    tests ran first, Playwright's sync API keeps an event loop running in
    this thread, and asyncio.run refuses to start inside it."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


class _ContentsManager:
    """The contents manager jupytext's server extension gives JupyterLab: its
    class derived from jupyter_server's default, AsyncLargeFileManager."""

    def __init__(self, root: Path):
        from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager
        from jupytext.async_contentsmanager import build_async_jupytext_contents_manager_class

        self.manager = build_async_jupytext_contents_manager_class(AsyncLargeFileManager)(root_dir=str(root))

    def get(self, path: str) -> dict:
        return _run(self.manager.get(path, type="notebook", content=True))

    def save(self, model: dict, path: str) -> None:
        _run(self.manager.save(model, path))


def test_jupyterlab_opens_and_saves_every_source_as_a_notebook(sources_copy):
    cm = _ContentsManager(sources_copy)
    for src in source_files():
        path = f"notebook_src/{src.name}"
        model = cm.get(path)
        assert model["type"] == "notebook"
        assert model["content"].metadata["kernelspec"] == KERNELSPEC, f"{path} would not start the course's kernel"
        committed = read(course.source_notebook(src.stem))
        assert _cells(model["content"].cells) == _cells(committed.cells), f"{path} opens with other cells"
        cm.save(model, path)
        assert (sources_copy / path).read_text() == src.read_text(), f"saving {path} unchanged rewrote it"
    others = sorted(p.name for p in (sources_copy / "notebook_src").iterdir() if p.suffix not in (".py", ".toml"))
    assert not others, f"saving the sources created {others}: a source must not be paired with an .ipynb"


def test_an_edit_saved_from_jupyterlab_lands_in_the_cell_header(sources_copy):
    """A check's points changed in the notebook (as nbgrader's Create
    Assignment panel changes them) and saved: the header line carries the new
    points and the build reads them."""
    cm = _ContentsManager(sources_copy)
    path = "notebook_src/01_embeddings.py"
    model = cm.get(path)
    check = next(c for c in model["content"].cells if nbg(c).get("grade"))
    new_points = check.metadata["nbgrader"]["points"] + 3
    check.metadata["nbgrader"]["points"] = new_points
    cm.save(model, path)
    edited = sources_copy / path
    header = f'# %% nbgrader={{"grade": true, "grade_id": "{nbg(check)["grade_id"]}", "locked": true, ' \
             f'"points": {new_points}, "schema_version": 3, "solution": false}}'
    assert header in edited.read_text().splitlines()
    reread = {nbg(c).get("grade_id"): nbg(c) for c in source_cells(edited)}
    assert reread[nbg(check)["grade_id"]]["points"] == new_points
    changed = [a for a, b in zip(edited.read_text().splitlines(), (course.NOTEBOOK_SOURCES / edited.name)
                                 .read_text().splitlines()) if a != b]
    assert changed == [header], f"the save changed more than the one header: {changed}"


def _write_source(folder: Path, text: str) -> Path:
    shutil.copy(CONFIG_FILE, folder / CONFIG_FILE.name)
    path = folder / "99_bad.py"
    path.write_text(text)
    return path


ANSWER = '# %% nbgrader={"grade": false, "grade_id": "f", "locked": false, "schema_version": 3, "solution": true}\n'
CHECK = '# %% nbgrader={"grade": true, "grade_id": "check_f", "locked": true, "points": 1, "schema_version": 3, "solution": false}\n'
SOLUTION = "def f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION\n"


@pytest.mark.parametrize("text, message", [
    # the header syntax of the hand-written parser jupytext replaced: read as a plain cell, it would ungrade the exercise
    ("# %% answer id=f\n" + SOLUTION, r"header '# %% \.\.\. id=f' is not valid jupytext metadata"),
    ('# %% nbgrader={"grade": false, "solution": tru}\n' + SOLUTION, "is not valid jupytext metadata"),
    ('# %% tags=["parameters"]\nx = 1\n', r"metadata \['tags'\] in the header"),
    (ANSWER + "def f():\n    return 1\n", "answer cell 'f' has no ### BEGIN SOLUTION block"),
    (CHECK.replace('"points": 1, ', ""), "cell 1: nbgrader metadata: nbgrader cell 'check_f' does not have points"),
    (CHECK.replace('"locked": true, ', ""), "cell 1: nbgrader metadata: 'locked' is a required property"),
    (ANSWER + SOLUTION + "\n" + ANSWER + SOLUTION, "notebook: nbgrader metadata: Duplicate grade id: f"),
])
def test_a_malformed_source_is_refused_with_the_reason(tmp_path, text, message):
    with pytest.raises(ValueError, match=message):
        read_source(_write_source(tmp_path, text))


def test_a_well_formed_source_reads_and_its_layout_is_not_metadata(tmp_path):
    """The control for the refusals above. One blank line after a cell that
    ends in a def (jupytext writes two, and records the difference as layout
    metadata) does not put jupytext's layout into the notebook."""
    path = _write_source(tmp_path, ANSWER + SOLUTION + "\n" + CHECK + "check_f(f)\n")
    assert jupytext.read(path).cells[0].metadata.get("lines_to_next_cell") == 1, "jupytext's layout record changed"
    cells = source_cells(path)
    assert [(c.cell_type, nbg(c)["grade_id"]) for c in cells] == [("code", "f"), ("code", "check_f")]
    assert [sorted(c.metadata) for c in cells] == [["nbgrader"], ["nbgrader"]]
    assert cells[0].source == SOLUTION.rstrip("\n")


def test_a_source_without_the_jupytext_config_is_refused(tmp_path):
    if find_global_jupytext_configuration_file() is not None:
        pytest.skip("a global jupytext configuration on this machine applies to every folder")
    path = tmp_path / "99_bad.py"
    path.write_text("# %%\nx = 1\n")
    with pytest.raises(FileNotFoundError, match="no jupytext configuration found"):
        read_source(path)


def _jupyter(*args: str) -> str:
    proc = subprocess.run([str(JUPYTER), *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout + proc.stderr


@pytest.mark.slow  # two `jupyter` commands: about 10 s on 2 shared cores
def test_jupyterlab_loads_jupytexts_server_and_lab_extensions():
    """`make lab` and `make formgrader` run this venv's Jupyter: jupytext's
    contents manager (the server extension) and its Lab extension (Open With >
    Jupytext Notebook) are enabled there."""
    server = _jupyter("server", "extension", "list")
    assert any("jupyterlab_jupytext" in line and "enabled" in line for line in server.splitlines()), server
    lab = _jupyter("labextension", "list")
    assert any("jupyterlab-jupytext" in line and "enabled" in line and "OK" in line for line in lab.splitlines()), lab
