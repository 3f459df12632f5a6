# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 03 · Causal self-attention
#
# **What you build.** The layer that lets each position read from the positions before it. You will write
#
# 1. `causal_mask(q_len, kv_len)`: which query may look at which key;
# 2. `split_heads` / `merge_heads`: the reshapes between `(B, T, d_model)` and `(B, heads, T, head_dim)`;
# 3. `causal_attention(q, k, v)`: scaled dot-product attention with the mask, softmax written out;
# 4. `self_attention(x, w_q, w_k, w_v, w_o, n_heads)`: the whole multi-head layer;
# 5. `attention_flops(batch, seq_len, d_model, n_heads)`: what that layer costs, in FLOPs, held against a measurement.
#
# **Since notebook 02:** the input of attention is a normalised hidden state `h = rms_norm(x)` of shape
# `(B, T, d_model)`. Notebook 04 will add positions (RoPE) to queries and keys; here there is no position
# information yet.
#
# **Run time:** about 30 s on an idle 2-core machine with one thread (`pytest --nbval-lax` on this notebook, kernel
# start included; most of it the experiment's training runs). The notebook computes with one thread on purpose (the
# setup cell says so); on a slower or busy machine each long cell first says how long it expects to take there, and
# runs a shorter, announced variant where the full one would take more than three times as long.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false}
import math
import os
import warnings

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

import tinylm
import tinylm.experiments
from autograder.checks import pitfalls
from autograder.checks import (check_attention_flops, check_causal_attention, check_causal_mask, check_self_attention,
                               check_split_merge, show_check)
from autograder.checks.learner_model import require_agreement

# nbgrader counts anything on stderr as a failed cell: silence known library warnings once.
warnings.filterwarnings("ignore", category=UserWarning)
warnings.filterwarnings("ignore", category=FutureWarning)
torch.manual_seed(0)
DEVICE = tinylm.device()
GRADING = bool(os.environ.get("NBGRADER_EXECUTION"))  # set by nbgrader while it validates or grades
THREADS = tinylm.experiments.use_threads()  # one CPU thread, on purpose: the line it prints says why

# %% [markdown]
# ## 1. The computation and its shapes
#
# With `h` of shape `[B, T, d]` and $H$ heads of size $d_h = d / H$:
#
# | step | formula | shape |
# |---|---|---|
# | project | $q = h W_q^\top,\ k = h W_k^\top,\ v = h W_v^\top$ | `[B, T, d]` each |
# | split heads | view as `[B, T, H, d_h]`, then swap axes 1 and 2 | `[B, H, T, d_h]` |
# | scores | $S = q k^\top / \sqrt{d_h}$ | `[B, H, T, T]` |
# | mask | $S_{ij} = -\infty$ where key $j$ is in the future of query $i$ | `[B, H, T, T]` |
# | weights | $A = \mathrm{softmax}(S)$ over the **key** axis (last) | `[B, H, T, T]` |
# | mix | $y = A v$ | `[B, H, T, d_h]` |
# | merge heads | swap axes back, flatten the last two | `[B, T, d]` |
# | output | $y W_o^\top$ | `[B, T, d]` |
#
# Each head is an independent attention over a $d_h$-dimensional slice of the features: heads let one layer
# look for several different things at once, for the cost of one big matmul.
#
# ### Why divide by $\sqrt{d_h}$
#
# If the entries of $q$ and $k$ are independent with variance 1, then $q \cdot k$ is a sum of $d_h$ such products
# and has variance $d_h$. Unscaled scores grow like $\sqrt{d_h}$; the softmax of large numbers is nearly one-hot
# (it *saturates*), and its gradient nearly vanishes. Dividing by $\sqrt{d_h}$ brings the variance back to 1 for
# every head size. The plot measures it: the average largest attention weight of a row, with and without the scale.

# %%
head_dims = [4, 16, 64, 256, 1024]
peak = {"scaled by 1/sqrt(d_h)": [], "unscaled": []}
gen = torch.Generator().manual_seed(0)
for hd in head_dims:
    q, k = torch.randn(64, hd, generator=gen), torch.randn(64, hd, generator=gen)  # 64 queries, 64 keys
    scores = q @ k.T                                                               # (64, 64)
    peak["unscaled"].append(scores.softmax(-1).max(-1).values.mean().item())
    peak["scaled by 1/sqrt(d_h)"].append((scores / math.sqrt(hd)).softmax(-1).max(-1).values.mean().item())
fig, ax = plt.subplots(figsize=(6.5, 2.6))
for label, values in peak.items():
    ax.semilogx(head_dims, values, "o-", label=label)
ax.axhline(1 / 64, ls=":", c="grey", label="uniform over 64 keys")
ax.set_xlabel("head_dim"), ax.set_ylabel("mean of the largest weight per row"), ax.legend()
ax.set_title("without the scale, softmax turns one-hot as heads grow")
plt.show()


# %% [markdown]
# ## 2. The causal mask
#
# A language model predicts token $t+1$ from tokens $\le t$: $P(x_1..x_T) = \prod_t P(x_t \mid x_{<t})$. So
# query $i$ may attend to key $j$ only if $j \le i$, including itself. The mask is a boolean matrix,
# **True = may attend**, and the scores where it is False are set to $-\infty$ *before* the softmax, so they
# get exactly zero weight and the remaining weights still sum to 1.
#
# With a KV cache (notebook 06) the queries are only the *last* few positions: `q_len` new tokens after
# `kv_len - q_len` cached ones. Query $i$ then sits at absolute position $\texttt{kv\_len} - \texttt{q\_len} + i$,
# and may see keys $j \le \texttt{kv\_len} - \texttt{q\_len} + i$: the triangle is aligned bottom-right.
# `torch.tril(..., diagonal=k)` keeps the entries with $j - i \le k$.

# %% nbgrader={"grade": false, "grade_id": "causal_mask", "locked": false, "schema_version": 3, "solution": true}
def causal_mask(q_len: int, kv_len: int | None = None) -> torch.Tensor:
    """Bool (q_len, kv_len); True where query i may attend to key j."""
    kv_len = q_len if kv_len is None else kv_len
    ### BEGIN SOLUTION
    allowed = torch.ones(q_len, kv_len, dtype=torch.bool)
    return allowed.tril(diagonal=kv_len - q_len)  # query i is position kv_len - q_len + i
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_causal_mask", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_causal_mask(causal_mask)
### BEGIN HIDDEN TESTS
check_causal_mask(causal_mask, cases=((1, 1), (8, 8), (2, 9), (4, 5)))
### END HIDDEN TESTS

# %%
# NBVAL_CHECK_OUTPUT
print(causal_mask(4).int())
print(causal_mask(2, 5).int())


# %% [markdown]
# ## 3. Splitting and merging heads
#
# `q` comes out of the projection as `[B, T, d]`, with the features of head 0 first, then head 1, and so on.
# To give each head its own `[T, d_h]` matrix, first **view** the last axis as `(H, d_h)`, which only relabels
# memory, then **transpose** axes 1 and 2, which moves the head axis in front of the sequence axis.
#
# The tempting shortcut `x.view(B, H, T, d_h)` has the right shape but the wrong content: it cuts the flat
# memory into $H$ consecutive blocks of $T \cdot d_h$ numbers, so "head 0" would hold the first few *tokens*.
# Merging is the reverse: transpose back to `[B, T, H, d_h]`, then flatten the last two axes (`reshape`, since
# the transposed tensor is no longer contiguous).

# %% nbgrader={"grade": false, "grade_id": "split_heads", "locked": false, "schema_version": 3, "solution": true}
def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """(B, T, d) -> (B, n_heads, T, d // n_heads)."""
    ### BEGIN SOLUTION
    B, T, d = x.shape
    x = x.view(B, T, n_heads, d // n_heads)  # (B, T, H, hd): head h owns features h*hd .. (h+1)*hd - 1
    return x.transpose(1, 2)                 # (B, H, T, hd)
    ### END SOLUTION


def merge_heads(y: torch.Tensor) -> torch.Tensor:
    """(B, H, T, hd) -> (B, T, H * hd)."""
    ### BEGIN SOLUTION
    B, H, T, hd = y.shape
    return y.transpose(1, 2).reshape(B, T, H * hd)  # (B, T, H, hd) -> (B, T, d): heads side by side
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_split_merge", "locked": true, "points": 2, "schema_version": 3, "solution": false}
check_split_merge(split_heads, merge_heads)
### BEGIN HIDDEN TESTS
check_split_merge(split_heads, merge_heads, seed=31, batch=3, seq=4, n_heads=5, head_dim=2)
### END HIDDEN TESTS

# %% [markdown]
# ## 4. Attention with the mask
#
# Write the formula step by step (that is the point: `F.scaled_dot_product_attention` does all of it in one
# fused call, and the check uses it as the reference). Queries may be fewer than keys; use your
# `causal_mask(q_len, kv_len)`. `scores.masked_fill(~mask, float("-inf"))` fills where the mask is False, and
# a `(q_len, kv_len)` mask broadcasts over the batch and head axes. `causal_mask` builds its tensor on the CPU; on a
# GPU the scores live on the GPU, and `masked_fill` needs both on one device: move the mask with
# `.to(q.device)` (a no-op on the CPU). Use `softmax`, or, if you write it by hand,
# subtract each row's maximum before `exp`: the check includes scores in the hundreds, where `exp` overflows.
# It also runs your function in float16, whose largest finite value is 65504: a fill such as `-1e9` does not fit
# there (`masked_fill` raises), while `float("-inf")` fits every dtype.

# %% nbgrader={"grade": false, "grade_id": "causal_attention", "locked": false, "schema_version": 3, "solution": true}
def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """q (B, H, Tq, hd), k and v (B, H, Tk, hd), Tq <= Tk -> (B, H, Tq, hd)."""
    ### BEGIN SOLUTION
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])     # (B, H, Tq, Tk)
    mask = causal_mask(q.shape[-2], k.shape[-2]).to(q.device)       # (Tq, Tk), broadcasts over (B, H)
    scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)                                 # over keys: each row sums to 1
    return weights @ v                                               # (B, H, Tq, hd)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_causal_attention", "locked": true, "points": 3, "schema_version": 3, "solution": false}
check_causal_attention(causal_attention)
### BEGIN HIDDEN TESTS
check_causal_attention(causal_attention, seed=41, batch=3, heads=2, seq=9, head_dim=6, dtype=torch.float64)
check_causal_attention(causal_attention, seed=42, batch=1, heads=5, seq=4, head_dim=16)
### END HIDDEN TESTS

# %% [markdown]
# ### What the weights look like
#
# The weights of one head for a short text, with random projections (no training yet): a lower triangle, each
# row summing to 1. The first token can only attend to itself.

# %%
text = "attention!"
ids = tinylm.ByteTokenizer().encode(text)
gen = torch.Generator().manual_seed(1)
emb = torch.randn(256, 32, generator=gen)
w_qk = torch.randn(2, 32, 32, generator=gen) / 2
h = tinylm.rms_norm(emb[ids], torch.ones(32))                      # (T, d)
q, k = h @ w_qk[0].T, h @ w_qk[1].T                               # (T, d) each
scores = (q @ k.T / math.sqrt(32)).masked_fill(~causal_mask(len(ids)), float("-inf"))
weights = scores.softmax(-1)                                        # (T, T)
fig, ax = plt.subplots(figsize=(4.2, 3.6))
im = ax.imshow(weights, cmap="viridis")
ax.set_xticks(range(len(text)), list(text)), ax.set_yticks(range(len(text)), list(text))
ax.set_xlabel("key"), ax.set_ylabel("query"), fig.colorbar(im)
plt.show()


# %% [markdown]
# ## 5. The whole layer
#
# Put it together. The weights use the `nn.Linear` layout `[d_out, d_in]`, so a projection is `x @ W.T`
# (or `F.linear(x, W)`).

# %% nbgrader={"grade": false, "grade_id": "self_attention", "locked": false, "schema_version": 3, "solution": true}
def self_attention(x, w_q, w_k, w_v, w_o, n_heads: int) -> torch.Tensor:
    """x (B, T, d); w_* [d, d] -> (B, T, d). Causal multi-head self-attention."""
    ### BEGIN SOLUTION
    q, k, v = (split_heads(F.linear(x, w), n_heads) for w in (w_q, w_k, w_v))  # each (B, H, T, hd)
    y = causal_attention(q, k, v)                                              # (B, H, T, hd)
    return F.linear(merge_heads(y), w_o)                                       # (B, T, d)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_self_attention", "locked": true, "points": 2, "schema_version": 3, "solution": false}
check_self_attention(self_attention)
### BEGIN HIDDEN TESTS
check_self_attention(self_attention, seed=51, batch=3, seq=5, n_heads=2, head_dim=6, dtype=torch.float64)
### END HIDDEN TESTS

# %% [markdown]
# ### Your attention inside the model
#
# `tinylm.Attention` with `attn_impl="reference"` calls `tinylm.attention.causal_attention`. Put yours in its
# place and the logits of a small model match those of the fused `sdpa` path.

# %%
# NBVAL_CHECK_OUTPUT
torch.manual_seed(0)
cfg = tinylm.ModelConfig(d_model=48, n_layers=2, n_heads=3, max_seq_len=32)
fused = tinylm.Transformer(cfg).eval()
reference = tinylm.Transformer(tinylm.ModelConfig(**{**cfg.__dict__, "attn_impl": "reference"})).eval()
reference.load_state_dict(fused.state_dict())
ids = tinylm.ByteTokenizer().encode("mask the future")[None]  # (1, T)
original = tinylm.attention.causal_attention
tinylm.attention.causal_attention = lambda q, k, v, dropout_p=0.0: causal_attention(q, k, v)
try:
    with torch.no_grad():
        same = torch.allclose(fused(ids), reference(ids), atol=1e-5)
finally:
    tinylm.attention.causal_attention = original
require_agreement("your attention inside tinylm gives the fused path's logits", same,
                  "your causal_attention (and the causal_mask it calls) changes tinylm's logits: rerun their checks above")


# %% [markdown]
# ### What the layer costs: FLOPs
#
# Arithmetic is counted in **FLOPs** (floating-point operations). A matmul of an `(m, n)` matrix by an `(n, p)` one
# computes $m \cdot p$ dot products of $n$ terms: $m n p$ multiplications and as many additions, so
# $2\,m n p$ FLOPs; a batched matmul does that once per batch entry. The layer above has four kinds of matmuls:
#
# | key | matmul | shapes | grows with |
# |---|---|---|---|
# | `qkv_proj` | $q, k, v = h W^\top$ | three `(B·T, d) @ (d, d)` | $T$ |
# | `scores` | $q k^\top$, every head | `(T, d_h) @ (d_h, T)`, $B \cdot H$ times | $T^2$ |
# | `mix` | weights $\cdot\, v$, every head | `(T, T) @ (T, d_h)`, $B \cdot H$ times | $T^2$ |
# | `out_proj` | $y W_o^\top$ | `(B·T, d) @ (d, d)` | $T$ |
#
# **The convention** is what `torch.utils.flop_counter.FlopCounterMode` counts when the matmuls are written out, as in
# your `causal_attention`: the whole $T \times T$ of the scores and of the mix, the masked half included (the matmul
# computes it; the mask then throws it away). The mask, the scale and the softmax are not counted: each does a few
# operations per number, not $d_h$ of them. (On the CPU, the counter counts nothing at all inside the fused
# `F.scaled_dot_product_attention`, one more reason to fix the convention on the written-out form.)
#
# ### Exercise: `attention_flops`
#
# Return a dict with the four keys of the table, each the FLOPs of one forward pass of the layer (an int), for a batch
# of `batch` sequences of `seq_len` tokens, width `d_model` and `n_heads` heads. Compute it from the sizes; the check
# measures your formula against `FlopCounterMode` running the layer on tensors of those sizes, up to $T$ = 16384.

# %% nbgrader={"grade": false, "grade_id": "attention_flops", "locked": false, "schema_version": 3, "solution": true}
def attention_flops(batch: int, seq_len: int, d_model: int, n_heads: int) -> dict:
    """FLOPs of each matmul of one causal multi-head attention layer: {"qkv_proj", "scores", "mix", "out_proj"}."""
    ### BEGIN SOLUTION
    B, T, d = batch, seq_len, d_model
    head_dim = d // n_heads
    projection = 2 * B * T * d * d              # (B·T, d) @ (d, d): 2 FLOPs per multiply-add
    per_head = 2 * T * T * head_dim             # (T, hd) @ (hd, T) for the scores; (T, T) @ (T, hd) for the mix
    return {"qkv_proj": 3 * projection, "scores": B * n_heads * per_head, "mix": B * n_heads * per_head,
            "out_proj": projection}
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_attention_flops", "locked": true, "points": 2, "schema_version": 3, "solution": false}
check_attention_flops(attention_flops)
### BEGIN HIDDEN TESTS
check_attention_flops(attention_flops, cases=((5, 7, 24, 3), (2, 300, 128, 8), (1, 4096, 2048, 16)))
### END HIDDEN TESTS

# %% [markdown]
# ### Your prediction against this machine
#
# A FLOP count becomes a time once you know how many FLOPs per second the machine does. The cell measures that
# (a 512 × 512 float32 matmul, repeated), predicts the time of your `self_attention` on one sequence of width 256
# from your `attention_flops`, then times it, and counts its FLOPs with `FlopCounterMode` as the check did. A second
# table times the layer's parts one by one: the four projections and the two $T^2$ matmuls, each next to the time
# your FLOPs predict for it, and the scale, mask and softmax, which the count leaves out. Every timing is the median
# of seven runs; a verdict says **too noisy to tell** when the runs spread as much as the value.

# %%
from torch.utils.flop_counter import FlopCounterMode

from tinylm import measure

peak = measure.matmul_throughput(DEVICE)
print(f"this machine: {peak[0] / 1e9:.1f} GFLOP/s on a 512 x 512 float32 matmul (median of 7, spread "
      f"{peak[1] / 1e9:.1f} GFLOP/s)")
width, heads = 256, 4
head_dim = width // heads
weights_qkvo = [torch.randn(width, width, device=DEVICE) / 16 for _ in range(4)]
parts = []  # per T: the share of your FLOPs in the T² matmuls, and (predicted ms, measured) of each part
print(f"{'T':>5} {'your FLOPs':>14} {'counted':>14} {'predicted ms':>13} {'measured ms':>12}  verdict")
for T in ([128, 512] if GRADING else [128, 512, 1024]):
    h = torch.randn(1, T, width, device=DEVICE)
    flops = attention_flops(1, T, width, heads)
    yours = sum(flops.values())
    with FlopCounterMode(display=False) as counter:
        self_attention(h, *weights_qkvo, heads)
    with torch.no_grad():
        ms = measure.timed_ms(lambda: self_attention(h, *weights_qkvo, heads), device=DEVICE)
    predicted_ms = 1e3 * yours / peak[0]
    print(f"{T:>5} {yours:>14,} {counter.get_total_flops():>14,} {predicted_ms:>13.2f} {ms[0]:>12.2f}  "
          f"{measure.against_prediction(predicted_ms, ms, ' ms')}")
    # The same steps one by one, on tensors of the layer's shapes: (1, heads, T, head_dim) per q, k, v.
    q, k, v = (torch.randn(1, heads, T, head_dim, device=DEVICE) for _ in range(3))
    scores, mask = q @ k.transpose(-2, -1), causal_mask(T).to(DEVICE)
    weights = scores.softmax(dim=-1)
    square = flops["scores"] + flops["mix"]
    parts.append((T, square / yours, {
        "projections": (1e3 * (flops["qkv_proj"] + flops["out_proj"]) / peak[0],
                        measure.timed_ms(lambda: [F.linear(h, w) for w in weights_qkvo], device=DEVICE)),
        "scores and mix": (1e3 * square / peak[0],
                           measure.timed_ms(lambda: (q @ k.transpose(-2, -1), weights @ v), device=DEVICE)),
        "scale, mask, softmax": (None, measure.timed_ms(
            lambda: (scores / math.sqrt(head_dim)).masked_fill(~mask, float("-inf")).softmax(dim=-1), device=DEVICE))}))
print(f"\nthe parts, each timed alone (measured ms, median of 7, each next to the ms your FLOPs predict for it):"
      f"\n{'T':>5} {'T² share':>9} {'projections':>12} {'predicted':>10} "
      f"{'scores and mix':>15} {'predicted':>10} {'scale, mask, softmax (not counted)':>35}")
for T, share, timed in parts:
    (p_proj, m_proj), (p_square, m_square), (_, m_rest) = timed.values()
    print(f"{T:>5} {share:>9.0%} {m_proj[0]:>12.2f} {p_proj:>10.2f} {m_square[0]:>15.2f} {p_square:>10.2f} "
          f"{m_rest[0]:>35.2f}")
T, share, timed = parts[-1]
total = sum(measured[0] for _, measured in timed.values())
print(f"at T={T}: the scale, mask and softmax take {timed['scale, mask, softmax'][1][0] / total:.0%} of the time the "
      f"parts add up to; projections: " + "; scores and mix: ".join(
          measure.against_prediction(predicted, measured, " ms") for predicted, measured in list(timed.values())[:2]))

# %% [markdown]
# Read the two columns of FLOPs first: your formula and the counter agree on your own layer. The time is another
# matter, and the second table takes it apart. The prediction assumes every FLOP runs at the speed of the
# 512 × 512 matmul; two things pull the layer's time above it, and both weigh more as $T$ grows:
#
# - **Work the count leaves out.** The scale, the mask and the softmax do a few operations per score, too few to
#   count as FLOPs, but each reads and writes all $H \cdot T^2$ scores, and moving numbers through memory is slower
#   than multiplying them. Their column has no prediction, and it grows like $T^2$, with the scores.
# - **The $T^2$ matmuls.** The "T² share" column is the part of your FLOPs in the scores and the mix: it grows with
#   $T$, since the projections grow only like $T$. The scores matmul has an inner dimension of only $d_h$ and writes
#   a $T \times T$ tensor per head, so it can run further from the 512 × 512 speed than the projections do; their
#   two columns, each next to its prediction, say whether it does on this machine.
#
# So the ratio of the measured time to the prediction grows with $T$. (The 512 × 512 speed is itself one
# measurement, of one shape at one moment: on a busy machine a part can also come in under its prediction.) The
# last line says, at the longest sequence, how much of the time went to the steps the count leaves out, and how
# each counted part compares with its prediction. Fused attention kernels (`F.scaled_dot_product_attention`;
# notebook 09 measures what they save in training) are built for this: they compute the scores tile by tile and
# never write the whole $T \times T$ matrix to memory.

# %% [markdown]
# ## 6. Pitfalls
#
# The wrong versions live in `autograder/checks/pitfalls.py` (each is a solution with one line changed).
#
# **Softmax over the wrong dimension:** `scores.softmax(dim=-2)` normalises over *queries*: each key's column
# sums to 1, the rows do not.

# %%
show_check(check_causal_attention, pitfalls.attention_softmax_wrong_dim)

# %% [markdown]
# **Missing or wrong scale:** forgetting $1/\sqrt{d_h}$ (or dividing by $d_h$) still produces a valid-looking
# attention; it is just sharper or flatter than it should be. Only a comparison with a reference notices.

# %%
show_check(check_causal_attention, pitfalls.attention_no_scale)

# %% [markdown]
# **Mask off by one, or broadcast wrong:** a diagonal one too low (`j < i`) hides the token from itself and
# leaves the first row with no key at all (NaN); a transposed mask, `(kv_len, q_len)`, lets queries read the
# future. The check also changes the future keys and values and verifies that earlier outputs do not move.

# %%
show_check(check_causal_mask, pitfalls.causal_mask_strict)
show_check(check_causal_attention, pitfalls.attention_transposed_mask)

# %% [markdown]
# **Wrong layout after reshape:** `x.view(B, H, T, d_h)` has the right shape and silently mixes tokens into heads.

# %%
show_check(check_split_merge, pitfalls.split_heads_view, pitfalls.merge_heads_ok)

# %% [markdown]
# ## 7. The experiment: what the scale buys
#
# The claim: the entries of $q \cdot k$ add up $d_h$ products, so with unit-variance features their variance is
# $d_h$; without the $1/\sqrt{d_h}$ the softmax saturates at large head sizes (almost one-hot weights), its
# gradients become poor and training less stable. Two measurements:
#
# - **the mechanism**, on random queries and keys with unit-variance entries: the mean entropy of the causal
#   softmax against the head size, with and without the scale (the uniform distribution is the dashed line);
# - **a model**: two tinylm models with one head of size 64, trained side by side on the course corpus (same
#   seed, same initial weights, same batches, same steps), identical except that one drops the scale
#   (`tinylm.experiments.with_unscaled_attention`). Both are tinylm's model, not yours, so that the two differ
#   in this one thing. We measure the attention entropy at initialisation and after training, the loss, and how far
#   the training loss climbs back up after its first drop (a spike). The pair is trained from two seeds; a
#   difference counts only where both seeds agree with their ranges further apart than the seeds' own spread.
#
# The cell times a few steps first and says how long it will take here (a shorter, announced variant on a slow
# machine). `python -m tinylm experiment attention_scale --steps 1000` reruns it longer.

# %%
from tinylm import experiments

if GRADING:
    print("experiment skipped while grading")
else:
    corpus = tinylm.course_corpus()
    run = experiments.paced(experiments.attention_scale, corpus, seeds=(0, 1), short_steps=50,
                            stated_s=experiments.pacing.STATED_S["attention_scale"],
                            what="2 models with one head of size 64 (scaled, unscaled)")
    SCALED, UNSCALED = "scaled 1/sqrt(head_dim)", "unscaled"
    per_seed = {"entropy at initialisation": {}, "entropy after training": {}, "spike": {}}
    for seed, scale in zip(run.seeds, run.results):
        print(f"seed {seed}:\n{scale.curves.summary()}")
        for label, h in scale.curves.histories.items():
            spike = experiments.largest_rise(h.train_loss, after=10)  # past the first drop from ln 256
            print(f"  {label:<26} attention entropy (nats) at initialisation {scale.entropy_at_init[label]:.3f}, after "
                  f"training {scale.entropy_trained[label]:.3f}; training loss climbs back up by {spike:.2f} at most")
            per_seed["entropy at initialisation"].setdefault(label, []).append(scale.entropy_at_init[label])
            per_seed["entropy after training"].setdefault(label, []).append(scale.entropy_trained[label])
            per_seed["spike"].setdefault(label, []).append(spike)
    scale = run.results[0]
    dims, synthetic = scale.synthetic_head_dims, scale.synthetic_entropy
    print(f"random unit-variance q, k (uniform attention: {scale.max_entropy:.3f} nats): entropy with the scale "
          + ", ".join(f"{e:.2f}" for e in synthetic["scaled"]) + "; without it "
          + ", ".join(f"{e:.2f}" for e in synthetic["unscaled"]) + f" at head_dim {', '.join(map(str, dims))}")
    experiments.plot_attention_scale(scale)
    plt.show()

    print(f"\nwhat this run shows ({run.ran}):")
    flat = max(synthetic["scaled"]) - min(synthetic["scaled"]) < 0.1
    sharper = all(b < a for a, b in zip(synthetic["unscaled"], synthetic["unscaled"][1:]))
    print(f"  random q, k: with the scale the entropy {'stays within 0.1 nats' if flat else 'moves'} across head sizes; "
          f"without it the entropy {'falls with every doubling of head_dim' if sharper else 'does not fall steadily'}")
    for quantity in ("entropy at initialisation", "entropy after training"):
        print("  " + experiments.compare(per_seed[quantity], UNSCALED, SCALED).sentence(
            quantity, f"has a lower attention {quantity} than", f"has a higher attention {quantity} than"))
    finals = experiments.final_losses([r.curves for r in run.results])
    print("  " + experiments.compare(finals, UNSCALED, SCALED).sentence())
    spikes = experiments.compare(per_seed["spike"], UNSCALED, SCALED)
    print("  " + spikes.sentence("climb after the first drop", "climbs back up less than", "climbs back up more than"))
    if spikes.result != "higher" and min(per_seed["spike"][SCALED]) > 0.1:
        print("  so this run does not pin the spike after the first drop on the missing scale: the scaled model's "
              "loss climbs back up too")
    print("  " + experiments.yardsticks(corpus).sentence(finals, run.seeds))

# %% [markdown]
# **Reading the output.** The first verdict line is the mechanism on random unit-variance queries and keys, as the
# seed states it: with the scale the entropy stays put whatever the head size, without it the softmax grows sharper
# with every doubling of `head_dim` (left plot). In the models, compare the entropy *at initialisation* with the
# entropy *after training*: tinylm initialises the projections with small weights, so queries and keys start tiny
# and even unscaled scores start small (both models start close to the uniform attention's entropy, printed with the
# random q, k); saturation at initialisation is a property of unit-variance features, which this initialisation
# avoids. Whether the unscaled model's attention has collapsed towards one-hot weights by the end, and whether its
# loss ends higher, the verdict lines say, seed by seed. A short run can even favour the unscaled model: the same
# weights give it scores $\sqrt{d_h}$ times larger, so its attention sharpens sooner, and early in training sharper
# attention can be what lowers the loss first. The cost the seed names, saturated softmaxes with poor gradients,
# is what the entropy after training measures, not who is ahead at the end of a short run.
#
# The spike lines are about stability: a loss that climbs back up after its first drop is a spike, and it counts
# against the missing scale only if the unscaled model climbs more than the scaled one in both seeds. The scaled
# model is the control: where it spikes too, the spike comes with this short run's schedule, not with the scale.
# The last two lines give the scale of the losses: a run that ends at the unigram's level has learned which bytes
# are common and not yet used the bytes before them (the plot shows every run sitting near that level for a while
# before it drops), so a verdict involving it says which model left that level sooner. The CLI reruns it longer.

# %% [markdown]
# ## Summary
#
# - Scores $qk^\top/\sqrt{d_h}$, mask the future with $-\infty$, softmax over keys, mix the values.
# - The scale keeps scores at unit variance for any head size; without it softmax saturates.
# - The mask is True where attention is allowed, bottom-right aligned when queries are the last positions.
# - Heads: `view(B, T, H, d_h)` then `transpose(1, 2)`; never `view(B, H, T, d_h)`.
#
# **Next:** attention has no idea where tokens are. Notebook 04 adds rotary position embeddings.
