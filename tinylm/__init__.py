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
from .sampling import apply_temperature, generate, generate_stream, sample_next, top_k_filter, top_p_filter
from .tokenizer import ByteTokenizer

# The corpus, the training loop and evaluation. The modules are named
# training/evaluation so that the functions train/evaluate don't shadow them.
from . import data
from .data import Corpus, course_corpus, load_text
from .evaluation import EvalResult, evaluate
from .training import (History, TrainConfig, Trainer, TrainingDiverged, get_batch, load_model, lr_at,
                       plot_history, train, train_step_accumulated)
# SmolLM2-135M-Instruct's real weights in this model (imports gguf/tokenizers only when used).
from . import pretrained
