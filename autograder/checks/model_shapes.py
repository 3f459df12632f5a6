"""Why a module's parameters differ from tinylm's in number or shape, from
the shapes alone: a list of blocks of another length, projections sized by
d_model // n_heads where the config sets head_dim apart, key and value
projections with n_heads outputs, a weight built with its two sizes
swapped. Each is said only where every wrong shape shows it."""
from __future__ import annotations

import dataclasses
import re

import torch
from torch import nn


def head_dim_apart(config) -> bool:
    """True when config.head_dim is set apart from d_model // n_heads (as Gemma and Mistral NeMo set it)."""
    return config.head_dim != config.d_model // config.n_heads


def _quotient_shapes(reference: nn.Module, config) -> dict[str, tuple]:
    """The parameter shapes of the reference module built for `config` with head_dim = d_model // n_heads
    (on the meta device: shapes only)."""
    with torch.device("meta"):
        module = type(reference)(dataclasses.replace(config, head_dim=None))
    return {n: tuple(p.shape) for n, p in module.state_dict().items()}


def _sized_by_the_quotient(wrong: list[str], got: dict, want: dict, reference: nn.Module, config) -> str | None:
    """When head_dim is set apart and every parameter of a wrong shape has exactly the shape it would have with
    head_dim = d_model // n_heads (measured), that cause, with one of them."""
    if not wrong or not head_dim_apart(config):
        return None
    quotient = _quotient_shapes(reference, config)
    if any(quotient.get(n) != got[n] for n in wrong):
        return None
    n = wrong[0]
    # The shapes cannot tell a head_dim computed as d_model // n_heads from a size written as d_model: both are said.
    return (f"head_dim taken as d_model // n_heads (or n_heads · head_dim as d_model) in your projections: this "
            f"config sets head_dim = {config.head_dim}, "
            f"apart from d_model // n_heads = {config.d_model // config.n_heads} (as Gemma and Mistral NeMo do), and "
            f"your {', '.join(wrong[:4])} {'has' if len(wrong) == 1 else 'have'} the "
            f"shape{'s' if len(wrong) > 1 else ''} of head_dim = d_model // n_heads, n_heads · (d_model // n_heads) = "
            f"d_model wide (measured: {n} is {list(got[n])}, tinylm's is {list(want[n])}); size "
            "the projections with config.head_dim: q_proj d_model -> n_heads · head_dim, k_proj and v_proj d_model "
            "-> n_kv_heads · head_dim, o_proj n_heads · head_dim -> d_model")


def list_lengths(want: dict, got: dict, config) -> str | None:
    """When a list of modules (blocks.0, blocks.1, ...) holds another number
    of entries than tinylm's, that measured count, with the config fields
    equal to each count (the one the loop should read, and the one it read)."""
    def lengths(names) -> dict:
        found: dict[str, set] = {}
        for name in names:
            m = re.match(r"^(.*?)\.(\d+)\.", name)
            if m:
                found.setdefault(m.group(1), set()).add(int(m.group(2)))
        return {prefix: max(ids) + 1 for prefix, ids in found.items()}
    theirs, yours = lengths(want), lengths(got)
    for prefix, n in theirs.items():
        mine = yours.get(prefix)
        if mine is None or mine == n:
            continue
        fields = {f: getattr(config, f) for f in vars(config) if isinstance(getattr(config, f), int)
                  and not isinstance(getattr(config, f), bool)}
        named = lambda count: ", ".join(f"config.{f} = {v}" for f, v in fields.items() if v == count)  # noqa: E731
        return (f"you built {mine} entries in `{prefix}` ({prefix}.0 to {prefix}.{mine - 1}), tinylm builds {n} for "
                f"this config ({named(n) or 'no config field has that value'}); "
                f"{'the count you built equals ' + named(mine) if named(mine) else 'no config field equals your count'}")
    return None


# What each layer's constructor takes, for a weight built with its two sizes swapped.
_ORDER = {nn.Linear: "nn.Linear(in_features, out_features) stores weight as [out, in]",
          nn.Embedding: "nn.Embedding(num_embeddings, embedding_dim) takes the vocabulary size first"}


def _kv_with_query_heads(wrong: list[str], got: dict, want: dict, config) -> str | None:
    """The cause when every wrong shape is a key or value projection's with
    n_heads · head_dim outputs where tinylm's has n_kv_heads · head_dim."""
    heads, kv, hd = getattr(config, "n_heads", None), getattr(config, "n_kv_heads", None), getattr(config, "head_dim", None)
    if not wrong or heads is None or kv is None or hd is None or heads == kv:
        return None
    for name in wrong:
        if not name.endswith(("k_proj.weight", "v_proj.weight")) or len(got[name]) != 2 \
                or got[name] != (heads * hd, want[name][1]) or want[name][0] != kv * hd:
            return None
    return (f"{', '.join(wrong[:4])}: n_heads · head_dim = {heads * hd} outputs (measured), where k_proj and v_proj "
            f"have n_kv_heads · head_dim = {kv * hd}: the keys and values have n_kv_heads heads, shared by the queries")


def _transposed_shapes(wrong: list[str], got: dict, want: dict, module: nn.Module) -> str | None:
    """The cause when every wrong shape is the right one with its two sizes
    swapped, in layers whose argument order is known; None otherwise (the
    row's note already lists the shapes measured). A parameter shared under
    two names is named once, by the layer that owns it first."""
    if getattr(module, "recheck_trace", None) is not None:
        return None  # the grader's recheck: the learner's submodules live in the sandbox, their classes unread
    owned = {name for name, _ in module.named_parameters()}
    wrong = [name for name in wrong if name in owned] or wrong
    rules = []
    for name in wrong:
        owner = module.get_submodule(name.rpartition(".")[0]) if "." in name else module
        rule = next((text for kind, text in _ORDER.items() if isinstance(owner, kind)), None)
        if rule is None or len(got[name]) != 2 or got[name] != want[name][::-1]:
            return None
        if rule not in rules:
            rules.append(rule)
    return (f"{', '.join(wrong[:4])}{', ...' if len(wrong) > 4 else ''}: built with the two sizes swapped "
            f"(measured: {'each is' if len(wrong) > 1 else 'it is'} the transpose of tinylm's shape); " + "; ".join(rules))


def shape_cause(wrong: list[str], got: dict, want: dict, module: nn.Module, reference: nn.Module, config) -> str | None:
    """The one cause every wrong parameter shape shows, or None (the row's note lists the shapes)."""
    return (_sized_by_the_quotient(wrong, got, want, reference, config) or _kv_with_query_heads(wrong, got, want, config)
            or _transposed_shapes(wrong, got, want, module))


def _sizes_of(config) -> dict[int, list[str]]:
    """{size: the config fields, and the heads times head_dim, that equal it}."""
    fields = {f"config.{f}": v for f, v in vars(config).items() if isinstance(v, int) and not isinstance(v, bool) and v > 1}
    found: dict[int, list[str]] = {}
    for name, v in fields.items():
        found.setdefault(v, []).append(name)
    heads = [f for f in ("config.n_heads", "config.n_kv_heads") if f in fields]
    if "config.head_dim" in fields:  # the products a projection's size is made of
        for f in heads:
            found.setdefault(fields[f] * fields["config.head_dim"], []).append(f"{f} · config.head_dim")
    return found


def shapes_read(wrong: list[str], got: dict, want: dict, config) -> str:
    """The wrong shapes measured, each size that differs set beside the config's fields (and heads times
    head_dim) that equal it and the size tinylm's has there: facts, with no cause chosen among them."""
    sizes, said = _sizes_of(config), []
    for name in wrong[:3]:
        mine, theirs = got[name], want[name]
        parts = []
        if len(mine) == len(theirs):
            for axis, (g, w) in enumerate(zip(mine, theirs)):
                if g != w:
                    equal = " = ".join(sizes.get(g, [])[:3])
                    parts.append(f"axis {axis} has {g}" + (f" (= {equal})" if equal else "") + f" where {w} belongs"
                                 + (f" (= {' = '.join(sizes[w][:3])})" if w in sizes else ""))
        said.append(f"{name} is {list(mine)}, tinylm's {list(theirs)}" + (f": {'; '.join(parts)}" if parts else ""))
    return "your parameters' shapes: " + "; ".join(said)

