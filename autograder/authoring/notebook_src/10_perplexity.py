# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 10 · Evaluation loss and perplexity
#
# **What you build.** The numbers that say how good a language model is, and the yardsticks to read them by. You
# will write
#
# 1. `nll_sum_and_count(logits, targets, ignore_index)`: the summed negative log-likelihood and the number of
#    scored tokens of one batch;
# 2. `evaluate(model, batches, bytes_per_token)`: mean NLL, perplexity and bits per byte over many batches, in eval
#    mode, without gradients;
# 3. `bigram_nll(train, val, alpha)`: the bigram baseline a transformer has to beat.
#
# Then you put the model trained in notebook 09 next to the uniform, unigram and bigram baselines and the exact
# entropy floor of the corpus, sample from it, and check that it is, weight for weight, a Hugging Face Llama.
#
# **Since notebook 09:** a trained model and its checkpoint (`.cache/checkpoints/09_training.pt`). If it is missing,
# this notebook trains a stand-in for a fixed number of steps and says so.
#
# **Run time:** about 50 s on an idle 2-core machine with one thread (`pytest --nbval-lax` on this notebook, kernel
# start included; the real model included). The notebook computes with one thread on purpose (the setup cell says
# so); on a slower or busy machine each long cell first says how long it expects to take there, and runs a shorter,
# announced variant where the full one would take more than three times as long.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false}
import copy
import math
import os
import warnings
from dataclasses import replace

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

import tinylm
import tinylm.experiments
from tinylm.presets import NB09_MODEL, NB09_TRAIN
from autograder.checks import pitfalls  # deliberately wrong functions, kept out of this notebook
from autograder.checks import check_bigram_nll, check_evaluate, check_nll_sum_and_count, show_check
from autograder.checks.learner_model import check_model_agrees, learner_function, learner_model, require_agreement

# nbgrader counts anything on stderr as a failed cell: silence known library warnings once.
warnings.filterwarnings("ignore", category=UserWarning)
warnings.filterwarnings("ignore", category=FutureWarning)
torch.manual_seed(0)
DEVICE = tinylm.device()
GRADING = bool(os.environ.get("NBGRADER_EXECUTION"))  # set by nbgrader while it validates or grades
THREADS = tinylm.experiments.use_threads()  # one CPU thread, on purpose: the line it prints says why

# %% [markdown]
# ## 1. From loss to perplexity and bits
#
# On held-out text $x_1 \dots x_N$ the model's quality is its mean negative log-likelihood, in nats per token:
#
# $$\mathcal{L} = -\frac{1}{N} \sum_{t=1}^{N} \ln p_\theta(x_t \mid x_{<t})$$
#
# - **Perplexity** $= e^{\mathcal{L}}$: the model is as uncertain as a uniform choice among that many tokens.
#   A model that knows nothing about bytes has perplexity 256.
# - **Bits per byte** $= \mathcal{L} / \ln 2 \,/\, (\text{bytes per token})$: the size a compressor driven by the
#   model would achieve. It compares models with different tokenizers; with bytes as tokens the divisor is 1.
#
# Three rules make the number honest: **eval mode** (dropout off, or the score is that of a randomly damaged
# network), **no gradients** (`torch.no_grad()`, or memory grows with every batch), and a **token-weighted** mean:
# sum the NLL and the token counts over all batches, divide once, and only then take `exp`. Batches of different
# sizes, or with padding, must not change the answer.
#
# Why the last rule matters: perplexity is convex in the loss, so the mean of per-batch perplexities is always at
# least the perplexity of the mean loss (Jensen). The figure shows it for batches whose losses spread around 1.5:

# %%
gen = torch.Generator().manual_seed(0)
spreads = [0.0, 0.1, 0.2, 0.4, 0.6, 0.8]
batch_losses = [1.5 + s * torch.randn(64, generator=gen, dtype=torch.float64) for s in spreads]  # 64 batches each
plt.figure(figsize=(6, 2.6))
plt.plot(spreads, [b.mean().exp().item() for b in batch_losses], "o-", label="exp(mean NLL)  (right)")
plt.plot(spreads, [b.exp().mean().item() for b in batch_losses], "o-", label="mean of per-batch exp  (wrong)")
plt.xlabel("spread of the per-batch losses"), plt.ylabel("perplexity"), plt.legend()
plt.show()


# %% [markdown]
# ## 2. One batch: summed NLL and token count
#
# Return the **sum** (not the mean) of $-\ln p$ over the scored targets and how many there are, so that batches can
# be combined exactly. Targets equal to `ignore_index` are padding: neither scored nor counted.
# `F.cross_entropy(..., ignore_index=ignore_index, reduction="sum")` over `(B·T, V)` logits does the first half.

# %% nbgrader={"grade": false, "grade_id": "nll_sum_and_count", "locked": false, "schema_version": 3, "solution": true}
def nll_sum_and_count(logits, targets, ignore_index=-100):
    """logits (B, T, V), targets (B, T) -> (summed NLL in nats as a float, number of scored targets as an int)."""
    ### BEGIN SOLUTION
    nll = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=ignore_index,
                          reduction="sum")                       # (B*T, V) vs (B*T,) -> scalar
    count = int((targets != ignore_index).sum())                 # padding is not a token
    return nll.item(), count
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_nll_sum_and_count", "locked": true, "points": 2, "schema_version": 3, "solution": false}
check_nll_sum_and_count(nll_sum_and_count)
### BEGIN HIDDEN TESTS
check_nll_sum_and_count(nll_sum_and_count, seed=3, batch=4, seq=5, vocab=6, ignore_index=0)
### END HIDDEN TESTS

# %% [markdown]
# ## 3. Over a whole split
#
# `batches` is a list of `(x, y)` pairs (shapes `(b, T)`, `b` may differ between batches, `y` may contain `-100`).
# Put the model in eval mode, loop under `torch.no_grad()` accumulating your sums and counts (moving `x` and `y` to
# the model's device), and restore the model's previous mode at the end. Return a dict with `"loss"` (mean NLL,
# nats per token), `"perplexity"` and `"bits_per_byte"`, all floats.

# %% nbgrader={"grade": false, "grade_id": "evaluate", "locked": false, "schema_version": 3, "solution": true}
def evaluate(model, batches, bytes_per_token=1.0):
    """Token-weighted mean NLL over all batches -> {"loss", "perplexity", "bits_per_byte"}."""
    ### BEGIN SOLUTION
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
    loss = total / count
    return {"loss": loss, "perplexity": math.exp(loss), "bits_per_byte": loss / math.log(2) / bytes_per_token}
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_evaluate", "locked": true, "points": 3, "schema_version": 3, "solution": false}
check_evaluate(evaluate)
### BEGIN HIDDEN TESTS
check_evaluate(evaluate, seed=4, batch_sizes=(1, 4, 2, 2), seq=5, bytes_per_token=2.0, dropout=0.5)
### END HIDDEN TESTS

# %% [markdown]
# ## 4. Baselines
#
# A number means little alone. Three models with no neural network at all, fit by counting bytes of the training
# split:
#
# - **uniform**: $\ln 256 = 5.545$ nats per byte;
# - **unigram**: byte frequencies, $p(b) \propto \text{count}(b) + \alpha$;
# - **bigram**: frequencies of the next byte given the previous one,
#   $p(b \mid a) = \dfrac{\text{count}(a, b) + \alpha}{\text{count}(a, \cdot) + 256\,\alpha}$ (add-$\alpha$ smoothing keeps
#   unseen pairs possible).
#
# Write the bigram's mean NLL on `val`, over its `len(val) - 1` pairs $(a, b)$ = `(val[t], val[t + 1])`. Count the
# pairs of `train` with `torch.bincount(prev * 256 + next, minlength=256 * 256)` and view it as a `(256, 256)` table,
# row = previous byte.

# %% nbgrader={"grade": false, "grade_id": "bigram_nll", "locked": false, "schema_version": 3, "solution": true}
def bigram_nll(train, val, alpha=0.5):
    """Mean NLL in nats of val's bytes under add-alpha bigram counts of train."""
    ### BEGIN SOLUTION
    train, val = train.long(), val.long()
    counts = torch.bincount(train[:-1] * 256 + train[1:], minlength=256 * 256).view(256, 256).double()  # [prev, next]
    probs = (counts + alpha) / (counts.sum(dim=1, keepdim=True) + 256 * alpha)                         # rows sum to 1
    return -probs.log()[val[:-1], val[1:]].mean().item()
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_bigram_nll", "locked": true, "points": 2, "schema_version": 3, "solution": false}
check_bigram_nll(bigram_nll)
### BEGIN HIDDEN TESTS
check_bigram_nll(bigram_nll, seed=6, n_train=1000, n_val=150, alpha=0.1)
### END HIDDEN TESTS

# %% [markdown]
# ## 5. The model from notebook 09
#
# The model is built in a cell of its own, then filled with the weights notebook 09 saved.

# %%
cfg = NB09_MODEL
model = learner_model(cfg, DEVICE)  # your decoder, as in notebook 09

# %% [markdown]
# If notebook 09's checkpoint is missing (you start here, or nbgrader grades this notebook on its own), a
# **stand-in** is trained instead: `tinylm.train` for a fixed number of steps (300; 20 when graded) with the
# notebook-09 recipe, so it is the same model every time. It is not your training run, and the cell says so. (It
# times a few steps first; on a machine where the 300 steps would take more than three times their stated time, it
# trains an announced third of them.)

# %%
corpus = tinylm.course_corpus()
CKPT = tinylm.data.cache_dir() / "checkpoints" / "09_training.pt"
if CKPT.is_file() and not GRADING:
    state = torch.load(CKPT, map_location="cpu", weights_only=True)
    model.load_state_dict(state["model"])
    print(f"loaded the notebook-09 model ({state['step']} training steps)")
else:
    from tinylm.experiments.pacing import choose, per_call

    full = 20 if GRADING else 300
    probe = tinylm.Trainer(copy.deepcopy(model), corpus.train, corpus.val, replace(NB09_TRAIN, steps=full))
    first_s = per_call(probe.step)                # the first step pays for allocations, and so will the run's
    STAND_IN_STEPS = choose(full, full if GRADING else full // 3, first_s + (full - 1) * per_call(probe.step, 3),
                            stated_s=35 * full / 300,
                            what="training a stand-in",
                            short_note="the stand-in's losses below end higher")
    del probe
    torch.manual_seed(0)
    tinylm.train(model, corpus.train, config=replace(NB09_TRAIN, steps=STAND_IN_STEPS, warmup_steps=STAND_IN_STEPS // 10),
                 eval_every=0, quiet=True)
    print(f"no notebook-09 checkpoint: this is a STAND-IN, trained by tinylm.train for {STAND_IN_STEPS} steps "
          "(run notebook 09 to evaluate your own run)")
model = model.to(DEVICE).eval()


# %% [markdown]
# Cut the validation split into consecutive windows of 256 bytes (each window predicts its next 256 bytes) and
# evaluate with your function. `tinylm.evaluate` does the same thing independently; the two agree, and the result
# does not depend on how the windows are grouped into batches.

# %%
def windows(data, seq_len, batch_size):
    """Consecutive (x, y) windows of data in batches: every byte after the first is scored once."""
    n = (len(data) - 1) // seq_len
    x = data[: n * seq_len].long().view(n, seq_len)        # (n, T) inputs
    y = data[1: n * seq_len + 1].long().view(n, seq_len)   # (n, T) targets, shifted by one
    return [(x[i:i + batch_size], y[i:i + batch_size]) for i in range(0, n, batch_size)]


def uneven_batches(data, seq_len):
    """The same windows in batches of 1, 2, 3, ... windows. Batches of one size would let a mean of per-batch means
    pass for the token-weighted mean; here the first window alone weighs as much as each whole later batch."""
    (x, y), = windows(data, seq_len, len(data))                # every window in one batch
    batches, start, size = [], 0, 1
    while start < len(x):
        batches.append((x[start:start + size], y[start:start + size]))
        start, size = start + size, size + 1
    return batches

T = NB09_TRAIN.seq_len
val = corpus.val[: (80 if GRADING else 240) * T + 1]  # a whole number of windows, so both sides score the same bytes
tinylm.experiments.announce("your evaluate on the validation windows in batches of 16 and of 1, 2, 3, ..., and "
                            "tinylm.evaluate", stated_s=5)
mine = evaluate(model, windows(val, T, 16))
theirs = tinylm.evaluate(model, val, seq_len=T)
other_batching = evaluate(model, uneven_batches(val, T))
print(f"yours: loss {mine['loss']:.4f} nats/byte, perplexity {mine['perplexity']:.3f}, "
      f"{mine['bits_per_byte']:.3f} bits/byte")
require_agreement("tinylm.evaluate agrees", math.isclose(mine["loss"], theirs.loss, rel_tol=1e-4),
                  "your evaluate (exercise 2 above) scores these windows differently from tinylm.evaluate: rerun its check")
require_agreement("batches of 1, 2, 3, ... windows instead of 16 give the same loss",
                  math.isclose(mine["loss"], other_batching["loss"], rel_tol=1e-5),
                  "your evaluate (exercise 2 above) depends on how the windows are batched: weight each batch by its "
                  "token count (sum the NLL, divide once); rerun its check")

# %% [markdown]
# ### Where the model stands
#
# The floor is the exact entropy of the validation text under the grammar that generated it: no model can do better
# on average. The gap between the bigram and the floor is what context buys; the gap between the model and the floor
# is what the model still misses.

# %%
# NBVAL_CHECK_OUTPUT
base = corpus.baselines()
ours = {"unigram": tinylm.data.unigram_nll(corpus.train, corpus.val), "bigram": bigram_nll(corpus.train, corpus.val)}
print(f"uniform {base['uniform']:.3f} | unigram {ours['unigram']:.3f} | bigram {ours['bigram']:.3f} | "
      f"floor {corpus.floor:.3f}  (nats/byte)")

# %%
names = ["uniform", "unigram", "bigram", "your model", "entropy floor"]
values = [base["uniform"], ours["unigram"], ours["bigram"], mine["loss"], corpus.floor]
fig, ax = plt.subplots(figsize=(7, 3))
bars = ax.barh(names, values, color=["grey", "grey", "grey", "C0", "k"])
for bar, v in zip(bars, values):
    ax.text(v + 0.05, bar.get_y() + bar.get_height() / 2, f"{v:.2f} nats = {v / math.log(2):.2f} bits, ppl {math.exp(v):.1f}",
            va="center", fontsize=8)
ax.set_xlabel("validation loss (nats/byte), lower is better"), ax.set_xlim(0, 7.5), ax.invert_yaxis()
plt.show()


# %% [markdown]
# ### An honest comparison with the floor
#
# The comparison above is not quite fair to the model, for two reasons:
#
# - **Windows cut stories.** Stories are on average longer than a window (the cell below prints the mean), and
#   consecutive windows start wherever byte 256·k falls, almost always inside a story (it prints how often). The
#   first bytes of such a window have no context: the model must guess the hero's name, which the floor (computed
#   over whole stories) already knows.
# - **Different bytes.** The floor covers the whole validation split; the loss covers the windows scored.
#
# The fix is to score exactly the same bytes as the floor, with the context the floor has. Every story starts after a
# newline, and the grammar gives each story's exact log-probability (`tinylm.data.parse_story` recovers the choices
# that wrote it). So: score whole stories; start the first window of each story at the newline before it; inside a
# long story, slide windows so that every scored byte sees at least `context` bytes of its own story (the earlier
# bytes of the window are context only, their targets are `-100`, which your `evaluate` already ignores); and compute
# the floor over exactly those stories.

# %%
def story_windows(data, seq_len, context):
    """(x, y) pairs of seq_len bytes that score every byte of the whole stories in `data` exactly once.

    A story's first window starts at the newline before it; later windows of a long story start `context` bytes
    before the first byte they score. Unscored targets are -100."""
    newline = ord("\n")
    data = torch.cat((torch.tensor([newline]), data.long()))  # the newline that ends the story before the first
    starts = ((data[:-1] == newline).nonzero().flatten() + 1).tolist()  # first byte of each story
    ends = starts[1:] + [len(data)]
    pairs = []
    for first, end in zip(starts, ends):
        lo, hi = first, min(end, first + seq_len)        # bytes [lo, hi) are scored by this window
        while lo < end:
            a = max(first - 1, hi - 1 - seq_len)        # input start: the story's newline, or `context` bytes back
            x = torch.full((seq_len,), newline)         # (T,), padded past the end of the data
            x[: len(data[a:a + seq_len])] = data[a:a + seq_len]
            y = torch.full((seq_len,), -100)             # (T,), -100 = not scored
            y[lo - a - 1: hi - a - 1] = data[lo:hi]
            pairs.append((x, y))
            lo, hi = hi, min(end, hi + seq_len - context)
    return pairs


def story_floor(data):
    """Exact entropy in nats/byte of the whole stories in `data`: -sum of log p(story) / their bytes."""
    stories = bytes(data.tolist()).decode("ascii").splitlines(keepends=True)
    return -sum(tinylm.data.parse_story(story)[0].logp for story in stories) / len(data)


def batched(pairs, batch_size):
    return [(torch.stack([x for x, _ in pairs[i:i + batch_size]]), torch.stack([y for _, y in pairs[i:i + batch_size]]))
            for i in range(0, len(pairs), batch_size)]


CONTEXT = 128
text = corpus.text("val")
n_stories = 40 if GRADING else 150
tinylm.experiments.announce(f"{n_stories} whole stories scored three ways, each story's floor computed", stated_s=3)
scored = corpus.val[: sum(len(s) for s in text.splitlines(keepends=True)[:n_stories])]  # whole stories only
short = [s for s in text.splitlines(keepends=True)[:n_stories] if len(s) <= T]           # fit in one window
aligned = evaluate(model, batched(story_windows(scored, T, CONTEXT), 16))
cut = evaluate(model, windows(scored, T, 16))
short_bytes = torch.tensor(list("".join(short).encode("ascii")), dtype=torch.uint8)
in_one_window = evaluate(model, batched(story_windows(short_bytes, T, CONTEXT), 16))
rows = [("consecutive windows, floor of the whole split", cut["loss"], corpus.floor),
        ("consecutive windows, floor of the same stories", cut["loss"], story_floor(scored)),
        (f"story-aligned windows (context >= {CONTEXT})", aligned["loss"], story_floor(scored)),
        (f"  only the {len(short)} stories that fit in one window", in_one_window["loss"], story_floor(short_bytes))]
inside = sum(int(scored[i - 1]) != ord("\n") for i in range(T, len(scored) - T, T))  # window i starts at byte i
print(f"{n_stories} whole validation stories, {len(scored):,} bytes, {len(scored) / n_stories:.0f} bytes per story on "
      f"average; {inside} of {(len(scored) - 1) // T - 1} consecutive windows after the first start inside a story\n")
print(f"{'':50} {'model':>7} {'floor':>7} {'gap':>7}  (nats/byte)")
for name, loss, floor in rows:
    print(f"{name:50} {loss:7.3f} {floor:7.3f} {loss - floor:7.3f}")
gap_cut, gap_aligned = cut["loss"] - story_floor(scored), aligned["loss"] - story_floor(scored)
print(f"\naligning the windows with the stories removes {1 - gap_aligned / gap_cut:.0%} of the gap; "
      f"{gap_aligned:.3f} nats/byte ({gap_aligned / math.log(2):.3f} bits) remain")
whole = in_one_window["loss"] - story_floor(short_bytes)
print(f"stories seen whole in one window: the model is {whole:.3f} nats/byte "
      f"{'above' if whole > 0 else 'below'} their floor, so {'a gap remains that windows cannot remove' if whole > 0 else 'nothing is left to explain'}")

# %% [markdown]
# Read the table from the top. The first two rows differ only in the floor: over these whole stories or over the whole
# split (the stories are a sample of the same grammar, so the two floors are close). The third row aligns the windows
# with the stories, which removes the cost of starting without context for a model that uses context; the last line
# says how much of the gap that was (a model that has barely learned to use context, such as the stand-in, gains
# nothing). What remains is the model's own shortfall, and the last row tests it: it scores only the stories short
# enough to be seen whole in one window, so nothing is cut at all; the last line of the output says whether a gap is
# still there. That part is what this model, with this much training, does not know about the grammar (which names,
# nouns and verbs go together, where a story ends); more steps or a larger model shrink it, windows do not.

# %% [markdown]
# ### Samples
#
# With your notebook-08 `generate` (`tinylm.generate`, the same recipe, if its check has not passed):

# %%
tok = tinylm.ByteTokenizer()
prompt = tok.encode("Once upon a time")[None].to(DEVICE)  # (1, T)
generate = learner_function("generate", tinylm.generate)  # your notebook-08 sampler, if its check passed
for name, kw in {"greedy": dict(temperature=0), "T = 0.8, top-p = 0.9": dict(temperature=0.8, top_p=0.9)}.items():
    out = generate(model, prompt, 160, generator=torch.Generator(device=DEVICE).manual_seed(0), **kw)
    print(f"{name}: {tok.decode(out[0])!r}\n")

# %% [markdown]
# ### It is a Llama
#
# The model is your notebook-05 decoder (with your functions where their checks passed; the line printed when it
# was built says which). Every component matches the Llama architecture, so the weights convert one to one into
# Hugging Face's `LlamaForCausalLM` (no download: the model is built from a config and filled with your weights). Same input,
# same logits. Skipped if `transformers` is not installed.

# %%
# NBVAL_CHECK_OUTPUT
try:
    import transformers  # noqa: F401
except ImportError:
    print("transformers is not installed: skipping the Hugging Face comparison (pip install transformers).")
else:
    ids = tok.encode("The fox, who finds a lamp, hides it.")[None]  # (1, T)

    def hf_agrees(m):
        with torch.no_grad():
            return (tinylm.to_hf_llama(m.cpu())(ids).logits - m(ids)).abs().max().item() < 1e-4
    check_model_agrees("LlamaForCausalLM gives the same logits", hf_agrees, model)  # a failure names the piece
    model.to(DEVICE)

# %% [markdown]
# ### A real model on the same text
#
# How does a pretrained model do on these stories? SmolLM2-135M-Instruct (notebook 05's pretrained Llama; here
# tinylm's copy, which notebook 05 showed computes what your decoder computes) has far more parameters than yours (the cell prints how many times more) and was trained on trillions of tokens of real
# text, but never on this grammar. Its tokens are BPE pieces of several bytes, so its loss per *token* cannot be
# put next to a loss per *byte*: a model whose tokens are longer has more to predict per token. Bits per byte
# divide that out (nats per token / ln 2 / bytes per token), and make the two comparable on the same text. Below, the
# first whole validation stories, scored by your `evaluate` for both models and the exact floor of those stories;
# the real model reads them as one sequence and scores every token after its first. (Skipped while grading; where
# the weights are not installed the cell says how to install them.)

# %%
from tinylm import pretrained

why = "skipped while grading" if GRADING else pretrained.why_unavailable()  # None: the weights are installed
if why:
    print(f"real weights: {why}")
else:
    real, bpe = pretrained.load_pretrained(DEVICE)
    few = []
    for story in text.splitlines(keepends=True):
        if sum(map(len, few)) + len(story) > 2000:
            break
        few.append(story)
    few_text = "".join(few)
    few_bytes = torch.tensor(list(few_text.encode("ascii")), dtype=torch.uint8)
    ids = torch.tensor([bpe.encode(few_text)])                                          # (1, N) BPE tokens
    scored_bytes = len(bpe.decode(ids[0, 1:].tolist()).encode("utf-8"))                # every token after the first
    real_bpt = scored_bytes / (ids.shape[1] - 1)
    theirs = evaluate(real, [(ids[:, :-1], ids[:, 1:])], bytes_per_token=real_bpt)
    tiny = evaluate(model, batched(story_windows(few_bytes, T, CONTEXT), 16))
    floor = story_floor(few_bytes)
    print(f"{pretrained.PRETRAINED_NAME}: {real.num_parameters():,} parameters, "
          f"{real.num_parameters() / model.num_parameters():,.0f} times yours")
    print(f"{len(few)} whole validation stories, {len(few_bytes):,} bytes; BPE: {ids.shape[1]} tokens, "
          f"{real_bpt:.2f} bytes per token (bpe.bytes_per_token: {bpe.bytes_per_token(few_text):.2f})\n")
    print(f"{'':34} {'tokens':>7} {'nats/token':>11} {'ppl/token':>10} {'bits/byte':>10}")
    print(f"{'your model (notebook 09)':34} {'bytes':>7} {tiny['loss']:11.3f} {tiny['perplexity']:10.2f} {tiny['bits_per_byte']:10.3f}")
    print(f"{pretrained.PRETRAINED_NAME:34} {'BPE':>7} {theirs['loss']:11.3f} {theirs['perplexity']:10.2f} {theirs['bits_per_byte']:10.3f}")
    print(f"{'entropy floor of these stories':34} {'':>7} {'':>11} {'':>10} {floor / math.log(2):10.3f}")
    ahead = "your model" if tiny["bits_per_byte"] < theirs["bits_per_byte"] else pretrained.PRETRAINED_NAME
    print(f"\nper token {pretrained.PRETRAINED_NAME}'s loss is {theirs['loss'] / tiny['loss']:.1f} times yours; per byte "
          f"{ahead} is ahead on this text ({tiny['bits_per_byte']:.3f} vs {theirs['bits_per_byte']:.3f} bits/byte), and "
          f"both are above the floor: {min(tiny['bits_per_byte'], theirs['bits_per_byte']) > floor / math.log(2)}")

# %% [markdown]
# Read the columns in order. Per token, the real model's loss is several times yours, but its tokens are several
# bytes long and yours are one: the per-token columns compare different things. Per byte the comparison is fair,
# and the last line says which model is ahead on this text. Your tiny model was trained on text of this grammar; the
# real one is over a thousand times its size (the cell prints the ratio) and knows English, but has never seen these
# names, nouns and story shapes, so a well-trained tiny model can beat it here (a stand-in trained for a few hundred
# steps may not). This is why bits per byte is the unit for comparing language models with different tokenizers, and
# why a benchmark score says as much about the text as about the model.

# %% [markdown]
# ### The seed's bugs, on a real model
#
# Every check in this course catches one of the mistakes of the seed's bug list. On a toy model a bug is a number in
# a table; on a model that can talk it is visible. Below, the same pretrained model, once clean and then with one
# bug at a time swapped in (the wrong functions of `autograder/checks/pitfalls.py`, put in place
# of tinylm's for one row; `autograder/checks/real_bugs.py` does it): the greedy answer to a question, with the KV
# cache, and the perplexity per token on the first 64 tokens of the stories above (`nb` is the notebook whose check catches it).
#
# Read it for three lessons, each checked by the last line of the output. Most bugs destroy the model at once (the
# count of bugs that raise the perplexity more than tenfold). The positions that restart at 0 cannot change the
# perplexity, which is measured without a cache, and can still break the answer, which is decoded with one: only a
# check that decodes step by step sees that bug. And the unshifted labels leave the answer intact and change the
# number: a loss bug makes a good model look wrong (and, in training, teaches a model to copy its input).

# %%
from autograder.checks import real_bugs

if not why:
    tinylm.experiments.announce(f"the clean model and {len(real_bugs.BUGS)} bugs, each answering in up to 8 tokens and "
                                "scored on 64", stated_s=7)
    rows = real_bugs.measure_bugs(real, bpe.chat_ids("What is the capital of France?"), ids[0, :64].tolist(),
                                  bpe.decode, stop_id=bpe.eos_id, max_new_tokens=8)
    print(real_bugs.table(rows))
    clean, by_name = rows[0], {r.bug: r for r in rows[1:]}
    broken = [r for r in rows[1:] if r.perplexity > 10 * clean.perplexity]
    restart, unshifted = by_name["RoPE positions restart at 0 in each cached step"], by_name[
        "labels not shifted (scored against the input)"]
    print(f"\n{len(broken)} of {len(rows) - 1} bugs raise the perplexity more than tenfold; positions that restart: "
          f"same perplexity as the clean model {math.isclose(restart.perplexity, clean.perplexity, rel_tol=1e-6)}, "
          f"same answer {restart.answer_ids == clean.answer_ids}; labels not shifted: same answer {unshifted.answer_ids == clean.answer_ids}, "
          f"perplexity {unshifted.perplexity / clean.perplexity:.3g} times the clean model's")
    del real

# %% [markdown]
# ## 6. Pitfalls
#
# Each pitfall is a function in `autograder/checks/pitfalls.py` with one deliberate mistake; the cell shows what the check
# reports for it.
#
# **Mean of per-batch exp.** Averaging each batch's perplexity overestimates it (the figure in section 1), and makes
# the number depend on how the data was batched.

# %%
show_check(check_evaluate, pitfalls.evaluate_mean_of_exp)

# %% [markdown]
# **Padding counted.** Counting every position, padding included, adds tokens with zero loss: the loss looks better
# than it is.

# %%
show_check(check_nll_sum_and_count, pitfalls.nll_counting_padding)

# %% [markdown]
# **Dropout on during evaluation.** Without `model.eval()` every evaluation scores a different random sub-network.

# %%
show_check(check_evaluate, pitfalls.evaluate_train_mode)

# %% [markdown]
# ## Summary
#
# - Evaluate in eval mode, under `no_grad`, with a token-weighted mean NLL; perplexity is `exp` of that mean, bits
#   per byte divide it by $\ln 2$ and by the bytes per token.
# - Read the number against baselines (uniform, unigram, bigram) and, when it is known, the entropy floor.
# - Compare with a floor only on the same bytes and with the same context: score whole stories with windows that
#   start at a story, and compute the floor over exactly the scored stories.
# - The model you built is a Llama: same weights, same logits as `LlamaForCausalLM`.
#
# That completes the course: embeddings, RMSNorm, attention, RoPE, SwiGLU, the KV cache, GQA, sampling, training
# and evaluation, each written by you and checked against an independent reference.
