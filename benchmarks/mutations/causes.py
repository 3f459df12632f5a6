"""Mistakes whose numbers another mistake also gives ("causes"): each was
once told a cause it is not, printed as certain. `untrue` holds words of
that cause; `expect` the words of what the check says now (the measured
fact, the cause it confirms on the learner's own function, or the
candidates). Written by the checks' author to pin those statements down, so
not a held-out set: `python benchmarks/bench_diagnostics.py --set causes`.
"""
from __future__ import annotations

from . import Mutation as M

MUTATIONS = [
    ("02", M("rms_norm", "return weight * (x32 * inv_rms).to(x.dtype)",
             "return x32.mul_(inv_rms).mul_(weight) if x.dtype == torch.float32 else weight * (x32 * inv_rms).to(x.dtype)",
             ("in place",),
             "normalises x in its own memory and returns it (x32 is x for float32 input): right values, input "
             "overwritten; the check's copy-back used to overwrite the result too",
             untrue=("eps is ignored",))),
    ("02", M("rms_norm", "x32 = x.float()  # squares of fp16 values overflow above 256",
             "x32 = x.float()\n    x32 /= torch.sqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps ** 2)\n"
             "    return weight * x32.to(x.dtype)",
             ("eps²", "eps is squared", "in place"),
             "squares eps and normalises x in place: the eps probes read an overwritten x",
             untrue=("effective eps is 1 ", "eps is added with another weight"))),
    ("03", M("attention_flops", "per_head = 2 * T * T * head_dim", "per_head = T * T * head_dim",
             ("candidates", "causal", "multiply-add"),
             "counts only the causal triangle of the scores and the mix: the count a missing factor 2 of a "
             "multiply-add also gives",
             untrue=())),
    ("05", M("Transformer", "y = y.transpose(1, 2).reshape(B, T, self.n_heads * self.head_dim)",
             "y = y.reshape(B, T, self.n_heads * self.head_dim)",
             ("without the transpose",),
             "merges the heads with a reshape alone: positions and heads mixed, which moves earlier outputs when "
             "the last token changes",
             untrue=("sees the future",))),
    ("06", M("attention_step", "    k = tinylm.apply_rope(k, cos, sin, start_pos=start)\n"
             "    k_all, v_all = cache_update(past_k, past_v, k, v)    # (B, n_kv, start + T, hd)",
             "    k_all, v_all = cache_update(past_k, past_v, k, v)    # (B, n_kv, start + T, hd)\n"
             "    k_all = tinylm.apply_rope(k_all, cos, sin, start_pos=start)",
             ("after the cache update",),
             "rotates the keys after the cache update: the error that stops it blames the RoPE table's size",
             untrue=("larger max_seq_len",))),
    ("08", M("top_k_filter", "kth = logits.topk(k, dim=-1).values[..., -1:]",
             "kth = logits.sort(dim=-1, descending=True).values[k - 1]",
             ("candidates", "values[k - 1]"),
             "sorts on the last axis, then reads the threshold with [k - 1], which indexes the batch axis",
             untrue=("works on axis", "the filter works on the wrong axis"))),
    ("08", M("generate", "    model.eval()                                            # dropout off while generating\n",
             "", ("dropout",),
             "never switches to eval mode: dropout flattens the draws of plain sampling",
             untrue=("softmax of the probabilities", "softmax taken of the probabilities"))),
    ("09", M("train_step_costs", "attention_matmuls = 4 * seq_len", "attention_matmuls = 2 * seq_len",
             ("one of attention's two",),
             "counts QKᵀ and forgets weights @ V: half the attention matmuls, the count a causal half also gives",
             untrue=("attention halved for the causal mask",))),
    ("10", M("nll_sum_and_count", "count = int((targets != ignore_index).sum())",
             "count = int((targets != ignore_index).sum() + (targets == ignore_index).any())",
             ("padded one included", "padding"),
             "keeps the first padding position as an end-of-text token: one padded target too many, the count "
             "bfloat16 rounding of 299 also gives",
             untrue=("rounded above it",))),
    ("10", M("bigram_nll", "counts.sum(dim=1, keepdim=True)", "counts.sum(dim=1)",
             ("next byte's row",),
             "drops keepdim on the row totals: each pair is divided by the total of its next byte's row, the counts "
             "are right",
             untrue=("counts are not train's",))),
    ("10", M("evaluate", "total, count = total + s, count + n          # combine by tokens, not by batches",
             "total, count = total + s / n, count + 1            # the mean of each batch",
             ("per-batch means",),
             "averages the batches' mean losses: the loss depends on how the rows are batched",
             untrue=())),
]
