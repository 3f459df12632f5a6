"""The part-2 checks accept tinylm's own implementations (as independent
copies: the checks refuse tinylm's object of the exercise's name itself): the independent
references in autograder/checks (full recompute, SDPA enable_gqa, closed-form
distributions, F.cross_entropy...) and tinylm agree. Bugs are covered by
test_seed_bugs_part2.py."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import tinylm
from autograder import checks
from autograder.checks.core import independent_copy

from ..helpers import PART_2_CHECK_MODULES, assert_stub_gets_not_implemented_message, greedy_with_cache


def _step(x, attn, cos, sin, past_k, past_v):
    """A cached attention step built from tinylm's pieces."""
    B, T, _ = x.shape
    split = lambda t, n: t.view(B, T, n, attn.head_dim).transpose(1, 2)  # noqa: E731  (B, n, T, hd)
    start = past_k.shape[2]
    q = tinylm.apply_rope(split(attn.q_proj(x), attn.n_heads), cos, sin, start)
    k = tinylm.apply_rope(split(attn.k_proj(x), attn.n_kv_heads), cos, sin, start)
    k_all, v_all = torch.cat((past_k, k), 2), torch.cat((past_v, split(attn.v_proj(x), attn.n_kv_heads)), 2)
    y = tinylm.causal_attention(q, k_all, v_all)  # repeats kv heads itself, bottom-right mask
    return attn.o_proj(y.transpose(1, 2).flatten(2)), k_all, v_all


def _evaluate(model, batches, bytes_per_token=1.0):
    was, total, count = model.training, 0.0, 0
    model.eval()
    with torch.no_grad():
        for x, y in batches:
            total += F.cross_entropy(model(x).flatten(0, 1), y.flatten(), reduction="sum").item()
            count += int((y != -100).sum())
    model.train(was)
    loss = total / count
    return {"loss": loss, "perplexity": math.exp(loss), "bits_per_byte": loss / math.log(2) / bytes_per_token}


def _bigram(train, val, alpha=0.5):
    t, v = train.long(), val.long()
    counts = torch.zeros(256, 256, dtype=torch.float64).index_put_((t[:-1], t[1:]), torch.ones(len(t) - 1).double(),
                                                                   accumulate=True)
    p = (counts + alpha) / (counts + alpha).sum(1, keepdim=True)
    return -p[v[:-1], v[1:]].log().mean().item()


def _train_step(model, opt, x, y, clip=1.0):
    model.train()
    loss = tinylm.next_token_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    opt.step()
    return loss.item()


_GENERATE = independent_copy(tinylm.generate)


def _left_padded(model, prompts, max_new_tokens, cache, pad_id=0):
    """tinylm.generate on the left-padded batch, told which slots are padding."""
    T = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), T), pad_id, dtype=torch.long)
    mask = torch.zeros(len(prompts), T, dtype=torch.long)  # 1/0 rather than bool: both are accepted
    for b, p in enumerate(prompts):
        ids[b, T - len(p):], mask[b, T - len(p):] = p, 1
    return _GENERATE(model, ids, max_new_tokens, temperature=0, attention_mask=mask)[:, T:]

CORRECT = [
    (checks.check_cache_update, (lambda pk, pv, k, v: (torch.cat((pk, k), 2), torch.cat((pv, v), 2)),)),
    (checks.check_attention_step, (_step,)),
    (checks.check_generate_greedy, (greedy_with_cache,)),
    (checks.check_repeat_kv, (independent_copy(tinylm.repeat_kv),)),
    (checks.check_gqa_attention, (independent_copy(tinylm.causal_attention),)),
    (checks.check_gqa_step, (_step,)),
    (checks.check_top_k_filter, (independent_copy(tinylm.top_k_filter),)),
    (checks.check_top_p_filter, (independent_copy(tinylm.top_p_filter),)),
    (checks.check_sample_next, (independent_copy(tinylm.sample_next),)),
    (checks.check_generate, (lambda m, p, n, t, k, tp, g: _GENERATE(m, p, n, temperature=t, top_k=k, top_p=tp,
                                                                            generator=g),)),
    (checks.check_generate_left_padded, (_left_padded,)),
    (checks.check_get_batch, (independent_copy(tinylm.get_batch),)),
    (checks.check_lm_loss, (independent_copy(tinylm.next_token_loss),)),
    (checks.check_lr_schedule, (lambda s, w, t, hi, lo: tinylm.lr_at(s, tinylm.TrainConfig(
        steps=t, warmup_steps=w, lr=hi, min_lr=lo)),)),
    (checks.check_nll_sum_and_count, (lambda lg, t, ig=-100: (
        F.cross_entropy(lg.flatten(0, 1).float(), t.flatten(), ignore_index=ig, reduction="sum").item(),
        int((t != ig).sum())),)),  # .float(): half-precision logits are summed in float32
    (checks.check_train_step, (_train_step,)),
    (checks.check_train_step_accumulated, (independent_copy(tinylm.train_step_accumulated),)),
    (checks.check_evaluate, (_evaluate,)),
    (checks.check_bigram_nll, (_bigram,)),
]


@pytest.mark.parametrize("check, fns", CORRECT, ids=[c.__name__ for c, _ in CORRECT])
def test_tinylm_passes_the_check(check, fns, capsys):
    check(*fns)
    out = capsys.readouterr().out
    assert "PASS" in out



def test_every_part_two_check_is_exercised():
    public = {n for n in dir(checks) if n.startswith("check_") and getattr(checks, n).__module__ in PART_2_CHECK_MODULES}
    assert public == {c.__name__ for c, _ in CORRECT}


@pytest.mark.parametrize("check, fns", CORRECT, ids=[c.__name__ for c, _ in CORRECT])
def test_stub_gives_a_short_not_implemented_message(check, fns):
    assert_stub_gets_not_implemented_message(check, len(fns))


# -- measured: a count rounded in bfloat16, a row with no counts smoothed as if it had one -----------
def _nll_count_in_the_logits_dtype(logits, targets, ignore_index=-100):
    ones = torch.ones(targets.shape, dtype=logits.dtype)
    nll = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=ignore_index, reduction="sum")
    return nll.item(), int(ones[targets != ignore_index].sum())


def test_a_count_summed_in_bfloat16_is_measured():
    with pytest.raises(checks.CheckFailed) as err:
        checks.check_nll_sum_and_count(_nll_count_in_the_logits_dtype)
    said = str(err.value)
    assert "your count is 300 for 299 scored targets with bfloat16 logits" in said and "int64" in said, said


def _bigram_totals_at_least_one(train, val, alpha=0.5):
    train, val = train.long(), val.long()
    counts = torch.zeros(256, 256, dtype=torch.float64)
    counts.index_put_((train[:-1], train[1:]), torch.ones(len(train) - 1, dtype=torch.float64), accumulate=True)
    totals = torch.maximum(counts.sum(1, keepdim=True), torch.ones(256, 1, dtype=torch.float64))
    return -((counts + alpha) / (totals + 256 * alpha)).log()[val[:-1], val[1:]].mean().item()


def test_a_row_with_no_counts_smoothed_as_one_count_is_measured():
    with pytest.raises(checks.CheckFailed) as err:
        checks.check_bigram_nll(_bigram_totals_at_least_one)
    said = str(err.value)
    assert "a byte train never has" in said and "a row whose total count is 1" in said and "1/256" in said, said


@pytest.mark.parametrize("both, axis", [(True, 1), (False, 1), (True, 3)])
def test_a_cache_grown_along_another_axis_is_one_likely_bug_naming_each_cache(both, axis):
    """Keys and values (or keys alone) concatenated along the head or head_dim axis: the check shows which caches
    grew along which axis (measured from their shapes), and says that cause once, on one line naming them."""
    def wrong(pk, pv, k, v):
        return torch.cat((pk, k), axis), torch.cat((pv, v), axis if both else 2)
    with pytest.raises(checks.CheckFailed) as err:
        checks.check_cache_update(wrong)
    bugs = [line.strip() for line in str(err.value).splitlines() if line.strip().startswith("Likely bug:")]
    assert len(bugs) == 1, bugs
    caches = "k_all and v_all" if both else "k_all"
    assert f"wrong axis (dim={axis}" in bugs[0] and f"your {caches} grew along that axis" in bugs[0], bugs
    assert "dim=2 of (B, n_kv, T, hd)" in bugs[0], bugs


def test_too_few_heads_at_each_n_rep_is_one_likely_bug_naming_each():
    with pytest.raises(checks.CheckFailed) as err:
        checks.check_repeat_kv(lambda x, n_rep: x.clone())  # the n_kv heads as they are, for every n_rep
    bugs = [line for line in str(err.value).splitlines() if "heads returned" in line]
    assert len(bugs) == 1 and "n_rep=2" in bugs[0] and "n_rep=4" in bugs[0], str(err.value)
