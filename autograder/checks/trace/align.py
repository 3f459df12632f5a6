"""Aligning the learner's values with the reference's (see __init__).

A learner value is *matched* when some reference value equals it up to the
layout changes a reference also makes: the same dtype, the same numbers
after a permutation of the reference's axes and merging adjacent ones (so
`flatten(0, 1)` of a (B, T, V) tensor and `transpose(1, 2)` match, while a
`view` that splits an axis matches only what the reference split the same
way: `view(B, T, hd, H)` where the reference has (B, T, H, hd) does not; a
split the reference never makes, an expand before a reshape, matches the
value it merges back into in its own axis order). A
value is *good* when it is matched, when a later value computed from it is
matched (another right route to the same result; not through a value holding
nan or +inf where the reference holds none, which reaches a match by accident),
or when it was made from no tensor at all (a constant). The frontier is the set of calls the output
depends on that are not good although everything they read is.
"""
from __future__ import annotations

import itertools
import math

import torch
from .record import LAYOUT_OPS, LEAF, Op, Trace


# -- comparing values up to layout -------------------------------------------------
def tolerance_for(dtype: torch.dtype) -> float:
    return {torch.float64: 1e-5, torch.float32: 2e-4, torch.bfloat16: 3e-2, torch.float16: 5e-3}.get(dtype, 0.0)


def values_close(a: torch.Tensor, b: torch.Tensor, rel: float) -> bool:
    """a, b float64 of the same shape: equal inf/nan pattern, finite parts within rel of b's scale."""
    if rel == 0.0:
        return bool(torch.equal(a, b))
    fa, fb = torch.isfinite(a), torch.isfinite(b)
    if not torch.equal(fa, fb) or not torch.equal(a[~fa].nan_to_num(), b[~fb].nan_to_num()):
        return False
    if not fa.any():
        return True
    scale = float(b[fb].abs().max())
    return bool(((a[fa] - b[fb]).abs() <= rel * scale + 1e-12 + rel * b[fb].abs()).all())


def same_values(t: torch.Tensor, ref: torch.Tensor) -> bool:
    """The same shape, dtype and values, up to the dtype's tolerance."""
    return (tuple(t.shape) == tuple(ref.shape) and t.dtype == ref.dtype
            and values_close(t.double(), ref.double(), tolerance_for(t.dtype)))


def _ends(sorted_values: torch.Tensor) -> tuple[float, float] | None:
    """The least and the greatest of sorted float64 values; None unless all are finite (sort puts -inf
    first, and +inf and nan last)."""
    lo, hi = float(sorted_values[0]), float(sorted_values[-1])
    return (lo, hi) if math.isfinite(lo) and math.isfinite(hi) else None


def _ends_close(a: tuple[float, float] | None, b: tuple[float, float] | None, rel: float) -> bool:
    """False only where values_close of the two sorted arrays is False: it is values_close's own test, in the same
    float64 arithmetic, on the two ends alone (the largest magnitude of sorted finite values is at an end).
    Most reference values of a size differ from a learner's at an end, and this costs a microsecond where
    values_close costs a hundred (a trace of a decoding loop makes about 200 000 such comparisons)."""
    if a is None or b is None:
        return True
    if rel == 0.0:
        return a == b
    scale = max(abs(b[0]), abs(b[1]))
    return all(abs(x - y) <= rel * scale + 1e-12 + rel * abs(y) for x, y in zip(a, b))


def _merges(finer: tuple, coarser: tuple) -> bool:
    """True when shape `coarser` is `finer` with some runs of adjacent axes
    merged into one (size-1 axes ignored on both sides)."""
    finer, coarser = [n for n in finer if n != 1], [n for n in coarser if n != 1]
    i = 0
    for target in coarser:
        product = 1
        while product < target and i < len(finer):
            product *= finer[i]
            i += 1
        if product != target:
            return False
    return i == len(finer)


Owner = tuple  # (op index, output slot); call input k is (-2 - k, 0)


class Values:
    """The reference's values (its inputs and each call's results), indexed
    by size for matching."""

    def __init__(self, reference: "Trace"):
        self.by_numel: dict[int, list[tuple[torch.Tensor, torch.Tensor, tuple | None, Owner]]] = {}
        items = [(t, (-2 - k, 0)) for k, t in enumerate(reference.inputs)]
        items += [(t, (LEAF - k, 0)) for k, t in enumerate(reference.leaves)]
        items += [(t, (op.index, k)) for op in reference.ops for k, t in enumerate(op.outputs)]
        for t, owner in items:
            if t.numel() == 0 or t.is_complex():
                continue
            d = t.detach().cpu()
            ref_sorted = d.double().flatten().sort().values
            self.by_numel.setdefault(d.numel(), []).append((d, ref_sorted, _ends(ref_sorted), owner))

    def owners(self, value: torch.Tensor) -> list[Owner]:
        """Every reference value equal to `value` up to layout, by owner: a
        value with the reference's axes permuted and some merged; or, where
        the reference never splits that value into as many axes, a finer
        split of it (a learner's expand before a reshape)."""
        if value.numel() == 0 or value.is_complex():
            return []
        v = value.double()
        rel = tolerance_for(value.dtype) if value.is_floating_point() else 0.0
        sorted_v = v.flatten().sort().values
        ends = _ends(sorted_v)
        same = [(ref, owner) for ref, ref_sorted, ref_ends, owner in self.by_numel.get(value.numel(), [])
                if ref.dtype == value.dtype and _ends_close(ends, ref_ends, rel) and values_close(sorted_v, ref_sorted, rel)]
        swaps = value.is_floating_point()
        coarser = [owner for ref, owner in same if _same_up_to_layout(v, ref.double(), rel, swaps=swaps)]
        if coarser or any(sized_axes(ref.shape) == sized_axes(value.shape) for ref, _ in same):
            return coarser  # the reference has this split: a different one is a different value
        return [owner for ref, owner in same if _same_up_to_layout(ref.double(), v, rel, permute=False)]


def _same_up_to_layout(v: torch.Tensor, ref: torch.Tensor, rel: float, permute: bool = True,
                       swaps: bool = True) -> bool:
    """v equals ref with ref's axes permuted (if `permute`; two axes of one size swapped only if `swaps`) and
    adjacent ones merged."""
    if tuple(v.shape) == tuple(ref.shape) and values_close(v, ref, rel):
        return True
    r = ref.reshape([n for n in ref.shape if n != 1]) if ref.dim() else ref
    if r.dim() > 6:
        return False
    for perm in itertools.permutations(range(r.dim())) if permute else [tuple(range(r.dim()))]:
        if not swaps and _swaps_equal_sizes(perm, tuple(r.shape)):
            continue
        if _merges(tuple(r.shape[p] for p in perm), tuple(v.shape)) and values_close(r.permute(perm).reshape(v.shape), v, rel):
            return True
    return False


def _swaps_equal_sizes(perm: tuple, shape: tuple) -> bool:
    """Whether perm puts one of two axes of the same size before the other. A mask or an index table
    transposed over two axes of one size is another mask (triu() is tril() transposed), which its 0/1
    values cannot tell apart from a layout change; floating values can (scores transposed are matched, and
    the softmax over them is where they go wrong)."""
    return any(shape[perm[i]] == shape[perm[j]] and perm[i] > perm[j]
               for i in range(len(perm)) for j in range(i + 1, len(perm)))


def _spoiled(t: torch.Tensor) -> bool:
    """Holds nan or +inf (-inf is a mask's fill, on a right route too)."""
    return t.is_floating_point() and bool((torch.isnan(t) | torch.isposinf(t)).any())


def _strong(t: torch.Tensor) -> bool:
    """A match that shows a route is right: floating values, more than one
    (a 0/1 mask or a single number equals a reference one by chance too often)."""
    return t.numel() > 1 and t.is_floating_point()


class Analysis:
    """The learner's calls set against the reference's values: which are
    matched (the reference has the value), good (matched, or leading to a
    matched value by another route, or a constant), and where the first
    wrong value is made (see the module docstring)."""

    def __init__(self, learner: Trace, reference: Trace):
        self.learner, self.reference = learner, reference
        values = Values(reference)
        ops = self.ops = learner.ops
        # What the learner's call inputs and leaves (a module's weights) equal among the reference's values:
        # the two sides' inputs need not line up.
        self.given = {-2 - k: {(-2 - k, 0)} | set(values.owners(t.detach().cpu())) for k, t in enumerate(learner.inputs)}
        self.given |= {LEAF - k: set(values.owners(t)) for k, t in enumerate(learner.leaves)}
        self.found: list = []
        # Measurements a later reading asks for more than once, by the pair of calls they are of (rounding's
        # float16 detours): made on demand, kept with this analysis.
        self.detours: dict = {}
        self.doubtful: list[bool] = []  # made from a handful of ids the reference does not have (a wrong token)
        for op in ops:  # in the order they ran: a call's inputs are judged before it
            doubt = any(j >= 0 and (self.doubtful[j] or (slot < len(ops[j].outputs) and _few_ids(ops[j].outputs[slot])
                                                         and not self.found[j][slot]))
                        for j, slot in zip(op.inputs, op.slots or [0] * len(op.inputs)))
            self.doubtful.append(doubt)
            self.found.append([[] if doubt else self._credible(op, t, values.owners(t)) for t in op.outputs])
        self.matched = [any(self.found[i]) for i in range(len(ops))]
        strong = [any(f and _strong(t) for f, t in zip(self.found[i], ops[i].outputs)) for i in range(len(ops))]
        children: dict[int, list[int]] = {}
        for op in ops:
            for i in op.inputs:
                if i >= 0:
                    children.setdefault(i, []).append(op.index)
        # A route through nan or +inf, which the reference never passes through, is no other right route: a
        # comparison with nan is False, so a spoiled value can reach a matched result by accident (a nucleus mask
        # of nan drops nothing, and the logits come back unchanged).
        clean = not any(_spoiled(t) for op in reference.ops for t in op.outputs)
        spoiled = [clean and not self.matched[i] and any(_spoiled(t) for t in ops[i].outputs) for i in range(len(ops))]
        # A step that gives back a value it read (x · 1, x + 0) reaches a match without showing that its other
        # operands are right: a table row of ones read where the rows of cos belong would pass for another route.
        echoes = [self._echoed(op) for op in ops]
        leads_to_match = [False] * len(ops)
        for op in reversed(ops):
            leads_to_match[op.index] = not spoiled[op.index] and any(
                (strong[c] or leads_to_match[c]) and not (echoes[c] and op.index not in echoes[c])
                for c in children.get(op.index, []))
        self.good = [self.matched[i] or leads_to_match[i] or ops[i].factory for i in range(len(ops))]

    def _value_read(self, j: int, slot: int) -> torch.Tensor | None:
        """The value a call read from producer j (a call, a call input, a leaf)."""
        if j >= 0:
            return self.ops[j].outputs[slot] if slot < len(self.ops[j].outputs) else None
        values, k = (self.learner.leaves, LEAF - j) if j <= LEAF else (self.learner.inputs, -2 - j)
        return values[k] if 0 <= k < len(values) else None

    def _echoed(self, op: Op) -> set[int]:
        """The producers of the operands an arithmetic call returns unchanged (x · 1, x + 0), if it returns one."""
        if base_name(op.name) not in _ARITHMETIC or len(op.outputs) != 1 or not _strong(op.outputs[0]):
            return set()
        out = op.outputs[0]
        read = [(j, self._value_read(j, slot)) for j, slot in zip(op.inputs, op.slots or [0] * len(op.inputs))]
        return {j for j, value in read if isinstance(value, torch.Tensor) and value.shape == out.shape
                and value.dtype == out.dtype and torch.equal(value.to(out.device), out)}

    def _owners_read(self, op: Op) -> set:
        owned: set = set()
        for j, slot in zip(op.inputs, op.slots or [0] * len(op.inputs)):
            if j >= 0:
                owned |= set(self.found[j][slot]) if slot < len(self.found[j]) else set()
            else:
                owned |= self.given.get(j, set())
        return owned

    def _credible(self, op: Op, value: torch.Tensor, owners: list) -> list:
        """The owners of a learner value that count as a match. A few
        integers or booleans (token ids, a mask row) equal a reference value
        by chance too easily: they count only where the reference made them
        with a call of the same kind from a value this call reads too (or
        holds them as an input). What is made from unmatched ids (the
        embedding of a wrong token, and all after it) matches only by chance
        as well: it is `doubtful` and matches nothing."""
        if not owners or not _few_ids(value):
            return owners
        read = self._owners_read(op)
        reference = self.reference.ops
        return [o for o in owners if o[0] <= -2 or (o[0] >= 0 and same_kind(op, reference[o[0]]) and any(
            (i, s) in read for i, s in zip(reference[o[0]].inputs, reference[o[0]].slots or [0] * len(reference[o[0]].inputs))))]

    def frontier(self, out_ops: list[int]) -> list[int]:
        """The calls `out_ops` depend on that are not good although everything they read is."""
        return [i for i in sorted(ancestors(self.ops, out_ops))
                if not self.good[i] and not self.ops[i].raised and all(self._good_input(j) for j in self.ops[i].inputs)]

    def _good_input(self, j: int) -> bool:
        """A call's value that is good, or an input from outside the trace; a
        memory the trace wrote into (a cache's buffer read again) only when
        the reference has its value too."""
        if j >= 0:
            return self.good[j]
        return j not in self.learner.rewritten or bool(self.given.get(j))


def _few_ids(t: torch.Tensor) -> bool:
    """A handful of integers or booleans: equal to a reference value by chance too easily."""
    return not t.is_floating_point() and not t.is_complex() and t.numel() < 8


def size_one_axis(longer: tuple, shorter: tuple) -> int | None:
    """The position of the one axis of size 1 that `longer` has and `shorter`
    lacks, all else equal (None when the shapes differ otherwise)."""
    longer, shorter = tuple(longer), tuple(shorter)
    if len(longer) != len(shorter) + 1:
        return None
    return next((i for i in range(len(longer)) if longer[i] == 1 and longer[:i] + longer[i + 1:] == shorter), None)


def one_axis_apart(shape, other) -> bool:
    """One shape is the other with one more axis of size 1 (a kept or a squeezed axis)."""
    return size_one_axis(shape, other) is not None or size_one_axis(other, shape) is not None


def base_name(name: str) -> str:
    """One name for the spellings of one operation: __rmul__, mul, multiply -> mul."""
    name = name.strip("_")
    name = name[1:] if name.startswith("r") and name[1:] in _ARITHMETIC else name
    return _ALIASES.get(name, name)


_ARITHMETIC = {"add", "sub", "mul", "truediv", "div", "matmul", "pow", "floordiv", "mod"}


_ALIASES = {"truediv": "div", "true_divide": "div", "divide": "div", "multiply": "mul", "subtract": "sub",
            "mm": "matmul", "bmm": "matmul", "linear": "matmul", "einsum": "matmul", "neg": "negative",
            "greater_equal": "ge", "less_equal": "le", "greater": "gt", "less": "lt"}


def ancestors(ops: list[Op], roots) -> set[int]:
    """The calls in `roots` (negative: an input of the call, skipped) and every call they are computed from."""
    seen: set[int] = set()
    stack = [i for i in roots if i >= 0]
    while stack:
        i = stack.pop()
        if i not in seen:
            seen.add(i)
            stack += [j for j in ops[i].inputs if j >= 0]
    return seen


def same_kind(op: Op, ref_op: Op) -> bool:
    return base_name(op.name) == base_name(ref_op.name)


def sized_axes(shape: tuple) -> list[int]:
    return sorted(n for n in shape if n != 1)


def owner_value(reference: Trace, owner: Owner) -> torch.Tensor | None:
    i, slot = owner
    if i >= 0:
        return reference.ops[i].outputs[slot] if slot < len(reference.ops[i].outputs) else None
    if i <= LEAF:
        return reference.leaves[LEAF - i] if LEAF - i < len(reference.leaves) else None
    return reference.inputs[-2 - i] if -2 - i < len(reference.inputs) else None


def _computing_steps(reference: Trace, paths: list) -> set[str]:
    """The kinds of the reference's calls (layout changes left out) on the paths between a value and its call."""
    return {base_name(reference.ops[i].name) for p in paths if p for i in p if reference.ops[i].name not in LAYOUT_OPS}


def steps_taken_later(first: Op, ops: list[Op], reference: Trace, paths: list) -> bool:
    """True when every computing step (not a layout change) the reference
    takes between a value and its call is one the learner takes on a value
    computed from `first`'s result."""
    steps = _computing_steps(reference, paths)
    later, taken = {first.index}, set()
    for op in ops[first.index + 1:]:
        if any(i in later for i in op.inputs):
            later.add(op.index)
            taken.add(base_name(op.name))
    return bool(steps) and steps <= taken


def path_between(reference: Trace, value: Owner, ancestor: Owner) -> list[int] | None:
    """The reference's calls from `ancestor` to `value` (one path), or None
    when `value` is not computed from `ancestor`."""
    ops = reference.ops
    stack, seen = [(value, [])], set()
    while stack:
        owner, path = stack.pop()
        if owner == ancestor:
            return path
        i = owner[0]
        if i < 0 or owner in seen:
            continue
        seen.add(owner)
        stack += [((j, s), path + [i]) for j, s in zip(ops[i].inputs, ops[i].slots or [0] * len(ops[i].inputs))]
    return None


def steps_joined_after(first: Op, ops: list[Op], reference: Trace, paths: list) -> bool:
    """True when the computing steps the reference takes between a value and
    its call are taken by the learner on a branch of their own, which the
    chain of calls right after `first` joins ((w·c + b)·rsqrt(var) where the
    reference has c·rsqrt(var)·w + b): the steps are there, in another order,
    and none is missing. Only that chain is followed, up to the first call
    that joins another branch: a step missing here and taken again much later
    (the next block's norm) does not count."""
    steps = _computing_steps(reference, paths)
    before, current, taken = ancestors(ops, first.inputs), first.index, set()
    for _ in range(4):
        reader = next((op for op in ops[current + 1:] if current in op.inputs), None)
        if reader is None:
            return False
        branch = ancestors(ops, [i for i in reader.inputs if i != current]) - before
        taken |= {base_name(reader.name)} | {base_name(ops[i].name) for i in branch}
        if branch:
            return bool(steps) and steps <= taken
        current = reader.index
    return False
