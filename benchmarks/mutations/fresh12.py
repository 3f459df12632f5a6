"""A fifteenth held-out set of learner mistakes ("fresh12"), written without
reading the checks: neither autograder/checks/, tests/checks/,
autograder/diagnosis_*.py, the diagnosis code of bench_diagnostics.py nor the
diagnosis sections of docs/benchmarks.md were opened, and no mistake was tried
against a check, before the set was committed and measured. The 64 mistakes
come from the notebook sources (exercise prose, signatures and solution cells
of autograder/authoring/notebook_src/), from tinylm and, for 16 of them, from
bugs public projects shipped or were asked to fix (the thread is named above
the entry and in its reason). Of the other sets only fresh11.py's docstring
and first entries (for the format) and unseen.py (for the entry class) were
read; a duplicates script (now benchmarks/heldout_duplicates.py --set
fresh12) compared the texts mechanically and
printed only matches: 65 entries written first were in another set and were
replaced, until none matched. Run: `bench_diagnostics.py --set fresh12`.

Each mistake is one substitution in one answer cell; `expect` holds words a
check that found it would likely say, `untrue` words of causes it is not,
`regime` where a mistake that is right by default shows. SAME lists 14 edits
that compute what the solution computes another way; a check must pass each.

After the first measurement, reading every printed line against its reason
found three lines the keyword count called untrue to be true of the code (an
`untrue` word the right line holds too: "theta" in the frequency formula,
"zero_grad" in the measured order of calls, "adam" in the key adam_moments);
those three words were narrowed, nothing else in the set changed.
"""
from __future__ import annotations

from .unseen import Unseen as M

SHAPE = ("shape", "axis", "layout", "transpose", "dim")
DTYPE = ("dtype", "float32", "float16", "bfloat16", "precision", "cast", "upcast")
START = ("start_pos", "offset", "cached", "position")

MUTATIONS = {
    "01": [
        # https://github.com/pytorch/pytorch/issues/26596 (F.embedding with max_norm renormalises weight in place)
        M("embed", "return weight[ids]", "return F.embedding(ids, weight, max_norm=1.0)",
          ("max_norm", "in place", "in-place", "renormal", "modif", "changes the table", "norm"),
          "looks the rows up with F.embedding(..., max_norm=1.0), as in pytorch/pytorch#26596: every looked-up row "
          "whose L2 norm exceeds 1 is rescaled to norm 1 in the caller's weight itself (in place) before it is "
          "returned, so the output rows are not weight[ids] and the table is changed by the call",
          untrue=("transpose", "one-hot", "dtype", "index_select")),
        M("one_hot_embed", "F.one_hot(ids, num_classes=weight.shape[0])", "F.one_hot(ids, num_classes=weight.shape[1])",
          ("num_classes", "weight.shape[0]", "vocabulary", "d_model", "width", "shape[1]"),
          "gives F.one_hot the embedding width d (weight.shape[1]) as num_classes instead of the vocabulary size V: "
          "with d < V any id >= d raises (class values must be smaller than num_classes), and where d > V the "
          "(…, d) one-hot cannot be multiplied by the [V, d] table",
          untrue=("dtype", "transpose", "gradient")),
        M("embed", "return weight[ids]", "return weight[ids.clamp(max=weight.shape[0] - 1)]",
          ("out of range", "beyond", "clamp", "vocabulary", "index", "last row", "silently"),
          "clamps the ids into the table before the lookup: an id past the vocabulary silently reads the last row "
          "instead of raising, so a tokenizer/model mismatch goes unnoticed",
          regime="an id >= vocab_size", untrue=("dtype", "transpose", "gradient")),
    ],
    "02": [
        M("rms_norm", "inv_rms = torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)",
          "inv_rms = 1.0 / (x32.pow(2).mean(dim=-1, keepdim=True).sqrt() + eps)",
          ("eps", "epsilon", "inside the square root", "under the root", "sqrt"),
          "adds eps to the root mean square instead of to the mean square under the root: the same where the mean "
          "square is far above eps, but for tokens whose mean square is near or below eps it divides by rms + eps "
          "instead of sqrt(ms + eps): at a mean square of 1e-8 (eps 1e-6) the output is about 10 times too large, "
          "and as the mean square goes to 0 the factor grows towards 1/sqrt(eps) = 1000",
          regime="tokens whose mean square is near or below eps", untrue=("axis", "dtype", "overflow")),
        M("layer_norm", "centred = x - x.mean(dim=-1, keepdim=True)", "centred = x - x.mean(dim=0, keepdim=True)",
          SHAPE + ("batch", "per token", "each token", "features", "last axis", "dim=-1"),
          "subtracts the mean over the batch axis (dim 0, as BatchNorm does) instead of over each token's features: "
          "the centred values, and with them the variance and the output, depend on the other sequences in the batch",
          untrue=("eps", "unbiased", "bias")),
        M("layer_norm", "return weight * centred * torch.rsqrt(var + eps) + bias",
          "return (weight * centred + bias) * torch.rsqrt(var + eps)",
          ("bias", "after", "normalis", "normaliz", "scaled", "order"),
          "adds the bias before dividing by the standard deviation: the bias is scaled by 1/sqrt(var + eps) too, so "
          "each token gets its own shifted bias instead of the same one",
          untrue=("eps", "unbiased", "axis")),
        # https://github.com/mosaicml/llm-foundry/issues/371 (RMSNorm divided by rsqrt instead of multiplying)
        M("rms_norm", "(x32 * inv_rms)", "(x32 / inv_rms)",
          ("rsqrt", "divid", "multipl", "inverse", "rms", "times the rms"),
          "divides by inv_rms = 1/sqrt(mean square + eps), as mosaicml/llm-foundry#371 did: it multiplies x by its "
          "root mean square instead of dividing, so a token comes out with root mean square sqrt(ms · (ms + eps)), "
          "about ms, instead of 1 (large tokens grow, small ones shrink)",
          untrue=("eps", "axis", "dtype", "sum")),
        M("RMSNorm", "return rms_norm(x, self.weight, self.eps)", "return rms_norm(x, self.weight.detach(), self.eps)",
          ("gradient", "detach", "trained", "grad", "learn", "frozen"),
          "passes the gain detached: the forward pass is right, but the gain receives no gradient (weight.grad stays "
          "None), so training never changes it",
          regime="training (a backward pass)", untrue=("eps", "dtype", "parameter")),
        # https://github.com/jadore801120/attention-is-all-you-need-pytorch/pull/11 (a norm statistic without keepdim)
        M("rms_norm", "x32.pow(2).mean(dim=-1, keepdim=True)", "x32.pow(2).mean(dim=-1)",
          SHAPE + ("keepdim", "broadcast", "per token"),
          "leaves out keepdim=True, the slip jadore801120/attention-is-all-you-need-pytorch#11 fixed: the (...,) "
          "statistics broadcast against the last axes, so x (B, T, d) raises unless the shapes happen to broadcast "
          "(T == d, B equal to 1 or T), and for a 2-d (n, n) input feature j is scaled by token j's statistic, "
          "silently",
          untrue=("eps", "dtype", "sum")),
    ],
    "03": [
        M("causal_mask", "allowed = torch.ones(q_len, kv_len, dtype=torch.bool)", "allowed = torch.ones(q_len, kv_len)",
          ("bool", "dtype", "float", "1.0", "boolean", "~", "invert"),
          "builds the mask in float32: tril keeps 1.0 and 0.0 instead of True and False, so the mask is not the "
          "boolean the docstring asks for, ~mask raises on it, and a float mask handed to SDPA is added to the "
          "scores as a bias (0 or 1) instead of blocking the future",
          untrue=("diagonal", "offset", "transpose")),
        # https://github.com/facebookresearch/fairseq/issues/2598 (view after a transpose: "view size is not
        # compatible")
        M("split_heads", "y.transpose(1, 2).reshape(B, T, H * hd)", "y.transpose(1, 2).view(B, T, H * hd)",
          ("contiguous", "view", "reshape", "stride", "transpose"),
          "merges the heads with .view after the transpose, as in facebookresearch/fairseq#2598: the transposed "
          "tensor is not contiguous, so view raises 'view size is not compatible with input tensor's size and "
          "stride' whenever there are several heads and several positions",
          untrue=("dtype", "order", "mask", "scale")),
        # https://github.com/huggingface/transformers/issues/14859 (-1e4 as the mask value is not small enough)
        M("causal_attention", 'scores = scores.masked_fill(~mask, float("-inf"))',
          "scores = scores.masked_fill(~mask, -1e4)",
          ("-inf", "-1e4", "10000", "finite", "not small enough", "large negative", "future", "leak"),
          "fills the future with -1e4 instead of -inf, as huggingface/transformers#14859 reports: where the allowed "
          "scores themselves are below about -1e4 the blocked ones are the largest of the row and the softmax puts "
          "nearly all the weight on future keys",
          regime="scores below -1e4 (large queries and keys)", untrue=("scale", "transpose", "diagonal")),
        M("self_attention", "for w in (w_q, w_k, w_v)", "for w in (w_q, w_q, w_v)",
          ("w_k", "keys", "key projection", "w_q", "copy", "same weight"),
          "projects the keys with w_q (a copy-paste slip): the keys equal the queries, every score is q_i·q_j, and "
          "w_k is never used (it receives no gradient)",
          untrue=("transpose", "mask", "scale", "merge")),
        M("causal_mask", "allowed.tril(diagonal=kv_len - q_len)", "allowed.tril(diagonal=kv_len - q_len - 1)",
          ("diagonal", "itself", "own position", "off by one", "off-by-one", "first row", "nan"),
          "shifts the diagonal one step down: every query is blocked from its own key, and the first query of a "
          "prompt (no earlier key) has no allowed key at all, so its softmax row is NaN",
          untrue=("float", "dtype", "transpose")),
        M("causal_attention", "causal_mask(q.shape[-2], k.shape[-2])", "causal_mask(q.shape[-2])",
          ("kv_len", "k.shape", "square", "fewer queries", "cached", "tq < tk", "shape"),
          "builds a square (Tq, Tq) mask: right while Tq == Tk, but with fewer queries than keys (a KV cache) the "
          "mask no longer matches the (Tq, Tk) scores and masked_fill raises",
          regime="fewer queries than keys (q_len < kv_len)", untrue=("-inf", "scale", "softmax axis")),
        M("attention_flops", "head_dim = d // n_heads", "head_dim = d",
          ("head_dim", "n_heads", "per head", "d // n_heads", "heads"),
          "gives every head the full width d: the scores and the mix are counted n_heads times too large (each head "
          "works on d // n_heads features)",
          regime="more than one head", untrue=("batch", "causal", "multiply-add")),
        # https://github.com/lucidrains/vit-pytorch/issues/65 (scale from the model width instead of the head size)
        M("causal_attention", "/ math.sqrt(q.shape[-1])", "/ math.sqrt(q.shape[1] * q.shape[-1])",
          ("head_dim", "d_model", "per head", "scale", "sqrt", "n_heads"),
          "scales by 1/sqrt(n_heads · head_dim) = 1/sqrt(d_model) instead of 1/sqrt(head_dim), the mistake "
          "lucidrains/vit-pytorch#65 fixed: with several heads the softmax is sqrt(n_heads) times too flat",
          regime="more than one head", untrue=("mask", "-inf", "transpose")),
        # https://github.com/esceptico/perceiver-io/issues/9 (divided by a scale that was already hd ** -0.5)
        M("causal_attention", "/ math.sqrt(q.shape[-1])", "/ q.shape[-1] ** -0.5",
          ("scale", "sqrt", "multipl", "divid", "too sharp", "head_dim"),
          "divides by hd^-0.5, i.e. multiplies by sqrt(hd), as esceptico/perceiver-io#9 did: the scores are hd "
          "times what they should be, so the softmax is far too sharp",
          untrue=("mask", "-inf", "softmax axis")),
    ],
    "04": [
        # https://github.com/facebookresearch/xformers/issues/325 (float32 cos/sin tables turn half-precision q, k
        # into float32)
        M("apply_rope", "    cos = cos[start_pos:start_pos + T].to(x.dtype)  # (T, hd), broadcasts over (B, H)\n"
          "    sin = sin[start_pos:start_pos + T].to(x.dtype)\n",
          "    cos = cos[start_pos:start_pos + T]  # (T, hd), broadcasts over (B, H)\n"
          "    sin = sin[start_pos:start_pos + T]\n",
          DTYPE + ("x.dtype", "promot"),
          "uses the float32 tables as they are, as in facebookresearch/xformers#325: a bfloat16 or float16 x is "
          "promoted, so the rotated queries and keys come back float32 while the values stay half precision, and "
          "the attention's weights @ v meets mixed dtypes and raises",
          regime="half-precision queries and keys", untrue=("start_pos", "sign", "theta")),
        M("interleaved_to_half", "hd = rows // n_heads", "hd = d_in // n_heads",
          ("head_dim", "rows", "d_in", "d_model", "kv heads", "n_kv_heads", "square"),
          "takes the head size from the input width instead of the row count: right only when the matrix is square "
          "with n_heads · head_dim = d_model; for a key matrix with fewer kv heads, or a head_dim set apart from "
          "d_model // n_heads, the reshape raises or groups the rows in blocks of the wrong size",
          regime="rows != d_in (GQA keys or a head_dim set apart)", untrue=("direction", "inverse", "values")),
        M("rope_cache", "-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim",
          "-torch.arange(1, head_dim, 2, dtype=torch.float32) / head_dim",
          ("frequenc", "exponent", "2i", "inv_freq", "odd", "angle"),
          "takes the odd exponents 1, 3, 5, ... instead of 0, 2, 4, ...: pair i turns at theta^(-(2i+1)/d) per "
          "position, so even pair 0 turns by theta^(-1/d) < 1 radian instead of exactly 1, and every angle is off",
          untrue=("theta is", "theta =", "swapped", "position 0", "dtype")),
        M("rope_cache", "angles = torch.cat((angles, angles), dim=-1)", "angles = torch.cat((angles, angles), dim=0)",
          SHAPE + ("positions", "features", "concatenat", "head_dim"),
          "concatenates the angles along the positions instead of the features: the tables are (2·max_seq_len, hd/2) "
          "instead of (max_seq_len, hd), so they do not broadcast over a (…, T, hd) input",
          untrue=("theta", "interleav", "sign")),
        M("interleaved_to_half", "return pairs.transpose(1, 2).reshape(rows, d_in)", "return pairs.reshape(rows, d_in)",
          ("transpose", "unchanged", "identity", "evens", "odds", "permut"),
          "reshapes back without the transpose: the rows come out in the order they came in, so the checkpoint "
          "stays in the interleaved layout while the model rotates halves",
          untrue=("direction", "values", "n_kv_heads")),
        M("rope_cache", "return angles.cos(), angles.sin()", "return angles.cos().half(), angles.sin().half()",
          DTYPE + ("float32", "half"),
          "returns the tables in float16 although the docstring asks for float32: cos and sin keep about 3 decimal "
          "digits, so every rotation is off by up to about 5e-4 and apply_rope's cast cannot bring the digits back",
          untrue=("theta", "positions", "swapped")),
    ],
    "05": [
        M("swiglu_hidden", "multiple * math.ceil(8 * d_model / 3 / multiple)",
          "multiple * round(8 * d_model / 3 / multiple)",
          ("round", "ceil", "up", "nearest", "smaller", "below"),
          "rounds 8/3 · d_model to the nearest multiple instead of up: whenever the fraction is below one half the "
          "result is smaller than 8/3 · d_model (d_model 64: 160 instead of 192)",
          untrue=("8 // 3", "integer division", "2 * d")),
        # Meta's reference llama/model.py FeedForward: hidden_dim = int(2 * hidden_dim / 3), then rounded up
        M("swiglu_hidden", "math.ceil(8 * d_model / 3 / multiple)", "math.ceil(int(8 * d_model / 3) / multiple)",
          ("truncat", "int(", "floor", "round up", "ceil", "fraction"),
          "truncates 8/3 · d_model to an integer before rounding up, as Meta's reference FeedForward does with "
          "int(2 * hidden_dim / 3): for a multiple divisible by 8 (32, 64, 256, ...) the result is the same, but "
          "for others it can land one multiple lower (d_model 64, multiple 1: 170 instead of 171)",
          regime="a multiple not divisible by 8 (e.g. 1 or 2)", untrue=("8 // 3", "nearest", "2 * d")),
        M("Transformer", "q = self.q_proj(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)",
          "q = self.q_proj(x).view(B, self.n_heads, T, self.head_dim)",
          SHAPE + ("view", "positions", "heads", "mix"),
          "reshapes the queries straight to (B, nh, T, hd) without the transpose: the view cuts the (T, nh·hd) "
          "projection row-major, so 'head' h holds features of several positions and 'position' t of several heads",
          untrue=("keys", "rope", "mask", "scale")),
        M("pre_norm_block", "x = x + mlp(mlp_norm(x))", "x = mlp_norm(x + mlp(x))",
          ("post-norm", "post norm", "pre-norm", "order", "mlp_norm", "normalis", "normaliz"),
          "switches the MLP half to post-norm: the MLP reads the raw stream and the norm is applied to the sum, so "
          "the block's output is normalised instead of being a residual sum",
          untrue=("parallel", "attn_norm", "attention")),
        M("param_counts", '"mlp": L * 3 * d * config.d_ff', '"mlp": L * 3 * d * config.d_model',
          ("d_ff", "hidden", "mlp", "intermediate", "d_model"),
          "sizes the MLP matrices with d_model for the hidden width: each block's three matrices are counted as "
          "d x d instead of d x d_ff",
          untrue=("tied", "n_kv_heads", "norms")),
    ],
    "06": [
        # https://github.com/jranaraki/vllm-fit/issues/2 (KV-cache estimate with the attention heads, ignoring GQA)
        M("kv_cache_bytes", "per_position = 2 * config.n_layers * config.n_kv_heads * config.head_dim",
          "per_position = 2 * config.n_layers * config.n_heads * config.head_dim",
          ("n_kv_heads", "kv heads", "gqa", "grouped", "n_heads"),
          "sizes the cache with the query heads instead of the kv heads, as jranaraki/vllm-fit#2 did: right for "
          "multi-head attention, n_heads / n_kv_heads times too large with grouped-query attention",
          regime="n_kv_heads < n_heads", untrue=("itemsize", "dtype", "batch")),
        M("cache_update", "k_all = torch.cat((past_k, k), dim=2)", "k_all = torch.cat((past_k, k), dim=1)",
          SHAPE + ("heads", "positions", "axis 2", "dim=2"),
          "appends the new keys along the heads axis (dim 1) instead of the positions: with the shapes of a cache "
          "(T_past != T_new) torch.cat raises; where they match the key tensor gets twice the heads",
          untrue=("order", "values", "copy")),
        M("generate_left_padded", "mask = torch.zeros(B, T, dtype=torch.bool)",
          "mask = torch.ones(B, T, dtype=torch.bool)",
          ("padding", "pad", "mask", "attend", "positions"),
          "starts the attention mask at all-True: the padding slots are marked real, so shorter prompts attend to "
          "their pad tokens and their positions count the padding (the first real token at T - n_b instead of 0)",
          regime="prompts of different lengths", untrue=("[:, -1]", "right padding", "reset")),
        M("kv_cache_bytes", "per_position * seq_len * batch_size * dtype.itemsize",
          "per_position * seq_len * dtype.itemsize",
          ("batch", "batch_size", "sequences", "rows"),
          "leaves out batch_size: the bytes of one sequence, batch_size times too few for a batch",
          regime="batch_size > 1", untrue=("n_heads", "itemsize", "layers")),
        # https://github.com/harvard-edge/cs249r_book/pull/1953 (the cached step left its own keys out of attention)
        M("attention_step", "F.scaled_dot_product_attention(q, k_all, v_all, attn_mask=mask)",
          "F.scaled_dot_product_attention(q, past_k, past_v, attn_mask=mask[:, :start])",
          ("own", "new keys", "past only", "k_all", "itself", "prefill", "zero"),
          "attends to the cached keys only, leaving out the new tokens' own keys, as harvard-edge/cs249r_book#1953 "
          "fixed: at the prefill there is no key at all and SDPA returns zeros (y is 0), and at later steps no new "
          "token sees itself or the other new tokens",
          untrue=("is_causal", "order", "rope")),
        M("generate_greedy", "logits = model(step_input, cache=cache)[:, -1]", "logits = model(step_input)[:, -1]",
          ("cache", "context", "only the new token", "one token", "history"),
          "never hands the model the cache: the prefill is right, but every decoding step runs the model on the "
          "single newest token alone, with no earlier context, at position 0",
          untrue=("[:, 0]", "argmax", "reset")),
        M("generate_left_padded", "ids[b, T - len(p):] = p", "ids[b, :len(p)] = p",
          ("padding", "left", "right", "front", "mask"),
          "writes each prompt at the start of its row (right padding) while the mask marks the last n_b slots as "
          "real: for a shorter prompt those slots hold the prompt's tail where it reaches them and pad tokens "
          "after it, so the row is read as mostly padding and its prediction comes from a pad token",
          regime="prompts of different lengths", untrue=("[:, -1]", "reset", "positions")),
    ],
    "07": [
        M("gqa_attention", "n_rep = q.shape[1] // k.shape[1]", "n_rep = k.shape[1] // q.shape[1]",
          ("n_rep", "ratio", "inverted", "n_heads // n_kv", "zero", "heads"),
          "divides the kv heads by the query heads: n_rep is 0 whenever there are fewer kv heads than query heads, "
          "so repeat_kv returns no heads at all and SDPA, broadcasting the empty head axis, returns all zeros; "
          "with n_kv = n_heads it is 1 and right",
          regime="n_kv_heads < n_heads", untrue=("causal", "positions", "tile")),
        M("decode_bytes_per_token", "matrices = config.vocab_size * d * (1 if config.tie_embeddings else 2)",
          "matrices = config.vocab_size * d * 2",
          ("tied", "tie_embeddings", "twice", "once", "embedding", "head"),
          "reads the V·d table twice even when the head is tied to the embedding: a tied model's weight bytes are "
          "over-counted by V · d · itemsize",
          regime="tie_embeddings=True", untrue=("n_kv_heads", "context", "d_ff")),
        M("decode_bytes_per_token", "per_block = attention + 3 * d * config.d_ff + 2 * d",
          "per_block = attention + 2 * d * config.d_ff + 2 * d",
          ("swiglu", "three", "gate", "d_ff", "mlp", "matrices"),
          "counts two MLP matrices per block, as for a GELU MLP: SwiGLU has gate_proj, up_proj and down_proj, so "
          "d · d_ff weights per block are missing",
          untrue=("tied", "n_kv_heads", "context")),
        M("repeat_kv", "x = x[:, :, None].expand(B, n_kv, n_rep, T, hd)", "x = x.expand(B, n_kv * n_rep, T, hd)",
          ("expand", "size 1", "singleton", "n_kv", "new axis", "kv heads"),
          "expands the head axis itself: expand can only stretch an axis of size 1, so this works for one kv head "
          "(MQA) and raises for n_kv > 1 with n_rep > 1",
          regime="more than one kv head", untrue=("tile", "positions", "dtype")),
        # https://github.com/FYYFU/HeadKV/issues/3 (keys expanded by repeat_kv before they reach the cache)
        M("gqa_step", "k_all = torch.cat((past_k, k), dim=2)",
          "k_all = torch.cat((past_k, repeat_kv(k, n_rep)), dim=2)",
          ("cache", "n_kv", "repeat", "small cache", "heads", "expanded"),
          "expands the new keys before caching them, the pattern FYYFU/HeadKV#3 asks about: the key cache would "
          "hold n_heads heads instead of n_kv, and concatenating them to the n_kv-head past raises; with "
          "n_kv == n_heads nothing changes",
          regime="n_kv_heads < n_heads", untrue=("tile", "mask", "start")),
    ],
    "08": [
        M("top_k_filter", "kth = logits.topk(k, dim=-1).values[..., -1:]",
          "kth = logits.sort(dim=-1).values[..., -k:-k + 1]",
          ("k=1", "k = 1", "slice", "empty", "-k + 1", "greedy"),
          "reads the k-th largest from an ascending sort with the slice [-k:-k + 1]: for k >= 2 that is the k-th "
          "largest, but for k = 1 the slice is [-1:0], empty, and the comparison raises",
          regime="top_k=1", untrue=("<=", "ties", "in place")),
        M("sample_next", "probs = logits.softmax(dim=-1)", "probs = logits.exp()",
          ("softmax", "overflow", "exp", "inf", "normalis", "normaliz", "max"),
          "hands multinomial exp(logits) unnormalised, counting on multinomial to normalise: the distribution is the "
          "same for moderate logits, but exp overflows to inf from logits near 89 (float32), and multinomial then "
          "raises on the invalid weights",
          regime="logits above about 88", untrue=("temperature", "generator", "squeeze")),
        # https://github.com/lucidrains/denoising-diffusion-pytorch/issues/286 (inference_mode tensors cannot be
        # saved for backward)
        M("generate", "        with torch.no_grad():\n            for _ in range(max_new_tokens):",
          "        with torch.inference_mode():\n            for _ in range(max_new_tokens):",
          ("inference_mode", "inference tensor", "backward", "autograd", "no_grad", "training step"),
          "generates under torch.inference_mode instead of no_grad: the returned ids are inference tensors, so "
          "using them later in a training step (an embedding of them, saved for backward) raises 'Inference tensors "
          "cannot be saved for backward', as lucidrains/denoising-diffusion-pytorch#286 hit",
          regime="generated ids reused in a training step", untrue=("eval", "train mode", "generator")),
        M("generate", "idx = torch.cat((idx, next_id[:, None]), dim=1)", "idx = torch.cat((idx, next_id[None]), dim=1)",
          SHAPE + ("batch", "(1, b)", "(b, 1)", "column"),
          "appends the new ids as a row (1, B) instead of a column (B, 1): for a batch of one it is the same, for "
          "B > 1 the concatenation along dim 1 raises",
          regime="a batch of more than one prompt", untrue=("eval", "generator", "temperature")),
        M("sample_next", "logits = logits / temperature", "logits = logits * temperature",
          ("temperature", "divid", "multipl", "sharper", "flatter", "inverse"),
          "multiplies the logits by the temperature instead of dividing: a temperature below 1 flattens the "
          "distribution and one above 1 sharpens it, the opposite of what it should do",
          regime="temperature != 1", untrue=("generator", "filter order", "squeeze")),
        M("generate", "sample_next(logits, temperature, top_k, top_p, generator)",
          "sample_next(logits, temperature, top_p, top_k, generator)",
          ("top_k", "top_p", "swapped", "argument", "order", "positional"),
          "passes top_k and top_p to sample_next in swapped positions: top_k=1 becomes top_p=1 (no filtering at "
          "all) and a top_p of 0.9 becomes top_k=0.9, which topk refuses",
          regime="top_k or top_p set", untrue=("eval", "generator", "temperature")),
        # https://github.com/kingoflolz/mesh-transformer-jax/issues/164 (top-k kept one token too many)
        M("top_k_filter", "kth = logits.topk(k, dim=-1).values[..., -1:]",
          "kth = logits.topk(k + 1, dim=-1).values[..., -1:]",
          ("k+1", "k + 1", "one too many", "off by one", "off-by-one", "k-th"),
          "takes the (k+1)-th largest as the threshold, the off-by-one kingoflolz/mesh-transformer-jax#164 fixed: "
          "k + 1 tokens survive, and with k = V topk(V + 1) raises",
          untrue=("<=", "in place", "ties")),
    ],
    "09": [
        M("get_batch", "idx = starts[:, None] + torch.arange(seq_len + 1)",
          "idx = starts[:, None] + torch.arange(seq_len)",
          ("seq_len + 1", "off by one", "off-by-one", "window", "one token short", "shape"),
          "takes windows of seq_len tokens instead of seq_len + 1: x and y come out (B, seq_len - 1), one position "
          "short",
          untrue=("shift", "swapped", "dtype", "generator")),
        # https://github.com/pytorch/pytorch/pull/12703 (NLLLoss fed values that are not log-probabilities)
        M("lm_loss", "return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)",
          "return F.nll_loss(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)",
          ("log_softmax", "nll_loss", "log-probabilities", "log probabilities", "negative", "softmax"),
          "calls F.nll_loss on raw logits: nll_loss expects log-probabilities and only negates the target's entry, "
          "so the 'loss' is minus the target logit (often negative, unbounded below), the mistake "
          "pytorch/pytorch#12703 fixed in NLLLoss's own example",
          untrue=("flatten", "view", "padding", "mean")),
        M("lm_loss", "ignore_index=-100)  # (B*T, V) vs (B*T,)", "ignore_index=0)  # (B*T, V) vs (B*T,)",
          ("ignore_index", "-100", "token 0", "padding", "id 0"),
          "ignores token id 0 instead of the -100 padding marker: every real target 0 is left out of the loss, and "
          "a batch with -100 padding raises (cross_entropy refuses the negative target)",
          untrue=("flatten", "softmax", "view")),
        # https://github.com/pytorch/torchtitan/pull/3575 (zero_grad per micro-batch: no accumulation)
        M("train_step_accumulated",
          "    optimizer.zero_grad(set_to_none=True)                             # once, before the first micro-batch\n"
          "    total = 0.0\n"
          "    for x, y in micro_batches:\n",
          "    total = 0.0\n"
          "    for x, y in micro_batches:\n"
          "        optimizer.zero_grad(set_to_none=True)\n",
          ("zero_grad", "last micro-batch", "accumulat", "cleared", "only the last"),
          "clears the gradients at the start of every micro-batch, as pytorch/torchtitan#3575 fixed: only the last "
          "micro-batch's share survives to the step, so the update follows that micro-batch alone, scaled by its "
          "share of the tokens",
          regime="more than one micro-batch", untrue=("denominator", "padding", "mean of the means")),
        M("train_step_accumulated", "        total += summed.item()\n"
          "    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)    # once: the whole batch's gradient\n",
          "        total += summed.item()\n"
          "        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)\n",
          ("clip", "once", "each micro-batch", "partial", "per micro-batch", "global norm"),
          "clips inside the loop, after each micro-batch's backward: the partial sums are clipped one by one, so when "
          "clipping is active the final gradient is not the whole batch's gradient clipped once (earlier shares are "
          "shrunk again and again)",
          regime="gradient norm above grad_clip with several micro-batches",
          untrue=("zero_grad() runs", "zero_grad inside", "denominator", "padding")),
        # https://github.com/huggingface/trl/pull/6709 (the embedding lookup counted as a matmul)
        M("train_step_costs", "matmul_weights = L * per_block + head", "matmul_weights = L * per_block + 2 * head",
          ("lookup", "embedding", "no flops", "head", "twice", "matmul"),
          "counts the embedding lookup as a second V·d matmul, the slip huggingface/trl#6709 fixed: the FLOPs are "
          "over by 6 · V · d · tokens, and since the parameter count is built from the matmul weights, the "
          "weights, grads and Adam bytes count V · d parameters too many",
          untrue=("backward", "attention", "adam steps")),
        M("train_step", "loss = lm_loss(model(x), y)", "loss = lm_loss(model(x), x)",
          ("targets", "shift", "x instead of y", "inputs", "next token", "copy"),
          "scores the logits against the inputs x instead of the targets y: the model is trained to copy its "
          "current token, not to predict the next one",
          untrue=("zero_grad", "clip", "train mode")),
        M("lr_schedule", "return max_lr * (step + 1) / warmup_steps",
          "return min_lr + (max_lr - min_lr) * (step + 1) / warmup_steps",
          ("warmup", "min_lr", "linear", "from 0", "start"),
          "warms up from min_lr instead of from 0: during warmup the rate is min_lr + (max_lr - min_lr)(step + 1)/"
          "warmup instead of max_lr (step + 1)/warmup, higher at every warmup step",
          regime="min_lr > 0", untrue=("off by one", "cosine", "total_steps")),
        M("train_step", "model.train()                                # dropout on, whatever mode the caller left",
          "model.eval()                                 # dropout on, whatever mode the caller left",
          ("train mode", "eval", "dropout", "mode"),
          "puts the model in eval mode before the training forward pass: dropout is off during training",
          untrue=("zero_grad", "clip", "item")),
    ],
    "10": [
        M("nll_sum_and_count", "count = int((targets != ignore_index).sum())", "count = int((targets >= 0).sum())",
          ("ignore_index", "padding", "count", ">= 0", "negative"),
          "counts the non-negative targets instead of those that are not ignore_index: the same for the default "
          "-100, but with ignore_index=0 (or any id) the padded positions are counted as tokens",
          regime="an ignore_index that is a valid id", untrue=("float", "bfloat16", "mean")),
        M("evaluate", '"bits_per_byte": loss / math.log(2) / bytes_per_token',
          '"bits_per_byte": loss / math.log(2) * bytes_per_token',
          ("bytes_per_token", "per byte", "divide", "multipl", "inverted"),
          "multiplies by bytes_per_token instead of dividing: bits per token times bytes per token, right only for "
          "bytes_per_token = 1",
          regime="bytes_per_token != 1", untrue=("ln 2", "perplexity", "eval")),
        M("evaluate", "        model.train(was_training)", "        model.train()",
          ("mode", "eval", "train", "restore", "was_training", "back"),
          "puts the model in train mode after evaluating whatever mode it came in: a model handed over in eval mode "
          "leaves in train mode, with dropout on for whatever runs next",
          regime="a model handed over in eval mode", untrue=("no_grad", "perplexity", "token-weighted")),
        M("bigram_nll", "probs.log()[val[:-1], val[1:]]", "probs.log()[val[1:], val[:-1]]",
          ("swapped", "order", "prev", "next", "index", "transpos"),
          "indexes the table [next, prev] instead of [prev, next]: each pair is scored with the probability of the "
          "reverse pair",
          untrue=("uint8", "alpha", "normalis")),
        M("nll_sum_and_count", "return nll.item(), count", "return nll.item() / count, count",
          ("sum", "mean", "divid", "count", "zero", "total"),
          "returns the mean NLL instead of the sum: evaluate, which adds the batches' sums and divides by all "
          "their tokens, then divides every batch's NLL by its token count twice; a batch of padding only raises "
          "ZeroDivisionError",
          untrue=("ignore_index", "float", "bfloat16")),
        M("bigram_nll", "-probs.log()[val[:-1], val[1:]].mean().item()", "-probs.log()[val[:-1], val[1:]].sum().item()",
          ("sum", "mean", "per byte", "length", "total"),
          "returns the summed NLL of the validation pairs instead of their mean: the result grows with the length "
          "of val",
          untrue=("uint8", "alpha", "swapped")),
        M("bigram_nll", "counts = torch.bincount(train[:-1] * 256 + train[1:], minlength=256 * 256)",
          "counts = torch.bincount(train[:-1] * 256 + train[1:])",
          ("minlength", "65536", "256 * 256", "view", "shape", "missing pairs"),
          "drops minlength: bincount's length is the largest pair id + 1, so unless the pair (255, 255) occurs "
          "the counts cannot be viewed as 256 x 256 and the view raises",
          untrue=("uint8", "alpha", "swapped")),
    ],
}

SAME = [
    ("01", M("tied_logits", "return x @ weight.T", 'return torch.einsum("...d,vd->...v", x, weight)', (),
             "einsum over the feature axis is the same product x Wᵀ")),
    ("02", M("layer_norm", "var = centred.pow(2).mean(dim=-1, keepdim=True)",
             "var = x.var(dim=-1, keepdim=True, correction=0)",
             (), "the biased variance of x is the mean square of the centred x")),
    ("03", M("causal_attention", "/ math.sqrt(q.shape[-1])", "* q.shape[-1] ** -0.5", (),
             "multiplying by hd^-0.5 is dividing by sqrt(hd)")),
    ("04", M("rope_cache", "inv_freq = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)",
             "inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)", (),
             "1 / theta^(2i/d) is theta^(-2i/d)")),
    ("04", M("interleaved_to_half", "pairs.transpose(1, 2).reshape(rows, d_in)",
             "pairs.permute(0, 2, 1, 3).reshape(rows, d_in)",
             (), "permute(0, 2, 1, 3) swaps the same two axes as transpose(1, 2)")),
    ("05", M("Transformer", "x = embed(idx, self.tok_emb.weight)", "x = embed(idx, self.lm_head.weight)", (),
             "the head is tied in __init__: lm_head.weight is tok_emb.weight, the same Parameter")),
    ("05", M("swiglu_hidden", "return multiple * math.ceil(8 * d_model / 3 / multiple)",
             "return multiple * -(-8 * d_model // (3 * multiple))", (),
             "an integer ceiling of 8·d / (3·multiple): the float ceiling's value, without floats")),
    ("05", M("swiglu", "return (gate * up) @ w_down.T", "return gate * up @ w_down.T", (),
             "* and @ share one precedence level and group left to right: gate * up @ w is (gate * up) @ w")),
    ("06", M("generate_greedy", "logits.argmax(dim=-1, keepdim=True)", "logits.argmax(dim=-1)[:, None]", (),
             "[:, None] restores the axis keepdim keeps")),
    ("07", M("repeat_kv", "x = x[:, :, None].expand(B, n_kv, n_rep, T, hd)",
             "x = x[:, :, None].repeat(1, 1, n_rep, 1, 1)",
             (), "repeat copies what expand views: the same values, heads in the same order")),
    ("07", M("gqa_attention", "F.scaled_dot_product_attention(q, k, v, is_causal=True)",
             "F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)", (),
             "k and v already have n_heads heads after repeat_kv: enable_gqa has nothing to group")),
    ("08", M("top_k_filter", 'return logits.masked_fill(logits < kth, float("-inf"))',
             'return torch.where(logits < kth, float("-inf"), logits)', (),
             "torch.where with the filler first is masked_fill, out of place")),
    ("09", M("train_step", "optimizer.zero_grad(set_to_none=True)", "model.zero_grad(set_to_none=True)", (),
             "the optimizer holds the model's parameters: clearing them through the model clears the same .grad")),
    ("10", M("nll_sum_and_count", "count = int((targets != ignore_index).sum())",
             "count = targets.ne(ignore_index).sum().item()", (),
             "ne().sum().item() of an integer tensor is the same Python int")),
]
