"""The real-weights cells of notebooks 05, 06 and 08 are tests, not
demonstrations: each compares the learner's piece with tinylm's on SmolLM2's
weights, with a batch of two prompts, and must fail, naming where, when that
piece is wrong. Each cell runs in the namespace of its notebook's setup and
solution answers, first as it is (it passes), then with a wrong piece in the
learner's place; the wrong pieces mix up the rows of a batch or keep other
tokens, mistakes a one-prompt test would not see.

Without SmolLM2's weights these tests skip, unless TINYLM_REQUIRE_PRETRAINED=1 (CI)."""
from __future__ import annotations

import os

import pytest
import torch

from autograder import course
from autograder.authoring.gates import exercise_namespace
from autograder.checks import pitfalls
from autograder.checks.learner_model import learner_cache, require_agreement
from autograder.checks.real_model import load_into, skipped_init
from autograder.notebook_format import read
from tinylm import pretrained

from ..helpers import run_cell as run

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", autouse=True)
def weights():
    reason = pretrained.why_unavailable()
    if reason is not None:
        if os.environ.get("TINYLM_REQUIRE_PRETRAINED") == "1":
            pytest.fail(f"TINYLM_REQUIRE_PRETRAINED=1, but: {reason}")
        pytest.skip(reason)


def cell(assignment: str, text: str) -> str:
    [source] = [c.source for c in read(course.source_notebook(assignment)).cells if c.cell_type == "code" and text in c.source]
    return source


def with_real_weights(ns: dict, decoder_class) -> dict:
    """The names the real-weights cells find after the notebook's loading cell: SmolLM2 in `decoder_class`
    (`yours`: the cells treat it as the learner's decoder)."""
    with skipped_init():
        model = decoder_class(pretrained.pretrained_config())
    load_into(model, pretrained.pretrained_state_dict())
    ns.update(why=None, real=model.eval(), bpe=pretrained.load_tokenizer(), c=model.config, yours=True,
              require_agreement=require_agreement, learner_cache=learner_cache, skipped_init=skipped_init)
    return ns


def rows_mixed_up(decoder_class):
    """The decoder, with every row of a batch given the first row's logits."""
    class RowsMixedUp(decoder_class):
        def forward(self, idx, cache=None):
            logits = super().forward(idx, cache=cache)
            return logits[:1].expand_as(logits)
    return RowsMixedUp


def test_notebook_05s_batch_comparison_fails_for_a_decoder_that_mixes_up_rows():
    source = cell("05_swiglu", "the same next token at every position of both prompts")
    ns = exercise_namespace("05_swiglu")
    right = run(source, with_real_weights(ns, ns["Transformer"]))
    assert "both prompts: True" in right and "CheckFailed" not in right, right
    ns = exercise_namespace("05_swiglu")
    wrong = run(source, with_real_weights(ns, rows_mixed_up(ns["Transformer"])))
    assert "prompt 1, after" in wrong and "yours predicts" in wrong, wrong
    assert "CheckFailed" in wrong and "Likely bug: your decoder (exercise 4)" in wrong, wrong


def test_notebook_06s_decoding_comparison_fails_for_a_loop_that_feeds_one_row():
    source = cell("06_kv_cache", "your decoding gives tinylm's")
    ns = exercise_namespace("06_kv_cache")
    right = run(source, with_real_weights(ns, ns["tinylm"].Transformer))
    assert "for both prompts: True" in right, right
    ns = exercise_namespace("06_kv_cache")
    solution = ns["generate_greedy"]

    def first_row_for_all(model, prompt, max_new_tokens, cache):  # decodes prompt 0 and copies it to every row
        return solution(model, prompt[:1], max_new_tokens, learner_cache(model, 1)).expand(len(prompt), -1)
    ns["generate_greedy"] = first_row_for_all
    wrong = run(source, with_real_weights(ns, ns["tinylm"].Transformer))
    assert "prompt 1:" in wrong and "first difference at new token" in wrong, wrong
    assert "CheckFailed" in wrong and "Likely bug: your generate_greedy" in wrong, wrong


@pytest.mark.parametrize("name, wrong", [("top_k_filter", pitfalls.top_k_off_by_one),
                                         ("top_p_filter", pitfalls.top_p_drops_crossing)])
def test_notebook_08s_filter_comparison_fails_for_a_wrong_filter(name, wrong):
    source = cell("08_sampling", "your filters keep what tinylm's keep")
    ns = exercise_namespace("08_sampling")
    right = run(source, with_real_weights(ns, ns["tinylm"].Transformer))
    assert "on real distributions: True" in right and "differs" not in right, right
    ns = exercise_namespace("08_sampling")
    ns[name] = wrong
    output = run(source, with_real_weights(ns, ns["tinylm"].Transformer))
    assert "differs at" in output and "yours keeps" in output, output
    assert "CheckFailed" in output and "Likely bug: your top_k_filter, top_p_filter or sample_next" in output, output


def test_a_batch_of_two_is_what_makes_the_rows_bug_visible():
    """The control: on one prompt the row mix-up of the first test changes nothing."""
    ns = exercise_namespace("05_swiglu")
    ids = torch.tensor([pretrained.load_tokenizer().chat_ids("What is the capital of France?")])
    wrong = with_real_weights(ns, rows_mixed_up(ns["Transformer"]))["real"]
    right = with_real_weights(exercise_namespace("05_swiglu"), ns["Transformer"])["real"]
    with torch.no_grad():
        assert torch.equal(wrong(ids), right(ids))
