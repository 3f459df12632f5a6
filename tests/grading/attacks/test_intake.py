"""The attack battery on the grader's intake and outputs:
feedback, printed reports, output size, odd metadata and LMS zips.

The kernel attacks and their honest controls are graded in ONE batch
(tests/grading/batches.py's shared_batch) on notebook 01, and feedback is written
for all of them; collect, the memory bound and the printing are tested on
their own, without the batch, since they need no notebook kernel or only a
plain one.
"""
from __future__ import annotations

import html
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

from autograder import course, specimens
from autograder.notebook_format import is_check, nbg
from ..batches import shared_batch
from ..specimens import hidden_lines

A = "01_embeddings"
pytestmark = [pytest.mark.grader, pytest.mark.slow,
              pytest.mark.skipif(A not in course.assignments(), reason="notebook 01 is not built")]
FULL = 7  # notebook 01's points

# Prints every cell the kernel is about to run, test cells included, into
# that cell's own output.
HOOK_LEAK = """def _show_cell(info):
    print(info.raw_cell)
try:
    get_ipython().events.register('pre_run_cell', _show_cell)
except NameError:  # the recheck runs answer cells outside IPython
    pass
"""
# Saves the source of the test cell that calls embed (from the caller frames,
# through linecache) and prints it later, in an answer cell's output.
STASH_SOURCE = """import sys, linecache, builtins
def _stash_callers():
    f = sys._getframe(1)
    while f is not None:
        name = f.f_code.co_filename
        if 'ipykernel_' in name or name.startswith('<'):
            builtins._stashed = getattr(builtins, '_stashed', '') + ''.join(linecache.getlines(name))
        f = f.f_back
"""
STASH_PRINT = "import builtins\nprint(getattr(builtins, '_stashed', 'NOTHING STASHED'))\n"
FAKE_BANNER = "Score 7 / 7 FAKE"
HOSTILE_MARKDOWN = f"""<script>alert('md')</script>
<img src=x onerror="alert('img')">
<a href="javascript:alert('link')">click</a>
<div style="position:fixed;top:0;left:0;width:100%;background:#0a0;font-size:40px">{FAKE_BANNER}</div>
<div class="grader-banner">{FAKE_BANNER}</div>
<style>.grader-banner {{ display: none }}</style>
"""
HTML_OUTPUT = ("from IPython.display import HTML, Javascript, display\n"
               "display(HTML('<script>alert(1)</script><b onmouseover=alert(2)>FAKE-' + 'OUTPUT-BANNER</b>'))\n"
               "display(Javascript('alert(3)'))\n")
ANSI_ID = "x\r\x1b[2Kansi_grade_id  01_embeddings  7/7  graded \x1b[32m"
CHUNKED = "for _ in range(16):\n    print('y' * 2**19, flush=True)\n"  # 8 MB in 512 KB messages
SEED_BUG = ("embed", "return weight[ids]", "return weight[ids].detach()", "does not depend on weight")


def _honest_with(**answers) -> nbformat.NotebookNode:
    """The honest answers, some replaced by code that also runs the honest one."""
    base = specimens.solution_answers(A)
    return specimens.notebook(A, {gid: answers.get(gid, "") + base[gid] for gid in base})


def _extra_cell(nb, source: str, nbgrader_meta: dict | None, before_gid: str = "tie_weights"):
    cell = nbformat.v4.new_code_cell(source)
    if nbgrader_meta is not None:
        cell.metadata["nbgrader"] = nbgrader_meta
    at = next(i for i, c in enumerate(nb.cells) if nbg(c).get("grade_id") == before_gid)
    nb.cells.insert(at, cell)
    return nb


def build_batch(data: Path) -> dict[str, float]:
    """{student: the points the submission earns}."""
    cases = {}

    def add(student, nb, earns):
        specimens.submit(data, student, A, nb)
        cases[student] = earns

    add("control", specimens.honest(A), FULL)
    add("control_bug", specimens.with_bugs(A, [SEED_BUG[:3]]), FULL - 2)
    add("hook_leak", _honest_with(embed=HOOK_LEAK), FULL)
    stash = _honest_with(embed=STASH_SOURCE, tie_weights=STASH_PRINT)
    answer = next(c for c in stash.cells if nbg(c).get("grade_id") == "embed")
    answer.source = answer.source.replace("    return weight[ids]", "    _stash_callers()\n    return weight[ids]")
    add("stash_leak", stash, FULL)
    hostile = _honest_with(embed=HTML_OUTPUT)
    hostile.cells.insert(1, nbformat.v4.new_markdown_cell(HOSTILE_MARKDOWN))
    add("html_attack", hostile, FULL)
    add("no_grade_id", _extra_cell(specimens.honest(A), "helper = 1", {"schema_version": 3}), FULL)
    add("list_grade_id", _extra_cell(specimens.honest(A), "helper = 1",
                                     {"grade": False, "solution": False, "locked": False, "grade_id": ["a", "b"],
                                      "schema_version": 3}), FULL)
    add("ansi_grade_id", _extra_cell(specimens.notebook(A), "pass",
                                     {"grade": True, "solution": False, "locked": True, "grade_id": ANSI_ID,
                                      "points": 8, "schema_version": 3}), 0)
    partly_right = {g: s for g, s in specimens.solution_answers(A).items() if g != "embed"}  # embed as released
    for student, demote in (("demoted_tests", lambda meta: {**meta, "grade": False, "locked": False, "points": 0}),
                            ("stripped_tests", lambda meta: None)):
        nb = specimens.notebook(A, partly_right)
        for cell in nb.cells:
            if is_check(cell):
                cell.metadata["nbgrader"] = demote(cell.metadata["nbgrader"])
                if cell.metadata["nbgrader"] is None:
                    cell.metadata.pop("nbgrader")
        add(student, nb, FULL - 2)   # embed's 2 points lost, the rest kept
    add("chunked_output", _honest_with(embed=CHUNKED), FULL)
    return cases


def _grade_batch(data: Path) -> dict:
    from autograder.grading.publish.feedback import write_feedback
    from autograder.grading.batch import Options, grade_all
    from autograder.grading.grade import summary
    from autograder.grading.sandbox.jail import Limits

    cases = build_batch(data)
    results = grade_all(Options(assignments=[A], workers=2, cell_timeout=30, progress=False,
                                limits=Limits(memory_mb=3072, wall_s=240, cpu_s=240)))
    write_feedback(results)
    return {"cases": cases, "results": {r["student"]: r for r in results}, "summary": summary(results)}


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    return shared_batch(tmp_path_factory, "grader_attacks_intake", _grade_batch)


def _feedback(batch, student: str) -> str:
    return (batch["data"] / "feedback" / student / A / f"{A}.html").read_text()


def _visible_text(page: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", re.sub(r"<style>.*?</style>", "", page, flags=re.S)))


def _graded_outputs(batch, student: str) -> str:
    nb = nbformat.read(str(batch["data"] / "autograded" / student / A / f"{A}.ipynb"), as_version=4)
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))


def test_every_submission_gets_the_points_it_earns(batch):
    assert set(batch["results"]) == set(batch["cases"])
    wrong = {s: (r["score"], r["status"], r["problems"]) for s, r in batch["results"].items()
             if (r["score"], r["max_score"]) != (batch["cases"][s], FULL)}
    assert not wrong, f"students with another score than earned: {wrong}"


@pytest.mark.parametrize("student, phrase", [("no_grade_id", "without a grade id"),
                                             ("demoted_tests", "changed grading metadata"),
                                             ("stripped_tests", "was deleted"),
                                             ("list_grade_id", "grade id is not text"),
                                             ("ansi_grade_id", "is not in the released notebook")])
def test_odd_metadata_is_reported(batch, student, phrase):
    assert any(phrase in p for p in batch["results"][student]["problems"]), batch["results"][student]["problems"]


@pytest.mark.parametrize("student", ["hook_leak", "stash_leak"])
def test_hidden_tests_printed_by_the_learner_stay_out_of_the_feedback(batch, student):
    leaked_in_run = [l for l in hidden_lines() if l in _graded_outputs(batch, student)]
    assert leaked_in_run, f"{student}: the attack printed no hidden test line, so this test would prove nothing"
    page = html.unescape(_feedback(batch, student))
    assert not [l for l in hidden_lines() if l in page], f"{student}: hidden test lines in the feedback"


def test_no_feedback_carries_hidden_tests(batch):
    for student in batch["cases"]:
        page = html.unescape(_feedback(batch, student))
        assert not [l for l in hidden_lines() if l in page] and "HIDDEN TESTS" not in page, student


def test_feedback_html_is_sanitised(batch):
    page = _feedback(batch, "html_attack")
    body = page.split("</head>", 1)[1]
    # notebook 01's math is MathML on the page: no MathJax, so no script of the grader's either
    assert "<script" not in page.lower() and "javascript:" not in page.lower()
    assert not re.search(r"<[^>]*\son[a-z]+\s*=", page, re.I), "an event-handler attribute survived"
    assert not re.search(r"<[^>]*\sstyle\s*=", page, re.I), "a style attribute survived"
    assert "<style" not in body, "a learner's <style> element survived"
    assert body.count("grader-banner") == 1, "the learner's markup wears the grader's banner class"
    assert "FAKE-OUTPUT-BANNER" not in page, "an HTML output of the grading run reached the page"
    assert FAKE_BANNER in _visible_text(page), "the learner's own text (as plain text) should still be shown"


def test_honest_feedback_shows_score_and_diagnosis(batch):
    text = " ".join(_visible_text(_feedback(batch, "control")).split())
    assert f"Score: {FULL} / {FULL}" in text
    bug = " ".join(_visible_text(_feedback(batch, "control_bug")).split())
    assert f"Score: {FULL - 2} / {FULL}" in bug and SEED_BUG[3] in bug, bug[:2000]


def test_summary_escapes_learner_strings(batch):
    text = batch["summary"]
    assert "\r" not in text and "\x1b" not in text, repr(text)
    row = next(l for l in text.splitlines() if l.startswith("ansi_grade_id "))
    assert f"0/{FULL}" in row.split()[2] and "\\r\\x1b[2K" in row, row


def test_output_is_capped_while_the_cell_runs(batch):
    text = _graded_outputs(batch, "chunked_output")
    assert "output truncated by the grader" in text and len(text) < 200_000, len(text)


# --- the trusted process's memory while a cell prints -----------------------

RSS_PROBE = """import sys, nbformat
from nbgrader.preprocessors import Execute
from autograder.grading.preprocessors import CappedExecute
executor = {"stock": Execute, "capped": CappedExecute}[sys.argv[1]]
megabytes = int(sys.argv[2])
nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
    f"import time\\nchunk = 'x' * 2**18\\nfor _ in range({megabytes} * 4):\\n"
    "    print(chunk, flush=True)\\n    time.sleep(0.01)\\n")])
executor(kernel_name="python3", timeout=120).preprocess(nb, {"metadata": {"path": "."}})
# VmHWM, not getrusage: ru_maxrss of a process started by vfork+exec starts
# from its parent's peak (here pytest's), VmHWM from its own memory only.
print(next(l for l in open("/proc/self/status") if l.startswith("VmHWM")).split()[1])
"""
PRINTED_MB = 64  # in 256 KB messages (each print is flushed: one message each), 10 ms apart
# Stock Execute keeps the whole text (measured: +61 MB for 64 MB printed);
# capped, the process keeps 64 KB of output and one message in flight
# (measured: +1 MB for 64 and for 128 MB printed). A quarter of the printed
# size lies far from both; stock is asserted to pass it, so the bound is
# not vacuous. The kernel pauses between prints so that the grader keeps
# up: a kernel that prints faster than the grader reads leaves messages
# queued in the grader's ZMQ socket (up to its high-water mark of 1000
# messages), which this cap does not bound (measured: +15 to +36 MB).
RSS_BOUND_MB = PRINTED_MB // 4


def _peak_rss_mb(executor: str, megabytes: int, tmp_path: Path) -> int:
    """Peak RSS of a process running the executor (its kernel is another
    process and not counted)."""
    out = subprocess.run([sys.executable, "-c", RSS_PROBE, executor, str(megabytes)], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300, check=True)
    return int(out.stdout.split()[-1]) // 1024


def test_grader_memory_stays_flat_while_a_cell_prints(tmp_path):
    quiet = _peak_rss_mb("capped", 0, tmp_path)
    capped = _peak_rss_mb("capped", PRINTED_MB, tmp_path)
    stock = _peak_rss_mb("stock", PRINTED_MB, tmp_path)
    assert stock - quiet > RSS_BOUND_MB, f"stock Execute grew only {stock - quiet} MB: the bound proves nothing"
    assert capped - quiet <= RSS_BOUND_MB, f"capped Execute grew {capped - quiet} MB for {PRINTED_MB} MB printed"


# --- a flood written without flushing: ONE message of its whole size ---------

# ipykernel gathers what a cell writes between its flushes into one stream
# message: 800 MB in 1 MB writes arrived as one 800 MB message, which took a
# warm worker's nbgrader fork to 2.5 GB (bytes, text, JSON). The grader's
# kernel client refuses a message over MAX_KERNEL_MESSAGE_BYTES before ZMQ
# holds it, and the cells after the flood still report their output and errors.
FLOOD_PROBE = """import sys, nbformat
from nbgrader.preprocessors import Execute
from autograder.grading.preprocessors import CappedExecute
executor = {"stock": Execute, "capped": CappedExecute}[sys.argv[1]]
megabytes = int(sys.argv[2])
nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(src) for src in (
    f"import sys\\nfor _ in range({megabytes}):\\n    sys.stdout.write('x' * 2**20)\\n",
    "print('the next cell')", "1 / 0")])
executor(kernel_name="python3", timeout=120).preprocess(nb, {"metadata": {"path": "."}})
kept = [[o.get("text") or o.get("ename") for o in c.outputs] for c in nb.cells]
print(sum(len(o or "") for c in kept for o in c), repr([c[-1][:80] if c else "" for c in kept]))
print(next(l for l in open("/proc/self/status") if l.startswith("VmHWM")).split()[1])
"""
FLOOD_MB = 128  # without the cap, the grader's process holds about three times this at once


def _flood(executor: str, megabytes: int, tmp_path: Path) -> tuple[int, str]:
    """(peak RSS in MB of the process running the executor, what its cells kept)."""
    out = subprocess.run([sys.executable, "-c", FLOOD_PROBE, executor, str(megabytes)], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300, check=True)
    kept, peak = out.stdout.strip().splitlines()[-2:]
    return int(peak) // 1024, kept


def test_a_flood_in_one_message_is_refused_before_the_grader_holds_it(tmp_path):
    from autograder.grading.preprocessors import MAX_KERNEL_MESSAGE_BYTES
    assert FLOOD_MB * 2**20 > MAX_KERNEL_MESSAGE_BYTES, "the flood must be over the cap to test it"
    quiet, _ = _flood("capped", 0, tmp_path)
    capped, kept = _flood("capped", FLOOD_MB, tmp_path)
    stock, _ = _flood("stock", FLOOD_MB, tmp_path)
    assert stock - quiet > FLOOD_MB, f"stock Execute grew only {stock - quiet} MB: the bound proves nothing"
    assert capped - quiet <= FLOOD_MB // 4, f"the capped executor grew {capped - quiet} MB for one {FLOOD_MB} MB message"
    size, last_outputs = kept.split(" ", 1)
    assert int(size) < 1000 and "sent a message over the 32 MB" in last_outputs, kept
    assert "the next cell" in last_outputs and "ZeroDivisionError" in last_outputs, \
        f"the cells after the refused message lost their output: {kept}"


def test_the_kernel_clients_sockets_carry_the_caps():
    """The mechanism, on the sockets themselves: a refused size and a short
    queue on every channel the grader reads from the kernel."""
    import zmq
    from autograder.grading.preprocessors import (KERNEL_QUEUE_MESSAGES, MAX_KERNEL_MESSAGE_BYTES,
                                                   BoundedKernelClient)
    client = BoundedKernelClient(ip="127.0.0.1", transport="tcp", shell_port=1, iopub_port=2, stdin_port=3,
                                 control_port=4, hb_port=5)
    try:
        for socket in (client.connect_iopub(), client.connect_shell(), client.connect_control()):
            assert socket.getsockopt(zmq.MAXMSGSIZE) == MAX_KERNEL_MESSAGE_BYTES
            assert socket.getsockopt(zmq.RCVHWM) == KERNEL_QUEUE_MESSAGES
            socket.close(linger=0)
        assert not client.refused_message()
    finally:
        client.stop_channels()
        client.context.destroy(linger=0)


def test_each_iopub_socket_gets_its_own_monitor_endpoint(monkeypatch):
    """A closed socket's monitor endpoint is unbound by zmq's reaper thread,
    later than the close returns, while the next socket may reuse the closed
    one's id: the endpoint's name must not come from it."""
    import zmq
    from autograder.grading.preprocessors import BoundedKernelClient
    endpoints, monitor = [], zmq.Socket.monitor
    monkeypatch.setattr(zmq.Socket, "monitor",
                        lambda socket, address, events: (endpoints.append(address), monitor(socket, address, events)))
    client = BoundedKernelClient(ip="127.0.0.1", transport="tcp", shell_port=1, iopub_port=2, stdin_port=3,
                                 control_port=4, hb_port=5)
    try:
        for _ in range(20):
            client.connect_iopub().close(linger=0)
            client._iopub_watch.close(linger=0)
    finally:
        client.stop_channels()
    assert len(set(endpoints)) == len(endpoints) >= 20, endpoints


# --- collect: printing, corrupt entries, odd grade ids, size limits ---------

@pytest.fixture
def data(tmp_path, monkeypatch):
    from autograder.grading import gradebook
    monkeypatch.setenv(gradebook.DATA_ENV_VAR, str(tmp_path / "course"))
    return tmp_path / "course"


def _nb_bytes(nb=None) -> bytes:
    return json.dumps(nb or specimens.honest(A)).encode()


def _corrupt_entry(archive: Path, name: str) -> None:
    """Flip bytes in the middle of one entry's compressed data."""
    with zipfile.ZipFile(archive) as zf:
        info = zf.getinfo(name)
    raw = bytearray(archive.read_bytes())
    name_len, extra_len = int.from_bytes(raw[info.header_offset + 26:info.header_offset + 28], "little"), \
        int.from_bytes(raw[info.header_offset + 28:info.header_offset + 30], "little")
    start = info.header_offset + 30 + name_len + extra_len
    for i in range(start + info.compress_size // 3, start + info.compress_size // 3 + 64):
        raw[i] ^= 0xFF
    archive.write_bytes(bytes(raw))


def test_collect_reports_a_corrupt_entry_and_imports_the_others(tmp_path, data):
    from autograder.grading.intake.collect import collect, format_report
    listed = _extra_cell(specimens.honest(A), "helper = 1", {"grade_id": ["a", "b"], "grade": False,
                                                             "solution": False, "locked": False})
    archive = tmp_path / "export.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(f"ann_1_{A}.ipynb", _nb_bytes())
        zf.writestr(f"bob_2_{A}.ipynb", _nb_bytes())
        zf.writestr(f"cat_3_{A}.ipynb", _nb_bytes())
        zf.writestr(f"dan_4_{A}.ipynb", _nb_bytes(listed))
    _corrupt_entry(archive, f"bob_2_{A}.ipynb")
    report = collect(archive, [A])
    assert set(report.found) == {("ann", A), ("cat", A), ("dan", A)}
    assert any(r.startswith(f"bob_2_{A}.ipynb: corrupt zip entry") for r in report.refused), report.refused
    assert ("dan", A) not in report.unusable and any("grade id is not text" in p for p in report.malformed[("dan", A)])
    assert "refused" in format_report(report, [A])


def test_collect_escapes_what_it_prints(tmp_path, data):
    from autograder.grading.intake.collect import collect, format_report
    src = tmp_path / "inbox"
    (src / "ann" / A).mkdir(parents=True)
    (src / "ann" / A / f"{A}.ipynb").write_bytes(_nb_bytes(_extra_cell(specimens.honest(A), "pass", {
        "grade": True, "solution": False, "locked": True, "grade_id": ANSI_ID, "points": 8})))
    (src / "ann" / "bonus\x1b[31m.txt").write_text("belongs to no assignment")
    text = format_report(collect(src, [A]), [A])
    assert "\r" not in text and "\x1b" not in text, repr(text)
    assert "\\r\\x1b[2K" in text and "\\x1b[31m" in text, text


def _bomb(archive: Path, student: str, files: int, mb: float) -> None:
    """A zip of `files` entries of zeros, each `mb` MB: tiny compressed."""
    zeros = bytes(int(mb * 2**20))
    with zipfile.ZipFile(archive, "a", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(f"{student}_1_{A}.ipynb", _nb_bytes())
        for i in range(files):
            zf.writestr(f"{student}_1_{A}_data{i}.bin", zeros)


def _bytes_under(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def test_a_zip_bomb_is_capped_per_submission(tmp_path, data):
    from autograder.grading.intake.collect import MAX_FILE_BYTES, MAX_SUBMISSION_BYTES, collect
    archive = tmp_path / "bomb.zip"
    _bomb(archive, "bomber", 6, 19.5)
    with zipfile.ZipFile(archive, "a") as zf:
        zf.writestr(f"honest_2_{A}.ipynb", _nb_bytes())
    assert 19.5 * 2**20 < MAX_FILE_BYTES, "each entry must pass the per-file limit for this attack"
    assert archive.stat().st_size < 2**20 * 0.5, "the bomb is supposed to be small"
    report = collect(archive, [A])
    assert _bytes_under(data / "submitted" / "bomber") <= MAX_SUBMISSION_BYTES
    assert ("honest", A) in report.found
    refusals = [r for r in report.refused if "bomber" in r]
    assert refusals and all("--max-submission-mb" in r and f"{MAX_SUBMISSION_BYTES / 2**20:g} MB" in r
                            for r in refusals), refusals


def test_a_collection_is_capped_in_total(tmp_path, data):
    from autograder.grading.intake.collect import collect
    archive = tmp_path / "class.zip"
    for n in range(4):
        _bomb(archive, f"s{n}", 1, 6)
    limit = 15 * 2**20  # room for two students' notebook and data file
    report = collect(archive, [A], max_collection_bytes=limit)
    assert _bytes_under(data / "submitted") <= limit
    assert any("--max-total-mb" in r and "15 MB" in r for r in report.refused), report.refused
    assert len(report.found) >= 2, "the students within the limit are imported"


def test_collect_limits_must_be_positive(tmp_path, data):
    from autograder.grading.intake.collect import collect
    with pytest.raises(ValueError, match="max_submission_bytes"):
        collect(tmp_path, [A], max_submission_bytes=0)
