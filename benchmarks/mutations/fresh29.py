"""A twenty-ninth held-out set of learner mistakes ("fresh29"), written without reading the checks: neither
autograder/checks/ (any file), tests/checks/, autograder/diagnosis_*.py, benchmarks/bench_diagnostics.py's source, the
diagnosis sections of docs/benchmarks.md nor tests/course/test_docs.py were opened, listed or grepped;
bench_diagnostics.py, check cells and notebook checks were never run, and no mistake or SAME edit was tried against a
check. No git log or git show was run.

What was opened or run. The brief, HELPER_RULES.md and mkwt.sh (cat), then mkwt.sh fresh29 (run). `ls` of /work/wt/,
the root, benchmarks/ and benchmarks/mutations/ (names only); `wc -l` of unseen.py, __init__.py, verify_unseen.py,
verify_heldout.py, heldout_duplicates.py and the unseen_probes*.py files. Of the other sets only fresh28.py's module
docstring, printed with python. Whole: verify_unseen.py, verify_heldout.py, heldout_duplicates.py, mutations/__init__.py,
unseen_probes_fresh27.py and unseen_probes_fresh28.py; lines 1-120 of unseen.py (its class and first entries, for the
format), lines 1-140 of unseen_probes.py, the def and return lines of unseen_probes_fresh26.py, a grep of
unseen_probes.py for kv_cache_bytes. Through bench_diagnostics.notebook_cells: the answer and setup cells of all ten
notebooks (written to a scratch folder; the answer cells read whole, of the setup cells only the import lines of
notebooks 04, 05, 06 and 08, grepped) and the keys of the third result (the check names). The probes' keys and
values, printed by running verify_unseen's probes_of("fresh28", ...) on the solution (no mistake, no check). A grep of
tinylm/*.py for its def and class lines, and rms_norm in tinylm/norm.py. A grep for "fresh28" over the four
registration files (mutations/__init__.py has no list: a set module is found by its name), lines 160-182 of
tests/course/test_benchmarks.py. Runs: verify_unseen.py --set fresh29 (3 runs), heldout_duplicates.py --set fresh29
(12 runs, and once more in the test), the two fresh29 tests of test_benchmarks.py. Public threads: 18
searches of issue threads; about 65 candidate URLs grepped over benchmarks/mutations/ (`grep -rl`, names and counts only).

Slips, none touching a check's text. `ls /work/wt/` showed the names of other sessions' scratch files (none opened).
The grepped import lines of the setup cells name modules and functions of autograder.checks (names only, no text).
The notebooks' markdown cells were not read (time): the promised inputs come from the answer cells' docstrings and
comments. Two in-process scripts that dropped duplicated entries imported every other set's module and
heldout_duplicates' own keys() to compare entries text for text (they printed only counts, never another set's
entry). heldout_duplicates matched 43 of 108 entries on its first run (35 mistakes, 8 SAME), none once they were dropped,
22 of 109 when new ones were added, then 2, 1, 0, 4, 2, 1, 1, 0: every match was dropped, not reworded, and new mistakes written in their place. Threads went
with dropped entries: karpathy/nanoGPT#456, tatsu-lab/stanford_alpaca#227, karpathy/llama2.c#416,
huggingface/transformers#41423 (twice), hahnyuan/LLM-Viewer#12 (twice), lucidrains/x-transformers#184,
pytorch/torchtitan#4366, prescient-design/lobster#127; kimiyoung/transformer-xl#131 went with a dropped padding count
and now cites a different slip, its own one (a batch's mean times its length). One thread,
simchowitzlabpublic/nano-world-model#22, was cited before its URL was grepped; it is in another set, so the clip
before backward stays uncited. A rasbt/LLMs-from-scratch#922 mistake changed no shared probe (their configs have a
group size equal to the kv head count): unseen_probes_fresh29.py adds one. A log-softmax taken in bfloat16 changed no
probe (the sum's errors cancel) and was dropped. The session ran well past the brief's 30 minutes.

The set's focus, each mistake counted once by its main kind. Counting answers (17, besides 3 public ones): the output
projection in qkv_proj too, the mix for one head, projections sized per head, n_heads twice in the scores, rounding up
by floor + 1, the final norm as 1 parameter, an untied head in the embedding too, one matrix for k and v, max_seq_len
positions, the weights' parenthesis before the element size, k and v as a // share, the cache of one layer, a tied
head's matmul dropped, the head in every block, the attention of one layer, Adam moments for matmuls only, a tied table
counted twice. A needed call in the wrong place (13): the cast on the one-hot's product, the table upcast at the
matmul, keys rotated after the cache update (05 and 06), new keys cast before the concatenation, the mask updated
before the positions are counted, eval() after the first forward, train() after the forward, a detach before the loss,
the clip before backward, the cast after the NLL sum, the caller's mode restored inside the loop, a detach before the
rotation. Right routes, a mistake a step later (12): a flat lookup viewed back from ids.shape[0], the mask as not-triu
keeping the diagonal, fused QKV split after the heads, the normalised copy reused, no mask once something is cached,
the result started empty, values tiled while keys interleave, the top rows of a square mask, windows at multiples of
T, the head frozen after tying, float32 logits and float32 attention never cast back. Dense lines (11): eps outside the
root, sqrt of the key count, pairs counted 0, 1, 2, SwiGLU distributed over the down projection, k_proj sized from
d / n_heads, the cosine clamped, bigram pairs as [next, prev], the squared mean absolute deviation, causal_mask's
arguments swapped, finfo.min for -inf, angles times 2 pi. Numerics (4): two roundings in rms_norm, positions in
bfloat16, a softmax by hand that overflows, log of a softmax that underflows.

Public bugs (10, the URL in a comment above the entry and in its reason): tinygrad/tinygrad#5095 (gain before the
cast), rasbt/LLMs-from-scratch#922 (the group size as kv heads), rasbt/reasoning-from-scratch#164 (the crossing token
dropped), google-research/big_transfer#58 (warmup from 0), pytorch/tutorials#2849 (embeddings times sqrt(d)),
FrancescoSaverioZuppichini/ViT#1 (1/sqrt(d_model) as the scale), EleutherAI/gpt-neo#45 (padding scored as token 0),
verl-project/verl#6389 (causal attention FLOPs halved), meta-llama/llama-cookbook#73 (-1 for -100),
kimiyoung/transformer-xl#131 (a batch's mean times its length).

SAME lists 26 edits (counts written another way and the learner's own routes written right): a flat lookup reshaped,
a deleted then re-registered head, addcmul, view(-1) twice, the mask as not-strict-triu, fused QKV split first, the
FLOPs written out, cast then slice, z * sigmoid(z), the stream named h, the head as a bool
product, the element size from an empty tensor, no mask for one new token, argmax of the softmax, positions as index
minus padding, the group size from the cache, flatten(1, 2), the last rows of a square mask, the head added as a bool,
a guarded temperature, unsqueeze(-1), classes on axis 1, the factor 3 out, the bytes reordered,
rows normalised after smoothing; a check must pass each.

Counts: 67 mistakes (01: 5, 02: 4, 03: 8, 04: 5, 05: 9, 06: 8, 07: 5, 08: 4, 09: 15, 10: 4), 26 SAME edits, 10 public
threads. Each mistake is one substitution in one answer cell; `expect` holds words a check that found it would likely
say, `regime` the situation in which a mistake right by default shows. `in_lists` is left False."""
from __future__ import annotations

from .unseen import Unseen as M

# notebook 05's Attention.forward from the rotation through the first line after the cache (fixed lines between)
ROPE_TO_ATTENTION = ("        q, k = apply_rope(q, cos, sin, start_pos), apply_rope(k, cos, sin, start_pos)  # position: q and k only\n"
                     "        ### END SOLUTION\n        if cache is not None:\n"
                     "            k, v = cache.update(layer_idx, k, v)  # (B, n_kv, start_pos + T, hd): every key and value so far\n"
                     "        ### BEGIN SOLUTION\n        y = causal_attention(q, k, v)")
FILTERS = ("    if top_k is not None:\n        logits = top_k_filter(logits, top_k)\n"
           "    if top_p is not None:\n        logits = top_p_filter(logits, top_p)\n")
COUNT = ("count", "total", "formula", "closed form")

MUTATIONS = [
    # ---- 01 ----
    ("01", M("embed", "return weight[ids]", "return weight[ids.flatten()].view(ids.shape[0], -1, weight.shape[1])",
             ("shape", "flat ids", "1-d", "(T,)", "any shape", "leading"),
             "looks the ids up flat, then views them back as (B, T, d) from ids.shape[0]: flat ids (T,) come back (T, 1, d)",
             regime="ids of one axis")),
    ("01", M("one_hot_embed", "one_hot = F.one_hot(ids, num_classes=weight.shape[0]).to(weight.dtype)  # (..., V)\n"
             "    return one_hot @ weight", "one_hot = F.one_hot(ids, num_classes=weight.shape[0])  # (..., V)\n"
             "    return (one_hot @ weight).to(weight.dtype)",
             ("dtype", "int64", "long", "cast", "before the matmul", "float"),
             "casts the product instead of the one-hot: the matmul itself multiplies int64 by a float table")),
    # ---- 02 ----
    # https://github.com/tinygrad/tinygrad/pull/5095
    ("02", M("rms_norm", "return weight * (x32 * inv_rms).to(x.dtype)", "return (x32 * inv_rms * weight).to(x.dtype)",
             ("cast", "order", "rounding", "gain", "before multiplying", "x.dtype", "float32 output"),
             "multiplies by the gain in float32 and casts after, the order tinygrad#5095 turned round: one rounding "
             "fewer than Llama's, and a float32 gain no longer lifts the output (tinygrad/tinygrad#5095)",
             regime="half-precision input")),
    ("02", M("rms_norm", "return weight * (x32 * inv_rms).to(x.dtype)", "return weight * x * inv_rms.to(x.dtype)",
             ("cast", "rounding", "float32", "precision", "x.dtype", "half"),
             "casts the statistic down and multiplies in x's own precision: two roundings where Llama has one",
             regime="half-precision input")),
    ("02", M("layer_norm", "return weight * centred * torch.rsqrt(var + eps) + bias",
             "return weight * centred * torch.rsqrt(var) + eps + bias",
             ("eps", "parenthes", "inside", "variance", "epsilon"),
             "closes the parenthesis before eps: eps is added to the output instead of to the variance")),
    # ---- 03 ----
    ("03", M("causal_mask", "return allowed.tril(diagonal=kv_len - q_len)", "return ~allowed.triu(diagonal=kv_len - q_len)",
             ("diagonal", "itself", "own position", "triu", "strict"),
             "writes the mask as not-the-upper-triangle but keeps the diagonal in the upper part: no query sees itself")),
    ("03", M("causal_attention", "scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])",
             "scores = q @ k.transpose(-2, -1) / math.sqrt(k.shape[-2])",
             ("sqrt", "head_dim", "scale", "hd", "sequence length", "keys"),
             "scales by the square root of the number of keys instead of the head size")),
    ("03", M("self_attention", "q, k, v = (split_heads(F.linear(x, w), n_heads) for w in (w_q, w_k, w_v))",
             "q, k, v = split_heads(F.linear(x, torch.cat((w_q, w_k, w_v))), n_heads).chunk(3, dim=-1)",
             ("fused", "qkv", "chunk", "split", "heads", "order"),
             "fuses the three projections but splits heads before splitting q, k, v: each head's slice mixes all three")),
    ("03", M("attention_flops", '"qkv_proj": 3 * projection,', '"qkv_proj": 3 * projection + projection,',
             ("qkv", "twice", "out_proj", "three", "3 *") + COUNT,
             "adds the output projection into qkv_proj as well: it is counted twice")),
    ("03", M("attention_flops", '"mix": B * n_heads * per_head,', '"mix": B * per_head,',
             ("n_heads", "heads", "mix", "every head") + COUNT,
             "counts the mix for one head: the scores have n_heads, the mix not")),
    # ---- 04 ----
    ("04", M("rope_cache", "angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float32), inv_freq)",
             "angles = torch.outer(torch.arange(max_seq_len, dtype=torch.bfloat16), inv_freq)",
             ("bfloat16", "positions", "precision", "float32", "exact", "rounded"),
             "counts the positions in bfloat16: above 256 they round to a multiple of 2, 4, ... and share angles",
             regime="positions above 256")),
    ("04", M("rope_cache", "inv_freq = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)",
             "inv_freq = theta ** (-torch.arange(0, head_dim // 2, dtype=torch.float32) / head_dim)",
             ("frequenc", "2i/d", "exponent", "inv_freq", "i/d"),
             "counts the pairs 0, 1, 2, ... instead of 0, 2, 4, ...: exponents i/d where 2i/d belongs")),
    # ---- 05 ----
    ("05", M("swiglu", "return (gate * up) @ w_down.T", "return (gate @ w_down.T) * (up @ w_down.T)",
             ("product", "down", "gate * up", "before", "elementwise"),
             "projects the gate and the up branch down separately and multiplies afterwards")),
    ("05", M("swiglu_hidden", "return multiple * math.ceil(8 * d_model / 3 / multiple)",
             "return multiple * (8 * d_model // (3 * multiple) + 1)",
             ("already a multiple", "round up", "ceil", "+ 1", "one multiple") + COUNT,
             "rounds up by floor + 1: a value that already is a multiple gains one more multiple",
             regime="8/3 d_model already a multiple")),
    ("05", M("pre_norm_block", "x = x + attn(attn_norm(x))  # the branch reads a normalised copy; the stream stays a sum\n"
             "    x = x + mlp(mlp_norm(x))",
             "h = attn_norm(x)\n    x = x + attn(h)\n    x = x + mlp(mlp_norm(h))",
             ("mlp", "after attention", "stream", "normalised copy", "normalized copy"),
             "keeps the normalised copy in h and hands it to the MLP too: the MLP never sees what attention wrote")),
    ("05", M("Transformer", "self.k_proj = nn.Linear(config.d_model, config.n_kv_heads * config.head_dim, bias=False)",
             "self.k_proj = nn.Linear(config.d_model, config.d_model // config.n_heads * config.n_kv_heads, bias=False)",
             ("head_dim", "d_model // n_heads", "k_proj", "shape"),
             "sizes k_proj from d_model / n_heads instead of config.head_dim", regime="head_dim set apart from d_model / n_heads")),
    ("05", M("Transformer", ROPE_TO_ATTENTION,
             ROPE_TO_ATTENTION.replace("q, k = apply_rope(q, cos, sin, start_pos), apply_rope(k, cos, sin, start_pos)",
                                       "q = apply_rope(q, cos, sin, start_pos)")
             .replace("y = causal_attention(q, k, v)", "y = causal_attention(q, apply_rope(k, cos, sin, start_pos), v)"),
             ("cache", "rotat", "before", "start_pos", "cached keys", "position"),
             "stores the keys unrotated and rotates after the cache update from start_pos: every cached key is turned "
             "as if it stood at the new positions", regime="a KV cache after a prefill")),
    ("05", M("param_counts", '"norms": (2 * L + 1) * d,', '"norms": 2 * L * d + 1,',
             ("norms", "final norm", "parenthes", "+ 1") + COUNT,
             "misplaces the parenthesis: the final norm counts 1 parameter instead of d")),
    ("05", M("param_counts", '"embedding": config.vocab_size * d,',
             '"embedding": config.vocab_size * d * (1 if config.tie_embeddings else 2),',
             ("twice", "untied", "lm_head", "embedding") + COUNT,
             "counts an untied head inside the embedding as well as in lm_head: twice", regime="untied embeddings")),
    # ---- 06 ----
    # https://github.com/rasbt/LLMs-from-scratch/issues/922
    ("06", M("kv_cache_bytes", "per_position = 2 * config.n_layers * config.n_kv_heads * config.head_dim",
             "per_position = 2 * config.n_layers * (config.n_heads // config.n_kv_heads) * config.head_dim",
             ("n_kv_heads", "group", "kv heads", "n_heads //") + COUNT,
             "takes the group size n_heads // n_kv_heads for the number of kv heads, the mix-up of "
             "rasbt/LLMs-from-scratch#922")),
    ("06", M("cache_update", "k_all = torch.cat((past_k, k), dim=2)", "k_all = torch.cat((past_k, k.float()), dim=2)",
             ("dtype", "float32", "cast", "promot", "keys"),
             "keeps the new keys in float32 before the concatenation: a half-precision cache comes back float32",
             regime="a half-precision cache")),
    ("06", M("attention_step", "k = tinylm.apply_rope(k, cos, sin, start_pos=start)\n"
             "    k_all, v_all = cache_update(past_k, past_v, k, v)",
             "k_all, v_all = cache_update(past_k, past_v, k, v)\n"
             "    k_all = tinylm.apply_rope(k_all, cos, sin, start_pos=start)",
             ("rotat", "before", "cache", "twice", "start_pos", "cached keys"),
             "rotates after the cache update: the cached keys, already rotated, turn again, all from `start`",
             regime="a step after a prefill")),
    ("06", M("attention_step", "mask = tinylm.causal_mask(T, start + T).to(x.device)",
             "mask = tinylm.causal_mask(T, start + T).to(x.device) if start == 0 else None",
             ("mask", "several new", "chunk", "future", "causal"),
             "drops the mask whenever something is cached: a chunk of several new tokens sees its own future",
             regime="several new tokens after a prefill")),
    ("06", M("generate_greedy", "idx, step_input = prompt, prompt", "idx, step_input = prompt[:, :0], prompt",
             ("prompt", "shape", "T + max_new_tokens", "new tokens only"),
             "starts the result empty: only the new tokens come back, without the prompt")),
    ("06", M("generate_left_padded", "ids, positions = next_id[:, None], positions[:, -1:] + 1    # (B, 1) each: one past the row's last position\n"
             "            mask = torch.cat((mask, mask.new_ones(B, 1)), dim=1)",
             "mask = torch.cat((mask, mask.new_ones(B, 1)), dim=1)\n"
             "            ids, positions = next_id[:, None], mask.long().sum(dim=-1, keepdim=True)",
             ("position", "one too", "off by one", "count", "order"),
             "counts the real tokens after marking the new one: each new token is placed one position too far")),
    # ---- 07 ----
    ("07", M("gqa_attention", "k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)", "k, v = repeat_kv(k, n_rep), v.repeat(1, n_rep, 1, 1)",
             ("values", "repeat_interleave", "tile", "order", "group"),
             "tiles the values while the keys are interleaved: query head h reads the values of another kv head",
             regime="n_kv_heads > 1 and < n_heads")),
    ("07", M("gqa_step", "mask = tinylm.causal_mask(T, start + T).to(x.device)",
             "mask = tinylm.causal_mask(start + T)[:T].to(x.device)",
             ("bottom", "rows", "cached", "mask", "offset"),
             "keeps the top rows of the square mask: the new queries see only the first keys", regime="a step after a prefill")),
    ("07", M("decode_bytes_per_token", "weights = (matrices + L * per_block + d) * size",
             "weights = matrices + L * per_block + d * size",
             ("bytes", "parenthes", "size", "itemsize") + COUNT,
             "closes the parenthesis early: only the final norm is multiplied by the element size")),
    ("07", M("decode_bytes_per_token", "attention = 2 * d * config.n_heads * hd + 2 * d * config.n_kv_heads * hd",
             "attention = 2 * d * config.n_heads * hd * (1 + config.n_kv_heads // config.n_heads)",
             ("integer division", "//", "k_proj", "v_proj", "n_kv_heads") + COUNT,
             "factors k and v as a share of q and o with //: the share floors to 0 under GQA", regime="n_kv_heads < n_heads")),
    # ---- 08 ----
    # https://github.com/rasbt/reasoning-from-scratch/issues/164
    ("08", M("top_p_filter", "drop_sorted = mass_before >= p", "drop_sorted = mass_before + probs > p",
             ("crossing", "cumulative", "mass before", "boundary", "nucleus"),
             "drops a token once the mass including it passes p: the crossing token goes, the bug of "
             "rasbt/reasoning-from-scratch#164")),
    ("08", M("top_p_filter", "probs = sorted_logits.softmax(dim=-1)",
             "probs = sorted_logits.exp() / sorted_logits.exp().sum(dim=-1, keepdim=True)",
             ("overflow", "inf", "nan", "softmax", "large logits"),
             "writes the softmax by hand without subtracting the maximum: logits near 100 overflow to inf / inf",
             regime="large logits")),
    ("08", M("generate", "    model.eval()                                            # dropout off while generating\n"
             "    idx = prompt\n    try:\n        with torch.no_grad():\n            for _ in range(max_new_tokens):\n"
             "                logits = model(idx)[:, -1]                  # (B, V): the last position predicts the next token\n",
             "    idx = prompt\n    try:\n        with torch.no_grad():\n            for _ in range(max_new_tokens):\n"
             "                logits = model(idx)[:, -1]\n                model.eval()\n",
             ("eval", "train mode", "dropout", "first"),
             "switches to eval mode after the first forward pass: the first token is drawn with dropout on",
             regime="a model in train mode")),
    # ---- 09 ----
    ("09", M("get_batch", "starts = torch.randint(len(data) - seq_len, (batch_size,), generator=generator)",
             "starts = torch.randint((len(data) - 1) // seq_len, (batch_size,), generator=generator) * seq_len",
             ("start", "every position", "multiple", "offset", "chunks"),
             "draws whole chunks: windows start only at multiples of seq_len")),
    ("09", M("lm_loss", "return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)",
             "return F.nll_loss(logits.flatten(0, 1).softmax(-1).log(), targets.flatten(), ignore_index=-100)",
             ("log_softmax", "underflow", "inf", "stable", "softmax"),
             "takes log of the softmax in two steps: at large logits the softmax underflows to 0 and the loss is inf",
             regime="large logits")),
    # https://github.com/google-research/big_transfer/issues/58
    ("09", M("lr_schedule", "return max_lr * (step + 1) / warmup_steps", "return max_lr * (step / warmup_steps)",
             ("step 0", "zero", "warmup", "step + 1", "first step"),
             "warms up from step / warmup_steps: the first step gets learning rate 0 (google-research/big_transfer#58)")),
    ("09", M("lr_schedule", "math.cos(math.pi * min(progress, 1.0))", "min(math.cos(math.pi * progress), 1.0)",
             ("past total", "clamp", "progress", "after the schedule", "min_lr"),
             "clamps the cosine instead of the progress: past total_steps the rate climbs again", regime="steps past total_steps")),
    ("09", M("train_step", "    model.train()                                # dropout on, whatever mode the caller left\n"
             "    loss = lm_loss(model(x), y)                  # (B, T, V) logits -> scalar\n",
             "    loss = lm_loss(model(x), y)                  # (B, T, V) logits -> scalar\n    model.train()\n",
             ("train mode", "forward", "eval mode", "dropout", "before"),
             "switches to train mode after the forward pass: a model handed over in eval mode computes its loss in eval",
             regime="a model in eval mode")),
    ("09", M("train_step", "loss = lm_loss(model(x), y)", "loss = lm_loss(model(x).detach(), y)",
             ("detach", "graph", "gradient", "backward"),
             "detaches the logits before the loss: backward has no graph to the weights")),
    ("09", M("train_step", "    loss.backward()                              # d loss / d every parameter\n"
             "    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)  # global gradient norm <= grad_clip\n",
             "    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)\n"
             "    loss.backward()                              # d loss / d every parameter\n",
             ("clip", "before backward", "order", "after backward", "gradient norm"),
             "clips before backward, when .grad is still empty: the step uses the unclipped gradient", regime="a gradient norm above grad_clip")),
    ("09", M("train_step_costs", "head = V * d                                                              # the head's matmul; the lookup is none",
             "head = 0 if config.tie_embeddings else V * d",
             ("tied", "head", "lm_head", "matmul", "flops") + COUNT,
             "drops the head's matmul when it is tied: tying shares a matrix, the matmul still runs", regime="tied embeddings")),
    ("09", M("train_step_costs", "matmul_weights = L * per_block + head", "matmul_weights = L * (per_block + head)",
             ("head", "every layer", "parenthes", "n_layers", "lm_head") + COUNT,
             "multiplies the head by the layers: one head per block")),
    ("09", M("train_step_costs", "attention_matmuls = 4 * seq_len * config.n_heads * hd * L * tokens",
             "attention_matmuls = 4 * seq_len * config.n_heads * hd * tokens",
             ("n_layers", "every layer", "attention", "one layer") + COUNT,
             "counts the attention matmuls of one layer")),
    # ---- 10 ----
    ("10", M("nll_sum_and_count", 'nll = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=ignore_index,\n'
             '                          reduction="sum")',
             'nll = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=ignore_index,\n'
             '                          reduction="sum").float()',
             ("float32", "bfloat16", "precision", "sum", "cast", "before"),
             "casts the sum instead of the logits: the NLL is summed in bfloat16 and rounded", regime="bfloat16 logits")),
    ("10", M("evaluate", "                total, count = total + s, count + n          # combine by tokens, not by batches\n",
             "                total, count = total + s, count + n\n                model.train(was_training)\n",
             ("eval", "train mode", "restor", "inside the loop", "dropout"),
             "restores the caller's mode inside the loop: from the second batch on a training model is measured in train mode",
             regime="a model in train mode, several batches")),
    ("10", M("bigram_nll", "counts = torch.bincount(train[:-1] * 256 + train[1:]", "counts = torch.bincount(train[1:] * 256 + train[:-1]",
             ("prev", "next", "order", "row", "transpos"),
             "indexes the pairs as [next, prev]: rows are normalised over the previous byte")),
    # ---- written after heldout_duplicates' first runs, notebook by notebook ----
    ("01", M("one_hot_embed", "return one_hot @ weight", "return one_hot @ weight.float()",
             ("dtype", "float32", "bfloat16", "half", "cast"),
             "upcasts the table for the matmul while the one-hot is in the table's dtype: bfloat16 tables raise",
             regime="a bfloat16 table")),
    ("02", M("layer_norm", "var = centred.pow(2).mean(dim=-1, keepdim=True)", "var = centred.abs().mean(dim=-1, keepdim=True).pow(2)",
             ("variance", "square", "mean of", "abs", "deviation"),
             "squares the mean absolute deviation instead of averaging the squares")),
    ("03", M("attention_flops", "projection = 2 * B * T * d * d", "projection = 2 * B * T * d * head_dim",
             ("head_dim", "d_model", "projection", "d x d") + COUNT,
             "sizes the projections per head: (d, head_dim) where the matrices are (d, d)")),
    ("03", M("attention_flops", "per_head = 2 * T * T * head_dim", "per_head = 2 * T * T * head_dim * n_heads",
             ("n_heads", "twice", "heads", "per_head") + COUNT,
             "multiplies the heads into the per-head count as well: the scores and the mix count n_heads twice")),
    ("03", M("causal_attention", "mask = causal_mask(q.shape[-2], k.shape[-2]).to(q.device)",
             "mask = causal_mask(k.shape[-2], q.shape[-2]).to(q.device)",
             ("q_len", "kv_len", "argument", "order", "fewer queries", "shape"),
             "passes the key count as q_len and the query count as kv_len", regime="fewer queries than keys")),
    # https://github.com/pytorch/tutorials/issues/2849
    ("05", M("Transformer", "x = embed(idx, self.tok_emb.weight)                        # (B, T, d)",
             "x = embed(idx, self.tok_emb.weight) * math.sqrt(self.config.d_model)",
             ("sqrt", "scale", "embedding", "d_model", "gemma"),
             "scales the embeddings by sqrt(d_model), the step of the original Transformer asked about in "
             "pytorch/tutorials#2849: Llama has no such factor")),
    ("05", M("param_counts", "k_and_v = 2 * d * config.n_kv_heads * hd", "k_and_v = d * config.n_kv_heads * hd",
             ("k_proj", "v_proj", "two", "k and v") + COUNT,
             "counts one matrix for k and v together")),
    ("06", M("kv_cache_bytes", "return per_position * seq_len * batch_size * dtype.itemsize",
             "return per_position * config.max_seq_len * batch_size * dtype.itemsize",
             ("seq_len", "max_seq_len", "positions") + COUNT,
             "counts the positions a cache allocates for, max_seq_len, instead of seq_len")),
    # https://github.com/FrancescoSaverioZuppichini/ViT/issues/1
    ("06", M("attention_step", "y = F.scaled_dot_product_attention(q, k_all, v_all, attn_mask=mask)",
             "y = F.scaled_dot_product_attention(q, k_all, v_all, attn_mask=mask, scale=(attn.n_heads * attn.head_dim) ** -0.5)",
             ("scale", "head_dim", "sqrt", "d_model", "embedding size"),
             "passes a scale of 1/sqrt(d_model) instead of 1/sqrt(head_dim), the slip of FrancescoSaverioZuppichini/ViT#1")),
    ("07", M("decode_bytes_per_token", "kv_cache = 2 * L * config.n_kv_heads * hd * context_len * size",
             "kv_cache = 2 * config.n_kv_heads * hd * context_len * size",
             ("n_layers", "every layer", "one layer", "kv_cache") + COUNT,
             "counts the cache of one layer")),
    ("08", M("top_k_filter", 'return logits.masked_fill(logits < kth, float("-inf"))',
             "return logits.masked_fill(logits < kth, torch.finfo(logits.dtype).min)",
             ("-inf", "finite", "finfo", "min"),
             "fills with the dtype's smallest finite value instead of -inf")),
    # https://github.com/EleutherAI/gpt-neo/pull/45
    ("09", M("lm_loss", "F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)",
             "F.cross_entropy(logits.flatten(0, 1), targets.flatten().clamp(min=0))",
             ("padding", "-100", "ignore_index", "token 0"),
             "clamps the -100 padding to id 0: padding is scored as token 0, what EleutherAI/gpt-neo#45 stopped",
             regime="padded targets")),
    # https://github.com/verl-project/verl/pull/6389
    ("09", M("train_step_costs", "+ 3 * attention_matmuls,", "+ 3 * attention_matmuls // 2,",
             ("causal", "half", "attention", "full T x T") + COUNT,
             "halves the attention matmuls for the causal mask, as verl-project/verl#6389 proposed: the matmuls run "
             "on the full T x T")),
    ("09", M("train_step_costs", '"adam_moments": 2 * 4 * n_params', '"adam_moments": 2 * 4 * matmul_weights',
             ("adam", "gains", "every parameter", "moments") + COUNT,
             "keeps Adam moments for the matmul weights only: the gains have moments too")),
    ("09", M("train_step_costs", "+ (0 if config.tie_embeddings else V * d)", "+ V * d",
             ("tied", "twice", "embedding", "head") + COUNT,
             "adds the embedding even when it is the head's matrix: a tied table counted twice", regime="tied embeddings")),
    # https://github.com/meta-llama/llama-cookbook/issues/73
    ("09", M("train_step_accumulated", 'ignore_index=-100, reduction="sum")', 'ignore_index=-1, reduction="sum")',
             ("-100", "ignore_index", "padding", "-1"),
             "ignores -1 instead of the -100 the batches are padded with, the mix-up asked about in "
             "meta-llama/llama-cookbook#73: a padded target is an index out of range", regime="padded targets")),
    # https://github.com/kimiyoung/transformer-xl/issues/131
    ("10", M("evaluate", "total, count = total + s, count + n", "total, count = total + s / max(n, 1) * y.shape[-1], count + y.shape[-1]",
             ("token", "batch size", "scored", "count", "padding", "weight"),
             "weights each batch's mean by its sequence length, as kimiyoung/transformer-xl#131 does: rows and padding "
             "do not count", regime="batches of different sizes or padding")),
    ("04", M("rotary_attention", "q = apply_rope(q, cos, sin, start_pos)", "q = apply_rope(q.detach(), cos, sin, start_pos)",
             ("gradient", "detach", "queries", "graph", "backward"),
             "detaches the queries before rotating them: no gradient reaches q")),
    ("01", M("tied_logits", "return x @ weight.T", "return torch.matmul(x.float(), weight.float().T)",
             ("dtype", "float32", "bfloat16", "cast", "precision"),
             "computes the logits in float32 and never casts back: bfloat16 inputs give float32 logits",
             regime="bfloat16 inputs")),
    ("04", M("rotary_attention", "return tinylm.causal_attention(q, k, v)", "return tinylm.causal_attention(q.float(), k.float(), v.float())",
             ("dtype", "float32", "bfloat16", "cast back", "precision"),
             "runs attention in float32 for stability and never casts back: bfloat16 inputs give float32 outputs",
             regime="bfloat16 inputs")),
    ("04", M("rope_cache", "inv_freq = theta ** (", "inv_freq = 2 * torch.pi * theta ** (",
             ("frequenc", "2 pi", "radians", "angle", "inv_freq"),
             "reads theta^(-2i/d) as cycles per position and multiplies by 2 pi: every angle is 2 pi times too large")),
    ("01", M("tie_weights", "lm_head.weight = tok_emb.weight", "lm_head.weight = tok_emb.weight\n    lm_head.weight.requires_grad_(False)",
             ("trainable", "requires_grad", "frozen", "gradient", "same parameter"),
             "freezes the head after tying it, to train the matrix only once: the one Parameter is the embedding, now frozen")),
]

SAME = [
    ("01", M("tie_weights", "lm_head.weight = tok_emb.weight", "del lm_head.weight\n    lm_head.weight = tok_emb.weight", (),
             "removes the head's own Parameter first, then registers the embedding's")),
    ("02", M("layer_norm", "return weight * centred * torch.rsqrt(var + eps) + bias",
             "return torch.addcmul(bias, weight, centred * torch.rsqrt(var + eps))", (), "the affine step as addcmul")),
    ("03", M("split_heads", "x = x.view(B, T, n_heads, d // n_heads)", "x = x.view(B, T, n_heads, -1)", (),
             "lets view infer the head size")),
    ("05", M("Transformer", "q = self.q_proj(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)",
             "q = self.q_proj(x).view(B, T, -1, self.head_dim).transpose(1, 2)", (), "lets view infer the number of query heads")),
    ("07", M("gqa_step", "attn.n_heads // attn.n_kv_heads", "attn.n_heads // past_k.shape[1]", (),
             "the group size from the cache's own head count")),
    ("08", M("sample_next", "logits = logits / temperature             # on logits, before any filter",
             "logits = logits / max(temperature, 1e-5)  # temperature 0 has returned already", (), "a guarded division")),
    ("01", M("embed", "return weight[ids]", "return weight[ids.reshape(-1)].reshape(*ids.shape, weight.shape[1])", (),
             "looks up flat ids and reshapes back to ids' shape")),
    ("03", M("causal_mask", "return allowed.tril(diagonal=kv_len - q_len)",
             "return allowed.triu(diagonal=kv_len - q_len + 1).logical_not()", (), "the mask as the complement of the strict upper part")),
    ("03", M("self_attention", "q, k, v = (split_heads(F.linear(x, w), n_heads) for w in (w_q, w_k, w_v))",
             "q, k, v = (split_heads(t, n_heads) for t in F.linear(x, torch.cat((w_q, w_k, w_v))).chunk(3, dim=-1))", (),
             "one fused projection, split into q, k, v before the heads")),
    ("03", M("attention_flops", 'return {"qkv_proj": 3 * projection, "scores": B * n_heads * per_head, "mix": B * n_heads * per_head,',
             'return {"qkv_proj": 6 * B * T * d * d, "scores": 2 * B * T * T * d, "mix": 2 * B * T * T * d,', (),
             "the counts written out: n_heads x head_dim is d")),
    ("04", M("apply_rope", "cos = cos[start_pos:start_pos + T].to(x.dtype)", "cos = cos.to(x.dtype)[start_pos:start_pos + T]", (),
             "casts the whole table, then slices")),
    ("05", M("swiglu", "gate = F.silu(x @ w_gate.T)", "gate = (x @ w_gate.T) * torch.sigmoid(x @ w_gate.T)", (),
             "SiLU written as z * sigmoid(z)")),
    ("05", M("pre_norm_block", "x = x + attn(attn_norm(x))  # the branch reads a normalised copy; the stream stays a sum\n"
             "    x = x + mlp(mlp_norm(x))    # the MLP reads the stream after attention has written to it\n    return x",
             "h = x + attn(attn_norm(x))\n    return h + mlp(mlp_norm(h))", (), "the stream after attention named h")),
    ("05", M("param_counts", '"lm_head": 0 if config.tie_embeddings else config.vocab_size * d}',
             '"lm_head": config.vocab_size * d * (not config.tie_embeddings)}', (), "the untied head as a product with a bool")),
    ("06", M("kv_cache_bytes", "return per_position * seq_len * batch_size * dtype.itemsize",
             "return torch.empty((), dtype=dtype).element_size() * batch_size * seq_len * per_position", (),
             "the element size from an empty tensor, the factors reordered")),
    ("06", M("attention_step", "mask = tinylm.causal_mask(T, start + T).to(x.device)",
             "mask = tinylm.causal_mask(T, start + T).to(x.device) if T > 1 else None", (),
             "no mask for a single new token, which may see every key")),
    ("06", M("generate_greedy", "next_id = logits.argmax(dim=-1, keepdim=True)", "next_id = logits.softmax(dim=-1).argmax(dim=-1, keepdim=True)", (),
             "argmax of the probabilities: the softmax keeps the order")),
    ("06", M("generate_left_padded", "positions = (mask.long().cumsum(-1) - 1).clamp(min=0)",
             "positions = (torch.arange(T) - (~mask).sum(dim=-1, keepdim=True)).clamp(min=0)", (),
             "position = index minus the row's padding, padding clamped to 0")),
    ("07", M("repeat_kv", "return x.reshape(B, n_kv * n_rep, T, hd)", "return x.flatten(1, 2)", (), "merges the group axes with flatten")),
    ("07", M("gqa_step", "mask = tinylm.causal_mask(T, start + T).to(x.device)", "mask = tinylm.causal_mask(start + T)[start:].to(x.device)", (),
             "the last T rows of the square mask")),
    ("07", M("decode_bytes_per_token", "matrices = config.vocab_size * d * (1 if config.tie_embeddings else 2)",
             "matrices = config.vocab_size * d * (1 + (not config.tie_embeddings))", (), "the untied head added as a bool")),
    ("08", M("generate", "idx = torch.cat((idx, next_id[:, None]), dim=1)", "idx = torch.cat((idx, next_id.unsqueeze(-1)), dim=-1)", (),
             "unsqueeze and the last axis")),
    ("09", M("lm_loss", "return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)",
             "return F.cross_entropy(logits.transpose(1, 2), targets, ignore_index=-100)", (), "classes on axis 1, no flattening")),
    ("09", M("train_step_costs", '"flops": 6 * matmul_weights * tokens + 3 * attention_matmuls',
             '"flops": 3 * (2 * matmul_weights * tokens + attention_matmuls)', (), "the factor 3 taken out")),
    ("09", M("train_step_costs", '"weights": 4 * n_params, "grads": 4 * n_params, "adam_moments": 2 * 4 * n_params}',
             '"weights": n_params * 4, "grads": n_params * 4, "adam_moments": n_params * 8}', (), "the byte counts reordered")),
    ("10", M("bigram_nll", "probs = (counts + alpha) / (counts.sum(dim=1, keepdim=True) + 256 * alpha)",
             "probs = (counts + alpha) / (counts + alpha).sum(dim=1, keepdim=True)", (), "normalises the smoothed rows directly")),
]
