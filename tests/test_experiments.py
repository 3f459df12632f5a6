"""tinylm.experiments: each variant is what its name says (checked against
torch's own functions or a hand-written formula), and each experiment trains,
returns curves of the stated shape and is deterministic under a seed."""
from __future__ import annotations

import dataclasses
import math

import pytest
import torch
import torch.nn.functional as F

import tinylm
from tinylm import experiments as E

TINY = dict(d_model=16, n_layers=2, n_heads=2, max_seq_len=32)


@pytest.fixture(scope="module")
def corpus():
    return tinylm.course_corpus()


def test_layer_norm_variant_is_torch_layer_norm():
    model = E.with_layer_norm(tinylm.Transformer(tinylm.ModelConfig(**TINY)))
    norm = model.blocks[0].attn_norm
    torch.nn.init.normal_(norm.weight), torch.nn.init.normal_(norm.bias)
    x = torch.randn(3, 5, 16)
    want = F.layer_norm(x, (16,), norm.weight, norm.bias, eps=model.config.norm_eps)
    torch.testing.assert_close(norm(x), want)


def test_no_norm_variant_is_the_identity():
    model = E.without_norm(tinylm.Transformer(tinylm.ModelConfig(**TINY)))
    x = torch.randn(2, 4, 16)
    for norm in (model.norm, model.blocks[1].mlp_norm):
        assert torch.equal(norm(x), x)


def test_unscaled_attention_differs_from_sdpa_by_the_scale_exactly():
    config = tinylm.ModelConfig(**TINY)
    torch.manual_seed(1)
    model = tinylm.Transformer(config)
    E.without_positions(model)  # no rotation: q and k are the projections themselves
    attn = model.blocks[0].attn
    E.with_unscaled_attention(model)
    unscaled = model.blocks[0].attn
    x = torch.randn(2, 7, 16)
    q = (x @ attn.q_proj.weight.T).view(2, 7, 2, 8).transpose(1, 2)  # (B, nh, T, hd)
    k = (x @ attn.k_proj.weight.T).view(2, 7, 2, 8).transpose(1, 2)
    v = (x @ attn.v_proj.weight.T).view(2, 7, 2, 8).transpose(1, 2)
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1.0)  # no 1/sqrt(hd)
    want = y.transpose(1, 2).reshape(2, 7, 16) @ attn.o_proj.weight.T
    got = unscaled(x, model.rope_cos, model.rope_sin)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    scaled = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(2, 7, 16) @ attn.o_proj.weight.T
    assert not torch.allclose(got, scaled, atol=1e-4)


def test_post_norm_block_normalises_after_each_residual_sum():
    config = tinylm.ModelConfig(**TINY)
    model = E.with_post_norm(tinylm.Transformer(config))
    block = model.blocks[0]
    x = torch.randn(1, 5, 16) * 3
    cos, sin = model.rope_cos, model.rope_sin
    h = tinylm.rms_norm(x + block.attn(x, cos, sin), block.attn_norm.weight, config.norm_eps)  # norm(x + attn(x))
    want = tinylm.rms_norm(h + block.mlp(h), block.mlp_norm.weight, config.norm_eps)           # norm(h + mlp(h))
    torch.testing.assert_close(block(x, cos, sin), want)
    assert torch.allclose(block(x, cos, sin).pow(2).mean(-1), torch.ones(1, 5), atol=1e-4)  # the stream itself is unit-RMS


def test_moe_with_one_expert_and_top1_is_the_dense_mlp():
    config = tinylm.ModelConfig(**TINY)
    dense = tinylm.SwiGLU(config)
    moe = E.MoEMLP(config, n_experts=1, top_k=1)
    moe.experts[0].load_state_dict(dense.state_dict())
    x = torch.randn(2, 6, 16)
    torch.testing.assert_close(moe(x), dense(x))


def test_moe_routes_each_token_to_top_k_experts():
    config = tinylm.ModelConfig(**TINY)
    moe = E.MoEMLP(config, n_experts=4, top_k=2).train()
    moe(torch.randn(3, 5, 16))
    assert moe.counts.sum() == 3 * 5 * 2
    with pytest.raises(ValueError, match="top_k"):
        E.MoEMLP(config, n_experts=2, top_k=3)


def test_gelu_mlp_holds_as_many_weights_as_swiglu():
    for d_model in (16, 64, 128):
        config = tinylm.ModelConfig(d_model=d_model, n_heads=4)
        swiglu = sum(p.numel() for p in tinylm.SwiGLU(config).parameters())
        gelu = sum(p.numel() for p in E.GELUMLP(config).parameters())
        assert abs(gelu - swiglu) <= 2 * d_model  # equal up to rounding d_ff·3/2 to an integer
        mlp = E.GELUMLP(config)
        x = torch.randn(2, 3, d_model)
        torch.testing.assert_close(mlp(x), F.gelu(x @ mlp.up_proj.weight.T) @ mlp.down_proj.weight.T)


def test_no_positions_makes_the_model_blind_to_order_of_equal_context():
    # NoPE: attention scores no longer depend on position, so apply_rope is the identity.
    model = E.without_positions(tinylm.Transformer(tinylm.ModelConfig(**TINY)))
    x = torch.randn(1, 2, 5, 8)
    assert torch.equal(tinylm.apply_rope(x, model.rope_cos, model.rope_sin), x)


def test_learned_positions_add_one_row_per_position_and_keep_the_tied_head():
    model = E.with_learned_positions(tinylm.Transformer(tinylm.ModelConfig(**TINY)))
    emb = model.tok_emb
    idx = torch.tensor([[3, 3, 3]])
    torch.testing.assert_close(emb(idx), emb.tok_emb.weight[[3, 3, 3]][None] + emb.pos_emb.weight[:3][None])
    assert model.lm_head.weight is emb.tok_emb.weight


def test_attention_entropy_is_uniform_for_zero_queries():
    model = tinylm.Transformer(tinylm.ModelConfig(**TINY))
    for block in model.blocks:
        torch.nn.init.zeros_(block.attn.q_proj.weight)  # every score 0: uniform causal attention
    idx = torch.randint(0, 256, (2, 10))
    assert E.attention_entropy(model, idx) == pytest.approx(E.uniform_causal_entropy(10), rel=1e-5)


def test_unit_variance_scores_sharpen_without_the_scale():
    scaled = E.entropy_vs_head_dim([4, 64], seq_len=16, scaled=True)
    unscaled = E.entropy_vs_head_dim([4, 64], seq_len=16, scaled=False)
    assert unscaled[1] < unscaled[0] and unscaled[1] < scaled[1]
    assert abs(scaled[1] - scaled[0]) < 0.1


def test_kv_bytes_per_token_counts_keys_and_values_of_every_layer():
    config = tinylm.ModelConfig(d_model=64, n_layers=3, n_heads=8, n_kv_heads=2)
    assert E.kv_bytes_per_token(config) == 2 * 3 * 2 * 8 * 4
    assert E.kv_bytes_per_token(config, bytes_per_value=2) == 2 * 3 * 2 * 8 * 2


def test_loss_per_position_averages_to_evaluate(corpus):
    model = tinylm.Transformer(tinylm.ModelConfig(**TINY))
    per_position = E.loss_per_position(model, corpus.val, seq_len=32, n_windows=4)
    assert len(per_position) == 32
    want = tinylm.evaluate(model, corpus.val[: 4 * 32 + 1], seq_len=32).loss
    assert sum(per_position) / 32 == pytest.approx(want, rel=1e-5)
    with pytest.raises(ValueError, match="n_windows"):
        E.loss_per_position(model, corpus.val[:100], seq_len=32, n_windows=4)


def test_a_diverging_arm_stops_and_is_reported(corpus):
    tc = dataclasses.replace(E.SMALL_TRAIN, steps=6, seq_len=32, eval_every=0, lr=1e3, min_lr=1e3, warmup_steps=0, grad_clip=None)
    curves = E.train_side_by_side({"huge lr": E.Arm(lambda: tinylm.Transformer(tinylm.ModelConfig(**TINY)))}, corpus, tc)
    assert "huge lr" in curves.diverged_at  # an lr of 1000 blows up within six steps (seeded)
    # Trainer refuses the diverging step (TrainingDiverged): the history holds the steps before it.
    assert len(curves.histories["huge lr"].train_loss) == curves.diverged_at["huge lr"] - 1
    assert math.isnan(curves.final_val()["huge lr"]) and "diverged" in curves.summary()


def _losses(result):
    if isinstance(result, E.TrainingChoices):
        return [_losses(part) for part in (result.sweep, result.warmup, result.clipping)]
    curves = getattr(result, "curves", result)
    return {k: (h.train_loss, h.val_loss) for k, h in curves.histories.items()}


# Each experiment at 3 steps: the number of arms, the shape of every curve, and two runs giving the same numbers.
CASES = {
    "attention_scale": (2, {}),
    "positions": (4, {"n_windows": 2}),
    "norms": (3, {}),
    "block_order": (2, {}),
    "mlp": (2, {}),
    "moe": (2, {}),
    "kv_heads": (4, {}),
    "learning_rates": (5, {}),
    "warmup": (2, {}),
    "clipping": (2, {}),
    "training_choices": (5, {}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_experiment_trains_with_curves_of_the_stated_shape_and_is_deterministic(name, corpus, monkeypatch):
    monkeypatch.setattr(E.runs, "SMALL_TRAIN", dataclasses.replace(E.SMALL_TRAIN, eval_tokens=512))
    monkeypatch.setattr(E.catalog, "SMALL_TRAIN", E.runs.SMALL_TRAIN)
    n_arms, kwargs = CASES[name]
    run, plot = E.EXPERIMENTS[name]
    first = run(corpus, steps=3, seed=1, **kwargs)
    curves = getattr(first, "curves", getattr(first, "sweep", first))
    curves = getattr(curves, "curves", curves)
    assert len(curves.histories) == n_arms
    for label, h in curves.histories.items():
        assert h.step == [1, 2, 3] and len(h.train_loss) == 3, label
        assert h.val_step[-1] == 3 and all(math.isfinite(v) for v in h.val_loss), label
    assert _losses(run(corpus, steps=3, seed=1, **kwargs)) == _losses(first)
    import matplotlib
    matplotlib.use("Agg")
    plot(first)


def test_experiment_specific_results(corpus, monkeypatch):
    monkeypatch.setattr(E.catalog, "SMALL_TRAIN", dataclasses.replace(E.SMALL_TRAIN, eval_tokens=512))
    pos = E.positions(corpus, steps=2, train_len=16, factor=4, n_windows=2)
    assert pos.train_len == 16 and all(len(v) == 64 for v in pos.loss_per_position.values())
    kv = E.kv_heads(corpus, steps=2, n_heads=4, kv=(4, 1))
    assert list(kv.kv_bytes_per_token.values()) == [2 * 2 * 4 * 16 * 4, 2 * 2 * 1 * 16 * 4]
    sweep = E.learning_rates(corpus, steps=2, lrs=(1e-3, 1e-2))
    assert sweep.lrs == [1e-3, 1e-2] and len(sweep.final_val) == 2
    moe = E.moe(corpus, steps=2, n_experts=3)
    assert [sum(s) for s in moe.expert_share] == pytest.approx([1.0, 1.0]) and len(moe.expert_share[0]) == 3


def test_with_steps_keeps_the_shape_of_the_run():
    tc = E.with_steps(E.SMALL_TRAIN, 2 * E.SMALL_TRAIN.steps)
    assert tc.warmup_steps == 2 * E.SMALL_TRAIN.warmup_steps and tc.eval_every == 2 * E.SMALL_TRAIN.eval_every
    assert E.with_steps(E.SMALL_TRAIN, None) is E.SMALL_TRAIN


def test_cli_experiment_saves_its_plot(tmp_path, monkeypatch, capsys):
    from tinylm.__main__ import main

    monkeypatch.setattr(E.catalog, "SMALL_TRAIN", dataclasses.replace(E.SMALL_TRAIN, eval_tokens=512))
    out = tmp_path / "mlp.png"
    assert main(["experiment", "mlp", "--steps", "2", "--out", str(out)]) == 0
    assert out.stat().st_size > 0 and "SwiGLU" in capsys.readouterr().out
    assert main(["experiment", "mlp", "--steps", "0"]) == 2


def test_training_choices_share_the_baseline_run(corpus, monkeypatch):
    monkeypatch.setattr(E.catalog, "SMALL_TRAIN", dataclasses.replace(E.SMALL_TRAIN, eval_tokens=512))
    result = E.training_choices(corpus, steps=2, lrs=(1e-3, 3e-2), lr=3e-2)
    base = result.sweep.curves.histories["lr=0.03"]
    assert next(iter(result.warmup.histories.values())) is base  # trained once, used twice
    assert list(result.clipping.histories) == ["clip at 1", "no clipping"]
    with pytest.raises(ValueError, match="lr="):
        E.training_choices(corpus, steps=2, lrs=(1e-3,), lr=3e-2)
