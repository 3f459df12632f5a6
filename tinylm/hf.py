"""Exact weight conversion to and from Hugging Face `LlamaForCausalLM`.

Both models use the half-split RoPE form, so no q/k permutation is needed:
the conversion is a renaming of tensors. transformers is imported lazily
and is only needed for these two functions.
"""
from __future__ import annotations

import torch

from .config import ModelConfig
from .model import Transformer

# tinylm name -> Hugging Face name, with {i} the layer index.
_LAYER_NAMES = {
    "attn_norm.weight": "input_layernorm.weight",
    "attn.q_proj.weight": "self_attn.q_proj.weight",
    "attn.k_proj.weight": "self_attn.k_proj.weight",
    "attn.v_proj.weight": "self_attn.v_proj.weight",
    "attn.o_proj.weight": "self_attn.o_proj.weight",
    "mlp_norm.weight": "post_attention_layernorm.weight",
    "mlp.gate_proj.weight": "mlp.gate_proj.weight",
    "mlp.up_proj.weight": "mlp.up_proj.weight",
    "mlp.down_proj.weight": "mlp.down_proj.weight",
}


def _name_map(config: ModelConfig) -> dict[str, str]:
    names = {"tok_emb.weight": "model.embed_tokens.weight", "norm.weight": "model.norm.weight"}
    if not config.tie_embeddings:
        names["lm_head.weight"] = "lm_head.weight"
    for i in range(config.n_layers):
        for ours, theirs in _LAYER_NAMES.items():
            names[f"blocks.{i}.{ours}"] = f"model.layers.{i}.{theirs}"
    return names


def _import_transformers():
    try:
        import transformers
    except ImportError:
        raise ImportError(
            "to_hf_llama / from_hf_llama need the `transformers` package: pip install transformers "
            "(or install the course's dev extra: pip install -e '.[dev]')."
        ) from None
    return transformers


def _rope_theta(hf_config) -> float:
    # transformers 5 keeps rope_theta in rope_parameters (rope_scaling is an
    # alias there); transformers 4 has rope_theta and an optional rope_scaling.
    params = getattr(hf_config, "rope_parameters", None) or getattr(hf_config, "rope_scaling", None) or {}
    rope_type = params.get("rope_type", params.get("type", "default"))
    if rope_type != "default":
        raise ValueError(f"from_hf_llama: RoPE scaling of type {rope_type!r} is not supported; tinylm implements plain RoPE.")
    return float(params.get("rope_theta", getattr(hf_config, "rope_theta", 10000.0)))


# ModelConfig field -> LlamaConfig field, for the fields that map one to one.
_CONFIG_FIELDS = {
    "vocab_size": "vocab_size",
    "d_model": "hidden_size",
    "d_ff": "intermediate_size",
    "n_layers": "num_hidden_layers",
    "n_heads": "num_attention_heads",
    "n_kv_heads": "num_key_value_heads",
    "max_seq_len": "max_position_embeddings",
    "norm_eps": "rms_norm_eps",
    "tie_embeddings": "tie_word_embeddings",
    "dropout": "attention_dropout",
}


def hf_llama_config(config: ModelConfig, bos_token_id: int | None = None, eos_token_id: int | None = None):
    """The LlamaConfig describing the same architecture as `config`.

    The special token ids default to None, not LlamaConfig's 1 and 2: in
    tinylm's byte vocabulary those are ordinary bytes, and transformers'
    generate would stop at the first byte 0x02. Pass a real tokenizer's ids
    (e.g. tinylm.pretrained.load_tokenizer().eos_id) for a model that has them."""
    transformers = _import_transformers()
    for name, value in (("bos_token_id", bos_token_id), ("eos_token_id", eos_token_id)):
        if value is not None and not (isinstance(value, int) and 0 <= value < config.vocab_size):
            raise ValueError(f"hf_llama_config: {name} must be a token id in [0, {config.vocab_size}) or None, got {value!r}.")
    fields = {theirs: getattr(config, ours) for ours, theirs in _CONFIG_FIELDS.items()}
    return transformers.LlamaConfig(**fields, head_dim=config.head_dim, rope_theta=config.rope_theta,
                                    hidden_act="silu", attention_bias=False, mlp_bias=False,
                                    bos_token_id=bos_token_id, eos_token_id=eos_token_id, pad_token_id=None)


@torch.no_grad()
def to_hf_llama(model: Transformer, bos_token_id: int | None = None, eos_token_id: int | None = None):
    """A `transformers.LlamaForCausalLM` holding exact copies of the weights,
    with no special token ids unless given (see hf_llama_config)."""
    transformers = _import_transformers()
    hf = transformers.LlamaForCausalLM(hf_llama_config(model.config, bos_token_id, eos_token_id))
    ours = model.state_dict()
    state = {theirs: ours[name] for name, theirs in _name_map(model.config).items()}
    missing, unexpected = hf.load_state_dict(state, strict=False)
    tied_head = ["lm_head.weight"] if model.config.tie_embeddings else []
    if unexpected or set(missing) - set(tied_head):
        raise RuntimeError(f"to_hf_llama: weight names did not line up (missing {missing}, unexpected {unexpected}).")
    return hf.to(dtype=next(model.parameters()).dtype).eval()


@torch.no_grad()
def from_hf_llama(hf_model) -> Transformer:
    """A tinylm Transformer with exact copies of a LlamaForCausalLM's weights."""
    c = hf_model.config
    unsupported = {
        "hidden_act": (c.hidden_act, "silu"),
        "attention_bias": (getattr(c, "attention_bias", False), False),
        "mlp_bias": (getattr(c, "mlp_bias", False), False),
    }
    for field, (value, needed) in unsupported.items():
        if value != needed:
            raise ValueError(f"from_hf_llama: LlamaConfig.{field}={value!r} is not supported; tinylm needs {needed!r}.")
    fields = {ours: getattr(c, theirs) for ours, theirs in _CONFIG_FIELDS.items()}
    fields["n_kv_heads"] = fields["n_kv_heads"] or c.num_attention_heads  # None means MHA in old configs
    fields["dropout"] = float(fields["dropout"])
    # Older configs leave head_dim out (or None), meaning hidden_size // num_attention_heads.
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    config = ModelConfig(**fields, head_dim=head_dim, rope_theta=_rope_theta(c))
    model = Transformer(config)
    theirs = hf_model.state_dict()
    model.load_state_dict({name: theirs[hf_name] for name, hf_name in _name_map(config).items()}, strict=not config.tie_embeddings)
    return model.to(dtype=next(hf_model.parameters()).dtype).eval()
