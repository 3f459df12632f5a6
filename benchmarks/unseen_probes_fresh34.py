"""Probes that verify_unseen.py adds for the fresh34 set: fresh33's (and through them the earlier sets') extra
probes, and situations of its own: heads split at a width other than notebook 03's demo, attention in float16,
RoPE on 3 positions (not the demo's 5), sampling at a temperature of 0.01, and a top-p boundary that bfloat16 rounding
would move. Each compares the learner's answer with PyTorch, tinylm or a closed form; no check of the course is run."""
from __future__ import annotations

import torch
import torch.nn.functional as F

import tinylm
from benchmarks.unseen_probes_fresh33 import EXTRA_PROBES as FRESH33_PROBES
from benchmarks.verify_heldout import attempt


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _split_other_width(ns) -> bool:
    """16 features in 2 heads of 8: nothing of the (12, 3) split the notebook's demo uses."""
    x = torch.randn(2, 3, 16, generator=_gen(340))
    return torch.equal(ns["split_heads"](x, 2), x.view(2, 3, 2, 8).transpose(1, 2))


def _float16_attention(ns) -> bool:
    q, k, v = (torch.randn(1, 2, 4, 8, generator=_gen(341 + i)) for i in range(3))
    reference = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    mine = ns["causal_attention"](q.half(), k.half(), v.half())
    return mine.dtype == torch.float16 and torch.allclose(mine.float(), reference, atol=1e-2)


def probe_03(ns) -> dict:
    return {"split_heads, 16 features in 2 heads == view and transpose": attempt(lambda: _split_other_width(ns)),
            "attention, float16 q, k, v == float32 SDPA to 1e-2": attempt(lambda: _float16_attention(ns))}


def _rope_three_positions(ns) -> bool:
    """3 positions from position 2: not the 5 of notebook 04's demo."""
    cos, sin = tinylm.rope_cache(8, 16)
    x = torch.randn(1, 2, 3, 8, generator=_gen(343))
    return torch.allclose(ns["apply_rope"](x, cos, sin, 2), tinylm.apply_rope(x, cos, sin, 2), atol=1e-6)


def probe_04(ns) -> dict:
    return {"apply_rope, 3 positions from 2 == tinylm": attempt(lambda: _rope_three_positions(ns))}


def _share_at_low_temperature(ns) -> float:
    """Logits (0, -0.02) at temperature 0.01: token 0 has probability sigmoid(2), about 0.88."""
    logits = torch.tensor([[0.0, -0.02]]).expand(4000, 2).contiguous()
    drawn = ns["sample_next"](logits, 0.01, None, None, _gen(342))
    return round(float((drawn == 0).float().mean()), 1)


def _kept_near_the_boundary(ns) -> list:
    """Probabilities (0.5, 0.2999, 0.2001), top_p 0.8: the third token's mass before it, 0.7999, is below p, so it
    stays; rounded to 3 digits that mass would reach p."""
    logits = torch.tensor([[0.5, 0.2999, 0.2001]]).log()
    return torch.isfinite(ns["top_p_filter"](logits, 0.8))[0].tolist()


def probe_08(ns) -> dict:
    return {"T=0.01, logits (0, -0.02): share of token 0, to one digit": attempt(lambda: _share_at_low_temperature(ns)),
            "top_p(0.8) on probabilities (0.5, 0.2999, 0.2001): tokens kept": attempt(
                lambda: _kept_near_the_boundary(ns))}


def _joined(first, second):
    return second if first is None else lambda ns: {**first(ns), **second(ns)}


EXTRA_PROBES = {**FRESH33_PROBES, **{nb: _joined(FRESH33_PROBES.get(nb), probe) for nb, probe in
                                     (("03", probe_03), ("04", probe_04), ("08", probe_08))}}
