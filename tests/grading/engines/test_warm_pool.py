"""The warm worker pool (autograder.grading.engines.warm_pool) grades exactly like
the cold path (an nbgrader process and a recheck process per submission)
and keeps its guarantees: a worker killed mid-submission is replaced and the
submission still gets a result, the per-submission wall-clock limit still
stops a hung notebook, and nothing of a batch (workers, their forks, jailed
processes) outlives it. Every process inspected here is this batch's own
(found by its course data folder), so another grader may run meanwhile."""
from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import nbformat
import pytest

from autograder import course, specimens
from autograder.grading import gradebook
from ..batches import all_stop, course_data, jailed_survivors, process_tree, shared_batch
# SWALLOW fools the notebook kernel (every failing assert swallowed); only the recheck sees through it.
from ..specimens import SWALLOW, WRONG_EMBED

A = "01_embeddings"
pytestmark = [pytest.mark.grader, pytest.mark.slow,
              pytest.mark.skipif(A not in course.assignments(), reason="notebook 01 is not built")]

HANG = "def embed(ids, weight):\n    return weight[ids]\nwhile True:\n    pass\n"


def _submit_batch(data: Path) -> None:
    specimens.submit(data, "honest", A, specimens.honest(A))
    specimens.submit(data, "wrong", A, specimens.notebook(A, {"embed": WRONG_EMBED}))
    specimens.submit(data, "swallow", A, specimens.notebook(A, {"embed": SWALLOW + WRONG_EMBED}))
    specimens.submit(data, "torch_py", A, specimens.notebook(A, {"embed": WRONG_EMBED}),
                     extra={"torch.py": "raise SystemExit('shadowed torch')\n"})
    specimens.submit(data, "corrupt", A, raw=b'{"cells": [')


def _warm_processes(data: Path) -> list[int]:
    """Live warm workers and their forks started for the batch in `data`."""
    marker = f"{gradebook.DATA_ENV_VAR}={data}".encode()
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            if b"autograder.grading.engines.warm_worker" in cmdline and marker in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                found.append(int(pid))
        except OSError:
            continue
    return found


def _grade_both(data: Path) -> dict:
    from autograder.grading.batch import Options, grade_all
    outcome = {}
    for engine in ("cold", "warm"):
        folder = data / engine
        folder.mkdir()
        with course_data(folder):
            _submit_batch(folder)
            opts = Options(assignments=[A], workers=2, cell_timeout=30, progress=False, warm=engine == "warm")
            outcome[engine] = {r["student"]: r for r in grade_all(opts)}
            time.sleep(2)
            outcome[f"{engine}_left"] = jailed_survivors(folder) + _warm_processes(folder)
    return outcome


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    return shared_batch(tmp_path_factory, "grader_warm", _grade_both)


def _verdict(result: dict) -> dict:
    """What a grade is made of (the messages name jail folders, which differ run to run)."""
    return {"status": result["status"], "score": result["score"], "max_score": result["max_score"],
            "problems": result["problems"], "flags": len(result["flags"]),
            "cells": {c: (v["score"], v["kernel_score"], v["recheck"]) for c, v in result["cells"].items()}}


def test_warm_and_cold_give_the_same_grades(both):
    assert set(both["warm"]) == set(both["cold"]) == {"honest", "wrong", "swallow", "torch_py", "corrupt"}
    for student in both["cold"]:
        assert _verdict(both["warm"][student]) == _verdict(both["cold"][student]), student


def test_the_batch_is_not_vacuous(both):
    """Each kind of submission got the grade that makes the comparison mean something."""
    warm = both["warm"]
    assert warm["honest"]["score"] == warm["honest"]["max_score"] == 7
    assert warm["wrong"]["status"] == "graded" and warm["wrong"]["score"] < 7
    fooled = [c for c, v in warm["swallow"]["cells"].items()
              if v["kernel_score"] == v["max_score"] > 0 and (v["recheck"], v["score"]) == ("fail", 0.0)]
    assert fooled and warm["swallow"]["flags"], warm["swallow"]["cells"]  # kernel fooled, recheck not
    assert warm["corrupt"]["status"] == "malformed"


def test_every_stage_is_timed(both):
    from autograder.grading.grade import STAGES
    for engine in ("cold", "warm"):
        timing = both[engine]["honest"]["timing"]
        assert set(timing) == set(STAGES)
        assert all(v >= 0 for v in timing.values())
        assert timing["cells"] > 0 and timing["recheck_checks"] > 0
        assert sum(timing.values()) <= both[engine]["honest"]["seconds"] + 0.5


def test_nothing_of_the_batch_is_left_running(both):
    assert both["cold_left"] == []
    assert both["warm_left"] == []


def _prepared(data: Path, students: dict, **limits):
    from autograder.grading.grade import Options
    from autograder.grading.sandbox.jail import Limits
    for student, nb in students.items():
        specimens.submit(data, student, A, nb)
    opts = Options(assignments=[A], workers=1, cell_timeout=60, progress=False, limits=Limits(**limits))
    opts.db_url = gradebook.db_url(None)
    gradebook.ensure_assignments(opts.db_url, [A])
    return opts


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def test_a_worker_killed_mid_submission_is_replaced(tmp_path):
    from autograder.grading.records import Submission
    from autograder.grading.engines.warm_pool import WarmPool
    with course_data(tmp_path):
        # an honest notebook with a slow cell of its own, so the kill lands inside the submission however fast
        # the grader gets (a cell before the graded ones: grading runs it)
        slow = specimens.honest(A)
        slow.cells.insert(1, nbformat.v4.new_code_cell("import time\ntime.sleep(8)"))
        opts = _prepared(tmp_path, {"first": slow, "second": specimens.honest(A)})
        with WarmPool(1) as pool:
            (victim,) = pool.pids()
            results = []
            grading = threading.Thread(target=lambda: results.append(pool.grade(Submission("first", A), opts)))
            grading.start()
            deadline = time.monotonic() + 120
            while not _children(victim) and time.monotonic() < deadline:  # its grading child runs
                time.sleep(0.1)
            assert _children(victim), "the worker never started grading"
            time.sleep(2)  # well inside the submission (nbgrader or its kernel at work)
            assert not results, "the submission was graded before its worker could be killed"
            # its forks, nbgrader, the jails' first processes, and its jobs under the pool's jail server
            started = {**process_tree(victim), **process_tree(pool.jail_server.pid)}
            os.kill(victim, signal.SIGKILL)
            assert all_stop(started, within_s=5), "the killed worker's grading kept running"
            grading.join(timeout=600)
            assert not grading.is_alive()
            (first,) = results
            assert pool.pids() and victim not in pool.pids()
            # retried once in the fresh worker: a full, recorded grade
            assert (first["status"], first["score"]) == ("graded", 7.0), first["problems"]
            # the fresh worker's kernel and recheck child still start from the pool's one warm jail server
            before = len(pool.jail_server.jobs())
            second = pool.grade(Submission("second", A), opts)
            assert (second["status"], second["score"]) == ("graded", 7.0), second["problems"]
            assert pool.jail_server.jobs()[before:] == ["ipykernel_launcher", "autograder.grading.recheck"]
        assert pool.jail_server.proc.poll() is not None, "the pool's jail server outlived the pool"
        time.sleep(2)
        assert _warm_processes(tmp_path) == []
        assert jailed_survivors(tmp_path) == []


def test_the_wall_clock_limit_stops_a_hung_notebook(tmp_path):
    from autograder.grading.records import Submission
    from autograder.grading.engines.warm_pool import WarmPool
    with course_data(tmp_path):
        opts = _prepared(tmp_path, {"hang": specimens.notebook(A, {"embed": HANG})}, wall_s=12)
        with WarmPool(1) as pool:
            began = time.monotonic()
            result = pool.grade(Submission("hang", A), opts)
            took = time.monotonic() - began
        assert result["status"] == "error"
        assert any("12 s per-submission limit" in p for p in result["problems"]), result["problems"]
        assert result["score"] == 0
        assert took < 12 + 30  # the limit, worker start and jail clean-up; not the 60 s cell timeout
        time.sleep(2)
        assert _warm_processes(tmp_path) == []
        assert jailed_survivors(tmp_path) == []


def test_bad_worker_count_is_refused():
    from autograder.grading.engines.warm_pool import WarmPool
    with pytest.raises(ValueError, match="workers must be at least 1"):
        WarmPool(0)


POOL_SCRIPT = """
import sys
from autograder.grading import gradebook
from autograder.grading.grade import Options
from autograder.grading.records import Submission
from autograder.grading.engines.warm_pool import WarmPool
opts = Options(assignments=[sys.argv[1]], workers=1, progress=False)
opts.db_url = gradebook.db_url(None)
gradebook.ensure_assignments(opts.db_url, opts.assignments)
with WarmPool(1) as pool:
    print(pool.pids()[0], flush=True)
    pool.grade(Submission("orphaned", sys.argv[1]), opts)
"""


def test_workers_stop_when_the_pools_process_dies(tmp_path):
    """A grading run killed mid-submission (its pool never closed) leaves no
    worker, fork or jailed process behind."""
    import subprocess
    import sys
    with course_data(tmp_path):
        specimens.submit(tmp_path, "orphaned", A, specimens.honest(A))
        owner = subprocess.Popen([sys.executable, "-c", POOL_SCRIPT, A], stdout=subprocess.PIPE, text=True,
                                 cwd=course.ROOT, env=dict(os.environ))
        worker = int(owner.stdout.readline())
        deadline = time.monotonic() + 120
        while not _children(worker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _children(worker), "the worker never started grading"
        time.sleep(2)
        started = process_tree(owner.pid)  # its workers and their forks, nbgrader, the jails, the jail server's jobs
        owner.kill()
        owner.wait()
        assert all_stop(started, within_s=5), "the dead pool's grading kept running"
        deadline = time.monotonic() + 30
        while _warm_processes(tmp_path) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _warm_processes(tmp_path) == []
        time.sleep(2)
        assert jailed_survivors(tmp_path) == []
