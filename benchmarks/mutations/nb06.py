"""Mistakes in notebook 06 (KV cache: cache_update, attention_step, generate_greedy)."""
from . import Mutation

M = Mutation
CAT_K = "torch.cat((past_k, k), dim=2)"
CAT_V = "torch.cat((past_v, v), dim=2)"
MUTATIONS = [
    # cache_update
    M("cache_update", CAT_K, "torch.cat((past_k, k), dim=1)", ("wrong axis",), "concatenates the keys on the head axis"),
    M("cache_update", CAT_K, "torch.cat((past_k, k), dim=-1)", ("wrong axis",), "concatenates the keys on head_dim"),
    M("cache_update", CAT_K, "torch.cat((past_k, k))", ("wrong axis",), "torch.cat without dim: the batch axis"),
    M("cache_update", CAT_K, "torch.cat((k, past_k), dim=2)", ("before the cached",), "new keys before the old ones"),
    M("cache_update", CAT_V, "torch.cat((past_v, k), dim=2)", ("appends the new keys instead",),
      "copy-paste: v_all appends the new keys"),
    M("cache_update", "return k_all, v_all", "return v_all, k_all", ("swapped",), "returns (v_all, k_all)"),
    M("cache_update", "return k_all, v_all", "return k, v", ("overwritten",), "returns only the new entries"),
    M("cache_update", "return k_all, v_all", "return past_k, past_v", ("unchanged",),
      "returns the old cache, the new entries are lost"),
    M("cache_update", CAT_K, "torch.stack((past_k, k), dim=2)", ("stack",), "stacks instead of concatenating"),
    # attention_step
    M("attention_step", "start = past_k.shape[2]", "start = past_k.shape[1]", ("positions",),
      "reads the cache length from the head axis"),
    M("attention_step", "q = tinylm.apply_rope(q, cos, sin, start_pos=start)", "q = tinylm.apply_rope(q, cos, sin, start_pos=0)",
      ("queries rotated",), "forgets start_pos for the queries only"),
    M("attention_step", "k = tinylm.apply_rope(k, cos, sin, start_pos=start)", "k = tinylm.apply_rope(k, cos, sin, start_pos=start + 1)",
      ("positions",), "rotates the new keys one position too far"),
    M("attention_step", "mask = tinylm.causal_mask(T, start + T)", "mask = tinylm.causal_mask(T, T)", ("mask",),
      "a (T, T) mask, which broadcasts wrongly or raises against (T, start + T) scores"),
    M("attention_step", "mask = tinylm.causal_mask(T, start + T).to(x.device)",
      "mask = torch.ones(T, start + T, dtype=torch.bool).tril()", ("mask",), "tril without the offset: top-left aligned"),
    M("attention_step", "attn_mask=mask)", "attn_mask=~mask)", ("mask",), "mask inverted (True taken as masked)"),
    M("attention_step", "y = y.transpose(1, 2).reshape(B, T, attn.n_heads * attn.head_dim)",
      "y = y.reshape(B, T, attn.n_heads * attn.head_dim)", ("heads merged",), "merges heads without transposing back"),
    M("attention_step", "return attn.o_proj(y), k_all, v_all", "return y, k_all, v_all", ("o_proj",),
      "forgets the output projection"),
    M("attention_step", "q = attn.q_proj(x).view(B, T, attn.n_heads, attn.head_dim).transpose(1, 2)",
      "q = attn.q_proj(x).view(B, attn.n_heads, T, attn.head_dim)", ("heads split",), "splits heads without the transpose"),
    M("attention_step", "k_all, v_all = cache_update(past_k, past_v, k, v)",
      "v = tinylm.apply_rope(v, cos, sin, start_pos=start)\n    k_all, v_all = cache_update(past_k, past_v, k, v)",
      ("values",), "rotates the values too"),
    M("attention_step", "k_all, v_all = cache_update(past_k, past_v, k, v)",
      "k_all, v_all = cache_update(past_k, past_v, attn.k_proj(x).view(B, T, attn.n_kv_heads, attn.head_dim).transpose(1, 2), v)",
      ("before rope",), "caches the keys before rotating them"),
    M("attention_step", "return attn.o_proj(y), k_all, v_all", "return attn.o_proj(y), k_all, v_all  # unchanged",
      ("cache_update",), "correct itself, but the cache_update it calls (exercise 1) is wrong",
      extra="def cache_update(past_k, past_v, k, v):  # the learner's broken exercise 1\n"
            "    return torch.cat((k, past_k), dim=2), torch.cat((v, past_v), dim=2)"),
    # generate_greedy
    M("generate_greedy", "    cache.reset() ", "    pass ", ("not reset",), "never resets the cache"),
    M("generate_greedy", "step_input = next_id ", "step_input = idx ", ("fed again",), "feeds the whole sequence with the cache"),
    M("generate_greedy", "model(step_input, cache=cache)", "model(idx)", ("cache is not used",), "ignores the cache"),
    M("generate_greedy", "[:, -1]", "[:, 0]", ("first position",), "takes the logits of the first position"),
    M("generate_greedy", "for _ in range(max_new_tokens):", "for _ in range(max_new_tokens - 1):", ("new tokens",),
      "one new token too few"),
    M("generate_greedy", "return idx", "return idx[:, prompt.shape[1]:]", ("prompt",), "returns only the new tokens"),
    M("generate_greedy", "logits.argmax(dim=-1, keepdim=True)", "logits.argmin(dim=-1, keepdim=True)", ("argmax",),
      "argmin instead of argmax"),
]
