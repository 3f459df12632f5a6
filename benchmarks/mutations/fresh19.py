"""A nineteenth held-out set of learner mistakes ("fresh19"), written without
reading the checks: neither autograder/checks/ (any file), tests/checks/,
autograder/diagnosis_*.py, benchmarks/bench_diagnostics.py's source, the
diagnosis sections of docs/benchmarks.md nor tests/course/test_docs.py were
opened, listed or grepped; bench_diagnostics.py, check cells and notebook
checks were never run, and no mistake was tried against a check. What was
read: the answer and setup cells of each notebook through
bench_diagnostics.notebook_cells (its first two results; of the third only
the cell names were printed, never its text; the setup cells name the check
functions they import), benchmarks/verify_unseen.py, heldout_duplicates.py,
the helpers of verify_heldout.py (namespace, attempt, _config, _reference,
_model_agreement, _attention_steps, and its function list),
unseen_probes.py (whole), unseen_probes_fresh18.py, the
_accumulated_matches helper of unseen_probes_later.py, tinylm/kv_cache.py
and the top of tinylm/sampling.py (found with a grep of
def names over tinylm/). Of the other sets only fresh18.py's
module docstring (printed with python), unseen.py (whole: the entry class
and its entries) and __init__.py were read. Greps: "fresh18" over the four
registration files named in the brief only, and each thread's URL over
benchmarks/mutations/. Public threads were found with a search of issue
threads; none of their addresses occurs in another set (`grep -rl URL
benchmarks/mutations/`, the URL only). Slips: none that touched a check.
Registration: benchmarks/mutations/__init__.py finds a set module by its
name (SETS is a lookup by module), so it needed no edit; verify_unseen.py
and tests/course/test_benchmarks.py were edited.

Sources: a learner working through the notebooks, and, for 11 mistakes,
bugs public projects shipped, reviewed or were asked about (the thread is
named in a comment above the entry and in its reason). The set's focus:
state and aliasing (about 20 mistakes: the caller's tensor changed in place
by max_norm, x32 *= where x.float() is x itself, sub_, q.mul_, neg_ on a
chunk view, +=, index assignment of -inf, /= temperature, masked_fill_ on
the targets; a Parameter replaced or copied instead of shared, a gain frozen
or handed over as .data; results kept between calls in a default dict or
list and on the attention module; the global RNG reseeded with
torch.manual_seed, a passed generator reseeded before each draw, a mode
restored by setting the flag only); sizes at the edges (about 14: a batch
of one losing its axis, q_len < kv_len, one head, one kv head or
n_kv_heads = n_heads, a cache filled exactly to max_seq_len, a prompt of
one token, k clamped by the rows, the window at the very end of the data,
warmup_steps = total_steps - 1); numerics (about 13: squares taken in
float16, the output cast to the gain's dtype, E[x^2] - E[x]^2 at an offset
of 1000, a softmax upcast not cast back, frequencies in bfloat16, finfo of
an integer dtype, exp overflowing at logits near 1000, log of a softmax that
underflowed, floor division in the warmup and in 8·d/3, a count summed in
bfloat16, bigram probabilities in float32); and about 20 plain mistakes of
layouts, projections, RoPE, caches, GQA, sampling and accounting. SAME lists
17 edits that compute what the solution computes another way (among them
scores masked in place on the function's own tensor, finfo.min as the
filler, q and k both rotated from position 0, which RoPE's relative scores
cannot tell apart); a check must pass each.

Counts: 66 mistakes (01: 6, 02: 7, 03: 7, 04: 7, 05: 6, 06: 6, 07: 4,
08: 8, 09: 10, 10: 5), 17 SAME edits, 11 public threads.
benchmarks/heldout_duplicates.py --set fresh19 compared the texts
mechanically and printed only matches: over three rounds 24 entries written
first (22 mistakes, 2 SAME) were character for character in another set and
were rewritten or replaced (one mistake, ids converted to int32 in
get_batch, was dropped and its place given to a SAME edit); three threads
stayed with the rewritten entries (brainchop-cli#56, vllm#14234,
transformers#24725). verify_unseen then showed one mistake no probe saw (the
clip moved into the accumulation loop) and a probe was added for it; the
new probes, in benchmarks/unseen_probes_fresh19.py, are listed there. Run:
`benchmarks/verify_unseen.py --set fresh19` proves each mistake a real bug
and each SAME edit harmless.

Each mistake is one substitution in one answer cell; `expect` holds words a
check that found it would likely say, `regime` the situation in which a
mistake that is right by default shows. Each reason says what the learner
did, which line is edited, and the fix."""
from __future__ import annotations

from .unseen import Unseen

M = Unseen

# words of causes, shared by several entries
CALLER_CHANGED = ("in place", "in-place", "caller", "modifies", "mutat", "overwrit", "changed the input", "alias")
HALF_PRECISION = ("float16", "bfloat16", "half", "precision", "dtype", "overflow", "upcast")
BATCH_OF_ONE = ("batch of one", "batch size 1", "batch of 1", "squeeze", "(1,", "one row", "single row")
KEPT_BETWEEN_CALLS = ("between calls", "cached", "cache", "stale", "earlier call", "previous call", "default argument",
                      "kept", "stored")

# the whole of rope_cache, and bigram_nll down to its counts: the two entries that keep results in a default argument
ROPE_BODY = ("def rope_cache(head_dim: int, max_seq_len: int, theta: float = 10000.0):\n"
             '    """-> cos, sin: each (max_seq_len, head_dim) float32."""\n'
             "    ### BEGIN SOLUTION\n"
             "    inv_freq = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)  # (hd/2,)\n"
             "    angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float32), inv_freq)      # (T, hd/2)\n"
             "    angles = torch.cat((angles, angles), dim=-1)  # (T, hd): feature i and i + hd/2 share an angle\n"
             "    return angles.cos(), angles.sin()")
BIGRAM_HEAD = ("def bigram_nll(train, val, alpha=0.5):\n"
               '    """Mean NLL in nats of val\'s bytes under add-alpha bigram counts of train."""\n'
               "    ### BEGIN SOLUTION\n"
               "    train, val = train.long(), val.long()\n"
               "    counts = torch.bincount(train[:-1] * 256 + train[1:], minlength=256 * 256).view(256, 256).double()  # [prev, next]")

MUTATIONS = [
    # ---------------------------------------------------------------- 01
    ("01", M("embed", "return weight[ids]  # advanced", "return weight[ids].squeeze(0)  # advanced",
             BATCH_OF_ONE + ("shape", "leading axis", "batch axis"),
             "drops a leading axis of size 1 after the lookup, meant for stray axes: ids of one row (1, T) come back "
             "(T, d); edited line: the return; fix: return weight[ids] as it is",
             regime="ids of a batch of one (1, T)")),
    ("01", M("embed", "return weight[ids]  # advanced", "return F.embedding(ids, weight, max_norm=1.0)  # advanced",
             CALLER_CHANGED + ("max_norm", "renormal", "table", "weight changed"),
             "looks the rows up with F.embedding(max_norm=1.0), which rescales the looked-up rows of the caller's table "
             "in place: the table is not the one handed in any more, and rows come back shrunk; edited line: the "
             "return; fix: weight[ids] (no max_norm)")),
    ("01", M("one_hot_embed", ".to(weight.dtype)  # (..., V)", ".to(torch.get_default_dtype())  # (..., V)",
             HALF_PRECISION + ("weight.dtype", "default dtype", "matmul", "bfloat16 table"),
             "casts the one-hot rows to the default dtype instead of the table's: a bfloat16 table meets float32 "
             "rows and the matmul raises; edited line: one_hot; fix: .to(weight.dtype)",
             regime="a table in another dtype than the default")),
    ("01", M("tied_logits", "return x @ weight.T  #", "return F.linear(x, weight.T)  #",
             ("transpose", "layout", "[v, d]", "f.linear", "shape", "weight.t"),
             "hands F.linear the transposed table: F.linear already multiplies by the transpose of its weight, so "
             "the shapes (.., d) and (V, d) no longer meet; edited line: the return; fix: F.linear(x, weight) or "
             "x @ weight.T")),
    ("01", M("tie_weights", "lm_head.weight = tok_emb.weight  #", "lm_head.weight = nn.Parameter(tok_emb.weight.data)  #",
             ("same parameter", "new parameter", "nn.parameter", "two parameters", "not tied", "separate", ".data",
              "is tok_emb.weight"),
             "wraps the embedding's storage in a new Parameter: the two layers share values today but are two "
             "Parameters with their own gradients, so training unties them; edited line: the assignment; fix: assign "
             "the Parameter object itself")),
    ("01", M("tie_weights", "lm_head.weight = tok_emb.weight  #", "tok_emb.weight = lm_head.weight  #",
             ("direction", "embedding's values", "lm_head's", "head's weight", "overwrit", "random", "other way"),
             "ties the other way round: the embedding takes the head's (freshly initialised) Parameter, so the "
             "embedding's values are lost; edited line: the assignment; fix: lm_head.weight = tok_emb.weight")),
    # ---------------------------------------------------------------- 02
    # https://github.com/neuroneural/brainchop-cli/pull/56 -- the square taken in float16 before the float32 sum
    ("02", M("rms_norm", "x32.pow(2).mean(dim=-1, keepdim=True)", "x.square().float().mean(dim=-1, keepdim=True)",
             HALF_PRECISION + ("inf", "square"),
             "squares in the input's precision and upcasts only the squares: float16 entries above 256 square to inf "
             "before the cast (as in https://github.com/neuroneural/brainchop-cli/pull/56); edited line: the inv_rms "
             "line; fix: square x32",
             regime="float16 input with entries above 256")),
    # https://github.com/skyzh/tiny-llm/pull/18 -- the normalised value must come back in the input's dtype
    ("02", M("rms_norm", "(x32 * inv_rms).to(x.dtype)", "(x32 * inv_rms).to(weight.dtype)",
             HALF_PRECISION + ("x.dtype", "weight.dtype", "gain's dtype", "rounded"),
             "casts the normalised values to the gain's dtype instead of the input's: a bfloat16 input under a "
             "float32 gain is never rounded to bfloat16, a float32 input under a half gain comes back half (the "
             "dtype question of https://github.com/skyzh/tiny-llm/pull/18); edited line: the return; fix: "
             ".to(x.dtype)",
             regime="an input and a gain of different dtypes")),
    ("02", M("rms_norm", "return weight * (x32 * inv_rms).to(x.dtype)",
             "x32 *= inv_rms  # normalised in place: x32 is a copy anyway\n    return weight * x32.to(x.dtype)",
             CALLER_CHANGED + ("x.float()", "same tensor", "copy"),
             "scales x32 in place, believing x.float() a copy: for a float32 input it is the caller's tensor itself, "
             "which comes back normalised (and autograd refuses the in-place write on a leaf); edited line: above "
             "the return; fix: x32 * inv_rms, a new tensor",
             regime="float32 input")),
    ("02", M("layer_norm", "centred = x - x.mean(dim=-1, keepdim=True)", "centred = x.sub_(x.mean(dim=-1, keepdim=True))",
             CALLER_CHANGED + ("sub_",),
             "centres with sub_, which subtracts the mean from the caller's tensor: the caller's activations come "
             "back centred; edited line: the centred line; fix: x - x.mean(...)")),
    ("02", M("layer_norm", "var = centred.pow(2).mean(dim=-1, keepdim=True)",
             "var = x.pow(2).mean(dim=-1, keepdim=True) - x.mean(dim=-1, keepdim=True).pow(2)",
             ("cancellation", "e[x²]", "e[x^2]", "large mean", "offset", "precision", "centred", "numerically",
              "mean far from 0"),
             "computes the variance as E[x^2] - E[x]^2: for features with a mean far from 0 (x + 1000) the two "
             "terms cancel in float32 and the variance is lost; edited line: the var line; fix: the mean square of "
             "the centred values",
             regime="features with a large common offset")),
    ("02", M("RMSNorm", "self.weight = nn.Parameter(torch.ones(dim))", "self.weight = nn.Parameter(torch.ones(dim)).requires_grad_(False)",
             ("requires_grad", "frozen", "not trained", "gradient", "grad is none", "trainable"),
             "creates the gain frozen (requires_grad_(False)), as if a fixed 1 were meant: it is a Parameter the "
             "optimizer can never move; edited line: the gain; fix: nn.Parameter(torch.ones(dim))")),
    ("02", M("RMSNorm", "return rms_norm(x, self.weight, self.eps)", "return rms_norm(x, self.weight.data, self.eps)",
             ("detach", "gradient", "no grad", "not trained", "graph", "grad is none"),
             "hands rms_norm the gain's .data, a tensor outside autograd: the forward is right but no gradient reaches the gain, which never "
             "learns; edited line: forward's return; fix: pass self.weight")),
    # ---------------------------------------------------------------- 03
    ("03", M("causal_mask", "allowed = torch.ones(q_len, kv_len, dtype=torch.bool)",
             "allowed = torch.ones(q_len, q_len, dtype=torch.bool)",
             ("kv_len", "shape", "(q_len, kv_len)", "square", "keys", "cached"),
             "builds a square (q_len, q_len) mask: with fewer queries than keys (a cache) the mask has too few "
             "columns; edited line: allowed; fix: torch.ones(q_len, kv_len)",
             regime="q_len < kv_len")),
    ("03", M("causal_attention", "weights = scores.softmax(dim=-1)  ", "weights = scores.float().softmax(dim=-1)  ",
             HALF_PRECISION + ("cast back", "v's dtype"),
             "upcasts the scores for the softmax and never casts the weights back: bfloat16 weights @ v meets a "
             "float32 matrix and raises; edited line: weights; fix: .softmax(dim=-1, dtype=torch.float32).to(q.dtype)",
             regime="bfloat16 or float16 inputs")),
    ("03", M("causal_attention", "scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])",
             "scores = q.mul_(1 / math.sqrt(q.shape[-1])) @ k.transpose(-2, -1)",
             CALLER_CHANGED + ("mul_", "scale", "queries"),
             "scales the queries in place to save a (Tq, Tk) division: the caller's q shrinks by sqrt(hd) at every "
             "call; edited line: scores; fix: (q @ k.transpose(-2, -1)) / math.sqrt(hd)")),
    ("03", M("split_heads", "x = x.view(B, T, n_heads, d // n_heads)  # (B, T, H, hd): head h owns features h*hd .. (h+1)*hd - 1\n"
             "    return x.transpose(1, 2)  ",
             "return x.view(B, n_heads, T, d // n_heads)  ",
             ("transpose", "layout", "positions", "heads and positions", "view", "mixes", "order of the axes"),
             "views (B, T, d) directly as (B, H, T, hd): right only for one head or one position, otherwise each "
             "'head' holds features of several positions; edited line: split_heads' body; fix: view (B, T, H, hd), "
             "then transpose(1, 2)",
             regime="more than one head and more than one position")),
    ("03", M("split_heads", "return y.transpose(1, 2).reshape(B, T, H * hd)", "return y.permute(0, 2, 1, 3).view(B, T, -1)",
             ("contiguous", "view", "reshape", "stride", "permute"),
             "merges with .view after the permute: the permuted tensor is not contiguous and view raises; edited "
             "line: merge_heads' return; fix: reshape")),
    ("03", M("self_attention", "(split_heads(F.linear(x, w), n_heads) for w in (w_q, w_k, w_v))",
             "(split_heads(x @ w, n_heads) for w in (w_q, w_k, w_v))",
             ("transpose", "layout", "[d_out, d_in]", "w.t", "f.linear", "weights stored"),
             "projects with x @ w: the weights are stored [d_out, d_in] as nn.Linear's, so this multiplies by their "
             "transposes; edited line: the q, k, v line; fix: F.linear(x, w) (x @ w.T)")),
    ("03", M("attention_flops", "per_head = 2 * T * T * head_dim  ", "per_head = T * (T + 1) * head_dim  ",
             ("causal", "half", "masked", "t * t", "full", "flopcountermode", "triangle"),
             "counts only the causal triangle: the matmul computes every (T, T) score, masked ones included, at 2 "
             "FLOPs each; edited line: per_head; fix: 2 * T * T * head_dim")),
    # ---------------------------------------------------------------- 04
    # https://github.com/rsennrich/subword-nmt/issues/17 -- a mutable default argument kept as a cache
    ("04", M("rope_cache", ROPE_BODY, ROPE_BODY.replace("theta: float = 10000.0):", "theta: float = 10000.0, _built={}):")
             .replace("    inv_freq", "    key = (head_dim, max_seq_len)\n    if key not in _built:  # tables are expensive: build each size once\n"
                      "        inv_freq").replace("\n    angles", "\n        angles")
             .replace("    return angles.cos(), angles.sin()", "        _built[key] = angles.cos(), angles.sin()\n    return _built[key]"),
             KEPT_BETWEEN_CALLS + ("theta", "rope_theta", "base"),
             "keeps built tables in a mutable default dict keyed on (head_dim, max_seq_len) only: after one call "
             "with the default theta, a call with theta=500 gets the old tables back (the default-argument trap "
             "of https://github.com/rsennrich/subword-nmt/issues/17); edited line: the signature and a cache "
             "lookup above the body; fix: key on theta too, or no cache",
             regime="a second call with another theta")),
    ("04", M("rope_cache", "angles = torch.cat((angles, angles), dim=-1)", "angles = torch.stack((angles, angles), dim=-1).flatten(-2)",
             ("interleav", "halves", "pairs", "layout", "rotate_half", "i + hd/2", "adjacent"),
             "duplicates each angle side by side (a0, a0, a1, a1, ...), the interleaved layout: rotate_half pairs "
             "feature i with i + hd/2, which now carry different angles; edited line: the cat; fix: "
             "cat((angles, angles), dim=-1)")),
    ("04", M("rope_cache", "torch.arange(0, head_dim, 2, dtype=torch.float32)", "torch.arange(0, head_dim, 2, dtype=torch.bfloat16)",
             HALF_PRECISION + ("frequenc", "inv_freq", "rounded", "angles"),
             "builds the frequencies in bfloat16: theta ** (-2i/d) keeps 3 significant digits, and every angle "
             "p · inv_freq inherits the error, growing with the position; edited line: inv_freq; fix: float32")),
    ("04", M("apply_rope", "x1, x2 = x.chunk(2, dim=-1)\n    return torch.cat((-x2, x1), dim=-1)",
             "x1, x2 = x.chunk(2, dim=-1)\n    return torch.cat((x2.neg_(), x1), dim=-1)",
             CALLER_CHANGED + ("neg_", "view", "chunk"),
             "negates the second half with neg_: chunk returns views, so the caller's x has its second half "
             "negated; edited line: rotate_half's return; fix: -x2")),
    ("04", M("rotary_attention", "k = apply_rope(k, cos, sin, start_pos)", "k = apply_rope(k, sin, cos, start_pos)",
             ("cos and sin", "sin and cos", "swapped", "argument order", "keys", "tables"),
             "hands apply_rope the tables in the order (sin, cos) for the keys: the keys are not rotated but mixed "
             "with sin and cos exchanged, so q·k no longer depends on the relative position alone; edited line: k; "
             "fix: apply_rope(k, cos, sin, start_pos)")),
    ("04", M("interleaved_to_half", "return pairs.transpose(1, 2).reshape(rows, d_in)", "return pairs.transpose(0, 2).reshape(rows, d_in)",
             ("heads", "transpose(1, 2)", "axis", "one head", "per head", "evens", "odds", "mixes heads"),
             "transposes the pair axis with the heads axis instead of with the pair index: for one head that is the "
             "same reordering, for several the heads' rows are interleaved with each other; edited line: the "
             "return; fix: transpose(1, 2)",
             regime="more than one head")),
    ("04", M("interleaved_to_half", "return q_proj, k_proj, wv, wo  ",
             "return q_proj, k_proj, interleaved_to_half(wv, n_kv_heads), wo  ",
             ("values", "v_proj", "never rotated", "wv", "o_proj", "unchanged"),
             "permutes the value rows too: values are never rotated, and o_proj's columns still expect the old "
             "order; edited line: the return; fix: return wv as it is")),
    # ---------------------------------------------------------------- 05
    ("05", M("swiglu", "up = x @ w_up.T  ", "up = F.silu(x @ w_up.T)  ",
             ("silu", "up", "linear", "both", "gate only", "activation"),
             "applies SiLU to the up projection as well: SwiGLU's up branch is linear, the nonlinearity is on the "
             "gate only; edited line: up; fix: x @ w_up.T")),
    ("05", M("swiglu_hidden", "math.ceil(8 * d_model / 3 / multiple)", "math.ceil(8 * d_model // 3 / multiple)",
             ("integer division", "floor", "//", "8/3", "rounded down", "fraction"),
             "floors 8·d/3 before rounding up: with a multiple of 1 or 2 the fraction is lost (8·64/3 = 170.67 "
             "gives 170, not 171); edited line: the return; fix: 8 * d_model / 3",
             regime="multiple 1 or 2, 8·d/3 not whole")),
    ("05", M("pre_norm_block", "x = x + attn(attn_norm(x))  #", "x += attn(attn_norm(x))  #",
             CALLER_CHANGED + ("+=",),
             "adds the attention branch with +=: the caller's residual stream tensor is changed in place; edited "
             "line: the first residual; fix: x = x + ...")),
    ("05", M("Transformer", "self.k_proj = nn.Linear(config.d_model, config.n_kv_heads * config.head_dim, bias=False)",
             "self.k_proj = nn.Linear(config.d_model, config.n_kv_heads * (config.d_model // config.n_heads), bias=False)",
             ("head_dim", "d_model // n_heads", "k_proj", "config.head_dim", "shape", "out_features"),
             "derives the key head size as d_model // n_heads instead of reading config.head_dim: right only while "
             "they agree; edited line: k_proj; fix: n_kv_heads * head_dim",
             regime="head_dim other than d_model / n_heads")),
    ("05", M("Transformer", "self.lm_head.weight = self.tok_emb.weight  #", "self.lm_head.weight = nn.Parameter(self.tok_emb.weight.clone())  #",
             ("tied", "same parameter", "copy", "clone", "two parameters", "untied", "parameters"),
             "ties by copying: the head starts with the embedding's values but is a Parameter of its own, so the "
             "model has one matrix too many and training unties them; edited line: the tie; fix: assign the "
             "Parameter itself")),
    ("05", M("param_counts", '"mlp": L * 3 * d * config.d_ff,', '"mlp": L * 3 * d * tinylm.default_d_ff(d),',
             ("d_ff", "config.d_ff", "8/3", "default", "mlp", "hidden size"),
             "recomputes the MLP width by the 8/3 rule instead of reading config.d_ff: a config with its own d_ff "
             "is miscounted; edited line: mlp; fix: config.d_ff",
             regime="a config whose d_ff is not the 8/3 default")),
    # ---------------------------------------------------------------- 06
    ("06", M("kv_cache_bytes", "return per_position * seq_len * batch_size * dtype.itemsize",
             "return per_position * seq_len * batch_size * (torch.finfo(dtype).bits // 8)",
             ("int8", "integer", "finfo", "iinfo", "itemsize", "dtype", "element size"),
             "takes the element size from torch.finfo, which only knows floating dtypes: an int8 cache raises; "
             "edited line: the return; fix: dtype.itemsize",
             regime="an integer dtype (int8 cache)")),
    ("06", M("cache_update", "k_all = torch.cat((past_k, k), dim=2)", "k_all = torch.cat((past_k, k), dim=-3)",
             ("axis", "dim", "heads", "positions", "sequence axis", "axis 2", "shape"),
             "appends the keys on axis -3, the heads: the new positions become extra heads; edited line: k_all; fix: "
             "dim=2 (positions)")),
    ("06", M("attention_step", "    mask = tinylm.causal_mask(T, start + T).to(x.device)  # (T, start + T), bottom-right aligned\n",
             '    if not hasattr(attn, "step_mask"):                  # built once per layer\n'
             "        attn.step_mask = tinylm.causal_mask(T, start + T).to(x.device)\n"
             "    mask = attn.step_mask\n",
             KEPT_BETWEEN_CALLS + ("mask", "shape", "step", "start + t", "first call"),
             "stores the mask on the attention module at the first call: every later step reuses the prefill's "
             "(T, T) mask, whatever its own T and start; edited line: mask; fix: build it at every call",
             regime="a step after the first call on the same module")),
    ("06", M("attention_step", "start = past_k.shape[2]  ", "start = past_k.shape[-1]  ",
             ("axis", "head_dim", "positions", "start", "shape[2]", "cached positions"),
             "reads the cached length from the last axis, head_dim: the positions and the mask start hd too far; "
             "edited line: start; fix: past_k.shape[2]")),
    # https://github.com/pytorch/executorch/pull/2688 -- the loop runs the model once more than it needs
    ("06", M("generate_greedy", "        for _ in range(max_new_tokens):\n"
             "            logits = model(step_input, cache=cache)[:, -1]      # (B, V): only the last position predicts\n"
             "            next_id = logits.argmax(dim=-1, keepdim=True)       # (B, 1)\n"
             "            idx = torch.cat((idx, next_id), dim=1)              # (B, T + 1)\n"
             "            step_input = next_id                                # decode: one new token per step\n",
             "        logits = model(step_input, cache=cache)[:, -1]          # prefill\n"
             "        for _ in range(max_new_tokens):\n"
             "            next_id = logits.argmax(dim=-1, keepdim=True)       # (B, 1)\n"
             "            idx = torch.cat((idx, next_id), dim=1)              # (B, T + 1)\n"
             "            logits = model(next_id, cache=cache)[:, -1]         # ready for the next step\n",
             ("max_seq_len", "one more", "last token", "cache is full", "extra forward", "overflow", "room"),
             "feeds every new token back at once, the last one too: one forward more than needed, which overflows a "
             "cache filled exactly to max_seq_len (as in https://github.com/pytorch/executorch/pull/2688); edited "
             "lines: the loop; fix: feed a token only when another is to be generated",
             regime="prompt + new tokens = max_seq_len + 1")),
    ("06", M("generate_greedy", "logits = model(step_input, cache=cache)[:, -1]  ", "logits = model(step_input, cache=cache).squeeze(1)  ",
             ("last position", "[:, -1]", "prefill", "prompt of one token", "squeeze", "shape"),
             "drops the position axis with squeeze(1), which only a one-position input has: right for one-token "
             "prompts and decode steps, wrong after a longer prefill; edited line: logits; fix: [:, -1]",
             regime="a prompt longer than one token")),
    # ---------------------------------------------------------------- 07
    ("07", M("repeat_kv", "x = x[:, :, None].expand(B, n_kv, n_rep, T, hd)  # (B, n_kv, n_rep, T, hd): a view, copies of each kv head side by side\n"
             "    return x.reshape(B, n_kv * n_rep, T, hd)",
             "return torch.cat([x] * n_rep, dim=1)",
             ("tile", "interleav", "order", "h // n_rep", "repeat_interleave", "groups", "kv head"),
             "tiles the kv heads (h0, h1, h0, h1) instead of repeating each (h0, h0, h1, h1): query head h meets kv "
             "head h % n_kv, not h // n_rep; right only with one kv head; edited lines: repeat_kv's body; fix: "
             "expand a new axis after the kv heads, then reshape",
             regime="more than one kv head")),
    ("07", M("gqa_attention", "k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)", "k, v = repeat_kv(v, n_rep), repeat_kv(k, n_rep)",
             ("swapped", "keys and values", "values", "k and v", "order"),
             "swaps keys and values in the unpacking: the scores use the values; edited line: the repeat line; fix: "
             "k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)")),
    ("07", M("gqa_step", "repeat_kv(k_all, n_rep), repeat_kv(v_all, n_rep), attn_mask=mask)",
             "repeat_kv(k_all, attn.n_kv_heads), repeat_kv(v_all, attn.n_kv_heads), attn_mask=mask)",
             ("n_rep", "n_kv_heads", "repeat", "heads", "mha", "n_heads // n_kv_heads"),
             "repeats the kv heads n_kv_heads times instead of n_heads // n_kv_heads: equal for 2 kv heads of 4, wrong "
             "for MHA (4 kv heads repeated to 16) or MQA; edited line: the attention call; fix: n_rep",
             regime="n_kv_heads other than sqrt(n_heads), e.g. MHA")),
    ("07", M("decode_bytes_per_token", "per_block = attention + 3 * d * config.d_ff + 2 * d  ",
             "per_block = attention + 3 * d * config.d_ff + d  ",
             ("norm", "two norms", "attn_norm", "mlp_norm", "gain", "per block"),
             "counts one norm gain per block: each block has two, attn_norm and mlp_norm; edited line: per_block; "
             "fix: + 2 * d")),
    # ---------------------------------------------------------------- 08
    # https://github.com/vllm-project/vllm/pull/14234 -- k clamped to the vocabulary
    ("08", M("top_k_filter", "k = min(k, logits.shape[-1])", "k = min(k, len(logits))",
             ("vocabulary", "shape[-1]", "rows", "batch", "k >= vocab", "clamp", "wrong axis"),
             "clamps k by len(logits), the number of rows, instead of the vocabulary (the clamp of "
             "https://github.com/vllm-project/vllm/pull/14234 on the wrong axis): 3 rows and k = 4 keep 3 tokens; "
             "edited line: the clamp; fix: logits.shape[-1]",
             regime="k larger than the number of rows")),
    ("08", M("top_k_filter", "kth = logits.topk(k, dim=-1).values[..., -1:]", "kth = logits.topk(k, dim=-1).values.amin(dim=-1)",
             BATCH_OF_ONE + ("keepdim", "broadcast", "(b, 1)", "-1:"),
             "takes the k-th value as the minimum of the top k without keepdim: (B,) broadcasts against (B, V) along the vocabulary, "
             "right only for a single row; edited line: kth; fix: amin(dim=-1, keepdim=True) or [..., -1:]",
             regime="more than one row")),
    ("08", M("top_p_filter", 'return logits.masked_fill(drop, float("-inf"))',
             'logits[drop] = float("-inf")  # drop the tail\n    return logits',
             CALLER_CHANGED + ("masked_fill", "-inf"),
             "writes the -inf into the caller's logits by index assignment: the logits handed in come back "
             "filtered; edited line: the return; fix: logits.masked_fill(drop, -inf), a new tensor")),
    # https://github.com/vllm-project/vllm/pull/15063 -- an in-place temperature has side effects on the caller
    ("08", M("sample_next", "logits = logits / temperature  ", "logits /= temperature  ",
             CALLER_CHANGED + ("temperature", "/="),
             "divides by the temperature in place: the caller's logits come back divided (the side effect a vLLM "
             "review held back in https://github.com/vllm-project/vllm/pull/15063); edited line: the temperature; "
             "fix: logits = logits / temperature",
             regime="temperature other than 1")),
    # https://github.com/mrdbourke/pytorch-deep-learning/issues/245 -- reseeding before every draw repeats the draw
    ("08", M("sample_next", "torch.multinomial(probs, num_samples=1, generator=generator)",
             "torch.multinomial(probs, num_samples=1,\n"
             "                             generator=generator.manual_seed(generator.initial_seed()) if generator else None)",
             ("reseed", "manual_seed", "same draw", "generator", "stream", "initial_seed", "repeat"),
             "reseeds the caller's generator with its initial seed before each draw, for reproducibility: every "
             "call repeats the first draw (the seeding confusion of "
             "https://github.com/mrdbourke/pytorch-deep-learning/issues/245); edited line: the draw; fix: pass the "
             "generator as it is")),
    ("08", M("sample_next", "probs = logits.softmax(dim=-1)  ", "probs = logits.exp() / logits.exp().sum(dim=-1, keepdim=True)  ",
             ("overflow", "exp", "large logits", "nan", "inf", "max", "stable", "softmax"),
             "writes the softmax out without subtracting the maximum: logits near 1000 overflow exp to inf and the "
             "probabilities to NaN; edited line: probs; fix: logits.softmax(dim=-1)",
             regime="logits above about 88")),
    # https://github.com/NVIDIA/tacotron2/pull/303 -- squeeze() also removes a batch axis of size 1
    ("08", M("generate", "logits = model(idx)[:, -1]  ", "logits = model(idx)[:, -1:].squeeze()  ",
             BATCH_OF_ONE + ("0-d", "(v,)"),
             "takes the last position with a kept axis and squeezes every axis of size 1: a batch of one loses its "
             "batch axis too (as in https://github.com/NVIDIA/tacotron2/pull/303); edited line: logits; fix: "
             "[:, -1] or squeeze(1)",
             regime="a batch of one")),
    ("08", M("generate", "model.train(was_training)  ", "model.training = was_training  ",
             ("submodule", "train(", "children", "training flag", "mode", "dropout", "eval"),
             "restores the mode by setting the flag: only the top module's flag changes, its submodules stay in eval "
             "mode; edited line: the finally clause; fix: model.train(was_training)",
             regime="a model handed in in train mode")),
    # ---------------------------------------------------------------- 09
    # https://github.com/huggingface/diffusers/issues/175 -- torch.manual_seed sets the global seed
    ("09", M("get_batch", "(batch_size,), generator=generator)",
             "(batch_size,),\n                           generator=generator if generator is not None else torch.manual_seed(0))",
             ("global", "manual_seed", "same batch", "every call", "seed", "generator", "random state"),
             "falls back on torch.manual_seed(0) when no generator is passed: the global RNG is reseeded at every "
             "call, so every unseeded batch is the same (the side effect of "
             "https://github.com/huggingface/diffusers/issues/175); edited line: starts; fix: generator=generator",
             regime="calls without a generator")),
    ("09", M("get_batch", "torch.randint(len(data) - seq_len, (batch_size,)", "torch.randint(len(data) - seq_len + 1, (batch_size,)",
             ("last window", "past the end", "out of range", "index", "off by one", "off-by-one", "len(data) - seq_len"),
             "allows a start one past the last valid one: that window needs data[len(data)], and the indexing raises "
             "when it is drawn; edited line: starts; fix: randint(len(data) - seq_len)",
             regime="the start len(data) - seq_len drawn")),
    ("09", M("lm_loss", "return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)",
             "return F.nll_loss(logits.softmax(dim=-1).log().flatten(0, 1), targets.flatten(), ignore_index=-100)",
             ("log_softmax", "log of 0", "underflow", "-inf", "large logits", "stable", "softmax then log"),
             "takes the log of the softmax: at large logits the softmax underflows to 0 and its log to -inf, where "
             "log_softmax stays exact; edited line: the return; fix: F.cross_entropy",
             regime="logits spread over more than about 100")),
    ("09", M("lm_loss", "targets.flatten(), ignore_index=-100)", "targets.view(-1), ignore_index=-100)",
             ("contiguous", "view", "reshape", "flatten", "sliced", "stride"),
             "flattens the targets with view: sliced targets (targets[:, 1:]) are not contiguous and view raises; "
             "edited line: the return; fix: flatten() or reshape(-1)",
             regime="non-contiguous targets")),
    # https://github.com/facebookresearch/maskrcnn-benchmark/issues/335 -- a floor division in the warmup
    ("09", M("lr_schedule", "return max_lr * (step + 1) / warmup_steps", "return max_lr * ((step + 1) // warmup_steps)",
             ("integer division", "floor", "//", "warmup", "zero", "0 during warmup"),
             "floors the warmup fraction: the rate is 0 for every warmup step but the last (the floor division of "
             "https://github.com/facebookresearch/maskrcnn-benchmark/issues/335); edited line: the warmup return; "
             "fix: max_lr * (step + 1) / warmup_steps")),
    ("09", M("lr_schedule", "max(1, total_steps - 1 - warmup_steps)", "(total_steps - warmup_steps - 1)",
             ("zero", "division", "total_steps - 1", "warmup", "decay length", "max(1"),
             "divides by the decay length unguarded: with warmup_steps = total_steps - 1 it is 0 and the first step "
             "after warmup raises ZeroDivisionError; edited line: progress; fix: max(1, ...)",
             regime="warmup_steps = total_steps - 1")),
    ("09", M("train_step", "torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)",
             "[torch.nn.utils.clip_grad_norm_(p, grad_clip) for p in model.parameters()]",
             ("global", "per parameter", "each parameter", "clip", "norm", "total norm"),
             "clips each parameter's gradient on its own: every tensor is limited to grad_clip, so the global norm "
             "can reach grad_clip · sqrt(number of tensors); edited line: the clip; fix: one call on all parameters")),
    # https://github.com/huggingface/transformers/issues/24725 -- micro-batch means averaged instead of token sums
    ("09", M("train_step_accumulated", "(summed / n_tokens).backward()",
             "(summed / (y != -100).sum() / len(micro_batches)).backward()",
             ("token", "micro-batch", "mean of means", "weight", "n_tokens", "whole batch", "normalis", "normaliz"),
             "averages the micro-batches' own means: micro-batches of different token counts get equal weight, so "
             "the gradient is not the whole batch's (https://github.com/huggingface/transformers/issues/24725); "
             "edited line: the backward; fix: summed / n_tokens",
             regime="micro-batches of different sizes or padding")),
    ("09", M("train_step_accumulated", "        (summed / n_tokens).backward()                                # .grad += this micro-batch's share\n"
             "        total += summed.item()\n"
             "    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)    # once: the whole batch's gradient\n",
             "        (summed / n_tokens).backward()                                # .grad += this micro-batch's share\n"
             "        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)  # keep every share bounded\n"
             "        total += summed.item()\n",
             ("clip", "inside the loop", "partial", "accumulated", "once", "each micro-batch", "whole batch"),
             "clips inside the accumulation loop: the running partial gradient is clipped after each micro-batch, "
             "not the whole batch's gradient once; edited lines: the clip moved into the loop; fix: clip once, "
             "after the loop",
             regime="a gradient norm above grad_clip")),
    ("09", M("train_step_costs", "attention_matmuls = 4 * seq_len * config.n_heads * hd * L * tokens",
             "attention_matmuls = 4 * seq_len * config.n_kv_heads * hd * L * tokens",
             ("n_heads", "n_kv_heads", "query heads", "gqa", "every query head", "repeat"),
             "counts the attention matmuls for the kv heads: with GQA every query head still computes its own "
             "scores and mix; edited line: attention_matmuls; fix: config.n_heads",
             regime="GQA (n_kv_heads < n_heads)")),
    # ---------------------------------------------------------------- 10
    ("10", M("nll_sum_and_count", "count = int((targets != ignore_index).sum())",
             "count = int((targets != ignore_index).sum(dtype=logits.dtype))",
             HALF_PRECISION + ("count", "256", "rounded", "low precision", "sum"),
             "counts the scored targets in the logits' dtype: in bfloat16 a sum of 257 ones rounds to 256; edited "
             "line: count; fix: count in integers",
             regime="bfloat16 logits and more than 256 targets")),
    ("10", M("nll_sum_and_count", "    nll = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=ignore_index,\n",
             "    targets.masked_fill_(targets == ignore_index, -100)       # cross_entropy's own marker\n"
             "    nll = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=-100,\n",
             CALLER_CHANGED + ("ignore_index", "-100", "padding", "count"),
             "rewrites the caller's padding marker to -100 in place: the caller's targets change, and the count "
             "below, still looking for ignore_index, now counts the padding; edited line: above nll; fix: pass "
             "ignore_index to cross_entropy",
             regime="an ignore_index other than -100")),
    ("10", M("evaluate", "total, count = total + s, count + n  ", "total, count = total + s, count + y.numel()  ",
             ("padding", "count", "scored", "-100", "token", "numel", "ignore"),
             "counts every target position, padding included: the summed loss covers only the scored targets, so "
             "the mean is too low with padding; edited line: the accumulation; fix: add n",
             regime="batches with -100 padding")),
    ("10", M("bigram_nll", BIGRAM_HEAD, BIGRAM_HEAD.replace("alpha=0.5):", "alpha=0.5, _counts=[]):")
             .replace("    counts = torch.bincount", "    if not _counts:                              # counting is the slow part: once\n"
                      "        _counts.append(torch.bincount").replace(".double()  # [prev, next]", ".double())\n    counts = _counts[0]"),
             KEPT_BETWEEN_CALLS + ("train", "counts"),
             "keeps the first call's counts in a mutable default list: every later call scores its val under the "
             "first training text's counts; edited line: the signature and a lookup above counts; fix: count train "
             "at every call",
             regime="a second call with another training text")),
    ("10", M("bigram_nll", ".view(256, 256).double()", ".view(256, 256).float()",
             ("float64", "double", "precision", "float32", "low precision", "rounding"),
             "keeps the counts and probabilities in float32: the mean NLL is off in the seventh digit; edited line: "
             "counts; fix: .double()")),
]

SAME = [
    ("01", M("tied_logits", "return x @ weight.T  #", 'return torch.einsum("btd,vd->btv", x, weight)  #', (),
             "the head as an einsum over d: the same (B, T, V) logits")),
    ("02", M("rms_norm", "x32.pow(2).mean(dim=-1, keepdim=True)", "x32.square().mean(dim=-1, keepdim=True)", (),
             "square() for pow(2), on the float32 copy")),
    ("03", M("causal_attention", 'scores = scores.masked_fill(~mask, float("-inf"))',
             'scores.masked_fill_(~mask, float("-inf"))', (),
             "masks in place: scores is this function's own fresh tensor, nobody else holds it")),
    ("03", M("causal_attention", 'scores.masked_fill(~mask, float("-inf"))', "scores.masked_fill(~mask, torch.finfo(scores.dtype).min)", (),
             "the dtype's most negative finite value as filler: exp underflows it to exactly 0 while each row keeps "
             "an allowed key")),
    ("04", M("rotary_attention", "q = apply_rope(q, cos, sin, start_pos)  # position enters the scores only\n"
             "    k = apply_rope(k, cos, sin, start_pos)",
             "q = apply_rope(q, cos, sin)  # one shift of both q and k leaves every q·k as it is\n"
             "    k = apply_rope(k, cos, sin)", (),
             "rotates q and k from position 0: RoPE scores depend on the difference of positions only, so a common "
             "start_pos changes no score")),
    ("04", M("interleaved_to_half", "k_proj = interleaved_to_half(wk, n_kv_heads)",
             "k_proj = interleaved_to_half(wk, wk.shape[0] // (wq.shape[0] // n_heads))", (),
             "the number of kv heads read from the shapes: k rows / head_dim")),
    ("05", M("swiglu", "gate = F.silu(x @ w_gate.T)  #", "gate = x @ w_gate.T\n    gate = gate * torch.sigmoid(gate)  #", (),
             "SiLU written out as a · sigmoid(a)")),
    ("05", M("swiglu_hidden", "return multiple * math.ceil(8 * d_model / 3 / multiple)",
             "return multiple * -(-(8 * d_model) // (3 * multiple))", (),
             "the ceiling as a negated floor division, exact in integers")),
    ("05", M("Transformer", "self.k_proj(x).view(B, T, self.n_kv_heads, self.head_dim)", "self.k_proj(x).view(B, T, -1, self.head_dim)", (),
             "lets view infer the number of kv heads")),
    ("06", M("kv_cache_bytes", "dtype.itemsize",
             "((torch.finfo(dtype) if dtype.is_floating_point else torch.iinfo(dtype)).bits // 8)", (),
             "the element size from finfo or iinfo, whichever knows the dtype")),
    ("06", M("generate_left_padded", "mask = torch.cat((mask, mask.new_ones(B, 1)), dim=1)",
             "mask = torch.cat((mask, mask[:, -1:]), dim=1)", (),
             "appends a copy of the last column: with padding on the left the last token of every row is real")),
    ("07", M("decode_bytes_per_token", "(1 if config.tie_embeddings else 2)", "(2 - bool(config.tie_embeddings))", (),
             "one or two vocabulary matrices as 2 - tied")),
    ("08", M("sample_next", "if top_k is not None:", "if top_k:", (),
             "a truthiness test: top_k is at least 1 whenever it is given")),
    ("09", M("get_batch", "window = data[idx].long()", "window = data[idx].to(starts.dtype)", (),
             "casts to the dtype of the starts, which randint makes int64")),
    ("09", M("get_batch", "window = data[idx].long()", "window = data.long()[idx]", (),
             "converts the data before the lookup: the same int64 windows")),
    ("09", M("train_step", "return loss.item()  ", "return float(loss)  ", (),
             "float() of a one-element tensor, as .item()")),
    ("10", M("evaluate", '"perplexity": math.exp(loss)', '"perplexity": math.e ** loss', (),
             "e to the loss, written as a power")),
]
