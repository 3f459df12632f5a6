"""Which of the jail's protections run on this host, measured in a real jail.

    python -m autograder.grading.sandbox.protections     # JSON: one entry per protection

reserves a jail as `grade` does, runs a small probe in it, and reports what
the probe found: the job's cgroup and its limits, the size of its folder and
of its private /tmp (tmpfs caps), its task limit, what of the machine it sees
(the allow-list root, or the deny-list fallback: two canaries outside the
allow-list, a file of the checkout and the course data folder), and which of
the seccomp filter's refusals hold (add_key; a lock query and a file watch on
a file every job shares). `python -m autograder doctor --instructor` prints
these lines; nothing is inferred from the configuration alone, so a
protection the host refuses shows up as missing, with what that loses.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ... import course
from .. import gradebook
from . import page_cache
from .jail import Jail, Limits, view_size
from .kernel import as_jail_starter, hidden_paths, jailed
from .syscall_filter import syscall_number

# What the seccomp filter refuses, as a job meets it on a file every job shares:
# a lock query and a watch; and mincore and a futex wait that is not private
# (no braces: probes built with str.format embed it).
FILTER_FACTS = r"""
def filter_facts(shared):
    import ctypes, fcntl, os, struct
    libc = ctypes.CDLL(None, use_errno=True)
    found = dict()
    with open(shared, "rb") as fh:
        try:
            fcntl.fcntl(fh, fcntl.F_GETLK, struct.pack("hhqqi", fcntl.F_WRLCK, 0, 0, 1, 0))
            found["lock_query"] = "answered"
        except OSError as err:
            found["lock_query"] = os.strerror(err.errno)
    vec = ctypes.create_string_buffer(1)   # and the page it lies in: no new mapping (a job near RLIMIT_AS)
    page = ctypes.c_void_p(ctypes.addressof(vec) & ~4095)
    found["mincore"] = "answered" if libc.syscall(MINCORE, page, 1, vec) == 0 else os.strerror(ctypes.get_errno())
    found["inotify"] = "allowed" if libc.inotify_init1(0) >= 0 else os.strerror(ctypes.get_errno())
    word, timeout = ctypes.c_uint32(0), ctypes.create_string_buffer(struct.pack("qq", 0, 1000000))
    found["shared_futex"] = "slept" if libc.syscall(FUTEX, ctypes.byref(word), 0, 0, timeout, None, 0) == 0 \
        else os.strerror(ctypes.get_errno())
    return found
""".replace("MINCORE", str(syscall_number("mincore") or -1)).replace("FUTEX", str(syscall_number("futex") or -1))
PROBE = FILTER_FACTS + r"""
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
# outside the allow-list: absent there; under the deny-list fallback the data folder is an empty cover
facts["canaries"] = {path: "absent" if not os.path.exists(path) else "covered" if os.path.isdir(path)
                     and not os.listdir(path) else "visible" for path in sys.argv[2:]}
facts.update(filter_facts(os.__file__))  # the standard library: every job opens it
print(json.dumps(facts))
"""
MIB = 1024 * 1024


def _entry(status: str, name: str, detail: str, fix: str = "") -> dict:
    return {"status": status, "name": name, "detail": detail, "fix": fix}


def measure(limits: Limits) -> tuple[Jail, dict, str]:
    """Run the probe in a jail: (the jail, its facts, the jail's notes)."""
    add_key = syscall_number("add_key") or -1
    with Jail.reserve(limits, hide=hidden_paths(gradebook.db_url())) as jail:
        env = as_jail_starter({"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(course.ROOT),
                               **jail.env()})
        done = subprocess.run(jailed([sys.executable, "-I", "-c", PROBE, str(add_key), *map(str, canaries())]),
                              env=env, capture_output=True, text=True, timeout=60, cwd="/")
    if done.returncode != 0:
        raise RuntimeError(f"the probe failed in the jail (exit {done.returncode}): {done.stderr.strip()[-500:]}")
    return jail, json.loads(done.stdout), done.stderr.strip()


def canaries() -> list[Path]:
    """Two paths a job must not see: a file of the checkout outside the
    course's packages, and the course data folder (made if missing)."""
    data = gradebook.data_dir()
    data.mkdir(parents=True, exist_ok=True)
    return [course.ROOT / "pyproject.toml", data]


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
    out.append(_view(facts["canaries"]))
    out.append(_syscalls(facts, root))
    out.append(_page_cache(view_size(), page_cache.memory_bytes()))
    return out


def _page_cache(visible: int, memory: int) -> dict:
    """Whether every page a job can read is made resident before it starts."""
    if visible > page_cache.MAX_SHARE_OF_MEMORY * memory:
        return _entry("WARN", "sandbox page cache", f"the jail shows {visible // MIB} MB of files, more than "
                      f"{page_cache.MAX_SHARE_OF_MEMORY:.0%} of the machine's {memory // MIB} MB: they are not kept "
                      "resident, so a job can leave bits for a later one in which pages are cached",
                      "grade on a machine with more memory; until then `grade --workers 1` does not close this one")
    return _entry("OK", "sandbox page cache", f"the {visible // MIB} MB of files a job can read are made resident "
                  "before each job starts (again only after the kernel reclaimed pages), and jobs cannot drop them")


def _view(canaries: dict[str, str]) -> dict:
    """What a job sees of the machine, and what the fallback loses."""
    if all(state == "absent" for state in canaries.values()):
        return _entry("OK", "sandbox view", "allow-list: a job sees its interpreter, the venv, the course's "
                      "packages and the system files they load read-only, and its own folder; nothing else (the checkout's other "
                      "files and the course data folder are absent)")
    seen = ", ".join(f"{path}: {state}" for path, state in canaries.items())
    data_folder = str(gradebook.data_dir())
    if canaries.get(data_folder) in ("absent", "covered"):
        return _entry("WARN", "sandbox view", f"deny-list fallback ({seen}): solutions, the course data folder, "
                      "the gradebook and .git are covered, but every other file an unprivileged user may read stays "
                      "readable in a job", "grade as root on a kernel that allows pivot_root (docs/security.md)")
    return _entry("WARN", "sandbox view", f"nothing hidden ({seen}): a job reads what the grading user may read, "
                  "submissions and gradebook included", "grade as root (docs/security.md)")


def _syscalls(facts: dict, root: bool) -> dict:
    """Which refusals of the seccomp filter hold in a job, and what a missing one loses."""
    refused = {"add_key": facts["add_key"] == "Operation not permitted",
               "file locks": facts["lock_query"] == "No locks available",
               "file watches": facts["inotify"] == "Operation not permitted",
               "page-cache residency": facts["mincore"] == "Function not implemented",
               "shared futexes": facts["shared_futex"] == "Resource temporarily unavailable"}
    if all(refused.values()):
        return _entry("OK", "sandbox syscalls", "seccomp filter: keyrings, file locks, leases, file watches, "
                      "page-cache residency probes and shared futexes refused")
    missing = [name for name, ok in refused.items() if not ok]
    loses = "jobs graded at the same time can signal each other through the files they share"
    if not refused["add_key"]:
        loses += ", and a job can leave keys for later ones" + (" (root clears a jail uid's keyrings after each job)"
                                                               if root else "")
    return _entry("WARN", "sandbox syscalls", f"not refused in a job: {', '.join(missing)}: {loses}",
                  "grade on x86-64 or arm64 Linux with seccomp; until then `grade --workers 1` (one job at a "
                  "time) closes the channels that need two jobs at once (locks, watches, futexes)")


def main() -> int:
    print(json.dumps(report()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
