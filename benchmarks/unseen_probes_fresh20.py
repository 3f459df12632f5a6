"""Probes that verify_unseen.py adds for the fresh20 set, where the shared
probes of unseen_probes.py do not reach the situation a mistake is about:
the mode a model is in while evaluate runs its forward passes (a model
handed over in train mode must be measured in eval mode), and the positions
generate_left_padded hands the model (each row counted from 0 at its first
real token, which the tokens of a RoPE model do not show). Each compares the
learner's answer with what the exercise asks; no check of the course is
run."""
from __future__ import annotations

import torch

import tinylm
from benchmarks.unseen_probes import Recorder
from benchmarks.verify_heldout import attempt


def left_padded_positions(ns, lengths: tuple, seed: int) -> list:
    """The positions the learner's generate_left_padded hands a small RoPE model at each forward pass (prompts of
    `lengths` tokens, 2 new tokens), as lists."""
    model = tinylm.Transformer(tinylm.ModelConfig(vocab_size=32, d_model=16, n_layers=1, n_heads=2, n_kv_heads=2,
                                                  max_seq_len=32)).eval()
    gen = torch.Generator().manual_seed(seed)
    prompts = [torch.randint(1, 32, (n,), generator=gen) for n in lengths]
    seen: list = []
    hook = model.register_forward_pre_hook(lambda m, a, kw: seen.append(kw.get("positions")), with_kwargs=True)
    try:
        ns["generate_left_padded"](model, prompts, 2, tinylm.KVCache(model.config, len(prompts)))
    finally:
        hook.remove()
    return [p.tolist() if isinstance(p, torch.Tensor) else p for p in seen]


def probe_06(ns) -> dict:
    return {"generate_left_padded, prompts of 2 and 5 tokens: positions of the prompt's forward pass":
            attempt(lambda: (left_padded_positions(ns, (2, 5), 201) or [None])[0])}


def probe_10(ns) -> dict:
    gen = torch.Generator().manual_seed(200)
    batches = [(torch.randint(0, 16, (2, 5), generator=gen), torch.randint(0, 16, (2, 5), generator=gen))]

    def modes_seen() -> list:
        model = Recorder().train()
        ns["evaluate"](model, batches)
        return model.training_seen
    return {"evaluate, model handed over in train mode: training flag of each forward": attempt(modes_seen)}


EXTRA_PROBES = {"06": probe_06, "10": probe_10}
