"""Due dates, submission times, lateness and the late policy.

One source of truth: `deadlines.toml` in the course data folder
(.course/deadlines.toml, or $TINYLM_COURSE_DATA/deadlines.toml). Without it
nothing is late. Times without an offset are read in `timezone`:

    timezone = "Europe/Berlin"        # IANA name; default "UTC"

    [due]                             # one line per notebook; a notebook without one is never late
    01_embeddings = 2026-12-10T23:59:00
    02_rmsnorm = 2026-12-17T23:59:00+01:00

    [late]
    policy = "per_day"                # "none" (lateness shown only), "per_day" or "zero"
    percent_per_day = 10              # per_day: this share of the points earned, per started day late
    cutoff_days = 5                   # any policy: later than this, the notebook scores zero
    unknown_time = "full_penalty"     # a submission whose time is unknown: "full_penalty" or "no_penalty"

    [extensions.doejane]              # per student: days added, or a due date of their own
    01_embeddings = 2
    02_rmsnorm = 2026-12-20T12:00:00

A submission's time comes only from a source the student does not control,
recorded beside the submission (`.<assignment>.submitted.json`) by whatever
brought it in:
* the LMS export's own record: `collect SOURCE --times FILE`, a CSV of
  student, assignment, submitted_at (ISO 8601 with an offset) as the LMS
  exports it (read_lms_times: bounded in size and format, each bad line named);
* nbgrader's exchange, through the course's own intake (grading/intake/exchange.py):
  the time the file system recorded when the student's last file in the
  exchange changed (a change time, which no user can set back), kept only
  when plausible (not before the assignment's release, not after the collect);
* the collector's own clock: when `collect` first saw this very notebook
  (its digest), which proves the work was handed in no later than that: on
  time if that is before the due date, else its time is unknown.
Never the student's: a `timestamp.txt` in the submission (written by the
student's own `nbgrader submit`, or by hand), a zip entry's time fields, a
file's modification time (`cp -p` keeps any). A time from no trusted source
is "time unknown", said with the reason wherever lateness is shown, and the
policy says what it costs: `[late] unknown_time = "full_penalty"` (the
default: the points wait for a time, e.g. from the LMS) or `"no_penalty"`.

`lateness(student, assignment)` is the one call for another tool (the class
report): due date, extension, time, its source, seconds late, and
`.penalty(score)`.
"""
from __future__ import annotations

import datetime as dt
import json
import math
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from nbgrader.plugins import LateSubmissionPlugin

from .. import course
from . import gradebook
from .errors import GradingError
from .escape import printable
from .records import GradeResult, LateFields

FILE_NAME = "deadlines.toml"
POLICIES = ("none", "per_day", "zero")
UNKNOWN_TIME = ("full_penalty", "no_penalty")
TIMESTAMP_FILE = "timestamp.txt"   # nbgrader's exchange writes it; nbgrader autograde reads it; never a time here
DAY_S = 86400.0
UTC = dt.timezone.utc
MAX_FILE_BYTES = 1 << 20           # deadlines.toml, and an LMS times file
MAX_EXTENSION_DAYS = 366           # an extension, or a cut-off, longer than a year is a typo
EARLIEST, LATEST = dt.datetime(2000, 1, 1, tzinfo=UTC), dt.datetime(2100, 1, 1, tzinfo=UTC)

# Where a submission's time came from: only sources the student does not control.
SOURCE_LMS = "the LMS export's record"
SOURCE_EXCHANGE = "nbgrader's exchange (when the file system last saw the student's files change)"
SOURCE_COLLECTED = "collect's own clock (first collected: handed in no later than this)"
TRUSTED_SOURCES = (SOURCE_LMS, SOURCE_EXCHANGE, SOURCE_COLLECTED)


class DeadlinesError(GradingError, ValueError):
    """deadlines.toml (or an LMS times file) cannot be used; the message names
    the file, the line and the fix. The commands print it, without a traceback."""


@dataclass(frozen=True)
class Policy:
    kind: str = "none"
    percent_per_day: float = 0.0
    cutoff_days: float | None = None
    unknown_time: str = "full_penalty"

    def penalty(self, score: float, seconds_late: float) -> float:
        """Points taken from `score` for a notebook `seconds_late` late."""
        if seconds_late <= 0 or score <= 0:
            return 0.0
        if self.cutoff_days is not None and seconds_late > self.cutoff_days * DAY_S:
            return float(score)
        if self.kind == "zero":
            return float(score)
        if self.kind == "per_day":
            days = math.ceil(seconds_late / DAY_S)
            return round(min(float(score), score * self.percent_per_day / 100 * days), 9)
        return 0.0

    def unknown_penalty(self, score: float) -> float:
        """Points taken from `score` when its time is unknown and a due date
        exists: all of them under "full_penalty" where lateness can cost
        anything, none under "no_penalty"."""
        costs = self.kind != "none" or self.cutoff_days is not None
        return float(score) if costs and self.unknown_time == "full_penalty" and score > 0 else 0.0

    def scoring_days(self) -> float | None:
        """How long after a due date late work can still earn points: 0 for
        "zero", the days until the per-day penalty takes everything, the
        cut-off if sooner; None when late work scores at any time ("none"
        without a cut-off)."""
        limits = [] if self.cutoff_days is None else [self.cutoff_days]
        if self.kind == "zero":
            limits.append(0.0)
        elif self.kind == "per_day":
            limits.append(math.ceil(100 / self.percent_per_day) - 1)  # the last started day that leaves points
        return min(limits) if limits else None

    def describe(self) -> str:
        text = {"none": "no penalty", "zero": "zero when late",
                "per_day": f"{self.percent_per_day:g}% of the points per started day late"}[self.kind]
        return text + (f", zero after {self.cutoff_days:g} days" if self.cutoff_days is not None else "")


@dataclass
class Deadlines:
    timezone: str = "UTC"
    due: dict[str, dt.datetime] = field(default_factory=dict)                  # assignment -> UTC
    policy: Policy = field(default_factory=Policy)
    extensions: dict[tuple[str, str], dt.datetime | dt.timedelta] = field(default_factory=dict)

    def due_for(self, student: str, assignment: str) -> tuple[dt.datetime | None, dt.timedelta | None]:
        """The student's due date (extension included) and their extension."""
        base, ext = self.due.get(assignment), self.extensions.get((student, assignment))
        if isinstance(ext, dt.datetime):
            return ext, (ext - base if base else None)
        if base is None:
            return None, None
        return (base + ext, ext) if ext else (base, None)

    def last_due(self, assignment: str) -> dt.datetime | None:
        """The latest due date of anyone for `assignment` (extensions included)."""
        times = [self.due_for(s, assignment)[0] for s, a in self.extensions if a == assignment]
        times = [t for t in [self.due.get(assignment), *times] if t is not None]
        return max(times) if times else None

    def last_scoring_moment(self, assignment: str) -> dt.datetime | None:
        """The last moment a late submission of `assignment` can still earn
        points under the policy and every extension (None: no due date, or
        late work scores at any time; see Policy.scoring_days)."""
        last, days = self.last_due(assignment), self.policy.scoring_days()
        return None if last is None or days is None else last + dt.timedelta(days=days)


def deadlines_path() -> Path:
    return gradebook.data_dir() / FILE_NAME


class _Lines:
    """Where a key of deadlines.toml is written, for messages: 'line N'."""

    def __init__(self, text: str):
        self.lines, table = {}, ""
        for number, line in enumerate(text.splitlines(), 1):
            stripped = line.split("#", 1)[0].strip()
            if stripped.startswith("[") and stripped.endswith("]"):
                table = stripped.strip("[]").strip()
                self.lines.setdefault((table, None), number)
            elif "=" in stripped:
                self.lines.setdefault((table, stripped.split("=", 1)[0].strip().strip('"')), number)

    def at(self, table: str, key: str | None = None) -> str:
        number = self.lines.get((table, key)) or self.lines.get((table, None))
        return f"{FILE_NAME} line {number}" if number else FILE_NAME


def _zone(name, where: str = FILE_NAME) -> dt.tzinfo:
    if not isinstance(name, str):
        raise DeadlinesError(f"{where}: timezone must be a text such as \"Europe/Berlin\", got {name!r}")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise DeadlinesError(f"{where}: unknown timezone {name!r}; use an IANA name such as \"UTC\" or "
                             "\"America/New_York\"") from None


def _instant(value, zone: dt.tzinfo, where: str) -> dt.datetime:
    """A TOML date-time as an aware UTC datetime (no offset: read in `zone`,
    refused where that local time does not exist or happens twice)."""
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        raise DeadlinesError(f"{where} = {value} is a date without a time; write e.g. {value}T23:59:00")
    if not isinstance(value, dt.datetime):
        raise DeadlinesError(f"{where} must be a date-time such as 2026-12-10T23:59:00, got {value!r}")
    if value.tzinfo is None:
        first, second = value.replace(tzinfo=zone, fold=0), value.replace(tzinfo=zone, fold=1)
        if first.astimezone(UTC).astimezone(zone).replace(tzinfo=None) != value:
            raise DeadlinesError(f"{where} = {value.isoformat()} does not exist in {zone} (clocks go forward that "
                                 "night): write a time outside the gap, or with an offset")
        if first.utcoffset() != second.utcoffset():
            raise DeadlinesError(f"{where} = {value.isoformat()} happens twice in {zone} (clocks go back that "
                                 f"night): write the offset you mean, e.g. {first.isoformat()} or "
                                 f"{second.isoformat()}")
        value = first
    when = value.astimezone(UTC)
    if not EARLIEST <= when < LATEST:
        raise DeadlinesError(f"{where} = {value.isoformat()} is not a date of a course (2000 to 2099)")
    return when


def _known(name: str, assignments: list[str], where: str) -> str:
    if name not in assignments:
        raise DeadlinesError(f"{where} names {name!r}, which is not a notebook of the course "
                             f"({', '.join(assignments)})")
    return name


def _days(value, where: str, what: str) -> float:
    """A finite number of days in [0, MAX_EXTENSION_DAYS] (inf, nan, 1e9 are typos)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 0 <= value <= MAX_EXTENSION_DAYS:
        raise DeadlinesError(f"{where} = {value!r}: {what} is a number of days from 0 to {MAX_EXTENSION_DAYS}")
    return float(value)


def _policy(table, lines: _Lines) -> Policy:
    where = lines.at("late")
    if not isinstance(table, dict):
        raise DeadlinesError(f"{where}: [late] must be a table")
    unknown = set(table) - {"policy", "percent_per_day", "cutoff_days", "unknown_time"}
    if unknown:
        raise DeadlinesError(f"{where}: [late] has unknown keys {sorted(unknown)}; "
                             "known: policy, percent_per_day, cutoff_days, unknown_time")
    kind = table.get("policy", "none")
    if kind not in POLICIES:
        raise DeadlinesError(f"{lines.at('late', 'policy')}: [late] policy = {kind!r}; choose one of "
                             f"{', '.join(POLICIES)}")
    percent = table.get("percent_per_day", 0)
    if kind == "per_day" and not (isinstance(percent, (int, float)) and not isinstance(percent, bool)
                                  and math.isfinite(percent) and 0 < percent <= 100):
        raise DeadlinesError(f"{lines.at('late', 'percent_per_day')}: [late] percent_per_day must be a number in "
                             f"(0, 100] with policy \"per_day\", got {percent!r}")
    cutoff = table.get("cutoff_days")
    if cutoff is not None:
        cutoff = _days(cutoff, f"{lines.at('late', 'cutoff_days')}: [late] cutoff_days", "a cut-off")
    unknown_time = table.get("unknown_time", "full_penalty")
    if unknown_time not in UNKNOWN_TIME:
        raise DeadlinesError(f"{lines.at('late', 'unknown_time')}: [late] unknown_time = {unknown_time!r}; choose "
                             f"one of {', '.join(UNKNOWN_TIME)}")
    return Policy(kind, float(percent), cutoff, unknown_time)


def parse(text: str, assignments: list[str] | None = None, students: set[str] | None = None) -> Deadlines:
    """The deadlines in a deadlines.toml text; DeadlinesError names the line
    and the fix. `students`, when given and not empty, are the course's
    students: an extension for anyone else is refused (a typo)."""
    assignments = assignments or list(course.ASSIGNMENTS)
    if len(text.encode()) > MAX_FILE_BYTES:
        raise DeadlinesError(f"{FILE_NAME} is {len(text.encode())} bytes, over {MAX_FILE_BYTES}: not a deadlines file")
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise DeadlinesError(f"{FILE_NAME} is not valid TOML: {err}") from None
    lines = _Lines(text)
    unknown = set(raw) - {"timezone", "due", "late", "extensions"}
    if unknown:
        raise DeadlinesError(f"{FILE_NAME}: unknown keys {sorted(unknown)}; known: timezone, due, late, extensions")
    for key in ("due", "late", "extensions"):
        if not isinstance(raw.get(key, {}), dict):
            raise DeadlinesError(f"{lines.at('', key)}: {key} must be a table: a line [{key}] followed by its "
                                 "entries")
    name = raw.get("timezone", "UTC")
    zone = _zone(name, lines.at("", "timezone"))
    due = {_known(a, assignments, f"{lines.at('due', a)}: [due]"): _instant(v, zone, f"{lines.at('due', a)}: [due] {a}")
           for a, v in raw.get("due", {}).items()}
    extensions = {}
    for student, table in raw.get("extensions", {}).items():
        table_name = f"extensions.{student}"
        if not isinstance(table, dict):
            raise DeadlinesError(f"{lines.at(table_name)}: extensions for {student!r} must be a table "
                                 f"[extensions.{student}]")
        if students and student not in students:
            raise DeadlinesError(f"{lines.at(table_name)}: [extensions.{student}] names {student!r}, who is no "
                                 "student of the course (not in the gradebook nor among the submissions): a typo?")
        for a, value in table.items():
            at = lines.at(table_name, a)
            where = f"{at}: [extensions.{student}] {_known(a, assignments, f'{at}: [extensions.{student}]')}"
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                days = _days(value, where, "an extension")
                if a not in due:
                    raise DeadlinesError(f"{where} adds days to a notebook without a due date; give [due] {a}, or a "
                                         "date-time for this student")
                extensions[(student, a)] = dt.timedelta(days=days)
            else:
                own = _instant(value, zone, where)
                if a in due and own < due[a]:
                    raise DeadlinesError(f"{where} = {value}: this extension ends before the due date "
                                         f"({when_text(due[a])}); an extension moves it later")
                extensions[(student, a)] = own
    return Deadlines(name, due, _policy(raw.get("late", {}), lines), extensions)


def known_students() -> set[str]:
    """The course's students as the grader knows them: the gradebook's, and
    those with a collected submission (empty before any)."""
    students = set()
    submitted = gradebook.folder("submitted")
    if submitted.is_dir():
        students |= {p.name for p in submitted.iterdir() if p.is_dir() and not p.name.startswith(".")}
    url = gradebook.db_url()
    if not url.startswith("sqlite:///") or Path(url[len("sqlite:///"):]).is_file():
        try:
            with gradebook.open_gradebook(url) as gb:
                students |= {s.id for s in gb.students}
        except Exception:  # noqa: BLE001: no gradebook yet, or none reachable: the folders say it
            pass
    return students


def load(path: Path | None = None, check_students: bool = True) -> Deadlines:
    """The course's deadlines (none when the file does not exist);
    DeadlinesError, naming the file and the line, when it is not usable.
    check_students: refuse extensions for ids that are no student (read from
    the gradebook and the submissions; off inside nbgrader's own run)."""
    path = Path(path) if path else deadlines_path()
    if not path.is_file():
        return Deadlines()
    if path.stat().st_size > MAX_FILE_BYTES:
        raise DeadlinesError(f"{path}: {path.stat().st_size} bytes, over {MAX_FILE_BYTES}: not a deadlines file")
    try:
        return parse(path.read_text(encoding="utf-8"), students=known_students() if check_students else None)
    except UnicodeDecodeError:
        raise DeadlinesError(f"{path}: not UTF-8 text") from None
    except DeadlinesError as err:
        raise DeadlinesError(f"{path.parent}/{err}" if str(err).startswith(FILE_NAME) else f"{path}: {err}") from None


# -- submission times: recorded beside the submission by what brought it in --

TIME_TEXT = re.compile(r"(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?"
                       r"(?: ?(?:UTC|Z|([+-]\d{2}):?(\d{2})| ([A-Za-z][A-Za-z0-9_/+-]{0,39})))?")
MAX_TIME_TEXT = 64


def parse_time_text(text: str) -> dt.datetime:
    """A time as nbgrader's timestamp.txt or an LMS writes it, read in
    bounded time: at most MAX_TIME_TEXT characters, one fixed format (no
    offset: UTC, as nbgrader writes it); ValueError otherwise. (nbgrader's
    own parser took 103 s on a megabyte of digits, then OverflowError.)"""
    text = text.strip()
    match = TIME_TEXT.fullmatch(text) if len(text) <= MAX_TIME_TEXT else None
    if match is None:
        raise ValueError(f"not a time such as 2026-12-10 23:59:00 UTC: {text[:40]!r}")
    year, month, day, hour, minute, second, micro, off_h, off_m, zone_name = match.groups()
    offset = dt.timedelta(hours=int(off_h), minutes=int(off_m) * (-1 if off_h.startswith("-") else 1)) \
        if off_h else dt.timedelta(0)
    zone = _zone(zone_name, "the time's zone") if zone_name else dt.timezone(offset)   # nbgrader writes its zone's name
    when = dt.datetime(int(year), int(month), int(day), int(hour), int(minute), int(second),
                       int((micro or "0").ljust(6, "0")), tzinfo=zone).astimezone(UTC)
    if not EARLIEST <= when < LATEST:
        raise ValueError(f"not a time of a course: {text[:40]!r}")
    return when


def sane_timestamp_file(folder: Path) -> str | None:
    """Remove a timestamp.txt from a submission folder unless it is a short
    time text nbgrader can read: nbgrader autograde and release_feedback
    read it (a megabyte of digits cost 103 s and an OverflowError there).
    Never a time for lateness. Returns why it was removed, or None."""
    stamp = Path(folder) / TIMESTAMP_FILE
    if not stamp.is_file() and not stamp.is_symlink():
        return None
    try:
        if stamp.is_symlink() or stamp.stat().st_size > MAX_TIME_TEXT:
            raise ValueError("too long")
        parse_time_text(stamp.read_text(encoding="ascii"))
        return None
    except (ValueError, OSError):
        stamp.unlink(missing_ok=True)
        return (f"{TIMESTAMP_FILE} in the submission is not a time nbgrader can read; it was removed (the "
                "submission's time comes from the grader's own record)")


def read_lms_times(path: Path, assignments: list[str], assignment: str | None = None
                   ) -> dict[tuple[str, str], dt.datetime]:
    """An LMS export's own record of submission times: a CSV with columns
    student, assignment (optional with `assignment`), submitted_at (ISO 8601
    with an offset, or UTC). Bounded: at most MAX_FILE_BYTES, one time format;
    DeadlinesError names the first bad line."""
    import csv
    import io
    path = Path(path)
    if not path.is_file() or path.stat().st_size > MAX_FILE_BYTES:
        raise DeadlinesError(f"{path}: the LMS times file must be a CSV file of at most {MAX_FILE_BYTES} bytes")
    try:
        rows = list(csv.reader(io.StringIO(path.read_text(encoding="utf-8-sig"))))
    except (UnicodeDecodeError, csv.Error) as err:
        raise DeadlinesError(f"{path}: not a CSV text ({err})") from None
    header = [h.strip().lower() for h in rows[0]] if rows else []
    needed = {"student", "submitted_at"} | (set() if assignment else {"assignment"})
    if not needed <= set(header):
        raise DeadlinesError(f"{path} line 1: the columns must include {', '.join(sorted(needed))}; found {header}")
    times = {}
    for number, row in enumerate(rows[1:], 2):
        record = dict(zip(header, (cell.strip() for cell in row)))
        which = assignment or record.get("assignment", "")
        if which not in assignments:
            raise DeadlinesError(f"{path} line {number}: {which[:40]!r} is not a notebook of the course")
        try:
            times[(record["student"], which)] = parse_time_text(record.get("submitted_at", ""))
        except ValueError as err:
            raise DeadlinesError(f"{path} line {number}: {err}") from None
    return times


def _note_path(student: str, assignment: str) -> Path:
    # Beside the assignment folder, like grade's .original.ipynb: nbgrader copies nothing from here.
    return gradebook.folder("submitted") / student / f".{assignment}.submitted.json"


def record_time(student: str, assignment: str, digest: str, when: dt.datetime | None, source: str,
                why_unknown: str = "", now: dt.datetime | None = None) -> None:
    """Note a submission's time from a trusted source (None: unknown, with
    why), and when collect first saw this notebook (its digest): kept from
    an earlier collect of the very same notebook, the collector's own clock."""
    now = now or dt.datetime.now(UTC)
    path = _note_path(student, assignment)
    try:
        before = json.loads(path.read_text()) if path.is_file() else {}
    except ValueError:
        before = {}
    first = before.get("first_collected") if before.get("digest") == digest else None
    note = {"digest": digest, "first_collected": first or now.isoformat(), "submitted_at": None, "source": "",
            "why_unknown": why_unknown}
    if when is not None and source in TRUSTED_SOURCES:
        note.update(submitted_at=when.astimezone(UTC).isoformat(), source=source)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(note))


def submission_time(student: str, assignment: str, due: dt.datetime | None = None
                    ) -> tuple[dt.datetime | None, str, str]:
    """(time, source, why unknown) of a collected submission, from the
    grader's own note only. A first-collected time counts where it is not
    after `due` (the work was in by then); after it, the time is unknown."""
    try:
        note = json.loads(_note_path(student, assignment).read_text())
        if not isinstance(note, dict):
            raise ValueError
    except (OSError, ValueError):
        return None, "", "no record of when it was handed in (placed in submitted/ by hand, or collected " \
                         "before the grader kept one)"
    try:
        if note.get("submitted_at") and note.get("source") in TRUSTED_SOURCES:
            return dt.datetime.fromisoformat(note["submitted_at"]).astimezone(UTC), note["source"], ""
        first = dt.datetime.fromisoformat(note["first_collected"]).astimezone(UTC)
    except (KeyError, TypeError, ValueError):
        return None, "", "the grader's record of it is unreadable"
    if due is None or first <= due:
        return first, SOURCE_COLLECTED, ""
    why = str(note.get("why_unknown") or "")[:200]
    return None, "", (why + "; " if why else "") + \
        f"first collected {when_text(first)}, after the due date (give the LMS's times: collect --times FILE)"


# -- lateness --

@dataclass(frozen=True)
class Lateness:
    student: str
    assignment: str
    due: dt.datetime | None             # this student's, extension included (UTC)
    extension: dt.timedelta | None
    submitted_at: dt.datetime | None
    source: str                         # where submitted_at came from; "" when unknown
    seconds_late: float                 # 0 when on time, without a due date or without a time
    policy: Policy
    why_unknown: str = ""               # why the time is unknown (submitted_at None)

    @property
    def unknown(self) -> bool:
        """A due date applies and the submission's time is unknown."""
        return self.due is not None and self.submitted_at is None

    @property
    def late(self) -> bool:
        return self.seconds_late > 0

    def penalty(self, score: float) -> float:
        if self.unknown:
            return self.policy.unknown_penalty(score)
        return self.policy.penalty(score, self.seconds_late)

    @property
    def late_by(self) -> str:
        return "time unknown" if self.unknown else duration_text(self.seconds_late) if self.late else ""

    def describe(self) -> str:
        """One line for a terminal or a feedback page."""
        if self.submitted_at is None:
            if self.due is None:
                return "submission time unknown, no due date"
            cost = "no penalty" if self.policy.unknown_penalty(1.0) == 0 else "the late penalty applies in full " \
                "until a time is given"
            return f"submission time unknown ({self.why_unknown}); due {when_text(self.due)}: {cost}"
        text = f"submitted {when_text(self.submitted_at)} (from {self.source})"
        if self.due is None:
            return text + ", no due date"
        ext = f", extension {duration_text(self.extension.total_seconds())}" if self.extension else ""
        return text + f", due {when_text(self.due)}{ext}: " + (f"late by {self.late_by}" if self.late else "on time")


def lateness(student: str, assignment: str, deadlines: Deadlines | None = None) -> Lateness:
    """How late `student` handed in `assignment`: the call for other tools."""
    deadlines = deadlines or load()
    due, extension = deadlines.due_for(student, assignment)
    submitted_at, source, why = submission_time(student, assignment, due)
    late = (submitted_at - due).total_seconds() if due and submitted_at else 0.0
    return Lateness(student, assignment, due, extension, submitted_at, source, max(0.0, late), deadlines.policy,
                    why if submitted_at is None else "")


def lateness_lookup(deadlines: Deadlines | None = None):
    """`(student, assignment) -> {"submitted_at", "late_by"}` for the class
    report, or None when the course has no due dates (nothing is late)."""
    deadlines = deadlines or load()
    if not deadlines.due:
        return None

    def late(student: str, assignment: str) -> dict:
        found = lateness(student, assignment, deadlines)
        return {"submitted_at": found.submitted_at.isoformat() if found.submitted_at else "", "late_by": found.late_by}
    return late


def when_text(when: dt.datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def duration_text(seconds: float) -> str:
    """ "1 d 2 h 3 min" (rounded up to the minute, so 10 s late reads "1 min")."""
    minutes = math.ceil(seconds / 60)
    days, rest = divmod(minutes, 24 * 60)
    hours, minutes = divmod(rest, 60)
    parts = [f"{days} d" if days else "", f"{hours} h" if hours else "", f"{minutes} min" if minutes else ""]
    return " ".join(p for p in parts if p) or "0 min"


def report_lines(submissions, deadlines: Deadlines | None = None) -> list[str]:
    """collect's report: one line per submission with its time, source and lateness."""
    deadlines = deadlines or load()
    return [f"  {printable(s)}/{printable(a)}: {lateness(s, a, deadlines).describe()}" for s, a in sorted(submissions)]


def apply(url: str, scores: dict[tuple[str, str], float]) -> dict[tuple[str, str], tuple[Lateness, float]]:
    """Lateness and penalty of each graded (student, assignment) -> score,
    also written into nbgrader's gradebook (due date, extension, time,
    penalty) when deadlines.toml exists, so nbgrader's totals are ours."""
    deadlines = load()
    out = {key: (late := lateness(*key, deadlines), late.penalty(score)) for key, score in scores.items()}
    if not deadlines_path().is_file():
        return out   # no deadlines: nbgrader's own due dates, if any, are left alone
    gradebook.record_lateness(url, deadlines.due, {key: (late.submitted_at, late.extension, penalty)
                                                   for key, (late, penalty) in out.items()})
    return out


def annotate(url: str, results: list[GradeResult]) -> None:
    """grade's results: each gets "late" (time, source, due, late by,
    penalty, score after it), and the gradebook the same (see apply)."""
    scored = {(r["student"], r["assignment"]): float(r.get("score", 0)) for r in results}
    found = apply(url, scored)
    for r in results:
        late, penalty = found[(r["student"], r["assignment"])]
        r["late"] = late_fields(late, penalty, r.get("score", 0))


def late_fields(late: Lateness, penalty: float, score: float) -> LateFields:
    """The lateness columns of export and the "late" entry of a result."""
    source = late.source or (f"unknown: {late.why_unknown}" if late.unknown else "")
    return LateFields(submitted_at=late.submitted_at.isoformat() if late.submitted_at else "", time_source=source,
                      due=late.due.isoformat() if late.due else "", late_by=late.late_by,
                      seconds_late=late.seconds_late, penalty=penalty, final_score=float(score) - penalty)


class LatePolicyPlugin(LateSubmissionPlugin):
    """The course's late policy for nbgrader's own AssignLatePenalties
    (autograder/nbgrader_config.py sets it), so that a raw `nbgrader
    autograde` or the formgrader penalises as `grade` does. nbgrader gives
    the seconds late from the gradebook's due date and extension, which
    `grade` writes there."""

    def late_submission_penalty(self, student_id: str, score: float, total_seconds_late: float):
        return load(check_students=False).policy.penalty(score, total_seconds_late)
