"""The one message framing between the grader's processes: an 8-byte
big-endian length, then that many bytes, never more than MAX_FRAME_BYTES.

It carries pickles between the grader's own processes (warm pool and
workers, a Dask worker and its grading child), torch archives from the
jailed recheck child (whose bytes the parent decodes with its own limit,
recheck.protocol.load_plain), and JSON with passed file descriptors on the
warm jail server's Unix socket (send_json, JsonFrames). A reader refuses a
header announcing more than MAX_FRAME_BYTES before it reads the body.
"""
from __future__ import annotations

import json
import os
import select
import socket
import struct
import time

HEADER = struct.Struct("!Q")
MAX_FRAME_BYTES = 256 * 1024 * 1024
CHUNK = 1 << 20


class FrameTooLarge(ValueError):
    """A header announcing more than MAX_FRAME_BYTES."""

    def __init__(self, size: int):
        super().__init__(f"a frame of {size} bytes, over the {MAX_FRAME_BYTES}-byte limit")


def frame(payload: bytes) -> bytes:
    return HEADER.pack(len(payload)) + payload


def body_size(header: bytes) -> int:
    """The length a header announces; FrameTooLarge over the limit."""
    (size,) = HEADER.unpack(header)
    if size > MAX_FRAME_BYTES:
        raise FrameTooLarge(size)
    return size


def unframe(data: bytes) -> bytes:
    """The payload of one whole frame held in memory; ValueError if it is not one."""
    if len(data) < HEADER.size or len(data) - HEADER.size != body_size(data[:HEADER.size]):
        raise ValueError("not one whole frame")
    return data[HEADER.size:]


def send(fd: int, payload: bytes) -> None:
    """Write one frame to a file descriptor (a pipe)."""
    data = frame(payload)
    while data:
        data = data[os.write(fd, data):]


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes:
    chunks, got = [], 0
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError("no whole message arrived in time")
        chunk = os.read(fd, min(n - got, CHUNK))
        if not chunk:
            raise EOFError("the stream ended before a whole message")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def receive(fd: int, deadline: float | None = None) -> bytes:
    """Read one frame's payload from a file descriptor. EOFError when the
    stream ends first, TimeoutError past `deadline` (time.monotonic()),
    FrameTooLarge (a ValueError) for a header over the limit."""
    return _read_exact(fd, body_size(_read_exact(fd, HEADER.size, deadline)), deadline)


def send_json(sock: socket.socket, message: dict, fds: tuple[int, ...] = ()) -> None:
    """One frame of JSON on a stream socket; `fds` ride on the header's bytes (SCM_RIGHTS)."""
    body = json.dumps(message).encode()
    head = HEADER.pack(len(body))
    if fds:
        socket.send_fds(sock, [head], list(fds))
        sock.sendall(body)
    else:
        sock.sendall(head + body)


class JsonFrames:
    """Collects bytes (and passed fds) from a stream socket into JSON frames."""

    def __init__(self, sock: socket.socket):
        self.sock, self.buffer, self.fds, self.ready = sock, b"", [], []

    def feed(self) -> bool:
        """Read what is there, split off whole frames; False at end of stream."""
        data, fds, _, _ = socket.recv_fds(self.sock, 65536, 3)
        self.fds += fds
        self.buffer += data
        while len(self.buffer) >= HEADER.size:
            size = body_size(self.buffer[:HEADER.size])
            if len(self.buffer) < HEADER.size + size:
                break
            self.ready.append(json.loads(self.buffer[HEADER.size:HEADER.size + size]))
            self.buffer = self.buffer[HEADER.size + size:]
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
