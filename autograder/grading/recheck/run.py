"""The recheck of one submission, end to end: the trusted process
(`python -m autograder.grading.recheck ASSIGNMENT NOTEBOOK`, main) limits
its own memory, reserves a jail for the child, runs the course's setup and
test cells against proxies of the learner's functions (recheck_notebook),
and prints one verdict per test cell as JSON; recheck_submission starts it
from the grader and reads them back (parse_output)."""
from __future__ import annotations

import argparse
import ast
import contextlib
import io
import json
import linecache
import os
import re
import resource
import subprocess
import sys
import time

from ... import course
from ...notebook_format import defined_names, is_answer, is_check, nbg, read, setup_cells
from ..sandbox.kernel import jail_for_recheck
from ...diagnosis_record import KIND_WORDS
from .parent import Child, make_proxy
from .protocol import MODULE, NotRecheckable, known_type_name

RECHECK_TIMEOUT = 60.0
# Beside the verdicts: the ipython_cells.NOTES keys of what the learner's cells ran without (grade_one takes it out).
SKIPPED_KEY = "__skipped__"

# Checks whose verdict is the notebook kernel's alone (reported "not
# rechecked", which the grade scores zero and flags for a hand regrade). None
# since the recheck carries the model and optimizer state of a training step
# and the check's random state across (see parent.call_child).
KERNEL_ONLY: dict[str, str] = {}


def learner_cells(submitted, course_notebooks: list) -> dict[str | None, list[str]]:
    """The code cells the learner added (helper functions, experiments),
    keyed by the grade id of the course cell they follow in the submission
    (None: before every course cell), so the child runs them in notebook
    order. A cell is the learner's when it carries no grade id of the course
    (none at all, or one the course does not have) and its text is not one
    of the course's own cells (the release's demo cells grade nothing: they
    run in the kernel only)."""
    ids = {nbg(c).get("grade_id") for nb in course_notebooks for c in nb.cells} - {None}
    course_text = {c.source.strip() for nb in course_notebooks for c in nb.cells if c.cell_type == "code"}
    added: dict[str | None, list[str]] = {}
    anchor = None
    for cell in submitted.cells:
        meta = cell.metadata.get("nbgrader")
        gid = meta.get("grade_id") if isinstance(meta, dict) else None
        if isinstance(gid, str) and gid in ids:
            anchor = gid
        elif cell.cell_type == "code" and isinstance(cell.source, str) and cell.source.strip() not in course_text:
            added.setdefault(anchor, []).append(cell.source)
    return added


def recheck_notebook(assignment: str, notebook_path: str, timeout: float = RECHECK_TIMEOUT, jail=None,
                     total: float = 4 * RECHECK_TIMEOUT) -> dict:
    """{grade cell id: {"status": "pass"|"fail"|"not rechecked", "message": str, "diagnoses": [dict]}}
    (diagnoses: the failing check calls' CheckFailed.diagnosis, capped_diagnosis)."""
    source = read(course.source_notebook(assignment))
    try:
        submitted = read(notebook_path)
        answers = {}
        for cell in submitted.cells:
            meta = cell.metadata.get("nbgrader", {})
            if cell.cell_type == "code" and isinstance(meta, dict) and meta.get("solution"):
                answers.setdefault(meta.get("grade_id"), cell.source)
        added = learner_cells(submitted, [source, read(course.release_notebook(assignment))])
    except Exception:  # unreadable: every exercise fails, the intake said why
        answers, added = {}, {}
    setup = setup_cells(source)
    from ...checks.framework import calling as checks_calling  # torch: imported after main limits its memory
    checks_calling.CALL_TIME_LIMIT = None  # the learner's calls run in the child, under the Child's own time limits
    child = Child(jail, timeout, total)
    trusted: dict = {"__name__": "__recheck__"}
    results: dict = {}

    def run_in_child(label: str, text: str) -> None:
        # The learner's own text, kept here for display only (a located line in a diagnosis): never executed here.
        linecache.cache[label] = (len(text), None, text.splitlines(True), label)
        child.files.add(label)
        try:
            child.run_cell(label, text)
        except (TimeoutError, RuntimeError):
            pass  # the cell hung or ended the process: it defines nothing, the checks that need it fail

    try:
        # Setup, answers and the learner's own cells in notebook order, in the
        # child; the learner's cells never run in this process.
        for n, text in enumerate(added.get(None, [])):
            run_in_child(f"<learner cell {n} at the top>", text)
        for cell in source.cells:
            gid = nbg(cell).get("grade_id")
            if cell in setup:
                child.run_cell(f"<setup {gid}>", cell.source)
                with contextlib.redirect_stdout(io.StringIO()):
                    exec(compile(cell.source, f"<setup {gid}>", "exec"), trusted)
            elif is_answer(cell):
                run_in_child(f"<answer {gid}>", answers.get(gid, ""))
                for name in defined_names(cell.source):
                    trusted[name] = make_proxy(child, name)
            for n, text in enumerate(added.get(gid, []) if gid else []):
                run_in_child(f"<learner cell {n} after {gid}>", text)
        for cell in source.cells:
            if not is_check(cell):
                continue
            gid = nbg(cell)["grade_id"]
            if gid in KERNEL_ONLY:
                results[gid] = {"status": "not rechecked", "message": f"kernel verdict only: this check {KERNEL_ONLY[gid]}"}
                continue
            child.unreachable = None
            results[gid] = run_check(cell.source, trusted)
            if child.unreachable and results[gid]["status"] == "fail":
                # Not "not rechecked": that would keep the kernel's verdict, and
                # touching an unlisted name on purpose would then buy a pass.
                results[gid]["message"] = (f"the learner's code {child.unreachable}; a hand regrade may be due. "
                                           f"{results[gid]['message']}")[:1000]
    finally:
        child.kill("recheck finished")
    if child.skipped:
        results[SKIPPED_KEY] = sorted(child.skipped)
    return results


# A verdict carries at most this many diagnoses, one per failing check call.
MAX_DIAGNOSES = 8


def verdict_text(err: Exception) -> str:
    """What a verdict says of an exception a test cell's statement raised:
    the text of a check's failure (an AssertionError: the checks' and the
    course's own words) and of the grader's own errors; of any other, raised
    by Python or torch on a learner's value (a KeyError quotes the key, a
    size mismatch the learner's sizes), only its type. The located line is
    the learner's own text: it travels as a field (framed as theirs on every
    page), not inside the check's message."""
    if isinstance(err, (AssertionError, TimeoutError)) or type(err).__module__.startswith("autograder."):
        text = "\n".join(line for line in str(err).strip().splitlines() if not line.strip().startswith("Where:"))
        return (text or type(err).__name__)[:1000]
    return (f"the test cell stopped on {known_type_name(type(err).__name__, 'an error')} (its text is not carried "
            "into the verdict: it may quote the learner's values)")


def run_check(source: str, ns: dict) -> dict:
    """Run a test cell statement by statement. A failing check call (an
    expression statement) does not stop the calls after it, so the verdict
    carries the diagnosis of every call, hidden ones included (feedback
    shows only what this trusted run observed); any failure fails the cell,
    and a failing statement of another kind stops it."""
    from ...diagnosis_record import capped_diagnosis
    failures: list[str] = []
    diagnoses: list[dict] = []
    for node in ast.parse(source).body:
        code = compile(ast.Module(body=[node], type_ignores=[]), "<test cell>", "exec")
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                exec(code, ns)
        except NotRecheckable as err:
            return {"status": "not rechecked", "message": str(err)}
        except Exception as err:  # noqa: BLE001: a failed check, in whatever form
            text = verdict_text(err)
            if text not in failures:
                failures.append(text)
                found = getattr(err, "diagnosis", None)
                if found is not None and len(diagnoses) < MAX_DIAGNOSES:
                    diagnoses.append(_without_learner_text(capped_diagnosis(found.to_dict())))  # what feedback and the report read
            if not isinstance(node, ast.Expr):
                break
    if not failures:
        return {"status": "pass", "message": ""}
    return {"status": "fail", "message": "\n\n".join(failures)[:3000], "diagnoses": diagnoses}


# The trusted process gets the jailed child's address-space limit, but never
# less than this: its honest recheck of the largest notebook (09) peaks at
# 0.8 GB of address space (VmPeak, measured with torch 2.13.0+cpu on
# 2026-12-01), and it may hold a few MAX_MESSAGE replies at once.
TRUSTED_MEMORY_FLOOR_MB = 2048


def trusted_memory_mb(limits) -> int:
    return max(int(limits.memory_mb), TRUSTED_MEMORY_FLOOR_MB)


def limit_memory(memory_mb: int) -> None:
    """Cap this process's address space (the soft limit: the jailed child,
    started from here, sets its own from the hard one). A reply that would
    still inflate past it fails its exercise with a MemoryError instead of
    taking the grading machine's memory."""
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (cap if hard == resource.RLIM_INFINITY else min(cap, hard), hard))


def recheck_args(assignment: str, notebook, limits) -> list[str]:
    """The command-line arguments of the trusted recheck of one submission."""
    return [assignment, str(notebook), "--timeout", str(limits.wall_s / 4), "--total", str(limits.wall_s * 0.8),
            "--memory-mb", str(trusted_memory_mb(limits))]


# main prints a line starting with this before the verdicts: when the
# checks began and ended (epoch seconds), for grade's stage timing.
TIMING_MARK = "tinylm-recheck-timing "


def parse_output(stdout: str) -> dict:
    """The verdicts main printed (its last line), with its timing line, if
    any, under "__timing__" (grade_one takes it out before reconciling)."""
    lines = stdout.strip().splitlines()
    verdicts = json.loads(lines[-1])
    marks = [line[len(TIMING_MARK):] for line in lines if line.startswith(TIMING_MARK)]
    try:
        verdicts["__timing__"] = json.loads(marks[-1]) if marks else None
    except ValueError:  # only the timing is lost
        verdicts["__timing__"] = None
    return verdicts


def recheck_submission(assignment: str, notebook, limits) -> dict:
    """Run the recheck in its own trusted process (the grade worker stays
    small, and this one runs under its own address-space limit), with the
    child jailed under `limits`. Never raises: a recheck that did not
    complete is {"__error__": {"status": "error", ...}}."""
    cmd = [sys.executable, "-m", MODULE, *recheck_args(assignment, notebook, limits)]
    try:
        proc = subprocess.run(cmd, cwd=course.ROOT, capture_output=True, text=True, timeout=limits.wall_s,
                              env=dict(os.environ, OMP_NUM_THREADS="1", NBGRADER_EXECUTION="autograde"))
        if proc.returncode == 0:
            return parse_output(proc.stdout)
        reason = how_it_ended(proc.stderr, proc.returncode)
    except subprocess.TimeoutExpired:
        reason = f"the recheck took longer than {limits.wall_s:.0f} s"
    return {"__error__": {"status": "error", "message": f"the recheck did not complete: {reason}"[:500]}}


def how_it_ended(stderr: str, status: int) -> str:
    """How the trusted recheck process ended, in the grader's words: the
    type of the error it stopped on (a traceback's last line would quote
    whatever learner value the error was raised on), or its exit status."""
    last = (stderr.strip().splitlines() or [""])[-1]
    name = last.split(":", 1)[0].rsplit(".", 1)[-1].strip()
    return known_type_name(name, "") or f"it exited with status {status}"


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(prog=f"python -m {MODULE}")
    p.add_argument("assignment")
    p.add_argument("notebook")
    p.add_argument("--timeout", type=float, default=RECHECK_TIMEOUT, help="seconds per call of the learner's code")
    p.add_argument("--total", type=float, default=4 * RECHECK_TIMEOUT, help="seconds for all calls together")
    p.add_argument("--memory-mb", type=int, default=0, help="address-space limit of this trusted process (0: none)")
    args = p.parse_args(argv)
    if args.memory_mb:
        limit_memory(args.memory_mb)  # before torch is imported, so nothing escapes it
    began = time.time()
    with jail_for_recheck() as jail:
        results = recheck_notebook(args.assignment, args.notebook, args.timeout, jail, args.total)
    print(TIMING_MARK + json.dumps({"start": began, "end": time.time()}))
    print(json.dumps(results))
    return 0


# What of a located line the verdict keeps: where it is and what kind of
# place it is. Its code and the facts measured there come from the learner's
# process (their source line, the text of an exception they raised): no
# learner byte goes into a verdict, so feedback shows the line's number only.
LOCATED_KEPT = ("file", "line", "also", "function", "kind")


def _without_learner_text(diagnosis: dict) -> dict:
    located = diagnosis.get("located")
    if isinstance(located, dict):
        diagnosis["located"] = checked_place({k: located[k] for k in LOCATED_KEPT if k in located})
    return diagnosis


def checked_place(located: dict) -> dict:
    """A located place as the trusted side can confirm it: the learner's
    process names it, so a file is kept only when this process holds its
    text (in linecache: the submitted cells recheck_notebook put there), a
    line only where that text has it, a function only where that
    cell defines it, and a kind only when it is one of the tracer's; the
    rest is dropped rather than carried as the child's text."""
    file = located.get("file")
    cached = linecache.cache.get(file) if isinstance(file, str) else None
    if cached is None:
        return {}
    lines = cached[2]
    kept = {"file": located["file"]}
    for key in ("line", "also"):
        if type(located.get(key)) is int and 1 <= located[key] <= len(lines):
            kept[key] = located[key]
    function = located.get("function")
    defined = {m for line in lines for m in re.findall(r"^\s*(?:async\s+)?def\s+(\w+)", line)}
    if function in defined or function == "<module>":
        kept["function"] = function
    if located.get("kind") in KIND_WORDS:
        kept["kind"] = located["kind"]
    return kept
