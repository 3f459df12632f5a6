"""Each held-out mistake (benchmarks/mutations/heldout.py) is a real bug:
probes run the solution and the mutated answer on the situation the mistake
is about (a KV cache, n_kv_heads < n_heads, half precision, the caller's
tensor after the call, ...) and compare with tinylm or with the inputs. A
mutation whose probes match the solution's would be no mistake at all.

    python benchmarks/verify_heldout.py

Prints one row per mutation and exits non-zero if any mutation changes nothing.
"""
from __future__ import annotations

import contextlib
import io
import sys
import warnings
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)] if str(ROOT) not in sys.path else []

import tinylm  # noqa: E402
from benchmarks.bench_diagnostics import notebook_cells  # noqa: E402
from benchmarks.mutations import Mutation, heldout_mutations  # noqa: E402


def namespace(notebook: str, mutation: Mutation | None = None) -> dict:
    """The notebook's setup and answer cells run in order, one of them mutated."""
    setup, answers, _ = notebook_cells(notebook)
    ns: dict = {"__name__": f"verify_{notebook}"}
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for src in setup:
            exec(src, ns)
        for gid, src in answers.items():
            exec(mutation.apply(src) if mutation and gid == mutation.cell else src, ns)
    return ns


def attempt(fn):
    try:
        return fn()
    except Exception as err:  # a crash is an observation too
        return f"raises {type(err).__name__}"


def _config(n_kv_heads: int, n_layers: int = 2, **overrides) -> tinylm.ModelConfig:
    return tinylm.ModelConfig(**{"vocab_size": 256, "d_model": 32, "n_layers": n_layers, "n_heads": 4,
                                 "n_kv_heads": n_kv_heads, "d_ff": 64, "max_seq_len": 32, **overrides})


def _reference(config: tinylm.ModelConfig) -> tinylm.Transformer:
    torch.manual_seed(0)
    model = tinylm.Transformer(config).eval()
    with torch.no_grad():  # gains away from 1, so norms that share a gain differ
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return model


def _model_agreement(ns: dict, n_kv_heads: int, **overrides) -> dict:
    """The learner's Transformer holding tinylm's weights: same parameters,
    same logits without a cache, same logits for a prefill of 5 then 3 decoding steps.
    `overrides` are other ModelConfig fields (e.g. norm_eps) for both models."""
    config = _config(n_kv_heads, **overrides)
    ref = _reference(config)
    model = ns["Transformer"](config).eval()
    names = {n for n, _ in model.named_parameters()} == {n for n, _ in ref.named_parameters()}
    model.load_state_dict(ref.state_dict(), strict=False)
    idx = torch.randint(0, 256, (2, 8), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        full = torch.allclose(model(idx), ref(idx), atol=1e-4)
        mine, theirs = tinylm.KVCache(config, 2), tinylm.KVCache(config, 2)
        cached = torch.allclose(model(idx[:, :5], cache=mine), ref(idx[:, :5], cache=theirs), atol=1e-4)
        for t in range(5, 8):
            cached &= torch.allclose(model(idx[:, t:t + 1], cache=mine), ref(idx[:, t:t + 1], cache=theirs), atol=1e-4)
    return {"same parameters": names and len(list(model.parameters())) == len(list(ref.parameters())),
            "same logits": full, "same cached logits": bool(cached)}


def _input_kept(fn, *args) -> bool:
    before = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    fn(*args)
    return all(not isinstance(a, torch.Tensor) or torch.equal(a, b) for a, b in zip(args, before))


def _attention_steps(step, n_kv_heads: int, chunks: tuple[int, ...] = (4, 2)) -> bool:
    """Prefill chunks[0] positions, then the next chunks in later steps (by default 4, then 2 more),
    against tinylm's attention on all of them at once."""
    config = _config(n_kv_heads, n_layers=1)
    torch.manual_seed(0)
    attn = tinylm.attention.Attention(config).eval()
    cos, sin = tinylm.rope_cache(config.head_dim, config.max_seq_len)
    x = torch.randn(2, sum(chunks), config.d_model)
    k = v = torch.zeros(2, n_kv_heads, 0, config.head_dim)  # an empty cache
    outputs, start = [], 0
    with torch.no_grad():
        for n in chunks:
            y, k, v = step(x[:, start:start + n], attn, cos, sin, k, v)
            outputs.append(y)
            start += n
        return torch.allclose(torch.cat(outputs, dim=1), attn(x, cos, sin), atol=1e-5)


def probe_01(ns):
    weight = torch.randn(256, 8).bfloat16()
    return {"bf16 weight": attempt(lambda: ns["one_hot_embed"](torch.tensor([[1, 2]]), weight).dtype)}


def probe_02(ns):
    x, w = torch.randn(3, 8), torch.randn(8)
    return {"rms_norm keeps x": _input_kept(ns["rms_norm"], x, w),
            "layer_norm keeps x": _input_kept(ns["layer_norm"], x, w, torch.zeros(8)),
            "RMSNorm fp16 out": ns["RMSNorm"](8).half()(torch.randn(2, 8).half()).dtype}


def probe_04(ns):
    cos, sin = tinylm.rope_cache(8, 16)
    x = torch.randn(1, 2, 5, 8)
    return {"keeps x": _input_kept(ns["apply_rope"], x, cos, sin),
            "bf16 out": ns["apply_rope"](x.bfloat16(), cos, sin).dtype}


def probe_05(ns):
    x = torch.randn(2, 3, 4)
    identity = torch.nn.Identity()
    return {"pre_norm_block keeps x": _input_kept(ns["pre_norm_block"], x, torch.tanh, torch.sigmoid, identity, identity),
            "MHA": attempt(lambda: _model_agreement(ns, 4)), "GQA": attempt(lambda: _model_agreement(ns, 2))}


def probe_06(ns):
    model = _reference(_config(4))
    prompt = torch.randint(0, 256, (2, 5), generator=torch.Generator().manual_seed(2))
    greedy = ns["generate_greedy"](model, prompt, 4, tinylm.KVCache(model.config, 2))
    return {"attention steps": attempt(lambda: _attention_steps(ns["attention_step"], 4)),
            "greedy == tinylm": torch.equal(greedy, tinylm.generate(model, prompt, 4, temperature=0))}


def probe_07(ns):
    return {"GQA steps": attempt(lambda: _attention_steps(ns["gqa_step"], 2))}


def probe_08(ns):
    logits = torch.randn(2, 20)
    peaked = torch.tensor([[2.0, 1.5, 1.0, 0.5, 0.0]])
    drawn = {int(ns["sample_next"](peaked.clone(), 0.5, None, 0.6, torch.Generator().manual_seed(s))) for s in range(300)}
    return {"top_k keeps logits": _input_kept(ns["top_k_filter"], logits, 5),
            "sample_next keeps logits": _input_kept(ns["sample_next"], logits, 0.7, None, None, torch.Generator()),
            "tokens drawn at T=0.5, top_p=0.6": sorted(drawn)}


def probe_09(ns):
    class Scaled(torch.nn.Module):  # large gradients, so clipping to 0.1 shows
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(10, 10)

        def forward(self, x):
            return self.emb(x) * 100

    model = Scaled()
    x = torch.randint(0, 10, (2, 5), generator=torch.Generator().manual_seed(3))
    ns["train_step"](model, torch.optim.SGD(model.parameters(), lr=0.0), x, x, grad_clip=0.1)
    return {"gradient norm after the step": round(float(model.emb.weight.grad.norm()), 3)}


def probe_10(ns):
    gen = torch.Generator().manual_seed(4)
    logits = (torch.randn(8, 512, 256, generator=gen) * 3).bfloat16()
    targets = torch.randint(0, 256, (8, 512), generator=gen)
    return {"bf16 NLL sum": round(ns["nll_sum_and_count"](logits, targets)[0], 1)}


PROBES = {nb: globals()[f"probe_{nb}"] for nb in ("01", "02", "04", "05", "06", "07", "08", "09", "10")}


def main() -> int:
    no_ops = []
    for notebook, mutations in heldout_mutations().items():
        solution = PROBES[notebook](namespace(notebook))
        print(f"{notebook} solution: {solution}")
        for mutation in mutations:
            seen = attempt(lambda: PROBES[notebook](namespace(notebook, mutation)))
            changed = {k: v for k, v in seen.items() if solution.get(k) != v} if isinstance(seen, dict) else seen
            print(f"   {mutation.cell:<17} {mutation.why[:70]:<72} {changed or 'NO CHANGE'}")
            if not changed:
                no_ops.append(f"{notebook} {mutation.cell}: {mutation.why}")
    for line in no_ops:
        print(f"PROBLEM: changes nothing the probes see: {line}")
    return 1 if no_ops else 0


if __name__ == "__main__":
    raise SystemExit(main())
