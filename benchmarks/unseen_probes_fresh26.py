"""Probes that verify_unseen.py adds for the fresh26 set, where the shared
probes of unseen_probes.py do not reach the situation a mistake is about:
tied_logits on bfloat16 activations and table, rms_norm and the RMSNorm module
on float16 input with a float16 gain (a model moved with .half(): the squares
must not be taken in the gain's precision, and the module must hand back
float16), top_p_filter on logits the caller keeps using, generate twice with
one generator seed under different global seeds, cache_update on a bfloat16
cache, the positions and the mask generate_left_padded hands the model
for prompts of different lengths, train_step_accumulated with a clip that bites,
and evaluate on padded targets and on batches handed over as a one-pass
iterator. Each compares the learner's answer with tinylm, PyTorch,
a closed form or the caller's own tensor; no check of the course is run."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

import tinylm
from benchmarks.unseen_probes import Recorder, left_padded_passes
from benchmarks.unseen_probes_later import _accumulated_matches
from benchmarks.verify_heldout import attempt


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _close(a, b, **tol) -> bool:
    return a.shape == b.shape and torch.allclose(a.float(), b.float(), **tol)


def probe_01(ns) -> dict:
    gen = _gen(266)
    x, table = torch.randn(2, 3, 4, generator=gen).bfloat16(), torch.randn(10, 4, generator=gen).bfloat16()
    return {"tied_logits, bfloat16 x and table: output dtype": attempt(lambda: str(ns["tied_logits"](x, table).dtype))}


def probe_02(ns) -> dict:
    gen = _gen(260)
    big = (torch.randn(2, 3, 8, generator=gen) * 400).half()  # squares near 1.6e5: past float16's 65504
    gain = (torch.rand(8, generator=gen) + 0.5).half()
    return {"rms_norm, float16 x ~400 and float16 gain == tinylm": attempt(lambda: _close(
                ns["rms_norm"](big, gain), tinylm.rms_norm(big.float(), gain.float()), atol=2e-2, rtol=2e-2)),
            "RMSNorm(8).half() on float16 input: output dtype": attempt(
                lambda: str(ns["RMSNorm"](8).half()(torch.randn(2, 8, generator=gen).half()).dtype))}


def _left_padded_inputs(ns) -> list:
    """The positions and the attention_mask that generate_left_padded hands the model at each of its 3 passes, for
    prompts of 2, 5 and 3 tokens."""
    gen = _gen(265)
    return left_padded_passes(ns, [torch.randint(1, 32, (n,), generator=gen) for n in (2, 5, 3)], 3)


def probe_06(ns) -> dict:
    gen = _gen(262)
    past_k, past_v, k, v = (torch.randn(2, 2, n, 4, generator=gen).bfloat16() for n in (3, 3, 2, 2))
    return {"cache_update, bfloat16 cache: dtypes of k_all, v_all": attempt(lambda: tuple(
                str(t.dtype) for t in ns["cache_update"](past_k, past_v, k, v))),
            "left-padded prompts of 2, 5, 3 tokens: (positions, attention_mask) of every pass": attempt(
                lambda: _left_padded_inputs(ns))}


def _seeded_generations_agree(ns) -> bool:
    """generate twice with a generator seeded alike, the global RNG seeded differently before each call: a sampler
    that draws from the caller's generator gives the same ids both times."""
    uniform = Recorder()
    with torch.no_grad():
        uniform.emb.weight.zero_()  # every token equally likely: the draws are all randomness
    runs = []
    for global_seed in (1, 2):
        torch.manual_seed(global_seed)
        runs.append(ns["generate"](uniform, torch.zeros(3, 2, dtype=torch.long), 6, generator=_gen(267)))
    return torch.equal(*runs)


def probe_08(ns) -> dict:
    logits = torch.randn(3, 12, generator=_gen(263))
    kept = logits.clone()
    attempt(lambda: ns["top_p_filter"](logits, 0.5))
    try:
        return {"top_p_filter leaves the caller's logits as they were": torch.equal(logits, kept),
                "generate twice, one generator seed, other global seeds: same ids": attempt(
                    lambda: _seeded_generations_agree(ns))}
    finally:
        torch.set_grad_enabled(True)  # a generate that switched autograd off must not leak into later probes


def probe_09(ns) -> dict:
    # a bound of 1e-3, far below the gradient's norm: a clip that misses the update shows in the weights
    return {"train_step_accumulated, micro-batches of 1 and 3 rows, clipped to 1e-3: (weights, loss) == one step":
            attempt(lambda: _accumulated_matches(ns, (1, 3), False, 1e-3, lambda: Recorder(10)))}


def _token_mean(model, batches) -> float:
    with torch.no_grad():
        return F.cross_entropy(torch.cat([model.emb(x).reshape(-1, 16) for x, _ in batches]),
                               torch.cat([y.reshape(-1) for _, y in batches]), ignore_index=-100).item()


def probe_10(ns) -> dict:
    gen = _gen(264)
    model = Recorder()
    batches = [(torch.randint(0, 16, (b, 6), generator=gen), torch.randint(0, 16, (b, 6), generator=gen)) for b in (2, 3)]
    padded = [(x, y.clone()) for x, y in batches]
    padded[0][1][:, :4] = -100  # the first batch scores 2 of its 12 targets, the second all 18
    return {"evaluate, padded targets: loss == token-weighted mean over the scored targets": attempt(lambda: math.isclose(
                ns["evaluate"](model, padded)["loss"], _token_mean(model, padded), rel_tol=1e-5)),
            "evaluate, batches as a one-pass iterator: loss == token-weighted mean": attempt(lambda: math.isclose(
                ns["evaluate"](model, iter(batches))["loss"], _token_mean(model, batches), rel_tol=1e-5))}


EXTRA_PROBES = {"01": probe_01, "02": probe_02, "06": probe_06, "08": probe_08, "09": probe_09, "10": probe_10}
