"""One check per notebook exercise. Each takes the learner's function (or
class), prints a per-quantity table, and raises CheckFailed (an
AssertionError) naming the likely bug when something is wrong."""
# torch imports torch._dynamo (with sympy) the first time a Python decomposition runs: a learner's function on the
# meta device, FlopCounterMode, an optimizer's step. Every notebook's checks do one of these, so the import (about
# 1 s of CPU) is paid here, in the notebook's setup cell, instead of by whichever check a learner runs first.
import torch._dynamo  # noqa: F401

from .attention import check_causal_attention, check_causal_mask, check_self_attention, check_split_merge
from .framework.check import FAIL_HOOKS, PASS_HOOKS, Check
from .framework.failure import CheckFailed, Delegation, show_check
from .framework.measure import randn
from .embeddings import check_embed, check_one_hot_embed, check_tie_weights, check_tied_logits
from .mlp import check_pre_norm_block, check_swiglu, check_swiglu_hidden
from .norms import check_layer_norm, check_rms_norm, check_rms_norm_module
from .rope import check_apply_rope, check_rope_cache, check_rotary_attention
from .rope_layouts import check_interleaved_to_half, check_meta_to_hf_attention
# notebooks 06-10
from .gqa import check_gqa_attention, check_gqa_step, check_repeat_kv
from .kv_cache import check_attention_step, check_cache_update, check_generate_greedy
from .sampling import check_sample_next, check_top_k_filter, check_top_p_filter
from .sampling_generate import check_generate
from .left_padding import check_generate_left_padded
from .perplexity import check_evaluate, check_nll_sum_and_count
from .perplexity_bigram import check_bigram_nll
from .training import check_get_batch, check_lm_loss, check_train_step
from .training_schedule import check_lr_schedule
from .training_accumulation import check_train_step_accumulated
from .model import check_attention_module, check_block, check_decoder
# what the model costs: parameters, FLOPs and bytes, predicted from the config (03, 05, 06, 07, 09)
from .accounting import (check_attention_flops, check_decode_bytes_per_token, check_kv_cache_bytes, check_param_counts,
                         check_train_step_costs)
from . import answers as _answers  # noqa: F401: registers the saver of passing answers (mylm/)
from .framework.calling import keeping_the_random_stream as _keeping_the_random_stream


for _name, _check in list(globals().items()):
    if _name.startswith("check_") and callable(_check):
        globals()[_name] = _keeping_the_random_stream(_check)
del _name, _check
