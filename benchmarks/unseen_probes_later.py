"""Probes of verify_unseen.py for exercises the course added later: the
checkpoint conversion of notebook 04 (query and key rows in Meta's interleaved
RoPE layout), the left-padded batch of notebook 06 and gradient accumulation
in notebook 09. Each compares the learner's answer with tinylm, closed forms
or PyTorch; no check of the course is run."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

import tinylm


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _close(a, b, **tol) -> bool:
    return a.shape == b.shape and torch.allclose(a.float(), b.float(), **tol)


def _half_rows_match(convert, n_heads: int, head_dim: int) -> bool:
    """The notebook's permutation P, per head: rows h·hd + (0, 2, 4, ..., 1, 3, 5, ...)."""
    w = torch.randn(n_heads * head_dim, 5, generator=_gen(81))
    within = torch.cat((torch.arange(0, head_dim, 2), torch.arange(1, head_dim, 2)))
    rows = torch.cat([h * head_dim + within for h in range(n_heads)])
    return torch.equal(convert(w, n_heads), w[rows])


def _rope_pairs(x: torch.Tensor, theta: float = 10000.0) -> torch.Tensor:
    """Meta's rotation: features (2i, 2i+1) of x (B, H, T, hd) as one complex number, turned by t · theta^(-2i/hd)."""
    B, H, T, hd = x.shape
    inv_freq = theta ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)
    angles = torch.outer(torch.arange(T, dtype=torch.float64), inv_freq)         # (T, hd/2)
    pairs = torch.view_as_complex(x.double().reshape(B, H, T, hd // 2, 2).contiguous())
    return torch.view_as_real(pairs * torch.polar(torch.ones_like(angles), angles)).reshape(B, H, T, hd)


def _attention_with(rotate, x, wq, wk, wv, wo, n_heads: int, n_kv_heads: int) -> torch.Tensor:
    """Causal GQA attention of x (B, T, d) in float64, queries and keys turned by rotate."""
    B, T, _ = x.shape
    hd = wq.shape[0] // n_heads
    q = (x @ wq.T).view(B, T, n_heads, hd).transpose(1, 2)
    k, v = ((x @ w.T).view(B, T, n_kv_heads, hd).transpose(1, 2) for w in (wk, wv))
    q, k = rotate(q), rotate(k)
    n_rep = n_heads // n_kv_heads
    y = F.scaled_dot_product_attention(q, tinylm.repeat_kv(k, n_rep), tinylm.repeat_kv(v, n_rep), is_causal=True)
    return y.transpose(1, 2).reshape(B, T, n_heads * hd) @ wo.T


def _converted_attention_matches(convert, n_heads: int, n_kv_heads: int, head_dim: int) -> bool:
    """Meta's attention (interleaved rotation) with the checkpoint's weights against tinylm's half rotation with the
    converted ones: the permutation of q and k rows leaves every score, so every output, as it was."""
    gen, d, T = _gen(82), 10, 7
    x = torch.randn(2, T, d, generator=gen, dtype=torch.float64)
    wq, wo = (torch.randn(n_heads * head_dim, d, generator=gen, dtype=torch.float64) for _ in range(2))
    wk, wv = (torch.randn(n_kv_heads * head_dim, d, generator=gen, dtype=torch.float64) for _ in range(2))
    cos, sin = (t.double() for t in tinylm.rope_cache(head_dim, T))
    meta = _attention_with(_rope_pairs, x, wq, wk, wv, wo.T.contiguous(), n_heads, n_kv_heads)
    q_proj, k_proj, v_proj, o_proj = convert(wq, wk, wv, wo.T.contiguous(), n_heads, n_kv_heads)
    half = _attention_with(lambda t: tinylm.apply_rope(t, cos, sin), x, q_proj, k_proj, v_proj, o_proj, n_heads,
                           n_kv_heads)
    return _close(half, meta, atol=1e-9)


def _left_padded_rows(ns, model, lengths: tuple) -> bool:
    """generate_left_padded on prompts of these lengths (4 greedy tokens, one cache used for a first batch and then
    for this one) against tinylm's greedy decoding of each prompt on its own, no padding, no mask."""
    gen = _gen(22)
    prompts = [torch.randint(1, 256, (n,), generator=gen) for n in lengths]
    cache = tinylm.KVCache(model.config, len(prompts))
    ns["generate_left_padded"](model, [p.flip(0) for p in prompts], 2, cache)  # the cache now holds another batch
    new = ns["generate_left_padded"](model, prompts, 4, cache)
    alone = torch.stack([tinylm.generate(model, p[None], 4, temperature=0)[0, len(p):] for p in prompts])
    return tuple(new.shape) == tuple(alone.shape) and torch.equal(new, alone)


def _accumulated_matches(ns, split: tuple, padded: bool, grad_clip: float, make_model) -> tuple:
    """train_step_accumulated (SGD, lr 0.1, a model from make_model: logits over 10 ids) on a batch of 4 rows cut into micro-batches of `split` rows, against one
    plain step on the whole batch: the mean cross-entropy over the scored targets, backward, clip_grad_norm_, SGD.
    Returns (weights agree, returned loss == the whole batch's mean)."""
    gen = _gen(23)
    x, y = torch.randint(0, 10, (4, 6), generator=gen), torch.randint(0, 10, (4, 6), generator=gen)
    if padded:
        y[0, 1:] = -100  # row 0 scores 1 target, row 2 scores 2: micro-batches of very different sizes
        y[2, 2:] = -100
    torch.manual_seed(0)
    mine = make_model()
    torch.manual_seed(0)
    whole = make_model()
    pieces, start = [], 0
    for n in split:
        pieces.append((x[start:start + n], y[start:start + n]))
        start += n
    returned = ns["train_step_accumulated"](mine, torch.optim.SGD(mine.parameters(), lr=0.1), pieces, grad_clip=grad_clip)
    loss = F.cross_entropy(whole(x).reshape(-1, 10), y.reshape(-1), ignore_index=-100)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(whole.parameters(), grad_clip)
    with torch.no_grad():
        whole.emb.weight -= 0.1 * whole.emb.weight.grad
    return (torch.allclose(mine.emb.weight, whole.emb.weight, atol=1e-6),
            math.isclose(float(returned), loss.item(), rel_tol=1e-5))
