"""A fourteenth held-out set of learner mistakes ("fresh11"), written without
reading the checks: neither autograder/checks/, tests/checks/, the diagnosis
code of benchmarks/bench_diagnostics.py nor the diagnosis sections of
docs/benchmarks.md were opened before the set was committed and measured.
The mistakes were written from the notebook sources (the exercise prose, the
signatures and the solution cells, autograder/authoring/notebook_src/), from
tinylm, and, for 16 of them, from bugs that public projects shipped or were
asked to fix (the thread is named in the reason). fresh10.py was read for the
format of an entry only; the other sets were not read. No mistake was tried
against a check before the set was first measured. Not part of the default
run: `python benchmarks/bench_diagnostics.py --set fresh11`.

The set covers every exercise family of the ten notebooks, the newer ones
included: the checkpoint conversion of notebook 04 (interleaved_to_half,
meta_to_hf_attention), head_dim set apart in notebook 05's Attention, the
left-padded batch of notebook 06, the edges of top-k and top-p, gradient
accumulation and the schedule's last step in notebook 09, and the accounting
exercises (attention_flops, param_counts, kv_cache_bytes,
decode_bytes_per_token, train_step_costs).

Each mistake is one substitution in one answer cell. `expect` holds words a
check that found this mistake would likely say; `untrue` words of causes that
would be wrong for it; `regime` the situation in which a mistake that is right
by default shows. `in_lists`, filled in after the first measurement by
comparing the texts, marks the 24 that turned out to be character for
character an entry of another list.

SAME lists 10 edits that are no mistake: the cell computes what the solution
computes another way (type_as for .to, 1/sqrt for rsqrt, the complement of
triu for tril, flatten for a reshape that reads head_dim, an integer padding
mask for a boolean one, the last rows of a square mask for the bottom-right
one, sort for topk, a (B, V, T) cross-entropy for the flattened one,
zero_grad's default, dim=-1 for dim=1 on a 2-d table). A check must pass each.
"""
from __future__ import annotations

from . import Mutation
from .unseen import Unseen as M

SHAPE = ("shape", "axis", "layout", "transpose", "dim")
DTYPE = ("dtype", "float32", "float16", "bfloat16", "precision", "cast", "upcast")
ROPE_OFFSET = ("start_pos", "offset", "position", "cache")

MUTATIONS = {
    "01": [
        M("embed", "return weight[ids]", "return weight.index_select(0, ids)",
          SHAPE + ("index_select", "1-d", "flat", "leading", "(b, t)", "one axis"),
          "looks the rows up with index_select, which takes a 1-d index only: a flat (T,) batch of ids works, "
          "the (B, T) ids of a real batch raise",
          untrue=("dtype", "transpose", "gradient", "one-hot"), in_lists=True),
        M("one_hot_embed", ".to(weight.dtype)", ".float()",
          DTYPE + ("float()", "weight's dtype", "float64"),
          "turns the one-hot matrix into float32 whatever the table's dtype: a float64 or bfloat16 table "
          "then meets a float32 one-hot in the matmul, which raises (torch does not promote in @)",
          regime="a weight other than float32", untrue=("num_classes", "transpose", "vocab"), in_lists=True),
        M("tied_logits", "return x @ weight.T", "return x @ weight.T / x.shape[-1] ** 0.5",
          ("scale", "sqrt", "factor", "divid", "d_model", "smaller", "too small"),
          "divides the logits by sqrt(d), carrying attention's scaling over to the head: every logit is "
          "sqrt(d) times too small, so the softmax is far too flat",
          untrue=("transpose", "layout", "tie", "(b, v, t)")),
        M("tie_weights", "lm_head.weight = tok_emb.weight", "lm_head.weight.data = tok_emb.weight.data",
          ("same parameter", "parameter object", "two parameters", "is not", ".data", "optimizer", "separate",
           "distinct"),
          "ties through .data: the two Parameters share storage, so the values agree today, but they are two "
          "Parameter objects: parameters() yields both, an optimizer keeps two states and applies two updates "
          "to the same numbers, and lm_head.weight is not tok_emb.weight",
          untrue=("transpose", "direction", "shape", "values differ"), in_lists=True),
    ],
    "02": [
        M("rms_norm", "(x32 * inv_rms).to(x.dtype)", "(x32 * inv_rms)",
          DTYPE + ("x.dtype", "output dtype", "cast back"),
          "normalises in float32 and never casts back: a bfloat16 input with a bfloat16 gain comes out float32, "
          "so the next layer's matmul meets mixed dtypes",
          regime="half-precision input and gain", untrue=("eps", "axis", "sum", "overflow"), in_lists=True),
        # https://github.com/hkproj/pytorch-transformer/pull/31 (LayerNorm divided by std + eps)
        M("layer_norm", "return weight * centred * torch.rsqrt(var + eps) + bias",
          "return weight * centred / (var.sqrt() + eps) + bias",
          ("eps", "epsilon", "sqrt", "std", "variance", "inside", "under the root"),
          "adds eps to the standard deviation instead of the variance, x / (std + eps), the form "
          "hkproj/pytorch-transformer#31 corrected: the same when the variance is large, different for a token "
          "whose variance is near eps or with a large eps",
          regime="a variance near eps (small inputs or a large eps)", untrue=("unbiased", "bessel", "axis", "mean is")),
        M("layer_norm", "centred = x - x.mean(dim=-1, keepdim=True)", "centred = x - x.mean()",
          SHAPE + ("mean", "per token", "centre", "center", "global", "every token"),
          "centres with the mean of the whole tensor instead of each token's own mean: tokens of different "
          "offsets are no longer centred, and the variance then measures their offsets too",
          untrue=("eps", "unbiased", "bessel", "bias"), in_lists=True),
        # https://github.com/linkedin/Liger-Kernel/issues/74 and https://github.com/pytorch/executorch/pull/19901
        M("RMSNorm",
          "self.weight = nn.Parameter(torch.ones(dim))  # gain starts at 1: a fresh norm only rescales\n"
          "        ### END SOLUTION\n\n"
          "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n"
          "        ### BEGIN SOLUTION\n"
          "        return rms_norm(x, self.weight, self.eps)",
          "self.weight = nn.Parameter(torch.zeros(dim))  # gain starts at 1: a fresh norm only rescales\n"
          "        ### END SOLUTION\n\n"
          "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n"
          "        ### BEGIN SOLUTION\n"
          "        return rms_norm(x, 1 + self.weight, self.eps)",
          ("1 +", "offset", "gain", "state_dict", "load", "checkpoint", "zeros", "ones", "init", "weight"),
          "stores the gain as an offset from 1, Gemma's convention (zeros, then 1 + weight): a fresh module "
          "gives the right output, but a gain loaded from a checkpoint of this course (or tinylm's) is off by "
          "one, the mismatch of linkedin/Liger-Kernel#74 and pytorch/executorch#19901",
          regime="a gain loaded from a checkpoint", untrue=("eps", "dtype", "not a parameter", "axis")),
    ],
    "03": [
        M("causal_mask", "allowed.tril(diagonal=kv_len - q_len)", "allowed.tril(diagonal=q_len - kv_len)",
          ("kv_len - q_len", "diagonal", "offset", "bottom-right", "align", "sign", "cached", "q_len < kv_len"),
          "writes the diagonal offset the other way round, q_len - kv_len: square masks are right, but with "
          "queries after cached keys each query sees 2 · (kv_len - q_len) keys too few",
          regime="q_len < kv_len", untrue=("triu", "inverted", "strict", "transpose"), in_lists=True),
        M("split_heads",
          "x = x.view(B, T, n_heads, d // n_heads)  # (B, T, H, hd): head h owns features h*hd .. (h+1)*hd - 1\n"
          "    return x.transpose(1, 2)                 # (B, H, T, hd)",
          "x = x.view(B, T, d // n_heads, n_heads)  # (B, T, H, hd): head h owns features h*hd .. (h+1)*hd - 1\n"
          "    return x.permute(0, 3, 1, 2)             # (B, H, T, hd)",
          SHAPE + ("strided", "interleav", "every", "features", "block", "view", "contiguous block"),
          "views the features as (hd, H) and moves H to the front: the shape is (B, H, T, hd), but head h holds "
          "features h, h + H, h + 2H, ... instead of the block h·hd .. (h+1)·hd - 1, so merge_heads no longer "
          "undoes it and a checkpoint's heads are read wrong",
          untrue=("scale", "mask", "softmax", "dtype")),
        M("causal_attention", "/ math.sqrt(q.shape[-1])", "/ math.sqrt(k.shape[-2])",
          ("scale", "sqrt", "head_dim", "hd", "keys", "temperature", "√", "d_k"),
          "scales the scores by the square root of the number of keys (k.shape[-2]) instead of the head size: "
          "right only when the sequence is as long as a head is wide",
          untrue=("mask", "softmax over", "transpose", "offset")),
        M("causal_attention", 'scores = scores.masked_fill(~mask, float("-inf"))', "scores = scores * mask",
          ("mask", "-inf", "masked_fill", "zero", "future", "multipl", "causal", "attend"),
          "multiplies the scores by the mask instead of filling with -inf: a masked score becomes 0, whose "
          "exp is 1, so every query still attends to the future",
          untrue=("scale", "sqrt", "transpose", "offset")),
        M("attention_flops", "projection = 2 * B * T * d * d", "projection = 2 * T * d * d",
          ("batch", "b ·", "b *", "per sequence", "qkv_proj", "out_proj", "projection"),
          "counts the projections for one sequence while the score and mix counts have the batch: right for "
          "batch 1, B times too small for qkv_proj and out_proj otherwise",
          regime="batch > 1", untrue=("causal", "half", "heads", "multiply-add"), in_lists=True),
        M("attention_flops", "per_head = 2 * T * T * head_dim", "per_head = 2 * T * T * d",
          ("head_dim", "heads", "n_heads", "d_model", "per head", "times", "h x"),
          "uses the model width d where each head multiplies head_dim features: the scores and the mix are "
          "counted n_heads times over",
          regime="n_heads > 1", untrue=("batch", "causal", "half", "projection"), in_lists=True),
    ],
    "04": [
        M("rope_cache", "torch.arange(max_seq_len, dtype=torch.float32)",
          "torch.arange(1, max_seq_len + 1, dtype=torch.float32)",
          ("position", "start", "row 0", "first position", "off by one", "shift", "1 .."),
          "numbers the positions 1 .. max_seq_len instead of 0 .. max_seq_len - 1: row m of the tables holds "
          "the angles of position m + 1 (relative scores survive, the absolute rotation of every token is off "
          "by one position, so a checkpoint's rotation is not reproduced)",
          untrue=("frequenc", "interleav", "theta", "sign"), in_lists=True),
        # https://github.com/EleutherAI/gpt-neox/issues/834 and https://github.com/pytorch/torchtitan/issues/801
        M("apply_rope", "x1, x2 = x.chunk(2, dim=-1)", "x1, x2 = x[..., ::2], x[..., 1::2]",
          ("interleav", "half", "pair", "chunk", "even", "odd", "adjacent", "rotate_half", "neox", "gpt-j"),
          "splits the features into evens and odds (the interleaved pairing) while the tables and the "
          "concatenation are in the half layout: each feature is rotated with a partner and an angle of the "
          "other convention, the GPT-J / NeoX mix-up of EleutherAI/gpt-neox#834 and pytorch/torchtitan#801",
          untrue=("frequenc", "start_pos", "theta", "dtype"), in_lists=True),
        M("rotary_attention", "q = apply_rope(q, cos, sin, start_pos)", "q = apply_rope(q, cos, sin)",
          ROPE_OFFSET + ("q", "queries", "query"),
          "rotates the queries at positions 0 .. T - 1 and the keys at start_pos ..: with start_pos > 0 every "
          "score sees a distance start_pos too large",
          regime="start_pos > 0", untrue=("value", "sign", "frequenc", "interleav")),
        M("interleaved_to_half",
          "pairs = w.reshape(n_heads, hd // 2, 2, d_in)      # (nh, hd/2, 2, d_in): pair i of head h is rows 2i, 2i+1\n"
          "    return pairs.transpose(1, 2).reshape(rows, d_in)",
          "pairs = w.reshape(rows // 2, 2, d_in)      # (nh, hd/2, 2, d_in): pair i of head h is rows 2i, 2i+1\n"
          "    return pairs.transpose(0, 1).reshape(rows, d_in)",
          ("per head", "across heads", "head", "block", "whole", "n_heads", "every head"),
          "reorders the rows of the whole matrix, evens then odds, instead of within each head's block: right "
          "for one head, and with several the first rows of every head move into the first heads",
          regime="n_heads > 1", untrue=("inverse", "direction", "values", "o_proj")),
        # https://github.com/ggml-org/llama.cpp/pull/2276 (the converter's permute had to be the reverse of HF's)
        M("interleaved_to_half", "pairs = w.reshape(n_heads, hd // 2, 2, d_in)",
          "pairs = w.reshape(n_heads, 2, hd // 2, d_in)",
          ("inverse", "direction", "other way", "reverse", "half to interleaved", "permutation", "undo"),
          "reshapes as (n_heads, 2, hd/2, d_in) before the transpose: the result is the inverse permutation "
          "(half to interleaved), which equals the wanted one only for head_dim 4; the direction slip of the "
          "converters discussed in ggml-org/llama.cpp#2276",
          regime="head_dim > 4", untrue=("across heads", "n_kv_heads", "values", "o_proj"), in_lists=True),
        # https://github.com/huggingface/transformers/pull/31788 and https://github.com/ggml-org/llama.cpp/pull/3364
        M("interleaved_to_half", "k_proj = interleaved_to_half(wk, n_kv_heads)",
          "k_proj = interleaved_to_half(wk, n_heads)",
          ("n_kv_heads", "kv heads", "key", "k_proj", "gqa", "blocks", "kv head"),
          "permutes the key rows in n_heads blocks: under GQA wk has n_kv_heads blocks of head_dim rows, so "
          "the blocks are cut at the wrong places, the bug transformers#31788 and llama.cpp#3364 fixed in their "
          "converters",
          regime="n_kv_heads < n_heads", untrue=("values", "o_proj", "inverse", "interleav"), in_lists=True),
    ],
    "05": [
        M("swiglu", "gate = F.silu(x @ w_gate.T)", "gate = F.gelu(x @ w_gate.T)",
          ("silu", "gelu", "activation", "swish", "geglu"),
          "gates with GELU (GeGLU) instead of SiLU: close in shape, different in value, so a SwiGLU checkpoint "
          "runs with the wrong nonlinearity",
          untrue=("transpose", "swap", "w_down", "shape")),
        M("swiglu_hidden", "return multiple * math.ceil(8 * d_model / 3 / multiple)",
          "return multiple * (8 * d_model // 3 // multiple + 1)",
          ("round", "ceil", "already a multiple", "exact", "one multiple", "+ 1", "up", "too large"),
          "rounds up with floor division plus one: right when 8/3 · d_model is not a multiple, one multiple too "
          "many when it already is",
          regime="8/3 · d_model already a multiple", untrue=("8/3", "4d", "2/3")),
        M("pre_norm_block",
          "x = x + attn(attn_norm(x))  # the branch reads a normalised copy; the stream stays a sum\n"
          "    x = x + mlp(mlp_norm(x))",
          "h = x + attn(attn_norm(x))  # the branch reads a normalised copy; the stream stays a sum\n"
          "    x = h + mlp(mlp_norm(x))",
          ("parallel", "before attention", "after attention", "sequential", "mlp_norm(x)", "stream", "input"),
          "feeds the MLP a norm of the block's input instead of the stream after attention, the parallel block "
          "of GPT-J: both branches read x, so the MLP never sees what attention wrote",
          untrue=("post-norm", "swap", "twice", "missing")),
        M("Transformer", "y = y.transpose(1, 2).reshape(B, T, self.n_heads * self.head_dim)",
          "y = y.transpose(1, 2).reshape(B, T, x.shape[-1])",
          ("head_dim", "d_model", "n_heads * head_dim", "x.shape[-1]", "merge", "width"),
          "merges the heads into x.shape[-1] = d_model features: right while head_dim = d_model // n_heads, "
          "and a reshape error (or a wrong width) once a config sets head_dim apart",
          regime="head_dim set apart from d_model // n_heads", untrue=("rope", "mask", "scale", "eps"), in_lists=True),
        # https://github.com/pkunlp-icler/FastV/issues/49 (every layer read one layer's KV cache)
        M("Transformer", "x = block(x, self.rope_cos, self.rope_sin, cache, i)",
          "x = block(x, self.rope_cos, self.rope_sin, cache)",
          ("layer_idx", "layer", "same layer", "layer 0", "block i", "each block"),
          "does not pass the block's index, so every block reads and writes layer 0 of the cache: without a "
          "cache nothing changes, with one the blocks overwrite each other's keys (the one-layer cache of "
          "pkunlp-icler/FastV#49)",
          regime="a KV cache and more than one block", untrue=("start_pos", "rope", "mask", "eps")),
        M("param_counts", '"norms": (2 * L + 1) * d', '"norms": 2 * L * d',
          ("final norm", "norm", "2 * l + 1", "one per block", "final", "d_model"),
          "counts the two norms of each block and forgets the final norm before the head: d_model too few",
          untrue=("tie", "head_dim", "bias", "n_kv_heads")),
    ],
    "06": [
        M("kv_cache_bytes", "dtype.itemsize", "torch.finfo(dtype).bits // 8",
          ("int8", "integer", "finfo", "itemsize", "quantis", "quantiz", "bytes per number"),
          "reads the bytes per number from torch.finfo, which exists for floating types only: right for "
          "float32 and bfloat16, raises for the int8 of a quantised cache",
          regime="an integer dtype (int8)", untrue=("n_kv_heads", "layers", "2 for k", "batch")),
        M("cache_update", "v_all = torch.cat((past_v, v), dim=2)", "v_all = torch.cat((past_v, k), dim=2)",
          ("value", "keys", "v_all", "copy", "k instead", "new values"),
          "appends the new keys to the cached values (a copy-paste slip): the shapes agree, the cache's "
          "values hold keys from the second step on",
          untrue=("axis", "order", "dim=1", "dtype"), in_lists=True),
        M("attention_step", "start = past_k.shape[2]", "start = past_k.shape[1]",
          ROPE_OFFSET + ("shape[2]", "axis", "heads", "start", "n_kv"),
          "reads the number of cached positions from axis 1, the kv heads: even an empty cache gives start = "
          "n_kv, so the new tokens are rotated and masked as if n_kv positions came before them",
          untrue=("concatenat", "order", "is_causal", "dtype"), in_lists=True),
        M("generate_greedy", "logits = model(step_input, cache=cache)[:, -1]",
          "logits = model(step_input, cache=cache)[:, 0]",
          ("last position", "-1", "first position", "prefill", "position 0", "[:, 0]"),
          "reads the logits of the first position instead of the last: the decode steps (one token) are right, "
          "but the first new token is predicted from the prompt's first token",
          regime="a prompt longer than one token", untrue=("reset", "argmax", "no_grad", "step_input"), in_lists=True),
        # https://github.com/unslothai/unsloth/issues/772 (right-padded prompts decoded from the pad's logits)
        M("generate_left_padded",
          "ids[b, T - len(p):] = p                                         # the padding goes in front\n"
          "        mask[b, T - len(p):] = True",
          "ids[b, :len(p)] = p                                         # the padding goes in front\n"
          "        mask[b, :len(p)] = True",
          ("left", "right", "pad", "padding", "last real token", "front", "[:, -1]", "end"),
          "pads on the right: the mask and the positions are consistent, but [:, -1] reads a pad's logits in "
          "every shorter row, so those rows continue from a pad token (unslothai/unsloth#772)",
          regime="prompts of different lengths", untrue=("positions count", "reset", "dtype")),
        M("generate_left_padded", "positions[:, -1:] + 1", "positions[:, -1:]",
          ROPE_OFFSET + ("+ 1", "one past", "same position", "repeat", "advance"),
          "gives each new token the position of its row's last token instead of one past it: the first new "
          "token repeats the prompt's last position and every later one repeats it again",
          untrue=("attention mask", "padded on the right", "reset", "left padding")),
    ],
    "07": [
        M("repeat_kv",
          "x = x[:, :, None].expand(B, n_kv, n_rep, T, hd)  # (B, n_kv, n_rep, T, hd): a view, copies of each kv "
          "head side by side\n    return x.reshape(B, n_kv * n_rep, T, hd)",
          "return x.expand(B, n_kv * n_rep, T, hd)",
          ("expand", "n_kv", "size 1", "singleton", "broadcast", "mqa", "one kv head"),
          "expands the head axis straight to n_kv · n_rep: expand only repeats an axis of size 1, so MQA works "
          "and GQA with several kv heads raises",
          regime="more than one kv head and n_rep > 1", untrue=("order", "tile", "dtype", "positions")),
        M("gqa_attention", "n_rep = q.shape[1] // k.shape[1]", "n_rep = q.shape[2] // k.shape[2]",
          ("n_rep", "heads", "shape[1]", "axis", "n_kv", "repeat", "positions"),
          "divides the sequence lengths (axis 2) instead of the head counts: n_rep is always 1, so MHA passes "
          "and GQA attends with too few kv heads",
          regime="n_kv_heads < n_heads", untrue=("order", "mask", "causal", "scale"), in_lists=True),
        M("gqa_step", "v = attn.v_proj(x).view(B, T, attn.n_kv_heads, attn.head_dim)",
          "v = attn.v_proj(x).view(B, T, attn.n_heads, attn.head_dim)",
          ("n_kv_heads", "v_proj", "values", "view", "heads", "kv heads"),
          "splits the values into n_heads heads as the queries are (a copy-paste of the q line): v_proj has "
          "n_kv_heads · head_dim features, so under GQA the view raises",
          regime="n_kv_heads < n_heads", untrue=("order", "mask", "rope", "start")),
        M("decode_bytes_per_token", "per_block = attention + 3 * d * config.d_ff + 2 * d",
          "per_block = attention + 3 * d * config.d_ff + d",
          ("norm", "two norms", "2 * d", "per block", "gains", "mlp_norm", "attn_norm"),
          "counts one norm gain per block instead of two (attn_norm and mlp_norm): n_layers · d_model numbers "
          "too few in the weights",
          untrue=("tie", "n_kv", "kv_cache", "embedding")),
    ],
    "08": [
        M("top_k_filter", "k = min(k, logits.shape[-1])", "k = min(k, logits.shape[0])",
          SHAPE + ("batch", "rows", "vocabulary", "shape[-1]", "clamp", "fewer than k"),
          "clamps k to the number of rows instead of the vocabulary: a batch with fewer rows than k keeps "
          "fewer than k tokens (a single row keeps one)",
          untrue=("ties", "in place", "inclusive", "strict")),
        # https://github.com/huggingface/transformers/pull/338 (the k-th values had shape (B,), not (B, 1))
        M("top_k_filter", ".values[..., -1:]", ".values[..., -1]",
          SHAPE + ("broadcast", "keepdim", "trailing", "(b, 1)", "per row", "-1:", "row"),
          "takes the k-th values without the trailing axis: (B,) broadcasts along the vocabulary, so row b is "
          "compared with the k-th value of row v; right for one row, the shape slip transformers#338 fixed",
          regime="more than one row", untrue=("ties", "in place", "k past", "vocabulary size")),
        M("top_p_filter", "probs = sorted_logits.softmax(dim=-1)", "probs = logits.softmax(dim=-1)",
          ("sorted", "order", "softmax", "unsorted", "cumsum", "vocabulary order"),
          "takes the probabilities of the unsorted logits, so the cumulative mass runs in vocabulary order "
          "while the tokens are in sorted order: the nucleus is cut at the wrong place",
          untrue=("crossing", "threshold", "temperature", ">="), in_lists=True),
        # https://github.com/lucidrains/PaLM-rlhf-pytorch/issues/60 (the sorted order used to unsort)
        M("top_p_filter", "drop = drop_sorted.scatter(-1, order, drop_sorted)", "drop = drop_sorted.gather(-1, order)",
          ("scatter", "gather", "inverse", "permutation", "unsort", "vocabulary order", "order"),
          "brings the mask back with gather(order), which applies the sort permutation a second time instead "
          "of undoing it: the tokens dropped are the wrong ones unless the order is its own inverse "
          "(lucidrains/PaLM-rlhf-pytorch#60)",
          untrue=("crossing", "cumsum", "temperature", "threshold"), in_lists=True),
        # https://github.com/ludwig-ai/ludwig/pull/1726 (squeeze() removed the batch axis of size 1)
        M("sample_next", ".squeeze(-1)  # (B, 1) -> (B,)", ".squeeze()  # (B, 1) -> (B,)",
          SHAPE + ("squeeze", "batch of one", "(1,)", "scalar", "0-d", "one row"),
          "squeezes every axis of size 1: a batch of one row returns a 0-d tensor instead of shape (1,), the "
          "squeeze ludwig-ai/ludwig#1726 restricted to one axis",
          regime="a batch of one row", untrue=("generator", "temperature", "filter", "argmax")),
        # https://github.com/NVIDIA/TensorRT-LLM/issues/1000 (a sampler seeded the same way at every call)
        M("sample_next", "generator=generator).squeeze(-1)",
          "generator=torch.Generator().manual_seed(0)).squeeze(-1)",
          ("generator", "seed", "same draw", "every call", "random", "reproduc", "rng", "repeat"),
          "draws with a generator seeded 0 afresh at every call: the caller's generator is ignored and every "
          "decoding step draws the same random numbers, the same-samples-every-time of NVIDIA/TensorRT-LLM#1000",
          untrue=("temperature", "top_k", "top_p", "order")),
        M("generate", "was_training = model.training\n    model.eval()",
          "was_training = model.training\n    torch.set_grad_enabled(False)\n    model.eval()",
          ("autograd", "grad", "set_grad_enabled", "no_grad", "global", "left off", "state", "process"),
          "switches autograd off for the whole process with torch.set_grad_enabled(False) on top of the "
          "no_grad block: generation is right, but the caller's next training step builds no graph",
          untrue=("eval", "dropout", "generator", "temperature")),
    ],
    "09": [
        M("get_batch", "window = data[idx].long()", "window = data[idx]",
          DTYPE + ("int64", "long", "uint8", "integer"),
          "keeps the corpus's dtype: the byte corpus is uint8, so x and y are uint8, which an embedding refuses "
          "as indices and cross_entropy refuses as targets",
          regime="uint8 data (the byte corpus)", untrue=("shift", "range", "generator", "last"), in_lists=True),
        # https://github.com/open-mmlab/mmpretrain/pull/104 (view on a non-contiguous tensor raised)
        M("lm_loss", "F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)",
          "F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1), ignore_index=-100)",
          ("view", "contiguous", "reshape", "stride", "flatten", "slice"),
          "flattens with view, which needs contiguous memory: logits sliced as logits[:, :-1] raise 'view size "
          "is not compatible with input tensor's size and stride', the error open-mmlab/mmpretrain#104 fixed "
          "with reshape",
          regime="non-contiguous logits (a slice)", untrue=("shift", "padding", "mean", "ignore_index")),
        # https://github.com/deepspeedai/DeepSpeed/pull/8142 (WarmupCosineLR's denominator total - warmup)
        M("lr_schedule", "max(1, total_steps - 1 - warmup_steps)", "max(1, total_steps - warmup_steps)",
          ("last step", "min_lr", "total_steps - 1", "off by one", "end", "denominator", "reach"),
          "spreads the decay over total - warmup steps, the denominator of DeepSpeed's WarmupCosineLR "
          "(deepspeedai/DeepSpeed#8142 quotes it): the last step, total_steps - 1, stays above min_lr",
          untrue=("warmup from", "step + 1", "clamp", "lr = 0")),
        # https://github.com/google/brax/pull/152 (a loss tensor accumulated across steps kept every graph alive)
        M("train_step", "return loss.item()", "return loss",
          ("item", "float", "tensor", "graph", "memory", "python float"),
          "returns the loss tensor instead of loss.item(): the value prints the same, but a caller that "
          "collects the losses keeps every step's graph alive (google/brax#152)",
          untrue=("zero_grad", "clip", "train mode", "order"), in_lists=True),
        M("train_step", "torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)",
          "torch.nn.utils.clip_grad_value_(model.parameters(), grad_clip)",
          ("norm", "value", "clip_grad_norm", "global", "direction", "element", "entry"),
          "clips each gradient entry to [-grad_clip, grad_clip] instead of rescaling the global norm: the "
          "direction of the gradient changes and its norm can stay far above grad_clip",
          regime="a gradient norm above grad_clip", untrue=("order", "zero_grad", "after", "train mode"), in_lists=True),
        # https://github.com/radixark/miles/pull/2796 (the token normalizer counted masked positions)
        M("train_step_accumulated", "n_tokens = sum(int((y != -100).sum()) for _, y in micro_batches)",
          "n_tokens = sum(y.numel() for _, y in micro_batches)",
          ("padding", "-100", "numel", "denominator", "count", "real tokens", "scored"),
          "counts every target position, padding included, as a token of the batch: with -100 in the targets "
          "the gradient and the returned loss are shrunk by the share of padding, the normalizer "
          "radixark/miles#2796 corrected",
          regime="targets with padding (-100)", untrue=("zero_grad", "step", "clip once", "mean of means")),
        # https://github.com/meta-pytorch/torchtune/pull/1875 (per-micro-batch means under gradient accumulation)
        M("train_step_accumulated", "(summed / n_tokens).backward()", "(summed / (y != -100).sum()).backward()",
          ("denominator", "mean of means", "per micro-batch", "k times", "n_tokens", "whole batch", "each"),
          "backpropagates each micro-batch's own mean: the gradient is a sum of k means, about k times too "
          "large and weighting a short micro-batch like a long one, the normalisation meta-pytorch/torchtune#1875 "
          "replaced by the whole batch's token count",
          regime="more than one micro-batch", untrue=("zero_grad", "clip", "padding counted")),
        M("train_step_accumulated", "return total / n_tokens", "return total / len(micro_batches)",
          ("return", "mean", "loss", "n_tokens", "micro-batches", "tokens", "reported"),
          "returns the summed loss divided by the number of micro-batches: the step itself is right, the loss "
          "it reports is the sum over tokens / k, not the mean over the batch's tokens",
          untrue=("gradient", "zero_grad", "clip", "padding")),
        M("train_step_costs", '"adam_moments": 2 * 4 * n_params', '"adam_moments": 4 * n_params',
          ("two moments", "exp_avg_sq", "adam", "2 x", "second moment", "moments", "exp_avg"),
          "counts one AdamW moment per parameter: AdamW keeps two, exp_avg and exp_avg_sq",
          untrue=("flops", "tied", "grads", "backward"), in_lists=True),
    ],
    "10": [
        M("nll_sum_and_count", 'reduction="sum")', 'reduction="mean") * int((targets != ignore_index).sum())',
          ("nan", "all padding", "mean", "sum", "reduction", "0/0", "empty", "no scored"),
          "computes the sum as mean · count: equal whenever a target is scored, NaN for a batch whose targets "
          "are all padding (the mean of nothing times 0)",
          regime="a batch whose targets are all padding", untrue=("count", "dtype", "ignore_index", "float32")),
        M("evaluate", "total, count = total + s, count + n", "total, count = s, n",
          ("accumul", "last batch", "overwr", "every batch", "only the last", "sum over", "batches"),
          "assigns each batch's sum and count instead of adding them: the result is the last batch's loss",
          regime="more than one batch", untrue=("mode", "no_grad", "base", "padding")),
        M("evaluate", "loss / math.log(2) / bytes_per_token", "loss / math.log(2) * bytes_per_token",
          ("bytes_per_token", "bits_per_byte", "divide", "multipl", "per byte"),
          "multiplies by bytes_per_token where bits per byte divide by it: right for bytes (1 byte a token), "
          "off by bytes_per_token² for a tokenizer with longer tokens",
          regime="bytes_per_token other than 1", untrue=("ln 2", "base", "token-weighted", "mode"), in_lists=True),
        M("bigram_nll", "-probs.log()[val[:-1], val[1:]].mean()", "-probs.log()[val[1:], val[:-1]].mean()",
          ("row", "prev", "next", "transpos", "order", "index", "[prev, next]", "swap"),
          "looks the pairs up as [next, prev]: the table's rows are the previous byte, so each pair is scored "
          "with the probability of the reversed pair",
          untrue=("alpha", "256", "sum to 1", "dtype")),
        M("bigram_nll", "(counts.sum(dim=1, keepdim=True) + 256 * alpha)", "(counts.sum(dim=1, keepdim=True) + alpha)",
          ("256", "alpha", "smoothing", "sum to 1", "denominator", "normalis", "normaliz"),
          "adds alpha once to each row's total instead of once per possible next byte: the smoothed rows sum "
          "to more than 1",
          untrue=("row", "column", "dim", "transpos")),
    ],
}

# Edits that compute what the solution computes: a check must pass them.
SAME = [
    ("01", Mutation("one_hot_embed", "F.one_hot(ids, num_classes=weight.shape[0]).to(weight.dtype)",
                    "F.one_hot(ids, num_classes=len(weight)).type_as(weight)", (),
                    "sizes the one-hot by len(weight) and casts with type_as")),
    ("02", Mutation("rms_norm", "torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)",
                    "1.0 / torch.sqrt(x32.square().mean(dim=-1, keepdim=True) + eps)", (),
                    "writes rsqrt as 1 / sqrt and the square with square()")),
    ("03", Mutation("causal_mask", "return allowed.tril(diagonal=kv_len - q_len)",
                    "return ~allowed.triu(diagonal=kv_len - q_len + 1)", (),
                    "builds the allowed triangle as the complement of the strictly-future one")),
    ("04", Mutation("rope_cache", "-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim",
                    "-torch.arange(0, head_dim, 2).float() / head_dim", (),
                    "makes the exponents float with .float() instead of dtype=")),
    ("05", Mutation("Transformer", "y = y.transpose(1, 2).reshape(B, T, self.n_heads * self.head_dim)",
                    "y = y.transpose(1, 2).flatten(2)", (),
                    "merges the heads with flatten(2), which reads no width at all (head_dim set apart included)")),
    ("06", Mutation("generate_left_padded", "mask = torch.zeros(B, T, dtype=torch.bool)",
                    "mask = torch.zeros(B, T, dtype=torch.long)", (),
                    "keeps the padding mask as 0/1 integers, which the model accepts as it accepts booleans")),
    ("07", Mutation("gqa_step", "mask = tinylm.causal_mask(T, start + T).to(x.device)",
                    "mask = tinylm.causal_mask(start + T)[-T:].to(x.device)", (),
                    "takes the last T rows of the square mask, which are the bottom-right aligned ones")),
    ("08", Mutation("top_k_filter", "kth = logits.topk(k, dim=-1).values[..., -1:]",
                    "kth = logits.sort(dim=-1, descending=True).values[..., k - 1:k]", (),
                    "reads the k-th largest value from a full descending sort")),
    ("09", Mutation("lm_loss", "F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)",
                    "F.cross_entropy(logits.transpose(1, 2), targets, ignore_index=-100)", (),
                    "hands cross_entropy (B, V, T) logits and (B, T) targets, its K-dimensional form")),
    ("09", Mutation("train_step_accumulated", "optimizer.zero_grad(set_to_none=True)", "optimizer.zero_grad()", (),
                    "calls zero_grad with its default, which sets the gradients to None as well")),
    ("10", Mutation("bigram_nll", "counts.sum(dim=1, keepdim=True)", "counts.sum(dim=-1, keepdim=True)", (),
                    "sums the rows along dim=-1, the same axis of the 2-d table")),
]
