"""A second held-out set of beginner mistakes ("unseen"), written from the
learner's notebooks and the reference answers only, without reading the
checks, their tests, the diagnostics benchmark or the project's mutation lists
(nbNN.py), and different from heldout.py's. Not part of the default run:
`python benchmarks/bench_diagnostics.py --set unseen`.

Every mistake is one substitution in one answer cell, of the kind a learner
makes writing the code from the prose: off-by-one positions, a wrong axis or
comparison, a config field or argument ignored, a statistic over the wrong
count, an order of operations, a dtype left as it came. Most still return a
tensor of the right shape; `regime` names the situation in which a mistake
that is right elsewhere shows (a batch of one, a KV cache with start_pos > 0,
a non-default config value, float16 or uint8 input, a non-contiguous input).
`benchmarks/verify_unseen.py` proves each one a real bug.

`in_lists` was filled in only after all 45 were written and verified: True
where essentially the same mistake (same cell, same wrong idea) is already in
one of benchmarks/mutations/nbNN.py, so the measurement can report the share
of mistakes that appear in none of the project's lists."""
from __future__ import annotations

from dataclasses import dataclass

from . import Mutation


@dataclass(frozen=True)
class Unseen(Mutation):
    """A Mutation with two facts for the report: `regime`, the situation in
    which the mistake shows when it is right in the default one ("" when it
    is wrong there too), and `in_lists`, whether the project's own mutation
    lists already hold essentially this mistake."""

    regime: str = ""
    in_lists: bool = False


M = Unseen

IGNORED_EPS = ("eps", "epsilon")
START_POS = ("start_pos", "offset", "cached positions", "positions of the new")

# notebook 10's evaluate: its accumulation loop, and the loop with the result
NO_GRAD_LOOP = ("        with torch.no_grad():                                # no graph: memory stays flat\n"
                "            for x, y in batches:\n"
                "                s, n = nll_sum_and_count(model(x.to(dev)), y.to(dev))\n"
                "                total, count = total + s, count + n          # combine by tokens, not by batches\n")
EVAL_TAIL = ("    total, count = 0.0, 0\n    try:\n" + NO_GRAD_LOOP
             + "    finally:\n        model.train(was_training)\n    loss = total / count\n"
             '    return {"loss": loss, "perplexity": math.exp(loss),')

MUTATIONS = {
    "01": [
        M("one_hot_embed", "F.one_hot(ids, num_classes=weight.shape[0])", "F.one_hot(ids)",
          ("num_classes", "number of classes", "one-hot width", "weight.shape[0]", "vocabulary size", "largest id"),
          "lets F.one_hot infer the width from the largest id in the batch: it is V only when id V-1 happens to occur", in_lists=True),
        M("tied_logits", "return x @ weight.T", "return (x @ weight.T).softmax(dim=-1)",
          ("softmax", "probabilities", "not logits", "normalis", "normaliz", "sum to 1"),
          "returns probabilities instead of logits: a softmax the loss and the sampler apply again", in_lists=True),
        M("tie_weights", "lm_head.weight = tok_emb.weight", "lm_head.weight.data = tok_emb.weight.data",
          ("same parameter", "same nn.parameter", "is tok_emb.weight", ".data", "two parameters", "separate parameter",
           "not tied", "storage"),
          "shares the storage through .data: two Parameter objects, each with its own gradient and optimizer state", in_lists=True),
    ],
    "02": [
        M("rms_norm", "x32.pow(2).mean(dim=-1, keepdim=True)", "x32.pow(2).mean()",
          ("last axis", "dim=-1", "whole tensor", "all tokens", "per token", "each token", "across tokens",
           "other positions", "other tokens"),
          "averages the squares over the whole tensor: one statistic for the batch instead of one per token", in_lists=True),
        M("rms_norm", "x32 = x.float()  # squares of fp16 values overflow above 256", "x32 = x",
          ("float32", "overflow", "upcast", "half precision", "float16", "fp16", "inf"),
          "computes the statistic in the input's own precision: float16 entries above 256 square to inf",
          regime="float16 input with entries above 256", in_lists=True),
        M("layer_norm", "var = centred.pow(2).mean(dim=-1, keepdim=True)", "var = x.var(dim=-1, keepdim=True)",
          ("unbiased", "biased", "d - 1", "n - 1", "bessel", "correction", "divides by d"),
          "takes torch's default unbiased variance (divides by d - 1) instead of the biased one LayerNorm uses", in_lists=True),
        M("RMSNorm", "return rms_norm(x, self.weight, self.eps)", "return rms_norm(x, self.weight)",
          IGNORED_EPS, "stores eps but never passes it on: every RMSNorm uses the default 1e-6",
          regime="an eps other than the default 1e-6", in_lists=True),
    ],
    "03": [
        M("causal_mask", "allowed.tril(diagonal=kv_len - q_len)", "allowed.tril(diagonal=q_len - kv_len)",
          ("bottom-right", "kv_len - q_len", "offset", "diagonal", "cached", "fewer queries", "q_len < kv_len"),
          "shifts the diagonal the wrong way: with fewer queries than keys the first rows see no key at all",
          regime="fewer queries than keys (q_len < kv_len, a KV cache)", in_lists=True),
        M("split_heads", "y.transpose(1, 2).reshape(B, T, H * hd)", "y.reshape(B, T, H * hd)",
          ("transpose", "merge_heads", "heads and positions", "mixes", "layout", "order of the axes", "tokens"),
          "merges heads with a reshape alone: without the transpose the features of different positions are mixed", in_lists=True),
        M("causal_attention", 'scores = scores.masked_fill(~mask, float("-inf"))', "scores = scores.masked_fill(~mask, 0.0)",
          ("-inf", "infinity", "zero score", "future", "leak", "masked"),
          "sets the future scores to 0 instead of -inf: exp(0) = 1 gives the future keys weight", in_lists=True),
        # in none of the lists: nb03 has the mask left out and filled with 0 before the softmax, not weights zeroed after it
        M("causal_attention", 'scores = scores.masked_fill(~mask, float("-inf"))\n'
          "    weights = scores.softmax(dim=-1)                                 # over keys: each row sums to 1",
          "weights = scores.softmax(dim=-1).masked_fill(~mask, 0.0)         # the future's weights zeroed",
          ("renormal", "sum to 1", "sums to 1", "after the softmax", "before the softmax", "do not sum"),
          "zeroes the future's weights after the softmax: the remaining weights no longer sum to 1"),
        M("self_attention", "F.linear(merge_heads(y), w_o)", "merge_heads(y) @ w_o",
          ("w_o", "transpose", "layout", "[d_out, d_in]", "output projection", "o_proj", "w.t"),
          "applies the output projection as y @ w_o, forgetting that nn.Linear weights are stored [d_out, d_in]", in_lists=True),
    ],
    "04": [
        M("rope_cache", "-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim",
          "-torch.arange(0, head_dim, 2, dtype=torch.float32) / (head_dim // 2)",
          ("frequenc", "2i/d", "exponent", "inv_freq", "omega", "angle"),
          "counts the factor 2 twice: arange(0, d, 2) already is 2i, and it divides by d/2, so pair i turns at "
          "theta^(-4i/d)", in_lists=True),
        M("rope_cache", "inv_freq = theta ** (", "inv_freq = 10000.0 ** (",
          ("theta", "rope_theta", "base"),
          "writes the usual base 10000 into the formula: the theta argument is ignored",
          regime="a rope_theta other than 10000", in_lists=True),
        M("rope_cache", "return angles.cos(), angles.sin()", "return angles.sin(), angles.cos()",
          ("swapped", "sin and cos", "cos and sin", "order", "cos table", "sin table"),
          "returns the tables in the order (sin, cos)", in_lists=True),
        M("apply_rope", "return torch.cat((-x2, x1), dim=-1)", "return torch.cat((x2, -x1), dim=-1)",
          ("rotate_half", "sign", "direction", "opposite", "negative angle", "-x2", "clockwise"),
          "rotate_half returns (x2, -x1): every pair turns by minus its angle, still a rotation, the wrong one", in_lists=True),
        M("rotary_attention", "k = apply_rope(k, cos, sin, start_pos)", "k = apply_rope(k, cos, sin)",
          START_POS + ("keys at position 0", "key positions"),
          "rotates the queries at start_pos but the keys from position 0",
          regime="start_pos > 0", in_lists=True),
    ],
    "05": [
        M("swiglu", "gate = F.silu(x @ w_gate.T)", "gate = torch.sigmoid(x @ w_gate.T)",
          ("silu", "sigmoid", "swish", "activation", "nonlinearity"),
          "gates with the sigmoid (GLU) instead of SiLU = a * sigmoid(a)", in_lists=True),
        M("swiglu_hidden", "math.ceil(8 * d_model / 3 / multiple)", "math.ceil(8 // 3 * d_model / multiple)",
          ("8/3", "integer division", "8 // 3", "2 * d", "2·d", "floor"),
          "writes 8 // 3 for 8/3: integer division makes the factor 2", in_lists=True),
        M("pre_norm_block", "    x = x + attn(attn_norm(x))  # the branch reads a normalised copy; the stream stays a sum\n"
          "    x = x + mlp(mlp_norm(x))    # the MLP reads the stream after attention has written to it\n"
          "    return x",
          "    h = x + attn(attn_norm(x))  # both branches read the block's input\n"
          "    return h + mlp(mlp_norm(x))",
          ("parallel", "after attention", "block's input", "original x", "before attention", "attention's output"),
          "lets the MLP read the block's input instead of the stream after attention (a parallel block)", in_lists=True),
        M("pre_norm_block", "x = x + mlp(mlp_norm(x))", "x = x + mlp(attn_norm(x))",
          ("mlp_norm", "attn_norm", "wrong norm", "same norm", "second norm"),
          "normalises the MLP's input with attn_norm: the two norms are only interchangeable while their gains are equal",
          regime="two different norms (trained gains)", in_lists=True),
        # in none of the lists: nb05 has no mistake in the Attention module's projections but n_kv_heads in the key split
        M("Transformer", "self.q_proj = nn.Linear(config.d_model, config.n_heads * config.head_dim, bias=False)",
          "self.q_proj = nn.Linear(config.d_model, config.n_heads * config.head_dim)",
          ("bias", "q_proj.bias", "unexpected", "extra parameter"),
          "leaves out bias=False on q_proj: an extra bias Parameter Llama's weights do not have"),
        # in none of the lists: nb05 has no ignored config field in the Transformer cell
        M("Transformer", "self.norm = RMSNorm(config.d_model, config.norm_eps)", "self.norm = RMSNorm(config.d_model)",
          ("norm_eps",) + IGNORED_EPS + ("final norm",),
          "builds the final norm without config.norm_eps: it always uses the default",
          regime="a norm_eps other than the default 1e-6"),
    ],
    "06": [
        M("cache_update", "k_all = torch.cat((past_k, k), dim=2)", "k_all = torch.cat((k, past_k), dim=2)",
          ("order", "past first", "before the past", "after the past", "new keys first", "prepend", "k_all"),
          "puts the new keys before the cached ones (the values stay in order)", in_lists=True),
        M("cache_update", "v_all = torch.cat((past_v, v), dim=2)", "v_all = torch.cat((past_v, k), dim=2)",
          ("v_all", "values", "keys instead", "instead of v", "copy"),
          "copy-pastes the key line: the new values appended to the cache are the new keys", in_lists=True),
        M("attention_step", "attn_mask=mask)", "attn_mask=~mask)",
          ("inverted", "~mask", "true = may attend", "true means", "convention", "negated", "future"),
          "negates the mask as for nn.MultiheadAttention (True = blocked), but SDPA's True means may attend", in_lists=True),
        # in none of the lists: nb06 caches the keys before rotating them; here the cached keys are rotated twice
        M("attention_step", "    k = tinylm.apply_rope(k, cos, sin, start_pos=start)\n"
          "    k_all, v_all = cache_update(past_k, past_v, k, v)    # (B, n_kv, start + T, hd)",
          "    k_all, v_all = cache_update(past_k, past_v, k, v)    # (B, n_kv, start + T, hd)\n"
          "    k_all = tinylm.apply_rope(k_all, cos, sin)           # every key at its position 0 .. start + T - 1",
          ("rotated again", "twice", "cached keys", "re-rotat", "double", "already rotated", "after rotation"),
          "rotates all keys after appending: the cached keys, stored already rotated, are rotated again",
          regime="a step after the prefill (start > 0)"),
        M("generate_greedy", "logits = model(step_input, cache=cache)[:, -1]", "logits = model(step_input, cache=cache)[:, 0]",
          ("last position", "[:, -1]", "position 0", "first position", "first token"),
          "takes the logits of the first position: right for one-token decode steps, wrong after the prefill", in_lists=True),
    ],
    "07": [
        # in none of the lists: nb07 repeats the positions with repeat_interleave(dim=2), which changes the shape; this keeps it
        M("repeat_kv", "x = x[:, :, None].expand(B, n_kv, n_rep, T, hd)", "x = x[:, :, :, None].expand(B, n_kv, T, n_rep, hd)",
          ("positions", "sequence axis", "wrong axis", "time axis", "mixes", "interleav", "axis"),
          "inserts the repeat axis after the positions: the reshape then interleaves positions across heads"),
        M("gqa_attention", "F.scaled_dot_product_attention(q, k, v, is_causal=True)", "F.scaled_dot_product_attention(q, k, v)",
          ("causal", "future", "is_causal", "mask"),
          "calls SDPA without is_causal=True: every query reads the future", in_lists=True),
        # in none of the lists: nb07 forgets start_pos (0); here the offset is start + T - 1, right without a cache
        M("gqa_step", "q, k = tinylm.apply_rope(q, cos, sin, start), tinylm.apply_rope(k, cos, sin, start)",
          "last = start + T - 1  # the newest token's position\n"
          "    q, k = tinylm.apply_rope(q, cos, sin, last), tinylm.apply_rope(k, cos, sin, last)",
          START_POS + ("start + t - 1", "angle", "rotated at"),
          "rotates the new tokens from the position of the newest one: the keys of a multi-token prefill land T - 1 too far",
          regime="decoding after a prefill of more than one token"),
    ],
    "08": [
        M("top_k_filter", "logits < kth", "logits <= kth",
          ("k-1", "k - 1", "<=", "k-th", "kth", "one fewer", "ties"),
          "masks with <=: the k-th largest is dropped too, k - 1 tokens survive", in_lists=True),
        M("top_p_filter", "drop_sorted.scatter(-1, order, drop_sorted)", "drop_sorted.gather(-1, order)",
          ("scatter", "gather", "vocabulary order", "permutation", "inverse", "sorted order", "unsort"),
          "maps the mask back with gather: that applies the sort permutation again instead of undoing it", in_lists=True),
        # in none of the lists: nb08 forgets the squeeze (B, 1); here squeeze() drops the batch of one
        M("sample_next", ".squeeze(-1)", ".squeeze()",
          ("batch of one", "squeeze", "(b,)", "(1,)", "batch size 1", "0-d", "scalar", "shape"),
          "squeezes every axis of size 1: a batch of one comes back as a 0-d tensor",
          regime="a batch of one"),
        M("sample_next", "torch.multinomial(probs, num_samples=1, generator=generator)", "torch.multinomial(probs, num_samples=1)",
          ("generator", "reproducib", "seed", "global rng", "random state"),
          "draws without the generator argument: the global RNG decides, seeded runs are not reproducible", in_lists=True),
        M("generate", "    model.eval()                                            # dropout off while generating\n", "",
          ("eval", "train mode", "training mode", "dropout"),
          "never calls model.eval(): a model in train mode generates with dropout on", in_lists=True),
    ],
    "09": [
        M("get_batch", "torch.randint(len(data) - seq_len, (batch_size,), generator=generator)",
          "torch.randint(len(data) - seq_len - 1, (batch_size,), generator=generator)",
          ("last window", "last valid start", "len(data) - seq_len", "off by one", "off-by-one", "never drawn",
           "exclusive", "last token"),
          "passes the largest valid start as randint's (exclusive) high: the last window of the data is never drawn",
          regime="only the last window is missing: visible on short data or over many draws", in_lists=True),
        M("get_batch", "return window[:, :-1], window[:, 1:]", "return window[:, 1:], window[:, :-1]",
          ("shift", "swapped", "x and y", "previous token", "targets", "wrong way"),
          "returns (y, x): the model would learn to predict the previous token", in_lists=True),
        # in none of the lists: nb09 has no .view on non-contiguous logits
        M("lm_loss", "logits.flatten(0, 1)", "logits.view(-1, logits.shape[-1])",
          ("contiguous", "view", "reshape", "flatten"),
          "flattens with .view, which fails on sliced (non-contiguous) logits such as logits[:, :-1]",
          regime="non-contiguous logits"),
        # in none of the lists: nb09 has no schedule past total_steps
        M("lr_schedule", "min(progress, 1.0)", "progress",
          ("after the last step", "past total_steps", "beyond", "clamp", "rises", "total_steps", "min_lr"),
          "lets the cosine run on past the last step: the rate climbs back towards max_lr",
          regime="step >= total_steps"),
        M("train_step", "    optimizer.zero_grad(set_to_none=True)        # gradients accumulate otherwise\n"
          "    loss.backward()                              # d loss / d every parameter\n",
          "    loss.backward()                              # d loss / d every parameter\n"
          "    optimizer.zero_grad(set_to_none=True)        # gradients accumulate otherwise\n",
          ("zero_grad", "no update", "did not move", "unchanged", "order", "after backward", "not updated"),
          "zeroes the gradients after backward: the step applies nothing", in_lists=True),
    ],
    "10": [
        M("nll_sum_and_count", "ignore_index=ignore_index,", "ignore_index=-100,",
          ("ignore_index", "padding"),
          "hard-codes -100 in cross_entropy: another ignore_index is scored in the sum but not counted",
          regime="an ignore_index other than -100", in_lists=True),
        # in none of the lists: nb10 averages the batches' mean losses; here the loss is right and the
        # perplexity is the mean of the batches' exps
        M("evaluate", EVAL_TAIL, EVAL_TAIL.replace("total, count = 0.0, 0", "total, count, batch_ppl = 0.0, 0, []")
          .replace("by batches\n", "by batches\n                batch_ppl.append(math.exp(s / n))  # this batch's perplexity\n")
          .replace('"perplexity": math.exp(loss)', '"perplexity": sum(batch_ppl) / len(batch_ppl)'),
          ("jensen", "per-batch perplexit", "mean of the perplexities", "average of perplexities", "exp of the mean",
           "mean loss", "token-weighted"),
          "reports the mean of the batches' perplexities, not the perplexity of the token-weighted mean loss"),
        M("evaluate", NO_GRAD_LOOP,
          "        for x, y in batches:\n"
          "            s, n = nll_sum_and_count(model(x.to(dev)), y.to(dev))\n"
          "            total, count = total + s, count + n\n",
          ("no_grad", "gradient", "graph", "autograd", "memory", "requires_grad"),
          "evaluates without torch.no_grad(): every batch builds an autograd graph", in_lists=True),
        M("bigram_nll", "    train, val = train.long(), val.long()\n", "",
          ("uint8", "overflow", "long", "int64", "dtype", "wrap"),
          "uses the ids in the dtype they come in: uint8 bytes overflow in prev * 256 + next and index as masks",
          regime="uint8 data (the course corpus)", in_lists=True),
    ],
}
