"""Two bugs that shipped in public projects, as notebook 04's and 05's checks see them: head_dim set apart from
d_model // n_heads, and a checkpoint stored in the interleaved RoPE layout loaded without reordering q/k rows."""
from __future__ import annotations

import pytest
import torch

import tinylm
from autograder import checks
from autograder.checks.accounting import check_param_counts
from autograder.checks.rope_layouts import evens_then_odds, meta_rotate

from ..helpers import check_failure, diagnosis_texts
from .test_framework_check import _decoder_classes, _gguf_rows_to_half

QUOTIENT = "head_dim taken as d_model // n_heads"


# -- notebook 05: head_dim set apart -----------------------------------------------------------------------------
def _attention(change=("", "")):
    return _decoder_classes(change)["Attention"]


def test_the_solution_passes_with_head_dim_apart_at_other_sizes():
    assert check_failure(checks.check_attention_module, _attention(), seed=95, d_model=24, n_heads=3, seq=7, batch=3,
                         head_dim=10) is None


def test_projections_sized_by_the_quotient_are_named_from_their_shapes():
    wrong = _attention(("self.o_proj = nn.Linear(config.n_heads * config.head_dim, config.d_model, bias=False)",
                        "self.o_proj = nn.Linear(config.d_model, config.d_model, bias=False)"))
    text = diagnosis_texts(check_failure(checks.check_attention_module, wrong))
    # default sizes: d_model 32, 4 heads, head_dim 12 (32 // 4 = 8): o_proj [32, 32] where tinylm's is [32, 48]
    assert QUOTIENT in text and "o_proj.weight is [32, 32], tinylm's is [32, 48]" in text


def test_a_forward_pass_that_assumes_the_quotient_is_named_because_only_that_regime_fails():
    wrong = _attention(("y = y.transpose(1, 2).reshape(B, T, self.n_heads * self.head_dim)",
                        "y = y.transpose(1, 2).reshape(B, T, x.shape[-1])"))
    err = check_failure(checks.check_attention_module, wrong)
    assert QUOTIENT in diagnosis_texts(err) and "fails only with head_dim = 12" in diagnosis_texts(err)


def test_another_bug_is_not_blamed_on_head_dim():
    wrong = _attention(("q, k = apply_rope(q, cos, sin, start_pos), apply_rope(k, cos, sin, start_pos)", "pass"))
    text = diagnosis_texts(check_failure(checks.check_attention_module, wrong))
    assert "RoPE missing" in text and QUOTIENT not in text


def _param_counts(head_dim_of, q_and_o_of=None):
    def param_counts(c):
        d, L, hd = c.d_model, c.n_layers, head_dim_of(c)
        q_and_o = q_and_o_of(c) if q_and_o_of else 2 * d * c.n_heads * hd
        return {"embedding": c.vocab_size * d, "attention": L * (q_and_o + 2 * d * c.n_kv_heads * hd),
                "mlp": L * 3 * d * c.d_ff, "norms": (2 * L + 1) * d, "lm_head": 0 if c.tie_embeddings else c.vocab_size * d}
    return param_counts


def test_param_counts_with_head_dim_apart():
    from autograder.checks.accounting import HEAD_DIM_PARAM_CASES
    assert check_failure(check_param_counts, _param_counts(lambda c: c.head_dim), cases=HEAD_DIM_PARAM_CASES) is None
    for wrong in (_param_counts(lambda c: c.d_model // c.n_heads),
                  _param_counts(lambda c: c.head_dim, lambda c: 2 * c.d_model ** 2)):
        assert QUOTIENT in diagnosis_texts(check_failure(check_param_counts, wrong, cases=HEAD_DIM_PARAM_CASES))
        # the usual configs cannot tell: head_dim is d_model // n_heads there
        assert check_failure(check_param_counts, wrong) is None


def test_every_projection_d_model_square_is_named_for_what_each_set_of_configs_shows():
    def square(c):
        d, L = c.d_model, c.n_layers
        return {"embedding": c.vocab_size * d, "attention": 4 * L * d * d, "mlp": L * 3 * d * c.d_ff,
                "norms": (2 * L + 1) * d, "lm_head": 0 if c.tie_embeddings else c.vocab_size * d}
    from autograder.checks.accounting import HEAD_DIM_PARAM_CASES
    usual = diagnosis_texts(check_failure(check_param_counts, square))
    assert "k_proj and v_proj sized like q_proj" in usual and QUOTIENT not in usual
    apart = diagnosis_texts(check_failure(check_param_counts, square, cases=HEAD_DIM_PARAM_CASES))
    assert QUOTIENT in apart and "k_proj and v_proj sized like q_proj" in apart


def test_the_head_dim_param_cases_are_counted_by_hand():
    from autograder.checks.accounting import HEAD_DIM_PARAM_CASES, config_parameters
    (_, small), (_, gemma) = HEAD_DIM_PARAM_CASES
    assert (small.d_model, small.n_heads, small.n_kv_heads, small.head_dim, small.n_layers) == (40, 4, 2, 16, 2)
    # q and o: 2 · 40 · 64; k and v: 2 · 40 · 32; per block, two blocks
    assert config_parameters(small)["attention"] == 2 * (2 * 40 * 64 + 2 * 40 * 32)
    # Gemma 7B: four 3072 × 4096 projections per block (16 · 256 = 4096), 28 blocks
    assert config_parameters(gemma)["attention"] == 28 * 4 * 3072 * 4096


# -- notebook 04: a checkpoint in the interleaved layout ---------------------------------------------------------
def test_the_checks_interleaved_rotation_is_the_half_rotation_of_permuted_features():
    x = torch.randn(2, 3, 5, 8, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    cos, sin = tinylm.rope_cache(8, 16)
    P = evens_then_odds(8)
    torch.testing.assert_close(meta_rotate(x, 4)[..., P], tinylm.apply_rope(x[..., P], cos.double(), sin.double(), 4))


def _by_head(w, n_heads, order_of):
    rows = w.shape[0]
    hd = rows // n_heads
    return w[torch.cat([h * hd + order_of(hd) for h in range(n_heads)])]


WRONG_REORDERINGS = {
    "whole matrix": lambda w, n: w[evens_then_odds(w.shape[0])],
    "inverse permutation": lambda w, n: _by_head(w, n, lambda hd: torch.argsort(evens_then_odds(hd))),
    "no permutation": lambda w, n: w.clone(),
    "columns": lambda w, n: w[:, evens_then_odds(w.shape[1])],
}


@pytest.mark.parametrize("words", WRONG_REORDERINGS)
def test_each_wrong_reordering_is_named(words):
    err = check_failure(checks.check_interleaved_to_half, WRONG_REORDERINGS[words])
    assert err is not None and words in " ".join(err.diagnosis.to_dict()["likely_bugs"])


def test_an_unknown_reordering_is_said_as_measured_not_as_a_cause():
    reversed_heads = lambda w, n: _by_head(w, n, lambda hd: torch.arange(hd).flip(0))  # noqa: E731
    d = check_failure(checks.check_interleaved_to_half, reversed_heads).diagnosis.to_dict()
    assert not d["likely_bugs"] and any("come from rows [7, 6, 5" in f for f in d["facts"])


def _convert(q=True, k=True, k_heads=None, v=False, o=False):
    def meta_to_hf_attention(wq, wk, wv, wo, n_heads, n_kv_heads):
        return (_gguf_rows_to_half(wq, n_heads) if q else wq,
                _gguf_rows_to_half(wk, k_heads or n_kv_heads) if k else wk,
                _gguf_rows_to_half(wv, n_kv_heads) if v else wv,
                _gguf_rows_to_half(wo, n_heads) if o else wo)
    return meta_to_hf_attention


@pytest.mark.parametrize("convert, words", [
    (_convert(k=False), "forgetting k"),
    (_convert(q=False), "q not permuted"),
    (_convert(k_heads=4), "instead of n_kv_heads = 2"),
    (_convert(v=True), "v permuted too"),
    (_convert(o=True), "o permuted too"),
], ids=["k forgotten", "q forgotten", "k with n_heads", "v too", "o too"])
def test_each_wrong_conversion_is_named_and_fails_the_attention_row(convert, words):
    err = check_failure(checks.check_meta_to_hf_attention, convert)
    assert err is not None and words in " ".join(err.diagnosis.to_dict()["likely_bugs"])
    assert any(name.startswith("attention with the half rotation") for name in err.diagnosis.to_dict()["failed_rows"])
