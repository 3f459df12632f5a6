"""Every seed bug for notebooks 06-10, injected into the solution code of the
notebook itself, must fail the exercise's visible check with a message that
names it (the pattern of test_seed_bugs_part1.py). In-process, no kernel."""
from __future__ import annotations

import pytest

from autograder import course
from autograder.checks import CheckFailed
from autograder.notebook_format import read
from autograder.authoring.gates import exercise_namespace, exercises, run_check

PART_2 = ("06_kv_cache", "07_gqa", "08_sampling", "09_training", "10_perplexity")

# (assignment, answer grade id, text in the solution, replacement, phrase the message must contain)
BUGS = [
    # 06 KV cache
    ("06_kv_cache", "cache_update", "torch.cat((past_k, k), dim=2)", "torch.cat((past_k, k), dim=1)",
     "concatenated along the wrong axis (dim=1"),
    ("06_kv_cache", "cache_update", "torch.cat((past_k, k), dim=2)", "torch.cat((past_k, k), dim=-1)",
     "concatenated along the wrong axis (dim=3"),
    ("06_kv_cache", "cache_update", "torch.cat((past_k, k), dim=2)", "torch.cat((k, past_k), dim=2)",
     "placed before the cached ones"),
    ("06_kv_cache", "attention_step", "start_pos=start)", "start_pos=0)", "positions restart at 0"),
    ("06_kv_cache", "attention_step", "attn_mask=mask)", "is_causal=True)", "mask wrong for the new tokens"),
    ("06_kv_cache", "attention_step", "attn_mask=mask)", ")", "no mask"),
    ("06_kv_cache", "attention_step", "y = F.scaled_dot_product_attention(q, k_all, v_all, attn_mask=mask)",
     "y = F.scaled_dot_product_attention(q, k, v, is_causal=True)", "cached keys are ignored"),
    ("06_kv_cache", "attention_step", "k = tinylm.apply_rope(k, cos, sin, start_pos=start)\n", "\n",
     "keys cached before RoPE"),
    ("06_kv_cache", "generate_greedy", "    cache.reset()", "    pass", "cache not reset between prompts"),
    ("06_kv_cache", "generate_greedy", "step_input = next_id ", "step_input = idx ", "the whole sequence is fed again"),
    ("06_kv_cache", "generate_left_padded", "attention_mask=mask)", "attention_mask=mask if cache.length == 0 else None)",
     "mask not carried into the cached steps"),
    ("06_kv_cache", "generate_greedy", "model(step_input, cache=cache)", "model(idx)",
     "the cache is not used"),
    ("06_kv_cache", "cache_update", "torch.cat((past_v, v), dim=2)", "torch.stack((past_v, v), dim=2)", "torch.stack adds"),
    ("06_kv_cache", "attention_step", "k = tinylm.apply_rope(k, cos, sin, start_pos=start)",
     "k = tinylm.apply_rope(k, cos, sin, start_pos=start + 1)", "the new keys are rotated for positions 1..5, not 0..4"),
    # 07 GQA
    ("07_gqa", "repeat_kv", "x = x[:, :, None].expand(B, n_kv, n_rep, T, hd)", "x = x[:, None].expand(B, n_rep, n_kv, T, hd)",
     "tiling: the kv heads come tiled, 0 to n_kv - 1 and again from 0"),
    ("07_gqa", "repeat_kv", "    B, n_kv, T, hd = x.shape", "    return x.repeat_interleave(n_rep, dim=2)", "wrong dim (2, the sequence axis)"),
    ("07_gqa", "gqa_attention", "repeat_kv(k, n_rep), repeat_kv(v, n_rep)", "k.repeat(1, n_rep, 1, 1), v.repeat(1, n_rep, 1, 1)",
     "tiling: the kv heads come tiled, 0 to n_kv - 1 and again from 0"),
    ("07_gqa", "gqa_attention", "is_causal=True)", ")", "no causal mask"),
    ("07_gqa", "gqa_step", "return attn.o_proj(y), k_all, v_all",
     "return attn.o_proj(y), repeat_kv(k_all, n_rep), repeat_kv(v_all, n_rep)", "expanded K/V stored in the cache"),
    ("07_gqa", "gqa_step", "repeat_kv(k_all, n_rep), repeat_kv(v_all, n_rep)",
     "k_all.repeat(1, n_rep, 1, 1), v_all.repeat(1, n_rep, 1, 1)", "tiling: the kv heads come tiled, 0 to n_kv - 1 and again from 0"),
    ("07_gqa", "gqa_step", "tinylm.apply_rope(q, cos, sin, start), tinylm.apply_rope(k, cos, sin, start)",
     "tinylm.apply_rope(q, cos, sin, 0), tinylm.apply_rope(k, cos, sin, 0)", "positions restart at 0"),
    ("07_gqa", "repeat_kv", "return x.reshape(B, n_kv * n_rep, T, hd)", "return x.transpose(1, 2).reshape(B, n_kv * n_rep, T, hd)",
     "output head h reads kv head [0, 1, 2, 0, 1, 2]; expected [0, 0, 1, 1, 2, 2]"),
    ("07_gqa", "gqa_attention", "is_causal=True)", "is_causal=True, scale=1.0)", "scores scaled by 1 (no scaling)"),
    # 08 sampling
    ("08_sampling", "top_k_filter", "kth = logits.topk(k, dim=-1).values[..., -1:]", "kth = logits.flatten().topk(k).values[-1]",
     "threshold taken over the whole batch"),
    ("08_sampling", "top_p_filter", "return logits.masked_fill(drop, float(\"-inf\"))",
     "return sorted_logits.masked_fill(drop_sorted, float(\"-inf\"))", "in sorted order"),
    ("08_sampling", "sample_next", "return torch.multinomial(probs, num_samples=1, generator=generator).squeeze(-1)",
     "return probs.argmax(dim=-1)", "no randomness: every draw is the most likely token (argmax)"),
    ("08_sampling", "top_k_filter", "values[..., -1:]", "values[..., -2:-1]", "top-k off by one: keeps k - 1"),
    ("08_sampling", "top_k_filter", "logits < kth", "logits <= kth", "top-k off by one: keeps k - 1"),
    ("08_sampling", "top_k_filter", 'float("-inf")', "0.0", "set to 0 instead of -inf"),
    ("08_sampling", "top_p_filter", "mass_before >= p", "probs.cumsum(dim=-1) > p", "drops the crossing token"),
    ("08_sampling", "top_p_filter", "logits.sort(dim=-1, descending=True)", "logits.sort(dim=-1)", "least likely"),
    ("08_sampling", "sample_next", "    logits = logits / temperature ",
     "    return torch.multinomial(logits.softmax(-1), 1, generator=generator).squeeze(-1)  # drawn first\n"
     "    logits = logits / temperature ", "sampling before the transforms"),
    ("08_sampling", "sample_next", "logits = logits / temperature ", "logits = logits ", "the temperature never applied, or applied after the softmax"),
    ("08_sampling", "sample_next", "logits = top_k_filter(logits, top_k)", "logits = top_k_filter(logits, top_k + 1)",
     "top-k off by one: keeps k + 1"),
    ("08_sampling", "sample_next", "generator=generator)", ")", "generator is not used"),
    ("08_sampling", "generate", "    model.eval() ", "    pass ", "dropout stays on while sampling"),
    ("08_sampling", "generate", "model.train(was_training)", "model.eval()", "train mode restored"),
    # 09 training
    ("09_training", "get_batch", "return window[:, :-1], window[:, 1:]", "return window[:, :-1], window[:, :-1]",
     "labels not shifted"),
    ("09_training", "get_batch", "torch.randint(len(data) - seq_len,", "torch.randint(len(data) - seq_len - 1,",
     "window starts off by one"),
    ("09_training", "get_batch", "(batch_size,), generator=generator)", "(batch_size,))", "generator is not used"),
    ("09_training", "lm_loss", "targets.flatten(), ignore_index=-100)", "targets.flatten(), ignore_index=-100, reduction='sum')",
     "summed instead of averaged"),
    ("09_training", "lm_loss", "F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)",
     "(F.cross_entropy(logits.transpose(1, 2), targets, reduction='none').sum(1) / (targets != -100).sum(1)).mean()",
     "per-sequence means averaged"),
    ("09_training", "lm_loss", "F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)",
     "F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction='sum') / targets.numel()", "padding counted"),
    ("09_training", "lr_schedule", "max_lr * (step + 1) / warmup_steps", "max_lr * step / warmup_steps", "warmup starts at 0"),
    ("09_training", "lr_schedule", "total_steps - 1 - warmup_steps", "total_steps - warmup_steps", "does not reach min_lr"),
    ("09_training", "train_step", "    optimizer.zero_grad(set_to_none=True) ", "    pass ", "missing zero_grad"),
    ("09_training", "train_step", "    model.train() ", "    pass ", "eval mode left on"),
    ("09_training", "train_step", "    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)", "    pass",
     "not clipped"),
    ("09_training", "get_batch", "window = data[idx].long()", "window = data[idx]", "uint8 corpus"),
    ("09_training", "train_step", "return loss.item()", "return loss", "return loss.item(), a Python float"),
    ("09_training", "train_step", "    loss.backward() ", "    pass ", "no parameter has a gradient"),
    ("09_training", "train_step_accumulated", "(summed / n_tokens).backward()",
     "(lm_loss(logits, y) / len(micro_batches)).backward()", "mean of per-micro-batch means"),
    # 10 perplexity
    ("10_perplexity", "nll_sum_and_count", "ignore_index=ignore_index,", "ignore_index=-100,", "ignore_index argument is not used"),
    ("10_perplexity", "nll_sum_and_count", "return nll.item(), count", "return nll, count", "must be a Python float"),
    ("10_perplexity", "nll_sum_and_count", "count = int((targets != ignore_index).sum())", "count = targets.numel()",
     "padding counted"),
    ("10_perplexity", "nll_sum_and_count", 'reduction="sum")', 'reduction="mean")', "mean instead of sum"),
    ("10_perplexity", "evaluate", "    model.eval() ", "    pass ", "dropout on during evaluation"),
    ("10_perplexity", "evaluate", '"perplexity": math.exp(loss)', '"perplexity": 2 ** loss', "2 ** loss treats the loss as bits"),
    ("10_perplexity", "evaluate", "total, count = total + s, count + n",
     "total, count = total + s / n, count + 1", "per-batch means averaged"),
    ("10_perplexity", "evaluate", "loss / math.log(2) / bytes_per_token", "loss / math.log(2)", "divide by bytes_per_token"),
    ("10_perplexity", "evaluate", "total, count = total + s, count + n", "total, count = total + s, count + len(y)",
     "counts the sequences"),
    ("10_perplexity", "bigram_nll", "(counts.sum(dim=1, keepdim=True) + 256 * alpha)", "(counts + alpha).sum()",
     "normalised over the whole table"),
    ("10_perplexity", "bigram_nll", "counts.sum(dim=1, keepdim=True)", "counts.sum(dim=0, keepdim=True)", "direction swapped"),
    ("10_perplexity", "bigram_nll", "-probs.log()", "-probs.log2()", "log base 2"),
    # the accounting exercises of 06, 07 and 09: what serving and training cost
    ("06_kv_cache", "kv_cache_bytes", "per_position = 2 * config.n_layers", "per_position = config.n_layers",
     "K and V both"),
    ("06_kv_cache", "kv_cache_bytes", "config.n_kv_heads * config.head_dim", "config.n_heads * config.head_dim",
     "n_heads instead of n_kv_heads"),
    ("06_kv_cache", "kv_cache_bytes", "* dtype.itemsize", "* 4", "the dtype is ignored (4 bytes assumed)"),
    ("06_kv_cache", "kv_cache_bytes", "per_position * seq_len * batch_size", "per_position * seq_len",
     "the batch is ignored"),
    ("07_gqa", "decode_bytes_per_token", "(1 if config.tie_embeddings else 2)", "2", "the tied head counted twice"),
    ("07_gqa", "decode_bytes_per_token", "kv_cache = 2 * L * config.n_kv_heads", "kv_cache = 2 * L * config.n_heads",
     "n_heads instead of n_kv_heads"),
    ("07_gqa", "decode_bytes_per_token", "kv_cache = 2 * L", "kv_cache = L", "K and V both"),
    ("09_training", "train_step_costs", '"flops": 6 * matmul_weights * tokens + 3 * attention_matmuls',
     '"flops": 2 * matmul_weights * tokens + attention_matmuls', "the forward pass only"),
    ("09_training", "train_step_costs", " + 3 * attention_matmuls", "", "the attention matmuls are missing"),
    ("09_training", "train_step_costs", '"adam_moments": 2 * 4 * n_params', '"adam_moments": 4 * n_params',
     "one moment only"),
    ("09_training", "train_step_costs", "(0 if config.tie_embeddings else V * d)", "V * d",
     "the tied head counted twice"),
]


@pytest.mark.parametrize("assignment, grade_id, old, new, phrase", BUGS, ids=[f"{b[1]}:{b[4][:40]}" for b in BUGS])
def test_injected_bug_is_named(assignment, grade_id, old, new, phrase):
    if assignment not in course.assignments():
        pytest.fail(f"{assignment} is missing from solutions/")
    ns = exercise_namespace(assignment, {grade_id: (old, new)})
    with pytest.raises(CheckFailed) as err:
        run_check(assignment, grade_id, ns)
    assert phrase in str(err.value), f"message does not name the bug:\n{err.value}"


def test_every_exercise_of_part_two_has_an_injected_bug():
    covered = {(a, g) for a, g, *_ in BUGS}
    present = [a for a in PART_2 if a in course.assignments()]
    assert present
    for a in present:
        for ex in exercises(read(course.source_notebook(a))):
            assert (a, ex.grade_id) in covered, f"{a}/{ex.grade_id}: no injected bug tests its check"
