"""Checks for the accounting exercises: what the model costs, predicted by
the learner from its config, held against a measurement of a built model.

Every reference is a measurement, never a formula: parameters are
`p.numel()` of tinylm's Transformer built on the meta device (shapes only, no
memory, so Llama 3 8B costs nothing); FLOPs are what
torch.utils.flop_counter.FlopCounterMode counts while the computation runs on
the meta device, with attention's matmuls written out (QKᵀ over the full
T × T, the masked half included: that is what the matmul computes, and what
the counter counts); bytes are `nbytes` of the tensors a KV cache allocates,
or of the parameters, gradients and AdamW moments after an optimizer step
(on the meta device too; tests/checks/test_accounting.py holds each measurement to
an independent one: transformers' Llama, its cache, a real step).

A learner's value is compared exactly. Where it is wrong, the check measures
how: the ratio or the difference to the measurement, per component, named
in the config's terms ("attention: 2·n_layers·d_model·(n_heads − n_kv_heads)·
head_dim too many"), and a known mistake is named only when it explains
every failing case of that component. Beyond the known mistakes, a wrong
count is read as its measurement with one named part left out, counted once
more or scaled by a factor the situation names (parts_apart: the parts
measured from the model, the parameters no matmul multiplies, the norm gains,
the vocabulary matrices, each parameter of a block; one FLOP per output
element of each matmul), named only when every failing case reads it alike.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import itertools
import math
import re
import unittest.mock
from fractions import Fraction
from typing import Any, Callable, Mapping

import torch
import torch.nn.functional as F
import tinylm
from tinylm.presets import LLAMA3_8B, SMOLLM2_135M

from ..learner_values import MAX_SHOWN_SIZE, count_words
from .core import Check, Row, describe, python_number_problem

# ---------------------------------------------------------------------------
# measurements (also used by the notebooks' prediction-against-measurement cells)

COMPONENTS = ("embedding", "attention", "mlp", "norms", "lm_head")


def component_of(name: str) -> str:
    """The component a tinylm parameter name belongs to (`blocks.3.attn.k_proj.weight` -> attention)."""
    if name.startswith("tok_emb."):
        return "embedding"
    if name.startswith("lm_head."):
        return "lm_head"
    if ".attn." in name:
        return "attention"
    if ".mlp." in name:
        return "mlp"
    if len(name.split(".")) > 1 and "norm" in name.split(".")[-2]:
        return "norms"
    return "other"


def measure_parameters(model: torch.nn.Module) -> dict[str, int]:
    """{component: p.numel() summed} over model.named_parameters(), which
    yields a shared (tied) Parameter once, under its first name (tok_emb).
    Parameters of no known component (a name tinylm does not use) are
    counted under "other", present only when there are some."""
    counts = dict.fromkeys(COMPONENTS, 0)
    for name, p in model.named_parameters():
        part = component_of(name)
        counts[part] = counts.get(part, 0) + p.numel()
    return counts


def config_parameters(config: tinylm.ModelConfig) -> dict[str, int]:
    """measure_parameters of tinylm's model for `config`, built on the meta device (measured once per config)."""
    return dict(_config_parameters(config))


@functools.lru_cache(maxsize=64)
def _config_parameters(config: tinylm.ModelConfig) -> tuple:
    return tuple(measure_parameters(meta_model(config)).items())


def meta_model(config: tinylm.ModelConfig, **changes) -> tinylm.Transformer:
    """tinylm's Transformer for `config` on the meta device: every parameter
    has its shape and dtype, none has memory or values."""
    config = dataclasses.replace(config, **changes) if changes else config
    with torch.device("meta"), _initialisers_skipped():
        model = tinylm.Transformer(config)
    model._checked_ids = lambda idx, cache: idx  # the id check reads values, which meta tensors do not have
    return model


@contextlib.contextmanager
def _initialisers_skipped():
    """torch.nn.init's in-place initialisers made no-ops: on the meta device
    they write no values, yet each call costs about a millisecond (most of
    the time a meta model takes to build, which the checks build often)."""
    names = [name for name in vars(torch.nn.init) if name.endswith("_") and not name.startswith("_")]
    with contextlib.ExitStack() as stack:
        for name in names:
            stack.enter_context(unittest.mock.patch.object(torch.nn.init, name, lambda tensor, *args, **kwargs: tensor))
        yield


def flop_counter():
    """A silent torch.utils.flop_counter.FlopCounterMode (its module is
    imported when first needed; with torch 2.14 that takes about 2 ms)."""
    from torch.utils.flop_counter import FlopCounterMode

    return FlopCounterMode(display=False)


def flop_count(run: Callable[[], Any]) -> int:
    """The FLOPs FlopCounterMode counts while run() executes."""
    with flop_counter() as counter:
        run()
    return int(counter.get_total_flops())


def kv_cache_nbytes(config: tinylm.ModelConfig, seq_len: int, batch_size: int = 1,
                    dtype: torch.dtype = torch.float32) -> int:
    """nbytes of the K and V tensors of a tinylm.KVCache that holds exactly
    seq_len positions (allocated on the meta device: sizes only)."""
    cache = tinylm.KVCache(dataclasses.replace(config, max_seq_len=seq_len), batch_size, device="meta", dtype=dtype)
    return cache.k.nbytes + cache.v.nbytes


def train_step_flops(model: torch.nn.Module, batch_size: int, seq_len: int, keep_grads: bool = False) -> int:
    """FLOPs of one forward and backward pass of a next-token loss on random
    ids, as FlopCounterMode counts them (on the model's own device); the
    gradients are dropped afterwards unless keep_grads."""
    device = next(model.parameters()).device
    ids = torch.zeros(batch_size, seq_len, dtype=torch.long, device=device)

    def step():
        logits = model(ids)
        F.cross_entropy(logits.flatten(0, 1), ids.flatten()).backward()

    flops = flop_count(step)
    if not keep_grads:
        model.zero_grad(set_to_none=True)
    return flops


def block_flops(config: tinylm.ModelConfig, seq_len: int, batch_size: int = 1) -> dict[str, int]:
    """FlopCounterMode's count of one block's forward pass, split into its
    attention and its MLP (attention written out, on the meta device)."""
    config = dataclasses.replace(config, attn_impl="reference", max_seq_len=seq_len)
    with torch.device("meta"):
        block = tinylm.Block(config)
        cos, sin = tinylm.rope_cache(config.head_dim, seq_len, config.rope_theta)
    x = torch.empty(batch_size, seq_len, config.d_model, device="meta")
    with flop_counter() as counter:
        block(x, cos, sin)
    counts = counter.get_flop_counts()
    return {"attention": int(sum(counts.get("Block.attn", {}).values())),
            "mlp": int(sum(counts.get("Block.mlp", {}).values()))}


def saved_activation_bytes(model: torch.nn.Module, ids: torch.Tensor) -> int:
    """Bytes of the tensors autograd saves for the backward pass during one
    forward pass of `model` on `ids` (torch.autograd.graph.saved_tensors_hooks):
    each storage counted once, the parameters left out (they exist anyway)."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    storages: dict[int, int] = {}

    def pack(t: torch.Tensor):
        ptr = t.untyped_storage().data_ptr()
        if ptr not in params:
            storages[ptr] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(ids)
    return sum(storages.values())


def training_state_nbytes(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, int]:
    """Bytes of what training keeps between steps: the parameters, their
    gradients and AdamW's two moments (exp_avg, exp_avg_sq; its step counters
    are left out), measured on the tensors that exist."""
    params = list(model.parameters())
    moments = sum(t.nbytes for p in params for key, t in optimizer.state.get(p, {}).items()
                  if key in ("exp_avg", "exp_avg_sq"))
    return {"weights": sum(p.nbytes for p in params),
            "grads": sum(p.grad.nbytes for p in params if p.grad is not None),
            "adam_moments": moments}


def after_one_adamw_step(config: tinylm.ModelConfig, batch_size: int = 2, seq_len: int = 8) -> dict[str, int]:
    """training_state_nbytes of tinylm's model for `config` after one AdamW
    step, all on the meta device (the tensors exist with their sizes)."""
    model = meta_model(config, max_seq_len=max(seq_len, 1))
    ids = torch.zeros(batch_size, seq_len, dtype=torch.long, device="meta")
    F.cross_entropy(model(ids).flatten(0, 1), ids.flatten()).backward()
    return adamw_step_state(model)


def adamw_step_state(model: torch.nn.Module) -> dict[str, int]:
    """training_state_nbytes after one AdamW step on the gradients the model holds."""
    optimizer = torch.optim.AdamW(model.parameters(), foreach=False)
    optimizer.step()
    return training_state_nbytes(model, optimizer)


# ---------------------------------------------------------------------------
# naming what a wrong count measures


@functools.lru_cache(maxsize=64)
def parameter_roles(config: tinylm.ModelConfig) -> tuple:
    """((role, numbers), ...) of tinylm's model for `config`: each parameter
    name with its block number dropped, summed over the blocks
    ('mlp_norm.weight in every block'), a tied head once (under tok_emb)."""
    return _roles(meta_model(config).named_parameters())


@functools.lru_cache(maxsize=64)
def buffer_roles(config: tinylm.ModelConfig) -> tuple:
    """((role, numbers), ...) of the buffers tinylm's model registers for
    `config` (RoPE's cos and sin tables): tensors the model keeps, rebuilt from
    the config, that are not parameters."""
    return _roles(meta_model(config).named_buffers())


def _roles(named_tensors) -> tuple:
    roles: dict[str, int] = {}
    for role, t in _role_names(named_tensors):
        roles[role] = roles.get(role, 0) + t.numel()
    return tuple(roles.items())


def roles_apart(config: tinylm.ModelConfig, numbers: int) -> str | None:
    """The tensors a count is off by, measured: the one set of one or two
    roles (parameter_roles; buffer_roles too when the count is over) whose
    numbers add up to exactly `numbers` (< 0: missing from the count, > 0:
    counted once more, or a buffer counted as a parameter), in words the same
    for every config; None when no set, or more than one, does."""
    roles = [(role, n, "parameter") for role, n in parameter_roles(config)]
    if numbers > 0:  # a count can only miss what the measurement counts: the parameters
        roles += [(role, n, "buffer") for role, n in buffer_roles(config)]
    sets = [combo for n in (1, 2) for combo in itertools.combinations(roles, n) if sum(v for _, v, _ in combo) == abs(numbers)]
    if numbers == 0 or len(sets) != 1:
        return None
    names = {kind: " and ".join(role for role, _, k in sets[0] if k == kind) for kind in ("parameter", "buffer")}
    if numbers < 0:
        return (f"the parameters of {names['parameter']} are missing (measured: your count lacks exactly their numbers): "
                "every parameter tensor of the model counts, the norms' gains too")
    said = []
    if names["parameter"]:
        said.append(f"the parameters of {names['parameter']} are counted once more")
    if names["buffer"]:
        said.append(f"the model's buffers {names['buffer']} are counted as weights")
    buffers = (": a buffer (model.named_buffers(), rebuilt from the config) is not a parameter, count "
               "model.parameters() only") if names["buffer"] else ""
    return (" and ".join(said) + " (measured: your count exceeds the model's parameters by exactly their numbers)"
            + buffers)


def positions_counted(config: tinylm.ModelConfig, got: int, context_len: int, dtype: torch.dtype,
                      batch_size: int = 1, length: str = "context_len",
                      advice: str = "a decoding step reads the context_len positions cached so far, not a "
                                    "preallocated length") -> str | None:
    """When a cache count is a whole number of positions other than
    context_len (named `length`), the length that number is (measured: the
    bytes of one position's keys and values, for the batch)."""
    per_position = kv_cache_nbytes(config, 1, batch_size, dtype)
    positions, rest = divmod(got, per_position)
    if rest or positions == context_len:
        return None
    lengths = (("config.max_seq_len", config.max_seq_len), (f"{length} + 1", context_len + 1),
               (f"{length} - 1", context_len - 1))  # the position counts a learner can reach for
    names = [n for n, v in lengths if v == positions]
    if len(names) != 1:
        return None
    return (f"the cache is counted for {names[0]} positions (measured: your count is exactly the keys and values of "
            f"that many positions): {advice}")


# ---------------------------------------------------------------------------
# reading a wrong count as the measurement with a named part left out, added or scaled


@dataclasses.dataclass(frozen=True)
class Part:
    """A named part of a measurement: `numbers` of what is counted, made of
    `leaves` (the smallest parts measured: two parts with the same leaves are
    one part under two names); `why` is what a right count does with it."""
    name: str
    leaves: frozenset
    numbers: int
    why: str = ""


class Reading(str):
    """A wrong count read as its measurement with some parts changed. The text
    is the same for every case, so that the cases can agree on it, with a
    "{detail}" slot for this case's numbers; `same` is what was changed (by
    leaves: two names of one change read alike), `order` ranks the names."""

    def __new__(cls, text: str, same: tuple, order: tuple, detail: str):
        reading = super().__new__(cls, text)
        reading.same, reading.order, reading.detail = same, order, detail
        return reading


def parts_apart(parts: list[Part], got: int, want: int, noun: str, per: int = 1,
                factors: Mapping[Fraction, str] | None = None, why: str = "") -> set[Reading]:
    """Every reading of `got` as `want` with one or two disjoint parts left out
    or counted once more, or with one part scaled by a factor the situation
    names ({factor: what it means}); each number of a part counts `per` (the
    bytes of a parameter); `why` says what the situation does with every part
    (else a part's own why is said)."""
    diff, found = got - want, set()
    if diff == 0:
        return found
    for size in (1, 2):
        for combo in itertools.combinations(enumerate(parts), size):
            leaves = [part.leaves for _, part in combo]
            numbers = sum(part.numbers for _, part in combo)
            if (size == 2 and leaves[0] & leaves[1]) or numbers * per != abs(diff):
                continue
            names = " and ".join(part.name for _, part in combo)
            said = why or next((part.why for _, part in combo if part.why), "")
            text = (f"your count leaves out exactly {names}, {{detail}}" + (f": {said}" if said else "")
                    if diff < 0 else f"your count has {names} once more, {{detail}}: each is counted once")
            found.add(Reading(text, (diff < 0, frozenset().union(*leaves)), (size, sum(i for i, _ in combo)),
                              f"{numbers:,} {noun}"))
    for (i, part), (factor, meaning) in itertools.product(enumerate(parts), (factors or {}).items()):
        if part.numbers and (factor - 1) * part.numbers * per == diff:
            found.add(Reading(f"{part.name}, {{detail}}, {meaning}", ("scaled", part.leaves, factor), (1, i),
                              f"{part.numbers:,} {noun}"))
    return found


def matmuls_seen():
    """A TorchDispatchMode that records what every operation FlopCounterMode
    counts (the matmuls) takes and makes: the storages of its operands (real
    tensors only) and the elements of its outputs."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import flop_registry

    class MatmulsSeen(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.operands, self.outputs = set(), 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func.overloadpacket in flop_registry:
                self.operands |= {a.untyped_storage().data_ptr() for a in args
                                  if isinstance(a, torch.Tensor) and a.device.type != "meta"}
                self.outputs += sum(t.numel() for t in (out if isinstance(out, tuple) else (out,))
                                    if isinstance(t, torch.Tensor))
            return out
    return MatmulsSeen()


@functools.lru_cache(maxsize=8)
def multiplied_roles(config: tinylm.ModelConfig) -> frozenset:
    """The parameter roles (parameter_roles) a matmul multiplies, measured: a
    forward pass of a small model built like `config` (its heads, tying and
    attention; small sizes, real tensors), with the storages of every
    matmul's operands recorded."""
    small = dataclasses.replace(config, vocab_size=16, d_model=2 * config.n_heads, d_ff=8, n_layers=1, max_seq_len=4,
                                head_dim=None)
    with torch.device("cpu"):
        model = tinylm.Transformer(small)
    seen = matmuls_seen()
    with torch.no_grad(), seen:
        model(torch.zeros(1, 2, dtype=torch.long))
    return frozenset(role for role, p in _role_names(model.named_parameters())
                     if p.untyped_storage().data_ptr() in seen.operands)


def _role_names(named_tensors):
    """(role, tensor) of each named tensor: its name with the block number dropped ('... in every block')."""
    for name, t in named_tensors:
        role = re.sub(r"^blocks\.\d+\.", "", name)
        yield (f"{role} in every block" if role != name else role), t


ROLE_NAMES = {"tok_emb.weight": "the embedding (tok_emb.weight)", "lm_head.weight": "the head (lm_head.weight)",
              "norm.weight": "the final norm's gain (norm.weight)"}
IN_NUMBERS = "are counted in numbers, not bytes: multiply them by the bytes per number (dtype.itemsize) like the rest"


@functools.lru_cache(maxsize=64)
def role_components(config: tinylm.ModelConfig) -> dict[str, str]:
    """{role (parameter_roles): its component (component_of)}."""
    named = list(meta_model(config).named_parameters())
    return {role: component_of(name) for (role, _), (name, _) in zip(_role_names(named), named)}


@functools.lru_cache(maxsize=64)
def parameter_parts(config: tinylm.ModelConfig) -> tuple[Part, ...]:
    """The parts of tinylm's parameter count for `config`, named: the groups a
    count is made of (the parameters no matmul multiplies, measured; the norm
    gains, the vocabulary matrices, attention's projections, the MLP's, every
    block's), then each role (parameter_roles). A group is said once: two
    groups of the same roles are kept, the first name preferred."""
    roles = dict(parameter_roles(config))
    multiplied = multiplied_roles(config)
    groups = (("the parameters that no matmul multiplies", lambda role: role not in multiplied),
              ("the norm gains", lambda role: "norm." in role),
              ("the vocabulary matrices", lambda role: role.split(".")[0] in ("tok_emb", "lm_head")),
              ("attention's projections", lambda role: role.startswith("attn.")),
              ("the MLP's matrices", lambda role: role.startswith("mlp.")),
              ("every block's parameters", lambda role: role.endswith(" in every block")))
    parts = [Part(name, frozenset(filter(keep, roles)), sum(n for r, n in roles.items() if keep(r)))
             for name, keep in groups]
    parts += [Part(ROLE_NAMES.get(role, role), frozenset({role}), n) for role, n in roles.items()]
    return tuple(part for part in parts if part.leaves)


def _near(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=0.5)


def explanations(got: int, want: int, ratios: Mapping[str, float], diffs: Mapping[str, int]) -> set[str]:
    """The named mistakes that reproduce `got` exactly: a ratio got/want, a
    difference got - want, or two of them together."""
    found = set()
    for bug, r in ratios.items():
        if r != 1 and _near(got, want * r):
            found.add(bug)
    for bug, d in diffs.items():
        if d and _near(got - want, d):
            found.add(bug)
    if not found:
        for (a, ra), (b, rb) in itertools.combinations(ratios.items(), 2):
            if ra != 1 and rb != 1 and ra * rb != 1 and _near(got, want * ra * rb):
                found.add(f"{a}; and {b}")
        for (a, da), (b, db) in itertools.combinations(diffs.items(), 2):
            if da and db and da + db and _near(got - want, da + db):
                found.add(f"{a}; and {b}")
        for (a, ra), (b, db) in itertools.product(ratios.items(), diffs.items()):
            if ra != 1 and db and _near(got, want * ra + db):
                found.add(f"{a}; and {b}")
    return found


class Findings:
    """Per component, the mistakes that explain each failing case; a mistake
    is named only when it explains every failing case of its component."""

    def __init__(self, measure_further: Callable[[str, list, bool], str | None] | None = None):
        self.per_key: dict[str, list[set[str]]] = {}
        self.first_wrong: dict[str, str] = {}  # key -> a Measured line about its first failing case
        self.failures: dict[str, list[tuple]] = {}  # key -> (label, case, got) of each of its failing cases
        # (key, its failures, whether it is the first key left unnamed) -> what else the failures measure, or None:
        # run only for a key no mistake names, when the line is printed
        self.measure_further = measure_further

    def add(self, key: str, found: set[str]) -> None:
        self.per_key.setdefault(key, []).append(found)

    def name(self, chk: Check) -> set[str]:
        """Diagnose the named mistakes; returns the keys they explain."""
        keys_of: dict[str, list[str]] = {}
        readings: dict[str, Reading] = {}  # key -> its reading, as its first failing case reads it
        tied: dict[tuple[str, ...], list[str]] = {}  # candidates -> the keys whose counts each of them gives
        for key, sets in self.per_key.items():
            agreed = self._agreed(sets)
            if len(agreed) > 1:  # two mistakes give the same numbers: neither is confirmed by them
                tied.setdefault(tuple(agreed), []).append(key)
                continue
            for bug in agreed:
                keys_of.setdefault(bug, []).append(key)
                if isinstance(bug, Reading):
                    readings[key] = bug
        for candidates, keys in tied.items():
            chk.measured(f"{_joined(keys)}: {len(candidates)} different mistakes give exactly these counts in every "
                         "case (measured), so the counts alone cannot tell which one is yours; candidates: "
                         + "; or ".join(f"({i}) {bug}" for i, bug in enumerate(candidates, 1)))
        for bug, keys in keys_of.items():
            if isinstance(bug, Reading):  # this case's numbers, per key where they differ
                details = [readings[key].detail for key in keys]
                detail = details[0] if len(set(details)) == 1 else "; ".join(f"{k} {d}" for k, d in zip(keys, details))
                label = self.failures.get(keys[0], [("",)])[0][0]
                bug = bug.replace("{detail}", f"{detail} for {label}" if label else detail)
            named = _joined(keys)
            chk.diagnose(f"{named}: {bug}" if named else bug)
        return {key for keys in [*keys_of.values(), *tied.values()] for key in keys}

    @staticmethod
    def _agreed(sets: list[set[str]]) -> list[str]:
        """The mistakes every failing case agrees on: the known ones, else the
        one reading of the parts (its first case's, under its preferred name),
        else none (two readings that change different parts: either may be it)."""
        common = set.intersection(*sets)
        known = sorted(bug for bug in common if not isinstance(bug, Reading))
        readings = [bug for bug in sets[0] if bug in common and isinstance(bug, Reading)]
        if known or len({r.same for r in readings}) != 1:
            return known
        return [min(readings, key=lambda r: r.order)]


def _joined(keys: list[str]) -> str:
    return ", ".join(keys[:-1]) + f" and {keys[-1]}" if len(keys) > 1 else keys[0]


def _ratio(got: int, want: int) -> str:
    """'0.5x the measured value' style: how far got is from the measurement, as a factor."""
    if want == 0:
        return "the built model has none"
    # Two significant digits, between 1/1000 and 1000: the factor is read off the learner's own number.
    factor = got / want
    if factor <= 0:
        return "none counted" if got == 0 else "a negative count"
    shown = "over 1000" if factor > 1000 else "under 0.001" if factor < 0.001 else f"{factor:.2g}"
    return f"{shown}x the measured value"


def _difference(got: int, want: int) -> str:
    """How far the learner's count is from the measurement: exactly when the
    difference is small (one off, a missing bias), else only its sign."""
    difference = got - want
    return (f"{difference:+,} from the measurement" if abs(difference) <= MAX_SHOWN_SIZE else
            "more than the measurement" if difference > 0 else "less than the measurement")


def _read_int(chk: Check, fn_name: str, where: str, value: Any) -> int | None:
    """value when it is a Python int (a count); otherwise a diagnosis and None.
    A float with an integral value (2 * ... / 1 in Python 3) is read as its int."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    problem = python_number_problem(value, int)
    if problem is None:
        return value
    chk.diagnose(f"{fn_name} returned {problem} for {where}: return a Python int (int(...)); counts and bytes "
                 f"are whole numbers")
    return None


def _read_dict(chk: Check, fn_name: str, where: str, value: Any, keys: tuple[str, ...]) -> dict[str, int] | None:
    """The learner's {key: int} for one case, or None (with a diagnosis) when
    it is not a dict with exactly `keys`."""
    if not isinstance(value, dict):
        hint = " (a missing `return`?)" if value is None else ""
        chk.diagnose(f"{fn_name} returned {describe(value)}{hint}; it should return a dict with the keys "
                     f"{', '.join(repr(k) for k in keys)}")
        return None
    missing, extra = [k for k in keys if k not in value], [k for k in value if k not in keys]
    if missing or extra:
        chk.diagnose(f"{fn_name} returned a dict whose keys are not the expected ones; it should have exactly "
                     f"{', '.join(repr(k) for k in keys)}" + (f" (missing: {', '.join(map(repr, missing))})" if missing else "")
                     + (f" (and {count_words(len(extra), 'key')} it should not have)" if extra else ""))
        return None
    read = {k: _read_int(chk, fn_name, f"{where}, key {k!r}", value[k]) for k in keys}
    return None if any(v is None for v in read.values()) else read


def _case_row(chk: Check, label: str, got: dict[str, int] | None, want: dict[str, int]) -> list[str]:
    """One table row per case; returns the keys whose values are wrong."""
    if got is None:
        chk.rows.append(Row(label, False, close="FAIL", note="not a dict of ints with the expected keys"))
        return []
    wrong = [k for k in want if got[k] != want[k]]
    note = "; ".join(f"{k}: {_ratio(got[k], want[k])}" for k in wrong)
    chk.rows.append(Row(label, not wrong, close="FAIL" if wrong else "ok", note=note))
    return wrong


def _finish(chk: Check, findings: Findings) -> None:
    """Name the mistakes that explain every failing case, say per wrong
    component in which case it first differs, print, and judge."""
    if not chk.passed:
        explained = findings.name(chk)
        unnamed = [key for key in findings.first_wrong if key not in explained]
        for key in unnamed:
            further = findings.measure_further and findings.measure_further(key, findings.failures.get(key, []),
                                                                           key == unnamed[0])
            chk.measured(findings.first_wrong[key] + (f"; {further}" if further else ""))
    chk.finish()


def _run_cases(chk: Check, fn, cases, keys, build_want, explain, budget: int = 100) -> Findings:
    """The shared loop of the dict-valued checks: call (with the case's
    arguments), read, compare, explain. An unnamed wrong count is measured
    further: a size argument off by one, else (for the first such key) one
    field of the case's config at another value, in at most `budget`
    evaluations of build_want."""
    def measure_further(key, failures, first):
        _, case, got = failures[0]
        return _one_size_off(fn, case, key, got, build_want) \
            or (_one_field_off(failures, key, build_want, budget) if first else None)

    findings = Findings(measure_further)
    for label, case in cases:
        want = build_want(case)
        value = chk.call(fn, *case, row_label=label)
        got = _read_dict(chk, chk.fn_name, label, value, keys)
        for key in _case_row(chk, label, got, want):
            findings.add(key, explain(case, key, got[key], want[key]))
            findings.failures.setdefault(key, []).append((label, case, got[key]))
            findings.first_wrong.setdefault(key, f"{key} for {label}: yours is {_difference(got[key], want[key])} "
                                                 f"({_ratio(got[key], want[key])})")
    return findings


def _positional_names(fn) -> list[str]:
    """The learner's own names for its positional arguments (none for *args)."""
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    try:
        return [p.name for p in inspect.signature(fn).parameters.values() if p.kind in positional]
    except (TypeError, ValueError):
        return []


def _one_size_off(fn, case: tuple, key: str, got: int, build_want) -> str | None:
    """When a wrong count is the measurement for one size argument off by
    one (seq_len - 1 positions, batch + 1), which argument and by how much."""
    names = _positional_names(fn)
    measured: dict[tuple[int, int], int | None] = {}

    def moved(i: int, delta: int) -> int | None:
        """The measurement with size argument i moved by delta (None where it cannot take that size), once."""
        if (i, delta) not in measured:
            try:
                measured[i, delta] = build_want(case[:i] + (case[i] + delta,) + case[i + 1:])[key]
            except Exception:  # noqa: BLE001: a size the measurement cannot take tells nothing
                measured[i, delta] = None
        return measured[i, delta]
    sizes = [i for i, size in enumerate(case) if isinstance(size, int) and not isinstance(size, bool) and size >= 2]
    for i in sizes:
        for delta in (-1, 1):
            if moved(i, delta) == got:
                name = names[i] if i < len(names) else f"size argument {i + 1}"
                return (f"measured: it is exactly the count for {name} = {case[i] + delta} instead of {case[i]} (one "
                        f"{'fewer' if delta < 0 else 'more'}): every one of the {case[i]} is counted")
    return _one_term_off(case, got, sizes, moved, names)


# How one part of a count may be off by one in a size s: (the words, the factor that replaces s or s²).
OFF_BY_ONE = {1: (("{s1}", lambda s: s - 1), ("{s2}", lambda s: s + 1)),
              2: (("{s}·{s1}", lambda s: s * (s - 1)), ("{s1}²", lambda s: (s - 1) ** 2),
                  ("{s}·{s2}", lambda s: s * (s + 1)), ("{s2}²", lambda s: (s + 1) ** 2))}
PART = {1: "the part in proportion to {name}", 2: "the part that grows with {name}²"}


def _one_term_off(case: tuple, got: int, sizes: list[int], moved, names: list[str]) -> str | None:
    """When a wrong count is the measurement with a size argument off by one
    in some of its parts only (the part in proportion to the size, the part
    that grows with its square: seq_len - 1 query positions against seq_len
    keys, say), which argument, which parts and how. The parts are measured:
    the measurement is evaluated at four neighbouring sizes (`moved`) and
    read as a polynomial of degree two in that size."""
    for i in sizes:
        size = case[i]
        below, here, above, further = (moved(i, d) for d in (-1, 0, 1, 2))
        if None in (below, here, above, further):
            continue
        square = Fraction(above - 2 * here + below, 2)  # a, b and c of a·s² + b·s + c
        linear = Fraction(above - below, 2) - 2 * square * size
        constant = here - square * size ** 2 - linear * size
        if square * (size + 2) ** 2 + linear * (size + 2) + constant != further:
            continue  # not a polynomial of degree two in this size: its parts cannot be read off
        parts = {power: c for power, c in ((2, square), (1, linear)) if c != 0}
        choices = [[(None, size ** power)] + [(words, factor(size)) for words, factor in OFF_BY_ONE[power]]
                   for power in parts]
        for picked in itertools.product(*choices):
            if all(words is None for words, _ in picked) or \
                    constant + sum(c * f for c, (_, f) in zip(parts.values(), picked)) != got:
                continue
            name = names[i] if i < len(names) else f"size argument {i + 1}"
            off = [f"{PART[power].format(name=name)} ({int(c * size ** power):,} of the {here:,}) counts "
                   f"{words.format(s=size, s1=size - 1, s2=size + 1)} instead of {size}{'²' if power == 2 else ''}"
                   for (power, c), (words, _) in zip(parts.items(), picked) if words is not None]
            return (f"measured: with {name} = {size}, " + "; ".join(off) + f": {name} is off by one there, and every "
                    f"one of the {size} counts in every part")
    return None


def config_sizes(config: tinylm.ModelConfig) -> dict[str, int]:
    """The sizes of a config by name: its int fields, then the sizes it
    derives (its int-valued properties: head_dim, n_rep)."""
    sizes = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)
             if type(getattr(config, f.name)) is int}
    derived = [name for name, attr in vars(type(config)).items() if isinstance(attr, property)]
    return {**sizes, **{name: getattr(config, name) for name in derived if type(getattr(config, name)) is int}}


def _size_words(config: tinylm.ModelConfig, name: str) -> str:
    """config.NAME, with its docstring's first line for a derived size ("how many query heads share ...")."""
    derived = getattr(type(config), name, None)
    doc = (derived.__doc__ or "").strip().split("\n")[0].rstrip(".") if isinstance(derived, property) else ""
    return f"config.{name}" + (f" ({doc[0].lower()}{doc[1:]})" if doc else "")


def _field_values(config: tinylm.ModelConfig, field: str) -> dict[int, list[str]]:
    """{value: its names} a size field may be mistaken for: another size of
    the config, 1, 2, one off, half or twice its own value (never its own)."""
    sizes, own = config_sizes(config), getattr(config, field)
    values: dict[int, list[str]] = {}
    for name, value in [*((n, v) for n, v in sizes.items() if n != field), ("1", 1), ("2", 2),
                        (f"{field} - 1", own - 1), (f"{field} + 1", own + 1), (f"{field} // 2", own // 2),
                        (f"2·{field}", 2 * own)]:
        if value >= 1 and value != own:
            values.setdefault(value, []).append(name)
    return values


def _head_dim_apart(config: tinylm.ModelConfig) -> bool:
    return config.head_dim != config.d_model // config.n_heads


def _one_size_changed(config: tinylm.ModelConfig, field: str, value: int) -> tinylm.ModelConfig:
    """config with one size at another value; a head_dim that is d_model // n_heads is derived again from the new
    sizes (as the config derives it), one set apart stays."""
    again = {} if field == "head_dim" or _head_dim_apart(config) else {"head_dim": None}
    return dataclasses.replace(config, **{field: value}, **again)


def _one_field_off(failures: list[tuple], key: str, build_want, budget: int) -> str | None:
    """When every failing count is the measurement of its case with one size
    field of the config at another value (n_kv_heads = 1 instead of 4), and
    no other field does that, which field and which values; also the one
    other size of the config those values are in every case, when there is
    one. A config the model refuses is skipped; the search stops unsaid after
    `budget` measurements (it would not know the field is the only one)."""
    at = next((i for i, arg in enumerate(failures[0][1]) if isinstance(arg, tinylm.ModelConfig)), None)
    if at is None:
        return None
    first = failures[0][1][at]
    # head_dim is searched only where a config sets it apart; elsewhere it follows d_model and n_heads
    fields = [f.name for f in dataclasses.fields(tinylm.ModelConfig) if f.name in config_sizes(first)
              and (f.name != "head_dim" or _head_dim_apart(first))]
    spent, found = 0, {}
    for field in fields:
        per_case = []
        for label, case, got in failures:
            config, hits = case[at], {}
            for value, names in _field_values(config, field).items():
                try:
                    changed = _one_size_changed(config, field, value)
                except ValueError:
                    continue  # a config the model refuses
                if spent == budget:
                    return None
                spent += 1
                try:
                    if build_want(case[:at] + (changed,) + case[at + 1:])[key] == got:
                        hits[value] = names
                except Exception:  # noqa: BLE001: a size the measurement cannot take tells nothing
                    continue
            if not hits:
                break
            per_case.append((label, getattr(config, field), hits))
        else:
            found[field] = per_case
    if len(found) != 1:
        return None
    (field, per_case), = found.items()
    config = failures[0][1][at]
    # the other size the values are in every case (read only across cases: one case's value is any size's by chance)
    common = set.intersection(*(set().union(*hits.values()) for _, _, hits in per_case)) & set(config_sizes(config))
    read = _size_words(config, common.pop()) if len(per_case) > 1 and len(common) == 1 else None
    shown = [f"{' or '.join(map(str, hits))} instead of {own}" for _, own, hits in per_case]
    every = "".join(f"; {field} = {values} for {label}" for (label, _, _), values in zip(per_case[1:], shown[1:]))
    return (f"measured: it is exactly the count of a model with {field} = {shown[0]}{every}, and no other size of the "
            f"config changed alone gives {'these counts' if every else 'it'} (1, 2, one off, half, twice or another "
            f"size of the config tried for each): your count reads "
            + (f"{read}, in every case, where it needs config.{field}" if read else
               f"another number where it needs config.{field}"))


# ---------------------------------------------------------------------------
# 03: the FLOPs of one multi-head causal attention layer

ATTENTION_FLOP_KEYS = ("qkv_proj", "scores", "mix", "out_proj")


def attention_matmuls(batch: int, seq_len: int, d_model: int, n_heads: int) -> dict[str, Callable[[], Any]]:
    """Each matmul of a causal multi-head attention layer, written out on meta tensors of the given sizes."""
    hd = d_model // n_heads
    meta = dict(device="meta")
    x, w = torch.empty(batch, seq_len, d_model, **meta), torch.empty(d_model, d_model, **meta)
    q = k = v = torch.empty(batch, n_heads, seq_len, hd, **meta)
    weights = torch.empty(batch, n_heads, seq_len, seq_len, **meta)
    y = torch.empty(batch, seq_len, d_model, **meta)
    return {"qkv_proj": lambda: [F.linear(x, w) for _ in range(3)],
            "scores": lambda: q @ k.transpose(-2, -1),
            "mix": lambda: weights @ v,
            "out_proj": lambda: F.linear(y, w)}


def measured_attention_flops(batch: int, seq_len: int, d_model: int, n_heads: int) -> dict[str, int]:
    """FlopCounterMode's count of each matmul of a causal multi-head attention
    layer, written out and run on meta tensors of the given sizes."""
    return {key: flop_count(run) for key, run in attention_matmuls(batch, seq_len, d_model, n_heads).items()}


def matmul_outputs(run: Callable[[], Any]) -> int:
    """The elements of every matmul's output while run() executes (matmuls_seen)."""
    with matmuls_seen() as seen:
        run()
    return seen.outputs


PER_OUTPUT = Part("one per output element of each matmul (m·p for an (m, n) @ (n, p))", frozenset({"outputs"}), 0,
                  "a dot product of n terms counts n multiply-adds, 2n FLOPs (n multiplications and n additions, "
                  "the first added to 0), the convention FlopCounterMode follows: 2·m·n·p per matmul")


ATTENTION_FLOP_CASES = ((2, 16, 64, 4), (3, 40, 48, 6), (1, 2048, 576, 9), (1, 16384, 4096, 32))


MULTIPLY_ADD = ("the factor 2 of a multiply-add is missing: an (m, n) @ (n, p) matmul does m·n·p multiplications "
                "and as many additions, 2·m·n·p FLOPs")
CAUSAL_HALF = ("halved for the causal mask: the matmul computes the whole T × T (the masked half is computed, then "
               "discarded), and that is what is counted here")


def check_attention_flops(attention_flops, *, cases: tuple = ATTENTION_FLOP_CASES) -> None:
    """attention_flops(batch, seq_len, d_model, n_heads) -> {"qkv_proj",
    "scores", "mix", "out_proj"}: the FLOPs of each matmul of one causal
    multi-head attention layer, against FlopCounterMode on the written-out
    layer (the full T × T of QKᵀ and of weights @ V)."""
    __tracebackhide__ = True
    chk = Check("attention_flops", expects="a dict {'qkv_proj', 'scores', 'mix', 'out_proj'} of ints")

    def explain(case, key, got, want):
        B, T, d, H = case
        ratios = {MULTIPLY_ADD: 0.5,
                  "counted twice over (4 FLOPs per multiply-add?): 2·m·n·p for an (m, n) @ (n, p) matmul": 2.0,
                  "the batch is missing: every sequence of the batch is computed": 1 / B}
        diffs = {}
        if key in ("scores", "mix"):
            product = "q @ kᵀ multiplies (T, head_dim) by (head_dim, T)" if key == "scores" else \
                "the (T, T) weights multiply v, (T, head_dim)"
            ratios.update({f"counted without T: per head, {product}, so it grows with T², not T": 1 / T,
                           CAUSAL_HALF: 0.5,
                           "one head only: every head has its own T × T scores": 1 / H,
                           "head_dim taken as d_model: each head works on head_dim = d_model / n_heads features": H})
            diffs["the attention matmuls are missing: QKᵀ and the weights @ V are matmuls too, the terms that grow "
                  "with T²"] = -want
        else:
            ratios["counted without T: every position is projected, a (B·T, d_model) @ (d_model, d_model) matmul"] = 1 / T
            if key == "qkv_proj":
                ratios["only one of q, k and v: each has its own (d_model, d_model) projection"] = 1 / 3
                diffs["one of q, k and v is missing"] = -(2 * B * T * d * d)
            else:
                diffs["the output projection is missing"] = -want
        outputs = dataclasses.replace(PER_OUTPUT, numbers=matmul_outputs(attention_matmuls(*case)[key]))
        return explanations(got, want, ratios, diffs) | parts_apart([outputs], got, want, "FLOPs")

    labelled = [(f"B={B}, T={T}, d_model={d}, n_heads={H}", (B, T, d, H)) for B, T, d, H in cases]
    findings = _run_cases(chk, attention_flops, labelled, ATTENTION_FLOP_KEYS, lambda c: measured_attention_flops(*c),
                          explain)
    # Half the count is the missing multiply-add factor when the projections are halved too; when only the
    # attention matmuls are halved, both causes give the same numbers, and both are said as candidates.
    halved = {k for k, sets in findings.per_key.items() if any(MULTIPLY_ADD in s for s in sets)}
    if halved & {"qkv_proj", "out_proj"}:
        for key in ("scores", "mix"):
            for found in findings.per_key.get(key, []):
                found.discard(CAUSAL_HALF)
    _finish(chk, findings)


# ---------------------------------------------------------------------------
# 05: the parameters of the whole decoder, per component

PARAM_CASES = (
    ("d_model 64, MHA, tied head", tinylm.ModelConfig(vocab_size=256, d_model=64, n_layers=2, n_heads=4)),
    ("d_model 48, GQA, untied head", tinylm.ModelConfig(vocab_size=300, d_model=48, n_layers=3, n_heads=6,
                                                        n_kv_heads=2, d_ff=100, tie_embeddings=False)),
    ("SmolLM2-135M", SMOLLM2_135M),
    ("Llama-3-8B", LLAMA3_8B),
)
# head_dim set apart from d_model // n_heads, as published models set it; checked after PARAM_CASES pass, so a
# count that gets them right and these wrong has read head_dim from somewhere else
HEAD_DIM_PARAM_CASES = (
    ("d_model 40, 4 heads of head_dim 16 (40 // 4 = 10), GQA 4/2",
     tinylm.ModelConfig(vocab_size=200, d_model=40, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=16)),
    ("Gemma-7B sizes: d_model 3072, 16 heads of head_dim 256 (3072 // 16 = 192)",
     tinylm.ModelConfig(vocab_size=256000, d_model=3072, n_layers=28, n_heads=16, head_dim=256, d_ff=24576,
                        max_seq_len=8192)),
)


def parameter_mistakes(c: tinylm.ModelConfig, key: str) -> tuple[dict[str, float], dict[str, int]]:
    """(ratios, differences) of the known wrong counts of component `key` for config c."""
    L, d, V, hd, H, kv, ff = c.n_layers, c.d_model, c.vocab_size, c.head_dim, c.n_heads, c.n_kv_heads, c.d_ff
    ratios = {"counted for one block only: every one of the n_layers blocks has its own": 1 / L} \
        if key in ("attention", "mlp") else {}
    diffs: dict[str, int] = {}
    if key == "embedding":
        diffs["the tied head counted inside the embedding: it is the same Parameter, count it once"] = V * d \
            if c.tie_embeddings else 0
    elif key == "lm_head":
        if c.tie_embeddings:
            diffs["the tied head counted twice: lm_head.weight is tok_emb.weight, one Parameter (count it under "
                  "embedding, and 0 here)"] = V * d
        else:
            diffs["the untied head is missing: with tie_embeddings=False, lm_head holds its own vocab_size × "
                  "d_model matrix"] = -V * d
        diffs["a bias that does not exist: the head is nn.Linear(..., bias=False)"] = V
    elif key == "attention":
        diffs.update({
            "k_proj and v_proj sized like q_proj: they map d_model to n_kv_heads·head_dim, so "
            "2·n_layers·d_model·(n_heads − n_kv_heads)·head_dim too many": 2 * L * d * (H - kv) * hd,
            "biases that do not exist: Llama's projections are nn.Linear(..., bias=False)": L * (H * hd + 2 * kv * hd + d),
            "biases on q, k and v that do not exist (bias=False)": L * (H + 2 * kv) * hd,
            "the output projection o_proj is missing (n_heads·head_dim -> d_model)": -L * H * hd * d,
            "k_proj or v_proj is missing: both map d_model to n_kv_heads·head_dim": -L * kv * hd * d,
            # zero, so never named, where head_dim is d_model // n_heads
            "head_dim taken as d_model // n_heads: this config sets head_dim apart from it, and every projection is "
            "n_heads·head_dim or n_kv_heads·head_dim wide; read config.head_dim": 2 * L * d * (H + kv) * (d // H - hd),
            "head_dim taken as d_model // n_heads in q_proj and o_proj (sized d_model × d_model): they map between "
            "d_model and n_heads·head_dim, which this config sets apart from d_model; read config.head_dim":
                2 * L * d * (d - H * hd) if d != H * hd else 0,
            "head_dim taken as d_model // n_heads, and k_proj and v_proj sized like q_proj (every projection "
            "d_model × d_model): read config.head_dim, and n_kv_heads·head_dim for k and v":
                4 * L * d * d - L * (2 * d * H * hd + 2 * d * kv * hd) if d != H * hd else 0,
        })
    elif key == "mlp":
        diffs.update({
            "SwiGLU's third matrix forgotten: gate_proj, up_proj and down_proj, 3·d_model·d_ff per block":
                -L * d * ff,
            "biases that do not exist: the three projections are nn.Linear(..., bias=False)": L * (2 * ff + d),
            "the hidden size is 4·d_model (a GELU MLP's), not config.d_ff": 3 * L * d * (4 * d - ff),
            "the hidden size is 8/3·d_model unrounded, not config.d_ff": 3 * L * d * (8 * d // 3 - ff),
            "the hidden size computed from d_model (the 8/3 rule) instead of read from config.d_ff, which a "
            "published model sets itself": 3 * L * d * (tinylm.default_d_ff(d) - ff),
        })
    elif key == "norms":
        diffs.update({
            "the final norm (before the head) is missing: d_model more": -d,
            "one norm per block: each block has two, attn_norm and mlp_norm": -L * d,
            "the norms' gains are missing: 2 per block and the final one, d_model each": -(2 * L + 1) * d,
            "biases in the norms: RMSNorm has a gain only (no bias, unlike LayerNorm)": (2 * L + 1) * d,
            "the norms of one block only: every block has its two, then the final one": -2 * (L - 1) * d,
        })
    return ratios, diffs


def check_param_counts(param_counts, *, cases: tuple = PARAM_CASES) -> None:
    """param_counts(config) -> {"embedding", "attention", "mlp", "norms",
    "lm_head"}: the parameters of tinylm's decoder per component, summed over
    all blocks, against p.numel() of tinylm.Transformer(config) built on the
    meta device (a tied head is one Parameter, counted under embedding)."""
    __tracebackhide__ = True
    chk = Check("param_counts", expects="a dict {'embedding', 'attention', 'mlp', 'norms', 'lm_head'} of ints")

    def explain(case, key, got, want):
        config, = case
        component = role_components(config)
        parts = [part for part in parameter_parts(config) if all(component[role] == key for role in part.leaves)]
        return explanations(got, want, *parameter_mistakes(config, key)) | parts_apart(
            parts, got, want, "parameters", why="every parameter tensor of the model counts")

    findings = _run_cases(chk, param_counts, [(label, (config,)) for label, config in cases], COMPONENTS,
                          lambda c: config_parameters(*c), explain)
    _finish(chk, findings)


# ---------------------------------------------------------------------------
# 06: the KV cache in bytes

KV_CACHE_CASES = (
    ("d_model 64, 3 layers, MHA, float32, batch 5, 1040 positions",
     (tinylm.ModelConfig(d_model=64, n_layers=3, n_heads=4), 1040, 5, torch.float32)),
    ("d_model 48, GQA 6/2, bfloat16, batch 3, 100 positions",
     (tinylm.ModelConfig(d_model=48, n_layers=3, n_heads=6, n_kv_heads=2), 100, 3, torch.bfloat16)),
    ("d_model 40, MQA, float16, 77 positions", (tinylm.ModelConfig(d_model=40, n_layers=5, n_heads=4, n_kv_heads=1),
                                                77, 1, torch.float16)),
    ("SmolLM2-135M, bfloat16, 2048 positions", (SMOLLM2_135M, 2048, 1, torch.bfloat16)),
    ("SmolLM2-135M, int8 (a quantised cache), batch 2, 512 positions", (SMOLLM2_135M, 512, 2, torch.int8)),
    ("Llama-3-8B, bfloat16, 65536 positions", (LLAMA3_8B, 65536, 1, torch.bfloat16)),
)


def kv_mistakes(config: tinylm.ModelConfig, batch_size: int, dtype: torch.dtype) -> dict[str, float]:
    """The known wrong KV-cache sizes, as ratios to the right one."""
    size = torch.empty((), dtype=dtype).element_size()
    return {
        "K and V both: the cache keeps a key and a value vector per position": 0.5,
        "per layer: every block keeps its own keys and values (n_layers of them)": 1 / config.n_layers,
        "n_heads instead of n_kv_heads: the cache stores the key/value heads only": config.n_heads / config.n_kv_heads,
        "numbers, not bytes: multiply by the bytes per element, dtype.itemsize": 1 / size,
        "the dtype is ignored (4 bytes assumed): the bytes per element are dtype.itemsize": 4 / size,
        "the dtype is ignored (2 bytes assumed): the bytes per element are dtype.itemsize": 2 / size,
        "the batch is ignored: every sequence of the batch has its own cache": 1 / batch_size,
    }


def check_kv_cache_bytes(kv_cache_bytes, *, cases: tuple = KV_CACHE_CASES) -> None:
    """kv_cache_bytes(config, seq_len, batch_size, dtype) -> int: the bytes of
    the keys and values of every layer for seq_len positions, against the
    nbytes of the tensors of a tinylm.KVCache holding exactly that many."""
    __tracebackhide__ = True
    chk = Check("kv_cache_bytes", expects="an int, the bytes of the cache")
    findings, vectors = Findings(), []  # per failing case, the counts of vectors it is
    for label, (config, seq_len, batch_size, dtype) in cases:
        want = kv_cache_nbytes(config, seq_len, batch_size, dtype)
        got = _read_int(chk, "kv_cache_bytes", label,
                        chk.call(kv_cache_bytes, config, seq_len, batch_size, dtype, row_label=label))
        ok = got == want
        chk.rows.append(Row(label, ok, close="ok" if ok else "FAIL", note="" if ok or got is None else _ratio(got, want)))
        if got is not None and not ok:
            counted = positions_counted(config, got, seq_len, dtype, batch_size, "seq_len",
                                        "the bytes of seq_len positions are asked for, whatever the config's "
                                        "max_seq_len (a cache can be built for any length)")
            found = explanations(got, want, kv_mistakes(config, batch_size, dtype), {})
            findings.add("", found | {counted} if counted else found)
            findings.first_wrong.setdefault("", f"for {label}: your byte count is {_difference(got, want)}, "
                                                f"{_ratio(got, want)}")
            vectors.append(cached_vectors(config, got, seq_len * batch_size, dtype))
    counted = set.intersection(*vectors) if vectors else set()
    if len(counted) == 1 and not set.intersection(*findings.per_key[""]):  # a named mistake says it better
        for found in findings.per_key[""]:
            found.add(cached_vectors_words(*next(iter(counted))))
    _finish(chk, findings)


def cached_vectors(config: tinylm.ModelConfig, got: int, slots: int, dtype: torch.dtype) -> set[tuple[int, int]]:
    """Every (queries, keys or values) pair of small counts whose vectors, per
    position, sequence and layer, add up to exactly `got` bytes over `slots`
    positions·sequences: the vector sizes are measured, the output features
    of attention's q_proj (a query) and k_proj (a key; v_proj's is the same)."""
    with torch.device("meta"), _initialisers_skipped():
        attn = tinylm.Attention(config)
    size = torch.empty((), dtype=dtype).element_size()
    per_slot, rest = divmod(got, slots * config.n_layers * size)
    if rest or per_slot <= 0:
        return set()
    q, kv = attn.q_proj.out_features, attn.k_proj.out_features
    return {(a, b) for a in range(4) for b in range(5) if a * q + b * kv == per_slot and (a, b) != (0, 2)}


def cached_vectors_words(queries: int, keys_or_values: int) -> str:
    """What a count of that many query vectors and key or value vectors per position means, for every config."""
    said = f"{keys_or_values} vector{'s' * (keys_or_values != 1)} of n_kv_heads·head_dim (a key's or a value's size, " \
           f"k_proj's and v_proj's output)" + (f" and {queries} of n_heads·head_dim (a query's, q_proj's output)"
                                              if queries else "")
    advice = ("a past query is never used again: each step's query attends to the cached keys and values and is "
              "dropped, so only K and V are cached" if queries else
              "the cache holds one key and one value per position")
    return (f"your count is, in every case, exactly {said} per position, sequence and layer (measured against "
            f"attention's projections); the cache holds 2, a key and a value: {advice}")


# ---------------------------------------------------------------------------
# 07: what one decoding step reads from memory

DECODE_KEYS = ("weights", "kv_cache")
DECODE_CASES = (
    ("d_model 64, MHA, tied, float32, context 200", (tinylm.ModelConfig(d_model=64, n_layers=3, n_heads=4), 200,
                                                     torch.float32)),
    ("d_model 48, GQA 6/2, untied, bfloat16, context 100",
     (tinylm.ModelConfig(vocab_size=300, d_model=48, n_layers=5, n_heads=6, n_kv_heads=2, tie_embeddings=False), 100,
      torch.bfloat16)),
    ("SmolLM2-135M, float32, context 1000", (SMOLLM2_135M, 1000, torch.float32)),
    ("SmolLM2-135M, int8 (a quantised model), context 300", (SMOLLM2_135M, 300, torch.int8)),
    ("Llama-3-8B, bfloat16, context 8192", (LLAMA3_8B, 8192, torch.bfloat16)),
)


def decode_reads(config: tinylm.ModelConfig, context_len: int, dtype: torch.dtype) -> dict[str, int]:
    """The bytes a decoding step reads, measured: every parameter of tinylm's
    model in `dtype` once (parameters() yields a tied head once), and the K and
    V tensors of a cache holding context_len positions."""
    params = config_parameters(config)
    size = torch.empty((), dtype=dtype).element_size()
    return {"weights": sum(params.values()) * size, "kv_cache": kv_cache_nbytes(config, context_len, 1, dtype)}


def check_decode_bytes_per_token(decode_bytes_per_token, *, cases: tuple = DECODE_CASES) -> None:
    """decode_bytes_per_token(config, context_len, dtype) -> {"weights",
    "kv_cache"}: the bytes one decoding step reads (every weight once, and the
    keys and values of the context_len cached positions), against the nbytes
    of tinylm's parameters in that dtype and of a KVCache of that length."""
    __tracebackhide__ = True
    chk = Check("decode_bytes_per_token", expects="a dict {'weights', 'kv_cache'} of ints (bytes)")

    def explain(case, key, got, want):
        config, context_len, dtype = case
        size = torch.empty((), dtype=dtype).element_size()
        if key == "kv_cache":
            ratios = kv_mistakes(config, 1, dtype)
            ratios.pop("the batch is ignored: every sequence of the batch has its own cache")
            ratios["context_len + 1 positions: the cache holds the context_len positions before the new token"] = \
                (context_len + 1) / context_len
            found = explanations(got, want, ratios, {})
            counted = None if found else positions_counted(config, got, context_len, dtype)
            return found or ({counted} if counted else set())
        V, d = config.vocab_size, config.d_model
        ratios = {"numbers, not bytes: multiply by the bytes per element, dtype.itemsize": 1 / size,
                  "the dtype is ignored (4 bytes assumed): the bytes per element are dtype.itemsize": 4 / size,
                  "the dtype is ignored (2 bytes assumed): the bytes per element are dtype.itemsize": 2 / size}
        diffs = {"the tied head counted twice: it is the embedding's own matrix, read once": V * d * size
                 if config.tie_embeddings else 0,
                 "a vocab_size × d_model matrix is missing: an untied model has two, the head (read at every step) "
                 "and the embedding (a lookup reads one row of it, but the convention here counts every weight once)":
                     -V * d * size if not config.tie_embeddings else 0,
                 "the norms' gains are missing (2 per block and the final one)": -(2 * config.n_layers + 1) * d * size}
        parts = parameter_parts(config)
        embedding = [part for part in parts if part.leaves == {"tok_emb.weight"}]  # the matrix a lookup reads
        found = explanations(got, want, ratios, diffs) | parts_apart(
            parts, got, want, "parameters", size, {Fraction(1, size): IN_NUMBERS},
            "a decoding step reads every parameter once, whatever it does") | parts_apart(
            embedding, got, want, "parameters", size, {Fraction(1, V): "is counted as the one row a lookup reads: "
                                                       "the convention here counts every parameter once, whole"})
        apart = None if found or (got - want) % size else roles_apart(config, (got - want) // size)
        return found or ({apart} if apart else set())

    findings = _run_cases(chk, decode_bytes_per_token, cases, DECODE_KEYS, lambda c: decode_reads(*c), explain)
    _finish(chk, findings)


# ---------------------------------------------------------------------------
# 09: what one training step costs

TRAIN_KEYS = ("flops", "weights", "grads", "adam_moments")
TRAIN_CASES = (
    ("d_model 64, tied, batch 8, seq 256", (tinylm.ModelConfig(d_model=64, n_layers=2, n_heads=4), 8, 256)),
    ("d_model 48, GQA 6/2, untied, batch 3, seq 40",
     (tinylm.ModelConfig(vocab_size=300, d_model=48, n_layers=3, n_heads=6, n_kv_heads=2, tie_embeddings=False), 3, 40)),
    ("SmolLM2-135M, batch 4, seq 2048", (SMOLLM2_135M, 4, 2048)),
)


def measured_train_step(config: tinylm.ModelConfig, batch_size: int, seq_len: int) -> dict[str, int]:
    """FLOPs of one forward and backward pass of tinylm's model with attention
    written out (attn_impl="reference"), and the bytes of the parameters,
    gradients and AdamW moments after one step, all on the meta device
    (measured once per config, batch size and length; a model of more than
    two layers through per_layer)."""
    return dict(_measured_train_step(config, batch_size, seq_len))


@functools.lru_cache(maxsize=32)
def _measured_train_step(config: tinylm.ModelConfig, batch_size: int, seq_len: int) -> tuple:
    return tuple(per_layer(lambda c: _train_step_measurement(c, batch_size, seq_len), config).items())


def _train_step_measurement(config: tinylm.ModelConfig, batch_size: int, seq_len: int) -> dict[str, int]:
    # The AdamW step uses the counted pass's gradients: what after_one_adamw_step(config) measures (no size
    # depends on the attention's form, the batch or the length), without a second forward and backward pass.
    model = meta_model(config, attn_impl="reference", max_seq_len=seq_len)
    flops = train_step_flops(model, batch_size, seq_len, keep_grads=True)
    return {"flops": flops, **adamw_step_state(model)}


def per_layer(measure: Callable[[tinylm.ModelConfig], dict[str, int]], config: tinylm.ModelConfig) -> dict[str, int]:
    """measure(config), measured on models of one and two layers: tinylm's
    blocks are one module applied n_layers times, so each count of the whole
    model is (the rest) + n_layers·(one block's), and the two measurements
    give both terms exactly. A forward and backward pass on the meta device
    costs about 30 ms of CPU per layer, counted (SmolLM2-135M's thirty: a
    second); tests/checks/test_accounting.py holds this to a measurement of
    the whole depth."""
    if config.n_layers <= 2:
        return measure(config)
    one, two = (measure(dataclasses.replace(config, n_layers=n)) for n in (1, 2))
    return {key: one[key] + (config.n_layers - 1) * (two[key] - one[key]) for key in one}


def train_mistakes(config: tinylm.ModelConfig, batch_size: int, seq_len: int, key: str):
    """(ratios, differences) of the known wrong values of `key`."""
    L, d, V, T, B = config.n_layers, config.d_model, config.vocab_size, seq_len, batch_size
    attention = 12 * L * B * T * T * config.n_heads * config.head_dim  # forward 4·…, backward twice that
    norms = (2 * L + 1) * d
    if key == "flops":
        ratios = {"the forward pass only: the backward pass costs twice the forward (per matmul, one matmul for the "
                  "gradient of its input and one for its weight's)": 1 / 3,
                  "the backward pass counted once: it does two matmuls for every matmul of the forward": 2 / 3,
                  "the factor 2 of a multiply-add is missing: an (m, n) @ (n, p) matmul is 2·m·n·p FLOPs": 0.5}
        diffs = {"6·N·B·T with N every parameter: the norm gains multiply elementwise and the embedding lookup "
                 "copies rows, neither is a matmul (a tied head is, once)":
                     6 * B * T * (norms + (0 if config.tie_embeddings else V * d)),
                 "the attention matmuls are missing: QKᵀ and weights @ V, 12·n_layers·B·T²·n_heads·head_dim with "
                 "their backward": -attention,
                 "attention counted without T: its matmuls grow with T², not T": -attention + attention // T,
                 "attention halved for the causal mask: the matmuls compute the whole T × T": -attention // 2,
                 "one of attention's two T × T matmuls is missing (QKᵀ or weights @ V, each half of the "
                 "attention's FLOPs), with its backward": -attention // 2,
                 "the embedding lookup counted as a matmul: it copies rows, 0 FLOPs (the tied head is the one "
                 "matmul with that matrix)": 6 * B * T * V * d,
                 "the head's matmul is missing: (B·T, d_model) @ (d_model, vocab_size), with its backward":
                     -6 * B * T * V * d,
                 "the norms' gains counted as matmul weights: they multiply elementwise": 6 * B * T * norms}
        return ratios, diffs
    ratios = {"parameters, not bytes: each float32 number is 4 bytes": 1 / 4}
    diffs = {"the tied head counted twice: tok_emb and lm_head share one Parameter": 4 * V * d
             if config.tie_embeddings else 0,
             "the untied head is missing": -4 * V * d if not config.tie_embeddings else 0}
    if key == "adam_moments":
        ratios["one moment only: AdamW keeps two per parameter, exp_avg and exp_avg_sq"] = 0.5
        diffs = {k: 2 * v for k, v in diffs.items()}
    return ratios, diffs


def check_train_step_costs(train_step_costs, *, cases: tuple = TRAIN_CASES) -> None:
    """train_step_costs(config, batch_size, seq_len) -> {"flops", "weights",
    "grads", "adam_moments"}: the matmul FLOPs of one forward and backward
    pass, and the bytes (float32) of the parameters, their gradients and
    AdamW's two moments, against FlopCounterMode on tinylm's model with
    attention written out and the tensors that exist after an AdamW step."""
    __tracebackhide__ = True
    chk = Check("train_step_costs", expects="a dict {'flops', 'weights', 'grads', 'adam_moments'} of ints")

    def explain(case, key, got, want):
        found = explanations(got, want, *train_mistakes(*case, key))
        if key == "flops":
            return found
        per, factors = (8, {}) if key == "adam_moments" else (4, {Fraction(1, 4): IN_NUMBERS})
        return found | parts_apart(parameter_parts(case[0]), got, want, "parameters", per, factors,
                                   "every parameter is stored, has a gradient and two AdamW moments, not only those "
                                   "that multiply (the 6·N rule's N counts the FLOPs of the matmuls, not memory)")

    # budget 0: a training step's measurement takes about 0.1 s of CPU (per_layer), and a search of the config's
    # sizes (about 60 of them) would keep the learner waiting several seconds
    findings = _run_cases(chk, train_step_costs, cases, TRAIN_KEYS, lambda c: measured_train_step(*c), explain,
                          budget=0)
    _finish(chk, findings)
