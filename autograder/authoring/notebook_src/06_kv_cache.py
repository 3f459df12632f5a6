# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 06 · The KV cache
#
# **What you build.** The memory that makes decoding fast. You will write
#
# 1. `kv_cache_bytes(config, seq_len, batch_size, dtype)`: what the cache costs in memory, for any model and dtype;
# 2. `cache_update(past_k, past_v, k, v)`: append the new keys and values along the sequence axis;
# 3. `attention_step(x, attn, cos, sin, past_k, past_v)`: attention for a few *new* tokens that reads every cached
#    key, with RoPE positions offset by the cache length and a mask aligned for the new tokens;
# 4. `generate_greedy(model, prompt, max_new_tokens, cache)`: prefill once, then decode one token per step;
# 5. `generate_left_padded(model, prompts, max_new_tokens, cache)`: prompts of different lengths decoded as one batch with
#    the cache, each row as if it were alone.
#
# **Since notebook 05:** you have the whole model, `tinylm.Transformer`: embedding, blocks of RMSNorm, RoPE attention
# and SwiGLU, final norm, tied head. Its forward pass already accepts `cache=`; here you build what goes on inside.
#
# **Run time:** about 40 s on an idle 2-core machine with one thread (`pytest --nbval-lax` on this notebook, kernel
# start included; the real model included). The notebook computes with one thread on purpose (the setup cell says
# so); on a slower or busy machine each long cell first says how long it expects to take there, and runs a shorter,
# announced variant where the full one would take more than three times as long.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false}
import os
import time
import warnings

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

import tinylm
import tinylm.experiments
from tinylm.measure import Timing, clearly_more, timed_ms, timed_together  # (median, spread) of repeated timings
from tinylm.presets import NB06_MODEL
from autograder.checks import pitfalls  # deliberately wrong functions, kept out of this notebook
from autograder.checks import (check_attention_step, check_cache_update, check_generate_greedy,
                               check_generate_left_padded, check_kv_cache_bytes, show_check)
from autograder.checks.learner_model import (cached_matches_full, check_model_agrees, learner_cache, learner_model,
                                              require_agreement)

# nbgrader counts anything on stderr as a failed cell: silence known library warnings once.
warnings.filterwarnings("ignore", category=UserWarning)
warnings.filterwarnings("ignore", category=FutureWarning)
torch.manual_seed(0)
DEVICE = tinylm.device()
GRADING = bool(os.environ.get("NBGRADER_EXECUTION"))  # set by nbgrader while it validates or grades
THREADS = tinylm.experiments.use_threads()  # one CPU thread, on purpose: the line it prints says why


# %% [markdown]
# ## 1. Why decoding recomputes, and what to keep
#
# Generation is a loop: run the model on the tokens so far, take the logits of the **last** position, pick a token,
# append it, repeat. Without a cache, step $t$ runs the whole sequence of $t$ tokens through every layer again. But
# in a causal model nothing about position $j < t$ changes when token $t$ arrives: its key $k_j$ and value $v_j$ in
# every layer are exactly what they were one step earlier. Only the new token needs computing.
#
# So each layer keeps the keys and values of the past positions:
#
# | tensor | shape | |
# |---|---|---|
# | cache of one layer | `[B, n_kv_heads, T_past, head_dim]` for K, the same for V | grows along axis 2, the **sequence** axis |
# | new token(s) | `x`: `[B, T_new, d_model]` → `q`: `[B, n_heads, T_new, hd]`, `k, v`: `[B, n_kv, T_new, hd]` | |
# | after the step | K, V: `[B, n_kv, T_past + T_new, hd]` | |
# | scores | `q @ K.T`: `[B, n_heads, T_new, T_past + T_new]` | |
#
# Two things change compared with notebook 03:
#
# - **Positions.** The new tokens sit at positions `T_past, ..., T_past + T_new - 1`, so RoPE must rotate them by
#   those angles: `apply_rope(q, cos, sin, start_pos=T_past)`. Keys are cached *after* rotation, so a cached key
#   is never rotated again.
# - **The mask.** There are fewer queries than keys. New token $i$ may see every cached key and the new tokens up
#   to itself: the triangle is aligned **bottom-right**, `causal_mask(T_new, T_past + T_new)`. A single new token
#   sees everything.
#
# Generation is then **prefill** (the whole prompt in one pass, filling the cache) followed by **decode** steps of
# one token each. The cost per step stops growing with the square of the length; the price is memory:
#
# $$\text{cache bytes} = 2 \cdot n_\text{layers} \cdot B \cdot n_\text{kv heads} \cdot d_\text{head} \cdot T \cdot \text{bytes per number}$$
#
# (2 for K and V).
#
# ### Exercise: `kv_cache_bytes`
#
# Write that formula for any model: `config` gives `n_layers`, `n_kv_heads` and `head_dim`, and `dtype` the bytes per
# number (`dtype.itemsize`: 4 for `torch.float32`, 2 for `torch.bfloat16` and `torch.float16`, 1 for `torch.int8`,
# the numbers of a quantised cache). The check holds your bytes against the `nbytes` of the key and value tensors of a
# `tinylm.KVCache` holding exactly `seq_len` positions, allocated on PyTorch's meta device (sizes without memory), for
# seven models and dtypes up to Llama 3 8B at 65,536 tokens; the last is Qwen3-4B, whose `head_dim` (128) is set apart
# from `d_model // n_heads` (2560 // 32 = 80), as published models may set it.

# %% nbgrader={"grade": false, "grade_id": "kv_cache_bytes", "locked": false, "schema_version": 3, "solution": true}
def kv_cache_bytes(config, seq_len, batch_size=1, dtype=torch.float32):
    """Bytes of the keys and values of every layer for seq_len positions of batch_size sequences, as an int."""
    ### BEGIN SOLUTION
    per_position = 2 * config.n_layers * config.n_kv_heads * config.head_dim  # K and V, in every block
    return per_position * seq_len * batch_size * dtype.itemsize
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_kv_cache_bytes", "locked": true, "points": 2, "schema_version": 3, "solution": false}
check_kv_cache_bytes(kv_cache_bytes)
### BEGIN HIDDEN TESTS
check_kv_cache_bytes(kv_cache_bytes, cases=(
    ("d_model 96, GQA 12/4, float64, batch 7", (tinylm.ModelConfig(d_model=96, n_layers=6, n_heads=12, n_kv_heads=4),
                                                300, 7, torch.float64)),
    ("d_model 32, MQA, bfloat16, batch 2", (tinylm.ModelConfig(d_model=32, n_layers=9, n_heads=8, n_kv_heads=1),
                                            4096, 2, torch.bfloat16))))
### END HIDDEN TESTS

# %% [markdown]
# The plot shows your formula for this course's model and for a 7B-parameter Llama-2-sized model.

# %%
llama2_7b = tinylm.ModelConfig(vocab_size=32000, d_model=4096, n_layers=32, n_heads=32, d_ff=11008, max_seq_len=4096)
lengths = torch.arange(0, 4097, 256)
fig, axes = plt.subplots(1, 2, figsize=(10, 3))
axes[0].plot(lengths, [kv_cache_bytes(NB06_MODEL, t) / 2**20 for t in lengths.tolist()], label="notebook model (2 layers, d=64), fp32")
axes[1].plot(lengths, [kv_cache_bytes(llama2_7b, t, dtype=torch.float16) / 2**30 for t in lengths.tolist()], c="C1",
             label="Llama-2-7B (32 layers, d=4096), fp16")
axes[0].set_ylabel("MiB"), axes[1].set_ylabel("GiB")
for ax in axes:
    ax.set_xlabel("cached positions T (batch 1)"), ax.legend(loc="upper left")
fig.suptitle("KV cache memory grows linearly with the sequence")
plt.show()

# %% [markdown]
# `tinylm.KVCache` preallocates this memory once: `k` and `v` of shape `[n_layers, B, n_kv, max_seq_len, hd]`.
# Your formula and the allocation agree:

# %%
# NBVAL_CHECK_OUTPUT
cfg = NB06_MODEL  # the course's notebook-06 model: d_model 64, 2 layers, 4 heads, room for 1040 positions
cache = tinylm.KVCache(cfg, batch_size=2)
print("KVCache.nbytes():", cache.nbytes(), "| your kv_cache_bytes:", kv_cache_bytes(cfg, cfg.max_seq_len, batch_size=2))

# %% [markdown]
# At real sizes, in bfloat16 (two bytes a number, how large models are served), at 2,048 tokens and at 65,536:
# your prediction next to the bytes of the tensors a cache of that length holds (allocated on the meta device, so
# Llama 3 8B's 8 GiB cost nothing here). SmolLM2-135M and Llama 3 8B share key/value heads among query heads (GQA,
# notebook 07); the MHA column is what the same model would cache with one key/value head per query head.

# %%
# NBVAL_CHECK_OUTPUT
from dataclasses import replace

from autograder.checks.accounting import kv_cache_nbytes
from tinylm.presets import LLAMA3_8B, SMOLLM2_135M

print(f"{'model':<14} {'tokens':>7} {'yours (MiB)':>12} {'cache holds (MiB)':>18} {'with MHA (MiB)':>15}")
for name, config in (("notebook 06", cfg), ("SmolLM2-135M", SMOLLM2_135M), ("Llama-3-8B", LLAMA3_8B)):
    for tokens in (2048, 65536):
        yours = kv_cache_bytes(config, tokens, 1, torch.bfloat16)
        held = kv_cache_nbytes(config, tokens, 1, torch.bfloat16)
        mha = kv_cache_bytes(replace(config, n_kv_heads=config.n_heads), tokens, 1, torch.bfloat16)
        print(f"{name:<14} {tokens:>7,} {yours / 2**20:>12,.1f} {held / 2**20:>18,.1f} {mha / 2**20:>15,.1f}")


# %% [markdown]
# ## 2. Appending to the cache
#
# The cache of one layer is a pair of tensors `[B, n_kv, T_past, hd]`. New keys and values, `[B, n_kv, T_new, hd]`,
# go **after** the past ones along the sequence axis, `dim=2`. Every other axis must already agree. (A real cache,
# like `tinylm.KVCache`, writes into preallocated memory instead of concatenating, to avoid a copy per step; the
# result is the same tensor.) The cache may be empty: `T_past = 0`.

# %% nbgrader={"grade": false, "grade_id": "cache_update", "locked": false, "schema_version": 3, "solution": true}
def cache_update(past_k, past_v, k, v):
    """(B, n_kv, T_past, hd) and (B, n_kv, T_new, hd) -> the pair (k_all, v_all), (B, n_kv, T_past + T_new, hd)."""
    ### BEGIN SOLUTION
    k_all = torch.cat((past_k, k), dim=2)  # positions are axis 2: the past first, then the new tokens
    v_all = torch.cat((past_v, v), dim=2)
    return k_all, v_all
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_cache_update", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_cache_update(cache_update)
### BEGIN HIDDEN TESTS
check_cache_update(cache_update, seed=11, batch=3, heads=2, past=7, new=5, head_dim=4, dtype=torch.float64)
### END HIDDEN TESTS

# %% [markdown]
# ## 3. One attention step with a cache
#
# `attn` is a `tinylm.Attention` layer: use its projections `attn.q_proj`, `attn.k_proj`, `attn.v_proj`,
# `attn.o_proj` (plain `nn.Linear`s) and its sizes `attn.n_heads`, `attn.n_kv_heads`, `attn.head_dim`. Here
# `n_kv_heads == n_heads`; notebook 07 makes it smaller. The step:
#
# 1. project the new tokens and split heads: `q` `[B, n_heads, T_new, hd]`, `k`, `v` `[B, n_kv, T_new, hd]`;
# 2. rotate `q` and `k` with `tinylm.apply_rope(..., cos, sin, start_pos)`, where `start_pos` is the number of
#    cached positions;
# 3. append `k`, `v` to the cache with your `cache_update`;
# 4. attend from the new queries to all keys with the bottom-right mask `tinylm.causal_mask(T_new, T_all)`
#    (`F.scaled_dot_product_attention(q, k, v, attn_mask=mask)` accepts a boolean mask, True = may attend);
# 5. merge heads and apply `o_proj`.
#
# Return three tensors, `return y, k_all, v_all` (a flat triple, not `y, (k_all, v_all)`): the output and the
# updated cache, which the caller passes back in at the next step.

# %% nbgrader={"grade": false, "grade_id": "attention_step", "locked": false, "schema_version": 3, "solution": true}
def attention_step(x, attn, cos, sin, past_k, past_v):
    """x (B, T_new, d) new tokens; past_k, past_v (B, n_kv, T_past, hd).
    Returns three tensors, y, k_all, v_all: y (B, T_new, d); k_all, v_all (B, n_kv, T_past + T_new, hd)."""
    ### BEGIN SOLUTION
    B, T, _ = x.shape
    start = past_k.shape[2]                                                   # cached positions come first
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
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_attention_step", "locked": true, "points": 3, "schema_version": 3, "solution": false}
check_attention_step(attention_step)
### BEGIN HIDDEN TESTS
check_attention_step(attention_step, seed=21, batch=3, n_heads=2, head_dim=8, steps=(4, 1, 2, 1, 1), dtype=torch.float64)
check_attention_step(attention_step, seed=22, batch=1, n_heads=5, head_dim=2, steps=(1, 1, 6))
### END HIDDEN TESTS

# %% [markdown]
# The check feeds a sequence in chunks (a prefill of 5, then 3 tokens, then single tokens) and compares every step
# with a **full recompute**: attention over the whole sequence at once. Cached decoding is correct exactly when
# those agree. The same property on a whole model, one decode step after a prefill of 12 tokens. The model is
# **yours**: notebook 05's `Transformer` with your functions in it (and, in its cache, your `cache_update`) where
# their checks passed, tinylm's pieces elsewhere; the line below says which is whose.

# %%
torch.manual_seed(0)
model = learner_model(cfg, DEVICE).eval()

# %%
# NBVAL_CHECK_OUTPUT
ids = torch.randint(256, (2, 13), generator=torch.Generator().manual_seed(0)).to(DEVICE)  # (B, 13)
with torch.no_grad():
    full = model(ids)[:, -1]                                     # logits of position 12, no cache
    cache = learner_cache(model, batch_size=2)
    model(ids[:, :12], cache=cache)                              # prefill 12 positions
    step = model(ids[:, 12:], cache=cache)[:, -1]                # decode position 12 from the cache
print("cache length:", cache.length)
# A check, not just a print: if it fails, it names the piece of your model (and its notebook) that causes it.
check_model_agrees("cached logits equal the full recompute", lambda m: cached_matches_full(m, ids), model)


# %% [markdown]
# ## 4. Generation: prefill, then decode
#
# `tinylm.KVCache(config, batch_size)` holds every layer's cache; the model writes into it when you pass
# `cache=cache`, and `cache.length` says how many positions it holds. Write greedy decoding:
#
# - the cache you receive may still hold a previous prompt (a server reuses one cache): `cache.reset()` first;
# - **prefill**: `model(prompt, cache=cache)`, take the logits of the last position, `argmax`;
# - **decode**: feed only the newest token, shape `(B, 1)`, with the cache, `max_new_tokens - 1` more times.
#
# Return the prompt followed by the new tokens, `(B, T + max_new_tokens)`. Run under `torch.no_grad()`, and give the
# caller back the model in the mode it came in (the check hands it over in eval mode and in train mode).

# %% nbgrader={"grade": false, "grade_id": "generate_greedy", "locked": false, "schema_version": 3, "solution": true}
def generate_greedy(model, prompt, max_new_tokens, cache):
    """prompt (B, T) -> (B, T + max_new_tokens), greedy, with a KVCache."""
    ### BEGIN SOLUTION
    cache.reset()                                   # stale positions from an earlier prompt would shift everything
    idx, step_input = prompt, prompt                # prefill: the whole prompt in one pass
    with torch.no_grad():                           # decoding never backpropagates
        for _ in range(max_new_tokens):
            logits = model(step_input, cache=cache)[:, -1]      # (B, V): only the last position predicts
            next_id = logits.argmax(dim=-1, keepdim=True)       # (B, 1)
            idx = torch.cat((idx, next_id), dim=1)              # (B, T + 1)
            step_input = next_id                                # decode: one new token per step
    return idx
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_generate_greedy", "locked": true, "points": 2, "schema_version": 3, "solution": false}
check_generate_greedy(generate_greedy)
### BEGIN HIDDEN TESTS
check_generate_greedy(generate_greedy, seed=31, batch=3, prompts=(2, 7, 4), max_new_tokens=9, n_kv_heads=1)
### END HIDDEN TESTS

# %% [markdown]
# ### What the cache buys
#
# The time of one decoding step at position $T$, with the cache (one token through the model) and without it (all
# $T + 1$ tokens again). The expectation: without the cache a step costs more the longer the text; with it, the step
# stays nearly flat (only the attention over the cached keys grows, a small part of a step at these lengths).
# Timings are noisy, more so on a shared machine: every point is the median of seven runs, the bars show the range
# of the middle five (`tinylm.measure.timed_ms`), and the cell says whether the differences stand out from that range
# or are **too noisy to tell**. The work
# is fixed (four positions, at most 257 tokens), so the cell takes seconds, not minutes, on a slow machine too.

# %%
def error_bars(timings):
    """The bars of a list of timed_ms results: from each median down to the fastest and up to the slowest of the
    middle runs (the range is not centred on the median, and a bar drawn from it cannot reach below zero)."""
    return [[t[0] - t.low for t in timings], [t.high - t[0] for t in timings]]


def step_timing(model, T, use_cache):
    """(median, spread) ms of one decoding step at position T; the prefill is not timed."""
    ids = torch.randint(256, (1, T + 1), device=DEVICE)
    cache = tinylm.KVCache(model.config, 1, device=DEVICE)
    with torch.no_grad():
        model(ids[:, :T], cache=cache)                            # prefill once
        def step():
            cache.length = T                                      # the same position every repeat
            model(ids[:, T:], cache=cache)
        return timed_ms(step if use_cache else lambda: model(ids))

positions = [16, 64, 128, 256]
with_cache = [step_timing(model, T, True) for T in positions]
without = [step_timing(model, T, False) for T in positions]
fig, ax = plt.subplots(figsize=(6.5, 3))
for timings, label in ((without, "no cache: recompute T + 1 tokens"), (with_cache, "KV cache: 1 new token")):
    ax.errorbar(positions, [m for m, _ in timings], yerr=error_bars(timings), fmt="o-", capsize=3, label=label)
ax.set_xlabel("position T of the generated token"), ax.set_ylabel("ms per token (median of 7)"), ax.legend()
plt.show()
if clearly_more(without[0], without[-1]) and clearly_more(with_cache[-1], without[-1]):
    print(f"measured: recomputing costs {without[0][0]:.1f} ms at T={positions[0]} and {without[-1][0]:.1f} ms at "
          f"T={positions[-1]}; a cached step at T={positions[-1]} costs {with_cache[-1][0]:.1f} ms")
else:
    print("too noisy on this machine to tell: the repeated timings spread as much as the differences between them "
          "(rerun this cell when the machine is idle)")


# %% [markdown]
# ### Why this small model gains less than a large one
#
# A cached step does little arithmetic, but every call still pays a fixed cost: Python, launching a few dozen small
# tensor operations, picking the next token. At `d_model = 64` that fixed cost is most of a step, so skipping the
# recomputation saves less than counting multiplications suggests. Widen the model: the work the cache skips grows
# with $d^2$, the fixed cost does not. Below, whole greedy generations of 32 tokens after a 16-token prompt at four
# widths; the expectation is that the cached time per token barely moves while the uncached time climbs, and the
# speed-up with it. The cell says whether this machine's timings support that. `benchmarks/bench_kv_cache.py`
# measures the notebook's model and a wider one (d = 256, 4 layers) side by side.

# %%
def generation_timing(model, use_cache, n_new=32):
    """(median, spread) ms per generated token, greedy, from a 16-token prompt."""
    prompt = torch.randint(256, (1, 16), device=DEVICE)
    whole = timed_ms(lambda: tinylm.generate(model, prompt, n_new, temperature=0, use_cache=use_cache), 5)
    return Timing(whole[0] / n_new, whole.low / n_new, whole.high / n_new)

widths = [32, 128] if GRADING else [32, 64, 128, 256]
cached, uncached = [], []
for width in widths:
    torch.manual_seed(0)
    wide = tinylm.Transformer(tinylm.ModelConfig(d_model=width, n_layers=2, n_heads=4, max_seq_len=48)).to(DEVICE).eval()
    cached.append(generation_timing(wide, use_cache=True))
    uncached.append(generation_timing(wide, use_cache=False))
speedup = [u / c for (u, _), (c, _) in zip(uncached, cached)]
# The slowest and fastest speed-up the ranges of the middle runs allow, per width (ratios of positive times, so never
# below zero): a trend counts only where these ranges do not overlap.
low = [u.low / c.high for u, c in zip(uncached, cached)]
high = [u.high / c.low for u, c in zip(uncached, cached)]
fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3))
left.plot(widths, [u for u, _ in uncached], "o-", label="no cache")
left.plot(widths, [c for c, _ in cached], "o-", label="KV cache")
left.set_yscale("log"), left.set_ylabel("ms per generated token"), left.legend()
right.plot(widths, speedup, "o-"), right.fill_between(widths, low, high, alpha=0.2)
right.set_ylabel("speed-up (no cache / cache)")
for ax in (left, right):
    ax.set_xscale("log", base=2), ax.set_xticks(widths, [str(w) for w in widths]), ax.set_xlabel("d_model (2 layers)")
plt.show()
if low[-1] > high[0]:
    print(f"measured: the speed-up grows from {speedup[0]:.1f}x at d_model={widths[0]} to {speedup[-1]:.1f}x at "
          f"d_model={widths[-1]}")
else:
    print("too noisy on this machine to tell whether the speed-up grows with the width: the ranges of the timings "
          "overlap (rerun this cell when the machine is idle)")

# %% [markdown]
# Your `generate_greedy` and `tinylm.generate(temperature=0)` agree, and so do cached and uncached generation:

# %%
# NBVAL_CHECK_OUTPUT
tok = tinylm.ByteTokenizer()
prompt = tok.encode("Once upon a time")[None].to(DEVICE)                     # (1, T)
mine = generate_greedy(model, prompt, 20, learner_cache(model, batch_size=1))
ref = tinylm.generate(model, prompt, 20, temperature=0)
require_agreement("yours == tinylm.generate", torch.equal(mine, ref),
                  "your generate_greedy (exercise 4 above) decodes differently from tinylm.generate on this model")
check_model_agrees("cached == uncached", lambda m: torch.equal(tinylm.generate(m, prompt, 20, temperature=0),
                                                               tinylm.generate(m, prompt, 20, temperature=0,
                                                                               use_cache=False)), model)

# %% [markdown]
# ### At real size: SmolLM2-135M
#
# Notebook 05 loaded a pretrained Llama into your decoder. Its cache holds, per token, one key and one value vector
# of `head_dim` numbers for each key/value head of each block: `2 · n_layers · n_kv_heads · head_dim` numbers. The
# model shares each key/value head among several query heads (grouped-query attention, notebook 07), so it stores
# fewer of them than it has query heads; below, the bytes per token computed from its config, next to what the same
# model would store with one key/value head per query head (multi-head attention), and what `tinylm.KVCache`
# actually allocates.
#
# Then two things measured on the real model: whether your decoding gives the tokens tinylm's gives on the same
# weights, and the speed the cache buys.

# %%
from tinylm import pretrained
from autograder.checks.real_model import pretrained_learner_model, skipped_init

why = "skipped while grading" if GRADING else pretrained.why_unavailable()  # None: the weights are installed
if why:
    print(f"real weights: {why}")
else:
    real, bpe = pretrained_learner_model(DEVICE)
    c = real.config
    fp32 = 4                                                                  # bytes per number
    gqa_bytes = 2 * c.n_layers * c.n_kv_heads * c.head_dim * fp32             # K and V, every block
    mha_bytes = 2 * c.n_layers * c.n_heads * c.head_dim * fp32                # as many kv heads as query heads
    allocated = tinylm.KVCache(c, batch_size=1).nbytes() / c.max_seq_len      # tinylm's preallocated cache, per position
    weights = real.num_parameters() * fp32
    print(f"{c.n_layers} blocks x {c.n_kv_heads} kv heads x {c.head_dim} x (K, V) x {fp32} bytes = {gqa_bytes:,} bytes "
          f"per token (tinylm.KVCache allocates {allocated:,.0f})")
    print(f"with MHA ({c.n_heads} kv heads): {mha_bytes:,} bytes per token, {mha_bytes / gqa_bytes:.0f}x more")
    for tokens in (2048, 32 * 2048):
        print(f"{tokens:>6,} tokens: GQA {tokens * gqa_bytes / 2**20:8,.0f} MiB, MHA {tokens * mha_bytes / 2**20:8,.0f} MiB "
              f"(the float32 weights: {weights / 2**20:,.0f} MiB)")

# %% [markdown]
# **Your decoding against tinylm's, on real weights.** The checks above decoded small random models. Here your
# `generate_greedy`, with your decoder and your cache where their checks passed, continues a batch of two prompts on
# SmolLM2's weights, and `tinylm.generate` (greedy, tinylm's own model and `KVCache`, the same weights) continues the
# same batch. A batch, because a decoding loop that mixes up the rows of a batch passes every test run on one
# prompt. The two questions are chosen so that their chat prompts have the same number of tokens (this model takes
# no padding mask, so the rows of a batch must have one length). The tokens must be the same, all 16 of them, also
# after the end-of-turn token, where the model goes on writing a next turn; the cell shows each answer up to that
# token and names the first token that differs in each prompt.

# %%
if not why:
    questions = ("What is the capital of France?", "Name three colors of the rainbow.")  # prompts of one length
    rows = [bpe.chat_ids(q) for q in questions]
    if len({len(row) for row in rows}) > 1:
        raise ValueError(f"the two chat prompts must have one length to form a batch, got {[len(r) for r in rows]} "
                         "tokens: pick questions whose prompts have as many tokens")
    batch = torch.tensor(rows, device=DEVICE)  # (2, T)
    with skipped_init():
        reference = tinylm.Transformer(real.config).to(DEVICE).eval()
    reference.load_state_dict(real.state_dict())
    n_new = 16
    mine = generate_greedy(real, batch, n_new, learner_cache(real, batch_size=len(rows)))[:, batch.shape[1]:]
    ref = tinylm.generate(reference, batch, n_new, temperature=0)[:, batch.shape[1]:]    # (2, n_new) each
    del reference
    for row in range(len(rows)):
        where = (mine[row] != ref[row]).nonzero().flatten().tolist()
        answer, end_of_turn, _ = bpe.decode(mine[row].tolist()).partition(bpe.decode([bpe.eos_id]))
        print(f"prompt {row}: {questions[row]!r} -> yours {answer!r}"
              + (", then the end of the turn" if end_of_turn else ""))
        if where:
            t = where[0]
            print(f"  first difference at new token {t}: yours {bpe.decode([int(mine[row, t])])!r}, "
                  f"tinylm {bpe.decode([int(ref[row, t])])!r} (tinylm: {bpe.decode(ref[row].tolist())!r})")
    require_agreement(f"your decoding gives tinylm's {n_new} tokens for both prompts", torch.equal(mine, ref),
                      "your generate_greedy, cache or decoder decodes real weights differently from tinylm although "
                      "their checks passed: the first difference above says where; rerun exercise 4's check with "
                      "two prompts of different content in one batch")


# %% [markdown]
# **The speed the cache buys, at real size.** The time of one greedy step at position $T$, with your cache (one new
# token) and without it (all $T + 1$ tokens again), taken in turn, each the median of a few runs with the range of
# the middle ones (of all of them where only three ran),
# as in the timing above; the cell says whether the differences stand out from that range or are **too noisy to
# tell**. It first times the longest recompute once and, on a machine where the whole measurement would take more
# than three times its stated time, measures fewer runs per point, and says so.

# %%
def after_prefill(cache, T):
    """A function that puts `cache` back as it was after a prefill of T positions (tinylm's cache is preallocated
    and only needs its length; yours holds lists of growing tensors, which are copied)."""
    k, v = cache.k, cache.v
    saved = (list(k), list(v)) if isinstance(k, list) else (k, v)

    def restore():
        cache.k, cache.v = (list(saved[0]), list(saved[1])) if isinstance(k, list) else saved
        cache.length = T
    return restore


def real_steps(model, T):
    """(one cached step, one recomputation) at position T of the real model, as functions to time; the prefill of
    T positions is done here, not timed."""
    ids = torch.randint(model.config.vocab_size, (1, T + 1), device=DEVICE)
    cache = learner_cache(model, batch_size=1)
    model(ids[:, :T], cache=cache)
    restore = after_prefill(cache, T)

    def cached_step():
        restore()                                                         # the same position every repeat
        model(ids[:, T:], cache=cache)
    return cached_step, lambda: model(ids)


if not why:
    from tinylm.experiments.pacing import choose, per_call

    lengths = [16, 64, 128, 256]
    with torch.no_grad():
        steps = [real_steps(real, T) for T in lengths]
        per_run_s = sum(per_call(cached) + per_call(recompute) for cached, recompute in steps)  # the timed slice
        repeats = choose(5, 3, per_run_s * (5 + 1), stated_s=15, unit="runs per point",  # one warm-up run each
                         expected_short_s=per_run_s * (3 + 1),
                         what="timing SmolLM2's steps at 4 positions, cached and recomputed",
                         short_note="all 3 runs make the range, which is wider, and the verdict below says so if "
                                    "it hides the differences")
        # cached and recomputed in turn, so a change of load falls on both alike
        timed = [timed_together({"cached": c, "recomputed": r}, repeats) for c, r in steps]
        cached_ms, recomputed_ms = [t["cached"] for t in timed], [t["recomputed"] for t in timed]
    kept = "the middle runs" if repeats >= 5 else "all runs"
    print(f"{'position T':>10} {'cached ms':>16} {'recompute ms':>18} {'speed-up':>9}  (median [range of {kept}] of "
          f"{repeats} runs)")
    for T, a, b in zip(lengths, cached_ms, recomputed_ms):
        print(f"{T:>10} {f'{a[0]:.0f} [{a.low:.0f}, {a.high:.0f}]':>16} {f'{b[0]:.0f} [{b.low:.0f}, {b.high:.0f}]':>18} "
              f"{b[0] / a[0]:9.1f}")
    fig, ax = plt.subplots(figsize=(6.5, 3))
    for timings, label in ((recomputed_ms, "no cache: recompute T + 1 tokens"), (cached_ms, "your KV cache: 1 new token")):
        ax.errorbar(lengths, [m for m, _ in timings], yerr=error_bars(timings), fmt="o-", capsize=3, label=label)
    ax.set_xlabel("position T"), ax.set_ylabel("ms per token"), ax.set_title(pretrained.PRETRAINED_NAME), ax.legend()
    plt.show()
    if clearly_more(recomputed_ms[0], recomputed_ms[-1]) and clearly_more(cached_ms[-1], recomputed_ms[-1]):
        print(f"measured: recomputing costs {recomputed_ms[0][0]:.0f} ms at T={lengths[0]} and {recomputed_ms[-1][0]:.0f} "
              f"ms at T={lengths[-1]}; a cached step at T={lengths[-1]} costs {cached_ms[-1][0]:.0f} ms, "
              f"{recomputed_ms[-1][0] / cached_ms[-1][0]:.1f}x less")
    else:
        print("too noisy on this machine to tell: the repeated timings spread as much as the differences between them "
              "(rerun this cell when the machine is idle)")
    del real


# %% [markdown]
# ## 5. A batch of prompts of different lengths
#
# Serving decodes many prompts at once. A tensor needs rows of one length, so the shorter prompts are **padded on the
# left** (the pad id in front): every row then ends with its last real token, and one `[:, -1]` reads every row's next
# token. Three prompts of 3, 7 and 5 tokens, padded to width 7 (`·` = pad):
#
# | row | slots 0..6 | attention_mask | positions (RoPE) |
# |---|---|---|---|
# | 0 | `· · · · a b c` | `0 0 0 0 1 1 1` | `0 0 0 0 0 1 2` |
# | 1 | `d e f g h i j` | `1 1 1 1 1 1 1` | `0 1 2 3 4 5 6` |
# | 2 | `· · k l m n o` | `0 0 1 1 1 1 1` | `0 0 0 1 2 3 4` |
#
# Two things make row 0 decode as the prompt `a b c` alone:
#
# - **the mask:** no query attends to a pad key, at the prompt *and at every cached step*: the pads stay in the KV
#   cache, so each step's mask covers every position so far, `(B, cached + 1)`, one `True` column appended per new
#   token;
# - **the positions:** each row counts from 0 at its first real token, `(mask.cumsum(-1) - 1).clamp(min=0)` (the pads'
#   positions are never read), and a new token gets one more than its row's last position, not the padded length.
#
# tinylm's model takes both: `model(ids, cache=cache, positions=positions, attention_mask=mask)`, with `ids` and
# `positions` of shape `(B, T_new)` and `mask` of shape `(B, cached + T_new)`, True (or 1) at real tokens, as in
# Hugging Face. Without `positions` it counts slots, pads included.
#
# RoPE makes scores depend on *differences* of positions, so a row whose positions are all shifted by its pad count
# still attends correctly; what breaks it is a count that changes between the prompt and the decoding steps, and a
# model with learned absolute positions breaks at once. All of it shipped: Llama in transformers counts positions from
# the padded start unless the caller passes `position_ids`
# ([transformers#33095](https://github.com/huggingface/transformers/issues/33095)); TransformerLens applied a
# caller's mask at the first step only and gave each new token the padded length as its position
# ([TransformerLens#1617](https://github.com/TransformerLensOrg/TransformerLens/pull/1617)); OpenNMT-py's language
# models masked the padding only in the first decoding step
# ([OpenNMT-py#2532](https://github.com/OpenNMT/OpenNMT-py/pull/2532)).
#
# Write `generate_left_padded`: pad, build the mask and the positions, prefill into the `KVCache` you are given
# (reset it first, as in `generate_greedy`), then decode
# greedily (`argmax`) one token per step, as `generate_greedy` does. Return only the new tokens, `(B, max_new_tokens)`:
# the prompts have different lengths. The check decodes each prompt alone (no padding, no mask) and compares every
# row; it also records what your function hands the model at every call.

# %% nbgrader={"grade": false, "grade_id": "generate_left_padded", "locked": false, "schema_version": 3, "solution": true}
def generate_left_padded(model, prompts, max_new_tokens, cache, pad_id=0):
    """prompts: B token-id tensors (n_b,) of different lengths, cache: a KVCache for B rows
    -> (B, max_new_tokens) greedy new tokens."""
    ### BEGIN SOLUTION
    cache.reset()                                                       # it may hold an earlier batch
    B, T = len(prompts), max(len(p) for p in prompts)
    ids = torch.full((B, T), pad_id, dtype=torch.long)                  # (B, T)
    mask = torch.zeros(B, T, dtype=torch.bool)                          # (B, T): True at real tokens
    for b, p in enumerate(prompts):
        ids[b, T - len(p):] = p                                         # the padding goes in front
        mask[b, T - len(p):] = True
    positions = (mask.long().cumsum(-1) - 1).clamp(min=0)              # (B, T): 0 at each row's first real token
    new = []
    with torch.no_grad():                                               # no graph: nothing here is trained
        for _ in range(max_new_tokens):
            logits = model(ids, cache=cache, positions=positions, attention_mask=mask)[:, -1]  # (B, V)
            next_id = logits.argmax(dim=-1)                             # (B,)
            new.append(next_id)
            ids, positions = next_id[:, None], positions[:, -1:] + 1    # (B, 1) each: one past the row's last position
            mask = torch.cat((mask, mask.new_ones(B, 1)), dim=1)        # (B, cached + 1): the new token is real
    return torch.stack(new, dim=1)                                      # (B, max_new_tokens)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_generate_left_padded", "locked": true, "points": 2, "schema_version": 3, "solution": false}
check_generate_left_padded(generate_left_padded)
### BEGIN HIDDEN TESTS
check_generate_left_padded(generate_left_padded, seed=21, lengths=(6, 2, 9, 4), max_new_tokens=8, vocab=31,
                           n_kv_heads=3)
### END HIDDEN TESTS

# %% [markdown]
# ## 6. Pitfalls
#
# **Cache concatenated along the wrong axis.** `dim=1` stacks the new token as extra *heads*; the shapes still
# broadcast in places, and the error (if any) appears far from the cause.

# %%
show_check(check_cache_update, pitfalls.cache_update_wrong_axis)

# %% [markdown]
# **Positions restarting at 0.** A step that forgets `start_pos` rotates every new token as if it were the first
# one. The prefill is still right (it does start at 0), so the check's table shows the first chunk passing and every
# decode step after it failing.

# %%
show_check(check_attention_step, pitfalls.attention_step_restart_positions)

# %% [markdown]
# **The mask aligned top-left.** `F.scaled_dot_product_attention(..., is_causal=True)` aligns its triangle
# **top-left**: with 3 queries and 8 keys, new token 0 sees key 0 only. Without a cache (as many queries as keys)
# top-left and bottom-right are the same triangle, which is why this bug survives every test that does not decode.

# %%
show_check(check_attention_step, pitfalls.attention_step_is_causal)

# %% [markdown]
# **Cache not reset between prompts.** The second prompt continues after the first one's positions: its tokens are
# rotated by the wrong angles and attend to a text that is not theirs. The check reports where decoding diverges.

# %%
show_check(check_generate_greedy, pitfalls.generate_greedy_no_reset)

# %% [markdown]
# ## Summary
#
# - Past keys and values never change in a causal model: keep them, `[B, n_kv, T, hd]` per layer, and append new
#   ones along the sequence axis.
# - New tokens continue at position `cache.length`: RoPE with `start_pos`, and a bottom-right aligned mask.
# - Prefill the prompt once, then decode one token per step; reset the cache for every new prompt.
# - A left-padded batch decodes each row as if alone only with the padding masked at every step (the pads stay in the
#   cache) and each row's positions counted from its own first token.
# - The cache costs `2 · n_layers · n_kv · d_head · T · bytes` per sequence, which at long contexts dominates the
#   memory of serving.
#
# **Next:** notebook 07 shrinks that memory by letting several query heads share one key/value head (GQA).
