"""A twenty-eighth held-out set of learner mistakes ("fresh28"), written without reading the checks: neither
autograder/checks/ (any file), tests/checks/, autograder/diagnosis_*.py, benchmarks/bench_diagnostics.py's source, the
diagnosis sections of docs/benchmarks.md nor tests/course/test_docs.py were opened, listed or grepped;
bench_diagnostics.py, check cells and notebook checks were never run, and no mistake or SAME edit was tried against a
check. No git log or git show was run.

What was opened or run. The brief, HELPER_RULES.md and mkwt.sh (cat), then mkwt.sh fresh28 (run). `ls` of /work/wt/,
the root, benchmarks/ and benchmarks/mutations/ (names only); `wc -l` of unseen.py, verify_unseen.py,
heldout_duplicates.py and the unseen_probes*.py files. Of the other sets only fresh27.py's module docstring, printed
with python. Whole: verify_unseen.py, heldout_duplicates.py, mutations/__init__.py, unseen.py (its entries, for the
format), unseen_probes_fresh27.py; lines 1-20 and the EXTRA_PROBES line of unseen_probes_fresh26.py. Through
bench_diagnostics.notebook_cells: the answer cells of all ten notebooks (written to a scratch folder) and the keys of
the third result (the check names); the setup cells were not printed. The probes' keys, printed by running
verify_unseen's probes_of on the solution (no mistake, no check). A grep of tinylm/*.py for its def and class lines. A
grep for "fresh27" over the four registration files, lines 160-180 of tests/course/test_benchmarks.py. Runs:
verify_unseen.py --set fresh28 (4 runs), heldout_duplicates.py --set fresh28 (5 runs), the two fresh28 tests of
test_benchmarks.py. Public threads: 10 searches of issue threads; 44 candidate URLs grepped over benchmarks/mutations/
(`grep -rl URL`, counts only), 20 already cited elsewhere, unused.

Slips, none touching a check's text. `ls /work/wt/` showed the names of other sessions' scratch files (none opened).
The notebooks' markdown cells were not read (time): the promised inputs come from the answer cells' docstrings and
comments. A script that dropped duplicated entries imported every other set's module to compare entries text for text
in-process (it printed only counts, never another set's entry): heldout_duplicates' own comparison. heldout_duplicates
matched 54 of 107 entries on its first run (47 mistakes, 7 SAME), 18 of 89 on the second, 3 of 84 on the third, then 0;
every match was dropped, not reworded, and new mistakes written in their place. Ten threads went with dropped entries
(gittensor-ai-lab/sparkinfer#3, EleutherAI/gpt-neox#1342, pytorch/executorch#22443,
KolosalAI/model-memory-calculator#2, ByteDance-Seed/VeOmni#162, fishaudio/fish-speech#1326, spro/char-rnn.pytorch#7,
omihub777/ViT-CIFAR#11, RAIVNLab/STR#4, deepseek-ai/DeepSpec#32); one more (NVIDIA/Megatron-LM#875, .view after
the transpose of SDPA's output) changed no probe, since SDPA hands back memory that view accepts, and was dropped. So
the set has 6 public threads, under the brief's "about 10". The session ran well past the brief's 30 minutes.

The set's focus, each mistake counted once by its main kind. Dense lines (16): rows reshaped with V for d, a gather
with an expanded index, a 2-D matmul viewed back as x's shape, E[x^2] - E[x]^2 without keepdim, heads as a strided
permute, mask and softmax chained over dim=-2, exponents from 1, the outer product broadcast the other way, SwiGLU
without parentheses, ceil then floor to a multiple, cos and sin swapped in the key half, zip pairing cache and new
tensors, kv heads tiled by expand and flatten, the attention term factored with one misplaced parenthesis, the mass
before as cumsum minus the top probability, the attention matmuls inside the 6 x. The learner's own answers reused
(10): rms_norm with eps and gain swapped, embed with its arguments swapped, causal_mask with its default kv_len,
cache_update in the order (past_k, k, past_v, v), cache.reset() per decode step, repeat_kv by n_kv_heads, sample_next
with top_p dropped positionally, sample_next on logits already divided by the temperature, nll_sum_and_count unpacked
(count, sum), rotary_attention's output in merge_heads' layout. Look-alikes (14): a one-hot moved to a device, the
table transposed into a new Parameter, a mean over tokens and features, merge_heads transposing T and hd, generated
tokens marked as padding, positions advanced twice, repeat along the positions, one norm per block, only the largest
kept, the cosine scaled by max_lr, clipping by value, (y, x) unpacked in the count, a scatter along axis 0, log2(e) for
ln 2. Promised inputs (7): several heads in interleaved_to_half, o_proj with head_dim apart, an int8 cache, a batch of
two in greedy decoding, uint8 data, a model in train mode (the mode read after eval()), a batch of several rows in the
count. Public bugs (6, below). Accounting by a term (4): the causal scores halved, padding in the mean, alpha once per
row, the last micro-batch's sum. Numerics (1 besides the double root): padding positions at -1.

Sources: a learner working through the notebooks and, for 6 mistakes, public threads (the URL in a comment above the
entry and in its reason): onnx/onnx#6443 (the root taken twice), Dao-AILab/flash-attention#380 (a top-left mask for
fewer queries), Blaizzy/mlx-vlm#1094 (squeeze of the batch axis), bytetriper/RAE#67 (zero_grad per micro-batch),
huggingface/accelerate#1299 (zero_grad after the step), hmmlearn/hmmlearn#22 (normalised as a whole, not per row).

SAME lists 22 edits (dense lines and the learner's own answers written right): a chained rsqrt, square(), a mask from
positions, unflatten, @ w_o.mT, apply_rope in a comprehension, SwiGLU in one line, tied_logits on the tied name, both
cats over zip, the largest position + 1, the tail indexed from the end, expand and flatten, size(-3), lt(), zero_grad on
the model, (weight @ x.mT).mT, the sine before rotate_half, the attention term factored, flatten(0, -2), the stream
named h, reshape(B, T, -1), cross_entropy's default ignore_index; a check must pass each.

Counts: 58 mistakes (01: 5, 02: 4, 03: 5, 04: 4, 05: 5, 06: 9, 07: 5, 08: 7, 09: 9, 10: 5), 22 SAME edits, 6 public
threads. Each mistake is one substitution in one answer cell; `expect` holds words a check that found it would likely
say, `regime` the situation in which a mistake right by default shows. `in_lists` is left False."""
from __future__ import annotations

from .unseen import Unseen as M

# notebook 05's swiglu body, notebook 06's cache_update lines and notebook 07's repeat_kv lines, each rewritten as one
SWIGLU_BODY = ("    gate = F.silu(x @ w_gate.T)  # (B, T, d_ff): the nonlinearity lives on the gate only\n"
               "    up = x @ w_up.T              # (B, T, d_ff): linear\n"
               "    return (gate * up) @ w_down.T  # (B, T, d)")
CACHE_CATS = ("    k_all = torch.cat((past_k, k), dim=2)  # positions are axis 2: the past first, then the new tokens\n"
              "    v_all = torch.cat((past_v, v), dim=2)")
REPEAT_LINES = ("    x = x[:, :, None].expand(B, n_kv, n_rep, T, hd)  # (B, n_kv, n_rep, T, hd): a view, copies of each kv "
                "head side by side\n    return x.reshape(B, n_kv * n_rep, T, hd)")
SPLIT_LINES = ("    x = x.view(B, T, n_heads, d // n_heads)  # (B, T, H, hd): head h owns features h*hd .. (h+1)*hd - 1\n"
               "    return x.transpose(1, 2)                 # (B, H, T, hd)")
MASK_LINES = ("    allowed = torch.ones(q_len, kv_len, dtype=torch.bool)\n"
              "    return allowed.tril(diagonal=kv_len - q_len)")
ROPE_QK = ("    q = apply_rope(q, cos, sin, start_pos)  # position enters the scores only\n"
           "    k = apply_rope(k, cos, sin, start_pos)")
BATCH = ("batch", "rows", "(b,", "shape", "each row")

MUTATIONS = {
    "01": [
        M("embed", "return weight[ids]", "return weight[ids.reshape(-1)].reshape(*ids.shape, weight.shape[0])",
          ("shape", "weight.shape[1]", "vocabulary size", "d_model", "reshape", "v instead of d"),
          "flattens the ids and reshapes the rows back with weight.shape[0] (V) as the last size instead of d",
          regime="a table whose V differs from d"),
        M("one_hot_embed", ".to(weight.dtype)  # (..., V)", ".to(weight.device)  # (..., V)",
          ("dtype", "int64", "long", "float", "matmul"),
          "moves the one-hot to the weight's device instead of its dtype: an int64 one-hot meets a float table"),
        M("embed", "return weight[ids]", "return weight.gather(0, ids.unsqueeze(-1).expand(*ids.shape, weight.shape[1]))",
          ("shape", "gather", "batch", "(b, t)", "flat ids", "dimensions"),
          "gathers rows with an index of one more axis than ids: right for flat ids, fails for a (B, T) batch",
          regime="ids with more than one axis"),
        M("tied_logits", "return x @ weight.T", "return (x.flatten(0, -2) @ weight.T).view(x.shape)",
          ("shape", "vocabulary", "(b, t, v)", "view", "d instead of v"),
          "flattens the tokens for a 2-D matmul and views the result back as x's shape: d where V belongs"),
        M("tie_weights", "lm_head.weight = tok_emb.weight", "lm_head.weight = nn.Parameter(tok_emb.weight.mT)",
          ("same parameter", "transpose", "[v, d]", "not tied", "shape", "new parameter"),
          "transposes the table into a new Parameter, as if the head stored [d, V]: nn.Linear stores [V, d] already"),
    ],
    "02": [
        # https://github.com/onnx/onnx/pull/6443
        M("rms_norm", "torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)",
          "torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True).sqrt() + eps)",
          ("sqrt", "root", "twice", "fourth root", "rms", "mean square"),
          "takes the square root twice, as a misread formula (onnx/onnx#6443, https://github.com/onnx/onnx/pull/6443) "
          "had it: x is divided by the fourth root of its mean square"),
        M("layer_norm", "var = centred.pow(2).mean(dim=-1, keepdim=True)",
          "var = x.pow(2).mean(dim=-1, keepdim=True) - x.mean(dim=-1).pow(2)",
          ("keepdim", "broadcast", "shape", "(n, n)", "variance"),
          "writes var as E[x^2] - E[x]^2 with keepdim lost on the second mean: (..., 1) - (...) broadcasts to a square"),
        M("RMSNorm", "return rms_norm(x, self.weight, self.eps)", "return rms_norm(x, self.eps, self.weight)",
          ("argument", "order", "eps", "weight", "gain", "position"),
          "calls its own rms_norm with eps and the gain swapped: the gain is added under the root, eps multiplies"),
        M("layer_norm", "centred = x - x.mean(dim=-1, keepdim=True)", "centred = x - x.mean(dim=(-2, -1), keepdim=True)",
          ("per token", "each token", "last axis", "other tokens", "dim=-1", "mean over"),
          "subtracts the mean over tokens and features together: one mean for the sequence, not one per token"),
    ],
    "03": [
        M("split_heads", SPLIT_LINES, "    return x.view(B, T, d // n_heads, n_heads).permute(0, 3, 1, 2)  # (B, H, T, hd)",
          ("strided", "contiguous", "features", "head h", "interleav", "layout", "which features"),
          "views (T, hd, H) and permutes: the shape is right but head h owns every H-th feature"),
        M("split_heads", "y.transpose(1, 2).reshape(B, T, H * hd)", "y.transpose(-2, -1).reshape(B, T, H * hd)",
          ("transpose", "axes", "heads and positions", "layout", "merge_heads", "tokens"),
          "merge_heads transposes the last two axes (T and hd) instead of heads and positions"),
        M("causal_attention", 'scores = scores.masked_fill(~mask, float("-inf"))\n    weights = scores.softmax(dim=-1)',
          'weights = scores.masked_fill(~mask, float("-inf")).softmax(dim=-2)',
          ("softmax", "dim=-2", "queries", "over keys", "rows", "sum to 1", "axis"),
          "chains the mask and the softmax in one line and normalises over the queries (dim=-2)"),
        # https://github.com/Dao-AILab/flash-attention/issues/380
        M("causal_attention", "causal_mask(q.shape[-2], k.shape[-2])", "causal_mask(k.shape[-2])[:q.shape[-2]]",
          ("bottom-right", "top-left", "first rows", "last rows", "offset", "q_len < kv_len"),
          "keeps the first Tq rows of the square mask, the top-left alignment asked about in Dao-AILab/flash-attention#380 "
          "(https://github.com/Dao-AILab/flash-attention/issues/380): query i sees keys 0..i only",
          regime="fewer queries than keys"),
        M("attention_flops", '"scores": B * n_heads * per_head,', '"scores": B * n_heads * per_head // 2,',
          ("half", "causal", "masked", "full", "scores", "t x t", "every entry"),
          "halves the scores' FLOPs for the causal mask: the matmul computes every entry, masked or not"),
    ],
    "04": [
        M("rope_cache", "-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim",
          "-torch.arange(1, head_dim + 1, 2, dtype=torch.float32) / head_dim",
          ("frequenc", "2i/d", "exponent", "inv_freq", "off by one", "pair 0", "angle"),
          "starts the exponents at 1: pair i turns at theta^-(2i+1)/d and pair 0 no longer at one radian per step"),
        M("interleaved_to_half", "pairs.transpose(1, 2).reshape(rows, d_in)", "pairs.transpose(0, 2).reshape(rows, d_in)",
          ("heads", "axis", "mixes", "per head", "transpose", "each head"),
          "transposes the heads' axis with the pair axis: right for one head, mixes the heads' rows for several",
          regime="more than one head"),
        M("rope_cache", "torch.outer(torch.arange(max_seq_len, dtype=torch.float32), inv_freq)",
          "torch.arange(max_seq_len, dtype=torch.float32)[None, :] * inv_freq[:, None]",
          ("shape", "broadcast", "transpos", "(hd/2, t)", "outer"),
          "writes the outer product by broadcasting with the axes the other way round: (hd/2, T), not (T, hd/2)"),
        M("rotary_attention", "return tinylm.causal_attention(q, k, v)", "return tinylm.causal_attention(q, k, v).transpose(1, 2)",
          ("layout", "(b, h, t, hd)", "transpose", "shape", "heads"),
          "returns the output transposed to (B, T, H, hd), the layout merge_heads would want, not the promised (B, H, T, hd)"),
    ],
    "05": [
        M("swiglu", SWIGLU_BODY, "    return (F.silu(x @ w_gate.T) * x @ w_up.T) @ w_down.T  # (B, T, d)",
          ("parenthes", "precedence", "up", "shape", "order of operations", "w_up"),
          "writes the MLP in one line without parentheses around x @ w_up.T: (silu(.) * x) @ w_up.T is computed"),
        M("swiglu_hidden", "return multiple * math.ceil(8 * d_model / 3 / multiple)",
          "return math.ceil(8 * d_model / 3) // multiple * multiple",
          ("round up", "rounded down", "floor", "multiple", "ceil"),
          "rounds 8/3 d up to an integer, then down to a multiple: d_ff ends below 8/3 d"),
        M("Transformer", "apply_rope(k, cos, sin, start_pos)  # position", "apply_rope(k, sin, cos, start_pos)  # position",
          ("sin", "cos", "swapped", "keys", "order", "argument"),
          "swaps cos and sin in the key half of the q, k line"),
        M("Transformer", "x = embed(idx, self.tok_emb.weight)", "x = embed(self.tok_emb.weight, idx)",
          ("argument", "order", "embed", "ids", "index"),
          "calls its embed with the table and the ids swapped"),
        M("Transformer", "self.o_proj = nn.Linear(config.n_heads * config.head_dim, config.d_model, bias=False)",
          "self.o_proj = nn.Linear(config.d_model, config.n_heads * config.head_dim, bias=False)",
          ("o_proj", "in_features", "out_features", "shape", "head_dim", "transpos"),
          "builds o_proj with in and out swapped: the same shape while n_heads * head_dim == d_model",
          regime="head_dim apart from d_model / n_heads"),
    ],
    "06": [
        M("kv_cache_bytes", "dtype.itemsize", "(torch.finfo(dtype).bits // 8)",
          ("int8", "integer", "finfo", "iinfo", "dtype", "itemsize"),
          "gets the element size from torch.finfo, which fails on an integer dtype such as int8",
          regime="an integer cache dtype"),
        M("cache_update", CACHE_CATS, "    k_all, v_all = (torch.cat(pair, dim=2) for pair in zip((past_k, k), (past_v, v)))",
          ("keys", "values", "zip", "pairs", "k_all", "v_all", "mixed"),
          "pairs the tensors with zip the wrong way round: k_all is past_k with past_v, v_all the new k with v"),
        M("attention_step", "tinylm.causal_mask(T, start + T)", "tinylm.causal_mask(start + T)",
          ("square", "default", "kv_len", "shape", "new tokens"),
          "relies on causal_mask's default kv_len: a square (start + T) mask for T queries",
          regime="a step after the prefill (start > 0)"),
        M("generate_greedy", "next_id = logits.argmax(dim=-1, keepdim=True)", "next_id = logits.argmax(dim=-1).unsqueeze(0)",
          BATCH + ("(1, b)", "unsqueeze"),
          "adds the axis in front: (1, B) instead of (B, 1), right only for a batch of one",
          regime="a batch of more than one"),
        M("generate_left_padded", "positions = (mask.long().cumsum(-1) - 1).clamp(min=0)",
          "positions = mask.long().cumsum(-1) - 1",
          ("-1", "padding", "positions", "clamp", "negative"),
          "leaves the padding at position -1: the model indexes the tables' last row for it"),
        M("generate_left_padded", "mask.new_ones(B, 1)", "mask.new_zeros(B, 1)",
          ("new token", "attention_mask", "padding", "mask", "real"),
          "appends False for each generated token: the model treats its own tokens as padding"),
        M("generate_left_padded", "positions[:, -1:] + 1", "positions[:, -1:] + len(new)",
          ("positions", "drift", "one past", "+ 1", "step"),
          "advances the last position by the number generated so far, though it was already advanced each step"),
        M("generate_greedy", "        for _ in range(max_new_tokens):\n", "        for _ in range(max_new_tokens):\n            cache.reset()\n",
          ("reset", "cache", "every step", "context", "prompt"),
          "resets the cache inside the loop, where it is needed once: each decode step sees only its own token"),
        M("attention_step", "cache_update(past_k, past_v, k, v)", "cache_update(past_k, k, past_v, v)",
          ("argument", "order", "keys", "values", "position"),
          "calls its cache_update with the arguments in the order (past_k, k, past_v, v)"),
    ],
    "07": [
        M("repeat_kv", REPEAT_LINES, "    return x[:, None].expand(-1, n_rep, -1, -1, -1).flatten(1, 2)",
          ("tile", "interleav", "h // n_rep", "groups", "h % n_kv", "order of the heads"),
          "expands a new axis in front of the kv heads: the copies are tiled (h % n_kv) instead of grouped (h // n_rep)"),
        M("gqa_attention", "k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)",
          "k, v = k.repeat_interleave(n_rep, dim=2), v.repeat_interleave(n_rep, dim=2)",
          ("positions", "axis", "dim=2", "heads", "sequence"),
          "repeats along axis 2, the positions, instead of the heads"),
        M("gqa_step", "repeat_kv(k_all, n_rep), repeat_kv(v_all, n_rep)",
          "repeat_kv(k_all, attn.n_kv_heads), repeat_kv(v_all, attn.n_kv_heads)",
          ("n_rep", "n_kv_heads", "heads", "argument", "group"),
          "repeats each kv head n_kv_heads times instead of n_heads // n_kv_heads: right only when the two agree",
          regime="n_kv_heads != n_heads // n_kv_heads"),
        M("decode_bytes_per_token", "3 * d * config.d_ff + 2 * d", "3 * d * config.d_ff + d",
          ("norm", "gain", "2 * d", "per block"),
          "counts one norm gain per block: each block has two"),
        M("decode_bytes_per_token", "2 * d * config.n_heads * hd + 2 * d * config.n_kv_heads * hd",
          "2 * d * (config.n_heads + config.n_kv_heads * hd)",
          ("parenthes", "head_dim", "attention", "q_proj", "hd"),
          "factors the attention term with one parenthesis misplaced: the query heads lose their head_dim"),
    ],
    "08": [
        M("top_k_filter", "kth = logits.topk(k, dim=-1).values[..., -1:]", "kth = logits.topk(k, dim=-1).values[..., :1]",
          ("largest", "k-th", "kth", "one token", "greedy", "first"),
          "takes the first of the top k, the largest: only the maximum (and its ties) survives"),
        M("top_p_filter", "drop_sorted.scatter(-1, order, drop_sorted)", "drop_sorted.scatter(0, order, drop_sorted)",
          ("axis", "dim", "scatter", "vocabulary order", "last axis"),
          "scatters along axis 0 instead of the vocabulary axis"),
        # https://github.com/Blaizzy/mlx-vlm/pull/1094
        M("sample_next", ".squeeze(-1)", ".squeeze(0)",
          BATCH + ("squeeze", "(b, 1)"),
          "squeezes axis 0, assuming a batch of one as Blaizzy/mlx-vlm#1094 (https://github.com/Blaizzy/mlx-vlm/pull/1094) "
          "did: a batch of several comes back (B, 1)", regime="a batch of more than one"),
        M("generate", "sample_next(logits, temperature, top_k, top_p, generator)",
          "sample_next(logits, temperature, top_k, generator)",
          ("generator", "top_p", "argument", "position", "keyword"),
          "drops top_p from the positional call: the generator lands in top_p's place and top_p is never applied"),
        M("top_p_filter", "mass_before = probs.cumsum(dim=-1) - probs", "mass_before = probs.cumsum(dim=-1) - probs[..., :1]",
          ("mass before", "cumsum", "its own", "crossing", "nucleus"),
          "subtracts the top token's probability instead of each token's own: the mass before is off after the first"),
        M("generate", "next_id = sample_next(logits, temperature,", "next_id = sample_next(logits / temperature, temperature,",
          ("temperature", "twice", "squared", "t^2", "already"),
          "divides by the temperature before calling sample_next, which divides again"),
        M("generate", "    was_training = model.training\n    model.eval()", "    model.eval()\n    was_training = model.training",
          ("train mode", "mode", "was_training", "restored", "eval"),
          "reads the mode after model.eval(): it always restores eval mode", regime="a model handed over in train mode"),
    ],
    "09": [
        M("get_batch", "window = data[idx].long()", "window = data[idx.long()]",
          ("int64", "long", "uint8", "dtype"),
          "casts the index instead of the data: uint8 data comes back as uint8", regime="uint8 data"),
        M("lm_loss", "return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)",
          'return F.cross_entropy(logits.transpose(1, 2), targets, reduction="sum") / targets.numel()',
          ("padding", "-100", "count", "real targets", "numel", "mean"),
          "divides the summed loss by every target, padding included"),
        M("lr_schedule", "* (max_lr - min_lr)", "* max_lr",
          ("min_lr", "max_lr", "above", "floor", "range"),
          "scales the cosine by max_lr instead of max_lr - min_lr: it starts at max_lr + min_lr"),
        M("train_step", "clip_grad_norm_(model.parameters(), grad_clip)", "clip_grad_value_(model.parameters(), grad_clip)",
          ("norm", "value", "clip", "global", "per entry", "element"),
          "clips each gradient entry instead of the global norm"),
        M("train_step_accumulated", "for _, y in micro_batches)", "for y, _ in micro_batches)",
          ("padding", "-100", "count", "unpack", "x instead of y", "tokens"),
          "unpacks (y, x) in the count: it counts the inputs, which are never -100, so padding is counted"),
        M("train_step_accumulated", "return total / n_tokens", "return summed.item() / n_tokens",
          ("last micro-batch", "total", "loss", "sum over"),
          "returns the last micro-batch's sum over the whole count"),
        # https://github.com/bytetriper/RAE/issues/67
        M("train_step_accumulated", "        logits = model(x)                                             # (b, T, V)",
          "        optimizer.zero_grad(set_to_none=True)\n        logits = model(x)                                             # (b, T, V)",
          ("zero_grad", "accumulat", "last micro-batch", "once", "cleared"),
          "zeroes the gradients per micro-batch, the bug of bytetriper/RAE#67 (https://github.com/bytetriper/RAE/issues/67): "
          "only the last micro-batch's gradient is applied", regime="more than one micro-batch"),
        M("train_step_costs", '"flops": 6 * matmul_weights * tokens + 3 * attention_matmuls',
          '"flops": 6 * (matmul_weights * tokens + attention_matmuls)',
          ("attention", "3 x", "6 x", "forward", "factor"),
          "puts the attention matmuls inside the 6 x: their forward is already counted in FLOPs, backward makes it 3 x"),
        # https://github.com/huggingface/accelerate/issues/1299
        M("train_step", "    optimizer.zero_grad(set_to_none=True)        # gradients accumulate otherwise\n"
          "    loss.backward()                              # d loss / d every parameter\n"
          "    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)  # global gradient norm <= grad_clip\n"
          "    optimizer.step()                             # the AdamW update\n",
          "    loss.backward()                              # d loss / d every parameter\n"
          "    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)  # global gradient norm <= grad_clip\n"
          "    optimizer.step()                             # the AdamW update\n"
          "    optimizer.zero_grad(set_to_none=True)        # cleared for the next step\n",
          ("zero_grad", "left in .grad", "stale", "accumulat", "before backward"),
          "zeroes the gradients after the step, as huggingface/accelerate#1299 (https://github.com/huggingface/accelerate/issues/1299) "
          "advised for a loop: gradients the caller left in .grad are added to this step's",
          regime="gradients left in .grad by the caller"),
    ],
    "10": [
        M("evaluate", "s, n = nll_sum_and_count(", "n, s = nll_sum_and_count(",
          ("order", "count", "sum", "unpack", "swapped"),
          "unpacks its own (sum, count) as (count, sum)"),
        M("evaluate", "loss / math.log(2) / bytes_per_token", "loss / math.log2(math.e) / bytes_per_token",
          ("bits", "ln 2", "log2", "nats", "conversion"),
          "divides by log2(e) instead of ln 2: multiplies by ln 2 where it should divide"),
        M("bigram_nll", "+ 256 * alpha", "+ alpha",
          ("alpha", "256", "smoothing", "rows sum", "normalis"),
          "adds alpha once to the row total: each of the 256 counts got alpha, the rows no longer sum to 1"),
        # https://github.com/hmmlearn/hmmlearn/pull/22
        M("bigram_nll", "counts.sum(dim=1, keepdim=True)", "counts.sum()",
          ("row", "per previous", "conditional", "joint", "normalis", "sum to 1"),
          "normalises by the total count: joint probabilities instead of each row's conditional ones, the mistake "
          "of hmmlearn/hmmlearn#22 (https://github.com/hmmlearn/hmmlearn/pull/22)"),
        M("nll_sum_and_count", "count = int((targets != ignore_index).sum())", "count = int((targets != ignore_index).sum(dim=-1)[0])",
          ("count", "first row", "batch", "every row", "rows"),
          "counts the scored targets of the first row only", regime="a batch of more than one row"),
    ],
}

SAME = [
    ("02", M("rms_norm", "torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)",
             "(x32 * x32).mean(-1, keepdim=True).add(eps).rsqrt()", (), "the statistic as one chain of tensor methods")),
    ("02", M("layer_norm", "centred.pow(2).mean(dim=-1, keepdim=True)", "centred.square().mean(-1, keepdim=True)", (),
             "square() for pow(2)")),
    ("03", M("causal_mask", MASK_LINES,
             "    return torch.arange(kv_len)[None, :] <= torch.arange(q_len)[:, None] + (kv_len - q_len)", (),
             "the mask compared from positions, the offset in the middle of the line")),
    ("03", M("split_heads", SPLIT_LINES, "    return x.unflatten(-1, (n_heads, d // n_heads)).transpose(1, 2)", (),
             "unflatten for the view")),
    ("03", M("self_attention", "F.linear(merge_heads(y), w_o)", "merge_heads(y) @ w_o.mT", (),
             "the output projection against the transposed weight")),
    ("04", M("rotary_attention", ROPE_QK, "    q, k = (apply_rope(t, cos, sin, start_pos) for t in (q, k))", (),
             "its own apply_rope on q and k in one comprehension")),
    ("05", M("swiglu", SWIGLU_BODY, "    return (F.silu(x @ w_gate.T) * (x @ w_up.T)) @ w_down.T  # (B, T, d)", (),
             "the MLP in one line with its parentheses")),
    ("05", M("Transformer", "tied_logits(self.norm(x), self.lm_head.weight)", "tied_logits(self.norm(x), self.tok_emb.weight)", (),
             "its own tied_logits on the embedding's name of the one tied Parameter")),
    ("06", M("cache_update", CACHE_CATS,
             "    k_all, v_all = (torch.cat(pair, dim=2) for pair in zip((past_k, past_v), (k, v)))", (),
             "both cats in one comprehension over zip")),
    ("06", M("generate_left_padded", "positions[:, -1:] + 1", "positions.max(dim=-1, keepdim=True).values + 1", (),
             "one past each row's largest position")),
    ("07", M("repeat_kv", REPEAT_LINES, "    return x[:, :, None].expand(-1, -1, n_rep, -1, -1).flatten(1, 2)", (),
             "expand with -1 sizes and flatten")),
    ("07", M("gqa_attention", "n_rep = q.shape[1] // k.shape[1]", "n_rep = q.size(-3) // k.size(-3)", (),
             "the heads' axis counted from the end")),
    ("08", M("top_k_filter", 'logits.masked_fill(logits < kth, float("-inf"))', 'logits.masked_fill(logits.lt(kth), -float("inf"))', (),
             "lt() and a negated inf")),
    ("09", M("train_step", "optimizer.zero_grad(set_to_none=True)        # gradients",
             "model.zero_grad(set_to_none=True)        # gradients", (), "zero_grad on the model, whose parameters the optimizer holds")),
    ("01", M("tied_logits", "return x @ weight.T", "return (weight @ x.mT).mT", (), "the product computed transposed and turned back")),
    ("04", M("apply_rope", "rotate_half(x) * sin", "rotate_half(x * sin)", (),
             "the sine applied before rotate_half: its two halves are equal")),
    ("06", M("generate_left_padded", "ids[b, T - len(p):] = p", "ids[b, -len(p):] = p", (), "the row's tail indexed from the end")),
    ("07", M("decode_bytes_per_token", "2 * d * config.n_heads * hd + 2 * d * config.n_kv_heads * hd",
             "2 * d * (config.n_heads + config.n_kv_heads) * hd", (), "the attention term factored")),
    ("09", M("lm_loss", "logits.flatten(0, 1)", "logits.flatten(0, -2)", (), "flatten every axis but the last")),
    ("05", M("pre_norm_block", "    x = x + attn(attn_norm(x))  # the branch reads a normalised copy; the stream stays a sum\n"
             "    x = x + mlp(mlp_norm(x))    # the MLP reads the stream after attention has written to it\n    return x",
             "    h = x + attn(attn_norm(x))\n    return h + mlp(mlp_norm(h))", (), "the stream after attention named h")),
    ("07", M("gqa_step", "y = y.transpose(1, 2).reshape(B, T, attn.n_heads * attn.head_dim)",
             "y = y.transpose(1, 2).reshape(B, T, -1)", (), "the merged width left to reshape")),
    ("09", M("train_step_accumulated", 'y.flatten(), ignore_index=-100, reduction="sum")', 'y.flatten(), reduction="sum")', (),
             "cross_entropy's default ignore_index, which is -100")),
]
