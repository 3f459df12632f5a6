"""Every dotted module name and every source path the repository names
exists: in code (`python -m ...`, the warm jail server's allow-list, nbgrader
configuration), in docs, the Makefile and CI. A module moved or renamed
without updating every mention fails here, naming the file and the line."""
from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("autograder", "tinylm")
DOTTED = re.compile(r"\b(?:%s)(?:\.[A-Za-z_]\w*)+" % "|".join(PACKAGES))
PATH = re.compile(r"(?<![\w./-])(?:%s|tests|benchmarks)(?:/[\w.-]+)+\.py\b" % "|".join(PACKAGES))


def tracked_files() -> list[Path]:
    """The repository's files (git's list), but ignore patterns and this test's own examples."""
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True)
    names = out.stdout.split("\0") if out.returncode == 0 else [str(p.relative_to(ROOT)) for p in ROOT.rglob("*")]
    skipped = {Path(__file__).resolve(), (ROOT / ".gitignore").resolve()}
    return [ROOT / n for n in names if n and (ROOT / n).is_file() and (ROOT / n).resolve() not in skipped]


def top_level_names(path: Path) -> set[str]:
    """What a module defines at its top level (functions, classes, assignments, imports)."""
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def resolves(dotted: str) -> bool:
    """A module or package of the repository, or a name one defines at its top."""
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        base = ROOT.joinpath(*parts[:n])
        module = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
        if module.is_file():
            rest = parts[n:]
            return not rest or rest[0] in top_level_names(module) or (base / rest[0]).exists() \
                or (base / f"{rest[0]}.py").exists()
    return False


# A name such as tinylm.pt is a file, not a module.
FILE_SUFFIXES = {"pt", "py", "json", "toml", "txt", "log", "ipynb", "csv", "html", "md", "gguf", "db"}


def mentions(text: str) -> list[str]:
    """The dotted names and source paths in `text`, but patterns
    (NN_name.py, nbNN.py, tinylm.presets.NB09_*), dunders and file names."""
    dotted = [m.group(0) for m in DOTTED.finditer(text) if not text[m.end():m.end() + 1] == "*"
              and m.group(0).split(".")[-1] not in FILE_SUFFIXES | {"__file__", "__name__", "__main__"}]
    paths = [m.group(0) for m in PATH.finditer(text) if not re.search(r"[A-Z]{2,}", m.group(0))]
    return dotted + paths


def stale_mentions(text: str) -> list[str]:
    return [name for name in mentions(text)
            if not (ROOT / name).is_file() and not ("/" not in name and resolves(name))]


def test_every_module_name_and_source_path_mentioned_exists():
    stale = []
    for path in tracked_files():
        try:
            text = path.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        for number, line in enumerate(text.splitlines(), 1):
            stale += [f"{path.relative_to(ROOT)}:{number}: {name}" for name in stale_mentions(line)]
    assert not stale, "names of modules or files that do not exist:\n" + "\n".join(stale)


def test_a_stale_name_is_found():
    assert stale_mentions("python -m autograder.grading.recheck --child") == []
    assert stale_mentions("see autograder/grading/records.py and autograder.grading.records.GradeResult") == []
    assert stale_mentions("c.X = 'autograder.grading.deadlines.LatePolicyPlugin'") == []
    assert stale_mentions("tinylm.pt, autograder/authoring/notebook_src/NN_name.py, tinylm.presets.NB09_*") == []
    moved = ["autograder.grading.jail", "autograder/grading/submission.py", "autograder.grading.records.Nothing",
             "tests/test_no_such_file.py"]
    assert sorted(stale_mentions(" ".join(moved))) == sorted(moved)
