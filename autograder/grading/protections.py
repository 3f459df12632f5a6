"""Which of the jail's protections run on this host, measured in a real jail.

    python -m autograder.grading.protections     # JSON: one entry per protection

reserves a jail as `grade` does, runs a small probe in it, and reports what
the probe found: the job's cgroup and its limits, the size of its folder and
of its private /tmp (tmpfs caps), its task limit, and whether add_key is
refused (the seccomp keyring filter). `python -m autograder doctor
--instructor` prints these lines; nothing is inferred from the configuration
alone, so a protection the host refuses shows up as missing.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

from .. import course
from .jail import Jail, Limits
from .syscall_filter import KEYRING_SYSCALLS

PROBE = r"""
import ctypes, json, os, resource, sys
libc = ctypes.CDLL(None, use_errno=True)
add_key = int(sys.argv[1])
facts = {"uid": os.getuid(), "nproc": resource.getrlimit(resource.RLIMIT_NPROC)[0],
         "cgroup": open("/proc/self/cgroup").read().split()}
if add_key < 0:
    facts["add_key"] = "unknown system call number"
elif libc.syscall(add_key, b"user", b"tinylm-doctor", b"x", 1, -4) < 0:
    facts["add_key"] = os.strerror(ctypes.get_errno())
else:
    facts["add_key"] = "allowed"
for name, path in (("folder", "."), ("scratch", "/tmp")):
    st = os.statvfs(path)
    facts[name] = st.f_blocks * st.f_frsize // (1024 * 1024)
print(json.dumps(facts))
"""
MIB = 1024 * 1024


def _entry(status: str, name: str, detail: str, fix: str = "") -> dict:
    return {"status": status, "name": name, "detail": detail, "fix": fix}


def measure(limits: Limits) -> tuple[Jail, dict, str]:
    """Run the probe in a jail: (the jail, its facts, the jail's notes)."""
    add_key = KEYRING_SYSCALLS.get(os.uname().machine, (0, False, (-1,)))[2][0]
    with Jail.reserve(limits) as jail:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(course.ROOT), **jail.env()}
        done = subprocess.run([sys.executable, "-m", "autograder.grading.jail", "--", sys.executable, "-I", "-c",
                               PROBE, str(add_key)], env=env, capture_output=True, text=True, timeout=60, cwd="/")
    if done.returncode != 0:
        raise RuntimeError(f"the probe failed in the jail (exit {done.returncode}): {done.stderr.strip()[-500:]}")
    return jail, json.loads(done.stdout), done.stderr.strip()


def report(limits: Limits | None = None) -> list[dict]:
    limits = limits or Limits()
    root = os.geteuid() == 0
    try:
        jail, facts, notes = measure(limits)
    except (OSError, RuntimeError, ValueError, subprocess.TimeoutExpired) as err:
        return [_entry("FAIL", "sandbox", f"could not run a jailed probe: {err}",
                       "grade on Linux, as root for the full protection (docs/security.md)")]
    out = []
    if root:
        out.append(_entry("OK", "sandbox isolation", f"namespaces and a uid of its own per job (probe ran as "
                                                     f"{facts['uid']})" + (f"; {notes}" if notes else "")))
    else:
        out.append(_entry("WARN", "sandbox isolation", "not root: the job runs with your rights" +
                          (f"; {notes}" if notes else ""), "grade as root for a uid per job (docs/security.md)"))
    in_cgroup = [line for line in facts["cgroup"] if f"tinylm-jail-{jail.uid}" in line]
    if in_cgroup and jail.cgroup.kind != "none":
        out.append(_entry("OK", "sandbox job totals", f"cgroup {jail.cgroup.kind} per job "
                          f"({', '.join(jail.cgroup.controllers)}): memory {limits.memory_mb} MB, "
                          f"{limits.nproc} tasks, {limits.cpus:g} CPU together"))
    else:
        why = jail.cgroup.why or "the job was not in its cgroup"
        tasks = "per job uid" if root else "for your whole user"
        out.append(_entry("WARN", "sandbox job totals", f"no job cgroup ({why}); fallback: {limits.memory_mb} MB "
                          f"address space per process, RLIMIT_NPROC {facts['nproc']} {tasks}",
                          "grade as root, or delegate a cgroup v2 and name it in TINYLM_JAIL_CGROUP"))
    folder = facts["folder"] == limits.folder_mb
    scratch = facts["scratch"] == limits.scratch_mb
    detail = (f"job folder {'a tmpfs of ' + str(limits.folder_mb) + ' MB' if folder else 'on the host disk, not capped'}"
              f"; /tmp, /var/tmp, /dev/shm {'one tmpfs of ' + str(limits.scratch_mb) + ' MB' if scratch else 'not capped'}"
              f"; {limits.file_mb} MB per file")
    out.append(_entry("OK" if folder and scratch else "WARN", "sandbox files", detail,
                      "" if folder and scratch else "grade as root to cap the job's folder"))
    if facts["add_key"] == "Operation not permitted":
        out.append(_entry("OK", "sandbox keyrings", "add_key, request_key, keyctl refused (seccomp filter)"))
    else:
        out.append(_entry("WARN", "sandbox keyrings", f"add_key in a job: {facts['add_key']}; jobs can use kernel "
                          "keyrings" + ("; root clears a jail uid's keyrings after each job" if root else ""),
                          "grade on x86-64 or arm64 Linux with seccomp (docs/security.md)"))
    return out


def main() -> int:
    print(json.dumps(report()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
