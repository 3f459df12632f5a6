"""A twenty-seventh held-out set of learner mistakes ("fresh27"), written without reading the checks: neither
autograder/checks/ (any file), tests/checks/, autograder/diagnosis_*.py, benchmarks/bench_diagnostics.py's source, the
diagnosis sections of docs/benchmarks.md nor tests/course/test_docs.py were opened, listed or grepped;
bench_diagnostics.py, check cells and notebook checks were never run, and no mistake or SAME edit was tried against a
check. No git log or git show was run.

What was opened or run. The brief, HELPER_RULES.md and mkwt.sh (cat), then mkwt.sh fresh27 (run). `ls` of the root,
benchmarks/, benchmarks/mutations/, notebooks/ and tinylm/ (names only); `wc -l` of mutations/__init__.py,
verify_unseen.py, heldout_duplicates.py and the unseen_probes*.py files. Of the other sets only fresh26.py's module
docstring, printed with python. Whole: unseen.py, mutations/__init__.py, verify_unseen.py, heldout_duplicates.py;
unseen_probes_fresh26.py lines 1-80 and its EXTRA_PROBES line. Through bench_diagnostics.notebook_cells: the answer
cells of all ten notebooks (written to a scratch folder), and of the third result its keys (the check names); the setup
cells were not printed. The probes' keys, printed by running verify_unseen's probes_of on the solution (no mistake, no
check). A grep of tinylm/config.py for head_dim. A grep for "fresh26" over the four registration files, lines 160-180
of tests/course/test_benchmarks.py. Runs: verify_unseen.py --set fresh27 (4 runs), heldout_duplicates.py --set
fresh27 (3 runs), and the two fresh27 tests of test_benchmarks.py. Public threads: 9 searches of issue threads; 28
candidate URLs grepped over benchmarks/mutations/ (`grep -rl URL`, counts only), 14 already cited elsewhere, unused.

Slips, none touching a check's text. The notebooks' markdown cells were not read (time): the promised inputs come from
the answer cells' docstrings only. A python script that dropped duplicated entries also imported every other set's
module to compare entries text for text (it printed only this set's matching reasons, never another set's entry): the
same comparison heldout_duplicates makes, done in-process. heldout_duplicates matched 35 of 97 entries on its first run
(31 mistakes, 4 SAME), 3 on the second, 0 on the third; the matches were dropped, not reworded, and 9 new mistakes
written in their place. Three threads went with dropped entries (fla-org/flash-linear-attention#126, an offset off the
heads' axis; lucidrains/rotary-embedding-torch#11, an offset ignored; apache/mxnet#5905, a mean of batch means).
One mistake (param_counts at d x d) needed a probe the shared ones lack: unseen_probes_fresh27.py adds it, and takes
fresh26's extra probes too. So the set is under the brief's "about 60" and "about 10 threads".

The set's focus, each mistake counted once by its main kind. Right routes of the learner's own with a later mistake
(19): a float32 one-hot, a 2-D mm viewed with d for V, register_parameter of a
detached copy, the L2 norm over d, an einsum summed over every axis, var_mean unpacked (mean, var), F.rms_norm without
eps, a mask from positions with >, fused qkv split as interleaved, complex tables with a negated sine, a broadcast outer
product from position 1, the rotation written out with a sign lost, SiLU as a / (1 + exp(a)), fused gate/up with SiLU on
up, lm_head as a module without the final norm, a descending argsort as inverse, the mass shifted by roll, unfold
without int64, log_softmax and gather averaged over the padding. Look-alikes (11): heads owning strided features, heads
merged with the head axis last (03 and 05), x @ w for q, k, v, the values rotated, the residual from the normalised
copy, the temperature line lost, the loss reported after the step, clipping per micro-batch, columns normalised, pairs
indexed [next, prev]. Promised inputs (12): flat ids, q_len < kv_len (the triangle; the square mask's first rows),
head_dim apart from d / n_heads, a decode step (tril without offset; a square mask in gqa_step), a batch of two
(argmax over all; next_id as a row), GQA caching, a caller's generator, a model in eval mode, a batch in the count. Public bugs (7, below). Accounting by a term (3): context_len + 1, one block's cache, the
attention's backward left out. Numerics (3): exp / sum without the maximum, log of a softmax, bincount without
minlength.

Sources: a learner working through the notebooks and, for 7 mistakes, public threads (the URL in a comment above the
entry and in its reason): epfLLM/Megatron-LLM#64 (int() for the rounding), huggingface/transformers#27139 (4·d),
tloen/alpaca-lora#315 (positions over the padding), unslothai/unsloth#4078 (one shared position), dmlc/gluon-nlp#1481
(nucleus unsorted), ml-explore/mlx-lm#388 (filter order), Tencent-Hunyuan/UniRL#223 (decay from step 0).

SAME lists 13 edits (routes of the learner's own without their mistake): index_select, 1 / sqrt written out, var_mean in
its order, a mask from positions, torch.where, a square mask's last rows, the rotation on the halves, SiLU written out
after F.linear, the tie made the other way round, cat of a list on axis -2, unsqueeze and expand, scatter_ into a fresh
tensor, log_softmax and gather with a masked mean; a check must pass each.

Counts: 55 mistakes (01: 4, 02: 4, 03: 8, 04: 4, 05: 8, 06: 4, 07: 4, 08: 7, 09: 8, 10: 4), 13 SAME edits, 7 public
threads. Each mistake is one substitution in one answer cell; `expect` holds words a check that found it would likely
say, `regime` the situation in which a mistake right by default shows. `in_lists` is left False.
"""
from __future__ import annotations

from .unseen import Unseen as M

MUTATIONS = [
    # 01
    ("01", M("embed", "return weight[ids]", "return torch.index_select(weight, 0, ids.flatten()).view(ids.shape[0], -1, weight.shape[1])",
             ("shape", "leading", "flat ids", "(T,)", "any shape", "rank"),
             "gathers rows by index_select and reshapes to three axes: flat ids (T,), which embed promises, come back (T, 1, d)",
             regime="ids of a shape other than (B, T)")),
    ("01", M("embed", "return weight[ids]", "return F.one_hot(ids, weight.shape[0]).float() @ weight",
             ("dtype", "float32", "bfloat16", "one-hot", "cast"),
             "routes embed through a float32 one-hot: a bfloat16 table no longer multiplies (the cast after the one-hot is wrong)",
             regime="a bfloat16 table")),
    ("01", M("tied_logits", "return x @ weight.T", "return torch.mm(x.reshape(-1, x.shape[-1]), weight.T).view(*x.shape[:2], weight.shape[1])",
             ("vocab", "shape", "weight.shape[0]", "V", "d_model"),
             "flattens the tokens for a 2-D matmul, then views the result with weight.shape[1] (d) where the vocabulary V is weight.shape[0]")),
    ("01", M("tie_weights", "lm_head.weight = tok_emb.weight",
             'lm_head.register_parameter("weight", nn.Parameter(tok_emb.weight.detach()))',
             ("same parameter", "is tok_emb.weight", "two parameters", "separate", "not tied", "detach"),
             "registers the head's weight by register_parameter, right, but wraps a detached tensor: a second Parameter sharing storage")),
    # 02
    ("02", M("rms_norm", "inv_rms = torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)",
             "inv_rms = 1 / (torch.linalg.vector_norm(x32, dim=-1, keepdim=True) / x.shape[-1] + eps)",
             ("sqrt(d)", "square root", "norm", "factor", "scale", "mean square"),
             "takes the L2 norm route, right, then divides it by d where the RMS is the norm over sqrt(d)")),
    ("02", M("layer_norm", "centred = x - x.mean(dim=-1, keepdim=True)              # (..., d)\n"
             "    var = centred.pow(2).mean(dim=-1, keepdim=True)         # (..., 1): biased, divides by d",
             "mean, var = torch.var_mean(x, dim=-1, correction=0, keepdim=True)  # one pass over the features\n"
             "    centred = x - mean",
             ("var_mean", "order", "swapped", "variance", "mean"),
             "uses torch.var_mean with the right correction but unpacks it as (mean, var): it returns (var, mean)")),
    ("02", M("RMSNorm", "return rms_norm(x, self.weight, self.eps)", "return F.rms_norm(x, (x.shape[-1],), self.weight)",
             ("eps", "epsilon", "norm_eps"),
             "calls F.rms_norm, right, but leaves its eps out: the module's eps is never used",
             regime="an eps other than the default")),
    # 03
    ("03", M("causal_mask", "allowed = torch.ones(q_len, kv_len, dtype=torch.bool)\n    return allowed.tril(diagonal=kv_len - q_len)",
             "rows = torch.arange(q_len)[:, None] + (kv_len - q_len)  # each query's absolute position\n"
             "    return rows > torch.arange(kv_len)",
             ("diagonal", "itself", "own position", ">=", "strict"),
             "builds the mask from positions, right, then compares with > : no query may attend to its own key")),
    ("03", M("causal_mask", "allowed = torch.ones(q_len, kv_len, dtype=torch.bool)\n    return allowed.tril(diagonal=kv_len - q_len)",
             "allowed = torch.ones(q_len, kv_len, dtype=torch.bool)\n    return ~allowed.triu(diagonal=1)",
             ("kv_len - q_len", "offset", "bottom-right", "cached", "fewer queries"),
             "masks the strict upper triangle: right for a square mask, without the offset for q_len < kv_len",
             regime="fewer queries than keys")),
    ("03", M("split_heads", "x = x.view(B, T, n_heads, d // n_heads)  # (B, T, H, hd): head h owns features h*hd .. (h+1)*hd - 1\n"
             "    return x.transpose(1, 2)                 # (B, H, T, hd)",
             "return x.unflatten(-1, (-1, n_heads)).permute(0, 3, 1, 2)  # (B, H, T, hd)",
             ("contiguous", "features", "interleav", "strided", "head h owns", "block"),
             "unflattens the features as (hd, H): the shape is right but head h owns every H-th feature")),
    ("03", M("split_heads", "return y.transpose(1, 2).reshape(B, T, H * hd)", "return y.permute(0, 2, 3, 1).flatten(2)",
             ("merge_heads", "order", "interleav", "heads side by side", "layout"),
             "merges by permute and flatten, but with the head axis last: features of the heads interleave")),
    ("03", M("causal_attention", "weights = scores.softmax(dim=-1)                                 # over keys: each row sums to 1",
             "weights = scores.exp() / scores.exp().sum(dim=-1, keepdim=True)  # softmax written out",
             ("overflow", "max", "stable", "nan", "inf", "underflow"),
             "writes the softmax out as exp / sum without subtracting the row maximum: large scores give NaN",
             regime="large or very negative scores")),
    ("03", M("causal_attention", "mask = causal_mask(q.shape[-2], k.shape[-2]).to(q.device)",
             "mask = causal_mask(k.shape[-2])[: q.shape[-2]].to(q.device)",
             ("last rows", "first rows", "offset", "bottom-right", "cached", "fewer queries"),
             "cuts a square mask to the queries' count, keeping its first rows where the queries are the last positions",
             regime="fewer queries than keys")),
    ("03", M("self_attention", "q, k, v = (split_heads(F.linear(x, w), n_heads) for w in (w_q, w_k, w_v))",
             "q, k, v = (split_heads(x @ w, n_heads) for w in (w_q, w_k, w_v))",
             ("transpose", "layout", "[d_out, d_in]", "w.t", "projection"),
             "projects q, k and v as x @ w: nn.Linear weights are stored [d_out, d_in]")),
    ("03", M("self_attention", "q, k, v = (split_heads(F.linear(x, w), n_heads) for w in (w_q, w_k, w_v))",
             "qkv = F.linear(x, torch.cat((w_q, w_k, w_v)))  # (B, T, 3d): one matmul\n"
             "    q, k, v = (split_heads(t, n_heads) for t in qkv.view(*x.shape[:2], -1, 3).unbind(-1))",
             ("fused", "split", "interleav", "chunk", "q, k, v"),
             "fuses the three projections, right, then splits them as if q, k, v were interleaved per feature")),
    ("04", M("rope_cache", "angles = torch.cat((angles, angles), dim=-1)  # (T, hd): feature i and i + hd/2 share an angle\n"
             "    return angles.cos(), angles.sin()",
             "rot = torch.polar(torch.ones_like(angles), angles)  # e^{i angle}, (T, hd/2)\n"
             "    return torch.cat((rot.real, rot.real), dim=-1), torch.cat((rot.imag, -rot.imag), dim=-1)",
             ("sign", "sin table", "negative", "rotate_half", "twice", "direction"),
             "builds the tables from complex exponentials, right, then negates the sine's second half: rotate_half already carries the sign")),
    ("04", M("apply_rope", "return x * cos + rotate_half(x) * sin",
             "c, s = cos[..., : x.shape[-1] // 2], sin[..., : x.shape[-1] // 2]  # each pair's angle once\n"
             "    x1, x2 = x.chunk(2, dim=-1)\n"
             "    return torch.cat((x1 * c - x2 * s, x2 * c - x1 * s), dim=-1)",
             ("sign", "rotation", "x1 * s", "direction", "second half"),
             "writes the rotation out on the halves, then subtracts x1·sin in the second half where it adds")),
    ("04", M("rotary_attention", "return tinylm.causal_attention(q, k, v)",
             "v = apply_rope(v, cos, sin, start_pos)  # every input gets its position\n    return tinylm.causal_attention(q, k, v)",
             ("values", "v", "rotated", "only q and k"),
             "rotates the values too: position belongs in the scores only")),
    ("05", M("swiglu", "gate = F.silu(x @ w_gate.T)", "a = x @ w_gate.T\n    gate = a / (1 + torch.exp(a))  # silu written out",
             ("silu", "sigmoid", "exp(-", "sign", "activation"),
             "writes SiLU out as a / (1 + exp(a)): the sign of the exponent is lost")),
    ("05", M("swiglu", "gate = F.silu(x @ w_gate.T)  # (B, T, d_ff): the nonlinearity lives on the gate only\n"
             "    up = x @ w_up.T              # (B, T, d_ff): linear",
             "gate, up = (x @ torch.cat((w_gate, w_up)).T).chunk(2, dim=-1)  # one matmul for both\n"
             "    gate, up = F.silu(up), gate",
             ("gate", "up", "silu", "wrong branch", "swapped"),
             "fuses gate and up into one matmul, right, then applies SiLU and hands the branches over crossed")),
    # https://github.com/epfLLM/Megatron-LLM/issues/64
    ("05", M("swiglu_hidden", "multiple * math.ceil(8 * d_model / 3 / multiple)", "multiple * int(8 * d_model / 3 / multiple)",
             ("round up", "ceil", "floor", "rounded down", "multiple"),
             "rounds 8/3 d down with int() as in Megatron's SwiGLU size, not up (github.com/epfLLM/Megatron-LLM/issues/64)")),
    # https://github.com/huggingface/transformers/issues/27139
    ("05", M("swiglu_hidden", "multiple * math.ceil(8 * d_model / 3 / multiple)", "multiple * math.ceil(4 * d_model / multiple)",
             ("8/3", "4 *", "4·d", "2/3", "factor"),
             "takes the classic 4·d width where SwiGLU uses 2/3 of it (github.com/huggingface/transformers/issues/27139)")),
    ("05", M("pre_norm_block", "    x = x + attn(attn_norm(x))  # the branch reads a normalised copy; the stream stays a sum\n",
             "    h = attn_norm(x)\n    x = h + attn(h)              # the residual taken from the normalised copy\n",
             ("residual", "stream", "normalised copy", "un-normalised", "skip"),
             "adds the attention to the normalised copy: the residual stream loses its scale")),
    ("05", M("Transformer", "y = y.transpose(1, 2).reshape(B, T, self.n_heads * self.head_dim)",
             "y = y.permute(0, 2, 3, 1).reshape(B, T, -1)",
             ("merge", "order", "interleav", "heads side by side", "layout"),
             "merges the heads with the head axis last: right shape, features of the heads interleaved")),
    ("05", M("Transformer", "return tied_logits(self.norm(x), self.lm_head.weight)     # (B, T, V)",
             "return self.lm_head(x)                                    # (B, T, V): the module does the matmul",
             ("final norm", "self.norm", "norm", "normalis"),
             "calls the head module instead of tied_logits, right, but the final norm is gone on the way")),
    ("05", M("param_counts", "q_and_o = 2 * d * config.n_heads * hd ", "q_and_o = 2 * d * d ",
             ("head_dim", "n_heads * head_dim", "d_model", "q_proj", "o_proj"),
             "counts q_proj and o_proj as d x d: right only while n_heads · head_dim = d_model",
             regime="head_dim set apart from d_model / n_heads")),
    ("06", M("attention_step", "mask = tinylm.causal_mask(T, start + T).to(x.device)",
             "mask = torch.ones(T, start + T, dtype=torch.bool, device=x.device).tril()",
             ("diagonal", "offset", "bottom-right", "start", "cached"),
             "builds its own mask with tril() and no offset: a decode step sees only the first key", regime="a step after the prefill")),
    ("06", M("generate_greedy", "next_id = logits.argmax(dim=-1, keepdim=True)", "next_id = logits.argmax().view(1, 1)",
             ("batch", "flat", "argmax", "every row", "(b, 1)"),
             "takes the argmax over the flattened batch: right for one prompt, one token for a batch",
             regime="a batch of more than one")),
    # https://github.com/tloen/alpaca-lora/issues/315
    ("06", M("generate_left_padded", "positions = (mask.long().cumsum(-1) - 1).clamp(min=0)",
             "positions = torch.ones_like(mask, dtype=torch.long).cumsum(-1) - 1",
             ("position", "padding", "left pad", "first real token", "cumsum"),
             "counts positions over the padding too: each row starts where its padding starts "
             "(github.com/tloen/alpaca-lora/issues/315)", regime="prompts of different lengths")),
    # https://github.com/unslothai/unsloth/pull/4078
    ("06", M("generate_left_padded", "ids, positions = next_id[:, None], positions[:, -1:] + 1",
             "ids, positions = next_id[:, None], torch.full((B, 1), mask.shape[1])",
             ("position", "padding", "per row", "cache length", "shared"),
             "hands every row the cache's length as position, as unsloth's shared cache_position did "
             "(github.com/unslothai/unsloth/pull/4078)", regime="prompts of different lengths")),
    # 07
    ("07", M("gqa_step", "k_all = torch.cat((past_k, k), dim=2)                 # (B, n_kv, start + T, hd): the small cache",
             "k_all = torch.cat((past_k, repeat_kv(k, n_rep)), dim=2)  # (B, n_heads, start + T, hd)",
             ("n_kv", "repeat", "cache", "small cache", "heads"),
             "repeats the new keys before caching them: a GQA cache of n_kv heads no longer fits", regime="fewer kv heads")),
    ("07", M("decode_bytes_per_token", "hd * context_len * size ", "hd * (context_len + 1) * size ",
             ("context_len", "one position", "off by one", "kv_cache"),
             "counts the new token's K and V too: context_len + 1 positions")),
    # 08
    # https://github.com/dmlc/gluon-nlp/issues/1481
    ("08", M("top_p_filter", "sorted_logits, order = logits.sort(dim=-1, descending=True)  # (..., V) each\n"
             "    probs = sorted_logits.softmax(dim=-1)\n"
             "    mass_before = probs.cumsum(dim=-1) - probs                    # mass of the strictly more likely tokens\n"
             "    drop_sorted = mass_before >= p                                # the crossing token has mass_before < p\n"
             "    drop = drop_sorted.scatter(-1, order, drop_sorted)            # back to vocabulary order",
             "probs = logits.softmax(dim=-1)\n    drop = probs.cumsum(dim=-1) - probs >= p",
             ("sort", "descending", "vocabulary order", "most likely"),
             "sums the mass in vocabulary order, never sorting (github.com/dmlc/gluon-nlp/issues/1481)")),
    ("08", M("top_p_filter", "drop = drop_sorted.scatter(-1, order, drop_sorted)",
             "drop = drop_sorted.gather(-1, order.argsort(dim=-1, descending=True))",
             ("inverse", "argsort", "permutation", "vocabulary order", "unsort"),
             "undoes the sort by gather with argsort, right, but a descending argsort is no inverse")),
    ("08", M("top_p_filter", "mass_before = probs.cumsum(dim=-1) - probs ", "mass_before = probs.cumsum(dim=-1).roll(1, dims=-1) ",
             ("first token", "roll", "wrap", "mass before", "shift"),
             "shifts the cumulative mass by roll: the total (1) wraps round onto the most likely token")),
    # https://github.com/ml-explore/mlx-lm/pull/388
    ("08", M("sample_next", "    if top_k is not None:\n        logits = top_k_filter(logits, top_k)\n"
             "    if top_p is not None:\n        logits = top_p_filter(logits, top_p)",
             "    if top_p is not None:\n        logits = top_p_filter(logits, top_p)\n"
             "    if top_k is not None:\n        logits = top_k_filter(logits, top_k)",
             ("order", "top_k first", "top_p", "before"),
             "applies top-p before top-k: the nucleus is taken over the whole vocabulary (github.com/ml-explore/mlx-lm/pull/388)",
             regime="top_k and top_p together")),
    ("08", M("sample_next", "    logits = logits / temperature             # on logits, before any filter\n",
             "", ("temperature", "before any filter", "never applied"),
             "drops the temperature line while moving it: the draws ignore the temperature")),
    ("08", M("generate", "sample_next(logits, temperature, top_k, top_p, generator)", "sample_next(logits, temperature, top_k, top_p)",
             ("generator", "seed", "reproducib", "global rng"),
             "passes every argument on to sample_next but the generator", regime="a caller's generator")),
    ("08", M("generate", "idx = torch.cat((idx, next_id[:, None]), dim=1)", "idx = torch.cat((idx, next_id.unsqueeze(0)), dim=1)",
             ("batch", "shape", "(b, 1)", "rows"),
             "appends next_id as a row (1, B): right for a batch of one only", regime="a batch of more than one")),
    # 09
    ("09", M("get_batch", "idx = starts[:, None] + torch.arange(seq_len + 1)                                # (B, T + 1) positions\n"
             "    window = data[idx].long()",
             "window = data.unfold(0, seq_len + 1, 1)[starts]  # (B, T + 1) windows as a view",
             ("int64", "dtype", "long", "uint8"),
             "takes the windows by unfold, right, then forgets the conversion to int64", regime="uint8 data")),
    ("09", M("lm_loss", "return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)",
             "logp = logits.log_softmax(dim=-1)\n"
             "    nll = -logp.gather(-1, targets.clamp(min=0)[..., None]).squeeze(-1)  # (B, T)\n"
             "    return nll.mean()",
             ("padding", "-100", "ignore", "mean over"),
             "writes the NLL by log_softmax and gather, right, then averages over the padded targets too", regime="padding")),
    ("09", M("lm_loss", "return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)",
             "p = logits.softmax(dim=-1).gather(-1, targets.clamp(min=0)[..., None]).squeeze(-1)\n"
             "    keep = targets != -100\n"
             "    return -p.log()[keep].mean()",
             ("log_softmax", "underflow", "inf", "log of", "stable"),
             "takes the log of the softmax's probability: it underflows to 0 and the loss to inf for large logits",
             regime="large logits")),
    # https://github.com/Tencent-Hunyuan/UniRL/pull/223
    ("09", M("lr_schedule", "progress = (step - warmup_steps) /", "progress = step /",
             ("warmup", "progress", "decay", "early"),
             "counts the decay from step 0, not from the warmup's end: it reaches min_lr early "
             "(github.com/Tencent-Hunyuan/UniRL/pull/223)")),
    ("09", M("train_step", "model.train()                                # dropout on", "model.train(model.training)                  # dropout on",
             ("train mode", "eval", "dropout"),
             "keeps the caller's mode: a model handed over in eval mode trains without dropout", regime="a model in eval mode")),
    ("09", M("train_step", "return loss.item()                           # a float", "return lm_loss(model(x), y).item()  # a float",
             ("before the step", "after the step", "loss"),
             "reports a fresh loss computed after the update")),
    ("09", M("train_step_accumulated", "        total += summed.item()\n    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)",
             "        total += summed.item()\n        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)",
             ("clip", "once", "micro-batch", "whole batch"),
             "clips inside the loop, after each micro-batch", regime="a clip that bites")),
    ("09", M("train_step_costs", "+ 3 * attention_matmuls,", "+ attention_matmuls,",
             ("backward", "attention", "3 x", "forward"),
             "counts the attention matmuls forward only")),
    # 10
    ("10", M("bigram_nll", "counts.sum(dim=1, keepdim=True) + 256 * alpha", "counts.sum(dim=0, keepdim=True) + 256 * alpha",
             ("row", "column", "normalis", "previous byte", "dim=1"),
             "normalises the columns: the probabilities of next bytes given a previous one no longer sum to 1")),
    ("10", M("bigram_nll", "-probs.log()[val[:-1], val[1:]].mean()", "-probs[val[1:], val[:-1]].log().mean()",
             ("order", "prev, next", "swapped", "index"),
             "looks the pairs up as [next, prev] after indexing before the log")),
    ("04", M("rope_cache", "angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float32), inv_freq)",
             "angles = torch.arange(1, max_seq_len + 1, dtype=torch.float32)[:, None] * inv_freq  # broadcast outer product",
             ("position 0", "from 1", "off by one", "first position", "identity"),
             "builds the outer product by broadcasting, right, but numbers the positions from 1: position 0 is rotated")),
    ("10", M("nll_sum_and_count", "count = int((targets != ignore_index).sum())", "count = int(targets.ne(ignore_index).sum(dim=-1)[0])",
             ("count", "batch", "rows", "first row"),
             "counts the scored targets of the first row only", regime="a batch of more than one row")),
    ("10", M("bigram_nll", "torch.bincount(train[:-1] * 256 + train[1:], minlength=256 * 256)", "torch.bincount(train[:-1] * 256 + train[1:])",
             ("minlength", "65536", "256 * 256", "missing pair", "shape"),
             "counts the pairs without minlength: the table is 256 x 256 only when the pair (255, 255) occurs")),
    ("02", M("rms_norm", "x32.pow(2).mean(dim=-1, keepdim=True)", 'torch.einsum("...d,...d->", x32, x32) / x.shape[-1]',
             ("last axis", "per token", "whole tensor", "all tokens", "each token"),
             "takes the mean square by an einsum, then sums over every axis: one statistic for the whole tensor")),
    ("07", M("gqa_step", "mask = tinylm.causal_mask(T, start + T).to(x.device)", "mask = tinylm.causal_mask(T, T).to(x.device)",
             ("kv_len", "cached", "start + t", "square", "offset"),
             "builds a square mask over the new tokens: the cached keys are left out of its width", regime="a step after the prefill")),
    ("07", M("decode_bytes_per_token", "kv_cache = 2 * L * config.n_kv_heads * hd", "kv_cache = 2 * config.n_kv_heads * hd",
             ("n_layers", "every block", "layers", "one layer"),
             "counts the cache of one block")),
]

SAME = [
    ("01", M("embed", "return weight[ids]", "return weight.index_select(0, ids.reshape(-1)).reshape(*ids.shape, weight.shape[-1])",
             (), "gathers by index_select over the flattened ids, reshaped back")),
    ("02", M("rms_norm", "inv_rms = torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)",
             "inv_rms = 1 / (x32 * x32).mean(dim=-1, keepdim=True).add(eps).sqrt()", (), "1 / sqrt written out")),
    ("02", M("layer_norm", "centred = x - x.mean(dim=-1, keepdim=True)              # (..., d)\n"
             "    var = centred.pow(2).mean(dim=-1, keepdim=True)         # (..., 1): biased, divides by d",
             "var, mean = torch.var_mean(x, dim=-1, correction=0, keepdim=True)\n    centred = x - mean",
             (), "torch.var_mean unpacked in its order")),
    ("03", M("causal_mask", "allowed = torch.ones(q_len, kv_len, dtype=torch.bool)\n    return allowed.tril(diagonal=kv_len - q_len)",
             "rows = torch.arange(q_len)[:, None] + (kv_len - q_len)\n    return rows >= torch.arange(kv_len)",
             (), "the mask from positions")),
    ("03", M("causal_attention", 'scores = scores.masked_fill(~mask, float("-inf"))',
             'scores = torch.where(mask, scores, torch.tensor(float("-inf"), dtype=scores.dtype, device=scores.device))',
             (), "torch.where for masked_fill")),
    ("03", M("causal_attention", "mask = causal_mask(q.shape[-2], k.shape[-2]).to(q.device)",
             "mask = causal_mask(k.shape[-2])[k.shape[-2] - q.shape[-2]:].to(q.device)",
             (), "a square mask's last rows")),
    ("04", M("apply_rope", "return x * cos + rotate_half(x) * sin",
             "c, s = cos[..., : x.shape[-1] // 2], sin[..., : x.shape[-1] // 2]\n"
             "    x1, x2 = x.chunk(2, dim=-1)\n"
             "    return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)",
             (), "the rotation written out on the halves")),
    ("05", M("swiglu", "gate = F.silu(x @ w_gate.T)", "a = F.linear(x, w_gate)\n    gate = a * torch.sigmoid(a)",
             (), "SiLU written out after F.linear")),
    ("05", M("Transformer", "self.lm_head.weight = self.tok_emb.weight  # one Parameter, two names",
             "self.tok_emb.weight = self.lm_head.weight  # one Parameter, two names", (), "the tie made the other way round")),
    ("06", M("cache_update", "v_all = torch.cat((past_v, v), dim=2)", "v_all = torch.cat([past_v, v], dim=-2)",
             (), "a list and a negative axis")),
    ("07", M("repeat_kv", "x = x[:, :, None].expand(B, n_kv, n_rep, T, hd)  #", "x = x.unsqueeze(2).expand(-1, -1, n_rep, -1, -1)  #",
             (), "unsqueeze and expand with -1")),
    ("08", M("top_p_filter", "drop = drop_sorted.scatter(-1, order, drop_sorted)",
             "drop = torch.empty_like(drop_sorted).scatter_(-1, order, drop_sorted)", (), "scatter into a fresh tensor")),
    ("09", M("lm_loss", "return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)",
             "logp = logits.log_softmax(dim=-1)\n"
             "    nll = -logp.gather(-1, targets.clamp(min=0)[..., None]).squeeze(-1)\n"
             "    return nll[targets != -100].mean()", (), "log_softmax and gather, masked mean")),
]
