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
names that are not safe ids are refused and reported, never followed. Bytes
are counted as they are copied (a zip entry's declared size can lie): a
submission over `max_submission_bytes` or a collection over
`max_collection_bytes` stops taking files, and says which limit and how to
raise it, so a small zip that expands to gigabytes fills no disk. A corrupt
zip entry is reported and the entries after it are still imported. A
submission of more than MAX_SUBMISSION_FILES files is rejected whole, the
reason left beside its folder for `grade` (submission.rejection). The
report says, per student, what was found, what is missing and what is
malformed (the same intake the grader uses); every learner-controlled
string in it is printed escaped (escape.printable).

Each submission's time is recorded for the late policy only from a source
the student does not control (deadlines.py): the LMS export's own record
(`--times FILE`), or collect's own clock (when it first saw this very
notebook); never a timestamp.txt, a zip entry's time or a file's modification
time, which the student sets. Anything else is "time unknown", and the report
says so. A timestamp.txt in the submission is kept only when it is a short,
readable time (nbgrader reads it), else removed and reported.
"""
from __future__ import annotations

import re
import shutil
import stat
import unicodedata
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from ... import course
from .. import deadlines, gradebook
from ..errors import GradingError
from ..escape import printable
from ..records import digest
from .notebook import MAX_NOTEBOOK_BYTES, MAX_SUBMISSION_FILES, inspect_submission, rejection_note, too_many_files

MAX_ID_LENGTH = 64


def student_id(name: str) -> str | None:
    """The student id a folder or zip entry names, or None when it is not a
    safe one: up to MAX_ID_LENGTH letters and digits of any script, with . _ -
    after the first, in Unicode's composed form (NFC), so a folder an Apple
    system saved decomposed (zoe + U+0308) and a Windows zip's zoë are one
    student. Control, format and combining characters are refused: they would
    reorder or hide what the id looks like where it is printed."""
    name = unicodedata.normalize("NFC", name)
    ok = (0 < len(name) <= MAX_ID_LENGTH and name[0].isalnum()
          and all(ch.isalnum() or ch in "._-" for ch in name))
    return name if ok else None

DEFAULT_ID_PATTERN = r"^(?P<student>[^_/]+)_"
MAX_FILE_BYTES = MAX_NOTEBOOK_BYTES
MAX_SUBMISSION_BYTES = 2 * MAX_NOTEBOOK_BYTES   # a full-size notebook and as much again in data files
MAX_COLLECTION_BYTES = 2 * 2**30
# What a zip member can raise when it is corrupt, truncated, encrypted or
# compressed with a method Python lacks.
BAD_ENTRY_ERRORS = (zipfile.BadZipFile, zlib.error, NotImplementedError, RuntimeError, EOFError, OSError, ValueError)
CHUNK = 2**20


@dataclass
class Report:
    found: dict[tuple[str, str], list[str]] = field(default_factory=dict)   # (student, assignment) -> files
    refused: list[str] = field(default_factory=list)
    malformed: dict[tuple[str, str], list[str]] = field(default_factory=dict)  # problems found by the intake
    unusable: set[tuple[str, str]] = field(default_factory=set)                # ... that leave nothing to grade
    max_submission_bytes: int = MAX_SUBMISSION_BYTES
    max_collection_bytes: int = MAX_COLLECTION_BYTES
    copied: dict[tuple[str, str], int] = field(default_factory=dict)          # bytes written per submission
    files: dict[tuple[str, str], int] = field(default_factory=dict)           # files offered per submission
    times: dict = field(default_factory=dict)      # (student, assignment) -> the LMS export's time (--times)

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
        rejection_note(dest).unlink(missing_ok=True)
        dest.mkdir(parents=True)
        fresh.add((student, assignment))
    return dest


class OverLimit(Exception):
    pass


def _over_file_cap(key: tuple[str, str], report: Report) -> bool:
    """Count one more file offered for the submission; True past the cap
    (the submission is then rejected whole, by _reject_crowded)."""
    report.files[key] = report.files.get(key, 0) + 1
    return report.files[key] > MAX_SUBMISSION_FILES


def _reject_crowded(report: Report) -> None:
    for key, count in report.files.items():
        if count > MAX_SUBMISSION_FILES:
            dest = gradebook.folder("submitted") / key[0] / key[1]
            shutil.rmtree(dest, ignore_errors=True)
            dest.mkdir(parents=True)
            rejection_note(dest).write_text(too_many_files(count))
            report.found.setdefault(key, [])
            report.malformed[key] = [too_many_files(count)]
            report.unusable.add(key)


def _copy_capped(fin, dest: Path, key: tuple[str, str], report: Report) -> None:
    """Copy counting the bytes actually written; over a limit the partial
    file is removed and OverLimit says which limit and how to raise it."""
    written, before = 0, report.copied.get(key, 0)
    total = sum(report.copied.values())
    try:
        with open(dest, "wb") as fout:
            while chunk := fin.read(CHUNK):
                written += len(chunk)
                if written > MAX_FILE_BYTES:
                    raise OverLimit(f"over {MAX_FILE_BYTES // 2**20} MB")
                if before + written > report.max_submission_bytes:
                    raise OverLimit(f"the submission {key[0]}/{key[1]} passed its "
                                    f"{report.max_submission_bytes / 2**20:g} MB limit (raise it with "
                                    "`collect --max-submission-mb`)")
                if total + written > report.max_collection_bytes:
                    raise OverLimit(f"the collection passed its {report.max_collection_bytes / 2**20:g} MB limit "
                                    "(raise it with `collect --max-total-mb`)")
                fout.write(chunk)
    except BaseException:
        dest.unlink(missing_ok=True)
        raise
    report.copied[key] = before + written


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
        student = student_id(sdir.name)
        if student is None:
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
            if _over_file_cap((student, assignment), report):
                continue
            dest = _start(student, assignment, report, fresh) / _target_name(assignment, rel.name)
            try:
                with open(entry, "rb") as fin:
                    _copy_capped(fin, dest, (student, assignment), report)
            except OverLimit as err:
                report.refused.append(f"{sdir.name}/{rel}: refused, {err}")
                continue
            report.add(student, assignment, str(rel))


def collect_zip(src: Path, assignments: list[str], report: Report, fresh: set, id_pattern: str,
                forced: str | None) -> None:
    pattern = re.compile(id_pattern)
    try:
        zf = zipfile.ZipFile(src)
    except BAD_ENTRY_ERRORS as err:
        raise GradingError(f"{src}: the zip file cannot be read ({type(err).__name__}: {err}); download it again")
    with zf:
        for info in zf.infolist():
            try:
                _collect_entry(zf, info, assignments, report, fresh, pattern, id_pattern, forced)
            except OverLimit as err:
                report.refused.append(f"{info.filename}: refused, {err}")
            except BAD_ENTRY_ERRORS as err:
                report.refused.append(f"{info.filename}: corrupt zip entry ({type(err).__name__}: {err}); not "
                                      "imported, the other entries were")


def entry_name(info: zipfile.ZipInfo) -> str:
    """A zip entry's name as its maker wrote it: zipfile reads a name without
    the UTF-8 flag as cp437, but many LMS and system zip tools write UTF-8
    without setting it (zoë would read as zo├½)."""
    if info.flag_bits & 0x800:
        return info.filename
    try:
        return info.filename.encode("cp437").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return info.filename


def _collect_entry(zf: zipfile.ZipFile, info: zipfile.ZipInfo, assignments: list[str], report: Report, fresh: set,
                   pattern: re.Pattern, id_pattern: str, forced: str | None) -> None:
    """One entry of an LMS zip: refused and reported, skipped, or imported.
    What a corrupt entry raises (BAD_ENTRY_ERRORS) is the caller's to report."""
    name = entry_name(info)
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts:
        report.refused.append(f"{name}: path leaves the archive, refused")
        return
    if info.is_dir() or any(p.startswith(".") or p == "__MACOSX" for p in path.parts):
        return
    if stat.S_ISLNK(info.external_attr >> 16):
        report.refused.append(f"{name}: symbolic link refused")
        return
    if info.file_size > MAX_FILE_BYTES:
        report.refused.append(f"{name}: over {MAX_FILE_BYTES // 2**20} MB")
        return
    if len(path.parts) >= 3 and path.parts[1] in assignments:   # <student>/<assignment>/file
        student, assignment = path.parts[0], path.parts[1]
    else:
        m = pattern.search(path.parts[0])
        student = m.group("student") if m else None
        assignment = _assignment_in(path.name, assignments, forced)
    student = student_id(student) if student else None
    if student is None:
        report.refused.append(f"{name}: no safe student id found with pattern {id_pattern!r}")
        return
    if assignment is None:
        report.refused.append(f"{name}: cannot tell the assignment (name it, or pass --assignment)")
        return
    if _over_file_cap((student, assignment), report):
        return
    dest = _start(student, assignment, report, fresh) / _target_name(assignment, path.name)
    with zf.open(info) as fin:
        _copy_capped(fin, dest, (student, assignment), report)
    report.add(student, assignment, name)


def collect(src: Path, assignments: list[str] | None = None, id_pattern: str = DEFAULT_ID_PATTERN,
            assignment: str | None = None, max_submission_bytes: int = MAX_SUBMISSION_BYTES,
            max_collection_bytes: int = MAX_COLLECTION_BYTES, times: Path | None = None) -> Report:
    """Import SOURCE; `times`: the LMS export's CSV of submission times
    (deadlines.read_lms_times), the only time a folder or zip can carry."""
    src = Path(src)
    assignments = assignments or course.assignments()
    for name, value in (("max_submission_bytes", max_submission_bytes), ("max_collection_bytes", max_collection_bytes)):
        if value <= 0:
            raise ValueError(f"{name} must be a positive number of bytes, got {value}")
    deadlines.load()   # a bad deadlines file stops collect before anything is imported
    report, fresh = Report(max_submission_bytes=max_submission_bytes, max_collection_bytes=max_collection_bytes,
                           times=deadlines.read_lms_times(times, assignments, assignment) if times else {}), set()
    if not src.exists():
        raise GradingError(f"{src}: no such folder or zip file")
    if src.is_dir():
        collect_folder(src, assignments, report, fresh)
    elif zipfile.is_zipfile(src):
        collect_zip(src, assignments, report, fresh, id_pattern, assignment)
    else:
        raise GradingError(f"{src}: neither a folder nor a zip file")
    _reject_crowded(report)
    _record_times(report)
    for student, a in report.found:
        if (student, a) in report.unusable:
            continue
        try:
            intake = inspect_submission(gradebook.folder("submitted") / student / a / f"{a}.ipynb",
                                        course.release_notebook(a))
        except Exception as err:  # noqa: BLE001: one unreadable notebook must not stop the report
            report.malformed[(student, a)] = [f"the intake could not read it ({type(err).__name__}: {err}); "
                                              "please report this grader bug"]
            report.unusable.add((student, a))
            continue
        if intake.problems:
            report.malformed.setdefault((student, a), []).extend(intake.problems)
        if intake.fatal:
            report.unusable.add((student, a))
    return report


def _record_times(report: Report) -> None:
    """Each submission's time from the LMS's record when given, else collect's
    own clock (first seen); a timestamp.txt that came with it is never a
    time, and kept only when nbgrader can read it."""
    for student, a in report.found:
        folder = gradebook.folder("submitted") / student / a
        removed = deadlines.sane_timestamp_file(folder)
        if removed:
            report.malformed.setdefault((student, a), []).append(removed)
        when = report.times.get((student, a))
        deadlines.record_time(student, a, digest(folder / f"{a}.ipynb"), when,
                              deadlines.SOURCE_LMS if when else "",
                              "" if when or not report.times else "not in the LMS's times file")


def format_report(report: Report, assignments: list[str]) -> str:
    students = sorted({s for s, _ in report.found})
    lines = [f"{len(students)} students, {len(report.found)} submissions collected into "
             f"{printable(gradebook.folder('submitted'))}/"]
    width = max([len("student"), *(len(printable(s)) for s in students)])
    lines.append(f"{'student':<{width}}  " + "  ".join(a[:13] for a in assignments))
    for s in students:
        cells = []
        for a in assignments:
            mark = ("missing" if (s, a) not in report.found else "MALFORMED" if (s, a) in report.unusable
                    else "warnings" if (s, a) in report.malformed else "ok")
            cells.append(f"{mark:<{len(a[:13])}}")
        lines.append(f"{printable(s):<{width}}  " + "  ".join(cells))
    for (s, a), problems in sorted(report.malformed.items()):
        lines += [f"  {printable(s)}/{printable(a)}: {printable(p)}" for p in problems]
    lines += [f"  refused: {printable(r)}" for r in report.refused]
    lines += ["submission times:", *deadlines.report_lines(report.found)] if report.found else []
    return "\n".join(lines)
