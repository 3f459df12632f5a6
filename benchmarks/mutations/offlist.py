"""A third held-out set of beginner mistakes ("offlist"): 35 mistakes that
are in none of the project's mutation lists (nbNN.py, heldout.py,
unseen.py), which were read first precisely to avoid them. Written
from the learner's notebooks, the reference answers and tinylm only, without
reading the checks, their tests or the diagnostics benchmark. Not part of the
default run: `python benchmarks/bench_diagnostics.py --set offlist`.

The unseen set turned out to repeat the lists for 35 of its 45 mistakes, so
it said little about mistakes the checks' authors never saw; this set is
meant to measure exactly that. A mistake counts as in a list when the same
cell already holds the same wrong idea; the comment above each entry names
the nearest list entry and how this one differs.

Each is one substitution in one answer cell's solution, of the kind a learner
makes writing the code from the prose: arithmetic slips, an index or slice
one off, a reduction or split on the wrong axis, a shape that only works for
some sizes, state kept across steps, numerics that only break at large
logits, dtype left as computed. `regime` names the situation in which a
mistake that is right elsewhere shows (a batch of one or of more, bfloat16,
trained gains, a KV cache after the prefill, one kv head, large logits,
top_k and top_p together, no generator passed, all padding).
`benchmarks/verify_unseen.py --set offlist` proves each one a real bug.
"""
from __future__ import annotations

from .unseen import Unseen as M

# notebook 08's sample_next: the two filters in the solution's order (top-k, then top-p)
TOP_K_THEN_TOP_P = ("    if top_k is not None:\n        logits = top_k_filter(logits, top_k)\n"
                    "    if top_p is not None:\n        logits = top_p_filter(logits, top_p)\n")
TOP_P_THEN_TOP_K = ("    if top_p is not None:\n        logits = top_p_filter(logits, top_p)\n"
                    "    if top_k is not None:\n        logits = top_k_filter(logits, top_k)\n")

# notebook 10's nll_sum_and_count, from the reduction to the return
NLL_TAIL = ('reduction="sum")                       # (B*T, V) vs (B*T,) -> scalar\n'
            "    count = int((targets != ignore_index).sum())                 # padding is not a token\n"
            "    return nll.item(), count")

# notebook 10's evaluate: the running totals set up, then the loop over the batches
TOTALS_THEN_LOOP = ("    total, count = 0.0, 0\n    try:\n"
                    "        with torch.no_grad():                                # no graph: memory stays flat\n"
                    "            for x, y in batches:\n")

LARGE_LOGITS = ("overflow", "underflow", "inf", "large logits", "numerically", "nan")

MUTATIONS = {
    "01": [
        # nearest: nb01 embed .detach() (no gradient at all); here the forward is exact and only row 0 loses its gradient
        M("embed", "return weight[ids]", "return F.embedding(ids, weight, padding_idx=0)",
          ("padding_idx", "id 0", "row 0", "token 0", "gradient", "no grad"),
          "copies padding_idx=0 from an nn.Embedding example: the lookup is right, but row 0 (a real byte) never "
          "receives a gradient", regime="the gradient of the row of id 0"),
        # nearest: nb01 one_hot_embed without .to (int64 @ float); here the dtype is right and the 2-D-only matmul fails
        M("one_hot_embed", "return one_hot @ weight", "return torch.mm(one_hot, weight)",
          ("torch.mm", "2-d", "two-dimensional", "matrix", "batch", "(b, t)", "leading axes", "matmul", "@"),
          "multiplies with torch.mm, which takes matrices only: right for a flat list of ids, raises for (B, T) ids"),
    ],
    "02": [
        # nearest: nb02 rms_norm (mean x)² or layer_norm without centring; here RMSNorm centres (torch.var, unbiased)
        M("rms_norm", "x32.pow(2).mean(dim=-1, keepdim=True)", "x32.var(dim=-1, keepdim=True)",
          ("variance", "var(", "centred", "centered", "mean subtracted", "mean square", "layernorm", "standard deviation"),
          "divides by the standard deviation (torch.var) instead of the root mean square: the token's mean is "
          "subtracted as in LayerNorm"),
        # nearest: nb02 RMSNorm gain initialised to zeros/randn; here the value is right and the shape is (1,)
        M("RMSNorm", "nn.Parameter(torch.ones(dim))", "nn.Parameter(torch.ones(1))",
          ("per-feature", "per feature", "scalar", "shape", "(dim,)", "one gain", "single gain", "numel", "size mismatch"),
          "makes the gain a single scalar: a fresh norm is right, but all features share one gain",
          regime="trained gains (a state dict with one gain per feature)"),
        # nearest: nb02 rms_norm without the gain; here the gain is applied twice
        M("RMSNorm", "return rms_norm(x, self.weight, self.eps)", "return self.weight * rms_norm(x, self.weight, self.eps)",
          ("twice", "gain applied", "squared", "double", "weight²", "weight ** 2", "weight * weight"),
          "multiplies by the gain although rms_norm already applies it: right while the gain is 1",
          regime="a gain other than 1 (trained)"),
    ],
    "03": [
        # nearest: nb03 merge_heads without the transpose; here the transpose is there and the unpacking is wrong
        M("split_heads", "B, H, T, hd = y.shape", "B, T, H, hd = y.shape",
          ("shape", "unpack", "(b, h, t, hd)", "order", "positions and heads", "heads and positions", "n_heads"),
          "unpacks merge_heads' input as (B, T, H, hd): the reshape gives (B, H, T·hd), right only when there are "
          "as many heads as positions"),
        # nearest: nb02 rms_norm without the cast back; here in attention, where float32 weights meet half-precision v
        M("causal_attention", "weights = scores.softmax(dim=-1)", "weights = scores.float().softmax(dim=-1)",
          ("dtype", "float32", "half", "bfloat16", "float16", "cast back", "upcast", "precision"),
          "takes the softmax in float32 for stability and never casts back: half-precision v meets float32 weights",
          regime="half-precision (bfloat16, float16) q, k and v"),
        # nearest: nb03 causal_attention dividing by head_dim (the same numbers); here self_attention scales once more
        M("self_attention", "y = causal_attention(q, k, v)", "y = causal_attention(q / math.sqrt(q.shape[-1]), k, v)",
          ("scale", "twice", "double", "sqrt(head_dim)", "1/head_dim", "1/sqrt", "already scales"),
          "scales the queries by 1/sqrt(head_dim) before causal_attention, which scales the scores again"),
    ],
    "04": [
        # nearest: nb04 positions numbered from 1; here from 0, one row short
        M("rope_cache", "torch.arange(max_seq_len, dtype=torch.float32)", "torch.arange(max_seq_len - 1, dtype=torch.float32)",
          ("max_seq_len", "last position", "one row", "rows", "off by one", "off-by-one", "shape", "one short"),
          "numbers the positions with arange(max_seq_len - 1), as if arange included its end: the tables have no row "
          "for the last position"),
        # nearest: nb04 even/odd split (x[..., ::2]); here split's argument is read as a count
        M("apply_rope", "x1, x2 = x.chunk(2, dim=-1)", "x1, x2 = x.split(2, dim=-1)",
          ("split", "chunk", "halves", "head_dim", "size 2", "split_size", "two halves"),
          "halves with x.split(2), whose 2 is a size, not a count: right only for head_dim 4"),
        # nearest: nb04 T read from the feature axis; here rotate_half splits the positions
        M("apply_rope", "x1, x2 = x.chunk(2, dim=-1)", "x1, x2 = x.chunk(2, dim=-2)",
          ("positions", "last axis", "dim=-1", "feature", "halves", "wrong axis", "sequence axis"),
          "takes rotate_half's halves along the positions axis: an even number of positions gives the right shape, "
          "wrong values"),
        # nearest: nb03 self_attention using the queries as keys; here in notebook 04, the rotated queries
        M("rotary_attention", "k = apply_rope(k, cos, sin, start_pos)", "k = apply_rope(q, cos, sin, start_pos)",
          ("keys", "queries as keys", "q instead of k", "copy", "apply_rope(q", "k = "),
          "copy-pastes the query line for the keys: the rotated queries are used as keys"),
    ],
    "05": [
        # nearest: nb05 swiglu using w_up for the gate, or gate and up swapped; here w_down feeds the up branch
        M("swiglu", "up = x @ w_up.T", "up = x @ w_down",
          ("w_up", "w_down", "up projection", "down projection", "up branch", "wrong matrix"),
          "builds the up branch from w_down (x @ w_down has the shape of x @ w_up.T): w_up is never used"),
        # nearest: nb05 swiglu_hidden rounding down or to the nearest; here the round-up idiom adds one multiple too many
        M("swiglu_hidden", "multiple * math.ceil(8 * d_model / 3 / multiple)", "multiple * (int(8 * d_model / 3 / multiple) + 1)",
          ("round up", "rounded up", "ceil", "exact multiple", "already a multiple", "extra multiple", "+ 1", "off by one"),
          "rounds up by truncating and adding one: a size that already is a multiple gets one multiple too many",
          regime="8·d_model/3 already a multiple of `multiple` (e.g. d_model = 96)"),
        # nearest: unseen's final norm without norm_eps; here the final norm is skipped
        M("Transformer", "return tied_logits(self.norm(x), self.lm_head.weight)", "return tied_logits(x, self.lm_head.weight)",
          ("final norm", "self.norm", "norm before the head", "last norm", "final rmsnorm", "not normalised", "unnormalised"),
          "computes the logits from the residual stream without the final norm (self.norm is built, never used)"),
        # nearest: heldout's blocks called without their index; here the loop stops one block early
        M("Transformer", "        for i, block in enumerate(self.blocks):\n            x = block(x, self.rope_cos, self.rope_sin, cache, i)",
          "        for i in range(len(self.blocks) - 1):\n            x = self.blocks[i](x, self.rope_cos, self.rope_sin, cache, i)",
          ("last block", "last layer", "n_layers", "skip", "fewer layers", "every block", "off by one", "off-by-one"),
          "loops over range(len(self.blocks) - 1): the last block never runs"),
        # nearest: nb05 pre_norm_block adding the branch to the normalised input; here a residual around the whole block
        M("Transformer", "x = block(x, self.rope_cos, self.rope_sin, cache, i)", "x = x + block(x, self.rope_cos, self.rope_sin, cache, i)",
          ("residual", "twice", "double", "already adds", "2x", "doubled", "2 · x", "2·x"),
          "adds a residual around each block, whose forward already returns x plus its branches: the stream doubles "
          "at every layer"),
    ],
    "06": [
        # nearest: nb06 v_all appending the new keys (past_v, k); here the new values follow the cached keys
        M("cache_update", "v_all = torch.cat((past_v, v), dim=2)", "v_all = torch.cat((past_k, v), dim=2)",
          ("past_v", "past_k", "cached values", "keys instead", "value history", "copy"),
          "copy-pastes the key line and keeps past_k: the cached values are replaced by the cached keys, right while "
          "the cache is empty", regime="a non-empty cache (every step after the prefill)"),
        # nearest: nb06 cache_update returning only the new entries; here the cache is right and attention ignores it
        M("attention_step", "y = F.scaled_dot_product_attention(q, k_all, v_all, attn_mask=mask)",
          "y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)",
          ("k_all", "v_all", "cached keys", "only the new", "new tokens only", "past", "cache is not used"),
          "attends to the new keys and values only, not to k_all and v_all: right in the prefill, wrong once the "
          "cache holds earlier positions", regime="a step after the prefill (start > 0)"),
        # nearest: nb06 generate_greedy returning only the new tokens; here the history restarts at every step
        M("generate_greedy", "idx = torch.cat((idx, next_id), dim=1)", "idx = torch.cat((step_input, next_id), dim=1)",
          ("prompt", "history", "previous tokens", "dropped", "lost", "step_input", "idx"),
          "appends to step_input instead of idx: right for one new token, then each step keeps only the previous token",
          regime="more than one new token"),
        # nearest: nb08 sample_next without the squeeze, (B, 1); here the new axis goes in front, (1, B)
        M("generate_greedy", "next_id = logits.argmax(dim=-1, keepdim=True)", "next_id = logits.argmax(dim=-1)[None]",
          ("batch", "(b, 1)", "(1, b)", "axis", "shape", "unsqueeze", "[none]"),
          "adds the token axis in front ([None] gives (1, B), not (B, 1)): right for a batch of one prompt",
          regime="a batch of more than one prompt"),
    ],
    "07": [
        # nearest: nb07 gqa_attention's n_rep upside down; here the head counts are read from the positions axis
        M("gqa_attention", "n_rep = q.shape[1] // k.shape[1]", "n_rep = q.shape[2] // k.shape[2]",
          ("n_rep", "heads axis", "shape[1]", "axis 1", "layout", "positions", "(b, t, h, hd)", "wrong axis"),
          "reads the head counts from axis 2, as if q were (B, T, H, hd): n_rep is T // T = 1 and nothing is repeated"),
        # nearest: nb07 expand on a non-singleton axis; here an early return for a single kv head
        M("repeat_kv", "    B, n_kv, T, hd = x.shape\n",
          "    B, n_kv, T, hd = x.shape\n    if n_kv == 1:\n        return x  # one kv head broadcasts over the query heads anyway\n",
          ("n_kv == 1", "single kv head", "one kv head", "mqa", "broadcast", "shape", "early return", "not repeated"),
          "returns a single kv head unrepeated, counting on broadcasting: with MQA the result has 1 head, not n_rep",
          regime="one kv head (MQA, n_kv_heads = 1)"),
    ],
    "08": [
        # nearest: nb08 top_p softmax over the batch axis; here the cumulative sum runs over the batch
        M("top_p_filter", "mass_before = probs.cumsum(dim=-1) - probs", "mass_before = probs.cumsum(dim=0) - probs",
          ("cumsum", "axis", "dim", "batch", "rows", "cumulative", "across the batch"),
          "accumulates the mass over the batch axis (cumsum(dim=0)): right for one row, wrong for every later row",
          regime="a batch of more than one row"),
        # nearest: nb03 hand-written softmax without the max; here exp(logits) goes to multinomial unnormalised
        M("sample_next", "probs = logits.softmax(dim=-1)", "probs = logits.exp()  # multinomial normalises the weights itself",
          LARGE_LOGITS + ("exp", "softmax", "max", "normalis"),
          "hands exp(logits) to multinomial, which normalises anyway: right until a logit above about 88 overflows to inf",
          regime="large logits (above about 88 in float32)"),
        # nearest: nb08 (learner-reports) temperature applied after the filters (once); here it is applied twice
        M("sample_next", "probs = logits.softmax(dim=-1)", "probs = (logits / temperature).softmax(dim=-1)",
          ("temperature", "twice", "squared", "t²", "t^2", "t ** 2", "double"),
          "divides by the temperature a second time before the softmax: the effective temperature is T², right only at 1",
          regime="a temperature other than 1"),
        # nearest: nb08 top-p never applied; here both filters run, top-p first
        M("sample_next", TOP_K_THEN_TOP_P, TOP_P_THEN_TOP_K,
          ("order", "top-k before top-p", "top_k before top_p", "top-p before top-k", "top_p first", "after top-k",
           "renormal"),
          "applies top-p before top-k: the nucleus is measured on the full distribution, not on the k survivors",
          regime="top_k and top_p both set"),
    ],
    "09": [
        # nearest: nb09 windows one too long (arange(seq_len + 2)); here one too short
        M("get_batch", "torch.arange(seq_len + 1)", "torch.arange(seq_len)",
          ("seq_len + 1", "window", "one short", "seq_len - 1", "shape", "t + 1", "too short", "off by one"),
          "takes windows of seq_len tokens instead of seq_len + 1: x and y come out one position short"),
        # nearest: nb09 generator ignored (global RNG); here a fixed-seed fallback when no generator is passed
        M("get_batch", "(batch_size,), generator=generator)", "(batch_size,), generator=generator or torch.Generator().manual_seed(0))",
          ("same batch", "every call", "generator", "seed", "fixed", "reproducib", "global rng", "identical"),
          "falls back to a fresh generator seeded 0 when none is passed: every such call returns the same batch",
          regime="no generator passed (generator=None)"),
        # nearest: nb09 nll_loss on raw logits / softmax before cross_entropy; here log(softmax), exact but for underflow
        M("lm_loss", "F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)",
          "F.nll_loss(logits.flatten(0, 1).softmax(dim=-1).log(), targets.flatten(), ignore_index=-100)",
          LARGE_LOGITS + ("log_softmax", "log of 0", "log(0)", "-inf", "log(softmax"),
          "takes the log of the softmax instead of log_softmax: a probability that underflows to 0 gives an infinite loss",
          regime="large logits (a gap above about 100 between classes)"),
        # nearest: nb09 cosine to 0 plus min_lr; here the 1/2 of the cosine is missing
        M("lr_schedule", "min_lr + 0.5 * (1 + math.cos(", "min_lr + (1 + math.cos(",
          ("0.5", "half", "factor", "twice", "above max_lr", "max_lr", "cosine", "2·max_lr"),
          "drops the 1/2 of the cosine: the decay starts at 2·max_lr - min_lr"),
        # nearest: nb09 hard-coded clip norm / no clipping; here each parameter is clipped on its own
        M("train_step", "    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)  # global gradient norm <= grad_clip\n",
          "    for p in model.parameters():\n        torch.nn.utils.clip_grad_norm_(p, grad_clip)  # each parameter's norm <= grad_clip\n",
          ("global", "per parameter", "per-parameter", "each parameter", "total norm", "every tensor", "separately"),
          "clips each parameter's gradient to grad_clip on its own instead of the global norm over all parameters",
          regime="gradients over the clip norm in more than one parameter"),
    ],
    "10": [
        # nearest: nb10 mean instead of sum; here mean × count, exact except when nothing is scored (0/0 = nan)
        M("nll_sum_and_count", NLL_TAIL,
          NLL_TAIL.replace('reduction="sum")    ', 'reduction="mean")   ').replace("return nll.item(), count",
                                                                               "return nll.item() * count, count"),
          ("nan", "all padding", "no scored", "count is 0", "count 0", "empty", "mean times count", "reduction", "0 / 0"),
          "computes the sum as the mean times the count: right until a batch has no scored target, where 0 · nan = nan",
          regime="a batch with no scored target (all padding)"),
        # nearest: nb10 mean of the batch means; here the totals are reset at every batch
        M("evaluate", TOTALS_THEN_LOOP, TOTALS_THEN_LOOP.replace("    total, count = 0.0, 0\n", "")
          + "                total, count = 0.0, 0                    # a fresh total for the batch\n",
          ("last batch", "reset", "accumulat", "every batch", "only the last", "overwr", "totals"),
          "resets the running totals inside the loop: the result is the last batch's alone"),
        # nearest: nb10 bigram_nll on uint8 data; here bincount's minlength is left out
        M("bigram_nll", ", minlength=256 * 256)", ")",
          ("minlength", "bincount", "65536", "256 * 256", "shape", "view", "missing pairs", "length"),
          "calls bincount without minlength: the table is as long as the largest pair seen, and view(256, 256) fails "
          "unless the pair (255, 255) occurs"),
    ],
}
