"""A twentieth held-out set of learner mistakes ("fresh17"), written without
reading the checks. What was opened: the answer cells, printed through
bench_diagnostics.notebook_cells (its second element, the answer cells; the
first 300 characters of its first element, the notebook's import cell with
the names of the check functions it imports, were shown once while finding
out what the call returns; the third element, the check cells, was printed
for one cell only, `check_causal_mask(causal_mask)`, before it was known to
hold the checks, and never again; autograder/authoring/notebook_src/ was not
opened); tinylm's Transformer and
ModelConfig, benchmarks/verify_unseen.py, benchmarks/verify_heldout.py
(attempt, _config), benchmarks/unseen_probes_fresh14.py (its docstring and
first two probes, for the format) and benchmarks/heldout_duplicates.py. Of
the other sets: mutations/__init__.py, unseen.py (its docstring, the Unseen
class and, as printed by the same head, its first three entries) and
fresh14.py's module docstring; one over-long sed on fresh14.py also printed
its import line, five cause-word tuples, its first four entries and the
first entry and a half of its SAME list; none of these was copied (a one-hot cast to
float32 written before that, close to one of them, was dropped). Never opened,
grepped or listed: autograder/checks/, tests/checks/, autograder/diagnosis_*.py,
the source of benchmarks/bench_diagnostics.py, docs/benchmarks.md,
tests/course/test_docs.py; no check cell was run and no mistake was tried
against a check.

Duplicates: benchmarks/heldout_duplicates.py --set fresh17 compares the texts
mechanically and prints only matches. Of the first 88 entries written, 56 were
character for character in another set; over five more rounds of writing
(about 115 further entries) 73 more matched and were dropped, each replaced by
a different mistake (not by another wording of the same one), until it
printed 0 of 80. The obvious mistakes of every cell are taken by the 23 other
sets, so what is left is less textbook: per-row shifts of the
logits (row maximum, row mean), a gain initialised to 1/sqrt(dim), the
divisions of swiglu_hidden made integer inside the ceil, the mode read after
eval(), the keys cached unrotated, a ModuleList of one repeated Block,
GPT-2's MLP and position table counted, and so on.

Twins: 24 mistakes come in 12 pairs whose symptom on the default inputs is
the same or nearly the same number, shape or error but whose cause differs;
a comment above each names its partner and its `untrue` holds the words of
the partner's cause: a one-hot product that raises from a transposed weight
or from swapped operands; logits shifted per row by the maximum or by the
mean (softmax and loss unchanged); LayerNorm scaled by sqrt((d-1)/d) from
torch.var's default or from torch.std; an RMSNorm output scaled by
1/sqrt(d) from F.normalize or from a gain initialised to 1/sqrt(dim);
attention scores/mix FLOPs halved by one FLOP per multiply-add or by counting
half the keys; right-shaped scrambled heads from split_heads (reshape) or
merge_heads (wrong axes); SiLU on the wrong projection from swiglu or from the
module's argument order; the hidden width floored without a ceil or by
integer division inside it; a loss off from a second shift or from padding
clamped to token 0; accumulated gradients K times too large from the first
micro-batch's token count or the mean count per micro-batch; top-k keeping
too many tokens from the k smallest or from filtered logits set to 0; and a
training model returned in eval mode by generate (mode restored from
model.training) or evaluate (mode read after eval()).

Public threads (8): each URL is named in a comment above its entry and in its
reason, and none occurs in another set (`grep -rl URL
benchmarks/mutations/`, the URL only): the unbiased variance in LayerNorm
(harvardnlp/annotated-transformer#119), torch.std as the divisor
(pytorch/pytorch#84356), an RMSNorm output left float32
(huggingface/transformers#30236), RoPE positions made in bfloat16
(huggingface/candle#3520), filtered logits not set to -inf (minGPT#10), a
model not put in eval mode to generate (nanoGPT#749), the accumulation
scaling by micro-batch count (nanoGPT#605) and a perplexity that is not
exp(loss) (life2vec#8). Six further thread-based mistakes were dropped as
duplicates, with their threads.

The rest: regime-only mistakes (17, marked by `regime`: float16/bfloat16
input, a cache or start_pos > 0, GQA, several new tokens, a caller's mode,
prompts of different lengths, non-default eps, a reused cache, more than one
layer, uint8 data, bytes_per_token != 1) and accounting exercises (FLOPs,
parameter counts, KV-cache and decode bytes). Classes covered: layout after
reshape/transpose/view, mask and softmax axes, scaling, RoPE (direction,
table, precision, which tensor is rotated, start positions), the KV cache
(returned pair, reset, what is fed, rotation before caching, mask dtype), GQA
(keys as values, view of a non-contiguous expand, the returned cache),
labels (double shift, padding), sampling filters, modes, dtypes, gradient
accumulation, zero_grad order, and counting formulas.

SAME lists 16 edits that compute what the solution computes another way; a
check must pass each.

`benchmarks/verify_unseen.py --set fresh17` proves each mistake a real bug
and each SAME edit harmless, with the shared probes and that of
benchmarks/unseen_probes_fresh17.py: one mistake (evaluate counting every
target, padding included) changed no shared probe and got a probe of its own
(an evaluation with -100 padding); one (one_hot_embed squeezing every axis of
size 1) changed none and was dropped rather than given a probe.

After the first measurement, reading every printed line against its reason
found one `untrue` word that matched a true line: "temperature", given to
the model left in train mode, is in the measurement that names it ("with
temperature 1 and neither top_k nor top_p"); it was narrowed to "the
temperature", nothing else in the set changed.
"""
from __future__ import annotations

from .unseen import Unseen as M

DT = ("dtype", "float32", "float16", "bfloat16", "cast")

MUTATIONS = {
    "01": [
        # twin of: one_hot_embed operands in the wrong order
        M("one_hot_embed", "return one_hot @ weight  #", "return one_hot @ weight.T  #",
          ("transpose", "weight.t", "shape", "(v, d)"),
          "the one-hot rows (..., V) are multiplied by weight.T (d, V): the inner sizes V and d differ, so the matmul "
          "raises a shape mismatch; the one-hot width itself is right",
          untrue=("operands", "order of the operands", "weight @ one_hot")),
        M("tie_weights", "lm_head.weight = tok_emb.weight", "lm_head.weight = nn.Parameter(tok_emb.weight.detach())",
          ("same parameter", "parameter", "tied", "copy", "identity"),
          "the head gets a new Parameter over the embedding's storage: the values agree, but the model holds two "
          "Parameters, each with its own gradient and optimizer state, so it is not the one Parameter the "
          "exercise asks for", untrue=("transpose", "shape", "dtype")),
        # twin of: tied_logits rows centred on their mean
        M("tied_logits", "return x @ weight.T", "return x @ weight.T - (x @ weight.T).amax(dim=-1, keepdim=True)",
          ("maximum", "max", "shift", "stability", "subtract"),
          "the row maximum is subtracted 'for numerical stability' (a softmax's trick): each row of logits is "
          "shifted by its maximum, so the values are wrong while softmax, argmax and loss are unchanged",
          untrue=("row mean", "centred", "centered")),
        # twin of: one_hot_embed transposed weight
        M("one_hot_embed", "return one_hot @ weight  #", "return weight @ one_hot  #",
          ("order", "operand", "shape", "matmul"),
          "the operands are in the wrong order: (V, d) @ (..., V) has inner sizes d and the ids' length, so it "
          "raises a shape mismatch (the weight itself is not transposed)", untrue=("weight.t", "transposed weight", "num_classes")),
        # twin of: tied_logits row maximum subtracted
        M("tied_logits", "return x @ weight.T", "return x @ weight.T - (x @ weight.T).mean(dim=-1, keepdim=True)",
          ("mean", "centr", "shift", "subtract"),
          "each row of logits is centred on its mean: the values are wrong while the softmax, the argmax and the "
          "loss are unchanged", untrue=("maximum", "max(", "stability")),
    ],
    "02": [
        # twin of: layer_norm divided by torch.std
        # https://github.com/harvardnlp/annotated-transformer/pull/119
        M("layer_norm", "centred.pow(2).mean(dim=-1, keepdim=True)", "x.var(dim=-1, keepdim=True)",
          ("unbiased", "bessel", "d - 1", "correction", "variance"),
          "the variance is torch.var's default, the unbiased estimate dividing by d - 1 (the bug the annotated "
          "transformer was asked to fix, https://github.com/harvardnlp/annotated-transformer/pull/119): every "
          "output is scaled by sqrt((d - 1) / d) before the gain and bias",
          untrue=("torch.std", "without eps", "no eps")),
        # https://github.com/huggingface/transformers/issues/30236
        M("rms_norm", "return weight * (x32 * inv_rms).to(x.dtype)", "return weight * x32 * inv_rms",
          DT, "the result is never cast back: a float16 or bfloat16 input comes back float32 (float32 inputs are "
          "unaffected), the float32 output the thread https://github.com/huggingface/transformers/issues/30236 reports", untrue=("axis", "eps", "overflow"), regime="float16 or bfloat16 input"),
        # twin of: RMSNorm gain initialised to 1/sqrt(dim)
        M("rms_norm", "return weight * (x32 * inv_rms).to(x.dtype)", "return weight * F.normalize(x32, dim=-1).to(x.dtype)",
          ("normalize", "norm", "sqrt(d)", "scale", "l2"),
          "the row is L2-normalised (F.normalize) instead of divided by its RMS: the output is sqrt(d) times too "
          "small and eps is not the one asked for; inv_rms is computed and unused", untrue=("gain initialis", "gain initializ", "1/sqrt(dim) gain")),
        M("rms_norm", "torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)",
          "torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True)) + eps",
          ("eps", "epsilon", "inside", "zero"),
          "eps is added after the reciprocal square root instead of under it: an all-zero row gives inf * 0 = nan, "
          "and rows of tiny scale are not damped", untrue=("axis", "dtype", "sum"), regime="rows that are all zeros or tiny"),
        M("rms_norm", "x32.pow(2).mean(dim=-1, keepdim=True)", "x32.abs().mean(dim=-1, keepdim=True).pow(2)",
          ("mean square", "abs", "square", "rms"),
          "the statistic is the squared mean absolute value, not the mean square: smaller for any row whose "
          "entries differ in magnitude, so outputs are too large", untrue=("axis", "dtype", "eps")),
        # twin of: layer_norm unbiased torch.var
        # https://github.com/pytorch/pytorch/issues/84356
        M("layer_norm", "torch.rsqrt(var + eps)", "(1 / centred.std(dim=-1, keepdim=True))",
          ("std", "unbiased", "eps", "bessel", "d - 1"),
          "the divisor is torch.std, the unbiased standard deviation without eps (how the user of "
          "https://github.com/pytorch/pytorch/issues/84356 normalised by hand): outputs are sqrt((d-1)/d) times the "
          "reference, and a constant row divides by zero", untrue=("torch.var", ".var(")),
        # twin of: rms_norm F.normalize
        M("RMSNorm", "self.weight = nn.Parameter(torch.ones(dim))", "self.weight = nn.Parameter(torch.full((dim,), dim ** -0.5))",
          ("gain", "init", "ones", "weight", "scale"),
          "the gain starts at 1/sqrt(dim) instead of 1: a fresh norm scales its output by 1/sqrt(dim); rms_norm "
          "itself is right", untrue=("normalize", "l2", "eps")),
    ],
    "03": [
        # twin of: attention_flops causal half of the keys
        M("attention_flops", "per_head = 2 * T * T * head_dim ", "per_head = T * T * head_dim ",
          ("2 flops", "multiply-add", "factor", "flops", "half"),
          "the scores and mix matmuls count one FLOP per multiply-add instead of two: both are half the reference, "
          "the projections are right", untrue=("causal", "triangle", "mask", "half the keys")),
        # twin of: attention_flops one FLOP per multiply-add
        M("attention_flops", "per_head = 2 * T * T * head_dim ", "per_head = 2 * T * (T // 2) * head_dim ",
          ("causal", "half", "triangle", "mask", "flops"),
          "the learner counts only half of the keys for each query because of the causal mask (the exercise counts "
          "the full T x T matmul): scores and mix are half the reference for even T",
          untrue=("multiply-add", "2 flops", "per multiply")),
        # twin of: merge_heads transposes the wrong axes
        M("split_heads", "return x.transpose(1, 2)                 # (B, H, T, hd)",
          "return x.reshape(B, n_heads, T, d // n_heads)",
          ("layout", "transpose", "reshape", "view", "heads"),
          "split_heads reshapes the (B, T, H, hd) view straight to (B, H, T, hd) instead of transposing: the shape "
          "is right but each 'head' holds slices of several tokens, so attention mixes the wrong numbers",
          untrue=("merge_heads transposes", "softmax", "mask")),
        M("causal_attention", "weights = scores.softmax(dim=-1)", "weights = scores.softmax(dim=-2)",
          ("softmax", "axis", "dim", "queries", "keys"),
          "the softmax normalises over the queries (axis -2) instead of the keys: each key's column sums to 1, "
          "rows do not", untrue=("scale", "sqrt", "mask")),
        M("causal_attention", "/ math.sqrt(q.shape[-1])", "/ math.sqrt(q.shape[-1] * q.shape[1])",
          ("scale", "sqrt", "head_dim", "d_model"),
          "the scores are divided by sqrt(H·hd) = sqrt(d_model) instead of sqrt(head_dim): attention is flatter "
          "than it should be whenever H > 1", untrue=("softmax axis", "mask"), regime="more than one head"),
        M("self_attention", "for w in (w_q, w_k, w_v))", "for w in (w_q, w_v, w_k))",
          ("key", "value", "swap", "w_k", "w_v"),
          "the key and value projections are exchanged: scores use x @ w_v.T as keys and the mix uses x @ w_k.T",
          untrue=("transpose", "softmax", "mask")),
        # twin of: split_heads reshape without transpose
        M("split_heads", "return y.transpose(1, 2).reshape(B, T, H * hd)", "return y.transpose(2, 3).reshape(B, T, H * hd)",
          ("layout", "transpose", "axes", "heads", "merge"),
          "merge_heads transposes positions with features (axes 2 and 3) instead of heads with positions: right "
          "shape, scrambled rows", untrue=("split_heads reshapes", "in split_heads", "softmax")),
    ],
    "04": [
        M("rotary_attention", "q = apply_rope(q, cos, sin, start_pos)  # position enters the scores only",
          "v = apply_rope(v, cos, sin, start_pos)  # position enters the scores only",
          ("value", "v", "query", "rope on", "rotat"),
          "the rotation is applied to the values instead of the queries: queries carry no position and the mixed "
          "values come out rotated", untrue=("direction", "start_pos", "layout")),
        M("apply_rope", "cos = cos[start_pos:start_pos + T].to(x.dtype)  # (T, hd), broadcasts over (B, H)\n"
          "    sin = sin[start_pos:start_pos + T].to(x.dtype)",
          "cos = cos[start_pos + 1:start_pos + T + 1].to(x.dtype)  # (T, hd), broadcasts over (B, H)\n"
          "    sin = sin[start_pos + 1:start_pos + T + 1].to(x.dtype)",
          ("start_pos", "slice", "off by one", "position"),
          "the rows are sliced one position late: every token is rotated as if one step further; the table "
          "itself is right", untrue=("rope_cache", "arange(1", "table counts")),
        # https://github.com/huggingface/candle/pull/3520
        M("rope_cache", "torch.outer(torch.arange(max_seq_len, dtype=torch.float32), inv_freq)",
          "torch.outer(torch.arange(max_seq_len, dtype=torch.bfloat16).float(), inv_freq)",
          ("bfloat16", "precision", "dtype", "position", "round"),
          "the positions are made in bfloat16, which holds integers exactly only up to 256: later positions are "
          "rounded to multiples of 2, 4, 8... (the bug fixed in https://github.com/huggingface/candle/pull/3520)",
          untrue=("layout", "direction", "start_pos"), regime="positions above 256"),
        M("interleaved_to_half", "return pairs.transpose(1, 2).reshape(rows, d_in)", "return pairs.flip(2).reshape(rows, d_in)",
          ("pair", "swap", "layout", "interleav", "half"),
          "each pair's two rows are swapped instead of regrouped into halves: the rows stay interleaved, only in "
          "the order (odd, even)", untrue=("n_kv_heads", "values")),
        M("rope_cache", "/ head_dim)  # (hd/2,)", "/ (head_dim // 2))  # (hd/2,)",
          ("frequency", "exponent", "head_dim", "inv_freq"),
          "the exponent is divided by hd/2 instead of hd: the frequencies fall twice as fast, down to theta^-(2 - 4/hd)",
          untrue=("layout", "start_pos", "precision")),
        M("apply_rope", "sin = sin[start_pos:start_pos + T].to(x.dtype)", "sin = sin[start_pos:start_pos + T]",
          DT, "the sin rows are not cast to x's dtype: a float16 or bfloat16 x is promoted, the result is float32",
          untrue=("start_pos", "direction", "layout"), regime="float16 or bfloat16 input"),
    ],
    "05": [
        # twin of: Transformer SwiGLU module passes up for gate
        M("swiglu", "gate = F.silu(x @ w_gate.T)  # (B, T, d_ff): the nonlinearity lives on the gate only\n"
          "    up = x @ w_up.T ", "gate = x @ w_gate.T\n    up = F.silu(x @ w_up.T) ",
          ("gate", "silu", "up", "nonlinearity"),
          "the SiLU sits on the up projection instead of the gate: the result equals the right SwiGLU with w_gate "
          "and w_up exchanged", untrue=("gate_proj.weight", "module", "argument order")),
        # twin of: swiglu SiLU on the up projection
        M("Transformer", "return swiglu(x, self.gate_proj.weight, self.up_proj.weight, self.down_proj.weight)",
          "return swiglu(x, self.up_proj.weight, self.gate_proj.weight, self.down_proj.weight)",
          ("gate", "up", "argument", "order", "swap"),
          "the SwiGLU module passes up_proj's weight as the gate and gate_proj's as up: swiglu is right, but the "
          "model's MLPs put SiLU on the wrong projection", untrue=("silu on the up", "swiglu function")),
        # twin of: swiglu_hidden integer division inside the ceil
        M("swiglu_hidden", "multiple * math.ceil(8 * d_model / 3 / multiple)",
          "8 * d_model // 3 // multiple * multiple",
          ("round", "ceil", "up", "floor", "multiple"),
          "8/3 d is floored to a multiple instead of rounded up: whenever 8d/3 is not already a multiple the width "
          "is one multiple too small", untrue=("inside the ceil", "ceil of an integer")),
        # twin of: swiglu_hidden floor division
        M("swiglu_hidden", "multiple * math.ceil(8 * d_model / 3 / multiple)", "multiple * math.ceil(8 * d_model // 3 // multiple)",
          ("ceil", "integer division", "//", "round", "floor"),
          "the divisions are integer divisions inside the ceil, so the ceil sees an integer already floored: the "
          "width is rounded down, not up, whenever 8d/3 is not a multiple", untrue=("no ceil", "ceil is missing", "without a ceil")),
        M("param_counts", '"mlp": L * 3 * d * config.d_ff', '"mlp": L * 2 * d * 4 * d',
          ("d_ff", "4d", "gpt-2", "three", "swiglu"),
          "the MLP is counted as GPT-2's two d x 4d matrices instead of SwiGLU's three d x d_ff",
          untrue=("tied", "final norm")),
        M("pre_norm_block", "x = x + mlp(mlp_norm(x))", "x = x + mlp_norm(mlp(x))",
          ("norm", "order", "after", "branch", "input"),
          "the MLP branch normalises its output instead of its input: the MLP reads the raw stream",
          untrue=("attn_norm", "parallel")),
        M("swiglu", "up = x @ w_up.T ", "up = x @ w_gate.T ",
          ("w_up", "up", "gate", "weight"),
          "the up projection uses w_gate: w_up is never used and the product is silu(g)·g",
          untrue=("silu on the up", "argument order")),
    ],
    "06": [
        M("kv_cache_bytes", "config.n_kv_heads * config.head_dim", "config.n_heads * config.head_dim",
          ("n_kv_heads", "n_heads", "gqa", "kv heads"),
          "the cache is sized with n_heads instead of n_kv_heads: GQA models are overcounted by n_heads / n_kv_heads",
          untrue=("itemsize", "layers"), regime="n_kv_heads < n_heads"),
        M("generate_greedy", "cache.reset()                                   # stale",
          "pass                                            # stale",
          ("reset", "stale", "cache", "earlier"),
          "the cache is not reset: a second call starts with the first call's keys and values in front of the "
          "new prompt", untrue=("argmax", "axis", "dtype"), regime="a cache used before"),
        M("generate_greedy", "step_input = next_id                                # decode",
          "step_input = idx                                    # decode",
          ("cache", "whole sequence", "step input", "new token", "duplicate"),
          "each decode step feeds the whole sequence again to a cache that already holds it: positions are "
          "duplicated and shifted after the first new token", untrue=("argmax", "reset")),
        M("attention_step", "q = tinylm.apply_rope(q, cos, sin, start_pos=start)", "q = tinylm.apply_rope(q, cos, sin, start_pos=start + 1)",
          ("position", "query", "off by one", "start"),
          "the queries are rotated one position ahead of the keys: every score sees a distance off by one",
          untrue=("mask", "axis")),
        M("generate_left_padded", "ids[b, T - len(p):] = p ", "ids[b, :len(p)] = p ",
          ("padding", "right", "left", "mask"),
          "the prompt is written at the left (right padding) while the mask marks the right end as real: a shorter "
          "prompt's real tokens are masked and its padding is attended", untrue=("position", "cumsum"),
          regime="prompts of different lengths"),
        M("generate_left_padded", "mask[b, T - len(p):] = True", "mask[b, T - len(p) + 1:] = True",
          ("mask", "first", "off by one", "padding"),
          "each row's first real token is marked as padding: no query attends to it, and the positions count "
          "from the second real token (which gets 0, as the clamp also gives the first)", untrue=("right padding", "argmax")),
    ],
    "07": [
        M("gqa_step", "repeat_kv(k_all, n_rep), repeat_kv(v_all, n_rep), attn_mask=mask)",
          "repeat_kv(k_all, n_rep), repeat_kv(k_all, n_rep), attn_mask=mask)",
          ("value", "key", "v_all"),
          "the keys are passed as the values too: the output mixes keys instead of values", untrue=("mask", "order")),
        M("decode_bytes_per_token", "kv_cache = 2 * L * config.n_kv_heads * hd * context_len * size",
          "kv_cache = 2 * L * config.n_kv_heads * hd * (context_len + 1) * size",
          ("context_len", "off by one", "new token", "position"),
          "the new token's K and V are counted as read too: the cache read is one position too many",
          untrue=("tied", "n_heads")),
        M("gqa_step", "v = attn.v_proj(x).view(B, T, attn.n_kv_heads, attn.head_dim).transpose(1, 2)",
          "v = attn.v_proj(x).view(B, attn.n_kv_heads, T, attn.head_dim)",
          ("layout", "view", "transpose", "value"),
          "the values are viewed straight as (B, n_kv, T, hd): right shape, but each 'head' holds features of "
          "several tokens (with one new token it is the same)", untrue=("mask", "repeat order"), regime="more than one new token"),
        M("gqa_step", "return attn.o_proj(y), k_all, v_all", "return attn.o_proj(y), k, v",
          ("cache", "new", "k_all", "past"),
          "only the new keys and values are returned: the cache the caller keeps loses every earlier position",
          untrue=("repeat", "mask")),
        M("gqa_step", "q, k = tinylm.apply_rope(q, cos, sin, start), tinylm.apply_rope(k, cos, sin, start)",
          "q, k = tinylm.apply_rope(q, cos, sin, start), k",
          ("rope", "key", "rotat", "position"),
          "the new keys are cached unrotated while the queries are rotated: scores with the new keys lose position",
          untrue=("repeat", "mask")),
        M("repeat_kv", "B, n_kv, T, hd = x.shape", "B, T, n_kv, hd = x.shape",
          ("shape", "axis", "names", "unpack"),
          "the shape is unpacked as (B, T, n_kv, hd): the expand asks for sizes the tensor does not have unless T "
          "equals n_kv, so it raises", untrue=("order", "tile")),
        M("decode_bytes_per_token", 'return {"weights": weights, "kv_cache": kv_cache}', 'return {"weights": weights, "kv_cache": kv_cache // L}',
          ("layers", "every block", "per layer", "n_layers"),
          "the cache read is reported for one layer: every block reads its own K and V", untrue=("tied", "n_heads"),
          regime="n_layers > 1"),
    ],
    "08": [
        M("top_k_filter", "kth = logits.topk(k, dim=-1)", "kth = logits.topk(k, dim=0)",
          ("axis", "dim", "batch", "vocabulary"),
          "the k largest are taken over the batch axis instead of the vocabulary: the threshold per column "
          "compares rows with each other (a batch smaller than k raises)", untrue=("temperature", "order of")),
        # https://github.com/karpathy/nanoGPT/pull/749
        M("generate", "model.eval()                                            # dropout off",
          "pass                                                    # dropout off",
          ("eval", "dropout", "mode", "train"),
          "the model is not put in eval mode (the fix of https://github.com/karpathy/nanoGPT/pull/749): a model "
          "left training samples with dropout on", untrue=("the temperature", "generator", "restore"),
          regime="a model with dropout in train mode"),
        # twin of: top_k_filter k smallest taken
        # https://github.com/karpathy/minGPT/issues/10
        M("top_k_filter", 'return logits.masked_fill(logits < kth, float("-inf"))', "return logits.masked_fill(logits < kth, 0.0)",
          ("-inf", "zero", "filtered", "probability"),
          "filtered logits are set to 0 instead of -inf (minGPT used 1e-10, https://github.com/karpathy/minGPT/issues/10): "
          "they keep probability exp(0) after the softmax, more than most kept tokens when logits are negative",
          untrue=("smallest", "largest=false")),
        # twin of: evaluate reads the mode after eval()
        M("generate", "model.train(was_training)", "model.train(model.training)",
          ("restore", "mode", "was_training", "train mode"),
          "the mode is 'restored' from model.training, which eval() has just set to False: a training model "
          "comes back in eval mode", untrue=("dropout on", "temperature", "before reading", "order of"), regime="a model in train mode"),
        M("top_p_filter", "probs = sorted_logits.softmax(dim=-1)", "probs = sorted_logits.exp()",
          ("softmax", "normalis", "normaliz", "exp", "probabilities"),
          "exp of the logits is used as the probabilities without normalising: the cumulative 'mass' is off by "
          "the row's sum of exponentials", untrue=("crossing", "axis")),
        # twin of: top_k_filter filtered logits set to 0
        M("top_k_filter", "logits.topk(k, dim=-1).values[..., -1:]", "logits.topk(k, dim=-1, largest=False).values[..., -1:]",
          ("largest", "smallest", "threshold", "top-k"),
          "the k smallest values are taken: the threshold is the k-th smallest logit, so V - k + 1 tokens are kept",
          untrue=("filled with 0", "zero instead of -inf", "1e-10")),
    ],
    "09": [
        # twin of: lm_loss padding clamped to token 0
        M("lm_loss", "F.cross_entropy(logits.flatten(0, 1), targets.flatten(),",
          "F.cross_entropy(logits[:, :-1].flatten(0, 1), targets[:, 1:].flatten(),",
          ("shift", "double", "targets", "next token", "already"),
          "the loss shifts again targets that get_batch already shifted: position t is scored against token t + 2",
          untrue=("clamp", "padding scored", "token 0")),
        # twin of: lm_loss shifted twice
        M("lm_loss", "targets.flatten(), ignore_index=-100)", "targets.flatten().clamp(min=0), ignore_index=-100)",
          ("ignore", "padding", "-100", "clamp"),
          "the -100 padding targets are clamped to token 0, so they are scored as real tokens; identical without "
          "padding", untrue=("shifted twice", "double shift", "t + 2"), regime="targets with -100 padding"),
        # twin of: train_step_accumulated mean tokens per micro-batch
        M("train_step_accumulated", "n_tokens = sum(int((y != -100).sum()) for _, y in micro_batches)",
          "n_tokens = int((micro_batches[0][1] != -100).sum())",
          ("tokens", "whole batch", "first", "normalis", "normaliz"),
          "N counts the target tokens of the first micro-batch only: with K equal micro-batches the gradient "
          "and the returned loss are K times too large", untrue=("average", "mean number of tokens", "zero_grad")),
        M("train_step", "model.train()                                # dropout on",
          "pass                                         # dropout on",
          ("train mode", "mode", "dropout", "eval"),
          "the model is not put in train mode: a model the caller left in eval trains without dropout",
          untrue=("zero_grad", "clip"), regime="a model left in eval mode"),
        # twin of: train_step_accumulated divides by the first micro-batch's tokens
        M("train_step_accumulated", "n_tokens = sum(int((y != -100).sum()) for _, y in micro_batches)",
          "n_tokens = sum(int((y != -100).sum()) for _, y in micro_batches) // len(micro_batches)",
          ("tokens", "average", "normalis", "normaliz", "micro-batch"),
          "N is the mean number of target tokens per micro-batch: the gradient and the returned loss are "
          "K times too large (K micro-batches)", untrue=("first micro-batch", "zero_grad")),
        # https://github.com/karpathy/nanoGPT/issues/605
        M("train_step_accumulated", "(summed / n_tokens).backward()", "(summed / len(micro_batches)).backward()",
          ("tokens", "normalis", "normaliz", "micro-batch", "accumul"),
          "the summed loss is divided by the number of micro-batches instead of the batch's target tokens (the "
          "scaling discussed in https://github.com/karpathy/nanoGPT/issues/605 applied to a summed loss): the "
          "gradient is N / K times the mean's", untrue=("zero_grad", "clip")),
        M("train_step", "optimizer.zero_grad(set_to_none=True)        # gradients accumulate otherwise\n    loss.backward()",
          "loss.backward()\n    optimizer.zero_grad(set_to_none=True)        # gradients accumulate otherwise",
          ("zero_grad", "order", "backward", "gradient"),
          "the gradients are cleared after backward instead of before: the step sees no gradient and the "
          "parameters do not change", untrue=("mode", "clip")),
    ],
    "10": [
        M("evaluate", "total, count = total + s, count + n", "total, count = total + s, count + y.numel()",
          ("count", "padding", "ignore", "tokens"),
          "evaluate adds every target of the batch, padding included, to the count (nll_sum_and_count's count is "
          "ignored): the loss over padded batches is too small", untrue=("nll_sum_and_count's count",),
          regime="targets with padding"),
        # https://github.com/SocialComplexityLab/life2vec/issues/8
        M("evaluate", '"perplexity": math.exp(loss)', '"perplexity": math.sqrt(loss)',
          ("perplexity", "exp", "sqrt"),
          "perplexity is the square root of the loss instead of its exponential (the naming slip of "
          "https://github.com/SocialComplexityLab/life2vec/issues/8)", untrue=("count", "mode")),
        M("bigram_nll", "train, val = train.long(), val.long()", "val = val.long()",
          ("dtype", "uint8", "overflow", "long"),
          "train keeps its dtype: for uint8 bytes train[:-1] * 256 wraps around, so every pair is counted under "
          "the wrong index (int64 data is unaffected)", untrue=("alpha", "mean"), regime="uint8 training bytes"),
        M("bigram_nll", "probs = (counts + alpha) / (counts.sum(dim=1, keepdim=True) + 256 * alpha)",
          "probs = (counts + alpha) / (counts.sum() + 256 * 256 * alpha)",
          ("joint", "conditional", "row", "normalis", "normaliz"),
          "the counts are normalised over all pairs (a joint distribution) instead of per previous byte: the NLL is "
          "of P(prev, next), not P(next | prev)", untrue=("alpha once", "mean")),
        M("bigram_nll", "probs = (counts + alpha) /", "probs = counts /",
          ("alpha", "smoothing", "numerator", "unseen"),
          "alpha is added to the denominator only: unseen pairs get probability 0 and an infinite NLL, seen ones "
          "are too small", untrue=("axis", "mean")),
        # twin of: generate restores the mode from model.training
        M("evaluate", "was_training = model.training\n    model.eval() ", "model.eval()\n    was_training = model.training ",
          ("mode", "restore", "was_training", "order", "train mode"),
          "the mode is read after eval() has set it: was_training is always False, so a training model comes back "
          "in eval mode", untrue=("model.train(model.training)", "model.training instead of was_training"), regime="a model in train mode"),
    ],
}

SAME = [
    ("02", M("layer_norm", "centred.pow(2).mean(dim=-1, keepdim=True)", "x.var(dim=-1, keepdim=True, correction=0)",
             (), "torch.var with correction=0 is the biased variance")),
    ("02", M("rms_norm", "x32.pow(2).mean(dim=-1, keepdim=True)", "(x32 * x32).mean(-1, keepdim=True)",
             (), "x * x for the square")),
    ("03", M("split_heads", "return x.transpose(1, 2)                 # (B, H, T, hd)", "return x.permute(0, 2, 1, 3)",
             (), "permute instead of transpose")),
    ("04", M("apply_rope", "x1, x2 = x.chunk(2, dim=-1)", "x1, x2 = x.split(x.shape[-1] // 2, dim=-1)", (),
             "split into halves by size")),
    ("05", M("swiglu_hidden", "multiple * math.ceil(8 * d_model / 3 / multiple)",
             "-(-8 * d_model // (3 * multiple)) * multiple", (), "ceiling by negated floor division, in integers")),
    ("05", M("param_counts", '"mlp": L * 3 * d * config.d_ff', '"mlp": 3 * L * config.d_ff * d', (),
             "the same product in another order")),
    ("07", M("repeat_kv", "x = x[:, :, None].expand(B, n_kv, n_rep, T, hd)", "x = x.unsqueeze(2).expand(-1, -1, n_rep, -1, -1)",
             (), "unsqueeze and expand with -1")),
    ("08", M("top_k_filter", "logits.masked_fill(logits < kth, float(\"-inf\"))",
             "logits.masked_fill(~(logits >= kth), float(\"-inf\"))", (), "the negated comparison")),
    ("08", M("sample_next", ".squeeze(-1)  # (B, 1) -> (B,)", "[:, 0]  # (B, 1) -> (B,)", (), "index the one column")),
    ("03", M("split_heads", "return y.transpose(1, 2).reshape(B, T, H * hd)", "return y.permute(0, 2, 1, 3).flatten(2)", (),
             "permute and flatten the last two axes")),
    ("04", M("rope_cache", "return angles.cos(), angles.sin()", "return torch.cos(angles), torch.sin(angles)", (),
             "the functional forms")),
    ("06", M("generate_left_padded", "positions[:, -1:] + 1", "positions.amax(dim=-1, keepdim=True) + 1", (),
             "with left padding each row's last position is its largest")),
    ("10", M("bigram_nll", "counts.sum(dim=1, keepdim=True)", "counts.sum(-1, keepdim=True)", (), "axis -1 of a 2-D tensor")),
    ("01", M("embed", "return weight[ids]", "return weight[ids].clone()", (), "a copy of the rows; the gradient still flows")),
    ("05", M("Transformer", "x = embed(idx, self.tok_emb.weight)", "x = self.tok_emb(idx)", (), "the module's own lookup")),
    ("07", M("gqa_step", "mask = tinylm.causal_mask(T, start + T).to(x.device)",
             "mask = tinylm.causal_mask(start + T, start + T)[-T:].to(x.device)", (), "the last T rows of the full square mask")),
]
