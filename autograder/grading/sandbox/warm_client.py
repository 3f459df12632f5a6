"""The client side of the warm jail server (autograder.grading.sandbox.warm_jail):
`python -m autograder.grading.sandbox.jail -- COMMAND` asks the server, named by
TINYLM_WARM_JAIL, to run COMMAND warm, and stays the process its starter
knows until the job ends. A module apart from the server (which imports
the jail), so that jail and client import one way."""
from __future__ import annotations

import os
import signal
import socket

from ..wire import JsonFrames, send_json

ENV_VAR = "TINYLM_WARM_JAIL"
ALLOWED_MODULES = frozenset({"ipykernel_launcher", "autograder.grading.recheck"})
CONNECT_TIMEOUT_S = 2.0


# ---------------------------------------------------------------------------
# client

def warm_module(command: list[str]) -> str | None:
    """MODULE if COMMAND is `PYTHON -I -m MODULE ...` with an allowed MODULE."""
    if len(command) >= 4 and command[1:3] == ["-I", "-m"] and command[3] in ALLOWED_MODULES:
        return command[3]
    return None


def run_warm(settings: dict, command: list[str], env: dict, signals=()) -> int | None:
    """Run COMMAND as a warm job; its exit status, or None when no server
    took it (none set, unreachable, or it refused): then the caller runs it
    cold. Writes nothing either way. `signals` are passed on to the job."""
    path = os.environ.get(ENV_VAR)
    if not path or warm_module(command) is None:
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(CONNECT_TIMEOUT_S)
        sock.connect(path)
        sock.settimeout(None)  # once asked, wait: a server that goes away closes the socket
        send_json(sock, {"settings": settings, "command": command, "env": env}, fds=(0, 1, 2))
        reader = JsonFrames(sock)
        answer = reader.next_frame()
    except (OSError, ValueError):
        sock.close()
        return None
    if not answer or not answer.get("accepted"):
        sock.close()
        return None
    return _follow(sock, reader, signals)


def _follow(sock: socket.socket, reader: JsonFrames, signals) -> int:
    """Be the process the kernel manager (or the recheck) knows: hold no end
    of the job's pipes, pass its signals on, exit with the job's status."""
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)

    def forward(signum, _frame):
        try:
            send_json(sock, {"signal": int(signum)})
        except OSError:
            pass
    for signum in signals:
        signal.signal(signum, forward)
    try:
        answer = reader.next_frame()
    except (OSError, ValueError):
        answer = None
    # No answer: the server died, and with it the job (PR_SET_PDEATHSIG).
    return int(answer["exit"]) if answer and "exit" in answer else 128 + signal.SIGKILL
