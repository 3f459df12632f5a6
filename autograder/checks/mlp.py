"""Checks for notebook 05: SwiGLU, its hidden size, and the pre-norm block."""
from __future__ import annotations

import itertools
import math

import torch
import torch.nn.functional as F

from ..diagnosis_record import Evidence, candidates, confirmed
from .contracts import Contract, Edge, call_keeping_inputs, defaults, run_contract
from .framework.calling import quiet_call
from .framework.check import Check
from .framework.measure import identify_activation, python_number_problem, randn


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
    chk.axes = {"batch": batch, "seq": seq, "batch·seq": batch * seq, "d_model": d_model, "d_ff": d_ff}
    want = F.linear(silu(g) * u, w_down)
    got = call_keeping_inputs(chk, swiglu, x, w_gate, w_up, w_down, on_error=lambda err: (
        _layout_hint(swiglu, x, {"w_gate": w_gate, "w_up": w_up, "w_down": w_down}, want)
        if "cannot be multiplied" in str(err) else None))
    chk.compare(f"x {tuple(x.shape)}, d_ff={d_ff}", got, want, variants={
        "gate and up swapped / SiLU on the wrong branch: SiLU belongs on x @ w_gate.T, the up branch stays linear":
            lambda: F.linear(g * silu(u), w_down),
        "SiLU on both branches: the up branch stays linear": lambda: F.linear(silu(g) * silu(u), w_down),
        "SiLU missing: the gate branch must go through SiLU (silu(x @ w_gate.T))": lambda: F.linear(g * u, w_down),
        "SiLU applied after the product instead of to the gate": lambda: F.linear(silu(g * u), w_down),
        "no gate: SiLU(x @ w_gate.T) @ w_down.T is a plain MLP; multiply by the up branch":
            lambda: F.linear(silu(g), w_down),
        "GELU instead of SiLU (that is GeGLU): gate = F.silu(x @ w_gate.T)": lambda: F.linear(F.gelu(g) * u, w_down),
        "SiLU on the output: it belongs on the gate, before w_down": lambda: silu(F.linear(silu(g) * u, w_down)),
    })
    if not chk.passed and not chk.named_variants():
        explain_swiglu(chk, swiglu, dtype)
    run_contract(chk, swiglu, SWIGLU)
    chk.finish()


def explain_swiglu(chk: Check, swiglu, dtype=torch.float32) -> None:
    """Probe the learner's SwiGLU with d_model = 2, d_ff = 1 and x = (a, 1):
    picking the rows of w_gate and w_up makes the gate input a (or 1) and the
    up input 1, 2 (or a), so the output is act(gate) combined with up, and
    the activation, the product and the branch roles can be read off."""
    a = torch.linspace(-4, 4, 33, dtype=dtype)
    x = torch.stack((a, torch.ones_like(a)), dim=-1)[None]            # (1, 33, 2)
    w_down = torch.tensor([[1.0], [0.0]], dtype=dtype)                 # (d_model=2, d_ff=1): output 0 = hidden

    def run(gate_row, up_row):
        out = chk.probe(swiglu, x, torch.tensor([gate_row], dtype=dtype), torch.tensor([up_row], dtype=dtype), w_down)
        return out[0, :, 0].double() if isinstance(out, torch.Tensor) and out.shape == x.shape else None

    up1, up2, roles = run([1.0, 0.0], [0.0, 1.0]), run([1.0, 0.0], [0.0, 2.0]), run([0.0, 1.0], [1.0, 0.0])
    if up1 is None or up2 is None or roles is None:
        return
    a64 = a.double()
    silu = a64 * torch.sigmoid(a64)
    if torch.allclose(roles, silu, atol=1e-4) and not torch.allclose(up1, silu, atol=1e-4):
        chk.diagnose("gate and up swapped: SiLU is applied to x @ w_up.T; it belongs on x @ w_gate.T, the up branch "
                     "stays linear")
        return
    if float(up1.max() - up1.min()) < 1e-6:
        chk.diagnose("the output does not depend on x @ w_gate.T: w_gate is not used (is the gate computed from "
                     "w_up?); gate = silu(x @ w_gate.T)")
        return
    if torch.allclose(up2, up1, atol=1e-4):
        chk.diagnose("the up branch is not used: doubling x @ w_up.T leaves the output unchanged; multiply the gate "
                     "by it, silu(x @ w_gate.T) * (x @ w_up.T)")
        return
    if torch.allclose(up2, up1 + 1, atol=1e-4):
        chk.diagnose("the two branches are added (a sum): SwiGLU multiplies them, silu(gate) * up")
        return
    if torch.allclose(up2, 2 * up1, atol=1e-4):
        act = identify_activation(lambda t: up1.to(t.dtype), probe=a64)
        if act is not None and not act.startswith("SiLU"):
            chk.diagnose(f"the gate's activation is {act}, not SiLU (x·sigmoid(x)): gate = F.silu(x @ w_gate.T)")


LINEAR_LAYOUT = ("w_gate and w_up are [d_ff, d_model], w_down is [d_model, d_ff] (nn.Linear's layout, [out, in]); a "
                 "projection multiplies by the transpose, x @ w_gate.T, (gate * up) @ w_down.T")


def _layout_hint(swiglu, x, weights: dict, want: torch.Tensor) -> Evidence:
    """A product whose sizes do not fit: a weight used in its own place without .T is named only when the
    learner's swiglu, handed that weight transposed, gives the right output (measured); a weight used in another's
    place gives the same error, so otherwise both are candidates."""
    names = list(weights)
    for n in range(1, len(names) + 1):
        for flipped in itertools.combinations(names, n):
            args = [weights[k].T.contiguous() if k in flipped else weights[k] for k in names]
            out = quiet_call(swiglu, x, *args)
            if isinstance(out, torch.Tensor) and out.shape == want.shape and torch.allclose(out, want, atol=1e-5):
                which = " and ".join(f"`{k}`" for k in flipped)
                return confirmed(f"{which} multiplied without .T (measured: handed {which} transposed, your swiglu "
                                 f"returns the right output): {LINEAR_LAYOUT}")
    return candidates("a matrix product's sizes do not fit (measured), and handing any of the weights transposed "
                      "does not make your swiglu right; candidates: (1) a weight used in another's place (w_up or "
                      f"w_gate where w_down belongs, or the reverse); (2) a weight without .T together with another "
                      f"mistake. {LINEAR_LAYOUT}")


def _known_widths(d: int, m: int, multiple: int) -> dict[str, int]:
    """{known mistake: the width it gives} for d_model d and multiple m, where the check's own multiple is
    `multiple` (a hard-coded one shows when m differs)."""
    wrong = {
        "4 · d_model is the GELU MLP's width; a gated MLP has three matrices, so it uses 2/3 of that (8/3 · d)": 4 * d,
        "rounded down: round UP to the next multiple so the MLP keeps at least 8/3 · d_model units":
            m * math.floor(8 * d / 3 / m),
        "rounded to the nearest multiple (round): round UP to the next one so the MLP keeps at least 8/3 · "
        "d_model units": m * round(8 * d / 3 / m),
        "not rounded to a multiple of `multiple`": int(8 * d / 3),
        "returns the number of multiples: multiply by `multiple` to get the width": math.ceil(8 * d / 3 / m),
        "8 // 3 = 2 in integer division, so the width is about 2 · d_model; write 8 * d_model / 3":
            m * math.ceil(8 // 3 * d / m),
    }
    if m != multiple:
        wrong[f"`multiple` is ignored: with multiple={m} the result is rounded to {multiple} only"] = \
            multiple * math.ceil(8 * d / 3 / multiple)
    return wrong


def _same_width(width: int, got) -> bool:
    try:
        return bool(got == width)
    except Exception:  # noqa: BLE001: a value that does not compare is not that width
        return False


def check_swiglu_hidden(swiglu_hidden, *, d_models: tuple = (48, 64, 100, 4096), multiple: int = 32) -> None:
    """swiglu_hidden(d_model, multiple): 8/3 · d_model rounded UP to a multiple
    (also with twice the multiple, so a hard-coded one shows)."""
    __tracebackhide__ = True
    chk = Check("swiglu_hidden", expects="an int, a multiple of `multiple`")
    rounding = lambda d, m: m * math.ceil(8 * d / 3 / m)  # noqa: E731
    telling = next((d for d in (*d_models, 100, 1000) if rounding(d, multiple) != rounding(d, 2 * multiple)), d_models[0])
    explained: list[set[str]] = []
    refuted: set[str] = set()
    for d, m in [*((d, multiple) for d in d_models), (telling, 2 * multiple)]:
        got = chk.call(swiglu_hidden, d, m)
        want = rounding(d, m)
        wrong = _known_widths(d, m, multiple)
        problem = python_number_problem(got, int)
        ok = problem is None and got == want
        value = got if problem is None else (got.item() if isinstance(got, torch.Tensor) and got.numel() == 1 else got)
        # Which known mistakes give this value: one is named only if it explains every failing case and gives
        # the right width where the learner's does (round and floor agree on some widths, not on all).
        if not ok:
            explained.append({b for b, v in wrong.items() if value == v and problem is None})
        else:
            refuted |= {b for b, v in wrong.items() if v != want}
        if problem is not None and value == want:
            chk.diagnose(f"the value is right but swiglu_hidden returned {problem}, not an int (a layer width): "
                         "return int(...)")
        chk.require(f"d_model={d}, multiple={m}", ok, f"got another int, expected {want}" if problem is None
                    else f"got {problem}, not an int")
    swept = sweep_swiglu_hidden(chk, swiglu_hidden)
    for bug in (set.intersection(*explained) if explained else set()) - refuted:
        if all(_same_width(_known_widths(d, m, multiple).get(bug, got), got) for (d, m), got in swept.items()):
            chk.diagnose(bug)
    run_contract(chk, swiglu_hidden, SWIGLU_HIDDEN)
    chk.finish()


# The sweep's grid: every small width, and every power of two a hardware-friendly multiple is (Llama's 256 included).
SWEEP_D_MODELS = range(1, 129)
SWEEP_MULTIPLES = tuple(2 ** k for k in range(9))


def sweep_swiglu_hidden(chk: Check, swiglu_hidden) -> dict:
    """The learner's width against the exact one, m · ⌈8d / 3m⌉ in integers,
    on every d_model and multiple of the sweep's grid (a pure function of two
    small ints: a few milliseconds); where it differs, the first input, the
    multiples and widths it differs for, by how much, and whether every
    result is 8/3 · d_model rounded to an int first and then up."""
    def run():
        results = {}
        for m in SWEEP_MULTIPLES:
            for d in SWEEP_D_MODELS:
                try:
                    results[d, m] = swiglu_hidden(d, m)
                except Exception:  # noqa: BLE001: an input it refuses; the rows above report its errors
                    pass
        return results

    def same(got, want) -> bool:
        try:
            return bool(got == want)
        except Exception:  # noqa: BLE001: a value that does not compare is not the width
            return False

    exact = lambda d, m: m * -(-8 * d // (3 * m))  # noqa: E731
    results = chk.probe(run) or {}
    wrong = {(d, m): got for (d, m), got in results.items() if not same(got, exact(d, m))}
    grid = f"every d_model 1..{SWEEP_D_MODELS[-1]} with multiple {', '.join(map(str, SWEEP_MULTIPLES))}"
    if not chk.require(grid, not wrong, f"{len(wrong)} of {len(results)} wrong"):
        (d, m), got = next(iter(wrong.items()))
        bad = sorted({m for _, m in wrong})
        right = [m for m in SWEEP_MULTIPLES if m not in bad]
        where = [f"first at swiglu_hidden({d}, {m}), where 8/3 · {d} = {8 * d / 3:.4g} rounded up to a "
                 f"multiple of {m} is {exact(d, m)}",
                 f"wrong with multiple {', '.join(map(str, bad))}" +
                 (f", right for every d_model with multiple {', '.join(map(str, right))}" if right else "")]
        if all(8 * d % 3 for d, _ in wrong):
            where.append("only where 8/3 · d_model has a fraction (d_model not a multiple of 3)")
        if all(same(got, exact(d, m) - m) for (d, m), got in wrong.items()):
            where.append("each time one multiple short")
        chk.measured(f"swept {grid}: " + "; ".join(where))
        firsts = {"truncated to an int (int() or //)": math.floor, "rounded to the nearest int (round())": round}
        for how, first in firsts.items():
            if all(same(got, m * math.ceil(first(8 * d / 3) / m)) for (d, m), got in results.items()):
                chk.diagnose(f"8/3 · d_model is {how} before it is rounded up to the multiple (measured: every result "
                             f"of the sweep is exactly that): the whole number loses the fraction that should round "
                             f"up, so with a small multiple the width comes out one multiple short; round up the exact "
                             f"value, multiple * math.ceil(8 * d_model / 3 / multiple)")
    return results


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
    got = call_keeping_inputs(chk, pre_norm_block, x, attn, mlp, n1, n2)
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
        "branches in parallel: the MLP must read the stream after attention was added to it, not the block's input":
            lambda: x + attn(n1(x)) + mlp(n2(x)),
    })
    if not chk.passed and not chk.named_variants():
        explain_block(chk, pre_norm_block, x, attn, mlp, n1, n2)
    run_contract(chk, pre_norm_block, PRE_NORM_BLOCK)
    chk.finish()


# What the MLP may read that says nothing, alone, of what became of attention's output.
BLOCK_INPUT = "mlp_norm(x), the block's input"


def explain_block(chk: Check, pre_norm_block, x, attn, mlp, n1, n2) -> None:
    """Run the block with branches that record what they are given, then
    name what attention read, what the MLP read, and what came out."""
    seen: list[tuple[str, torch.Tensor]] = []

    def recording(name, branch):
        def run(h):
            seen.append((name, h.detach().clone()))
            return branch(h)
        return run

    out = chk.probe(pre_norm_block, x, recording("attn", attn), recording("mlp", mlp), n1, n2)
    inputs = dict(seen)
    if not isinstance(out, torch.Tensor) or set(inputs) != {"attn", "mlp"}:
        return
    close = lambda a, b: a.shape == b.shape and bool(torch.allclose(a, b, atol=1e-5))  # noqa: E731
    if [n for n, _ in seen] == ["mlp", "attn"]:
        chk.diagnose("the MLP runs before attention: the block is x + attn(attn_norm(x)) first, then the MLP on that")
        return
    A, M = inputs["attn"], inputs["mlp"]
    h = x + attn(n1(x))
    reads_attn = {"attn_norm(x)": n1(x), "x itself, without attn_norm": x, "mlp_norm(x): use attn_norm before attention": n2(x)}
    read = next((what for what, t in reads_attn.items() if close(A, t)), None)
    if read is None:
        return
    if read.startswith("x itself") and close(M, n2(n1(x + attn(x)))):
        chk.diagnose("post-norm: you normalise the sum, attn_norm(x + attn(x)); pre-norm normalises the branch input "
                     "and keeps the stream a plain sum: x + attn(attn_norm(x))")
        return
    if read != "attn_norm(x)":
        chk.diagnose(f"attention reads {read}; it must read attn_norm(x), and the result is added to x")
        return
    a = attn(A)
    reads_mlp = {
        "mlp_norm(x + attn(attn_norm(x)))": n2(h),
        "the stream x + attn(...) itself, without mlp_norm (the input is not normalised)": h,
        "attn_norm(...) of the stream: use mlp_norm before the MLP": n1(h),
        BLOCK_INPUT: n2(x),
        "mlp_norm(attn(...)) without x: missing residual around attention (x + attn(attn_norm(x)))": n2(a),
        "mlp_norm(attn_norm(x) + attn(...)): the residual is added to the normalised input, not to x": n2(n1(x) + a),
        "mlp_norm(x * attn(...)): the residual is multiplied, not added (x + attn(...))": n2(x * a),
    }
    read = next((what for what, t in reads_mlp.items() if close(M, t)), None)
    if read is None:
        return
    if read.startswith("the stream") and close(out, h + n2(mlp(h))):
        chk.diagnose("mlp_norm is applied after the branch, mlp_norm(mlp(h)); it goes before it: h + mlp(mlp_norm(h))")
        return
    if read == BLOCK_INPUT:  # what became of attention's output is read off what the block returns
        chk.diagnose(f"the MLP reads {read}" + next((said for said, t in {
            ", and the block returns x + mlp(mlp_norm(x)): attention runs, but its output reaches neither the MLP "
            "nor the result; keep the sum x + attn(attn_norm(x)) as the stream, the MLP reads mlp_norm of it and "
            "the block returns it plus the MLP's output": x + mlp(M),
            ", and the block returns x + attn(attn_norm(x)) + mlp(mlp_norm(x)): the branches run in parallel, but "
            "the MLP must read the stream after attention was added": x + a + mlp(M)}.items() if close(out, t)),
            "; it must read the stream after attention was added, mlp_norm(x + attn(attn_norm(x)))"))
        return
    if read != "mlp_norm(x + attn(attn_norm(x)))":
        chk.diagnose(f"the MLP reads {read}")
        return
    m = mlp(M)
    outputs = {"mlp(...) without h: missing residual around the MLP (h + mlp(mlp_norm(h)))": m,
               "mlp_norm(h + mlp(...)): the output is normalised; the block returns the plain sum": n2(h + m),
               "h * mlp(...): the residual is multiplied, not added": h * m}
    what = next((w for w, t in outputs.items() if close(out, t)), None)
    if what:
        chk.diagnose(f"the block returns {what}")


# -- contracts: the regimes each exercise promises, and its step-by-step reference ---------------
def swiglu_steps(x, w_gate, w_up, w_down):
    gate = x @ w_gate.T                 # (..., d_ff)
    up = x @ w_up.T
    hidden = F.silu(gate) * up
    return hidden @ w_down.T            # (..., d)


def pre_norm_block_steps(x, attn, mlp, attn_norm, mlp_norm):
    h = x + attn(attn_norm(x))
    return h + mlp(mlp_norm(h))


def _swiglu_cases():
    p = defaults(check_swiglu)
    x = randn(p["batch"], p["seq"], p["d_model"], seed=p["seed"], dtype=p["dtype"])
    w_gate = randn(p["d_ff"], p["d_model"], seed=p["seed"] + 1, dtype=p["dtype"])
    w_up = randn(p["d_ff"], p["d_model"], seed=p["seed"] + 2, dtype=p["dtype"])
    w_down = randn(p["d_model"], p["d_ff"], seed=p["seed"] + 3, dtype=p["dtype"]) / math.sqrt(p["d_ff"])
    return [("swiglu", (x, w_gate, w_up, w_down), {})]


def _block_cases():
    p = defaults(check_pre_norm_block)
    d, seed = p["d_model"], p["seed"]
    x = randn(p["batch"], p["seq"], d, seed=seed) * 3 + 1
    return [("block", (x, _branch(d, seed + 1), _branch(d, seed + 2), _norm(d, seed + 3), _norm(d, seed + 4)), {})]


# bfloat16 too: a step computed in float32 and never cast back (a SiLU upcast for precision) meets the half-precision
# weights after it, which float64 inputs cannot show.
SWIGLU = Contract("swiglu", swiglu_steps, _swiglu_cases, names=("x", "w_gate", "w_up", "w_down"), batch=("x",),
                  leading=("x",), views=("x",), grad=("x", "w_gate", "w_up", "w_down"),
                  dtypes=(torch.float64, torch.bfloat16), large=("x",))
PRE_NORM_BLOCK = Contract("pre_norm_block", pre_norm_block_steps, _block_cases,
                          names=("x", "attn", "mlp", "attn_norm", "mlp_norm"), batch=("x",), views=("x",), grad=("x",),
                          dtypes=())


def swiglu_hidden_steps(d_model: int, multiple: int = 32) -> int:
    width = 8 * d_model / 3
    groups = math.ceil(width / multiple)
    return multiple * groups


def _hidden_cases():
    p = defaults(check_swiglu_hidden)
    return [(f"d_model={d}", (d, p["multiple"]), {}) for d in p["d_models"]]


def _exact_multiple(count: int):
    """d_model for which 8/3 · d_model is exactly `count` multiples of `multiple`
    (the bound of rounding up: a ceiling of a whole number is that number)."""
    def transform(args: dict) -> dict:
        m = args["multiple"]
        return {**args, "d_model": 3 * m * count // 8} if (3 * m * count) % 8 == 0 else args
    return transform


SWIGLU_HIDDEN = Contract("swiglu_hidden", swiglu_hidden_steps, _hidden_cases, names=("d_model", "multiple"), dtypes=(),
                         numbers=True, params=(("multiple", 64),),
                         edges=(Edge("one exact multiple", "when 8/3 · d_model is exactly one multiple of `multiple` "
                                     "(d_model = 3/8 · multiple)", _exact_multiple(1)),
                                Edge("three exact multiples", "when 8/3 · d_model is exactly three multiples of "
                                     "`multiple` (an odd count: where rounding half to even goes the other way)",
                                     _exact_multiple(3))))
