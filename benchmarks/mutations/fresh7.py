"""A tenth held-out set of learner mistakes ("fresh7"), 40 of them, none of
which is in the project's other mutation lists (nbNN.py, heldout.py,
unseen.py, offlist.py, fresh.py to fresh6.py): every one of those lists was
read first, entry by entry, so that each mistake here is a different idea for
its cell, and fresh6's themes (its docstring) were left alone. The mistakes
were written from the learner's notebooks (their prose and the reference
answers of the solution notebooks), tinylm and the seed note only. The
checks, their tests, the diagnostics benchmark and its documentation were not
read, and no mistake was tried against a check before the set was first
measured. Not part of the default run:
`python benchmarks/bench_diagnostics.py --set fresh7`.

Each mistake is one substitution in one answer cell's solution, written the
way a learner gets it wrong when working from the prose, from NumPy or from
another library's habits, or from the paper's notation:

- Library idioms carried over: nn.Embedding.from_pretrained (frozen by
  default), nn.Linear's empty-then-reset_parameters gain (tinylm's init only
  fills matrices), nn.Parameter(...).to(device) (a plain tensor once it
  moves), Hugging Face's causal mask built by concatenating the cached keys'
  block (on the wrong side), Gemma's sandwich norm, generate's greedy default
  when no filter is set, min-p read for top-p, F.nll_loss after log_softmax
  over dim=1 (the class axis of (N, C) input, the positions of (B, T, V)),
  zero_grad at the end of the step.
- NumPy and Python slips: an einsum written for (B, T) ids only, a view of
  ids that may not be contiguous, flatten(1) before a classifier, // for the
  scores' scale, a softmax over dim=0, np.roll for the next byte, F.selu for
  F.silu, rsqrt taken for the reciprocal, a parenthesis that leaves the
  vocabulary matrices in numbers, not bytes.
- Maths read differently: cosine similarity for the head's dot product ("the
  token whose embedding h points at"), the rotation's minus sign put into the
  angle table, the affine part applied before LayerNorm's division, a power
  of two for "a multiple of a power of two", a dot product of n terms counted
  with n - 1 additions, q and k rotated in one call concatenated along the
  positions, one table row for every new token, query heads folded into
  groups in the tiled order.
- Counting and bookkeeping: o_proj left out of the attention's parameters,
  an untied head given nn.Linear's default bias, the cache capped at
  max_seq_len, an untied embedding counted as the one row a lookup reads, the
  memory sized by the 6N rule's matmul weights, a warmup from min_lr, a cosine
  to zero floored at min_lr, the evaluation data counted into the bigram
  table, a row total clamped to 1, the count of scored targets summed in the
  logits' dtype, bits from log10(2), the ids rebuilt from the prompt.
- State, dtype and device: a fresh KVCache (float32, on the CPU) built in
  place of the caller's, tables in float64.

The entries with a `regime` are right in the default situation and wrong
only there (non-contiguous ids, a notebook DEVICE other than the CPU, a
nonzero bias, fewer queries than keys, more cached positions than
max_seq_len, a bfloat16 model and cache, an untied model, gradients left in
.grad, bfloat16 logits with more than 256 targets, previous bytes never seen
in training).

The comment above each entry names the nearest entry of the other lists and
how this one differs. `benchmarks/verify_unseen.py --set fresh7` proves each
one a real bug against tinylm, PyTorch built-ins or closed forms.
"""
from __future__ import annotations

from .unseen import Unseen as M

SHAPE = ("shape", "axis", "broadcast")
GRAD = ("gradient", "grad", "requires_grad", "frozen", "freeze", "train", "autograd")

MUTATIONS = {
    "01": [
        # nearest: default embed detaching the lookup, offlist copying padding_idx, fresh6 max_norm; here
        # nn.Embedding.from_pretrained, whose freeze=True default wraps the table in a new, frozen Parameter
        M("embed", "return weight[ids]",
          "return nn.Embedding.from_pretrained(weight)(ids)  # the table as a ready-made embedding layer",
          GRAD + ("from_pretrained", "detach", "connected"),
          "looks the rows up through nn.Embedding.from_pretrained(weight): it wraps the table in a new Parameter "
          "with freeze=True by default, so the rows are right but cut off from weight, and the embedding never "
          "receives a gradient"),
        # nearest: default embed flattening the ids without restoring the axes, unseen lm_loss's .view on sliced logits
        # (another notebook); here a view of the ids, which refuses non-contiguous ids
        M("embed", "return weight[ids]",
          "return weight[ids.view(-1)].view(*ids.shape, weight.shape[-1])  # one row per id, then the ids' shape back",
          ("view", "contiguous", "reshape", "non-contiguous", "stride", "slice"),
          "flattens the ids with view(-1) and views the rows back: right for ids as they come from the tokenizer, "
          "raises for non-contiguous ids such as a slice idx[:, 1:] or a transposed batch",
          regime="non-contiguous ids (a slice such as idx[:, 1:])"),
        # nearest: fresh4 one_hot_embed flattening the ids, fresh embed unpacking B, T; here an einsum whose
        # subscripts name the batch and position axes
        M("one_hot_embed", "return one_hot @ weight  # (..., V) @ (V, d) -> (..., d)",
          'return torch.einsum("btv,vd->btd", one_hot, weight)  # (B, T, V) @ (V, d)',
          SHAPE + ("einsum", "leading", "flat", "1-d", "(t,)", "[t]", "ellipsis", "..."),
          "writes the product as einsum('btv,vd->btd'): right for (B, T) ids, raises for a flat [T] list of ids "
          "(or any other leading shape), where '...v,vd->...d' or @ works"),
        # nearest: default tied_logits scaling like attention scores, unseen returning probabilities; here cosine
        # similarity, both vectors normalised, from "which token's embedding the hidden state points at"
        M("tied_logits", "return x @ weight.T",
          "return F.normalize(x, dim=-1) @ F.normalize(weight, dim=-1).T  # the embedding h points at: cosine",
          ("cosine", "normaliz", "normalis", "norm", "dot product", "length", "magnitude", "scale"),
          "scores each token by the cosine between h and its embedding, reading 'which embedding the hidden state "
          "points at' as a direction: the logits lose the lengths of h and of W_v, and stay within [-1, 1]"),
    ],
    "02": [
        # nearest: default layer_norm dividing by sqrt(std), default rms_norm dividing by the vector's length; here
        # the RMS computed, then rsqrt applied to it as if rsqrt were the reciprocal
        M("rms_norm", "inv_rms = torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)",
          "inv_rms = torch.rsqrt(torch.sqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps))  # 1 / RMS",
          ("rsqrt", "sqrt", "square root", "fourth root", "reciprocal", "rms"),
          "computes the RMS, sqrt(mean square + eps), then applies torch.rsqrt to it, reading rsqrt as the "
          "reciprocal: it is 1/sqrt, so x is divided by the square root of the RMS, the fourth root of the mean "
          "square"),
        # nearest: default layer_norm applying the gain after adding the bias, fresh5 mixing up gamma and beta; here
        # the whole affine part applied before the division, so the bias is divided by the standard deviation too
        M("layer_norm", "return weight * centred * torch.rsqrt(var + eps) + bias",
          "return (weight * centred + bias) * torch.rsqrt(var + eps)  # affine, then normalise",
          ("bias", "beta", "order", "after", "divided", "standard deviation", "shift"),
          "applies weight and bias to the centred x and divides the result by the standard deviation: the bias "
          "is scaled by 1/std instead of added after the normalisation, so only a zero bias gives LayerNorm",
          regime="a nonzero bias (any trained LayerNorm)"),
        # nearest: default RMSNorm starting the gain at zero or at random values; here nn.Linear's idiom,
        # torch.empty and a reset_parameters that tinylm's initialisation never calls for a vector
        M("RMSNorm", "self.weight = nn.Parameter(torch.ones(dim))",
          "self.weight = nn.Parameter(torch.empty(dim))  # filled in reset_parameters, as nn.Linear does",
          ("uninitiali", "empty", "ones", "init", "garbage", "gain", "reset_parameters"),
          "allocates the gain with torch.empty, as nn.Linear does before its reset_parameters: nothing fills it "
          "(the model's initialisation touches matrices only), so a fresh norm multiplies by whatever memory held"),
        # nearest: default RMSNorm storing the gain as a plain tensor, fresh6 registering eps as a buffer; here
        # nn.Parameter(...).to(device), which returns a plain tensor once the device differs
        M("RMSNorm", "self.weight = nn.Parameter(torch.ones(dim))",
          "self.weight = nn.Parameter(torch.ones(dim)).to(DEVICE)  # the gain where the model runs",
          ("parameter", "registered", "plain tensor", ".to", "device", "state_dict", "parameters()"),
          "moves the new Parameter with .to(DEVICE): on another device .to returns a plain tensor, so the gain is "
          "no Parameter, absent from parameters() and the state_dict, never trained or loaded",
          regime="a notebook DEVICE other than the CPU (a GPU)"),
    ],
    "03": [
        # nearest: default causal_mask aligning top-left, unseen's diagonal shifted the wrong way; here Hugging
        # Face's mask, a triangle for the new keys and an all-visible block for the cached ones, concatenated with
        # the cached block on the right
        M("causal_mask", "allowed = torch.ones(q_len, kv_len, dtype=torch.bool)\n"
          "    return allowed.tril(diagonal=kv_len - q_len)",
          "past = torch.ones(q_len, kv_len - q_len, dtype=torch.bool)  # the cached keys: every query sees them\n"
          "    return torch.cat((torch.ones(q_len, q_len, dtype=torch.bool).tril(), past), dim=-1)",
          ("cached", "past", "order", "bottom-right", "offset", "concat", "left", "kv_len"),
          "builds the mask as Hugging Face does, a causal triangle for the new keys next to an all-visible block "
          "for the cached ones, but puts the cached block after the triangle: the keys come past first, so with "
          "fewer queries than keys the first queries see the future and miss their own past",
          regime="fewer queries than keys (a KV cache)"),
        # nearest: unseen merge_heads' bare reshape, fresh5's concatenation along the positions; here flatten(1),
        # the habit of flattening everything after the batch axis before a classifier
        M("split_heads", "return y.transpose(1, 2).reshape(B, T, H * hd)",
          "return y.transpose(1, 2).flatten(1)  # everything after the batch axis, as before a classifier",
          SHAPE + ("flatten", "(b, t, d)", "positions", "merge"),
          "merges the heads with flatten(1), as a CNN's features are flattened before the classifier: that merges "
          "the positions too, so the result is (B, T·d) instead of (B, T, d)"),
        # nearest: default dividing by head_dim or multiplying by sqrt(head_dim), fresh5 torch.sqrt of an int; here
        # // for the scale, which floors every score
        M("causal_attention", "scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])",
          "scores = q @ k.transpose(-2, -1) // math.sqrt(q.shape[-1])",
          ("//", "floor", "integer", "division", "scale", "round", "gradient"),
          "divides the scores by sqrt(head_dim) with //, as head_dim = d // n_heads was written: the scores are "
          "floored to whole numbers, so the weights are wrong, and a backward pass through them raises (floor "
          "division has no derivative)"),
        # nearest: fresh3 counting multiply-adds (half the FLOPs); here n multiplications and n - 1 additions per dot
        # product, one addition short of the convention
        M("attention_flops", "projection = 2 * B * T * d * d              # (B·T, d) @ (d, d): 2 FLOPs per multiply-add\n"
          "    per_head = 2 * T * T * head_dim",
          "projection = B * T * d * (2 * d - 1)       # d products and d - 1 additions per output\n"
          "    per_head = T * T * (2 * head_dim - 1)",
          ("2mnp", "additions", "n - 1", "multiply-add", "convention", "flopcountermode", "2 *"),
          "counts a dot product of n terms as n multiplications and n - 1 additions: exact arithmetic, but the "
          "convention (and FlopCounterMode) counts 2 m n p for an (m, n) @ (n, p) matmul, so every count is short"),
    ],
    "04": [
        # nearest: default rope_cache returning (sin, cos), unseen rotate_half's (x2, -x1); here the rotation matrix's
        # minus sign written into the second half of the angle table
        M("rope_cache", "angles = torch.cat((angles, angles), dim=-1)",
          "angles = torch.cat((angles, -angles), dim=-1)  # the second half turns with -sin, as in the rotation matrix",
          ("sign", "negative", "minus", "sin", "angle", "second half", "rotation"),
          "writes the rotation matrix's -sin into the table by negating the second half's angles: rotate_half "
          "already carries that sign, so the second half of each pair is turned the other way and the pair is no "
          "longer rotated"),
        # nearest: default ignoring start_pos, fresh3 cos.unsqueeze(1) (right for one new token only); here the tables
        # indexed with the scalar start_pos, one row for every position
        M("apply_rope", "cos = cos[start_pos:start_pos + T].to(x.dtype)  # (T, hd), broadcasts over (B, H)\n"
          "    sin = sin[start_pos:start_pos + T].to(x.dtype)",
          "cos = cos[start_pos].to(x.dtype)  # the row of the new token's position\n"
          "    sin = sin[start_pos].to(x.dtype)",
          ("start_pos", "positions", "every position", "slice", "row", "same angle", "start_pos + t"),
          "takes the row cos[start_pos], thinking of one new token: the (hd,) row broadcasts over all T positions, "
          "so every token of a sequence is rotated by the first one's angle"),
        # nearest: offlist using the rotated queries as keys, default rotating the keys from position 0; here q and k
        # rotated in one call, concatenated along the positions, so the keys sit T positions later
        M("rotary_attention", "q = apply_rope(q, cos, sin, start_pos)  # position enters the scores only\n"
          "    k = apply_rope(k, cos, sin, start_pos)",
          "q, k = apply_rope(torch.cat((q, k), dim=-2), cos, sin, start_pos).chunk(2, dim=-2)  # both in one call",
          ("positions", "concat", "axis", "offset", "keys", "shifted", "relative"),
          "rotates q and k in one apply_rope call by concatenating them along the positions axis: the keys are "
          "then rotated as positions T .. 2T - 1, so every score sees a distance off by T"),
        # nearest: fresh2 numbering the positions in bfloat16; here in float64, which makes the tables float64
        M("rope_cache", "angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float32), inv_freq)",
          "angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float64), inv_freq)  # exact for any length",
          ("float32", "float64", "double", "dtype", "precision"),
          "numbers the positions in float64 for precision at long contexts: torch.outer promotes, so the tables "
          "come back float64 where float32 is asked for (twice the memory, and no float64 on some devices)"),
    ],
    "05": [
        # nearest: default GELU, ReLU and softplus gates, fresh3's hardswish; here F.selu, one letter from F.silu
        M("swiglu", "gate = F.silu(x @ w_gate.T)", "gate = F.selu(x @ w_gate.T)",
          ("selu", "silu", "swish", "activation", "sigmoid"),
          "calls F.selu, the scaled exponential linear unit, for F.silu: SwiGLU's gate is a · sigmoid(a), and SELU "
          "is neither its shape nor its scale"),
        # nearest: default using 4 · d_model and not rounding, fresh6 Meta's truncating rule; here the prose's "a
        # multiple of a power of two" read as "a power of two"
        M("swiglu_hidden", "return multiple * math.ceil(8 * d_model / 3 / multiple)",
          "return 2 ** math.ceil(math.log2(8 * d_model / 3))  # rounded up to a power of two",
          ("power of two", "multiple", "round", "ceil", "log2"),
          "rounds 8/3 · d_model up to a power of two, reading 'a multiple of a power of two' as 'a power of two': "
          "right only where the two agree, 192 becomes 256 and 2731 becomes 4096"),
        # nearest: default normalising the output or after the MLP, unseen's shared norm; here Gemma 2's sandwich,
        # each branch's output normalised by its input norm before the residual add
        M("pre_norm_block", "x = x + attn(attn_norm(x))  # the branch reads a normalised copy; the stream stays a sum\n"
          "    x = x + mlp(mlp_norm(x))    # the MLP reads the stream after attention has written to it",
          "x = x + attn_norm(attn(attn_norm(x)))  # normalised on the way in and on the way out\n"
          "    x = x + mlp_norm(mlp(mlp_norm(x)))",
          ("branch", "output", "normalis", "normaliz", "sandwich", "post-norm", "twice"),
          "normalises each branch's output as well as its input, Gemma 2's sandwich norm, reusing the input norm: "
          "the Llama block adds the branch's output to the stream as it is"),
        # nearest: fresh3 counting one block's attention, fresh6 k and v by the group size; here o_proj left out, the
        # attention taken to be its q, k and v projections
        M("param_counts", "q_and_o = 2 * d * config.n_heads * hd",
          "q_and_o = d * config.n_heads * hd",
          ("o_proj", "output projection", "attention", "q_proj", "four"),
          "counts attention as its q, k and v projections: o_proj, another d_model × n_heads · head_dim matrix per "
          "block, is left out"),
        # nearest: fresh5 counting a bias per norm, unseen's q_proj bias (a module); here nn.Linear's default bias on an
        # untied head
        M("param_counts", '"lm_head": 0 if config.tie_embeddings else config.vocab_size * d}',
          '"lm_head": 0 if config.tie_embeddings else config.vocab_size * (d + 1)}  # weight and bias',
          ("bias", "bias=false", "lm_head", "vocab_size", "head"),
          "counts a bias for an untied head, nn.Linear's default: the head is built with bias=False, its weight "
          "alone",
          regime="an untied head (tie_embeddings=False)"),
    ],
    "06": [
        # nearest: fresh2 sizing one sequence, fresh2 (notebook 07) reading max_seq_len for the context; here the
        # positions capped at max_seq_len, as if the cache could hold no more
        M("kv_cache_bytes", "return per_position * seq_len * batch_size * dtype.itemsize",
          "return per_position * min(seq_len, config.max_seq_len) * batch_size * dtype.itemsize  # never more than it holds",
          ("seq_len", "max_seq_len", "positions", "cap", "min", "context"),
          "caps the positions at config.max_seq_len, as if the cache could never hold more: the bytes of seq_len "
          "positions are asked for, whatever the config's preset length",
          regime="seq_len beyond config.max_seq_len"),
        # nearest: offlist appending to step_input instead of idx, default returning only the new tokens; here the
        # sequence rebuilt from the prompt at every step
        M("generate_greedy", "idx = torch.cat((idx, next_id), dim=1)",
          "idx = torch.cat((prompt, next_id), dim=1)",
          ("prompt", "idx", "append", "tokens", "last", "max_new_tokens", "accumulat"),
          "appends each new token to the prompt instead of to the sequence so far: the cache still decodes right, "
          "but only the last token survives, so the result is always (B, T + 1)"),
        # nearest: default never resetting the cache, fresh5 cache = cache.reset(); here a new KVCache built in place
        # of the caller's, with KVCache's defaults (float32, the CPU)
        M("generate_greedy", "cache.reset()",
          "cache = tinylm.KVCache(model.config, prompt.shape[0])  # a fresh cache: nothing stale",
          ("dtype", "device", "float32", "cache", "reset", "bfloat16", "caller"),
          "builds a new KVCache instead of resetting the caller's: KVCache's defaults are float32 on the CPU, so a "
          "bfloat16 model (or one on a GPU) meets keys of another dtype (or device) and the decoding raises",
          regime="a bfloat16 model and cache (or a model on a GPU)"),
    ],
    "07": [
        # nearest: fresh counting the tied head twice, fresh5 inverting the tying condition; here the untied embedding
        # counted as the one row a lookup reads, against the exercise's convention
        M("decode_bytes_per_token", "matrices = config.vocab_size * d * (1 if config.tie_embeddings else 2)",
          "matrices = config.vocab_size * d + (0 if config.tie_embeddings else d)  # an untied lookup reads one row",
          ("embedding", "lookup", "row", "convention", "untied", "whole", "vocab_size"),
          "counts an untied embedding as the one row a lookup reads: the exercise counts it whole (every "
          "parameter once), so an untied model is short vocab_size - 1 rows",
          regime="an untied model (tie_embeddings=False)"),
        # nearest: fresh5 counting the weights at 4 bytes; here a misplaced parenthesis that leaves the vocabulary
        # matrices in numbers
        M("decode_bytes_per_token", "weights = (matrices + L * per_block + d) * size",
          "weights = matrices + (L * per_block + d) * size",
          ("bytes", "itemsize", "size", "vocab", "embedding", "parenthes", "numbers"),
          "multiplies the blocks and the final norm by the bytes per number but not the vocabulary matrices: they "
          "are counted in numbers, half their bytes in bfloat16"),
        # nearest: default tiling k and v, fresh5 passing the number of query heads to repeat_kv; here the query heads
        # folded into (n_rep, n_kv) groups against broadcast keys, which pairs query head h with kv head h % n_kv
        M("gqa_attention", "k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)  # (B, n_heads, T, hd): only inside attention\n"
          "    return F.scaled_dot_product_attention(q, k, v, is_causal=True)",
          "B, H, T, hd = q.shape\n"
          "    groups = q.view(B, n_rep, H // n_rep, T, hd)  # the query heads of each kv head, side by side\n"
          "    y = F.scaled_dot_product_attention(groups, k[:, None], v[:, None], is_causal=True)\n"
          "    return y.reshape(B, H, T, hd)",
          ("group", "h // n_rep", "h % n_kv", "tile", "order", "kv head", "repeat_interleave", "contiguous"),
          "folds the query heads into groups instead of repeating the keys, but as (n_rep, n_kv): query head h "
          "then reads kv head h % n_kv, where the groups are contiguous (head h reads kv head h // n_rep)"),
    ],
    "08": [
        # nearest: default and offlist top_p_filter's 1 - p and batch axis; here min-p, a floor on each token's own
        # probability, read for the nucleus
        M("top_p_filter", "drop = drop_sorted.scatter(-1, order, drop_sorted)            # back to vocabulary order",
          "drop = logits.softmax(dim=-1) < p                             # a token stays if it is at least p likely",
          ("nucleus", "cumulative", "mass", "cumsum", "probability", "min-p", "threshold"),
          "keeps the tokens whose own probability is at least p (min-p sampling) instead of the smallest set "
          "whose mass reaches p: with p = 0.9 usually nothing is left, and every logit becomes -inf"),
        # nearest: default top_p_filter's softmax over the batch axis (another cell), fresh's one maximum for the batch;
        # here the softmax over dim=0, written for a single vector of logits
        M("sample_next", "probs = logits.softmax(dim=-1)",
          "probs = logits.softmax(dim=0)            # normalise the logits",
          ("dim", "axis", "batch", "softmax", "vocab", "-1"),
          "normalises with softmax(dim=0), as for one vector of logits: for (B, V) logits that "
          "normalises each token over the batch, so the draws follow the other prompts' logits (a batch of one "
          "draws uniformly)"),
        # nearest: default sampling with argmax, fresh4's temperature 0.0; here Hugging Face's do_sample=False
        # default, greedy unless a filter is given
        M("generate", "next_id = sample_next(logits, temperature, top_k, top_p, generator)  # (B,)",
          "next_id = (sample_next(logits, temperature, top_k, top_p, generator) if top_k or top_p\n"
          "                           else logits.argmax(dim=-1))   # no filter: greedy, as generate defaults to",
          ("greedy", "argmax", "sample", "temperature", "random", "do_sample"),
          "decodes greedily unless top_k or top_p is set, as Hugging Face's generate does by default: temperature "
          "and the generator are ignored and plain sampling never happens"),
    ],
    "09": [
        # nearest: fresh3 passing (B, T, V) logits unflattened, default nll_loss on raw logits; here log_softmax over
        # dim=1, the class axis of (N, C) input and the positions of (B, T, V)
        M("lm_loss", 'return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)',
          'return F.nll_loss(F.log_softmax(logits, dim=1).flatten(0, 1), targets.flatten(), ignore_index=-100)',
          ("dim", "axis", "log_softmax", "positions", "vocab", "-1", "class"),
          "takes log_softmax over dim=1, the class axis of (N, C) input: on (B, T, V) logits that normalises over "
          "the positions, not the vocabulary, so the loss is not the NLL of the targets"),
        # nearest: default warmup from 0, offlist and fresh2 decay slips; here the warmup ramps from min_lr
        M("lr_schedule", "return max_lr * (step + 1) / warmup_steps",
          "return min_lr + (max_lr - min_lr) * (step + 1) / warmup_steps  # from min_lr up to max_lr",
          ("warmup", "min_lr", "linear", "ramp", "start"),
          "ramps the warmup from min_lr to max_lr, as the decay runs between them: the schedule's warmup rises "
          "from 0 to max_lr, so every warmup step is off by min_lr · (1 - (step + 1) / warmup)"),
        # nearest: default cosine to 0 plus min_lr; here a cosine to 0 floored at min_lr
        M("lr_schedule", "return min_lr + 0.5 * (1 + math.cos(math.pi * min(progress, 1.0))) * (max_lr - min_lr)",
          "return max(min_lr, 0.5 * (1 + math.cos(math.pi * min(progress, 1.0))) * max_lr)  # never below min_lr",
          ("cosine", "floor", "min_lr", "clamp", "max_lr - min_lr", "decay"),
          "decays a cosine from max_lr to 0 and floors it at min_lr: the cosine should run between max_lr and "
          "min_lr, so the rate drops too fast and sits flat at min_lr for the last steps"),
        # nearest: default zero_grad between backward and step, unseen zeroing after backward; here zero_grad after
        # the step, which leaves whatever .grad held before the call in this step's gradients
        M("train_step", "optimizer.zero_grad(set_to_none=True)        # gradients accumulate otherwise\n"
          "    loss.backward()                              # d loss / d every parameter\n"
          "    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)  # global gradient norm <= grad_clip\n"
          "    optimizer.step()                             # the AdamW update",
          "loss.backward()\n"
          "    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)\n"
          "    optimizer.step()\n"
          "    optimizer.zero_grad(set_to_none=True)        # cleared after the step, ready for the next batch",
          ("zero_grad", "accumulat", "stale", "order", "before", "leftover", "grad"),
          "clears the gradients after the step instead of before the backward pass: gradients left in .grad by "
          "anything before the call (a gradient check, an evaluation with autograd on) are added to this batch's",
          regime="parameters handed in with gradients left in .grad"),
        # nearest: fresh4 counting 6·N·D with N every parameter (the reverse); here the memory sized by the matmul
        # weights of the 6N rule
        M("train_step_costs", "n_params = matmul_weights + (2 * L + 1) * d + (0 if config.tie_embeddings else V * d)",
          "n_params = matmul_weights",
          ("gains", "norm", "embedding", "parameters", "untied", "every parameter", "bytes"),
          "sizes the weights, gradients and moments by N of the 6N rule, the weights that multiply: the norm "
          "gains (and an untied embedding) do no matmul but are parameters, stored, differentiated and tracked"),
    ],
    "10": [
        # nearest: default evaluate's ln 2 slips, fresh's log2 of the loss; here log10(2) for the base change
        M("evaluate", '"bits_per_byte": loss / math.log(2) / bytes_per_token',
          '"bits_per_byte": loss / math.log10(2) / bytes_per_token',
          ("ln 2", "log(2)", "log10", "natural", "bits", "base"),
          "converts nats to bits with log10(2) instead of ln 2: a loss in nats divided by 0.301 instead of 0.693"),
        # nearest: fresh6's count of sequences, heldout's half-precision sum; here the count summed in the logits'
        # dtype, which bfloat16 rounds above 256
        M("nll_sum_and_count", "count = int((targets != ignore_index).sum())",
          "count = int((targets != ignore_index).to(logits.dtype).sum())",
          ("dtype", "bfloat16", "precision", "count", "round", "int", "float"),
          "sums the scored-target mask in the logits' dtype, as if to multiply it into the losses: bfloat16 holds "
          "whole numbers exactly only up to 256, so a larger count is rounded",
          regime="bfloat16 logits with more than 256 scored targets"),
        # nearest: default scoring the pairs backwards, fresh's count of len(val); here the validation bytes counted into
        # the table they are scored with
        M("bigram_nll", "train, val = train.long(), val.long()",
          "train, val = torch.cat((train, val)).long(), val.long()  # every byte we have",
          ("val", "leak", "train", "held-out", "counts", "validation"),
          "counts the bigrams of train and val together: the validation pairs are scored by a table that has "
          "seen them, so the NLL is too low"),
        # nearest: fresh averaging over len(val), fresh3's chained index; here np.roll's wrap-around, which adds the
        # pair (last, first)
        M("bigram_nll", "[val[:-1], val[1:]]", "[val, val.roll(-1)]",
          ("roll", "wrap", "pairs", "last", "first", "len(val) - 1", "extra"),
          "pairs each byte with the next through val.roll(-1), NumPy's np.roll: the last byte wraps around to the "
          "first, so one pair that is not in the text is scored and the mean runs over len(val) pairs"),
        # nearest: fresh nll_sum_and_count keeping the count at least 1 (another cell); here a row's total clamped to
        # 1, which add-alpha smoothing never needed
        M("bigram_nll", "counts.sum(dim=1, keepdim=True) + 256 * alpha",
          "counts.sum(dim=1, keepdim=True).clamp(min=1) + 256 * alpha",
          ("clamp", "zero", "row", "unseen", "smoothing", "denominator", "alpha"),
          "clamps each row's total to at least 1 against a division by zero that the smoothing already prevents: "
          "a previous byte never seen in train gets (0 + alpha) / (1 + 256 alpha), not 1/256",
          regime="previous bytes never seen in the training text"),
    ],
}
