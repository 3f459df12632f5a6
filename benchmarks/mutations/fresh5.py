"""An eighth held-out set of learner mistakes ("fresh5"): mistakes in none of the
project's mutation lists (nbNN.py, heldout.py, unseen.py, offlist.py, fresh.py,
fresh2.py, fresh3.py, fresh4.py), which were read first precisely to avoid
them. Written from the learner's notebooks (their prose and the reference
answers), tinylm and the seed note only, without reading the checks, their
tests or the diagnostics benchmark, and never run through a check. Not part
of the default run: `python benchmarks/bench_diagnostics.py --set fresh5`.

Every mistake is one substitution in one answer cell's solution, of the kind
a learner makes writing the code from the prose or from code seen elsewhere:
an API read for another (a module class called like its function,
KVCache.reset() taken to return the cache, torch.tensordot's default
contraction, torch.sqrt on a Python int, F.dropout's training flag,
F.cross_entropy's third positional argument, its (input, target) order read as scikit-learn's
(y_true, y_pred), randint's size as an int, log1p for log, log_softmax for
the probabilities multinomial wants, torch.linspace for arange, PyTorch's
nn.RMSNorm default eps of finfo(dtype).eps, `model.training = ...` for
`model.train(...)`), NumPy habits (`*` for a matrix product, `len(x)` for
the sequence length, a missing new axis, `.T` on a 4-D tensor), the paper's
"Concat(head_1, ..., head_h)" on the wrong axis, a float mask built as
0 · -inf, Hugging Face's top-p shift written in place without clone, the
cache grown in place with out=, a trailing comma that makes eps a tuple, a
requires_grad flag set on a shared Parameter, a statement order that loses
the caller's mode, a nucleus measured on probabilities instead of logits,
off-by-ones in positions and token counts, and counting slips in the
accounting exercises (LayerNorm's bias counted for RMSNorm, head_dim from
the kv heads, a tie condition inverted, float32 weights in a bfloat16
decode). The entries with a `regime` are right in the default situation and
wrong only there (a bfloat16 table, grouped kv heads, a KV cache holding
positions, a dtype other than float32, top-p set, a module with submodules,
a model evaluated in train mode).

The comment above each entry names the nearest entry of the other lists and
how this one differs; a mistake counts as in a list when the same cell
already holds the same wrong idea. `benchmarks/verify_unseen.py --set fresh5`
proves each one a real bug against tinylm, PyTorch built-ins, the FLOP
counter or closed forms.
"""
from __future__ import annotations

from .unseen import Unseen as M

GQA = "grouped kv heads (n_kv_heads < n_heads)"
SHAPE = ("shape", "axis", "broadcast")
START_POS = ("start_pos", "offset", "cached positions", "positions of the new")

MUTATIONS = {
    "01": [
        # nearest: default one_hot_embed casting the one-hot to float32 (another cell); here the looked-up rows are
        # cast, so a bfloat16 table comes back in float32
        M("embed", "return weight[ids]", "return weight[ids].float()",
          ("dtype", "float32", "bfloat16", "precision", "cast", ".float()"),
          "casts the looked-up rows to float32, as if embeddings had to be float: a bfloat16 (or float16) table "
          "comes back in float32, and the model's activations change precision",
          regime="a bfloat16 or float16 embedding table"),
        # nearest: offlist one_hot_embed with torch.mm; here the elementwise * written for the matrix product
        M("one_hot_embed", "return one_hot @ weight", "return one_hot * weight",
          SHAPE + ("@", "matmul", "matrix product", "elementwise", "*"),
          "multiplies the one-hot rows by the weight with *, NumPy's elementwise product, where @ is the matrix "
          "product: (..., V) * (V, d) does not broadcast and raises"),
        # nearest: fresh4 tied_logits with F.linear keeping the .T; here torch.tensordot, whose dims=1 contracts
        # x's last axis with the weight's first (V), not its second (d)
        M("tied_logits", "return x @ weight.T", "return torch.tensordot(x, weight, dims=1)",
          SHAPE + ("tensordot", "dims", "transpose", "contract", "weight.t"),
          "writes the head as torch.tensordot(x, weight, dims=1): that contracts x's last axis with the weight's "
          "first (V rows), not with d_model, so the product raises (d against V)"),
        # nearest: nb02 RMSNorm's frozen gain and fresh3 tied_logits' detach (other notebooks or cells); here the flag
        # set on the head after tying freezes the embedding it shares
        M("tie_weights", "lm_head.weight = tok_emb.weight",
          "lm_head.weight = tok_emb.weight\n    lm_head.weight.requires_grad = False  # the head trains through the embedding",
          ("requires_grad", "frozen", "freeze", "trainable", "no gradient", "same parameter"),
          "ties the weights, then sets requires_grad = False on the head so it does not train 'twice': the head's "
          "weight is the embedding's Parameter, so the embedding is frozen too"),
    ],
    "02": [
        # nearest: default rms_norm dropping eps and fresh2 layer_norm's hard-coded 1e-5 (another cell); here
        # torch.nn.RMSNorm's default, the dtype's machine epsilon, used instead of the eps argument
        M("rms_norm", "keepdim=True) + eps)", "keepdim=True) + torch.finfo(x.dtype).eps)",
          ("eps", "epsilon", "finfo", "ignored", "argument", "small", "tiny"),
          "adds torch.finfo(x.dtype).eps, torch.nn.RMSNorm's default, instead of the eps argument: close for "
          "ordinary tokens, wrong for a caller's eps and for tokens whose mean square is near eps"),
        # nearest: default layer_norm applying the gain after the bias; here gain and bias trade places
        M("layer_norm", "return weight * centred * torch.rsqrt(var + eps) + bias",
          "return bias * centred * torch.rsqrt(var + eps) + weight",
          ("bias", "weight", "gain", "swapped", "gamma", "beta", "shift", "scale"),
          "mixes up gamma and beta: scales the normalised token by the bias and shifts it by the weight"),
        # nearest: default RMSNorm hard-coding eps; here a trailing comma stores eps as a one-element tuple
        M("RMSNorm", "self.eps = eps", "self.eps = eps,",
          ("tuple", "comma", "eps", "self.eps"),
          "ends the line with a comma, self.eps = eps, which stores the tuple (eps,): rms_norm then adds a tuple "
          "to a tensor and raises"),
    ],
    "03": [
        # nearest: default merge_heads reshaping without the transpose, unseen the same; here the paper's
        # Concat(head_1, ..., head_h) done along the positions
        M("split_heads", "return y.transpose(1, 2).reshape(B, T, H * hd)",
          "return torch.cat([y[:, h] for h in range(H)], dim=1)  # Concat(head_1, ..., head_h)",
          SHAPE + ("concat", "dim", "features", "positions", "(b, t, d)"),
          "concatenates the heads as the paper writes it, but along dim=1 of each (B, T, hd) head, the positions: "
          "(B, H·T, hd) instead of (B, T, H·hd)"),
        # nearest: default causal_attention dividing by head_dim without the root; here torch.sqrt on a Python int
        M("causal_attention", "math.sqrt(q.shape[-1])", "torch.sqrt(q.shape[-1])",
          ("sqrt", "math.sqrt", "int", "tensor", "typeerror"),
          "scales with torch.sqrt(q.shape[-1]): torch.sqrt takes a tensor, and q.shape[-1] is a Python int, so "
          "the call raises"),
        # nearest: default causal_attention multiplying keys by queries, fresh tied_logits' .T on 3-D (another
        # cell); here k.T on the 4-D keys, which reverses every axis
        M("causal_attention", "q @ k.transpose(-2, -1)", "q @ k.T",
          SHAPE + ("transpose", ".t", "mt", "transpose(-2, -1)", "reverses", "every axis"),
          "writes the scores as q @ k.T, as for a matrix: on (B, H, T, hd) keys .T reverses all four axes to "
          "(hd, T, H, B), so the product raises"),
        # nearest: fresh2 attention_step's dropout_p in SDPA (another notebook); here F.dropout, whose training
        # flag defaults to True, on the attention weights
        M("causal_attention", "weights = scores.softmax(dim=-1)", "weights = F.dropout(scores.softmax(dim=-1), p=0.1)",
          ("dropout", "training", "random", "eval", "deterministic"),
          "adds attention dropout with F.dropout(p=0.1), whose training flag defaults to True: the weights are "
          "dropped and rescaled at every call, in evaluation and generation too"),
        # nearest: default self_attention calling SDPA without is_causal; here a float mask built as triu(ones) · -inf,
        # whose zeros become 0 · -inf = nan
        M("self_attention", "y = causal_attention(q, k, v)",
          "T = x.shape[1]\n    y = F.scaled_dot_product_attention(q, k, v, attn_mask=torch.triu(torch.ones(T, T), diagonal=1) "
          "* float(\"-inf\"))",
          ("nan", "-inf", "0 * inf", "mask", "float mask", "triu"),
          "builds an additive mask as triu(ones, 1) · -inf: the zeros of the allowed half become 0 · -inf = nan, "
          "so every output is nan"),
    ],
    "04": [
        # nearest: default rope_cache numbering positions from 1, offlist arange(max_seq_len - 1); here linspace,
        # whose end point is included, for the positions
        M("rope_cache", "torch.outer(torch.arange(max_seq_len, dtype=torch.float32), inv_freq)",
          "torch.outer(torch.linspace(0, max_seq_len, max_seq_len), inv_freq)",
          ("linspace", "positions", "integer", "endpoint", "arange", "0, 1, 2"),
          "numbers the positions with torch.linspace(0, max_seq_len, max_seq_len), which includes the end point: "
          "the steps are max_seq_len / (max_seq_len - 1), so position m gets a slightly larger angle"),
        # nearest: fresh rope_cache's missing parentheses, default's exponent without / head_dim; here integer floor
        # division of the negated exponents
        M("rope_cache", "-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim",
          "-torch.arange(0, head_dim, 2) // head_dim",
          ("integer division", "//", "floor", "exponent", "frequencies", "inv_freq"),
          "divides the integer exponents with //: -2i // head_dim floors to -1 for every i > 0, so all pairs but "
          "the first turn at the same frequency 1/theta"),
        # nearest: default rotate_half negating the wrong half and unseen's (x2, -x1); here the minus sign is dropped
        M("apply_rope", "return torch.cat((-x2, x1), dim=-1)", "return torch.cat((x2, x1), dim=-1)",
          ("sign", "negat", "minus", "-x2", "reflection", "rotate_half"),
          "swaps the halves without negating x2: each pair is reflected, not rotated, so norms and relative "
          "positions are no longer what RoPE promises"),
        # nearest: default apply_rope taking T from the feature axis, fresh4 from the table; here len(x), the batch
        M("apply_rope", "T = x.shape[-2]", "T = len(x)",
          SHAPE + ("len", "batch", "x.shape[-2]", "sequence length", "positions"),
          "reads the sequence length with len(x), which is the batch size of a (B, H, T, hd) tensor: the tables "
          "are sliced to B rows, which raises, or for a batch of one rotates every position by start_pos's angle"),
    ],
    "05": [
        # nearest: unseen swiglu's sigmoid gate, fresh4 lm_loss calling the class nn.CrossEntropyLoss (another
        # notebook); here the module class nn.SiLU called on the tensor, as if it were F.silu
        M("swiglu", "gate = F.silu(x @ w_gate.T)", "gate = nn.SiLU(x @ w_gate.T)",
          ("nn.silu", "module", "class", "f.silu", "instance", "constructor"),
          "calls the module class nn.SiLU on the pre-activation as if it were F.silu: the tensor lands in the "
          "constructor (as inplace), gate is a module, and gate * up raises"),
        # nearest: fresh4 Transformer's swapped arguments to Attention; here nn.Embedding's two sizes swapped
        M("Transformer", "nn.Embedding(config.vocab_size, config.d_model)", "nn.Embedding(config.d_model, config.vocab_size)",
          ("nn.embedding", "num_embeddings", "vocab_size", "order", "swapped", "shape", "embedding_dim"),
          "builds nn.Embedding(d_model, vocab_size), its sizes in the wrong order: the table has d_model rows of "
          "vocab_size features, so ids above d_model raise and no checkpoint loads"),
        # nearest: fresh param_counts forgetting the final norm; here every norm counted with a LayerNorm bias
        M("param_counts", '"norms": (2 * L + 1) * d,', '"norms": 2 * (2 * L + 1) * d,',
          ("bias", "rmsnorm", "layernorm", "gain", "norms", "twice"),
          "counts a weight and a bias per norm, as GPT-2's LayerNorm has: RMSNorm has a gain only"),
        # nearest: fresh3 param_counts sizing k and v with n_heads; here head_dim taken as d_model / n_kv_heads
        M("param_counts", "d, L, hd = config.d_model, config.n_layers, config.head_dim",
          "d, L, hd = config.d_model, config.n_layers, config.d_model // config.n_kv_heads",
          ("head_dim", "n_kv_heads", "n_heads", "gqa", "d_model //", "grouped"),
          "computes head_dim as d_model / n_kv_heads: right for MHA, but with GQA each head is n_heads / n_kv_heads "
          "times too wide, and every projection is oversized", regime=GQA),
    ],
    "06": [
        # nearest: default attention_step reading the cache length from the head axis; here length - 1, the index
        # of the last cached position
        M("attention_step", "start = past_k.shape[2]", "start = past_k.shape[2] - 1",
          START_POS + ("off by one", "off-by-one", "- 1", "past_k.shape[2]", "last cached"),
          "takes the index of the last cached position, past_k.shape[2] - 1, as the new tokens' first position: "
          "an empty cache slices the tables from -1 and raises, and after a prefill the new tokens are rotated "
          "one position too early"),
        # nearest: default generate_greedy never resetting the cache; here the cache is rebound to reset()'s None
        M("generate_greedy", "cache.reset()", "cache = cache.reset()",
          ("reset", "none", "returns none", "cache", "in place", "history"),
          "writes cache = cache.reset(), as if reset returned the emptied cache: it returns None, so the model runs "
          "without a cache and every decoding step sees only the previous token"),
        # nearest: default generate_greedy's loop one token short; here the prefill's token is added before a loop
        # of max_new_tokens more
        M("generate_greedy", "    idx, step_input = prompt, prompt",
          "    with torch.no_grad():  # prefill: the prompt gives the first new token\n"
          "        first = model(prompt, cache=cache)[:, -1].argmax(dim=-1, keepdim=True)\n"
          "    idx, step_input = torch.cat((prompt, first), dim=1), first",
          ("max_new_tokens", "one token too many", "off by one", "off-by-one", "length", "extra token"),
          "prefills outside the loop and keeps the token it gives, then still loops max_new_tokens times: "
          "max_new_tokens + 1 new tokens come back"),
        # nearest: heldout's in-place updates (other cells); here torch.cat writes into past_k with out=, which is
        # also its input
        M("cache_update", "k_all = torch.cat((past_k, k), dim=2)", "k_all = torch.cat((past_k, k), dim=2, out=past_k)",
          ("out=", "in place", "in-place", "overlap", "past_k", "memory location"),
          "grows the cache in place, as a list's append would, with torch.cat(..., out=past_k): past_k is one of "
          "the inputs, and torch refuses to write into it"),
    ],
    "07": [
        # nearest: default gqa_attention's n_rep upside down, fresh2's hard-coded 2; here the target head count
        # passed where the repeat factor belongs
        M("gqa_attention", "k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)",
          "k, v = repeat_kv(k, q.shape[1]), repeat_kv(v, q.shape[1])",
          ("n_rep", "n_heads", "repeat", "group", "factor", "kv heads"),
          "passes the number of query heads to repeat_kv, as if it took the target count: each kv head is "
          "repeated n_heads times, n_kv · n_heads heads; right only for one kv head (MQA)",
          regime="more than one kv head"),
        # nearest: default attention_step's (T, T) mask (another cell) and gqa_step's is_causal; here causal_mask
        # called with the total length only, which it takes as the query length
        M("gqa_step", "tinylm.causal_mask(T, start + T)", "tinylm.causal_mask(start + T)",
          START_POS + ("mask", "causal_mask", "kv_len", "q_len", "square"),
          "calls causal_mask(start + T) with one argument, which is q_len: a square (start + T) mask that fits "
          "the prefill but not the (T, start + T) scores of a step after it",
          regime="a cache that already holds positions"),
        # nearest: fresh counting the head always, fresh3 never; here the condition is inverted
        M("decode_bytes_per_token", "(1 if config.tie_embeddings else 2)", "(2 if config.tie_embeddings else 1)",
          ("tie_embeddings", "tied", "untied", "inverted", "lm_head", "embedding"),
          "inverts the tying condition: a tied model is counted with two vocabulary matrices, an untied one with one"),
        # nearest: fresh kv_cache_bytes hard-coding 4 bytes (another notebook), fresh4 train_step_costs' bfloat16
        # weights; here the weights read in float32 while the cache is in dtype
        M("decode_bytes_per_token", "weights = (matrices + L * per_block + d) * size",
          "weights = (matrices + L * per_block + d) * 4  # float32 master weights",
          ("dtype", "bfloat16", "itemsize", "4 bytes", "float32", "precision"),
          "counts the weights at 4 bytes, as the float32 master weights of training: a decoding step reads them "
          "in the dtype asked for, 2 bytes in bfloat16", regime="a dtype other than float32"),
    ],
    "08": [
        # nearest: nb08's top-p mistakes; here Hugging Face's shift of the drop mask written without .clone()
        M("top_p_filter", "drop_sorted = mass_before >= p",
          "drop_sorted = probs.cumsum(dim=-1) > p\n"
          "    drop_sorted[..., 1:] = drop_sorted[..., :-1]  # shift right: keep the crossing token\n"
          "    drop_sorted[..., 0] = False",
          ("clone", "overlap", "in place", "in-place", "shift", "memory location"),
          "shifts the drop mask right in place, as Hugging Face does but without .clone(): source and target "
          "overlap, and torch refuses the copy"),
        # nearest: default top_k_filter returning probabilities (another cell); here log_softmax handed to multinomial
        M("sample_next", "probs = logits.softmax(dim=-1)", "probs = logits.log_softmax(dim=-1)",
          ("log_softmax", "log-probabilities", "negative", "probabilities", "multinomial", "softmax"),
          "takes log_softmax, the 'stable' softmax, as the probabilities: multinomial gets negative weights and "
          "raises"),
        # nearest: default sample_next applying the temperature after the filters; here top-p is given probabilities
        M("sample_next", "logits = top_p_filter(logits, top_p)", "logits = top_p_filter(logits.softmax(dim=-1), top_p)",
          ("logits", "probabilities", "softmax", "twice", "top_p_filter", "nucleus"),
          "hands top_p_filter the probabilities instead of the logits: the filter takes a second softmax, measures "
          "the nucleus on a flattened distribution, and returns probabilities that are then softmaxed as logits",
          regime="top_p set"),
        # nearest: default generate leaving the model in eval mode; here the flag is restored on the top module only
        M("generate", "model.train(was_training)", "model.training = was_training",
          ("model.train(", "submodule", "children", "training flag", "dropout", "mode", "train mode"),
          "restores the mode by assigning model.training: only the top module's flag changes, its submodules "
          "(dropout among them) stay in eval mode", regime="a model with submodules"),
    ],
    "09": [
        # nearest: fresh4 get_batch slicing the shift along the batch; here the starts lack their new axis
        M("get_batch", "starts[:, None] + torch.arange(seq_len + 1)", "starts + torch.arange(seq_len + 1)",
          SHAPE + ("[:, none]", "new axis", "starts", "(b, t + 1)"),
          "adds the offsets to the starts without [:, None]: (B,) + (T + 1,) raises unless B = T + 1, and then "
          "gives one 1-D window instead of a batch"),
        # nearest: fresh get_batch's randperm; here randint's size passed as an int
        M("get_batch", "(batch_size,), generator=generator)", "batch_size, generator=generator)",
          ("size", "tuple", "(batch_size,)", "randint"),
          "passes randint's size as the int batch_size, as numpy.random.randint takes it: torch wants a tuple, and "
          "the call raises"),
        # nearest: fresh4 lm_loss calling the class nn.CrossEntropyLoss; here (target, input), scikit-learn's order
        M("lm_loss", "F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)",
          "F.cross_entropy(targets.flatten(), logits.flatten(0, 1), ignore_index=-100)",
          ("order", "swapped", "input", "target", "argument"),
          "passes (targets, logits), scikit-learn's (y_true, y_pred) order: F.cross_entropy takes (input, target), "
          "so it raises on the integer targets taken as logits"),
        # nearest: offlist lr_schedule dropping the 1/2 and fresh3's cos(π p / 2); here the sign of the cosine
        M("lr_schedule", "0.5 * (1 + math.cos(", "0.5 * (1 - math.cos(",
          ("sign", "cos", "cosine", "min_lr", "max_lr", "increases", "decay"),
          "writes 1 - cos instead of 1 + cos: the rate drops to min_lr right after the warmup and climbs back to "
          "max_lr by the last step"),
        # nearest: fresh attention_flops counting one sequence (another notebook); here one token short per sequence
        M("train_step_costs", "tokens = batch_size * seq_len", "tokens = batch_size * (seq_len - 1)",
          ("tokens", "seq_len", "off by one", "off-by-one", "every position", "targets"),
          "counts seq_len - 1 tokens per sequence, as if the last position had no target: x and y are both "
          "seq_len long, and the model runs on every position"),
    ],
    "10": [
        # nearest: default nll_sum_and_count dropping ignore_index; here it is passed positionally, into weight
        M("nll_sum_and_count", "ignore_index=ignore_index,", "ignore_index,",
          ("weight", "positional", "keyword", "ignore_index", "argument"),
          "passes ignore_index positionally: F.cross_entropy's third parameter is weight, so the int lands there "
          "and the call raises"),
        # nearest: default evaluate leaving eval mode and fresh2's model.train(); here the mode is remembered after
        # model.eval() has changed it
        M("evaluate", "    was_training = model.training\n    model.eval()",
          "    model.eval()\n    was_training = model.training",
          ("was_training", "mode", "train mode", "order", "restore", "eval"),
          "reads model.training after model.eval(): it is always False, so a model evaluated in train mode "
          "leaves in eval mode", regime="a model evaluated in train mode"),
        # nearest: default bigram_nll's log2; here log1p, log(1 + p)
        M("bigram_nll", "-probs.log()", "-probs.log1p()",
          ("log1p", "log(1 + p)", "log", "natural log"),
          "takes log1p for the log, as the 'accurate' logarithm: log1p(p) is log(1 + p), not log p"),
        # nearest: fresh lr_schedule's // in the progress (another notebook); here the mean loss floored with //
        M("evaluate", "loss = total / count", "loss = total // count",
          ("//", "floor", "integer division", "mean", "division"),
          "divides the summed NLL by the token count with //: the loss is floored to a whole number of nats"),
    ],
}
