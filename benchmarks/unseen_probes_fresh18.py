"""Probes that verify_unseen.py adds for the fresh18 set, where the shared
probes of unseen_probes.py do not reach the situation a mistake is about:
the head's logits in float64 and for a batch of one, rms_norm in half
precision compared element for element with tinylm (a bfloat16 model, a
bfloat16 input under a float32 gain, a float16 model whose squares overflow
unless upcast), the RoPE tables built under a float64 default dtype, a
checkpoint weight converted from a transposed (non-contiguous) view,
causal attention on scores in the thousands, and a
greedy generation handed a KVCache that still holds a prefill of the
caller's. Each compares the learner's answer with tinylm or PyTorch; no check
of the course is run."""
from __future__ import annotations

import torch

import tinylm
from benchmarks.verify_heldout import attempt


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def probe_01(ns) -> dict:
    gen = _gen(180)
    weight, x = torch.randn(10, 4, generator=gen), torch.randn(1, 3, 4, generator=gen)
    return {"tied_logits, float64 x and weight: output dtype": attempt(
                lambda: str(ns["tied_logits"](x.double(), weight.double()).dtype)),
            "tied_logits, a batch of one: output shape": attempt(lambda: tuple(ns["tied_logits"](x, weight).shape))}


def probe_02(ns) -> dict:
    gen = _gen(181)
    x = torch.randn(4, 16, generator=gen) * 3
    gain = 1 + 0.5 * torch.randn(16, generator=gen)

    def same_as_tinylm(xs: torch.Tensor, ws: torch.Tensor) -> bool:
        got, ref = ns["rms_norm"](xs, ws), tinylm.rms_norm(xs, ws)
        return got.dtype == ref.dtype and torch.equal(got, ref)

    # a float16 model: entries near 400 square past float16's largest value (65504) unless upcast first
    big = (400 + 10 * torch.randn(2, 8, generator=gen)).half()
    return {"rms_norm, bfloat16 x and gain == tinylm, element for element": attempt(
                lambda: same_as_tinylm(x.bfloat16(), gain.bfloat16())),
            "rms_norm, bfloat16 x, float32 gain == tinylm, element for element": attempt(
                lambda: same_as_tinylm(x.bfloat16(), gain)),
            "rms_norm, float16 x ~400 and float16 gain: finite and == tinylm": attempt(
                lambda: bool(torch.isfinite(ns["rms_norm"](big, torch.ones(8).half())).all())
                and torch.allclose(ns["rms_norm"](big, torch.ones(8).half()).float(),
                                   tinylm.rms_norm(big, torch.ones(8).half()).float(), atol=1e-2))}


def probe_03(ns) -> dict:
    """causal_attention on scores in the hundreds (q scaled by 300): torch's masked softmax stays exact where a
    softmax over the whole row, masked and renormalised afterwards, underflows the past to 0 / 0."""
    gen = _gen(186)
    q, k, v = (torch.randn(1, 2, 5, 8, generator=gen) for _ in range(3))
    big = q * 300
    want = torch.nn.functional.scaled_dot_product_attention(big, k, v, is_causal=True)
    return {"causal_attention, q x 300 == SDPA (causal)": attempt(
        lambda: bool(torch.allclose(ns["causal_attention"](big, k, v), want, atol=1e-5, rtol=1e-4)))}


def probe_04(ns) -> dict:
    def dtypes_under_float64_default() -> tuple:
        before = torch.get_default_dtype()
        torch.set_default_dtype(torch.float64)
        try:
            cos, sin = ns["rope_cache"](8, 16)
        finally:
            torch.set_default_dtype(before)
        return str(cos.dtype), str(sin.dtype)

    def non_contiguous_weight_converted() -> bool:
        """A (16, 12) weight of 2 heads of 8 that arrives as a transposed view: each head's even rows, then its odd
        rows, as for the same weight made contiguous."""
        w = torch.randn(12, 16, generator=_gen(185)).T
        order = [h * 8 + i for h in range(2) for i in (0, 2, 4, 6, 1, 3, 5, 7)]
        return torch.equal(ns["interleaved_to_half"](w, 2), w[order])
    return {"rope_cache under a float64 default dtype: table dtypes": attempt(dtypes_under_float64_default),
            "interleaved_to_half, a non-contiguous (transposed) weight == evens then odds": attempt(
                non_contiguous_weight_converted)}


def probe_06(ns) -> dict:
    torch.manual_seed(182)
    model = tinylm.Transformer(tinylm.ModelConfig(vocab_size=64, d_model=32, n_layers=2, n_heads=4,
                                                  max_seq_len=32)).eval()
    init = _gen(184)
    with torch.no_grad():  # large weights: peaked attention, so keys left in the cache change the greedy tokens
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0.0, 0.6, generator=init)
    gen = _gen(183)
    earlier, prompt = torch.randint(0, 64, (2, 6), generator=gen), torch.randint(0, 64, (2, 4), generator=gen)

    def greedy_after_callers_prefill() -> bool:
        """The caller ran its own prefill into the cache before calling generate_greedy (6 positions held): the
        generation must start from an empty cache, so it is tinylm's greedy continuation of the prompt alone."""
        cache = tinylm.KVCache(model.config, 2)
        with torch.no_grad():
            model(earlier, cache=cache)
        return torch.equal(ns["generate_greedy"](model, prompt, 5, cache),
                           tinylm.generate(model, prompt, 5, temperature=0))
    return {"greedy with a cache the caller left holding 6 positions == tinylm": attempt(greedy_after_callers_prefill)}


EXTRA_PROBES = {"01": probe_01, "02": probe_02, "03": probe_03, "04": probe_04, "06": probe_06}
