"""Probes that verify_unseen.py adds for the fresh22 set, where the shared
probes of unseen_probes.py do not reach the situation a mistake is about: a
norm module handed float16 input (the output must keep its dtype), LayerNorm
on tokens whose mean is far larger than their spread (where E[x²] - E[x]²
cancels in float32), attention whose batch rows have scores of very
different sizes (a shift by one maximum for the whole tensor empties the
smaller rows), a block, a sampler and their callers' tensors after the call
(an in-place update changes them), and a KV cache's size when head_dim is
set apart from d_model // n_heads, and the positions and attention mask
generate_left_padded hands the model at every pass (a greedy token of a
small model can survive a wrong one). Each compares the learner's answer with
tinylm, PyTorch or the input as it was; no check of the course is run."""
from __future__ import annotations

import torch
import torch.nn.functional as F

import tinylm
from benchmarks.unseen_probes import _kv_cache_nbytes, left_padded_passes
from benchmarks.verify_heldout import _config, _input_kept, attempt


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _close(a, b, **tol) -> bool:
    return a.shape == b.shape and torch.allclose(a.float(), b.float(), **tol)


def probe_02(ns) -> dict:
    gen = _gen(220)
    # float32 keeps about 3 decimals at 1e4: the reference's two-pass variance stays within 2e-2 of F.layer_norm
    far = torch.randn(4, 8, generator=gen) + 1e4
    w, b = torch.randn(8, generator=gen), torch.randn(8, generator=gen)
    return {"RMSNorm in float16: output dtype": attempt(
                lambda: str(ns["RMSNorm"](8).half()(torch.randn(2, 8, generator=gen).half()).dtype)),
            "layer_norm, tokens of mean 1e4 and spread 1 == F.layer_norm": attempt(lambda: _close(
                ns["layer_norm"](far, w, b), F.layer_norm(far, (8,), w, b, eps=1e-5), atol=2e-2))}


def probe_03(ns) -> dict:
    gen = _gen(221)
    q, k, v = (torch.randn(2, 2, 4, 8, generator=gen) for _ in range(3))
    q[0], k[0] = q[0] * 30, k[0] * 30  # batch row 0 scores in the hundreds, row 1 about 1
    return {"attention, one batch row's scores 900 times the other's == SDPA": attempt(lambda: _close(
        ns["causal_attention"](q, k, v), F.scaled_dot_product_attention(q, k, v, is_causal=True), atol=1e-4))}


def probe_05(ns) -> dict:
    x = torch.randn(2, 3, 4, generator=_gen(222))
    identity = torch.nn.Identity()
    return {"pre_norm_block leaves the caller's x as it was": attempt(
        lambda: _input_kept(ns["pre_norm_block"], x, torch.tanh, torch.sigmoid, identity, identity))}


def _left_padded_passes(ns, lengths: tuple) -> list:
    """(positions, attention_mask) as lists for every forward pass of the learner's generate_left_padded (prompts of
    `lengths` tokens, 3 new tokens) on a small RoPE model."""
    gen = _gen(224)
    return left_padded_passes(ns, [torch.randint(1, 32, (n,), generator=gen) for n in lengths], 3)


def probe_06(ns) -> dict:
    wide = _config(2, n_layers=3, head_dim=12)  # 4 heads of 12 on a 32-wide stream: 32 // 4 = 8 is not the head size
    return {"kv_cache_bytes, head_dim 12 on d_model 32 == KVCache nbytes": attempt(
                lambda: ns["kv_cache_bytes"](wide, 40, 2, torch.float32) == _kv_cache_nbytes(wide, 40, 2, torch.float32)),
            "generate_left_padded, prompts of 2 and 4 tokens: (positions, attention_mask) of every pass": attempt(
                lambda: _left_padded_passes(ns, (2, 4)))}


def probe_08(ns) -> dict:
    logits = torch.randn(3, 12, generator=_gen(223))
    return {"sample_next at temperature 0.7 leaves the caller's logits as they were": attempt(
        lambda: _input_kept(ns["sample_next"], logits, 0.7, None, None, _gen(0)))}


EXTRA_PROBES = {"02": probe_02, "03": probe_03, "05": probe_05, "06": probe_06, "08": probe_08}
