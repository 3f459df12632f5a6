"""The page cache of the files every job reads, as a channel between jobs.

A job that loads or drops pages of a shared read-only file leaves one bit a
page for a later job, which touches each page and counts its own major
faults (getrusage: a fault is no system call). It outlives both jobs, so
grading one job after another does not close it. Closed from both sides:

* dropping: the seccomp filter answers 0 to posix_fadvise's DONTNEED and
  NOREUSE and madvise's MADV_PAGEOUT and MADV_COLD without running them,
  and ENOSYS to process_madvise; the other drops (MADV_DONTNEED on a shared
  mapping, MADV_REMOVE, an O_DIRECT read) leave the page cached anyway;
* loading: `Jail.reserve` reads, before the job starts, every file the jail
  shows that is not wholly cached (page_cache.py), so a job finds nothing
  cold to load and nothing another job loaded.

The channel here is the attack as a class would write it, on a file of the
test's own in tinylm/ (every jail shows it), one page a bit, pages 512 KiB
apart (beyond any readahead) and read-around turned off: outside a jail
(the control) the whole message crosses; between a jailed sender and a
jailed receiver started after it has ended, the receiver's pages are all
cached and what it decodes does not depend on what was sent.
"""
from __future__ import annotations

import json
import os
import sys

import pytest

from autograder import course
from autograder.grading.sandbox import jail as jail_module
from autograder.grading.sandbox import page_cache, syscall_filter

from .scripts import run_reporting

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="the root jail's namespaces and uid switch need root")
on_x86_64 = pytest.mark.skipif(os.uname().machine not in syscall_filter.ABIS, reason="no filter for this machine")
PAGE = page_cache.PAGE
SPACING = 512 * 1024
BITS = 16
MESSAGE = [1, 0, 1, 1, 0, 0, 1, 0, 0, 1, 1, 0, 1, 0, 0, 1]   # 8 ones: decoding all ones is right half the time

# argv: mode (send, receive, drop), the shared file, the message (send).
# Run with `python -I`: nothing of the course imported. Prints JSON.
AGENT = r"""
import ctypes, errno, json, mmap, os, resource, sys
mode, path = sys.argv[1], sys.argv[2]
SPACING, BITS, PAGE = 512 * 1024, 16, mmap.PAGESIZE
libc = ctypes.CDLL(None, use_errno=True)
libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
libc.syscall.restype = ctypes.c_long
def answer(got):
    return got if got >= 0 else errno.errorcode[ctypes.get_errno()]
MADV_RANDOM, MADV_DONTNEED, MADV_REMOVE, MADV_COLD, MADV_PAGEOUT, MADV_DONTNEED_LOCKED = 1, 4, 9, 20, 21, 24
fd = os.open(path, os.O_RDONLY)
size = os.fstat(fd).st_size
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)           # reads bring in the page asked for only
# mapped with libc: madvise needs the address, which Python's mmap objects do not give
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
base = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
libc.madvise(ctypes.c_void_p(base), size, MADV_RANDOM)       # no read-around on a fault
facts = {}
if mode == "send":
    for i, bit in enumerate(json.loads(sys.argv[3])):
        offset = i * SPACING
        if bit:
            os.pread(fd, 1, offset)
        else:
            os.posix_fadvise(fd, offset, PAGE, os.POSIX_FADV_DONTNEED)
            libc.madvise(ctypes.c_void_p(base + offset), PAGE, MADV_PAGEOUT)
elif mode == "drop":   # a way to drop a page on each page of the file, from bit 0 on; the answers
    page = lambda i: ctypes.c_void_p(base + i * SPACING)
    try:
        os.posix_fadvise(fd, 0, PAGE, os.POSIX_FADV_DONTNEED)        # page 0, not mapped here
        facts["fadvise_dontneed"] = 0
    except OSError as err:
        facts["fadvise_dontneed"] = errno.errorcode[err.errno]
    try:
        os.posix_fadvise(fd, SPACING, PAGE, os.POSIX_FADV_NOREUSE)   # page 1
        facts["fadvise_noreuse"] = 0
    except OSError as err:
        facts["fadvise_noreuse"] = errno.errorcode[err.errno]
    for i, (name, advice) in enumerate((("madv_pageout", MADV_PAGEOUT), ("madv_cold", MADV_COLD),
                                        ("madv_remove", MADV_REMOVE), ("madv_dontneed", MADV_DONTNEED),
                                        ("madv_dontneed_locked", MADV_DONTNEED_LOCKED)), start=2):
        ctypes.string_at(base + i * SPACING, 1)                      # pages 2 to 6, mapped here
        facts[name] = answer(libc.madvise(page(i), PAGE, advice))
    ctypes.string_at(base + 7 * SPACING, 1)
    iov = (ctypes.c_void_p * 2)(base + 7 * SPACING, PAGE)
    pidfd = libc.syscall(434, os.getpid(), 0)                        # pidfd_open: 434 on x86-64 and arm64
    facts["process_madvise"] = answer(libc.syscall(440, pidfd, iov, 1, MADV_PAGEOUT, 0))   # page 7
    try:
        direct = os.open(path, os.O_RDONLY | os.O_DIRECT)
        aligned = mmap.mmap(-1, PAGE)
        facts["o_direct_read"] = os.preadv(direct, [aligned], 8 * SPACING)                 # page 8
    except OSError as err:
        facts["o_direct_read"] = errno.errorcode[err.errno]
else:  # receive: a page that faults in from disk was not cached
    word = []
    for i in range(BITS):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_majflt
        ctypes.string_at(base + i * SPACING, 1)
        word.append(int(resource.getrusage(resource.RUSAGE_SELF).ru_majflt == before))
    facts["word"] = word
print("AGENT", json.dumps(facts), flush=True)
"""


@pytest.fixture
def channel_file():
    """A file of this test's own where every jail shows the course, cold."""
    path = course.ROOT / "tinylm" / f"_page_cache_channel_{os.getpid()}.bin"
    path.write_bytes(os.urandom(BITS * SPACING))
    path.chmod(0o644)
    try:
        yield path
    finally:
        path.unlink(missing_ok=True)


def _make_cold(path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)   # a dirty page cannot be dropped
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        assert page_cache.cached_pages(fd, os.fstat(fd).st_size) == 0, "the kernel kept pages of the test's file"
    finally:
        os.close(fd)


def _bit_pages_cached(path) -> list[int]:
    """For each bit, whether its page is cached (mincore, from the trusted side)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return [int(page_cache.cached_pages_in(fd, i * SPACING, PAGE) == 1) for i in range(BITS)]
    finally:
        os.close(fd)


def _agent(tmp_path, jailed: bool, *args) -> dict:
    return run_reporting(tmp_path, "agent.py", AGENT, args, jailed, "AGENT")


def test_the_control_outside_a_jail_the_whole_message_crosses(tmp_path, channel_file):
    _make_cold(channel_file)
    _agent(tmp_path, False, "send", channel_file, json.dumps(MESSAGE))
    assert _bit_pages_cached(channel_file) == MESSAGE, "the sender's loads and drops did not take"
    assert _agent(tmp_path, False, "receive", channel_file)["word"] == MESSAGE


DROPPED = 9   # pages 0 to 8: one way to drop each (AGENT's drop mode)


def _cache_pages_one_by_one(path) -> None:
    """Cache the pages of the bits, each on its own (the kernel may cache a
    whole file read at once as one large folio, which no call drops in part)."""
    _make_cold(path)
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        for i in range(BITS):
            os.pread(fd, 1, i * SPACING)
    finally:
        os.close(fd)
    assert _bit_pages_cached(path) == [1] * BITS


@root_only
@on_x86_64
def test_a_jailed_job_cannot_drop_a_shared_page(tmp_path, channel_file, monkeypatch):
    """Each way to drop a page runs in the jail (answered 0 where the filter
    ignores the hint, ENOSYS for process_madvise, the kernel's own answer
    for the rest) and every page is still cached, as the trusted side sees;
    outside a jail the same calls drop pages (the control: fadvise's
    DONTNEED at least, the attack the issue measured)."""
    # the filter alone: no pass (the pages this test caches one by one stay the only ones it reads)
    monkeypatch.setattr(page_cache, "keep_warm", lambda *args, **kwargs: page_cache.Warmth(skipped="off"))
    _cache_pages_one_by_one(channel_file)
    facts = _agent(tmp_path, True, "drop", channel_file)
    assert _bit_pages_cached(channel_file)[:DROPPED] == [1] * DROPPED, f"a jailed job dropped a shared page: {facts}"
    ignored = ("fadvise_dontneed", "fadvise_noreuse", "madv_pageout", "madv_cold")
    assert {name: facts[name] for name in ignored} == dict.fromkeys(ignored, 0), facts
    assert facts["process_madvise"] == "ENOSYS", facts
    assert facts["madv_remove"] in ("EACCES", "EINVAL", "EOPNOTSUPP"), facts  # no writable shared mapping
    assert facts["madv_dontneed"] == 0 and facts["o_direct_read"] == PAGE, facts
    _cache_pages_one_by_one(channel_file)
    control = _agent(tmp_path, False, "drop", channel_file)
    left = _bit_pages_cached(channel_file)[:DROPPED]
    assert left[0] == 0, f"outside a jail fadvise's DONTNEED did not drop the page: {control}, cached {left}"


def test_a_pass_reads_in_a_cold_file_and_runs_again_only_after_reclaim(tmp_path, channel_file, monkeypatch):
    """On the course's tinylm/ folder (the whole visible set is the
    end-to-end test's); the folders a jail shows are the ones passed. A page
    the host itself drops (no reclaim, no file changed) stays cold until a
    reclaim or a change, as docs/security.md says."""
    visible = jail_module.visible_paths()
    assert {str(course.ROOT.resolve() / "tinylm"), os.path.realpath(sys.prefix)} <= set(visible), visible
    assert "/usr" not in visible, "the jail shows the system's files it loads, not the whole of /usr"
    roots, state = [str(course.ROOT / "tinylm")], tmp_path / "page-cache.json"
    _make_cold(channel_file)
    monkeypatch.setattr(page_cache, "reclaim_count", lambda: (1000, 1))
    done = page_cache.keep_warm(roots, state)
    assert (done.skipped, page_cache.resident(channel_file)) == ("", True), done
    assert done.loaded_files >= 1 and done.loaded_bytes >= BITS * SPACING, done
    _make_cold(channel_file)   # the host dropped it: no reclaim, so no pass until a forced one
    assert page_cache.keep_warm(roots, state).skipped == page_cache.NOTHING_RECLAIMED
    assert not page_cache.resident(channel_file)
    monkeypatch.setattr(page_cache, "reclaim_count", lambda: (1001, 1))   # the kernel reclaimed a page
    again = page_cache.keep_warm(roots, state)
    assert (again.skipped, page_cache.resident(channel_file)) == ("", True), again
    _make_cold(channel_file)   # the host drops it again: the batch's pass sees a change of the files only
    assert page_cache.keep_warm(roots, state, force=True).skipped == page_cache.NOTHING_CHANGED
    replacement = channel_file.with_name(channel_file.name + ".new")   # the host replaces it, as pip does
    replacement.write_bytes(channel_file.read_bytes())
    os.replace(replacement, channel_file)
    _make_cold(channel_file)
    forced = page_cache.keep_warm(roots, state, force=True)
    assert (forced.skipped, page_cache.resident(channel_file)) == ("", True), forced


@root_only
@on_x86_64
def test_a_jailed_sender_then_a_jailed_receiver_recover_no_bit(tmp_path, channel_file, monkeypatch):
    """The file starts cold and no pass has seen it (a fresh grader's state).
    The sender loads the pages of its ones and drops those of its zeros; the
    receiver, reserved after the sender has ended, counts major faults. Every
    page it touches is cached (0 major faults), so it decodes all ones
    whatever was sent: 8 of 16 bits right, what a coin gives."""
    monkeypatch.setattr(jail_module, "PAGE_CACHE_STATE", tmp_path / "page-cache.json")
    size = jail_module.view_size()
    if size > page_cache.MAX_SHARE_OF_MEMORY * page_cache.memory_bytes():
        pytest.skip(f"the jail shows {size >> 20} MB, more than the pass keeps resident on this machine's memory: "
                    "the channel is open here (docs/security.md)")
    _make_cold(channel_file)
    _agent(tmp_path, True, "send", channel_file, json.dumps(MESSAGE))
    word = _agent(tmp_path, True, "receive", channel_file)["word"]
    assert word == [1] * BITS, f"the receiver found cold pages: {word} (sent {MESSAGE})"
    assert sum(a == b for a, b in zip(word, MESSAGE)) == BITS // 2


def test_the_doctor_warns_where_the_visible_files_are_too_many_to_keep_resident():
    from autograder.grading.sandbox import protections
    assert protections._page_cache(8 << 30, 24 << 30)["status"] == "OK"
    small = protections._page_cache(8 << 30, 12 << 30)
    assert small["status"] == "WARN" and "not kept resident" in small["detail"], small


def test_passes_pause_where_memory_does_not_hold_the_files(tmp_path, monkeypatch):
    """Two passes in a row that each read most of the files again: the
    machine evicts them as fast as they are read, so passes stop for a
    while (a bounded cost; the channel is open meanwhile, as said)."""
    state, roots = tmp_path / "page-cache.json", [str(tmp_path)]
    (tmp_path / "f").write_bytes(b"x" * 4096)
    reclaimed = iter(range(1000, 2000))
    monkeypatch.setattr(page_cache, "reclaim_count", lambda: (next(reclaimed), 1))
    monkeypatch.setattr(page_cache, "warm", lambda roots, exclude=(): page_cache.Warmth(
        files=1, size=4096, loaded_files=1, loaded_bytes=4096))
    assert page_cache.keep_warm(roots, state).skipped == ""      # the first: everything may be cold
    assert page_cache.keep_warm(roots, state).skipped == ""      # all of it again, at once: thrashing
    paused = page_cache.keep_warm(roots, state)
    assert "pause" in paused.skipped and paused.loaded_bytes == 0, paused
    assert page_cache.keep_warm(roots, state, force=True).skipped == ""   # the batch's pass still runs


def test_the_batch_pass_runs_again_only_after_reclaim_or_an_added_file(tmp_path, monkeypatch):
    """The batch's forced pass is skipped while nothing was reclaimed and no
    file was added, removed or replaced by a rename; any of these, or a
    reclaim, runs it. A file written in place does not, and its written
    pages are cached by the write itself."""
    shown = tmp_path / "shown"
    (shown / "deep").mkdir(parents=True)
    (shown / "deep" / "a").write_bytes(b"a" * 8192)
    roots, state = [str(shown)], tmp_path / "page-cache.json"
    monkeypatch.setattr(page_cache, "reclaim_count", lambda: (1000, 1))
    assert page_cache.keep_warm(roots, state, force=True).skipped == ""
    assert page_cache.keep_warm(roots, state, force=True).skipped == page_cache.NOTHING_CHANGED
    (shown / "deep" / "b").write_bytes(b"b")
    assert page_cache.keep_warm(roots, state, force=True).skipped == ""           # added
    assert page_cache.keep_warm(roots, state, force=True).skipped == page_cache.NOTHING_CHANGED
    (tmp_path / "new").write_bytes(b"n" * 8192)
    os.replace(tmp_path / "new", shown / "deep" / "a")
    assert page_cache.keep_warm(roots, state, force=True).skipped == ""           # replaced, as pip does
    with open(shown / "deep" / "b", "r+b") as fh:                                 # written in place
        fh.write(b"c")
    assert page_cache.resident(shown / "deep" / "b")
    assert page_cache.keep_warm(roots, state, force=True).skipped == page_cache.NOTHING_CHANGED
    monkeypatch.setattr(page_cache, "reclaim_count", lambda: (1001, 1))
    assert page_cache.keep_warm(roots, state, force=True).skipped == ""           # reclaimed
    (shown / "deep" / "b").unlink()
    assert page_cache.keep_warm(roots, state, force=True).skipped == ""           # removed


def test_a_covered_folder_is_neither_walked_nor_read(tmp_path):
    """The folders a jail covers inside a shown one (the interpreter's
    unused packages) are not visible, so no pass pays for them."""
    covered = tmp_path / "shown" / "covered"
    covered.mkdir(parents=True)
    (tmp_path / "shown" / "seen").write_bytes(b"s" * 8192)
    (covered / "unseen").write_bytes(b"u" * 8192)
    _make_cold(covered / "unseen")
    done = page_cache.warm([str(tmp_path / "shown")], exclude=[str(covered)])
    assert (done.files, page_cache.resident(covered / "unseen")) == (1, False), done
