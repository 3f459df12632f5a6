"""What the model costs, measured: parameters of tinylm's model built on the
meta device, FLOPs counted by FlopCounterMode, bytes of a KV cache and of
the training state after an AdamW step. The references of the accounting
checks, and the measurements the notebooks' prediction cells compare with."""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import unittest.mock
from typing import Any, Callable

import torch
import torch.nn.functional as F
import tinylm



# ---------------------------------------------------------------------------
# measurements (also used by the notebooks' prediction-against-measurement cells)

COMPONENTS = ("embedding", "attention", "mlp", "norms", "lm_head")


def component_of(name: str) -> str:
    """The component a tinylm parameter name belongs to (`blocks.3.attn.k_proj.weight` -> attention)."""
    if name.startswith("tok_emb."):
        return "embedding"
    if name.startswith("lm_head."):
        return "lm_head"
    if ".attn." in name:
        return "attention"
    if ".mlp." in name:
        return "mlp"
    if len(name.split(".")) > 1 and "norm" in name.split(".")[-2]:
        return "norms"
    return "other"


def measure_parameters(model: torch.nn.Module) -> dict[str, int]:
    """{component: p.numel() summed} over model.named_parameters(), which
    yields a shared (tied) Parameter once, under its first name (tok_emb).
    Parameters of no known component (a name tinylm does not use) are
    counted under "other", present only when there are some."""
    counts = dict.fromkeys(COMPONENTS, 0)
    for name, p in model.named_parameters():
        part = component_of(name)
        counts[part] = counts.get(part, 0) + p.numel()
    return counts


def config_parameters(config: tinylm.ModelConfig) -> dict[str, int]:
    """measure_parameters of tinylm's model for `config`, built on the meta device (measured once per config)."""
    return dict(_config_parameters(config))


@functools.lru_cache(maxsize=64)
def _config_parameters(config: tinylm.ModelConfig) -> tuple:
    return tuple(measure_parameters(meta_model(config)).items())


def meta_model(config: tinylm.ModelConfig, **changes) -> tinylm.Transformer:
    """tinylm's Transformer for `config` on the meta device: every parameter
    has its shape and dtype, none has memory or values."""
    config = dataclasses.replace(config, **changes) if changes else config
    with torch.device("meta"), initialisers_skipped():
        model = tinylm.Transformer(config)
    model._checked_ids = lambda idx, cache: idx  # the id check reads values, which meta tensors do not have
    return model


@contextlib.contextmanager
def initialisers_skipped():
    """torch.nn.init's in-place initialisers made no-ops: on the meta device
    they write no values, yet each call costs about a millisecond (most of
    the time a meta model takes to build, which the checks build often)."""
    names = [name for name in vars(torch.nn.init) if name.endswith("_") and not name.startswith("_")]
    with contextlib.ExitStack() as stack:
        for name in names:
            stack.enter_context(unittest.mock.patch.object(torch.nn.init, name, lambda tensor, *args, **kwargs: tensor))
        yield


def flop_counter():
    """A silent torch.utils.flop_counter.FlopCounterMode (its module is
    imported when first needed; with torch 2.14 that takes about 2 ms)."""
    from torch.utils.flop_counter import FlopCounterMode

    return FlopCounterMode(display=False)


def flop_count(run: Callable[[], Any]) -> int:
    """The FLOPs FlopCounterMode counts while run() executes."""
    with flop_counter() as counter:
        run()
    return int(counter.get_total_flops())


def kv_cache_nbytes(config: tinylm.ModelConfig, seq_len: int, batch_size: int = 1,
                    dtype: torch.dtype = torch.float32) -> int:
    """nbytes of the K and V tensors of a tinylm.KVCache that holds exactly
    seq_len positions (allocated on the meta device: sizes only)."""
    cache = tinylm.KVCache(dataclasses.replace(config, max_seq_len=seq_len), batch_size, device="meta", dtype=dtype)
    return cache.k.nbytes + cache.v.nbytes


def train_step_flops(model: torch.nn.Module, batch_size: int, seq_len: int, keep_grads: bool = False) -> int:
    """FLOPs of one forward and backward pass of a next-token loss on random
    ids, as FlopCounterMode counts them (on the model's own device); the
    gradients are dropped afterwards unless keep_grads."""
    device = next(model.parameters()).device
    ids = torch.zeros(batch_size, seq_len, dtype=torch.long, device=device)

    def step():
        logits = model(ids)
        F.cross_entropy(logits.flatten(0, 1), ids.flatten()).backward()

    flops = flop_count(step)
    if not keep_grads:
        model.zero_grad(set_to_none=True)
    return flops


def block_flops(config: tinylm.ModelConfig, seq_len: int, batch_size: int = 1) -> dict[str, int]:
    """FlopCounterMode's count of one block's forward pass, split into its
    attention and its MLP (attention written out, on the meta device)."""
    config = dataclasses.replace(config, attn_impl="reference", max_seq_len=seq_len)
    with torch.device("meta"):
        block = tinylm.Block(config)
        cos, sin = tinylm.rope_cache(config.head_dim, seq_len, config.rope_theta)
    x = torch.empty(batch_size, seq_len, config.d_model, device="meta")
    with flop_counter() as counter:
        block(x, cos, sin)
    counts = counter.get_flop_counts()
    return {"attention": int(sum(counts.get("Block.attn", {}).values())),
            "mlp": int(sum(counts.get("Block.mlp", {}).values()))}


def saved_activation_bytes(model: torch.nn.Module, ids: torch.Tensor) -> int:
    """Bytes of the tensors autograd saves for the backward pass during one
    forward pass of `model` on `ids` (torch.autograd.graph.saved_tensors_hooks):
    each storage counted once, the parameters left out (they exist anyway)."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    storages: dict[int, int] = {}

    def pack(t: torch.Tensor):
        ptr = t.untyped_storage().data_ptr()
        if ptr not in params:
            storages[ptr] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(ids)
    return sum(storages.values())


def training_state_nbytes(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, int]:
    """Bytes of what training keeps between steps: the parameters, their
    gradients and AdamW's two moments (exp_avg, exp_avg_sq; its step counters
    are left out), measured on the tensors that exist."""
    params = list(model.parameters())
    moments = sum(t.nbytes for p in params for key, t in optimizer.state.get(p, {}).items()
                  if key in ("exp_avg", "exp_avg_sq"))
    return {"weights": sum(p.nbytes for p in params),
            "grads": sum(p.grad.nbytes for p in params if p.grad is not None),
            "adam_moments": moments}


def after_one_adamw_step(config: tinylm.ModelConfig, batch_size: int = 2, seq_len: int = 8) -> dict[str, int]:
    """training_state_nbytes of tinylm's model for `config` after one AdamW
    step, all on the meta device (the tensors exist with their sizes)."""
    model = meta_model(config, max_seq_len=max(seq_len, 1))
    ids = torch.zeros(batch_size, seq_len, dtype=torch.long, device="meta")
    F.cross_entropy(model(ids).flatten(0, 1), ids.flatten()).backward()
    return adamw_step_state(model)


def adamw_step_state(model: torch.nn.Module) -> dict[str, int]:
    """training_state_nbytes after one AdamW step on the gradients the model holds."""
    optimizer = torch.optim.AdamW(model.parameters(), foreach=False)
    optimizer.step()
    return training_state_nbytes(model, optimizer)


