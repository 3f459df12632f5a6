"""Experiments that show why: small models trained side by side on the course
corpus (same seed, same batches, same steps), one function per claim of the
course, each returning a dataclass of curves, and one plot per result kind.

    from tinylm import experiments
    result = experiments.attention_scale(tinylm.course_corpus(), steps=150)
    experiments.plot_attention_scale(result)

The CLI reruns any of them longer: python -m tinylm experiment NAME --steps N.
In a notebook, `paced` runs one on this machine's time (a slice first, an
announced shorter variant where the full one would be too slow), and
`verdicts` words its conclusions from its own numbers.
"""
from .catalog import (EXPERIMENTS, KVResult, MoEResult, PositionResult, ScaleResult, SweepResult, TrainingChoices,
                      attention_scale, training_choices,
                      block_order, clipping, kv_heads, learning_rates, mlp, moe, norms, positions, warmup)
from .plots import (plot_attention_scale, plot_curves, plot_kv_heads, plot_lr_sweep, plot_moe, plot_positions,
                    plot_training_choices)
from .runs import (SMALL_MODEL, SMALL_TRAIN, Arm, small_model, Curves, attention_entropy, entropy_vs_head_dim, kv_bytes_per_token,
                   loss_per_position, train_side_by_side, uniform_causal_entropy, with_steps, yardsticks)
from .pacing import PacedRun, announce, choose, paced, use_threads
from .verdicts import Comparison, Yardsticks, compare, final_losses, largest_rise, lowest, seed_spread, values_text
from .variants import (GELUMLP, MoEMLP, PostNormBlock, TokenAndPosition, UnscaledAttention, gelu_hidden_size,
                       with_gelu_mlp, with_layer_norm, with_learned_positions, with_moe, with_post_norm,
                       with_unscaled_attention, without_norm, without_positions)
