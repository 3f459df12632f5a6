"""Running an attack script as a job would: in a jail of the grader's limits,
or (jailed=False) as a plain process, the control that shows the attack
works where nothing stops it. The script reports one line, MARKER {json}."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from autograder import course
from autograder.grading.sandbox.jail import Jail, Limits


def run_reporting(tmp_path: Path, name: str, source: str, args: list, jailed: bool, marker: str) -> dict:
    script = tmp_path / name
    script.write_text(source)
    command = [sys.executable, "-I", name, *map(str, args)]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    if not jailed:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    else:
        with Jail.reserve(Limits(memory_mb=1024, cpu_s=60), copy=[script]) as jail:
            env.update(PYTHONPATH=str(course.ROOT), **jail.env())
            done = subprocess.run([sys.executable, "-m", "autograder.grading.sandbox.jail", "--", *command], env=env,
                                  capture_output=True, text=True, timeout=60, cwd="/")
    assert done.returncode == 0, done.stderr
    line = next((l for l in done.stdout.splitlines() if l.startswith(f"{marker} ")), None)
    assert line is not None, done.stdout + done.stderr
    return json.loads(line[len(marker) + 1:])
