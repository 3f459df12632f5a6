"""A thirty-fifth held-out set of learner mistakes ("fresh35"), written without reading the checks: no file of
autograder/checks/ or tests/checks/, no autograder/diagnosis_*.py, no source of bench_diagnostics.py, no diagnosis
section of docs/benchmarks.md, no tests/course/test_docs.py; no check cell, notebook check or bench_diagnostics run,
no entry tried against a check, no git log or git show of main's history, no other set's entries. See the slips.

Opened or run. The brief and HELPER_RULES.md, and mkwt.sh (cat, then run); `ls` of the worktree root, benchmarks/,
benchmarks/mutations/ (names; tinylm/ and notebooks/ were asked for but cut off by head); `wc -l` of
benchmarks/*.py and tinylm/*.py. Whole: verify_unseen.py,
heldout_duplicates.py, verify_heldout.py, mutations/__init__.py, unseen_probes_fresh34.py; unseen.py lines 1-60;
fresh34.py's docstring (python ast); of unseen_probes.py a grep of its def lines and of max_seq_len, and lines
578-640 (probe_09); test_benchmarks.py lines 150-200 and a grep of it and verify_unseen.py for "fresh34". tinylm:
a grep of kv_cache.py for def and length, of model.py for forward, positions and attention_mask, of __init__.py for
top_k_filter and RMSNorm. Through notebook_cells: every setup and answer cell of the ten notebooks, whole (the
notebooks' markdown was not read). 9 searches of issue threads (none of the code index); 57 URLs grepped over
benchmarks/mutations/ (the 28 found cited were set aside). Runs: fresh34's probe chain on each solution (names and
values); torch one-liners (the exception an id past the table gives three lookups, a meta tensor times a CPU one,
topk(sorted=False) on the CPU, twice); one traceback of a probe of mine; verify_unseen --set fresh35 (9 runs),
heldout_duplicates --set fresh35 (7 runs), the two fresh35 tests, pyflakes, awk line lengths.

Slips. Lines 44-60 of unseen.py (inside the allowed range) hold unseen's first three entries for notebook 01 (the
one-hot width, a softmax in tied_logits, a .data tie), which I read. The setup cells import autograder.checks names
(the check functions' names only). heldout_duplicates matched 39 of 91 entries first (30 mistakes, 9 SAME: among
them index_select, two ties, squeeze, a per-sequence RMS, a buffer gain, requires_grad, triu's diagonal, its sign,
view after transpose, x @ w, repeat_interleave angles, split(2), odd exponents, one block repeated, one norm twice,
a cloned head, an inverted SDPA mask, tiled kv heads, expand, kthvalue, gather, view in lm_loss, the decay
denominator, warmup <=, summed.backward(), a mean of batch means, the last pair), then 15 of 92, 6 of 93, 1 of 93
twice, then 0 of 94: each was replaced by another idea, not reworded. Three public threads were mapped again onto
another exercise after their first mapping matched: bkitano/llama-from-scratch#4 (per-sequence statistics) now on
layer_norm, RVC-Boss/GPT-SoVITS#965 (a triu that hides the diagonal) now on attention_step's own mask, jxiw/M1#4
(tiled kv heads) now on gqa_attention with tile; the same wrong idea in another function, which a reader may count
as close to a rewording. Dropped: topk(sorted=False) (on the CPU the unsorted k values came back with the k-th
last, so no probe could show it), OpenNMT/OpenNMT-py#2209 (its mapping matched another set). Six situations needed
probes of their own (unseen_probes_fresh35.py): requires_grad of RMSNorm's gain, the state_dict keys of RMSNorm and
of the decoder, the decoder converted with .to(float64) after it is built (a meta-device forward could not be used:
tinylm.embed reads the ids' values), top_p = 1.0, and the mode a submodule sees in train_step and evaluate.

Focus, each mistake counted once. Two slips in one answer (17): an axis and eps, the unbiased variance and eps after
the root, squares in x's dtype and the gain before the cast, split and merge without their transposes (the round
trip hides it), the scale twice, a sign moved from rotate_half into apply_rope, key rows in n_heads blocks and values
permuted, q and k viewed with each other's head counts, the MLP's norm and residual, k and v with n_heads and a tied
head counted, K only at 4 bytes (cancels in bfloat16), K only with n_heads (cancels at 2 n_kv_heads), greedy
keepdim and squeeze(), clip before backward and zero_grad after the step, a mean times every target, the NLL in
bfloat16 and a tensor count, column-normalised bigrams read (next, prev). torch API semantics (20): take, gather's
index shape, view as a transpose, mm on 3-D, var_mean's correction, unbind and cat, torch.where's order (twice),
softmax's dtype=, split(3), narrow's length, transpose of the wrong axes, a reshape that does not reorder, a float
SDPA mask, repeat_interleave without dim, is_causal aligned top-left, max and min returning (values, indices),
nll_loss on logits, reduction="sum" over every target. nn.Module plumbing (11): a detached tensor for a Parameter,
a Parameter deleted for .data, eps as a buffer, a gain cast in place by a call, a new Parameter after the tie, the
last block's norm as the final norm, eval() left on, the mode read after eval() (twice), model.training set instead
of train() / eval() (twice). Off-by-one boundaries (10): positions from 1 (twice), linspace's included end, a
multiple too many, one token fewer, L + 1 blocks, k capped at V - 1, starts from 1, targets counted from the second
position, 255 in the smoothing. Public threads (11, URL above the entry and in its reason):
bkitano/llama-from-scratch#4, flashinfer-ai/flashinfer#348, sgl-project/sglang#29601, pytorch/torchtitan#316,
rajveer43/VeloxQuant-MLX#389, RVC-Boss/GPT-SoVITS#965, jxiw/M1#4, state-spaces/mamba#462, BlinkDL/ChatRWKV#170,
RL-Align/RL-Kernel#81, pytorch/torchtitan#1261. SAME (25): other APIs (register_parameter, _parameters, tensordot,
a looped lookup, einsum projections, permute and view, unbind and cat, where in order, repeat(1, 2), tensor_split,
nn.Sequential, SiLU by hand, broadcast_to, min(...).values, replacement=True, nll_loss of log_softmax,
inference_mode), orders and forms of the same count (sum / d, square(), dim from the end, factors reordered, the
mask by tril at diagonal start, a sum over pairs), the default ignore_index, and RoPE on q and k both from position
0 (only their distance enters the scores).

Counts: 69 mistakes (01: 6, 02: 7, 03: 7, 04: 7, 05: 8, 06: 7, 07: 6, 08: 8, 09: 8, 10: 5), 27 with a regime,
25 SAME, 11 public threads; `expect` holds words a check that found the mistake would likely say, `in_lists`
stays False.
"""
from __future__ import annotations

from .unseen import M

BF16 = ("bfloat16", "float16", "half", "dtype", "precision")
GQA = ("n_kv_heads", "kv heads", "grouped", "gqa", "n_heads")
PADDING = ("padding", "-100", "ignore_index", "ignored", "scored targets", "count")
TIED = ("tie", "tied", "same parameter", "shared", "one parameter")
MODE = ("train mode", "eval mode", "training", "eval()", "train()", "mode")

# notebook 04: from rotate_half's return to apply_rope's (two slips: a sign moved between them)
ROTATE_TO_ROPE = ("    return torch.cat((-x2, x1), dim=-1)\n    ### END SOLUTION\n\n\n"
                  "def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, start_pos: int = 0) -> "
                  "torch.Tensor:\n"
                  '    """x (B, H, T, hd) -> x rotated as if at positions start_pos .. start_pos + T - 1."""\n'
                  "    ### BEGIN SOLUTION\n    T = x.shape[-2]\n"
                  "    cos = cos[start_pos:start_pos + T].to(x.dtype)  # (T, hd), broadcasts over (B, H)\n"
                  "    sin = sin[start_pos:start_pos + T].to(x.dtype)\n"
                  "    return x * cos + rotate_half(x) * sin")
# notebook 02: rms_norm's body
RMS_BODY = ("    x32 = x.float()  # squares of fp16 values overflow above 256\n"
            "    inv_rms = torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)  # (..., 1): one statistic per "
            "token\n"
            "    return weight * (x32 * inv_rms).to(x.dtype)")
# notebook 05: param_counts from the k and v count to the head's
PARAM_TAIL = ("k_and_v = 2 * d * config.n_kv_heads * hd    # k_proj and v_proj: d -> n_kv_heads·hd each\n"
              '    return {"embedding": config.vocab_size * d,\n'
              '            "attention": L * (q_and_o + k_and_v),\n'
              '            "mlp": L * 3 * d * config.d_ff,     # gate_proj, up_proj, down_proj\n'
              '            "norms": (2 * L + 1) * d,           # attn_norm and mlp_norm per block, then the final '
              'norm\n'
              '            "lm_head": 0 if config.tie_embeddings else config.vocab_size * d}')
# notebook 08: sample_next from the greedy branch to the draw
SAMPLE_BODY = ("        return logits.argmax(dim=-1)          # greedy: no randomness at all\n"
               "    logits = logits / temperature             # on logits, before any filter\n"
               "    if top_k is not None:\n        logits = top_k_filter(logits, top_k)\n"
               "    if top_p is not None:\n        logits = top_p_filter(logits, top_p)\n"
               "    probs = logits.softmax(dim=-1)            # (B, V): filtered tokens get exactly 0\n"
               "    return torch.multinomial(probs, num_samples=1, generator=generator).squeeze(-1)")
# notebook 10: nll_sum_and_count's body, and bigram_nll's last two lines
NLL_BODY = ("nll = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=ignore_index,\n"
            '                          reduction="sum")                       # (B*T, V) vs (B*T,) -> scalar\n'
            "    count = int((targets != ignore_index).sum())")
BIGRAM_TAIL = ("probs = (counts + alpha) / (counts.sum(dim=1, keepdim=True) + 256 * alpha)"
               "                         # rows sum to 1\n    return -probs.log()[val[:-1], val[1:]].mean().item()")
# notebook 03: from split_heads' view to merge_heads' return
SPLIT_TO_MERGE = ("    x = x.view(B, T, n_heads, d // n_heads)  # (B, T, H, hd): head h owns features h*hd .. "
                  "(h+1)*hd - 1\n"
                  "    return x.transpose(1, 2)                 # (B, H, T, hd)\n    ### END SOLUTION\n\n\n"
                  "def merge_heads(y: torch.Tensor) -> torch.Tensor:\n"
                  '    """(B, H, T, hd) -> (B, T, H * hd)."""\n    ### BEGIN SOLUTION\n    B, H, T, hd = y.shape\n'
                  "    return y.transpose(1, 2).reshape(B, T, H * hd)")
# notebook 04: the two projections meta_to_hf_attention changes, and its return
META_TAIL = ("k_proj = interleaved_to_half(wk, n_kv_heads)  # (n_kv·hd, d): keys too, in their own n_kv_heads blocks\n"
             "    return q_proj, k_proj, wv, wo ")

MUTATIONS = {
    "01": [
        # API misread: take indexes the table as one flat vector
        M("embed", "return weight[ids]", "return weight.take(ids)",
          ("take", "flat", "rows", "shape", "(..., d)", "scalar"),
          "uses Tensor.take, which indexes the table as if flattened: one number per id, not one row"),
        # API misread: gather's index needs the output's shape, not the ids' shape with one axis added
        M("embed", "return weight[ids]", "return torch.gather(weight, 0, ids[..., None])",
          ("gather", "index", "shape", "column", "d)"),
          "gathers with an index of one column, so it returns each id's first feature only (or raises for 2-D ids)"),
        # nn.Module plumbing: a plain tensor where a Parameter is expected
        M("tie_weights", "lm_head.weight = tok_emb.weight", "lm_head.weight = tok_emb.weight.detach()",
          TIED + ("parameter", "detach", "typeerror", "plain tensor"),
          "assigns a detached tensor to the head's weight, which a Module refuses for a registered Parameter name"),
        # nn.Module plumbing: the Parameter deleted and a plain tensor stored in its place
        M("tie_weights", "lm_head.weight = tok_emb.weight", "del lm_head.weight\n    lm_head.weight = "
                                                            "tok_emb.weight.data",
          TIED + ("parameter", ".data", "plain tensor", "gradient", "registered"),
          "deletes the head's Parameter and stores the embedding's .data as a plain attribute: the head is no longer a "
          "Parameter and no gradient flows through it to the embedding"),
        # API misread: view is not a transpose
        M("tied_logits", "return x @ weight.T", "return x @ weight.view(weight.shape[1], weight.shape[0])",
          ("view", "transpose", ".t", "layout", "reshape"),
          "turns the [V, d] table into [d, V] with view, which regroups the numbers instead of transposing them"),
        # API misread: torch.mm takes 2-D matrices only
        M("tied_logits", "return x @ weight.T", "return torch.mm(x, weight.T)",
          ("mm", "2-d", "matmul", "batch", "(b, t, d)", "3-d"),
          "multiplies with torch.mm, which accepts 2-D matrices only, so a (B, T, d) batch raises",
          regime="x with a batch axis"),
    ],
    "02": [
        # https://github.com/bkitano/llama-from-scratch/issues/4
        M("layer_norm", "centred = x - x.mean(dim=-1, keepdim=True)              # (..., d)\n"
          "    var = centred.pow(2).mean(dim=-1, keepdim=True)",
          "centred = x - x.mean(dim=(-2, -1), keepdim=True)\n    var = centred.pow(2).mean(dim=(-2, -1), keepdim=True)",
          ("per token", "dim=-1", "last axis", "sequence", "statistic", "axis"),
          "takes the mean and variance over positions and features together, one statistic per sequence instead of "
          "per token: the normalisation bug of https://github.com/bkitano/llama-from-scratch/issues/4"),
        # two slips: the statistic over the batch axis, and eps left out
        M("rms_norm", "torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)",
          "torch.rsqrt(x32.pow(2).mean(dim=0, keepdim=True))",
          ("axis", "dim=-1", "per token", "eps", "epsilon"),
          "averages the squares over the first axis instead of the features, and leaves eps out of the root"),
        # two slips: the unbiased variance, and eps added after the square root
        M("layer_norm",
          "var = centred.pow(2).mean(dim=-1, keepdim=True)         # (..., 1): biased, divides by d\n"
          "    return weight * centred * torch.rsqrt(var + eps) + bias",
          "var = x.var(dim=-1, keepdim=True)\n    return weight * centred / (var.sqrt() + eps) + bias",
          ("unbiased", "biased", "d - 1", "bessel", "correction", "eps", "variance"),
          "uses torch's default unbiased variance (divides by d - 1) and adds eps to the standard deviation instead "
          "of to the variance"),
        # two slips: squares in x's dtype, and the gain multiplied before the cast
        M("rms_norm", RMS_BODY,
          RMS_BODY.replace("x32 = x.float()", "x32 = x").replace("weight * (x32 * inv_rms).to(x.dtype)",
                                                                  "(weight * x32 * inv_rms).to(x.dtype)"),
          BF16 + ("overflow", "float32", "inf", "gain"),
          "squares the input in its own dtype (float16 values above 256 overflow) and multiplies by the gain "
          "before the cast, so a float32 gain no longer promotes the output", regime="float16 or bfloat16 input"),
        # API misread: var_mean defaults to the unbiased estimate
        M("layer_norm", "var = centred.pow(2).mean(dim=-1, keepdim=True)",
          "var = torch.var_mean(centred, dim=-1, keepdim=True)[0]",
          ("unbiased", "biased", "d - 1", "bessel", "correction", "variance"),
          "takes the variance from torch.var_mean, whose default divides by d - 1, not by d"),
        # nn.Module plumbing: eps made a buffer, so it lands in the state_dict
        M("RMSNorm", "self.eps = eps", 'self.register_buffer("eps", torch.tensor(eps))',
          ("state_dict", "buffer", "eps", "keys", "checkpoint"),
          "registers eps as a buffer: a constant becomes a state_dict entry that a checkpoint of the reference "
          "model does not have"),
        # nn.Module plumbing: state left on the module by a call
        M("RMSNorm", "        return rms_norm(x, self.weight, self.eps)\n        ### END SOLUTION",
          "        self.weight.data = self.weight.data.to(x.dtype)\n        return rms_norm(x, self.weight, self.eps)"
          "\n        ### END SOLUTION",
          BF16 + ("state", "later call", "gain", "cast"),
          "casts the gain to the input's dtype in place on every call, so a float16 call leaves a rounded gain "
          "for every later float32 call", regime="a float16 call before a float32 one"),
    ],
    "03": [
        # https://github.com/flashinfer-ai/flashinfer/pull/348
        M("causal_attention", "mask = causal_mask(q.shape[-2], k.shape[-2])", "mask = causal_mask(q.shape[-2], "
                                                                              "k.shape[-2] + 1)[:, :-1]",
          ("future", "diagonal", "next token", "one ahead", "offset"),
          "builds the mask one key wider and drops its last column, which lets each query see one key past its "
          "own position, the off-by-one in the rectangular mask of "
          "https://github.com/flashinfer-ai/flashinfer/pull/348"),
        # API misread: unbind then cat along the positions axis
        M("split_heads", "return y.transpose(1, 2).reshape(B, T, H * hd)", "return torch.cat(y.unbind(1), "
                                                                           "dim=1).reshape(B, T, H * hd)",
          ("cat", "unbind", "heads side by side", "positions", "axis"),
          "unbinds the heads and concatenates them along the positions axis, then reshapes: the features of "
          "different positions get mixed", regime="more than one head"),
        # two slips that cancel on a round trip: no transpose in the split, none in the merge
        M("split_heads", SPLIT_TO_MERGE,
          SPLIT_TO_MERGE.replace("view(B, T, n_heads, d // n_heads)", "view(B, n_heads, T, d // n_heads)")
          .replace("return x.transpose(1, 2) ", "return x ").replace("y.transpose(1, 2).reshape", "y.reshape"),
          ("transpose", "heads", "features", "positions", "view", "split"),
          "splits with one view straight to (B, H, T, hd) and merges with one reshape back, both without the "
          "transpose: merge_heads(split_heads(x)) still gives x, but each head holds a mix of positions"),
        # two slips: the scale applied twice, once without its square root
        M("causal_attention", "scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])",
          "scores = (q / math.sqrt(q.shape[-1])) @ k.transpose(-2, -1) / q.shape[-1] ** 0.5",
          ("scale", "sqrt", "head_dim", "twice", "temperature"),
          "scales q by 1/sqrt(hd) and then divides the scores by sqrt(hd) again, so the scores are divided by hd"),
        # API misread: torch.where's argument order
        M("causal_attention", 'scores = scores.masked_fill(~mask, float("-inf"))',
          'scores = torch.where(mask, float("-inf"), scores)',
          ("mask", "future", "where", "polarity", "inverted", "past"),
          "writes the mask with torch.where with its two values swapped: -inf where the key is allowed"),
        # API misread: softmax's dtype argument changes the result's dtype
        M("causal_attention", "weights = scores.softmax(dim=-1)", "weights = F.softmax(scores, dim=-1, "
                                                                  "dtype=torch.float32)",
          ("dtype", "float32", "float16", "bfloat16", "half"),
          "asks softmax for float32 weights, which then do not match half-precision values",
          regime="float16 or bfloat16 q, k, v"),
        # API misread: split(3) cuts pieces of 3 features, not 3 pieces
        M("self_attention", "q, k, v = (split_heads(F.linear(x, w), n_heads) for w in (w_q, w_k, w_v))",
          "q, k, v = (split_heads(t, n_heads) for t in F.linear(x, torch.cat((w_q, w_k, w_v))).split(3, dim=-1))",
          ("split", "chunk", "pieces", "unpack", "qkv"),
          "splits the fused projection with split(3), which cuts pieces of 3 features, where chunk(3) was meant"),
    ],
    "04": [
        # API misread: narrow takes a length, not an end
        M("apply_rope", "cos = cos[start_pos:start_pos + T].to(x.dtype)  # (T, hd), broadcasts over (B, H)\n"
          "    sin = sin[start_pos:start_pos + T].to(x.dtype)",
          "cos = cos.narrow(0, start_pos, start_pos + T).to(x.dtype)\n    sin = sin.narrow(0, start_pos, start_pos + "
          "T).to(x.dtype)",
          ("narrow", "length", "start_pos", "positions", "shape"),
          "slices the tables with narrow(0, start_pos, start_pos + T), reading its third argument as an end, though "
          "it is a length", regime="start_pos > 0"),
        # two slips: the sign moved from rotate_half into apply_rope
        M("apply_rope", ROTATE_TO_ROPE,
          ROTATE_TO_ROPE.replace("(-x2, x1)", "(x2, -x1)").replace("x * cos + rotate_half", "x * cos - rotate_half"),
          ("rotate_half", "sign", "(-x2, x1)", "direction", "negative"),
          "returns (x2, -x1) from rotate_half and subtracts its term in apply_rope: the rotation comes out right, "
          "but rotate_half itself is the wrong way round"),
        # off by one: positions counted from 1
        M("apply_rope", "cos = cos[start_pos:start_pos + T].to(x.dtype)  # (T, hd), broadcasts over (B, H)\n"
          "    sin = sin[start_pos:start_pos + T].to(x.dtype)",
          "cos = cos[start_pos + 1:start_pos + T + 1].to(x.dtype)\n    sin = sin[start_pos + 1:start_pos + T + "
          "1].to(x.dtype)",
          ("position", "off by one", "start_pos", "from 0", "first"),
          "slices the tables from start_pos + 1, as if the first token sat at position 1"),
        # API misread: the wrong pair of axes transposed
        M("interleaved_to_half", "return pairs.transpose(1, 2).reshape(rows, d_in)", "return pairs.transpose(2, "
                                                                                     "3).reshape(rows, d_in)",
          ("transpose", "axes", "evens", "odds", "d_in", "rows"),
          "transposes the pair axis with the input features instead of with the pair index, which scrambles the "
          "rows with the columns"),
        # API misread: reshape does not reorder
        M("interleaved_to_half",
          "    pairs = w.reshape(n_heads, hd // 2, 2, d_in)      # (nh, hd/2, 2, d_in): pair i of head h is rows 2i, "
          "2i+1\n"
          "    return pairs.transpose(1, 2).reshape(rows, d_in)",
          "    return w.reshape(n_heads, 2, hd // 2, d_in).reshape(rows, d_in)",
          ("reshape", "transpose", "evens", "odds", "permut", "order"),
          "reshapes to (nh, 2, hd/2, d_in) and back, expecting the reshape to regroup evens and odds: the rows "
          "come back unchanged"),
        # two slips: the key rows split as n_heads heads, and the value rows permuted too
        M("interleaved_to_half", META_TAIL,
          META_TAIL.replace("(wk, n_kv_heads)", "(wk, n_heads)").replace(", wv, wo", ", interleaved_to_half(wv, "
                                                                                     "n_kv_heads), wo"),
          GQA + ("key", "k_proj", "value", "v_proj", "never rotated"),
          "permutes the key rows in n_heads blocks instead of n_kv_heads blocks, and permutes the value rows too, "
          "though values are never rotated"),
        # off by one: linspace includes its end
        M("rope_cache", "torch.arange(max_seq_len, dtype=torch.float32)", "torch.linspace(0, max_seq_len, max_seq_len)",
          ("position", "linspace", "endpoint", "spacing", "integer"),
          "takes the positions from linspace(0, T, T), whose end is included, so they are spaced T/(T-1) apart"),
    ],
    "05": [
        # https://github.com/sgl-project/sglang/pull/29601
        M("Transformer", 'self.register_buffer("rope_cos", cos, persistent=False)  # rebuilt from the config, never '
                         'saved\n'
          '        self.register_buffer("rope_sin", sin, persistent=False)',
          "self.rope_cos, self.rope_sin = cos, sin",
          ("buffer", "register_buffer", ".to(", "device", "moved", "attribute"),
          "keeps the RoPE tables as plain tensor attributes, which .to() and .cuda() do not move, the bug of "
          "https://github.com/sgl-project/sglang/pull/29601", regime="a model moved to another device"),
        # https://github.com/pytorch/torchtitan/issues/316
        M("Transformer", 'persistent=False)  # rebuilt from the config, never saved\n'
          '        self.register_buffer("rope_sin", sin, persistent=False)',
          'persistent=True)\n        self.register_buffer("rope_sin", sin, persistent=True)',
          ("state_dict", "persistent", "buffer", "checkpoint", "keys"),
          "registers the RoPE tables as persistent buffers, so they are saved in the state_dict though they are "
          "rebuilt from the config: the question of https://github.com/pytorch/torchtitan/issues/316"),
        # nn.Module plumbing: a new Parameter after the tie unties it
        M("Transformer", "self.lm_head.weight = self.tok_emb.weight  # one Parameter, two names",
          "self.lm_head.weight = self.tok_emb.weight\n"
          "        self.tok_emb.weight = nn.Parameter(self.tok_emb.weight.data * 0.02)",
          TIED + ("after the tie", "untied", "new parameter", "parameters"),
          "rescales the embedding after tying it by wrapping a new Parameter, which leaves the head with the old one"),
        # two slips that cancel with as many kv heads as heads: q viewed with n_kv_heads, k with n_heads
        M("Transformer",
          "q = self.q_proj(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)     # (B, nh, T, hd)\n"
          "        k = self.k_proj(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)",
          "q = self.q_proj(x).view(B, T, -1, self.head_dim).transpose(1, 2)\n"
          "        k = self.k_proj(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)",
          GQA + ("k_proj", "view", "shape"),
          "views the keys with n_heads heads (and q with -1): right while n_kv_heads == n_heads, a shape error with "
          "grouped kv heads", regime="n_kv_heads < n_heads"),
        # two slips: the MLP reads the attention's norm, and its residual starts from the input
        M("pre_norm_block", "x = x + attn(attn_norm(x))  # the branch reads a normalised copy; the stream stays a sum\n"
          "    x = x + mlp(mlp_norm(x))",
          "h = x + attn(attn_norm(x))\n    x = x + mlp(attn_norm(h))",
          ("mlp_norm", "attn_norm", "residual", "stream", "norm"),
          "normalises the MLP's input with attn_norm, and adds the MLP to the input x instead of the stream after "
          "attention, dropping attention's output"),
        # off by one: one multiple too many when 8/3 d is already a multiple
        M("swiglu_hidden", "return multiple * math.ceil(8 * d_model / 3 / multiple)",
          "return multiple * ((8 * d_model // 3) // multiple + 1)",
          ("round", "multiple", "ceil", "already", "one too many"),
          "rounds up by adding one multiple to the floor, one multiple too many whenever 8/3 d is already a multiple",
          regime="8/3 · d_model a multiple of `multiple`"),
        # two slips: keys and values counted with n_heads, and the head counted even when tied
        M("param_counts", PARAM_TAIL,
          PARAM_TAIL.replace("config.n_kv_heads * hd", "config.n_heads * hd")
          .replace("0 if config.tie_embeddings else config.vocab_size * d", "config.vocab_size * d"),
          GQA + TIED + ("lm_head", "k_proj", "v_proj"),
          "counts k_proj and v_proj with n_heads heads, and counts the head's matrix even when it is the embedding's"),
        # nn.Module plumbing: the final norm is the last block's norm
        M("Transformer", "self.norm = RMSNorm(config.d_model, config.norm_eps)", "self.norm = self.blocks[-1].mlp_norm",
          ("final norm", "norm", "shared", "mlp_norm", "parameters", "last block"),
          "uses the last block's mlp_norm as the final norm, so one gain serves two places"),
    ],
    "06": [
        # https://github.com/rajveer43/VeloxQuant-MLX/issues/389
        M("generate_left_padded", "ids, positions = next_id[:, None], positions[:, -1:] + 1",
          "ids, positions = next_id[:, None], torch.full((B, 1), cache.length)",
          ("position", "padding", "left", "row", "cache.length", "offset"),
          "places each new token at the cache's row count, which counts the padding, not at one past the row's last "
          "real position: the slip of https://github.com/rajveer43/VeloxQuant-MLX/issues/389",
          regime="prompts of different lengths"),
        # nn.Module plumbing: eval() and never given back
        M("generate_greedy", "cache.reset()                                   # stale positions",
          "model.eval()\n    cache.reset()                                   # stale positions",
          MODE, "switches the model to eval mode and leaves it there", regime="a model handed over in train mode"),
        # off by one: one token fewer
        M("generate_greedy", "for _ in range(max_new_tokens):", "for _ in range(1, max_new_tokens):",
          ("max_new_tokens", "one fewer", "one token", "length", "shape"),
          "counts the loop from 1, so it generates max_new_tokens - 1 tokens"),
        # off by one: positions counted from 1
        M("generate_left_padded", "positions = (mask.long().cumsum(-1) - 1).clamp(min=0)",
          "positions = mask.long().cumsum(-1)",
          ("position", "from 0", "cumsum", "inclusive", "first real token"),
          "takes the inclusive cumsum as the position, so each row's first real token sits at position 1"),
        # API misread: a float mask is added to the scores
        M("attention_step", "attn_mask=mask)", "attn_mask=mask.float())",
          ("mask", "float", "added", "boolean", "future", "bool"),
          "hands SDPA the mask as 0.0/1.0 floats, which SDPA adds to the scores instead of hiding the future keys"),
        # two slips that cancel in bfloat16: K only, and 4 bytes a value
        M("kv_cache_bytes", "per_position = 2 * config.n_layers * config.n_kv_heads * config.head_dim  # K and V, in "
                            "every block\n"
          "    return per_position * seq_len * batch_size * dtype.itemsize",
          "per_position = config.n_layers * config.n_kv_heads * config.head_dim\n"
          "    return per_position * seq_len * batch_size * 4",
          ("itemsize", "dtype", "bytes", "k and v", "both", "twice", "float32"),
          "counts the keys only and 4 bytes a value: the two cancel in bfloat16, double in float32",
          regime="a dtype other than bfloat16"),
        # https://github.com/RVC-Boss/GPT-SoVITS/issues/965
        M("attention_step", "mask = tinylm.causal_mask(T, start + T).to(x.device)",
          "mask = ~torch.ones(T, start + T, dtype=torch.bool, device=x.device).triu(diagonal=start)",
          ("diagonal", "itself", "own position", "current", "triu", "nan"),
          "builds the mask as the complement of triu at diagonal start, which also hides each token's own "
          "position, the diagonal slip of https://github.com/RVC-Boss/GPT-SoVITS/issues/965"),
    ],
    "07": [
        # https://github.com/jxiw/M1/issues/4
        M("gqa_attention", "k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)", "k, v = k.tile(1, n_rep, 1, 1), "
                                                                              "v.tile(1, n_rep, 1, 1)",
          ("order", "group", "h // n_rep", "interleave", "tile", "repeat"),
          "copies the kv heads with tile, which orders them (0, 1, 0, 1) instead of grouping them (0, 0, 1, 1): the "
          "order question of https://github.com/jxiw/M1/issues/4", regime="n_kv_heads > 1"),
        # https://github.com/state-spaces/mamba/pull/462
        M("gqa_attention", "\n    k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)  # (B, n_heads, T, hd): only inside "
                           "attention",
          "",
          GQA + ("repeat_kv", "repeat", "expand"),
          "hands SDPA the kv heads without repeating them, as https://github.com/state-spaces/mamba/pull/462 fixed: "
          "broadcasting covers one kv head only", regime="1 < n_kv_heads < n_heads"),
        # API misread: repeat_interleave without dim flattens
        M("repeat_kv", "x = x[:, :, None].expand(B, n_kv, n_rep, T, hd)  # (B, n_kv, n_rep, T, hd): a view, copies of "
                       "each kv head side by side\n"
          "    return x.reshape(B, n_kv * n_rep, T, hd)",
          "return torch.repeat_interleave(x, n_rep).reshape(B, n_kv * n_rep, T, hd)",
          ("repeat_interleave", "dim", "flatten", "elements", "heads"),
          "calls repeat_interleave without dim, which repeats every single number of the flattened tensor, not "
          "each head", regime="n_rep > 1"),
        # two slips that cancel at n_heads = 2 n_kv_heads: K only, with n_heads
        M("decode_bytes_per_token", "kv_cache = 2 * L * config.n_kv_heads * hd * context_len * size",
          "kv_cache = L * config.n_heads * hd * context_len * size",
          GQA + ("k and v", "both", "twice", "kv_cache"),
          "counts the keys only, but with n_heads heads: the two cancel when n_heads is twice n_kv_heads",
          regime="n_heads other than 2 · n_kv_heads"),
        # off by one: a block too many in place of the final norm
        M("decode_bytes_per_token", "weights = (matrices + L * per_block + d) * size", "weights = (matrices + (L + 1) "
                                                                                       "* per_block) * size",
          ("block", "n_layers", "final norm", "weights", "one more"),
          "counts L + 1 blocks and no final norm"),
        # API misread: is_causal aligns its mask top-left
        M("gqa_step", "mask = tinylm.causal_mask(T, start + T).to(x.device)  # (T, start + T)\n"
          "    y = F.scaled_dot_product_attention(q, repeat_kv(k_all, n_rep), repeat_kv(v_all, n_rep), attn_mask=mask)",
          "y = F.scaled_dot_product_attention(q, repeat_kv(k_all, n_rep), repeat_kv(v_all, n_rep), is_causal=True)",
          ("is_causal", "top-left", "bottom-right", "past", "cached", "mask"),
          "uses is_causal=True instead of the (T, start + T) mask: SDPA aligns it top-left, so after a prefill the "
          "new tokens see only the first keys", regime="a step after a prefill"),
    ],
    "08": [
        # https://github.com/BlinkDL/ChatRWKV/pull/170
        M("top_p_filter", "mass_before = probs.cumsum(dim=-1) - probs                    # mass of the strictly more "
                          "likely tokens\n"
          "    drop_sorted = mass_before >= p ",
          "cutoff = (probs.cumsum(dim=-1) > p).int().argmax(dim=-1, keepdim=True)\n"
          "    drop_sorted = torch.arange(probs.shape[-1]) > cutoff ",
          ("top_p", "p = 1", "only the top", "cutoff", "argmax", "every token"),
          "finds the cut with argmax over cumsum > p; when no cumsum passes p (top_p = 1) argmax is 0 and only the top "
          "token is kept, as in https://github.com/BlinkDL/ChatRWKV/pull/170", regime="top_p = 1.0, or tied logits"),
        # API misread: max with a dim returns (values, indices)
        M("sample_next", "return logits.argmax(dim=-1)  ", "return logits.max(dim=-1)  ",
          ("max", "values", "indices", "tuple", "argmax", "token ids"),
          "takes the greedy token with logits.max(dim=-1), which returns (values, indices), not the ids",
          regime="temperature 0"),
        # off by one: k capped one below the vocabulary
        M("top_k_filter", "k = min(k, logits.shape[-1])", "k = min(k, logits.shape[-1] - 1)",
          ("vocabulary", "every token", "k >= v", "cap", "smallest"),
          "caps k one below the vocabulary, so a k as large as V drops the least likely token", regime="k >= V"),
        # API misread: min with a dim returns (values, indices)
        M("top_k_filter", "kth = logits.topk(k, dim=-1).values[..., -1:]",
          "kth = logits.topk(k, dim=-1).values.min(dim=-1, keepdim=True)",
          ("min", "values", "indices", "tuple", "namedtuple"),
          "takes the k-th largest with .min(dim=-1, keepdim=True), which returns (values, indices), not a tensor"),
        # API misread: torch.where's argument order
        M("top_p_filter", 'return logits.masked_fill(drop, float("-inf"))', 'return torch.where(drop, logits, '
                                                                            'float("-inf"))',
          ("where", "inverted", "kept", "nucleus", "mask"),
          "writes the filter with torch.where with its values swapped: keeps the dropped tokens and removes the "
          "nucleus"),
        # two slips: the greedy branch keeps a dim, and squeeze() drops the batch of one
        M("sample_next", SAMPLE_BODY,
          SAMPLE_BODY.replace("argmax(dim=-1)", "argmax(dim=-1, keepdim=True)").replace(".squeeze(-1)", ".squeeze()"),
          ("shape", "(b,)", "keepdim", "squeeze", "batch of one"),
          "returns (B, 1) from the greedy branch, and squeezes the sampled ids without a dim, a 0-d tensor for a "
          "batch of one"),
        # nn.Module plumbing: the mode read after switching it
        M("generate", "was_training = model.training\n    model.eval()",
          "was_training = model.eval().training",
          MODE, "reads model.training after calling eval(), so it always restores eval mode",
          regime="a model handed over in train mode"),
        # https://github.com/RL-Align/RL-Kernel/issues/81
        M("sample_next", "probs = logits.softmax(dim=-1)  ", "probs = (logits / temperature).softmax(dim=-1)  ",
          ("temperature", "twice", "squared", "scaled again"),
          "divides by the temperature a second time just before the softmax, sampling at T squared, as in "
          "https://github.com/RL-Align/RL-Kernel/issues/81", regime="temperature other than 1"),
    ],
    "09": [
        # https://github.com/pytorch/torchtitan/pull/1261
        M("lr_schedule", "progress = (step - warmup_steps) /", "progress = (step + 1 - warmup_steps) /",
          ("decay", "step", "off by one", "cosine", "max_lr", "min_lr"),
          "adds one to the step in the decay as in https://github.com/pytorch/torchtitan/pull/1261, so the decay "
          "starts one step early and reaches min_lr one step early"),
        # off by one: the first window never drawn
        M("get_batch", "starts = torch.randint(len(data) - seq_len, (batch_size,), generator=generator)",
          "starts = torch.randint(len(data) - seq_len - 1, (batch_size,), generator=generator) + 1",
          ("start", "first", "window", "position 0", "range", "last"),
          "draws starts from 1 to N - T - 1: the first token never starts a window"),
        # API misread: nll_loss expects log-probabilities
        M("lm_loss", "F.cross_entropy(logits.flatten(0, 1)", "F.nll_loss(logits.flatten(0, 1)",
          ("log_softmax", "nll_loss", "log-probabilities", "logits", "cross_entropy"),
          "uses F.nll_loss on raw logits; it expects log-probabilities, so the log-softmax is missing"),
        # API misread: reduction="sum" divided by every target
        M("lm_loss", 'ignore_index=-100)', 'ignore_index=-100, reduction="sum") / targets.numel()',
          PADDING + ("numel", "mean"),
          "sums the loss and divides by every target, padding included", regime="-100 padding"),
        # off by one: targets counted from the second position
        M("train_step_accumulated", "n_tokens = sum(int((y != -100).sum()) for _, y in micro_batches)",
          "n_tokens = sum(int((y[:, 1:] != -100).sum()) for _, y in micro_batches)",
          ("n_tokens", "count", "targets", "first position", "one short"),
          "counts the targets from each row's second position, as if the first had none: the count is short by "
          "one per row"),
        # two slips: zero_grad after the step, and the clip before backward
        M("train_step",
          "optimizer.zero_grad(set_to_none=True)        # gradients accumulate otherwise\n"
          "    loss.backward()                              # d loss / d every parameter\n"
          "    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)  # global gradient norm <= grad_clip\n"
          "    optimizer.step()                             # the AdamW update\n",
          "torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)\n"
          "    loss.backward()\n    optimizer.step()\n    optimizer.zero_grad(set_to_none=True)\n",
          ("clip", "zero_grad", "stale", "before backward", "gradient norm"),
          "clips before backward (the old gradients, not this batch's) and zeroes the gradients after the step, "
          "so gradients a caller left behind are added in"),
        # two slips that cancel without padding: the mean loss times every target
        M("train_step_accumulated", 'ignore_index=-100, reduction="sum")\n        (summed / n_tokens).backward()',
          'ignore_index=-100) * y.numel()\n        (summed / n_tokens).backward()',
          PADDING + ("numel", "mean"),
          "takes the mean over the real targets and multiplies it by all targets, padding included: right only "
          "without padding", regime="-100 padding"),
        # nn.Module plumbing: train() is a method; the flag alone leaves the submodules as they were
        M("train_step", "model.train()                                # dropout on", "model.training = True  # "
                                                                                     "dropout on",
          MODE + ("submodule", "children"),
          "sets model.training = True instead of calling model.train(), so the submodules keep the mode they had",
          regime="a model handed over in eval mode"),
    ],
    "10": [
        # nn.Module plumbing: eval() is a method; the flag alone leaves the submodules in train mode
        M("evaluate", "model.eval()                                             # dropout off", "model.training = "
                                                                                                "False  # dropout off",
          MODE + ("submodule", "children", "dropout"),
          "sets model.training = False instead of calling model.eval(), so the submodules stay in train mode",
          regime="a model handed over in train mode"),
        # two slips: the sum in the logits' dtype, and the count left a tensor
        M("nll_sum_and_count", NLL_BODY,
          NLL_BODY.replace("logits.flatten(0, 1).float()", "logits.flatten(0, 1)")
          .replace("count = int((targets != ignore_index).sum())", "count = (targets != ignore_index).sum()"),
          BF16 + ("float32", "int", "tensor", "type"),
          "sums the NLL in the logits' own dtype and returns the count as a 0-d tensor instead of a Python int"),
        # nn.Module plumbing: the mode read after switching it
        M("evaluate", "was_training = model.training\n    model.eval()",
          "model.eval()                                             # dropout off while measuring\n"
          "    was_training = model.training",
          MODE, "switches to eval before reading model.training, so a model handed over in train mode is left in eval",
          regime="a model handed over in train mode"),
        # off by one: 255 possible next bytes in the smoothing
        M("bigram_nll", "+ 256 * alpha)", "+ 255 * alpha)",
          ("256", "alpha", "sum to 1", "normalis", "normaliz", "smoothing"),
          "adds alpha for 255 possible next bytes in the denominator instead of 256, so no row sums to 1"),
        # two slips: columns normalised and the pair read (next, prev)
        M("bigram_nll", BIGRAM_TAIL,
          BIGRAM_TAIL.replace("counts.sum(dim=1, keepdim=True)", "counts.sum(dim=0, keepdim=True)")
          .replace("[val[:-1], val[1:]]", "[val[1:], val[:-1]]"),
          ("row", "prev", "next", "normalis", "normaliz", "sum to 1", "order"),
          "normalises each column of the counts instead of each row, and reads the table at (next, prev)"),
    ],
}

# edits that compute what the solution computes, another way: a check must pass each
SAME = [
    ("01", M("tie_weights", "lm_head.weight = tok_emb.weight", 'lm_head._parameters["weight"] = tok_emb.weight', (),
             "puts the embedding's Parameter into the head's parameter dict directly")),
    ("01", M("tied_logits", "return x @ weight.T", "return torch.tensordot(x, weight, dims=([-1], [1]))", (),
             "contracts x's features with the table's with tensordot")),
    ("01", M("embed", "return weight[ids]",
             "return torch.stack([weight[i] for i in ids.reshape(-1).tolist()]).reshape(*ids.shape, weight.shape[1])",
             (), "looks the rows up one id at a time in a loop and stacks them")),
    ("02", M("layer_norm", "var = centred.pow(2).mean(dim=-1, keepdim=True)",
             "var = centred.pow(2).sum(dim=-1, keepdim=True) / x.shape[-1]", (),
             "divides the sum of squares by d itself")),
    ("02", M("rms_norm", "x32.pow(2).mean(dim=-1, keepdim=True)", "x32.square().mean(-1, keepdim=True)", (),
             "squares with square() and names the axis positionally")),
    ("02", M("RMSNorm", "self.weight = nn.Parameter(torch.ones(dim))",
             'self.register_parameter("weight", nn.Parameter(torch.ones(dim)))', (),
             "registers the gain with register_parameter")),
    ("03", M("self_attention", "split_heads(F.linear(x, w), n_heads)", 'split_heads(torch.einsum("btd,ed->bte", x, '
                                                                       'w), n_heads)',
             (), "projects with an einsum that contracts x with each weight's rows")),
    ("03", M("split_heads", "return y.transpose(1, 2).reshape(B, T, H * hd)",
             "return y.permute(0, 2, 1, 3).contiguous().view(B, T, H * hd)", (),
             "merges with permute, contiguous and view")),
    ("03", M("causal_attention", 'scores = scores.masked_fill(~mask, float("-inf"))',
             'scores = torch.where(mask, scores, torch.full_like(scores, float("-inf")))', (),
             "masks with torch.where in the right order")),
    ("04", M("rope_cache", "angles = torch.cat((angles, angles), dim=-1)", "angles = angles.repeat(1, 2)", (),
             "tiles the angles with repeat(1, 2), the same as cat along the last axis")),
    ("04", M("rotary_attention", "q = apply_rope(q, cos, sin, start_pos)  # position enters the scores only\n"
             "    k = apply_rope(k, cos, sin, start_pos)",
             "q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)", (),
             "rotates q and k from position 0: with queries and keys at the same positions only their distance "
             "enters the scores, so the common shift start_pos changes nothing")),
    ("05", M("Transformer", "nn.ModuleList(Block(config) for _ in range(config.n_layers))",
             "nn.Sequential(*(Block(config) for _ in range(config.n_layers)))", (),
             "keeps the blocks in an nn.Sequential, registered and iterated as the ModuleList is")),
    ("05", M("swiglu", "gate = F.silu(x @ w_gate.T)", "pre = x @ w_gate.T\n    gate = pre * torch.sigmoid(pre)", (),
             "writes SiLU by hand as z * sigmoid(z)")),
    ("06", M("cache_update", "k_all = torch.cat((past_k, k), dim=2)", "k_all = torch.cat((past_k, k), "
                                                                      "dim=past_k.dim() - 2)",
             (), "names the positions axis as the second from the end")),
    ("06", M("kv_cache_bytes", "return per_position * seq_len * batch_size * dtype.itemsize",
             "return dtype.itemsize * batch_size * seq_len * per_position", (), "multiplies the factors in another "
                                                                                "order")),
    ("07", M("repeat_kv", "x = x[:, :, None].expand(B, n_kv, n_rep, T, hd)",
             "x = torch.broadcast_to(x[:, :, None], (B, n_kv, n_rep, T, hd))", (),
             "broadcasts the new axis with torch.broadcast_to")),
    ("03", M("split_heads", "return y.transpose(1, 2).reshape(B, T, H * hd)",
             "return torch.cat(y.unbind(1), dim=-1)", (),
             "unbinds the heads and concatenates them along the features")),
    ("04", M("apply_rope", "x1, x2 = x.chunk(2, dim=-1)", "x1, x2 = x.tensor_split(2, dim=-1)", (),
             "cuts the two halves with tensor_split")),
    ("07", M("gqa_step", "mask = tinylm.causal_mask(T, start + T).to(x.device)",
             "mask = torch.ones(T, start + T, dtype=torch.bool, device=x.device).tril(diagonal=start)", (),
             "builds the bottom-right mask itself with tril at diagonal start")),
    ("08", M("top_k_filter", "kth = logits.topk(k, dim=-1).values[..., -1:]",
             "kth = logits.topk(k, dim=-1).values.min(dim=-1, keepdim=True).values", (),
             "takes the smallest of the k largest, reading .values of min's result")),
    ("08", M("sample_next", "num_samples=1, generator=generator)", "num_samples=1, replacement=True, "
                                                                   "generator=generator)",
             (), "draws its single sample with replacement=True, which for one sample draws the same")),
    ("09", M("lm_loss", ', ignore_index=-100)  # (B*T, V) vs (B*T,)', ")  # (B*T, V) vs (B*T,)", (),
             "relies on cross_entropy's default ignore_index, which is -100")),
    ("09", M("lm_loss", "F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)",
             "F.nll_loss(F.log_softmax(logits.flatten(0, 1), dim=-1), targets.flatten(), ignore_index=-100)", (),
             "takes the log-softmax itself and hands it to nll_loss")),
    ("10", M("evaluate", "with torch.no_grad():                                # no graph",
             "with torch.inference_mode():                         # no graph", (),
             "evaluates under inference_mode instead of no_grad")),
    ("10", M("bigram_nll", "return -probs.log()[val[:-1], val[1:]].mean().item()",
             "return -probs.log()[val[:-1], val[1:]].sum().item() / (len(val) - 1)", (),
             "sums the log-probabilities and divides by the number of pairs")),
]
