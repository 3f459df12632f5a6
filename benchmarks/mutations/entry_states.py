"""Mistakes that only an entry state shows ("entry_states"): a function that
must give the caller back its model's mode or torch's grad mode, right when
the check hands it the state it happens to restore (a model in train mode,
gradients on) and wrong from the other. Written by the checks' author when
those entry states were added: `python benchmarks/bench_diagnostics.py --set entry_states`.
"""
from __future__ import annotations

from . import Mutation as M

MUTATIONS = [
    ("08", M("generate", "        model.train(was_training)                          # give the caller back the mode it had",
             "        model.train()                                      # back to training",
             ("came in eval mode",),
             "switches the model to train mode at the end, whatever mode it came in")),
    ("08", M("generate", "        model.train(was_training)                          # give the caller back the mode it had",
             "        model.train(was_training)\n        torch.set_grad_enabled(True)                       # gradients back on",
             ("autograd switched on",),
             "turns gradients on at the end, whatever the caller had")),
    ("10", M("evaluate", "        model.train(was_training)",
             "        model.train(was_training)\n        torch.set_grad_enabled(True)  # gradients back on for training",
             ("autograd switched on",),
             "turns gradients on at the end, whatever the caller had")),
]
