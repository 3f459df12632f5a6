"""A check speaks of the learner's values in the grader's words only
(autograder.learner_values): kinds, dtypes, sizes the reference knows or
small ones; never a number, text, key, class name or length the learner's
code chose. Each value below carries a marker; no check message, table or
diagnosis may show it."""
from __future__ import annotations

import contextlib
import io
import json
import re

import pytest
import torch
from torch import nn

from autograder.checks import check_attention_flops, check_causal_attention
from autograder.checks.core import CheckFailed
from autograder.learner_values import MAX_SHOWN_SIZE, describe, known_sizes, shown_shape

NUMBER = 6023301422529          # its digits, and any run of 7 of them, must never be shown
SIZE = 917263                   # an axis size no input has


class MarkerObject9173:
    def __repr__(self):
        return "MARKER-repr"


class MarkerModule9173(nn.Module):
    def forward(self, x):
        return x


def _values() -> dict[str, object]:
    return {"int": NUMBER, "float": 0.6023301422529, "str": "MARKER-str", "bytes": b"MARKER-bytes",
            "list": [NUMBER, "MARKER-list"], "dict": {"MARKER-key": NUMBER},
            "tuple of tensors": (torch.zeros(0, SIZE), torch.zeros(3, 2)), "tensor of a chosen shape": torch.zeros(0, SIZE),
            "None": None, "object": MarkerObject9173(), "module": MarkerModule9173(), "long list": list(range(SIZE % 97))}


def _markers() -> list[str]:
    digits = str(NUMBER)
    return ["MARKER", "9173", str(SIZE), *(digits[i:i + 7] for i in range(len(digits) - 6))]


def _shown(text: str) -> list[str]:
    """The markers in text, digits grouped with , or _ read as one number."""
    text = re.sub(r"(?<=\d)[,_](?=\d)", "", text)
    return [m for m in _markers() if m in text]


@pytest.mark.parametrize("kind", list(_values()))
def test_describe_names_the_kind_and_never_the_content(kind):
    text = describe(_values()[kind])
    assert not _shown(text), (kind, text)


def test_describe_says_what_the_grader_knows():
    assert describe(7) == "an int" and describe(True) == "a bool" and describe(None) == "None"
    assert describe((torch.zeros(2, 3), 1)) == "a tuple of 2 items"
    assert describe(list(range(100))) == f"a list of more than 8 items"
    assert describe(nn.Linear(2, 3)) == "a Linear module"
    assert describe(MarkerModule9173()) == "a module of the learner's own class"
    assert describe(torch.zeros(2, 100, dtype=torch.float64), known_sizes((2, 100))) == \
        "a torch.float64 tensor of shape (2, 100)"
    assert shown_shape((2, MAX_SHOWN_SIZE + 1)) == "(2, ?)"
    assert shown_shape((6, 4), known_sizes((2, 3, 4))) == "(6, 4)", "a merged (2, 3) axis is a size the reference knows"


def _failure_text(check, fn) -> str:
    """Everything a failing check shows: its printed table, its message and its diagnosis fields."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(CheckFailed) as failed:
        check(fn)
    diagnosis = failed.value.diagnosis.to_dict() if getattr(failed.value, "diagnosis", None) else {}
    return "\n".join([out.getvalue(), str(failed.value), json.dumps(diagnosis)])


@pytest.mark.parametrize("kind", list(_values()))
def test_a_check_shows_nothing_a_learners_return_value_chose(kind):
    value = _values()[kind]
    text = _failure_text(check_causal_attention, lambda q, k, v: value)
    assert not _shown(text), f"{kind}: {_shown(text)} in\n{text}"
    assert ("(0, ?)" if isinstance(value, torch.Tensor) else "returned") in text, text


def test_a_dict_check_shows_neither_the_learners_numbers_nor_its_keys():
    chosen = {"qkv_proj": NUMBER, "scores": NUMBER + 1, "mix": 3, "out_proj": 4}
    text = _failure_text(check_attention_flops, lambda *args: chosen)
    assert not _shown(text), text
    text = _failure_text(check_attention_flops, lambda *args: {"MARKER-key": 1, "scores": 2, "mix": 3})
    assert not _shown(text) and "'qkv_proj'" in text, text


def test_a_learners_exception_in_the_recheck_keeps_only_bounded_library_messages():
    from autograder.grading.recheck.parent import LEARNER_MESSAGE_WITHHELD, input_sizes, learner_exception
    sizes = input_sizes([torch.zeros(2, 3, 100), 4])
    honest = "mat1 and mat2 shapes cannot be multiplied (6x100 and 4x4)"
    forged = f"mat1 and mat2 shapes cannot be multiplied (6x100 and {str(NUMBER)[:7]}x4)"
    assert str(learner_exception("RuntimeError", honest, None, sizes)) == honest
    assert str(learner_exception("RuntimeError", forged, None, sizes)) == LEARNER_MESSAGE_WITHHELD
    raised = learner_exception("ValueError", f"MARKER {NUMBER}", None, sizes)
    text = _failure_text(check_causal_attention, lambda q, k, v: (_ for _ in ()).throw(raised))
    assert not _shown(text), text
