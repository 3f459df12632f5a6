"""The recheck's untrusted side, run in the jail as
`python -I -m autograder.grading.recheck --child`: it executes the cells the
parent sends (the course's setup, the learner's answers and own cells) and
answers calls of the learner's functions and modules with plain data
(protocol.to_plain). The learner's prints go to stderr, never into the
protocol's pipe. The checks (and torch) are imported inside functions: the
child imports them once it runs in its jail, the parent never needs them
to start a child."""
from __future__ import annotations

import os
import pickle

from ..wire import receive, send
from .ipython_cells import run_cell
from .protocol import (CallbackRef, RemoteObject, RemoteRef, dump_plain, module_grads, parameter_entries,
                       set_module_grads, to_plain)


def main() -> int:
    """Serve the parent's requests on stdin until it closes them; replies on stdout."""
    handles: dict[int, object] = {}  # the modules the learner's code returned, by handle

    def plain(value):
        return to_plain(value, handles)
    proto_in, proto_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)  # learner prints go to stderr, never into the protocol
    ns: dict = {"__name__": "__main__"}
    from ...checks.core import refuse_delegation
    from ...checks.framework.failure import raised_name

    def reply(*message):
        send(proto_out, dump_plain(message))

    def callback_stub(index):
        def call_parent(*args, **kwargs):
            send(proto_out, dump_plain(("callback", index, plain(args), plain(kwargs))))
            answer = pickle.loads(receive(proto_in))
            if answer[0] == "raise":
                raise RuntimeError(answer[1])
            return answer[1]
        return call_parent

    def ask_parent(index, op, name, args, kwargs):
        import torch
        send(proto_out, dump_plain(("remote", index, op, name, plain(args), plain(kwargs),
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
                reply("ok", run_cell(source, label, ns))
            except BaseException as err:  # noqa: BLE001 (sys.exit in a cell is the learner's problem)
                reply("raise", type(err).__name__, str(err)[:500])
        elif kind == "method":  # a module returned earlier: load the parent's parameter values, call it
            _, handle, state, args, kwargs = message
            module = handles.get(handle)
            args, kwargs = unwrap(args), {k: unwrap(v) for k, v in kwargs.items()}
            try:
                _load_parameters(module, state)
                with refuse_delegation(type(module).__name__, module):  # same rule as in the notebook
                    result = module(*args, **kwargs)
            except BaseException as err:  # noqa: BLE001
                reply("raise", raised_name(err), str(err)[:500])
                continue
            values = [*args, *kwargs.values()]
            # the module's parameters by name, its arguments by position: a forward that cuts its input off
            # the graph (x.detach()) shows as an argument not reached
            reached = _gradient_reach(result, [*module.named_parameters(remove_duplicate=False), *enumerate(values)])
            reply("result", plain(result), _module_state(values), reached)
        elif kind in ("trace", "trace_method"):
            reply("trace", plain(_child_trace(message, ns, unwrap, handles)))
        elif kind == "call":
            _, name, args, kwargs, rng_state, grads = message
            args, kwargs = unwrap(args), {k: unwrap(v) for k, v in kwargs.items()}
            set_module_grads([*args, *kwargs.values()], grads)
            if name not in ns:
                reply("raise", "NameError", f"name '{name}' is not defined (its answer cell is missing or failed)")
                continue
            try:
                import torch
                torch.set_rng_state(rng_state)  # the check's random state (e.g. the dropout masks it expects)
                with refuse_delegation(name, ns[name]):  # tinylm's own `name` may not do the exercise
                    result = ns[name](*args, **kwargs)
            except BaseException as err:  # noqa: BLE001
                reply("raise", raised_name(err), str(err)[:500])
                continue
            values = [*args, *kwargs.values()]
            reached = _gradient_reach(result, enumerate(values))
            reply("result", plain(result), _module_state(values), _optimizer_states(values), module_grads(values), reached)


def _child_trace(message, ns: dict, unwrap, handles: dict) -> dict | None:
    """Child side of a trace request: the learner's function (by name) or a
    module it returned (by handle) run once more under the tracer
    (checks.trace), its calls and values sent back as plain data; None when
    it cannot run. The learner's source never travels: the parent holds the
    submitted cells and reads the lines itself."""
    from ...checks import trace as tracing
    from ...checks.core import refuse_delegation
    if message[0] == "trace":
        _, name, args, kwargs = message
        fn = ns.get(name)
    else:
        _, handle, state, args, kwargs = message
        fn = handles.get(handle) if isinstance(handle, int) else None
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
    from ...checks.core import reached_by_gradient
    try:
        return reached_by_gradient(result, candidates)
    except RuntimeError:  # no graph to differentiate, as in the kernel: nothing is reached
        return []

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
            state += [(i, *entry) for entry in parameter_entries(v)]
    return state
