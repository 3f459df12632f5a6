"""Recording a run for the tracer (see __init__).

Both sides run once more on the same inputs under a recorder (a torch
TorchFunctionMode) that keeps every tensor each torch call returns. A
learner's call is attributed to a line of the exercise's own code: the
innermost frame of the cell that defines the checked function (so a helper
from another cell counts for the line that called it), else the innermost
frame of any learner code (a notebook cell, or a file outside torch, tinylm
and the autograder). A call inside nn.Linear or inside tinylm counts for the
learner's line that made it. The reference's calls are all kept: its
intermediate values are what a right answer passes through.
"""
from __future__ import annotations

import linecache
import sys
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch.overrides import TorchFunctionMode

from ..learner_code import LearnerTimeout, is_learners_file


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


LAYOUT_OPS = {"view", "reshape", "transpose", "permute", "flatten", "unflatten", "squeeze", "unsqueeze", "contiguous",
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
            if inside and not inplace and any(t is i for i in inputs):
                continue  # a library's call giving back the very tensor it read (a model's .long() of int64 ids)
                # made nothing: the value keeps its maker, not the line that called the library
            self.producer[id(t)] = index
            self.slot[id(t)] = k
        self.alive += inputs + outs


REDUCTIONS = {"mean", "sum", "amax", "amin", "max", "min", "softmax", "log_softmax", "norm", "var", "std", "prod",
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


def source_line(file: str, line: int) -> str:
    text = linecache.getline(file, line).strip()
    return text if len(text) <= MAX_CODE else text[:MAX_CODE - 1] + "…"


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
            fresh = [n for k, v in now.items() if k not in before or before[k] is not v for n in numbers_in(v)]
            if fresh and key in _last:
                steps.append((frame.f_code.co_filename, _last[key], _qualname(frame.f_code), fresh))
            seen[key] = dict(now)
            _last[key] = frame.f_lineno
            if event == "return":
                steps.append((frame.f_code.co_filename, frame.f_lineno, _qualname(frame.f_code), numbers_in(arg)))
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


# -- Python numbers: what each line of the learner's code assigns ------------------------
def numbers_in(value, depth: int = 0) -> list[float]:
    """The numbers in a value: ints and floats (not bools), one-element tensors, and those inside tuples,
    lists and dicts."""
    if isinstance(value, bool):
        return []
    if isinstance(value, (int, float)):
        return [float(value)]
    if isinstance(value, torch.Tensor) and value.numel() == 1 and not value.is_complex():
        return [float(value.detach().cpu().double())]
    if depth < 2 and isinstance(value, (tuple, list)):
        return [n for v in value[:16] for n in numbers_in(v, depth + 1)]
    if depth < 2 and isinstance(value, dict):
        return [n for v in list(value.values())[:16] for n in numbers_in(v, depth + 1)]
    return []
