# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 01 · Tokens, embeddings and the tied output head
#
# **What you build.** The two ends of a language model: the layer that turns token ids into vectors, and
# the head that turns vectors back into one score per vocabulary entry. You will write
#
# 1. `embed(ids, weight)`: the embedding lookup, as indexing;
# 2. `one_hot_embed(ids, weight)`: the same lookup written as a matrix product;
# 3. `tied_logits(x, weight)`: the output head that reuses the embedding matrix;
# 4. `tie_weights(tok_emb, lm_head)`: tying two `nn.Module`s so they share one parameter.
#
# Every exercise is followed by a check cell. Run it: it prints a table (shape, dtype, allclose, largest
# absolute difference) and, if your output matches a mistake it knows, names it.
#
# **Run time:** about 20 s on 2 CPU cores (`pytest --nbval-lax` on this notebook, kernel start included).
#
# **Conventions for the whole course** (also in every `tinylm` docstring):
# tensors are `(batch, seq, d_model)` outside attention and `(batch, heads, seq, head_dim)` inside it;
# `nn.Linear` stores its weight as `[d_out, d_in]`, so `linear(x) = x @ W.T`.

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
from autograder.checks import check_embed, check_one_hot_embed, check_tie_weights, check_tied_logits, show_check

# nbgrader counts anything on stderr as a failed cell, so known, harmless
# library warnings are silenced here once, for the whole notebook.
warnings.filterwarnings("ignore", category=UserWarning)
warnings.filterwarnings("ignore", category=FutureWarning)
torch.manual_seed(0)
DEVICE = tinylm.device()
GRADING = bool(os.environ.get("NBGRADER_EXECUTION"))  # set by nbgrader while it validates or grades
THREADS = tinylm.experiments.use_threads()  # one CPU thread, on purpose: the line it prints says why

# %% [markdown]
# ## 1. From text to ids: bytes
#
# A tokenizer maps text to integers. `tinylm` uses the simplest one that never fails: the UTF-8 bytes of the
# text. The vocabulary is the 256 possible byte values, no vocabulary file is needed, and every string
# round-trips exactly. The price is length: a character outside ASCII takes two to four ids, and a BPE
# tokenizer would pack a whole common word into one.

# %%
# NBVAL_CHECK_OUTPUT
tok = tinylm.ByteTokenizer()
ids = tok.encode("héllo, wörld")
print(ids.tolist())
print(f"{len('héllo, wörld')} characters -> {len(ids)} ids;  decode: {tok.decode(ids)!r}")

# %% [markdown]
# ## 2. The embedding table
#
# The embedding is a matrix $W \in \mathbb{R}^{V \times d}$ with one row per vocabulary entry. A batch of ids
# `idx` of shape `[B, T]` becomes `x = W[idx]` of shape `[B, T, d]`: row $i$ of $W$ *is* the vector of token $i$.
#
# The same lookup can be written as a matrix product. Let $\mathrm{onehot}(i) \in \{0,1\}^V$ be the vector with
# a single 1 at position $i$. Then $\mathrm{onehot}(i)^\top W = W_i$, so
#
# $$x = \mathrm{onehot}(\texttt{idx})\,W, \qquad [B, T, V] \times [V, d] \to [B, T, d].$$
#
# That view explains the gradient: $W$ is an ordinary weight matrix, and only the rows of tokens that
# occurred receive a gradient. Indexing gives the same numbers without building the `[B, T, V]` one-hot tensor.
# The figure shows the one-hot matrix of a short word: one bright cell per row, in the column of its byte.

# %%
word = tok.encode("tiny")
one_hot = F.one_hot(word, num_classes=256)  # (T, V): row t has a single 1 at column ids[t]
fig, ax = plt.subplots(figsize=(8, 1.6))
ax.imshow(one_hot[:, 96:128], aspect="auto", cmap="Greys", extent=(95.5, 127.5, len(word) - 0.5, -0.5))
ax.set_yticks(range(len(word)), [f"{chr(b)!r} = {b}" for b in word.tolist()])
ax.set_xlabel("byte value (columns 96-127 of 256)")
ax.set_title("one-hot rows: multiplying by W picks out one row of W each")
plt.show()


# %% [markdown]
# ### Exercise 1: lookup by indexing
#
# Return the rows of `weight` selected by `ids`. It must work for any leading shape of `ids` (`[B, T]` or
# just `[T]`), and the result must stay connected to `weight` for autograd.

# %% nbgrader={"grade": false, "grade_id": "embed", "locked": false, "schema_version": 3, "solution": true}
def embed(ids: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """ids (...) integer token ids, weight [V, d] -> (..., d)."""
    ### BEGIN SOLUTION
    return weight[ids]  # advanced indexing: one row of weight per id, gradient flows to those rows
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_embed", "locked": true, "points": 2, "schema_version": 3, "solution": false}
check_embed(embed)
### BEGIN HIDDEN TESTS
check_embed(embed, seed=11, batch=3, seq=7, vocab=5, d_model=4, dtype=torch.float64)
check_embed(embed, seed=12, batch=1, seq=9, vocab=256, d_model=16)
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 2: lookup as a matrix product
#
# Build the one-hot tensor with `F.one_hot(ids, num_classes=V)`, give it the dtype of `weight` (one-hot
# comes out as integers, and a matrix product needs matching floating types), and multiply.

# %% nbgrader={"grade": false, "grade_id": "one_hot_embed", "locked": false, "schema_version": 3, "solution": true}
def one_hot_embed(ids: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """The same result as embed(ids, weight), computed as onehot(ids) @ weight."""
    ### BEGIN SOLUTION
    one_hot = F.one_hot(ids, num_classes=weight.shape[0]).to(weight.dtype)  # (..., V)
    return one_hot @ weight  # (..., V) @ (V, d) -> (..., d)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_one_hot_embed", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_one_hot_embed(one_hot_embed)
### BEGIN HIDDEN TESTS
check_one_hot_embed(one_hot_embed, seed=21, batch=2, seq=6, vocab=7, d_model=3, dtype=torch.float64)
### END HIDDEN TESTS

# %% [markdown]
# Both give the same numbers, but the one-hot route builds a `[B, T, V]` tensor and does $B \cdot T \cdot V \cdot d$
# multiply-adds to copy $B \cdot T \cdot d$ numbers. With a 128k-token vocabulary that is the difference between
# a memory copy and a large matmul, which is why every framework implements the embedding as a lookup.

# %% [markdown]
# ## 3. The output head, tied to the embedding
#
# After the last block the model holds a vector $h \in \mathbb{R}^d$ per position and must score all $V$
# possible next tokens. A linear map $\mathbb{R}^d \to \mathbb{R}^V$ needs a `[V, d]` weight: exactly the shape of the
# embedding. **Weight tying** reuses the embedding for it:
#
# $$\text{logits} = h\,W^\top, \qquad [B, T, d] \times [d, V] \to [B, T, V].$$
#
# The score of token $v$ is the dot product $\langle h, W_v\rangle$: the head asks which token's embedding the
# hidden state points at. The scores are *logits*, not probabilities; the softmax comes later, inside the loss
# or the sampler.

# %% [markdown]
# ### Exercise 3: tied logits

# %% nbgrader={"grade": false, "grade_id": "tied_logits", "locked": false, "schema_version": 3, "solution": true}
def tied_logits(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """x (B, T, d), weight [V, d] (the embedding matrix) -> logits (B, T, V)."""
    ### BEGIN SOLUTION
    return x @ weight.T  # (B, T, d) @ (d, V) -> (B, T, V)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_tied_logits", "locked": true, "points": 2, "schema_version": 3, "solution": false}
check_tied_logits(tied_logits)
### BEGIN HIDDEN TESTS
check_tied_logits(tied_logits, seed=31, batch=3, seq=2, vocab=17, d_model=4, dtype=torch.float64)
### END HIDDEN TESTS

# %% [markdown]
# Your two functions already make a (very) small language model: embed, then score. With random weights,
# what does it predict? The score of the input token itself is $\lVert W_i \rVert^2$, large and positive, while
# the other scores are dot products of unrelated random vectors, near zero. So an untrained tied model mostly
# predicts "the same token again". Training has to move it away from that.

# %%
# NBVAL_CHECK_OUTPUT
torch.manual_seed(0)
table = torch.randn(256, 64) / 8                         # [V, d]: a random embedding
text = tok.encode("the quick brown fox jumps over the lazy dog")[None]  # (1, T)
logits = tied_logits(embed(text, table), table)           # (1, T, V)
same = (logits.argmax(-1) == text).float().mean().item()
print(f"untrained tied model predicts its own input token at {same:.0%} of positions")


# %% [markdown]
# ### Exercise 4: tying two modules
#
# In a model the embedding is an `nn.Embedding(V, d)` with `.weight` of shape `[V, d]`, and the head an
# `nn.Linear(d, V, bias=False)`, whose weight is stored as `[d_out, d_in] = [V, d]`: the same shape, no
# transpose needed. Tying means both modules hold **the same `nn.Parameter` object**, so one gradient update
# changes both uses. Write `tie_weights` so that afterwards `lm_head.weight is tok_emb.weight`.

# %% nbgrader={"grade": false, "grade_id": "tie_weights", "locked": false, "schema_version": 3, "solution": true}
def tie_weights(tok_emb: nn.Embedding, lm_head: nn.Linear) -> None:
    """Make lm_head use tok_emb's weight Parameter (in place)."""
    ### BEGIN SOLUTION
    lm_head.weight = tok_emb.weight  # the same Parameter object, not a copy of its values
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_tie_weights", "locked": true, "points": 2, "schema_version": 3, "solution": false}
check_tie_weights(tie_weights)
### BEGIN HIDDEN TESTS
check_tie_weights(tie_weights, vocab=7, d_model=12, seed=41)
### END HIDDEN TESTS

# %% [markdown]
# What does tying save? `nn.Module.parameters()` yields a shared parameter once, so counting distinct
# parameters of `tinylm.Transformer` with and without tying shows it. With this course's vocabulary of 256 bytes the
# embedding is a small share of the weights (the percentages below). The saving matters with a real tokenizer's
# vocabulary: Llama 3.2 1B and 3B tie (`tie_word_embeddings: true` in their Hugging Face configs), with 128,256
# tokens; Llama-3-8B, same vocabulary, does not tie (`false`), so it stores that matrix twice.

# %%
# NBVAL_CHECK_OUTPUT
for d_model, n_layers, n_heads in [(128, 4, 4), (384, 6, 6)]:
    counts = {}
    for tie in (True, False):
        cfg = tinylm.ModelConfig(d_model=d_model, n_layers=n_layers, n_heads=n_heads, tie_embeddings=tie)
        counts[tie] = tinylm.Transformer(cfg).num_parameters()
    saved = counts[False] - counts[True]
    print(f"d_model={d_model:4d}: tied {counts[True]:>10,}  untied {counts[False]:>10,}  "
          f"saved {saved:,} ({saved / counts[False]:.1%})")
for name, d_model in (("Llama 3.2 1B", 2048), ("Llama 3.2 3B", 3072)):
    print(f"{name}: tying saves the 128256 x {d_model} output matrix, {128256 * d_model:,} parameters")

# %% [markdown]
# ## 4. Pitfalls
#
# The two classic ways to get tying wrong both *run*, so nothing crashes and the model just trains worse.
#
# The wrong versions live in `autograder/checks/pitfalls.py` (each is a solution with one line changed, so printing
# them here would give the answers away); each pitfall names the changed line.
#
# **The head is a copy, not a share:** `lm_head.weight = nn.Parameter(tok_emb.weight.detach().clone())` has the
# right values today, but it is a second tensor: the optimizer updates the two separately and they drift apart.

# %%
show_check(check_tie_weights, pitfalls.tie_by_copy)

# %% [markdown]
# **Transposed weight:** thinking "the head maps $d \to V$, so it needs $W^\top$" and storing `tok_emb.weight.T`
# gives a new tensor of the wrong layout for `nn.Linear`. In the functional form, `x @ weight` instead of
# `x @ weight.T` fails loudly when $V \ne d$, but silently computes nonsense when they happen to be equal, which
# is why the check also runs a square case.

# %%
show_check(check_tie_weights, pitfalls.tie_transposed)
show_check(check_tied_logits, pitfalls.tied_logits_transposed)

# %% [markdown]
# ## Summary
#
# - Text becomes ids (here: UTF-8 bytes, $V = 256$); ids become vectors by picking rows of $W \in \mathbb{R}^{V\times d}$.
# - Lookup and one-hot matmul are the same linear map; the lookup skips the `[B, T, V]` tensor.
# - The tied head scores token $v$ by $\langle h, W_v\rangle$: `logits = x @ W.T`, no extra parameters.
# - Tying means one shared `Parameter`, not equal values.
#
# **Next:** the hidden states that reach the head are normalised first. Notebook 02 builds RMSNorm.
