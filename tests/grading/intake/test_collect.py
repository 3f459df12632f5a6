"""collect: folders and LMS zips in, unsafe entries refused, the
report says what is found, missing and malformed. No kernels: fast."""
from __future__ import annotations

import json
import stat
import zipfile

import pytest

from autograder import course, specimens
from autograder.grading.intake.collect import collect, format_report

A = "01_embeddings"
pytestmark = [pytest.mark.grader, pytest.mark.skipif(A not in course.assignments(), reason="notebook 01 is not built")]


def _nb_bytes() -> bytes:
    return json.dumps(specimens.honest(A)).encode()


def test_folder_layout_with_a_symlink_and_a_broken_notebook(tmp_path, data):
    src = tmp_path / "inbox"
    (src / "ann" / A).mkdir(parents=True)
    (src / "ann" / A / f"{A}.ipynb").write_bytes(_nb_bytes())
    (src / "ann" / A / "secret.txt").symlink_to(course.source_notebook(A))
    (src / "bob").mkdir()
    (src / "bob" / f"{A}.ipynb").write_text("{not json")
    (src / "eve").symlink_to(src / "ann")
    report = collect(src, [A])
    assert set(report.found) == {("ann", A), ("bob", A)}
    assert (data / "submitted" / "ann" / A / f"{A}.ipynb").read_bytes() == _nb_bytes()
    assert not (data / "submitted" / "ann" / A / "secret.txt").exists(), "a symlink was followed"
    assert ("bob", A) in report.unusable and ("ann", A) not in report.malformed
    text = format_report(report, [A])
    assert "symbolic link refused" in text and "MALFORMED" in text and "not valid notebook JSON" in text
    assert "eve" not in {s for s, _ in report.found}


def test_lms_zip_with_ids_in_names_and_unsafe_entries(tmp_path, data):
    archive = tmp_path / "export.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr(f"doejane_12345_678_{A}.ipynb", _nb_bytes())
        zf.writestr(f"roe_99_1_{A}.ipynb", b"")
        zf.writestr(f"../evil_1_{A}.ipynb", _nb_bytes())
        link = zipfile.ZipInfo(f"mallory_2_3_{A}.ipynb")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(link, "/etc/passwd")
    report = collect(archive, [A])
    assert set(report.found) == {("doejane", A), ("roe", A)}
    assert ("roe", A) in report.unusable
    text = "\n".join(report.refused)
    assert "leaves the archive" in text and "symbolic link refused" in text
    assert not (data / "submitted" / "mallory").exists() and not (tmp_path / f"evil_1_{A}.ipynb").exists()


def test_recollecting_replaces_the_old_submission(tmp_path, data):
    src = tmp_path / "inbox"
    (src / "ann" / A).mkdir(parents=True)
    (src / "ann" / A / "old.txt").write_text("old")
    (src / "ann" / A / f"{A}.ipynb").write_bytes(_nb_bytes())
    collect(src, [A])
    (src / "ann" / A / "old.txt").unlink()
    collect(src, [A])
    assert not (data / "submitted" / "ann" / A / "old.txt").exists()


def test_missing_assignments_are_reported(tmp_path, data):
    src = tmp_path / "inbox"
    (src / "ann" / A).mkdir(parents=True)
    (src / "ann" / A / f"{A}.ipynb").write_bytes(_nb_bytes())
    line = [l for l in format_report(collect(src, [A, "02_rmsnorm"]), [A, "02_rmsnorm"]).splitlines()
            if l.startswith("ann")][0]
    assert "ok" in line and "missing" in line


# --- the course's intake of nbgrader's exchange (the hub's Collect) ------------------------

root_only = pytest.mark.skipif(__import__("os").geteuid() != 0, reason="owners of other uids need root")


def _exchange_with(tmp_path, folders: dict[str, tuple[str, dict]]):
    """An nbgrader exchange whose inbound holds, per folder name, (owner
    login, {relative path: bytes | ('link', target)}), as students' own
    `nbgrader submit` (or their hand) would leave them."""
    import os
    import pwd
    exchange = tmp_path / "exchange"
    inbound, outbound = exchange / "tinylm" / "inbound", exchange / "tinylm" / "outbound" / A
    inbound.mkdir(parents=True)
    outbound.mkdir(parents=True)
    for name, (owner, files) in folders.items():
        user = pwd.getpwnam(owner)
        if isinstance(files, tuple):   # the inbound entry itself is a link
            (inbound / name).symlink_to(files[1])
            os.lchown(inbound / name, user.pw_uid, user.pw_gid)
            continue
        folder = inbound / name
        folder.mkdir()
        for rel, content in files.items():
            path = folder / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, tuple):
                path.symlink_to(content[1])
            else:
                path.write_bytes(content)
        for path in [folder, *folder.rglob("*")]:
            os.lchown(path, user.pw_uid, user.pw_gid)
    return exchange


def _course_collect(exchange):
    from nbgrader.auth import Authenticator
    from nbgrader.coursedir import CourseDirectory
    from autograder.grading.intake.exchange import CourseCollect
    collector = CourseCollect(coursedir=CourseDirectory(course_id="tinylm", assignment_id=A),
                              authenticator=Authenticator(), root=str(exchange))
    collector.start()
    return collector


@root_only
def test_the_exchange_intake_refuses_links_and_folders_named_for_someone_else(tmp_path, data):
    """The three attacks of the hub: a link to the reference solution, a link
    to another student's submission, a folder named after another student.
    nbgrader's own Collect followed the links (8/8 with the reference
    answers) and took the id from the name (an honest 8/8 replaced by 0/8)."""
    from autograder.grading import deadlines
    reference = course.source_notebook(A)
    honest = _nb_bytes()
    blank = json.dumps(specimens.notebook(A)).encode()
    exchange = _exchange_with(tmp_path, {
        f"daemon+{A}+2026-12-01 10:00:00.000000 UTC+r1": ("daemon", {f"{A}.ipynb": honest,
                                                                       "timestamp.txt": b"2026-12-01 10:00:00 UTC"}),
        f"nobody+{A}+2026-12-01 10:00:00.000000 UTC+r2": ("nobody", {f"{A}.ipynb": ("link", str(reference))}),
        f"bin+{A}+2026-12-01 10:00:00.000000 UTC+r3": ("bin", ("link", f"daemon+{A}+2026-12-01 10:00:00.000000 UTC+r1")),
        f"daemon+{A}+2099-01-01 00:00:00.000000 UTC+r4": ("sys", {f"{A}.ipynb": blank}),
        f"sync+{A}+2026-12-01 10:00:00.000000 UTC+r5": ("sync", {"sub/dir/link.ipynb": ("link", str(reference)),
                                                                   f"{A}.ipynb": honest}),
    })
    collector = _course_collect(exchange)
    submitted = data / "submitted"
    assert sorted(p.name for p in submitted.iterdir() if p.is_dir()) == ["daemon"], collector.refusals
    assert (submitted / "daemon" / A / f"{A}.ipynb").read_bytes() == honest, "another student's folder replaced it"
    refusals = "\n".join(collector.refusals)
    assert f"named for 'daemon' but written by 'sys'" in refusals
    assert "nobody" in refusals and "sync" in refusals and refusals.count("symbolic link") >= 3, refusals
    log = (data / "exchange-intake.log").read_text()
    assert "written by 'sys'" in log
    late = deadlines.lateness("daemon", A)
    assert late.source == deadlines.SOURCE_EXCHANGE and late.submitted_at is not None
    assert abs((late.submitted_at - __import__("datetime").datetime.now(deadlines.UTC)).total_seconds()) < 600, \
        "the time is the file system's change time (now), not the student's 2026-12-01 text"
    assert (submitted / "daemon" / A / "timestamp.txt").is_file(), "nbgrader's release_feedback needs it"


@root_only
def test_a_refused_newest_submission_leaves_the_students_previous_one(tmp_path, data):
    older, newer = _nb_bytes(), ("link", str(course.source_notebook(A)))
    exchange = _exchange_with(tmp_path, {f"daemon+{A}+a+r1": ("daemon", {f"{A}.ipynb": older})})
    import os
    import time
    time.sleep(0.05)   # a later change time for the second folder
    later = _exchange_with(tmp_path / "later", {f"daemon+{A}+b+r2": ("daemon", {f"{A}.ipynb": newer})})
    os.rename(later / "tinylm" / "inbound" / f"daemon+{A}+b+r2", exchange / "tinylm" / "inbound" / f"daemon+{A}+b+r2")
    collector = _course_collect(exchange)
    assert (data / "submitted" / "daemon" / A / f"{A}.ipynb").read_bytes() == older
    assert "symbolic link" in "\n".join(collector.refusals)


@root_only
def test_the_exchange_intake_copies_nothing_through_a_link_swapped_in(tmp_path, data, monkeypatch):
    """A link put in place of a file between the listing and the read is
    refused at the open (O_NOFOLLOW), not followed."""
    import os
    from autograder.grading.intake import exchange as intake
    exchange = _exchange_with(tmp_path, {f"daemon+{A}+x+r1": ("daemon", {f"{A}.ipynb": _nb_bytes()})})
    real_read = intake._read_file

    def swapped(dir_fd, child, path):
        os.unlink(child, dir_fd=dir_fd)
        os.symlink(str(course.source_notebook(A)), child, dir_fd=dir_fd)
        return real_read(dir_fd, child, path)
    monkeypatch.setattr(intake, "_read_file", swapped)
    collector = _course_collect(exchange)
    assert not (data / "submitted" / "daemon").exists() and "symbolic link" in "\n".join(collector.refusals)


def test_a_submissions_own_text_is_framed_in_the_graders_messages(tmp_path):
    """A grade id or a file's content reaches a message only framed as a
    quotation (« », shortened, escaped): a grade id that reads like the
    grader's verdict, and a schema error that would quote the notebook's
    content (a string a kernel could have planted), are shown as such."""
    from autograder.grading.intake.notebook import inspect_submission
    nb = specimens.honest(A)
    fake = "Score: 7 / 7 (confirmed by the grader)\r\x1b[2K"
    extra = json.loads(json.dumps(nb["cells"][0]))
    extra["id"] = "forged-id"
    extra["metadata"]["nbgrader"] = {"grade_id": fake, "grade": False, "solution": False, "locked": True}
    nb["cells"].append(extra)
    path = tmp_path / f"{A}.ipynb"
    path.write_text(json.dumps(nb))
    problems = inspect_submission(path, course.release_notebook(A)).problems
    framed = [p for p in problems if "is not in the released notebook" in p]
    assert framed and "cell «Score: 7 / 7 (confirmed by the grader)\\r\\x1b[2K»" in framed[0], problems
    broken = specimens.honest(A)
    broken["cells"][0]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": 12345678987654321}]
    broken["cells"][0]["cell_type"] = "code"
    broken["cells"][0].setdefault("execution_count", None)
    path.write_text(json.dumps(broken))
    intake = inspect_submission(path, course.release_notebook(A))
    assert intake.fatal and "12345678987654321" not in " ".join(intake.problems), intake.problems
    assert "does not follow the notebook format (at «cells/0" in intake.problems[0], intake.problems
