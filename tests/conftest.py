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


# Seconds each long unit of work took on the 2-core machine (a group's tests together, or a module's ungrouped
# tests; a fresh clone's `make test`, 2026-12-04, commit 44fa948). Only the order matters: the suite runs longest
# first (`make test` and `make test-long` pass --no-loadscope-reorder, which keeps this order), so the last
# minutes are filled with short tests and both workers finish together. xdist's own order (most tests first) left the hub's 100 s for the
# end, while the other worker had been idle for 90 s. The grade proofs' group holds test_skip_tail.py's
# every-cell comparison too (its batch: 141 s in a `make test` of 2026-12-06 under load), which reads the proofs'
# (`make test-long` runs it, and makes the proofs' batch again for it).
LONG_UNITS = {
    "learner_run": 460, "tests/grading/test_grade_proofs.py": 290, "tests/hub/test_course_hub.py": 125,
    "tests/grading/attacks/test_battery.py": 120, "tests/grading/engines/test_warm_pool.py": 115,
    "tests/checks/test_diagnostics.py": 105, "tests/browser": 95, "tests/course/test_benchmarks.py": 85,
    "tests/grading/attacks/test_intake.py": 70, "tests/grading/attacks/test_shared.py": 65,
    "tests/grading/recheck/test_remote_objects.py": 60, "tests/grading/attacks/test_recheck.py": 60,
    "tests/grading/engines/test_cluster.py": 60, "tests/grading/attacks/test_channels.py": 60,
    "tests/browser/test_docs_site.py": 50, "tests/tinylm/test_pretrained.py": 50,
    "tests/grading/attacks/test_isolation.py": 45, "tests/course/test_learner_output.py": 40,
    "tests/course/test_real_model_cells.py": 35, "tests/course/test_notebook09_run.py": 30,
    "tests/grading/test_deadlines.py": 25, "tests/grading/publish/test_report.py": 20,
}


def expected_seconds(item) -> int:
    """LONG_UNITS' figure for the item's group, else for its module; 0 for the short rest."""
    group = item.get_closest_marker("xdist_group")
    name = (group.args[0] if group.args else group.kwargs.get("name")) if group else None
    return LONG_UNITS.get(name) or LONG_UNITS.get(item.nodeid.split("::")[0], 0)


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
    items.sort(key=expected_seconds, reverse=True)  # stable: equal weights keep the collection's order
