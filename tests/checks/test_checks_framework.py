"""The check framework itself: correct code passes, wrong code fails with a
message, learner exceptions become one short message, and nothing prints
an expected tensor."""
from __future__ import annotations

import linecache
import math
import re
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import tinylm
from autograder import checks
from autograder.checks import CheckFailed
from autograder.checks.core import independent_copy


from ..helpers import ACCOUNTING_CHECK_MODULE, PART_2_CHECK_MODULES, assert_stub_gets_not_implemented_message, run_as_cell


def _tie(tok_emb, lm_head):
    lm_head.weight = tok_emb.weight


def _split(x, n):
    B, T, d = x.shape
    return x.view(B, T, n, d // n).transpose(1, 2)  # (B, H, T, hd)


def _merge(y):
    B, H, T, hd = y.shape
    return y.transpose(1, 2).reshape(B, T, H * hd)  # (B, T, d)


def _mha(x, wq, wk, wv, wo, n):
    q, k, v = (_split(F.linear(x, w), n) for w in (wq, wk, wv))
    return F.linear(_merge(tinylm.causal_attention(q, k, v)), wo)


def _rotary(q, k, v, cos, sin, s=0):
    return tinylm.causal_attention(tinylm.apply_rope(q, cos, sin, s), tinylm.apply_rope(k, cos, sin, s), v)


_swiglu, _attention = independent_copy(tinylm.swiglu), independent_copy(tinylm.causal_attention)


class _RMSNorm(torch.nn.Module):
    """A correct RMSNorm module of the test's own (tinylm.RMSNorm itself is
    refused: an answer may not be tinylm's class)."""

    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps, self.weight = eps, torch.nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return tinylm.rms_norm(x, self.weight, self.eps)


def _gguf_rows_to_half(w, n_heads):
    """tinylm's GGUF loader undoes llama.cpp's interleaving of q/k rows: the same conversion, written apart."""
    from tinylm.pretrained import _unpermute_rope_rows
    return torch.from_numpy(_unpermute_rope_rows(w.numpy(), n_heads))


def _meta_to_hf(wq, wk, wv, wo, n_heads, n_kv_heads):
    return _gguf_rows_to_half(wq, n_heads), _gguf_rows_to_half(wk, n_kv_heads), wv, wo


def _block(x, attn, mlp, n1, n2):
    x = x + attn(n1(x))
    return x + mlp(n2(x))


# Every check with a correct implementation taken from tinylm (or a few lines
# here): the independent references and tinylm must agree.
def _decoder_classes(change: tuple[str, str] = ("", "")) -> dict:
    """Notebook 05's solution modules, executed from its source file (tinylm's
    own Attention, Block and Transformer would be refused as delegation);
    change: (old, new) text replaced in them, a planted mistake."""
    from autograder.authoring.build import source_cells
    from autograder.course import ROOT
    cells = {c.metadata.get("nbgrader", {}).get("grade_id"): c.source
             for c in source_cells(ROOT / "autograder" / "authoring" / "notebook_src" / "05_swiglu.py")}
    ns = {"__name__": "decoder_classes"}
    for gid in ("setup", "swiglu", "Transformer"):
        source = cells[gid].replace(*change) if change[0] else cells[gid]
        assert gid != "Transformer" or source != cells[gid] or not change[0]
        filename = f"<05:{gid}>"  # its lines kept, as IPython keeps a cell's: a located line shows its code
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        exec(compile(source, filename, "exec"), ns)
    return ns


_DECODER = _decoder_classes()

CORRECT = [
    (checks.check_embed, (independent_copy(tinylm.embed),)),
    (checks.check_one_hot_embed, (lambda i, w: F.one_hot(i, w.shape[0]).to(w.dtype) @ w,)),
    (checks.check_tied_logits, (independent_copy(tinylm.tied_logits),)),
    (checks.check_tie_weights, (_tie,)),
    (checks.check_rms_norm, (independent_copy(tinylm.rms_norm),)),
    (checks.check_layer_norm, (lambda x, w, b, e: F.layer_norm(x, (x.shape[-1],), w, b, e),)),
    (checks.check_rms_norm_module, (_RMSNorm,)),
    (checks.check_causal_mask, (independent_copy(tinylm.causal_mask),)),
    (checks.check_split_merge, (_split, _merge)),
    (checks.check_causal_attention, (independent_copy(tinylm.causal_attention),)),
    (checks.check_self_attention, (_mha,)),
    (checks.check_rope_cache, (independent_copy(tinylm.rope_cache),)),
    (checks.check_apply_rope, (independent_copy(tinylm.apply_rope),)),
    (checks.check_rotary_attention, (_rotary,)),
    (checks.check_interleaved_to_half, (_gguf_rows_to_half,)),
    (checks.check_meta_to_hf_attention, (_meta_to_hf,)),
    (checks.check_swiglu, (independent_copy(tinylm.swiglu),)),
    (checks.check_swiglu_hidden, (tinylm.default_d_ff,)),
    (checks.check_pre_norm_block, (_block,)),
    (checks.check_attention_module, (_DECODER["Attention"],)),
    (checks.check_block, (_DECODER["Block"],)),
    (checks.check_decoder, (_DECODER["Transformer"],)),
]


@pytest.mark.parametrize("check, fns", CORRECT, ids=[c.__name__ for c, _ in CORRECT])
def test_tinylm_passes_every_check(check, fns, capsys):
    check(*fns)
    out = capsys.readouterr().out
    assert "PASS" in out and "FAIL" not in out




def test_every_public_check_is_exercised():
    public = {n for n in dir(checks) if n.startswith("check_")
              and getattr(checks, n).__module__ not in PART_2_CHECK_MODULES | {ACCOUNTING_CHECK_MODULE}}
    assert public == {c.__name__ for c, _ in CORRECT}


@pytest.mark.parametrize("check, fns", CORRECT, ids=[c.__name__ for c, _ in CORRECT])
def test_stub_gives_a_short_not_implemented_message(check, fns):
    assert_stub_gets_not_implemented_message(check, len(fns))


def test_learner_exception_names_function_and_expectation():
    def bad_attention(q, k, v):
        return q @ k  # shape error: k is not transposed

    with pytest.raises(CheckFailed) as err:
        checks.check_causal_attention(bad_attention)
    msg = str(err.value)
    assert msg.startswith("causal_attention:") and "raised RuntimeError" in msg and "should return" in msg
    assert "line" in msg and "q @ k" in msg  # points at the learner's line


def test_wrong_return_type_and_non_callable():
    with pytest.raises(CheckFailed, match="missing `return`"):
        checks.check_rms_norm(lambda x, w, eps=1e-6: None)
    with pytest.raises(CheckFailed, match="not a function"):
        checks.check_rms_norm(None)


def test_unknown_bug_still_fails_without_a_false_diagnosis():
    with pytest.raises(CheckFailed) as err:
        checks.check_swiglu(lambda x, g, u, d: _swiglu(x, g, u, d) * 1.01)
    message = str(err.value)
    assert "Likely bug" not in message and "matches none of the known bugs" not in message


def test_output_never_contains_tensor_values(capsys):
    """Only shapes, flags and max |diff| are printed: no tensor reprs, and no
    more numbers than the table's diff column accounts for."""
    for fn in (lambda x, w, eps=1e-6: x, independent_copy(tinylm.rms_norm)):
        try:
            checks.check_rms_norm(fn)
        except CheckFailed as err:
            print(err)
    out = capsys.readouterr().out
    assert "tensor(" not in out and "[[" not in out
    floats = [t for t in out.replace(",", " ").split() if "." in t and t.replace(".", "").replace("e", "").replace("-", "").replace("+", "").isdigit()]
    assert len(floats) <= 12, floats  # the max|diff| cells of two three-row tables (and nothing else)


def test_wrong_dtype_is_a_failure_with_its_own_diagnosis():
    def no_cast_back(x, weight, eps=1e-6):
        x32 = x.float()
        return weight * x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)

    with pytest.raises(CheckFailed) as err:
        checks.check_rms_norm(no_cast_back)
    assert "cast it back to x.dtype" in str(err.value)


def test_variant_needs_to_explain_the_most_cases():
    """A wrong variant that coincides with the output on one degenerate case
    is outvoted by the one that explains every failing case."""
    def strict(q_len, kv_len=None):
        kv_len = q_len if kv_len is None else kv_len
        return torch.ones(q_len, kv_len, dtype=torch.bool).tril(kv_len - q_len - 1)

    with pytest.raises(CheckFailed) as err:
        checks.check_causal_mask(strict)
    assert "mask off by one" in str(err.value) and "inverted" not in str(err.value)


def test_inputs_have_all_dimensions_different():
    """Axis mix-ups cannot pass when batch, heads, seq and head_dim differ."""
    seen = []
    checks.check_causal_attention(lambda q, k, v: (seen.append(q.shape), _attention(q, k, v))[1])
    B, H, T, D = seen[0]
    assert len({B, H, T, D}) == 4
    assert math.isclose(1.0, 1.0)


# -- delegation to tinylm ----------------------------------------------------

def _cell(source: str) -> dict:
    """Execute `source` as a notebook cell would: in a fresh namespace."""
    ns: dict = {"__name__": "cell"}
    exec(compile(source, "<cell>", "exec"), ns)
    return ns


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


# -- upstream attribution, pass hooks, reporting --------------------------------

def test_a_later_exercise_names_the_broken_earlier_answer():
    """self_attention calling a wrong causal_attention: the message says to
    fix causal_attention first, not that self_attention is wrong."""
    ns = _cell("import math, torch\nimport torch.nn.functional as F\n"
               "def causal_attention(q, k, v):\n"
               "    return (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).softmax(-1) @ v  # no mask\n"
               "def self_attention(x, w_q, w_k, w_v, w_o, n_heads):\n"
               "    B, T, d = x.shape\n"
               "    q, k, v = (F.linear(x, w).view(B, T, n_heads, -1).transpose(1, 2) for w in (w_q, w_k, w_v))\n"
               "    return F.linear(causal_attention(q, k, v).transpose(1, 2).reshape(B, T, d), w_o)\n")
    with pytest.raises(CheckFailed) as err:
        checks.check_self_attention(ns["self_attention"])
    last = str(err.value).strip().splitlines()[-1]
    assert "`causal_attention` (exercise 3) fails its own check; fix it first" in last
    assert ns["causal_attention"].__name__ == "causal_attention"  # the learner's own, put back after the probe


def test_pass_hooks_get_the_learners_function_and_cannot_break_the_check(capsys):
    from autograder.checks import core

    seen = []

    def broken_hook(subject):
        raise RuntimeError("disk full")

    registered = list(core.PASS_HOOKS)  # answers.record: restored after, for the tests that follow
    core.PASS_HOOKS[:] = [seen.append, broken_hook]
    try:
        fn = independent_copy(tinylm.rms_norm)
        checks.check_rms_norm(fn)
    finally:
        core.PASS_HOOKS[:] = registered
    assert seen == [fn]
    out = capsys.readouterr().out
    assert "PASS rms_norm" in out and "disk full" in out and len(out.strip().splitlines()[-1]) < 120


def test_no_nan_in_rows_with_masked_entries(capsys):
    chk = checks.Check("top_k_filter")
    want = torch.tensor([[1.0, float("-inf"), 0.5]])
    assert chk.compare("same -inf pattern", want.clone(), want)
    assert not chk.compare("different -inf pattern", torch.tensor([[1.0, 2.0, 0.5]]), want)
    chk._print_table()
    out = capsys.readouterr().out
    assert "nan" not in out and "0.00e+00" in out


def test_a_partial_match_never_produces_a_name():
    """A variant that reproduces one failing row but not another is not named."""
    chk = checks.Check("f")
    want = torch.zeros(3)
    chk.compare("a", torch.ones(3), want, variants={"adds one": lambda: want + 1})
    chk.compare("b", torch.full((3,), 2.0), want, variants={"adds one": lambda: want + 1})
    assert chk.named_variants() == []
    chk2 = checks.Check("f")
    chk2.compare("a", torch.ones(3), want, variants={"adds one": lambda: want + 1, "a": lambda: want + 2})
    assert chk2.named_variants() == ["adds one"]


# -- measurement helpers and the examples -------------------------------

def test_measurement_helpers_measure():
    from torch import nn

    from autograder.checks import core

    w = torch.rand(2, 3, 4, 5).softmax(1)                      # sums to 1 over axis 1 only
    assert core.sums_to_one_axes(w) == [1]
    want = torch.randn(10, dtype=torch.float64)
    c, residual = core.fit_scale(want / math.sqrt(48), want)
    assert residual < 1e-12 and core.describe_factor(c, {"1/sqrt(48)": 1 / math.sqrt(48)}) == "1/6.93 = 1/sqrt(48)"
    assert core.identify_activation(torch.relu) == "ReLU" and core.identify_activation(F.silu).startswith("SiLU")
    assert core.identify_activation(lambda a: a ** 3) is None
    x = torch.randn(3, 6)
    assert core.permutation_of(x.flip(-1), x) and not core.permutation_of(x, x) and not core.permutation_of(x + 1, x)
    assert core.python_number_problem(1.5, float) is None and core.python_number_problem(3, int) is None
    assert "call .item()" in core.python_number_problem(torch.tensor(1.5), float)
    assert core.python_number_problem(True, int) is not None

    class Plain(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.ones(3)

    assert "not an nn.Parameter" in core.parameter_problems(Plain(), "weight")
    assert core.parameter_problems(nn.Linear(2, 2), "weight") is None
    p = nn.Parameter(torch.ones(3))
    assert core.gradient_reaches(p * 2, p) and not core.gradient_reaches(p.detach() * 2, p)


def _last_line(check, fn) -> str:
    with pytest.raises(CheckFailed) as err:
        check(fn)
    return str(err.value).strip().splitlines()[-1]


def test_softmax_over_the_heads_is_named_by_the_axis_not_as_a_future_leak():
    def attention(q, k, v):
        s = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        s = s.masked_fill(~torch.ones(s.shape[-2:], dtype=torch.bool).tril(k.shape[-2] - q.shape[-2]), float("-inf"))
        return s.softmax(dim=1) @ v

    last = _last_line(checks.check_causal_attention, attention)
    assert "sum to 1 over axis 1 (heads), not over the keys" in last and "future" not in last


def test_a_fitted_softmax_temperature_is_reported_with_numbers():
    def attention(q, k, v):
        s = (q @ k.transpose(-2, -1)) / math.sqrt(k.shape[-2])   # sqrt of the sequence length
        s = s.masked_fill(~torch.ones(s.shape[-2:], dtype=torch.bool).tril(k.shape[-2] - q.shape[-2]), float("-inf"))
        return s.softmax(dim=-1) @ v

    last = _last_line(checks.check_causal_attention, attention)
    assert "scaled by 1/2.65 = 1/sqrt(kv_len) = 1/sqrt(7)" in last  # the first table row: T=7 and "expected 1/sqrt(head_dim)" in last


def test_a_gain_stored_as_a_plain_tensor_is_not_called_initialised_wrongly():
    class RMSNorm(torch.nn.Module):
        def __init__(self, dim, eps=1e-6):
            super().__init__()
            self.eps, self.weight = eps, torch.ones(dim)

        def forward(self, x):
            return tinylm.rms_norm(x, self.weight, self.eps)

    with pytest.raises(CheckFailed) as err:
        checks.check_rms_norm_module(RMSNorm)
    assert "not an nn.Parameter" in str(err.value) and "initialised" not in str(err.value)


def test_a_gain_used_through_data_fails_for_want_of_a_gradient():
    class RMSNorm(_RMSNorm):
        def forward(self, x):
            return tinylm.rms_norm(x, self.weight.data, self.eps)

    assert "no gradient reaches self.weight" in _last_line(checks.check_rms_norm_module, RMSNorm)


class _RMSNormEpsBuffer(_RMSNorm):
    def __init__(self, dim, eps=1e-6):
        super().__init__(dim, eps)
        del self.eps
        self.register_buffer("eps", torch.tensor(eps))


def test_eps_registered_as_a_buffer_is_a_key_a_checkpoint_lacks_and_its_line_is_shown():
    with pytest.raises(CheckFailed) as err:
        checks.check_rms_norm_module(_RMSNormEpsBuffer)
    d = err.value.diagnosis
    assert d.failed_rows == ["state_dict keys as tinylm's"]
    assert "'eps'" in d.likely_bugs[0] and "persistent=False" in d.likely_bugs[0]
    assert d.located["code"] == 'self.register_buffer("eps", torch.tensor(eps))'


def test_a_buffer_left_out_of_the_state_dict_passes():
    class RMSNorm(_RMSNorm):
        def __init__(self, dim, eps=1e-6):
            super().__init__(dim, eps)
            del self.eps
            self.register_buffer("eps", torch.tensor(eps), persistent=False)

    checks.check_rms_norm_module(RMSNorm)


def _rms_norm_class(gain: str, device: str = "cpu"):
    """An RMSNorm class written in a notebook whose DEVICE is `device`, its gain made by `gain`."""
    source = (f"class RMSNorm(nn.Module):\n    def __init__(self, dim, eps=1e-6):\n        super().__init__()\n"
              f"        self.eps = eps\n        self.weight = {gain}\n\n"
              f"    def forward(self, x):\n        return tinylm.rms_norm(x, self.weight, self.eps)\n")
    ns = {"torch": torch, "nn": torch.nn, "tinylm": tinylm, "DEVICE": torch.device(device)}
    run_as_cell(ns, source, 2)
    return ns["RMSNorm"]


@pytest.mark.parametrize("gain", ["nn.Parameter(torch.ones(dim))", "nn.Parameter(torch.ones(dim, device=DEVICE))",
                                  "nn.Parameter(torch.ones(dim)).requires_grad_()"])
def test_a_gain_made_on_or_off_the_notebooks_device_passes(gain):
    checks.check_rms_norm_module(_rms_norm_class(gain))


# The notebook's DEVICE naming the meta device stands in for a GPU: there the module the learner built already
# holds the moved gain as a plain tensor, and the diagnosis must still be the move, not "wrap it" or a name.
@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_a_parameter_moved_with_to_device_is_named_as_unregistered_on_another_device_and_its_line_shown(device):
    RMSNorm = _rms_norm_class("nn.Parameter(torch.ones(dim)).to(DEVICE)", device)
    with pytest.raises(CheckFailed) as err:
        checks.check_rms_norm_module(RMSNorm)
    d = err.value.diagnosis
    assert "the same parameters whatever device DEVICE names" in d.failed_rows
    assert "registers no parameter `weight`" in d.likely_bugs[0] and ".to(DEVICE)" in d.likely_bugs[0]
    assert not any("wrap it" in bug for bug in d.likely_bugs)
    assert d.located["code"] == "self.weight = nn.Parameter(torch.ones(dim)).to(DEVICE)"
    assert RMSNorm.__init__.__globals__["DEVICE"] == torch.device(device)  # the notebook's DEVICE given back


def test_a_gain_left_a_plain_tensor_is_named_unwrapped():
    with pytest.raises(CheckFailed) as err:
        checks.check_rms_norm_module(_rms_norm_class("torch.ones(dim)"))
    assert "not an nn.Parameter" in err.value.diagnosis.likely_bugs[0]


@pytest.mark.parametrize("device", ["cpu", "meta"])
@pytest.mark.parametrize("name, check", [("Block", checks.check_block), ("Transformer", checks.check_decoder)])
def test_a_norm_gain_moved_with_to_device_fails_the_modules_built_of_it(name, check, device):
    line = "self.weight = nn.Parameter(torch.ones(dim))"
    classes = _decoder_classes((line, line.replace("(dim))", "(dim)).to(DEVICE)")))
    classes["DEVICE"] = torch.device(device)
    with pytest.raises(CheckFailed) as err:
        check(classes[name])
    d = err.value.diagnosis
    assert "the same parameters whatever device DEVICE names" in d.failed_rows
    assert any("norm.weight` (measured: built with `DEVICE` = cpu it does" in bug for bug in d.likely_bugs)
    assert not any("attribute names" in bug for bug in d.likely_bugs)


@pytest.mark.parametrize("name, check", [("Block", checks.check_block), ("Transformer", checks.check_decoder)])
def test_a_norm_gain_left_a_plain_tensor_is_named_unwrapped(name, check):
    line = "self.weight = nn.Parameter(torch.ones(dim))"
    classes = _decoder_classes((line, "self.weight = torch.ones(dim)"))
    with pytest.raises(CheckFailed) as err:
        check(classes[name])
    assert any("norm.weight` (" in bug and "not an nn.Parameter" in bug for bug in err.value.diagnosis.likely_bugs)


@pytest.mark.parametrize("name, check", [("Attention", checks.check_attention_module), ("Block", checks.check_block),
                                         ("Transformer", checks.check_decoder)])
def test_a_mask_dropped_whenever_a_cache_is_passed_shows_in_a_prefill_through_the_cache(name, check):
    classes = _decoder_classes(("y = causal_attention(q, k, v) ",
                                "y = causal_attention(q, k, v) if cache is None else F.scaled_dot_product_attention(q, k, v) "))
    with pytest.raises(CheckFailed) as err:
        check(classes[name])
    d = err.value.diagnosis
    assert d.regime["text"].startswith("right without a cache, wrong when a") and "prefilled through the cache" in d.regime["text"]
    assert any("the new tokens see the future" in bug for bug in d.likely_bugs)
    if name != "Transformer":  # the whole model's trace is too long to pair line by line
        assert d.located["code"].startswith("y = causal_attention(q, k, v) if cache is None")


def test_a_saved_buffer_in_a_model_module_is_named_with_the_fix():
    class Transformer(_DECODER["Transformer"]):
        def __init__(self, config):
            super().__init__(config)
            self.register_buffer("mask", torch.ones(config.max_seq_len, config.max_seq_len, dtype=torch.bool).tril())

    with pytest.raises(CheckFailed) as err:
        checks.check_decoder(Transformer)
    d = err.value.diagnosis
    assert "'mask'" in d.likely_bugs[0] and "persistent=False" in d.likely_bugs[0]
    assert d.located["code"].startswith('self.register_buffer("mask"')


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


def test_a_result_a_size_times_off_names_the_size():
    x = torch.randn(5, 4, generator=torch.Generator().manual_seed(0)) + 3
    chk = checks.core.Check("total", expects="a scalar")
    got = chk.call(lambda x: x.sum() / x.shape[0], x)
    chk.compare("sum", got, x.sum())
    assert any("exactly 1/5 of the right value" in f and "5 is x.shape[0]" in f for f in chk.facts)
    root = checks.core.Check("total", expects="a scalar")
    root.call(lambda x: x.sum() / math.sqrt(x.shape[0]), x)
    root.compare("sum", x.sum() / math.sqrt(5), x.sum())
    assert any("exactly 1/sqrt(5) = 1/2.236 of" in f and "a division by sqrt(5)" in f for f in root.facts)
    halved = checks.core.Check("total", expects="a scalar")  # a factor 2 has too many causes to be named by a size
    halved.call(lambda x: x.sum() * 2, torch.ones(2, 4))
    halved.compare("sum", torch.ones(2, 4).sum() * 2, torch.ones(2, 4).sum())
    assert len(halved.facts) == 1 and "exactly 2 = 2 times" in halved.facts[0] and "x.shape" not in halved.facts[0]
    other = checks.core.Check("total", expects="a scalar")  # neither a size nor a constant: nothing said
    other.call(lambda x: x.sum() * 1.5, torch.ones(2, 4))
    other.compare("sum", torch.ones(2, 4).sum() * 1.5, torch.ones(2, 4).sum())
    assert not other.facts


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_result_off_by_a_change_of_logarithm_base_names_the_base(dtype):
    nats = torch.rand(3, 6, generator=torch.Generator().manual_seed(0)).to(dtype) + 1
    want = nats / math.log(2)  # bits
    chk = checks.core.Check("to_bits", expects="bits")
    got = chk.call(lambda nats: nats / math.log10(2), nats)  # log10(2) where ln 2 is meant
    chk.compare("bits", got, want)
    said = [f for f in chk.facts if "exactly 2.303 = ln 10 times" in f]
    assert said and "math.log10(2) for math.log(2)" in said[0] and "nats into bits" in said[0]
    scalar = checks.core.Check("to_bits", expects="bits")  # a single number: its ratio is the measurement
    scalar.compare("bits", torch.tensor(3.7 / math.log(2)), torch.tensor(3.7))
    assert any("1.443 = log2(e) = 1/ln 2 times" in f for f in scalar.facts)
    right = checks.core.Check("to_bits", expects="bits")
    assert right.compare("bits", right.call(lambda nats: nats / math.log(2), nats), want) and not right.facts
    uneven = checks.core.Check("to_bits", expects="bits")  # ln 10 on one row only: no factor common to every value
    uneven.compare("bits", torch.cat((want[:1] * math.log(10), want[1:])), want)
    assert not uneven.facts


def test_a_result_with_adjacent_axes_merged_names_the_axes():
    y = torch.randn(2, 3, 5, 4, generator=torch.Generator().manual_seed(0))
    want = y.transpose(1, 2).flatten(2)  # (B, T, d)
    chk = checks.core.Check("merge_heads", expects="(B, T, d)")
    got = chk.call(lambda y: y.transpose(1, 2).flatten(1), y)  # every axis after the batch merged
    chk.compare("merge", got, want)
    said = [d for d in chk.diagnoses if "merged into your axis 1" in d]
    assert said and "expected axes 1 and 2 (sizes 5 = y.shape[2] and 12)" in said[0] and "(2, 60)" in said[0]
    split = checks.core.Check("merge_heads", expects="(B, T, d)")
    split.compare("merge", want.unflatten(-1, (3, 4)), want)
    assert any("axis 2 (size 12) is split into your axes 2 and 3" in d for d in split.diagnoses)
    right = checks.core.Check("merge_heads", expects="(B, T, d)")
    assert right.compare("merge", right.call(lambda y: y.transpose(1, 2).flatten(2), y), want) and not right.diagnoses
    scrambled = checks.core.Check("merge_heads", expects="(B, T, d)")  # the right shape's merge of other axes
    scrambled.compare("merge", y.flatten(1), want)
    assert not scrambled.diagnoses


def test_an_angle_without_pi_is_named_and_other_factors_say_nothing():
    """An angle in turns where radians are meant is 1/(2π) of it; a factor 1.5 is no constant a formula mixes up."""
    radians = torch.tensor([2.1, 0.7, 1.3], dtype=torch.float64)
    turns = checks.core.Check("angles", expects="a tensor")
    turns.compare("angles", radians / (2 * math.pi), radians)
    assert any("1/(2π) times" in f and "turns where radians are meant" in f for f in turns.facts), turns.facts
    for got in (radians * 1.5, radians.clone()):
        quiet = checks.core.Check("angles", expects="a tensor")
        quiet.compare("angles", got, radians)
        assert not quiet.facts and not quiet.diagnoses


def test_a_result_with_its_axes_in_another_order_is_named_with_the_sizes_owners():
    x, weight = torch.randn(2, 3, 5), torch.randn(9, 5)
    chk = checks.core.Check("logits", expects="(B, T, V)")
    got = chk.call(lambda x, weight: weight @ x.transpose(-2, -1), x, weight)
    chk.compare("logits", got, x @ weight.T)
    said = [d for d in chk.diagnoses if "axes in another order" in d]
    assert said and "permute(0, 2, 1)" in said[0] and "size 9 (weight.shape[0]) is at position 1, expected at the last" in said[0]
    right = checks.core.Check("logits", expects="(B, T, V)")
    right.compare("logits", torch.randn(2, 9, 3), x @ weight.T)  # another shape, other values: nothing said
    assert not right.diagnoses


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
