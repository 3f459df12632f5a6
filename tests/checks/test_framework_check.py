"""The check framework itself: correct code passes, wrong code fails with a
message, learner exceptions become one short message, and nothing prints
an expected tensor."""
from __future__ import annotations

import linecache
import math

import pytest
import torch
import torch.nn.functional as F

import tinylm
from autograder import checks
from autograder.checks import CheckFailed
from autograder.checks.core import independent_copy


from ..helpers import ACCOUNTING_CHECK_MODULE, PART_2_CHECK_MODULES, assert_stub_gets_not_implemented_message, run_as_cell


def _cell(source: str) -> dict:
    """Execute `source` as a notebook cell would: in a fresh namespace."""
    ns: dict = {"__name__": "cell"}
    exec(compile(source, "<cell>", "exec"), ns)
    return ns


def _last_line(check, fn) -> str:
    with pytest.raises(CheckFailed) as err:
        check(fn)
    return str(err.value).strip().splitlines()[-1]


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

    with pytest.raises(CheckFailed) as err:
        checks.check_causal_attention(attention)
    # the fitted scale is a measurement (one scale fits several ways of writing it), said as one
    fitted = [line for line in str(err.value).splitlines() if "scaled by" in line]
    assert len(fitted) == 1 and fitted[0].strip().startswith("Measured:"), str(err.value)
    assert "scaled by 1/2.65 = 1/sqrt(T) = 1/sqrt(7) (the sequence length, q's and k's alike" in fitted[0]  # q_len = kv_len in the probe
    assert "expected 1/sqrt(head_dim)" in fitted[0]


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


def test_a_cause_measured_with_its_places_is_said_once_not_again_by_its_variant():
    from autograder.checks.core import Check

    def run(states):
        chk = Check("f", expects="a tensor")
        chk.compare("a", torch.ones(3) * 2, torch.ones(3), variants={"doubled": torch.ones(3) * 2,
                                                                     "another cause": torch.ones(3) * 2})
        chk.diagnose("doubled: your a and b are twice the reference", states=states)
        return chk.diagnosis().likely_bugs
    assert set(run(["doubled"])) == {"another cause", "doubled: your a and b are twice the reference"}
    assert "doubled" in run([]), "a variant no line states is said as it is"


def test_one_cause_measured_at_several_places_is_one_line_naming_each():
    from autograder.checks.core import Check

    chk = Check("f", expects="a tensor")
    chk.diagnose("another cause")
    words = lambda places: f"off by one at {' and '.join(places)}"  # noqa: E731
    for place in ("row a", "row b", "row a"):
        chk.diagnose_at("off by one", place, words, states=["the variant off by one"])
    assert chk.diagnoses == ["another cause", "off by one at row a and row b"], "in the first one's place, each once"
    assert chk.said_by["the variant off by one"] == "off by one at row a and row b"


def test_what_the_framework_reads_from_a_row_a_named_variant_reproduces_is_said_by_the_variant():
    from autograder.checks.core import Check

    def run(second_row_too):
        chk = Check("f", expects="a tensor")
        x = torch.arange(6.0).reshape(2, 3)
        chk.compare("a", x.T.contiguous(), x, variants={"transposed: return x, not x.T": x.T.contiguous()})
        if second_row_too:  # the same reading of a row no variant reproduces
            chk.compare("b", x.T.contiguous(), x)
        return chk.diagnosis().likely_bugs
    alone = run(False)
    assert alone == ["transposed: return x, not x.T"], "the axes the framework read are the variant's cause, said once"
    both = run(True)
    assert "transposed: return x, not x.T" in both and len(both) == 2, "a reading of another row is still said"


def test_a_variant_that_two_causes_give_alike_is_said_as_candidates_not_as_a_likely_bug():
    from autograder.checks.framework.check import CandidatesVariant, Check

    alike = CandidatesVariant("doubled (measured); candidates: a product with 2, or the sum of two equal terms")
    chk = Check("f", expects="a tensor")
    chk.compare("a", torch.ones(3) * 2, torch.ones(3), variants={alike: torch.ones(3) * 2})
    record = chk.diagnosis()
    assert record.candidates == [alike] and record.likely_bugs == []
    with pytest.raises(ValueError, match="candidates"):
        CandidatesVariant("doubled: a product with 2")  # a text that names one cause is no candidate
