"""Embedding, RMSNorm, SwiGLU and RoPE against independent references."""
import math

import pytest
import torch
import torch.nn.functional as F

from tinylm import RMSNorm, SwiGLU, apply_rope, embed, rms_norm, rope_cache, swiglu, tied_logits
from tinylm.rope import rotate_half

from ..helpers import BATCH, SEQ


# --- embedding and tied head -------------------------------------------------

def test_embed_is_row_lookup_and_one_hot_matmul(gen):
    weight = torch.randn(256, 40, generator=gen)
    ids = torch.randint(0, 256, (BATCH, SEQ), generator=gen)
    out = embed(ids, weight)
    assert out.shape == (BATCH, SEQ, 40)
    torch.testing.assert_close(out, F.embedding(ids, weight), rtol=0, atol=0)
    torch.testing.assert_close(out, F.one_hot(ids, 256).float() @ weight)


def test_tied_logits_is_linear_with_the_embedding_matrix(gen):
    weight = torch.randn(256, 40, generator=gen)
    x = torch.randn(BATCH, SEQ, 40, generator=gen)
    logits = tied_logits(x, weight)
    assert logits.shape == (BATCH, SEQ, 256)
    torch.testing.assert_close(logits, F.linear(x, weight))
    # logit of token v is the dot product of x with v's own embedding row
    torch.testing.assert_close(logits[1, 2, 7], x[1, 2] @ weight[7])


# --- RMSNorm -------------------------------------------------------------------

def test_rms_norm_matches_torch_rmsnorm(gen):
    x = torch.randn(BATCH, SEQ, 40, generator=gen) * 3 + 1  # nonzero mean: RMS is not the std
    ref = torch.nn.RMSNorm(40, eps=1e-5)
    with torch.no_grad():
        ref.weight.copy_(torch.rand(40, generator=gen) + 0.5)
    torch.testing.assert_close(rms_norm(x, ref.weight, eps=1e-5), ref(x))
    ours = RMSNorm(40, eps=1e-5)
    ours.load_state_dict(ref.state_dict())
    torch.testing.assert_close(ours(x), ref(x))


def test_rms_norm_output_has_unit_rms_with_unit_gain(gen):
    x = torch.randn(5, 33, generator=gen) * 7
    y = rms_norm(x, torch.ones(33), eps=1e-12)
    torch.testing.assert_close(y.pow(2).mean(-1), torch.ones(5))


def test_rms_norm_half_precision_does_not_overflow():
    # 300² = 90000 > fp16 max 65504: squaring in fp16 gives inf and a zero output.
    x = torch.full((2, 16), 300.0, dtype=torch.float16)
    x[:, ::2] = -300.0
    y = rms_norm(x, torch.ones(16, dtype=torch.float16))
    assert y.dtype == torch.float16
    torch.testing.assert_close(y.float(), torch.sign(x.float()))


def test_rms_norm_eps_sits_inside_the_sqrt():
    x = torch.tensor([[0.0, 0.0, 0.0, 0.0]])
    assert torch.equal(rms_norm(x, torch.ones(4), eps=0.25), x)  # finite for all-zero input
    x = torch.tensor([[0.1, -0.1]])
    expected = x / math.sqrt(0.01 + 0.5)
    torch.testing.assert_close(rms_norm(x, torch.ones(2), eps=0.5), expected)


def test_rms_norm_module_matches_torch_rms_norm_forward_and_backward(gen):
    """torch's own F.rms_norm (an independent implementation) is the
    reference for the module's values and both gradients."""
    x = (torch.randn(BATCH, SEQ, 40, generator=gen) * 3 + 1).requires_grad_()
    module = RMSNorm(40, eps=1e-5)
    with torch.no_grad():
        module.weight.copy_(torch.rand(40, generator=gen) + 0.5)
    weight = module.weight.detach().clone().requires_grad_()
    upstream = torch.randn(BATCH, SEQ, 40, generator=gen)
    x_ref = x.detach().clone().requires_grad_()
    ref = F.rms_norm(x_ref, (40,), weight, eps=1e-5)
    ref.backward(upstream)
    out = module(x)
    out.backward(upstream)
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(x.grad, x_ref.grad)
    torch.testing.assert_close(module.weight.grad, weight.grad)


def test_rms_norm_module_gradients_pass_gradcheck(gen):
    """Finite differences in float64: independent of any formula for the gradient."""
    module = RMSNorm(6, eps=1e-3).double()
    with torch.no_grad():
        module.weight.uniform_(0.5, 1.5)
    x = torch.randn(3, 5, 6, dtype=torch.float64, generator=gen, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, weight: module(x), (x, module.weight))  # weight is module.weight


# --- SwiGLU --------------------------------------------------------------------

def test_swiglu_matches_explicit_formula(config, gen):
    mlp = SwiGLU(config)
    x = torch.randn(BATCH, SEQ, config.d_model, generator=gen)
    gate_pre = torch.einsum("btd,fd->btf", x, mlp.gate_proj.weight)
    silu = gate_pre * torch.sigmoid(gate_pre)  # SiLU written out, not F.silu
    up = torch.einsum("btd,fd->btf", x, mlp.up_proj.weight)
    expected = torch.einsum("btf,df->btd", silu * up, mlp.down_proj.weight)
    torch.testing.assert_close(mlp(x), expected)
    w = (mlp.gate_proj.weight, mlp.up_proj.weight, mlp.down_proj.weight)
    torch.testing.assert_close(swiglu(x, *w), expected)


# --- RoPE ----------------------------------------------------------------------

def interleaved_rope_complex(x: torch.Tensor, positions: torch.Tensor, theta: float) -> torch.Tensor:
    """The paper's form, by complex multiplication: pair (2i, 2i+1) is the
    complex number x_2i + j·x_2i+1, rotated by position · theta^(-2i/d)."""
    d = x.shape[-1]
    freqs = theta ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = positions.double()[:, None] * freqs[None, :]               # (T, d/2)
    z = torch.view_as_complex(x.double().reshape(*x.shape[:-1], d // 2, 2).contiguous())
    return torch.view_as_real(z * torch.polar(torch.ones_like(angles), angles)).reshape(x.shape)


def half_split_to_interleaved(x: torch.Tensor) -> torch.Tensor:
    """Feature order (0, d/2, 1, d/2+1, ...): pairs (i, i + d/2) become neighbours."""
    d = x.shape[-1]
    order = torch.stack((torch.arange(d // 2), torch.arange(d // 2) + d // 2), dim=-1).flatten()
    return x[..., order]


def test_rope_equals_complex_rotation_after_pair_permutation(gen):
    hd, theta = 10, 500.0
    cos, sin = rope_cache(hd, 32, theta)
    x = torch.randn(BATCH, 4, SEQ, hd, generator=gen)
    ours = apply_rope(x, cos, sin, start_pos=5)
    ref = interleaved_rope_complex(half_split_to_interleaved(x), torch.arange(5, 5 + SEQ), theta)
    torch.testing.assert_close(half_split_to_interleaved(ours).double(), ref, rtol=1e-5, atol=1e-5)


def test_rope_equals_the_rotate_half_formula(gen):
    """apply_rope computes x·cos + rotate_half(x)·sin (HF's form) pair by pair."""
    cos, sin = rope_cache(10, 32, 500.0)
    x = torch.randn(BATCH, 4, SEQ, 10, generator=gen)
    want = x * cos[5:5 + SEQ] + rotate_half(x) * sin[5:5 + SEQ]
    torch.testing.assert_close(apply_rope(x, cos, sin, start_pos=5), want)


def test_rope_gradients_pass_gradcheck(gen):
    """apply_rope's backward is written by hand (the inverse rotation): finite differences in float64,
    for x as the transposed view attention passes (B, T, H, hd) -> (B, H, T, hd), for the tables
    themselves (any values, not only cos and sin of angles), and with per-row positions."""
    x = torch.randn(2, 6, 3, 8, dtype=torch.float64, generator=gen, requires_grad=True)
    cos = torch.randn(10, 8, dtype=torch.float64, generator=gen, requires_grad=True)
    sin = torch.randn(10, 8, dtype=torch.float64, generator=gen, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, c, s: apply_rope(x.transpose(1, 2), c, s, 3), (x, cos, sin))
    positions = torch.tensor([[0, 1, 2, 3, 4, 5], [4, 5, 6, 7, 8, 9]])
    assert torch.autograd.gradcheck(lambda x, c, s: apply_rope(x.transpose(1, 2), c, s, positions=positions),
                                    (x, cos, sin))


def test_rope_gradient_equals_autograd_of_the_rotate_half_formula(gen):
    cos, sin = rope_cache(32, 64)
    x = torch.randn(BATCH, SEQ, 4, 32, generator=gen).transpose(1, 2).requires_grad_()
    g = torch.randn(BATCH, 4, SEQ, 32, generator=gen)
    (ours,) = torch.autograd.grad(apply_rope(x, cos, sin, 7), x, g)
    (want,) = torch.autograd.grad(x * cos[7:7 + SEQ] + rotate_half(x) * sin[7:7 + SEQ], x, g)
    torch.testing.assert_close(ours, want)


def test_rope_preserves_norms(gen):
    cos, sin = rope_cache(10, 64)
    x = torch.randn(BATCH, 4, SEQ, 10, generator=gen)
    torch.testing.assert_close(apply_rope(x, cos, sin, 17).norm(dim=-1), x.norm(dim=-1))


def test_rope_scores_depend_on_relative_position_only(gen):
    cos, sin = rope_cache(10, 128)
    q = torch.randn(1, 1, 1, 10, generator=gen)
    k = torch.randn(1, 1, 1, 10, generator=gen)

    def score(m, n):
        return (apply_rope(q, cos, sin, m) * apply_rope(k, cos, sin, n)).sum()

    for shift in (1, 13, 90):
        torch.testing.assert_close(score(7, 3), score(7 + shift, 3 + shift))
    assert not torch.allclose(score(7, 3), score(7, 4))  # but distance matters


def test_rope_offset_equals_slice_of_full_sequence(gen):
    cos, sin = rope_cache(10, 64)
    x = torch.randn(BATCH, 4, SEQ, 10, generator=gen)
    full = apply_rope(x, cos, sin)
    torch.testing.assert_close(apply_rope(x[:, :, 4:], cos, sin, start_pos=4), full[:, :, 4:])


def test_rope_position_zero_is_identity_and_tables_follow_closed_form():
    cos, sin = rope_cache(8, 6, theta=10000.0)
    assert cos.shape == sin.shape == (6, 8)
    assert torch.equal(cos[0], torch.ones(8)) and torch.equal(sin[0], torch.zeros(8))
    # feature i (and i + 4) turns by position · 10000^(-2i/8)
    for i in range(4):
        angle = 5 * 10000.0 ** (-2 * i / 8)
        assert math.isclose(cos[5, i].item(), math.cos(angle), abs_tol=1e-6)
        assert math.isclose(sin[5, i + 4].item(), math.sin(angle), abs_tol=1e-6)


def test_rope_rejects_odd_head_dim_and_positions_past_the_table():
    with pytest.raises(ValueError, match="even"):
        rope_cache(9, 8)
    cos, sin = rope_cache(8, 8)
    with pytest.raises(ValueError, match="max_seq_len"):
        apply_rope(torch.zeros(1, 1, 4, 8), cos, sin, start_pos=6)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_rms_norm_module_half_precision_backward_matches_float32(gen, dtype):
    """Autograd through RMSNorm in half precision (an in-place op on an
    autograd output made this raise). Gradients compared with float32
    autograd of the formula, within half-precision rounding."""
    x = torch.randn(2, 3, 8, generator=gen)
    gain = torch.rand(8, generator=gen) + 0.5
    norm = RMSNorm(8).to(dtype)
    with torch.no_grad():
        norm.weight.copy_(gain)
    x_half = x.to(dtype).requires_grad_()
    upstream = torch.randn(2, 3, 8, generator=gen)
    (norm(x_half).float() * upstream).sum().backward()
    x32, gain32 = x.to(dtype).float().requires_grad_(), gain.to(dtype).float().requires_grad_()
    (rms_norm(x32, gain32) * upstream).sum().backward()
    torch.testing.assert_close(x_half.grad.float(), x32.grad, rtol=0.02, atol=0.02)
    torch.testing.assert_close(norm.weight.grad.float(), gain32.grad, rtol=0.02, atol=0.05)
