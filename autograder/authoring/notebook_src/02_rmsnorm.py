# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 02 · RMSNorm
#
# **What you build.** The normalisation layer of Llama-style models. Before attention and before the MLP,
# every token's vector is rescaled to unit root-mean-square and multiplied by a learned gain. You will write
#
# 1. `rms_norm(x, weight, eps)`: the function, numerically safe in half precision;
# 2. `layer_norm(x, weight, bias, eps)`: the older LayerNorm, to see exactly what RMSNorm drops;
# 3. `RMSNorm(dim, eps)`: the `nn.Module` that owns the gain.
#
# **Since notebook 01:** token ids become vectors `x` of shape `(batch, seq, d_model)`; `tinylm.embed` and
# `tinylm.tied_logits` are the versions you wrote.
#
# **Run time:** about 50 s on an idle 2-core machine with one thread (`pytest --nbval-lax` on this notebook, kernel
# start included; most of it the experiment's training runs). The notebook computes with one thread on purpose (the
# setup cell says so); on a slower or busy machine each long cell first says how long it expects to take there, and
# runs a shorter, announced variant where the full one would take more than three times as long.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false}
import os
import warnings

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch import nn

import tinylm
import tinylm.experiments
from autograder.checks import pitfalls
from autograder.checks import check_layer_norm, check_rms_norm, check_rms_norm_module, show_check
from autograder.checks.learner_model import require_agreement

# nbgrader counts anything on stderr as a failed cell: silence known library warnings once.
warnings.filterwarnings("ignore", category=UserWarning)
warnings.filterwarnings("ignore", category=FutureWarning)
torch.manual_seed(0)
DEVICE = tinylm.device()
GRADING = bool(os.environ.get("NBGRADER_EXECUTION"))  # set by nbgrader while it validates or grades
THREADS = tinylm.experiments.use_threads()  # one CPU thread, on purpose: the line it prints says why

# %% [markdown]
# ## 1. The formula
#
# For one token's vector $x \in \mathbb{R}^d$:
#
# $$\mathrm{rms}(x) = \sqrt{\frac{1}{d}\sum_{i=1}^{d} x_i^2 + \varepsilon}, \qquad
# y = g \odot \frac{x}{\mathrm{rms}(x)}$$
#
# - The mean is over the **last axis only** (the $d$ features of one token): each token is normalised on its own,
#   independent of the batch and of the other positions. For `x` of shape `(B, T, d)` the statistic has shape
#   `(B, T, 1)`.
# - $\varepsilon$ sits **inside** the square root; it keeps the division finite when $x = 0$.
# - $g \in \mathbb{R}^d$ is the learned gain, initialised to ones, so a fresh layer only rescales.
#
# Why it is there: the residual stream is a running sum, and its scale drifts from token to token and layer to
# layer. Normalising the *input* of each sub-layer gives attention and the MLP vectors of a predictable size.
# The figure shows token vectors whose RMS spans two orders of magnitude, and the same tokens after the norm.

# %%
x_demo = torch.randn(1, 24, 64) * torch.logspace(-1, 1, 24)[None, :, None]  # (1, T, d): token t scaled by 10^(-1..1)
normed = tinylm.rms_norm(x_demo, torch.ones(64))
fig, ax = plt.subplots(figsize=(7, 2.6))
ax.semilogy(x_demo.pow(2).mean(-1).sqrt()[0], "o-", label="before: rms of each token")
ax.semilogy(normed.pow(2).mean(-1).sqrt()[0], "s-", label="after rms_norm")
ax.set_xlabel("token position"), ax.set_ylabel("root mean square"), ax.legend()
plt.show()

# %% [markdown]
# ### Half precision needs float32 for the statistic
#
# Models often run in `float16` or `bfloat16`. The largest `float16` is 65504, so squaring any entry larger than
# $\sqrt{65504} \approx 256$ gives `inf`. Then $\mathrm{rms} = \infty$ and the output becomes all zeros, silently.
# The fix, used by Llama's reference code: cast `x` to `float32`, compute the statistic and the division there,
# cast back to `x.dtype`, then apply the gain.

# %%
# NBVAL_CHECK_OUTPUT
big = torch.tensor([300.0, -200.0, 100.0, 50.0], dtype=torch.float16)
print("x²  in float16:", big.pow(2).tolist())
print("rms in float16:", big.pow(2).mean().sqrt().item(), "  in float32:", round(big.float().pow(2).mean().sqrt().item(), 2))


# %% [markdown]
# ### Exercise 1: `rms_norm`
#
# Compute in `float32`, return a tensor with the shape and dtype of `x`. `torch.rsqrt(v)` is $1/\sqrt{v}$.

# %% nbgrader={"grade": false, "grade_id": "rms_norm", "locked": false, "schema_version": 3, "solution": true}
def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """x (..., d), weight (d,) -> (..., d) in x.dtype."""
    ### BEGIN SOLUTION
    x32 = x.float()  # squares of fp16 values overflow above 256
    inv_rms = torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)  # (..., 1): one statistic per token
    return weight * (x32 * inv_rms).to(x.dtype)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_rms_norm", "locked": true, "points": 3, "schema_version": 3, "solution": false}
check_rms_norm(rms_norm)
### BEGIN HIDDEN TESTS
check_rms_norm(rms_norm, seed=17, shape=(3, 7, 40), dtype=torch.float64)
check_rms_norm(rms_norm, seed=18, shape=(4, 6, 2, 16), dtype=torch.bfloat16)
check_rms_norm(rms_norm, seed=19, shape=(5, 32), dtype=torch.float16)
### END HIDDEN TESTS

# %% [markdown]
# ## 2. What RMSNorm leaves out: LayerNorm
#
# LayerNorm, used by the original Transformer and GPT-2, first **centres** each vector, then divides by its
# standard deviation, then applies a gain *and* a bias:
#
# $$\mu = \tfrac1d \sum_i x_i, \qquad \sigma^2 = \tfrac1d \sum_i (x_i - \mu)^2, \qquad
# y = g \odot \frac{x - \mu}{\sqrt{\sigma^2 + \varepsilon}} + b$$
#
# The variance divides by $d$, not $d - 1$. RMSNorm is LayerNorm without the centring and without the bias:
# it keeps the invariance to rescaling the input (the property that stabilises training) and drops the other
# reduction. The two agree exactly when the input already has zero mean.

# %% [markdown]
# ### Exercise 2: `layer_norm`
#
# Careful with `torch.var`: by default it divides by $d - 1$. And average the squares of the *centred* values:
# the shortcut $\overline{x^2} - \bar{x}^2$ subtracts two large, nearly equal numbers when the mean is large, and
# loses most of its digits in `float32` (the check shifts the input by 300 to find out).

# %% nbgrader={"grade": false, "grade_id": "layer_norm", "locked": false, "schema_version": 3, "solution": true}
def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """x (..., d), weight and bias (d,) -> (..., d)."""
    ### BEGIN SOLUTION
    centred = x - x.mean(dim=-1, keepdim=True)              # (..., d)
    var = centred.pow(2).mean(dim=-1, keepdim=True)         # (..., 1): biased, divides by d
    return weight * centred * torch.rsqrt(var + eps) + bias
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_layer_norm", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_layer_norm(layer_norm)
### BEGIN HIDDEN TESTS
check_layer_norm(layer_norm, seed=23, shape=(2, 5, 3, 12), dtype=torch.float64)
### END HIDDEN TESTS

# %%
# NBVAL_CHECK_OUTPUT
d = 16
g, b = torch.ones(d), torch.zeros(d)
x = torch.randn(4, d, generator=torch.Generator().manual_seed(1))
x_centred = x - x.mean(-1, keepdim=True)
for name, inp in (("zero-mean input", x_centred), ("input + 3", x_centred + 3)):
    gap = (rms_norm(inp, g) - layer_norm(inp, g, b, eps=1e-6)).abs().max().item()
    print(f"{name:16s} max |RMSNorm - LayerNorm| = {gap:.1f}")  # one decimal: rounding noise stays out of the output

# %% [markdown]
# Dropping a reduction should also save time: LayerNorm passes over every vector once more than RMSNorm (its
# mean, then the variance of the centred values) and adds a bias. On a CPU both functions spend their time moving
# the tensor through memory, so the difference is a few passes over the same numbers, and a busy machine can hide
# it: the cell times both (the median of repeated calls, with the range of the middle ones) and says whether the
# difference stands out from that range.

# %%
from tinylm.measure import clearly_more, timed_together  # (median, spread) of timings taken in turn

xt = torch.randn(16, 256, 512, device=DEVICE)
gt, bt = torch.ones(512, device=DEVICE), torch.zeros(512, device=DEVICE)
repeats = 3 if GRADING else 15  # grading only needs the cell to run
times = timed_together({"rms_norm": lambda: rms_norm(xt, gt), "layer_norm": lambda: layer_norm(xt, gt, bt)},
                       repeats, DEVICE)  # in turn, round by round: a change of load falls on both
for name, (median, spread) in times.items():
    print(f"{name:10s} {median:6.2f} ms per call on {DEVICE} (median of {repeats}, "
          f"{'middle' if repeats >= 5 else 'all'} runs within {spread:.2f} ms)")
if clearly_more(times["rms_norm"], times["layer_norm"]):
    print(f"measured: layer_norm takes {times['layer_norm'][0] / times['rms_norm'][0]:.1f}x the time of rms_norm here")
elif clearly_more(times["layer_norm"], times["rms_norm"]):
    print("measured: rms_norm is the slower one on this machine, beyond the spread of the repeats")
else:
    print("too noisy on this machine to tell: the repeats spread as much as the difference (rerun when it is idle)")


# %% [markdown]
# ## 3. The module
#
# In a model the gain is a parameter. `RMSNorm(dim, eps)` owns one `nn.Parameter` called `weight`, of shape
# `(dim,)`, initialised to ones, and its forward pass is your `rms_norm` with the module's own `eps`.

# %% nbgrader={"grade": false, "grade_id": "RMSNorm", "locked": false, "schema_version": 3, "solution": true}
class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        ### BEGIN SOLUTION
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))  # gain starts at 1: a fresh norm only rescales
        ### END SOLUTION

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ### BEGIN SOLUTION
        return rms_norm(x, self.weight, self.eps)
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_RMSNorm", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_rms_norm_module(RMSNorm)
### BEGIN HIDDEN TESTS
check_rms_norm_module(RMSNorm, dim=20, seed=29)
### END HIDDEN TESTS

# %% [markdown]
# ## 4. Your norm inside a whole model
#
# `tinylm.Transformer` has two norms per block and one before the head. Swap every one of them for your
# `RMSNorm` (copying the gains) and the model's logits do not change.

# %%
# NBVAL_CHECK_OUTPUT
torch.manual_seed(0)
model = tinylm.Transformer(tinylm.ModelConfig(d_model=64, n_layers=2, n_heads=4, max_seq_len=32)).eval()
ids = tinylm.ByteTokenizer().encode("normalise the residual stream")[None]  # (1, T)
with torch.no_grad():
    before = model(ids)
    for parent in [model, *model.blocks]:
        for name, child in list(parent.named_children()):
            if isinstance(child, tinylm.RMSNorm):
                mine = RMSNorm(child.weight.shape[0], child.eps)
                mine.weight.copy_(child.weight)
                setattr(parent, name, mine)
    after = model(ids)
n_swapped = sum(isinstance(m, RMSNorm) for m in model.modules())
print(f"swapped {n_swapped} norms")
require_agreement("logits equal", torch.allclose(before, after, atol=1e-5),
                  "your RMSNorm module (section 3 above) changes the model's logits: rerun its check")

# %% [markdown]
# ## 5. Pitfalls
#
# Each of these runs without an error. The wrong versions live in `autograder/checks/pitfalls.py` (each is the
# solution with one line changed); the check names what went wrong.
#
# **eps outside the square root:** `x / (sqrt(mean(x²)) + eps)`. With ordinary inputs the difference is
# invisible; with small inputs (or a large eps) it is not. That is why the check includes a case with tiny inputs.

# %%
show_check(check_rms_norm, pitfalls.rms_norm_eps_outside)

# %% [markdown]
# **Mean over the wrong axis:** `mean(dim=1)` averages over positions: each token's scale then depends on its
# neighbours (and, in a causal model, on future tokens). The check's inputs have all dimensions different so
# this cannot hide.

# %%
show_check(check_rms_norm, pitfalls.rms_norm_wrong_axis)

# %% [markdown]
# **Missing gain:** no `weight *`. A fresh model has $g = 1$, so this passes every test built on a fresh module.
# The check uses a gain far from one.

# %%
show_check(check_rms_norm, pitfalls.rms_norm_no_gain)

# %% [markdown]
# **No upcast:** `x.pow(2)` in the input's own dtype. In `float32` this is correct. In `float16`, entries above
# 256 overflow when squared, and the output collapses to zero. The plot shows the error as the input grows.

# %%
show_check(check_rms_norm, pitfalls.rms_norm_no_upcast)

scales = torch.logspace(0, 3.5, 40)
base = torch.randn(8, 64, generator=torch.Generator().manual_seed(3))
ones = torch.ones(64, dtype=torch.float16)
errors = {"with float32 upcast": [], "no upcast": []}
for s in scales:
    xh = (base * s).half()
    ref = F.rms_norm(xh.float(), (64,), eps=1e-6)
    errors["with float32 upcast"].append((rms_norm(xh, ones).float() - ref).abs().max().item())
    errors["no upcast"].append((pitfalls.rms_norm_no_upcast(xh, ones).float() - ref).abs().max().item())
fig, ax = plt.subplots(figsize=(7, 2.6))
for label, err in errors.items():
    ax.loglog(scales, err, label=label)
ax.axvline(256 / 2.5, ls=":", c="grey")  # the largest entries of N(0, s²) noise reach about 2.5 s
ax.set_xlabel("input scale s (x ~ N(0, s²))"), ax.set_ylabel("max abs error, float16"), ax.legend()
plt.show()

# %% [markdown]
# ## 6. The experiment: RMSNorm, LayerNorm, or no norm
#
# The seed says RMSNorm is simpler than LayerNorm and "often efficient and stable". Three tinylm models of 4
# pre-norm blocks, trained side by side on the course corpus (same seed, same initial weights, same batches, same
# steps), identical except for their norms: RMSNorm (tinylm's), LayerNorm (`torch.nn.LayerNorm`, with its extra
# bias; `tinylm.experiments.with_layer_norm`) and none at all (`without_norm`: every norm is the identity). They are
# tinylm's model, not yours, so that the three differ in the norm only. A run whose loss becomes infinite or NaN
# stops and is marked as diverged. Differences between norms at this size are small, so the whole comparison runs
# twice, from two seeds (other initial weights, other batches): a difference counts only where both seeds agree
# and their ranges lie further apart than any norm's two seeds spread over.
#
# The cell first times a few steps of each model on this machine and says how long the experiment will take; on a
# machine where that is far beyond its stated time it runs a shorter, announced variant, and the verdicts below say
# which ran. `python -m tinylm experiment norms --steps 1000` reruns it longer; notebook 05 compares pre-norm with
# post-norm at a higher learning rate.

# %%
from tinylm import experiments

if GRADING:
    print("experiment skipped while grading")
else:
    corpus = tinylm.course_corpus()
    run = experiments.paced(experiments.norms, corpus, seeds=(0, 1), stated_s=experiments.pacing.STATED_S["norms"],
                            short_steps=50, what="3 models of 4 blocks (RMSNorm, LayerNorm, no norm)")
    for seed, curves in zip(run.seeds, run.results):
        print(f"seed {seed}, peak learning rate {experiments.SMALL_TRAIN.lr}:\n{curves.summary()}")
    experiments.plot_curves(run.results[0], title=f"4 pre-norm blocks, seed {run.seeds[0]}: RMSNorm, LayerNorm, none")
    plt.show()
    finals = experiments.final_losses(run.results)
    print(f"\nwhat this run shows ({run.ran}):")
    for a, b in (("RMSNorm", "LayerNorm"), ("RMSNorm", "no norm"), ("LayerNorm", "no norm")):
        print("  " + experiments.compare(finals, a, b).sentence())
    diverged = sorted({label for curves in run.results for label in curves.diverged_at})
    print("  " + (f"diverged: {', '.join(diverged)}" if diverged else
                  "no run diverged, so this learning rate does not test whether a norm keeps training stable"))
    print("  " + experiments.yardsticks(corpus).sentence(finals, run.seeds))

# %% [markdown]
# **Reading the output.** The verdict lines say, for each pair of norms, whether one ended lower in both seeds with
# the seeds' ranges further apart than the seeds' own spread, or whether this run cannot tell them apart; only the
# first kind is a result. Where
# RMSNorm is not told apart from LayerNorm, the run supports "as good, for less work" (one reduction instead of two,
# no bias), not "better".
#
# The last two lines give the scale. In the plot every run first falls from $\ln 256$ to about the unigram's loss
# within a few dozen steps (it has learned which bytes are common), stays near it for a while, and only then starts
# to use the bytes before each one. A run that ends above the bigram's loss still predicts the next byte worse than
# a table of byte pairs does: it has only begun to use context, and a verdict between such runs says which model got
# going sooner, not which one ends better. That is how to read a pair where the model without any norm ends lower
# than one with a norm: a pre-norm residual stream starts with small weights, so a model can train for a while
# without a norm, and a short run that nothing diverged in does not test what a norm is said to buy, stability over
# a long run. Notebook 05 moves the norm to the other place (post-norm) at a higher learning rate. The CLI
# (`--steps`, `--seed`) reruns this one longer or from other seeds.

# %% [markdown]
# ## Summary
#
# - RMSNorm: divide each token's vector by $\sqrt{\mathrm{mean}(x^2) + \varepsilon}$ over its features, multiply by a gain.
# - It is LayerNorm without centring and bias; one reduction instead of two, same rescaling invariance.
# - Take the statistic in `float32` and cast back: `float16` squares overflow above 256.
# - `eps` inside the root, mean over `dim=-1`, gain applied: each mistake shows only on the right inputs.
#
# **Next:** the normalised vectors go into attention. Notebook 03 builds causal self-attention.
