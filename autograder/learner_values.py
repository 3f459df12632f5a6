"""How the grader speaks of a value the learner's code returned, raised or
built: in its own vocabulary only. A check's message, a verdict, a flag and
every page built from them may name a value's kind (an int, a tuple of 3
items, a float32 tensor), a type of Python, torch or tinylm, and sizes the
reference knows; never a number, text, key, class name or length the
learner's code chose. A graded kernel that read the hidden tests could
otherwise spell them out in what it returns (an int of 40 digits is 16
bytes of a hidden line). Lengths and small axis sizes are shown up to a
bound, so a value carries a few bits at most. torch is used only when the
caller has imported it: the grading side reads this before torch loads."""
from __future__ import annotations

import sys

# Counts (items of a list, axes) are said up to this, then "more than".
MAX_SHOWN_COUNT = 8
# Axis sizes up to this are shown as they are; a larger one only when it is a
# size the reference knows (its own shape, the inputs'), else as "?".
MAX_SHOWN_SIZE = 64

OTHER_OBJECT = "an object of a type outside Python, torch and tinylm"
_ARTICLE_WORDS = {"bool": "a bool", "int": "an int", "float": "a float", "complex": "a complex number",
                  "str": "a str", "bytes": "a bytes object", "bytearray": "a bytearray", "dict": "a dict",
                  "set": "a set", "frozenset": "a frozenset", "tuple": "a tuple", "list": "a list"}


def _namespaces() -> list:
    """The modules whose types the grader may name: Python's, torch's (its modules, optimizers, learning-rate
    schedulers, data loading) and tinylm's, the last two only once the caller has imported torch."""
    import builtins
    modules = [builtins]
    if "torch" in sys.modules:  # a caller that has torch may name its types, and tinylm's (which needs torch)
        import tinylm
        import torch
        import torch.optim.lr_scheduler
        import torch.utils.data
        modules += [torch, torch.nn, torch.optim, torch.optim.lr_scheduler, torch.utils.data, tinylm]
    return modules


def known_type_name(name, otherwise: str) -> str:
    """`name` where it names a type of Python, torch or tinylm (_namespaces);
    `otherwise` for any other (a class of the learner's own: its name is
    free text)."""
    if not (isinstance(name, str) and name.isidentifier()):
        return otherwise
    return name if any(isinstance(getattr(m, name, None), type) for m in _namespaces()) else otherwise


def _nearest_known_class(kind: type) -> str:
    """kind's own name where it names a type of the namespaces (known_type_name: the recheck's stand-in for a
    learner's module carries its class's name so), else the name of the first class in kind's method resolution
    order that one of the namespaces holds (that very class, not a namesake): a subclass of tinylm.Transformer is a
    Transformer; "" when none is."""
    if known_type_name(kind.__name__, ""):
        return kind.__name__
    spaces = _namespaces()
    for base in kind.__mro__[1:]:
        if any(getattr(m, base.__name__, None) is base for m in spaces):
            return base.__name__
    return ""


def _article(word: str) -> str:
    return "an" if word[:1].upper() in "AEIOU" else "a"


def count_words(n: int, noun: str) -> str:
    """'1 item', '3 items', or 'more than 8 items' past MAX_SHOWN_COUNT."""
    n = int(n)
    return f"{n} {noun}{'' if n == 1 else 's'}" if n <= MAX_SHOWN_COUNT else f"more than {MAX_SHOWN_COUNT} {noun}s"


def shown_size(n: int, known=()) -> str:
    """A count or size the learner's code made, as a number when it is small
    or one the reference knows, else bounded ('more than 64')."""
    n = int(n)
    if abs(n) <= MAX_SHOWN_SIZE or n in {int(k) for k in known}:
        return str(n)
    return f"more than {MAX_SHOWN_SIZE}" if n > 0 else f"less than -{MAX_SHOWN_SIZE}"


def shown_shape(shape, known=()) -> str:
    """A shape the learner's code made: each size shown when it is small or
    one the reference knows (`known`), else '?'."""
    dims = [int(d) for d in shape]
    if len(dims) > MAX_SHOWN_COUNT:
        return f"a shape of more than {MAX_SHOWN_COUNT} axes"
    known = {int(k) for k in known}
    shown = [str(d) if d <= MAX_SHOWN_SIZE or d in known else "?" for d in dims]
    return "(" + ", ".join(shown) + ("," if len(shown) == 1 else "") + ")"


def known_sizes(*shapes) -> set[int]:
    """The sizes a reference shape implies: each axis, and each run of
    adjacent axes merged into one (a learner's merged or split axes)."""
    found: set[int] = set()
    for shape in shapes:
        dims = [int(d) for d in shape]
        for i in range(len(dims)):
            product = 1
            for d in dims[i:]:
                product *= d
                found.add(product)
    return found


def type_words(value) -> str:
    """The kind of a learner's value with its article: 'an int', 'a float32
    tensor', 'a Linear module', OTHER_OBJECT."""
    torch = sys.modules.get("torch")
    if value is None:
        return "None"
    if torch is not None and isinstance(value, torch.Tensor):
        return f"a {value.dtype} tensor"
    if torch is not None and isinstance(value, torch.nn.Module):
        name = _nearest_known_class(type(value))
        return f"{_article(name)} {name} module" if name and name != "Module" else "a module of the learner's own class"
    for kind in type(value).__mro__:
        if kind.__module__ == "builtins" and kind.__name__ in _ARTICLE_WORDS:
            return _ARTICLE_WORDS[kind.__name__]
    name = _nearest_known_class(type(value))
    return f"{_article(name)} {name} object" if name and name != "object" else OTHER_OBJECT


def describe(value, known=()) -> str:
    """A learner's value in the grader's words: its kind, a tensor's dtype
    and shape (shown_shape, `known`: the sizes the reference knows), a
    sequence's or mapping's length (bounded); never its content."""
    torch = sys.modules.get("torch")
    words = type_words(value)
    if torch is not None and isinstance(value, torch.Tensor):
        return f"{words} of shape {shown_shape(value.shape, known)}"
    if isinstance(value, (tuple, list, dict, set, frozenset)):
        return f"{words} of {count_words(len(value), 'item')}"
    return words
