"""Watching the learner's own frames while a call runs again: the first line
after which a frame holds something a check looks for (a parameter rebound,
a local made of a given object, a name bound to another object as the
function returns). The call's printing is silenced and its error left to the
check's own call, which reports it; the tracer that was set before is set
back."""
from __future__ import annotations

import contextlib
import io
import sys
import types
from typing import Any, Callable

from .calling import measuring_call


def first_line_where(fn: Callable, args: tuple, watched: Callable[[types.CodeType], bool],
                     holds: Callable[[types.FrameType, str], Any]) -> tuple[types.CodeType, int, Any] | None:
    """Run fn(*args) again with a line tracer on the frames whose code
    `watched` accepts; after each line of such a frame runs (and as it
    returns), holds(frame, event) looks at it. The first (code, line that
    just ran, what holds gave) where holds gives something other than None;
    None when it never does."""
    found: list = []
    last: dict[types.FrameType, int] = {}

    def local(frame, event, arg):
        if found:
            return None
        if event in ("line", "return"):
            line = last.get(frame)
            seen = holds(frame, event) if line is not None else None
            if seen is not None:
                found.append((frame.f_code, line, seen))
                return None
            last[frame] = frame.f_lineno
        return local

    previous = sys.gettrace()
    sys.settrace(lambda frame, event, arg: local if watched(frame.f_code) else None)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            measuring_call(fn, args)
    except Exception:  # noqa: BLE001: the call's error is reported by the check's own call
        pass
    finally:
        sys.settrace(previous)
    return found[0] if found else None
