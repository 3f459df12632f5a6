"""A fifth held-out set of learner mistakes ("fresh2"): mistakes in none of the
project's mutation lists (nbNN.py, heldout.py, unseen.py, offlist.py,
fresh.py), which were read first precisely to avoid them. Written from the
learner's notebooks, the reference answers, tinylm and the seed note only,
without reading the checks, their tests or the diagnostics benchmark, and
never run through a check. Not part of the default run:
`python benchmarks/bench_diagnostics.py --set fresh2`.

Every mistake is one substitution in one answer cell's solution, of the kind
a learner makes writing the code from the prose or from code seen elsewhere:
an API that counts from the other end (kthvalue), one that takes a 1-D index
only (index_select), SiLU read as the input times a sigmoid, an option copied from a
training recipe (label_smoothing, dropout_p), a slice that keeps its axis, a
bare squeeze(), a constant of the example config written in, a guard left
out, a count that forgets one of K and V, of Adam's two moments or of SwiGLU's
three matrices, nanoGPT's unconditional model.train(), inference_mode for
no_grad, the makemore broadcasting bug. The accounting exercises
(attention_flops, param_counts, kv_cache_bytes, decode_bytes_per_token,
train_step_costs) have their own. The entries with a `regime` are right in the
default situation and wrong only there (a batch of one or a one-token step,
a batch of more than one, logits with more than two axes, a trained gain
loaded from a checkpoint, another eps, sequences past 256 positions, a KV
cache, a context shorter than max_seq_len, a group size other than 2, a
nucleus boundary exactly at p, temperature 0, generated ids used in training,
a schedule with one decay step, a model evaluated in eval mode, an evaluation
of more than a few hundred tokens).

The comment above each entry names the nearest entry of the other lists and
how this one differs; a mistake counts as in a list when the same cell
already holds the same wrong idea. `benchmarks/verify_unseen.py --set fresh2`
proves each one a real bug against tinylm, PyTorch built-ins, the FLOP
counter or closed forms.
"""
from __future__ import annotations

from .unseen import Unseen as M

MUTATIONS = {
    "01": [
        # nearest: offlist one_hot_embed multiplying with torch.mm (2-D only); here the lookup itself takes a 1-D index only
        M("embed", "return weight[ids]", "return weight.index_select(0, ids)",
          ("index_select", "1-d", "one-dimensional", "flat", "(b, t)", "any shape", "leading shape", "batch", "vector"),
          "looks the rows up with index_select, whose index must be 1-D: right for a flat list of ids, raises for the "
          "(B, T) ids the model passes"),
        # nearest: uns sample_next squeezing every axis of size 1 (another cell); here the lookup is squeezed
        M("embed", "return weight[ids]", "return weight[ids].squeeze()",
          ("squeeze", "size 1", "size-1", "batch of one", "one token", "(1, t", "(b, 1", "axis", "shape"),
          "tidies the lookup with a bare squeeze(): right for (B, T) ids with B, T > 1, drops the batch axis of a batch "
          "of one and the position axis of a one-token decoding step",
          regime="a batch of one sequence, or one token per sequence (a decoding step)"),
    ],
    "02": [
        # nearest: nb02 rms_norm averaging over axis 1 / summing the squares; here the sum is over the features, the count is T
        M("rms_norm", "x32.pow(2).mean(dim=-1, keepdim=True)", "x32.pow(2).sum(dim=-1, keepdim=True) / x.shape[1]",
          ("shape[1]", "shape[-1]", "sequence length", "number of features", "d_model", "count", "mean", "3-d", "divides"),
          "sums the squares over the features but divides by x.shape[1]: that is d for a (T, d) input, the sequence "
          "length for the (B, T, d) input of the model"),
        # nearest: nb02 layer_norm's E[x²] - E[x]² (right on paper, cancels badly) and its forgetting to centre (nothing
        # centred); here the output is centred and the variance is E[x²] alone, the E[x]² term left out
        M("layer_norm", "var = centred.pow(2).mean(dim=-1, keepdim=True)", "var = x.pow(2).mean(dim=-1, keepdim=True)",
          ("centred", "uncentred", "mean square", "variance", "subtract the mean", "not centred", "mean of x", "x.pow"),
          "centres x but takes the variance from the uncentred x: the mean square, which is the variance only for "
          "tokens whose features have mean 0"),
        # nearest: nb02 RMSNorm hard-coding eps (another cell); here layer_norm writes the default 1e-5 in for its eps argument
        M("layer_norm", "torch.rsqrt(var + eps) + bias", "torch.rsqrt(var + 1e-5) + bias",
          ("eps", "epsilon", "1e-5", "hard-coded", "hard coded", "argument", "ignored"),
          "writes LayerNorm's usual 1e-5 in place of the eps argument: right for the default, wrong for a caller's eps",
          regime="an eps other than the default 1e-5"),
        # nearest: offlist RMSNorm with a scalar gain; here the gain has one per feature but a (1, dim) shape
        M("RMSNorm", "nn.Parameter(torch.ones(dim))", "nn.Parameter(torch.ones(1, dim))  # a row: broadcasts over tokens",
          ("shape", "(1, dim)", "(dim,)", "state_dict", "load", "checkpoint", "size mismatch", "gain", "extra axis"),
          "stores the gain as a (1, dim) row: a fresh module computes the same, but a trained (dim,) gain (a checkpoint, "
          "tinylm's or Hugging Face's) no longer loads, and a (dim,) input comes back (1, dim)",
          regime="loading a trained gain (a checkpoint's state_dict)"),
    ],
    "03": [
        # nearest: nb03 self_attention splitting into a single head; here the head size is passed as the head count
        M("self_attention", "split_heads(F.linear(x, w), n_heads)", "split_heads(F.linear(x, w), x.shape[-1] // n_heads)",
          ("n_heads", "head_dim", "head size", "number of heads", "d // n_heads", "heads", "split_heads"),
          "passes the head size d // n_heads where split_heads wants the number of heads: right only when d_model is "
          "n_heads squared"),
        # nearest: fresh attention_flops counting the causal triangle (a factor 2); here each head is as wide as d_model
        M("attention_flops", "per_head = 2 * T * T * head_dim", "per_head = 2 * T * T * d",
          ("head_dim", "d_model", "n_heads", "per head", "times too", "hd", "head width"),
          "sizes each head's scores and mix with d_model instead of head_dim: n_heads times too many FLOPs"),
        # nearest: fresh attention_flops forgetting the batch in the projections; here q, k, v count as one d x d matmul
        M("attention_flops", '"qkv_proj": 3 * projection', '"qkv_proj": projection',
          ("three", "3 *", "q, k and v", "qkv", "fused", "3d", "three projections", "qkv_proj"),
          "counts the q, k, v projections as one d x d matmul, as if fused into one: the fused weight is d x 3d, three "
          "times the FLOPs"),
    ],
    "04": [
        # nearest: offlist rope_cache numbering positions with arange(max_seq_len - 1) (how many); here their precision
        M("rope_cache", "torch.arange(max_seq_len, dtype=torch.float32)", "torch.arange(max_seq_len, dtype=torch.bfloat16)",
          ("bfloat16", "position", "precision", "rounded", "256", "float32", "dtype", "mantissa", "long"),
          "numbers the positions in bfloat16, the model's dtype: its 8-bit mantissa rounds every position above 256 to a "
          "neighbour, so later tokens share angles", regime="sequences longer than 256 positions"),
    ],
    "05": [
        # nearest: nb05 swiglu gating with the sigmoid (GLU) and fresh's SiLU on the input; here sigmoid(a) times x, not a
        M("swiglu", "gate = F.silu(x @ w_gate.T)", "gate = (x @ w_gate.T).sigmoid() * x  # silu: input times its sigmoid",
          ("silu", "a * sigmoid(a)", "pre-activation", "times x", "input", "sigmoid", "shape", "broadcast", "d_ff"),
          "reads SiLU as 'the input times its sigmoid' and multiplies sigmoid(x W_gateᵀ) by x itself, not by the "
          "pre-activation: wrong values, and a shape error unless d_ff = d_model"),
        # nearest: offlist Transformer computing the logits without the final norm; here the final norm is GPT-2's LayerNorm
        M("Transformer", "self.norm = RMSNorm(config.d_model, config.norm_eps)",
          "self.norm = nn.LayerNorm(config.d_model, eps=config.norm_eps)",
          ("layernorm", "layer norm", "rmsnorm", "bias", "centre", "mean", "final norm", "gpt-2", "norm.bias"),
          "builds the final norm as nn.LayerNorm, as in GPT-2: it centres the stream and adds a bias Llama's final "
          "RMSNorm does not have"),
        # nearest: heldout Transformer calling the blocks without their index (all share slot 0); here one slot too far
        M("Transformer", "x = block(x, self.rope_cos, self.rope_sin, cache, i)",
          "x = block(x, self.rope_cos, self.rope_sin, cache, i + 1)  # layers are numbered from 1",
          ("layer_idx", "layer index", "off by one", "i + 1", "0-based", "cache slot", "out of range", "index"),
          "numbers the layers from 1 when it hands each block its cache slot: without a cache nothing changes, with one "
          "each layer writes the next layer's slot and the last is out of range", regime="decoding with a KV cache"),
        # nearest: fresh param_counts recomputing d_ff by the 8/3 rule (the width); here the number of MLP matrices
        M("param_counts", '"mlp": L * 3 * d * config.d_ff,', '"mlp": L * 2 * d * config.d_ff,',
          ("three", "gate", "3 *", "swiglu", "gate_proj", "two matrices", "up and down", "mlp"),
          "counts two MLP matrices per block, the up and down of a GPT-2 MLP: SwiGLU has three (gate, up, down)"),
    ],
    "06": [
        # nearest: fresh kv_cache_bytes with 4 bytes per number (the dtype); here the V half is forgotten
        M("kv_cache_bytes", "per_position = 2 * config.n_layers", "per_position = config.n_layers",
          ("values", "keys and values", "k and v", "factor 2", "twice", "half", "2 *", "v cache"),
          "counts the keys only: the cache holds a value for every key, twice as many bytes"),
        # nearest: fresh attention_flops forgetting the batch in the projections (another cell); here the cache's batch
        M("kv_cache_bytes", "* seq_len * batch_size * dtype.itemsize", "* seq_len * dtype.itemsize",
          ("batch", "batch_size", "per sequence", "every sequence", "b ·", "times the batch"),
          "sizes the cache of one sequence: right for the default batch_size=1, batch_size times too small for more",
          regime="batch_size > 1"),
        # nearest: none about randomness in attention_step; dropout_p copied from training code
        M("attention_step", "attn_mask=mask)", "attn_mask=mask, dropout_p=0.1)",
          ("dropout", "dropout_p", "random", "eval", "training", "nondeterministic", "inference", "deterministic"),
          "copies dropout_p=0.1 from training code into the SDPA call: SDPA applies it whatever the module's mode, so "
          "every decoding step drops a tenth of the attention weights at random"),
        # nearest: nb06 generate_greedy taking the logits of the first position; here the last, with its axis kept
        M("generate_greedy", "logits = model(step_input, cache=cache)[:, -1]",
          "logits = model(step_input, cache=cache)[:, -1:]",
          ("[:, -1]", "-1:", "position axis", "(b, 1, 1)", "3-d", "shape", "slice", "keeps the axis", "dimensions"),
          "slices the last position with -1:, which keeps the position axis: argmax gives (B, 1, 1) and the "
          "concatenation with the (B, T) ids raises"),
    ],
    "07": [
        # nearest: fresh decode_bytes_per_token sizing the cache with n_heads (heads); here with max_seq_len (positions)
        M("decode_bytes_per_token", "* context_len * size", "* config.max_seq_len * size",
          ("context_len", "max_seq_len", "filled", "allocated", "preallocated", "positions", "whole cache"),
          "sizes the cache read by max_seq_len, the preallocated cache, instead of the context_len positions a step "
          "actually reads", regime="a context shorter than max_seq_len"),
        # nearest: fresh decode_bytes_per_token counting a tied head twice; here the blocks' norm gains are left out
        M("decode_bytes_per_token", "per_block = attention + 3 * d * config.d_ff + 2 * d",
          "per_block = attention + 3 * d * config.d_ff",
          ("norm", "gain", "2 * d", "rmsnorm", "attn_norm", "mlp_norm", "every parameter"),
          "counts only the matrices of a block: its two norm gains, 2 · d_model numbers, are read every step too"),
        # nearest: nb07 gqa_attention computing n_rep upside down; here the example config's group size is written in
        M("gqa_attention", "n_rep = q.shape[1] // k.shape[1]", "n_rep = 2  # query heads per kv head",
          ("n_rep", "hard-coded", "hard coded", "group size", "q.shape[1] // k.shape[1]", "mqa", "mha", "ratio"),
          "writes in the example's group size 2 instead of n_heads // n_kv_heads: right whenever n_heads = 2 · "
          "n_kv_heads (the example's 4 on 2), wrong for MQA, for MHA and for any other ratio",
          regime="a group size other than 2 (MQA, MHA, ...)"),
    ],
    "08": [
        # nearest: nb08 top_k_filter keeping the smallest; here kthvalue counts from the smallest, so V - k + 1 survive
        M("top_k_filter", "kth = logits.topk(k, dim=-1).values[..., -1:]",
          "kth = logits.kthvalue(k, dim=-1, keepdim=True).values",
          ("kthvalue", "smallest", "k-th smallest", "largest", "ascending", "topk", "v - k"),
          "takes the threshold from kthvalue, which counts from the smallest: all but the k - 1 smallest logits survive"),
        # nearest: fresh top_k_filter dropping the trailing axis ([..., -1]); here the axis is kept, but counted from the front
        M("top_k_filter", "values[..., -1:]", "values[:, -1:]",
          ("[..., -1:]", "[:, -1:]", "(b, t, v)", "3-d", "any number of axes", "leading axes", "ellipsis", "shape"),
          "slices the k-th largest with [:, -1:], written for (B, V): right for one row of logits per sequence, wrong "
          "for logits with more axes, such as a whole sequence's (B, T, V)", regime="logits with more than two axes"),
        # nearest: nb08 top_p_filter dropping the crossing token; here the boundary test is strict
        M("top_p_filter", "drop_sorted = mass_before >= p", "drop_sorted = mass_before > p",
          (">=", "> p", "boundary", "exactly p", "tie", "equal", "strict", "one token too many"),
          "drops a token only when the mass before it exceeds p: when that mass is exactly p the nucleus keeps one "
          "token too many", regime="a nucleus whose mass reaches exactly p (equal logits, p = 0.5)"),
        # nearest: uns sample_next squeezing every axis of size 1; here the greedy branch keeps its axis
        M("sample_next", "return logits.argmax(dim=-1)", "return logits.argmax(dim=-1, keepdim=True)",
          ("temperature 0", "temperature=0", "greedy", "keepdim", "(b, 1)", "(b,)", "shape"),
          "keeps the axis in the greedy branch: temperature 0 returns (B, 1) where sampling returns (B,)",
          regime="temperature 0"),
        # nearest: nb08 generate recording gradients (no no_grad); here inference_mode, whose tensors autograd refuses
        M("generate", "with torch.no_grad():", "with torch.inference_mode():",
          ("inference_mode", "inference tensor", "no_grad", "autograd", "backward", "saved for backward", "training"),
          "decodes under torch.inference_mode instead of no_grad: the ids it returns are inference tensors, which "
          "autograd refuses, so training on the generated text fails", regime="generated ids used in a training step"),
    ],
    "09": [
        # nearest: nb09 lm_loss taking the softmax before cross_entropy; here an option copied from a training recipe
        M("lm_loss", "targets.flatten(), ignore_index=-100)", "targets.flatten(), ignore_index=-100, label_smoothing=0.1)",
          ("label_smoothing", "label smoothing", "smoothing", "0.1", "not the nll", "uniform"),
          "copies label_smoothing=0.1 from a training recipe: the loss is no longer the NLL of the targets"),
        # nearest: nb09 lm_loss counting padding in the mean (no ignore_index); here the ignored id is the pad id 0
        M("lm_loss", "ignore_index=-100)", "ignore_index=0)  # 0 is the padding id",
          ("ignore_index", "-100", "id 0", "padding", "byte 0", "real token", "ignored"),
          "takes id 0 for the padding: the -100 padding reaches the loss, which raises on it, and every real target 0 "
          "is skipped"),
        # nearest: offlist lr_schedule dropping the 1/2 of the cosine; here its π
        M("lr_schedule", "math.cos(math.pi * min(progress, 1.0))", "math.cos(min(progress, 1.0))",
          ("pi", "π", "half cosine", "cos(π", "min_lr", "radians", "cosine"),
          "forgets π in the cosine: at the last step the rate has fallen only about a quarter of the way from max_lr to "
          "min_lr"),
        # nearest: nb09 lr_schedule decaying one step too long (the denominator); here the numerator counts from step 0
        M("lr_schedule", "(step - warmup_steps) / max(1,", "step / max(1,",
          ("warmup_steps", "progress", "step - warmup", "from step 0", "end of warmup", "jump", "discontinu"),
          "measures the decay's progress from step 0, not from the end of the warmup: the rate jumps down after the "
          "warmup and reaches min_lr warmup_steps early"),
        # nearest: fresh lr_schedule's integer division; here the max(1, ...) guard is left out
        M("lr_schedule", "max(1, total_steps - 1 - warmup_steps)", "(total_steps - 1 - warmup_steps)",
          ("zerodivision", "division by zero", "max(1", "decay steps", "zero", "warmup_steps + 1", "guard"),
          "divides by the number of decay steps without max(1, ...): a run with a single step after the warmup "
          "divides by zero", regime="total_steps = warmup_steps + 1"),
        # nearest: fresh train_step_costs forgetting an untied embedding; here the attention matmuls (the 6ND rule)
        M("train_step_costs", '"flops": 6 * matmul_weights * tokens + 3 * attention_matmuls',
          '"flops": 6 * matmul_weights * tokens',
          ("attention", "6nd", "6 n d", "scores", "t²", "seq_len", "qkᵀ", "attention matmuls"),
          "counts the FLOPs by the 6·N·D rule alone: the attention matmuls (QKᵀ and weights @ V), which hold no "
          "parameter, are left out"),
        # nearest: none about the backward pass in train_step_costs; the forward alone is counted
        M("train_step_costs", '"flops": 6 * matmul_weights * tokens + 3 * attention_matmuls',
          '"flops": 2 * matmul_weights * tokens + attention_matmuls',
          ("backward", "forward only", "3 x", "three times", "6nd", "2nd", "gradient", "factor 3"),
          "counts the forward pass only: the backward pass costs twice the forward again, a training step three times it"),
        # nearest: none about the optimizer state; Adam keeps two moments per parameter
        M("train_step_costs", '"adam_moments": 2 * 4 * n_params', '"adam_moments": 4 * n_params',
          ("two moments", "exp_avg_sq", "second moment", "variance", "2 *", "m and v", "adam"),
          "counts one moment per parameter: AdamW keeps two (exp_avg and exp_avg_sq)"),
        # nearest: fresh train_step_costs forgetting an untied embedding; here a tied head is taken to cost nothing
        M("train_step_costs", "head = V * d", "head = 0 if config.tie_embeddings else V * d  # tied: no weights of its own",
          ("tied", "head", "lm_head", "matmul", "flops", "vocab", "shares", "embedding"),
          "counts no head matmul for a tied model: tying shares the weights, not the FLOPs; and the tied matrix then "
          "drops out of the parameter count too"),
    ],
    "10": [
        # nearest: nb10 evaluate leaving eval mode on; here nanoGPT's unconditional model.train() at the end
        M("evaluate", "model.train(was_training)", "model.train()",
          ("was_training", "mode", "eval mode", "restore", "model.train()", "train mode", "dropout"),
          "switches the model to train mode at the end whatever mode it came in: a model evaluated in eval mode leaves "
          "in train mode", regime="a model that is in eval mode when evaluate is called"),
        # nearest: nb10 evaluate's exp of the summed NLL (no division); here the division comes after the exp
        M("evaluate", '"perplexity": math.exp(loss)', '"perplexity": math.exp(total) ** (1 / count)',
          ("overflow", "exp(total)", "709", "large", "math.exp(loss)", "inf", "sum"),
          "takes the count-th root of exp(summed NLL): equal on paper, but exp overflows once the summed NLL passes about "
          "709 nats", regime="an evaluation whose summed NLL exceeds about 709 nats (a few hundred tokens)"),
        # nearest: nb10 evaluate's mean of batch means; here the batch's sum is weighted by its count again
        M("evaluate", "total, count = total + s, count + n", "total, count = total + s * n, count + n",
          ("sum", "already a sum", "weighted twice", "s * n", "count", "token-weighted", "mean"),
          "weights each batch's NLL by its count although nll_sum_and_count already returns a sum"),
        # nearest: nb10 bigram_nll normalising columns (sum over the other axis); here the row sums lose keepdim
        M("bigram_nll", "counts.sum(dim=1, keepdim=True)", "counts.sum(dim=1)",
          ("keepdim", "broadcast", "rows", "columns", "(256, 1)", "normalis", "each row"),
          "sums each row without keepdim: the (256,) totals broadcast along the last axis, so entry [a, b] is divided "
          "by row b's total"),
    ],
}
