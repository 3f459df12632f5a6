"""Probes that verify_unseen.py adds for the fresh19 set, where the shared
probes of unseen_probes.py do not reach the situation a mistake is about:
whether an answer leaves the caller's tensors as they were (rms_norm's
float32 input, layer_norm's input, the queries of causal_attention, the
residual stream of pre_norm_block, the logits handed to top_p_filter and to
a tempered sample_next), layer_norm on features with a large common offset,
rms_norm of a bfloat16 input under a float32 gain, the gradient that reaches
RMSNorm's gain, an accumulated step whose gradients exceed the clip norm,
and evaluate on batches with -100 padding. Each compares the
learner's answer with tinylm, PyTorch or a closed form; no check of the
course is run."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

import tinylm
from benchmarks.unseen_probes import Recorder, TwoTables
from benchmarks.verify_heldout import attempt


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _kept(fn, tensor: torch.Tensor, *args) -> bool:
    """fn(tensor, *args) leaves the tensor handed in with the values it had."""
    before = tensor.clone()
    fn(tensor, *args)
    return torch.equal(tensor, before)


def probe_02(ns) -> dict:
    gen = _gen(190)
    x = torch.randn(4, 16, generator=gen) * 3
    w, b = torch.randn(16, generator=gen), torch.randn(16, generator=gen)
    offset = x + 1000.0  # the spread of x on a large common mean: E[x²] and E[x]² agree in 7 digits

    def gain_gradient() -> bool:
        """d sum(RMSNorm(x) · u) / d gain = sum over tokens of u · x / rms(x), as tinylm's rms_norm gives it."""
        norm = ns["RMSNorm"](16)
        upstream = torch.randn(x.shape, generator=_gen(191))
        (norm(x) * upstream).sum().backward()
        gain = torch.ones(16, requires_grad=True)
        (tinylm.rms_norm(x, gain) * upstream).sum().backward()
        return norm.weight.grad is not None and torch.allclose(norm.weight.grad, gain.grad, atol=1e-5)

    def same_as_tinylm(xs: torch.Tensor, ws: torch.Tensor) -> bool:
        got, ref = ns["rms_norm"](xs, ws), tinylm.rms_norm(xs, ws)
        return got.dtype == ref.dtype and torch.equal(got, ref)

    return {"rms_norm keeps the caller's float32 x": attempt(lambda: _kept(ns["rms_norm"], x.clone(), w)),
            "layer_norm keeps the caller's x": attempt(lambda: _kept(ns["layer_norm"], x.clone(), w, b)),
            "layer_norm, features at x + 1000 == F.layer_norm": attempt(lambda: torch.allclose(
                ns["layer_norm"](offset, w, b), F.layer_norm(offset, (16,), w, b, eps=1e-5), atol=1e-3)),
            "rms_norm, bfloat16 x under a float32 gain == tinylm, element for element": attempt(
                lambda: same_as_tinylm(x.bfloat16(), w)),
            "RMSNorm's gain gradient == tinylm's": attempt(gain_gradient)}


def probe_03(ns) -> dict:
    gen = _gen(192)
    q, k, v = (torch.randn(1, 2, 5, 8, generator=gen) for _ in range(3))
    return {"causal_attention keeps the caller's q": attempt(lambda: _kept(
        lambda t: ns["causal_attention"](t, k, v), q.clone()))}


def probe_05(ns) -> dict:
    x = torch.randn(2, 3, 8, generator=_gen(193))
    return {"pre_norm_block keeps the caller's x": attempt(lambda: _kept(
        lambda t: ns["pre_norm_block"](t, torch.tanh, torch.sigmoid, torch.nn.Identity(), torch.nn.Identity()),
        x.clone()))}


def probe_08(ns) -> dict:
    logits = torch.randn(3, 12, generator=_gen(194))
    return {"top_p_filter keeps the caller's logits": attempt(lambda: _kept(
                lambda t: ns["top_p_filter"](t, 0.7), logits.clone())),
            "sample_next(temperature=0.5) keeps the caller's logits": attempt(lambda: _kept(
                lambda t: ns["sample_next"](t, 0.5, None, None, _gen(0)), logits.clone()))}


def probe_09(ns) -> dict:
    """train_step_accumulated on TwoTables, whose logits x 100 give gradients far above a clip norm of 1, with
    micro-batches of 1 and 3 rows, against one step on the whole batch: mean cross-entropy, backward, one clip of
    the whole gradient to 1, SGD at lr 1."""
    gen = _gen(196)
    x, y = torch.randint(0, 10, (4, 6), generator=gen), torch.randint(0, 10, (4, 6), generator=gen)

    def weights_match() -> bool:
        torch.manual_seed(0)
        mine = TwoTables()
        torch.manual_seed(0)
        whole = TwoTables()
        ns["train_step_accumulated"](mine, torch.optim.SGD(mine.parameters(), lr=1.0), [(x[:1], y[:1]), (x[1:], y[1:])],
                                     grad_clip=1.0)
        F.cross_entropy(whole(x).reshape(-1, 10), y.reshape(-1)).backward()
        torch.nn.utils.clip_grad_norm_(whole.parameters(), 1.0)
        torch.optim.SGD(whole.parameters(), lr=1.0).step()
        return all(torch.allclose(a, b, atol=1e-5) for a, b in zip(mine.parameters(), whole.parameters()))
    return {"train_step_accumulated, gradients far above grad_clip: weights == one clipped step on the whole batch":
            attempt(weights_match)}


def probe_10(ns) -> dict:
    """evaluate on two batches whose targets hold -100 padding: the loss is the mean over the scored targets only."""
    gen = _gen(195)
    model = Recorder()
    batches = []
    for rows in (2, 3):
        x, y = torch.randint(0, 16, (rows, 6), generator=gen), torch.randint(0, 16, (rows, 6), generator=gen)
        y[0, :4] = -100  # the first row of each batch: four padded positions
        batches.append((x, y))
    with torch.no_grad():
        expected = F.cross_entropy(torch.cat([model.emb(x).reshape(-1, 16) for x, _ in batches]),
                                   torch.cat([y.reshape(-1) for _, y in batches]), ignore_index=-100).item()
    return {"evaluate, batches with -100 padding: loss == mean over scored targets": attempt(
        lambda: math.isclose(ns["evaluate"](model, batches)["loss"], expected, rel_tol=1e-5))}


EXTRA_PROBES = {"02": probe_02, "03": probe_03, "05": probe_05, "08": probe_08, "09": probe_09, "10": probe_10}
