"""A ninth held-out set of learner mistakes ("fresh6"), 40 of them, none of
which is in the project's other mutation lists (nbNN.py, heldout.py,
unseen.py, offlist.py, fresh.py to fresh5.py): every one of those lists was
read first, entry by entry, so that each mistake here is a different idea for
its cell. The mistakes were written from the learner's notebooks (their prose
and the reference answers of the solution notebooks), tinylm and the seed
note only. The checks, their tests, the diagnostics benchmark and its
documentation were not read, and no mistake was tried against a check before
the set was first measured. Not part of the default run:
`python benchmarks/bench_diagnostics.py --set fresh6`.

Each mistake is one substitution in one answer cell's solution, written the
way a learner gets it wrong when working from the prose, from NumPy, from
Hugging Face or Meta's reference code, or from the paper's notation:

- APIs read for another: nn.Embedding's max_norm, which renormalises the
  table in place; torch.chunk's default axis; Tensor.narrow's third argument
  (a length, not an end); SDPA's scale (a factor, not a divisor);
  Tensor.size taken for NumPy's attribute; requires_grad_(False) taken for
  no_grad; torch.set_grad_enabled(False) left switched off.
- Layout and axes: the maths' W·h left vocabulary-first, a mask compared from
  two aranges without new axes, the key length read from head_dim, a top-k
  bound clamped by the batch size, BatchNorm's statistics in a LayerNorm,
  squeeze(1) for the last position.
- Dtype and device: np.eye(V)[ids] built on the CPU, q and k rotated in
  float32 as Meta's reference does (and never cast back), a SwiGLU gate in
  float32, a repeat_kv filled into torch.zeros.
- Numerical stability: a softmax and a log-sum-exp written from their
  formulas, which overflow once logits pass about 88.
- Order and state: the gain applied before the RMS statistic, a head
  re-initialised after tying, model.train() after the forward pass, the
  caller's targets overwritten in place, eps registered as a buffer (it joins
  the state_dict).
- Counting and formulas: head_dim from true division, Meta's truncating
  8/3 rule, one norm per block, k and v sized by the group size, the queries
  cached too, the RoPE tables and a forgotten final norm in the bytes a
  decoding step reads, a backward pass costed as one forward, a loss divided
  by the batch size again, sequences counted for tokens, a linear decay for
  the cosine one, a softmax over counts for their normalisation, 2π in the
  rotary angles, one head's d -> head_dim projection for the layer's.

The entries with a `regime` are right in the default situation and wrong
only there (a table on a GPU, a trained gain, start_pos > 0, half
precision, a multiple of 1 or 2, a prefill through the KV cache, logits above
about 88, a model handed over in eval mode).

The comment above each entry names the nearest entry of the other lists and
how this one differs. `benchmarks/verify_unseen.py --set fresh6` proves each
one a real bug against tinylm, PyTorch built-ins or closed forms.
"""
from __future__ import annotations

from .unseen import Unseen as M

SHAPE = ("shape", "axis", "broadcast")
HALF = "half-precision (bfloat16 or float16) inputs"
DTYPE = ("dtype", "float32", "bfloat16", "half", "precision", "cast")
OVERFLOW = ("overflow", "inf", "nan", "stable", "logsumexp", "max", "large logits")

MUTATIONS = {
    "01": [
        # nearest: offlist embed copying padding_idx=0 from an nn.Embedding example, fresh4's F.embedding argument order;
        # here max_norm, which renormalises the looked-up rows inside the caller's table
        M("embed", "return weight[ids]",
          "return F.embedding(ids, weight, max_norm=1.0)  # rows kept at most unit length, as nn.Embedding(V, d, max_norm=1.0)",
          ("max_norm", "renorm", "in place", "in-place", "modif", "norm", "rescal"),
          "copies max_norm=1.0 from an nn.Embedding example into the lookup: every looked-up row longer than 1 is "
          "rescaled, and F.embedding does it in the caller's weight itself, so the rows differ from weight[ids] and "
          "the table changes under the optimizer"),
        # nearest: default and heldout one_hot_embed casting the one-hot to float32; here NumPy's np.eye(V)[ids], whose
        # identity is built on the default device
        M("one_hot_embed", "one_hot = F.one_hot(ids, num_classes=weight.shape[0]).to(weight.dtype)",
          "one_hot = torch.eye(weight.shape[0], dtype=weight.dtype)[ids]  # np.eye(V)[ids]: rows of the identity",
          ("device", "cpu", "cuda", "gpu", "torch.eye", "eye"),
          "writes the one-hot rows as NumPy's np.eye(V)[ids]: torch.eye is built on the CPU whatever device the ids "
          "and the weight live on, so with a table on a GPU the lookup mixes devices",
          regime="ids and a table on another device than the CPU (a GPU)"),
        # nearest: fresh tied_logits' (W xᵀ)ᵀ with .T and default's missing transpose; here the maths' W·h kept in its
        # column layout, vocabulary before positions
        M("tied_logits", "return x @ weight.T", "return weight @ x.transpose(-2, -1)  # logits = W h",
          SHAPE + ("(b, v, t)", "vocab", "layout", "transpose", "last axis"),
          "writes the head as the maths' W h, weight @ xᵀ, and keeps that layout: the logits come back (B, V, T), "
          "vocabulary before positions, where (B, T, V) is asked for"),
        # nearest: default tie_weights copying the values, fresh5 freezing the shared Parameter; here the head is
        # initialised after tying, which overwrites the embedding it now is
        M("tie_weights", "lm_head.weight = tok_emb.weight",
          "lm_head.weight = tok_emb.weight\n    nn.init.normal_(lm_head.weight, std=0.02)  # a new head starts small",
          ("init", "overwrit", "values", "normal_", "reset", "embedding"),
          "ties the weights, then initialises the head as a new layer would be, N(0, 0.02): the head's weight is the "
          "embedding's Parameter, so the embedding's values are thrown away"),
    ],
    "02": [
        # nearest: default rms_norm forgetting the gain, offlist RMSNorm applying it twice; here the gain multiplies x
        # before the statistic, which then divides its scale back out
        M("rms_norm", "x32 = x.float()  # squares of fp16 values overflow above 256\n"
          "    inv_rms = torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)  # (..., 1): one statistic per token\n"
          "    return weight * (x32 * inv_rms).to(x.dtype)",
          "x32 = (weight * x).float()  # the gain first, then normalise\n"
          "    inv_rms = torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)  # (..., 1): one statistic per token\n"
          "    return (x32 * inv_rms).to(x.dtype)",
          ("gain", "weight", "order", "before", "after", "scale"),
          "applies the gain before measuring the RMS: the normalisation then divides the gain's overall scale back "
          "out, so only a gain of ones gives RMSNorm's result",
          regime="a gain other than ones (any trained norm)"),
        # nearest: default layer_norm's one mean for the whole tensor, default rms_norm's batch axis (another cell);
        # here BatchNorm's statistics, mean and variance over the batch axis
        M("layer_norm", "centred = x - x.mean(dim=-1, keepdim=True)              # (..., d)\n"
          "    var = centred.pow(2).mean(dim=-1, keepdim=True)",
          "centred = x - x.mean(dim=0, keepdim=True)               # per feature, over the batch\n"
          "    var = centred.pow(2).mean(dim=0, keepdim=True)",
          ("batch", "dim=0", "axis", "per token", "last axis", "batchnorm", "features"),
          "takes the mean and variance over the batch axis, as BatchNorm does: each feature is normalised across "
          "the batch, not each token across its features"),
        # nearest: fresh5 RMSNorm's trailing comma, default's hard-coded eps; here eps registered as a buffer, which
        # joins the module's state_dict
        M("RMSNorm", "self.eps = eps", 'self.register_buffer("eps", torch.tensor(eps))  # moves with .to(device) like the gain',
          ("state_dict", "buffer", "eps", "load", "checkpoint", "missing key", "unexpected key"),
          "registers eps as a buffer so it follows .to(device): buffers are saved, so the state_dict gains an 'eps' "
          "entry, and a checkpoint of gains alone (tinylm's, Hugging Face's) no longer loads"),
    ],
    "03": [
        # nearest: default causal_mask's diagonal slips, fresh5 get_batch's missing [:, None] (another notebook); here
        # the mask as a comparison of positions, without the new axes that make it 2-D
        M("causal_mask", "allowed = torch.ones(q_len, kv_len, dtype=torch.bool)\n"
          "    return allowed.tril(diagonal=kv_len - q_len)",
          "return torch.arange(kv_len) <= torch.arange(q_len) + (kv_len - q_len)  # key j <= query i's position",
          SHAPE + ("[:, none]", "[none, :]", "new axis", "2-d", "(q_len, kv_len)"),
          "compares key and query positions as two aranges without [None, :] and [:, None]: equal lengths give a "
          "1-D vector instead of a (q_len, kv_len) mask, other lengths raise"),
        # nearest: fresh2 self_attention passing head_dim where n_heads belongs, fresh3 gqa_attention's n_rep with /
        # (another notebook); here head_dim with true division
        M("split_heads", "x.view(B, T, n_heads, d // n_heads)", "x.view(B, T, n_heads, d / n_heads)",
          ("//", "float", "integer", "head_dim", "division", "view"),
          "computes head_dim as d / n_heads: Python's / gives a float even when it divides evenly, and view "
          "refuses a float size"),
        # nearest: fresh3 causal_attention passing (kv_len, q_len), default's square mask from the query length; here
        # the key length read from k's last axis, which is head_dim
        M("causal_attention", "causal_mask(q.shape[-2], k.shape[-2])", "causal_mask(q.shape[-2], k.shape[-1])",
          SHAPE + ("k.shape[-2]", "head_dim", "key length", "mask", "kv_len"),
          "reads the number of keys from k.shape[-1], the head size: the mask is (Tq, head_dim) and does not fit "
          "the (Tq, Tk) scores unless the sequence happens to be head_dim long"),
        # nearest: fresh4 attention_flops counting one head's scores and mix; here each projection counted as one
        # head's d -> head_dim
        M("attention_flops", "projection = 2 * B * T * d * d ", "projection = 2 * B * T * d * head_dim ",
          ("n_heads", "head_dim", "per head", "projection", "d_model", "every head"),
          "counts each projection as one head's d -> head_dim, the paper's W_i^Q: the layer projects to all "
          "n_heads heads at once, d -> d, n_heads times the FLOPs"),
    ],
    "04": [
        # nearest: default rope_cache converting the angles to degrees, fresh's log2 base; here a factor 2π, as if the
        # frequencies were turns per position
        M("rope_cache", "angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float32), inv_freq)",
          "angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float32), inv_freq) * 2 * torch.pi  # turns -> radians",
          ("2π", "2 * pi", "pi", "radians", "angle", "frequency", "turns"),
          "multiplies the angles by 2π, reading the frequencies as turns per position: theta^(-2i/d) already is in "
          "radians per position, so every pair turns 2π times too fast"),
        # nearest: offlist rotate_half's x.split(2) and its halves along the positions, fresh's dim=3; here torch.chunk
        # without dim, whose default axis is 0, the batch
        M("apply_rope", "x1, x2 = x.chunk(2, dim=-1)", "x1, x2 = x.chunk(2)",
          SHAPE + ("chunk", "dim=-1", "dim", "batch", "last axis", "halves"),
          "halves with x.chunk(2), whose default axis is 0: the batch is cut in two instead of the features, which "
          "raises for a batch of one and gives two half batches otherwise"),
        # nearest: default apply_rope slicing the tables up to T instead of start_pos + T; here Tensor.narrow, whose
        # third argument is a length, given the end
        M("apply_rope", "cos = cos[start_pos:start_pos + T].to(x.dtype)  # (T, hd), broadcasts over (B, H)\n"
          "    sin = sin[start_pos:start_pos + T].to(x.dtype)",
          "cos = cos.narrow(0, start_pos, start_pos + T).to(x.dtype)  # (T, hd), broadcasts over (B, H)\n"
          "    sin = sin.narrow(0, start_pos, start_pos + T).to(x.dtype)",
          ("narrow", "length", "start_pos", "offset", "rows", "slice") + SHAPE,
          "slices the tables with narrow(0, start_pos, start_pos + T), reading the third argument as an end: it is "
          "a length, so any start_pos > 0 takes start_pos + T rows, too many for the T positions",
          regime="start_pos > 0 (positions already in a KV cache)"),
        # nearest: heldout apply_rope's float32 tables left uncast and default's (another cell); here q and k upcast
        # before rotating, as Meta's reference does, and never cast back
        M("rotary_attention", "q = apply_rope(q, cos, sin, start_pos)  # position enters the scores only\n"
          "    k = apply_rope(k, cos, sin, start_pos)",
          "q = apply_rope(q.float(), cos, sin, start_pos)  # rotate in float32, as Meta's reference does\n"
          "    k = apply_rope(k.float(), cos, sin, start_pos)",
          DTYPE + ("type_as", "mixed"),
          "rotates q and k in float32, as Meta's reference code does, but leaves out its type_as: the float32 "
          "scores meet half-precision values, and the attention raises or returns float32",
          regime=HALF),
    ],
    "05": [
        # nearest: offlist causal_attention's softmax in float32 never cast back (another notebook); here SwiGLU's
        # gate computed in float32
        M("swiglu", "gate = F.silu(x @ w_gate.T)", "gate = F.silu((x @ w_gate.T).float())  # SiLU in float32 for precision",
          DTYPE + ("gate", "mixed"),
          "upcasts the gate's pre-activation to float32 for the SiLU and never casts back: gate * up is float32, "
          "and the product with a half-precision w_down raises",
          regime=HALF),
        # nearest: offlist swiglu_hidden truncating and adding one, default rounding down; here Meta's reference, which
        # truncates 8/3 · d_model first and then rounds up
        M("swiglu_hidden", "return multiple * math.ceil(8 * d_model / 3 / multiple)",
          "hidden = int(8 * d_model / 3)  # Meta's reference: int(2 * 4d / 3)\n"
          "    return multiple * ((hidden + multiple - 1) // multiple)",
          ("int", "truncat", "round up", "ceil", "multiple", "8/3"),
          "copies Meta's int(2 · 4d / 3), which truncates before rounding up: exact for a multiple of 32, one short "
          "when the multiple is 1 (or 2) and 8/3 · d_model has a fraction",
          regime="a small multiple (1 or 2)"),
        # nearest: default and heldout Attention calling SDPA with is_causal (top-left) under a cache; here no mask at
        # all whenever a cache is passed
        M("Transformer", "y = causal_attention(q, k, v)                                       # (B, nh, T, hd)",
          "y = causal_attention(q, k, v) if cache is None else F.scaled_dot_product_attention(q, k, v)  # one new query may see every key",
          ("mask", "causal", "prefill", "future", "cache"),
          "drops the causal mask whenever a cache is passed, reasoning that a one-token step may see every key: the "
          "prefill also runs through the cache, and its tokens then see the future",
          regime="a prompt prefilled through the KV cache"),
        # nearest: fresh param_counts forgetting the final norm, fresh5 counting a bias per norm; here one norm per block,
        # as a parallel (GPT-J) block has
        M("param_counts", '"norms": (2 * L + 1) * d,', '"norms": (L + 1) * d,',
          ("norms", "attn_norm", "mlp_norm", "two", "per block", "rmsnorm"),
          "counts one norm per block, as a parallel block has: a Llama block normalises before attention and again "
          "before the MLP, two gains of d_model each"),
        # nearest: fresh3 sizing k and v with n_heads, fresh5 head_dim from n_kv_heads; here the group size
        # n_heads / n_kv_heads taken for the number of kv heads
        M("param_counts", "k_and_v = 2 * d * config.n_kv_heads * hd",
          "k_and_v = 2 * d * (config.n_heads // config.n_kv_heads) * hd  # the heads that share a key",
          ("n_kv_heads", "group", "n_rep", "kv heads", "k_proj", "v_proj", "gqa"),
          "sizes k_proj and v_proj by the group size n_heads / n_kv_heads, the queries that share each kv head, "
          "instead of the number of kv heads: MHA gets one head's worth"),
    ],
    "06": [
        # nearest: fresh2 counting the keys only, fresh3 sizing positions by d_model; here the queries cached as well
        M("kv_cache_bytes", "per_position = 2 * config.n_layers * config.n_kv_heads * config.head_dim",
          "per_position = config.n_layers * (config.n_heads + 2 * config.n_kv_heads) * config.head_dim  # Q, K and V",
          ("queries", "query", "q", "only keys and values", "k and v", "twice"),
          "caches the queries too, a 'QKV cache': a past query is never used again, only the keys and values are "
          "kept"),
        # nearest: default gqa_attention scaling by 1/head_dim, default causal_attention multiplying by sqrt(head_dim)
        # (other notebooks); here SDPA's scale given the divisor sqrt(head_dim)
        M("attention_step", "F.scaled_dot_product_attention(q, k_all, v_all, attn_mask=mask)",
          "F.scaled_dot_product_attention(q, k_all, v_all, attn_mask=mask, scale=attn.head_dim ** 0.5)",
          ("scale", "sqrt", "1/sqrt", "head_dim", "multipl", "divis"),
          "passes scale=sqrt(head_dim), reading 'scaled by sqrt(d_k)' as the divisor: SDPA multiplies the scores by "
          "scale, so they are sharpened by head_dim instead of normalised"),
        # nearest: fresh2 generate_greedy slicing -1:, unseen taking the first position; here squeeze(1), which drops
        # the position axis only when there is one position
        M("generate_greedy", "logits = model(step_input, cache=cache)[:, -1]", "logits = model(step_input, cache=cache).squeeze(1)",
          SHAPE + ("squeeze", "last position", "prefill", "[:, -1]"),
          "takes the step's logits with squeeze(1), as for a one-token step: after the prefill of a longer prompt "
          "the (B, T, V) logits stay whole, and the concatenation raises"),
    ],
    "07": [
        # nearest: fresh repeat_kv's view, default's tiling; here the result preallocated with torch.zeros (float32, on
        # the CPU) and filled head by head, NumPy style
        M("repeat_kv", "x = x[:, :, None].expand(B, n_kv, n_rep, T, hd)  # (B, n_kv, n_rep, T, hd): a view, copies of "
          "each kv head side by side",
          "out = torch.zeros(B, n_kv * n_rep, T, hd)  # preallocated, then filled as with np.zeros\n"
          "    for h in range(n_kv * n_rep):\n"
          "        out[:, h] = x[:, h // n_rep]\n"
          "    x = out",
          DTYPE + ("device", "torch.zeros", "zeros", "cpu"),
          "preallocates the result with torch.zeros, as with np.zeros, and fills it head by head: torch.zeros is "
          "float32 on the CPU, so bfloat16 keys come back float32 (and GPU keys on the CPU)",
          regime="keys in another dtype than float32, or on a GPU"),
        # nearest: fresh4 param_counts' learned position embedding (another notebook); here the RoPE cos and sin
        # tables, buffers, counted as weights read every step
        M("decode_bytes_per_token", "weights = (matrices + L * per_block + d) * size",
          "weights = (matrices + L * per_block + d + 2 * config.max_seq_len * hd) * size  # + the RoPE cos and sin tables",
          ("rope", "cos", "sin", "buffer", "parameter", "max_seq_len", "tables"),
          "counts the RoPE cos and sin tables, max_seq_len × head_dim each, as weights a step reads: they are "
          "buffers rebuilt from the config, not parameters, and a step uses one row of each"),
        # nearest: fresh2 leaving out the blocks' two norm gains; here the final norm's gain, before the head
        M("decode_bytes_per_token", "weights = (matrices + L * per_block + d) * size",
          "weights = (matrices + L * per_block) * size",
          ("final norm", "norm", "gain", "d_model", "last"),
          "counts the blocks' norms but forgets the final norm before the head: its d_model gain is read every "
          "step too"),
    ],
    "08": [
        # nearest: default top_k_filter along the batch axis, fresh2's [:, -1:]; here a guard that clamps k by the
        # batch size instead of the vocabulary size
        M("top_k_filter", "kth = logits.topk(k, dim=-1).values[..., -1:]",
          "k = min(k, logits.size(0))  # never more than there are, as Hugging Face guards\n"
          "    kth = logits.topk(k, dim=-1).values[..., -1:]",
          ("size(0)", "size(-1)", "vocab", "batch", "clamp", "min(k", "axis"),
          "copies Hugging Face's guard min(top_k, size(-1)) with size(0): k is clamped to the batch size, so a "
          "batch of one prompt keeps its argmax only"),
        # nearest: offlist sample_next's exp(logits), default causal_attention's softmax without the maximum (other
        # cells); here the nucleus' probabilities written from the softmax formula
        M("top_p_filter", "probs = sorted_logits.softmax(dim=-1)",
          "probs = sorted_logits.exp() / sorted_logits.exp().sum(dim=-1, keepdim=True)  # softmax",
          OVERFLOW,
          "writes the softmax as exp / sum exp without subtracting the maximum: a logit above about 88 overflows to "
          "inf, inf / inf is nan, and the nucleus is lost",
          regime="logits above about 88 (sharp distributions, low temperatures)"),
        # nearest: default sample_next never applying top-p, fresh4's elif; here Hugging Face's `top_p < 1.0` guard,
        # which compares None with a number
        M("sample_next", "if top_p is not None:", "if top_p < 1.0:  # top_p = 1 keeps everything",
          ("none", "typeerror", "top_p", "default", "is not none", "compare"),
          "guards the nucleus with top_p < 1.0, as Hugging Face's warper list does: the default top_p is None, and "
          "None < 1.0 raises"),
        # nearest: fresh2 generate's inference_mode, default recording gradients; here torch.set_grad_enabled(False),
        # which stays off after generate returns. It switches autograd off for the whole process: whatever runs
        # several mutations in one process has to switch it back on after this one, or later mutations run without it
        M("generate", "        with torch.no_grad():\n"
          "            for _ in range(max_new_tokens):\n"
          "                logits = model(idx)[:, -1]                  # (B, V): the last position predicts the next token\n"
          "                next_id = sample_next(logits, temperature, top_k, top_p, generator)  # (B,)\n"
          "                idx = torch.cat((idx, next_id[:, None]), dim=1)                      # (B, T + 1)\n",
          "        torch.set_grad_enabled(False)                       # no graph while generating\n"
          "        for _ in range(max_new_tokens):\n"
          "            logits = model(idx)[:, -1]\n"
          "            next_id = sample_next(logits, temperature, top_k, top_p, generator)\n"
          "            idx = torch.cat((idx, next_id[:, None]), dim=1)\n",
          ("set_grad_enabled", "no_grad", "grad", "autograd", "global", "restore"),
          "switches autograd off with torch.set_grad_enabled(False) and never back on: after generate returns the "
          "whole process runs without gradients, and the next training step cannot backpropagate"),
    ],
    "09": [
        # nearest: fresh5 get_batch passing randint's size as an int (NumPy's randint); here NumPy's .size attribute
        M("get_batch", "torch.randint(len(data) - seq_len,", "torch.randint(data.size - seq_len,",
          ("size", "size()", "method", "len(data)", "numel", "attribute"),
          "reads the data's length as data.size, NumPy's attribute: on a tensor size is a method, and the "
          "subtraction raises"),
        # nearest: offlist lm_loss's log of the softmax (underflow), fresh's log_softmax and gather (padding); here the
        # log-sum-exp written from the formula, without the maximum
        M("lm_loss", "return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)",
          "scored = targets != -100\n"
          "    picked = logits.gather(-1, targets.clamp(min=0)[..., None])[..., 0]  # z_y (padding reads class 0)\n"
          "    nll = logits.exp().sum(dim=-1).log() - picked                          # log sum exp z - z_y\n"
          "    return nll[scored].mean()",
          OVERFLOW,
          "writes the NLL as log Σ exp z - z_y from the formula, without subtracting the maximum: once a logit "
          "passes about 88, exp overflows and the loss is inf",
          regime="logits above about 88"),
        # nearest: fresh3's cos(π p / 2) and offlist's dropped 1/2; here a linear decay, Hugging Face's
        # get_linear_schedule_with_warmup
        M("lr_schedule", "return min_lr + 0.5 * (1 + math.cos(math.pi * min(progress, 1.0))) * (max_lr - min_lr)",
          "return min_lr + (1 - min(progress, 1.0)) * (max_lr - min_lr)  # decay to min_lr",
          ("cosine", "cos", "linear", "decay", "schedule", "shape"),
          "decays linearly from max_lr to min_lr, as Hugging Face's linear schedule does: the ends and the middle "
          "agree with the cosine, every other step does not"),
        # nearest: default train_step calling an lm_loss that sums; here the mean loss divided by the batch size
        # again, as gradient accumulation code divides by its steps
        M("train_step", "loss = lm_loss(model(x), y)                  # (B, T, V) logits -> scalar",
          "loss = lm_loss(model(x), y) / x.shape[0]     # per sequence of the batch",
          ("batch size", "mean", "divide", "scale", "loss", "already"),
          "divides the loss by the batch size, as accumulation code divides by its steps: lm_loss already "
          "averages over every token, so the gradients and the reported loss are B times too small"),
        # nearest: default train_step without model.train(); here it is called after the forward pass
        M("train_step", "model.train()                                # dropout on, whatever mode the caller left\n"
          "    loss = lm_loss(model(x), y)                  # (B, T, V) logits -> scalar",
          "loss = lm_loss(model(x), y)                  # (B, T, V) logits -> scalar\n"
          "    model.train()                                # dropout on for the update",
          ("train mode", "model.train()", "eval", "order", "dropout", "forward", "mode"),
          "calls model.train() after the forward pass: a model handed over in eval mode (after an evaluation) "
          "computes its loss without dropout",
          regime="a model handed over in eval mode"),
        # nearest: fresh2 counting the forward pass only; here the backward pass costed as one more forward
        M("train_step_costs", '"flops": 6 * matmul_weights * tokens + 3 * attention_matmuls,',
          '"flops": 4 * matmul_weights * tokens + 2 * attention_matmuls,  # backward = forward',
          ("backward", "twice", "2x", "6", "forward", "input and weight"),
          "costs the backward pass as one more forward: it takes two matmuls per forward matmul (the gradient "
          "for the input and for the weight), so a step is 3 forwards, not 2"),
    ],
    "10": [
        # nearest: heldout's in-place updates (other notebooks), fresh5 passing ignore_index positionally; here the
        # padding targets overwritten with a valid class in the caller's tensor
        M("nll_sum_and_count", "nll = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=ignore_index,\n"
          "                          reduction=\"sum\")",
          "scored = targets != ignore_index\n"
          "    targets[~scored] = 0                                         # padding made a valid class, masked below\n"
          "    nll = (F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), reduction=\"none\")\n"
          "           * scored.flatten()).sum()",
          ("in place", "in-place", "targets", "modif", "caller", "overwrit", "clone"),
          "masks the padding by writing class 0 into it, as Hugging Face's labels[labels == -100] = pad_id does, "
          "in the caller's targets: the sum is right, but the batch handed in has lost its padding"),
        # nearest: default evaluate dividing by the number of batches, unseen's mean of batch perplexities; here the
        # classification tutorial's total += labels.size(0), sequences for tokens
        M("evaluate", "total, count = total + s, count + n ", "total, count = total + s, count + y.size(0) ",
          ("tokens", "sequences", "count", "per token", "size(0)", "batch"),
          "counts y.size(0), the sequences, as the classification tutorial's total += labels.size(0): the loss "
          "becomes the NLL per sequence, T times the NLL per token"),
        # nearest: default evaluate recording gradients, unseen without no_grad; here the parameters frozen for good
        M("evaluate", "    model.eval()                                             # dropout off while measuring",
          "    model.eval()\n    model.requires_grad_(False)                              # no gradients while measuring",
          ("requires_grad", "frozen", "freeze", "no_grad", "trainable", "parameters"),
          "switches gradients off with model.requires_grad_(False) instead of a no_grad block: the flag stays on "
          "the parameters, so after the evaluation the model no longer trains"),
        # nearest: default bigram_nll's joint normalisation and its columns; here a softmax over the smoothed counts
        M("bigram_nll", "probs = (counts + alpha) / (counts.sum(dim=1, keepdim=True) + 256 * alpha)",
          "probs = (counts + alpha).softmax(dim=1)  # normalise each row",
          ("softmax", "exp", "normalis", "counts", "divide", "proportion"),
          "normalises each row of counts with a softmax, the network habit: that exponentiates the counts, so the "
          "most frequent next byte takes almost all the mass instead of its share of the row"),
    ],
}
