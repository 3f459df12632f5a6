"""A sixth held-out set of learner mistakes ("fresh3"): mistakes in none of the
project's mutation lists (nbNN.py, heldout.py, unseen.py, offlist.py,
fresh.py, fresh2.py), which were read first precisely to avoid them. Written
from the learner's notebooks, the reference answers, tinylm and the seed note
only, without reading the checks, their tests or the diagnostics benchmark,
and never run through a check. Not part of the default run:
`python benchmarks/bench_diagnostics.py --set fresh3`.

Every mistake is one substitution in one answer cell's solution, of the kind
a learner makes writing the code from the prose or from code seen elsewhere:
an API read for another (gather for a lookup, var_mean's order, max's values
for argmax, hardswish for Swish, `.to(tensor)` taking the dtype too, Hugging
Face's `model.device`), Gemma's `1 + weight` gain, nanoGPT's
last-position shortcut and its "decay to a tenth", Hugging Face's
`cos.unsqueeze(1)` and `max_length`, Meta's (B, T, H, hd) layout, fancy
indexing where gather belongs, chained indexing, a fused QKV split after the
heads, a typo that registers a new Parameter, a stop-gradient, a state not
restored when generation is interrupted, an int32 batch, and counting slips
in the accounting exercises (multiply-adds for FLOPs, MiB for bytes, per
block for the whole model, the new token counted as cached, GQA taken to
shrink attention's arithmetic). The entries with a `regime` are right in the
default situation and wrong only there (a KV cache with fewer queries than
keys, grouped kv heads, an untied head, ties at the k-th logit, a batch of
more than one row, generation interrupted by an exception, a min_lr other
than a tenth of the peak).

The comment above each entry names the nearest entry of the other lists and
how this one differs; a mistake counts as in a list when the same cell
already holds the same wrong idea. `benchmarks/verify_unseen.py --set fresh3`
proves each one a real bug against tinylm, PyTorch built-ins, the FLOP
counter or closed forms.
"""
from __future__ import annotations

from .unseen import Unseen as M

# notebook 08's generate: the decoding loop inside try/finally, and the same loop without the guard
_SAMPLED_STEP = ("logits = model(idx)[:, -1]                  # (B, V): the last position predicts the next token\n",
                 "next_id = sample_next(logits, temperature, top_k, top_p, generator)  # (B,)\n",
                 "idx = torch.cat((idx, next_id[:, None]), dim=1)                      # (B, T + 1)\n")
GUARDED_LOOP = ("    try:\n        with torch.no_grad():\n            for _ in range(max_new_tokens):\n"
                + "".join(" " * 16 + line for line in _SAMPLED_STEP)
                + "    finally:\n        model.train(was_training)")
UNGUARDED_LOOP = ("    with torch.no_grad():\n        for _ in range(max_new_tokens):\n"
                  + "".join(" " * 12 + line for line in _SAMPLED_STEP)
                  + "    model.train(was_training)")

GQA = "grouped kv heads (n_kv_heads < n_heads)"
GRADIENT = ("gradient", "backward", "detach", "autograd", "grad")

MUTATIONS = {
    "01": [
        # nearest: fresh2 embed with index_select (1-D index only); here gather, which picks one number per id, not a row
        M("embed", "return weight[ids]", "return torch.gather(weight, 0, ids)",
          ("gather", "one element", "one number", "a row", "whole row", "(b, t, d)"),
          "looks the ids up with torch.gather(weight, 0, ids), which picks one entry per id (weight[ids[b, t], t]), "
          "not a row: the result has the ids' shape, and raises once a sequence is longer than d_model"),
        # nearest: nb01 one_hot_embed with num_classes=d_model or inferred; here the largest id, V - 1
        M("one_hot_embed", "num_classes=weight.shape[0]", "num_classes=weight.shape[0] - 1",
          ("num_classes", "v - 1", "largest id", "off by one", "off-by-one", "one class", "width"),
          "passes the largest id, V - 1, as num_classes: the one-hot rows are one short of the weight's V rows, and "
          "id V - 1 is out of range"),
        # nearest: nb01 embed detaching the lookup (another cell); here the tied head's use of the matrix is detached
        M("tied_logits", "return x @ weight.T", "return x @ weight.detach().T",
          GRADIENT + ("depend on weight",),
          "detaches the matrix in the head, as if the tied head should not train the embedding a second time: the "
          "logits are right, but the head's share of the gradient never reaches the shared weight"),
        # nearest: nb02 RMSNorm registering its gain under another name; here a typo registers a new Parameter
        M("tie_weights", "lm_head.weight = tok_emb.weight", "lm_head.weights = tok_emb.weight",
          ("weights", "typo", "attribute", "new parameter", "not tied", "same parameter", "is tok_emb.weight"),
          "assigns to lm_head.weights (a typo): nn.Module registers the embedding as a new Parameter under that name, "
          "and the head keeps its own weight"),
    ],
    "02": [
        # nearest: nb02 RMSNorm detaching the gain; here the per-token statistic is detached in rms_norm
        M("rms_norm", "keepdim=True) + eps)  # (..., 1): one statistic per token",
          "keepdim=True) + eps).detach()  # (..., 1): a per-token constant",
          GRADIENT + ("inv_rms", "constant"),
          "detaches the inverse RMS, treating the statistic as a constant: the forward pass is exact, the gradient "
          "with respect to x is not (the path through the mean square is cut)"),
        # nearest: nb02 layer_norm's E[x²] - E[x]² and torch.var (unbiased); here var_mean, unpacked in the wrong order
        M("layer_norm", "    centred = x - x.mean(dim=-1, keepdim=True)              # (..., d)\n"
          "    var = centred.pow(2).mean(dim=-1, keepdim=True)         # (..., 1): biased, divides by d\n",
          "    mean, var = torch.var_mean(x, dim=-1, keepdim=True, correction=0)  # both statistics in one pass\n"
          "    centred = x - mean\n",
          ("var_mean", "order", "swapped", "(var, mean)", "unpack", "nan", "centred by"),
          "unpacks torch.var_mean as (mean, var): it returns (var, mean), so the input is centred by its variance and "
          "divided by the square root of its mean (nan where the mean is negative)"),
        # nearest: offlist RMSNorm applying the gain twice; here Gemma's 1 + weight, on a gain that starts at 1
        M("RMSNorm", "return rms_norm(x, self.weight, self.eps)", "return rms_norm(x, 1 + self.weight, self.eps)",
          ("1 + weight", "1 + self.weight", "gemma", "offset", "twice", "double", "factor 2", "initialised"),
          "scales by 1 + weight as Gemma's RMSNorm does, but the gain starts at ones (Gemma's starts at zeros): a fresh "
          "norm doubles its output, and a Llama checkpoint's gains are off by one"),
    ],
    "03": [
        # nearest: nb03 causal_mask built as (kv_len, q_len) (in causal_mask) and causal_attention's square mask from
        # the query length; here the call passes causal_mask's arguments swapped
        M("causal_attention", "causal_mask(q.shape[-2], k.shape[-2])", "causal_mask(k.shape[-2], q.shape[-2])",
          ("(kv_len, q_len)", "order", "swapped", "arguments", "q_len", "kv_len", "fewer queries", "cache"),
          "passes (kv_len, q_len) to causal_mask: the same square mask while queries and keys are as many, a "
          "(Tk, Tq) mask that cannot mask (Tq, Tk) scores with a cache",
          regime="fewer queries than keys (q_len < kv_len, a KV cache)"),
        # nearest: nb03 causal_mask returning a float mask (another cell); here .to(q) takes q's dtype with its device
        M("causal_attention", "causal_mask(q.shape[-2], k.shape[-2]).to(q.device)",
          "causal_mask(q.shape[-2], k.shape[-2]).to(q)",
          (".to(q)", "dtype", "float", "bool", "~", "invert"),
          "moves the mask with .to(q), which copies q's dtype as well as its device: the mask becomes float and ~mask "
          "raises"),
        # nearest: nb03 self_attention swapping the k and v projections; here one fused projection, split after the heads
        M("self_attention", "q, k, v = (split_heads(F.linear(x, w), n_heads) for w in (w_q, w_k, w_v))",
          "q, k, v = split_heads(F.linear(x, torch.cat((w_q, w_k, w_v))), n_heads).chunk(3, dim=-1)  # fused",
          ("fused", "qkv", "chunk", "split", "before split_heads", "mixes", "layout"),
          "fuses the three projections into one, as nanoGPT does, but splits heads before separating q, k and v: each "
          "head's slice then holds features of q, k and v of several heads"),
        # nearest: fresh attention_flops counting only the causal triangle; here the projections in multiply-adds
        M("attention_flops", "projection = 2 * B * T * d * d ", "projection = B * T * d * d ",
          ("multiply-add", "macs", "factor 2", "2 flops", "twice", "half", "qkv_proj", "out_proj", "projection"),
          "counts the projections in multiply-adds, not FLOPs: a matmul does a multiplication and an addition per "
          "multiply-add, 2 FLOPs"),
    ],
    "04": [
        # nearest: nb04 rope_cache numbering the positions from 1; here torch.outer's arguments change places
        M("rope_cache", "torch.outer(torch.arange(max_seq_len, dtype=torch.float32), inv_freq)",
          "torch.outer(inv_freq, torch.arange(max_seq_len, dtype=torch.float32))",
          ("outer", "order", "transposed", "shape", "(max_seq_len, head_dim)", "positions", "rows", "axes"),
          "passes (inv_freq, positions) to torch.outer: the angles come out (head_dim/2, max_seq_len), and the tables "
          "(head_dim/2, 2 · max_seq_len) instead of (max_seq_len, head_dim)"),
        # nearest: nb04 apply_rope slicing cos up to T; here Hugging Face's unsqueeze(1), written for (B, T, hd) tables
        M("apply_rope", "cos = cos[start_pos:start_pos + T].to(x.dtype)",
          "cos = cos[start_pos:start_pos + T].to(x.dtype).unsqueeze(1)",
          ("unsqueeze", "broadcast", "(t, 1, hd)", "heads", "positions", "shape", "axis"),
          "copies Hugging Face's cos.unsqueeze(1), written for (B, T, hd) tables: tinylm's (T, hd) table becomes "
          "(T, 1, hd), which broadcasts the positions against the heads (right only for one new token)"),
        # nearest: offlist rotate_half halving along the positions; here q and k rotated in Meta's (B, T, H, hd) layout
        M("rotary_attention",
          "    q = apply_rope(q, cos, sin, start_pos)  # position enters the scores only\n"
          "    k = apply_rope(k, cos, sin, start_pos)\n",
          "    q = apply_rope(q.transpose(1, 2), cos, sin, start_pos).transpose(1, 2)  # Meta's layout: (B, T, H, hd)\n"
          "    k = apply_rope(k.transpose(1, 2), cos, sin, start_pos).transpose(1, 2)\n",
          ("layout", "transpose", "(b, t, h, hd)", "heads", "positions", "axis"),
          "transposes q and k to (B, T, H, hd) before rotating, as Meta's reference Llama lays them out: apply_rope "
          "then reads the heads as positions"),
    ],
    "05": [
        # nearest: nb05 swiglu with GELU, softplus or ReLU; here Swish is taken to be torch's hardswish
        M("swiglu", "gate = F.silu(x @ w_gate.T)", "gate = F.hardswish(x @ w_gate.T)",
          ("hardswish", "silu", "swish", "activation", "piecewise", "approximation"),
          "takes Swish to be F.hardswish, a piecewise-linear approximation: SwiGLU's Swish is SiLU, a · sigmoid(a)"),
        # nearest: unseen's parallel block (the MLP reads x); here the MLP reads h, but its output is added to x
        M("pre_norm_block", "    x = x + attn(attn_norm(x))  # the branch reads a normalised copy; the stream stays a sum\n"
          "    x = x + mlp(mlp_norm(x))    # the MLP reads the stream after attention has written to it\n"
          "    return x",
          "    h = x + attn(attn_norm(x))  # the formula's h\n"
          "    return x + mlp(mlp_norm(h))",
          ("residual", "h +", "attention's output", "attention branch", "lost", "dropped", "stream"),
          "names the stream after attention h, as the formula does, but adds the MLP's output to x: the attention "
          "branch feeds the MLP and then falls out of the residual stream"),
        # nearest: offlist Transformer computing the logits without the final norm; here only the last position's
        M("Transformer", "return tied_logits(self.norm(x), self.lm_head.weight)",
          "return tied_logits(self.norm(x[:, [-1]]), self.lm_head.weight)",
          ("last position", "every position", "(b, 1, v)", "all positions", "training", "shape", "nanogpt", "logits"),
          "copies nanoGPT's inference shortcut x[:, [-1]]: the model returns (B, 1, V), the last position's logits "
          "only, so training and evaluation have no logits for the other positions"),
        # nearest: fresh2 param_counts counting two MLP matrices; here no component is multiplied by n_layers
        M("param_counts", '"attention": L * (q_and_o + k_and_v),\n            "mlp": L * 3 * d * config.d_ff,',
          '"attention": q_and_o + k_and_v,\n            "mlp": 3 * d * config.d_ff,',
          ("n_layers", "per block", "every block", "all blocks", "one block", "summed", "l *", "layers"),
          "counts the attention and the MLP of one block: the components are summed over all n_layers blocks"),
        # nearest: heldout's k_proj with n_heads outputs (the module); here the count of k_proj and v_proj
        M("param_counts", "k_and_v = 2 * d * config.n_kv_heads * hd", "k_and_v = 2 * d * config.n_heads * hd",
          ("n_kv_heads", "n_heads", "kv heads", "gqa", "k_proj", "v_proj", "grouped"),
          "sizes k_proj and v_proj with n_heads: right for MHA, n_heads / n_kv_heads times too many with GQA",
          regime=GQA),
    ],
    "06": [
        # nearest: fresh kv_cache_bytes counting bits; here the bytes are converted to MiB
        M("kv_cache_bytes", "return per_position * seq_len * batch_size * dtype.itemsize",
          "return per_position * seq_len * batch_size * dtype.itemsize / 2**20  # in MiB",
          ("mib", "2**20", "1024", "unit", "megabyte", "float", "not an int"),
          "reports MiB, the unit memory is quoted in, as a float: the exercise asks for bytes, an int"),
        # nearest: fresh decode_bytes_per_token sizing the cache with n_heads (another cell); here d_model per position
        M("kv_cache_bytes", "per_position = 2 * config.n_layers * config.n_kv_heads * config.head_dim",
          "per_position = 2 * config.n_layers * config.d_model",
          ("n_kv_heads", "d_model", "kv heads", "gqa", "grouped"),
          "sizes each position's keys and values by d_model, as in MHA: with GQA they are n_kv_heads · head_dim, "
          "n_heads / n_kv_heads times fewer", regime=GQA),
        # nearest: nb06 generate_greedy with argmin; here max(...)[0], the values, not the indices
        M("generate_greedy", "next_id = logits.argmax(dim=-1, keepdim=True) ",
          "next_id = logits.max(dim=-1, keepdim=True)[0] ",
          ("max(", "values", "indices", "argmax", "[1]", "float", "dtype"),
          "takes logits.max(dim=-1)[0], the largest values, where the indices ([1], or argmax) are the token ids: "
          "float values are appended to the ids"),
        # nearest: nb06 generate_greedy's one token too few; here max_new_tokens is read as the total length
        M("generate_greedy", "for _ in range(max_new_tokens):", "for _ in range(max_new_tokens - prompt.shape[1]):",
          ("max_new_tokens", "max_length", "total length", "prompt length", "new tokens", "fewer"),
          "reads max_new_tokens as the total length (Hugging Face's max_length) and subtracts the prompt: fewer new "
          "tokens than asked, none at all when the prompt is as long"),
    ],
    "07": [
        # nearest: nb07 gqa_attention's n_rep upside down and fresh2's hard-coded 2; here a true division
        M("gqa_attention", "n_rep = q.shape[1] // k.shape[1]", "n_rep = q.shape[1] / k.shape[1]",
          ("float", "//", "integer", "n_rep", "division", "expand"),
          "computes n_rep with /, a float, which expand and reshape refuse"),
        # nearest: nb07 gqa_step's values from k_proj; here the queries are split into n_kv_heads heads
        M("gqa_step", "q = attn.q_proj(x).view(B, T, attn.n_heads, attn.head_dim)",
          "q = attn.q_proj(x).view(B, T, attn.n_kv_heads, attn.head_dim)",
          ("n_heads", "n_kv_heads", "queries", "q_proj", "query heads", "copy"),
          "splits the queries into n_kv_heads heads, copied from the key line: right for MHA, a size error with GQA",
          regime=GQA),
        # nearest: fresh2 decode_bytes_per_token reading max_seq_len positions; here one position more than cached
        M("decode_bytes_per_token", "kv_cache = 2 * L * config.n_kv_heads * hd * context_len * size",
          "kv_cache = 2 * L * config.n_kv_heads * hd * (context_len + 1) * size  # and the new token's own",
          ("context_len", "off by one", "off-by-one", "+ 1", "new token", "cached positions", "one position"),
          "counts the new token's own key and value as read from the cache: one position more than the context_len "
          "cached ones"),
        # nearest: fresh decode_bytes_per_token counting a tied head twice; here an untied head is not counted
        M("decode_bytes_per_token", "matrices = config.vocab_size * d * (1 if config.tie_embeddings else 2)",
          "matrices = config.vocab_size * d",
          ("untied", "tie_embeddings", "lm_head", "own matrix", "second", "vocab"),
          "counts one vocabulary matrix whatever the tying: an untied head's own matrix, read every step, is left out",
          regime="tie_embeddings=False"),
    ],
    "08": [
        # nearest: nb08 top_k_filter returning the kept values sorted; here scattered back in place, ties dropped
        M("top_k_filter", 'kth = logits.topk(k, dim=-1).values[..., -1:]          # (..., 1): the k-th largest value\n'
          '    return logits.masked_fill(logits < kth, float("-inf"))',
          'top = logits.topk(k, dim=-1)\n'
          '    return torch.full_like(logits, float("-inf")).scatter(-1, top.indices, top.values)',
          ("tie", "exactly k", "equal"),
          "scatters the k largest back into a -inf tensor: exactly k survive, so a logit tied with the k-th largest is "
          "dropped where the prose keeps it", regime="logits tied with the k-th largest"),
        # nearest: nb08 top_p_filter's mask mapped back with gather; here the sort itself is done with fancy indexing
        M("top_p_filter", "sorted_logits, order = logits.sort(dim=-1, descending=True)",
          "order = logits.argsort(dim=-1, descending=True)\n    sorted_logits = logits[..., order]",
          ("gather", "indexing", "[..., order]", "argsort", "every row", "(b, b, v)"),
          "sorts with logits[..., order], which for a batch picks every row's order from every row ((B, B, V)); "
          "gather(-1, order) is the per-row lookup"),
        # nearest: fresh2 sample_next's bare squeeze() and nb08's one draw for the batch; here [0], the first row's draw
        M("sample_next", "generator=generator).squeeze(-1)", "generator=generator)[0]",
          ("[0]", "first row", "batch", "(b,)", "every row", "one sample"),
          "takes [0] of multinomial's (B, 1) draws: the (1,) draw of the first row, right for a batch of one",
          regime="a batch of more than one row"),
        # nearest: nb08 generate leaving eval mode on; here the mode is restored only when the loop finishes
        M("generate", GUARDED_LOOP, UNGUARDED_LOOP,
          ("finally", "exception", "interrupt", "restore", "train mode", "try/finally", "was_training"),
          "restores the caller's mode after the loop without try/finally: a generation interrupted by an exception "
          "(a KeyboardInterrupt, a bad argument) leaves the model in eval mode, and training goes on without dropout",
          regime="generation interrupted by an exception"),
    ],
    "09": [
        # nearest: nb09 get_batch without .long() (uint8) or as floats; here int32, which cross_entropy refuses
        M("get_batch", "window = data[idx].long()", "window = data[idx].int()",
          ("int32", "int64", "long", "dtype", ".int()", "cross_entropy", "target"),
          "casts the windows with .int(), int32: F.cross_entropy takes int64 targets only, so the loss raises"),
        # nearest: nb09 lm_loss with .view on sliced logits; here the (B, T, V) logits go to cross_entropy unflattened
        M("lm_loss", "F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)",
          "F.cross_entropy(logits, targets, ignore_index=-100)",
          ("flatten", "axis 1", "classes", "(n, c)", "(b, t, v)", "dim 1"),
          "passes the (B, T, V) logits unflattened: cross_entropy reads axis 1, the positions, as the classes"),
        # nearest: fresh2 lr_schedule forgetting π; here "half a cosine" is read as cos(π p / 2)
        M("lr_schedule", "math.cos(math.pi * min(progress, 1.0))", "math.cos(math.pi / 2 * min(progress, 1.0))",
          ("half", "π/2", "pi / 2", "quarter", "min_lr", "cos(π"),
          "reads 'half a cosine' as cos(π p / 2): at the last step the rate is halfway between max_lr and min_lr"),
        # nearest: nb09 lr_schedule decaying to 0 plus min_lr; here min_lr is nanoGPT's tenth of the peak
        M("lr_schedule", "    return min_lr + 0.5 * (1 + math.cos(",
          "    min_lr = max_lr / 10                                # Chinchilla: decay to a tenth of the peak\n"
          "    return min_lr + 0.5 * (1 + math.cos(",
          ("min_lr", "max_lr / 10", "tenth", "hard-coded", "ignored", "argument"),
          "overwrites min_lr with max_lr / 10, nanoGPT's Chinchilla default: right whenever the caller asks for a tenth",
          regime="a min_lr other than max_lr / 10"),
        # nearest: nb09 train_step without zero_grad; here zero_grad by hand, on gradients that do not exist yet
        M("train_step", "    optimizer.zero_grad(set_to_none=True)        # gradients accumulate otherwise\n",
          "    for p in model.parameters():\n        p.grad.zero_()  # gradients accumulate otherwise\n",
          ("grad is none", "nonetype", "p.grad", "zero_grad", "first step", "zero_", "attributeerror", "no gradient yet"),
          "zeroes each p.grad by hand before backward: on the first step every grad is still None, and the call raises"),
        # nearest: fresh2 train_step_costs leaving the attention matmuls out; here they are counted with n_kv_heads
        M("train_step_costs", "attention_matmuls = 4 * seq_len * config.n_heads * hd",
          "attention_matmuls = 4 * seq_len * config.n_kv_heads * hd",
          ("n_heads", "n_kv_heads", "query heads", "gqa", "scores", "attention", "repeated"),
          "counts attention's matmuls with n_kv_heads, as if GQA shrank them: every query head still scores and mixes "
          "its own T x T (the keys are repeated, not the work saved)", regime=GQA),
    ],
    "10": [
        # nearest: none about the device in evaluate; Hugging Face's model.device, which nn.Module does not have
        M("evaluate", "dev = next(model.parameters()).device", "dev = model.device  # as on a Hugging Face model",
          ("device", "model.device", "attribute", "nn.module", "parameters()", "hugging face"),
          "reads model.device, which Hugging Face models have and a plain nn.Module does not: evaluate raises "
          "AttributeError on tinylm's and the learner's models"),
        # nearest: nb10 bigram_nll normalising columns and scoring pairs backwards; here the pair key is built backwards
        M("bigram_nll", "train[:-1] * 256 + train[1:]", "train[:-1] + 256 * train[1:]",
          ("prev * 256", "previous byte", "next byte", "transposed", "order", "pair key", "direction", "encod"),
          "encodes the pair as prev + 256 · next: the table's row is then the next byte, so the rows normalise "
          "p(previous | next), not p(next | previous)"),
        # nearest: fresh2 bigram_nll's row sums without keepdim; here the lookup is chained, [rows][cols]
        M("bigram_nll", "probs.log()[val[:-1], val[1:]]", "probs.log()[val[:-1]][val[1:]]",
          ("[a][b]", "[prev][next]", "chained", "indexing", "[val[:-1], val[1:]]", "whole rows"),
          "indexes the table as [prev][next], chained: the second index selects rows of the first result instead of "
          "a column per pair, so the mean runs over whole rows (or an index is out of range)"),
    ],
}
