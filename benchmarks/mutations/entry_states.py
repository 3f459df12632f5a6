"""Mistakes that only an entry state shows ("entry_states"): a function that
must give the caller back its model's mode or torch's grad mode, right when
the check hands it the state it happens to restore (a model in train mode,
gradients on) and wrong from the other; a step that must train from either
mode; and a sampler handed a caller's generator, which must draw from it and
leave torch's global generator as it was. Written by the checks' author when
those entry states were added: `python benchmarks/bench_diagnostics.py --set entry_states`.

SAME holds right answers that switch or restore a mode another way; the
checks must pass them.
"""
from __future__ import annotations

from . import Mutation
from . import Mutation as M

OWN_GENERATOR = ("never draws from the generator",)
GLOBAL = ("global generator", "never draws from the generator")

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
    # A model handed over in train mode (a training loop that decodes a sample between steps), under torch.no_grad().
    ("06", M("generate_greedy",
             "    cache.reset()                                   # stale positions from an earlier prompt would shift everything",
             "    model.eval()                                    # decoding: dropout off\n"
             "    cache.reset()                                   # stale positions from an earlier prompt would shift everything",
             ("came in train mode",),
             "switches the model to eval mode for decoding and never gives the caller's mode back",
             added="entry-states")),
    ("06", M("generate_greedy", "    return idx",
             "    torch.set_grad_enabled(True)                    # gradients back on for whoever trains next\n    return idx",
             ("autograd switched on",),
             "turns gradients on before returning, whatever the caller had",
             added="entry-states")),
    ("06", M("generate_left_padded",
             "    cache.reset()                                                       # it may hold an earlier batch",
             "    model.eval()                                                        # decoding: dropout off\n"
             "    cache.reset()                                                       # it may hold an earlier batch",
             ("came in train mode",),
             "switches the model to eval mode for decoding and never gives the caller's mode back",
             added="entry-states")),
    # A train step handed a model in train mode as well as in eval mode.
    ("09", M("train_step", "    model.train()                                # dropout on, whatever mode the caller left",
             "    model.train(not model.training)              # switch to training",
             ("came in train mode",),
             "flips the mode instead of setting train mode: right from eval mode, eval mode from train mode",
             added="entry-states")),
    ("09", M("train_step_accumulated",
             "    model.train()                                                     # as in train_step\n", "",
             ("eval mode left on",),
             "never switches the model to train mode: a model handed over in eval mode trains with dropout off "
             "(the check's model has none, so no value shows it)",
             added="entry-states")),
    # A caller's generator: drawn from, and torch's global generator left as it was.
    ("08", M("sample_next",
             "    return torch.multinomial(probs, num_samples=1, generator=generator).squeeze(-1)  # (B, 1) -> (B,)",
             "    if generator is not None:                 # a generator of its own, seeded like the caller's\n"
             "        generator = torch.Generator().manual_seed(generator.initial_seed())\n"
             "    return torch.multinomial(probs, num_samples=1, generator=generator).squeeze(-1)",
             OWN_GENERATOR,
             "draws from a fresh generator seeded with the caller's seed: the caller's never moves, so every call "
             "with it repeats the same draw",
             added="entry-states")),
    ("08", M("sample_next",
             "    return torch.multinomial(probs, num_samples=1, generator=generator).squeeze(-1)  # (B, 1) -> (B,)",
             "    if generator is not None:                 # reproducible: seed torch with the caller's seed\n"
             "        torch.manual_seed(generator.initial_seed())\n"
             "    return torch.multinomial(probs, num_samples=1).squeeze(-1)",
             GLOBAL,
             "reseeds torch's global generator with the caller's seed and draws from it",
             added="entry-states")),
    ("09", M("get_batch",
             "    starts = torch.randint(len(data) - seq_len, (batch_size,), generator=generator)  # (B,) in [0, N - T - 1]",
             "    if generator is not None:                                                        # reproducible batches\n"
             "        torch.manual_seed(generator.initial_seed())\n"
             "    starts = torch.randint(len(data) - seq_len, (batch_size,))",
             GLOBAL,
             "reseeds torch's global generator with the caller's seed and draws the starts from it",
             added="entry-states")),
    ("08", M("generate", "    idx = prompt\n",
             "    idx = prompt\n"
             "    if generator is not None:                               # reproducible: seed torch once\n"
             "        torch.manual_seed(generator.initial_seed())\n"
             "        generator = None\n",
             GLOBAL,
             "reseeds torch's global generator with the caller's seed and samples from it",
             added="entry-states")),
]

# Right answers: a mode switched and given back around the whole call.
SAME = [
    ("06", Mutation("generate_greedy", "    return idx", "    return idx", (),
                    "decodes in eval mode and gives the caller's mode back",
                    extra="_greedy_steps = generate_greedy\n\n\n"
                          "def generate_greedy(model, prompt, max_new_tokens, cache):\n"
                          "    was_training = model.training\n"
                          "    model.eval()\n"
                          "    try:\n"
                          "        return _greedy_steps(model, prompt, max_new_tokens, cache)\n"
                          "    finally:\n"
                          "        model.train(was_training)")),
    ("09", Mutation("train_step", "    return loss.item()", "    return loss.item()", (),
                    "trains in train mode and gives the caller's mode back afterwards",
                    extra="_step = train_step\n\n\n"
                          "def train_step(model, optimizer, x, y, grad_clip=1.0):\n"
                          "    was_training = model.training\n"
                          "    try:\n"
                          "        return _step(model, optimizer, x, y, grad_clip)\n"
                          "    finally:\n"
                          "        model.train(was_training)")),
]
