"""A thirteenth held-out set of learner mistakes ("fresh10"), written without
reading the checks: neither autograder/checks/, autograder/specimens/,
tests/checks/ nor the expected words of the other mutation sets were opened
(benchmarks/mutations/__init__.py was read for the format, and the head of
fresh9.py for the layout of an entry). The mistakes were written from the
solution answer cells (printed through bench_diagnostics.notebook_cells),
the seed note on transformer maths (its list of bugs to expect: wrong layout
after reshape/transpose, mask alignment, softmax over the wrong axis, RoPE on
the values, the cache concatenated wrongly, GQA repetition, labels not
shifted, dropout left on while generating, temperature after the filters)
and, for 20 of them, bugs that public projects shipped or were asked to fix
(the thread is named in the reason). No mistake was tried against a check
before the set was first measured. Not part of the default run:
`python benchmarks/bench_diagnostics.py --set fresh10`.

Each mistake is one substitution in one answer cell. `expect` holds words a
check that found this mistake would likely say; `untrue` words of causes that
would be wrong for it (what a check reading only the numbers might blame);
`regime` the situation in which a mistake that is right by default shows;
`in_lists`, filled in after the first measurement by comparing the texts,
marks the 26 that turned out to be character for character an entry of
another list (21 of them of the default set).

SAME lists 10 edits that are not mistakes: the cell computes what the solution
computes, another way (F.embedding for indexing, SDPA's enable_gqa for
repeat_kv, cross_entropy's default ignore_index written out or left out, ...).
A check must pass each; bench_diagnostics reports any it fails as a false
alarm.
"""
from __future__ import annotations

from . import Mutation
from .unseen import Unseen as M

SHAPE = ("shape", "axis", "layout", "transpose")
DTYPE = ("dtype", "float32", "float16", "bfloat16", "precision", "cast", "upcast")
IN_PLACE = ("in place", "in-place", "modif", "caller's", "input was changed", "overwr")
ROPE_OFFSET = ("start_pos", "offset", "position", "cache")

MUTATIONS = {
    "01": [
        M("embed", "return weight[ids]", "return weight[:, ids]",
          SHAPE + ("row", "column", "(..., d)", "[v, d]"),
          "indexes the columns of the [V, d] table (weight[:, ids]) as if it were stored [d, V]: the rows are the "
          "tokens, so the result is (d, ...) and holds feature values picked by id, not embeddings",
          untrue=("dtype", "gradient", "copy", "one-hot"), in_lists=True),
        M("one_hot_embed", ".to(weight.dtype)", "",
          DTYPE + ("int64", "long", "integer", "float"),
          "leaves the one-hot matrix as F.one_hot returns it, int64, and multiplies it by the float table: matmul "
          "of an integer and a float tensor raises (torch does not promote in @)",
          untrue=("num_classes", "transpose", "width"), in_lists=True),
        M("one_hot_embed", "num_classes=weight.shape[0]", "num_classes=weight.shape[1]",
          ("num_classes", "vocab", "width", "shape[0]", "(..., v)", "one-hot"),
          "sizes the one-hot vectors by the embedding width d (weight.shape[1]) instead of the vocabulary V: "
          "ids >= d raise, and (..., d) @ (V, d) does not fit unless d == V",
          untrue=("dtype", "int64", "transpose"), in_lists=True),
        M("tied_logits", "return x @ weight.T", "return weight @ x.transpose(-2, -1)",
          SHAPE + ("(b, t, v)", "(b, v, t)", "order"),
          "writes the product the other way round, W @ xᵀ as in the maths notation: the values are the logits but "
          "laid out (B, V, T), vocabulary before positions, where the head returns (B, T, V)",
          untrue=("scale", "dtype", "softmax", "bias")),
        M("tie_weights", "lm_head.weight = tok_emb.weight", "tok_emb.weight = lm_head.weight",
          ("direction", "tok_emb", "embedding's", "other way", "replaced", "the head's", "lm_head's"),
          "ties in the wrong direction: both modules now share the head's Parameter, so the embedding table is "
          "thrown away and replaced by the head's initial values (an optimizer built before holds a Parameter "
          "the model no longer uses)",
          untrue=("copy", "clone", "detach", "shape"), in_lists=True),
    ],
    "02": [
        # https://github.com/pytorch/pytorch/pull/133085 (nn.RMSNorm squared float16 input without upcasting)
        M("rms_norm", "x32 = x.float()", "x32 = x",
          DTYPE + ("overflow", "inf", "256"),
          "squares the input in its own dtype, as torch's fused nn.RMSNorm did before pytorch/pytorch#133085: "
          "float16 entries above 256 square to inf, the RMS is inf and the token comes out as zeros",
          regime="float16 input with entries above 256", untrue=("eps", "axis", "dim", "sum"), in_lists=True),
        M("rms_norm", "x32.pow(2).mean(dim=-1, keepdim=True)", "x32.pow(2).mean(dim=0, keepdim=True)",
          SHAPE + ("dim", "per token", "feature", "over the batch", "last axis"),
          "takes the mean square over the first axis (the batch) instead of the features: one statistic per "
          "feature shared by the tokens, not one per token",
          untrue=("eps", "dtype", "sqrt", "sum")),
        M("rms_norm", "x32.pow(2).mean(dim=-1, keepdim=True)", "x32.pow(2).sum(dim=-1, keepdim=True)",
          ("sum", "mean", "sqrt(d)", "divid", "factor", "by d"),
          "sums the squares instead of averaging them: the result is divided by the L2 norm, so it is "
          "sqrt(d) times too small",
          untrue=("eps", "dtype", "axis", "dim=0")),
        M("layer_norm", "var = centred.pow(2).mean(dim=-1, keepdim=True)", "var = x.var(dim=-1, keepdim=True)",
          ("unbiased", "bessel", "d - 1", "n - 1", "n-1", "d-1", "correction", "biased"),
          "uses torch.var with its default correction, the unbiased variance (divides by d - 1): LayerNorm "
          "divides by d",
          untrue=("eps", "mean", "axis", "centre"), in_lists=True),
        M("RMSNorm", "self.weight = nn.Parameter(torch.ones(dim))", "self.weight = torch.ones(dim)",
          ("parameter", "trainable", "parameters()", "state_dict", "requires_grad", "learn"),
          "stores the gain as a plain tensor: the values are right, but it is not a Parameter, so the "
          "optimizer never sees it, it gets no gradient and it is missing from state_dict",
          untrue=("eps", "ones", "init", "dtype"), in_lists=True),
        M("RMSNorm", "return rms_norm(x, self.weight, self.eps)", "return rms_norm(x, self.weight)",
          ("eps", "epsilon", "self.eps"),
          "stores eps but calls rms_norm without it, so the default 1e-6 is used whatever eps the module was "
          "built with",
          regime="an eps other than 1e-6", untrue=("parameter", "dtype", "axis"), in_lists=True),
    ],
    "03": [
        # https://github.com/pytorch/pytorch/issues/108108 (SDPA's is_causal is top-left aligned when Tq != Tk)
        M("causal_mask", "allowed.tril(diagonal=kv_len - q_len)", "allowed.tril()",
          ("kv_len - q_len", "offset", "diagonal", "bottom-right", "align", "q_len < kv_len", "last query",
           "cached"),
          "builds the square tril mask and cuts it to (q_len, kv_len), top-left aligned like SDPA's is_causal "
          "(pytorch/pytorch#108108): with q_len < kv_len the queries are the last positions, yet query 0 sees "
          "only key 0",
          regime="q_len < kv_len (queries after cached keys)", untrue=("triu", "inverted", "strict", "transpose")),
        M("split_heads", "return x.transpose(1, 2)", "return x.reshape(B, n_heads, T, d // n_heads)",
          SHAPE + ("reshape", "view", "mix", "positions", "heads", "contents"),
          "reshapes (B, T, H, hd) straight to (B, H, T, hd) instead of swapping the axes: the shape is right but "
          "each 'head' holds pieces of several positions",
          untrue=("scale", "mask", "softmax", "dtype")),
        M("split_heads", "y.transpose(1, 2).reshape(B, T, H * hd)", "y.permute(0, 2, 3, 1).reshape(B, T, H * hd)",
          SHAPE + ("permute", "order", "interleav", "side by side", "feature"),
          "merges the heads with the wrong permutation, (B, T, hd, H): the features of the heads are "
          "interleaved instead of side by side, so the output projection reads them in the wrong order",
          untrue=("scale", "mask", "softmax")),
        M("causal_attention", "scores.softmax(dim=-1)", "scores.softmax(dim=-2)",
          ("dim", "axis", "keys", "sum to 1", "sums to 1", "rows", "softmax"),
          "normalises over the queries (dim=-2) instead of the keys: the columns sum to 1, not the rows, and the "
          "masked -inf of the upper triangle lands in each column's softmax",
          untrue=("mask", "scale", "sqrt", "offset"), in_lists=True),
        M("attention_flops", "per_head = 2 * T * T * head_dim", "per_head = T * (T + 1) * head_dim",
          ("causal", "half", "masked", "full", "t * t", "t²", "t^2", "triangle"),
          "counts only the causal half of the score and mix matmuls, 2 · T(T+1)/2 · hd, as if masked entries were "
          "not computed: the dense matmuls compute all T x T",
          untrue=("multiply-add", "heads", "projection", "batch")),
    ],
    "04": [
        # https://github.com/raiyanyahya/how-to-train-your-gpt/issues/6 (repeat_interleave angles with rotate_half)
        M("rope_cache", "torch.cat((angles, angles), dim=-1)", "angles.repeat_interleave(2, dim=-1)",
          ("interleav", "pair", "half", "i + hd/2", "hd/2", "cat", "layout", "adjacent"),
          "lays the angles out for adjacent pairs (θ0, θ0, θ1, θ1, ...) while rotate_half pairs feature i with "
          "i + hd/2, the mismatch of raiyanyahya/how-to-train-your-gpt#6: the paired features get different "
          "angles and the dot product no longer depends on the relative position only",
          untrue=("theta", "start_pos", "sign", "dtype"), in_lists=True),
        M("rope_cache", "-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim",
          "-torch.arange(head_dim // 2, dtype=torch.float32) / head_dim",
          ("frequenc", "2i", "exponent", "inv_freq", "step", "theta"),
          "uses the exponents i / hd for i = 0 .. hd/2 - 1 instead of 2i / hd: the frequencies fall half as fast, "
          "the slowest one is theta^-1/2 instead of about theta^-1",
          untrue=("position", "start_pos", "interleav", "sign")),
        M("apply_rope", "torch.cat((-x2, x1), dim=-1)", "torch.cat((x2, -x1), dim=-1)",
          ("sign", "direction", "-x2", "negat", "clockwise", "rotate_half", "-θ", "angle"),
          "puts the minus sign on the other half, (x2, -x1): every pair is rotated by -θ instead of θ",
          untrue=("frequenc", "start_pos", "interleav", "dtype"), in_lists=True),
        # https://github.com/pytorch/executorch/pull/2010 (cached branch did not slice the tables at start_pos)
        M("apply_rope", "cos = cos[start_pos:start_pos + T].to(x.dtype)", "cos = cos[:T].to(x.dtype)",
          ROPE_OFFSET + ("cos",),
          "slices the cosine table from position 0 whatever start_pos is (the sine table is sliced right), the "
          "slicing that pytorch/executorch#2010 fixed in a cached branch: past the prompt the cos and sin of "
          "different positions are mixed",
          regime="start_pos > 0", untrue=("frequenc", "interleav", "sign", "dtype")),
        M("rotary_attention", "k = apply_rope(k, cos, sin, start_pos)", "v = apply_rope(v, cos, sin, start_pos)",
          ("value", "keys", "rotate k", "k is not", "not rotated", "q and k"),
          "rotates the values instead of the keys (the seed note's 'RoPE applied to values'): the scores carry "
          "no relative position and the mixed values are rotated",
          untrue=("start_pos", "frequenc", "sign", "interleav")),
    ],
    "05": [
        M("swiglu", "F.silu(x @ w_gate.T)", "torch.sigmoid(x @ w_gate.T)",
          ("silu", "sigmoid", "swish", "x · sigmoid", "x * sigmoid", "activation"),
          "gates with the sigmoid (GLU) instead of SiLU = x · sigmoid(x) (SwiGLU)",
          untrue=("transpose", "swap", "w_down", "shape"), in_lists=True),
        M("swiglu",
          "F.silu(x @ w_gate.T)  # (B, T, d_ff): the nonlinearity lives on the gate only\n    up = x @ w_up.T",
          "F.silu(x @ w_up.T)  # (B, T, d_ff): the nonlinearity lives on the gate only\n    up = x @ w_gate.T",
          ("gate", "up", "swap", "w_gate", "w_up", "nonlinearity", "branch"),
          "swaps the two branches: SiLU is applied to the up projection and the gate projection stays linear, so "
          "a checkpoint's gate_proj and up_proj do the other's job",
          untrue=("sigmoid", "transpose", "w_down", "shape")),
        M("pre_norm_block",
          "x = x + attn(attn_norm(x))  # the branch reads a normalised copy; the stream stays a sum\n"
          "    x = x + mlp(mlp_norm(x))",
          "x = attn_norm(x + attn(x))  # the branch reads a normalised copy; the stream stays a sum\n"
          "    x = mlp_norm(x + mlp(x))",
          ("post-norm", "post norm", "postnorm", "pre-norm", "after the residual", "normalis", "normaliz",
           "stream", "residual"),
          "writes the original Transformer's post-norm block, norm(x + f(x)): the branches read the raw stream "
          "and the stream itself is normalised, where the pre-norm block normalises only the branch's input",
          untrue=("swap", "twice", "missing", "bias")),
        M("Transformer", "return tied_logits(self.norm(x), self.lm_head.weight)",
          "return tied_logits(x, self.lm_head.weight)",
          ("final norm", "self.norm", "norm", "normalis", "normaliz"),
          "feeds the head the raw residual stream: the final RMSNorm is built but never applied",
          untrue=("tie", "transpose", "residual", "rope"), in_lists=True),
        M("param_counts", '"lm_head": 0 if config.tie_embeddings else config.vocab_size * d',
          '"lm_head": config.vocab_size * d',
          ("tie", "tied", "shared", "twice", "counted once", "same parameter", "tie_embeddings"),
          "counts a head of V x d whether or not it is tied: a tied head is the embedding's Parameter and adds "
          "nothing",
          untrue=("norm", "bias", "n_kv_heads", "d_ff")),
    ],
    "06": [
        M("kv_cache_bytes", "config.n_kv_heads", "config.n_heads",
          ("n_kv_heads", "kv heads", "gqa", "n_heads", "key/value heads"),
          "sizes the cache by the query heads: under GQA only n_kv_heads heads of keys and values are stored",
          regime="n_kv_heads < n_heads", untrue=("dtype", "itemsize", "layers", "bits")),
        M("cache_update",
          "torch.cat((past_k, k), dim=2)  # positions are axis 2: the past first, then the new tokens\n"
          "    v_all = torch.cat((past_v, v), dim=2)",
          "torch.cat((k, past_k), dim=2)  # positions are axis 2: the past first, then the new tokens\n"
          "    v_all = torch.cat((v, past_v), dim=2)",
          ("order", "first", "past", "prepend", "append", "before", "new tokens"),
          "puts the new positions before the cached ones: the cache is no longer in position order, and the "
          "causal mask, which assumes the new tokens are last, lets them see the wrong keys",
          untrue=("axis", "dim=1", "heads", "dtype")),
        # https://github.com/pytorch/pytorch/issues/144858 (is_causal with a KV cache sees only the earliest keys)
        M("attention_step", "attn_mask=mask)", "is_causal=True)",
          ("is_causal", "top-left", "bottom-right", "align", "offset", "cached", "mask"),
          "passes is_causal=True instead of the mask: SDPA aligns it top-left (pytorch/pytorch#144858), so a "
          "new token after a prefill attends only to the first keys of the cache",
          regime="a non-empty cache (T_past > 0)", untrue=("rope", "rotat", "concatenat", "order")),
        M("attention_step",
          "start_pos=start)  # the new tokens sit at start .. start + T - 1\n"
          "    k = tinylm.apply_rope(k, cos, sin, start_pos=start)",
          "start_pos=0)  # the new tokens sit at start .. start + T - 1\n"
          "    k = tinylm.apply_rope(k, cos, sin, start_pos=0)",
          ROPE_OFFSET + ("rope", "rotat", "start"),
          "rotates the new queries and keys as if they were positions 0 .. T - 1: after a prefill they must sit "
          "at T_past .. T_past + T - 1",
          regime="a non-empty cache (T_past > 0)", untrue=("mask", "is_causal", "concatenat", "order")),
        # https://github.com/skyzh/tiny-llm/pull/46 (the offset advanced by the whole token array after a step)
        M("generate_greedy", "step_input = next_id", "step_input = idx",
          ("whole sequence", "new token", "only the", "cache", "positions", "step_input", "again", "twice"),
          "feeds the whole sequence again at every step although the cache already holds it: the cache grows by "
          "T + i positions per step and the positions jump, the offset bug of skyzh/tiny-llm#46",
          untrue=("reset", "argmax", "no_grad", "eval")),
        M("generate_greedy", "cache.reset()", "pass  # a new cache is empty anyway",
          ("reset", "stale", "previous", "earlier", "left over", "already holds"),
          "does not reset the cache: a second generation with the same cache starts after the first one's "
          "positions and attends to its keys",
          regime="a cache used before", untrue=("argmax", "step_input", "no_grad")),
    ],
    "07": [
        # https://github.com/onnx/onnx/pull/7274 (GQA tiled the kv heads, [h0, h1, h0, h1], instead of interleaving)
        M("repeat_kv", "x[:, :, None].expand(B, n_kv, n_rep, T, hd)", "x.repeat(1, n_rep, 1, 1)",
          ("order", "tile", "repeat_interleave", "h // n_rep", "group", "interleav", "consecutive", "kv head"),
          "tiles the kv heads (h0, h1, h0, h1) instead of repeating each in place (h0, h0, h1, h1), the "
          "ordering onnx/onnx#7274 fixed: query head h is paired with kv head h % n_kv, not h // n_rep",
          regime="n_kv_heads > 1 and n_rep > 1", untrue=("positions", "dim=2", "dtype", "copy")),
        # https://github.com/PrimeIntellect-ai/prime-rl/pull/2681 (repeat_interleave on the sequence axis)
        M("repeat_kv", "x[:, :, None].expand(B, n_kv, n_rep, T, hd)", "torch.repeat_interleave(x, n_rep, dim=2)",
          SHAPE + ("positions", "dim", "sequence", "heads", "contents"),
          "repeats along the positions (dim=2) instead of the heads, the slip flagged in "
          "PrimeIntellect-ai/prime-rl#2681; the reshape that follows then folds the repeated positions into "
          "heads, so the shape is right and every head holds positions of the wrong rows",
          untrue=("tile", "dtype", "copy")),
        M("gqa_attention", "k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)", "k = repeat_kv(k, n_rep)",
          ("value", "repeat_kv(v", "v is not", "n_kv", "heads", "broadcast"),
          "repeats the keys only: the values keep n_kv heads, which SDPA broadcasts only when n_kv is 1 (MQA), "
          "so GQA raises",
          regime="n_kv_heads > 1", untrue=("order", "tile", "mask", "causal")),
        M("gqa_step", "return attn.o_proj(y), k_all, v_all",
          "return attn.o_proj(y), repeat_kv(k_all, n_rep), repeat_kv(v_all, n_rep)",
          ("n_kv", "repeated", "n_heads", "small cache", "memory", "shape", "kv heads"),
          "hands back the repeated keys and values as the cache: the cache holds n_heads heads, n_rep times the "
          "memory GQA saves, and the next step's concatenation with n_kv-head keys fails",
          regime="n_kv_heads < n_heads", untrue=("order", "mask", "rope", "dtype"), in_lists=True),
        M("decode_bytes_per_token", "kv_cache = 2 * L * config.n_kv_heads", "kv_cache = 2 * L * config.n_heads",
          ("n_kv_heads", "kv heads", "repeated", "n_heads", "gqa"),
          "counts the cache read per token with n_heads heads, as if the repeated heads were stored: only "
          "n_kv_heads are",
          regime="n_kv_heads < n_heads", untrue=("dtype", "tie", "layers", "norm")),
    ],
    "08": [
        M("top_k_filter", "logits.masked_fill(logits < kth", "logits.masked_fill_(logits < kth",
          IN_PLACE,
          "masks with masked_fill_, in place: the right result, but the caller's logits are overwritten with -inf",
          untrue=("k-th", "ties", "boundary")),
        # https://github.com/thu-nics/C2C/pull/21 and https://github.com/fishaudio/fish-speech/pull/1171
        M("top_p_filter", "mass_before = probs.cumsum(dim=-1) - probs", "mass_before = probs.cumsum(dim=-1)",
          ("crossing", "cross", "threshold", "boundary", "mass before", "cumsum", "nucleus", "reaches"),
          "compares the cumulative mass including the token itself with p, so the token that crosses p is "
          "dropped and the kept mass stays below p, the bug fixed in thu-nics/C2C#21 and fishaudio/fish-speech#1171",
          untrue=("temperature", "scatter", "vocabulary order", "ties")),
        M("top_p_filter", "drop = drop_sorted.scatter(-1, order, drop_sorted)", "drop = drop_sorted",
          ("order", "sorted", "scatter", "vocabulary order", "unsort", "permut", "index"),
          "applies the mask computed in sorted order to the logits in vocabulary order: the tokens dropped are "
          "those whose id is the rank of a dropped token",
          untrue=("crossing", "cumsum", "threshold", "temperature"), in_lists=True),
        # https://github.com/huggingface/transformers/issues/18976 (an extra token kept when the mass equals p)
        M("top_p_filter", "mass_before >= p", "mass_before > p",
          (">=", "exactly", "equal", "boundary", "extra token", "reaches p"),
          "drops a token only when the mass before it exceeds p: when the kept tokens sum to exactly p, the next "
          "token is kept too, the off-by-one of huggingface/transformers#18976",
          regime="the mass of the top tokens equal to p", untrue=("scatter", "temperature", "order")),
        # https://github.com/vllm-project/tpu-inference/pull/1385 and https://github.com/fishaudio/fish-speech/pull/1150
        M("sample_next",
          "    logits = logits / temperature             # on logits, before any filter\n"
          "    if top_k is not None:\n        logits = top_k_filter(logits, top_k)\n"
          "    if top_p is not None:\n        logits = top_p_filter(logits, top_p)\n",
          "    if top_k is not None:\n        logits = top_k_filter(logits, top_k)\n"
          "    if top_p is not None:\n        logits = top_p_filter(logits, top_p)\n"
          "    logits = logits / temperature             # on the kept logits\n",
          ("temperature", "before", "order", "after the filter", "untempered", "filters"),
          "divides by the temperature after top-k and top-p: the nucleus is chosen on the untempered "
          "distribution, the order vllm-project/tpu-inference#1385 and fishaudio/fish-speech#1150 fixed",
          regime="top_p with a temperature other than 1", untrue=("softmax", "generator", "argmax", "scatter")),
        M("sample_next", "torch.multinomial(probs, num_samples=1, generator=generator)",
          "torch.multinomial(probs, num_samples=1)",
          ("generator", "reproducib", "seed", "random state", "rng"),
          "draws without the caller's generator: the global RNG is used, so a seeded generator does not make the "
          "samples reproducible",
          untrue=("temperature", "top_k", "top_p", "order"), in_lists=True),
        # https://github.com/karpathy/ng-video-lecture/issues/16 and https://github.com/pytorch/examples/pull/114
        M("generate", "model.eval()", "pass  # no_grad already turns dropout off",
          ("eval", "dropout", "train mode", "training", "mode"),
          "does not switch the model to eval mode, believing no_grad turns dropout off: dropout stays on while "
          "generating (karpathy/ng-video-lecture#16, pytorch/examples#114)",
          regime="a model in train mode with dropout", untrue=("no_grad", "generator", "restore")),
        M("generate", "model.train(was_training)", "model.train()",
          ("mode", "restore", "was_training", "eval mode", "caller", "left in train"),
          "hands the model back in train mode whatever mode it came in: a model the caller had in eval mode "
          "comes back training",
          regime="a model in eval mode", untrue=("dropout during", "no_grad", "generator")),
    ],
    "09": [
        # https://github.com/macrocosm-os/pretraining/pull/64 (BartForCausalLM's loss had unshifted labels)
        M("get_batch", "return window[:, :-1], window[:, 1:]", "return window[:, :-1], window[:, :-1]",
          ("shift", "next token", "y = x", "same as x", "+ 1", "offset", "targets"),
          "returns the inputs as the targets, unshifted: the model is trained to copy the current token, the "
          "bug macrocosm-os/pretraining#64 found in BartForCausalLM's loss",
          untrue=("dtype", "int64", "generator", "range"), in_lists=True),
        # https://github.com/karpathy/ng-video-lecture/issues/56 (a proposed "fix" of an off-by-one that was not one)
        M("get_batch", "torch.randint(len(data) - seq_len,", "torch.randint(len(data) - seq_len - 1,",
          ("last", "start", "range", "n - t - 1", "never", "off by one", "final"),
          "draws the start below N - T - 1, the change proposed in karpathy/ng-video-lecture#56 (randint's upper "
          "bound is already exclusive): the last window, and with it the last token as a target, is never drawn",
          untrue=("shift", "dtype", "generator"), in_lists=True),
        # https://github.com/huggingface/transformers/pull/44642 (users shifting labels the model shifts again)
        M("lm_loss", "F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)",
          "F.cross_entropy(logits[:, :-1].flatten(0, 1), targets[:, 1:].flatten(), ignore_index=-100)",
          ("shift", "already", "twice", "next-next", "align", "position", "t + 2"),
          "shifts logits and targets again, as Hugging Face's causal LM loss does inside the model, although "
          "get_batch already shifted them: position t is scored on token t + 2 (the double shift "
          "huggingface/transformers#44642 warns about)",
          untrue=("ignore_index", "padding", "dtype", "mean"), in_lists=True),
        M("lm_loss", "F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)",
          'F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100, reduction="none").mean()',
          ("padding", "denominator", "count", "mean over", "real targets", "ignored", "reduction"),
          "takes the mean of the per-position losses itself: padding positions score 0 but are still counted, "
          "so the mean is over all positions, not over the real targets",
          regime="targets with padding (-100)", untrue=("shift", "dtype", "flatten")),
        # https://github.com/meta-pytorch/torchtune/issues/2010 (the first warmup step ran at lr = 0)
        M("lr_schedule", "max_lr * (step + 1) / warmup_steps", "max_lr * step / warmup_steps",
          ("step 0", "zero", "first step", "step + 1", "off by one", "0 at", "lr = 0", "wasted"),
          "ramps from 0: step 0 gets lr = 0 and the first optimizer step does nothing, the warmup "
          "meta-pytorch/torchtune#2010 reported",
          untrue=("cosine", "min_lr", "decay", "clamp"), in_lists=True),
        M("lr_schedule", "min(progress, 1.0)", "progress",
          ("clamp", "after total_steps", "beyond", "past the end", "rises", "min_lr", "progress"),
          "drops the clamp on the decay's progress: past total_steps the cosine comes back up towards max_lr",
          regime="step >= total_steps", untrue=("warmup", "step + 1", "zero"), in_lists=True),
        # https://github.com/awslabs/graphstorm/issues/1366 (clip_grad_norm_ after optimizer.step did nothing)
        M("train_step",
          "    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)  # global gradient norm <= grad_clip\n"
          "    optimizer.step()",
          "    optimizer.step()\n"
          "    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)  # global gradient norm <= grad_clip",
          ("clip", "before", "after", "order", "optimizer.step", "grad_clip", "unclipped"),
          "clips the gradients after optimizer.step: the update uses the unclipped gradients and the clipping "
          "does nothing, the order awslabs/graphstorm#1366 fixed",
          regime="a gradient norm above grad_clip", untrue=("zero_grad", "train mode", "item", "accumulat")),
        M("train_step_costs", "6 * matmul_weights * tokens + 3 * attention_matmuls",
          "4 * matmul_weights * tokens + 2 * attention_matmuls",
          ("backward", "2 x", "twice", "6", "3 x", "weight gradient", "input gradient"),
          "counts the backward pass as one forward: it computes the gradients of both the inputs and the weights, "
          "two matmuls per forward matmul, so a step is 3 x the forward (6 · params · tokens), not 2 x",
          untrue=("adam", "bytes", "attention", "tied")),
    ],
    "10": [
        # https://github.com/axolotl-ai-cloud/axolotl/pull/3988 and https://github.com/ml-explore/mlx-lm/pull/1855
        M("nll_sum_and_count", "int((targets != ignore_index).sum())", "targets.numel()",
          ("padding", "count", "ignore_index", "scored", "numel", "every position"),
          "counts every position, padding included, as a scored target: the perplexity is diluted by padding, "
          "the inflation axolotl-ai-cloud/axolotl#3988 and ml-explore/mlx-lm#1855 fixed",
          regime="targets with padding", untrue=("float32", "mean", "dtype", "reduction")),
        M("nll_sum_and_count", "logits.flatten(0, 1).float()", "logits.flatten(0, 1)",
          DTYPE + ("sum",),
          "sums the losses in the logits' dtype: for bfloat16 logits the sum of many terms is rounded to 8 bits "
          "of mantissa",
          regime="bfloat16 or float16 logits", untrue=("padding", "count", "mean", "ignore_index"), in_lists=True),
        M("nll_sum_and_count", "ignore_index=ignore_index,", "ignore_index=-100,",
          ("ignore_index", "caller", "-100", "argument", "padding"),
          "scores with the default ignore_index -100 whatever the caller passed: with ignore_index=0 the padding "
          "is scored but not counted",
          regime="an ignore_index other than -100", untrue=("float32", "mean", "dtype"), in_lists=True),
        # https://github.com/keras-team/keras-hub/pull/2958 and https://github.com/huggingface/transformers/pull/34387
        M("evaluate", "total, count = total + s, count + n", "total, count = total + s / n, count + 1",
          ("batch", "token-weighted", "average of averages", "mean of means", "per batch", "weighted",
           "tokens"),
          "averages the batches' mean losses, each batch weighing the same whatever its number of tokens, the "
          "mistake keras-team/keras-hub#2958 and huggingface/transformers#34387 fixed",
          regime="batches with different numbers of scored tokens", untrue=("padding", "eval", "no_grad", "base"),
          in_lists=True),
        # https://github.com/shubhamagarwal92/mmd/issues/14 (evaluation left the model in eval mode)
        M("evaluate", "model.train(was_training)", "pass  # the trainer sets its own mode",
          ("train mode", "restore", "mode", "was_training", "eval mode", "left"),
          "never restores the caller's mode: a model evaluated in the middle of training comes back in eval "
          "mode and trains on without dropout (shubhamagarwal92/mmd#14)",
          regime="a model in train mode", untrue=("no_grad", "dropout during", "token", "batch")),
        M("evaluate", '"perplexity": math.exp(loss)', '"perplexity": 2 ** loss',
          ("base", "exp", "2 **", "nats", "bits", "e^", "natural"),
          "raises 2 to the loss, reading perplexity as 2^entropy: the loss is in nats, so the perplexity is e^loss",
          untrue=("token", "batch", "mode", "padding"), in_lists=True),
        M("bigram_nll", "counts.sum(dim=1, keepdim=True)", "counts.sum(dim=0, keepdim=True)",
          ("row", "dim", "axis", "column", "sum to 1", "normalis", "normaliz", "prev"),
          "normalises each column (the counts of the next byte over all previous bytes) instead of each row: "
          "the rows of the table no longer sum to 1",
          untrue=("alpha", "256", "pair", "last"), in_lists=True),
    ],
}

# Edits that compute what the solution computes: a check must pass them.
SAME = [
    ("01", Mutation("embed", "return weight[ids]", "return F.embedding(ids, weight)", (),
                    "looks the rows up with F.embedding, which is the same indexing")),
    ("02", Mutation("layer_norm", "var = centred.pow(2).mean(dim=-1, keepdim=True)",
                    "var = x.var(dim=-1, keepdim=True, unbiased=False)", (),
                    "takes the biased variance with torch.var(unbiased=False), which divides by d as well")),
    ("03", Mutation("causal_attention", 'float("-inf")', "torch.finfo(scores.dtype).min", (),
                    "masks with the dtype's most negative finite value, as Hugging Face does: exp of it "
                    "underflows to 0 in every row that keeps a key")),
    ("04", Mutation("apply_rope", "x1, x2 = x.chunk(2, dim=-1)",
                    "x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]", (),
                    "splits the halves by slicing instead of chunk")),
    ("05", Mutation("swiglu", "gate = F.silu(x @ w_gate.T)",
                    "gate = F.linear(x, w_gate) * torch.sigmoid(F.linear(x, w_gate))", (),
                    "writes SiLU out as x · sigmoid(x) on F.linear's product")),
    ("06", Mutation("cache_update", "torch.cat((past_k, k), dim=2)", "torch.cat([past_k, k], dim=-2)", (),
                    "concatenates along dim=-2, the same axis of a 4-d tensor")),
    ("07", Mutation("gqa_attention",
                    "k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)  # (B, n_heads, T, hd): only inside attention\n"
                    "    return F.scaled_dot_product_attention(q, k, v, is_causal=True)",
                    "return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=n_rep > 1)", (),
                    "lets SDPA pair the heads itself with enable_gqa (query head h reads kv head h // n_rep)")),
    ("08", Mutation("top_k_filter", 'logits.masked_fill(logits < kth, float("-inf"))',
                    'torch.where(logits < kth, torch.full_like(logits, float("-inf")), logits)', (),
                    "masks with torch.where instead of masked_fill")),
    ("09", Mutation("lm_loss", "targets.flatten(), ignore_index=-100)", "targets.flatten())", (),
                    "leaves ignore_index out: -100 is cross_entropy's default")),
    ("10", Mutation("evaluate", "with torch.no_grad():", "with torch.inference_mode():", (),
                    "evaluates under inference_mode instead of no_grad: no graph either")),
]
