"""Mistakes in notebook 07 (GQA: repeat_kv, gqa_attention, gqa_step)."""
from . import Mutation

M = Mutation
EXPAND = "x = x[:, :, None].expand(B, n_kv, n_rep, T, hd)"
RESHAPE = "return x.reshape(B, n_kv * n_rep, T, hd)"
MUTATIONS = [
    # repeat_kv
    M("repeat_kv", EXPAND, "x = x[:, None].expand(B, n_rep, n_kv, T, hd)", ("tiling",), "expands before the kv axis: tiles"),
    M("repeat_kv", RESHAPE, "return x.transpose(1, 2).reshape(B, n_kv * n_rep, T, hd)", ("tiling",),
      "swaps the group axes before reshaping: tiles"),
    M("repeat_kv", EXPAND, "return x.repeat(1, n_rep, 1, 1)", ("tiling",), "x.repeat instead of repeat_interleave"),
    M("repeat_kv", EXPAND, "return x.repeat_interleave(n_rep, dim=2)", ("wrong dim",), "repeats the positions"),
    M("repeat_kv", EXPAND, "return x.repeat_interleave(n_rep, dim=-1)", ("wrong dim",), "repeats along head_dim"),
    M("repeat_kv", EXPAND, "return x.repeat_interleave(n_rep, dim=0)", ("wrong dim",), "repeats along the batch"),
    M("repeat_kv", RESHAPE, "return x.reshape(B, n_kv * n_rep, T, hd).contiguous()[:, :n_kv]", ("kv heads",),
      "keeps only n_kv heads"),
    M("repeat_kv", EXPAND, "return x.expand(B, n_kv * n_rep, T, hd) if n_rep > 1 else x", ("n_rep",),
      "expand on a non-singleton axis (raises for n_rep > 1)"),
    M("repeat_kv", EXPAND, "return x.repeat_interleave(n_kv, dim=1)", ("n_rep",),
      "repeats each head n_kv times instead of n_rep"),
    # gqa_attention
    M("gqa_attention", "repeat_kv(k, n_rep), repeat_kv(v, n_rep)", "k.repeat(1, n_rep, 1, 1), v.repeat(1, n_rep, 1, 1)",
      ("tiling",), "tiles k and v"),
    M("gqa_attention", "is_causal=True)", ")", ("causal",), "forgets the causal mask"),
    M("gqa_attention", "repeat_kv(k, n_rep), repeat_kv(v, n_rep)", "repeat_kv(k, n_rep), v.repeat(1, n_rep, 1, 1)",
      ("values",), "tiles only the values"),
    M("gqa_attention", "n_rep = q.shape[1] // k.shape[1]", "n_rep = k.shape[1] // q.shape[1] or 1", ("n_rep",),
      "computes n_rep upside down"),
    M("gqa_attention", "return F.scaled_dot_product_attention(q, k, v, is_causal=True)",
      "return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1 / q.shape[-1])", ("scale",),
      "scales by 1/head_dim"),
    M("gqa_attention", "return F.scaled_dot_product_attention(q, k, v, is_causal=True)",
      "return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1.0)", ("scale",), "no 1/sqrt(hd) scaling"),
    M("gqa_attention", "return F.scaled_dot_product_attention(q, k, v, is_causal=True)",
      "return F.scaled_dot_product_attention(q, k, v, is_causal=True)  # unchanged", ("repeat_kv",),
      "correct itself, but the repeat_kv it calls (exercise 1) tiles",
      extra="def repeat_kv(x, n_rep):  # the learner's broken exercise 1\n    return x.repeat(1, n_rep, 1, 1)"),
    # gqa_step
    M("gqa_step", "return attn.o_proj(y), k_all, v_all",
      "return attn.o_proj(y), repeat_kv(k_all, n_rep), repeat_kv(v_all, n_rep)", ("expanded",),
      "stores the repeated K/V in the cache"),
    M("gqa_step", "repeat_kv(k_all, n_rep), repeat_kv(v_all, n_rep)", "k_all.repeat(1, n_rep, 1, 1), v_all.repeat(1, n_rep, 1, 1)",
      ("tiling",), "tiles inside the step"),
    M("gqa_step", "tinylm.apply_rope(q, cos, sin, start), tinylm.apply_rope(k, cos, sin, start)",
      "tinylm.apply_rope(q, cos, sin, 0), tinylm.apply_rope(k, cos, sin, 0)", ("positions restart",), "forgets start_pos"),
    M("gqa_step", "k_all = torch.cat((past_k, k), dim=2)", "k_all = torch.cat((past_k, k), dim=1)", ("wrong axis",),
      "appends keys on the head axis"),
    M("gqa_step", "attn_mask=mask)", "is_causal=True)", ("mask",), "top-left causal mask with a cache"),
    M("gqa_step", "start, n_rep = past_k.shape[2], attn.n_heads // attn.n_kv_heads",
      "start, n_rep = past_k.shape[2], attn.n_heads // attn.n_kv_heads\n    k_new = None", ("repeat_kv",),
      "correct itself, but the repeat_kv it calls (exercise 1) tiles",
      extra="def repeat_kv(x, n_rep):  # the learner's broken exercise 1\n    return torch.cat([x] * n_rep, dim=1)"),
    M("gqa_step", "v = attn.v_proj(x).view(B, T, attn.n_kv_heads, attn.head_dim).transpose(1, 2)",
      "v = attn.k_proj(x).view(B, T, attn.n_kv_heads, attn.head_dim).transpose(1, 2)", ("v_proj",),
      "copy-paste: values from k_proj"),
    # after learners' reports: a diagnosis must name the tensor that is wrong
    M("gqa_step", "repeat_kv(k_all, n_rep), repeat_kv(v_all, n_rep)", "k_all, v_all", ("not repeated",),
      "forgets to repeat the kv heads in the step", added="learner-reports"),
    M("gqa_step", "repeat_kv(k_all, n_rep), repeat_kv(v_all, n_rep)", "repeat_kv(k_all, n_rep), v_all", ("values",),
      "repeats the keys but not the values", added="learner-reports"),
    M("gqa_attention", "repeat_kv(k, n_rep), repeat_kv(v, n_rep)", "repeat_kv(k, n_rep), v", ("values",),
      "repeats the keys but not the values", added="learner-reports"),
]
