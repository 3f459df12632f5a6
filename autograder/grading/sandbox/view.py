"""What a job's jail shows of the machine: an allow-list computed from the interpreter.

Shown read-only: the virtual environment, every folder the interpreter's
`python -I` path names (its standard library, less its own site-packages
when a venv runs and its regression tests), the folders the caller adds
(the course's packages), the interpreter's executable, and of the system
only what these load: the shared libraries named by the ELF dependencies
(DT_NEEDED, found as the dynamic linker finds them) of every ELF file shown,
their loader, /bin/sh and the commands shell escapes commonly run, time
zones, locales, fonts and the /etc files of ETC_SHARED. Each symbolic link
on the way to a shown file is made again in the job's root (`links`).
Computed once per environment: kept in a file named by the interpreter's,
its path folders' and ld.so.cache's modification times, so a pip install or
a system library upgrade computes it again. What a job shares through these
files: docs/security.md.
"""
from __future__ import annotations

import errno
import glob
import hashlib
import json
import os
import struct
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .jail_init import ETC_SHARED, JAIL_BASE
from .page_cache import regular_files, write_json_whole

# Files a graded kernel reads besides libraries: the shell of `!cmd` and
# subprocess(shell=True), time zones (TZ, /etc/localtime), locales (LANG),
# the fonts matplotlib lists.
EXTRAS = ("/bin/sh", "/usr/share/zoneinfo", "/usr/lib/locale", "/usr/share/fonts")
# The commands a notebook's shell escapes commonly run (`!ls`, `!head data.txt`,
# `!nproc`), where the machine has them: small, and a missing one would print
# "not found" in a student's cell.
COMMANDS = ("bash", "echo", "cat", "ls", "head", "tail", "wc", "sleep", "true", "false", "env", "pwd", "mkdir", "rm",
            "cp", "mv", "touch", "date", "uname", "nproc", "id", "whoami", "sort", "uniq", "cut", "tr", "tee", "seq",
            "basename", "dirname", "du", "df", "stat", "readlink", "realpath", "printf", "test", "expr", "md5sum",
            "sha256sum", "grep", "sed", "awk", "find", "xargs", "which", "free", "ps", "diff", "gzip", "tar")
# Folders of the standard library no graded process imports: its own test suite.
STDLIB_UNUSED = ("test",)
VERSION = 2   # of the computation: a change recomputes every kept view
DEFAULT_LIB_DIRS = ("/lib/{arch}", "/usr/lib/{arch}", "/lib64", "/usr/lib64", "/lib", "/usr/lib")
ASK = ("import json, site, sys; print(json.dumps({'executable': sys.executable, 'prefix': sys.prefix, "
       "'base_prefix': sys.base_prefix, 'path': [p for p in sys.path if p.startswith('/')], "
       "'base_site': site.getsitepackages([sys.base_prefix]), 'stdlib': __import__('sysconfig').get_paths()['stdlib'],"
       " 'arch': getattr(sys.implementation, '_multiarch', '')}))")


@dataclass
class View:
    shown: list[str] = field(default_factory=list)        # real paths, files and folders, bound read-only
    links: list[list[str]] = field(default_factory=list)  # [where, its text]: symbolic links made again
    covered: list[str] = field(default_factory=list)      # folders inside shown ones, covered by an empty tmpfs
    unresolved: list[str] = field(default_factory=list)   # "NAME (needed by FILE)": on this machine nowhere


def interpreter(python: str) -> dict:
    """What `python -I` imports from, and where it lives (asked of it)."""
    done = subprocess.run([python, "-I", "-c", ASK], capture_output=True, text=True, timeout=60,
                          env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
    if done.returncode != 0:
        raise OSError(errno.ENOEXEC, f"{python} -I: {done.stderr.strip()[-300:]}")
    return json.loads(done.stdout)


def key(facts: dict, also) -> str:
    """Changes when the interpreter, a folder on its path (a package added
    or removed), the list of system libraries or the added folders change."""
    def stamp(path):
        try:
            st = os.stat(path)
            return [path, st.st_mtime_ns, st.st_ino]
        except OSError:
            return [path, None]
    parts = [VERSION, facts, stamp(os.path.realpath(facts["executable"])), stamp(facts["prefix"]),
             [stamp(p) for p in facts["path"]], stamp("/etc/ld.so.cache"), sorted(also)]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:20]


_MEMO: dict[str, View] = {}


def view_for(facts: dict, also=(), keep: Path | None = JAIL_BASE) -> View:
    """The view of `facts` (interpreter()) plus the folders `also`: from this
    process's memory, the file kept in `keep`, or computed (and kept)."""
    name = key(facts, also)
    if name in _MEMO:
        return _MEMO[name]
    kept = None if keep is None else keep / f"view-{name}.json"
    found = _load(kept) if kept else None
    if found is None:
        found = compute(facts, also)
        if kept:
            _store(kept, found)
    _MEMO[name] = found
    return found


def _load(path: Path) -> View | None:
    """A kept view, only if this user wrote it and nobody else may change it."""
    try:
        st = path.stat()
        if st.st_uid != os.geteuid() or st.st_mode & 0o022:
            return None
        return View(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None


def _store(path: Path, found: View) -> None:
    try:
        path.parent.mkdir(mode=0o711, exist_ok=True)
    except OSError:
        return
    write_json_whole(path, asdict(found), mode=0o644)


def real_path(path: str, links: dict) -> str:
    """The real path of `path`, as os.path.realpath; every symbolic link met
    on the way is recorded in `links` (its place, under real folders: its text)."""
    todo = list(Path(path).parts[1:])
    real, hops = "/", 0
    while todo:
        part = todo.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            real = os.path.dirname(real)
            continue
        here = os.path.join(real, part)
        if not os.path.islink(here):
            real = here
            continue
        hops += 1
        if hops > 40:
            raise OSError(errno.ELOOP, here)
        text = os.readlink(here)
        links[here] = text
        if text.startswith("/"):
            real = "/"
        todo[:0] = Path(text).parts[1:] if text.startswith("/") else Path(text).parts
    return real


@dataclass
class Elf:
    machine: tuple        # (class, byte order, e_machine): a library must match its user's
    needed: list[str]
    search: list[str]     # RPATH or RUNPATH folders, $ORIGIN expanded
    interp: str = ""      # the loader an executable names


def read_elf(path: str) -> Elf | None:
    """The dynamic section's needs of an ELF file; None if it is not one."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(64)
            if len(head) < 52 or head[:4] != b"\x7fELF":
                return None
            wide, order = head[4] == 2, "<" if head[5] == 1 else ">"
            (machine,) = struct.unpack_from(order + "H", head, 18)
            if wide:
                (phoff,) = struct.unpack_from(order + "Q", head, 32)
                size, count = struct.unpack_from(order + "HH", head, 54)
            else:
                (phoff,) = struct.unpack_from(order + "I", head, 28)
                size, count = struct.unpack_from(order + "HH", head, 42)
            fh.seek(phoff)
            table = fh.read(size * count)
            loads, dynamic, interp = [], None, ""
            for i in range(count):
                if wide:
                    kind, _, offset, vaddr, _, filesz = struct.unpack_from(order + "IIQQQQ", table, i * size)
                else:
                    kind, offset, vaddr, _, filesz = struct.unpack_from(order + "IIIII", table, i * size)
                if kind == 1:
                    loads.append((vaddr, offset, filesz))
                elif kind == 2:
                    dynamic = (offset, filesz)
                elif kind == 3:
                    fh.seek(offset)
                    interp = fh.read(filesz).split(b"\0")[0].decode(errors="replace")
            found = Elf((wide, order, machine), [], [], interp)
            if dynamic is None:
                return found
            fh.seek(dynamic[0])
            raw = fh.read(dynamic[1])
            step = 16 if wide else 8
            entries = [struct.unpack_from(order + ("qQ" if wide else "iI"), raw, at)
                       for at in range(0, len(raw) - step + 1, step)]
            strtab = next((v for tag, v in entries if tag == 5), None)
            if strtab is None:
                return found
            base = next((off + strtab - va for va, off, sz in loads if va <= strtab < va + sz), None)
            if base is None:
                return found

            def text(at):
                fh.seek(base + at)
                return fh.read(4096).split(b"\0")[0].decode(errors="replace")
            rpath, runpath = [], []
            for tag, value in entries:
                if tag == 0:
                    break
                if tag == 1:
                    found.needed.append(text(value))
                elif tag in (15, 29):
                    (rpath if tag == 15 else runpath).extend(p for p in text(value).split(":") if p)
            origins = {os.path.dirname(path), os.path.dirname(os.path.realpath(path))}
            for folder in runpath or rpath:
                for origin in origins:
                    found.search.append(folder.replace("${ORIGIN}", origin).replace("$ORIGIN", origin))
            return found
    except (OSError, struct.error):
        return None


def _ld_so_conf(path: str = "/etc/ld.so.conf", depth: int = 0) -> list[str]:
    """The folders /etc/ld.so.conf names (and the files it includes), in order."""
    out: list[str] = []
    try:
        lines = Path(path).read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if line.startswith("include") and depth < 8:
            for pattern in line.split()[1:]:
                for name in sorted(glob.glob(pattern if pattern.startswith("/") else
                                             os.path.join(os.path.dirname(path), pattern))):
                    out += _ld_so_conf(name, depth + 1)
        elif line.startswith("/"):
            out.append(line)
    return out


class _Libraries:
    """Finds a needed library as the dynamic linker would: the user's own
    RPATH/RUNPATH, then the interpreter executable's RPATH (which applies
    to every library it loads), then the folders of ld.so.conf and the
    default ones; the first file of the same ELF kind."""

    def __init__(self, arch: str, first: list[str]):
        self.first = first
        folders = [*_ld_so_conf(), *(d.format(arch=arch) for d in DEFAULT_LIB_DIRS if arch or "{" not in d)]
        self.system = list(dict.fromkeys(folders))
        self.kinds: dict[str, Elf | None] = {}

    def elf(self, path: str) -> Elf | None:
        if path not in self.kinds:
            self.kinds[path] = read_elf(path)
        return self.kinds[path]

    def find(self, name: str, user: Elf) -> str | None:
        if "/" in name:
            return name if os.path.exists(name) else None
        for folder in [*user.search, *self.first, *self.system]:
            candidate = os.path.join(folder, name)
            if os.path.exists(candidate):
                found = self.elf(candidate)
                if found is not None and found.machine == user.machine:
                    return candidate
        return None


def _elf_files(top: str, skip: set):
    """Files under `top` that may be ELF: named *.so* or executable (not in
    the folders of `skip`)."""
    for path, st in regular_files(top, skip):
        if ".so" in os.path.basename(path) or st.st_mode & 0o111:
            yield path


def compute(facts: dict, also=()) -> View:
    """The view (see the module docstring) of the interpreter `facts` describes."""
    links: dict[str, str] = {}
    real = lambda p: real_path(os.path.abspath(p), links)
    folders = {real(p) for p in [*facts["path"], *also] if os.path.exists(p)}
    if os.path.realpath(facts["prefix"]) != os.path.realpath(facts["base_prefix"]):
        folders.add(real(facts["prefix"]))        # a venv: its pyvenv.cfg, bin and site-packages
    covered = set()
    stdlib = real(facts["stdlib"]) if os.path.isdir(facts["stdlib"]) else ""
    for folder in facts["base_site"]:
        if os.path.isdir(folder) and not any(Path(real(folder)) == Path(p) for p in folders):
            covered.add(real(folder))             # the interpreter's own packages, not on a venv's path
    covered |= {os.path.join(stdlib, name) for name in STDLIB_UNUSED if stdlib and os.path.isdir(
        os.path.join(stdlib, name))}
    files = {real(facts["executable"])}
    for extra in [*EXTRAS, *(f"/etc/{name}" for name in ETC_SHARED), *(f"/usr/bin/{name}" for name in COMMANDS)]:
        if os.path.lexists(extra):
            target = real(extra)
            (folders if os.path.isdir(target) else files).add(target)
    folders = {f for f in folders if not any(f != g and Path(f).is_relative_to(g) for g in folders)}
    inside = lambda p: any(Path(p).is_relative_to(f) for f in folders)
    libraries = _Libraries(facts.get("arch", ""), [])
    executable = libraries.elf(real(facts["executable"]))
    libraries.first = list(executable.search) if executable else []
    todo = [p for f in sorted(folders) for p in _elf_files(f, covered)]
    todo += sorted(files)
    unresolved, done = set(), set()
    while todo:
        path = todo.pop()
        if path in done:
            continue
        done.add(path)
        elf = libraries.elf(path)
        if elf is None:
            continue
        wanted = [elf.interp] if elf.interp else []
        for name in elf.needed:
            found = libraries.find(name, elf)
            if found is None:
                unresolved.add(f"{name} (needed by {path})")
            else:
                wanted.append(found)
        for path_needed in wanted:
            target = real(path_needed)
            if not inside(target):
                files.add(target)
            todo.append(target)
    files = {f for f in files if not inside(f)}
    shown = sorted(folders | files)
    kept_links = sorted([where, text] for where, text in links.items() if not inside(where))
    return View(shown, kept_links, sorted(covered), sorted(unresolved))
