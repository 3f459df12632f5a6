"""`python -m autograder check NOTEBOOK`: the learner's self-check.

Runs the notebook top to bottom in a fresh kernel (from its own folder, as
Jupyter would), then prints one row per graded exercise: points, PASS or
FAIL, the first line of the check's message and its diagnosis, read from
the fields of the failure (the kernel's checks write them to a file named
by TINYLM_DIAGNOSIS_LOG, one JSON object a line), not from its text. Only the visible checks exist in a learner's
notebook, so a PASS here is necessary, not sufficient, for full marks.
Exit status 0 when every exercise passes, 1 otherwise, 2 when the notebook
cannot be run at all.
"""
from __future__ import annotations

import json
import os
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from . import diagnosis_text
from .notebook_format import is_check, nbg, read

MESSAGE_WIDTH = 100


@dataclass
class Row:
    exercise: str
    points: float
    passed: bool
    message: str
    diagnosis: dict | None = None   # the failure's fields (diagnosis_record.Diagnosis.to_dict), when the kernel logged them
    lines: list[str] = field(default_factory=list)


def _message(cell) -> str:
    for out in cell.get("outputs", []):
        if out.get("output_type") == "error":
            return f"{out.get('ename')}: {out.get('evalue', '')}".strip()
    return ""


def kernel_transport_config(socket_dir: Path):
    """Kernel-manager config that keeps the kernel off TCP.

    Over TCP (jupyter_client's default) ipykernel warns on every start that
    the connection is not encrypted, and any local user who learns the ports
    and key can connect. With the ipc transport the kernel listens on Unix
    sockets in socket_dir (which only this user can enter), so there is
    nothing to warn about. Where libzmq has no ipc (older Windows builds), the
    manager gives the kernel CurveZMQ keys instead, which also ends the
    warning; with neither, the default stays.
    """
    import zmq
    from jupyter_client import KernelManager
    from traitlets.config import Config

    if zmq.has("ipc"):
        # sockets socket_dir/kernel-1 ... kernel-5; short, under the 104-byte limit of a socket path
        return Config({"KernelManager": {"transport": "ipc", "ip": str(Path(socket_dir) / "kernel")}})
    if zmq.has("curve") and "transport_encryption" in KernelManager.class_trait_names():
        return Config({"KernelManager": {"transport_encryption": "auto"}})
    return Config()


@contextmanager
def private_kernel_config():
    """kernel_transport_config for a folder of its own (short, under /tmp,
    only this user's), removed afterwards: how the course starts a kernel
    outside the grader (this command, the notebook build, the tests and
    benchmarks that execute notebooks). Also safer than TCP on a shared
    machine: a port picked free can be taken before the kernel binds it."""
    with tempfile.TemporaryDirectory(prefix="tinylm-kernel-") as socket_dir:
        yield kernel_transport_config(Path(socket_dir))


def _logged(path: Path) -> dict[str, dict]:
    """{failure message: its fields} from the kernel's diagnosis log."""
    found = {}
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return found
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and isinstance(entry.get("message"), str) and isinstance(entry.get("diagnosis"), dict):
            found[entry["message"]] = entry["diagnosis"]
    return found


def diagnosis_lines(d: dict) -> list[str]:
    """The lines a row shows under its message, from the failure's fields:
    the notebook's own lines (diagnosis_text), the learner's line quoted."""
    return [str(line) for line in diagnosis_text.lines(d)]


def run(path: Path, timeout: int = 300) -> list[Row]:
    from nbclient import NotebookClient

    from .checks.core import DIAGNOSIS_LOG_ENV

    nb = read(path)
    env_before = os.environ.pop("NBGRADER_EXECUTION", None)  # the learner's view: full-size cells
    log_before = os.environ.get(DIAGNOSIS_LOG_ENV)
    with tempfile.TemporaryDirectory(prefix="tinylm-kernel-") as socket_dir:
        log = Path(socket_dir) / "diagnoses.jsonl"
        os.environ[DIAGNOSIS_LOG_ENV] = str(log)  # the kernel inherits it: its checks write their fields there
        try:
            NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=True,
                           config=kernel_transport_config(Path(socket_dir)),
                           resources={"metadata": {"path": str(Path(path).resolve().parent)}}).execute()
        finally:
            if env_before is not None:
                os.environ["NBGRADER_EXECUTION"] = env_before
            if log_before is None:
                os.environ.pop(DIAGNOSIS_LOG_ENV, None)
            else:
                os.environ[DIAGNOSIS_LOG_ENV] = log_before
        logged = _logged(log)
    rows = []
    for cell in nb.cells:
        if is_check(cell):
            msg = _message(cell)
            fields = logged.get(_evalue(cell)) if msg else None
            rows.append(Row(nbg(cell).get("grade_id", "?"), float(nbg(cell).get("points", 0)), not msg, msg, fields,
                            diagnosis_lines(fields) if fields else []))
    return rows


def _evalue(cell) -> str:
    for out in cell.get("outputs", []):
        if out.get("output_type") == "error":
            return str(out.get("evalue", ""))
    return ""


def format_rows(rows: list[Row]) -> str:
    width = max([len("exercise"), *(len(r.exercise) for r in rows)])
    lines = [f"{'exercise':<{width}}  points  result  message"]
    for r in rows:
        first, *rest = r.message.splitlines() or [""]
        msg = first if len(first) <= MESSAGE_WIDTH else first[:MESSAGE_WIDTH - 3] + "..."
        lines.append(f"{r.exercise:<{width}}  {r.points:>6g}  {'PASS' if r.passed else 'FAIL':<6}  {msg}")
        # the diagnosis is what a learner needs most: never cut it off (from the fields when the kernel logged them)
        shown = r.lines if r.diagnosis is not None else [l.strip() for l in rest if "Likely bug" in l]
        lines += [f"{'':<{width}}  {'':>6}  {'':<6}  {l}" for l in shown]
    got = sum(r.points for r in rows if r.passed)
    lines.append(f"visible checks: {got:g} / {sum(r.points for r in rows):g} points "
                 "(hidden tests run only when the instructor grades)")
    return "\n".join(lines)


def main(path: str, timeout: int = 300) -> int:
    p = Path(path)
    if not p.is_file():
        print(f"{p}: no such notebook")
        return 2
    try:
        rows = run(p, timeout)
    except Exception as err:  # noqa: BLE001: corrupt file, missing kernel...
        print(f"{p}: could not run the notebook: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}")
        return 2
    if not rows:
        print(f"{p}: no graded exercises found (is this a course notebook?)")
        return 2
    print(format_rows(rows))
    return 0 if all(r.passed for r in rows) else 1
