"""`python -m tinylm chat` as a terminal program: real sessions on SmolLM2's
weights through a pseudo-terminal, driven by pexpect (IPython, which the
course's Jupyter needs, depends on it), plus the thread rule and a pipe.

A session sends what a terminal sends: typed characters, Enter as "\\r", the
up arrow as ESC [ A, Ctrl-C and Ctrl-D as their control bytes, and a paste
wrapped in the bracketed-paste markers a terminal adds once readline has
asked for them. TERM=xterm and an empty INPUTRC keep the reader's own
settings out of it.
"""
import os
import signal
import subprocess
import sys

import pytest

from tinylm.chat import choose_threads

from ..helpers import need_pretrained_weights

pexpect = pytest.importorskip("pexpect", reason="pexpect drives the pseudo-terminal (not on Windows)")

PROMPT = "> "
TIMEOUT_S = 180  # the model's first load converts the weights (about 12 s idle, minutes beside other jobs)
PASTE_START, PASTE_END = "\x1b[200~", "\x1b[201~"
UP_ARROW, CTRL_C, CTRL_D = "\x1b[A", "\x03", "\x04"


def _paste_of(n_chars: int) -> str:
    """English text of exactly n_chars characters, in lines of 58."""
    line = "The lighthouse keeper wrote every storm into his logbook."
    return "\n".join([line] * (n_chars // len(line) + 1))[:n_chars]


def _chat_env() -> dict:
    return dict(os.environ, TERM="xterm", INPUTRC="/dev/null", PYTHONUNBUFFERED="1")


def _as_a_terminals_foreground_job() -> None:
    # A shell without job control starts a background command (`make test &`) with SIGINT ignored, and an
    # ignored signal stays ignored across exec: the chat would never see the Ctrl-C typed at its terminal.
    # At a terminal, the foreground program gets it; so here too.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture
def spawn_chat():
    """Start `python -m tinylm chat OPTIONS` in a pseudo-terminal; the
    transcript (all it printed) is `session.transcript.getvalue()`."""
    import io

    need_pretrained_weights()
    sessions = []

    def spawn(*options: str):
        session = pexpect.spawn(sys.executable, ["-m", "tinylm", "chat", "--device", "cpu", *options],
                                env=_chat_env(), encoding="utf-8", dimensions=(24, 200), timeout=TIMEOUT_S,
                                preexec_fn=_as_a_terminals_foreground_job)
        session.transcript = io.StringIO()
        session.logfile_read = session.transcript
        sessions.append(session)
        return session

    yield spawn
    for session in sessions:
        if session.isalive():
            session.terminate(force=True)


def _left_cleanly(session) -> None:
    session.expect(pexpect.EOF)
    session.close()
    transcript = session.transcript.getvalue()
    assert session.exitstatus == 0, transcript[-2000:]
    assert "Traceback" not in transcript and "KeyboardInterrupt" not in transcript, transcript[-2000:]


@pytest.mark.slow
def test_a_terminal_session_recalls_history_takes_a_long_paste_whole_refuses_too_long_and_exits(spawn_chat):
    session = spawn_chat("--max-new-tokens", "3", "--temperature", "0")
    session.expect(r"threads: (\d+) \((\d+) CPUs, load [\d.]+: [^)\r\n]+\)")
    threads, cpus = int(session.match.group(1)), int(session.match.group(2))
    assert 1 <= threads <= cpus
    session.expect_exact(PROMPT)

    session.send("Say hi.\r")
    session.expect_exact(PROMPT)  # answered, asked again
    session.send(UP_ARROW)
    session.expect_exact("Say hi.")  # the last message, back on the line for editing
    session.send(CTRL_C)  # clears the line (what follows would otherwise be appended to it)
    session.expect_exact(PROMPT)

    # More than the terminal's canonical-mode line cap of 4095 bytes, in many lines: one message, whole.
    paste = _paste_of(6115)
    session.send(PASTE_START + paste + PASTE_END + "\r")
    session.expect(r"\(message: ([\d,]+) characters in ([\d,]+) lines, [\d,]+ tokens")
    assert session.match.group(1) == "6,115" and int(session.match.group(2)) == paste.count("\n") + 1
    session.expect_exact(PROMPT)

    too_long = "storm " * 2500  # one line of 15,000 characters, over 2,048 tokens
    session.send(PASTE_START + too_long + PASTE_END + "\r")
    session.expect(r"not sent: the message is ([\d,]+) tokens with the chat template, the model holds 2,048")
    assert int(session.match.group(1).replace(",", "")) > 2048
    session.expect_exact(PROMPT)  # the session goes on

    session.send("/exit\r")
    _left_cleanly(session)


@pytest.mark.slow
def test_ctrl_c_stops_an_answer_and_ctrl_d_leaves_on_a_line_of_its_own(spawn_chat):
    session = spawn_chat("--max-new-tokens", "250", "--temperature", "0", "--threads", "1")
    session.expect_exact("threads: 1 (--threads)")
    session.expect_exact(PROMPT)
    session.send("Write a long story about a lighthouse keeper.\r")
    session.expect_exact("keeper.\r\n")  # the line as typed, then the answer
    session.expect(r"\w+\W+\w+\W+\w+")  # three words of it
    session.send(CTRL_C)
    session.expect_exact("[answer stopped]")
    session.expect_exact(PROMPT)
    session.send(CTRL_D)
    _left_cleanly(session)
    transcript = session.transcript.getvalue()
    # After the last prompt, only a line break: the shell's prompt starts on a line of its own.
    assert transcript.endswith(PROMPT + "\r\n"), repr(transcript[-200:])


@pytest.mark.slow
def test_a_piped_line_longer_than_the_context_is_refused_and_the_next_is_answered():
    need_pretrained_weights()
    done = subprocess.run([sys.executable, "-m", "tinylm", "chat", "--max-new-tokens", "2", "--temperature", "0",
                           "--device", "cpu"], input="storm " * 2500 + "\nHello!\n", capture_output=True,
                          text=True, timeout=TIMEOUT_S, env=_chat_env())
    assert done.returncode == 0, done.stderr[-2000:]
    assert "not sent: the message is" in done.stderr and "Traceback" not in done.stderr
    assert "(message: 15,000 characters, " in done.stderr
    assert done.stdout.count("\n") == 1  # one answer, to the second line


def test_threads_follow_the_idle_cores_and_an_explicit_choice():
    assert choose_threads(None, cpus=2, load=0.1)[0] == 2
    assert choose_threads(None, cpus=2, load=1.5)[0] == 1
    assert choose_threads(None, cpus=2, load=9.0)[0] == 1  # never fewer than one
    assert choose_threads(None, cpus=8, load=2.2)[0] == 6
    assert choose_threads(3, cpus=2, load=9.0) == (3, "--threads")
    with pytest.raises(ValueError, match="--threads must be at least 1"):
        choose_threads(0)
