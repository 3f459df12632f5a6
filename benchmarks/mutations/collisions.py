"""Signature collisions ("collisions"): a white-box set, written READING the
checks, unlike the held-out sets. For every place in autograder/checks/ that
states a cause as certain (a known variant that reproduces the failing rows,
a hint keyed on an exception's type or text, a hint given for a regime that
alone fails, a sweep's reading), the question was: which other plausible
mistake gives the same signature (the same numbers, the same exception, the
same failing rows) from another cause? Each entry is such a mistake, one
substitution in one answer cell, run through its notebook's visible check.

`untrue` holds words of the cause the signature used to be read as, which
this mistake is not: a "Likely bug" line holding one is an untrue line.
Fifteen entries printed such a line when the set was written (marked
FOUND below, with the line they printed); the checks now confirm the cause on
the learner's own code (a counterfactual call, the tracer's value, the sizes
in torch's error, a sweep) or say the measured fact with the candidates. The
other entries are collisions the checks already told apart, kept as guards
(GUARD), and the two cases of one cause said on several lines (CLUTTER).

`benchmarks/verify_unseen.py --set collisions` proves each a real bug with the
shared probes; `bench_diagnostics.py --set collisions` measures the messages.
Nine of the 33 entries are also in another set (`heldout_duplicates.py --set
collisions`; one of them, the division by head_dim ** -0.5, is fresh12's,
where the old line was not counted untrue): they are kept, since what this
set measures is the cause said, not whether the mistake is new.
"""
from __future__ import annotations

from .unseen import Unseen as M

SCALE = ("divided by head_dim instead of sqrt", "multiplied by sqrt(head_dim) instead of dividing")
GROUPED = ("so view k and v with self.n_kv_heads",)
EXPAND = ("insert one first",)
LAYOUT_HINT = ("the weights use nn.linear's layout",)

MUTATIONS = {
    "02": [
        # FOUND: "the per-token statistic does not broadcast against x ... reduce with keepdim=True"
        M("rms_norm", "return weight * (x32 * inv_rms).to(x.dtype)",
          "return weight[:, None] * (x32 * inv_rms).to(x.dtype)", ("gain reshaped", "weight[:, None]"),
          "the gain is given a trailing axis, (d, 1), which lines up with the tokens: the product raises a size "
          "mismatch, as a statistic reduced without keepdim does; the statistic here is (..., 1)",
          untrue=("reduce with keepdim=true",)),
        # GUARD: the statistic without keepdim, confirmed by the tracer's value of shape (...,)
        M("rms_norm", "x32.pow(2).mean(dim=-1, keepdim=True)", "x32.pow(2).mean(dim=-1)[..., None, :]",
          ("keepdim",), "the mean of squares loses its axis and gets a new one in front of the last: (..., 1, T) "
          "does not line up with x (..., T, d)", untrue=("gain reshaped",)),
    ],
    "03": [
        # FOUND: "wrong scale: divided by head_dim instead of sqrt(head_dim)"
        M("causal_attention", "scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])",
          "scores = (q / math.sqrt(q.shape[-1])) @ (k / math.sqrt(k.shape[-1])).transpose(-2, -1)",
          ("on q and on k each", "scaled by 1/4"),
          "q and k are each divided by sqrt(head_dim) before their product: the scores come out divided by head_dim, "
          "as a division by head_dim gives, though no line divides by head_dim", untrue=SCALE[:1]),
        # FOUND: "wrong scale: divided by head_dim instead of sqrt(head_dim)"
        M("causal_attention", "weights = scores.softmax(dim=-1)",
          "weights = (scores / math.sqrt(q.shape[-1])).softmax(dim=-1)", ("divided twice", "scaled by 1/4"),
          "the scores, already divided by sqrt(head_dim), are divided by it again before the softmax: a scale of "
          "1/head_dim from two divisions by its square root", untrue=SCALE[:1]),
        # FOUND: "wrong scale: multiplied by sqrt(head_dim) instead of dividing"
        M("causal_attention", "/ math.sqrt(q.shape[-1])", "/ q.shape[-1] ** -0.5",
          ("head_dim ** -0.5", "scaled by 2"),
          "divides by the scale factor head_dim ** -0.5 instead of multiplying by it: the scores come out multiplied "
          "by sqrt(head_dim), with no multiplication written", untrue=SCALE[1:]),
        # GUARD: the masked scores are made and thrown away; the tracer places the missing step
        M("causal_attention", 'scores = scores.masked_fill(~mask, float("-inf"))',
          'scores.masked_fill(~mask, float("-inf"))', ("no causal mask", "masked_fill"),
          "masked_fill's result is discarded (it is not in place): the softmax reads the unmasked scores"),
        # GUARD: the multiply-add factor and the causal halving give the same counts: candidates
        M("attention_flops", "per_head = 2 * T * T * head_dim", "per_head = T * T * head_dim",
          ("candidates", "multiply-add"), "the factor 2 of a multiply-add is left out of the attention matmuls only: "
          "half the scores and mix counts, as halving them for the causal mask gives",
          untrue=("halved for the causal mask",)),
        M("attention_flops", "head_dim = d // n_heads", "head_dim = d // n_heads // 2", ("candidates",),
          "head_dim taken as half of d // n_heads: the scores and mix counts are halved, the projections are right, "
          "the same counts as the causal halving or the missing multiply-add factor",
          untrue=("halved for the causal mask", "the factor 2 of a multiply-add is missing")),
    ],
    "04": [
        # FOUND: "rotation direction flipped: rotate_half must map (x1, x2) -> (-x2, x1), not (x2, -x1)"
        M("apply_rope", "return x * cos + rotate_half(x) * sin", "return x * cos - rotate_half(x) * sin",
          ("flipped in apply_rope",), "the sin term is subtracted in apply_rope: the rotation by -angle, as a "
          "rotate_half returning (x2, -x1) gives, though rotate_half is right", untrue=("rotate_half must map",)),
        # FOUND: the same line, for a negated sin table
        M("apply_rope", "sin = sin[start_pos:start_pos + T].to(x.dtype)",
          "sin = -sin[start_pos:start_pos + T].to(x.dtype)", ("flipped in apply_rope",),
          "the sin rows are negated: the rotation by -angle, with rotate_half right", untrue=("rotate_half must map",)),
        # GUARD: the keys rotated from 0 where queries get start_pos (the slice's bounds are placed)
        M("rotary_attention", "k = apply_rope(k, cos, sin, start_pos)", "k = apply_rope(k, cos, sin, 0)",
          ("keys rotated from position 0",), "the keys are rotated from position 0, the queries from start_pos",
          untrue=("queries rotated from position 0",), regime="start_pos > 0"),
    ],
    "05": [
        # FOUND: "rounded down: round UP to the next multiple ..."
        M("swiglu_hidden", "return multiple * math.ceil(8 * d_model / 3 / multiple)",
          "return multiple * round(8 * d_model / (3 * multiple))", ("nearest",),
          "rounds 8/3 · d_model to the NEAREST multiple: one multiple short where the fraction is under a half, "
          "right where it is over (as flooring is on the check's own widths, not on all)", untrue=("rounded down",)),
        # GUARD: a truncation is rounding down on every width
        M("swiglu_hidden", "return multiple * math.ceil(8 * d_model / 3 / multiple)",
          "return multiple * int(8 * d_model / 3 / multiple)", ("rounded down",),
          "truncates to the multiple below: rounded down", untrue=("nearest",)),
        # FOUND: "the weights use nn.Linear's layout ... a projection multiplies by the transpose"
        M("swiglu", "return (gate * up) @ w_down.T", "return (gate * up) @ w_up.T",
          ("another's place", "candidates"), "multiplies by w_up.T where w_down.T belongs: the product raises the "
          "same size mismatch as an untransposed w_down, though every weight here is transposed",
          untrue=LAYOUT_HINT + ("multiplied without .t",)),
        # GUARD: the untransposed weight, confirmed by handing it transposed
        M("swiglu", "gate = F.silu(x @ w_gate.T)", "gate = F.silu(x @ w_gate)", ("`w_gate` multiplied without .T",),
          "w_gate used without .T: [d_ff, d_model] does not multiply (.., d_model)"),
        # FOUND: "it fails only with n_kv_heads < n_heads ...: so view k and v with self.n_kv_heads heads"
        M("Transformer", "y = y.transpose(1, 2).reshape(B, T, self.n_heads * self.head_dim)",
          "y = y.transpose(1, 2).reshape(B, T, self.n_kv_heads * self.head_dim)",
          ("after attention", "n_kv_heads where n_heads belongs"), "the heads are merged to n_kv_heads · head_dim features: right when "
          "n_kv_heads = n_heads, raises with grouped heads, as a k split into n_heads heads does",
          untrue=GROUPED, regime="n_kv_heads < n_heads"),
        # FOUND: the same line, for q split into n_kv_heads heads
        M("Transformer", "q = self.q_proj(x).view(B, T, self.n_heads, self.head_dim)",
          "q = self.q_proj(x).view(B, T, self.n_kv_heads, self.head_dim)", ("n_kv_heads where n_heads belongs",),
          "q is split into n_kv_heads heads: right when n_kv_heads = n_heads, raises with grouped heads; k and v are "
          "viewed rightly", untrue=GROUPED, regime="n_kv_heads < n_heads"),
        # GUARD: attention reading the other norm is named as such
        M("pre_norm_block", "x = x + attn(attn_norm(x))", "x = x + attn(mlp_norm(x))", ("mlp_norm",),
          "attention reads mlp_norm(x): the MLP's gain on the attention branch", untrue=("attn_norm used for both",)),
    ],
    "06": [
        # GUARD: d_model per position and n_heads for n_kv_heads give different counts here and are told apart
        M("kv_cache_bytes", "config.n_kv_heads * config.head_dim", "config.d_model", ("d_model per position",),
          "the cache counted with d_model features per position", untrue=("n_heads instead of n_kv_heads",)),
        M("kv_cache_bytes", "dtype.itemsize", "2", ("dtype is ignored", "itemsize"),
          "2 bytes per element whatever the dtype", regime="a dtype other than 2 bytes"),
    ],
    "07": [
        # FOUND: "expand can only grow an axis of size 1: insert one first"
        M("repeat_kv", "x = x[:, :, None].expand(B, n_kv, n_rep, T, hd)",
          "x = x[:, :, None].expand(B, n_rep, n_kv, T, hd)", ("lines up with its own axis",),
          "the new axis is inserted, but n_rep and n_kv are given to expand in the other order", untrue=EXPAND),
        # FOUND: the same line, for the product asked of the kv axis
        M("repeat_kv", "x = x[:, :, None].expand(B, n_kv, n_rep, T, hd)",
          "x = x[:, :, None].expand(B, n_kv * n_rep, 1, T, hd)", ("lines up with its own axis",),
          "the new axis is inserted, but the kv axis is asked for n_kv · n_rep and the new one for 1", untrue=EXPAND),
        # FOUND: the same line, in gqa_attention written without repeat_kv
        M("gqa_attention", "k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)",
          "k, v = (t[:, :, None].expand(t.shape[0], t.shape[1] * n_rep, 1, *t.shape[2:]).flatten(1, 2) "
          "for t in (k, v))", ("lines up with its own axis",), "repeats inline: the new axis is inserted, but the kv "
          "axis is asked for n_kv · n_rep and the new one for 1", untrue=EXPAND),
        # GUARD: expand on a tensor with no axis of size 1
        M("repeat_kv", "x = x[:, :, None].expand(B, n_kv, n_rep, T, hd)", "x = x.expand(B, n_kv * n_rep, T, hd)",
          ("insert one first",), "expands the kv axis itself, which is not of size 1"),
    ],
    "08": [
        # GUARD: `<=` and a threshold one further give the same k - 1 tokens; both are said
        M("top_k_filter", "logits < kth", "logits <= kth", ("k - 1", "`<=`"),
          "drops the k-th largest too: k - 1 tokens kept"),
        # CLUTTER: dropout on while sampling was said twice
        M("generate", "model.eval()                                            # dropout off while generating",
          "model.train(model.training)", ("dropout",),
          "sets the mode it already has: a model handed over in train mode samples with dropout on",
          regime="a model in train mode"),
    ],
    "09": [
        # FOUND: "... the largest start is len(data) - seq_len - 1, so draw torch.randint(len(data) - seq_len, ...)"
        M("get_batch", "idx = starts[:, None] + torch.arange(seq_len + 1)",
          "idx = starts[:, None] + torch.arange(1, seq_len + 2)", ("windows go past the end",),
          "each window starts one token after its start: the last start reads past the end of data, though the "
          "start range is right", untrue=("so draw torch.randint",)),
        # CLUTTER: int32 batches were said on three lines
        M("get_batch", "window = data[idx].long()", "window = data[idx].int()", ("int32", "int64"),
          "int32 windows: token ids must be int64"),
        # FOUND: "adam_moments: one moment only: AdamW keeps two per parameter, exp_avg and exp_avg_sq"
        M("train_step_costs", '"adam_moments": 2 * 4 * n_params', '"adam_moments": 2 * 2 * n_params',
          ("2 bytes each", "candidates"), "both AdamW moments counted, at 2 bytes a number (as if kept in bfloat16): "
          "half the bytes, as one moment at 4 bytes gives", untrue=("one moment only",)),
        # GUARD: no update, zero_grad after backward, and the step missing are told apart by what .grad holds
        M("train_step", "    optimizer.step()                             # the AdamW update\n", "",
          ("optimizer.step()",), "the optimizer step is missing: the parameters never move",
          untrue=("zero_grad after backward erases",)),
        M("train_step", "    optimizer.zero_grad(set_to_none=True)        # gradients accumulate otherwise\n"
          "    loss.backward()                              # d loss / d every parameter\n",
          "    loss.backward()                              # d loss / d every parameter\n"
          "    optimizer.zero_grad(set_to_none=True)        # gradients accumulate otherwise\n",
          ("zero_grad() before backward", "erases the gradients"), "zero_grad after backward: the step has no "
          "gradients", untrue=("call optimizer.step() after backward",)),
        # GUARD (was two lines for one cause): clipping before backward clips nothing the step uses
        M("train_step", "    loss.backward()                              # d loss / d every parameter\n"
          "    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)  # global gradient norm <= grad_clip\n",
          "    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)  # global gradient norm <= grad_clip\n"
          "    loss.backward()                              # d loss / d every parameter\n",
          ("not clipped", "between backward() and step()"), "clips before backward: the gradients of this step "
          "reach optimizer.step() unclipped"),
    ],
    "10": [
        # GUARD: the number of batches for the number of tokens is named as such
        M("evaluate", "    loss = total / count\n", "    loss = total / len(batches)\n", ("number of batches",),
          "divides the summed NLL by the number of batches", untrue=("padding counted",)),
    ],
}
