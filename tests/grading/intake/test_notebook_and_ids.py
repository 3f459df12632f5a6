"""What honest students send that is not the usual notebook: one saved with
a byte order mark, an id in another script (composed or decomposed), and
what is refused with its reason before the grader pays for it: JSON nested
past any notebook's depth, more cells than any notebook has, bad JSON. No
kernels: fast."""
from __future__ import annotations

import json
import time
import unicodedata
import zipfile

import pytest

from autograder import course, specimens
from autograder.grading.intake.collect import collect, format_report, student_id
from autograder.grading.intake.notebook import MAX_CELLS, MAX_NESTING, inspect_submission
from autograder.notebook_format import read

A = "01_embeddings"
pytestmark = [pytest.mark.grader, pytest.mark.skipif(A not in course.assignments(), reason="notebook 01 is not built")]
BOM = b"\xef\xbb\xbf"
ZOE = "zoë-müller"


def _honest_bytes() -> bytes:
    return json.dumps(specimens.honest(A)).encode()


def _inspect(tmp_path, content: bytes):
    path = tmp_path / f"{A}.ipynb"
    path.write_bytes(content)
    return inspect_submission(path, course.release_notebook(A))


def test_a_notebook_with_a_byte_order_mark_is_read_and_written_again_without_it(tmp_path):
    intake = _inspect(tmp_path, BOM + _honest_bytes())
    assert not intake.fatal and intake.problems == [] and intake.rewrite, intake.problems
    assert not _inspect(tmp_path, _honest_bytes()).rewrite
    assert len(read(tmp_path / f"{A}.ipynb").cells) == len(specimens.honest(A).cells), "the shared reader takes the mark"


def _with_metadata(value) -> bytes:
    nb = specimens.honest(A)
    nb.metadata["scratch"] = value
    return json.dumps(nb).encode()


@pytest.mark.parametrize("depth, said", [(MAX_NESTING + 1, f"over {MAX_NESTING} levels"),
                                         (200_000, "deeper than Python can read")])
def test_json_nested_past_a_notebooks_depth_is_refused_with_the_reason(tmp_path, depth, said):
    text = _with_metadata(0).decode().replace('"scratch": 0', '"scratch": ' + "[" * depth + "]" * depth)
    intake = _inspect(tmp_path, text.encode())
    assert intake.fatal and any(said in p for p in intake.problems), intake.problems
    course_depth = _with_metadata([[[1]]])
    assert not _inspect(tmp_path, course_depth).fatal, "an honest notebook's metadata nests a few levels"


def test_a_notebook_of_too_many_cells_is_refused_before_it_is_validated(tmp_path):
    nb = specimens.honest(A)
    nb.cells += [{"cell_type": "raw", "metadata": {}, "source": ""}] * 250_000  # 11 MB, under the size limit
    content = json.dumps(nb).encode()
    began = time.perf_counter()
    intake = _inspect(tmp_path, content)
    seconds = time.perf_counter() - began
    assert intake.fatal and any(f"over the limit of {MAX_CELLS}" in p for p in intake.problems), intake.problems
    assert seconds < 20, f"the refusal took {seconds:.1f} s: the limit is checked too late"


@pytest.mark.parametrize("content, said", [(b"{not json", "not valid notebook JSON"),
                                           (b"\xff\xfe{}", "not valid notebook JSON")])
def test_a_notebook_that_cannot_be_parsed_says_why(tmp_path, content, said):
    intake = _inspect(tmp_path, content)
    assert intake.fatal and any(said in p for p in intake.problems), intake.problems


def test_student_ids_of_any_script_are_kept_composed_and_unsafe_ones_refused():
    assert student_id(ZOE) == ZOE
    assert student_id(unicodedata.normalize("NFD", ZOE)) == ZOE
    for unsafe in ("", ".hidden", "a/b", "a\u202eb", "a\u0301\u0301", "x" * 65, "a\nb", "ann bob"):
        assert student_id(unsafe) is None, repr(unsafe)


@pytest.mark.parametrize("form", ["NFC", "NFD"])
def test_a_student_with_a_non_ascii_id_is_collected_from_a_folder(tmp_path, data, form):
    src = tmp_path / "inbox"
    (src / unicodedata.normalize(form, ZOE) / A).mkdir(parents=True)
    (src / unicodedata.normalize(form, ZOE) / A / f"{A}.ipynb").write_bytes(_honest_bytes())
    report = collect(src, [A])
    assert set(report.found) == {(ZOE, A)} and not report.refused, report.refused
    assert (data / "submitted" / ZOE / A / f"{A}.ipynb").is_file()
    assert ZOE in format_report(report, [A])


@pytest.mark.parametrize("utf8_flag", [True, False])
@pytest.mark.parametrize("form", ["NFC", "NFD"])
def test_a_student_with_a_non_ascii_id_is_collected_from_an_lms_zip(tmp_path, data, form, utf8_flag):
    archive = tmp_path / "export.zip"
    entry = f"{unicodedata.normalize(form, ZOE)}_12345_678_{A}.ipynb"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr(entry, _honest_bytes())
    if not utf8_flag:  # as tools that write UTF-8 names without saying so: clear general-purpose bit 11
        raw = archive.read_bytes()
        for header, offset in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):  # the local and the central header
            at = raw.index(header) + offset
            flags = int.from_bytes(raw[at:at + 2], "little") & ~0x800
            raw = raw[:at] + flags.to_bytes(2, "little") + raw[at + 2:]
        archive.write_bytes(raw)
        assert not zipfile.ZipFile(archive).infolist()[0].flag_bits & 0x800
    report = collect(archive, [A])
    assert set(report.found) == {(ZOE, A)} and not report.refused, report.refused


def test_a_non_ascii_id_with_a_control_character_is_refused_and_printed_escaped(tmp_path, data):
    src = tmp_path / "inbox"
    (src / f"zoë\x1b[2J" / A).mkdir(parents=True)
    (src / f"zoë\x1b[2J" / A / f"{A}.ipynb").write_bytes(_honest_bytes())
    report = collect(src, [A])
    text = format_report(report, [A])
    assert not report.found and "\x1b" not in text and "\\x1b" in text, text
