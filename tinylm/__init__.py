"""tinylm: the small Llama-style transformer that the course builds.

Conventions, used everywhere: attention tensors are (batch, heads, seq,
head_dim), everything else (batch, seq, d_model); nn.Linear weights are
[d_out, d_in]; RoPE uses the half-split (rotate_half) form of Llama
checkpoints; query head h reads key/value head h // (n_heads // n_kv_heads).
"""
from .attention import Attention, causal_attention, causal_mask, repeat_kv
from .config import ModelConfig, default_d_ff
from .device import device
from .embedding import embed, tied_logits
from .hf import from_hf_llama, hf_llama_config, to_hf_llama
from .kv_cache import KVCache
from .mlp import SwiGLU, swiglu
from .model import Block, Transformer, next_token_loss
from .norm import RMSNorm, rms_norm
from .rope import apply_rope, rope_cache, rotate_half
from .sampling import apply_temperature, generate, sample_next, top_k_filter, top_p_filter
from .tokenizer import ByteTokenizer

# --- data, training, evaluation (issue 3) ---
# Note: the functions `train` and `evaluate` shadow the submodules of the same
# name as attributes of the package; `from tinylm.train import Trainer` works.
from . import data
from .data import Corpus, course_corpus, load_text
from .evaluate import EvalResult, evaluate
from .train import History, TrainConfig, Trainer, get_batch, load_model, lr_at, plot_history, train
# --- end issue 3 ---
