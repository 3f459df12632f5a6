"""When the learner's code raises, what it was reading, measured, and the
line that made it: a value of a type the error names (a tuple from a
trailing comma, followed to the `self.eps` the caller set; a module
instance), log-probabilities handed to multinomial, positional arguments
landing in another parameter, a slice taken with other bounds before the
raising line, an argument the code tells apart by its type (`is 0`). Also
the measured facts of a wrong result that raises nothing: parameters in
another dtype, a model whose own flag says one mode while its submodules
keep the other, values rounded to whole numbers. Each is shown firing on a
planted mistake and quiet on the right code."""
from __future__ import annotations

import linecache
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import tinylm
from autograder.checks import check_rms_norm_module, check_sample_next, contracts, trace
from autograder.checks.core import Check, mode_split, parameter_dtypes
from autograder.checks.rope import apply_rope_steps

from ..helpers import check_failure, diagnosis_texts


def learner_code(source: str, name: str) -> dict:
    """Run `source` as a notebook cell named `name` (its lines kept, as IPython keeps a cell's): its namespace."""
    filename = f"<cell {name}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"torch": torch, "F": F, "nn": nn, "math": __import__("math")}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)  # `is 0` is the planted mistake
        exec(compile(source, filename, "exec"), namespace)
    return namespace


RMS_MODULE = '''
class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps{comma}

    def forward(self, x):
        return scaled(x, self.weight, self.eps)


def scaled(x, weight, eps):
    return weight * (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)
'''


def test_a_trailing_comma_is_measured_and_followed_to_the_line_that_set_it():
    right = learner_code(RMS_MODULE.format(comma=""), "rms-right")["RMSNorm"]
    assert check_failure(check_rms_norm_module, right) is None
    wrong = learner_code(RMS_MODULE.format(comma=","), "rms-comma")["RMSNorm"]
    err = check_failure(check_rms_norm_module, wrong)
    assert "`eps` is the tuple (0.001,)" in diagnosis_texts(err)
    located = err.diagnosis.located
    assert located["line"] == 6 and located["code"] == "self.eps = eps," and located["kind"] == "bound"


def test_a_module_instance_where_a_tensor_was_meant_is_named_with_its_line():
    ns = learner_code("def gated(x, w):\n    gate = nn.SiLU(x @ w)\n    return gate * x\n", "silu-class")
    with pytest.raises(TypeError) as raised:
        ns["gated"](torch.ones(2, 2), torch.ones(2, 2))
    facts, place = trace.values_at_raise(raised.value)
    assert facts == ["at the line that raised, `gate` is an instance of SiLU (an nn.Module)"]
    assert place.line == 2 and place.kind == "bound"


def test_log_probabilities_at_a_raise_are_measured_and_probabilities_are_not_remarked():
    ns = learner_code("def draw(logits):\n    probs = F.log_softmax(logits, -1)\n"
                      "    return torch.multinomial(probs, 1)\n", "log-probs")
    with pytest.raises(RuntimeError) as raised:
        ns["draw"](torch.randn(3, 5, generator=torch.Generator().manual_seed(0)))
    facts, _ = trace.values_at_raise(raised.value)
    assert len(facts) == 1 and "log-probabilities" in facts[0]
    quiet = learner_code("def draw(logits):\n    probs = F.softmax(logits, -1)\n"
                         "    return torch.multinomial(probs, 1, replacement=False) + None\n", "probs")
    with pytest.raises(TypeError) as raised:
        quiet["draw"](torch.randn(3, 5, generator=torch.Generator().manual_seed(0)))
    assert trace.values_at_raise(raised.value)[0] == []  # ordinary probabilities: nothing to say about them
    masked = learner_code("def mix(scores, v):\n    scores = scores.masked_fill(scores < 0, float('-inf'))\n"
                          "    return scores @ v\n", "masked")
    with pytest.raises(RuntimeError) as raised:
        masked["mix"](torch.randn(3, 4, generator=torch.Generator().manual_seed(0)), torch.ones(5, 2))
    assert trace.values_at_raise(raised.value)[0] == []  # -inf by design, and a shape error that does not speak of it


def test_positional_arguments_landing_in_another_parameter_locate_the_calling_line():
    ns = learner_code("def attend(x, cache, layer_idx):\n    return x + cache.length + layer_idx\n\n"
                      "def block(x, cache, layer_idx):\n    return attend(x, layer_idx, cache)\n", "crossed")
    with pytest.raises(AttributeError) as raised:
        ns["block"](torch.ones(1), None, 0)
    found = trace.locate_error(raised.value)
    assert found.line == 5 and found.kind == "order"
    assert "`layer_idx` lands in `cache` (= 0)" in found.facts[0]
    ns = learner_code("def attend(x, cache, layer_idx):\n    return x + cache.length + layer_idx\n\n"
                      "def block(x, cache, layer_idx):\n    return attend(x, cache, layer_idx)\n", "in-order")
    with pytest.raises(AttributeError) as raised:
        ns["block"](torch.ones(1), None, 0)
    assert trace.locate_error(raised.value).kind == "raises"  # in order: only where it raised


def test_a_slice_with_other_bounds_before_a_raise_is_placed_with_the_line_that_bound_them():
    ns = learner_code("def rope(x, cos, sin, start_pos=0):\n    T = cos.shape[0]\n"
                      "    cos = cos[start_pos:start_pos + T]\n    sin = sin[start_pos:start_pos + T]\n"
                      "    x1, x2 = x.chunk(2, dim=-1)\n"
                      "    return x * cos + torch.cat((-x2, x1), dim=-1) * sin\n", "table-rows")
    cos, sin = tinylm.rope_cache(8, 21)
    x = torch.randn(2, 3, 5, 8, generator=torch.Generator().manual_seed(1))
    found = contracts.locate_call(ns["rope"], apply_rope_steps, (x, cos, sin, 0))
    assert (found.line, found.also, found.kind) == (3, 2, "sizes")
    assert "[0:21]" in found.facts[0] and "[0:5]" in found.facts[0]


SAMPLER = '''
def sample_next(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if temperature {test} 0:
        return logits.argmax(-1)
    probs = torch.softmax(logits / temperature, dim=-1)
    if top_k is not None:
        kth = probs.topk(top_k, dim=-1).values[..., -1:]
        probs = probs.masked_fill(probs < kth, 0)
    if top_p is not None:
        ordered, order = probs.sort(dim=-1, descending=True)
        drop = ordered.cumsum(-1) - ordered >= top_p * ordered.sum(-1, keepdim=True)
        probs = probs.scatter(-1, order, ordered.masked_fill(drop, 0))
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)
'''


def test_an_argument_told_apart_by_its_type_is_measured_and_the_guess_from_the_error_text_is_dropped():
    assert check_failure(check_sample_next, learner_code(SAMPLER.format(test="=="), "equal")["sample_next"]) is None
    err = check_failure(check_sample_next, learner_code(SAMPLER.format(test="is"), "identity")["sample_next"])
    said = diagnosis_texts(err)
    assert "temperature=0 (int) instead of temperature=0.0 (float) does not raise" in said
    assert not err.diagnosis.likely_bugs  # the error's text would have guessed "temperature 0 must be greedy"


def test_parameters_in_another_dtype_than_a_fresh_modules_are_named():
    assert parameter_dtypes(nn.Linear(3, 2)) is None
    said = parameter_dtypes(nn.Linear(3, 2).half())
    assert said.startswith("`weight` is stored in float16") and "float32" in said


def test_a_model_whose_own_flag_alone_was_set_is_measured_on_every_module():
    model = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5))
    model.eval()
    assert mode_split(model) is None
    model.training = True  # the top flag only
    said = mode_split(model)
    assert "train mode" in said and "2 of its submodules" in said
    model.train()
    assert mode_split(model) is None


@pytest.mark.parametrize("rounding, words", [(torch.floor, "rounded down"), (torch.round, "rounded")])
def test_values_rounded_to_whole_numbers_are_said(rounding, words):
    want = torch.tensor([3.18, 2.71, 5.5], dtype=torch.float64)
    chk = Check("f")
    assert not chk.compare("loss", rounding(want), want)
    assert any(f"your values are the right ones {words} to whole numbers" in fact for fact in chk.facts)
    other = Check("f")
    assert not other.compare("loss", want + 0.3, want)
    assert not any("whole numbers" in fact for fact in other.facts)
