"""The jail's job totals and seccomp filter, piece by piece.

The attacks themselves (a fork bomb, processes that together hold more
memory than the job may, a job filling its folder and its tmpfs, keys left
for a later job) run through the real jail in
tests/grading/attacks/test_isolation.py. Here: the seccomp program, checked
by installing it and, for the other machine in its table, against
libseccomp's own system call numbers; and the cgroup plans, against a
fake cgroup file system for the v2 path (this project's CI machine has v1
only, so the v2 path is tested only this way).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import signal
import struct
import threading
import time
from pathlib import Path

import pytest

from autograder.grading.sandbox import jail_init, job_cgroup, syscall_filter
from autograder.grading.sandbox.jail import in_fork

linux_x86_64 = pytest.mark.skipif(os.uname().machine != "x86_64", reason="runs the x86-64 filter")


def _errno_of(number: int, *args) -> str:
    libc = ctypes.CDLL(None, use_errno=True)
    return "ok" if libc.syscall(number, *args) >= 0 else errno.errorcode[ctypes.get_errno()]


@linux_x86_64
def test_the_filter_refuses_the_keyring_calls_and_nothing_else():
    def filtered():
        before = _errno_of(250, 0, -4, 0)  # keyctl(KEYCTL_GET_KEYRING_ID, @u)
        refused = syscall_filter.install_job_filter()
        return " ".join([before, str(refused), _errno_of(248, b"user", b"tl", b"x", 1, -4),
                         _errno_of(249, b"user", b"tl", None, 0), _errno_of(250, 0, -4, 0), _errno_of(39)])
    assert in_fork(filtered).split() == ["ok", "None", "EPERM", "EPERM", "EPERM", "ok"]


@linux_x86_64
def test_the_filter_refuses_locks_leases_watches_and_page_cache_probes(tmp_path):
    """Each call that lets a job see another's use of a shared file, tried
    in a fork before and after the filter; the fcntl commands and reads that
    report nothing of anyone else still work."""
    import fcntl
    import struct
    shared = tmp_path / "shared.py"
    shared.write_text("x = 1\n")
    lock = struct.pack("hhqqi", fcntl.F_WRLCK, 0, 0, 1, 0)

    def tries() -> list[str]:
        signal.signal(signal.SIGIO, signal.SIG_IGN)  # dnotify's signal, once F_NOTIFY was allowed
        out = []
        with open(shared, "rb") as fh:
            for call in (lambda: fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB),
                         lambda: fcntl.fcntl(fh, fcntl.F_GETLK, lock),
                         lambda: fcntl.fcntl(fh, fcntl.F_OFD_GETLK, struct.pack("hhqqi", fcntl.F_RDLCK, 0, 0, 1, 0)),
                         lambda: fcntl.fcntl(fh, fcntl.F_GETLEASE),
                         lambda: fcntl.fcntl(os.open(tmp_path, os.O_RDONLY), fcntl.F_NOTIFY, fcntl.DN_ACCESS),
                         lambda: os.preadv(fh.fileno(), [bytearray(4)], 0, os.RWF_NOWAIT),
                         lambda: os.preadv(fh.fileno(), [bytearray(4)], 0),
                         lambda: fcntl.fcntl(fh, fcntl.F_GETFL)):
                try:
                    call()
                    out.append("ok")
                except OSError as err:
                    out.append(errno.errorcode[err.errno])
        libc = ctypes.CDLL(None, use_errno=True)
        for name in ("inotify_init1", "fanotify_init", "io_uring_setup", "cachestat"):
            out.append(_errno_of(syscall_filter.syscall_number(name), 0, 0, 0, 0, 0) if name != "inotify_init1"
                       else ("ok" if libc.inotify_init1(0) >= 0 else errno.errorcode[ctypes.get_errno()]))
        return out

    def before_and_after():
        before = tries()
        why = syscall_filter.install_job_filter()
        return " ".join([*before, "|", str(why), *tries()])
    before, after = in_fork(before_and_after).split(" | ")
    assert before.split()[:9] == ["ok"] * 9, f"the calls work without the filter: {before}"
    assert after.split() == ["None", "ENOLCK", "ENOLCK", "ENOLCK", "EPERM", "EPERM", errno.errorcode[errno.EOPNOTSUPP],
                             "ok", "ok", "EPERM", "EPERM", "EPERM", "EPERM"], after


def _futex(word, op: int, value: int, seconds: float) -> str:
    timeout = ctypes.create_string_buffer(struct.pack("qq", int(seconds), int(seconds % 1 * 1e9)))
    return _errno_of(syscall_filter.syscall_number("futex"), word, op, value, timeout, None, 0)


def _joined_while_running() -> str:
    """pthread_join on a thread still running (glibc waits on its id with
    a shared futex): 'ok' once the thread is done, or the errno."""
    libc = ctypes.CDLL(None, use_errno=True)
    body = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)(lambda _: time.sleep(0.3))
    thread = ctypes.c_ulong()
    if libc.pthread_create(ctypes.byref(thread), None, body, None) != 0:
        return "no thread"
    code = libc.pthread_join(thread, None)
    return "ok" if code == 0 else errno.errorcode[code]


@linux_x86_64
def test_the_filter_refuses_residency_probes_and_shared_futexes_only(tmp_path):
    """mincore and Linux AIO answer ENOSYS; a futex wait that is not private
    answers EAGAIN at once (it timed out before the filter), a shared wake
    wakes nobody; private waits still sleep, and what glibc does with shared
    futexes of its own (pthread_join, a process-shared semaphore as
    multiprocessing's locks are) still works, spinning."""
    import mmap
    import multiprocessing
    word, anonymous = ctypes.c_uint32(0), mmap.mmap(-1, 4096)

    def tries() -> list[str]:
        vec = ctypes.create_string_buffer(1)
        page = ctypes.addressof(ctypes.c_char.from_buffer(anonymous))
        lock = multiprocessing.get_context("fork").Lock()
        lock.acquire()
        threading.Timer(0.2, lock.release).start()
        lock.acquire()  # contended: sem_wait on a shared semaphore
        return [_errno_of(syscall_filter.syscall_number("mincore"), ctypes.c_void_p(page), 4096, vec),
                _errno_of(syscall_filter.syscall_number("io_setup"), 1, ctypes.byref(ctypes.c_ulong(0))),
                _errno_of(syscall_filter.syscall_number("futex_waitv"), None, 0, 0, None, 0),
                _futex(ctypes.byref(word), 0, 0, 0.05),            # shared wait
                _futex(ctypes.byref(word), 128, 0, 0.05),               # private wait
                _errno_of(syscall_filter.syscall_number("futex"), ctypes.byref(word), 1, 1, None, None, 0),
                _joined_while_running(), "locked"]

    def before_and_after():
        before = tries()
        why = syscall_filter.install_job_filter()
        return " ".join([*before, "|", str(why), *tries()])
    before, after = in_fork(before_and_after).split(" | ")
    assert before.split() == ["ok", "ok", "EINVAL", "ETIMEDOUT", "ETIMEDOUT", "ok", "ok", "locked"], before
    assert after.split() == ["None", "ENOSYS", "ENOSYS", "ENOSYS", "EAGAIN", "ETIMEDOUT", "ok", "ok", "locked"], after


@linux_x86_64
def test_the_filter_refuses_the_x32_abi_so_its_numbers_cannot_sidestep_it():
    def x32_getpid():
        syscall_filter.install_job_filter()
        return " ".join([_errno_of(39), _errno_of(39 | syscall_filter.X32_SYSCALL_BIT)])
    assert in_fork(x32_getpid).split() == ["ok", "ENOSYS"]


def test_an_unknown_machine_gets_no_filter_and_a_reason():
    def unknown():
        why = syscall_filter.install_job_filter("riscv64")
        return why + "|" + open("/proc/self/status").read().split("Seccomp:")[1].split()[0]
    why, mode = in_fork(unknown).split("|")
    assert "riscv64" in why and "not blocked" in why
    assert mode == "0", "a filter was installed anyway"


SCMP_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}


@pytest.mark.parametrize("machine", sorted(syscall_filter.ABIS))
def test_the_numbers_are_libseccomps(machine):
    """An independent table: libseccomp's resolver (libseccomp2 is on every
    Debian with systemd or apt); a name its ABI lacks (inotify_init on
    arm64) is absent from ours too."""
    name = ctypes.util.find_library("seccomp")
    if name is None:
        pytest.skip("libseccomp is not installed")
    lib = ctypes.CDLL(name)
    lib.seccomp_syscall_resolve_name_arch.argtypes = [ctypes.c_uint32, ctypes.c_char_p]
    abi = syscall_filter.ABIS[machine]
    assert abi.arch == SCMP_ARCH[machine]
    names = [*syscall_filter.REFUSED, "fcntl", "futex", *syscall_filter.NOWAIT_CALLS, *syscall_filter.ADVICE_CALLS]
    theirs = {n: lib.seccomp_syscall_resolve_name_arch(abi.arch, n.encode()) for n in names}
    assert abi.numbers == {n: nr for n, nr in theirs.items() if nr >= 0}


def _run_bpf(program, arch: int, nr: int, args=(0,) * 6) -> int:
    """A small classic-BPF interpreter for the six instructions the filter uses."""
    data = {syscall_filter.OFFSET_NR: nr & 0xFFFFFFFF, syscall_filter.OFFSET_ARCH: arch}
    for i, value in enumerate(args):
        data[syscall_filter.OFFSET_ARGS + 8 * i] = value & 0xFFFFFFFF
        data[syscall_filter.OFFSET_ARGS + 8 * i + 4] = value >> 32
    acc, pc = 0, 0
    while True:
        code, jt, jf, k = program[pc]
        if code == syscall_filter.BPF_LD_W_ABS:
            acc, pc = data[k], pc + 1
        elif code == syscall_filter.BPF_JEQ_K:
            pc += 1 + (jt if acc == k else jf)
        elif code == syscall_filter.BPF_JGE_K:
            pc += 1 + (jt if acc >= k else jf)
        elif code == syscall_filter.BPF_JSET_K:
            pc += 1 + (jt if acc & k else jf)
        elif code == syscall_filter.BPF_AND_K:
            acc, pc = acc & k, pc + 1
        elif code == syscall_filter.BPF_RET_K:
            return k
        else:
            raise AssertionError(f"unexpected instruction {code:#x}")


@pytest.mark.parametrize("machine", sorted(syscall_filter.ABIS))
def test_the_program_refuses_exactly_the_listed_calls_and_commands_of_its_own_abi(machine):
    """Every system call number, and every fcntl command, preadv2 flag and
    futex op around the listed ones, against the rule as the docstring
    states it."""
    abi = syscall_filter.ABIS[machine]
    program = syscall_filter.job_filter(machine)
    allow, errno_of = syscall_filter.RET_ALLOW, lambda e: syscall_filter.RET_ERRNO | e
    refused = {abi.numbers[n]: errno_of(e) for n, e in syscall_filter.REFUSED.items() if n in abi.numbers}
    fcntl, nowait = abi.numbers["fcntl"], {abi.numbers[n] for n in syscall_filter.NOWAIT_CALLS}
    futex = abi.numbers["futex"]
    for nr in range(0, 600):
        expected = refused.get(nr, allow)
        if nr == futex:  # op 0 with no flag: a shared FUTEX_WAIT
            expected = errno_of(errno.EAGAIN)
        assert _run_bpf(program, abi.arch, nr, (0, 0, 0, 0, 0, 0)) == expected, nr
    # futex: FUTEX_WAKE 1, REQUEUE 3, CMP_REQUEUE 4, WAKE_OP 5, WAKE_BITSET 10, CMP_REQUEUE_PI 12 (futex(2))
    wakes = {1, 3, 4, 5, 10, 12}
    for op in [*range(0, 1024), 1 << 32 | 1]:
        low = op & 0xFFFFFFFF
        expected = allow if low & 128 else errno_of(0) if low & ~256 in wakes else errno_of(errno.EAGAIN)
        assert _run_bpf(program, abi.arch, futex, (0, op, 1, 0, 0, 0)) == expected, op
    locks, notices = set(syscall_filter.FCNTL_LOCKS.values()), set(syscall_filter.FCNTL_NOTICES.values())
    for cmd in [*range(0, 64), *range(1020, 1040), 1 << 32 | 5]:
        low = cmd & 0xFFFFFFFF  # the kernel reads the command as an unsigned int
        expected = errno_of(errno.ENOLCK) if low in locks else errno_of(errno.EPERM) if low in notices else allow
        assert _run_bpf(program, abi.arch, fcntl, (3, cmd, 0, 0, 0, 0)) == expected, cmd
    for nr in nowait:
        for flags in range(0, 32):
            expected = errno_of(errno.EOPNOTSUPP) if flags & syscall_filter.RWF_NOWAIT else allow
            assert _run_bpf(program, abi.arch, nr, (3, 0, 1, 0, 0, flags)) == expected, (nr, flags)
    # fadvise64 (advice the fourth argument) and madvise (the third): POSIX_FADV_DONTNEED 4 and NOREUSE 5,
    # MADV_COLD 20 and MADV_PAGEOUT 21 (posix_fadvise(2), madvise(2)) answer 0; every other advice runs
    for name, arg, drops in (("fadvise64", 3, {4, 5}), ("madvise", 2, {20, 21})):
        for advice in [*range(0, 128), 1 << 32 | 4]:
            args = [3, 0, 0, 0, 0, 0]
            args[arg] = advice
            expected = errno_of(0) if advice & 0xFFFFFFFF in drops else allow
            assert _run_bpf(program, abi.arch, abi.numbers[name], args) == expected, (name, advice)
    first = next(iter(refused))
    assert _run_bpf(program, 0x40000003, first) == errno_of(errno.ENOSYS)  # i386 / another ABI
    x32 = syscall_filter.X32_SYSCALL_BIT | first
    assert _run_bpf(program, abi.arch, x32) == (errno_of(errno.ENOSYS) if abi.has_x32 else allow)


# -- cgroups ------------------------------------------------------------------------------

def _fake_v2(tmp_path: Path, enabled: str = "cpu memory pids") -> Path:
    parent = tmp_path / "delegated"
    parent.mkdir()
    (parent / "cgroup.subtree_control").write_text(enabled + "\n")
    return parent


def test_a_delegated_v2_cgroup_gets_one_job_cgroup_with_every_limit(tmp_path):
    parent = _fake_v2(tmp_path)
    made = job_cgroup.make("tinylm-jail-61000", 512 << 20, 64, 0.5, host=([], {}),
                           env={job_cgroup.ENV_VAR: str(parent)})
    folder = parent / "tinylm-jail-61000"
    assert (made.kind, made.folders, made.controllers) == ("v2", [str(folder)], ["memory", "pids", "cpu"])
    assert {f: (folder / f).read_text() for f in ("memory.max", "pids.max", "cpu.max")} == \
        {"memory.max": str(512 << 20), "pids.max": "64", "cpu.max": "50000 100000"}
    assert not (folder / "memory.swap.max").exists(), "a file the kernel does not offer was invented"
    job_cgroup.attach(made.folders)
    assert (folder / "cgroup.procs").read_text() == "0"  # "the writing process", as the kernel reads it


def test_a_v2_cgroup_without_the_memory_controller_is_not_used(tmp_path):
    parent = _fake_v2(tmp_path, enabled="cpu")
    where = job_cgroup.plan(host=([], {}), env={job_cgroup.ENV_VAR: str(parent)})
    assert where.kind == "none"


def test_the_graders_own_v2_cgroup_is_found_from_proc(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    mount = tmp_path / "cgroup2"
    own = mount / "grader.service"
    own.mkdir(parents=True)
    (own / "cgroup.subtree_control").write_text("memory pids\n")
    mountinfo = f"30 1 0:26 / {mount} rw,nosuid - cgroup2 cgroup2 rw,nsdelegate"
    host = (job_cgroup._mounts(mountinfo), job_cgroup._own_paths("0::/grader.service\n"))
    where = job_cgroup.plan(host=host, env={})
    assert (where.kind, where.folders, where.controllers) == ("v2", [str(own)], ["memory", "pids"])


def test_v1_hierarchies_give_one_job_cgroup_per_controller(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    lines, own = [], []
    for i, name in enumerate(("memory", "pids", "cpu,cpuacct", "freezer")):
        point = tmp_path / name
        (point / "grader").mkdir(parents=True)
        lines.append(f"{40 + i} 1 0:{30 + i} / {point} rw - cgroup cgroup rw,{name}")
        own.append(f"{i + 1}:{name}:/grader")
    host = (job_cgroup._mounts("\n".join(lines)), job_cgroup._own_paths("\n".join(own)))
    made = job_cgroup.make("tinylm-jail-61001", 256 << 20, 32, 1.0, host=host, env={})
    assert made.kind == "v1" and sorted(made.controllers) == ["cpu", "memory", "pids"]
    job = {c: Path(f) for c, f in zip(made.controllers, made.folders)}
    assert job["memory"] == tmp_path / "memory" / "grader" / "tinylm-jail-61001"
    assert (job["memory"] / "memory.limit_in_bytes").read_text() == str(256 << 20)
    assert (job["pids"] / "pids.max").read_text() == "32"
    assert (job["cpu"] / "cpu.cfs_quota_us").read_text() == "100000"


def test_without_root_or_delegation_there_is_no_job_cgroup(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    where = job_cgroup.plan(env={})
    assert where.kind == "none" and job_cgroup.ENV_VAR in where.why


class _FlakyUnshare:
    """A libc whose unshare refuses with the given errnos, in order, then succeeds."""

    def __init__(self, *refusals: int):
        self.refusals, self.calls = list(refusals), []

    def unshare(self, flags: int) -> int:
        self.calls.append(flags)
        if self.refusals:
            ctypes.set_errno(self.refusals.pop(0))
            return -1
        return 0


STRONG, WEAK = 0x7, 0x3


def test_a_moment_short_of_memory_does_not_give_a_weaker_jail():
    """ENOMEM/EAGAIN are retried on the strongest set (its PID namespace is
    what ends a job's daemons); a refusal that will not change is not."""
    libc = _FlakyUnshare(errno.ENOMEM, errno.EAGAIN)
    assert jail_init._unshare([STRONG, WEAK], libc) == (STRONG, [])
    assert libc.calls == [STRONG, STRONG, STRONG]

    libc = _FlakyUnshare(errno.EPERM)
    assert jail_init._unshare([STRONG, WEAK], libc) == (WEAK, [errno.EPERM])
    assert libc.calls == [STRONG, WEAK]


def test_a_lasting_shortage_falls_back_and_keeps_the_reason():
    libc = _FlakyUnshare(*[errno.ENOMEM] * 1000)
    assert jail_init._unshare([STRONG, WEAK], libc, within_s=0.05) == (0, [errno.ENOMEM, errno.ENOMEM])
    assert set(libc.calls) == {STRONG, WEAK}


# -- what the doctor says each missing protection loses ----------------------------------

def test_the_doctor_names_what_each_fallback_of_the_view_and_the_filter_loses():
    from autograder.grading import gradebook
    from autograder.grading.sandbox import protections
    data = str(gradebook.data_dir())
    allow = protections._view({"/x/pyproject.toml": "absent", data: "absent"})
    deny = protections._view({"/x/pyproject.toml": "visible", data: "covered"})
    bare = protections._view({"/x/pyproject.toml": "visible", data: "visible"})
    assert allow["status"] == "OK" and "allow-list" in allow["detail"]
    assert deny["status"] == "WARN" and "deny-list" in deny["detail"] and "stays readable" in deny["detail"]
    assert bare["status"] == "WARN" and "nothing hidden" in bare["detail"] and "submissions" in bare["detail"]
    full = {"add_key": "Operation not permitted", "lock_query": "No locks available", "inotify": "Operation not permitted",
            "mincore": "Function not implemented", "shared_futex": "Resource temporarily unavailable"}
    assert protections._syscalls(full, root=True)["status"] == "OK"
    sleeping = protections._syscalls({**full, "shared_futex": "Connection timed out"}, root=True)
    assert sleeping["status"] == "WARN" and "shared futexes" in sleeping["detail"]
    open_locks = protections._syscalls({**full, "lock_query": "answered"}, root=True)
    assert open_locks["status"] == "WARN" and "file locks" in open_locks["detail"]
    assert "signal each other" in open_locks["detail"] and "--workers 1" in open_locks["fix"]
    no_filter = protections._syscalls({"add_key": "allowed", "lock_query": "answered", "inotify": "allowed",
                                       "mincore": "answered", "shared_futex": "Connection timed out"}, root=False)
    assert "leave keys" in no_filter["detail"] and "root clears" not in no_filter["detail"]
