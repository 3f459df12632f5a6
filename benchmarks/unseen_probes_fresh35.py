"""Probes that verify_unseen.py adds for the fresh35 set: fresh34's (and through them the earlier sets') extra
probes, and situations of its own: whether RMSNorm's gain asks for a gradient, the keys of a state_dict, the
decoder converted with .to() after it is built (a dtype stands in for a GPU on a CPU-only machine), top-p at p = 1,
and the mode a submodule runs in during train_step and evaluate. Each compares the learner's answer with PyTorch,
tinylm or a closed form; no check of the course is run."""
from __future__ import annotations

import torch

import tinylm
from benchmarks.unseen_probes_fresh34 import EXTRA_PROBES as FRESH34_PROBES
from benchmarks.verify_heldout import attempt


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def probe_02(ns) -> dict:
    norm = ns["RMSNorm"](8)
    return {"RMSNorm's gain requires a gradient": attempt(lambda: [n for n, p in norm.named_parameters()
                                                                   if p.requires_grad]),
            "RMSNorm(8)'s state_dict keys == tinylm's": sorted(norm.state_dict()) == sorted(
                tinylm.RMSNorm(8).state_dict())}


def _moved_after_building(ns) -> list:
    """The learner's decoder built, then converted with .to(float64): the dtypes of the tensors its forward reads
    (the model's own tensor attributes included) must follow, as they would follow .to("cuda")."""
    config = tinylm.ModelConfig(vocab_size=64, d_model=16, n_layers=1, n_heads=2, n_kv_heads=2, d_ff=32, max_seq_len=8)
    model = ns["Transformer"](config).to(torch.float64)
    return sorted({str(t.dtype) for t in vars(model).values() if isinstance(t, torch.Tensor)}
                  | {str(t.dtype) for t in model.buffers()})


def _state_dict_keys(ns) -> bool:
    """A checkpoint of the learner's decoder holds what one of tinylm's holds: the RoPE tables are rebuilt from the
    config, never saved."""
    config = tinylm.ModelConfig(vocab_size=64, d_model=16, n_layers=1, n_heads=2, n_kv_heads=2, d_ff=32, max_seq_len=8)
    return sorted(ns["Transformer"](config).state_dict()) == sorted(tinylm.Transformer(config).state_dict())


def probe_05(ns) -> dict:
    return {"decoder converted with .to(float64) after it is built: dtypes of its tensors": attempt(
        lambda: _moved_after_building(ns)),
            "decoder's state_dict keys == tinylm's": attempt(lambda: _state_dict_keys(ns))}


def _kept_at_p_one(ns) -> list:
    logits = torch.randn(1, 10, generator=_gen(351))
    return torch.isfinite(ns["top_p_filter"](logits, 1.0))[0].tolist()


def probe_08(ns) -> dict:
    return {"top_p(1.0) on 10 logits: tokens kept": attempt(lambda: _kept_at_p_one(ns))}


class _Child(torch.nn.Module):
    """A submodule that records the mode it is in whenever it runs, as a dropout layer would act on it."""

    def __init__(self):
        super().__init__()
        self.seen: list = []

    def forward(self, x):
        self.seen.append(self.training)
        return x


class _WithChild(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb, self.child = torch.nn.Embedding(10, 10), _Child()

    def forward(self, x):
        return self.child(self.emb(x))


def _child_mode_in_train_step(ns) -> list:
    model = _WithChild().eval()  # handed over in eval mode, as after an evaluation
    x = torch.randint(0, 10, (2, 5), generator=_gen(352))
    ns["train_step"](model, torch.optim.SGD(model.parameters(), lr=0.1), x, x)
    return model.child.seen


def _child_mode_in_evaluate(ns) -> list:
    model = _WithChild().train()
    x = torch.randint(0, 10, (2, 5), generator=_gen(353))
    ns["evaluate"](model, [(x, x)])
    return model.child.seen


def probe_09(ns) -> dict:
    return {"train_step, model handed over in eval mode: a submodule's mode in the forward": attempt(
        lambda: _child_mode_in_train_step(ns))}


def probe_10(ns) -> dict:
    return {"evaluate, model in train mode: a submodule's mode in the forward": attempt(
        lambda: _child_mode_in_evaluate(ns))}


def _joined(first, second):
    return second if first is None else lambda ns: {**first(ns), **second(ns)}


EXTRA_PROBES = {**FRESH34_PROBES, **{nb: _joined(FRESH34_PROBES.get(nb), probe) for nb, probe in
                                     (("02", probe_02), ("05", probe_05), ("08", probe_08), ("09", probe_09),
                                      ("10", probe_10))}}
