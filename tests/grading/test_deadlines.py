"""Deadlines: due dates, submission times recorded with their source (only
sources the student does not control: the LMS export's record, collect's own
clock; the student's timestamp.txt, zip times and file times are refused and
the time is unknown), lateness and each late policy, extensions, the file
validated when loaded (each bad line named), nbgrader's gradebook agreeing,
export's late columns, and release-solutions (refused while late work can
still earn points, hidden tests never released; through a scratch exchange
laid out as nbgrader's, fetched back with nbgrader's own code).

Every expected number is worked out by hand from the crafted times below.
No kernels: fast."""
from __future__ import annotations

import csv
import datetime as dt
import json
import os
import struct
import subprocess
import sys
import zipfile

import pytest

from autograder import course, specimens
from autograder.grading import deadlines, gradebook
from autograder.grading.errors import GradingError
from autograder.grading.intake.collect import collect, format_report
from autograder.grading.deadlines import Policy, lateness, parse
from autograder.grading.publish.export import export
from autograder.grading.publish.feedback import hidden_test_lines
from autograder.grading.publish.solutions import published_name, release_solutions, solution_notebook
from autograder.notebook_format import HIDDEN_BLOCK, read

A = "01_embeddings"
UTC = dt.timezone.utc
pytestmark = pytest.mark.skipif(A not in course.assignments(), reason="notebook 01 is not built")

# Berlin is UTC+1 in December: 23:59 local is 22:59 UTC.
RULES = """
timezone = "Europe/Berlin"
[due]
01_embeddings = 2026-12-10T23:59:00
[late]
policy = "per_day"
percent_per_day = 10
cutoff_days = 3
[extensions.carol]
01_embeddings = 1
[extensions.dave]
01_embeddings = 2026-12-20T12:00:00Z
"""
DUE_UTC = dt.datetime(2026, 12, 10, 22, 59, tzinfo=UTC)


@pytest.fixture
def data(tmp_path, monkeypatch):
    monkeypatch.setenv(gradebook.DATA_ENV_VAR, str(tmp_path / "course"))
    monkeypatch.delenv("TINYLM_HUB_EXCHANGE", raising=False)
    (tmp_path / "course").mkdir()
    return tmp_path / "course"


def _rules(data, text: str = RULES) -> None:
    """The file, and the students it names known to the course (a folder each)."""
    for student in ("carol", "dave"):
        (data / "submitted" / student).mkdir(parents=True, exist_ok=True)
    (data / deadlines.FILE_NAME).write_text(text)


def _lms_times(tmp_path, rows: dict[str, dt.datetime]) -> "os.PathLike":
    """The LMS export's record of submission times, as a CSV."""
    path = tmp_path / "lms-times.csv"
    path.write_text("student,assignment,submitted_at\n" + "".join(f"{s},{A},{when.isoformat()}\n"
                                                                    for s, when in rows.items()))
    return path


def _nb_bytes() -> bytes:
    return json.dumps(specimens.honest(A)).encode()


# -- the policy and the file --

@pytest.mark.parametrize("policy, seconds_late, score, penalty", [
    (Policy("none"), 5 * 86400, 8.0, 0.0),
    (Policy("per_day", 10), 0, 8.0, 0.0),
    (Policy("per_day", 10), 1, 8.0, 0.8),              # one second late is a started day
    (Policy("per_day", 10), 1.5 * 86400, 8.0, 1.6),    # two started days: 20% of 8
    (Policy("per_day", 30), 4 * 86400, 8.0, 8.0),      # 120% is capped at the score
    (Policy("per_day", 10, cutoff_days=3), 3 * 86400, 8.0, 2.4),
    (Policy("per_day", 10, cutoff_days=3), 3 * 86400 + 1, 8.0, 8.0),
    (Policy("none", cutoff_days=2), 2 * 86400 + 60, 6.0, 6.0),   # zero after a cut-off
    (Policy("none", cutoff_days=2), 2 * 86400, 6.0, 0.0),
    (Policy("zero"), 60, 6.0, 6.0),
])
def test_each_policy_takes_the_points_worked_out_by_hand(policy, seconds_late, score, penalty):
    assert policy.penalty(score, seconds_late) == pytest.approx(penalty, abs=1e-12)


@pytest.mark.parametrize("policy, score, penalty", [
    (Policy("per_day", 10), 8.0, 8.0),                               # unknown: the points wait for a time
    (Policy("zero"), 6.0, 6.0),
    (Policy("none"), 6.0, 0.0),                                      # lateness costs nothing: nor does not knowing
    (Policy("none", cutoff_days=2), 6.0, 6.0),
    (Policy("zero", unknown_time="no_penalty"), 6.0, 0.0),           # the instructor's explicit choice
])
def test_an_unknown_time_costs_what_the_policy_says(policy, score, penalty):
    assert policy.unknown_penalty(score) == penalty


@pytest.mark.parametrize("policy, days", [
    (Policy("zero"), 0), (Policy("per_day", 10), 9), (Policy("per_day", 30), 3), (Policy("per_day", 100), 0),
    (Policy("per_day", 10, cutoff_days=3), 3), (Policy("none", cutoff_days=2), 2), (Policy("none"), None),
])
def test_late_work_earns_points_this_many_days_after_the_due_date(policy, days):
    """per_day 10%: on the 10th started day the penalty is 100%, so the 9th
    day is the last that leaves points; by hand from Policy.penalty."""
    assert policy.scoring_days() == days
    if days is not None and policy.kind == "per_day" and policy.cutoff_days is None:
        assert policy.penalty(8.0, days * 86400) < 8.0 and policy.penalty(8.0, days * 86400 + 1) == 8.0


def test_the_file_reads_local_times_in_its_timezone_and_extensions_two_ways():
    rules = parse(RULES)
    assert rules.due[A] == DUE_UTC
    assert rules.due_for("carol", A) == (DUE_UTC + dt.timedelta(days=1), dt.timedelta(days=1))
    dave_due = dt.datetime(2026, 12, 20, 12, tzinfo=UTC)
    assert rules.due_for("dave", A) == (dave_due, dave_due - DUE_UTC)
    assert rules.due_for("ann", A) == (DUE_UTC, None)
    assert rules.due_for("ann", "02_rmsnorm") == (None, None)
    assert rules.last_due(A) == dave_due


@pytest.mark.parametrize("text, names", [
    ('[late]\npolicy = "weekly"', "line 2: .* none, per_day, zero"),
    ('[late]\npolicy = "per_day"', "percent_per_day"),
    ("[due]\n01_embedding = 2026-12-10T23:59:00", "line 2: .*not a notebook of the course"),
    ("[due]\n01_embeddings = 2026-12-10", "write e.g. 2026-12-10T23:59:00"),
    ('timezone = "Mars/Olympus"', "line 1: .*IANA name"),
    ("[extensions.ann]\n02_rmsnorm = 2", "without a due date"),
    ("[late]\ncutoff = 2", "unknown keys"),
    ("due = 3", "must be a table"),
    # clocks: a local time that does not exist, or happens twice (Berlin, 2026-03-29 and 2026-10-25)
    ('timezone = "Europe/Berlin"\n[due]\n01_embeddings = 2026-03-29T02:30:00', "line 3: .*does not exist"),
    ('timezone = "Europe/Berlin"\n[due]\n01_embeddings = 2026-10-25T02:30:00', "line 3: .*happens twice.*\\+02:00"),
    # absurd sizes: each would overflow a date, or is a typo
    ("[due]\n01_embeddings = 2026-12-10T23:59:00Z\n[extensions.ann]\n01_embeddings = inf", "line 4: .*0 to 366"),
    ("[due]\n01_embeddings = 2026-12-10T23:59:00Z\n[extensions.ann]\n01_embeddings = 1e9", "line 4: .*0 to 366"),
    ("[due]\n01_embeddings = 2026-12-10T23:59:00Z\n\n[extensions.ann]\n01_embeddings = 999999999", "line 5: .*0 to 366"),
    ("[due]\n01_embeddings = 2026-12-10T23:59:00Z\n[extensions.ann]\n01_embeddings = nan", "line 4: .*0 to 366"),
    ('[late]\npolicy = "zero"\ncutoff_days = inf', "line 3: .*0 to 366"),
    ('[late]\npolicy = "per_day"\npercent_per_day = nan', "line 3: .*percent_per_day"),
    ("[due]\n01_embeddings = 9999-12-31T23:59:00Z", "not a date of a course"),
    # an extension that ends before the due date
    ("[due]\n01_embeddings = 2026-12-10T23:59:00Z\n[extensions.ann]\n01_embeddings = 2026-12-01T00:00:00Z",
     "line 4: .*ends before the due date"),
    ('[late]\nunknown_time = "ignore"', "line 2: .*full_penalty, no_penalty"),
])
def test_a_bad_file_is_refused_naming_the_line_and_the_fix(text, names):
    with pytest.raises(deadlines.DeadlinesError, match=names):
        parse(text)


def test_an_extension_for_someone_who_is_no_student_is_refused(data):
    text = "[due]\n01_embeddings = 2026-12-10T23:59:00Z\n[extensions.anne]\n01_embeddings = 2\n"
    assert parse(text).extensions, "without a roster the id cannot be checked"
    (data / "submitted" / "ann").mkdir(parents=True)
    (data / deadlines.FILE_NAME).write_text(text)
    with pytest.raises(deadlines.DeadlinesError, match=r"deadlines.toml line 3: \[extensions.anne\] names 'anne', "
                                                       "who is no student"):
        deadlines.load()


@pytest.mark.slow
@pytest.mark.parametrize("command", [["collect", "{src}"], ["grade", "--no-progress"], ["feedback"], ["export"],
                                     ["report"], ["release-solutions", "01"]])
def test_no_command_ends_in_a_traceback_on_a_bad_file(tmp_path, data, command):
    """Each instructor command stops with the message (the file, the line),
    not a traceback, before doing anything."""
    (tmp_path / "src").mkdir()
    (data / deadlines.FILE_NAME).write_text("[due]\n01_embeddings = 2026-12-10T23:59:00Z\n[extensions.ann]\n"
                                            "01_embeddings = 999999999\n")
    done = subprocess.run([sys.executable, "-m", "autograder", *[a.format(src=tmp_path / "src") for a in command]],
                          cwd=course.ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, gradebook.DATA_ENV_VAR: str(data)})
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "deadlines.toml line 4" in done.stderr and "0 to 366" in done.stderr, done.stderr


def test_no_file_means_nothing_is_late(data):
    late = lateness("ann", A)
    assert late.due is None and not late.late and late.penalty(8.0) == 0


def _record(student: str, when: dt.datetime | None, source: str = deadlines.SOURCE_LMS, digest: str = "d") -> None:
    """A trusted time, or (None) none: first collected long after the due date."""
    deadlines.record_time(student, A, digest, when, source if when else "", now=dt.datetime(2027, 1, 1, tzinfo=UTC))


def test_the_class_reports_lookup_gives_each_submissions_lateness(data):
    assert deadlines.lateness_lookup() is None  # no file: the report gets no late columns
    _rules(data)
    _record("ann", dt.datetime(2026, 12, 12, 10, 59, tzinfo=UTC))
    _record("bob", dt.datetime(2026, 12, 10, 22, 0, tzinfo=UTC))
    late = deadlines.lateness_lookup()
    assert late("ann", A) == {"submitted_at": "2026-12-12T10:59:00+00:00", "late_by": "1 d 12 h"}  # due 22:59 UTC
    assert late("bob", A)["late_by"] == ""  # 59 min early
    assert late("eve", A) == {"submitted_at": "", "late_by": "time unknown"}  # no record: never silently on time


def test_grades_summary_and_the_feedback_line_say_a_time_is_unknown(data):
    from autograder.grading.grade import summary
    _rules(data, RULES.replace('policy = "per_day"', 'policy = "zero"'))
    _record("ann", None)
    late = lateness("ann", A)
    row = {"student": "ann", "assignment": A, "score": 8.0, "max_score": 8.0, "status": "graded",
           "late": deadlines.late_fields(late, late.penalty(8.0), 8.0)}
    assert "submission time unknown, penalty 8" in summary([row])
    assert late.describe().startswith("submission time unknown (") and "applies in full" in late.describe()


# -- times recorded at collect: only sources the student does not control --

def _ut_field(when: dt.datetime) -> bytes:
    """Info-ZIP's extended timestamp: tag 0x5455, flags (bit 0: mtime), UTC seconds."""
    return struct.pack("<HHBi", 0x5455, 5, 1, int(when.timestamp()))


def _forged_zip(archive) -> None:
    """Late submissions (the due date below has passed), each carrying a time
    the student wrote, before the due date: a DOS time of 1980, a UTC field,
    nbgrader's timestamp.txt."""
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr(zipfile.ZipInfo(f"ann_1_2_{A}.ipynb", date_time=(1980, 1, 1, 0, 0, 0)), _nb_bytes())
        info = zipfile.ZipInfo(f"bob_3_4_{A}.ipynb", date_time=(2026, 1, 30, 0, 0, 0))
        info.extra = _ut_field(dt.datetime(2026, 1, 10, 20, 0, tzinfo=UTC))
        zf.writestr(info, _nb_bytes())
        zf.writestr(zipfile.ZipInfo(f"carol/{A}/{A}.ipynb", date_time=(2026, 1, 1, 0, 0, 0)), _nb_bytes())
        zf.writestr(f"carol/{A}/timestamp.txt", "2026-01-01 00:00:00.000000 UTC")


def test_times_the_student_wrote_are_refused_and_the_time_is_unknown(tmp_path, data):
    """The attack of late submissions that kept 8/8 under "zero": every
    source of a time was the student's. None is taken: collected after the
    due date, the time is unknown, said so, and the policy's full penalty
    applies until a trusted time is given (the LMS's record)."""
    _rules(data, 'timezone = "Europe/Berlin"\n[due]\n01_embeddings = 2026-01-10T23:59:00\n[late]\npolicy = "zero"\n')
    _forged_zip(tmp_path / "export.zip")
    inbox = tmp_path / "inbox"
    (inbox / "dave" / A).mkdir(parents=True)
    (inbox / "dave" / A / f"{A}.ipynb").write_bytes(_nb_bytes())
    old = dt.datetime(2026, 1, 1, tzinfo=UTC).timestamp()
    os.utime(inbox / "dave" / A / f"{A}.ipynb", (old, old))   # cp -p keeps any mtime
    (inbox / "dave" / A / "timestamp.txt").write_text("2026-01-01 00:00:00.000000 UTC")
    report = collect(tmp_path / "export.zip", [A])
    collect(inbox, [A])
    text = format_report(report, [A])
    for student in ("ann", "bob", "carol", "dave"):
        late = lateness(student, A)
        assert late.submitted_at is None and late.unknown and late.late_by == "time unknown", late
        assert late.penalty(8.0) == 8.0, f"{student}: an unknown time kept the points under 'zero'"
        assert "after the due date" in late.why_unknown and "--times" in late.why_unknown
    assert "ann/01_embeddings: submission time unknown" in text and "the late penalty applies in full" in text
    # nbgrader's timestamp.txt stays (release_feedback names the page after it), and is no time here
    assert (data / "submitted" / "carol" / A / "timestamp.txt").is_file()


def test_the_lms_exports_record_gives_the_times(tmp_path, data):
    _rules(data)
    _forged_zip(tmp_path / "export.zip")
    times = _lms_times(tmp_path, {"ann": DUE_UTC + dt.timedelta(hours=2), "bob": DUE_UTC - dt.timedelta(hours=1),
                                  "carol": DUE_UTC + dt.timedelta(days=2)})
    report = collect(tmp_path / "export.zip", [A], times=times)
    ann, bob, carol = (lateness(s, A) for s in ("ann", "bob", "carol"))
    assert ann.source == bob.source == carol.source == deadlines.SOURCE_LMS
    assert ann.seconds_late == 2 * 3600 and ann.late_by == "2 h" and ann.penalty(8.0) == pytest.approx(0.8)
    assert bob.seconds_late == 0 and bob.penalty(8.0) == 0      # its forged UTC field said the same: ignored anyway
    assert carol.seconds_late == 86400 and carol.penalty(8.0) == pytest.approx(0.8)   # her 1-day extension
    assert "carol/01_embeddings: submitted 2026-12-12 22:59:00 UTC (from the LMS export's record), due " \
           "2026-12-11 22:59:00 UTC, extension 1 d: late by 1 d" in format_report(report, [A])


@pytest.mark.parametrize("row, names", [
    ("ann,01_embeddings,yesterday", "line 2: not a time"),
    ("ann,01_embeddings,2026-12-10 23:59:00 Mars/Olympus", "line 2: .*IANA"),
    ("ann,02_rms,2026-12-10T23:59:00Z", "line 2: '02_rms' is not a notebook"),
    ("ann,01_embeddings," + "9" * 100_000, "line 2: not a time"),
])
def test_a_bad_lms_times_file_names_its_line(tmp_path, data, row, names):
    path = tmp_path / "times.csv"
    path.write_text(f"student,assignment,submitted_at\n{row}\n")
    with pytest.raises(deadlines.DeadlinesError, match=names):
        deadlines.read_lms_times(path, [A])


def test_collects_own_clock_proves_on_time_when_it_saw_the_notebook_before_the_due_date(tmp_path, data):
    """Collected before the due date, and again after it unchanged: on time,
    by the first collection. Changed after the due date: time unknown."""
    _rules(data, f"[due]\n{A} = 2099-01-01T00:00:00Z\n")
    inbox = tmp_path / "inbox"
    (inbox / "ann" / A).mkdir(parents=True)
    (inbox / "ann" / A / f"{A}.ipynb").write_bytes(_nb_bytes())
    collect(inbox, [A])
    first = lateness("ann", A)
    assert first.source == deadlines.SOURCE_COLLECTED and not first.late and first.penalty(8.0) == 0
    _rules(data, f"[due]\n{A} = 2026-01-01T00:00:00Z\n")   # now the due date has passed: the same notebook again
    deadlines.record_time("ann", A, json.loads((data / "submitted" / "ann" / f".{A}.submitted.json").read_text())
                          ["digest"], None, "", now=dt.datetime(2030, 1, 1, tzinfo=UTC))
    note = json.loads((data / "submitted" / "ann" / f".{A}.submitted.json").read_text())
    assert note["first_collected"] == first.submitted_at.isoformat(), "the first collection was forgotten"
    assert lateness("ann", A).unknown, "first collected after the (new) due date: unknown"
    _rules(data, f"[due]\n{A} = 2099-01-01T00:00:00Z\n")
    assert lateness("ann", A).source == deadlines.SOURCE_COLLECTED
    deadlines.record_time("ann", A, "another notebook", None, "")   # a changed notebook is seen anew
    assert lateness("ann", A).submitted_at > first.submitted_at


def test_a_huge_timestamp_file_is_removed_in_bounded_time(tmp_path, data):
    """A megabyte of digits cost nbgrader's parser 103 s, then an OverflowError
    in every later grade; collect removes it at once and says so."""
    import time
    inbox = tmp_path / "inbox"
    (inbox / "ann" / A).mkdir(parents=True)
    (inbox / "ann" / A / f"{A}.ipynb").write_bytes(_nb_bytes())
    (inbox / "ann" / A / "timestamp.txt").write_text("1" * 2**20)
    began = time.process_time()
    report = collect(inbox, [A])
    assert time.process_time() - began < 30, "reading the timestamp was not bounded"
    assert not (data / "submitted" / "ann" / A / "timestamp.txt").exists()
    assert any("timestamp.txt in the submission is not a time" in p for p in report.malformed[("ann", A)])


def test_a_zip_entry_with_an_impossible_date_is_reported_and_the_rest_imported(tmp_path, data):
    """An impossible DOS date (month 13) stopped collect with a traceback
    before the honest entries after it; no entry's date is read now, and an
    entry that cannot be read is reported, the others imported."""
    archive = tmp_path / "export.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr(zipfile.ZipInfo(f"ann_1_2_{A}.ipynb", date_time=(2026, 1, 1, 0, 0, 0)), _nb_bytes())
        zf.writestr(zipfile.ZipInfo(f"bob_3_4_{A}.ipynb", date_time=(2026, 1, 1, 0, 0, 0)), _nb_bytes())
    raw = bytearray(archive.read_bytes())
    # the DOS date of bob's local header and central entry: month 13, day 0
    for signature, offset in ((b"PK\x03\x04", 12), (b"PK\x01\x02", 14)):
        at = [i for i in range(len(raw)) if raw[i:i + 4] == signature][1]
        raw[at + offset:at + offset + 2] = struct.pack("<H", (2026 - 1980) << 9 | 13 << 5 | 0)
    raw += b""  # unchanged length
    archive.write_bytes(bytes(raw))
    assert zipfile.ZipFile(archive).infolist()[1].date_time[1] == 13, "the crafted date is not in the zip"
    report = collect(archive, [A])
    assert {("ann", A), ("bob", A)} <= set(report.found), report.refused
    assert lateness("bob", A).submitted_at is not None   # collect's own clock, no due date


# -- nbgrader's gradebook and export agree --

def _gradebook_with(url: str, scores: dict[str, float]) -> None:
    """A gradebook holding notebook 01 with one 4-point and one 6-point test cell, and these students' totals."""
    with gradebook.open_gradebook(url) as gb:
        gb.add_assignment(A)
        gb.add_notebook(A, A)
        gb.add_grade_cell("c4", A, A, max_score=4, cell_type="code")
        gb.add_grade_cell("c6", A, A, max_score=6, cell_type="code")
        for student, score in scores.items():
            gb.add_student(student)
            sub = gb.add_submission(A, student)
            for grade in sub.notebooks[0].grades:
                grade.auto_score = min(score, 4) if grade.name == "c4" else score - min(score, 4)
        gb.db.commit()


def test_export_and_nbgrader_totals_agree_on_penalties(tmp_path, data):
    _rules(data)
    for student, when in (("ann", dt.datetime(2026, 12, 12, 10, 59, tzinfo=UTC)),    # 1 d 12 h late: 20%
                          ("carol", dt.datetime(2026, 12, 12, 10, 59, tzinfo=UTC)),  # extension 1 d: 12 h, 10%
                          ("gus", dt.datetime(2026, 12, 10, 22, 0, tzinfo=UTC)),     # on time
                          ("hal", None)):                                            # time unknown: full penalty
        (data / "submitted" / student / A).mkdir(parents=True, exist_ok=True)
        _record(student, when)
    url = "sqlite:///" + str(tmp_path / "gb.db")
    _gradebook_with(url, {"ann": 10.0, "carol": 5.0, "gus": 7.0, "hal": 9.0})
    export(url, tmp_path / "out")
    with open(tmp_path / "out" / "grades_per_notebook.csv") as f:
        rows = {r["student"]: r for r in csv.DictReader(f)}
    assert {s: (r["late_by"], r["penalty"], r["final_score"]) for s, r in rows.items()} == {
        "ann": ("1 d 12 h", "2", "8"), "carol": ("12 h", "0.5", "4.5"), "gus": ("", "0", "7"),
        "hal": ("time unknown", "9", "0")}
    assert rows["ann"]["submitted_at"] == "2026-12-12T10:59:00+00:00"
    assert rows["ann"]["time_source"] == deadlines.SOURCE_LMS and rows["hal"]["time_source"].startswith("unknown: ")
    with open(tmp_path / "out" / "grades_total.csv") as f:
        assert {r["student"]: r["total"] for r in csv.DictReader(f)} == {"ann": "8", "carol": "4.5", "gus": "7",
                                                                         "hal": "0"}
    with gradebook.open_gradebook(url) as gb:   # nbgrader's own view: its seconds late, its score less penalty
        subs = {s: gb.find_submission(A, s) for s in ("ann", "carol", "gus", "hal")}
        assert {s: sub.total_seconds_late for s, sub in subs.items()} == {
            "ann": 36 * 3600, "carol": 12 * 3600, "gus": 0, "hal": 0}
        assert {s: sub.score - (sub.late_submission_penalty or 0) for s, sub in subs.items()} == {
            "ann": 8, "carol": 4.5, "gus": 7, "hal": 0}


def test_without_the_file_nbgraders_own_due_date_is_left_alone(tmp_path, data):
    url = "sqlite:///" + str(tmp_path / "gb.db")
    _gradebook_with(url, {"ann": 10.0})
    with gradebook.open_gradebook(url) as gb:
        gb.find_assignment(A).duedate = dt.datetime(2026, 12, 1, 12)
        gb.db.commit()
    export(url, tmp_path / "out")
    with gradebook.open_gradebook(url) as gb:
        assert gb.find_assignment(A).duedate == dt.datetime(2026, 12, 1, 12)


def test_nbgraders_autograde_gets_the_same_policy_from_the_plugin(data):
    _rules(data)
    from nbgrader.preprocessors import AssignLatePenalties
    from traitlets.config.loader import PyFileConfigLoader
    config = PyFileConfigLoader("nbgrader_config.py", path=str(course.AUTOGRADER_DIR)).load_config()
    plugin = AssignLatePenalties(config=config).plugin_class()
    assert isinstance(plugin, deadlines.LatePolicyPlugin)
    assert plugin.late_submission_penalty("ann", 8.0, 1.5 * 86400) == pytest.approx(1.6)


# -- releasing the solutions --

def _hidden_lines(assignment: str) -> list[str]:
    """Every non-blank line of the hidden-test blocks that does not also appear outside them."""
    nb = read(course.source_notebook(assignment))
    outside = "\n".join(HIDDEN_BLOCK.sub("", c.source) for c in nb.cells)
    return [line.strip() for c in nb.cells for block in HIDDEN_BLOCK.findall(c.source)
            for line in block.splitlines() if line.strip() and line.strip() not in outside]


def _released_text(folder) -> str:
    return "\n".join(p.read_text(errors="replace") for p in sorted(folder.rglob("*")) if p.is_file())


@pytest.mark.parametrize("assignment", course.assignments())
def test_no_hidden_test_source_in_any_solution_notebook(assignment):
    lines = _hidden_lines(assignment)
    assert lines, f"{assignment} has no hidden tests to check"
    text = json.dumps(solution_notebook(assignment))
    assert not [line for line in lines if line in text]
    assert "HIDDEN TESTS" not in text and "BEGIN SOLUTION" not in text
    assert hidden_test_lines(assignment).isdisjoint(line for line in text.split("\\n"))


def test_release_waits_while_late_work_can_still_earn_points(tmp_path, data):
    """Dave's extension ends 2026-12-20 12:00; per_day with a 3-day cut-off
    lets his late work earn points until 2026-12-23 12:00."""
    _rules(data)
    before_dave = dt.datetime(2026, 12, 15, tzinfo=UTC)   # past the due date and carol's, not dave's
    with pytest.raises(GradingError, match=r"due until 2026-12-20 12:00:00 UTC \(dave: extension\); late work earns "
                                         r"points until 2026-12-23 12:00:00 UTC .*, 8 d 12 h from"):
        release_solutions(A, now=before_dave)
    with pytest.raises(GradingError, match="late work earns points until"):
        release_solutions(A, now=dt.datetime(2026, 12, 23, 12, tzinfo=UTC))   # the last moment itself
    assert not (data / "released_solutions").exists()
    forced = release_solutions(A, now=before_dave, force=True, out=tmp_path / "forced")
    assert (forced / f"{A}.ipynb").is_file()
    folder = release_solutions(A, now=dt.datetime(2026, 12, 23, 12, 0, 1, tzinfo=UTC))
    assert folder == data / "released_solutions" / published_name(A)
    text = _released_text(folder)
    assert not [line for line in _hidden_lines(A) if line in text]
    source = read(course.source_notebook(A)).cells
    released = json.loads((folder / f"{A}.ipynb").read_text())["cells"]
    answers = [(i, c.source) for i, c in enumerate(source) if "### BEGIN SOLUTION" in c.source]
    assert answers
    for i, answer in answers:   # the answer itself is released, without its markers
        solution = answer.split("### BEGIN SOLUTION", 1)[1].split("### END SOLUTION", 1)[0]
        assert all(line in "".join(released[i]["source"]) for line in solution.splitlines())


def test_release_without_a_due_date_is_refused(data):
    with pytest.raises(GradingError, match="no due date"):
        release_solutions(A, now=dt.datetime(2030, 1, 1, tzinfo=UTC))


@pytest.mark.parametrize("late, waits_until", [
    ('policy = "zero"', dt.datetime(2026, 12, 10, 22, 59, tzinfo=UTC)),
    ('policy = "per_day"\npercent_per_day = 25', dt.datetime(2026, 12, 13, 22, 59, tzinfo=UTC)),   # 4th day: 100%
    ('policy = "none"\ncutoff_days = 1.5', dt.datetime(2026, 12, 12, 10, 59, tzinfo=UTC)),
    ('policy = "none"', None),
    ('policy = "per_day"\npercent_per_day = 10', dt.datetime(2026, 12, 19, 22, 59, tzinfo=UTC)),
])
def test_release_waits_for_the_policys_last_scoring_moment(data, late, waits_until):
    _rules(data, f'timezone = "Europe/Berlin"\n[due]\n{A} = 2026-12-10T23:59:00\n[late]\n{late}\n')
    if waits_until is None:   # late work scores at any time: never without --force
        with pytest.raises(GradingError, match="earns points at any time.*cutoff_days"):
            release_solutions(A, now=dt.datetime(2099, 1, 1, tzinfo=UTC))
        return
    with pytest.raises(GradingError, match="not releasing"):
        release_solutions(A, now=waits_until)
    assert release_solutions(A, now=waits_until + dt.timedelta(seconds=1)).is_dir()


def test_release_through_an_exchange_that_nbgraders_fetch_reads(tmp_path, data, monkeypatch):
    """A scratch exchange laid out as nbgrader's (the hub test's takes minutes and root);
    the student side is nbgrader's own list and fetch code."""
    from nbgrader.auth import Authenticator
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.exchange.default import ExchangeFetchAssignment, ExchangeList

    _rules(data)
    exchange = tmp_path / "exchange"
    exchange.mkdir()
    os.chmod(exchange, 0o1777)
    monkeypatch.setenv("TINYLM_HUB_EXCHANGE", str(exchange))
    with pytest.raises(GradingError, match="due until"):
        release_solutions(A, now=DUE_UTC)
    assert not (exchange / "tinylm").exists()
    outbound = release_solutions(A, now=dt.datetime(2027, 1, 1, tzinfo=UTC))
    assert outbound == exchange / "tinylm" / "outbound" / published_name(A)
    name = published_name(A)
    student = {"authenticator": Authenticator(), "root": str(exchange), "cache": str(tmp_path / "cache")}
    listed = ExchangeList(coursedir=CourseDirectory(course_id="tinylm"), **student).start()
    assert [a["assignment_id"] for a in listed] == [name]
    home = tmp_path / "student-home"
    home.mkdir()
    ExchangeFetchAssignment(coursedir=CourseDirectory(course_id="tinylm", assignment_id=name),
                            assignment_dir=str(home), **student).start()
    fetched = home / name
    assert (fetched / f"{A}.ipynb").is_file()
    assert not [line for line in _hidden_lines(A) if line in _released_text(fetched)]


# -- the whole pipeline: collect, grade (nbgrader and the recheck), feedback, export --

@pytest.mark.grader
@pytest.mark.slow
def test_a_late_and_an_on_time_submission_through_the_grader(tmp_path, data):
    import html

    from autograder.grading.batch import Options, grade_all
    from autograder.grading.publish.feedback import write_feedback
    from autograder.grading.grade import summary

    _rules(data)
    archive = tmp_path / "export.zip"
    times = {"ann": DUE_UTC + dt.timedelta(days=1, hours=12), "bob": DUE_UTC}
    with zipfile.ZipFile(archive, "w") as zf:
        for student in times:
            zf.writestr(zipfile.ZipInfo(f"{student}_1_2_{A}.ipynb", date_time=(2026, 1, 1, 0, 0, 0)), _nb_bytes())
    collect(archive, [A], times=_lms_times(tmp_path, times))
    results = {r["student"]: r for r in grade_all(Options(assignments=[A], workers=1, progress=False))}
    full = results["ann"]["max_score"]
    assert results["ann"]["score"] == results["bob"]["score"] == full, summary(list(results.values()))
    # 1 d 12 h late: two started days, 20% of the points
    assert results["ann"]["late"]["penalty"] == pytest.approx(0.2 * full)
    assert results["ann"]["late"]["time_source"] == deadlines.SOURCE_LMS
    assert results["bob"]["late"]["penalty"] == 0 and results["bob"]["late"]["late_by"] == ""
    table = summary(list(results.values()))
    assert f"late by 1 d 12 h, penalty {0.2 * full:g}" in table
    with gradebook.open_gradebook(gradebook.db_url()) as gb:
        ann = gb.find_submission(A, "ann")
        assert ann.total_seconds_late == 36 * 3600
        assert ann.score - ann.late_submission_penalty == pytest.approx(0.8 * full)
        assert gb.find_assignment(A).duedate == DUE_UTC.replace(tzinfo=None)
    page = html.unescape((write_feedback([results["ann"]])[0]).read_text())
    assert f"penalty {0.2 * full:g}, score after it {0.8 * full:g} / {full:g}" in page
    assert "late by 1 d 12 h" in page and deadlines.SOURCE_LMS in page
    export(gradebook.db_url(), tmp_path / "out")
    with open(tmp_path / "out" / "grades_total.csv") as f:
        assert {r["student"]: float(r["total"]) for r in csv.DictReader(f)} == pytest.approx({"ann": 0.8 * full, "bob": full})


def test_the_command_line_takes_a_prefix_and_says_where_it_released(tmp_path, data, capsys):
    from autograder.__main__ import main

    _rules(data, '[due]\n01_embeddings = 2020-01-01T00:00:00Z\n[late]\npolicy = "zero"\n')
    assert main(["release-solutions", "01", "--out", str(tmp_path / "handout")]) == 0
    assert f"released the solutions of {A} to {tmp_path / 'handout' / published_name(A)}" in capsys.readouterr().out
    _rules(data, '[due]\n01_embeddings = 2099-01-01T00:00:00Z\n[late]\npolicy = "zero"\n')
    with pytest.raises(SystemExit, match="not releasing the solutions: 01_embeddings is due until 2099"):
        main(["release-solutions", "01"])
