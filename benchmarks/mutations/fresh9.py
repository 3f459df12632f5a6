"""A twelfth held-out set of learner mistakes ("fresh9"), 34 of them, none
of which is in the project's other mutation lists (nbNN.py, heldout.py,
unseen.py, offlist.py, fresh.py to fresh8.py): fresh8.py was read whole and
every other list entry by entry, as a table of each entry's cell, the start
of its new text and the start of its reason printed from the modules (and
the docstrings of fresh6.py and fresh7.py), so that each mistake here is a
different idea for its cell, and the themes of fresh6's, fresh7's and
fresh8's docstrings were left alone. The mistakes were written from the
reference answers of the solution notebooks (their answer cells, printed
through notebook_cells as verify_unseen.py loads them), tinylm (its
config), benchmarks/verify_heldout.py, verify_unseen.py and the other
mutation lists only. The checks (autograder/checks/), their tests
(tests/checks/), the diagnostics benchmark's source
(benchmarks/bench_diagnostics.py, imported but not opened),
docs/benchmarks.md and the notebooks' authoring sources were not read
(printing the start of notebook 02's setup cell through notebook_cells
showed its import line, which names the check functions that notebook
imports, nothing of their code), and no mistake was tried against a check
before the set was first measured. Not part of the default run:
`python benchmarks/bench_diagnostics.py --set fresh9`.

Each mistake is one substitution in one answer cell's solution, written the
way a learner gets it wrong when working from the prose, from NumPy, from
another library's habits or from the paper's notation: four for every
notebook but 06, 07 and 08, two each (the other lists had already mined
their cells nearly dry; the set was written against a deadline, and no idea
was forced into them to make up the count of 40 that was aimed at):

- NumPy and Python habits: np.take(weight, ids, axis=0) written as
  torch.take (no axis: one number per id), np.roll without an axis (torch's
  roll then rolls the flattened tensor), NumPy's float64 for a gain,
  `temperature or 1.0` for a default (0 is falsy), an ascending sort read
  from the end with [-k:-k + 1] (empty for k = 1), the docstring's inclusive
  range start_pos .. start_pos + T - 1 written as a slice's end, a
  parenthesis closed before + eps, a training text trimmed twice.
- Library habits and API readings: an embedding as F.linear on one-hots
  (F.linear wants [out, in]), the logits flattened for cross_entropy inside
  the head, nn.Parameter around a Parameter when tying, is_causal=True
  passed with the mask (SDPA then ignores the mask), Mistral's rolling
  cache, gradient normalisation for clipping (no min(1, .)), the loss per
  sequence of seq2seq tutorials, torch.logspace for the frequencies (its
  end point included), RoPE under no_grad because it has no parameters.
- Maths read differently: sqrt(d_model) for sqrt(d_k), the heads averaged,
  the paper's d_k = 64 written in, Swish applied to the product of the
  branches, 8/3 as 2.67, the MLP fed the attention branch instead of the
  stream, eps added to the variance and again under the root, the lookup
  costed as a one-hot matmul, a bias counted in bias-free projections, the
  weights read once per position of the context, a mask with one head per
  kv head, q and o sized by n_kv_heads, padding taken to be any negative id,
  alpha for every cell of the bigram table, the decay's length taken as the
  whole run, the token count of the last batch only.
- Dtype: the mean square cast back to float16 before the rsqrt.

The entries with a `regime` are right in the default situation and wrong
only there (tokens whose mean square is near eps, float16 entries above
about 256, a caller's large eps, training, a multiple already reached by
8/3 · d_model, GQA or MQA, a cache that already holds positions,
temperature 0, k = 1, a gradient below grad_clip, an ignore_index of 0,
more than one batch).

The comment above each entry names the nearest entry of the other lists and
how this one differs. `benchmarks/verify_unseen.py --set fresh9` proves each
one a real bug against tinylm, PyTorch built-ins or closed forms.
"""
from __future__ import annotations

from .unseen import Unseen as M

SHAPE = ("shape", "axis", "broadcast")
DTYPE = ("dtype", "float32", "bfloat16", "half", "precision", "cast")

MUTATIONS = {
    "01": [
        # nearest: fresh3's torch.gather(weight, 0, ids), fresh2's index_select; here NumPy's np.take(weight, ids, axis=0)
        # written as torch.take, which has no axis and reads the table as one flat vector
        M("embed", "return weight[ids]",
          "return torch.take(weight, ids)  # np.take(weight, ids, axis=0): the rows of the ids",
          SHAPE + ("take", "flat", "rows", "element", "(..., d)", "row"),
          "looks the rows up with torch.take, NumPy's np.take without its axis=0: torch.take has no axis, it reads "
          "the table as one flat vector, so each id picks one number (entry id of the flattened table), not a row, "
          "and the result has the ids' shape, not (..., d)"),
        # nearest: fresh4's F.linear(x, weight.T) in the head (tied_logits), offlist's torch.mm; here the one-hot sent
        # through F.linear with the table as it is, as if the embedding were a bias-free linear layer on one-hots
        M("one_hot_embed", "return one_hot @ weight  # (..., V) @ (V, d) -> (..., d)",
          "return F.linear(one_hot, weight)  # an embedding is a linear layer applied to one-hot vectors",
          SHAPE + ("f.linear", "transpose", "linear", "[v, d]", "(v, d)", "layout"),
          "computes the product as F.linear(one_hot, weight), reading 'an embedding is a linear layer on one-hot "
          "vectors' literally: F.linear multiplies by weight.T and wants an [out, in] = [d, V] matrix, so the "
          "[V, d] table does not fit (it raises unless V = d, and then it is the transposed table)"),
        # nearest: fresh3 Transformer's nanoGPT x[:, [-1]], fresh8's last-position head; here every position kept, but
        # flattened to (B·T, V) for cross_entropy inside the head
        M("tied_logits", "return x @ weight.T",
          "return x.flatten(0, 1) @ weight.T  # (B·T, V), the layout cross_entropy takes",
          SHAPE + ("(b, t, v)", "flatten", "(b*t", "(b·t", "positions"),
          "flattens batch and positions inside the head, so the logits come out (B·T, V), the layout "
          "F.cross_entropy takes: the head must return (B, T, V); the flattening belongs to the loss"),
        # nearest: default's nn.Parameter(tok_emb.weight.detach().clone()) (a copy), default's .data sharing; here the
        # embedding's Parameter wrapped in a new nn.Parameter, which shares the storage but is another Parameter
        M("tie_weights", "lm_head.weight = tok_emb.weight",
          "lm_head.weight = nn.Parameter(tok_emb.weight)  # a Parameter, as nn.Module assignment requires",
          ("same parameter", "same object", "is not", "two parameters", "distinct", "nn.parameter", "copy", "tie"),
          "wraps the embedding's weight in nn.Parameter(...) before assigning it: nn.Parameter makes a new "
          "Parameter that shares the storage, so the head is no longer the embedding's Parameter object, the "
          "model holds two Parameters, each gets its own gradient and optimizer state, and the two drift apart "
          "at the first step"),
    ],
    "02": [
        # nearest: default's eps after the square root (1 / (RMS + eps)), fresh8's eps on the sum; here a parenthesis
        # slip that adds eps to 1/RMS, after the rsqrt
        M("rms_norm", "inv_rms = torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)",
          "inv_rms = torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True)) + eps",
          ("eps", "epsilon", "inside", "rsqrt", "parenthes", "zero", "inf", "small"),
          "closes the rsqrt's parenthesis before + eps: eps is added to 1/RMS instead of to the mean square, so it "
          "no longer keeps the statistic away from zero (an all-zero token gives inf·0 = nan) and a token whose "
          "mean square is near eps is scaled by 1/RMS alone",
          regime="tokens whose mean square is near or below eps"),
        # nearest: default squaring half-precision values (x32 = x), unseen's statistic in the input's precision; here
        # the squares taken in float32, but their mean cast back to the input's dtype before the rsqrt
        M("rms_norm", "inv_rms = torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)",
          "inv_rms = torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True).to(x.dtype) + eps)  # back to the model's dtype",
          DTYPE + ("overflow", "float16", "fp16", "inf", "65504"),
          "squares in float32 but casts the mean square back to the input's dtype at once, to keep the model's "
          "dtype: float16 holds at most 65504, so a token of entries around 400 (mean square 160 000) becomes inf "
          "and is normalised to zeros",
          regime="float16 input with entries above about 256"),
        # nearest: default squaring eps, fresh2's LayerNorm 1e-5 hard-coded; here eps added to the variance and again
        # inside the rsqrt
        M("layer_norm", "var = centred.pow(2).mean(dim=-1, keepdim=True)         # (..., 1): biased, divides by d",
          "var = centred.pow(2).mean(dim=-1, keepdim=True) + eps   # no division by zero",
          ("eps", "epsilon", "twice", "2 * eps", "2·eps", "variance"),
          "adds eps to the variance when computing it, and the normalisation adds it again under the square root: "
          "the division is by sqrt(var + 2·eps), invisible at 1e-5 but wrong for a caller's larger eps",
          regime="a caller's eps large against the variance (eps=0.1)"),
        # nearest: fresh4's gain stored in float16, fresh7's torch.empty; here the gain made in float64, NumPy's
        # default float, which promotes every normalised token to float64
        M("RMSNorm", "self.weight = nn.Parameter(torch.ones(dim))",
          "self.weight = nn.Parameter(torch.ones(dim, dtype=torch.float64))  # np.ones(dim): double precision",
          DTYPE + ("float64", "double", "promot"),
          "creates the gain in float64, NumPy's default float (np.ones): rms_norm multiplies the float32 token by "
          "the float64 gain, so the module returns float64 for float32 input, and every layer after it meets a "
          "dtype it was not built for (a matmul with float32 weights raises)"),
    ],
    "03": [
        # nearest: fresh4's d_k = d_model / h applied to head_dim, default scaling by the sequence length; here the
        # scores divided by sqrt(d_model), the width of the whole layer, taken as H · head_dim
        M("causal_attention", "scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])",
          "scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[1] * q.shape[-1])  # sqrt(d_model)",
          ("scale", "sqrt", "head_dim", "d_model", "d_k", "heads"),
          "divides the scores by sqrt(d_model) = sqrt(n_heads · head_dim), the model's width: the scale is "
          "1/sqrt(d_k), the width of one head's queries, so the scores are sqrt(n_heads) times too small and the "
          "softmax too flat (right only for a single head)"),
        # nearest: default forgetting the output projection, fresh's residual inside the layer; here the heads'
        # outputs averaged, reading multi-head attention as an ensemble of heads
        M("self_attention", "F.linear(merge_heads(y), w_o)",
          "F.linear(merge_heads(y), w_o) / n_heads  # the average over the heads",
          ("average", "n_heads", "concat", "heads", "scale", "divid"),
          "divides the projected output by n_heads, taking multi-head attention for an average of its heads: the "
          "heads are concatenated and w_o mixes them, so nothing divides by their number and the layer's output "
          "is n_heads times too small"),
        # nearest: fresh2 reading n_rep as 2 (notebook 07), default hard-coding 32 (swiglu_hidden); here the paper's
        # d_k = 64 written in for the head size
        M("attention_flops", "head_dim = d // n_heads",
          "head_dim = 64  # d_k = d_v = 64, as in the paper",
          ("head_dim", "64", "d_model / n_heads", "d_model // n_heads", "hard-cod", "scores", "mix"),
          "writes the paper's d_k = 64 for the head size: head_dim is d_model / n_heads, so the scores and the mix "
          "are counted for heads of 64 whatever the layer's width (right only when d_model = 64 · n_heads)"),
        # nearest: fresh7's n - 1 additions, fresh7's untied-head bias (param_counts); here nn.Linear's default bias
        # added to every projection's count, though the layer's projections have none
        M("attention_flops", "projection = 2 * B * T * d * d              # (B·T, d) @ (d, d): 2 FLOPs per multiply-add",
          "projection = 2 * B * T * d * d + B * T * d  # (B·T, d) @ (d, d), plus nn.Linear's bias",
          ("bias", "qkv_proj", "out_proj", "projection", "matmul", "b * t * d"),
          "adds B·T·d for a bias on each projection, nn.Linear's default: the layer's projections are bias-free "
          "matmuls (w_q, w_k, w_v, w_o are bare matrices), and the exercise counts matmul FLOPs only"),
    ],
    "04": [
        # nearest: fresh5's linspace positions (end point included), fresh8's paper index i = 1 .. d/2; here the
        # frequencies from torch.logspace(0, -1, d/2, base=theta), whose end point 1/theta is included
        M("rope_cache", "theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)",
          "torch.logspace(0, -1, head_dim // 2, base=theta)  # 1 down to 1/theta, geometrically",
          ("frequenc", "exponent", "logspace", "end point", "endpoint", "1/theta", "theta", "2i/d"),
          "writes the geometric frequencies as torch.logspace(0, -1, d/2, base=theta), 1 down to 1/theta: logspace "
          "includes its end point, so the exponents step by 1/(d/2 - 1) instead of 2/d and the slowest pair turns "
          "at 1/theta instead of theta^(-(d-2)/d)"),
        # nearest: default slicing cos up to T, fresh6's narrow(start, start + T); here the docstring's inclusive range
        # start_pos .. start_pos + T - 1 written as the slice's end
        M("apply_rope", "cos = cos[start_pos:start_pos + T].to(x.dtype)  # (T, hd), broadcasts over (B, H)\n"
          "    sin = sin[start_pos:start_pos + T].to(x.dtype)",
          "cos = cos[start_pos:start_pos + T - 1].to(x.dtype)  # positions start_pos .. start_pos + T - 1\n"
          "    sin = sin[start_pos:start_pos + T - 1].to(x.dtype)",
          SHAPE + ("slice", "one short", "off by one", "inclusive", "t - 1", "rows", "start_pos"),
          "copies the docstring's positions start_pos .. start_pos + T - 1 into the slice, whose end is exclusive: "
          "the tables have T - 1 rows for T positions, so every call raises (a one-token step gets no row at all "
          "and returns an empty tensor)"),
        # nearest: fresh7's np.roll in bigram_nll (wrap-around), default's interleaved halves; here rotate_half written
        # with x.roll(half) as with np.roll, which without dims rolls the flattened tensor
        M("apply_rope", "x1, x2 = x.chunk(2, dim=-1)\n    return torch.cat((-x2, x1), dim=-1)",
          "half = x.shape[-1] // 2\n    rolled = x.roll(half)  # (x2, x1): the halves swapped, as np.roll(x, half)\n"
          "    return torch.cat((-rolled[..., :half], rolled[..., half:]), dim=-1)",
          ("roll", "dims", "flatten", "flattened", "neighbour", "previous", "rotate_half", "halves"),
          "swaps the halves with x.roll(half), as np.roll would without an axis: torch.roll without dims also rolls "
          "the flattened tensor, so the first half of each row is the second half of the row before (of the "
          "tensor's last row for the first), not of its own"),
        # nearest: fresh3 detaching the head (notebook 01), default forgetting to rotate q; here the rotation done under
        # torch.no_grad because RoPE has no parameters, which cuts the gradient to q and k
        M("rotary_attention", "q = apply_rope(q, cos, sin, start_pos)  # position enters the scores only\n"
          "    k = apply_rope(k, cos, sin, start_pos)",
          "with torch.no_grad():  # RoPE has no parameters: nothing to learn here\n"
          "        q = apply_rope(q, cos, sin, start_pos)\n"
          "        k = apply_rope(k, cos, sin, start_pos)",
          ("gradient", "no_grad", "backward", "grad", "autograd", "q_proj", "requires_grad"),
          "rotates q and k under torch.no_grad(), since RoPE has no parameters to train: the rotation is still a "
          "function of q and k, and under no_grad the rotated tensors leave the graph, so no gradient reaches q, "
          "k or the projections that made them",
          regime="training (q and k that require grad)"),
    ],
    "05": [
        # nearest: default's SiLU on both branches, default's SiLU on the output; here Swish applied to the product of
        # the two branches, reading Swish(xW ⊗ xV) into the paper's Swish(xW) ⊗ xV
        M("swiglu", "gate = F.silu(x @ w_gate.T)  # (B, T, d_ff): the nonlinearity lives on the gate only\n"
          "    up = x @ w_up.T              # (B, T, d_ff): linear\n"
          "    return (gate * up) @ w_down.T  # (B, T, d)",
          "return F.silu((x @ w_gate.T) * (x @ w_up.T)) @ w_down.T  # Swish(xW ⊗ xV) W2",
          ("silu", "gate", "product", "swish", "branch", "up"),
          "applies Swish to the product of the two branches, Swish(xW ⊗ xV): the paper's SwiGLU is Swish(xW) ⊗ xV, "
          "the nonlinearity on the gate alone, the up branch linear"),
        # nearest: unseen's 8 // 3, fresh6's Meta int(8d/3); here 8/3 rounded to 2.67 before the rounding up
        M("swiglu_hidden", "return multiple * math.ceil(8 * d_model / 3 / multiple)",
          "return multiple * math.ceil(2.67 * d_model / multiple)  # 8/3 ≈ 2.67",
          ("8/3", "2.67", "8 / 3", "round", "multiple", "exact"),
          "writes 8/3 as 2.67: 2.67 · d_model is slightly more than 8/3 · d_model, so a size that already is a "
          "multiple (8/3 · 12 = 32) is rounded up to the next one (64), and large widths can cross a multiple",
          regime="8/3 · d_model already a multiple of `multiple`"),
        # nearest: unseen's parallel block, fresh3 adding the MLP to x; here the MLP reads the attention branch's output
        # instead of the stream
        M("pre_norm_block", "x = x + attn(attn_norm(x))  # the branch reads a normalised copy; the stream stays a sum\n"
          "    x = x + mlp(mlp_norm(x))    # the MLP reads the stream after attention has written to it",
          "a = attn(attn_norm(x))\n    x = x + a + mlp(mlp_norm(a))  # the MLP refines what attention found",
          ("stream", "residual", "mlp", "attention output", "branch", "x + attn"),
          "feeds the MLP the attention branch's output instead of the residual stream after attention: the MLP "
          "must read mlp_norm(x + attn(...)), the stream, which still carries the block's input"),
        # nearest: fresh3 sizing k and v with n_heads, fresh8's one shared k/v head; here the q and o projections sized
        # by n_kv_heads, copied from the k and v line
        M("param_counts", "q_and_o = 2 * d * config.n_heads * hd",
          "q_and_o = 2 * d * config.n_kv_heads * hd",
          ("n_heads", "n_kv_heads", "q_proj", "o_proj", "query heads", "gqa"),
          "sizes q_proj and o_proj with n_kv_heads, as for k and v: the queries (and the output projection) have "
          "all n_heads heads, only the keys and values are shared, so a GQA model's attention is under-counted",
          regime="n_kv_heads < n_heads (GQA or MQA)"),
    ],
    "06": [
        # nearest: fresh7's positions capped at max_seq_len (kv_cache_bytes), fresh's past dropped; here a rolling cache
        # of fixed length, Mistral's sliding window: the oldest positions leave as new ones come
        M("cache_update", "k_all = torch.cat((past_k, k), dim=2)  # positions are axis 2: the past first, then the new tokens\n"
          "    v_all = torch.cat((past_v, v), dim=2)",
          "k_all = torch.cat((past_k, k), dim=2)[:, :, -past_k.shape[2]:]  # the cache keeps its length\n"
          "    v_all = torch.cat((past_v, v), dim=2)[:, :, -past_v.shape[2]:]",
          SHAPE + ("t_past + t_new", "grow", "oldest", "window", "drop", "positions", "length"),
          "keeps the cache at its length, dropping the oldest positions as new ones come (a rolling buffer, "
          "Mistral's sliding window): the result must hold T_past + T_new positions; only the prefill, into an "
          "empty cache ([-0:] keeps everything), is right",
          regime="a cache that already holds positions"),
        # nearest: fresh8's is_causal = T > 1 without a mask, heldout's is_causal=True in the model; here is_causal=True
        # passed as well as the bottom-right mask, to be safe: SDPA then applies its top-left causal mask and ignores
        # the caller's
        M("attention_step", "y = F.scaled_dot_product_attention(q, k_all, v_all, attn_mask=mask)    # (B, nh, T, hd)",
          "y = F.scaled_dot_product_attention(q, k_all, v_all, attn_mask=mask, is_causal=True)  # mask and causal, to be safe",
          ("is_causal", "top-left", "bottom-right", "mask", "cached", "offset", "ignored"),
          "passes is_causal=True as well as the bottom-right mask, to be safe: with both, SDPA applies its own "
          "top-left causal mask and the caller's is not used, so after a prefill each new query sees only the first "
          "keys (a one-token step sees position 0 alone); only the prefill is right",
          regime="a step after a prefill (a cache that already holds positions)"),
    ],
    "07": [
        # nearest: heldout's float mask in gqa_step, fresh5's square mask; here the mask given a head axis of n_kv_heads,
        # one per cached kv head, which does not broadcast over the n_heads query heads
        M("gqa_step", "mask = tinylm.causal_mask(T, start + T).to(x.device)  # (T, start + T)",
          "mask = tinylm.causal_mask(T, start + T).to(x.device).expand(B, attn.n_kv_heads, T, start + T)  # one per kv head",
          SHAPE + ("n_kv", "kv head", "mask", "n_heads", "query heads"),
          "gives the mask a head axis of n_kv_heads, one per cached kv head: the scores have n_heads heads after "
          "repeat_kv, so the mask broadcasts for MHA (n_kv = n_heads) and MQA (1) only, and GQA proper raises",
          regime="GQA proper (1 < n_kv_heads < n_heads)"),
        # nearest: fresh2's cache read sized by max_seq_len, fresh5's weights at 4 bytes; here the weights counted once
        # for every position of the context, as if a step re-ran the whole sequence
        M("decode_bytes_per_token", "weights = (matrices + L * per_block + d) * size                           # + the final norm",
          "weights = (matrices + L * per_block + d) * size * context_len  # once for every position attended",
          ("weights", "once", "context_len", "per step", "position", "cache"),
          "counts the weights once for every position of the context: a decoding step runs one new token through "
          "the model and reads every parameter once, whatever the context (the context's cost is the KV cache "
          "it reads)"),
    ],
    "08": [
        # nearest: fresh7's greedy unless a filter is set, default dropping temperature; here Python's `or` for a
        # default, which turns temperature 0 (greedy) into 1
        M("generate", "next_id = sample_next(logits, temperature, top_k, top_p, generator)  # (B,)",
          "next_id = sample_next(logits, temperature or 1.0, top_k, top_p, generator)  # None: the default 1.0",
          ("temperature", "greedy", "argmax", "0", "or 1.0", "falsy", "sampl"),
          "fills in a default temperature with `temperature or 1.0`: 0 is falsy, so temperature 0, greedy decoding, "
          "becomes sampling at temperature 1",
          regime="temperature 0 (greedy decoding)"),
        # nearest: default's sort(descending)[k:k + 1] (the (k+1)-th), fresh2's kthvalue; here an ascending sort read
        # from the end with [-k:-k + 1], which is empty for k = 1
        M("top_k_filter", "logits.topk(k, dim=-1).values[..., -1:]",
          "logits.sort(dim=-1).values[..., -k:-k + 1]",
          SHAPE + ("k = 1", "top_k=1", "empty", "slice", "-k + 1", "greedy"),
          "takes the k-th largest from an ascending sort as [..., -k:-k + 1]: right for k >= 2, but for k = 1 the "
          "slice -1:0 is empty, so top-1 filtering (greedy through the sampler) raises",
          regime="k = 1"),
    ],
    "09": [
        # nearest: default summing the loss, fresh6 dividing by the batch size in train_step; here the loss per
        # sequence, summed over the positions and averaged over the batch, as seq2seq tutorials do
        M("lm_loss", "return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)",
          'return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100, reduction="sum") '
          "/ logits.shape[0]  # per sequence",
          ("mean", "per token", "sum", "per sequence", "batch", "seq_len", "scale"),
          "sums the NLL over each sequence and averages over the batch, the loss per sequence of seq2seq "
          "tutorials: the exercise's loss is the mean over the real targets, so this one is T times larger (and "
          "depends on the padding)"),
        # nearest: default decaying one step too long, fresh2 measuring the progress from step 0; here the decay's
        # length taken as the whole run, total_steps - 1, warmup included
        M("lr_schedule", "max(1, total_steps - 1 - warmup_steps)",
          "max(1, total_steps - 1)",
          ("progress", "warmup", "total_steps", "decay", "min_lr", "end"),
          "divides the decay's progress by total_steps - 1, the whole run, instead of the steps after the warmup: "
          "the progress never reaches 1, so the last step's rate stays above min_lr"),
        # nearest: fresh's clip_grad_value_, offlist clipping each parameter alone; here clipping by hand without the
        # min(1, ·), which rescales every gradient to norm grad_clip, small ones up
        M("train_step", "torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)  # global gradient norm <= grad_clip",
          "norm = torch.cat([p.grad.flatten() for p in model.parameters()]).norm()\n"
          "    for p in model.parameters():\n"
          "        p.grad.mul_(grad_clip / norm)  # scale the global norm to grad_clip",
          ("clip", "scale", "min", "norm", "below", "small", "grad_clip", "rescal"),
          "clips by hand, multiplying every gradient by grad_clip / global norm without taking min(1, ...): a "
          "gradient smaller than grad_clip is scaled up to it, so every step has the same norm (gradient "
          "normalisation, not clipping)",
          regime="a gradient whose global norm is below grad_clip"),
        # nearest: fresh2 counting no head matmul when tied, fresh4's 6·N·D with every parameter; here the embedding
        # lookup costed as notebook 01's one-hot matmul
        M("train_step_costs", '"flops": 6 * matmul_weights * tokens + 3 * attention_matmuls,',
          '"flops": 6 * (matmul_weights + V * d) * tokens + 3 * attention_matmuls,  # the lookup is one_hot @ W',
          ("lookup", "embedding", "one-hot", "matmul", "flops", "index"),
          "costs the embedding lookup as notebook 01's one-hot product, 2·V·d FLOPs a token forward: the lookup is "
          "an indexing, no matmul, and FlopCounterMode counts nothing for it"),
    ],
    "10": [
        # nearest: default hard-coding -100 in the count, fresh's count at least 1; here padding taken as any negative
        # id, so a caller's ignore_index of 0 is counted
        M("nll_sum_and_count", "count = int((targets != ignore_index).sum())",
          "count = int((targets >= 0).sum())  # padding ids are negative",
          ("ignore_index", "count", "padding", "negative", "scored"),
          "counts the targets that are not negative, taking padding to be -100: the scored targets are those "
          "different from ignore_index, so with ignore_index=0 the padded positions are counted though the sum "
          "leaves them out",
          regime="an ignore_index other than a negative number (ignore_index=0)"),
        # nearest: offlist resetting both totals inside the loop, default dividing by the number of batches; here the
        # count overwritten by each batch's while the NLL accumulates
        M("evaluate", "total, count = total + s, count + n          # combine by tokens, not by batches",
          "total, count = total + s, n",
          ("count", "tokens", "last batch", "every batch", "accumulat", "total"),
          "accumulates the summed NLL but overwrites the count with each batch's: the loss is the NLL of every "
          "batch divided by the tokens of the last one, right only for a single batch",
          regime="more than one batch"),
        # nearest: default's alpha once in the denominator, fresh8's alpha per byte seen; here alpha for every cell of
        # the 256 x 256 table in each row's denominator
        M("bigram_nll", "counts.sum(dim=1, keepdim=True) + 256 * alpha",
          "counts.sum(dim=1, keepdim=True) + 256 * 256 * alpha",
          ("256", "alpha", "denominator", "sum to 1", "smoothing", "row", "normalis", "normaliz"),
          "adds alpha once for every cell of the 256 x 256 table to each row's denominator: a row is a "
          "distribution over the 256 next bytes, each smoothed once, so the rows sum to far less than 1"),
        # nearest: fresh's average over len(val), offlist's bincount without minlength; here the training pairs
        # trimmed twice, so the last pair of the training text is never counted
        M("bigram_nll", "train[:-1] * 256 + train[1:]",
          "train[:-2] * 256 + train[1:-1]",
          ("last pair", "pair", "off by one", "count", "every pair", "trim"),
          "trims the training text twice, [:-2] and [1:-1], for 'the last byte has no next byte': [:-1] and [1:] "
          "already pair every byte with the next, so the last pair of the training text is never counted"),
    ],
}
