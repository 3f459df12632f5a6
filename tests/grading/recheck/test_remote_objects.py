"""The recheck's remote objects: the check's model and KV cache stay
in the trusted process; the learner's code in the jailed child reaches them
only through calls that run there, with the child's gradient mode, and only
through the names in autograder.grading.recheck.protocol.REMOTE_NAMES. A training step is the
exception: its model and optimizer travel to the child with their state."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from autograder import course, specimens
from autograder.grading.recheck.protocol import REMOTE_NAMES

pytestmark = [pytest.mark.grader, pytest.mark.slow,
              pytest.mark.skipif("08_sampling" not in course.assignments(), reason="notebook 08 is not built")]
A = "08_sampling"


def recheck(tmp_path, answers: dict[str, str], assignment: str = A) -> dict:
    nb = specimens.notebook(assignment, {**specimens.solution_answers(assignment), **answers})
    path = tmp_path / f"{assignment}.ipynb"
    path.write_text(json.dumps(nb))
    out = subprocess.run([sys.executable, "-m", "autograder.grading.recheck", assignment, str(path)], cwd=course.ROOT,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def with_generate(old: str, new: str) -> dict[str, str]:
    source = specimens.solution_answers(A)["generate"]
    assert old in source, "the solution's generate changed: update this test"
    return {"generate": source.replace(old, new)}


def test_the_checks_model_runs_in_the_trusted_process_with_the_childs_grad_mode(tmp_path):
    """Decoding under torch.enable_grad() in the learner's process must show in
    the parent's forward hooks: the grad mode travels with each call."""
    results = recheck(tmp_path, with_generate("with torch.no_grad():", "with torch.enable_grad():"))
    assert results["check_generate"]["status"] == "fail"
    assert "no autograd graph" in results["check_generate"]["message"]
    assert results["check_sample_next"]["status"] == "pass"  # the other exercises are untouched


def test_names_outside_the_allowed_set_fail_and_say_why(tmp_path):
    results = recheck(tmp_path, with_generate("    was_training = model.training\n",
                                              "    was_training = model.training\n    _ = model.lm_head\n"))
    r = results["check_generate"]
    assert r["status"] == "fail" and ".lm_head" in r["message"] and "hand regrade" in r["message"]
    assert "lm_head" not in REMOTE_NAMES


def test_the_learner_cannot_set_attributes_on_the_checks_model(tmp_path):
    results = recheck(tmp_path, with_generate("    model.eval() ", "    model.training = False; model.eval() "))
    assert results["check_generate"]["status"] == "fail"


def test_a_training_step_carries_gradients_optimizer_state_and_random_state(tmp_path):
    """Two train_step calls in the child: without zero_grad the second step
    must see the first step's gradients (a pickled Parameter drops .grad, so
    the recheck carries it), while the honest step, which needs AdamW's
    moments and the check's dropout masks from step 1, passes."""
    honest = recheck(tmp_path, {}, "09_training")
    assert honest["check_train_step"]["status"] == "pass", honest["check_train_step"]
    source = specimens.solution_answers("09_training")["train_step"]
    assert "optimizer.zero_grad(set_to_none=True)" in source, "the solution's train_step changed: update this test"
    buggy = recheck(tmp_path, {"train_step": source.replace("optimizer.zero_grad(set_to_none=True)", "pass")}, "09_training")
    assert buggy["check_train_step"]["status"] == "fail"
    assert "missing zero_grad" in buggy["check_train_step"]["message"]


def test_gradient_flow_is_judged_where_the_learners_graph_exists(tmp_path):
    """Only plain data crosses back from the child, so "a gradient reaches the
    gain" is answered in the child: the honest RMSNorm keeps its points in the
    recheck, the one that reads self.weight.data loses them there too."""
    source = specimens.solution_answers("02_rmsnorm")["RMSNorm"]
    assert "self.weight, self.eps" in source, "the solution's RMSNorm changed: update this test"
    honest = recheck(tmp_path, {}, "02_rmsnorm")
    assert honest["check_RMSNorm"]["status"] == "pass", honest["check_RMSNorm"]
    cut = recheck(tmp_path, {"RMSNorm": source.replace("self.weight, self.eps", "self.weight.data, self.eps")},
                  "02_rmsnorm")
    assert cut["check_RMSNorm"]["status"] == "fail" and "no gradient reaches self.weight" in cut["check_RMSNorm"]["message"]
    # the input cut off instead: the child answers for the module's arguments too
    assert "rms_norm(x, " in source, "the solution's RMSNorm changed: update this test"
    detached = recheck(tmp_path, {"RMSNorm": source.replace("rms_norm(x, ", "rms_norm(x.detach(), ")}, "02_rmsnorm")
    assert detached["check_RMSNorm"]["status"] == "fail", detached["check_RMSNorm"]
    assert "gives x no gradient" in detached["check_RMSNorm"]["message"]


def test_a_class_refused_as_delegation_still_answers_isinstance(tmp_path):
    """While the learner's Transformer is checked, tinylm.Transformer is a
    stand-in that refuses to be built; the given code's isinstance checks
    against tinylm's classes must still work (the honest 05 passes the recheck)."""
    results = recheck(tmp_path, {}, "05_swiglu")
    assert all(r["status"] == "pass" for r in results.values()), results
