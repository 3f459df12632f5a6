"""A twenty-second held-out set of learner mistakes ("fresh22"), written without
reading the checks: neither autograder/checks/ (any file), tests/checks/,
autograder/diagnosis_*.py, benchmarks/bench_diagnostics.py's source, the
diagnosis sections of docs/benchmarks.md nor tests/course/test_docs.py were
opened, listed or grepped; bench_diagnostics.py, check cells and notebook
checks were never run, and no mistake was tried against a check.

What was opened or run. The brief, the helper rules and mkwt.sh; `ls` of
/work/wt/tools and /work/wt/prompts (names only, no file in them opened);
mkwt.sh fresh22 and the last five lines of git log. `ls` of the repository
root, benchmarks/, benchmarks/mutations/ and tinylm/ (names only), and
`wc -l` of verify_unseen.py, verify_heldout.py, heldout_duplicates.py,
mutations/unseen.py, mutations/__init__.py and the unseen_probes*.py files.
The setup and answer cells of all ten notebooks through
bench_diagnostics.notebook_cells, printed (of its third result only the
check names). benchmarks/mutations/__init__.py, unseen.py (the entry class
and its entries), verify_unseen.py, heldout_duplicates.py,
verify_heldout.py, unseen_probes.py, unseen_probes_later.py,
unseen_probes_fresh20.py and unseen_probes_fresh21.py whole. Of the other
sets only fresh21.py's module docstring, printed with python. In tinylm/:
kv_cache.py whole, model.py lines 1-200, rope.py lines 1-60, and a grep of
attention.py for the definitions of causal_mask and causal_attention (12
lines after each). A grep for "fresh21" over the four registration files
named in the brief, then lines 155-185 of tests/course/test_benchmarks.py.
Greps of pyproject.toml and the Makefile for a line-length or lint setting
(none found), and awk counts of lines over 130 characters in this set's two
files and of the longest line of unseen.py and verify_unseen.py (numbers
only). Public threads were found with 12 searches of issue threads; each
candidate's URL was grepped over benchmarks/mutations/ (`grep -rl URL`, the
URL only: 21 URLs, of which 3 were already in fresh12, fresh13 or fresh20
and were not used). Run: the shared probes of unseen_probes.py once on the
ten solution namespaces (to see their names and values), the new 06 probe
once on the solution, verify_unseen.py --set fresh22 (seven rounds),
heldout_duplicates.py --set fresh22 (five rounds) and the two fresh22 tests
of test_benchmarks.py. Slips, none touching a check: lines 155-160 of
test_benchmarks.py showed the end of an unrelated benchmark test; the
notebooks' setup cells, printed as allowed, name the check functions and
helper modules they import (import lines only).

Sources: a learner working through the notebooks and, for 13 mistakes, bugs
public projects shipped, fixed or were asked about (the thread is named in a
comment above the entry and in its reason): onnxruntime#28463 (variance as
E[x²] - E[x]²), flash-attention#517 (a causal mask aligned top left),
entropix#39 (a float32 softmax never cast back), gpt-neox#1016 (RoPE
positions in bfloat16), tsai#171 (a 0/1 float mask added, not applied),
pytorch#110144 (is_causal on a chunk after a cache), OpenNMT-py#2532 (the
padding mask dropped after the first step), C2C#19 (decoded tokens placed by
slot, padding counted), sglang#33539 (top-k by rank, ties cut), dinov2#472
(an inference_mode decorator), OLMo#760 (padding zeros kept in a mean),
nanoGPT#691 (a decay of zero steps), nanoGPT#168 (accumulated losses never
divided).

The set's focus, each mistake counted once by its main kind. Mistakes a later
step partly hides (13): a one-hot matmul rounded through float16 and cast
back, logits scaled by 1/sqrt(d) (a greedy argmax keeps its token), tokens
scaled to a largest entry of 1 before RMSNorm (only eps sees it), a softmax
shifted by one maximum for the whole tensor (exact per row until a row
underflows), RoPE positions made in bfloat16 and cast back (exact up to 256),
the stream divided by sqrt(d) before the final norm, a 0/1 float mask (all
ones, a removable shift, while decoding one token), the padding mask rebuilt
as ones after the prefill (the first new token is right), a cache returned
unrotated while this step attends with rotated keys, the temperature as a
power of the filtered probabilities (exact without a filter), the loss times
the batch size and unnormalised accumulated sums (a clip that acts hides
both), a bfloat16 NLL sum cast to float32 afterwards. Mistakes that show only
in some states or sizes (22, of which 5 raise there): non-contiguous ids
through .view, the gain inside the statistic (a fresh gain of ones hides
it), var.clamp(min=eps), E[x²] - E[x]² (large means), an upcast handed to
rms_norm (float16 models), a top-left mask (fewer queries than keys), a
float32 softmax never cast back (bfloat16), apply_rope in place (the
caller's q), the head size from the input width (non-square weights), 8·d//3
before the ceiling (multiples 1 and 2), `x +=` in the block (the caller's
x), RoPE buffers trimmed on the module (a second, cached call), is_causal for
a chunk (after a cache), argmax(...).unsqueeze(0) (a batch of more than one),
positions by slot (prompts of different lengths), top-k by rank (ties),
logits /= temperature (the caller's logits), @torch.inference_mode on
generate (a later training step), targets.view(-1) (sliced targets), a
per-token mean with reduction="none" (padding), the decay's unguarded
denominator (warmup = total - 1), the mean times the count (a batch of pure
padding). Mistakes that raise inside the learner's function in the middle of
several steps (9): an einsum that drops the statistic's axis, heads merged
with .view after a permute, the cos table sliced to T, values transposed
before their .view, a square mask after the prefill, an expanded kv view, kv
heads repeated before the cache, the sort order used as a numpy index, a
bincount of minlength 256. Look-alike mistakes (8), each the less obvious
member of its pair: the tie made the other way round (the identity test
passes), the tie made with load_state_dict (a copy), heads given strided
features (right for one head), angles repeated in place (right at head_dim
2), k and v sized by the group size (equal at 4 heads on 2), the head count
difference for their ratio (equal at 4 on 2), the head size as d_model //
n_heads in the cache (equal by default), targets >= 0 counted (equal for
-100). Accounting wrong by a term (6): a projection's d - 1 adds, a learned
position table, one row of an untied embedding read, an untied embedding
missing, the lookup counted as a matmul, the mean over len(val) bytes. And 2
plain ones (o_proj's columns permuted with the queries, targets shifted a
second time).

SAME lists 16 edits that compute what the solution computes another way
(among them register_parameter for the tie, torch's biased variance, an
einsum for the scores, q and k both rotated from position 0, integer ceiling
division, padding filled with another id that the mask hides, flatten(1, 2)
for the repeat, a gather by order.argsort(), cross_entropy on (B, V, T),
inference_mode in evaluate); a check must pass each.

Counts: 60 mistakes (01: 5, 02: 6, 03: 6, 04: 6, 05: 7, 06: 7, 07: 5, 08: 5,
09: 7, 10: 6), 16 SAME edits, 13 public threads. 70 mistakes and 22 SAME
edits were sketched; 10 mistakes and 4 SAME edits were dropped before writing
to keep the set near its size, and 2 trivial SAME edits after (a broadcast
outer product, randint's explicit low bound). Duplicates:
heldout_duplicates.py --set fresh22 compared the texts mechanically and printed only matches: 2 of
78 entries matched on the first round (2 SAME edits, a finfo fill and an
unsqueeze-expand), then 0; both were replaced by different edits (the first
replacement, a logsumexp softmax, changed a probe at scores near -2.8e4, so it
was replaced by an einsum). The new probes, in
benchmarks/unseen_probes_fresh22.py, measure a float16 RMSNorm's output
dtype, LayerNorm on tokens of mean 1e4, attention whose batch rows have
scores of very different sizes, the caller's tensors after pre_norm_block and
sample_next, kv_cache_bytes at head_dim 12, and the positions and attention
mask generate_left_padded hands the model at every pass (the shared probes'
greedy tokens did not change under two of the left-padding mistakes).
`benchmarks/verify_unseen.py --set fresh22` proves each mistake a real bug
and each SAME edit harmless. `in_lists` is left False throughout: the
project's nbNN lists were not read, so it was not assessed.

Each mistake is one substitution in one answer cell; `expect` holds words a
check that found it would likely say, `regime` the situation in which a
mistake that is right by default shows. Each reason says what the learner did
and the fix."""
from __future__ import annotations

from . import Mutation
from .unseen import Unseen

M = Unseen

MUTATIONS = [
    # ---------------------------------------------------------------- 01: embeddings and the tied head
    ("01", M("embed", "    return weight[ids]  # advanced indexing: one row of weight per id, gradient flows to those rows",
             "    flat = weight[ids.view(-1)]             # (N, d): one row per id\n"
             "    return flat.view(*ids.shape, weight.shape[1])",
             ("view", "contiguous", "reshape", "stride", "ids.view"),
             "flattens the ids with .view(-1): a sliced (non-contiguous) batch of ids such as ids[:, 1:] makes the "
             "first line raise; ids.reshape(-1), or weight[ids] itself, takes any layout",
             regime="non-contiguous ids (a slice such as ids[:, 1:])")),
    ("01", M("one_hot_embed",
             "    one_hot = F.one_hot(ids, num_classes=weight.shape[0]).to(weight.dtype)  # (..., V)\n"
             "    return one_hot @ weight  # (..., V) @ (V, d) -> (..., d)",
             "    one_hot = F.one_hot(ids, num_classes=weight.shape[0]).half()  # (..., V): 0 and 1 are exact in half\n"
             "    return (one_hot @ weight.half()).to(weight.dtype)  # half the memory, cast back at the end",
             ("half", "float16", "precision", "round", "weight.dtype", "dtype"),
             "multiplies in float16 and casts back: the one-hot is exact in half, but the table's rows are rounded to "
             "float16 on the way, so every embedding is off in its fourth digit though its dtype looks right; keep the "
             "one-hot in weight.dtype")),
    ("01", M("tied_logits", "    return x @ weight.T  # (B, T, d) @ (d, V) -> (B, T, V)",
             "    scale = x.shape[-1] ** -0.5             # as for attention scores\n"
             "    return x @ weight.T * scale",
             ("scale", "sqrt", "d ** -0.5", "divided", "temperature", "factor", "1/sqrt(d)"),
             "scales the logits by 1/sqrt(d) as attention scales its scores: a greedy argmax still picks the same token, "
             "but softmax, the loss and every sampled distribution are flattened; the head is a plain x @ Wᵀ")),
    ("01", M("tie_weights", "    lm_head.weight = tok_emb.weight  # the same Parameter object, not a copy of its values",
             "    tok_emb.weight = lm_head.weight  # one Parameter shared by both",
             ("direction", "embedding's values", "head's values", "overwrit", "other way", "tok_emb.weight =",
              "values of the embedding"),
             "ties the other way round: both names now hold one Parameter, but it is the head's, so the embedding's "
             "values are replaced by the head's initialisation; assign lm_head.weight = tok_emb.weight")),
    ("01", M("tie_weights", "    lm_head.weight = tok_emb.weight  # the same Parameter object, not a copy of its values",
             '    lm_head.load_state_dict({"weight": tok_emb.weight})  # the head now holds the embedding\'s values',
             ("same parameter", "copy", "two parameters", "separate", "load_state_dict", "not tied", "values only"),
             "copies the embedding's values into the head with load_state_dict: right after the call both give the "
             "same logits, but they are two Parameters that the first optimizer step pulls apart")),

    # ---------------------------------------------------------------- 02: normalisation
    ("02", M("rms_norm", "    x32 = x.float()  # squares of fp16 values overflow above 256",
             "    x32 = x.float() / x.float().abs().amax(dim=-1, keepdim=True)  # tokens scaled to max 1: no overflow",
             ("eps", "amax", "scale", "max", "rescal", "divid", "below eps", "small"),
             "scales each token to a largest entry of 1 before the statistic: RMSNorm undoes any per-token scale except "
             "against eps, so ordinary tokens come out right, but tokens whose mean square is near or below eps are "
             "normalised as if eps were not there (and an all-zero token gives NaN); upcast with x.float() only",
             regime="tokens whose mean square is near or below eps")),
    ("02", M("rms_norm", "    x32 = x.float()  # squares of fp16 values overflow above 256",
             "    x32 = (weight * x).float()  # the gain first, then the statistic",
             ("gain", "weight", "before the statistic", "inside", "twice", "trained"),
             "multiplies by the gain before taking the statistic (and again at the end): with a fresh gain of ones "
             "nothing changes, with a trained gain the statistic is of the scaled token and the gain counts twice",
             regime="a gain other than all ones (a trained RMSNorm)")),
    ("02", M("layer_norm", "    return weight * centred * torch.rsqrt(var + eps) + bias",
             "    return weight * centred * torch.rsqrt(var.clamp(min=eps)) + bias",
             ("eps", "clamp", "var + eps", "added", "floor", "maximum"),
             "guards the division with var.clamp(min=eps) instead of adding eps: the same once var is far above eps, "
             "different for quiet tokens or a large eps (var 0.01 with eps 0.1 divides by sqrt(0.1), not sqrt(0.11))",
             regime="a variance comparable to eps (small inputs or a large eps)")),
    # https://github.com/microsoft/onnxruntime/issues/28463
    ("02", M("layer_norm",
             "    centred = x - x.mean(dim=-1, keepdim=True)              # (..., d)\n"
             "    var = centred.pow(2).mean(dim=-1, keepdim=True)         # (..., 1): biased, divides by d",
             "    mean = x.mean(dim=-1, keepdim=True)                     # (..., 1)\n"
             "    var = x.pow(2).mean(dim=-1, keepdim=True) - mean.pow(2)  # E[x²] - E[x]², one pass over x\n"
             "    centred = x - mean",
             ("cancellation", "e[x²]", "e[x^2]", "mean of the squares", "precision", "large mean", "negative",
              "nan", "two-pass", "centred"),
             "takes the variance as E[x²] - E[x]²: equal on paper, but for tokens whose mean is large against their "
             "spread the two terms cancel in float32 and the variance is noise or negative (NaN), as in "
             "https://github.com/microsoft/onnxruntime/issues/28463; average the squares of the centred values",
             regime="features with a mean far larger than their spread")),
    ("02", M("RMSNorm", "        return rms_norm(x, self.weight, self.eps)",
             "        return rms_norm(x.float(), self.weight, self.eps)  # statistics in float32",
             ("dtype", "float32", "x.dtype", "half", "float16", "bfloat16", "upcast", "cast back"),
             "hands rms_norm an upcast copy: rms_norm already computes in float32 and returns x's dtype, so now a "
             "float16 model's norm returns float32 and every later layer runs in mixed precision; pass x as it is",
             regime="float16 or bfloat16 input")),
    ("02", M("rms_norm",
             "    inv_rms = torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)  # (..., 1): one statistic per token",
             '    mean_sq = torch.einsum("...d,...d->...", x32, x32) / x32.shape[-1]  # (...): one statistic per token\n'
             "    inv_rms = torch.rsqrt(mean_sq + eps)",
             ("keepdim", "broadcast", "(..., 1)", "trailing", "size of tensor", "shape", "inv_rms", "unsqueeze"),
             "computes the mean square with an einsum that drops the feature axis: inv_rms is (...) instead of "
             "(..., 1), so the return line's x32 * inv_rms fails to broadcast (or, on a square input, scales the wrong "
             "axis); keep a trailing axis of size 1")),

    # ---------------------------------------------------------------- 03: attention
    # https://github.com/Dao-AILab/flash-attention/issues/517
    ("03", M("causal_mask",
             "    allowed = torch.ones(q_len, kv_len, dtype=torch.bool)\n"
             "    return allowed.tril(diagonal=kv_len - q_len)  # query i is position kv_len - q_len + i",
             "    rows = torch.arange(q_len)[:, None]     # query i\n"
             "    cols = torch.arange(kv_len)[None, :]    # key j\n"
             "    return cols <= rows                     # key j visible from query i when j <= i",
             ("bottom-right", "top-left", "kv_len - q_len", "offset", "cached", "q_len < kv_len", "fewer queries",
              "aligned"),
             "compares key and query indices directly: the mask is aligned to the top left, right for a square mask, but "
             "with fewer queries than keys the queries are the last positions and must see every earlier key (bottom "
             "right), the alignment flash-attention changed, https://github.com/Dao-AILab/flash-attention/issues/517",
             regime="fewer queries than keys (q_len < kv_len)")),
    ("03", M("split_heads",
             "    return y.transpose(1, 2).reshape(B, T, H * hd)  # (B, T, H, hd) -> (B, T, d): heads side by side",
             "    y = y.permute(0, 2, 1, 3)              # (B, T, H, hd)\n"
             "    return y.view(B, T, -1)                # heads side by side",
             ("view", "contiguous", "reshape", "stride", "permute"),
             "merges the heads with .view after the permute: the permuted tensor is not contiguous, so the view "
             "raises for any input with several heads and positions; reshape copies when it must")),
    ("03", M("split_heads",
             "    x = x.view(B, T, n_heads, d // n_heads)  # (B, T, H, hd): head h owns features h*hd .. (h+1)*hd - 1",
             "    x = x.view(B, T, d // n_heads, n_heads).transpose(2, 3)  # (B, T, H, hd): head h owns features h, h + H, ...",
             ("strided", "interleav", "contiguous block", "h*hd", "which features", "owns", "layout", "every h-th"),
             "gives head h every H-th feature instead of a contiguous block: the shapes are right and one head is "
             "the same, but merge_heads puts blocks back, so merge(split(x)) is not x and the projections' rows no "
             "longer belong to the heads they were trained for")),
    ("03", M("causal_attention",
             "    weights = scores.softmax(dim=-1)                                 # over keys: each row sums to 1",
             "    shifted = (scores - scores.max()).exp()                          # stable: the largest exponent is 0\n"
             "    weights = shifted / shifted.sum(dim=-1, keepdim=True)            # each row sums to 1",
             ("per row", "each row", "global max", "whole tensor", "underflow", "nan", "amax(dim=-1", "row's max", "0/0"),
             "writes a stable softmax shifted by one maximum for the whole tensor: a constant shift cancels in each "
             "row, so ordinary inputs are right, but a row whose scores lie far below the largest score of another "
             "head or sequence underflows to all zeros and divides 0 by 0; shift each row by its own max "
             "(amax(dim=-1, keepdim=True)) or use softmax",
             regime="rows whose scores lie far below the largest score of the whole batch")),
    # https://github.com/xjdr-alt/entropix/pull/39
    ("03", M("causal_attention",
             "    weights = scores.softmax(dim=-1)                                 # over keys: each row sums to 1",
             "    weights = scores.softmax(dim=-1, dtype=torch.float32)            # the softmax in float32 for stability",
             ("dtype", "float32", "bfloat16", "cast back", "type_as", "v.dtype", "same dtype"),
             "asks softmax for float32 weights and never casts them back: in float32 nothing changes, with bfloat16 "
             "q, k, v the next line multiplies float32 weights by bfloat16 values and raises, the bug "
             "https://github.com/xjdr-alt/entropix/pull/39 fixed; add .to(v.dtype)",
             regime="bfloat16 or float16 q, k, v")),
    ("03", M("attention_flops",
             "    projection = 2 * B * T * d * d              # (B·T, d) @ (d, d): 2 FLOPs per multiply-add",
             "    projection = B * T * d * (2 * d - 1)        # each output: d multiplies and d - 1 adds",
             ("multiply-add", "2 flops", "d - 1", "adds", "qkv_proj", "out_proj", "2 * b * t * d * d", "convention"),
             "counts each output of a projection as d multiplies and d - 1 adds: short by one add per output "
             "(B·T·d for each projection), while the convention, and FlopCounterMode, count 2 FLOPs per multiply-add")),

    # ---------------------------------------------------------------- 04: RoPE
    # https://github.com/EleutherAI/gpt-neox/pull/1016
    ("04", M("rope_cache",
             "    angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float32), inv_freq)      # (T, hd/2)",
             "    positions = torch.arange(max_seq_len, dtype=torch.bfloat16)  # (T,): exact enough\n"
             "    angles = torch.outer(positions.float(), inv_freq)                                 # (T, hd/2)",
             ("bfloat16", "position", "256", "precision", "round", "exact", "float32", "long"),
             "builds the positions in bfloat16 and casts them back: the tables come out float32, and every position up "
             "to 256 is exact, but above it bfloat16 rounds 257 to 256 and so on, so distant tokens share an angle, "
             "the bug of https://github.com/EleutherAI/gpt-neox/pull/1016; make the positions in float32",
             regime="positions above 256 (long sequences)")),
    ("04", M("rope_cache",
             "    angles = torch.cat((angles, angles), dim=-1)  # (T, hd): feature i and i + hd/2 share an angle",
             "    angles = angles.repeat_interleave(2, dim=-1)  # (T, hd): each angle twice",
             ("interleav", "repeat_interleave", "cat", "halves", "i + hd/2", "pairs", "layout", "adjacent"),
             "repeats each angle in place (a, a, b, b, ...): the layout of the interleaved rotation, while rotate_half "
             "pairs feature i with i + hd/2, which needs (a, b, ..., a, b, ...); the same only for head_dim 2")),
    ("04", M("apply_rope", "    cos = cos[start_pos:start_pos + T].to(x.dtype)  # (T, hd), broadcasts over (B, H)",
             "    cos = cos[start_pos:T].to(x.dtype)  # (T, hd), broadcasts over (B, H)",
             ("start_pos + t", "slice", "start_pos:", "cos", "rows", "broadcast", "size of tensor"),
             "slices the cos table to row T instead of start_pos + T: from position 0 it is right, after a cache it "
             "keeps T - start_pos rows, so the return line fails to broadcast (or, with one row left, uses one "
             "position's cosine for every token)",
             regime="start_pos > 0")),
    ("04", M("apply_rope", "    return x * cos + rotate_half(x) * sin",
             "    turned = rotate_half(x) * sin           # before x changes below\n"
             "    x *= cos                                # in place: saves a copy\n"
             "    return x + turned",
             ("in place", "in-place", "caller", "modif", "*=", "input changed", "x itself"),
             "scales x in place: the result is right, but the caller's q or k is now x·cos, so a second use of it (or "
             "a second call) is wrong, and a tensor that requires grad raises; write x * cos",
             regime="the caller's tensor used again after the call")),
    ("04", M("interleaved_to_half", "    hd = rows // n_heads",
             "    hd = d_in // n_heads  # each head's share of the width",
             ("rows", "d_in", "head_dim", "hd", "rows // n_heads", "not square", "shape", "reshape"),
             "reads the head size from the weight's input width: for a square q_proj of an MHA model it is the same, "
             "for k_proj with fewer kv heads (or head_dim · n_heads != d) the next line's reshape fails or splits the "
             "rows at the wrong places; the head size is rows // n_heads",
             regime="a weight that is not square (k_proj with fewer kv heads, or head_dim · n_heads != d)")),
    ("04", M("interleaved_to_half",
             "    return q_proj, k_proj, wv, wo                 # values and o_proj: never rotated, unchanged",
             "    o_proj = interleaved_to_half(wo.T, n_heads).T  # o_proj's columns follow the heads' features\n"
             "    return q_proj, k_proj, wv, o_proj",
             ("o_proj", "wo", "values", "never rotated", "unchanged", "columns", "v_proj"),
             "permutes o_proj's columns as well: o_proj reads the attention output, whose features come from the "
             "values, which are never rotated nor permuted, so o_proj must stay as it is")),

    # ---------------------------------------------------------------- 05: the block and the decoder
    ("05", M("swiglu_hidden", "    return multiple * math.ceil(8 * d_model / 3 / multiple)",
             "    hidden = 8 * d_model // 3               # 8/3 of the width, in whole features\n"
             "    return multiple * math.ceil(hidden / multiple)",
             ("floor", "//", "integer division", "round up", "8/3", "ceil", "fraction"),
             "floors 8/3 · d_model before rounding up: with a multiple of 32 the floor almost never matters, but with "
             "a multiple of 1 or 2 the fraction itself should round up (d_model 64: 171, not 170)",
             regime="a multiple that does not absorb the fraction (1 or 2)")),
    ("05", M("pre_norm_block",
             "    x = x + attn(attn_norm(x))  # the branch reads a normalised copy; the stream stays a sum",
             "    x += attn(attn_norm(x))     # the branch reads a normalised copy; the stream stays a sum",
             ("in place", "in-place", "+=", "caller", "modif", "leaf"),
             "adds the attention branch in place: the block's output is right, but the caller's x now holds the "
             "stream after attention, and a leaf that requires grad raises; x = x + ...",
             regime="the caller's tensor used again after the call")),
    ("05", M("Transformer", "        return tied_logits(self.norm(x), self.lm_head.weight)     # (B, T, V)",
             "        x = x / math.sqrt(self.config.d_model)                     # keep the logits small\n"
             "        return tied_logits(self.norm(x), self.lm_head.weight)     # (B, T, V)",
             ("final norm", "sqrt(d", "d_model", "scale", "eps", "before the norm", "divid"),
             "divides the stream by sqrt(d_model) right before the final RMSNorm: the norm undoes any scale except "
             "against eps, so the logits move only as far as eps now weighs against a stream made d_model times "
             "quieter in mean square (a little at the default eps, much at norm_eps 1e-2); the final norm already "
             "fixes the scale")),
    ("05", M("Transformer",
             "        v = self.v_proj(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)  # (B, n_kv, T, hd)",
             "        v = self.v_proj(x).transpose(1, 2).view(B, self.n_kv_heads, T, self.head_dim)  # (B, n_kv, T, hd)",
             ("view", "contiguous", "transpose", "reshape", "stride", "v_proj"),
             "transposes the values before splitting the heads: the .view of the transposed (B, d, T) tensor raises "
             "for any prompt of more than one token (one decoding token happens to work); split with view, then "
             "transpose, as for q and k")),
    ("05", M("Transformer", "        x = embed(idx, self.tok_emb.weight)                        # (B, T, d)",
             "        x = embed(idx, self.tok_emb.weight)                        # (B, T, d)\n"
             "        T = idx.shape[1]\n"
             "        self.rope_cos, self.rope_sin = self.rope_cos[:T], self.rope_sin[:T]  # this input's positions",
             ("rope_cos", "buffer", "state", "second call", "sliced", "positions", "cache", "start_pos", "overwrit"),
             "trims the model's RoPE buffers to the current input and stores them back on the module: the first call "
             "is right, but every later call sees tables only as long as the shortest input so far, so a cached "
             "decoding step past that length finds no angles; slice into a local, or let apply_rope slice",
             regime="a second forward pass after a shorter one (a cached decoding step)")),
    ("05", M("param_counts", '    return {"embedding": config.vocab_size * d,',
             '    return {"embedding": (config.vocab_size + config.max_seq_len) * d,  # token and position tables',
             ("embedding", "max_seq_len", "position", "rope", "no position table", "learned position"),
             "adds a learned position table of max_seq_len · d to the embedding, as in GPT-2: a Llama model takes its "
             "positions from RoPE, which has no parameters")),
    ("05", M("param_counts", "    k_and_v = 2 * d * config.n_kv_heads * hd    # k_proj and v_proj: d -> n_kv_heads·hd each",
             "    group = config.n_heads // config.n_kv_heads  # query heads per kv head\n"
             "    k_and_v = 2 * d * group * hd                # k_proj and v_proj",
             ("n_kv_heads", "k_proj", "v_proj", "group", "kv heads", "attention"),
             "sizes k_proj and v_proj by the group size n_heads // n_kv_heads instead of n_kv_heads: for 4 query heads "
             "on 2 kv heads both are 2, so the usual GQA example agrees, while MHA (a group of 1) counts one head")),

    # ---------------------------------------------------------------- 06: the KV cache
    # https://github.com/timeseriesAI/tsai/issues/171
    ("06", M("attention_step",
             "    y = F.scaled_dot_product_attention(q, k_all, v_all, attn_mask=mask)    # (B, nh, T, hd)",
             "    y = F.scaled_dot_product_attention(q, k_all, v_all, attn_mask=mask.float())  # (B, nh, T, hd): 1 = may attend",
             ("float", "bool", "added", "additive", "-inf", "mask.float", "future", "not masked"),
             "hands SDPA the mask as 0.0 / 1.0 floats: a float mask is added to the scores, so nothing is masked. "
             "Decoding one token the mask is all ones, a shift the softmax removes, so steps are right, but a prefill "
             "or a chunk lets every token read the future (https://github.com/timeseriesAI/tsai/issues/171); pass "
             "the bool mask",
             regime="more than one new token (a prefill or a chunk)")),
    # https://github.com/pytorch/pytorch/issues/110144
    ("06", M("attention_step",
             "    mask = tinylm.causal_mask(T, start + T).to(x.device)  # (T, start + T), bottom-right aligned\n"
             "    y = F.scaled_dot_product_attention(q, k_all, v_all, attn_mask=mask)    # (B, nh, T, hd)",
             "    y = F.scaled_dot_product_attention(q, k_all, v_all, is_causal=T > 1)  # (B, nh, T, hd): one token sees all",
             ("is_causal", "top-left", "bottom-right", "start", "cached", "chunk", "mask", "offset"),
             "uses is_causal for several new tokens and no mask for one: right for a prefill from an empty cache and "
             "for one-token steps, but SDPA's causal mask is aligned to the top left, so a chunk of several tokens "
             "after cached positions loses most of the past, https://github.com/pytorch/pytorch/issues/110144",
             regime="a chunk of more than one token after cached positions")),
    ("06", M("attention_step",
             "    mask = tinylm.causal_mask(T, start + T).to(x.device)  # (T, start + T), bottom-right aligned",
             "    mask = tinylm.causal_mask(start + T).to(x.device)  # every position so far",
             ("mask", "shape", "q_len", "causal_mask(t", "rows", "start + t", "broadcast", "size"),
             "builds a square mask over every position so far: right for the prefill (start 0), but after it the "
             "scores have T rows and the mask start + T, so the SDPA line raises; causal_mask(T, start + T)",
             regime="a step after the prefill (start > 0)")),
    ("06", M("generate_greedy",
             "            next_id = logits.argmax(dim=-1, keepdim=True)       # (B, 1)",
             "            next_id = logits.argmax(dim=-1).unsqueeze(0)        # (1, B): the new position's axis",
             ("unsqueeze", "(b, 1)", "(1, b)", "batch", "axis", "keepdim", "shape", "cat"),
             "adds the new axis in front: (1, B) instead of (B, 1), the same for a single prompt, while for a batch "
             "the torch.cat on the next line raises",
             regime="a batch of more than one prompt")),
    # https://github.com/OpenNMT/OpenNMT-py/pull/2532
    ("06", M("generate_left_padded",
             "            mask = torch.cat((mask, mask.new_ones(B, 1)), dim=1)        # (B, cached + 1): the new token is real",
             "            mask = mask.new_ones(B, mask.shape[1] + 1)                  # (B, cached + 1): all real from now on",
             ("padding", "mask", "decod", "after the first", "pad", "attended", "every step", "cat"),
             "rebuilds the mask as all ones after the prefill: the first new token is right, from the second on the "
             "shorter prompts attend to their padding again; the padding must stay masked at every step, "
             "https://github.com/OpenNMT/OpenNMT-py/pull/2532",
             regime="prompts of different lengths, from the second new token on")),
    # https://github.com/thu-nics/C2C/pull/19
    ("06", M("generate_left_padded",
             "            ids, positions = next_id[:, None], positions[:, -1:] + 1    # (B, 1) each: one past the row's last position",
             "            ids, positions = next_id[:, None], torch.full((B, 1), mask.shape[1])  # (B, 1) each: the next slot",
             ("position", "padding", "pad", "slot", "row", "counted", "decod", "rope"),
             "places each decoded token at the next slot number: right for the longest prompt, but a padded row's "
             "new tokens jump ahead by its pad count, as https://github.com/thu-nics/C2C/pull/19 describes; continue "
             "each row from its own last position",
             regime="prompts of different lengths")),
    ("06", M("kv_cache_bytes",
             "    per_position = 2 * config.n_layers * config.n_kv_heads * config.head_dim  # K and V, in every block",
             "    head = config.d_model // config.n_heads                                # each head's width\n"
             "    per_position = 2 * config.n_layers * config.n_kv_heads * head  # K and V, in every block",
             ("head_dim", "d_model // n_heads", "d_model", "head size"),
             "derives the head size as d_model // n_heads: the default config agrees, but a model whose head_dim is "
             "set apart from the width caches head_dim features per head",
             regime="head_dim set apart from d_model // n_heads")),

    # ---------------------------------------------------------------- 07: grouped-query attention
    ("07", M("repeat_kv",
             "    return x.reshape(B, n_kv * n_rep, T, hd)          # (B, n_kv * n_rep, T, hd): groups stay contiguous",
             "    return x.view(B, n_kv * n_rep, T, hd)             # (B, n_kv * n_rep, T, hd): no copy",
             ("view", "expand", "contiguous", "reshape", "stride", "copy"),
             "merges the expanded axes with .view: an expanded axis has stride 0, so the view raises whenever a kv "
             "head serves more than one query head; reshape makes the copy it needs",
             regime="more than one query head per kv head (n_rep > 1)")),
    ("07", M("gqa_attention", "    n_rep = q.shape[1] // k.shape[1]",
             "    n_rep = q.shape[1] - k.shape[1]  # the query heads beyond the kv heads",
             ("n_rep", "ratio", "//", "difference", "n_heads // n_kv", "group", "heads per"),
             "takes the difference of the head counts for their ratio: for 4 query heads on 2 kv heads both are 2, "
             "on 1 kv head the repeat gives 3 heads and SDPA raises (and MHA repeats 0 times)",
             regime="a ratio other than 2 (e.g. 4 query heads on 1 kv head)")),
    ("07", M("gqa_step",
             "    k_all = torch.cat((past_k, k), dim=2)                 # (B, n_kv, start + T, hd): the small cache\n"
             "    v_all = torch.cat((past_v, v), dim=2)",
             "    k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)      # (B, nh, T, hd): one per query head\n"
             "    k_all = torch.cat((past_k, k), dim=2)                 # (B, nh, start + T, hd)\n"
             "    v_all = torch.cat((past_v, v), dim=2)",
             ("repeat_kv", "cache", "n_kv", "kv heads", "before", "cat", "sizes", "repeated"),
             "repeats the new keys and values before appending them: the cache holds n_kv_heads, so the torch.cat "
             "raises for GQA (with MHA n_rep is 1 and nothing changes); cache the kv heads, repeat only inside "
             "attention",
             regime="GQA (fewer kv heads than query heads)")),
    ("07", M("gqa_step",
             "    q, k = tinylm.apply_rope(q, cos, sin, start), tinylm.apply_rope(k, cos, sin, start)\n"
             "    k_all = torch.cat((past_k, k), dim=2)                 # (B, n_kv, start + T, hd): the small cache\n"
             "    v_all = torch.cat((past_v, v), dim=2)\n"
             "    mask = tinylm.causal_mask(T, start + T).to(x.device)  # (T, start + T)\n"
             "    y = F.scaled_dot_product_attention(q, repeat_kv(k_all, n_rep), repeat_kv(v_all, n_rep), attn_mask=mask)",
             "    q, k_rot = tinylm.apply_rope(q, cos, sin, start), tinylm.apply_rope(k, cos, sin, start)\n"
             "    k_all = torch.cat((past_k, k), dim=2)                 # (B, n_kv, start + T, hd): the small cache\n"
             "    v_all = torch.cat((past_v, v), dim=2)\n"
             "    mask = tinylm.causal_mask(T, start + T).to(x.device)  # (T, start + T)\n"
             "    keys = torch.cat((past_k, k_rot), dim=2)              # this step's keys, the new ones rotated\n"
             "    y = F.scaled_dot_product_attention(q, repeat_kv(keys, n_rep), repeat_kv(v_all, n_rep), attn_mask=mask)",
             ("cache", "rotated", "unrotated", "k_all", "returned", "rope", "next step", "later step", "stored"),
             "attends with rotated new keys but returns the cache built from the unrotated ones: this step is right, "
             "the next step reads keys without their rotation; append the rotated keys and return that",
             regime="a step after the first (the returned cache read back)")),
    ("07", M("decode_bytes_per_token",
             "    matrices = config.vocab_size * d * (1 if config.tie_embeddings else 2)    # a tied head is the embedding",
             "    matrices = config.vocab_size * d + (0 if config.tie_embeddings else d)    # untied: the lookup reads one row",
             ("embedding", "every parameter", "untied", "tok_emb", "vocab_size * d", "one row", "lookup"),
             "counts one row of an untied embedding, the row a lookup touches, where the exercise asks for every "
             "parameter once: short by (V - 1) · d for an untied model, right for a tied one",
             regime="untied embeddings")),

    # ---------------------------------------------------------------- 08: sampling
    # https://github.com/sgl-project/sglang/pull/33539
    ("08", M("top_k_filter",
             "    kth = logits.topk(k, dim=-1).values[..., -1:]          # (..., 1): the k-th largest value\n"
             '    return logits.masked_fill(logits < kth, float("-inf"))',
             "    top = logits.topk(k, dim=-1).indices                   # (..., k): where the k largest are\n"
             "    kept = torch.zeros_like(logits, dtype=torch.bool).scatter(-1, top, True)\n"
             '    return logits.masked_fill(~kept, float("-inf"))',
             ("tie", "ties", "k-th", "kth", "exactly k", "indices", "equal"),
             "keeps exactly the k positions topk returns: the same without ties, but a logit equal to the k-th is "
             "dropped or kept by its index, where the exercise keeps ties with the k-th, the difference "
             "https://github.com/sgl-project/sglang/pull/33539 fixed; compare with the k-th value",
             regime="a tie with the k-th largest logit")),
    ("08", M("top_p_filter",
             "    drop = drop_sorted.scatter(-1, order, drop_sorted)            # back to vocabulary order",
             "    drop = drop_sorted[order]                                     # back to vocabulary order",
             ("index", "scatter", "gather", "out of bounds", "order", "permutation", "first axis", "dimension 0"),
             "indexes the mask with the sort order as in numpy: order's values index the first axis (the batch), so "
             "it raises out of range; scatter along the last axis puts each flag back at its token")),
    ("08", M("sample_next",
             "    logits = logits / temperature             # on logits, before any filter\n"
             "    if top_k is not None:\n"
             "        logits = top_k_filter(logits, top_k)\n"
             "    if top_p is not None:\n"
             "        logits = top_p_filter(logits, top_p)\n"
             "    probs = logits.softmax(dim=-1)            # (B, V): filtered tokens get exactly 0",
             "    if top_k is not None:\n"
             "        logits = top_k_filter(logits, top_k)\n"
             "    if top_p is not None:\n"
             "        logits = top_p_filter(logits, top_p)\n"
             "    probs = logits.softmax(dim=-1) ** (1 / temperature)  # sharpened; multinomial renormalises",
             ("temperature", "before the filter", "top_p", "nucleus", "power", "after the filter", "sharpen"),
             "applies the temperature as a power of the probabilities after the filters: p^(1/T) renormalised is "
             "softmax(logits / T), so without filters the draws are right, but top-p then chooses its nucleus from "
             "the untempered distribution",
             regime="top_p together with a temperature other than 1")),
    ("08", M("sample_next", "    logits = logits / temperature             # on logits, before any filter",
             "    logits /= temperature                     # on logits, before any filter",
             ("in place", "in-place", "/=", "caller", "modif", "logits itself"),
             "divides the caller's logits in place: the draw is right, but the tensor the caller handed in is now "
             "tempered, so using it again (logging it, sampling twice) tempers twice",
             regime="the caller's logits used again after the call")),
    # https://github.com/facebookresearch/dinov2/issues/472
    ("08", M("generate",
             "def generate(model, prompt, max_new_tokens, temperature=1.0, top_k=None, top_p=None, generator=None):",
             "@torch.inference_mode()\n"
             "def generate(model, prompt, max_new_tokens, temperature=1.0, top_k=None, top_p=None, generator=None):",
             ("inference_mode", "inference tensor", "no_grad", "autograd", "saved for backward", "training step"),
             "decorates generate with torch.inference_mode: the ids are right, but they are inference tensors, and a "
             "later training step on the generated text raises 'Inference tensors cannot be saved for backward' "
             "(https://github.com/facebookresearch/dinov2/issues/472); torch.no_grad is enough",
             regime="the generated ids used later in a step autograd records")),

    # ---------------------------------------------------------------- 09: training
    ("09", M("lm_loss",
             "    return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)  # (B*T, V) vs (B*T,)",
             "    return F.cross_entropy(logits.flatten(0, 1), targets.view(-1), ignore_index=-100)  # (B*T, V) vs (B*T,)",
             ("view", "contiguous", "reshape", "targets", "stride", "flatten"),
             "flattens the targets with .view(-1): sliced targets such as y[:, 1:] are not contiguous and the view "
             "raises; flatten or reshape take any layout",
             regime="sliced (non-contiguous) targets")),
    # https://github.com/allenai/OLMo/pull/760
    ("09", M("lm_loss",
             "    return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)  # (B*T, V) vs (B*T,)",
             '    per_token = F.cross_entropy(logits.transpose(1, 2), targets, ignore_index=-100, reduction="none")  # (B, T)\n'
             "    return per_token.mean()",
             ("padding", "-100", "ignore", "mean over", "count", "reduction", "zeros", "denominator"),
             "averages per-token losses itself: ignored targets get a loss of 0 but still count in the mean, so with "
             "padding the loss is too small (https://github.com/allenai/OLMo/pull/760); without padding it is right",
             regime="targets with -100 padding")),
    # https://github.com/karpathy/nanoGPT/pull/691
    ("09", M("lr_schedule",
             "    progress = (step - warmup_steps) / max(1, total_steps - 1 - warmup_steps)  # 0 -> 1 over the decay",
             "    progress = (step - warmup_steps) / (total_steps - 1 - warmup_steps)  # 0 -> 1 over the decay",
             ("zero", "division", "zerodivision", "max(1", "decay", "warmup_steps", "total_steps"),
             "drops the guard on the decay's length: when warmup covers every step but the last the denominator is "
             "0 and the schedule raises ZeroDivisionError, https://github.com/karpathy/nanoGPT/pull/691",
             regime="a decay of no steps (warmup_steps = total_steps - 1)")),
    ("09", M("train_step", "    loss.backward()                              # d loss / d every parameter",
             "    (loss * x.shape[0]).backward()               # summed over the batch's rows",
             ("scale", "batch size", "x.shape[0]", "gradient", "mean", "sum", "clip", "times"),
             "backpropagates the loss times the batch size: whenever the gradient norm is above grad_clip the clip "
             "rescales it to the same update, so typical steps look right, but below the bound every step is B times "
             "too large; backward the mean loss",
             regime="a gradient norm below grad_clip")),
    # https://github.com/karpathy/nanoGPT/issues/168
    ("09", M("train_step_accumulated",
             "        (summed / n_tokens).backward()                                # .grad += this micro-batch's share",
             "        summed.backward()                                             # .grad += this micro-batch's sum",
             ("n_tokens", "divid", "scale", "sum", "mean", "normalis", "normaliz", "token count", "clip"),
             "backpropagates each micro-batch's summed loss without dividing by the batch's token count: a clip that "
             "acts hides the factor N, an unclipped step is N times too large, "
             "https://github.com/karpathy/nanoGPT/issues/168",
             regime="a whole-batch gradient norm below grad_clip")),
    ("09", M("train_step_costs",
             "    n_params = matmul_weights + (2 * L + 1) * d + (0 if config.tie_embeddings else V * d)  # + gains, untied embedding",
             "    n_params = matmul_weights + (2 * L + 1) * d                               # + gains",
             ("embedding", "untied", "tie", "tok_emb", "v * d", "parameters"),
             "counts the parameters from the matmul weights and the gains only: the head is among the matmuls, so a "
             "tied model is right, but an untied model's embedding table (V · d) is missing from weights, grads and "
             "moments",
             regime="untied embeddings")),
    ("09", M("train_step_costs",
             '    return {"flops": 6 * matmul_weights * tokens + 3 * attention_matmuls,     # backward = 2 x forward',
             "    lookup = V * d                                                            # the embedding as a one-hot matmul\n"
             '    return {"flops": 6 * (matmul_weights + lookup) * tokens + 3 * attention_matmuls,  # backward = 2 x forward',
             ("lookup", "embedding", "one-hot", "no flops", "index", "matmul", "6 * v * d"),
             "counts the embedding lookup as a one-hot matmul: an index does no multiply-adds, so FLOPs are over by "
             "6 · V · d per token")),

    # ---------------------------------------------------------------- 10: evaluation
    ("10", M("nll_sum_and_count",
             "    nll = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=ignore_index,\n"
             '                          reduction="sum")                       # (B*T, V) vs (B*T,) -> scalar\n'
             "    count = int((targets != ignore_index).sum())                 # padding is not a token",
             "    count = int((targets != ignore_index).sum())                 # padding is not a token\n"
             "    mean = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=ignore_index)\n"
             "    nll = mean * count                                           # the sum, from the mean",
             ("nan", "all padding", "0/0", "mean", "reduction", "empty", "no scored"),
             "rebuilds the sum as the mean times the count: equal whenever a target is scored, but a batch of pure "
             "padding has a NaN mean, and NaN · 0 is NaN, which then poisons the whole evaluation; reduction='sum'",
             regime="a batch that is all padding")),
    ("10", M("nll_sum_and_count",
             "    count = int((targets != ignore_index).sum())                 # padding is not a token",
             "    count = int((targets >= 0).sum())                            # padding is not a token",
             ("ignore_index", "count", ">= 0", "padding", "-100"),
             "counts the targets that are not negative: the same for the default -100, but with an ignore_index that "
             "is a real id (0 for a pad token) the padding is counted while cross_entropy skips it",
             regime="an ignore_index that is a valid id (>= 0)")),
    ("10", M("nll_sum_and_count",
             "    nll = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=ignore_index,\n"
             '                          reduction="sum")                       # (B*T, V) vs (B*T,) -> scalar',
             "    nll = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=ignore_index,\n"
             '                          reduction="sum").float()               # (B*T, V) vs (B*T,) -> scalar, as float32',
             ("bfloat16", "float32", "upcast", "precision", "before", "round", "sum"),
             "casts the sum to float32 after cross_entropy: with bfloat16 logits the sum of hundreds of losses has "
             "already been rounded in bfloat16 (spacing 4 near 600), and casting back cannot restore it; upcast the "
             "logits first",
             regime="bfloat16 logits")),
    ("10", M("evaluate", "                s, n = nll_sum_and_count(model(x.to(dev)), y.to(dev))",
             "                s, n = nll_sum_and_count(model(x.to(dev))[:, :-1], y.to(dev)[:, 1:])  # position t predicts t + 1",
             ("shift", "already", "get_batch", "twice", "next token", "[:, 1:]", "targets"),
             "shifts the targets again: the batches already pair x[t] with y[t] = the next token, so this scores each "
             "position against the token two ahead")),
    ("10", M("bigram_nll",
             "    counts = torch.bincount(train[:-1] * 256 + train[1:], minlength=256 * 256).view(256, 256).double()  # [prev, next]",
             "    counts = torch.bincount(train[:-1] * 256 + train[1:], minlength=256).view(256, 256).double()  # [prev, next]",
             ("minlength", "65536", "256 * 256", "bincount", "view", "shape", "size"),
             "passes minlength=256: bincount is then only as long as the largest pair id + 1, so the view to "
             "(256, 256) raises unless the pair (255, 255) occurs; minlength must be 256 · 256")),
    ("10", M("bigram_nll", "    return -probs.log()[val[:-1], val[1:]].mean().item()",
             "    return -probs.log()[val[:-1], val[1:]].sum().item() / len(val)  # per byte of val",
             ("len(val)", "pairs", "n - 1", "mean", "predicted", "count", "one more"),
             "divides the summed NLL by len(val): only len(val) - 1 bytes are predicted (the first has no previous "
             "byte), so the mean is low by one part in len(val)")),
]

SAME = [
    ("01", Mutation("one_hot_embed", ".to(weight.dtype)  # (..., V)", ".to(weight)  # (..., V): the table's dtype and device",
                    (), "casts the one-hot with .to(weight): the table's dtype (and device) in one call")),
    ("01", Mutation("tie_weights", "    lm_head.weight = tok_emb.weight  # the same Parameter object, not a copy of its values",
                    '    lm_head.register_parameter("weight", tok_emb.weight)  # the same Parameter under the head\'s name',
                    (), "registers the embedding's Parameter as the head's weight: what the assignment does")),
    ("02", Mutation("layer_norm", "    var = centred.pow(2).mean(dim=-1, keepdim=True)         # (..., 1): biased, divides by d",
                    "    var = x.var(dim=-1, keepdim=True, correction=0)         # (..., 1): biased, divides by d",
                    (), "takes torch's variance with correction=0: the biased variance")),
    ("03", Mutation("causal_attention", "scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])",
                    'scores = torch.einsum("...qd,...kd->...qk", q, k) / math.sqrt(q.shape[-1])',
                    (), "forms the scores with an einsum over the head axis")),
    ("04", Mutation("rotary_attention",
                    "    q = apply_rope(q, cos, sin, start_pos)  # position enters the scores only\n"
                    "    k = apply_rope(k, cos, sin, start_pos)",
                    "    q = apply_rope(q, cos, sin)  # scores read only the distance between positions\n"
                    "    k = apply_rope(k, cos, sin)",
                    (), "rotates q and k both from position 0: when both sit at the same offset every score, and so the "
                        "output, is unchanged, since a score depends only on the difference of the two angles")),
    ("05", Mutation("swiglu_hidden", "    return multiple * math.ceil(8 * d_model / 3 / multiple)",
                    "    return multiple * -(-8 * d_model // (3 * multiple))  # ceiling division in integers",
                    (), "rounds up with integer ceiling division: -(-a // b)")),
    ("06", Mutation("kv_cache_bytes", "    return per_position * seq_len * batch_size * dtype.itemsize",
                    "    return per_position * seq_len * batch_size * torch.empty((), dtype=dtype).element_size()",
                    (), "reads the element size from an empty tensor of that dtype")),
    ("06", Mutation("generate_left_padded", "        ids[b, T - len(p):] = p                                         # the padding goes in front",
                    "        ids[b, -len(p):] = p                                            # the padding goes in front",
                    (), "places each prompt at the end with a negative start")),
    ("06", Mutation("generate_left_padded", "    ids = torch.full((B, T), pad_id, dtype=torch.long)                  # (B, T)",
                    "    ids = torch.ones(B, T, dtype=torch.long)                            # (B, T): any id, the mask hides it",
                    (), "fills the padding with token 1 instead of pad_id: no query attends to a padding key, so its id "
                        "never reaches an output")),
    ("07", Mutation("repeat_kv",
                    "    return x.reshape(B, n_kv * n_rep, T, hd)          # (B, n_kv * n_rep, T, hd): groups stay contiguous",
                    "    return x.flatten(1, 2)                            # (B, n_kv * n_rep, T, hd): groups stay contiguous",
                    (), "merges the kv and repeat axes with flatten(1, 2), which copies the expanded view as reshape does")),
    ("07", Mutation("decode_bytes_per_token",
                    "    matrices = config.vocab_size * d * (1 if config.tie_embeddings else 2)    # a tied head is the embedding",
                    "    matrices = config.vocab_size * d + (0 if config.tie_embeddings else config.vocab_size * d)",
                    (), "adds the untied head's matrix as a term")),
    ("08", Mutation("top_p_filter", "    drop = drop_sorted.scatter(-1, order, drop_sorted)            # back to vocabulary order",
                    "    drop = drop_sorted.gather(-1, order.argsort(dim=-1))          # back to vocabulary order",
                    (), "undoes the sort with a gather by the inverse permutation, order.argsort()")),
    ("09", Mutation("lm_loss",
                    "    return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)  # (B*T, V) vs (B*T,)",
                    "    return F.cross_entropy(logits.transpose(1, 2), targets, ignore_index=-100)  # classes on axis 1",
                    (), "hands cross_entropy the (B, V, T) layout it also accepts")),
    ("09", Mutation("train_step_accumulated", "n_tokens = sum(int((y != -100).sum()) for _, y in micro_batches)",
                    "n_tokens = sum(int((y >= 0).sum()) for _, y in micro_batches)",
                    (), "counts the targets that are not negative: -100 is the only negative target")),
    ("10", Mutation("evaluate", "        with torch.no_grad():                                # no graph: memory stays flat",
                    "        with torch.inference_mode():                         # no graph: memory stays flat",
                    (), "evaluates under inference_mode: evaluate returns floats only, so no inference tensor escapes")),
    ("10", Mutation("bigram_nll",
                    "    probs = (counts + alpha) / (counts.sum(dim=1, keepdim=True) + 256 * alpha)                         # rows sum to 1",
                    "    smoothed = counts + alpha\n"
                    "    probs = smoothed / smoothed.sum(dim=1, keepdim=True)  # rows sum to 1",
                    (), "normalises the smoothed counts by their own row sums")),
]
