"""The pretrained model (tinylm.pretrained, SmolLM2-135M-Instruct) in the
learner's own decoder, and the greedy chat replies the notebooks compare.

    why = tinylm.pretrained.why_unavailable()      # None when the weights are installed
    model, tokenizer = pretrained_learner_model()  # your notebook-05 Transformer, SmolLM2's weights
    reply = greedy_reply(model, tokenizer, "What is the capital of France?", max_new_tokens=24)

While grading (NBGRADER_EXECUTION set) nothing here may run: the notebooks
skip their real-model cells, so grading never loads 135 M parameters.
"""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Iterator

import torch
from torch import nn

import tinylm
from tinylm import pretrained

from .learner_model import learner_cache, learner_model

EXERCISE = "notebook 05's `Transformer` exercise (section 5)"


def _mismatch(model: nn.Module, state: dict[str, torch.Tensor]) -> str:
    """What keeps `state` from loading into `model`: names missing, names extra, shapes that differ."""
    own = model.state_dict()
    missing = sorted(set(state) - set(own))
    extra = sorted(set(own) - set(state))
    shapes = [f"{name}: yours {tuple(own[name].shape)}, the checkpoint's {tuple(t.shape)}"
              for name, t in state.items() if name in own and own[name].shape != t.shape]
    parts = []
    if missing:
        parts.append(f"your model has no parameter named {', '.join(missing[:3])}" + (" ..." if len(missing) > 3 else ""))
    if extra:
        parts.append(f"the checkpoint has nothing for your {', '.join(extra[:3])}" + (" ..." if len(extra) > 3 else ""))
    if shapes:
        parts.append("shapes differ: " + "; ".join(shapes[:3]))
    return "; ".join(parts)


def load_into(model: nn.Module, state: dict[str, torch.Tensor]) -> nn.Module:
    """load_state_dict(strict=True), failing with a message that names the learner's exercise."""
    problem = _mismatch(model, state)
    if problem:
        raise ValueError(f"the pretrained weights do not fit your decoder: {problem}. The parameter names and shapes "
                         f"come from {EXERCISE}: use tinylm's names (tok_emb, blocks.i.attn_norm, blocks.i.attn.q_proj "
                         "..., norm, lm_head tied to tok_emb) and re-run its check.")
    model.load_state_dict(state, strict=True)
    return model


_INIT_FUNCTIONS = ("normal_", "uniform_", "kaiming_uniform_", "kaiming_normal_", "trunc_normal_", "xavier_uniform_",
                   "xavier_normal_", "zeros_", "ones_", "constant_")


@contextlib.contextmanager
def skipped_init() -> Iterator[None]:
    """torch.nn.init's functions do nothing inside: a model that is about to
    receive 134 M loaded weights skips drawing random ones first (seconds on a
    CPU). Every parameter must then be loaded (load_into is strict)."""
    saved = {name: getattr(nn.init, name) for name in _INIT_FUNCTIONS}
    for name in _INIT_FUNCTIONS:
        setattr(nn.init, name, lambda tensor, *args, **kwargs: tensor)
    try:
        yield
    finally:
        for name, function in saved.items():
            setattr(nn.init, name, function)


def pretrained_learner_model(device=None, max_seq_len: int = 2048, *, quiet: bool = False):
    """(the learner's model with SmolLM2's weights, in eval mode; SmolLM2's tokenizer).
    Raises RuntimeError with the install line when the weights are not installed."""
    why = pretrained.why_unavailable()
    if why is not None:
        raise RuntimeError(why)
    with skipped_init():
        model = learner_model(pretrained.pretrained_config(max_seq_len), quiet=quiet)
    load_into(model, pretrained.pretrained_state_dict(max_seq_len))
    model = model.to(device) if device is not None else model
    return model.eval(), pretrained.load_tokenizer()


@dataclass
class Reply:
    ids: list[int]      # the new tokens, without the prompt (the end-of-turn token excluded)
    text: str
    seconds: float


@torch.no_grad()
def greedy_ids(model: nn.Module, prompt: list[int], max_new_tokens: int, stop_id: int | None = None,
               use_cache: bool = True) -> list[int]:
    """Greedy continuation of `prompt`, at most max_new_tokens, ending before stop_id.
    With use_cache the model gets a cache that fits it (learner_cache), else every
    step recomputes the whole sequence (what notebook 05's model can do)."""
    device = next(model.parameters()).device
    ids = torch.tensor([prompt], device=device)                         # (1, T)
    cache = learner_cache(model, batch_size=1) if use_cache else None
    step_input, new = ids, []
    for _ in range(max_new_tokens):
        logits = model(step_input, cache=cache)[:, -1]                  # (1, V)
        next_id = int(logits.argmax(-1))
        if next_id == stop_id:
            break
        new.append(next_id)
        ids = torch.cat((ids, torch.tensor([[next_id]], device=device)), dim=1)  # (1, T + 1)
        step_input = ids[:, -1:] if use_cache else ids
    return new


def greedy_reply(model: nn.Module, tokenizer, question: str, max_new_tokens: int = 24, use_cache: bool = True) -> Reply:
    """The model's greedy answer to a one-turn chat, stopped at the end-of-turn token."""
    start = time.perf_counter()
    new = greedy_ids(model, tokenizer.chat_ids(question), max_new_tokens, tokenizer.eos_id, use_cache)
    return Reply(new, tokenizer.decode(new), time.perf_counter() - start)


def hf_twin(model: nn.Module):
    """transformers' LlamaForCausalLM holding `model`'s weights (tinylm.to_hf_llama),
    built without drawing random weights first where transformers lets torch.nn.init decide."""
    with skipped_init():
        return tinylm.to_hf_llama(model)


def hf_greedy_reply(hf_model, tokenizer, question: str, max_new_tokens: int = 24) -> Reply:
    """transformers' own generate, greedy, on the same chat prompt and stop token."""
    start = time.perf_counter()
    prompt = torch.tensor([tokenizer.chat_ids(question)])
    with torch.no_grad():
        out = hf_model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=max_new_tokens,
                                do_sample=False, eos_token_id=tokenizer.eos_id, pad_token_id=tokenizer.eos_id)
    new = out[0, prompt.shape[1]:].tolist()
    new = new[:new.index(tokenizer.eos_id)] if tokenizer.eos_id in new else new
    return Reply(new, tokenizer.decode(new), time.perf_counter() - start)
