# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 07 · Grouped-query attention (GQA)
#
# **What you build.** Attention in which several query heads share one key/value head, so the KV cache of
# notebook 06 shrinks by the size of the group. You will write
#
# 1. `repeat_kv(x, n_rep)`: give each query head its key/value head;
# 2. `gqa_attention(q, k, v)`: causal attention with fewer key/value heads than query heads;
# 3. `gqa_step(x, attn, cos, sin, past_k, past_v)`: the cached step of notebook 06, now storing only the
#    key/value heads;
# 4. `decode_bytes_per_token(config, context_len, dtype)`: what one decoding step reads from memory, and so the
#    speed a machine's memory allows, held against your decoder's measured speed.
#
# **Since notebook 06:** decoding keeps a cache of `2 · n_layers · n_kv_heads · d_head · T` numbers per sequence.
# Until now `n_kv_heads == n_heads`. GQA makes `n_kv_heads` a free parameter: `n_heads` (MHA) and 1 (MQA) are
# its two ends.
#
# **Run time:** about 45 s on an idle 2-core machine with one thread (`pytest --nbval-lax` on this notebook, kernel
# start included; most of it the experiment's training runs). The notebook computes with one thread on purpose (the
# setup cell says so); on a slower or busy machine each long cell first says how long it expects to take there, and
# runs a shorter, announced variant where the full one would take more than three times as long.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false}
import os
import warnings

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

import tinylm
import tinylm.experiments
from autograder.checks import pitfalls  # deliberately wrong functions, kept out of this notebook
from autograder.checks import (check_decode_bytes_per_token, check_gqa_attention, check_gqa_step, check_repeat_kv,
                               show_check)
from autograder.checks.learner_model import require_agreement

# nbgrader counts anything on stderr as a failed cell: silence known library warnings once.
warnings.filterwarnings("ignore", category=UserWarning)
warnings.filterwarnings("ignore", category=FutureWarning)
torch.manual_seed(0)
DEVICE = tinylm.device()
GRADING = bool(os.environ.get("NBGRADER_EXECUTION"))  # set by nbgrader while it validates or grades
THREADS = tinylm.experiments.use_threads()  # one CPU thread, on purpose: the line it prints says why

# %% [markdown]
# ## 1. Sharing key/value heads
#
# Queries keep their `n_heads` heads; keys and values get only `n_kv_heads`, a divisor of `n_heads`:
#
# | tensor | shape |
# |---|---|
# | `q` | `[B, n_heads, T, hd]` |
# | `k`, `v` (and the cache) | `[B, n_kv_heads, T, hd]` |
# | group size | `n_rep = n_heads // n_kv_heads` query heads per kv head |
#
# Query heads are split into `n_kv_heads` **contiguous** groups: query head $h$ reads kv head $h \,/\!/\, n_\text{rep}$.
# That is the convention of Llama checkpoints and of `F.scaled_dot_product_attention(..., enable_gqa=True)`, and a
# trained model only works with the mapping it was trained with. The figure shows it for 8 query heads.

# %%
fig, axes = plt.subplots(1, 3, figsize=(10, 2.4))
for ax, n_kv in zip(axes, (8, 2, 1)):
    n_rep = 8 // n_kv
    owner = torch.arange(8) // n_rep                        # kv head read by each query head
    grid = F.one_hot(owner, n_kv).T                         # (n_kv, 8): 1 where kv head j serves query head h
    ax.imshow(grid, cmap="Blues", aspect="auto", vmin=0, vmax=1.3)
    ax.set_xticks(range(8)), ax.set_yticks(range(n_kv))
    ax.set_xlabel("query head h"), ax.set_ylabel("kv head")
    ax.set_title({8: "MHA: n_kv = 8", 2: "GQA: n_kv = 2", 1: "MQA: n_kv = 1"}[n_kv])
plt.tight_layout()
plt.show()

# %% [markdown]
# What it saves: the cache (and the K/V projections) shrink by `n_rep`; the query side and the output projection do
# not change. Measured on `tinylm.KVCache` for a model with 8 query heads:

# %%
# NBVAL_CHECK_OUTPUT
sizes = {}
for n_kv in (8, 4, 2, 1):
    cfg = tinylm.ModelConfig(d_model=256, n_layers=4, n_heads=8, n_kv_heads=n_kv, max_seq_len=1024)
    sizes[n_kv] = tinylm.KVCache(cfg, batch_size=1).nbytes()
    params = sum(p.numel() for p in tinylm.Attention(cfg).parameters())
    print(f"n_kv_heads={n_kv}: cache {sizes[n_kv] / 2**20:5.2f} MiB for 1024 positions, "
          f"attention parameters per layer {params:,}")

# %%
fig, ax = plt.subplots(figsize=(5.5, 2.6))
ax.bar([f"{k} kv heads" for k in sizes], [v / 2**20 for v in sizes.values()], color=["C0", "C2", "C2", "C1"])
ax.set_ylabel("KV cache, MiB"), ax.set_title("8 query heads, 4 layers, 1024 positions, fp32")
plt.show()


# %% [markdown]
# ## 2. Repeating the kv heads
#
# The simplest way to attend is to make keys and values look like MHA again, just for the attention computation:
# repeat each kv head `n_rep` times **in place**, so the result's head axis reads `kv0, kv0, ..., kv1, kv1, ...`.
# That is `x.repeat_interleave(n_rep, dim=1)`; write it with `expand` and `reshape` instead (no copy until the
# reshape, which is how `tinylm.repeat_kv` does it). `x.repeat(1, n_rep, 1, 1)` has the same shape and the wrong
# order: `kv0, kv1, ..., kv0, kv1, ...`.

# %% nbgrader={"grade": false, "grade_id": "repeat_kv", "locked": false, "schema_version": 3, "solution": true}
def repeat_kv(x, n_rep):
    """(B, n_kv, T, hd) -> (B, n_kv * n_rep, T, hd); head h of the result is kv head h // n_rep."""
    ### BEGIN SOLUTION
    B, n_kv, T, hd = x.shape
    x = x[:, :, None].expand(B, n_kv, n_rep, T, hd)  # (B, n_kv, n_rep, T, hd): a view, copies of each kv head side by side
    return x.reshape(B, n_kv * n_rep, T, hd)          # (B, n_kv * n_rep, T, hd): groups stay contiguous
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_repeat_kv", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_repeat_kv(repeat_kv)
### BEGIN HIDDEN TESTS
check_repeat_kv(repeat_kv, seed=5, batch=3, n_kv=2, seq=7, head_dim=5, n_reps=(3, 1, 6), dtype=torch.float64)
### END HIDDEN TESTS

# %% [markdown]
# ## 3. GQA attention
#
# `q` has `n_heads` heads, `k` and `v` have `n_kv_heads`, all with the same `T` (no cache here). Repeat `k` and `v`
# to the query heads with your `repeat_kv`, then causal attention as in notebook 03 (you may use
# `F.scaled_dot_product_attention(..., is_causal=True)` for the attention itself: queries and keys have the same
# length). The check compares with `F.scaled_dot_product_attention(..., enable_gqa=True)`, for GQA, MQA and MHA.

# %% nbgrader={"grade": false, "grade_id": "gqa_attention", "locked": false, "schema_version": 3, "solution": true}
def gqa_attention(q, k, v):
    """q (B, n_heads, T, hd); k, v (B, n_kv, T, hd) -> (B, n_heads, T, hd), causal."""
    ### BEGIN SOLUTION
    n_rep = q.shape[1] // k.shape[1]
    k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)  # (B, n_heads, T, hd): only inside attention
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_gqa_attention", "locked": true, "points": 2, "schema_version": 3, "solution": false}
check_gqa_attention(gqa_attention)
### BEGIN HIDDEN TESTS
check_gqa_attention(gqa_attention, seed=13, batch=3, n_heads=8, seq=6, head_dim=2, kv_heads=(4, 2, 1), dtype=torch.float64)
### END HIDDEN TESTS

# %% [markdown]
# ### Your GQA inside the model
#
# `tinylm`'s reference attention calls `tinylm.attention.repeat_kv`. Put yours in its place in a model with 6 query
# heads and 2 kv heads: the logits equal those of the fused `enable_gqa=True` path.

# %%
# NBVAL_CHECK_OUTPUT
torch.manual_seed(0)
cfg = tinylm.ModelConfig(d_model=96, n_layers=2, n_heads=6, n_kv_heads=2, max_seq_len=64)
fused = tinylm.Transformer(cfg).eval()
reference = tinylm.Transformer(tinylm.ModelConfig(**{**cfg.__dict__, "attn_impl": "reference"})).eval()
reference.load_state_dict(fused.state_dict())
ids = tinylm.ByteTokenizer().encode("six heads, two groups")[None]  # (1, T)
original = tinylm.attention.repeat_kv
tinylm.attention.repeat_kv = repeat_kv
try:
    with torch.no_grad():
        same = torch.allclose(fused(ids), reference(ids), atol=1e-5)
finally:
    tinylm.attention.repeat_kv = original
require_agreement("your repeat_kv inside tinylm gives the fused GQA logits", same,
                  "your repeat_kv (exercise 1 above) changes tinylm's GQA logits: rerun its check")


# %% [markdown]
# ## 4. The cached step, with GQA
#
# The step of notebook 06 again (project, RoPE at `start_pos`, append to the cache, attend with the bottom-right
# mask, merge, `o_proj`), with one difference that is the whole point of GQA: **the cache stores the `n_kv_heads`
# keys and values**, and the repetition to `n_heads` happens only for the attention computation. Append with
# `torch.cat(..., dim=2)`; repeat with your `repeat_kv`.

# %% nbgrader={"grade": false, "grade_id": "gqa_step", "locked": false, "schema_version": 3, "solution": true}
def gqa_step(x, attn, cos, sin, past_k, past_v):
    """x (B, T_new, d); past_k, past_v (B, n_kv, T_past, hd) -> y (B, T_new, d), k_all, v_all (B, n_kv, T_all, hd)."""
    ### BEGIN SOLUTION
    B, T, _ = x.shape
    start, n_rep = past_k.shape[2], attn.n_heads // attn.n_kv_heads
    q = attn.q_proj(x).view(B, T, attn.n_heads, attn.head_dim).transpose(1, 2)     # (B, nh, T, hd)
    k = attn.k_proj(x).view(B, T, attn.n_kv_heads, attn.head_dim).transpose(1, 2)  # (B, n_kv, T, hd)
    v = attn.v_proj(x).view(B, T, attn.n_kv_heads, attn.head_dim).transpose(1, 2)  # (B, n_kv, T, hd)
    q, k = tinylm.apply_rope(q, cos, sin, start), tinylm.apply_rope(k, cos, sin, start)
    k_all = torch.cat((past_k, k), dim=2)                 # (B, n_kv, start + T, hd): the small cache
    v_all = torch.cat((past_v, v), dim=2)
    mask = tinylm.causal_mask(T, start + T).to(x.device)  # (T, start + T)
    y = F.scaled_dot_product_attention(q, repeat_kv(k_all, n_rep), repeat_kv(v_all, n_rep), attn_mask=mask)
    y = y.transpose(1, 2).reshape(B, T, attn.n_heads * attn.head_dim)  # (B, nh, T, hd) -> (B, T, d)
    return attn.o_proj(y), k_all, v_all
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_gqa_step", "locked": true, "points": 3, "schema_version": 3, "solution": false}
check_gqa_step(gqa_step)
### BEGIN HIDDEN TESTS
check_gqa_step(gqa_step, seed=23, batch=2, n_heads=6, n_kv_heads=3, head_dim=4, steps=(3, 1, 4, 1), dtype=torch.float64)
check_gqa_step(gqa_step, seed=24, batch=1, n_heads=4, n_kv_heads=1, head_dim=8, steps=(2, 1, 1))
### END HIDDEN TESTS

# %% [markdown]
# Generation with the cache keeps working: a GQA model generates the same tokens with and without the cache.

# %%
# NBVAL_CHECK_OUTPUT
prompt = tinylm.ByteTokenizer().encode("GQA")[None].to(DEVICE)  # (1, T)
fused = fused.to(DEVICE)
print("cached == uncached:", torch.equal(tinylm.generate(fused, prompt, 30, temperature=0),
                                         tinylm.generate(fused, prompt, 30, temperature=0, use_cache=False)))


# %% [markdown]
# ### What a decoding step reads, and the speed that allows
#
# A decoding step does little arithmetic: one token through the model. But it has to read the whole model from
# memory, every weight once, and the keys and values of every cached position in every block. On most machines
# reading memory is slower than the arithmetic on what is read, so the bytes set a speed limit:
#
# $$\text{tokens per second} \;\le\; \frac{\text{memory bandwidth (bytes/s)}}{\text{bytes read per token}}$$
#
# The weights' share is the same at every position; the cache's grows with the context, and that is the part GQA
# shrinks by `n_heads / n_kv_heads`.
#
# ### Exercise: `decode_bytes_per_token`
#
# Return `{"weights": ..., "kv_cache": ...}`, the bytes one decoding step reads at position `context_len` (with
# `context_len` positions already cached), as ints, for numbers of `dtype` (a float, or `torch.int8` for a quantised
# model, one byte per number): `weights`, every parameter of the model
# once (the whole decoder of notebook 05, a tied head being the embedding's own matrix; by this convention the
# embedding counts whole, although a lookup reads one row of it), and `kv_cache`, the keys and values of the
# `context_len` cached positions in every block. The check measures the `nbytes` of tinylm's parameters in that dtype
# and of a `tinylm.KVCache` of that length, on the meta device; one of its configs sets `head_dim` apart from
# `d_model // n_heads`, as published models may (read `config.head_dim`).

# %% nbgrader={"grade": false, "grade_id": "decode_bytes_per_token", "locked": false, "schema_version": 3, "solution": true}
def decode_bytes_per_token(config, context_len, dtype=torch.bfloat16):
    """Bytes one decoding step reads: {"weights": every parameter once, "kv_cache": K and V of context_len positions}."""
    ### BEGIN SOLUTION
    d, L, hd, size = config.d_model, config.n_layers, config.head_dim, dtype.itemsize
    attention = 2 * d * config.n_heads * hd + 2 * d * config.n_kv_heads * hd  # q, o; k, v with n_kv heads
    per_block = attention + 3 * d * config.d_ff + 2 * d                       # SwiGLU's three matrices, two norms
    matrices = config.vocab_size * d * (1 if config.tie_embeddings else 2)    # a tied head is the embedding
    weights = (matrices + L * per_block + d) * size                           # + the final norm
    kv_cache = 2 * L * config.n_kv_heads * hd * context_len * size            # K and V, every block
    return {"weights": weights, "kv_cache": kv_cache}
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_decode_bytes_per_token", "locked": true, "points": 2, "schema_version": 3, "solution": false}
check_decode_bytes_per_token(decode_bytes_per_token)
### BEGIN HIDDEN TESTS
check_decode_bytes_per_token(decode_bytes_per_token, cases=(
    ("d_model 40, MQA, untied, float16, context 33",
     (tinylm.ModelConfig(vocab_size=70, d_model=40, n_layers=3, n_heads=4, n_kv_heads=1, tie_embeddings=False), 33,
      torch.float16)),
    ("d_model 96, GQA 12/4, tied, float64, context 500",
     (tinylm.ModelConfig(d_model=96, n_layers=7, n_heads=12, n_kv_heads=4, d_ff=160), 500, torch.float64))))
### END HIDDEN TESTS

# %% [markdown]
# Now hold the bound against this machine. The cell measures the memory bandwidth (copying 64 MiB, repeated), then
# times single decoding steps of a float32 model (`d_model` 256, 4 blocks, MHA) at positions 64 and 1024: at the
# second its cache is a large part of what a step reads (the table prints both parts). Each timing is the median of
# seven steps. Next to the speeds, the same in time: how long reading those bytes takes at the measured bandwidth,
# and how long a step took.

# %%
from tinylm import measure

bandwidth = measure.copy_bandwidth(DEVICE)
print(f"memory bandwidth: {bandwidth[0] / 1e9:.1f} GB/s (copying 64 MiB, median of 7, spread "
      f"{bandwidth[1] / 1e9:.1f} GB/s)")
torch.manual_seed(0)
decoder = tinylm.Transformer(tinylm.ModelConfig(d_model=256, n_layers=4, n_heads=8, max_seq_len=1025)).to(DEVICE).eval()
ids = torch.randint(256, (1, 1025), device=DEVICE)
print(f"{'position':>8} {'weights MiB':>12} {'cache MiB':>10} {'reading ms':>11} {'step ms':>8} {'bound tokens/s':>15} "
      f"{'measured':>9}  verdict")
for position in (64, 1024):
    reads = decode_bytes_per_token(decoder.config, position, torch.float32)
    bound = bandwidth[0] / sum(reads.values())
    cache = tinylm.KVCache(decoder.config, 1, device=DEVICE)
    with torch.no_grad():
        decoder(ids[:, :position], cache=cache)  # prefill, not timed
        ms = measure.timed_ms(lambda: (setattr(cache, "length", position), decoder(ids[:, position:position + 1], cache=cache)),
                              device=DEVICE)
    tokens_per_s = measure.rate(1, ms)
    print(f"{position:>8} {reads['weights'] / 2**20:>12.1f} {reads['kv_cache'] / 2**20:>10.1f} {1e3 / bound:>11.2f} "
          f"{ms[0]:>8.2f} {bound:>15,.0f} {tokens_per_s[0]:>9,.0f}  "
          f"{measure.against_prediction(bound, tokens_per_s, ' tokens/s')}")

# %% [markdown]
# The bound is a ceiling, not a forecast: a measured speed below it is expected, and the verdict column says how far
# below. The two ms columns say where the rest of the time goes: reading the bytes at the measured bandwidth takes
# the "reading ms", and the part of the "step ms" beyond it is spent on something the bytes do not explain; where
# that part is about the same at both positions, it is a fixed cost per step, paid whatever the context. At this
# size a step is dozens of small operations, each paying a fixed cost in Python and in launching it, on top of the
# bytes; weights this small may also stay in the
# processor's caches, which are faster than the main memory the copy measured. The bound describes large models,
# whose steps are mostly reading: SmolLM2 below, or Llama 3 8B, whose step reads gigabytes.

# %%
from tinylm import pretrained
from autograder.checks.real_model import pretrained_learner_model

why = "skipped while grading" if GRADING else pretrained.why_unavailable()  # None: the weights are installed
if why:
    print(f"real weights: {why}")
else:
    real, _ = pretrained_learner_model(DEVICE)  # your decoder with SmolLM2's weights (float32)
    position = 256
    reads = decode_bytes_per_token(real.config, position, torch.float32)
    bound = bandwidth[0] / sum(reads.values())
    ids = torch.randint(real.config.vocab_size, (1, position + 1), device=DEVICE)
    cache = tinylm.KVCache(real.config, 1, device=DEVICE)
    with torch.no_grad():
        real(ids[:, :position], cache=cache)  # prefill, not timed
        ms = measure.timed_ms(lambda: (setattr(cache, "length", position), real(ids[:, position:], cache=cache)),
                              repeats=5, device=DEVICE)
    tokens_per_s = measure.rate(1, ms)
    print(f"{pretrained.PRETRAINED_NAME} at position {position}: reads {reads['weights'] / 2**20:,.0f} MiB of weights "
          f"and {reads['kv_cache'] / 2**20:.1f} MiB of cache per token; bound {bound:.1f} tokens/s, your decoder "
          f"{tokens_per_s[0]:.1f} tokens/s: {measure.against_prediction(bound, tokens_per_s, ' tokens/s')}")
    del real, cache

# %% [markdown]
# At Llama 3 8B's size the cache decides. In bfloat16 its weights are about 15 GiB, read at every step; the table
# predicts the bytes per token and the bound on this machine's bandwidth for MHA (32 kv heads), the published GQA
# (8) and MQA (1), at 8,192 and 65,536 tokens of context. (A prediction only: the model is not run here.)

# %%
from dataclasses import replace

from tinylm.presets import LLAMA3_8B

print(f"{'n_kv_heads':>10} {'context':>8} {'weights GiB':>12} {'cache GiB':>10} {'bound tokens/s':>15}")
for n_kv in (32, 8, 1):
    for context in (8192, 65536):
        reads = decode_bytes_per_token(replace(LLAMA3_8B, n_kv_heads=n_kv), context, torch.bfloat16)
        print(f"{n_kv:>10} {context:>8,} {reads['weights'] / 2**30:>12.1f} {reads['kv_cache'] / 2**30:>10.2f} "
              f"{bandwidth[0] / sum(reads.values()):>15.2f}")

# %% [markdown]
# At 65,536 tokens an MHA cache is larger than the weights and a step reads both, so the bound falls well below what
# the weights alone allow. The published 8 kv heads cut the cache fourfold, which at that length roughly doubles the
# bound (compare the two rows at 65,536); MQA's single kv head makes the cache small next to the weights at any
# length here. This is the serving cost GQA was made for; the experiment below asks what it costs in quality.

# %% [markdown]
# ## 5. Pitfalls
#
# **Tiling instead of repeating in place.** `x.repeat(1, n_rep, 1, 1)` has the right shape, and with `n_rep = 1` or
# `n_kv = 1` it is even right. With real groups, query head 1 reads kv head 1 instead of kv head 0.

# %%
show_check(check_repeat_kv, pitfalls.repeat_kv_tiled)

# %% [markdown]
# **Repeating along the wrong axis.** Repeating the *positions* instead of the heads: `T` becomes `n_rep · T`.

# %%
show_check(check_repeat_kv, pitfalls.repeat_kv_positions)

# %% [markdown]
# **Expanded K/V stored in the cache.** Repeating before appending gives correct outputs and throws away the
# saving: the cache is as large as MHA's. The check looks at the cache, not only the output.

# %%
show_check(check_gqa_step, pitfalls.gqa_step_expanded_cache)

# %% [markdown]
# ## 6. The experiment: KV memory against quality
#
# The seed's trade-off: fewer key/value heads shrink the KV cache, at some cost in quality. Four tinylm models
# with 8 query heads and `n_kv_heads` = 8 (MHA), 4, 2 and 1 (MQA), trained side by side on the course corpus (same
# seed, same batches, same steps); each point is a model's final validation loss against what its cache costs per
# token (keys and values, every layer, float32). Fewer KV heads also means fewer parameters (the `k_proj` and
# `v_proj` matrices shrink): the output lists them. The four are trained from two seeds; a difference counts only
# where both seeds agree with their ranges further apart than the seeds' own spread. The cell times a few steps
# first and says how long it will take
# here (a shorter, announced variant on a slow machine). `python -m tinylm experiment kv_heads --steps 1000` reruns it
# longer.

# %%
from tinylm import experiments

if GRADING:
    print("experiment skipped while grading")
else:
    corpus = tinylm.course_corpus()
    run = experiments.paced(experiments.kv_heads, corpus, seeds=(0, 1), short_steps=50,
                            stated_s=experiments.pacing.STATED_S["kv_heads"],
                            what="4 models with 8 query heads and 8, 4, 2, 1 KV heads")
    for seed, kv in zip(run.seeds, run.results):
        print(f"seed {seed}:\n{kv.curves.summary()}")
    kv = run.results[0]
    for label, n_bytes in kv.kv_bytes_per_token.items():
        print(f"  {label:<24} KV cache {n_bytes:>5} bytes per token")
    experiments.plot_kv_heads(kv)
    plt.show()
    finals = experiments.final_losses([r.curves for r in run.results])
    labels = list(finals)
    sizes = list(kv.kv_bytes_per_token.values())
    print(f"\nwhat this run shows ({run.ran}):")
    print(f"  memory: each halving of n_kv_heads halves the cache: {all(b * 2 == a for a, b in zip(sizes, sizes[1:]))}")
    for a, b in zip(labels, labels[1:]):  # each step towards MQA
        print("  " + experiments.compare(finals, b, a).sentence())
    print("  " + experiments.yardsticks(corpus).sentence(finals, run.seeds))

# %% [markdown]
# **Reading the output.** The memory axis is exact: it is computed from the config, and the first verdict line
# checks that each halving of `n_kv_heads` halves the cache. The loss axis is measured, with each step from MHA
# towards MQA compared on its own: a step counts as a cost only where the model with fewer KV heads ends higher in
# both seeds with the ranges further apart than the seeds' own spread, and as a gain where it ends lower. Where the
# verdict does not tell them apart,
# this run cannot tell the two apart, which is not the same as finding no cost; the seed's trade-off predicts the
# cost to grow towards MQA. The last two lines give the scale: a run that ended at the unigram's level had, in all
# its steps, learned only which bytes are common. Where the model with fewer KV heads is such a run, "ends higher"
# means it had not yet started to use context: it learns more slowly at this length, which is a cost, but not yet
# the quality gap between two trained models. Whether the curve orders itself with more training is what the longer
# CLI run is for.

# %% [markdown]
# ## Summary
#
# - `n_kv_heads` key/value heads serve `n_heads` query heads in contiguous groups: query head $h$ reads kv head
#   $h \,/\!/\, (n_\text{heads} / n_\text{kv})$; `repeat_interleave`, never `repeat`.
# - MHA (`n_kv = n_heads`) and MQA (`n_kv = 1`) are the two ends of the same code.
# - Keep the cache at `n_kv` heads; repeat only inside attention. Cache memory drops by `n_heads / n_kv`.
#
# **Next:** notebook 08 turns the logits of the last position into a token: temperature, top-k and top-p sampling.
