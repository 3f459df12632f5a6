"""What every exercise promises, checked the same way everywhere.

Two promises hold for every tensor exercise: the function leaves its inputs
as they were (no `x -= mean`, no `masked_fill_` on the caller's logits), and
its result keeps the inputs' dtype. Beyond them, each exercise declares its
contract once (a Contract): the dtypes it promises, which arguments carry a
batch axis (so a batch of one must work) or take extra leading axes, which
may arrive as non-contiguous views (as a caller's transpose or slice gives
them), which a gradient must reach, and a step-by-step reference. Besides
its table rows, a check then runs that grid of regimes (run_contract) on its
visible inputs against the reference, one regime at a time, and a failure
names the regime in words a learner can act on ("right in float32, wrong in
float64", "right for batch 2, wrong for batch 1"), plus the learner's line
where the first wrong value is made (trace.locate).

    got = call_keeping_inputs(chk, rms_norm, x, weight, eps)
    ...
    run_contract(chk, rms_norm, RMS_NORM)

A changed input is measured (the argument's values differ after the call
from a copy taken before it), so it is named as the bug it is; every call
through Check.call measures that, and the grid's calls also give back
torch's settings (grad mode, default dtype and device) and their modules'
requires_grad flags, naming what a call left changed."""
from __future__ import annotations

import contextlib
import inspect
import io
import math
import os
import weakref
from dataclasses import dataclass
from typing import Any, Callable

import torch

from . import trace
from ..learner_values import describe
from .framework.calling import call_giving_inputs_back, guarded_call, refuse_delegation
from .framework.check import Check, RAISE_LOCATORS, Row
from .framework.measure import close_to, reached_by_gradient, tol_for
from .learner_code import LearnerTimeout

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

@dataclass(frozen=True)
class Contract:
    """One exercise's promises. `reference(*args, **kwargs)` computes the
    right result step by step from torch built-ins (independent of tinylm);
    `cases()` gives the visible check's own inputs, [(label, args, kwargs)],
    built from its default parameters (never a hidden test's), the first of
    which the regimes start from; `names` names the positional arguments.

    batch: arguments whose axis 0 is the batch (a batch of one must work);
    leading: arguments that take extra leading axes, together; dtypes: the
    dtypes besides float32 the exercise promises (floating arguments are cast,
    the result must have the new dtype, or `result_dtype(dtype)`); cast: the
    arguments cast (default every floating tensor); views: arguments also
    passed as non-contiguous views; grad: arguments a gradient must reach
    from the result (a single tensor: the grader's recheck measures that
    one in the learner's process);
    same(got, want) -> bool: the comparison (default: same dtype and shape,
    close within the dtype's tolerance)."""
    exercise: str
    reference: Callable
    cases: Callable[[], list]
    names: tuple[str, ...]
    batch: tuple[str, ...] = ()
    leading: tuple[str, ...] = ()
    dtypes: tuple = (torch.float64, torch.bfloat16)
    cast: tuple[str, ...] | None = None
    views: tuple[str, ...] = ()
    grad: tuple[str, ...] = ()
    same: Callable[[Any, Any], bool] | None = None
    result_dtype: Callable[[torch.dtype], torch.dtype] | None = None
    tolerance: Callable[[torch.dtype], tuple[float, float]] | None = None
    # (argument, another value[, fit]): each number argument at another value, one at a time; the value may be a
    # function of the visible arguments, and fit(args) -> args makes the other inputs suit it (a step at the end
    # of the schedule for min_lr). Every number argument is varied here, over the cases, or named in `fixed`.
    params: tuple = ()
    fixed: tuple = ()    # (argument, why it keeps its value): a number argument deliberately never varied
    locate: bool = True  # False where the reference's steps are not the learner's (a sampler judged on a sure draw)
    numbers: bool = False  # the answer is Python numbers: locate by the numbers each line binds (trace.record_lines)
    shift: tuple[str, ...] = ()  # arguments a softmax reads: + 1000 (exp overflows float32; softmax(x + c) = softmax(x))
    scale: tuple[str, ...] = ()  # arguments a softmax reads: × 200 (gaps of hundreds: exp underflows far below the max)
    large: tuple[str, ...] = ()  # arguments an activation reads: × 200 (pre-activations in the hundreds, where exp overflows)
    ones: tuple = ()     # (argument, axis, words): that axis at size 1, e.g. ("x", 1, "one kv head (MQA)")
    edges: tuple = ()    # Edge: inputs at a bound of the function's domain (a step past the schedule, no scored target)
    generator: str | None = None  # the argument taking a torch.Generator: the result follows it; without one, it varies
    draws: Callable[[dict], dict] | None = None  # the visible inputs made random, for the generator regimes
    # the inputs on another device (cuda, or the meta device without a GPU), where every input can move: False for
    # an exercise whose inputs the course keeps on the CPU (corpus bytes), where a CPU-only answer is right
    elsewhere: bool = True

    def __post_init__(self):
        if self.names and self.locate and not self.numbers:
            RAISE_LOCATORS.setdefault(self.exercise, lambda fn, args, kwargs: locate_call(
                fn, self.reference, args, kwargs, self.exercise))


@dataclass(frozen=True)
class Edge:
    """A regime at a bound of the exercise's domain, in the exercise's own
    terms: `transform(args) -> args` (argument name -> value) makes the
    inputs; `words` says what they are, for "right ..., wrong {words}"."""
    name: str
    words: str
    transform: Callable[[dict], dict]


@dataclass
class Regime:
    name: str                          # the row's name: "float64", "batch of 1", ...
    passes: str                        # what is right: "in float32", "for batch 2"
    fails: str                         # the regime: "in float64", "for batch 1"
    transform: Callable[[dict], dict]  # argument name -> value, changed for this regime
    dtype: torch.dtype | None = None   # the dtype the result must have, when the regime sets one
    grad: tuple[str, ...] = ()         # arguments a gradient must reach in this regime
    device: str | None = None
    param: str | None = None           # the parameter this regime changes
    judge: Callable | None = None      # a property regime: judge(fn, contract, args) -> failure dict or None (no reference)


def defaults(check: Callable) -> dict:
    """A check function's default keyword parameters: its visible call."""
    return {n: p.default for n, p in inspect.signature(check).parameters.items() if p.default is not inspect.Parameter.empty}


def _floating(v) -> bool:
    return isinstance(v, torch.Tensor) and v.is_floating_point()


def noncontiguous(t: torch.Tensor) -> torch.Tensor:
    """The same values as a non-contiguous view: a transposed copy turned
    back (as a caller's transpose(1, 2) gives), or every other element of a
    wider tensor for one axis (as a caller's slice gives)."""
    if t.dim() >= 2 and t.shape[-1] > 1 and t.shape[-2] > 1:
        return t.transpose(-1, -2).contiguous().transpose(-1, -2)
    wide = torch.stack((t, t), dim=-1)
    return wide[..., 0]


def _movable(value) -> bool:
    """An argument that goes to another device whole: a tensor, or a plain value holding none."""
    return value is None or isinstance(value, (torch.Tensor, bool, int, float, str, torch.dtype))


def _batch_size(args: dict, names: tuple[str, ...]) -> int | None:
    sizes = {int(args[n].shape[0]) for n in names if isinstance(args.get(n), torch.Tensor) and args[n].dim()}
    return sizes.pop() if len(sizes) == 1 else None


def regimes(contract: Contract, args: dict) -> list[Regime]:
    """The grid for these visible inputs, in the order they are tried."""
    cast = contract.cast if contract.cast is not None else tuple(n for n, v in args.items() if _floating(v))
    base_dtype = next((args[n].dtype for n in cast if _floating(args.get(n))), torch.float32)
    grid: list[Regime] = []
    batch = _batch_size(args, contract.batch)
    if batch is not None and batch > 1:
        grid.append(Regime("batch of 1", f"for batch {batch}", "for batch 1",
                           lambda a: {**a, **{n: a[n][:1].clone() for n in contract.batch if isinstance(a.get(n), torch.Tensor)}}))
    for name in contract.views:
        if isinstance(args.get(name), torch.Tensor) and args[name].numel() > 1:
            grid.append(Regime(f"non-contiguous {name}", f"for a contiguous `{name}`",
                               f"for `{name}` as a non-contiguous view (what a caller's transpose or slice passes; "
                               f"`.view` fails on it where `.reshape` works)",
                               lambda a, name=name: {**a, name: noncontiguous(a[name])}))
    if contract.leading:
        shapes = ", ".join(f"{n} {tuple(args[n].shape)}" for n in contract.leading if isinstance(args.get(n), torch.Tensor))
        grid.append(Regime("extra leading axis", f"for {shapes}", "with one more leading axis in front",
                           lambda a: {**a, **{n: torch.stack((a[n], a[n].flip(0))) for n in contract.leading
                                              if isinstance(a.get(n), torch.Tensor)}}))
    for dtype in contract.dtypes:
        if dtype == base_dtype:
            continue
        want = contract.result_dtype(dtype) if contract.result_dtype else dtype
        grid.append(Regime(str(dtype).removeprefix("torch."), f"in {str(base_dtype).removeprefix('torch.')}",
                           f"in {str(dtype).removeprefix('torch.')}",
                           lambda a, dtype=dtype: {**a, **{n: a[n].to(dtype) for n in cast if _floating(a.get(n))}},
                           dtype=want))
    for name, value, *fit in contract.params:
        if name not in args or isinstance(args[name], torch.Tensor):
            continue
        value = value(args) if callable(value) else value
        if args[name] == value:
            continue
        suit = fit[0] if fit else (lambda a: a)
        grid.append(Regime(f"{name}={value!r}", f"for {name}={args[name]!r}", f"for {name}={value!r}",
                           lambda a, name=name, value=value, suit=suit: suit({**a, name: value}),
                           param=None if fit else name))  # "has no effect" compares with the unchanged inputs
    grid += _edge_regimes(contract, args, base_dtype)
    grads = tuple(n for n in contract.grad if _floating(args.get(n)))
    if grads:
        grid.append(Regime("gradient reaches " + ", ".join(grads), "for the values", "with gradients",
                           lambda a: {**a, **{n: a[n].detach().clone().requires_grad_(True) for n in grads}}, grad=grads))
    # Only where every input can move (a module, a function or a generator handed in keeps its own tensors on the
    # CPU), and only for inputs the course itself puts on the model's device.
    movable = contract.elsewhere and all(_movable(v) for v in args.values()) and \
        any(isinstance(v, torch.Tensor) for v in args.values())
    if movable and on_a_gpu():
        grid.append(Regime("cuda", "on the CPU", "on cuda",
                           lambda a: {k: v.cuda() if isinstance(v, torch.Tensor) else v for k, v in a.items()},
                           device="cuda"))
    elif movable:  # without a GPU, the meta device shows a tensor left on the CPU
        grid.append(Regime("inputs on another device", "on the CPU", f"with the inputs on another device {META_WORDS}",
                           lambda a: a, judge=_stays_on_device))
    return grid


def on_a_gpu() -> bool:
    """Whether the inputs on another device are on cuda (a GPU the course may use) rather than the meta device."""
    return torch.cuda.is_available() and os.environ.get("TINYLM_DEVICE", "").lower() != "cpu"


def elsewhere_regime() -> str:
    """The name of the regime that moves every input off the CPU, on this machine."""
    return "cuda" if on_a_gpu() else "inputs on another device"


# What large values do to a softmax, said with the regimes that make them.
SHIFT_WORDS = ("(every value above 88, where exp overflows float32: softmax(x + c) = softmax(x), and torch's softmax, "
               "log_softmax and cross_entropy subtract the max first)")
LARGE_WORDS = ("(values in the hundreds, as a trained network's activations can reach: exp overflows float32 above 88, "
               "so a formula must never compute exp of a large positive number)")
SCALE_WORDS = ("(gaps of hundreds between values: exp overflows float32 above 88, and a softmax underflows to exactly 0 "
               "far below the max, so log(softmax(x)) is -inf where log_softmax(x) stays finite)")


def _edge_regimes(contract: Contract, args: dict, base_dtype) -> list[Regime]:
    """The regimes at the bounds of the exercise's domain: large values, an
    axis of size 1, the edges it names, and its generator's promises."""
    grid: list[Regime] = []
    for kind, names, change, words in (("+ 1000", contract.shift, lambda t: t + 1000, SHIFT_WORDS),
                                       ("× 200", contract.scale, lambda t: t * 200, SCALE_WORDS),
                                       ("× 200", contract.large, lambda t: t * 200, LARGE_WORDS)):
        names = tuple(n for n in names if _floating(args.get(n)))
        if names:
            shown = " and ".join(f"`{n}`" for n in names)
            grid.append(Regime(f"{', '.join(names)} {kind}", f"for {shown} of ordinary size", f"for {shown} {kind} {words}",
                               lambda a, names=names, change=change: {**a, **{n: change(a[n]) for n in names}}))
    for name, axis, words in contract.ones:
        value = args.get(name)
        if isinstance(value, torch.Tensor) and value.dim() > abs(axis) - (axis < 0) and value.shape[axis] > 1:
            grid.append(Regime(words, f"for `{name}` with {value.shape[axis]} along axis {axis}", f"for {words}",
                               lambda a, name=name, axis=axis: {**a, name: a[name].narrow(axis, 0, 1).clone()}))
    for edge in contract.edges:
        grid.append(Regime(edge.name, "for the visible inputs", edge.words, edge.transform))
    if contract.generator and contract.generator in contract.names:
        grid.append(Regime("same generator seed, same result", "without a generator", "with generators seeded alike",
                           lambda a: a, judge=_follows_generator))
        grid.append(Regime("without a generator, calls differ", "with a generator",
                           "without a generator (generator=None, two calls)", lambda a: a, judge=_draws_anew))
    return grid


META_WORDS = ("(the meta device stands in for a GPU: it has shapes and no numbers, and a tensor left on the CPU "
              "shows there as on a GPU; every tensor the function makes must be made on, or moved to, its inputs' "
              "device: device=t.device, or .to(t.device), for an input t)")


def _stays_on_device(fn, contract: Contract, args: dict) -> dict | None:
    """The learner's function on the inputs moved to the meta device: a
    failure when it raises for mixing devices (an operation the meta
    device cannot run, such as .item(), is not the learner's mistake), or
    when its result comes back on the CPU where the reference's stays on
    the inputs' device (the meta device lets some CPU tensors through, a
    CPU table indexed by meta ids among them, where a GPU raises)."""
    if getattr(fn, "recheck_trace", None) is not None:
        return None  # the grader's recheck runs the learner's process on real tensors only
    moved = {k: v.detach().to("meta") if isinstance(v, torch.Tensor) else v for k, v in args.items()}
    got, error = _call(fn, contract, _positional(contract, moved), {})
    text = str(error) if error is not None else ""
    if error is None:
        try:
            want = contract.reference(*_positional(contract, moved))
        except Exception:  # noqa: BLE001: a reference the meta device cannot run says nothing
            return None
        stray = [t.device for t in trace.tensors_in(got) if not t.is_meta]
        if not stray or not all(t.is_meta for t in trace.tensors_in(want)):
            return None
        return {"note": f"result on {stray[0]}", "bugs": [], "facts": [
            f"your result is on {stray[0]} for inputs on the meta device (measured; the reference's result stays on "
            "the inputs' device): a tensor your function makes without device= is on the CPU, and on a GPU mixing it "
            "with the inputs raises"]}
    if not ("expected device" in text or "same device" in text):
        return None
    return {"note": "raised for another device", "error": error, "bugs": [], "facts": [
        "your function combines a tensor on the CPU with inputs on another device (measured: on the "
        f"meta device it raises: {text.splitlines()[0][:160]})"]}


def _random_args(fn, contract: Contract, args: dict, generator) -> tuple:
    """The learner's result on the visible inputs made random, with `generator`."""
    changed = contract.draws(dict(args)) if contract.draws else dict(args)
    changed[contract.generator] = generator
    got, error = _call(fn, contract, _positional(contract, fresh(changed)), {})
    return got, error


def _follows_generator(fn, contract: Contract, args: dict) -> dict | None:
    """Two generators seeded alike give the same result; other seeds another (at least one of three)."""
    runs = [_random_args(fn, contract, args, torch.Generator().manual_seed(s)) for s in (7, 7, 8, 9, 10)]
    errors = [e for _, e in runs if e is not None]
    if errors:
        return {"note": f"raised {type(errors[0]).__name__}", "facts": [], "bugs": [], "error": errors[0]}
    results = [r for r, _ in runs]
    same = lambda a, b: _same(contract, a, b, None)  # noqa: E731
    if not same(results[0], results[1]):
        return {"note": "same seed, another result", "facts": [], "bugs": [
            f"two calls with generators seeded alike give different results (measured): something random in your "
            f"{contract.exercise} does not come from `{contract.generator}`; pass generator={contract.generator} to "
            "every random call (torch.randint, torch.multinomial, ...)"]}
    if all(same(results[0], r) for r in results[2:]):
        return {"note": "the generator changes nothing", "facts": [], "bugs": [
            f"`{contract.generator}` has no effect (measured: generators seeded 7, 8, 9 and 10 give the same result): "
            f"draw with generator={contract.generator}, not with a generator of your own"]}
    return None


def _draws_anew(fn, contract: Contract, args: dict) -> dict | None:
    """Without a generator, repeated calls draw from torch's global generator: they differ."""
    if getattr(fn, "recheck_trace", None) is not None:
        return None  # the global generator lives in the learner's process, which the recheck restarts
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(1234)
        runs = [_random_args(fn, contract, args, None) for _ in range(3)]
    errors = [e for _, e in runs if e is not None]
    if errors:
        return {"note": f"raised {type(errors[0]).__name__}", "facts": [], "bugs": [], "error": errors[0]}
    results = [r for r, _ in runs]
    if all(_same(contract, results[0], r, None) for r in results[1:]):
        return {"note": "every call the same", "facts": [], "bugs": [
            f"without a generator your {contract.exercise} gives the same result at every call (measured: three calls "
            f"with {contract.generator}=None): a fixed seed or a freshly seeded generator stands in when none is "
            f"passed, so every such call repeats the same draw; when {contract.generator} is None, draw from torch's "
            f"global generator (pass generator=None on to torch)"]}
    return None


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def unvaried_numbers(contract: Contract) -> list[str]:
    """The number arguments of the exercise's visible call that no regime
    varies: not a parameter regime, the same in every case, not in `fixed`.
    A mistake that ignores such an argument (a hard-coded eps, a fixed group
    size) passes every check, so none may be left (tests/checks hold it)."""
    cases = [_split(contract, case)[1] for case in contract.cases()]
    if not cases:
        return []
    varied = {p[0] for p in contract.params} | {name for name, _ in contract.fixed}
    return [name for name, value in cases[0].items()
            if _is_number(value) and name not in varied and all(c.get(name) == value for c in cases)]


def _split(contract: Contract, case) -> tuple[str, dict, dict]:
    label, args, kwargs = case
    named = dict(zip(contract.names, args))
    return label, named, dict(kwargs)


def _positional(contract: Contract, named: dict) -> tuple:
    return tuple(named[n] for n in contract.names if n in named)


def _same(contract: Contract, got, want, dtype: torch.dtype | None) -> bool:
    if contract.same is not None:
        return bool(contract.same(got, want))
    if isinstance(want, (tuple, list)):
        return (isinstance(got, (tuple, list)) and len(got) == len(want)
                and all(_same(contract, g, w, dtype) for g, w in zip(got, want)))
    if isinstance(want, float) and _is_number(got):  # the same formula written another way rounds otherwise
        return math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-12)
    if not isinstance(want, torch.Tensor):
        return got == want
    if not isinstance(got, torch.Tensor) or got.dtype != want.dtype or got.device != want.device:
        return False
    atol, rtol = (contract.tolerance or tol_for)(want.dtype)
    return close_to(got, want, atol, rtol)


def _result_dtype(value) -> torch.dtype | None:
    tensors = trace.tensors_in(value)
    return tensors[0].dtype if tensors else None


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
        if mixed:
            chk.diagnose(mixed)
    if not chk.passed or not callable(fn) or not _declares_regimes(contract):
        return
    apply_outcome(chk, remembered(fn, contract.exercise, lambda: _run_grid(chk, fn, contract, visible())))


def _rows_mixed(fn, contract: Contract, cases: list) -> str | None:
    """For a failing exercise whose rows are independent (contract.batch):
    when each row of the visible batch, given alone, gives the reference's
    result, and the whole batch does not, the rows are mixed."""
    if not cases or contract.same is not None:
        return None
    _, named, kwargs = _split(contract, cases[0])
    size = _batch_size(named, contract.batch)
    if size is None or size < 2:
        return None
    try:
        want = contract.reference(*_positional(contract, named), **kwargs)
    except Exception:  # noqa: BLE001: a case the reference cannot run says nothing
        return None
    got, error = _call(fn, contract, _positional(contract, fresh(named)), kwargs)
    if error is not None or _same(contract, got, want, None):
        return None
    # A row alone: as a batch of one, or, where the exercise takes any leading axes, without the batch axis.
    forms = [lambda t, b: t[b:b + 1].clone()] + ([lambda t, b: t[b].clone()] if contract.leading else [])
    for form in forms:
        if all(_row_alone_right(fn, contract, named, kwargs, form, b) for b in range(size)):
            return (f"the rows of a batch are mixed (measured: each of the {size} rows given alone gives the right "
                    f"result, the batch of {size} does not): an operation runs across the batch axis (axis 0), e.g. a "
                    "sum, cumsum, softmax or sort without dim=-1, or an index that treats the batch as one row")
    return None


def _row_alone_right(fn, contract: Contract, named: dict, kwargs: dict, form, b: int) -> bool:
    row = {**named, **{n: form(named[n], b) for n in contract.batch if isinstance(named.get(n), torch.Tensor)}}
    try:
        want = contract.reference(*_positional(contract, row), **kwargs)
    except Exception:  # noqa: BLE001: a form the reference cannot run says nothing
        return False
    got, error = _call(fn, contract, _positional(contract, fresh(row)), kwargs)
    return error is None and _same(contract, got, want, None)


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


def _call(fn, contract: Contract, args: tuple, kwargs: dict, left: list[str] | None = None,
          written: list[str] | None = None, named: list | None = None):
    """(result, error) of one learner call in a regime; printing silenced;
    `left` collects the torch settings it left changed (given back);
    `written` the names among `named` ((name, value) of the call's
    arguments) that it wrote into (their values given back, its result kept)."""
    with refuse_delegation(contract.exercise, fn), contextlib.redirect_stdout(io.StringIO()):
        try:
            return call_giving_inputs_back(named or [], lambda: guarded_call(fn, args, kwargs, left), written), None
        except (Exception, LearnerTimeout) as err:  # noqa: BLE001: a regime that raises is a finding
            if type(err).__name__ == "Delegation":
                raise
            return None, err


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
    label, named, kwargs = _split(contract, cases[0])
    rows: list[dict] = []
    base = None
    if contract.params:
        base, _ = _call(fn, contract, _positional(contract, named), kwargs, named=list(named.items()))
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
        found.update(name=regime.name, changed=[], located=trace.locate_error(error) if error is not None else None,
                     text=f"right {regime.passes}, {'raises' if error is not None else 'wrong'} {regime.fails}")
        return found
    try:
        changed_args = regime.transform(dict(named))
        args = _positional(contract, changed_args)
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
        got, error = _call(fn, contract, args, kwargs, left, changed, tensors)
    found = _judge(contract, regime, got, want, error, args, changed_args, base)
    if found is None and left:
        found = {"note": "settings left changed", "facts": [], "bugs": []}
    if found is None:
        return None
    found["bugs"] = [*found["bugs"], *left]
    found["name"] = regime.name
    found["text"] = f"right {regime.passes}, {'raises' if error is not None else 'wrong'} {regime.fails}"
    found["changed"] = changed
    found["located"] = _locate_regime(fn, contract, regime, args, kwargs, error, got, want)
    return found


def _judge(contract: Contract, regime: Regime, got, want, error, args, named, base=None) -> dict | None:
    """None when the regime passes, else {"note", "facts", "bugs"}; base:
    the learner's result on the unchanged inputs (for a parameter regime)."""
    if error is not None:
        return {"note": f"raised {type(error).__name__}", "facts": [], "bugs": [], "error": error}
    if regime.grad:
        values_ok = _same(contract, _detached(got), _detached(want), regime.dtype)
        local = _gradients(got, want, named, regime.grad)
        if local is None:  # the grader's recheck: the learner's process measured the reach
            reached, wrong = _reached(got, named, regime.grad), []
        else:
            reached, wrong = local
        unreached = [n for n in regime.grad if n not in reached]
        wrong = [] if unreached or not values_ok else wrong
        if wrong:
            what = " and ".join(f"`{n}`" for n in wrong)
            return {"note": f"gradient of {', '.join(wrong)} differs", "facts": [
                f"the gradient your result gives {what} differs from the reference's (measured with a backward pass): "
                "a branch of the computation is cut from autograd (`.detach()`, `.data`, `.item()`, "
                "torch.no_grad()) while its values stay right"], "bugs": []}
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
    if _same(contract, got, want, regime.dtype):
        return None
    facts, bugs = [], []
    got_dtype, want_dtype = _result_dtype(got), _result_dtype(want)
    if regime.dtype is not None and got_dtype is not None and want_dtype is not None and got_dtype != want_dtype:
        bugs.append(f"your result is {str(got_dtype).removeprefix('torch.')} for "
                    f"{str(regime.dtype).removeprefix('torch.')} inputs: it must keep the inputs' dtype (cast back "
                    "with .to(x.dtype) where your code changes it)")
        return {"note": f"result {got_dtype} != {want_dtype}", "facts": facts, "bugs": bugs}
    if regime.device and isinstance(got, torch.Tensor) and got.device.type != regime.device:
        bugs.append(f"your result is on {got.device} for {regime.device} inputs: create every new tensor on the "
                    "inputs' device (device=x.device)")
        return {"note": f"result on {got.device}", "facts": facts, "bugs": bugs}
    if regime.param and base is not None and _same(contract, got, base, regime.dtype):
        bugs.append(f"`{regime.param}` has no effect on your {contract.exercise} (measured: {regime.passes.removeprefix('for ')} "
                    f"and {regime.fails.removeprefix('for ')} give the same result): use the argument, not a fixed value")
        return {"note": f"{regime.param} ignored", "facts": facts, "bugs": bugs}
    g, w = trace.tensors_in(got), trace.tensors_in(want)
    bad, right = _non_finite(got), _non_finite(want)
    if bad and not right:
        facts.append(f"{regime.fails.split(' (')[0]} your result holds {bad} inf or nan value{'s' if bad > 1 else ''} "
                     "where the reference's is finite")
    if g and w and tuple(g[0].shape) != tuple(w[0].shape):
        facts.append(f"{regime.fails} your result has shape {tuple(g[0].shape)}, expected {tuple(w[0].shape)}")
        return {"note": f"shape {tuple(g[0].shape)} != {tuple(w[0].shape)}", "facts": facts, "bugs": bugs}
    if not g and w:
        facts.append(f"{regime.fails} your function returned {describe(got)}")
    return {"note": "values differ", "facts": facts, "bugs": bugs}


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


def _gradients(got, want, named: dict, names: tuple[str, ...]) -> tuple[list[str], list[str]] | None:
    """(the arguments a backward pass from the learner's result reaches, those
    whose gradient, of a fixed random weighting of the result, differs from
    the reference's), from one backward pass each; None in the grader's
    recheck, whose results carry no graph (the reach comes measured)."""
    if not isinstance(got, torch.Tensor) or getattr(got, "recheck_gradient_reaches", None) is not None:
        return None
    if not got.requires_grad:
        return [], []
    leaves = [named[n] for n in names]
    weights = torch.randn(got.shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64).to(got.device)
    try:
        mine = torch.autograd.grad((got.double() * weights).sum(), leaves, allow_unused=True)
    except RuntimeError:
        return [], []
    reached = [n for n, g in zip(names, mine) if g is not None and bool(g.abs().sum() > 0)]
    if not isinstance(want, torch.Tensor) or want.shape != got.shape or not want.requires_grad:
        return reached, []
    try:
        theirs = torch.autograd.grad((want.double() * weights.to(want.device)).sum(), leaves, allow_unused=True)
    except RuntimeError:
        return reached, []
    wrong = []
    for n, g, w in zip(names, mine, theirs):
        atol, rtol = tol_for(named[n].dtype)
        if w is not None and (g is None or not close_to(g, w, 10 * atol, 10 * rtol)):
            wrong.append(n)
    return reached, wrong


def _detached(value):
    if isinstance(value, torch.Tensor):
        return value.detach()
    if isinstance(value, (tuple, list)):
        return type(value)(_detached(v) for v in value)
    return value


def _locate_regime(fn, contract: Contract, regime: Regime, args, kwargs, error, got, want):
    """The learner's line for a failing regime; None when it cannot be told."""
    if not contract.locate:
        return None
    try:
        if contract.numbers:
            return _locate_number_calls(fn, contract, [(args, kwargs)])
        with torch.enable_grad() if regime.grad else contextlib.nullcontext():
            mine, theirs = traces(fn, contract, args, kwargs)
        if mine.error is not None or error is not None:
            return trace.locate_raise(mine, theirs) if mine.error is not None else trace.locate_error(error)
        if regime.grad:
            return trace.locate_grad_cut(mine)
        found = trace.locate(mine, theirs)
        if found is None and regime.dtype is not None:
            found = trace.locate_dtype(mine, regime.dtype)
        return found
    except Exception:  # noqa: BLE001: the tracer's own failure is never the learner's
        return None


def fresh(value):
    """A copy of the tensors in `value` (same strides, same requires_grad), so
    the learner's side cannot change what the reference's side reads."""
    if isinstance(value, torch.Tensor):
        copy = value.detach().clone()
        return copy.requires_grad_(True) if value.requires_grad and copy.is_floating_point() else copy
    if isinstance(value, tuple):
        return tuple(fresh(v) for v in value)
    if isinstance(value, list):
        return [fresh(v) for v in value]
    if isinstance(value, dict):
        return {k: fresh(v) for k, v in value.items()}
    return value


def traces(fn, contract: Contract, args: tuple, kwargs: dict):
    """(the learner's trace, the reference's) on copies of the same inputs."""
    with refuse_delegation(contract.exercise, fn), contextlib.redirect_stdout(io.StringIO()):
        theirs = trace.record(contract.reference, fresh(args), fresh(kwargs), learner=False)
        mine = trace.record_learner(fn, fresh(args), fresh(kwargs), call=lambda *a, **k: guarded_call(fn, a, k))
    return mine, theirs


def locate_call(fn, reference: Callable, args: tuple, kwargs: dict | None = None, exercise: str = ""):
    """The learner's first wrong line when fn(*args) and reference(*args) differ (None if it cannot be told)."""
    kwargs = kwargs or {}
    mine, theirs = traces(fn, Contract(exercise, reference, list, ()), args, kwargs)
    if theirs.error is not None:
        return None
    return trace.locate_raise(mine, theirs) if mine.error is not None else trace.locate(mine, theirs)


def locate_cases(fn, contract: Contract, cases: list):
    """The learner's first wrong line on the first visible case that shows one."""
    if contract.numbers:
        return _locate_numbers(fn, contract, cases)
    for case in cases:
        _, named, kwargs = _split(contract, case)
        args = _positional(contract, named)
        mine, theirs = traces(fn, contract, args, kwargs)
        if theirs.error is not None:
            continue
        found = trace.locate_raise(mine, theirs) if mine.error is not None else trace.locate(mine, theirs)
        if found is not None:
            return found
    return None


def _locate_numbers(fn, contract: Contract, cases: list):
    """The first line binding a number the reference never has, over every visible case."""
    calls = []
    for case in cases:
        _, named, kwargs = _split(contract, case)
        calls.append((_positional(contract, named), kwargs))
    return _locate_number_calls(fn, contract, calls)


def _locate_number_calls(fn, contract: Contract, calls: list):
    """The first line binding a number the reference never has, over the (args, kwargs) calls."""
    if getattr(fn, "recheck_trace", None) is not None:
        return None  # the grader's recheck traces tensors in the learner's process, not Python numbers
    mine, theirs = [], []
    for args, kwargs in calls:
        with refuse_delegation(contract.exercise, fn), contextlib.redirect_stdout(io.StringIO()):
            theirs.append(trace.record_lines(contract.reference, args, kwargs, learner=False))
            mine.append(trace.record_lines(lambda *a, **k: guarded_call(fn, a, k), args, kwargs, subject=fn))
    errors = [m.error for m in mine if m.error is not None]
    if errors:
        return trace.locate_error(errors[0])
    return trace.locate_numbers(mine, theirs)
