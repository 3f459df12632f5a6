# %% [markdown]
# # 05 · SwiGLU and the transformer block
#
# **What you build.** The second half of every block, the gated MLP of Llama, and then the block itself, which
# wires attention and the MLP into the residual stream. You will write
#
# 1. `swiglu(x, w_gate, w_up, w_down)`: the gated MLP;
# 2. `swiglu_hidden(d_model, multiple)`: its hidden size, by the 8/3 rule;
# 3. `pre_norm_block(x, attn, mlp, attn_norm, mlp_norm)`: the pre-norm residual block.
#
# Then you run a whole tiny model built from your pieces.
#
# **Since notebook 04:** attention with RoPE is `tinylm.Attention`; RMSNorm is `tinylm.RMSNorm`.
#
# **Run time:** about 20 s on 2 CPU cores (`pytest --nbval-lax` on this notebook, kernel start included).

# %% setup id=setup
import math
import os
import warnings

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

import tinylm
from autograder import pitfalls
from autograder.checks import check_pre_norm_block, check_swiglu, check_swiglu_hidden, show_check

# nbgrader counts anything on stderr as a failed cell: silence known library warnings once.
warnings.filterwarnings("ignore", category=UserWarning)
warnings.filterwarnings("ignore", category=FutureWarning)
torch.manual_seed(0)
DEVICE = tinylm.device()
GRADING = bool(os.environ.get("NBGRADER_EXECUTION"))  # set by nbgrader while it validates or grades

# %% [markdown]
# ## 1. A gated MLP
#
# The MLP of GPT-2 is `down(gelu(up(x)))`: widen to $4d$, apply a nonlinearity, project back. SwiGLU computes two
# projections of the same input and lets one **gate** the other, element by element:
#
# $$\mathrm{SwiGLU}(x) = \big(\mathrm{SiLU}(x W_g^\top) \odot x W_u^\top\big) W_d^\top, \qquad \mathrm{SiLU}(a) = a\,\sigma(a)$$
#
# | tensor | shape |
# |---|---|
# | `x` | `[B, T, d]` |
# | `gate = silu(x @ W_gate.T)`, `up = x @ W_up.T` | `[B, T, d_ff]` each |
# | `gate * up` | `[B, T, d_ff]` |
# | `out = (gate * up) @ W_down.T` | `[B, T, d]` |
#
# The nonlinearity sits on the gate branch only; the up branch stays linear and is scaled by the gate, so the layer
# multiplies two functions of $x$ instead of applying one nonlinearity to one of them. That GLU variants beat plain
# activations at equal parameter count is an empirical finding: the paper that introduced SwiGLU (Shazeer, 2020,
# "GLU Variants Improve Transformer") measures it and, in its conclusion, explicitly offers no explanation. Where
# SiLU differs from ReLU: it is smooth and lets small negative values through.

# %%
a = torch.linspace(-5, 5, 200)
fig, ax = plt.subplots(figsize=(6, 2.6))
for name, fn in (("ReLU", F.relu), ("GELU", F.gelu), ("SiLU = a·σ(a)", F.silu)):
    ax.plot(a, fn(a), label=name)
ax.axhline(0, c="grey", lw=0.5), ax.legend(), ax.set_xlabel("a")
plt.show()

# %% [markdown]
# ### Exercise 1: `swiglu`
#
# The weights are in the `nn.Linear` layout `[d_out, d_in]`: `W_gate` and `W_up` are `[d_ff, d]`, `W_down` is
# `[d, d_ff]`. Use `F.silu` or write $a\,\sigma(a)$.

# %% answer id=swiglu
def swiglu(x: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor, w_down: torch.Tensor) -> torch.Tensor:
    """x (B, T, d) -> (B, T, d)."""
    ### BEGIN SOLUTION
    gate = F.silu(x @ w_gate.T)  # (B, T, d_ff): the nonlinearity lives on the gate only
    up = x @ w_up.T              # (B, T, d_ff): linear
    return (gate * up) @ w_down.T  # (B, T, d)
    ### END SOLUTION

# %% check id=check_swiglu points=3
check_swiglu(swiglu)
### BEGIN HIDDEN TESTS
check_swiglu(swiglu, seed=81, batch=3, seq=4, d_model=5, d_ff=14, dtype=torch.float64)
check_swiglu(swiglu, seed=82, batch=1, seq=7, d_model=16, d_ff=32)
### END HIDDEN TESTS

# %% [markdown]
# ## 2. The 8/3 rule
#
# A GELU MLP has two matrices of $d \times 4d$: $8d^2$ parameters. SwiGLU has three matrices of $d \times d_{ff}$; to
# spend the same $8d^2$ it uses $d_{ff} = \tfrac{2}{3} \cdot 4d = \tfrac{8}{3}d$. Implementations round that **up** to a
# multiple of a power of two (`tinylm` uses 32, Llama 256) so the matrices tile well on hardware.

# %% answer id=swiglu_hidden
def swiglu_hidden(d_model: int, multiple: int = 32) -> int:
    """8/3 · d_model, rounded up to a multiple of `multiple`."""
    ### BEGIN SOLUTION
    return multiple * math.ceil(8 * d_model / 3 / multiple)
    ### END SOLUTION

# %% check id=check_swiglu_hidden points=1
check_swiglu_hidden(swiglu_hidden)
### BEGIN HIDDEN TESTS
check_swiglu_hidden(swiglu_hidden, d_models=(96, 200, 768), multiple=256)
### END HIDDEN TESTS

# %%
# NBVAL_CHECK_OUTPUT
print(f"{'d_model':>7} {'d_ff (32)':>9} {'d_ff (256)':>10} {'GELU MLP 2·d·4d':>16} {'SwiGLU 3·d·d_ff(32)':>20}")
for d in (128, 512, 4096):
    d_ff = swiglu_hidden(d)
    print(f"{d:>7} {d_ff:>9} {swiglu_hidden(d, 256):>10} {2 * d * 4 * d:>16,} {3 * d * d_ff:>20,}")

# %% [markdown]
# The 8/3 rule with Llama's multiple of 256 gives 11008 for $d = 4096$, which is the `intermediate_size` of
# Llama-2-7B (its Hugging Face `config.json`). Llama 3 departs from the rule: Llama-3-8B, also $d = 4096$, has
# `intermediate_size` 14336, that is $3.5\,d$ (Meta's code scales the 8/3 width by an `ffn_dim_multiplier`, then
# rounds up to a multiple of 1024).

# %% [markdown]
# ## 3. The pre-norm block
#
# A block adds two branches to the **residual stream** `x`, each reading a normalised copy of it:
#
# $$h = x + \mathrm{attn}(\mathrm{norm}_1(x)), \qquad \text{out} = h + \mathrm{mlp}(\mathrm{norm}_2(h))$$
#
# The stream itself is never normalised inside the block. From the embedding to the final norm it is a sum:
# the embedding plus every branch's contribution, so the gradient of the loss reaches every layer directly
# through the additions. The original Transformer normalised *after* the addition (post-norm,
# $x = \mathrm{norm}(x + \mathrm{attn}(x))$), which puts a norm on the main path of every layer and needs a careful
# learning-rate warm-up to train deep stacks; pre-norm is what GPT-2 and Llama use.
#
# ### Exercise 3: `pre_norm_block`
#
# `attn`, `mlp`, `attn_norm` and `mlp_norm` are functions from `(B, T, d)` to `(B, T, d)`: call them, do not
# build them.

# %% answer id=pre_norm_block
def pre_norm_block(x, attn, mlp, attn_norm, mlp_norm) -> torch.Tensor:
    """x (B, T, d) -> (B, T, d): x + attn(attn_norm(x)), then + mlp(mlp_norm(.))."""
    ### BEGIN SOLUTION
    x = x + attn(attn_norm(x))  # the branch reads a normalised copy; the stream stays a sum
    x = x + mlp(mlp_norm(x))    # the MLP reads the stream after attention has written to it
    return x
    ### END SOLUTION

# %% check id=check_pre_norm_block points=3
check_pre_norm_block(pre_norm_block)
### BEGIN HIDDEN TESTS
check_pre_norm_block(pre_norm_block, seed=91, batch=3, seq=5, d_model=8)
### END HIDDEN TESTS

# %% [markdown]
# ## 4. A whole model from your pieces
#
# `tinylm.Transformer` is: embedding → `n_layers` blocks → final RMSNorm → tied head. Run it with your
# `pre_norm_block` and `swiglu` wired to its weights, and compare with the library's forward pass. Notebooks 01–04
# gave you the other pieces; here they come from `tinylm`.

# %%
# NBVAL_CHECK_OUTPUT
torch.manual_seed(0)
cfg = tinylm.ModelConfig(d_model=64, n_layers=3, n_heads=4, max_seq_len=64)
model = tinylm.Transformer(cfg).eval()
idx = tinylm.ByteTokenizer().encode("a tiny llama, built by hand")[None]  # (1, T)


def my_forward(model, idx):
    x = tinylm.embed(idx, model.tok_emb.weight)                   # (B, T, d)
    for blk in model.blocks:
        attn = lambda h, blk=blk: blk.attn(h, model.rope_cos, model.rope_sin)  # noqa: E731
        mlp = lambda h, m=blk.mlp: swiglu(h, m.gate_proj.weight, m.up_proj.weight, m.down_proj.weight)  # noqa: E731
        x = pre_norm_block(x, attn, mlp, blk.attn_norm, blk.mlp_norm)
    return tinylm.tied_logits(model.norm(x), model.tok_emb.weight)  # (B, T, V)


with torch.no_grad():
    mine, theirs = my_forward(model, idx), model(idx)
print(f"config: d_model={cfg.d_model}, n_layers={cfg.n_layers}, n_heads={cfg.n_heads}, d_ff={cfg.d_ff}")
print(f"parameters: {model.num_parameters():,}; logits {tuple(mine.shape)}")
print("your forward pass equals tinylm's:", torch.allclose(mine, theirs, atol=1e-5))
print(f"initial loss {F.cross_entropy(mine[0, :-1], idx[0, 1:]).item():.1f} vs ln(256) = {math.log(256):.1f}")

# %% [markdown]
# The last line is the first sanity check of any language model: an untrained model should be about uniform
# over the vocabulary, so its next-token loss should be close to $\ln V$. Notebook 09 trains it down from there.

# %% [markdown]
# ## 5. Pitfalls
#
# The wrong versions live in `autograder/pitfalls.py` (each is a solution with one line changed).
#
# **Gate and up swapped (SiLU on the wrong branch):** `silu(x @ w_up.T) * (x @ w_gate.T)`. Both branches are
# `[d_ff, d]` matrices, so swapping them runs. The result is a different function of the weights, and pretrained
# checkpoints break.

# %%
show_check(check_swiglu, pitfalls.swiglu_swapped)

# %% [markdown]
# **Post-norm instead of pre-norm:** `x = norm(x + attn(x))`. Normalising the sum instead of the branch input
# changes the function and, in deep models, the training dynamics.

# %%
show_check(check_pre_norm_block, pitfalls.post_norm_block)

# %% [markdown]
# **Missing residual:** `x = attn(attn_norm(x))`, without `x +`. Each block then *replaces* the stream instead of
# adding to it: the identity path from the embedding to the head is gone.

# %%
show_check(check_pre_norm_block, pitfalls.block_no_attn_residual)

# %% [markdown]
# ## Summary
#
# - SwiGLU: `(silu(x @ W_gate.T) * (x @ W_up.T)) @ W_down.T`, SiLU on the gate only.
# - $d_{ff} = \tfrac83 d$ rounded up keeps the parameter count of a $4d$ GELU MLP.
# - Pre-norm block: `x = x + attn(norm1(x)); x = x + mlp(norm2(x))`; the stream is a sum, normalised once at the end.
# - Embedding → blocks → final norm → tied head is the whole model; at initialisation its loss is about $\ln V$.
#
# **Next:** generating text one token at a time recomputes everything for every new token. Notebook 06 adds a KV cache.
