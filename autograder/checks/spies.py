"""What the learner's code hands to attention: the head counts of q, k, v
(and a mask) at the first attention call, seen by briefly standing in for the attention
functions their code calls by name (and torch's SDPA). Used after a head-axis
error to say WHICH of k and v was left unrepeated, from a measurement."""
from __future__ import annotations

import contextlib
import inspect
import io

import torch
import torch.nn.functional as F
from .framework.calling import globals_of


ATTENTION_NAMES = ("causal_attention", "gqa_attention", "scaled_dot_product_attention")


class _Seen(Exception):
    """Raised by the stand-in once it has recorded the first call."""


def attention_heads(fn, call) -> tuple[int, int, int] | None:
    """(q heads, k heads, v heads) of the first attention call made while
    `call()` runs the learner's `fn` (a function, class or module); None when
    no attention call was seen before it raised or returned."""
    heads = attention_operands(fn, call)
    return None if heads is None else (heads["queries"], heads["keys"], heads["values"])


def attention_operands(fn, call) -> dict[str, int | None] | None:
    """The head axis (dim -3) of each tensor the first attention call gets
    while `call()` runs the learner's `fn`: "queries", "keys", "values", and
    "mask" where a mask tensor is passed (None for a mask of under 3 dims,
    which has no head axis); None when no attention call was seen before it
    raised or returned. The learner's globals and F's attribute are restored
    afterwards."""
    seen: list = []

    def stand_in(q, k, v, *args, **kwargs):
        heads = {name: t.shape[-3] if isinstance(t, torch.Tensor) and t.dim() >= 3 else None
                 for name, t in (("queries", q), ("keys", k), ("values", v))}
        masks = [t for t in (*args, kwargs.get("attn_mask"), kwargs.get("mask")) if isinstance(t, torch.Tensor)]
        if masks:
            heads["mask"] = masks[0].shape[-3] if masks[0].dim() >= 3 else None
        seen.append(heads)
        raise _Seen

    spaces = globals_of(fn)
    saved = [(g, n, g[n]) for g in spaces for n in ATTENTION_NAMES if n in g and callable(g[n])]
    original_sdpa = F.scaled_dot_product_attention
    try:
        for g, n, _ in saved:
            g[n] = stand_in
        F.scaled_dot_product_attention = stand_in
        with contextlib.redirect_stdout(io.StringIO()), torch.no_grad():
            call()
    except Exception:  # _Seen, or the learner's own error before attention: only `seen` matters
        pass
    finally:
        F.scaled_dot_product_attention = original_sdpa
        for g, n, value in saved:
            g[n] = value
    return seen[0] if seen and None not in (seen[0]["queries"], seen[0]["keys"], seen[0]["values"]) else None


def unrepeated_bug(heads: tuple[int, int, int] | None) -> str | None:
    """A 'Likely bug' text when exactly one of k and v reached attention with
    the query heads and the other with fewer."""
    if heads is None:
        return None
    q, k, v = heads
    if q == k > v:
        return (f"the values are not repeated to the query heads (measured: attention got k with {k} heads, v with "
                f"{v}): repeat v like k, repeat_kv(v, n_rep) / v.repeat_interleave(n_rep, dim=1)")
    if q == v > k:
        return (f"the keys are not repeated to the query heads (measured: attention got v with {v} heads, k with "
                f"{k}): repeat k like v, repeat_kv(k, n_rep) / k.repeat_interleave(n_rep, dim=1)")
    return None


def first_call_arguments(fn, callee: str, call, spaces: list[dict] | None = None) -> dict | None:
    """The arguments (name -> value, bound to the callee's own signature) of
    the first call the learner's `fn` makes to the function it calls by the
    name `callee`, while `call()` runs; None when it makes none. `spaces`:
    the namespaces `callee` is looked up in (default: fn's globals; a
    module's vars() for a call through the module, tinylm.sample_next)."""
    seen: list = []
    spaces = [g for g in (globals_of(fn) if spaces is None else spaces) if callable(g.get(callee))]
    if not spaces:
        return None
    original = spaces[0][callee]

    def stand_in(*args, **kwargs):
        try:
            seen.append(dict(inspect.signature(original).bind(*args, **kwargs).arguments))
        except (TypeError, ValueError):  # arguments the callee cannot take: nothing to compare by name
            seen.append(None)
        raise _Seen

    try:
        for g in spaces:
            g[callee] = stand_in
        with contextlib.redirect_stdout(io.StringIO()), torch.no_grad():
            call()
    except Exception:  # _Seen, or the learner's own error before the call: only `seen` matters
        pass
    finally:
        for g in spaces:
            g[callee] = original
    return seen[0] if seen else None


def crossed_arguments(caller: str, given: dict, callee: str, received: dict | None) -> str | None:
    """A measured text when the callee received, under one parameter name, the
    value the caller was given under another name both functions have (and
    not the caller's own value of that name): arguments handed over crossed."""
    if not received:
        return None
    shared = [n for n in given if n in received]
    distinct = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and \
        sum(1 for w in given.values() if type(w) is type(v) and w == v) == 1  # noqa: E731
    crossed = [(theirs, mine) for mine in shared for theirs in shared if theirs != mine and distinct(given[theirs])
               and type(received[mine]) is type(given[theirs]) and received[mine] == given[theirs]
               and not (type(given[mine]) is type(received[mine]) and given[mine] == received[mine])]
    if not crossed:
        return None
    parts = [f"its {theirs} ({given[theirs]!r}) to {callee}'s {mine}" for theirs, mine in crossed]
    return (f"your {caller} hands {' and '.join(parts)} (measured: the arguments of its first {callee} call): "
            "pass each argument to the parameter of the same name, by keyword where the order is easy to mix up")
