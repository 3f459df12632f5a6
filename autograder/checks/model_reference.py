"""An independent reference for notebook 05's modules, computed from a state
dict with torch built-ins and the closed-form RoPE rotation: attention (with
the mistakes a check measures against: tiled kv heads, an explicit mask,
heads merged without the transpose), a cached decode step, the MLP, a block
and every stage of the decoder's residual stream."""
from __future__ import annotations


import torch
from torch import nn
import torch.nn.functional as F

from .framework.measure import randn


# -- an independent reference, from a state dict ------------------------------
def state_rope_tables(head_dim: int, n_pos: int, theta: float):
    """cos, sin (n_pos, head_dim): feature i and i + hd/2 turn by pos · theta^(-2i/hd)."""
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    angles = torch.arange(n_pos, dtype=torch.float64)[:, None] * theta ** (-2 * i / head_dim)  # (T, hd/2)
    angles = torch.cat((angles, angles), dim=-1)
    return angles.cos().float(), angles.sin().float()


def state_rotate(x, cos, sin):
    """(B, H, T, hd), halves paired: (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin)."""
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


def state_rms(x, weight, eps):
    return weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def state_attention(state: dict, prefix: str, x, config, cos, sin, tile=False, explicit=False, unmerged=False):
    """tile=True: the kv heads repeated by x.repeat (query head h reads kv head h % n_kv), a known bug;
    unmerged=True: the heads merged by a reshape without the transpose (positions and heads mixed), another.
    explicit=True: attention written out step by step (scores, mask, softmax), for the tracer's reference."""
    B, T, _ = x.shape
    H, K, hd = config.n_heads, config.n_kv_heads, config.head_dim

    def heads(name, n):
        return F.linear(x, state[f"{prefix}{name}.weight"]).view(B, T, n, hd).transpose(1, 2)  # (B, n, T, hd)

    q = state_rotate(heads("q_proj", H), cos[:T], sin[:T])
    k = state_rotate(heads("k_proj", K), cos[:T], sin[:T])
    v = heads("v_proj", K)
    if tile:
        k, v = k.repeat(1, H // K, 1, 1), v.repeat(1, H // K, 1, 1)
    else:
        k, v = k.repeat_interleave(H // K, dim=1), v.repeat_interleave(H // K, dim=1)  # (B, H, T, hd)
    if explicit:
        from .references.attention import attention_steps
        y = attention_steps(q, k, v)
    else:
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)                  # (B, H, T, hd)
    merged = y.reshape(B, T, H * hd) if unmerged else y.transpose(1, 2).reshape(B, T, H * hd)
    return F.linear(merged, state[f"{prefix}o_proj.weight"])


def state_kv(state, prefix, h, config, start: int):
    """Keys (rotated) and values (B, n_kv, T, hd) of the attention input h at positions start .. start + T - 1."""
    B, T, _ = h.shape
    K, hd = config.n_kv_heads, config.head_dim
    cos, sin = state_rope_tables(hd, start + T, config.rope_theta)
    k = F.linear(h, state[f"{prefix}k_proj.weight"]).view(B, T, K, hd).transpose(1, 2)
    v = F.linear(h, state[f"{prefix}v_proj.weight"]).view(B, T, K, hd).transpose(1, 2)
    return state_rotate(k, cos[start:], sin[start:]), v


def state_step(state, prefix, h, config, start: int, past_k, past_v, *, q_from_zero=False, k_from_zero=False,
              top_left=False):
    """One cached attention step: new inputs h (B, n, d) at positions start.., the past keys and values given.
    The switches are the known ways of getting the cached path wrong: q or the new k rotated as if they
    began at position 0 (start_pos ignored), the causal triangle aligned top-left (is_causal=True)."""
    B, n, _ = h.shape
    H, K, hd = config.n_heads, config.n_kv_heads, config.head_dim
    cos, sin = state_rope_tables(hd, start + n, config.rope_theta)
    q_at = 0 if q_from_zero else start
    q = F.linear(h, state[f"{prefix}q_proj.weight"]).view(B, n, H, hd).transpose(1, 2)
    q = state_rotate(q, cos[q_at:q_at + n], sin[q_at:q_at + n])                  # (B, H, n, hd)
    k, v = state_kv(state, prefix, h, config, 0 if k_from_zero else start)       # (B, K, n, hd)
    k_all = torch.cat((past_k, k), dim=2).repeat_interleave(H // K, dim=1)      # (B, H, start + n, hd)
    v_all = torch.cat((past_v, v), dim=2).repeat_interleave(H // K, dim=1)
    mask = torch.ones(n, start + n, dtype=torch.bool).tril(diagonal=0 if top_left else start)
    y = F.scaled_dot_product_attention(q, k_all, v_all, attn_mask=mask)         # (B, H, n, hd)
    return F.linear(y.transpose(1, 2).reshape(B, n, H * hd), state[f"{prefix}o_proj.weight"])


def state_mlp(state, prefix, x):
    w = lambda name: state[f"{prefix}{name}.weight"]  # noqa: E731
    return F.linear(F.silu(F.linear(x, w("gate_proj"))) * F.linear(x, w("up_proj")), w("down_proj"))


def state_block(state, prefix, x, config, cos, sin, *, post_norm=False, residual=True,
               norms=("attn_norm", "mlp_norm"), attention=None, explicit=False, parallel=False, mlp_first=False):
    """The pre-norm block; the keyword arguments give the known wrong variants
    (attention: a stand-in for the attention branch, e.g. a cached one)."""
    norm1, norm2 = (f"{prefix}{n}.weight" for n in norms)
    eps = config.norm_eps
    attend = attention or (lambda h: state_attention(state, f"{prefix}attn.", h, config, cos, sin, explicit=explicit))
    if mlp_first:  # the two sub-blocks in the other order, each with its own norm
        h = x + state_mlp(state, f"{prefix}mlp.", state_rms(x, state[norm2], eps))
        return h + attend(state_rms(h, state[norm1], eps))
    if post_norm in (True, "attn"):  # the sum normalised instead of the branch's input, in one half or both
        h = state_rms(x + attend(x), state[norm1], eps)
    else:
        h = (x if residual else 0) + attend(state_rms(x, state[norm1], eps))
    if post_norm in (True, "mlp"):
        return state_rms(h + state_mlp(state, f"{prefix}mlp.", h), state[norm2], eps)
    return h + state_mlp(state, f"{prefix}mlp.", state_rms(x if parallel else h, state[norm2], eps))


def state_stages(state, idx, config, explicit=False) -> list[tuple[str, torch.Tensor]]:
    """[(stage, residual stream after it)] for the whole decoder."""
    cos, sin = state_rope_tables(config.head_dim, idx.shape[1], config.rope_theta)
    x = F.embedding(idx, state["tok_emb.weight"])
    stages = [("embedding", x)]
    for i in range(config.n_layers):
        x = state_block(state, f"blocks.{i}.", x, config, cos, sin, explicit=explicit)
        stages.append((f"block {i}", x))
    x = state_rms(x, state["norm.weight"], config.norm_eps)
    stages.append(("final norm", x))
    stages.append(("logits", x @ state["lm_head.weight"].T))
    return stages


def reference_module(cls, config, seed: int) -> nn.Module:
    torch.manual_seed(seed)
    module = cls(config).eval()
    with torch.no_grad():  # RMSNorm gains away from 1, so a missing or misplaced gain shows
        for name, p in module.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.5 * randn(*p.shape, seed=seed + len(name)))
    return module
