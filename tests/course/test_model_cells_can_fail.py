"""Cells that can fail: every notebook cell that puts the
learner's function inside a whole model and prints whether the logits still
match must print False when that function is wrong. Each cell runs twice in
the namespace of the notebook's setup and solution answers: with the
solution (it prints True) and with a known-wrong function in the learner's
place (it must print False). Notebook 04's cell printed True even for
`return x` while the model ran a path that never called the learner's
apply_rope."""
from __future__ import annotations

import pytest

from autograder import course
from autograder.checks import pitfalls
from autograder.notebook_format import read
from autograder.authoring.gates import exercise_namespace

from ..helpers import run_cell as _run

# (assignment, text the cell prints, the learner's name, a wrong function for it)
CELLS = [
    ("02_rmsnorm", "\"logits equal\"", "rms_norm", pitfalls.rms_norm_wrong_axis),
    ("03_causal_attention", "your attention inside tinylm", "causal_attention", pitfalls.attention_no_scale),
    ("04_rope", "your apply_rope inside tinylm", "apply_rope", lambda x, cos, sin, start_pos=0: x),
    ("05_swiglu", "your forward pass equals tinylm's", "swiglu", pitfalls.swiglu_swapped),
    ("05_swiglu", "your forward pass equals tinylm's", "pre_norm_block", pitfalls.post_norm_block),
    ("07_gqa", "your repeat_kv inside tinylm", "repeat_kv", lambda x, n_rep: x.repeat(1, n_rep, 1, 1)),  # tiles
]


def _cell(assignment: str, printed: str) -> str:
    cells = [c.source for c in read(course.source_notebook(assignment)).cells
             if c.cell_type == "code" and printed in c.source]
    assert len(cells) == 1, f"{assignment}: {len(cells)} cells print {printed!r}"
    return cells[0]


@pytest.mark.parametrize("assignment, printed, name, wrong", CELLS, ids=[f"{c[0]}:{c[2]}" for c in CELLS])
def test_a_wrong_function_inside_the_model_prints_false(assignment, printed, name, wrong):
    source = _cell(assignment, printed)
    right = _run(source, exercise_namespace(assignment))
    assert right.count("True") == 1 and "False" not in right, right
    ns = exercise_namespace(assignment)
    assert name in ns, f"{assignment}: the answers define no {name}"
    ns[name] = wrong
    wrong_output = _run(source, ns)
    assert "False" in wrong_output and "True" not in wrong_output, (
        f"{assignment}: the cell still reports a match with a wrong {name}:\n{wrong_output}")
    assert "CheckFailed" in wrong_output and "Likely bug:" in wrong_output, (
        f"{assignment}: a False is not a check that names the owner:\n{wrong_output}")


def test_every_cell_that_compares_a_model_is_gated():
    """A new "inside the model" cell must get a row in CELLS."""
    gated = {(a, p) for a, p, *_ in CELLS}
    for assignment in course.assignments():
        for cell in read(course.source_notebook(assignment)).cells:
            if cell.cell_type == "code" and "inside tinylm" in cell.source:
                assert any(a == assignment and p in cell.source for a, p in gated), (assignment, cell.source[:80])


def test_the_10_batching_row_fails_for_a_mean_of_per_batch_means():
    """Notebook 10 regroups the windows to show that the learner's evaluate does not depend on the batching. With
    batches of one size (16, then 5, of 240 windows) a mean of per-batch means equals the token-weighted mean, so
    the row could not fail; with batches of 1, 2, 3, ... windows it must."""
    import math

    import torch
    import torch.nn.functional as F

    import tinylm
    from tinylm.presets import NB09_MODEL

    @torch.no_grad()
    def per_batch_means(model, batches, bytes_per_token=1.0):
        means = [F.cross_entropy(model(x).flatten(0, 1), y.flatten(), ignore_index=-100).item() for x, y in batches]
        loss = sum(means) / len(means)
        return {"loss": loss, "perplexity": math.exp(loss), "bits_per_byte": loss / math.log(2) / bytes_per_token}

    torch.manual_seed(0)
    model = tinylm.Transformer(NB09_MODEL).eval()
    with torch.no_grad():
        model.norm.weight.mul_(20.0)  # confident and often wrong: the windows' losses spread widely
    source = _cell("10_perplexity", "instead of 16 give the same loss")
    ns = exercise_namespace("10_perplexity")
    ns.update(model=model, corpus=tinylm.course_corpus(), GRADING=True)
    right = _run(source, ns)
    assert "tinylm.evaluate agrees: True" in right and "instead of 16 give the same loss: True" in right, right
    ns["evaluate"] = per_batch_means
    wrong = _run(source, ns)
    assert "tinylm.evaluate agrees: True" in wrong, wrong  # batches of 16 windows each: the average looks right
    assert "instead of 16 give the same loss: False" in wrong and "CheckFailed" in wrong, wrong
    # the batching it replaced: equal batches of 5 hide the per-batch mean
    val = ns["val"]
    equal = per_batch_means(model, ns["windows"](val, ns["T"], 5))["loss"]
    assert math.isclose(equal, per_batch_means(model, ns["windows"](val, ns["T"], 16))["loss"], rel_tol=1e-5)
