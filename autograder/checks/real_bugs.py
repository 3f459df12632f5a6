"""The seed's bugs injected into a real model: what each does to a greedy
answer and to perplexity, measured.

    rows = measure_bugs(model, prompt_ids, eval_ids, tokenizer.decode, stop_id=tokenizer.eos_id)
    print(table(rows))

`model` is a tinylm.Transformer (tinylm.pretrained.load_pretrained). Each bug
is a context manager that changes one thing and undoes it on exit: it swaps
one of the module-level functions tinylm.attention calls by name (the wrong
versions of autograder/checks/pitfalls.py), hooks a projection, changes the
model's mode, or, for the labels, changes what the loss is scored against.
"""
from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Callable, Iterator

import torch
import torch.nn.functional as F
from torch import nn

import tinylm
import tinylm.attention

from . import pitfalls
from .learner_model import swapped
from .real_model import greedy_ids


@dataclass
class Bug:
    name: str
    notebook: str                  # the notebook whose check catches it
    inject: Callable               # (model) -> context manager
    unshifted_labels: bool = False  # a loss bug: the model is untouched, the targets are wrong


@dataclass
class BugRun:
    bug: str
    notebook: str
    answer: str
    answer_ids: list[int]
    perplexity: float


def _gqa(wrong_attention):
    """A pitfalls attention (one key head per query head) with the kv heads repeated first, as causal_attention does."""
    def attention(q, k, v, dropout_p=0.0):
        n_rep = q.shape[1] // k.shape[1]
        return wrong_attention(q, tinylm.attention.repeat_kv(k, n_rep), tinylm.attention.repeat_kv(v, n_rep))
    return attention


@contextlib.contextmanager
def _reference_attention(model: nn.Module) -> Iterator[None]:
    """Every layer attends with tinylm.attention.causal_attention (the explicit softmax), so swapping it counts."""
    layers = [m for m in model.modules() if isinstance(m, tinylm.Attention)]
    saved = [m.attn_impl for m in layers]
    for m in layers:
        m.attn_impl = "reference"
    try:
        yield
    finally:
        for m, impl in zip(layers, saved):
            m.attn_impl = impl


@contextlib.contextmanager
def _attention_swapped(model: nn.Module, name: str, function) -> Iterator[None]:
    with _reference_attention(model), swapped(tinylm.attention, name, function):
        yield


@contextlib.contextmanager
def _rope_on_values(model: nn.Module) -> Iterator[None]:
    """v = apply_rope(v, ...) too: each layer remembers its start position, its v_proj output is rotated."""
    handles = []
    for attn in (m for m in model.modules() if isinstance(m, tinylm.Attention)):
        def remember(module, args, kwargs):
            cache = args[3] if len(args) > 3 else kwargs.get("cache")
            module.bug_start_pos = 0 if cache is None else cache.length

        def rotate(proj, args, out, attn=attn):
            B, T, _ = out.shape
            v = out.view(B, T, attn.n_kv_heads, attn.head_dim).transpose(1, 2)              # (B, n_kv, T, hd)
            v = tinylm.apply_rope(v, model.rope_cos, model.rope_sin, attn.bug_start_pos)
            return v.transpose(1, 2).reshape(B, T, attn.n_kv_heads * attn.head_dim)        # (B, T, n_kv·hd)

        handles += [attn.register_forward_pre_hook(remember, with_kwargs=True), attn.v_proj.register_forward_hook(rotate)]
    try:
        yield
    finally:
        for h in handles:
            h.remove()


@contextlib.contextmanager
def _dropout_on(model: nn.Module, p: float = 0.1) -> Iterator[None]:
    """A model fine-tuned with dropout p, left in train mode (no model.eval()) while it answers."""
    drops = [m for m in model.modules() if isinstance(m, nn.Dropout)]
    layers = [m for m in model.modules() if isinstance(m, tinylm.Attention)]
    saved = [m.p for m in drops], [m.dropout for m in layers], model.training
    for m in drops:
        m.p = p
    for m in layers:
        m.dropout = p
    model.train()
    torch.manual_seed(0)  # the dropped units differ run to run; one seed makes the table reproducible
    try:
        yield
    finally:
        for m, old in zip(drops, saved[0]):
            m.p = old
        for m, old in zip(layers, saved[1]):
            m.dropout = old
        model.train(saved[2])


BUGS = [
    Bug("RoPE applied to values too", "04", _rope_on_values),
    Bug("softmax over the query axis", "03",
        lambda m: _attention_swapped(m, "causal_attention", _gqa(pitfalls.attention_softmax_wrong_dim))),
    Bug("no 1/sqrt(head_dim) scale", "03",
        lambda m: _attention_swapped(m, "causal_attention", _gqa(pitfalls.attention_no_scale))),
    Bug("RoPE positions restart at 0 in each cached step", "06",
        lambda m: swapped(tinylm.attention, "apply_rope", pitfalls.apply_rope_no_offset)),
    Bug("kv heads tiled, not grouped (GQA)", "07",
        lambda m: _attention_swapped(m, "repeat_kv", pitfalls.repeat_kv_tiled)),
    Bug("dropout (p = 0.1) left on while generating", "08", _dropout_on),
    Bug("labels not shifted (scored against the input)", "09", lambda m: contextlib.nullcontext(), unshifted_labels=True),
]


@torch.no_grad()
def perplexity(model: nn.Module, ids: list[int], unshifted_labels: bool = False) -> float:
    """exp(mean NLL) of ids[1:] given what precedes them, one sequence without a cache."""
    x = torch.tensor([ids], device=next(model.parameters()).device)  # (1, T)
    logits = model(x[:, :-1])                                         # (1, T - 1, V)
    targets = x[:, :-1] if unshifted_labels else x[:, 1:]            # the bug: each position scored on its own input
    return math.exp(F.cross_entropy(logits[0].float(), targets[0]).item())


def measure_bugs(model: nn.Module, prompt_ids: list[int], eval_ids: list[int], decode, stop_id: int | None = None,
                 max_new_tokens: int = 20, bugs: list[Bug] = BUGS) -> list[BugRun]:
    """The clean model first, then each bug: its greedy answer to prompt_ids (with the KV
    cache) and its perplexity on eval_ids. The model is unchanged afterwards."""
    was_training = model.training
    model.eval()
    rows = []
    for bug in [Bug("none (the clean model)", "", lambda m: contextlib.nullcontext()), *bugs]:
        with bug.inject(model):
            answer = greedy_ids(model, prompt_ids, max_new_tokens, stop_id)
            ppl = perplexity(model, eval_ids, bug.unshifted_labels)
        model.eval()
        rows.append(BugRun(bug.name, bug.notebook, decode(answer), answer, ppl))
    model.train(was_training)
    return rows


def table(rows: list[BugRun], width: int = 60) -> str:
    """One line per bug: name, the notebook that catches it, perplexity (and its ratio to the clean model's), answer."""
    clean = rows[0].perplexity
    lines = [f"{'bug':48} {'nb':>3} {'perplexity':>12} {'x clean':>8}  greedy answer"]
    for r in rows:
        answer = r.answer.replace("\n", "\\n")
        answer = answer if len(answer) <= width else answer[:width - 3] + "..."
        lines.append(f"{r.bug:48} {r.notebook:>3} {r.perplexity:12.4g} {r.perplexity / clean:8.3g}  {answer!r}")
    return "\n".join(lines)
