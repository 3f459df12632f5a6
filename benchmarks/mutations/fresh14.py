"""A seventeenth held-out set of learner mistakes ("fresh14"), written without
reading the checks: neither autograder/checks/, tests/checks/,
autograder/diagnosis_*.py, benchmarks/bench_diagnostics.py's source nor the
diagnosis sections of docs/benchmarks.md were opened, and no mistake was tried
against a check before the set was committed. The mistakes come from the
notebook sources (exercise prose, signatures and solution cells of
autograder/authoring/notebook_src/, the answer cells printed through
bench_diagnostics.notebook_cells, which returns them apart from the checks),
from tinylm and, for 19 of them, from bugs public projects shipped or were
asked to fix (the thread is named in a comment above the entry and in its
reason; none of these addresses occurs in another set, by `grep -rl URL
benchmarks/mutations/`, the URL only). Of the other sets only fresh13.py's
module docstring (and, by an over-wide grep, its import line, the four tuples of
cause words above its first entry and the first line of four of its SAME
edits), unseen.py (for the entry class) and __init__.py were read.
benchmarks/heldout_duplicates.py --set fresh14 compared the texts mechanically
and printed only matches: 48 entries written first (47 mistakes, 1 SAME edit)
were character for character in another set and were replaced by other
mistakes, over four rounds, until none matched (9 of them carried a public
thread, which the set lost with them). verify_unseen then showed 8 mistakes
that no probe saw; 7 got probes of their own, one was replaced: positions of
left-padded rows counted from 1 shift every position of a row alike, and RoPE
scores depend only on differences, so the tokens cannot change. Run:
`bench_diagnostics.py --set fresh14`.

Each mistake is one substitution in one answer cell; `expect` holds words a
check that found it would likely say, `untrue` words of causes it is not,
`regime` the situation in which a mistake that is right by default shows. The
classes covered: layout after view/reshape/permute, mask alignment (top-left
against bottom-right, SDPA's is_causal with a cache), softmax and reduction
axes, RoPE (direction, positions, precision of the angle table, the layout
of a converted checkpoint), the KV cache (axis, layer slot, reset, start
position), GQA repetition order and the cache kept unrepeated, double
shifting of labels, ignore_index, sampling (order of temperature and top-p,
the caller's logits edited in place, the caller's generator dropped, a batch
broadcast), modes not restored, dtype (a premature downcast, no upcast before
squaring, integer windows left uint8), parameters that are plain tensors,
gradient accumulation normalised per micro-batch, warmup starting at zero,
and the accounting exercises' formulas (causal halving, n_heads for n_kv_heads,
head_dim recomputed from d_model, bits for bytes, a tied head counted twice or
dropped from the FLOPs). SAME lists 15 edits that compute what the solution
computes another way; a check must pass each.

`benchmarks/verify_unseen.py --set fresh14` proves each mistake a real bug and
each SAME edit harmless, with the shared probes and those of
benchmarks/unseen_probes_fresh14.py.

After the first measurement, reading every printed line against its reason
found five lines the keyword count called untrue to be true of the code: an
`untrue` word the right line holds too ("8/3" in the rule the fix states,
"mask" in the positions' formula, "temperature" in the draws' setting,
"backward" in the head's missing matmul "with its backward", "axis" in "along
axis 2"); those five words were narrowed, nothing else in the set changed.
"""
from __future__ import annotations

from .unseen import Unseen as M

LAYOUT = ("layout", "transpose", "permute", "order", "interleav", "shape")
DTYPE = ("dtype", "float32", "float16", "bfloat16", "precision", "cast")
POS = ("start_pos", "offset", "position", "cache")
MODE = ("train mode", "eval mode", "mode", "restore", "was_training")
COUNT = ("count", "formula", "factor", "flops", "bytes", "params", "parameters")

MUTATIONS = {
    "01": [
        M("embed", "return weight[ids]", "return weight[ids].squeeze(0)",
          ("shape", "batch", "squeeze", "axis", "batch of one"),
          "the leading axis is squeezed: a batch of one comes back (T, d) instead of (1, T, d), and a single id "
          "comes back without its axis; other batches are unaffected", untrue=("dtype", "gradient", "transpose"),
          regime="a batch of one"),
        M("one_hot_embed", ".to(weight.dtype)  # (..., V)", ".float()  # (..., V)",
          DTYPE, "the one-hot rows are made float32 whatever the weight's dtype: a float64 or float16 weight makes "
          "one_hot @ weight raise a dtype mismatch (float32 weights are unaffected)",
          untrue=("transpose", "num_classes"), regime="a weight that is not float32"),
        M("one_hot_embed", "num_classes=weight.shape[0]", "num_classes=int(ids.max()) + 1",
          ("num_classes", "vocab", "shape", "width", "V"),
          "the one-hot width is the largest id in the batch + 1, not the vocabulary size: unless the batch holds "
          "the last id V - 1 the (.., m) @ (V, d) product raises a shape mismatch", untrue=("dtype", "transpose")),
        M("tied_logits", "return x @ weight.T", "return x @ weight.T.detach()",
          ("gradient", "grad", "detach", "backward"),
          "the head's logits use a detached copy of the embedding matrix: the values are right but no gradient "
          "reaches the tied weight from the output side (only the lookup's rows get one)",
          untrue=("transpose", "shape", "dtype"), regime="the gradient of the weight"),
        M("tie_weights", "lm_head.weight = tok_emb.weight", "lm_head.weight.detach().copy_(tok_emb.weight)",
          ("same parameter", "copy", "share", "tied", "object", "values"),
          "the embedding's values are copied into the head's own Parameter: equal at first, but two Parameters that "
          "drift apart on the first optimizer step, and V·d parameters more than a tied model",
          untrue=("transpose", "dtype")),
        M("tied_logits", "return x @ weight.T", "return x @ weight.T / weight.shape[1] ** 0.5",
          ("scale", "sqrt", "1/sqrt", "temperature", "divide"),
          "the logits are divided by sqrt(d) as if they were attention scores: every logit is 1/sqrt(d) of x·w, "
          "so the softmax is much flatter (the argmax is kept)", untrue=("transpose", "dtype", "shape")),
    ],
    "02": [
        M("rms_norm", "torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)",
          "1.0 / (x32.pow(2).mean(dim=-1, keepdim=True).sqrt() + eps)",
          ("eps", "epsilon", "square root", "sqrt", "inside"),
          "eps is added to the root mean square instead of to the mean square under the root: indistinguishable "
          "for rows of unit scale, but rows with an RMS near sqrt(eps) or below (tiny activations, a large eps) "
          "come out far smaller than 1/RMS·x",
          untrue=("dtype", "axis", "mean over"), regime="rows of tiny magnitude or a large eps"),
        M("rms_norm", "x32 = x.float()", "x32 = x.to(torch.bfloat16)",
          ("bfloat16", "precision", "float32", "dtype", "statistic", "round"),
          "the statistic is computed in bfloat16 whatever the input: a float32 input is rounded to 3 significant "
          "digits before squaring, so the output is off by up to ~0.5% (float16 inputs lose bits too)",
          untrue=("axis", "eps", "overflow")),
        # https://github.com/huggingface/transformers/pull/25421
        M("rms_norm", "return weight * (x32 * inv_rms).to(x.dtype)", "return weight * (x32.to(x.dtype) * inv_rms)",
          DTYPE + ("downcast",),
          "the downcast is applied to the operand, not to the normalised product (the typo transformers PR "
          "#25421 fixed in LlamaRMSNorm): x32.to(float16) times the float32 inv_rms is float32, so a float16 "
          "input with a float16 gain comes back float32", untrue=("eps", "axis", "overflow"),
          regime="a float16 or bfloat16 input and gain"),
        M("rms_norm", "x32.pow(2).mean(dim=-1, keepdim=True)", "x32.pow(2).mean(dim=(-2, -1), keepdim=True)",
          ("axis", "dim", "token", "per token", "statistic", "feature"),
          "the mean square is taken over the last two axes, tokens and features together: one RMS per sequence, "
          "so each token is scaled by the sequence's statistic instead of its own; right only for a single token",
          untrue=("eps", "dtype")),
        M("layer_norm", "var = centred.pow(2).mean(dim=-1, keepdim=True)",
          "var = centred.pow(2).sum(dim=-1, keepdim=True) / (x.shape[-1] - 1)",
          ("unbiased", "biased", "variance", "d - 1", "bessel", "divisor"),
          "the variance divides by d - 1 (unbiased) instead of d: every output is scaled by sqrt((d-1)/d), "
          "about 3% small at d = 16", untrue=("axis", "eps", "dtype")),
        M("RMSNorm", "self.weight = nn.Parameter(torch.ones(dim))",
          "self.weight = nn.Parameter(torch.ones(dim), requires_grad=False)",
          ("requires_grad", "frozen", "trainable", "gradient", "parameter"),
          "the gain is a frozen Parameter: forward and state_dict are right, but it gets no gradient and never "
          "trains (the optimizer skips it)", untrue=("eps", "dtype", "axis")),
    ],
    "03": [
        # https://github.com/ml-explore/mlx/pull/2836
        M("causal_mask", "allowed.tril(diagonal=kv_len - q_len)", "allowed.tril(diagonal=0)",
          ("bottom-right", "top-left", "kv_len", "offset", "cached", "diagonal", "align"),
          "the mask is aligned top-left (query i sees keys 0..i), the alignment mlx PR #2836 switched to for "
          "PyTorch parity: right when q_len == kv_len, but with cached keys a decoding query sees only the first "
          "key(s) instead of all of them", untrue=("transpose", "dtype", "softmax"),
          regime="q_len < kv_len (a KV cache)"),
        M("split_heads", "x = x.view(B, T, n_heads, d // n_heads)",
          "x = x.view(B, T, d // n_heads, n_heads).transpose(-1, -2)",
          LAYOUT + ("stride", "contiguous"),
          "the shape (B, T, H, hd) is right but head h gets features h, h + H, h + 2H, ... (strided) instead of "
          "the contiguous block h·hd .. (h+1)·hd - 1; a round trip through merge_heads does not give x back",
          untrue=("softmax", "dtype", "mask")),
        M("split_heads", "return y.transpose(1, 2).reshape(B, T, H * hd)",
          "return y.movedim(1, -1).reshape(B, T, H * hd)",
          LAYOUT,
          "merge_heads moves the head axis last before flattening: feature j·H + h holds head h's feature j, so "
          "the heads are interleaved instead of side by side and o_proj reads scrambled features",
          untrue=("softmax", "dtype", "mask")),
        M("causal_attention", "/ math.sqrt(q.shape[-1])", "/ math.sqrt(q.size(1))",
          ("scale", "sqrt", "head_dim", "heads", "1/sqrt"),
          "the scores are divided by sqrt(number of heads), axis 1, instead of sqrt(head_dim): right only where "
          "H == hd", untrue=("mask", "transpose", "softmax axis")),
        M("causal_attention", "weights = scores.softmax(dim=-1)", "weights = torch.softmax(scores, dim=2)",
          ("softmax", "axis", "dim", "keys", "queries", "sum to 1"),
          "the softmax runs over axis 2, the queries, not the keys: columns sum to 1 instead of rows (with the "
          "-inf mask the last key's column puts all its weight on the last query)", untrue=("scale", "dtype",
          "transpose")),
        M("self_attention", "return F.linear(merge_heads(y), w_o)", "return merge_heads(y) @ w_o",
          ("transpose", "w_o", "output projection", "layout", "F.linear"),
          "the output projection uses w_o as [in, out]: merge_heads(y) @ w_o is F.linear with w_o transposed, "
          "right only for a symmetric w_o (q, k, v are projected correctly)", untrue=("softmax", "mask", "dtype")),
        M("attention_flops", '"mix": B * n_heads * per_head', '"mix": B * per_head',
          COUNT + ("mix", "heads", "n_heads", "per head"),
          "the mix matmul (weights @ v) is counted for one head only: n_heads times too small, while the scores "
          "are right", untrue=("causal", "projection", "head_dim")),
    ],
    "04": [
        # https://github.com/EleutherAI/gpt-neox/issues/1003
        M("rope_cache", "angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float32), inv_freq)",
          "angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float16), inv_freq.half()).float()",
          DTYPE + ("angle", "long", "position"),
          "the angle table is built in float16 (gpt-neox issue #1003): position x frequency products above 256 are "
          "rounded to steps of 0.25 to 1 radian, so cos/sin at far positions are wrong by up to ~0.5, and "
          "positions past 2048 collide", untrue=("layout", "interleav", "theta"),
          regime="positions beyond a few hundred"),
        # https://github.com/sgl-project/sglang-jax/issues/1472
        M("rope_cache", "inv_freq = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)",
          "inv_freq = (theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))"
          ".to(torch.bfloat16).float()",
          DTYPE + ("frequency", "inv_freq", "angle"),
          "the inverse frequencies are rounded to bfloat16 before the phase is computed (sglang-jax issue #1472): "
          "each frequency is off by up to 0.4%, an angle error that grows with the position (radians at a few "
          "hundred)", untrue=("layout", "interleav", "theta"), regime="positions beyond a few dozen"),
        M("rope_cache", "torch.arange(0, head_dim, 2, dtype=torch.float32)",
          "torch.arange(head_dim // 2, dtype=torch.float32)",
          ("frequency", "exponent", "inv_freq", "2i", "theta"),
          "the exponent is i/hd instead of 2i/hd: the frequencies run from 1 down to theta^(-1/2) only, so the "
          "slow features turn far faster than in the reference table", untrue=("dtype", "layout", "start_pos")),
        M("apply_rope", "T = x.shape[-2]", "T = x.shape[1]",
          ("axis", "heads", "length", "shape", "T"),
          "the length is read from axis 1, the heads, not axis -2, the positions: the table slice has H rows, so "
          "with H != T the product with x fails to broadcast (unless the slice has a single row)",
          untrue=("dtype", "sign", "layout"), regime="n_heads != sequence length"),
        M("rotary_attention", "k = apply_rope(k, cos, sin, start_pos)\n",
          "k = apply_rope(k, cos, sin, start_pos)\n"
          "    v = apply_rope(v, cos, sin, start_pos)  # every projection gets a position\n",
          ("value", "values", "v", "rope on v"),
          "the values are rotated too: the mix weights @ v returns rotated vectors, so each output depends on the "
          "absolute positions of the keys it reads", untrue=("dtype", "start_pos", "mask")),
        M("interleaved_to_half", "q_proj = interleaved_to_half(wq, n_heads)",
          "q_proj = interleaved_to_half(wq, n_kv_heads)",
          ("n_heads", "query heads", "heads", "gqa", "block"),
          "the query rows are regrouped as n_kv_heads blocks: right without GQA, but with fewer kv heads each block "
          "spans several query heads and pairs are gathered across them", untrue=("dtype", "value"),
          regime="n_kv_heads < n_heads"),
        M("interleaved_to_half", "pairs = w.reshape(n_heads, hd // 2, 2, d_in)",
          "pairs = w.reshape(hd // 2, n_heads, 2, d_in)",
          LAYOUT + ("head", "block", "group"),
          "the rows are grouped as (pair, head) instead of (head, pair): with several heads pairs are gathered "
          "across heads, and with one head the rows come back unchanged (still interleaved)",
          untrue=("dtype", "n_kv_heads")),
    ],
    "05": [
        M("swiglu", "gate = F.silu(x @ w_gate.T)", "gate = F.silu(x @ w_up.T)",
          ("w_gate", "gate", "weight", "unused", "up"),
          "the gate is computed from w_up: w_gate is never used (and gets no gradient) and the MLP is "
          "silu(x W_u) · x W_u", untrue=("activation", "transpose", "dtype")),
        M("swiglu_hidden", "multiple * math.ceil(8 * d_model / 3 / multiple)",
          "multiple * (8 * d_model // 3 // multiple)",
          ("round", "ceil", "floor", "multiple", "up"),
          "8/3·d_model is rounded down to the multiple, not up: 128 gives 320 instead of 352; right only where "
          "8·d/3 already is a multiple", untrue=("dtype", "instead of 8/3")),
        M("pre_norm_block", "x = x + attn(attn_norm(x))  # the branch reads a normalised copy; the stream stays a sum",
          "x = attn_norm(x) + attn(attn_norm(x))",
          ("residual", "stream", "normalised", "skip", "norm"),
          "the residual adds the normalised copy instead of the raw stream: the block's input scale is thrown away "
          "at every block (a fresh norm rescales each token to unit RMS)", untrue=("dtype", "order", "transpose")),
        M("Transformer", "self.v_proj = nn.Linear(config.d_model, config.n_kv_heads * config.head_dim, bias=False)",
          "self.v_proj = nn.Linear(config.d_model, config.n_kv_heads * config.head_dim)",
          ("bias", "parameter", "count", "state_dict", "v_proj"),
          "v_proj keeps nn.Linear's default bias: n_kv·hd extra parameters per layer, initialised uniformly (reset "
          "only re-draws matrices), so outputs differ and tinylm's state dict does not load",
          untrue=("rope", "dtype", "transpose")),
        M("Transformer", "for i, block in enumerate(self.blocks):", "for i, block in enumerate(self.blocks, start=1):",
          ("layer_idx", "layer", "cache", "index", "off by one"),
          "the layers are numbered from 1: without a cache nothing changes, with one the last block asks for cache "
          "slot n_layers, which does not exist (IndexError)", untrue=("dtype", "start_pos", "rope"),
          regime="a KV cache"),
        # https://github.com/karpathy/llama2.c/issues/378
        M("param_counts", '"embedding": config.vocab_size * d,',
          '"embedding": config.vocab_size * d * (2 if config.tie_embeddings else 1),',
          COUNT + ("tied", "tie", "embedding", "twice"),
          "the tied matrix is counted twice under 'embedding' (once per name, the excess llama2.c issue #378 "
          "traced to counting a state dict's two names of one matrix): V·d too many for a tied model",
          untrue=("norm", "head_dim", "n_kv_heads"), regime="tie_embeddings=True"),
    ],
    "06": [
        M("kv_cache_bytes", "* batch_size * dtype.itemsize", "* batch_size * torch.finfo(dtype).bits",
          COUNT + ("bits", "itemsize", "8"),
          "bits per element instead of bytes: 8 times too large", untrue=("n_kv_heads", "head_dim")),
        # https://github.com/LMCache/LMCache/issues/688
        M("kv_cache_bytes", "config.n_kv_heads * config.head_dim  # K and V",
          "config.n_kv_heads * (config.d_model // config.n_heads)  # K and V",
          COUNT + ("head_dim", "d_model"),
          "the head width is recomputed as d_model // n_heads (LMCache issue #688: wrong for Qwen3-4B) instead "
          "of config.head_dim: right unless the config sets head_dim apart", untrue=("n_kv_heads", "dtype"),
          regime="a config whose head_dim != d_model // n_heads"),
        M("cache_update", "k_all = torch.cat((past_k, k), dim=2)",
          "k_all = torch.cat((past_k, k), dim=2)[:, :, -past_k.shape[2]:]",
          ("length", "window", "drop", "oldest", "grow", "cache"),
          "the keys are cut back to the past length: with an empty past everything is kept ([-0:]), after that "
          "the oldest keys are dropped and k_all is shorter than v_all", untrue=("wrong axis", "dtype", "order"),
          regime="a non-empty past"),
        # https://github.com/pytorch/pytorch/issues/103082
        M("attention_step", "mask = tinylm.causal_mask(T, start + T).to(x.device)",
          "mask = tinylm.causal_mask(start + T)[:T].to(x.device)",
          ("top-left", "bottom-right", "mask", "align", "cached", "rows"),
          "the first T rows of the square mask are taken, the top-left alignment of SDPA's is_causal (pytorch issue "
          "#103082): with past keys the new queries see only keys 0 .. i instead of the whole past and their prefix; "
          "right with an empty cache", untrue=("dtype", "transpose", "scale"), regime="a non-empty cache"),
        M("attention_step", "start = past_k.shape[2]", "start = past_k.shape[-1]",
          ("axis", "start", "position", "head_dim", "shape[2]"),
          "the start position is read from the last axis, head_dim, not axis 2: the new tokens are rotated as if at "
          "position hd and the mask is built for hd + T keys, so a cache of another length breaks",
          untrue=("dtype", "transpose")),
        M("generate_greedy", "idx, step_input = prompt, prompt ", "idx, step_input = prompt, prompt[:, -1:] ",
          ("prefill", "prompt", "context", "cache", "last token"),
          "only the prompt's last token is prefilled: the cache never holds the rest of the prompt, so every new "
          "token is predicted from the last prompt token and the generated ones, as if the prompt had length 1; "
          "right only for one-token prompts", untrue=("dtype", "argmax", "reset")),
        # https://github.com/unslothai/unsloth/issues/3699
        M("generate_left_padded", "ids, positions = next_id[:, None], positions[:, -1:] + 1",
          "ids, positions = next_id[:, None], torch.full((B, 1), T + len(new) - 1)",
          ("position", "padding", "row", "shared", "per row"),
          "decoding steps give every row the same position T + step (one position tensor shared across the batch, "
          "unsloth issue #3699): right for the longest prompt, shifted by the pad count for the others",
          untrue=("dtype", "the mask is"), regime="prompts of different lengths"),
    ],
    "07": [
        # https://github.com/apple/axlearn/pull/842
        M("repeat_kv", "x = x[:, :, None].expand(B, n_kv, n_rep, T, hd)", "x = x.repeat(1, n_rep, 1, 1)[:, :, None]",
          ("order", "repeat_interleave", "tile", "group", "h // n_rep", "repeat"),
          "the kv heads are tiled (0, 1, 0, 1) instead of repeated in place (0, 0, 1, 1), the ordering axlearn PR "
          "#842 restored: query head h reads kv head h % n_kv instead of h // n_rep; right with one kv head",
          untrue=("dtype", "transpose", "axis 2"), regime="more than one kv head"),
        # https://github.com/onnx/onnx/pull/8068
        M("gqa_step", "repeat_kv(v_all, n_rep), attn_mask=mask)", "repeat_kv(v_all, n_rep), is_causal=True)",
          ("is_causal", "top-left", "bottom-right", "mask", "align", "cached"),
          "is_causal=True with cached keys: the mask is top-left aligned (the alignment onnx PR #8068 fixed for "
          "external KV caches), so a decoding query sees only key 0",
          untrue=("repeat", "dtype", "order"), regime="a non-empty cache"),
        M("gqa_step", "repeat_kv(v_all, n_rep), attn_mask=mask)", "v_all.repeat(1, n_rep, 1, 1), attn_mask=mask)",
          ("order", "repeat_interleave", "tile", "value", "group"),
          "the values are tiled (0, 1, 0, 1) while the keys are repeated in place (0, 0, 1, 1): query head h reads "
          "its scores against kv head h // n_rep but mixes the values of kv head h % n_kv",
          untrue=("dtype", "mask", "position"), regime="more than one kv head"),
        M("gqa_step", "q, k = tinylm.apply_rope(q, cos, sin, start), tinylm.apply_rope(k, cos, sin, start)",
          "q, k = tinylm.apply_rope(q, cos, sin, start), tinylm.apply_rope(k, cos, sin)",
          POS + ("key", "keys"),
          "the new keys are rotated as positions 0 .. T - 1 whatever the cache holds: with an empty cache nothing "
          "changes; after a prefill the stored keys carry wrong positions", untrue=("repeat", "dtype"),
          regime="a non-empty cache"),
        # https://github.com/vllm-project/vllm/pull/29736
        M("decode_bytes_per_token", "kv_cache = 2 * L * config.n_kv_heads * hd * context_len * size",
          "kv_cache = 2 * L * config.d_model * context_len * size",
          COUNT + ("n_kv_heads", "kv heads", "gqa", "d_model"),
          "the cache read is sized as 2·hidden_size per layer (the formula the review of vLLM PR #29736 corrected): "
          "n_heads·hd instead of n_kv_heads·hd, n_rep times too large under GQA (and wrong when head_dim is set "
          "apart)", untrue=("weights", "dtype"), regime="n_kv_heads < n_heads"),
        M("decode_bytes_per_token", "(1 if config.tie_embeddings else 2)", "1",
          COUNT + ("untied", "head", "lm_head", "embedding"),
          "an untied head is not counted: the weights read per token are V·d·size bytes short when "
          "tie_embeddings is False", untrue=("kv", "n_kv_heads"), regime="tie_embeddings=False"),
    ],
    "08": [
        # https://github.com/TransformerLensOrg/TransformerLens/pull/1347
        M("top_k_filter", "k = min(k, logits.shape[-1])", "k = int(k)",
          ("vocab", "clamp", "k >", "out of range", "larger"),
          "k is not clamped to the vocabulary: top_k larger than V raises 'selected index k out of range' "
          "(TransformerLens PR #1347) instead of keeping every token", untrue=("tie", "dtype"),
          regime="k > vocabulary size"),
        M("top_k_filter", "kth = logits.topk(k, dim=-1).values[..., -1:]",
          "kth = logits.topk(k, dim=-1).values[..., k - 1]",
          ("broadcast", "batch", "keepdim", "row", "shape"),
          "the k-th value is taken without keeping its axis, shape (B,): compared with (B, V) logits it broadcasts "
          "along the vocabulary, so it works for 1-D logits or a batch of one and raises (or compares row b with "
          "column b) for B > 1", untrue=("tie", "dtype"), regime="a batch of more than one row"),
        M("top_p_filter", "sorted_logits, order = logits.sort(dim=-1, descending=True)",
          "sorted_logits, order = logits.sort(dim=0, descending=True)",
          ("sort", "axis", "dim", "batch", "row"),
          "the logits are sorted along axis 0: for 1-D logits that is the vocabulary, for (B, V) logits it sorts "
          "across the batch, so the nucleus is computed on unsorted rows and scattered back along the wrong axis",
          untrue=("dtype", "temperature"), regime="2-D logits"),
        M("sample_next", "logits = logits / temperature             # on logits, before any filter\n"
          "    if top_k is not None:\n        logits = top_k_filter(logits, top_k)\n"
          "    if top_p is not None:\n        logits = top_p_filter(logits, top_p)\n",
          "if top_k is not None:\n        logits = top_k_filter(logits, top_k)\n"
          "    if top_p is not None:\n        logits = top_p_filter(logits, top_p)\n"
          "    logits = logits / temperature             # after the filters\n",
          ("order", "temperature", "before", "after", "nucleus"),
          "temperature is applied after the filters: top-k is unaffected (the order of logits is kept), but the "
          "nucleus is chosen on the untempered distribution, so with top_p and temperature != 1 a different set "
          "of tokens is kept", untrue=("in place", "dtype", "generator"), regime="top_p with temperature != 1"),
        M("top_p_filter", 'return logits.masked_fill(drop, float("-inf"))',
          'logits[drop] = float("-inf")\n    return logits',
          ("in place", "in-place", "caller", "modif", "mutat"),
          "the tokens outside the nucleus are set to -inf in the caller's tensor: the returned logits are right, "
          "but the caller's are changed (and a leaf that requires grad raises)", untrue=("order", "dtype"),
          regime="a caller that reuses its logits"),
        M("sample_next", "num_samples=1, generator=generator)", "num_samples=1)",
          ("generator", "seed", "reproduc", "rng", "random"),
          "the caller's generator is ignored: draws come from the global RNG, so a seeded generator gives no "
          "reproducible samples and the global stream is advanced", untrue=("order", "dtype", "temperature")),
        # https://github.com/IBM/pytorch-seq2seq/pull/38
        M("generate", "model.eval()                                            # dropout off",
          "model.train(was_training)                               # dropout off",
          MODE + ("dropout",),
          "the model is put back in the caller's mode instead of eval mode before generating (pytorch-seq2seq PR "
          "#38 added the missing eval() for inference): a model handed over in train mode samples with dropout on, "
          "so its tokens are noisier and not those of the eval-mode model",
          untrue=("dtype", "temperature applied", "in place"), regime="a model in train mode with dropout > 0"),
    ],
    "09": [
        M("get_batch", "window = data[idx].long()", "window = data[idx].to(torch.int32)",
          ("int64", "long", "dtype", "int32", "integer"),
          "the windows are made int32: x and y are not the int64 the exercise asks for (and cross_entropy rejects "
          "int32 targets on some versions)", untrue=("off by one", "shift")),
        M("lm_loss", "F.cross_entropy(logits.flatten(0, 1), targets.flatten()",
          "F.cross_entropy(logits[:, :-1].flatten(0, 1), targets[:, 1:].flatten()",
          ("shift", "shifted", "targets", "already", "next token"),
          "the targets are shifted again though get_batch already aligned y[t] with x[t + 1]: logits at t are "
          "scored against the token two ahead, and the last position is dropped", untrue=("dtype", "ignore_index")),
        # https://github.com/karpathy/nanoGPT/pull/578
        M("lr_schedule", "return max_lr * (step + 1) / warmup_steps", "return max_lr * (step + 1) / (warmup_steps + 1)",
          ("warmup", "max_lr", "peak", "off by one", "+ 1"),
          "the warmup divides by warmup_steps + 1 (nanoGPT PR #578's fix for issue #443): step 0 is non-zero, but "
          "the last warmup step reaches only warmup/(warmup + 1) of max_lr and the ramp is lower throughout",
          untrue=("cosine", "min_lr")),
        # https://github.com/unslothai/unsloth-zoo/pull/1023
        M("train_step_accumulated", "(summed / n_tokens).backward()",
          "(summed / n_tokens / len(micro_batches)).backward()",
          ("normalis", "twice", "micro-batch", "scale", "gradient", "len(micro_batches)"),
          "the loss is normalised twice, by the batch's target count and again by the number of micro-batches "
          "(the 1/GA scaling unsloth-zoo PR #1023 guards against): the gradient is K times too small, which "
          "clipping and AdamW partly hide; the returned loss is right", untrue=("zero_grad", "clip", "dtype"),
          regime="more than one micro-batch"),
        M("train_step_costs", "+ 3 * attention_matmuls", "+ attention_matmuls",
          COUNT + ("backward", "attention", "forward only"),
          "the attention matmuls are counted for the forward pass only: their backward (twice the forward) is left "
          "out, so the attention FLOPs are a third of the right ones", untrue=("tied", "weights", "adam")),
        # https://github.com/pytorch/torchtitan/pull/3225
        M("train_step_costs", "head = V * d  ", "head = 0 if config.tie_embeddings else V * d  ",
          COUNT + ("head", "tied", "lm_head", "output projection"),
          "the head's matmul is dropped when it is tied, though the output projection still runs (torchtitan PR "
          "#3225 kept it in the FLOPs); n_params also loses V·d, so weights, grads and Adam bytes are short",
          untrue=("attention", "backward is"), regime="tie_embeddings=True"),
    ],
    "10": [
        # https://github.com/EleutherAI/lm-evaluation-harness/pull/242
        M("evaluate", '"bits_per_byte": loss / math.log(2) / bytes_per_token',
          '"bits_per_byte": loss / bytes_per_token',
          ("bits", "nats", "log(2)", "ln 2", "base"),
          "bits per byte are nats per byte: the division by ln 2 is missing (the mistake lm-evaluation-harness PR "
          "#242 fixed), so the value is ln 2 ≈ 0.69 times the right one",
          untrue=("count", "mode", "bytes_per_token")),
        M("nll_sum_and_count", "return nll.item(), count", "return nll.item(), (targets != ignore_index).sum()",
          ("int", "tensor", "type", "count", "python"),
          "the count is returned as a 0-d tensor, not an int: sums with it stay tensors, and the docstring's "
          "'number of scored targets as an int' does not hold", untrue=("padding", "dtype", "shift")),
        M("nll_sum_and_count", "targets.flatten(), ignore_index=ignore_index",
          "targets.flatten().clamp(min=0), ignore_index=ignore_index",
          ("padding", "ignore_index", "clamp", "token 0", "scored"),
          "the targets are clamped to >= 0 before the loss: -100 padding becomes token 0 and is scored, while the "
          "count still leaves it out", untrue=("dtype", "shift"), regime="padded targets"),
        # https://github.com/huggingface/transformers/issues/24839
        M("evaluate", "total, count = total + s, count + n", "total, count = total + s / n * len(y), count + len(y)",
          ("token", "weight", "rows", "sequences", "average", "batch"),
          "each batch's mean loss is weighted by its number of rows instead of its number of targets (the batch-size "
          "dependence of transformers issue #24839): right when every row has as many targets, off with padding",
          untrue=("dtype", "mode", "log"), regime="rows with different numbers of targets"),
        # https://github.com/wkentaro/pytorch-fcn/pull/56
        M("evaluate", "was_training = model.training\n    model.eval()",
          "model.eval()\n    was_training = model.training",
          MODE, "the mode is read after model.eval(): was_training is always False, so a model that was training is "
          "handed back in eval mode and trains on without dropout (pytorch-fcn PR #56 returned to train mode after "
          "validation)", untrue=("dtype", "token", "bits"), regime="a model in train mode"),
        M("bigram_nll", "train[:-1] * 256 + train[1:]", "train[1:] * 256 + train[:-1]",
          ("transpose", "order", "prev", "next", "row"),
          "the counts are indexed [next, prev] but read as [prev, next]: each row holds the distribution of the "
          "previous byte given the next one", untrue=("alpha", "dtype")),
    ],
}

SAME = [
    ("01", M("embed", "return weight[ids]", "return weight.index_select(0, ids.reshape(-1)).reshape(*ids.shape, -1)",
             (),
             "index_select on the flattened ids, reshaped back")),
    ("01", M("tied_logits", "return x @ weight.T", "return torch.einsum(\"btd,vd->btv\", x, weight)", (),
             "the same product written as an einsum on (B, T, d) inputs")),
    ("02", M("rms_norm", "x32.pow(2).mean(dim=-1, keepdim=True)", "(x32 * x32).mean(dim=-1, keepdim=True)", (),
             "squares as a product")),
    ("02", M("layer_norm", "var = centred.pow(2).mean(dim=-1, keepdim=True)",
             "var = centred.square().sum(dim=-1, keepdim=True) / x.shape[-1]", (), "the biased variance as sum / d")),
    ("03", M("causal_attention", "q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])",
             "q @ k.mT * q.shape[-1] ** -0.5", (), "mT and a multiplied inverse square root")),
    ("03", M("causal_mask", "allowed = torch.ones(q_len, kv_len, dtype=torch.bool)",
             "allowed = torch.full((q_len, kv_len), True)", (), "a full bool tensor")),
    ("04", M("rotary_attention", "return tinylm.causal_attention(q, k, v)",
             "return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)", (),
             "SDPA with is_causal on equal-length q and k (no cache here: start_pos only rotates)")),
    ("04", M("apply_rope", "return x * cos + rotate_half(x) * sin", "return x * cos + rotate_half(x * sin)", (),
             "sin multiplies before the half rotation: both halves of a sin row are equal, so the product is "
             "the same")),
    ("04", M("rope_cache", "angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float32), inv_freq)",
             "angles = torch.arange(max_seq_len, dtype=torch.float32)[:, None] * inv_freq[None, :]", (),
             "the outer product by broadcasting")),
    ("05", M("Transformer", "self.lm_head.weight = self.tok_emb.weight", "self.tok_emb.weight = self.lm_head.weight",
             (),
             "the tie made from the other side: one Parameter under both names, initialised by reset_parameters")),
    ("06", M("cache_update", "k_all = torch.cat((past_k, k), dim=2)", "k_all = torch.cat([past_k, k], dim=-2)", (),
             "axis -2 of a 4-D tensor is axis 2")),
    ("07", M("repeat_kv", "x = x[:, :, None].expand(B, n_kv, n_rep, T, hd)",
             "x = x.repeat_interleave(n_rep, dim=1).view(B, n_kv, n_rep, T, hd)", (),
             "repeat_interleave on the head axis, viewed back in groups")),
    ("08", M("top_k_filter", 'return logits.masked_fill(logits < kth, float("-inf"))',
             'return torch.where(logits >= kth, logits, torch.full_like(logits, float("-inf")))', (),
             "where with the complementary comparison")),
    ("09", M("lm_loss", "logits.flatten(0, 1), targets.flatten()",
             "logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)", (),
             "reshape to (B*T, V) and (B*T,)")),
    ("10", M("bigram_nll", "return -probs.log()[val[:-1], val[1:]].mean().item()",
             "return -torch.log(probs[val[:-1], val[1:]]).mean().item()", (), "index first, then log")),
]
