"""autograder/checks/real_bugs.py: the machinery that injects the seed's
bugs into a model, measured on a small random tinylm model (the notebook
runs it on SmolLM2). No numbers are asserted: that each bug changes what it
should change, leaves alone what it cannot reach, and is undone afterwards."""
from __future__ import annotations

import math

import pytest
import torch

import tinylm
import tinylm.attention
from autograder.checks import real_bugs


@pytest.fixture(scope="module")
def rows_and_model():
    torch.manual_seed(0)
    config = tinylm.ModelConfig(vocab_size=64, d_model=48, n_layers=2, n_heads=6, n_kv_heads=2, max_seq_len=64)
    model = tinylm.Transformer(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.mul_(6)  # matrices 6x an initialisation's: sharper distributions, so greedy answers react to a bug
    gen = torch.Generator().manual_seed(1)
    prompt = torch.randint(64, (12,), generator=gen).tolist()
    eval_ids = torch.randint(64, (40,), generator=gen).tolist()
    ids = torch.tensor([eval_ids])
    with torch.no_grad():
        before = model(ids)
    saved = {name: getattr(tinylm.attention, name) for name in ("apply_rope", "causal_attention", "repeat_kv")}
    rows = real_bugs.measure_bugs(model, prompt, eval_ids, decode=lambda t: " ".join(map(str, t)), max_new_tokens=16)
    return rows, model, ids, before, saved


def test_the_clean_model_comes_first_and_its_perplexity_is_the_baseline(rows_and_model):
    rows, model, _, _, _ = rows_and_model
    assert rows[0].bug.startswith("none") and [r.bug for r in rows[1:]] == [b.name for b in real_bugs.BUGS]
    assert math.isclose(rows[0].perplexity, real_bugs.perplexity(model, rows_and_model[2][0].tolist()), rel_tol=1e-6)
    assert len(rows[0].answer_ids) == 16
    table = real_bugs.table(rows)
    assert len(table.splitlines()) == len(rows) + 1


def test_each_bug_changes_what_it_reaches(rows_and_model):
    rows, *_ = rows_and_model
    clean, by_name = rows[0], {r.bug: r for r in rows[1:]}
    for bug in real_bugs.BUGS:
        row = by_name[bug.name]
        if "restart at 0" in bug.name:  # perplexity runs without a cache: only decoding sees the positions
            # the same rotation, but the pitfall writes x * cos + rotate_half(x) * sin where tinylm's
            # multiply-add rounds once (addcmul): equal up to float32 rounding
            assert math.isclose(row.perplexity, clean.perplexity, rel_tol=1e-6) and row.answer_ids != clean.answer_ids, row
        elif bug.unshifted_labels:      # a loss bug: the model, hence its answer, is untouched
            assert row.answer_ids == clean.answer_ids and row.perplexity != clean.perplexity, row
        else:
            assert row.perplexity != clean.perplexity and row.answer_ids != clean.answer_ids, row


def test_every_bug_is_undone(rows_and_model):
    _, model, ids, before, saved = rows_and_model
    assert {name: getattr(tinylm.attention, name) for name in saved} == saved
    assert not model.training and all(m.attn_impl == "sdpa" for m in model.modules() if isinstance(m, tinylm.Attention))
    assert all(m.p == 0.0 for m in model.modules() if isinstance(m, torch.nn.Dropout))
    with torch.no_grad():
        torch.testing.assert_close(model(ids), before, atol=0, rtol=0)
