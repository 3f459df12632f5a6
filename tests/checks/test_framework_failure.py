"""framework.failure: what a failing check shows (its message, the learner's
frames only, the raising call as the last row) and how a failure travels
(pickling, a repeated line kept once, error hints)."""
from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F

from autograder import checks
from autograder.checks import CheckFailed


# -- what a failing check shows ---------------------------------------------------------

def _render(err: CheckFailed) -> str:
    import re
    return re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(err._render_traceback_()))


def test_a_failure_renders_as_its_message_without_the_checks_frames():
    """IPython shows _render_traceback_ instead of a traceback: the
    diagnosis, nothing of autograder/checks; plain Python still gets an
    AssertionError whose text is the whole message."""
    with pytest.raises(CheckFailed) as err:
        checks.check_rms_norm(lambda x, w, eps=1e-6: w * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True)))
    shown = _render(err.value)
    assert "autograder/checks" not in shown and "chk." not in shown and "File " not in shown
    assert shown.startswith("CheckFailed: rms_norm failed") and "Likely bug: eps is ignored" in shown
    assert isinstance(err.value, AssertionError) and str(err.value) in shown


def test_an_error_in_the_learners_code_shows_their_frames_only():
    ns = _cell_like_ipython("def widen(k, n):\n    return k.expand(k.shape[0], k.shape[1] * n, *k.shape[2:])\n"
                            "def gqa_attention(q, k, v):\n    n = q.shape[1] // k.shape[1]\n"
                            "    return F.scaled_dot_product_attention(q, widen(k, n), widen(v, n), is_causal=True)\n")
    with pytest.raises(CheckFailed) as err:
        checks.check_gqa_attention(ns["gqa_attention"])
    shown = _render(err.value)
    assert "raised RuntimeError inside your widen (line 2: `return k.expand(" in str(err.value)
    assert "in gqa_attention" in shown and "in widen" in shown  # the learner's two frames
    assert "autograder" not in shown and "enable_gqa" not in shown  # no check frame, no check source
    assert "Likely bug:" in shown.splitlines()[-1]


def _cell_like_ipython(source: str) -> dict:
    """Execute source as a notebook cell: a pseudo-file linecache knows, so frames show its lines."""
    import linecache
    filename = f"/tmp/ipykernel_4242/{abs(hash(source))}.py"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    ns = {"__name__": "__main__", "torch": torch, "F": F}
    exec(compile(source, filename, "exec"), ns)
    return ns


def test_a_failure_pickles_without_the_learners_frames():
    import pickle
    with pytest.raises(CheckFailed) as err:
        checks.check_causal_attention(lambda q, k, v: q @ k)
    assert err.value.learner_error is not None
    copy = pickle.loads(pickle.dumps(err.value))
    assert str(copy) == str(err.value) and copy.learner_error is None


def test_a_repeated_diagnosis_line_is_kept_once():
    err = CheckFailed("f failed 1 of 2 checks: a.\n  Measured: m\n  Likely bug: b\n  Measured: m\n  Likely bug: b")
    assert str(err).count("Likely bug: b") == 1 and str(err).count("Measured: m") == 1
    assert str(err.with_likely_bug("b")).count("Likely bug: b") == 1
    assert str(err.with_likely_bug("c")).endswith("Likely bug: c")


def test_the_raising_call_is_the_row_and_the_called_with_line(capsys):
    """tied_logits with x @ weight: the square case runs (wrong values), the
    next case raises; the table's last row, the Called-with line and the
    error's numbers are all that second call's."""
    with pytest.raises(CheckFailed) as err:
        checks.check_tied_logits(lambda x, weight: x @ weight)
    table = capsys.readouterr().out
    called = next(line for line in str(err.value).splitlines() if "Called with" in line)
    shapes = re.findall(r"shape (\([^)]*\))", called)
    last_row = table.strip().splitlines()[-1]
    assert "raised RuntimeError" in last_row and last_row.split("  ")[1].strip() == "inputs " + " ".join(shapes)
    first = str(err.value).splitlines()[0]
    m, k = re.search(r"\((\d+)x(\d+) and (\d+)x(\d+)\)", first).groups()[1:3]
    assert int(k) in {int(d) for s in shapes for d in s.strip("()").split(",") if d.strip()}


def test_sizes_named_from_an_error_are_sizes_of_that_call():
    chk = checks.Check("f", expects="x")
    chk.axes = {"seq": 7, "d_ff": 10}

    def f(x):
        raise RuntimeError("shapes (7) and (10) do not match")

    with pytest.raises(CheckFailed) as err:
        chk.call(f, torch.zeros(2, 7))
    assert "Measured: in that error 7 = seq" in str(err.value) and "d_ff" not in str(err.value)


def test_error_hints_name_a_bug_only_when_the_learners_error_matches():
    def f(x):
        raise ValueError("too many values to unpack")

    for pattern, named in ((r"unpack", True), (r"must match the size", False)):
        chk = checks.Check("f", expects="x")
        with pytest.raises(CheckFailed) as err:
            chk.call(f, torch.zeros(2), error_hints=[(pattern, "the bug")])
        assert ("Likely bug: the bug" in str(err.value)) is named


def test_an_error_raised_in_tinylm_is_placed_in_the_learners_function_that_called_it():
    ns = _cell_like_ipython("import tinylm\ndef rotary_attention(q, k, v, cos, sin, start_pos=0):\n"
                            "    return tinylm.causal_attention(q, k.transpose(-2, -1), v)\n")
    with pytest.raises(CheckFailed) as err:
        checks.check_rotary_attention(ns["rotary_attention"])
    assert "inside your rotary_attention (line 3: `return tinylm.causal_attention(" in str(err.value), str(err.value)
    assert "tinylm/" not in _render(err.value)
