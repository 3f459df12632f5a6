"""Paths of the course and the nbgrader calls every tool shares."""
from __future__ import annotations

import filecmp
import os
import subprocess
import sys
import tempfile
from pathlib import Path

AUTOGRADER_DIR = Path(__file__).resolve().parent
ROOT = AUTOGRADER_DIR.parent
SOURCE_DIR = ROOT / "solutions"
RELEASE_DIR = ROOT / "notebooks"
# files of the release folder that the course ships and nbgrader does not generate
RELEASE_COURSE_FILES = {Path("nbgrader_config.py"), Path("jupyter_server_config.py")}
COURSE_DATA = ROOT / ".course"
NOTEBOOK_SOURCES = AUTOGRADER_DIR / "authoring" / "notebook_src"

ASSIGNMENTS = (
    "01_embeddings", "02_rmsnorm", "03_causal_attention", "04_rope", "05_swiglu",
    "06_kv_cache", "07_gqa", "08_sampling", "09_training", "10_perplexity",
)


def course_roots() -> list[Path]:
    """The course checkouts Python imports from: ROOT, and the one the
    environment's editable install points at when that is another folder
    (an instructor's course copy graded with PYTHONPATH, while the jailed
    `python -I`, which ignores PYTHONPATH, imports from the install)."""
    import importlib.metadata
    import json
    from urllib.parse import unquote, urlparse
    try:
        text = importlib.metadata.distribution("tinylm-course").read_text("direct_url.json") or "{}"
        info = json.loads(text)
    except (importlib.metadata.PackageNotFoundError, ValueError):
        info = {}
    roots = [ROOT]
    url = urlparse(str(info.get("url", "")))
    if (info.get("dir_info") or {}).get("editable") and url.scheme == "file":
        installed = Path(unquote(url.path)).resolve()
        if installed.is_dir() and installed != ROOT.resolve():
            roots.append(installed)
    return roots


def assignments() -> list[str]:
    """The assignments that exist in solutions/, in course order."""
    return [a for a in ASSIGNMENTS if (SOURCE_DIR / a / f"{a}.ipynb").is_file()]


def source_notebook(assignment: str) -> Path:
    return SOURCE_DIR / assignment / f"{assignment}.ipynb"


def release_notebook(assignment: str, release_dir: Path = RELEASE_DIR) -> Path:
    return Path(release_dir) / assignment / f"{assignment}.ipynb"


def path_with_interpreter_bin(path: str) -> str:
    """nbgrader shells out to `alembic` to create the gradebook: this
    interpreter's bin/ must come first on PATH, or the gradebook is left broken."""
    bin_dir = str(Path(sys.executable).parent)
    if path.split(os.pathsep)[0] == bin_dir:
        return path
    return os.pathsep.join([bin_dir, path])


def nbgrader_env() -> dict:
    env = dict(os.environ)
    env["PATH"] = path_with_interpreter_bin(env.get("PATH", ""))
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def nbgrader_config():
    """The course's nbgrader configuration (autograder/nbgrader_config.py) as
    traitlets loads it, for nbgrader's classes used in this process."""
    from traitlets.config.loader import PyFileConfigLoader

    return PyFileConfigLoader("nbgrader_config.py", path=str(AUTOGRADER_DIR)).load_config()


def nbgrader_cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run `nbgrader ARGS` from autograder/, the only place it finds the
    course config (elsewhere it silently makes a fresh gradebook)."""
    COURSE_DATA.mkdir(exist_ok=True)
    cmd = [sys.executable, "-m", "nbgrader", *args]
    proc = subprocess.run(cmd, cwd=AUTOGRADER_DIR, env=nbgrader_env(), capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[2:])} failed (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def generate(release_dir: Path | None = None, *, db: bool = True, db_url: str | None = None) -> Path:
    """nbgrader generate_assignment for every assignment, with --force (an
    existing release folder is otherwise skipped silently). With db=True the
    assignments are also registered in the gradebook (the config's, or
    db_url's), which autograding needs."""
    args = ["generate_assignment", "*", "--force"]
    if release_dir is not None:
        args.append(f"--CourseDirectory.release_directory={Path(release_dir).resolve()}")
    if db_url is not None:
        args.append(f"--CourseDirectory.db_url={db_url}")
    if not db:
        args.append("--no-db")
    nbgrader_cli(*args)
    return Path(release_dir) if release_dir is not None else RELEASE_DIR


def release_diff(release_dir: Path = RELEASE_DIR) -> list[str]:
    """Files that differ between `release_dir` and a fresh generation."""
    with tempfile.TemporaryDirectory(prefix="tinylm-release-") as tmp:
        fresh = generate(Path(tmp) / "release", db=False)
        # A generation that silently skipped an assignment must not look "in sync".
        missing = [f"nbgrader generated no notebook for {a}" for a in assignments()
                   if not release_notebook(a, fresh).is_file()]
        return missing + _tree_diff(fresh, Path(release_dir))


def _tree_diff(a: Path, b: Path) -> list[str]:
    files_a = {p.relative_to(a) for p in a.rglob("*") if p.is_file()}
    files_b = {p.relative_to(b) for p in b.rglob("*") if p.is_file() and ".ipynb_checkpoints" not in p.parts}
    files_b -= RELEASE_COURSE_FILES
    problems = [f"missing in {b.name}/: {p}" for p in sorted(files_a - files_b)]
    problems += [f"not produced by nbgrader: {b.name}/{p}" for p in sorted(files_b - files_a)]
    problems += [f"differs from a fresh generation: {b.name}/{p}" for p in sorted(files_a & files_b)
                 if not filecmp.cmp(a / p, b / p, shallow=False)]
    return problems
