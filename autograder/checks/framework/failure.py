"""A failed check as an exception: CheckFailed (an AssertionError, so nbgrader
scores the cell zero), the other ways a check stops (CheckStopped,
Delegation), and how IPython shows a failure (render_failure: the learner's
own frames of an error their code raised, then the message, never the
check's frames)."""
from __future__ import annotations

import dis
import json
import linecache
import os
import re
import sys
import traceback
import types
from typing import Callable


from ... import diagnosis_text
from ...diagnosis_record import Diagnosis, Evidence, confirmed
from ..learner_code import is_learners_file, walk_traceback


class CheckFailed(AssertionError):
    """Raised when a learner's function fails a check. An AssertionError, so
    nbgrader scores the test cell zero and plain `assert` users understand it.

    In IPython (a notebook, nbgrader's kernel) it renders itself
    (_render_traceback_): the check's diagnosis, preceded by the learner's
    own frames when their code raised (learner_error), never the check's
    frames or source. Plain Python and pytest show the usual traceback. A
    line repeated in the message is kept once. `diagnosis` holds the same
    failure as fields (Diagnosis)."""

    def __init__(self, message: str = "", *, learner_error: BaseException | None = None,
                 diagnosis: Diagnosis | None = None, head: str | None = None):
        if head is not None:  # the diagnosis's lines are rendered from its fields
            message = head + "".join(f"\n  {line}" for line in (diagnosis_text.lines(diagnosis) if diagnosis else []))
        super().__init__(unique_lines(str(message)))
        self.learner_error = learner_error
        self.diagnosis = diagnosis
        self.head = head if diagnosis is not None else None
        _log_diagnosis(self)

    def __reduce__(self):  # the learner's error holds frames, which do not pickle
        return _rebuild_failure, (str(self), self.diagnosis.to_dict() if self.diagnosis else None, self.head)

    def error_text(self) -> str:
        """The text of the error the learner's code raised (the stop line,
        without the learner's quoted code, when the error itself is not at
        hand): what an error-message hint may be matched against, never the
        check's own words ("Called with a torch.uint8 tensor ...")."""
        if self.learner_error is not None:
            return str(self.learner_error)
        stop = self.diagnosis.stop if self.diagnosis is not None and self.diagnosis.stop else ""
        return re.sub(r"\(line \d+: `[^`]*`\)", "", stop) if self.diagnosis is not None and self.diagnosis.kind == "raised" else ""

    def with_likely_bug(self, bug: str) -> "CheckFailed":
        """The same failure with one more cause confirmed on the learner's
        code (kept once)."""
        return self.with_line(confirmed(bug))

    def with_line(self, evidence: Evidence) -> "CheckFailed":
        """The same failure with one more diagnosis line, keeping the
        learner's error and frames: its kind puts it in the record's field
        and the message's order (diagnosis_text.lines)."""
        if self.diagnosis is not None and self.head is not None:
            return CheckFailed(learner_error=self.learner_error, diagnosis=self.diagnosis.with_evidence(evidence),
                               head=self.head)
        diagnosis = self.diagnosis.with_evidence(evidence) if self.diagnosis is not None else None
        return CheckFailed(f"{self}\n  {diagnosis_text.evidence_line(evidence)}", learner_error=self.learner_error,
                           diagnosis=diagnosis)

    def _render_traceback_(self) -> list[str]:
        return render_failure(self)


def _rebuild_failure(message: str, diagnosis: dict | None, head: str | None = None) -> CheckFailed:
    rebuilt = CheckFailed(message, diagnosis=Diagnosis.from_dict(diagnosis) if diagnosis else None)
    rebuilt.head = head if rebuilt.diagnosis is not None else None
    return rebuilt


# Where a self-check run (`python -m autograder check`) collects the
# diagnoses of the failures its kernel raises, one JSON object a line.
DIAGNOSIS_LOG_ENV = "TINYLM_DIAGNOSIS_LOG"


def _log_diagnosis(err: CheckFailed) -> None:
    path = os.environ.get(DIAGNOSIS_LOG_ENV)
    if not path or err.diagnosis is None:
        return
    try:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"message": str(err), "diagnosis": err.diagnosis.to_dict()}) + "\n")
    except (OSError, TypeError, ValueError):  # the log is a convenience: a failure to write it changes no verdict
        pass


class CheckStopped(RuntimeError):
    """Raised by a check's own instrument inside the learner's call (a hook
    that stops a loop past its bound): its text is the check's measurement,
    never the learner's words, and is reported as one."""


class Delegation(Exception):
    """Raised when an answer hands its exercise to tinylm's own function of
    the same name instead of implementing it."""


def unique_lines(message: str) -> str:
    """message with each repeated 'Measured:' / 'Likely bug:' (...) line kept
    once, where it first appears (several paths can reach one diagnosis)."""
    seen, kept = set(), []
    for line in message.splitlines():
        key = line.strip()
        if key.startswith(("Measured:", "Candidates:", "Likely bug:", "Saved:", "Where:")):
            if key in seen:
                continue
            seen.add(key)
        kept.append(line)
    return "\n".join(kept)


def first_line(err: Exception, width: int = 200) -> str:
    """The error's first line, cut where a sentence or clause ends within `width` characters (else at a word), with
    an ellipsis where something was cut: a cut in mid-word can turn an error's list of causes into a wrong one."""
    text = str(err).strip().splitlines()
    if not text:
        return "(no message)"
    line = text[0]
    if len(line) <= width:
        return line
    cut = line[:width]
    ends = [cut.rfind(mark) + 1 for mark in (". ", "; ")]
    end = max(ends) if max(ends) > width // 2 else cut.rfind(" ")
    return cut[:end if end > 0 else width].rstrip(" ,;:(.") + "…"


def learner_frames(tb: types.TracebackType | None) -> types.TracebackType | None:
    """The traceback chain of `tb` keeping only the learner's frames (see
    is_learners_file): the check's frames and torch's internals are dropped."""
    kept = [t for t in walk_traceback(tb) if is_learners_file(t.tb_frame.f_code.co_filename)]
    chain = None
    for t in reversed(kept):
        chain = types.TracebackType(chain, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return chain


def learner_place(err: BaseException) -> str:
    """' inside your repeat_kv (line N: `code`)' for the innermost frame of
    the learner's code, '' when none of the error's frames is theirs."""
    frames = list(walk_traceback(learner_frames(err.__traceback__)))
    if not frames:
        return ""
    code = frames[-1].tb_frame.f_code
    name = diagnosis_text.function_words(getattr(code, "co_qualname", code.co_name))
    where = f" inside your {name}" if not name.startswith("<") else ""
    lineno = frames[-1].tb_lineno
    text = linecache.getline(code.co_filename, lineno).strip()
    return f"{where} (line {lineno}: `{text}`)" if text else f"{where} (line {lineno})"


_RAISE = dis.opmap["RAISE_VARARGS"]

# The grader's recheck raises the learner's errors again by name, without their frames: its untrusted side names a
# NotImplementedError that no `raise` of the learner's raised so (see raised_name), and its trusted side marks the
# error it raises with RAISED_BY_LEARNER, which raised_by_learner reads before any frame.
LIBRARY_NOT_IMPLEMENTED = "NotImplementedError (raised inside a library call)"
RAISED_BY_LEARNER = "raised_by_learner"


def raised_by_learner(err: BaseException) -> bool:
    """True when the error's innermost frame is the learner's own code and
    its instruction there is a `raise` statement: a stub left in place
    (`raise NotImplementedError()`), not an error torch raised inside a
    call the learner's line made (torch raises NotImplementedError too, for
    an operation with no kernel for its dtype)."""
    marked = getattr(err, RAISED_BY_LEARNER, None)
    if isinstance(marked, bool):
        return marked
    frames = list(walk_traceback(err.__traceback__))
    if not frames or not is_learners_file(frames[-1].tb_frame.f_code.co_filename):
        return False
    code, offset = frames[-1].tb_frame.f_code, frames[-1].tb_lasti
    return 0 <= offset < len(code.co_code) and code.co_code[offset] == _RAISE


def raised_name(err: BaseException) -> str:
    """The name an error is reported under from the recheck's child: its type's, except for a NotImplementedError
    the learner's own `raise` did not raise (LIBRARY_NOT_IMPLEMENTED), which is no stub left in place."""
    if isinstance(err, NotImplementedError) and not raised_by_learner(err):
        return LIBRARY_NOT_IMPLEMENTED
    return type(err).__name__


def _format_frames(err: BaseException, tb: types.TracebackType) -> list[str]:
    """The learner's frames as IPython prints them ("Cell In[2], line 3, in
    f" with the cell's lines), or as plain Python does outside IPython."""
    shell = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
    formatter = getattr(shell, "InteractiveTB", None)
    if formatter is not None:
        try:
            saved = err.__cause__, err.__context__, err.__suppress_context__
            err.__cause__ = err.__context__ = None  # only this error's frames, not what it was raised while handling
            try:
                return list(formatter.structured_traceback(type(err), err, tb, tb_offset=0))
            finally:
                err.__cause__, err.__context__, err.__suppress_context__ = saved
        except Exception:  # noqa: BLE001: an IPython that formats differently falls back to plain frames
            pass
    return ["Traceback of the error in your code (most recent call last):\n" +
            "".join(traceback.format_list(traceback.extract_tb(tb))).rstrip("\n"),
            f"{type(err).__name__}: {first_line(err)}"]


def render_failure(err: CheckFailed) -> list[str]:
    """What IPython shows for a CheckFailed (its _render_traceback_): the
    learner's frames of the error their code raised, if any, then the
    message. Few entries, the message last and whole: the grader keeps a
    cell's last traceback entries only."""
    lines: list[str] = []
    learner = err.learner_error
    tb = learner_frames(learner.__traceback__) if learner is not None else None
    if tb is not None:
        lines += _format_frames(learner, tb)
    lines.append(f"\x1b[0;31mCheckFailed\x1b[0m: {err}")
    return lines


def show_check(check: Callable, fn: Callable, *args, **kwargs) -> None:
    """Run a check on a deliberately wrong function and print what a learner
    would see, without failing the cell: used in the Pitfalls sections."""
    try:
        check(fn, *args, **kwargs)
    except CheckFailed as err:
        print(f"--> CheckFailed: {err}")
    else:
        print("--> the check passed (this variant is not a bug)")
