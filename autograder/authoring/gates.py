"""Structural facts about the course notebooks, shared by the test-suite
gates and the CLI: which cells are answers and checks, what text must never
reach a release notebook, and how to run one exercise in-process."""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat

from .. import course
from ..notebook_format import (HIDDEN_BLOCK, SOLUTION_BLOCK, is_answer, is_check, nbg, read, setup_cells,
                               visible_part)

RUN_TIME = re.compile(r"\*\*Run time:\*\* about (\d+) s")


@dataclass
class Exercise:
    answer: nbformat.NotebookNode
    check: nbformat.NotebookNode | None

    @property
    def grade_id(self) -> str:
        return nbg(self.answer)["grade_id"]

    @property
    def defines(self) -> list[str]:
        """Top-level functions and classes the answer cell defines."""
        tree = ast.parse(self.answer.source)
        return [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]


def exercises(nb) -> list[Exercise]:
    """Each answer cell with the next code cell after it, if that is a check."""
    out = []
    code = [c for c in nb.cells if c.cell_type == "code"]
    for i, cell in enumerate(code):
        if is_answer(cell):
            nxt = code[i + 1] if i + 1 < len(code) else None
            out.append(Exercise(cell, nxt if nxt is not None and is_check(nxt) else None))
    return out


def solution_lines(nb) -> list[str]:
    """Lines that only the solutions may contain: answer bodies and hidden tests
    (short lines such as `return x` are skipped: they could occur anywhere)."""
    lines = []
    for cell in nb.cells:
        for block in SOLUTION_BLOCK.findall(cell.source) + HIDDEN_BLOCK.findall(cell.source):
            lines += [l.strip() for l in block.splitlines() if len(l.strip()) >= 12 and not l.strip().startswith("#")]
    return lines


def leaked_lines(source_nb, release_nb) -> list[str]:
    """Solution or hidden-test lines of `source_nb` that appear in `release_nb`."""
    return [l for l in solution_lines(source_nb) if any(l in c.source for c in release_nb.cells)]


def stated_run_time(nb) -> int:
    """The 'Run time: about N s' promise in the notebook's first cell."""
    m = RUN_TIME.search(nb.cells[0].source)
    if not m:
        raise ValueError("the first cell must state '**Run time:** about N s'")
    return int(m.group(1))


def exercise_namespace(assignment: str, replace: dict[str, tuple[str, str]] | None = None,
                       answers_from: Path | None = None) -> dict:
    """Execute the setup cells and answer cells of a solution notebook in a
    fresh namespace, optionally editing one answer first:
    replace = {grade_id: (old, new)}. Raises if `old` is not in that cell,
    so an injected bug can never silently miss its target.

    answers_from: take the answer cells (matched by grade id) from another
    notebook, e.g. a submission, while setup and checks stay the trusted
    source's: the basis of an out-of-process recheck."""
    nb = read(course.source_notebook(assignment))
    theirs = {nbg(c)["grade_id"]: c.source for c in read(answers_from).cells if is_answer(c)} if answers_from else {}
    ns: dict = {"__name__": f"exercise_{assignment}"}
    replace = dict(replace or {})
    for cell in nb.cells:
        if cell in setup_cells(nb):
            exec(compile(cell.source, f"<{assignment}:setup>", "exec"), ns)
        elif is_answer(cell):
            gid = nbg(cell)["grade_id"]
            src = theirs.get(gid, "") if answers_from else cell.source
            if gid in replace:
                old, new = replace.pop(gid)
                if old not in src:
                    raise ValueError(f"{assignment}/{gid}: text to replace not found: {old!r}")
                src = src.replace(old, new)
            exec(compile(src, f"<{assignment}:{gid}>", "exec"), ns)
    if replace:
        raise ValueError(f"{assignment}: no answer cells with grade ids {sorted(replace)}")
    return ns


def run_check(assignment: str, grade_id: str, ns: dict, hidden: bool = False) -> None:
    """Run the test cell of exercise `grade_id` in namespace `ns`."""
    nb = read(course.source_notebook(assignment))
    for ex in exercises(nb):
        if ex.grade_id == grade_id:
            src = ex.check.source if hidden else visible_part(ex.check.source)
            exec(compile(src, f"<{assignment}:{nbg(ex.check)['grade_id']}>", "exec"), ns)
            return
    raise ValueError(f"{assignment}: no exercise {grade_id}")


def readable_functions(nb) -> list[tuple[str, str, ast.AST]]:
    """Functions a learner can read outside the answer and check cells, as
    (cell id, name, node): top-level `def`s, lambdas assigned to a name at top
    level, and lambdas passed to show_check."""
    found = []
    for cell in nb.cells:
        if cell.cell_type != "code" or is_answer(cell) or is_check(cell):
            continue
        tree = ast.parse(cell.source)
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                found.append((cell.get("id", "?"), node.name, node))
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Lambda):
                found.append((cell.get("id", "?"), f"lambda assigned at line {node.lineno}", node.value))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "show_check"
                    and len(node.args) > 1 and isinstance(node.args[1], ast.Lambda)):
                found.append((cell.get("id", "?"), f"lambda at line {node.args[1].lineno}", node.args[1]))
    return found


def _accepts_same_call(candidate, answer) -> bool:
    """Could `candidate` be called as the check calls `answer` (same positional arity)?"""
    import inspect

    try:
        theirs, ours = inspect.signature(candidate).parameters.values(), inspect.signature(answer).parameters.values()
    except (TypeError, ValueError):
        return True
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if any(p.kind == inspect.Parameter.VAR_POSITIONAL for p in theirs):
        return True
    required = sum(p.kind in positional and p.default is p.empty for p in theirs)
    accepted = sum(p.kind in positional for p in theirs)
    answer_required = sum(p.kind in positional and p.default is p.empty for p in ours)
    return required <= answer_required <= accepted


def _stub(name: str):
    def not_implemented(*args, **kwargs):
        raise NotImplementedError(f"{name} is not implemented yet")
    return not_implemented


def solutions_in_plain_sight(assignment: str, release_nb) -> list[str]:
    """Functions outside the answer cells of `release_nb` that pass the visible
    check of one of the notebook's exercises: code a learner can copy as an
    answer. Each candidate is compiled in the namespace of the solved notebook
    (setup and answer cells run) with the checked exercise's answer replaced by
    a stub, so it can use the other exercises' answers, as a learner who solved
    those could, but not the one it is tested for; the check's first call runs
    with the candidate in place of the answer. A check that fails or raises
    means the candidate is not a solution."""
    import contextlib
    import io

    source = read(course.source_notebook(assignment))
    ns = exercise_namespace(assignment)
    calls = []  # (name the check passes, the check's first call as an expression)
    for ex in exercises(source):
        first = ast.parse(ex.check.source.splitlines()[0]).body[0].value
        name = next(a.id for a in first.args if isinstance(a, ast.Name) and a.id in ex.defines)
        calls.append((name, first))
    found = []
    for cell_id, label, node in readable_functions(release_nb):
        for name, call in calls:
            # The exercise's own answer is a stub, as in the release notebook: a
            # wrapper that calls it (`lambda q, k, v: causal_attention(q, k, v)`)
            # is no solution; the answers of other exercises stay solved.
            scope = dict(ns, **{name: _stub(name)})
            if isinstance(node, ast.Lambda):
                candidate = eval(compile(ast.Expression(node), f"<{assignment}:{cell_id}>", "eval"), scope)
            else:
                exec(compile(ast.Module([node], []), f"<{assignment}:{cell_id}>", "exec"), scope)
                candidate = scope[label]
            if not _accepts_same_call(candidate, ns[name]):
                continue
            swapped = ast.Call(call.func, [ast.Name("__candidate__", ast.Load()) if isinstance(a, ast.Name) and a.id == name
                                           else a for a in call.args], call.keywords)
            scope["__candidate__"] = candidate
            try:
                with contextlib.redirect_stdout(io.StringIO()):
                    eval(compile(ast.fix_missing_locations(ast.Expression(swapped)), "<check>", "eval"), scope)
            except Exception:  # noqa: BLE001 - a failing or crashing check is the outcome we want
                continue
            found.append(f"{assignment}: {label} (cell {cell_id}) passes {ast.unparse(call)}")
    return found


# -- numbers in prose -----------------------------------------------------------------------
# A number in prose is "tied" when an executed output (or the code or preset it
# describes) contains it, or contains a longer decimal that rounds to it: prose
# "0.26" is tied by an output "0.259". Checked in notebooks: every decimal and
# every integer that counts steps, nats, bits, seconds or percent in a markdown
# cell (math in $...$ and the gated "Run time" promise are skipped). Checked in
# README.md and docs/: every number inside a block
#   <!-- numbers from: 09_training 10_perplexity -->  ...  <!-- /numbers -->
# against those notebooks' outputs.

PROSE_NUMBER = re.compile(r"(?<![\w.])(\d[\d,]*\.\d+|\d[\d,]*(?=\s*(?:steps|nats|bits|s\b|seconds|%)))")
ANY_NUMBER = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?")
NUMBERS_BLOCK = re.compile(r"<!-- numbers from: ([\w ]+?) -->(.*?)<!-- /numbers -->", re.S)
PRESETS = course.ROOT / "tinylm" / "presets.py"


def output_text(nb) -> str:
    """Everything the executed code cells printed (streams and plain-text results)."""
    parts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            parts.append(out.get("text", "") or out.get("data", {}).get("text/plain", ""))
    return "\n".join(parts)


def _numbers(text: str) -> set[str]:
    found = {n.replace(",", "") for n in ANY_NUMBER.findall(text)}
    return found | {n[:-2] for n in found if n.endswith(".0")}  # a preset's 60.0 ties prose "60"


def is_tied(number: str, sources: set[str]) -> bool:
    number = number.replace(",", "")
    if number in sources:
        return True
    if "." not in number:
        return False
    places = len(number.split(".")[1])
    return any("." in s and len(s.split(".")[1]) > places and round(float(s), places) == float(number)
               for s in sources)


def untied_notebook_numbers(nb) -> list[str]:
    """Numbers in a notebook's markdown that no output, code cell or preset of it contains."""
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    sources = _numbers(output_text(nb)) | _numbers(code) | _numbers(PRESETS.read_text())
    untied = []
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        prose = RUN_TIME.sub("", re.sub(r"\$[^$]*\$", "", cell.source))
        for m in PROSE_NUMBER.finditer(prose):
            if not is_tied(m.group(1), sources):
                untied.append(f"{m.group(1)!r} in '...{prose[max(0, m.start() - 50):m.end() + 20]}...'")
    return untied


def untied_document_numbers(text: str, notebook_outputs) -> list[str]:
    """Numbers inside '<!-- numbers from: NB ... -->' blocks of a document that
    the named notebooks' outputs do not contain. notebook_outputs(name) -> text."""
    untied = []
    for names, block in NUMBERS_BLOCK.findall(text):
        sources = set().union(*(_numbers(notebook_outputs(n)) for n in names.split()))
        for m in ANY_NUMBER.finditer(block):
            if block[:m.start()].endswith(("notebook ", "notebook-", "notebooks ")):
                continue  # a notebook's name, not a measurement
            if not is_tied(m.group(), sources):
                untied.append(f"{m.group()!r} in '...{block[max(0, m.start() - 50):m.end() + 20]}...' (from {names})")
    return untied
