"""A twenty-fifth held-out set of learner mistakes ("fresh25"), written without reading the checks: neither
autograder/checks/ (any file), tests/checks/, autograder/diagnosis_*.py, benchmarks/bench_diagnostics.py's source,
the diagnosis sections of docs/benchmarks.md nor tests/course/test_docs.py were opened, listed or grepped;
bench_diagnostics.py, check cells and notebook checks were never run, and no mistake or SAME edit was tried against a
check. Of git history only `git log --oneline -1` was run, after this set's own commit, and showed that commit alone.

What was opened or run. The brief and the helper rules (cat); mkwt.sh fresh25 (run, not read) and git status. `ls` of
the repository root, benchmarks/, benchmarks/mutations/ and tinylm/ (names only), and `ls -la .venv`; `wc -l` of
verify_unseen.py, heldout_duplicates.py, verify_heldout.py, mutations/__init__.py, mutations/unseen.py and the
unseen_probes*.py files. Of the other sets only fresh24.py's module docstring, printed with python. Whole:
mutations/__init__.py, unseen.py (the entry class and its entries), verify_unseen.py, heldout_duplicates.py,
verify_heldout.py, unseen_probes.py, unseen_probes_later.py, unseen_probes_fresh23.py and unseen_probes_fresh24.py.
Through bench_diagnostics.notebook_cells: the answer cells of all ten notebooks (written to a scratch folder to copy
the original texts from), their setup cells with every line naming autograder left out, and of the third result only
the check names. In tinylm/: a grep of kv_cache.py, model.py, sampling.py and attention.py for their definitions,
config.py lines 1-40, and the public names of the package (dir(tinylm)). A grep for "fresh24" over the four
registration files named in the brief, lines 163-176 of tests/course/test_benchmarks.py, and a grep of pyproject.toml
for a line-length setting. Public threads were found with 18 searches of issue threads; each candidate's URL was
grepped over benchmarks/mutations/ (`grep -rl URL`, the URL only: 40 URLs, of which 16 were already in fresh11 to
fresh21 and were not used). Run: verify_unseen.py --set fresh25 (four runs), heldout_duplicates.py --set fresh25
(three runs), the two fresh25 tests of test_benchmarks.py (-k fresh25), one script that applied the bfloat16
log-softmax mistake and called unseen_probes' _bfloat16_sum_matches on it, and two small torch computations of that
sum.

Slips, none touching a check's text: a first run of notebook_cells under the system python failed on importing torch,
and its traceback printed one line of bench_diagnostics.py (its `import torch`); the setup cells printed with the
autograder lines left out still showed the indented continuation lines of those imports, which name check functions
(names only); lines 163-176 of test_benchmarks.py, and the context of git diff on it, show the end of the duplicates
test's docstring and the first line of the next test's (they name verify_unseen, nothing of a check).

Duplicates, honestly. heldout_duplicates matched none of the entries on its first run, so none was replaced. Some
ideas are not new to the collection though their code is: a variance as E[x²] - E[x]² (here with a public thread no
other set cites), the k-th values without their axis (transformers' old top-k bug is cited by another set, so it is
not cited here), a generator left out (here through a helper's default), hard-coded -100 (here in a helper's default
for the count), a softmax or log-softmax that over- or underflows, blocks called without their index. 66 mistakes and
23 SAME edits were drafted; 4 mistakes and 5 SAME edits were dropped to keep the set near its size (the batch left
out of attention_flops' projections, k_proj and v_proj counted at n_heads in param_counts, attention's backward left
out of train_step_costs, context_len + 1 positions in decode_bytes_per_token; SAME: the head as F.linear, _window_ids
of seq_len + 1, _append in order, _round_up with the multiple, _n_scored with ignore_index). Two ideas were dropped
before they were written as entries: left-padded positions taken as arange(T) (the alpaca-lora thread on position
ids), because RoPE cannot see a shift shared by a whole row, so it is no bug here; and rotary_attention with q and k
both rotated from position 0, which computes the same scores (equal lengths, equal offsets) and so became a SAME
edit. Verify first found no probe that saw the log-probabilities rounded to bfloat16 (that draw's roundings cancelled
to 1e-5), so a probe with four draws was added.

The set's focus, each mistake counted once by its main kind. Helpers of the learner's own (23): a one-hot helper
whose dtype defaults to float32; an _inv_rms whose eps defaults to 1e-5; _scores(k, q); an _allowed mask whose offset
defaults to 0; _heads_of with x @ w; _inv_freq(theta, head_dim); a row slice ending at T; w.split(n_heads) for one
piece per head; blocks called without their layer_idx; _residual with branch and norm swapped; _round_up with Llama's
default 256; _swish on the up branch; _bytes with a float32 default; _append(v, past_v); causal_mask(start + T, T);
_heads viewed straight into (B, n, T, hd); _repeat by n_kv_heads; _kept with cumsum over dim 0; _draw without the
caller's generator; one _flat for logits and targets; _window_ids of seq_len; an evaluate helper returning (count,
NLL) unpacked as (NLL, count); _n_scored with -100 as its default. Modules and their state (7, and 4 public below):
the tie made the other way round; the head's weight detached; eps as a persistent buffer; mlp_norm the same module as
attn_norm; the mode to restore read from torch.is_grad_enabled(); train mode set as model.training = True; the mode
read after model.eval(). Partial and compensating (12): Gemma's zero-centred gain used as 1 + w (right for a fresh
module); split and merge without their transposes (the round trip is still x); pairs split interleaved and joined as
halves; new q and k both rotated from 0 (right on the prefill); a step's ids given the new axis in front (right for a
batch of one); left-padded positions counted from 1 with no + 1 per step (right for the first new token); repeat_kv
by expanding the head axis (right for one kv head); n_rep read off the positions axis (SDPA broadcasts one kv head);
the k-th values without their axis (right for one row); the temperature applied before sample_next too (right at 0
and 1); a one-based step in warmup and decay (right warmup and last step); bigram pair ids reversed with the lookup,
the normaliser still over rows. Public bugs (10, below). Accounting wrong by a term (4): the queries counted in the
KV cache, SwiGLU counted with two matrices, the head's matmul left out of the training FLOPs, the smoothing added
once to the row total. Numerics (4, and three public among the ten): the squares taken before the upcast, the
attention softmax without the row maximum, top-p's softmax as exp / sum, the upcast after the log-softmax. Other (2):
the looked-up rows scaled by sqrt(d), bincount without minlength.

Sources: a learner working through the notebooks and, for 10 mistakes, threads of public projects (the URL is in a
comment above the entry and in its reason): NVIDIA/trt-samples-for-hackathon-cn#88 (variance as E[x²] - E[x]²),
transformers#29496 (RoPE frequencies in bfloat16), ddsp_pytorch#37 (modules repeated by list multiplication),
ng-video-lecture#9 (the output projection sized d_model), MEGABYTE-pytorch#13 (k projection sized for one head),
candle#1528 (repeat_kv left 5-d), pytorch#5908 (setting .training instead of calling train()),
Dive-into-DL-PyTorch#101 (clipping over an exhausted generator), transformers#35203 (each micro-batch normalised by
its own token count) and pytorch#1620 (log of softmax).

SAME lists 18 edits, mostly the helpers above without their mistake (the one-hot given weight.dtype, _inv_rms with
eps, _scores(q, k), _allowed with its offset, the softmax less the row maximum, _inv_freq(head_dim, theta), rows by
narrow, w.split(hd), both residual steps in order, SiLU written out on the gate, the step's new axis last, _kept over
the last axis, _draw with the generator, clipping by hand over a list, a flattening helper that keeps trailing axes,
the (count, NLL) helper unpacked in its order) and two routes of their own (repeat_interleave for the kv heads, q and
k both rotated from 0 in rotary_attention); a check must pass each.

Counts: 62 mistakes (01: 4, 02: 5, 03: 5, 04: 5, 05: 8, 06: 8, 07: 5, 08: 7, 09: 8, 10: 7), 18 SAME edits, 10 public
threads. The new probes, in benchmarks/unseen_probes_fresh25.py, hand layer_norm tokens of mean 1000 and spread 1,
run generate at temperature 2 (closed-form share of the likeliest token), run train_step on a model whose layers sit
one level down, handed over in eval mode, and sum the NLL of four draws of bfloat16 logits.
`benchmarks/verify_unseen.py --set fresh25` proves each mistake a real bug and each SAME edit harmless. `in_lists` is
left False throughout: the project's nbNN lists were not read, so it was not assessed.

Each mistake is one substitution in one answer cell; `expect` holds words a check that found it would likely say,
`regime` the situation in which a mistake that is right by default shows. Each reason says what the learner did and
the fix."""
from __future__ import annotations

from .unseen import Unseen as M

START_POS = ("start_pos", "offset", "cached positions", "positions of the new", "start")
# notebook 03's split_heads cell, from split's view to merge's return
SPLIT_MERGE = ("    x = x.view(B, T, n_heads, d // n_heads)  # (B, T, H, hd): head h owns features h*hd .. (h+1)*hd - 1\n"
               "    return x.transpose(1, 2)                 # (B, H, T, hd)\n"
               "    ### END SOLUTION\n\n\n"
               "def merge_heads(y: torch.Tensor) -> torch.Tensor:\n"
               '    """(B, H, T, hd) -> (B, T, H * hd)."""\n'
               "    ### BEGIN SOLUTION\n"
               "    B, H, T, hd = y.shape\n"
               "    return y.transpose(1, 2).reshape(B, T, H * hd)  # (B, T, H, hd) -> (B, T, d): heads side by side")
# notebook 06's left-padded decoding, from the prompt's positions to the next step's
LEFT_PADDED = ("    positions = (mask.long().cumsum(-1) - 1).clamp(min=0)              # (B, T): 0 at each row's first real token\n"
               "    new = []\n"
               "    with torch.no_grad():                                               # no graph: nothing here is trained\n"
               "        for _ in range(max_new_tokens):\n"
               "            logits = model(ids, cache=cache, positions=positions, attention_mask=mask)[:, -1]  # (B, V)\n"
               "            next_id = logits.argmax(dim=-1)                             # (B,)\n"
               "            new.append(next_id)\n"
               "            ids, positions = next_id[:, None], positions[:, -1:] + 1    # (B, 1) each: one past the row's last position")
# notebook 10's evaluate, from the running totals to the first call in the loop
EVAL_LOOP = ("    total, count = 0.0, 0\n"
             "    try:\n"
             "        with torch.no_grad():                                # no graph: memory stays flat\n"
             "            for x, y in batches:\n"
             "                s, n = nll_sum_and_count(model(x.to(dev)), y.to(dev))\n")
SCORED = ("    def _scored(x, y):  # (tokens scored, summed NLL) of one batch\n"
          "        nll, n = nll_sum_and_count(model(x.to(dev)), y.to(dev))\n"
          "        return n, nll\n")
BATCH_OF_ONE = ("batch of one", "batch size 1", "batch_size=1", "one row", "several rows", "batch")

MUTATIONS = {
    "01": [
        # helper: the caller relies on the helper's default dtype
        M("one_hot_embed", "    one_hot = F.one_hot(ids, num_classes=weight.shape[0]).to(weight.dtype)  # (..., V)",
          "    def _one_hot(i, n, dtype=torch.float32):  # one row per id: a comparison with every id of the table\n"
          "        return (i[..., None] == torch.arange(n, device=i.device)).to(dtype)\n"
          "    one_hot = _one_hot(ids, weight.shape[0])  # (..., V)",
          ("dtype", "float32", "bfloat16", "half", "weight.dtype", "default"),
          "writes a one-hot helper whose dtype defaults to float32 and calls it without weight.dtype: a bfloat16 "
          "table meets a float32 one-hot in the matmul; pass weight.dtype",
          regime="a table in another dtype than float32 (bfloat16)"),
        M("embed", "    return weight[ids]  # advanced indexing: one row of weight per id, gradient flows to those rows",
          "    return weight[ids] * weight.shape[1] ** 0.5  # rows scaled by sqrt(d), as the Transformer paper does",
          ("sqrt(d)", "scale", "scaled", "multiplied", "rows of the table", "weight[ids]", "factor"),
          "multiplies the looked-up rows by sqrt(d) (the original Transformer's embedding scale): the lookup must "
          "return the rows themselves; drop the factor"),
        M("tied_logits", "    return x @ weight.T  # (B, T, d) @ (d, V) -> (B, T, V)",
          "    return x @ weight.detach().T  # the embedding already trains through the lookup",
          ("detach", "gradient", "grad", "no gradient", "graph", "requires_grad"),
          "detaches the embedding matrix in the head, thinking the lookup trains it already: the head's share of "
          "the tied gradient never reaches the weight; use weight itself"),
        M("tie_weights", "    lm_head.weight = tok_emb.weight  # the same Parameter object, not a copy of its values",
          "    tok_emb.weight = lm_head.weight  # one Parameter for both",
          ("embedding's values", "random", "other way", "direction", "lm_head's", "overwrit", "values of the embedding",
           "tok_emb.weight"),
          "ties the other way round: the embedding takes the head's freshly initialised Parameter and its own "
          "values are lost; assign tok_emb.weight to lm_head.weight"),
    ],
    "02": [
        # helper: the statistic's eps defaults to another value and the caller leaves it out
        M("rms_norm", "    inv_rms = torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)  # (..., 1): one statistic per token",
          "    def _inv_rms(t, eps=1e-5):  # 1 / sqrt(mean square + eps), one per token\n"
          "        return torch.rsqrt(t.pow(2).mean(dim=-1, keepdim=True) + eps)\n"
          "    inv_rms = _inv_rms(x32)  # (..., 1)",
          ("eps", "epsilon", "1e-5", "default"),
          "factors the statistic into a helper with its own eps default (1e-5) and calls it without eps: the "
          "caller's eps never arrives; pass eps on",
          regime="an eps other than the helper's default, or mean squares near eps"),
        # numerics: the squares are taken before the upcast
        M("rms_norm", "    x32 = x.float()  # squares of fp16 values overflow above 256\n"
          "    inv_rms = torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)",
          "    mean_square = x.pow(2).mean(dim=-1, keepdim=True).float()  # then float32 for the rsqrt\n"
          "    x32 = x.float()\n"
          "    inv_rms = torch.rsqrt(mean_square + eps)",
          ("overflow", "float32", "upcast", "inf", "float16", "fp16", "before squaring", "half"),
          "upcasts the mean square after computing it: float16 entries above 256 have already squared to inf; "
          "square x32, not x",
          regime="float16 input with entries above 256"),
        # https://github.com/NVIDIA/trt-samples-for-hackathon-cn/issues/88
        M("layer_norm", "    centred = x - x.mean(dim=-1, keepdim=True)              # (..., d)\n"
          "    var = centred.pow(2).mean(dim=-1, keepdim=True)         # (..., 1): biased, divides by d",
          "    mean = x.mean(dim=-1, keepdim=True)\n"
          "    centred = x - mean                                      # (..., d)\n"
          "    var = x.pow(2).mean(dim=-1, keepdim=True) - mean.pow(2)  # (..., 1): E[x²] - E[x]², one pass",
          ("cancellation", "e[x²]", "e[x^2]", "mean far", "large mean", "precision", "centred", "centered",
           "variance", "var"),
          "takes the variance as E[x²] - E[x]² (as the TensorRT-LLM plugin of "
          "https://github.com/NVIDIA/trt-samples-for-hackathon-cn/issues/88 did): for tokens whose mean is large "
          "next to their spread the two terms cancel and float32 keeps no digits of the difference; average the "
          "squares of the centred values",
          regime="tokens whose mean is large next to their spread (mean 1000, spread 1)"),
        # partial: Gemma's zero-centred gain, right for a fresh module only
        M("RMSNorm", "        self.weight = nn.Parameter(torch.ones(dim))  # gain starts at 1: a fresh norm only rescales\n"
          "        ### END SOLUTION\n\n"
          "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n"
          "        ### BEGIN SOLUTION\n"
          "        return rms_norm(x, self.weight, self.eps)",
          "        self.weight = nn.Parameter(torch.zeros(dim))  # stored as the offset from 1, as Gemma does\n"
          "        ### END SOLUTION\n\n"
          "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n"
          "        ### BEGIN SOLUTION\n"
          "        return rms_norm(x, 1 + self.weight, self.eps)",
          ("1 + weight", "offset", "zeros", "trained gain", "loaded", "state_dict", "gain", "weight"),
          "stores the gain as Gemma's offset from 1 (zeros, used as 1 + weight): a fresh module is right, but a "
          "gain loaded from a Llama checkpoint is applied as 1 + w; keep ones and use the weight as it is",
          regime="a trained gain loaded into the module"),
        # module state: eps kept as a persistent buffer
        M("RMSNorm", "        self.eps = eps\n",
          "        self.register_buffer(\"eps\", torch.tensor(eps))  # moves with .to() like the gain\n",
          ("buffer", "state_dict", "eps", "unexpected key", "missing key", "load_state_dict", "persistent"),
          "registers eps as a (persistent) buffer: the state dict gains an 'eps' entry, so loading a checkpoint that "
          "holds only the gain fails; keep eps a plain float attribute",
          regime="loading a state dict that holds only the gain"),
    ],
    "03": [
        # helper: called with its arguments swapped
        M("causal_attention", "    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])     # (B, H, Tq, Tk)",
          "    def _scores(queries, keys):  # scaled dot products, (B, H, Tq, Tk)\n"
          "        return queries @ keys.transpose(-2, -1) / math.sqrt(queries.shape[-1])\n"
          "    scores = _scores(k, q)",
          ("transpose", "swapped", "k @ q", "keys and queries", "argument", "order", "(tk, tq)", "shape"),
          "calls its own _scores(queries, keys) as _scores(k, q): the score matrix comes out transposed, keys "
          "along the rows; call _scores(q, k)"),
        # helper: the caller relies on offset 0
        M("causal_mask", "    allowed = torch.ones(q_len, kv_len, dtype=torch.bool)\n"
          "    return allowed.tril(diagonal=kv_len - q_len)  # query i is position kv_len - q_len + i",
          "    def _allowed(rows, cols, offset=0):  # key j visible to query i when j <= i + offset\n"
          "        return torch.arange(cols)[None, :] <= torch.arange(rows)[:, None] + offset\n"
          "    return _allowed(q_len, kv_len)",
          ("bottom-right", "offset", "kv_len - q_len", "top-left", "diagonal", "fewer queries", "cached"),
          "writes a mask helper with an offset argument defaulting to 0 and never passes kv_len - q_len: with fewer "
          "queries than keys the mask is top-left aligned; pass the offset",
          regime="fewer queries than keys (q_len < kv_len)"),
        # partial: the same missing transpose in split and merge, so merge(split(x)) is still x
        M("split_heads", SPLIT_MERGE, SPLIT_MERGE
          .replace("    x = x.view(B, T, n_heads, d // n_heads)  # (B, T, H, hd): head h owns features h*hd .. (h+1)*hd - 1\n"
                   "    return x.transpose(1, 2)                 # (B, H, T, hd)",
                   "    return x.reshape(B, n_heads, T, d // n_heads)  # (B, H, T, hd)")
          .replace("    return y.transpose(1, 2).reshape(B, T, H * hd)  # (B, T, H, hd) -> (B, T, d): heads side by side",
                   "    return y.reshape(B, T, H * hd)  # (B, T, d): heads side by side"),
          ("transpose", "view", "layout", "mixes", "positions", "features", "round trip", "tokens"),
          "reshapes (B, T, d) straight to (B, H, T, hd): each 'head' holds pieces of several positions; with the "
          "matching merge the round trip still gives x back, so only attention sees it; view (B, T, H, hd) and "
          "transpose"),
        M("self_attention", "    q, k, v = (split_heads(F.linear(x, w), n_heads) for w in (w_q, w_k, w_v))  # each (B, H, T, hd)",
          "    def _heads_of(w):  # project x, then split into heads\n"
          "        return split_heads(x @ w, n_heads)\n"
          "    q, k, v = _heads_of(w_q), _heads_of(w_k), _heads_of(w_v)  # each (B, H, T, hd)",
          ("transpose", "x @ w", "w.t", "[d_out, d_in]", "layout", "f.linear", "projection"),
          "projects with x @ w inside its helper: the weights are stored [d_out, d_in] as nn.Linear's, so the "
          "product needs w.T (or F.linear)"),
        # numerics: the softmax written out without the row maximum
        M("causal_attention", "    weights = scores.softmax(dim=-1)                                 # over keys: each row sums to 1",
          "    def _softmax(s):  # exp, normalised over the keys\n"
          "        e = s.exp()\n"
          "        return e / e.sum(dim=-1, keepdim=True)\n"
          "    weights = _softmax(scores)",
          ("nan", "underflow", "overflow", "max", "stable", "exp", "softmax"),
          "writes the softmax as exp / sum without subtracting the row maximum: scores far below 0 underflow to 0 "
          "and give 0 / 0 = nan (far above, inf); subtract s.amax(-1) first or use softmax",
          regime="large scores (e.g. -2.8e4)"),
    ],
    "04": [
        # https://github.com/huggingface/transformers/issues/29496
        M("rope_cache", "    inv_freq = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)  # (hd/2,)",
          "    inv_freq = (theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)).bfloat16()  # (hd/2,)",
          ("bfloat16", "precision", "float32", "rounded", "angle", "frequenc", "dtype"),
          "keeps the inverse frequencies in bfloat16, as Mistral's rotary cache did under mixed precision "
          "(https://github.com/huggingface/transformers/issues/29496): each frequency is rounded to 8 bits and the "
          "error grows with the position; build the tables in float32"),
        # helper: called with its arguments swapped
        M("rope_cache", "    inv_freq = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)  # (hd/2,)",
          "    def _inv_freq(dim, base):  # one frequency per pair of features\n"
          "        return base ** (-torch.arange(0, dim, 2, dtype=torch.float32) / dim)\n"
          "    inv_freq = _inv_freq(theta, head_dim)  # (hd/2,)",
          ("swapped", "argument", "theta", "head_dim", "shape", "order"),
          "calls its own _inv_freq(dim, base) as _inv_freq(theta, head_dim): theta / 2 frequencies of the wrong "
          "base; call _inv_freq(head_dim, theta)"),
        # helper: the slice ends at T instead of start_pos + T
        M("apply_rope", "    cos = cos[start_pos:start_pos + T].to(x.dtype)  # (T, hd), broadcasts over (B, H)\n"
          "    sin = sin[start_pos:start_pos + T].to(x.dtype)",
          "    def _rows(table):  # the rows of positions start_pos .. start_pos + T - 1\n"
          "        return table[start_pos:T].to(x.dtype)\n"
          "    cos, sin = _rows(cos), _rows(sin)  # (T, hd), broadcast over (B, H)",
          START_POS + ("slice", "start_pos + t", "end"),
          "ends its row slice at T instead of start_pos + T: right from position 0, T - start_pos rows (or none) "
          "after it; slice start_pos:start_pos + T",
          regime="start_pos > 0"),
        # partial: the interleaved pairs split, joined as halves
        M("apply_rope", "    x1, x2 = x.chunk(2, dim=-1)\n    return torch.cat((-x2, x1), dim=-1)",
          "    x1, x2 = x[..., ::2], x[..., 1::2]  # the two halves of each pair\n    return torch.cat((-x2, x1), dim=-1)",
          ("interleav", "halves", "chunk", "even", "odd", "layout", "pairs", "rotate_half"),
          "splits x into even and odd features (the interleaved layout) but joins the results as halves: the "
          "features land in other places than they came from; split with chunk(2) to match the cache's halves"),
        # helper: split's argument is a chunk size, not a count
        M("interleaved_to_half", "    pairs = w.reshape(n_heads, hd // 2, 2, d_in)      # (nh, hd/2, 2, d_in): pair i of head h is rows 2i, 2i+1\n"
          "    return pairs.transpose(1, 2).reshape(rows, d_in)  # (nh, 2, hd/2, d_in): each head's evens, then its odds",
          "    def _evens_then_odds(head):  # one head's rows: 0, 2, 4, ..., then 1, 3, 5, ...\n"
          "        return torch.cat((head[0::2], head[1::2]))\n"
          "    return torch.cat([_evens_then_odds(head) for head in w.split(n_heads)])",
          ("split", "chunk", "per head", "head_dim", "blocks", "rows", "each head"),
          "cuts the rows with w.split(n_heads), whose argument is the size of each piece: pieces of n_heads rows, "
          "not one per head; use w.split(hd) or w.chunk(n_heads)"),
    ],
    "05": [
        # https://github.com/acids-ircam/ddsp_pytorch/issues/37
        M("Transformer", "        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layers))",
          "        self.blocks = nn.ModuleList([Block(config)] * config.n_layers)",
          ("same block", "shared", "one block", "list multiplication", "n_layers", "parameters", "same module", "identical"),
          "builds the layers as [Block(config)] * n_layers: list multiplication repeats one Block, so every layer "
          "shares its weights (as in https://github.com/acids-ircam/ddsp_pytorch/issues/37); build a new Block "
          "per layer"),
        # https://github.com/karpathy/ng-video-lecture/pull/9
        M("Transformer", "        self.o_proj = nn.Linear(config.n_heads * config.head_dim, config.d_model, bias=False)",
          "        self.o_proj = nn.Linear(config.d_model, config.d_model, bias=False)",
          ("o_proj", "head_dim", "n_heads * head_dim", "in_features", "shape", "d_model"),
          "sizes o_proj's input as d_model, which equals n_heads · head_dim only when head_dim is d_model / n_heads "
          "(the assumption https://github.com/karpathy/ng-video-lecture/pull/9 removed); its input is "
          "n_heads · head_dim",
          regime="a head_dim other than d_model / n_heads"),
        # https://github.com/lucidrains/MEGABYTE-pytorch/issues/13
        M("Transformer", "        self.k_proj = nn.Linear(config.d_model, config.n_kv_heads * config.head_dim, bias=False)",
          "        self.k_proj = nn.Linear(config.d_model, config.head_dim, bias=False)",
          ("k_proj", "n_kv_heads", "one head", "single", "shape", "kv heads"),
          "sizes k_proj for a single key head (head_dim outputs), as the attention of "
          "https://github.com/lucidrains/MEGABYTE-pytorch/issues/13 did: with more than one kv head the keys cannot "
          "be split; use n_kv_heads · head_dim",
          regime="more than one kv head"),
        # module: one norm object where each block needs two
        M("Transformer", "        self.mlp_norm = RMSNorm(config.d_model, config.norm_eps)",
          "        self.mlp_norm = self.attn_norm  # one norm, read before both branches",
          ("mlp_norm", "shared", "same norm", "one norm", "parameters", "attn_norm", "gain"),
          "makes mlp_norm the same module as attn_norm: the block has one gain where it needs two, and a "
          "checkpoint's mlp_norm.weight has nowhere to go; build a second RMSNorm"),
        # helper: the block's layer_idx left at its default
        M("Transformer", "            x = block(x, self.rope_cos, self.rope_sin, cache, i)",
          "            x = block(x, self.rope_cos, self.rope_sin, cache)",
          ("layer_idx", "layer 0", "cache", "every layer", "same layer", "index"),
          "calls each block without its index, so layer_idx keeps its default 0: with a cache every layer writes "
          "and reads layer 0's keys and values; pass i",
          regime="a KV cache"),
        # helper: called with branch and norm in each other's places
        M("pre_norm_block", "    x = x + attn(attn_norm(x))  # the branch reads a normalised copy; the stream stays a sum\n"
          "    x = x + mlp(mlp_norm(x))    # the MLP reads the stream after attention has written to it",
          "    def _residual(stream, branch, norm):  # stream + branch(norm(stream))\n"
          "        return stream + branch(norm(stream))\n"
          "    x = _residual(x, attn, attn_norm)\n"
          "    x = _residual(x, mlp_norm, mlp)  # the MLP reads the stream after attention",
          ("mlp_norm", "order", "norm after", "swapped", "mlp(mlp_norm", "argument"),
          "calls its own _residual(stream, branch, norm) with the MLP's norm and branch swapped: the stream gets "
          "mlp_norm(mlp(x)); call _residual(x, mlp, mlp_norm)"),
        # helper: the rounding multiple left at Llama's default
        M("swiglu_hidden", "    return multiple * math.ceil(8 * d_model / 3 / multiple)",
          "    def _round_up(n, to=256):  # the next multiple of `to` at or above n (Llama's multiple_of)\n"
          "        return to * math.ceil(n / to)\n"
          "    return _round_up(8 * d_model / 3)",
          ("multiple", "256", "rounded", "round up", "argument"),
          "rounds with a helper whose multiple defaults to Llama's 256 and never passes `multiple`: every size "
          "is a multiple of 256; pass multiple",
          regime="a multiple other than 256"),
        # helper: the nonlinearity on the up branch
        M("swiglu", "    gate = F.silu(x @ w_gate.T)  # (B, T, d_ff): the nonlinearity lives on the gate only\n"
          "    up = x @ w_up.T              # (B, T, d_ff): linear",
          "    def _swish(a):  # a · sigmoid(a), SiLU written out\n"
          "        return a * torch.sigmoid(a)\n"
          "    gate, up = x @ w_gate.T, _swish(x @ w_up.T)  # (B, T, d_ff) each",
          ("gate", "up", "silu", "w_gate", "w_up", "nonlinearity", "swapped"),
          "applies its SiLU to the up projection and leaves the gate linear: the two branches trade roles; "
          "apply _swish to x @ w_gate.T"),
    ],
    "06": [
        # helper: the caller relies on the helper's float32 default
        M("kv_cache_bytes", "    return per_position * seq_len * batch_size * dtype.itemsize",
          "    def _bytes(n_numbers, dtype=torch.float32):  # numbers -> bytes\n"
          "        return n_numbers * dtype.itemsize\n"
          "    return _bytes(per_position * seq_len * batch_size)",
          ("dtype", "itemsize", "float32", "4 bytes", "bfloat16", "bytes per number", "default"),
          "converts with a helper whose dtype defaults to float32 and never passes dtype: every cache is counted "
          "at 4 bytes a number; pass dtype",
          regime="a dtype other than float32"),
        # accounting: the queries counted as cached
        M("kv_cache_bytes", "    per_position = 2 * config.n_layers * config.n_kv_heads * config.head_dim  # K and V, in every block",
          "    per_position = config.n_layers * (config.n_heads + 2 * config.n_kv_heads) * config.head_dim  # Q, K and V",
          ("queries", "q", "only k and v", "k and v", "n_heads", "cached"),
          "counts the queries in the cache too: a decoding step never reads an old query, only K and V are kept; "
          "leave the n_heads term out"),
        # helper: called with the values' arguments swapped
        M("cache_update", "    k_all = torch.cat((past_k, k), dim=2)  # positions are axis 2: the past first, then the new tokens\n"
          "    v_all = torch.cat((past_v, v), dim=2)",
          "    def _append(past, new):  # along the positions axis: the past first\n"
          "        return torch.cat((past, new), dim=2)\n"
          "    k_all, v_all = _append(past_k, k), _append(v, past_v)",
          ("order", "values", "v_all", "past first", "new values first", "argument", "swapped"),
          "calls its own _append(past, new) as _append(v, past_v) for the values: the new values go in front of "
          "the cached ones while the keys stay in order; call _append(past_v, v)"),
        # helper: the mask's two lengths in each other's places
        M("attention_step", "    mask = tinylm.causal_mask(T, start + T).to(x.device)  # (T, start + T), bottom-right aligned",
          "    mask = tinylm.causal_mask(start + T, T).to(x.device)  # queries by keys",
          ("causal_mask", "q_len", "kv_len", "shape", "swapped", "argument", "(t, start + t)"),
          "calls causal_mask(start + T, T), the key count first: the same square mask on the prefill, a "
          "(start + T, T) mask that fits no score matrix once the cache holds positions; call "
          "causal_mask(T, start + T)",
          regime="a step after the prefill (start > 0)"),
        # partial: q and k turned alike, so the new tokens agree with each other and not with the cache
        M("attention_step", "    q = tinylm.apply_rope(q, cos, sin, start_pos=start)  # the new tokens sit at start .. start + T - 1\n"
          "    k = tinylm.apply_rope(k, cos, sin, start_pos=start)",
          "    q = tinylm.apply_rope(q, cos, sin)  # q and k turned alike: only their distance enters the scores\n"
          "    k = tinylm.apply_rope(k, cos, sin)",
          START_POS + ("position 0", "rotat", "cached keys"),
          "rotates the new queries and keys from position 0, reasoning that only their distance matters: among "
          "themselves it does, but the cached keys sit at their true positions; rotate at start_pos=start",
          regime="a step after the prefill (start > 0)"),
        # helper: (B, T, n·hd) viewed straight into (B, n, T, hd)
        M("attention_step", "    q = attn.q_proj(x).view(B, T, attn.n_heads, attn.head_dim).transpose(1, 2)     # (B, nh, T, hd)\n"
          "    k = attn.k_proj(x).view(B, T, attn.n_kv_heads, attn.head_dim).transpose(1, 2)  # (B, n_kv, T, hd)\n"
          "    v = attn.v_proj(x).view(B, T, attn.n_kv_heads, attn.head_dim).transpose(1, 2)  # (B, n_kv, T, hd)",
          "    def _heads(proj, n):  # (B, T, n·hd) -> (B, n, T, hd)\n"
          "        return proj(x).view(B, n, T, attn.head_dim)\n"
          "    q = _heads(attn.q_proj, attn.n_heads)\n"
          "    k, v = _heads(attn.k_proj, attn.n_kv_heads), _heads(attn.v_proj, attn.n_kv_heads)",
          ("transpose", "view", "layout", "heads", "positions", "mixes"),
          "views the projections straight into (B, n, T, hd) in its helper: without (B, T, n, hd) and a "
          "transpose the heads hold pieces of several positions; view (B, T, n, hd), then transpose(1, 2)"),
        # partial: right for a batch of one
        M("generate_greedy", "    with torch.no_grad():                           # decoding never backpropagates\n"
          "        for _ in range(max_new_tokens):\n"
          "            logits = model(step_input, cache=cache)[:, -1]      # (B, V): only the last position predicts\n"
          "            next_id = logits.argmax(dim=-1, keepdim=True)       # (B, 1)",
          "    def _step(ids):  # one pass with the cache -> the greedy next ids\n"
          "        return model(ids, cache=cache)[:, -1].argmax(dim=-1).unsqueeze(0)\n"
          "    with torch.no_grad():                           # decoding never backpropagates\n"
          "        for _ in range(max_new_tokens):\n"
          "            next_id = _step(step_input)                         # (B, 1)",
          BATCH_OF_ONE + ("unsqueeze", "(1, b)", "shape"),
          "gives its step's (B,) ids the new axis in front, (1, B): a batch of one cannot tell, two rows do; "
          "unsqueeze(-1)",
          regime="a batch of more than one"),
        # partial: an off-by-one in two places that cancels for the first new token only
        M("generate_left_padded", LEFT_PADDED, LEFT_PADDED
          .replace("(mask.long().cumsum(-1) - 1).clamp(min=0)              # (B, T): 0 at each row's first real token",
                   "mask.long().cumsum(-1)                                  # (B, T): 1 at each row's first real token")
          .replace("positions[:, -1:] + 1    # (B, 1) each: one past the row's last position",
                   "positions[:, -1:]        # (B, 1) each: the prompt already counts from 1"),
          ("position", "off by one", "off-by-one", "cumsum", "- 1", "repeated", "same position"),
          "counts the prompt's positions from 1 and, to make up for it, gives each new token the row's last "
          "position without + 1: the first new token lands where it belongs, every later one repeats that "
          "position; count from 0 and add 1 per step",
          regime="more than one new token"),
    ],
    "07": [
        # https://github.com/huggingface/candle/issues/1528
        M("repeat_kv", "    return x.reshape(B, n_kv * n_rep, T, hd)          # (B, n_kv * n_rep, T, hd): groups stay contiguous",
          "    return x.reshape(B, n_kv, n_rep, T, hd)          # the copies in place",
          ("shape", "5", "dimensions", "n_kv * n_rep", "reshape", "4-d", "merge"),
          "reshapes to the expanded shape instead of merging the kv and copy axes, as candle's llama example did "
          "(https://github.com/huggingface/candle/issues/1528): a 5-d tensor comes back; reshape to "
          "(B, n_kv * n_rep, T, hd)"),
        # partial: right for one kv head
        M("repeat_kv", "    x = x[:, :, None].expand(B, n_kv, n_rep, T, hd)  # (B, n_kv, n_rep, T, hd): a view, copies of each kv head side by side\n"
          "    return x.reshape(B, n_kv * n_rep, T, hd)          # (B, n_kv * n_rep, T, hd): groups stay contiguous",
          "    return x.expand(B, n_kv * n_rep, T, hd)  # a view: the kv heads broadcast to every query head",
          ("expand", "one kv head", "singleton", "size 1", "n_kv", "kv heads", "broadcast"),
          "expands the head axis itself: that works only while it has size 1 (one kv head, MQA); with more kv "
          "heads expand refuses; insert a new axis, expand it, then merge",
          regime="more than one kv head"),
        # helper: the repeat count taken as n_kv_heads
        M("gqa_step", "    y = F.scaled_dot_product_attention(q, repeat_kv(k_all, n_rep), repeat_kv(v_all, n_rep), attn_mask=mask)",
          "    def _repeat(t):  # each kv head once per query head of its group\n"
          "        return repeat_kv(t, attn.n_kv_heads)\n"
          "    y = F.scaled_dot_product_attention(q, _repeat(k_all), _repeat(v_all), attn_mask=mask)",
          ("n_rep", "n_kv_heads", "n_heads // n_kv_heads", "repeat", "group", "heads"),
          "repeats each kv head n_kv_heads times in its helper: the count is n_heads // n_kv_heads, which equals "
          "n_kv_heads only when n_heads = n_kv_heads² (4 heads, 2 kv heads); use n_rep",
          regime="n_heads other than n_kv_heads²"),
        # partial: the repeat count read off the positions axis
        M("gqa_attention", "    n_rep = q.shape[1] // k.shape[1]",
          "    n_rep = q.shape[2] // k.shape[2]",
          ("n_rep", "axis", "heads", "shape[1]", "positions", "group"),
          "reads the head counts off axis 2, the positions: n_rep is 1 and the kv heads are never repeated; "
          "SDPA broadcasts a single kv head, so MQA still works; use axis 1",
          regime="more than one kv head"),
        # accounting: the MLP counted with a plain MLP's two matrices
        M("decode_bytes_per_token", "    per_block = attention + 3 * d * config.d_ff + 2 * d                       # SwiGLU's three matrices, two norms",
          "    per_block = attention + 2 * d * config.d_ff + 2 * d                       # the MLP's matrices, two norms",
          ("swiglu", "three", "gate", "d_ff", "mlp", "weights"),
          "counts two MLP matrices (up and down) per block: SwiGLU has three, the gate too; count 3 · d · d_ff"),
    ],
    "08": [
        # partial: right for one row
        M("top_k_filter", "    kth = logits.topk(k, dim=-1).values[..., -1:]          # (..., 1): the k-th largest value",
          "    kth = logits.topk(k, dim=-1).values[..., -1]           # the k-th largest value of each row",
          BATCH_OF_ONE + ("keepdim", "broadcast", "(..., 1)", "shape"),
          "drops the last axis of the k-th values: a row of V logits compared with a (B,) vector broadcasts only "
          "for one row; keep the axis ([..., -1:])",
          regime="more than one row"),
        # helper: the cumulative mass over the batch axis
        M("top_p_filter", "    mass_before = probs.cumsum(dim=-1) - probs                    # mass of the strictly more likely tokens\n"
          "    drop_sorted = mass_before >= p                                # the crossing token has mass_before < p",
          "    def _kept(sorted_probs, p):  # True for the tokens of the nucleus, in sorted order\n"
          "        return sorted_probs.cumsum(dim=0) - sorted_probs < p\n"
          "    drop_sorted = ~_kept(probs, p)",
          ("cumsum", "dim", "axis", "rows", "batch", "vocabulary", "cumulative"),
          "accumulates the mass along dim=0 in its helper, across the rows of the batch: for one row nothing is "
          "ever dropped, for several each row reads the others; cumsum over dim=-1",
          regime=""),
        # numerics: the softmax written out without the row maximum
        M("top_p_filter", "    probs = sorted_logits.softmax(dim=-1)",
          "    probs = sorted_logits.exp() / sorted_logits.exp().sum(dim=-1, keepdim=True)",
          ("overflow", "nan", "inf", "exp", "max", "stable", "softmax", "large logits"),
          "writes the softmax as exp / sum: logits near 100 overflow float32's exp to inf and give nan; subtract "
          "the row maximum or call softmax",
          regime="large logits (e.g. logits + 100)"),
        # helper: the caller relies on the helper's generator default
        M("sample_next", "    return torch.multinomial(probs, num_samples=1, generator=generator).squeeze(-1)  # (B, 1) -> (B,)",
          "    def _draw(p, gen=None):  # one id per row, drawn from p\n"
          "        return torch.multinomial(p, num_samples=1, generator=gen).squeeze(-1)\n"
          "    return _draw(probs)  # (B,)",
          ("generator", "seed", "reproduc", "global rng", "random state", "default"),
          "draws through a helper whose generator defaults to None and never passes the caller's: the global RNG "
          "decides and a seeded generator changes nothing; pass generator"),
        # https://github.com/pytorch/pytorch/issues/5908
        M("generate", "        model.train(was_training)                          # give the caller back the mode it had",
          "        model.training = was_training                      # give the caller back the mode it had",
          ("submodule", "train(", "children", "training attribute", "mode", "eval", "dropout"),
          "restores the mode by assigning model.training: that flag is the outer module's only, the submodules "
          "stay in eval mode (the trap https://github.com/pytorch/pytorch/issues/5908 is about); call "
          "model.train(was_training)",
          regime="a model with submodules handed over in train mode"),
        # module: the train flag read from grad mode
        M("generate", "    was_training = model.training\n",
          "    was_training = torch.is_grad_enabled()                  # the caller's mode\n",
          ("was_training", "grad", "train mode", "eval mode", "is_grad_enabled", "mode", "restore"),
          "saves torch.is_grad_enabled() as the mode to restore: autograd's switch is not the module's train "
          "flag, so a model handed over in eval mode comes back in train mode; read model.training",
          regime="a model handed over in eval mode"),
        # partial: the temperature applied twice, right at 1 and at 0
        M("generate", "                next_id = sample_next(logits, temperature, top_k, top_p, generator)  # (B,)",
          "                scaled = logits / temperature if temperature else logits\n"
          "                next_id = sample_next(scaled, temperature, top_k, top_p, generator)  # (B,)",
          ("temperature", "twice", "squared", "t²", "sample_next"),
          "divides the logits by the temperature before handing them to sample_next, which divides again: the "
          "distribution is tempered by T²; pass the raw logits",
          regime="a temperature other than 0 and 1"),
    ],
    "09": [
        # https://github.com/ShusenTang/Dive-into-DL-PyTorch/issues/101
        M("train_step", "    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)  # global gradient norm <= grad_clip",
          "    def _clip(params, max_norm):  # scale every gradient by max_norm / global norm when it is larger\n"
          "        total = torch.sqrt(sum(p.grad.pow(2).sum() for p in params if p.grad is not None))\n"
          "        if total > max_norm:\n"
          "            for p in params:\n"
          "                if p.grad is not None:\n"
          "                    p.grad.mul_(max_norm / total)\n"
          "    _clip(model.parameters(), grad_clip)  # global gradient norm <= grad_clip",
          ("generator", "clip", "exhausted", "not clipped", "norm", "list(", "iterat"),
          "clips in its own helper that walks the parameters twice but is handed model.parameters(), a generator "
          "the first loop exhausts: nothing is scaled (the d2l bug of "
          "https://github.com/ShusenTang/Dive-into-DL-PyTorch/issues/101); pass list(model.parameters())",
          regime="a gradient norm above grad_clip"),
        # https://github.com/huggingface/transformers/issues/35203
        M("train_step_accumulated", "        (summed / n_tokens).backward()                                # .grad += this micro-batch's share",
          "        (summed / int((y != -100).sum()) / len(micro_batches)).backward()  # its mean, one share of the step",
          ("n_tokens", "whole batch", "micro-batch", "token", "weight", "mean of means", "equal"),
          "divides each micro-batch's sum by its own token count and the count of micro-batches (the per-micro-batch "
          "normalisation https://github.com/huggingface/transformers/issues/35203 asks for): right only when "
          "every micro-batch scores as many tokens; divide by n_tokens",
          regime="micro-batches that score different numbers of tokens"),
        # helper: one flattening helper for logits and targets
        M("lm_loss", "    return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)  # (B*T, V) vs (B*T,)",
          "    def _flat(t):  # merge batch and positions\n"
          "        return t.reshape(-1, t.shape[-1])\n"
          "    return F.cross_entropy(_flat(logits), _flat(targets), ignore_index=-100)  # (B*T, V) vs (B*T,)",
          ("targets", "shape", "flatten", "(b*t,)", "1-d", "reshape"),
          "flattens the targets with the helper written for the logits: (B, T) targets stay (B, T), not (B*T,); "
          "flatten them to one axis"),
        # https://github.com/pytorch/pytorch/issues/1620
        M("lm_loss", "    return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)  # (B*T, V) vs (B*T,)",
          "    log_probs = logits.flatten(0, 1).softmax(dim=-1).log()  # (B*T, V)\n"
          "    return F.nll_loss(log_probs, targets.flatten(), ignore_index=-100)",
          ("log_softmax", "underflow", "-inf", "inf", "log(softmax", "numerically", "nan"),
          "takes log(softmax(logits)): a probability that underflows to 0 gives log 0 = -inf and an infinite loss "
          "(https://github.com/pytorch/pytorch/issues/1620); use log_softmax or cross_entropy",
          regime="large logits (e.g. x 200)"),
        # module: the mode set on the outer module's flag only
        M("train_step", "    model.train()                                # dropout on, whatever mode the caller left",
          "    model.training = True                        # dropout on, whatever mode the caller left",
          ("train()", "submodule", "children", "training attribute", "mode", "dropout", "eval"),
          "sets model.training = True: only the outer module's flag changes, its layers stay in eval mode and "
          "dropout stays off; call model.train()",
          regime="a model with submodules handed over in eval mode"),
        # partial: a one-based step shifted in warmup and decay alike
        M("lr_schedule", "    if step < warmup_steps:\n"
          "        return max_lr * (step + 1) / warmup_steps\n"
          "    progress = (step - warmup_steps) / max(1, total_steps - 1 - warmup_steps)  # 0 -> 1 over the decay",
          "    s = step + 1  # count steps from 1\n"
          "    if s <= warmup_steps:\n"
          "        return max_lr * s / warmup_steps\n"
          "    progress = (s - warmup_steps) / max(1, total_steps - warmup_steps)  # 0 -> 1 over the decay",
          ("progress", "off by one", "off-by-one", "decay", "first decay step", "max_lr", "one step"),
          "counts steps from 1 in both branches: the warmup comes out right and the last step still reaches "
          "min_lr, but the decay starts one step late (its first step is already below max_lr); use the 0-based "
          "step in the decay",
          regime=""),
        # helper: called with the window's length one short
        M("get_batch", "    idx = starts[:, None] + torch.arange(seq_len + 1)                                # (B, T + 1) positions",
          "    def _window_ids(first, length):  # positions first .. first + length - 1 of each row\n"
          "        return first[:, None] + torch.arange(length)\n"
          "    idx = _window_ids(starts, seq_len)  # (B, T) positions",
          ("seq_len + 1", "window", "shape", "one short", "t + 1", "seq_len"),
          "asks its own _window_ids for seq_len positions: x and y need a window of seq_len + 1, so both come "
          "out one token short; ask for seq_len + 1"),
        # accounting: the head's matmul left out
        M("train_step_costs", "    matmul_weights = L * per_block + head",
          "    matmul_weights = L * per_block",
          ("head", "lm_head", "v * d", "vocab", "flops", "weights"),
          "leaves the head out of the weights that multiply: its (d, V) matmul, the largest of a small model, "
          "is missing from the FLOPs and its matrix from the bytes; add V · d"),
    ],
    "10": [
        # module: the mode read after it was changed
        M("evaluate", "    was_training = model.training\n"
          "    model.eval()                                             # dropout off while measuring",
          "    model.eval()                                             # dropout off while measuring\n"
          "    was_training = model.training",
          ("was_training", "train mode", "order", "before", "mode", "restore"),
          "reads model.training after model.eval(): the saved mode is always False, so a model handed over in "
          "train mode comes back in eval mode; read it first",
          regime="a model handed over in train mode"),
        # helper: returns its pair in the other order than the caller unpacks
        M("evaluate", EVAL_LOOP, SCORED + EVAL_LOOP.replace(
            "s, n = nll_sum_and_count(model(x.to(dev)), y.to(dev))\n", "s, n = _scored(x, y)\n"),
          ("order", "swapped", "unpack", "count", "sum", "loss"),
          "writes a helper that returns (count, NLL) and unpacks it in nll_sum_and_count's order (s, n): the "
          "loss comes out as tokens over NLL; unpack n, s",
          regime=""),
        # partial: the pair ids reversed, and so the lookup, but the normaliser still over the rows
        M("bigram_nll", "    counts = torch.bincount(train[:-1] * 256 + train[1:], minlength=256 * 256).view(256, 256).double()  # [prev, next]\n"
          "    probs = (counts + alpha) / (counts.sum(dim=1, keepdim=True) + 256 * alpha)                         # rows sum to 1\n"
          "    return -probs.log()[val[:-1], val[1:]].mean().item()",
          "    def _pair_ids(t):  # one id per neighbouring pair\n"
          "        return t[1:] * 256 + t[:-1]\n"
          "    counts = torch.bincount(_pair_ids(train), minlength=256 * 256).view(256, 256).double()  # [next, prev]\n"
          "    probs = (counts + alpha) / (counts.sum(dim=1, keepdim=True) + 256 * alpha)                         # rows sum to 1\n"
          "    return -probs.log()[val[1:], val[:-1]].mean().item()",
          ("p(prev | next)", "conditional", "normalis", "normaliz", "rows", "previous", "transpos", "axis"),
          "indexes its pair ids [next, prev], and reads them back the same way, but still normalises each row: "
          "that is P(previous | next); index [prev, next] (or normalise the columns)"),
        # accounting: the smoothing added to the row total once
        M("bigram_nll", "    probs = (counts + alpha) / (counts.sum(dim=1, keepdim=True) + 256 * alpha)                         # rows sum to 1",
          "    probs = (counts + alpha) / (counts.sum(dim=1, keepdim=True) + alpha)                               # smoothed",
          ("256 * alpha", "sum to 1", "normalis", "normaliz", "alpha", "smoothing"),
          "adds alpha to every count but only once to the row's total: the 256 smoothed counts sum to more than "
          "the total, the probabilities to more than 1; add 256 · alpha"),
        M("bigram_nll", "minlength=256 * 256)", ")",
          ("minlength", "65536", "256 * 256", "shape", "view", "largest pair"),
          "counts the pairs without minlength: bincount stops at the largest pair id that occurs, and the view "
          "as 256 x 256 fails unless byte pair (255, 255) is in the data; pass minlength=256 * 256"),
        # numerics: the upcast after the log-softmax
        M("nll_sum_and_count", "    nll = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=ignore_index,\n"
          "                          reduction=\"sum\")                       # (B*T, V) vs (B*T,) -> scalar",
          "    log_probs = F.log_softmax(logits.flatten(0, 1), dim=-1).float()  # (B*T, V), then float32 for the sum\n"
          "    nll = F.nll_loss(log_probs, targets.flatten(), ignore_index=ignore_index, reduction=\"sum\")",
          ("float32", "bfloat16", "upcast", "precision", "log_softmax", "rounded", "before"),
          "upcasts after the log-softmax: bfloat16 logits get their log-probabilities rounded to 8 bits first, "
          "and the sum carries every rounding; upcast the logits",
          regime="bfloat16 logits"),
        # helper: the padding id left at the helper's default
        M("nll_sum_and_count", "    count = int((targets != ignore_index).sum())                 # padding is not a token",
          "    def _n_scored(t, pad=-100):  # targets that are not padding\n"
          "        return int((t != pad).sum())\n"
          "    count = _n_scored(targets)                                   # padding is not a token",
          ("ignore_index", "count", "padding", "-100", "default"),
          "counts with a helper whose padding id defaults to -100 and never passes ignore_index: another padding "
          "id is left out of the sum but counted; pass ignore_index",
          regime="an ignore_index other than -100"),
    ],
}

# Edits that compute what the solution computes, another way (most are the helpers above without their mistake):
# a check must pass each.
SAME = [
    ("01", M("one_hot_embed", "    one_hot = F.one_hot(ids, num_classes=weight.shape[0]).to(weight.dtype)  # (..., V)",
             "    def _one_hot(i, n, dtype=torch.float32):  # one row per id: a comparison with every id of the table\n"
             "        return (i[..., None] == torch.arange(n, device=i.device)).to(dtype)\n"
             "    one_hot = _one_hot(ids, weight.shape[0], weight.dtype)  # (..., V)",
             (), "the one-hot helper, given the table's dtype")),
    ("02", M("rms_norm", "    inv_rms = torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)  # (..., 1): one statistic per token",
             "    def _inv_rms(t, eps=1e-5):  # 1 / sqrt(mean square + eps), one per token\n"
             "        return torch.rsqrt(t.pow(2).mean(dim=-1, keepdim=True) + eps)\n"
             "    inv_rms = _inv_rms(x32, eps)  # (..., 1)",
             (), "the statistic in a helper, eps passed on")),
    ("03", M("causal_attention", "    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])     # (B, H, Tq, Tk)",
             "    def _scores(queries, keys):  # scaled dot products, (B, H, Tq, Tk)\n"
             "        return queries @ keys.transpose(-2, -1) / math.sqrt(queries.shape[-1])\n"
             "    scores = _scores(q, k)",
             (), "the scores in a helper, called in order")),
    ("03", M("causal_mask", "    allowed = torch.ones(q_len, kv_len, dtype=torch.bool)\n"
             "    return allowed.tril(diagonal=kv_len - q_len)  # query i is position kv_len - q_len + i",
             "    def _allowed(rows, cols, offset=0):  # key j visible to query i when j <= i + offset\n"
             "        return torch.arange(cols)[None, :] <= torch.arange(rows)[:, None] + offset\n"
             "    return _allowed(q_len, kv_len, kv_len - q_len)",
             (), "the mask from a comparison helper, offset passed")),
    ("03", M("causal_attention", "    weights = scores.softmax(dim=-1)                                 # over keys: each row sums to 1",
             "    def _softmax(s):  # exp of the scores less each row's maximum, normalised over the keys\n"
             "        e = (s - s.amax(dim=-1, keepdim=True)).exp()\n"
             "        return e / e.sum(dim=-1, keepdim=True)\n"
             "    weights = _softmax(scores)",
             (), "the softmax written out with the row maximum subtracted")),
    ("04", M("rope_cache", "    inv_freq = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)  # (hd/2,)",
             "    def _inv_freq(dim, base):  # one frequency per pair of features\n"
             "        return base ** (-torch.arange(0, dim, 2, dtype=torch.float32) / dim)\n"
             "    inv_freq = _inv_freq(head_dim, theta)  # (hd/2,)",
             (), "the frequencies in a helper, called in order")),
    ("04", M("apply_rope", "    cos = cos[start_pos:start_pos + T].to(x.dtype)  # (T, hd), broadcasts over (B, H)\n"
             "    sin = sin[start_pos:start_pos + T].to(x.dtype)",
             "    def _rows(table):  # the rows of positions start_pos .. start_pos + T - 1\n"
             "        return table.narrow(0, start_pos, T).to(x.dtype)\n"
             "    cos, sin = _rows(cos), _rows(sin)  # (T, hd), broadcast over (B, H)",
             (), "the rows taken with narrow(0, start_pos, T)")),
    ("04", M("interleaved_to_half", "    pairs = w.reshape(n_heads, hd // 2, 2, d_in)      # (nh, hd/2, 2, d_in): pair i of head h is rows 2i, 2i+1\n"
             "    return pairs.transpose(1, 2).reshape(rows, d_in)  # (nh, 2, hd/2, d_in): each head's evens, then its odds",
             "    def _evens_then_odds(head):  # one head's rows: 0, 2, 4, ..., then 1, 3, 5, ...\n"
             "        return torch.cat((head[0::2], head[1::2]))\n"
             "    return torch.cat([_evens_then_odds(head) for head in w.split(hd)])",
             (), "the rows head by head, w.split(hd)")),
    # q and k share start_pos and their length here: RoPE's scores depend on the distance only
    ("04", M("rotary_attention", "    q = apply_rope(q, cos, sin, start_pos)  # position enters the scores only\n"
             "    k = apply_rope(k, cos, sin, start_pos)",
             "    def _rotate(t, pos=0):  # t at positions pos .. pos + T - 1\n"
             "        return apply_rope(t, cos, sin, pos)\n"
             "    q, k = _rotate(q), _rotate(k)  # both from 0: the scores see only the distance",
             (), "q and k both rotated from position 0: equal lengths, equal offsets, the same distances")),
    ("05", M("pre_norm_block", "    x = x + attn(attn_norm(x))  # the branch reads a normalised copy; the stream stays a sum\n"
             "    x = x + mlp(mlp_norm(x))    # the MLP reads the stream after attention has written to it",
             "    def _residual(stream, branch, norm):  # stream + branch(norm(stream))\n"
             "        return stream + branch(norm(stream))\n"
             "    x = _residual(x, attn, attn_norm)\n"
             "    x = _residual(x, mlp, mlp_norm)  # the MLP reads the stream after attention",
             (), "both residual steps through one helper, in order")),
    ("05", M("swiglu", "    gate = F.silu(x @ w_gate.T)  # (B, T, d_ff): the nonlinearity lives on the gate only\n"
             "    up = x @ w_up.T              # (B, T, d_ff): linear",
             "    def _swish(a):  # a · sigmoid(a), SiLU written out\n"
             "        return a * torch.sigmoid(a)\n"
             "    gate, up = _swish(x @ w_gate.T), x @ w_up.T  # (B, T, d_ff) each",
             (), "SiLU written out, on the gate")),
    ("06", M("generate_greedy", "    with torch.no_grad():                           # decoding never backpropagates\n"
             "        for _ in range(max_new_tokens):\n"
             "            logits = model(step_input, cache=cache)[:, -1]      # (B, V): only the last position predicts\n"
             "            next_id = logits.argmax(dim=-1, keepdim=True)       # (B, 1)",
             "    def _step(ids):  # one pass with the cache -> the greedy next ids\n"
             "        return model(ids, cache=cache)[:, -1].argmax(dim=-1).unsqueeze(-1)\n"
             "    with torch.no_grad():                           # decoding never backpropagates\n"
             "        for _ in range(max_new_tokens):\n"
             "            next_id = _step(step_input)                         # (B, 1)",
             (), "the decoding step in a helper, the new axis last")),
    ("07", M("gqa_step", "    y = F.scaled_dot_product_attention(q, repeat_kv(k_all, n_rep), repeat_kv(v_all, n_rep), attn_mask=mask)",
             "    def _repeat(t):  # each kv head once per query head of its group\n"
             "        return t.repeat_interleave(n_rep, dim=1)\n"
             "    y = F.scaled_dot_product_attention(q, _repeat(k_all), _repeat(v_all), attn_mask=mask)",
             (), "the kv heads repeated with repeat_interleave(n_rep, dim=1)")),
    ("08", M("top_p_filter", "    mass_before = probs.cumsum(dim=-1) - probs                    # mass of the strictly more likely tokens\n"
             "    drop_sorted = mass_before >= p                                # the crossing token has mass_before < p",
             "    def _kept(sorted_probs, p):  # True for the tokens of the nucleus, in sorted order\n"
             "        return sorted_probs.cumsum(dim=-1) - sorted_probs < p\n"
             "    drop_sorted = ~_kept(probs, p)",
             (), "the nucleus from a helper over the last axis")),
    ("08", M("sample_next", "    return torch.multinomial(probs, num_samples=1, generator=generator).squeeze(-1)  # (B, 1) -> (B,)",
             "    def _draw(p, gen=None):  # one id per row, drawn from p\n"
             "        return torch.multinomial(p, num_samples=1, generator=gen).squeeze(-1)\n"
             "    return _draw(probs, generator)  # (B,)",
             (), "the draw in a helper, the generator passed")),
    ("09", M("train_step", "    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)  # global gradient norm <= grad_clip",
             "    def _clip(params, max_norm):  # scale every gradient by max_norm / global norm when it is larger\n"
             "        total = torch.sqrt(sum(p.grad.pow(2).sum() for p in params if p.grad is not None))\n"
             "        if total > max_norm:\n"
             "            for p in params:\n"
             "                if p.grad is not None:\n"
             "                    p.grad.mul_(max_norm / total)\n"
             "    _clip(list(model.parameters()), grad_clip)  # global gradient norm <= grad_clip",
             (), "clipping by hand, the parameters handed over as a list")),
    ("09", M("lm_loss", "    return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)  # (B*T, V) vs (B*T,)",
             "    def _flat(t):  # merge batch and positions, keep any trailing axis\n"
             "        return t.reshape(-1, *t.shape[2:])\n"
             "    return F.cross_entropy(_flat(logits), _flat(targets), ignore_index=-100)  # (B*T, V) vs (B*T,)",
             (), "one flattening helper that keeps the trailing axes")),
    ("10", M("evaluate", EVAL_LOOP, SCORED + EVAL_LOOP.replace(
        "s, n = nll_sum_and_count(model(x.to(dev)), y.to(dev))\n", "n, s = _scored(x, y)\n"),
             (), "each batch through a helper that returns (count, NLL), unpacked in that order")),
]
