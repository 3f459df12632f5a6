"""The recheck's trusted side: the jailed child as the parent speaks to it
(Child), the learner's functions and modules as proxies whose calls run
there (make_proxy, remote_module), and what the parent accepts back: values
rebuilt from their tagged forms only (from_plain), parameter state only
under names it already knew (mirror_modules), optimizer state only in the
shape its own optimizer has (load_optimizer_states), and the learner's
exceptions by builtin type, their text only when it is a library message
(learner_exception). torch and the checks are imported inside functions:
the trusted process limits its memory (run.main) before they load."""
from __future__ import annotations

import pickle
import re
import subprocess
import sys
import time

from ...learner_values import known_sizes, shown_size
from ..sandbox.kernel import as_jail_starter, course_env_for_jail, jailed
from ..wire import receive, send
from .ipython_cells import NOTES
from .protocol import (CHILD_FLAG, MODULE, PROCESS_ENDED, REMOTE_NAMES, CallbackRef, NotRecheckable, Opaque,
                       RemoteRef, UnreadableReply, known_type_name, load_plain, module_grads, reading_reply,
                       set_module_grads, shown_path)


def from_plain(tagged, child=None):
    """Rebuild a value in the parent, accepting only the tagged forms. A
    learner's module becomes a RemoteModule bound to `child`."""
    import torch

    tag = tagged[0]
    if tag == "T":
        t = tagged[1]
        if type(t) is not torch.Tensor:
            raise TypeError("not a plain tensor")
        if tagged[2] and (t.is_floating_point() or t.is_complex()):
            t.requires_grad_(True)
        return t
    if tag == "v" and (tagged[1] is None or type(tagged[1]) in (bool, int, float, str, complex)):
        return tagged[1]
    if tag == "dtype":
        dtype = getattr(torch, str(tagged[1]).replace("torch.", ""), None)
        if isinstance(dtype, torch.dtype):
            return dtype
    if tag in ("tuple", "list"):
        items = [from_plain(v, child) for v in tagged[1]]
        return tuple(items) if tag == "tuple" else items
    if tag == "dict":
        return {str(k): from_plain(v, child) for k, v in tagged[1]}
    if tag == "ref":
        if child is None:
            raise NotRecheckable("a reference to a trusted object where none was given")
        return child.remote[int(tagged[1])]
    if tag == "module":
        if child is None:
            raise NotRecheckable("a module where none can be called")
        return remote_module(child, int(tagged[1]), known_type_name(tagged[2], "Module"), tagged[3])
    if tag == "opaque":
        return Opaque(str(tagged[1]))
    raise TypeError(f"unexpected value tag {tag!r}")


class Child:
    """The jailed learner process, spoken to through pipes. When the
    learner's code hangs or kills it, the next request starts a fresh one and
    replays the cells that ran fine, so one bad exercise costs only its own
    points (within the overall time budget)."""

    def __init__(self, jail, timeout: float, total: float):
        self.jail = jail
        self.timeout = timeout
        self.end = time.monotonic() + total  # all calls together, so many slow calls cannot outlast the grader
        self.callbacks: list = []
        self.remote: list = []  # the check's objects the child holds RemoteObjects for
        self.unreachable: str | None = None  # what the learner's code asked that the recheck refused
        self.replay: list[tuple[str, str]] = []
        self.files: set[str] = set()  # the labels of the submission's cells, whose lines a trace may name
        self.skipped: set[str] = set()  # what the cells ran without (ipython_cells.NOTES keys)
        self._spawn()

    def _spawn(self) -> None:
        cmd = jailed([sys.executable, "-I", "-m", MODULE, CHILD_FLAG])
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env=as_jail_starter(course_env_for_jail(self.jail)), start_new_session=True)
        self.dead: str | None = None

    def run_cell(self, label: str, source: str) -> None:
        """Execute a cell; raises TimeoutError/RuntimeError if it hangs or kills the process.
        What the cell ran without (ipython_cells.NOTES keys) goes to `skipped`."""
        answer = self.request(("exec", label, source))
        self.replay.append((label, source))
        said = answer[1] if answer[0] == "ok" and len(answer) == 2 and type(answer[1]) is list else []
        self.skipped.update(key for key in said if type(key) is str and key in NOTES)

    def _revive(self) -> None:
        if time.monotonic() >= self.end:
            raise RuntimeError(f"the learner's process is gone ({self.dead}) and the recheck's time is up")
        self._spawn()
        for label, source in self.replay:
            self.request(("exec", label, source))

    def request(self, message) -> tuple:
        if self.dead:
            self._revive()
        deadline = min(time.monotonic() + self.timeout, self.end)
        try:
            send(self.proc.stdin.fileno(), pickle.dumps(message))
            while True:
                answer = load_plain(receive(self.proc.stdout.fileno(), deadline))
                if answer[0] == "callback":
                    self._serve_callback(answer)
                elif answer[0] == "remote":
                    self._serve_remote(answer)
                else:
                    return answer
        except TimeoutError:
            self.kill(f"no answer within {self.timeout:.0f} s")
            raise TimeoutError(f"the learner's code did not finish within {self.timeout:.0f} s") from None
        except (EOFError, BrokenPipeError, ConnectionError):
            self.kill("it ended")
            raise RuntimeError(PROCESS_ENDED) from None
        except Exception:  # noqa: BLE001: whatever decoding the child's bytes raised, its text is theirs
            self.kill("its reply could not be read")
            raise UnreadableReply() from None

    def _serve_callback(self, message) -> None:
        _, index, args, kwargs = message
        try:
            value = self.callbacks[index](*from_plain(args), **from_plain(kwargs))
            reply = ("value", value)
        except BaseException as err:  # the check's own helper failed on the learner's input
            reply = self._refusal(err)
        send(self.proc.stdin.fileno(), pickle.dumps(reply))

    def _refusal(self, err: BaseException) -> tuple:
        """The answer to a learner's request that failed here. Whatever it
        raised (NotRecheckable included: a BaseException) goes back to the
        learner's code as an error and never leaves this request: escaping,
        it would turn the learner's own request into the check's "not
        rechecked" verdict."""
        if isinstance(err, KeyboardInterrupt):
            raise err
        if isinstance(err, NotRecheckable):
            self.unreachable = self.unreachable or f"gave the check's code something the recheck cannot carry ({err})"
        return ("raise", f"{type(err).__name__}: {err}"[:500])

    def _serve_remote(self, message) -> None:
        """Run a learner's call or attribute read on one of the check's objects."""
        import torch
        _, index, op, name, args, kwargs, grad = message
        try:
            obj = self.remote[int(index)]
            if op == "getattr":
                if name not in REMOTE_NAMES:
                    # the name is shown only if the check's object has it: any other is the learner's text
                    shown = f".{name}" if isinstance(name, str) and name.isidentifier() and hasattr(obj, name) \
                        else "an attribute it does not have"
                    self.unreachable = self.unreachable or (
                        f"used {shown} of the check's {type(obj).__name__}, which the recheck does not allow "
                        f"(only {', '.join(sorted(REMOTE_NAMES))})")
                    raise AttributeError(f"the recheck lets the learner's code use only {', '.join(sorted(REMOTE_NAMES))} "
                                         f"of the check's model and cache, not .{name}")
                value = getattr(obj, name)
            elif op == "call":
                with torch.set_grad_enabled(bool(grad)):
                    value = obj(*from_plain(args, self), **from_plain(kwargs, self))
            elif op == "next":
                value = next(obj)
            else:
                raise ValueError(f"unknown request {op!r}")
            reply = self._remote_value(value)
        except StopIteration:
            reply = ("stop",)
        except BaseException as err:  # the learner's request failed, as it would have in the kernel
            reply = self._refusal(err)
        send(self.proc.stdin.fileno(), pickle.dumps(reply))

    def _remote_value(self, value) -> tuple:
        """Tensors and plain values travel as copies; the check's objects,
        their bound methods and iterators stay here, as references."""
        import torch
        if isinstance(value, torch.Tensor):
            return ("value", value.detach().clone().requires_grad_(value.requires_grad and value.is_floating_point()))
        if callable(value) or isinstance(value, _remote_types()) or hasattr(value, "__next__"):
            self.remote.append(value)
            return ("ref", len(self.remote) - 1)
        return ("value", value)

    def kill(self, why: str) -> None:
        self.dead = self.dead or why
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def _remote_types() -> tuple:
    """The check's objects that stay in the parent (see the module docstring)."""
    import tinylm
    return (tinylm.Transformer, tinylm.KVCache)


def _encode_args(child: Child, value, by_ref: bool = True):
    """Parent -> child: the check's model and cache become remote references
    (if by_ref), other callables (but modules and classes) callback
    references; everything else is pickled as is."""
    from torch import nn
    if by_ref and isinstance(value, _remote_types()):
        child.remote.append(value)
        return RemoteRef(len(child.remote) - 1)
    if callable(value) and not isinstance(value, (nn.Module, type)):
        child.callbacks.append(value)
        return CallbackRef(len(child.callbacks) - 1)
    if isinstance(value, tuple):
        return tuple(_encode_args(child, v, by_ref) for v in value)
    if isinstance(value, list):
        return [_encode_args(child, v, by_ref) for v in value]
    return value


def parameter_names(values: list) -> set[tuple[int, str]]:
    """(argument index, parameter name) of every module argument, taken
    before the call: the only names a reply may set (see mirror_modules)."""
    from torch import nn
    return {(i, name) for i, v in enumerate(values) if isinstance(v, nn.Module)
            for name, _ in v.named_parameters(remove_duplicate=False)}


def mirror_modules(values: list, state: list, names: set[tuple[int, str]]) -> None:
    """Apply the child's parameter state to the parent's module arguments:
    same identity tag -> the very same Parameter object. The parent's own
    Parameter at a name is kept and updated in place where it fits, so an
    optimizer holding it stays attached. Only the parameter names the
    module had before the call are followed: the names come from the
    learner's process, and a forged one ('__class__.double') would
    otherwise walk getattr/setattr anywhere in this process."""
    import torch
    from torch import nn
    made: dict[int, nn.Parameter] = {}
    for index, name, tag, tensor, rg in state:
        if (index, name) not in names:
            raise ValueError(f"the learner's process sent state for {shown_path(name)}, which is not a parameter "
                             "of the check's module; refused")
        module = values[index]
        if type(tensor) is not torch.Tensor or type(tag) is not int:
            raise TypeError("not a plain tensor")
        *path, leaf = name.split(".")
        owner = module
        for part in path:
            owner = getattr(owner, part)
        if tag not in made:
            current = owner._parameters.get(leaf) if isinstance(owner, nn.Module) else None
            if (isinstance(current, nn.Parameter) and current.shape == tensor.shape
                    and all(current is not p for p in made.values())):
                with torch.no_grad():
                    current.copy_(tensor)
                current.requires_grad_(bool(rg))
                made[tag] = current
            else:
                made[tag] = nn.Parameter(tensor, requires_grad=bool(rg))
        setattr(owner, leaf, made[tag])


def load_optimizer_states(values: list, states: list) -> None:
    """The optimizers' state after the learner's step. It comes from the
    learner's process, so it must have the shape the parent's optimizer
    already has: the same parameter groups with the same settings' names
    and parameter indices, per-parameter state of numbers and tensors
    (or None: SGD's momentum buffer without momentum)."""
    import torch
    for index, state in states:
        optimizer = values[index] if type(index) is int and 0 <= index < len(values) else None
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise ValueError("the learner's process sent an optimizer state for an argument that is no optimizer")
        mine = optimizer.state_dict()
        groups = state.get("param_groups") if type(state) is dict and set(state) == {"state", "param_groups"} else None
        if (type(groups) is not list or len(groups) != len(mine["param_groups"])
                or any(type(g) is not dict or set(g) != set(m) or g["params"] != m["params"]
                       for g, m in zip(groups, mine["param_groups"]))
                or type(state["state"]) is not dict
                or any(k not in {i for m in mine["param_groups"] for i in m["params"]} or type(v) is not dict
                       or any(type(x) not in (torch.Tensor, int, float, bool, type(None)) for x in v.values())
                       for k, v in state["state"].items())):
            raise ValueError("the learner's process sent an optimizer state that does not match the check's optimizer; "
                             "refused")
        optimizer.load_state_dict(state)


# What the learner's code raised in the child is the learner's text, and the
# child may have been handed anything the notebook kernel read (a hidden
# test's source, read through a side channel and encoded, base64 say, to
# pass as text). So its message leaves the recheck only when it is one of
# the library's own messages below, whose only free parts are numbers (the
# checks' hints read them: a shape error names the axes); any other is
# replaced by LEARNER_MESSAGE_WITHHELD, and the type shown is a builtin
# exception's name or "Exception".
_NUM = r"-?\d{1,7}"
_SIZES = rf"\[(?:{_NUM}(?:, {_NUM}){{0,7}})?\]"
LIBRARY_MESSAGES = tuple(re.compile(p) for p in (
    rf"(?:RuntimeError: )?mat1 and mat2 shapes cannot be multiplied \({_NUM}x{_NUM} and {_NUM}x{_NUM}\)",
    rf"(?:RuntimeError: )?The size of tensor a \({_NUM}\) must match the size of tensor b \({_NUM}\) at "
    rf"non-singleton dimension {_NUM}",
    rf"(?:RuntimeError: )?Sizes of tensors must match except in dimension {_NUM}\. Expected size {_NUM} but got "
    rf"size {_NUM} for tensor number {_NUM} in the list\.",
    rf"(?:RuntimeError: )?shape '{_SIZES}' is invalid for input of size {_NUM}",
    rf"(?:RuntimeError: )?The expanded size of the tensor \({_NUM}\) must match the existing size \({_NUM}\) at "
    rf"non-singleton dimension {_NUM}\.  Target sizes: {_SIZES}\.  Tensor sizes: {_SIZES}",
    rf"(?:IndexError: )?index {_NUM} is out of bounds for dimension {_NUM} with size {_NUM}",
    rf"(?:IndexError: )?Dimension out of range \(expected to be in range of \[{_NUM}, {_NUM}\], but got {_NUM}\)",
    rf"(?:ValueError: )?KVCache is full: it holds {_NUM} of max_seq_len={_NUM} positions and cannot take {_NUM} "
    r"more\. Call cache\.reset\(\) for a new prompt, or generate fewer tokens\.",
))
LEARNER_MESSAGE_WITHHELD = ("(its message is not carried into the grader's verdict; run the cell in your "
                            "notebook to read it)")


def learner_exception(type_name, text, exercise: str | None, sizes=()) -> Exception:
    """The exception the trusted side raises for one the learner's code
    raised in the child: NotImplementedError as such where the learner's own
    `raise` raised it (the checks say "not implemented yet"; one torch
    raised comes as LIBRARY_NOT_IMPLEMENTED and is told as any other), the
    course's own refusal of delegation (Delegation) where its text is the one the grader itself writes for `exercise`, any
    other as its builtin type (else Exception) with a library message of
    LIBRARY_MESSAGES whose every number is a size of the call's inputs
    (`sizes`, input_sizes) or at most learner_values.MAX_SHOWN_SIZE (a forged message
    would otherwise carry the learner's digits), or LEARNER_MESSAGE_WITHHELD."""
    import builtins

    import tinylm

    from ...checks.core import delegation_message
    from ...checks.framework.failure import LIBRARY_NOT_IMPLEMENTED, RAISED_BY_LEARNER
    text = text if isinstance(text, str) else ""
    if type_name == "NotImplementedError":  # the learner's own `raise`: a stub left in place
        stub = NotImplementedError()
        setattr(stub, RAISED_BY_LEARNER, True)
        return stub
    if type_name == LIBRARY_NOT_IMPLEMENTED:  # torch's, inside a call of the learner's: an error like any other
        type_name = "NotImplementedError"
    if type_name == "Delegation" and exercise:
        original = getattr(tinylm, exercise, None)
        if original is not None and text == delegation_message(exercise, original):
            return type("Delegation", (Exception,), {})(text)
    known = getattr(builtins, type_name, None) if isinstance(type_name, str) and type_name.isidentifier() else None
    shown = type_name if isinstance(known, type) and issubclass(known, Exception) else "Exception"
    library = (len(text) <= 500 and any(p.fullmatch(text) for p in LIBRARY_MESSAGES)
               and all(shown_size(int(n), sizes) == str(int(n)) for n in re.findall(r"\d+", text)))
    return type(shown, (Exception,), {})(text if library else LEARNER_MESSAGE_WITHHELD)


def input_sizes(values) -> set[int]:
    """The sizes the trusted side gave a call: its tensors' axes (and their
    merged runs) and its ints; a message naming these says nothing new."""
    import torch
    shapes = [v.shape for v in values if isinstance(v, torch.Tensor)]
    return known_sizes(*shapes) | {v for v in values if type(v) is int}


def call_child(child: Child, head: tuple, args, kwargs, owner=None):
    """Send one call, re-raise the learner's exception by name, or return
    the plain result with module (and optimizer) arguments mirrored.

    With an optimizer among the arguments (a training step), modules travel
    as copies even where they would stay as remote objects: the learner's
    backward pass and step must run on them in the child. The check's random
    state and the modules' .grad travel with each call, and the optimizer's
    state and the .grad come back."""
    import torch
    values = [*args, *kwargs.values()]
    names = parameter_names(values)
    sizes = input_sizes([*values, *(owner.parameters() if owner is not None else ())])
    by_ref = not any(isinstance(v, torch.optim.Optimizer) for v in values)
    encoded = (_encode_args(child, args, by_ref), {k: _encode_args(child, v, by_ref) for k, v in kwargs.items()})
    extra = (torch.get_rng_state(), module_grads(values)) if head[0] == "call" else ()
    answer = child.request((*head, *encoded, *extra))
    with reading_reply(child):
        raised = learner_exception(answer[1], answer[2], head[1] if head[0] == "call" else None, sizes) \
            if answer[0] == "raise" else None
        if raised is None:
            mirror_modules(values, answer[2], names)
            if head[0] == "call":
                load_optimizer_states(values, answer[3])
                set_module_grads(values, answer[4])
                reached = [values[i] for i in answer[5] if isinstance(i, int) and 0 <= i < len(values)]
            else:  # a module's forward: its parameters reached by name, its arguments by position
                params = dict(owner.named_parameters(remove_duplicate=False)) if owner is not None else {}
                reached = [params[n] for n in answer[3] if isinstance(n, str) and n in params]
                reached += [values[i] for i in answer[3] if isinstance(i, int) and 0 <= i < len(values)]
            result = from_plain(answer[1], child)
    if raised is not None:
        raise raised
    if isinstance(result, torch.Tensor):
        result.recheck_gradient_reaches = reached  # read by checks.framework.measure.gradient_reaches
    return result


def _trace_request(child: Child, head: tuple, args, kwargs):
    """Parent side of a trace (see _child_trace): the learner's calls and
    values, rebuilt as a checks.trace.Trace whose places are lines of the
    submission's own cells (child.files); an incomplete trace on any failure."""
    from ...checks import trace as tracing
    try:
        encoded = (_encode_args(child, args), {k: _encode_args(child, v) for k, v in kwargs.items()})
        answer = child.request((*head, *encoded))
        data = from_plain(answer[1]) if answer[0] == "trace" else None
    except (TimeoutError, RuntimeError, NotRecheckable, TypeError, ValueError):
        data = None
    return tracing.from_plain_trace(data, child.files) if isinstance(data, dict) else \
        tracing.Trace([], {}, None, None, [], True, [])


def remote_module(child: Child, handle: int, type_name: str, params: list):
    """An nn.Module in the parent standing for a module the learner's code
    built in the child: the same parameter names, values and sharing; calling
    it sends the current parameter values and the inputs to the child. Any
    other attribute makes the exercise "not rechecked"."""
    import torch
    from torch import nn

    class RemoteModule(nn.Module):
        def forward(self, *args, **kwargs):
            state = [(n, p.detach().clone()) for n, p in self.named_parameters(remove_duplicate=False)]
            return call_child(child, ("method", handle, state), args, kwargs, owner=self)

        def recheck_trace(self, args, kwargs):
            """The learner's forward traced in the child (checks.trace.record_learner)."""
            state = [(n, p.detach().clone()) for n, p in self.named_parameters(remove_duplicate=False)]
            return _trace_request(child, ("trace_method", handle, state), args, kwargs)

        def __getattr__(self, name):
            try:
                return super().__getattr__(name)
            except AttributeError:
                if name.startswith("_") or not self.__dict__.get("ready"):  # torch internals, or still building
                    raise
                raise NotRecheckable(f"the check uses `.{name}` of the learner's {type_name}, which the recheck "
                                     "cannot reach outside the sandbox") from None

        def __repr__(self):
            # Its submodule and parameter names are the learner's free text:
            # a check's message that describes the module must not carry them.
            count = sum(p.numel() for p in self.parameters())
            return f"{type_name}(built in the learner's process, {count} parameters)"

    RemoteModule.__name__ = RemoteModule.__qualname__ = type_name
    module = RemoteModule()
    made: dict[int, nn.Parameter] = {}
    for name, tag, tensor, rg in params:
        if type(tensor) is not torch.Tensor:
            raise TypeError("not a plain tensor")
        if not _is_parameter_path(name):
            raise ValueError(f"the learner's module sent the parameter name {shown_path(name)}: a parameter name is "
                             "a dotted path of identifiers without a leading underscore, or of indices; refused")
        made.setdefault(tag, nn.Parameter(tensor, requires_grad=bool(rg)))
        *path, leaf = name.split(".")
        owner = module
        for part in path:
            if part not in owner._modules:
                owner.add_module(part, nn.Module())
            owner = owner._modules[part]
        owner.register_parameter(leaf, made[tag])
    module.__dict__["ready"] = True
    return module


def _is_parameter_path(name) -> bool:
    """A dotted path of identifiers without a leading underscore, or of
    indices (an nn.ModuleList's '0')."""
    return type(name) is str and all((part.isidentifier() and not part.startswith("_"))
                                     or (part.isascii() and part.isdigit()) for part in name.split("."))


def make_proxy(child: Child, name: str):
    def proxy(*args, **kwargs):
        return call_child(child, ("call", name), args, kwargs)

    proxy.__name__ = proxy.__qualname__ = name
    proxy.recheck_trace = lambda args, kwargs: _trace_request(child, ("trace", name), args, kwargs)
    return proxy
