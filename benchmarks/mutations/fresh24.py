"""A twenty-fourth held-out set of learner mistakes ("fresh24"), written without
reading the checks: neither autograder/checks/ (any file), tests/checks/,
autograder/diagnosis_*.py, benchmarks/bench_diagnostics.py's source, the
diagnosis sections of docs/benchmarks.md nor tests/course/test_docs.py were
opened, listed or grepped; bench_diagnostics.py, check cells and notebook
checks were never run, and no mistake or SAME edit was tried against a check.

What was opened or run. The brief, the helper rules and mkwt.sh (cat); mkwt.sh
fresh24, git status and the last five lines of git log --oneline. `ls` of the
repository root, benchmarks/, benchmarks/mutations/ and tinylm/ (names only);
`wc -l` of verify_unseen.py, heldout_duplicates.py, verify_heldout.py,
mutations/unseen.py and the unseen_probes*.py files. Through
bench_diagnostics.notebook_cells: the setup cells of notebooks 01 to 03 whole,
those of 04 to 10 with every line naming autograder and every indented
continuation line filtered out, the answer cells of all ten (also written to
a scratch folder to copy the original texts from), and of its third result
only the check names. Whole: benchmarks/mutations/__init__.py, unseen.py (the
entry class and its entries), verify_unseen.py, heldout_duplicates.py,
verify_heldout.py, unseen_probes.py, unseen_probes_later.py,
unseen_probes_fresh22.py and unseen_probes_fresh23.py. Of the other sets only
fresh23.py's module docstring, printed with python. In tinylm/: a grep of
kv_cache.py, model.py and sampling.py for their definitions, kv_cache.py
lines 1-110, model.py lines 76-150, attention.py's causal_attention (a grep
with 25 lines after) and causal_mask's first lines, training.py's lr_at,
config.py lines 1-12, a grep of it for d_ff, head_dim and tie_emb, and a grep of
tinylm/*.py for default_d_ff (8 lines after). The
torch version. A grep for "fresh23" over the four registration files named in
the brief, then lines 161-195 of tests/course/test_benchmarks.py. A grep of
pyproject.toml, Makefile and setup.cfg for a line-length setting, and awk
counts of line lengths (numbers only) of this file, unseen.py,
verify_unseen.py and unseen_probes.py. Public threads were found with 14
searches of issue threads; each candidate's URL was grepped over
benchmarks/mutations/ (`grep -rl URL`, the URL only: 44 URLs, of which 17 were
already in fresh10 to fresh22 and were not used). Run: verify_unseen.py --set
fresh24 (five runs) and heldout_duplicates.py --set fresh24 (four
runs), and the two fresh24 tests of test_benchmarks.py (-k fresh24).

Slips, none touching a check's text: the setup cells of 01 to 03, printed as
allowed, name the check functions they import (import lines only); the five
git log subjects printed at the start describe recent changes to the checks in
a sentence each (e.g. how RMSNorm's default eps is now measured); lines
161-195 of test_benchmarks.py hold the end of an unrelated test and the
docstrings of the two set tests, which name docs/benchmarks.md and
test_diagnostics (names only, not opened); heldout_duplicates printed, for
the two entries of this set that matched on its first run, the names of the
sets holding them (no entry of theirs).

Duplicates, honestly. heldout_duplicates matched 2 of 81 entries on its first
run (the RMSNorm gains left out of decode_bytes_per_token, and perplexity as
2 ** loss); both were replaced by different mistakes (the four attention
matrices counted d x d, and nats turned to bits by multiplying with ln 2),
then 0. Several ideas are not new to the collection though their code is:
the variance's correction (here through torch.var_mean), an ignored eps
(through F.normalize), the -inf filler (here -10000), SDPA's top-left
is_causal, a top-p that drops the crossing token, the generator ignored, the
kv heads tiled instead of grouped, the float16 squares. 72 mistakes and 21
SAME edits were drafted; 8 mistakes and 4 SAME edits were dropped to keep the
set near its size (the tie made the other way round, F.layer_norm without eps,
an einsum that indexes v by the query, the angles repeat_interleave'd,
param_counts with the 8/3 width for a given d_ff, a round-up that adds a whole
multiple, the padding counted in n_tokens, float32 bigram probabilities; SAME:
the one-hot product as an einsum, the ceiling by negative floor division, a
boolean index for masked_fill, the last T rows of the square mask). Verify
first found no probe that saw the pad mask read off the ids (a small model's
greedy tokens survived it), so the probe records the attention_mask handed to
the model instead; and a comment placed inside evaluate's one-line return
dict turned one replacement into a syntax error, fixed by leaving it out.

The set's focus, each mistake counted once by its main kind.
The learner's own route (27): a mistake inside code written in another style
than the solution's: einsum with the output laid out bvt; x @ weight.data.T;
nn.Parameter(tok_emb.weight) for the tie; the rms from
torch.linalg.vector_norm divided by d instead of sqrt(d); torch.var_mean's
default correction; the gain registered as a buffer; ~triu for tril at the
same diagonal; unflatten(-1, (hd, H)) for the head split; torch.stack of the
heads on the last axis for the merge; a loop over heads that slices the
weights' columns; torch.polar(angles, 1) with its arguments swapped;
view_as_complex RoPE whose view_as_real result is flattened back
(interleaved); q and k joined on the positions axis for one apply_rope call;
a loop over the two residual branches that restarts from x; a while loop
bounded with <=; right padding; a loop over query heads that picks kv head
h // n_kv; the square mask's first T rows; torch.kthvalue(k) (the k-th
smallest); a while loop on the total length; torch.randperm for the starts;
log_softmax and gather with -100 still in the index; clipping by hand without
the root; stacked micro-batch losses averaged before the division by
n_tokens; the padding marked as the negative targets; nats to bits by
multiplying with ln 2; the bigram counts normalised by columns. Entry states
and sizes (15): ids without a batch axis (index_select then view(B, T, -1)),
torch.eye in the default dtype and device, a sign vector of float32 ones for
bfloat16 x, the key rows converted in n_heads blocks under GQA, blocks called
without their cache index (only a KV cache shows it), torch.finfo for an int8
cache, cache_update preallocated with torch.zeros' defaults (bfloat16 cache),
new tokens stacked (steps, B) and viewed (B, steps) (right for a batch of
one), every chosen token fed back (the cache overflows when the last token
reaches max_seq_len), the k largest scattered into -inf (ties dropped),
top_p and top_k passed in the wrong order (only with a filter), a default
generator seeded at 0 (only without a caller's generator), the cosine scaled
by max_lr (right at min_lr 0), the mean loss times the count (a batch of
padding only), bits per byte multiplied by bytes_per_token. Public bugs (10,
below). Accounting wrong by a term (6): the masked half of the scores left
out of attention_flops, a learned position table in param_counts, the cached
keys sized d_model, the untied embedding left out of the bytes read, the
attention matrices counted d x d, the score matmuls counted per kv head.
Numerics (4, and the -10000 filler among the public ones): F.normalize, whose
clamp replaces the caller's eps; RMSNorm's formula inline in float16;
sigmoid written e^a / (1 + e^a); log(sum(exp)) in lm_loss. Look-alikes (2):
the row order arange(hd).view(2, hd/2).T (the numbers of the inverse
conversion, equal for head_dim 4) and kv head h % n_kv (the numbers of
x.repeat(1, n_rep, 1, 1), equal for one kv head).

Sources: a learner working through the notebooks and, for 10 mistakes,
threads of public projects (the URL is in a comment above the entry and in
its reason): transformers#12109 (-10000 as the mask value), lit-llama#408
(Llama's int(2 · 4d / 3) before the round-up), pytorch#59925 (blocks in a
plain list), onnx#8054 (is_causal's top-left alignment for a chunk after a
cache), trl#6357 (pad ids inside real text), keras-hub#233 (the crossing
token kept only by a shift), pytorch PR 146333 (Distribution.sample takes no
generator), unsloth-zoo#137 (inference_mode tensors in a later backward),
headCT_foundation#3 (gradients clipped per parameter) and pytorch#3844
(index += with repeated indices).

SAME lists 17 edits, the routes above without their mistake (the mean square
from vector_norm, var_mean with correction=0, the loop over heads, polar(1,
angle), complex RoPE with the halves put back, q and k stacked, the rows by
index, the residual loop, the while loop, kv head h // n_rep by index and in
a loop over query heads, kthvalue(V - k + 1), gather with the index clamped,
clipping by hand with the root, the stacked losses summed, the scored targets
gathered, index_put_ with accumulate=True); a check must pass each.

Counts: 64 mistakes (01: 5, 02: 5, 03: 6, 04: 6, 05: 6, 06: 9, 07: 5, 08: 7,
09: 9, 10: 6), 17 SAME edits, 10 public threads. The new probes, in
benchmarks/unseen_probes_fresh24.py, hand the RMSNorm module float16 input
near 400, cache_update a bfloat16 cache, and generate_left_padded prompts
that hold the pad id as a real token (the attention mask of every pass is
compared). `benchmarks/verify_unseen.py --set fresh24` proves each mistake a
real bug and each SAME edit harmless. `in_lists` is left False throughout:
the project's nbNN lists were not read, so it was not assessed.

Each mistake is one substitution in one answer cell; `expect` holds words a
check that found it would likely say, `regime` the situation in which a
mistake that is right by default shows. Each reason says what the learner did
and the fix."""
from __future__ import annotations

from .unseen import Unseen as M

# notebook 06's generate_greedy, from the prefill to the return
GREEDY_BODY = ("    idx, step_input = prompt, prompt                # prefill: the whole prompt in one pass\n"
               "    with torch.no_grad():                           # decoding never backpropagates\n"
               "        for _ in range(max_new_tokens):\n"
               "            logits = model(step_input, cache=cache)[:, -1]      # (B, V): only the last position predicts\n"
               "            next_id = logits.argmax(dim=-1, keepdim=True)       # (B, 1)\n"
               "            idx = torch.cat((idx, next_id), dim=1)              # (B, T + 1)\n"
               "            step_input = next_id                                # decode: one new token per step\n"
               "    return idx\n")

# notebook 09's train_step_accumulated: the loop over the micro-batches
ACCUMULATION_LOOP = (
    "    total = 0.0\n"
    "    for x, y in micro_batches:\n"
    "        logits = model(x)                                             # (b, T, V)\n"
    "        summed = F.cross_entropy(logits.flatten(0, 1), y.flatten(), ignore_index=-100, reduction=\"sum\")\n"
    "        (summed / n_tokens).backward()                                # .grad += this micro-batch's share\n"
    "        total += summed.item()\n")


def _stacked_losses(reduce: str) -> str:
    """The accumulation loop that keeps each micro-batch's summed loss and calls backward once, on their `reduce`."""
    return ("    total, losses = 0.0, []\n"
            "    for x, y in micro_batches:\n"
            "        logits = model(x)                                             # (b, T, V)\n"
            "        summed = F.cross_entropy(logits.flatten(0, 1), y.flatten(), ignore_index=-100, reduction=\"sum\")\n"
            "        losses.append(summed)                                         # one backward, after the loop\n"
            "        total += summed.item()\n"
            f"    (torch.stack(losses).{reduce}() / n_tokens).backward()\n")


# notebook 09's train_step: the clipping line
CLIP_LINE = "torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)  # global gradient norm <= grad_clip"


def _clipped_by_hand(norm: str) -> str:
    """Clipping written out: every gradient scaled by grad_clip / `norm` of the squared sum, capped at 1."""
    return ("total_sq = sum(float(p.grad.pow(2).sum()) for p in model.parameters() if p.grad is not None)\n"
            f"    scale = min(1.0, grad_clip / ({norm} + 1e-6))                  # the global norm brought to grad_clip\n"
            "    for p in model.parameters():\n"
            "        if p.grad is not None:\n"
            "            p.grad.mul_(scale)")


# notebook 03's self_attention body, and the same written as a loop over heads
SELF_ATTENTION_BODY = (
    "    q, k, v = (split_heads(F.linear(x, w), n_heads) for w in (w_q, w_k, w_v))  # each (B, H, T, hd)\n"
    "    y = causal_attention(q, k, v)                                              # (B, H, T, hd)\n"
    "    return F.linear(merge_heads(y), w_o)                                       # (B, T, d)\n")


def _heads_in_a_loop(projection: str) -> str:
    return ("    hd = x.shape[-1] // n_heads\n"
            "    heads = []\n"
            "    for h in range(n_heads):                                   # one head at a time\n"
            "        rows = slice(h * hd, (h + 1) * hd)                     # head h's rows of each weight\n"
            f"        q, k, v = ({projection} for w in (w_q, w_k, w_v))      # (B, T, hd)\n"
            "        heads.append(causal_attention(q[:, None], k[:, None], v[:, None])[:, 0])\n"
            "    return torch.cat(heads, dim=-1) @ w_o.T                    # heads side by side, then w_o\n")


# notebook 04's apply_rope body, and the same with each pair as one complex number
APPLY_ROPE_BODY = ("    T = x.shape[-2]\n"
                   "    cos = cos[start_pos:start_pos + T].to(x.dtype)  # (T, hd), broadcasts over (B, H)\n"
                   "    sin = sin[start_pos:start_pos + T].to(x.dtype)\n"
                   "    return x * cos + rotate_half(x) * sin\n")


def _complex_rope(back: str) -> str:
    return ("    T, half = x.shape[-2], x.shape[-1] // 2\n"
            "    turn = torch.complex(cos[start_pos:start_pos + T, :half], sin[start_pos:start_pos + T, :half])  # e^(i·angle)\n"
            "    wide = x.to(torch.promote_types(x.dtype, cos.dtype))           # complex numbers need float32 or float64\n"
            "    pairs = torch.view_as_complex(torch.stack(wide.chunk(2, dim=-1), dim=-1))  # feature i + i·(i + hd/2)\n"
            "    turned = torch.view_as_real(pairs * turn)                   # (..., hd/2, 2): real and imaginary parts\n"
            f"    return {back}.to(x.dtype)\n")


# notebook 04's rope_cache tail, and the same through torch.polar
ROPE_TAIL = ("    angles = torch.cat((angles, angles), dim=-1)  # (T, hd): feature i and i + hd/2 share an angle\n"
             "    return angles.cos(), angles.sin()\n")


def _polar_tail(arguments: str) -> str:
    return (f"    rotation = torch.polar({arguments})  # one unit complex number per angle\n"
            "    cos, sin = rotation.real, rotation.imag\n"
            "    return torch.cat((cos, cos), dim=-1), torch.cat((sin, sin), dim=-1)\n")


# notebook 04's interleaved_to_half body, and the same through an index of rows
HALF_BODY = ("    pairs = w.reshape(n_heads, hd // 2, 2, d_in)      # (nh, hd/2, 2, d_in): pair i of head h is rows 2i, 2i+1\n"
             "    return pairs.transpose(1, 2).reshape(rows, d_in)  # (nh, 2, hd/2, d_in): each head's evens, then its odds\n")


def _rows_by_index(grid: str) -> str:
    return (f"    order = torch.arange(hd).view({grid}).T.flatten()  # the old row that each new row takes\n"
            "    return w.reshape(n_heads, hd, d_in)[:, order].reshape(rows, d_in)\n")


# notebook 05's pre_norm_block body
PRE_NORM_BODY = ("    x = x + attn(attn_norm(x))  # the branch reads a normalised copy; the stream stays a sum\n"
                 "    x = x + mlp(mlp_norm(x))    # the MLP reads the stream after attention has written to it\n"
                 "    return x\n")


def _branches_in_a_loop(residual: str) -> str:
    return ("    stream = x\n"
            "    for norm, branch in ((attn_norm, attn), (mlp_norm, mlp)):  # the same step, twice\n"
            f"        stream = {residual} + branch(norm(stream))\n"
            "    return stream\n")


# notebook 07's repeat_kv body
REPEAT_BODY = (
    "    B, n_kv, T, hd = x.shape\n"
    "    x = x[:, :, None].expand(B, n_kv, n_rep, T, hd)  # (B, n_kv, n_rep, T, hd): a view, copies of each kv head side by side\n"
    "    return x.reshape(B, n_kv * n_rep, T, hd)          # (B, n_kv * n_rep, T, hd): groups stay contiguous\n")


def _kv_head_of_each(which: str) -> str:
    return (f"    heads = torch.arange(x.shape[1] * n_rep) {which}  # the kv head each query head reads\n"
            "    return x[:, heads]\n")


# notebook 07's gqa_attention body, and the same one query head at a time
GQA_BODY = ("    n_rep = q.shape[1] // k.shape[1]\n"
            "    k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)  # (B, n_heads, T, hd): only inside attention\n"
            "    return F.scaled_dot_product_attention(q, k, v, is_causal=True)\n")


def _query_heads_in_a_loop(kv_head: str) -> str:
    return ("    n_kv, out = k.shape[1], []\n"
            "    for h in range(q.shape[1]):                       # one query head at a time\n"
            f"        g = {kv_head}                                 # the kv head it shares\n"
            "        out.append(F.scaled_dot_product_attention(q[:, h:h + 1], k[:, g:g + 1], v[:, g:g + 1], is_causal=True))\n"
            "    return torch.cat(out, dim=1)\n")


# notebook 08's top_p_filter: the mass before each token and the drop rule
MASS_BEFORE = ("    mass_before = probs.cumsum(dim=-1) - probs                    # mass of the strictly more likely tokens\n"
               "    drop_sorted = mass_before >= p                                # the crossing token has mass_before < p\n")

# notebook 09's lm_loss line
LM_LOSS_LINE = ("    return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)"
                "  # (B*T, V) vs (B*T,)\n")


def _gathered_nll(index: str) -> str:
    return ("    logp = logits.log_softmax(dim=-1)                               # (B, T, V)\n"
            f"    nll = -logp.gather(-1, {index}[..., None]).squeeze(-1)          # (B, T): each target's -log p\n"
            "    return nll[targets != -100].mean()                              # the padding left out\n")


# notebook 10's nll_sum_and_count body
NLL_BODY = ("    nll = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=ignore_index,\n"
            "                          reduction=\"sum\")                       # (B*T, V) vs (B*T,) -> scalar\n"
            "    count = int((targets != ignore_index).sum())                 # padding is not a token\n"
            "    return nll.item(), count\n")


def _scored_by(rule: str) -> str:
    return (f"    scored = {rule}                                # the targets that count\n"
            "    logp = logits.float().log_softmax(dim=-1)                    # (B, T, V)\n"
            "    nll = -logp[scored].gather(-1, targets[scored][:, None]).sum()\n"
            "    return nll.item(), int(scored.sum())\n")


# notebook 10's bigram counts
BINCOUNT_LINE = ("    counts = torch.bincount(train[:-1] * 256 + train[1:], minlength=256 * 256).view(256, 256).double()"
                 "  # [prev, next]\n")

MUTATIONS = {
    "01": [
        M("embed", "return weight[ids]  # advanced indexing: one row of weight per id, gradient flows to those rows",
          "return weight.index_select(0, ids.reshape(-1)).view(ids.shape[0], ids.shape[1], -1)  # one row per id",
          ("batch axis", "(t,)", "flat ids", "1-d", "any shape", "ids.shape", "shape of ids", "leading axes", "view"),
          "looks the rows up with index_select on the flattened ids and restores them as (B, T, d): ids without a "
          "batch axis, (T,), have no ids.shape[1]; view(*ids.shape, -1) restores any shape",
          regime="ids without a batch axis (T,)"),
        M("one_hot_embed", "one_hot = F.one_hot(ids, num_classes=weight.shape[0]).to(weight.dtype)  # (..., V)",
          "one_hot = torch.eye(weight.shape[0])[ids]  # (..., V): row i of the identity is the one-hot of i",
          ("dtype", "bfloat16", "float32", "device", "weight.dtype", "torch.eye", "identity", "mat1 and mat2"),
          "builds the one-hot rows from torch.eye with the default dtype and device: a bfloat16 or GPU weight then "
          "meets a float32 CPU matrix; torch.eye(V, dtype=weight.dtype, device=weight.device)",
          regime="a weight in another dtype or on another device than float32 on the CPU"),
        M("tied_logits", "return x @ weight.T  # (B, T, d) @ (d, V) -> (B, T, V)",
          'return torch.einsum("btd,vd->bvt", x, weight)  # one logit per vocabulary entry and position',
          ("(b, v, t)", "(b, t, v)", "einsum", "output layout", "axes", "transpos", "vocabulary axis last", "shape"),
          "writes the einsum's output as bvt, the (B, V, T) layout cross_entropy takes: logits must be (B, T, V), "
          "\"btd,vd->btv\""),
        M("tied_logits", "return x @ weight.T  # (B, T, d) @ (d, V) -> (B, T, V)",
          "return x @ weight.data.T  # (B, T, d) @ (d, V) -> (B, T, V)",
          (".data", "gradient", "grad", "detach", "autograd", "does not train", "no gradient"),
          "multiplies by weight.data, a tensor autograd does not track: the tied matrix gets no gradient from the "
          "head; use weight itself"),
        M("tie_weights", "lm_head.weight = tok_emb.weight  # the same Parameter object, not a copy of its values",
          "lm_head.weight = nn.Parameter(tok_emb.weight)  # the head's weight, made from the embedding",
          ("same parameter", "same nn.parameter", "is tok_emb.weight", "new parameter", "two parameters", "not tied",
           "separate", "nn.parameter("),
          "wraps the embedding in a new nn.Parameter: it shares the storage but is a second Parameter object, with "
          "its own .grad; assign tok_emb.weight itself"),
    ],
    "02": [
        M("rms_norm", "inv_rms = torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)  # (..., 1): one statistic per token",
          "inv_rms = 1 / (torch.linalg.vector_norm(x32, dim=-1, keepdim=True) / x32.shape[-1] + eps)  # the rms from "
          "the 2-norm",
          ("sqrt(d)", "sqrt of d", "2-norm", "vector_norm", "divid", "rms", "scale", "root mean square"),
          "takes the rms as the 2-norm divided by d: ||x|| / sqrt(d) is the root of the mean square, so each token "
          "comes out sqrt(d) times too large"),
        M("rms_norm", "return weight * (x32 * inv_rms).to(x.dtype)",
          "return weight * (F.normalize(x32, dim=-1) * x.shape[-1] ** 0.5).to(x.dtype)  # x / ||x|| · sqrt(d) = x / rms",
          ("eps", "epsilon", "normalize", "mean square", "small", "near zero"),
          "normalises with F.normalize, which divides by max(||x||, 1e-12): the caller's eps never enters, so "
          "tokens whose mean square is near or below eps come out unit-rms instead of damped",
          regime="tokens of small mean square (where eps matters), or an eps other than the default"),
        M("RMSNorm", "return rms_norm(x, self.weight, self.eps)",
          "return self.weight * x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)  # the formula inline",
          ("float16", "fp16", "overflow", "float32", "upcast", "inf", "half"),
          "writes the formula inline in the input's precision: a float16 entry near 400 squares past 65504 to inf "
          "and the token comes out 0; compute the statistic in float32 (or call rms_norm)",
          regime="float16 input with entries above 256"),
        M("layer_norm", "    centred = x - x.mean(dim=-1, keepdim=True)              # (..., d)\n"
          "    var = centred.pow(2).mean(dim=-1, keepdim=True)         # (..., 1): biased, divides by d\n"
          "    return weight * centred * torch.rsqrt(var + eps) + bias",
          "    var, mean = torch.var_mean(x, dim=-1, keepdim=True)     # both statistics in one pass\n"
          "    return weight * (x - mean) / torch.sqrt(var + eps) + bias",
          ("unbiased", "biased", "d - 1", "n - 1", "bessel", "correction", "divides by d"),
          "takes torch.var_mean's default unbiased variance (divides by d - 1); LayerNorm divides by d: correction=0"),
        M("RMSNorm", "self.weight = nn.Parameter(torch.ones(dim))  # gain starts at 1: a fresh norm only rescales",
          'self.register_buffer("weight", torch.ones(dim))  # the gain, saved with the module',
          ("parameter", "buffer", "not trained", "parameters()", "register_buffer", "learnable", "optimizer"),
          "registers the gain as a buffer: it is saved and moved with the module but is no Parameter, so no "
          "optimizer ever trains it"),
    ],
    "03": [
        M("causal_mask", "return allowed.tril(diagonal=kv_len - q_len)  # query i is position kv_len - q_len + i",
          "return ~allowed.triu(diagonal=kv_len - q_len)  # blocked: the keys after each query's position",
          ("diagonal", "itself", "own position", "triu", "off by one", "+ 1", "first query", "no key"),
          "blocks with triu at the query's own diagonal: triu keeps that diagonal, so every query loses its own "
          "key and the first sees none; the keys after it start at diagonal kv_len - q_len + 1"),
        M("split_heads", "    x = x.view(B, T, n_heads, d // n_heads)  # (B, T, H, hd): head h owns features h*hd .. (h+1)*hd - 1\n"
          "    return x.transpose(1, 2)                 # (B, H, T, hd)",
          "    return x.unflatten(-1, (d // n_heads, n_heads)).permute(0, 3, 1, 2)  # (B, H, T, hd)",
          ("contiguous", "every h-th", "strided", "interleav", "features of head", "h*hd", "block of", "order"),
          "unflattens the features as (hd, H): head h gets features h, h + H, h + 2H, ..., not the block h·hd .. "
          "(h+1)·hd - 1; unflatten(-1, (n_heads, hd)) then transpose(1, 2)"),
        M("split_heads", "return y.transpose(1, 2).reshape(B, T, H * hd)  # (B, T, H, hd) -> (B, T, d): heads side by side",
          "return torch.stack([y[:, h] for h in range(H)], dim=-1).reshape(B, T, H * hd)  # each head's (B, T, hd)",
          ("stack", "dim=-1", "interleav", "side by side", "merge_heads", "feature order", "concatenat", "torch.cat"),
          "stacks the heads on a new last axis: (B, T, hd, H) reshaped interleaves the heads feature by feature; "
          "torch.cat(..., dim=-1) puts them side by side"),
        # https://github.com/huggingface/transformers/issues/12109
        M("causal_attention", 'scores = scores.masked_fill(~mask, float("-inf"))',
          "scores = scores.masked_fill(~mask, -10000.0)  # a large negative number, as BERT's mask",
          ("-inf", "infinity", "-10000", "large negative", "future", "leak", "finite"),
          "fills the future with -10000, the value BERT's extended attention mask adds (thread: "
          "https://github.com/huggingface/transformers/issues/12109): when the allowed scores lie below -1e4, the "
          "future keys get the weight; use -inf",
          regime="scores below -1e4"),
        M("self_attention", SELF_ATTENTION_BODY, _heads_in_a_loop("x @ w[:, rows]"),
          ("[d_out, d_in]", "w[rows]", "columns", "rows", "layout", "transpose", "w.t", "projection"),
          "computes each head in a loop but slices the weights' columns and multiplies without the transpose: "
          "nn.Linear weights are [d_out, d_in], head h's projection is x @ w[rows].T"),
        M("attention_flops", "per_head = 2 * T * T * head_dim             # (T, hd) @ (hd, T) for the scores; (T, T) @ (T, hd) for the mix",
          "per_head = T * (T + 1) * head_dim         # causal: only the T(T+1)/2 allowed scores, 2 FLOPs each",
          ("causal", "masked", "full t x t", "full", "half", "t(t+1)", "triangle", "computed anyway"),
          "counts only the lower triangle of the scores and the mix: the matmuls compute the full T x T, masked "
          "half included"),
    ],
    "04": [
        M("rope_cache", ROPE_TAIL, _polar_tail("angles, torch.ones_like(angles)"),
          ("polar", "abs", "angle", "magnitude", "argument order", "modulus", "cos(1)"),
          "hands torch.polar the angles as the magnitude and 1 as the angle: polar(abs, angle), so the tables are "
          "angles · cos 1 and angles · sin 1; torch.polar(torch.ones_like(angles), angles)"),
        M("apply_rope", APPLY_ROPE_BODY, _complex_rope("turned.flatten(-2)"),
          ("interleav", "flatten", "view_as_real", "halves", "layout", "real and imaginary", "order of features"),
          "turns each pair as one complex number but flattens view_as_real's (..., hd/2, 2) back: real and "
          "imaginary parts come out interleaved; the half layout wants all real parts, then all imaginary ones"),
        M("apply_rope", "    x1, x2 = x.chunk(2, dim=-1)\n    return torch.cat((-x2, x1), dim=-1)",
          "    half = x.shape[-1] // 2\n"
          "    return x.roll(half, dims=-1) * torch.cat((-torch.ones(half), torch.ones(half)))  # (x2, x1) · (-1, 1)",
          ("dtype", "bfloat16", "float32", "promot", "torch.ones", "x.new_ones"),
          "rotates with roll and a sign vector made by torch.ones, float32 on the CPU: a bfloat16 x is promoted "
          "to float32 (and a GPU x meets a CPU tensor); build the signs with x.new_ones",
          regime="half-precision (or GPU) input"),
        M("rotary_attention", "    q = apply_rope(q, cos, sin, start_pos)  # position enters the scores only\n"
          "    k = apply_rope(k, cos, sin, start_pos)",
          "    q, k = apply_rope(torch.cat((q, k), dim=-2), cos, sin, start_pos).chunk(2, dim=-2)  # one call for both",
          ("positions", "cat", "dim=-2", "sequence axis", "start_pos", "keys at", "shifted", "rotated at"),
          "joins q and k on the positions axis for one apply_rope call: the keys are rotated as positions T .. 2T-1 "
          "after the queries; stack them on a new axis instead"),
        M("interleaved_to_half", HALF_BODY, _rows_by_index("2, hd // 2"),
          ("inverse", "evens", "odds", "permutation", "other direction", "half_to_interleaved", "order"),
          "builds the row order as arange(hd).view(2, hd/2).T: that is (0, hd/2, 1, hd/2 + 1, ...), the "
          "half-to-interleaved order; view(hd // 2, 2).T gives the evens, then the odds"),
        M("interleaved_to_half", "k_proj = interleaved_to_half(wk, n_kv_heads)  # (n_kv·hd, d): keys too, in their own n_kv_heads blocks",
          "k_proj = interleaved_to_half(wk, n_heads)  # the keys are rotated like the queries",
          ("n_kv_heads", "kv heads", "gqa", "head_dim", "blocks", "n_heads"),
          "converts the key rows in n_heads blocks: with fewer kv heads wk holds n_kv_heads blocks of head_dim rows, "
          "and splitting it n_heads ways cuts each head in pieces",
          regime="fewer kv heads than query heads"),
    ],
    "05": [
        M("swiglu", "gate = F.silu(x @ w_gate.T)  # (B, T, d_ff): the nonlinearity lives on the gate only",
          "a = x @ w_gate.T\n    gate = a * torch.exp(a) / (1 + torch.exp(a))  # SiLU: a · sigmoid(a), written out",
          ("overflow", "exp", "nan", "inf", "large", "stable", "sigmoid", "silu"),
          "writes sigmoid(a) as e^a / (1 + e^a): for a above about 89, e^a is inf in float32 and inf / inf is "
          "NaN; use F.silu (or torch.sigmoid)",
          regime="large activations (gate inputs above about 89)"),
        # https://github.com/Lightning-AI/lit-llama/issues/408
        M("swiglu_hidden", "return multiple * math.ceil(8 * d_model / 3 / multiple)",
          "hidden = int(8 * d_model / 3)  # as Llama's FeedForward: int(2 · 4d / 3)\n"
          "    return multiple * ((hidden + multiple - 1) // multiple)",
          ("8/3", "floor", "int(", "round", "fraction", "truncat", "rounded up"),
          "floors 8/3 · d_model before rounding up, as Llama's and lit-llama's FeedForward do (thread: "
          "https://github.com/Lightning-AI/lit-llama/issues/408): with a multiple of 1 or 2 the fraction is lost, "
          "170 for 8/3 · 64 instead of 171",
          regime="a multiple of 1 or 2"),
        M("pre_norm_block", PRE_NORM_BODY, _branches_in_a_loop("x"),
          ("residual", "stream", "attention's output", "block's input", "original x", "dropped", "after attention"),
          "loops over the two branches but adds each to the block's input x: the MLP's residual starts again from "
          "x and attention's contribution is dropped from the output"),
        # https://github.com/pytorch/pytorch/issues/59925
        M("Transformer", "self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layers))",
          "self.blocks = [Block(config) for _ in range(config.n_layers)]  # one Block per layer",
          ("modulelist", "list", "registered", "parameters", "state_dict", "missing", "blocks."),
          "keeps the blocks in a plain Python list (thread: https://github.com/pytorch/pytorch/issues/59925): "
          "nn.Module does not register them, so their weights are not in parameters() or state_dict and never "
          "train; nn.ModuleList"),
        M("Transformer", "x = block(x, self.rope_cos, self.rope_sin, cache, i)",
          "x = block(x, self.rope_cos, self.rope_sin, cache)  # the cache knows where to write",
          ("layer_idx", "layer 0", "every layer", "same slot", "cache", "overwrit", "i)"),
          "calls each block without its index: every layer stores its keys and values in layer 0's slot of the "
          "cache, and each reads the last layer's",
          regime="a KV cache (decoding after a prefill)"),
        M("param_counts", 'return {"embedding": config.vocab_size * d,',
          'return {"embedding": (config.vocab_size + config.max_seq_len) * d,  # token and position tables',
          ("position", "max_seq_len", "rope", "no parameters", "embedding", "learned position"),
          "counts a learned position table of max_seq_len rows, as GPT-2 has: RoPE's positions have no parameters"),
    ],
    "06": [
        M("kv_cache_bytes", "return per_position * seq_len * batch_size * dtype.itemsize",
          "return per_position * seq_len * batch_size * torch.finfo(dtype).bits // 8  # bytes per number",
          ("int8", "integer", "finfo", "iinfo", "itemsize", "element_size", "dtype"),
          "reads the size from torch.finfo, which only knows floating dtypes: an int8 cache raises; dtype.itemsize",
          regime="an integer (quantised) cache dtype"),
        M("kv_cache_bytes", "per_position = 2 * config.n_layers * config.n_kv_heads * config.head_dim  # K and V, in every block",
          "per_position = 2 * config.n_layers * config.d_model  # K and V, one d_model-wide vector each, every block",
          ("n_kv_heads", "kv heads", "gqa", "d_model", "query heads", "n_heads"),
          "sizes each cached key and value as d_model: with fewer kv heads they are n_kv_heads · head_dim wide",
          regime="fewer kv heads than query heads (GQA)"),
        M("cache_update", "    k_all = torch.cat((past_k, k), dim=2)  # positions are axis 2: the past first, then the new tokens\n"
          "    v_all = torch.cat((past_v, v), dim=2)\n",
          "    B, H, T_past, hd = past_k.shape\n"
          "    T_all = T_past + k.shape[2]\n"
          "    k_all, v_all = torch.zeros(B, H, T_all, hd), torch.zeros(B, H, T_all, hd)  # room for every position\n"
          "    k_all[:, :, :T_past], k_all[:, :, T_past:] = past_k, k\n"
          "    v_all[:, :, :T_past], v_all[:, :, T_past:] = past_v, v\n",
          ("dtype", "bfloat16", "float32", "device", "zeros", "new_zeros", "torch.cat"),
          "preallocates the joined tensors with torch.zeros' defaults: a bfloat16 (or GPU) cache comes back "
          "float32 on the CPU; past_k.new_zeros or torch.cat keep the cache's dtype and device",
          regime="a bfloat16 (or GPU) cache"),
        # https://github.com/onnx/onnx/issues/8054
        M("attention_step", "y = F.scaled_dot_product_attention(q, k_all, v_all, attn_mask=mask)    # (B, nh, T, hd)",
          "y = F.scaled_dot_product_attention(q, k_all, v_all, is_causal=T > 1)  # a one-token step sees every key",
          ("is_causal", "top-left", "bottom-right", "chunk", "offset", "cached", "start", "alignment"),
          "asks SDPA for is_causal when more than one token arrives: its causal mask is aligned top-left, right for "
          "a prefill from an empty cache but not for a chunk after cached positions (thread: "
          "https://github.com/onnx/onnx/issues/8054); pass the bottom-right mask",
          regime="more than one new token after cached positions (a prefill in chunks)"),
        M("generate_greedy", "        for _ in range(max_new_tokens):\n"
          "            logits = model(step_input, cache=cache)[:, -1]      # (B, V): only the last position predicts\n",
          "        while idx.shape[1] <= prompt.shape[1] + max_new_tokens:  # until the new tokens are there\n"
          "            logits = model(step_input, cache=cache)[:, -1]      # (B, V): only the last position predicts\n",
          ("one too many", "max_new_tokens", "off by one", "<=", "extra token", "loop", "length"),
          "stops the while loop at <=: it runs until prompt + max_new_tokens + 1 ids, one new token too many"),
        M("generate_greedy", GREEDY_BODY,
          "    step_input, new = prompt, []                    # prefill: the whole prompt in one pass\n"
          "    with torch.no_grad():                           # decoding never backpropagates\n"
          "        for _ in range(max_new_tokens):\n"
          "            logits = model(step_input, cache=cache)[:, -1]      # (B, V): only the last position predicts\n"
          "            next_id = logits.argmax(dim=-1, keepdim=True)       # (B, 1)\n"
          "            new.append(next_id[:, 0])                           # (B,)\n"
          "            step_input = next_id                                # decode: one new token per step\n"
          "    return torch.cat((prompt, torch.stack(new).view(prompt.shape[0], -1)), dim=1)\n",
          ("stack", "batch", "(b, n)", "transpose", "rows", "view", "order", "dim=1"),
          "stacks the new tokens as (steps, B) and views that as (B, steps): right for one prompt, but with more "
          "the rows mix; torch.stack(new, dim=1)",
          regime="a batch of more than one prompt"),
        M("generate_greedy", GREEDY_BODY,
          "    with torch.no_grad():                           # decoding never backpropagates\n"
          "        logits = model(prompt, cache=cache)[:, -1]  # prefill\n"
          "        idx = prompt\n"
          "        for _ in range(max_new_tokens):\n"
          "            next_id = logits.argmax(dim=-1, keepdim=True)       # (B, 1)\n"
          "            idx = torch.cat((idx, next_id), dim=1)              # (B, T + 1)\n"
          "            logits = model(next_id, cache=cache)[:, -1]         # the next step's logits\n"
          "    return idx\n",
          ("max_seq_len", "last token", "full", "cache is full", "one forward too many", "never fed", "extra forward"),
          "feeds every chosen token back, the last one too: one forward pass more than needed, which overflows the "
          "cache when the last token reaches max_seq_len",
          regime="prompt + new tokens reaching max_seq_len + 1"),
        # https://github.com/huggingface/trl/pull/6357
        M("generate_left_padded", "    positions = (mask.long().cumsum(-1) - 1).clamp(min=0)",
          "    mask = ids != pad_id                                                # real tokens: every id but the padding\n"
          "    positions = (mask.long().cumsum(-1) - 1).clamp(min=0)",
          ("pad_id", "real token", "mask from the ids", "ids != pad_id", "inside", "padding mask", "token 0"),
          "reads the padding mask off the ids: a real token equal to pad_id inside a prompt is masked as padding "
          "too (thread: https://github.com/huggingface/trl/pull/6357); mark the padding where it is put",
          regime="a prompt that holds the pad id as a real token"),
        M("generate_left_padded", "        ids[b, T - len(p):] = p                                         # the padding goes in front\n"
          "        mask[b, T - len(p):] = True",
          "        ids[b, :len(p)] = p                                             # each prompt from slot 0\n"
          "        mask[b, :len(p)] = True",
          ("left", "right", "padding", "in front", "last position", "[:, -1]", "end of the row"),
          "pads on the right, as for training: a shorter row's last slot is padding, and its next token is read "
          "from that slot; the padding goes in front",
          regime="prompts of different lengths"),
    ],
    "07": [
        M("repeat_kv", REPEAT_BODY, _kv_head_of_each("% x.shape[1]"),
          ("interleav", "tile", "group", "h // n_rep", "order", "repeat_interleave", "modulo", "kv head"),
          "maps query head h to kv head h % n_kv: that tiles the kv heads (the numbers of x.repeat(1, n_rep, 1, 1)) "
          "instead of giving each group its own; h // n_rep",
          regime="more than one kv head"),
        M("gqa_attention", GQA_BODY, _query_heads_in_a_loop("h // n_kv"),
          ("n_rep", "h // n_rep", "kv head", "group", "n_kv", "mapping", "index"),
          "loops over the query heads and picks kv head h // n_kv: that is h // n_rep only when n_kv = n_rep; with "
          "one kv head for four, heads 1 to 3 read kv heads that do not exist",
          regime="n_kv_heads other than n_heads / n_kv_heads"),
        M("gqa_step", "mask = tinylm.causal_mask(T, start + T).to(x.device)  # (T, start + T)",
          "mask = tinylm.causal_mask(start + T)[:T].to(x.device)  # the full square mask's rows for the new tokens",
          ("rows", "last t", "bottom", "start", "cached", "offset", "top-left", "[start:]"),
          "takes the first T rows of the square mask: the new tokens are its last T rows, [start:]",
          regime="a step after cached positions"),
        M("decode_bytes_per_token", "matrices = config.vocab_size * d * (1 if config.tie_embeddings else 2)    # a tied head is the embedding",
          "matrices = config.vocab_size * d    # the head's matrix; decoding looks up one embedding row only",
          ("untied", "tie_embeddings", "embedding", "every parameter", "two matrices", "once"),
          "leaves the untied embedding out because a step reads one row of it: the exercise counts every parameter "
          "once, so an untied model holds two V x d matrices",
          regime="untied embeddings"),
        M("decode_bytes_per_token", "attention = 2 * d * config.n_heads * hd + 2 * d * config.n_kv_heads * hd  # q, o; k, v with n_kv heads",
          "attention = 4 * d * d                                                    # q, k, v, o: d x d each",
          ("n_kv_heads", "kv heads", "gqa", "head_dim", "k_proj", "v_proj", "d x d"),
          "counts the four attention matrices as d x d: with fewer kv heads k_proj and v_proj are only "
          "n_kv_heads · head_dim rows tall",
          regime="fewer kv heads than query heads (GQA), or head_dim set apart from d_model / n_heads"),
    ],
    "08": [
        M("top_k_filter", "kth = logits.topk(k, dim=-1).values[..., -1:]          # (..., 1): the k-th largest value",
          "kth = logits.kthvalue(k, dim=-1, keepdim=True).values  # (..., 1): the k-th value",
          ("kthvalue", "smallest", "largest", "v - k + 1", "k-th", "kth", "too many"),
          "takes torch.kthvalue(k), the k-th smallest: V - k + 1 tokens survive; kthvalue(V - k + 1) or topk"),
        M("top_k_filter", "    kth = logits.topk(k, dim=-1).values[..., -1:]          # (..., 1): the k-th largest value\n"
          "    return logits.masked_fill(logits < kth, float(\"-inf\"))",
          "    values, indices = logits.topk(k, dim=-1)               # the k largest and where they are\n"
          "    return torch.full_like(logits, float(\"-inf\")).scatter(-1, indices, values)",
          ("tie", "ties", "equal", "k-th", "exactly k", "scatter"),
          "scatters the k largest into a -inf tensor: a token tied with the k-th is dropped, though the filter "
          "keeps ties",
          regime="a tie at the k-th largest"),
        # https://github.com/keras-team/keras-hub/pull/233
        M("top_p_filter", MASS_BEFORE, "    drop_sorted = probs.cumsum(dim=-1) > p                        # past the nucleus's mass\n",
          ("crossing", "cumsum", "mass_before", "shift", "reaches p", "at least one", "first token"),
          "drops where the cumulative mass passes p: the token that crosses p is dropped too, and a p below the top "
          "token's probability drops every token; the keras-hub thread keeps it by shifting the mask one place "
          "(https://github.com/keras-team/keras-hub/pull/233)",
          regime="p below the top token's probability (every token dropped)"),
        # https://github.com/pytorch/pytorch/pull/146333
        M("sample_next", "return torch.multinomial(probs, num_samples=1, generator=generator).squeeze(-1)  # (B, 1) -> (B,)",
          "return torch.distributions.Categorical(probs=probs).sample()  # one draw per row",
          ("generator", "reproducib", "seed", "global rng", "categorical", "random state"),
          "samples with torch.distributions.Categorical, whose sample() takes no generator (thread: "
          "https://github.com/pytorch/pytorch/pull/146333): the caller's generator is ignored and the global RNG "
          "draws",
          regime="a caller's generator"),
        # https://github.com/unslothai/unsloth-zoo/pull/137
        M("generate", "with torch.no_grad():",
          "with torch.inference_mode():  # faster than no_grad: no version counters",
          ("inference_mode", "inference tensor", "no_grad", "backward", "saved for backward", "training step"),
          "generates under torch.inference_mode: the ids it returns are inference tensors, which a later training "
          "step on the generated text cannot save for backward (thread: "
          "https://github.com/unslothai/unsloth-zoo/pull/137); torch.no_grad",
          regime="generated ids used in a later training step"),
        M("generate", "            for _ in range(max_new_tokens):",
          "            while idx.shape[1] < max_new_tokens:  # until max_new_tokens ids",
          ("max_new_tokens", "prompt length", "total length", "new tokens", "loop", "too few"),
          "loops until idx holds max_new_tokens ids in all: the prompt counts against the new tokens"),
        M("generate", "next_id = sample_next(logits, temperature, top_k, top_p, generator)  # (B,)",
          "next_id = sample_next(logits, temperature, top_p, top_k, generator)  # (B,)",
          ("top_k", "top_p", "argument order", "swapped", "positional", "keyword"),
          "passes top_p and top_k positionally in the wrong order: a top_k asked for becomes the nucleus's p",
          regime="a top_k or top_p filter"),
    ],
    "09": [
        M("get_batch", "starts = torch.randint(len(data) - seq_len, (batch_size,), generator=generator)  # (B,) in [0, N - T - 1]",
          "starts = torch.randperm(len(data) - seq_len, generator=generator)[:batch_size]  # distinct windows",
          ("randperm", "replacement", "batch_size", "shape", "fewer rows", "distinct", "windows"),
          "draws distinct starts with randperm: a batch larger than the number of windows comes back short, and "
          "the draws are not independent",
          regime="batch_size above the number of windows"),
        M("get_batch", "    starts = torch.randint(len(data) - seq_len, (batch_size,), generator=generator)",
          "    generator = generator if generator is not None else torch.Generator().manual_seed(0)  # reproducible\n"
          "    starts = torch.randint(len(data) - seq_len, (batch_size,), generator=generator)",
          ("generator", "same batch", "every call", "seed", "global rng", "fixed"),
          "seeds a fresh generator when none is passed: every call without one returns the same batch",
          regime="no generator passed"),
        M("lm_loss", LM_LOSS_LINE, _gathered_nll("targets"),
          ("-100", "padding", "gather", "index", "out of range", "ignore_index", "clamp"),
          "gathers each target's log-probability with the padding's -100 still in the index: the gather fails on "
          "padded targets before the mask removes them; clamp the index first",
          regime="padded targets (-100)"),
        M("lm_loss", LM_LOSS_LINE,
          "    flat, flat_targets = logits.flatten(0, 1), targets.flatten()\n"
          "    keep = flat_targets != -100\n"
          "    log_z = flat[keep].exp().sum(dim=-1).log()                      # log of the softmax's denominator\n"
          "    return (log_z - flat[keep, flat_targets[keep]]).mean()\n",
          ("overflow", "exp", "logsumexp", "inf", "large logits", "stable", "max"),
          "writes the log of the denominator as log(sum(exp)): logits above about 89 overflow to inf; logsumexp "
          "subtracts the maximum",
          regime="large logits"),
        M("lr_schedule", "return min_lr + 0.5 * (1 + math.cos(math.pi * min(progress, 1.0))) * (max_lr - min_lr)",
          "return min_lr + 0.5 * (1 + math.cos(math.pi * min(progress, 1.0))) * max_lr",
          ("min_lr", "max_lr - min_lr", "above max_lr", "range", "cosine"),
          "scales the cosine by max_lr instead of max_lr - min_lr: the decay starts at max_lr + min_lr",
          regime="min_lr above 0"),
        # https://github.com/NYUMedML/headCT_foundation/issues/3
        M("train_step", CLIP_LINE,
          "for p in model.parameters():                 # each weight's gradient norm <= grad_clip\n"
          "        torch.nn.utils.clip_grad_norm_(p, grad_clip)",
          ("global", "each parameter", "per parameter", "separately", "total norm", "whole gradient"),
          "clips each parameter's gradient on its own, as DINO's clip_gradients does (thread: "
          "https://github.com/NYUMedML/headCT_foundation/issues/3): the global norm can stay above grad_clip; "
          "one call on model.parameters()",
          regime="more than one parameter with a large gradient"),
        M("train_step", CLIP_LINE, _clipped_by_hand("total_sq"),
          ("sqrt", "squared", "square root", "norm", "global norm", "clip"),
          "clips by hand with the sum of squares as the norm: the root is missing, so a norm of 3 is taken for 9"),
        M("train_step_accumulated", ACCUMULATION_LOOP, _stacked_losses("mean"),
          ("mean", "micro-batches", "number of micro", "n_tokens", "sum", "divided twice", "scale"),
          "collects the summed losses and takes their mean before dividing by n_tokens: the gradient is divided by "
          "the number of micro-batches as well",
          regime="more than one micro-batch"),
        M("train_step_costs", "attention_matmuls = 4 * seq_len * config.n_heads * hd * L * tokens        # QKᵀ and weights @ V, full T x T",
          "attention_matmuls = 4 * seq_len * config.n_kv_heads * hd * L * tokens     # QKᵀ and weights @ V, per kv head",
          ("n_heads", "query heads", "kv heads", "gqa", "scores", "n_kv_heads"),
          "counts the score and mix matmuls per kv head: every query head computes its own, sharing keys does not "
          "share the work",
          regime="fewer kv heads than query heads (GQA)"),
    ],
    "10": [
        M("nll_sum_and_count", NLL_BODY,
          "    count = int((targets != ignore_index).sum())                 # padding is not a token\n"
          "    nll = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=ignore_index) * count\n"
          "    return nll.item(), count\n",
          ("all padding", "nan", "mean", "no scored", "empty", "0 / 0", "reduction"),
          "takes the mean loss times the count: a batch whose targets are all padding gives a mean of NaN, and "
          "NaN · 0 is NaN, not 0; reduction=\"sum\"",
          regime="a batch of padding only"),
        M("nll_sum_and_count", NLL_BODY, _scored_by("targets >= 0"),
          ("ignore_index", "negative", ">= 0", "padding", "index"),
          "marks the padding as the negative targets: right for -100, but an ignore_index of 0 (or any id) is "
          "scored; compare with ignore_index",
          regime="an ignore_index that is a token id (0)"),
        M("evaluate", '"bits_per_byte": loss / math.log(2) / bytes_per_token}',
          '"bits_per_byte": loss / math.log(2) * bytes_per_token}',
          ("bytes_per_token", "per byte", "divid", "multipl", "bits per token"),
          "multiplies by bytes_per_token: bits per token are spread over its bytes, so they are divided",
          regime="bytes_per_token other than 1"),
        M("evaluate", '"perplexity": math.exp(loss)', '"perplexity": 2 ** (loss * math.log(2))',
          ("nats", "bits", "ln 2", "log(2)", "exp", "e^", "conversion"),
          "takes perplexity as 2 to the loss in bits but converts nats to bits by multiplying with ln 2: bits are "
          "nats / ln 2, so 2 ** (loss / math.log(2)), which is e^loss"),
        # https://github.com/pytorch/pytorch/issues/3844
        M("bigram_nll", BINCOUNT_LINE,
          "    counts = torch.zeros(256, 256, dtype=torch.float64)\n"
          "    counts[train[:-1], train[1:]] += 1                             # one count per pair\n",
          ("repeated", "duplicate", "accumulate", "index_put", "once", "+=", "bincount"),
          "counts with counts[prev, next] += 1: a pair that repeats is written once, not added up (thread: "
          "https://github.com/pytorch/pytorch/issues/3844); index_put_(..., accumulate=True) or bincount",
          regime="text in which pairs repeat"),
        M("bigram_nll", "probs = (counts + alpha) / (counts.sum(dim=1, keepdim=True) + 256 * alpha)                         # rows sum to 1",
          "probs = (counts + alpha) / (counts.sum(dim=0, keepdim=True) + 256 * alpha)                         # sums to 1",
          ("row", "dim=1", "previous byte", "column", "normalis", "normaliz", "conditional"),
          "normalises by column sums: P(next | prev) divides each row, the counts of one previous byte, by its sum"),
    ],
}

SAME = [
    ("02", M("rms_norm", "inv_rms = torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)  # (..., 1): one statistic per token",
             "inv_rms = torch.rsqrt(torch.linalg.vector_norm(x32, dim=-1, keepdim=True).pow(2) / x32.shape[-1] + eps)",
             (), "the mean square from the 2-norm: ||x||² / d")),
    ("02", M("layer_norm", "    centred = x - x.mean(dim=-1, keepdim=True)              # (..., d)\n"
             "    var = centred.pow(2).mean(dim=-1, keepdim=True)         # (..., 1): biased, divides by d\n"
             "    return weight * centred * torch.rsqrt(var + eps) + bias",
             "    var, mean = torch.var_mean(x, dim=-1, keepdim=True, correction=0)  # biased: divides by d\n"
             "    return weight * (x - mean) / torch.sqrt(var + eps) + bias",
             (), "torch.var_mean with correction=0, and a division by the root")),
    ("03", M("self_attention", SELF_ATTENTION_BODY, _heads_in_a_loop("x @ w[rows].T"), (),
             "an explicit loop over heads, each projected with its rows of the weights")),
    ("04", M("rope_cache", ROPE_TAIL, _polar_tail("torch.ones_like(angles), angles"), (),
             "the tables as the real and imaginary parts of torch.polar(1, angle)")),
    ("04", M("apply_rope", APPLY_ROPE_BODY, _complex_rope("torch.cat((turned[..., 0], turned[..., 1]), dim=-1)"), (),
             "each pair (i, i + hd/2) turned as one complex number, halves put back in order")),
    ("04", M("rotary_attention", "    q = apply_rope(q, cos, sin, start_pos)  # position enters the scores only\n"
             "    k = apply_rope(k, cos, sin, start_pos)",
             "    q, k = apply_rope(torch.stack((q, k)), cos, sin, start_pos)  # one call rotates both",
             (), "q and k stacked on a new axis and rotated in one call")),
    ("04", M("interleaved_to_half", HALF_BODY, _rows_by_index("hd // 2, 2"), (),
             "each head's rows reordered by an index: the evens, then the odds")),
    ("05", M("pre_norm_block", PRE_NORM_BODY, _branches_in_a_loop("stream"), (),
             "the two residual steps as a loop over (norm, branch) pairs")),
    ("06", M("generate_greedy", "        for _ in range(max_new_tokens):\n"
             "            logits = model(step_input, cache=cache)[:, -1]      # (B, V): only the last position predicts\n",
             "        while idx.shape[1] < prompt.shape[1] + max_new_tokens:  # until the new tokens are there\n"
             "            logits = model(step_input, cache=cache)[:, -1]      # (B, V): only the last position predicts\n",
             (), "a while loop on the length")),
    ("07", M("repeat_kv", REPEAT_BODY, _kv_head_of_each("// n_rep"), (),
             "an index of kv heads, h // n_rep for query head h")),
    ("07", M("gqa_attention", GQA_BODY, _query_heads_in_a_loop("h // (q.shape[1] // n_kv)"), (),
             "one SDPA call per query head, on its group's kv head")),
    ("08", M("top_k_filter", "kth = logits.topk(k, dim=-1).values[..., -1:]          # (..., 1): the k-th largest value",
             "kth = logits.kthvalue(logits.shape[-1] - k + 1, dim=-1, keepdim=True).values  # the k-th largest",
             (), "torch.kthvalue counted from the bottom: the (V - k + 1)-th smallest")),
    ("09", M("lm_loss", LM_LOSS_LINE, _gathered_nll("targets.clamp(min=0)"), (),
             "log_softmax and gather, the padding's index clamped and its positions left out")),
    ("09", M("train_step", CLIP_LINE, _clipped_by_hand("total_sq ** 0.5"), (),
             "global-norm clipping written out")),
    ("09", M("train_step_accumulated", ACCUMULATION_LOOP, _stacked_losses("sum"), (),
             "the summed losses kept and one backward on their sum over n_tokens")),
    ("10", M("nll_sum_and_count", NLL_BODY, _scored_by("targets != ignore_index"), (),
             "log_softmax and gather over the scored targets")),
    ("10", M("bigram_nll", BINCOUNT_LINE,
             "    counts = torch.zeros(256, 256, dtype=torch.float64)          # [prev, next]\n"
             "    counts.index_put_((train[:-1], train[1:]), torch.ones(len(train) - 1, dtype=torch.float64), accumulate=True)\n",
             (), "the counts added up with index_put_(accumulate=True)")),
]
