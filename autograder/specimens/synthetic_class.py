"""A synthetic graded class for the class report's tests and benchmark: a
gradebook and result files as `python -m autograder grade` leaves them,
written directly (no notebook is run), with known mistakes.

`SyntheticClass.work` is the ground truth a test counts from:
{student: {assignment: {exercise: mistake or None (passed)}}}; an assignment
missing from a student's dict was not submitted. A mistake is the text the
check would name ("Likely bug: ..."), or NOT_ATTEMPTED for an answer cell
left as the released stub, or UNNAMED for a failure no known bug explains.
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

from .. import course
from ..grading import gradebook
from ..grading.records import CellResult, GradeResult, result_path

NOT_ATTEMPTED = "<not attempted>"
UNNAMED = "<no named mistake>"

# A few diagnoses per exercise, worded as the course's checks word them;
# exercises without an entry draw from GENERIC.
MISTAKES = {
    "check_embed": ["the result does not depend on weight through autograd (a .detach(), .data or a new tensor "
                    "built from .tolist() cuts the gradient)", "lookup of the transposed ids (batch and seq swapped)"],
    "check_tied_logits": ["transposed weight: multiplied by weight instead of weight.T (the embedding is "
                          "[vocab, d_model], the head needs [d_model, vocab])"],
    "check_rms_norm": ["eps outside the sqrt", "mean(x²), without the square root",
                       "statistics over the wrong axis (dim=0)"],
    "check_causal_mask": ["mask off by one: the diagonal is masked, so a token cannot see itself"],
    "check_split_merge": ["transpose(1, 2) to (B, T, H, hd) first"],
    "check_self_attention": ["key and value projections swapped: k = x @ w_k.T, v = x @ w_v.T",
                             "output projection w_o missing"],
    "check_causal_attention": ["softmax taken over the query axis (dim=-2), not over the keys",
                               "missing scale: divide the scores by sqrt(head_dim) before the softmax",
                               "no causal mask: every query sees the future"],
    "check_apply_rope": ["cos and sin swapped", "RoPE applied to values"],
    "check_rotary_attention": ["RoPE applied to values"],
    "check_swiglu": ["identity (no activation)"],
    "check_pre_norm_block": ["missing residual around the MLP: h + mlp(mlp_norm(h)), not mlp(mlp_norm(h))"],
    "check_attention_step": ["KV cache concatenated along the head axis"],
    "check_top_p_filter": ["cumulative sum taken over unsorted probabilities: sort descending first"],
    "check_lm_loss": ["labels not shifted"],
    "check_nll_sum_and_count": ["sign flipped: the NLL is -log p, a positive number; you return the log-likelihood"],
    "check_bigram_nll": ["log base 2: NLL in nats uses the natural log"],
    "check_evaluate": ["perplexity from the summed NLL: it is exp of the MEAN NLL per token"],
}
GENERIC = [UNNAMED]


@dataclass
class SyntheticClass:
    structure: dict[str, dict[str, float]]                       # assignment -> {exercise: points}, in order
    work: dict[str, dict[str, dict[str, str | None]]]            # see the module docstring


def course_structure() -> dict[str, dict[str, float]]:
    """{assignment: {test cell grade id: points}} of the course's notebooks."""
    from ..notebook_format import is_check, nbg, read
    return {a: {nbg(c)["grade_id"]: float(nbg(c)["points"]) for c in read(course.source_notebook(a)).cells
                if is_check(c)} for a in course.assignments()}


def random_class(n_students: int, structure: dict[str, dict[str, float]] | None = None,
                 seed: int = 0) -> SyntheticClass:
    """A class in which students differ in skill, some stop submitting
    part-way through, and each failed exercise carries one known mistake."""
    structure = structure or course_structure()
    rng = random.Random(seed)
    work: dict[str, dict[str, dict[str, str | None]]] = {}
    assignments = list(structure)
    for n in range(n_students):
        skill = rng.betavariate(5, 2)
        stops_after = len(assignments) if rng.random() < 0.8 else rng.randrange(len(assignments))
        mine: dict[str, dict[str, str | None]] = {}
        for i, a in enumerate(assignments[:stops_after]):
            if rng.random() < 0.05:  # skipped one notebook
                continue
            mine[a] = {}
            for j, ex in enumerate(structure[a]):
                difficulty = 0.15 + 0.1 * ((i + j) % 3)
                if rng.random() < skill + (1 - skill) * (1 - difficulty * 3):
                    mine[a][ex] = None
                elif rng.random() < 0.15:
                    mine[a][ex] = NOT_ATTEMPTED
                else:
                    choices = MISTAKES.get(ex, GENERIC)
                    mine[a][ex] = choices[min(int(rng.expovariate(1.2)), len(choices) - 1)]
        work[f"s{n:04d}"] = mine
    return SyntheticClass(structure, work)


def failure_message(exercise: str, mistake: str) -> str:
    """The recheck's message for a failed exercise, in the form the course's
    checks raise (autograder/checks/framework/check.py), twice as a hidden test repeats it."""
    fn = exercise.removeprefix("check_")
    if mistake == NOT_ATTEMPTED:
        one = (f"{fn}: {fn} is not implemented yet (it raised NotImplementedError). Replace the "
               f"`raise NotImplementedError()` line with your code; it should return a tensor.")
    elif mistake == UNNAMED:
        one = f"{fn} failed 2 of 5 checks: {'; '.join(ROWS[:2])}."
    else:
        one = f"{fn} failed 1 of {len(ROWS)} checks: {ROWS[0]}.\n  Measured: max |diff| 0.5\n  Likely bug: {mistake}"
    return f"{one}\n\n{one}"


ROWS = ["float32", "float64", "bfloat16", "batch of 1", "gradient"]


def failure_diagnosis(exercise: str, mistake: str) -> dict:
    """The fields of the same failure (diagnosis_record.Diagnosis.to_dict), as the
    recheck stores them next to the message: what the report reads."""
    fn = exercise.removeprefix("check_")
    fields = {"exercise": fn, "kind": "failed", "rows": list(ROWS), "failed_rows": [], "regime": None,
              "located": None, "variants": [], "likely_bugs": [], "facts": [], "error": None, "stop": None}
    if mistake == NOT_ATTEMPTED:
        return {**fields, "kind": "not implemented", "rows": [], "error": "NotImplementedError",
                "stop": f"{fn} is not implemented yet (it raised NotImplementedError)."}
    if mistake == UNNAMED:
        return {**fields, "failed_rows": ROWS[:2]}
    return {**fields, "failed_rows": ROWS[:1], "facts": ["max |diff| 0.5"], "likely_bugs": [mistake]}


def result_of(student: str, assignment: str, cells: dict[str, float], answers: dict[str, str | None],
              message=None) -> GradeResult:
    """One result file's content, as grade.grade_one writes it; message(exercise,
    mistake) words the failures (default failure_message)."""
    out: dict[str, CellResult] = {}
    message = message or failure_message
    for ex, points in cells.items():
        mistake = answers[ex]
        score = points if mistake is None else 0.0
        out[ex] = CellResult(score=score, max_score=points, kernel_score=score,
                             recheck="pass" if mistake is None else "fail",
                             message="" if mistake is None else message(ex, mistake),
                             diagnoses=[] if mistake is None else [failure_diagnosis(ex, mistake)] * 2)
    return GradeResult(student=student, assignment=assignment, flags=[], cells=out, status="graded", problems=[],
                       score=sum(c["score"] for c in out.values()), max_score=sum(cells.values()))


def write_class(klass: SyntheticClass, url: str, data_dir: Path, message=None) -> None:
    """The class into the gradebook at `url` and its result files into
    data_dir/results/ (message: as for result_of). The submissions go in as
    bulk inserts of plain rows (nbgrader's objects one by one take half a
    minute for 500 students)."""
    from uuid import uuid4

    from nbgrader.api import Grade, Student, SubmittedAssignment, SubmittedNotebook
    from sqlalchemy import insert

    with gradebook.open_gradebook(url) as gb:
        ids, cells = {}, {}
        for a, exercises in klass.structure.items():
            ids[a] = (gb.update_or_create_assignment(a).id, gb.update_or_create_notebook(a, a).id)
            for ex, points in exercises.items():
                cells[a, ex] = gb.update_or_create_grade_cell(ex, a, a, max_score=points, cell_type="code").id
        students, submissions, notebooks, grades = [], [], [], []
        for student, done in klass.work.items():
            students.append({"id": student})
            for a, answers in done.items():
                sub, nb = uuid4().hex, uuid4().hex
                submissions.append({"id": sub, "assignment_id": ids[a][0], "student_id": student})
                notebooks.append({"id": nb, "assignment_id": sub, "notebook_id": ids[a][1], "flagged": False})
                grades += [{"id": uuid4().hex, "cell_id": cells[a, ex], "notebook_id": nb, "needs_manual_grade": False,
                            "auto_score": points if answers[ex] is None else 0.0}
                           for ex, points in klass.structure[a].items()]
        for table, rows in ((Student, students), (SubmittedAssignment, submissions), (SubmittedNotebook, notebooks),
                            (Grade, grades)):
            if rows:
                gb.db.execute(insert(table.__table__), rows)
        gb.db.commit()
    for student, done in klass.work.items():
        for a, answers in done.items():
            path = result_path(student, a, Path(data_dir) / "results")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(result_of(student, a, klass.structure[a], answers, message)))
