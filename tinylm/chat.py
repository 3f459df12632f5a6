"""The session of `python -m tinylm chat`: a terminal program around generate_stream.

At a terminal, lines are read with the standard `readline` module, so the
line can be edited, earlier messages come back with the up arrow, and the
terminal stays out of canonical mode while a line is read: the kernel's cap
of 4095 bytes per canonical line never applies, and a paste of many lines
arrives as one message (readline's bracketed paste). Ctrl-C during an answer
stops that answer, Ctrl-C at the prompt clears the line, Ctrl-D or /exit
leaves. From a pipe, every line is one message until the end of the input.
A message the model cannot hold is not sent, and the session goes on.
"""
from __future__ import annotations

import os
import sys

# A message this long, or of several lines, is acknowledged with its size,
# so a paste can be seen to have arrived whole.
LONG_MESSAGE_CHARS = 1000
EXIT_COMMANDS = ("/exit", "/quit")


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def choose_threads(requested: int | None, cpus: int | None = None,
                   load: float | None = None) -> tuple[int, str]:
    """(torch threads for decoding, the reason in words).

    Decoding one token is 30 layers of small matrix-vector products whose
    threads wait for each other at every layer: a thread that shares its core
    with another job stalls them all. On an idle 2-core machine two threads
    decoded 1.7x faster than one; at load 6 (measured once, on torch
    2.14.1's CUDA build running on the CPU) ten times slower
    (docs/benchmarks.md, "Threads of the chat"). So: one thread per core
    that the last minute's load average leaves idle, and at least one.
    """
    if requested is not None:
        if requested < 1:
            raise ValueError(f"--threads must be at least 1, got {requested}")
        return requested, "--threads"
    cpus = usable_cpus() if cpus is None else cpus
    if load is None:
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    idle = max(1, min(cpus, int(cpus - load + 0.5)))
    why = "one per idle core" if idle > 1 else "one thread decodes fastest beside other jobs"
    return idle, f"{cpus} CPUs, load {load:.1f}: {why}; --threads N to choose"


class TerminalInput:
    """Messages typed at a terminal, read by readline when it is available."""

    def __init__(self, prompt: str = "> "):
        self.prompt = prompt
        try:
            import readline  # noqa: F401  (importing it is what gives input() line editing and history)
            self.editing = True
        except ImportError:  # e.g. Windows: input() without editing
            self.editing = False

    def read(self) -> str | None:
        """The next message; None at Ctrl-D. Ctrl-C clears the line and asks again."""
        while True:
            try:
                return input(self.prompt)
            except KeyboardInterrupt:
                print(flush=True)  # a fresh prompt on a line of its own
            except EOFError:
                print(flush=True)  # so the shell's prompt does not land on ours
                return None


class PipedInput:
    """One message per line of a pipe or file, read whole (no line cap)."""

    def __init__(self, stream=None):
        self.stream = stream if stream is not None else sys.stdin

    def read(self) -> str | None:
        line = self.stream.readline()
        return line.rstrip("\n") if line else None


def run_session(model, tok, options, generator, messages) -> int:
    """Answer every message from `messages` (TerminalInput or PipedInput)
    until its end or an exit command; each message starts a new conversation."""
    while True:
        message = messages.read()
        if message is None:
            return 0
        if message.strip() in EXIT_COMMANDS:
            return 0
        if message.strip():
            try:
                answer(model, tok, message, options, generator)
            except KeyboardInterrupt:  # before its first token was asked for (answer() handles the rest)
                print("\n[answer stopped]", flush=True)


def answer(model, tok, message: str, options, generator) -> None:
    """Print the answer to `message` as it is decoded, up to the end-of-turn
    token; Ctrl-C stops it and leaves the session running."""
    import torch

    from .sampling import generate_stream

    prompt = tok.chat_ids(message, options.system)
    capacity = model.config.max_seq_len
    if len(message) > LONG_MESSAGE_CHARS or "\n" in message:
        lines = message.count("\n") + 1
        print(f"(message: {len(message):,} characters" + (f" in {lines:,} lines" if lines > 1 else "")
              + f", {len(prompt):,} tokens with the chat template)", file=sys.stderr, flush=True)
    room = capacity - len(prompt)
    if room < 1:
        print(f"not sent: the message is {len(prompt):,} tokens with the chat template, the model holds "
              f"{capacity:,}; shorten it by about {len(prompt) - capacity + 1:,} tokens "
              f"(~{4 * (len(prompt) - capacity + 1):,} characters of English)", file=sys.stderr, flush=True)
        return
    if room < options.max_new_tokens:
        print(f"(room for an answer of {room:,} tokens: the message fills the rest of the model's {capacity:,})",
              file=sys.stderr, flush=True)
    stream = generate_stream(model, torch.tensor(prompt), min(options.max_new_tokens, room),
                             temperature=options.temperature, top_k=options.top_k, top_p=options.top_p,
                             generator=generator, stop_token=tok.eos_id)
    ids, shown = [], 0
    try:
        for token in stream:
            if token == tok.eos_id:
                break
            ids.append(token)
            text = tok.decode(ids)
            if not text.endswith("\ufffd"):  # wait for the rest of a character split across tokens
                print(text[shown:], end="", flush=True)
                shown = len(text)
    except KeyboardInterrupt:
        stream.close()  # puts the model back in the mode it was in
        print(f"{tok.decode(ids)[shown:]}\n[answer stopped]", flush=True)
        return
    print(tok.decode(ids)[shown:], flush=True)
