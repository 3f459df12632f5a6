"""Every seed bug for notebooks 01-05, injected into the solution code of
the notebook itself, must fail the exercise's visible check with a message
that names the bug. Runs in-process: no kernel, a few seconds in all."""
from __future__ import annotations

import pytest

from autograder.checks import CheckFailed
from autograder.notebook_format import read
from autograder.authoring.gates import exercise_namespace, exercises, run_check
from autograder import course

# (assignment, answer grade id, text in the solution, replacement, phrase the message must contain)
BUGS = [
    # 01 embeddings
    ("01_embeddings", "embed", "return weight[ids]", "return weight[ids].detach()", "does not depend on weight"),
    ("01_embeddings", "one_hot_embed", ".to(weight.dtype)", "", "one_hot_embed raised RuntimeError"),
    ("01_embeddings", "tied_logits", "x @ weight.T", "x @ weight", "transposed weight"),
    ("01_embeddings", "tie_weights", "lm_head.weight = tok_emb.weight",
     "lm_head.weight = nn.Parameter(tok_emb.weight.detach().clone())", "head is a copy, not a share"),
    ("01_embeddings", "tie_weights", "lm_head.weight = tok_emb.weight",
     "lm_head.weight = nn.Parameter(tok_emb.weight.detach().T.clone())", "transposed weight"),
    ("01_embeddings", "tie_weights", "lm_head.weight = tok_emb.weight", "tok_emb.weight = lm_head.weight",
     "ties them the wrong way round"),
    # 02 RMSNorm
    ("02_rmsnorm", "rms_norm", "torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)",
     "1 / (x32.pow(2).mean(dim=-1, keepdim=True).sqrt() + eps)", "eps outside the sqrt"),
    ("02_rmsnorm", "rms_norm", "mean(dim=-1,", "mean(dim=1,", "mean over the wrong axis"),
    ("02_rmsnorm", "rms_norm", "mean(dim=-1,", "mean(dim=0,", "mean over the wrong axis"),
    ("02_rmsnorm", "rms_norm", "return weight * (x32 * inv_rms)", "return (x32 * inv_rms)", "missing gain"),
    ("02_rmsnorm", "rms_norm", "x32 = x.float()", "x32 = x", "x² taken in float16"),
    ("02_rmsnorm", "rms_norm", "(x32 * inv_rms).to(x.dtype)", "(x32 * inv_rms)", "cast it back to x.dtype"),
    ("02_rmsnorm", "layer_norm", "var = centred.pow(2).mean(dim=-1, keepdim=True)", "var = x.var(dim=-1, keepdim=True)",
     "unbiased variance"),
    ("02_rmsnorm", "layer_norm", "centred = x - x.mean(dim=-1, keepdim=True)", "centred = x",
     "mean not subtracted"),
    ("02_rmsnorm", "layer_norm", "var = centred.pow(2).mean(dim=-1, keepdim=True)",
     "var = x.pow(2).mean(dim=-1, keepdim=True) - x.mean(dim=-1, keepdim=True) ** 2", "catastrophic cancellation"),
    ("02_rmsnorm", "RMSNorm", "torch.ones(dim)", "torch.zeros(dim)", "gain initialised wrongly"),
    ("02_rmsnorm", "RMSNorm", "rms_norm(x, self.weight, self.eps)", "rms_norm(x, self.weight)", "eps ignored"),
    # 03 causal attention
    ("03_causal_attention", "causal_mask", "tril(diagonal=kv_len - q_len)", "tril(diagonal=kv_len - q_len - 1)",
     "mask off by one"),
    ("03_causal_attention", "causal_mask", "tril(diagonal=kv_len - q_len)", "tril(diagonal=kv_len - q_len + 1)",
     "mask off by one"),
    ("03_causal_attention", "causal_mask", "tril(diagonal=kv_len - q_len)", "tril()", "mask aligned top-left"),
    ("03_causal_attention", "causal_mask", "return allowed.tril(diagonal=kv_len - q_len)",
     "return ~allowed.tril(diagonal=kv_len - q_len)", "mask inverted"),
    ("03_causal_attention", "split_heads", "x = x.view(B, T, n_heads, d // n_heads)",
     "x = x.view(B, n_heads, T, d // n_heads).transpose(1, 2)", "wrong layout after reshape"),
    ("03_causal_attention", "split_heads", "return y.transpose(1, 2).reshape(B, T, H * hd)",
     "return y.reshape(B, T, H * hd)", "wrong layout after reshape"),
    ("03_causal_attention", "causal_attention", "scores.softmax(dim=-1)", "scores.softmax(dim=-2)",
     "softmax over the wrong dim"),
    ("03_causal_attention", "causal_attention", " / math.sqrt(q.shape[-1])", "", "missing scale"),
    ("03_causal_attention", "causal_attention", "math.sqrt(q.shape[-1])", "q.shape[-1]", "wrong scale"),
    ("03_causal_attention", "causal_attention", "causal_mask(q.shape[-2], k.shape[-2]).to(q.device)",
     "causal_mask(q.shape[-2], k.shape[-2]).to(q.device).T", "mask broadcast wrong"),
    ("03_causal_attention", "causal_attention", "causal_mask(q.shape[-2], k.shape[-2]).to(q.device)",
     "causal_mask(k.shape[-2], k.shape[-2])[:q.shape[-2]]", "mask aligned top-left"),
    ("03_causal_attention", "causal_attention", "causal_mask(q.shape[-2], k.shape[-2]).to(q.device)",
     "torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril(k.shape[-2] - q.shape[-2] - 1)", "mask off by one"),
    ("03_causal_attention", "causal_attention", 'float("-inf")', "0.0", "filled with 0 (or a number that close to it) instead of -inf"),
    ("03_causal_attention", "causal_attention", "weights = scores.softmax(dim=-1)",
     "weights = scores.exp() / scores.exp().sum(dim=-1, keepdim=True)", "without subtracting the row maximum"),
    ("03_causal_attention", "self_attention", "split_heads(F.linear(x, w), n_heads)",
     "F.linear(x, w).view(x.shape[0], n_heads, x.shape[1], -1)", "wrong layout after reshape"),
    ("03_causal_attention", "self_attention", "F.linear(merge_heads(y), w_o)",
     "F.linear(y.reshape(x.shape), w_o)", "wrong layout after reshape"),
    ("03_causal_attention", "self_attention", "split_heads(F.linear(x, w), n_heads)",
     "split_heads(x @ w, n_heads)", "transposed weight"),
    # 04 RoPE
    ("04_rope", "rope_cache", "-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim",
     "-torch.arange(head_dim // 2, dtype=torch.float32) / head_dim", "wrong frequency exponent"),
    ("04_rope", "rope_cache", "-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim",
     "torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim", "wrong frequency exponent"),
    ("04_rope", "rope_cache", "torch.cat((angles, angles), dim=-1)", "angles.repeat_interleave(2, dim=-1)",
     "wrong pairing convention"),
    ("04_rope", "apply_rope", "torch.cat((-x2, x1), dim=-1)",
     "torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)", "wrong pairing convention"),
    ("04_rope", "apply_rope", "[start_pos:start_pos + T]", "[:T]", "positions not offset"),
    ("04_rope", "apply_rope", "torch.cat((-x2, x1), dim=-1)", "torch.cat((x2, -x1), dim=-1)",
     "rotation direction flipped"),
    ("04_rope", "rotary_attention", "return tinylm.causal_attention(q, k, v)",
     "return tinylm.causal_attention(q, k, apply_rope(v, cos, sin, start_pos))", "RoPE applied to values"),
    ("04_rope", "rotary_attention", "k = apply_rope(k, cos, sin, start_pos)", "k = k", "RoPE applied to queries only"),
    # 05 SwiGLU and the block
    ("05_swiglu", "swiglu", "gate = F.silu(x @ w_gate.T)", "gate = x @ w_gate.T", "SiLU missing"),
    ("05_swiglu", "swiglu", "gate = F.silu(x @ w_gate.T)  # (B, T, d_ff): the nonlinearity lives on the gate only\n"
     "    up = x @ w_up.T ", "gate = x @ w_gate.T\n    up = F.silu(x @ w_up.T) ", "SiLU on the wrong branch"),
    ("05_swiglu", "swiglu", "up = x @ w_up.T ", "up = F.silu(x @ w_up.T) ", "SiLU on both branches"),
    ("05_swiglu", "swiglu", "return (gate * up) @ w_down.T", "return (F.silu(x @ w_up.T) * (x @ w_gate.T)) @ w_down.T",
     "gate and up swapped"),
    ("05_swiglu", "swiglu", "x @ w_gate.T", "x @ w_gate", "swiglu raised RuntimeError"),
    ("05_swiglu", "swiglu_hidden", "math.ceil", "math.floor", "rounded down"),
    ("05_swiglu", "swiglu_hidden", "return multiple * math.ceil(8 * d_model / 3 / multiple)", "return 4 * d_model",
     "GELU MLP's width"),
    ("05_swiglu", "pre_norm_block", "x = x + attn(attn_norm(x))  # the branch reads a normalised copy; the stream stays a sum\n"
     "    x = x + mlp(mlp_norm(x))", "x = attn_norm(x + attn(x))\n    x = mlp_norm(x + mlp(x))", "post-norm"),
    ("05_swiglu", "pre_norm_block", "x = x + attn(attn_norm(x))", "x = attn(attn_norm(x))",
     "missing residual around attention"),
    ("05_swiglu", "pre_norm_block", "x = x + mlp(mlp_norm(x))", "x = mlp(mlp_norm(x))", "missing residual around the MLP"),
    ("05_swiglu", "pre_norm_block", "x = x + mlp(mlp_norm(x))", "x = x + mlp(attn_norm(x))", "attn_norm used for both"),
    ("05_swiglu", "pre_norm_block", "attn(attn_norm(x))  # the branch reads a normalised copy; the stream stays a sum\n"
     "    x = x + mlp(mlp_norm(x))", "attn(mlp_norm(x))\n    x = x + mlp(attn_norm(x))", "norms swapped"),
    ("05_swiglu", "Transformer", "q, k = apply_rope(q, cos, sin, start_pos), apply_rope(k, cos, sin, start_pos)",
     "q, k = q, k", "RoPE missing"),
    ("05_swiglu", "Transformer", "self.k_proj = nn.Linear(config.d_model, config.n_kv_heads * config.head_dim, bias=False)",
     "self.key = nn.Linear(config.d_model, config.n_kv_heads * config.head_dim, bias=False)",
     "parameter names differ from tinylm's"),
    ("05_swiglu", "Transformer", "x = x + self.attn(self.attn_norm(x)", "x = self.attn(self.attn_norm(x)", "missing residual"),
    ("05_swiglu", "Transformer", "return x + self.mlp(self.mlp_norm(x))", "return x + self.mlp(self.attn_norm(x))",
     "attn_norm used for both"),
    ("05_swiglu", "Transformer", "        self.lm_head.weight = self.tok_emb.weight  # one Parameter, two names\n", "",
     "the head is not tied"),
    ("05_swiglu", "Transformer", "return tied_logits(self.norm(x), self.lm_head.weight)",
     "return tied_logits(x, self.lm_head.weight)", "self.norm never ran"),
    # two bugs that shipped in public projects: a checkpoint in the interleaved RoPE layout, head_dim set apart
    ("04_rope", "interleaved_to_half", "k_proj = interleaved_to_half(wk, n_kv_heads)", "k_proj = wk", "forgetting k"),
    ("04_rope", "interleaved_to_half", "pairs = w.reshape(n_heads, hd // 2, 2, d_in)",
     "pairs = w.reshape(1, rows // 2, 2, d_in)", "over the whole matrix instead of per head"),
    ("05_swiglu", "Transformer", "self.o_proj = nn.Linear(config.n_heads * config.head_dim, config.d_model, bias=False)",
     "self.o_proj = nn.Linear(config.d_model, config.d_model, bias=False)", "head_dim taken as d_model // n_heads"),
    ("05_swiglu", "param_counts", "q_and_o = 2 * d * config.n_heads * hd", "q_and_o = 2 * d * d",
     "head_dim taken as d_model // n_heads"),
    # the accounting exercises of 03 and 05: what the layer and the model cost
    ("03_causal_attention", "attention_flops", "projection = 2 * B * T * d * d", "projection = B * T * d * d",
     "the factor 2 of a multiply-add"),
    ("03_causal_attention", "attention_flops", "per_head = 2 * T * T * head_dim", "per_head = 2 * T * head_dim",
     "counted without T"),
    ("03_causal_attention", "attention_flops", "per_head = 2 * T * T * head_dim", "per_head = T * T * head_dim",
     "halved for the causal mask"),
    ("03_causal_attention", "attention_flops", '"scores": B * n_heads * per_head, "mix": B * n_heads * per_head',
     '"scores": 0, "mix": 0', "the attention matmuls are missing"),
    ("05_swiglu", "param_counts", '"lm_head": 0 if config.tie_embeddings else config.vocab_size * d',
     '"lm_head": config.vocab_size * d', "the tied head counted twice"),
    ("05_swiglu", "param_counts", "k_and_v = 2 * d * config.n_kv_heads * hd", "k_and_v = 2 * d * config.n_heads * hd",
     "k_proj and v_proj sized like q_proj"),
    ("05_swiglu", "param_counts", '"mlp": L * 3 * d * config.d_ff', '"mlp": L * 2 * d * config.d_ff',
     "SwiGLU's third matrix forgotten"),
    ("05_swiglu", "param_counts", '"attention": L * (q_and_o + k_and_v)',
     '"attention": L * (q_and_o + k_and_v + 2 * config.n_heads * hd + 2 * config.n_kv_heads * hd)',
     "biases that do not exist"),
    ("05_swiglu", "param_counts", '"norms": (2 * L + 1) * d', '"norms": 2 * L * d', "the final norm"),
]


@pytest.mark.parametrize("assignment, grade_id, old, new, phrase", BUGS, ids=[b[4][:40] for b in BUGS])
def test_injected_bug_is_named(assignment, grade_id, old, new, phrase):
    ns = exercise_namespace(assignment, {grade_id: (old, new)})
    with pytest.raises(CheckFailed) as err:
        run_check(assignment, grade_id, ns)
    assert phrase in str(err.value), f"message does not name the bug:\n{err.value}"


@pytest.mark.parametrize("assignment", course.assignments())
def test_unmodified_solutions_pass_visible_and_hidden_checks(assignment):
    ns = exercise_namespace(assignment)
    exs = exercises(read(course.source_notebook(assignment)))
    assert exs
    for ex in exs:
        run_check(assignment, ex.grade_id, ns, hidden=True)


def test_every_exercise_of_part_one_has_an_injected_bug():
    covered = {(a, g) for a, g, *_ in BUGS}
    for a in ("01_embeddings", "02_rmsnorm", "03_causal_attention", "04_rope", "05_swiglu"):
        if a in course.assignments():
            for ex in exercises(read(course.source_notebook(a))):
                assert (a, ex.grade_id) in covered, f"{a}/{ex.grade_id}: no injected bug tests its check"


def test_release_answers_fail_every_check_in_process():
    """The trusted recheck path: answers from the untouched release notebook,
    setup and checks from the source, every exercise fails."""
    for a in course.assignments():
        ns = exercise_namespace(a, answers_from=course.release_notebook(a))
        for ex in exercises(read(course.source_notebook(a))):
            with pytest.raises(CheckFailed, match="not implemented yet"):
                run_check(a, ex.grade_id, ns, hidden=True)
