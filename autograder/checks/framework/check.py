"""The check framework every notebook exercise uses.

A check calls the learner's function on seeded inputs, compares each result with an independent reference (a torch
built-in or closed-form math, never tinylm's own code), prints one table row per quantity, and raises AssertionError
on any failure so nbgrader takes the points away.

It never prints an expected tensor: only shapes, dtypes, pass/fail, the largest absolute difference and measured
properties of the learner's own output (which axis sums to 1, a fitted scale factor, an identified activation). A
failure ends with the most useful line: the diagnosis.

A "Likely bug:" line names a cause, and only where the learner's own output (or error) shows it; every other
observation is a "Measured:" line (`chk.measured(...)`). The sources of "Likely bug:", best first:
  * measurements of the learner's output (`chk.diagnose(...)`, called only in a branch whose condition measured that
    output), phrased as what the output is and how it differs from what it should be;
  * known wrong variants (the same inputs pushed through a deliberately buggy formula), named only when a variant
    reproduces EVERY failing row it was offered for (a partial match never produces a name);
  * the learner's error message (`chk.call(..., error_hints=[(regex, bug)])`), named only when the regex matches
    what their code raised;
  * upstream attribution (`chk.upstream(...)`): a later exercise that fails only because an earlier answer it calls
    is wrong says so.

A CheckFailed caught to add a cause gets it with `err.with_likely_bug(bug)`, and any other line with
`err.with_line(evidence)` (diagnosis_record.Evidence: measured, candidates or confirmed); both keep the learner's
frames, a line already there is not repeated, and the message is rendered again from the record (diagnosis_text), so
an added line takes its kind's place.

What a failure shows: the table (printed), then the message. In a notebook the message renders without a traceback
(CheckFailed._render_traceback_), and an error raised by the learner's code shows the learner's frames only. The
raising call is the table's last row, and its "Called with" line and the sizes named from its error come from that
same call (CallRecord).

Usage inside a check function:

    chk = Check("rms_norm", expects="a tensor shaped like x")
    got = chk.call(fn, x, w, eps, row_label="float32")   # learner exceptions -> a short message
    chk.compare("float32", got, want, variants={"eps outside the sqrt": bad})
    chk.finish()                               # prints the table, raises on failure
"""
from __future__ import annotations

import contextlib
import dataclasses
import inspect
import io
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

import torch

from ... import diagnosis_text
from ...diagnosis_record import CANDIDATES, MEASURED, Diagnosis, Evidence
from ...learner_values import describe, known_sizes, shown_shape
from ..learner_code import LearnerTimeout
from .calling import (CALLERS, argument_names, call_giving_inputs_back, globals_of, guarded_call, measuring_call,
                      refuse_delegation, tensors_named)
from .explain import explain_dtype, explain_mismatch
from .explain.notebook_names import say_notebook_name
from .failure import CheckFailed, CheckStopped, Delegation, first_line, learner_place, raised_by_learner
from .measure import (format_diff, close_to, describe_factor, elements_asked, fit_scale, matching_variants, shorten,
                      tol_for, variant_tolerance)


# Called with the learner's function or class (Check.subject, None when the
# check never called one) after a check passed / failed. A hook may return a
# note: appended to the PASS line, or a "Saved:" line of the failure. A
# hook's own error becomes a note and never fails (or passes) the check.
PASS_HOOKS: list[Callable[[Any], str | None]] = []
FAIL_HOOKS: list[Callable[[Any], str | None]] = []

# Exercise name -> locate(fn, args, kwargs): the learner's first wrong line for one of its calls that raised,
# traced against the exercise's step-by-step reference (each contracts.Contract registers its own).
RAISE_LOCATORS: dict[str, Callable[[Callable, tuple, dict], Any]] = {}

# Exercise name -> reference(*args, **kwargs): the right result of a call on any inputs (each contracts.Contract
# registers its own), to say what a call that raised should have returned for its own inputs.
REFERENCES: dict[str, Callable] = {}


# An error about shapes or sizes, whose numbers in parentheses or brackets are axis sizes ("mat1 and mat2 shapes
# cannot be multiplied (12x6 and 10x6)"); the numbers of another error are not ("too many values to unpack
# (expected 2)", "Dimension out of range (expected to be in range of [-2, 1], but got 2)"), nor a count in one
# ("the number of sizes provided (1)").
_SHAPE_ERROR = re.compile(r"\b(shapes?|sizes?)\b", re.IGNORECASE)
_COUNTED = re.compile(r"number of [^()\[\]]*(\([^()]*\)|\[[^\[\]]*\])", re.IGNORECASE)


def _input_shapes(args: tuple, kwargs: dict) -> list:
    """The shapes of a call's tensor inputs (None for any other value): calls on the same shapes share `expects`."""
    return [tuple(v.shape) if isinstance(v, torch.Tensor) else None for v in [*args, *kwargs.values()]]


def _result_words(value) -> str | None:
    """A reference's result in the words of `expects`: a tensor's dtype and shape, a short tuple's items."""
    if isinstance(value, torch.Tensor):
        return describe(value, value.shape)
    if isinstance(value, tuple) and 0 < len(value) <= 4 and all(isinstance(v, torch.Tensor) for v in value):
        return f"a tuple of {len(value)}: " + ", ".join(describe(v, v.shape) for v in value)
    return None


# ---------------------------------------------------------------------------
# the table and the verdict

@dataclass
class Row:
    name: str
    ok: bool
    shape: str = ""
    dtype: str = ""
    close: str = ""
    diff: str = ""
    note: str = ""


# The rows a call adds when it writes into its inputs, or leaves torch's settings or its modules' flags changed.
INPUTS_ROW = "inputs unchanged"
SETTINGS_ROW = "torch settings and requires_grad given back"


@dataclass
class CallRecord:
    """One call of the learner's function that raised: what it was given
    and the error. Its table row, its "Called with" line and the sizes read
    from its error all come from this one record."""
    args: tuple
    kwargs: dict
    error: BaseException
    row_label: str | None = None

    def values(self) -> list:
        return [*self.args, *self.kwargs.values()]

    def label(self) -> str:
        if self.row_label:
            return self.row_label
        shapes = [str(tuple(v.shape)) if isinstance(v, torch.Tensor) else type(v).__name__ for v in self.values()]
        return shorten("inputs " + " ".join(shapes), 60)

    def for_row(self) -> str:
        return f" (the row `{self.row_label}`)" if self.row_label else ""

    def called_with(self) -> str:
        named = [f"{key}={describe(value)}" for key, value in self.kwargs.items()]
        return ", ".join([describe(a) for a in self.args] + named)

    def sizes(self) -> set[int]:
        """Every axis size of this call's tensor inputs, and its int inputs."""
        found: set[int] = set()
        for value in self.values():
            if isinstance(value, torch.Tensor):
                found.update(int(d) for d in value.shape)
            elif isinstance(value, int) and not isinstance(value, bool):
                found.add(value)
        return found


class CandidatesVariant(str):
    """A known variant's text for an output that several causes give alike
    (its text names them as candidates): when it reproduces the failing rows
    it is said among the candidates, never as a likely bug."""

    def __new__(cls, text: str):
        Evidence(CANDIDATES, text)  # refuses a text that does not call its causes candidates
        return super().__new__(cls, text)


@dataclass
class Check:
    """Collects rows for one exercise, then prints and judges them."""

    fn_name: str
    expects: str = ""
    gradients: str = CALLERS  # how the function uses gradients (calling.CALLERS, WITHOUT, NEEDS): the grad-mode fix
    rows: list[Row] = field(default_factory=list)
    diagnoses: list[str] = field(default_factory=list)
    facts: list[str] = field(default_factory=list)       # true measurements that name no bug
    candidate_lines: list[str] = field(default_factory=list)  # a measurement with the causes it fits, as candidates
    errors: list[str] = field(default_factory=list)
    offered: dict[str, int] = field(default_factory=dict)  # known bug -> failing rows it was tried on
    votes: dict[str, int] = field(default_factory=dict)    # known bug -> failing rows it reproduces
    refuted: set = field(default_factory=set)               # known bugs whose output would fail a row the learner passed
    said_by: dict[str, str] = field(default_factory=dict)   # known bug -> the diagnosis that states its cause with places
    places: dict[str, list] = field(default_factory=dict)   # a cause measured at several places -> those places
    read_from: dict[str, list] = field(default_factory=dict)  # a row -> the causes the framework read from its output
    reproduced: dict[str, list] = field(default_factory=dict)  # a row -> the known variants that reproduce it
    reading: list | None = None                              # while compare reads a row: the causes said meanwhile
    subject: Any = None                                     # the first callable passed to call()
    axes: dict[str, int] = field(default_factory=dict)      # axis name -> size, to read shape errors
    result_axes: tuple = ()                                 # the result's axes by name, in order, where sizes repeat
    names: dict[str, int] = field(default_factory=dict)     # the exercise's own letters for its axes (B, T, d) -> size
    regime: dict | None = None                              # {"name", "text"} of the regime a failure showed in
    located: Any = None                                     # trace.Located: the learner's first wrong line
    error_measured: bool = False                            # a raise was explained by measurement: no guess from its text
    locators: list = field(default_factory=list)            # find `located` when the check fails (see locate_with)
    last_call: list = field(default_factory=list)           # (name, value) of the last call's arguments: its sizes
    last_made: tuple | None = None                          # (fn, args, kwargs) of the last call, to trace it again
    wrong_calls: list = field(default_factory=list)         # (args, kwargs, want) of the checked function's wrong calls
    layout: dict = field(default_factory=dict)              # the axes-in-another-order line: its row, rows refuting it
    ratio_rows: dict = field(default_factory=dict)          # a factor said ("1/3 of") -> the rows showing it
    first_shapes: list | None = None                        # the input shapes of the call `expects` was written for
    last_shapes: list | None = None                         # the last call's input shapes

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "expects" and getattr(self, "expects", value) != value:  # written for the next call's inputs
            object.__setattr__(self, "first_shapes", None)
        object.__setattr__(self, name, value)

    # -- calling the learner -------------------------------------------------
    def call(self, fn: Callable, *args, on_error: Callable[[Exception], "str | Evidence | None"] | None = None,
             row_label: str | None = None, error_hints: tuple = (), **kwargs):
        """Call the learner's function; an exception becomes a short message
        naming the function and what was expected, and stops the check.

        The raising call gets its own table row (row_label, else its input
        shapes), and the "Called with" line and the sizes named from its
        error come from that same call. error_hints: (regex, likely bug)
        pairs; a bug is named only when its regex matches the learner's
        error message (the measured evidence). on_error(err) may return a
        diagnosis for this particular call (e.g. 'it fails only when
        start_pos > 0: ...'), or an Evidence, whose kind says where it goes.

        Every call is measured for what it must leave as it found it: a
        tensor argument it writes into (the 'inputs unchanged' row), torch's
        grad mode and default dtype and device, and the requires_grad flags
        of the modules it is handed (a row of its own); each is given back
        at once, so the rest of the check reads what the notebook would."""
        __tracebackhide__ = True
        if not callable(fn):
            self._stop(f"{self.fn_name} is {describe(fn)}, not a function. Run the cell that defines it first.")
        self.last_shapes = _input_shapes(args, kwargs)
        if self.first_shapes is None:
            self.first_shapes = self.last_shapes
        if self.subject is None:
            self.subject = fn
        self.last_call = argument_names(fn, args, kwargs)
        self.last_made = (fn, args, kwargs)
        written: list[str] = []
        left: list[str] = []
        try:
            with refuse_delegation(self.fn_name, fn), self._given_back(written, left):
                return call_giving_inputs_back(self.last_call, lambda: guarded_call(fn, args, kwargs, left, self.gradients),
                                               written)
        except LearnerTimeout as err:
            self._stop_on_error(CallRecord(args, kwargs, err, row_label), None, ())  # never traced: it would hang again
        except CheckFailed:
            raise
        except Exception as err:  # the learner's bug, reported in one line
            if isinstance(err, NotImplementedError) and raised_by_learner(err):  # a stub, not torch's missing kernel
                self._stop(f"{self.fn_name} is not implemented yet (it raised NotImplementedError). Replace the "
                           f"`raise NotImplementedError()` line with your code; it should return "
                           f"{self.expected_for(args, kwargs)}.",
                           kind="not implemented")
            if type(err).__name__ == "Delegation":  # also the recheck's re-raised form
                self._stop(first_line(err), kind="delegated")
            self._locate_raise(fn, args, kwargs)
            if self._number_type_tells(fn, args, kwargs):
                self.error_measured = True
                error_hints = ()  # the measurement says what the error's text would only guess
            self._stop_on_error(CallRecord(args, kwargs, err, row_label), on_error, error_hints)

    @contextlib.contextmanager
    def _given_back(self, written: list[str], left: list[str]):
        """Records, once the call ends (before an error of its is reported),
        the inputs it wrote into and the settings it left changed."""
        try:
            yield
        finally:
            self.record_inputs(written)
            if left and not any(r.name == SETTINGS_ROW for r in self.rows):
                self.require(SETTINGS_ROW, False, "changed by the call")
                for text in left:
                    self.diagnose(text)

    def record_inputs(self, written: list[str], row: bool = False) -> None:
        """The 'inputs unchanged' row (added at once with row=True, else at
        the first change), turned to FAIL, with the diagnosis, the first time
        a call writes into an input."""
        found = next((r for r in self.rows if r.name == INPUTS_ROW), None)
        if found is None and (row or written):
            found = Row(INPUTS_ROW, True, close="ok")
            self.rows.append(found)
        if not written or not found.ok:
            return
        written = list(dict.fromkeys(written))
        found.ok, found.close, found.note = False, "FAIL", f"{', '.join(written)} changed by the call"
        what = " and ".join(f"`{n}`" for n in written)
        self.diagnose(f"{self.fn_name} changes its input {what} in place (measured: its values differ after the call "
                      "from a copy taken before it): an in-place operation (for example `x -= ...`, `x *= ...`, `x[mask] = "
                      "...`, `masked_fill_`, `.div_`, an `out=` argument, `.float()` on a tensor that already is "
                      "float32, which returns x itself, or a function that renormalises its input, as F.embedding's "
                      "max_norm= does) writes into the caller's tensor; compute a new tensor instead "
                      "(`x = x - ...`, "
                      "`masked_fill`, `torch.where`, or work on `x.clone()`)")

    def _number_type_tells(self, fn: Callable, args: tuple, kwargs: dict) -> bool:
        """A call that raised, made again with one whole-number argument in
        the other type (0.0 as 0, 2 as 2.0): when that call does not raise,
        the code tells the two apart (`is 0`, isinstance, type()), and that is
        said. True when it was."""
        try:
            bound = inspect.signature(fn).bind(*args, **kwargs)
        except (TypeError, ValueError):
            return False
        for name, value in bound.arguments.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                    (isinstance(value, float) and not value.is_integer()):
                continue
            other = float(value) if isinstance(value, int) else int(value)
            again = inspect.BoundArguments(bound.signature, {**bound.arguments, name: other})
            copies = [v.detach().clone() if isinstance(v, torch.Tensor) else v for v in again.args]
            try:
                with refuse_delegation(self.fn_name, fn), contextlib.redirect_stdout(io.StringIO()):
                    guarded_call(fn, tuple(copies), dict(again.kwargs))
            except (Exception, LearnerTimeout):
                continue
            self.measured(f"the same call with {name}={other!r} ({type(other).__name__}) instead of {name}={value!r} "
                          f"({type(value).__name__}) does not raise: your code treats the two differently; compare "
                          f"numbers by value (`{name} == {other!r}`), not by identity (`is`) or by type")
            return True
        return False

    def _locate_raise(self, fn: Callable, args: tuple, kwargs: dict) -> None:
        """The place of the first wrong value a raising call reads (RAISE_LOCATORS), when one is found."""
        locator = RAISE_LOCATORS.get(self.fn_name)
        if locator is None or self.located is not None:
            return
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                self.located = locator(fn, args, kwargs)
        except Exception:  # noqa: BLE001: the tracer's own failure is never the learner's
            self.located = None

    def _stop_on_error(self, record: "CallRecord", on_error, error_hints) -> None:
        __tracebackhide__ = True
        err = record.error
        for pattern, bug in error_hints:
            if re.search(pattern, str(err)):
                self.diagnose(bug)
        hint = on_error(err) if on_error is not None else None
        if isinstance(hint, Evidence):  # a hint that says what kind of line it is goes where its kind goes
            {MEASURED: self.measured, CANDIDATES: self.candidates}.get(hint.kind, self.diagnose)(hint.text)
        elif hint:
            self.diagnose(hint)
        try:
            from ..trace import values_at_raise
            read, bound = values_at_raise(err, {**self.names, **self.axes}, record.sizes())
        except Exception:  # noqa: BLE001: the tracer's own failure is never the learner's
            read, bound = [], None
        for fact in read:
            self.measured(fact)
        if bound is not None and (self.located is None or self.located.kind == "raises"):
            self.located = bound
        sizes = self._name_sizes(str(err), record.sizes())
        if sizes:
            self.measured(sizes)
        if isinstance(err, CheckStopped):
            self.measured(str(err))
        # The row is printed with this failure only: a check that catches it (a probe) keeps its own table.
        row = Row(record.label(), False, note=f"raised {type(err).__name__}: see below")
        self._stop(f"{self.fn_name} raised {type(err).__name__}{learner_place(err)}: {first_line(err)}\n"
                   f"  Called with {record.called_with()}{record.for_row()}; it should return "
                   f"{self.expected_for(record.args, record.kwargs)}.",
                   learner_error=err, extra_row=row)

    def _expects_true_of(self, shapes: list | None, want: Any = None) -> bool:
        """`expects` can be true of a call: it names no sizes, or it names the
        shape of `want` (the right result of that call), or, with no `want`,
        it was written for calls of these input shapes (the first call's)."""
        if self.first_shapes is None or not re.search(r"\d", self.expects):
            return True
        wanted = [want] if isinstance(want, torch.Tensor) else list(want) if isinstance(want, tuple) else []
        if wanted and all(isinstance(w, torch.Tensor) for w in wanted):
            return all(str(tuple(w.shape)) in self.expects for w in wanted)
        return shapes == self.first_shapes

    def expected_for(self, args: tuple, kwargs: dict) -> str:
        """What a call on these inputs should return: `expects` where it is
        true of them (see _expects_true_of), else the reference's result on
        these very inputs, else `expects` said of the first call's inputs."""
        want = None
        reference = REFERENCES.get(self.fn_name)
        # Only on plain values: a module or a function among the inputs may be the learner's, run here untimed.
        plain = all(v is None or isinstance(v, (torch.Tensor, torch.Generator, int, float, bool, str))
                    for v in [*args, *kwargs.values()])
        if reference is not None and plain and re.search(r"\d", self.expects):
            copies = [v.detach().clone() if isinstance(v, torch.Tensor) else v for v in args]
            drawn = [(g, g.get_state()) for g in [*args, *kwargs.values()] if isinstance(g, torch.Generator)]
            try:
                with contextlib.redirect_stdout(io.StringIO()):
                    want = reference(*copies, **kwargs)
            except Exception:  # noqa: BLE001: a reference that cannot run these inputs says nothing of them
                want = None
            finally:
                for generator, state in drawn:  # the reference draws nothing the check's later calls would miss
                    generator.set_state(state)
        if self._expects_true_of(_input_shapes(args, kwargs), want):
            forward = re.fullmatch(r"an nn\.Module whose (forward\(.*?\)) returns (.+)", self.expects)
            called = forward and any(s is not None for s in _input_shapes(args, kwargs))  # an instance, not the class
            return f"{forward[2]} (a call of the module: its {forward[1]})" if called else self.expects
        words = _result_words(want)
        if words:
            return f"{words} (the reference's result for these inputs)"
        shapes = ", ".join(str(s) for s in self.first_shapes if s is not None)
        return f"{self.expects} for its first inputs (shapes {shapes}), whose shapes differ from these" if shapes \
            else self.expects

    def probe(self, fn: Callable, *args, **kwargs):
        """Call the learner's function for a measurement: None when it raises
        (the comparison rows report exceptions; a probe only explains). A
        probe gives back what the call changed in its inputs, as call() does,
        so the next probe reads the same inputs."""
        try:
            with refuse_delegation(self.fn_name, fn), contextlib.redirect_stdout(io.StringIO()):
                return measuring_call(fn, args, kwargs)
        except Delegation as err:
            self._stop(first_line(err), kind="delegated")
        except (Exception, LearnerTimeout):
            return None

    def _name_sizes(self, text: str, call_sizes: set[int] | None = None) -> str | None:
        """'in that error 10 = d_ff, 6 = d_model' for the sizes a shape error
        mentions that are the size of exactly one named axis (self.axes)
        and, when call_sizes is given, a size of that call's own inputs.
        A size that one shape of the error holds twice is not named: at
        least one of the two has another source ([3, 2, 2, 24] reshaping
        pairs of features), and nothing says which."""
        if not self.axes or not _SHAPE_ERROR.search(text):
            return None
        text = _COUNTED.sub("", text)
        numbers = []
        shapes = [shape for a, b in re.findall(r"\(([^()]*)\)|\[([^\[\]]*)\]", text)
                  for shape in re.split(r"\band\b", a or b)]  # "(6x10 and 6x10)": two shapes
        per_shape = [re.findall(r"(?<![\w.])(\d+)(?![\w.])", shape.replace("x", " ")) for shape in shapes]
        repeated = {n for found in per_shape for n in found if found.count(n) > 1}
        for n in (n for found in per_shape for n in found):
            owners = [name for name, size in self.axes.items() if size == int(n)]
            if (call_sizes is not None and int(n) not in call_sizes) or n in repeated:
                continue
            if len(owners) == 1 and int(n) > 1 and f"{n} = {owners[0]}" not in numbers:
                numbers.append(f"{n} = {owners[0]}")
        if not numbers:
            return None
        return f"in that error {', '.join(numbers)}" + (f"; {elements_asked(text)}" if elements_asked(text) else "")

    def explain_scale(self, what: str, got: Any, want: torch.Tensor, named: Mapping[str, float] | None = None) -> bool:
        """When got is exactly c · want (c != 1), say so with c named."""
        if not isinstance(got, torch.Tensor) or got.shape != want.shape:
            return False
        fit = fit_scale(got, want)
        if fit is None or fit[1] > 1e-4 or abs(fit[0] - 1) < 1e-3:
            return False
        self.diagnose(f"{what} is the right result scaled by {describe_factor(fit[0], named)}: drop that factor")
        return True

    def _stop(self, message: str, learner_error: BaseException | None = None, extra_row: Row | None = None, *,
              kind: str | None = None):
        """Print the table and raise the failure. kind: the Diagnosis kind of
        this stop, named by the caller ("not implemented", "delegated"); by
        default "raised" when the learner's code raised, else "stopped"."""
        __tracebackhide__ = True
        self.errors.append(message)
        self._print_table([*self.rows, extra_row] if extra_row else self.rows)
        if kind is None:
            kind = ("delegated" if type(learner_error).__name__ == "Delegation" else
                    "raised" if learner_error is not None else "stopped")
        rows = [*self.rows, extra_row] if extra_row else self.rows
        if kind == "raised" and self.located is None:
            from ..trace import locate_error
            try:
                self.located = locate_error(learner_error)
            except Exception:  # noqa: BLE001: the tracer's own failure is never the learner's
                self.located = None
        diagnosis = self.diagnosis(kind, rows=rows, stop=message.splitlines()[0],
                                   error=type(learner_error).__name__ if learner_error is not None else None)
        raise self._failure(f"{self.fn_name}: {message}", learner_error, diagnosis) from None

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
        known = known_sizes(want.shape, *(v.shape for _, v in self.last_call if isinstance(v, torch.Tensor)))
        if not isinstance(got, torch.Tensor):
            self.rows.append(Row(name, False, shape="-", note=f"returned {describe(got, known)}, expected a tensor"))
            hint = " (a missing `return`?)" if got is None else ""
            should = self.expects if self._expects_true_of(self.last_shapes, want) else describe(want, want.shape)
            self.diagnose(f"{self.fn_name} returned {describe(got, known)}{hint}; it should return {should}")
            return False
        shape_ok = tuple(got.shape) == tuple(want.shape)
        dtype_ok = got.dtype == dtype
        close = close_to(got, want, atol, rtol)
        row = Row(name, shape_ok and dtype_ok and close,
                  shape="ok" if shape_ok else f"{shown_shape(got.shape, known)} != {tuple(want.shape)}",
                  dtype="ok" if dtype_ok else f"{got.dtype} != {dtype}",
                  close=("ok" if close else "FAIL") if shape_ok else "-",
                  diff=format_diff(got, want) if shape_ok else "-")
        self.rows.append(row)
        if not row.ok and self.last_made is not None and self.last_made[0] is self.subject:
            self.wrong_calls.append((*self.last_made[1:], want))
        self.reading = self.read_from.setdefault(name, [])  # what the framework reads from this row's output
        try:
            if not shape_ok:
                explain_mismatch(self, name, got, want, atol, rtol)
            if row.ok and got.is_inference() and not want.is_inference():
                row.ok, row.close, row.note = False, "FAIL", "an inference tensor"
                self.measured("your result is an inference tensor (measured: .is_inference() is True): it was made under "
                              "torch.inference_mode(), and autograd refuses it later (training on it raises 'Inference "
                              "tensors cannot be saved for backward'); use torch.no_grad() in its place, whose results are "
                              "ordinary tensors")
            if shape_ok and not dtype_ok:
                explain_dtype(self, got, want, dtype, atol, rtol)
            if not row.ok and shape_ok:
                explain_mismatch(self, name, got, want, atol, rtol)
        finally:
            self.reading = None
        if not row.ok and variants:
            self.try_variants(row, got, variants, *variant_tolerance(atol, rtol, want), want=want)
        elif variants:
            self.refute(variants, want, atol, rtol)
        return row.ok

    def sizes_named(self) -> dict[int, list[str]]:
        """size -> where the last call's inputs have it (`x.shape[0]`, an int argument, `model.config.n_heads`, an
        axis all of a list's items share: `batches[i][1].shape[1]`), sizes above 1 only."""
        found: dict[int, list[str]] = {}

        def add(size, where):
            if isinstance(size, int) and not isinstance(size, bool) and size > 1 and where not in found.get(size, []):
                found.setdefault(size, []).append(where)
        for name, value in self.last_call:
            if isinstance(value, torch.Tensor):
                for axis, size in enumerate(value.shape):
                    add(int(size), f"{name}.shape[{axis}]")
            elif isinstance(value, int):
                add(value, f"`{name}`")
            elif isinstance(value, torch.nn.Module) and dataclasses.is_dataclass(getattr(value, "config", None)):
                for f in dataclasses.fields(value.config):
                    add(getattr(value.config, f.name), f"{name}.config.{f.name}")
            elif isinstance(value, (tuple, list)) and value:
                items = [tensors_named([("", v)]) for v in value]
                for i, (path, t) in enumerate(items[0]):
                    for axis, size in enumerate(t.shape):
                        if all(len(it) == len(items[0]) and it[i][1].dim() > axis and it[i][1].shape[axis] == size
                               for it in items):
                            add(int(size), f"{name}[i]{path}.shape[{axis}] (of every item)")
        return found

    def refute(self, variants: Mapping[str, Any], want: torch.Tensor, atol: float, rtol: float) -> None:
        """On a row the learner passed: the known bugs whose output would have
        failed it are refuted, and never named for another row."""
        for bug, wrong in variants.items():
            if bug in self.refuted:
                continue
            try:
                value = wrong() if callable(wrong) else wrong
            except Exception:  # a variant that cannot run here says nothing about it
                continue
            if isinstance(value, torch.Tensor) and tuple(value.shape) == tuple(want.shape) and \
                    not close_to(value, want, atol, rtol, equal_nan=True):
                self.refuted.add(bug)

    def try_variants(self, row: Row, got: torch.Tensor, variants: Mapping[str, Any], atol: float, rtol: float,
                     want: torch.Tensor | None = None) -> None:
        """Record which known wrong variants reproduce this failing row."""
        for bug in variants:
            self.offered[bug] = self.offered.get(bug, 0) + 1
        bugs = matching_variants(got, variants, atol=atol, rtol=rtol, want=want)
        self.reproduced.setdefault(row.name, []).extend(bugs)
        if bugs:
            row.note = "matches a known bug"
        for bug in bugs:
            self.votes[bug] = self.votes.get(bug, 0) + 1

    def require(self, name: str, ok: bool, failure: str = "", diagnosis: str | None = None) -> bool:
        """A property row (causality, sharing, invariance...) without tensors."""
        self.rows.append(Row(name, bool(ok), close="ok" if ok else "FAIL", note="" if ok else failure))
        if not ok and diagnosis:
            self.diagnose(diagnosis)
        return bool(ok)

    def diagnose(self, message: str, *, states: Iterable[str] = ()) -> None:
        """A named cause of the failure (printed as 'Likely bug: ...').
        states: known variants whose cause this line states too, with what
        was measured (the places it shows in): the cause is said once, by
        this line, not again by those variants."""
        if message not in self.diagnoses:
            self.diagnoses.append(message)
        self.read(message)
        for bug in states:
            self.said_by.setdefault(bug, message)

    def read(self, message: str) -> None:
        """An explainer that found again, in the row compare is reading, a
        cause already said: the row reads it too (see _restated)."""
        if self.reading is not None:
            self.reading.append(message)

    def diagnose_at(self, cause: str, place: Any, words: Callable[[list], str], *, states: Iterable[str] = ()) -> None:
        """One cause measured at one more place (a row's sizes, a cache):
        the cause is said on one line, words(every place found so far),
        which takes the place of the line said for the places before
        (states: as for diagnose)."""
        found = self.places.setdefault(cause, [])
        before = words(found) if found else None
        if place not in found:
            found.append(place)
        line = words(found)
        if before in self.diagnoses and line not in self.diagnoses:
            self.diagnoses[self.diagnoses.index(before)] = line
            self.said_by = {bug: line if said == before else said for bug, said in self.said_by.items()}
        self.diagnose(line, states=states)

    def measured(self, message: str) -> None:
        """A true measurement of the learner's output that names no bug by
        itself (printed as 'Measured: ...', before the likely bugs)."""
        if message not in self.facts:
            self.facts.append(message)

    def candidates(self, message: str) -> None:
        """A measurement and the causes it fits, none confirmed on the
        learner's code, each stated as a candidate (printed as 'Candidates:
        ...', after the facts and the place, before the likely bugs)."""
        line = Evidence(CANDIDATES, message).text  # refuses a line that does not call its causes candidates
        if line not in self.candidate_lines:
            self.candidate_lines.append(line)
        self.read(line)

    def upstream(self, fn: Callable, references: Mapping[str, Callable], rerun: Callable[[], bool],
                 labels: Mapping[str, str] | None = None) -> bool:
        """Tell a bug in this exercise from one in an earlier answer it calls.

        references: {earlier exercise's name: a correct implementation};
        rerun: recomputes this check's comparison, True when it passes.
        The names fn's globals bind are replaced by the references (one at a
        time, then all together) and rerun; if that passes, the earlier
        answer is named as the cause. Globals are always restored."""
        if self.passed:
            return False
        spaces = [g for g in globals_of(fn)]
        present = [n for n in references if any(n in g and g[n] is not references[n] for g in spaces)]
        if not present:
            return False
        labels = labels or {}

        def passes_with(names) -> bool:  # names=[]: the learner's own answers, nothing replaced
            saved = [(g, n, g[n]) for g in spaces for n in names if n in g]
            try:
                for g, n, _ in saved:
                    g[n] = references[n]
                with contextlib.redirect_stdout(io.StringIO()):
                    return bool(rerun())
            except Exception:
                return False
            finally:
                for g, n, value in saved:
                    g[n] = value

        if passes_with([]):  # the rerun does not reproduce this failure, so it cannot tell the cases apart
            return False
        culprit = next(([n] for n in present if passes_with([n])), None)
        if culprit is None and len(present) > 1 and passes_with(present):
            culprit = present
        if culprit is None:  # the bug is in this exercise itself: the other diagnoses speak
            return False
        names = " and ".join(f"`{n}`" + (f" ({labels[n]})" if n in labels else "") for n in culprit)
        self.diagnoses.insert(0, f"{names} {'fails' if len(culprit) == 1 else 'fail'} {'its' if len(culprit) == 1 else 'their'} "
                                 f"own check; fix it first: with a correct version in its place {self.fn_name} passes")
        return True

    def named_variants(self) -> list[str]:
        """Known bugs that reproduce every failing row they were tried on,
        the ones explaining the most rows first."""
        full = [bug for bug, n in self.votes.items() if n == self.offered.get(bug, n) and bug not in self.diagnoses
                and self.said_by.get(bug) not in self.diagnoses]
        # Several that the failing rows cannot tell apart: those a passing row refutes are dropped (a variant
        # whose text covers more than its formula, the only one left, is kept).
        kept = [bug for bug in full if bug not in self.refuted] or full
        return sorted(kept, key=lambda bug: -self.votes[bug])

    def likely_bugs(self) -> list[str]:
        named = self.named_variants()
        return ([d for d in self.diagnoses if d not in self._restated(named)]
                + [bug for bug in named if not isinstance(bug, CandidatesVariant)])

    def candidates_said(self) -> list[str]:
        """The lines of candidates: those a hint gave, then the named variants that are candidates themselves."""
        named = self.named_variants()
        offered = [bug for bug in named if isinstance(bug, CandidatesVariant)]
        restated = self._restated(named)  # read from a row a named variant reproduces: the variant says it
        return [c for c in self.candidate_lines if c not in restated] + \
            [str(bug) for bug in offered if bug not in self.candidate_lines]

    def _restated(self, named: list[str]) -> set[str]:
        """The causes the framework read from a row's output (its axes, its
        dtype, the part of it kept) where a named known variant reproduces
        that whole output: the variant states that same cause, so it is said
        once, by the variant. A line also read from a row no named variant
        reproduces is kept."""
        kept = {row for row, bugs in self.reproduced.items() if set(bugs) & set(named)}
        restated = {d for row in kept for d in self.read_from.get(row, [])}
        return restated - {d for row, lines in self.read_from.items() if row not in kept for d in lines}

    def locate_with(self, locator: Callable[[], Any], *, last: bool = False) -> None:
        """locator() -> trace.Located or None, run if the check fails (on the
        visible check's own inputs): the learner's first wrong line. A check
        of several functions registers one per function; the first that
        finds a line is used (a right function's locator finds none). last:
        tried after every other (one that reads the learner's run alone,
        where the others set it beside the reference's)."""
        self.locators.append((last, locator))

    def _locate(self) -> None:
        for _, locator in sorted(self.locators, key=lambda pair: pair[0]):
            if self.located is not None:
                return
            try:
                with contextlib.redirect_stdout(io.StringIO()):
                    self.located = locator()
            except Exception:  # noqa: BLE001: the tracer's own failure is never the learner's
                self.located = None

    def diagnosis(self, kind: str = "failed", *, rows: list[Row] | None = None, stop: str | None = None,
                  error: str | None = None) -> Diagnosis:
        """This check's failure as fields."""
        rows = self.rows if rows is None else rows
        return Diagnosis(self.fn_name, kind, [r.name for r in rows], [r.name for r in rows if not r.ok],
                         dict(self.regime) if self.regime else None,
                         self.located.to_dict() if self.located is not None else None,
                         self.named_variants(), list(reversed(self.likely_bugs())), list(self.facts), error, stop,
                         candidates=self.candidates_said())

    # -- verdict ---------------------------------------------------------------
    @property
    def passed(self) -> bool:
        return not self.errors and all(r.ok for r in self.rows)

    def finish(self) -> None:
        __tracebackhide__ = True
        self._print_table()
        if self.passed:
            notes = self._run_hooks(PASS_HOOKS)
            print(f"PASS {self.fn_name}: {len(self.rows)}/{len(self.rows)} checks" + "".join(f"; {n}" for n in notes))
            return
        if not self.likely_bugs() and self.wrong_calls:
            say_notebook_name(self, self.subject, self.wrong_calls)
        self._locate()
        diagnosis = self.diagnosis()
        head = diagnosis_text.headline(diagnosis)
        if not diagnosis_text.lines(diagnosis) and not any(r.note for r in self.rows if not r.ok):
            head += ("\n  Compare your code with the formula in the exercise text; the rows above show "
                     "which inputs give a different result.")
        raise self._failure(head, diagnosis=diagnosis)

    def _failure(self, head: str, learner_error: BaseException | None = None,
                 diagnosis: Diagnosis | None = None) -> CheckFailed:
        """The CheckFailed to raise: `head` (the failure's first line, then
        FAIL_HOOKS' notes as 'Saved:' lines, then the rest of head), then the
        diagnosis's lines (CheckFailed renders them)."""
        first, _, rest = head.partition("\n")
        notes = "".join(f"\n  Saved: {n}" for n in self._run_hooks(FAIL_HOOKS))
        return CheckFailed(learner_error=learner_error, diagnosis=diagnosis,
                           head=first + notes + (f"\n{rest}" if rest else ""))

    def _run_hooks(self, hooks: list) -> list[str]:
        """Each hook's note (a hook returns a string or None) for self.subject."""
        notes = []
        for hook in hooks:
            try:
                note = hook(self.subject)
            except Exception as err:  # a helper's hook must never cost the learner the exercise
                note = (f"(note: {getattr(hook, '__name__', 'a hook')} after {self.fn_name} failed: "
                        f"{type(err).__name__}: {first_line(err)})")
            if isinstance(note, str) and note:
                notes.append(note)
        return notes

    def _print_table(self, rows: list[Row] | None = None) -> None:
        rows = self.rows if rows is None else rows
        if not rows:
            return
        width = max(len("check"), *(len(r.name) for r in rows))
        # each column at least as wide as its widest cell, so a "(2, 3) != (2, 3, 5)" shape keeps the others aligned
        columns = [(title, key, max(least, *(len(getattr(r, key) or "-") for r in rows)))
                   for title, key, least in (("shape", "shape", 6), ("dtype", "dtype", 6), ("allclose", "close", 8),
                                             ("max|diff|", "diff", 9))]
        print(f"{self.fn_name}:")
        print(f"  {'check':<{width}}  " + " ".join(f"{title:<{w}}" for title, _, w in columns))
        for r in rows:
            line = f"  {r.name:<{width}}  " + " ".join(f"{getattr(r, key) or '-':<{w}}" for _, key, w in columns)
            print(line + (f"  <- {r.note}" if r.note else ""))


