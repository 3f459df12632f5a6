"""An eighteenth held-out set of learner mistakes ("fresh16"), written without
reading the checks. Not opened, grepped or listed: autograder/checks/,
tests/checks/, autograder/diagnosis_*.py, the source of
benchmarks/bench_diagnostics.py, the diagnosis sections of docs/benchmarks.md
and tests/course/test_docs.py; bench_diagnostics.py and the notebooks' check
cells were never run, and no mistake was tried against a check.
bench_diagnostics.notebook_cells was imported only to print the answer cells
(the second item it returns; of the other two only their Python types were
printed). Read: the notebook sources in autograder/authoring/notebook_src/
(through those answer cells), tinylm, benchmarks/verify_unseen.py,
verify_heldout.py, heldout_duplicates.py, unseen_probes.py (in part),
unseen_probes_fresh14.py, and the lines of tests/course/test_benchmarks.py that
register fresh14. Of the other sets: fresh14.py's module docstring only,
__init__.py, and unseen.py's first 120 lines, which hold its entry class and,
beyond what was needed, its docstring and the first entries of notebooks 01 to
04 (no entry here was taken from them; the duplicate check below compares
with unseen too).

Sources: 30 of the 64 mistakes map onto an exercise a bug that a public project
shipped or was asked to fix, found with the search tool (GitHub issues and
pull requests: six of transformers, two each of nanoGPT and GPT-NeoX, one each
of PyTorch, gpt-fast, TransformerLens, TinyLlama, llm-foundry, optax, deepsparse,
tt-metal and 13 smaller projects); the thread is named in a comment above the
entry and in its reason. Every one of these addresses was checked
with `grep -rlF URL benchmarks/mutations/` (the address only) and occurs in no
other set; 15 first choices that did occur elsewhere were swapped for other
threads of the same bug before any entry was compared. The other 34 come from
the exercises themselves.

Duplicates: benchmarks/heldout_duplicates.py --set fresh16 compares the texts
mechanically and prints only matches. Over six rounds it reported 51, 23, 13,
4, 1 and 0 entries (of about 80 each time) that were character for character
in another set; each was replaced by a different mistake (or SAME edit), not by
a respelling of the same one. Where a replaced entry carried a public thread,
the thread was kept only when another form of the same bug, in another cell,
was new (the top-left mask moved to attention_step, the tiled kv heads to
gqa_attention, the missing RoPE offset to attention_step); otherwise the thread
went with the entry (Gemma's offset gain, top-p's crossing token, the
permute's direction and others).

Each mistake is one substitution in one answer cell; `expect` holds words a
check that found it would likely say, `untrue` words of causes it is not,
`regime` the situation in which a mistake that is right by default shows. The
classes covered: embeddings (ids past the table wrapped or clamped, rows and
tied logits made float32, log-probabilities returned as logits, a head whose
values are copied instead of tied), layout (reshape for transpose, a shape
unpacked the wrong way round, a start position read from the wrong axis, kv
heads tiled), masks (top-left where bottom-right belongs, by hand and through
is_causal, arguments swapped, triu for tril), attention scale (number of heads
for head_dim), RoPE (GPT-J's adjacent pairs against NeoX's halves, a permute
left out, positions without the cache's offset, sin offset but not cos, a
table built transposed, a float32 table promoting half inputs), the KV cache
(order of past and new, the values fed the keys, the whole sequence fed again,
decode positions advanced by the tokens fed or set to the padded width), norms
(sqrt for rsqrt, eps added after the rsqrt or used as a floor, a bias scaled by
the gain, an uncentred output, the config's eps not passed, the result left
float32), the block (parallel residual in both the function and the module,
q_proj sized d_model, an o_proj bias), sampling (softmax over the batch axis,
top-p on log-probabilities, ascending sort, probabilities sampled as logits, a
squeeze that drops a batch of one, row 0 only), training (targets shifted
twice, a double softmax before cross-entropy, clipping after the step in both
step functions, an unnormalised accumulated loss, a cosine without or clamped
at its floor), evaluation (half-precision sums, ignore_index not passed on,
mean of batch means, log2 of a loss, a bigram NLL summed or in bits, a uint8
index), and the accounting formulas (integer division made float, backward
counted once, d x d projections, head_dim derived from d_model, bytes fixed at
2, multiples not multiplied back). Several give numbers that another cause
gives too: the two top-left masks of attention_step (is_causal and a hand-made
tril) give the same tokens, the parallel residual gives the same wrong block
in the function and in the module, sqrt for rsqrt gives what dividing by
rsqrt's result gives, and a cache stored out of order changes nothing for one
decoded token. SAME lists 17 edits that compute what the solution computes
another way; a check must pass each.

`benchmarks/verify_unseen.py --set fresh16` proves each mistake a real bug and
each SAME edit harmless, with the shared probes and those of
benchmarks/unseen_probes_fresh16.py. Its first run found 7 mistakes no shared
probe saw (an id past the vocabulary clamped, half-precision tied logits made
float32, float FLOP counts, decode positions set to the padded width, two
head_dim-apart accounting formulas, clipping after the accumulated step) and
one SAME edit that changed a probe (dtype sizes read from finfo, which fails
for int8); the 7 got probes of their own and the SAME edit was replaced by one
that reads element_size, no mistake was replaced. Run:
`bench_diagnostics.py --set fresh16`.
Written at the same time as fresh15 by another helper, neither reading the
other's set: when both were merged, heldout_duplicates found four mistakes and
one SAME edit of this set character for character in fresh15 (a tie through
load_state_dict, the whole sequence fed again while decoding with a cache,
clipping after the step, a uint8 val left as it came, repeat_interleave for
repeat_kv); the lead removed them from this set unread by the checks, before
either set was measured, so fresh16 holds 60 mistakes (29 with a public
thread) and 16 SAME edits.

After the first measurement (main at 02db5b1), reading every printed line
against its reason found three lines the keyword count called untrue or
wrong to be true of the code: "n_kv_heads", "n_heads for" and "tied"
matched the rule a true line states and the sizes it measured ("untied"),
and the new entries put before the cached ones were named in words none of
the entry's `expect` words held ("before the cached ones"); the three words
were narrowed and one expect word added, nothing else in the set changed.
"""
from __future__ import annotations

from .unseen import M

MUTATIONS = {
    "01": [
        M("one_hot_embed", "F.one_hot(ids, num_classes=weight.shape[0])",
          "F.one_hot(ids.clamp(max=weight.shape[0] - 1), num_classes=weight.shape[0])",
          ("out of range", "clamp", "raise", "error", "invalid id"),
          "clamps ids past the vocabulary to V - 1 instead of letting the lookup fail: an invalid id silently reads "
          "the last row",
          untrue=("dtype", "transpose", "gradient"), regime="an id >= V"),
        # the log-softmax of a row differs from the row by a constant: cross-entropy, argmax and sampling are unchanged
        M("tied_logits", "return x @ weight.T", "return (x @ weight.T).log_softmax(dim=-1)",
          ("log_softmax", "log-probabilities", "normalis", "normaliz", "not logits", "logsumexp"),
          "returns log-probabilities instead of logits: each row is shifted by its logsumexp, so the values differ "
          "although cross-entropy, argmax and sampling give what logits give",
          untrue=("transpose", "scale", "dtype")),
        M("tied_logits", "return x @ weight.T", "return x.float() @ weight.float().T",
          ("dtype", "float32", "float16", "half", "precision"),
          "computes the logits in float32 whatever x's dtype: half-precision inputs come back as float32 logits",
          untrue=("transpose", "softmax", "scale"), regime="half-precision x and weight"),
        M("embed", "return weight[ids]", "return weight[ids % weight.shape[0]]",
          ("out of range", "wrap", "modulo", "raise", "invalid id"),
          "wraps ids past the vocabulary around to the start instead of failing: an invalid id silently reads "
          "another token's row",
          untrue=("dtype", "gradient", "transpose"), regime="an id >= V"),
        M("embed", "return weight[ids]", "return weight[ids].to(torch.float32)",
          ("dtype", "float32", "half", "precision", "weight.dtype"),
          "casts the looked-up rows to float32 whatever the weight's dtype: a half-precision embedding returns float32",
          untrue=("gradient", "shape", "one-hot"), regime="a weight that is not float32"),
    ],
    "02": [
        # https://github.com/mosaicml/llm-foundry/pull/372 (x multiplied by its RMS instead of divided by it)
        M("rms_norm", "torch.rsqrt(x32.pow(2)", "torch.sqrt(x32.pow(2)",
          ("rsqrt", "sqrt", "inverse", "multipl", "divid", "rms"),
          "takes the square root where the reciprocal square root belongs: x is multiplied by its RMS instead of "
          "divided by it (the same effect as the bug fixed in https://github.com/mosaicml/llm-foundry/pull/372)",
          untrue=("eps", "float16", "mean over")),
        M("rms_norm", "return weight * (x32 * inv_rms).to(x.dtype)", "return weight * (x32 * inv_rms)",
          ("dtype", "float32", "float16", "cast back", "x.dtype"),
          "never casts the result back: a float16 input comes out float32",
          untrue=("eps", "overflow", "mean over"), regime="input that is not float32"),
        M("layer_norm", "return weight * centred * torch.rsqrt(var + eps) + bias",
          "return weight * (centred * torch.rsqrt(var + eps) + bias)",
          ("bias", "scaled", "weight", "order"),
          "adds the bias before the gain multiplies: the output's shift is weight * bias instead of bias",
          untrue=("unbiased", "eps", "centred"), regime="a gain other than ones with a nonzero bias"),
        M("layer_norm", "torch.rsqrt(var + eps)", "(torch.rsqrt(var) + eps)",
          ("eps", "inside", "outside", "variance", "rsqrt"),
          "adds eps to 1/sqrt(var) instead of to the variance: tokens with a tiny variance divide by nearly zero",
          untrue=("unbiased", "bias", "mean over")),
        M("layer_norm", "return weight * centred * torch.rsqrt(var + eps) + bias",
          "return weight * x * torch.rsqrt(var + eps) + bias",
          ("centred", "mean", "subtract", "uncentred", "x instead"),
          "scales the uncentred x: the variance is right but the mean is never subtracted from the output",
          untrue=("unbiased", "eps", "bias")),
        M("rms_norm", "torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)",
          "torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True).clamp(min=eps))",
          ("eps", "clamp", "floor", "added", "mean square"),
          "uses eps as a floor on the mean square instead of adding it: the same for tokens whose mean square is far "
          "above eps, different for tokens near or below it",
          untrue=("float16", "last axis", "gain"), regime="inputs whose mean square is comparable to eps"),
    ],
    "03": [
        M("split_heads", "x.transpose(1, 2)                 # (B, H, T, hd)",
          "x.reshape(B, n_heads, T, d // n_heads)  # (B, H, T, hd)",
          ("transpose", "reshape", "layout", "positions", "mixes"),
          "reshapes to (B, H, T, hd) instead of transposing: the shape is right but each 'head' holds slices of "
          "several positions",
          untrue=("scale", "mask", "softmax")),
        M("causal_attention", "mask = causal_mask(q.shape[-2], k.shape[-2])",
          "mask = causal_mask(k.shape[-2], q.shape[-2])",
          ("q_len", "kv_len", "arguments", "order", "swapped", "shape"),
          "passes kv_len and q_len the wrong way round: a (Tk, Tq) mask, the same as the right one when Tq == Tk; with "
          "fewer queries than keys it no longer broadcasts over the (Tq, Tk) scores and masked_fill raises",
          untrue=("-inf", "scale", "softmax"), regime="fewer queries than keys"),
        M("self_attention", "split_heads(F.linear(x, w), n_heads) for w in (w_q, w_k, w_v)",
          "split_heads(x @ w, n_heads) for w in (w_q, w_k, w_v)",
          ("[d_out, d_in]", "transpose", "layout", "w.t", "f.linear"),
          "projects q, k and v as x @ w, forgetting that the weights are stored [d_out, d_in]: each projection uses "
          "the transposed matrix",
          untrue=("mask", "scale", "merge")),
        # https://github.com/tenstorrent/tt-metal/pull/56789 (scores scaled by 1/sqrt(num_heads), not 1/sqrt(head_dim))
        M("causal_attention", "/ math.sqrt(q.shape[-1])", "/ math.sqrt(q.shape[1])",
          ("sqrt", "scale", "head_dim", "heads", "n_heads"),
          "scales the scores by 1/sqrt(n_heads), read from axis 1, instead of 1/sqrt(head_dim) "
          "(the bug fixed in https://github.com/tenstorrent/tt-metal/pull/56789)",
          untrue=("mask", "-inf", "transpose"), regime="n_heads != head_dim"),
        # https://github.com/karpathy/nanoGPT/issues/170 (tril or triu for the causal mask)
        M("causal_mask", "return allowed.tril(diagonal=kv_len - q_len)", "return allowed.triu(diagonal=kv_len - q_len)",
          ("tril", "triu", "future", "upper", "lower", "leak"),
          "keeps the upper triangle: each query may attend to itself and the future, not the past (the tril/triu "
          "question of https://github.com/karpathy/nanoGPT/issues/170)",
          untrue=("scale", "dtype", "softmax axis")),
        M("attention_flops", "head_dim = d // n_heads", "head_dim = d / n_heads",
          ("int", "float", "integer", "type", "//"),
          "divides with / instead of //: head_dim and every count built from it are floats instead of ints",
          untrue=("causal", "factor 2", "multiply-add")),
    ],
    "04": [
        # https://github.com/jzhang38/TinyLlama/issues/24 (GPT-J's rotation of adjacent pairs against NeoX's halves)
        M("apply_rope", "return torch.cat((-x2, x1), dim=-1)",
          "return torch.stack((-x[..., 1::2], x[..., ::2]), dim=-1).flatten(-2)",
          ("rotate_half", "pairs", "interleav", "halves", "adjacent", "layout"),
          "rotates adjacent pairs (GPT-J's rotate-every-two) while the tables pair feature i with i + hd/2 (NeoX's "
          "halves): the two styles of https://github.com/jzhang38/TinyLlama/issues/24 mixed",
          untrue=("theta", "start_pos", "dtype")),
        # https://github.com/meta-pytorch/gpt-fast/issues/190 (what the permute does and whether it is needed)
        M("interleaved_to_half", "pairs.transpose(1, 2).reshape(rows, d_in)", "pairs.reshape(rows, d_in)",
          ("permut", "transpose", "unchanged", "layout", "evens"),
          "reshapes but never swaps the pair axes: the rows come back in their interleaved order, unconverted (the "
          "permute puzzled over in https://github.com/meta-pytorch/gpt-fast/issues/190)",
          untrue=("n_kv_heads", "v_proj", "theta")),
        M("apply_rope", "cos = cos[start_pos:start_pos + T].to(x.dtype)  # (T, hd), broadcasts over (B, H)",
          "cos = cos[start_pos:start_pos + T]  # (T, hd), broadcasts over (B, H)",
          ("dtype", "float32", "float16", "promot", "cast"),
          "leaves the cos table in float32: a half-precision x is promoted and comes back float32, so attention then "
          "mixes float32 queries and keys with half-precision values and its matmul raises",
          untrue=("start_pos", "sign", "theta"), regime="half-precision x"),
        M("apply_rope", "sin = sin[start_pos:start_pos + T].to(x.dtype)", "sin = sin[:T].to(x.dtype)",
          ("start_pos", "sin", "offset", "position", "cached"),
          "offsets the cos table by start_pos but takes sin from position 0: past the first chunk each pair is "
          "scaled and turned by mismatched angles",
          untrue=("dtype", "sign", "theta"), regime="start_pos > 0"),
        M("rope_cache", "angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float32), inv_freq)",
          "angles = torch.outer(inv_freq, torch.arange(max_seq_len, dtype=torch.float32))",
          ("shape", "transpos", "outer", "order", "(max_seq_len, head_dim)"),
          "takes the outer product the other way round: the tables come back (hd/2, 2 * max_seq_len) instead of "
          "(max_seq_len, hd)",
          untrue=("theta", "interleav", "sin and cos")),
        M("interleaved_to_half", "rows, d_in = w.shape", "d_in, rows = w.shape",
          ("shape", "rows", "d_in", "unpack", "swapped"),
          "unpacks the weight's shape the wrong way round: right for a square q_proj, wrong (an error or a misread "
          "layout) for k_proj with fewer kv heads or a head_dim set apart",
          untrue=("direction", "v_proj", "theta"), regime="a weight that is not square"),
    ],
    "05": [
        # https://github.com/huggingface/transformers/pull/18695 (GPT-NeoX's parallel residual)
        M("pre_norm_block", "x = x + attn(attn_norm(x))  # the branch reads a normalised copy; the stream stays a sum\n"
          "    x = x + mlp(mlp_norm(x))    # the MLP reads the stream after attention has written to it",
          "x = x + attn(attn_norm(x)) + mlp(mlp_norm(x))  # both branches read the block's input",
          ("parallel", "after attention", "sequential", "input of the block", "mlp reads"),
          "computes a parallel residual (GPT-J/NeoX's use_parallel_residual, "
          "https://github.com/huggingface/transformers/pull/18695): the MLP reads the block's input instead of the "
          "stream after attention",
          untrue=("post-norm", "norm after", "eps")),
        # https://github.com/TransformerLensOrg/TransformerLens/issues/1644 (parallel wiring of a sequential model)
        M("Transformer",
          "x = x + self.attn(self.attn_norm(x), cos, sin, cache, layer_idx)  # the branch reads a normalised copy\n"
          "        return x + self.mlp(self.mlp_norm(x))",
          "h = self.attn(self.attn_norm(x), cos, sin, cache, layer_idx)\n        return x + h + "
          "self.mlp(self.mlp_norm(x))",
          ("parallel", "after attention", "sequential", "block's input", "mlp reads"),
          "wires the Block in parallel: its MLP reads the block's input rather than the stream attention has "
          "written to (the wiring mix-up of https://github.com/TransformerLensOrg/TransformerLens/issues/1644)",
          untrue=("post-norm", "eps", "tied")),
        # https://github.com/elixir-nx/bumblebee/pull/364 (Gemma's attention width is n_heads * head_dim)
        M("Transformer", "self.q_proj = nn.Linear(config.d_model, config.n_heads * config.head_dim, bias=False)",
          "self.q_proj = nn.Linear(config.d_model, config.d_model, bias=False)",
          ("head_dim", "n_heads * head_dim", "d_model", "width", "q_proj"),
          "sizes q_proj's output as d_model instead of n_heads * head_dim: the two differ once head_dim is set apart "
          "(Gemma's case, https://github.com/elixir-nx/bumblebee/pull/364) and the view to heads fails",
          untrue=("n_kv_heads instead", "rope", "tied"), regime="head_dim != d_model // n_heads"),
        # https://github.com/huggingface/transformers/issues/38025 (the config's eps not passed to the norm)
        M("Transformer", "self.attn_norm = RMSNorm(config.d_model, config.norm_eps)",
          "self.attn_norm = RMSNorm(config.d_model)",
          ("norm_eps", "eps", "config", "default"),
          "builds attention's norm without config.norm_eps: it uses the default 1e-6 whatever the config says (the "
          "eps left behind in https://github.com/huggingface/transformers/issues/38025)",
          untrue=("parallel", "gain", "tied"), regime="a norm_eps other than 1e-6"),
        M("Transformer", "self.o_proj = nn.Linear(config.n_heads * config.head_dim, config.d_model, bias=False)",
          "self.o_proj = nn.Linear(config.n_heads * config.head_dim, config.d_model)",
          ("bias", "o_proj", "parameters", "llama"),
          "gives o_proj a bias, as GPT-2's projections have and Llama's do not: d_model extra parameters, initialised "
          "uniformly (reset_parameters touches only matrices), so the output is shifted",
          untrue=("head_dim", "tied", "norm")),
        M("swiglu_hidden", "return multiple * math.ceil(8 * d_model / 3 / multiple)",
          "return math.ceil(8 * d_model / 3 / multiple)",
          ("multiple", "multipl", "count of", "rounded up", "number of multiples"),
          "returns how many multiples are needed instead of multiplying back: d_ff comes out `multiple` times too "
          "small",
          untrue=("round", "floor", "truncat")),
    ],
    "06": [
        M("cache_update",
          "k_all = torch.cat((past_k, k), dim=2)  # positions are axis 2: the past first, then the new tokens\n"
          "    v_all = torch.cat((past_v, v), dim=2)",
          "k_all = torch.cat((k, past_k), dim=2)  # positions are axis 2\n    v_all = torch.cat((v, past_v), dim=2)",
          ("order", "past first", "new tokens", "positions", "prepend", "before the cached"),
          "puts the new keys and values before the cached ones: the returned cache is out of position order; one new "
          "token still attends to the same keys (all are visible and RoPE is already in them), but with several new "
          "tokens the bottom-right mask hides and shows the wrong keys",
          untrue=("axis 1", "dtype", "n_kv_heads")),
        # https://github.com/open-lm-engine/lm-engine/pull/498 (is_causal kept only where query and key lengths agree)
        M("attention_step", "y = F.scaled_dot_product_attention(q, k_all, v_all, attn_mask=mask)",
          "y = F.scaled_dot_product_attention(q, k_all, v_all, is_causal=True)",
          ("is_causal", "top-left", "bottom-right", "cached", "key 0", "mask"),
          "lets SDPA build the mask with is_causal=True: it is aligned top-left, so after a prefill the new token "
          "attends to the first key only (https://github.com/open-lm-engine/lm-engine/pull/498)",
          untrue=("rope", "n_kv_heads", "values"), regime="a non-empty cache"),
        # https://github.com/pytorch/pytorch/issues/115111 (a causal mask anchored top-left when q_len != kv_len)
        M("attention_step",
          "mask = tinylm.causal_mask(T, start + T).to(x.device)  # (T, start + T), bottom-right aligned",
          "mask = torch.ones(T, start + T, dtype=torch.bool).tril().to(x.device)  # (T, start + T)",
          ("bottom-right", "top-left", "diagonal", "cached", "offset", "mask"),
          "builds the mask by hand with tril(): anchored top-left, new query i sees keys 0..i instead of "
          "0..start + i (the alignment discussed in https://github.com/pytorch/pytorch/issues/115111)",
          untrue=("rope", "n_kv_heads", "values"), regime="a non-empty cache"),
        # https://github.com/huggingface/transformers/pull/15751 (positions not offset by the cached length)
        M("attention_step",
          "q = tinylm.apply_rope(q, cos, sin, start_pos=start)  # the new tokens sit at start .. start + T - 1\n"
          "    k = tinylm.apply_rope(k, cos, sin, start_pos=start)",
          "q = tinylm.apply_rope(q, cos, sin)  # the new tokens\n    k = tinylm.apply_rope(k, cos, sin)",
          ("start_pos", "position", "offset", "cached", "rotat"),
          "rotates the new tokens as if at positions 0..: with a cache the new keys and queries carry the prompt's "
          "first positions (the missing offset https://github.com/huggingface/transformers/pull/15751 added)",
          untrue=("is_causal", "values", "top-left"), regime="a non-empty cache"),
        M("generate_left_padded", "positions[:, -1:] + 1", "positions[:, -1:] + ids.shape[1]",
          ("position", "one past", "offset", "+ 1", "prefill"),
          "advances the position by the number of tokens just fed: after a prefill of T columns the first new token "
          "sits at the last position plus T instead of plus one (later steps add one, as they should)",
          untrue=("reset", "attention_mask", "argmax"), regime="prompts longer than one token"),
        # https://github.com/scouzi1966/maclocal-api/issues/92 (one shared cursor as every row's decode position)
        M("generate_left_padded", "positions[:, -1:] + 1", "positions.new_full((B, 1), mask.shape[1])",
          ("position", "each row", "padding", "shared", "left-pad"),
          "gives every row the padded width as its next position: a row with a shorter prompt decodes T - n_b "
          "positions too far (the shared cursor of https://github.com/scouzi1966/maclocal-api/issues/92)",
          untrue=("reset", "argmax", "attention_mask"), regime="prompts of different lengths"),
    ],
    "07": [
        # https://github.com/ekzhang/jax-js/pull/180 (kv heads tiled where they should be repeated)
        M("gqa_attention", "k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)",
          "k, v = k.repeat(1, n_rep, 1, 1), v.repeat(1, n_rep, 1, 1)",
          ("order", "tile", "repeat_interleave", "h // n_rep", "groups"),
          "expands the kv heads with Tensor.repeat, which tiles: query head h reads kv head h % n_kv instead of "
          "h // n_rep (https://github.com/ekzhang/jax-js/pull/180)",
          untrue=("cache", "mask", "dtype"), regime="more than one kv head and n_rep > 1"),
        M("gqa_step", "start, n_rep = past_k.shape[2], attn.n_heads // attn.n_kv_heads",
          "start, n_rep = past_k.shape[1], attn.n_heads // attn.n_kv_heads",
          ("shape[2]", "axis", "n_kv", "start", "positions"),
          "reads the start position from axis 1, the kv heads: new tokens are rotated at position n_kv and the mask "
          "is built for n_kv cached keys, so its shape no longer matches the keys and SDPA raises",
          untrue=("repeat", "is_causal", "dtype")),
        # https://github.com/EleutherAI/gpt-neox/issues/1434 (head_dim assumed to be hidden_size / num_attention_heads)
        M("decode_bytes_per_token", "kv_cache = 2 * L * config.n_kv_heads * hd * context_len * size",
          "kv_cache = 2 * L * config.n_kv_heads * (d // config.n_heads) * context_len * size",
          ("head_dim", "d_model // n_heads", "hidden", "head size"),
          "derives the head size as d_model // n_heads for the cache: wrong when head_dim is set apart "
          "(https://github.com/EleutherAI/gpt-neox/issues/1434)",
          untrue=("n_heads instead of n_kv_heads", "tied head", "dtype"), regime="head_dim != d_model // n_heads"),
        M("decode_bytes_per_token", "weights = (matrices + L * per_block + d) * size",
          "weights = (matrices + L * per_block + d) * 2",
          ("dtype", "itemsize", "bytes per", "bfloat16", "size"),
          "counts 2 bytes per weight whatever dtype is asked: right for bfloat16 only",
          untrue=("tied", "norm", "n_kv_heads"), regime="a dtype other than bfloat16 or float16"),
        # https://github.com/paiml/entrenar/issues/262 (q_proj assumed [hidden, hidden])
        M("decode_bytes_per_token", "attention = 2 * d * config.n_heads * hd + 2 * d * config.n_kv_heads * hd",
          "attention = 2 * d * d + 2 * d * config.n_kv_heads * hd",
          ("head_dim", "n_heads * head_dim", "d_model", "q_proj", "o_proj"),
          "counts q_proj and o_proj as d x d: right only when n_heads * head_dim == d_model (the assumption of "
          "https://github.com/paiml/entrenar/issues/262)",
          untrue=("n_kv_heads", "tied", "dtype")),
        M("gqa_step", "v_all = torch.cat((past_v, v), dim=2)", "v_all = torch.cat((past_v, k), dim=2)",
          ("values", "v_all", "keys", "typo", "cache"),
          "appends the new keys to the value cache: the new positions' values are their keys",
          untrue=("repeat", "start", "mask")),
    ],
    "08": [
        # https://github.com/neuralmagic/deepsparse/pull/1128 ("batch is always 1": row 0's logits only)
        M("generate", "logits = model(idx)[:, -1]                  # (B, V): the last position predicts the next token",
          "logits = model(idx)[0, -1:]                 # (1, V): the last position predicts the next token",
          ("batch", "row 0", "first row", "each row", "[:, -1]"),
          "takes row 0's last logits only, as code written for a batch of one does "
          "(https://github.com/neuralmagic/deepsparse/pull/1128): with more than one prompt the concatenation fails",
          untrue=("eval mode", "no_grad", "temperature"), regime="more than one prompt"),
        M("sample_next", "probs = logits.softmax(dim=-1)", "probs = logits.softmax(dim=0)",
          ("softmax", "axis", "dim=0", "batch", "vocabulary"),
          "normalises over the batch axis instead of the vocabulary: each token's probability depends on the other "
          "rows; with one row every probability is 1 and the draw is uniform over the vocabulary",
          untrue=("temperature", "generator", "filter")),
        # https://github.com/skyzh/tiny-llm/issues/32 (the cumulative sum taken over log-probabilities)
        M("top_p_filter", "probs = sorted_logits.softmax(dim=-1)", "probs = sorted_logits.log_softmax(dim=-1)",
          ("log", "cumulative", "probabilities", "mass", "cumsum"),
          "accumulates log-probabilities instead of probabilities: the 'mass' is never positive, so no token is "
          "dropped (the cumsum of https://github.com/skyzh/tiny-llm/issues/32)",
          untrue=("temperature", "scatter", "sorted in")),
        # https://github.com/tflearn/tflearn/pull/562 (softmax applied where a later step applies it again)
        M("generate", "next_id = sample_next(logits, temperature, top_k, top_p, generator)",
          "next_id = sample_next(logits.softmax(dim=-1), temperature, top_k, top_p, generator)",
          ("softmax", "twice", "probabilities", "logits", "flat"),
          "passes probabilities to sample_next, which treats them as logits and applies its own softmax: the draw is "
          "from a nearly uniform distribution (a double softmax, https://github.com/tflearn/tflearn/pull/562)",
          untrue=("eval mode", "no_grad", "row 0")),
        # https://github.com/galsang/BiDAF-pytorch/pull/26 (squeeze() without an axis with a batch of one)
        M("sample_next", "num_samples=1, generator=generator).squeeze(-1)",
          "num_samples=1, generator=generator).squeeze()",
          ("squeeze", "shape", "batch of one", "(B,)", "0-d"),
          "squeezes every axis of the drawn ids: with one row the result is a 0-d tensor instead of shape (1,) "
          "(the squeeze of https://github.com/galsang/BiDAF-pytorch/pull/26)",
          untrue=("temperature", "generator", "filter"), regime="a batch of one"),
        M("top_p_filter", "sorted_logits, order = logits.sort(dim=-1, descending=True)",
          "sorted_logits, order = logits.sort(dim=-1)",
          ("descending", "ascending", "sort", "least likely", "order"),
          "sorts ascending: the mass is accumulated from the least likely token, so the nucleus keeps the tail and "
          "drops the top tokens",
          untrue=("temperature", "scatter", "1 - p")),
    ],
    "09": [
        # https://github.com/ariecattan/SciCo/issues/2 (probabilities fed to a loss that applies its own softmax)
        M("lm_loss", "F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)",
          "F.cross_entropy(logits.flatten(0, 1).softmax(dim=-1), targets.flatten(), ignore_index=-100)",
          ("softmax", "twice", "probabilities", "logits"),
          "feeds probabilities to cross_entropy, which applies its own log-softmax: the loss is bounded near log V and "
          "its gradients vanish (https://github.com/ariecattan/SciCo/issues/2)",
          untrue=("shift", "ignore_index", "mean over batches")),
        # https://github.com/huggingface/transformers/issues/47394 (labels shifted twice)
        M("train_step_accumulated", "summed = F.cross_entropy(logits.flatten(0, 1), y.flatten(),",
          "summed = F.cross_entropy(logits[:, :-1].flatten(0, 1), y[:, 1:].flatten(),",
          ("shift", "twice", "t + 2", "already shifted", "double"),
          "shifts again targets that are already shifted: position t is scored against token t + 2, and n_tokens "
          "still counts the dropped first column (the double shift of "
          "https://github.com/huggingface/transformers/issues/47394)",
          untrue=("clip", "zero_grad", "train mode")),
        # https://github.com/karpathy/nanoGPT/issues/206 (accumulated losses backpropagated without normalising)
        M("train_step_accumulated", "(summed / n_tokens).backward()", "summed.backward()",
          ("n_tokens", "sum", "normalis", "normaliz", "scale", "divid"),
          "backpropagates the summed loss without dividing by the batch's tokens: the gradient is n_tokens times the "
          "mean's, which clipping and Adam's scale invariance can hide but plain SGD does not (the normalisation asked "
          "about in "
          "https://github.com/karpathy/nanoGPT/issues/206)",
          untrue=("micro-batch mean", "train mode", "zero_grad")),
        # https://github.com/jongwook/onsets-and-frames/issues/24 (clip_grad_norm_ called after the step)
        M("train_step_accumulated",
          "torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)    # once: the whole batch's gradient\n"
          "    optimizer.step()                                                  # once",
          "optimizer.step()                                                  # once\n"
          "    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)    # once: the whole batch's gradient",
          ("clip", "after", "before the step", "order", "unclipped"),
          "clips the accumulated gradient after the step has used it: the update is unclipped "
          "(https://github.com/jongwook/onsets-and-frames/issues/24)",
          untrue=("n_tokens", "zero_grad", "train mode")),
        # https://github.com/huggingface/transformers/issues/26209 (a cosine schedule with no minimum learning rate)
        M("lr_schedule", "return min_lr + 0.5 * (1 + math.cos(math.pi * min(progress, 1.0))) * (max_lr - min_lr)",
          "return 0.5 * (1 + math.cos(math.pi * min(progress, 1.0))) * max_lr",
          ("min_lr", "floor", "decays to 0", "zero"),
          "decays from max_lr to 0 instead of to min_lr, the cosine of a schedule without a floor (the missing "
          "minimum asked for in https://github.com/huggingface/transformers/issues/26209)",
          untrue=("warmup", "off by one", "step + 1"), regime="min_lr > 0"),
        M("train_step_costs", '"flops": 6 * matmul_weights * tokens + 3 * attention_matmuls',
          '"flops": 4 * matmul_weights * tokens + 2 * attention_matmuls',
          ("backward", "2 x forward", "twice the forward", "6", "factor"),
          "counts the backward pass as one forward instead of two: FLOPs are 2/3 of the true count",
          untrue=("causal", "tied", "n_kv_heads")),
        # https://github.com/EleutherAI/gpt-neox/pull/1008 (a cosine to zero clamped at min_lr, with a flat tail)
        M("lr_schedule", "return min_lr + 0.5 * (1 + math.cos(math.pi * min(progress, 1.0))) * (max_lr - min_lr)",
          "return max(min_lr, 0.5 * (1 + math.cos(math.pi * min(progress, 1.0))) * max_lr)",
          ("min_lr", "clamp", "flat", "floor", "max("),
          "clamps a cosine that decays to 0 at min_lr instead of decaying to min_lr: the rate reaches min_lr early "
          "and stays flat (the schedule fixed in https://github.com/EleutherAI/gpt-neox/pull/1008)",
          untrue=("warmup", "off by one", "step + 1"), regime="min_lr > 0"),
    ],
    "10": [
        # https://github.com/google-deepmind/optax/issues/1020 (cross-entropy on half-precision logits)
        M("nll_sum_and_count", "nll = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(),",
          "nll = F.cross_entropy(logits.flatten(0, 1), targets.flatten(),",
          ("float32", "precision", "bfloat16", "float16", "upcast", "round"),
          "sums the loss in the logits' own precision: with bfloat16 logits the summed NLL is rounded to bfloat16's "
          "grid (https://github.com/google-deepmind/optax/issues/1020)",
          untrue=("padding", "ignore_index", "mean of"), regime="half-precision logits"),
        # https://github.com/huggingface/transformers/issues/34138 (windows' means averaged as if equal in size)
        M("evaluate", "total, count = total + s, count + n          # combine by tokens, not by batches",
          "total, count = total + s / n, count + 1      # one mean per batch",
          ("token", "batch", "weighted", "mean of means", "count"),
          "averages the batches' mean losses: a batch with few scored targets weighs as much as a full one "
          "(the averaging of https://github.com/huggingface/transformers/issues/34138)",
          untrue=("eval mode", "no_grad", "log(2)"), regime="batches with different numbers of scored targets"),
        M("bigram_nll", "return -probs.log()[val[:-1], val[1:]].mean().item()",
          "return -probs.log()[val[:-1], val[1:]].sum().item()",
          ("mean", "sum", "per byte", "length", "average"),
          "returns the summed NLL of val instead of its mean per predicted byte",
          untrue=("alpha", "column", "transpos")),
        M("evaluate", '"bits_per_byte": loss / math.log(2) / bytes_per_token',
          '"bits_per_byte": math.log2(loss) / bytes_per_token',
          ("log(2)", "nats", "bits", "convert", "log2"),
          "takes log2 of the loss instead of converting nats to bits (loss / ln 2)",
          untrue=("token-weighted", "eval mode", "mean of batch")),
        M("bigram_nll", "return -probs.log()[val[:-1], val[1:]].mean().item()",
          "return -probs.log2()[val[:-1], val[1:]].mean().item()",
          ("nats", "bits", "log2", "natural log", "base"),
          "measures the NLL in bits (log2) where nats are asked: the result is 1/ln 2 times too large",
          untrue=("alpha", "column", "transpos")),
        # https://github.com/lukas-blecher/LaTeX-OCR/issues/305 (cross_entropy left at its default ignore_index)
        M("nll_sum_and_count", "targets.flatten(), ignore_index=ignore_index,", "targets.flatten(),",
          ("ignore_index", "-100", "argument", "padding", "default"),
          "leaves cross_entropy at its default ignore_index -100 whatever was passed: with another padding id the "
          "padded targets are scored though the count excludes them (the default questioned in "
          "https://github.com/lukas-blecher/LaTeX-OCR/issues/305)",
          untrue=("float32", "precision", "reduction"), regime="an ignore_index other than -100"),
    ],
}

SAME = [
    ("01", M("one_hot_embed", ".to(weight.dtype)  # (..., V)", ".to(weight)  # (..., V)", (),
             "casts the one-hot rows with .to(weight), which takes the weight's dtype (and device)")),
    ("01", M("one_hot_embed", "return one_hot @ weight",
             "return torch.matmul(one_hot, weight) / one_hot.sum(dim=-1, keepdim=True)", (),
             "divides by the one-hot rows' sums, which are exactly 1")),
    ("03", M("causal_mask", "allowed.tril(diagonal=kv_len - q_len)",
             "torch.ones(kv_len, kv_len, dtype=torch.bool).tril()[kv_len - q_len:]", (),
             "takes the last q_len rows of the square causal mask")),
    ("03", M("split_heads", "x.transpose(1, 2)                 # (B, H, T, hd)",
             "x.permute(0, 2, 1, 3)  # (B, H, T, hd)",
             (), "swaps the axes with permute")),
    ("03", M("split_heads", "y.transpose(1, 2).reshape(B, T, H * hd)",
             "y.transpose(1, 2).contiguous().view(B, T, H * hd)", (),
             "merges with contiguous().view instead of reshape")),
    ("03", M("causal_attention", 'scores = scores.masked_fill(~mask, float("-inf"))',
             "scores = scores.masked_fill(~mask, -1e30)",
             (), "fills the future with -1e30, whose exp underflows to exactly 0 as -inf's does")),
    ("05", M("param_counts", '"norms": (2 * L + 1) * d,', '"norms": 2 * L * d + d,', (), "adds the final norm apart")),
    ("06", M("attention_step", "mask = tinylm.causal_mask(T, start + T).to(x.device)",
             "mask = torch.ones(start + T, start + T, dtype=torch.bool, device=x.device).tril()[start:]", (),
             "the last T rows of the square causal mask")),
    ("06", M("kv_cache_bytes", "* dtype.itemsize", "* torch.empty((), dtype=dtype).element_size()", (),
             "reads the bytes per element from an empty tensor of that dtype")),
    ("07", M("gqa_attention",
             "k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)  # (B, n_heads, T, hd): only inside attention\n"
             "    return F.scaled_dot_product_attention(q, k, v, is_causal=True)",
             "return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)", (),
             "lets SDPA share the kv heads (enable_gqa) instead of repeating them")),
    ("08", M("generate", "model.eval()                                            # dropout off while generating",
             "model.train(False)                                      # dropout off while generating", (),
             "switches to eval mode with train(False)")),
    ("09", M("get_batch", "return window[:, :-1], window[:, 1:]",
             "return window[:, :seq_len], window[:, 1:seq_len + 1]", (),
             "slices the windows with explicit bounds")),
    ("04", M("interleaved_to_half", "pairs = w.reshape(n_heads, hd // 2, 2, d_in)",
             "pairs = w.reshape(n_heads, hd // 2, 2, -1)",
             (), "lets reshape infer d_in")),
    ("08", M("sample_next", "if temperature == 0:", "if not temperature:",
             (), "tests a zero temperature by truthiness")),
    ("03", M("self_attention", "y = causal_attention(q, k, v)", "y = causal_attention(q, k, v).contiguous()", (),
             "makes the attention output contiguous before merging")),
    ("10", M("evaluate", "loss = total / count", "loss = total / max(count, 1)", (),
             "guards the division, which changes nothing when a target was scored")),
]
