"""Kernel objects jobs share that are not locks: the page cache and file futexes.

Two jobs on one machine read the same read-only files (interpreter, venv,
course packages), so they share those files' pages in the page cache, and a
futex on a mapping of such a file is keyed by the file's inode and offset in
every namespace. A kernel that has just run the hidden tests could spell
them as cached and evicted pages of a large venv file, for a later job to
read back with Linux AIO and RWF_NOWAIT or with mincore; or as threads
waiting on futexes of a shared mapping, which another job's FUTEX_WAKE
counts. The seccomp filter refuses each probe (syscall_filter.py):

* io_setup (and the rest of Linux AIO) and mincore: ENOSYS;
* futex without FUTEX_PRIVATE_FLAG: a wait answers EAGAIN at once, a wake
  wakes nobody (0);

tried here from inside a root jail on tinylm/__init__.py (every job imports
it), with the control: the same probe outside a jail, where each channel
works (so the test can fail). Private futexes (every lock of a process)
still sleep and wake, and an honest notebook whose checks run torch's
thread pools still grades in full.
"""
from __future__ import annotations

import json
import os

import pytest

from autograder import course, specimens
from autograder.grading.sandbox import syscall_filter

from .scripts import run_reporting

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="the root jail's namespaces and uid switch need root")
on_x86_64 = pytest.mark.skipif(os.uname().machine not in syscall_filter.ABIS, reason="no filter for this machine")
SHARED = course.ROOT / "tinylm" / "__init__.py"   # every job imports it: cached, readable everywhere
NUMBERS = {name: syscall_filter.syscall_number(name) for name in ("io_setup", "io_submit", "io_getevents", "mincore",
                                                                   "futex")}

# Tries each channel on the file argv[1]; the system call numbers come in
# argv[2] (the probe runs with `python -I`, no course import). Prints JSON.
PROBE = r"""
import ctypes, errno, json, mmap, os, struct, sys, threading, time
path, nr = sys.argv[1], json.loads(sys.argv[2])
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
facts = {}
def call(*args):
    got = libc.syscall(*args)
    return got if got >= 0 else errno.errorcode[ctypes.get_errno()]

fd = os.open(path, os.O_RDONLY)
os.pread(fd, 1, 0)                         # the first page is cached now, whoever asks

# Linux AIO: a read with RWF_NOWAIT in the iocb says whether the page is cached
ctx = ctypes.c_ulong(0)
facts["io_setup"] = call(nr["io_setup"], 8, ctypes.byref(ctx))
if facts["io_setup"] == 0:
    buf = ctypes.create_string_buffer(4096)
    RWF_NOWAIT, IOCB_CMD_PREAD = 8, 0
    iocb = ctypes.create_string_buffer(struct.pack("QIIHhIQQqQII", 0, 0, RWF_NOWAIT, IOCB_CMD_PREAD, 0, fd,
                                                   ctypes.addressof(buf), 4096, 0, 0, 0, 0), 64)
    iocbs = (ctypes.c_void_p * 1)(ctypes.addressof(iocb))
    facts["io_submit"] = call(nr["io_submit"], ctx, 1, iocbs)
    event = ctypes.create_string_buffer(32)
    call(nr["io_getevents"], ctx, 1, 1, event, None)
    facts["nowait_read"] = struct.unpack("QQqq", event.raw)[2]   # bytes read, or -EAGAIN if not cached

# mincore on a mapping of the shared file: one byte per page, bit 0 = cached
size = os.fstat(fd).st_size
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
address = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
vec = ctypes.create_string_buffer((size + 4095) // 4096)
got = call(nr["mincore"], ctypes.c_void_p(address), ctypes.c_size_t(size), vec)
facts["mincore"] = got if got != 0 else vec.raw[0] & 1

# a futex on the shared mapping: a thread waits, FUTEX_WAKE's count says whether it was there
FUTEX_WAIT, FUTEX_WAKE, PRIVATE = 0, 1, 128
word = ctypes.c_void_p(address)
value = ctypes.c_uint32.from_address(address).value
timeout = struct.pack("qq", 3, 0)
def wait(op, key, into):
    start = time.monotonic()
    into["answer"] = call(nr["futex"], key, op, value if key is word else 0, ctypes.c_char_p(timeout), None, 0)
    into["seconds"] = time.monotonic() - start
waited = {}
waiter = threading.Thread(target=wait, args=(FUTEX_WAIT, word, waited))
waiter.start()
time.sleep(0.5)
facts["shared_wake"] = call(nr["futex"], word, FUTEX_WAKE, 1, None, None, 0)
waiter.join()
facts["shared_wait"] = waited["answer"]

# a private futex (what every lock of the process uses) still sleeps and is woken
own = ctypes.c_uint32(0)
waited = {}
waiter = threading.Thread(target=wait, args=(FUTEX_WAIT | PRIVATE, ctypes.byref(own), waited))
waiter.start()
time.sleep(0.5)
facts["private_wake"] = call(nr["futex"], ctypes.byref(own), FUTEX_WAKE | PRIVATE, 1, None, None, 0)
waiter.join()
facts["private_wait"], facts["private_slept"] = waited["answer"], waited["seconds"] > 0.3
print("PROBE", json.dumps(facts), flush=True)
"""


def _probe(tmp_path, jailed: bool) -> dict:
    return run_reporting(tmp_path, "probe.py", PROBE, [SHARED, json.dumps(NUMBERS)], jailed, "PROBE")


@on_x86_64
def test_the_control_each_channel_works_outside_a_jail(tmp_path):
    facts = _probe(tmp_path, jailed=False)
    assert facts["io_setup"] == 0 and facts["io_submit"] == 1 and facts["nowait_read"] > 0, facts
    assert facts["mincore"] == 1, f"mincore did not see the cached first page: {facts}"
    assert (facts["shared_wake"], facts["shared_wait"]) == (1, 0), f"the shared page's waiter was not seen: {facts}"
    assert (facts["private_wake"], facts["private_wait"], facts["private_slept"]) == (1, 0, True), facts


@root_only
@on_x86_64
def test_a_jailed_job_cannot_read_residency_or_count_shared_futex_waiters(tmp_path):
    facts = _probe(tmp_path, jailed=True)
    assert facts["io_setup"] == "ENOSYS" and "nowait_read" not in facts, facts
    assert facts["mincore"] == "ENOSYS", facts
    # the waiter was refused at once (EAGAIN: glibc retries), so the wake found nobody, as it says
    assert (facts["shared_wait"], facts["shared_wake"]) == ("EAGAIN", 0), facts
    assert (facts["private_wake"], facts["private_wait"], facts["private_slept"]) == (1, 0, True), facts


A = "03_causal_attention"


@root_only
@pytest.mark.grader
@pytest.mark.slow
def test_an_honest_notebook_grades_in_full_under_the_filter(tmp_path):
    """The filter's futex rule under a real kernel, torch's thread pools and
    the recheck child: an honest 03 keeps every point, unflagged."""
    if A not in course.assignments():
        pytest.skip(f"notebook {A} is not built")
    from autograder.grading.batch import Options, grade_all
    from ..batches import course_data
    data = tmp_path / "data"
    specimens.submit(data, "ann", A, specimens.honest(A))
    with course_data(data):
        results = grade_all(Options(assignments=[A], workers=1, progress=False))
    (result,) = results
    assert (result["status"], result["score"], result["flags"]) == ("graded", result["max_score"], []), result
    assert result["max_score"] > 0
