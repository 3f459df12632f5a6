"""The jail's init: what runs from `python -m autograder.grading.sandbox.jail -- COMMAND`
(jail.py says what the jail is) until COMMAND is exec'd.

main reads the settings that `Jail.env()` made (TINYLM_JAIL) and hands
COMMAND to a warm jail server (warm_client.py) or to run, which enters the
namespaces, forks the namespace's init, makes the job's root (an allow-list
root, or the covered-paths fallback), joins the job cgroup, switches to the
job's uid, sets the limits, installs the seccomp filter and execs COMMAND.
The trusted side's part (Limits, Jail, kill_uid, the keyrings and the job
folder's mount) is jail.py, which imports this module, never the reverse.
"""
from __future__ import annotations

import ctypes
import errno
import json
import math
import os
import resource
import select
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

from . import job_cgroup
from .syscall_filter import install_job_filter

ENV_VAR = "TINYLM_JAIL"
# The pid of the process that starts the jail, as that process knew itself:
# a starter killed in the instant between the jail's start and its first
# line leaves it adopted by another process, whose pid the jail must not
# take for its starter's (die_with_starter).
STARTER_ENV = "TINYLM_JAIL_STARTER"
JAIL_BASE = Path(tempfile.gettempdir()) / "tinylm-jail"
CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET = 0x00020000, 0x10000000, 0x40000000
CLONE_NEWIPC, CLONE_NEWPID = 0x08000000, 0x20000000
MS_REC, MS_PRIVATE, MS_BIND, MS_RDONLY = 0x4000, 0x40000, 0x1000, 0x1
MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x2, 0x4, 0x8
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_DUMPABLE = 1, 4
SCRATCH = ("/tmp", "/var/tmp", "/dev/shm", "/dev/mqueue")  # private to each job, one tmpfs together
DEFAULT_SCRATCH_MB = 128
# What a kernel manager or the recheck sends the jail: passed on to COMMAND.
FORWARDED_SIGNALS = (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2)
# Environment the jailed process may see; everything else (database URLs,
# tokens, the jail settings themselves) is dropped.
PASSED_ENV = ("PATH", "LANG", "LC_ALL", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NBGRADER_EXECUTION",
              "TINYLM_DEVICE", "TZ")


def folder_mounts(uid: int | None = None) -> list[Path]:
    """The job folders mounted under JAIL_BASE (of slot `uid`, or all)."""
    prefix = f"{JAIL_BASE}/{'' if uid is None else f'{uid}-'}"
    with open("/proc/self/mountinfo") as fh:
        points = [line.split()[4] for line in fh]
    return [Path(p) for p in points if p.startswith(prefix)]


def load_libc():
    return ctypes.CDLL(None, use_errno=True)


def libc_call(fn, *args, what: str):
    if fn(*args) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _copy_in(files: list[str], workdir: Path) -> None:
    for f in files:
        src = Path(f)
        if src.is_symlink() or not src.is_file():
            continue  # symlinks are refused here as well as at collection
        shutil.copyfile(src, workdir / src.name, follow_symlinks=False)


def _hide(paths: list[str], libc) -> None:
    for p in paths:
        path = Path(p)
        if path.is_dir() and not path.is_symlink():
            libc_call(libc.mount, b"tmpfs", str(path).encode(), b"tmpfs", ctypes.c_ulong(MS_RDONLY), b"size=4k,mode=0",
                  what=f"hide {path}")
        elif path.is_file():
            libc_call(libc.mount, b"/dev/null", str(path).encode(), None, ctypes.c_ulong(MS_BIND), None, what=f"hide {path}")


def _closed_ancestor(path: Path) -> Path | None:
    """The top-most folder above `path` that other users cannot enter."""
    for parent in reversed(path.parents):
        if parent != Path("/") and not os.stat(parent).st_mode & 0o001:
            return parent
    return None


def _cover(top: Path, keep: list[Path], stash: Path, libc, mode: str = "0755", source: Path | None = None) -> None:
    """Mount an empty, enterable tmpfs over `top` (or bind the folder
    `source` there), with bind mounts of only the `keep` paths below it put
    back in place."""
    saved = []
    for p in keep:
        spot = stash / str(len(list(stash.iterdir())))
        spot.mkdir() if p.is_dir() else spot.touch()
        libc_call(libc.mount, str(p).encode(), str(spot).encode(), None, ctypes.c_ulong(MS_BIND | MS_REC), None,
              what=f"keep {p}")
        saved.append((p, spot))
    if source is None:  # holds only the folders of the bind mounts: too small to be a store
        libc_call(libc.mount, b"tmpfs", str(top).encode(), b"tmpfs", ctypes.c_ulong(0), f"size=1m,mode={mode}".encode(),
              what=f"cover {top}")
    else:
        libc_call(libc.mount, str(source).encode(), str(top).encode(), None, ctypes.c_ulong(MS_BIND), None,
              what=f"cover {top}")
    for p, spot in saved:
        if spot.is_dir():
            p.mkdir(parents=True, exist_ok=True)
        else:
            p.parent.mkdir(parents=True, exist_ok=True)
            p.touch()
        for d in [p, *p.parents]:
            if d == top:
                break
            os.chmod(d, 0o755)
        libc_call(libc.mount, str(spot).encode(), str(p).encode(), None, ctypes.c_ulong(MS_BIND | MS_REC), None,
              what=f"put back {p}")


def _isolate_files(settings: dict, libc) -> None:
    """The fallback where the allow-list root cannot be made (a deny-list).
    Inside the new mount namespace:
    - a folder other users cannot enter that holds the interpreter (pyenv
      under /root) becomes an empty tmpfs with only the needed paths bound
      back, so the jailed uid can run Python and sees nothing else there;
    - /tmp, /var/tmp, /dev/shm (and /dev/mqueue where it exists) become
      private, empty folders of one tmpfs of `scratch_mb` (the job's own
      folder bound back), so nothing written there outlives the job or
      reaches another one, and all of it together stays under the cap;
    - /run becomes an empty tmpfs too, after the stash there was used: no
      lock files shared with other jobs (/run/lock) and no host sockets
      (/run/postgresql);
    - every hidden path is covered."""
    base = Path(settings["base"])
    stash = base / "stash"
    stash.mkdir(exist_ok=True)
    _drop_other_folders(base, libc)
    scratch = _scratch(base, settings["limits"].get("scratch_mb", DEFAULT_SCRATCH_MB), libc)
    closed: dict[Path, list[Path]] = {}
    for p in map(Path, settings["expose"]):
        top = _closed_ancestor(p)
        if top is not None:
            closed.setdefault(top, []).append(p)
    for top, paths in closed.items():
        _cover(top, paths, stash, libc)
        _make_links(Path("/"), settings.get("links", []), under=top)
    # The job's folder, and the interpreter or course if they live under a
    # scratch folder (a clone in /tmp, say), stay visible; nothing else does.
    visible = [base, *map(Path, settings["expose"])]
    for top in SCRATCH:
        if Path(top).is_dir() and not Path(top).is_symlink():
            keep = [p for p in visible if p.is_relative_to(top)]
            _cover(Path(top), keep, stash if not keep else _outside_stash(libc), libc, mode="1777",
                   source=scratch / top.strip("/").replace("/", "-"))
    # After /tmp: the job's stash (and the outside stash's bind mounts) are
    # reachable again, and the stash under /run is no longer needed.
    run = Path("/run").resolve()
    _cover(run, [p for p in visible if p.is_relative_to(run)], stash, libc)
    _hide(settings["hide"], libc)


# The allow-list root. Besides the paths of settings["expose"] (the view,
# view.py: interpreter, venv, course packages and the system files they
# load, with settings["links"] the symbolic links on the way to them) a job
# sees the CPU topology (thread pools size themselves by it):
SYSTEM_PATHS = ("/sys/devices/system/cpu",)
# of /etc only what the dynamic linker, time and fonts read (view.py adds
# them); passwd, group and hosts are written for the job (the host's name
# its users, on a hub the class)
ETC_SHARED = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "alternatives", "fonts")
DEVICES = ("null", "zero", "full", "random", "urandom")
MS_REMOUNT = 0x20
ST_FLAGS_KEPT = {os.ST_NOSUID: MS_NOSUID, os.ST_NODEV: MS_NODEV, os.ST_NOEXEC: MS_NOEXEC,
                 os.ST_NOATIME: 0x400, os.ST_NODIRATIME: 0x800, os.ST_RELATIME: 1 << 21}
SYS_MOUNT_SETATTR, AT_FDCWD, AT_RECURSIVE = 442, -100, 0x8000   # 442 on x86-64 and arm64 alike
MOUNT_ATTR_RDONLY, MOUNT_ATTR_NOSUID, MOUNT_ATTR_NODEV = 0x1, 0x2, 0x4


def _enter_allowed_root(settings: dict, own_pid_namespace: bool, libc) -> None:
    """Make the job's root a fresh, read-only tmpfs that holds only what it
    may use, and pivot into it (inside the new mount namespace):
    - read-only: SYSTEM_PATHS, the devices of DEVICES, and the paths of
      settings["expose"] (view.py), with the symbolic links of
      settings["links"] made again and every hidden path inside them
      covered (notebook sources, the interpreter's unused packages);
    - its own: the job's folder (work, home, run), and /tmp, /var/tmp,
      /dev/shm, /dev/mqueue as folders of one tmpfs of `scratch_mb`;
    - a /proc of its PID namespace (the host's without one), an empty /run,
      and /etc/passwd, group and hosts naming only root and the job's uid.
    Everything else of the machine (other jobs' folders, the course data
    folder wherever it is, home folders, /srv, /opt, /var, solutions/ and
    .git of the checkout) is absent, not covered: nothing to list or stat.
    Raises OSError when a step is refused (the caller falls back to
    _isolate_files, which covers the hidden paths only)."""
    base = Path(settings["base"])
    root = base / "root"
    root.mkdir(exist_ok=True)
    libc_call(libc.mount, b"tmpfs", str(root).encode(), b"tmpfs", ctypes.c_ulong(MS_NOSUID | MS_NODEV),
          b"size=1m,mode=0755", what="the job's root")
    scratch = _scratch(base, settings["limits"].get("scratch_mb", DEFAULT_SCRATCH_MB), libc)
    read_only = sorted({*SYSTEM_PATHS, *settings["expose"]}, key=lambda p: (len(Path(p).parts), p))
    own = {top: scratch / top.strip("/").replace("/", "-") for top in SCRATCH}
    placed: list[Path] = []          # read-only binds made so far (their insides are visible already)
    for path in sorted([*read_only, *own, str(base)], key=lambda p: (len(Path(p).parts), p)):
        where = Path(path)
        if path in own:
            _bind(own[path], root, where, libc, recursive=False)
        elif path == str(base):   # not recursive: its own mounts (this root, the scratch) stay out
            _bind(base, root, where, libc, recursive=False)
        elif not os.path.lexists(where) or any(where.is_relative_to(p) for p in placed):
            continue
        elif where.is_symlink() and where.parent == Path("/"):
            os.symlink(os.readlink(where), root / where.relative_to("/"))
        else:
            _bind(where, root, where, libc, recursive=True)
            placed.append(where)
    _make_links(root, settings.get("links", []))
    for hidden in map(Path, settings["hide"]):   # inside what is shown (the course packages' notebook sources)
        if any(hidden.is_relative_to(p) for p in placed) and hidden.is_dir():
            libc_call(libc.mount, b"tmpfs", str(root / hidden.relative_to("/")).encode(), b"tmpfs",
                  ctypes.c_ulong(MS_RDONLY), b"size=4k,mode=0", what=f"hide {hidden}")
    for path in placed:
        _read_only(root / path.relative_to("/"), libc)
    _devices(root, libc)
    _job_etc(root, settings["uid"])
    (root / "run").mkdir(exist_ok=True)
    (root / "proc").mkdir(exist_ok=True)
    if own_pid_namespace:
        libc_call(libc.mount, b"proc", str(root / "proc").encode(), b"proc",
              ctypes.c_ulong(MS_NOSUID | MS_NODEV | MS_NOEXEC), None, what="mount /proc")
    else:
        _bind(Path("/proc"), root, Path("/proc"), libc, recursive=True)
    # pivot_root(".", "."): the old root is stacked on the new one, then detached
    os.chdir(root)
    if libc.syscall(SYS_PIVOT_ROOT, b".", b".") != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"pivot_root: {os.strerror(err)}")
    libc_call(libc.umount2, b".", MNT_DETACH, what="detach the old root")
    os.chdir("/")
    libc_call(libc.mount, None, b"/", None, ctypes.c_ulong(MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV),
          None, what="read-only root")


def _make_links(root: Path, links: list, under: Path = Path("/")) -> None:
    """Make again, inside `root`, the symbolic links on the way to what is
    shown (the places are real paths; one inside a bound folder is there)."""
    for where, text in links:
        where = Path(where)
        spot = root / where.relative_to("/")
        if not where.is_relative_to(under) or os.path.lexists(spot):
            continue
        for parent in reversed(spot.parents):   # enterable by the job's uid, whatever the umask
            if parent.is_relative_to(root) and not parent.exists():
                parent.mkdir()
                os.chmod(parent, 0o755)
        os.symlink(text, spot)


SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}.get(os.uname().machine, -1)


def _bind(source: Path, root: Path, where: Path, libc, recursive: bool) -> None:
    """Bind `source` at `where` inside `root`, making the file or folder to
    mount on (and its parents, enterable)."""
    target = root / where.relative_to("/")
    for parent in reversed(target.parents):
        if parent.is_relative_to(root) and not parent.exists():
            parent.mkdir()
            os.chmod(parent, 0o755)
    if source.is_dir():
        target.mkdir(exist_ok=True)
    elif not target.exists():
        target.touch()
    flags = MS_BIND | (MS_REC if recursive else 0)
    libc_call(libc.mount, str(source).encode(), str(target).encode(), None, ctypes.c_ulong(flags), None,
          what=f"show {where}")


def _read_only(target: Path, libc) -> None:
    """Make a bind mount (and every mount below it) read-only, keeping the
    flags the mount already had: in a user namespace they are locked, and a
    remount that drops one is refused."""
    class MountAttr(ctypes.Structure):
        _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64), ("propagation", ctypes.c_uint64),
                    ("userns_fd", ctypes.c_uint64)]
    attr = MountAttr(MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0, 0, 0)
    if libc.syscall(SYS_MOUNT_SETATTR, AT_FDCWD, str(target).encode(), AT_RECURSIVE, ctypes.byref(attr),
                    ctypes.sizeof(attr)) == 0:
        return
    kept = sum(flag for st, flag in ST_FLAGS_KEPT.items() if os.statvfs(target).f_flag & st)  # an older kernel
    libc_call(libc.mount, None, str(target).encode(), None,
          ctypes.c_ulong(MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | kept), None,
          what=f"read-only {target}")


def _devices(root: Path, libc) -> None:
    """/dev of the job: the harmless devices bound from the host, the usual
    links into /proc/self/fd; /dev/shm and /dev/mqueue are scratch folders."""
    dev = root / "dev"
    dev.mkdir(exist_ok=True)
    for name in DEVICES:
        if Path(f"/dev/{name}").exists():
            _bind(Path(f"/dev/{name}"), root, Path(f"/dev/{name}"), libc, recursive=False)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        if not (dev / name).exists():
            os.symlink(target, dev / name)


def _job_etc(root: Path, uid: int) -> None:
    etc = root / "etc"
    etc.mkdir(exist_ok=True)
    (etc / "passwd").write_text(f"root:x:0:0:root:/root:/bin/false\njob:x:{uid}:{uid}:graded job:/nonexistent:"
                                "/bin/false\n")
    (etc / "group").write_text(f"root:x:0:\njob:x:{uid}:\n")
    (etc / "hosts").write_text("127.0.0.1 localhost\n::1 localhost\n")


def _scratch(base: Path, size_mb: int, libc) -> Path:
    """One tmpfs of `size_mb` (in this mount namespace only) with a folder
    for each private scratch path, so that together they stay under it."""
    scratch = base / "scratch"
    scratch.mkdir(exist_ok=True)
    libc_call(libc.mount, b"tmpfs", str(scratch).encode(), b"tmpfs", ctypes.c_ulong(MS_NOSUID | MS_NODEV),
          f"size={size_mb}m,mode=0755".encode(), what="scratch")
    for top in SCRATCH:
        folder = scratch / top.strip("/").replace("/", "-")
        folder.mkdir()
        os.chmod(folder, 0o1777)
    return scratch


def _drop_other_folders(base: Path, libc) -> None:
    """This namespace got a copy of every other job's folder mount: detach
    them (they are covered anyway), so that a job which ends frees its
    tmpfs at once, not when every job started meanwhile has ended."""
    for folder in folder_mounts():
        if folder != base and base not in folder.parents:
            libc.umount2(str(folder).encode(), MNT_DETACH)


STASH = Path("/run/tinylm-jail-stash")


def _outside_stash(libc) -> Path:
    """A stash folder outside /tmp, for the bind mount that survives covering /tmp.

    Root makes its own folder under /run. A user namespace may mount but not
    create folders where the real user cannot, so without root (and before
    any root grading has made the folder) the stash covers /run itself, which
    a jailed process does not need (and whose per-user sockets it should not
    see anyway)."""
    spot = STASH
    try:
        spot.mkdir(mode=0o700, exist_ok=True)
    except PermissionError:
        spot = STASH.parent
    libc_call(libc.mount, b"tmpfs", str(spot).encode(), b"tmpfs", ctypes.c_ulong(0), b"size=4k,mode=0700",
          what="stash")
    return spot


def _limit(limits: dict) -> None:
    """setrlimit takes integers only: a limit given as a float (`grade
    --timeout 600` parses 600.0) is rounded up, never refused."""
    mb = 1024 * 1024
    for res, value in ((resource.RLIMIT_AS, limits["memory_mb"] * mb), (resource.RLIMIT_CPU, limits["cpu_s"]),
                       (resource.RLIMIT_NPROC, limits["nproc"]), (resource.RLIMIT_FSIZE, limits["file_mb"] * mb),
                       (resource.RLIMIT_CORE, 0)):
        value = math.ceil(value)
        resource.setrlimit(res, (value, value))


# Errors after which the same unshare may well succeed a moment later (a
# host short of memory for a moment): retried before a weaker set is tried,
# so a busy host does not quietly get a weaker jail. (ENOSPC is not among
# them: it is also what a namespace limit of 0 answers, every time.)
TRANSIENT_UNSHARE_ERRORS = {errno.ENOMEM, errno.EAGAIN, errno.EBUSY, errno.EINTR}


def _unshare(flag_sets: list[int], libc, within_s: float = 2.0) -> tuple[int, list[int]]:
    """Enter the first set of namespaces the kernel allows (0 if none), and
    the errno that refused each set before it, for the notes."""
    refusals: list[int] = []
    for flags in flag_sets:
        deadline = time.monotonic() + within_s
        while True:
            if libc.unshare(flags) == 0:
                return flags, refusals
            err = ctypes.get_errno()
            if err not in TRANSIENT_UNSHARE_ERRORS or time.monotonic() > deadline:
                refusals.append(err)
                break
            time.sleep(0.02)
    return 0, refusals


def _enter_namespaces(settings: dict, libc, notes: list[str]) -> int:
    """Outside part (before the fork): copy the files in, unshare. Returns
    the namespaces entered."""
    workdir, uid = Path(settings["base"]) / "work", settings["uid"]
    _copy_in(settings["copy"], workdir)
    private = CLONE_NEWNS | CLONE_NEWNET
    if os.geteuid() == 0:
        for f in workdir.iterdir():
            os.chown(f, uid, uid)
        entered, refusals = _unshare([private | CLONE_NEWIPC | CLONE_NEWPID, private], libc)
        if not entered:
            notes.append(f"no namespaces (unshare: {os.strerror(refusals[-1])}): network and hidden paths "
                         "not isolated")
    else:
        real_uid, real_gid = os.getuid(), os.getgid()
        entered, refusals = _unshare([CLONE_NEWUSER | private | CLONE_NEWIPC | CLONE_NEWPID, CLONE_NEWUSER | private],
                                      libc)
        if not entered:
            notes.append(f"not root and no user namespace (unshare: {os.strerror(refusals[-1])}): runs with "
                         "your rights, network open, nothing hidden")
            return 0
        try:
            Path("/proc/self/setgroups").write_text("deny")
            Path("/proc/self/uid_map").write_text(f"{real_uid} {real_uid} 1")
            Path("/proc/self/gid_map").write_text(f"{real_gid} {real_gid} 1")
        except OSError as err:
            notes.append(f"user namespace without a uid map ({err}): hidden paths (solutions, gradebook) "
                         "may be readable")
            return entered & ~CLONE_NEWNS
    if entered and not entered & CLONE_NEWPID:
        notes.append(f"no PID or IPC namespace (unshare: {os.strerror(refusals[0])}): other processes' "
                     "command lines are visible, shared memory and message queues are shared, and daemons are "
                     "killed only by uid when the job ends")
    return entered


def _isolate(settings: dict, entered: int, libc, notes: list[str]) -> bool:
    """Inside part: private mounts, the allow-list root (or, where it cannot
    be made, the hidden paths covered), and a /proc of this PID namespace
    only. True when the files are isolated."""
    if not entered & CLONE_NEWNS:
        return False
    try:
        libc_call(libc.mount, b"none", b"/", None, ctypes.c_ulong(MS_REC | MS_PRIVATE), None, what="private mounts")
    except OSError as err:
        notes.append(f"no file isolation ({err}): hidden paths (solutions, gradebook) may be readable")
        return False
    try:
        _enter_allowed_root(settings, bool(entered & CLONE_NEWPID), libc)
        return True
    except OSError as err:
        notes.append(f"no allow-list root ({err}): only the hidden paths (solutions, course data, gradebook, .git) "
                     "are covered; other folders of the machine stay readable")
    try:
        _isolate_files(settings, libc)
    except OSError as err:
        notes.append(f"no file isolation ({err}): hidden paths (solutions, gradebook) may be readable")
        return False
    if entered & CLONE_NEWPID:
        try:
            libc_call(libc.mount, b"proc", b"/proc", b"proc", ctypes.c_ulong(MS_NOSUID | MS_NODEV | MS_NOEXEC), None,
                  what="mount /proc")
        except OSError as err:
            notes.append(f"no /proc of its own ({err}): other processes' command lines are visible")
    return True


def _drop_rights(settings: dict, isolated: bool, notes: list[str]) -> None:
    uid = settings["uid"]
    if os.geteuid() != 0:
        return
    if isolated or not any(_closed_ancestor(Path(p)) for p in settings["expose"]):
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    else:  # without a mount namespace the jail uid could not even start Python
        notes.append("kept root rights: the interpreter lives in a folder other users cannot enter")


def _die_with(parent_alive: int, libc) -> None:
    """Be SIGKILLed when the outside jail process dies (set again after each
    uid switch, which clears it), and exit now if it is already gone."""
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if select.select([parent_alive], [], [], 0)[0]:  # EOF: its write end closed, so it died
        os._exit(1)


def _forward_to(pid: int) -> None:
    def forward(signum, _frame):
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass
    for signum in FORWARDED_SIGNALS:
        signal.signal(signum, forward)


def exit_status(status: int) -> int:
    """A wait status as a shell would report it: the code, or 128 + signal."""
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code


def _wait_outside(init: int) -> int:
    """The outside jail process: hold no end of the job's pipes (so EOF means
    the job is over), pass signals on to init, and exit with its status."""
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    _forward_to(init)
    _, status = os.waitpid(init, 0)
    return exit_status(status)


def _be_init(command_pid: int) -> None:
    """PID 1 of the namespace: reap orphans until COMMAND exits, then exit
    with its status; the kernel then kills everything left in the namespace."""
    _forward_to(command_pid)
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            os._exit(1)
        if pid == command_pid:
            os._exit(exit_status(status))


def _exec(command: list[str], env: dict, settings: dict, notes: list[str], start=os.execve) -> None:
    """The last step: enter the work folder, set the limits, then
    start(command[0], command, env), which does not return: os.execve, or
    autograder.grading.sandbox.warm_jail's in-process start of an allow-listed module."""
    os.chdir(Path(settings["base"]) / "work")
    _limit(settings["limits"])
    refused = install_job_filter()
    if refused:
        notes.append(refused)
    for note in notes:
        print(f"[jail] {note}", file=sys.stderr)
    start(command[0], command, env)


def _join_cgroup(settings: dict, notes: list[str]) -> None:
    try:
        job_cgroup.attach(settings.get("cgroup", []))
    except OSError as err:
        notes.append(f"not in its job cgroup ({err}): memory, tasks and CPU are bounded per process only")


def _fork_retrying(within_s: float = 5.0) -> int:
    """fork, waiting a moment while the uid's process limit is full (a
    previous job's processes may still be on their way out)."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            return os.fork()
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def run(settings: dict, command: list[str], env: dict, start=os.execve) -> int:
    """Jail COMMAND (see the module docstring); returns its exit status.
    `start` replaces os.execve as the last step (see _exec)."""
    libc = load_libc()
    notes: list[str] = []
    entered = _enter_namespaces(settings, libc, notes)
    if not entered & CLONE_NEWPID:  # one process: isolate, drop rights and exec
        _join_cgroup(settings, notes)
        _drop_rights(settings, _isolate(settings, entered, libc, notes), notes)
        _exec(command, env, settings, notes, start)
    alive_r, alive_w = os.pipe()
    init = os.fork()
    if init:
        os.close(alive_r)
        return _wait_outside(init)
    os.close(alive_w)
    _die_with(alive_r, libc)
    _join_cgroup(settings, notes)  # init first, so that every process of the job is in it
    _drop_rights(settings, _isolate(settings, entered, libc, notes), notes)
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # no ptrace of init by the job, no /proc/1 files it owns
    _die_with(alive_r, libc)
    os.setsid()  # group signals meant for the jail reach it once, through the outside process
    command_pid = _fork_retrying()
    if command_pid == 0:
        os.close(alive_r)
        _exec(command, env, settings, notes, start)
    _be_init(command_pid)
    return 1  # not reached: _be_init exits


def die_with_starter(starter: int | None = None) -> bool:
    """SIGKILL this process the moment the one that started it dies; False
    if it is already gone (`starter`: its pid as known before the fork, which
    rules out a starter that died before this call; default the parent now). The kernel sends it when the starter's *thread*
    that forked us ends, not its process: the starters of a jail (the thread
    of nbgrader's kernel manager that launches kernels and lives as long as
    nbgrader, the grading thread that runs the recheck) fork from a thread
    that outlives the job. Not dependent on the starter running any code (a
    SIGKILLed grader runs none) nor on how busy the machine is. (A warm job
    is forked by its supervisor, and dies with it by the same signal.)"""
    starter = os.getppid() if starter is None else starter
    load_libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    return os.getppid() == starter


def main(argv: list[str]) -> int:
    if "--" not in argv or ENV_VAR not in os.environ:
        print(f"usage: {ENV_VAR}=... python -m autograder.grading.sandbox.jail -- COMMAND ...", file=sys.stderr)
        return 2
    # The job's first process: when whoever started it dies, it dies, and
    # with it init (PR_SET_PDEATHSIG on this process) and the whole namespace.
    named = os.environ.get(STARTER_ENV, "")
    if not die_with_starter(int(named) if named.isdigit() else None):
        return 128 + signal.SIGKILL
    settings = json.loads(os.environ[ENV_VAR])
    command = argv[argv.index("--") + 1:]
    env = {k: os.environ[k] for k in PASSED_ENV if k in os.environ}
    env.update(HOME=str(Path(settings["base"]) / "home"), MPLBACKEND="Agg", PYTHONNOUSERSITE="1",
               JUPYTER_RUNTIME_DIR=str(Path(settings["base"]) / "run"), PYTHONDONTWRITEBYTECODE="1")
    # The kernel reads its connection file after the uid switch: hand it a copy it owns.
    for i, arg in enumerate(command[:-1]):
        if arg == "-f" and Path(command[i + 1]).is_file():
            conn = Path(settings["base"]) / "run" / Path(command[i + 1]).name
            if not conn.exists() or not conn.samefile(command[i + 1]):
                shutil.copyfile(command[i + 1], conn)
            if os.geteuid() == 0:
                os.chown(conn, settings["uid"], settings["uid"])
            command[i + 1] = str(conn)
    from .warm_client import run_warm  # a warm fork server, when the grader started one (TINYLM_WARM_JAIL)
    status = run_warm(settings, command, env, FORWARDED_SIGNALS)
    return run(settings, command, env) if status is None else status
