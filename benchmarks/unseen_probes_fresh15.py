"""Probes that verify_unseen.py adds for the fresh15 set, where the shared
probes of unseen_probes.py do not reach the situation a mistake is about: the
gradient one_hot_embed sends to the table, a KV cache whose config has 8 heads
over 2 kv heads (so n_heads // n_kv_heads differs from n_kv_heads), gradient
accumulation whose micro-batches' gradients each exceed the clip norm, and a
train_step handed a model whose submodule is in eval mode. Each compares the
learner's answer with PyTorch, tinylm or a closed form; no check of the course
is run."""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

import tinylm
from benchmarks.unseen_probes import TwoTables, _kv_cache_nbytes
from benchmarks.verify_heldout import attempt


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def probe_01(ns) -> dict:
    ids = torch.tensor([[1, 2, 2], [9, 0, 2]])

    def gradient_counts_ids() -> bool:
        # d sum(onehot(ids) @ W) / dW[v] is the number of times id v occurs, in every column
        weight = torch.randn(10, 4, generator=_gen(150)).requires_grad_()
        ns["one_hot_embed"](ids, weight).sum().backward()
        want = torch.bincount(ids.flatten(), minlength=10).float()[:, None].expand(10, 4)
        return weight.grad is not None and torch.allclose(weight.grad, want)
    return {"one_hot_embed gradient per row == id counts": attempt(gradient_counts_ids)}


def probe_06(ns) -> dict:
    # 8 heads over 2 kv heads: the group size (4) is not the number of kv heads (2), as it is for 4 over 2
    grouped = tinylm.ModelConfig(d_model=32, n_heads=8, n_kv_heads=2, n_layers=2)
    return {"kv_cache_bytes, 8 heads over 2 kv heads == KVCache nbytes": attempt(
        lambda: ns["kv_cache_bytes"](grouped, 24, 3, torch.float32) == _kv_cache_nbytes(grouped, 24, 3, torch.float32))}


class _ModeRecorder(nn.Module):
    """An embedding followed by a dropout of p=0 (the numbers do not change), recording the dropout's own mode
    at every forward pass: a submodule is in train mode only if train() reached it."""

    def __init__(self):
        super().__init__()
        self.emb, self.drop = nn.Embedding(10, 10), nn.Dropout(0.0)
        self.inner_training_seen = []

    def forward(self, idx):
        self.inner_training_seen.append(self.drop.training)
        return self.drop(self.emb(idx))


def _clipped_accumulation_matches(ns) -> bool:
    """Two micro-batches, each with a gradient far above the clip norm 1 (TwoTables scales its logits by 100):
    one SGD(lr=1) step must move the weights as one step on the whole batch, with the token-mean gradient clipped
    once to norm 1."""
    gen = _gen(151)
    micro = [tuple(torch.randint(0, 10, (2, 3), generator=gen) for _ in range(2)) for _ in range(2)]
    torch.manual_seed(152)
    model = TwoTables()
    torch.manual_seed(152)
    reference = TwoTables()
    ns["train_step_accumulated"](model, torch.optim.SGD(model.parameters(), lr=1.0), micro, grad_clip=1.0)
    x, y = torch.cat([m[0] for m in micro]), torch.cat([m[1] for m in micro])
    F.cross_entropy(reference(x).flatten(0, 1), y.flatten()).backward()
    torch.nn.utils.clip_grad_norm_(reference.parameters(), 1.0)
    with torch.no_grad():
        for p in reference.parameters():
            p -= p.grad
    return all(torch.allclose(a, b, atol=1e-5) for a, b in zip(model.parameters(), reference.parameters()))


def _submodule_mode_in_train_step(ns) -> list:
    model = _ModeRecorder().eval()
    ids = torch.randint(0, 10, (2, 4), generator=_gen(153))
    ns["train_step"](model, torch.optim.SGD(model.parameters(), lr=0.1), ids[:, :-1], ids[:, 1:])
    return model.inner_training_seen[:1]


def probe_09(ns) -> dict:
    return {"train_step_accumulated, micro-batch gradients above the clip norm: weights == one clipped step":
            attempt(lambda: _clipped_accumulation_matches(ns)),
            "train_step on a model handed over in eval mode: a submodule's mode in the forward":
            attempt(lambda: _submodule_mode_in_train_step(ns))}


EXTRA_PROBES = {"01": probe_01, "06": probe_06, "09": probe_09}
