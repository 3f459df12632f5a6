"""A thirty-first held-out set of learner mistakes ("fresh31"), written without reading the checks: no file of
autograder/checks/ or tests/checks/, no autograder/diagnosis_*.py, no source of bench_diagnostics.py, no diagnosis
section of docs/benchmarks.md, no tests/course/test_docs.py and no other set's entries (unseen.py aside) were
opened; no check cell, notebook check or bench_diagnostics run, no entry tried against a check, no git log or show.

Opened or run. The brief, HELPER_RULES.md, mkwt.sh (cat); mkwt.sh fresh31. `ls` of the worktree root, benchmarks/,
benchmarks/mutations/ (file names), notebooks/, tinylm/; `wc -l` of the verify, duplicate and probe modules. Whole:
verify_unseen.py, heldout_duplicates.py, mutations/__init__.py, verify_heldout.py, unseen.py, unseen_probes.py,
unseen_probes_later.py, unseen_probes_fresh26.py to _fresh30.py; a grep of the def probe_ and EXTRA_PROBES lines of
unseen_probes_fresh*.py; fresh30.py's docstring only. tinylm: kv_cache.py, sampling.py 1-250, lr_at, def/class lines
of attention.py, model.py, training.py, evaluation.py, attention.py 1-60. Through notebook_cells: every answer and
setup cell (setups 04-10 in their last 1,800 characters), the check names only; the markdown of notebooks 06, 08, 09
(truncated in its middle by the terminal) and 10, the markdown lengths of all ten. pyproject's ruff section (none),
test_benchmarks.py 155-200, a grep of the four registration files for "fresh30" (only verify_unseen.py and
test_benchmarks.py hold it: SETS finds a module by itself). 14 searches of issue threads, 36 URLs grepped over
benchmarks/mutations/. Runs: heldout_duplicates --set fresh31 (6), verify_unseen --set fresh31 (5), the two fresh31
tests; torch's version; small scripts that dumped the answer cells and printed the solution's probe values.

Slips. Setup cells import autograder.checks names (check functions, learner_model helpers, HEAD_DIM_*_CASES) and
the markdown of 06, 08 and 09 says what some checks do. heldout_duplicates matched 3 of 73 first (generate reading
the mode after eval(), train_step's train() after the forward, kv_cache_bytes by element_size(), a SAME), then a clip
after optimizer.step(); all four were replaced by new entries. A str.replace inserted one mistake into SAME too;
verify_unseen flagged it and it was removed. 10 mistakes first changed no probe: unseen_probes_fresh31.py was
written for them (the mistakes were left as they were).

Focus, each mistake counted once. Loops that carry state (15): a cache reset inside the decode loop, a guard that
stops one step before a full cache, positions taken from the mask before it grows, attention_step and gqa_step
handing back the wrong cache, the final norm after every block, an RMSNorm gain cast in place by an earlier call, a
generator seeded at every call, generation from the newest token only or onto the prompt, tie then re-initialise, the
loss read after the step, zero_grad after the step, sums reset per batch, a first pass that empties an iterator.
Sizes at the edges (11): one head's (T, hd) for rotate_half, weights that are not square, a multiple of 1 or 2,
head_dim apart (twice), a bfloat16 cache, a single prompt, two kv heads, int8, (B, T, V) logits, a batch of padding.
Numerics (5): float32 logits and scores never cast back, softmax and SiLU written out with exp, top-p the same.
Whole answers in the learner's own style, one slip each (16): index_select + view, one-hot by scatter, two rms_norms,
std + eps, a mask by loop, heads by loop, a Block with h, a preallocated cache, the prefill before the loop, attention
with triu(), generate without finally, windows by slicing, NLL by log(softmax), an lr_schedule of its own, counts by
index_put_ (four of them numerics: float16, log 0, NaN row, float32 counts). Other (2): linspace exponents,
context_len + 1. Public threads (11, URL above the entry and in its reason): NVIDIA/Megatron-LM#535,
Mikyx-1/TinyLLM#17, pytorch/pytorch#192726 and #116349, QwenLM/Qwen#979, rasbt/LLMs-from-scratch#697,
ml-explore/mlx-lm#1377, huggingface/transformers#614, OpenRLHF/OpenRLHF#583, karpathy/nanochat#52,
mosaicml/composer#1516 (the mirror: there eval mode after the first micro-batch, here train mode).
SAME (17): index_select, an einsum head, sum / d, var_mean, a mask by arange, attention FLOPs for all heads, fused
causal SDPA, the row order as a list, integer ceiling, a · sigmoid(a), both cats in one generator, bytes per layer,
stack on axis 2, amin of the k largest, the running total divided as it goes, FLOPs as three passes, log after gather.

Counts: 60 mistakes (01: 4, 02: 4, 03: 4, 04: 4, 05: 6, 06: 10, 07: 6, 08: 7, 09: 9, 10: 6), 48 with a regime,
17 SAME, 11 public threads; `expect` holds words a check that found the mistake would likely say, `in_lists` stays
False. unseen_probes_fresh31.py adds the probes its docstring lists.
"""
from __future__ import annotations

from .unseen import Unseen as M

# the answers' own lines that whole rewrites replace
GREEDY = ("    cache.reset()                                   # stale positions from an earlier prompt would shift everything\n"
          "    idx, step_input = prompt, prompt                # prefill: the whole prompt in one pass\n"
          "    with torch.no_grad():                           # decoding never backpropagates\n"
          "        for _ in range(max_new_tokens):\n")
GREEDY_LOOP = ("            logits = model(step_input, cache=cache)[:, -1]      # (B, V): only the last position predicts\n"
               "            next_id = logits.argmax(dim=-1, keepdim=True)       # (B, 1)\n"
               "            idx = torch.cat((idx, next_id), dim=1)              # (B, T + 1)\n"
               "            step_input = next_id                                # decode: one new token per step\n"
               "    return idx\n")
EVAL_LOOP = ("    try:\n"
             "        with torch.no_grad():                                # no graph: memory stays flat\n"
             "            for x, y in batches:\n"
             "                s, n = nll_sum_and_count(model(x.to(dev)), y.to(dev))\n"
             "                total, count = total + s, count + n          # combine by tokens, not by batches\n"
             "    finally:\n"
             "        model.train(was_training)\n")
GENERATE = ("    was_training = model.training\n"
            "    model.eval()                                            # dropout off while generating\n"
            "    idx = prompt\n"
            "    try:\n"
            "        with torch.no_grad():\n"
            "            for _ in range(max_new_tokens):\n"
            "                logits = model(idx)[:, -1]                  # (B, V): the last position predicts the next token\n"
            "                next_id = sample_next(logits, temperature, top_k, top_p, generator)  # (B,)\n"
            "                idx = torch.cat((idx, next_id[:, None]), dim=1)                      # (B, T + 1)\n"
            "    finally:\n"
            "        model.train(was_training)                          # give the caller back the mode it had\n"
            "    return idx\n")
MICRO_STEP = ("        logits = model(x)                                             # (b, T, V)\n"
              '        summed = F.cross_entropy(logits.flatten(0, 1), y.flatten(), ignore_index=-100, reduction="sum")\n'
              "        (summed / n_tokens).backward()                                # .grad += this micro-batch's share\n"
              "        total += summed.item()\n")
ZERO_GRAD = "    optimizer.zero_grad(set_to_none=True)                             # once, before the first micro-batch\n"
ACCUMULATED_TAIL = (ZERO_GRAD + "    total = 0.0\n    for x, y in micro_batches:\n" + MICRO_STEP
                    + "    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)    # once: the whole batch's gradient\n"
                    + "    optimizer.step()                                                  # once\n")
NAN = ("nan", "not a number", "inf", "overflow", "underflow")

MUTATIONS = [
    # ---- 01
    ("01", M("embed", "    return weight[ids]  # advanced indexing: one row of weight per id, gradient flows to those rows",
             "    rows = weight.index_select(0, ids.flatten())     # (B*T, d): index_select takes one axis of ids\n"
             "    return rows.view(ids.shape[0], ids.shape[1], -1)  # back to (B, T, d)",
             ("shape", "flat ids", "(t,)", "one axis", "any shape", "view", "batch shape"),
             "looks rows up with index_select and views them back as (B, T, d): ids of one axis (or three) fail",
             regime="ids of one axis (T,), or of three")),
    ("01", M("one_hot_embed", "    one_hot = F.one_hot(ids, num_classes=weight.shape[0]).to(weight.dtype)  # (..., V)\n"
             "    return one_hot @ weight  # (..., V) @ (V, d) -> (..., d)",
             "    one_hot = torch.zeros(*ids.shape, weight.shape[0], dtype=weight.dtype)  # (..., V) of zeros\n"
             "    one_hot.scatter_(-1, ids.unsqueeze(-1), 1.0)                       # a 1 at each id\n"
             "    return one_hot @ weight",
             ("device", "cuda", "meta", "cpu", "same device"),
             "builds the one-hot rows by scatter into torch.zeros with the weight's dtype but not its device",
             regime="weight and ids on another device than the CPU")),
    ("01", M("tied_logits", "    return x @ weight.T  # (B, T, d) @ (d, V) -> (B, T, V)",
             "    return x.float() @ weight.float().T  # in float32 for accuracy: (B, T, V)",
             ("dtype", "float32", "bfloat16", "half", "precision"),
             "computes the logits in float32 for accuracy and never casts back: bfloat16 activations give float32 logits",
             regime="bfloat16 or float16 activations and table")),
    ("01", M("tie_weights", "    lm_head.weight = tok_emb.weight  # the same Parameter object, not a copy of its values",
             "    lm_head.weight = tok_emb.weight  # the same Parameter object, not a copy of its values\n"
             "    nn.init.normal_(lm_head.weight, std=0.02)  # the head's usual initialisation",
             ("values", "overwrit", "initialis", "initializ", "embedding's values", "changed"),
             "ties, then initialises the head as GPT-2 code does: the shared Parameter is the embedding, whose values are lost")),
    # ---- 02
    ("02", M("rms_norm", "    x32 = x.float()  # squares of fp16 values overflow above 256\n"
             "    inv_rms = torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)  # (..., 1): one statistic per token\n"
             "    return weight * (x32 * inv_rms).to(x.dtype)",
             "    ms = (x * x).mean(dim=-1, keepdim=True)  # mean square of each token\n"
             "    return weight * x / torch.sqrt(ms + eps)",
             ("float32", "overflow", "inf", "float16", "half", "upcast"),
             "writes the norm in one line in the input's own precision: float16 squares above 65504 are inf",
             regime="float16 input with entries above 256")),
    ("02", M("rms_norm", "    inv_rms = torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)  # (..., 1): one statistic per token\n"
             "    return weight * (x32 * inv_rms).to(x.dtype)",
             "    rms = x32.norm(dim=-1, keepdim=True) / x.shape[-1] ** 0.5  # the root of the mean square\n"
             "    return weight * (x32 / (rms + eps)).to(x.dtype)",
             ("eps", "epsilon", "square root", "sqrt", "small input", "near zero"),
             "takes the rms from the vector norm and adds eps to the root, not to the mean square under it",
             regime="tokens whose mean square is near or below eps")),
    ("02", M("RMSNorm", "        return rms_norm(x, self.weight, self.eps)",
             "        self.weight.data = self.weight.data.to(x.dtype)  # the gain in the input's precision\n"
             "        return rms_norm(x, self.weight, self.eps)",
             ("dtype", "float16", "half", "in place", "gain", "precision", "earlier call"),
             "casts its gain to the input's dtype in place: after one float16 call every later call uses a rounded gain",
             regime="a float16 call, then a float32 one")),
    ("02", M("layer_norm", "    centred = x - x.mean(dim=-1, keepdim=True)              # (..., d)\n"
             "    var = centred.pow(2).mean(dim=-1, keepdim=True)         # (..., 1): biased, divides by d\n"
             "    return weight * centred * torch.rsqrt(var + eps) + bias",
             "    mean = x.mean(dim=-1, keepdim=True)\n"
             "    std = x.std(dim=-1, keepdim=True, unbiased=False)  # biased, as LayerNorm\n"
             "    return weight * (x - mean) / (std + eps) + bias",
             ("eps", "epsilon", "square root", "sqrt", "standard deviation", "variance"),
             "divides by the biased standard deviation plus eps: eps belongs under the root, with the variance",
             regime="an eps that is not negligible against the spread")),
    # ---- 03
    ("03", M("causal_mask", "    allowed = torch.ones(q_len, kv_len, dtype=torch.bool)\n"
             "    return allowed.tril(diagonal=kv_len - q_len)  # query i is position kv_len - q_len + i",
             "    allowed = torch.zeros(q_len, kv_len, dtype=torch.bool)\n"
             "    for i in range(q_len):                      # query i is position kv_len - q_len + i\n"
             "        allowed[i, :kv_len - q_len + i] = True  # the keys before it\n"
             "    return allowed",
             ("diagonal", "itself", "own position", "empty row", "nan", "no key", "off by one"),
             "fills the mask row by row up to the key before the query: no query sees itself, the first row sees nothing")),
    ("03", M("causal_attention", "    weights = scores.softmax(dim=-1)                                 # over keys: each row sums to 1",
             "    weights = scores.exp() / scores.exp().sum(dim=-1, keepdim=True)  # softmax written out",
             NAN + ("max", "stable", "exp", "softmax"),
             "writes the softmax out without subtracting the row maximum: exp under- or overflows for large scores",
             regime="scores far from 0")),
    ("03", M("causal_attention", "    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])     # (B, H, Tq, Tk)",
             "    scores = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(q.shape[-1])  # float32 scores: a stable softmax",
             ("dtype", "bfloat16", "float32", "half", "precision"),
             "computes the scores in float32 for a stable softmax and multiplies the float32 weights by half-precision v",
             regime="bfloat16 or float16 q, k, v")),
    ("03", M("self_attention", "    q, k, v = (split_heads(F.linear(x, w), n_heads) for w in (w_q, w_k, w_v))  # each (B, H, T, hd)\n"
             "    y = causal_attention(q, k, v)                                              # (B, H, T, hd)\n"
             "    return F.linear(merge_heads(y), w_o)                                       # (B, T, d)",
             "    B, T, d = x.shape\n"
             "    hd = d // n_heads\n"
             "    q, k, v = x @ w_q.T, x @ w_k.T, x @ w_v.T                 # (B, T, d) each\n"
             "    heads = []\n"
             "    for h in range(n_heads):                                   # one head at a time\n"
             "        cols = slice(h * hd, (h + 1) * hd)\n"
             "        one = causal_attention(q[:, None, :, cols], k[:, None, :, cols], v[:, None, :, cols])  # (B, 1, T, hd)\n"
             "        heads.append(one.squeeze())                            # (B, T, hd)\n"
             "    return torch.cat(heads, dim=-1) @ w_o.T                    # (B, T, d)",
             ("batch of one", "shape", "squeeze", "batch size 1", "one position", "dimension"),
             "attends head by head and drops the head axis with squeeze(): a batch of one or a single position loses its axis too",
             regime="a batch of one, or a single position")),
    # ---- 04
    ("04", M("rope_cache", "    inv_freq = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)  # (hd/2,)",
             "    inv_freq = theta ** -torch.linspace(0, 1, head_dim // 2)  # (hd/2,): frequencies from 1 down to 1/theta",
             ("frequenc", "exponent", "2i/d", "inv_freq", "theta", "linspace"),
             "spreads the exponents over [0, 1] with linspace: the last pair turns at 1/theta, not theta^-(hd-2)/hd")),
    # https://github.com/NVIDIA/Megatron-LM/issues/535
    ("04", M("rope_cache", "    angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float32), inv_freq)      # (T, hd/2)",
             "    inv_freq = inv_freq.half()                                 # kept in the model's half precision\n"
             "    angles = torch.outer(torch.arange(max_seq_len).type_as(inv_freq), inv_freq).float()  # (T, hd/2)",
             ("precision", "float16", "half", "float32", "long sequence", "large position", "rounding"),
             "keeps inv_freq in float16 and casts the positions to it: angles in the hundreds lose their fraction "
             "(https://github.com/NVIDIA/Megatron-LM/issues/535)",
             regime="positions in the hundreds or more")),
    ("04", M("apply_rope", "    x1, x2 = x.chunk(2, dim=-1)",
             "    half = x.shape[3] // 2                       # (B, H, T, hd): features are axis 3\n"
             "    x1, x2 = x[..., :half], x[..., half:]",
             ("axis", "dim", "rank", "last axis", "one head", "shape", "-1"),
             "reads the feature size from axis 3: a tensor of another rank (one head's (T, hd)) fails",
             regime="a tensor of another rank than 4")),
    ("04", M("interleaved_to_half", "    hd = rows // n_heads",
             "    hd = d_in // n_heads                              # each head's rows: d_model / n_heads",
             ("rows", "d_in", "head_dim", "square", "kv heads", "shape"),
             "takes the head size from the columns (d_model / n_heads): right only for square q weights",
             regime="weights that are not square (k_proj with fewer kv heads, head_dim apart)")),
    # ---- 05
    ("05", M("swiglu", "    gate = F.silu(x @ w_gate.T)  # (B, T, d_ff): the nonlinearity lives on the gate only",
             "    a = x @ w_gate.T\n"
             "    gate = a * torch.exp(a) / (1 + torch.exp(a))  # silu(a) = a · sigmoid(a), written out",
             NAN + ("exp", "silu", "large input", "stable"),
             "writes SiLU out as a·e^a / (1 + e^a): e^a overflows above 88 and the quotient is inf / inf",
             regime="gate pre-activations above about 88")),
    ("05", M("swiglu_hidden", "    return multiple * math.ceil(8 * d_model / 3 / multiple)",
             "    return (8 * d_model // 3 + multiple - 1) // multiple * multiple  # integers only: round up to the multiple",
             ("round", "ceil", "floor", "8/3", "fraction", "multiple"),
             "rounds 8/3 · d_model down before rounding up to the multiple: a multiple of 1 or 2 loses the fraction",
             regime="a multiple of 1 or 2, 8/3 · d_model with a fraction")),
    ("05", M("param_counts", "    k_and_v = 2 * d * config.n_kv_heads * hd    # k_proj and v_proj: d -> n_kv_heads·hd each",
             "    k_and_v = 2 * d * d * config.n_kv_heads // config.n_heads  # k_proj and v_proj: a share n_kv / n_heads of q's",
             ("head_dim", "attention", "k_proj", "d_model / n_heads", "kv heads"),
             "sizes k and v as the share n_kv / n_heads of a d x d matrix: right only while head_dim = d_model / n_heads",
             regime="head_dim set apart from d_model / n_heads")),
    # https://github.com/Mikyx-1/TinyLLM/issues/17
    ("05", M("Transformer", "        y = causal_attention(q, k, v)                                       # (B, nh, T, hd)",
             "        if cache is None:\n"
             "            y = causal_attention(q, k, v)                                   # (B, nh, T, hd)\n"
             "        else:  # decoding: the new token may read every cached key, no mask needed\n"
             "            n_rep = self.n_heads // self.n_kv_heads\n"
             "            y = F.scaled_dot_product_attention(q, k.repeat_interleave(n_rep, 1), v.repeat_interleave(n_rep, 1))",
             ("mask", "causal", "prefill", "future", "cache", "cached"),
             "drops the causal mask whenever a cache is passed: right for one new token, but a prefill into the cache "
             "reads the future (https://github.com/Mikyx-1/TinyLLM/issues/17)",
             regime="a prompt of several tokens prefilled into a KV cache")),
    ("05", M("Transformer", "            x = block(x, self.rope_cos, self.rope_sin, cache, i)",
             "            x = self.norm(block(x, self.rope_cos, self.rope_sin, cache, i))  # keep the stream normalised",
             ("norm", "final norm", "every block", "residual stream", "post-norm", "once"),
             "normalises the stream after every block with the final norm: the residual stream is rescaled between blocks")),
    ("05", M("Transformer", "        x = x + self.attn(self.attn_norm(x), cos, sin, cache, layer_idx)  # the branch reads a normalised copy\n"
             "        return x + self.mlp(self.mlp_norm(x))",
             "        h = self.attn_norm(x)\n"
             "        x = h + self.attn(h, cos, sin, cache, layer_idx)   # attention's residual\n"
             "        h = self.mlp_norm(x)\n"
             "        return x + self.mlp(h)",
             ("residual", "normalised", "normalized", "skip", "stream", "attn_norm"),
             "names the normalised input h and adds attention's output to h: the residual carries the normalised stream")),
    # ---- 06
    # https://github.com/pytorch/pytorch/pull/192726
    ("06", M("kv_cache_bytes", "    return per_position * seq_len * batch_size * dtype.itemsize",
             "    return per_position * seq_len * batch_size * torch.finfo(dtype).bits // 8",
             ("int8", "integer", "finfo", "itemsize", "dtype", "quantis", "quantiz"),
             "takes the bytes per number from torch.finfo(dtype).bits, which raises for integer dtypes "
             "(https://github.com/pytorch/pytorch/pull/192726)",
             regime="an integer dtype (an int8 cache)")),
    ("06", M("cache_update", "    k_all = torch.cat((past_k, k), dim=2)  # positions are axis 2: the past first, then the new tokens\n"
             "    v_all = torch.cat((past_v, v), dim=2)\n",
             "    B, n_kv, T_past, hd = past_k.shape\n"
             "    T_new = k.shape[2]\n"
             "    k_all = torch.empty(B, n_kv, T_past + T_new, hd)  # room for every position\n"
             "    v_all = torch.empty(B, n_kv, T_past + T_new, hd)\n"
             "    k_all[:, :, :T_past], k_all[:, :, T_past:] = past_k, k\n"
             "    v_all[:, :, :T_past], v_all[:, :, T_past:] = past_v, v\n",
             ("dtype", "bfloat16", "float32", "device", "empty"),
             "preallocates the grown cache with torch.empty in the default dtype and device: a bfloat16 cache comes back float32",
             regime="a bfloat16 or float16 cache, or one on another device")),
    # https://github.com/QwenLM/Qwen/issues/979
    ("06", M("attention_step", "    y = F.scaled_dot_product_attention(q, k_all, v_all, attn_mask=mask)    # (B, nh, T, hd)",
             "    y = F.scaled_dot_product_attention(q, k_all, v_all, attn_mask=mask if start == 0 else None)  # a decode step sees every key",
             ("mask", "chunk", "future", "causal", "several new tokens", "after the prefill"),
             "masks only the prefill: a chunk of several tokens after it reads its own future "
             "(https://github.com/QwenLM/Qwen/issues/979)",
             regime="several new tokens after a prefill")),
    ("06", M("attention_step", "    return attn.o_proj(y), k_all, v_all",
             "    return attn.o_proj(y), k, v                          # this step's keys and values",
             ("cache", "k_all", "past", "grow", "only the new", "returned"),
             "returns this step's keys and values: the caller's cache is replaced at every step instead of grown",
             regime="a step after the first")),
    ("06", M("generate_greedy", GREEDY,
             "    idx, step_input = prompt, prompt                # prefill: the whole prompt in one pass\n"
             "    with torch.no_grad():                           # decoding never backpropagates\n"
             "        for _ in range(max_new_tokens):\n"
             "            cache.reset()                           # stale positions would shift everything\n",
             ("reset", "cache", "every step", "forgets", "cached positions", "decode"),
             "resets the cache at the top of the loop: each decode step forgets the prompt and the tokens before it")),
    ("06", M("generate_greedy", GREEDY + GREEDY_LOOP,
             "    cache.reset()                                   # it may hold an earlier prompt\n"
             "    with torch.no_grad():\n"
             "        next_id = model(prompt, cache=cache)[:, -1].argmax(dim=-1, keepdim=True)  # prefill: (B, 1)\n"
             "        idx = torch.cat((prompt, next_id), dim=1)\n"
             "        for _ in range(max_new_tokens - 1):                 # the prefill gave the first new token\n"
             "            next_id = model(next_id, cache=cache)[:, -1].argmax(dim=-1, keepdim=True)\n"
             "            idx = torch.cat((idx, next_id), dim=1)\n"
             "    return idx\n",
             ("max_new_tokens", "0 new", "zero", "extra token", "one token too many", "shape"),
             "prefills before the loop and always keeps the prefill's token: asked for no new token it still adds one",
             regime="max_new_tokens = 0")),
    ("06", M("generate_greedy", "    cache.reset()                                   # stale positions from an earlier prompt would shift everything\n",
             "    cache = tinylm.KVCache(model.config, prompt.shape[0])  # a fresh cache: nothing stale in it\n",
             ("dtype", "device", "given cache", "bfloat16", "caller's cache", "kvcache"),
             "builds a fresh default KVCache instead of resetting the caller's: a bfloat16 model cannot write into it",
             regime="a cache in another dtype or on another device than the default")),
    ("06", M("generate_greedy", "        for _ in range(max_new_tokens):\n",
             "        for _ in range(max_new_tokens):\n"
             "            if cache.length + step_input.shape[1] >= cache.max_seq_len:  # no room left for this step\n"
             "                break\n",
             ("max_seq_len", "full", "room", "stops early", "one token short", "early", "shape"),
             "guards against a full cache with >=: the step that fills the cache exactly is skipped, one token short",
             regime="a prompt and new tokens that fill the cache to max_seq_len")),
    ("06", M("generate_left_padded",
             "            ids, positions = next_id[:, None], positions[:, -1:] + 1    # (B, 1) each: one past the row's last position\n",
             "            ids = next_id[:, None]                                      # (B, 1)\n"
             "            positions = (mask.long().cumsum(-1) - 1)[:, -1:]            # the prompt's rule, for the new token\n",
             ("position", "one step", "off by one", "mask", "rope"),
             "derives the new token's position from the mask before its column is appended: every new token sits "
             "one position early")),
    ("06", M("generate_left_padded", "            next_id = logits.argmax(dim=-1)                             # (B,)\n",
             "            next_id = logits.argmax(dim=-1, keepdim=True).squeeze()     # (B,)\n",
             ("batch of one", "single prompt", "squeeze", "one prompt", "shape"),
             "squeezes the (B, 1) argmax with squeeze(): a single prompt leaves a 0-d id",
             regime="a single prompt")),
    # ---- 07
    ("07", M("repeat_kv", "    x = x[:, :, None].expand(B, n_kv, n_rep, T, hd)  # (B, n_kv, n_rep, T, hd): a view, copies of each kv head side by side\n"
             "    return x.reshape(B, n_kv * n_rep, T, hd)          # (B, n_kv * n_rep, T, hd): groups stay contiguous",
             "    copies = torch.stack([x] * n_rep, dim=1)           # (B, n_rep, n_kv, T, hd)\n"
             "    return copies.reshape(B, n_kv * n_rep, T, hd)",
             ("order", "interleav", "tile", "h // n_rep", "group", "kv head"),
             "stacks the copies on axis 1, before the kv heads: the reshape tiles the heads, right only with one kv head",
             regime="two or more kv heads")),
    ("07", M("gqa_attention", "    return F.scaled_dot_product_attention(q, k, v, is_causal=True)",
             "    T = q.shape[2]\n"
             "    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5              # (B, nh, T, T)\n"
             "    future = torch.ones(T, T, dtype=torch.bool, device=q.device).triu()  # the keys after each query\n"
             "    weights = scores.masked_fill(future, float(\"-inf\")).softmax(dim=-1)\n"
             "    return weights @ v",
             ("diagonal", "itself", "nan", "triu", "own position", "-inf", "masked row"),
             "writes attention out and masks with triu(), whose diagonal is kept: every query loses itself, the first "
             "row is all -inf and its softmax NaN")),
    # https://github.com/rasbt/LLMs-from-scratch/pull/697
    ("07", M("gqa_step", "    mask = tinylm.causal_mask(T, start + T).to(x.device)  # (T, start + T)",
             "    mask = tinylm.causal_mask(T).to(x.device)             # (T, T): the new tokens among themselves",
             ("mask", "shape", "cached", "start + t", "chunk", "kv_len", "bottom-right"),
             "builds the mask over the new tokens only: it broadcasts for one token, and a chunk after a prefill fails "
             "(https://github.com/rasbt/LLMs-from-scratch/pull/697)",
             regime="several new tokens after a prefill")),
    ("07", M("gqa_step", "    return attn.o_proj(y), k_all, v_all",
             "    return attn.o_proj(y), repeat_kv(k_all, n_rep), repeat_kv(v_all, n_rep)  # one copy per query head",
             ("repeat", "cache", "n_kv", "kv heads", "memory", "query heads"),
             "hands back the repeated keys and values as the cache: the next step appends n_kv heads to n_heads",
             regime="fewer kv heads than query heads, a step after the first")),
    ("07", M("decode_bytes_per_token", "    d, L, hd, size = config.d_model, config.n_layers, config.head_dim, dtype.itemsize",
             "    d, L, hd = config.d_model, config.n_layers, config.head_dim\n"
             "    size = 2 if dtype in (torch.bfloat16, torch.float16) else 4  # half precision or float32",
             ("int8", "itemsize", "dtype", "bytes per", "1 byte"),
             "writes the bytes per number out for the two dtypes it knows: int8 (or float64) counts 4",
             regime="a dtype other than float32, bfloat16 and float16")),
    ("07", M("decode_bytes_per_token", "    kv_cache = 2 * L * config.n_kv_heads * hd * context_len * size            # K and V, every block",
             "    kv_cache = 2 * L * config.n_kv_heads * hd * (context_len + 1) * size      # the cache and the new token's K, V",
             ("context_len", "off by one", "new token", "kv_cache", "one position"),
             "counts the new token's key and value as read too: the cache read is context_len + 1 positions")),
    # ---- 08
    # https://github.com/ml-explore/mlx-lm/pull/1377
    ("08", M("top_k_filter", "    k = min(k, logits.shape[-1])                           # k past the vocabulary keeps every token\n",
             "    if not 0 < k < logits.shape[-1]:                       # a k outside the vocabulary is a mistake\n"
             "        raise ValueError(f\"top_k must be in (0, {logits.shape[-1]}], got {k}\")\n",
             ("vocabulary", "k >=", "k equal", "whole vocabulary", "raise", "every token"),
             "validates k against an open bound: k equal to the vocabulary, a legal no-op, raises "
             "(https://github.com/ml-explore/mlx-lm/pull/1377)",
             regime="k equal to or larger than the vocabulary")),
    ("08", M("top_k_filter", "    kth = logits.topk(k, dim=-1).values[..., -1:]          # (..., 1): the k-th largest value",
             "    kth = logits.topk(k, dim=-1).values[:, [-1]]           # (B, 1): the k-th largest value",
             ("axis", "(b, t, v)", "last axis", "three", "shape", "batch shape"),
             "takes the threshold as nanoGPT does, v[:, [-1]]: logits of three axes (B, T, V) index the wrong one",
             regime="logits (B, T, V)")),
    ("08", M("top_p_filter", "    probs = sorted_logits.softmax(dim=-1)\n",
             "    probs = sorted_logits.exp() / sorted_logits.exp().sum(dim=-1, keepdim=True)  # softmax by hand\n",
             NAN + ("exp", "stable", "softmax", "large logits"),
             "writes the softmax out without the row maximum: logits above 88 overflow and the nucleus is NaN",
             regime="logits above about 88")),
    ("08", M("generate", "    idx = prompt\n",
             "    idx = prompt\n"
             "    generator = generator or torch.Generator().manual_seed(0)  # reproducible by default\n",
             ("generator", "seed", "global rng", "random", "same draws", "reproducib"),
             "seeds a generator of its own when none is given: every call without one draws the same tokens",
             regime="calls without a generator")),
    ("08", M("generate", "                logits = model(idx)[:, -1]                  # (B, V): the last position predicts the next token",
             "                logits = model(idx[:, -1:])[:, -1]          # (B, V): the newest token predicts the next one",
             ("context", "whole sequence", "last token only", "prompt", "history", "cache"),
             "feeds only the newest token without a cache: every step forgets the prompt and the earlier tokens",
             regime="a model that reads more than the last token")),
    ("08", M("generate", "                idx = torch.cat((idx, next_id[:, None]), dim=1)                      # (B, T + 1)",
             "                idx = torch.cat((prompt, next_id[:, None]), dim=1)                   # (B, T + 1)",
             ("length", "shape", "max_new_tokens", "prompt", "appended", "one token"),
             "appends each new token to the prompt instead of to the text so far: one new token survives")),
    ("08", M("generate", GENERATE,
             "    was_training = model.training\n"
             "    model.eval()                                            # dropout off\n"
             "    out = prompt\n"
             "    with torch.no_grad():\n"
             "        for _ in range(max_new_tokens):\n"
             "            next_id = sample_next(model(out)[:, -1, :], temperature, top_k, top_p, generator)  # (B,)\n"
             "            out = torch.cat([out, next_id.unsqueeze(-1)], dim=-1)\n"
             "    model.train(was_training)                               # back to the caller's mode\n"
             "    return out\n",
             ("finally", "exception", "interrupt", "train mode", "restore", "mode"),
             "restores the mode after the loop but not in a finally: an exception mid-generation leaves eval mode",
             regime="an exception in the middle of generation")),
    # ---- 09
    ("09", M("get_batch", "    idx = starts[:, None] + torch.arange(seq_len + 1)                                # (B, T + 1) positions\n"
             "    window = data[idx].long()                                                        # (B, T + 1)\n"
             "    return window[:, :-1], window[:, 1:]                                             # x, y: (B, T) each",
             "    x = torch.stack([data[s:s + seq_len] for s in starts])          # (B, T)\n"
             "    y = torch.stack([data[s + 1:s + seq_len + 1] for s in starts])  # (B, T): shifted by one\n"
             "    return x, y",
             ("int64", "long", "dtype", "uint8", "torch.long"),
             "cuts the windows with a list of slices and stacks them: the ids keep the data's dtype (uint8 bytes)",
             regime="data stored as uint8 (the course corpus)")),
    ("09", M("lm_loss", "    return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)  # (B*T, V) vs (B*T,)",
             "    probs = logits.softmax(dim=-1)                                # (B, T, V)\n"
             "    real = targets != -100                                        # padding is not scored\n"
             "    picked = probs.gather(-1, targets.clamp(min=0)[..., None]).squeeze(-1)\n"
             "    return -(picked.log() * real).sum() / real.sum()",
             NAN + ("log", "log_softmax", "log of 0", "stable"),
             "takes the log of softmax probabilities: a target whose probability underflows to 0 gives log 0 = -inf",
             regime="confident logits (a target probability below 1e-38)")),
    ("09", M("lr_schedule", "    progress = (step - warmup_steps) / max(1, total_steps - 1 - warmup_steps)  # 0 -> 1 over the decay\n"
             "    return min_lr + 0.5 * (1 + math.cos(math.pi * min(progress, 1.0))) * (max_lr - min_lr)",
             "    if step >= total_steps:                       # a run trained on past its schedule\n"
             "        return min_lr\n"
             "    decay_steps = total_steps - 1 - warmup_steps  # from the end of the warmup to the last step\n"
             "    t = (step - warmup_steps) / decay_steps\n"
             "    return min_lr + (max_lr - min_lr) * (1 + math.cos(math.pi * t)) / 2",
             ("division by zero", "zerodivision", "warmup_steps + 1", "decay", "single step", "max(1"),
             "counts the decay steps without a floor of 1: one step after the warmup divides by zero",
             regime="total_steps = warmup_steps + 1")),
    ("09", M("train_step", "    return loss.item()                           # a float: the step's graph can be freed",
             "    with torch.no_grad():\n"
             "        return lm_loss(model(x), y).item()       # the loss the step has reached",
             ("before the step", "after the step", "returned loss", "loss of the batch", "stale", "recomput"),
             "reports the loss recomputed after optimizer.step(): the returned number is the next step's, not this batch's")),
    # https://github.com/huggingface/transformers/pull/614
    ("09", M("train_step", "    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)  # global gradient norm <= grad_clip\n",
             "    for group in optimizer.param_groups:         # decayed and undecayed weights alike\n"
             "        torch.nn.utils.clip_grad_norm_(group[\"params\"], grad_clip)\n",
             ("global", "param group", "parameter group", "per group", "norm", "clip"),
             "clips each optimizer group on its own: with two groups the global norm can reach sqrt(2) · grad_clip "
             "(https://github.com/huggingface/transformers/pull/614)",
             regime="an optimizer with two parameter groups")),
    # https://github.com/OpenRLHF/OpenRLHF/pull/583
    ("09", M("train_step_accumulated", MICRO_STEP,
             "        n_i = int((y != -100).sum())                                  # this micro-batch's scored targets\n"
             "        mean_i = lm_loss(model(x), y)                                 # its own mean\n"
             "        (mean_i * n_i / n_tokens).backward()                          # reweighted to its share of N\n"
             "        total += mean_i.item() * n_i\n",
             NAN + ("padding", "no scored", "empty", "all -100", "zero tokens"),
             "reweights each micro-batch's mean by its share of tokens: a micro-batch of padding only has a NaN mean, "
             "and NaN times 0 is NaN (https://github.com/OpenRLHF/OpenRLHF/pull/583)",
             regime="a micro-batch whose targets are all padding")),
    # https://github.com/karpathy/nanochat/pull/52
    ("09", M("train_step_accumulated", "        total += summed.item()\n",
             "        total = summed.item()                                         # the loss to report\n",
             ("last micro-batch", "total", "sum", "accumulat", "returned loss", "mean over"),
             "keeps the last micro-batch's loss instead of adding them up: the returned mean covers one piece "
             "(https://github.com/karpathy/nanochat/pull/52)",
             regime="more than one micro-batch")),
    ("09", M("train_step_costs", "    attention_matmuls = 4 * seq_len * config.n_heads * hd * L * tokens        # QKᵀ and weights @ V, full T x T",
             "    attention_matmuls = 4 * seq_len * d * L * tokens                           # QKᵀ and weights @ V over all heads: d wide",
             ("head_dim", "n_heads", "attention", "d_model", "flops"),
             "counts attention's matmuls d_model wide: n_heads · head_dim is d_model only when head_dim is not set apart",
             regime="head_dim set apart from d_model / n_heads")),
    ("09", M("train_step_accumulated", ACCUMULATED_TAIL,
             ACCUMULATED_TAIL.replace(ZERO_GRAD, "").replace(
                 "    optimizer.step()                                                  # once\n",
                 "    optimizer.step()                                                  # once\n"
                 "    optimizer.zero_grad(set_to_none=True)                             # ready for the next step\n"),
             ("zero_grad", "leftover", "earlier", "accumulat", "previous", "stale gradient"),
             "zeroes the gradients after the step, as tutorials do: gradients left in .grad before the call add to the batch's",
             regime="gradients left in .grad by an earlier backward")),
    # ---- 10
    # https://github.com/pytorch/pytorch/issues/116349
    ("10", M("nll_sum_and_count", "    nll = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=ignore_index,\n"
             "                          reduction=\"sum\")                       # (B*T, V) vs (B*T,) -> scalar\n"
             "    count = int((targets != ignore_index).sum())                 # padding is not a token\n"
             "    return nll.item(), count",
             "    count = int((targets != ignore_index).sum())                 # padding is not a token\n"
             "    mean = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=ignore_index)\n"
             "    return mean.item() * count, count                            # the mean times the count is the sum",
             NAN + ("padding", "all padding", "no scored", "zero", "empty"),
             "gets the sum as the mean times the count: a batch of padding only has a NaN mean, and NaN times 0 is NaN "
             "(https://github.com/pytorch/pytorch/issues/116349)",
             regime="a batch whose targets are all padding")),
    ("10", M("evaluate", "            for x, y in batches:\n"
             "                s, n = nll_sum_and_count(model(x.to(dev)), y.to(dev))\n",
             "            for x, y in batches:\n"
             "                total, count = 0.0, 0                        # this batch's sums\n"
             "                s, n = nll_sum_and_count(model(x.to(dev)), y.to(dev))\n",
             ("last batch", "reset", "every batch", "all batches", "total", "accumulat"),
             "zeroes the sums at the top of every batch: the loss is the last batch's",
             regime="more than one batch")),
    # https://github.com/mosaicml/composer/pull/1516
    ("10", M("evaluate", EVAL_LOOP,
             "    with torch.no_grad():                                    # no graph: memory stays flat\n"
             "        for x, y in batches:\n"
             "            s, n = nll_sum_and_count(model(x.to(dev)), y.to(dev))\n"
             "            total, count = total + s, count + n\n"
             "            model.train(was_training)                        # the caller's mode back\n",
             ("eval mode", "train mode", "dropout", "mode", "every batch", "first batch"),
             "gives the caller its mode back inside the loop: only the first batch is scored in eval mode "
             "(https://github.com/mosaicml/composer/pull/1516)",
             regime="a model handed over in train mode, several batches")),
    ("10", M("evaluate", "    total, count = 0.0, 0\n    try:\n        with torch.no_grad():                                # no graph: memory stays flat\n"
             "            for x, y in batches:\n"
             "                s, n = nll_sum_and_count(model(x.to(dev)), y.to(dev))\n"
             "                total, count = total + s, count + n          # combine by tokens, not by batches\n",
             "    count = sum(int((y != -100).sum()) for _, y in batches)  # every scored target, counted first\n"
             "    total = 0.0\n    try:\n        with torch.no_grad():\n"
             "            for x, y in batches:\n"
             "                s, _ = nll_sum_and_count(model(x.to(dev)), y.to(dev))\n"
             "                total += s\n",
             ("iterator", "generator", "one pass", "exhaust", "twice", "list"),
             "counts the targets in a first pass over the batches: a one-pass iterator is empty for the second",
             regime="batches handed over as a one-pass iterator")),
    ("10", M("evaluate", "                total, count = total + s, count + n          # combine by tokens, not by batches\n",
             "                batch_loss = s / n                           # this batch's mean, for the log\n"
             "                total, count = total + batch_loss * n, count + n  # weighted back by its tokens\n",
             ("padding", "empty", "zero", "division", "no scored", "all -100"),
             "takes each batch's mean and weights it back by its count: a batch of padding only divides by zero",
             regime="a batch whose targets are all padding")),
    ("10", M("bigram_nll", "    counts = torch.bincount(train[:-1] * 256 + train[1:], minlength=256 * 256).view(256, 256).double()  # [prev, next]",
             "    counts = torch.zeros(256, 256)                                       # [prev, next]\n"
             "    counts.index_put_((train[:-1], train[1:]), torch.ones(len(train) - 1), accumulate=True)",
             ("float64", "double", "precision", "float32", "rounding"),
             "counts the pairs with index_put_ into a float32 table: the probabilities and their logs keep 7 digits, not 16")),
]

SAME = [
    ("01", M("embed", "    return weight[ids]  # advanced indexing: one row of weight per id, gradient flows to those rows",
             "    rows = weight.index_select(0, ids.reshape(-1))           # one row per id, in order\n"
             "    return rows.view(*ids.shape, weight.shape[1])            # the ids' own shape, then d",
             (), "index_select on the flattened ids, viewed back to the ids' own shape")),
    ("01", M("tied_logits", "    return x @ weight.T  # (B, T, d) @ (d, V) -> (B, T, V)",
             "    return torch.einsum(\"...d,vd->...v\", x, weight)  # one score per vocabulary row", (),
             "an einsum over the feature axis, any leading shape")),
    ("02", M("rms_norm", "x32.pow(2).mean(dim=-1, keepdim=True)", "x32.pow(2).sum(dim=-1, keepdim=True) / x.shape[-1]", (),
             "the mean square as a sum divided by d")),
    ("02", M("layer_norm", "    centred = x - x.mean(dim=-1, keepdim=True)              # (..., d)\n"
             "    var = centred.pow(2).mean(dim=-1, keepdim=True)         # (..., 1): biased, divides by d\n",
             "    var, mean = torch.var_mean(x, dim=-1, keepdim=True, correction=0)  # biased, as LayerNorm\n"
             "    centred = x - mean\n", (), "variance and mean from torch.var_mean with correction=0")),
    ("03", M("causal_mask", "    allowed = torch.ones(q_len, kv_len, dtype=torch.bool)\n"
             "    return allowed.tril(diagonal=kv_len - q_len)  # query i is position kv_len - q_len + i",
             "    query_pos = torch.arange(kv_len - q_len, kv_len)[:, None]  # (q_len, 1): absolute positions\n"
             "    return torch.arange(kv_len)[None, :] <= query_pos", (), "positions compared with arange")),
    ("03", M("attention_flops", "    per_head = 2 * T * T * head_dim             # (T, hd) @ (hd, T) for the scores; (T, T) @ (T, hd) for the mix\n"
             "    return {\"qkv_proj\": 3 * projection, \"scores\": B * n_heads * per_head, \"mix\": B * n_heads * per_head,\n",
             "    all_heads = 2 * B * n_heads * T * T * head_dim  # every head of every sequence\n"
             "    return {\"qkv_proj\": 3 * projection, \"scores\": all_heads, \"mix\": all_heads,\n", (),
             "the scores' and the mix's FLOPs counted for all heads at once")),
    ("04", M("rotary_attention", "    return tinylm.causal_attention(q, k, v)",
             "    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)  # Tq = Tk here", (),
             "PyTorch's fused attention, causal: q and k have the same length")),
    ("04", M("interleaved_to_half", "    pairs = w.reshape(n_heads, hd // 2, 2, d_in)      # (nh, hd/2, 2, d_in): pair i of head h is rows 2i, 2i+1\n"
             "    return pairs.transpose(1, 2).reshape(rows, d_in)  # (nh, 2, hd/2, d_in): each head's evens, then its odds",
             "    order = []\n"
             "    for h in range(n_heads):                          # each head's evens, then its odds\n"
             "        order += list(range(h * hd, (h + 1) * hd, 2)) + list(range(h * hd + 1, (h + 1) * hd, 2))\n"
             "    return w[order]", (), "the row order built head by head as a list")),
    ("05", M("swiglu_hidden", "    return multiple * math.ceil(8 * d_model / 3 / multiple)",
             "    return (8 * d_model + 3 * multiple - 1) // (3 * multiple) * multiple  # ceil(8d / 3m) in integers", (),
             "the ceiling of 8d / 3m in integer arithmetic")),
    ("05", M("swiglu", "    gate = F.silu(x @ w_gate.T)  # (B, T, d_ff): the nonlinearity lives on the gate only",
             "    a = x @ w_gate.T\n    gate = a * torch.sigmoid(a)  # SiLU", (), "SiLU as a · sigmoid(a)")),
    ("06", M("cache_update", "    k_all = torch.cat((past_k, k), dim=2)  # positions are axis 2: the past first, then the new tokens\n"
             "    v_all = torch.cat((past_v, v), dim=2)\n",
             "    k_all, v_all = (torch.cat(pair, dim=-2) for pair in ((past_k, k), (past_v, v)))  # positions: axis -2\n", (),
             "both concatenations in one generator, along axis -2")),
    ("06", M("kv_cache_bytes", "    per_position = 2 * config.n_layers * config.n_kv_heads * config.head_dim  # K and V, in every block\n"
             "    return per_position * seq_len * batch_size * dtype.itemsize",
             "    per_layer = 2 * batch_size * config.n_kv_heads * config.head_dim * seq_len  # K and V of one block\n"
             "    return config.n_layers * per_layer * dtype.itemsize", (), "the bytes counted per layer, then times the layers")),
    ("07", M("repeat_kv", "    x = x[:, :, None].expand(B, n_kv, n_rep, T, hd)  # (B, n_kv, n_rep, T, hd): a view, copies of each kv head side by side\n",
             "    x = torch.stack([x] * n_rep, dim=2)              # (B, n_kv, n_rep, T, hd): copies next to each kv head\n", (),
             "the copies stacked next to each kv head (axis 2)")),
    ("08", M("top_k_filter", "    kth = logits.topk(k, dim=-1).values[..., -1:]          # (..., 1): the k-th largest value",
             "    kth = logits.topk(k, dim=-1).values.amin(dim=-1, keepdim=True)  # the smallest of the k largest", (),
             "the threshold as the minimum of the k largest")),
    ("09", M("train_step_accumulated", "        total += summed.item()\n"
             "    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)    # once: the whole batch's gradient\n"
             "    optimizer.step()                                                  # once\n"
             "    return total / n_tokens                                           # mean over all N target tokens",
             "        total += summed.item() / n_tokens                             # its share of the mean\n"
             "    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)    # once: the whole batch's gradient\n"
             "    optimizer.step()                                                  # once\n"
             "    return total                                                      # already divided by N", (),
             "the running total divided by N as it goes, returned as it is")),
    ("09", M("train_step_costs", "    return {\"flops\": 6 * matmul_weights * tokens + 3 * attention_matmuls,     # backward = 2 x forward\n",
             "    return {\"flops\": 3 * (2 * matmul_weights * tokens + attention_matmuls),  # forward, then twice it backward\n", (),
             "the FLOPs factored as three forward passes")),
    ("10", M("bigram_nll", "    return -probs.log()[val[:-1], val[1:]].mean().item()",
             "    return -probs[val[:-1], val[1:]].log().mean().item()  # the log of the pairs only", (),
             "the log taken after picking the pairs")),
]
