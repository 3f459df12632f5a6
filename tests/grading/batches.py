"""Graded batches for the grader's tests: a batch is graded once per test
session, even under pytest-xdist (shared_batch), in a scratch course data
folder (course_data); what the batch left running (jailed_survivors,
which sees this batch's processes only, whatever else runs on the machine);
and whether given processes stopped (process_tree, still_runs, all_stop)."""
from __future__ import annotations

import os
import time
from contextlib import contextmanager
from pathlib import Path

from autograder.grading import gradebook

from ..helpers import once_per_session


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
    """produce(data_dir) -> JSON-able dict, run once per session (see
    helpers.once_per_session) with data_dir as the course data folder; the
    outcome gets "data"."""
    def graded(folder: Path) -> dict:
        with course_data(folder):
            return produce(folder)
    outcome = once_per_session(tmp_path_factory, name, graded)
    outcome["data"] = outcome.pop("folder")
    return outcome


@contextmanager
def recording_jails():
    """Note the folder of every jail reserved meanwhile in this process or,
    for it, in a warm grading worker, so a test can tell its own jailed
    processes from those of other graders running on the same machine."""
    from autograder.grading.engines import warm_pool
    from autograder.grading.sandbox.jail import Jail
    bases: list[str] = []
    reserve = Jail.reserve.__func__

    def recorded(cls, *args, **kwargs):
        jail = reserve(cls, *args, **kwargs)
        bases.append(jail.base)
        return jail
    Jail.reserve = classmethod(recorded)
    warm_pool.JAIL_LISTENERS.append(bases.append)
    try:
        yield bases
    finally:
        Jail.reserve = classmethod(reserve)
        warm_pool.JAIL_LISTENERS.remove(bases.append)


def jailed_survivors(data: Path, bases: list[str] = ()) -> list[int]:
    """Processes under a jail uid that belong to this batch, and to no other
    grader on the machine, and may still run (still_running):
    - every process in a PID namespace whose init was started for this batch
      (the init keeps the jail process's environment, which names the
      batch's course data folder); while anything of a job runs, its init
      does, since the namespace dies with it;
    - and, where a jail had no PID namespace, every process whose working
      folder or command line lies in one of the `bases` (the folders of the
      jails made in this process: a jailed process starts there)."""
    from autograder.grading.sandbox.jail import UID_COUNT, UID_FIRST, live_process_uid
    marker = f"{gradebook.DATA_ENV_VAR}={data}".encode()
    host_ns = os.readlink("/proc/self/ns/pid")
    ours, jailed = set(), {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            ns = os.readlink(f"/proc/{pid}/ns/pid")
        except OSError:  # exited meanwhile, or not ours to inspect
            continue
        try:
            if ns != host_ns and marker in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                ours.add(ns)
        except OSError:
            pass
        try:
            uid = live_process_uid(pid)
            if uid is not None and UID_FIRST <= uid < UID_FIRST + UID_COUNT:
                where = os.readlink(f"/proc/{pid}/cwd") + "\0" + Path(f"/proc/{pid}/cmdline").read_text(errors="replace")
                jailed[int(pid)] = (ns, where)
        except OSError:  # exited meanwhile
            continue
    return still_running([pid for pid, (ns, where) in jailed.items() if ns in ours or any(base in where for base in bases)])


def _stat_fields(pid: int) -> list[str] | None:
    """/proc/PID/stat after the command name (state first); None if gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def process_tree(pid: int) -> dict[int, str]:
    """{pid: start time} of every process under pid (not pid itself)."""
    parents, starts = {}, {}
    for p in filter(str.isdigit, os.listdir("/proc")):
        fields = _stat_fields(int(p))
        if fields is not None:
            parents[int(p)], starts[int(p)] = int(fields[1]), fields[19]
    found, frontier = set(), {pid}
    while frontier:
        frontier = {p for p, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return {p: starts[p] for p in found}


def start_time(pid: int) -> str | None:
    fields = _stat_fields(pid)
    return None if fields is None else fields[19]


PF_EXITING = 0x4
SIGKILL_BIT = 1 << (9 - 1)


def still_runs(pid: int, start: str) -> bool:
    """Whether pid is still that process and may still run its own code.
    Stopped: gone, a zombie, exiting (PF_EXITING), or with SIGKILL pending,
    after which it never returns to its code; how long the kernel then takes
    to free its memory depends on the machine's load, not on the grader."""
    fields = _stat_fields(pid)
    if fields is None or fields[19] != start or fields[0] in ("Z", "X") or int(fields[6]) & PF_EXITING:
        return False
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
        status = dict(line.split(":", 1) for line in lines if ":" in line)
    except OSError:
        return False
    return not any(int(status.get(name, "0").strip(), 16) & SIGKILL_BIT for name in ("SigPnd", "ShdPnd"))


def still_running(pids: list[int]) -> list[int]:
    """Those of pids that may still run their own code (still_runs): a killed
    process in uninterruptible sleep (a page read on a busy disk) stays in
    /proc until the read ends, but with SIGKILL pending it never runs again."""
    return [pid for pid in pids if still_runs(pid, start_time(pid))]


def all_stop(started: dict[int, str], within_s: float) -> bool:
    """Whether every process of `started` ({pid: start time}) stops (see
    still_runs) within within_s seconds."""
    stop_by = time.monotonic() + within_s
    while any(still_runs(p, t) for p, t in started.items()):
        if time.monotonic() > stop_by:
            return False
        time.sleep(0.02)
    return True
