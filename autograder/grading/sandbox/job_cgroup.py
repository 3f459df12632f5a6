"""One cgroup per jail job: totals for the whole job, not per process.

RLIMIT_AS and RLIMIT_FSIZE bound each process and each file; a job of
several processes can hold several times its address-space limit, and a
fork bomb spins on every core. A job cgroup bounds the job's memory (its
processes and the tmpfs pages they write), its number of tasks and its CPU
share together. Two kinds of host:

- cgroup v2 where a cgroup is delegated to the grader: TINYLM_JAIL_CGROUP
  names it, or the grader's own cgroup is used when it already enables the
  memory and pids controllers for its children. Job cgroups get memory.max,
  memory.swap.max = 0, pids.max and cpu.max.
- cgroup v1 (one hierarchy per controller, as on this project's CI machine):
  a job cgroup below the grader's own in each writable memory, pids and cpu
  hierarchy, with memory.limit_in_bytes (and memsw, when swap is accounted),
  pids.max and cpu.cfs_quota_us.

Neither (not root, no delegation): JobCgroup.kind is "none" and `why` says
so; the jail then falls back to per-process limits and per-uid RLIMIT_NPROC.
A job cgroup is named after the job's uid slot, so a slot's cgroup left by a
grader that died is found, emptied and made anew when the slot is reserved.
"""
from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

ENV_VAR = "TINYLM_JAIL_CGROUP"
CONTROLLERS = ("memory", "pids", "cpu")
CPU_PERIOD_US = 100_000
SWAP_FILES = ("memory.swap.max", "memory.memsw.limit_in_bytes")


@dataclass
class JobCgroup:
    kind: str                                         # "v2", "v1" or "none"
    folders: list[str] = field(default_factory=list)  # the job's cgroup (v1: one per controller)
    controllers: list[str] = field(default_factory=list)
    why: str = ""

    def describe(self) -> str:
        if self.kind == "none":
            return f"no job cgroup ({self.why})"
        return f"cgroup {self.kind} ({', '.join(self.controllers)})"


def _mounts(mountinfo: str) -> list[tuple[str, str, set[str]]]:
    """(mount point, file system type, super options) of each line of /proc/self/mountinfo."""
    out = []
    for line in mountinfo.splitlines():
        fields = line.split()
        if "-" not in fields:
            continue
        dash = fields.index("-")
        out.append((fields[4].replace("\\040", " "), fields[dash + 1], set(fields[dash + 3].split(","))))
    return out


def _own_paths(proc_cgroup: str) -> dict[str, str]:
    """This process's cgroup per controller ('' for the v2 hierarchy)."""
    paths = {}
    for line in proc_cgroup.splitlines():
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else [""]:
            paths[name] = path
    return paths


def _enabled(folder: Path) -> set[str]:
    try:
        return set((folder / "cgroup.subtree_control").read_text().split())
    except OSError:
        return set()


def v2_parent(mounts, own: dict[str, str], env=os.environ) -> Path | None:
    """The cgroup v2 folder job cgroups are made in, or None."""
    if env.get(ENV_VAR):
        candidates = [Path(env[ENV_VAR])]
    else:
        candidates = [Path(point) / own[""].lstrip("/") for point, kind, _ in mounts if kind == "cgroup2" and "" in own]
    for folder in candidates:
        if {"memory", "pids"} <= _enabled(folder) and os.access(folder, os.W_OK):
            return folder
    return None


def v1_parents(mounts, own: dict[str, str]) -> dict[str, Path]:
    """controller -> the grader's own cgroup folder in that writable v1 hierarchy."""
    found = {}
    for point, kind, options in mounts:
        for name in CONTROLLERS:
            if kind == "cgroup" and name in options and name in own and name not in found:
                folder = Path(point) / own[name].lstrip("/")
                if os.access(folder, os.W_OK):
                    found[name] = folder
    return found


def _host(mountinfo: Path = Path("/proc/self/mountinfo"), proc_cgroup: Path = Path("/proc/self/cgroup")):
    try:
        return _mounts(mountinfo.read_text()), _own_paths(proc_cgroup.read_text())
    except OSError:
        return [], {}


def _limit_files(kind: str, controller: str, memory: int, tasks: int, cpus: float) -> list[tuple[str, str]]:
    """(file, value) pairs, in the order they must be written."""
    quota = str(max(1000, int(cpus * CPU_PERIOD_US)))
    if kind == "v2":
        return [("memory.max", str(memory)), ("memory.swap.max", "0"), ("pids.max", str(tasks)),
                ("cpu.max", f"{quota} {CPU_PERIOD_US}")]
    return {"memory": [("memory.limit_in_bytes", str(memory)), ("memory.memsw.limit_in_bytes", str(memory))],
            "pids": [("pids.max", str(tasks))],
            "cpu": [("cpu.cfs_period_us", str(CPU_PERIOD_US)), ("cpu.cfs_quota_us", quota)]}[controller]


NO_ROOT = "not root and no delegated cgroup v2 in " + ENV_VAR


def plan(host=None, env=os.environ) -> JobCgroup:
    """Where job cgroups go on this host: folders are the parents (v2: one,
    v1: one per controller), nothing is created."""
    if os.geteuid() != 0 and not env.get(ENV_VAR):
        return JobCgroup("none", why=NO_ROOT)
    mounts, own = host or _host()
    parent = v2_parent(mounts, own, env)
    if parent is not None:
        return JobCgroup("v2", [str(parent)], [c for c in CONTROLLERS if c in _enabled(parent)])
    v1 = v1_parents(mounts, own)
    if v1:
        return JobCgroup("v1", [str(f) for f in v1.values()], list(v1))
    return JobCgroup("none", why="no delegated cgroup v2 and no writable cgroup v1 controller")


def make(name: str, memory_bytes: int, tasks: int, cpus: float, host=None, env=os.environ) -> JobCgroup:
    """Create (or empty and recreate) the job cgroup `name` with its limits."""
    where = plan(host, env)
    if where.kind == "v2":  # one cgroup with every controller
        groups = [(Path(where.folders[0]) / name, where.controllers)]
    else:  # v1: one cgroup per controller's hierarchy
        groups = [(Path(parent) / name, [c]) for parent, c in zip(where.folders, where.controllers)]
    made = JobCgroup(where.kind, why=where.why)
    try:
        for folder, controllers in groups:
            remove([str(folder)])
            folder.mkdir()
            made.folders.append(str(folder))
            for c in controllers:
                for file, value in _limit_files(where.kind, c, memory_bytes, tasks, cpus):
                    if file not in SWAP_FILES or (folder / file).exists():  # only where swap is accounted
                        (folder / file).write_text(value)
            made.controllers += controllers
    except OSError as err:
        remove(made.folders)
        return JobCgroup("none", why=f"could not set up the {where.kind} job cgroup: {err}")
    return made


def attach(folders: list[str]) -> None:
    """Move the calling process into the job cgroup; its children follow."""
    for folder in folders:
        Path(folder, "cgroup.procs").write_text("0")


def remove(folders: list[str], within_s: float = 5.0) -> bool:
    """Kill every task left in the job cgroups and remove them. False if one
    is still there after `within_s` (a task stuck in the kernel): the next
    reservation of the slot tries again, and makes no cgroup if it fails."""
    deadline = time.monotonic() + within_s
    for folder in map(Path, folders):
        while folder.is_dir():
            _kill_all(folder)
            try:
                folder.rmdir()
            except OSError:  # EBUSY while its last tasks exit
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.02)
    return True


def _kill_all(folder: Path) -> None:
    if (folder / "cgroup.kill").exists():
        (folder / "cgroup.kill").write_text("1")
        return
    try:
        pids = (folder / "cgroup.procs").read_text().split()
    except OSError:
        return
    for pid in pids:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except OSError:
            pass
