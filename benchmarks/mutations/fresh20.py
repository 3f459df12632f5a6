"""A twentieth held-out set of learner mistakes ("fresh20"), written without
reading the checks: neither autograder/checks/ (any file), tests/checks/,
autograder/diagnosis_*.py, benchmarks/bench_diagnostics.py's source, the
diagnosis sections of docs/benchmarks.md nor tests/course/test_docs.py were
opened, listed or grepped; bench_diagnostics.py, check cells and notebook
checks were never run, and no mistake was tried against a check.

What was opened or run. The brief and the helper rules. `ls` of the
repository root, of benchmarks/ and of benchmarks/mutations/ (names only).
The answer cells of each notebook through bench_diagnostics.notebook_cells
(of its third result only the check names were printed; the setup cells
were not printed). benchmarks/mutations/__init__.py, unseen.py (the entry
class and its entries), verify_unseen.py, heldout_duplicates.py,
unseen_probes.py and unseen_probes_fresh19.py whole; unseen_probes_later.py
(its def names, then the file); verify_heldout.py (its def names, then its
helpers namespace, attempt, _config, _reference, _model_agreement,
_input_kept, _attention_steps). Of the other sets only fresh19.py's module
docstring, printed with python. tests/course/test_benchmarks.py: a grep for
"fresh19" and the lines of the two parametrized tests it names (140-175).
Greps: "fresh19" and "fresh20" over the registration files named in the
brief, def/class names over verify_heldout.py and unseen_probes_later.py,
"# http" over this file, and each candidate thread's URL over
benchmarks/mutations/ (`grep -rl URL`, the URL only: 36 URLs, of which 16
were already in fresh10, fresh11, fresh13, fresh14 or fresh15 and were not
used). Public threads were found with 11 searches of issue threads. Run:
verify_unseen.py --set fresh20 and heldout_duplicates.py --set fresh20
(several rounds each), the two fresh20 tests of test_benchmarks.py, and
torch.__version__. Slips: none that touched a check; reading lines 140-146
of test_benchmarks.py showed the end of an unrelated benchmark test.

Sources: a learner working through the notebooks and, for 12 mistakes,
bugs public projects shipped, reviewed or were asked about (the thread is
named in a comment above the entry and in its reason): llmman#151,
AutoGPTQ#139, nanochat#264, vllm-ascend#12765, flash-attention#546 and
#282, llama3#283, ArcticTraining#265, transformers#46898, nanoGPT#443,
nano-world-model#22, nanochat#59.

The set's focus. API confusions of torch (about 23): gather with the ids as
index, a one-hot cast to float32 under a bfloat16 table, the sum of squares
divided by shape[0], tril's diagonal one too high, triu for tril,
permute(...).view on a non-contiguous tensor, torch.where's branches
swapped, a cache concatenated on the last axis, a float 0/1 mask handed to
SDPA (added, not applied), is_causal's top-left alignment after a cache,
cumsum down the batch axis, repeat for expand, the head ratio inverted,
tril's default diagonal after a prefill, topk's indices taken for its
values, the k-th value without its kept axis, sort unpacked as (indices,
values), argmax over the batch, inference_mode tensors handed to autograd,
ids concatenated on the batch axis, a window index broadcast the wrong
way, the class count read from logits.shape[1], float targets. Code ported
from another project (about 20): a head used as if stored [d, V]
(Conv1D), the tie made the wrong way round and a transposed tied copy,
GPT-2's centring in RMSNorm, Gemma's zero-centred gain, HF's (B, T, H, hd)
layout kept or read (split_heads, apply_rope), a fused qkv split in the
order k, q, v, w_o transposed as Conv1D, Meta's interleaved angle layout
and GPT-J's even/odd split under rotate_half, the interleaved-to-half
permutation with pair and head axes swapped and keys permuted in n_heads
blocks, GELU, Meta's int() in the FFN size, post-norm, keys viewed straight
as heads, GPT-2's final LayerNorm and two-matrix MLP, labels shifted inside
the loss again. Loops and schedules (9): the cache fed its input
again, the warmup at lr 0 on step 0, the clip before backward, accumulation
that averages per-micro-batch means, never divides, or clears the
gradients inside the loop, generate that does not give the caller's mode
back, evaluate that never switches to eval mode or weighs batches equally.
Accounting and counts (9): the KV cache without the batch or sized
by d_model, two bytes hard-coded, k and v sized d x d, forward-only FLOPs,
bits per byte times ln 2, padding counted as non-negative targets, bigram
smoothing's denominator and a mean over bytes instead of pairs, and 4
plain ones (a gain that is no Parameter, the bias added before the gain,
RoPE tables sliced and offset twice, kv heads repeated n_kv_heads times).

SAME lists 15 edits that compute what the solution computes another way
(among them F.embedding, an einsum head, the biased torch.var, the mask as
an index comparison, torch.where in the right order, the angles tiled with
repeat, gather at argsort(order) instead of scatter, cross_entropy on
(B, V, T)); a check must pass each. A sixteenth, left-padded positions
counted from the first column, which RoPE's relative scores cannot tell from
the solution's (first written as a mistake and moved to SAME when no probe
saw it), failed its check on arrival on the positions the exercise asks for
(each row from 0 at its first real token, which a model with absolute
positions reads as they are): the lead moved it back to the mistakes of 06,
with a probe of the positions, after the arrival measurement.

Counts: 66 mistakes (01: 5, 02: 5, 03: 7, 04: 6, 05: 7, 06: 7, 07: 6,
08: 7, 09: 10, 10: 6; 65 on arrival), 15 SAME edits (16 on arrival), 12 public threads. 90 mistakes were
written first and 25 dropped to keep the set near its size. Duplicates:
heldout_duplicates.py --set fresh20 compared the texts mechanically and
printed only matches: 31 of 81 entries matched on the first round (28
mistakes, 3 SAME), then 7, 3, 1 and 0; each was rewritten into another form
or replaced by a different mistake (the clip after the step, which fresh4
holds, became the clip before backward with its own thread). The new
probes, in benchmarks/unseen_probes_fresh20.py, record the mode of
evaluate's forward passes and (the lead's) the positions of
generate_left_padded's prompt pass. `benchmarks/verify_unseen.py --set fresh20`
proves each mistake a real bug and each SAME edit harmless.

Each mistake is one substitution in one answer cell; `expect` holds words a
check that found it would likely say, `regime` the situation in which a
mistake that is right by default shows. Each reason says what the learner
did and the fix."""
from __future__ import annotations

from .unseen import Unseen as M

MUTATIONS = {
    "01": [
        M("embed", "return weight[ids]", "return torch.gather(weight, 0, ids)  # one row per id",
          ("gather", "shape", "(b, t, d)", "index shape", "one number", "rows"),
          "uses torch.gather with the ids as index: gather needs an index of the output's shape, so it returns one "
          "number per id (B, T) instead of a row (B, T, d); fix: weight[ids]"),
        M("one_hot_embed", ".to(weight.dtype)  # (..., V)", ".float()  # (..., V) one-hot rows as numbers",
          ("dtype", "bfloat16", "float32", "weight.dtype", "half"),
          "casts the one-hot matrix to float32 instead of the weight's dtype: with a bfloat16 table the matmul mixes "
          "dtypes and raises; fix: .to(weight.dtype)",
          regime="a weight in another dtype than float32"),
        M("tied_logits", "return x @ weight.T", "return F.linear(x, weight.T)  # the head is [d, V]",
          ("transpose", "weight.t", "[v, d]", "f.linear", "layout", "shape"),
          "ports a head stored [d, V] (GPT-2's Conv1D layout): F.linear already multiplies by the transpose, so "
          "transposing again asks for x @ weight, which does not fit; fix: x @ weight.T or F.linear(x, weight)"),
        M("tie_weights", "lm_head.weight = tok_emb.weight", "tok_emb.weight = lm_head.weight  # one Parameter for both",
          ("direction", "embedding's values", "lm_head's", "overwr", "initial", "tok_emb.weight", "which way"),
          "ties the wrong way round: the embedding now holds the head's (freshly initialised) Parameter, so the "
          "embedding's values are lost; fix: lm_head.weight = tok_emb.weight"),
        M("tie_weights", "lm_head.weight = tok_emb.weight", "lm_head.weight = nn.Parameter(tok_emb.weight.T)  # head is [d, V]",
          ("same parameter", "transpose", "copy", "not tied", "is tok_emb.weight", "shape", "separate"),
          "ties a transposed copy, as for a head stored [d, V]: a new Parameter of the wrong shape, shared with "
          "nothing; fix: lm_head.weight = tok_emb.weight (nn.Linear already stores [V, d])"),
    ],
    "02": [
        M("rms_norm", "x32.pow(2).mean(dim=-1, keepdim=True)", "x32.pow(2).sum(dim=-1, keepdim=True) / x.shape[0]",
          ("shape[0]", "d", "features", "mean", "count", "divide"),
          "divides the sum of squares by x.shape[0] (the batch) instead of the number of features x.shape[-1]; fix: "
          "mean over dim -1 (or / x.shape[-1])"),
        M("rms_norm", "x32 = x.float()  # squares of fp16 values overflow above 256",
          "x32 = x.float()\n    x32 = x32 - x32.mean(dim=-1, keepdim=True)  # centred first, as GPT-2's LayerNorm does",
          ("mean", "centr", "layernorm", "layer norm", "subtract", "rms"),
          "ports GPT-2's LayerNorm habit into RMSNorm: the features are centred before the root mean square is taken; "
          "fix: RMSNorm divides x itself by its RMS, no mean is removed"),
        M("layer_norm", "return weight * centred * torch.rsqrt(var + eps) + bias",
          "return weight * (centred * torch.rsqrt(var + eps) + bias)  # shift, then scale",
          ("bias", "order", "affine", "scaled", "weight * bias"),
          "adds the bias before scaling: the shift is multiplied by the gain; fix: weight * normalised + bias"),
        M("RMSNorm", "self.weight = nn.Parameter(torch.ones(dim))", "self.weight = torch.ones(dim, requires_grad=True)",
          ("parameter", "registered", "parameters()", "state_dict", "nn.parameter", "optimizer"),
          "makes the gain a plain tensor that requires grad: it is no module parameter, so no optimizer, state_dict or "
          ".to() sees it; fix: nn.Parameter(torch.ones(dim))"),
        # https://github.com/llmmanorg/llmman/pull/151
        M("RMSNorm", "self.weight = nn.Parameter(torch.ones(dim))", "self.weight = nn.Parameter(torch.zeros(dim))  # zero-centred gain",
          ("zero", "gain", "ones", "init", "1 + weight", "all zeros"),
          "ports Gemma's zero-centred gain (its forward multiplies by 1 + weight) into a norm that multiplies by the "
          "weight itself: every output is 0, as in https://github.com/llmmanorg/llmman/pull/151; fix: torch.ones(dim)"),
    ],
    "03": [
        M("causal_mask", "allowed.tril(diagonal=kv_len - q_len)", "allowed.tril(diagonal=kv_len - q_len + 1)",
          ("diagonal", "next token", "future", "off by one", "one ahead"),
          "shifts tril's diagonal one too high: each query also sees the key right after it; fix: "
          "diagonal=kv_len - q_len"),
        M("causal_mask", "allowed.tril(diagonal=kv_len - q_len)", "allowed.triu(diagonal=kv_len - q_len)",
          ("triu", "tril", "upper", "lower", "future", "past"),
          "takes triu for tril (as for the blocked part of an additive mask): each query may see the future and not "
          "the past; fix: tril"),
        M("split_heads", "    return x.transpose(1, 2)                 # (B, H, T, hd)",
          "    return x                                 # (B, T, H, hd), as HF's modules keep it",
          ("transpose", "(b, h, t, hd)", "layout", "axes", "heads and positions", "shape"),
          "keeps HF's (B, T, H, hd) layout: without the transpose attention would mix heads instead of positions; "
          "fix: return x.transpose(1, 2)"),
        M("split_heads", "y.transpose(1, 2).reshape(B, T, H * hd)", "y.permute(0, 2, 1, 3).view(B, T, H * hd)",
          ("contiguous", "view", "reshape", "stride"),
          "merges with .view after the transpose: the transposed tensor is not contiguous and view raises; fix: "
          "reshape (or .contiguous().view)"),
        M("causal_attention", 'scores = scores.masked_fill(~mask, float("-inf"))',
          'scores = scores + torch.where(mask, float("-inf"), 0.0)  # additive mask',
          ("where", "inverted", "future", "-inf", "order", "allowed", "blocked"),
          "builds the additive mask with torch.where's branches swapped: -inf where the key is allowed and 0 where it "
          "is the future; fix: torch.where(mask, 0.0, float('-inf'))"),
        M("self_attention", "for w in (w_q, w_k, w_v)", "for w in (w_k, w_q, w_v)",
          ("w_q", "w_k", "swapped", "order", "queries", "keys"),
          "unpacks the projections in the order (k, q, v), as from a fused qkv weight split in the wrong order: "
          "queries and keys trade places, which the causal mask makes visible; fix: (w_q, w_k, w_v)"),
        # https://github.com/AutoGPTQ/AutoGPTQ/pull/139
        M("self_attention", "F.linear(merge_heads(y), w_o)", "F.linear(merge_heads(y), w_o.T)  # [d_in, d_out] as in Conv1D",
          ("w_o", "transpose", "o_proj", "output projection", "[d_out, d_in]", "layout"),
          "transposes w_o as for GPT-2's Conv1D weights, stored [d_in, d_out], while these are nn.Linear's [d_out, "
          "d_in] (the layout mix-up of https://github.com/AutoGPTQ/AutoGPTQ/pull/139); fix: F.linear(y, w_o)"),
    ],
    "04": [
        # https://github.com/karpathy/nanochat/issues/264
        M("rope_cache", "angles = torch.cat((angles, angles), dim=-1)",
          "angles = angles.repeat_interleave(2, dim=-1)  # each pair's angle twice",
          ("interleav", "pair", "repeat_interleave", "half", "layout", "feature i and i + hd/2"),
          "lays the angles out for Meta's interleaved pairs (2i, 2i+1) while rotate_half pairs i with i + hd/2: the "
          "frequencies do not match the pairs (https://github.com/karpathy/nanochat/issues/264); fix: cat((a, a))"),
        # https://github.com/vllm-project/vllm-ascend/issues/12765
        M("apply_rope", "x1, x2 = x.chunk(2, dim=-1)", "x1, x2 = x[..., ::2], x[..., 1::2]  # GPT-J pairs",
          ("interleav", "half", "even", "odd", "chunk", "pairs"),
          "splits even and odd features (GPT-J / Meta pairing) but joins them as halves: the rotation pairs the wrong "
          "features (the pairing mix of https://github.com/vllm-project/vllm-ascend/issues/12765); fix: x.chunk(2, -1)"),
        M("apply_rope", "T = x.shape[-2]", "T = x.shape[1]  # (B, T, H, hd)",
          ("shape[-2]", "positions", "heads", "layout", "(b, h, t, hd)", "axis"),
          "reads the length from axis 1 as in HF's (B, T, H, hd) layout: here that is the number of heads, so the "
          "tables are cut to H rows; fix: x.shape[-2]"),
        M("rotary_attention", "q = apply_rope(q, cos, sin, start_pos)",
          "q = apply_rope(q, cos[start_pos:], sin[start_pos:], start_pos)",
          ("start_pos", "twice", "offset", "position", "2 * start_pos"),
          "slices the tables at start_pos and passes start_pos as well: the queries land at 2 * start_pos onwards; "
          "fix: the whole tables and start_pos once",
          regime="start_pos > 0"),
        M("interleaved_to_half", "w.reshape(n_heads, hd // 2, 2, d_in)", "w.reshape(hd // 2, n_heads, 2, d_in)",
          ("inverse", "permutation", "half", "interleav", "evens", "odds", "direction"),
          "puts the pair axis before the head axis: the rows of different heads are mixed, right only for one head; "
          "fix: reshape(n_heads, hd // 2, 2, d_in)"),
        # https://github.com/Dao-AILab/flash-attention/pull/546
        M("interleaved_to_half", "k_proj = interleaved_to_half(wk, n_kv_heads)",
          "k_proj = interleaved_to_half(wk, n_heads)  # the same permute as the queries",
          ("n_kv_heads", "kv heads", "gqa", "key", "k_proj", "heads"),
          "permutes the key rows in n_heads blocks: with fewer kv heads each block spans the wrong rows (the GQA key "
          "permute bug of https://github.com/Dao-AILab/flash-attention/pull/546); fix: n_kv_heads"),
    ],
    "05": [
        M("swiglu", "gate = F.silu(x @ w_gate.T)", "gate = F.gelu(x @ w_gate.T)  # GPT-2's activation",
          ("silu", "gelu", "activation", "swish"),
          "gates with GPT-2's GELU instead of SiLU; fix: F.silu"),
        # https://github.com/meta-llama/llama3/issues/283
        M("swiglu_hidden", "multiple * math.ceil(8 * d_model / 3 / multiple)",
          "multiple * ((int(2 * 4 * d_model / 3) + multiple - 1) // multiple)",
          ("round", "int(", "truncat", "ceil", "fraction", "8/3"),
          "truncates 8/3 d with int() before rounding up, as Meta's FeedForward does "
          "(https://github.com/meta-llama/llama3/issues/283): with a multiple of 1 the fraction is lost; fix: ceil of "
          "the exact quotient",
          regime="a multiple that does not absorb the fraction (1 or 2)"),
        M("pre_norm_block", "    x = x + attn(attn_norm(x))  # the branch reads a normalised copy; the stream stays a sum\n",
          "    x = attn_norm(x + attn(x))  # post-norm, as the original Transformer\n",
          ("post-norm", "pre-norm", "normalis", "norm before", "stream", "residual"),
          "applies attention's norm after the residual sum (post-norm) instead of to the branch's input; fix: "
          "x + attn(attn_norm(x))"),
        M("Transformer", "k = self.k_proj(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)",
          "k = self.k_proj(x).view(B, self.n_kv_heads, T, self.head_dim)",
          ("view", "transpose", "heads", "layout", "keys", "(b, t, h, hd)"),
          "views the projected keys straight as (B, n_kv, T, hd): the features of one position are spread across "
          "positions; fix: view(B, T, n_kv, hd).transpose(1, 2)"),
        M("Transformer", "self.norm = RMSNorm(config.d_model, config.norm_eps)",
          "self.norm = nn.LayerNorm(config.d_model, eps=config.norm_eps)  # as GPT-2's ln_f",
          ("layernorm", "rmsnorm", "bias", "final norm", "parameters"),
          "ports GPT-2's final LayerNorm: it centres and has a bias parameter Llama does not have; fix: RMSNorm"),
        M("param_counts", '"mlp": L * 3 * d * config.d_ff', '"mlp": L * 2 * d * config.d_ff',
          ("three", "gate", "swiglu", "mlp", "two matrices"),
          "counts GPT-2's two-matrix MLP: SwiGLU has three, gate, up and down; fix: 3 * d * d_ff"),
        M("param_counts", "k_and_v = 2 * d * config.n_kv_heads * hd", "k_and_v = 2 * d * d  # k_proj, v_proj: d -> d",
          ("n_kv_heads", "gqa", "kv heads", "k_proj", "v_proj"),
          "sizes k_proj and v_proj d x d as in multi-head attention: with GQA they have n_kv_heads heads; fix: "
          "d * n_kv_heads * head_dim each",
          regime="n_kv_heads < n_heads"),
    ],
    "06": [
        # Written as SAME (RoPE's scores depend on position differences only, and padding is masked, so the greedy
        # tokens are as they were); on arrival its check failed it on the positions the exercise asks for, which a
        # model with learned absolute positions reads as they are: moved here by the lead, with a probe of them.
        M("generate_left_padded", "positions = (mask.long().cumsum(-1) - 1).clamp(min=0)",
          "positions = torch.arange(T).expand(B, T)  # 0 .. T - 1 for every row, padding included",
          ("positions", "padded start", "first real token", "pads", "absolute", "cumsum"),
          "numbers the positions from the first column: each row's real tokens move by a constant, which RoPE's "
          "relative scores cannot tell apart, but the exercise counts each row from 0 at its first real token "
          "(a model with absolute positions gives other tokens); fix: (mask.cumsum(-1) - 1).clamp(min=0)",
          regime="rows with padding in front"),
        M("kv_cache_bytes", "return per_position * seq_len * batch_size * dtype.itemsize",
          "return per_position * seq_len * dtype.itemsize  # one sequence's cache",
          ("batch", "batch_size", "sequences", "per row"),
          "leaves batch_size out: every sequence of the batch has its own cache; fix: * batch_size",
          regime="batch_size > 1"),
        M("cache_update", "k_all = torch.cat((past_k, k), dim=2)", "k_all = torch.cat((past_k, k), dim=-1)",
          ("dim=2", "axis", "positions", "features", "head_dim"),
          "appends the new keys along the last axis (the features) instead of the positions; fix: dim=2"),
        M("attention_step", "attn_mask=mask)", "attn_mask=mask.float())  # 1 = attend, 0 = masked",
          ("float", "additive", "bool", "added", "future", "0 / -inf"),
          "hands SDPA a float 0/1 mask: a float mask is added to the scores, so the future keeps its weight; fix: a "
          "bool mask (or 0 / -inf)"),
        # https://github.com/Dao-AILab/flash-attention/issues/282
        M("attention_step", "attn_mask=mask)", "is_causal=T > 1)  # a mask only when several tokens come",
          ("is_causal", "top-left", "bottom-right", "cached", "offset", "start"),
          "uses is_causal for chunks of several tokens, whose mask is aligned top-left: once keys are cached each new query sees only the "
          "first keys (the alignment question of https://github.com/Dao-AILab/flash-attention/issues/282); fix: the "
          "bottom-right mask",
          regime="a step with cached positions"),
        M("generate_greedy", "step_input = next_id                                # decode",
          "step_input = torch.cat((step_input, next_id), dim=1)  # decode",
          ("whole sequence", "cache", "twice", "new token", "step_input", "all ids"),
          "feeds the last input again with the new token appended while the cache already holds that input: the "
          "cache stores positions twice; fix: step_input = next_id",
          regime="decoding with a cache"),
        M("generate_left_padded", "positions = (mask.long().cumsum(-1) - 1).clamp(min=0)",
          "positions = (mask.long().cumsum(0) - 1).clamp(min=0)",
          ("cumsum", "axis", "positions", "dim", "rows"),
          "counts the real tokens down the batch axis instead of along the sequence; fix: cumsum(-1)"),
    ],
    "07": [
        M("repeat_kv", "x = x[:, :, None].expand(B, n_kv, n_rep, T, hd)", "x = x.repeat(1, n_rep, 1, 1)",
          ("repeat", "interleav", "tile", "h // n_rep", "order", "group"),
          "tiles the kv heads with repeat: head h becomes kv head h % n_kv instead of h // n_rep; fix: expand on a new "
          "axis after the kv heads (repeat_interleave order)"),
        M("gqa_attention", "n_rep = q.shape[1] // k.shape[1]", "n_rep = k.shape[1] // q.shape[1]  # heads per group",
          ("n_rep", "ratio", "heads", "n_heads // n_kv", "inverted", "zero"),
          "divides the other way round: n_kv // n_heads is 0, so every kv head is repeated zero times; fix: "
          "q.shape[1] // k.shape[1]"),
        M("gqa_step", "mask = tinylm.causal_mask(T, start + T).to(x.device)",
          "mask = torch.ones(T, start + T, dtype=torch.bool, device=x.device).tril()",
          ("tril", "diagonal", "offset", "bottom-right", "cached", "start"),
          "builds the mask with tril's default diagonal: aligned top-left, so after a prefill the new queries miss "
          "the cached keys; fix: diagonal=start (causal_mask)",
          regime="a step with cached positions"),
        M("gqa_step", "repeat_kv(k_all, n_rep)", "repeat_kv(k_all, attn.n_kv_heads)",
          ("n_rep", "n_kv_heads", "repeat", "heads"),
          "repeats the keys n_kv_heads times instead of n_heads // n_kv_heads: equal only when n_kv_heads^2 = n_heads; "
          "fix: n_rep"),
        M("decode_bytes_per_token", "kv_cache = 2 * L * config.n_kv_heads * hd * context_len * size",
          "kv_cache = 2 * L * d * context_len * size  # K and V: d numbers a position",
          ("n_kv_heads", "gqa", "kv heads", "cache"),
          "sizes the cache by d_model a position: GQA caches n_kv_heads * head_dim; fix: n_kv_heads * hd",
          regime="n_kv_heads < n_heads"),
        M("decode_bytes_per_token", "weights = (matrices + L * per_block + d) * size",
          "weights = (matrices + L * per_block + d) * 2  # bfloat16",
          ("dtype", "itemsize", "bytes", "2 bytes", "size"),
          "hard-codes two bytes a number: any dtype but bfloat16 / float16 is counted wrong; fix: * dtype.itemsize",
          regime="a dtype other than a 16-bit one"),
    ],
    "08": [
        M("top_k_filter", "logits.topk(k, dim=-1).values[..., -1:]", "logits.topk(k, dim=-1)[1][..., -1:]",
          ("indices", "values", "topk", "index", "k-th"),
          "takes topk's second result, the indices, as the threshold: the k-th index is compared with logit values; "
          "fix: .values"),
        M("top_k_filter", "logits.topk(k, dim=-1).values[..., -1:]", "logits.topk(k, dim=-1).values[..., -1]",
          ("keepdim", "broadcast", "shape", "rows", "(..., 1)"),
          "drops the kept axis of the k-th value: (B,) broadcasts along the vocabulary, right for one row only; "
          "fix: [..., -1:]",
          regime="more than one row"),
        M("top_p_filter", "sorted_logits, order = logits.sort(dim=-1, descending=True)",
          "order, sorted_logits = logits.sort(dim=-1, descending=True)  # (indices, values)",
          ("values", "indices", "sort", "order", "long", "dtype"),
          "unpacks sort's result as (indices, values): it returns (values, indices), so the softmax is taken of the "
          "integer indices and raises; fix: sorted_logits, order = ..."),
        M("sample_next", "return logits.argmax(dim=-1)          # greedy", "return logits.argmax(dim=0)           # greedy",
          ("argmax", "axis", "dim", "batch", "temperature 0"),
          "takes the greedy argmax over the batch axis; fix: dim=-1",
          regime="temperature 0"),
        # https://github.com/snowflakedb/ArcticTraining/pull/265
        M("generate", "        with torch.no_grad():\n", "        with torch.inference_mode():\n",
          ("inference", "autograd", "backward", "training", "inference_mode", "no_grad"),
          "generates under inference_mode: the ids it returns are inference tensors, which autograd refuses to save "
          "(https://github.com/snowflakedb/ArcticTraining/pull/265); fix: torch.no_grad()"),
        M("generate", "idx = torch.cat((idx, next_id[:, None]), dim=1)", "idx = torch.cat((idx, next_id[:, None]), dim=0)",
          ("dim=1", "axis", "batch", "rows", "shape", "concaten"),
          "appends the new ids along the batch axis: new rows instead of a new column, which raises once the "
          "prompt is longer than one token; fix: dim=1"),
        M("generate", "        model.train(was_training)                          # give the caller back the mode it had\n",
          "        pass                                               # the model stays as generation left it\n",
          ("train mode", "restore", "mode", "eval", "was_training"),
          "never restores the caller's mode: a model handed over in train mode comes back in eval mode; fix: "
          "model.train(was_training) in the finally"),
    ],
    "09": [
        M("get_batch", "idx = starts[:, None] + torch.arange(seq_len + 1)",
          "idx = starts[None, :] + torch.arange(seq_len + 1)[:, None]",
          ("broadcast", "transpos", "shape", "(b, t + 1)", "rows", "axis"),
          "broadcasts the other way round: the windows are columns (T + 1, B), so x and y hold the wrong tokens; "
          "fix: starts[:, None] + arange(T + 1)"),
        M("lm_loss", "F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)",
          "F.cross_entropy(logits.view(-1, logits.shape[1]), targets.view(-1), ignore_index=-100)",
          ("(n, c)", "class", "flatten", "axis 1", "layout", "shape"),
          "reads the number of classes from logits.shape[1], which is T: the rows are cut wrong or the view raises; "
          "fix: flatten to (B*T, V) with shape[-1]"),
        # https://github.com/huggingface/transformers/pull/46898
        M("lm_loss", "F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)",
          "F.cross_entropy(logits[..., :-1, :].flatten(0, 1), targets[..., 1:].flatten(), ignore_index=-100)",
          ("shift", "twice", "next-next", "already shifted", "one position", "labels"),
          "shifts logits and targets inside the loss, as HF's causal-LM loss does, on targets get_batch has already "
          "shifted: the model learns the token after next (https://github.com/huggingface/transformers/pull/46898); "
          "fix: no shift here"),
        M("lm_loss", "targets.flatten(), ignore_index", "targets.flatten().float(), ignore_index",
          ("dtype", "long", "int64", "float", "class indices", "probabilit"),
          "converts the targets to float: cross_entropy then reads them as class probabilities of shape (N, C) and "
          "raises; fix: integer (long) targets"),
        # https://github.com/karpathy/nanoGPT/issues/443
        M("lr_schedule", "return max_lr * (step + 1) / warmup_steps", "return max_lr * min(step / warmup_steps, 1.0)",
          ("step 0", "zero", "warmup", "off by one", "first step", "step + 1"),
          "warms up from step / warmup_steps: the first step runs at lr 0 and does nothing "
          "(https://github.com/karpathy/nanoGPT/issues/443); fix: (step + 1) / warmup_steps"),
        # https://github.com/simchowitzlabpublic/nano-world-model/pull/22
        M("train_step", "    loss.backward()                              # d loss / d every parameter\n"
          "    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)  # global gradient norm <= grad_clip\n",
          "    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)  # keep the update small\n"
          "    loss.backward()                              # d loss / d every parameter\n",
          ("clip", "before backward", "after backward", "unclipped", "order", "no gradient"),
          "clips before backward: the gradients were just cleared, so the clip sees nothing and the step uses the "
          "unclipped gradient (https://github.com/simchowitzlabpublic/nano-world-model/pull/22); fix: backward, clip, step"),
        # https://github.com/karpathy/nanochat/pull/59
        M("train_step_accumulated", "(summed / n_tokens).backward()",
          "(summed / (y != -100).sum() / len(micro_batches)).backward()  # each micro-batch's mean, averaged",
          ("token", "micro-batch", "mean of means", "weight", "padding", "n_tokens"),
          "averages each micro-batch's own mean over the micro-batches: micro-batches with fewer scored tokens weigh "
          "more (https://github.com/karpathy/nanochat/pull/59); fix: divide every sum by the whole batch's N",
          regime="micro-batches with different numbers of scored tokens"),
        M("train_step_accumulated", "(summed / n_tokens).backward()", "summed.backward()  # the sum; the optimizer scales",
          ("n_tokens", "divid", "sum", "scale", "mean", "normalis"),
          "never divides: the accumulated gradient is that of the summed loss, N times the mean's; fix: "
          "(summed / n_tokens).backward()"),
        M("train_step_accumulated", "    optimizer.zero_grad(set_to_none=True)                             # once, before the first micro-batch\n"
          "    total = 0.0\n    for x, y in micro_batches:\n",
          "    total = 0.0\n    for x, y in micro_batches:\n"
          "        optimizer.zero_grad(set_to_none=True)                         # a clean slate per micro-batch\n",
          ("zero_grad", "accumul", "last micro-batch", "inside the loop", "only the last"),
          "clears the gradients inside the loop: only the last micro-batch's share reaches the step; fix: zero_grad "
          "once, before the loop"),
        M("train_step_costs", '"flops": 6 * matmul_weights * tokens', '"flops": 2 * matmul_weights * tokens',
          ("backward", "forward", "6", "2 *", "three times"),
          "counts the forward pass of the weight matmuls only (2 per weight and token): backward costs twice that "
          "again; fix: 6 * matmul_weights * tokens"),
    ],
    "10": [
        M("nll_sum_and_count", "count = int((targets != ignore_index).sum())", "count = int((targets >= 0).sum())  # padding is negative",
          ("ignore_index", "padding", "count", "negative", "-100"),
          "counts the non-negative targets, assuming padding is -100: with another ignore_index (0 here) the padded "
          "targets are counted; fix: targets != ignore_index",
          regime="an ignore_index that is not negative"),
        M("evaluate", "    model.eval()                                             # dropout off while measuring\n", "",
          ("eval", "dropout", "train mode", "mode"),
          "never switches to eval mode: a model in train mode is measured with dropout on; fix: model.eval() before "
          "the loop (and restore after)",
          regime="a model handed over in train mode"),
        M("evaluate", "total, count = total + s, count + n ", "total, count = total + s / n, count + 1 ",
          ("token-weighted", "per batch", "batches", "mean of means", "weight"),
          "combines the batches' mean losses with equal weight: batches of different sizes count the same; fix: "
          "sum the sums and the counts"),
        M("evaluate", '"bits_per_byte": loss / math.log(2) / bytes_per_token', '"bits_per_byte": loss * math.log(2) / bytes_per_token',
          ("ln 2", "bits", "divide", "multipl", "convert", "nats"),
          "multiplies the loss in nats by ln 2 instead of dividing by it: bits are nats / ln 2; fix: loss / math.log(2)"),
        M("bigram_nll", "counts.sum(dim=1, keepdim=True) + 256 * alpha", "counts.sum(dim=1, keepdim=True) + alpha",
          ("alpha", "smoothing", "256", "sum to 1", "denominator"),
          "adds alpha once to the row's total although each of the 256 entries got alpha: rows sum to more than 1; "
          "fix: + 256 * alpha"),
        M("bigram_nll", "-probs.log()[val[:-1], val[1:]].mean()", "-probs.log()[val[:-1], val[1:]].sum() / len(val)",
          ("pairs", "len(val) - 1", "count", "mean", "off by one"),
          "divides by the number of bytes instead of the number of pairs, one fewer; fix: .mean() over the pairs"),
    ],
}

SAME = [
    ("01", M("embed", "return weight[ids]", "return F.embedding(ids, weight)  # the lookup nn.Embedding does",
             (), "looks the rows up with F.embedding: the same rows and the same gradient")),
    ("01", M("tied_logits", "return x @ weight.T", 'return torch.einsum("btd,vd->btv", x, weight)  # one score per vocabulary row',
             (), "writes the head's product as an einsum")),
    ("02", M("rms_norm", "x32.pow(2).mean(dim=-1, keepdim=True)", "torch.square(x32).mean(dim=-1, keepdim=True)",
             (), "squares by multiplying x32 by itself")),
    ("02", M("layer_norm", "var = centred.pow(2).mean(dim=-1, keepdim=True)",
             "var = x.var(dim=-1, keepdim=True, unbiased=False)  # the biased estimate LayerNorm uses",
             (), "takes torch's biased variance directly")),
    ("03", M("causal_mask", "allowed.tril(diagonal=kv_len - q_len)",
             "(torch.arange(kv_len)[None, :] - torch.arange(q_len)[:, None]) <= kv_len - q_len",
             (), "compares key and query indices: key j is allowed while j - i <= kv_len - q_len")),
    ("03", M("causal_attention", 'scores = scores.masked_fill(~mask, float("-inf"))',
             'scores = torch.where(mask, scores, float("-inf"))  # keep the allowed scores',
             (), "masks with torch.where, its branches in the right order")),
    ("04", M("rope_cache", "angles = torch.cat((angles, angles), dim=-1)", "angles = angles.repeat(1, 2)  # (T, hd/2) twice, side by side",
             (), "tiles the angles with repeat along the features: the same (a, a) layout")),
    ("05", M("swiglu", "up = x @ w_up.T ", "up = F.linear(x, w_up) ",
             (), "applies the up projection with F.linear")),
    ("06", M("kv_cache_bytes", "dtype.itemsize", "torch.tensor([], dtype=dtype).element_size()",
             (), "reads the element size from an empty tensor of the dtype")),
    ("06", M("generate_greedy", "next_id = logits.argmax(dim=-1, keepdim=True)", "next_id = logits.argmax(dim=-1).unsqueeze(-1)",
             (), "adds the kept axis back with unsqueeze")),
    ("07", M("gqa_attention", "k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)",
             "k, v = k.repeat_interleave(n_rep, dim=1), v.repeat_interleave(n_rep, dim=1)",
             (), "repeats each kv head in place with repeat_interleave: head h reads kv head h // n_rep, as repeat_kv gives")),
    ("08", M("top_p_filter", "drop_sorted.scatter(-1, order, drop_sorted)", "drop_sorted.gather(-1, order.argsort(dim=-1))",
             (), "unsorts with gather at the inverse permutation (argsort of the order)")),
    ("08", M("generate", "next_id[:, None]", "next_id.unsqueeze(1)", (), "adds the new axis with unsqueeze(1)")),
    ("09", M("lm_loss", "F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)",
             "F.cross_entropy(logits.transpose(1, 2), targets, ignore_index=-100)  # (B, V, T): classes on axis 1",
             (), "puts the classes on axis 1 with a transpose, the (N, C, d1) form cross_entropy also takes")),
    ("10", M("bigram_nll", "return -probs.log()[val[:-1], val[1:]].mean().item()",
             "return -probs[val[:-1], val[1:]].log().mean().item()",
             (), "takes the log after picking the pairs")),
]
