"""What a jailed process of the grader gets: the command that jails it, the
sandbox kernel's spec, the paths hidden from it, its environment. Shared by
grade (the notebook kernel) and recheck (the learner's child process)."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

from ... import course
from .. import gradebook
from .jail import JAIL_BASE, Jail, Limits
from .jail_init import STARTER_ENV

KERNEL_NAME = "tinylm-sandbox"
# `python -m JAIL_MODULE -- COMMAND` runs COMMAND jailed (jail_init.main), with the settings of Jail.env().
JAIL_MODULE = "autograder.grading.sandbox.jail"
# Run in the kernel before any notebook cell: the working folder leaves
# sys.path (a shipped torch.py cannot shadow torch), and warnings go to
# stdout so they cannot turn a correct answer into a failed cell.
KERNEL_STARTUP = ("import sys, os, warnings; "
                  "sys.path[:] = [p for p in sys.path if p not in ('', '.', os.getcwd())]; "
                  "warnings.showwarning = lambda m, c, f, l, file=None, line=None: print(f'{c.__name__}: {m}')")

# The kernel's command history stays in memory: its SQLite file needs file
# locks, which the jail's seccomp filter refuses (syscall_filter.py), and a
# graded run has no use for a history that outlives it.
KERNEL_ARGS = ("--HistoryManager.hist_file=:memory:",)


# `python -I -S -c DIES_WITH_STARTER STARTER_PID COMMAND...`: exec COMMAND in a
# process the kernel SIGKILLs when the thread that started it ends (see
# jail_init.die_with_starter), or not at all if that thread is already gone;
# the jails COMMAND starts know it as their starter (as_jail_starter).
DIES_WITH_STARTER = ("import ctypes, os, signal, sys; ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0); "
                     "os.getppid() == int(sys.argv[1]) or os._exit(128 + signal.SIGKILL); "
                     f"os.environ['{STARTER_ENV}'] = str(os.getpid()); os.execv(sys.argv[2], sys.argv[2:])")


def dying_with_this_thread(command: list[str]) -> list[str]:
    """The command line that runs `command` (a path first) as a process that
    dies with the calling thread: nbgrader, which a grader that is killed
    cannot stop itself, and whose death ends the job's jail in turn."""
    return [sys.executable, "-I", "-S", "-c", DIES_WITH_STARTER, str(os.getpid()), *command]


def as_jail_starter(env: dict) -> dict:
    """`env` for a jail this process starts: the jail learns this process's
    pid, and so knows whether it was adopted before it could tie its life
    to its starter's (jail_init.STARTER_ENV)."""
    return {**env, STARTER_ENV: str(os.getpid())}


def jailed(command: list[str]) -> list[str]:
    """The command line that runs `command` in the jail its environment names."""
    return [sys.executable, "-m", JAIL_MODULE, "--", *command]


def kernelspec_dir() -> Path:
    """A JUPYTER_PATH folder holding the sandbox kernel's spec. One per
    interpreter and checkout: graders of two checkouts on one machine would
    otherwise start each other's interpreter and code; written atomically,
    since graders of the same checkout read it while another writes it."""
    argv = jailed([sys.executable, "-I", "-m", "ipykernel_launcher", "-f", "{connection_file}",
                   f"--IPKernelApp.exec_lines={KERNEL_STARTUP}", *KERNEL_ARGS])
    text = json.dumps({"argv": argv, "display_name": "tinylm sandbox", "language": "python"})
    root = JAIL_BASE / f"jupyter-{hashlib.sha256(text.encode()).hexdigest()[:16]}"
    spec = root / "kernels" / KERNEL_NAME
    if not (spec / "kernel.json").is_file():
        spec.mkdir(parents=True, exist_ok=True)
        tmp = spec / f"kernel.json.{os.getpid()}.tmp"
        tmp.write_text(text)
        os.replace(tmp, spec / "kernel.json")
    return root


@contextmanager
def started_kernel(jail: Jail, env: dict):
    """The sandbox kernel started in `jail` as nbgrader starts it (jupyter_client's
    KernelManager over the sandbox kernelspec), with `env` under the jail's own
    settings; yields (manager, ready client) and ends both."""
    from jupyter_client import KernelManager
    env = {**env, **jail.env(), "JUPYTER_PATH": str(kernelspec_dir()), "JUPYTER_RUNTIME_DIR": str(jail.rundir)}
    os.environ["JUPYTER_PATH"] = env["JUPYTER_PATH"]  # where the manager finds the kernelspec
    km = KernelManager(kernel_name=KERNEL_NAME, transport="ipc", ip=str(jail.rundir / "kernel"))
    km.start_kernel(env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = km.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=120)
        yield km, client
    finally:
        client.stop_channels()
        # Its zmq context, closed here: left to the garbage collector, it can be
        # closed from the next client's event-loop thread, whose term() then
        # waits on that loop's own sockets forever (a test suite hung there).
        client.context.destroy(linger=0)
        if km.has_kernel:
            km.shutdown_kernel(now=True)


def hidden_paths(url: str) -> list[Path]:
    """What a jailed process must not see: hidden tests and solutions, every
    submission and result, the gradebook, and git history."""
    paths = [course.SOURCE_DIR, course.NOTEBOOK_SOURCES, course.COURSE_DATA, gradebook.data_dir()]
    for root in course.course_roots():  # the same folders of the checkout the venv imports, if it is another
        paths += [root / "solutions", root / "autograder" / "authoring" / "notebook_src", root / ".course", root / ".git",
                  *_git_dirs(root / ".git")]
    if url.startswith("sqlite:///"):
        paths.append(Path(url[len("sqlite:///"):]).parent)
    return [p for p in dict.fromkeys(paths) if p.exists()]


def jail_for_recheck(limits: Limits | None = None) -> Jail:
    """A jail for the recheck child: an empty folder, the same hidden paths."""
    return Jail.reserve(limits or Limits(), copy=[], hide=hidden_paths(gradebook.db_url()))


def course_env_for_jail(jail: Jail) -> dict:
    env = course.nbgrader_env()
    env.update(jail.env(), OMP_NUM_THREADS="1")
    env.pop(gradebook.ENV_VAR, None)
    return env


def _git_dirs(dot_git: Path) -> list[Path]:
    """In a git worktree .git is a file naming the real git folder, whose
    `commondir` names the repository's shared one (with all history)."""
    if not dot_git.is_file():
        return []
    text = dot_git.read_text().strip()
    if not text.startswith("gitdir:"):
        return []
    gitdir = (dot_git.parent / text.split(":", 1)[1].strip()).resolve()
    common = gitdir / "commondir"
    dirs = [gitdir]
    if common.is_file():
        dirs.append((gitdir / common.read_text().strip()).resolve())
    return dirs
