"""Where the learner's saved answers (the package `mylm/`) live and what its
manifest says. The checks write it (autograder/checks/answers.py); the doctor
reads it to say which notebooks' answers are saved."""
from __future__ import annotations

import json
import os
from pathlib import Path

from . import course

MANIFEST = "manifest.json"
ENV = "TINYLM_MYLM"


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


def passed_by_notebook(folder: Path) -> dict[str, list[str]]:
    """{"04_rope": [names]} for each notebook with at least one passing answer saved."""
    by_notebook: dict[str, list[str]] = {}
    for name, module in passing(folder).items():
        by_notebook.setdefault(module.removeprefix("nb"), []).append(name)
    return {nb: sorted(names) for nb, names in sorted(by_notebook.items())}
