"""`python -m autograder collect SOURCE`: import submissions into
.course/submitted/<student>/<assignment>/, the layout nbgrader grades.

SOURCE is either
* a folder laid out as <student>/<assignment>/<files> (or
  <student>/<assignment>.ipynb), or
* a zip exported by an LMS, whose entry names carry the student id, e.g.
  Canvas `doejane_12345_67890_01_embeddings.ipynb`; the id is taken with
  --id-pattern (a regex with a `student` group, default: the text before the
  first underscore) and the assignment from the course name in the entry
  (01_embeddings) or --assignment. A zip of the folder layout works too.

Symbolic links, paths escaping the folder, files over the size limit and
names that are not safe ids are refused and reported, never followed. The
report says, per student, what was found, what is missing and what is
malformed (the same intake the grader uses).
"""
from __future__ import annotations

import re
import shutil
import stat
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from . import course, gradebook
from .submission import MAX_NOTEBOOK_BYTES, inspect_submission

SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
DEFAULT_ID_PATTERN = r"^(?P<student>[^_/]+)_"
MAX_FILE_BYTES = MAX_NOTEBOOK_BYTES


@dataclass
class Report:
    found: dict[tuple[str, str], list[str]] = field(default_factory=dict)   # (student, assignment) -> files
    refused: list[str] = field(default_factory=list)
    malformed: dict[tuple[str, str], list[str]] = field(default_factory=dict)  # problems found by the intake
    unusable: set[tuple[str, str]] = field(default_factory=set)                # ... that leave nothing to grade

    def add(self, student: str, assignment: str, name: str) -> None:
        self.found.setdefault((student, assignment), []).append(name)


def _assignment_in(name: str, assignments: list[str], forced: str | None) -> str | None:
    if forced:
        return forced
    hits = [a for a in assignments if a in name]
    return hits[0] if len(hits) == 1 else None


def _start(student: str, assignment: str, report: Report, fresh: set) -> Path:
    """The student's assignment folder, emptied once per collection (a new
    submission replaces the old one and its repaired copy)."""
    dest = gradebook.folder("submitted") / student / assignment
    if (student, assignment) not in fresh:
        shutil.rmtree(dest, ignore_errors=True)
        (gradebook.folder("submitted") / student / f".{assignment}.original.ipynb").unlink(missing_ok=True)
        dest.mkdir(parents=True)
        fresh.add((student, assignment))
    return dest


def _target_name(assignment: str, name: str) -> str:
    """The course notebook is always stored under its released name."""
    return f"{assignment}.ipynb" if name.endswith(".ipynb") else name


def collect_folder(src: Path, assignments: list[str], report: Report, fresh: set) -> None:
    for sdir in sorted(src.iterdir()):
        if sdir.is_symlink():
            report.refused.append(f"{sdir.name}: symbolic link refused")
            continue
        if not sdir.is_dir() or sdir.name.startswith("."):
            continue
        if not SAFE_ID.match(sdir.name):
            report.refused.append(f"{sdir.name}: not a safe student id (letters, digits, . _ -)")
            continue
        for entry in sorted(sdir.rglob("*")):
            rel = entry.relative_to(sdir)
            if any(p.startswith(".") for p in rel.parts):
                continue
            if entry.is_symlink():
                report.refused.append(f"{sdir.name}/{rel}: symbolic link refused")
                continue
            if not entry.is_file():
                continue
            assignment = rel.parts[0] if rel.parts[0] in assignments else _assignment_in(rel.name, assignments, None)
            if assignment is None:
                report.refused.append(f"{sdir.name}/{rel}: belongs to no assignment of the course")
                continue
            if entry.stat().st_size > MAX_FILE_BYTES:
                report.refused.append(f"{sdir.name}/{rel}: over {MAX_FILE_BYTES // 2**20} MB")
                continue
            dest = _start(sdir.name, assignment, report, fresh) / _target_name(assignment, rel.name)
            shutil.copyfile(entry, dest, follow_symlinks=False)
            report.add(sdir.name, assignment, str(rel))


def collect_zip(src: Path, assignments: list[str], report: Report, fresh: set, id_pattern: str,
                forced: str | None) -> None:
    pattern = re.compile(id_pattern)
    with zipfile.ZipFile(src) as zf:
        for info in zf.infolist():
            name = info.filename
            path = PurePosixPath(name)
            if path.is_absolute() or ".." in path.parts:
                report.refused.append(f"{name}: path leaves the archive, refused")
                continue
            if info.is_dir() or any(p.startswith(".") or p == "__MACOSX" for p in path.parts):
                continue
            if stat.S_ISLNK(info.external_attr >> 16):
                report.refused.append(f"{name}: symbolic link refused")
                continue
            if info.file_size > MAX_FILE_BYTES:
                report.refused.append(f"{name}: over {MAX_FILE_BYTES // 2**20} MB")
                continue
            if len(path.parts) >= 3 and path.parts[1] in assignments:   # <student>/<assignment>/file
                student, assignment = path.parts[0], path.parts[1]
            else:
                m = pattern.search(path.parts[0])
                student = m.group("student") if m else None
                assignment = _assignment_in(path.name, assignments, forced)
            if not student or not SAFE_ID.match(student):
                report.refused.append(f"{name}: no safe student id found with pattern {id_pattern!r}")
                continue
            if assignment is None:
                report.refused.append(f"{name}: cannot tell the assignment (name it, or pass --assignment)")
                continue
            dest = _start(student, assignment, report, fresh) / _target_name(assignment, path.name)
            with zf.open(info) as fin, open(dest, "wb") as fout:
                shutil.copyfileobj(fin, fout)
            report.add(student, assignment, name)


def collect(src: Path, assignments: list[str] | None = None, id_pattern: str = DEFAULT_ID_PATTERN,
            assignment: str | None = None) -> Report:
    src = Path(src)
    assignments = assignments or course.assignments()
    report, fresh = Report(), set()
    if not src.exists():
        raise SystemExit(f"{src}: no such folder or zip file")
    if src.is_dir():
        collect_folder(src, assignments, report, fresh)
    elif zipfile.is_zipfile(src):
        collect_zip(src, assignments, report, fresh, id_pattern, assignment)
    else:
        raise SystemExit(f"{src}: neither a folder nor a zip file")
    for student, a in report.found:
        intake = inspect_submission(gradebook.folder("submitted") / student / a / f"{a}.ipynb", course.release_notebook(a))
        if intake.problems:
            report.malformed[(student, a)] = intake.problems
        if intake.fatal:
            report.unusable.add((student, a))
    return report


def format_report(report: Report, assignments: list[str]) -> str:
    students = sorted({s for s, _ in report.found})
    lines = [f"{len(students)} students, {len(report.found)} submissions collected into "
             f"{gradebook.folder('submitted')}/"]
    width = max([len("student"), *map(len, students)])
    lines.append(f"{'student':<{width}}  " + "  ".join(a[:13] for a in assignments))
    for s in students:
        cells = []
        for a in assignments:
            mark = ("missing" if (s, a) not in report.found else "MALFORMED" if (s, a) in report.unusable
                    else "warnings" if (s, a) in report.malformed else "ok")
            cells.append(f"{mark:<{len(a[:13])}}")
        lines.append(f"{s:<{width}}  " + "  ".join(cells))
    for (s, a), problems in sorted(report.malformed.items()):
        lines += [f"  {s}/{a}: {p}" for p in problems]
    lines += [f"  refused: {r}" for r in report.refused]
    return "\n".join(lines)
