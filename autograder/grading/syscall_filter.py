"""A seccomp filter for jailed processes: no kernel keyrings.

Kernel keys belong to a uid, not to a namespace, and jail uids are reused:
a key a job adds to its user keyring outlives the job, and one left with
other-read permission is readable by any later job. `deny_keyrings()` makes
add_key, request_key and keyctl fail with EPERM (as Docker's default
profile does) in the calling process and everything it starts; no other
system call changes.

Why a hand-written BPF program rather than libseccomp: libseccomp's own
Python binding is a Debian package built for the system Python (a virtual
environment cannot import it without the whole of /usr/lib/python3 on its
path, and it breaks on another Python version), and `pyseccomp`, the ctypes
binding on PyPI, has had no release since 2021. The filter is eight
instructions against the kernel's seccomp ABI, which does not change; the
part libseccomp would otherwise get right for us is the architecture check,
done here explicitly: a system call made through another ABI than the
process's own (32-bit `int 0x80` on x86-64, AArch32 on arm64, x32) fails
with ENOSYS, so the numbers below cannot be sidestepped. On a machine not in
the table no filter is installed and `deny_keyrings` says so.
"""
from __future__ import annotations

import ctypes
import errno
import platform

PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
BPF_LD_W_ABS, BPF_JEQ_K, BPF_JGE_K, BPF_RET_K = 0x20, 0x15, 0x35, 0x06
RET_ALLOW, RET_ERRNO = 0x7FFF0000, 0x00050000
OFFSET_NR, OFFSET_ARCH = 0, 4   # struct seccomp_data: int nr; __u32 arch; ...
X32_SYSCALL_BIT = 0x40000000

# machine -> (AUDIT_ARCH of its native ABI, whether x32 numbers exist, add_key, request_key, keyctl)
KEYRING_SYSCALLS = {
    "x86_64": (0xC000003E, True, (248, 249, 250)),
    "aarch64": (0xC00000B7, False, (217, 218, 219)),
}

# keyctl's number here (root clears a jail uid's keyrings with it); None on another machine
KEYCTL = KEYRING_SYSCALLS.get(platform.machine(), (0, False, (None,) * 3))[2][2]


class _Instruction(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint)]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Instruction))]


def keyring_filter(machine: str) -> list[tuple[int, int, int, int]] | None:
    """The BPF program (code, jt, jf, k) for `machine`; None if unknown."""
    if machine not in KEYRING_SYSCALLS:
        return None
    arch, has_x32, numbers = KEYRING_SYSCALLS[machine]
    other_abi = (BPF_RET_K, 0, 0, RET_ERRNO | errno.ENOSYS)
    deny = (BPF_RET_K, 0, 0, RET_ERRNO | errno.EPERM)
    body = [(BPF_LD_W_ABS, 0, 0, OFFSET_ARCH), (BPF_JEQ_K, 1, 0, arch), other_abi,
            (BPF_LD_W_ABS, 0, 0, OFFSET_NR)]
    if has_x32:
        body.append((BPF_JGE_K, 0, 1, X32_SYSCALL_BIT))
        body.append(other_abi)
    # a match jumps over the matches after it and the ALLOW, to `deny`
    body += [(BPF_JEQ_K, len(numbers) - i, 0, nr) for i, nr in enumerate(numbers)]
    return body + [(BPF_RET_K, 0, 0, RET_ALLOW), deny]


def deny_keyrings(machine: str | None = None) -> str | None:
    """Install the keyring filter on this process (inherited by every child
    and thread it starts later; it cannot be removed). Sets no_new_privs,
    which seccomp needs without CAP_SYS_ADMIN (and which also keeps setuid
    programs from gaining rights). Returns None, or why it is not installed."""
    machine = machine or platform.machine()
    program = keyring_filter(machine)
    if program is None:
        return f"no keyring filter for {machine}: add_key/keyctl/request_key are not blocked"
    insns = (_Instruction * len(program))(*[_Instruction(*i) for i in program])
    fprog = _Program(len(program), insns)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or \
            libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        return f"no keyring filter (seccomp: {errno.errorcode.get(ctypes.get_errno(), '?')})"
    return None
