"""Probes that verify_unseen.py adds for the fresh14 set, where the shared
probes of unseen_probes.py do not reach the situation a mistake is about: an
RMSNorm gain that must receive a gradient, a RoPE table at positions in the
thousands, a KV cache whose config sets head_dim apart from d_model // n_heads,
left-padded prompts decoded by a model sharp enough that a shifted position
changes its greedy tokens, top-k with k past the vocabulary, the type of a
returned count, and an evaluation whose rows hold different numbers of real
targets. Each compares the learner's answer with PyTorch, tinylm or a closed
form; no check of the course is run."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

import tinylm
from benchmarks.unseen_probes import Recorder, _kv_cache_nbytes
from benchmarks.verify_heldout import attempt


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def probe_02(ns) -> dict:
    norm = ns["RMSNorm"](8)
    x = torch.randn(3, 8, generator=_gen(140))
    weight = norm.weight
    if weight.requires_grad:
        (norm(x) * torch.randn(3, 8, generator=_gen(141))).sum().backward()
    return {"RMSNorm gain receives a gradient": weight.grad is not None and bool(weight.grad.abs().sum() > 0)}


def probe_04(ns) -> dict:
    # angles in float64 as the closed form: pos · theta^(-2i/hd), the two halves sharing an angle
    hd, length = 16, 2048
    inv_freq = 10000.0 ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)
    angles = torch.outer(torch.arange(length, dtype=torch.float64), inv_freq)
    angles = torch.cat((angles, angles), dim=-1)

    def far_rows_match() -> bool:
        cos, sin = ns["rope_cache"](hd, length)
        # float32 angles near 2000 are good to ~1e-4 rad; a rounded frequency is off by radians there
        return bool(torch.allclose(cos[1000:].double(), angles[1000:].cos(), atol=1e-2)
                    and torch.allclose(sin[1000:].double(), angles[1000:].sin(), atol=1e-2))
    return {"rope_cache(16, 2048), rows 1000+ == float64 closed form": attempt(far_rows_match)}


def _sharp_model() -> tinylm.Transformer:
    """A small tinylm model with large random weights, so attention is peaked and a position shifted by a few
    steps changes the greedy tokens (the shared probe's model, at init scale, is nearly position-blind)."""
    torch.manual_seed(142)
    model = tinylm.Transformer(tinylm.ModelConfig(vocab_size=32, d_model=32, n_layers=2, n_heads=4, max_seq_len=64))
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0.0, 0.6, generator=_gen(143 + p.numel() % 97))
    return model.eval()


def _padded_rows_match_alone(ns) -> bool:
    model = _sharp_model()
    gen = _gen(144)
    prompts = [torch.randint(1, 32, (n,), generator=gen) for n in (2, 9, 5)]
    new = ns["generate_left_padded"](model, prompts, 6, tinylm.KVCache(model.config, len(prompts)))
    alone = torch.stack([tinylm.generate(model, p[None], 6, temperature=0)[0, len(p):] for p in prompts])
    return tuple(new.shape) == tuple(alone.shape) and torch.equal(new, alone)


def probe_06(ns) -> dict:
    apart = tinylm.ModelConfig(d_model=32, n_heads=4, n_kv_heads=2, head_dim=12, n_layers=2)
    return {"kv_cache_bytes, head_dim 12 with d_model 32 and 4 heads == KVCache nbytes": attempt(
                lambda: ns["kv_cache_bytes"](apart, 40, 2, torch.float32) == _kv_cache_nbytes(apart, 40, 2,
                torch.float32)),
            "left-padded prompts (2, 9, 5), sharp model, 6 tokens: each row == alone": attempt(
                lambda: _padded_rows_match_alone(ns))}


def probe_08(ns) -> dict:
    logits = torch.randn(2, 5, generator=_gen(145))
    return {"top_k_filter(k=9) on 5 tokens keeps every logit": attempt(
        lambda: torch.equal(ns["top_k_filter"](logits, 9), logits))}


def probe_10(ns) -> dict:
    logits = torch.randn(2, 3, 7, generator=_gen(146))
    targets = torch.tensor([[1, 2, -100], [3, -100, -100]])
    model = Recorder()
    # rows of one batch hold 4 and 1 real targets, the other batch's rows 2 and 2: weights by rows and by tokens differ
    batches = [(torch.randint(0, 16, (2, 4), generator=_gen(147)), torch.tensor([[1, 2, 3, 4], [5, -100, -100, -100]])),
               (torch.randint(0, 16, (2, 4), generator=_gen(148)), torch.tensor([[6, 7, -100, -100], [8, 9, -100,
               -100]]))]
    with torch.no_grad():
        total = sum(F.cross_entropy(model(x).flatten(0, 1), y.flatten(), reduction="sum").item() for x, y in batches)
    count = sum(int((y != -100).sum()) for _, y in batches)
    return {"nll_sum_and_count: type of the count": attempt(
                lambda: type(ns["nll_sum_and_count"](logits, targets)[1]).__name__),
            "evaluate, rows with 4, 1, 2, 2 real targets: loss == token mean": attempt(
                lambda: math.isclose(ns["evaluate"](model, batches)["loss"], total / count, rel_tol=1e-5))}


EXTRA_PROBES = {"02": probe_02, "04": probe_04, "06": probe_06, "08": probe_08, "10": probe_10}
