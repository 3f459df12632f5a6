"""An eighteenth held-out set of learner mistakes ("fresh18"), written without
reading the checks: neither autograder/checks/ (any file), tests/checks/,
autograder/diagnosis_*.py, benchmarks/bench_diagnostics.py's source, the
diagnosis sections of docs/benchmarks.md nor tests/course/test_docs.py were
opened, listed or grepped; bench_diagnostics.py, check cells and notebook
checks were never run, and no mistake was tried against a check. What was
read: the answer and setup cells of each notebook through
bench_diagnostics.notebook_cells (its first two results; of the third only
the cell names were printed, never its text; the setup cells name the check
functions they import), tinylm/config.py (a grep of norm_eps, dropout and
head_dim), benchmarks/verify_unseen.py, the top of verify_heldout.py,
heldout_duplicates.py, the function list and the probe_01 / probe_06 parts of
unseen_probes.py, unseen_probes_fresh14.py (its first 60 lines) and
unseen_probes_fresh17.py. Of the other sets only fresh14.py's module docstring
(and, printed with it, its import line and the three tuples of cause words
above its first entry), unseen.py (whole: the entry class and its entries)
and __init__.py were read. Public threads were found with a search of issue
threads; none of their addresses occurs in another set (`grep -rl URL
benchmarks/mutations/`, the URL only). One slip, after every entry was
written, deduplicated and verified (nothing in the set changed because of it):
a grep for "fresh17" over the whole tree, meant for registration files,
printed eight lines of tests/checks/test_fresh17_arrival.py (its docstring's
first line, a SETS line and six test lines naming fresh17 entries' edited text
and the labels "Likely bug:" / "Measured:"); no check's message was shown.

Sources: a learner working through the notebooks with the prose half
understood, and, for 11 mistakes, bugs public projects shipped or were asked
about (the thread is named in a comment above the entry and in its reason).
The set leans on three situations the checks are now judged on:
far symptoms (about 24 mistakes: the edit is on an early line and the first
line that shows it is a later, unedited one: a name unpacked in the wrong
order and a view or expand raising below it, a keepdim dropped and the cat or
broadcast of the next line raising, a method stored instead of a flag and the
finally clause raising, a shape drawn (B, 1) and the slices of the last line
coming back empty); moved steps (about 19: a step present but in another place
or order: the gain before the cast, eps outside the square root, the mean
subtracted after the scaling, the mask and the scale below the softmax, the
queries' rotation put on the output, SiLU on the product, MLP before
attention, the final norm after the head, RoPE after the cache update, the
reset at the end, the repetition before the cache, temperature after the
filters or on the probabilities, the mode recorded after eval, train mode set
after the forward, zero_grad inside the accumulation loop); and entry states
(32 mistakes carry a regime; among them a model arriving in eval or in train
mode, a float64 default dtype, a model cast to half, a batch of one, a cache
that arrives holding positions, non-default arguments). Accounting: the
attention FLOPs with seq_len and d_model swapped, the tokens of a step counted
as sequences, k/v parameters outside the per-layer parentheses, the KV-cache
bytes at a hard-coded 4, a norm's elements added after the conversion to
bytes, bits per byte over ln 256, a joint instead of a conditional bigram.
Pairs with one symptom and two causes: a model left in eval mode by the mode
read after eval() (08) and by a restore from model.training (10); a double
shift in train_step and in nll_sum_and_count; a batch of one losing its axis
in embed and in tied_logits; keys at the wrong positions from a second
rotation and from a rotation after the update; temperature without its effect
after the filters and after the softmax. SAME lists 16 edits that compute what
the solution computes another way; a check must pass each. A seventeenth,
after https://github.com/abisee/pointer-generator/issues/88 (softmax, then
the mask, then renormalising), was written as SAME and failed its check on
arrival, rightly: with scores in the hundreds the unmasked softmax underflows
the past to 0 and the renormalisation divides 0 by 0. The lead moved it to
the mistakes of 03 after measuring the set (so 65 mistakes), with a probe
(probe_03 of unseen_probes_fresh18.py, q x 300) that shows it.

benchmarks/heldout_duplicates.py --set fresh18 compared the texts
mechanically and printed only matches: over nine rounds 74 mistakes and 13 SAME
edits written first were character for character in another set and were
dropped (their places filled by other mistakes until 64 were left); two
threads (neulab/xnmt#229, kimiyoung/transformer-xl#131) left the set with
them, three others were attached to different mistakes. verify_unseen then
showed 7 mistakes that no shared probe saw (and one entry named the wrong
cell, fixed): all 7 got probes of their own in
benchmarks/unseen_probes_fresh18.py, none was replaced. A later mistake (the
rows of interleaved_to_half split with view instead of reshape, "raising on a
transposed weight") changed no probe, not even one written for it: splitting
one axis is always a view, so it is no mistake; it moved to SAME; the probe of a
greedy generation after the caller's prefill first used a model whose layers
shared their random weights and saw nothing, so it now draws them from one
generator. Run: `bench_diagnostics.py --set fresh18`;
`benchmarks/verify_unseen.py --set fresh18` proves each mistake a real bug and
each SAME edit harmless.

After the arrival measurement the lead narrowed six untrue words that matched
true lines, each a substring of a true fact: "eps" (in a fix's sqrt(var +
eps), and inside "keeps"), "tied" (in the configs' names, "d_model 64, MHA,
tied head"), "clip" (in a measured call order, "backward, clip, step"); and
added one expected phrase, "before the cached", to cache_update's reversed
order, whose line names it in those words (both readers judged it true).

Each mistake is one substitution in one answer cell; `expect` holds words a
check that found it would likely say, `untrue` words of causes it is not,
`regime` the situation in which a mistake that is right by default shows.
Each reason says which line is edited, which line first shows it, and the fix."""
from __future__ import annotations

from .unseen import Unseen as M

HALF = "float16 or bfloat16 input"

# notebook 03's causal_attention, its body from the scores to the softmax
ATTN_SCORES = "    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])     # (B, H, Tq, Tk)\n"
ATTN_MASK = "    mask = causal_mask(q.shape[-2], k.shape[-2]).to(q.device)       # (Tq, Tk), broadcasts over (B, H)\n"
ATTN_FILL = '    scores = scores.masked_fill(~mask, float("-inf"))\n'
ATTN_SOFTMAX = "    weights = scores.softmax(dim=-1)                                 # over keys: each row sums to 1\n"

# notebook 06's attention_step: the keys' rotation and the cache update
STEP_ROPE_K = "    k = tinylm.apply_rope(k, cos, sin, start_pos=start)\n"
STEP_UPDATE = "    k_all, v_all = cache_update(past_k, past_v, k, v)    # (B, n_kv, start + T, hd)\n"

# notebook 06's generate_greedy, its whole body
GREEDY = ("    cache.reset()                                   # stale positions from an earlier prompt would shift everything\n"
          "    idx, step_input = prompt, prompt                # prefill: the whole prompt in one pass\n"
          "    with torch.no_grad():                           # decoding never backpropagates\n"
          "        for _ in range(max_new_tokens):\n"
          "            logits = model(step_input, cache=cache)[:, -1]      # (B, V): only the last position predicts\n"
          "            next_id = logits.argmax(dim=-1, keepdim=True)       # (B, 1)\n"
          "            idx = torch.cat((idx, next_id), dim=1)              # (B, T + 1)\n"
          "            step_input = next_id                                # decode: one new token per step\n"
          "    return idx")

# notebook 08's sample_next: the temperature and the two filters
SAMPLE_TEMP = "    logits = logits / temperature             # on logits, before any filter\n"
SAMPLE_TOP_K = "    if top_k is not None:\n        logits = top_k_filter(logits, top_k)\n"
SAMPLE_TOP_P = "    if top_p is not None:\n        logits = top_p_filter(logits, top_p)\n"

# notebook 09's train_step: the mode switch and the forward
TRAIN_MODE = "    model.train()                                # dropout on, whatever mode the caller left\n"
TRAIN_FORWARD = "    loss = lm_loss(model(x), y)                  # (B, T, V) logits -> scalar\n"

# the mode recorded, then eval: notebook 08's generate
GEN_EVAL = "    model.eval()                                            # dropout off while generating\n"
WAS = "    was_training = model.training\n"

MUTATIONS = {
    "01": [
        # far symptom: the one-hot stays int64 on line 1; the matmul on line 2 raises
        M("one_hot_embed", "F.one_hot(ids, num_classes=weight.shape[0]).to(weight.dtype)",
          "F.one_hot(ids, num_classes=weight.shape[0])",
          ("dtype", "int64", "long", "cast", "same dtype", "weight.dtype"),
          "edits line 1 (one_hot = ...): the one-hot is left int64 (F.one_hot's dtype); the first line that shows it "
          "is line 2, `one_hot @ weight`, which raises a dtype error (Long and Float). Fix: cast the one-hot to "
          "weight.dtype on line 1",
          untrue=("num_classes", "transpose", "softmax")),
        # entry state: a batch of one
        M("embed", "return weight[ids]", "return weight[ids.squeeze()]",
          ("batch of one", "squeeze", "shape", "(1,", "leading axis", "size 1"),
          "squeezes the ids before the lookup: a batch of one (ids (1, T)) comes back (T, d) and a single id "
          "(1, 1) comes back (d,), the axes of size 1 lost. Edits and shows on the one line. Fix: weight[ids], "
          "no squeeze",
          untrue=("dtype", "transpose", "gradient"), regime="a batch of one (ids of shape (1, T))"),
        # entry state: the caller's activations in half precision or float64
        M("tied_logits", "return x @ weight.T", "return (x @ weight.T).float()",
          ("dtype", "float32", "float16", "bfloat16", "float64", "cast", "precision"),
          "casts the logits to float32: right for float32 inputs; float16, bfloat16 or float64 activations get "
          "float32 logits back instead of logits in their own dtype. Fix: return x @ weight.T, no cast",
          untrue=("transpose", "softmax", "shape"), regime="float16, bfloat16 or float64 activations and weight"),
        M("tied_logits", "return x @ weight.T", "return (x @ weight.T).squeeze(0)",
          ("batch of one", "squeeze", "shape", "(1,", "batch axis"),
          "squeezes the leading axis: a batch of one comes back (T, V) instead of (1, T, V); larger batches are "
          "unchanged. Fix: return x @ weight.T",
          untrue=("dtype", "transpose", "softmax"), regime="a batch of one"),
        M("one_hot_embed", "return one_hot @ weight", "return one_hot.to_sparse() @ weight",
          ("sparse", "batch", "2-d", "shape", "leading axes"),
          "multiplies a sparse copy of the one-hot: torch's sparse @ dense takes a 2-D sparse matrix, so 1-D ids "
          "work but a (B, T) batch of ids raises. Fix: the dense one_hot @ weight",
          untrue=("dtype", "num_classes", "transpose"), regime="ids with more than one axis (a batch of sequences)"),
        M("embed", "return weight[ids]", "return weight[ids].view(-1, weight.shape[1])",
          ("shape", "view", "flatten", "leading axes", "(..., d)", "batch"),
          "views the looked-up rows as (N, d): right for 1-D ids, but a (B, T) batch comes back (B * T, d) with "
          "its batch and position axes merged. Fix: return weight[ids], which keeps ids' shape",
          untrue=("dtype", "transpose", "gradient"), regime="ids with more than one axis (a batch of sequences)"),
    ],
    "02": [
        # https://github.com/NVIDIA/TransformerEngine/issues/1132
        M("rms_norm", "return weight * (x32 * inv_rms).to(x.dtype)", "return (weight * x32 * inv_rms).to(x.dtype)",
          ("order", "gain", "weight", "cast", "before the cast", "after the cast", "dtype", "rounding"),
          "moves the gain before the cast (line 3): the exercise (as Hugging Face's Llama) rounds the normalised "
          "value to x.dtype and then multiplies by the gain; this multiplies in float32 and rounds once at the end, "
          "the order TransformerEngine used in https://github.com/NVIDIA/TransformerEngine/issues/1132. With "
          "float32 input nothing changes; with float16/bfloat16 input the rounding differs and, with a float32 "
          "gain, the result is x.dtype instead of the promoted float32. Fix: weight * (x32 * inv_rms).to(x.dtype)",
          untrue=("eps", "mean", "last axis"), regime=HALF),
        # https://github.com/google/gemma_pytorch/pull/67
        M("rms_norm", "inv_rms = torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)",
          "inv_rms = torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps).to(x.dtype)",
          ("premature", "downcast", "precision", "rounded", "cast", "float32", "dtype"),
          "downcasts the statistic prematurely (line 2), the mistake https://github.com/google/gemma_pytorch/pull/67 "
          "fixed: 1/rms is rounded to float16/bfloat16 before line 3 multiplies the float32 x by it, so the "
          "normalised values carry the half-precision error of the statistic. Right for float32 input. Fix: keep "
          "inv_rms in float32 and cast once, after the product",
          untrue=("eps", "overflow", "last axis"), regime=HALF),
        # moved step: eps added after the square root instead of inside it
        M("rms_norm", "torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)",
          "(torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True)) + eps)",
          ("eps", "inside", "outside", "square root", "rsqrt", "zero", "nan", "inf"),
          "adds eps after the reciprocal square root instead of under it (line 2): off by about eps (relative) for "
          "ordinary rows, but a row of zeros gives rsqrt(0) = inf and line 3 returns 0 * inf = nan, and tiny rows are "
          "blown up instead of damped. Fix: rsqrt(mean + eps)",
          untrue=("keepdim", "dtype", "last axis"), regime="a row of zeros or of very small values"),
        # entry state: a model cast to half precision, gain and input both float16
        M("rms_norm", "x32 = x.float()", "x32 = x.to(weight.dtype)",
          ("float32", "overflow", "upcast", "float16", "inf", "half", "weight.dtype"),
          "upcasts to the gain's dtype instead of to float32 (line 1): with a float32 gain nothing changes; in a "
          "model cast to half (float16 gain and input) nothing is upcast, and it shows on line 2, where squares "
          "of entries above 256 overflow to inf and the row comes out 0. Fix: x.float()",
          untrue=("eps", "last axis", "keepdim"), regime="a float16 gain with float16 input (a model cast to half)"),
        # moved step: the mean subtracted after the scaling instead of before it
        M("layer_norm", "return weight * centred * torch.rsqrt(var + eps) + bias",
          "return weight * (x * torch.rsqrt(var + eps) - x.mean(dim=-1, keepdim=True)) + bias",
          ("centr", "mean", "before", "after", "order", "subtract"),
          "subtracts the mean after scaling x instead of before (x/std - mean rather than (x - mean)/std): the "
          "centring is present, in the wrong place; rows with a nonzero mean come out shifted. Fix: "
          "weight * centred * rsqrt(var + eps) + bias",
          untrue=("unbiased", "eps is", "last axis")),
        # far symptom and entry state: the leading axes flattened on line 1; the result of line 3 has lost them
        M("rms_norm", "x32 = x.float()", "x32 = x.float().flatten(0, -2)",
          ("shape", "flatten", "leading axes", "(..., d)", "batch"),
          "flattens the leading axes on line 1: the statistics are right, and it shows in what line 3 returns, "
          "(N, d) instead of x's shape. Right for 2-D input. Fix: keep x's shape (no flatten)",
          untrue=(" eps", "dtype", "keepdim"), regime="input with more than two axes (B, T, d)"),
    ],
    "03": [
        # moved from SAME by the lead after the arrival measurement (see the docstring): the order is not harmless
        M("causal_attention", ATTN_FILL + ATTN_SOFTMAX,
          "    weights = scores.softmax(dim=-1) * mask                         # the future's weights zeroed\n"
          "    weights = weights / weights.sum(dim=-1, keepdim=True)            # renormalised: rows sum to 1\n",
          ("underflow", "large", "softmax", "mask", "nan", "0 / 0", "order"),
          "masks after the softmax and renormalises each row (https://github.com/abisee/pointer-generator/issues/88): "
          "equal to the masked softmax in exact arithmetic, but the softmax on line 3 runs over the whole row, so "
          "where a future score is far above the past ones (scores in the hundreds) every past weight underflows "
          "to 0 and line 4 divides 0 by 0: nan rows, or rows that lose the past. Fix: masked_fill the scores "
          "before the softmax",
          untrue=("scale", "transpose", "dim=-2"), regime="large scores (a future score hundreds above the past ones)"),
        # https://github.com/huggingface/pytorch-image-models/pull/2236
        M("causal_attention", ATTN_FILL + ATTN_SOFTMAX, ATTN_SOFTMAX + ATTN_FILL,
          ("future", "after the softmax", "before the softmax", "order", "leak", "mask"),
          "moves the masking below the softmax (lines 3-4 swapped), as the eva.py fix in "
          "https://github.com/huggingface/pytorch-image-models/pull/2236 undid: the weights are computed from the "
          "unmasked scores, and the masked_fill on line 4 writes a variable nothing reads any more, so every query "
          "attends to the future. Present, but in the wrong place. Fix: masked_fill before the softmax",
          untrue=("scale", "sqrt", "transpose", "axis")),
        # far symptom: names unpacked in the wrong order on line 1; the view on line 2 shows it
        M("split_heads", "B, T, d = x.shape", "B, d, T = x.shape",
          ("shape", "view", "unpack", "order", "(b, t, d)", "d // n_heads"),
          "unpacks x.shape as (B, d, T) on line 1: the view on line 2 then splits the positions instead of the "
          "features, raising when n_heads does not divide T, and otherwise returning (B, H, d, T / H) with "
          "positions mixed into features. Fix: B, T, d = x.shape",
          untrue=("transpose(1, 2)", "softmax", "dtype")),
        # moved step: the 1/sqrt(hd) scale applied to the weights after the softmax
        M("causal_attention", ATTN_SCORES + ATTN_MASK + ATTN_FILL + ATTN_SOFTMAX,
          "    scores = q @ k.transpose(-2, -1)                              # (B, H, Tq, Tk)\n" + ATTN_MASK + ATTN_FILL
          + "    weights = scores.softmax(dim=-1) / math.sqrt(q.shape[-1])        # scaled after the softmax\n",
          ("scale", "sqrt", "after the softmax", "before the softmax", "sum to 1", "temperature"),
          "moves the 1/sqrt(hd) scale from the scores (line 1) to the weights after the softmax (line 4): the "
          "softmax runs on unscaled scores (too peaked) and each row of weights then sums to 1/sqrt(hd) instead of "
          "1. Fix: divide the scores, before the softmax",
          untrue=("future", "leak", "transpose")),
        # entry state: half-precision scores cannot hold float32's most negative number
        M("causal_attention", 'scores.masked_fill(~mask, float("-inf"))', "scores.masked_fill(~mask, torch.finfo(torch.float32).min)",
          ("float16", "bfloat16", "overflow", "finfo", "dtype", "-inf", "half"),
          "fills the future with float32's most negative number instead of -inf: the same weights for float32 "
          "scores, but float16 scores cannot hold -3.4e38 and masked_fill raises (value cannot be converted without "
          "overflow). Fix: float(\"-inf\") or torch.finfo(scores.dtype).min",
          untrue=("scale", "transpose", "axis"), regime="float16 queries and keys"),
        # far symptom: the attention output transposed on line 2; the output projection on line 3 raises
        M("self_attention", "y = causal_attention(q, k, v)", "y = causal_attention(q, k, v).transpose(1, 2)",
          ("transpose", "merge_heads", "(b, h, t, hd)", "layout", "shape", "twice"),
          "transposes the attention output (line 2) before merge_heads, which transposes again: it first shows on "
          "line 3, where merge_heads returns (B, H, T * hd) and F.linear(..., w_o) raises unless T == H. Fix: pass "
          "causal_attention's (B, H, T, hd) output to merge_heads as it is",
          untrue=("mask", "scale", "softmax")),
        # far symptom: the arguments unpacked in another order on line 1; every count after it is wrong
        M("attention_flops", "B, T, d = batch, seq_len, d_model", "B, T, d = batch, d_model, seq_len",
          ("seq_len", "d_model", "swapped", "argument", "order"),
          "unpacks seq_len into d and d_model into T (line 1): nothing fails, and it shows in every count the "
          "return builds (projections T·d² become d·T², scores T²·hd become d²·...). Right only when "
          "seq_len == d_model. Fix: B, T, d = batch, seq_len, d_model",
          untrue=("causal", "batch", "n_heads")),
        M("causal_attention", "math.sqrt(q.shape[-1])", "math.sqrt(q.shape[1])",
          ("scale", "head_dim", "shape[-1]", "sqrt", "n_heads"),
          "scales by sqrt of axis 1 (the number of heads) instead of the last axis (head_dim): right only when "
          "n_heads == head_dim. Fix: math.sqrt(q.shape[-1])",
          untrue=("mask", "future", "transpose"), regime="n_heads != head_dim"),
    ],
    "04": [
        # moved step: the queries' rotation applied to the attention output instead
        M("rotary_attention", "    q = apply_rope(q, cos, sin, start_pos)  # position enters the scores only\n"
          "    k = apply_rope(k, cos, sin, start_pos)\n    return tinylm.causal_attention(q, k, v)",
          "    k = apply_rope(k, cos, sin, start_pos)\n"
          "    return apply_rope(tinylm.causal_attention(q, k, v), cos, sin, start_pos)  # rotated afterwards",
          ("queries", "q", "output", "after the attention", "rotated", "scores", "order"),
          "moves the queries' rotation onto the attention's output: the scores compare unrotated queries with "
          "rotated keys (they depend on absolute positions, not on differences), and the output is rotated, which "
          "RoPE never does. The rotation is present, in the wrong place. Fix: rotate q (and k) before the "
          "attention, never its output",
          untrue=("values", "dtype", "start_pos")),
        M("rope_cache", "-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim",
          "-torch.arange(0, head_dim, 2) / head_dim",
          ("dtype", "float32", "float64", "default dtype", "precision"),
          "drops dtype=torch.float32 on the exponents: an int64 arange divided becomes the default float dtype, "
          "so under torch.set_default_dtype(torch.float64) inv_freq and (through torch.outer's promotion on "
          "line 2) both tables are float64, not the float32 the docstring promises. Right under the float32 "
          "default. Fix: keep dtype=torch.float32",
          untrue=("theta", "frequenc", "sign"), regime="the caller's default dtype set to float64"),
        M("interleaved_to_half", "w.reshape(n_heads, hd // 2, 2, d_in)", "w.reshape(n_heads, 2, hd // 2, d_in)",
          ("inverse", "interleav", "layout", "pairs", "reshape", "permutation", "evens"),
          "splits each head into (2, hd/2) instead of (hd/2, 2): the transpose then applies the inverse permutation "
          "(half -> interleaved). For head_dim 4 the two permutations coincide; from head_dim 6 on the rows land in "
          "the wrong places. Fix: reshape(n_heads, hd // 2, 2, d_in)",
          untrue=("dtype", "n_kv_heads", "sign"), regime="head_dim above 4"),
        # far symptom: rotate_half concatenates on the positions; apply_rope's sum raises
        M("apply_rope", "return torch.cat((-x2, x1), dim=-1)", "return torch.cat((-x2, x1), dim=-2)",
          ("rotate_half", "dim=-1", "axis", "positions", "shape", "concatenat"),
          "concatenates rotate_half's halves along the positions (its line 2): (..., 2T, hd/2) instead of "
          "(..., T, hd), and it first shows in apply_rope's last line, where rotate_half(x) * sin raises. Fix: "
          "torch.cat((-x2, x1), dim=-1)",
          untrue=("sign", "theta", "dtype")),
        M("rope_cache", "torch.cat((angles, angles), dim=-1)", "torch.cat((angles, -angles), dim=-1)",
          ("sign", "second half", "rotation", "norm", "angles", "negat"),
          "negates the second half's angles: cos is unchanged but sin flips sign on features hd/2.., so "
          "x * cos + rotate_half(x) * sin is no longer a rotation (each pair is mapped by [[c, -s], [-s, c]], which "
          "changes its length). Fix: torch.cat((angles, angles), dim=-1)",
          untrue=("theta", "dtype", "interleav")),
        M("interleaved_to_half", "q_proj = interleaved_to_half(wq, n_heads)", "q_proj = interleaved_to_half(wq.T, n_heads).T",
          ("rows", "columns", "[d_out, d_in]", "layout", "transpose", "output features"),
          "permutes wq's columns (the input features) instead of its rows: a Linear weight is [d_out, d_in] and the "
          "rotation pairs are output features, so the queries keep the interleaved layout while the keys are "
          "converted (and a non-square wq raises). Fix: interleaved_to_half(wq, n_heads), on the rows",
          untrue=("values", "o_proj", "dtype")),
        M("rope_cache", "-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim", "-torch.linspace(0, 1, head_dim // 2)",
          ("frequenc", "exponent", "2i/d", "linspace", "slowest", "inv_freq"),
          "spreads the exponents evenly from 0 to 1 (linspace) instead of 2i/d: the last pair turns at 1/theta "
          "instead of theta^(-(d-2)/d), and every pair but the first turns a little slower than it should. Fix: "
          "arange(0, head_dim, 2) / head_dim",
          untrue=("dtype", "sign", "start_pos")),
    ],
    "05": [
        # moved step: SiLU after the product instead of on the gate
        M("swiglu", "    gate = F.silu(x @ w_gate.T)  # (B, T, d_ff): the nonlinearity lives on the gate only\n"
          "    up = x @ w_up.T              # (B, T, d_ff): linear\n"
          "    return (gate * up) @ w_down.T  # (B, T, d)",
          "    gate = x @ w_gate.T\n    up = x @ w_up.T\n    return F.silu(gate * up) @ w_down.T  # SiLU on the product",
          ("silu", "gate", "product", "after", "nonlinearity", "up"),
          "applies SiLU to the product gate * up instead of to the gate alone: the activation is present, at "
          "another place. Fix: F.silu on x @ w_gate.T, the up branch linear",
          untrue=("sigmoid", "transpose", "w_down")),
        M("Transformer", "x = block(x, self.rope_cos, self.rope_sin, cache, i)",
          "x = block(x, self.rope_cos, self.rope_sin, cache, 0)",
          ("layer_idx", "layer", "slot", "cache", "same layer", "overwrit"),
          "passes layer index 0 to every block: without a cache nothing changes; with a KVCache every layer "
          "appends its keys and values to layer 0's slot (the later layers read the earlier layers' keys). Fix: "
          "pass i",
          untrue=("start_pos", "rope", "dtype"), regime="a KV cache with more than one layer"),
        M("Transformer", "self.mlp_norm = RMSNorm(config.d_model, config.norm_eps)",
          "self.mlp_norm = RMSNorm(config.d_model)",
          ("norm_eps", "eps", "epsilon", "mlp_norm", "config"),
          "builds mlp_norm without config.norm_eps (Block.__init__): it uses the default 1e-6 whatever the config "
          "says, while attn_norm and the final norm follow it. Fix: RMSNorm(config.d_model, config.norm_eps)",
          untrue=("attn_norm", "dtype", "order"), regime="a norm_eps other than 1e-6"),
        # moved step: the MLP sub-block before the attention sub-block
        M("Transformer", "        x = x + self.attn(self.attn_norm(x), cos, sin, cache, layer_idx)  # the branch reads a normalised copy\n"
          "        return x + self.mlp(self.mlp_norm(x))",
          "        x = x + self.mlp(self.mlp_norm(x))\n"
          "        return x + self.attn(self.attn_norm(x), cos, sin, cache, layer_idx)",
          ("order", "mlp first", "before attention", "after attention", "sub-block"),
          "runs the MLP sub-block before the attention sub-block in Block.forward: both are present, in the "
          "other order, so the MLP reads the stream before attention has written to it. Fix: attention first, "
          "then the MLP",
          untrue=("norm_eps", "parallel", "dtype")),
        # moved step: the final norm applied to the logits instead of before the head
        M("Transformer", "return tied_logits(self.norm(x), self.lm_head.weight)",
          "return self.norm(tied_logits(x, self.lm_head.weight))",
          ("final norm", "after the head", "before the head", "logits", "order", "vocab"),
          "applies the final norm to the logits instead of to the hidden states: a norm of width d_model on "
          "vocab_size logits raises (its gain is d_model wide) unless vocab_size == d_model. Present, in the "
          "wrong place. Fix: tied_logits(self.norm(x), ...)",
          untrue=("tied", "transpose", "dtype")),
        M("Transformer", "nn.ModuleList(Block(config) for _ in range(config.n_layers))",
          "nn.ModuleList([Block(config)] * config.n_layers)",
          ("shared", "same block", "one block", "parameters", "n_layers", "copies"),
          "repeats one Block object n_layers times: every layer shares the same weights, so the model has one "
          "block's parameters (num_parameters too small) and all layers compute the same function. Fix: a new "
          "Block per layer",
          untrue=("layer_idx", "norm_eps", "dtype"), regime="more than one layer"),
        M("param_counts", '"attention": L * (q_and_o + k_and_v)', '"attention": L * q_and_o + k_and_v',
          ("k_proj", "v_proj", "per layer", "n_layers", "parenthes", "once"),
          "drops the parentheses: k_proj and v_proj are counted once for the whole model instead of once per "
          "layer. Right for one layer. Fix: L * (q_and_o + k_and_v)",
          untrue=("tied head counted", "norms", "head_dim"), regime="more than one layer"),
    ],
    "06": [
        # https://github.com/NeuraLegion/shainet/pull/110
        M("attention_step", STEP_ROPE_K + STEP_UPDATE,
          STEP_ROPE_K + STEP_UPDATE + "    k_all = tinylm.apply_rope(k_all, cos, sin)          # every key at its position\n",
          ("twice", "rotated again", "already rotated", "double", "re-rotat", "cached keys"),
          "rotates the keys when they are made (line 5) and again after the cache update (new line 7), the bug a "
          "review flagged in https://github.com/NeuraLegion/shainet/pull/110: the new keys are rotated twice, and "
          "the cached keys, stored rotated, are rotated again on every step. It shows at SDPA (line 9), which reads "
          "k_all, and in the k_all returned. Fix: rotate each key once, before the cache update",
          untrue=("values", "mask", "transpose")),
        # https://github.com/chelsea0x3b/llama-dfdx/pull/7
        M("attention_step", STEP_ROPE_K + STEP_UPDATE, STEP_UPDATE + STEP_ROPE_K,
          ("before the cache", "after the cache", "unrotated", "not rotated", "order", "k_all"),
          "moves the keys' rotation below the cache update (lines 5-6 swapped): k_all is built from the unrotated "
          "keys, and the rotated k is never used. The cache and the attention (SDPA on line 8) both get keys "
          "without position; https://github.com/chelsea0x3b/llama-dfdx/pull/7 rotates k, with the cache's length "
          "as offset, before concatenating. Fix: rotate k, then cache_update",
          untrue=("twice", "values", "mask")),
        # moved step and entry state: the reset done at the end instead of at the start
        M("generate_greedy", GREEDY, GREEDY.replace(
            "    cache.reset()                                   # stale positions from an earlier prompt would shift everything\n",
            "").replace("    return idx", "    cache.reset()                                   # leave it empty for the next call\n    return idx"),
          ("reset", "stale", "earlier", "start", "cache.length", "before"),
          "moves cache.reset() from the start to the end: calls that follow one another still work (each leaves "
          "the cache empty), but a cache that arrives holding positions (filled by the caller or by an interrupted "
          "generation) is not emptied, so the prompt is placed after the stale positions. Fix: reset at the start",
          untrue=("argmax", "last position", "no_grad"),
          regime="a cache that arrives holding positions (not reset by the caller)"),
        # far symptom: keepdim dropped on the argmax; the cat on the next line raises
        M("generate_greedy", "next_id = logits.argmax(dim=-1, keepdim=True)", "next_id = logits.argmax(dim=-1)",
          ("keepdim", "(b, 1)", "(b,)", "shape", "dimensions", "cat"),
          "drops keepdim on the argmax: next_id is (B,) instead of (B, 1). It first shows on the next line, "
          "torch.cat((idx, next_id), dim=1), which raises (2-D against 1-D). Fix: keepdim=True on the argmax",
          untrue=("reset", "last position", "temperature")),
        M("kv_cache_bytes", "* dtype.itemsize", "* 4",
          ("dtype", "itemsize", "bytes per element", "float32", "4 bytes", "bfloat16", "float16"),
          "hard-codes 4 bytes per element: right for the default float32; the bytes of a float16/bfloat16 cache "
          "come out twice too many. Fix: dtype.itemsize",
          untrue=("n_kv_heads", "n_layers", "2 *"), regime="a dtype other than float32"),
        M("cache_update", "torch.cat((past_k, k), dim=2)  # positions are axis 2: the past first, then the new tokens\n"
          "    v_all = torch.cat((past_v, v), dim=2)",
          "torch.cat((k, past_k), dim=2)  # positions are axis 2\n    v_all = torch.cat((v, past_v), dim=2)",
          ("order", "new first", "before the past", "prepend", "past first", "before the cached"),
          "puts the new positions before the cached ones, keys and values alike: the pairs stay matched, but the "
          "positions are out of order, so the bottom-right causal mask lets each new token see the later new tokens "
          "and only part of the past. Fix: "
          "(past, new) on axis 2",
          untrue=("values instead", "axis 1", "dtype")),
        # far symptom and entry state: T from the first prompt on line 2; the copy on line 6 raises
        M("generate_left_padded", "B, T = len(prompts), max(len(p) for p in prompts)", "B, T = len(prompts), len(prompts[0])",
          ("longest", "max", "first prompt", "length", "t =", "shape"),
          "takes the padded length from the first prompt instead of the longest (line 2): right when the first "
          "prompt is the longest; otherwise it first shows on line 6, where ids[b, T - len(p):] = p gets a longer "
          "prompt than the row holds and raises. Fix: T = max(len(p) for p in prompts)",
          untrue=("reset", "argmax", "+ 1"), regime="a first prompt shorter than another"),
    ],
    "07": [
        # moved step, far symptom, entry state: the keys repeated before the cache instead of inside attention
        M("gqa_step", "    k_all = torch.cat((past_k, k), dim=2)",
          "    k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)       # (B, nh, T, hd)\n    k_all = torch.cat((past_k, k), dim=2)",
          ("repeat", "before the cache", "cache", "n_kv", "unrepeated", "heads"),
          "repeats the new keys and values before the cache update (new line 5) instead of only inside the "
          "attention: the edit is on line 5, but it first shows on the next line, where torch.cat of the past "
          "(n_kv heads) with the new (n_heads heads) raises; the cache must stay n_kv wide. Fix: cache the "
          "unrepeated keys, repeat only for the attention",
          untrue=("mask", "rope", "dtype"), regime="n_kv_heads < n_heads"),
        # far symptom: n_rep from the batch sizes; SDPA on line 3 raises
        M("gqa_attention", "n_rep = q.shape[1] // k.shape[1]", "n_rep = len(q) // len(k)",
          ("n_rep", "heads", "shape[1]", "batch", "len", "repeat"),
          "computes n_rep from len(), the batch axis: it is always 1, so nothing is repeated and the mismatch first "
          "shows on line 3, where SDPA raises (n_heads query heads against n_kv key heads) unless n_kv == 1. Fix: "
          "q.shape[1] // k.shape[1]",
          untrue=("causal", "mask", "dtype")),
        M("gqa_step", "attn_mask=mask)", "is_causal=start == 0)",
          ("mask", "is_causal", "bottom-right", "top-left", "start", "chunk", "prefill"),
          "replaces the bottom-right mask by is_causal only on the first call: the prefill (start 0) and one-token "
          "steps (no mask needed) are right, but a step of several tokens after a prefill gets no mask and its "
          "tokens read each other's future. Fix: attn_mask=causal_mask(T, start + T)",
          untrue=("repeat", "rope", "dtype"), regime="a step of several tokens after a prefill (start > 0, T > 1)"),
        # https://github.com/apple/ml-hypercloning/issues/1
        M("repeat_kv", "    x = x[:, :, None].expand(B, n_kv, n_rep, T, hd)  # (B, n_kv, n_rep, T, hd): a view, copies of each kv head side by side\n"
          "    return x.reshape(B, n_kv * n_rep, T, hd)          # (B, n_kv * n_rep, T, hd): groups stay contiguous",
          "    return x.repeat(1, n_rep, 1, 1)                  # (B, n_kv * n_rep, T, hd)",
          ("tile", "interleav", "order", "group", "h // n_rep", "h % n_kv", "repeat"),
          "repeats the heads with Tensor.repeat, which tiles them (0, 1, 0, 1) instead of grouping them (0, 0, 1, 1): "
          "query head h reads kv head h % n_kv instead of h // n_rep, the confusion of "
          "https://github.com/apple/ml-hypercloning/issues/1 (heads cloned by repeating instead of interleaving). "
          "Fix: repeat_interleave(n_rep, dim=1), or the expand on a new axis after n_kv",
          untrue=("positions", "dtype", "mask"), regime="n_kv_heads > 1 and n_rep > 1"),
        # far symptom: start read from the heads axis on line 2; the mask and SDPA on lines 8-9 show it
        M("gqa_step", "start, n_rep = past_k.shape[2], attn.n_heads", "start, n_rep = past_k.shape[1], attn.n_heads",
          ("start", "shape[2]", "axis", "positions", "cached length", "heads"),
          "reads the cached length from axis 1 (the kv heads) instead of axis 2 (line 2): the new tokens are "
          "rotated at position n_kv and it shows at the mask and SDPA (lines 8-9), where a (T, n_kv + T) mask "
          "meets start + T keys and raises, unless the cache happens to hold n_kv positions. Fix: past_k.shape[2]",
          untrue=("repeat", "interleav", "dtype")),
        M("decode_bytes_per_token", "weights = (matrices + L * per_block + d) * size", "weights = (matrices + L * per_block) * size + d",
          ("final norm", "bytes", "itemsize", "size", "elements"),
          "adds the final norm's d parameters after converting to bytes: d elements counted as d bytes, "
          "(size - 1) * d bytes short. Fix: (matrices + L * per_block + d) * size",
          untrue=("kv_cache", "n_kv_heads", "tied head counted")),
    ],
    "08": [
        # https://github.com/sgl-project/sglang-jax/pull/1563
        M("sample_next", SAMPLE_TEMP + SAMPLE_TOP_K + SAMPLE_TOP_P,
          SAMPLE_TOP_K + SAMPLE_TOP_P + "    logits = logits / temperature             # after the filters\n",
          ("temperature", "order", "before", "after", "top_p", "nucleus"),
          "moves the temperature below the filters, the first of the three bugs "
          "https://github.com/sgl-project/sglang-jax/pull/1563 fixed: top_p measures the untempered distribution, "
          "so at temperature < 1 the nucleus keeps too many tokens and at > 1 too few (top_k is unaffected: a "
          "positive scale keeps the order). Fix: divide by the temperature first",
          untrue=("generator", "squeeze", "in place"), regime="a temperature other than 1 together with top_p"),
        # https://github.com/rasbt/reasoning-from-scratch/issues/118
        M("generate", WAS + GEN_EVAL, GEN_EVAL + WAS,
          ("mode", "train mode", "restore", "was_training", "after eval", "order", "eval"),
          "records the caller's mode after model.eval() instead of before (lines 1-2 swapped): was_training is "
          "always False, so the finally clause leaves a model that arrived in train mode in eval mode, the side "
          "effect reported in https://github.com/rasbt/reasoning-from-scratch/issues/118. Present, in the wrong "
          "order. Fix: was_training = model.training before model.eval()",
          untrue=("generator", "temperature", "no_grad"), regime="a model that arrives in train mode"),
        # far symptom: the sort ascending on line 1; the nucleus computed on lines 3-5 keeps the tail
        M("top_p_filter", "logits.sort(dim=-1, descending=True)", "logits.sort(dim=-1, descending=False)",
          ("descending", "ascending", "least likely", "sort", "tail", "order"),
          "sorts ascending on line 1: the cumulative mass on line 3 starts at the least likely tokens, so lines "
          "4-6 keep the unlikely tail up to mass p and drop the most likely tokens. Fix: descending=True",
          untrue=("scatter", "gather", "temperature")),
        # moved step: the temperature applied to the probabilities, which multinomial renormalises
        M("sample_next", SAMPLE_TEMP + SAMPLE_TOP_K + SAMPLE_TOP_P
          + "    probs = logits.softmax(dim=-1)            # (B, V): filtered tokens get exactly 0\n",
          SAMPLE_TOP_K + SAMPLE_TOP_P
          + "    probs = logits.softmax(dim=-1) / temperature  # scaled after the softmax\n",
          ("temperature", "after the softmax", "probabilities", "logits", "no effect", "renormal"),
          "moves the temperature from the logits to the probabilities: multinomial renormalises, so dividing "
          "probabilities by a constant changes nothing and every temperature samples at 1. Fix: divide the logits, "
          "before the filters and the softmax",
          untrue=("generator", "squeeze", "in place"), regime="a temperature other than 1"),
        # far symptom: the last batch row taken instead of the last position; the cat two lines down raises
        M("generate", "logits = model(idx)[:, -1]", "logits = model(idx)[-1]",
          ("last position", "[:, -1]", "batch", "axis", "shape", "row"),
          "indexes the batch axis instead of the positions: logits are the last sequence's (T, V), sample_next "
          "draws T ids, and it shows two lines down, where torch.cat((idx, next_id[:, None]), dim=1) raises unless "
          "B == T. Fix: model(idx)[:, -1]",
          untrue=("eval", "generator", "temperature")),
        M("generate", "torch.cat((idx, next_id[:, None]), dim=1)", "torch.cat((idx, next_id[None]), dim=1)",
          ("batch", "(b, 1)", "(1, b)", "axis", "shape", "none"),
          "adds the new axis in front: next_id[None] is (1, B) instead of (B, 1). A batch of one is right (both are "
          "(1, 1)); with several prompts the cat raises, or, when B equals the current length, appends every "
          "row's token to the first row only. Fix: next_id[:, None]",
          untrue=("eval", "generator", "temperature"), regime="a batch of more than one prompt"),
    ],
    "09": [
        # moved step and entry state: train mode switched on after the forward
        M("train_step", TRAIN_MODE + TRAIN_FORWARD, TRAIN_FORWARD + TRAIN_MODE,
          ("train mode", "eval", "dropout", "mode", "before the forward", "order"),
          "switches to train mode after the forward instead of before (lines 1-2 swapped): a model that arrives in "
          "eval mode computes this step's loss and gradient without dropout. The switch is present, in the wrong "
          "place. Fix: model.train() before the forward",
          untrue=("zero_grad", "clip", "item"), regime="a model with dropout that arrives in eval mode"),
        # far symptom: starts drawn (B, 1) on line 1; the returned x, y of line 4 are empty
        M("get_batch", "(batch_size,), generator=generator)", "(batch_size, 1), generator=generator)",
          ("shape", "starts", "(b,)", "empty", "axis", "window"),
          "draws the starts with shape (batch_size, 1) on line 1: line 2's starts[:, None] then makes the positions "
          "(B, 1, T + 1), and it first shows on line 4, whose slices cut the size-1 axis: x and y come back "
          "(B, 0, T + 1), empty. Fix: randint(..., (batch_size,))",
          untrue=("shift", "off by one", "dtype")),
        # https://github.com/LLM360/amber-train/issues/6
        M("train_step", "loss = lm_loss(model(x), y)", "loss = lm_loss(model(x)[:, :-1], y[:, 1:])",
          ("shift", "twice", "double", "already shifted", "two positions", "next-next"),
          "shifts the batch once more in train_step though get_batch's y is already shifted, the double shift asked "
          "about in https://github.com/LLM360/amber-train/issues/6: position t is trained to predict the token two "
          "ahead. lm_loss itself is right; the edit is in train_step's forward line. Fix: lm_loss(model(x), y)",
          untrue=("zero_grad", "clip", "train mode")),
        # moved step: zero_grad inside the loop, so only the last micro-batch's gradient is kept
        M("train_step_accumulated", "    optimizer.zero_grad(set_to_none=True)                             # once, before the first micro-batch\n"
          "    total = 0.0\n    for x, y in micro_batches:\n",
          "    total = 0.0\n    for x, y in micro_batches:\n"
          "        optimizer.zero_grad(set_to_none=True)                         # before each micro-batch\n",
          ("zero_grad", "accumulat", "last micro-batch", "inside the loop", "once", "order"),
          "moves zero_grad into the loop: each micro-batch wipes the gradients of the ones before, so the step "
          "uses only the last micro-batch's share (scaled by 1/N of the whole batch). Present, in the wrong place. "
          "Fix: zero_grad once, before the loop",
          untrue=("padding", "-100", "not clipped")),
        M("lr_schedule", "progress = (step - warmup_steps) / max(1, total_steps - 1 - warmup_steps)",
          "progress = step / max(1, total_steps - 1)",
          ("warmup", "progress", "decay", "jump", "cosine"),
          "measures the cosine's progress from step 0 instead of from the end of warmup: right with no warmup; "
          "with warmup the decay has already advanced when it begins, so the rate drops below max_lr at once. Fix: "
          "(step - warmup_steps) / (total_steps - 1 - warmup_steps)",
          untrue=("min_lr", "clamp", "past total_steps"), regime="warmup_steps > 0"),
        # far symptom: tokens per step counted as sequences on line 6; the flops on the return line show it
        M("train_step_costs", "tokens = batch_size * seq_len", "tokens = batch_size",
          ("tokens", "seq_len", "batch_size * seq_len", "per token", "flops"),
          "counts the step's tokens as its sequences (line 6): the FLOPs of the return line are seq_len times too "
          "small for the weights' matmuls (the attention term, which multiplies seq_len again, is off too). Fix: "
          "tokens = batch_size * seq_len",
          untrue=("adam", "tied head counted", "backward")),
    ],
    "10": [
        # https://github.com/InternLM/InternLM/issues/318
        M("nll_sum_and_count", "F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=ignore_index,",
          "F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), targets[:, 1:].flatten(), ignore_index=ignore_index,",
          ("shift", "twice", "double", "already shifted", "count", "t - 1"),
          "shifts the already shifted targets once more (line 1), the extra shift asked about in "
          "https://github.com/InternLM/InternLM/issues/318: each position is scored against the token two ahead, "
          "and it also shows on line 3 (unedited), which still counts B*T targets while only B*(T-1) were summed. "
          "Fix: no shift here",
          untrue=("padding", "float32", "reduction")),
        # far symptom and entry state: val left uint8 on line 1; the indexing on line 4 shows it
        M("bigram_nll", "train, val = train.long(), val.long()", "train, val = train.long(), val",
          ("uint8", "long", "int64", "index", "mask", "dtype"),
          "converts train but leaves val as it came (line 1): with uint8 bytes (the course corpus) it first shows "
          "on line 4, where probs.log()[val[:-1], val[1:]] treats the uint8 tensors as boolean masks, which raises "
          "or picks the wrong entries. Fix: val.long() too",
          untrue=("alpha", "smoothing", "rows sum"), regime="uint8 data (the course corpus)"),
        # https://github.com/pfnet/pytorch-pfn-extras/issues/688
        M("evaluate", "model.train(was_training)", "model.train(model.training)",
          ("mode", "train mode", "restore", "was_training", "eval"),
          "restores the mode from model.training, which model.eval() has already set to False: a model that "
          "arrived in train mode is left in eval mode, the evaluator's unrestored mode of "
          "https://github.com/pfnet/pytorch-pfn-extras/issues/688. The loss is right. Fix: model.train(was_training)",
          untrue=("no_grad", "token-weighted", "padding"), regime="a model that arrives in train mode"),
        M("bigram_nll", "(counts.sum(dim=1, keepdim=True) + 256 * alpha)", "(counts.sum() + 256 * 256 * alpha)",
          ("joint", "conditional", "row", "per previous byte", "sum to 1", "normalis"),
          "normalises by the total count instead of each row's: the probabilities are of the pair (joint), not of "
          "the next byte given the previous one, so the NLL is far too high. Fix: counts.sum(dim=1, keepdim=True) "
          "+ 256 * alpha",
          untrue=("uint8", "shift", "long")),
        # far symptom: the method stored instead of the flag on line 1; the finally clause raises
        M("evaluate", "was_training = model.training", "was_training = model.train",
          ("training", "mode", "bool", "was_training", "method"),
          "stores the bound method model.train instead of the flag model.training (line 1): nothing fails until "
          "the finally clause, where model.train(was_training) rejects a non-boolean mode and raises, after the "
          "loss was computed. Fix: was_training = model.training",
          untrue=("no_grad", "padding", "token-weighted")),
        M("evaluate", "loss / math.log(2) / bytes_per_token", "loss / math.log(256) / bytes_per_token",
          ("bits", "log(2)", "bytes", "8", "ln 2", "base"),
          "divides by ln 256 instead of ln 2: that converts nats to bytes (units of 8 bits), so bits_per_byte "
          "comes out 8 times too small. Fix: loss / math.log(2) / bytes_per_token",
          untrue=("perplexity", "mode", "padding")),
    ],
}

SAME = [
    # https://github.com/abisee/pointer-generator/issues/88 (softmax, mask, renormalise: the same weights)
    ("03", M("split_heads", "x.view(B, T, n_heads, d // n_heads)", "x.unflatten(-1, (n_heads, d // n_heads))", (),
             "splits the last axis with unflatten instead of view")),
    ("04", M("rope_cache", "angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float32), inv_freq)      # (T, hd/2)\n"
             "    angles = torch.cat((angles, angles), dim=-1)",
             "inv_freq = torch.cat((inv_freq, inv_freq))  # (hd,): feature i and i + hd/2 share a frequency\n"
             "    angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float32), inv_freq)", (),
             "duplicates the frequencies before the outer product instead of the angles after it")),
    ("04", M("apply_rope", "return torch.cat((-x2, x1), dim=-1)", "return torch.stack((-x2, x1), dim=-2).flatten(-2)", (),
             "stacks the two halves on a new axis and flattens it, the same concatenation")),
    ("05", M("swiglu_hidden", "multiple * math.ceil(8 * d_model / 3 / multiple)",
             "multiple * -(-8 * d_model // (3 * multiple))", (),
             "rounds up with integer floor division of the negated numerator instead of math.ceil")),
    ("05", M("pre_norm_block", "x = x + attn(attn_norm(x))", "h = attn(attn_norm(x))\n    x = x + h", (),
             "names the attention branch before adding it")),
    ("06", M("attention_step", "attn_mask=mask)", "attn_mask=None if T == 1 else mask)", (),
             "drops the mask for a single new token, which may attend to every cached key anyway")),
    ("07", M("repeat_kv", "    x = x[:, :, None].expand(B, n_kv, n_rep, T, hd)", "    x = x.unsqueeze(2).expand(B, n_kv, n_rep, T, hd)", (),
             "inserts the repeat axis with unsqueeze(2) instead of indexing with None")),
    ("08", M("sample_next", SAMPLE_TEMP + SAMPLE_TOP_K,
             SAMPLE_TOP_K + "    logits = logits / temperature             # top-k keeps the same tokens at any positive scale\n", (),
             "divides by the temperature after top-k (still before top-p): a positive scale keeps the order, so "
             "top-k keeps the same tokens")),
    ("10", M("bigram_nll", "-probs.log()[val[:-1], val[1:]].mean()", "-probs[val[:-1], val[1:]].log().mean()", (),
             "looks the probabilities up before taking their log instead of after")),
    ("01", M("one_hot_embed", "return one_hot @ weight", 'return torch.einsum("...v,vd->...d", one_hot, weight)', (),
             "multiplies the one-hot by the weight with einsum instead of @")),
    ("06", M("generate_left_padded", "torch.full((B, T), pad_id, dtype=torch.long)", "torch.full((B, T), pad_id)", (),
             "leaves torch.full to infer int64 from the integer pad_id")),
    ("07", M("gqa_attention", "is_causal=True)", "is_causal=q.shape[2] > 1)", (),
             "skips the causal flag for a single position, where one query sees its one key either way")),
    ("08", M("top_k_filter", "logits < kth", "kth > logits", (), "writes the comparison the other way round")),
    ("10", M("evaluate", '"perplexity": math.exp(loss)', '"perplexity": math.exp(total / count)', (),
             "recomputes the mean loss inside the exponent")),
    ("01", M("one_hot_embed", "num_classes=weight.shape[0]).to(weight.dtype)", "num_classes=weight.shape[0]).to(weight)", (),
             "casts the one-hot with .to(weight), which takes weight's dtype (and device)")),
    ("04", M("interleaved_to_half", "pairs = w.reshape(n_heads, hd // 2, 2, d_in)", "pairs = w.view(n_heads, hd // 2, 2, d_in)", (),
             "splits the rows with view: splitting one axis is always a view, even of a transposed weight")),
]
