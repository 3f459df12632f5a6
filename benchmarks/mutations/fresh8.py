"""An eleventh held-out set of learner mistakes ("fresh8"), 38 of them, none
of which is in the project's other mutation lists (nbNN.py, heldout.py,
unseen.py, offlist.py, fresh.py to fresh7.py): every one of those lists was
read first, entry by entry, so that each mistake here is a different idea
for its cell, and the themes of fresh6's and fresh7's docstrings were left
alone. The mistakes were written from the reference answers of the solution
notebooks (their answer cells, printed through notebook_cells as
verify_unseen.py loads them), tinylm (its config and KV cache),
benchmarks/verify_heldout.py, verify_unseen.py and the other mutation lists
only. The checks (autograder/checks/), their tests (tests/checks/), the
diagnostics benchmark's source (benchmarks/bench_diagnostics.py, imported
but not opened) and docs/benchmarks.md (beyond three lines a grep for
"fresh7" printed: fresh7's row of results) were not read, and no mistake was
tried against a check before the set was first measured. Not part of the
default run:
`python benchmarks/bench_diagnostics.py --set fresh8`.

Each mistake is one substitution in one answer cell's solution, written the
way a learner gets it wrong when working from the prose, from NumPy, from
another library's habits or from the paper's notation: four for every
notebook but 07, which has two (the other lists already hold nearly every
idea a learner has for repeat_kv, gqa_attention, gqa_step and the bytes of a
decoding step that was not written down here):

- Library habits carried over: Gemma 2's and Grok's tanh soft-capping of the
  logits, nanoGPT's last-position head, an nn.LayerNorm built inside the
  function (its own fresh gain and bias), a gain registered as a buffer (as
  the model's RoPE tables are), Hugging Face's attention modules that return
  a tuple ([0] of a tensor is its first sequence), Hugging Face's SDPA call
  with is_causal = (T > 1) and no mask, SDPA's broadcasting of one kv head
  taken for GQA support, a DataLoader's drop_last.
- Python and NumPy slips: `** 1/2` for a square root, iterating a tensor to
  get its heads (it walks the batch), a sign vector in float32 that promotes
  the rotation, `a * a.sigmoid_()` (the in-place call changes the left
  operand before the product), a generator of parameters consumed twice,
  `counts[i, j] += 1` with repeated pairs (advanced-index assignment does not
  accumulate), bytes per number from torch.finfo (floats only).
- Maths read differently: eps added to the sum of squares in the
  sqrt(d)·x/||x|| form, LayerNorm divided by the variance (no square root),
  RoPE's paper index i = 1 .. d/2 without its - 1, the bottom-right rule of
  the mask applied to the RoPE tables, one shared k/v head read for GQA,
  time-major flattening of the logits, min_lr read as a fraction of max_lr,
  ln(2·b) for b·ln 2.
- Counting: the scale's divisions counted as matmul FLOPs, the mix's inner
  dimension taken from its output, the cache sized by its allocation
  (max_seq_len), a generation capped so every new token fits in the cache
  (the last one never enters it), a tied embedding counted besides the head,
  add-alpha smoothing over the bytes seen after prev instead of all 256.
- Dtype and range: a one-hot product computed in float32 and returned so,
  ids clamped into the table instead of raising, the final norm applied
  after every block, the smallest logit as top-k's filler instead of -inf,
  sigmoid for softmax, probabilities handed on as logits.

The entries with a `regime` are right in the default situation and wrong
only there (an id outside the table, bfloat16 weights, a batch larger than one, MHA or MQA rather than GQA, int8 weights, a
chunked prefill, a prompt plus new tokens one past max_seq_len, repeated
bigrams, bytes_per_token other than 1, start_pos > 0 or a caller's theta,
tokens whose mean square is near eps, a trained LayerNorm, seq_len other than
head_dim, n_kv_heads > 1, a nonzero min_lr, a tied model).

The comment above each entry names the nearest entry of the other lists and
how this one differs. `benchmarks/verify_unseen.py --set fresh8` proves each
one a real bug against tinylm, PyTorch built-ins or closed forms.
"""
from __future__ import annotations

from .unseen import Unseen as M

SHAPE = ("shape", "axis", "broadcast")
DTYPE = ("dtype", "float32", "bfloat16", "half", "precision", "cast")

MUTATIONS = {
    "01": [
        # nearest: default embed subtracting one from the ids, fresh6's max_norm; here the ids clamped into the table,
        # so an id the table has no row for is silently looked up as the last row
        M("embed", "return weight[ids]",
          "return weight[ids.clamp(0, weight.shape[0] - 1)]  # never index outside the table",
          ("clamp", "out of range", "out-of-range", "index", "vocab", "raise", "silent"),
          "clamps the ids into [0, V - 1] before the lookup, to be safe: an id the table has no row for (a tokenizer "
          "with more ids than the model) no longer raises but is read as the last row, silently",
          regime="an id outside the table (id >= vocab_size)"),
        # nearest: heldout one_hot_embed casting the one-hot to float32 (which raises on bfloat16), fresh5's embed
        # cast to float32; here both operands upcast for an 'exact' product, so the result stays float32
        M("one_hot_embed", "return one_hot @ weight  # (..., V) @ (V, d) -> (..., d)",
          "return one_hot.float() @ weight.float()  # the product in full precision",
          DTYPE + ("upcast",),
          "multiplies in float32 for precision and never casts back: a bfloat16 (or float16) table gives float32 "
          "rows, where embed(ids, weight) keeps the table's dtype (the product with a one-hot is exact anyway)",
          regime="a bfloat16 or float16 table"),
        # nearest: default tied_logits scaling like attention scores, fresh7's cosine; here Gemma 2's soft-capping,
        # c · tanh(logits / c), which bends every logit towards ±30
        M("tied_logits", "return x @ weight.T",
          "return 30.0 * torch.tanh(x @ weight.T / 30.0)  # soft-capped logits, as Gemma 2 and Grok do",
          ("tanh", "cap", "softcap", "soft-cap", "bounded", "squash", "scale"),
          "soft-caps the logits with 30 · tanh(logits / 30), a habit from Gemma 2 and Grok: the head is x @ Wᵀ, and "
          "the cap bends every logit (by about 1% at 5, much more beyond 30)"),
        # nearest: fresh3 Transformer copying nanoGPT's x[:, [-1]] (another cell); here in the head itself
        M("tied_logits", "return x @ weight.T",
          "return x[:, [-1], :] @ weight.T  # only the last position predicts the next token",
          SHAPE + ("last position", "every position", "positions", "(b, 1, v)", "[:, [-1]]"),
          "computes the logits of the last position only, nanoGPT's inference shortcut: the result is (B, 1, V), "
          "so training and evaluation have no logits for the other positions"),
    ],
    "02": [
        # nearest: fresh4's F.normalize(x) · sqrt(d) (eps ignored), default's eps after the square root; here eps
        # added to the sum of squares, which makes it d times smaller than eps added to the mean
        M("rms_norm", "inv_rms = torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)",
          "inv_rms = torch.rsqrt(x32.pow(2).sum(dim=-1, keepdim=True) + eps) * x.shape[-1] ** 0.5  # sqrt(d) / ||x||",
          ("eps", "sum", "mean square", "d times", "norm", "sqrt(d)"),
          "writes 1/RMS as sqrt(d) / sqrt(sum of squares + eps), the sqrt(d) · x / ||x|| form: eps is added to the "
          "sum instead of the mean, so it acts d times smaller, and tokens whose mean square is near eps are "
          "blown up",
          regime="tokens whose mean square is near eps (or a large eps)"),
        # nearest: default forgetting the bias, fresh5 mixing up gamma and beta; here a fresh nn.LayerNorm built inside
        # the function, whose own gain (1) and bias (0) replace the caller's
        M("layer_norm", "return weight * centred * torch.rsqrt(var + eps) + bias",
          "return nn.LayerNorm(x.shape[-1], eps=eps)(x)  # torch's own LayerNorm",
          ("weight", "bias", "gain", "affine", "ignored", "nn.layernorm", "module"),
          "calls a freshly built nn.LayerNorm on x: its gain and bias are the module's own new ones and zeros, so "
          "the caller's weight and bias are ignored (and the module is rebuilt at every call)",
          regime="a gain other than 1 or a nonzero bias (any trained LayerNorm)"),
        # nearest: default dividing by sqrt(std), fresh7's rsqrt of the sqrt (rms_norm); here the variance itself as the
        # divisor, the square root forgotten
        M("layer_norm", "return weight * centred * torch.rsqrt(var + eps) + bias",
          "return weight * centred / (var + eps) + bias  # (x - mean) / (sigma^2 + eps)",
          ("sqrt", "square root", "variance", "standard deviation", "std", "rsqrt"),
          "divides the centred x by the variance plus eps, reading σ² for σ: the square root is missing, so a token "
          "with a standard deviation of 10 comes out 10 times too small and one of 0.1 ten times too large"),
        # nearest: default storing the gain as a plain tensor, fresh6 registering eps as a buffer, fresh7's
        # .to(DEVICE); here the gain registered as a buffer, as the model registers its RoPE tables
        M("RMSNorm", "self.weight = nn.Parameter(torch.ones(dim))",
          'self.register_buffer("weight", torch.ones(dim))  # saved and moved with the module',
          ("parameter", "buffer", "parameters()", "train", "gradient", "optimizer", "register"),
          "registers the gain with register_buffer, as the model does its RoPE tables: it is saved, loaded and moved "
          "with the module, but is no Parameter, so parameters() and the optimizer never see it and it never trains"),
    ],
    "03": [
        # nearest: fresh5's concatenation along the positions, fresh7's flatten(1); here the heads taken by iterating
        # y, which walks the batch axis, not the heads
        M("split_heads", "return y.transpose(1, 2).reshape(B, T, H * hd)  # (B, T, H, hd) -> (B, T, d): heads side by side",
          "return torch.cat(tuple(y), dim=-1)  # Concat(head_1, ..., head_h)",
          SHAPE + ("batch", "iterat", "heads", "concat", "first axis"),
          "writes Concat(head_1, ..., head_h) by iterating y: iterating a tensor walks its first axis, the batch, so "
          "the sequences are concatenated along the features and the result is (H, T, B·hd), not (B, T, H·hd)"),
        # nearest: default dividing by head_dim, fresh5's torch.sqrt of an int; here ** 1/2, which Python reads as
        # (head_dim ** 1) / 2
        M("causal_attention", "scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])",
          "scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 1/2",
          ("scale", "sqrt", "square root", "precedence", "head_dim / 2", "** 1/2", "parenthes"),
          "writes the square root as q.shape[-1] ** 1/2: ** binds tighter than /, so the scores are divided by "
          "head_dim / 2 instead of sqrt(head_dim), which agree only for head_dim = 4"),
        # nearest: fresh's causal triangle, fresh3's multiply-adds; here the scaling's T·T divisions counted into the
        # scores, as if the count were of every operation
        M("attention_flops", '"scores": B * n_heads * per_head,',
          '"scores": B * n_heads * (per_head + T * T),  # and the division by sqrt(head_dim)',
          ("scale", "division", "matmul", "elementwise", "sqrt", "scores"),
          "adds the T·T divisions by sqrt(head_dim) to the scores' count: the exercise counts the matmuls' FLOPs "
          "(2 per multiply-add), and the scaling is no matmul"),
        # nearest: fresh2 sizing the scores with d_model; here the mix's inner dimension taken from its output's last
        # axis, so (T, T) @ (T, hd) is counted as if its dot products had head_dim terms
        M("attention_flops", '"mix": B * n_heads * per_head,',
          '"mix": B * n_heads * 2 * T * head_dim * head_dim,  # (T, hd) out, a dot product per entry',
          ("mix", "inner", "seq_len", "t x t", "(t, t) @ (t, hd)", "head_dim"),
          "counts the mix (T, T) @ (T, hd) as T·hd outputs of head_dim-term dot products: each output sums over "
          "the T keys, so its count is 2·T·T·hd; right only when the sequence is head_dim long",
          regime="seq_len other than head_dim"),
    ],
    "04": [
        # nearest: default starting the exponents at 1 (odd ones), unseen counting the factor 2 twice; here the paper's
        # theta_i = 10000^(-2(i-1)/d), i = 1 .. d/2, written without the - 1
        M("rope_cache", "torch.arange(0, head_dim, 2, dtype=torch.float32)",
          "torch.arange(2, head_dim + 2, 2, dtype=torch.float32)",
          ("exponent", "frequenc", "i - 1", "2i", "theta", "first pair", "off by one"),
          "takes the paper's theta_i = 10000^(-2(i-1)/d), i = 1 .. d/2, as 10000^(-2i/d): the exponents run 2/d .. 1 "
          "instead of 0 .. 1 - 2/d, so no pair turns at frequency 1 and the last turns at 1/theta"),
        # nearest: default ignoring start_pos or slicing up to T; here the tables' last T rows, the bottom-right rule of
        # the mask applied to positions
        M("apply_rope", "cos = cos[start_pos:start_pos + T].to(x.dtype)  # (T, hd), broadcasts over (B, H)\n"
          "    sin = sin[start_pos:start_pos + T].to(x.dtype)",
          "cos = cos[-T:].to(x.dtype)  # the new tokens are the last rows, as in the mask\n"
          "    sin = sin[-T:].to(x.dtype)",
          ("start_pos", "positions", "last rows", "max_seq_len", "slice", "offset"),
          "takes the tables' last T rows, as the causal mask aligns the new queries bottom-right: the positions are "
          "max_seq_len - T .. max_seq_len - 1 whatever start_pos is, so a cached decoding step is always rotated "
          "as the last position"),
        # nearest: unseen rotate_half's (x2, -x1), fresh5 swapping the halves without negating; here the sign applied as
        # a float32 vector, which promotes half-precision input
        M("apply_rope", "return torch.cat((-x2, x1), dim=-1)",
          "return torch.cat((x2, x1), dim=-1) * torch.tensor([-1.0] * x1.shape[-1] + [1.0] * x2.shape[-1])",
          DTYPE + ("promot", "sign"),
          "swaps the halves and applies the signs (-, +) as a float32 vector: right in float32, but the product "
          "promotes bfloat16 or float16 q and k to float32 (and the vector lives on the CPU)",
          regime="half-precision (bfloat16 or float16) q and k"),
        # nearest: default's (sin, cos), fresh6's float32 rotation; here the tables rebuilt from q's shape, ignoring the
        # caller's (their theta, and the rows beyond the sequence)
        M("rotary_attention", "q = apply_rope(q, cos, sin, start_pos)  # position enters the scores only",
          "cos, sin = rope_cache(q.shape[-1], q.shape[-2])  # tables for these T positions\n"
          "    q = apply_rope(q, cos, sin, start_pos)",
          ("cos", "sin", "tables", "theta", "start_pos", "max_seq_len", "positions"),
          "rebuilds the tables from q's head_dim and length instead of using the caller's: their theta is lost, and "
          "with start_pos > 0 the T-row tables have no rows for positions start_pos .. start_pos + T - 1",
          regime="start_pos > 0 or tables built with another theta"),
    ],
    "05": [
        # nearest: fresh's sigmoid from its formula, fresh6's float32 gate; here a * a.sigmoid_(), whose in-place call
        # changes a before the product reads it
        M("swiglu", "gate = F.silu(x @ w_gate.T)  # (B, T, d_ff): the nonlinearity lives on the gate only",
          "a = x @ w_gate.T\n    gate = a * a.sigmoid_()  # SiLU, a · sigmoid(a), without a second buffer",
          ("in-place", "in place", "sigmoid_", "silu", "overwrit", "autograd"),
          "writes SiLU as a * a.sigmoid_() to save a buffer: sigmoid_ overwrites a before the product reads it, so "
          "the gate is sigmoid(a)² instead of a · sigmoid(a), and backward raises (a saved tensor was modified)"),
        # nearest: default dropping the attention residual, heldout +=; here [0] from Hugging Face attention modules
        # that return (output, weights)
        M("pre_norm_block", "x = x + attn(attn_norm(x))  # the branch reads a normalised copy; the stream stays a sum",
          "x = x + attn(attn_norm(x))[0]  # attention modules return (output, weights)",
          SHAPE + ("batch", "[0]", "tuple", "first sequence", "broadcast"),
          "takes [0] of the attention's result, as Hugging Face attention modules return (output, weights): attn "
          "returns a tensor, whose [0] is the first sequence, which broadcasts onto every sequence of the batch",
          regime="a batch of more than one sequence"),
        # nearest: default normalising the block's output (pre_norm_block), offlist's missing final norm; here the final
        # norm applied after every block, to keep the stream at unit scale
        M("Transformer", "x = block(x, self.rope_cos, self.rope_sin, cache, i)",
          "x = self.norm(block(x, self.rope_cos, self.rope_sin, cache, i))  # keep the stream at unit scale",
          ("final norm", "norm", "every block", "residual", "stream", "once"),
          "applies the final norm after every block to keep the residual stream at unit scale: the stream of a "
          "pre-norm model is normalised only once, before the head, and the blocks' norms read it as it is"),
        # nearest: fresh3 sizing k and v with n_heads, fresh6 by the group size; here one shared k/v head, reading
        # 'the query heads share keys and values' as MQA
        M("param_counts", "k_and_v = 2 * d * config.n_kv_heads * hd",
          "k_and_v = 2 * d * hd  # one key head and one value head, shared by the query heads",
          ("n_kv_heads", "kv head", "gqa", "shared", "mqa", "k_proj"),
          "counts one shared key head and one value head, reading 'query heads share keys and values' as MQA: k_proj "
          "and v_proj have n_kv_heads heads each, so only n_kv_heads = 1 is right",
          regime="n_kv_heads > 1 (MHA or GQA)"),
    ],
    "06": [
        # nearest: fresh7 capping the positions at max_seq_len, fresh2 (notebook 07) sizing the cache read by
        # max_seq_len; here the bytes of the cache's allocation, whatever seq_len is asked
        M("kv_cache_bytes", "return per_position * seq_len * batch_size * dtype.itemsize",
          "return per_position * config.max_seq_len * batch_size * dtype.itemsize  # the cache is allocated whole",
          ("seq_len", "max_seq_len", "positions", "allocat", "context"),
          "sizes the cache by config.max_seq_len, the length a KVCache allocates: the exercise asks for the bytes of "
          "seq_len positions, more or fewer than the preset length"),
        # nearest: fresh's finfo(dtype).bits (bits, not bytes), fresh hard-coding 4 bytes; here bits // 8 from finfo,
        # which describes floating-point dtypes only
        M("kv_cache_bytes", "return per_position * seq_len * batch_size * dtype.itemsize",
          "return per_position * seq_len * batch_size * torch.finfo(dtype).bits // 8",
          ("finfo", "itemsize", "int8", "integer", "quantis", "quantiz", "dtype"),
          "takes the bytes per number from torch.finfo(dtype).bits // 8: right for every float dtype, but finfo "
          "refuses integer dtypes, so an int8 (quantised) cache raises",
          regime="an int8 (quantised) cache"),
        # nearest: default's top-left tril, heldout's is_causal=True with a cache; here Hugging Face's is_causal = T > 1
        # without a mask, right for the prefill and for one-token steps
        M("attention_step", "y = F.scaled_dot_product_attention(q, k_all, v_all, attn_mask=mask)    # (B, nh, T, hd)",
          "y = F.scaled_dot_product_attention(q, k_all, v_all, is_causal=T > 1)  # one new token sees everything",
          ("is_causal", "top-left", "bottom-right", "mask", "chunk", "cached", "offset"),
          "passes is_causal=T > 1 instead of the mask, as Hugging Face's SDPA path does: right for the prefill and "
          "for one-token steps, but SDPA's causal mask is top-left aligned, so a step of several new tokens after "
          "cached ones hides most of the cache from them",
          regime="a step of several new tokens after a prefill (chunked prefill)"),
        # nearest: fresh3 reading max_new_tokens as the total length, fresh7's cap of kv_cache_bytes; here the new
        # tokens capped at max_seq_len - T, one short: the last new token never enters the cache
        M("generate_greedy", "for _ in range(max_new_tokens):",
          "for _ in range(min(max_new_tokens, model.config.max_seq_len - prompt.shape[1])):  # the cache must hold them",
          ("max_seq_len", "max_new_tokens", "one short", "last token", "cache", "positions"),
          "caps the new tokens at max_seq_len - T so that each fits in the cache: the last new token is never fed "
          "back, so T + max_new_tokens = max_seq_len + 1 fits, and the cap returns one token short of it (and "
          "silently shortens any longer request instead of raising)",
          regime="prompt length + max_new_tokens = max_seq_len + 1"),
    ],
    "07": [
        # nearest: offlist repeat_kv returning one kv head for broadcasting, unseen's SDPA without is_causal; here SDPA
        # called on the kv heads as they are
        M("gqa_attention", "k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)  # (B, n_heads, T, hd): only inside attention\n"
          "    return F.scaled_dot_product_attention(q, k, v, is_causal=True)",
          "return F.scaled_dot_product_attention(q, k, v, is_causal=True)  # SDPA broadcasts the kv heads",
          ("repeat", "kv head", "n_kv", "group", "broadcast", "enable_gqa"),
          "hands SDPA the kv heads unrepeated, since it broadcasts them: SDPA broadcasts a single kv head (MQA) and "
          "equal counts (MHA), but raises for n_kv_heads between 1 and n_heads",
          regime="GQA proper (1 < n_kv_heads < n_heads)"),
        # nearest: fresh5 counting the weights at 4 bytes, fresh (notebook 06) finfo(dtype).bits; here bits // 8, which
        # raises for integer dtypes
        M("decode_bytes_per_token", "d, L, hd, size = config.d_model, config.n_layers, config.head_dim, dtype.itemsize",
          "d, L, hd, size = config.d_model, config.n_layers, config.head_dim, torch.finfo(dtype).bits // 8",
          ("finfo", "itemsize", "int8", "integer", "quantis", "quantiz", "dtype"),
          "takes the bytes per number from torch.finfo(dtype).bits // 8: right for every float dtype, but finfo "
          "refuses integer dtypes, so the bytes an int8 (quantised) model reads per token cannot be computed",
          regime="int8 (quantised) weights and cache"),
    ],
    "08": [
        # nearest: default filling with 0, fresh (notebook 03) masking with a finite -1e4; here the smallest logit of the
        # tensor as the filler, so the filtered tokens stay drawable
        M("top_k_filter", 'return logits.masked_fill(logits < kth, float("-inf"))',
          "return logits.masked_fill(logits < kth, logits.min())  # no -inf: nothing becomes nan",
          ("-inf", "inf", "filler", "zero probability", "drawable", "min", "filtered"),
          "fills the filtered logits with the smallest logit instead of -inf, to keep infinities out: the filtered "
          "tokens keep a probability of exp(min - max) each, so a draw can still pick them, and many together can "
          "hold real mass"),
        # nearest: fresh7's min-p, default's 1 - p; here top-p read as the top fraction p of the vocabulary
        M("top_p_filter", "drop_sorted = mass_before >= p                                # the crossing token has mass_before < p",
          "drop_sorted = (torch.arange(logits.shape[-1]) >= p * logits.shape[-1]).expand_as(probs)  # the top p of the sorted tokens",
          ("nucleus", "mass", "cumulative", "probability", "fraction", "vocabulary", "count"),
          "reads top-p as the top fraction p of the vocabulary, the first p · V sorted tokens: the nucleus is the "
          "smallest set whose probability mass reaches p, so the kept tokens no longer depend on the distribution"),
        # nearest: offlist exp(logits), fresh5 log_softmax; here sigmoid, the binary classifier's probability
        M("sample_next", "probs = logits.softmax(dim=-1)            # (B, V): filtered tokens get exactly 0",
          "probs = torch.sigmoid(logits)            # each token's probability, multinomial normalises",
          ("softmax", "sigmoid", "distribution", "probabilit", "normalis", "normaliz"),
          "takes each token's probability as sigmoid(logit), the binary classifier's: multinomial renormalises the "
          "sigmoids, which are not proportional to exp(logit), so the draws flatten towards the unlikely tokens"),
        # nearest: fresh5 handing top_p_filter probabilities (sample_next), default dropping temperature; here the
        # logits normalised before sample_next, which then takes a softmax of probabilities
        M("generate", "next_id = sample_next(logits, temperature, top_k, top_p, generator)  # (B,)",
          "next_id = sample_next(logits.softmax(dim=-1), temperature, top_k, top_p, generator)  # (B,) from the distribution",
          ("softmax", "probabilit", "logits", "twice", "uniform", "flat"),
          "hands sample_next the probabilities instead of the logits: it takes a softmax of numbers in [0, 1], so "
          "every token ends up with nearly the same chance and the model's preferences are almost lost"),
    ],
    "09": [
        # nearest: fresh3 passing (B, T, V) unflattened, unseen's .view; here a time-major flatten of the logits (an
        # RNN's (T, B) layout) against batch-major targets
        M("lm_loss", "return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)",
          "return F.cross_entropy(logits.transpose(0, 1).flatten(0, 1), targets.flatten(), ignore_index=-100)",
          ("order", "transpose", "time-major", "batch", "align", "flatten", "targets"),
          "flattens the logits time-major, as for an RNN's (T, B, V) output, and the targets batch-major: each "
          "logit row meets another sequence's target, so the loss is right only for a batch of one",
          regime="a batch of more than one sequence"),
        # nearest: fresh3 overwriting min_lr with max_lr / 10, fresh7's floor; here min_lr read as a fraction of max_lr,
        # as a min_lr_ratio
        M("lr_schedule", "return min_lr + 0.5 * (1 + math.cos(math.pi * min(progress, 1.0))) * (max_lr - min_lr)",
          "lo = min_lr * max_lr  # min_lr as a fraction of max_lr\n"
          "    return lo + 0.5 * (1 + math.cos(math.pi * min(progress, 1.0))) * (max_lr - lo)",
          ("min_lr", "fraction", "ratio", "floor", "decay", "end"),
          "reads min_lr as a fraction of max_lr, as a min_lr_ratio: the decay ends at min_lr · max_lr instead of "
          "min_lr, right only for min_lr = 0",
          regime="a nonzero min_lr"),
        # nearest: fresh3 zeroing each p.grad by hand, offlist clipping each parameter alone; here one generator of
        # parameters used for the zeroing and then for the clipping, which finds it exhausted
        M("train_step", "optimizer.zero_grad(set_to_none=True)        # gradients accumulate otherwise\n"
          "    loss.backward()                              # d loss / d every parameter\n"
          "    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)  # global gradient norm <= grad_clip",
          "params = model.parameters()\n"
          "    for p in params:\n"
          "        p.grad = None                            # set_to_none, by hand\n"
          "    loss.backward()\n"
          "    torch.nn.utils.clip_grad_norm_(params, grad_clip)  # the same parameters",
          ("clip", "generator", "exhausted", "norm", "grad_clip", "nothing"),
          "keeps model.parameters() in a variable, zeroes the gradients through it and then clips it: it is a "
          "generator, used up by the zeroing loop, so clip_grad_norm_ sees no parameter and nothing is clipped"),
        # nearest: fresh (notebook 07) counting the tied embedding and head as two matrices, fresh's untied model one
        # matrix short (the reverse, this cell); here the embedding added to the head's matrix whatever the tying
        M("train_step_costs", "n_params = matmul_weights + (2 * L + 1) * d + (0 if config.tie_embeddings else V * d)",
          "n_params = matmul_weights + (2 * L + 1) * d + V * d  # + the gains and the embedding",
          ("tied", "tie", "embedding", "twice", "shared", "head", "once"),
          "adds the embedding's V · d to the head's matrix whatever the tying: a tied head is the embedding's "
          "Parameter, stored, differentiated and tracked once, so a tied model's weights, gradients and moments "
          "are over-counted by a vocabulary matrix",
          regime="a tied model (tie_embeddings=True, the default)"),
    ],
    "10": [
        # nearest: offlist's bincount without minlength, fresh3's chained index; here counts[prev, next] += 1, which
        # counts a repeated pair once
        M("bigram_nll", "counts = torch.bincount(train[:-1] * 256 + train[1:], minlength=256 * 256).view(256, 256).double()  # [prev, next]",
          "counts = torch.zeros(256, 256, dtype=torch.float64)\n"
          "    counts[train[:-1], train[1:]] += 1  # one count per pair  [prev, next]",
          ("repeat", "duplicate", "accumulat", "index_put", "+=", "count", "bincount"),
          "counts the pairs with counts[prev, next] += 1: advanced-index assignment writes each distinct pair once, "
          "so a pair that occurs many times is counted once and the table is the set of pairs, not their counts",
          regime="a training text with repeated pairs (any real text)"),
        # nearest: default's alpha once in the denominator, fresh6's softmax over counts; here the smoothing's
        # vocabulary taken as the bytes seen after prev, so each row's denominator is short of 256 alphas
        M("bigram_nll", "counts.sum(dim=1, keepdim=True) + 256 * alpha",
          "counts.sum(dim=1, keepdim=True) + (counts > 0).sum(dim=1, keepdim=True) * alpha",
          ("256", "alpha", "vocabulary", "denominator", "sum to 1", "smoothing", "normalis", "normaliz"),
          "adds alpha to the denominator once per next byte seen after prev, reading the vocabulary as the bytes that "
          "occur: every one of the 256 next bytes gets alpha in the numerator, so the rows sum to more than 1"),
        # nearest: default dividing by the number of batches, offlist resetting the totals; here the last batch dropped,
        # a DataLoader's drop_last
        M("evaluate", "for x, y in batches:", "for x, y in batches[:-1]:  # the last batch may be short: drop_last",
          ("last batch", "drop", "every batch", "all batches", "skipped", "missing"),
          "leaves out the last batch, as drop_last does for a short one in training: the evaluation must score every "
          "token, so the loss is that of the other batches (and of nothing with a single batch)"),
        # nearest: default multiplying by ln 2, fresh7's log10(2); here ln(2 · b) for b · ln 2
        M("evaluate", '"bits_per_byte": loss / math.log(2) / bytes_per_token',
          '"bits_per_byte": loss / math.log(2 * bytes_per_token)',
          ("bytes_per_token", "ln 2", "log(2)", "bits", "per byte", "bytes"),
          "merges the two divisions into one logarithm, ln(2 · bytes_per_token), where ln 2 · bytes_per_token is "
          "meant: equal for one byte per token, wrong for any tokenizer with more",
          regime="bytes_per_token other than 1"),
    ],
}
