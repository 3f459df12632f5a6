"""Every page a job can read is resident before the job starts.

Jobs share the page cache of the files they all read; a page cached or not
is a bit a later job reads by touching it (a major fault, or a disk read's
time). The filter refuses the drops (syscall_filter.py); this module closes
the loads from the trusted side: `Jail.reserve` calls `keep_warm`, whose
pass reads every visible file (the jail's view, view.py) not wholly cached,
so a job finds nothing cold to load and nothing another job loaded. The pass
is skipped while the kernel's counts of reclaimed file pages and of
`drop_caches` writes (/proc/vmstat) are unchanged since the last pass began
(one read); the batch's own pass also while no file was added or replaced
(a walk of the folders). It is not tried where the visible files would fill more than half
the memory, and pauses where the machine evicts them as fast as a pass reads
them. Costs, and what is left open: docs/security.md ("What is isolated
between jobs").
"""
from __future__ import annotations

import ctypes
import hashlib
import json
import mmap
import os
import time
from dataclasses import dataclass
from pathlib import Path

PAGE = mmap.PAGESIZE
SYS_CACHESTAT = 451          # the same number on x86-64 and arm64 (Linux 6.5)
READ_CHUNK = 1 << 20
MAX_SHARE_OF_MEMORY = 0.5    # warm only what fits in this share of the machine's memory
NOTHING_RECLAIMED = "nothing reclaimed since the last pass"
NOTHING_CHANGED = "nothing reclaimed and no file added or replaced since the last pass"
# A pass that had to read more than THRASH_SHARE of the files again within THRASH_WINDOW_S of the
# last one: the machine's memory does not hold them beside its other work (measured on the development
# machine: 5.5 of 8.6 GB again, 19 s, before every job). Passes then pause for THRASH_WINDOW_S, and
# the channel is open meanwhile: a bounded cost instead of a disk read of gigabytes before each job.
THRASH_SHARE, THRASH_WINDOW_S = 0.25, 300.0


@dataclass
class Warmth:
    files: int = 0           # regular files seen
    size: int = 0            # their bytes
    loaded_files: int = 0    # files that were not all cached, read in full
    loaded_bytes: int = 0
    seconds: float = 0.0
    skipped: str = ""        # why no pass ran ("" when one did)


class _Range(ctypes.Structure):
    _fields_ = [("off", ctypes.c_uint64), ("len", ctypes.c_uint64)]


class _Cachestat(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in ("cache", "dirty", "writeback", "evicted", "recently_evicted")]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
_has_cachestat = [True]


def cached_pages(fd: int, size: int) -> int:
    """How many of the file's pages are in the page cache (cachestat; on a
    kernel before 6.5, mincore on a mapping of it)."""
    if _has_cachestat[0]:
        stat = _Cachestat()
        if _libc.syscall(SYS_CACHESTAT, fd, ctypes.byref(_Range(0, 0)), ctypes.byref(stat), 0) == 0:
            return stat.cache
        _has_cachestat[0] = False
    try:
        return cached_pages_in(fd, 0, size)
    except OSError:
        return 0


def cached_pages_in(fd: int, offset: int, length: int) -> int:
    """How many pages of [offset, offset + length) of the file are cached
    (mincore on a mapping of that range, the same on every kernel)."""
    start = offset - offset % PAGE
    length += offset - start
    address = _libc.mmap(None, length, mmap.PROT_READ, mmap.MAP_SHARED, fd, start)
    if address in (None, ctypes.c_void_p(-1).value):
        raise OSError(ctypes.get_errno(), "mmap")
    try:
        vector = ctypes.create_string_buffer((length + PAGE - 1) // PAGE)
        if _libc.mincore(address, length, vector) != 0:
            raise OSError(ctypes.get_errno(), "mincore")
        return sum(byte & 1 for byte in vector.raw)
    finally:
        _libc.munmap(address, length)


def resident(path: str | Path) -> bool:
    """Whether every page of the file is in the page cache."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        return cached_pages(fd, size) >= (size + PAGE - 1) // PAGE
    finally:
        os.close(fd)


def top_folders(paths) -> list[str]:
    """The real paths, without those inside another one of them."""
    real = sorted({os.path.realpath(p) for p in paths if os.path.lexists(p)})
    return [p for p in real if not any(p != q and Path(p).is_relative_to(q) for q in real)]


def regular_files(top: str, exclude=frozenset()):
    """(path, stat) of each regular file below the folder `top`, not inside a
    folder of `exclude`; symbolic links are not followed."""
    stack = [top]
    while stack:
        try:
            entries = os.scandir(stack.pop())
        except OSError:
            continue
        with entries:
            for entry in entries:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        if entry.path not in exclude:
                            stack.append(entry.path)
                    elif entry.is_file(follow_symlinks=False):
                        yield entry.path, entry.stat(follow_symlinks=False)
                except OSError:
                    continue


def _files(top: str, seen: set, exclude=frozenset()):
    """(path, stat) of each regular file at or below `top`, once per inode,
    not inside a folder of `exclude`; symbolic links are not followed (their
    targets are visible in their own place, or not at all)."""
    try:
        st = os.lstat(top)
    except OSError:
        return
    if not os.path.isdir(top) or os.path.islink(top):
        if os.path.isfile(top) and not os.path.islink(top) and (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            yield top, st
        return
    for path, st in regular_files(top, exclude):
        if (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            yield path, st


def warm(roots, exclude=()) -> Warmth:
    """One pass: every regular file under `roots` that is not wholly cached
    is read in full (reading a cached page costs a copy, not a disk read)."""
    began = time.perf_counter()
    out = Warmth()
    seen: set = set()
    buffer = bytearray(READ_CHUNK)
    flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | (os.O_NOATIME if os.geteuid() == 0 else 0)
    for top in top_folders(roots):
        for path, st in _files(top, seen, frozenset(exclude)):
            size = st.st_size
            out.files += 1
            out.size += size
            if size == 0:
                continue
            try:
                fd = os.open(path, flags)
            except OSError:   # not readable by the grader: not by a job either
                continue
            try:
                if cached_pages(fd, size) >= (size + PAGE - 1) // PAGE:
                    continue
                out.loaded_files += 1
                offset = 0
                while offset < size:
                    got = os.preadv(fd, [buffer], offset)
                    if got <= 0:
                        break
                    offset += got
                out.loaded_bytes += offset
            except OSError:
                continue
            finally:
                os.close(fd)
    out.seconds = time.perf_counter() - began
    return out


def fingerprint(roots, exclude=()) -> str:
    """Of every folder under `roots` (not inside `exclude`) and of each root
    that is a file: its inode and modification time. It changes when a file
    is added, removed, renamed or replaced by a rename (pip, apt), which may
    bring pages no pass read; a file written in place is not seen, and need
    not be: what is written is in the page cache. A walk, no file opened."""
    digest = hashlib.sha256()
    for top in top_folders(roots):
        stack = [top]
        while stack:
            folder = stack.pop()
            try:
                st = os.lstat(folder)
            except OSError:
                continue
            digest.update(f"{folder}\0{st.st_ino}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\n".encode(
                errors="surrogateescape"))
            if not os.path.isdir(folder) or os.path.islink(folder):
                continue
            try:
                with os.scandir(folder) as entries:
                    stack += [e.path for e in entries if e.is_dir(follow_symlinks=False) and e.path not in exclude]
            except OSError:
                continue
    return digest.hexdigest()


def reclaim_count() -> tuple[int, int]:
    """(file pages the kernel has reclaimed, drop_caches writes) since boot:
    while both stay the same, no page left the cache but by a file's own
    truncation, removal or fadvise."""
    counts = {}
    try:
        with open("/proc/vmstat") as fh:
            for line in fh:
                name, _, value = line.partition(" ")
                if name.startswith("pgsteal_") or name == "drop_pagecache":
                    counts[name] = int(value)
    except OSError:
        return (-1, -1)
    stolen = counts.get("pgsteal_file")
    if stolen is None:   # before Linux 5.8: kswapd's and direct reclaim's (anonymous pages too: a pass too many)
        stolen = sum(v for k, v in counts.items() if k.startswith("pgsteal_"))
    return (stolen, counts.get("drop_pagecache", -1))


def memory_bytes() -> int:
    """The machine's memory."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def visible_size(roots, exclude=()) -> int:
    """The bytes of every regular file under `roots`, not inside a folder
    of `exclude` (a walk, nothing read)."""
    seen: set = set()
    return sum(st.st_size for top in top_folders(roots) for _, st in _files(top, seen, frozenset(exclude)))


def keep_warm(roots, state: Path, force: bool = False, exclude=()) -> Warmth:
    """Make every page under `roots` (not inside a folder of `exclude`)
    resident, unless nothing can have left the cache since the last pass
    over the same files began (recorded in `state`, a file only the grader
    writes). With `force` (once a batch), also unless the folders are as
    that pass found them (fingerprint: a walk, no file opened): a file
    added or replaced since is read by a pass only. A page the
    host's own processes drop (their fadvise) is seen by the next pass after
    a reclaim or a change. What a pass's own reads made the kernel reclaim
    is read in by the next call's pass, since the count recorded is the one
    before the pass."""
    roots, exclude = top_folders(roots), sorted(exclude)
    # one state per set of files: graders of two checkouts on one machine do not undo each other's record
    named = hashlib.sha256(json.dumps([roots, exclude]).encode()).hexdigest()[:12]
    state = state.with_name(f"{state.stem}-{named}{state.suffix}")
    before = reclaim_count()
    try:
        last = json.loads(state.read_text())
    except (OSError, ValueError):
        last = {}
    if last.get("roots") != roots or last.get("exclude") != exclude or "size" not in last:
        last = {"roots": roots, "exclude": exclude, "size": visible_size(roots, exclude)}
        write_json_whole(state, last)
    unreclaimed = tuple(last.get("reclaimed", ())) == before and before != (-1, -1)
    if unreclaimed and not force:
        return Warmth(size=last["size"], skipped=NOTHING_RECLAIMED)
    folders = fingerprint(roots, exclude) if force else None   # before the pass: a change during it is seen next
    if unreclaimed and last.get("fingerprint") == folders:
        return Warmth(size=last["size"], skipped=NOTHING_CHANGED)
    now = time.time()
    if not force and last.get("thrashing_until", 0) > now:
        return Warmth(size=last["size"], skipped=f"the last pass read {last['loaded'] >> 20} of {last['size'] >> 20} "
                      "MB again: memory does not hold the visible files beside the machine's other work; passes "
                      f"pause until {time.strftime('%H:%M:%S', time.localtime(last['thrashing_until']))}")
    if last["size"] > MAX_SHARE_OF_MEMORY * memory_bytes():
        return Warmth(size=last["size"], skipped=f"the visible files ({last['size'] >> 20} MB) would fill more "
                      f"than {MAX_SHARE_OF_MEMORY:.0%} of memory: not kept resident")
    folders = folders or fingerprint(roots, exclude)
    done = warm(roots, exclude)
    thrashing = done.loaded_bytes > THRASH_SHARE * done.size and now - last.get("passed_at", 0) < THRASH_WINDOW_S
    write_json_whole(state, {"roots": roots, "exclude": exclude, "size": done.size, "reclaimed": list(before),
                             "passed_at": now, "loaded": done.loaded_bytes, "fingerprint": folders,
                             "thrashing_until": now + THRASH_WINDOW_S if thrashing else 0})
    return done


def write_json_whole(path: Path, data, mode: int | None = None) -> None:
    """Write `data` as JSON in one step (a reader never sees half of it),
    with `mode` set before it is in place when given; a write that fails
    leaves nothing behind."""
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        partial.write_text(json.dumps(data))
        if mode is not None:
            os.chmod(partial, mode)
        os.replace(partial, path)
    except OSError:
        partial.unlink(missing_ok=True)
