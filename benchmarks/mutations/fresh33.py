"""A thirty-third held-out set of learner mistakes ("fresh33"), written without reading the checks: no file of
autograder/checks/ or tests/checks/, no autograder/diagnosis_*.py, no source of bench_diagnostics.py, no diagnosis
section of docs/benchmarks.md, no tests/course/test_docs.py; no check cell, notebook check or bench_diagnostics run,
no entry tried against a check, no git log or git show of main's history. Other sets' entries: see the slips.

Opened or run. The brief, HELPER_RULES.md, mkwt.sh (cat); mkwt.sh fresh33; git status. `ls` of /work/wt/ (names
only), the worktree root, benchmarks/, benchmarks/mutations/ (names), notebooks/*/, tinylm/; `wc -l` of tinylm/*.py
and of the benchmark files named below. Whole: verify_unseen.py, heldout_duplicates.py, mutations/__init__.py,
verify_heldout.py, unseen_probes.py, unseen_probes_fresh32.py; the first 120 lines of unseen.py, 80 of
unseen_probes_fresh31.py, 60 of unseen_probes_later.py; fresh32.py's docstring. tinylm: kv_cache.py, model.py, the
first 60 lines of config.py. Through notebook_cells: every answer cell, every setup cell whole, the check names only.
Markdown: the cells naming an exercise in all ten notebooks, and in 06 to 10 the cells that name an exercise
function or open with a heading (each cut at 3,000 characters); the markdown lengths. test_benchmarks.py lines
150-200; a grep of the four registration files for "fresh32" (SETS finds a module by itself, __init__.py is
unchanged); the ruff section of pyproject.toml. 15 searches of issue threads, no file read from the code index,
about 70 URLs grepped over benchmarks/mutations/. Runs: the fresh32 probe chain on the solution (names and
values); torch one-liners (axis/keepdims aliases, 8/3 rounding, topk with sorted=False); heldout_duplicates and
verify_unseen --set fresh33 (about seven runs each), the two fresh33 tests, pyflakes on the changed modules, awk
line lengths.

Slips. An ast listing of fresh32.py printed its import line and the names of its module-level constants (no
entry). To see why one entry matched, a script compared my decode_bytes_per_token entry with every set's entries
of that cell and original text, printing only set names: six sets edit that line, fresh3 holds my entry. The
setup cells import autograder.checks names, and the markdown of 04 to 09 says what some checks compare.
heldout_duplicates matched 27 of 84 entries first (18 mistakes, 9 SAME; among them a sqrt(d) embedding scale,
x @ w in self_attention, interleaved tables, positions from 1, unclamped pad positions, context_len + 1, generate
under inference_mode, swapped top_k/top_p arguments, warmup from step 0, the schedule over total - warmup,
clip_grad_value_, 6N, model.device, s * n, bits per byte times bytes_per_token, a transposed bigram lookup, a mean
over len(val)), then 4 of 79 and 1 of 77 (2 ** loss for perplexity): each was replaced by another idea, not
reworded. The BERT mask changed no probe until unseen_probes_fresh33.py added future keys scoring 2.8e4 above the
past; topk(sorted=False) changed none (the CPU leaves the k-th last) and was dropped, as was a SAME (transformers'
ascending top-p), which the exact-p probe told apart by rounding.

Focus, each mistake counted once. Ported (14): torch.take for np.take, a TorchScript clone of the tie, the
Annotated Transformer's LayerNorm, F.softmax without dim, T from axis 1, HF's unsqueeze_dim=1, GeGLU, GPT-J's
parallel block, cat on dim=-3, T5's scale=1.0, Categorical for jax.random.categorical, .logits, label smoothing,
Keras' trainable. Small effects (12): ids clamped, sum / (d - 1), eps as a floor, BERT's -1e4, the last position
only, round(x + 0.5), a square mask, p + 1e-6, exp without the max, starts from 1, pi as 3.14, gradients of the
matmul weights only. Conventions (15): F.linear of weight.T, nn.Transformer's mask, MACs, evens then odds over
the whole matrix, Meta's w1/w3 read the other way, a float mask to SDPA, -100 as pad id, the mask one slot late,
one row of an untied embedding, k clamped to V - 1, ignore_index=0, nll_loss on logits, probabilities into
cross_entropy, NLL in bits, column sums of [prev, next]. Answers that meet (10): a zero gain under the learner's
rms_norm, the permutation on o_proj, cache_update's arguments reordered, the new tokens only, generate_greedy on a
padded batch, repeat_kv given the head count, (B, 1, V) into sample_next, zero_grad after the step, train_step per
micro-batch, nll_sum_and_count given the pad id. Public threads (10, URL above the entry and in its reason):
jadore801120/attention-is-all-you-need-pytorch#138, Blaizzy/mlx-vlm#2041, Blaizzy/mlx-vlm#112,
pytorch/pytorch#170415, karpathy/nanochat#795, microsoft/onnxscript#2408, OpenTabular/DeepTab#453,
keras-team/keras#21772, JIA-Lab-research/LongLoRA#134, pytorch/pytorch#42805. SAME (16): torch.inner, axis and
keepdims, the variance by einsum, the mask as a comparison, narrow, the block through pre_norm_block, a negated
floor division, attention factored, argmax of softmax, bool arithmetic, stacked copies, gather by argsort, a
squared cosine, 2 to the bits, len of the scored targets, histc over unit bins.

Counts: 61 mistakes (01: 5, 02: 5, 03: 4, 04: 5, 05: 5, 06: 9, 07: 5, 08: 7, 09: 10, 10: 6), 17 with a regime,
16 SAME, 10 public threads; `expect` holds words a check that found the mistake would likely say, `in_lists`
stays False."""
from __future__ import annotations

from .unseen import Unseen as M

# answer-cell text that an entry spans over several lines, or that more than one entry edits
SWIGLU_GATE_UP = ("gate = F.silu(x @ w_gate.T)  # (B, T, d_ff): the nonlinearity lives on the gate only\n"
                  "    up = x @ w_up.T              # (B, T, d_ff): linear")
PRE_NORM = ("x = x + attn(attn_norm(x))  # the branch reads a normalised copy; the stream stays a sum\n"
            "    x = x + mlp(mlp_norm(x))    # the MLP reads the stream after attention has written to it\n"
            "    return x")
TABLES_04 = ("cos = cos[start_pos:start_pos + T].to(x.dtype)  # (T, hd), broadcasts over (B, H)\n"
             "    sin = sin[start_pos:start_pos + T].to(x.dtype)")
PADDED_LOOP = (
    "    new = []\n"
    "    with torch.no_grad():                                               # no graph: nothing here is trained\n"
    "        for _ in range(max_new_tokens):\n"
    "            logits = model(ids, cache=cache, positions=positions, attention_mask=mask)[:, -1]  # (B, V)\n"
    "            next_id = logits.argmax(dim=-1)                             # (B,)\n"
    "            new.append(next_id)\n"
    "            ids, positions = next_id[:, None], positions[:, -1:] + 1    "
    "# (B, 1) each: one past the row's last position\n"
    "            mask = torch.cat((mask, mask.new_ones(B, 1)), dim=1)        # (B, cached + 1): the new token is real\n"
    "    return torch.stack(new, dim=1)                                      # (B, max_new_tokens)")
DRAW_08 = ("probs = logits.softmax(dim=-1)            # (B, V): filtered tokens get exactly 0\n"
           "    return torch.multinomial(probs, num_samples=1, generator=generator).squeeze(-1)  # (B, 1) -> (B,)")
STEP_09 = ("    optimizer.zero_grad(set_to_none=True)        # gradients accumulate otherwise\n"
           "    loss.backward()                              # d loss / d every parameter\n"
           "    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)  # global gradient norm <= grad_clip\n"
           "    optimizer.step()                             # the AdamW update\n")
MICRO_LOOP = (
    "    for x, y in micro_batches:\n"
    "        logits = model(x)                                             # (b, T, V)\n"
    '        summed = F.cross_entropy(logits.flatten(0, 1), y.flatten(), ignore_index=-100, reduction="sum")\n'
    "        (summed / n_tokens).backward()                                # .grad += this micro-batch's share\n"
    "        total += summed.item()\n"
    "    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)    # once: the whole batch's gradient\n"
    "    optimizer.step()                                                  # once\n")
COSINE = "return min_lr + 0.5 * (1 + math.cos(math.pi * min(progress, 1.0))) * (max_lr - min_lr)"
NLL_10 = "nll = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=ignore_index,"
COUNTS = "counts = torch.bincount(train[:-1] * 256 + train[1:], minlength=256 * 256).view(256, 256).double()"
SMOOTHED = "probs = (counts + alpha) / (counts.sum(dim=1, keepdim=True) + 256 * alpha)"

MUTATIONS = {
    "01": [
        M("embed", "return weight[ids]", "return torch.take(weight, ids)  # np.take(weight, ids, axis=0)",
          ("shape", "flat", "rows", "element", "(..., d)", "take"),
          "retypes np.take(weight, ids, axis=0) as torch.take, which has no axis: it reads single numbers of the "
          "flattened table, one per id, not rows"),
        M("embed", "return weight[ids]", "return weight[ids.clamp(0, weight.shape[0] - 1)]  # a stray id cannot crash",
          ("out of range", "beyond", "clamp", "index", "vocabulary size", "invalid id"),
          "clamps the ids into the table: an id past the vocabulary silently reads the last row instead of failing",
          regime="an id beyond the table"),
        # https://github.com/jadore801120/attention-is-all-you-need-pytorch/issues/138
        M("tied_logits", "return x @ weight.T",
          "return (x @ weight.T) * x.shape[-1] ** -0.5  # shared-weight logit scale",
          ("scale", "sqrt", "factor", "d_model", "temperature", "magnitude"),
          "scales the tied logits by d_model^-0.5 as the shared-embedding Transformer port does "
          "(jadore801120/attention-is-all-you-need-pytorch#138): every logit shrinks by sqrt(d)"),
        M("tied_logits", "return x @ weight.T", "return F.linear(x, weight.T)  # a linear layer with the head's weight",
          ("transpose", "layout", "[d_out, d_in]", "F.linear", "shape", "weight.T"),
          "hands F.linear the transposed table: F.linear already multiplies by its weight's transpose, so it "
          "computes x @ weight, which does not fit (d vs V)"),
        M("tie_weights", "lm_head.weight = tok_emb.weight",
          "lm_head.weight = nn.Parameter(tok_emb.weight.clone())  # as _tie_or_clone_weights does for TorchScript",
          ("same parameter", "is tok_emb.weight", "copy", "clone", "two parameters", "not tied"),
          "ports the TorchScript branch of transformers' _tie_or_clone_weights: a copy in a new Parameter, equal "
          "now, apart after the first optimizer step"),
    ],
    "02": [
        # https://github.com/Blaizzy/mlx-vlm/issues/2041
        M("rms_norm", "return weight * (x32 * inv_rms).to(x.dtype)",
          "return (1 + weight) * (x32 * inv_rms).to(x.dtype)  # Gemma's gain, stored as an offset from 1",
          ("gain", "1 + weight", "offset", "weight", "doubled", "scale"),
          "applies Gemma's (1 + weight) gain to a gain stored centred at 1, the convention mix-up of "
          "Blaizzy/mlx-vlm#2041: a fresh gain of ones doubles every output"),
        M("rms_norm", "x32.pow(2).mean(dim=-1, keepdim=True)",
          "x32.pow(2).sum(dim=-1, keepdim=True) / (x.shape[-1] - 1)",
          ("d - 1", "n - 1", "mean", "bessel", "unbiased", "divides"),
          "divides the sum of squares by d - 1, as for a sample variance: every output shrinks by sqrt((d-1)/d), "
          "0.1% at d = 512"),
        M("rms_norm", "torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)",
          "torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True).clamp(min=eps))  # eps as a floor, as F.normalize",
          ("eps", "epsilon", "clamp", "floor", "added", "small values"),
          "uses eps as F.normalize does, a floor under the mean square instead of a term added to it: the same "
          "for large tokens, different where the mean square is near eps", regime="a mean square near eps"),
        M("layer_norm", "return weight * centred * torch.rsqrt(var + eps) + bias",
          "return weight * centred / (var.sqrt() + eps) + bias  # the Annotated Transformer's LayerNorm",
          ("eps", "epsilon", "inside the square root", "sqrt", "outside"),
          "ports the Annotated Transformer's LayerNorm: eps added to the standard deviation, outside the root, "
          "which differs where the variance is near eps", regime="an eps comparable with the variance"),
        M("RMSNorm", "self.weight = nn.Parameter(torch.ones(dim))",
          "self.weight = nn.Parameter(torch.zeros(dim))  # zero-centred gain, as Gemma initialises it",
          ("ones", "zeros", "initial", "gain starts", "all zero", "init"),
          "initialises the gain at zeros as a (1 + w) norm would, while the learner's own rms_norm multiplies by "
          "weight itself: a fresh RMSNorm outputs zeros"),
    ],
    "03": [
        M("causal_mask", "return allowed.tril(diagonal=kv_len - q_len)",
          "return allowed.triu(diagonal=kv_len - q_len + 1)  # True above the diagonal, nn.Transformer's meaning",
          ("true", "inverted", "opposite", "future", "masked", "allowed"),
          "returns nn.Transformer's mask, True where attention is forbidden: the function promises True where "
          "query i may attend, and causal_attention inverts it once more"),
        M("causal_attention", 'scores = scores.masked_fill(~mask, float("-inf"))',
          "scores = scores + (~mask).to(scores.dtype) * -10000.0  # BERT's additive mask",
          ("-inf", "-10000", "additive", "finite", "leak", "large negative"),
          "ports BERT's additive mask of -10000: a future key that scores more than 1e4 above the allowed ones "
          "still gets the weight", regime="future scores 1e4 above the allowed ones"),
        M("causal_attention", "weights = scores.softmax(dim=-1)",
          "weights = F.softmax(scores)  # tf.nn.softmax works on the last axis by default",
          ("dim", "axis", "over keys", "heads", "sum to 1", "softmax"),
          "calls F.softmax without dim as tf.nn.softmax is called: torch's implicit choice for a 4-D tensor is "
          "axis 1, the heads"),
        M("attention_flops",
          "projection = 2 * B * T * d * d              # (B·T, d) @ (d, d): 2 FLOPs per multiply-add\n"
          "    per_head = 2 * T * T * head_dim",
          "projection = B * T * d * d                  # multiply-accumulates, as fvcore reports them\n"
          "    per_head = T * T * head_dim",
          ("MAC", "multiply-add", "2 FLOPs", "half", "factor 2", "twice"),
          "counts multiply-accumulates, the unit fvcore and thop report, where the convention is 2 FLOPs each: "
          "every entry is half"),
    ],
    "04": [
        # https://github.com/Blaizzy/mlx-vlm/pull/112
        M("apply_rope", "x1, x2 = x.chunk(2, dim=-1)\n    return torch.cat((-x2, x1), dim=-1)",
          "x1, x2 = x[..., ::2], x[..., 1::2]\n    return torch.stack((-x2, x1), dim=-1).flatten(-2)"
          "  # rotate_every_two",
          ("halves", "rotate_half", "interleav", "pairs", "every two", "layout"),
          "writes GPT-J's rotate_every_two under the name rotate_half, the mix of Blaizzy/mlx-vlm#112: neighbouring "
          "features are paired while the tables pair the halves"),
        M("apply_rope", "T = x.shape[-2]", "T = x.shape[1]  # (B, T, H, hd), flash-attn's layout",
          ("axis", "shape", "positions", "heads", "x.shape[-2]", "broadcast"),
          "reads the length from axis 1 as in the (B, T, H, hd) layout of flash-attn: here that is the heads, so "
          "the tables have the wrong number of rows"),
        M("apply_rope", TABLES_04,
          "cos = cos[start_pos:start_pos + T].unsqueeze(1).to(x.dtype)  # unsqueeze_dim=1, as apply_rotary_pos_emb\n"
          "    sin = sin[start_pos:start_pos + T].unsqueeze(1).to(x.dtype)",
          ("broadcast", "axis", "unsqueeze", "heads", "(T, hd)", "shape"),
          "keeps transformers' unsqueeze_dim=1, meant for tables of shape (B, T, hd): on (T, hd) tables it puts "
          "the positions against the heads axis"),
        M("interleaved_to_half", "return pairs.transpose(1, 2).reshape(rows, d_in)",
          "return torch.cat((w[0::2], w[1::2]))  # the even rows, then the odd ones",
          ("per head", "across heads", "block", "head h", "each head"),
          "reorders the rows evens then odds over the whole matrix instead of within each head's block: right for "
          "one head, rows cross heads otherwise", regime="more than one head"),
        M("interleaved_to_half", "return q_proj, k_proj, wv, wo",
          "return q_proj, k_proj, wv, interleaved_to_half(wo.T, n_heads).T  # o_proj reads the heads' features too",
          ("o_proj", "wo", "unchanged", "values", "only q and k", "output projection"),
          "runs the learner's own permutation over o_proj's columns as well: the values were not permuted, so "
          "o_proj now reads each head's features in the wrong order"),
    ],
    "05": [
        M("swiglu", "gate = F.silu(x @ w_gate.T)", 'gate = F.gelu(x @ w_gate.T, approximate="tanh")  # as in Gemma',
          ("silu", "gelu", "activation", "swish", "sigmoid"),
          "keeps Gemma's GeGLU activation, GELU with the tanh approximation, where Llama's MLP uses SiLU"),
        M("swiglu", SWIGLU_GATE_UP,
          "gate = F.silu(x @ w_up.T)    # Meta's w1, w3 read the other way round\n    up = x @ w_gate.T",
          ("swapped", "gate", "up", "w_gate", "w_up", "order"),
          "reads Meta's w1/w3 naming the other way round: the SiLU is applied to the up projection, the gate "
          "stays linear"),
        M("pre_norm_block", PRE_NORM, "return x + attn(attn_norm(x)) + mlp(mlp_norm(x))  # GPT-J's parallel block",
          ("parallel", "after attention", "reads x", "stream", "sequential", "h = x +"),
          "ports GPT-J's parallel block: the MLP reads the stream before attention has written to it"),
        M("Transformer", "return tied_logits(self.norm(x), self.lm_head.weight)",
          "return tied_logits(self.norm(x[:, [-1], :]), self.lm_head.weight)  # nanoGPT's inference shortcut",
          ("last position", "every position", "(B, T, V)", "shape", "[:, -1]", "T positions"),
          "keeps nanoGPT's inference shortcut of running the head on the last position only: training and "
          "evaluation need the logits of every position"),
        M("swiglu_hidden", "return multiple * math.ceil(8 * d_model / 3 / multiple)",
          "return multiple * round(8 * d_model / 3 / multiple + 0.5)  # round up by adding a half",
          ("round", "ceil", "already a multiple", "exact", "up"),
          "rounds up by adding one half and rounding: Python rounds halves to even, so an exact odd multiple "
          "(8/3 d = 32 with multiple 32) goes one multiple too far", regime="8/3 d_model already a multiple"),
    ],
    "06": [
        M("cache_update",
          "k_all = torch.cat((past_k, k), dim=2)  # positions are axis 2: the past first, then the new tokens\n"
          "    v_all = torch.cat((past_v, v), dim=2)",
          "k_all = torch.cat((past_k, k), dim=-3)  # the sequence axis of the (B, T, H, hd) layout\n"
          "    v_all = torch.cat((past_v, v), dim=-3)",
          ("axis", "dim=2", "sequence axis", "heads", "dim=1", "positions"),
          "concatenates on dim=-3, the sequence axis of flash-attn's (B, T, H, hd) layout: in (B, H, T, hd) it "
          "stacks the new tokens as extra heads"),
        M("attention_step", "k_all, v_all = cache_update(past_k, past_v, k, v)",
          "k_all, v_all = cache_update(past_k, k, past_v, v)  # each past next to its new",
          ("order", "argument", "values", "keys", "cache_update"),
          "calls the learner's cache_update with each past next to its new tensor, not in its (past_k, past_v, "
          "k, v) order: the keys come back joined with the past values"),
        # https://github.com/pytorch/pytorch/pull/170415
        M("attention_step", "mask = tinylm.causal_mask(T, start + T).to(x.device)",
          "mask = torch.ones(T, start + T, dtype=torch.bool).triu(start + 1).to(x.device)  # True = masked",
          ("true", "inverted", "future", "opposite", "allowed", "mask"),
          "builds nn.MultiheadAttention's mask, True where attention is forbidden, and hands it to SDPA, whose True "
          "means may attend (pytorch/pytorch#170415): each query sees only its future"),
        M("attention_step", "attn_mask=mask)", "attn_mask=mask.to(q.dtype))",
          ("bool", "float", "additive", "dtype", "-inf", "mask"),
          "casts the boolean mask to q's dtype: SDPA adds a float mask, so allowed keys get +1 and the future +0, "
          "nothing is masked"),
        # https://github.com/karpathy/nanochat/pull/795
        M("generate_greedy", "cache.reset()                                   # stale positions",
          "cache = tinylm.KVCache(model.config, prompt.shape[0])  # a fresh one of my own; stale positions",
          ("dtype", "cache", "bfloat16", "given", "the caller's"),
          "allocates a float32 cache of its own instead of resetting the one it is given, as nanochat's engine did "
          "(karpathy/nanochat#795): a bfloat16 model then writes into the wrong dtype", regime="a bfloat16 model"),
        M("generate_greedy", "    return idx\n",
          "    return idx[:, prompt.shape[1]:]  # the new tokens, as the padded decoder\n",
          ("prompt", "new tokens", "shape", "T + max_new_tokens", "prefix"),
          "returns the new tokens only, the convention of generate_left_padded below it: the exercise asks for "
          "the prompt followed by them"),
        M("generate_left_padded", "ids = torch.full((B, T), pad_id, dtype=torch.long)",
          "ids = torch.full((B, T), -100, dtype=torch.long)  # the ignore index marks padding",
          ("pad_id", "-100", "pad", "token id", "negative", "embedding"),
          "fills the padding with -100, the loss's ignore index, not the pad id: the model is handed negative "
          "token ids", regime="prompts of different lengths"),
        M("generate_left_padded", "mask[b, T - len(p):] = True",
          "mask[b, T - len(p) + 1:] = True  # after the last pad",
          ("first token", "mask", "off by one", "real token", "pad"),
          "starts each row's True one slot late, after what it takes for the last pad: every prompt's first real "
          "token is masked out like padding"),
        M("generate_left_padded", PADDED_LOOP,
          "    return generate_greedy(model, ids, max_new_tokens, cache)[:, T:]  # the greedy loop written above",
          ("mask", "positions", "padding", "pad", "attention_mask"),
          "reuses the learner's generate_greedy on the padded ids: no mask and no positions reach the model, "
          "right only when every prompt has the same length", regime="prompts of different lengths"),
    ],
    "07": [
        # https://github.com/microsoft/onnxscript/pull/2408
        M("repeat_kv", "x = x[:, :, None].expand(B, n_kv, n_rep, T, hd)",
          "x = torch.tile(x, (1, n_rep, 1, 1))  # np.tile",
          ("order", "tile", "repeat_interleave", "h // n_rep", "grouping", "kv0, kv1"),
          "tiles as np.tile and ONNX Tile do, the order microsoft/onnxscript#2408 found wrong against torch: "
          "kv0, kv1, kv0, kv1 instead of kv0, kv0, kv1, kv1", regime="more than one kv head"),
        M("gqa_attention", "k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)",
          "k, v = repeat_kv(k, q.shape[1]), repeat_kv(v, q.shape[1])  # up to the query heads",
          ("n_rep", "repeat", "heads", "shape", "group"),
          "passes the learner's repeat_kv the number of query heads where it takes the number of copies: right "
          "for one kv head, too many heads otherwise", regime="more than one kv head"),
        M("gqa_attention", "F.scaled_dot_product_attention(q, k, v, is_causal=True)",
          "F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1.0)  # T5 folds the scale into its init",
          ("scale", "sqrt", "1/sqrt", "head_dim", "temperature"),
          "ports T5's unscaled attention (scale=1.0): the scores are sqrt(head_dim) times too large"),
        M("gqa_step", "mask = tinylm.causal_mask(T, start + T).to(x.device)  # (T, start + T)",
          "mask = tinylm.causal_mask(T).to(x.device)  # (T, T), broadcast over the cache",
          ("kv_len", "bottom-right", "cached", "shape", "start"),
          "builds a square mask of the new tokens only: it broadcasts for a prefill and a one-token step, and "
          "fails for several new tokens after a prefill", regime="several new tokens after a prefill"),
        M("decode_bytes_per_token", "matrices = config.vocab_size * d * (1 if config.tie_embeddings else 2)",
          "matrices = config.vocab_size * d + (0 if config.tie_embeddings else d)  # a lookup reads one row",
          ("embedding", "untied", "whole", "one row", "convention"),
          "counts one row for an untied embedding, what a lookup reads, where the exercise's convention counts "
          "every parameter once", regime="an untied head"),
    ],
    "08": [
        M("top_k_filter", "k = min(k, logits.shape[-1])", "k = min(k, logits.shape[-1] - 1)  # the largest valid index",
          ("vocabulary", "every token", "k past", "clamp", "keeps all"),
          "clamps k to V - 1, an index bound, where k counts tokens: k = V drops the least likely token",
          regime="k at or past the vocabulary"),
        M("top_p_filter", "drop_sorted = mass_before >= p",
          "drop_sorted = mass_before >= p + 1e-6  # room for rounding",
          ("exactly p", "crossing", "mass before", "tie", "threshold"),
          "adds a tolerance to the threshold: a token whose mass before it is exactly p is kept, the nucleus "
          "holds one token too many", regime="a mass before equal to p"),
        M("sample_next", "probs = logits.softmax(dim=-1)", "probs = logits.exp()  # multinomial normalises the weights",
          ("softmax", "overflow", "exp", "inf", "large logits", "max"),
          "hands multinomial exp(logits), unnormalised and without the max subtracted: right for small logits, "
          "inf and a crash for logits near 1000", regime="logits near 1000"),
        # https://github.com/OpenTabular/DeepTab/issues/453
        M("sample_next", "probs = logits.softmax(dim=-1)", "probs = logits  # multinomial takes the scores",
          ("softmax", "probabilities", "logits", "negative", "multinomial"),
          "hands multinomial the raw logits as its probabilities, the bug of OpenTabular/DeepTab#453: negative and "
          "-inf scores are no distribution"),
        M("sample_next", DRAW_08,
          "return torch.distributions.Categorical(logits=logits).sample()  # jax.random.categorical",
          ("generator", "seed", "reproduc", "global"),
          "ports jax.random.categorical(key, logits) as torch's Categorical: it draws from the global stream, "
          "the caller's generator is ignored"),
        M("generate", "logits = model(idx)[:, -1]", "logits = model(idx)[:, -1:]  # (B, 1, V): the time axis kept",
          ("(B, V)", "shape", "time axis", "last position", "sample_next"),
          "keeps the time axis, (B, 1, V), where the learner's sample_next takes (B, V) rows"),
        M("generate", "logits = model(idx)[:, -1]", "logits = model(idx).logits[:, -1]  # as on a Hugging Face model",
          ("logits", "attribute", "tensor", "output"),
          "reads .logits as on a Hugging Face model's output: the course's models return the logits tensor itself"),
    ],
    "09": [
        M("get_batch", "torch.randint(len(data) - seq_len, (batch_size,), generator=generator)",
          "torch.randint(1, len(data) - seq_len, (batch_size,), generator=generator)",
          ("start", "first window", "position 0", "range", "never"),
          "draws the starts from 1, as if token 0 needed a predecessor: the window at the start of the corpus is "
          "never drawn"),
        M("lm_loss", "ignore_index=-100)", "ignore_index=0)  # the pad id",
          ("-100", "ignore_index", "padding", "pad id", "token 0"),
          "ignores token id 0, the pad id, where the padding targets are -100: real targets 0 drop out and the "
          "-100 padding is scored"),
        M("lm_loss", "return F.cross_entropy(", "return F.nll_loss(",
          ("log_softmax", "log-prob", "logits", "nll_loss", "normalis"),
          "calls nll_loss, which expects log-probabilities, on raw logits: the loss is minus the target's logit"),
        M("lm_loss", "ignore_index=-100)", "ignore_index=-100, label_smoothing=0.1)",
          ("smoothing", "label_smoothing", "cross-entropy", "mean NLL"),
          "keeps the label smoothing of a fine-tuning recipe: the loss is no longer the NLL of the targets"),
        # https://github.com/keras-team/keras/issues/21772
        M("lr_schedule", COSINE,
          "return max_lr * (min_lr + (1 - min_lr) * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0))))  # CosineDecay",
          ("min_lr", "fraction", "alpha", "end", "decay"),
          "ports Keras' CosineDecay, whose alpha is a fraction of the initial rate (the confusion of "
          "keras-team/keras#21772): min_lr is read as a ratio and the decay ends at max_lr * min_lr"),
        M("lr_schedule", "math.cos(math.pi * min(progress, 1.0))", "math.cos(3.14 * min(progress, 1.0))",
          ("pi", "constant", "min_lr", "end", "cosine"),
          "writes pi as 3.14: the decay ends a hair above min_lr, 1e-6 of the range"),
        M("train_step", "model.train()", "model.trainable = True  # Keras' switch",
          ("train mode", "model.train()", "dropout", "eval mode", "mode"),
          "ports Keras' trainable flag: an nn.Module takes the attribute and stays in the mode it came in"),
        M("train_step", STEP_09,
          "    loss.backward()                              # d loss / d every parameter\n"
          "    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)  # global gradient norm <= grad_clip\n"
          "    optimizer.step()                             # the AdamW update\n"
          "    optimizer.zero_grad(set_to_none=True)        # clean for the next step\n",
          ("zero_grad", "leftover", "accumulate", "previous", "order"),
          "clears the gradients after the step, right in a loop of its own steps: gradients another function "
          "left behind are added into this step", regime="gradients left in .grad"),
        M("train_step_accumulated", MICRO_LOOP,
          "    for x, y in micro_batches:  # the train_step written above, once per piece\n"
          "        total += train_step(model, optimizer, x, y, grad_clip) * int((y != -100).sum())\n",
          ("one step", "optimizer.step", "once", "several steps", "per micro-batch"),
          "reuses the learner's train_step per micro-batch: one optimizer step per piece instead of one for the "
          "whole batch"),
        M("train_step_costs", '"grads": 4 * n_params', '"grads": 4 * matmul_weights',
          ("grads", "gains", "norm", "every parameter", "bytes"),
          "counts gradients for the matmul weights only: the RMSNorm gains, and an untied embedding, have "
          "gradients too"),
    ],
    "10": [
        # https://github.com/JIA-Lab-research/LongLoRA/issues/134
        M("nll_sum_and_count", NLL_10,
          "nll = F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), targets[:, 1:].flatten(),"
          " ignore_index=ignore_index,",
          ("shift", "already shifted", "next token", "t + 2", "alignment"),
          "pastes the perplexity shift of Hugging Face's evaluate quoted in JIA-Lab-research/LongLoRA#134: the "
          "targets already are the next tokens, so each position is scored on the token after next"),
        M("nll_sum_and_count", "logits.flatten(0, 1).float(), targets",
          "logits.flatten(0, 1).float().softmax(-1), targets",
          ("softmax", "probabilities", "logits", "from_logits", "twice"),
          "hands cross_entropy probabilities, as Keras' loss expects without from_logits: a second softmax "
          "flattens every distribution"),
        M("nll_sum_and_count", "return nll.item(), count", "return nll.item() / math.log(2), count  # in bits",
          ("nats", "bits", "log(2)", "units", "ln"),
          "returns the sum in bits, where the course measures NLL in nats: every loss after it is 1/ln 2 too large"),
        M("evaluate", "s, n = nll_sum_and_count(model(x.to(dev)), y.to(dev))",
          "s, n = nll_sum_and_count(model(x.to(dev)), y.to(dev), ignore_index=0)  # the pad id",
          ("-100", "ignore_index", "padding", "pad id", "token 0"),
          "hands nll_sum_and_count the pad id 0 as ignore_index, where the batches mark padding with -100: real "
          "targets 0 drop out and the padding is scored"),
        M("bigram_nll", SMOOTHED, "probs = (counts + alpha) / (counts.sum(dim=0) + 256 * alpha)",
          ("row", "column", "previous", "normalis", "sum to 1", "[prev, next]"),
          "divides by the column sums, the counts of each next byte, where the table is [prev, next]: the rows no "
          "longer sum to 1"),
        # https://github.com/pytorch/pytorch/issues/42805
        M("bigram_nll", COUNTS,
          "counts = torch.zeros(256, 256, dtype=torch.float64)\n"
          "    counts[train[:-1], train[1:]] += 1  # count[a] += 1, as in NumPy",
          ("repeated", "duplicate", "counts", "accumulate", "once"),
          "counts with counts[prev, next] += 1, which does not accumulate repeated indices (pytorch/pytorch#42805): "
          "each pair that occurs is counted once"),
    ],
}

SAME = [
    ("01", M("tied_logits", "return x @ weight.T",
             "return torch.inner(x, weight)", (), "torch.inner: the last axes contracted")),
    ("02", M("rms_norm", "x32.pow(2).mean(dim=-1, keepdim=True)", "x32.pow(2).mean(axis=-1, keepdims=True)", (),
             "NumPy's axis and keepdims, which torch accepts as aliases")),
    ("02", M("layer_norm", "var = centred.pow(2).mean(dim=-1, keepdim=True)",
             'var = torch.einsum("...d,...d->...", centred, centred)[..., None] / x.shape[-1]', (),
             "the variance as a contraction of the centred values with themselves")),
    ("03", M("causal_mask", "return allowed.tril(diagonal=kv_len - q_len)",
             "return torch.arange(kv_len) <= torch.arange(q_len)[:, None] + (kv_len - q_len)", (),
             "the mask as a comparison of positions")),
    ("04", M("apply_rope", "cos = cos[start_pos:start_pos + T].to(x.dtype)",
             "cos = cos.narrow(0, start_pos, T).to(x.dtype)", (),
             "the rows taken with narrow")),
    ("05", M("Transformer",
             "x = x + self.attn(self.attn_norm(x), cos, sin, cache, layer_idx)  # the branch reads a normalised copy\n"
             "        return x + self.mlp(self.mlp_norm(x))",
             "return pre_norm_block(x, lambda h: self.attn(h, cos, sin, cache, layer_idx), self.mlp, self.attn_norm,\n"
             "                              self.mlp_norm)  # the learner's own block function", (),
             "the block through the learner's pre_norm_block")),
    ("05", M("swiglu_hidden", "return multiple * math.ceil(8 * d_model / 3 / multiple)",
             "return multiple * -(-8 * d_model // 3 // multiple)", (), "an integer ceiling by negated floor division")),
    ("05", M("param_counts", '"attention": L * (q_and_o + k_and_v)',
             '"attention": 2 * L * d * hd * (config.n_heads + config.n_kv_heads)', (), "the attention count factored")),
    ("06", M("generate_greedy", "next_id = logits.argmax(dim=-1, keepdim=True)",
             "next_id = logits.softmax(-1).argmax(dim=-1, keepdim=True)",
             (), "argmax of the probabilities, which softmax keeps in order")),
    ("07", M("decode_bytes_per_token", "(1 if config.tie_embeddings else 2)", "(2 - config.tie_embeddings)", (),
             "the untied head counted by bool arithmetic")),
    ("07", M("repeat_kv", "x = x[:, :, None].expand(B, n_kv, n_rep, T, hd)", "x = torch.stack([x] * n_rep, dim=2)", (),
             "copies stacked next to each kv head")),
    ("08", M("top_p_filter", "drop = drop_sorted.scatter(-1, order, drop_sorted)",
             "drop = drop_sorted.gather(-1, order.argsort(dim=-1))", (),
             "back to vocabulary order through the inverse permutation")),
    ("09", M("lr_schedule", "0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))",
             "math.cos(math.pi / 2 * min(progress, 1.0)) ** 2",
             (), "the half-cosine as a squared cosine")),
    ("10", M("evaluate", '"perplexity": math.exp(loss)',
             '"perplexity": 2 ** (loss / math.log(2))', (), "perplexity as 2 to the bits")),
    ("10", M("nll_sum_and_count", "count = int((targets != ignore_index).sum())",
             "count = len(targets[targets != ignore_index])", (), "the count as the length of the scored targets")),
    ("10", M("bigram_nll", COUNTS,
             "counts = torch.histc((train[:-1] * 256 + train[1:]).double(), bins=256 * 256, min=0, max=256 * 256)"
             ".view(256, 256)", (), "NumPy's histogram over unit bins")),
]
