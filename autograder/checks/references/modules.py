"""What a learner's nn.Module holds: plain tensor attributes where Parameters
or buffers belong, tensors registered in another place than a CPU build
registers them, and buffers saved with the weights."""
from __future__ import annotations

import contextlib
import copy
import io
import sys

import torch
from torch import nn

from .. import trace
from ..framework.check import Check
from ..framework.calling import globals_of, guarded_call
from ..learner_code import is_learners_file


def plain_tensors(module: nn.Module, names: list[str]) -> list[str]:
    """The names in `names` that the module holds as plain tensor attributes (not Parameters, not buffers)."""
    def plain(name):
        owner, _, attribute = name.rpartition(".")
        holder = module
        for part in owner.split(".") if owner else ():
            # the registered submodules only, as get_submodule finds them, without the module's own __getattr__
            # (a module the grader's recheck stands in for answers an unknown name by refusing the recheck)
            holder = holder._modules.get(part)
            if holder is None:
                return False
        value = vars(holder).get(attribute)
        return isinstance(value, torch.Tensor) and not isinstance(value, nn.Parameter)
    return [name for name in names if plain(name)]


def saved_buffers(chk: Check, cls, args: tuple, module: nn.Module, extra: list[str]) -> str | None:
    """When keys the learner's state_dict has beyond the reference's are
    buffers their module registers: what that costs a checkpoint, and the fix
    (the line that registers one is located by building the module again)."""
    buffers = dict(module.named_buffers())
    saved = [name for name in extra if name in buffers]
    if not saved:
        return None
    chk.locate_with(lambda: registering_line(cls, args, {name.split(".")[-1] for name in saved}))
    keys = ", ".join(f"'{name}'" for name in saved[:4]) + (", ..." if len(saved) > 4 else "")
    what = chk.fn_name
    return (f"your {what}'s state_dict has {keys}, which tinylm's {what} (and Hugging Face's) does not have (measured: "
            f"{'a buffer' if len(saved) == 1 else 'buffers'} your module registers): register_buffer saves a tensor "
            f"with the weights, so a checkpoint of tinylm's or Hugging Face's model no longer loads into yours with "
            f"load_state_dict(strict=True) (missing key {keys}), nor a checkpoint of yours into theirs (unexpected key "
            f"{keys}); " + ("keep a number as a plain attribute (self.eps = eps), and "
                            if any(buffers[name].dim() == 0 for name in saved) else "")
            + "register a tensor that must not be saved with register_buffer(name, tensor, persistent=False)")


def registered_elsewhere(chk: Check, cls, args: tuple) -> bool:
    """The row ELSEWHERE_ROW: cls(*args) built with the notebook's DEVICE naming the CPU and another device registers
    the same parameters and buffers (a Parameter moved with .to(DEVICE) is a plain tensor once the device differs).
    Measured only where the learner's code reads a torch.device from its globals and both builds run. False when
    the row fails (now or before)."""
    if any(r.name == ELSEWHERE_ROW for r in chk.rows) or not _device_globals(cls):
        return all(r.ok for r in chk.rows if r.name == ELSEWHERE_ROW)
    here, there = _built_with_device(cls, args, torch.device("cpu")), _built_with_device(cls, args, ELSEWHERE)
    if here is None or there is None:
        return True
    mine, theirs = _registered(here), _registered(there)
    lost = [n for n in mine if theirs.get(n) != mine[n]]
    gained = [n for n in theirs if n not in mine]
    if chk.require(ELSEWHERE_ROW, not lost and not gained, f"lost {lost[:3]}, gained {gained[:3]}"):
        return True
    names = " and ".join(f"`{name}`" for _, name in _device_globals(cls))
    built = (f"built with {names} naming another device than the CPU (the meta device, as a GPU would be), your "
             f"{chk.fn_name} registers")
    if not lost:
        chk.diagnose(f"{built} {gained[:3]}, which it does not register on the CPU: what a module registers must not "
                     "depend on the device it is built for")
        return False
    name, more = lost[0], f"; {len(lost) - 1} more names differ alike" if len(lost) > 1 else ""
    plain = bool(plain_tensors(there, [name]))
    missing = (f"{built} no {mine[name]} `{name}` (measured: built with {names} = cpu it does{more}): on a GPU it "
               f"would be absent from {mine[name]}s() and the state_dict, never trained, saved or loaded")
    chk.diagnose(missing + ("; there it is a plain tensor attribute: .to(DEVICE) (or .cuda()) of a Parameter returns a "
                            "plain tensor when the device differs; create the tensor on the device, "
                            "nn.Parameter(torch.ones(dim, device=DEVICE)), or make it on the CPU and let "
                            "model.to(DEVICE) move the whole model" if plain else
                            "; what a module registers must not depend on the device it is built for"))
    chk.locate_with(lambda: unregistering_line(cls, args, {n.rpartition(".")[2] for n in lost}))
    return False


def registering_line(cls, args: tuple, names: set) -> trace.Located | None:
    """The learner's line that registers a saved buffer named in `names`,
    seen by building cls(*args) again with nn.Module.register_buffer watched."""
    found = []
    register = nn.Module.register_buffer

    def watched(self, name, tensor, persistent=True):
        caller = sys._getframe(1)
        if name in names and persistent and not found and is_learners_file(caller.f_code.co_filename):
            code = caller.f_code
            found.append(trace.Located(code.co_filename, caller.f_lineno, getattr(code, "co_qualname", code.co_name),
                                       trace.source_line(code.co_filename, caller.f_lineno),
                                       [f"the buffer `{name}`"], kind="saved"))
        return register(self, name, tensor, persistent)
    nn.Module.register_buffer = watched
    try:
        with torch.random.fork_rng():
            guarded_call(cls, args)
    except Exception:  # noqa: BLE001: a module that cannot be built again has no line to show
        pass
    finally:
        nn.Module.register_buffer = register
    return found[0] if found else None


# A GPU the check may not have: the meta device stands in for it (.to() and device= behave as on any other device).
ELSEWHERE = torch.device("meta")


ELSEWHERE_ROW = "the same parameters whatever device DEVICE names"


def _device_globals(cls) -> list[tuple[dict, str]]:
    """(namespace, name) of every torch.device the learner's class reads from its globals (the notebook's DEVICE)."""
    return [(g, name) for g in globals_of(cls) for name, value in list(g.items()) if isinstance(value, torch.device)]


def _built_with_device(cls, args: tuple, device: torch.device, watch=None) -> nn.Module | None:
    """cls(*args) built again while the learner's device globals name `device` (given back afterwards); None when
    the build raises. watch: an nn.Module.__setattr__ to run the build under."""
    saved = [(g, name, g[name]) for g, name in _device_globals(cls)]
    setattr_ = nn.Module.__setattr__
    try:
        for g, name, _ in saved:
            g[name] = device
        if watch is not None:
            nn.Module.__setattr__ = watch
        with torch.random.fork_rng(), contextlib.redirect_stdout(io.StringIO()):
            return guarded_call(cls, args)
    except Exception:  # noqa: BLE001: a build that needs real values (a meta tensor has none) measures nothing
        return None
    finally:
        nn.Module.__setattr__ = setattr_
        for g, name, value in saved:
            g[name] = value


def _registered(module: nn.Module) -> dict[str, str]:
    return {**{n: "parameter" for n, _ in module.named_parameters()}, **{n: "buffer" for n, _ in module.named_buffers()}}


def unregistering_line(cls, args: tuple, names: set, *, device: torch.device = ELSEWHERE, kind: str = "unregistered",
                       fact: str = "`{}` is a plain tensor there, not a Parameter") -> trace.Located | None:
    """The learner's line that stores a plain tensor as an attribute in `names` while DEVICE names `device` (by
    default another device than the CPU), said as a place of `kind` with `fact` (formatted with the name)."""
    found = []
    setattr_ = nn.Module.__setattr__

    def watched(self, name, value):
        caller = sys._getframe(1)
        if (name in names and isinstance(value, torch.Tensor) and not isinstance(value, nn.Parameter) and not found
                and is_learners_file(caller.f_code.co_filename)):
            code = caller.f_code
            found.append(trace.Located(code.co_filename, caller.f_lineno, getattr(code, "co_qualname", code.co_name),
                                       trace.source_line(code.co_filename, caller.f_lineno),
                                       [fact.format(name)], kind=kind))
        setattr_(self, name, value)
    _built_with_device(cls, args, device, watch=watched)
    return found[0] if found else None


MOVED_ROW = "every tensor it holds is a parameter or buffer (what .to() moves)"


def plain_attributes(module: nn.Module) -> list[tuple[str, str]]:
    """(path, attribute name) of every tensor a module of `module` holds as a plain attribute: a parameter or buffer
    lives in the module's registries, never in its __dict__, so a tensor there is neither."""
    return [(f"{prefix}.{attr}" if prefix else attr, attr) for prefix, part in module.named_modules()
            for attr, value in vars(part).items() if isinstance(value, torch.Tensor)]


def unmoved_tensors(chk: Check, cls, args: tuple, module: nn.Module, plain: list[tuple[str, str]]) -> bool:
    """The row MOVED_ROW for the module the learner's cls(*args) built, whose
    plain tensor attributes, read before any forward pass (a tensor a pass
    keeps is made on its inputs' device), are `plain`: none, as module.to()
    and .cuda() leave such a tensor where it was made. A plain one is
    measured by moving a copy to the meta device (standing in for a GPU)
    and located by building cls again. Not measured on a module built in
    the grader's recheck (it brings back parameters only). False when the
    row fails."""
    if getattr(module, "recheck_trace", None) is not None:
        return True
    if chk.require(MOVED_ROW, not plain, f"`{plain[0][0]}` is a plain tensor attribute" if plain else ""):
        return True
    path, attr = plain[0]
    more = f" (and {len(plain) - 1} more alike)" if len(plain) > 1 else ""
    fix = (f"register it in __init__: self.register_buffer(\"{attr}\", tensor, persistent=False) (a buffer moves with "
           "the model; persistent=False, for a tensor rebuilt from the config, leaves it out of the state_dict)")
    moved = _moved_copy(module)
    left = None if moved is None else _attribute(moved, path)
    seen = (f" (measured: a copy of your model moved with .to() to the meta device, standing in for a GPU, has its "
            f"parameters there and `{path}` still on the {left.device.type})"
            if isinstance(left, torch.Tensor) and left.device.type != ELSEWHERE.type else "")
    chk.diagnose(f"`{path}`{more} is a tensor your {chk.fn_name} holds as a plain attribute, neither a parameter nor a "
                 f"buffer, so .to() and .cuda() do not move it{seen}: model.to(DEVICE) leaves it where it was made; "
                 + fix)
    chk.locate_with(lambda: unregistering_line(cls, args, {attr}, device=torch.device("cpu"), kind="unmoved",
                                               fact="`{}` is stored here as a plain tensor"))
    return False


def _moved_copy(module: nn.Module) -> nn.Module | None:
    """A copy of `module` moved to ELSEWHERE; None where it cannot be copied or moved, or keeps a parameter behind."""
    try:
        moved = copy.deepcopy(module).to(ELSEWHERE)
    except Exception:  # noqa: BLE001: a module that cannot be copied or moved measures nothing here
        return None
    return moved if all(p.device.type == ELSEWHERE.type for p in moved.parameters()) else None


def _attribute(module: nn.Module, path: str):
    owner, _, attr = path.rpartition(".")
    return vars(module.get_submodule(owner) if owner else module).get(attr)
