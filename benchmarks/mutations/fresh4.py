"""A seventh held-out set of learner mistakes ("fresh4"): mistakes in none of the
project's mutation lists (nbNN.py, heldout.py, unseen.py, offlist.py, fresh.py,
fresh2.py, fresh3.py), which were read first precisely to avoid them. Written
from the learner's notebooks (their prose and the reference answers), tinylm
and the seed note only, without reading the checks, their tests or the
diagnostics benchmark, and never run through a check. Not part of the
default run: `python benchmarks/bench_diagnostics.py --set fresh4`.

Every mistake is one substitution in one answer cell's solution, of the kind
a learner makes writing the code from the prose or from code seen elsewhere:
an API read for another (F.embedding's arguments, F.linear transposing its
weight itself, torch.bmm for a 4-D matmul, topk's tuple order, the class
nn.CrossEntropyLoss called like the function, repeat_interleave without dim,
F.normalize for RMS normalisation, `is 0`, round(x + 0.5) for a ceiling under
banker's rounding), an axis or a broadcast (a missing new axis in the angle
table, torch.cat without dim, a 1-D batch slice, the last sequence for the
last position), the paper's d_k = d_model / h applied to a split head, a
shift done with roll, arguments passed in the wrong order, an `elif` that
skips the second filter, a clip after the step, half-precision or byte
storage, and counting slips in the accounting exercises (one head, GPT-2's
learned positions, a tied head counted, one layer of cache, MHA-sized
attention weights, every parameter in 6·N·D, bfloat16 master weights, the
log of a mean). The entries with a `regime` are right in the default
situation and wrong only there.

The comment above each entry names the nearest entry of the other lists and
how this one differs; a mistake counts as in a list when the same cell
already holds the same wrong idea. `benchmarks/verify_unseen.py --set fresh4`
proves each one a real bug against tinylm, PyTorch built-ins, the FLOP
counter or closed forms.
"""
from __future__ import annotations

from .unseen import Unseen as M

GQA = "grouped kv heads (n_kv_heads < n_heads)"
SHAPE = ("shape", "axis", "broadcast")

MUTATIONS = {
    "01": [
        # nearest: fresh3 embed with gather, fresh2 with index_select; here F.embedding with its arguments swapped
        M("embed", "return weight[ids]", "return F.embedding(weight, ids)",
          ("f.embedding", "argument", "order", "swapped", "(input, weight)", "indices", "long"),
          "calls F.embedding(weight, ids): its signature is (input, weight), so the float matrix is taken as the ids "
          "and the lookup raises"),
        # nearest: nb01 embed flattening the ids (another cell); here one_hot of the flattened ids, never reshaped
        M("one_hot_embed", "F.one_hot(ids, num_classes=weight.shape[0])",
          "F.one_hot(ids.flatten(), num_classes=weight.shape[0])",
          SHAPE + ("flatten", "(b, t, d)", "(b*t", "batch"),
          "flattens the ids before one_hot, as if it took 1-D input only: the result is (B·T, d), not (B, T, d)"),
        # nearest: nb01 tied_logits forgetting the transpose; here F.linear, which transposes its weight itself
        M("tied_logits", "return x @ weight.T", "return F.linear(x, weight.T)",
          ("f.linear", "transpose", "twice", "already", "[out, in]", "weight.t"),
          "moves to F.linear but keeps the .T: F.linear computes x @ weight.T itself, so the matrix is transposed "
          "twice and the product raises (d against V)"),
    ],
    "02": [
        # nearest: nb02 layer_norm's one mean for the whole tensor; here F.layer_norm with the whole shape normalised
        M("layer_norm", "    centred = x - x.mean(dim=-1, keepdim=True)              # (..., d)\n"
          "    var = centred.pow(2).mean(dim=-1, keepdim=True)         # (..., 1): biased, divides by d\n"
          "    return weight * centred * torch.rsqrt(var + eps) + bias\n",
          "    return F.layer_norm(x, x.shape, weight, bias, eps)\n",
          ("normalized_shape", "x.shape", "last axis", "shape[-1:]", "(d,)", "whole", "every axis"),
          "calls F.layer_norm with normalized_shape=x.shape: that normalises over every axis, not the last (d,), and "
          "the (d,) weight and bias do not match the shape, so it raises"),
        # nearest: fresh rms_norm flooring the mean square with clamp; here F.normalize · sqrt(d), whose eps floors the norm
        M("rms_norm", "return weight * (x32 * inv_rms).to(x.dtype)",
          "return weight * (F.normalize(x32, dim=-1) * x.shape[-1] ** 0.5).to(x.dtype)",
          ("eps", "normalize", "small", "tiny", "ignored", "epsilon"),
          "writes x / RMS as F.normalize(x) · sqrt(d): close for ordinary tokens, but F.normalize floors the norm at "
          "1e-12 instead of adding eps to the mean square, so eps is ignored and tokens of tiny mean square are blown up"),
        # nearest: fresh2 RMSNorm's (1, dim) gain and nb02's random start; here the gain is stored in float16
        M("RMSNorm", "self.weight = nn.Parameter(torch.ones(dim))",
          "self.weight = nn.Parameter(torch.ones(dim, dtype=torch.float16))",
          ("float16", "half", "dtype", "precision", "rounded"),
          "stores the gain in float16 to save memory: a fresh gain of ones is exact, but a trained or loaded gain is "
          "rounded to half precision (and trains in it)", regime="a trained or loaded gain"),
    ],
    "03": [
        # nearest: fresh tied_logits' .T on a 3-D tensor (another cell); here torch.bmm, which takes 3-D tensors only
        M("causal_attention", "scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])",
          "scores = torch.bmm(q, k.transpose(-2, -1)) / math.sqrt(q.shape[-1])",
          ("bmm", "3-d", "4-d", "batch1", "matmul", "@", "dimensions"),
          "computes the scores with torch.bmm, the 'batched matmul': it takes 3-D tensors only and raises on the "
          "(B, H, T, hd) heads"),
        # nearest: nb03 dividing by head_dim, fresh2 attention_flops with d_model; here the paper's d_k = d_model / h
        # applied to q's last axis, which already is head_dim
        M("causal_attention", "math.sqrt(q.shape[-1])", "math.sqrt(q.shape[-1] // q.shape[1])",
          ("scale", "head_dim", "d_k", "sqrt", "n_heads", "heads"),
          "applies the paper's d_k = d_model / h to q.shape[-1], which already is head_dim: the scores are scaled by "
          "1/sqrt(head_dim / n_heads), too sharp"),
        # nearest: fresh2 attention_flops with d_model for head_dim; here the scores and the mix of one head only
        M("attention_flops", '"scores": B * n_heads * per_head, "mix": B * n_heads * per_head',
          '"scores": B * per_head, "mix": B * per_head',
          ("n_heads", "every head", "one head", "per head", "heads"),
          "counts the scores and the mix of one head: every one of the n_heads heads does its own T x T matmuls"),
    ],
    "04": [
        # nearest: fresh3 rope_cache with torch.outer's arguments swapped; here an elementwise product without a new axis
        M("rope_cache", "torch.outer(torch.arange(max_seq_len, dtype=torch.float32), inv_freq)",
          "torch.arange(max_seq_len, dtype=torch.float32) * inv_freq",
          SHAPE + ("outer", "[:, none]", "new axis", "positions", "(max_seq_len, head_dim)"),
          "multiplies the positions by the frequencies elementwise, without [:, None]: (T,) * (hd/2,) raises unless "
          "max_seq_len equals head_dim / 2, and then gives one angle per position instead of a table"),
        # nearest: nb04 rope_cache returning hd/2 columns, nb06 cache_update's torch.cat without dim (another cell);
        # here the doubled angles are concatenated along the positions
        M("rope_cache", "torch.cat((angles, angles), dim=-1)", "torch.cat((angles, angles))",
          SHAPE + ("dim", "cat", "positions", "columns", "(max_seq_len, head_dim)", "2 * max_seq_len"),
          "concatenates the two copies of the angles without dim, along the positions: the tables are "
          "(2 · max_seq_len, hd/2) instead of (max_seq_len, hd)"),
        # nearest: nb04 apply_rope taking T from the feature axis; here T is read from the table, as if it were sized
        # to the sequence
        M("apply_rope", "T = x.shape[-2]", "T = cos.shape[0]",
          SHAPE + ("sequence length", "max_seq_len", "table", "x.shape", "positions"),
          "reads T from the table, as if tables came sized to the sequence (Hugging Face slices them before the "
          "call): the slice holds max_seq_len - start_pos rows, which do not broadcast against x's T positions"),
    ],
    "05": [
        # nearest: offlist swiglu_hidden rounding up by truncating and adding one; here round(x + 0.5), which Python
        # rounds half to even
        M("swiglu_hidden", "multiple * math.ceil(8 * d_model / 3 / multiple)",
          "multiple * round(8 * d_model / 3 / multiple + 0.5)",
          ("round", "ceil", "half to even", "banker", "already a multiple", "one multiple too many"),
          "rounds up with round(x + 0.5): Python rounds halves to even, so when 8/3 · d_model already is an odd "
          "multiple of `multiple` the size gets one multiple too many",
          regime="8/3 · d_model already an odd multiple of `multiple`"),
        # nearest: heldout Block not passing layer_idx on; here the cache and the layer index passed in swapped order
        M("Transformer", "self.attn(self.attn_norm(x), cos, sin, cache, layer_idx)",
          "self.attn(self.attn_norm(x), cos, sin, layer_idx, cache)",
          ("order", "swapped", "layer_idx", "cache", "argument", "positional"),
          "passes layer_idx and cache to Attention in swapped order: the layer index 0 lands in cache, so even "
          "without a cache the attention reads 0.length and raises"),
        # nearest: fresh decode_bytes_per_token counting a tied head twice (another cell); here param_counts ignores tying
        M("param_counts", '"lm_head": 0 if config.tie_embeddings else config.vocab_size * d}',
          '"lm_head": config.vocab_size * d}',
          ("tie_embeddings", "tied", "twice", "same parameter", "lm_head", "embedding"),
          "counts the head's vocab_size · d_model whatever the tying: a tied head is the embedding's Parameter and "
          "owns none of its own"),
        # nearest: fresh param_counts recomputing d_ff; here GPT-2's learned position embedding, which RoPE replaces
        M("param_counts", '"embedding": config.vocab_size * d,', '"embedding": (config.vocab_size + config.max_seq_len) * d,',
          ("position", "max_seq_len", "rope", "wpe", "learned", "embedding"),
          "adds a learned position embedding of max_seq_len · d_model, as GPT-2 has: RoPE rotates q and k and owns "
          "no parameter"),
    ],
    "06": [
        # nearest: fresh2 kv_cache_bytes counting the keys only and fresh3 param_counts counting one block (another cell);
        # here the cache of one layer
        M("kv_cache_bytes", "per_position = 2 * config.n_layers * config.n_kv_heads * config.head_dim",
          "per_position = 2 * config.n_kv_heads * config.head_dim",
          ("n_layers", "every layer", "one layer", "per layer", "layers", "blocks"),
          "counts the keys and values of one layer: every one of the n_layers blocks keeps its own cache"),
        # nearest: nb06 attention_step rotating the new keys one position too far; here the offset is applied twice,
        # by slicing the tables (as Hugging Face passes them) and by start_pos
        M("attention_step", "    q = tinylm.apply_rope(q, cos, sin, start_pos=start)  # the new tokens sit at start .. start + T - 1\n"
          "    k = tinylm.apply_rope(k, cos, sin, start_pos=start)\n",
          "    q = tinylm.apply_rope(q, cos[start:], sin[start:], start_pos=start)  # the new tokens' rows\n"
          "    k = tinylm.apply_rope(k, cos[start:], sin[start:], start_pos=start)\n",
          ("start_pos", "twice", "double", "2 * start", "offset", "slice", "positions"),
          "slices the tables from start and also passes start_pos=start: the new tokens are rotated as positions "
          "2·start onwards, so once the cache holds positions the distances to the cached keys are wrong"),
        # nearest: nb06 cache_update putting the new keys before the old ones (another cell); here the new token is
        # prepended to the generated sequence
        M("generate_greedy", "idx = torch.cat((idx, next_id), dim=1)", "idx = torch.cat((next_id, idx), dim=1)",
          ("order", "prepend", "before", "front", "end", "append"),
          "concatenates (next_id, idx): each new token is put in front of the sequence instead of appended, so the "
          "returned ids read backwards from the prompt (the cache, fed next_id, still decodes right)"),
    ],
    "07": [
        # nearest: nb07 repeat_kv repeating along head_dim or the positions (another cell); here repeat_interleave without dim
        M("gqa_attention", "k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)",
          "k, v = k.repeat_interleave(n_rep), v.repeat_interleave(n_rep)",
          ("dim", "flatten", "repeat_interleave", "1-d", "axis", "heads"),
          "repeats with repeat_interleave without dim, which flattens its input: k and v come back 1-D and SDPA raises"),
        # nearest: fresh2 gqa_attention's hard-coded group size 2; here n_rep = n_kv_heads, the number of groups
        M("gqa_step", "start, n_rep = past_k.shape[2], attn.n_heads // attn.n_kv_heads",
          "start, n_rep = past_k.shape[2], attn.n_kv_heads",
          ("n_rep", "n_kv_heads", "n_heads //", "group", "groups", "repeat"),
          "takes n_rep to be n_kv_heads, the number of groups, not their size n_heads / n_kv_heads: right when "
          "n_kv_heads² = n_heads (4 heads, 2 kv heads) and, by SDPA's broadcasting of a single head, for MQA; MHA "
          "gets n_heads² heads and raises, other groupings the wrong number",
          regime="n_kv_heads² != n_heads with more than one kv head (MHA among them)"),
        # nearest: fresh decode_bytes_per_token sizing the cache with n_heads; here the attention weights sized as MHA
        M("decode_bytes_per_token", "attention = 2 * d * config.n_heads * hd + 2 * d * config.n_kv_heads * hd",
          "attention = 4 * d * d", ("n_kv_heads", "k_proj", "v_proj", "gqa", "4 * d", "grouped", "kv heads"),
          "counts four d_model x d_model attention matrices: k_proj and v_proj are d_model x n_kv_heads · head_dim, "
          "smaller with GQA", regime=GQA),
    ],
    "08": [
        # nearest: fresh3 generate_greedy's max(...)[0]; here topk(...)[1], the indices, taken as the threshold
        M("top_k_filter", "kth = logits.topk(k, dim=-1).values[..., -1:]", "kth = logits.topk(k, dim=-1)[1][..., -1:]",
          ("indices", "values", "[1]", "index", "threshold", "namedtuple"),
          "takes topk(...)[1], the indices, where [0] (values) is meant: the threshold is the k-th largest's position "
          "in the vocabulary, compared with the logits"),
        # nearest: fresh2 top_p_filter's strict comparison; here the exclusive cumsum made with roll
        M("top_p_filter", "mass_before = probs.cumsum(dim=-1) - probs", "mass_before = probs.cumsum(dim=-1).roll(1, dims=-1)",
          ("roll", "wrap", "first token", "most likely", "shift", "1.0"),
          "shifts the cumulative mass right with roll, which wraps the total (1) into the first place: the most "
          "likely token always has mass_before 1 >= p and is dropped"),
        # nearest: nb08 sample_next dividing by zero at temperature 0; here `is 0`, true for the int 0 only
        M("sample_next", "if temperature == 0:", "if temperature is 0:",
          ("is 0", "identity", "==", "0.0", "float", "divide", "zero"),
          "tests temperature is 0, identity not equality: true for the int 0, false for 0.0, which is then divided by",
          regime="temperature 0.0 given as a float"),
        # nearest: nb08 sample_next never applying top-p; here top-p is skipped only when top-k is set too
        M("sample_next", "    if top_p is not None:", "    elif top_p is not None:",
          ("elif", "both", "top_p", "top-p", "skipped", "ignored"),
          "writes elif for the second filter: with top_k and top_p both set, top-p is never applied",
          regime="top_k and top_p both set"),
        # nearest: nb08 generate taking the logits of the first position; here [-1], the last sequence of the batch
        M("generate", "logits = model(idx)[:, -1] ", "logits = model(idx)[-1] ",
          SHAPE + ("[:, -1]", "last position", "last sequence", "batch", "(t, v)"),
          "indexes the logits with [-1], the last sequence of the batch ((T, V)), where [:, -1] is the last position "
          "of every sequence ((B, V))"),
    ],
    "09": [
        # nearest: nb09 get_batch's x and y swapped; here the shift is sliced along the batch, as on a 1-D array
        M("get_batch", "return window[:, :-1], window[:, 1:]", "return window[:-1], window[1:]",
          SHAPE + ("rows", "batch", "[:, 1:]", "positions", "shift"),
          "slices the shift as nanoGPT does on the 1-D data, [:-1] and [1:]: on (B, T + 1) windows that drops a row, "
          "not a position, and y is the next window, not the next token"),
        # nearest: fresh lm_loss with log_softmax and gather; here the class nn.CrossEntropyLoss called like the function
        M("lm_loss", "F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)",
          "torch.nn.CrossEntropyLoss(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)",
          ("crossentropyloss", "module", "class", "constructor", "f.cross_entropy", "instance", "weight"),
          "calls the class nn.CrossEntropyLoss with the tensors, as if it were F.cross_entropy: they land in its "
          "constructor as weight and size_average, which raises instead of computing a loss"),
        # nearest: unseen lr_schedule without the clamp; here min and max swapped in the clamp
        M("lr_schedule", "min(progress, 1.0)", "max(progress, 1.0)",
          ("min", "max", "clamp", "progress", "min_lr", "decay"),
          "clamps the progress with max instead of min: it is at least 1 from the first decay step, so the rate "
          "drops to min_lr right after the warmup and climbs back after the last step"),
        # nearest: heldout train_step clipping before backward; here the clip comes after optimizer.step()
        M("train_step", "    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)  # global gradient norm <= grad_clip\n"
          "    optimizer.step()                             # the AdamW update\n",
          "    optimizer.step()                             # the AdamW update\n"
          "    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)  # global gradient norm <= grad_clip\n",
          ("after", "step", "order", "clip", "unclipped", "before optimizer.step"),
          "clips after optimizer.step(): the gradients end up clipped, but the update already used them unclipped"),
        # nearest: fresh2 train_step_costs leaving the attention matmuls out; here 6·N·D with N every parameter
        M("train_step_costs", '"flops": 6 * matmul_weights * tokens', '"flops": 6 * n_params * tokens',
          ("norm", "gains", "embedding", "lookup", "n_params", "matmul", "every parameter"),
          "counts 6·N·D with N every parameter: the norm gains (and an untied embedding, a lookup) do no matmul"),
        # nearest: fresh kv_cache_bytes hard-coding 4 bytes (another cell); here the weights counted in bfloat16
        M("train_step_costs", '"weights": 4 * n_params,', '"weights": 2 * n_params,',
          ("float32", "4 bytes", "bfloat16", "2 bytes", "weights", "precision"),
          "counts the weights at 2 bytes, as bfloat16: the model trains in float32, 4 bytes a parameter like its "
          "gradients"),
    ],
    "10": [
        # nearest: nb10 evaluate multiplying by bytes_per_token (bits per byte); here the perplexity is taken per byte
        M("evaluate", '"perplexity": math.exp(loss)', '"perplexity": math.exp(loss / bytes_per_token)',
          ("bytes_per_token", "perplexity", "per token", "per byte"),
          "divides the loss by bytes_per_token in the perplexity too: perplexity is per token, only bits_per_byte is "
          "per byte", regime="bytes_per_token other than 1"),
        # nearest: fresh bigram_nll averaging over len(val); here the log of the mean probability
        M("bigram_nll", "-probs.log()[val[:-1], val[1:]].mean().item()", "-probs[val[:-1], val[1:]].mean().log().item()",
          ("mean of the log", "log of the mean", "jensen", "order", "average", "geometric"),
          "takes the log of the mean probability instead of the mean of the log-probabilities: by Jensen's "
          "inequality that is below the NLL"),
        # nearest: fresh3 bigram_nll's pair key built backwards; here base 255, the largest byte, instead of 256
        M("bigram_nll", "train[:-1] * 256 + train[1:]", "train[:-1] * 255 + train[1:]",
          ("255", "256", "base", "pair key", "collide", "off by one", "off-by-one"),
          "encodes the pair with base 255, the largest byte, where 256 values need base 256: keys collide "
          "((a, 255) with (a + 1, 0)) and the rows of the table are misaligned"),
    ],
}
