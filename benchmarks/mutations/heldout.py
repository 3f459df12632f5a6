"""A held-out set of beginner mistakes, written without reading the checks
(by someone other than their author), to measure how well the diagnoses
generalise beyond the mistakes they were tuned on. Not part of the default
run: `python benchmarks/bench_diagnostics.py --set heldout`.

Concentrated where a check can pass by testing too little: notebook 05's
model wrong only on the KV-cache path (prefill, then decoding from a start
position, each layer in its own cache slot) or only when n_kv_heads <
n_heads; answers that modify their input in place; answers that drop the
cast back to the input's dtype; temperature applied after the filters;
float masks; values not repeated for GQA while keys are."""
from . import Mutation as M

# notebook 05, the Transformer cell (Attention, Block and Transformer together)
ROPE_QK = "q, k = apply_rope(q, cos, sin, start_pos), apply_rope(k, cos, sin, start_pos)"
ATTEND = "y = causal_attention(q, k, v)"
BLOCK_CALL = "x = block(x, self.rope_cos, self.rope_sin, cache, i)"
BLOCKS = "self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layers))"
TEMPERATURE_THEN_FILTERS = """    logits = logits / temperature             # on logits, before any filter
    if top_k is not None:
        logits = top_k_filter(logits, top_k)
    if top_p is not None:
        logits = top_p_filter(logits, top_p)
"""
FILTERS_THEN_TEMPERATURE = """    if top_k is not None:
        logits = top_k_filter(logits, top_k)
    if top_p is not None:
        logits = top_p_filter(logits, top_p)
    logits = logits / temperature
"""
IN_PLACE = ("in place", "in-place", "modifies its input", "modified the input", "changes its input", "overwrit")
DTYPE = ("dtype", "cast back", "returns float32", "upcast")
LAYER_INDEX = ("layer_idx", "layer index", "same cache slot", "cache slot of layer")
V_NOT_REPEATED = ("v is not repeated", "values are not repeated", "value heads", "repeat v", "repeat_kv(v")
FLOAT_MASK = ("float mask", "bool", "additive", "added to the scores")

MUTATIONS = {
    "01": [
        M("one_hot_embed", "F.one_hot(ids, num_classes=weight.shape[0]).to(weight.dtype)",
          "F.one_hot(ids, num_classes=weight.shape[0]).float()", DTYPE + ("weight.dtype",),
          "casts the one-hot rows to float32, not to the weight's dtype: a bfloat16 matrix fails"),
    ],
    "05": [
        M("pre_norm_block", "x = x + attn(attn_norm(x))", "x += attn(attn_norm(x))", IN_PLACE,
          "adds the attention branch with +=, changing the caller's x"),
        # the KV-cache path only: without a cache every one of these is right
        M("Transformer", ROPE_QK, "q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)",
          ("start_pos", "position 0", "cached positions", "positions of the new"),
          "rotates q and k from position 0 even when the cache already holds earlier positions"),
        M("Transformer", "x = x + self.attn(self.attn_norm(x), cos, sin, cache, layer_idx)",
          "x = x + self.attn(self.attn_norm(x), cos, sin, cache)",
          LAYER_INDEX,
          "Block does not pass layer_idx on: every layer writes the cache slot of layer 0"),
        M("Transformer", f"for i, block in enumerate(self.blocks):\n            {BLOCK_CALL}",
          "for block in self.blocks:\n            x = block(x, self.rope_cos, self.rope_sin, cache)",
          LAYER_INDEX,
          "Transformer calls the blocks without their index: all layers share one cache slot"),
        M("Transformer", ATTEND, "y = F.scaled_dot_product_attention(q, k, v, is_causal=True, "
          "enable_gqa=self.n_kv_heads != self.n_heads)",
          ("top-left", "is_causal", "bottom-right"),
          "is_causal=True with a cache: one new query is allowed only the first key"),
        M("Transformer", BLOCK_CALL,
          "x = block(x, self.rope_cos[:idx.shape[1]], self.rope_sin[:idx.shape[1]], cache, i)",
          ("rope table", "rope_cos", "angle", "start_pos", "sliced"),
          "slices the RoPE tables to the input's length, so a decoding step has no angle for its position"),
        # n_kv_heads < n_heads only: with MHA every one of these is right
        M("Transformer", "self.k_proj = nn.Linear(config.d_model, config.n_kv_heads * config.head_dim, bias=False)",
          "self.k_proj = nn.Linear(config.d_model, config.n_heads * config.head_dim, bias=False)",
          ("n_kv_heads", "k_proj", "key/value heads", "kv heads"),
          "gives k_proj one output head per query head"),
        M("Transformer", ATTEND, "n_rep = self.n_heads // self.n_kv_heads\n"
          "        y = causal_attention(q, k.repeat(1, n_rep, 1, 1), v.repeat(1, n_rep, 1, 1))",
          ("tile", "tiling", "repeat_interleave", "h // n_rep"),
          "repeats the kv heads by tiling (x.repeat) before attention: query head h reads kv head h % n_kv"),
        M("Transformer", ATTEND, "y = causal_attention(q, k.repeat_interleave(self.n_heads // self.n_kv_heads, dim=1), v)",
          V_NOT_REPEATED,
          "repeats the keys to the query heads but not the values"),
        # registration and sharing of the parts
        M("Transformer", BLOCKS, "self.blocks = [Block(config) for _ in range(config.n_layers)]",
          ("ModuleList", "plain list", "not registered", "python list"),
          "keeps the blocks in a plain Python list: their parameters are invisible to the module"),
        M("Transformer", BLOCKS, "self.blocks = nn.ModuleList([Block(config)] * config.n_layers)",
          ("same block", "one Block", "shared", "the same module"),
          "builds one Block and lists it n_layers times: every layer shares its weights"),
        M("Transformer", "self.mlp_norm = RMSNorm(config.d_model, config.norm_eps)", "self.mlp_norm = self.attn_norm",
          ("shared norm", "same norm", "one RMSNorm", "mlp_norm is attn_norm", "share"),
          "reuses attn_norm as mlp_norm: the two gains are one parameter"),
        M("Transformer", "self.lm_head.weight = self.tok_emb.weight  # one Parameter, two names",
          "self.lm_head.weight = nn.Parameter(self.tok_emb.weight.clone())",
          ("tied", "tie", "same Parameter", "copy"),
          "ties the head with a copy of the embedding: equal at first, apart after one step"),
    ],
    "02": [
        M("rms_norm", "return weight * (x32 * inv_rms).to(x.dtype)", "return weight * x32.mul_(inv_rms).to(x.dtype)",
          IN_PLACE, "scales in place: for float32 input x.float() is x itself, so the caller's tensor changes"),
        M("layer_norm", "centred = x - x.mean(dim=-1, keepdim=True)",
          "x -= x.mean(dim=-1, keepdim=True)  # centre\n    centred = x", IN_PLACE,
          "centres with x -= mean, changing the caller's tensor"),
        M("RMSNorm", "return rms_norm(x, self.weight, self.eps)", "return rms_norm(x.float(), self.weight, self.eps)",
          DTYPE, "upcasts the input in forward and never casts back: half-precision in, float32 out"),
    ],
    "04": [
        M("apply_rope", "return x * cos + rotate_half(x) * sin",
          "rotated = rotate_half(x) * sin\n    return x.mul_(cos).add_(rotated)", IN_PLACE,
          "rotates in place: the caller's q and k are overwritten"),
        M("apply_rope", ".to(x.dtype)  # (T, hd), broadcasts over (B, H)\n    sin = sin[start_pos:start_pos + T].to(x.dtype)",
          "  # (T, hd), broadcasts over (B, H)\n    sin = sin[start_pos:start_pos + T]", DTYPE,
          "multiplies by the float32 tables without casting them: half-precision q comes back float32"),
    ],
    "06": [
        M("generate_greedy", "idx, step_input = prompt, prompt", "idx, step_input = prompt, prompt[:, -1:]",
          ("prefill", "whole prompt", "only the last", "prompt in one pass"),
          "prefills the cache with the prompt's last token only: the rest of the prompt is never seen"),
        M("attention_step", "tinylm.causal_mask(T, start + T).to(x.device)", "tinylm.causal_mask(T, start + T).to(x.device).float()",
          FLOAT_MASK,
          "passes the mask to SDPA as 0/1 floats: they are added to the scores, nothing is masked"),
    ],
    "07": [
        M("gqa_step", "causal_mask(T, start + T).to(x.device)", "causal_mask(T, start + T).to(x.device, q.dtype)",
          FLOAT_MASK,
          "a float 0/1 mask in the GQA step: added to the scores, nothing is masked"),
        M("gqa_step", "repeat_kv(k_all, n_rep), repeat_kv(v_all, n_rep)", "repeat_kv(k_all, n_rep), v_all",
          V_NOT_REPEATED,
          "repeats the cached keys to the query heads but not the values"),
    ],
    "08": [
        M("sample_next", TEMPERATURE_THEN_FILTERS, FILTERS_THEN_TEMPERATURE,
          ("temperature after", "after top", "after the filter", "before filtering", "order of"),
          "applies the temperature after top-k/top-p: the nucleus is chosen from the unscaled distribution"),
        M("top_k_filter", 'return logits.masked_fill(logits < kth, float("-inf"))',
          'return logits.masked_fill_(logits < kth, float("-inf"))', IN_PLACE,
          "masks in place with masked_fill_: the caller's logits lose their tail"),
        M("sample_next", "logits = logits / temperature", "logits /= temperature", IN_PLACE,
          "divides by the temperature in place: the caller's logits change"),
    ],
    "09": [
        M("train_step", "    loss.backward()                              # d loss / d every parameter\n"
          "    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)  # global gradient norm <= grad_clip\n",
          "    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)  # global gradient norm <= grad_clip\n"
          "    loss.backward()                              # d loss / d every parameter\n",
          ("clip", "not clipped", "before backward", "grad_clip"),
          "clips before backward, when there is no gradient yet: nothing is clipped"),
    ],
    "10": [
        M("nll_sum_and_count", "logits.flatten(0, 1).float()", "logits.flatten(0, 1)", DTYPE + ("precision", "float()"),
          "sums the NLL in the logits' own half precision"),
    ],
}
