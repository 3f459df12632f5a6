"""Probes that verify_unseen.py adds for the fresh24 set, where the shared
probes of unseen_probes.py do not reach the situation a mistake is about: the
RMSNorm module (not the function) handed float16 input of entries near 400,
whose squares overflow float16; cache_update on a bfloat16 cache (the joined
keys must keep the cache's dtype); and the attention mask generate_left_padded
hands the model when its prompts hold the pad id as a real token (a padding
mask read off the ids hides those tokens). Each compares the learner's answer
with tinylm, the input's own dtype or the solution's mask; no check of the
course is run."""
from __future__ import annotations

import torch

import tinylm
from benchmarks.unseen_probes import left_padded_passes
from benchmarks.verify_heldout import attempt


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _close(a, b, **tol) -> bool:
    return a.shape == b.shape and torch.allclose(a.float(), b.float(), **tol)


def probe_02(ns) -> dict:
    big = (torch.randn(2, 3, 8, generator=_gen(240)) * 400).half()  # squares near 1.6e5: past float16's 65504
    return {"RMSNorm(8), float16 input of entries ~400 == tinylm": attempt(lambda: _close(
        ns["RMSNorm"](8)(big), tinylm.rms_norm(big, torch.ones(8)), atol=1e-2, rtol=1e-2))}


def _masks_with_the_pad_id_inside(ns) -> list:
    """The attention_mask that the learner's generate_left_padded hands the model at every pass (2 new tokens), for
    two prompts that hold token 0, the default pad_id, as real tokens: the zeros inside a prompt are text, so the
    mask is False on the padding in front only."""
    gen = _gen(241)
    prompts = [torch.randint(1, 32, (n,), generator=gen) for n in (4, 7)]
    prompts[0][0] = prompts[0][2] = 0
    prompts[1][1] = prompts[1][3] = prompts[1][6] = 0
    return left_padded_passes(ns, prompts, 2, keys=("attention_mask",))


def probe_06(ns) -> dict:
    gen = _gen(242)
    past_k, past_v, k, v = (torch.randn(2, 2, n, 4, generator=gen).bfloat16() for n in (3, 3, 2, 2))
    return {"cache_update on a bfloat16 cache: dtypes of the joined keys and values": attempt(lambda: tuple(
                str(t.dtype) for t in ns["cache_update"](past_k, past_v, k, v))),
            "left-padded batch, prompts holding the pad id 0 as a real token: attention_mask of every pass": attempt(
                lambda: _masks_with_the_pad_id_inside(ns))}


EXTRA_PROBES = {"02": probe_02, "06": probe_06}
