"""What the browser tests drive: a Jupyter server on loopback, and a notebook
page used the way a person uses it (click, type, keyboard shortcuts, menus,
toolbar buttons). Nothing here reaches into JupyterLab's JavaScript objects.
"""
from __future__ import annotations

import json
import os
import re
import secrets
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from ..servers import LoggedServer, free_port

ROOT = Path(__file__).resolve().parents[2]
# Every browser test module sets `pytestmark = BROWSER`: selectable with
# -m browser, run by `make test-long` (long), not by `make test` or `make
# test-fast`. Under xdist each worker that gets a browser test starts its own
# Chromium and servers.
BROWSER = [pytest.mark.browser, pytest.mark.slow, pytest.mark.long]
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
# Kernel start + `import torch` + one notebook on 2 busy cores: generous, but bounded.
RUN_TIMEOUT_MS = 240_000


# -- the server -------------------------------------------------------------------

def _write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1))


class JupyterServer:
    """`jupyter lab` on 127.0.0.1 with a random token, started like `make lab`
    (working directory `cwd`, file browser rooted at `root_dir`).

    Per-user Jupyter state goes to `state_dir`, never to ~/.jupyter: the
    config dir (page config), Lab's user settings and workspaces, and the
    runtime dir. Two settings differ from a fresh install, both for a
    headless robot rather than a person: the "Jupyter news?" popup is
    switched off, and the notebook renders every cell (windowingMode "none")
    so that a cell can be found by its position without scrolling first.
    `disable` lists Lab extensions or plugins to switch off, exactly as
    `jupyter labextension disable --level=user NAME` would."""

    def __init__(self, cwd: Path, root_dir: Path, state_dir: Path, disable: tuple[str, ...] = ()):
        self.cwd, self.root_dir, self.state = Path(cwd), Path(root_dir), Path(state_dir)
        self.port = free_port()
        self.token = secrets.token_hex(16)
        self.server = LoggedServer("jupyter lab", self.state / "server.log")
        disabled = {"@jupyterlab/apputils-extension:announcements": True, **{name: True for name in disable}}
        _write_json(self.state / "config" / "labconfig" / "page_config.json", {"disabledExtensions": disabled})
        _write_json(self.state / "settings" / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings",
                    {"windowingMode": "none"})
        bin_dir = str(Path(sys.executable).parent)
        self.env = dict(os.environ,
                        JUPYTER_CONFIG_DIR=str(self.state / "config"),
                        JUPYTERLAB_SETTINGS_DIR=str(self.state / "settings"),
                        JUPYTERLAB_WORKSPACES_DIR=str(self.state / "workspaces"),
                        JUPYTER_RUNTIME_DIR=str(self.state / "runtime"),
                        # nbgrader shells out to `alembic` when it creates a gradebook
                        PATH=os.pathsep.join([bin_dir, os.environ.get("PATH", "")]),
                        OMP_NUM_THREADS="1", TINYLM_DEVICE="cpu")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 120) -> "JupyterServer":
        cmd = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ip=127.0.0.1", f"--port={self.port}",
               f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={self.root_dir}"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-root")  # CI containers run as root
        self.server.start(cmd, f"{self.url}/api/status", cwd=self.cwd, env=self.env, timeout=timeout,
                          headers={"Authorization": f"token {self.token}"})
        return self

    def stop(self) -> None:
        self.server.stop()

    def log_tail(self, n: int = 40) -> str:
        return self.server.log_tail(n)

    def page_url(self, path: str) -> str:
        """URL with the token; Lab pages get `reset`, so each test starts
        from an empty workspace instead of the tabs the previous test left."""
        path = path.lstrip("/")
        query = "reset&" if path.startswith("lab") else ""
        return f"{self.url}/{path}?{query}token={self.token}"


# -- the course's notebooks ---------------------------------------------------------

@dataclass
class Answer:
    index: int          # position of the cell in the notebook
    grade_id: str
    function: str       # the (first) function or class the cell defines
    text: str           # the release cell with its stub replaced by the reference solution


def _source(cell: dict) -> str:
    src = cell["source"]
    return src if isinstance(src, str) else "".join(src)


MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION")
STUB = ("# YOUR CODE HERE", "raise NotImplementedError()")


def _solution_regions(source: str) -> list[list[str]]:
    """The lines between each `### BEGIN SOLUTION` and its `### END SOLUTION`."""
    regions, current = [], None
    for line in source.splitlines():
        if line.strip() == MARKERS[0]:
            current = []
        elif line.strip() == MARKERS[1]:
            regions.append(current)
            current = None
        elif current is not None:
            current.append(line)
    return regions


def _fill_stubs(release: str, regions: list[list[str]]) -> str:
    """Replace each two-line nbgrader stub of a release cell, in order, by one solution region."""
    lines, out, regions = release.splitlines(), [], list(regions)
    i = 0
    while i < len(lines):
        if lines[i].strip() == STUB[0] and i + 1 < len(lines) and lines[i + 1].strip() == STUB[1]:
            out += regions.pop(0)
            i += 2
        else:
            out.append(lines[i])
            i += 1
    assert not regions, "more solution regions than stubs"
    return "\n".join(out)


def _notebook(folder: str, assignment: str) -> dict:
    return json.loads((ROOT / folder / assignment / f"{assignment}.ipynb").read_text())


def answers(assignment: str) -> list[Answer]:
    """The answer cells of a release notebook, each with the text a learner
    who copied the reference solution would end up with: the release cell,
    each `# YOUR CODE HERE` / `raise NotImplementedError()` stub replaced by
    the lines between the matching `### BEGIN SOLUTION` and `### END
    SOLUTION` of the source notebook in solutions/."""
    release, source = _notebook("notebooks", assignment), _notebook("solutions", assignment)
    solutions = {c["metadata"]["nbgrader"]["grade_id"]: _source(c) for c in source["cells"]
                 if c.get("metadata", {}).get("nbgrader", {}).get("solution")}
    out = []
    for i, cell in enumerate(release["cells"]):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if not meta.get("solution") or cell["cell_type"] != "code":
            continue
        solution = solutions[meta["grade_id"]]
        text = _fill_stubs(_source(cell), _solution_regions(solution))
        # The result must be the source cell minus its marker lines, or the stubs were not where we thought.
        expected = "\n".join(l for l in solution.splitlines() if l.strip() not in MARKERS)
        assert text == expected, f"answer cell {meta['grade_id']}: release stubs and source solutions do not line up"
        defined = re.search(r"^(?:def|class) (\w+)", text, re.M)
        assert defined, f"answer cell {meta['grade_id']} defines no function or class"
        out.append(Answer(i, meta["grade_id"], defined.group(1), text))
    return out


def check_cells(assignment: str) -> list[tuple[int, str]]:
    """(index, source) of the graded test cells of a release notebook."""
    return [(i, _source(c)) for i, c in enumerate(_notebook("notebooks", assignment)["cells"])
            if c.get("metadata", {}).get("nbgrader", {}).get("grade")]


def cell_count(assignment: str) -> int:
    return len(_notebook("notebooks", assignment)["cells"])


def saved_sources(path: Path) -> list[str]:
    return [_source(c) for c in json.loads(path.read_text())["cells"]]


# -- a notebook in the browser --------------------------------------------------------

# The notebook on screen: Lab keeps other open documents in the DOM, hidden.
PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden)"
CELLS = f"{PANEL} .jp-Notebook .jp-Cell"


class NotebookPage:
    """One notebook open in JupyterLab (`/lab/tree/...`) or Notebook 7
    (`/notebooks/...`); both render cells with the same classes."""

    def __init__(self, page, n_cells: int):
        self.page, self.n_cells = page, n_cells
        self.root = page.locator(PANEL)

    def open(self, url: str) -> "NotebookPage":
        self.page.goto(url)
        cells = self.page.locator(CELLS)
        self.page.wait_for_function(f"() => document.querySelectorAll('{CELLS}').length === {self.n_cells}",
                                    timeout=120_000)
        assert cells.count() == self.n_cells
        self.wait_idle()
        return self

    def cell(self, index: int):
        return self.page.locator(CELLS).nth(index)

    def wait_idle(self, timeout: int = RUN_TIMEOUT_MS) -> None:
        """A kernel is attached and idle. Until the toolbar's kernel button
        stops saying "No Kernel", Shift+Enter is silently dropped, and the
        execution indicator already reads idle, so both are needed."""
        self.page.wait_for_function(
            """(panel) => {
                const name = document.querySelector(panel + ' .jp-Toolbar-kernelName');
                const status = document.querySelector('.jp-Notebook-ExecutionIndicator');
                return name !== null && !/No Kernel/.test(name.getAttribute('aria-label') || name.textContent)
                    && status !== null && status.getAttribute('data-status') === 'idle';
            }""", arg=PANEL, timeout=timeout)

    def type_into(self, index: int, text: str) -> None:
        """Click into the cell's editor, select everything, type `text`
        (as one text insertion, so the editor's auto-indent and bracket
        closing do not rewrite it), and leave edit mode."""
        editor = self.cell(index).locator(".cm-content")
        editor.scroll_into_view_if_needed()
        editor.click()
        self.page.keyboard.press("Control+a")
        self.page.keyboard.insert_text(text)
        self.page.keyboard.press("Escape")

    def save(self, path: Path, timeout: float = 30) -> None:
        """Ctrl+S, then wait until the server has rewritten `path` on disk.
        Jupyter's "atomic" save copies a backup aside, then truncates and
        rewrites the file in place, and removes the backup last: a new mtime
        alone can mean an empty or half-written file."""
        from jupyter_server.services.contents.fileio import path_to_intermediate

        backup = Path(path_to_intermediate(str(path)))
        before = path.stat().st_mtime_ns
        self.page.keyboard.press("Control+s")
        deadline = time.monotonic() + timeout
        while path.stat().st_mtime_ns == before or backup.exists():
            if time.monotonic() > deadline:
                raise AssertionError(f"Ctrl+S did not save {path.name} within {timeout:.0f} s")
            time.sleep(0.2)

    def prompt(self, index: int) -> str:
        return self.cell(index).locator(".jp-InputPrompt").inner_text().strip()

    def run_cell(self, index: int) -> None:
        """Select the cell and press Shift+Enter, then wait for its new execution count."""
        before = self.prompt(index)
        self.cell(index).locator(".jp-InputPrompt").click()  # selects the cell in command mode
        self.page.keyboard.press("Shift+Enter")
        self.page.wait_for_function(
            f"""() => {{
                const p = document.querySelectorAll('{CELLS}')[{index}]
                    .querySelector('.jp-InputPrompt').textContent.trim();
                return /^\\[\\d+\\]:$/.test(p) && p !== {json.dumps(before)};
            }}""", timeout=RUN_TIMEOUT_MS)

    def run_all_from_menu(self) -> None:
        """Run > Run All Cells, then wait until no cell is queued or running
        and every code cell has an execution count (or one raised, which
        stops the run)."""
        self.page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
        self.page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()
        self.page.wait_for_function(
            """(panel) => {
                const prompts = Array.from(document.querySelectorAll(panel + ' .jp-CodeCell .jp-InputPrompt'))
                    .map(e => e.textContent.trim());
                if (prompts.some(p => p === '[*]:')) return false;
                const errored = document.querySelector(panel + ' [data-mime-type="application/vnd.jupyter.stderr"]');
                return prompts.every(p => /^\\[\\d+\\]:$/.test(p)) || errored !== null;
            }""", arg=PANEL, timeout=RUN_TIMEOUT_MS)
        self.wait_idle()

    def output(self, index: int) -> str:
        area = self.cell(index).locator(".jp-OutputArea")
        return area.inner_text() if area.count() else ""

    def code_prompts(self) -> list[str]:
        return [p.strip() for p in self.root.locator(".jp-CodeCell .jp-InputPrompt").all_inner_texts()]

    def error_outputs(self) -> list[str]:
        """Tracebacks and stderr text (Lab renders both with the stderr MIME type)."""
        return self.root.locator('[data-mime-type="application/vnd.jupyter.stderr"]').all_inner_texts()

    def validate(self, timeout: int = RUN_TIMEOUT_MS):
        """Click nbgrader's Validate button; return the results dialog.

        The server validates inside its own event loop (seconds), so the requests Lab sends meanwhile wait; on a
        loaded machine Lab then finds the file newer on disk than its last save by more than its 500 ms margin and
        asks "File Changed" (JupyterLab's own check, seen once on a fresh clone's run, where the results never came
        while it stayed open). The notebook on disk is the one Lab just saved, so the learner's answer is Overwrite
        (docs/learners.md, Troubleshooting); the test answers so, says it, and goes on waiting for the results."""
        self.page.get_by_role("button", name="Validate").click()
        dialog = self.page.locator(".jp-Dialog")
        # The dialog appears once the server has executed the saved notebook.
        results = dialog.locator(".jp-Dialog-header", has_text="Validation")
        changed = dialog.filter(has=self.page.locator(".jp-Dialog-header", has_text="File Changed"))
        results.or_(changed).first.wait_for(timeout=timeout)
        if changed.count() and changed.first.is_visible():
            print(f"{self.page.url}: Lab asked 'File Changed' during Validate; answered Overwrite")
            changed.get_by_role("button", name="Overwrite").click()
            results.wait_for(timeout=timeout)
        return dialog


def missing_nbgrader_ui(page, menu_items=("Formgrader", "Assignment List"), notebook_open: bool = True) -> list[str]:
    """What of nbgrader's Lab extension a person would look for and not
    find: the Nbgrader menu with `menu_items`, and (with a notebook open)
    the Validate button. [] means all present. JupyterLab's menu holds
    everything; Notebook 7 shows "Create assignment" in a notebook's menu
    and the formgrader and assignment list in the file browser's (/tree)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout  # imported late: see conftest's skip

    missing = []
    menu = page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Nbgrader$"))
    try:  # extensions add their menus after the page has loaded
        menu.wait_for(timeout=10_000)
    except PlaywrightTimeout:
        pass
    if menu.count() == 0:
        missing.append("the Nbgrader menu")
    else:
        menu.click()
        items = [t.strip() for t in page.locator(".lm-Menu-itemLabel").all_inner_texts()]
        page.keyboard.press("Escape")
        missing += [f"Nbgrader > {item}" for item in menu_items if item not in items]
    if notebook_open and page.get_by_role("button", name="Validate").count() == 0:
        missing.append("the Validate button on the notebook toolbar")
    return missing
