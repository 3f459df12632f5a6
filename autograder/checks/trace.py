"""Where a wrong answer goes wrong: the first line of the learner's code
whose value the reference never computes.

Both sides run once more on the same inputs under a recorder (a torch
TorchFunctionMode) that keeps every tensor each torch call returns. A
learner's call is attributed to a line of the exercise's own code: the
innermost frame of the cell that defines the checked function (so a helper
from another cell counts for the line that called it), else the innermost
frame of any learner code (a notebook cell, or a file outside torch, tinylm
and the autograder). A call inside nn.Linear or inside tinylm counts for the
learner's line that made it. The reference's calls are all kept: its
intermediate values are what a right answer passes through.

A learner value is *matched* when some reference value equals it up to the
layout changes a reference also makes: the same dtype, the same numbers
after a permutation of the reference's axes and merging adjacent ones (so
`flatten(0, 1)` of a (B, T, V) tensor and `transpose(1, 2)` match, while a
`view` that splits an axis matches only what the reference split the same
way: `view(B, T, hd, H)` where the reference has (B, T, H, hd) does not; a
split the reference never makes, an expand before a reshape, matches the
value it merges back into in its own axis order). A
value is *good* when it is matched, when a later value computed from it is
matched (another right route to the same result; not through a value holding
nan or +inf where the reference holds none, which reaches a match by accident),
or when it was made from no tensor at all (a constant). The frontier is the set of calls the output
depends on that are not good although everything they read is.

The place, from the first call of the frontier: a call the reference makes
too, from the same values, with another result, is wrong for sure (a wrong
axis, a wrong constant), and when such calls sit on one line, that line is
the place (unless that line reads `self.` attributes and writes no number
itself: the wrong number may have been set in the module's __init__, and
nothing is said); otherwise the frontier must sit on one line (a call the reference
never makes may be another right route that a later mistake spoiled), else
nothing is said. For that call: when the
reference's call of that kind reads a different value (a step was skipped,
or a value is used in another's role, keys for values), the line that made
the learner's value (for another layout of the same value, the learner's
last reshape or transpose of it); a value the reference only reaches after a cast the
learner skipped has no line of its own, and nothing is said. When every
value is good but the output is wrong, the learner returned an earlier
step's value: the place is the function's return line.

What is said about the place: the learner's value and the reference's at
that step (shape, dtype, the axis a reduction ran over, a few statistics),
never the reference tensor itself. The recorder's own failures end in
`None` (no place), never in an error of the learner's.
"""
from __future__ import annotations

import ast
import itertools
import linecache
import math
import re
import sys
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch.overrides import TorchFunctionMode

from ..diagnosis_record import KIND_WORDS
from .learner_code import LearnerTimeout, is_learners_file, walk_traceback

# Bounds that keep a trace cheap: a check traces its small visible inputs,
# so a trace past these is a runaway loop (nothing is located then).
MAX_OPS = 4000
MAX_ELEMENTS = 4_000_000
MAX_CODE = 160  # characters of a located line kept (it is the learner's text)

# Calls that read metadata or make no new value: never a place.
_IGNORED = {"__get__", "size", "dim", "numel", "is_contiguous", "data_ptr", "element_size", "stride", "__len__",
            "__repr__", "__format__", "__bool__", "__iter__", "__contains__", "is_floating_point", "is_complex",
            "storage_offset", "get_device", "__hash__", "requires_grad_", "retain_grad", "register_hook",
            "untyped_storage", "__reduce_ex__", "__deepcopy__", "_is_view", "has_names", "__index__", "__int__",
            "__float__", "shape", "dtype", "device", "ndim", "is_cuda", "layout", "names", "grad_fn", "is_leaf",
            "requires_grad", "grad", "_version", "nbytes", "itemsize", "__array__", "__array_priority__"}
_LAYOUT = {"view", "reshape", "transpose", "permute", "flatten", "unflatten", "squeeze", "unsqueeze", "contiguous",
           "expand", "expand_as", "view_as", "reshape_as", "t", "T", "mT", "movedim", "swapaxes", "swapdims",
           "clone", "detach", "to", "float", "double", "half", "bfloat16", "type", "type_as", "cpu", "cuda"}
_INPLACE_DUNDERS = {"__setitem__", "__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__", "__ipow__",
                    "__imod__", "__iand__", "__ior__", "__ixor__", "__ilshift__", "__irshift__", "__imatmul__"}


def op_name(func) -> str:
    owner = getattr(func, "__self__", None)  # a property's getter: Tensor.data.__get__ -> "data"
    if getattr(func, "__name__", "") == "__get__" and owner is not None:
        return getattr(owner, "__name__", "__get__")
    return getattr(func, "__name__", None) or str(func)


def tensors_in(value, out: list | None = None, depth: int = 0) -> list:
    out = [] if out is None else out
    if isinstance(value, torch.Tensor):
        out.append(value)
    elif depth < 3 and isinstance(value, (list, tuple)):
        for v in value:
            tensors_in(v, out, depth + 1)
    elif depth < 3 and isinstance(value, dict):
        for v in value.values():
            tensors_in(v, out, depth + 1)
    return out


def _snapshot(t: torch.Tensor) -> torch.Tensor:
    return t.detach().to("cpu", copy=True)


@dataclass
class Op:
    """One recorded torch call."""
    index: int
    name: str
    file: str
    line: int
    function: str
    inputs: list[int]                 # producing ops of its tensor arguments (-2 - k: call input k; -1: a leaf)
    outputs: list[torch.Tensor]       # snapshots of the tensors it returned (or changed, in place)
    slots: list[int] = field(default_factory=list)  # which of the producer's outputs each input is
    kwargs: dict = field(default_factory=dict)  # its int/str/float keyword arguments (dim=..., keepdim=...)
    input_shapes: list[tuple] = field(default_factory=list)
    grad_in: bool = False             # a floating input required grad
    number_out: bool = False          # returned a Python float or a list (item, tolist)
    factory: bool = False             # read no tensor at all
    grad_out: bool = False            # a tensor it returned requires grad
    stack: tuple = ()                 # the checked code's frames it ran in, innermost first: (file, line, function, frame)
    raised: bool = False              # the call raised (the learner's error came from here)
    inside: bool = False              # made inside a library component (an nn.Module's forward, tinylm) the line called


class Recorder(TorchFunctionMode):
    """Records torch calls. learner=True keeps only calls made (directly or
    through library code) by the learner's code, attributed to its line."""

    def __init__(self, learner: bool, is_learners: Callable[[str], bool], home: frozenset = frozenset()):
        super().__init__()
        self.learner = learner
        self.is_learners = is_learners
        self.home = home               # the files of the checked function's own code
        self.ops: list[Op] = []
        self.producer: dict[int, int] = {}
        self.slot: dict[int, int] = {}
        self.alive: list = []          # every tensor seen stays alive, so an id is never reused meanwhile
        self.leaves: list[torch.Tensor] = []  # tensors read that no recorded call made (a module's weights, constants)
        self.elements = 0
        self.truncated = False
        self.failed: int | None = None  # the call that raised, when one did
        self._known: dict[str, bool] = {}
        self._frames: dict[int, int] = {}  # id(frame) -> its number; the frames are kept alive (self.alive)
        self._rewritten: set[int] = set()
        self.rewritten: set[int] = set()  # leaves that are tensors read again after recorded calls wrote into them

    def _place(self) -> tuple[tuple[str, int, str], tuple, bool] | None:
        """(the innermost frame of the checked code (else of any learner
        code) as (file, line, function), every frame of the checked code
        the call runs in, innermost first, as (file, line, function, frame
        number), whether a library component's frame lies between the call
        and the learner's line)."""
        frame = sys._getframe(3)
        first = None
        stack = []
        depth = 0
        inside = False
        while frame is not None and depth < 200:
            name = frame.f_code.co_filename
            if first is None and not inside and name.startswith(_COMPONENTS):
                inside = True
            if name in self.home:
                first = first if first is not None and first.f_code.co_filename in self.home else frame
                stack.append(self._frame(frame))
            else:
                mine = self._known.get(name)
                if mine is None:
                    mine = self._known[name] = self.is_learners(name)
                if mine and first is None:
                    first = frame
                    if not self.home:
                        break
            frame = frame.f_back
            depth += 1
        if first is None:
            return None
        code = first.f_code
        return (code.co_filename, first.f_lineno, getattr(code, "co_qualname", code.co_name)), tuple(stack), inside

    def _frame(self, frame) -> tuple[str, int, str, int]:
        number = self._frames.get(id(frame))
        if number is None:
            number = self._frames[id(frame)] = len(self._frames)
            self.alive.append(frame)
        code = frame.f_code
        return code.co_filename, frame.f_lineno, getattr(code, "co_qualname", code.co_name), number

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        try:
            out = func(*args, **kwargs)
        except Exception:
            if not self.truncated:
                try:
                    self._record(func, args, kwargs, None, raised=True)
                except Exception:  # noqa: BLE001: the recorder's own failure only costs the place
                    self.truncated = True
            raise
        if not self.truncated:
            try:
                self._record(func, args, kwargs, out)
            except Exception:  # noqa: BLE001: the recorder's own failure only costs the place
                self.truncated = True
        return out

    def _forget_aliases(self, written: torch.Tensor) -> None:
        """A tensor written in place changes every other tensor over the same
        memory (a cache's buffer and the views of it): their recorded values
        are stale, so each is read afresh, as a new leaf, next time."""
        try:
            memory = written.untyped_storage().data_ptr()
        except (RuntimeError, NotImplementedError):
            return
        for t in self.alive:
            if isinstance(t, torch.Tensor) and t is not written and id(t) in self.producer:
                try:
                    if t.untyped_storage().data_ptr() == memory:
                        self.producer.pop(id(t), None)
                        self._rewritten.add(id(t))
                except (RuntimeError, NotImplementedError):
                    continue

    def _owner(self, t: torch.Tensor) -> int:
        """The producer of a tensor read: a recorded call, a call input
        (-2 - k), or a leaf (LEAF - k), registered on first sight."""
        found = self.producer.get(id(t))
        if found is None:
            found = self.producer[id(t)] = LEAF - len(self.leaves)
            if id(t) in self._rewritten:
                self.rewritten.add(found)
            self.leaves.append(_snapshot(t))
            self.elements += t.numel()
            self.alive.append(t)
        return found

    def _record(self, func, args, kwargs, out, raised: bool = False) -> None:
        name = op_name(func)
        if name in _IGNORED:
            return
        place, stack, inside = ("", 0, ""), (), False
        if self.learner:
            found = self._place()
            if found is None:
                return
            place, stack, inside = found
        inputs = tensors_in((args, kwargs))
        if raised:
            self.failed = len(self.ops)
            self.ops.append(Op(len(self.ops), name, *place, [self._owner(t) for t in inputs], [],
                               [self.slot.get(id(t), 0) for t in inputs], _small_arguments(name, args, kwargs),
                               [tuple(t.shape) for t in inputs], stack=stack, raised=True))
            return
        outs = tensors_in(out)
        inplace = (name.endswith("_") and not name.startswith("_")) or name in _INPLACE_DUNDERS
        if inplace and inputs:
            outs = [inputs[0]]
            self._forget_aliases(inputs[0])
        if name in ("tolist", "item") or isinstance(out, (float, list)) and not outs:
            number = isinstance(out, float) or isinstance(out, list)
            if number and inputs:
                self.ops.append(Op(len(self.ops), name, *place, [self._owner(t) for t in inputs], [],
                                   [self.slot.get(id(t), 0) for t in inputs],
                                   grad_in=any(t.requires_grad for t in inputs), number_out=True, stack=stack))
            return
        if not outs or len(self.ops) >= MAX_OPS:
            self.truncated = self.truncated or len(self.ops) >= MAX_OPS
            return
        self.elements += sum(t.numel() for t in outs)
        if self.elements > MAX_ELEMENTS:
            self.truncated = True
            return
        index = len(self.ops)
        owners = [self._owner(t) for t in inputs]
        op = Op(index, name, *place, owners, [_snapshot(t) for t in outs],
                [self.slot.get(id(t), 0) for t in inputs], _small_arguments(name, args, kwargs),
                [tuple(t.shape) for t in inputs],
                grad_in=any(t.requires_grad and t.is_floating_point() for t in inputs),
                factory=not inputs, grad_out=any(t.requires_grad for t in outs), stack=stack, inside=inside)
        self.ops.append(op)
        for k, t in enumerate(outs):
            self.producer[id(t)] = index
            self.slot[id(t)] = k
        self.alive += inputs + outs


_REDUCTIONS = {"mean", "sum", "amax", "amin", "max", "min", "softmax", "log_softmax", "norm", "var", "std", "prod",
               "cumsum", "logsumexp", "argmax", "argmin", "any", "all", "topk", "sort", "count_nonzero", "median"}
# Where a call's axis sits among its positional arguments after the tensor (or list of tensors) it reads.
_DIM_AT = {**{name: 0 for name in ("mean", "sum", "amax", "amin", "max", "min", "softmax", "log_softmax", "norm", "var",
                                   "std", "prod", "cumsum", "logsumexp", "argmax", "argmin", "any", "all", "sort",
                                   "count_nonzero", "median", "cat", "concat", "concatenate", "stack", "gather",
                                   "scatter", "index_select", "narrow", "flip", "squeeze", "unsqueeze")},
           **{name: 1 for name in ("chunk", "split", "tensor_split", "repeat_interleave", "roll", "topk")}}
LEAF = -1000  # leaf k (a tensor read that no recorded call made) is owner LEAF - k


def _component_dirs() -> tuple[str, ...]:
    """Where library components live whose calls the learner's line makes
    indirectly: torch's modules, and tinylm."""
    import os
    found = [os.path.join(os.path.dirname(torch.__file__), "nn", "modules")]
    try:
        import tinylm
        found.append(os.path.dirname(tinylm.__file__))
    except ImportError:  # pragma: no cover: tinylm ships with the course
        pass
    return tuple(found)


_COMPONENTS = _component_dirs()


def _small_arguments(name: str, args: tuple, kwargs: dict) -> dict:
    """A call's small arguments (numbers, strings, tuples of them) by
    keyword, its axis as `dim` wherever it was passed, and the sizes a
    reshape, view or expand was given as `sizes`."""
    small = {k: v for k, v in kwargs.items() if isinstance(v, (int, float, str, bool, tuple)) and k != "out"}
    rest = args[1:] if args and isinstance(args[0], (torch.Tensor, list, tuple)) else args
    at = _DIM_AT.get(name)
    if "dim" not in small and at is not None and len(rest) > at and isinstance(rest[at], (int, tuple)) \
            and not isinstance(rest[at], bool):
        small["dim"] = rest[at]
    if name in ("reshape", "view", "expand") and rest:
        sizes = rest[0] if len(rest) == 1 and isinstance(rest[0], (tuple, list, torch.Size)) else rest
        if all(isinstance(n, int) and not isinstance(n, bool) for n in sizes):
            small["sizes"] = tuple(sizes)
    if name == "__getitem__" and len(args) > 1:
        index = _plain_index(args[1])
        if index is not None:
            small["index"] = index
    return small


def _plain_index(index):
    """An index made of ints, slices of ints, None and Ellipsis, as a
    string ('[2:7, :]'); None for one that holds tensors or other objects."""
    parts = index if isinstance(index, tuple) else (index,)
    shown = []
    for part in parts:
        if isinstance(part, bool) or isinstance(part, torch.Tensor):
            return None
        if isinstance(part, int):
            shown.append(str(part))
        elif isinstance(part, slice) and all(v is None or (isinstance(v, int) and not isinstance(v, bool))
                                             for v in (part.start, part.stop, part.step)):
            shown.append(f"{'' if part.start is None else part.start}:{'' if part.stop is None else part.stop}"
                         + (f":{part.step}" if part.step is not None else ""))
        elif part is None:
            shown.append("None")
        elif part is Ellipsis:
            shown.append("...")
        else:
            return None
    return "[" + ", ".join(shown) + "]"


@dataclass
class Trace:
    """What one call computed: the recorded ops, the producer of each tensor
    (by id, while the tensors in `alive` live), the call's result, and the
    line its own code returned from (learner side)."""
    ops: list[Op]
    producer: dict[int, int]
    result: Any
    error: BaseException | None
    inputs: list[torch.Tensor]
    truncated: bool
    alive: list
    returned: tuple[str, int, str] | None = None
    slot: dict = field(default_factory=dict)
    raised: tuple[str, int, str] | None = None   # where the learner's code raised (file, line, function)
    leaves: list = field(default_factory=list)   # leaf k's value (owner LEAF - k)
    failed: int | None = None                    # the op that raised, when the call raised inside torch
    rewritten: set = field(default_factory=set)  # leaves read again after recorded calls wrote into their memory


def home_code(fn) -> tuple[frozenset, Any]:
    """(the files of fn's own code, the code object whose return is the
    call's return) for a function, a class's methods or a module's forward."""
    target = getattr(fn, "__wrapped__", fn)
    if isinstance(target, type) or isinstance(target, torch.nn.Module):
        cls = target if isinstance(target, type) else type(target)
        codes = [v.__code__ for v in vars(cls).values() if hasattr(v, "__code__")]
        forward = getattr(cls, "forward", None)
        return frozenset(c.co_filename for c in codes), getattr(forward, "__code__", None)
    code = getattr(target, "__code__", None)
    return (frozenset({code.co_filename}), code) if code is not None else (frozenset(), None)


def record(fn: Callable, args: tuple, kwargs: dict | None = None, *, learner: bool,
           is_learners: Callable[[str], bool] | None = None, subject=None) -> Trace:
    """Run fn(*args, **kwargs) under the recorder (an error is kept, not
    raised). subject: the learner's function or module fn calls (when fn is
    a wrapper around it), whose own code gets the calls attributed."""
    kwargs = kwargs or {}
    home, code = home_code(subject if subject is not None else fn) if learner else (frozenset(), None)
    rec = Recorder(learner, is_learners or is_learners_file, home)
    inputs = tensors_in((args, kwargs))
    for k, t in enumerate(inputs):  # input k is owner -2 - k on both sides, so a step can be paired by what it reads
        rec.producer.setdefault(id(t), -2 - k)
    result, error = None, None
    returned: list = []

    def profile(frame, event, arg):
        if event == "return" and frame.f_code is code:
            returned.append((code.co_filename, frame.f_lineno, getattr(code, "co_qualname", code.co_name)))
    previous = sys.getprofile()
    try:
        if code is not None:
            sys.setprofile(profile)
        with rec:
            result = fn(*args, **kwargs)
    except (Exception, LearnerTimeout) as err:  # noqa: BLE001: kept as an observation
        error = err
    finally:
        if code is not None:
            sys.setprofile(previous)
    return Trace(rec.ops, rec.producer, result, error, inputs, rec.truncated, rec.alive + inputs + [result],
                 returned[-1] if returned else None, rec.slot, leaves=rec.leaves,
                 failed=rec.failed if error is not None else None, rewritten=rec.rewritten)


def record_learner(fn, args: tuple, kwargs: dict | None = None, *, call=None) -> Trace:
    """The learner's side of a trace: fn(*args, **kwargs) recorded here, or,
    when fn stands for code that runs in the grader's jailed process (it has
    `recheck_trace`), recorded there and sent back as plain data. call: what
    to run here instead of fn itself (a wrapper that limits time and output)."""
    kwargs = kwargs or {}
    remote = getattr(fn, "recheck_trace", None)
    if callable(remote):
        found = remote(args, kwargs)
        if isinstance(found, Trace):
            return found
        return Trace([], {}, None, None, [], True, [])
    return record(call or fn, args, kwargs, learner=True, subject=fn)


def plain_trace(t: Trace) -> dict:
    """A trace as plain data (str, int, float, bool, tensors, lists, dicts):
    what the grader's jailed process sends back (see from_plain_trace)."""
    outputs = tensors_in(t.result)
    return {"ops": [[op.name[:60], op.file[:200], op.line, op.function[:120], list(op.inputs), list(op.slots),
                     list(op.outputs), {k: v for k, v in op.kwargs.items() if isinstance(v, (int, float, bool))
                                        or (isinstance(v, tuple) and all(isinstance(n, int) for n in v))},
                     [list(sh) for sh in op.input_shapes], op.grad_in, op.number_out, op.factory, op.grad_out,
                     [[f[:200], ln, fn[:120], n] for f, ln, fn, n in op.stack[:16]], op.raised, op.inside]
                    for op in t.ops[:MAX_OPS]],
            "result": list(outputs),
            "owners": [[t.producer.get(id(o), -1), t.slot.get(id(o), 0)] for o in outputs],
            "returned": list(t.returned) if t.returned else None,
            "truncated": bool(t.truncated), "error": type(t.error).__name__ if t.error is not None else None,
            "raised": _raise_place(t.error), "leaves": list(t.leaves[:MAX_OPS]), "failed": t.failed}


def _raise_place(err) -> list | None:
    found = locate_error(err) if err is not None else None
    return [found.file, found.line, found.function] if found is not None else None


def from_plain_trace(data, files: set[str]) -> Trace:
    """The Trace a jailed process sent (plain_trace), checked field by field.
    Only lines of `files` (the submission's own cells, whose text the grader
    holds) are kept as places; a malformed trace is an incomplete one."""
    try:
        ops = []
        leaves = [t for t in data.get("leaves") or [] if isinstance(t, torch.Tensor)][:MAX_OPS]
        for i, row in enumerate(data["ops"][:MAX_OPS]):
            name, file, line, function, inputs, slots, outputs, kwargs, shapes, gin, num, fac, gout = row[:13]
            stack, raised, inside = (row[13], row[14], row[15]) if len(row) == 16 else ([], False, False)
            known = isinstance(file, str) and file in files and type(line) is int
            # an earlier op, a call input (<= -2), a leaf the trace sent (LEAF - k) or an unknown one (-1)
            ints = [j for j in inputs if type(j) is int and j < i and (j > LEAF or LEAF - j < len(leaves))]
            if len(ints) != len(inputs) or not all(isinstance(o, torch.Tensor) for o in outputs):
                raise ValueError("malformed op")
            frames = tuple((f, ln, str(fn)[:120], n) for f, ln, fn, n in stack[:16]
                           if isinstance(f, str) and f in files and type(ln) is int and type(n) is int)
            ops.append(Op(i, str(name)[:60], file if known else "", line if known else 0, str(function)[:120] if known
                          else "", ints, list(outputs), [int(k) for k in slots if type(k) is int],
                          {str(k): v for k, v in dict(kwargs).items()}, [tuple(int(n) for n in sh) for sh in shapes],
                          bool(gin), bool(num), bool(fac), bool(gout), frames, raised is True, inside is True))
        result = [t for t in data["result"] if isinstance(t, torch.Tensor)]
        producer = {id(t): int(o[0]) for t, o in zip(result, data["owners"]) if type(o[0]) is int and o[0] < len(ops)}
        slot = {id(t): int(o[1]) for t, o in zip(result, data["owners"]) if type(o[1]) is int}
        returned = data.get("returned")
        returned = (returned[0], returned[1], str(returned[2])) if (isinstance(returned, list) and len(returned) == 3
                                                                     and returned[0] in files and type(returned[1]) is int) else None
        error = Exception(str(data["error"])[:80]) if data.get("error") else None
        raised = data.get("raised")
        raised = (raised[0], raised[1], str(raised[2])[:120]) if (isinstance(raised, list) and len(raised) == 3
                                                                   and raised[0] in files and type(raised[1]) is int) else None
        failed = data.get("failed")
        failed = failed if type(failed) is int and 0 <= failed < len(ops) and ops[failed].raised else None
        return Trace(ops, producer, tuple(result) if len(result) != 1 else result[0], error, [], bool(data["truncated"]),
                     list(result), returned, slot, raised, leaves, failed)
    except (KeyError, TypeError, ValueError, IndexError):
        return Trace([], {}, None, None, [], True, [])


# -- comparing values up to layout -------------------------------------------------
def _tolerance(dtype: torch.dtype) -> float:
    return {torch.float64: 1e-5, torch.float32: 2e-4, torch.bfloat16: 3e-2, torch.float16: 5e-3}.get(dtype, 0.0)


def _close(a: torch.Tensor, b: torch.Tensor, rel: float) -> bool:
    """a, b float64 of the same shape: equal inf/nan pattern, finite parts within rel of b's scale."""
    if rel == 0.0:
        return bool(torch.equal(a, b))
    fa, fb = torch.isfinite(a), torch.isfinite(b)
    if not torch.equal(fa, fb) or not torch.equal(a[~fa].nan_to_num(), b[~fb].nan_to_num()):
        return False
    if not fa.any():
        return True
    scale = float(b[fb].abs().max())
    return bool(((a[fa] - b[fb]).abs() <= rel * scale + 1e-12 + rel * b[fb].abs()).all())


def _ends(sorted_values: torch.Tensor) -> tuple[float, float] | None:
    """The least and the greatest of sorted float64 values; None unless all are finite (sort puts -inf
    first, and +inf and nan last)."""
    lo, hi = float(sorted_values[0]), float(sorted_values[-1])
    return (lo, hi) if math.isfinite(lo) and math.isfinite(hi) else None


def _ends_close(a: tuple[float, float] | None, b: tuple[float, float] | None, rel: float) -> bool:
    """False only where _close of the two sorted arrays is False: it is _close's own test, in the same
    float64 arithmetic, on the two ends alone (the largest magnitude of sorted finite values is at an end).
    Most reference values of a size differ from a learner's at an end, and this costs a microsecond where
    _close costs a hundred (a trace of a decoding loop makes about 200 000 such comparisons)."""
    if a is None or b is None:
        return True
    if rel == 0.0:
        return a == b
    scale = max(abs(b[0]), abs(b[1]))
    return all(abs(x - y) <= rel * scale + 1e-12 + rel * abs(y) for x, y in zip(a, b))


def _merges(finer: tuple, coarser: tuple) -> bool:
    """True when shape `coarser` is `finer` with some runs of adjacent axes
    merged into one (size-1 axes ignored on both sides)."""
    finer, coarser = [n for n in finer if n != 1], [n for n in coarser if n != 1]
    i = 0
    for target in coarser:
        product = 1
        while product < target and i < len(finer):
            product *= finer[i]
            i += 1
        if product != target:
            return False
    return i == len(finer)


Owner = tuple  # (op index, output slot); call input k is (-2 - k, 0)


class Values:
    """The reference's values (its inputs and each call's results), indexed
    by size for matching."""

    def __init__(self, reference: "Trace"):
        self.by_numel: dict[int, list[tuple[torch.Tensor, torch.Tensor, tuple | None, Owner]]] = {}
        items = [(t, (-2 - k, 0)) for k, t in enumerate(reference.inputs)]
        items += [(t, (LEAF - k, 0)) for k, t in enumerate(reference.leaves)]
        items += [(t, (op.index, k)) for op in reference.ops for k, t in enumerate(op.outputs)]
        for t, owner in items:
            if t.numel() == 0 or t.is_complex():
                continue
            d = t.detach().cpu()
            ref_sorted = d.double().flatten().sort().values
            self.by_numel.setdefault(d.numel(), []).append((d, ref_sorted, _ends(ref_sorted), owner))

    def owners(self, value: torch.Tensor) -> list[Owner]:
        """Every reference value equal to `value` up to layout, by owner: a
        value with the reference's axes permuted and some merged; or, where
        the reference never splits that value into as many axes, a finer
        split of it (a learner's expand before a reshape)."""
        if value.numel() == 0 or value.is_complex():
            return []
        v = value.double()
        rel = _tolerance(value.dtype) if value.is_floating_point() else 0.0
        sorted_v = v.flatten().sort().values
        ends = _ends(sorted_v)
        same = [(ref, owner) for ref, ref_sorted, ref_ends, owner in self.by_numel.get(value.numel(), [])
                if ref.dtype == value.dtype and _ends_close(ends, ref_ends, rel) and _close(sorted_v, ref_sorted, rel)]
        coarser = [owner for ref, owner in same if _same_up_to_layout(v, ref.double(), rel)]
        if coarser or any(_axes(ref.shape) == _axes(value.shape) for ref, _ in same):
            return coarser  # the reference has this split: a different one is a different value
        return [owner for ref, owner in same if _same_up_to_layout(ref.double(), v, rel, permute=False)]


def _same_up_to_layout(v: torch.Tensor, ref: torch.Tensor, rel: float, permute: bool = True) -> bool:
    """v equals ref with ref's axes permuted (if `permute`) and adjacent ones merged."""
    if tuple(v.shape) == tuple(ref.shape) and _close(v, ref, rel):
        return True
    r = ref.reshape([n for n in ref.shape if n != 1]) if ref.dim() else ref
    if r.dim() > 6:
        return False
    for perm in itertools.permutations(range(r.dim())) if permute else [tuple(range(r.dim()))]:
        if _merges(tuple(r.shape[p] for p in perm), tuple(v.shape)) and _close(r.permute(perm).reshape(v.shape), v, rel):
            return True
    return False


@dataclass
class Located:
    """The line of the learner's code where the first wrong value is made."""
    file: str
    line: int
    function: str
    code: str
    facts: list[str]
    kind: str = "value"   # a key of KIND_WORDS
    also: int | None = None   # a second line of the same code (kind missing / role)
    also_code: str = ""

    def text(self) -> str:
        where = f"line {self.line}" + (f" of your {self.function}" if self.function and not self.function.startswith("<")
                                       else "")
        facts = "; ".join(self.facts)
        second = f" and line {self.also}, `{self.also_code}`" if self.also else ""
        return (f"{where}, `{self.code}`{second}: {KIND_WORDS.get(self.kind, KIND_WORDS['value'])}"
                + (f" ({facts})" if facts else ""))

    def to_dict(self) -> dict:
        return {"file": self.file, "line": self.line, "function": self.function, "code": self.code,
                "facts": list(self.facts), "kind": self.kind, "also": self.also, "also_code": self.also_code}


def source_line(file: str, line: int) -> str:
    text = linecache.getline(file, line).strip()
    return text if len(text) <= MAX_CODE else text[:MAX_CODE - 1] + "…"


def _stats(t: torch.Tensor) -> str:
    if t.numel() == 0:
        return "empty"
    if not t.is_floating_point():
        if t.dtype == torch.bool:
            return f"{int(t.sum())} of {t.numel()} True"
        return f"values {int(t.min())} to {int(t.max())}"
    d = t.double()
    finite = d[torch.isfinite(d)]
    parts = []
    if finite.numel() < d.numel():
        parts.append(f"{d.numel() - finite.numel()} of {d.numel()} not finite")
    if finite.numel():
        parts.append(f"mean {float(finite.mean()):.3g}, range {float(finite.min()):.3g} to {float(finite.max()):.3g}")
    return ", ".join(parts)


def _describe_value(t: torch.Tensor) -> str:
    return f"shape {tuple(t.shape)}, {str(t.dtype).removeprefix('torch.')}, {_stats(t)}"


def _reduced_axis(op: Op) -> str:
    """'over axis -1 (size 8)' for a reduction op, from its dim argument."""
    dim = op.kwargs.get("dim")
    if op.name not in _REDUCTIONS or dim is None or not op.input_shapes:
        return ""
    shape = op.input_shapes[0]
    dims = dim if isinstance(dim, tuple) else (dim,)
    try:
        sizes = ", ".join(str(shape[d]) for d in dims)
    except (IndexError, TypeError):
        return ""
    return f" over axis {dim if not isinstance(dim, tuple) else list(dim)} (size {sizes})"


def _spoiled(t: torch.Tensor) -> bool:
    """Holds nan or +inf (-inf is a mask's fill, on a right route too)."""
    return t.is_floating_point() and bool((torch.isnan(t) | torch.isposinf(t)).any())


def _strong(t: torch.Tensor) -> bool:
    """A match that shows a route is right: floating values, more than one
    (a 0/1 mask or a single number equals a reference one by chance too often)."""
    return t.numel() > 1 and t.is_floating_point()


def _base(name: str) -> str:
    """One name for the spellings of one operation: __rmul__, mul, multiply -> mul."""
    name = name.strip("_")
    name = name[1:] if name.startswith("r") and name[1:] in _ARITHMETIC else name
    return _ALIASES.get(name, name)


_ARITHMETIC = {"add", "sub", "mul", "truediv", "div", "matmul", "pow", "floordiv", "mod"}
_ALIASES = {"truediv": "div", "true_divide": "div", "divide": "div", "multiply": "mul", "subtract": "sub",
            "mm": "matmul", "bmm": "matmul", "linear": "matmul", "einsum": "matmul", "neg": "negative",
            "greater_equal": "ge", "less_equal": "le", "greater": "gt", "less": "lt"}


def _ancestors(ops: list[Op], roots) -> set[int]:
    seen: set[int] = set()
    stack = [i for i in roots if i >= 0]
    while stack:
        i = stack.pop()
        if i not in seen:
            seen.add(i)
            stack += [j for j in ops[i].inputs if j >= 0]
    return seen


def locate(learner: Trace, reference: Trace) -> Located | None:
    """The place of the first wrong value (see the module docstring); None
    when a trace is incomplete, the output is right, nothing diverges, or
    the place cannot be told."""
    if learner.truncated or reference.truncated or not learner.ops:
        return None
    final_ref = [t.detach().cpu() for t in tensors_in(reference.result)] or _number_source(reference)
    outputs = tensors_in(learner.result) or _number_source(learner)
    if outputs and len(outputs) == len(final_ref) and all(_same_as(t.detach().cpu(), r) for t, r in zip(outputs, final_ref)):
        return None
    out_ops = sorted({learner.producer[id(t)] for t in outputs if learner.producer.get(id(t), -1) >= 0})
    if not out_ops and outputs and not tensors_in(learner.result):  # a number read with .item(): from its tensor's op
        out_ops = [op.index for op in learner.ops if any(o is outputs[0] for o in op.outputs)]
    if not out_ops:
        return None
    seen = _Analysis(learner, reference)
    frontier = seen.frontier(out_ops)
    if not frontier:
        final = {(reference.producer.get(id(t), -1), reference.slot.get(id(t), 0)) for t in tensors_in(reference.result)}
        if any(owner in final for owners in seen.found[max(out_ops)] for owner in owners):
            return None  # the right values in another shape: the table's shape column says it
        last = learner.ops[max(out_ops)]
        made_by = {reference.ops[i].name for owners in seen.found[last.index] for i, _ in owners if i >= 0}
        final_by = {reference.ops[i].name for i, _ in final if i >= 0}
        if last.name in made_by & final_by:
            return None  # the reference's loop makes this value at an earlier step: iterations are missing, not a line
        return _returned_early(learner, last, seen.matched, final_ref)
    return seen.place(frontier)


class _Analysis:
    """The learner's calls set against the reference's values: which are
    matched (the reference has the value), good (matched, or leading to a
    matched value by another route, or a constant), and where the first
    wrong value is made (see the module docstring)."""

    def __init__(self, learner: Trace, reference: Trace):
        self.learner, self.reference = learner, reference
        values = Values(reference)
        ops = self.ops = learner.ops
        # What the learner's call inputs and leaves (a module's weights) equal among the reference's values:
        # the two sides' inputs need not line up.
        self.given = {-2 - k: {(-2 - k, 0)} | set(values.owners(t.detach().cpu())) for k, t in enumerate(learner.inputs)}
        self.given |= {LEAF - k: set(values.owners(t)) for k, t in enumerate(learner.leaves)}
        self.found: list = []
        self.doubtful: list[bool] = []  # made from a handful of ids the reference does not have (a wrong token)
        for op in ops:  # in the order they ran: a call's inputs are judged before it
            doubt = any(j >= 0 and (self.doubtful[j] or (slot < len(ops[j].outputs) and _few_ids(ops[j].outputs[slot])
                                                         and not self.found[j][slot]))
                        for j, slot in zip(op.inputs, op.slots or [0] * len(op.inputs)))
            self.doubtful.append(doubt)
            self.found.append([[] if doubt else self._credible(op, t, values.owners(t)) for t in op.outputs])
        self.matched = [any(self.found[i]) for i in range(len(ops))]
        strong = [any(f and _strong(t) for f, t in zip(self.found[i], ops[i].outputs)) for i in range(len(ops))]
        children: dict[int, list[int]] = {}
        for op in ops:
            for i in op.inputs:
                if i >= 0:
                    children.setdefault(i, []).append(op.index)
        # A route through nan or +inf, which the reference never passes through, is no other right route: a
        # comparison with nan is False, so a spoiled value can reach a matched result by accident (a nucleus mask
        # of nan drops nothing, and the logits come back unchanged).
        clean = not any(_spoiled(t) for op in reference.ops for t in op.outputs)
        spoiled = [clean and not self.matched[i] and any(_spoiled(t) for t in ops[i].outputs) for i in range(len(ops))]
        # A step that gives back a value it read (x · 1, x + 0) reaches a match without showing that its other
        # operands are right: a table row of ones read where the rows of cos belong would pass for another route.
        echoes = [self._echoed(op) for op in ops]
        leads_to_match = [False] * len(ops)
        for op in reversed(ops):
            leads_to_match[op.index] = not spoiled[op.index] and any(
                (strong[c] or leads_to_match[c]) and not (echoes[c] and op.index not in echoes[c])
                for c in children.get(op.index, []))
        self.good = [self.matched[i] or leads_to_match[i] or ops[i].factory for i in range(len(ops))]

    def _value_read(self, j: int, slot: int) -> torch.Tensor | None:
        """The value a call read from producer j (a call, a call input, a leaf)."""
        if j >= 0:
            return self.ops[j].outputs[slot] if slot < len(self.ops[j].outputs) else None
        values, k = (self.learner.leaves, LEAF - j) if j <= LEAF else (self.learner.inputs, -2 - j)
        return values[k] if 0 <= k < len(values) else None

    def _echoed(self, op: Op) -> set[int]:
        """The producers of the operands an arithmetic call returns unchanged (x · 1, x + 0), if it returns one."""
        if _base(op.name) not in _ARITHMETIC or len(op.outputs) != 1 or not _strong(op.outputs[0]):
            return set()
        out = op.outputs[0]
        read = [(j, self._value_read(j, slot)) for j, slot in zip(op.inputs, op.slots or [0] * len(op.inputs))]
        return {j for j, value in read if isinstance(value, torch.Tensor) and value.shape == out.shape
                and value.dtype == out.dtype and torch.equal(value.to(out.device), out)}

    def _owners_read(self, op: Op) -> set:
        owned: set = set()
        for j, slot in zip(op.inputs, op.slots or [0] * len(op.inputs)):
            if j >= 0:
                owned |= set(self.found[j][slot]) if slot < len(self.found[j]) else set()
            else:
                owned |= self.given.get(j, set())
        return owned

    def _credible(self, op: Op, value: torch.Tensor, owners: list) -> list:
        """The owners of a learner value that count as a match. A few
        integers or booleans (token ids, a mask row) equal a reference value
        by chance too easily: they count only where the reference made them
        with a call of the same kind from a value this call reads too (or
        holds them as an input). What is made from unmatched ids (the
        embedding of a wrong token, and all after it) matches only by chance
        as well: it is `doubtful` and matches nothing."""
        if not owners or not _few_ids(value):
            return owners
        read = self._owners_read(op)
        reference = self.reference.ops
        return [o for o in owners if o[0] <= -2 or (o[0] >= 0 and _same_kind(op, reference[o[0]]) and any(
            (i, s) in read for i, s in zip(reference[o[0]].inputs, reference[o[0]].slots or [0] * len(reference[o[0]].inputs))))]

    def frontier(self, out_ops: list[int]) -> list[int]:
        """The calls `out_ops` depend on that are not good although everything they read is."""
        return [i for i in sorted(_ancestors(self.ops, out_ops))
                if not self.good[i] and not self.ops[i].raised and all(self._good_input(j) for j in self.ops[i].inputs)]

    def _good_input(self, j: int) -> bool:
        """A call's value that is good, or an input from outside the trace; a
        memory the trace wrote into (a cache's buffer read again) only when
        the reference has its value too."""
        if j >= 0:
            return self.good[j]
        return j not in self.learner.rewritten or bool(self.given.get(j))

    def place(self, frontier: list[int]) -> Located | None:
        ops, reference = self.ops, self.reference
        blames = {i: _blame(ops[i], ops, self.found, reference, self.given) for i in frontier}
        # A call that the reference makes too, from the same values, with another result, is wrong for sure; a
        # call the reference never makes may be another right route whose result only a later mistake spoiled.
        # So is one that reads an argument where the reference's call reads a value the learner made too.
        sure = [i for i in frontier if blames[i] is not None and blames[i][2] is not None and (
            blames[i][3] == "value" and _same_kind(ops[i], blames[i][2]) or blames[i][3] in ("read", "swapped"))]
        # A call made inside a library component (a module's forward, tinylm) got its arguments there, from what
        # the learner's line passed: a wrong value the learner's own code made earlier comes first.
        direct = [i for i in frontier if not ops[i].inside]
        if direct and any(ops[i].inside and i > direct[0] for i in sure):
            sure = [i for i in sure if not ops[i].inside or i < direct[0]]
            if not sure and len({(ops[i].file, ops[i].line) for i in direct}) == 1:
                sure = [direct[0]]
        if len({(ops[i].file, ops[i].line) for i in sure}) == 1 or sure and all(_same_call(ops[i], ops[sure[0]])
                                                                              for i in sure):
            chosen = sure[0]  # one line, or one mistake repeated line after line (cos and sin sliced alike): the first
        elif len({(ops[i].file, ops[i].line) for i in frontier}) == 1:
            chosen = frontier[0]
        else:
            return None
        first = ops[chosen]
        made = [ops[j] for j in first.inputs if j >= 0 and ops[j].factory and not self.matched[j]]
        if any((m.file, m.line) != (first.file, first.line) for m in made):
            return None  # a constant the reference never has, read on another line: either line may be wrong
        blame = blames[chosen]
        if blame is None:
            return None
        blamed, also, counterpart, how = blame
        maker = None
        if how == "read":  # the second op is where the value it should read is made, not a line of the pair
            maker, also = also, None
        if not blamed.file:
            return None  # a line of code whose text is not at hand (the grader keeps only the submission's cells)
        code = source_line(first.file, first.line)
        sizes = _sizes_differ(first, counterpart) if how == "value" else None
        if how == "value" and counterpart is not None and _same_kind(first, counterpart) and not sizes and \
                re.search(r"\bself\.[A-Za-z_]", code) and not re.search(r"(?<![\w.])\d", code):
            return None  # same values in, another result, no number on the line: it may come from the module's __init__
        facts = [f"yours: {first.name}{_reduced_axis(first)} gives {_describe_value(first.outputs[0])}"]
        # A reference call is set beside the learner's only where the two were aligned by value: for a value of
        # a kind the reference never computes, its first call on the same input is no counterpart of this line.
        if counterpart is not None and (how != "value" or _same_kind(first, counterpart)):
            facts.append(f"the reference's {counterpart.name}{_reduced_axis(counterpart)} gives "
                         f"{_describe_value(counterpart.outputs[0])}")
            if how == "value" and _same_kind(first, counterpart):
                arguments = _argument_facts(first, counterpart)
                if first.inside and arguments and all("training=" in a for a in arguments):
                    return None  # a module's mode (train or eval), set elsewhere or nowhere: not this line's doing
                facts[1:1] = arguments
        (file, line, function), second = blamed_lines(blamed, also)
        if how == "layout":
            facts.insert(0, f"the value line {line} makes reaches line {second or line} in another layout than the "
                            f"reference's {counterpart.name} reads")
        elif how == "missing":
            steps = _steps_between(reference, counterpart, also or first, blamed, self.found)
            facts.insert(0, f"the reference's {counterpart.name} reads a value computed from the one line {line} makes, "
                            f"{steps or 'one or more steps later'}")
        elif how in ("role", "swapped"):
            facts.insert(0, f"line {second or line} uses the value line {line} makes where the reference's "
                            f"{counterpart.name} reads another value" + (", one that line makes too"
                                                                         if how == "swapped" else ""))
        elif how == "read":
            facts.insert(0, f"your {first.name} reads an argument of your function where the reference's "
                            f"{counterpart.name} reads the value its {maker.name} makes, a value your line {maker.line} "
                            "makes too")
        elif how in ("twice", "ahead"):
            steps = _steps_between(reference, counterpart, also or first, blamed, self.found, ahead=True)
            facts.insert(0, f"your {first.name} reads a value the reference has only after its own {counterpart.name}"
                            + (f" ({steps})" if steps else "") if how == "twice" else
                            f"your {first.name} reads a value the reference has only after more steps"
                            + (f" ({steps})" if steps else ""))
        if sizes is not None:
            # A call made inside a library component got its sizes there, from the numbers the line passed it.
            bound = _number_passed_at(file, line, {(o.file, o.line) for o in ops}) if first.inside else \
                _sizes_bound_at(file, line, first.name)
            facts.insert(0, sizes)
            if bound == "elsewhere":
                return None  # the sizes come from names bound on several lines: any of them may be wrong
            if bound is not None and bound != line:
                how, second = "sizes", bound
        if how == "value" and sizes is None and first.name in _SIZED:
            written = _number_written_in(file, line)
            if written is not None:
                name, value, bound = written
                facts.insert(0, f"line {line} reads {name} = {value}, a number written in at line {bound}, where the "
                                f"reference's sizes follow from its inputs' shapes")
                how, second = "sizes", bound
        return Located(file, line, function, source_line(file, line), facts, kind=how, also=second,
                       also_code=source_line(file, second) if second else "")


# Calls whose result's shape is set by numbers they are given (a count of copies, sizes, bounds).
_SIZED = {"expand", "reshape", "view", "repeat", "repeat_interleave", "__getitem__", "narrow", "tile", "unflatten"}


def _number_written_in(file: str, line: int) -> tuple[str, int, int] | None:
    """(name, value, line) for the one name `line` reads that its function
    binds once, on an earlier line, to an integer literal (`n_rep = 2`)."""
    found = _bound_once_before(file, line, lambda value: isinstance(value, ast.Constant) and type(value.value) is int)
    return (found[0], found[1].value, found[2]) if found else None


def _true_division_read(file: str, line: int) -> tuple[str, int] | None:
    """(name, line) for the one name `line` reads that its function binds
    once, on an earlier line, to a true division (`n_rep = a / b`: a float)."""
    found = _bound_once_before(file, line, lambda value: any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div)
                                                             for n in ast.walk(value)))
    return (found[0], found[2]) if found else None


def _function_around(file: str, line: int):
    """The innermost function definition of `file`'s source holding `line` (None if none, or no source)."""
    try:
        tree = ast.parse("".join(linecache.getlines(file)))
    except (SyntaxError, ValueError):
        return None
    functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                 and n.lineno <= line <= (n.end_lineno or n.lineno)]
    return max(functions, key=lambda n: n.lineno) if functions else None


def _bound_once_before(file: str, line: int, kind: Callable) -> tuple[str, Any, int] | None:
    """(name, value node, line) for the one name `line` reads that its
    function binds exactly once, on an earlier line, with `kind(value)` true."""
    body = _function_around(file, line)
    if body is None:
        return None
    read = {n.id for n in ast.walk(body) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
            and n.lineno == line}
    found = []
    for node in ast.walk(body):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            value = node.value if isinstance(node, ast.Assign) else None
            found += [(t.id, value, node.lineno) for t in targets if isinstance(t, ast.Name) and t.id in read]
    chosen = [f for f in found if f[1] is not None and f[2] < line and kind(f[1])]
    if len(chosen) != 1 or sum(f[0] == chosen[0][0] for f in found) != 1:
        return None
    return chosen[0]


def _same_call(a: Op, b: Op) -> bool:
    """The same call with the same small arguments on values of the same shapes, giving the same shapes."""
    return a.name == b.name and a.kwargs == b.kwargs and a.input_shapes == b.input_shapes and \
        [o.shape for o in a.outputs] == [o.shape for o in b.outputs]


def _few_ids(t: torch.Tensor) -> bool:
    """A handful of integers or booleans: equal to a reference value by chance too easily."""
    return not t.is_floating_point() and not t.is_complex() and t.numel() < 8


def blamed_lines(blamed: Op, also: Op | None) -> tuple[tuple[str, int, str], int | None]:
    """((file, line, function) of the blamed call, the second line or None).
    A value made inside a function the other call's function called (a
    block's result reaching the final norm) is shown where that caller
    got it: the line of their common caller that called the function."""
    place = (blamed.file, blamed.line, blamed.function)
    if also is None:
        return place, None
    lifted = _common_lines(blamed, also)
    if lifted is not None and blamed.stack and lifted[0] != blamed.stack[0][:3]:
        place = lifted[0]
    second = also.line if also.file == place[0] and also.line != place[1] else None
    return place, second


def _common_lines(a: Op, b: Op):
    """The lines of the innermost frame both calls ran in that made each
    (file, line, function), or None when they share no frame of the checked code."""
    sa, sb = list(reversed(a.stack)), list(reversed(b.stack))
    common = None
    for fa, fb in zip(sa, sb):
        if fa[3] != fb[3]:
            break
        common = (fa[:3], fb[:3])
    return common


def _steps_between(reference: Trace, counterpart: Op | None, first: Op, blamed: Op, found: list,
                   ahead: bool = False) -> str:
    """'its steps in between: pow, mean, add, rsqrt': the reference's calls
    between the value the learner's `blamed` call made and the one the
    reference's `counterpart` reads in its place (ahead: from what the
    counterpart reads to the learner's value)."""
    if counterpart is None or not blamed.outputs or blamed.index not in first.inputs:
        return ""
    k = first.inputs.index(blamed.index)
    if k >= len(counterpart.inputs):
        return ""
    w = (counterpart.inputs[k], (counterpart.slots or [0] * len(counterpart.inputs))[k])
    slot = (first.slots or [0] * len(first.inputs))[k]
    for owner in found[blamed.index][slot] if slot < len(found[blamed.index]) else []:
        path = _path(reference, owner, w) if ahead else _path(reference, w, owner)
        names = [reference.ops[i].name for i in reversed(path or []) if reference.ops[i].name not in _LAYOUT]
        if names:
            return "its steps in between: " + ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
    return ""


def _argument_facts(mine: Op, theirs: Op) -> list[str]:
    """The small arguments (minlength=..., keepdim=..., a reduction's axis)
    in which the learner's call differs from the reference's call of the same kind."""
    facts = []
    for key in sorted(set(mine.kwargs) | set(theirs.kwargs)):
        if key in ("sizes", "index") or (key == "dim" and mine.name in _REDUCTIONS) or key.startswith("_"):
            continue  # said with the shapes, or as the axis a reduction ran over; `_stacklevel`: torch's own
        a, b = mine.kwargs.get(key), theirs.kwargs.get(key)
        if a == b or (a is None and b is False):
            continue
        yours = f"{key}={a!r}" if key in mine.kwargs else f"no {key}"
        facts.append(f"your {mine.name} is called with {yours}, the reference's with "
                     + (f"{key}={b!r}" if key in theirs.kwargs else f"no {key}"))
    return facts[:3]


def _sizes_differ(mine: Op, theirs: Op | None) -> str | None:
    """For a reshape, view, expand or slice that the reference makes from
    the same value with other sizes or bounds: what each is given."""
    if theirs is None or mine.name not in ("reshape", "view", "expand", "__getitem__") or not _same_kind(mine, theirs):
        return None
    key = "index" if mine.name == "__getitem__" else "sizes"
    a, b = mine.kwargs.get(key), theirs.kwargs.get(key)
    if a is None or b is None or a == b:
        return None
    shape = mine.input_shapes[0] if mine.input_shapes else None
    if key == "index":
        return f"your slice {a} of shape {shape} gives {tuple(mine.outputs[0].shape)}; the reference's {b} gives " \
               f"{tuple(theirs.outputs[0].shape)}" if mine.outputs and theirs.outputs else None
    return (f"your {mine.name} turns shape {shape} into sizes {a}; the reference's turns it into {b}"
            if shape is not None else f"your {mine.name} is given sizes {a}; the reference's {b}")


def _sizes_bound_at(file: str, line: int, call: str) -> int | str | None:
    """The one earlier line of the same function that binds every name the
    `call` (reshape, view, a slice...) on `line` reads as a size or bound,
    e.g. `B, T, H, hd = y.shape`; None when it reads no name bound in the
    function (numbers, arguments), "elsewhere" when they are bound on
    several lines."""
    body = _function_around(file, line)
    if body is None:
        return None
    if call == "__getitem__":
        parts = [n.slice for n in ast.walk(body) if isinstance(n, ast.Subscript)
                 and n.lineno <= line <= (n.end_lineno or n.lineno)]
    else:
        parts = [a for n in ast.walk(body) if isinstance(n, ast.Call) and n.lineno <= line <= (n.end_lineno or n.lineno)
                 and isinstance(n.func, ast.Attribute) and n.func.attr == call for a in n.args]
    names = {n.id for a in parts for n in ast.walk(a) if isinstance(n, ast.Name)}
    if not names:
        return None
    binding: dict[str, set[int]] = {}
    for node in ast.walk(body):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AnnAssign, ast.AugAssign, ast.For)) else []
        for target in targets:
            for n in ast.walk(target):
                if isinstance(n, ast.Name) and n.id in names and node.lineno < line:
                    binding.setdefault(n.id, set()).add(node.lineno)
    lines = set().union(*binding.values()) if binding else set()
    return lines.pop() if len(lines) == 1 else "elsewhere" if lines else None


def _number_passed_at(file: str, line: int, computing: set) -> int | None:
    """The one earlier line of the same function that binds, once, a name
    `line` reads, with no tensor computed on that line (so a number, such as
    `start = past_k.shape[2] - 1`); None when there is not exactly one."""
    body = _function_around(file, line)
    if body is None:
        return None
    read = {n.id for n in ast.walk(body) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
            and n.lineno <= line <= (n.end_lineno or n.lineno)}
    binding: dict[str, list[int]] = {}
    for node in ast.walk(body):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AnnAssign, ast.AugAssign, ast.For)) else []
        for target in targets:
            for n in ast.walk(target):
                if isinstance(n, ast.Name) and n.id in read:
                    binding.setdefault(n.id, []).append(node.lineno)
    lines = {at[0] for at in binding.values() if len(at) == 1 and at[0] < line and (file, at[0]) not in computing}
    return lines.pop() if len(lines) == 1 else None


def _number_source(t: Trace) -> list:
    """For a call that returns a Python number made by .item(): the tensor it
    was read from (kept alive in the trace), standing for the result."""
    if not isinstance(t.result, (int, float)) or isinstance(t.result, bool):
        return []
    items = [op for op in t.ops if op.number_out and op.name == "item" and op.inputs]
    if not items or items[-1].inputs[0] < 0:
        return []
    source = t.ops[items[-1].inputs[0]]
    return [source.outputs[items[-1].slots[0] if items[-1].slots else 0]] if source.outputs else []


def _returned_early(learner: Trace, op: Op, matched: list[bool], final_ref: list) -> Located | None:
    """Every value is one the reference computes, yet the output is wrong:
    the output is an earlier step's value, made at `op`'s line; the steps
    after it are missing between that line and the return line."""
    if not matched[op.index] or op.factory:
        return None
    if sum((o.file, o.line) == (op.file, op.line) and o.name == op.name for o in learner.ops) > 1:
        return None  # a line run in a loop: the missing steps may be iterations, which have no line of their own
    facts = [f"yours: {_describe_value(op.outputs[0])}"]
    if final_ref:
        facts.append(f"the reference goes on to {_describe_value(final_ref[0])}")
    returned = learner.returned
    also = returned[1] if returned and returned[0] == op.file and returned[1] != op.line else None
    return Located(op.file, op.line, op.function, source_line(op.file, op.line), facts, kind="output",
                   also=also, also_code=source_line(op.file, also) if also else "")


def _same_kind(op: Op, ref_op: Op) -> bool:
    return _base(op.name) == _base(ref_op.name)


def _input_owners(op: Op, ops: list[Op], found: list, given: dict | None = None) -> list[set]:
    """For each tensor `op` read: the reference owners its value matches
    (given: those of the call's inputs and of the leaves, by owner code)."""
    owned = []
    for j, slot in zip(op.inputs, op.slots or [0] * len(op.inputs)):
        if j <= -2:
            owned.append(set(given[j]) if given and j in given else {(j, 0)} if j > LEAF else set())
        elif j >= 0 and slot < len(found[j]):
            owned.append(set(found[j][slot]))
        else:
            owned.append(set())
    return owned


def _blame(first: Op, ops: list[Op], found: list, reference: Trace, given: dict | None = None):
    """(op to blame, a second op or None, the reference's call of the same
    kind, how) for the frontier op `first`, or None when no line can be
    told (see the module docstring). how: "value" (the call itself gives
    another result), "missing" (it reads a value the reference only uses
    after more steps: they are missing between the two lines), "role" (it
    reads a value the reference uses elsewhere)."""
    owned = _input_owners(first, ops, found, given)
    kind = _base(first.name)
    candidates = [r for r in reference.ops if _base(r.name) == kind and len(r.inputs) == len(first.inputs)]
    if not candidates:
        if _cast_skipped(first, owned, reference):
            return None  # the reference casts this input first: the missing step has no line of its own
        return first, None, _reference_step(owned, reference), "value"

    def same_input(r: Op, k: int) -> bool:
        slots = r.slots or [0] * len(r.inputs)
        return (r.inputs[k], slots[k]) in owned[k] and _axes(r.input_shapes[k]) == _axes(first.input_shapes[k])

    def agreement(r: Op) -> float:  # an input in the very same shape counts more than one in another axis order
        return sum(same_input(r, k) * (1.0 if tuple(r.input_shapes[k]) == tuple(first.input_shapes[k]) else 0.5)
                   for k in range(len(r.inputs)))

    best = max(candidates, key=agreement)
    slots = best.slots or [0] * len(best.inputs)
    differing = [k for k in range(len(best.inputs)) if not same_input(best, k)]
    if not differing and first.name not in _LAYOUT:
        # The same values, but one of them laid out otherwise (transposed): a computing call, right on a wrong
        # layout (a reshape given the wrong layout is itself the place: it is where a permute is missing).
        for k in range(len(best.inputs)):
            j, slot = first.inputs[k], (first.slots or [0] * len(first.inputs))[k]
            theirs = _owner_value(reference, (best.inputs[k], slots[k]))
            if j >= 0 and theirs is not None and slot < len(ops[j].outputs) and ops[j].outputs[slot].numel() > 1:
                mine = ops[j].outputs[slot]
                if tuple(mine.shape) != tuple(theirs.shape) or not _close(mine.double(), theirs.double(),
                                                                          _tolerance(mine.dtype)):
                    return ops[j], first, best, "layout"
    if not differing:
        return first, None, best, "value"   # the same call on the same values, another result: its own arguments
    k = differing[0]
    wanted = (best.inputs[k], slots[k])
    paths = [_path(reference, wanted, owner) for owner in owned[k]]
    lagging = any(p is not None for p in paths)
    layout_only = lagging and all(reference.ops[i].name in _LAYOUT for p in paths if p is not None for i in p)
    j = first.inputs[k]
    tied = [r for r in candidates if agreement(r) == agreement(best)]
    if not lagging and j >= 0 and any(wanted in owners for owners in found[j]):
        # Another result of the very call that made the value read is the one the reference reads here (the
        # results of var_mean, chunk or split unpacked in another order).
        return ops[j], first, best, "swapped"
    if not lagging and j >= 0 and len(tied) == 1:
        # The value read is one the reference makes only later, from the one its call reads: the learner's
        # value already went through more steps; through this very call (applied twice) or others (an order).
        ahead = [p for p in (_path(reference, owner, wanted) for owner in owned[k]) if p]
        if ahead and any(reference.ops[i].name not in _LAYOUT for p in ahead for i in p):
            return ops[j], first, best, "twice" if any(best.index in p for p in ahead) else "ahead"
    while not layout_only and j >= 0 and ops[j].name in _LAYOUT and ops[j].inputs:
        j = ops[j].inputs[0]                # back through reshapes and transposes to the call that made the value
    if j < 0:
        # an input of the call: used in another's place (the using line is the place), or read where the
        # reference reads it only after steps of its own. When the learner's code takes those steps too, but
        # later, on what this call made (silu(x) @ W where the reference has silu(x @ W)), the order goes wrong
        # here: this line is the place. Steps it never takes have no line of the learner's: nothing can be told.
        if lagging and not layout_only and _steps_taken_later(first, ops, reference, paths):
            return first, None, best, "value"
        maker = next((op for op in ops[:first.index] if any(wanted in owners for owners in found[op.index])), None)
        if lagging and not layout_only and maker is not None:
            return first, maker, best, "read"  # the learner made the value the reference reads here, and reads another
        if layout_only and first.name not in _LAYOUT and \
                not any(reference.ops[i].name in _CASTS for p in paths if p is not None for i in p):
            # the reference's call reads this input only reshaped: the same call on the same values, another result
            # (log_softmax over the positions of (B, T, V) where the reference's runs over V of (B·T, V))
            return first, None, best, "value"
        return None if lagging or not owned[k] else (first, None, best, "role")
    return ops[j], first, best, "layout" if layout_only else "missing" if lagging else "role"


def _steps_taken_later(first: Op, ops: list[Op], reference: Trace, paths: list) -> bool:
    """True when every computing step (not a layout change) the reference
    takes between a value and its call is one the learner takes on a value
    computed from `first`'s result."""
    steps = {_base(reference.ops[i].name) for p in paths if p for i in p if reference.ops[i].name not in _LAYOUT}
    later, taken = {first.index}, set()
    for op in ops[first.index + 1:]:
        if any(i in later for i in op.inputs):
            later.add(op.index)
            taken.add(_base(op.name))
    return bool(steps) and steps <= taken


def _axes(shape: tuple) -> list[int]:
    return sorted(n for n in shape if n != 1)


def _path(reference: Trace, value: Owner, ancestor: Owner) -> list[int] | None:
    """The reference's calls from `ancestor` to `value` (one path), or None
    when `value` is not computed from `ancestor`."""
    ops = reference.ops
    stack, seen = [(value, [])], set()
    while stack:
        owner, path = stack.pop()
        if owner == ancestor:
            return path
        i = owner[0]
        if i < 0 or owner in seen:
            continue
        seen.add(owner)
        stack += [((j, s), path + [i]) for j, s in zip(ops[i].inputs, ops[i].slots or [0] * len(ops[i].inputs))]
    return None


_CASTS = {"float", "double", "half", "bfloat16", "to", "type", "type_as"}


def _cast_skipped(op: Op, owned: list[set], reference: Trace) -> bool:
    """True when every reference call that reads what the learner's `op`
    read is a dtype cast (and `op` is not): the learner skipped a cast."""
    if op.name in _CASTS:
        return False
    owners = set().union(*owned) if owned else set()
    readers = [r for r in reference.ops if any((j, s) in owners for j, s in zip(r.inputs, r.slots or [0] * len(r.inputs)))]
    return bool(readers) and all(r.name in _CASTS for r in readers)


def _reference_step(owned: list[set], reference: Trace) -> Op | None:
    """The reference's first call (not a pure layout change) that reads a
    reference value the learner's op read: what the reference did there."""
    owners = set().union(*owned) if owned else set()
    for ref_op in reference.ops:
        if ref_op.name not in _LAYOUT and ref_op.outputs and any(
                (j, s) in owners for j, s in zip(ref_op.inputs, ref_op.slots or [0] * len(ref_op.inputs))):
            return ref_op
    return None


def _same_as(t: torch.Tensor, ref: torch.Tensor) -> bool:
    return (tuple(t.shape) == tuple(ref.shape) and t.dtype == ref.dtype
            and _close(t.double(), ref.double(), _tolerance(t.dtype)))


# -- Python numbers: what each line of the learner's code assigns ------------------------
def _numbers(value, depth: int = 0) -> list[float]:
    """The numbers in a value: ints and floats (not bools), one-element tensors, and those inside tuples,
    lists and dicts."""
    if isinstance(value, bool):
        return []
    if isinstance(value, (int, float)):
        return [float(value)]
    if isinstance(value, torch.Tensor) and value.numel() == 1 and not value.is_complex():
        return [float(value.detach().cpu().double())]
    if depth < 2 and isinstance(value, (tuple, list)):
        return [n for v in value[:16] for n in _numbers(v, depth + 1)]
    if depth < 2 and isinstance(value, dict):
        return [n for v in list(value.values())[:16] for n in _numbers(v, depth + 1)]
    return []


@dataclass
class Lines:
    """What one call assigned, line by line: [(file, line, function, numbers)] in order, the last entry the
    value it returned (at its return line)."""
    steps: list[tuple[str, int, str, list[float]]]
    result: Any
    error: BaseException | None


def record_lines(fn: Callable, args: tuple, kwargs: dict | None = None, *, subject=None, learner: bool = True,
                 limit: int = 5000) -> Lines:
    """Run fn under sys.settrace, keeping the numbers each line of the
    checked code (the files of `subject`'s code; every frame of fn for the
    reference) binds to its local names, and the number it returns."""
    kwargs = kwargs or {}
    files = home_code(subject if subject is not None else fn)[0] if learner else None
    steps: list = []
    seen: dict[int, dict] = {}

    def local(frame, event, arg):
        if len(steps) > limit:
            return None
        key = id(frame)
        if event in ("line", "return"):
            before = seen.get(key, {})
            now = {k: v for k, v in frame.f_locals.items() if not k.startswith("__")}
            fresh = [n for k, v in now.items() if k not in before or before[k] is not v for n in _numbers(v)]
            if fresh and key in _last:
                steps.append((frame.f_code.co_filename, _last[key], _qualname(frame.f_code), fresh))
            seen[key] = dict(now)
            _last[key] = frame.f_lineno
            if event == "return":
                steps.append((frame.f_code.co_filename, frame.f_lineno, _qualname(frame.f_code), _numbers(arg)))
        return local

    _last: dict[int, int] = {}

    def calls(frame, event, arg):
        if event != "call":
            return None
        if files is None or frame.f_code.co_filename in files:
            return local
        return None
    previous = sys.gettrace()
    result, error = None, None
    sys.settrace(calls)
    try:
        result = fn(*args, **kwargs)
    except (Exception, LearnerTimeout) as err:  # noqa: BLE001: kept as an observation
        error = err
    finally:
        sys.settrace(previous)
    return Lines(steps, result, error)


def _qualname(code) -> str:
    return getattr(code, "co_qualname", code.co_name)


def locate_numbers(learner: list[Lines], reference: list[Lines], rel: float = 1e-9) -> Located | None:
    """For Python-number answers: over the calls whose result differs from
    the reference's, the first line that binds a number the reference never
    has in that call; the same line in every such call, and a line whose
    numbers are wrong in most of the calls it runs in (a line right for most
    inputs computes well: the branch that led to it is the suspect, and
    nothing is said), or nothing is said."""
    places = set()
    runs: dict[tuple, int] = {}
    wrong: dict[tuple, int] = {}
    for mine, theirs in zip(learner, reference):
        if mine.error is not None or theirs.error is not None:
            continue
        want = _numbers(theirs.result)
        known = [n for step in theirs.steps for n in step[3]] + want
        first = None
        for file, line, function, numbers in mine.steps:
            bad = any(not any(math.isclose(n, k, rel_tol=rel, abs_tol=1e-12) for k in known) for n in numbers)
            runs[file, line] = runs.get((file, line), 0) + 1
            wrong[file, line] = wrong.get((file, line), 0) + bad
            if bad and first is None:
                first = (file, line, function)
        got = _numbers(mine.result)
        if len(got) == len(want) and all(math.isclose(g, w, rel_tol=1e-9, abs_tol=1e-12) for g, w in zip(got, want)):
            continue
        if first is None:
            return None
        places.add(first)
    if len(places) != 1:
        return None
    file, line, function = places.pop()
    # Every call ran the same lines: no branch chose the way, so a line wrong for some inputs only is the place.
    one_path = len({frozenset((f, ln) for f, ln, _, _ in mine.steps) for mine in learner if mine.error is None}) == 1
    if 2 * wrong[file, line] <= runs[file, line] and not one_path:
        return None
    return Located(file, line, function, source_line(file, line),
                   [f"the numbers your code makes here are ones the reference never has, in {wrong[file, line]} of "
                    f"the {runs[file, line]} calls that run this line"], kind="value")


def locate_grad_cut(learner: Trace) -> Located | None:
    """The line where the learner's code leaves autograd: a call that reads
    a tensor requiring grad and returns floating values that do not (detach,
    .data, a copy made under no_grad) or Python numbers (item, tolist). Only
    when all such calls sit on one line."""
    if learner.truncated:
        return None
    cuts = [op for op in learner.ops if op.grad_in and not op.grad_out
            and (op.number_out or any(t.is_floating_point() for t in op.outputs))]
    if len({(op.file, op.line) for op in cuts}) != 1:
        return None
    op = cuts[0]
    what = "turns it into Python numbers" if op.number_out else "returns a tensor without a gradient"
    return Located(op.file, op.line, op.function, source_line(op.file, op.line),
                   [f"{op.name} reads a tensor that requires grad and {what}"], kind="grad")


def locate_raise(learner: Trace, reference: Trace | None = None) -> Located | None:
    """Where the traced call raised: with the reference's trace on the same
    inputs, the first wrong value the raising call depends on (a wrong
    value, or the reference's numbers in another shape) when there is one;
    else the error's own frames, or, for a trace made in the grader's jailed
    process, the place it sent."""
    if learner.error is None:
        return None
    if reference is not None:
        try:
            before = _before_raise(learner, reference)
        except Exception:  # noqa: BLE001: the tracer's own failure only costs the place
            before = None
        if before is not None:
            return before
    found = locate_error(learner.error)
    if found is None and learner.raised is not None:
        file, line, function = learner.raised
        kind = str(learner.error) if type(learner.error) is Exception else type(learner.error).__name__  # a sent type name
        found = Located(file, line, function, source_line(file, line), [kind], kind="raises")
    return found


def _before_raise(learner: Trace, reference: Trace) -> Located | None:
    """The place of the first wrong value the call that raised reads, or of
    a value it reads whose numbers are the reference's in another shape."""
    if learner.truncated or reference.truncated or reference.error is not None:
        return None
    if learner.failed is None:
        return _before_a_check(learner, reference)
    failed = learner.ops[learner.failed]
    raises = f"then line {failed.line} raises ({_error_line(learner.error)})"
    if isinstance(learner.error, TypeError) and "float" in str(learner.error) and "int" in str(learner.error):
        division = _true_division_read(failed.file, failed.line)
        if division is not None:  # a count made a float by `/`: the number is wrong, not a tensor
            name, bound = division
            return Located(failed.file, bound, failed.function, source_line(failed.file, bound), [
                f"line {failed.line} passes {name}, a float made by the true division `/` on line {bound}, where a "
                f"count (sizes, repeats) must be an int: `//` divides to an int", raises], kind="sizes",
                also=failed.line, also_code=source_line(failed.file, failed.line))
    reads = [j for j in failed.inputs if j >= 0]
    if not reads:
        return None
    seen = _Analysis(learner, reference)
    frontier = seen.frontier(reads)
    if frontier:
        found = seen.place(frontier)
        if found is not None and found.line != failed.line:
            found.facts.append(raises)
        return found
    if failed.name in _STRIDED_VIEWS and _STRIDE_ERROR in str(learner.error):
        # No wrong value before it: the values are right, their memory layout is one a view cannot merge, and
        # the call that asks for a view is the one to change.
        j = reads[0]
        return Located(failed.file, failed.line, failed.function, source_line(failed.file, failed.line),
                       [f"it reads the value {learner.ops[j].name} makes on line {learner.ops[j].line}, of shape "
                        f"{tuple(failed.input_shapes[0]) if failed.input_shapes else '?'}, and raises "
                        f"({_error_line(learner.error)})"], kind="view")
    shapes = {tuple(t.shape) for op in reference.ops for t in op.outputs} | {tuple(t.shape) for t in reference.inputs}
    for j, slot in zip(failed.inputs, failed.slots or [0] * len(failed.inputs)):
        if j < 0 or slot >= len(learner.ops[j].outputs) or not seen.found[j][slot]:
            continue
        value = learner.ops[j].outputs[slot]
        owners = seen.found[j][slot]
        theirs = [_owner_value(reference, o) for o in owners]
        theirs = [t for t in theirs if t is not None]
        if theirs and all(tuple(t.shape) != tuple(value.shape) for t in theirs) and \
                (tuple(value.shape) not in shapes or any(_one_axis_apart(value.shape, t.shape) for t in theirs)):
            op = learner.ops[j]
            while op.inputs and op.inputs[0] >= 0 and seen.found[op.inputs[0]] and (
                    len(op.inputs) == 1 and op.input_shapes and tuple(op.input_shapes[0]) == tuple(value.shape)
                    or _reshaped_input(learner, seen, reference, op)):
                op = learner.ops[op.inputs[0]]  # back to the call that gave the value this shape (~, .to, clone...)
            if op is not learner.ops[j] and op.outputs and seen.found[op.index] and seen.found[op.index][0]:
                value = op.outputs[0]
                theirs = [t for t in (_owner_value(reference, o) for o in seen.found[op.index][0]) if t is not None]
            return Located(op.file, op.line, op.function, source_line(op.file, op.line),
                           [f"yours: {op.name} gives {_describe_value(value)}",
                            f"the reference has these numbers in shape {tuple(theirs[0].shape)}", raises], kind="shape")
    return (_bounds_before_raise(learner, reference, seen, failed, raises)
            or _cast_before_raise(learner, reference, seen, failed, raises))


def _before_a_check(learner: Trace, reference: Trace) -> Located | None:
    """A raise outside any traced call (a library's own check of its
    arguments, such as a model refusing float ids): the one place the values
    made before it first go wrong, when there is one."""
    if not learner.ops or learner.error is None:
        return None
    seen = _Analysis(learner, reference)
    frontier = seen.frontier(list(range(len(learner.ops))))
    found = seen.place(frontier) if frontier else None
    if found is not None:
        where = locate_error(learner.error)
        found.facts.append(f"then line {where.line if where else '?'} raises ({_error_line(learner.error)})")
    return found


def size_one_axis(longer: tuple, shorter: tuple) -> int | None:
    """The position of the one axis of size 1 that `longer` has and `shorter`
    lacks, all else equal (None when the shapes differ otherwise)."""
    longer, shorter = tuple(longer), tuple(shorter)
    if len(longer) != len(shorter) + 1:
        return None
    return next((i for i in range(len(longer)) if longer[i] == 1 and longer[:i] + longer[i + 1:] == shorter), None)


def _one_axis_apart(shape, other) -> bool:
    """One shape is the other with one more axis of size 1 (a kept or a squeezed axis)."""
    return size_one_axis(shape, other) is not None or size_one_axis(other, shape) is not None


def _reshaped_input(learner: Trace, seen: "_Analysis", reference: Trace, op: Op) -> bool:
    """op's first input already has the reference's numbers one size-1 axis
    apart from the reference's shape: the axis was kept (or lost) earlier."""
    j = op.inputs[0]
    slot = (op.slots or [0])[0]
    if slot >= len(learner.ops[j].outputs) or slot >= len(seen.found[j]):
        return False
    value = learner.ops[j].outputs[slot]
    theirs = [t for t in (_owner_value(reference, o) for o in seen.found[j][slot]) if t is not None]
    return bool(theirs) and all(_one_axis_apart(value.shape, t.shape) for t in theirs)


# Calls that return a view of their input's memory and raise when its strides cannot express the new shape.
_STRIDED_VIEWS = {"view", "view_as"}
_STRIDE_ERROR = "view size is not compatible with input tensor's size and stride"


def _bounds_before_raise(learner: Trace, reference: Trace, seen: "_Analysis", failed: Op, raises: str) -> Located | None:
    """The call that raised reads a value made by a slice, reshape or view
    that the reference makes too, from the same value, with other bounds or
    sizes, on the way to what its own call of that kind reads (a table
    sliced to every row where the reference takes the sequence's): that
    call's line, what each side was given, and the line that bound the
    sizes it read."""
    blame = _blame(failed, learner.ops, seen.found, reference, seen.given)
    if blame is None or blame[2] is None:
        return None
    counterpart = blame[2]
    slots = failed.slots or [0] * len(failed.inputs)
    theirs_slots = counterpart.slots or [0] * len(counterpart.inputs)
    for k, j in enumerate(failed.inputs[:len(counterpart.inputs)]):
        while j >= 0 and learner.ops[j].name in _CASTS | {"contiguous", "clone", "detach"} and learner.ops[j].inputs:
            j = learner.ops[j].inputs[0]    # back through casts and copies to the call that set the shape
        if j < 0 or learner.ops[j].name not in _SIZED or not learner.ops[j].outputs:
            continue
        mine = learner.ops[j]
        wanted = (counterpart.inputs[k], theirs_slots[k])
        owned = _input_owners(mine, learner.ops, seen.found, seen.given)
        for ref_op in reference.ops:
            if not _same_kind(mine, ref_op) or len(ref_op.inputs) != len(mine.inputs) or not ref_op.outputs or \
                    tuple(ref_op.outputs[0].shape) == tuple(mine.outputs[0].shape) or \
                    _path(reference, wanted, (ref_op.index, 0)) is None:
                continue
            ref_slots = ref_op.slots or [0] * len(ref_op.inputs)
            if not all((i, s) in owners for i, s, owners in zip(ref_op.inputs, ref_slots, owned)):
                continue
            sizes = _sizes_differ(mine, ref_op)
            if sizes is None:
                continue
            bound = None if mine.inside else _sizes_bound_at(mine.file, mine.line, mine.name)
            if bound == "elsewhere":
                return None  # the sizes come from names bound on several lines: any of them may be wrong
            second = bound if isinstance(bound, int) and bound != mine.line else None
            return Located(mine.file, mine.line, mine.function, source_line(mine.file, mine.line),
                           [sizes, raises], kind="sizes" if second else "value", also=second,
                           also_code=source_line(mine.file, second) if second else "")
    return None


def _cast_before_raise(learner: Trace, reference: Trace, seen: "_Analysis", failed: Op, raises: str) -> Located | None:
    """The call that raised reads a value the reference's call of its kind
    reads only after a cast (an int64 one-hot met by float weights): the
    line that made it, and the dtype the reference casts it to."""
    blame = _blame(failed, learner.ops, seen.found, reference, seen.given)
    if blame is None or blame[3] not in ("layout", "missing") or blame[2] is None or blame[0].index not in failed.inputs:
        return None
    blamed, _, counterpart, _ = blame
    k = failed.inputs.index(blamed.index)
    slot = (failed.slots or [0] * len(failed.inputs))[k]
    wanted = (counterpart.inputs[k], (counterpart.slots or [0] * len(counterpart.inputs))[k])
    for owner in seen.found[blamed.index][slot] if slot < len(seen.found[blamed.index]) else []:
        path = _path(reference, wanted, owner)
        if path and all(reference.ops[i].name in _CASTS for i in path) and reference.ops[path[0]].outputs:
            got, want = blamed.outputs[slot].dtype, reference.ops[path[0]].outputs[0].dtype
            (file, line, function), second = blamed_lines(blamed, failed)
            return Located(file, line, function, source_line(file, line), [
                f"yours: {blamed.name} gives {_describe_value(blamed.outputs[slot])}",
                f"the reference's {counterpart.name} reads this value cast to {str(want).removeprefix('torch.')}, yours "
                f"reads it as {str(got).removeprefix('torch.')}", raises], kind="cast", also=second,
                also_code=source_line(file, second) if second else "")
    return None


def _owner_value(reference: Trace, owner: Owner) -> torch.Tensor | None:
    i, slot = owner
    if i >= 0:
        return reference.ops[i].outputs[slot] if slot < len(reference.ops[i].outputs) else None
    if i <= LEAF:
        return reference.leaves[LEAF - i] if LEAF - i < len(reference.leaves) else None
    return reference.inputs[-2 - i] if -2 - i < len(reference.inputs) else None


def _error_line(err: BaseException | None) -> str:
    first = (str(err).strip().splitlines() or [""])[0][:160] if err is not None else ""
    return f"{type(err).__name__}: {first}" if err is not None else ""


def locate_error(err: BaseException | None) -> Located | None:
    """The learner's line an error was raised at (its innermost frame there)."""
    if err is None:
        return None
    frames = [t for t in walk_traceback(err.__traceback__) if is_learners_file(t.tb_frame.f_code.co_filename)]
    if not frames:
        return None
    crossed = _crossed_arguments(frames, err)
    if crossed is not None:
        return crossed
    tb = frames[-1]
    code = tb.tb_frame.f_code
    first = (str(err).strip().splitlines() or [""])[0][:200]
    return Located(code.co_filename, tb.tb_lineno, getattr(code, "co_qualname", code.co_name),
                   source_line(code.co_filename, tb.tb_lineno), [f"{type(err).__name__}: {first}"], kind="raises")


def values_at_raise(err: BaseException | None) -> tuple[list[str], Located | None]:
    """What the learner's line that raised was reading, measured in its
    frame: a name holding a value of a type the error names (a tuple, a
    module class's instance), with the line that bound it; a tensor of
    log-probabilities, or one holding inf or nan. ([facts], the binding's
    place or None)."""
    if err is None:
        return [], None
    frames = [t for t in walk_traceback(err.__traceback__) if is_learners_file(t.tb_frame.f_code.co_filename)]
    if not frames:
        return [], None
    tb = frames[-1]
    frame, file, line = tb.tb_frame, tb.tb_frame.f_code.co_filename, tb.tb_lineno
    body = _function_around(file, line)
    if body is None:
        return [], None
    names = list(dict.fromkeys(n.id for n in ast.walk(body) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
                               and n.lineno <= line <= (n.end_lineno or n.lineno)))
    text = str(err)
    facts, place = [], None
    for name in names:
        if name not in frame.f_locals:
            continue
        value = frame.f_locals[name]
        if isinstance(value, torch.Tensor):
            fact = _tensor_at_raise(name, value, "inf" in text or "nan" in text)
            if fact:
                facts.append(fact)
            continue
        kind = type(value).__name__
        if isinstance(value, (bool, int, float, str, type(None))) or not re.search(rf"'{re.escape(kind)}'", text):
            continue
        facts.append(f"at the line that raised, `{name}` is {_short(value)}")
        if place is None:
            place = _binding_of(frames, name, value)
    return facts, place


def _tensor_at_raise(name: str, value: torch.Tensor, error_names_inf: bool) -> str | None:
    """A tensor the raising line read, when it is notable: nan (never meant), inf where the error speaks of
    inf or nan (masked scores hold -inf by design), or log-probabilities."""
    if not value.is_floating_point() or value.numel() == 0:
        return None
    v = value.detach().double()
    nan, inf = int(torch.isnan(v).sum()), int(torch.isinf(v).sum())
    if nan or (inf and error_names_inf):
        what = " and ".join(f"{n} {kind}" for n, kind in ((nan, "nan"), (inf, "inf")) if n)
        return f"at the line that raised, `{name}` holds {what} among its {v.numel()} values"
    if v.dim() and float(v.max()) <= 0 and torch.allclose(v.exp().sum(-1), torch.ones(()).double(), atol=1e-4):
        return (f"at the line that raised, `{name}` holds log-probabilities (every value <= 0, and their exp sums to 1 "
                f"along the last axis): exp() of them are the probabilities")
    return None


def _binding_of(frames: list, name: str, value) -> Located | None:
    """The line that gave `name` its value: its one binding earlier in the
    same function, or, for a parameter, the caller's argument when that is
    an attribute `self.X` set once in the caller's source (`self.eps = eps,`)."""
    tb = frames[-1]
    file, line = tb.tb_frame.f_code.co_filename, tb.tb_lineno
    body = _function_around(file, line)
    bindings = [node.lineno for node in ast.walk(body) if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign))
                and any(isinstance(t, ast.Name) and t.id == name for n in (
                    node.targets if isinstance(node, ast.Assign) else [node.target]) for t in ast.walk(n))] if body else []
    if len(bindings) == 1 and bindings[0] < line:
        at = bindings[0]
        return Located(file, at, tb.tb_frame.f_code.co_name, source_line(file, at),
                       [f"`{name}` is bound here, to {_short(value)}"], kind="bound")
    code = tb.tb_frame.f_code
    params = list(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount])
    if name not in params or len(frames) < 2:
        return None
    caller = frames[-2]
    c_file, c_line = caller.tb_frame.f_code.co_filename, caller.tb_lineno
    c_body = _function_around(c_file, c_line)
    attrs = {n.attr for n in ast.walk(c_body) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
             and n.value.id == "self" and n.lineno <= c_line <= (n.end_lineno or n.lineno)} if c_body else set()
    try:
        tree = ast.parse("".join(linecache.getlines(c_file)))
    except (SyntaxError, ValueError):
        return None
    for attr in attrs:
        if caller.tb_frame.f_locals.get("self") is None or getattr(caller.tb_frame.f_locals["self"], attr, None) is not value:
            continue
        sets = [n for n in ast.walk(tree) if isinstance(n, ast.Assign) and any(
            isinstance(t, ast.Attribute) and t.attr == attr and isinstance(t.value, ast.Name) and t.value.id == "self"
            for t in n.targets)]
        if len(sets) == 1:
            at = sets[0].lineno
            return Located(c_file, at, "", source_line(c_file, at),
                           [f"`self.{attr}`, passed as `{name}` at line {c_line}, is set here to "
                            f"{_short(value)}"], kind="bound")
    return None


def _crossed_arguments(frames: list, err: BaseException) -> Located | None:
    """A call of the learner's own function, on the way to the error, that
    passes by position a name of the callee's parameters to another of its
    parameters (`attn(x, cos, sin, layer_idx, cache)` into
    forward(self, x, cos, sin, cache, layer_idx)): the calling line, and what
    each parameter received."""
    for caller, callee in zip(frames, frames[1:]):
        code = callee.tb_frame.f_code
        params = list(code.co_varnames[:code.co_argcount])
        file, line = caller.tb_frame.f_code.co_filename, caller.tb_lineno
        body = _function_around(file, line)
        if body is None or not params:
            continue
        calls = [n for n in ast.walk(body) if isinstance(n, ast.Call) and n.lineno <= line <= (n.end_lineno or n.lineno)
                 and not any(isinstance(a, ast.Starred) for a in n.args)]
        for call in calls:
            name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
            bound = params[1:] if params[0] == "self" else params
            if name != code.co_name and code.co_name != "forward" or len(call.args) > len(bound):
                continue
            crossed = [(a.id, p) for a, p in zip(call.args, bound)
                       if isinstance(a, ast.Name) and a.id != p and a.id in bound]
            if not crossed:
                continue
            received = callee.tb_frame.f_locals
            said = ", ".join(f"`{given}` lands in `{param}`" + (f" (= {_short(received[param])})" if param in received
                                                                 else "") for given, param in crossed)
            owner = getattr(code, "co_qualname", code.co_name)
            return Located(file, line, getattr(caller.tb_frame.f_code, "co_qualname", caller.tb_frame.f_code.co_name),
                           source_line(file, line),
                           [f"{said}: positional arguments bind in the order of {owner}({', '.join(params)}); "
                            f"pass them in that order or by keyword", f"then it raises ({_error_line(err)})"],
                           kind="order")
    return None


def _short(value) -> str:
    """A value in a few words: a tensor's shape, a number or a short container's repr, an object's class."""
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)}"
    if isinstance(value, (int, float, str, bool, type(None))):
        return repr(value)[:40]
    if isinstance(value, (tuple, list)) and all(isinstance(v, (int, float, str, bool, type(None))) for v in value):
        return f"the {type(value).__name__} {repr(value)[:40]}"
    kind = type(value).__name__
    return f"an instance of {kind} ({'an nn.Module' if isinstance(value, torch.nn.Module) else 'not a tensor'})"


def locate_dtype(learner: Trace, want: torch.dtype) -> Located | None:
    """Where a result's dtype is fixed: a call that makes a tensor from no
    tensor at all (torch.zeros, torch.tensor, arange...) with a floating
    dtype other than `want`, on the output's path. Only when it is one line."""
    outputs = tensors_in(learner.result)
    if learner.truncated or not outputs or outputs[0].dtype == want:
        return None
    ops = learner.ops
    ancestors: set[int] = set()
    stack = [learner.producer[id(t)] for t in outputs if learner.producer.get(id(t), -1) >= 0]
    while stack:
        i = stack.pop()
        if i not in ancestors:
            ancestors.add(i)
            stack += [j for j in ops[i].inputs if j >= 0]
    made = [ops[i] for i in sorted(ancestors) if ops[i].factory and ops[i].outputs
            and ops[i].outputs[0].is_floating_point() and ops[i].outputs[0].dtype != want]
    if len({(op.file, op.line) for op in made}) != 1:
        return None
    op = made[0]
    got = str(op.outputs[0].dtype).removeprefix("torch.")
    return Located(op.file, op.line, op.function, source_line(op.file, op.line),
                   [f"{op.name} makes a new {got} tensor here, whatever the inputs' dtype "
                    f"({str(want).removeprefix('torch.')}); pass dtype=... (and device=...) of an input"], kind="dtype")
