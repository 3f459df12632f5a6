"""Where the learner's code ends and the library's begins: the files that
are not the learner's (torch, tinylm, the checks), a traceback's frames, and
the timeout raised inside a learner's call. Both the checks' framework and
the tracer read these, so they live below both."""
from __future__ import annotations

import importlib.util
from pathlib import Path


class LearnerTimeout(BaseException):
    """Raised inside the learner's code when one call of it runs past
    framework.calling.CALL_TIME_LIMIT seconds. A BaseException, like KeyboardInterrupt, so an
    `except Exception` in the learner's loop does not swallow it."""


def _package_dir(name: str) -> str | None:
    spec = importlib.util.find_spec(name)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    return str(Path(locations[0]).resolve()) if locations else None


# Code that is not the learner's: torch, the course's library (an answer may
# call tinylm for another exercise) and the autograder (the checks).
_LIBRARY_DIRS = tuple(d for d in (_package_dir("torch"), _package_dir("tinylm"), str(Path(__file__).resolve().parent.parent))
                      if d)


def is_learners_file(filename: str) -> bool:
    """True for a notebook cell or any file outside _LIBRARY_DIRS."""
    return filename.startswith("<") or not str(Path(filename).resolve()).startswith(_LIBRARY_DIRS)


def walk_traceback(tb):
    while tb is not None:
        yield tb
        tb = tb.tb_next
