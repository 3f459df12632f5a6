"""The check framework itself: correct code passes, wrong code fails with a
message, learner exceptions become one short message, and nothing prints
an expected tensor."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import tinylm
from autograder import checks
from autograder.checks import CheckFailed

from .helpers import PART_2_CHECK_MODULES, assert_stub_gets_not_implemented_message


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


def _block(x, attn, mlp, n1, n2):
    x = x + attn(n1(x))
    return x + mlp(n2(x))


# Every check with a correct implementation taken from tinylm (or a few lines
# here): the independent references and tinylm must agree.
CORRECT = [
    (checks.check_embed, (tinylm.embed,)),
    (checks.check_one_hot_embed, (lambda i, w: F.one_hot(i, w.shape[0]).to(w.dtype) @ w,)),
    (checks.check_tied_logits, (tinylm.tied_logits,)),
    (checks.check_tie_weights, (_tie,)),
    (checks.check_rms_norm, (tinylm.rms_norm,)),
    (checks.check_layer_norm, (lambda x, w, b, e: F.layer_norm(x, (x.shape[-1],), w, b, e),)),
    (checks.check_rms_norm_module, (tinylm.RMSNorm,)),
    (checks.check_causal_mask, (tinylm.causal_mask,)),
    (checks.check_split_merge, (_split, _merge)),
    (checks.check_causal_attention, (tinylm.causal_attention,)),
    (checks.check_self_attention, (_mha,)),
    (checks.check_rope_cache, (tinylm.rope_cache,)),
    (checks.check_apply_rope, (tinylm.apply_rope,)),
    (checks.check_rotary_attention, (_rotary,)),
    (checks.check_swiglu, (tinylm.swiglu,)),
    (checks.check_swiglu_hidden, (tinylm.default_d_ff,)),
    (checks.check_pre_norm_block, (_block,)),
    (checks.check_attention_module, (tinylm.Attention,)),
    (checks.check_block, (tinylm.Block,)),
    (checks.check_decoder, (tinylm.Transformer,)),
]


@pytest.mark.parametrize("check, fns", CORRECT, ids=[c.__name__ for c, _ in CORRECT])
def test_tinylm_passes_every_check(check, fns, capsys):
    check(*fns)
    out = capsys.readouterr().out
    assert "PASS" in out and "FAIL" not in out




def test_every_public_check_is_exercised():
    public = {n for n in dir(checks) if n.startswith("check_") and getattr(checks, n).__module__ not in PART_2_CHECK_MODULES}
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
        checks.check_swiglu(lambda x, g, u, d: tinylm.swiglu(x, g, u, d) * 1.01)
    assert "matches none of the known bugs" in str(err.value)


def test_output_never_contains_tensor_values(capsys):
    """Only shapes, flags and max |diff| are printed: no tensor reprs, and no
    more numbers than the table's diff column accounts for."""
    for fn in (lambda x, w, eps=1e-6: x, tinylm.rms_norm):
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
    checks.check_causal_attention(lambda q, k, v: (seen.append(q.shape), tinylm.causal_attention(q, k, v))[1])
    B, H, T, D = seen[0]
    assert len({B, H, T, D}) == 4
    assert math.isclose(1.0, 1.0)
