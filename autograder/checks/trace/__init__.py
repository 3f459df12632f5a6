"""Where a wrong answer goes wrong: the first line of the learner's code
whose value the reference never computes. In layers, each importing only
those before it:

  record  runs a function under a recorder and keeps every torch call's
          values and the learner's line that made it (Trace, record,
          record_learner, record_lines);
  align   sets the learner's values against the reference's (Values,
          Analysis: which values are matched, good, and the frontier);
  rounding finds, for a step that fails, an earlier value matched only
          up to a float16 / bfloat16 detour's rounding (rounded_before);
  kinds   tells which kind of place a call is: a right value in another's
          place, a value made wrongly, right numbers in another shape, steps
          taken in another order (made_wrong, relaid, taken_later_here);
  steps   the reference's steps between a learner's value and the call
          that reads it there (steps_between);
  blame   which call to blame for the first wrong value, and how it
          went wrong (blame_of);
  explain names the place of the first wrong value and what is said about
          it (Located, locate, locate_numbers, locate_grad_cut);
  numbers the earlier line binding a Python number the located line
          reads, when another number there is measured to make the result
          right (locate_bound_number);
  bound   the earlier line binding a value a raising line reads, where
          the error shows it (a size, nan, a dtype);
  raised  the same for a call that raised (locate_raise, locate_error,
          values_at_raise);
  dtypes  where a result's dtype goes wrong: a line making a tensor in
          another dtype, the first step leaving the wanted one, a
          detour through float16 or bfloat16, a tensor made in the
          caller's default dtype (locate_dtype, locate_promotion,
          locate_detour, locate_made_in_default);
  plain   a trace as plain data, for the grader's jailed recheck.

Callers use the names below, through this package (`trace.locate(...)`)."""
from __future__ import annotations

from ...diagnosis_record import KIND_WORDS  # noqa: F401
from .record import (LEAF, MAX_CODE, MAX_ELEMENTS, MAX_OPS, Lines, Op, Recorder, Trace, home_code, op_name,  # noqa: F401
                     record, record_learner, record_lines, source_line, tensors_in)
from .align import Analysis, Values, size_one_axis  # noqa: F401
from .explain import Located, line_making, locate, locate_grad_cut, locate_numbers  # noqa: F401
from .numbers import locate_bound_number  # noqa: F401
from .raised import locate_error, locate_raise, values_at_raise  # noqa: F401
from .dtypes import locate_detour, locate_dtype, locate_made_in_default, locate_promotion  # noqa: F401
from .plain import from_plain_trace, plain_trace  # noqa: F401
