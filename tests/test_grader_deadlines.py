"""Deadlines (issue 27): due dates, submission times recorded at collect
with their source, lateness and each late policy, extensions, nbgrader's
gradebook agreeing, export's late columns, and release-solutions (refused
before the last due date, hidden tests never released; through a scratch
exchange laid out as nbgrader's, fetched back with nbgrader's own code).

Every expected number is worked out by hand from the crafted times below.
No kernels: fast."""
from __future__ import annotations

import csv
import datetime as dt
import json
import os
import shutil
import struct
import subprocess
import zipfile

import pytest

from autograder import course
from autograder.authoring import specimens
from autograder.grading import deadlines, gradebook
from autograder.grading.collect import collect, format_report
from autograder.grading.deadlines import Policy, lateness, parse
from autograder.grading.export import export
from autograder.grading.feedback import hidden_test_lines
from autograder.grading.solutions import published_name, release_solutions, solution_notebook
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
    (data / deadlines.FILE_NAME).write_text(text)


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
    ('[late]\npolicy = "weekly"', "none, per_day, zero"),
    ('[late]\npolicy = "per_day"', "percent_per_day"),
    ("[due]\n01_embedding = 2026-12-10T23:59:00", "not a notebook of the course"),
    ("[due]\n01_embeddings = 2026-12-10", "write e.g. 2026-12-10T23:59:00"),
    ('timezone = "Mars/Olympus"', "IANA name"),
    ("[extensions.ann]\n02_rmsnorm = 2", "without a due date"),
    ("[late]\ncutoff = 2", "unknown keys"),
    ("due = 3", "must be a table"),
])
def test_a_bad_file_is_refused_naming_the_key_and_the_fix(text, names):
    with pytest.raises(ValueError, match=names):
        parse(text)


def test_no_file_means_nothing_is_late(data):
    late = lateness("ann", A)
    assert late.due is None and not late.late and late.penalty(8.0) == 0


def test_the_class_reports_lookup_gives_each_submissions_lateness(data):
    assert deadlines.lateness_lookup() is None  # no file: the report gets no late columns
    _rules(data)
    for student, when in (("ann", "2026-12-12 10:59:00.000000 UTC"), ("bob", "2026-12-10 22:00:00.000000 UTC")):
        folder = data / "submitted" / student / A
        folder.mkdir(parents=True)
        (folder / deadlines.TIMESTAMP_FILE).write_text(when)
    late = deadlines.lateness_lookup()
    assert late("ann", A) == {"submitted_at": "2026-12-12T10:59:00+00:00", "late_by": "1 d 12 h"}  # due 22:59 UTC
    assert late("bob", A)["late_by"] == ""  # 59 min early
    assert late("eve", A) == {"submitted_at": "", "late_by": ""}  # never submitted


# -- times recorded at collect, with their source --

def _ut_field(when: dt.datetime) -> bytes:
    """Info-ZIP's extended timestamp: tag 0x5455, flags (bit 0: mtime), UTC seconds."""
    return struct.pack("<HHBi", 0x5455, 5, 1, int(when.timestamp()))


def test_lms_zip_times_local_utc_field_and_timestamp_file(tmp_path, data):
    _rules(data)
    archive = tmp_path / "export.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        # ann: a DOS time, local Berlin 2026-12-11 01:59 = 00:59 UTC: 2 h late.
        zf.writestr(zipfile.ZipInfo(f"ann_1_2_{A}.ipynb", date_time=(2026, 12, 11, 1, 59, 0)), _nb_bytes())
        # bob: the UTC field says 20:00 UTC (on time), whatever the DOS time says.
        info = zipfile.ZipInfo(f"bob_3_4_{A}.ipynb", date_time=(2026, 12, 30, 0, 0, 0))
        info.extra = _ut_field(dt.datetime(2026, 12, 10, 20, 0, tzinfo=UTC))
        zf.writestr(info, _nb_bytes())
        # carol: nbgrader's timestamp.txt in the folder layout: 2 days late, less her 1-day extension.
        zf.writestr(zipfile.ZipInfo(f"carol/{A}/{A}.ipynb", date_time=(2026, 12, 1, 0, 0, 0)), _nb_bytes())
        zf.writestr(f"carol/{A}/timestamp.txt", "2026-12-12 22:59:00.000000 UTC")
    report = collect(archive, [A])
    assert set(report.found) == {("ann", A), ("bob", A), ("carol", A)}
    ann, bob, carol = (lateness(s, A) for s in ("ann", "bob", "carol"))
    assert ann.submitted_at == dt.datetime(2026, 12, 11, 0, 59, tzinfo=UTC)
    assert ann.source == "zip entry time (local, read as Europe/Berlin)"
    assert ann.seconds_late == 2 * 3600 and ann.late_by == "2 h" and ann.penalty(8.0) == pytest.approx(0.8)
    assert bob.source == deadlines.SOURCE_ZIP_UTC and bob.seconds_late == 0 and bob.penalty(8.0) == 0
    assert carol.source == deadlines.SOURCE_EXCHANGE
    assert carol.seconds_late == 86400 and carol.late_by == "1 d" and carol.penalty(8.0) == pytest.approx(0.8)
    # nbgrader autograde reads the same time from the submission's timestamp.txt
    from nbgrader.utils import parse_utc
    stamp = (data / "submitted" / "ann" / A / "timestamp.txt").read_text()
    assert parse_utc(stamp) == dt.datetime(2026, 12, 11, 0, 59)
    text = format_report(report, [A])
    assert "ann/01_embeddings: submitted 2026-12-11 00:59:00 UTC (from the zip entry time (local, read as " \
           "Europe/Berlin)), due 2026-12-10 22:59:00 UTC: late by 2 h" in text
    assert "carol/01_embeddings: submitted 2026-12-12 22:59:00 UTC (from the timestamp.txt (nbgrader " \
           "exchange)), due 2026-12-11 22:59:00 UTC, extension 1 d: late by 1 d" in text
    assert "bob/01_embeddings" in text and "on time" in text


@pytest.mark.skipif(shutil.which("zip") is None, reason="Info-ZIP's zip is not installed (apt-get install zip)")
def test_a_zip_made_by_info_zip_gives_the_files_utc_times(tmp_path, data):
    """Info-ZIP's own zip, not Python's: its extended-timestamp field holds the file's mtime in UTC."""
    _rules(data)
    inbox = tmp_path / "inbox"
    (inbox / "hal" / A).mkdir(parents=True)
    notebook = inbox / "hal" / A / f"{A}.ipynb"
    notebook.write_bytes(_nb_bytes())
    when = (DUE_UTC + dt.timedelta(hours=25)).timestamp()   # two started days late
    os.utime(notebook, (when, when))
    subprocess.run(["zip", "-qr", str(tmp_path / "lms.zip"), "hal"], cwd=inbox, check=True,
                   env={**os.environ, "TZ": "America/New_York"})   # its DOS times are New York's
    collect(tmp_path / "lms.zip", [A])
    late = lateness("hal", A)
    assert late.source == deadlines.SOURCE_ZIP_UTC and late.seconds_late == 25 * 3600
    assert late.penalty(5.0) == pytest.approx(1.0)


def test_folder_times_exchange_timestamp_kept_as_is_else_modification_time(tmp_path, data):
    _rules(data)
    src = tmp_path / "inbox"
    for student in ("ann", "eve"):
        (src / student / A).mkdir(parents=True)
        (src / student / A / f"{A}.ipynb").write_bytes(_nb_bytes())
    # eve's notebook last changed 3 days 30 s after the due date: past the 3-day cut-off.
    late = (DUE_UTC + dt.timedelta(days=3, seconds=30)).timestamp()
    os.utime(src / "eve" / A / f"{A}.ipynb", (late, late))
    exchange_text = "2026-12-10 23:30:00.123456 Europe/Berlin"   # 22:30:00.123456 UTC: on time
    (src / "ann" / A / "timestamp.txt").write_text(exchange_text)
    collect(src, [A])
    assert (data / "submitted" / "ann" / A / "timestamp.txt").read_text() == exchange_text, \
        "nbgrader's release_feedback names the page after the timestamp text: it must not change"
    ann, eve = lateness("ann", A), lateness("eve", A)
    assert ann.source == deadlines.SOURCE_EXCHANGE and ann.seconds_late == 0
    assert ann.submitted_at == dt.datetime(2026, 12, 10, 22, 30, 0, 123456, tzinfo=UTC)
    assert eve.source == deadlines.SOURCE_MTIME and eve.seconds_late == pytest.approx(3 * 86400 + 30)
    assert eve.late_by == "3 d 1 min" and eve.penalty(8.0) == 8.0


def test_a_submission_collected_by_nbgrader_has_only_its_timestamp_file(tmp_path, data):
    _rules(data)
    src = tmp_path / "inbox"
    (src / "frank" / A).mkdir(parents=True)
    (src / "frank" / A / f"{A}.ipynb").write_bytes(_nb_bytes())
    collect(src, [A])
    assert lateness("frank", A).source == deadlines.SOURCE_MTIME
    # then the formgrader's Collect brings a newer submission from the exchange: its time counts
    (data / "submitted" / "frank" / A / "timestamp.txt").write_text("2026-12-11 10:59:00.000000 UTC")   # 12 h late
    late = lateness("frank", A)
    assert late.source == deadlines.SOURCE_EXCHANGE and late.seconds_late == 12 * 3600
    assert late.penalty(5.0) == pytest.approx(0.5)


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
    for student, stamp in (("ann", "2026-12-12 10:59:00 UTC"),     # 1 d 12 h late: 2 started days, 20%
                           ("carol", "2026-12-12 10:59:00 UTC"),   # extension 1 d: 12 h late, 10%
                           ("gus", "2026-12-10 22:00:00 UTC")):    # on time
        (data / "submitted" / student / A).mkdir(parents=True)
        (data / "submitted" / student / A / "timestamp.txt").write_text(stamp)
    url = "sqlite:///" + str(tmp_path / "gb.db")
    _gradebook_with(url, {"ann": 10.0, "carol": 5.0, "gus": 7.0})
    export(url, tmp_path / "out")
    with open(tmp_path / "out" / "grades_per_notebook.csv") as f:
        rows = {r["student"]: r for r in csv.DictReader(f)}
    assert {s: (r["late_by"], r["penalty"], r["final_score"]) for s, r in rows.items()} == {
        "ann": ("1 d 12 h", "2", "8"), "carol": ("12 h", "0.5", "4.5"), "gus": ("", "0", "7")}
    assert rows["ann"]["submitted_at"] == "2026-12-12T10:59:00+00:00"
    assert rows["ann"]["time_source"] == deadlines.SOURCE_EXCHANGE
    with open(tmp_path / "out" / "grades_total.csv") as f:
        assert {r["student"]: r["total"] for r in csv.DictReader(f)} == {"ann": "8", "carol": "4.5", "gus": "7"}
    with gradebook.open_gradebook(url) as gb:   # nbgrader's own view: its seconds late, its score less penalty
        subs = {s: gb.find_submission(A, s) for s in ("ann", "carol", "gus")}
        assert {s: sub.total_seconds_late for s, sub in subs.items()} == {
            "ann": 36 * 3600, "carol": 12 * 3600, "gus": 0}
        assert {s: sub.score - (sub.late_submission_penalty or 0) for s, sub in subs.items()} == {
            "ann": 8, "carol": 4.5, "gus": 7}


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


def test_release_refused_before_the_last_due_date_and_done_after(tmp_path, data):
    _rules(data)
    before_dave = dt.datetime(2026, 12, 15, tzinfo=UTC)   # past the due date and carol's, not dave's
    with pytest.raises(SystemExit, match=r"due until 2026-12-20 12:00:00 UTC \(dave: extension\), 5 d 12 h from"):
        release_solutions(A, now=before_dave)
    assert not (data / "released_solutions").exists()
    forced = release_solutions(A, now=before_dave, force=True, out=tmp_path / "forced")
    assert (forced / f"{A}.ipynb").is_file()
    folder = release_solutions(A, now=dt.datetime(2026, 12, 20, 12, tzinfo=UTC))
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
    with pytest.raises(SystemExit, match="no due date"):
        release_solutions(A, now=dt.datetime(2030, 1, 1, tzinfo=UTC))


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
    with pytest.raises(SystemExit, match="due until"):
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
    from autograder.grading.feedback import write_feedback
    from autograder.grading.grade import summary

    _rules(data)
    archive = tmp_path / "export.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for student, when in (("ann", DUE_UTC + dt.timedelta(days=1, hours=12)), ("bob", DUE_UTC)):
            info = zipfile.ZipInfo(f"{student}_1_2_{A}.ipynb", date_time=(2026, 1, 1, 0, 0, 0))
            info.extra = _ut_field(when)
            zf.writestr(info, _nb_bytes())
    collect(archive, [A])
    results = {r["student"]: r for r in grade_all(Options(assignments=[A], workers=1, progress=False))}
    full = results["ann"]["max_score"]
    assert results["ann"]["score"] == results["bob"]["score"] == full, summary(list(results.values()))
    # 1 d 12 h late: two started days, 20% of the points
    assert results["ann"]["late"]["penalty"] == pytest.approx(0.2 * full)
    assert results["ann"]["late"]["time_source"] == deadlines.SOURCE_ZIP_UTC
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
    assert "late by 1 d 12 h" in page and deadlines.SOURCE_ZIP_UTC in page
    export(gradebook.db_url(), tmp_path / "out")
    with open(tmp_path / "out" / "grades_total.csv") as f:
        assert {r["student"]: float(r["total"]) for r in csv.DictReader(f)} == pytest.approx({"ann": 0.8 * full, "bob": full})


def test_the_command_line_takes_a_prefix_and_says_where_it_released(tmp_path, data, capsys):
    from autograder.__main__ import main

    _rules(data, '[due]\n01_embeddings = 2020-01-01T00:00:00Z\n')
    assert main(["release-solutions", "01", "--out", str(tmp_path / "handout")]) == 0
    assert f"released the solutions of {A} to {tmp_path / 'handout' / published_name(A)}" in capsys.readouterr().out
    _rules(data, '[due]\n01_embeddings = 2999-01-01T00:00:00Z\n')
    with pytest.raises(SystemExit, match="not releasing the solutions: 01_embeddings is due until 2999"):
        main(["release-solutions", "01"])
