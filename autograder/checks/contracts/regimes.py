"""The contract an exercise declares (Contract, Edge) and the regimes it
implies (regimes): dtypes, a batch of one, extra leading axes,
non-contiguous views, large values, the meta device, a caller's generator
and the modes a function must give back."""
from __future__ import annotations

import inspect
import os
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch.overrides import TorchFunctionMode

from .. import trace
from ..framework.check import RAISE_LOCATORS, REFERENCES
from .calls import call_in_regime, positional_args, same_result, split_case
from .locate import locate_call
from .calls import is_number
from ..framework.calling import fresh, random_states_watched


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
    # the result's dtype is the exercise's, not the caller's default: under torch.set_default_dtype(torch.float64)
    # the result has the dtype it has under float32 (an exercise that makes its tensors from sizes: RoPE's tables)
    default_dtype: bool = False

    def __post_init__(self):
        if self.names:
            REFERENCES.setdefault(self.exercise, self.reference)
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
    # arguments whose rows a softmax reads whole: where this regime fails, they are tried again with every row
    # shifted to one maximum (which the softmax of each row ignores), to tell rows far apart from large values
    rows_apart: tuple[str, ...] = ()


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


def batch_size_of(args: dict, names: tuple[str, ...]) -> int | None:
    sizes = {int(args[n].shape[0]) for n in names if isinstance(args.get(n), torch.Tensor) and args[n].dim()}
    return sizes.pop() if len(sizes) == 1 else None


def regimes(contract: Contract, args: dict) -> list[Regime]:
    """The grid for these visible inputs, in the order they are tried."""
    cast = contract.cast if contract.cast is not None else tuple(n for n, v in args.items() if _floating(v))
    base_dtype = next((args[n].dtype for n in cast if _floating(args.get(n))), torch.float32)
    grid: list[Regime] = []
    batch = batch_size_of(args, contract.batch)
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
                           lambda a: a, judge=stays_on_device))
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
                               lambda a, names=names, change=change: {**a, **{n: change(a[n]) for n in names}},
                               rows_apart=tuple(n for n in names if n in contract.shift) if words is SCALE_WORDS else ()))
    for name, axis, words in contract.ones:
        value = args.get(name)
        if isinstance(value, torch.Tensor) and value.dim() > abs(axis) - (axis < 0) and value.shape[axis] > 1:
            grid.append(Regime(words, f"for `{name}` with {value.shape[axis]} along axis {axis}", f"for {words}",
                               lambda a, name=name, axis=axis: {**a, name: a[name].narrow(axis, 0, 1).clone()}))
    for edge in contract.edges:
        grid.append(Regime(edge.name, "for the visible inputs", edge.words, edge.transform))
    if contract.default_dtype:
        grid.append(Regime("default dtype float64", "under the float32 default dtype",
                           "under a caller's torch.set_default_dtype(torch.float64)", lambda a: a,
                           judge=_default_dtype_ignored))
    if contract.generator and contract.generator in contract.names:
        grid.append(Regime("same generator seed, same result", "without a generator", "with generators seeded alike",
                           lambda a: a, judge=_follows_generator))
        grid.append(Regime("without a generator, calls differ", "with a generator",
                           "without a generator (generator=None, two calls)", lambda a: a, judge=_draws_anew))
        grid.append(Regime("draws from the caller's generator only", "for the seeds (same seed, same result)",
                           "with a caller's generator: each call must draw on from where its stream stands, and "
                           "torch's global generator must not move",
                           lambda a: a, judge=_callers_generator_only))
    return grid


META_WORDS = ("(the meta device stands in for a GPU: it has shapes and no numbers, and a tensor left on the CPU "
              "shows there as on a GPU; every tensor the function makes must be made on, or moved to, its inputs' "
              "device: device=t.device, or .to(t.device), for an input t)")


def stays_on_device(fn, contract: Contract, args: dict) -> dict | None:
    """The learner's function on the inputs moved to the meta device: a
    failure when it raises for mixing devices (an operation the meta
    device cannot run, such as .item(), is not the learner's mistake), or
    when its result comes back on the CPU where the reference's stays on
    the inputs' device (the meta device lets some CPU tensors through, a
    CPU table indexed by meta ids among them, where a GPU raises)."""
    if getattr(fn, "recheck_trace", None) is not None:
        return None  # the grader's recheck runs the learner's process on real tensors only
    moved = {k: v.detach().to("meta") if isinstance(v, torch.Tensor) else v for k, v in args.items()}
    with _HostCopies() as copies:
        got, error = call_in_regime(fn, contract, positional_args(contract, moved), {})
    text = str(error) if error is not None else ""
    if error is not None and copies.call is not None:
        return {"note": "copied to the CPU", "error": error, "bugs": [], "facts": [
            f"your function copies a tensor from the inputs' device to the CPU (measured: with the inputs on the meta "
            f"device, your call of Tensor.{copies.call} raised: {text.splitlines()[0][:120]}): on a GPU that call "
            "copies the data to the host, and what is computed from the copy is on the CPU, where the reference "
            "makes no copy and its result stays on the inputs' device"]}
    if error is None:
        try:
            want = contract.reference(*positional_args(contract, moved))
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


class _HostCopies(TorchFunctionMode):
    """Which of the learner's own calls copied a meta tensor's data out to the
    CPU. Only the explicit moves count (.cpu(), .to(cpu), .tolist(), a copy_
    into a CPU tensor): a torch operation that needs the data on the host
    (a sync on a GPU, no error there) raises the same way on the meta
    device and is no host copy the learner wrote. While this mode handles a
    call it is off, so the calls seen are those the learner's code makes. A
    .tolist(), like .item(), is no move: it gives Python numbers, and what is
    computed from them (a row indexed by an int) may stay on the device, which
    the meta device, holding no numbers, cannot show."""
    MOVES = ("cpu", "to", "copy_")

    def __init__(self):
        super().__init__()
        self.call: str | None = None

    def __torch_function__(self, func, types, args=(), kwargs=None):
        try:
            return func(*args, **(kwargs or {}))
        except NotImplementedError as err:
            name = getattr(func, "__name__", "")
            if self.call is None and name in self.MOVES and "copy out of meta tensor" in str(err) and \
                    getattr(func, "__qualname__", "").startswith("TensorBase."):
                self.call = name
            raise


def _random_args(fn, contract: Contract, args: dict, generator) -> tuple:
    """The learner's result on the visible inputs made random, with `generator`."""
    changed = contract.draws(dict(args)) if contract.draws else dict(args)
    changed[contract.generator] = generator
    got, error = call_in_regime(fn, contract, positional_args(contract, fresh(changed)), {})
    return got, error


def _follows_generator(fn, contract: Contract, args: dict) -> dict | None:
    """Two generators seeded alike give the same result; other seeds another (at least one of three)."""
    runs = [_random_args(fn, contract, args, torch.Generator().manual_seed(s)) for s in (7, 7, 8, 9, 10)]
    errors = [e for _, e in runs if e is not None]
    if errors:
        return {"note": f"raised {type(errors[0]).__name__}", "facts": [], "bugs": [], "error": errors[0]}
    results = [r for r, _ in runs]
    same = lambda a, b: same_result(contract, a, b, None)  # noqa: E731
    if not same(results[0], results[1]):
        return {"note": "same seed, another result", "facts": [], "bugs": [
            f"two calls with generators seeded alike give different results (measured): something random in your "
            f"{contract.exercise} does not come from `{contract.generator}`; pass generator={contract.generator} to "
            "every random call (torch.randint, torch.multinomial, ...)"]}
    if all(same(results[0], r) for r in results[2:]):
        # In the grader's recheck every call starts from the same global random state: draws that ignore the
        # generator come out alike there too.
        unused = ("this rerun starts every call from the same global random state"
                  if getattr(fn, "recheck_trace", None) is not None else "draws from a generator of your own, or none")
        return {"note": "the generator changes nothing", "facts": [], "bugs": [
            f"`{contract.generator}` has no effect (measured: generators seeded 7, 8, 9 and 10 give the same result): "
            f"the generator is not used ({unused}), or it is seeded again inside; draw with "
            f"generator={contract.generator}, the generator as it comes"]}
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
    if all(same_result(contract, results[0], r, None) for r in results[1:]):
        return {"note": "every call the same", "facts": [], "bugs": [
            f"without a generator your {contract.exercise} gives the same result at every call (measured: three calls "
            f"with {contract.generator}=None): a fixed seed or a freshly seeded generator stands in when none is "
            f"passed, so every such call repeats the same draw; when {contract.generator} is None, draw from torch's "
            f"global generator (pass generator=None on to torch)"]}
    return None


def _callers_generator_only(fn, contract: Contract, args: dict) -> dict | None:
    """Given a caller's generator, the draws come from it alone: its state
    moves during the call, and torch's global generator's does not (so a
    caller's own seeded stream, the dropout of a training run, goes on as if
    the call never ran). The states are only read; the global one is given
    back after the probe."""
    if getattr(fn, "recheck_trace", None) is not None:
        return None  # the learner's process holds both states, and the recheck sends it a copy of the generator
    generator = torch.Generator().manual_seed(7)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(1234)
        with random_states_watched(generator) as seen:
            first, error = _random_args(fn, contract, args, generator)
        after_first = generator.get_state()
        again, _ = _random_args(fn, contract, args, generator) if error is None else (None, None)
    if error is not None:
        return {"note": f"raised {type(error).__name__}", "facts": [], "bugs": [], "error": error}
    name, what = contract.generator, contract.exercise
    bugs = []
    if seen["global"]:
        bugs.append(f"given a generator, your {what} still changes the state of torch's global generator (measured: "
                    f"torch.get_rng_state() differs before and after one call with {name}=a seeded torch.Generator): "
                    "the caller's own random stream (a seeded training run's dropout, its batches) then changes with "
                    f"every call; draw only with generator={name} (a torch.manual_seed, or a random call without "
                    "generator=, changes the global state)")
    repeats = again is not None and same_result(contract, first, again, None)
    if seen["caller's"] and repeats and torch.equal(after_first, generator.get_state()):
        bugs.append(f"your {what} sets the generator it is given back to one point of its stream at every call "
                    f"(measured: two calls in a row with one `{name}` give the same result and leave it in the same "
                    f"state), so a caller drawing again gets the same draw; draw from `{name}` as it arrives (no "
                    "manual_seed or set_state of it) and leave seeding to the caller")
    if not seen["caller's"]:
        bugs.append(f"your {what} never draws from the generator it is given (measured: `{name}`.get_state() is the "
                    "same before and after the call" + ("; a second call with the same generator gives the same result"
                                                        if repeats else "") +
                    f"): pass it on, generator={name}, to every random call")
    if not bugs:
        return None
    note = ("the global generator moved" if seen["global"] else "the caller's generator did not move"
            if not seen["caller's"] else "every call restarts the generator")
    return {"note": note, "facts": [], "bugs": bugs}


def _default_dtype_ignored(fn, contract: Contract, args: dict) -> dict | None:
    """Called while the caller's default dtype is float64, the function
    returns tensors of the dtypes it returns under the float32 default. The
    default dtype reaches a result only through a floating tensor made from
    no floating tensor (a factory without dtype=, an integer tensor divided
    with `/`, torch.tensor of Python floats): the first such call on the
    result's path is the line named."""
    if getattr(fn, "recheck_trace", None) is not None:
        return None  # the default dtype is a setting of the learner's process, which this call cannot change
    usual, _ = call_in_regime(fn, contract, positional_args(contract, fresh(args)), {})
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        got, error = call_in_regime(fn, contract, positional_args(contract, fresh(args)), {})
        differs = error is None and _dtypes(got) != _dtypes(usual)
        learner = trace.record_learner(fn, positional_args(contract, fresh(args))) if differs else None
    finally:
        torch.set_default_dtype(previous)
    if error is not None:
        return {"note": f"raised {type(error).__name__}", "facts": [], "bugs": [], "error": error}
    if not differs:
        return None
    shown = lambda dtypes: ", ".join(str(d).removeprefix("torch.") for d in dtypes)  # noqa: E731
    return {"note": "the result follows the default dtype", "bugs": [], "located": trace.locate_made_in_default(learner),
            "facts": [f"with the caller's default dtype set to float64, your {contract.exercise} returns "
                      f"{shown(_dtypes(got))} where it returns {shown(_dtypes(usual))} under the float32 default "
                      "(measured): a floating tensor made from no floating tensor takes the caller's default dtype "
                      "(a factory such as torch.arange or torch.zeros without dtype=, an integer tensor divided with "
                      "`/`, torch.tensor of Python floats); give such a tensor its dtype, dtype=torch.float32"]}


def _dtypes(value) -> list:
    return [t.dtype for t in trace.tensors_in(value)]


def unvaried_numbers(contract: Contract) -> list[str]:
    """The number arguments of the exercise's visible call that no regime
    varies: not a parameter regime, the same in every case, not in `fixed`.
    A mistake that ignores such an argument (a hard-coded eps, a fixed group
    size) passes every check, so none may be left (tests/checks hold it)."""
    cases = [split_case(contract, case)[1] for case in contract.cases()]
    if not cases:
        return []
    varied = {p[0] for p in contract.params} | {name for name, _ in contract.fixed}
    return [name for name, value in cases[0].items()
            if is_number(value) and name not in varied and all(c.get(name) == value for c in cases)]


