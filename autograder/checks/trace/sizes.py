"""Whether a reshape's or a slice's sizes go wrong on its own line or on the line binding the names it reads.

The Where line names the line that binds the sizes (`B, T, _ = x.shape`) beside the call only where that
line can be the one to blame: not where the call's own line shifts one of those names by a number written
there (`start + 1`, `k:k + 1`), nor where the call is given the reference's very sizes in another order.
"""
from __future__ import annotations

import ast

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
    # A number written on the call's line shifting one of those names (`start + 1`): the line's own offset.
    # A sum of names (`start + T`) keeps the binding line in view: either name's line may be wrong.
    return any(isinstance(node, ast.BinOp) and node.lineno <= line <= (node.end_lineno or node.lineno)
               and {type(node.left), type(node.right)} == {ast.Name, ast.Constant}
               and any(isinstance(n, ast.Name) and n.id in names for n in (node.left, node.right))
               for node in ast.walk(body))
