"""The trusted out-of-process recheck of one submission.

The notebook kernel's verdict can be bent by the code it grades (patched
torch.allclose, a Tensor subclass, an __eq__ that is always true, an AST
transformer stripping asserts, expected values read from the check's frame).
So the grade worker asks a second opinion, with the roles split:

* a trusted process (this module, as the parent) executes the course's own
  setup cells and the full test cells, hidden tests included, taken from
  solutions/, not from the submission. The learner's functions in that
  namespace are proxies;
* an untrusted child, in a jail (autograder.grading.jail), executes the setup
  cells, the answer cells, whose source the parent extracted from the
  submitted notebook by grade id, and the code cells the learner added
  (helpers), in notebook order; the course's own demo cells and test cells
  do not run there, and no learner cell ever runs in the parent. A proxy
  call sends the arguments to the child, the child calls the learner's
  function and sends the result back as plain data (tensors, numbers,
  strings, tuples, lists, dicts) that the parent loads with
  torch.load(weights_only=True), after checking from the archive's zip
  directory that it decodes to at most MAX_MESSAGE bytes (load_plain).

The comparison (allclose, shapes, variants) therefore runs in a process the
learner's code never touched, on values it never saw the expected side of.
Callables passed by a check run in the parent (the child calls back), and
nn.Module arguments travel to the child and their parameters, including
which ones are shared, come back after the call (with an optimizer among the
arguments, a training step: the optimizer travels with its module, the
check's random state and the parameters' .grad go along, and the optimizer's
state and the .grad come back). A module the learner's code
returns (e.g. from its class) stays in the child; the parent gets a stand-in
with the same parameters whose forward runs in the child. Parameter names
from the child are accepted only where the parent knows them (the module
argument's own names before the call) or, for a module built in the child,
as dotted identifiers without a leading underscore. A check that needs
more of a learner's module than its parameters and forward makes the exercise
"not rechecked": the grade scores it zero and flags it for a hand regrade,
never a silent pass. A learner's request that the parent cannot serve (a
module handed to the check's callback or model) is answered with an error
that the learner's code sees; it never raises through the check itself.
The parent itself runs under an address-space limit (limit_memory).

The check's own model and KV cache (tinylm.Transformer, tinylm.KVCache)
never leave the parent: the child gets remote objects whose calls and
attribute reads run on the parent's objects, with the child's gradient mode.
So forward hooks, train/eval mode and the cache's state that a check watches
(generation, evaluation) are observed in the trusted process. The learner's
code may use only the names in REMOTE_NAMES on them; any other fails the
exercise in the recheck, with a message that names it (a hand regrade may
be due; a "not rechecked" here would let a submission opt out on purpose).

    python -m autograder.grading.recheck ASSIGNMENT NOTEBOOK [--timeout S] [--memory-mb MB]   (prints JSON)
"""
from __future__ import annotations

import argparse
import ast
import contextlib
import io
import json
import linecache
import os
import pickle
import re
import select
import struct
import subprocess
import sys
import time

RECHECK_TIMEOUT = 60.0


# --------------------------------------------------------------------------
# framing, shared by both sides

def send(fd: int, payload: bytes) -> None:
    data = struct.pack("<Q", len(payload)) + payload
    while data:
        data = data[os.write(fd, data):]


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes:
    chunks, got = [], 0
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError("no answer from the learner's code in time")
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            raise EOFError("the learner's process ended")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


MAX_MESSAGE = 256 * 1024 * 1024


def receive(fd: int, deadline: float | None = None) -> bytes:
    (n,) = struct.unpack("<Q", _read_exact(fd, 8, deadline))
    if n > MAX_MESSAGE:
        raise ValueError(f"message of {n} bytes is over the {MAX_MESSAGE}-byte limit")
    return _read_exact(fd, n, deadline)


# --------------------------------------------------------------------------
# plain data: what may cross from the child to the parent

# Child side: modules the learner's code returned, kept so the parent can
# call them later by handle (None in the parent, which never registers any).
_HANDLES: dict[int, object] | None = None


def to_plain(value, depth: int = 0):
    """Tagged plain form of a learner's value (runs in the child)."""
    import torch
    from torch import nn

    if depth > 20:
        return ("opaque", "deeply nested value")
    if isinstance(value, torch.Tensor):
        with torch._C.DisableTorchFunction():
            rg = bool(value.requires_grad)
            plain = torch.Tensor.detach(value).cpu().clone().as_subclass(torch.Tensor)
        return ("T", plain, rg)
    if type(value) is RemoteObject:
        return ("ref", object.__getattribute__(value, "_index"))
    if value is None or type(value) in (bool, int, float, str, complex):
        return ("v", value)
    if isinstance(value, torch.dtype):
        return ("dtype", str(value))
    if isinstance(value, (tuple, list)):
        return ("tuple" if isinstance(value, tuple) else "list", [to_plain(v, depth + 1) for v in value])
    if type(value) is dict and all(type(k) is str for k in value):
        return ("dict", [[k, to_plain(v, depth + 1)] for k, v in value.items()])
    if isinstance(value, nn.Module):
        if _HANDLES is None:
            return ("opaque", type(value).__name__)
        _HANDLES[id(value)] = value
        return ("module", id(value), type(value).__name__, _parameters(value))
    return ("opaque", type(value).__name__)


class Opaque:
    """Stands in, in the parent, for a learner object that is not plain data."""

    def __init__(self, type_name: str):
        self.type_name = known_type_name(type_name, "object")

    def __repr__(self):
        return f"<{self.type_name} object from the learner's code>"


def known_type_name(name, otherwise: str) -> str:
    """A type name the learner's code sent, shown only where it names a type
    of Python, torch, torch.nn or tinylm (a class of the learner's own is
    `otherwise`): a free name could carry text out of the recheck."""
    import builtins

    import tinylm
    import torch
    if not (isinstance(name, str) and name.isidentifier()):
        return otherwise
    return name if any(isinstance(getattr(m, name, None), type) for m in (builtins, torch, torch.nn, tinylm)) \
        else otherwise


def shown_path(name) -> str:
    """A dotted name the learner's code sent, quoted where each part names
    an attribute of a tensor or a module, or an index (what a forged name is
    made of); any other is free text, and not shown."""
    import torch
    parts = name.split(".") if isinstance(name, str) and len(name) <= 80 else None
    known = set(dir(torch.Tensor)) | set(dir(torch.nn.Module))
    return repr(name) if parts and all(p in known or p.isdigit() for p in parts) else "a name of its own"


class NotRecheckable(BaseException):
    """Raised through a check (BaseException: chk.call does not catch it)
    when a learner object cannot be compared outside the sandbox."""


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


def dump_plain(value) -> bytes:
    import torch
    buf = io.BytesIO()
    torch.save(value, buf)
    return buf.getvalue()


class RefusedReply(ValueError):
    """A reply from the learner's process that is not decoded (or not used)."""


# What a verdict says of any reply the trusted side could not decode or use,
# whatever was wrong with it: the text of a decoding error is made of the
# child's bytes (a tag, a pickle's global name, a key, a parameter name, a
# size), and a kernel that passed hidden tests to its recheck child would
# read them back on the feedback page.
UNREADABLE_REPLY = "the learner's process sent a reply the grader could not read"
PROCESS_ENDED = "the learner's process ended before it answered"


class UnreadableReply(RuntimeError):
    """Raised in place of any error met while decoding a child's reply; its
    message is always UNREADABLE_REPLY."""

    def __init__(self):
        super().__init__(UNREADABLE_REPLY)


@contextlib.contextmanager
def reading_reply(child=None):
    """Decode a reply from the learner's process inside this: an exception
    (not NotRecheckable, a BaseException with the trusted side's own words)
    becomes UnreadableReply, and the child is ended, so the next call starts
    a fresh one."""
    try:
        yield
    except Exception:  # noqa: BLE001: the error's text would be made of the child's bytes
        if child is not None:
            child.kill("its reply could not be read")
        raise UnreadableReply() from None


def load_plain(data: bytes, limit: int | None = None):
    """torch.load(weights_only=True) of a reply, once its zip archive's
    central directory shows that decoding it takes at most `limit` bytes
    (MAX_MESSAGE): torch.save stores entries uncompressed, so a compressed
    entry (a 5 GiB tensor of zeros deflates to 5 MB) is refused before
    anything is inflated in this process."""
    import torch
    limit = MAX_MESSAGE if limit is None else limit
    _check_archive(data, limit)
    value = torch.load(io.BytesIO(data), weights_only=True)
    # A tensor may also be a view far larger than its storage (stride 0):
    # what the checks would materialise is bounded the same way.
    logical = sum(t.numel() * t.element_size() for t in _tensors(value))
    if logical > limit:
        raise RefusedReply(f"refused: its tensors span {logical} bytes, over the {limit}-byte limit")
    return value


def _tensors(value) -> list:
    """Every tensor in a loaded reply, however deep (iterative, cycles seen once)."""
    import torch
    found, todo, seen = [], [value], set()
    while todo:
        v = todo.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        if isinstance(v, torch.Tensor):
            found.append(v)
        elif isinstance(v, (tuple, list)):
            todo += v
        elif isinstance(v, dict):
            todo += v.values()
    return found


def _check_archive(data: bytes, limit: int) -> None:
    import zipfile
    try:
        entries = zipfile.ZipFile(io.BytesIO(data)).infolist()
    except (zipfile.BadZipFile, ValueError, EOFError) as err:
        raise RefusedReply(f"refused: not a torch.save archive ({err})") from None
    for entry in entries:
        if entry.compress_type != zipfile.ZIP_STORED or entry.file_size != entry.compress_size:
            raise RefusedReply(f"refused undecoded: a compressed entry ({entry.compress_size} bytes that decode to "
                               f"{entry.file_size}), which torch.save never writes")
    decoded = sum(entry.file_size for entry in entries)
    if decoded > limit:
        raise RefusedReply(f"refused undecoded: it decodes to {decoded} bytes, over the {limit}-byte limit")


# --------------------------------------------------------------------------
# child: runs the learner's answer cells and answers calls

class CallbackRef:
    def __init__(self, index: int):
        self.index = index


class RemoteRef:
    """Parent -> child: an object of the check's that stays in the parent."""

    def __init__(self, index: int):
        self.index = index


# What the learner's code may use of the check's model and cache (the remote
# objects): enough for generation and evaluation, nothing that could change
# the trusted objects beyond what those exercises do themselves.
REMOTE_NAMES = frozenset({"training", "eval", "train", "config", "parameters", "device",
                          "reset", "length", "batch_size", "max_seq_len"})


class RemoteObject:
    """Child side of a RemoteRef: calling it, reading an attribute or taking
    next() asks the parent, which answers with a value or another reference."""

    __slots__ = ("_index", "_ask")

    def __init__(self, index: int, ask):
        object.__setattr__(self, "_index", index)
        object.__setattr__(self, "_ask", ask)

    def __call__(self, *args, **kwargs):
        return self._ask(self._index, "call", "", args, kwargs)

    def __getattr__(self, name):
        if name.startswith("_"):  # Python's and torch's own probes (__torch_function__, ...) stay local
            raise AttributeError(name)
        return self._ask(self._index, "getattr", name, (), {})

    def __setattr__(self, name, value):
        raise AttributeError(f"cannot set .{name} on the check's object from the learner's code")

    def __iter__(self):
        return self

    def __next__(self):
        return self._ask(self._index, "next", "", (), {})


def _child_main() -> int:
    global _HANDLES
    _HANDLES = {}
    proto_in, proto_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)  # learner prints go to stderr, never into the protocol
    ns: dict = {"__name__": "__main__"}
    from ..checks.core import refuse_delegation

    def reply(*message):
        send(proto_out, dump_plain(message))

    def callback_stub(index):
        def call_parent(*args, **kwargs):
            send(proto_out, dump_plain(("callback", index, to_plain(args), to_plain(kwargs))))
            answer = pickle.loads(receive(proto_in))
            if answer[0] == "raise":
                raise RuntimeError(answer[1])
            return answer[1]
        return call_parent

    def ask_parent(index, op, name, args, kwargs):
        import torch
        send(proto_out, dump_plain(("remote", index, op, name, to_plain(args), to_plain(kwargs),
                                    torch.is_grad_enabled())))
        answer = pickle.loads(receive(proto_in))
        if answer[0] == "raise":
            raise AttributeError(answer[1]) if op == "getattr" else RuntimeError(answer[1])
        if answer[0] == "stop":
            raise StopIteration
        return RemoteObject(answer[1], ask_parent) if answer[0] == "ref" else answer[1]

    def unwrap(value):
        if isinstance(value, RemoteRef):
            return RemoteObject(value.index, ask_parent)
        if isinstance(value, CallbackRef):
            return callback_stub(value.index)
        if isinstance(value, tuple):
            return tuple(unwrap(v) for v in value)
        if isinstance(value, list):
            return [unwrap(v) for v in value]
        return value

    while True:
        try:
            message = pickle.loads(receive(proto_in))
        except EOFError:
            return 0
        kind = message[0]
        if kind == "exec":
            _, label, source = message
            try:
                exec(compile(source, label, "exec"), ns)
                reply("ok")
            except BaseException as err:  # noqa: BLE001 (sys.exit in a cell is the learner's problem)
                reply("raise", type(err).__name__, str(err)[:500])
        elif kind == "method":  # a module returned earlier: load the parent's parameter values, call it
            _, handle, state, args, kwargs = message
            module = _HANDLES.get(handle)
            args, kwargs = unwrap(args), {k: unwrap(v) for k, v in kwargs.items()}
            try:
                _load_parameters(module, state)
                with refuse_delegation(type(module).__name__, module):  # same rule as in the notebook
                    result = module(*args, **kwargs)
            except BaseException as err:  # noqa: BLE001
                reply("raise", type(err).__name__, str(err)[:500])
                continue
            reached = _gradient_reach(result, module.named_parameters(remove_duplicate=False))
            reply("result", to_plain(result), _module_state([*args, *kwargs.values()]), reached)
        elif kind in ("trace", "trace_method"):
            reply("trace", to_plain(_child_trace(message, ns, unwrap)))
        elif kind == "call":
            _, name, args, kwargs, rng_state, grads = message
            args, kwargs = unwrap(args), {k: unwrap(v) for k, v in kwargs.items()}
            _set_grads([*args, *kwargs.values()], grads)
            if name not in ns:
                reply("raise", "NameError", f"name '{name}' is not defined (its answer cell is missing or failed)")
                continue
            try:
                import torch
                torch.set_rng_state(rng_state)  # the check's random state (e.g. the dropout masks it expects)
                with refuse_delegation(name, ns[name]):  # tinylm's own `name` may not do the exercise
                    result = ns[name](*args, **kwargs)
            except BaseException as err:  # noqa: BLE001
                reply("raise", type(err).__name__, str(err)[:500])
                continue
            values = [*args, *kwargs.values()]
            reached = _gradient_reach(result, enumerate(values))
            reply("result", to_plain(result), _module_state(values), _optimizer_states(values), _grads(values), reached)


def _child_trace(message, ns: dict, unwrap) -> dict | None:
    """Child side of a trace request: the learner's function (by name) or a
    module it returned (by handle) run once more under the tracer
    (checks.trace), its calls and values sent back as plain data; None when
    it cannot run. The learner's source never travels: the parent holds the
    submitted cells and reads the lines itself."""
    from ..checks import trace as tracing
    from ..checks.core import refuse_delegation
    if message[0] == "trace":
        _, name, args, kwargs = message
        fn = ns.get(name)
    else:
        _, handle, state, args, kwargs = message
        fn = _HANDLES.get(handle) if isinstance(handle, int) else None
        name = type(fn).__name__
        if fn is not None:
            _load_parameters(fn, state)
    if fn is None:
        return None
    args, kwargs = unwrap(args), {k: unwrap(v) for k, v in kwargs.items()}
    try:
        with refuse_delegation(name, fn):
            return tracing.plain_trace(tracing.record(fn, args, kwargs, learner=True))
    except BaseException:  # noqa: BLE001: a trace that cannot be made is no trace
        return None


def _parameters(module) -> list:
    """[(name, identity tag, tensor, requires_grad)] of a module's parameters."""
    return [(name, id(p), *to_plain(p)[1:]) for name, p in module.named_parameters(remove_duplicate=False)]


def _load_parameters(module, state) -> None:
    import torch
    params = dict(module.named_parameters(remove_duplicate=False))
    with torch.no_grad():
        for name, tensor in state:
            if name in params and params[name].shape == tensor.shape:
                if params[name].dtype == tensor.dtype:
                    params[name].copy_(tensor)
                else:  # the check converted the module (e.g. .to(torch.bfloat16)): so does its copy here
                    params[name].data = tensor.to(params[name].device)


def _gradient_reach(result, candidates) -> list:
    """The keys of the (key, tensor) candidates a backward pass from the
    result reaches. Only plain data crosses back to the parent, so the
    check's "does a gradient reach the weight?" is answered here, where the
    learner's autograd graph exists."""
    from ..checks.core import reached_by_gradient
    try:
        return reached_by_gradient(result, candidates)
    except RuntimeError:  # no graph to differentiate, as in the kernel: nothing is reached
        return []


def _grads(values) -> list:
    """[(arg index, parameter name, .grad)] of every module argument: a pickled
    Parameter leaves its .grad behind, and a training step without zero_grad
    must still see the previous step's gradients."""
    from torch import nn
    return [(i, name, p.grad.detach().clone()) for i, v in enumerate(values) if isinstance(v, nn.Module)
            for name, p in v.named_parameters() if p.grad is not None]


def _set_grads(values, grads) -> None:
    import torch
    from torch import nn
    for index, name, grad in grads:
        module = values[index] if type(index) is int and 0 <= index < len(values) else None
        if isinstance(module, nn.Module) and type(grad) is torch.Tensor:
            param = dict(module.named_parameters()).get(name)
            if param is not None and param.shape == grad.shape:
                param.grad = grad


def _optimizer_states(values) -> list:
    """[(arg index, state_dict)] of every optimizer argument after the call:
    its moments and step counts, so the next call continues from them."""
    import torch
    return [(i, v.state_dict()) for i, v in enumerate(values) if isinstance(v, torch.optim.Optimizer)]


def _module_state(values) -> list:
    """Parameters of every nn.Module argument after the call: [(arg index,
    name, identity tag, tensor, requires_grad)], so in-place changes and
    sharing (weight tying) can be mirrored in the parent."""
    from torch import nn
    state = []
    for i, v in enumerate(values):
        if isinstance(v, nn.Module):
            state += [(i, *entry) for entry in _parameters(v)]
    return state


# --------------------------------------------------------------------------
# parent: trusted checks against proxies

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
        self._spawn()

    def _spawn(self) -> None:
        from .sandbox import course_env_for_jail
        cmd = [sys.executable, "-m", "autograder.grading.jail", "--", sys.executable, "-I", "-m", "autograder.grading.recheck", "--child"]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env=course_env_for_jail(self.jail), start_new_session=True)
        self.dead: str | None = None

    def run_cell(self, label: str, source: str) -> None:
        """Execute a cell; raises TimeoutError/RuntimeError if it hangs or kills the process."""
        self.request(("exec", label, source))
        self.replay.append((label, source))

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


def _parameter_names(values: list) -> set[tuple[int, str]]:
    """(argument index, parameter name) of every module argument, taken
    before the call: the only names a reply may set (see _mirror_modules)."""
    from torch import nn
    return {(i, name) for i, v in enumerate(values) if isinstance(v, nn.Module)
            for name, _ in v.named_parameters(remove_duplicate=False)}


def _mirror_modules(values: list, state: list, names: set[tuple[int, str]]) -> None:
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


def _load_optimizer_states(values: list, states: list) -> None:
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
# test's source, through a side channel): issue 28 found base64 of it in a
# feedback page. So its message leaves the recheck only when it is one of
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


def learner_exception(type_name, text, exercise: str | None) -> Exception:
    """The exception the trusted side raises for one the learner's code
    raised in the child: NotImplementedError as such (the checks say "not
    implemented yet"), the course's own refusal of delegation (Delegation)
    where its text is the one the grader itself writes for `exercise`, any
    other as its builtin type (else Exception) with a library message of
    LIBRARY_MESSAGES, or LEARNER_MESSAGE_WITHHELD."""
    import builtins

    import tinylm

    from ..checks.core import delegation_message
    text = text if isinstance(text, str) else ""
    if type_name == "NotImplementedError":
        return NotImplementedError()
    if type_name == "Delegation" and exercise:
        original = getattr(tinylm, exercise, None)
        if original is not None and text == delegation_message(exercise, original):
            return type("Delegation", (Exception,), {})(text)
    known = getattr(builtins, type_name, None) if isinstance(type_name, str) and type_name.isidentifier() else None
    shown = type_name if isinstance(known, type) and issubclass(known, Exception) else "Exception"
    library = len(text) <= 500 and any(p.fullmatch(text) for p in LIBRARY_MESSAGES)
    return type(shown, (Exception,), {})(text if library else LEARNER_MESSAGE_WITHHELD)


def _call_child(child: Child, head: tuple, args, kwargs, owner=None):
    """Send one call, re-raise the learner's exception by name, or return
    the plain result with module (and optimizer) arguments mirrored.

    With an optimizer among the arguments (a training step), modules travel
    as copies even where they would stay as remote objects: the learner's
    backward pass and step must run on them in the child. The check's random
    state and the modules' .grad travel with each call, and the optimizer's
    state and the .grad come back."""
    import torch
    values = [*args, *kwargs.values()]
    names = _parameter_names(values)
    by_ref = not any(isinstance(v, torch.optim.Optimizer) for v in values)
    encoded = (_encode_args(child, args, by_ref), {k: _encode_args(child, v, by_ref) for k, v in kwargs.items()})
    extra = (torch.get_rng_state(), _grads(values)) if head[0] == "call" else ()
    answer = child.request((*head, *encoded, *extra))
    with reading_reply(child):
        raised = learner_exception(answer[1], answer[2], head[1] if head[0] == "call" else None) \
            if answer[0] == "raise" else None
        if raised is None:
            _mirror_modules(values, answer[2], names)
            if head[0] == "call":
                _load_optimizer_states(values, answer[3])
                _set_grads(values, answer[4])
                reached = [values[i] for i in answer[5] if isinstance(i, int) and 0 <= i < len(values)]
            else:  # a module's forward: the reached keys are its parameter names
                params = dict(owner.named_parameters(remove_duplicate=False)) if owner is not None else {}
                reached = [params[n] for n in answer[3] if n in params]
            result = from_plain(answer[1], child)
    if raised is not None:
        raise raised
    if isinstance(result, torch.Tensor):
        result.recheck_gradient_reaches = reached  # read by checks.core.gradient_reaches
    return result


def _trace_request(child: Child, head: tuple, args, kwargs):
    """Parent side of a trace (see _child_trace): the learner's calls and
    values, rebuilt as a checks.trace.Trace whose places are lines of the
    submission's own cells (child.files); an incomplete trace on any failure."""
    from ..checks import trace as tracing
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
            return _call_child(child, ("method", handle, state), args, kwargs, owner=self)

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
        return _call_child(child, ("call", name), args, kwargs)

    proxy.__name__ = proxy.__qualname__ = name
    proxy.recheck_trace = lambda args, kwargs: _trace_request(child, ("trace", name), args, kwargs)
    return proxy


# Checks whose verdict is the notebook kernel's alone (reported "not
# rechecked", which the grade scores zero and flags for a hand regrade). None
# since the recheck carries the model and optimizer state of a training step
# and the check's random state across (see _call_child).
KERNEL_ONLY: dict[str, str] = {}


def _learner_cells(submitted, course_notebooks: list) -> dict[str | None, list[str]]:
    """The code cells the learner added (helper functions, experiments),
    keyed by the grade id of the course cell they follow in the submission
    (None: before every course cell), so the child runs them in notebook
    order. A cell is the learner's when it carries no grade id of the course
    (none at all, or one the course does not have) and its text is not one
    of the course's own cells (the release's demo cells grade nothing: they
    run in the kernel only)."""
    from ..notebook_format import nbg
    ids = {nbg(c).get("grade_id") for nb in course_notebooks for c in nb.cells} - {None}
    course_text = {c.source.strip() for nb in course_notebooks for c in nb.cells if c.cell_type == "code"}
    added: dict[str | None, list[str]] = {}
    anchor = None
    for cell in submitted.cells:
        meta = cell.metadata.get("nbgrader")
        gid = meta.get("grade_id") if isinstance(meta, dict) else None
        if isinstance(gid, str) and gid in ids:
            anchor = gid
        elif cell.cell_type == "code" and isinstance(cell.source, str) and cell.source.strip() not in course_text:
            added.setdefault(anchor, []).append(cell.source)
    return added


def recheck_notebook(assignment: str, notebook_path: str, timeout: float = RECHECK_TIMEOUT, jail=None,
                     total: float = 4 * RECHECK_TIMEOUT) -> dict:
    """{grade cell id: {"status": "pass"|"fail"|"not rechecked", "message": str, "diagnoses": [dict]}}
    (diagnoses: the failing check calls' CheckFailed.diagnosis, capped_diagnosis)."""
    from .. import course
    from ..notebook_format import defined_names, is_answer, is_check, nbg, read, setup_cells

    source = read(course.source_notebook(assignment))
    try:
        submitted = read(notebook_path)
        answers = {}
        for cell in submitted.cells:
            meta = cell.metadata.get("nbgrader", {})
            if cell.cell_type == "code" and isinstance(meta, dict) and meta.get("solution"):
                answers.setdefault(meta.get("grade_id"), cell.source)
        added = _learner_cells(submitted, [source, read(course.release_notebook(assignment))])
    except Exception:  # unreadable: every exercise fails, the intake said why
        answers, added = {}, {}
    setup = setup_cells(source)
    from ..checks import core as checks_core
    checks_core.CALL_TIME_LIMIT = None  # the learner's calls run in the child, under the Child's own time limits
    child = Child(jail, timeout, total)
    trusted: dict = {"__name__": "__recheck__"}
    results: dict = {}

    def run_in_child(label: str, text: str) -> None:
        # The learner's own text, kept here for display only (a located line in a diagnosis): never executed here.
        linecache.cache[label] = (len(text), None, text.splitlines(True), label)
        child.files.add(label)
        try:
            child.run_cell(label, text)
        except (TimeoutError, RuntimeError):
            pass  # the cell hung or ended the process: it defines nothing, the checks that need it fail

    try:
        # Setup, answers and the learner's own cells in notebook order, in the
        # child; the learner's cells never run in this process.
        for n, text in enumerate(added.get(None, [])):
            run_in_child(f"<learner cell {n} at the top>", text)
        for cell in source.cells:
            gid = nbg(cell).get("grade_id")
            if cell in setup:
                child.run_cell(f"<setup {gid}>", cell.source)
                with contextlib.redirect_stdout(io.StringIO()):
                    exec(compile(cell.source, f"<setup {gid}>", "exec"), trusted)
            elif is_answer(cell):
                run_in_child(f"<answer {gid}>", answers.get(gid, ""))
                for name in defined_names(cell.source):
                    trusted[name] = make_proxy(child, name)
            for n, text in enumerate(added.get(gid, []) if gid else []):
                run_in_child(f"<learner cell {n} after {gid}>", text)
        for cell in source.cells:
            if not is_check(cell):
                continue
            gid = nbg(cell)["grade_id"]
            if gid in KERNEL_ONLY:
                results[gid] = {"status": "not rechecked", "message": f"kernel verdict only: this check {KERNEL_ONLY[gid]}"}
                continue
            child.unreachable = None
            results[gid] = _run_check(cell.source, trusted)
            if child.unreachable and results[gid]["status"] == "fail":
                # Not "not rechecked": that would keep the kernel's verdict, and
                # touching an unlisted name on purpose would then buy a pass.
                results[gid]["message"] = (f"the learner's code {child.unreachable}; a hand regrade may be due. "
                                           f"{results[gid]['message']}")[:1000]
    finally:
        child.kill("recheck finished")
    return results


# A verdict carries at most this many diagnoses, one per failing check call.
MAX_DIAGNOSES = 8


def _run_check(source: str, ns: dict) -> dict:
    """Run a test cell statement by statement. A failing check call (an
    expression statement) does not stop the calls after it, so the verdict
    carries the diagnosis of every call, hidden ones included (feedback
    shows only what this trusted run observed); any failure fails the cell,
    and a failing statement of another kind stops it."""
    from ..checks.core import capped_diagnosis
    failures: list[str] = []
    diagnoses: list[dict] = []
    for node in ast.parse(source).body:
        code = compile(ast.Module(body=[node], type_ignores=[]), "<test cell>", "exec")
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                exec(code, ns)
        except NotRecheckable as err:
            return {"status": "not rechecked", "message": str(err)}
        except Exception as err:  # noqa: BLE001: a failed check, in whatever form
            # The located line is the learner's own text: it travels as a field (framed as theirs on every
            # page), not inside the check's message.
            text = "\n".join(line for line in str(err).strip().splitlines() if not line.strip().startswith("Where:"))
            text = (text or type(err).__name__)[:1000]
            if text not in failures:
                failures.append(text)
                found = getattr(err, "diagnosis", None)
                if found is not None and len(diagnoses) < MAX_DIAGNOSES:
                    diagnoses.append(capped_diagnosis(found.to_dict()))  # the fields feedback and the report read
            if not isinstance(node, ast.Expr):
                break
    if not failures:
        return {"status": "pass", "message": ""}
    return {"status": "fail", "message": "\n\n".join(failures)[:3000], "diagnoses": diagnoses}


# The trusted process gets the jailed child's address-space limit, but never
# less than this: its honest recheck of the largest notebook (09) peaks at
# 0.8 GB of address space (VmPeak, measured with torch 2.13.0+cpu on
# 2026-12-01), and it may hold a few MAX_MESSAGE replies at once.
TRUSTED_MEMORY_FLOOR_MB = 2048


def trusted_memory_mb(limits) -> int:
    return max(int(limits.memory_mb), TRUSTED_MEMORY_FLOOR_MB)


def limit_memory(memory_mb: int) -> None:
    """Cap this process's address space (the soft limit: the jailed child,
    started from here, sets its own from the hard one). A reply that would
    still inflate past it fails its exercise with a MemoryError instead of
    taking the grading machine's memory."""
    import resource
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (cap if hard == resource.RLIM_INFINITY else min(cap, hard), hard))


def recheck_args(assignment: str, notebook, limits) -> list[str]:
    """The command-line arguments of the trusted recheck of one submission."""
    return [assignment, str(notebook), "--timeout", str(limits.wall_s / 4), "--total", str(limits.wall_s * 0.8),
            "--memory-mb", str(trusted_memory_mb(limits))]


# main prints a line starting with this before the verdicts: when the
# checks began and ended (epoch seconds), for grade's stage timing.
TIMING_MARK = "tinylm-recheck-timing "


def parse_output(stdout: str) -> dict:
    """The verdicts main printed (its last line), with its timing line, if
    any, under "__timing__" (grade_one takes it out before reconciling)."""
    lines = stdout.strip().splitlines()
    verdicts = json.loads(lines[-1])
    marks = [line[len(TIMING_MARK):] for line in lines if line.startswith(TIMING_MARK)]
    try:
        verdicts["__timing__"] = json.loads(marks[-1]) if marks else None
    except ValueError:  # only the timing is lost
        verdicts["__timing__"] = None
    return verdicts


def recheck_submission(assignment: str, notebook, limits) -> dict:
    """Run the recheck in its own trusted process (the grade worker stays
    small, and this one runs under its own address-space limit), with the
    child jailed under `limits`. Never raises: a recheck that did not
    complete is {"__error__": {"status": "error", ...}}."""
    from .. import course
    cmd = [sys.executable, "-m", "autograder.grading.recheck", *recheck_args(assignment, notebook, limits)]
    try:
        proc = subprocess.run(cmd, cwd=course.ROOT, capture_output=True, text=True, timeout=limits.wall_s,
                              env=dict(os.environ, OMP_NUM_THREADS="1", NBGRADER_EXECUTION="autograde"))
        if proc.returncode == 0:
            return parse_output(proc.stdout)
        reason = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    except subprocess.TimeoutExpired:
        reason = f"the recheck took longer than {limits.wall_s:.0f} s"
    return {"__error__": {"status": "error", "message": f"the recheck did not complete: {reason}"[:500]}}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--child"]:
        return _child_main()
    p = argparse.ArgumentParser(prog="python -m autograder.grading.recheck")
    p.add_argument("assignment")
    p.add_argument("notebook")
    p.add_argument("--timeout", type=float, default=RECHECK_TIMEOUT, help="seconds per call of the learner's code")
    p.add_argument("--total", type=float, default=4 * RECHECK_TIMEOUT, help="seconds for all calls together")
    p.add_argument("--memory-mb", type=int, default=0, help="address-space limit of this trusted process (0: none)")
    args = p.parse_args(argv)
    if args.memory_mb:
        limit_memory(args.memory_mb)  # before torch is imported, so nothing escapes it
    from .sandbox import jail_for_recheck
    began = time.time()
    with jail_for_recheck() as jail:
        results = recheck_notebook(args.assignment, args.notebook, args.timeout, jail, args.total)
    print(TIMING_MARK + json.dumps({"start": began, "end": time.time()}))
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
