"""Fixtures for the end-to-end browser tests: Debian's Chromium driven by
Playwright, JupyterLab servers on loopback, screenshots under artifacts/.

Without Chromium or Playwright these tests skip with the reason, unless
TINYLM_REQUIRE_BROWSER=1 (set by .ci/run once it has installed Chromium),
where a missing browser is a failure instead.
"""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from .lab import CHROMIUM_FLAGS, ROOT, JupyterServer
from .math_pages import offline_page  # noqa: F401  (a fixture of the docs-site and feedback-page tests)

ARTIFACTS = ROOT / "artifacts" / "browser"
_failed_key = pytest.StashKey[bool]()

@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Remember a failed test body, so its page fixture can screenshot it."""
    report = yield
    if report.when == "call" and report.failed:
        item.stash[_failed_key] = True
    return report


def chromium_path() -> str | None:
    """$TINYLM_CHROMIUM if set (and only it), else Debian's or Ubuntu's Chromium."""
    if os.environ.get("TINYLM_CHROMIUM"):
        candidates = [os.environ["TINYLM_CHROMIUM"]]
    else:
        candidates = ["/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser")]
    return next((c for c in candidates if c and os.access(c, os.X_OK)), None)


def _unavailable(reason: str):
    if os.environ.get("TINYLM_REQUIRE_BROWSER") == "1":
        pytest.fail(f"browser tests required (TINYLM_REQUIRE_BROWSER=1) but {reason}", pytrace=False)
    pytest.skip(f"browser tests skipped: {reason}")


def launch_browser():
    """Chromium under Playwright, for the session's `browser` fixture (tests/conftest.py)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("Playwright is not installed (pip install -e '.[dev]')")
    exe = chromium_path()
    if exe is None:
        _unavailable("Chromium not found (Debian/Ubuntu: sudo apt-get install -y chromium, "
                     "or set TINYLM_CHROMIUM=/path/to/chromium; the tests never download a browser)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, args=CHROMIUM_FLAGS)
        yield b
        b.close()


class Shots:
    """Numbered screenshots of one test: artifacts/browser/<test>/NN-step.png."""

    def __init__(self, page, folder: Path):
        self.page, self.folder, self.n = page, folder, 0
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)

    def __call__(self, step: str, page=None) -> Path:
        self.n += 1
        path = self.folder / f"{self.n:02d}-{step}.png"
        (page or self.page).screenshot(path=str(path))
        return path


@pytest.fixture
def page(browser, request):
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.set_default_timeout(60_000)
    pg = context.new_page()
    pg.shots = Shots(pg, ARTIFACTS / re.sub(r"[^\w.-]+", "_", request.node.name))
    yield pg
    if request.node.stash.get(_failed_key, False):
        pg.shots("FAILED")  # what the screen showed when the test failed
    context.close()


def _server(tmp_path_factory, name: str, make_course, cwd_rel: str, root_rel: str, disable=()):
    """A server over a fresh copy of the course files, so the repository never changes."""
    base = tmp_path_factory.mktemp(name)
    course = base / "course"
    make_course(course)
    server = JupyterServer(cwd=course / cwd_rel, root_dir=course / root_rel, state_dir=base / "jupyter", disable=disable)
    server.start()
    return server


def _learner_course(course: Path) -> None:
    shutil.copytree(ROOT / "notebooks", course / "notebooks")


@pytest.fixture(scope="session")
def learner_server(tmp_path_factory):
    """As `make lab`: started inside notebooks/ (where nbgrader finds the
    learner's nbgrader_config.py), file browser on notebooks/."""
    server = _server(tmp_path_factory, "learner", _learner_course, "notebooks", "notebooks")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def bare_lab_server(tmp_path_factory):
    """The learner's setup with nbgrader's Lab extension disabled: proves
    that the extension check in test_extensions.py can fail."""
    server = _server(tmp_path_factory, "no-nbgrader", _learner_course, "notebooks", "notebooks", disable=("@jupyter/nbgrader",))
    yield server
    server.stop()


def _instructor_course(course: Path) -> None:
    for folder in ("notebooks", "solutions"):
        shutil.copytree(ROOT / folder, course / folder)
    (course / "autograder").mkdir()
    shutil.copy(ROOT / "autograder" / "nbgrader_config.py", course / "autograder")
    # The gradebook's folder: nbgrader cannot create it, and without it the
    # formgrader hangs on "Loading" (see `make formgrader`).
    (course / ".course").mkdir()


@pytest.fixture(scope="session")
def instructor_server(tmp_path_factory):
    """As `make formgrader`: started in autograder/ (where nbgrader finds the
    course config), file browser on the course root."""
    server = _server(tmp_path_factory, "instructor", _instructor_course, "autograder", ".")
    yield server
    server.stop()


@pytest.fixture
def fresh_notebook(learner_server, request):
    """A learner's untouched copy of a release notebook at its own path (so
    it gets its own kernel): returns (path on disk, path under the server root)."""
    def make(assignment: str) -> tuple[Path, str]:
        rel = re.sub(r"[^\w]+", "_", request.node.name) + "/" + assignment
        folder = learner_server.root_dir / rel
        shutil.copytree(ROOT / "notebooks" / assignment, folder)
        return folder / f"{assignment}.ipynb", f"{rel}/{assignment}.ipynb"
    return make
