"""Running a contract: the regime grid on the learner's function against the
step-by-step reference, one regime at a time (run_contract), and the table
row every check shows that the inputs were left as they were
(call_keeping_inputs)."""
from __future__ import annotations

import contextlib
import math
import weakref
from typing import Any, Callable

import torch

from .. import trace
from ...learner_values import describe
from ..framework.check import Check, Row
from ..framework.calling import fresh
from ..framework.measure import close_to, reached_by_gradient, tol_for
from .calls import call_in_regime, positional_args, dtype_of_result, same_result, split_case
from .locate import locate_regime, locate_cases
from .regimes import Contract, Regime, batch_size_of, on_a_gpu, regimes


def call_keeping_inputs(chk: Check, fn, *args, on_error=None, **kwargs):
    """chk.call(fn, *args, **kwargs), plus one table row per check saying
    whether every tensor argument still holds its values afterwards (every
    call measures that, Check.call, and names a changed one by the learner's
    own parameter name; this row shows it passed too)."""
    __tracebackhide__ = True
    got = chk.call(fn, *args, on_error=on_error, **kwargs)
    chk.record_inputs([], row=True)
    return got


# -- the regime grid ------------------------------------------------------------------


# A function whose regimes have been run, and what they found: the hidden
# tests call the same check again with other parameters, and the grid, built
# from the visible inputs, would only repeat itself.
_DONE: "weakref.WeakKeyDictionary[Any, dict]" = weakref.WeakKeyDictionary()


def run_contract(chk: Check, fn: Callable, contract: Contract) -> None:
    """Run the exercise's regime grid on its visible inputs (once the table
    rows pass; a regime after a failure would only repeat it) and register
    the locator of the learner's first wrong line for a failure."""
    __tracebackhide__ = True
    cases = None

    def visible():
        nonlocal cases
        if cases is None:
            cases = list(contract.cases())
        return cases
    if contract.locate:
        chk.locate_with(lambda: locate_cases(fn, contract, visible()))
    if not chk.passed and callable(fn) and contract.batch:
        mixed = _rows_mixed(fn, contract, visible())
        if mixed and mixed[1]:
            chk.candidates(mixed[0])
        elif mixed:
            chk.diagnose(mixed[0])
    if not chk.passed or not callable(fn) or not _declares_regimes(contract):
        return
    apply_outcome(chk, remembered(fn, contract.exercise, lambda: _run_grid(chk, fn, contract, visible())))


def _rows_mixed(fn, contract: Contract, cases: list) -> tuple[str, bool] | None:
    """For a failing exercise whose rows are independent (contract.batch):
    when each row of the visible batch, given alone, gives the reference's
    result, and the whole batch does not, the rows are mixed."""
    if not cases or contract.same is not None:
        return None
    label, named, kwargs = split_case(contract, cases[0])
    size = batch_size_of(named, contract.batch)
    if size is None or size < 2:
        return None
    batched = next(n for n in contract.batch if isinstance(named.get(n), torch.Tensor))
    case = f"{label}, {batched} of shape {tuple(named[batched].shape)}"
    try:
        want = contract.reference(*positional_args(contract, named), **kwargs)
    except Exception:  # noqa: BLE001: a case the reference cannot run says nothing
        return None
    got, error = call_in_regime(fn, contract, positional_args(contract, fresh(named)), kwargs)
    if error is not None or same_result(contract, got, want, None):
        return None
    if isinstance(got, torch.Tensor) and isinstance(want, torch.Tensor) and got.shape != want.shape:
        return None  # a batch of another shape (axes merged or swapped) is a layout, said by the shape rows
    # A result that pools the rows (a mean loss) combines them by design: there the measurement fits rows
    # mixed and rows weighted otherwise alike, and both are said as candidates.
    pooled = not any(isinstance(t, torch.Tensor) and t.dim() > 0 and t.shape[0] == size
                     for t in (want if isinstance(want, (tuple, list)) else (want,)))
    # A row alone: as a batch of one, or, where the exercise takes any leading axes, without the batch axis.
    forms = [lambda t, b: t[b:b + 1].clone()] + ([lambda t, b: t[b].clone()] if contract.leading else [])
    for form in forms:
        if all(_row_alone_right(fn, contract, named, kwargs, form, b) for b in range(size)) and pooled:
            return (f"on {case}, each of the {size} rows given alone gives the right result, the batch of {size} "
                    "does not, and "
                    "the result pools the rows; candidates: the rows are mixed (an operation across the batch axis, "
                    "a flatten or reshape in another order), or they are pooled with other weights than every "
                    "scored position counting once (a mean of per-row means)", True)
        if all(_row_alone_right(fn, contract, named, kwargs, form, b) for b in range(size)):
            if form is not forms[0] and not _rows_depend(fn, contract, named, kwargs, size, got):
                # right only without the batch axis, wrong as a batch of one, and no row's result follows another
                # row's values: what changes is the rank, not the company of other rows
                return (f"on {case}, each of the {size} rows given alone without the batch axis gives the right "
                        "result, and given as a batch of one (the same values, one leading axis more) does not; "
                        "candidates: an axis given by its position from the front (dim=2), which is another axis once "
                        "a leading axis is added (count from the end, dim=-1), or sizes unpacked from the shape for "
                        "one rank only", True)
            return (f"the rows of a batch are mixed (measured on {case}: each of the {size} rows given alone gives "
                    f"the right result, the batch of {size} does not): an operation runs across the batch axis (axis 0), e.g. a "
                    "sum, cumsum, softmax or sort without dim=-1, or an index that treats the batch as one row", False)
    return None


def _rows_depend(fn, contract: Contract, named: dict, kwargs: dict, size: int, first) -> bool:
    """Whether the learner's result for one row changes when only another
    row of the batch changes (the first, then the last, is changed; a result
    not kept per row: False). first: the learner's result on the batch as
    it is, already measured by the caller."""
    for row in (0, size - 1):
        changed = dict(named)
        for n in contract.batch:
            t = named.get(n)
            if isinstance(t, torch.Tensor) and t.is_floating_point():
                changed[n] = t.clone()
                changed[n][row] = t[row].flip(-1) * 1.5 + 0.25
        if all(changed[n] is named[n] for n in named):
            return False
        second, error = call_in_regime(fn, contract, positional_args(contract, fresh(changed)), kwargs)
        if error is not None:
            return False
        pairs = list(zip(first, second)) if isinstance(first, (tuple, list)) and isinstance(second, (tuple, list)) \
            else [(first, second)]
        others = [b for b in range(size) if b != row]
        if any(isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dim() > 0 and a.shape == b.shape
               and a.shape[0] == size and not torch.equal(a[others], b[others]) for a, b in pairs):
            return True
    return False


def _row_alone_right(fn, contract: Contract, named: dict, kwargs: dict, form, b: int) -> bool:
    row = {**named, **{n: form(named[n], b) for n in contract.batch if isinstance(named.get(n), torch.Tensor)}}
    try:
        want = contract.reference(*positional_args(contract, row), **kwargs)
    except Exception:  # noqa: BLE001: a form the reference cannot run says nothing
        return False
    got, error = call_in_regime(fn, contract, positional_args(contract, fresh(row)), kwargs)
    return error is None and same_result(contract, got, want, None)


def remembered(subject, key: str, run: Callable[[], dict]) -> dict:
    """The regime outcome of `subject` (a learner's function or class) for
    `key`: run once, then remembered while the object lives."""
    try:
        done = _DONE.setdefault(subject, {})
    except TypeError:  # not weakly referenceable: run every time
        done = {}
    if key not in done:
        done[key] = run()
    return done[key]


def apply_outcome(chk: Check, outcome: dict) -> None:
    """A regime grid's rows into the check's table, and its failure, if any,
    as the check's regime, facts, likely bugs, located line and changed inputs."""
    for row in outcome["rows"]:
        chk.rows.append(Row(**row))
    failed = outcome.get("failed")
    if not failed:
        return
    chk.regime = {"name": failed["name"], "text": failed["text"]}
    for fact in failed.get("facts", []):
        chk.measured(fact)
    for line in failed.get("candidates", []):
        chk.candidates(line)
    for bug in failed.get("bugs", []):
        chk.diagnose(bug)
    chk.located = failed.get("located")
    if failed.get("changed"):
        chk.record_inputs(failed["changed"], row=True)


def _declares_regimes(contract: Contract) -> bool:
    """False for a contract that only gives the locator its reference (no regime could apply)."""
    return bool(contract.batch or contract.leading or contract.views or contract.grad or contract.dtypes
                or contract.params or contract.shift or contract.scale or contract.ones or contract.edges
                or contract.generator or on_a_gpu())


def _run_grid(chk: Check, fn: Callable, contract: Contract, cases: list) -> dict:
    """{"rows": [row fields], "failed": {...} or None}: the regimes in order, up to the first that fails.

    Regimes that compose are first tried together, in one call (a batch of
    one in float64 with gradients; the non-contiguous views in half
    precision): a right answer
    passes a group at once; when it fails, each regime is tried alone, so the
    failure names the regime that shows it (or, when none does alone, the
    combination)."""
    if not cases:
        return {"rows": []}
    label, named, kwargs = split_case(contract, cases[0])
    rows: list[dict] = []
    base = None
    if contract.params:
        base, _ = call_in_regime(fn, contract, positional_args(contract, named), kwargs, named=list(named.items()))
    grid = regimes(contract, named)
    # Groups whose regimes cannot hide each other's failures (a batch of one would let a `.view` of a
    # non-contiguous tensor work: views go in a group of their own).
    groups = [[r for r in grid if r.name == "batch of 1" or r.dtype == torch.float64 or r.grad],
              [r for r in grid if r.name.startswith("non-contiguous") or r.dtype in (torch.bfloat16, torch.float16)]]
    for together in (g for g in groups if len(g) > 1):
        combined = _combined(together)
        if _try(fn, contract, combined, named, kwargs, base) is None:
            rows += [{"name": f"regime: {r.name}", "ok": True, "close": "ok", "note": ""} for r in together]
            grid = [r for r in grid if r not in together]
        else:
            grid = [*grid, combined]  # each alone first, in the grid's order; the combination if none fails alone
    for regime in grid:
        outcome = _try(fn, contract, regime, named, kwargs, base)
        if outcome == "skip":
            continue
        rows.append({"name": f"regime: {regime.name}", "ok": outcome is None, "close": "ok" if outcome is None else "FAIL",
                     "note": "" if outcome is None else outcome["note"]})
        if outcome is not None:
            return {"rows": rows, "failed": outcome}
    return {"rows": rows}


def _combined(together: list[Regime]) -> Regime:
    """The composable regimes applied one after the other, as one regime."""
    def transform(a: dict) -> dict:
        for r in together:
            a = r.transform(a)
        return a
    names = ", ".join(r.name for r in together)
    dtype = next((r.dtype for r in together if r.dtype is not None), None)
    grad = next((r.grad for r in together if r.grad), ())
    return Regime(f"together: {names}", "in each of them alone", f"with all of them at once ({names})", transform,
                  dtype=dtype, grad=grad)


def _try(fn, contract: Contract, regime: Regime, named: dict, kwargs: dict, base):
    """None when the learner's function passes `regime`, "skip" when the
    reference cannot run it, else the failure {"note", "facts", "bugs", ...}."""
    if regime.judge is not None:
        found = regime.judge(fn, contract, dict(named))
        if found is None:
            return None
        error = found.pop("error", None)
        located = found.pop("located", None) or (trace.locate_error(error) if error is not None else None)
        found.update(name=regime.name, changed=[], located=located,
                     text=f"right {regime.passes}, {'raises' if error is not None else 'wrong'} {regime.fails}")
        return found
    try:
        changed_args = regime.transform(dict(named))
        args = positional_args(contract, changed_args)
        # the learner draws from the state the reference drew from
        drawn = [(g, g.get_state()) for g in changed_args.values() if isinstance(g, torch.Generator)]
        with torch.enable_grad() if regime.grad else contextlib.nullcontext():
            want = contract.reference(*args, **kwargs)
        for generator, state in drawn:
            generator.set_state(state)
    except Exception:  # noqa: BLE001: a regime the reference itself cannot run is not the learner's
        return "skip"
    left: list[str] = []
    changed: list[str] = []
    tensors = [(n, v) for n, v in changed_args.items() if isinstance(v, torch.Tensor)]
    with torch.enable_grad() if regime.grad else contextlib.nullcontext():
        got, error = call_in_regime(fn, contract, args, kwargs, left, changed, tensors)
    found = _judge(contract, regime, got, want, error, args, changed_args, base)
    if found is None and left:
        found = {"note": "settings left changed", "facts": [], "bugs": []}
    if found is None:
        return None
    found["bugs"] = [*found["bugs"], *left]
    found["name"] = regime.name
    found["text"] = f"right {regime.passes}, {'raises' if error is not None else 'wrong'} {regime.fails}"
    found["changed"] = changed
    found["located"] = located = locate_regime(fn, contract, regime, args, kwargs, error, got, want)
    apart = _rows_apart(fn, contract, regime, changed_args, kwargs) if regime.rows_apart else None
    if apart:
        found["facts"] = [*found["facts"], apart]
    if found.get("gradient") and located is not None and located.kind == "grad":
        # the tracer saw the learner's line leave autograd: the cut is measured, not a candidate
        found["facts"] = [*found["facts"], f"{found['gradient']}: the branch through the line named below leaves "
                          "autograd while its values stay right"]
        found["candidates"] = []
    if located is not None and located.kind != "raises" and located.facts:
        # the values quoted were measured on this row's inputs, which the visible call may compute rightly
        located.facts.append(f"measured on the inputs of the row '{regime.name}'")
    return found


def _rows_apart(fn, contract: Contract, regime: Regime, changed: dict, kwargs: dict) -> str | None:
    """Where the regime's large gaps failed: the same inputs with every row of
    the arguments a softmax reads shifted to share one maximum (each row's
    softmax is unchanged). When the learner's function then gives the
    reference's result, what failed is rows far below the others, not large
    values."""
    shifted = dict(changed)
    for name in regime.rows_apart:
        t = changed.get(name)
        if not isinstance(t, torch.Tensor) or t.dim() < 2 or not t.is_floating_point() or not bool(t.isfinite().all()):
            return None
        shifted[name] = t - t.amax(dim=-1, keepdim=True) + t.amax()
    if all(torch.equal(shifted[n], changed[n]) for n in regime.rows_apart):
        return None  # the rows share their maximum already
    args = positional_args(contract, shifted)
    try:
        want = contract.reference(*args, **kwargs)
    except Exception:  # noqa: BLE001: a probe the reference cannot run measures nothing
        return None
    got, error = call_in_regime(fn, contract, args, kwargs)
    if error is not None or not same_result(contract, got, want, regime.dtype):
        return None
    shown = " and ".join(f"`{n}`" for n in regime.rows_apart)
    return (f"the same {shown} with every row shifted to share one maximum (a shift each row's softmax ignores) give "
            "the reference's result: what fails is the rows whose values lie far below the other rows'; a softmax "
            "subtracts each row's own maximum, x.amax(dim=-1, keepdim=True), not one taken over the whole tensor")


def _judge(contract: Contract, regime: Regime, got, want, error, args, named, base=None) -> dict | None:
    """None when the regime passes, else {"note", "facts", "bugs"}; base:
    the learner's result on the unchanged inputs (for a parameter regime)."""
    if error is not None:
        return {"note": f"raised {type(error).__name__}", "facts": [], "bugs": [], "error": error}
    if regime.grad:
        values_ok = same_result(contract, _detached(got), _detached(want), regime.dtype)
        local = _gradients(got, want, named, regime.grad)
        if local is None:  # the grader's recheck: the learner's process measured the reach
            reached, wrong = _reached(got, named, regime.grad), []
        else:
            reached, wrong = local[:2]
        unreached = [n for n in regime.grad if n not in reached]
        wrong = [] if unreached or not values_ok else wrong
        if wrong:
            what = " and ".join(f"`{n}`" for n in wrong)
            # Several mechanisms give right values with another gradient: which one is not measured here.
            measured = (f"the gradient your result gives {what} differs from the reference's while the values are "
                        f"right (measured with a backward pass: {'; '.join(local[2][n] for n in wrong)})")
            return {"note": f"gradient of {', '.join(wrong)} differs", "facts": [], "bugs": [], "gradient": measured,
                    "candidates": [f"{measured}; candidates: a branch of the computation cut from autograd "
                                   "(`.detach()`, `.data`, `.item()`, torch.no_grad()) while its values stay right, or "
                                   "an operation whose backward is not its forward's derivative (F.embedding's "
                                   "padding_idx or max_norm, a custom autograd.Function)"]}
        if not unreached and values_ok:
            return None
        if unreached:
            what = " and ".join(f"`{n}`" for n in unreached)
            return {"note": f"no gradient reaches {', '.join(unreached)}", "facts": [],
                    "bugs": [f"no gradient reaches {what} (measured: a backward pass from your result leaves its .grad "
                             "empty): something cuts the graph, e.g. `.detach()`, `.data`, `.item()`/`.tolist()`, a "
                             "new tensor built with torch.tensor(...), or work under torch.no_grad(); training could "
                             "never change it"]}
        return {"note": "values differ with gradients on", "facts": [], "bugs": []}
    if same_result(contract, got, want, regime.dtype):
        return None
    facts, bugs = [], []
    got_dtype, want_dtype = dtype_of_result(got), dtype_of_result(want)
    if regime.dtype is not None and got_dtype is not None and want_dtype is not None and got_dtype != want_dtype:
        bugs.append(f"your result is {str(got_dtype).removeprefix('torch.')} for "
                    f"{str(regime.dtype).removeprefix('torch.')} inputs: it must keep the inputs' dtype (a tensor your "
                    "code makes new takes dtype= an input's .dtype; a value your code casts is cast back with "
                    ".to(an input's .dtype))")
        return {"note": f"result {got_dtype} != {want_dtype}", "facts": facts, "bugs": bugs}
    if regime.device and isinstance(got, torch.Tensor) and got.device.type != regime.device:
        bugs.append(f"your result is on {got.device} for {regime.device} inputs: create every new tensor on the "
                    "inputs' device (device=x.device)")
        return {"note": f"result on {got.device}", "facts": facts, "bugs": bugs}
    if regime.param and base is not None and same_result(contract, got, base, regime.dtype):
        bugs.append(f"`{regime.param}` has no effect on your {contract.exercise} (measured: {regime.passes.removeprefix('for ')} "
                    f"and {regime.fails.removeprefix('for ')} give the same result): use the argument, not a fixed value")
        return {"note": f"{regime.param} ignored", "facts": facts, "bugs": bugs}
    g, w = trace.tensors_in(got), trace.tensors_in(want)
    bad, right = _non_finite(got), _non_finite(want)
    if bad and not right:
        facts.append(f"{regime.fails.split(' (')[0]} your result holds {bad} inf or nan value{'s' if bad > 1 else ''} "
                     "where the reference's is finite")
    if g and w and tuple(g[0].shape) != tuple(w[0].shape):
        missing = trace.size_one_axis(tuple(w[0].shape), tuple(g[0].shape))
        facts.append(f"{regime.fails} your result has shape {tuple(g[0].shape)}, expected {tuple(w[0].shape)}"
                     + (f": the axis of size 1 at position {missing} is missing" if missing is not None else ""))
        candidates = [f"what drops the axis of size 1 {regime.fails}: candidates: a bare squeeze(), which drops every "
                      "axis of size 1, a batch of one too; a squeeze or an index [0] of that axis"
                      ] if missing is not None else []
        return {"note": f"shape {tuple(g[0].shape)} != {tuple(w[0].shape)}", "facts": facts, "bugs": bugs,
                "candidates": candidates}
    if not g and w:
        facts.append(f"{regime.fails} your function returned {describe(got)}")
    hidden = _below_float32(regime, g, w)
    return {"note": "values differ", "facts": facts, "bugs": bugs, "candidates": [hidden] if hidden else []}


def _below_float32(regime: Regime, got: list, want: list) -> str | None:
    """A float64 result off by less than a float32 result may be: why only float64's comparison shows it."""
    if regime.dtype != torch.float64 or not got or not want or got[0].dtype != torch.float64 \
            or got[0].shape != want[0].shape:
        return None
    atol, rtol = tol_for(torch.float32)
    g, w = got[0].detach().cpu(), want[0].detach().cpu()
    if not bool(torch.isfinite(g).all()) or not torch.allclose(g, w, atol=atol, rtol=rtol):
        return None
    return (f"{regime.fails} your result differs from the reference's by at most {float((g - w).abs().max()):.2g}, "
            f"within the tolerance a float32 result gets (atol {atol:g}, rtol {rtol:g}): float32 rows cannot show "
            "a difference this small; candidates: a small constant used another way than the formula's (an eps "
            "clamped to instead of added, or put inside or outside a root), a small term dropped or added, or a "
            "step computed in float32 inside this float64 call")


def _non_finite(value) -> int:
    """How many inf or nan numbers a result holds (tensors and Python floats, in tuples too)."""
    if isinstance(value, torch.Tensor):
        return int((~torch.isfinite(value.detach())).sum()) if value.is_floating_point() else 0
    if isinstance(value, float):
        return int(not math.isfinite(value))
    if isinstance(value, (tuple, list)):
        return sum(_non_finite(v) for v in value[:8])
    return 0


def _reached(got, named: dict, names: tuple[str, ...]) -> list[str]:
    """The argument names a backward pass from `got` reaches (in the grader's
    recheck the learner's process has answered, see core.gradient_reaches)."""
    if not isinstance(got, torch.Tensor):
        return []
    remote = getattr(got, "recheck_gradient_reaches", None)
    if remote is not None:
        return [n for n in names if any(t is named[n] for t in remote)]
    try:
        return reached_by_gradient(got, [(n, named[n]) for n in names])
    except RuntimeError:  # no graph at all
        return []


def _gradients(got, want, named: dict, names: tuple[str, ...]) -> tuple[list[str], list[str], dict] | None:
    """(the arguments a backward pass from the learner's result reaches, those
    whose gradient, of a fixed random weighting of the result, differs from
    the reference's, and for each of these where it differs), from one
    backward pass each; None in the grader's recheck, whose results carry no
    graph (the reach comes measured)."""
    if not isinstance(got, torch.Tensor) or getattr(got, "recheck_gradient_reaches", None) is not None:
        return None
    if not got.requires_grad:
        return [], [], {}
    leaves = [named[n] for n in names]
    weights = torch.randn(got.shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64).to(got.device)
    try:
        mine = torch.autograd.grad((got.double() * weights).sum(), leaves, allow_unused=True)
    except RuntimeError:
        return [], [], {}
    reached = [n for n, g in zip(names, mine) if g is not None and bool(g.abs().sum() > 0)]
    if not isinstance(want, torch.Tensor) or want.shape != got.shape or not want.requires_grad:
        return reached, [], {}
    try:
        theirs = torch.autograd.grad((want.double() * weights.to(want.device)).sum(), leaves, allow_unused=True)
    except RuntimeError:
        return reached, [], {}
    wrong, where = [], {}
    for n, g, w in zip(names, mine, theirs):
        if w is None:
            continue
        # An entry that is a difference of large terms (a norm's gradient, where x's own direction is taken
        # out) carries their rounding: the absolute tolerance scales with the gradient's largest entry.
        atol, rtol = tol_for(named[n].dtype)
        atol, rtol = 10 * atol + 10 * rtol * float(w.detach().abs().max()) if w.numel() else 10 * atol, 10 * rtol
        if g is None or not close_to(g, w, atol, rtol):
            wrong.append(n)
            where[n] = _gradient_difference(n, g, w, atol, rtol)
    return reached, wrong, where


def _gradient_difference(name: str, mine, theirs: torch.Tensor, atol: float, rtol: float) -> str:
    """Where the learner's gradient of `name` differs from the reference's: how many entries, and how many of them
    are 0 in the learner's (a part the gradient never reaches) -- or the rows, when they are whole rows."""
    if mine is None:
        return f"`{name}` gets no gradient"
    theirs = theirs.to(mine.dtype)
    off = ~torch.isclose(mine, theirs, atol=atol, rtol=rtol)
    zero = off & (mine == 0)
    said = f"{int(off.sum())} of {off.numel()} entries of `{name}`'s gradient differ"
    if int(zero.sum()) == int(off.sum()):
        said += ", yours is 0 at every one of them"
        if mine.dim() == 2 and bool((zero.any(1) == zero.all(1)).all()):
            rows = zero.all(1).nonzero().flatten().tolist()
            said += f" (row{'s' if len(rows) > 1 else ''} {', '.join(map(str, rows[:6]))}{', ...' if len(rows) > 6 else ''})"
    elif int(zero.sum()):
        said += f", yours is 0 at {int(zero.sum())} of them"
    return said


def _detached(value):
    if isinstance(value, torch.Tensor):
        return value.detach()
    if isinstance(value, (tuple, list)):
        return type(value)(_detached(v) for v in value)
    return value


