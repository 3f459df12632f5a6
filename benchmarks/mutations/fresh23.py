"""A twenty-third held-out set of learner mistakes ("fresh23"), written without
reading the checks: neither autograder/checks/ (any file), tests/checks/,
autograder/diagnosis_*.py, benchmarks/bench_diagnostics.py's source, the
diagnosis sections of docs/benchmarks.md nor tests/course/test_docs.py were
opened, listed or grepped; bench_diagnostics.py, check cells and notebook
checks were never run, and no mistake was tried against a check.

What was opened or run. The brief, the helper rules; mkwt.sh fresh23 and the
last three lines of git log. `ls` of the repository root, benchmarks/ and
benchmarks/mutations/ (names only), and `wc -l` of verify_unseen.py,
heldout_duplicates.py, mutations/unseen.py, mutations/__init__.py and the
unseen_probes*.py files. The setup cells of notebooks 01 to 03 and the answer
cells of all ten, through bench_diagnostics.notebook_cells (of its third
result only the check names). benchmarks/mutations/__init__.py, unseen.py (the
entry class and its entries), verify_unseen.py, heldout_duplicates.py,
unseen_probes.py, unseen_probes_later.py and unseen_probes_fresh22.py whole; of
verify_heldout.py a grep of its definitions and the bodies of namespace,
attempt, _config, _model_agreement, _input_kept and _attention_steps. Of the
other sets only fresh22.py's module docstring, printed with python. In tinylm/:
a grep of kv_cache.py for its definitions and lines 56-62 (reset). A grep for
"fresh22" over the four registration files named in the brief, then lines
158-195 of tests/course/test_benchmarks.py. Public threads were found with 15
searches of issue threads; each candidate's URL was grepped over
benchmarks/mutations/ (`grep -rl URL`, the URL only: 36 URLs, of which 14 were
already in fresh10 to fresh21 and were not used). Run: verify_unseen.py --set
fresh23 (twelve runs) and heldout_duplicates.py --set fresh23 (eleven runs;
two of each stopped at a syntax error this file had while being edited), the
two fresh23 tests of test_benchmarks.py, and awk counts of this file's lines
over 130 characters and of the longest line of unseen.py (numbers only). Slips, none touching a check:
lines 158-160 of test_benchmarks.py showed the end of an unrelated benchmark
test; the setup cells, printed as allowed, name the check functions they
import (import lines only); heldout_duplicates printed, for each of this
set's entries that matched, the names of the sets holding it (no entry of
theirs).

Duplicates, honestly. The first draft's natural first attempts were mostly
taken: heldout_duplicates matched 48 of 82 entries on the first round, then
32, 15, 5, 3, 2 and 0 as each match was replaced. Every replacement is a
different edit, but some keep the wrong idea of the entry it replaced in
other code on another line (among them the hand softmax, the 2-norm RMS with
eps outside the root, the padding counted by len(targets.view(-1)), the value
heads tiled by cat): the text is new, the idea is not new to the collection.
Three replacements changed no probe and were replaced again (a cast of q to
v's dtype, topk(sorted=False), which CPU topk returns sorted anyway, and a
hard-coded clip of 1.0, which no probe's gradient reaches). Earlier, 80
mistakes were drafted and 15 dropped to keep the set near its size; verify
also turned away a positions shift by one in generate_left_padded (RoPE's
relative angles hide it; dropped), gate * up @ w_downᵀ (it groups left to
right; now a SAME edit), a clip after each micro-batch's backward (no probe's
gradient norm reaches it; dropped) and a SAME edit that called F in notebook
04, which does not import it (later replaced as a duplicate).

The set's focus, each mistake counted once by its main kind. Realistic first
attempts (32): a name from the line above or beside (x for x32, ids.dtype for
weight.dtype, w_gate left in the up line, cos left in the sin line, prompt,
past_k, drop_sorted, val for train, h and x), copied code with one name
unchanged (n_heads in the v view, layer_norm's eps default in RMSNorm),
an off-by-one (n_layers - 1 blocks, warmup_steps + 1, hd halved twice), a
step on the wrong side of a reshape (a straight view into (B, H, T, hd)), a
forgotten branch (start 0 after a cache, the caller's mode, max for min in
the k cap), arguments in the wrong position (cos and sin, d_in and rows), a
batch index for a position ([-1]), a shape ((B, 1) columns stacked), the
loss recomputed after the step, model.zero_grad never called, the loss
divided twice, the output rotated instead of q and k, GPT-2's GELU and the
original Transformer's sqrt(d) embedding scale, log10, cache tensors zeroed
instead of reset, a generate that divides by the temperature too, a copy_
for the tie. torch API mix-ups (15): W·xᵀ in cross_entropy's (B, V, T)
layout, an int mask, .mT for transpose(1, 2), integer // in the exponent, the
future mask handed to SDPA (True = keep), SDPA's scale given head_dim and
1/head_dim, torch.max's values for its indices, heads tiled by cat (repeat's
order), a mask cast .to(dtype) for .to(device), topk's indices for its
values, masked_fill_ on the caller's logits, sort's (values, indices)
unpacked the other way, keepdim added to the greedy argmax, (B, V, T) logits
flattened as well. Numerics (8): eps outside the root (twice: RMSNorm from
the 2-norm, layer_norm after the rsqrt), float16 squares, a softmax without
the max, exp minus the batch's single maximum for multinomial, log(softmax),
a mean over padded positions, a bfloat16 accumulator. Accounting wrong by a
term (6): one query row's scores, batch_size left out, one of the two kv
projections, the cache sized by query heads, the tied head's matmul dropped,
bits per byte divided by 8. Look-alikes (2): w_o transposed inside F.linear
(the numbers of merge_heads(y) @ w_o) and the halves unpacked the other way
(the numbers of cat((-x1, x2))).

Sources: a learner working through the notebooks and, for 11 mistakes and 1
SAME edit, threads of public projects (the URL is in a comment above the entry
and in its reason): OLMo#281 (rms from the 2-norm, eps outside), minimind#301
(squares of the unconverted x), LLMs-from-scratch#871 (rsqrt or sqrt) and
#1061 (a triu mask handed to SDPA), mxnet-the-straight-dope#3 (a bespoke
softmax), yoyodyne#285 (torch.max's (values, indices)), litgpt#1596 (a cache
cleared incompletely), mlx-vlm#1983 (decode positions from 0),
CodonTransformer#20 (temperature applied twice), DGAI#7 (cross_entropy's
(N, C, d) layout), neuralmonkey#806 (padding in the perplexity's count), and
ng-video-lecture#10 (cross_entropy on logits.mT, a SAME edit).

SAME lists 17 edits that compute what the solution computes another way
(index_select on flattened ids, type_as, setattr for the tie, a power of
-0.5, torch's biased var, k.mT, permute, a broadcast outer product,
angles.repeat(1, 2), the tables sliced at start_pos for the keys, F.linear,
SiLU written out, the head axis counted from the end, amin of the top k,
[:, 0] for squeeze, cross_entropy on (B, V, T), a shift by 8 bits); a check
must pass each.

Counts: 63 mistakes (01: 4, 02: 5, 03: 6, 04: 6, 05: 6, 06: 8, 07: 6, 08: 8,
09: 7, 10: 7), 17 SAME edits, 12 public threads. The new probes, in
benchmarks/unseen_probes_fresh23.py, ask top_k_filter for more tokens than
the vocabulary, sample with generate at temperature 2, and sum the NLL of
logits times 100. `benchmarks/verify_unseen.py --set fresh23` proves each
mistake a real bug and each SAME edit harmless. `in_lists` is left False
throughout: the project's nbNN lists were not read, so it was not assessed.

Each mistake is one substitution in one answer cell; `expect` holds words a
check that found it would likely say, `regime` the situation in which a
mistake that is right by default shows. Each reason says what the learner did
and the fix."""
from __future__ import annotations

from .unseen import Unseen

M = Unseen

MUTATIONS = [
    # ---------------------------------------------------------------- 01
    ("01", M("embed", "return weight[ids]", "return weight[ids] * weight.shape[-1] ** 0.5",
             ("sqrt", "scale", "d_model", "rows", "weight[ids]"),
             "scales the rows by sqrt(d), as the original Transformer's embedding did: Llama's lookup returns the "
             "rows themselves")),
    ("01", M("one_hot_embed", ".to(weight.dtype)  # (..., V)", ".to(ids.dtype)  # (..., V)",
             ("dtype", "integer", "long", "float", "weight.dtype"),
             "casts the one-hot rows to ids' dtype, the name beside it, where the table's belongs: an integer matrix "
             "times a float table raises")),
    ("01", M("tied_logits", "return x @ weight.T", "return torch.matmul(weight, x.transpose(-2, -1))",
             ("(b, v, t)", "layout", "axes", "last axis", "vocabulary axis", "transpose", "shape"),
             "writes W·xᵀ, the (B, V, T) layout cross_entropy's (N, C, L) form uses, where logits (B, T, V) are asked: "
             "return x @ weight.T")),
    ("01", M("tie_weights", "lm_head.weight = tok_emb.weight",
             "with torch.no_grad():\n        lm_head.weight.copy_(tok_emb.weight)",
             ("same parameter", "is tok_emb.weight", "new parameter", "two parameters", "nn.parameter", "not tied",
              "separate"),
             "copies the embedding's values into the head's own weight: equal today, two Parameters that training "
             "moves apart; assign tok_emb.weight itself")),
    # ---------------------------------------------------------------- 02
    # https://github.com/allenai/OLMo/issues/281
    ("02", M("rms_norm", "inv_rms = torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)",
             "inv_rms = 1 / (x32.norm(2, dim=-1, keepdim=True) * x32.shape[-1] ** -0.5 + eps)",
             ("eps", "inside the square root", "under the root", "outside", "rsqrt"),
             "computes the rms from the 2-norm and adds eps to it instead of under the root, as OLMo's first RMSNorm did "
             "(https://github.com/allenai/OLMo/issues/281): tokens whose mean square is near eps come out wrong; "
             "use rsqrt(mean(x²) + eps)", regime="tokens whose mean square is near or below eps")),
    # https://github.com/jingyaogong/minimind/issues/301
    ("02", M("rms_norm", "torch.rsqrt(x32.pow(2).mean(", "torch.rsqrt(x.pow(2).mean(",
             ("float32", "overflow", "inf", "float16", "upcast", "x32", "half"),
             "squares x, the name on the line above, not its float32 copy x32, as minimind#301 reported "
             "(https://github.com/jingyaogong/minimind/issues/301): float16 entries above 256 square to inf",
             regime="float16 input with entries above 256")),
    # https://github.com/rasbt/LLMs-from-scratch/issues/871
    ("02", M("rms_norm", "inv_rms = torch.rsqrt(", "inv_rms = torch.sqrt(",
             ("rsqrt", "sqrt", "multipl", "inverse", "reciprocal", "times the rms"),
             "takes sqrt where rsqrt belongs, the multiply-or-divide confusion asked about in "
             "https://github.com/rasbt/LLMs-from-scratch/issues/871: x is multiplied by its rms instead of divided")),
    ("02", M("layer_norm", "torch.rsqrt(var + eps)", "torch.rsqrt(var) + eps",
             ("eps", "inside", "under the root", "rsqrt"),
             "adds eps after the rsqrt instead of to the variance under it", regime="a variance near eps or a large eps")),
    ("02", M("RMSNorm", "def __init__(self, dim: int, eps: float = 1e-6):", "def __init__(self, dim: int, eps: float = 1e-5):",
             ("eps", "default", "1e-6", "1e-5"),
             "copies layer_norm's default eps, 1e-5, into RMSNorm's signature: the norm's default is 1e-6",
             regime="RMSNorm built without an eps")),
    # ---------------------------------------------------------------- 03
    ("03", M("causal_mask", "allowed = torch.ones(q_len, kv_len, dtype=torch.bool)",
             "allowed = torch.ones(q_len, kv_len, dtype=torch.int)",
             ("bool", "dtype", "int", "masked_fill", "~"),
             "builds the mask of ints: it is no boolean mask, so ~mask is a bitwise not (-2, -1) and masked_fill "
             "refuses it")),
    ("03", M("split_heads", "x = x.view(B, T, n_heads, d // n_heads)  "
             "# (B, T, H, hd): head h owns features h*hd .. (h+1)*hd - 1\n"
             "    return x.transpose(1, 2)                 # (B, H, T, hd)",
             "return x.view(B, n_heads, T, d // n_heads)  # (B, H, T, hd) straight away",
             ("transpose", "view", "positions", "mixes", "layout", "order of the axes"),
             "views x straight into (B, H, T, hd): the memory is (B, T, H, hd), so each 'head' holds features of "
             "several positions; view as (B, T, H, hd), then transpose")),
    # https://github.com/zackchase/mxnet-the-straight-dope/issues/3
    ("03", M("causal_attention", "weights = scores.softmax(dim=-1)",
             "weights = torch.exp(scores)\n    weights = weights / weights.sum(-1, keepdim=True)",
             ("overflow", "underflow", "nan", "max", "stable", "softmax", "exp"),
             "writes the softmax by hand without subtracting the row's maximum, the bespoke softmax that blew up in "
             "https://github.com/zackchase/mxnet-the-straight-dope/issues/3: large scores overflow and very negative "
             "ones give 0/0; use scores.softmax(dim=-1)", regime="scores far from 0")),
    ("03", M("causal_attention", "/ math.sqrt(q.shape[-1])", "/ math.sqrt(q.shape[-2])",
             ("sqrt", "head_dim", "scale", "shape[-1]", "positions", "temperature"),
             "scales by the square root of the number of queries (shape[-2]) instead of the head size (shape[-1])")),
    # a look-alike: transposing w_o inside F.linear gives the numbers of merge_heads(y) @ w_o
    ("03", M("self_attention", "F.linear(merge_heads(y), w_o)", "F.linear(merge_heads(y), w_o.T)",
             ("w_o", "transpose", "[d_out, d_in]", "output projection", "w.t", "layout"),
             "transposes w_o inside F.linear, which already computes y @ w_oᵀ: the output projection is applied "
             "transposed")),
    ("03", M("attention_flops", "per_head = 2 * T * T * head_dim", "per_head = 2 * T * head_dim",
             ("t * t", "every query", "one query", "scores", "seq_len"),
             "counts one query row per head, as while decoding: the layer scores all T queries against T keys")),
    # ---------------------------------------------------------------- 04
    ("04", M("apply_rope", "sin = sin[start_pos:start_pos + T].to(x.dtype)", "sin = cos[start_pos:start_pos + T].to(x.dtype)",
             ("sin", "cos", "copy", "table"),
             "copies the cos line for sin and leaves cos in it: both terms use the cosine")),
    ("04", M("rope_cache", "theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)",
             "theta ** -(torch.arange(0, head_dim, 2) // head_dim)",
             ("integer division", "//", "frequenc", "exponent", "float"),
             "divides the integer range with //: every exponent floors to 0 and each pair turns at one radian a "
             "position")),
    ("04", M("apply_rope", "x1, x2 = x.chunk(2, dim=-1)", "x2, x1 = x.chunk(2, dim=-1)",
             ("-x2", "halves", "swapped", "rotate_half", "order"),
             "unpacks the halves the other way round: the cat then gives (-x1, x2), a reflection, not (-x2, x1)")),
    ("04", M("rotary_attention", "    q = apply_rope(q, cos, sin, start_pos)  # position enters the scores only\n"
             "    k = apply_rope(k, cos, sin, start_pos)\n    return tinylm.causal_attention(q, k, v)",
             "    return apply_rope(tinylm.causal_attention(q, k, v), cos, sin, start_pos)  # rotate the result",
             ("q and k", "scores", "output", "before attention", "rotate"),
             "rotates attention's output instead of q and k: position never reaches the scores")),
    ("04", M("interleaved_to_half", "return pairs.transpose(1, 2).reshape(rows, d_in)", "return pairs.mT.reshape(rows, d_in)",
             ("mt", "last two", "transpose(1, 2)", "axes", "d_in"),
             "uses .mT for the transpose: it swaps the last two axes (the pair and d_in), not the pair and the "
             "pair index")),
    ("04", M("interleaved_to_half", "hd = rows // n_heads", "hd = rows // n_heads // 2",
             ("head_dim", "pairs", "hd", "reshape", "half"),
             "halves the head size once too often (hd/2 is the number of pairs, taken again in the reshape)")),
    # ---------------------------------------------------------------- 05
    ("05", M("swiglu", "up = x @ w_up.T", "up = x @ w_gate.T",
             ("w_up", "w_gate", "up", "copy", "same matrix"),
             "copies the gate line and leaves w_gate in it: the up projection is the gate's")),
    ("05", M("swiglu", "gate = F.silu(x @ w_gate.T)", "gate = F.gelu(x @ w_gate.T, approximate=\"tanh\")",
             ("silu", "gelu", "swish", "activation"),
             "gates with GPT-2's tanh GELU instead of SiLU")),
    ("05", M("pre_norm_block", "    x = x + attn(attn_norm(x))  # the branch reads a normalised copy; the stream stays a sum\n"
             "    x = x + mlp(mlp_norm(x))",
             "    h = x + attn(attn_norm(x))  # the branch reads a normalised copy; the stream stays a sum\n"
             "    x = x + mlp(mlp_norm(h))",
             ("residual", "h", "attention's output", "stream", "dropped", "x instead"),
             "names the stream after attention h, then adds the MLP's output to x instead of h: attention's output "
             "is dropped from the stream")),
    ("05", M("Transformer", "v = self.v_proj(x).view(B, T, self.n_kv_heads, self.head_dim)",
             "v = self.v_proj(x).view(B, T, self.n_heads, self.head_dim)",
             ("n_kv_heads", "kv heads", "v_proj", "view", "grouped"),
             "copies the query line for v and leaves n_heads in it: with fewer kv heads the view fails",
             regime="fewer kv heads than query heads")),
    ("05", M("Transformer", "for _ in range(config.n_layers))", "for _ in range(config.n_layers - 1))",
             ("n_layers", "one block", "off by one", "layers", "parameters"),
             "builds n_layers - 1 blocks")),
    ("05", M("Transformer", "x = block(x, self.rope_cos, self.rope_sin, cache, i)",
             "x = block(x, self.rope_sin, self.rope_cos, cache, i)",
             ("cos", "sin", "swapped", "order", "argument"),
             "hands the blocks sin where cos belongs and cos where sin belongs")),
    # ---------------------------------------------------------------- 06
    ("06", M("kv_cache_bytes", "return per_position * seq_len * batch_size * dtype.itemsize",
             "return per_position * seq_len * dtype.itemsize",
             ("batch_size", "batch", "sequences", "per sequence"),
             "leaves batch_size out: the bytes of one sequence", regime="batch_size > 1")),
    # https://github.com/rasbt/LLMs-from-scratch/issues/1061
    ("06", M("attention_step", "mask = tinylm.causal_mask(T, start + T).to(x.device)",
             "mask = torch.triu(torch.ones(T, start + T, dtype=torch.bool, device=x.device), diagonal=start + 1)",
             ("true = may attend", "inverted", "future", "convention", "triu", "keep"),
             "hands SDPA the mask of the future (True above the diagonal), as in "
             "https://github.com/rasbt/LLMs-from-scratch/issues/1061: SDPA's boolean True means may attend, so each "
             "query reads the future and never the past; use causal_mask (tril)")),
    ("06", M("attention_step", "return attn.o_proj(y), k_all, v_all", "return attn.o_proj(y), past_k, past_v",
             ("k_all", "cache", "not updated", "past", "returned"),
             "hands back the cache it was given, past_k and past_v: the new positions are never stored",
             regime="a step after the first")),
    ("06", M("attention_step", "attn_mask=mask)    # (B, nh, T, hd)", "attn_mask=mask, scale=attn.head_dim)    # (B, nh, T, hd)",
             ("scale", "1/sqrt", "head_dim", "sqrt", "temperature"),
             "passes the head size as SDPA's scale, which multiplies the scores: the default is 1/sqrt(head_dim)")),
    # https://github.com/CUNY-CL/yoyodyne/pull/285
    ("06", M("generate_greedy", "next_id = logits.argmax(dim=-1, keepdim=True)", "next_id = logits.max(dim=-1, keepdim=True)[0]",
             ("values", "indices", "max", "argmax", "[1]", "float"),
             "takes element 0 of torch.max's (values, indices): the largest logit, not its index (yoyodyne#285 "
             "replaced such max(...)[1] with argmax: https://github.com/CUNY-CL/yoyodyne/pull/285)")),
    ("06", M("generate_greedy", "logits = model(step_input, cache=cache)[:, -1]", "logits = model(step_input, cache=cache)[-1]",
             ("last position", "[:, -1]", "batch", "axis", "position"),
             "indexes the last batch row, [-1], instead of the last position, [:, -1]")),
    ("06", M("generate_left_padded", "new.append(next_id)", "new.append(next_id[:, None])",
             ("shape", "(b, max_new_tokens)", "stack", "extra axis"),
             "appends (B, 1) columns, which stack on dim 1 into (B, n, 1)")),
    # https://github.com/Lightning-AI/litgpt/pull/1596
    ("06", M("generate_left_padded", "    cache.reset()" + " " * 55 + "# it may hold an earlier batch\n",
             "    cache.k.zero_()\n    cache.v.zero_()\n",
             ("reset", "stale", "length", "earlier batch", "cache"),
             "zeroes the cache's tensors instead of resetting it: its length still counts the earlier batch, the "
             "incomplete clearing of https://github.com/Lightning-AI/litgpt/pull/1596; call cache.reset()",
             regime="a cache used before")),
    # ---------------------------------------------------------------- 07
    ("07", M("repeat_kv", "x = x[:, :, None].expand(B, n_kv, n_rep, T, hd)", "x = torch.cat([x] * n_rep, dim=1)",
             ("repeat_interleave", "tile", "order", "h // n_rep", "groups"),
             "concatenates n_rep copies along the heads: the heads come out tiled (head h reads kv head h % n_kv) "
             "where each must be repeated in place (h // n_rep)", regime="more than one kv head")),
    ("07", M("gqa_attention", "F.scaled_dot_product_attention(q, k, v, is_causal=True)",
             "F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1 / q.shape[-1])",
             ("scale", "sqrt", "1/d", "head_dim"),
             "passes scale=1/head_dim: SDPA's default, 1/sqrt(head_dim), is the right one")),
    # https://github.com/Blaizzy/mlx-vlm/issues/1983
    ("07", M("gqa_step", "q, k = tinylm.apply_rope(q, cos, sin, start), tinylm.apply_rope(k, cos, sin, start)",
             "q, k = tinylm.apply_rope(q, cos, sin), tinylm.apply_rope(k, cos, sin)",
             ("start_pos", "start", "offset", "position 0", "cached positions"),
             "rotates the new tokens from position 0 whatever the cache holds, the decode bug of "
             "https://github.com/Blaizzy/mlx-vlm/issues/1983; pass start", regime="steps after the prefill")),
    ("07", M("gqa_step", "mask = tinylm.causal_mask(T, start + T).to(x.device)",
             "mask = tinylm.causal_mask(T, start + T).to(x.dtype)",
             ("dtype", "device", "float mask", "added", "bool", "0/1"),
             "casts the mask to x's dtype where its device was meant: SDPA adds a float mask (0 and 1) to the "
             "scores instead of blocking the future")),
    ("07", M("decode_bytes_per_token", "+ 2 * d * config.n_kv_heads * hd  #", "+ d * config.n_kv_heads * hd  #",
             ("v_proj", "k and v", "two", "kv"),
             "counts one of the two kv projections: k_proj and v_proj each hold d · n_kv_heads · head_dim")),
    ("07", M("decode_bytes_per_token", "kv_cache = 2 * L * config.n_kv_heads * hd", "kv_cache = 2 * L * config.n_heads * hd",
             ("n_kv_heads", "kv heads", "grouped", "cache"),
             "sizes the cache by the query heads: only n_kv_heads are cached (equal for MHA)",
             regime="fewer kv heads than query heads")),
    # ---------------------------------------------------------------- 08
    ("08", M("top_k_filter", "kth = logits.topk(k, dim=-1).values[..., -1:]", "kth = logits.topk(k, dim=-1).indices[..., -1:]",
             ("indices", "values", "index", "k-th largest", "kth"),
             "compares the logits with the k-th largest's index instead of its value")),
    ("08", M("top_k_filter", "return logits.masked_fill(logits < kth", "return logits.masked_fill_(logits < kth",
             ("in place", "masked_fill_", "caller", "input", "modif"),
             "fills in place with masked_fill_: the caller's logits are overwritten")),
    ("08", M("top_k_filter", "k = min(k, logits.shape[-1])", "k = max(k, logits.shape[-1])",
             ("min", "max", "every token", "vocabulary", "k"),
             "writes max for min: k becomes the whole vocabulary and nothing is filtered")),
    ("08", M("top_p_filter", "sorted_logits, order = logits.sort(dim=-1, descending=True)",
             "order, sorted_logits = logits.sort(dim=-1, descending=True)",
             ("values", "indices", "order", "unpack", "sort returns"),
             "unpacks sort's (values, indices) the other way round: the softmax is taken of the indices")),
    ("08", M("top_p_filter", "return logits.masked_fill(drop, float(\"-inf\"))",
             "return logits.masked_fill(drop_sorted, float(\"-inf\"))",
             ("sorted order", "vocabulary order", "drop_sorted", "scatter", "unsort"),
             "masks with drop_sorted, the mask in sorted order, instead of drop: the wrong tokens are removed")),
    ("08", M("sample_next", "probs = logits.softmax(dim=-1)", "probs = torch.exp(logits - logits.max())",
             ("max", "per row", "underflow", "softmax", "normalis"),
             "exponentiates after subtracting the largest logit of the whole batch, counting on multinomial to "
             "normalise: a row far below the batch's maximum underflows to all zeros", regime="rows far apart")),
    ("08", M("sample_next", "return logits.argmax(dim=-1)          # greedy",
             "return logits.argmax(dim=-1, keepdim=True)  # greedy",
             ("keepdim", "(b,)", "(b, 1)", "shape"),
             "keeps the vocabulary axis in the greedy branch: (B, 1) where (B,) is returned otherwise",
             regime="temperature 0")),
    # https://github.com/Adibvafa/CodonTransformer/pull/20
    ("08", M("generate", "logits = model(idx)[:, -1]                  #", "logits = model(idx)[:, -1] / temperature  #",
             ("temperature", "twice", "double", "squared"),
             "divides by the temperature in generate too, so sample_next scales twice (T² in effect), the bug "
             "https://github.com/Adibvafa/CodonTransformer/pull/20 fixed", regime="a temperature other than 1")),
    # ---------------------------------------------------------------- 09
    ("09", M("get_batch", "idx = starts[:, None] + torch.arange(seq_len + 1)", "idx = starts + torch.arange(seq_len + 1)",
             ("none", "broadcast", "(b, 1)", "unsqueeze", "shape"),
             "adds (B,) starts to (T + 1,) offsets without a new axis: the shapes do not broadcast to (B, T + 1)")),
    # https://github.com/markhliu/DGAI/issues/7
    ("09", M("lm_loss", "F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)",
             "F.cross_entropy(logits.transpose(1, 2).flatten(0, 1), targets.flatten(), ignore_index=-100)",
             ("(n, c", "class axis", "flatten", "layout", "shape", "transpose"),
             "transposes to (B, V, T) for cross_entropy's (N, C, d) layout (https://github.com/markhliu/DGAI/issues/7) "
             "and then flattens as well: the rows are (B·V, T); do one or the other")),
    ("09", M("lr_schedule", "max_lr * (step + 1) / warmup_steps", "max_lr * (step + 1) / (warmup_steps + 1)",
             ("warmup", "max_lr", "off by one", "reaches", "peak"),
             "divides by warmup_steps + 1: the warmup's last step stops short of max_lr")),
    ("09", M("train_step", "return loss.item()", "return lm_loss(model(x), y).item()",
             ("before the step", "after the step", "recomput", "loss.item"),
             "recomputes the loss after optimizer.step() for the return: the loss of the updated model, not the "
             "batch's loss the step was taken on")),
    ("09", M("train_step", "optimizer.zero_grad(set_to_none=True)        #", "model.zero_grad        #",
             ("zero_grad", "call", "parenthes", "accumulate", "leftover"),
             "names model.zero_grad without calling it: the line does nothing and gradients accumulate",
             regime="gradients left from an earlier backward")),
    ("09", M("train_step_accumulated", "total += summed.item()", "total += summed.item() / n_tokens",
             ("mean", "n_tokens", "twice", "returned loss", "divided"),
             "divides each sum by n_tokens as it adds it, then divides the total again: the loss returned is "
             "n_tokens times too small")),
    ("09", M("train_step_costs", "head = V * d ", "head = (0 if config.tie_embeddings else V * d) ",
             ("head", "tied", "lm_head", "matmul"),
             "drops the tied head's matmul: tying shares the matrix, the head still multiplies by it",
             regime="tied embeddings")),
    # ---------------------------------------------------------------- 10
    ("10", M("nll_sum_and_count",
             "nll = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=ignore_index,",
             "nll = F.nll_loss(logits.flatten(0, 1).float().softmax(-1).log(), targets.flatten(), ignore_index=ignore_index,",
             ("log_softmax", "log(softmax", "underflow", "-inf", "stable", "cross_entropy"),
             "takes log(softmax(...)) for the NLL: a probability that underflows to 0 gives -inf; use cross_entropy "
             "(or log_softmax)", regime="large logits")),
    # https://github.com/ufal/neuralmonkey/pull/806
    ("10", M("nll_sum_and_count", "count = int((targets != ignore_index).sum())", "count = len(targets.view(-1))",
             ("padding", "ignore_index", "count", "scored", "every target"),
             "counts every target, padding included, the mean over padded positions neuralmonkey#806 fixed in its "
             "perplexity (https://github.com/ufal/neuralmonkey/pull/806): count targets != ignore_index",
             regime="padding")),
    ("10", M("evaluate", "total, count = 0.0, 0", "total, count = torch.tensor(0.0, dtype=torch.bfloat16), 0",
             ("bfloat16", "precision", "accumulat", "float32", "round"),
             "accumulates the summed NLL in a bfloat16 tensor: every addition rounds to 8 bits of mantissa")),
    ("10", M("evaluate", "loss / math.log(2) / bytes_per_token", "loss / math.log(2) / 8 / bytes_per_token",
             ("8", "bits per byte", "byte", "bits"),
             "divides by 8 more, as if bits per byte meant bits over eight: a token's bits go over its bytes only")),
    ("10", M("evaluate", "        model.train(was_training)\n", "        model.train()\n",
             ("eval mode", "was_training", "mode", "restore", "train mode"),
             "puts the model in train mode afterwards whatever mode it came in", regime="a model handed over in eval mode")),
    ("10", M("bigram_nll", "return -probs.log()[val[:-1], val[1:]].mean().item()",
             "return -probs.log10()[val[:-1], val[1:]].mean().item()",
             ("nats", "log10", "natural log", "base", "ln"),
             "takes log10: the NLL is asked in nats, the natural log")),
    ("10", M("bigram_nll", "torch.bincount(train[:-1] * 256 + train[1:]", "torch.bincount(val[:-1] * 256 + val[1:]",
             ("train", "val", "counts", "held-out", "leak"),
             "counts the pairs of val, the other argument, instead of train: the model is fitted on what it is scored on")),
]

SAME = [
    ("01", M("embed", "return weight[ids]", "return weight.index_select(0, ids.flatten()).view(*ids.shape, weight.shape[-1])", (),
             "index_select on the flattened ids, viewed back")),
    ("01", M("one_hot_embed", ".to(weight.dtype)", ".type_as(weight)", (), "casts with type_as")),
    ("01", M("tie_weights", "lm_head.weight = tok_emb.weight", 'setattr(lm_head, "weight", tok_emb.weight)', (),
             "assigns the Parameter through setattr")),
    ("02", M("rms_norm", "inv_rms = torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)",
             "inv_rms = (x32.pow(2).mean(dim=-1, keepdim=True) + eps) ** -0.5", (), "a power of -0.5 for rsqrt")),
    ("03", M("causal_attention", "scores = q @ k.transpose(-2, -1)", "scores = q @ k.mT", (), "k.mT for the transpose")),
    ("03", M("split_heads", "return x.transpose(1, 2)                 #", "return x.permute(0, 2, 1, 3)             #", (),
             "permute for the transpose")),
    ("04", M("rope_cache", "torch.outer(torch.arange(max_seq_len, dtype=torch.float32), inv_freq)",
             "torch.arange(max_seq_len, dtype=torch.float32)[:, None] * inv_freq[None, :]", (),
             "a broadcast product for torch.outer")),
    ("04", M("rope_cache", "torch.cat((angles, angles), dim=-1)", "angles.repeat(1, 2)", (), "repeat(1, 2) for the cat")),
    ("05", M("swiglu", "gate = F.silu(x @ w_gate.T)", "gate = F.silu(F.linear(x, w_gate))", (), "F.linear for x @ w_gate.T")),
    ("07", M("gqa_attention", "n_rep = q.shape[1] // k.shape[1]", "n_rep = q.shape[-3] // k.shape[-3]", (),
             "the head axis counted from the end")),
    ("08", M("top_k_filter", "logits.topk(k, dim=-1).values[..., -1:]",
             "logits.topk(k, dim=-1).values.amin(dim=-1, keepdim=True)",
             (), "the smallest of the k largest")),
    ("08", M("sample_next", "torch.multinomial(probs, num_samples=1, generator=generator).squeeze(-1)",
             "torch.multinomial(probs, 1, generator=generator)[:, 0]", (), "[:, 0] for squeeze(-1)")),
    # https://github.com/karpathy/ng-video-lecture/pull/10
    ("09", M("lm_loss", "F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)",
             "F.cross_entropy(logits.mT, targets, ignore_index=-100)", (),
             "cross_entropy on (B, V, T) logits, as https://github.com/karpathy/ng-video-lecture/pull/10 proposed")),
    ("02", M("layer_norm", "var = centred.pow(2).mean(dim=-1, keepdim=True)",
             "var = centred.var(dim=-1, keepdim=True, unbiased=False)",
             (), "the biased variance of the centred values")),
    ("05", M("swiglu", "gate = F.silu(x @ w_gate.T)", "gate = x @ w_gate.T\n    gate = gate * torch.sigmoid(gate)", (),
             "SiLU written out as a * sigmoid(a)")),
    ("04", M("rotary_attention", "k = apply_rope(k, cos, sin, start_pos)",
             "k = apply_rope(k, cos[start_pos:], sin[start_pos:])", (),
             "the tables sliced at start_pos, then the keys rotated from their position 0")),
    ("10", M("bigram_nll", "train[:-1] * 256 + train[1:]", "(train[:-1] << 8) + train[1:]", (), "a shift by 8 bits for * 256")),
]
