"""A thirty-fourth held-out set of learner mistakes ("fresh34"), written without reading the checks: no file of
autograder/checks/ or tests/checks/, no autograder/diagnosis_*.py, no source of bench_diagnostics.py, no diagnosis
section of docs/benchmarks.md, no tests/course/test_docs.py; no check cell, notebook check or bench_diagnostics run,
no entry tried against a check, no git log or git show of main's history, no other set's entries. See the slips.

Opened or run. The brief and HELPER_RULES.md (cat); mkwt.sh fresh34 (run, not read); git status, git diff --stat.
`ls` of the worktree root, benchmarks/, benchmarks/mutations/, notebooks/*/, tinylm/ (names); `wc -l` of tinylm/*.py
and the benchmark files named here. Whole: verify_unseen.py, heldout_duplicates.py, mutations/__init__.py,
verify_heldout.py, unseen.py, unseen_probes_fresh33.py; of unseen_probes.py a grep of its def and return lines and
lines 60-120 and 186-345; fresh33.py's docstring (python). tinylm: presets.py, config.py. Through notebook_cells:
every setup and answer cell whole, the check names only. Markdown: the cell count and length of each notebook, and
in 01 to 05 the cells containing "Exercise" (each cut at 1,800 characters). test_benchmarks.py lines 150-200 and a
grep of the four registration files for "fresh33"; a grep of pyproject.toml and the Makefile for a line limit.
32 searches of issue threads, no file of the code index; about 155 URLs grepped over benchmarks/mutations/ (those
found cited were set aside). Runs: fresh33's probe chain on the solution (names and values); torch one-liners
(torch.outer of mixed dtypes, index_select past the table, multinomial of inf, masked_fill of -1e9 in float16, SDPA
broadcasting one kv head); verify_unseen and heldout_duplicates --set fresh34 (about six runs each), the two fresh34
tests, pyflakes on the changed modules, awk line lengths.

Slips. The markdown of 02, 03 and 05 says what some checks do (an input shifted by 300, FlopCounterMode up to T =
16384, configs on the meta device with head_dim set apart); the setup cells import autograder.checks names. An awk
counted fresh33.py's lines over 120 characters (it printed 0, no text). heldout_duplicates matched 27 of 80 entries
first (21 mistakes, 6 SAME: F.embedding(padding_idx=0), a flatten-and-view lookup, the gain inside the cast, a
float() softmax, bfloat16 positions, a detached q, SwiGLU without w_up, torch.finfo for the item size, a forward
past the last token, tiled kv heads, two MLP matrices and a tied head in decode_bytes_per_token, exp into
multinomial, a [-k:-k + 1] slice, top-p without the max, top_p before top_k, log of softmax, randperm starts, a total
divided twice, bincount without minlength, a count with -100; index_select, torch.var, a factored attention count,
a full sort, ids >= 0, max(count, 1)), then 6 of 79 (two matrices in param_counts, view after expand, [:, -1:] on
3-D logits; einsum, amin, transpose(1, 2)) and 1 of 83 (FLOPs factored): each was replaced by another idea, not
reworded. Five situations needed probes of their own (unseen_probes_fresh34.py): split_heads at a width other
than the demo's, apply_rope on 3 positions, float16 attention, T = 0.01, a top-p boundary within bfloat16 rounding. An
evaluate entry that left the targets on the CPU changed no probe on this CPU-only machine and was dropped.

Focus, each mistake counted once. Notebook globals (12), a name an earlier or demo cell defines, the demo cells
written as `extra` or taken from the setup: tok_emb, eps, head_dim, seq_len, config (05, 07), NB06_MODEL, gen,
NB09_TRAIN.seq_len and .batch_size, BYTES_PER_TOKEN, val_ids. Edge arguments (15): a batch of one squeezed, past
keys after the square block, the mix without B, MQA's single kv head, three norms per block, seq_len capped at
max_seq_len, is_causal for a chunk, a (1, 1) mask column, zero new tokens, context_len read as max_seq_len, the
final norm per layer, T <= 0.01 as greedy, aligned windows, mean times count on padding only, d for n_heads ·
head_dim. Half-finished edits (15): a frozen head, x32 made but x squared, self.epsilon, a clamp on the scores, w_k
for w_v, q_rot, h, .float() on the cache, model.eval() left in, v for v_all, manual_seed, a temperature clamp,
n_targets, model.train(model.training), no_grad split from the forward. Numerics (8): float16 one-hot product, x in
the gain's dtype, the mean square in x's dtype, exp(a) / (1 + exp(a)), bfloat16 nucleus mass, bfloat16 loss,
float16 NLL sum, integer bigram counts. Public threads (11, URL above the entry and in its reason):
ml-explore/mlx-examples#591, Lightning-AI/lit-llama#322, NVIDIA/apex#1105, NVIDIA/Megatron-LM#744,
Howuhh/faster-trajectory-transformer#3, TransformerLensOrg/TransformerLens#1617 and #448, facebookresearch/lingua#44,
sciknoworg/OntoLearner#344, neuralmagic/deepsparse#1141, Adit-Jain-srm/NightmareNet#385. SAME (22): counts
factored or reordered (flops scores as d, swiglu_hidden twice, norms, kv bytes, decode attention), masks and
attention written another way (cat of past keys, rows of the square mask, q scaled first), routes of the learner's
own (matmul, mm, 1 / sqrt, index-select of pairs, guarded repeat, expand(-1), k-th by index, written softmax,
no_grad twice, zero_grad first, retain_graph, a detach before .item()).

Counts: 61 mistakes (01: 5, 02: 6, 03: 6, 04: 4, 05: 5, 06: 8, 07: 5, 08: 5, 09: 9, 10: 8), 42 with a regime,
22 SAME, 11 public threads; `expect` holds words a check that found the mistake would likely say, `in_lists`
stays False."""
from __future__ import annotations

from .unseen import Unseen as M

# the demo cells a learner's answer may lean on: names the notebook defines below an exercise
DEMO_CONFIG = "config = tinylm.ModelConfig(d_model=64, n_layers=2, n_heads=4, max_seq_len=64)  # the demo's model"
GQA_DEMO_CONFIG = "config = tinylm.ModelConfig(d_model=64, n_layers=2, n_heads=4, n_kv_heads=2)  # the demo's GQA model"
# notebook 05's first block line and notebook 06's cache reset, which two entries each edit
NORM_LINE = "    x = x + attn(attn_norm(x))  # the branch reads a normalised copy; the stream stays a sum\n"
RESET_LINE = ("    cache.reset()                                   # stale positions from an earlier prompt "
              "would shift everything\n")

MUTATIONS = {
    "01": [
        # https://github.com/ml-explore/mlx-examples/pull/591
        M("tied_logits", "return x @ weight.T",
          "return (x * x.shape[-1] ** -0.5) @ weight.T  # T5 rescales a tied head",
          ("scale", "sqrt", "d ** -0.5", "rescal", "t5"),
          "copies T5's rescaling of a tied head, x · d^-1/2, into a Llama head that has none "
          "(https://github.com/ml-explore/mlx-examples/pull/591)"),
        M("tied_logits", "return x @ weight.T", "return x @ tok_emb.weight.T",
          ("argument", "weight", "global", "demo", "other table"),
          "multiplies by the demo's embedding table, a notebook global, instead of the weight it is handed",
          extra="tok_emb = nn.Embedding(256, 16)  # the demo below the exercise"),
        M("embed", "return weight[ids]", "return weight[ids.squeeze(0)]  # a prompt comes as (1, T)",
          ("batch", "squeeze", "shape", "(1,", "leading"),
          "squeezes the leading axis meant for a single prompt: a batch of one loses its batch axis",
          regime="a batch of one"),
        M("tie_weights", "lm_head.weight = tok_emb.weight", "lm_head.weight = tok_emb.weight\n"
          "    lm_head.weight.requires_grad_(False)  # froze the head while checking the embedding alone",
          ("requires_grad", "frozen", "trainable", "no gradient", "freeze"),
          "leaves a debugging line that freezes the head: the shared Parameter, the embedding too, stops training"),
        M("one_hot_embed", "    one_hot = F.one_hot(ids, num_classes=weight.shape[0]).to(weight.dtype)  # (..., V)\n"
          "    return one_hot @ weight",
          "    one_hot = F.one_hot(ids, num_classes=weight.shape[0]).half()  # (..., V): half the memory\n"
          "    return (one_hot @ weight.half()).to(weight.dtype)",
          ("float16", "half", "precision", "rounded", "dtype"),
          "multiplies in float16 to save memory: every float32 row comes back rounded to 11 bits"),
    ],
    "02": [
        # https://github.com/Lightning-AI/lit-llama/pull/322
        M("rms_norm", "weight: torch.Tensor, eps: float = 1e-6)", "weight: torch.Tensor, eps: float = 1e-5)",
          ("eps", "epsilon", "default", "1e-5", "1e-6"),
          "defaults eps to 1e-5, the value in Meta's first LLaMA source, where the checkpoints and tinylm use 1e-6 "
          "(https://github.com/Lightning-AI/lit-llama/pull/322)", regime=""),
        M("rms_norm", "inv_rms = torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)",
          "inv_rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)",
          ("float32", "overflow", "upcast", "float16", "inf", "x32"),
          "makes the float32 copy but squares the original: float16 entries above 256 still overflow",
          regime="float16 input with entries above 256"),
        M("RMSNorm", "        self.eps = eps\n", "        self.epsilon = eps\n",
          ("eps", "epsilon", "attribute", "renamed"),
          "renames the attribute in __init__ only: forward still reads self.eps"),
        M("RMSNorm", "return rms_norm(x, self.weight, self.eps)", "return rms_norm(x, self.weight, eps)",
          ("eps", "epsilon", "global", "self.eps"),
          "passes the demo's global eps instead of the module's own: every RMSNorm uses 1e-6",
          extra="eps = 1e-6  # the demo's epsilon", regime="an eps other than 1e-6"),
        M("rms_norm", "x32 = x.float()  # squares of fp16 values overflow above 256",
          "x32 = x.to(weight.dtype)  # the gain's precision",
          ("float32", "overflow", "float16", "half", "gain's dtype", "upcast"),
          "upcasts to the gain's dtype: right while the gain is float32, overflows once the whole model is float16",
          regime="a float16 gain and float16 x above 256"),
        M("rms_norm", "inv_rms = torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)",
          "inv_rms = torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True).to(x.dtype) + eps)",
          ("precision", "bfloat16", "float32", "rounded", "statistic", "bit"),
          "rounds the mean square to x's dtype before the rsqrt: a bfloat16 statistic is right to 3 digits only",
          regime="half-precision input"),
    ],
    "03": [
        M("causal_attention", "weights = scores.softmax(dim=-1)", "weights = scores.clamp(min=-1e4).softmax(dim=-1)",
          ("clamp", "-inf", "future", "leak", "masked", "-1e4"),
          "keeps a clamp from chasing NaNs: the masked -inf becomes -1e4, level with real scores below it",
          regime="scores below -1e4"),
        M("causal_mask", "allowed.tril(diagonal=kv_len - q_len)",
          "torch.cat((torch.ones(q_len, q_len, dtype=torch.bool).tril(),\n"
          "                      torch.ones(q_len, kv_len - q_len, dtype=torch.bool)), dim=1)",
          ("cached", "past keys", "bottom-right", "offset", "fewer queries", "order"),
          "puts the all-visible past keys after the square causal block instead of before it",
          regime="fewer queries than keys"),
        M("split_heads", "x = x.view(B, T, n_heads, d // n_heads)", "x = x.view(B, T, n_heads, head_dim)",
          ("head_dim", "global", "d // n_heads", "features per head", "shape"),
          "splits with the demo's head_dim, a notebook global, instead of d // n_heads",
          extra="head_dim = 4  # the demo: 12 features in 3 heads",
          regime="a width or head count other than the demo's"),
        M("self_attention", "for w in (w_q, w_k, w_v)", "for w in (w_q, w_k, w_k)",
          ("w_v", "values", "keys", "copy", "value projection"),
          "copies the key projection into the value slot: v = x @ w_k.T"),
        M("attention_flops", '"mix": B * n_heads * per_head', '"mix": n_heads * per_head',
          ("batch", "mix", "per sequence", "b *"),
          "multiplies the scores by the batch but not the mix: right for a batch of one", regime="batch > 1"),
        # https://github.com/NVIDIA/apex/issues/1105
        M("causal_attention", 'scores = scores.masked_fill(~mask, float("-inf"))',
          "scores = scores.masked_fill(~mask, -1e10)",
          ("float16", "overflow", "-inf", "-1e10", "half"),
          "fills the future with -1e10: masked_fill cannot store it in float16 and raises "
          "(https://github.com/NVIDIA/apex/issues/1105)",
          regime="float16 q, k, v"),
    ],
    "04": [
        # https://github.com/NVIDIA/Megatron-LM/issues/744
        M("rope_cache", "-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim",
          "-torch.arange(0, head_dim, 2, dtype=torch.bfloat16) / head_dim",
          ("bfloat16", "inv_freq", "frequenc", "precision", "float32"),
          "builds the frequencies in bfloat16, the model's dtype: each is off by up to 0.4 %, and the angle "
          "error grows with the position (https://github.com/NVIDIA/Megatron-LM/issues/744)"),
        M("apply_rope", "    T = x.shape[-2]\n", "    T = seq_len\n",
          ("positions", "seq_len", "global", "x.shape", "length"),
          "slices the tables by the demo's seq_len, a notebook global, instead of x's own length",
          extra="seq_len = 5  # the demo's sequence", regime="a sequence length other than the demo's"),
        M("interleaved_to_half", "k_proj = interleaved_to_half(wk, n_kv_heads)",
          "k_proj = interleaved_to_half(wk, n_kv_heads) if n_kv_heads > 1 else wk",
          ("n_kv_heads", "single", "mqa", "one kv head", "k_proj", "rotated"),
          "skips the key permutation for a single kv head, as if one head needed none: MQA keys keep Meta's pairing",
          regime="n_kv_heads == 1"),
        M("rotary_attention", "q = apply_rope(q, cos, sin, start_pos)", "q_rot = apply_rope(q, cos, sin, start_pos)",
          ("queries", "rotated", "q_rot", "position", "unrotated"),
          "renames the rotated queries q_rot and still attends with q: the queries are never rotated"),
    ],
    "05": [
        # https://github.com/Howuhh/faster-trajectory-transformer/issues/3
        M("pre_norm_block", NORM_LINE,
          "    normed = attn_norm(x)\n    x = normed + attn(normed)  # the branch reads a normalised copy\n",
          ("residual", "normalised", "stream", "norm", "skip"),
          "adds the attention branch to the normalised copy instead of the stream: the residual path is normalised "
          "(https://github.com/Howuhh/faster-trajectory-transformer/issues/3)"),
        M("swiglu", "gate = F.silu(x @ w_gate.T)",
          "a = x @ w_gate.T\n    gate = a * torch.exp(a) / (1 + torch.exp(a))  # a·sigmoid(a)",
          ("overflow", "exp", "nan", "inf", "large"),
          "writes the sigmoid as exp(a) / (1 + exp(a)): above a = 88 it is inf / inf", regime="gate inputs above 88"),
        M("Transformer", "k = self.k_proj(x).view(B, T, self.n_kv_heads, self.head_dim)",
          "k = self.k_proj(x).view(B, T, config.n_kv_heads, config.head_dim)",
          ("config", "global", "self.n_kv_heads", "head_dim", "shape"),
          "splits the keys by the demo's config, a notebook global, instead of the module's own sizes",
          extra=DEMO_CONFIG, regime="a config other than the demo's"),
        M("pre_norm_block", NORM_LINE,
          "    h = x + attn(attn_norm(x))  # the stream after attention\n",
          ("attention", "dropped", "h", "residual", "lost"),
          "renames the first sum to h and leaves the next lines reading x: attention's output is dropped"),
        M("param_counts", '"norms": (2 * L + 1) * d', '"norms": 3 * L * d',
          ("norms", "final norm", "per block", "n_layers"),
          "counts three norms per block: right for one layer only", regime="more than one layer"),
    ],
    "06": [
        M("kv_cache_bytes", "config.n_kv_heads * config.head_dim", "config.n_kv_heads * NB06_MODEL.head_dim",
          ("head_dim", "config", "NB06_MODEL", "global", "preset"),
          "reads head_dim from the notebook's NB06_MODEL instead of the config it is given",
          regime="a head_dim other than NB06_MODEL's"),
        M("kv_cache_bytes", "return per_position * seq_len * batch_size",
          "return per_position * min(seq_len, config.max_seq_len) * batch_size",
          ("max_seq_len", "seq_len", "cap", "positions"),
          "caps seq_len at the config's max_seq_len, as if the cache could not be asked for more",
          regime="seq_len above max_seq_len"),
        M("cache_update", "k_all = torch.cat((past_k, k), dim=2)", "k_all = torch.cat((past_k.float(), k), dim=2)",
          ("dtype", "float32", "bfloat16", "float()", "promot"),
          "keeps a .float() from printing the cache: a bfloat16 cache's keys come back float32",
          regime="a half-precision cache"),
        M("attention_step", "attn_mask=mask)", "is_causal=T > 1)",
          ("is_causal", "top-left", "cached", "chunk", "mask", "start"),
          "lets SDPA build the mask when there are several new tokens: is_causal aligns top-left, wrong for a chunk "
          "after the prefill", regime="more than one new token after a prefill"),
        # https://github.com/TransformerLensOrg/TransformerLens/pull/1617
        M("generate_left_padded", "positions[:, -1:] + 1", "torch.full((B, 1), mask.shape[1])",
          ("position", "padding", "pad", "left-padded", "rope"),
          "gives each new token the cache length as its position, pad slots counted: right for the longest row only "
          "(https://github.com/TransformerLensOrg/TransformerLens/pull/1617)", regime="prompts of different lengths"),
        M("generate_left_padded", "mask.new_ones(B, 1)", "mask.new_ones(1, 1)",
          ("batch", "rows", "shape", "mask", "cat"),
          "appends a (1, 1) column to the mask: right for a batch of one", regime="more than one prompt"),
        M("generate_greedy",
          "        for _ in range(max_new_tokens):\n"
          "            logits = model(step_input, cache=cache)[:, -1]      # (B, V): only the last position predicts\n"
          "            next_id = logits.argmax(dim=-1, keepdim=True)       # (B, 1)\n"
          "            idx = torch.cat((idx, next_id), dim=1)              # (B, T + 1)\n"
          "            step_input = next_id                                # decode: one new token per step\n",
          "        while True:\n"
          "            logits = model(step_input, cache=cache)[:, -1]      # (B, V): only the last position predicts\n"
          "            next_id = logits.argmax(dim=-1, keepdim=True)       # (B, 1)\n"
          "            idx = torch.cat((idx, next_id), dim=1)              # (B, T + 1)\n"
          "            step_input = next_id                                # decode: one new token per step\n"
          "            if idx.shape[1] - prompt.shape[1] >= max_new_tokens:\n"
          "                break\n",
          ("zero", "0 new tokens", "max_new_tokens", "one token", "at least one"),
          "tests the count after the step: asked for no new tokens it still appends one", regime="max_new_tokens=0"),
        M("generate_greedy", RESET_LINE, RESET_LINE +
          "    model.eval()                                    # left in from comparing with tinylm.generate\n",
          ("train mode", "eval", "mode", "restore", "training"),
          "leaves a model.eval() in: a model handed over in train mode comes back in eval mode",
          regime="a model in train mode"),
    ],
    "07": [
        M("gqa_attention", "n_rep = q.shape[1] // k.shape[1]", "n_rep = config.n_rep",
          ("n_rep", "config", "global", "kv heads", "shape"),
          "takes n_rep from the demo's config, a notebook global, instead of the tensors' head counts",
          extra=GQA_DEMO_CONFIG, regime="a head ratio other than the demo's"),
        M("gqa_step", "repeat_kv(v_all, n_rep)", "repeat_kv(v, n_rep)",
          ("v_all", "cache", "values", "new values only", "shape"),
          "repeats the new values only: the keys come from the cache, the values do not"),
        # https://github.com/facebookresearch/lingua/issues/44
        M("gqa_step",
          "    k_all = torch.cat((past_k, k), dim=2)                 # (B, n_kv, start + T, hd): the small cache\n"
          "    v_all = torch.cat((past_v, v), dim=2)\n"
          "    mask = tinylm.causal_mask(T, start + T).to(x.device)  # (T, start + T)\n"
          "    y = F.scaled_dot_product_attention(q, repeat_kv(k_all, n_rep), repeat_kv(v_all, n_rep), "
          "attn_mask=mask)\n",
          "    k_all = torch.cat((past_k, repeat_kv(k, n_rep)), dim=2)   # the cache holds every query head's copy\n"
          "    v_all = torch.cat((past_v, repeat_kv(v, n_rep)), dim=2)\n"
          "    mask = tinylm.causal_mask(T, start + T).to(x.device)  # (T, start + T)\n"
          "    y = F.scaled_dot_product_attention(q, k_all, v_all, attn_mask=mask)\n",
          ("cache", "n_kv", "repeat", "memory", "kv heads", "shape"),
          "repeats the new keys and values before caching them: the cache holds n_heads heads, right only for MHA "
          "(https://github.com/facebookresearch/lingua/issues/44)", regime="n_kv_heads < n_heads"),
        M("decode_bytes_per_token", "kv_cache = 2 * L * config.n_kv_heads * hd * context_len * size",
          "kv_cache = 2 * L * config.n_kv_heads * hd * config.max_seq_len * size",
          ("context_len", "max_seq_len", "positions", "kv_cache"),
          "reads the whole cache the config allows instead of the context_len positions it holds",
          regime="context_len below max_seq_len"),
        M("decode_bytes_per_token", "weights = (matrices + L * per_block + d) * size",
          "weights = (matrices + L * (per_block + d)) * size",
          ("final norm", "norm", "per block", "n_layers"),
          "counts the final norm once per block: right for one layer", regime="more than one layer"),
    ],
    "08": [
        M("sample_next", "    if temperature == 0:\n",
          "    if temperature <= 0.01:                 # close enough to greedy\n",
          ("temperature", "greedy", "small", "0.01", "sampling"),
          "treats temperatures up to 0.01 as greedy: at 0.01 near-tied logits are still sampled",
          regime="temperature in (0, 0.01]"),
        M("generate", "sample_next(logits, temperature, top_k, top_p, generator)",
          "sample_next(logits, temperature, top_k, top_p, gen)",
          ("generator", "global", "seed", "reproducib", "gen"),
          "draws from the demo's generator, a notebook global, instead of the caller's",
          extra="gen = torch.Generator().manual_seed(0)  # the demo's generator", regime="a caller's generator"),
        M("generate", "    idx = prompt\n",
          "    idx = prompt\n    torch.manual_seed(0)                                    # left in while comparing "
          "runs\n",
          ("seed", "manual_seed", "global", "random", "same ids"),
          "leaves a torch.manual_seed(0) in: every call without a generator draws the same ids",
          regime="generation without a generator"),
        M("top_p_filter", "probs = sorted_logits.softmax(dim=-1)", "probs = sorted_logits.softmax(dim=-1).bfloat16()",
          ("bfloat16", "precision", "cumulative", "mass", "rounded"),
          "keeps the sorted probabilities in bfloat16: the running mass is right to 3 digits, so the boundary token "
          "moves", regime="a top_p near a cumulative mass"),
        M("sample_next", "logits = logits / temperature             # on logits, before any filter",
          "logits = logits / max(temperature, 0.1)  # no division by tiny temperatures",
          ("temperature", "clamp", "small", "low temperature", "0.1"),
          "keeps a clamp from debugging: temperatures below 0.1 sample as at 0.1", regime="temperature below 0.1"),
    ],
    "09": [
        M("lm_loss", "F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)",
          "F.cross_entropy(logits.flatten(0, 1).bfloat16(), targets.flatten(), ignore_index=-100)",
          ("bfloat16", "precision", "float32", "rounded", "dtype"),
          "keeps a bfloat16 cast from trying mixed precision: the loss is right to 2 or 3 digits"),
        # https://github.com/sciknoworg/OntoLearner/issues/344
        M("lr_schedule", "(step - warmup_steps) / max(1, total_steps - 1 - warmup_steps)",
          "(step - warmup_steps) / (total_steps - 1 - warmup_steps)",
          ("zero", "division", "warmup", "total_steps", "decay"),
          "drops the guard on the decay length: a warmup that ends on the last step divides by zero "
          "(https://github.com/sciknoworg/OntoLearner/issues/344)", regime="warmup_steps = total_steps - 1"),
        M("get_batch", "torch.arange(seq_len + 1)", "torch.arange(NB09_TRAIN.seq_len + 1)",
          ("seq_len", "NB09_TRAIN", "global", "window", "shape"),
          "builds the windows from the notebook's NB09_TRAIN.seq_len instead of the argument",
          regime="a seq_len other than NB09_TRAIN's"),
        M("get_batch", "starts = torch.randint(len(data) - seq_len, (batch_size,), generator=generator)",
          "starts = torch.randint(len(data) // seq_len, (batch_size,), generator=generator) * seq_len  # aligned",
          ("start", "aligned", "multiple", "last window", "index", "every"),
          "starts windows at multiples of seq_len only: most starts are never drawn, and when seq_len divides "
          "len(data) the last window runs past the end", regime="len(data) a multiple of seq_len"),
        M("train_step_accumulated", "n_tokens = sum(int((y != -100).sum()) for _, y in micro_batches)",
          "n_targets = sum(int((y != -100).sum()) for _, y in micro_batches)",
          ("n_tokens", "name", "renamed", "undefined"),
          "renames n_tokens where it is counted and nowhere else"),
        M("train_step_accumulated",
          'summed = F.cross_entropy(logits.flatten(0, 1), y.flatten(), ignore_index=-100, reduction="sum")',
          "summed = F.cross_entropy(logits.flatten(0, 1), y.flatten(), ignore_index=-100) * int((y != -100).sum())",
          ("nan", "padding", "empty", "mean", "no target"),
          "rebuilds the sum as mean times count: a micro-batch of padding only gives nan * 0 = nan",
          regime="a micro-batch with no scored target"),
        # https://github.com/TransformerLensOrg/TransformerLens/issues/448
        M("train_step_costs", "per_block = attention + 3 * d * config.d_ff",
          "per_block = attention + 2 * d * config.d_ff",
          ("mlp", "three", "swiglu", "d_ff", "gate"),
          "counts a GELU MLP's two matrices for SwiGLU's three "
          "(https://github.com/TransformerLensOrg/TransformerLens/issues/448)"),
        M("train_step_costs", "attention_matmuls = 4 * seq_len * config.n_heads * hd * L * tokens",
          "attention_matmuls = 4 * seq_len * d * L * tokens",
          ("head_dim", "n_heads", "d_model", "attention"),
          "writes n_heads · head_dim as d_model: right unless head_dim is set apart",
          regime="head_dim != d_model // n_heads"),
        M("train_step_costs", "tokens = batch_size * seq_len", "tokens = NB09_TRAIN.batch_size * seq_len",
          ("batch_size", "NB09_TRAIN", "global", "tokens"),
          "counts the tokens with the notebook's NB09_TRAIN.batch_size instead of the argument",
          regime="a batch size other than NB09_TRAIN's"),
    ],
    "10": [
        # https://github.com/neuralmagic/deepsparse/pull/1141
        M("nll_sum_and_count", "count = int((targets != ignore_index).sum())", "count = int((targets > 0).sum())",
          ("id 0", "padding", "count", "zero", "ignore_index"),
          "counts the targets above 0, taking the real id 0 for padding "
          "(https://github.com/neuralmagic/deepsparse/pull/1141)",
          regime="targets with id 0"),
        M("nll_sum_and_count", "logits.flatten(0, 1).float()", "logits.flatten(0, 1).half()",
          ("float16", "half", "precision", "sum", "overflow"),
          "casts to float16 instead of float32: the summed NLL is rounded and overflows past 65504"),
        M("evaluate", "        model.train(was_training)\n", "        model.train(model.training)\n",
          ("mode", "train mode", "was_training", "restore"),
          "restores the mode from the model itself after a refactor: a model handed over in train mode stays in eval",
          regime="a model in train mode"),
        M("evaluate", "loss / math.log(2) / bytes_per_token", "loss / math.log(2) / BYTES_PER_TOKEN",
          ("bytes_per_token", "global", "bits_per_byte", "argument"),
          "divides by the notebook's BYTES_PER_TOKEN instead of the argument",
          extra="BYTES_PER_TOKEN = 1.0  # the byte tokenizer of the demo", regime="bytes_per_token other than 1"),
        # https://github.com/Adit-Jain-srm/NightmareNet/pull/385
        M("evaluate", "total, count = total + s, count + n          # combine by tokens, not by batches",
          "total, count = total + s / max(n, 1) * y.numel(), count + y.numel()  # weighted by batch size",
          ("padding", "numel", "token-weighted", "scored", "weight"),
          "weights each batch's mean by all its positions, padding included "
          "(https://github.com/Adit-Jain-srm/NightmareNet/pull/385)",
          regime="padded targets"),
        M("evaluate", "        with torch.no_grad():                                # no graph: memory stays flat\n"
          "            for x, y in batches:\n"
          "                s, n = nll_sum_and_count(model(x.to(dev)), y.to(dev))\n"
          "                total, count = total + s, count + n          # combine by tokens, not by batches\n",
          "        for x, y in batches:\n"
          "            logits = model(x.to(dev))\n"
          "            with torch.no_grad():                            # no graph: memory stays flat\n"
          "                s, n = nll_sum_and_count(logits, y.to(dev))\n"
          "            total, count = total + s, count + n\n",
          ("no_grad", "graph", "forward", "memory", "autograd", "grad"),
          "splits the forward pass out of the loop body and leaves it outside no_grad: every batch builds a graph"),
        M("bigram_nll", "return -probs.log()[val[:-1], val[1:]].mean().item()",
          "return -probs.log()[val_ids[:-1], val_ids[1:]].mean().item()",
          ("val", "global", "argument", "data"),
          "scores the demo's validation tensor, a notebook global, instead of the val it is given",
          extra="val_ids = torch.arange(256).repeat(4)  # the demo's validation bytes"),
        M("bigram_nll", ".view(256, 256).double()", ".view(256, 256)",
          ("float64", "double", "precision", "float32"),
          "leaves the counts as integers: the smoothing makes them float32, and the mean NLL is right to 6 digits"),
    ],
}

SAME = [
    ("01", M("one_hot_embed", "return one_hot @ weight",
             "return torch.mm(one_hot.reshape(-1, weight.shape[0]), weight).reshape(*ids.shape, weight.shape[1])",
             (), "a 2-D product over the flattened ids, then the shape back")),
    ("01", M("tied_logits", "return x @ weight.T", "return torch.matmul(x, weight.transpose(0, 1))",
             (), "the same product through torch.matmul and transpose")),
    ("02", M("layer_norm", "torch.rsqrt(var + eps)", "1 / torch.sqrt(var + eps)", (), "1 / sqrt for rsqrt")),
    ("03", M("causal_mask", "allowed.tril(diagonal=kv_len - q_len)",
             "torch.cat((torch.ones(q_len, kv_len - q_len, dtype=torch.bool),\n"
             "                      torch.ones(q_len, q_len, dtype=torch.bool).tril()), dim=1)",
             (), "every past key visible, then the square causal block of the new ones")),
    ("03", M("causal_attention", "mask = causal_mask(q.shape[-2], k.shape[-2]).to(q.device)",
             "mask = causal_mask(k.shape[-2])[-q.shape[-2]:].to(q.device)",
             (), "the last Tq rows of the square mask over all keys")),
    ("03", M("causal_attention", "scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])",
             "scores = (q / math.sqrt(q.shape[-1])) @ k.transpose(-2, -1)",
             (), "scales the queries before the product instead of the scores after it")),
    ("03", M("attention_flops", '"scores": B * n_heads * per_head', '"scores": 2 * B * T * T * d',
             (), "writes n_heads · head_dim as d for the scores")),
    ("04", M("interleaved_to_half", "return pairs.transpose(1, 2).reshape(rows, d_in)",
             "return torch.cat((pairs[:, :, 0], pairs[:, :, 1]), dim=1).reshape(rows, d_in)",
             (), "the first members of each head's pairs, then the second, by concatenation")),
    ("05", M("swiglu_hidden", "multiple * math.ceil(8 * d_model / 3 / multiple)",
             "(math.ceil(8 * d_model / 3) + multiple - 1) // multiple * multiple", (),
             "8/3 · d rounded up, then up to a multiple")),
    ("05", M("swiglu_hidden", "math.ceil(8 * d_model / 3 / multiple)", "math.ceil(8 * d_model / (3 * multiple))",
             (), "one division by 3 · multiple")),
    ("05", M("param_counts", '"norms": (2 * L + 1) * d', '"norms": d + 2 * L * d', (),
             "the final norm, then two per block")),
    ("06", M("kv_cache_bytes", "return per_position * seq_len * batch_size * dtype.itemsize",
             "return 2 * config.n_layers * seq_len * batch_size * config.n_kv_heads * config.head_dim * dtype.itemsize",
             (), "the same product in another order")),
    ("07", M("gqa_attention", "    k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)",
             "    if n_rep > 1:                                # MHA needs no copies\n"
             "        k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)", (), "skips the repeat when n_rep is 1")),
    ("07", M("repeat_kv", "x[:, :, None].expand(B, n_kv, n_rep, T, hd)", "x[:, :, None].expand(-1, -1, n_rep, -1, -1)",
             (), "expand with -1 for the axes that keep their size")),
    ("07", M("decode_bytes_per_token", "attention = 2 * d * config.n_heads * hd + 2 * d * config.n_kv_heads * hd",
             "attention = 2 * d * hd * (config.n_heads + config.n_kv_heads)", (), "the attention count factored")),
    ("08", M("top_k_filter", "kth = logits.topk(k, dim=-1).values[..., -1:]",
             "kth = logits.topk(k, dim=-1).values[..., k - 1:]", (), "the k-th of the sorted top k by its index")),
    ("08", M("generate", "                logits = model(idx)[:, -1]                  # (B, V): the last position "
             "predicts the next token\n",
             "                with torch.no_grad():\n                    logits = model(idx)[:, -1]\n", (),
             "a second no_grad around the forward pass alone")),
    ("08", M("top_p_filter", "probs = sorted_logits.softmax(dim=-1)",
             "weights = (sorted_logits - sorted_logits[..., :1]).exp()  # the largest logit comes first\n"
             "    probs = weights / weights.sum(dim=-1, keepdim=True)", (),
             "a written-out softmax with the maximum taken out")),
    ("09", M("train_step", "    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)",
             "    with torch.no_grad():\n        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)",
             (), "clips under no_grad, which changes nothing")),
    ("09", M("train_step", "    loss = lm_loss(model(x), y)                  # (B, T, V) logits -> scalar\n"
             "    optimizer.zero_grad(set_to_none=True)        # gradients accumulate otherwise\n",
             "    optimizer.zero_grad(set_to_none=True)        # first: nothing has written a gradient yet\n"
             "    loss = lm_loss(model(x), y)\n", (), "clears the gradients before the forward pass")),
    ("09", M("train_step_accumulated", "(summed / n_tokens).backward()",
             "(summed / n_tokens).backward(retain_graph=True)",
             (), "keeps the graph, which costs memory only")),
    ("10", M("nll_sum_and_count", "logits.flatten(0, 1).float()", "logits.detach().flatten(0, 1).float()",
             (), "a detach before a sum that .item() turns into a float anyway")),
]
