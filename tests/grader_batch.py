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


@contextmanager
def recording_jails():
    """Note the folder of every jail reserved meanwhile in this process, so a
    test can tell its own jailed processes from those of other graders
    running on the same machine."""
    from autograder.jail import Jail
    bases: list[str] = []
    reserve = Jail.reserve.__func__

    def recorded(cls, *args, **kwargs):
        jail = reserve(cls, *args, **kwargs)
        bases.append(jail.base)
        return jail
    Jail.reserve = classmethod(recorded)
    try:
        yield bases
    finally:
        Jail.reserve = classmethod(reserve)


def jailed_survivors(bases: list[str]) -> list[int]:
    """Live processes under a jail uid that belong to one of these jails:
    their working folder or command line lies in the jail's folder (every
    jailed process starts in it, and the jail's own processes name it)."""
    from autograder.jail import UID_COUNT, UID_FIRST, live_process_uid
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        uid = live_process_uid(pid)
        if uid is None or not UID_FIRST <= uid < UID_FIRST + UID_COUNT:
            continue
        try:
            where = os.readlink(f"/proc/{pid}/cwd") + "\0" + Path(f"/proc/{pid}/cmdline").read_text(errors="replace")
        except OSError:  # exited meanwhile
            continue
        if any(base in where for base in bases):
            found.append(int(pid))
    return found
