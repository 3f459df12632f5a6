"""The checks package imports by layer, the way the grader does.

Every module of autograder/checks has a layer in LAYERS (lowest first); a
module imports only modules of its own layer or those below. The exercise
modules (the EXERCISES layer) import the framework and the shared reference
pieces, never another exercise's module: modules of one topic (TOPICS) may
use each other. Imports inside functions count: a lazy import is still a
dependency. Across autograder/, tinylm/ and benchmarks/ nothing imports
through a cycle, and no Python file of the repository's code or tests is
longer than MAX_LINES.

Read with `ast` only: nothing here imports the code it judges.
"""
from __future__ import annotations

import ast
import functools
from pathlib import Path

from ..helpers import import_cycles as cycles

ROOT = Path(__file__).resolve().parents[2]
CHECKS = "autograder.checks"
MAX_LINES = 800
LINE_ROOTS = ("autograder", "tinylm", "benchmarks", "tests")
CYCLE_ROOTS = ("autograder", "tinylm", "benchmarks")

# The layers of autograder.checks, lowest first, as module names relative to the package ("" is the package
# itself). A module may import from its own layer and the layers before it.
LAYERS = (
    ("base", ("learner_code", "framework")),
    ("measure", ("framework.measure", "framework.failure")),
    ("calling", ("framework.calling", "framework.watch")),
    ("trace: record", ("trace.record",)),
    ("trace: align", ("trace.align",)),
    ("trace: rounding", ("trace.rounding",)),
    ("trace: kinds", ("trace.kinds", "trace.sizes")),
    ("trace: explain", ("trace.steps", "trace.blame", "trace.explain")),
    ("trace: numbers", ("trace.numbers",)),
    ("trace: raised", ("trace.bound", "trace.raised", "trace.dtypes")),
    ("trace: plain", ("trace.plain", "trace")),
    ("explainers", ("framework.explain", "framework.explain.dtype", "framework.explain.layout",
                    "framework.explain.merged_axes", "framework.explain.part_kept", "framework.explain.ratio",
                    "framework.explain.rounded", "framework.explain.size_one_axis", "framework.explain.together",
                    "framework.explain.whole", "framework.explain.notebook_names")),
    ("check", ("framework.check",)),
    ("contracts: calls", ("contracts.calls",)),
    ("contracts: locate", ("contracts.locate",)),
    ("contracts: regimes", ("contracts.regimes",)),
    ("contracts: run", ("contracts.run", "contracts")),
    ("references", ("references", "references.attention", "references.rope", "references.heads",
                    "references.generation", "references.hints", "references.modules", "spies")),
    ("shared checks", ("references.attention_step",)),
    ("exercises", ("attention", "embeddings", "norms", "rope", "rope_layouts", "mlp", "model", "model_reference", "model_regimes",
                   "model_shapes", "model_stages", "gqa", "kv_cache", "left_padding", "sampling", "sampling_draws", "sampling_probes", "sampling_generate", "perplexity",
                   "training", "training_accumulation", "training_schedule", "training_random", "training_order", "perplexity_bigram", "accounting", "accounting_measure", "accounting_reading")),
    ("course", ("pitfalls", "answers")),
    ("names kept for callers", ("core", "")),
    # the learner's own model assembled from their saved answers, judged by the package's public checks
    ("course tools", ("learner_model", "real_model", "real_bugs")),
)
EXERCISES = "exercises"
# Exercise modules of one topic, which may import each other; any other exercise module is a topic of its own.
TOPICS = {"model": ("model", "model_reference", "model_regimes", "model_shapes", "model_stages"),
          "accounting": ("accounting", "accounting_measure", "accounting_reading"),
          "sampling": ("sampling", "sampling_draws", "sampling_probes", "sampling_generate"),
          "kv_cache": ("kv_cache", "left_padding"),
          "training": ("training", "training_accumulation", "training_schedule", "training_random", "training_order"),
          "perplexity": ("perplexity", "perplexity_bigram")}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package(path: Path) -> str:
    name = module_name(path)
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def imports_of(path: Path, known: set[str]) -> dict[str, int]:
    """{module imported: the first line importing it} for the modules of `known` a file imports (relative imports
    resolved; `from P import m` counts m when it is a module, else P)."""
    found: dict[str, int] = {}
    package = _package(path)
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            targets = [f"{origin}.{a.name}" if f"{origin}.{a.name}" in known else origin for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:  # `import a.b.c` of a package's module: its nearest known name
                target = target.rpartition(".")[0]
            if target:
                found.setdefault(target, node.lineno)
    return found


def python_files(*roots: str) -> list[Path]:
    return sorted(p for r in roots for p in (ROOT / r).rglob("*.py") if "notebook_src" not in p.parts
                  and ".venv" not in p.parts and "node_modules" not in p.parts)


@functools.lru_cache(maxsize=None)
def graph(*roots: str) -> dict[str, dict[str, int]]:
    files = python_files(*roots)
    known = {module_name(p) for p in files}
    return {module_name(p): {m: line for m, line in imports_of(p, known).items() if m != module_name(p)}
            for p in files}


def layer_index() -> dict[str, int]:
    return {(f"{CHECKS}.{m}" if m else CHECKS): i for i, (_, modules) in enumerate(LAYERS) for m in modules}


def topic_of(module: str) -> str:
    short = module.removeprefix(CHECKS + ".")
    return next((topic for topic, members in TOPICS.items() if short in members), short)


def layer_violations(edges: dict[str, dict[str, int]], layers: dict[str, int]) -> list[str]:
    """Each import inside autograder.checks from a higher layer, or from another exercise topic."""
    exercises = next(i for i, (name, _) in enumerate(LAYERS) if name == EXERCISES)
    found = []
    for src, dsts in sorted(edges.items()):
        if src not in layers:
            continue
        for dst, line in sorted(dsts.items()):
            if dst not in layers:
                continue
            where = f"{src} (line {line}) imports {dst}"
            if layers[dst] > layers[src]:
                found.append(f"{where}: layer '{LAYERS[layers[dst]][0]}' is above '{LAYERS[layers[src]][0]}'")
            elif layers[src] == layers[dst] == exercises and topic_of(src) != topic_of(dst):
                found.append(f"{where}: exercise modules import the framework and references, not each other")
    return found


def test_every_checks_module_has_one_layer():
    declared = [m for _, modules in LAYERS for m in modules]
    assert len(declared) == len(set(declared)), "a module is in two layers of LAYERS"
    missing = sorted(m for m in graph("autograder") if m.startswith(CHECKS) and m not in layer_index())
    assert not missing, "modules of autograder/checks in no layer (add each to LAYERS):\n" + "\n".join(missing)
    gone = sorted(m for m in layer_index() if m not in graph("autograder"))
    assert not gone, "LAYERS names modules that do not exist:\n" + "\n".join(gone)


def test_checks_import_only_downward_and_exercises_not_each_other():
    wrong = layer_violations(graph("autograder"), layer_index())
    assert not wrong, "imports against the checks' layers (tests/checks/test_layers.py, LAYERS):\n" + "\n".join(wrong)


def test_no_import_cycles():
    found = cycles(graph(*CYCLE_ROOTS))
    assert not found, "import cycles:\n" + "\n".join(found)


def test_no_module_is_over_the_line_limit():
    long = [f"{p.relative_to(ROOT)}: {n} lines" for p in python_files(*LINE_ROOTS)
            if (n := len(p.read_text().splitlines())) > MAX_LINES]
    assert not long, f"modules over {MAX_LINES} lines (split them by what they do):\n" + "\n".join(long)


def test_the_rules_bite():
    layers = layer_index()
    made_up = {f"{CHECKS}.framework.calling": {f"{CHECKS}.framework.check": 3},      # calling below check
               f"{CHECKS}.gqa": {f"{CHECKS}.kv_cache": 7, f"{CHECKS}.references.heads": 8},
               f"{CHECKS}.model": {f"{CHECKS}.model_reference": 9},                 # one topic
               f"{CHECKS}.trace.record": {f"{CHECKS}.trace.explain": 2}}
    wrong = layer_violations(made_up, layers)
    assert len(wrong) == 3, wrong
    assert any(w.startswith(f"{CHECKS}.gqa (line 7) imports {CHECKS}.kv_cache:") and "not each other" in w
               for w in wrong), wrong
    assert any(w.startswith(f"{CHECKS}.framework.calling (line 3) imports") and "above" in w for w in wrong), wrong
    found = cycles({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "p": {"p.q": 1}, "p.q": {"p": 1}})
    assert found == ["a -> b -> c -> a"], found


def test_the_graph_reads_relative_lazy_and_package_imports():
    g = graph("autograder")
    assert f"{CHECKS}.framework.measure" in g[f"{CHECKS}.framework.explain.whole"]     # from ..measure import few
    assert f"{CHECKS}.trace" in g[f"{CHECKS}.framework.check"]                   # a lazy `from ..trace import ...`
    assert f"{CHECKS}.references.attention" in g[f"{CHECKS}.rope"]               # a lazy import in a function
    assert f"{CHECKS}.framework.calling" in g["autograder.grading.recheck.run"]  # from ...checks.framework import
