"""Where the learner's saved answers (the package `mylm/`) live and what its
manifest says. The checks write it (autograder/checks/answers.py); the doctor
reads it to say which notebooks' answers are saved; the loader
(autograder/checks/learner_model.py) uses a saved module only while its file
is the one the checks verified (its hash in the manifest)."""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from . import course

MANIFEST = "manifest.json"
ENV = "TINYLM_MYLM"

# The first notebook that loads each saved answer back, and the loader that
# does (learner_model, learner_cache, learner_function in
# autograder/checks/learner_model.py; pretrained_learner_model builds a
# grouped-query model, the only kind that uses repeat_kv). A name not here is
# saved but no later notebook runs it. tests/course/test_mylm_course.py checks each
# entry against the notebook sources.
USED_FROM = {
    "embed": ("05", "learner_model("), "tied_logits": ("05", "learner_model("),
    "rms_norm": ("05", "learner_model("), "causal_attention": ("05", "learner_model("),
    "rope_cache": ("05", "learner_model("), "apply_rope": ("05", "learner_model("),
    "swiglu": ("05", "learner_model("), "Transformer": ("05", "learner_model("),
    "cache_update": ("06", "learner_cache("),
    "repeat_kv": ("08", "pretrained_learner_model("),
    "generate": ("09", 'learner_function("generate"'),
}


def used_from(name: str) -> str | None:
    """'05' for the first notebook that loads the saved `name`, None when none does."""
    return USED_FROM[name][0] if name in USED_FROM else None


def source_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def default_dir() -> Path:
    """mylm/ as the notebooks of this checkout write it: $TINYLM_MYLM, else notebooks/mylm/."""
    override = os.environ.get(ENV)
    return Path(override).expanduser() if override else course.RELEASE_DIR / "mylm"


def load_manifest(folder: Path) -> dict:
    """{notebook module: {"cells": [...], "passed": [names]}}; {} when there is none yet (or it is unreadable)."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError):
        return {}
    return manifest if isinstance(manifest, dict) else {}


def passing(folder: Path) -> dict[str, str]:
    """{name: notebook module} of every saved name whose check passed."""
    return {name: nb for nb, entry in sorted(load_manifest(folder).items()) for name in entry.get("passed", [])}


def failing_since(folder: Path) -> set[str]:
    """Saved names whose latest check run failed (the saved copy is the last passing one)."""
    return {name for entry in load_manifest(folder).values() for name in entry.get("failing", [])}


def edited(folder: Path) -> list[str]:
    """The saved notebook modules ('nb02_rmsnorm') whose file differs from the
    one their checks verified: edited by hand (or by anything else) since."""
    changed = []
    for module, entry in sorted(load_manifest(folder).items()):
        try:
            text = (folder / f"{module}.py").read_text()
        except OSError:
            continue  # a missing file: the loader has nothing to load, nothing to flag
        if entry.get("sha256") and entry["sha256"] != source_hash(text):
            changed.append(module)
    return changed


def passed_by_notebook(folder: Path) -> dict[str, list[str]]:
    """{"04_rope": [names]} for each notebook with at least one passing answer saved."""
    by_notebook: dict[str, list[str]] = {}
    for name, module in passing(folder).items():
        by_notebook.setdefault(module.removeprefix("nb"), []).append(name)
    return {nb: sorted(names) for nb, names in sorted(by_notebook.items())}
