"""Grading on a Dask cluster (autograder/grading/engines/cluster.py): a local
`dask scheduler` and two `dask worker` processes, each with its own course
data folder and one thread, writing a real PostgreSQL gradebook (skipped
with the reason when no server answers: the pg_database fixture).

- A batch of honest, wrong and hostile submissions graded on the cluster
  gives the results, feedback pages and CSV export of a single-machine
  grade_all of the same batch, and the workers graded it through warm
  grading workers (grading/engines/warm_pool.py), as one machine does.
- A job on a worker finds neither the client's course data folder nor a
  worker's (the jail's allow-list root), and keeps its points.
- A worker SIGKILLed while it grades loses nothing: its submission is
  graded by the other worker, every submission once in the gradebook with
  the right score, and nothing the dead worker started (its warm worker
  included) keeps running.
"""
from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from autograder import course, specimens
from autograder.grading import gradebook
from autograder.grading.errors import GradingError
from ..batches import course_data, process_tree, still_runs
from ..specimens import SWALLOW, WRONG_EMBED


A = "01_embeddings"
pytestmark = pytest.mark.skipif(A not in course.assignments(), reason="notebook 01 is not built")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One cluster for the module's tests, started (and its warm workers
    warmed) once: the kill test, which kills worker0, comes last in the file."""
    pytest.importorskip("distributed", reason="dask.distributed is not installed (pip install '.[cluster]')")
    from autograder.grading.engines.cluster import LocalGradingCluster
    with LocalGradingCluster(tmp_path_factory.mktemp("cluster"), workers=2) as c:
        yield c


def _submit_batch(data: Path) -> None:
    specimens.submit(data, "ann", A, specimens.honest(A))
    specimens.submit(data, "bob", A, specimens.notebook(A))  # the release notebook: nothing answered
    # fools the notebook kernel (every failing assert swallowed): the recheck takes the points back
    specimens.submit(data, "cat", A, specimens.notebook(A, {"embed": SWALLOW + WRONG_EMBED}))
    (data / "submitted" / "cat" / A / "secret").symlink_to("/etc/hostname")  # dropped, and said so
    specimens.submit(data, "dan", A, raw=b"{ this is not a notebook")


def _grade(data: Path, **options) -> tuple[dict, dict, dict]:
    """(results without timings (seconds, timing), feedback pages, export CSVs) of one run."""
    from autograder.grading.publish.export import export
    from autograder.grading.publish.feedback import write_feedback
    from autograder.grading.batch import Options, grade_all
    with course_data(data):
        results = grade_all(Options(assignments=[A], progress=False, **options))
        pages = {p.relative_to(data).as_posix(): p.read_text() for p in write_feedback(results)}
        files = export(gradebook.db_url(options.get("db_url")), data / "exports")
    csvs = {p.name: p.read_text() for p in files}
    return {r["student"]: {k: v for k, v in r.items() if k not in ("seconds", "timing")} for r in results}, pages, csvs


@pytest.mark.grader
@pytest.mark.slow
def test_cluster_grades_like_one_machine(cluster, pg_database, tmp_path):
    for run in ("local", "cluster"):
        _submit_batch(tmp_path / run)
    local = _grade(tmp_path / "local", workers=2)  # SQLite, threads: the single-machine run
    on_cluster = _grade(tmp_path / "cluster", db_url=pg_database, scheduler=cluster.address)
    results = on_cluster[0]
    # the batch is what it claims: full marks, nothing, a kernel fooled and caught, a malformed file
    assert results["ann"]["score"] == results["ann"]["max_score"] > 0, results["ann"]["problems"]
    assert results["bob"]["score"] == 0 and results["bob"]["status"] == "graded"
    fooled = [c for c, v in results["cat"]["cells"].items() if v["kernel_score"] == v["max_score"] > v["score"]]
    assert results["cat"]["score"] == 0 and fooled and results["cat"]["flags"], results["cat"]["cells"]
    assert any("symbolic link «secret»" in p for p in results["cat"]["problems"])
    assert results["dan"]["status"] == "malformed"
    assert on_cluster[0] == local[0]
    assert on_cluster[1] == local[1], "feedback pages differ"
    assert on_cluster[2] == local[2], "CSV exports differ"
    assert not (tmp_path / "cluster" / "gradebook.db").exists(), "the cluster run fell back to SQLite"
    kept = [p for data in cluster.worker_data for kind in ("submitted", "autograded", "results")
            for p in (data / kind).rglob("*") if p.is_file()]
    assert not kept, f"a worker kept a student's files: {kept}"
    # graded warm, as on one machine: each worker's grading child keeps its warm worker for the next task
    warm = [worker for worker in cluster.worker_pids
            if any(_runs(p, b"autograder.grading.engines.warm_worker") for p in process_tree(worker))]
    assert warm, "no Dask worker graded through a warm grading worker"


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")[:160].decode(errors="replace")
    except OSError:
        return "(gone)"


def _runs(pid: int, module: bytes) -> bool:
    """Whether pid's command line names module."""
    try:
        return module in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


LOOK_FOR_THE_CLIENT = """import os as _os
print("CLIENT-DATA", {{p: _os.path.exists(p) for p in {paths!r}}})
"""


@pytest.mark.grader
@pytest.mark.slow
def test_a_job_on_a_worker_does_not_see_the_clients_course_data(cluster, pg_database, tmp_path):
    """A Dask worker's jail used to hide a list of folders: a job read other
    students' submitted and autograded notebooks in the client's course data
    folder (the workers run on the client's machine here, as in a small
    course). The allow-list root leaves it absent; the job keeps its points."""
    data = tmp_path / "client"
    specimens.submit(data, "ann", A, specimens.honest(A))
    other = data / "submitted" / "ann" / A / f"{A}.ipynb"
    paths = [str(data), str(other), str(cluster.worker_data[0]), str(cluster.worker_data[1])]
    answers = specimens.solution_answers(A)
    first = next(iter(answers))
    answers[first] = LOOK_FOR_THE_CLIENT.format(paths=paths) + answers[first]
    specimens.submit(data, "eve", A, specimens.notebook(A, answers))
    results, _, _ = _grade(data, db_url=pg_database, scheduler=cluster.address)
    assert results["eve"]["score"] == results["eve"]["max_score"] > 0, results["eve"]
    import nbformat
    graded = nbformat.read(str(data / "autograded" / "eve" / A / f"{A}.ipynb"), as_version=4)
    printed = "".join(o.get("text", "") for c in graded.cells for o in c.get("outputs", []))
    line = next(l for l in printed.splitlines() if l.startswith("CLIENT-DATA "))
    assert "True" not in line, f"a job on a worker saw the client's or a worker's course data: {line}"


@pytest.mark.grader
@pytest.mark.slow
def test_a_killed_worker_loses_nothing(cluster, pg_database, tmp_path):
    data = tmp_path / "client"
    honest, blank = specimens.honest(A), specimens.notebook(A)
    for student, nb in (("ann", honest), ("bob", blank), ("cat", honest)):
        specimens.submit(data, student, A, nb)
    victim, victim_data = cluster.worker_pids[0], cluster.worker_data[0]
    killed: dict = {}

    def kill_mid_grading():
        """SIGKILL worker0 while it grades: once it has a submission in its
        folder and nbgrader has started a jailed kernel (so the gradebook
        already holds that submission's row from the worker about to die).
        The kernel's jail is started as `python -m autograder.grading.sandbox.jail`
        by nbgrader, cold or in a warm worker's fork alike."""
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            in_progress = sorted(p.name for p in (victim_data / "submitted").glob("*") if (p / A).is_dir())
            tree = process_tree(victim)  # grading child -> (warm worker -> fork ->) nbgrader -> jail -> ...
            if in_progress and any(_runs(p, b"autograder.grading.sandbox.jail") for p in tree):
                names = {p: _command(p) for p in tree}
                os.kill(victim, signal.SIGKILL)
                # the grading it started stops now, not when its submission would have been done: each
                # process dies with its parent (the kernel's doing, whatever the load), so within 5 s
                # every one is gone or has SIGKILL pending (the kernel's freeing of its memory is the
                # machine's business, not the grader's)
                stop_by = time.monotonic() + 5
                while time.monotonic() < stop_by and any(still_runs(p, t) for p, t in tree.items()):
                    time.sleep(0.05)
                killed.update(students=in_progress, tree=tree,
                              survivors={p: names[p] for p, t in tree.items() if still_runs(p, t)})
                return
            time.sleep(0.1)
    killer = threading.Thread(target=kill_mid_grading)
    killer.start()
    results, _, csvs = _grade(data, db_url=pg_database, scheduler=cluster.address)
    killer.join()
    assert killed, "worker0 never started grading, so nothing was killed"
    assert cluster.procs[1].wait(timeout=10) == -signal.SIGKILL
    for student in killed["students"]:
        assert student in results, f"{student}, graded on the killed worker, is missing"
    assert {s: (r["status"], r["score"] == r["max_score"] > 0) for s, r in results.items()} == {
        "ann": ("graded", True), "bob": ("graded", False), "cat": ("graded", True)}
    assert results["bob"]["score"] == 0
    # once each in the gradebook, with the scores of the results
    with gradebook.open_gradebook(pg_database) as gb:
        rows = [(s.student.id, s.assignment.name) for a in gb.assignments for s in a.submissions]
    assert sorted(rows) == [("ann", A), ("bob", A), ("cat", A)]
    # the export's first five columns (later ones, such as lateness, are not this test's)
    per_notebook = [",".join(line.split(",")[:5]) for line in csvs["grades_per_notebook.csv"].splitlines()[1:]]
    assert sorted(per_notebook) == sorted(f"{s},{A},{r['score']:g},{r['max_score']:g},graded"
                                          for s, r in results.items())
    assert not killed["survivors"], f"the killed worker's grading kept running: {killed['survivors']}"


def test_sqlite_is_refused_with_a_scheduler(tmp_path):
    from autograder.grading.batch import Options, grade_all
    with course_data(tmp_path), pytest.raises(GradingError, match="--db-url postgresql"):
        grade_all(Options(assignments=[A], scheduler="tcp://127.0.0.1:1", db_url=f"sqlite:///{tmp_path}/gb.db"))
    assert not (tmp_path / "gb.db").exists()


def test_a_worker_refuses_the_clients_folder_and_another_course_version(tmp_path):
    from autograder.grading.engines.cluster import CLIENT_MARK, WorkerSetupError, fingerprint, grade_task
    task = {"student": "ann", "assignment": A, "files": {f"{A}.ipynb": b"{}"}, "original": None,
            "options": None, "fingerprint": fingerprint(A), "client_token": "t0k"}
    with course_data(tmp_path):
        (tmp_path / CLIENT_MARK.format(token="t0k")).write_text("")
        with pytest.raises(WorkerSetupError, match=gradebook.DATA_ENV_VAR):
            grade_task(task)
        with pytest.raises(WorkerSetupError, match="another version"):
            grade_task({**task, "fingerprint": "0" * 64})
    assert not (tmp_path / "submitted").exists(), "a refused task wrote into the folder"


def test_task_files_cannot_leave_the_submission_folder(tmp_path):
    from autograder.grading.engines.cluster import write_files
    for name in ("../escape", "/abs", "a/../../b", ""):
        with pytest.raises(ValueError, match="not a plain relative path"):
            write_files(tmp_path / "sub", {name: b"x"})
    assert not (tmp_path / "escape").exists()
