"""Probes that verify_unseen.py adds for the fresh31 set: fresh30's (and through them the earlier sets') extra
probes, and the situations of its own: an RMSNorm called in float16 and then in float32, self-attention on a batch
of one and on a single position, greedy decoding asked for no new token, a left-padded "batch" of one prompt,
top-k with k equal to and above the vocabulary, two generations without a generator under different global seeds,
generation from a model that reads its whole context, a train_step whose optimizer holds two parameter groups, an
accumulated step with a micro-batch of padding only or with gradients left in .grad, train_step_costs with
head_dim set apart from d_model / n_heads, and evaluate with a batch of padding only. Each compares the learner's
answer with tinylm, PyTorch or a closed form; no check of the course is run."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

import tinylm
from benchmarks.unseen_probes import Recorder, TwoTables, _training_costs
from benchmarks.unseen_probes_fresh30 import EXTRA_PROBES as FRESH30_PROBES
from benchmarks.unseen_probes_later import _left_padded_rows
from benchmarks.verify_heldout import _config, _reference, attempt


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _close(a, b, **tol) -> bool:
    return a.shape == b.shape and torch.allclose(a.float(), b.float(), **tol)


def probe_02(ns) -> dict:
    def float32_after_a_float16_call() -> bool:
        norm, gain = ns["RMSNorm"](8), torch.randn(8, generator=_gen(310))
        norm.load_state_dict({"weight": gain})
        x = torch.randn(3, 8, generator=_gen(311))
        norm(x.half())  # an earlier call in half precision must leave the module as it was
        return _close(norm(x), tinylm.rms_norm(x, gain), atol=1e-6)
    return {"RMSNorm, a float16 call then a float32 one: float32 result == tinylm":
            attempt(float32_after_a_float16_call)}


def _attended(x, weights, n_heads: int) -> torch.Tensor:
    """Causal multi-head attention written with SDPA: the reference for self_attention."""
    B, T, d = x.shape
    q, k, v = ((x @ w.T).reshape(B, T, n_heads, d // n_heads).transpose(1, 2) for w in weights[:3])
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return y.transpose(1, 2).reshape(B, T, d) @ weights[3].T


def probe_03(ns) -> dict:
    gen = _gen(312)
    weights = [torch.randn(12, 12, generator=gen) / 12 ** 0.5 for _ in range(4)]
    inputs = {"a batch of one (1, 5, 12)": torch.randn(1, 5, 12, generator=gen),
              "a single position (2, 1, 12)": torch.randn(2, 1, 12, generator=gen)}
    return {f"self_attention, {label} == reference": attempt(lambda x=x: _close(
        ns["self_attention"](x, *weights, 3), _attended(x, weights, 3), atol=1e-5)) for label, x in inputs.items()}


def probe_06(ns) -> dict:
    model = _reference(_config(4))
    prompt = torch.randint(0, 256, (2, 5), generator=_gen(313))
    return {"generate_greedy, 0 new tokens == the prompt": attempt(lambda: torch.equal(
                ns["generate_greedy"](model, prompt, 0, tinylm.KVCache(model.config, 2)), prompt)),
            "left-padded batch of one prompt == the prompt decoded alone": attempt(
                lambda: _left_padded_rows(ns, model, (5,)))}


def _unseeded_generations_differ(ns) -> bool:
    """generate twice without a generator, the global RNG seeded differently before each call, on a model whose
    logits are all equal: a sampler that draws from the global RNG gives different ids (18 uniform draws over 16
    tokens agree with probability 16^-18)."""
    uniform = Recorder()
    with torch.no_grad():
        uniform.emb.weight.zero_()
    runs = []
    for global_seed in (1, 2):
        torch.manual_seed(global_seed)
        runs.append(ns["generate"](uniform, torch.zeros(3, 2, dtype=torch.long), 6))
    return not torch.equal(*runs)


def probe_08(ns) -> dict:
    logits = torch.randn(2, 12, generator=_gen(314))
    model = _reference(_config(4))
    prompt = torch.randint(0, 256, (2, 5), generator=_gen(315))
    try:
        return {**{f"top_k_filter(k={k}) of 12 logits keeps every logit": attempt(lambda k=k: torch.equal(
                    ns["top_k_filter"](logits, k), logits)) for k in (12, 20)},
                "generate twice without a generator, other global seeds: the ids differ": attempt(
                    lambda: _unseeded_generations_differ(ns)),
                "generate(temperature=0) on tinylm's model == tinylm.generate": attempt(lambda: torch.equal(
                    ns["generate"](model, prompt, 4, temperature=0.0),
                    tinylm.generate(model, prompt, 4, temperature=0)))}
    finally:
        torch.set_grad_enabled(True)  # a generate that switched autograd off must not leak into later probes


def _two_groups_clipped(ns) -> float:
    """The global gradient norm after a train_step clipped to 1 whose SGD optimizer holds the two tables as two
    parameter groups (as decayed and undecayed weights are)."""
    tables = TwoTables()
    optimizer = torch.optim.SGD([{"params": tables.a.parameters()}, {"params": tables.b.parameters()}], lr=0.0)
    ids = torch.randint(0, 10, (2, 7), generator=_gen(316))
    ns["train_step"](tables, optimizer, ids[:, :-1], ids[:, 1:], grad_clip=1.0)
    return round(float(torch.cat([p.grad.flatten() for p in tables.parameters()]).norm()), 4)


def _empty_micro_batch_matches(ns) -> tuple:
    """train_step_accumulated (SGD, lr 0.1) on 4 rows as micro-batches of 1 and 3 rows, the first row's targets all
    padding, against one plain step on the whole batch: (weights agree, returned loss == the whole batch's mean)."""
    gen = _gen(317)
    x, y = torch.randint(0, 10, (4, 6), generator=gen), torch.randint(0, 10, (4, 6), generator=gen)
    y[0] = -100  # the first micro-batch scores nothing
    torch.manual_seed(0)
    mine = Recorder(10)
    torch.manual_seed(0)
    whole = Recorder(10)
    pieces = [(x[:1], y[:1]), (x[1:], y[1:])]
    returned = ns["train_step_accumulated"](mine, torch.optim.SGD(mine.parameters(), lr=0.1), pieces, grad_clip=1e3)
    loss = F.cross_entropy(whole(x).reshape(-1, 10), y.reshape(-1), ignore_index=-100)
    loss.backward()
    with torch.no_grad():
        whole.emb.weight -= 0.1 * whole.emb.weight.grad
    return (torch.allclose(mine.emb.weight, whole.emb.weight, atol=1e-6),
            math.isclose(float(returned), loss.item(), rel_tol=1e-5))


def _leftover_gradient_ignored(ns) -> bool:
    """train_step_accumulated (SGD, lr 0.1, two micro-batches) on the same model, once with .grad empty and once
    with a leftover gradient of 5 in every entry: the step on the batch must move both the same way."""
    gen = _gen(318)
    x, y = torch.randint(0, 10, (4, 6), generator=gen), torch.randint(0, 10, (4, 6), generator=gen)
    moved = []
    for leftover in (False, True):
        torch.manual_seed(0)
        model = Recorder(10)
        if leftover:
            model.emb.weight.grad = torch.full_like(model.emb.weight, 5.0)
        pieces = [(x[:2], y[:2]), (x[2:], y[2:])]
        ns["train_step_accumulated"](model, torch.optim.SGD(model.parameters(), lr=0.1), pieces, grad_clip=1e3)
        moved.append(model.emb.weight.detach().clone())
    return torch.equal(*moved)


def probe_09(ns) -> dict:
    apart = _config(2, head_dim=12)  # 4 heads of 12 on a 32-wide stream
    return {"train_step_accumulated with gradients left in .grad == on a clean model": attempt(
                lambda: _leftover_gradient_ignored(ns)),
            "train_step, two parameter groups, clipped to 1: global gradient norm": attempt(
                lambda: _two_groups_clipped(ns)),
            "train_step_accumulated, a micro-batch of padding only: (weights, loss) == one step": attempt(
                lambda: _empty_micro_batch_matches(ns)),
            "train_step_costs, head_dim 12 for d_model 32 / 4 heads == one AdamW step of tinylm": attempt(
                lambda: ns["train_step_costs"](apart, 2, 6) == _training_costs(apart, 2, 6))}


def probe_10(ns) -> dict:
    gen = _gen(319)
    model = Recorder()
    batches = [(torch.randint(0, 16, (2, 6), generator=gen), torch.randint(0, 16, (2, 6), generator=gen))
               for _ in range(2)]
    batches[0][1][:] = -100  # the first batch scores nothing
    with torch.no_grad():
        expected = F.cross_entropy(model.emb(batches[1][0]).reshape(-1, 16), batches[1][1].reshape(-1)).item()
    return {"evaluate, a batch of padding only: loss == the other batch's mean": attempt(lambda: math.isclose(
        ns["evaluate"](model, batches)["loss"], expected, rel_tol=1e-5))}


def _joined(first, second):
    return second if first is None else lambda ns: {**first(ns), **second(ns)}


EXTRA_PROBES = {**FRESH30_PROBES, **{nb: _joined(FRESH30_PROBES.get(nb), probe) for nb, probe in
                                     (("02", probe_02), ("03", probe_03), ("06", probe_06), ("08", probe_08),
                                      ("09", probe_09), ("10", probe_10))}}
