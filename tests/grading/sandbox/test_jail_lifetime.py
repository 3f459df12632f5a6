"""A job's processes end with whoever started them, at once and whatever
the machine's load: the kernel sends the signal (PR_SET_PDEATHSIG), no
process of the grader has to be scheduled to send it.

* the jail's first process (`python -m autograder.grading.sandbox.jail`)
  dies with the process that started it (a SIGKILLed nbgrader, a recheck
  parent, a grading worker), and with it init and the whole namespace; one
  whose starter died before its first line, and which another process
  adopted, stops before its command;
* nbgrader, which a killed grading worker cannot stop itself, is started
  through sandbox.kernel.dying_with_this_thread: it dies with the thread
  that started it, and only then (a thread that lives on keeps it).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from autograder import course
from autograder.grading.sandbox.jail import Jail, Limits, processes_of_uid
from autograder.grading.sandbox.jail_init import ENV_VAR, STARTER_ENV
from autograder.grading.sandbox.kernel import JAIL_MODULE, dying_with_this_thread
from ..batches import all_stop, process_tree, start_time, still_runs

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="the root jail's namespaces and uid switch need root")

# Starts its arguments as a child (naming itself the child's starter, as the
# grader's processes do), says the child's pid, and waits to be killed.
STARTER = (f"import os, subprocess, sys, time; os.environ['{STARTER_ENV}'] = str(os.getpid()); "
           "print(subprocess.Popen(sys.argv[1:]).pid, flush=True); time.sleep(600)")


@root_only
def test_a_jailed_job_dies_with_the_process_that_started_it():
    with Jail.reserve(Limits(memory_mb=1024, cpu_s=60)) as jail:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(course.ROOT), **jail.env()}
        starter = subprocess.Popen([sys.executable, "-c", STARTER, sys.executable, "-m", JAIL_MODULE, "--",
                                    "/bin/sleep", "600"],
                                   env=env, stdout=subprocess.PIPE, text=True, cwd="/")
        try:
            first = int(starter.stdout.readline())
            deadline = time.monotonic() + 30
            while len(processes_of_uid(jail.uid)) < 2 and time.monotonic() < deadline:  # init and sleep
                time.sleep(0.05)
            job = {first: start_time(first), **process_tree(first)}
            assert len(processes_of_uid(jail.uid)) == 2 and set(processes_of_uid(jail.uid)) < set(job), job
            assert all(still_runs(p, t) for p, t in job.items())
            starter.kill()
            starter.wait()
            assert all_stop(job, within_s=2), "the job outlived the process that started it"
        finally:
            starter.kill()
            starter.wait()
            starter.stdout.close()


def test_a_jail_adopted_before_its_first_line_stops_before_its_command(tmp_path):
    """A starter killed in the instant between the jail's start and its first
    line leaves the jail adopted (by init, or by a subreaper such as a grading
    worker's child, as a cluster test once saw): tying its life to its parent
    then would tie it to the adopter. The pid its starter named is not its
    parent's, so it stops, and the command never runs."""
    ran = tmp_path / "ran"
    other = subprocess.Popen(["/bin/sleep", "600"])  # alive, and not the jail's parent
    try:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(course.ROOT), ENV_VAR: "{}",
               STARTER_ENV: str(other.pid)}
        done = subprocess.run([sys.executable, "-m", JAIL_MODULE, "--", "/bin/touch", str(ran)], env=env,
                              capture_output=True, timeout=60, cwd="/")
    finally:
        other.kill()
        other.wait()
    assert done.returncode == 128 + signal.SIGKILL, done.stderr.decode(errors="replace")[-800:]
    assert not ran.exists(), "the command ran in a jail whose starter was gone"


def test_a_process_started_to_die_with_its_thread_does_and_only_then():
    started = {}

    def start_and_leave(name: str, hold_s: float) -> None:
        started[name] = subprocess.Popen(dying_with_this_thread(["/bin/sleep", "600"]))
        time.sleep(hold_s)
    kept = subprocess.Popen(dying_with_this_thread(["/bin/sleep", "600"]))  # this thread lives on
    thread = threading.Thread(target=start_and_leave, args=("left", 0.3))
    thread.start()
    thread.join()
    try:
        assert started["left"].wait(timeout=2) == -signal.SIGKILL
        time.sleep(0.3)
        assert kept.poll() is None, "killed although the thread that started it still runs"
        assert open(f"/proc/{kept.pid}/cmdline", "rb").read().split(b"\0")[:2] == [b"/bin/sleep", b"600"]
    finally:
        kept.kill()
        kept.wait()
