# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 08 · Sampling: greedy, temperature, top-k, top-p
#
# **What you build.** The decision the model does not make for you: which token to emit, given the logits of the
# last position. You will write
#
# 1. `top_k_filter(logits, k)`: keep the `k` most likely tokens;
# 2. `top_p_filter(logits, p)`: keep the smallest set of most likely tokens holding probability `p` (nucleus);
# 3. `sample_next(logits, temperature, top_k, top_p, generator)`: temperature, then top-k, then top-p, then one
#    draw; temperature 0 is greedy;
# 4. `generate(model, prompt, max_new_tokens, ...)`: the decoding loop, in eval mode.
#
# **Since notebook 07:** the model (with its KV cache and GQA) produces logits `(B, T, vocab)`; decoding uses the
# last position, `logits[:, -1]`, shape `(B, vocab)`.
#
# **Run time:** about 30 s on an idle 2-core machine with one thread (`pytest --nbval-lax` on this notebook, kernel
# start included; the real model included). The notebook computes with one thread on purpose (the setup cell says
# so); on a slower or busy machine each long cell first says how long it expects to take there, and runs a shorter,
# announced variant where the full one would take more than three times as long.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false}
import os
import warnings

import matplotlib.pyplot as plt
import torch

import tinylm
import tinylm.experiments
import tinylm.data
from autograder.checks import pitfalls  # deliberately wrong functions, kept out of this notebook
from autograder.checks import check_generate, check_sample_next, check_top_k_filter, check_top_p_filter, show_check

# nbgrader counts anything on stderr as a failed cell: silence known library warnings once.
warnings.filterwarnings("ignore", category=UserWarning)
warnings.filterwarnings("ignore", category=FutureWarning)
torch.manual_seed(0)
DEVICE = tinylm.device()
GRADING = bool(os.environ.get("NBGRADER_EXECUTION"))  # set by nbgrader while it validates or grades
THREADS = tinylm.experiments.use_threads()  # one CPU thread, on purpose: the line it prints says why

# %% [markdown]
# ## 1. From logits to a token
#
# The model gives scores $z \in \mathbb{R}^V$; $\mathrm{softmax}(z)$ is its predicted distribution for the next
# token. Every decoding strategy reshapes that distribution, **on the logits**, and only then draws:
#
# | step | on the logits `z` (shape `(B, V)`) | effect |
# |---|---|---|
# | greedy | `argmax(z)` | deterministic; repeats itself |
# | temperature $T$ | $z / T$ | $T < 1$ sharpens, $T > 1$ flattens; $T \to 0$ is greedy |
# | top-k | $z_i = -\infty$ unless $z_i \ge$ the $k$-th largest | cuts the long tail at a fixed size |
# | top-p | $z_i = -\infty$ outside the smallest high-probability set of mass $\ge p$ | a tail cut that adapts to the shape |
# | draw | `torch.multinomial(softmax(z), 1, generator=g)` | the only random step |
#
# Setting a logit to $-\infty$ gives it probability exactly 0 after the softmax, and the rest renormalise by
# themselves. Dividing **probabilities** by $T$ instead of logits does nothing at all: the draw renormalises.
# The figure shows one distribution of 12 tokens under each setting (computed with `tinylm`'s versions; yours
# replace them below).

# %%
z = torch.tensor([3.0, 2.6, 2.2, 1.5, 1.2, 0.8, 0.3, 0.0, -0.4, -0.9, -1.5, -2.0])
settings = {"T = 1": z, "T = 0.5": z / 0.5, "T = 2": z / 2,
            "top-k = 4": tinylm.top_k_filter(z, 4), "top-p = 0.7": tinylm.top_p_filter(z, 0.7)}
fig, axes = plt.subplots(1, len(settings), figsize=(12, 2.3), sharey=True)
for ax, (name, logits) in zip(axes, settings.items()):
    ax.bar(range(len(z)), logits.softmax(-1), color="C0")
    ax.set_title(name), ax.set_xticks([])
axes[0].set_ylabel("probability")
plt.show()


# %% [markdown]
# ## 2. Top-k
#
# Keep every logit that is at least the $k$-th largest, set the others to `-inf`. "At least" keeps ties with the
# $k$-th value (so a tie can keep more than $k$); `logits.topk(k, dim=-1).values[..., -1:]` is the threshold, with
# a trailing axis so it broadcasts over the vocabulary. Work on the last axis, for any batch shape.
#
# **The edge.** A `k` larger than the vocabulary is a legal setting (one written for a model with more tokens) and
# keeps everything, but `torch.topk` refuses it ("selected index k out of range"): clamp first,
# `min(k, logits.shape[-1])`. This crash shipped in a real library: TransformerLens's `sample_logits` passed `top_k`
# straight to `topk` until [TransformerLens#1347](https://github.com/TransformerLensOrg/TransformerLens/pull/1347)
# clamped it, as Hugging Face's `TopKLogitsWarper` does. The check tries `k` equal to the vocabulary and larger.

# %% nbgrader={"grade": false, "grade_id": "top_k_filter", "locked": false, "schema_version": 3, "solution": true}
def top_k_filter(logits, k):
    """logits (..., V) -> same shape, -inf outside the k largest (ties with the k-th kept)."""
    ### BEGIN SOLUTION
    k = min(k, logits.shape[-1])                           # k past the vocabulary keeps every token
    kth = logits.topk(k, dim=-1).values[..., -1:]          # (..., 1): the k-th largest value
    return logits.masked_fill(logits < kth, float("-inf"))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_top_k_filter", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_top_k_filter(top_k_filter)
### BEGIN HIDDEN TESTS
check_top_k_filter(top_k_filter, seed=8, batch=2, vocab=17, ks=(2, 7, 17), dtype=torch.float64)
### END HIDDEN TESTS

# %% [markdown]
# ## 3. Top-p (nucleus)
#
# Sort the probabilities in descending order, $p_{(1)} \ge p_{(2)} \ge \dots$, and keep token $(i)$ while the mass
# of the tokens **before** it is still below $p$: $\sum_{j<i} p_{(j)} < p$. That keeps the token that takes the sum
# past $p$ (the *crossing* token), so at least one token always survives, however small $p$ is.
#
# `sort` returns the permutation `order`; a mask computed in sorted order goes back to vocabulary order with
# `mask.scatter(-1, order, mask)`.
#
# **The edge.** "At least one token" must hold in every row of a batch on its own: a row whose top token alone holds
# more than $p$, a tiny $p$, a tie at the top. A filter that drops the crossing token, or whose "keep the top token"
# step is skipped or reaches only some rows, empties such a row, and the softmax of an all `-inf` row is NaN. Hugging Face's `TopPLogitsWarper`
# applied its "keep at least `min_tokens_to_keep`" only when that number was above 1, so `top_p=0.0` crashed
# `generate` until [transformers#24111](https://github.com/huggingface/transformers/pull/24111). The check's last two
# rows are such batches; where a row fails, it also filters that row alone to see whether the rows are independent.

# %% nbgrader={"grade": false, "grade_id": "top_p_filter", "locked": false, "schema_version": 3, "solution": true}
def top_p_filter(logits, p):
    """logits (..., V) -> same shape, -inf outside the nucleus of mass p (crossing token kept)."""
    ### BEGIN SOLUTION
    sorted_logits, order = logits.sort(dim=-1, descending=True)  # (..., V) each
    probs = sorted_logits.softmax(dim=-1)
    mass_before = probs.cumsum(dim=-1) - probs                    # mass of the strictly more likely tokens
    drop_sorted = mass_before >= p                                # the crossing token has mass_before < p
    drop = drop_sorted.scatter(-1, order, drop_sorted)            # back to vocabulary order
    return logits.masked_fill(drop, float("-inf"))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_top_p_filter", "locked": true, "points": 2, "schema_version": 3, "solution": false}
check_top_p_filter(top_p_filter)
### BEGIN HIDDEN TESTS
check_top_p_filter(top_p_filter, seed=9, batch=4, vocab=13, ps=(0.3, 0.75, 0.99), dtype=torch.float64)
### END HIDDEN TESTS

# %% [markdown]
# On the 12 logits of the figure, your filters keep:

# %%
# NBVAL_CHECK_OUTPUT
print("top-k = 4 keeps tokens  ", top_k_filter(z, 4).isfinite().nonzero().flatten().tolist())
print("top-p = 0.7 keeps tokens", top_p_filter(z, 0.7).isfinite().nonzero().flatten().tolist())
print("top-p = 0.01 keeps tokens", top_p_filter(z, 0.01).isfinite().nonzero().flatten().tolist(), "(the crossing token)")


# %% [markdown]
# ## 4. `sample_next`
#
# The whole recipe for logits of shape `(B, V)`: temperature 0 returns `argmax`; otherwise divide by the
# temperature, apply top-k if `top_k` is given, then top-p if `top_p` is given, softmax, and draw one token per row
# with `torch.multinomial(probs, 1, generator=generator)`. Return shape `(B,)`.
#
# The check draws 20 000 tokens from one row of logits under several settings and compares the frequencies with
# the exact probabilities: a sampler is right when its *distribution* is right.

# %% nbgrader={"grade": false, "grade_id": "sample_next", "locked": false, "schema_version": 3, "solution": true}
def sample_next(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    """logits (B, V) -> token ids (B,)."""
    ### BEGIN SOLUTION
    if temperature == 0:
        return logits.argmax(dim=-1)          # greedy: no randomness at all
    logits = logits / temperature             # on logits, before any filter
    if top_k is not None:
        logits = top_k_filter(logits, top_k)
    if top_p is not None:
        logits = top_p_filter(logits, top_p)
    probs = logits.softmax(dim=-1)            # (B, V): filtered tokens get exactly 0
    return torch.multinomial(probs, num_samples=1, generator=generator).squeeze(-1)  # (B, 1) -> (B,)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_sample_next", "locked": true, "points": 3, "schema_version": 3, "solution": false}
check_sample_next(sample_next)
### BEGIN HIDDEN TESTS
check_sample_next(sample_next, seed=12, vocab=14, settings=((0.7, 3, None), (1.2, None, 0.5), (0.9, 6, 0.7)),
                  dtype=torch.float64)
### END HIDDEN TESTS

# %% [markdown]
# Your sampler's frequencies against the exact distribution, for the 12 logits of the first figure:

# %%
def exact_probs(z, T, k=None, p=None):
    """The distribution sample_next should draw from, with tinylm's filters."""
    z = z / T
    z = tinylm.top_k_filter(z, k) if k else z
    return (tinylm.top_p_filter(z, p) if p else z).softmax(-1)

draws = 20000 if not GRADING else 4000
gen = torch.Generator().manual_seed(0)
cases = {"T = 0.7": (0.7, None, None), "T = 1.5, top-k = 5": (1.5, 5, None), "T = 1, top-p = 0.8": (1.0, None, 0.8)}
fig, axes = plt.subplots(1, 3, figsize=(12, 2.4), sharey=True)
for ax, (name, (T, k, p)) in zip(axes, cases.items()):
    ids = sample_next(z.expand(draws, -1), T, k, p, gen)     # one row repeated: (draws, 12) -> (draws,)
    ax.bar(range(12), torch.bincount(ids, minlength=12) / draws, label="your samples", color="C0")
    ax.plot(range(12), exact_probs(z, T, k, p), "k_", ms=14, mew=2, label="exact")
    ax.set_title(name), ax.set_xticks([])
axes[0].legend()
plt.show()


# %% [markdown]
# ## 5. The decoding loop
#
# Put it in a loop, as in notebook 06 but sampling instead of `argmax`. Two things about the model's *mode*:
#
# - Dropout is a training device. A model in train mode drops random activations on every forward pass, so
#   generation would sample from a randomly damaged network. Call `model.eval()` first.
# - The caller may be in the middle of training: remember `model.training` and restore it at the end.
#
# Run the loop under `torch.no_grad()`. For simplicity, recompute the whole sequence each step
# (`model(idx)[:, -1]`); `tinylm.generate` does the same with the KV cache.

# %% nbgrader={"grade": false, "grade_id": "generate", "locked": false, "schema_version": 3, "solution": true}
def generate(model, prompt, max_new_tokens, temperature=1.0, top_k=None, top_p=None, generator=None):
    """prompt (B, T) -> (B, T + max_new_tokens), sampled with your sample_next."""
    ### BEGIN SOLUTION
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
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_generate", "locked": true, "points": 2, "schema_version": 3, "solution": false}
check_generate(generate)
### BEGIN HIDDEN TESTS
check_generate(generate, seed=17, batch=3, prompt_len=2, max_new_tokens=9, dropout=0.3)
### END HIDDEN TESTS

# %% [markdown]
# ### What the settings do to text
#
# There is no trained transformer yet (that is notebook 09), but a **bigram** model already makes the point: its
# logits for the next byte are the log-frequencies of byte pairs in the course corpus. A tiny `nn.Module` wraps them
# so that your `generate` can drive it. Greedy decoding falls into a loop at once. A high temperature draws bytes
# that almost never follow the previous one (control characters, stray symbols); top-k and top-p draw only among the
# likely next bytes, so they keep the variety of sampling without that tail. A bigram knows no words, so every
# sampled row is letter soup: the settings change which bytes it is made of.

# %%
corpus = tinylm.data.course_corpus()
pairs = torch.bincount(corpus.train[:-1].long() * 256 + corpus.train[1:].long(), minlength=256 * 256)
bigram_logits = (pairs.view(256, 256).double() + 0.01).log().float()  # (prev byte, next byte)


class Bigram(torch.nn.Module):
    def forward(self, idx):
        return bigram_logits[idx]  # (B, T) -> (B, T, 256): the row of each position's byte

tok = tinylm.ByteTokenizer()
prompt = tok.encode("Once upon a time")[None]                       # (1, T)
for name, kw in {"greedy": dict(temperature=0), "T = 2.0": dict(temperature=2.0), "T = 1.0": dict(),
                 "T = 1.0, top-k = 5": dict(top_k=5), "T = 0.8, top-p = 0.9": dict(temperature=0.8, top_p=0.9)}.items():
    out = generate(Bigram(), prompt, 60, generator=torch.Generator().manual_seed(1), **kw)
    print(f"{name:>20}: {tok.decode(out[0])!r}")

# %% [markdown]
# ### The same knobs on a real model
#
# A bigram only knows which byte follows which, so the settings change letter statistics. On a model that knows
# language they change the *text*. Below, SmolLM2-135M-Instruct (the pretrained Llama of notebook 05, in your
# decoder once notebook 05 saved it; the line the cell prints says whose) answers one request five times: same prompt, same seed for every row, only the settings differ, and
# every token is drawn by **your** `sample_next` (put in place of tinylm's inside `tinylm.generate`, which adds the
# KV cache). Greedy is the model's single most likely text; a temperature below 1 sharpens the distribution, one
# above 1 flattens it, so that rare tokens are drawn more often.
#
# The two filters react differently to that flattening, because temperature comes first. Top-k keeps a fixed
# number of tokens whatever their probabilities. Top-p keeps the most likely tokens until they hold mass `p` *of the
# flattened distribution*: at a high temperature that mass is spread over many tokens, so even a small `p` can let
# in many of them (the cell after the samples counts them). Compare the last two
# rows. (Skipped while grading; where the weights are not installed the cell says how to install them.)

# %%
import tinylm.sampling
from tinylm import pretrained
from autograder.checks.learner_model import require_agreement, swapped
from autograder.checks.real_model import pretrained_learner_model

why = "skipped while grading" if GRADING else pretrained.why_unavailable()  # None: the weights are installed
if why:
    print(f"real weights: {why}")
else:
    tinylm.experiments.announce(f"loading {pretrained.PRETRAINED_NAME}, then 5 answers of up to 28 tokens drawn by "
                                "your sample_next", stated_s=15)
    real, bpe = pretrained_learner_model(DEVICE)
    chat = torch.tensor([bpe.chat_ids("Write one sentence about the sea.")], device=DEVICE)  # (1, T)
    settings = {"greedy": dict(temperature=0), "T = 0.7": dict(temperature=0.7), "T = 2.0": dict(temperature=2.0),
                "T = 2.0, top-k = 10": dict(temperature=2.0, top_k=10), "T = 2.0, top-p = 0.5": dict(temperature=2.0, top_p=0.5)}
    with swapped(tinylm.sampling, "sample_next", sample_next):
        for name, kw in settings.items():
            out = tinylm.generate(real, chat, 28, generator=torch.Generator(device=DEVICE).manual_seed(0),
                                  stop_token=bpe.eos_id, **kw)                    # stops at the end of the turn
            new = [t for t in out[0, chat.shape[1]:].tolist() if t != bpe.eos_id]
            print(f"{name:>20}: {bpe.decode(new)!r}")

# %% [markdown]
# **A test on real distributions.** Sampled text cannot show a filter's bug: a row drawn at a high temperature
# without a tight filter is meant to read as nonsense, and a wrong top-p reads the same. What can be compared is
# what each filter *keeps*. Below, the
# real model's next-token distributions at every position of two prompts (a batch of two: a filter that mixes up
# the rows of a batch passes every one-row test), flattened by each temperature of the table above, go through your
# `top_k_filter` and `top_p_filter` and through tinylm's; the kept tokens must be the same at every position. Your
# `sample_next` at temperature 0 must pick each row's most likely token. The cell names the first position where a
# setting differs.

# %%
if not why:
    rows = [bpe.chat_ids(q) for q in ("Write one sentence about the sea.", "Name three primary colors.")]
    batch = torch.tensor([row[:min(map(len, rows))] for row in rows], device=DEVICE)      # (2, T)
    with torch.inference_mode():
        logits = real(batch).float()                                                      # (2, T, V)
    del real
    flat = logits.flatten(0, 1)                                                           # (2T, V): every position
    cases = {f"top-k = {k}, T = {t}": (top_k_filter, tinylm.top_k_filter, k, t) for k in (10, 50) for t in (0.7, 2.0)}
    cases |= {f"top-p = {p}, T = {t}": (top_p_filter, tinylm.top_p_filter, p, t) for p in (0.5, 0.9) for t in (0.7, 2.0)}
    same = True
    for name, (yours, theirs, arg, t) in cases.items():
        kept = torch.isfinite(yours(flat / t, arg))                                      # (2T, V): not -inf
        want = torch.isfinite(theirs(flat / t, arg))
        bad = (kept != want).any(-1).nonzero().flatten().tolist()
        if bad:
            same, i = False, bad[0]
            extra = (kept[i] & ~want[i]).nonzero().flatten()[:3].tolist()
            missing = (want[i] & ~kept[i]).nonzero().flatten()[:3].tolist()
            print(f"{name:>20}: differs at {len(bad)} of {len(flat)} positions; at prompt {i // batch.shape[1]}, "
                  f"position {i % batch.shape[1]}: yours keeps {int(kept[i].sum())} tokens, tinylm {int(want[i].sum())}"
                  f" (only yours: {[bpe.decode([x]) for x in extra]}, only tinylm's: {[bpe.decode([x]) for x in missing]})")
        else:
            fewest, most = int(want.sum(-1).min()), int(want.sum(-1).max())
            print(f"{name:>20}: the same tokens kept at all {len(flat)} positions (tinylm keeps "
                  + (f"{fewest} at every position)" if fewest == most else f"{fewest} to {most}, by position)"))
    greedy = sample_next(logits[:, -1], temperature=0)
    print(f"greedy sample_next picks each row's most likely token: {torch.equal(greedy, logits[:, -1].argmax(-1))}")
    require_agreement("your filters keep what tinylm's keep, and greedy picks the argmax, on real distributions",
                      same and torch.equal(greedy, logits[:, -1].argmax(-1)),
                      "your top_k_filter, top_p_filter or sample_next (exercises 1-3 above) treat a real distribution "
                      "differently from tinylm's although their checks passed: the line above names the setting and "
                      "the position")

# %% [markdown]
# ## 6. Pitfalls
#
# Each pitfall below is a function in `autograder/checks/pitfalls.py` with one deliberate mistake; the cell shows what the
# check reports for it.
#
# **Sampling before the transforms.** Drawing from `softmax(logits)` and then applying temperature or filters to
# the logits changes nothing that matters: the token was already chosen from the untouched distribution.

# %%
show_check(check_sample_next, pitfalls.sample_before_transforms)

# %% [markdown]
# **Top-p dropping the crossing token.** Keeping only tokens whose cumulative mass is at most `p` drops the token that
# crosses `p`; with a small `p` (or one very likely token) nothing is left and the softmax is NaN.

# %%
show_check(check_top_p_filter, pitfalls.top_p_drops_crossing)

# %% [markdown]
# **Top-k off by one.** A threshold that is the value of the $(k+1)$-th or the $(k-1)$-th token, or a comparison that
# drops the $k$-th token itself, keeps $k - 1$ or $k + 1$ tokens. The check counts the survivors.

# %%
show_check(check_top_k_filter, pitfalls.top_k_off_by_one)

# %% [markdown]
# **Temperature applied after softmax.** `softmax(z) / T` is renormalised by the draw: the temperature has no effect.

# %%
show_check(check_sample_next, pitfalls.sample_temperature_after_softmax)

# %% [markdown]
# **Dropout left on during generation.** Without `model.eval()`, a model built with dropout decodes from a different
# random sub-network at every step; even greedy decoding stops being reproducible.

# %%
show_check(check_generate, pitfalls.generate_train_mode)

# %% [markdown]
# ## Summary
#
# - Decoding transforms the **logits** (temperature, then top-k, then top-p) and draws last; filtered tokens get
#   `-inf`, hence probability 0.
# - Top-k keeps ties with the $k$-th value; top-p keeps the crossing token, so something always survives.
# - A seeded `torch.Generator` makes sampling reproducible; temperature 0 is greedy.
# - Generate in eval mode under `no_grad`, and give the caller its mode back.
# - A `k` past the vocabulary keeps everything; top-p keeps at least one token in every row.
#
# `tinylm.sample_next` and `tinylm.generate` are these functions (with the KV cache). **Next:** notebook 09 trains
# the model, so there is finally something worth sampling from.
