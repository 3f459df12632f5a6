"""What fresh27's arrival reading found (55 mistakes written without reading
the checks: right routes of the learner's own with a mistake later in them,
look-alike mistakes, inputs the exercises promise that their examples do not
show, public bugs). Each test runs one mistake through its notebook's check
and holds the message to what the code does."""
from __future__ import annotations

from .test_printed_lines_true import _line, _message


def test_an_extra_rotation_of_the_values_is_set_beside_no_reference_call():
    # the reference's q * cos is made by the learner's own rotation of q: the rotation of v stands in for nothing
    where = _line(_message("fresh27", "04", "rotary_attention", "v = apply_rope(v, cos, sin, start_pos)"), "Where:")
    assert "the first line whose value the reference never computes" in where
    assert "another's place" not in where and "the reference's mul" not in where


def test_f_rms_norm_without_its_eps_is_measured_at_the_machine_epsilon():
    likely = _line(_message("fresh27", "02", "RMSNorm", "return F.rms_norm(x, (x.shape[-1],), self.weight)"),
                   "Likely bug:")
    assert "eps is the machine epsilon of the input's dtype" in likely and "self.eps" in likely
