"""The autograder package's three concerns import one way (issue 15):
grading -> checks -> tinylm, authoring -> checks, and every part may use the
shared base modules (course paths, notebook cell format); nothing imports
back, and no module imports itself through a cycle (imports inside
functions count too: a lazy import is still a dependency)."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "autograder"
# Which parts each part may import; "base" is autograder's own top-level modules.
ALLOWED = {"grading": {"grading", "checks", "base"}, "authoring": {"authoring", "checks", "base"},
           "checks": {"checks", "base"}, "base": {"base"}}
ENTRY_POINTS = {"autograder.__main__"}  # the CLI dispatches to every part


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def part_of(module: str) -> str:
    pieces = module.split(".")
    return pieces[1] if len(pieces) > 1 and pieces[1] in ALLOWED and pieces[1] != "base" else "base"


def imported_modules(path: Path, known: set[str]) -> set[str]:
    """The autograder modules a file imports, relative imports resolved."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[:len(package.split(".")) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            found.add(target)
            found |= {f"{target}.{a.name}" for a in node.names}
    return {m for m in found if m in known}


def graph() -> dict[str, set[str]]:
    files = [p for p in PACKAGE.rglob("*.py") if "notebook_src" not in p.parts and "hub" not in p.parts
             and p.name != "nbgrader_config.py"]
    known = {module_name(p) for p in files}
    return {module_name(p): imported_modules(p, known) - {module_name(p)} for p in files}


def violations(edges: dict[str, set[str]]) -> list[str]:
    return sorted(f"{src} ({part_of(src)}) imports {dst} ({part_of(dst)})" for src, dsts in edges.items()
                  if src not in ENTRY_POINTS for dst in dsts if part_of(dst) not in ALLOWED[part_of(src)])


def cycles(edges: dict[str, set[str]]) -> list[str]:
    # a package's __init__ importing its own modules is not a cycle with them
    edges = {src: {d for d in dsts if not src.startswith(d + ".")} for src, dsts in edges.items()}
    found, state = [], {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = "open"
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == "open":
                found.append(" -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = "done"

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])
    return found


def test_parts_import_one_way():
    wrong = violations(graph())
    assert not wrong, "imports against the layout:\n" + "\n".join(wrong)


def test_no_import_cycles():
    found = cycles(graph())
    assert not found, "import cycles:\n" + "\n".join(found)


def test_tinylm_never_imports_autograder():
    offenders = [str(p.relative_to(ROOT)) for p in (ROOT / "tinylm").rglob("*.py")
                 if any(isinstance(n, (ast.Import, ast.ImportFrom)) and "autograder" in ast.unparse(n)
                        for n in ast.walk(ast.parse(p.read_text())))]
    assert not offenders, f"tinylm must not depend on the course tools: {offenders}"


def test_the_graph_resolves_relative_imports_and_the_rules_bite():
    g = graph()
    assert "autograder.grading.sandbox" in g["autograder.grading.grade"]   # from .sandbox import ...
    assert "autograder.checks.core" in g["autograder.grading.recheck"]     # from ..checks.core import ...
    assert "autograder.course" in g["autograder.authoring.gates"]          # from .. import course
    made_up = {"autograder.grading.grade": {"autograder.authoring.gates"},
               "autograder.checks.core": {"autograder.grading.recheck"},
               "autograder.grading.recheck": {"autograder.grading.grade"}}
    assert len(violations(made_up)) == 2
    found = cycles({**made_up, "autograder.grading.grade": {"autograder.grading.recheck"}})
    assert len(found) == 1 and set(found[0].split(" -> ")) == {"autograder.grading.grade", "autograder.grading.recheck"}
