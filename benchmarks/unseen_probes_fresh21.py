"""Probes that verify_unseen.py adds for the fresh21 set, where the shared
probes of unseen_probes.py do not reach the situation a mistake is about: the
positions generate_left_padded hands the model for the prompt and for the
first decoding step (each row counted from 0 at its first real token, then one
past its last), which the tokens of a RoPE model cannot show, since every
score reads only the distance between two positions; and gradient
accumulation on a model whose gradients exceed the clip norm at every
micro-batch, where clipping partial sums and clipping the whole batch's
gradient once part ways. Each compares the learner's answer with what the
exercise asks or with one step on the whole batch; no check of the course is
run."""
from __future__ import annotations

from torch import nn

from benchmarks.unseen_probes_fresh20 import left_padded_positions
from benchmarks.unseen_probes_later import _accumulated_matches
from benchmarks.verify_heldout import attempt


def probe_06(ns) -> dict:
    return {"generate_left_padded, prompts of 3 and 1 tokens: positions of the prompt pass and the first step":
            attempt(lambda: left_padded_positions(ns, (3, 1), 211)[:2])}


class SteepTable(nn.Module):
    """Logits (B, T, 10) from one embedding table, times 100: every micro-batch's gradient alone is above a clip
    norm of 1, so the clip acts on partial sums too."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 10)

    def forward(self, idx):
        return self.emb(idx) * 100


def probe_09(ns) -> dict:
    return {"train_step_accumulated, steep logits, micro-batches of 1 and 3 rows, clipped to 1: (weights, loss) == one "
            "step on the whole batch": attempt(lambda: _accumulated_matches(ns, (1, 3), False, 1.0, SteepTable))}


EXTRA_PROBES = {"06": probe_06, "09": probe_09}
