"""A sixteenth held-out set of learner mistakes ("fresh13"), written without
reading the checks: neither autograder/checks/, tests/checks/,
autograder/diagnosis_*.py, the diagnosis code of bench_diagnostics.py nor the
diagnosis sections of docs/benchmarks.md were opened, and no mistake was tried
against a check, before the set was committed and measured. The 64 mistakes
come from the notebook sources (exercise prose, signatures and solution cells
of autograder/authoring/notebook_src/, read through
bench_diagnostics.notebook_cells, which returns the answer cells apart from the
checks), from tinylm and, for 17 of them, from bugs public projects shipped or
were asked to fix (the thread is named above the entry and in its reason; none
of these addresses occurs in another set, by `grep -rl URL
benchmarks/mutations/`). Of the other sets only fresh12.py's docstring and first
entries (for the format), unseen.py (for the entry class) and __init__.py were
read. benchmarks/heldout_duplicates.py --set fresh13 compared the texts
mechanically and printed only matches: 60 entries written first (55 mistakes,
5 SAME edits) were character for character in another set and were replaced by
other mistakes, until none matched (10 of them carried a public thread, which the set lost
with them). One more mistake was replaced because no probe saw it (a
generated token marked as padding: tinylm lets a padding query attend to every
key, and greedy decoding came out the same). Run:
`bench_diagnostics.py --set fresh13`.

Each mistake is one substitution in one answer cell; `expect` holds words a
check that found it would likely say, `untrue` words of causes it is not,
`regime` where a mistake that is right by default shows. The classes covered:
dtype (bfloat16 cos/sin tables and positions, an uncast sin table, float16
squares, bfloat16 losses, a float attention mask, torch.finfo of an integer
dtype), device (a one-hot built on the CPU, batches sent to DEVICE rather than
to the model), in-place edits of the caller's logits, a mode not restored or
not set, gradients cut by a detach, off-by-one positions, windows and warmup
steps, wrong axes and broadcasts, padding and ignore_index, generator
handling, numerical regimes (cancellation in E[x²] - E[x]²) and the accounting
exercises' formulas. SAME lists 16 edits that compute what the solution
computes another way; a check must pass each.

`benchmarks/verify_unseen.py --set fresh13` proves each mistake a real bug and
each SAME edit harmless, with the shared probes and those of
benchmarks/unseen_probes_fresh13.py (a layer norm of rows with a large mean, an
RMSNorm module's input gradient, 4 kv heads for 8 query heads, a sampler
handed logits it must keep, a model off the notebook's DEVICE).

After the first measurement, reading every printed line against its reason
found the one line the keyword count called untrue to be true of the code:
"cumsum" is a word of the right line too (one of its examples of an operation
run across the batch axis); that word was narrowed to "cumsum over", nothing
else in the set changed.
"""
from __future__ import annotations

from .unseen import Unseen as M

SHAPE = ("shape", "axis", "layout", "transpose", "dim")
DTYPE = ("dtype", "float32", "float16", "bfloat16", "precision", "cast", "upcast")
START = ("start_pos", "offset", "cached", "position")
MODE = ("train mode", "eval mode", "training", "mode", "restore", "was_training")

MUTATIONS = {
    "01": [
        M("one_hot_embed", "F.one_hot(ids, num_classes=weight.shape[0])",
          "F.one_hot(ids, num_classes=weight.shape[0] + 1)[..., 1:]",
          ("off by one", "off-by-one", "shift", "row id - 1", "id 0", "zero row", "num_classes"),
          "one-hot encodes over V + 1 classes and drops the first column, as if ids started at 1: id i picks row "
          "i - 1 of the table and id 0 picks nothing (a row of zeros)",
          untrue=("dtype", "transpose", "device")),
        M("embed", "return weight[ids]", "return weight.detach()[ids]",
          ("gradient", "detach", "no grad", "trained", "learn", "grad is none"),
          "looks the rows up in a detached copy of the table: the values are weight[ids], but no gradient reaches "
          "the table: the output does not require grad, so a loss built on it alone cannot be backpropagated "
          "(backward raises 'element 0 of tensors does not require grad'), and inside a model the table's .grad "
          "stays None: the embedding never trains",
          regime="training (a backward pass)", untrue=("dtype", "transpose", "index")),
        M("one_hot_embed", "F.one_hot(ids, num_classes=weight.shape[0])",
          "F.one_hot(ids.cpu(), num_classes=weight.shape[0])",
          ("device", "cpu", "cuda", "meta", "same device", ".to("),
          "builds the one-hot rows on the CPU whatever device the ids and table are on: on the CPU the result is "
          "weight[ids], but with ids and table on a GPU the product of a CPU one-hot with a GPU table raises "
          "(on the meta device, .cpu() itself raises: a meta tensor holds no data to copy)",
          regime="ids and table on another device than the CPU", untrue=("dtype", "num_classes", "transpose")),
        M("tied_logits", "return x @ weight.T", "return x @ weight.T * x.shape[-1] ** -0.5",
          ("scale", "sqrt", "d_model", "1/sqrt", "too small", "temperature", "scaled"),
          "multiplies the logits by 1/sqrt(d), as attention scales its scores: every logit is x·W_v / sqrt(d) "
          "instead of x·W_v, so the logits (and their gradient) are sqrt(d) times too small and the softmax "
          "over the vocabulary is too flat",
          untrue=("transpose", "dtype", "softmax axis", "bias")),
        M("tie_weights", "lm_head.weight = tok_emb.weight", "lm_head.weight = nn.Parameter(tok_emb.weight)",
          ("same parameter", "is tok_emb.weight", "two parameters", "separate parameter", "not tied", "new parameter",
           "nn.parameter", "distinct"),
          "wraps the embedding's weight in a new nn.Parameter: the two share storage, so the values match at "
          "first, but lm_head.weight is not tok_emb.weight, the model lists two Parameters, each gets its own "
          "gradient and optimizer state, and the tie is lost as soon as either is replaced",
          untrue=("dtype", "transpose", "values differ")),
    ],
    "02": [
        M("RMSNorm", "return rms_norm(x, self.weight, self.eps)", "return rms_norm(x.detach(), self.weight, self.eps)",
          ("gradient", "detach", "input", "backward", "earlier layers", "graph"),
          "normalises a detached copy of the input: the output and the gain's gradient are right, but no "
          "gradient flows back through the norm into x, so every layer before an RMSNorm stops learning",
          regime="training (a backward pass through the norm)", untrue=("eps", "dtype", "parameter")),
        # https://github.com/xlite-dev/LeetCUDA/pull/335 (float16 squares overflow inside RMSNorm)
        M("rms_norm", "x32.pow(2).mean(dim=-1, keepdim=True)", "x.pow(2).float().mean(dim=-1, keepdim=True)",
          DTYPE + ("overflow", "inf", "square", "65504"),
          "squares x in its own dtype and upcasts the squares afterwards, the overflow xlite-dev/LeetCUDA#335 "
          "fixed: a float16 entry above 256 squares to inf (float16 tops out at 65504), the mean square is inf, "
          "inv_rms is 0 and the whole token comes out 0; float32 input is unaffected",
          regime="float16 input with entries above 256", untrue=("axis", "eps", "keepdim")),
        # https://github.com/huggingface/transformers/pull/40796 (a (1 + weight) norm with a gain initialised at 1
        # doubles its output)
        M("rms_norm", "return weight * (x32 * inv_rms).to(x.dtype)",
          "return (1 + weight) * (x32 * inv_rms).to(x.dtype)",
          ("1 + weight", "gain", "offset", "gemma", "zero-centred", "zero-centered", "doubl", "twice"),
          "scales by (1 + weight), Gemma's zero-centred convention, on a gain stored centred at 1: with the "
          "fresh gain of ones every output is twice the normalised token, the doubling huggingface/"
          "transformers#40796 describes, and any trained gain w acts as 1 + w",
          untrue=("eps", "axis", "dtype", "overflow")),
        # https://github.com/tracel-ai/burn/issues/5607 (layer norm variance as E[x^2] - E[x]^2 cancels for rows with
        # a large mean)
        M("layer_norm", "var = centred.pow(2).mean(dim=-1, keepdim=True)         # (..., 1): biased, divides by d",
          "var = x.pow(2).mean(dim=-1, keepdim=True) - x.mean(dim=-1, keepdim=True).pow(2)  # E[x²] - E[x]²",
          ("cancellation", "e[x²]", "e[x^2]", "large mean", "precision", "variance", "negative", "nan", "offset"),
          "computes the variance as E[x²] - E[x]², as tracel-ai/burn#5607 reports: algebraically the same, but "
          "in float32 the two terms of a row with mean 1e4 and spread 1 are about 1e8, whose spacing is 8, so "
          "the difference is noise (even negative: NaN) and the output is far from F.layer_norm; rows with a "
          "mean near 0 are right",
          regime="rows whose mean is large against their spread (e.g. 1e4 + N(0, 1))",
          untrue=("unbiased", "axis", "eps")),
        M("RMSNorm", "self.weight = nn.Parameter(torch.ones(dim))",
          'self.register_buffer("weight", torch.ones(dim))',
          ("parameter", "buffer", "trained", "learn", "named_parameters", "optimizer", "gradient"),
          "registers the gain as a buffer: the forward pass is right and load_state_dict still fills it, but "
          "RMSNorm has no parameters (named_parameters() is empty), so no optimizer ever sees the gain and it "
          "never learns",
          untrue=("eps", "dtype", "axis")),
        M("RMSNorm", "self.weight = nn.Parameter(torch.ones(dim))", "self.weight = nn.Parameter(torch.zeros(dim))",
          ("zero", "ones", "initialis", "initializ", "gain", "starts at 1", "all zeros"),
          "initialises the gain at 0 (the zero-centred convention of a (1 + weight) norm) while rms_norm "
          "multiplies by the gain itself: a fresh RMSNorm outputs all zeros, so a fresh model's blocks read "
          "zeros and the final norm feeds the head zeros",
          untrue=("eps", "dtype", "axis", "buffer")),
        M("rms_norm", "x32.pow(2).mean(dim=-1, keepdim=True)", "x32.pow(2).mean(dim=1, keepdim=True)",
          SHAPE + ("last axis", "dim=-1", "dim=1", "per token", "sequence", "positions"),
          "averages the squares over axis 1: for a 2-D (tokens, d) input that is the feature axis and the result "
          "is right, but for (B, T, d) it averages over the T positions of each feature, so every token is scaled "
          "by statistics of the other positions",
          regime="inputs with more than two axes", untrue=("eps", "dtype", "keepdim")),
    ],
    "03": [
        M("attention_flops", '"scores": B * n_heads * per_head', '"scores": n_heads * per_head',
          ("batch", "b *", "per sequence", "batch size"),
          "counts the scores of one sequence only: the batch factor B is left out of the scores (the mix keeps "
          "it), so with a batch of 3 the scores are a third of what FlopCounterMode counts",
          regime="a batch of more than one", untrue=("head_dim", "causal", "multiply-add")),
        M("causal_attention", "return weights @ v", "return weights.transpose(-2, -1) @ v",
          ("transpose", "rows", "columns", "weights", "axis", "each row sums"),
          "multiplies the values by the transposed weights: column j of the (square) weight matrix is used as "
          "row j, so output i mixes values with weights that are not query i's (the future leaks back and rows "
          "no longer sum to 1); with fewer queries than keys the shapes do not fit and it raises",
          untrue=("scale", "-inf", "dtype")),
        M("split_heads", "x = x.view(B, T, n_heads, d // n_heads)",
          "x = x.view(B, T, d // n_heads, n_heads).transpose(-2, -1)",
          SHAPE + ("head", "features", "strided", "contiguous", "h*hd", "interleav"),
          "splits the features with the head index fastest: head h gets features h, h + H, h + 2H, ... instead "
          "of the contiguous block h·hd .. (h+1)·hd - 1; the shape is (B, H, T, hd) as asked, but merge_heads "
          "(which puts heads side by side) no longer inverts it and pretrained per-head weights land on the "
          "wrong features",
          regime="more than one head", untrue=("dtype", "mask", "scale")),
        M("self_attention", "split_heads(F.linear(x, w), n_heads)", "split_heads(x @ w, n_heads)",
          ("transpose", "layout", "[d_out, d_in]", "w.t", "f.linear", "projection"),
          "projects with x @ w, i.e. with the transposed weight: F.linear(x, w) is x @ wᵀ because the matrices "
          "are stored [d_out, d_in], so q, k and v all use w_q.T, w_k.T, w_v.T (the output projection is right)",
          untrue=("mask", "scale", "merge", "dtype")),
        # https://github.com/facebookresearch/fvcore/issues/69 (a multiply-add counted as one FLOP)
        M("attention_flops", "projection = 2 * B * T * d * d", "projection = B * T * d * d",
          ("multiply-add", "2 flops", "two flops", "mac", "factor 2", "half", "projection"),
          "counts one FLOP per multiply-add in the projections (MACs, the convention facebookresearch/fvcore#69 "
          "explains), while the scores and the mix still count two: qkv_proj and out_proj come out half of what "
          "FlopCounterMode counts",
          untrue=("batch", "causal", "head_dim")),
    ],
    "04": [
        M("rope_cache", "torch.outer(torch.arange(max_seq_len, dtype=torch.float32), inv_freq)",
          "torch.outer(torch.arange(1, max_seq_len + 1, dtype=torch.float32), inv_freq)",
          ("position 0", "from 1", "off by one", "off-by-one", "first row", "identity", "positions"),
          "numbers the positions from 1: row t of the tables holds the angles of position t + 1, so position 0 "
          "is rotated instead of left as it is; attention scores, which depend on the difference of two "
          "positions, do not change, but the tables (and each rotated q, k) are not tinylm's",
          untrue=("theta", "dtype", "cat", "swapped")),
        M("rotary_attention", "k = apply_rope(k, cos, sin, start_pos)", "k = apply_rope(k, cos, sin, start_pos + 1)",
          START + ("keys", "one position", "off by one", "off-by-one", "relative"),
          "rotates the keys one position further than the queries: every score sees the distance i - j - 1 "
          "instead of i - j, so the attention is that of keys shifted by one place",
          untrue=("dtype", "values", "mask", "scale")),
        M("rope_cache", "dtype=torch.float32) / head_dim)", "dtype=torch.float32) / (head_dim - 2))",
          ("frequenc", "exponent", "head_dim", "2i/d", "inv_freq", "theta"),
          "divides the exponent by head_dim - 2 so that the last pair turns at exactly theta^-1: every pair but "
          "the first turns at theta^(-2i/(hd - 2)) instead of theta^(-2i/hd), slower than tinylm's tables",
          untrue=("positions", "dtype", "cat", "swapped")),
        # https://github.com/KellerJordan/modded-nanogpt/issues/39 (cos and sin tables stored in bfloat16)
        M("rope_cache", "return angles.cos(), angles.sin()", "return angles.cos().bfloat16(), angles.sin().bfloat16()",
          DTYPE + ("cos", "sin", "tables"),
          "rounds the cos and sin tables to bfloat16, what KellerJordan/modded-nanogpt#39 reports: the tables "
          "are no longer float32 as the docstring says, and each entry carries an error of up to 2^-9 relative "
          "(about 2e-3), so rotations are no longer exact and lengths drift",
          untrue=("theta", "positions", "start_pos", "swapped")),
        # https://github.com/huggingface/transformers/pull/29285 (RoPE positions in bfloat16 lose precision)
        M("rope_cache", "torch.arange(max_seq_len, dtype=torch.float32)",
          "torch.arange(max_seq_len, dtype=torch.bfloat16).float()",
          DTYPE + ("positions", "256", "rounded", "long sequences"),
          "builds the positions in bfloat16 before upcasting, the precision loss huggingface/transformers#29285 "
          "fixed: bfloat16 holds integers exactly only up to 256, so above 256 every odd position is rounded "
          "to an even neighbour (above 512 to a multiple of 4, and so on) and those tokens share a neighbour's "
          "angles",
          regime="positions above 256", untrue=("theta", "inv_freq", "cat", "swapped")),
        M("rope_cache", "angles = torch.cat((angles, angles), dim=-1)", "angles = angles.repeat_interleave(2, dim=-1)",
          ("interleav", "half", "layout", "pair", "cat", "repeat_interleave", "i + hd/2"),
          "repeats each angle in place (θ0, θ0, θ1, θ1, ...), the interleaved layout, while rotate_half pairs "
          "feature i with feature i + hd/2: the tables no longer give a pair one shared angle, so the result is "
          "not a rotation (norms change) and differs from tinylm's tables",
          untrue=("theta", "dtype", "sign", "start_pos")),
        M("apply_rope", "    sin = sin[start_pos:start_pos + T].to(x.dtype)\n",
          "    sin = sin[start_pos:start_pos + T]\n",
          DTYPE + ("sin",),
          "casts the cos table to x's dtype but not the sin table: float32 x is unaffected, but bfloat16 x "
          "comes out float32 (x·cos stays bfloat16, rotate_half(x)·sin is promoted), and the attention that "
          "follows mixes float32 queries with bfloat16 values",
          regime="inputs that are not float32", untrue=("start_pos", "sign", "swapped", "offset")),
    ],
    "05": [
        M("swiglu", "up = x @ w_up.T              # (B, T, d_ff): linear", "up = F.silu(x @ w_up.T)     # (B, T, d_ff)",
          ("linear", "silu", "both", "up branch", "gate only", "nonlinearity"),
          "applies SiLU to the up branch as well: SwiGLU is silu(x W_gate) * (x W_up) with a linear up branch, "
          "so the product silu(a)·silu(b) differs wherever x·W_up is not large and positive",
          untrue=("sigmoid", "transpose", "w_down", "dtype")),
        M("Transformer", "x = x + self.attn(self.attn_norm(x), cos, sin, cache, layer_idx)",
          "x = x + self.attn(self.attn_norm(x), cos, sin, cache, 0)",
          ("layer_idx", "layer 0", "cache", "every layer", "same layer", "cached"),
          "passes layer 0 to the attention of every block: without a cache nothing changes, but with one every "
          "layer writes its keys and values into layer 0's slot and reads layer 0's history, so cached decoding "
          "differs from the full pass",
          regime="decoding with a KV cache and more than one layer", untrue=("start_pos", "mask", "dtype")),
        M("param_counts", '"norms": (2 * L + 1) * d', '"norms": 2 * (2 * L + 1) * d',
          ("bias", "norm", "rmsnorm", "weight only", "layernorm", "gain"),
          "counts a weight and a bias for every norm, as for LayerNorm: RMSNorm has only its gain, so the norms "
          "are counted twice their size",
          untrue=("tied", "n_kv_heads", "d_ff")),
        # https://github.com/foundation-model-stack/fms-fsdp/pull/52 (the SwiGLU width rounded to nearest, not up)
        M("swiglu_hidden", "math.ceil(8 * d_model / 3 / multiple)", "round(8 * d_model / 3 / multiple)",
          ("round", "ceil", "up", "nearest", "multiple", "8/3"),
          "rounds 8/3 · d_model to the nearest multiple instead of up, the mismatch foundation-model-stack/"
          "fms-fsdp#52 fixed: 8/3 · 64 = 170.7 is 5.33 multiples of 32 and gives 160 instead of 192, a "
          "narrower MLP than the rule and than checkpoints built with it",
          untrue=("integer division", "8 // 3", "2 * d")),
        M("swiglu", "gate = F.silu(x @ w_gate.T)  # (B, T, d_ff): the nonlinearity lives on the gate only\n"
          "    up = x @ w_up.T              # (B, T, d_ff): linear",
          "gate = F.silu(x @ w_up.T)  # (B, T, d_ff)\n    up = x @ w_gate.T              # (B, T, d_ff)",
          ("gate", "up", "swapped", "w_gate", "w_up", "silu on", "nonlinearity"),
          "swaps the two input matrices: SiLU is applied to x·w_upᵀ and the linear branch uses w_gate, so "
          "silu(a)·b becomes silu(b)·a; the shapes are right, the values are not (and pretrained gate/up "
          "weights would be used the wrong way round)",
          untrue=("sigmoid", "dtype", "transpose", "w_down")),
        M("Transformer", "apply_rope(q, cos, sin, start_pos), apply_rope(k, cos, sin, start_pos)",
          "apply_rope(q, cos, sin), apply_rope(k, cos, sin)",
          START + ("cache", "decode", "start_pos", "position 0"),
          "rotates the new queries and keys from position 0 whatever the cache holds: logits without a cache "
          "are right, but every decoding step after a prefill rotates its token as if it were position 0, so the "
          "cached logits differ from the full pass",
          regime="decoding with a KV cache (cache.length > 0)", untrue=("mask", "dtype", "n_kv_heads", "transpose")),
        M("param_counts", '"mlp": L * 3 * d * config.d_ff', '"mlp": L * 3 * d * swiglu_hidden(d)',
          ("d_ff", "config.d_ff", "8/3", "swiglu_hidden", "mlp", "ignores"),
          "recomputes the MLP width from the 8/3 rule instead of reading config.d_ff: right only when d_ff was "
          "left to the default rule, wrong for a config that sets d_ff itself (d_ff=100 is counted as 96)",
          regime="a config whose d_ff is set explicitly", untrue=("tied", "norms", "n_kv_heads")),
    ],
    "06": [
        M("generate_left_padded",
          "    cache.reset()                                        "
          "               # it may hold an earlier batch\n", "",
          ("reset", "stale", "earlier batch", "cache", "previous prompts", "cache.length"),
          "never empties the cache: a first call is right, but a second call with the same cache appends the new "
          "batch after the earlier one's positions, so its prompts attend to another batch's keys (and the mask "
          "no longer covers the cache)",
          regime="a cache used before", untrue=("positions", "padding side", "dtype")),
        M("cache_update", "v_all = torch.cat((past_v, v), dim=2)", "v_all = torch.cat((v, past_v), dim=2)",
          ("order", "values", "past first", "new values first", "v_all", "prepend"),
          "puts the new values before the cached ones while the keys keep the past first: after the first step "
          "key j no longer matches value j, so attention mixes the wrong values (the prefill from an empty cache "
          "is right)",
          regime="a non-empty cache", untrue=("dtype", "axis")),
        # https://github.com/pytorch/pytorch/issues/103963 (a float attn_mask is added to the scores, a bool one masks)
        M("attention_step", "mask = tinylm.causal_mask(T, start + T).to(x.device)",
          "mask = tinylm.causal_mask(T, start + T).to(x.device).float()",
          DTYPE + ("bool", "float mask", "added", "additive", "bias", "future"),
          "hands SDPA a float mask of 1.0 and 0.0: SDPA adds a float mask to the scores (the behaviour "
          "pytorch/pytorch#103963 discusses) instead of blocking, so allowed keys get +1 and future keys +0 and "
          "every query attends to the future",
          untrue=("is_causal", "rope", "start", "transpose")),
        # https://github.com/AlexsJones/llmfit/issues/418 (a KV-cache estimate that assumes 2 bytes per number)
        M("kv_cache_bytes", "return per_position * seq_len * batch_size * dtype.itemsize",
          "return per_position * seq_len * batch_size * 2",
          DTYPE + ("itemsize", "bytes per", "2 bytes", "element_size"),
          "hard-codes 2 bytes a number (fp16), the assumption AlexsJones/llmfit#418 asks to drop: right for "
          "bfloat16 and float16 caches, half the bytes of a float32 cache and twice those of an int8 one",
          regime="a cache dtype other than float16/bfloat16", untrue=("n_kv_heads", "n_layers", "batch")),
        # https://github.com/pytorch/executorch/pull/21749 (is_causal is top-left aligned when queries follow a cache)
        M("attention_step", "F.scaled_dot_product_attention(q, k_all, v_all, attn_mask=mask)",
          "F.scaled_dot_product_attention(q, k_all, v_all, is_causal=True)",
          ("is_causal", "top-left", "bottom-right", "mask", "cached", "only the first key", "alignment"),
          "asks SDPA for is_causal=True, which aligns the mask top-left, the silent bug pytorch/executorch#21749 "
          "fixed: the prefill (no cache) is right, but a step after it attends query i to keys 0..i only, so a "
          "one-token decode step sees only the first cached key",
          regime="a step after the prefill (start > 0)", untrue=("dtype", "rope", "transpose")),
        M("generate_left_padded", "positions[:, -1:] + 1", "positions[:, -1:] + positions.shape[1]",
          START + ("one past", "+ 1", "prompt length", "jump", "advance"),
          "advances the positions by the width of the last input instead of by 1: after the prefill the first "
          "new token is placed T positions past the last prompt token instead of one (later steps, of width 1, "
          "add 1 again), so every token fed back from the first generated one on is rotated at the wrong "
          "position (the first returned token, predicted by the prefill, is right)",
          untrue=("mask", "padding side", "dtype", "reset")),
        M("generate_greedy", "step_input = next_id                                # decode: one new token per step",
          "step_input = idx                                    # the whole sequence again",
          ("cache", "whole sequence", "re-feed", "again", "duplicate", "step_input", "only the new token"),
          "feeds the whole sequence again at every step while the cache keeps the earlier positions: each step "
          "appends the prompt's keys a second time and places the tokens after them, so the continuation is "
          "not greedy decoding of the prompt (and the cache overflows max_seq_len early)",
          untrue=("argmax", "dtype", "reset", "no_grad")),
    ],
    "07": [
        M("gqa_attention", "F.scaled_dot_product_attention(q, k, v, is_causal=True)",
          "F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1.0)",
          ("scale", "sqrt", "head_dim", "1/sqrt", "too sharp", "default"),
          "passes scale=1.0, taking it for 'the default': SDPA then uses no scaling at all instead of "
          "1/sqrt(head_dim), so the scores are sqrt(hd) times too large and the softmax too sharp",
          untrue=("causal", "repeat", "order", "dtype")),
        M("gqa_step", "attn.n_heads // attn.n_kv_heads", "attn.n_kv_heads // attn.n_heads",
          ("n_rep", "n_heads // n_kv", "ratio", "inverted", "upside down"),
          "divides the kv heads by the query heads: for multi-head attention both are 1, but for GQA the repeat "
          "count is 0, the repeated keys and values have no heads, and SDPA broadcasts that empty head axis "
          "against the query heads and returns all zeros",
          regime="fewer kv heads than query heads", untrue=("mask", "rope", "dtype")),
        M("gqa_step", "repeat_kv(v_all, n_rep), attn_mask=mask)", "repeat_kv(k_all, n_rep), attn_mask=mask)",
          ("values", "keys instead", "v_all", "k_all", "copy"),
          "passes the repeated keys as the values (a copy-paste slip): the weights are right but they mix keys, "
          "so the output is a mixture of keys and v is never used",
          untrue=("mask", "n_rep", "dtype", "order")),
        M("gqa_attention", "n_rep = q.shape[1] // k.shape[1]", "n_rep = k.shape[1]",
          ("n_rep", "n_heads // n_kv", "ratio", "kv heads", "number of kv heads", "q.shape[1]"),
          "takes the number of kv heads as the repeat count: with 4 query heads and 2 kv heads both are 2, and "
          "with 1 kv head SDPA broadcasts the single key head over the 4 query heads, so both give the right "
          "result; with 8 query heads and 4 kv heads the keys are repeated 4 times into 16 heads against 8 "
          "query heads and SDPA raises",
          regime="n_kv_heads other than 1 and other than n_heads / n_kv_heads (e.g. 8 heads, 4 kv heads)",
          untrue=("causal", "dtype", "order")),
        M("gqa_step", "mask = tinylm.causal_mask(T, start + T).to(x.device)  # (T, start + T)",
          "mask = tinylm.causal_mask(start + T).to(x.device)[:T]  # (T, start + T)",
          ("first rows", "last rows", "top-left", "bottom-right", "cached", "only the first key", "mask"),
          "takes the first T rows of the square mask instead of the last T: the rows are for positions 0..T-1, "
          "so after a prefill a step's queries see only the first keys (query i sees keys 0..i); the prefill "
          "itself is right",
          regime="a step after the prefill (start > 0)", untrue=("repeat", "dtype", "rope")),
        M("decode_bytes_per_token", "hd * context_len * size", "hd * (context_len + 1) * size",
          ("context_len", "off by one", "off-by-one", "one position", "+ 1", "new token"),
          "counts context_len + 1 cached positions: the key and value of one extra position per layer, so the "
          "kv_cache bytes are off by 2·L·n_kv·hd·itemsize",
          untrue=("weights", "tied", "n_heads")),
        M("decode_bytes_per_token", "size = config.d_model, config.n_layers, config.head_dim, dtype.itemsize",
          "size = config.d_model, config.n_layers, config.head_dim, torch.finfo(dtype).bits // 8",
          DTYPE + ("int8", "integer", "finfo", "itemsize", "iinfo"),
          "reads the bytes per number from torch.finfo, which knows floating dtypes only: the same for "
          "bfloat16 and float32, but an integer dtype such as int8 raises TypeError instead of counting 1 byte",
          regime="an integer dtype", untrue=("tied", "kv heads", "context_len")),
    ],
    "08": [
        # https://github.com/NVIDIA/TensorRT-LLM/pull/15542 (the review asks that a sampler dividing logits in place
        # say so: the caller's tensor is changed)
        M("sample_next", "logits = logits / temperature             # on logits, before any filter",
          "logits /= temperature                      # on logits, before any filter",
          ("in place", "in-place", "caller", "modif", "/=", "input"),
          "divides the caller's logits in place, the contract the review of NVIDIA/TensorRT-LLM#15542 asks to "
          "make explicit: the draw is right, but after sample_next(logits, 0.5) the caller's logits are twice "
          "what they were (a second call samples from a sharper distribution)",
          regime="a temperature other than 1", untrue=("generator", "order", "top_p")),
        M("top_p_filter", "logits.sort(dim=-1, descending=True)", "logits.sort(dim=0, descending=True)",
          SHAPE + ("sort", "vocabulary axis", "dim=-1", "batch axis", "rows"),
          "sorts along axis 0, across the rows of the batch, instead of along the vocabulary: the cumulative "
          "masses and the scatter back use row indices as token indices, so the nucleus is wrong for any batch "
          "of more than one row (with one row the sort is a no-op, so the masses are accumulated in vocabulary "
          "order instead of from the most likely token down)",
          untrue=("temperature", "crossing", "cumsum over")),
        M("top_k_filter", "kth = logits.topk(k, dim=-1).values[..., -1:]",
          "kth = logits.topk(k, dim=-1).values[..., -1]",
          SHAPE + ("broadcast", "keepdim", "(b, 1)", "-1:", "rows", "batch"),
          "takes the k-th value without keeping its axis: a (B,) threshold against (B, V) logits broadcasts "
          "along the vocabulary, so with one row it is right, with several rows it raises (or, where B == V, "
          "compares token j with row j's threshold)",
          regime="more than one row", untrue=("<=", "ties", "k-1", "dtype")),
        # https://github.com/huggingface/transformers/pull/8686 (temperature applied after the top-p/top-k filters)
        M("sample_next", "    logits = logits / temperature             # on logits, before any filter\n"
          "    if top_k is not None:\n        logits = top_k_filter(logits, top_k)\n"
          "    if top_p is not None:\n        logits = top_p_filter(logits, top_p)\n"
          "    probs = logits.softmax(dim=-1)            # (B, V): filtered tokens get exactly 0\n",
          "    if top_k is not None:\n        logits = top_k_filter(logits, top_k)\n"
          "    if top_p is not None:\n        logits = top_p_filter(logits, top_p)\n"
          "    probs = (logits / temperature).softmax(dim=-1)  # tempered after the filters\n",
          ("temperature", "before the filter", "after the filter", "order", "nucleus", "top_p"),
          "divides by the temperature after the filters, the order huggingface/transformers#8686 moved back: "
          "top-k is unaffected, but top-p chooses its nucleus from the untempered distribution, so at "
          "T = 0.5 and p = 0.8 logits (2, 1, 0) keep tokens 0 and 1 instead of token 0 alone",
          regime="top_p with a temperature other than 1", untrue=("generator", "argmax", "squeeze")),
        M("sample_next", "generator=generator).squeeze(-1)",
          "generator=None if generator is None else torch.Generator().manual_seed(generator.initial_seed()))"
          ".squeeze(-1)",
          ("generator", "seed", "same draw", "repeat", "stream", "re-seed", "reseed", "initial_seed"),
          "re-creates a generator from the caller's seed at every call: one call is reproducible, but the "
          "caller's generator never advances, so two calls with one generator draw exactly the same tokens "
          "(a generation repeats its first draw's randomness at every step)",
          regime="several calls with one generator", untrue=("temperature", "global rng", "argmax")),
        M("sample_next", "return logits.argmax(dim=-1)          # greedy: no randomness at all",
          "return logits.argmax(dim=-1, keepdim=True)  # greedy",
          SHAPE + ("keepdim", "(b, 1)", "(b,)", "temperature 0", "greedy"),
          "returns the greedy ids with keepdim=True: at temperature 0 the result is (B, 1) instead of (B,), "
          "unlike the sampled path, so generate's next_id[:, None] becomes (B, 1, 1) and the cat fails",
          regime="temperature 0", untrue=("generator", "top_k", "dtype")),
    ],
    "09": [
        M("get_batch", "generator=generator)  # (B,)",
          "generator=generator or torch.Generator().manual_seed(0))  # (B,)",
          ("generator", "seed", "global rng", "same batch", "fixed seed", "random state"),
          "falls back to a fresh generator seeded with 0 when none is given: seeded calls are right, but every "
          "call without a generator draws the same starts, so training without one sees the same batch at "
          "every step instead of following the global RNG",
          regime="calls without a generator", untrue=("off by one", "shift", "dtype")),
        M("lm_loss", "ignore_index=-100)", "ignore_index=0)",
          ("ignore_index", "-100", "padding", "token 0", "id 0"),
          "ignores target id 0 instead of -100: every real target 0 is left out of the mean, and -100 padding "
          "is no longer ignored (cross_entropy raises on the out-of-range target -100)",
          untrue=("flatten", "view")),
        M("train_step_accumulated", "total += summed.item()", "total += summed.item() / len(micro_batches)",
          ("returned loss", "mean", "n_tokens", "micro-batches", "loss value", "report"),
          "divides each micro-batch's summed loss by the number of micro-batches before adding it: the step is "
          "right, but the returned loss is the token mean divided by len(micro_batches) (half of it for two "
          "micro-batches)",
          regime="more than one micro-batch", untrue=("gradient", "clip", "zero_grad")),
        # https://github.com/AOSSIE-Org/OpenVerifiableLLM/pull/92 (a start drawn up to N - T, whose target window
        # runs past the data)
        M("get_batch", "torch.randint(len(data) - seq_len, (batch_size,), generator=generator)",
          "torch.randint(len(data) - seq_len + 1, (batch_size,), generator=generator)",
          ("last start", "out of range", "index", "past the end", "off by one", "off-by-one", "n - t"),
          "draws starts up to len(data) - seq_len, one past the last valid one, the off-by-one the review of "
          "AOSSIE-Org/OpenVerifiableLLM#92 flags: the window data[start .. start + seq_len] then needs index "
          "len(data), so whenever that start is drawn indexing raises IndexError",
          regime="whenever the largest start is drawn (often on short data)", untrue=("shift", "dtype", "generator")),
        # https://github.com/EleutherAI/gpt-neox/issues/1373 (warmup gives step 0 a learning rate of 0)
        M("lr_schedule", "return max_lr * (step + 1) / warmup_steps", "return max_lr * step / warmup_steps",
          ("warmup", "step 0", "zero", "first step", "step + 1", "off by one", "off-by-one"),
          "warms up from step / warmup_steps: step 0 gets learning rate 0, so the first optimizer step changes "
          "nothing (EleutherAI/gpt-neox#1373), and the warmup ends one step short of max_lr",
          untrue=("cosine", "min_lr", "total_steps")),
        M("train_step", "model.train()                                # dropout on, whatever mode the caller left",
          "model.train(model.training)                  # keeps the caller's mode",
          MODE + ("dropout", "model.train()"),
          "calls model.train(model.training), which keeps whatever mode the model came in: a model handed over "
          "in eval mode (as after an evaluation) trains with dropout off",
          regime="a model handed over in eval mode", untrue=("zero_grad", "clip", "item")),
        # https://github.com/ml-explore/mlx-lm/pull/1413 (micro-batch means averaged with equal weights)
        M("train_step_accumulated", "(summed / n_tokens).backward()",
          "(summed / int((y != -100).sum()) / len(micro_batches)).backward()",
          ("token", "micro-batch", "mean of means", "weighted", "n_tokens", "padding", "equal weight"),
          "backpropagates each micro-batch's own mean loss divided by the number of micro-batches, the bias "
          "ml-explore/mlx-lm#1413 fixed: right when every micro-batch scores as many targets, but with padding "
          "a micro-batch of few targets weighs as much as a full one, so the step differs from one step on "
          "the whole batch (the returned loss is still the token mean)",
          regime="micro-batches with different numbers of scored targets", untrue=("zero_grad", "clip", "mode")),
    ],
    "10": [
        M("evaluate", "dev = next(model.parameters()).device", "dev = DEVICE",
          ("device", "model's device", "parameters", "cuda", "cpu", "DEVICE"),
          "moves the batches to the notebook's DEVICE instead of the model's device: the same while the model "
          "sits on DEVICE, but a model left on the CPU while DEVICE is a GPU gets its batches on the GPU and "
          "the forward pass raises",
          regime="a model on another device than DEVICE", untrue=("no_grad", "mode", "token")),
        M("bigram_nll", "minlength=256 * 256", "minlength=256",
          ("minlength", "bincount", "65536", "256 * 256", "shape", "view"),
          "asks bincount for at least 256 bins instead of 256·256: bincount returns max(pair) + 1 bins, so the "
          "view to (256, 256) raises unless the largest pair index happens to be 65535 (some pair starting "
          "with byte 255 and ending with byte 255)",
          regime="text without the byte pair (255, 255)", untrue=("alpha", "uint8")),
        # https://github.com/Modalities/modalities/pull/464 (cross-entropy of bfloat16 logits computed in bfloat16)
        M("nll_sum_and_count", "F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten()",
          "F.cross_entropy(logits.flatten(0, 1), targets.flatten()",
          DTYPE + ("sum", "rounded", "quantis", "quantiz"),
          "computes the summed cross-entropy in the logits' own dtype, what Modalities/modalities#464 fixed: "
          "float32 logits are unaffected, but with bfloat16 logits the sum is a bfloat16 number (spacing 4 near "
          "600), so the summed NLL is off by up to 2 nats",
          regime="bfloat16 or float16 logits", untrue=("ignore_index", "count", "mean")),
        # https://github.com/macournoyer/neuralconvo/issues/67 (perplexity from the average of the batches' mean
        # losses)
        M("evaluate", "total, count = total + s, count + n          # combine by tokens, not by batches",
          "total, count = total + s / n, count + 1      # each batch's mean loss",
          ("token", "batch", "mean of means", "weighted", "per-batch", "token-weighted", "average"),
          "averages the batches' mean losses, one vote per batch, the calculation macournoyer/neuralconvo#67 "
          "questions: right when every batch scores as many tokens, but a batch of 6 tokens weighs as much as "
          "one of 18, so loss, perplexity and bits per byte are not the token-weighted mean",
          regime="batches with different numbers of scored tokens", untrue=("no_grad", "mode")),
        M("evaluate", "    was_training = model.training\n"
          "    model.eval()                                             # dropout off while measuring\n",
          "    model.eval()                                             # dropout off while measuring\n"
          "    was_training = model.training\n",
          MODE,
          "reads the mode after switching to eval: was_training is always False, so the finally clause leaves "
          "every model in eval mode, and a model handed over in train mode goes back to training with dropout "
          "off",
          regime="a model handed over in train mode", untrue=("no_grad", "token", "device")),
        M("bigram_nll", "(counts.sum(dim=1, keepdim=True) + 256 * alpha)",
          "(counts.sum(dim=0, keepdim=True) + 256 * alpha)",
          SHAPE + ("rows", "columns", "previous", "normalis", "normaliz", "sum to 1", "dim=1"),
          "normalises each column (the counts of a given next byte) instead of each row (a given previous byte): "
          "the table's rows no longer sum to 1, so the values are not P(next | previous) and the NLL is wrong",
          untrue=("alpha", "uint8", "overflow")),
    ],
}

# Edits that compute exactly what the solution computes, another way: a check must pass each.
SAME = [
    ("06", M("attention_step", "y = y.transpose(1, 2).reshape(B, T, attn.n_heads * attn.head_dim)",
             "y = y.transpose(1, 2).flatten(2)", (),
             "flattening the last two axes of (B, T, nh, hd) is the reshape to (B, T, nh·hd)")),
    ("01", M("one_hot_embed", "F.one_hot(ids, num_classes=weight.shape[0]).to(weight.dtype)",
             "F.one_hot(ids, num_classes=weight.shape[0]).to(weight)", (),
             ".to(tensor) takes the tensor's dtype and device; the ids are already on the table's device")),
    ("01", M("tie_weights", "lm_head.weight = tok_emb.weight",
              'lm_head.register_parameter("weight", tok_emb.weight)', (),
             "assigning a Parameter to a module attribute is register_parameter")),
    ("03", M("causal_attention", 'scores = scores.masked_fill(~mask, float("-inf"))',
             "scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)", (),
             "exp(finfo.min - row max) underflows to exactly 0, so the softmax is the same wherever a row keeps a "
             "key (a causal row always keeps its own)")),
    ("06", M("kv_cache_bytes", "dtype.itemsize", "torch.empty(0, dtype=dtype).element_size()", (),
             "element_size() of an empty tensor of that dtype is dtype.itemsize")),
    ("01", M("tied_logits", "return x @ weight.T", "return F.linear(x, weight)", (),
             "F.linear(x, W) is x Wᵀ")),
    ("02", M("rms_norm", "torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)",
             "(x32.square().mean(dim=-1, keepdim=True) + eps).rsqrt()", (),
             "square() is pow(2) and the method rsqrt is torch.rsqrt")),
    ("02", M("layer_norm", "var = centred.pow(2).mean(dim=-1, keepdim=True)",
              "var = (centred * centred).mean(-1, keepdim=True)",
             (), "centred * centred is centred squared")),
    ("03", M("causal_attention", "return weights @ v", 'return torch.einsum("bhqk,bhkd->bhqd", weights, v)', (),
             "the einsum is the batched matmul over the key axis")),
    ("04", M("apply_rope", "x1, x2 = x.chunk(2, dim=-1)",
             "half = x.shape[-1] // 2\n    x1, x2 = x[..., :half], x[..., half:]", (),
             "slicing at hd/2 gives the two halves chunk(2) gives")),
    ("05", M("swiglu", "return (gate * up) @ w_down.T", "return F.linear(gate * up, w_down)", (),
             "F.linear with w_down is the product with w_downᵀ")),
    ("06", M("cache_update", "k_all = torch.cat((past_k, k), dim=2)", "k_all = torch.cat((past_k, k), dim=-2)", (),
             "on 4-D tensors axis -2 is axis 2")),
    ("07", M("gqa_step", "mask = tinylm.causal_mask(T, start + T).to(x.device)  # (T, start + T)",
             "mask = tinylm.causal_mask(start + T).to(x.device)[-T:]  # (T, start + T)", (),
             "the last T rows of the square mask are the bottom-right aligned (T, start + T) mask")),
    ("09", M("lm_loss", "F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)",
             "F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))", (),
             "reshape flattens the same way, and -100 is cross_entropy's default ignore_index")),
    ("09", M("lr_schedule", "0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))",
             "math.cos(math.pi * min(progress, 1.0) / 2) ** 2", (),
             "(1 + cos x) / 2 is cos²(x / 2)")),
    ("10", M("nll_sum_and_count", "count = int((targets != ignore_index).sum())",
             "count = int(targets.ne(ignore_index).sum().item())", (),
             "ne is !=, and item() of the count is the same integer")),
]
