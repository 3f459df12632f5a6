"""An eighteenth held-out set of learner mistakes ("fresh15"), written without
reading the checks. Not opened, listed or grepped: autograder/checks/,
tests/checks/, autograder/diagnosis_*.py, the source of
benchmarks/bench_diagnostics.py, the diagnosis sections of docs/benchmarks.md
and tests/course/test_docs.py; no check cell, notebook check or
bench_diagnostics run was executed, and no mistake was tried against a check.
The answer cells were taken from bench_diagnostics.notebook_cells (its answer
dict only, written to a scratch file and read there); tinylm,
benchmarks/verify_unseen.py, benchmarks/heldout_duplicates.py,
benchmarks/unseen_probes_fresh14.py and, by grep for probe names and helpers,
benchmarks/unseen_probes.py were read. Of the other sets only
fresh14.py's module docstring, mutations/__init__.py and the first 120 lines of
unseen.py were read: its docstring, the Unseen class and M, and, past them, its
entries for notebooks 01 to 04 (the read was meant for the class). The
mistakes come from the exercise cells, imagined as a learner who
half-understood them, and, for 19 of them, from bugs public projects shipped or
were asked to fix: the thread is named in a comment above the entry and in its
reason, and none of these addresses occurs in another set (`grep -rl URL
benchmarks/mutations/`, the URL only).

benchmarks/heldout_duplicates.py --set fresh15 compared the texts mechanically
and printed only matches: over three rounds 103 entries written first (97
mistakes, 6 SAME edits) were character for character in another set and were
replaced (11 public threads went with them), until it printed none.
benchmarks/verify_unseen.py --set fresh15 then showed 6 mistakes that no probe
saw: four got probes of their own in benchmarks/unseen_probes_fresh15.py (the
gradient one_hot_embed sends to the table, 8 heads over 2 kv heads for the
cache's size, micro-batch gradients above the clip norm, a submodule's mode in
train_step), one was rewritten (float16 frequencies: the first version rounded
the exponents, which float16 holds exactly, instead of the frequencies), and
one (generated tokens marked as padding) was dropped when the set was cut from
75 mistakes to 64 to spread them evenly (6 or 7 a notebook); 6 of 22 SAME
edits, the most trivial, were cut too. Run:
`bench_diagnostics.py --set fresh15`.

Each mistake is one substitution in one answer cell; `expect` holds words a
check that found it would likely say, `untrue` words of causes it is not,
`regime` the situation in which a mistake that is right by default shows. The
classes covered: layout (a reshape for a transpose, a view that cannot merge
expanded or transposed axes, q viewed straight into heads), mask alignment and
fill (the top-left rows of a square mask, a finite -1e4 or a near-zero -1e-9
fill, a mask left on the CPU, no mask after a prefill), softmax written without
its maximum (in attention, and multinomial handed exp(logits)), RoPE (float16
frequencies, exponents from 1, the table's last rows, values rotated, queries
one position ahead, cached keys rotated again, keys from position 0 in the GQA
step, the key permutation in n_heads // n_kv_heads blocks), the KV cache (the
whole sequence fed again, a fresh float32 cache for the caller's, right
padding, new keys first), GQA (values not repeated, repeats by n_kv), sampling
(temperature after top-p, the caller's logits filled in place, the largest
logit as top-k's threshold, dropped logits set to 0, model.eval without the
call), modes (the caller's mode read after eval(), the training flag set on the
top module only), dtypes (squares in float16, a float32 cos table, finfo for an
int8 size, uint8 validation bytes as indices), normalisation (eps outside the
root or squared, the L2 norm for the RMS, (var + eps)² for the root, one gain
for every feature, a parallel or post-norm block), gradients (a detached
table, a frozen tied matrix, clipping after the step or per micro-batch,
micro-batches normalised by their own tokens), labels (scored against the
inputs), schedules (warmup from 0, cosine progress unclamped), and the
accounting formulas (n_heads // n_kv_heads or n_heads x d_model for the cache,
4 bytes whatever the dtype, k and v counted with n_heads, a learned position
table, the SwiGLU size rounded down or truncated first, attention matmuls over
the kv heads). Several pairs give one symptom from two causes: the -1e4 fill
and the softmax without its maximum both show on scores near -3e4, the first
rows of the square mask give SDPA's top-left is_causal, and the SwiGLU size
comes out one multiple short from either rounding.
SAME lists 16 edits that compute what the solution computes another way; a
check must pass each.

After the first measurement (main at 5e4529f), reading every printed line
against its reason found the two lines the keyword count called untrue to be
true of the code: "temperature" and "top_k" matched the measured setting of
a draw ("with temperature 1 and neither top_k nor top_p"), "zero_grad" the
measured order of the calls; those words were narrowed, nothing else in the
set changed.
"""
from __future__ import annotations

from .unseen import M


MUTATIONS = {
    "01": [
        M("embed", "return weight[ids]", "return weight[ids.clamp(0, weight.shape[0] - 1)]",
          ("clamp", "out of range", "beyond", "raise", "silently", "invalid id"),
          "clamps the ids into the table: an id past the vocabulary silently reads the last row instead of "
          "raising, hiding a tokenizer/vocabulary mismatch",
          untrue=("dtype", "gradient", "transpose"), regime="an id outside the table"),
        M("tie_weights", "lm_head.weight = tok_emb.weight",
          "lm_head.weight = tok_emb.weight\n    tok_emb.weight.requires_grad_(False)",
          ("requires_grad", "frozen", "trainable", "gradient", "no grad"),
          "freezes the embedding to avoid a 'double update' after tying: both names are the same Parameter, so "
          "the tied matrix is frozen for the head too and never trains",
          untrue=("two parameters", "clone", "direction")),
        M("embed", "return weight[ids]", "return weight[ids] * weight.shape[1] ** 0.5",
          ("scale", "sqrt(d)", "multiplied", "scaled", "d ** 0.5", "rows of the table"),
          "multiplies the looked-up rows by sqrt(d) (the original Transformer's and Gemma's embedding scale): "
          "every vector is sqrt(d) times the table's row",
          untrue=("dtype", "transpose", "one-hot")),
        M("one_hot_embed", "return one_hot @ weight", "return one_hot @ weight.detach()",
          ("detach", "gradient", "no grad", "table", "never trains"),
          "multiplies by a detached table: the rows are right but no gradient reaches the embedding",
          untrue=("dtype", "num_classes", "shape"), regime="training: a backward pass that should reach the table"),
        M("tie_weights", "lm_head.weight = tok_emb.weight", "lm_head.weight = tok_emb.weight.T",
          ("transpose", "tok_emb.weight.t", "[v, d]", "shape", "not a parameter", "same orientation"),
          "assigns the transposed table, as if the head stored [d, V]: nn.Linear(d, V) stores [V, d] like the "
          "embedding, and a non-Parameter tensor cannot be assigned to a module's weight, so it raises",
          untrue=("copy", "clone", "direction")),
        M("tie_weights", "lm_head.weight = tok_emb.weight", "lm_head.load_state_dict(tok_emb.state_dict())",
          ("same parameter", "two parameters", "copy", "values", "load_state_dict", "is tok_emb.weight"),
          "copies the embedding's values into the head once: two separate Parameters that drift apart as "
          "soon as training updates them",
          untrue=("transpose", "direction", "requires_grad")),
    ],
    "02": [
        # adapted from https://github.com/meta-llama/llama/issues/1048 (RMSNorm computed in float16)
        M("rms_norm", "x32.pow(2).mean(dim=-1, keepdim=True) + eps",
          "x.pow(2).mean(dim=-1, keepdim=True).float() + eps",
          ("overflow", "float16", "fp16", "square", "upcast", "inf", "precision"),
          "squares x in its own precision and upcasts only the mean: float16 entries above 256 square to inf, "
          "the mean is inf and the token's output 0 (https://github.com/meta-llama/llama/issues/1048, RMSNorm "
          "run in float16 wrecks generation)",
          untrue=("keepdim", "epsilon outside", "dim=1"), regime="float16 input with entries above 256"),
        M("rms_norm", "inv_rms = torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)",
          "inv_rms = 1 / (x32.pow(2).mean(dim=-1, keepdim=True).sqrt() + eps)",
          ("eps", "inside", "outside", "sqrt", "epsilon", "square root"),
          "adds eps to the RMS outside the square root instead of to the mean square inside it: tokens whose mean "
          "square is near or below eps are scaled by 1/(rms + eps) instead of 1/sqrt(ms + eps)",
          untrue=("float16", "overflow", "dim=1"), regime="tokens whose mean square is near or below eps"),
        M("rms_norm", "inv_rms = torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)",
          "inv_rms = 1 / (torch.linalg.vector_norm(x32, dim=-1, keepdim=True) + eps)",
          ("norm", "sqrt(d)", "mean", "sum of squares", "l2", "root mean", "divides by d"),
          "divides by the L2 norm (root of the SUM of squares) instead of the root mean square: every output is "
          "smaller by sqrt(d)",
          untrue=("float16", "overflow", "keepdim")),
        M("RMSNorm", "torch.ones(dim)", "torch.ones(1)",
          ("shape", "(dim,)", "per feature", "one gain", "scalar", "size mismatch", "each feature"),
          "makes one gain shared by all features: right at initialisation (it broadcasts), but a trained "
          "per-feature gain of shape (dim,) cannot be loaded and training learns a single scale",
          untrue=("eps", "requires_grad", "frozen"), regime="a trained per-feature gain"),
        M("rms_norm", "+ eps)", "+ eps ** 2)",
          ("eps", "squared", "epsilon", "eps ** 2"),
          "adds eps² to the mean square instead of eps (as if eps were a floor on the RMS): tokens whose mean "
          "square is near eps are scaled far more",
          untrue=("float16", "dim=1", "outside the"), regime="tokens whose mean square is near or below eps"),
        # adapted from https://github.com/131250208/TPlinker-joint-extraction/issues/37 (std = (var + eps) ** 2)
        M("layer_norm", "torch.rsqrt(var + eps)", "1 / (var + eps) ** 2",
          ("sqrt", "square root", "** 2", "power", "rsqrt", "exponent"),
          "divides by (var + eps)² where the square root belongs: every row is rescaled by var^-2 instead of "
          "var^-1/2 (https://github.com/131250208/TPlinker-joint-extraction/issues/37)",
          untrue=("unbiased", "centred", "bessel")),
    ],
    "03": [
        M("causal_attention", "mask = causal_mask(q.shape[-2], k.shape[-2]).to(q.device)",
          "mask = causal_mask(k.shape[-2], k.shape[-2])[:q.shape[-2]].to(q.device)",
          ("top-left", "bottom-right", "aligned", "offset", "first rows", "last rows", "cache", "fewer queries"),
          "keeps the first Tq rows of the square mask: with fewer queries than keys the queries are treated as "
          "positions 0 .. Tq-1 and do not see the keys before their own position (the top-left alignment "
          "SDPA's is_causal has)",
          untrue=("scale", "sqrt", "softmax axis"), regime="fewer queries than keys (Tq < Tk, a KV cache)"),
        # adapted from https://github.com/pytorch/executorch/pull/18407 (a naive exp(x) / sum(exp(x)))
        M("causal_attention", "weights = scores.softmax(dim=-1)",
          "weights = scores.exp() / scores.exp().sum(dim=-1, keepdim=True)",
          ("max", "overflow", "underflow", "nan", "stable", "exp", "subtract"),
          "writes the softmax out without subtracting the row maximum: scores above ~88 overflow exp to inf and "
          "rows of scores near -1e4 underflow to 0/0, both giving NaN; moderate scores are right "
          "(https://github.com/pytorch/executorch/pull/18407, the naive softmax overflowed on real scores)",
          untrue=("dim=-2", "transpose", "sqrt"), regime="scores of large magnitude"),
        # adapted from https://github.com/TransformerLensOrg/TransformerLens/issues/318 (a finite mask value)
        M("causal_attention", 'scores.masked_fill(~mask, float("-inf"))', "scores.masked_fill(~mask, -1e4)",
          ("-1e4", "-10000", "-inf", "large negative", "finite", "leak", "masked"),
          "fills the future with -1e4 instead of -inf: rows whose real scores are below -1e4 give the masked "
          "future keys most of the weight (https://github.com/TransformerLensOrg/TransformerLens/issues/318, "
          "real scores below the mask value)",
          untrue=("scale", "sqrt", "dim=-2"), regime="scores below -1e4"),
        # adapted from https://github.com/Shujun-He/RibonanzaNet/issues/5 (masked scores filled with -1e-9)
        M("causal_attention", 'scores.masked_fill(~mask, float("-inf"))', "scores.masked_fill(~mask, -1e-9)",
          ("-inf", "-1e-9", "zero", "future", "leak", "masked", "tiny"),
          "fills the future with -1e-9 (meaning -1e9): about 0, so exp gives the future keys weight like any "
          "score near 0 (https://github.com/Shujun-He/RibonanzaNet/issues/5)",
          untrue=("scale", "sqrt", "dim=-2")),
        M("causal_attention", "mask = causal_mask(q.shape[-2], k.shape[-2]).to(q.device)",
          "mask = causal_mask(q.shape[-2], k.shape[-2])",
          ("device", "cpu", "cuda", "meta", ".to("),
          "leaves the mask on the CPU: with q, k, v on another device masked_fill mixes devices and raises",
          untrue=("top-left", "scale", "dtype"), regime="tensors off the CPU"),
        M("self_attention", "split_heads(F.linear(x, w), n_heads)", "split_heads(F.linear(x, w.T), n_heads)",
          ("transpose", "w.t", "[d_out, d_in]", "layout", "weights", "f.linear"),
          "transposes the q, k and v weights before F.linear, which already multiplies by w.T: each projection "
          "uses the transposed matrix",
          untrue=("w_o", "mask", "scale")),
    ],
    "04": [
        # adapted from https://github.com/huggingface/transformers/issues/25681 (rotary cache built in float16)
        M("rope_cache", "torch.outer(torch.arange(max_seq_len, dtype=torch.float32), inv_freq)",
          "torch.outer(torch.arange(max_seq_len, dtype=torch.float32), inv_freq.half().float())",
          ("float16", "half", "precision", "inv_freq", "frequenc", "rounded"),
          "rounds the frequencies to float16 (relative error up to ~5e-4): each angle is off by position · that "
          "error, small at the first positions and tenths of a radian by the thousands "
          "(https://github.com/huggingface/transformers/issues/25681)",
          untrue=("bfloat16", "swapped", "sign")),
        # adapted from https://github.com/ggml-org/llama.cpp/issues/2376 (k permuted with n_head // n_kv_head)
        M("interleaved_to_half", "interleaved_to_half(wk, n_kv_heads)",
          "interleaved_to_half(wk, n_heads // n_kv_heads)",
          ("n_kv_heads", "kv heads", "blocks", "group", "k_proj", "key heads"),
          "permutes the keys in n_heads // n_kv_heads blocks instead of n_kv_heads: right only when the two "
          "numbers happen to agree (4 heads over 2 kv heads), wrong for MHA and most GQA shapes "
          "(https://github.com/ggml-org/llama.cpp/issues/2376)",
          untrue=("values", "inverse", "v_proj"), regime="n_heads // n_kv_heads != n_kv_heads"),
        M("apply_rope", "cos = cos[start_pos:start_pos + T].to(x.dtype)  # (T, hd), broadcasts over (B, H)\n"
          "    sin = sin[start_pos:start_pos + T].to(x.dtype)",
          "cos = cos[-T:].to(x.dtype)  # the newest T rows\n    sin = sin[-T:].to(x.dtype)",
          ("start_pos", "positions", "last rows", "offset", "table", "end of the table"),
          "takes the table's last T rows: the tokens are rotated as if at positions max_seq_len - T .. "
          "max_seq_len - 1, whatever start_pos says",
          untrue=("sign", "theta", "interleav")),
        M("rope_cache", "torch.arange(0, head_dim, 2, dtype=torch.float32)",
          "torch.arange(1, head_dim, 2, dtype=torch.float32)",
          ("exponent", "frequenc", "2i/d", "inv_freq", "arange", "off by one"),
          "starts the exponents at 1: pair i turns at theta^(-(2i+1)/d), every frequency too low by theta^(-1/d)",
          untrue=("sign", "interleav", "start_pos")),
        M("rotary_attention", "k = apply_rope(k, cos, sin, start_pos)",
          "k, v = apply_rope(k, cos, sin, start_pos), apply_rope(v, cos, sin, start_pos)",
          ("values", "rotat", "only q and k", "v_proj", "value"),
          "rotates the values too: the output mixes rotated values, so position leaks into what is averaged, "
          "not only into the scores",
          untrue=("start_pos", "sign", "theta")),
        M("rotary_attention", "q = apply_rope(q, cos, sin, start_pos)", "q = apply_rope(q, cos, sin, start_pos + 1)",
          ("query", "queries", "start_pos", "position", "one ahead", "offset", "+ 1"),
          "rotates the queries one position ahead of the keys (as if each query stood at the position it "
          "predicts): every relative distance in the scores is off by one",
          untrue=("values", "sign", "theta")),
    ],
    "05": [
        # adapted from https://github.com/deepspeedai/Megatron-DeepSpeed/issues/184 (the SwiGLU size rounded down)
        M("swiglu_hidden", "math.ceil(8 * d_model / 3 / multiple)", "math.floor(8 * d_model / 3 / multiple)",
          ("round", "ceil", "floor", "down", "multiple", "smaller"),
          "rounds 8/3 · d_model down to a multiple instead of up: one multiple too small whenever 8/3 · d_model "
          "is not already a multiple (https://github.com/deepspeedai/Megatron-DeepSpeed/issues/184)",
          untrue=("4 * d_model", "bias", "three matrices"), regime="8/3 · d_model not already a multiple"),
        # adapted from https://github.com/meta-llama/llama/issues/1019 (int(2 * hidden_dim / 3) before the round-up)
        M("swiglu_hidden", "return multiple * math.ceil(8 * d_model / 3 / multiple)",
          "return multiple * ((int(8 * d_model / 3) + multiple - 1) // multiple)",
          ("truncat", "int(", "round", "ceil", "fraction", "before"),
          "truncates 8/3 · d_model to an int before rounding up: when it is fractional and its integer part is "
          "already a multiple, the size is one multiple too small (d_model 100, multiple 1: 266 for 267); "
          "Llama's formula, https://github.com/meta-llama/llama/issues/1019",
          untrue=("4 * d_model", "bias", "three matrices"),
          regime="8/3 · d_model fractional with an integer part that is a multiple"),
        M("pre_norm_block", "x = x + attn(attn_norm(x))  # the branch reads a normalised copy; the stream stays a sum\n"
          "    x = x + mlp(mlp_norm(x))    # the MLP reads the stream after attention has written to it",
          "x = x + attn(attn_norm(x)) + mlp(mlp_norm(x))  # both branches read the block's input, as in GPT-J",
          ("parallel", "after attention", "sequential", "same input", "mlp reads", "before attention"),
          "computes the two branches in parallel from the block's input: the MLP reads x before attention has "
          "written to it (GPT-J's parallel block), not the stream after it",
          untrue=("post-norm", "after the sum", "without the residual")),
        M("Transformer", "x = x + self.attn(self.attn_norm(x), cos, sin, cache, layer_idx)",
          "x = self.attn_norm(x + self.attn(x, cos, sin, cache, layer_idx))",
          ("post-norm", "pre-norm", "after the sum", "attn_norm", "normalised copy", "normalized copy"),
          "normalises after the residual sum (post-norm) in the attention half of every block: attention reads "
          "the raw stream and the stream itself is renormalised",
          untrue=("parallel", "same input", "mlp_norm")),
        M("param_counts", "k_and_v = 2 * d * config.n_kv_heads * hd", "k_and_v = 2 * d * d",
          ("n_kv_heads", "kv heads", "gqa", "k_proj", "v_proj", "head_dim"),
          "counts k_proj and v_proj as d x d matrices: right only for multi-head attention with "
          "n_heads · head_dim = d_model, too large under GQA",
          untrue=("tied", "norms", "lm_head"), regime="GQA, or head_dim apart from d_model // n_heads"),
        M("swiglu", "return (gate * up) @ w_down.T", "return (gate + up) @ w_down.T",
          ("product", "multiply", "elementwise", "sum", "gate * up"),
          "adds the gate to the up branch instead of multiplying: there is no gating at all",
          untrue=("transpose", "sigmoid", "swapped")),
        M("param_counts", '"embedding": config.vocab_size * d',
          '"embedding": (config.vocab_size + config.max_seq_len) * d',
          ("position", "max_seq_len", "rope", "no position", "learned"),
          "counts a learned position table of max_seq_len rows (GPT-2's): this model's positions are RoPE and "
          "have no parameters",
          untrue=("tied", "norms", "n_kv_heads")),
    ],
    "06": [
        # adapted from https://github.com/rasbt/LLMs-from-scratch/issues/922 (n_kv_heads taken as n_heads // groups)
        M("kv_cache_bytes", "config.n_kv_heads * config.head_dim",
          "(config.n_heads // config.n_kv_heads) * config.head_dim",
          ("n_kv_heads", "kv heads", "group", "n_heads //", "heads per group", "ratio"),
          "takes the number of kv heads as n_heads // n_kv_heads (the group size): right only when n_heads = "
          "n_kv_heads², e.g. 4 heads over 2 (https://github.com/rasbt/LLMs-from-scratch/issues/922)",
          untrue=("bits", "itemsize", "batch"), regime="n_heads != n_kv_heads²"),
        # adapted from https://github.com/jranaraki/vllm-fit/issues/14 (cache per token: heads x hidden)
        M("kv_cache_bytes", "per_position = 2 * config.n_layers * config.n_kv_heads * config.head_dim",
          "per_position = 2 * config.n_layers * config.n_heads * config.d_model",
          ("n_heads", "d_model", "head_dim", "n_kv_heads", "hidden size", "overcount"),
          "counts n_heads x d_model numbers per layer and position instead of n_kv_heads x head_dim: too large by "
          "n_heads (times the GQA ratio) (https://github.com/jranaraki/vllm-fit/issues/14)",
          untrue=("itemsize", "bits", "batch")),
        M("generate_greedy", "step_input = next_id                                # decode: one new token per step",
          "step_input = idx                                    # decode: the whole sequence again",
          ("whole sequence", "cache", "again", "new token", "duplicat", "step_input"),
          "feeds the whole sequence at every decoding step although the cache already holds it: the cache "
          "stores every position again, the new tokens sit at wrong positions, and a long enough generation "
          "overflows the cache",
          untrue=("reset", "argmax", "no_grad")),
        M("generate_left_padded",
          "ids[b, T - len(p):] = p                                         # the padding goes in front\n"
          "        mask[b, T - len(p):] = True",
          "ids[b, :len(p)] = p                                             # the padding goes behind\n"
          "        mask[b, :len(p)] = True",
          ("left", "right", "padding", "behind", "last position", "pad"),
          "pads on the right: a shorter prompt's last position is padding, so its first new token is predicted "
          "after a pad and every later one continues from there",
          untrue=("reset", "cumsum", "argmax"), regime="prompts of different lengths"),
        M("attention_step", "attn_mask=mask)", "attn_mask=mask if start == 0 else None)",
          ("mask", "causal", "chunk", "several new tokens", "future", "after a prefill"),
          "drops the mask once something is cached: right for one new token, but several new tokens after a "
          "prefill see each other's future",
          untrue=("shape[1]", "rope", "cat order"), regime="several new tokens after a prefill (chunked prefill)"),
        M("attention_step", "    k = tinylm.apply_rope(k, cos, sin, start_pos=start)\n"
          "    k_all, v_all = cache_update(past_k, past_v, k, v)    # (B, n_kv, start + T, hd)",
          "    k_all, v_all = cache_update(past_k, past_v, k, v)    # (B, n_kv, start + T, hd)\n"
          "    k_all = tinylm.apply_rope(k_all, cos, sin)           # every key at its own position",
          ("rotat", "twice", "cached keys", "again", "rope", "already rotated"),
          "rotates the whole key cache after appending: the cached keys, stored rotated, are rotated again at "
          "every step",
          untrue=("shape[1]", "mask", "values"), regime="a step after a prefill"),
        M("generate_greedy", "cache.reset()                                   # stale",
          "cache = tinylm.KVCache(model.config, prompt.shape[0])  # stale",
          ("cache", "caller's cache", "dtype", "new cache", "bfloat16", "device"),
          "builds a new float32 CPU cache instead of resetting the caller's: a bfloat16 model (or one on another "
          "device) gets a cache of the wrong dtype, and the caller's cache is never filled",
          untrue=("argmax", "last position", "no_grad"), regime="a caller's cache of another dtype or device"),
    ],
    "07": [
        M("decode_bytes_per_token", "dtype.itemsize", "torch.finfo(dtype).bits // 8",
          ("finfo", "int8", "integer", "itemsize", "dtype"),
          "takes the size from torch.finfo, which knows floating dtypes only: right for float32/bfloat16, "
          "raises TypeError for int8",
          untrue=("n_kv_heads", "tied", "norms"), regime="an integer dtype (int8)"),
        M("gqa_attention", "is_causal=True", "is_causal=False",
          ("causal", "is_causal", "future", "mask", "leak"),
          "attends without the causal mask: every position sees the future",
          untrue=("repeat", "tile", "n_rep")),
        M("gqa_attention", "k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)", "k, v = repeat_kv(k, n_rep), v",
          ("values", "repeat", "broadcast", "kv heads"),
          "repeats the keys but not the values: with one kv head the values broadcast and the result is right, "
          "with more SDPA's head counts disagree",
          untrue=("tile", "causal", "h % n_kv"), regime="more than one kv head"),
        M("gqa_step", "k_all = torch.cat((past_k, k), dim=2)", "k_all = torch.cat((k, past_k), dim=2)",
          ("order", "past first", "torch.cat", "new keys first", "positions"),
          "puts the new keys before the cached ones (values stay in order): keys and values of different "
          "positions are paired once something is cached",
          untrue=("repeat", "is_causal", "dim=1"), regime="a step after a prefill"),
        M("gqa_step", "tinylm.apply_rope(k, cos, sin, start)", "tinylm.apply_rope(k, cos, sin)",
          ("start", "start_pos", "keys at position 0", "key positions", "offset"),
          "rotates the new keys from position 0 while the queries sit at start: after a prefill the scores "
          "see wrong distances",
          untrue=("repeat", "values", "is_causal"), regime="a step after a prefill"),
        M("decode_bytes_per_token", "weights = (matrices + L * per_block + d) * size",
          "weights = (matrices + L * per_block + d) * 4",
          ("dtype", "itemsize", "4 bytes", "float32", "bfloat16", "size"),
          "counts the weights at 4 bytes whatever the dtype: twice too many for the default bfloat16",
          untrue=("n_kv_heads", "tied", "norms")),
        M("decode_bytes_per_token", "attention = 2 * d * config.n_heads * hd + 2 * d * config.n_kv_heads * hd",
          "attention = 4 * d * config.n_heads * hd",
          ("n_kv_heads", "k_proj", "v_proj", "gqa", "kv heads"),
          "counts k_proj and v_proj with n_heads: right for MHA, too large under GQA",
          untrue=("tied", "dtype", "context"), regime="GQA (n_kv_heads < n_heads)"),
    ],
    "08": [
        # adapted from https://github.com/Blaizzy/mlx-audio/issues/732 (temperature applied after top-p)
        M("sample_next", "logits = logits / temperature             # on logits, before any filter\n"
          "    if top_k is not None:\n        logits = top_k_filter(logits, top_k)\n"
          "    if top_p is not None:\n        logits = top_p_filter(logits, top_p)",
          "if top_k is not None:\n        logits = top_k_filter(logits, top_k)\n"
          "    if top_p is not None:\n        logits = top_p_filter(logits, top_p)\n"
          "    logits = logits / temperature             # after the filters",
          ("temperature", "order", "before", "after", "top_p", "nucleus"),
          "divides by the temperature after the filters: the nucleus is chosen on the untempered distribution, "
          "so top_p keeps too many tokens for T < 1 and too few for T > 1 "
          "(https://github.com/Blaizzy/mlx-audio/issues/732)",
          untrue=("crossing", "scatter", "generator"), regime="a temperature other than 1 with top_p"),
        M("top_k_filter", 'logits.masked_fill(logits < kth, float("-inf"))',
          'logits.masked_fill_(logits < kth, float("-inf"))',
          ("in place", "caller", "masked_fill_", "modif", "input"),
          "fills the caller's logits in place: the result is right, but the tensor handed in is changed",
          untrue=("keepdim", "largest value as", "temperature")),
        M("top_k_filter", ".values[..., -1:]", ".values[..., :1]",
          ("k-th", "largest", "first", "threshold", "only one", "[..., -1:]"),
          "takes the largest value as the threshold instead of the k-th largest: only the top token (and its "
          "ties) survives, whatever k",
          untrue=("keepdim", "in place", "temperature")),
        M("top_p_filter", 'return logits.masked_fill(drop, float("-inf"))', "return logits.masked_fill(drop, 0.0)",
          ("-inf", "zero", "0.0", "still", "probability", "dropped"),
          "sets the dropped logits to 0 instead of -inf: they keep probability e^0 relative to the rest",
          untrue=("sorted order", "crossing", "temperature")),
        # adapted from https://github.com/NVIDIA/FasterTransformer/issues/43 (exp of unshifted logits overflowing)
        M("sample_next", "probs = logits.softmax(dim=-1)            # (B, V): filtered tokens get exactly 0",
          "probs = logits.exp()                      # multinomial normalises the weights itself",
          ("overflow", "exp", "inf", "softmax", "max", "large logits"),
          "hands multinomial exp(logits) unnormalised: the same distribution for moderate logits, but logits "
          "above ~88 overflow to inf and the draw fails (https://github.com/NVIDIA/FasterTransformer/issues/43, "
          "a softmax input not shifted by its maximum gave NaN)",
          untrue=("temperature", "top_p", "generator"), regime="logits above ~88"),
        M("generate", "model.eval()                                            # dropout off",
          "model.eval                                              # dropout off",
          ("eval", "without calling", "not called", "parentheses", "train mode", "dropout"),
          "writes model.eval without calling it: the model stays in train mode, dropout on while sampling",
          untrue=("the generator is not used", "top_k_filter"), regime="a model handed over in train mode"),
    ],
    "09": [
        # adapted from https://github.com/PrimeIntellect-ai/prime-rl/pull/583 (micro-batches normalised alone)
        M("train_step_accumulated", "(summed / n_tokens).backward()", "(summed / int((y != -100).sum())).backward()",
          ("micro-batch", "normalis", "normaliz", "n_tokens", "whole batch", "own tokens", "per micro"),
          "divides each micro-batch's summed loss by its own token count: the accumulated gradient is the SUM "
          "of the micro-batch means, about K times the gradient of the batch's mean "
          "(https://github.com/PrimeIntellect-ai/prime-rl/pull/583)",
          untrue=("clip", "zero_grad", "train mode")),
        # adapted from https://github.com/VGraphRNN/VGRNN/issues/4 (clip_grad_norm called after opt.step)
        M("train_step",
          "torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)  # global gradient norm <= grad_clip\n"
          "    optimizer.step()                             # the AdamW update",
          "optimizer.step()                             # the AdamW update\n"
          "    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)  # global gradient norm <= grad_clip",
          ("clip", "before", "after", "optimizer.step", "order", "unclipped"),
          "clips after optimizer.step: the update uses the unclipped gradient and the clipping touches only "
          "gradients nobody reads (https://github.com/VGraphRNN/VGRNN/issues/4)",
          untrue=("zero_grad", "train mode", "item"), regime="a gradient norm above grad_clip"),
        # adapted from https://github.com/huggingface/transformers/issues/1563 (clipping after each backward)
        M("train_step_accumulated", "        total += summed.item()\n"
          "    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)    # once: the whole batch's gradient",
          "        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)  # after every micro-batch\n"
          "        total += summed.item()",
          ("clip", "micro-batch", "once", "each", "partial", "accumulated"),
          "clips the partial sum after every micro-batch instead of the whole batch's gradient once: earlier "
          "micro-batches are shrunk again and again (https://github.com/huggingface/transformers/issues/1563)",
          untrue=("normalis", "normaliz", "zero_grad()"), regime="a gradient norm above grad_clip"),
        # adapted from https://github.com/google-research/bert/issues/1293 (warmup's first learning rate is zero)
        M("lr_schedule", "return max_lr * (step + 1) / warmup_steps", "return max_lr * step / max(1, warmup_steps - 1)",
          ("warmup", "step 0", "zero", "first step", "step + 1", "0-based"),
          "ramps from 0 at step 0 to max_lr at step warmup_steps - 1: the first optimizer step has learning "
          "rate 0 and wastes its batch (https://github.com/google-research/bert/issues/1293)",
          untrue=("cosine", "min_lr", "decay")),
        # adapted from https://github.com/Nerogar/OneTrainer/issues/1604 (cosine progress not clamped, the rate rises)
        M("lr_schedule", "math.cos(math.pi * min(progress, 1.0))", "math.cos(math.pi * progress)",
          ("clamp", "past total_steps", "rises", "increase", "min(progress", "after the end"),
          "does not clamp the progress: past total_steps the cosine climbs again and the rate rises back "
          "towards max_lr (https://github.com/Nerogar/OneTrainer/issues/1604)",
          untrue=("warmup", "step + 1", "zero"), regime="steps past total_steps"),
        M("train_step", "model.train()                                # dropout on",
          "model.training = True                        # dropout on",
          ("train()", "submodule", "training flag", "dropout", "mode", "children"),
          "sets the training flag of the top module only: the submodules (dropout among them) keep the mode "
          "they had",
          untrue=("zero_grad", "clip", "item"), regime="a model handed over in eval mode"),
        M("train_step_costs", "4 * seq_len * config.n_heads * hd * L * tokens",
          "4 * seq_len * config.n_kv_heads * hd * L * tokens",
          ("n_heads", "n_kv_heads", "query heads", "attention matmuls", "gqa"),
          "counts the attention matmuls over the kv heads: under GQA every query head still computes its own "
          "scores and mix",
          untrue=("adam", "tied", "moments"), regime="GQA (n_kv_heads < n_heads)"),
    ],
    "10": [
        M("nll_sum_and_count", "return nll.item(), count", "return nll.item() / max(count, 1), count",
          ("sum", "mean", "divided", "count", "per token"),
          "returns the mean NLL where the sum is asked for: the caller's token-weighted combination divides by "
          "the count a second time",
          untrue=("ignore_index", "bfloat16", "padding")),
        # adapted from https://github.com/kohya-ss/musubi-tuner/pull/759 (the caller's training mode not preserved)
        M("evaluate",
          "was_training = model.training\n"
          "    model.eval()                                             # dropout off while measuring",
          "model.eval()                                             # dropout off while measuring\n"
          "    was_training = model.training",
          ("mode", "train mode", "restore", "was_training", "after eval"),
          "reads the caller's mode after switching to eval: it always 'restores' eval mode, so a model handed "
          "over in train mode comes back in eval mode (https://github.com/kohya-ss/musubi-tuner/pull/759 fixed a "
          "model left in the wrong mode after inference)",
          untrue=("no_grad", "tokens", "bits"), regime="a model handed over in train mode"),
        M("bigram_nll", "train, val = train.long(), val.long()", "train = train.long()",
          ("uint8", "long", "index", "mask", "dtype", "int64"),
          "converts only the training bytes: uint8 validation bytes used as indices are read as boolean masks "
          "(an IndexError, or the wrong entries)",
          untrue=("alpha", "transposed", "sum"), regime="uint8 validation bytes"),
        M("nll_sum_and_count", "targets.flatten(), ignore_index=ignore_index", "targets.flatten(), ignore_index=-100",
          ("ignore_index", "-100", "argument", "hard-coded", "hardcoded", "padding"),
          "passes -100 to cross_entropy whatever ignore_index says: with another ignore_index the padding is "
          "scored while the count leaves it out",
          untrue=("bfloat16", "mean", "python int")),
        M("bigram_nll", "counts.sum(dim=1, keepdim=True) + 256 * alpha", "counts.sum() + 256 * alpha",
          ("each row", "normalis", "normaliz", "sum to 1", "dim=1", "joint", "per previous byte"),
          "divides by the total of all counts instead of each row's: the table holds joint probabilities "
          "p(prev, next), not conditional ones",
          untrue=("transposed", "uint8", "256 * alpha")),
        M("evaluate", "s, n = nll_sum_and_count(model(x.to(dev)), y.to(dev))",
          "s, n = nll_sum_and_count(model(x.to(dev)), x.to(dev))",
          ("targets", "inputs", "shift", "x instead of y", "labels", "against x"),
          "scores the predictions against the inputs x instead of the targets y: each position is asked to "
          "predict the token it just read",
          untrue=("eval mode", "bits", "batches")),
    ],
}

SAME = [
    ("02", M("layer_norm", "var = centred.pow(2).mean(dim=-1, keepdim=True)",
             "var = x.var(dim=-1, unbiased=False, keepdim=True)", (),
             "the biased variance from torch.var (unbiased=False divides by d)")),
    ("03", M("causal_attention", "mask = causal_mask(q.shape[-2], k.shape[-2]).to(q.device)",
             "mask = causal_mask(k.shape[-2], k.shape[-2])[-q.shape[-2]:].to(q.device)", (),
             "the last Tq rows of the square mask: the bottom-right alignment the rectangular mask has")),
    ("03", M("causal_mask", "allowed.tril(diagonal=kv_len - q_len)", "~allowed.triu(diagonal=kv_len - q_len + 1)", (),
             "the complement of the strictly-future upper triangle")),
    ("04", M("rope_cache", "torch.outer(torch.arange(max_seq_len, dtype=torch.float32), inv_freq)",
             "torch.arange(max_seq_len, dtype=torch.float32)[:, None] * inv_freq", (),
             "the outer product written as a broadcast multiplication")),
    ("05", M("swiglu_hidden", "return multiple * math.ceil(8 * d_model / 3 / multiple)",
             "return -(-8 * d_model // (3 * multiple)) * multiple", (),
             "the ceiling in integer arithmetic")),
    ("06", M("kv_cache_bytes", "dtype.itemsize", "torch.empty((), dtype=dtype).element_size()", (),
             "the element size read from a tensor of that dtype")),
    ("06", M("generate_greedy", "next_id = logits.argmax(dim=-1, keepdim=True)",
             "next_id = logits.topk(1, dim=-1).indices", (),
             "the index of the largest logit from topk(1), already (B, 1)")),
    ("07", M("repeat_kv", "x = x[:, :, None].expand(B, n_kv, n_rep, T, hd)  # (B, n_kv, n_rep, T, hd): "
             "a view, copies of each kv head side by side\n    return x.reshape(B, n_kv * n_rep, T, hd)",
             "return x.repeat_interleave(n_rep, dim=1)", (),
             "repeat_interleave on the head axis: each kv head's copies side by side")),
    # adapted from https://github.com/ggml-org/llama.cpp/issues/4091 (where in the chain the temperature goes)
    ("08", M("sample_next", "logits = logits / temperature             # on logits, before any filter\n"
             "    if top_k is not None:\n        logits = top_k_filter(logits, top_k)",
             "if top_k is not None:\n        logits = top_k_filter(logits, top_k)\n"
             "    logits = logits / temperature             # after top-k, before top-p", (),
             "divides by the temperature after top-k and before top-p: top-k only ranks the logits, and dividing "
             "by a positive temperature keeps their order, so the kept set and the draw are the same "
             "(https://github.com/ggml-org/llama.cpp/issues/4091 discusses where temperature goes in the chain)")),
    ("09", M("lm_loss", "logits.flatten(0, 1)", "logits.reshape(-1, logits.shape[-1])", (),
             "reshape merges (B, T) as flatten does, copying when the logits are not contiguous")),
    ("10", M("evaluate", '"bits_per_byte": loss / math.log(2) / bytes_per_token',
             '"bits_per_byte": math.log2(math.exp(loss)) / bytes_per_token', (),
             "log2 of the perplexity is the loss in bits")),
    ("01", M("one_hot_embed", ".to(weight.dtype)", ".to(weight)", (),
             ".to(tensor) takes the table's dtype (and device)")),
    ("02", M("rms_norm", "(x32 * inv_rms)", "(x * inv_rms)", (),
             "type promotion converts x to float32 before the product, exactly as x32 is")),
    ("03", M("causal_attention", 'scores = scores.masked_fill(~mask, float("-inf"))',
             'scores = scores.masked_fill_(~mask, float("-inf"))', (),
             "fills in place a tensor the function made itself")),
    ("06", M("attention_step", "mask = tinylm.causal_mask(T, start + T).to(x.device)",
             "mask = tinylm.causal_mask(start + T)[-T:].to(x.device)", (),
             "the last T rows of the square mask: the bottom-right aligned rectangle")),
    ("09", M("train_step", "return loss.item()", "return float(loss)", (),
             "float() of a one-element tensor is its value")),
]
