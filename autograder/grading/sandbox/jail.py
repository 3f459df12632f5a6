"""Run one untrusted process (a grading kernel or a recheck child) in a jail.

    python -m autograder.grading.sandbox.jail -- COMMAND ...

reads its settings from the TINYLM_JAIL environment variable (JSON, made by
`Jail.env()` in the trusted parent) and then, before exec'ing COMMAND:

1. makes a fresh working folder holding copies of only the allowed files (the
   student's notebook and the released data files; symlinks refused);
2. when root: enters new mount, network, IPC and PID namespaces and pivots
   into a root of its own that holds only what the job may use (an
   allow-list computed per environment, view.py): the interpreter, the
   virtual environment, the course's packages and the system files they
   load (shared libraries, /bin/sh, zones, locales, fonts), read-only; the job's
   own folder; a private /tmp, /var/tmp, /dev/shm; a /proc that shows only
   the job's processes. Everything else of the machine (other jobs' folders,
   the course data folder with the gradebook and all submissions, solutions/
   and .git of the checkout, home folders) is not there at all. It then
   switches to an unprivileged uid reserved for this one job. When not root
   it tries an unprivileged user namespace for the same, and says what it
   could not do. Where the allow-list root cannot be made, it falls back to
   covering the hidden paths with empty tmpfs mounts (jail_init._isolate_files) and
   says so;
3. sets resource limits (address space, CPU seconds, processes, file size),
   and installs the seccomp filter (syscall_filter.py: no kernel keyrings,
   no file locks, leases or watches, no page-cache residency probes or
   drops and no shared futexes, which would signal between jobs through the
   files they share read-only);
4. execs COMMAND with a minimal environment (no database URL, no secrets).

Totals for the whole job (job_cgroup.py, made by `Jail.reserve`): where the
host lets the grader make cgroups, the job's processes share one cgroup
with a memory, task and CPU limit. Everything the job can write is bounded
too: as root its folder (work, home, run) is a tmpfs of `folder_mb` mounted
on the host (the trusted side reads what the job leaves there), and its
private /tmp, /var/tmp, /dev/shm and /dev/mqueue are folders of one tmpfs of
`scratch_mb`; a write past either gets ENOSPC.

With a PID namespace the process tree is

    jail (root, outside)  ->  init (PID 1, jail uid)  ->  COMMAND (jail uid)

The outside process forwards the signals a kernel manager sends (interrupt,
terminate) to init, which forwards them to COMMAND; init reaps orphans and
exits with COMMAND's exit status (128 + N when a signal N ended it). When
init exits or is killed, the kernel kills every process left in the
namespace (daemons a student forked included), and init dies when the
outside process dies (PR_SET_PDEATHSIG), so killing the process a kernel
manager started ends the whole job. `Jail.release` also kills whatever still
runs under the job's uid before the uid is reused.

Before the job, `Jail.reserve` makes every page of the files the jail
shows resident (page_cache.py), so no job finds a cold page to load, or one
another job loaded.

What it does not isolate (docs/security.md says it in full): the files it
shows read-only are the same files for every job (the filter refuses the
calls that would signal through them), and time and load: CPU, memory and
the page cache are shared, so a job can sense another's load.

This module is the trusted side's part (Limits, Jail and its reservation,
kill_uid, the keyrings, the job folder's mount) and the runnable entry; the
steps above, inside the jail, are jail_init.py (run, main).
"""
from __future__ import annotations

import ctypes
import errno
import fcntl
import json
import os
import shutil
import signal
import struct
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ... import course
from . import job_cgroup, page_cache, view
from .jail_init import (ENV_VAR, JAIL_BASE, MNT_DETACH, MS_NODEV, MS_NOSUID, DEFAULT_SCRATCH_MB, folder_mounts,
                        libc_call, load_libc, main)
from .syscall_filter import KEYCTL

UID_FIRST, UID_COUNT = 61000, 1000
KEYCTL_GET_KEYRING_ID, KEYCTL_DESCRIBE, KEYCTL_CLEAR, KEYCTL_READ = 0, 6, 7, 11
KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING = -4, -5
UID_KEYRINGS = (KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING)  # a uid's own, outliving its processes


@dataclass
class Limits:
    memory_mb: int = 4096        # address space per process; with a job cgroup also the job's total memory
    cpu_s: int = 600             # CPU seconds for the whole process
    nproc: int = 512             # tasks (threads count) for the jail uid; with a job cgroup, for the job
    file_mb: int = 64            # largest file it may write
    wall_s: float = 300.0        # enforced by the parent, not here
    cpus: float = 1.0            # CPU share of the whole job (with a job cgroup)
    folder_mb: int = 256         # the job's folder: work, home, run (as root)
    scratch_mb: int = DEFAULT_SCRATCH_MB  # its /tmp, /var/tmp, /dev/shm and /dev/mqueue together


@dataclass
class Jail:
    """One job's jail: a reserved uid, a folder, and what to copy and hide."""

    limits: Limits = field(default_factory=Limits)
    copy: list[str] = field(default_factory=list)      # files copied into the working folder
    hide: list[str] = field(default_factory=list)      # paths covered by an empty tmpfs
    uid: int | None = None
    base: str = ""
    notes: list[str] = field(default_factory=list)
    cgroup: job_cgroup.JobCgroup = field(default_factory=lambda: job_cgroup.JobCgroup("none"))
    folder_capped: bool = False
    _lock: object = None

    @classmethod
    def reserve(cls, limits: Limits, copy=(), hide=()) -> "Jail":
        """Take a free uid slot (a lock file per uid, so concurrent graders
        never share one) and make the job's folders."""
        JAIL_BASE.mkdir(mode=0o711, exist_ok=True)
        os.chmod(JAIL_BASE, 0o711)
        # Before any job of ours runs: nothing it can read is cold, so it can
        # neither load a page for a later job to find nor find one loaded.
        try:
            warmth = keep_view_warm()
        except OSError as err:
            warmth = page_cache.Warmth(skipped=str(err))
        for uid in range(UID_FIRST, UID_FIRST + UID_COUNT):
            fh = open(JAIL_BASE / f"uid-{uid}.lock", "w")
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                fh.close()
                continue
            _reclaim(uid)  # what a holder of this slot that died left behind
            base = Path(tempfile.mkdtemp(prefix=f"{uid}-", dir=JAIL_BASE))
            jail = cls(limits, [str(p) for p in copy], [str(p) for p in hide], uid, str(base), _lock=fh)
            if warmth.skipped and not warmth.skipped.startswith(page_cache.NOTHING_RECLAIMED):
                jail.notes.append(f"page cache not kept warm ({warmth.skipped})")
            if os.geteuid() == 0:
                try:
                    _mount_folder(base, uid, limits.folder_mb)
                    jail.folder_capped = True
                except OSError as err:
                    jail.notes.append(f"job folder not capped ({err})")
                os.chown(base, uid, uid)
                os.chmod(base, 0o700)
                jail.cgroup = job_cgroup.make(f"tinylm-jail-{uid}", limits.memory_mb * 1024 * 1024,
                                              limits.nproc, limits.cpus)
            for sub in ("work", "run", "home"):
                (base / sub).mkdir()
                if os.geteuid() == 0:
                    os.chown(base / sub, uid, uid)
            return jail
        raise RuntimeError(f"all {UID_COUNT} jail slots are busy (lock files in {JAIL_BASE})")

    @property
    def workdir(self) -> Path:
        return Path(self.base) / "work"

    @property
    def rundir(self) -> Path:
        return Path(self.base) / "run"

    def env(self) -> dict:
        shown = job_view()
        data = {"limits": asdict(self.limits), "copy": self.copy, "hide": [*self.hide, *shown.covered],
                "uid": self.uid, "base": self.base, "expose": shown.shown, "links": shown.links,
                "cgroup": self.cgroup.folders}
        return {ENV_VAR: json.dumps(data)}

    def release(self) -> None:
        """Kill whatever the job left running under its uid (a second net: the
        PID namespace already ends with its init) or in its cgroup, clear the
        uid's keys, unmount and remove its folder."""
        if os.geteuid() == 0 and self.uid is not None:
            kill_uid(self.uid)
            _unmount(Path(self.base))
            job_cgroup.remove(self.cgroup.folders)
            clear_keys(self.uid)
        shutil.rmtree(self.base, ignore_errors=True)
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()


PAGE_CACHE_STATE = JAIL_BASE / "page-cache.json"


def job_view() -> view.View:
    """What a job's root shows of the machine (view.py): this interpreter's
    view with the course's packages, computed once per environment."""
    return view.view_for(view_interpreter(), needed_paths())


def visible_paths() -> list[str]:
    """Every file a job can read that another job can read too: the
    read-only part of its allow-list root (sysfs, which has no page cache,
    left out), less the folders covered inside it (job_view().covered)."""
    return job_view().shown


def keep_view_warm(force: bool = False) -> page_cache.Warmth:
    """page_cache.keep_warm over what a job can read (visible_paths)."""
    shown = job_view()
    return page_cache.keep_warm(shown.shown, PAGE_CACHE_STATE, force=force, exclude=shown.covered)


def view_size() -> int:
    """The bytes of the files a job can read (a walk, nothing read)."""
    shown = job_view()
    return page_cache.visible_size(shown.shown, exclude=shown.covered)


# The course's packages, the only part of a checkout a job may read (a
# checkout also holds solutions/, the course data folder and .git).
COURSE_PACKAGES = ("tinylm", "autograder")


def needed_paths() -> list[str]:
    """The folders the jailed Python imports from: the virtual environment,
    every folder its `python -I` path names (its standard library, a .pth
    file's), and the course's packages in each checkout it imports from,
    never a whole checkout. The view (job_view) adds the interpreter's
    executable and the system files they load."""
    roots = [Path(r).resolve() for r in course.course_roots()]
    paths = {os.path.realpath(sys.prefix)}
    for entry in _isolated_path():
        real = Path(os.path.realpath(entry))
        # a checkout on the path (an old-style editable install), or a folder above one: its packages only
        if real.exists() and not any(root == real or root.is_relative_to(real) for root in roots):
            paths.add(str(real))
    paths |= {str(root / name) for root in roots for name in COURSE_PACKAGES if (root / name).is_dir()}
    return sorted(paths)


_INTERPRETER: dict = {}


def view_interpreter() -> dict:
    """What `python -I` with this interpreter imports from and where it
    lives (view.interpreter), asked once per process."""
    if not _INTERPRETER:
        _INTERPRETER.update(view.interpreter(sys.executable))
    return dict(_INTERPRETER)


def _isolated_path() -> list[str]:
    """sys.path of `python -I` with this interpreter (what a jailed process imports from)."""
    return list(view_interpreter()["path"])


def process_status(pid: int | str) -> dict[str, str]:
    """The fields of /proc/PID/status (State, PPid, Uid, NSpid, ...), values
    stripped; empty if the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            return {name: value.strip() for name, value in (line.split(":", 1) for line in fh if ":" in line)}
    except OSError:  # it exited while we looked (ESRCH, ENOENT)
        return {}


def live_process_uid(pid: str) -> int | None:
    """The real uid of a live process; None if it is gone (or a zombie, which
    runs nothing and goes when its parent reaps it)."""
    fields = process_status(pid)
    if fields.get("State", "").split()[:1] == ["Z"]:
        return None
    try:
        return int(fields["Uid"].split()[0])
    except (KeyError, ValueError, IndexError):
        return None


def processes_of_uid(uid: int) -> list[int]:
    """PIDs of the live processes whose real uid is `uid`."""
    return [int(pid) for pid in os.listdir("/proc") if pid.isdigit() and live_process_uid(pid) == uid]


def kill_uid(uid: int, within_s: float = 5.0) -> int:
    """SIGKILL every process whose real uid is `uid` (daemons a student
    forked to outlive grading) until a scan of /proc finds none, or
    `within_s` seconds pass. Processes that exit during the scan are skipped.
    Returns how many were signalled."""
    killed = 0
    deadline = time.monotonic() + within_s
    while True:
        found = processes_of_uid(uid)
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        killed += len(found)
        if not found or time.monotonic() > deadline:
            return killed
        time.sleep(0.02)


def in_fork(action, uid: int | None = None) -> str:
    """Run action() in a fork, switched to `uid` first when one is given
    (root only): what it returned, as text; '' if it raised."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_end)
            if uid is not None:
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
            os.write(write_end, str(action()).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as answer:
        text = answer.read()
    os.waitpid(pid, 0)
    return text


def clear_keys(uid: int, within_s: float = 2.0) -> None:
    """Empty the user and user-session keyrings of `uid` (root only): keys
    are per uid and outlive the job, and jail uids are reused. The jail
    denies the keyring calls (syscall_filter); this is the net for a host
    where that filter could not be installed. Done as the uid, in a fork,
    since root has no rights on another uid's keyrings. Returns once the
    keys that were linked there are gone: the kernel drops an unlinked key
    only after an RCU grace period, and until then another uid may still
    read it."""
    def clear():
        libc = load_libc()
        own = {libc.syscall(KEYCTL, KEYCTL_GET_KEYRING_ID, keyring, 0) for keyring in UID_KEYRINGS}
        linked = [serial for keyring in UID_KEYRINGS
                  for serial in _keyring_contents(keyring) if serial not in own]  # the session one links the user one
        for keyring in UID_KEYRINGS:
            libc.syscall(KEYCTL, KEYCTL_CLEAR, keyring)
        deadline = time.monotonic() + within_s
        while any(map(_key_exists, linked)) and time.monotonic() < deadline:
            time.sleep(0.005)
    if KEYCTL is not None:
        in_fork(clear, uid)


def _keyring_contents(keyring: int) -> list[int]:
    """The serials linked in `keyring` (KEYCTL_READ on a keyring lists them)."""
    buf = ctypes.create_string_buffer(4 * 1024)
    size = load_libc().syscall(KEYCTL, KEYCTL_READ, keyring, buf, len(buf))
    return list(struct.unpack_from(f"{min(max(size, 0), len(buf)) // 4}i", buf.raw))


def _key_exists(serial: int) -> bool:
    """A key is still there if describing it fails for any reason but 'no such key'."""
    libc = load_libc()
    if libc.syscall(KEYCTL, KEYCTL_DESCRIBE, serial, None, 0) >= 0:
        return True
    return ctypes.get_errno() not in (errno.ENOKEY, errno.EKEYREVOKED, errno.EKEYEXPIRED)


def _mount_folder(base: Path, uid: int, size_mb: int) -> None:
    """The job's folder becomes a tmpfs of `size_mb`, on the host: what the
    job writes there never reaches the host's disk, and not past the cap."""
    libc_call(load_libc().mount, b"tmpfs", str(base).encode(), b"tmpfs", ctypes.c_ulong(MS_NOSUID | MS_NODEV),
          f"size={size_mb}m,mode=0700,uid={uid},gid={uid}".encode(), what=f"job folder {base}")




def _unmount(folder: Path) -> None:
    load_libc().umount2(str(folder).encode(), MNT_DETACH)


def _reclaim(uid: int) -> None:
    """Before a slot is used: end its processes, unmount and remove its
    folders and clear its keys, in case the grader that held it died."""
    if os.geteuid() != 0:
        return
    kill_uid(uid)
    for folder in folder_mounts(uid):
        _unmount(folder)
        shutil.rmtree(folder, ignore_errors=True)
    clear_keys(uid)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
