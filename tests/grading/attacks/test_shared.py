"""What jobs graded at the same time share, tried as a hostile class would.

Every jail shows an allow-list (the system folders, the interpreter, the venv
and the course's packages read-only, its own folder; nothing else), so the
files two jobs both see are read-only files that every job opens. A lock, a
lease or a watch lives on a file's inode, not in a namespace: a kernel that
held byte-range locks on tinylm/__init__.py spelled the hidden tests it had
just run, and a job of another uid read them with F_GETLK; inotify on the
same file is the same kind of channel. The seccomp filter refuses both.

* jail level (seconds): two jobs at once, one holding locks in a pattern and
  watching the file, the other reading the file and querying the locks;
  with the control, the same two probes outside any jail, where the
  pattern crosses and the watch fires (so the test can fail); and what a job
  sees of the machine: absent, not merely covered;
* one grader batch (workers=2, so two notebooks run at the same time): a 03
  whose answer cell holds locks and watches while a 05 polls for them, as
  a student could with their own two notebooks; both keep their
  honest points, nothing crosses, and the two polls overlapped in time;
* the Dask engine: a job that looks for the client's course data folder
  (other students' submitted and autograded notebooks) finds nothing
  (tests/grading/engines/test_cluster.py, with a PostgreSQL gradebook).
"""
from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from autograder import course, specimens
from autograder.grading.sandbox.jail import Jail, Limits
from ..batches import shared_batch

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="the root jail's namespaces and uid switch need root")
TOKEN = secrets.token_hex(4)
SHARED = course.ROOT / "tinylm" / "__init__.py"   # every job imports it
SECRET = "seq=7"  # what a holder spells in locks: a hidden test's shape, say
BITS = [int(b) for ch in SECRET.encode() for b in f"{ch:08b}"]

# Holds a read lock on byte i of the file for every 1-bit of SECRET (POSIX
# and open-file-description locks, and flock), watches the file, says
# HOLDING, waits for a line on stdin (the reader is done), then counts the
# watch's events. Prints JSON.
HOLDER = """
import ctypes, fcntl, json, os, select, struct, sys, time
path, bits = sys.argv[1], {bits!r}
libc = ctypes.CDLL(None, use_errno=True)
facts = {{"locks": [], "started": time.time()}}
fh = open(path, "rb")
ofd = open(path, "rb")
def outcome(call):
    try:
        call()
        return "held"
    except OSError as err:
        return os.strerror(err.errno)
for i, bit in enumerate(bits):
    if bit:
        facts["locks"].append(outcome(lambda: fcntl.fcntl(fh, fcntl.F_SETLK, struct.pack("hhqqi", fcntl.F_RDLCK, 0, i, 1, 0))))
facts["ofd"] = outcome(lambda: fcntl.fcntl(ofd, fcntl.F_OFD_SETLK, struct.pack("hhqqi", fcntl.F_RDLCK, 0, 1000, 1, 0)))
facts["flock"] = outcome(lambda: fcntl.flock(ofd, fcntl.LOCK_SH | fcntl.LOCK_NB))
watch = libc.inotify_init1(os.O_NONBLOCK)
facts["inotify"] = "watching" if watch >= 0 and libc.inotify_add_watch(watch, path.encode(), 0x1 | 0x20) >= 0 \\
    else os.strerror(ctypes.get_errno())
print("HOLDING", flush=True)
sys.stdin.readline()
events = 0
if watch >= 0:
    while select.select([watch], [], [], 0.5)[0]:
        data = os.read(watch, 4096)
        events += len(data) // 16  # each event is 16 bytes here: no name for a watched file
facts["events"] = events
facts["ended"] = time.time()
print("HELD", json.dumps(facts), flush=True)
"""

# Opens and reads the file (what a watch would see), asks for each byte
# whether a lock conflicts with a write lock there, tries the flock and an
# OFD query; decodes what it found. Prints JSON.
READER = """
import fcntl, json, os, struct, sys, time
path, n = sys.argv[1], {n}
facts = {{"started": time.time(), "seen": [], "errors": set()}}
with open(path, "rb") as fh:
    fh.read()
    for i in range(n):
        try:
            answer = fcntl.fcntl(fh, fcntl.F_GETLK, struct.pack("hhqqi", fcntl.F_WRLCK, 0, i, 1, 0))
            facts["seen"].append(int(struct.unpack("hhqqi", answer)[0] != fcntl.F_UNLCK))
        except OSError as err:
            facts["errors"].add(os.strerror(err.errno))
            facts["seen"].append(0)
    try:
        answer = fcntl.fcntl(fh, fcntl.F_OFD_GETLK, struct.pack("hhqqi", fcntl.F_WRLCK, 0, 1000, 1, 0))
        facts["ofd_seen"] = struct.unpack("hhqqi", answer)[0] != fcntl.F_UNLCK
    except OSError as err:
        facts["ofd_seen"] = os.strerror(err.errno)
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        facts["flock_seen"] = False
    except OSError as err:
        facts["flock_seen"] = os.strerror(err.errno)
bits = facts["seen"]
facts["decoded"] = bytes(int("".join(map(str, bits[i:i + 8])), 2) for i in range(0, len(bits) - 7, 8)).decode(
    errors="replace")
facts["errors"] = sorted(facts["errors"])
facts["ended"] = time.time()
print("READ", json.dumps(facts), flush=True)
"""


def _line(out: str, tag: str) -> dict:
    line = next((l for l in out.splitlines() if l.startswith(tag + " ")), None)
    assert line is not None, f"the probe printed no {tag} line:\n{out}"
    return json.loads(line[len(tag) + 1:])


def _two_jobs_at_once(holder_cmd, reader_cmd, env_of) -> tuple[dict, dict]:
    """Start the holder, wait until it holds, run the reader to its end,
    then let the holder count its watch's events."""
    holder = subprocess.Popen(holder_cmd, env=env_of("holder"), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, cwd="/")
    try:
        first = holder.stdout.readline()
        assert first.strip() == "HOLDING", f"the holder did not start: {first}{holder.stderr.read()}"
        reader = subprocess.run(reader_cmd, env=env_of("reader"), capture_output=True, text=True, timeout=120,
                                cwd="/")
        assert reader.returncode == 0, reader.stderr
        out, err = holder.communicate("done\n", timeout=60)
    finally:
        holder.kill()
        holder.wait()
    assert holder.returncode == 0, err
    return _line(out, "HELD"), _line(reader.stdout, "READ")


def test_the_control_the_probes_pass_the_secret_outside_a_jail(tmp_path):
    """Two plain processes on one file: the lock pattern spells SECRET for
    the reader and the watch sees the reader's open and read. This is the
    channel; without the jail's filter it is open."""
    shared = tmp_path / "shared.py"
    shared.write_text("x = 1\n" * 200)
    holder_code, reader_code = tmp_path / "holder.py", tmp_path / "reader.py"
    holder_code.write_text(HOLDER.format(bits=BITS))
    reader_code.write_text(READER.format(n=len(BITS)))
    # flock and POSIX locks of one process do not conflict with its own: the reader is another process
    held, read = _two_jobs_at_once([sys.executable, str(holder_code), str(shared)],
                                   [sys.executable, str(reader_code), str(shared)], lambda _: dict(os.environ))
    assert set(held["locks"]) == {"held"} and held["inotify"] == "watching", held
    assert read["decoded"] == SECRET, read
    assert read["ofd_seen"] is True and read["flock_seen"] == "Resource temporarily unavailable", read
    assert held["events"] >= 2, f"the watch saw no open or read: {held}"


@root_only
def test_two_jailed_jobs_at_once_cannot_pass_the_secret_by_locks_or_watches(tmp_path):
    """The same two probes in two jails at once, on a file every job shares
    (tinylm/__init__.py): every lock, lease and watch is refused in the
    holder, every query in the reader, and nothing crosses."""
    holder_code, reader_code = tmp_path / "holder.py", tmp_path / "reader.py"
    holder_code.write_text(HOLDER.format(bits=BITS))
    reader_code.write_text(READER.format(n=len(BITS)))
    limits = Limits(memory_mb=1024, cpu_s=60)
    with Jail.reserve(limits, copy=[holder_code]) as holder_jail, Jail.reserve(limits, copy=[reader_code]) as reader_jail:
        jails = {"holder": holder_jail, "reader": reader_jail}

        def env_of(role):
            return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(course.ROOT),
                    **jails[role].env()}
        jailed = [sys.executable, "-m", "autograder.grading.sandbox.jail", "--", sys.executable, "-I"]
        held, read = _two_jobs_at_once([*jailed, "holder.py", str(SHARED)], [*jailed, "reader.py", str(SHARED)],
                                       env_of)
    assert held["locks"] and set(held["locks"]) == {"No locks available"}, held
    assert (held["ofd"], held["flock"], held["inotify"]) == ("No locks available", "No locks available",
                                                             "Operation not permitted"), held
    assert read["errors"] == ["No locks available"] and not any(read["seen"]), read
    assert read["ofd_seen"] == "No locks available" and read["flock_seen"] == "No locks available", read
    assert SECRET not in read["decoded"] and held["events"] == 0


# What a job finds of the machine: each path, and the top of its root.
LOOKER = """
import json, os, sys
found = {p: os.path.exists(p) for p in sys.argv[1:]}
found["/"] = sorted(os.listdir("/"))
print("FOUND", json.dumps(found))
"""


@root_only
def test_a_job_finds_nothing_of_the_machine_but_its_allow_list(tmp_path):
    """Files in the checkout beside the course's packages, another
    'client's' course data folder (the Dask attack: other students'
    submitted and autograded notebooks), host folders: absent, not covered.
    The course's packages and the interpreter are there (the control)."""
    from autograder.grading import gradebook
    from autograder.grading.sandbox.kernel import hidden_paths
    client_data = Path(tempfile.mkdtemp(prefix=f"tl-client-{TOKEN}-", dir="/var/tmp"))
    other = client_data / "submitted" / "someone" / "01_embeddings"
    other.mkdir(parents=True)
    (other / "01_embeddings.ipynb").write_text("{}")
    beside = course.ROOT / f".tl-beside-{TOKEN}.txt"
    beside.write_text("in the checkout, outside the course's packages")
    looked = [str(other / "01_embeddings.ipynb"), str(client_data), str(beside), str(course.ROOT / "solutions"),
              str(course.ROOT / "pyproject.toml"), str(gradebook.data_dir()), "/srv", "/home", "/opt", "/var/lib",
              str(SHARED), os.path.realpath(sys.base_prefix), str(course.ROOT / "autograder" / "checks")]
    probe = tmp_path / "looker.py"
    probe.write_text(LOOKER)
    try:
        with Jail.reserve(Limits(memory_mb=1024, cpu_s=60), copy=[probe], hide=hidden_paths(gradebook.db_url())) as jail:
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(course.ROOT), **jail.env()}
            done = subprocess.run([sys.executable, "-m", "autograder.grading.sandbox.jail", "--", sys.executable, "-I",
                                   "looker.py", *looked], env=env, capture_output=True, text=True, timeout=60, cwd="/")
    finally:
        beside.unlink()
        for path in sorted(client_data.rglob("*"), reverse=True):
            path.rmdir() if path.is_dir() else path.unlink()
        client_data.rmdir()
    assert done.returncode == 0 and "[jail]" not in done.stderr, done.stderr
    found = _line(done.stdout, "FOUND")
    shown = {p for p in looked if found[p]}
    assert shown == {str(SHARED), os.path.realpath(sys.base_prefix), str(course.ROOT / "autograder" / "checks")}, found
    from autograder.grading.sandbox.jail import job_view
    tops = {"etc", "dev", "proc", "sys", "tmp", "var", "run"}
    shown = job_view()
    assert set(found["/"]) <= tops | {Path(p).parts[1] for p in shown.shown} | {Path(p).parts[1] for p, _ in
                                                                                shown.links}, found


# ---------------------------------------------------------------------------
# one grader batch: a 03 and a 05 of the same student, graded side by side

HOLDER_03, READER_05 = "03_causal_attention", "05_swiglu"
POLL_S = 20  # each side keeps trying this long, so that the two overlap

# In the first answer cell, before the honest answer: hold locks spelling
# SECRET on the shared file and watch it, for POLL_S seconds.
HOLD_IN_CELL = """
import ctypes as _c, fcntl as _f, json as _j, os as _o, select as _s, struct as _st, time as _t
def _hold(path={path!r}, bits={bits!r}, poll_s={poll_s}):
    libc = _c.CDLL(None, use_errno=True)
    fh, facts = open(path, "rb"), {{"started": _t.time(), "locks": [], "events": 0}}
    for i, bit in enumerate(bits):
        if bit:
            try:
                _f.fcntl(fh, _f.F_SETLK, _st.pack("hhqqi", _f.F_RDLCK, 0, i, 1, 0))
                facts["locks"].append("held")
            except OSError as err:
                facts["locks"].append(_o.strerror(err.errno))
    watch = libc.inotify_init1(_o.O_NONBLOCK)
    facts["inotify"] = "watching" if watch >= 0 and libc.inotify_add_watch(watch, path.encode(), 0x21) >= 0 \\
        else _o.strerror(_c.get_errno())
    end = _t.time() + poll_s
    while _t.time() < end:
        if watch >= 0 and _s.select([watch], [], [], 0.2)[0]:
            facts["events"] += len(_o.read(watch, 4096)) // 16
        else:
            _t.sleep(0.2)
    facts["ended"] = _t.time()
    fh.close()
    print("HELD", _j.dumps(facts))
_hold()
"""

# In the 05's first answer cell: poll the shared file's locks for POLL_S
# seconds and decode whatever pattern shows.
READ_IN_CELL = """
import fcntl as _f, json as _j, os as _o, struct as _st, time as _t
def _listen(path={path!r}, n={n}, poll_s={poll_s}):
    facts, end = {{"started": _t.time(), "errors": [], "decoded": ""}}, _t.time() + poll_s
    while _t.time() < end and not facts["decoded"]:
        seen = []
        with open(path, "rb") as fh:
            for i in range(n):
                try:
                    answer = _f.fcntl(fh, _f.F_GETLK, _st.pack("hhqqi", _f.F_WRLCK, 0, i, 1, 0))
                    seen.append(int(_st.unpack("hhqqi", answer)[0] != _f.F_UNLCK))
                except OSError as err:
                    facts["errors"] = sorted({{*facts["errors"], _o.strerror(err.errno)}})
                    seen.append(0)
        if any(seen):
            facts["decoded"] = bytes(int("".join(map(str, seen[i:i + 8])), 2) for i in range(0, n, 8)).decode(
                errors="replace")
        _t.sleep(0.2)
    facts["ended"] = _t.time()
    print("READ", _j.dumps(facts))
_listen()
"""


def _with_first(assignment: str, code: str):
    answers = specimens.solution_answers(assignment)
    first = next(iter(answers))
    answers[first] = code + "\n" + answers[first]
    return specimens.notebook(assignment, answers)


def _outputs(data: Path, student: str, assignment: str) -> str:
    import nbformat
    path = data / "autograded" / student / assignment / f"{assignment}.ipynb"
    nb = nbformat.read(str(path), as_version=4) if path.is_file() else nbformat.v4.new_notebook()
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)


def _grade_side_by_side(data: Path) -> dict:
    from autograder.grading.batch import Options, grade_all
    from autograder.grading.publish.feedback import write_feedback
    specimens.submit(data, "pair", HOLDER_03, _with_first(HOLDER_03, HOLD_IN_CELL.format(
        path=str(SHARED), bits=BITS, poll_s=POLL_S)))
    specimens.submit(data, "pair", READER_05, _with_first(READER_05, READ_IN_CELL.format(
        path=str(SHARED), n=len(BITS), poll_s=POLL_S)))
    opts = Options(assignments=[HOLDER_03, READER_05], workers=2, cell_timeout=120, progress=False,
                   limits=Limits(memory_mb=3072, wall_s=400, cpu_s=400))
    results = grade_all(opts)
    pages = {r["assignment"]: p.read_text() for r, p in zip(results, write_feedback(results))}
    return {"results": {r["assignment"]: r for r in results}, "pages": pages,
            "held": _outputs(data, "pair", HOLDER_03), "read": _outputs(data, "pair", READER_05)}


@pytest.fixture(scope="module")
def side_by_side(tmp_path_factory):
    missing = [a for a in (HOLDER_03, READER_05) if a not in course.assignments()]
    if missing:
        pytest.skip(f"notebooks {missing} are not built")
    return shared_batch(tmp_path_factory, "grader_attacks_shared", _grade_side_by_side)


def batch_test(fn):
    for mark in (pytest.mark.grader, pytest.mark.slow, root_only):
        fn = mark(fn)
    return fn


@batch_test
def test_side_by_side_both_keep_their_honest_points(side_by_side):
    for assignment, r in side_by_side["results"].items():
        assert (r["status"], r["score"], r["flags"]) == ("graded", r["max_score"], []), r


@batch_test
def test_side_by_side_no_lock_or_watch_crosses_between_the_notebooks(side_by_side):
    held, read = _line(side_by_side["held"], "HELD"), _line(side_by_side["read"], "READ")
    assert held["locks"] and set(held["locks"]) == {"No locks available"}, held
    assert held["inotify"] == "Operation not permitted" and held["events"] == 0, held
    assert read["errors"] == ["No locks available"] and read["decoded"] == "", read
    # the two polls ran at the same time: the refusals, not the timing, kept them apart
    assert read["started"] < held["ended"] and held["started"] < read["ended"], (held, read)
    assert not any(SECRET in page for page in side_by_side["pages"].values())
