"""The client side of the warm jail server (autograder.grading.warm_jail):
`python -m autograder.grading.jail -- COMMAND` asks the server, named by
TINYLM_WARM_JAIL, to run COMMAND warm, and stays the process its starter
knows until the job ends. A module apart from the server (which imports
the jail), so that jail and client import one way."""
from __future__ import annotations

import json
import os
import signal
import socket
import struct

ENV_VAR = "TINYLM_WARM_JAIL"
ALLOWED_MODULES = frozenset({"ipykernel_launcher", "autograder.grading.recheck"})
CONNECT_TIMEOUT_S = 2.0
MAX_FRAME = 1 << 20


# ---------------------------------------------------------------------------
# frames: 4-byte length, then JSON; the request carries the three std fds

def send_frame(sock: socket.socket, message: dict, fds: tuple[int, ...] = ()) -> None:
    body = json.dumps(message).encode()
    head = struct.pack("!I", len(body))
    if fds:  # the fds ride on the header's bytes
        socket.send_fds(sock, [head], list(fds))
        sock.sendall(body)
    else:
        sock.sendall(head + body)


class FrameReader:
    """Collects bytes (and passed fds) from a stream socket into frames."""

    def __init__(self, sock: socket.socket):
        self.sock, self.buffer, self.fds, self.ready = sock, b"", [], []

    def feed(self) -> bool:
        """Read what is there, split off whole frames; False at end of stream."""
        data, fds, _, _ = socket.recv_fds(self.sock, 65536, 3)
        self.fds += fds
        self.buffer += data
        while len(self.buffer) >= 4:
            size = struct.unpack("!I", self.buffer[:4])[0]
            if size > MAX_FRAME:
                raise ValueError(f"a frame of {size} bytes, over the {MAX_FRAME}-byte limit")
            if len(self.buffer) < 4 + size:
                break
            self.ready.append(json.loads(self.buffer[4:4 + size]))
            self.buffer = self.buffer[4 + size:]
        return bool(data)

    def take(self) -> list[dict]:
        frames, self.ready = self.ready, []
        return frames

    def next_frame(self) -> dict | None:
        """Block until a whole frame is there; None at end of stream."""
        while not self.ready:
            if not self.feed():
                return None
        return self.ready.pop(0)


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
        send_frame(sock, {"settings": settings, "command": command, "env": env}, fds=(0, 1, 2))
        reader = FrameReader(sock)
        answer = reader.next_frame()
    except (OSError, ValueError):
        sock.close()
        return None
    if not answer or not answer.get("accepted"):
        sock.close()
        return None
    return _follow(sock, reader, signals)


def _follow(sock: socket.socket, reader: FrameReader, signals) -> int:
    """Be the process the kernel manager (or the recheck) knows: hold no end
    of the job's pipes, pass its signals on, exit with the job's status."""
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)

    def forward(signum, _frame):
        try:
            send_frame(sock, {"signal": int(signum)})
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
