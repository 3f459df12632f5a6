"""What the recheck says where the notebook kernel's check measured the cause
with a hook or the global random state, neither of which reaches the
learner's jailed process: the recheck measures it from the numbers that come
back, and says no more than they show (a measured fact with its candidates
where two causes give the same numbers)."""
from __future__ import annotations

import pytest

from autograder import course, specimens

from .test_remote_objects import recheck

pytestmark = [pytest.mark.grader, pytest.mark.slow]


def _bugged(assignment: str, edits: dict[str, tuple[str, str]]) -> dict[str, str]:
    answers = specimens.solution_answers(assignment)
    for exercise, (old, new) in edits.items():
        assert old in answers[exercise], f"the solution's {exercise} changed: update this test"
    return {exercise: answers[exercise].replace(old, new) for exercise, (old, new) in edits.items()}


@pytest.mark.skipif("09_training" not in course.assignments(), reason="notebook 09 is not built")
def test_a_step_in_the_mode_it_was_handed_and_an_unused_generator_are_measured(tmp_path):
    results = recheck(tmp_path, _bugged("09_training", {
        "train_step": ("    model.train() ", "    pass "),
        "get_batch": ("(batch_size,), generator=generator)", "(batch_size,))")}), "09_training")
    step = results["check_train_step"]
    assert step["status"] == "fail" and "eval mode left on (measured: your losses and parameters are those of steps " \
        "taken in the mode each step was handed" in step["message"], step["message"]
    batch = results["check_get_batch"]
    assert batch["status"] == "fail", batch
    assert "Candidates: the windows do not depend on the generator" in batch["message"], batch["message"]
    assert "the generator is not used (in this rerun each call starts from the same global random state), or the " \
        "generator is seeded again" in batch["message"]


@pytest.mark.skipif("08_sampling" not in course.assignments(), reason="notebook 08 is not built")
def test_a_generator_without_effect_is_said_with_both_causes(tmp_path):
    results = recheck(tmp_path, _bugged("08_sampling", {"sample_next": ("generator=generator)", ")")}))
    said = results["check_sample_next"]
    assert said["status"] == "fail", said
    assert "`generator` has no effect" in said["message"] and "the generator is not used (this rerun starts every " \
        "call from the same global random state), or it is seeded again inside" in said["message"], said["message"]
    assert "of your own" not in said["message"]


@pytest.mark.skipif("05_swiglu" not in course.assignments(), reason="notebook 05 is not built")
def test_logits_without_the_final_norm_are_measured_with_both_causes(tmp_path):
    results = recheck(tmp_path, _bugged("05_swiglu", {"Transformer": (
        "return tied_logits(self.norm(x), self.lm_head.weight)", "return tied_logits(x, self.lm_head.weight)")}),
        "05_swiglu")
    said = results["check_Transformer"]
    assert said["status"] == "fail", said
    assert "they equal the reference's logits with self.norm left out); candidates: self.norm never ran, or its " \
        "result is not what the head reads" in said["message"], said["message"]
