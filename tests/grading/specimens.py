"""Learner code shared by the grader's tests: a wrong answer, and an attack
that fools the notebook kernel (every failing assert swallowed), which only
the recheck sees through; all on notebook 01 (A)."""
from __future__ import annotations

from autograder import course
from autograder.notebook_format import HIDDEN_BLOCK, read

A = "01_embeddings"

WRONG_EMBED = """def embed(ids, weight):
    return torch.zeros(*ids.shape, weight.shape[1], dtype=weight.dtype) + 0 * weight.sum()
"""

SWALLOW = """import ast
class Swallow(ast.NodeTransformer):
    def visit_Assert(self, node):
        return None
    def visit_Module(self, node):
        self.generic_visit(node)
        handler = ast.ExceptHandler(type=ast.Name('BaseException', ast.Load()), name=None, body=[ast.Pass()])
        node.body = [ast.Try(body=node.body or [ast.Pass()], handlers=[handler], orelse=[], finalbody=[])]
        return ast.fix_missing_locations(node)
get_ipython().ast_transformers.append(Swallow())
"""


def hidden_lines() -> list[str]:
    """The hidden tests' non-trivial lines of A, read from its source notebook."""
    lines = [line.strip() for c in read(course.source_notebook(A)).cells for block in HIDDEN_BLOCK.findall(c.source)
             for line in block.splitlines() if len(line.strip()) >= 12]
    assert lines, "notebook 01 has no hidden test lines to look for"
    return lines
