"""A twenty-first held-out set of learner mistakes ("fresh21"), written without
reading the checks: neither autograder/checks/ (any file), tests/checks/,
autograder/diagnosis_*.py, benchmarks/bench_diagnostics.py's source, the
diagnosis sections of docs/benchmarks.md nor tests/course/test_docs.py were
opened, listed or grepped; bench_diagnostics.py, check cells and notebook
checks were never run, and no mistake was tried against a check.

What was opened or run. The brief and the helper rules; mkwt.sh fresh21,
git status and the last three lines of git log. `ls` of the repository root,
of benchmarks/ and of benchmarks/mutations/ (names only), and `wc -l` of
verify_heldout.py and the unseen_probes*.py files. The answer cells of each
notebook through bench_diagnostics.notebook_cells (of its third result only
the check names were printed; the setup cells were not printed, only run by
verify_heldout.namespace, once to see which of math, np, nn and F the
namespaces of 01, 03, 07, 08 and 10 hold). benchmarks/mutations/__init__.py,
unseen.py (the entry class and its entries), verify_unseen.py,
heldout_duplicates.py, verify_heldout.py, unseen_probes.py,
unseen_probes_later.py and unseen_probes_fresh20.py whole. Of the other sets
only fresh20.py's module docstring, printed with python.
tests/course/test_benchmarks.py: a grep for "fresh20" over the four
registration files named in the brief, then its lines 146-172. Greps: each
candidate thread's URL over benchmarks/mutations/ (`grep -rl URL`, the URL
only: 15 URLs, of which 4 were already in fresh10 or fresh14 and were not
used), and, in this set's own file, the entries being edited. Public threads
were found with 11 searches of issue threads. Run: verify_unseen.py --set
fresh21 (four rounds) and heldout_duplicates.py --set fresh21 (three rounds),
the two fresh21 tests of test_benchmarks.py, and the new probe of 06 once on
the solution. Slips: none that touched a check; lines 146-147 of
test_benchmarks.py showed the end of an unrelated benchmark test, and the
probe of left-padded positions follows the forward-pre-hook idea of
unseen_probes_fresh20.py, which was read whole. One slip with another set:
checking this file's line lengths, an awk command also counted fresh20.py's
lines over 130 characters; it printed the count only (7), no text of it.

Sources: a learner working through the notebooks and, for 10 mistakes, bugs
public projects shipped, fixed or were asked about (the thread is named in a
comment above the entry and in its reason): LeetCUDA#309 (eps added to the
feature count), group_normalization#1 (eps on the standard deviation),
vllm#34150 (the causal triangle counted), labmlai annotated implementations
#251 (a double rotation), gemma_pytorch#29 (embeddings times sqrt(d)),
HipKittens#22 (a GQA head mapping), esm#360 (the crossing token dropped),
skorch#481 (log of a softmax), spd#642 (the cosine's off-by-one denominator),
numpy#8866 (counts[prev, next] += 1 with repeated pairs).

The set's focus. Look-alike mistakes (22), each the less obvious member of a
pair that gives the same numbers on the obvious input: a one-hot width read
from the table's last axis (V only on a square table), eps added to the
feature count (eps ignored), statistics over the tokens (right shapes on a
square input), a strict position comparison (the diagonal dropped), a reshape
for the transpose (same at T = 1), hd ** 1/2 (sqrt(hd) at hd = 4), the causal
triangle T(T+1)/2 (the halved count), positions from 1 in the tables (a table
sliced one late), the exponent i/d (a base sqrt(theta)), q and k each rotated
twice (every angle doubled), the inverse interleaving (the same permutation at
head_dim 4), SiLU on the up branch (gate and up swapped), floor + 1 (ceil),
queries cached too (n_heads for n_kv_heads at a 2:1 ratio), queries shifted
one on (the diagonal one up), left-padded positions from 1 (invisible to
RoPE), whole-block copies of the kv heads (repeat for expand), a head loop
mapping h % n_kv (tiling), index k of a descending sort (k + 1 kept),
model.training assigned (the mode never restored), batch sums weighted by
their counts again (batch weighting), the bigram looked up [next, prev]
(counts transposed). Mid-function mistakes (11), the earlier and later steps
right and in the learner's own form: attention head by head stacked on axis
2, an einsum attention with the softmax over the queries, the value
projection transposed among three written-out projections, the MLP fed
mlp_norm(attn_norm(x)) through a helper variable, layer_idx left out of the
block's call, the queries rotated after the cache update at the newest
position, a cache reset inside the decode loop, the new token's mask handed
on alone, an einsum GQA step scaled by the key count, the temperature applied
after the filters, the clip inside the accumulation loop. Idioms from
elsewhere (16): a numpy lookup, torch.eye's float32 one-hot, .detach() in the
head, a float32 gain or gate never cast back, RoPE tables left uncast, stack
where cat (rotate_half) and stack on the wrong axis (get_batch), torch.finfo
for the element size, np.exp without the max, // for / (temperature, the
cosine's progress), .item() on a batch, log(softmax), the forward under
no_grad, counts[...] += 1. Accounting wrong by a term (8): the final norm, the
per-block norms, one position more, padding counted as tokens, a tied head's
matmul dropped, attention FLOPs forward only, a mean scaled by every
position, a per-byte perplexity. And 9 plain ones (a new Parameter for the
tie, eps on the standard deviation, a buffer for the gain, heads interleaved
on merging, the values permuted, Gemma's embedding scale, the crossing token
dropped, the decay's denominator, clip_grad_value_).

SAME lists 16 edits that compute what the solution computes another way
(among them an einsum head, the triangle built in floats, logical_not and
math's -inf, the mix counted over d, the halves sliced, the new rows of a
square mask, the kv head count read from the cache, amin of the top k,
zero_grad before the forward, a gather-based loss, log2(e)); a check must
pass each.

Counts: 66 mistakes (01: 5, 02: 5, 03: 8, 04: 7, 05: 7, 06: 7, 07: 5, 08: 7,
09: 10, 10: 5), 16 SAME edits, 10 public threads. 70 mistakes were written
first and 4 dropped to keep the set near its size. Duplicates:
heldout_duplicates.py --set fresh21 compared the texts mechanically and
printed only matches: 11 of 86 entries matched on the first round (7
mistakes, 4 SAME), then 0; each was rewritten into another form (eps on the
standard deviation, rotate_half's stack, the floor + 1, torch.finfo) or
replaced by a different mistake or edit (the left-padded mask, the mode read
after eval, and four SAME edits); the nucleus's tie at exactly p was replaced
too, and its replacement was one of the 4 dropped. The new
probes, in benchmarks/unseen_probes_fresh21.py, record the positions
generate_left_padded hands the model and run gradient accumulation on logits
steep enough that every micro-batch's gradient exceeds the clip norm (the
shared probes never clip a partial sum). `benchmarks/verify_unseen.py --set
fresh21` proves each mistake a real bug and each SAME edit harmless.

Each mistake is one substitution in one answer cell; `expect` holds words a
check that found it would likely say, `regime` the situation in which a
mistake that is right by default shows. Each reason says what the learner did
and the fix."""
from __future__ import annotations

from .unseen import Unseen

M = Unseen

# notebook 03's attention body, from the scores to the mix: two mistakes rewrite it in the learner's own form
ATTENTION_BODY = ('    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])     # (B, H, Tq, Tk)\n'
                  '    mask = causal_mask(q.shape[-2], k.shape[-2]).to(q.device)       # (Tq, Tk), broadcasts over (B, H)\n'
                  '    scores = scores.masked_fill(~mask, float("-inf"))\n'
                  '    weights = scores.softmax(dim=-1)                                 # over keys: each row sums to 1\n'
                  '    return weights @ v                                               # (B, H, Tq, hd)')
SCALE = ("scale", "sqrt", "head_dim", "hd", "temperature", "1/2", "precedence")
START_POS = ("start_pos", "offset", "cached positions", "positions of the new", "start")

MUTATIONS = {
    "01": [
        M("embed", "return weight[ids]  # advanced indexing: one row of weight per id, gradient flows to those rows",
          "return torch.from_numpy(weight.detach().numpy()[ids.numpy()])  # numpy's fancy indexing: one row per id",
          ("numpy", "gradient", "autograd", "detach", "graph", "bfloat16", "requires_grad"),
          "looks the rows up in numpy and wraps them back: no gradient reaches the table, and a bfloat16 table "
          "has no numpy dtype at all; index the tensor itself, weight[ids]"),
        M("one_hot_embed", "one_hot = F.one_hot(ids, num_classes=weight.shape[0]).to(weight.dtype)  # (..., V)",
          "one_hot = torch.eye(weight.shape[0])[ids]  # (..., V): row i of the identity is the one-hot of id i",
          ("dtype", "float32", "bfloat16", "device", "eye", "identity"),
          "builds the one-hot rows from torch.eye, which is float32 on the CPU whatever the table is: a bfloat16 or "
          "GPU table no longer multiplies; create it with dtype=weight.dtype, device=weight.device, or cast the "
          "one-hot to the table's dtype"),
        # look-alike: the width read from the table's last axis, which is V only on a square table, and which a
        # largest-id-inferred width (F.one_hot(ids)) resembles on ids below d
        M("one_hot_embed", "num_classes=weight.shape[0]", "num_classes=weight.shape[-1]",
          ("num_classes", "weight.shape[0]", "vocabulary", "shape[-1]", "width", "d_model", "class values"),
          "reads the one-hot width from the table's last axis (d) instead of its rows (V): right only on a square "
          "table, and any id >= d fails; the width is weight.shape[0]", regime="a table with V != d"),
        M("tied_logits", "return x @ weight.T  # (B, T, d) @ (d, V) -> (B, T, V)",
          "return x @ weight.detach().T  # (B, T, d) @ (d, V) -> (B, T, V)",
          ("detach", "gradient", "autograd", "no grad", "requires_grad", "graph", "not trained"),
          "detaches the tied table inside the head: the logits are right but no gradient of the head reaches the "
          "shared weight; drop .detach()"),
        M("tie_weights", "lm_head.weight = tok_emb.weight  # the same Parameter object, not a copy of its values",
          "lm_head.weight = nn.Parameter(tok_emb.weight)  # the head gets the embedding's values as its own Parameter",
          ("same parameter", "is tok_emb.weight", "two parameters", "separate", "new parameter", "nn.parameter",
           "not tied", "distinct"),
          "wraps the embedding's weight in a new nn.Parameter: the storage is shared for now, but the model holds two "
          "Parameters with their own gradients and optimizer state; assign the Parameter itself"),
    ],
    "02": [
        # https://github.com/xlite-dev/LeetCUDA/issues/309
        # look-alike: eps added to the count of features instead of the mean square, which on ordinary inputs
        # gives the numbers of an eps left out altogether
        M("rms_norm", "inv_rms = torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)  # (..., 1): one statistic per token",
          "inv_rms = torch.rsqrt(x32.pow(2).sum(dim=-1, keepdim=True) / (x.shape[-1] + eps))  # (..., 1): one statistic per token",
          ("eps", "epsilon", "denominator", "mean square", "small", "inside the square root"),
          "adds eps to the number of features that divides the sum of squares, not to the mean square (as in "
          "https://github.com/xlite-dev/LeetCUDA/issues/309): eps no longer keeps a near-zero token finite; "
          "rsqrt(mean of squares + eps)"),
        M("rms_norm", "return weight * (x32 * inv_rms).to(x.dtype)", "return weight * x32 * inv_rms  # the gain applied in float32 too",
          ("dtype", "float32", "bfloat16", "cast", "x.dtype", "half"),
          "applies the gain to the float32 result and never casts back: bfloat16 or float16 inputs come out float32; "
          "cast the normalised x back to x.dtype before the gain", regime="bfloat16 or float16 input"),
        # https://github.com/taokong/group_normalization/issues/1
        M("layer_norm", "return weight * centred * torch.rsqrt(var + eps) + bias",
          "std = torch.sqrt(var) + eps                             # (..., 1): eps keeps it above 0\n"
          "    return weight * (centred / std) + bias",
          ("eps", "epsilon", "standard deviation", "std", "variance", "inside the square root"),
          "adds eps to the standard deviation instead of the variance (as in "
          "https://github.com/taokong/group_normalization/issues/1): another normaliser wherever eps matters; "
          "rsqrt(var + eps)"),
        # look-alike: statistics over the tokens (BatchNorm's axis), whose shapes agree with the right ones when
        # there are as many tokens as features
        M("layer_norm", "centred = x - x.mean(dim=-1, keepdim=True)              # (..., d)\n"
          "    var = centred.pow(2).mean(dim=-1, keepdim=True)         # (..., 1): biased, divides by d",
          "centred = x - x.mean(dim=0, keepdim=True)               # (1, d): each feature's mean over the tokens\n"
          "    var = centred.pow(2).mean(dim=0, keepdim=True)          # (1, d)",
          ("batch", "dim=0", "last axis", "per token", "each token", "features", "tokens", "batchnorm"),
          "takes mean and variance over the first axis, as BatchNorm does: each feature is normalised across tokens "
          "instead of each token across its features; reduce over dim=-1"),
        M("RMSNorm", "self.weight = nn.Parameter(torch.ones(dim))  # gain starts at 1: a fresh norm only rescales",
          'self.register_buffer("weight", torch.ones(dim))  # gain starts at 1: a fresh norm only rescales',
          ("parameter", "buffer", "trainable", "optimizer", "not learned", "named_parameters"),
          "registers the gain as a buffer: it loads and moves with the module but is no Parameter, so the optimizer "
          "never trains it; nn.Parameter(torch.ones(dim))"),
    ],
    "03": [
        # look-alike: a strict comparison drops each query's own key, which is also what tril(diagonal=-1) gives
        M("causal_mask", "return allowed.tril(diagonal=kv_len - q_len)  # query i is position kv_len - q_len + i",
          "query_pos = torch.arange(kv_len - q_len, kv_len)[:, None]     # (q_len, 1): the queries' positions\n"
          "    return allowed & (torch.arange(kv_len)[None, :] < query_pos)  # key j strictly before query i",
          ("diagonal", "itself", "own position", "<=", "strict", "own key", "first query"),
          "compares key and query positions with <: a token may not attend to itself, and the first query sees no "
          "key at all; key j is visible when j <= the query's position"),
        # look-alike: a reshape where the transpose belongs, whose shape is right and whose values agree when T == 1
        M("split_heads", "return x.transpose(1, 2)                 # (B, H, T, hd)",
          "return x.reshape(B, n_heads, T, d // n_heads)  # (B, H, T, hd)",
          ("transpose", "reshape", "layout", "heads and positions", "mixes", "order of the axes"),
          "reshapes (B, T, H, hd) to (B, H, T, hd): the shape is right, but head h's rows now hold features of "
          "different tokens; swap the axes with transpose(1, 2)"),
        M("split_heads", "return y.transpose(1, 2).reshape(B, T, H * hd)  # (B, T, H, hd) -> (B, T, d): heads side by side",
          "return y.permute(0, 2, 3, 1).reshape(B, T, H * hd)  # (B, T, hd, H) -> (B, T, d)",
          ("merge_heads", "permute", "interleav", "heads side by side", "feature order", "layout"),
          "moves the head axis last before flattening: the features come out interleaved across heads (feature i of "
          "every head together) instead of each head's block side by side; transpose(1, 2) then reshape"),
        # look-alike: hd ** 1/2 is hd / 2, which equals sqrt(hd) at hd = 4
        M("causal_attention", "scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])     # (B, H, Tq, Tk)",
          "scores = q @ k.transpose(-2, -1) / (q.shape[-1] ** 1/2)     # (B, H, Tq, Tk)",
          SCALE,
          "writes the square root as hd ** 1/2: precedence makes it hd / 2, which is sqrt(hd) only at hd = 4; "
          "use math.sqrt(hd) or hd ** 0.5", regime="a head size other than 4"),
        M("causal_attention", ATTENTION_BODY,
          '    mask = causal_mask(q.shape[-2], k.shape[-2]).to(q.device)       # (Tq, Tk)\n'
          '    per_head = []\n'
          '    for h in range(q.shape[1]):                                      # one head at a time: (B, Tq, hd)\n'
          '        scores = q[:, h] @ k[:, h].transpose(-2, -1) / math.sqrt(q.shape[-1])\n'
          '        weights = scores.masked_fill(~mask, float("-inf")).softmax(dim=-1)\n'
          '        per_head.append(weights @ v[:, h])                           # (B, Tq, hd)\n'
          '    return torch.stack(per_head, dim=2)                              # the heads gathered again',
          ("stack", "dim=1", "shape", "head axis", "(b, h, tq, hd)", "axis"),
          "attends head by head, each step right, then stacks the heads on axis 2: the result is (B, Tq, H, hd) "
          "instead of (B, H, Tq, hd); stack on dim=1"),
        M("causal_attention", ATTENTION_BODY.rsplit("\n", 1)[0],
          '    scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.shape[-1])  # (B, H, Tq, Tk)\n'
          '    mask = causal_mask(q.shape[-2], k.shape[-2]).to(q.device)       # (Tq, Tk), broadcasts over (B, H)\n'
          '    scores = scores.masked_fill(~mask, float("-inf"))\n'
          '    weights = torch.softmax(scores, dim=2)                           # normalised over the keys',
          ("softmax", "dim", "axis", "keys", "queries", "rows", "sum to 1", "columns"),
          "normalises the scores over axis 2, the queries of (B, H, Tq, Tk), not the keys: each key's column "
          "sums to 1 instead of each query's row; softmax(dim=-1)"),
        M("self_attention", "q, k, v = (split_heads(F.linear(x, w), n_heads) for w in (w_q, w_k, w_v))  # each (B, H, T, hd)",
          "q = split_heads(x @ w_q.T, n_heads)                                        # (B, H, T, hd)\n"
          "    k = split_heads(x @ w_k.T, n_heads)\n"
          "    v = split_heads(x @ w_v, n_heads)",
          ("w_v", "value", "transpose", "v projection", "[d_out, d_in]", "layout"),
          "projects queries and keys with x @ W.T but the values with x @ w_v: the value projection is applied "
          "transposed; x @ w_v.T like the others"),
        # https://github.com/vllm-project/vllm/pull/34150
        # look-alike: the causal triangle T(T+1)/2 counted, close to the well-known halving of T^2
        M("attention_flops", "per_head = 2 * T * T * head_dim             # (T, hd) @ (hd, T) for the scores; (T, T) @ (T, hd) for the mix",
          "per_head = 2 * (T * (T + 1) // 2) * head_dim  # only the query-key pairs the causal mask keeps",
          ("mask", "causal", "full", "t * t", "t²", "t^2", "matmul", "triangle", "half"),
          "counts only the query-key pairs the causal mask keeps, T(T+1)/2, as an analytic MFU estimate does (as "
          "in https://github.com/vllm-project/vllm/pull/34150): the written-out matmuls compute all T x T scores "
          "and mix every weight, masked or not; 2·T·T·hd per head"),
    ],
    "04": [
        # look-alike: positions that start at 1, which within apply_rope gives the numbers of a table sliced one late
        M("rope_cache", "angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float32), inv_freq)      # (T, hd/2)",
          "angles = torch.outer(torch.arange(1, max_seq_len + 1, dtype=torch.float32), inv_freq)  # (T, hd/2)",
          ("position 0", "positions", "start at 0", "off by one", "first row", "arange", "identity"),
          "numbers the positions from 1: row 0 of the tables is no identity rotation and every row is one position "
          "late; torch.arange(max_seq_len)"),
        # look-alike: pair index i where 2i belongs, i.e. theta ** (-i/d), the frequencies of a base sqrt(theta)
        M("rope_cache", "inv_freq = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)  # (hd/2,)",
          "inv_freq = 1.0 / theta ** (torch.arange(head_dim // 2, dtype=torch.float32) / head_dim)  # (hd/2,)",
          ("frequenc", "2i/d", "exponent", "inv_freq", "omega", "theta"),
          "uses the pair index i in the exponent where 2i belongs: pair i turns at theta^(-i/d), which is the "
          "frequency of base sqrt(theta), not a wrong theta; arange(0, d, 2) / d"),
        M("apply_rope", "return torch.cat((-x2, x1), dim=-1)", "return torch.stack((-x2, x1), dim=-1).reshape(x.shape)",
          ("rotate_half", "stack", "interleav", "halves", "cat", "layout"),
          "stacks the two halves on a new last axis and flattens: the output interleaves -x2 and x1 feature by "
          "feature instead of putting -x2 before x1; torch.cat on the last axis"),
        M("apply_rope", "cos = cos[start_pos:start_pos + T].to(x.dtype)  # (T, hd), broadcasts over (B, H)\n"
          "    sin = sin[start_pos:start_pos + T].to(x.dtype)",
          "cos = cos[start_pos:start_pos + T]  # (T, hd), broadcasts over (B, H)\n"
          "    sin = sin[start_pos:start_pos + T]",
          ("dtype", "float32", "bfloat16", "cast", "x.dtype", "half"),
          "leaves the float32 tables uncast: a bfloat16 x comes out float32 (and the attention after it meets mixed "
          "dtypes); slice and .to(x.dtype)", regime="bfloat16 or float16 q and k"),
        # https://github.com/labmlai/annotated_deep_learning_paper_implementations/issues/251
        # look-alike: q and k each rotated twice give the numbers of every angle doubled
        M("rotary_attention", "    k = apply_rope(k, cos, sin, start_pos)\n",
          "    k = apply_rope(k, cos, sin, start_pos)\n"
          "    q, k = apply_rope(q, cos, sin, start_pos), apply_rope(k, cos, sin, start_pos)  # both rotated\n",
          ("twice", "double", "rotated again", "once", "angle", "re-rotat"),
          "keeps a line from a rewrite that rotates q and k again (a double rotation like "
          "https://github.com/labmlai/annotated_deep_learning_paper_implementations/issues/251): every angle is "
          "doubled, so the scores see twice each distance; rotate each once"),
        # look-alike: the inverse permutation, which is the permutation itself at head_dim 4
        M("interleaved_to_half", "pairs = w.reshape(n_heads, hd // 2, 2, d_in)      # (nh, hd/2, 2, d_in): pair i of head h is rows 2i, 2i+1",
          "pairs = w.reshape(n_heads, 2, hd // 2, d_in)      # (nh, 2, hd/2, d_in): each head's two halves",
          ("inverse", "permutation", "half layout", "interleaved", "evens", "odds", "direction"),
          "groups each head's rows as two halves before swapping: that maps the half layout to the interleaved one, "
          "the inverse permutation, which only agrees at head_dim 4; reshape (nh, hd/2, 2, d_in)",
          regime="a head_dim above 4"),
        M("interleaved_to_half", "return q_proj, k_proj, wv, wo                 # values and o_proj: never rotated, unchanged",
          "return q_proj, k_proj, interleaved_to_half(wv, n_kv_heads), wo  # every projection in the new layout",
          ("values", "wv", "v_proj", "unchanged", "never rotated", "o_proj"),
          "permutes the value rows too: values are never rotated, and o_proj still reads them in the old order, so "
          "each head's output features are shuffled; return wv as it is"),
    ],
    "05": [
        # look-alike: SiLU on the up branch gives the numbers of w_gate and w_up swapped
        M("swiglu", "gate = F.silu(x @ w_gate.T)  # (B, T, d_ff): the nonlinearity lives on the gate only\n"
          "    up = x @ w_up.T              # (B, T, d_ff): linear",
          "gate = x @ w_gate.T          # (B, T, d_ff): linear\n"
          "    up = F.silu(x @ w_up.T)      # (B, T, d_ff): the nonlinearity",
          ("silu", "gate", "up", "activation", "nonlinearity", "branch"),
          "puts SiLU on the up projection and leaves the gate linear: w_gate and w_up play each other's part; "
          "silu(x @ w_gate.T) * (x @ w_up.T)"),
        M("swiglu", "gate = F.silu(x @ w_gate.T)", "gate = F.silu((x @ w_gate.T).float())",
          ("dtype", "float32", "bfloat16", "cast", "half"),
          "computes the gate in float32 for stability and never casts back: bfloat16 inputs meet a float32 product "
          "(the down projection then mixes dtypes); cast back to x.dtype", regime="bfloat16 or float16 input"),
        # look-alike: floor + 1 for ceil, right unless 8/3 · d_model already is a multiple
        M("swiglu_hidden", "return multiple * math.ceil(8 * d_model / 3 / multiple)",
          "return multiple * (int(8 * d_model / 3 / multiple) + 1)",
          ("already a multiple", "ceil", "round up", "exact", "one multiple too many", "floor"),
          "rounds up as floor + 1: a size that already is a multiple gets one more multiple; math.ceil",
          regime="8/3 · d_model an exact multiple"),
        M("pre_norm_block", "    x = x + attn(attn_norm(x))  # the branch reads a normalised copy; the stream stays a sum\n"
          "    x = x + mlp(mlp_norm(x))    # the MLP reads the stream after attention has written to it\n",
          "    h = attn_norm(x)\n"
          "    x = x + attn(h)             # the branch reads a normalised copy\n"
          "    h = mlp_norm(h)             # the MLP's normalised input\n"
          "    x = x + mlp(h)\n",
          ("mlp_norm", "stream", "after attention", "normalised copy", "attention's output", "h"),
          "normalises the attention branch's input again for the MLP, mlp_norm(attn_norm(x)): the MLP never sees "
          "what attention added to the stream; mlp_norm(x) of the updated x"),
        M("Transformer", "x = x + self.attn(self.attn_norm(x), cos, sin, cache, layer_idx)  # the branch reads a normalised copy",
          "x = x + self.attn(self.attn_norm(x), cos, sin, cache)  # the branch reads a normalised copy",
          ("layer_idx", "layer", "cache", "every layer", "layer 0"),
          "passes the cache but not layer_idx: every block reads and writes the cache's layer 0; pass layer_idx on",
          regime="decoding with a KV cache and more than one layer"),
        # https://github.com/google/gemma_pytorch/issues/29
        M("Transformer", "x = embed(idx, self.tok_emb.weight)                        # (B, T, d)",
          "x = embed(idx, self.tok_emb.weight) * math.sqrt(self.config.d_model)  # (B, T, d), scaled as in Gemma",
          ("sqrt", "scale", "embedding", "d_model", "gemma", "normaliz"),
          "multiplies the embeddings by sqrt(d_model) as Gemma does (asked about in "
          "https://github.com/google/gemma_pytorch/issues/29): Llama feeds the rows as they are"),
        M("param_counts", '"norms": (2 * L + 1) * d,           # attn_norm and mlp_norm per block, then the final norm',
          '"norms": 2 * L * d,                 # attn_norm and mlp_norm per block',
          ("final norm", "norms", "2 * l + 1", "one more", "last norm"),
          "counts the two norms of each block but not the final norm before the head: d parameters short; (2L + 1)·d"),
    ],
    "06": [
        # look-alike: queries cached as well, (n_heads + 2 n_kv) per layer, which at n_heads = 2 n_kv gives the
        # number of n_heads in place of n_kv_heads
        M("kv_cache_bytes", "per_position = 2 * config.n_layers * config.n_kv_heads * config.head_dim  # K and V, in every block",
          "per_position = config.n_layers * (config.n_heads + 2 * config.n_kv_heads) * config.head_dim  # Q, K and V, in every block",
          ("queries", "q", "only k and v", "n_heads", "n_kv_heads", "kv heads"),
          "counts the queries as cached too: a cache holds only keys and values, 2·n_kv_heads·hd per layer and "
          "position; the queries of past tokens are never needed again"),
        M("kv_cache_bytes", "return per_position * seq_len * batch_size * dtype.itemsize",
          "return per_position * seq_len * batch_size * (torch.finfo(dtype).bits // 8)  # bits per element, in bytes",
          ("int8", "itemsize", "finfo", "integer", "dtype", "bytes"),
          "reads the element size from torch.finfo, which only floating dtypes have: an int8 cache raises; "
          "dtype.itemsize", regime="an integer (quantised) cache dtype"),
        # look-alike: queries shifted one position on, which gives the numbers of a mask with its diagonal one up
        M("attention_step", "mask = tinylm.causal_mask(T, start + T).to(x.device)  # (T, start + T), bottom-right aligned",
          "q_pos = torch.arange(1, T + 1) + start               # positions of the new tokens\n"
          "    mask = torch.arange(start + T)[None, :] <= q_pos[:, None]  # key j visible from query position i",
          ("future", "position", "off by one", "start", "next token", "leak", "diagonal"),
          "numbers the new tokens' positions from start + 1: each query also sees the key after it; the new "
          "tokens sit at start .. start + T - 1"),
        M("attention_step", "    q = tinylm.apply_rope(q, cos, sin, start_pos=start)  # the new tokens sit at start .. start + T - 1\n"
          "    k = tinylm.apply_rope(k, cos, sin, start_pos=start)\n"
          "    k_all, v_all = cache_update(past_k, past_v, k, v)    # (B, n_kv, start + T, hd)\n",
          "    k = tinylm.apply_rope(k, cos, sin, start_pos=start)\n"
          "    k_all, v_all = cache_update(past_k, past_v, k, v)    # (B, n_kv, start + T, hd)\n"
          "    q = tinylm.apply_rope(q, cos, sin, start_pos=k_all.shape[2] - 1)  # the queries at the newest position\n",
          START_POS + ("queries", "newest", "prefill", "k_all.shape"),
          "rotates the keys right, then the queries from the newest position, k_all.shape[2] - 1: right for a "
          "one-token step, T - 1 too far for a prefill; start_pos=start for both",
          regime="a step of more than one token (a prefill)"),
        M("generate_greedy", "        for _ in range(max_new_tokens):\n"
          "            logits = model(step_input, cache=cache)[:, -1]      # (B, V): only the last position predicts\n",
          "        for _ in range(max_new_tokens):\n"
          "            cache.reset()                                       # a clean cache for every step\n"
          "            logits = model(step_input, cache=cache)[:, -1]      # (B, V): only the last position predicts\n",
          ("reset", "cache", "every step", "prompt", "context", "forgets"),
          "resets the cache inside the loop: every decoding step sees only its own token at position 0; reset "
          "once, before the prefill"),
        M("generate_left_padded", "mask = torch.cat((mask, mask.new_ones(B, 1)), dim=1)        # (B, cached + 1): the new token is real",
          "mask = mask.new_ones(B, 1)                                  # (B, 1): the new token is real, like ids",
          ("mask", "padding", "cached", "every position", "attention_mask", "past"),
          "hands the decoding steps a mask of the new token only, as it does the ids: the mask must cover every "
          "cached position, or the padding in front is attended again; append a column to the whole mask"),
        # look-alike: every row counted from 1, which a RoPE model cannot tell from the right positions
        M("generate_left_padded", "positions = (mask.long().cumsum(-1) - 1).clamp(min=0)              # (B, T): 0 at each row's first real token",
          "positions = mask.long().cumsum(-1)                                # (B, T): each row's real tokens counted",
          ("positions", "position 0", "first real token", "off by one", "start at 0", "cumsum"),
          "counts each row's positions from 1 at its first real token: every position is one too high, which only "
          "relative scores hide; cumsum - 1, clamped at 0"),
    ],
    "07": [
        # look-alike: copies of the whole head block side by side, the numbers of x.repeat(1, n_rep, 1, 1)
        M("repeat_kv", "x = x[:, :, None].expand(B, n_kv, n_rep, T, hd)  # (B, n_kv, n_rep, T, hd): a view, copies of each kv head side by side\n"
          "    return x.reshape(B, n_kv * n_rep, T, hd)          # (B, n_kv * n_rep, T, hd): groups stay contiguous",
          "return torch.cat([x] * n_rep, dim=1)              # (B, n_kv * n_rep, T, hd)",
          ("repeat_interleave", "interleav", "tile", "order", "h // n_rep", "group", "contiguous"),
          "concatenates n_rep copies of all kv heads: head h reads kv head h % n_kv instead of h // n_rep (right "
          "only with one kv head); each kv head's copies must sit together", regime="more than one kv head"),
        # https://github.com/HazyResearch/HipKittens/pull/22
        M("gqa_attention", "    n_rep = q.shape[1] // k.shape[1]\n"
          "    k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)  # (B, n_heads, T, hd): only inside attention\n"
          "    return F.scaled_dot_product_attention(q, k, v, is_causal=True)",
          "    heads = []\n"
          "    for h in range(q.shape[1]):                       # one query head at a time\n"
          "        g = h % k.shape[1]                            # the kv head this query head reads\n"
          "        heads.append(F.scaled_dot_product_attention(q[:, h], k[:, g], v[:, g], is_causal=True))\n"
          "    return torch.stack(heads, dim=1)                  # (B, n_heads, T, hd)",
          ("h // n_rep", "group", "kv head", "modulo", "%", "interleav", "mapping"),
          "loops over the query heads and maps head h to kv head h % n_kv, a GQA head-mapping bug like "
          "https://github.com/HazyResearch/HipKittens/pull/22: consecutive query heads share a kv head, h // n_rep",
          regime="more than one kv head"),
        M("gqa_step", "    y = F.scaled_dot_product_attention(q, repeat_kv(k_all, n_rep), repeat_kv(v_all, n_rep), attn_mask=mask)\n",
          "    k_rep, v_rep = repeat_kv(k_all, n_rep), repeat_kv(v_all, n_rep)   # (B, nh, start + T, hd)\n"
          '    scores = torch.einsum("bhqd,bhkd->bhqk", q, k_rep) / k_rep.shape[-2] ** 0.5\n'
          '    scores = scores.masked_fill(~mask, float("-inf"))\n'
          '    y = torch.einsum("bhqk,bhkd->bhqd", scores.softmax(dim=-1), v_rep)  # (B, nh, T, hd)\n',
          SCALE + ("keys", "positions", "shape[-2]", "axis"),
          "writes the attention out and scales by the square root of k_rep.shape[-2], the number of cached "
          "positions, not the head size: the temperature changes with every step; divide by sqrt(head_dim)"),
        M("decode_bytes_per_token", "per_block = attention + 3 * d * config.d_ff + 2 * d                       # SwiGLU's three matrices, two norms",
          "per_block = attention + 3 * d * config.d_ff                               # SwiGLU's three matrices",
          ("norm", "gain", "2 * d", "every parameter", "per block"),
          "leaves out the two norm gains of every block: a decoding step reads every parameter, 2·d per block "
          "too"),
        M("decode_bytes_per_token", "kv_cache = 2 * L * config.n_kv_heads * hd * context_len * size            # K and V, every block",
          "kv_cache = 2 * L * config.n_kv_heads * hd * (context_len + 1) * size      # K and V, every block, the new token's too",
          ("context_len", "one position", "new token", "off by one", "positions"),
          "counts one position more than the context: the exercise reads K and V of context_len positions"),
    ],
    "08": [
        M("top_k_filter", "kth = logits.topk(k, dim=-1).values[..., -1:]          # (..., 1): the k-th largest value",
          "kth = logits.sort(dim=-1, descending=True).values[..., k:k + 1]  # (..., 1): the k-th largest value",
          ("k-th", "kth", "k + 1", "off by one", "one more", "index k", "0-based"),
          "takes index k of the descending sort, which is the (k+1)-th largest: k + 1 tokens survive; index k - 1"),
        # https://github.com/Biohub/esm/pull/360
        M("top_p_filter", "mass_before = probs.cumsum(dim=-1) - probs                    # mass of the strictly more likely tokens\n"
          "    drop_sorted = mass_before >= p                                # the crossing token has mass_before < p",
          "drop_sorted = probs.cumsum(dim=-1) > p                       # keep the tokens whose running mass stays within p",
          ("crossing", "threshold", "mass before", "cumsum", "smallest set", "reaches p"),
          "keeps a token only while the running mass including it stays within p (as "
          "https://github.com/Biohub/esm/pull/360 fixed): the token that crosses p is dropped, so the nucleus holds "
          "less than p; drop where the mass before the token is >= p"),
        M("top_p_filter", "probs = sorted_logits.softmax(dim=-1)",
          "import numpy as np\n"
          "    e = np.exp(sorted_logits.numpy())                             # numpy's softmax, written out\n"
          "    probs = torch.from_numpy(e / e.sum(axis=-1, keepdims=True))",
          ("overflow", "inf", "nan", "max", "softmax", "numpy", "large logits", "shift"),
          "writes the softmax with np.exp and no max subtracted: logits above about 88 overflow float32 to inf and "
          "the probabilities become nan; softmax on the tensor", regime="large logits"),
        M("sample_next", "    logits = logits / temperature             # on logits, before any filter\n"
          "    if top_k is not None:\n        logits = top_k_filter(logits, top_k)\n"
          "    if top_p is not None:\n        logits = top_p_filter(logits, top_p)\n",
          "    if top_k is not None:\n        logits = top_k_filter(logits, top_k)\n"
          "    if top_p is not None:\n        logits = top_p_filter(logits, top_p)\n"
          "    logits = logits / temperature             # sharpen what the filters kept\n",
          ("temperature", "before", "order", "filter", "nucleus", "top_p"),
          "divides by the temperature after the filters: top-p picks its nucleus from the untempered distribution; "
          "temper first, then filter", regime="top_p together with a temperature other than 1"),
        M("sample_next", "logits = logits / temperature             # on logits, before any filter",
          "logits = logits // temperature            # on logits, before any filter",
          ("floor", "//", "division", "temperature", "integer", "rounded"),
          "divides with //: floor division rounds every logit down to a whole number of temperatures, which "
          "changes the distribution; logits / temperature"),
        # look-alike: the flag assigned on the top module only, which restores the mode of no submodule, as a
        # generate that never gives the mode back leaves them
        M("generate", "model.train(was_training)                          # give the caller back the mode it had",
          "model.training = was_training                      # give the caller back the mode it had",
          ("submodule", "train(", "every module", "children", "dropout", "mode", "recursive"),
          "assigns model.training instead of calling model.train(was_training): only the top module's flag comes "
          "back, every submodule (dropout included) stays in eval mode", regime="a model handed over in train mode"),
        M("generate", "idx = torch.cat((idx, next_id[:, None]), dim=1)                      # (B, T + 1)",
          "idx = torch.cat((idx, torch.tensor([[next_id.item()]])), dim=1)     # (B, T + 1)",
          ("item", "batch", "batch of one", "(b, 1)", "one element", "shape"),
          "appends next_id.item(): .item() only exists for one element, so a batch of more than one prompt fails "
          "(and the id leaves the device); next_id[:, None]", regime="a batch of more than one prompt"),
    ],
    "09": [
        M("get_batch", "    idx = starts[:, None] + torch.arange(seq_len + 1)                                # (B, T + 1) positions\n"
          "    window = data[idx].long()                                                        # (B, T + 1)\n",
          "    rows = [data[s:s + seq_len + 1] for s in starts.tolist()]                        # one window per start\n"
          "    window = torch.stack(rows, dim=1).long()                                         # (B, T + 1)\n",
          ("stack", "dim=0", "shape", "transposed", "axis", "(b, t)"),
          "builds the windows in a loop and stacks them on axis 1: the result is (T + 1, B), so x and y are "
          "columns cut from a transposed batch; torch.stack(rows, dim=0)"),
        # https://github.com/skorch-dev/skorch/issues/481
        M("lm_loss", "return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)  # (B*T, V) vs (B*T,)",
          "return F.nll_loss(logits.softmax(dim=-1).log().flatten(0, 1), targets.flatten(), ignore_index=-100)",
          ("log_softmax", "underflow", "inf", "log of softmax", "numerically", "large logits", "cross_entropy"),
          "takes log(softmax(logits)): a probability that underflows to 0 gives log 0 = -inf and an infinite loss "
          "(the log-after-softmax of https://github.com/skorch-dev/skorch/issues/481); log_softmax or cross_entropy "
          "on the logits", regime="large logits"),
        # https://github.com/goodfire-ai/spd/issues/642
        M("lr_schedule", "progress = (step - warmup_steps) / max(1, total_steps - 1 - warmup_steps)  # 0 -> 1 over the decay",
          "progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)  # 0 -> 1 over the decay",
          ("last step", "min_lr", "total_steps - 1", "off by one", "never reaches", "final"),
          "divides the decay by total_steps - warmup_steps: the last step (total_steps - 1) stops one step short "
          "of min_lr, the off-by-one of https://github.com/goodfire-ai/spd/issues/642; total_steps - 1 - warmup_steps"),
        M("lr_schedule", "progress = (step - warmup_steps) / max(1, total_steps - 1 - warmup_steps)",
          "progress = (step - warmup_steps) // max(1, total_steps - 1 - warmup_steps)",
          ("//", "floor", "integer", "division", "constant", "progress", "jumps"),
          "computes the progress with //: it stays 0 until the last step, so the rate holds at max_lr and drops to "
          "min_lr at once; true division"),
        M("train_step", "loss = lm_loss(model(x), y)                  # (B, T, V) logits -> scalar",
          "with torch.no_grad():                       # no activations kept for the forward\n"
          "        loss = lm_loss(model(x), y)              # (B, T, V) logits -> scalar",
          ("no_grad", "graph", "backward", "grad_fn", "gradient", "does not require grad"),
          "runs the forward under torch.no_grad to save memory: the loss has no graph and backward fails; "
          "no_grad belongs to evaluation only"),
        M("train_step", "torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)  # global gradient norm <= grad_clip",
          "torch.nn.utils.clip_grad_value_(model.parameters(), grad_clip)  # every gradient entry within +-grad_clip",
          ("clip_grad_norm", "norm", "value", "global", "direction", "clip"),
          "clips every gradient entry to +-grad_clip instead of scaling the global norm: the direction changes and "
          "the norm can stay far above grad_clip; clip_grad_norm_"),
        M("train_step_accumulated", "n_tokens = sum(int((y != -100).sum()) for _, y in micro_batches)  # N: target tokens of the WHOLE batch",
          "n_tokens = sum(y.numel() for _, y in micro_batches)               # N: target tokens of the WHOLE batch",
          ("padding", "-100", "scored", "numel", "real targets", "count"),
          "counts every target position, padding included: with -100 padding the mean is taken over too many "
          "tokens and every gradient shrinks; count y != -100", regime="padded targets"),
        M("train_step_accumulated", "        total += summed.item()\n"
          "    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)    # once: the whole batch's gradient\n",
          "        total += summed.item()\n"
          "        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)  # keep the running gradient in bounds\n",
          ("clip", "once", "inside the loop", "whole batch", "micro-batch", "partial"),
          "clips inside the micro-batch loop: each partial sum is clipped before the rest is added, so the final "
          "gradient is no clipped whole-batch gradient; clip once after the loop",
          regime="a gradient norm above grad_clip"),
        M("train_step_costs", "head = V * d                                                              # the head's matmul; the lookup is none",
          "head = 0 if config.tie_embeddings else V * d                             # a tied head is the embedding: counted there",
          ("tied", "head", "lm_head", "matmul", "vocab", "v * d"),
          "drops the head's matmul when it is tied: tying shares the weights, the (B·T, d) @ (d, V) product is "
          "still computed (and the tied weights are then not counted at all); V·d always",
          regime="tied embeddings"),
        M("train_step_costs", '"flops": 6 * matmul_weights * tokens + 3 * attention_matmuls,',
          '"flops": 6 * matmul_weights * tokens + attention_matmuls,',
          ("backward", "attention", "3 x", "forward only", "scores", "2 x forward"),
          "counts the attention matmuls (QK^T and weights @ V) for the forward only: their backward costs twice "
          "the forward as well; 3 x attention_matmuls"),
    ],
    "10": [
        M("nll_sum_and_count", 'reduction="sum")                       # (B*T, V) vs (B*T,) -> scalar',
          ') * targets.numel()                     # the mean, scaled back to a sum',
          ("padding", "mean", "sum", "numel", "scored", "ignore"),
          "takes cross_entropy's mean over the scored targets and multiplies by every target position: with "
          "padding the sum is too large (and all-padding gives nan); reduction='sum'", regime="padded targets"),
        # look-alike: each batch's sum weighted by its count, which resembles weighting batch means equally
        M("evaluate", "total, count = total + s, count + n          # combine by tokens, not by batches",
          "total, count = total + s * n, count + n      # each batch's loss weighted by its tokens",
          ("sum", "already", "weighted", "token-weighted", "nll_sum", "mean", "twice"),
          "weights each batch's NLL by its token count though nll_sum_and_count already returns a sum: long "
          "batches count twice over; total + s"),
        M("evaluate", '"perplexity": math.exp(loss),', '"perplexity": math.exp(loss / bytes_per_token),',
          ("perplexity", "per token", "bytes_per_token", "per byte", "exp(loss)"),
          "divides the loss by bytes_per_token before exponentiating: that is a per-byte perplexity, the exercise "
          "asks for exp of the per-token loss", regime="bytes_per_token other than 1"),
        # https://github.com/numpy/numpy/issues/8866
        M("bigram_nll", "counts = torch.bincount(train[:-1] * 256 + train[1:], minlength=256 * 256).view(256, 256).double()  # [prev, next]",
          "counts = torch.zeros(256, 256, dtype=torch.float64)\n"
          "    counts[train[:-1], train[1:]] += 1                                   # [prev, next]: one more per pair seen",
          ("duplicate", "repeated", "once", "index_put", "accumulate", "bincount", "counts"),
          "counts pairs with counts[prev, next] += 1: advanced indexing writes each repeated pair once (the numpy "
          "question https://github.com/numpy/numpy/issues/8866), so every count is 0 or 1; bincount or "
          "index_put_(accumulate=True)", regime="a pair that occurs more than once"),
        # look-alike: the lookup reads [next, prev], the numbers of counts built transposed
        M("bigram_nll", "return -probs.log()[val[:-1], val[1:]].mean().item()",
          "return -probs.log()[val[1:], val[:-1]].mean().item()",
          ("order", "prev", "next", "swapped", "row", "previous byte", "transpos"),
          "looks the pairs up as [next, prev]: each byte is scored in the row of the byte after it; index "
          "[val[:-1], val[1:]]"),
    ],
}

SAME = [
    ("01", M("embed", "return weight[ids]  # advanced indexing", "return weight[ids, :]  # advanced indexing",
             (), "indexes the rows and every column explicitly")),
    ("01", M("tied_logits", "return x @ weight.T  # (B, T, d) @ (d, V) -> (B, T, V)",
             'return torch.einsum("btd,vd->btv", x, weight)  # (B, T, V)', (), "writes the head as an einsum")),
    ("02", M("rms_norm", "inv_rms = torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)",
             "inv_rms = (x32.square().mean(-1, keepdim=True) + eps) ** -0.5", (),
             "raises the mean square plus eps to the power -1/2")),
    ("03", M("causal_mask", "allowed = torch.ones(q_len, kv_len, dtype=torch.bool)\n    return allowed.tril(diagonal=kv_len - q_len)",
             "return torch.ones(q_len, kv_len).tril(diagonal=kv_len - q_len) > 0", (),
             "builds the triangle in floats and compares with 0")),
    ("03", M("causal_attention", 'scores = scores.masked_fill(~mask, float("-inf"))',
             'scores = scores.masked_fill(mask.logical_not(), -math.inf)', (),
             "negates the mask with logical_not and takes -inf from math")),
    ("03", M("attention_flops", '"mix": B * n_heads * per_head,', '"mix": 2 * B * T * T * d,', (),
             "counts the mix over all heads at once: n_heads · head_dim = d")),
    ("04", M("apply_rope", "x1, x2 = x.chunk(2, dim=-1)\n    return torch.cat((-x2, x1), dim=-1)",
             "half = x.shape[-1] // 2\n    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)", (),
             "slices the two halves instead of chunking")),
    ("05", M("param_counts", '"attention": L * (q_and_o + k_and_v),',
             '"attention": L * 2 * d * hd * (config.n_heads + config.n_kv_heads),', (),
             "counts q, o, k and v together per head")),
    ("06", M("cache_update", "v_all = torch.cat((past_v, v), dim=2)", "v_all = torch.cat([past_v, v], 2)", (),
             "hands cat a list and the axis by position")),
    ("06", M("attention_step", "mask = tinylm.causal_mask(T, start + T).to(x.device)",
             "mask = tinylm.causal_mask(start + T)[start:].to(x.device)", (),
             "takes the new tokens' rows of the square mask over every position")),
    ("07", M("gqa_step", "start, n_rep = past_k.shape[2], attn.n_heads // attn.n_kv_heads",
             "start, n_rep = past_k.shape[2], attn.n_heads // past_k.shape[1]", (),
             "reads the kv head count from the cache's shape")),
    ("08", M("top_k_filter", "kth = logits.topk(k, dim=-1).values[..., -1:]",
             "kth = logits.topk(k, dim=-1).values.amin(dim=-1, keepdim=True)", (),
             "takes the smallest of the k largest values")),
    ("08", M("sample_next", "torch.multinomial(probs, num_samples=1, generator=generator).squeeze(-1)",
             "torch.multinomial(probs, num_samples=1, generator=generator)[:, 0]", (),
             "drops the sample axis by indexing")),
    ("09", M("train_step", "    loss = lm_loss(model(x), y)                  # (B, T, V) logits -> scalar\n"
             "    optimizer.zero_grad(set_to_none=True)        # gradients accumulate otherwise\n",
             "    optimizer.zero_grad(set_to_none=True)        # gradients accumulate otherwise\n"
             "    loss = lm_loss(model(x), y)                  # (B, T, V) logits -> scalar\n", (),
             "clears the gradients before the forward instead of after it")),
    ("09", M("lm_loss", "return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)  # (B*T, V) vs (B*T,)",
             "logp = logits.log_softmax(dim=-1)                                   # (B, T, V)\n"
             "    picked = logp.gather(-1, targets.clamp(min=0)[..., None])[..., 0]   # (B, T): log p of each target\n"
             "    return -picked[targets != -100].mean()", (),
             "picks each target's log-probability and averages over the real targets")),
    ("10", M("evaluate", '"bits_per_byte": loss / math.log(2) / bytes_per_token',
             '"bits_per_byte": loss * math.log2(math.e) / bytes_per_token', (),
             "converts nats to bits by log2(e)")),
]
