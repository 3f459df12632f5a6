"""A twenty-sixth held-out set of learner mistakes ("fresh26"), written without reading the checks: neither
autograder/checks/ (any file), tests/checks/, autograder/diagnosis_*.py, benchmarks/bench_diagnostics.py's source, the
diagnosis sections of docs/benchmarks.md nor tests/course/test_docs.py were opened, listed or grepped;
bench_diagnostics.py, check cells and notebook checks were never run, and no mistake or SAME edit was tried against a
check. No git log or git show was run; the commit was read back with git rev-parse only.

What was opened or run. The brief, the helper rules and mkwt.sh (cat), then mkwt.sh fresh26 (run). `ls` of the
repository root, benchmarks/, benchmarks/mutations/ and tinylm/ (names only); `wc -l` of benchmarks/mutations/*.py
(line counts of every set file), of the unseen_probes*.py files and of verify_unseen.py. Of the other sets only
fresh25.py's module docstring, printed with python. Whole: mutations/__init__.py, unseen.py (the entry class and its
entries), verify_unseen.py, heldout_duplicates.py, verify_heldout.py, unseen_probes.py, unseen_probes_later.py,
unseen_probes_fresh24.py and unseen_probes_fresh25.py. Through bench_diagnostics.notebook_cells: the answer cells of
all ten notebooks (written to a scratch folder), their setup cells with every line holding "autograder" or "check"
left out, and of the third result only its keys (the check names). In tinylm/: a grep of attention.py, kv_cache.py,
model.py, sampling.py, rope.py, norm.py, mlp.py and config.py for their definitions, attention.py lines 1-80,
kv_cache.py whole, model.py lines 76-150, and greps of config.py for d_ff, D_FF_MULTIPLE and head_dim. A grep for
"fresh25" over the four registration files named in the brief, lines 140-200 of tests/course/test_benchmarks.py, a
grep of pyproject.toml for a line-length setting, git status, git diff of the files changed here, and the torch
version. Public threads were found with 20 searches of issue threads; 57 candidate URLs were grepped over
benchmarks/mutations/ (`grep -rl URL`), of which 33 were already cited by another set and were not used. Run:
verify_unseen.py --set fresh26 (7 runs), heldout_duplicates.py --set fresh26 (6 runs), a python print of two entries'
replacement text, and the two fresh26 tests of test_benchmarks.py (-k fresh26).

Slips, none touching a check's text: the filtered setup cell of notebook 06 still showed the continuation line of a
multi-line import whose first line was left out (one imported name, nothing of a check); lines 140-200 of
test_benchmarks.py include another test whose asserts name the check cells of notebook 01 (names only); and one URL
grep also counted, over benchmarks/mutations/*.py, the occurrences of a code string (interleaved RoPE tables by
repeat_interleave): it printed one number, 5, no text, and that edit was not used as written (the set's interleaved
tables are built another way, after a public thread of its own).

Duplicates, honestly. heldout_duplicates matched 28 of 81 entries on its first run (19 mistakes, 9 SAME edits), 10 on
the second, 3 on the third and 1 on the fourth: single-line edits at the obvious place are mostly taken after 25 sets.
Each match was replaced by other code, mostly another idea; five replacements keep the kind of the idea they replace
in another form (a half RMSNorm's dtype, the scale's axis, the mask's device, the batch in the FLOPs, the halves
sliced for one rank). Matched: weight.data in embed, F.linear(x, weight.T), x.float() in RMSNorm, the scale by the
heads' count, the mask left on the CPU, the batch left out of the projections, rotate_half's chunk on axis 3, sin and
cos swapped in rotary_attention, the inverse interleave, 8 · d // 3, pre_norm_block's +=, d_ff by the 8/3 rule and the
final norm left out in param_counts, d_model in kv_cache_bytes, repeat_kv's .view, the tied head counted twice in
decode_bytes_per_token, top_k and top_p swapped, clipping before backward, a count of the targets >= 0; then the
offset taken twice in rotary_attention, head_dim off the columns, the blocks numbered from 1, one norm per block, the
block norms left out and the cache read at n_heads in decode_bytes_per_token, clip_grad_value_; then the group size
for the kv heads' count, the heads merged to the stream's width and a learned position table; last a gain and a bias
per norm (it had passed with a trailing comment, which was then taken out). Two threads (hahnyuan/LLM-Viewer#12,
Cranial-XIX/FAMO#4) went with their entries; the d_model and the >= 0 entries were dropped without replacement. SAME
edits replaced: .to(weight), unbiased=False, a finfo.min filler, an integer arange, an integer ceiling, gather by
argsort, [:, 0], (B, V, T) logits, inference_mode, a product for the square, SDPA's is_causal in rotary_attention and
torch.full without a dtype.

The set's focus, each mistake counted once by its main kind. Inputs and entry states (27): ids sliced (a .view),
autograd through the lookup (torch.no_grad), bfloat16 x and table (x.float() only), float16 x with a float16 gain (the
squares in the gain's dtype), a half RMSNorm (the gain upcast), q, k, v off the CPU (the mask moved to DEVICE), a
batch of more than one (scores' FLOPs without B; .item(); the min of all rows as top-k threshold; one uniform for
every row), bfloat16 q and k (only q upcast), a cache (attention called without it; SDPA's is_causal), an int8 cache
(finfo), a bfloat16 cache (torch.zeros), a chunk after the prefill (a square mask), a prompt of more than one token
(the last token only), prompts of different lengths (the mask rebuilt all ones), the caller's logits (top-p in place),
the caller's generator (left out), an interrupted generation (no finally), a batch above the number of windows
(randperm), gradients left in .grad (no zero_grad), padding (numel in two counts), bfloat16 logits (the sum upcast),
batches as an iterator (a counting pass first). Wrong arguments to a right call (11): dim=2, var_mean's default
correction, causal_mask's sizes swapped (twice), sqrt of axis -2, head_dim for n_heads, four explicit axes, the keys
viewed with n_heads, n_rep off k's batch axis, [:, -1:] for [..., -1:], log_softmax on axis 1. Routes of the learner's
own (6, and 7 more counted under other kinds): an einsum over (B, T) ids, complex RoPE on adjacent pairs, q and k
converted together and split in halves, evens then odds over all rows, repeat_kv by stacking on axis 1, counts by
index_put_ with its default. Public bugs (11, below). Accounting wrong by a term (6): causal FLOPs halved, k and v
counted for one layer, k and v counted at n_heads, the model times n_layers again, the tied embedding in
train_step_costs, the NLL over len(val). Numerics (1, and 5 more counted above): round(x + 0.5) as a ceiling.

Sources: a learner working through the notebooks and, for 11 mistakes, threads of public projects (the URL is in a
comment above the entry and in its reason): rasbt/LLMs-from-scratch#822 (a tie that copies),
huggingface/diffusers#10891 (float32 with no cast back), baidu/ERNIE-Image#6 (interleaved angles for a half rotation),
unslothai/unsloth#3795 (one position for every row), fkodom/grouped-query-attention-pytorch#5 (query heads grouped the
wrong way), meta-pytorch/torchtune#38 (a cache at n_heads), keras-team/keras-hub#952 ([0] of a batched draw),
keras-team/keras#9606 (the global maximum in a softmax), mosaicml/composer#1077 (no decay step),
awslabs/graphstorm#1382 (clipping after the step) and pytorch/pytorch#70348 (the mean over no target is NaN).

SAME lists 18 edits, helpers, routes and input handling written right: F.embedding on reshaped ids, the mean as sum /
d, a permute and flatten to merge heads, complex RoPE on the two halves, the tables sliced at start_pos, the
interleave undone by a row index and by one joint call split by counts, the tied head as a module call, a cache
preallocated with new_zeros, the uncached tail fed from cache.length, a bool mask's cumsum, enable_gqa, a grouped
einsum, top-k by torch.where, a hand-made mean in lm_loss, windows stacked in a loop, bits by log2(e),
index_put_(accumulate=True); a check must pass each.

Counts: 62 mistakes (01: 5, 02: 4, 03: 7, 04: 6, 05: 6, 06: 7, 07: 6, 08: 8, 09: 7, 10: 6), 18 SAME edits, 11 public
threads. The new probes, in benchmarks/unseen_probes_fresh26.py: tied_logits on bfloat16, rms_norm and RMSNorm in
float16 with a float16 gain, top_p_filter's input kept, generate under two global seeds with one generator seed,
cache_update on a bfloat16 cache, the positions and masks generate_left_padded hands the model, accumulation with a
clip that bites, evaluate on padding and on an iterator. `in_lists` is left False: the nbNN lists were not read. Each
mistake is one substitution in one answer cell; `expect` holds words a check that found it would likely say, `regime`
the situation in which a mistake that is right by default shows. Each reason says what the learner did."""
from __future__ import annotations

from .unseen import Unseen as M

# notebook 04's apply_rope body, which two routes of the learner's own replace (complex numbers)
ROPE_BODY = ("    T = x.shape[-2]\n"
             "    cos = cos[start_pos:start_pos + T].to(x.dtype)  # (T, hd), broadcasts over (B, H)\n"
             "    sin = sin[start_pos:start_pos + T].to(x.dtype)\n"
             "    return x * cos + rotate_half(x) * sin")
COMPLEX_TURN = ("    T, half = x.shape[-2], x.shape[-1] // 2\n"
                "    turn = torch.complex(cos[start_pos:start_pos + T, :half], sin[start_pos:start_pos + T, :half])  # e^(i·angle)\n")
# notebook 04's permutation of one layer's rows, which an index route replaces
HALF_ROWS = ("    pairs = w.reshape(n_heads, hd // 2, 2, d_in)      # (nh, hd/2, 2, d_in): pair i of head h is rows 2i, 2i+1\n"
             "    return pairs.transpose(1, 2).reshape(rows, d_in)  # (nh, 2, hd/2, d_in): each head's evens, then its odds")
# notebook 07's repeat_kv body
REPEAT_BODY = ("    B, n_kv, T, hd = x.shape\n"
               "    x = x[:, :, None].expand(B, n_kv, n_rep, T, hd)  # (B, n_kv, n_rep, T, hd): a view, copies of each kv "
               "head side by side\n"
               "    return x.reshape(B, n_kv * n_rep, T, hd)          # (B, n_kv * n_rep, T, hd): groups stay contiguous")
# notebook 04's conversion of the rotated rows, and a joint route for it
QK_ROWS = ("    q_proj = interleaved_to_half(wq, n_heads)     # (nh·hd, d): queries are rotated\n"
           "    k_proj = interleaved_to_half(wk, n_kv_heads)  # (n_kv·hd, d): keys too, in their own n_kv_heads blocks\n")
JOINT_QK = ("    both = interleaved_to_half(torch.cat((wq, wk)), n_heads + n_kv_heads)  # every rotated head at once\n"
            "    q_proj, k_proj = {split}\n")
# notebook 06's joined cache, which a preallocating route replaces
CACHE_CAT = ("    k_all = torch.cat((past_k, k), dim=2)  # positions are axis 2: the past first, then the new tokens\n"
             "    v_all = torch.cat((past_v, v), dim=2)\n")
PREALLOCATED = ("    B, n_kv, T_past, hd = past_k.shape\n"
                "    k_all = {make}(B, n_kv, T_past + k.shape[2], hd)  # room for the past and the new positions\n"
                "    v_all = {make}(B, n_kv, T_past + v.shape[2], hd)\n"
                "    k_all[:, :, :T_past], k_all[:, :, T_past:] = past_k, k\n"
                "    v_all[:, :, :T_past], v_all[:, :, T_past:] = past_v, v\n")
# notebook 07's gqa_attention body, and a grouped einsum route for it
GQA_BODY = ("    n_rep = q.shape[1] // k.shape[1]\n"
            "    k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)  # (B, n_heads, T, hd): only inside attention\n"
            "    return F.scaled_dot_product_attention(q, k, v, is_causal=True)")
GQA_EINSUM = ("    B, H, T, hd = q.shape\n"
              "    n_kv = k.shape[1]\n"
              "    grouped = q.view({group})\n"
              '    scores = torch.einsum("{q},bgkd->{s}", grouped, k) / hd ** 0.5\n'
              "    future = torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1)\n"
              '    weights = scores.masked_fill(future, float("-inf")).softmax(dim=-1)\n'
              '    return torch.einsum("{s},bgkd->{q}", weights, v).reshape(B, H, T, hd)')
GQA_TILED = GQA_EINSUM.format(group="B, H // n_kv, n_kv, T, hd)        # query head h reads kv head h % n_kv",
                              q="brgqd", s="brgqk")
GQA_GROUPED = GQA_EINSUM.format(group="B, n_kv, H // n_kv, T, hd)        # query head h reads kv head h // (H // n_kv)",
                                q="bgrqd", s="bgrqk")
# notebook 07's gqa_step from the joined cache to the attention
GQA_STEP_TAIL = ("    k_all = torch.cat((past_k, k), dim=2)                 # (B, n_kv, start + T, hd): the small cache\n"
                 "    v_all = torch.cat((past_v, v), dim=2)\n"
                 "    mask = tinylm.causal_mask(T, start + T).to(x.device)  # (T, start + T)\n"
                 "    y = F.scaled_dot_product_attention(q, repeat_kv(k_all, n_rep), repeat_kv(v_all, n_rep), attn_mask=mask)")
# notebook 08's generate loop, with the mode given back in a finally
GENERATE_LOOP = ("    try:\n"
                 "        with torch.no_grad():\n"
                 "            for _ in range(max_new_tokens):\n"
                 "                logits = model(idx)[:, -1]                  # (B, V): the last position predicts the next token\n"
                 "                next_id = sample_next(logits, temperature, top_k, top_p, generator)  # (B,)\n"
                 "                idx = torch.cat((idx, next_id[:, None]), dim=1)                      # (B, T + 1)\n"
                 "    finally:\n"
                 "        model.train(was_training)                          # give the caller back the mode it had\n")
# notebook 10's summed NLL
NLL_CALL = ('F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=ignore_index,\n'
            '                          reduction="sum")')
# notebook 10's evaluate, from the running sums to the loop's body
EVAL_SUMS = ("    total, count = 0.0, 0\n"
             "    try:\n"
             "        with torch.no_grad():                                # no graph: memory stays flat\n"
             "            for x, y in batches:\n"
             "                s, n = nll_sum_and_count(model(x.to(dev)), y.to(dev))\n"
             "                total, count = total + s, count + n          # combine by tokens, not by batches\n")
BIGRAM_COUNTS = "    counts = torch.bincount(train[:-1] * 256 + train[1:], minlength=256 * 256).view(256, 256).double()  # [prev, next]"
INDEX_PUT = ("    counts = torch.zeros(256, 256, dtype=torch.float64)                                  # [prev, next]\n"
             "    counts.index_put_((train[:-1], train[1:]), torch.ones(len(train) - 1, dtype=torch.float64){accumulate})")

BATCH_OF_ONE = "a batch of more than one row"
HALF = ("float16", "bfloat16", "half precision", "upcast", "float32", "dtype")

MUTATIONS = {
    "01": [
        M("embed", "return weight[ids]", "return F.embedding(ids.view(-1), weight).view(*ids.shape, -1)",
          ("contiguous", "view", "reshape", "stride", "slice"),
          "flattens the ids with .view, which raises on sliced (non-contiguous) ids; reshape them",
          regime="non-contiguous ids such as ids[:, 1:]"),
        M("embed", "return weight[ids]", "with torch.no_grad():  # a lookup computes nothing\n        return weight[ids]",
          ("gradient", "no_grad", "detach", "autograd", "graph", "requires_grad"),
          "looks the rows up under torch.no_grad(): no gradient reaches the table; index outside it",
          regime="a backward pass through the lookup"),
        M("one_hot_embed", "return one_hot @ weight", 'return torch.einsum("btv,vd->btd", one_hot, weight)',
          ("rank", "(t,)", "flat", "einsum", "any shape", "shape", "leading axes"),
          "writes the product as an einsum over (B, T) ids only: flat ids (T,) raise; use '...v,vd->...d'",
          regime="ids of another rank than (B, T)"),
        M("tied_logits", "return x @ weight.T", "return x.float() @ weight.T  # logits in float32",
          ("same dtype", "mixed", "cast") + HALF,
          "upcasts the activations but not the table: bfloat16 x and a bfloat16 table meet as float32 @ bfloat16",
          regime="bfloat16 activations and table"),
        # https://github.com/rasbt/LLMs-from-scratch/issues/822
        M("tie_weights", "lm_head.weight = tok_emb.weight", "lm_head.weight = nn.Parameter(tok_emb.weight.clone())",
          ("same parameter", "is tok_emb.weight", "copy", "clone", "not tied", "two parameters", "separate"),
          "ties by copying the values into a new Parameter: the head and the embedding train apart "
          "(rasbt/LLMs-from-scratch#822); assign the Parameter itself"),
    ],
    "02": [
        M("rms_norm", "x32 = x.float()  # squares of fp16 values overflow above 256",
          "x32 = x.to(weight.dtype)  # in the gain's precision",
          ("overflow", "inf", "float32", "upcast", "gain's dtype", "weight's dtype") + HALF,
          "computes the statistic in the gain's dtype: after model.half() the squares of entries above 256 are inf; "
          "upcast x to float32", regime="float16 input with a float16 gain"),
        M("rms_norm", "x32.pow(2).mean(dim=-1, keepdim=True)", "x32.pow(2).mean(dim=2, keepdim=True)",
          ("dim=-1", "last axis", "rank", "dim=2", "2-d", "any number of"),
          "averages over axis 2, the features only for (B, T, d) input: a (T, d) input raises; use dim=-1",
          regime="x of another rank than (B, T, d)"),
        M("layer_norm", "    centred = x - x.mean(dim=-1, keepdim=True)              # (..., d)\n"
          "    var = centred.pow(2).mean(dim=-1, keepdim=True)         # (..., 1): biased, divides by d\n",
          "    var, mean = torch.var_mean(x, dim=-1, keepdim=True)     # (..., 1) each\n"
          "    centred = x - mean\n",
          ("unbiased", "biased", "d - 1", "bessel", "correction", "var_mean"),
          "relies on torch.var_mean's default correction=1: the variance divides by d - 1; pass correction=0"),
        M("RMSNorm", "return rms_norm(x, self.weight, self.eps)", "return rms_norm(x, self.weight.float(), self.eps)",
          ("input's dtype", "cast back", "dtype of x") + HALF,
          "upcasts the gain for the call: the product with a float32 gain makes a half model's norm return float32",
          regime="a module moved with .half() on float16 input"),
    ],
    "03": [
        M("causal_mask", "allowed = torch.ones(q_len, kv_len, dtype=torch.bool)",
          "allowed = torch.ones(kv_len, q_len, dtype=torch.bool)",
          ("shape", "(q_len, kv_len)", "swapped", "rows", "fewer queries", "kv_len"),
          "builds the mask (kv_len, q_len): the sizes in swapped order only agree when q_len = kv_len",
          regime="fewer queries than keys"),
        M("causal_attention", "math.sqrt(q.shape[-1])", "math.sqrt(q.shape[-2])",
          ("sqrt", "head_dim", "scale", "positions", "hd", "queries"),
          "scales the scores by the square root of the number of queries (axis -2), not of head_dim (the last axis)"),
        M("causal_attention", "mask = causal_mask(q.shape[-2], k.shape[-2]).to(q.device)",
          "mask = causal_mask(q.shape[-2], k.shape[-2]).to(DEVICE)",
          ("device", "q.device", "DEVICE", "cuda", "meta"),
          "moves the mask to the notebook's DEVICE, not to q's: q, k, v elsewhere meet it on another device",
          regime="q, k, v on another device than the CPU"),
        # https://github.com/huggingface/diffusers/issues/10891
        M("causal_attention", "weights = scores.softmax(dim=-1)", "weights = scores.softmax(dim=-1, dtype=torch.float32)",
          ("cast back", "v's dtype", "mixed") + HALF,
          "takes the softmax in float32 and never casts back (huggingface/diffusers#10891): float32 weights @ "
          "bfloat16 v raises",
          regime="bfloat16 q, k, v"),
        M("self_attention", "split_heads(F.linear(x, w), n_heads) for w in",
          "split_heads(F.linear(x, w), x.shape[-1] // n_heads) for w in",
          ("n_heads", "head_dim", "number of heads", "split_heads", "heads"),
          "passes head_dim where split_heads wants the number of heads: right only when n_heads² = d"),
        M("attention_flops", '"scores": B * n_heads * per_head, "mix": B * n_heads * per_head,',
          '"scores": B * n_heads * per_head // 2, "mix": B * n_heads * per_head // 2,',
          ("causal", "half", "masked", "full", "every entry", "t x t", "t·t"),
          "halves scores and mix for the causal mask: the matmuls still compute every T x T entry"),
        M("attention_flops", '"scores": B * n_heads * per_head,', '"scores": n_heads * per_head,',
          ("batch", "batch size", "per sequence", "b ·", "b·"),
          "counts the scores of one sequence (the mix line has B, this one lost it)",
          regime="a batch of more than one sequence"),
    ],
    "04": [
        M("apply_rope", "x1, x2 = x.chunk(2, dim=-1)", "half = x.shape[-1] // 2\n    x1, x2 = x[:, :, :, :half], x[:, :, :, half:]",
          ("...", "last axis", "rank", "(t, hd)", "one head", "four axes"),
          "slices the halves with four explicit axes: a single head (T, hd) raises; slice x[..., :half]",
          regime="x of another rank than (B, H, T, hd)"),
        M("apply_rope", ROPE_BODY, COMPLEX_TURN
          + "    pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], half, 2).contiguous())  # 2i, 2i+1\n"
          "    return torch.view_as_real(pairs * turn).flatten(-2).to(x.dtype)",
          ("interleav", "adjacent", "pairs", "half", "layout", "2i, 2i+1", "i + hd/2"),
          "rotates with complex numbers made of adjacent features (2i, 2i+1), Meta's layout, while the tables "
          "turn feature i with i + hd/2; pair the two halves"),
        # https://github.com/baidu/ERNIE-Image/issues/6
        M("rope_cache", "angles = torch.cat((angles, angles), dim=-1)  # (T, hd): feature i and i + hd/2 share an angle",
          "angles = torch.stack((angles, angles), dim=-1).flatten(-2)  # (T, hd): each angle twice in a row",
          ("interleav", "layout", "half", "adjacent", "i + hd/2", "cat", "pairs"),
          "lays each angle out twice in a row (interleaved) for a rotation that pairs the halves "
          "(baidu/ERNIE-Image#6): feature i and i + hd/2 then turn at different rates; concatenate"),
        M("rotary_attention", "q = apply_rope(q, cos, sin, start_pos)", "q = apply_rope(q.float(), cos, sin, start_pos)",
          ("same dtype", "mixed", "queries", "keys") + HALF,
          "rotates the queries in float32 (the tables' dtype) and the keys in their own: bfloat16 q, k meet mixed",
          regime="bfloat16 q, k, v"),
        M("interleaved_to_half", QK_ROWS, JOINT_QK.format(split="both.chunk(2)  # the queries' rows, then the keys'"),
          ("n_kv_heads", "kv heads", "k_proj", "rows", "split", "gqa"),
          "converts q and k in one call, then splits the rows in two halves: right only when k has as many rows as q",
          regime="n_kv_heads < n_heads"),
        M("interleaved_to_half", HALF_ROWS,
          "    order = torch.cat((torch.arange(0, rows, 2), torch.arange(1, rows, 2)))  # evens, then odds\n"
          "    return w[order]",
          ("per head", "each head", "one head", "heads", "block", "whole matrix"),
          "takes the evens and then the odds of all rows at once: heads get mixed; order the rows within each head",
          regime="more than one head"),
    ],
    "05": [
        M("swiglu_hidden", "math.ceil(8 * d_model / 3 / multiple)", "round(8 * d_model / 3 / multiple + 0.5)",
          ("round", "ceil", "already a multiple", "banker", "round up", "one multiple too"),
          "rounds up as round(x + 0.5): a whole x lands on .5, which rounds to even, one multiple up for odd x",
          regime="8/3 · d_model already an odd multiple"),
        M("Transformer", "self.attn(self.attn_norm(x), cos, sin, cache, layer_idx)",
          "self.attn(self.attn_norm(x), cos, sin, layer_idx=layer_idx)",
          ("cache", "kv cache", "decod", "layer_idx", "never stored", "cached"),
          "hands attention the layer index by keyword but not the cache: nothing is stored, each step sees itself only",
          regime="decoding with a KV cache"),
        M("Transformer", "k = self.k_proj(x).view(B, T, self.n_kv_heads, self.head_dim)",
          "k = self.k_proj(x).view(B, T, self.n_heads, -1)",
          ("n_kv_heads", "kv heads", "gqa", "key heads", "view", "head_dim"),
          "views the keys with n_heads heads (copied from the query line): right only when n_kv_heads = n_heads",
          regime="n_kv_heads < n_heads"),
        M("Transformer", "y = causal_attention(q, k, v)",
          "y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)",
          ("is_causal", "top-left", "cache", "decod", "bottom-right", "first key", "offset"),
          "uses SDPA's is_causal, aligned top-left: a decoding query with a cache attends to the first key only",
          regime="decoding with a KV cache"),
        M("param_counts", '"attention": L * (q_and_o + k_and_v),', '"attention": L * q_and_o + k_and_v,',
          ("per layer", "n_layers", "k_proj", "v_proj", "every block", "parenthes"),
          "multiplies only q and o by the number of layers: k and v are counted once, as if there were one block",
          regime="more than one layer"),
        M("param_counts", "k_and_v = 2 * d * config.n_kv_heads * hd",
          "k_and_v = 2 * d * config.n_kv_heads * hd * (config.n_heads // config.n_kv_heads)",
          ("n_kv_heads", "repeat", "gqa", "kv heads", "k_proj", "v_proj"),
          "counts k_proj and v_proj as if repeated to every query head: repeat_kv copies activations, not weights",
          regime="n_kv_heads < n_heads"),
    ],
    "06": [
        M("kv_cache_bytes", "* dtype.itemsize", "* (torch.finfo(dtype).bits // 8)",
          ("int8", "finfo", "integer", "itemsize", "element_size", "dtype"),
          "reads the element size through torch.finfo, which raises for an integer dtype; use dtype.itemsize",
          regime="an int8 cache"),
        M("cache_update", CACHE_CAT, PREALLOCATED.format(make="torch.zeros"),
          ("dtype", "default dtype", "new_zeros", "cache's dtype", "device") + HALF,
          "preallocates the joined cache with torch.zeros: float32 on the CPU whatever the cache; use past_k.new_zeros",
          regime="a bfloat16 (or GPU) cache"),
        M("attention_step", "mask = tinylm.causal_mask(T, start + T).to(x.device)", "mask = tinylm.causal_mask(T).to(x.device)",
          ("kv_len", "start + t", "offset", "cached", "bottom-right", "chunk", "keys"),
          "builds a square (T, T) mask: right for the prefill and for one new token, wrong for a chunk after them",
          regime="several new tokens after a prefill"),
        M("generate_greedy", "next_id = logits.argmax(dim=-1, keepdim=True)       # (B, 1)",
          "next_id = torch.tensor([[logits.argmax(dim=-1).item()]])  # (1, 1)",
          ("batch", "item", "(b, 1)", "one sequence", "every row"),
          "reads the next id with .item(): a batch of more than one prompt raises", regime=BATCH_OF_ONE),
        M("generate_greedy", "idx, step_input = prompt, prompt  ", "idx, step_input = prompt, prompt[:, -1:]  ",
          ("prefill", "whole prompt", "last token", "context", "prompt"),
          "feeds only the prompt's last token from the first step on: the rest of the prompt never reaches the cache",
          regime="a prompt of more than one token"),
        # https://github.com/unslothai/unsloth/pull/3795
        M("generate_left_padded", "positions[:, -1:] + 1    # (B, 1) each: one past the row's last position",
          "torch.full((B, 1), cache.length)  # (B, 1): the cache's next slot",
          ("position", "padding", "each row", "row's", "cache.length", "shorter", "left-pad"),
          "gives every row the cache's slot number as its position (unslothai/unsloth#3795): right for the longest "
          "row only; continue each row's own count", regime="prompts of different lengths"),
        M("generate_left_padded", "mask = torch.cat((mask, mask.new_ones(B, 1)), dim=1)",
          "mask = mask.new_ones(B, mask.shape[1] + 1)",
          ("padding", "mask", "attention_mask", "padded", "pad"),
          "rebuilds the mask as all ones at each step: from the first new token on, the padding is attended",
          regime="prompts of different lengths"),
    ],
    "07": [
        M("repeat_kv", REPEAT_BODY, "    B, n_kv, T, hd = x.shape\n"
          "    return torch.stack([x] * n_rep, dim=1).reshape(B, n_kv * n_rep, T, hd)  # n_rep copies of the heads",
          ("repeat_interleave", "tiled", "h // n_rep", "order", "copies", "interleav"),
          "stacks n_rep copies of all kv heads on a new axis 1: heads come out tiled (h % n_kv); stack on axis 2",
          regime="more than one kv head"),
        M("gqa_attention", "n_rep = q.shape[1] // k.shape[1]", "n_rep = q.shape[1] // k.shape[0]",
          ("n_rep", "batch", "kv heads", "k.shape[1]", "axis"),
          "divides by k's batch size (axis 0), not its number of heads: right when the two happen to be equal",
          regime="a batch size other than n_kv_heads"),
        # https://github.com/fkodom/grouped-query-attention-pytorch/issues/5
        M("gqa_attention", GQA_BODY, GQA_TILED,
          ("group", "h // n_rep", "kv head", "interleav", "tiled", "which kv head"),
          "groups the query heads as (n_rep, n_kv) in an einsum (fkodom/grouped-query-attention-pytorch#5): "
          "head h reads kv head h % n_kv, not h // n_rep", regime="more than one kv head"),
        M("gqa_step", "mask = tinylm.causal_mask(T, start + T).to(x.device)", "mask = tinylm.causal_mask(start + T, T).to(x.device)",
          ("swapped", "q_len", "kv_len", "order", "argument", "causal_mask"),
          "passes causal_mask its sizes as (kv_len, q_len): equal on the prefill, wrong after it",
          regime="a step after the prefill"),
        # https://github.com/meta-pytorch/torchtune/issues/38
        M("gqa_step", GQA_STEP_TAIL,
          "    k_all = repeat_kv(torch.cat((past_k, k), dim=2), n_rep)  # (B, nh, start + T, hd): ready for attention\n"
          "    v_all = repeat_kv(torch.cat((past_v, v), dim=2), n_rep)\n"
          "    mask = tinylm.causal_mask(T, start + T).to(x.device)  # (T, start + T)\n"
          "    y = F.scaled_dot_product_attention(q, k_all, v_all, attn_mask=mask)",
          ("n_kv", "kv heads", "cache", "repeated", "memory", "n_heads", "small cache"),
          "caches the keys and values already repeated to n_heads (meta-pytorch/torchtune#38): the cache loses "
          "GQA's saving and the next step's join fails", regime="n_kv_heads < n_heads"),
        M("decode_bytes_per_token", "weights = (matrices + L * per_block + d) * size",
          "weights = (matrices + L * per_block + d) * size * config.n_layers",
          ("n_layers", "layers", "twice", "per block", "once"),
          "multiplies the whole model by n_layers again, though L * per_block already counts every block",
          regime="more than one layer"),
    ],
    "08": [
        M("top_k_filter", "kth = logits.topk(k, dim=-1).values[..., -1:]", "kth = logits.topk(k, dim=-1).values[:, -1:]",
          ("...", "last axis", "(b, t, v)", "rank", "[:, -1:]", "ellipsis", "leading"),
          "takes the k-th value with [:, -1:], right for (B, V) logits only: (B, T, V) logits compare wrongly",
          regime="logits with more than two axes"),
        M("top_k_filter", "kth = logits.topk(k, dim=-1).values[..., -1:]", "kth = logits.topk(k, dim=-1).values.min()",
          ("per row", "each row", "whole batch", "min", "row", "batch"),
          "takes the smallest top-k value of the whole batch as every row's threshold: right for one row",
          regime=BATCH_OF_ONE),
        M("top_p_filter", 'return logits.masked_fill(drop, float("-inf"))',
          'logits[drop] = float("-inf")                              # outside the nucleus\n    return logits',
          ("in place", "in-place", "caller", "modif", "input", "masked_fill"),
          "writes -inf into the caller's logits in place; use masked_fill, which returns a new tensor",
          regime="the caller's logits used after the call"),
        # https://github.com/keras-team/keras-hub/pull/952
        M("sample_next", ".squeeze(-1)  # (B, 1) -> (B,)", "[0]  # (B, 1) -> (B,)",
          ("batch", "[0]", "first row", "(b,)", "shape", "batch of one"),
          "indexes [0] instead of squeezing the sample axis (keras-team/keras-hub#952): one id for a whole batch",
          regime=BATCH_OF_ONE),
        # https://github.com/keras-team/keras/pull/9606
        M("sample_next", "probs = logits.softmax(dim=-1)            # (B, V): filtered tokens get exactly 0",
          "probs = (logits - logits.max()).exp()     # (B, V): unnormalised, multinomial rescales",
          ("row", "max", "each row", "underflow", "softmax", "per row", "whole batch"),
          "subtracts the batch's maximum, not each row's (keras-team/keras#9606): a row far below it underflows to "
          "all zeros",
          regime="rows whose logits lie far apart"),
        M("sample_next", "    return torch.multinomial(probs, num_samples=1, generator=generator).squeeze(-1)  # (B, 1) -> (B,)",
          "    u = torch.rand(1, generator=generator)  # one uniform draw\n"
          "    return (probs.cumsum(dim=-1) < u).sum(dim=-1)  # the first token whose cumulative mass reaches u",
          ("row", "each row", "same draw", "uniform", "batch", "independent"),
          "samples by inverse CDF with one uniform for the whole batch: every row shares one draw",
          regime=BATCH_OF_ONE),
        M("generate", "sample_next(logits, temperature, top_k, top_p, generator)",
          "sample_next(logits, temperature, top_k=top_k, top_p=top_p)",
          ("generator", "reproduc", "seed", "global rng", "random state"),
          "passes the filters by keyword and forgets the generator: sample_next's default None draws from the global RNG",
          regime="a caller's generator"),
        M("generate", GENERATE_LOOP, GENERATE_LOOP.replace("    try:\n", "").replace("    finally:\n", "")
          .replace("\n    ", "\n").replace("        with", "    with", 1),
          ("finally", "exception", "interrupt", "train mode", "restore", "error"),
          "gives the mode back after the loop, not in a finally: an interrupted generation leaves the model in eval",
          regime="a generation interrupted by an exception"),
    ],
    "09": [
        M("get_batch", "starts = torch.randint(len(data) - seq_len, (batch_size,), generator=generator)",
          "starts = torch.randperm(len(data) - seq_len, generator=generator)[:batch_size]",
          ("batch_size", "replacement", "randperm", "distinct", "shape", "more rows"),
          "draws distinct starts with randperm: a batch larger than the number of windows comes back short",
          regime="batch_size above the number of windows"),
        M("lm_loss", "F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)",
          "F.nll_loss(logits.log_softmax(dim=1).flatten(0, 1), targets.flatten(), ignore_index=-100)",
          ("dim", "axis", "vocabulary", "log_softmax", "positions", "last axis", "dim=-1"),
          "normalises over axis 1, the positions of (B, T, V) logits, before flattening; use dim=-1"),
        # https://github.com/mosaicml/composer/issues/1077
        M("lr_schedule", "/ max(1, total_steps - 1 - warmup_steps)", "/ (total_steps - 1 - warmup_steps)",
          ("zero", "division", "warmup", "total_steps", "no decay", "max(1"),
          "divides by the number of decay steps unguarded: warmup_steps = total_steps - 1 divides by zero "
          "(mosaicml/composer#1077)", regime="no decay step after the warmup"),
        M("train_step", "    optimizer.zero_grad(set_to_none=True)        # gradients accumulate otherwise\n", "",
          ("zero_grad", "leftover", "accumulate", "previous", ".grad", "stale"),
          "never clears .grad: a gradient left from an earlier backward is added to this batch's",
          regime="gradients left in .grad on entry"),
        M("train_step_accumulated", "sum(int((y != -100).sum()) for _, y in micro_batches)",
          "sum(y.numel() for _, y in micro_batches)",
          ("padding", "-100", "ignore", "scored", "numel", "tokens"),
          "counts every target, padding included, in N: the loss and the gradient are divided too much",
          regime="padded targets"),
        # https://github.com/awslabs/graphstorm/pull/1382
        M("train_step_accumulated", "    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)    # once: the whole "
          "batch's gradient\n    optimizer.step()                                                  # once\n",
          "    optimizer.step()                                                  # once\n"
          "    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)    # once: the whole batch's gradient\n",
          ("clip", "after the step", "before the step", "order", "optimizer.step", "not clipped"),
          "clips after optimizer.step() (awslabs/graphstorm#1382): the update used the unclipped gradient",
          regime="a gradient norm above grad_clip"),
        M("train_step_costs", "(0 if config.tie_embeddings else V * d)  # + gains, untied embedding",
          "V * d  # + gains, the embedding",
          ("tied", "tie", "embedding", "twice", "once", "shared"),
          "adds the embedding to the parameters even when it is the head's matrix, counted already",
          regime="tied embeddings"),
    ],
    "10": [
        # https://github.com/pytorch/pytorch/issues/70348
        M("nll_sum_and_count", 'ignore_index=ignore_index,\n                          reduction="sum")',
          "ignore_index=ignore_index)  # the mean\n    nll = nll * int((targets != ignore_index).sum())  # times the count",
          ("nan", "all padding", "empty", "no scored", "mean", "reduction", "0/0"),
          "takes the mean and multiplies it back by the count: with every target padding the mean is NaN "
          "(pytorch/pytorch#70348); use reduction='sum'", regime="a batch of padding only"),
        M("nll_sum_and_count", NLL_CALL, NLL_CALL.replace(".float(), targets", ", targets") + ".float()",
          ("rounded", "precision", "sum") + HALF,
          "upcasts the summed loss instead of the logits: the sum is taken and rounded in bfloat16",
          regime="bfloat16 logits"),
        M("evaluate", "count + n          # combine by tokens", "count + y.numel()  # combine by tokens",
          ("padding", "-100", "scored", "count", "numel", "ignored"),
          "counts every target of a batch, padding included, in the token total", regime="padded targets"),
        M("evaluate", EVAL_SUMS,
          "    count = sum(int((y != -100).sum()) for _, y in batches)  # scored targets of every batch\n"
          "    total = 0.0\n" + EVAL_SUMS.split("\n", 1)[1].rsplit("                s, n", 1)[0]
          + "                total += nll_sum_and_count(model(x.to(dev)), y.to(dev))[0]\n",
          ("iterator", "generator", "once", "two passes", "consumed", "exhausted", "iterable"),
          "reads batches twice (a counting pass first): an iterator is used up before the loss is summed",
          regime="batches handed over as a one-pass iterator"),
        M("bigram_nll", "[val[:-1], val[1:]].mean().item()", "[val[:-1], val[1:]].sum().item() / len(val)",
          ("pairs", "len(val) - 1", "n - 1", "mean", "one fewer", "count"),
          "divides the summed NLL by the number of bytes, one more than the number of scored pairs"),
        M("bigram_nll", BIGRAM_COUNTS, INDEX_PUT.format(accumulate=""),
          ("accumulate", "repeated", "duplicate", "once", "count", "index_put"),
          "counts with index_put_ and its default accumulate=False: a pair seen many times counts once"),
    ],
}

SAME = [
    ("01", M("embed", "return weight[ids]", "return F.embedding(ids.reshape(-1), weight).reshape(*ids.shape, -1)", (),
             "looks the flattened ids up with F.embedding and restores their shape")),
    ("02", M("layer_norm", "centred = x - x.mean(dim=-1, keepdim=True)", "centred = x - x.sum(dim=-1, keepdim=True) / x.shape[-1]",
             (), "the mean as a sum over the features divided by their number")),
    ("03", M("split_heads", "y.transpose(1, 2).reshape(B, T, H * hd)", "y.permute(0, 2, 1, 3).flatten(2)", (),
             "merges the heads by a permute and a flatten of the last two axes")),
    ("04", M("apply_rope", ROPE_BODY, COMPLEX_TURN + "    x1, x2 = x.float().chunk(2, dim=-1)\n"
             "    z = torch.complex(x1, x2) * turn  # feature i and i + hd/2 as one complex number\n"
             "    return torch.cat((z.real, z.imag), dim=-1).to(x.dtype)", (),
             "rotates with complex numbers made of the two halves: the half rotation itself")),
    ("04", M("rotary_attention", "    q = apply_rope(q, cos, sin, start_pos)  # position enters the scores only\n"
             "    k = apply_rope(k, cos, sin, start_pos)\n",
             "    cos, sin = cos[start_pos:], sin[start_pos:]  # row 0 of the sliced tables is position start_pos\n"
             "    q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)\n", (),
             "slices the tables at start_pos once and rotates both from the slice's row 0")),
    ("04", M("interleaved_to_half", HALF_ROWS,
             "    within = torch.cat((torch.arange(0, hd, 2), torch.arange(1, hd, 2)))  # one head's evens, then odds\n"
             "    order = (torch.arange(n_heads)[:, None] * hd + within).flatten()      # the same inside every head\n"
             "    return w[order]", (), "the permutation as an index of rows, head by head")),
    ("04", M("interleaved_to_half", QK_ROWS, JOINT_QK.format(split="both.split([wq.shape[0], wk.shape[0]])"), (),
             "converts q and k in one call, head by head, and splits the rows back by their counts")),
    ("05", M("Transformer", "return tied_logits(self.norm(x), self.lm_head.weight)", "return self.lm_head(self.norm(x))", (),
             "calls the head module, whose weight is the tied table")),
    ("06", M("cache_update", CACHE_CAT, PREALLOCATED.format(make="past_k.new_zeros"), (),
             "preallocates with past_k.new_zeros (the cache's dtype and device) and copies both parts in")),
    ("06", M("generate_greedy", "logits = model(step_input, cache=cache)[:, -1]", "logits = model(idx[:, cache.length:], "
             "cache=cache)[:, -1]", (), "feeds whatever the cache does not hold yet: the prompt, then the newest id")),
    ("07", M("gqa_attention", GQA_BODY, "    return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)",
             (), "lets SDPA share the kv heads (enable_gqa) instead of repeating them")),
    ("07", M("gqa_attention", GQA_BODY, GQA_GROUPED, (),
             "a grouped einsum with the query heads as (n_kv, n_rep): head h reads kv head h // n_rep")),
    ("06", M("generate_left_padded", "(mask.long().cumsum(-1) - 1)", "(mask.cumsum(-1) - 1)", (),
             "counts the real tokens with a cumsum of the bool mask, which sums in int64 by itself")),
    ("08", M("top_k_filter", 'logits.masked_fill(logits < kth, float("-inf"))', 'torch.where(logits < kth, float("-inf"), logits)',
             (), "masks with torch.where, which keeps the logits' dtype")),
    ("09", M("lm_loss", "targets.flatten(), ignore_index=-100)", 'targets.flatten(), reduction="sum") / (targets != -100).sum()',
             (), "sums the NLL and divides by the scored targets itself")),
    ("09", M("get_batch", "window = data[idx].long()", "window = torch.stack([data[s:s + seq_len + 1] for s in "
             "starts.tolist()]).long()", (), "slices the windows in a loop and stacks them")),
    ("10", M("evaluate", "loss / math.log(2) / bytes_per_token", "math.log2(math.e) * loss / bytes_per_token", (),
             "converts nats to bits by log2(e)")),
    ("10", M("bigram_nll", BIGRAM_COUNTS, INDEX_PUT.format(accumulate=", accumulate=True"), (),
             "counts the pairs with index_put_(accumulate=True)")),
]
