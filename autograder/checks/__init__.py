"""One check per notebook exercise. Each takes the learner's function (or
class), prints a per-quantity table, and raises CheckFailed (an
AssertionError) naming the likely bug when something is wrong."""
from .attention import check_causal_attention, check_causal_mask, check_self_attention, check_split_merge
from .core import Check, CheckFailed, randn, show_check
from .embeddings import check_embed, check_one_hot_embed, check_tie_weights, check_tied_logits
from .mlp import check_pre_norm_block, check_swiglu, check_swiglu_hidden
from .norms import check_layer_norm, check_rms_norm, check_rms_norm_module
from .rope import check_apply_rope, check_rope_cache, check_rotary_attention
