"""The autograder package imports one way, and inside grading by layer.

The parts: grading -> checks -> tinylm, authoring -> checks, the learner's
self-check -> checks, the specimens (synthetic submissions and classes) ->
grading; every part may use the shared base modules (course paths, notebook
cell format). Inside grading, each role's subpackage imports only those
below it (GRADING_LAYERS). Nothing imports through a cycle (imports inside
functions count too: a lazy import is still a dependency), and no module
imports another's underscore names: a name used by another module is public.
"""
from __future__ import annotations

import ast
from pathlib import Path

from ..helpers import import_cycles as cycles

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "autograder"
# Which parts each part may import; "base" is autograder's own top-level modules.
ALLOWED = {"grading": {"grading", "checks", "selfcheck", "base"},
           "authoring": {"authoring", "checks", "selfcheck", "base"},
           "selfcheck": {"selfcheck", "checks", "base"},
           "specimens": {"specimens", "grading", "base"},
           "checks": {"checks", "base"}, "base": {"base"}}
ENTRY_POINTS = {"autograder.__main__"}  # the CLI dispatches to every part
# grading's roles, lowest first: a module imports only from its own layer and those below.
GRADING_LAYERS = (
    ("errors", "wire", "escape", "gradebook", "records", "deadlines", "preprocessors"),  # shared by every role
    ("sandbox",), ("recheck",), ("intake",), ("grade",), ("engines",), ("batch",), ("publish",), ("cli",),
)


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def part_of(module: str) -> str:
    pieces = module.split(".")
    return pieces[1] if len(pieces) > 1 and pieces[1] in ALLOWED and pieces[1] != "base" else "base"


def layer_of(module: str) -> int | None:
    """The GRADING_LAYERS index of a module of autograder.grading (None elsewhere)."""
    pieces = module.split(".")
    if pieces[:2] != ["autograder", "grading"] or len(pieces) < 3:
        return None
    return next(i for i, names in enumerate(GRADING_LAYERS) if pieces[2] in names)


def _package(path: Path) -> str:
    name = module_name(path)
    return name if path.name == "__init__.py" else name.rsplit(".", 1)[0]


def _absolute(node: ast.ImportFrom, package: str) -> str:
    base = package.split(".")[:len(package.split(".")) - node.level + 1] if node.level else []
    return ".".join(base + ([node.module] if node.module else []))


def imported_modules(path: Path, known: set[str]) -> set[str]:
    """The autograder modules a file imports, relative imports resolved."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            target = _absolute(node, _package(path))
            found.add(target)
            found |= {f"{target}.{a.name}" for a in node.names}
    return {m for m in found if m in known}


def source_files(root: Path = PACKAGE) -> list[Path]:
    return [p for p in root.rglob("*.py") if "notebook_src" not in p.parts and "hub" not in p.parts
            and p.name != "nbgrader_config.py"]


def graph() -> dict[str, set[str]]:
    files = source_files()
    known = {module_name(p) for p in files}
    return {module_name(p): imported_modules(p, known) - {module_name(p)} for p in files}


def violations(edges: dict[str, set[str]]) -> list[str]:
    return sorted(f"{src} ({part_of(src)}) imports {dst} ({part_of(dst)})" for src, dsts in edges.items()
                  if src not in ENTRY_POINTS for dst in dsts if part_of(dst) not in ALLOWED[part_of(src)])


def upward(edges: dict[str, set[str]]) -> list[str]:
    """Imports inside grading from a higher layer than the importer's."""
    found = []
    for src, dsts in edges.items():
        for dst in dsts:
            if layer_of(src) is not None and layer_of(dst) is not None and layer_of(dst) > layer_of(src):
                found.append(f"{src} (layer {layer_of(src)}) imports {dst} (layer {layer_of(dst)})")
    return sorted(found)


def private_imports(path: Path, modules: set[str]) -> set[tuple[str, str]]:
    return private_names_taken(path.read_text(), module_name(path), _package(path), modules)


def private_names_taken(source: str, me: str, package: str, modules: set[str]) -> set[tuple[str, str]]:
    """(me, module.name) for each underscore name module `me` (in `package`)
    takes from another of `modules`: `from M import _x`, or `M._x` on a
    module it imported (dunders such as __version__ are public)."""
    aliases: dict[str, str] = {}
    found = set()
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            aliases.update({(a.asname or a.name.split(".")[0]): (a.name if a.asname else a.name.split(".")[0])
                            for a in node.names})
        elif isinstance(node, ast.ImportFrom):
            origin = _absolute(node, package)
            for a in node.names:
                if f"{origin}.{a.name}" in modules:
                    aliases[a.asname or a.name] = f"{origin}.{a.name}"
                elif origin in modules and origin != me and a.name.startswith("_") and not a.name.startswith("__"):
                    found.add((me, f"{origin}.{a.name}"))
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.attr.startswith("_")
                and not node.attr.startswith("__") and aliases.get(node.value.id) in modules
                and aliases[node.value.id] != me):
            found.add((me, f"{aliases[node.value.id]}.{node.attr}"))
    return found


def all_private_imports() -> set[tuple[str, str]]:
    files = [*source_files(), *(ROOT / "tinylm").rglob("*.py")]
    modules = {module_name(p) for p in files}
    return {hit for p in files for hit in private_imports(p, modules)}


def test_parts_import_one_way():
    wrong = violations(graph())
    assert not wrong, "imports against the layout:\n" + "\n".join(wrong)


def test_grading_roles_import_only_downward():
    wrong = upward(graph())
    assert not wrong, "imports against grading's layers (GRADING_LAYERS):\n" + "\n".join(wrong)


def test_every_grading_module_has_a_layer():
    for module in graph():
        if module.startswith("autograder.grading."):
            assert layer_of(module) is not None  # StopIteration from layer_of names a module in no layer


def test_no_import_cycles():
    found = cycles(graph())
    assert not found, "import cycles:\n" + "\n".join(found)


def test_no_module_imports_another_modules_private_names():
    found = sorted(f"{src} uses {name}" for src, name in all_private_imports())
    assert not found, ("a name another module uses is public: drop its underscore\n" + "\n".join(found))


def test_tinylm_never_imports_autograder():
    offenders = [str(p.relative_to(ROOT)) for p in (ROOT / "tinylm").rglob("*.py")
                 if any(isinstance(n, (ast.Import, ast.ImportFrom)) and "autograder" in ast.unparse(n)
                        for n in ast.walk(ast.parse(p.read_text())))]
    assert not offenders, f"tinylm must not depend on the course tools: {offenders}"


def test_the_graph_resolves_relative_imports_and_the_rules_bite():
    g = graph()
    assert "autograder.grading.sandbox.kernel" in g["autograder.grading.grade"]   # from .sandbox.kernel import ...
    assert "autograder.checks.framework.calling" in g["autograder.grading.recheck.run"]  # from ...checks.framework import calling
    assert "autograder.course" in g["autograder.authoring.gates"]                 # from .. import course
    made_up = {"autograder.grading.grade": {"autograder.authoring.gates"},
               "autograder.checks.core": {"autograder.grading.recheck.run"},
               "autograder.grading.recheck.run": {"autograder.grading.grade"}}
    assert len(violations(made_up)) == 2
    assert upward(made_up) == ["autograder.grading.recheck.run (layer 2) imports autograder.grading.grade (layer 4)"]
    found = cycles({**made_up, "autograder.grading.grade": {"autograder.grading.recheck.run"}})
    assert len(found) == 1 and set(found[0].split(" -> ")) == {"autograder.grading.grade",
                                                                 "autograder.grading.recheck.run"}
    planted = "from .grade import _timed, __doc__\nfrom . import batch\nbatch._grade_here, batch.__name__\n"
    hits = private_names_taken(planted, "autograder.grading.cli", "autograder.grading",
                               {"autograder.grading.grade", "autograder.grading.batch"})
    assert hits == {("autograder.grading.cli", "autograder.grading.grade._timed"),
                    ("autograder.grading.cli", "autograder.grading.batch._grade_here")}
