# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 04 · Rotary position embeddings (RoPE)
#
# **What you build.** Attention so far cannot tell where a token is. RoPE fixes that by *rotating* queries and
# keys by an angle proportional to their position, so that the score between two tokens depends on how far
# apart they are. You will write
#
# 1. `rope_cache(head_dim, max_seq_len, theta)`: the cos and sin tables;
# 2. `apply_rope(x, cos, sin, start_pos)`: the rotation, in the half-split form of Llama checkpoints;
# 3. `rotary_attention(q, k, v, cos, sin, start_pos)`: RoPE in its place inside attention;
# 4. `interleaved_to_half(w, n_heads)` and `meta_to_hf_attention(...)`: a checkpoint written for the other pairing
#    (Meta's original Llama weights) converted so that your rotation reads it right.
#
# **Since notebook 03:** `tinylm.causal_attention(q, k, v)` is your attention; here it receives rotated
# queries and keys.
#
# **Run time:** about 40 s on an idle 2-core machine with one thread (`pytest --nbval-lax` on this notebook, kernel
# start included; most of it the experiment's training runs). The notebook computes with one thread on purpose (the
# setup cell says so); on a slower or busy machine each long cell first says how long it expects to take there, and
# runs a shorter, announced variant where the full one would take more than three times as long.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false}
import math
import os
import warnings

import matplotlib.pyplot as plt
import torch

import tinylm
import tinylm.experiments
from autograder.checks import pitfalls
from autograder.checks import (check_apply_rope, check_interleaved_to_half, check_meta_to_hf_attention, check_rope_cache,
                               check_rotary_attention, show_check)
from autograder.checks.learner_model import require_agreement, swapped

# nbgrader counts anything on stderr as a failed cell: silence known library warnings once.
warnings.filterwarnings("ignore", category=UserWarning)
warnings.filterwarnings("ignore", category=FutureWarning)
torch.manual_seed(0)
DEVICE = tinylm.device()
GRADING = bool(os.environ.get("NBGRADER_EXECUTION"))  # set by nbgrader while it validates or grades
THREADS = tinylm.experiments.use_threads()  # one CPU thread, on purpose: the line it prints says why

# %% [markdown]
# ## 1. Attention without positions is blind to order
#
# Scores are dot products between tokens' vectors, and nothing in them says where a token sits. Shuffle the
# tokens before the last one and the last token's output does not change at all: to attention, its context is
# a *set*.

# %%
# NBVAL_CHECK_OUTPUT
gen = torch.Generator().manual_seed(0)
q, k, v = (torch.randn(1, 1, 6, 8, generator=gen) for _ in range(3))  # (B, H, T, hd)
perm = torch.tensor([3, 0, 4, 1, 2, 5])                              # shuffle tokens 0..4, keep the last
out = tinylm.causal_attention(q, k, v)[..., -1, :]
out_shuffled = tinylm.causal_attention(q[:, :, perm], k[:, :, perm], v[:, :, perm])[..., -1, :]
print("last output unchanged after shuffling its context:", torch.allclose(out, out_shuffled, atol=1e-6))

# %% [markdown]
# ## 2. Rotating pairs of features
#
# Split a head's $d_h$ features into $d_h/2$ pairs. Pair $i$ gets a frequency
#
# $$\omega_i = \theta^{-2i/d_h}, \qquad i = 0, \dots, d_h/2 - 1, \qquad \theta = 10000,$$
#
# falling geometrically from 1 (a full turn every $2\pi \approx 6$ positions) to almost $1/\theta$ (with $d_h$ = 64,
# the slowest pair needs tens of thousands of positions for one turn: the line under the plot says how many). At
# position $m$ the pair $(a, b)$ is rotated by the angle $m\,\omega_i$:
#
# $$\begin{pmatrix} a' \\ b' \end{pmatrix} = \begin{pmatrix} \cos m\omega_i & -\sin m\omega_i \\ \sin m\omega_i & \cos m\omega_i \end{pmatrix}
# \begin{pmatrix} a \\ b \end{pmatrix}$$
#
# **Why relative position falls out.** Rotations compose: $R_m^\top R_n = R_{n-m}$. So the score between a query
# rotated to position $m$ and a key rotated to position $n$ is $(R_m q)^\top (R_n k) = q^\top R_{n-m}\,k$: it depends on
# $q$, $k$ and the *distance* $n - m$ only. Values are not rotated: position should change *who* is attended to,
# not *what* is read.
#
# **Which features form a pair.** Llama checkpoints pair feature $i$ with feature $i + d_h/2$ (the
# "half-split" form). Then the whole rotation is two element-wise products:
#
# $$x' = x \odot \cos + \mathrm{rotate\_half}(x) \odot \sin, \qquad \mathrm{rotate\_half}(x_1, x_2) = (-x_2, x_1),$$
#
# where $x_1, x_2$ are the two halves of the last axis and the tables hold, at row $m$, the angles
# $[m\omega_0, \dots, m\omega_{d_h/2-1}, m\omega_0, \dots, m\omega_{d_h/2-1}]$: each angle twice, once per half.
# Section 3 shows the paper's "interleaved" pairing and how the two are related.

# %%
hd, T = 64, 256
omega = 10000.0 ** (-torch.arange(0, hd, 2) / hd)                  # (hd/2,)
angles = torch.arange(T)[:, None] * omega[None, :]                # (T, hd/2)
fig, axes = plt.subplots(1, 2, figsize=(10, 2.8))
axes[0].semilogy(2 * math.pi / omega, "o", ms=3)
axes[0].set_xlabel("pair i"), axes[0].set_ylabel("wavelength (positions)")
axes[1].imshow(angles.cos().T, aspect="auto", cmap="RdBu")
axes[1].set_xlabel("position m"), axes[1].set_ylabel("pair i"), axes[1].set_title("cos(m · ω_i)")
plt.show()
print(f"one full turn takes from {2 * math.pi / omega[0]:.1f} positions (pair 0) to {2 * math.pi / omega[-1]:,.0f} "
      f"(pair {hd // 2 - 1})")


# %% [markdown]
# ### Exercise 1: the tables
#
# Return `(cos, sin)`, each of shape `(max_seq_len, head_dim)` and dtype `float32`, in the half-split layout
# above. They depend only on shapes, so a model computes them once. `torch.outer(a, b)` gives all products
# $a_m b_i$.

# %% nbgrader={"grade": false, "grade_id": "rope_cache", "locked": false, "schema_version": 3, "solution": true}
def rope_cache(head_dim: int, max_seq_len: int, theta: float = 10000.0):
    """-> cos, sin: each (max_seq_len, head_dim) float32."""
    ### BEGIN SOLUTION
    inv_freq = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)  # (hd/2,)
    angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float32), inv_freq)      # (T, hd/2)
    angles = torch.cat((angles, angles), dim=-1)  # (T, hd): feature i and i + hd/2 share an angle
    return angles.cos(), angles.sin()
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_rope_cache", "locked": true, "points": 2, "schema_version": 3, "solution": false}
check_rope_cache(rope_cache)
### BEGIN HIDDEN TESTS
check_rope_cache(rope_cache, head_dim=16, max_seq_len=33, theta=500000.0)
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 2: the rotation
#
# `x` is `(B, H, T, head_dim)` and holds the tokens at positions `start_pos, ..., start_pos + T - 1`
# (`start_pos` is 0 for a full sequence; in notebook 06 it becomes the number of tokens already in the KV
# cache). Take the matching rows of the tables, cast them to `x.dtype`, and let them broadcast over batch and
# heads.

# %% nbgrader={"grade": false, "grade_id": "apply_rope", "locked": false, "schema_version": 3, "solution": true}
def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(x1, x2) -> (-x2, x1) on the two halves of the last axis."""
    ### BEGIN SOLUTION
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)
    ### END SOLUTION


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, start_pos: int = 0) -> torch.Tensor:
    """x (B, H, T, hd) -> x rotated as if at positions start_pos .. start_pos + T - 1."""
    ### BEGIN SOLUTION
    T = x.shape[-2]
    cos = cos[start_pos:start_pos + T].to(x.dtype)  # (T, hd), broadcasts over (B, H)
    sin = sin[start_pos:start_pos + T].to(x.dtype)
    return x * cos + rotate_half(x) * sin
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_apply_rope", "locked": true, "points": 3, "schema_version": 3, "solution": false}
check_apply_rope(apply_rope)
### BEGIN HIDDEN TESTS
check_apply_rope(apply_rope, seed=61, batch=3, heads=2, seq=7, head_dim=12, dtype=torch.float64)
check_apply_rope(apply_rope, seed=62, batch=1, heads=4, seq=3, head_dim=32, theta=500.0)
### END HIDDEN TESTS

# %% [markdown]
# ### Relative position, numerically and in a plot
#
# Put the same query and key at positions $(m, m - \Delta)$ for several $m$. The scores depend on $\Delta$ only, so
# the curves lie on top of each other; without RoPE they would be one flat line.

# %%
cos, sin = rope_cache(64, 512)
gen = torch.Generator().manual_seed(2)
qv, kv = torch.randn(64, generator=gen), torch.randn(64, generator=gen)


def score_at(m: int, n: int) -> float:
    """Score of the query placed at position m with the key placed at position n."""
    rq = apply_rope(qv.view(1, 1, 1, 64), cos, sin, start_pos=m)  # (hd,) -> (B, H, T, hd) = (1, 1, 1, 64)
    rk = apply_rope(kv.view(1, 1, 1, 64), cos, sin, start_pos=n)
    return (rq * rk).sum().item()


deltas = range(0, 120)
fig, ax = plt.subplots(figsize=(7, 2.6))
for m, style, width in ((150, "-", 5), (300, "--", 2.5), (450, ":", 2)):  # drawn on top of each other
    ax.plot(deltas, [score_at(m, m - d) for d in deltas], style, lw=width, label=f"query at m = {m}")
ax.set_xlabel("distance Δ = m - n"), ax.set_ylabel("q · k after RoPE"), ax.legend(loc="upper left", fontsize=8)
plt.show()
print("largest difference between the three curves:",
      f"{max(abs(score_at(150, 150 - d) - score_at(450, 450 - d)) for d in deltas):.1e}")


# %% [markdown]
# ### Exercise 3: RoPE inside attention
#
# Rotate the queries and the keys (not the values), then call `tinylm.causal_attention`.
#
# The check runs it with `start_pos=0` and `start_pos=4` and expects the *same* output both times: when queries
# and keys are shifted together, only their distances matter. The offset starts to matter in notebook 06, where
# the keys of earlier tokens come from a cache, already rotated at their own positions: there each step rotates
# its new query **and its new key** with the same `start_pos` (the cache length), and never rotates a cached key
# again.

# %% nbgrader={"grade": false, "grade_id": "rotary_attention", "locked": false, "schema_version": 3, "solution": true}
def rotary_attention(q, k, v, cos, sin, start_pos: int = 0) -> torch.Tensor:
    """q, k, v (B, H, T, hd) -> (B, H, T, hd): causal attention with RoPE on q and k."""
    ### BEGIN SOLUTION
    q = apply_rope(q, cos, sin, start_pos)  # position enters the scores only
    k = apply_rope(k, cos, sin, start_pos)
    return tinylm.causal_attention(q, k, v)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_rotary_attention", "locked": true, "points": 2, "schema_version": 3, "solution": false}
check_rotary_attention(rotary_attention)
### BEGIN HIDDEN TESTS
check_rotary_attention(rotary_attention, seed=71, batch=3, heads=2, seq=5, head_dim=10, start_pos=7,
                       dtype=torch.float64)
### END HIDDEN TESTS

# %% [markdown]
# ### Your RoPE inside the model
#
# `tinylm.Attention` with `attn_impl="reference"` rotates with `tinylm.attention.apply_rope`. Put yours in its
# place: the logits equal those of the default model with the same weights, which uses tinylm's own rotation.

# %%
# NBVAL_CHECK_OUTPUT
torch.manual_seed(0)
cfg = tinylm.ModelConfig(d_model=48, n_layers=2, n_heads=3, max_seq_len=32)
model = tinylm.Transformer(cfg).eval()
reference = tinylm.Transformer(tinylm.ModelConfig(**{**cfg.__dict__, "attn_impl": "reference"})).eval()
reference.load_state_dict(model.state_dict())
ids = tinylm.ByteTokenizer().encode("rotate q and k")[None]  # (1, T)
with torch.no_grad(), swapped(tinylm.attention, "apply_rope", apply_rope):
    mine = reference(ids)  # every rotation in this forward pass is yours
with torch.no_grad():
    expected = model(ids)
require_agreement("your apply_rope inside tinylm gives the same logits", torch.allclose(expected, mine, atol=1e-5),
                  "your apply_rope (exercise 2 above) changes tinylm's logits: rerun its check")


# %% [markdown]
# ## 3. The interleaved form, and loading a checkpoint written in it
#
# The RoFormer paper (and e.g. CS336) pairs *neighbouring* features $(2i, 2i+1)$ instead of $(i, i + d_h/2)$.
# The rotation of each pair is the same; only the bookkeeping of which features form a pair differs. So the
# two forms are related by a fixed permutation of the features: list the even features first, then the odd
# ones, and an interleaved pair $(2i, 2i+1)$ lands at positions $(i, i + d_h/2)$.
#
# $$\mathrm{rope}_{\text{half}}(P x) = P\,\mathrm{rope}_{\text{interleaved}}(x), \qquad P x = (x_0, x_2, x_4, \dots, x_1, x_3, \dots)$$
#
# Because scores are dot products and $P$ is a permutation, $(Pq)^\top(Pk) = q^\top k$: a model trained with one form
# runs with the other if the rows of $W_q$ and $W_k$ (per head) are permuted once. Checkpoint converters between
# Meta's original Llama weights and Hugging Face's do exactly that.

# %%
# NBVAL_CHECK_OUTPUT
def rope_interleaved(x, cos, sin, start_pos=0):
    """The paper's form: rotate neighbouring pairs (x[2i], x[2i+1]) by the angles of your tables."""
    T, half = x.shape[-2], x.shape[-1] // 2
    c = cos[start_pos:start_pos + T, :half]  # (T, hd/2): the first half of a row holds each pair's angle once
    s = sin[start_pos:start_pos + T, :half]
    a, b = x[..., 0::2], x[..., 1::2]                                      # (..., T, hd/2)
    out = torch.stack((a * c - b * s, a * s + b * c), dim=-1)              # (..., T, hd/2, 2)
    return out.flatten(-2)                                                 # (..., T, hd)

hd = 8
P = torch.cat((torch.arange(0, hd, 2), torch.arange(1, hd, 2)))  # evens, then odds
print("permutation P:", P.tolist())
x = torch.randn(1, 1, 5, hd, generator=torch.Generator().manual_seed(4))
cos8, sin8 = rope_cache(hd, 16)
same = torch.allclose(apply_rope(x[..., P], cos8, sin8, 3), rope_interleaved(x, cos8, sin8, 3)[..., P], atol=1e-6)
print("rope_half(P x) == P rope_interleaved(x):", same)


# %% [markdown]
# ### Exercise 4: converting a checkpoint from the interleaved layout
#
# Meta's original Llama checkpoints were trained with the interleaved rotation; tinylm and Hugging Face rotate
# halves. Load such a checkpoint as it is and nothing complains: every shape fits, the model runs, and its text is
# garbage, because each query and key feature now pairs with the wrong partner. This has bitten real projects: the
# first export of Hugging Face weights to llama2.c's interleaved format left this permutation in place, and the model
# drifted into gibberish after a couple of dozen tokens
# ([karpathy/llama2.c#286](https://github.com/karpathy/llama2.c/pull/286)); a TinyLlama checkpoint converted for
# llama.cpp printed garbage until the thread traced it to which pairing the q/k permutation assumed
# ([jzhang38/TinyLlama#24](https://github.com/jzhang38/TinyLlama/issues/24)).
#
# The fix happens once, on the weights. `wq` is `(n_heads · head_dim, d_model)`: row block `h` (rows
# `h·head_dim .. (h+1)·head_dim - 1`) makes head `h`'s features, and within a block rows `2i, 2i+1` form pair `i`.
# Reorder each block's rows evens then odds ($P$ above), and the half rotation of `x @ W_permuted.T` is the
# interleaved rotation of `x @ W.T` with its features listed by $P$, so every score is unchanged.
#
# ```
# w                      (n_heads · head_dim, d_in)
# .reshape(n_heads, head_dim/2, 2, d_in)   pair i of head h = rows 2i, 2i+1 of its block
# swap the middle axes   (n_heads, 2, head_dim/2, d_in): first members, then second members
# .reshape back          (n_heads · head_dim, d_in)
# ```
#
# 1. `interleaved_to_half(w, n_heads)`: that reordering, per head (never across heads).
# 2. `meta_to_hf_attention(wq, wk, wv, wo, n_heads, n_kv_heads)`: one layer's `(q_proj, k_proj, v_proj, o_proj)`.
#    Only what is rotated moves: queries (`n_heads` blocks) and keys (`n_kv_heads` blocks); values and the output
#    projection stay as they are.
#
# The check uses its own interleaved rotation (complex numbers over neighbouring pairs) and compares, in every head,
# Meta's rotation of `x @ w.T` with the half rotation of `x @ yours.T`; then the attention built from your four weights
# with the half rotation against Meta's attention (4 query heads, 2 kv heads, head_dim 8, d_model 24).

# %% nbgrader={"grade": false, "grade_id": "interleaved_to_half", "locked": false, "schema_version": 3, "solution": true}
def interleaved_to_half(w: torch.Tensor, n_heads: int) -> torch.Tensor:
    """w (n_heads·head_dim, d_in), each head's rows in the interleaved layout -> the same rows in the half layout."""
    ### BEGIN SOLUTION
    rows, d_in = w.shape
    hd = rows // n_heads
    pairs = w.reshape(n_heads, hd // 2, 2, d_in)      # (nh, hd/2, 2, d_in): pair i of head h is rows 2i, 2i+1
    return pairs.transpose(1, 2).reshape(rows, d_in)  # (nh, 2, hd/2, d_in): each head's evens, then its odds
    ### END SOLUTION


def meta_to_hf_attention(wq, wk, wv, wo, n_heads: int, n_kv_heads: int):
    """One layer of an interleaved-layout checkpoint -> (q_proj, k_proj, v_proj, o_proj) for the half rotation."""
    ### BEGIN SOLUTION
    q_proj = interleaved_to_half(wq, n_heads)     # (nh·hd, d): queries are rotated
    k_proj = interleaved_to_half(wk, n_kv_heads)  # (n_kv·hd, d): keys too, in their own n_kv_heads blocks
    return q_proj, k_proj, wv, wo                 # values and o_proj: never rotated, unchanged
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_interleaved_to_half", "locked": true, "points": 2, "schema_version": 3, "solution": false}
check_interleaved_to_half(interleaved_to_half)
check_meta_to_hf_attention(meta_to_hf_attention)
### BEGIN HIDDEN TESTS
check_interleaved_to_half(interleaved_to_half, seed=41, n_heads=2, head_dim=6, d_in=7, batch=3, seq=4, start_pos=5,
                          dtype=torch.float64)
check_meta_to_hf_attention(meta_to_hf_attention, seed=42, n_heads=6, n_kv_heads=3, head_dim=4, d_model=10, seq=7)
### END HIDDEN TESTS

# %% [markdown]
# The same mistake on a whole model: tinylm's weights written out in the interleaved layout (the inverse reordering,
# as a converter to Meta's format would), then loaded back twice, once through your conversion and once as they are.

# %%
# NBVAL_CHECK_OUTPUT
from autograder.checks.rope_layouts import interleaved_rows
torch.manual_seed(0)
cfg = tinylm.ModelConfig(d_model=48, n_layers=2, n_heads=3, n_kv_heads=1, max_seq_len=32)
model = tinylm.Transformer(cfg).eval()
meta = {name: w.clone() for name, w in model.state_dict().items()}
for i in range(cfg.n_layers):  # what the checkpoint would hold: q and k rows in the interleaved order
    for proj, n in (("q_proj", cfg.n_heads), ("k_proj", cfg.n_kv_heads)):
        meta[f"blocks.{i}.attn.{proj}.weight"] = meta[f"blocks.{i}.attn.{proj}.weight"][interleaved_rows(n, cfg.head_dim)]
converted = dict(meta)
for i in range(cfg.n_layers):
    names = [f"blocks.{i}.attn.{p}.weight" for p in ("q_proj", "k_proj", "v_proj", "o_proj")]
    converted.update(zip(names, meta_to_hf_attention(*(meta[n] for n in names), cfg.n_heads, cfg.n_kv_heads)))
ids = tinylm.ByteTokenizer().encode("pairs of features")[None]  # (1, T)
as_is, yours = tinylm.Transformer(cfg).eval(), tinylm.Transformer(cfg).eval()
as_is.load_state_dict(meta), yours.load_state_dict(converted)
with torch.no_grad():
    want = model(ids)
    print("loaded as it is: runs, same logits:", torch.allclose(as_is(ids), want, atol=1e-5))
    print("through your conversion: same logits:", torch.allclose(yours(ids), want, atol=1e-5))

# %% [markdown]
# ## 4. Pitfalls
#
# The wrong versions live in `autograder/checks/pitfalls.py` (each is a solution with one line changed).
#
# **RoPE applied to values:** `v = apply_rope(v, ...)` as well. The output then mixes rotated values, so position
# leaks into *what* is read, and the relative-position property of the scores no longer describes the layer.

# %%
show_check(check_rotary_attention, pitfalls.rotary_attention_values_too)

# %% [markdown]
# **Wrong pairing convention:** rotating neighbours $(2i, 2i+1)$ with tables built for the half-split layout
# mixes the two conventions: it is not even a rotation any more (norms change), and pretrained weights produce
# garbage with it.

# %%
show_check(check_apply_rope, pitfalls.apply_rope_interleaved_pairs)

# %% [markdown]
# **Positions not offset:** `cos[:T]` instead of `cos[start_pos:start_pos + T]`. Invisible on a full sequence,
# wrong as soon as tokens arrive one at a time after a KV cache: every new token would believe it is at position 0.

# %%
show_check(check_apply_rope, pitfalls.apply_rope_no_offset)

# %% [markdown]
# **Wrong frequency exponent:** `theta ** (-torch.arange(hd // 2) / hd)` uses $i/d_h$ instead of $2i/d_h$: the
# slowest pair then turns ~100 times faster than intended, and long-range positions alias.

# %%
show_check(check_rope_cache, pitfalls.rope_cache_half_exponent)

# %% [markdown]
# ## 5. The experiment: positions, and how far they extrapolate
#
# The seed: RoPE puts relative position into the attention scores, and *extrapolation depends on frequency choices
# and training distribution*. Four tinylm models, trained side by side (same seed, same batches, same steps) on
# windows of 64 bytes, then scored at every position of windows four times longer, up to 256:
#
# - **RoPE** with the usual $\theta = 10000$, and with $\theta = 100$ (its pairs turn faster, so more of them make a
#   full turn within the training window and meet no new angle past it; the output counts them);
# - **no position information** (NoPE, `experiments.without_positions`): the rotation tables are set to the
#   identity, only the causal mask tells positions apart;
# - **learned absolute positions** (GPT-2, `experiments.with_learned_positions`): one trained vector per position
#   added to the token embedding; rows past 64 never receive a gradient.
#
# They are tinylm's model (not yours) so that the arms differ in the position scheme only. The four are trained
# from two seeds; a difference counts only where both seeds agree with their ranges further apart than the seeds'
# own spread. The cell times a few
# steps first and says how long it will take here (a shorter, announced variant on a slow machine).
# `python -m tinylm experiment positions --steps 1000` reruns it longer.

# %%
from tinylm import experiments

if GRADING:
    print("experiment skipped while grading")
else:
    corpus = tinylm.course_corpus()
    run = experiments.paced(experiments.positions, corpus, seeds=(0, 1), short_steps=50,
                            stated_s=experiments.pacing.STATED_S["positions"],
                            what="4 models on 64-byte windows (RoPE theta 10000 and 100, NoPE, learned)")
    inside, beyond = {}, {}  # per arm, one value per seed: the loss at positions 0-63, and how much it rises at 128-255
    for seed, pos in zip(run.seeds, run.results):
        print(f"seed {seed}:\n{pos.curves.summary()}")
        print("  mean validation loss (nats/byte) over positions:  0-63 (trained)   64-127   128-191   192-255")
        for label, losses in pos.loss_per_position.items():
            means = [sum(losses[i:i + 64]) / 64 for i in range(0, 256, 64)]
            print(f"  {label:<24}" + "".join(f"{m:>10.3f}" for m in means))
            inside.setdefault(label, []).append(means[0])
            beyond.setdefault(label, []).append((means[2] + means[3]) / 2 - means[0])
    experiments.plot_positions(run.results[0])
    plt.show()
    pair_dim, trained = experiments.SMALL_MODEL.head_dim, run.results[0].train_len
    # the largest angle pair i meets in training is (trained - 1) · omega_i: in turns, that over 2π
    turns = {theta: (trained - 1) * theta ** (-torch.arange(0, pair_dim, 2) / pair_dim) / (2 * math.pi)
             for theta in (10000, 100)}
    print(f"angles met in training (head_dim {pair_dim}, {pair_dim // 2} pairs, {trained} positions): " + "; ".join(
        f"theta={theta}: {int((t >= 1).sum())} of {len(t)} pairs make a full turn, the slowest {t[-1]:.3f} of a turn"
        for theta, t in turns.items()))

    print(f"\nwhat this run shows ({run.ran}):")
    best = experiments.lowest(inside)
    print("  inside the trained length: " + (f"{best} has the lowest loss of the four in every seed" if best else
                                              "no arm is lowest in both seeds"))
    ROPE, SLOW_ROPE, NOPE = "RoPE theta=10000", "RoPE theta=100", "no positions (NoPE)"
    print("  " + experiments.compare(inside, ROPE, SLOW_ROPE).sentence("loss at positions 0-63", "is lower inside "
          "the trained length than", "is higher inside the trained length than"))
    rise = "rise of the loss from positions 0-63 to 128-255"
    for a, b in ((ROPE, SLOW_ROPE), (ROPE, NOPE)):
        print("  " + experiments.compare(beyond, a, b).sentence(rise, "rises less past the trained length than",
                                                                   "rises more past the trained length than"))
    for label, values in beyond.items():
        print(f"  {label}: the loss past the trained length changes by {experiments.values_text(values)} nats/byte")
    print("  " + experiments.yardsticks(corpus).sentence(experiments.final_losses([p.curves for p in run.results]),
                                                         run.seeds))

# %% [markdown]
# **Reading the output.** The verdict lines compare the arms where the seed's claims are: inside the trained
# length (does relative position help?), and past it (does the loss rise where positions are new?). For RoPE the
# expectation is a trade between the two. A pair that makes a full turn within the 64 trained positions has met
# every angle it can take; a slower pair meets angles past them that it never saw in training. With
# $\theta = 10000$ most pairs are slow (the angles line counts them), so past the window the loss should rise; with
# $\theta = 100$ more pairs make a full turn, so fewer angles are new later, at some cost inside the window, where
# slow pairs are what tells far-apart tokens from near ones. (Even at $\theta = 100$ the slowest pairs do not make a
# full turn within 64 positions: a smaller $\theta$ moves the trade, it does not remove it.) NoPE has no angles to
# meet: a causal model without positions can still infer where it is, roughly, from how many tokens it attends to.
# Learned absolute positions have one vector per position, and rows past 64 never receive a gradient.
#
# The last two lines matter most for reading the rest. An arm that ends at the unigram's level has learned which
# bytes are common and not yet used the bytes before them; its loss is flat across positions because it ignores
# positions, and its "rise past the trained length" says nothing about extrapolation. Read each claim from its
# verdict line, with only the arms that left that level: where the seeds disagree, or an arm has not left it, this
# short run does not settle the claim, and the CLI's longer run is the next step.

# %% [markdown]
# ## Summary
#
# - Pair $i$ turns at frequency $\theta^{-2i/d_h}$; position $m$ rotates it by $m\,\omega_i$.
# - Half-split form: `x * cos + rotate_half(x) * sin`, tables `[angles, angles]`; interleaved form = same rotation, permuted features.
# - A checkpoint trained with the interleaved form loads into the half form after one reordering of the q and k rows,
#   per head (keys with n_kv_heads blocks); v and o stay. Without it the model runs and is wrong.
# - Rotate q and k, never v; the score then depends on the distance between tokens only.
# - Offset positions by `start_pos` when tokens come after a cache.
#
# **Next:** notebook 05 builds the other half of each block, the SwiGLU MLP, and assembles the whole model.
