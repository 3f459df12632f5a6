"""Probes that verify_unseen.py adds for the fresh20 set, where the shared
probes of unseen_probes.py do not reach the situation a mistake is about:
the mode a model is in while evaluate runs its forward passes (a model
handed over in train mode must be measured in eval mode). Each compares the
learner's answer with what the exercise asks; no check of the course is
run."""
from __future__ import annotations

import torch

from benchmarks.unseen_probes import Recorder
from benchmarks.verify_heldout import attempt


def probe_10(ns) -> dict:
    gen = torch.Generator().manual_seed(200)
    batches = [(torch.randint(0, 16, (2, 5), generator=gen), torch.randint(0, 16, (2, 5), generator=gen))]

    def modes_seen() -> list:
        model = Recorder().train()
        ns["evaluate"](model, batches)
        return model.training_seen
    return {"evaluate, model handed over in train mode: training flag of each forward": attempt(modes_seen)}


EXTRA_PROBES = {"10": probe_10}
