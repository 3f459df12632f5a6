"""What fresh19's arrival reading found (66 mistakes written without reading
the checks, leaning on state kept between calls, sizes at the edges and
numerics): five passed their check, and two printed a line untrue of the
code. Each test runs one mistake through its notebook's check and holds the
message to what the code does, or holds a right answer written another way
to a pass."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from autograder import checks
from benchmarks import bench_diagnostics
from benchmarks.mutations import SETS

from .test_printed_lines_true import _line, _message


def test_a_decoder_that_feeds_its_last_token_back_is_caught_by_its_forward_calls():
    likely = _line(_message("fresh19", "06", "generate_greedy", "# ready for the next step"), "Likely bug:")
    assert "the last new token is fed back to the model (measured: 7 forward calls for max_new_tokens = 6" in likely


def test_a_sampler_that_reseeds_the_callers_generator_is_caught_by_two_calls_in_a_row():
    likely = _line(_message("fresh19", "08", "sample_next", "generator.manual_seed(generator.initial_seed())"),
                   "Likely bug:")
    assert "sets the generator it is given back to one point of its stream at every call" in likely
    assert "leave it in the same state" in likely


def test_a_squeeze_that_takes_the_batch_axis_of_one_prompt_is_caught_and_placed():
    message = _message("fresh19", "08", "generate", "[:, -1:].squeeze()")
    assert "greedy, a batch of one (1x4)" in message
    assert "line 10 of your generate" in _line(message, "Where:")


def test_counts_kept_from_an_earlier_call_are_named_by_the_text_they_came_from():
    likely = _line(_message("fresh19", "10", "bigram_nll", "_counts=[]"), "Likely bug:")
    assert "scores val under the counts of an earlier call's train" in likely


def _message_of(notebook: str, cell: str, why: str) -> str:
    """The failure message of the one fresh19 mistake of `cell` whose account holds `why` (its edit is not
    told apart by its text)."""
    found = [m for m in SETS["fresh19"]()[notebook] if m.cell == cell and why in m.why]
    assert len(found) == 1, f"fresh19 {notebook} {cell}: {len(found)} mistakes say {why!r}"
    message = bench_diagnostics.run_mutation(notebook, found[0], bench_diagnostics.notebook_cells(notebook)).message
    assert message, "the check passed the mistake"
    return message


def test_rope_tables_kept_without_theta_are_not_said_to_ignore_theta():
    likely = _line(_message_of("04", "rope_cache", "mutable default dict"), "Likely bug:")
    assert "theta is ignored" not in likely and "tables kept from an earlier call" in likely
    ignored = _line(_message("default", "04", "rope_cache", "10000.0 ** ("), "Likely bug:")
    assert ignored.startswith("Likely bug: theta is ignored") and "head_dim=10, max_seq_len=15 too" in ignored


def test_a_head_tied_by_copying_is_not_told_its_logits_differ():
    message = _message_of("05", "Transformer", "ties by copying")
    assert "the logits differ" not in message
    assert "the head is not tied" in _line(message, "Likely bug:")


def test_keys_and_values_exchanged_are_named_from_the_output():
    likely = _line(_message("fresh19", "07", "gqa_attention", "repeat_kv(v, n_rep), repeat_kv(k, n_rep)"),
                   "Likely bug:")
    assert "keys and values exchanged" in likely


def test_attention_that_rotates_q_and_k_from_position_0_passes_in_every_dtype():
    def rotary_attention(q, k, v, cos, sin, start_pos=0):
        from tinylm import apply_rope, causal_attention
        return causal_attention(apply_rope(q, cos, sin), apply_rope(k, cos, sin), v)
    checks.check_rotary_attention(rotary_attention)


def test_a_sampler_drawing_on_from_its_generator_passes_the_two_calls():
    def sample_next(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
        if temperature == 0:
            return logits.argmax(-1)
        logits = logits / temperature
        if top_k is not None:
            kth = logits.topk(min(top_k, logits.shape[-1]), dim=-1).values[..., -1:]
            logits = logits.masked_fill(logits < kth, float("-inf"))
        if top_p is not None:
            order = logits.sort(dim=-1, descending=True)
            mass = order.values.softmax(-1).cumsum(-1)
            drop = mass - order.values.softmax(-1) >= top_p
            logits = logits.scatter(-1, order.indices, order.values.masked_fill(drop, float("-inf")))
        return torch.multinomial(F.softmax(logits, dim=-1), 1, generator=generator).squeeze(-1)
    checks.check_sample_next(sample_next)


def test_a_mask_kept_on_the_module_from_an_earlier_step_is_named_by_its_attribute():
    likely = _line(_message("fresh19", "06", "attention_step", "attn.step_mask = "), "Likely bug:")
    assert "the mask your code keeps on the attention module as attn.step_mask" in likely
    assert "build the mask at every call" in likely
