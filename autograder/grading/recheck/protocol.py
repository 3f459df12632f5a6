"""What crosses between the trusted recheck and its jailed child, and how
a reply is decoded: the child sends tagged plain data (to_plain) as a torch
archive (dump_plain), which the parent loads only after its zip directory
shows it decodes to at most wire.MAX_FRAME_BYTES (load_plain); the parent
sends pickles of plain values and of the references below. Any error met
while decoding a reply reads UNREADABLE_REPLY: its text would be made of
the child's bytes. Nothing here imports torch at import time (the trusted
process limits its memory before torch loads)."""
from __future__ import annotations

import contextlib
import io

from ...learner_values import known_type_name
from ..wire import MAX_FRAME_BYTES

# `python -m MODULE ARGS` runs the trusted process, `python -I -m MODULE --child` the jailed child.
MODULE = "autograder.grading.recheck"
CHILD_FLAG = "--child"

def to_plain(value, handles: dict[int, object] | None = None, depth: int = 0):
    """Tagged plain form of a learner's value (runs in the child). A module
    is kept in `handles` (the child's modules the parent may call later by
    handle); without them, as in the parent, it is opaque."""
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
        return ("tuple" if isinstance(value, tuple) else "list", [to_plain(v, handles, depth + 1) for v in value])
    if type(value) is dict and all(type(k) is str for k in value):
        return ("dict", [[k, to_plain(v, handles, depth + 1)] for k, v in value.items()])
    if isinstance(value, nn.Module):
        if handles is None:
            return ("opaque", type(value).__name__)
        handles[id(value)] = value
        return ("module", id(value), type(value).__name__, parameter_entries(value))
    return ("opaque", type(value).__name__)


class Opaque:
    """Stands in, in the parent, for a learner object that is not plain data."""

    def __init__(self, type_name: str):
        import torch  # noqa: F401: known_type_name names torch's types once torch is loaded
        self.type_name = known_type_name(type_name, "object")

    def __repr__(self):
        return f"<{self.type_name} object from the learner's code>"


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
    (MAX_FRAME_BYTES): torch.save stores entries uncompressed, so a compressed
    entry (a 5 GiB tensor of zeros deflates to 5 MB) is refused before
    anything is inflated in this process."""
    import torch
    limit = MAX_FRAME_BYTES if limit is None else limit
    check_archive(data, limit)
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


def check_archive(data: bytes, limit: int) -> None:
    """Refuse, before anything is inflated, an archive that is not one torch.save
    writes (a compressed entry) or that decodes to more than `limit` bytes."""
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
# references: the parent's callables and objects, as the child holds them

class CallbackRef:
    """Parent -> child: a callable of the check's (the child calls back)."""

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



def parameter_entries(module) -> list:
    """[(name, identity tag, tensor, requires_grad)] of a module's parameters."""
    return [(name, id(p), *to_plain(p)[1:]) for name, p in module.named_parameters(remove_duplicate=False)]



def module_grads(values) -> list:
    """[(arg index, parameter name, .grad)] of every module argument: a pickled
    Parameter leaves its .grad behind, and a training step without zero_grad
    must still see the previous step's gradients."""
    from torch import nn
    return [(i, name, p.grad.detach().clone()) for i, v in enumerate(values) if isinstance(v, nn.Module)
            for name, p in v.named_parameters() if p.grad is not None]


def set_module_grads(values, grads) -> None:
    import torch
    from torch import nn
    for index, name, grad in grads:
        module = values[index] if type(index) is int and 0 <= index < len(values) else None
        if isinstance(module, nn.Module) and type(grad) is torch.Tensor:
            param = dict(module.named_parameters()).get(name)
            if param is not None and param.shape == grad.shape:
                param.grad = grad
