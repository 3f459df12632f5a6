"""Probes that verify_unseen.py adds for the fresh16 set, where the shared
probes of unseen_probes.py do not reach the situation a mistake is about: an id
past the vocabulary, half-precision tied logits, the type of the attention
FLOP counts, left-padded prompts decoded by a model sharp enough that a
shifted position changes its greedy tokens, the bytes a decoding step reads
when head_dim is set apart from d_model // n_heads, and an accumulated step
whose gradient is far above the clipping bound. Each compares the learner's
answer with PyTorch, tinylm or a closed form; no check of the course is run."""
from __future__ import annotations

import torch
from torch import nn

import tinylm
from benchmarks.unseen_probes import _decode_reads
from benchmarks.unseen_probes_fresh14 import _padded_rows_match_alone
from benchmarks.verify_heldout import attempt


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def probe_01(ns) -> dict:
    weight = torch.randn(6, 4, generator=_gen(160))
    half_x, half_w = torch.randn(2, 3, 4, generator=_gen(161)).half(), weight.half()
    return {"one_hot_embed with id 6 of a 6-row table": attempt(
                lambda: tuple(ns["one_hot_embed"](torch.tensor([0, 6]), weight).shape)),
            "tied_logits(float16 x, float16 weight) dtype": attempt(
                lambda: str(ns["tied_logits"](half_x, half_w).dtype))}


def probe_03(ns) -> dict:
    return {"attention_flops: type of each count": attempt(
        lambda: sorted({type(v).__name__ for v in ns["attention_flops"](2, 8, 32, 4).values()}))}


def probe_06(ns) -> dict:
    return {"left-padded prompts (2, 9, 5), sharp model, 6 tokens: each row == alone": attempt(
        lambda: _padded_rows_match_alone(ns))}


def probe_07(ns) -> dict:
    apart = tinylm.ModelConfig(vocab_size=64, d_model=32, n_heads=4, n_kv_heads=2, head_dim=12, n_layers=2, d_ff=64)
    return {"decode_bytes_per_token, head_dim 12 with d_model 32 and 4 heads == tinylm nbytes": attempt(
        lambda: ns["decode_bytes_per_token"](apart, 40, torch.float32) == _decode_reads(apart, 40, torch.float32))}


class _Linear(nn.Module):
    """A bigram table as logits: (B, T) ids -> (B, T, V), gradients large enough to be clipped."""

    def __init__(self, vocab: int = 8):
        super().__init__()
        self.table = nn.Parameter(torch.randn(vocab, vocab, generator=_gen(162)) * 5)

    def forward(self, idx):
        return self.table[idx]


def _accumulated_update_clipped(ns) -> bool:
    """One accumulated step with SGD (lr 1) and grad_clip 1e-3: the parameters move by a norm of 1e-3."""
    model = _Linear()
    ids = torch.randint(0, 8, (4, 6), generator=_gen(163))
    before = model.table.detach().clone()
    ns["train_step_accumulated"](model, torch.optim.SGD(model.parameters(), lr=1.0),
                                 [(ids[:2, :-1], ids[:2, 1:]), (ids[2:, :-1], ids[2:, 1:])], grad_clip=1e-3)
    return abs(float((model.table.detach() - before).norm()) - 1e-3) < 1e-6


def probe_09(ns) -> dict:
    return {"train_step_accumulated, SGD lr 1, grad_clip 1e-3: update norm == 1e-3": attempt(
        lambda: _accumulated_update_clipped(ns))}


EXTRA_PROBES = {"01": probe_01, "03": probe_03, "06": probe_06, "07": probe_07, "09": probe_09}
