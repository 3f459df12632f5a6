"""Whether a reshape's or a slice's sizes go wrong on its own line or on the line binding the names it reads.

The Where line names the line that binds the sizes (`B, T, _ = x.shape`) beside the call only where that
line can be the one to blame: not where the call's own line shifts one of those names by a number written
there (`start + 1`, `k:k + 1`), nor where the call is given the reference's very sizes in another order.
"""
from __future__ import annotations

import ast
import re

from .align import same_kind
from .record import Op


def own_sizes(body: ast.AST | None, line: int, bound: int, mine: Op, theirs: Op | None) -> bool:
    """Whether the sizes differ by what `line` itself does with the names line `bound` binds (in the
    function `body`): the binding line then read them right, and is no place to look."""
    sizes = [mine.kwargs.get("sizes"), theirs.kwargs.get("sizes") if theirs is not None else None]
    if all(isinstance(v, (tuple, list)) for v in sizes) and sorted(map(str, sizes[0])) == sorted(map(str, sizes[1])):
        return True
    if body is None:
        return False
    names = {n.id for node in ast.walk(body) if getattr(node, "lineno", None) == bound
             and isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For))
             for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
             for n in ast.walk(t) if isinstance(n, ast.Name)}
    if _bounds_the_reference_has(body, line, names, mine, theirs):
        return True
    # A number written on the call's line shifting one of those names (`start + 1`): the line's own offset.
    # A sum of names (`start + T`) keeps the binding line in view: either name's line may be wrong.
    return any(isinstance(node, ast.BinOp) and node.lineno <= line <= (node.end_lineno or node.lineno)
               and {type(node.left), type(node.right)} == {ast.Name, ast.Constant}
               and any(isinstance(n, ast.Name) and n.id in names for n in (node.left, node.right))
               for node in ast.walk(body))


def _bounds_the_reference_has(body: ast.AST, line: int, names: set, mine: Op, theirs: Op | None) -> bool:
    """A one-axis slice on `line` whose bare-name bounds, bound on the other line, each hold a number the
    reference's slice has too (its start, its stop or its length: `cos[start_pos:T]` with T = 5 where the
    reference takes [5:10]): those names were read right, and what goes wrong is how this line uses them."""
    if theirs is None or mine.name != "__getitem__":
        return False
    ours, ref = (_start_stop(op.kwargs.get("index")) for op in (mine, theirs))
    if ours is None or ref is None or None in ref:
        return False
    has = {ref[0], ref[1], ref[1] - ref[0]}
    slices = [n.slice for n in ast.walk(body) if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Slice)
              and n.lineno <= line <= (n.end_lineno or n.lineno) and n.slice.step is None]
    if len(slices) != 1:
        return False
    read = [(bound, value) for bound, value in zip((slices[0].lower, slices[0].upper), ours)
            if isinstance(bound, ast.Name) and bound.id in names]
    return bool(read) and all(value is not None and value in has for _, value in read)


def _start_stop(index) -> tuple | None:
    """(start, stop) of a one-axis slice index as recorded ('[5:10]'), None for any other index."""
    found = re.fullmatch(r"\[(-?\d*):(-?\d*)\]", index) if isinstance(index, str) else None
    return tuple(int(v) if v else None for v in found.groups()) if found else None


def sliced_after(mine: Op, theirs: Op, learner_ops: list | None) -> bool:
    """Whether the learner's run slices the value `mine` made again, with the very bounds of the reference's
    slice `theirs`: `mine` is then a step the reference does not take (a table sliced before a function that
    slices it itself), not the reference's slice given other bounds."""
    bounds = theirs.kwargs.get("index")  # None for an index holding tensors: no bounds to compare
    return theirs.name == "__getitem__" and bounds is not None and any(
        op.name == "__getitem__" and mine.index in op.inputs and op.kwargs.get("index") == bounds
        for op in learner_ops or ())


def not_the_same_step(mine: Op, theirs: Op, learner_ops: list | None, reference_ops: list | None) -> bool:
    """Whether the learner's slice `mine` is a step the reference's slice `theirs` does not stand for: the
    learner's other calls take the reference's very bounds from a table of that shape as often as the
    reference does (this one is a further call, such as a decoding step the reference never makes), or `mine`
    keeps the reference's bounds and narrows another axis besides (a route of its own, such as half a
    table's columns)."""
    bounds, index = theirs.kwargs.get("index"), mine.kwargs.get("index")
    if theirs.name != "__getitem__" or mine.name != "__getitem__" or not isinstance(bounds, str) \
            or not isinstance(index, str):
        return False
    if index.startswith(bounds[:-1] + ","):
        return True

    def taken(ops) -> int:
        return sum(op is not mine and op.name == "__getitem__" and op.kwargs.get("index") == bounds
                   and list(op.input_shapes[:1]) == list(theirs.input_shapes[:1]) for op in ops or ())
    return taken(learner_ops) >= taken(reference_ops) > 0


def sizes_differ(mine: Op, theirs: Op | None, learner_ops: list | None = None) -> str | None:
    """For a reshape, view, expand or slice that the reference makes from
    the same value with other sizes or bounds: what each is given; not where
    the learner slices the result again with the reference's bounds
    (sliced_after)."""
    if theirs is None or mine.name not in ("reshape", "view", "expand", "__getitem__") or not same_kind(mine, theirs):
        return None
    key = "index" if mine.name == "__getitem__" else "sizes"
    a, b = mine.kwargs.get(key), theirs.kwargs.get(key)
    if a is None or b is None or a == b:
        return None
    if sliced_after(mine, theirs, learner_ops):
        return None
    shape = mine.input_shapes[0] if mine.input_shapes else None
    if key == "index":
        if not (mine.outputs and theirs.outputs):
            return None
        if same_length_elsewhere(mine, theirs):
            return f"your slice {a} of shape {shape} gives {tuple(mine.outputs[0].shape)}, as the reference's {b} " \
                   "does: the same length, other bounds"
        return f"your slice {a} of shape {shape} gives {tuple(mine.outputs[0].shape)}; the reference's {b} gives " \
               f"{tuple(theirs.outputs[0].shape)}"
    return (f"your {mine.name} turns shape {shape} into sizes {a}; the reference's turns it into {b}"
            if shape is not None else f"your {mine.name} is given sizes {a}; the reference's {b}")


def same_length_elsewhere(mine: Op, theirs: Op) -> bool:
    """Two slices of inputs of one shape giving one shape with other bounds: the sizes agree and the start
    differs, so the line binding the sizes is not where they go wrong."""
    return (mine.name == "__getitem__" and bool(mine.outputs) and bool(theirs.outputs)
            and list(mine.input_shapes[:1]) == list(theirs.input_shapes[:1])
            and tuple(mine.outputs[0].shape) == tuple(theirs.outputs[0].shape))
