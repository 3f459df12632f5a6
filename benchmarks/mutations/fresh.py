"""A fourth held-out set of learner mistakes ("fresh"): 40 mistakes in none of
the project's mutation lists (nbNN.py, heldout.py, unseen.py, offlist.py),
which were read first precisely to avoid them. Written from the learner's
notebooks, the reference answers, tinylm and the seed note only, without
reading the checks, their tests or the diagnostics benchmark, and never run
through a check: the yardstick for checks improved after it was written. Not
part of the default run: `python benchmarks/bench_diagnostics.py --set fresh`.

Every mistake is one substitution in one answer cell's solution, of the kind
a learner makes writing the code from the prose: an operator's precedence, a
log base, bits for bytes, an integer division, a finite stand-in for -inf, a
reduction without its axis, a threshold without its trailing axis, arguments
passed in the wrong order, a config field read for another, a reset in the
loop, an API that clips values instead of the norm. The accounting exercises
(attention_flops, param_counts, kv_cache_bytes, decode_bytes_per_token,
train_step_costs) have their own. About half are right in the default
situation and wrong only in their `regime` (a batch of one or of more, flat
ids, a GPU, large negative scores, large pre-activations, n_layers != n_heads,
an explicit d_ff, bfloat16, GQA, untied embeddings, a second decoding step,
padding, all-padding batches, short data, large gradients).

The comment above each entry names the nearest entry of the other lists and
how this one differs; a mistake counts as in a list when the same cell
already holds the same wrong idea. `benchmarks/verify_unseen.py --set fresh`
proves each one a real bug against tinylm, PyTorch built-ins or closed forms.
"""
from __future__ import annotations

from .unseen import Unseen as M

# notebook 06's generate_greedy: the loop header the reset is copied into
DECODE_LOOP = "        for _ in range(max_new_tokens):\n"

MUTATIONS = {
    "01": [
        # nearest: nb01 embed flattening the ids and never restoring (B, T); here (B, T) is restored, flat ids fail
        M("embed", "return weight[ids]", "B, T = ids.shape\n    return weight[ids.reshape(-1)].view(B, T, -1)",
          ("1-d", "one-dimensional", "leading shape", "(t,)", "[t]", "unpack", "b, t", "ids.shape", "flat ids",
           "not enough values"),
          "unpacks B, T = ids.shape and views the flat lookup back as (B, T, d): right for (B, T) ids, raises for a "
          "flat [T] list of ids", regime="ids with one axis ([T], no batch axis)"),
        # nearest: nb01 one_hot_embed without .to(weight.dtype) (int64 @ float raises); here the weight is cast instead
        M("one_hot_embed", ".to(weight.dtype)  # (..., V)\n    return one_hot @ weight",
          "  # (..., V)\n    return one_hot @ weight.to(one_hot.dtype)",
          ("int64", "integer", "truncat", "dtype", "long", "rounded", "cast the weight", "weight's dtype"),
          "meets the dtype mismatch by casting the weight to the one-hot's int64, not the one-hot to the weight's dtype: "
          "every row is truncated to integers"),
        # nearest: nb01 tied_logits without the transpose; here (W xᵀ)ᵀ with .T, which reverses every axis of a 3-D x
        M("tied_logits", "return x @ weight.T", "return (weight @ x.T).T",
          (".t", "3-d", "all axes", "every axis", "reverses", "transpose(-2, -1)", "mt", "(b, t, d)", "2-d", "batch"),
          "writes the head as (W xᵀ)ᵀ with .T, which reverses every axis of a 3-D tensor: right for one (T, d) "
          "sequence, raises for a batch (B, T, d)"),
    ],
    "02": [
        # nearest: nb02 rms_norm dropping eps or adding it outside the square root; here eps is a floor (clamp)
        M("rms_norm", "keepdim=True) + eps)", "keepdim=True).clamp(min=eps))",
          ("eps", "clamp", "added", "inside the square root", "small input", "tiny", "max(", "floor"),
          "floors the mean square at eps with clamp instead of adding eps: off by a factor 1 + eps / (2 · mean square), "
          "invisible for ordinary tokens, large for tokens whose mean square is near eps",
          regime="small inputs (a mean square within a few orders of magnitude of eps, or a large eps)"),
        # nearest: nb02 rms_norm without keepdim (another cell); in layer_norm the centring mean loses its axis
        M("layer_norm", "centred = x - x.mean(dim=-1, keepdim=True)", "centred = x - x.mean(dim=-1)",
          ("keepdim", "broadcast", "(..., 1)", "shape", "trailing", "last axis", "another token"),
          "subtracts the mean without keepdim: the means broadcast against the feature axis, which raises, or for as "
          "many rows as features silently subtracts another row's mean"),
        # nearest: offlist RMSNorm applying the gain twice; here the gain and the input change places
        M("RMSNorm", "return rms_norm(x, self.weight, self.eps)", "return rms_norm(self.weight, x, self.eps)",
          ("argument", "order", "swapped", "not normalised", "unnormalised", "normalises the gain", "x, self.weight"),
          "passes the gain and the input to rms_norm the wrong way round: it normalises the gain and scales x by it, "
          "so a fresh module returns x unnormalised"),
    ],
    "03": [
        # nearest: nb03 causal_attention filling the masked scores with 0; here with a finite large negative number
        M("causal_attention", 'masked_fill(~mask, float("-inf"))', "masked_fill(~mask, -1e4)",
          ("-1e4", "-10000", "finite", "-inf", "infinity", "large negative", "future", "large scores"),
          "masks with the finite -1e4 of older BERT code instead of -inf: the future gets the weight once the allowed "
          "scores fall below about -1e4", regime="large negative scores (below about -1e4: large-norm queries and keys)"),
        # nearest: none about devices; the mask stays where causal_mask builds it
        M("causal_attention", "causal_mask(q.shape[-2], k.shape[-2]).to(q.device)", "causal_mask(q.shape[-2], k.shape[-2])",
          ("device", "cuda", "gpu", ".to(q.device)", "cpu", "same device"),
          "leaves the mask on the CPU, where causal_mask builds it: right on the CPU, raises when q lives on a GPU",
          regime="tensors on another device than the CPU (a GPU; the meta device in the probe)"),
        # nearest: offlist self_attention scaling twice; here the layer adds its own input, the block's residual
        M("self_attention", "return F.linear(merge_heads(y), w_o)", "return F.linear(merge_heads(y), w_o) + x",
          ("residual", "+ x", "adds x", "input added", "skip connection", "block"),
          "adds the residual inside the attention layer: the layer returns x + attention, and the block adds x again"),
        # nearest: none in attention_flops; the batch multiplies the T² terms but is forgotten in the projections
        M("attention_flops", "projection = 2 * B * T * d * d", "projection = 2 * T * d * d",
          ("batch", "per sequence", "batch size", "qkv_proj", "out_proj", "projection", "b ·", "b*"),
          "counts the projections of one sequence: the batch multiplies the scores and the mix, not qkv_proj and out_proj",
          regime="a batch of more than one sequence"),
        # nearest: none in attention_flops; the masked half of T x T is left out
        M("attention_flops", "per_head = 2 * T * T * head_dim", "per_head = T * T * head_dim",
          ("masked", "half", "triangle", "causal", "full t", "t²/2", "factor 2", "whole t"),
          "counts only the causal triangle of the scores and the mix: the matmuls compute the masked half too"),
    ],
    "04": [
        # nearest: nb04 rope_cache without dividing by head_dim; here the division is there, outside the power
        M("rope_cache", "theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)",
          "theta ** -torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim",
          ("precedence", "parenthes", "exponent", "frequenc", "inv_freq", "2i/d", "divided by head_dim"),
          "drops the parentheses around the exponent: ** binds tighter than /, so the frequencies are "
          "theta^(-2i) / head_dim"),
        # nearest: nb04 rope_cache hard-coding the base 10000; here theta is used, through the wrong logarithm
        M("rope_cache", "theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)",
          "torch.exp(-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim * math.log2(theta))",
          ("log2", "log base", "natural log", "ln", "base", "theta", "frequenc"),
          "writes theta^(-2i/d) as exp(-2i/d · log theta) with log2 where the natural log belongs: the base becomes "
          "e^(log2 theta), about 6·10^5 instead of 10^4"),
        # nearest: offlist rotate_half halving with split(2) or along the positions; here the axis is the 4th, by number
        M("apply_rope", "x1, x2 = x.chunk(2, dim=-1)", "x1, x2 = x.chunk(2, dim=3)",
          ("dim=3", "last axis", "dim=-1", "4-d", "four axes", "any shape", "rank", "out of range"),
          "halves along dim=3, the last axis of a (B, H, T, hd) tensor: right inside attention, raises for a tensor with "
          "fewer axes", regime="inputs with other than four axes (e.g. one head's (T, hd))"),
        # nearest: nb04 rotary_attention passing (sin, cos) for the queries; here the keys turn by minus their angle
        M("rotary_attention", "k = apply_rope(k, cos, sin, start_pos)", "k = apply_rope(k, cos, -sin, start_pos)  # q·k sees m - n",
          ("keys", "opposite", "direction", "-sin", "backwards", "negative angle", "m + n", "relative", "absolute"),
          "rotates the keys backwards (-sin), reasoning that q·k must see m - n: the scores then depend on m + n, the "
          "absolute positions"),
    ],
    "05": [
        # nearest: nb05 swiglu with SiLU on both branches or on the output; here on the input, before the projection
        M("swiglu", "gate = F.silu(x @ w_gate.T)", "gate = F.silu(x) @ w_gate.T",
          ("before the projection", "after the projection", "on x", "input", "order", "activation", "silu"),
          "applies SiLU to the input before the gate projection instead of to the projection: silu(x) W_gateᵀ"),
        # nearest: nb03 hand-written softmax without the max (another cell); here a hand-written sigmoid overflows
        M("swiglu", "gate = F.silu(x @ w_gate.T)", "a = x @ w_gate.T\n    gate = a * a.exp() / (1 + a.exp())  # a · sigmoid(a)",
          ("overflow", "inf", "nan", "exp", "large", "sigmoid", "numerically", "f.silu"),
          "writes sigmoid(a) as e^a / (1 + e^a): right until a pre-activation above about 88 overflows to inf / inf = nan",
          regime="large pre-activations (above about 88 in float32)"),
        # nearest: offlist Transformer stopping one block early; here the block count comes from another field
        M("Transformer", "range(config.n_layers)", "range(config.n_heads)",
          ("n_layers", "n_heads", "number of blocks", "layers", "depth", "config field"),
          "builds one block per head, range(config.n_heads), instead of one per layer: right for the default config, "
          "which has 4 of each", regime="n_layers != n_heads (the default config has 4 of each)"),
        # nearest: none in param_counts; d_ff recomputed by the 8/3 rule instead of read from the config
        M("param_counts", '"mlp": L * 3 * d * config.d_ff,', '"mlp": L * 3 * d * swiglu_hidden(d),',
          ("d_ff", "config.d_ff", "8/3", "hidden size", "explicit", "rule", "mlp"),
          "recomputes the MLP width with the 8/3 rule instead of reading config.d_ff: right only while d_ff is the default",
          regime="a config with d_ff set explicitly (not 8/3·d_model rounded up)"),
        # nearest: none in param_counts; the final norm is forgotten
        M("param_counts", '"norms": (2 * L + 1) * d,', '"norms": 2 * L * d,',
          ("final norm", "2 * n_layers + 1", "2l + 1", "last norm", "norm before the head", "off by one", "norms"),
          "counts the two norms of every block and forgets the final norm before the head"),
    ],
    "06": [
        # nearest: none in kv_cache_bytes; 4 bytes per number whatever the dtype
        M("kv_cache_bytes", "seq_len * batch_size * dtype.itemsize", "seq_len * batch_size * 4",
          ("dtype", "itemsize", "bytes per number", "4 bytes", "float32", "bfloat16", "half", "2 bytes"),
          "hard-codes 4 bytes per number: right for float32, twice too much for bfloat16 and float16",
          regime="a dtype other than float32"),
        # nearest: none in kv_cache_bytes; the size of a number in bits
        M("kv_cache_bytes", "dtype.itemsize", "torch.finfo(dtype).bits",
          ("bits", "bytes", "factor 8", "8 times", "eight times", "itemsize", "finfo"),
          "takes the size of a number from torch.finfo(dtype).bits: bits, not bytes, 8 times too much"),
        # nearest: nb06 cache_update returning only the new entries (another cell); here the step hands them back
        M("attention_step", "return attn.o_proj(y), k_all, v_all", "return attn.o_proj(y), k, v",
          ("k_all", "v_all", "only the new", "new keys", "cache", "history", "earlier positions", "dropped"),
          "returns this step's keys and values instead of the whole cache: right for the prefill and the step after it, "
          "then the cache holds only the previous chunk", regime="two or more steps after the prefill"),
        # nearest: nb06 generate_greedy never resetting the cache; here it is reset at every step as well
        M("generate_greedy", DECODE_LOOP,
          DECODE_LOOP + "            cache.reset()                                       # a clean cache for every step\n",
          ("reset", "every step", "in the loop", "inside the loop", "cache length", "position 0", "history", "once"),
          "resets the cache inside the loop as well: the first token is right, then each new token is decoded at "
          "position 0 with no history"),
        # nearest: offlist generate_greedy adding the token axis in front ((1, B)); here argmax without its axis
        M("generate_greedy", "logits.argmax(dim=-1, keepdim=True)", "logits.argmax(keepdim=True)",
          ("dim", "flattened", "whole batch", "(b, 1)", "all rows", "vocabulary axis", "batch"),
          "leaves out dim in argmax: the index runs over the flattened (B, V) logits, right for a batch of one prompt, "
          "a (1, 1) index beyond the vocabulary for more", regime="a batch of more than one prompt"),
    ],
    "07": [
        # nearest: none in decode_bytes_per_token; the cache sized by the query heads
        M("decode_bytes_per_token", "kv_cache = 2 * L * config.n_kv_heads * hd * context_len * size",
          "kv_cache = 2 * L * config.n_heads * hd * context_len * size",
          ("n_kv_heads", "n_heads", "kv heads", "gqa", "query heads", "grouped", "n_rep"),
          "sizes the cache with n_heads: right for MHA, n_heads / n_kv_heads times too much with GQA",
          regime="n_kv_heads < n_heads (GQA, MQA)"),
        # nearest: none in decode_bytes_per_token; the tied head counted as a matrix of its own
        M("decode_bytes_per_token", "(1 if config.tie_embeddings else 2)", "2",
          ("tied", "tie", "twice", "embedding", "lm_head", "counted twice", "head"),
          "counts the embedding and the head as two matrices although the head is tied to the embedding"),
        # nearest: nb07 repeat_kv expanding a non-singleton axis; here the expand is right and view cannot merge it
        M("repeat_kv", "return x.reshape(B, n_kv * n_rep, T, hd)", "return x.view(B, n_kv * n_rep, T, hd)",
          ("view", "reshape", "contiguous", "expand", "stride", "copy"),
          "merges the expanded axes with view: an expanded tensor cannot be viewed that way, so it raises as soon as "
          "anything is repeated (right only for n_rep = 1)"),
    ],
    "08": [
        # nearest: nb08 top_k_filter's threshold over the batch axis; here per row, without the trailing axis
        M("top_k_filter", "values[..., -1:]", "values[..., -1]",
          ("trailing axis", "broadcast", "(..., 1)", "keepdim", "[..., -1:]", "rows", "batch", "shape"),
          "takes the k-th largest without its trailing axis: the (B,) thresholds broadcast along the vocabulary, right "
          "for one row, raising or comparing against other rows' thresholds for more", regime="a batch of more than one row"),
        # nearest: nb08 top_p_filter taking the cumulative sum of logits; here the softmax of the unsorted logits
        M("top_p_filter", "probs = sorted_logits.softmax(dim=-1)", "probs = logits.softmax(dim=-1)",
          ("sorted", "unsorted", "sorted_logits", "order", "vocabulary order", "cumulative", "permutation"),
          "takes the softmax of the unsorted logits: the mass accumulates in vocabulary order while the mask is mapped "
          "back as if it were sorted"),
        # nearest: offlist sample_next handing exp(logits) to multinomial (overflow); here one max for the whole batch
        M("sample_next", "probs = logits.softmax(dim=-1)",
          "probs = (logits - logits.max()).exp()  # stable; multinomial normalises each row itself",
          ("max", "per row", "each row", "whole batch", "global", "underflow", "dim", "keepdim"),
          "subtracts one maximum over the whole batch before exp: a row whose logits lie far below another row's "
          "underflows to zeros, which multinomial rejects", regime="a batch whose rows' logits lie far apart (about 100)"),
        # nearest: nb08 generate dropping temperature and the filters; here the two filters change places
        M("generate", "next_id = sample_next(logits, temperature, top_k, top_p, generator)",
          "next_id = sample_next(logits, temperature, top_p, top_k, generator)",
          ("top_k", "top_p", "swapped", "order", "argument", "positional", "keyword"),
          "passes top_p and top_k to sample_next in the wrong order: right while both are None, wrong once one is set",
          regime="top_k or top_p set"),
    ],
    "09": [
        # nearest: nb09 get_batch with one start for the whole batch; here distinct starts, never more than the data has
        M("get_batch", "torch.randint(len(data) - seq_len, (batch_size,), generator=generator)",
          "torch.randperm(len(data) - seq_len, generator=generator)[:batch_size]",
          ("randperm", "without replacement", "fewer rows", "batch_size", "shape", "windows", "short data", "distinct"),
          "draws distinct starts with randperm(...)[:batch_size]: when the batch asks for more windows than the data "
          "has, fewer rows come back", regime="batch_size larger than the number of windows (short data)"),
        # nearest: offlist lm_loss taking log(softmax) into nll_loss; here a gather, which knows no ignore_index
        M("lm_loss", "F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)",
          "-logits.log_softmax(dim=-1).gather(-1, targets[..., None]).mean()",
          ("-100", "padding", "ignore_index", "gather", "out of bounds", "index", "ignored"),
          "writes the NLL with log_softmax and gather: right without padding, but gather has no ignore_index and "
          "fails on the -100 targets", regime="targets with -100 padding"),
        # nearest: nb09 lr_schedule's decay one step too long; here the progress is an integer division
        M("lr_schedule", "(step - warmup_steps) / max(1,", "(step - warmup_steps) // max(1,",
          ("integer division", "//", "floor", "progress", "stays at max_lr", "constant", "cosine"),
          "computes the progress with //: it stays 0 during the decay, so the rate sits at max_lr and drops to min_lr "
          "only at the last step"),
        # nearest: offlist train_step clipping each parameter's norm; here every entry is clipped by value
        M("train_step", "torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)",
          "torch.nn.utils.clip_grad_value_(model.parameters(), grad_clip)",
          ("clip_grad_value_", "value", "element", "global norm", "direction", "each entry", "clip_grad_norm_", "norm"),
          "clips every gradient entry to ±grad_clip (clip_grad_value_) instead of rescaling the global norm: the update "
          "turns, and its norm can stay far above grad_clip", regime="gradients larger than grad_clip"),
        # nearest: none in train_step_costs; an untied embedding's own matrix is forgotten
        M("train_step_costs", " + (0 if config.tie_embeddings else V * d)", "",
          ("untied", "tie_embeddings", "embedding", "lm_head", "own matrix", "separate", "vocab_size"),
          "counts the head's matrix as the only vocabulary matrix: right for a tied model, one vocab_size × d_model "
          "matrix short in the weights, gradients and moments of an untied one", regime="tie_embeddings=False"),
    ],
    "10": [
        # nearest: offlist nll_sum_and_count as mean times count (nan when nothing is scored); here the count is kept >= 1
        M("nll_sum_and_count", "count = int((targets != ignore_index).sum())",
          "count = int((targets != ignore_index).sum()) or 1  # never 0: no division by zero later",
          ("all padding", "no scored", "count", "or 1", "zero", "empty", "fully ignored", "phantom"),
          "keeps the count at least 1 to avoid a later division by zero: a batch with no scored target counts one "
          "phantom token", regime="a batch whose targets are all padding"),
        # nearest: nb10 evaluate multiplying by ln 2; here log2 is taken of the loss itself
        M("evaluate", "loss / math.log(2) / bytes_per_token", "math.log2(loss) / bytes_per_token",
          ("log2", "bits", "ln 2", "log(2)", "bits_per_byte", "conversion", "nats"),
          "converts nats to bits by taking log2 of the loss instead of dividing it by ln 2"),
        # nearest: nb10 bigram_nll returning a tensor; here the mean runs over one pair too many
        M("bigram_nll", "return -probs.log()[val[:-1], val[1:]].mean().item()",
          "return -probs.log()[val[:-1], val[1:]].sum().item() / len(val)",
          ("len(val) - 1", "pairs", "off by one", "number of pairs", "one too many", "denominator", "mean"),
          "averages over len(val) although val holds len(val) - 1 pairs"),
    ],
}
