"""Due dates, submission times, lateness and the late policy (issue 27).

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

    [extensions.doejane]              # per student: days added, or a due date of their own
    01_embeddings = 2
    02_rmsnorm = 2026-12-20T12:00:00

A submission's time is recorded at collect, from the first of: nbgrader's
exchange file `timestamp.txt` in the submission, the zip entries' times (an
entry's UTC time field where the zip has one, else its local time read in
`timezone`), the files' modification times. It is written as nbgrader's own
`timestamp.txt` (so `nbgrader autograde` records it in the gradebook) and a
note of where it came from. `grade` and `export` write the due date, each
student's extension, the time and the penalty into nbgrader's gradebook, so
the formgrader and nbgrader's totals (score minus late penalty) agree with
the CSVs; `LatePolicyPlugin` gives a raw `nbgrader autograde` the same policy.

`lateness(student, assignment)` is the one call for another tool (the class
report): due date, extension, time, its source, seconds late, and
`.penalty(score)`.
"""
from __future__ import annotations

import datetime as dt
import json
import math
import tomllib
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from nbgrader.plugins import LateSubmissionPlugin

from .. import course
from . import gradebook

FILE_NAME = "deadlines.toml"
POLICIES = ("none", "per_day", "zero")
TIMESTAMP_FILE = "timestamp.txt"   # nbgrader's exchange writes it; nbgrader autograde reads it
DAY_S = 86400.0
UTC = dt.timezone.utc

SOURCE_EXCHANGE = "timestamp.txt (nbgrader exchange)"
SOURCE_ZIP_UTC = "zip entry time (UTC field)"
SOURCE_MTIME = "file modification time"


def source_zip_local(timezone: str) -> str:
    return f"zip entry time (local, read as {timezone})"


@dataclass(frozen=True)
class Policy:
    kind: str = "none"
    percent_per_day: float = 0.0
    cutoff_days: float | None = None

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


def deadlines_path() -> Path:
    return gradebook.data_dir() / FILE_NAME


def _zone(name) -> dt.tzinfo:
    if not isinstance(name, str):
        raise ValueError(f"{FILE_NAME}: timezone must be a text such as \"Europe/Berlin\", got {name!r}")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"{FILE_NAME}: unknown timezone {name!r}; use an IANA name such as \"UTC\" or "
                         "\"America/New_York\"") from None


def _instant(value, zone: dt.tzinfo, where: str) -> dt.datetime:
    """A TOML date-time as an aware UTC datetime (no offset: read in `zone`)."""
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        raise ValueError(f"{FILE_NAME}: {where} = {value} is a date without a time; write e.g. {value}T23:59:00")
    if not isinstance(value, dt.datetime):
        raise ValueError(f"{FILE_NAME}: {where} must be a date-time such as 2026-12-10T23:59:00, got {value!r}")
    return (value if value.tzinfo else value.replace(tzinfo=zone)).astimezone(UTC)


def _known(name: str, assignments: list[str], where: str) -> str:
    if name not in assignments:
        raise ValueError(f"{FILE_NAME}: {where} names {name!r}, which is not a notebook of the course "
                         f"({', '.join(assignments)})")
    return name


def _policy(table) -> Policy:
    if not isinstance(table, dict):
        raise ValueError(f"{FILE_NAME}: [late] must be a table")
    unknown = set(table) - {"policy", "percent_per_day", "cutoff_days"}
    if unknown:
        raise ValueError(f"{FILE_NAME}: [late] has unknown keys {sorted(unknown)}; "
                         "known: policy, percent_per_day, cutoff_days")
    kind = table.get("policy", "none")
    if kind not in POLICIES:
        raise ValueError(f"{FILE_NAME}: [late] policy = {kind!r}; choose one of {', '.join(POLICIES)}")
    percent = table.get("percent_per_day", 0)
    if kind == "per_day" and not (isinstance(percent, (int, float)) and 0 < percent <= 100):
        raise ValueError(f"{FILE_NAME}: [late] percent_per_day must be a number in (0, 100] with policy "
                         f"\"per_day\", got {percent!r}")
    cutoff = table.get("cutoff_days")
    if cutoff is not None and not (isinstance(cutoff, (int, float)) and cutoff >= 0):
        raise ValueError(f"{FILE_NAME}: [late] cutoff_days must be a number of days >= 0, got {cutoff!r}")
    return Policy(kind, float(percent), None if cutoff is None else float(cutoff))


def parse(text: str, assignments: list[str] | None = None) -> Deadlines:
    """The deadlines in a deadlines.toml text; ValueError names the bad key."""
    assignments = assignments or list(course.ASSIGNMENTS)
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ValueError(f"{FILE_NAME} is not valid TOML: {err}") from None
    unknown = set(raw) - {"timezone", "due", "late", "extensions"}
    if unknown:
        raise ValueError(f"{FILE_NAME}: unknown keys {sorted(unknown)}; known: timezone, due, late, extensions")
    for key in ("due", "late", "extensions"):
        if not isinstance(raw.get(key, {}), dict):
            raise ValueError(f"{FILE_NAME}: {key} must be a table: a line [{key}] followed by its entries")
    name = raw.get("timezone", "UTC")
    zone = _zone(name)
    due = {_known(a, assignments, "[due]"): _instant(v, zone, f"[due] {a}") for a, v in raw.get("due", {}).items()}
    extensions = {}
    for student, table in raw.get("extensions", {}).items():
        if not isinstance(table, dict):
            raise ValueError(f"{FILE_NAME}: extensions for {student!r} must be a table [extensions.{student}]")
        for a, value in table.items():
            where = f"[extensions.{student}] {_known(a, assignments, f'[extensions.{student}]')}"
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                if value < 0:
                    raise ValueError(f"{FILE_NAME}: {where} = {value}: an extension is a number of days >= 0")
                if a not in due:
                    raise ValueError(f"{FILE_NAME}: {where} adds days to a notebook without a due date; "
                                     f"give [due] {a}, or a date-time for this student")
                extensions[(student, a)] = dt.timedelta(days=value)
            else:
                extensions[(student, a)] = _instant(value, zone, where)
    return Deadlines(name, due, _policy(raw.get("late", {})), extensions)


def load(path: Path | None = None) -> Deadlines:
    """The course's deadlines (none when the file does not exist)."""
    path = Path(path) if path else deadlines_path()
    if not path.is_file():
        return Deadlines()
    try:
        return parse(path.read_text(encoding="utf-8"))
    except ValueError as err:
        raise SystemExit(f"{path}: {err}") from None


# -- submission times: found at collect, kept beside the submission --

def utc_from_timestamp_file(text: str) -> dt.datetime:
    """nbgrader's timestamp.txt ("2026-12-02 04:57:28.123456 UTC") as aware UTC."""
    from nbgrader.utils import parse_utc
    return parse_utc(text.strip()).replace(tzinfo=UTC)


def zip_entry_time(info: zipfile.ZipInfo, timezone: str) -> tuple[dt.datetime, str]:
    """An entry's time and its source: the extended-timestamp field (0x5455,
    UTC seconds, written by Info-ZIP and most Unix zippers) when present,
    else the DOS date-time, which is local time of the zipping machine."""
    extra, i = info.extra, 0
    while i + 4 <= len(extra):
        tag, size = int.from_bytes(extra[i:i + 2], "little"), int.from_bytes(extra[i + 2:i + 4], "little")
        body = extra[i + 4:i + 4 + size]
        if tag == 0x5455 and len(body) >= 5 and body[0] & 1:   # flag bit 0: modification time follows
            return dt.datetime.fromtimestamp(int.from_bytes(body[1:5], "little", signed=True), UTC), SOURCE_ZIP_UTC
        i += 4 + size
    local = dt.datetime(*info.date_time, tzinfo=_zone(timezone))
    return local.astimezone(UTC), source_zip_local(timezone)


def file_time(path: Path) -> tuple[dt.datetime, str]:
    return dt.datetime.fromtimestamp(Path(path).stat().st_mtime, UTC), SOURCE_MTIME


def note_time(times: dict, key: tuple[str, str], found: tuple[dt.datetime, str]) -> None:
    """Keep the latest time seen for a submission (it is complete when its last file arrived)."""
    if key not in times or found[0] > times[key][0]:
        times[key] = found


def _note_path(student: str, assignment: str) -> Path:
    # Beside the assignment folder, like grade's .original.ipynb: nbgrader copies nothing from here.
    return gradebook.folder("submitted") / student / f".{assignment}.submitted.json"


def _format_for_nbgrader(when: dt.datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f UTC")


def record_times(submissions, times: dict) -> None:
    """After collect: each submission's time and its source. A timestamp.txt
    that came with the submission (nbgrader's exchange) wins and is left as
    it is (nbgrader's release_feedback names the page after its text);
    otherwise the time seen while copying is written as one."""
    for student, assignment in submissions:
        stamp = gradebook.folder("submitted") / student / assignment / TIMESTAMP_FILE
        if stamp.is_file():
            try:
                when, source = utc_from_timestamp_file(stamp.read_text()), SOURCE_EXCHANGE
            except (ValueError, OverflowError):
                stamp.unlink()   # unreadable: nbgrader autograde would stop on it
                when, source = times.get((student, assignment), (None, ""))
        else:
            when, source = times.get((student, assignment), (None, ""))
        if when is None:
            continue
        if not stamp.is_file():
            stamp.write_text(_format_for_nbgrader(when))
        _note_path(student, assignment).write_text(json.dumps({"submitted_at": when.isoformat(), "source": source}))


def submission_time(student: str, assignment: str) -> tuple[dt.datetime | None, str]:
    """(time, source) of a collected submission; (None, "") when unknown.
    The time is the submission's timestamp.txt, which nbgrader reads too;
    collect's note names its source while it still describes that time (a
    later Collect in the formgrader brings a new timestamp.txt and no note)."""
    try:
        stamp = utc_from_timestamp_file((gradebook.folder("submitted") / student / assignment / TIMESTAMP_FILE)
                                        .read_text())
    except (OSError, ValueError, OverflowError):
        stamp = None
    try:
        note = json.loads(_note_path(student, assignment).read_text())
        noted = dt.datetime.fromisoformat(note["submitted_at"]).astimezone(UTC), str(note["source"])
    except (OSError, ValueError, KeyError, TypeError):
        noted = None
    if noted and (stamp is None or noted[0] == stamp):
        return noted
    return (stamp, SOURCE_EXCHANGE) if stamp else (None, "")


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

    @property
    def late(self) -> bool:
        return self.seconds_late > 0

    def penalty(self, score: float) -> float:
        return self.policy.penalty(score, self.seconds_late)

    @property
    def late_by(self) -> str:
        return duration_text(self.seconds_late) if self.late else ""

    def describe(self) -> str:
        """One line for a terminal or a feedback page."""
        if self.submitted_at is None:
            return "submission time unknown" + (f" (due {when_text(self.due)})" if self.due else "")
        text = f"submitted {when_text(self.submitted_at)} (from the {self.source})"
        if self.due is None:
            return text + ", no due date"
        ext = f", extension {duration_text(self.extension.total_seconds())}" if self.extension else ""
        return text + f", due {when_text(self.due)}{ext}: " + (f"late by {self.late_by}" if self.late else "on time")


def lateness(student: str, assignment: str, deadlines: Deadlines | None = None) -> Lateness:
    """How late `student` handed in `assignment`: the call for other tools."""
    deadlines = deadlines or load()
    due, extension = deadlines.due_for(student, assignment)
    submitted_at, source = submission_time(student, assignment)
    late = (submitted_at - due).total_seconds() if due and submitted_at else 0.0
    return Lateness(student, assignment, due, extension, submitted_at, source, max(0.0, late), deadlines.policy)


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
    from .submission import printable
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


def annotate(url: str, results: list[dict]) -> None:
    """grade's results: each gets "late" (time, source, due, late by,
    penalty, score after it), and the gradebook the same (see apply)."""
    scored = {(r["student"], r["assignment"]): float(r.get("score", 0)) for r in results}
    found = apply(url, scored)
    for r in results:
        late, penalty = found[(r["student"], r["assignment"])]
        r["late"] = late_fields(late, penalty, r.get("score", 0))


def late_fields(late: Lateness, penalty: float, score: float) -> dict:
    """The lateness columns of export and the "late" entry of a result."""
    return {"submitted_at": late.submitted_at.isoformat() if late.submitted_at else "", "time_source": late.source,
            "due": late.due.isoformat() if late.due else "", "late_by": late.late_by,
            "seconds_late": late.seconds_late, "penalty": penalty, "final_score": float(score) - penalty}


class LatePolicyPlugin(LateSubmissionPlugin):
    """The course's late policy for nbgrader's own AssignLatePenalties
    (autograder/nbgrader_config.py sets it), so that a raw `nbgrader
    autograde` or the formgrader penalises as `grade` does. nbgrader gives
    the seconds late from the gradebook's due date and extension, which
    `grade` writes there."""

    def late_submission_penalty(self, student_id: str, score: float, total_seconds_late: float):
        return load().policy.penalty(score, total_seconds_late)
