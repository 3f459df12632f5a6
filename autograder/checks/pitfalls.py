"""Deliberately wrong implementations, one per seed bug, for the Pitfalls
sections of the notebooks: `show_check(check_rms_norm, pitfalls.rms_norm_no_upcast)`
prints what a learner with that bug would see.

They live here, not in the notebooks, because each one is a solution with a
single line changed: printed in a release notebook it would give the answer
away. Each docstring names the changed line."""
from __future__ import annotations

import math

import torch
from torch import nn
import torch.nn.functional as F

from tinylm import apply_rope, causal_attention, causal_mask, rotate_half
import tinylm

# -- 01 embeddings --------------------------------------------------------------


def tie_by_copy(tok_emb, lm_head):
    """lm_head.weight = nn.Parameter(tok_emb.weight.detach().clone()): equal values, separate tensor."""
    lm_head.weight = nn.Parameter(tok_emb.weight.detach().clone())


def tie_transposed(tok_emb, lm_head):
    """lm_head.weight = nn.Parameter(tok_emb.weight.T ...): a [d, V] copy."""
    lm_head.weight = nn.Parameter(tok_emb.weight.detach().T.clone())


def tied_logits_transposed(x, weight):
    """x @ weight instead of x @ weight.T."""
    return x @ weight


# -- 02 RMSNorm -----------------------------------------------------------------


def _rms(x, weight, eps, *, dim=-1, eps_inside=True, gain=True, upcast=True):
    xs = x.float() if upcast else x
    ms = xs.pow(2).mean(dim, keepdim=True)
    y = xs * torch.rsqrt(ms + eps) if eps_inside else xs / (ms.sqrt() + eps)
    y = y.to(x.dtype)
    return weight * y if gain else y


def rms_norm_eps_outside(x, weight, eps=1e-6):
    """x / (sqrt(mean(x²)) + eps)."""
    return _rms(x, weight, eps, eps_inside=False)


def rms_norm_wrong_axis(x, weight, eps=1e-6):
    """x.pow(2).mean(dim=1, ...): averages over positions, not features."""
    return _rms(x, weight, eps, dim=1)


def rms_norm_no_gain(x, weight, eps=1e-6):
    """return x * inv_rms, without `weight *`."""
    return _rms(x, weight, eps, gain=False)


def rms_norm_no_upcast(x, weight, eps=1e-6):
    """x.pow(2) computed in x's own dtype (float16 overflows above 256)."""
    return _rms(x, weight, eps, upcast=False)


# -- 03 causal attention ----------------------------------------------------------


def _attend(q, k, v, *, dim=-1, scale=None, mask=None):
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    mask = causal_mask(q.shape[-2], k.shape[-2]) if mask is None else mask
    scores = (q @ k.transpose(-2, -1) * scale).masked_fill(~mask, float("-inf"))
    return scores.softmax(dim=dim) @ v


def attention_softmax_wrong_dim(q, k, v):
    """scores.softmax(dim=-2): normalises over queries."""
    return _attend(q, k, v, dim=-2)


def attention_no_scale(q, k, v):
    """scores = q @ k.transpose(-2, -1), without / sqrt(head_dim)."""
    return _attend(q, k, v, scale=1.0)


def attention_transposed_mask(q, k, v):
    """causal_mask(Tq, Tk).T: only broadcasts when Tq == Tk, and is anti-causal."""
    return _attend(q, k, v, mask=causal_mask(q.shape[-2], k.shape[-2]).T)


def causal_mask_strict(q_len, kv_len=None):
    """tril(diagonal=kv_len - q_len - 1): j < i, a token cannot see itself."""
    kv_len = q_len if kv_len is None else kv_len
    return torch.ones(q_len, kv_len, dtype=torch.bool).tril(diagonal=kv_len - q_len - 1)


def split_heads_view(x, n_heads):
    """x.view(B, H, T, hd): right shape, tokens mixed into heads."""
    B, T, d = x.shape
    return x.view(B, n_heads, T, d // n_heads)  # (B, H, T, hd) in shape only: memory is still (B, T, d)


def merge_heads_ok(y):
    """A correct merge, so only split_heads_view is at fault."""
    B, H, T, hd = y.shape
    return y.transpose(1, 2).reshape(B, T, H * hd)  # (B, T, H, hd) -> (B, T, d)


# -- 04 RoPE ----------------------------------------------------------------------


def _tables(head_dim, max_seq_len, theta, exponent):
    angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float32), theta ** exponent)
    angles = torch.cat((angles, angles), dim=-1)
    return angles.cos(), angles.sin()


def rope_cache_half_exponent(head_dim, max_seq_len, theta=10000.0):
    """theta ** (-arange(hd // 2) / hd): exponent i/hd instead of 2i/hd."""
    return _tables(head_dim, max_seq_len, theta, -torch.arange(head_dim // 2, dtype=torch.float32) / head_dim)


def apply_rope_interleaved_pairs(x, cos, sin, start_pos=0):
    """rotate neighbours (2i, 2i+1) with the half-split tables."""
    T = x.shape[-2]
    neighbours = torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)  # (..., hd/2, 2) -> (..., hd)
    return x * cos[start_pos:start_pos + T] + neighbours * sin[start_pos:start_pos + T]


def apply_rope_no_offset(x, cos, sin, start_pos=0):
    """cos[:T] instead of cos[start_pos:start_pos + T]."""
    T = x.shape[-2]
    return x * cos[:T] + rotate_half(x) * sin[:T]


def rotary_attention_values_too(q, k, v, cos, sin, start_pos=0):
    """v = apply_rope(v, ...) as well."""
    q, k, v = (apply_rope(t, cos, sin, start_pos) for t in (q, k, v))
    return causal_attention(q, k, v)


# -- 05 SwiGLU and the block ---------------------------------------------------------


def swiglu_swapped(x, w_gate, w_up, w_down):
    """silu(x @ w_up.T) * (x @ w_gate.T): gate and up swapped."""
    return (F.silu(x @ w_up.T) * (x @ w_gate.T)) @ w_down.T


def post_norm_block(x, attn, mlp, attn_norm, mlp_norm):
    """x = norm(x + branch(x)): the original Transformer's order."""
    x = attn_norm(x + attn(x))
    return mlp_norm(x + mlp(x))


def block_no_attn_residual(x, attn, mlp, attn_norm, mlp_norm):
    """x = attn(attn_norm(x)), without `x +`."""
    x = attn(attn_norm(x))
    return x + mlp(mlp_norm(x))


class PostNormBlock(nn.Module):
    """A block with tinylm's parts and the norms after the additions: the same
    parameters as a correct Block, another function."""

    def __init__(self, config):
        super().__init__()
        self.attn_norm, self.mlp_norm = (tinylm.RMSNorm(config.d_model, config.norm_eps) for _ in range(2))
        self.attn, self.mlp = tinylm.Attention(config), tinylm.SwiGLU(config)

    def forward(self, x, cos, sin, cache=None, layer_idx: int = 0):
        x = self.attn_norm(x + self.attn(x, cos, sin, cache, layer_idx))
        return self.mlp_norm(x + self.mlp(x))


# -- 06 KV cache -----------------------------------------------------------------------


def cache_update_wrong_axis(past_k, past_v, k, v):
    """torch.cat(..., dim=1): the new tokens become extra heads."""
    return torch.cat((past_k, k), dim=1), torch.cat((past_v, v), dim=1)


def _cached_step(x, attn, cos, sin, past_k, past_v, *, restart_positions=False, top_left_mask=False):
    B, T, _ = x.shape
    def heads(t, n):
        return t.view(B, T, n, attn.head_dim).transpose(1, 2)  # (B, T, n * hd) -> (B, n, T, hd)
    start = 0 if restart_positions else past_k.shape[2]
    q = apply_rope(heads(attn.q_proj(x), attn.n_heads), cos, sin, start)
    k = torch.cat((past_k, apply_rope(heads(attn.k_proj(x), attn.n_kv_heads), cos, sin, start)), dim=2)
    v = torch.cat((past_v, heads(attn.v_proj(x), attn.n_kv_heads)), dim=2)
    n_rep = attn.n_heads // attn.n_kv_heads
    k_read, v_read = k.repeat_interleave(n_rep, dim=1), v.repeat_interleave(n_rep, dim=1)  # (B, nh, T_all, hd)
    if top_left_mask:
        y = F.scaled_dot_product_attention(q, k_read, v_read, is_causal=True)
    else:
        y = F.scaled_dot_product_attention(q, k_read, v_read, attn_mask=causal_mask(T, k.shape[2]).to(x.device))
    return attn.o_proj(y.transpose(1, 2).flatten(2)), k, v  # (B, nh, T, hd) -> (B, T, d)


def attention_step_restart_positions(x, attn, cos, sin, past_k, past_v):
    """apply_rope(..., start_pos=0) for the new tokens: every decode step rotated as position 0."""
    return _cached_step(x, attn, cos, sin, past_k, past_v, restart_positions=True)


def attention_step_is_causal(x, attn, cos, sin, past_k, past_v):
    """F.scaled_dot_product_attention(..., is_causal=True): a top-left triangle."""
    return _cached_step(x, attn, cos, sin, past_k, past_v, top_left_mask=True)


@torch.no_grad()
def generate_greedy_no_reset(model, prompt, max_new_tokens, cache):
    """No cache.reset(): the positions continue after the previous prompt."""
    out, fed = prompt, prompt
    for _ in range(max_new_tokens):
        fed = model(fed, cache=cache)[:, -1].argmax(-1, keepdim=True)  # (B, 1)
        out = torch.cat((out, fed), dim=1)
    return out


# -- 07 GQA ------------------------------------------------------------------------------


def repeat_kv_tiled(x, n_rep):
    """x.repeat(1, n_rep, 1, 1): kv heads tiled (0, 1, 0, 1), not grouped (0, 0, 1, 1)."""
    return x.repeat(1, n_rep, 1, 1)


def repeat_kv_positions(x, n_rep):
    """repeat_interleave along the sequence axis: T becomes n_rep * T."""
    return x.repeat_interleave(n_rep, dim=2)


def gqa_step_expanded_cache(x, attn, cos, sin, past_k, past_v):
    """return y, repeat_kv(k_all, n_rep), ...: right output, a cache n_rep times too big."""
    n_rep = attn.n_heads // attn.n_kv_heads
    y, k_all, v_all = _cached_step(x, attn, cos, sin, past_k, past_v)
    return y, k_all.repeat_interleave(n_rep, dim=1), v_all.repeat_interleave(n_rep, dim=1)  # (B, n_heads, T, hd)


# -- 08 sampling ----------------------------------------------------------------------------


def sample_before_transforms(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    """Draws from softmax(logits) and ignores temperature, top-k and top-p."""
    if not temperature:
        return logits.argmax(-1)
    return torch.multinomial(logits.softmax(-1), 1, generator=generator).squeeze(-1)


def top_p_drops_crossing(logits, p):
    """Keeps only the tokens whose cumulative mass is <= p: the crossing token goes too."""
    probs, order = logits.softmax(-1).sort(-1, descending=True)
    drop = probs.cumsum(-1) > p
    return logits.masked_fill(drop.scatter(-1, order, drop), float("-inf"))


def top_k_off_by_one(logits, k):
    """Threshold compared with <= instead of <: the k-th token is dropped too."""
    return logits.masked_fill(logits <= logits.topk(k, dim=-1).values[..., -1:], float("-inf"))


def sample_temperature_after_softmax(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    """softmax(z) / T: the draw renormalises, so T has no effect."""
    from tinylm.sampling import top_k_filter, top_p_filter

    if not temperature:
        return logits.argmax(-1)
    z = top_k_filter(logits, top_k) if top_k else logits
    z = top_p_filter(z, top_p) if top_p else z
    return torch.multinomial(z.softmax(-1) / temperature, 1, generator=generator).squeeze(-1)


@torch.no_grad()
def generate_train_mode(model, prompt, max_new_tokens, temperature=1.0, top_k=None, top_p=None, generator=None):
    """No model.eval(): dropout stays on while decoding."""
    from tinylm.sampling import sample_next

    out = prompt
    for _ in range(max_new_tokens):
        out = torch.cat((out, sample_next(model(out)[:, -1], temperature, top_k, top_p, generator)[:, None]), dim=1)
    return out


# -- 09 training ---------------------------------------------------------------------------


def get_batch_unshifted(data, batch_size, seq_len, generator=None):
    """y = x: every position predicts the byte it already reads."""
    starts = torch.randint(len(data) - seq_len, (batch_size,), generator=generator)
    x = data[starts[:, None] + torch.arange(seq_len)].long()  # (B, T)
    return x, x.clone()


def _lm_loss(logits, targets):
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)


def _train_step(model, optimizer, x, y, grad_clip, *, set_train, zero_grad):
    if set_train:
        model.train()
    loss = _lm_loss(model(x), y)
    if zero_grad:
        optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    return loss.item()


def train_step_no_zero_grad(model, optimizer, x, y, grad_clip=1.0):
    """No optimizer.zero_grad(): each step adds its gradient to all earlier ones."""
    return _train_step(model, optimizer, x, y, grad_clip, set_train=True, zero_grad=False)


def train_step_eval_mode(model, optimizer, x, y, grad_clip=1.0):
    """No model.train(): trains in whatever mode the caller left (dropout off after an evaluation)."""
    return _train_step(model, optimizer, x, y, grad_clip, set_train=False, zero_grad=True)


def lm_loss_per_sequence(logits, targets):
    """Mean of per-sequence means: padded sequences weigh more per token."""
    nll = F.cross_entropy(logits.transpose(1, 2), targets, ignore_index=-100, reduction="none")  # (B, T)
    return (nll.sum(1) / (targets != -100).sum(1)).mean()


# -- 10 evaluation ---------------------------------------------------------------------------


def _metrics(loss, bytes_per_token):
    return {"loss": loss, "perplexity": math.exp(loss), "bits_per_byte": loss / math.log(2) / bytes_per_token}


def _nll_sum_and_count(logits, targets):
    nll = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=-100, reduction="sum")
    return nll.item(), int((targets != -100).sum())


@torch.no_grad()
def evaluate_mean_of_exp(model, batches, bytes_per_token=1.0):
    """perplexity = mean over batches of exp(batch loss), not exp(mean loss)."""
    was_training = model.training
    model.eval()
    dev = next(model.parameters()).device
    per_batch = [_nll_sum_and_count(model(x.to(dev)), y.to(dev)) for x, y in batches]
    model.train(was_training)
    out = _metrics(sum(s for s, _ in per_batch) / sum(n for _, n in per_batch), bytes_per_token)
    out["perplexity"] = sum(math.exp(s / n) for s, n in per_batch) / len(per_batch)
    return out


def nll_counting_padding(logits, targets, ignore_index=-100):
    """count = targets.numel(): padding counted as tokens with zero loss."""
    nll = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=ignore_index, reduction="sum")
    return nll.item(), targets.numel()


@torch.no_grad()
def evaluate_train_mode(model, batches, bytes_per_token=1.0):
    """No model.eval(): every evaluation scores a different random sub-network."""
    dev = next(model.parameters()).device
    per_batch = [_nll_sum_and_count(model(x.to(dev)), y.to(dev)) for x, y in batches]
    return _metrics(sum(s for s, _ in per_batch) / sum(n for _, n in per_batch), bytes_per_token)
