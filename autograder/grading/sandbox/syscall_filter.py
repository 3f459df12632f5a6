"""The seccomp filter of every jailed process: no kernel keyrings, and no
signalling between jobs through what they share.

Two kinds of system call are refused, in the calling process and everything
it starts (a seccomp filter cannot be removed):

* Kernel keyrings (add_key, request_key, keyctl: EPERM, as Docker's default
  profile does). Keys belong to a uid, not to a namespace, and jail uids are
  reused: a key a job adds to its user keyring outlives the job, and one left
  with other-read permission is readable by any later job.
* Calls that let one process see what another does with a file both can
  open. Jobs graded at the same time share read-only files (the interpreter,
  the virtual environment, the course code, /dev/null), and a lock, a lease
  or a watch lives on the file's inode, not in a namespace: a kernel that
  held byte-range locks on tinylm/__init__.py spelled the hidden tests it
  had just run, and a job of another uid read them with F_GETLK. Refused:
  - locks: flock, and fcntl's F_GETLK/F_SETLK/F_SETLKW and their
    open-file-description forms F_OFD_* (ENOLCK, "no locks available", which
    SQLite and other lock users report as such);
  - fcntl's F_SETLEASE/F_GETLEASE (a lease breaks when another process opens
    the file) and F_NOTIFY (dnotify: events when another process reads a file
    of a folder), inotify and fanotify (the same events for a watched file):
    EPERM;
  - probes of the shared page cache (whether another job just read a page):
    cachestat, and preadv2/pwritev2 with RWF_NOWAIT (EOPNOTSUPP, what a file
    system without that flag answers: a caller retries without it); mincore
    and Linux AIO (io_setup, io_submit, ... whose requests carry RWF_NOWAIT
    in their own flags): ENOSYS, what a kernel built without them answers
    (libaio users fall back to threads); and io_uring, whose requests run
    past this filter (EPERM, as Docker does);
  - futexes that are not private to the process. A shared futex is keyed
    by the inode and offset of a file mapping, in every namespace: threads
    of one job waiting on a page of a shared read-only file are seen (and
    woken) by another job, and FUTEX_WAKE's count says whether a waiter was
    there. futex without FUTEX_PRIVATE_FLAG: a wake (WAKE, WAKE_BITSET,
    WAKE_OP, REQUEUE, CMP_REQUEUE, CMP_REQUEUE_PI) returns 0, nobody woken,
    true since no shared waiter can exist; every other command (the waits,
    the PI locks) answers EAGAIN, which glibc takes as "the value changed"
    and retries: a shared wait spins instead of sleeping. glibc and libgomp
    use private futexes for a process's own locks; what waits shared is
    pthread_join (on the exiting thread's id, which the kernel clears with
    a shared wake: the joiner spins until the thread is gone) and the
    process-shared objects (sem_open semaphores, as multiprocessing's
    locks are, robust and PTHREAD_PROCESS_SHARED mutexes): correct, at the
    cost of a spinning waiter. The futex2 calls (futex_waitv, futex_wake,
    futex_wait, futex_requeue: flags in memory the filter cannot read)
    answer ENOSYS, as kernels before them do.
  - eviction of shared pages from the page cache. A job that drops a page
    of a shared read-only file leaves it cold for the next job, whose read
    then takes a major fault: one bit a page. posix_fadvise's DONTNEED (and
    NOREUSE, which ages the file's pages first) and madvise's MADV_PAGEOUT
    and MADV_COLD are hints, and are answered 0 without running, which the
    caller cannot tell from a kernel that kept the pages; process_madvise,
    which gives the same hints through a pidfd, answers ENOSYS (a kernel
    before 5.10). The other madvise advices that drop pages do not drop
    those of a shared file: MADV_DONTNEED and MADV_DONTNEED_LOCKED unmap
    them from the caller only, MADV_FREE is for anonymous memory, and
    MADV_REMOVE needs a writable shared mapping, which a read-only mount
    refuses. The other half, a job loading a page that was cold, the
    trusted side closes: it makes every page a job can read resident
    before the job starts (page_cache.py).
  Nothing a grading kernel needs uses these; the kernel's own command
  history (IPython's SQLite file, private to the job) is kept in memory
  instead (sandbox.KERNEL_ARGS).

Why a hand-written BPF program rather than libseccomp: libseccomp's own
Python binding is a Debian package built for the system Python (a virtual
environment cannot import it without the whole of /usr/lib/python3 on its
path, and it breaks on another Python version), and `pyseccomp`, the ctypes
binding on PyPI, has had no release since 2021. The program is a few dozen
instructions against the kernel's seccomp ABI, which does not change; the
part libseccomp would otherwise get right for us is the architecture check,
done here explicitly: a system call made through another ABI than the
process's own (32-bit `int 0x80` on x86-64, AArch32 on arm64, x32) fails
with ENOSYS, so the numbers below cannot be sidestepped (tests/grading/sandbox/test_jail_limits.py
checks them against libseccomp's own table). On a machine not in the table no
filter is installed and `install_job_filter` says so.
"""
from __future__ import annotations

import ctypes
import errno
import platform
from dataclasses import dataclass

PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
BPF_LD_W_ABS, BPF_JEQ_K, BPF_JGE_K, BPF_JSET_K, BPF_RET_K, BPF_AND_K = 0x20, 0x15, 0x35, 0x45, 0x06, 0x54
RET_ALLOW, RET_ERRNO = 0x7FFF0000, 0x00050000
OFFSET_NR, OFFSET_ARCH, OFFSET_ARGS = 0, 4, 16   # struct seccomp_data: int nr; __u32 arch; __u64 ip; __u64 args[6]
X32_SYSCALL_BIT = 0x40000000
RWF_NOWAIT = 0x8
# futex: the op's flag bits, and the commands that wake (their answer is a count of woken waiters)
FUTEX_PRIVATE_FLAG, FUTEX_CLOCK_REALTIME = 128, 256
FUTEX_WAKES = {"FUTEX_WAKE": 1, "FUTEX_REQUEUE": 3, "FUTEX_CMP_REQUEUE": 4, "FUTEX_WAKE_OP": 5,
               "FUTEX_WAKE_BITSET": 10, "FUTEX_CMP_REQUEUE_PI": 12}
NOBODY_WOKEN = 0   # RET_ERRNO with 0: the call returns 0 without running
HINT_IGNORED = 0   # the same, for a hint
# Hints that drop (or age first) pages of a file from the page cache: answered 0 without running.
# The advice is fadvise64's fourth argument and madvise's third (an int: the low word).
FADV_DROPS = {"POSIX_FADV_DONTNEED": 4, "POSIX_FADV_NOREUSE": 5}
MADV_DROPS = {"MADV_COLD": 20, "MADV_PAGEOUT": 21}
ADVICE_CALLS = {"fadvise64": (3, FADV_DROPS), "madvise": (2, MADV_DROPS)}

# fcntl commands (the same numbers on every Linux ABI): the lock commands, and
# the ones that report another process's use of a file.
FCNTL_LOCKS = {"F_GETLK": 5, "F_SETLK": 6, "F_SETLKW": 7, "F_OFD_GETLK": 36, "F_OFD_SETLK": 37, "F_OFD_SETLKW": 38}
FCNTL_NOTICES = {"F_SETLEASE": 1024, "F_GETLEASE": 1025, "F_NOTIFY": 1026}

# What each refused call answers (see the module docstring), by name.
KEYRINGS = ("add_key", "request_key", "keyctl")
REFUSED = {**dict.fromkeys(KEYRINGS, errno.EPERM),
           "flock": errno.ENOLCK,
           **dict.fromkeys(("inotify_init", "inotify_init1", "inotify_add_watch", "fanotify_init", "fanotify_mark",
                            "cachestat", "io_uring_setup", "io_uring_enter", "io_uring_register"), errno.EPERM),
           **dict.fromkeys(("mincore", "io_setup", "io_destroy", "io_submit", "io_cancel", "io_getevents",
                            "io_pgetevents", "futex_waitv", "futex_wake", "futex_wait", "futex_requeue",
                            "process_madvise"),
                           errno.ENOSYS)}
NOWAIT_CALLS = ("preadv2", "pwritev2")   # their flags are the sixth argument


@dataclass(frozen=True)
class Abi:
    arch: int                   # AUDIT_ARCH of the machine's native ABI
    has_x32: bool               # x32 numbers (X32_SYSCALL_BIT set) exist there
    numbers: dict[str, int]     # system call numbers by name; a name the ABI lacks is absent


ABIS = {
    "x86_64": Abi(0xC000003E, True, {
        "add_key": 248, "request_key": 249, "keyctl": 250, "fcntl": 72, "flock": 73, "inotify_init": 253,
        "inotify_add_watch": 254, "inotify_init1": 294, "fanotify_init": 300, "fanotify_mark": 301,
        "preadv2": 327, "pwritev2": 328, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
        "cachestat": 451, "mincore": 27, "io_setup": 206, "io_destroy": 207, "io_getevents": 208, "io_submit": 209,
        "io_cancel": 210, "io_pgetevents": 333, "futex": 202, "futex_waitv": 449, "futex_wake": 454,
        "futex_wait": 455, "futex_requeue": 456, "fadvise64": 221, "madvise": 28, "process_madvise": 440}),
    "aarch64": Abi(0xC00000B7, False, {
        "add_key": 217, "request_key": 218, "keyctl": 219, "fcntl": 25, "flock": 32, "inotify_init1": 26,
        "inotify_add_watch": 27, "fanotify_init": 262, "fanotify_mark": 263, "preadv2": 286, "pwritev2": 287,
        "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "cachestat": 451, "mincore": 232,
        "io_setup": 0, "io_destroy": 1, "io_submit": 2, "io_cancel": 3, "io_getevents": 4, "io_pgetevents": 292,
        "futex": 98, "futex_waitv": 449, "futex_wake": 454, "futex_wait": 455, "futex_requeue": 456,
        "fadvise64": 223, "madvise": 233, "process_madvise": 440}),
}

# keyctl's number here (root clears a jail uid's keyrings with it); None on another machine
KEYCTL = ABIS[platform.machine()].numbers["keyctl"] if platform.machine() in ABIS else None


def syscall_number(name: str, machine: str | None = None) -> int | None:
    """The number of system call `name` on `machine` (this one), or None."""
    abi = ABIS.get(machine or platform.machine())
    return abi.numbers.get(name) if abi else None


class _Program:
    """Classic BPF with named jump targets: a conditional jump names the
    label it goes to when true (false falls through to the next instruction)."""

    def __init__(self):
        self.code: list[tuple[int, object, int]] = []   # (op, jump label or None, k)
        self.labels: dict[str, int] = {}

    def load(self, offset: int) -> None:
        self.code.append((BPF_LD_W_ABS, None, offset))

    def jump_if(self, op: int, k: int, label: str) -> None:
        self.code.append((op, label, k))

    def and_k(self, mask: int) -> None:
        self.code.append((BPF_AND_K, None, mask))

    def ret(self, value: int) -> None:
        self.code.append((BPF_RET_K, None, value))

    def label(self, name: str) -> None:
        self.labels[name] = len(self.code)

    def assemble(self) -> list[tuple[int, int, int, int]]:
        out = []
        for pc, (op, label, k) in enumerate(self.code):
            jt = self.labels[label] - pc - 1 if label is not None else 0
            if not 0 <= jt <= 255:
                raise ValueError(f"BPF jump of {jt} at {pc}: reorder the program")
            out.append((op, jt, 0, k))
        return out


def job_filter(machine: str) -> list[tuple[int, int, int, int]] | None:
    """The BPF program (code, jt, jf, k) for `machine`; None if unknown."""
    abi = ABIS.get(machine)
    if abi is None:
        return None
    p = _Program()
    p.load(OFFSET_ARCH)
    p.jump_if(BPF_JEQ_K, abi.arch, "native")
    p.ret(RET_ERRNO | errno.ENOSYS)
    p.label("native")
    p.load(OFFSET_NR)
    if abi.has_x32:
        p.jump_if(BPF_JGE_K, X32_SYSCALL_BIT, "other_abi")
    for name, answer in REFUSED.items():
        if name in abi.numbers:
            p.jump_if(BPF_JEQ_K, abi.numbers[name], f"errno_{answer}")
    p.jump_if(BPF_JEQ_K, abi.numbers["fcntl"], "fcntl")
    for name in NOWAIT_CALLS:
        p.jump_if(BPF_JEQ_K, abi.numbers[name], "nowait")
    p.jump_if(BPF_JEQ_K, abi.numbers["futex"], "futex")
    for name in ADVICE_CALLS:
        p.jump_if(BPF_JEQ_K, abi.numbers[name], name)
    p.ret(RET_ALLOW)
    # fadvise64/madvise: the hints that drop pages do nothing and answer 0
    for name, (arg, drops) in ADVICE_CALLS.items():
        p.label(name)
        p.load(OFFSET_ARGS + 8 * arg)
        for advice in drops.values():
            p.jump_if(BPF_JEQ_K, advice, f"errno_{HINT_IGNORED}")
        p.ret(RET_ALLOW)
    # fcntl: its command is the second argument (an unsigned int: the low word)
    p.label("fcntl")
    p.load(OFFSET_ARGS + 8 * 1)
    for cmd in FCNTL_LOCKS.values():
        p.jump_if(BPF_JEQ_K, cmd, f"errno_{errno.ENOLCK}")
    for cmd in FCNTL_NOTICES.values():
        p.jump_if(BPF_JEQ_K, cmd, f"errno_{errno.EPERM}")
    p.ret(RET_ALLOW)
    # preadv2/pwritev2: flags are the sixth argument (an int: the low word)
    p.label("nowait")
    p.load(OFFSET_ARGS + 8 * 5)
    p.jump_if(BPF_JSET_K, RWF_NOWAIT, f"errno_{errno.EOPNOTSUPP}")
    p.ret(RET_ALLOW)
    # futex: the op is the second argument (an int); private ones pass
    p.label("futex")
    p.load(OFFSET_ARGS + 8 * 1)
    p.jump_if(BPF_JSET_K, FUTEX_PRIVATE_FLAG, "allow")
    p.and_k(0xFFFFFFFF & ~FUTEX_CLOCK_REALTIME)   # the command, as the kernel reads it
    for cmd in FUTEX_WAKES.values():
        p.jump_if(BPF_JEQ_K, cmd, f"errno_{NOBODY_WOKEN}")
    p.ret(RET_ERRNO | errno.EAGAIN)
    p.label("allow")
    p.ret(RET_ALLOW)
    for answer in (errno.EPERM, errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, NOBODY_WOKEN):
        p.label(f"errno_{answer}")
        p.ret(RET_ERRNO | answer)
    p.label("other_abi")
    p.ret(RET_ERRNO | errno.ENOSYS)
    return p.assemble()


class _Instruction(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint)]


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Instruction))]


def install_job_filter(machine: str | None = None) -> str | None:
    """Install the job filter on this process (inherited by every child and
    thread it starts later; it cannot be removed). Sets no_new_privs, which
    seccomp needs without CAP_SYS_ADMIN (and which also keeps setuid
    programs from gaining rights). Returns None, or why it is not installed."""
    machine = machine or platform.machine()
    program = job_filter(machine)
    if program is None:
        return (f"no seccomp filter for {machine}: keyrings, file locks, leases, file watches, page-cache probes, "
                "shared futexes and page-cache eviction are not blocked (jobs can signal each other through "
                "shared files)")
    insns = (_Instruction * len(program))(*[_Instruction(*i) for i in program])
    fprog = _Fprog(len(program), insns)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or \
            libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        return f"no seccomp filter (seccomp: {errno.errorcode.get(ctypes.get_errno(), '?')})"
    return None
