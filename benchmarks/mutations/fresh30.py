"""A thirtieth held-out set of learner mistakes ("fresh30"), written without reading the checks: neither
autograder/checks/ (any file), tests/checks/ (but see the slip below), autograder/diagnosis_*.py, the source of
bench_diagnostics.py, the diagnosis sections of docs/benchmarks.md nor tests/course/test_docs.py were opened; no check
cell, notebook check or bench_diagnostics run, no entry tried against a check, no git log or git show.

Opened or run. The brief, HELPER_RULES.md, mkwt.sh (cat); mkwt.sh fresh30. `ls` of /work/wt/ and its prompts/ (names),
the root, benchmarks/, benchmarks/mutations/, tinylm/; `wc -l` of the verify, duplicate and probe modules. Whole:
unseen.py, mutations/__init__.py, verify_unseen.py, verify_heldout.py, heldout_duplicates.py, unseen_probes.py,
unseen_probes_later.py, unseen_probes_fresh29.py; fresh29.py's docstring only. tinylm: def/class lines, config.py
1-80, attention.py 1-160, kv_cache.py. Through notebook_cells: all answer and setup cells, the check names only; the
markdown cells of the ten notebooks (09's in part). The probes' values on the solution (no mistake). A grep of the four
registration files for "fresh29", test_benchmarks.py 150-185. Runs: verify_unseen --set fresh30 (5), heldout_duplicates
--set fresh30 (6 or 7), the two fresh30 tests (twice). 18 searches of issue threads; 41 URLs grepped over benchmarks/mutations/.

Slips. `ls /work/wt/` showed other sessions' file names (none opened); setup imports name autograder.checks functions;
markdown cells say what some checks run. Looking for the 800-line test, `grep -rln "800" tests/` grepped tests/checks/
too (one file name printed, nothing shown); awk counted lines over 120 characters in fresh2*.py (counts only).
heldout_duplicates matched 2 of 85 entries first (cache.reset() deleted in generate_left_padded, sample_next's greedy
branch deleted), then none: both became new mistakes (an own greedy loop without the reset, the branch after the
division). Dropped for length: 3 mistakes (k blocks in meta_to_hf, gqa_step's k, layer_idx), 7 SAME.
Focus, each mistake counted once. Whole answers in the learner's own style with one slip (23, 14 of them right but
in their regime): loops over ids, batches, heads, queries and starts; einsums (one_hot, self_attention in a
(B, Tq, Tk, H) layout, swiglu); helpers inside the cell; split for chunk; a preallocated cache; F.pad routes; sort
instead of topk. Only in a regime (10): a vocabulary other than 256 (twice), the caller's tensor, a chunk after a
prefill, a batch of one, a model in train or eval mode on entry (twice), (B, T, V) logits, several micro-batches,
tied embeddings. Two slips (8): FLOPs, param_counts, kv_cache_bytes, decode bytes, sample_next, lr_schedule,
train_step_costs, bigram_nll. Modules and the whole model (5): RoPE before the transpose, RoPE tables cut to T, a
shared norm, a tie by load_state_dict, a float32 gain. Numerics (4): products in half precision, logsumexp without
the max, a bfloat16 count, exp(total) overflowing. Other (1): clip_grad_value_.
Public threads (12, URL above the entry and in its reason): kyegomez/zeta#180, pytorch/pytorch#1959 and #51102,
NeuraLegion/shainet#176, huggingface/transformers#40462, henrywoo/pyllama#83, habla-liaa/encodecmae#3,
deepspeedai/DeepSpeed#2669, google-deepmind/gemma#562, neulab/xnmt#229, yaodongyu/TRADES#32, Shark-NLP/OpenICL#26.
SAME (14): an einsum head, register_parameter, the statistic as methods, chunk + stack, FLOPs written out, q and k
rotated as one batch, integer ceiling division, bytes reordered, the prefill before the loop, repeat_kv by index,
bytes part by part, windows in a loop, F.nll_loss, one division by a product. A fifteenth, v and o_proj permuted
together, was dropped on arrival: it leaves attention unchanged, but the exercise asks for v_proj and o_proj as
given, and the check's lines on it were true.

Counts: 63 mistakes (01: 5, 02: 6, 03: 5, 04: 4, 05: 8, 06: 9, 07: 5, 08: 6, 09: 8, 10: 7), 36 with a regime, 14 SAME,
12 public threads; `expect` holds words a check that found the mistake would likely say, `in_lists` stays False.
unseen_probes_fresh30.py adds probes for layer_norm around 300, the caller's x, generate_greedy's mode."""
from __future__ import annotations

from .unseen import Unseen as M

# answer bodies that several entries replace, and learners' routes written with a placeholder for their slip
GREEDY = """\
    cache.reset()                                   # stale positions from an earlier prompt would shift everything
    idx, step_input = prompt, prompt                # prefill: the whole prompt in one pass
    with torch.no_grad():                           # decoding never backpropagates
        for _ in range(max_new_tokens):
            logits = model(step_input, cache=cache)[:, -1]      # (B, V): only the last position predicts
            next_id = logits.argmax(dim=-1, keepdim=True)       # (B, 1)
            idx = torch.cat((idx, next_id), dim=1)              # (B, T + 1)
            step_input = next_id                                # decode: one new token per step
    return idx
"""
GET_BATCH = """\
    idx = starts[:, None] + torch.arange(seq_len + 1)                                # (B, T + 1) positions
    window = data[idx].long()                                                        # (B, T + 1)
    return window[:, :-1], window[:, 1:]                                             # x, y: (B, T) each
"""
BIGRAM_MEAN = "    return -probs.log()[val[:-1], val[1:]].mean().item()\n"
MY_GREEDY = """\
    {reset}out = prompt
    with torch.no_grad():
        logits = model(prompt, cache=cache)                    # prefill
        for step in range(max_new_tokens):
            token = logits[:, -1].argmax(dim=-1, keepdim=True)  # (B, 1)
            out = torch.cat((out, token), dim=1)
            {feed}logits = model(token, cache=cache)
    return out
"""
MY_WINDOWS = """\
    xs, ys = [], []
    for s in starts.tolist():
        xs.append(data[s:s + seq_len])
        ys.append(data[s + 1:s + seq_len{end}])          # the next token of every input position
    return torch.stack(xs).long(), torch.stack(ys).long()
"""
DECODE = """\
    d, L, hd, size = config.d_model, config.n_layers, config.head_dim, dtype.itemsize
    attention = 2 * d * config.n_heads * hd + 2 * d * config.n_kv_heads * hd  # q, o; k, v with n_kv heads
    per_block = attention + 3 * d * config.d_ff + 2 * d                       # SwiGLU's three matrices, two norms
    matrices = config.vocab_size * d * (1 if config.tie_embeddings else 2)    # a tied head is the embedding
    weights = (matrices + L * per_block + d) * size                           # + the final norm
    kv_cache = 2 * L * config.n_kv_heads * hd * context_len * size            # K and V, every block
"""

MUTATIONS = {
    "01": [
        M("embed", "    return weight[ids]  # advanced indexing: one row of weight per id, gradient flows to those rows\n", """\
    flat = ids.view(-1)                                   # every id in reading order
    rows = [weight[i] for i in flat.tolist()]             # one row of the table per id
    looked_up = torch.stack(rows) if rows else weight[:0]
    return looked_up.view(*ids.shape, weight.shape[1])    # back to the ids' shape, plus d
""", ("contiguous", "view", "reshape", "non-contiguous", "stride"),
          "own loop over the ids, flattened with .view(-1): a sliced (non-contiguous) ids tensor cannot be viewed",
          regime="non-contiguous ids (a slice such as ids[:, 1:])"),
        M("one_hot_embed", """\
    one_hot = F.one_hot(ids, num_classes=weight.shape[0]).to(weight.dtype)  # (..., V)
    return one_hot @ weight  # (..., V) @ (V, d) -> (..., d)
""", """\
    vocab = weight.shape[0]
    picks = F.one_hot(ids, vocab).type_as(weight)            # (B, T, V): a single 1 per position
    return torch.einsum("btv,vd->btd", picks, weight)         # row v of weight where the 1 sits
""", ("einsum", "(t,)", "flat", "leading shape", "any shape", "1-d", "batch axis"),
          "own einsum route written for (B, T) ids only: flat ids (T,) do not fit 'btv'", regime="flat ids (T,)"),
        M("one_hot_embed", "F.one_hot(ids, num_classes=weight.shape[0])", "F.one_hot(ids, num_classes=256)",
          ("num_classes", "256", "vocabulary size", "weight.shape[0]", "rows of weight"),
          "one class per byte written as 256: right for the course's vocabulary, wrong for a table of another size",
          regime="a vocabulary other than 256"),
        M("tied_logits", "    return x @ weight.T  # (B, T, d) @ (d, V) -> (B, T, V)\n", """\
    scores = []
    for seq in x:                                  # one (T, d) sequence at a time
        scores.append(seq @ weight.T)              # (T, V): every position against every row
    return torch.stack(scores, dim=1)
""", ("shape", "stack", "dim=1", "(t, b, v)", "batch axis", "axes"),
          "own loop over the batch, stacked on axis 1: the logits come back (T, B, V)"),
        M("tie_weights", "    lm_head.weight = tok_emb.weight  # the same Parameter object, not a copy of its values\n",
          '    lm_head.load_state_dict({"weight": tok_emb.weight.detach()})  # the head now holds the embedding\'s numbers\n',
          ("same parameter", "copy", "is tok_emb.weight", "two parameters", "separate", "not tied", "load_state_dict"),
          "ties by loading the embedding's values into the head: two Parameters that drift apart once trained"),
    ],
    "02": [
        # https://github.com/kyegomez/zeta/issues/180
        M("rms_norm", """\
    x32 = x.float()  # squares of fp16 values overflow above 256
    inv_rms = torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)  # (..., 1): one statistic per token
    return weight * (x32 * inv_rms).to(x.dtype)
""", """\
    x32 = x.float()
    d = x.shape[-1]
    rms = torch.sqrt(x32.norm(dim=-2, keepdim=True).pow(2) / d + eps)   # ||x|| / sqrt(d) is the root mean square
    return weight * (x32 / rms).to(x.dtype)
""", ("dim=-2", "last axis", "wrong axis", "positions", "other tokens", "per token", "dim=-1"),
          "own route through the vector norm, taken over dim=-2 (the positions) as in "
          "https://github.com/kyegomez/zeta/issues/180"),
        M("rms_norm", "    return weight * (x32 * inv_rms).to(x.dtype)\n",
          "    return weight * (x * inv_rms.to(x.dtype))  # only the statistic needed float32\n",
          ("float32", "rounding", "half precision", "cast", "bit", "precision"),
          "multiplies in the input's precision: the statistic is rounded to float16/bfloat16 before the product",
          regime="float16 or bfloat16 input"),
        # https://github.com/pytorch/pytorch/issues/1959
        M("layer_norm", """\
    centred = x - x.mean(dim=-1, keepdim=True)              # (..., d)
    var = centred.pow(2).mean(dim=-1, keepdim=True)         # (..., 1): biased, divides by d
    return weight * centred * torch.rsqrt(var + eps) + bias
""", """\
    mean = x.mean(-1, keepdim=True)
    std = x.std(-1, keepdim=True)
    return weight * (x - mean) / (std + eps) + bias
""", ("unbiased", "d - 1", "bessel", "std", "eps", "square root", "correction"),
          "two slips, as in the LayerNorm of https://github.com/pytorch/pytorch/issues/1959: torch's unbiased std "
          "(d - 1) and eps added outside the square root"),
        # https://github.com/pytorch/pytorch/issues/51102
        M("layer_norm", """\
    centred = x - x.mean(dim=-1, keepdim=True)              # (..., d)
    var = centred.pow(2).mean(dim=-1, keepdim=True)         # (..., 1): biased, divides by d
""", """\
    d = x.shape[-1]
    mean = x.sum(dim=-1, keepdim=True) / d
    var = (x * x).sum(dim=-1, keepdim=True) / d - mean * mean   # E[x²] - E[x]², one pass
    centred = x - mean
""", ("e[x²]", "cancellation", "large mean", "shift", "300", "one pass", "digits", "precision"),
          "the one-pass variance E[x²] - E[x]²: far from 0 the two terms cancel and float32 loses the variance, "
          "as in https://github.com/pytorch/pytorch/issues/51102", regime="features with a mean far from 0"),
        # https://github.com/NeuraLegion/shainet/pull/176
        M("RMSNorm", """\
        self.weight = nn.Parameter(torch.ones(dim))  # gain starts at 1: a fresh norm only rescales
        ### END SOLUTION

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ### BEGIN SOLUTION
        return rms_norm(x, self.weight, self.eps)
""", """\
        self.weight = nn.Parameter(torch.zeros(dim))  # the gain's offset from 1, as Gemma stores it
        ### END SOLUTION

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ### BEGIN SOLUTION
        return rms_norm(x, 1 + self.weight, self.eps)
""", ("1 + weight", "offset", "ones", "zeros", "trained gain", "loaded", "convention"),
          "stores the gain as an offset from 1 (Gemma's convention): a checkpoint's gains near 1 act as near 2, "
          "the mix-up of https://github.com/NeuraLegion/shainet/pull/176", regime="a trained (loaded) gain"),
        M("RMSNorm", "        return rms_norm(x, self.weight, self.eps)\n",
          "        return rms_norm(x, self.weight.float(), self.eps)  # the gain in full precision\n",
          ("dtype", "float32", "float16", "half", "upcast"),
          "hands rms_norm a float32 gain: a half-precision module returns float32", regime="a module in float16"),
    ],
    "03": [
        M("causal_mask", """\
    allowed = torch.ones(q_len, kv_len, dtype=torch.bool)
    return allowed.tril(diagonal=kv_len - q_len)  # query i is position kv_len - q_len + i
""", """\
    allowed = torch.zeros(q_len, kv_len, dtype=torch.bool)
    for i in range(q_len):
        allowed[i, : i + 1] = True          # query i sees keys 0 .. i
    return allowed
""", ("bottom-right", "kv_len - q_len", "offset", "cached", "fewer queries", "top-left"),
          "own loop over the queries, triangle aligned top-left: right while q_len == kv_len", regime="fewer queries than keys"),
        M("split_heads", """\
    B, T, d = x.shape
    x = x.view(B, T, n_heads, d // n_heads)  # (B, T, H, hd): head h owns features h*hd .. (h+1)*hd - 1
    return x.transpose(1, 2)                 # (B, H, T, hd)
""", "    return torch.stack(x.split(n_heads, dim=-1), dim=1)   # (B, H, T, hd): one slice of features per head\n",
          ("split", "chunk", "head size", "n_heads", "number of heads", "shape"),
          "own route through split, which takes a slice size, not a count: n_heads features per head"),
        M("causal_attention", """\
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])     # (B, H, Tq, Tk)
    mask = causal_mask(q.shape[-2], k.shape[-2]).to(q.device)       # (Tq, Tk), broadcasts over (B, H)
    scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)                                 # over keys: each row sums to 1
    return weights @ v                                               # (B, H, Tq, hd)
""", """\
    B, H, Tq, hd = q.shape
    allowed = causal_mask(Tq, k.shape[-2]).to(q.device)              # (Tq, Tk)
    out = torch.zeros(B, H, Tq, hd)
    for h in range(H):
        s = q[:, h] @ k[:, h].transpose(-2, -1) / math.sqrt(hd)       # (B, Tq, Tk) for head h
        s = s.masked_fill(~allowed, float("-inf"))
        out[:, h] = s.softmax(dim=-1) @ v[:, h]
    return out
""", ("dtype", "float32", "bfloat16", "device", "zeros"),
          "own loop over the heads into torch.zeros(...): float32 on the CPU whatever q's dtype and device",
          regime="bfloat16 input"),
        M("self_attention", """\
    q, k, v = (split_heads(F.linear(x, w), n_heads) for w in (w_q, w_k, w_v))  # each (B, H, T, hd)
    y = causal_attention(q, k, v)                                              # (B, H, T, hd)
    return F.linear(merge_heads(y), w_o)                                       # (B, T, d)
""", """\
    B, T, d = x.shape
    hd = d // n_heads
    q, k, v = (torch.einsum("btd,ed->bte", x, w).view(B, T, n_heads, hd) for w in (w_q, w_k, w_v))
    scores = torch.einsum("bqhe,bkhe->bqkh", q, k) / math.sqrt(hd)    # (B, Tq, Tk, H): heads last
    future = ~causal_mask(T, T)[:, :, None]                             # (Tq, Tk, 1)
    weights = scores.masked_fill(future, float("-inf")).softmax(dim=-1)
    mixed = torch.einsum("bqkh,bkhe->bqhe", weights, v).reshape(B, T, d)
    return torch.einsum("bte,de->btd", mixed, w_o)
""", ("softmax", "dim", "keys", "heads", "nan", "axis"),
          "own einsum layout (B, Tq, Tk, H), then softmax(dim=-1) by habit: over the heads, not the keys"),
        M("attention_flops", """\
    B, T, d = batch, seq_len, d_model
    head_dim = d // n_heads
    projection = 2 * B * T * d * d              # (B·T, d) @ (d, d): 2 FLOPs per multiply-add
    per_head = 2 * T * T * head_dim             # (T, hd) @ (hd, T) for the scores; (T, T) @ (T, hd) for the mix
    return {"qkv_proj": 3 * projection, "scores": B * n_heads * per_head, "mix": B * n_heads * per_head,
            "out_proj": projection}
""", """\
    tokens = batch * seq_len
    head_dim = d_model // n_heads
    projection = tokens * d_model * d_model               # one multiply-add per weight per token
    attention = 2 * batch * seq_len * seq_len * head_dim   # q·k for every pair of positions
    return {"qkv_proj": 3 * projection, "scores": attention, "mix": attention, "out_proj": projection}
""", ("factor 2", "multiply-add", "n_heads", "every head", "per head", "2 flops"),
          "two slips: projections counted in multiply-adds (no factor 2), the scores and mix of one head only"),
    ],
    "04": [
        # https://github.com/huggingface/transformers/issues/40462
        M("rope_cache", """\
    angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float32), inv_freq)      # (T, hd/2)
    angles = torch.cat((angles, angles), dim=-1)  # (T, hd): feature i and i + hd/2 share an angle
    return angles.cos(), angles.sin()
""", """\
    positions = torch.arange(max_seq_len, dtype=torch.float32)
    freqs = torch.outer(positions, inv_freq)                     # (T, hd/2)
    emb = freqs.repeat_interleave(2, dim=-1)                     # each angle for both members of its pair
    return emb.cos(), emb.sin()
""", ("interleav", "repeat_interleave", "half", "layout", "pairs", "cat"),
          "own table code with repeat_interleave (neighbouring pairs) for tables rotate_half reads as halves, the "
          "question of https://github.com/huggingface/transformers/issues/40462"),
        # https://github.com/henrywoo/pyllama/issues/83
        M("apply_rope", "    return x * cos + rotate_half(x) * sin\n", """\
    evens, odds = x[..., 0::2], x[..., 1::2]
    turned = torch.stack((-odds, evens), dim=-1).flatten(-2)   # (-x1, x0, -x3, x2, ...): each pair a quarter turn
    return x * cos + turned * sin
""", ("rotate_half", "pairing", "neighbour", "interleav", "half", "convention", "not a rotation"),
          "turns neighbouring pairs (the paper's form, https://github.com/henrywoo/pyllama/issues/83) with tables "
          "laid out for halves: the two conventions mixed"),
        M("rotary_attention", """\
    q = apply_rope(q, cos, sin, start_pos)  # position enters the scores only
    k = apply_rope(k, cos, sin, start_pos)
""", """\
    both = apply_rope(torch.cat((q, k), dim=2), cos, sin, start_pos)   # rotate queries and keys in one call
    q, k = both.split(q.shape[2], dim=2)
""", ("positions", "axis", "dim=2", "concatenat", "offset", "start_pos", "distance"),
          "rotates q and k in one call, joined along the positions axis: the keys land T positions further on"),
        M("interleaved_to_half", """\
    rows, d_in = w.shape
    hd = rows // n_heads
    pairs = w.reshape(n_heads, hd // 2, 2, d_in)      # (nh, hd/2, 2, d_in): pair i of head h is rows 2i, 2i+1
    return pairs.transpose(1, 2).reshape(rows, d_in)  # (nh, 2, hd/2, d_in): each head's evens, then its odds
""", """\
    evens = torch.arange(0, w.shape[0], 2)            # rows 0, 2, 4, ...: first members of the pairs
    odds = torch.arange(1, w.shape[0], 2)
    return w[torch.cat((evens, odds))]                # first members, then second members
""", ("per head", "across heads", "head block", "n_heads", "one head", "each head"),
          "own index route over all rows at once: the evens of every head before any odd, not head by head",
          regime="more than one head"),
    ],
    "05": [
        M("swiglu", """\
    gate = F.silu(x @ w_gate.T)  # (B, T, d_ff): the nonlinearity lives on the gate only
    up = x @ w_up.T              # (B, T, d_ff): linear
    return (gate * up) @ w_down.T  # (B, T, d)
""", """\
    def silu(t):
        return t * torch.sigmoid(t)

    project = lambda w: torch.einsum("btd,fd->btf", x, w)        # x @ w.T
    hidden = silu(project(w_gate) * project(w_up))                # gate times up, through SiLU
    return torch.einsum("btf,df->btd", hidden, w_down)
""", ("silu", "gate", "product", "up branch", "linear", "nonlinearity"),
          "own helper and einsums, SiLU applied to the product of both branches instead of to the gate alone"),
        M("swiglu_hidden", "    return multiple * math.ceil(8 * d_model / 3 / multiple)\n", """\
    hidden = int(8 * d_model / 3)                 # 8/3 of the width
    if hidden % multiple:
        hidden += multiple - hidden % multiple    # up to the next multiple
    return hidden
""", ("round", "int(", "truncat", "fraction", "ceil", "multiple"),
          "own rounding after int(): the fraction of 8/3 · d_model is dropped, so a multiple of 1 or 2 rounds down",
          regime="a multiple of 1 or 2"),
        M("pre_norm_block", """\
    x = x + attn(attn_norm(x))  # the branch reads a normalised copy; the stream stays a sum
    x = x + mlp(mlp_norm(x))    # the MLP reads the stream after attention has written to it
""", """\
    x += attn(attn_norm(x))     # add the attention branch to the stream
    x += mlp(mlp_norm(x))
""", ("in place", "in-place", "+=", "caller", "modif", "input"),
          "adds the branches in place: the caller's tensor is overwritten with the block's output",
          regime="the caller's tensor after the call"),
        M("Transformer", """\
        q = self.q_proj(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)     # (B, nh, T, hd)
        k = self.k_proj(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)  # (B, n_kv, T, hd)
        v = self.v_proj(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)  # (B, n_kv, T, hd)
        q, k = apply_rope(q, cos, sin, start_pos), apply_rope(k, cos, sin, start_pos)  # position: q and k only
""", """\
        def heads(t, n):                       # (B, T, n·hd) -> (B, T, n, hd)
            return t.view(B, T, n, self.head_dim)

        q = apply_rope(heads(self.q_proj(x), self.n_heads), cos, sin, start_pos).transpose(1, 2)
        k = apply_rope(heads(self.k_proj(x), self.n_kv_heads), cos, sin, start_pos).transpose(1, 2)
        v = heads(self.v_proj(x), self.n_kv_heads).transpose(1, 2)
""", ("rope", "transpose", "positions", "heads axis", "layout", "apply_rope", "attention"),
          "own helper for the heads, RoPE applied before the transpose: it turns each head by its head index"),
        # https://github.com/habla-liaa/encodecmae/issues/3
        M("Transformer", "        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layers))\n",
          "        self.blocks = nn.ModuleList([Block(config)] * config.n_layers)   # n_layers blocks\n",
          ("same block", "shared", "parameters", "n_layers", "one block", "copies", "weights"),
          "a list times n_layers holds one Block n_layers times: every layer shares one set of weights, as in "
          "https://github.com/habla-liaa/encodecmae/issues/3"),
        M("Transformer", """\
        x = embed(idx, self.tok_emb.weight)                        # (B, T, d)
        for i, block in enumerate(self.blocks):
            x = block(x, self.rope_cos, self.rope_sin, cache, i)
""", """\
        T = idx.shape[1]
        x = embed(idx, self.tok_emb.weight)                        # (B, T, d)
        cos, sin = self.rope_cos[:T], self.rope_sin[:T]            # only the rows this input needs
        for i, block in enumerate(self.blocks):
            x = block(x, cos, sin, cache, i)
""", ("start_pos", "cache", "rope", "rows", "decode", "cos"),
          "hands the blocks only the first T rows of the RoPE tables: a decode step at position 5 finds no row 5",
          regime="decoding with a KV cache"),
        M("Transformer", "        self.mlp_norm = RMSNorm(config.d_model, config.norm_eps)\n",
          "        self.mlp_norm = self.attn_norm                      # the block's norm, reused before the MLP\n",
          ("mlp_norm", "parameter", "shared", "same norm", "missing", "state_dict"),
          "reuses attn_norm as mlp_norm: one gain for both, and the checkpoint's mlp_norm.weight has nowhere to go"),
        M("param_counts", """\
    d, L, hd = config.d_model, config.n_layers, config.head_dim
    q_and_o = 2 * d * config.n_heads * hd       # q_proj: d -> n_heads·hd, o_proj back
    k_and_v = 2 * d * config.n_kv_heads * hd    # k_proj and v_proj: d -> n_kv_heads·hd each
    return {"embedding": config.vocab_size * d,
            "attention": L * (q_and_o + k_and_v),
            "mlp": L * 3 * d * config.d_ff,     # gate_proj, up_proj, down_proj
            "norms": (2 * L + 1) * d,           # attn_norm and mlp_norm per block, then the final norm
            "lm_head": 0 if config.tie_embeddings else config.vocab_size * d}  # tied: the embedding's Parameter
""", """\
    d, L, V = config.d_model, config.n_layers, config.vocab_size
    kv = config.n_kv_heads * config.head_dim
    return {"embedding": V * d,
            "attention": L * (2 * d * d + 2 * d * kv),      # q and o are d x d; k and v d -> kv
            "mlp": L * 3 * d * config.d_ff,
            "norms": (2 * L + 1) * d,
            "lm_head": 0}                                     # the head reuses the embedding
""", ("head_dim", "d_model", "lm_head", "untied", "tie_embeddings", "q_proj"),
          "two slips: q and o counted d x d (wrong once head_dim is set apart), and no head even when untied"),
    ],
    "06": [
        M("kv_cache_bytes", """\
    per_position = 2 * config.n_layers * config.n_kv_heads * config.head_dim  # K and V, in every block
    return per_position * seq_len * batch_size * dtype.itemsize
""", """\
    per_position = 2 * config.n_layers * config.n_heads * config.head_dim     # K and V, in every block
    return per_position * seq_len * batch_size * (torch.finfo(dtype).bits // 8)
""", ("n_kv_heads", "kv heads", "finfo", "int8", "itemsize", "gqa"),
          "two slips: the query heads counted instead of the kv heads, and bytes from torch.finfo, which refuses int8"),
        M("cache_update", """\
    k_all = torch.cat((past_k, k), dim=2)  # positions are axis 2: the past first, then the new tokens
    v_all = torch.cat((past_v, v), dim=2)
""", """\
    B, H, T_past, hd = past_k.shape
    T_new = k.shape[2]
    k_all = torch.zeros(B, H, T_past + T_new, hd, device=k.device)   # room for the past and the new positions
    v_all = torch.zeros(B, H, T_past + T_new, hd, device=v.device)
    k_all[:, :, :T_past], k_all[:, :, T_past:] = past_k, k
    v_all[:, :, :T_past], v_all[:, :, T_past:] = past_v, v
""", ("dtype", "float32", "bfloat16", "zeros", "cache dtype"),
          "own preallocated cache without dtype=: a bfloat16 cache comes back float32", regime="a bfloat16 cache"),
        M("attention_step", """\
    mask = tinylm.causal_mask(T, start + T).to(x.device)  # (T, start + T), bottom-right aligned
    y = F.scaled_dot_product_attention(q, k_all, v_all, attn_mask=mask)    # (B, nh, T, hd)
""",
          "    y = F.scaled_dot_product_attention(q, k_all, v_all, is_causal=T > 1)   # one new token sees every key\n",
          ("is_causal", "top-left", "bottom-right", "mask", "chunk", "cached"),
          "is_causal for more than one new token: top-left aligned, wrong for a chunk that follows cached positions",
          regime="several new tokens after a prefill"),
        M("attention_step", """\
    q = attn.q_proj(x).view(B, T, attn.n_heads, attn.head_dim).transpose(1, 2)     # (B, nh, T, hd)
    k = attn.k_proj(x).view(B, T, attn.n_kv_heads, attn.head_dim).transpose(1, 2)  # (B, n_kv, T, hd)
    v = attn.v_proj(x).view(B, T, attn.n_kv_heads, attn.head_dim).transpose(1, 2)  # (B, n_kv, T, hd)
    q = tinylm.apply_rope(q, cos, sin, start_pos=start)  # the new tokens sit at start .. start + T - 1
    k = tinylm.apply_rope(k, cos, sin, start_pos=start)
    k_all, v_all = cache_update(past_k, past_v, k, v)    # (B, n_kv, start + T, hd)
    mask = tinylm.causal_mask(T, start + T).to(x.device)  # (T, start + T), bottom-right aligned
    y = F.scaled_dot_product_attention(q, k_all, v_all, attn_mask=mask)    # (B, nh, T, hd)
    y = y.transpose(1, 2).reshape(B, T, attn.n_heads * attn.head_dim)     # (B, T, d)
    return attn.o_proj(y), k_all, v_all
""", """\
    nh, nkv, hd = attn.n_heads, attn.n_kv_heads, attn.head_dim

    def heads(t, n):                                    # (B, T, n·hd) -> (B, n, T, hd)
        return t.view(B, T, n, hd).transpose(1, 2)

    q = tinylm.apply_rope(heads(attn.q_proj(x), nh), cos, sin, start_pos=start)
    k = tinylm.apply_rope(heads(attn.k_proj(x), nkv), cos, sin, start_pos=start)
    k_all, v_all = cache_update(past_k, past_v, k, heads(attn.v_proj(x), nkv))
    allowed = tinylm.causal_mask(T, start + T).to(x.device)
    y = F.scaled_dot_product_attention(q, k_all, v_all, attn_mask=allowed)   # (B, nh, T, hd)
    return attn.o_proj(y.reshape(B, T, nh * hd)), k_all, v_all
""", ("transpose", "merge", "heads and positions", "reshape", "layout", "prefill"),
          "own step with a helper for the heads, merged back with a reshape alone: right for one new token, "
          "positions and heads mixed for several", regime="more than one new token (a prefill or a chunk)"),
        M("generate_greedy", "            logits = model(step_input, cache=cache)[:, -1]      # (B, V): only the last position predicts\n",
          "            logits = model(step_input, cache=cache)[:, -1:].squeeze()  # (B, V): the last position, its axis dropped\n",
          ("batch of one", "squeeze", "(1, v)", "batch size 1", "shape", "batch axis"),
          "drops the position axis with squeeze(), which drops a batch of one as well", regime="a batch of one"),
        M("generate_greedy", GREEDY, MY_GREEDY.format(reset="cache.reset()\n    ", feed=""), ("max_seq_len", "full", "cache", "last token", "extra", "room"),
          "own loop that feeds back every token, the last one too: one forward more than needed overflows a full cache",
          regime="prompt + new tokens = max_seq_len + 1"),
        M("generate_greedy", "    cache.reset()                                   # stale positions from an earlier prompt would shift everything\n",
          "    cache.reset()                                   # stale positions from an earlier prompt would shift everything\n"
          "    model.eval()                                    # no dropout while decoding\n",
          ("train mode", "mode", "eval", "restore", "caller"),
          "switches the model to eval mode and never gives the caller back its train mode",
          regime="a model in train mode on entry"),
        # https://github.com/deepspeedai/DeepSpeed/pull/2669
        M("generate_greedy", GREEDY, MY_GREEDY.format(reset="", feed="if step + 1 < max_new_tokens:\n                "),
          ("reset", "stale", "earlier prompt", "cache", "positions"), "own loop that never resets the cache it is given, "
          "fixed in https://github.com/deepspeedai/DeepSpeed/pull/2669: a second prompt continues the first",
          regime="a cache reused from an earlier prompt"),
        M("generate_left_padded", """\
    new = []
    with torch.no_grad():                                               # no graph: nothing here is trained
        for _ in range(max_new_tokens):
            logits = model(ids, cache=cache, positions=positions, attention_mask=mask)[:, -1]  # (B, V)
            next_id = logits.argmax(dim=-1)                             # (B,)
            new.append(next_id)
            ids, positions = next_id[:, None], positions[:, -1:] + 1    # (B, 1) each: one past the row's last position
            mask = torch.cat((mask, mask.new_ones(B, 1)), dim=1)        # (B, cached + 1): the new token is real
    return torch.stack(new, dim=1)                                      # (B, max_new_tokens)
""", """\
    tokens = []
    with torch.no_grad():
        for _ in range(max_new_tokens):
            logits = model(ids, cache=cache, positions=positions, attention_mask=mask)
            ids = logits[:, -1].argmax(dim=-1, keepdim=True)        # (B, 1): the next token of every row
            tokens.append(ids)
            positions = positions[:, -1:] + positions.shape[1]      # the next position of every row
            mask = torch.cat((mask, torch.ones(B, 1, dtype=torch.bool)), dim=1)
    return torch.cat(tokens, dim=1)
""", ("positions", "+ 1", "offset", "jump", "prompt length", "last position"),
          "own decoding loop advancing each row's position by the positions just fed: after the prefill it jumps by "
          "the prompt's length instead of 1"),
    ],
    "07": [
        M("repeat_kv", """\
    B, n_kv, T, hd = x.shape
    x = x[:, :, None].expand(B, n_kv, n_rep, T, hd)  # (B, n_kv, n_rep, T, hd): a view, copies of each kv head side by side
    return x.reshape(B, n_kv * n_rep, T, hd)          # (B, n_kv * n_rep, T, hd): groups stay contiguous
""", "    return torch.cat([x] * n_rep, dim=1)   # n_rep copies of the kv heads, one after another\n",
          ("tile", "repeat_interleave", "order", "kv0, kv1", "in place", "group"),
          "own concatenation of n_rep copies: the heads come out tiled (kv0, kv1, kv0, ...), not grouped",
          regime="more than one kv head"),
        M("gqa_attention", """\
    n_rep = q.shape[1] // k.shape[1]
    k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)  # (B, n_heads, T, hd): only inside attention
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)
""", """\
    n_heads, n_kv = q.shape[1], k.shape[1]
    outputs = []
    for h in range(n_heads):
        kv = h // n_kv                                   # the kv head this query head shares
        outputs.append(F.scaled_dot_product_attention(q[:, h], k[:, kv], v[:, kv], is_causal=True))
    return torch.stack(outputs, dim=1)                   # (B, n_heads, T, hd)
""", ("group size", "n_rep", "h // n_rep", "kv head", "index", "mqa"),
          "own loop over the query heads, dividing by the kv head count instead of the group size: right only "
          "where the two are equal", regime="a group size other than the kv head count (MQA)"),
        M("decode_bytes_per_token", "    matrices = config.vocab_size * d * (1 if config.tie_embeddings else 2)    # a tied head is the embedding\n",
          "    matrices = 2 * config.vocab_size * d                                       # the embedding and the head\n",
          ("tied", "twice", "tie_embeddings", "embedding", "lm_head"),
          "counts the embedding and the head apart even when tied: one matrix read twice", regime="tied embeddings"),
        M("decode_bytes_per_token", DECODE, """\
    d, L, size = config.d_model, config.n_layers, dtype.itemsize
    hd = config.head_dim
    block = 2 * d * config.n_heads * hd + 2 * d * config.n_kv_heads * hd + 3 * d * config.d_ff   # the matrices
    head = 0 if config.tie_embeddings else config.vocab_size * d
    weights = (config.vocab_size * d + head + L * block) * size
    kv_cache = 2 * L * config.n_heads * hd * context_len * size
""", ("norm", "gain", "n_kv_heads", "kv heads", "kv_cache", "weights"),
          "two slips: the norms' gains left out of the weights, and the cache counted with the query heads"),
        M("decode_bytes_per_token", DECODE + '    return {"weights": weights, "kv_cache": kv_cache}\n', """\
    def matrix(n_in, n_out):
        return n_in * n_out

    d, hd, L = config.d_model, config.head_dim, config.n_layers
    block = (2 * matrix(d, config.n_heads * hd) + 2 * matrix(d, config.n_kv_heads * hd)
             + 3 * matrix(d, config.d_ff) + 2 * d)                      # projections, SwiGLU, two gains
    params = matrix(config.vocab_size, d) * (1 if config.tie_embeddings else 2) + L * block + d
    per_position = 2 * L * config.n_kv_heads * hd                       # one key and one value per block
    return {"weights": params * dtype.itemsize, "kv_cache": per_position * (context_len + 1) * dtype.itemsize}
""", ("context_len", "positions", "one position", "+ 1", "kv_cache", "cached"),
          "own count with a helper, the cache read at context_len + 1 positions (the new token's own key too)"),
    ],
    "08": [
        M("top_k_filter", """\
    k = min(k, logits.shape[-1])                           # k past the vocabulary keeps every token
    kth = logits.topk(k, dim=-1).values[..., -1:]          # (..., 1): the k-th largest value
    return logits.masked_fill(logits < kth, float("-inf"))
""", """\
    k = min(k, logits.shape[-1])                           # k past the vocabulary keeps every token
    ranked = logits.sort(dim=-1).values                    # (..., V) in order
    threshold = ranked[..., k - 1:k]                       # (..., 1): the k-th value
    return torch.where(logits >= threshold, logits, torch.full_like(logits, float("-inf")))
""", ("descending", "smallest", "largest", "sort", "k-th", "kept"),
          "own route through sort, which is ascending by default: the threshold is the k-th smallest"),
        M("top_k_filter", "    kth = logits.topk(k, dim=-1).values[..., -1:]          # (..., 1): the k-th largest value\n",
          "    kth = logits.topk(k, dim=-1).values[:, -1:]            # (B, 1): the k-th largest value of each row\n",
          ("(b, t, v)", "last axis", "batch shape", "[:, -1:]", "axis", "3-d"),
          "indexes the threshold as [:, -1:]: right for (B, V) logits, another axis for (B, T, V)", regime="(B, T, V) logits"),
        # https://github.com/google-deepmind/gemma/issues/562
        M("sample_next", """\
    if temperature == 0:
        return logits.argmax(dim=-1)          # greedy: no randomness at all
    logits = logits / temperature             # on logits, before any filter
""", """\
    logits = logits / temperature             # on logits, before any filter
    if temperature == 0:
        return logits.argmax(dim=-1)          # greedy: no randomness at all
""", ("temperature", "greedy", "argmax", "division by zero", "nan", "inf"),
          "the greedy branch after the division: temperature 0 has already divided by zero (inf, nan), as in "
          "https://github.com/google-deepmind/gemma/issues/562", regime="temperature 0"),
        M("sample_next", """\
    logits = logits / temperature             # on logits, before any filter
    if top_k is not None:
        logits = top_k_filter(logits, top_k)
    if top_p is not None:
        logits = top_p_filter(logits, top_p)
    probs = logits.softmax(dim=-1)            # (B, V): filtered tokens get exactly 0
    return torch.multinomial(probs, num_samples=1, generator=generator).squeeze(-1)  # (B, 1) -> (B,)
""", """\
    if top_k is not None:
        logits = top_k_filter(logits, top_k)
    if top_p is not None:
        logits = top_p_filter(logits, top_p)
    probs = (logits / temperature).softmax(dim=-1)       # temperature on what the filters kept
    return torch.multinomial(probs, num_samples=1).squeeze(-1)
""", ("temperature", "before", "order", "generator", "reproducib", "top_p"),
          "two slips: the temperature applied after the filters, and the draw without the caller's generator"),
        M("generate", "        model.train(was_training)                          # give the caller back the mode it had\n",
          "        model.train()                                      # back to training\n",
          ("eval mode", "mode", "restore", "was_training", "caller"),
          "puts the model back in train mode, whatever mode it came in", regime="a model in eval mode on entry"),
        M("generate", """\
    was_training = model.training
    model.eval()                                            # dropout off while generating
    idx = prompt
    try:
        with torch.no_grad():
            for _ in range(max_new_tokens):
                logits = model(idx)[:, -1]                  # (B, V): the last position predicts the next token
                next_id = sample_next(logits, temperature, top_k, top_p, generator)  # (B,)
                idx = torch.cat((idx, next_id[:, None]), dim=1)                      # (B, T + 1)
    finally:
        model.train(was_training)                          # give the caller back the mode it had
    return idx
""", """\
    mode = model.training
    model.eval()
    out = prompt
    with torch.no_grad():
        for _ in range(max_new_tokens):
            last = model(out)[:, -1, :]                                 # (B, V)
            token = sample_next(last, temperature, top_k, top_p, generator)
            out = torch.cat((out, token.unsqueeze(-1)), dim=-1)
    model.train(mode)                                                   # the caller's mode back
    return out
""", ("finally", "exception", "interrupt", "mode", "restore", "try"),
          "own loop that restores the mode after it, not in a finally: an exception leaves the model in eval mode",
          regime="an exception during generation"),
    ],
    "09": [
        M("get_batch", GET_BATCH, MY_WINDOWS.format(end=""), ("shape", "seq_len", "one short", "off by one", "slice", "targets"),
          "own loop over the starts, the targets' slice one token short"),
        M("lr_schedule", """\
    progress = (step - warmup_steps) / max(1, total_steps - 1 - warmup_steps)  # 0 -> 1 over the decay
    return min_lr + 0.5 * (1 + math.cos(math.pi * min(progress, 1.0))) * (max_lr - min_lr)
""", """\
    decay_steps = total_steps - 1 - warmup_steps
    t = min((step - warmup_steps) / decay_steps, 1.0)           # fraction of the decay done
    return min_lr + (max_lr - min_lr) * (1 + math.cos(math.pi * t)) / 2
""", ("zero", "division", "max(1", "single step", "total_steps", "warmup"),
          "own decay written without max(1, ...): a single step after the warmup divides by zero",
          regime="total_steps = warmup_steps + 1"),
        M("lr_schedule", """\
        return max_lr * (step + 1) / warmup_steps
    progress = (step - warmup_steps) / max(1, total_steps - 1 - warmup_steps)  # 0 -> 1 over the decay
""", """\
        return max_lr * step / warmup_steps
    progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)  # 0 -> 1 over the decay
""", ("step + 1", "warmup", "total_steps - 1", "last step", "min_lr", "zero"),
          "two slips: the warmup starts at 0 (step 0 does not move) and the decay ends one step after the last"),
        M("train_step", "    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)  # global gradient norm <= grad_clip\n",
          "    torch.nn.utils.clip_grad_value_(model.parameters(), grad_clip)  # gradients kept within grad_clip\n",
          ("clip_grad_norm", "norm", "value", "global", "each entry"),
          "clips every entry of the gradient to grad_clip instead of its global norm"),
        M("train_step_accumulated", """\
        (summed / n_tokens).backward()                                # .grad += this micro-batch's share
""", """\
        F.cross_entropy(logits.flatten(0, 1), y.flatten(), ignore_index=-100).backward()  # this micro-batch's loss
""", ("mean", "n_tokens", "micro-batch", "denominator", "sum", "too large"),
          "backpropagates each micro-batch's own mean: the gradient is a sum of means, k times too large",
          regime="more than one micro-batch"),
        M("train_step_accumulated", """\
    n_tokens = sum(int((y != -100).sum()) for _, y in micro_batches)  # N: target tokens of the WHOLE batch
    optimizer.zero_grad(set_to_none=True)                             # once, before the first micro-batch
    total = 0.0
    for x, y in micro_batches:
        logits = model(x)                                             # (b, T, V)
        summed = F.cross_entropy(logits.flatten(0, 1), y.flatten(), ignore_index=-100, reduction="sum")
        (summed / n_tokens).backward()                                # .grad += this micro-batch's share
        total += summed.item()
    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)    # once: the whole batch's gradient
    optimizer.step()                                                  # once
    return total / n_tokens                                           # mean over all N target tokens
""", """\
    optimizer.zero_grad(set_to_none=True)
    n_targets = sum(y.numel() for _, y in micro_batches)              # targets of the whole batch
    loss_sum = 0.0
    for x, y in micro_batches:
        out = model(x)
        nll = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1), reduction="sum")
        (nll / n_targets).backward()
        loss_sum += nll.item()
    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    return loss_sum / n_targets
""",
          ("padding", "-100", "numel", "count", "denominator", "real tokens"),
          "own accumulation loop dividing by every target position, padding included", regime="padded targets (-100)"),
        M("lm_loss", "    return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)  # (B*T, V) vs (B*T,)\n", """\
    flat, tgt = logits.flatten(0, 1), targets.flatten()                 # (B*T, V), (B*T,)
    scored = tgt != -100                                                # padding is not a target
    log_norm = flat.exp().sum(dim=-1).log()                             # log of the softmax's denominator
    picked = flat.gather(-1, tgt.clamp(min=0)[:, None]).squeeze(-1)     # the target's logit
    return (log_norm - picked)[scored].mean()
""", ("overflow", "logsumexp", "inf", "max", "large logits", "exp"),
          "own cross-entropy with log(sum(exp)) and no maximum subtracted: large logits overflow to inf",
          regime="logits in the hundreds"),
        M("train_step_costs", """\
    return {"flops": 6 * matmul_weights * tokens + 3 * attention_matmuls,     # backward = 2 x forward
            "weights": 4 * n_params, "grads": 4 * n_params, "adam_moments": 2 * 4 * n_params}
""", """\
    return {"flops": 6 * matmul_weights * tokens + attention_matmuls,         # 6 FLOPs per weight per token
            "weights": 4 * n_params, "grads": 4 * n_params, "adam_moments": 4 * n_params}
""", ("backward", "attention", "moments", "exp_avg_sq", "two moments", "3 x"),
          "two slips: attention's matmuls counted forward only, and one AdamW moment instead of two"),
    ],
    "10": [
        # https://github.com/neulab/xnmt/pull/229
        M("nll_sum_and_count", "    count = int((targets != ignore_index).sum())                 # padding is not a token\n",
          "    count = targets.numel()                                      # tokens in the batch\n",
          ("padding", "ignore_index", "count", "numel", "scored"),
          "counts every target, padding included, the bug of https://github.com/neulab/xnmt/pull/229", regime="padded targets"),
        M("nll_sum_and_count", "    count = int((targets != ignore_index).sum())                 # padding is not a token\n",
          "    count = int((targets != ignore_index).to(logits.dtype).sum())  # padding is not a token\n",
          ("bfloat16", "count", "256", "exact", "precision", "dtype"),
          "sums the mask in the logits' dtype: bfloat16 counts exactly only up to 256", regime="bfloat16 logits, > 256 targets"),
        M("nll_sum_and_count", "    nll = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=ignore_index,\n",
          "    nll = F.cross_entropy(logits.reshape(-1, 256).float(), targets.flatten(), ignore_index=ignore_index,\n",
          ("256", "vocabulary", "reshape", "shape", "V"),
          "flattens with the byte vocabulary written in: wrong for logits over another vocabulary",
          regime="a vocabulary other than 256"),
        # https://github.com/yaodongyu/TRADES/issues/32
        M("evaluate", """\
    was_training = model.training
    model.eval()                                             # dropout off while measuring
    dev = next(model.parameters()).device
    total, count = 0.0, 0
    try:
        with torch.no_grad():                                # no graph: memory stays flat
            for x, y in batches:
                s, n = nll_sum_and_count(model(x.to(dev)), y.to(dev))
                total, count = total + s, count + n          # combine by tokens, not by batches
    finally:
        model.train(was_training)
""", """\
    model.eval()                                             # dropout off while measuring
    device = next(model.parameters()).device
    total, count = 0.0, 0
    with torch.no_grad():
        for inputs, targets in batches:
            batch_nll, batch_tokens = nll_sum_and_count(model(inputs.to(device)), targets.to(device))
            total, count = total + batch_nll, count + batch_tokens
""", ("train mode", "restore", "mode", "was_training", "eval"),
          "own loop that never gives the model its train mode back, as https://github.com/yaodongyu/TRADES/issues/32 "
          "reports", regime="a model in train mode on entry"),
        M("evaluate", '"perplexity": math.exp(loss),', '"perplexity": math.exp(total) ** (1 / count),',
          ("overflow", "exp", "perplexity", "mean loss", "total"),
          "the perplexity as the N-th root of exp(total NLL): exp overflows once the summed NLL passes about 709",
          regime="more than a few hundred tokens"),
        # https://github.com/Shark-NLP/OpenICL/issues/26
        M("bigram_nll", BIGRAM_MEAN,
          "    return (-probs.log()[val[:-1], val[1:]].sum() / len(val)).item()   # mean over val's bytes\n",
          ("len(val) - 1", "pairs", "count", "off by one", "denominator"),
          "divides by len(val) instead of the len(val) - 1 pairs, the count slip of "
          "https://github.com/Shark-NLP/OpenICL/issues/26"),
        M("bigram_nll", "    probs = (counts + alpha) / (counts.sum(dim=1, keepdim=True) + 256 * alpha)                         # rows sum to 1\n",
          "    probs = (counts + alpha) / (counts.sum(dim=0, keepdim=True) + alpha)                               # rows sum to 1\n",
          ("dim=1", "rows", "256 * alpha", "smoothing", "column", "normalis"),
          "two slips: the columns' sums (next byte) as the denominator, and alpha added once instead of 256 times"),
    ],
}

SAME = [
    ("01", M("tied_logits", "    return x @ weight.T  # (B, T, d) @ (d, V) -> (B, T, V)\n",
             '    return torch.einsum("...d,vd->...v", x, weight)  # score of every row v\n', (), "the head as an einsum")),
    ("01", M("tie_weights", "    lm_head.weight = tok_emb.weight  # the same Parameter object, not a copy of its values\n",
             '    lm_head.register_parameter("weight", tok_emb.weight)  # the head\'s slot holds the embedding\'s Parameter\n',
             (), "the tie through register_parameter")),
    ("02", M("rms_norm", "    inv_rms = torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)  # (..., 1): one statistic per token\n",
             "    inv_rms = x32.square().mean(dim=-1, keepdim=True).add(eps).rsqrt()  # (..., 1)\n", (),
             "the statistic as a chain of tensor methods")),
    ("03", M("split_heads", """\
    B, T, d = x.shape
    x = x.view(B, T, n_heads, d // n_heads)  # (B, T, H, hd): head h owns features h*hd .. (h+1)*hd - 1
    return x.transpose(1, 2)                 # (B, H, T, hd)
""", "    return torch.stack(x.chunk(n_heads, dim=-1), dim=1)  # (B, H, T, hd): head h's slice of features\n", (),
             "heads as n_heads chunks of the features, stacked")),
    ("03", M("attention_flops", """\
    return {"qkv_proj": 3 * projection, "scores": B * n_heads * per_head, "mix": B * n_heads * per_head,
            "out_proj": projection}
""", """\
    attention = 2 * B * n_heads * T * T * head_dim   # every head: (T, hd) @ (hd, T); the mix the same size
    return {"qkv_proj": 6 * B * T * d * d, "scores": attention, "mix": attention, "out_proj": 2 * B * T * d * d}
""", (), "the counts written out in one line each")),
    ("04", M("rotary_attention", """\
    q = apply_rope(q, cos, sin, start_pos)  # position enters the scores only
    k = apply_rope(k, cos, sin, start_pos)
""", """\
    both = apply_rope(torch.cat((q, k), dim=0), cos, sin, start_pos)   # queries and keys as one batch
    q, k = both.chunk(2, dim=0)
""", (), "q and k rotated in one call, joined along the batch axis")),
    ("05", M("swiglu_hidden", "    return multiple * math.ceil(8 * d_model / 3 / multiple)\n",
             "    return -(-8 * d_model // (3 * multiple)) * multiple   # ceiling division in integers\n", (),
             "the rounding up as integer ceiling division")),
    ("06", M("kv_cache_bytes", """\
    per_position = 2 * config.n_layers * config.n_kv_heads * config.head_dim  # K and V, in every block
    return per_position * seq_len * batch_size * dtype.itemsize
""", "    return dtype.itemsize * seq_len * batch_size * config.n_layers * 2 * config.n_kv_heads * config.head_dim\n",
             (), "the bytes as one product in another order")),
    ("06", M("generate_greedy", GREEDY, MY_GREEDY.format(reset="cache.reset()\n    ", feed="if step + 1 < max_new_tokens:  # the last is never fed back\n                "), (), "the prefill before the loop, each token fed back only when another is needed")),
    ("07", M("repeat_kv", """\
    x = x[:, :, None].expand(B, n_kv, n_rep, T, hd)  # (B, n_kv, n_rep, T, hd): a view, copies of each kv head side by side
    return x.reshape(B, n_kv * n_rep, T, hd)          # (B, n_kv * n_rep, T, hd): groups stay contiguous
""", "    return x[:, torch.arange(n_kv * n_rep) // n_rep]   # head h reads kv head h // n_rep\n", (),
             "the repetition as an index: head h reads kv head h // n_rep")),
    ("07", M("decode_bytes_per_token", "    weights = (matrices + L * per_block + d) * size                           # + the final norm\n",
             "    weights = matrices * size + L * per_block * size + d * size               # each part in bytes\n",
             (), "the weights' bytes summed part by part")),
    ("09", M("get_batch", GET_BATCH, MY_WINDOWS.format(end=" + 1"), (), "windows cut in a loop over the starts")),
    ("10", M("bigram_nll", BIGRAM_MEAN,
             "    return F.nll_loss(probs.log()[val[:-1]], val[1:]).item()   # row of the previous byte, entry of the next\n",
             (), "the mean NLL through F.nll_loss on the previous bytes' rows")),
    ("10", M("evaluate", '"bits_per_byte": loss / math.log(2) / bytes_per_token}',
             '"bits_per_byte": loss / (math.log(2) * bytes_per_token)}', (), "one division by the product")),
]
