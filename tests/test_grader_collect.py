"""collect (issue 6): folders and LMS zips in, unsafe entries refused, the
report says what is found, missing and malformed. No kernels: fast."""
from __future__ import annotations

import json
import stat
import zipfile

import pytest

from autograder import course
from autograder.grading import gradebook
from autograder.authoring import specimens
from autograder.grading.collect import collect, format_report

A = "01_embeddings"
pytestmark = [pytest.mark.grader, pytest.mark.skipif(A not in course.assignments(), reason="notebook 01 is not built")]


@pytest.fixture
def data(tmp_path, monkeypatch):
    monkeypatch.setenv(gradebook.DATA_ENV_VAR, str(tmp_path / "course"))
    return tmp_path / "course"


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
