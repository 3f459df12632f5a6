"""Grade a batch of submissions once per test session, even under
pytest-xdist: the first worker that asks grades it (under a file lock) and
leaves the plain-data outcome in the session's shared temporary folder; the
others read it. Keeps the grader tests to one batch each."""
from __future__ import annotations

import fcntl
import json
import os
from contextlib import contextmanager
from pathlib import Path

from autograder import gradebook


@contextmanager
def course_data(path: Path):
    """Point the autograder at a scratch course data folder."""
    old = os.environ.get(gradebook.DATA_ENV_VAR)
    os.environ[gradebook.DATA_ENV_VAR] = str(path)
    try:
        yield path
    finally:
        if old is None:
            os.environ.pop(gradebook.DATA_ENV_VAR, None)
        else:
            os.environ[gradebook.DATA_ENV_VAR] = old


def shared_batch(tmp_path_factory, name: str, produce) -> dict:
    """produce(data_dir) -> JSON-able dict, run once per session."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # shared by all workers of this session
    out, data = root / f"{name}.json", root / f"{name}-course"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not out.is_file():
            data.mkdir(exist_ok=True)
            with course_data(data):
                outcome = produce(data)
            out.write_text(json.dumps({**outcome, "data": str(data)}))
    outcome = json.loads(out.read_text())
    outcome["data"] = Path(outcome["data"])
    return outcome
