"""A thirty-second held-out set of learner mistakes ("fresh32"), written without reading the checks: no file of
autograder/checks/ or tests/checks/, no autograder/diagnosis_*.py, no source of bench_diagnostics.py, no diagnosis
section of docs/benchmarks.md, no tests/course/test_docs.py; no check cell, notebook check or bench_diagnostics run,
no entry tried against a check, no git show and no git log of main's history (one `git log --oneline -1` after the
commit printed this set's own commit only). Other sets' entries: see the slip below.

Opened or run. The brief, HELPER_RULES.md, mkwt.sh (cat); mkwt.sh fresh32. `ls` of the worktree root, benchmarks/,
benchmarks/mutations/ (names), notebooks/*/, tinylm/; `wc -l` of benchmarks/*.py and benchmarks/mutations/*.py.
Whole: unseen.py, mutations/__init__.py, verify_unseen.py, heldout_duplicates.py, verify_heldout.py,
unseen_probes.py, unseen_probes_fresh30.py and _fresh31.py, unseen_probes_later.py; a grep of the EXTRA_PROBES lines
of unseen_probes_fresh*.py; fresh31.py's docstring. tinylm: kv_cache.py, model.py, config.py. Through notebook_cells:
every answer and setup cell (setups in their last 1,500 to 1,800 characters), the check names only; the markdown of
06 and 07 whole, of 08, 09 and 10 the cells naming an exercise, the markdown lengths of all ten. test_benchmarks.py
150-200, a grep of the four registration files for "fresh31" (SETS finds a module by itself). 20 searches of issue
threads, one file read from the code index (mlx-lm's sample_utils.py), 51 URLs grepped over benchmarks/mutations/.
Runs: torch's version; the fresh31 probes on the solution (their names and values); heldout_duplicates --set fresh32
(4), verify_unseen --set fresh32 (4), the two fresh32 tests, pyflakes on the changed modules, a count of the lines
over 120 characters of fresh32.py and fresh31.py; scripts that dumped the answer cells.

Slips. Reading fresh31's docstring by line range and a grep of its top-level statement lines, `sed -n 50,100p`
also printed fresh31.py's first constants (the solution's own lines) and its first entry (embed by index_select and
a view): that idea is not used here. Setup cells import autograder.checks names and the markdown of 06 and 07 says
what some checks do. heldout_duplicates
matched 1 of 82 first (kv_cache_bytes by torch.finfo(dtype).bits, in fresh31): replaced by a count returned as a
tensor (notebook 10). Every mistake changed a probe at the first run; three probes were written beforehand for
situations the shared ones lack (unseen_probes_fresh32.py) and one after the replacement (the returned types).

Focus, each mistake counted once. Look-alikes (18), right or nearly right at one size, or giving a familiar bug's
numbers from another cause: logits as W h (T == V), the tie the other way round, scores over sqrt(T), heads strided
in the view, FLOPs of the causal triangle, the inverse permutation (right at head_dim 4), x unpacked as (B, T, H, hd),
8d // 3 then an integer ceiling, d_ff by the 8/3 rule, start from axis 1, is_causal for T > 1, the copy axis before
the kv heads, n_rep from the batch, k clamped by the rows, mass_before by roll, logits rows of size(1),
max_seq_len for seq_len, mean x count. Helpers of the learner's own, slip in the helper (14): one-hot of width d,
mean_square without keepdim, project = x @ w, turn(q) twice, residual with h = norm(h), one heads() for q, k and v,
append(past_k, ...) twice, slots that pad on the right, share() by .repeat, next_token without the generator, a
decay floored at min_lr, summed_nll and batch_mean by numel(), pair ids (next, prev). Random state, dtypes, devices
(13): eye() one-hots, RMSNorm on a float32 copy, a uint8 mask, float64 frequencies, float positions, a float16
cache, a byte table without int8, a default generator seeded at 0, int32 windows, manual_seed in train_step, the
notebook's DEVICE, int16 pair ids, a count left a tensor. A batch of one, one step (7): B twice in the FLOPs,
(1, B) step input, k-th values without keepdim, [0] of the draws, unsqueeze(0), the last micro-batch's sum,
squeeze(0) of the logits. Public threads (10, URL above the entry and in its reason; four are also look-alikes,
one a batch of one, two dtypes): fla-org/flash-linear-attention#508, Modalities/modalities#462,
Nijikadesu/breakdown-minimind#3, NVIDIA/Model-Optimizer#2482, vllm-project/speculators#691, logix-project/logix#43,
KolosalAI/model-memory-calculator#2, labmlai/annotated_deep_learning_paper_implementations#203,
fchollet/deep-learning-with-python-notebooks#68, carpedm20/MemN2N-tensorflow#19. Other (1): var_mean unpacked
as (mean, var). SAME (19): type_as, W times column vectors, var(unbiased=False), full((dim,), 1.0), ~triu, unflatten,
halves by slicing, angles by broadcasting, attention factored, a residual helper, bytes reordered, a 0/1 long mask,
enable_gqa, the k-th by sort, scatter into zeros, FLOPs factored by 3, a cosine helper, a pair helper, 2 ** bits.

Counts: 63 mistakes (01: 4, 02: 4, 03: 6, 04: 5, 05: 5, 06: 9, 07: 6, 08: 8, 09: 9, 10: 7), 41 with a regime,
18 with `untrue` (words of the familiar cause a look-alike is not), 19 SAME, 10 public threads; `expect` holds
words a check that found the mistake would likely say, `in_lists` stays False."""
from __future__ import annotations

from .unseen import Unseen as M

# the answers' own lines that rewrites replace
RMS_LINES = ("    x32 = x.float()  # squares of fp16 values overflow above 256\n"
             "    inv_rms = torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)  # (..., 1): one statistic per token\n")
LN_LINES = ("    centred = x - x.mean(dim=-1, keepdim=True)              # (..., d)\n"
            "    var = centred.pow(2).mean(dim=-1, keepdim=True)         # (..., 1): biased, divides by d\n")
SPLIT = ("    x = x.view(B, T, n_heads, d // n_heads)  # (B, T, H, hd): head h owns features h*hd .. (h+1)*hd - 1\n"
         "    return x.transpose(1, 2)                 # (B, H, T, hd)")
ROPE_QK = ("    q = apply_rope(q, cos, sin, start_pos)  # position enters the scores only\n"
           "    k = apply_rope(k, cos, sin, start_pos)\n")
SWIGLU = ("    gate = F.silu(x @ w_gate.T)  # (B, T, d_ff): the nonlinearity lives on the gate only\n"
          "    up = x @ w_up.T              # (B, T, d_ff): linear\n"
          "    return (gate * up) @ w_down.T  # (B, T, d)\n")
BLOCK = ("    x = x + attn(attn_norm(x))  # the branch reads a normalised copy; the stream stays a sum\n"
         "    x = x + mlp(mlp_norm(x))    # the MLP reads the stream after attention has written to it\n"
         "    return x\n")
QKV_05 = ("        q = self.q_proj(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)     # (B, nh, T, hd)\n"
          "        k = self.k_proj(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)  # (B, n_kv, T, hd)\n"
          "        v = self.v_proj(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)  # (B, n_kv, T, hd)\n")
CAT_06 = ("    k_all = torch.cat((past_k, k), dim=2)  # positions are axis 2: the past first, then the new tokens\n"
          "    v_all = torch.cat((past_v, v), dim=2)\n")
PLACE = ("    for b, p in enumerate(prompts):\n"
         "        ids[b, T - len(p):] = p                                         # the padding goes in front\n"
         "        mask[b, T - len(p):] = True\n")
CAT_07 = ("    k_all = torch.cat((past_k, k), dim=2)                 # (B, n_kv, start + T, hd): the small cache\n"
          "    v_all = torch.cat((past_v, v), dim=2)\n")
SDPA_07 = "    y = F.scaled_dot_product_attention(q, repeat_kv(k_all, n_rep), repeat_kv(v_all, n_rep), attn_mask=mask)\n"
SAMPLE_08 = ("                logits = model(idx)[:, -1]                  # (B, V): the last position predicts the next token\n"
             "                next_id = sample_next(logits, temperature, top_k, top_p, generator)  # (B,)\n")
COSINE = "    return min_lr + 0.5 * (1 + math.cos(math.pi * min(progress, 1.0))) * (max_lr - min_lr)\n"
MICRO = ("    total = 0.0\n    for x, y in micro_batches:\n"
         "        logits = model(x)                                             # (b, T, V)\n"
         '        summed = F.cross_entropy(logits.flatten(0, 1), y.flatten(), ignore_index=-100, reduction="sum")\n')
NLL = ('    nll = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=ignore_index,\n'
       '                          reduction="sum")                       # (B*T, V) vs (B*T,) -> scalar\n'
       "    count = int((targets != ignore_index).sum())                 # padding is not a token\n")
EVAL_LOOP = ("        with torch.no_grad():                                # no graph: memory stays flat\n"
             "            for x, y in batches:\n"
             "                s, n = nll_sum_and_count(model(x.to(dev)), y.to(dev))\n"
             "                total, count = total + s, count + n          # combine by tokens, not by batches\n")
BIGRAM = ("    counts = torch.bincount(train[:-1] * 256 + train[1:], minlength=256 * 256).view(256, 256).double()  # [prev, next]\n"
          "    probs = (counts + alpha) / (counts.sum(dim=1, keepdim=True) + 256 * alpha)                         # rows sum to 1\n"
          "    return -probs.log()[val[:-1], val[1:]].mean().item()\n")
GQA_SHAPES = ("gqa", "n_kv", "kv head", "group", "n_kv_heads", "shape")
DTYPE = ("dtype", "float32", "bfloat16", "float16", "int8", "precision")

MUTATIONS = [
    # ---- 01
    ("01", M("one_hot_embed", "    one_hot = F.one_hot(ids, num_classes=weight.shape[0]).to(weight.dtype)  # (..., V)\n",
             "    def one_hot_of(t, n):  # (..., n): 1 where the id equals the column\n"
             "        return (t[..., None] == torch.arange(n, device=t.device)).to(weight.dtype)\n"
             "    one_hot = one_hot_of(ids, weight.shape[-1])  # (..., V)\n",
             ("num_classes", "weight.shape[0]", "vocabulary", "width", "shape[-1]", "d_model", "v columns"),
             "writes a one-hot helper and calls it with weight.shape[-1] (d), not the vocabulary size: right only for a "
             "square table", regime="a table that is not square (V != d)", untrue=("largest id", "infer"))),
    ("01", M("one_hot_embed", "    one_hot = F.one_hot(ids, num_classes=weight.shape[0]).to(weight.dtype)  # (..., V)\n",
             "    one_hot = torch.eye(weight.shape[0])[ids]  # (..., V): row i of the identity is id i's one-hot\n",
             DTYPE + ("device", "eye", "cpu", "meta"),
             "builds the one-hot rows from torch.eye: float32 on the CPU whatever the table's dtype and device",
             regime="a bfloat16 table, or one on another device")),
    ("01", M("tied_logits", "    return x @ weight.T  # (B, T, d) @ (d, V) -> (B, T, V)",
             "    return weight @ x.transpose(-1, -2)  # logits = W h, as in the maths: (V, d) @ (B, d, T)",
             ("transpose", "(b, v, t)", "axes", "order", "w h", "shape"),
             "writes logits = W h and forgets to turn the result back: (B, V, T), the right shape only when T == V",
             regime="T != V (the shape is right when T == V, the values transposed)")),
    ("01", M("tie_weights", "    lm_head.weight = tok_emb.weight  # the same Parameter object, not a copy of its values",
             "    tok_emb.weight = lm_head.weight  # one Parameter for both, as nanoGPT writes it",
             ("direction", "embedding's values", "lm_head's", "head's values", "overwrit", "random", "kept"),
             "ties the other way round: both hold one Parameter, but its values are the head's, the embedding's are lost",
             untrue=(".data", "two parameters", "not tied", "separate parameter"))),
    # ---- 02
    # https://github.com/fla-org/flash-linear-attention/pull/508
    ("02", M("rms_norm", "    inv_rms = torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)  # (..., 1): one statistic per token\n",
             "    inv_rms = 1.0 / (x32.pow(2).mean(dim=-1, keepdim=True).sqrt() + eps)  # (..., 1): eps out of the root\n",
             ("eps", "epsilon", "inside", "square root", "sqrt", "rsqrt"),
             "adds eps after the square root, as fla-org/flash-linear-attention#508 moved it "
             "(https://github.com/fla-org/flash-linear-attention/pull/508): wrong for mean squares near eps",
             regime="mean squares near or below eps", untrue=("ignored", "not passed"))),
    ("02", M("rms_norm", RMS_LINES,
             "    x32 = x.float()  # squares of fp16 values overflow above 256\n"
             "    mean_square = lambda t: t.pow(2).mean(dim=-1)  # one number per token\n"
             "    inv_rms = torch.rsqrt(mean_square(x32) + eps)\n",
             ("keepdim", "broadcast", "per token", "last axis", "shape", "(..., 1)"),
             "drops keepdim inside its mean_square helper: (n,) then broadcasts over the features, which runs only "
             "when tokens == features", regime="as many tokens as features (the only shape that runs)",
             untrue=("whole tensor", "all tokens"))),
    ("02", M("layer_norm", LN_LINES,
             "    mean, var = torch.var_mean(x, dim=-1, keepdim=True, correction=0)  # one pass: both statistics\n"
             "    centred = x - mean\n",
             ("var_mean", "order", "swapped", "mean and var", "variance", "returns (var, mean)"),
             "unpacks torch.var_mean as (mean, var): it returns (var, mean), so the variance is subtracted as the mean")),
    ("02", M("RMSNorm", "        return rms_norm(x, self.weight, self.eps)",
             "        return rms_norm(x.float(), self.weight, self.eps)  # the statistic in float32",
             DTYPE + ("half", "cast back", "input dtype"),
             "hands rms_norm a float32 copy: a float16 or bfloat16 module returns float32",
             regime="float16 or bfloat16 input")),
    # ---- 03
    ("03", M("causal_attention", "    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])     # (B, H, Tq, Tk)",
             "    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-2])     # (B, H, Tq, Tk)",
             ("scale", "sqrt", "head_dim", "hd", "temperature", "shape[-2]"),
             "divides the scores by sqrt of the number of queries: right only where T == head_dim",
             regime="T != head_dim", untrue=("no scale", "not scaled", "d_model"))),
    ("03", M("split_heads", SPLIT,
             "    x = x.view(B, T, d // n_heads, n_heads)  # (B, T, hd, H)\n"
             "    return x.permute(0, 3, 1, 2)             # (B, H, T, hd)",
             ("contiguous", "features h*hd", "interleav", "strided", "merge_heads", "inverse", "layout"),
             "puts the head axis last in the view: head h gets features h, h + H, ..., the right shape, not merge's inverse",
             untrue=("transpose missing", "without the transpose", "reshape alone"))),
    ("03", M("attention_flops", "    per_head = 2 * T * T * head_dim             # (T, hd) @ (hd, T) for the scores; (T, T) @ (T, hd) for the mix",
             "    per_head = 2 * B * T * T * head_dim         # every sequence of the batch, (T, hd) @ (hd, T) for the scores",
             ("batch", "twice", "b²", "b^2", "b * b", "batch size"),
             "puts the batch into per_head and multiplies by B again in the dict: right for a batch of one",
             regime="batch > 1")),
    ("03", M("self_attention", "    q, k, v = (split_heads(F.linear(x, w), n_heads) for w in (w_q, w_k, w_v))  # each (B, H, T, hd)",
             "    project = lambda w: split_heads(x @ w, n_heads)  # (B, T, d) @ (d, d), then heads\n"
             "    q, k, v = project(w_q), project(w_k), project(w_v)  # each (B, H, T, hd)",
             ("transpose", "[d_out, d_in]", "f.linear", "w.t", "x @ w", "project"),
             "projects with x @ w inside its helper: nn.Linear weights are [d_out, d_in], so q, k and v use Wᵀ",
             untrue=("w_o", "output projection", "o_proj"))),
    ("03", M("attention_flops", "    per_head = 2 * T * T * head_dim             # (T, hd) @ (hd, T) for the scores; (T, T) @ (T, hd) for the mix",
             "    per_head = T * (T + 1) * head_dim           # only the causal triangle, T(T+1)/2 entries at 2 FLOPs each",
             ("causal", "triangle", "whole", "t x t", "masked", "full"),
             "counts only the causal triangle: the matmuls compute every T x T entry, masked ones included",
             untrue=("factor 2", "forgot the 2", "one flop per"))),
    ("03", M("causal_mask", "    allowed = torch.ones(q_len, kv_len, dtype=torch.bool)",
             "    allowed = torch.ones(q_len, kv_len, dtype=torch.uint8)",
             ("bool", "uint8", "dtype", "~mask", "bitwise", "masked_fill"),
             "builds the mask as uint8: ~ flips bits (254, 255) and masked_fill refuses a non-bool mask")),
    # ---- 04
    # https://github.com/Modalities/modalities/pull/462
    ("04", M("rope_cache", "    inv_freq = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)  # (hd/2,)",
             "    inv_freq = (theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)).bfloat16()  # model dtype",
             DTYPE + ("inv_freq", "frequenc", "angle", "long", "position"),
             "rounds the frequencies to bfloat16 before the positions multiply them, as Modalities/modalities#462 did "
             "(https://github.com/Modalities/modalities/pull/462): the angle error grows with the position",
             regime="far positions (the error grows with t)")),
    ("04", M("interleaved_to_half", "    pairs = w.reshape(n_heads, hd // 2, 2, d_in)      # (nh, hd/2, 2, d_in): pair i of head h is rows 2i, 2i+1",
             "    pairs = w.reshape(n_heads, 2, hd // 2, d_in)      # (nh, 2, hd/2, d_in): evens and odds of head h",
             ("inverse", "permutation", "evens", "odds", "interleav", "layout", "direction"),
             "reshapes as (2, hd/2): the inverse permutation, half to interleaved, which equals the right one at head_dim 4",
             regime="head_dim > 4")),
    ("04", M("apply_rope", "    T = x.shape[-2]", "    B, T, H, hd = x.shape  # batch, positions, heads, features",
             ("layout", "(b, h, t, hd)", "heads", "positions", "axis", "shape[-2]"),
             "unpacks x as (B, T, H, hd): T is the number of heads, right only where heads == positions",
             regime="n_heads != T")),
    ("04", M("rotary_attention", ROPE_QK,
             "    turn = lambda t: apply_rope(t, cos, sin, start_pos)  # the same rotation for queries and keys\n"
             "    q, k = turn(q), turn(q)\n",
             ("keys", "k = ", "queries", "copy", "turn(q)", "k from q"),
             "calls its rotation helper on q twice: the keys are the rotated queries")),
    ("04", M("rope_cache", "    inv_freq = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)  # (hd/2,)",
             "    inv_freq = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)  # (hd/2,), in double",
             DTYPE + ("float64", "double"),
             "computes the frequencies in float64: the tables come back float64, not the float32 asked for")),
    # ---- 05
    # https://github.com/Nijikadesu/breakdown-minimind/issues/3
    ("05", M("swiglu", SWIGLU, "    return F.silu((x @ w_gate.T) * (x @ w_up.T)) @ w_down.T  # (B, T, d)\n",
             ("silu", "gate", "product", "nonlinearity", "activation", "up"),
             "applies SiLU to the product gate · up instead of the gate alone, the slip of Nijikadesu/breakdown-minimind#3 "
             "(https://github.com/Nijikadesu/breakdown-minimind/issues/3)")),
    ("05", M("swiglu_hidden", "    return multiple * math.ceil(8 * d_model / 3 / multiple)",
             "    return (8 * d_model // 3 + multiple - 1) // multiple * multiple  # integers only",
             ("floor", "8/3", "fraction", "round up", "ceil", "integer division"),
             "floors 8 · d / 3 before rounding up: right unless that floor is already a multiple, e.g. multiple 1",
             regime="a multiple of 1 (or a floor that is already a multiple)", untrue=("8 // 3", "2 * d"))),
    ("05", M("pre_norm_block", BLOCK,
             "    def residual(h, branch, norm):\n"
             "        h = norm(h)                 # the branch reads a normalised copy\n"
             "        return h + branch(h)\n"
             "    return residual(residual(x, attn, attn_norm), mlp, mlp_norm)\n",
             ("residual", "normalised", "stream", "identity", "norm(x) +", "skip"),
             "reassigns h to norm(h) inside its residual helper: the skip path carries the normalised stream",
             untrue=("post-norm", "after the sum"))),
    ("05", M("Transformer", QKV_05,
             "        heads = lambda proj: proj(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)  # (B, heads, T, hd)\n"
             "        q, k, v = heads(self.q_proj), heads(self.k_proj), heads(self.v_proj)\n",
             GQA_SHAPES + ("view",),
             "splits heads with one helper that always uses n_heads: the keys and values of GQA have n_kv_heads",
             regime="n_kv_heads < n_heads")),
    ("05", M("param_counts", '            "mlp": L * 3 * d * config.d_ff,     # gate_proj, up_proj, down_proj',
             '            "mlp": L * 3 * d * swiglu_hidden(d),  # gate_proj, up_proj, down_proj',
             ("d_ff", "config.d_ff", "8/3", "hidden size", "mlp"),
             "recomputes the hidden size by the 8/3 rule: right only while config.d_ff is the default",
             regime="a d_ff set in the config")),
    # ---- 06
    # https://github.com/NVIDIA/Model-Optimizer/issues/2482
    ("06", M("kv_cache_bytes", "    per_position = 2 * config.n_layers * config.n_kv_heads * config.head_dim  # K and V, in every block",
             "    per_position = 2 * config.n_layers * config.n_kv_heads * (config.d_model // config.n_heads)  # K and V",
             ("head_dim", "d_model // n_heads", "head size", "config.head_dim"),
             "derives the head size as d_model // n_heads, as NVIDIA/Model-Optimizer#2482 did "
             "(https://github.com/NVIDIA/Model-Optimizer/issues/2482): wrong where head_dim is set apart",
             regime="head_dim set apart from d_model // n_heads")),
    ("06", M("cache_update", CAT_06,
             "    append = lambda past, new: torch.cat((past, new), dim=2)  # positions are axis 2: the past first\n"
             "    k_all, v_all = append(past_k, k), append(past_k, v)\n",
             ("values", "past_v", "v_all", "keys", "cached keys"),
             "calls its append helper with past_k for the values too: the cached values are replaced by cached keys")),
    # https://github.com/vllm-project/speculators/pull/691
    ("06", M("attention_step", "    mask = tinylm.causal_mask(T, start + T).to(x.device)  # (T, start + T), bottom-right aligned",
             "    mask = tinylm.causal_mask(T, start + T).to(x.device, x.dtype)  # (T, start + T), in the activations' dtype",
             ("bool", "float mask", "additive", "dtype", "-inf", "future", "mask"),
             "casts the mask to the activations' dtype: SDPA adds a float mask (0 or 1) to the scores instead of masking, "
             "the bug of vllm-project/speculators#691 (https://github.com/vllm-project/speculators/pull/691)")),
    ("06", M("attention_step", "    start = past_k.shape[2]                                                   # cached positions come first",
             "    start = past_k.shape[1]                                                   # cached positions come first",
             ("start_pos", "axis 2", "cached positions", "shape[2]", "heads", "offset"),
             "reads the cache length from axis 1, the kv heads: right only when as many positions as heads are cached",
             untrue=("restart", "position 0", "forgets start"))),
    ("06", M("attention_step", "    y = F.scaled_dot_product_attention(q, k_all, v_all, attn_mask=mask)    # (B, nh, T, hd)",
             "    y = F.scaled_dot_product_attention(q, k_all, v_all, is_causal=T > 1)   # one new token sees everything",
             ("is_causal", "top-left", "bottom-right", "several new", "chunk", "mask"),
             "uses is_causal for several new tokens: right for the prefill and single steps, top-left after a cache",
             regime="more than one new token after the prefill")),
    ("06", M("generate_greedy", "            step_input = next_id                                # decode: one new token per step",
             "            step_input = next_id.view(1, -1)                    # decode: one new token per step, (1, 1)",
             ("batch", "(b, 1)", "(1, b)", "shape", "rows", "batch of one"),
             "reshapes the new token to (1, B), thinking (1, 1): right for a batch of one", regime="a batch of more than one")),
    # https://github.com/logix-project/logix/pull/43
    ("06", M("generate_left_padded", "            next_id = logits.argmax(dim=-1)                             # (B,)",
             "            next_id = logits.argmax(dim=-1, keepdim=True).squeeze()     # (B,)",
             ("squeeze", "batch of one", "0-d", "scalar", "shape", "(b,)"),
             "squeezes (B, 1) to (B,) with squeeze(): a batch of one becomes a 0-d tensor, the bug fixed in "
             "logix-project/logix#43 (https://github.com/logix-project/logix/pull/43)", regime="a batch of one prompt")),
    ("06", M("generate_left_padded", PLACE,
             "    slots = lambda p: slice(0, len(p))                                 # row b's slots for its prompt\n"
             "    for b, p in enumerate(prompts):\n"
             "        ids[b, slots(p)] = p\n"
             "        mask[b, slots(p)] = True\n",
             ("left", "right", "padding", "in front", "pad"),
             "its slots helper puts each prompt at the start of its row: right padding, right only for equal lengths",
             regime="prompts of different lengths")),
    ("06", M("generate_left_padded", "    positions = (mask.long().cumsum(-1) - 1).clamp(min=0)              # (B, T): 0 at each row's first real token",
             "    positions = (mask.float().cumsum(-1) - 1).clamp(min=0)             # (B, T): 0 at each row's first real token",
             DTYPE + ("integer", "positions", "long", "float"),
             "counts the positions in float: RoPE positions must be integers, the model refuses them")),
    # ---- 07
    ("07", M("repeat_kv", "    x = x[:, :, None].expand(B, n_kv, n_rep, T, hd)  # (B, n_kv, n_rep, T, hd): a view, copies of each kv head side by side",
             "    x = x[:, None].expand(B, n_rep, n_kv, T, hd)     # (B, n_rep, n_kv, T, hd): a view, n_rep copies",
             ("order", "contiguous", "h // n_rep", "kv0, kv0", "group", "interleav", "axis"),
             "inserts the copy axis before the kv heads: the result reads kv0, kv1, ..., kv0, kv1, ...",
             # ".repeat(" dropped from `untrue` on arrival: the check's line lists x.repeat(1, n_rep, 1, 1) among the
             # codes that tile, with "copies put before the kv axis", this one: it does not say the code calls repeat
             regime="n_kv > 1 and n_rep > 1", untrue=("repeat instead", "tiling with repeat"))),
    ("07", M("gqa_attention", "    n_rep = q.shape[1] // k.shape[1]",
             "    n_rep = q.shape[1] // k.shape[0]",
             ("n_rep", "kv heads", "shape[1]", "batch", "group size"),
             "divides by k.shape[0], the batch: right only where the batch equals the number of kv heads",
             regime="batch != n_kv_heads")),
    ("07", M("gqa_step", SDPA_07,
             "    share = lambda t: t.repeat(1, n_rep, 1, 1)           # each kv head for its query heads\n"
             "    y = F.scaled_dot_product_attention(q, share(k_all), share(v_all), attn_mask=mask)\n",
             ("repeat", "repeat_kv", "order", "tile", "kv0, kv0", "interleave"),
             "repeats the kv heads with .repeat in its own helper instead of repeat_kv: tiled, not grouped",
             regime="n_kv > 1 and n_rep > 1")),
    ("07", M("gqa_step", CAT_07,
             "    k_all = torch.cat((past_k, k), dim=2).half()          # (B, n_kv, start + T, hd): the small cache, in half\n"
             "    v_all = torch.cat((past_v, v), dim=2).half()\n",
             DTYPE + ("half", "cache"),
             "keeps the cache in float16 to save memory while the queries stay float32: attention refuses the mix")),
    # https://github.com/KolosalAI/model-memory-calculator/issues/2
    ("07", M("decode_bytes_per_token", "    kv_cache = 2 * L * config.n_kv_heads * hd * context_len * size            # K and V, every block",
             "    kv_cache = 2 * L * d * context_len * size                                  # K and V, every block",
             ("n_kv_heads", "kv heads", "gqa", "d_model", "embedding"),
             "sizes each key and value by d_model, as KolosalAI/model-memory-calculator#2 did "
             "(https://github.com/KolosalAI/model-memory-calculator/issues/2): right only for MHA",
             regime="n_kv_heads < n_heads, or head_dim set apart", untrue=("n_heads instead", "query heads"))),
    ("07", M("decode_bytes_per_token", "    d, L, hd, size = config.d_model, config.n_layers, config.head_dim, dtype.itemsize",
             "    size = 2 if dtype in (torch.bfloat16, torch.float16) else 4  # bytes per number\n"
             "    d, L, hd = config.d_model, config.n_layers, config.head_dim",
             DTYPE + ("itemsize", "int8", "one byte"),
             "tabulates the bytes per number by hand: int8 counts 4 bytes", regime="an integer dtype (int8)")),
    # ---- 08
    ("08", M("top_k_filter", "    kth = logits.topk(k, dim=-1).values[..., -1:]          # (..., 1): the k-th largest value",
             "    kth = logits.topk(k, dim=-1).values[:, -1]             # the k-th largest value of each row",
             ("keepdim", "broadcast", "row", "batch", "(b, 1)", "shape"),
             "takes the k-th values as (B,): they broadcast against the vocabulary axis, right for a single row",
             regime="more than one row")),
    # https://github.com/labmlai/annotated_deep_learning_paper_implementations/issues/203
    ("08", M("top_p_filter", "    drop_sorted = mass_before >= p                                # the crossing token has mass_before < p",
             "    drop_sorted = ~(probs.cumsum(dim=-1) < p)                     # keep while the sum stays below p",
             ("crossing", "mass before", "cumsum", "threshold", "smallest set", "reach"),
             "keeps tokens while the running sum is below p, as labmlai's nucleus sampler "
             "(https://github.com/labmlai/annotated_deep_learning_paper_implementations/issues/203): the crossing token "
             "is dropped, and every token when the first alone reaches p")),
    ("08", M("sample_next", "    probs = logits.softmax(dim=-1)            # (B, V): filtered tokens get exactly 0\n",
             "    probs = logits.softmax(dim=-1)            # (B, V): filtered tokens get exactly 0\n"
             "    generator = generator if generator is not None else torch.Generator().manual_seed(0)  # reproducible\n",
             ("generator", "seed", "global", "same tokens", "random state"),
             "seeds a fresh generator when none is passed: every unseeded call draws the same tokens",
             regime="no generator passed")),
    ("08", M("sample_next", "    return torch.multinomial(probs, num_samples=1, generator=generator).squeeze(-1)  # (B, 1) -> (B,)",
             "    return torch.multinomial(probs, num_samples=1, generator=generator)[0]  # the one sample drawn",
             ("batch", "[0]", "first row", "shape", "(b,)", "rows"),
             "indexes [0] to take 'the' sample: that is the first row's draw, (1,), right for a batch of one",
             regime="a batch of more than one")),
    ("08", M("generate", "                idx = torch.cat((idx, next_id[:, None]), dim=1)                      # (B, T + 1)",
             "                idx = torch.cat((idx, next_id.unsqueeze(0)), dim=1)                  # (B, T + 1)",
             ("unsqueeze", "(b, 1)", "(1, b)", "batch", "shape", "axis"),
             "adds the new axis in front: (1, B), which only a batch of one appends as a column",
             regime="a batch of more than one")),
    ("08", M("generate", SAMPLE_08,
             "                next_id = next_token(model, idx, temperature, top_k, top_p, generator)  # (B,)\n",
             ("generator", "reproducib", "seed", "global rng", "same draw"),
             "moves the sampling into a helper that forgets the generator: seeded runs draw from the global RNG",
             extra="def next_token(model, ids, temperature, top_k, top_p, generator):  # one step: the last logits -> (B,)\n"
                   "    return sample_next(model(ids)[:, -1], temperature, top_k, top_p)", regime="a seeded generator")),
    ("08", M("top_k_filter", "    k = min(k, logits.shape[-1])                           # k past the vocabulary keeps every token",
             "    k = min(k, logits.shape[0])                            # k past the size keeps every token",
             ("vocabulary", "shape[-1]", "rows", "batch", "clamp", "k"),
             "clamps k by the number of rows, not the vocabulary: right while the batch is at least k",
             regime="fewer rows than k")),
    ("08", M("top_p_filter", "    mass_before = probs.cumsum(dim=-1) - probs                    # mass of the strictly more likely tokens",
             "    mass_before = probs.cumsum(dim=-1).roll(1, dims=-1)           # mass of the strictly more likely tokens",
             ("roll", "first token", "shift", "wrap", "mass before", "most likely"),
             "shifts the running sum with roll: the last sum (1) wraps to the front, so the most likely token is dropped",
             untrue=("crossing", "cumsum > p"))),
    # ---- 09
    # https://github.com/fchollet/deep-learning-with-python-notebooks/pull/68
    ("09", M("get_batch", "    starts = torch.randint(len(data) - seq_len, (batch_size,), generator=generator)  # (B,) in [0, N - T - 1]",
             "    starts = torch.randperm(len(data) - seq_len, generator=generator)[:batch_size]  # (B,) distinct starts",
             ("replacement", "randperm", "distinct", "batch_size", "windows", "randint"),
             "draws the starts without replacement, as fchollet/deep-learning-with-python-notebooks#68 proposed "
             "(https://github.com/fchollet/deep-learning-with-python-notebooks/pull/68): fewer rows than asked on short data",
             regime="more windows asked than the data holds")),
    ("09", M("get_batch", "    window = data[idx].long()                                                        # (B, T + 1)",
             "    window = data[idx].int()                                                         # (B, T + 1), int32 is enough",
             DTYPE + ("int64", "long", "int32"),
             "returns int32 ids to save memory: the exercise asks for int64, what cross_entropy's targets need")),
    ("09", M("lm_loss", "    return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)  # (B*T, V) vs (B*T,)",
             "    return F.cross_entropy(logits.reshape(-1, logits.size(1)), targets.reshape(-1), ignore_index=-100)  # (B*T, V)",
             ("size(1)", "vocab", "shape[-1]", "reshape", "t instead", "flatten"),
             "reshapes the logits to rows of logits.size(1), the positions: the right rows only where T == V",
             regime="T != V")),
    ("09", M("lr_schedule", COSINE,
             "    decay = lambda t: max(min_lr, 0.5 * (1 + math.cos(math.pi * t)) * max_lr)  # cosine from max_lr, floored\n"
             "    return decay(min(progress, 1.0))\n",
             ("min_lr", "floor", "clamp", "max_lr - min_lr", "cosine"),
             "its decay helper runs the cosine from max_lr to 0 and clamps at min_lr: right only for min_lr = 0",
             regime="min_lr > 0", untrue=("warmup", "off by one"))),
    # https://github.com/carpedm20/MemN2N-tensorflow/issues/19
    ("09", M("train_step", "    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)  # global gradient norm <= grad_clip",
             "    for p in model.parameters():                 # each weight matrix kept below grad_clip\n"
             "        torch.nn.utils.clip_grad_norm_(p, grad_clip)",
             ("global", "per parameter", "each parameter", "separately", "total norm", "clip"),
             "clips each parameter on its own, as carpedm20/MemN2N-tensorflow#19 reports "
             "(https://github.com/carpedm20/MemN2N-tensorflow/issues/19): right for a model of one parameter",
             regime="a model of more than one parameter tensor")),
    ("09", M("train_step", "    model.train()                                # dropout on, whatever mode the caller left",
             "    model.train()                                # dropout on, whatever mode the caller left\n"
             "    torch.manual_seed(0)                         # the same dropout masks on every run",
             ("seed", "global", "random state", "manual_seed", "dropout masks"),
             "seeds the global generator at every step: each step gets the same dropout masks and the caller's stream resets")),
    ("09", M("train_step_accumulated", "    return total / n_tokens                                           # mean over all N target tokens",
             "    return summed.item() / n_tokens                                   # mean over all N target tokens",
             ("last micro-batch", "total", "loss", "sum over", "every micro-batch"),
             "returns the last micro-batch's summed loss over N: right with a single micro-batch",
             regime="more than one micro-batch")),
    ("09", M("train_step_accumulated", MICRO,
             "    def summed_nll(x, y):  # this micro-batch's NLL, summed over its targets\n"
             "        return F.cross_entropy(model(x).flatten(0, 1), y.flatten(), ignore_index=-100) * y.numel()\n"
             "    total = 0.0\n    for x, y in micro_batches:\n"
             "        summed = summed_nll(x, y)\n",
             ("padding", "numel", "scored", "-100", "mean times", "count"),
             "its summed_nll helper multiplies the mean by y.numel(): padding counted, right only without -100 targets",
             regime="padded targets", untrue=("mean of means", "average of the micro-batch"))),
    ("09", M("train_step_costs", "    attention_matmuls = 4 * seq_len * config.n_heads * hd * L * tokens        # QKᵀ and weights @ V, full T x T",
             "    attention_matmuls = 4 * config.max_seq_len * config.n_heads * hd * L * tokens  # QKᵀ and weights @ V",
             ("seq_len", "max_seq_len", "attention", "context"),
             "sizes the attention matmuls by config.max_seq_len: right only for windows of the full context",
             regime="seq_len < max_seq_len")),
    # ---- 10
    ("10", M("nll_sum_and_count", NLL,
             '    nll = F.cross_entropy(logits.squeeze(0).float(), targets.squeeze(0), ignore_index=ignore_index,\n'
             '                          reduction="sum")                       # one sequence: (T, V) vs (T,)\n'
             "    count = int((targets != ignore_index).sum())                 # padding is not a token\n",
             ("batch", "squeeze", "flatten", "(b*t, v)", "shape"),
             "squeezes the batch axis away instead of flattening: right for a batch of one", regime="a batch of more than one")),
    ("10", M("nll_sum_and_count", NLL,
             "    count = int((targets != ignore_index).sum())                 # padding is not a token\n"
             "    nll = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=ignore_index) * count\n",
             ("nan", "padding only", "empty", "mean", "0 / 0", "no scored"),
             "takes the mean and multiplies by the count: the sum, except for a batch of padding (NaN · 0 = NaN)",
             regime="a batch of padding only")),
    ("10", M("nll_sum_and_count", "    count = int((targets != ignore_index).sum())                 # padding is not a token",
             "    count = (targets != ignore_index).sum()                      # padding is not a token",
             ("int", "tensor", "python", "type", "count"),
             "returns the count as a 0-d int64 tensor, not the int asked for: it stays a tensor through every later sum")),
    ("10", M("evaluate", EVAL_LOOP,
             "        def batch_mean(x, y):  # one batch's mean NLL and its size\n"
             "            s, n = nll_sum_and_count(model(x.to(dev)), y.to(dev))\n"
             "            return s / max(n, 1), y.numel()\n"
             "        with torch.no_grad():                                # no graph: memory stays flat\n"
             "            for x, y in batches:\n"
             "                m, n = batch_mean(x, y)\n"
             "                total, count = total + m * n, count + n      # combine by tokens, not by batches\n",
             ("padding", "numel", "scored", "token-weighted", "count"),
             "its batch_mean helper returns y.numel() as the batch's size: padding counted in the weights",
             regime="padded targets", untrue=("mean of the batch", "by batches"))),
    ("10", M("evaluate", "    dev = next(model.parameters()).device",
             "    dev = DEVICE                                             # where the notebook computes",
             ("device", "model's", "parameters", "DEVICE"),
             "sends the batches to the notebook's DEVICE, not to the model's device", regime="a model on another device")),
    ("10", M("bigram_nll", BIGRAM,
             "    pair = lambda t: t[1:] * 256 + t[:-1]  # one id per (prev, next) pair\n"
             "    counts = torch.bincount(pair(train), minlength=256 * 256).view(256, 256).double()  # [prev, next]\n"
             "    probs = (counts + alpha) / (counts.sum(dim=1, keepdim=True) + 256 * alpha)        # rows sum to 1\n"
             "    return -probs.log().flatten()[pair(val)].mean().item()\n",
             ("prev", "next", "order", "backward", "row = previous", "pair"),
             "its pair helper keys (next, prev): counts and look-ups agree, so it scores p(prev | next), nearly the same",
             untrue=("columns", "dim=0"))),
    ("10", M("bigram_nll", "    train, val = train.long(), val.long()",
             "    train, val = train.to(torch.int16), val.to(torch.int16)  # byte values fit in 16 bits",
             DTYPE + ("int16", "overflow", "65535", "int64"),
             "computes pair ids in int16: prev · 256 + next reaches 65,535, beyond int16's 32,767")),
]

SAME = [
    ("01", M("one_hot_embed", ".to(weight.dtype)  # (..., V)", ".type_as(weight)  # (..., V)", (),
             "casts the one-hot rows with type_as")),
    ("01", M("tied_logits", "    return x @ weight.T  # (B, T, d) @ (d, V) -> (B, T, V)",
             "    return (weight @ x.unsqueeze(-1)).squeeze(-1)  # (V, d) @ (..., d, 1) -> (..., V)", (),
             "multiplies each position's column vector by W")),
    ("02", M("layer_norm", "    var = centred.pow(2).mean(dim=-1, keepdim=True)         # (..., 1): biased, divides by d",
             "    var = x.var(dim=-1, keepdim=True, unbiased=False)        # (..., 1): biased", (),
             "takes torch's biased variance")),
    ("02", M("RMSNorm", "nn.Parameter(torch.ones(dim))", "nn.Parameter(torch.full((dim,), 1.0))", (),
             "fills the gain with 1.0")),
    ("03", M("causal_mask", "    return allowed.tril(diagonal=kv_len - q_len)  # query i is position kv_len - q_len + i",
             "    return ~allowed.triu(diagonal=kv_len - q_len + 1)  # not strictly above the shifted diagonal", (),
             "negates the strict upper triangle")),
    ("03", M("split_heads", SPLIT, "    return x.unflatten(-1, (n_heads, -1)).transpose(1, 2)  # (B, H, T, hd)", (),
             "splits the features with unflatten")),
    ("04", M("apply_rope", "    x1, x2 = x.chunk(2, dim=-1)\n    return torch.cat((-x2, x1), dim=-1)",
             "    half = x.shape[-1] // 2\n    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)", (),
             "slices the halves by hand")),
    ("04", M("rope_cache", "    angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float32), inv_freq)      # (T, hd/2)",
             "    angles = torch.arange(max_seq_len, dtype=torch.float32)[:, None] * inv_freq  # (T, hd/2) by broadcasting",
             (), "forms the angles by broadcasting")),
    ("05", M("param_counts", '            "attention": L * (q_and_o + k_and_v),',
             '            "attention": 2 * L * d * hd * (config.n_heads + config.n_kv_heads),', (),
             "factors the attention count")),
    ("05", M("pre_norm_block", BLOCK,
             "    def residual(h, branch, norm):\n        return h + branch(norm(h))\n"
             "    return residual(residual(x, attn, attn_norm), mlp, mlp_norm)\n", (), "a residual helper, written right")),
    ("06", M("kv_cache_bytes", "    return per_position * seq_len * batch_size * dtype.itemsize",
             "    return dtype.itemsize * batch_size * seq_len * per_position", (), "multiplies in another order")),
    ("06", M("generate_left_padded", "    mask = torch.zeros(B, T, dtype=torch.bool)",
             "    mask = torch.zeros(B, T, dtype=torch.long)", (), "a 0/1 integer mask, which the model accepts")),
    ("07", M("gqa_step", SDPA_07, "    y = F.scaled_dot_product_attention(q, k_all, v_all, attn_mask=mask, enable_gqa=True)\n", (),
             "lets SDPA share the kv heads")),
    ("08", M("top_k_filter", "    kth = logits.topk(k, dim=-1).values[..., -1:]",
             "    kth = logits.sort(dim=-1, descending=True).values[..., k - 1:k]", (), "the k-th value by sorting")),
    ("08", M("top_p_filter", "    drop = drop_sorted.scatter(-1, order, drop_sorted)",
             "    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)", (), "scatters into a fresh mask")),
    ("09", M("train_step_costs", '    return {"flops": 6 * matmul_weights * tokens + 3 * attention_matmuls,',
             '    return {"flops": 3 * (2 * matmul_weights * tokens + attention_matmuls),', (), "factors the FLOPs by 3")),
    ("09", M("lr_schedule", COSINE,
             "    cosine = lambda t: 0.5 * (1 + math.cos(math.pi * min(t, 1.0)))  # 1 -> 0\n"
             "    return min_lr + cosine(progress) * (max_lr - min_lr)\n", (), "a cosine helper, written right")),
    ("10", M("bigram_nll", BIGRAM,
             "    pair = lambda t: t[:-1] * 256 + t[1:]  # one id per (prev, next) pair\n"
             "    counts = torch.bincount(pair(train), minlength=256 * 256).view(256, 256).double()\n"
             "    probs = (counts + alpha) / (counts.sum(dim=1, keepdim=True) + 256 * alpha)\n"
             "    return -probs.log().flatten()[pair(val)].mean().item()\n", (), "a pair helper, written right")),
    ("10", M("evaluate", '"perplexity": math.exp(loss),', '"perplexity": 2 ** (loss / math.log(2)),', (),
             "perplexity as 2 to the bits")),
]
