"""The attack battery on the grader's channels: what the
learner's code can write that the trusted side reads, or shows.

* forged log lines: the kernel used to inherit nbgrader's stdout and stderr,
  the log `grade` parsed timing marks from; a forged mark made grade_one
  fail after nbgrader stored the kernel's (fooled) scores, and `export`
  showed them. Now the kernel writes to /dev/null, the marks go to a file
  of the grader's, and the gradebook holds zero while a submission is graded;
* the cold engine's read of that log: 1 GB written to the kernel's fd 1
  grew the trusted `grade` process to 3.2 GB (its own peak memory is
  measured below, in a process of its own);
* the recheck child's exception text: learner text (here base64 of the
  hidden tests, which a kernel can pass to its recheck child through a side
  channel) reached the feedback page; now only library messages made of
  numbers pass, any other is withheld;
* a markdown heading "Score: 8 / 8" looked like the grader's score on the
  feedback page; learner markdown is now framed and its headings demoted;
* ten thousand tiny files held a worker while nbgrader copied them; a
  submission of more than MAX_SUBMISSION_FILES is rejected whole, by collect
  and by grade's intake, with a message naming the count and the cap;
* 800 MB written in 1 MB writes (one message) took a trusted warm-worker
  fork to 2.5 GB: refused before the grader holds it, the points kept.

The kernel attacks and their honest control are graded in ONE batch (warm
engine) on notebook 01, with feedback and export; the cold engine's memory
in one more run; collect's cap on a zip without grading.
"""
from __future__ import annotations

import base64
import csv
import html
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

from autograder import course, specimens
from autograder.grading.intake.notebook import MAX_SUBMISSION_FILES
from ..batches import shared_batch
from ..specimens import SWALLOW, WRONG_EMBED, hidden_lines

A = "01_embeddings"
FULL = 7  # notebook 01's points
pytestmark = [pytest.mark.grader, pytest.mark.slow,
              pytest.mark.skipif(A not in course.assignments(), reason="notebook 01 is not built")]

# Written straight to the descriptors the kernel inherited, as a process
# of the grader would: nbgrader's timing mark (not JSON, then out of
# order), the recheck's, a kernel death and a verdict line.
FORGED_LINES = ("tinylm-timing {not json\n"
                'tinylm-timing {"execute_start": 1e12, "first_cell": 0, "execute_end": "soon"}\n'
                "tinylm-recheck-timing {}\n"
                "[ERROR] Kernel died: DeadKernelError (forged)\n"
                + json.dumps({"check_embed": {"status": "pass", "message": ""}}) + "\n")
# Run only in the notebook kernel: in the recheck child fd 1 is the
# protocol pipe (and the recheck has its own battery).
IN_KERNEL = "import os\ntry:\n    _KERNEL = bool(get_ipython())\nexcept NameError:\n    _KERNEL = False\n"
FORGE = IN_KERNEL + f"if _KERNEL:\n    for fd in (1, 2):\n        os.write(fd, {FORGED_LINES.encode()!r})\n"
# Text the learner's code raises only in the recheck child (no IPython
# there): base64 of the hidden tests, in a builtin exception's message and
# in a class name of its own.
PAYLOAD = base64.b64encode("\n".join(hidden_lines()).encode()).decode()[:160]
PAYLOAD_NAME = "Leak" + PAYLOAD.encode().hex()[:48]
RAISE_IN_RECHECK = f"""import builtins
def _in_recheck():
    try:
        get_ipython
        return False
    except NameError:
        return True
def _leak():
    builtins._calls = getattr(builtins, '_calls', 0) + 1
    if builtins._calls % 2:
        raise ValueError({PAYLOAD!r})
    raise type({PAYLOAD_NAME!r}, (Exception,), {{}})({PAYLOAD!r})
"""
FAKE_HEADING = "Score: 8 / 8"
# 800 MB in 1 MB writes without a flush: one 800 MB stream message, which took
# a trusted warm-worker fork to 2.5 GB; now refused before the grader holds it
# (the memory bound itself: attacks/test_intake.py, on a smaller flood).
FLOOD = "import sys\nfor _ in range(800):\n    sys.stdout.write('x' * 2**20)\n"
CROWD = MAX_SUBMISSION_FILES + 50  # files besides the notebook


def _honest_embed_with(prefix: str, first_line: str) -> str:
    """The honest embed answer with `prefix` above it and `first_line` as
    the first line of its body."""
    answer = specimens.solution_answers(A)["embed"]
    assert "    return weight[ids]" in answer, "notebook 01's embed changed: update this test"
    return prefix + answer.replace("    return weight[ids]", f"    {first_line}\n    return weight[ids]")


def _crowded_folder(root: Path, student: str) -> None:
    """<root>/<student>/01_embeddings/: an honest notebook and CROWD tiny files."""
    folder = root / student / A
    folder.mkdir(parents=True)
    (folder / f"{A}.ipynb").write_text(json.dumps(specimens.honest(A)))
    for i in range(CROWD):
        (folder / f"tiny_{i:05d}.txt").write_text("x")


def build_battery(data: Path) -> dict:
    """{student: the points the submission earns at most}; the crowded ones
    arrive through collect and straight into submitted/."""
    from autograder.grading.intake.collect import collect, format_report
    cases = {}

    def add(student, nb, earns):
        specimens.submit(data, student, A, nb)
        cases[student] = earns

    add("control", specimens.honest(A), FULL)
    add("forged_log", specimens.notebook(A, {"embed": FORGE + SWALLOW + WRONG_EMBED}), 0)
    leak = specimens.notebook(A, {**specimens.solution_answers(A),
                                  "embed": _honest_embed_with(RAISE_IN_RECHECK, "if _in_recheck(): _leak()")})
    add("exception_leak", leak, FULL - 2)  # embed's check fails in the recheck
    heading = specimens.honest(A)
    heading.cells.insert(1, nbformat.v4.new_markdown_cell(f"# {FAKE_HEADING}\n\nall done"))
    add("fake_heading", heading, FULL)
    add("flood_800mb", specimens.notebook(A, {**specimens.solution_answers(A),
                                              "embed": FLOOD + specimens.solution_answers(A)["embed"]}), FULL)
    _crowded_folder(data / "submitted", "crowded_direct")
    cases["crowded_direct"] = 0
    source = data.parent / f"{data.name}-collect"
    _crowded_folder(source, "crowded_collected")
    report = collect(source, [A])
    cases["crowded_collected"] = 0
    return {"earns": cases, "collect_report": format_report(report, [A])}


def _grade_battery(data: Path) -> dict:
    from autograder.grading.batch import Options, grade_all
    from autograder.grading.publish.export import export
    from autograder.grading.publish.feedback import write_feedback
    from autograder.grading.sandbox.jail import Limits

    built = build_battery(data)
    opts = Options(assignments=[A], workers=2, cell_timeout=30, progress=False,
                   limits=Limits(memory_mb=3072, wall_s=240, cpu_s=240))
    results = grade_all(opts)
    write_feedback(results)
    export(opts.db_url, data / "exports")
    with open(data / "exports" / "grades_per_exercise.csv") as fh:
        exported = [row for row in csv.DictReader(fh)]
    return {**built, "results": {r["student"]: r for r in results}, "exported": exported}


@pytest.fixture(scope="module")
def battery(tmp_path_factory):
    return shared_batch(tmp_path_factory, "grader_attacks_channels", _grade_battery)


def _feedback(battery, student: str) -> str:
    return (battery["data"] / "feedback" / student / A / f"{A}.html").read_text()


def _exported(battery, student: str) -> dict[str, float]:
    return {r["exercise"]: float(r["score"]) for r in battery["exported"] if r["student"] == student}


def test_every_submission_gets_a_result_and_at_most_its_points(battery):
    results = battery["results"]
    assert set(results) == set(battery["earns"])
    assert results["control"]["score"] == FULL and results["control"]["status"] == "graded", results["control"]
    over = {s: r["score"] for s, r in results.items() if r["score"] > battery["earns"][s]}
    assert not over, f"more points than earned: {over}"


def test_forged_log_lines_get_the_rechecks_verdict_in_export(battery):
    r = battery["results"]["forged_log"]
    assert r["status"] == "graded", r
    fooled = [c for c, v in r["cells"].items() if v["kernel_score"] == v["max_score"] > 0]
    assert fooled, f"the kernel was not fooled, so the export proves nothing: {r['cells']}"
    assert all(r["cells"][c]["recheck"] == "fail" and r["cells"][c]["score"] == 0 for c in fooled), r["cells"]
    assert all(any(f.startswith(c) for f in r["flags"]) for c in fooled), r["flags"]
    exported = _exported(battery, "forged_log")
    assert exported and not any(exported.values()), f"export shows the kernel's scores: {exported}"
    assert sum(_exported(battery, "control").values()) == FULL


def test_forged_lines_do_not_reach_the_timing(battery):
    timing = battery["results"]["forged_log"]["timing"]
    assert all(0 <= v < 1e6 for v in timing.values()), timing


def test_the_recheck_childs_exception_text_stays_out_of_the_feedback(battery):
    r = battery["results"]["exception_leak"]
    cell = r["cells"]["check_embed"]
    assert cell["kernel_score"] == 2 and cell["recheck"] == "fail" and cell["score"] == 0, cell
    assert "not carried into the grader's verdict" in cell["message"], cell["message"]
    page = _feedback(battery, "exception_leak")
    # The page shows the submission's source, which here holds the payload
    # itself (a real attack would have it from a side channel): look at
    # what the grader wrote, the banner and the verdicts.
    verdicts = html.unescape(" ".join([page.split('<div class="cell">', 1)[0],
                                       *re.findall(r'<div class="verdict[^"]*">(.*?)</div>', page, re.S)]))
    assert "not carried into the grader's verdict" in verdicts, verdicts[:3000]
    for text in (PAYLOAD[:24], PAYLOAD_NAME[:24]):
        assert text not in verdicts and text not in json.dumps(r), f"{text!r} reached the verdict"
    assert not [line for line in hidden_lines() if line in html.unescape(page)], "a hidden test line is on the page"


def test_a_learners_heading_cannot_imitate_the_grader_score(battery):
    page = _feedback(battery, "fake_heading")
    body = re.split(r"<body[^>]*>", page, maxsplit=1)[1]
    headings = re.findall(r"<h[1-6][^>]*>(.*?)</h[1-6]>", body, re.S)
    assert not [h for h in headings if "Score" in h], f"a heading carries a score: {headings}"
    frames = re.findall(r'<div class="learner-markdown">(.*?)</div>\s*</div>', body, re.S)
    framed = [f for f in frames if FAKE_HEADING in f]
    assert framed and "From your notebook" in framed[0], frames
    banner = body.split('<div class="learner-markdown">', 1)[0]
    assert "grader-banner" in banner and f"{FULL} / {FULL}" in banner and FAKE_HEADING not in banner


def test_an_800_mb_flood_keeps_its_points_and_says_its_output_was_refused(battery):
    r = battery["results"]["flood_800mb"]
    assert (r["status"], r["score"]) == ("graded", FULL), r
    notebook = battery["data"] / "autograded" / "flood_800mb" / A / f"{A}.ipynb"
    assert notebook.stat().st_size < 1_000_000 and "sent a message over the 32 MB" in notebook.read_text()


@pytest.mark.parametrize("student", ["crowded_direct", "crowded_collected"])
def test_a_submission_of_too_many_files_is_rejected_with_its_count(battery, student):
    r = battery["results"][student]
    assert (r["status"], r["score"], r["max_score"]) == ("rejected", 0, FULL), r
    message = " ".join(r["problems"])
    assert f"over the limit of {MAX_SUBMISSION_FILES}" in message and str(CROWD + 1) in message, message
    assert r["seconds"] < 30, f"a rejected submission took {r['seconds']} s"
    assert not any(_exported(battery, student).values())
    assert f"{student}/{A}: the submission holds" in battery["collect_report"] or student == "crowded_direct"


# --- the cold engine's memory while the kernel writes to its own fd 1 --------

WRITTEN_MB = 256
LOUD = FORGE + f"if _KERNEL:\n    for _ in range({WRITTEN_MB}):\n        os.write(1, b'x' * 2**20)\n"
COLD_RUN = """import json, os, sys
from pathlib import Path
from autograder import specimens
from autograder.grading.batch import Options, grade_all
from autograder.grading.sandbox.jail import Limits
A, answers = sys.argv[1], json.loads(sys.argv[2])
specimens.submit(Path(os.environ[sys.argv[3]]), "loud", A, specimens.notebook(A, answers))
def vm(key):
    return int(next(l for l in open("/proc/self/status") if l.startswith(key)).split()[1]) // 1024
before = vm("VmRSS")
results = grade_all(Options(assignments=[A], workers=1, warm=False, cell_timeout=60, progress=False,
                            limits=Limits(memory_mb=3072, wall_s=300, cpu_s=300)))
print(json.dumps({"before_mb": before, "peak_mb": vm("VmHWM"), "result": results[0]}))
"""
# Measured before the fix: 1 GB written grew the process to 3.2 GB (it
# read the whole pipe into one string); now the kernel's fd 1 is
# /dev/null and the log is read as a bounded tail. Half of what is written
# lies far above the honest run's growth (gradebook, notebook reads).
GROWTH_BOUND_MB = WRITTEN_MB // 2


def test_the_cold_engine_stays_small_while_the_kernel_writes_to_its_stdout(tmp_path):
    from autograder.grading import gradebook
    answers = {**specimens.solution_answers(A)}
    answers["embed"] = LOUD + answers["embed"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", gradebook.DATA_ENV_VAR: str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", COLD_RUN, A, json.dumps(answers), gradebook.DATA_ENV_VAR], cwd=course.ROOT, env=env,
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    run = json.loads(out.stdout.strip().splitlines()[-1])
    assert (run["result"]["status"], run["result"]["score"]) == ("graded", FULL), run["result"]
    growth = run["peak_mb"] - run["before_mb"]
    assert growth < GROWTH_BOUND_MB, f"grade grew {growth} MB while the kernel wrote {WRITTEN_MB} MB to its fd 1"


# --- collect's file-count cap, without grading -------------------------------

def test_collect_rejects_a_zip_of_too_many_files_and_imports_the_others(tmp_path, monkeypatch):
    from autograder.grading import gradebook
    from autograder.grading.intake.collect import collect, format_report
    from autograder.grading.intake.notebook import rejection, rejection_note
    monkeypatch.setenv(gradebook.DATA_ENV_VAR, str(tmp_path / "data"))
    archive = tmp_path / "export.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr(f"calm/{A}/{A}.ipynb", json.dumps(specimens.honest(A)))
        zf.writestr(f"crowd/{A}/{A}.ipynb", json.dumps(specimens.honest(A)))
        for i in range(CROWD):
            zf.writestr(f"crowd/{A}/tiny_{i:05d}.txt", "x")
    report = collect(archive, [A])
    text = format_report(report, [A])
    crowd = gradebook.folder("submitted") / "crowd" / A
    assert ("crowd", A) in report.unusable and ("calm", A) not in report.unusable, text
    assert f"holds {CROWD + 1} files" in text and f"limit of {MAX_SUBMISSION_FILES}" in text, text
    # only the submission's time (deadlines.py) is kept
    assert {p.name for p in crowd.iterdir()} <= {"timestamp.txt"}, "a rejected submission's files were kept"
    assert "holds" in rejection(crowd) and rejection_note(crowd).is_file()
    assert (gradebook.folder("submitted") / "calm" / A / f"{A}.ipynb").is_file()
    # collected again with few files, the submission is taken and the old rejection forgotten
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr(f"crowd/{A}/{A}.ipynb", json.dumps(specimens.honest(A)))
    report = collect(archive, [A])
    assert ("crowd", A) not in report.unusable and rejection(crowd) is None


# --- the recheck's filter of the learner's words, without grading -----------

def test_only_library_messages_and_known_type_names_leave_the_recheck():
    import torch

    from autograder.checks.core import delegation_message, describe
    from autograder.grading.recheck.parent import LEARNER_MESSAGE_WITHHELD, learner_exception
    from autograder.grading.recheck.protocol import Opaque, known_type_name, shown_path
    try:
        torch.zeros(3, 4) @ torch.zeros(5, 6)
    except RuntimeError as err:
        shape_error = str(err)
    kept = learner_exception("RuntimeError", shape_error, "embed")
    assert (type(kept).__name__, str(kept)) == ("RuntimeError", shape_error)
    for type_name, text in (("ValueError", PAYLOAD), (PAYLOAD_NAME, "x"), ("RuntimeError", shape_error + PAYLOAD),
                            ("Delegation", PAYLOAD)):
        withheld = learner_exception(type_name, text, "embed")
        assert str(withheld) == LEARNER_MESSAGE_WITHHELD and PAYLOAD_NAME not in type(withheld).__name__
    import tinylm
    refusal = delegation_message("embed", tinylm.embed)
    assert str(learner_exception("Delegation", refusal, "embed")) == refusal
    assert known_type_name("RMSNorm", "Module") == "RMSNorm" and known_type_name(PAYLOAD_NAME, "Module") == "Module"
    assert PAYLOAD_NAME not in repr(Opaque(PAYLOAD_NAME))
    assert shown_path("__class__.double") == "'__class__.double'" and PAYLOAD_NAME not in shown_path(PAYLOAD_NAME)
    assert PAYLOAD not in describe(PAYLOAD) and PAYLOAD not in describe({PAYLOAD: 1})


def test_nbgrader_log_is_kept_as_a_bounded_tail_that_says_it_was_cut(tmp_path):
    from autograder.grading.grade import LOG_TAIL_BYTES, read_log_tail
    log = tmp_path / "nbgrader.log"
    with open(log, "wb") as fh:
        for i in range(64):
            fh.write(b"x" * 2**16 + b"\n")
        fh.write(b"[ERROR] the last line\n")
    text = read_log_tail(log)
    assert len(text) < LOG_TAIL_BYTES + 200 and text.endswith("[ERROR] the last line\n")
    assert text.startswith(f"[the grader kept the last {LOG_TAIL_BYTES} of {log.stat().st_size} bytes")
