"""Reading a wrong count: which roles and parts of the measurement it names
(parameter and buffer roles, positions, the parts of a matmul count), a
known mistake named only when it explains every failing case, and a count
off by one named part, one size or one config field (Findings)."""
from __future__ import annotations

import dataclasses
import functools
import inspect
import itertools
import math
import re
from fractions import Fraction
from typing import Any, Callable, Mapping

import torch
import tinylm

from ..learner_values import MAX_SHOWN_SIZE, count_words
from ..learner_values import describe
from .framework.calling import guarded_call
from .framework.check import Check, Row
from .framework.explain.notebook_names import say_notebook_name
from .framework.measure import python_number_problem
from .accounting_measure import component_of, kv_cache_nbytes, meta_model


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
                factors: Mapping[Fraction, str] | None = None, why: str = "", blocks: int = 1,
                sizes: Mapping[str, int] | None = None) -> set[Reading]:
    """Every reading of `got` as `want` with one or two disjoint parts left out
    or counted once more, or with one part scaled by a factor the situation
    names ({factor: what it means}); each number of a part counts `per` (the
    bytes of a parameter); `why` says what the situation does with every part
    (else a part's own why is said). With `blocks` > 1, also one or two parts
    of every block counted for one block only (outside the n_layers product).
    With `sizes` ({name: size} of the config), also one or two parts counted
    without one of those sizes as a factor."""
    diff, found = got - want, set()
    if diff == 0:
        return found
    for size in (1, 2):
        for combo in itertools.combinations(enumerate(parts), size):
            leaves = [part.leaves for _, part in combo]
            numbers = sum(part.numbers for _, part in combo)
            if not (size == 2 and leaves[0] & leaves[1]):
                found |= _scaled_by_a_size(combo, numbers, diff, per, noun, sizes or {})
            per_block = all(leaf.endswith(" in every block") for leaf in frozenset().union(*leaves))
            if blocks > 1 and per_block and not (size == 2 and leaves[0] & leaves[1]) and \
                    numbers % blocks == 0 and -diff == (numbers - numbers // blocks) * per:
                names = " and ".join(part.name.removesuffix(" in every block") for _, part in combo)
                found.add(Reading(f"your count has {names} for one block only ({{detail}}): each of the n_layers "
                                  "blocks has its own (a term left outside the n_layers product)",
                                  ("once", frozenset().union(*leaves)), (size, sum(i for i, _ in combo)),
                                  f"{numbers // blocks:,} {noun} instead of {numbers:,}"))
            if (size == 2 and leaves[0] & leaves[1]) or numbers * per != abs(diff):
                continue
            names = " and ".join(part.name for _, part in combo)
            said = why or next((part.why for _, part in combo if part.why), "")
            text = (f"your count leaves out exactly {names}, {{detail}}" + (f": {said}" if said else "")
                    if diff < 0 else f"your count has {names} once more, {{detail}}: each is counted once")
            found.add(Reading(text, (diff < 0, frozenset().union(*leaves)), (size, sum(i for i, _ in combo)),
                              f"{numbers:,} {noun}"))
    total = want // per if per and want % per == 0 else 0  # the numbers the right count holds
    for (i, part), (factor, meaning) in itertools.product(enumerate(parts), (factors or {}).items()):
        if part.numbers and (factor - 1) * part.numbers * per == diff:
            found.add(Reading(f"{part.name}, {{detail}}, {meaning}", ("scaled", part.leaves, factor), (1, i),
                              f"{part.numbers:,} {noun}"))
        rest = total - part.numbers
        if meaning == IN_NUMBERS and total and part.numbers < total and (factor - 1) * rest * per == diff:
            # every part in numbers but one (a parenthesis closed before the multiplication by the element size)
            others = frozenset().union(*(p.leaves for j, p in enumerate(parts) if j != i))
            found.add(Reading(f"every part but {part.name} is counted in numbers, not bytes ({{detail}}): multiply "
                              "the whole count by the bytes per number (dtype.itemsize), not that part alone",
                              ("scaled", others, factor), (len(parts) - 1, i), f"{rest:,} {noun}"))
    return found


def _scaled_by_a_size(combo, numbers: int, diff: int, per: int, noun: str, sizes: Mapping[str, int]) -> set[Reading]:
    """The readings of diff as the parts of `combo`, parts of every block,
    counted without a factor of one of `sizes` ({name: size}): head_dim left
    out of q_proj and o_proj by a misplaced parenthesis. (A factor once more is
    left to the search of the config's fields: n_heads read where n_kv_heads
    belongs is k and v times n_rep, and says more as a field read.)"""
    names = " and ".join(part.name for _, part in combo)
    them = "them" if len(combo) > 1 else "it"
    order = (len(combo) + 1, sum(i for i, _ in combo))  # after a named factor's reading of the same change
    leaves = frozenset().union(*(part.leaves for _, part in combo))
    found = set()
    if not all(leaf.endswith(" in every block") for leaf in leaves):
        return found  # the embedding and the head are the same size: a factor left out of either reads alike
    for name, value in sizes.items():
        # n_layers: a part of every block short of it is that part for one block only, read as such by parts_apart
        if value < 2 or not numbers or name == "n_layers":
            continue
        if numbers % value == 0 and (numbers // value - numbers) * per == diff:
            found.add(Reading(f"your count has {names} without the factor {name} ({{detail}}): a factor {name} is "
                              f"missing from {them}", ("scaled", leaves, Fraction(1, value)), order,
                              f"{numbers // value:,} {noun} instead of {numbers:,}, {name} = {value}"))
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


def explanations(got: int, want: int, ratios: Mapping[str, float], diffs: Mapping[str, int],
                 alone: Mapping[str, float] | None = None) -> set[str]:
    """The named mistakes that reproduce `got` exactly: a ratio got/want, a
    difference got - want, or two of them together. `alone`: ratios matched
    only by themselves, never composed with another (a ratio that depends on
    a size of the case, such as (T + 1) / (2T), composed with a constant one
    fits counts that neither mistake makes)."""
    found = set()
    for bug, r in [*ratios.items(), *(alone or {}).items()]:
        if r != 1 and _near(got, want * r):
            found.add(bug)
    for bug, d in diffs.items():
        if d and _near(got - want, d):
            found.add(bug)
    # Two together, also where one alone fits this case (the reading with fewest mistakes is chosen across the
    # cases, in _agreed), and where this case shows one of the two (the other's ratio is 1 here, its difference 0),
    # so that cases where both show can agree with it.
    names = [*ratios, *diffs]
    silent = [bug for bug, r in ratios.items() if r == 1] + [bug for bug, d in diffs.items() if not d]
    for shown in [bug for bug in found if bug in ratios or bug in diffs]:
        for other in silent:
            first, second = sorted((shown, other), key=names.index)  # spelt as the pairs below
            found.add(f"{first}; and {second}")
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


def refuted(want: int, ratios: Mapping[str, float], diffs: Mapping[str, int]) -> set[str]:
    """The named mistakes (one, or two together, spelt as explanations spells
    them) that would give another count than `want` in a case whose count is
    right: that case rules them out."""
    singles = {bug: want * r for bug, r in ratios.items()} | {bug: want + d for bug, d in diffs.items()}
    pairs = {f"{a}; and {b}": want * ra * rb for (a, ra), (b, rb) in itertools.combinations(ratios.items(), 2)}
    pairs |= {f"{a}; and {b}": want + da + db for (a, da), (b, db) in itertools.combinations(diffs.items(), 2)}
    pairs |= {f"{a}; and {b}": want * ra + db for (a, ra), (b, db) in itertools.product(ratios.items(), diffs.items())}
    return {bug for bug, value in (singles | pairs).items() if not _near(value, want)}


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
        # key -> {mistake: the labels of the cases whose right count of key rules it out}
        self.refuted: dict[str, dict[str, list[str]]] = {}
        self.wrong_calls: list[tuple] = []  # (arguments, {}, the right result) of each case with a wrong count

    def add(self, key: str, found: set[str]) -> None:
        self.per_key.setdefault(key, []).append(found)

    def name(self, chk: Check) -> set[str]:
        """Diagnose the named mistakes; returns the keys they explain."""
        keys_of: dict[str, list[str]] = {}
        readings: dict[str, Reading] = {}  # key -> its reading, as its first failing case reads it
        tied: dict[tuple[str, ...], list[str]] = {}  # candidates -> the keys whose counts each of them gives
        for key, sets in self.per_key.items():
            fitting = self._agreed(sets)
            ruling = self.refuted.get(key, {})
            agreed = [bug for bug in fitting if bug not in ruling]
            if fitting and not agreed:  # each would also change a count that is right: candidates, no more
                one = len(fitting) == 1
                right = list(dict.fromkeys(label for bug in fitting for label in ruling[bug]))
                chk.candidates(f"{key}: {count_words(len(fitting), 'known mistake')} give{'s' if one else ''} exactly "
                               f"your counts in every failing case, but would also change the count for "
                               f"{joined(right)}, where yours is right, so {'it is' if one else 'they are'} "
                               f"no more than {'a candidate' if one else 'candidates'} for the failing cases: "
                               + "; or ".join(f"({i}) {bug}" for i, bug in enumerate(fitting, 1)))
                tied.setdefault((), []).append(key)
                continue
            if len(agreed) > 1:  # two mistakes give the same numbers: neither is confirmed by them
                tied.setdefault(tuple(agreed), []).append(key)
                continue
            for bug in agreed:
                keys_of.setdefault(bug, []).append(key)
                if isinstance(bug, Reading):
                    readings[key] = bug
        for candidates, keys in tied.items():
            if not candidates:
                continue
            named = joined(keys)
            chk.candidates(f"{named}: " * bool(named) + f"{len(candidates)} different mistakes give exactly these "
                           "counts in every case (measured), so the counts alone cannot tell which one is yours; "
                           "candidates: "
                           + "; or ".join(f"({i}) {bug}" for i, bug in enumerate(candidates, 1)))
        for bug, keys in keys_of.items():
            if isinstance(bug, Reading):  # this case's numbers, per key where they differ
                details = [readings[key].detail for key in keys]
                detail = details[0] if len(set(details)) == 1 else "; ".join(f"{k} {d}" for k, d in zip(keys, details))
                label = self.failures.get(keys[0], [("",)])[0][0]
                bug = bug.replace("{detail}", f"{detail} for {label}" if label else detail)
            named = joined(keys)
            chk.diagnose(f"{named}: {bug}" if named else bug)
        return {key for keys in [*keys_of.values(), *tied.values()] for key in keys}

    @staticmethod
    def _agreed(sets: list[set[str]]) -> list[str]:
        """The mistakes every failing case agrees on: the known ones, else the
        one reading of the parts (its first case's, under its preferred name),
        else none (two readings that change different parts: either may be it)."""
        common = set.intersection(*sets)
        alone = {bug for bug in common if "; and " not in bug}
        common = alone or common  # one mistake that every case agrees on before two together that give its numbers
        known = sorted(bug for bug in common if not isinstance(bug, Reading))
        readings = [bug for bug in sets[0] if bug in common and isinstance(bug, Reading)]
        if known or len({r.same for r in readings}) != 1:
            return known
        return [min(readings, key=lambda r: r.order)]


def joined(keys: list[str]) -> str:
    return ", ".join(keys[:-1]) + f" and {keys[-1]}" if len(keys) > 1 else keys[0]


def ratio_words(got: int, want: int) -> str:
    """'0.5x the measured value' style: how far got is from the measurement, as a factor."""
    if want == 0:
        return "the built model has none"
    # Two significant digits, between 1/1000 and 1000: the factor is read off the learner's own number.
    factor = got / want
    if factor <= 0:
        return "none counted" if got == 0 else "a negative count"
    shown = "over 1000" if factor > 1000 else "under 0.001" if factor < 0.001 else f"{factor:.2g}"
    digits = 2
    while 0.001 <= factor <= 1000 and float(shown) == 1 and digits < 9:  # 0.998 is not 1x: digits that tell it apart
        digits += 1
        shown = f"{factor:.{digits}g}"
    return f"{shown}x the measured value"


def difference_words(got: int, want: int) -> str:
    """How far the learner's count is from the measurement: exactly when the
    difference is small (one off, a missing bias), else only its sign."""
    difference = got - want
    return (f"{difference:+,} from the measurement" if abs(difference) <= MAX_SHOWN_SIZE else
            "more than the measurement" if difference > 0 else "less than the measurement")


def read_int(chk: Check, fn_name: str, where: str, value: Any) -> int | None:
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
    read = {k: read_int(chk, fn_name, f"{where}, key {k!r}", value[k]) for k in keys}
    return None if any(v is None for v in read.values()) else read


def _case_row(chk: Check, label: str, got: dict[str, int] | None, want: dict[str, int]) -> list[str]:
    """One table row per case; returns the keys whose values are wrong."""
    if got is None:
        chk.rows.append(Row(label, False, close="FAIL", note="not a dict of ints with the expected keys"))
        return []
    wrong = [k for k in want if got[k] != want[k]]
    note = "; ".join(f"{k}: {ratio_words(got[k], want[k])}" for k in wrong)
    chk.rows.append(Row(label, not wrong, close="FAIL" if wrong else "ok", note=note))
    return wrong


def finish_findings(chk: Check, findings: Findings) -> None:
    """Name the mistakes that explain every failing case, say per wrong
    component in which case it first differs, print, and judge."""
    if not chk.passed:
        explained = findings.name(chk)
        unnamed = [key for key in findings.first_wrong if key not in explained]
        for key in unnamed:
            further = findings.measure_further and findings.measure_further(key, findings.failures.get(key, []),
                                                                           key == unnamed[0])
            chk.measured(findings.first_wrong[key] + (f"; {further}" if further else ""))
        if unnamed and not chk.likely_bugs():
            say_notebook_name(chk, chk.subject, findings.wrong_calls, same=_same_counts)
    chk.finish()


def _same_counts(got, want) -> bool:
    """A result with want's counts: the same int, or a dict holding want's keys with their counts."""
    if isinstance(want, dict):
        return isinstance(got, dict) and all(got.get(key) == count for key, count in want.items())
    return got == want


def run_cases(chk: Check, fn, cases, keys, build_want, explain, budget: int = 100, refute=None) -> Findings:
    """The shared loop of the dict-valued checks: call (with the case's
    arguments), read, compare, explain. An unnamed wrong count is measured
    further: a size argument off by one, else (for the first such key) one
    field of the case's config at another value, in at most `budget`
    evaluations of build_want. refute(case, key, want): the mistakes a case
    whose count of key is right rules out, never named for that key."""
    def measure_further(key, failures, first):
        _, case, got = failures[0]
        return _one_size_off(fn, case, key, got, build_want) \
            or (_one_field_off(failures, key, build_want, budget) if first else None)

    findings = Findings(measure_further)
    for label, case in cases:
        want = build_want(case)
        value = chk.call(fn, *case, row_label=label)
        got = _read_dict(chk, chk.fn_name, label, value, keys)
        wrong = _case_row(chk, label, got, want)
        if wrong:
            findings.wrong_calls.append((case, {}, want))
        readings = _arguments_read_apart(fn, case, got, want) if got is not None and wrong else {}
        for key in (k for k in keys if got is not None and k not in wrong):  # a right count rules out what changes it
            ruled_out = (refute(case, key, want[key]) if refute else set()) | \
                {bug for bug, fits in readings.items() if not fits[key]}
            for bug in ruled_out:
                findings.refuted.setdefault(key, {}).setdefault(bug, []).append(label)
        for key in wrong:
            findings.add(key, explain(case, key, got[key], want[key])
                         | {bug for bug, fits in readings.items() if fits[key]})
            findings.failures.setdefault(key, []).append((label, case, got[key]))
            findings.first_wrong.setdefault(key, f"{key} for {label}: yours is {difference_words(got[key], want[key])} "
                                                 f"({ratio_words(got[key], want[key])})")
    return findings


def _arguments_read_apart(fn, case: tuple, got: dict[str, int], want: dict[str, int]) -> dict[str, dict[str, bool]]:
    """{mistake: {key: whether it gives that key's count in this case}} for two readings of the size arguments
    (ints): two of them exchanged, confirmed by calling the learner's function again with the two exchanged (it
    then gives the measurement), and one of them left out as a factor (the count times that size is the
    measurement) or taken as a factor once more (the measurement times that size is the count). A mistake is
    named for a key only when every failing case agrees (Findings)."""
    names = _positional_names(fn)
    name = lambda i: names[i] if i < len(names) else f"size argument {i + 1}"  # noqa: E731
    sizes = [i for i, size in enumerate(case) if isinstance(size, int) and not isinstance(size, bool)]
    readings: dict[str, dict[str, bool]] = {}
    for i, j in itertools.combinations(sizes, 2):
        if case[i] == case[j]:
            continue
        try:
            again = guarded_call(fn, case[:i] + (case[j],) + case[i + 1:j] + (case[i],) + case[j + 1:])
        except Exception:  # noqa: BLE001: a call that raises with the two exchanged tells nothing
            continue
        if not isinstance(again, dict):
            continue
        bug = (f"your count reads {name(i)} where it needs {name(j)} and {name(j)} where it needs {name(i)} "
               f"(measured: called again with {name(i)} and {name(j)} exchanged, your function gives exactly the "
               f"measurement): exchange them back")
        readings[bug] = {key: again.get(key) == want[key] for key in want}
    for i in (i for i in sizes if case[i] >= 2):
        bug = Reading(f"your count is exactly the measurement divided by {name(i)} in every failing case "
                      f"({{detail}}): a factor {name(i)} is missing from it", ("factor", i), (0, i),
                      f"{name(i)} = {case[i]}")
        readings[bug] = {key: got[key] * case[i] == want[key] for key in want}
        bug = Reading(f"your count is exactly the measurement times {name(i)} in every failing case ({{detail}}): "
                      f"one factor {name(i)} too many", ("factor too many", i), (0, i), f"{name(i)} = {case[i]}")
        readings[bug] = {key: got[key] == want[key] * case[i] for key in want}
    return readings


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


