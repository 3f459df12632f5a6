"""Fixtures every folder of tests/ may use, and how pytest-xdist shares out
the suite (pytest_collection_modifyitems)."""
import pytest
import torch

from tinylm import ModelConfig


@pytest.fixture
def config() -> ModelConfig:
    """See helpers.py for why every size differs."""
    return ModelConfig(vocab_size=256, d_model=40, n_layers=2, n_heads=4, n_kv_heads=2, max_seq_len=64)


@pytest.fixture
def gen() -> torch.Generator:
    return torch.Generator().manual_seed(1234)


@pytest.fixture
def course_dir(tmp_path, monkeypatch):
    """A course folder with mylm/ inside (the learner's saved answers); the
    kernel sits in one notebook folder at a time."""
    monkeypatch.setenv("TINYLM_MYLM", str(tmp_path / "mylm"))
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    return tmp_path


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture(scope="session")
def browser():
    """One Chromium per test process, for tests/browser and tests/hub alike:
    Playwright's sync API refuses a second instance while one runs, so the
    two folders share this fixture (and with it one xdist worker)."""
    from tests.browser.conftest import launch_browser
    yield from launch_browser()


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own, which turns the groups into node ids as it finds them
def pytest_collection_modifyitems(config, items):
    """Tests that share an expensive fixture run on one pytest-xdist worker
    (`make test` passes `--dist loadgroup`), so the fixture is made once and
    no worker waits for the other's: the tests of a module with a fixture of
    its own wider than one test form a group, and those using a conftest's
    session fixture form that folder's group (the browser tests share a
    JupyterLab server and a browser). A test that names its own group
    (xdist_group) keeps it: the learner's run of the notebooks spans two modules."""
    for item in items:
        if item.get_closest_marker("xdist_group"):
            continue
        shared = [d for name in item.fixturenames for d in item._fixtureinfo.name2fixturedefs.get(name, ())
                  if d.scope != "function" and d.baseid]  # "" for pytest's own fixtures (tmp_path_factory, ...)
        if shared:
            group = next((d.baseid for d in shared if d.baseid.endswith(".py")), shared[0].baseid)
            item.add_marker(pytest.mark.xdist_group(group))
