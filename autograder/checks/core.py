"""The check framework every notebook exercise uses.

A check calls the learner's function on seeded inputs, compares each result
with an independent reference (a torch built-in or closed-form math, never
tinylm's own code), prints one table row per quantity, and raises
AssertionError on any failure so nbgrader takes the points away.

It never prints an expected tensor: only shapes, dtypes, pass/fail and the
largest absolute difference. When a failing output matches a known wrong
variant (the same inputs pushed through a deliberately buggy formula), the
failure message names that bug.

Usage inside a check function:

    chk = Check("rms_norm", expects="a tensor shaped like x")
    got = chk.call(fn, x, w, eps)              # learner exceptions -> a short message
    chk.compare("float32", got, want, variants={"eps outside the sqrt": bad})
    chk.finish()                               # prints the table, raises on failure
"""
from __future__ import annotations

import traceback
from pathlib import Path
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import torch

# Tolerances per dtype of the learner's output: half precision keeps ~3
# significant digits, so its differences are judged relative to that.
# Called with the learner's function (Check.subject) whenever a check passes:
# autograder/answers.py saves the answer into the learner's package mylm/.
PASS_HOOKS: list[Callable[[Callable], None]] = []

TOLERANCES = {
    torch.float64: (1e-8, 1e-6),
    torch.float32: (1e-5, 1e-4),
    torch.bfloat16: (2e-2, 2e-2),
    torch.float16: (2e-3, 5e-3),
}


class CheckFailed(AssertionError):
    """Raised when a learner's function fails a check. An AssertionError, so
    nbgrader scores the test cell zero and plain `assert` users understand it."""


class _LearnerError(Exception):
    """Internal: the learner's function raised; carries the short message."""


def seeded(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def randn(*shape, seed: int, dtype=torch.float32) -> torch.Tensor:
    """Seeded normal noise, created on CPU in float64 then cast, so the same
    seed gives the same values on every platform and for every dtype."""
    return torch.randn(*shape, generator=seeded(seed), dtype=torch.float64).to(dtype)


def tol_for(dtype: torch.dtype) -> tuple[float, float]:
    return TOLERANCES.get(dtype, TOLERANCES[torch.float32])


def describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a {value.dtype} tensor of shape {tuple(value.shape)}"
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)} items"
    return f"{type(value).__name__} {value!r}"[:80]


def _max_abs_diff(got: torch.Tensor, want: torch.Tensor) -> float:
    if got.numel() == 0:
        return 0.0
    diff = (got.detach().double().cpu() - want.detach().double().cpu()).abs()
    if torch.isnan(diff).any():
        return float("nan")
    return float(diff.max())


def _close(got: Any, want: torch.Tensor, atol: float, rtol: float, equal_nan: bool = False) -> bool:
    """Same shape and allclose in float64 (NaN never equals anything)."""
    if not isinstance(got, torch.Tensor) or tuple(got.shape) != tuple(want.shape):
        return False
    g, w = got.detach().double().cpu(), want.detach().double().cpu()
    # Both infinite with the same sign counts as equal: a variant that
    # overflows matches a learner output that overflows the same way.
    return bool(torch.allclose(g, w, atol=atol, rtol=rtol, equal_nan=equal_nan))


@dataclass
class Row:
    name: str
    ok: bool
    shape: str = ""
    dtype: str = ""
    close: str = ""
    diff: str = ""
    note: str = ""


@dataclass
class Check:
    """Collects rows for one exercise, then prints and judges them."""

    fn_name: str
    expects: str = ""
    rows: list[Row] = field(default_factory=list)
    diagnoses: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    votes: dict[str, int] = field(default_factory=dict)  # known bug -> number of failing rows it explains
    subject: Any = None  # the first callable passed to call(): the learner's function or class under check

    # -- calling the learner -------------------------------------------------
    def call(self, fn: Callable, *args, **kwargs):
        """Call the learner's function; an exception becomes a short message
        naming the function and what was expected, and stops the check."""
        __tracebackhide__ = True
        if not callable(fn):
            self._stop(f"{self.fn_name} is {describe(fn)}, not a function. Run the cell that defines it first.")
        if self.subject is None:
            self.subject = fn
        try:
            return fn(*args, **kwargs)
        except NotImplementedError:
            self._stop(f"{self.fn_name} is not implemented yet (it raised NotImplementedError). "
                       f"Replace the `raise NotImplementedError()` line with your code; it should return {self.expects}.")
        except CheckFailed:
            raise
        except Exception as err:  # the learner's bug, reported in one line
            where = _learner_line(err)
            self._stop(f"{self.fn_name} raised {type(err).__name__}: {_first_line(err)}{where}\n"
                       f"  Called with {', '.join(describe(a) for a in args)}; it should return {self.expects}.")

    def _stop(self, message: str):
        __tracebackhide__ = True
        self.errors.append(message)
        self._print_table()
        hints = "".join(f"\n  Likely bug: {d}" for d in self.likely_bugs())
        raise CheckFailed(f"{self.fn_name}: {message}{hints}") from None

    # -- recording results ---------------------------------------------------
    def compare(self, name: str, got: Any, want: torch.Tensor, *, dtype: torch.dtype | None = None,
                atol: float | None = None, rtol: float | None = None,
                variants: Mapping[str, Any] | None = None) -> bool:
        """One table row: `got` (learner) against `want` (reference).

        dtype: the dtype the learner's output must have (default want.dtype).
        variants: {bug description: wrong output, or a zero-argument function
        computing it}; consulted only when the row fails."""
        dtype = want.dtype if dtype is None else dtype
        d_atol, d_rtol = tol_for(dtype)
        atol, rtol = (d_atol if atol is None else atol), (d_rtol if rtol is None else rtol)
        if not isinstance(got, torch.Tensor):
            self.rows.append(Row(name, False, shape="-", note=f"returned {describe(got)}, expected a tensor"))
            hint = " (a missing `return`?)" if got is None else ""
            self.diagnose(f"{self.fn_name} returned {describe(got)}{hint}; it should return {self.expects}")
            return False
        shape_ok = tuple(got.shape) == tuple(want.shape)
        dtype_ok = got.dtype == dtype
        close = _close(got, want, atol, rtol)
        row = Row(name, shape_ok and dtype_ok and close,
                  shape="ok" if shape_ok else f"{tuple(got.shape)} != {tuple(want.shape)}",
                  dtype="ok" if dtype_ok else f"{got.dtype} != {dtype}",
                  close=("ok" if close else "FAIL") if shape_ok else "-",
                  diff=f"{_max_abs_diff(got, want):.2e}" if shape_ok else "-")
        self.rows.append(row)
        if not row.ok and variants:
            bugs = matching_variants(got, variants, atol=max(atol, 1e-6), rtol=max(rtol, 1e-5))
            if bugs:
                row.note = "matches a known bug"
            for bug in bugs:
                self.votes[bug] = self.votes.get(bug, 0) + 1
        return row.ok

    def require(self, name: str, ok: bool, failure: str = "", diagnosis: str | None = None) -> bool:
        """A property row (causality, sharing, invariance...) without tensors."""
        self.rows.append(Row(name, bool(ok), close="ok" if ok else "FAIL", note="" if ok else failure))
        if not ok and diagnosis:
            self.diagnose(diagnosis)
        return bool(ok)

    def diagnose(self, message: str) -> None:
        if message not in self.diagnoses:
            self.diagnoses.append(message)

    def likely_bugs(self) -> list[str]:
        """Explicit diagnoses, then the known bug(s) that reproduce the most
        failing rows: a variant that coincides with the learner's output on
        one degenerate case only is outvoted by the one that explains all."""
        best = max(self.votes.values(), default=0)
        voted = [bug for bug, n in self.votes.items() if n == best and bug not in self.diagnoses]
        return self.diagnoses + voted

    # -- verdict ---------------------------------------------------------------
    @property
    def passed(self) -> bool:
        return not self.errors and all(r.ok for r in self.rows)

    def finish(self) -> None:
        __tracebackhide__ = True
        self._print_table()
        if self.passed:
            print(f"PASS {self.fn_name}: {len(self.rows)}/{len(self.rows)} checks")
            for hook in PASS_HOOKS:
                hook(self.subject)
            return
        failed = [r.name for r in self.rows if not r.ok]
        lines = [f"{self.fn_name} failed {len(failed)} of {len(self.rows)} checks: {', '.join(failed)}."]
        if self.likely_bugs():
            lines += [f"  Likely bug: {d}" for d in self.likely_bugs()]
        else:
            lines.append("  The output matches none of the known bugs; compare your code with the formula above.")
        raise CheckFailed("\n".join(lines))

    def _print_table(self) -> None:
        if not self.rows:
            return
        width = max(len("check"), *(len(r.name) for r in self.rows))
        print(f"{self.fn_name}:")
        print(f"  {'check':<{width}}  {'shape':<6} {'dtype':<6} {'allclose':<8} {'max|diff|':<9}")
        for r in self.rows:
            line = f"  {r.name:<{width}}  {r.shape or '-':<6} {r.dtype or '-':<6} {r.close or '-':<8} {r.diff or '-':<9}"
            print(line + (f"  <- {r.note}" if r.note else ""))


def matching_variants(got: torch.Tensor, variants: Mapping[str, Any], atol: float, rtol: float) -> list[str]:
    """The descriptions of the wrong variants that reproduce `got`."""
    found = []
    for description, wrong in variants.items():
        try:
            value = wrong() if callable(wrong) else wrong
        except Exception:  # a variant that cannot even run on these inputs
            continue
        # A variant only explains the output if it yields the same dtype too.
        if isinstance(value, torch.Tensor) and value.dtype == got.dtype and _close(got, value, atol, rtol, equal_nan=True):
            found.append(description)
    return found


def _first_line(err: Exception) -> str:
    text = str(err).strip().splitlines()
    return text[0][:200] if text else "(no message)"


_LIBRARY_DIRS = tuple(str(Path(m.__file__).resolve().parent) for m in (torch,)) + (str(Path(__file__).resolve().parent.parent),)


def _learner_line(err: Exception) -> str:
    """' (line N: `code`)' for the innermost frame of the learner's code: the
    deepest frame that is neither torch's nor the autograder's."""
    for frame in reversed(traceback.extract_tb(err.__traceback__)):
        path = frame.filename
        if not path.startswith("<") and str(Path(path).resolve()).startswith(_LIBRARY_DIRS):
            continue
        return f" (line {frame.lineno}: `{(frame.line or '').strip()}`)" if frame.line else f" (line {frame.lineno})"
    return ""


def show_check(check: Callable, fn: Callable, *args, **kwargs) -> None:
    """Run a check on a deliberately wrong function and print what a learner
    would see, without failing the cell: used in the Pitfalls sections."""
    try:
        check(fn, *args, **kwargs)
    except CheckFailed as err:
        print(f"--> CheckFailed: {err}")
    else:
        print("--> the check passed (this variant is not a bug)")
