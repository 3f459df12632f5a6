"""Checks for notebook 05: SwiGLU, its hidden size, and the pre-norm block."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .core import Check, randn


def check_swiglu(swiglu, *, seed: int = 0, batch: int = 2, seq: int = 3, d_model: int = 6, d_ff: int = 10,
                 dtype=torch.float32) -> None:
    """swiglu(x, w_gate, w_up, w_down) with nn.Linear layout [d_out, d_in],
    against the closed form a·sigmoid(a) written out with torch built-ins."""
    __tracebackhide__ = True
    x = randn(batch, seq, d_model, seed=seed, dtype=dtype)
    w_gate, w_up = randn(d_ff, d_model, seed=seed + 1, dtype=dtype), randn(d_ff, d_model, seed=seed + 2, dtype=dtype)
    w_down = randn(d_model, d_ff, seed=seed + 3, dtype=dtype) / math.sqrt(d_ff)
    g, u = F.linear(x, w_gate), F.linear(x, w_up)  # (B, T, d_ff) each
    silu = lambda a: a * torch.sigmoid(a)          # noqa: E731  SiLU, from its definition
    chk = Check("swiglu", expects=f"(batch, seq, d_model) = {(batch, seq, d_model)}")
    got = chk.call(swiglu, x, w_gate, w_up, w_down)
    chk.compare(f"x {tuple(x.shape)}, d_ff={d_ff}", got, F.linear(silu(g) * u, w_down), variants={
        "gate and up swapped / SiLU on the wrong branch: SiLU belongs on x @ w_gate.T, the up branch stays linear":
            lambda: F.linear(g * silu(u), w_down),
        "SiLU on both branches: the up branch stays linear": lambda: F.linear(silu(g) * silu(u), w_down),
        "SiLU missing: the gate branch must go through SiLU (silu(x @ w_gate.T))": lambda: F.linear(g * u, w_down),
        "SiLU applied after the product instead of to the gate": lambda: F.linear(silu(g * u), w_down),
        "no gate: SiLU(x @ w_gate.T) @ w_down.T is a plain MLP; multiply by the up branch":
            lambda: F.linear(silu(g), w_down),
        "ReLU or GELU instead of SiLU": lambda: F.linear(F.gelu(g) * u, w_down),
        "SiLU on the output: it belongs on the gate, before w_down": lambda: silu(F.linear(silu(g) * u, w_down)),
    })
    chk.finish()


def check_swiglu_hidden(swiglu_hidden, *, d_models: tuple = (48, 64, 100, 4096), multiple: int = 32) -> None:
    """swiglu_hidden(d_model, multiple): 8/3 · d_model rounded UP to a multiple."""
    __tracebackhide__ = True
    chk = Check("swiglu_hidden", expects="an int, a multiple of `multiple`")
    for d in d_models:
        got = chk.call(swiglu_hidden, d, multiple)
        want = multiple * math.ceil(8 * d / 3 / multiple)
        wrong = {
            "4 · d_model is the GELU MLP's width; a gated MLP has three matrices, so it uses 2/3 of that (8/3 · d)":
                4 * d,
            "rounded down: round UP to the next multiple so the MLP keeps at least 8/3 · d_model units":
                multiple * math.floor(8 * d / 3 / multiple),
            "not rounded to a multiple of `multiple`": int(8 * d / 3),
        }
        ok = isinstance(got, int) and not isinstance(got, bool) and got == want
        bug = next((b for b, v in wrong.items() if got == v), None) if not ok else None
        chk.require(f"d_model={d}", ok, f"got {got!r}" + ("" if isinstance(got, int) else " (not an int)"), diagnosis=bug)
    chk.finish()


def _branch(d: int, seed: int):
    """A nonlinear stand-in for attention or the MLP: (B, T, d) -> (B, T, d)."""
    a = randn(d, d, seed=seed) / math.sqrt(d)
    return lambda h: torch.tanh(h @ a) * 2.0


def _norm(d: int, seed: int):
    g = 1 + 0.5 * randn(d, seed=seed)
    return lambda h: F.rms_norm(h, (d,), g, eps=1e-6)


def check_pre_norm_block(pre_norm_block, *, seed: int = 0, batch: int = 2, seq: int = 4, d_model: int = 6) -> None:
    """pre_norm_block(x, attn, mlp, attn_norm, mlp_norm):
    x + attn(attn_norm(x)), then x + mlp(mlp_norm(x))."""
    __tracebackhide__ = True
    d = d_model
    x = randn(batch, seq, d, seed=seed) * 3 + 1  # not normalised, so a missing or extra norm shows
    attn, mlp = _branch(d, seed + 1), _branch(d, seed + 2)
    n1, n2 = _norm(d, seed + 3), _norm(d, seed + 4)
    h = x + attn(n1(x))
    want = h + mlp(n2(h))
    chk = Check("pre_norm_block", expects=f"(batch, seq, d_model) = {(batch, seq, d)}")
    got = chk.call(pre_norm_block, x, attn, mlp, n1, n2)
    post1 = n1(x + attn(x))

    def residual_from_normed():
        a = n1(x)
        a = a + attn(a)
        b = n2(a)
        return b + mlp(b)

    chk.compare(f"x {tuple(x.shape)}", got, want, variants={
        "post-norm instead of pre-norm: normalise the branch input, norm(x) -> attn, not the sum norm(x + attn(x))":
            lambda: n2(post1 + mlp(post1)),
        "missing residual around attention: x + attn(attn_norm(x)), not attn(attn_norm(x))":
            lambda: attn(n1(x)) + mlp(n2(attn(n1(x)))),
        "missing residual around the MLP: h + mlp(mlp_norm(h)), not mlp(mlp_norm(h))": lambda: mlp(n2(h)),
        "missing residual on both branches": lambda: mlp(n2(attn(n1(x)))),
        "residual taken from the normalised input: add the branch to x itself, not to norm(x)": residual_from_normed,
        "norms swapped: attn_norm goes before attention, mlp_norm before the MLP":
            lambda: (lambda h2: h2 + mlp(n1(h2)))(x + attn(n2(x))),
        "attn_norm used for both branches: each branch has its own norm with its own gain":
            lambda: (lambda h2: h2 + mlp(n1(h2)))(x + attn(n1(x))),
        "branches in parallel: the MLP must read the stream after attention was added (h), not x":
            lambda: x + attn(n1(x)) + mlp(n2(x)),
    })
    chk.finish()
