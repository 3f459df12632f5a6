"""framework.calling: what a check hands the learner's code and what the call
must give back (torch settings, flags, inputs written in place, the random
stream), and an answer that hands its exercise to tinylm."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import tinylm
from autograder import checks
from autograder.checks import CheckFailed
from autograder.checks.framework.calling import call_giving_inputs_back


from .test_framework_check import _cell


# -- delegation to tinylm ----------------------------------------------------


DELEGATING_CELLS = [
    ("apply_rope", checks.check_apply_rope,
     "import tinylm\ndef apply_rope(x, cos, sin, start_pos=0):\n    return tinylm.apply_rope(x, cos, sin, start_pos)"),
    ("apply_rope", checks.check_apply_rope, "from tinylm import apply_rope"),
    ("apply_rope", checks.check_apply_rope,
     "def apply_rope(x, cos, sin, start_pos=0):\n    from tinylm.rope import apply_rope as ar\n    return ar(x, cos, sin, start_pos)"),
    ("rms_norm", checks.check_rms_norm, "from tinylm import rms_norm as _r\ndef rms_norm(x, w, eps=1e-6):\n    return _r(x, w, eps)"),
    ("RMSNorm", checks.check_rms_norm_module, "import tinylm\nclass RMSNorm(tinylm.RMSNorm):\n    pass"),
    ("causal_attention", checks.check_causal_attention, "import tinylm\ncausal_attention = tinylm.causal_attention"),
]


@pytest.mark.parametrize("name, check, source", DELEGATING_CELLS, ids=[s.splitlines()[-1].strip() for _, _, s in DELEGATING_CELLS])
def test_an_answer_that_hands_the_exercise_to_tinylm_fails(name, check, source):
    with pytest.raises(CheckFailed) as err:
        check(_cell(source)[name])
    assert f"tinylm.{name}: write it yourself" in str(err.value)
    rope_module = sys.modules["tinylm.rope"]
    assert tinylm.apply_rope.__name__ == "apply_rope" and rope_module.apply_rope is tinylm.apply_rope  # restored


def test_using_tinylm_for_a_different_exercise_is_fine(capsys):
    """rotary_attention may call tinylm.causal_attention (the notebook says so)."""
    source = ("import tinylm\ndef rotary_attention(q, k, v, cos, sin, start_pos=0):\n"
              "    rot = lambda t: tinylm.apply_rope(t, cos, sin, start_pos)\n"
              "    return tinylm.causal_attention(rot(q), rot(k), v)")
    checks.check_rotary_attention(_cell(source)["rotary_attention"])
    assert "PASS" in capsys.readouterr().out


def _jailed_child_runs_this_checkout() -> bool:
    """The recheck's child runs `python -I`, which imports the installed
    autograder: in a git worktree that is another checkout's code."""
    import subprocess
    from pathlib import Path

    import autograder
    out = subprocess.run([sys.executable, "-I", "-c", "import autograder; print(autograder.__file__)"],
                         capture_output=True, text=True, cwd="/")
    return out.stdout.strip() == str(Path(autograder.__file__).resolve())


@pytest.mark.slow
@pytest.mark.grader
@pytest.mark.skipif(not _jailed_child_runs_this_checkout(), reason="the jailed child imports another checkout's autograder")
def test_the_out_of_process_recheck_refuses_delegation_too(tmp_path):
    import json
    import subprocess

    from autograder import course
    from autograder import specimens

    assignment = "04_rope"
    answers = specimens.solution_answers(assignment)
    answers["apply_rope"] = answers["apply_rope"] + "\n\nfrom tinylm import apply_rope\n"
    docstring = '    """-> cos, sin: each (max_seq_len, head_dim) float32."""\n'
    assert docstring in answers["rope_cache"], "the solution's rope_cache changed: update this test"
    answers["rope_cache"] = answers["rope_cache"].replace(
        docstring, docstring + "    return tinylm.rope_cache(head_dim, max_seq_len, theta)\n")
    path = tmp_path / f"{assignment}.ipynb"
    path.write_text(json.dumps(specimens.notebook(assignment, answers)))
    out = subprocess.run([sys.executable, "-m", "autograder.grading.recheck", assignment, str(path)], cwd=course.ROOT,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    results = json.loads(out.stdout.strip().splitlines()[-1])
    assert results["check_apply_rope"]["status"] == "fail"
    assert "tinylm.apply_rope: write it yourself" in results["check_apply_rope"]["message"]
    assert results["check_rope_cache"]["status"] == "fail"
    assert "tinylm.rope_cache: write it yourself" in results["check_rope_cache"]["message"]
    assert results["check_rotary_attention"]["status"] == "pass", results  # calls tinylm.causal_attention: allowed


# -- what a call must give back, and what a wrong result measures against the call's sizes ------------------
def _leaves_grad_off(x):
    torch.set_grad_enabled(False)
    return x * 2


def _no_grad_block(x):
    with torch.no_grad():
        return x * 2


def test_a_call_that_leaves_autograd_off_is_named_and_given_back():
    chk = checks.core.Check("double", expects="a tensor")
    chk.call(_leaves_grad_off, torch.ones(3))
    assert torch.is_grad_enabled()  # given back at once: the rest of the check runs as the notebook would
    assert not chk.passed and "set_grad_enabled(False)" in chk.diagnoses[0] and "torch.no_grad()" in chk.diagnoses[0]


def _turns_grad_on(x):
    torch.set_grad_enabled(True)  # "back on for training", whatever the caller had
    return x * 2


@pytest.mark.parametrize("gradients, block, not_said", [
    (checks.framework.calling.WITHOUT, "with torch.no_grad():", "enable_grad"),
    (checks.framework.calling.NEEDS, "with torch.enable_grad():", "no_grad"),
    (checks.framework.calling.CALLERS, "switch nothing by hand", "enable_grad")])
def test_the_fix_for_autograd_left_on_follows_how_the_function_uses_gradients(gradients, block, not_said):
    """A caller under torch.no_grad() whose function turns gradients on: a decoder (computes without gradients) is
    told to decode in a no_grad block, which gives the caller its mode back; a training step to use an enable_grad
    block; a function that leaves the mode to its caller to switch nothing."""
    chk = checks.core.Check("f", expects="a tensor", gradients=gradients)
    with torch.no_grad():
        chk.call(_turns_grad_on, torch.ones(3))
        assert not torch.is_grad_enabled(), "the caller's mode is given back at once"
    said = chk.diagnoses[0]
    assert "switched on where the caller had it off" in said and "False before the call, True after it" in said
    assert block in said and not_said not in said, said


def test_a_call_that_changes_the_default_dtype_is_named_and_given_back():
    def float64_everywhere(x):
        torch.set_default_dtype(torch.float64)
        return x * 2
    chk = checks.core.Check("double", expects="a tensor")
    chk.call(float64_everywhere, torch.ones(3))
    assert torch.get_default_dtype() == torch.float32
    assert not chk.passed and "default dtype at float64" in chk.diagnoses[0] and "dtype=" in chk.diagnoses[0]


def test_a_no_grad_block_gives_everything_back():
    chk = checks.core.Check("double", expects="a tensor")
    chk.call(_no_grad_block, torch.ones(3))
    assert chk.passed and not chk.rows and not chk.diagnoses


def test_frozen_parameters_are_named_and_given_back():
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))

    def measure(net, x):
        net.requires_grad_(False)
        return net(x).sum().item()
    chk = checks.core.Check("measure", expects="a float")
    chk.call(measure, model, torch.ones(2, 3))
    assert all(p.requires_grad for p in model.parameters())
    assert not chk.passed and "4 of the 4 parameters of `net`" in chk.diagnoses[0]
    assert "torch.no_grad()" in chk.diagnoses[0]
    quiet = checks.core.Check("measure", expects="a float")
    quiet.call(lambda net, x: _no_grad_block(net(x)).sum().item(), model, torch.ones(2, 3))
    assert quiet.passed and not quiet.diagnoses


def test_an_input_written_in_place_is_named_by_its_parameter_and_given_back():
    def nll(logits, targets):
        targets[targets < 0] = 0  # the padding made a class, in the caller's tensor
        return F.cross_entropy(logits, targets, reduction="none").sum()
    targets = torch.tensor([1, -100, 2])
    chk = checks.core.Check("nll", expects="a tensor")
    chk.call(nll, torch.randn(3, 4), targets)
    assert targets.tolist() == [1, -100, 2]
    row = next(r for r in chk.rows if r.name == "inputs unchanged")
    assert not row.ok and "`targets` in place" in chk.diagnoses[0]
    nested = checks.core.Check("first", expects="a tensor")
    nested.call(lambda pairs: pairs[0][1].zero_(), [(torch.ones(2), torch.ones(2))])
    assert "`pairs[0][1]`" in nested.diagnoses[0]
    quiet = checks.core.Check("nll", expects="a tensor")
    quiet.call(lambda logits, targets: targets.clamp(min=0), torch.randn(3, 4), targets)
    assert quiet.passed and not quiet.rows


@pytest.mark.parametrize("notebook", ["01", "08", "09"])
def test_a_check_leaves_the_learners_random_stream_as_it_was(notebook):
    # checks draw their own inputs; a seeded training run after them must draw what it would without them
    import contextlib
    import io

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import bench_diagnostics

    setup, answers, checks = bench_diagnostics.notebook_cells(notebook)
    ns: dict = {"__name__": f"rng_{notebook}"}
    with contextlib.redirect_stdout(io.StringIO()):
        for source in [*setup, *answers.values()]:
            exec(source, ns)
        for exercise, source in checks.items():
            torch.manual_seed(0)
            before = torch.get_rng_state()
            exec(source, ns)
            assert torch.equal(torch.get_rng_state(), before), f"the check of {exercise} moved the random stream"


@pytest.mark.filterwarnings("ignore:An output with one or more elements was resized")  # torch's, on the learner's out=
def test_an_input_resized_by_out_is_given_back_its_shape_and_values():
    # torch.cat(..., out=a) resizes the caller's tensor before writing into it; the check must go on reading the
    # tensor the learner was given, as the notebook's caller holds it
    a, b = torch.arange(6.0).reshape(2, 3), torch.ones(2, 3)
    kept = a.clone()

    def writes_out(a, b):
        return torch.cat((b, b), dim=0, out=a).sum()

    written: list[str] = []
    call_giving_inputs_back([("a", a), ("b", b)], lambda: writes_out(a, b), written)
    assert written == ["a"] and a.shape == (2, 3) and torch.equal(a, kept)


# -- watching the learner's frames on a call run again -------------------------------------------


def test_first_line_where_names_the_line_after_which_a_frame_holds_it_and_sets_the_tracer_back():
    from autograder.checks.framework.watch import first_line_where
    namespace: dict = {}
    exec(compile("def shifted(x, start):\n    y = x + 1\n    start = 0\n    return y * start\n", "<learner>", "exec"),
         namespace)
    shifted = namespace["shifted"]
    code = shifted.__code__
    x = torch.ones(3)
    before = sys.gettrace()
    found = first_line_where(shifted, (x, 5), lambda seen: seen is code, lambda frame, event: (
        frame.f_locals["start"] if frame.f_locals.get("start") != 5 else None))
    assert found == (code, 3, 0)  # line 3 rebinds start; line 2 leaves it as passed
    assert sys.gettrace() is before
    assert torch.equal(x, torch.ones(3))
    never = first_line_where(shifted, (x, 5), lambda seen: seen is code, lambda frame, event: None)
    assert never is None


def test_first_line_where_gives_back_an_input_the_call_writes_into_and_swallows_its_error():
    from autograder.checks.framework.watch import first_line_where
    namespace: dict = {}
    exec(compile("def writes(x):\n    x.zero_()\n    raise ValueError('late')\n", "<learner>", "exec"), namespace)
    writes = namespace["writes"]
    x = torch.arange(4.0)
    found = first_line_where(writes, (x,), lambda seen: seen is writes.__code__, lambda frame, event: (
        True if not frame.f_locals["x"].any() else None))
    assert found is not None and found[1] == 2
    assert torch.equal(x, torch.arange(4.0))  # the probe gives back what the call changed
