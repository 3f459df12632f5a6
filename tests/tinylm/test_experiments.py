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
    tc = dataclasses.replace(E.SMALL_TRAIN, steps=6, seq_len=32, eval_every=0, lr=1e6, min_lr=1e6, warmup_steps=0, grad_clip=None)
    curves = E.train_side_by_side({"huge lr": E.Arm(lambda: tinylm.Transformer(tinylm.ModelConfig(**TINY)))}, corpus, tc)
    assert "huge lr" in curves.diverged_at  # an lr of 1e6 blows up within six steps (seeded)
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


# --- pacing: a slow machine is said, never hidden (tested with fake clocks, never with real timing) ---

class FakeClock:
    """A clock that moves `per_call` seconds every time it is read: a machine on which everything takes long."""

    def __init__(self, per_call: float):
        self.now, self.per_call = 0.0, per_call

    def __call__(self) -> float:
        self.now += self.per_call
        return self.now


def tiny_experiment(corpus, steps=None, seed=0):
    """An experiment as the catalog's are: arms through train_side_by_side, sized in steps."""
    tc = E.with_steps(dataclasses.replace(E.SMALL_TRAIN, steps=12, batch_size=2, seq_len=16, eval_every=4,
                                          warmup_steps=2, eval_tokens=256), steps)
    arms = {name: E.Arm(lambda: tinylm.Transformer(tinylm.ModelConfig(**TINY))) for name in ("a", "b")}
    return E.train_side_by_side(arms, corpus, tc, seed)


def test_a_slow_machine_gets_the_announced_shorter_variant(corpus):
    said = []
    run = E.paced(tiny_experiment, corpus, steps=12, short_steps=4, seeds=(0, 1), stated_s=20,
                  what="tiny", clock=FakeClock(60.0), say=said.append)
    assert run.short and run.steps == 4 and run.full_steps == 12 and len(run.results) == 2
    assert all(h.step == [1, 2, 3, 4] for curves in run.results for h in curves.histories.values())
    assert run.ran == "2 seeds x 4 steps (the shorter variant; the full run is 12 steps)"
    announcement = next(line for line in said if "would take" in line)
    assert "more than 3 times the about 20 s on an idle 2-core machine" in announcement
    assert "Running the shorter variant instead: 4 steps" in announcement and "ALWAYS_FULL" in announcement
    # every read of this clock is a minute later: the run says where it is at every step
    progress = [line for line in said if line.strip().startswith("...")]
    assert progress and "step 1 of 4" in progress[0] and "seed 0" in progress[0]
    assert said[-1].startswith("tiny: done in")


def test_a_fast_machine_runs_the_full_work_and_says_what_it_expects(corpus):
    said = []
    run = E.paced(tiny_experiment, corpus, steps=12, short_steps=4, stated_s=20, what="tiny",
                  clock=FakeClock(1e-4), say=said.append)
    assert not run.short and run.steps == 12 and run.ran == "seed 0 x 12 steps"
    assert [h.step[-1] for h in run.results[0].histories.values()] == [12, 12]
    assert any(line.startswith("tiny: 12 steps per model, expected to take about 0 s") for line in said), said
    assert not any(line.strip().startswith("...") for line in said)  # nothing to report in a run this short


def test_the_estimate_extrapolates_the_timed_slice():
    """On a clock that moves 1 s per read, each timed slice reads as one second: PROBE_STEPS steps and one evaluation."""
    said = []
    clock = FakeClock(1.0)
    probe = E.pacing.Pacer(clock, said.append, probing=True)

    class Trainer:  # only what probe() uses
        config = dataclasses.replace(E.SMALL_TRAIN, steps=150, eval_every=50)
        step = evaluate = staticmethod(lambda: None)
    probe.probe(Trainer())
    assert probe.steps_s == pytest.approx(150 / E.pacing.PROBE_STEPS) and probe.evals_s == 3.0


def test_the_evaluations_counted_are_those_train_side_by_side_makes(corpus):
    for steps, every in ((12, 4), (10, 4), (5, 0)):
        tc = dataclasses.replace(E.SMALL_TRAIN, steps=steps, batch_size=2, seq_len=16, eval_every=every, warmup_steps=1,
                                 eval_tokens=256)
        curves = E.train_side_by_side({"a": E.Arm(lambda: tinylm.Transformer(tinylm.ModelConfig(**TINY)))}, corpus, tc)
        assert len(curves.histories["a"].val_loss) == E.pacing.evaluations(steps, every), (steps, every)


def test_choose_keeps_the_full_work_within_three_times_its_stated_time(monkeypatch):
    said = []
    assert E.choose(600, 300, 59.0, 20.0, what="run", say=said.append) == 600
    assert E.choose(600, 300, 61.0, 20.0, what="run", say=said.append) == 300
    assert "the full 600 steps would take about 61 s" in said[-1] and "300 steps, about 30 s" in said[-1]
    assert E.choose(20, 300, 500.0, 20.0, what="graded run", say=said.append) == 20  # a short variant never lengthens
    monkeypatch.setattr(E.pacing, "ALWAYS_FULL", True)
    assert E.choose(600, 300, 500.0, 20.0, what="run", say=said.append) == 600
    assert "about 8.3 min on this machine" in said[-1]


def test_use_threads_sets_and_says_them(monkeypatch):
    before = torch.get_num_threads()
    said = []
    try:
        monkeypatch.delenv("TINYLM_THREADS", raising=False)
        assert E.use_threads(say=said.append) == 1 and torch.get_num_threads() == 1
        assert said[-1].startswith("torch computes with 1 CPU thread (") and "TINYLM_THREADS" in said[-1]
        monkeypatch.setenv("TINYLM_THREADS", "2")
        assert E.use_threads(say=said.append) == 2 and torch.get_num_threads() == 2
        monkeypatch.setenv("TINYLM_THREADS", "two")
        with pytest.raises(ValueError, match="TINYLM_THREADS"):
            E.use_threads(say=said.append)
    finally:
        torch.set_num_threads(before)


# --- verdicts: a claim only where the numbers support it ---

def test_a_comparison_needs_every_seed_on_one_side():
    finals = {"a": [0.50, 0.52], "b": [0.60, 0.65], "c": [0.51, 0.58], "d": [math.inf, 0.9]}   # noise: c's 0.07
    assert E.compare(finals, "a", "b").result == "lower" and E.compare(finals, "b", "a").result == "higher"
    assert E.compare(finals, "a", "c").result == "unresolved"  # c's first seed lies inside a's range
    assert E.compare(finals, "d", "b").result == "higher"       # a diverged run is worse than any loss
    assert E.lowest(finals) is None and E.lowest({k: finals[k] for k in "abd"}) == "a"
    assert E.compare(finals, "a", "b").sentence() == (
        "a ends lower than b in every seed, the seeds' ranges 0.080 apart, more than the 0.070 one arm's seeds spread "
        "over (final validation loss: a 0.500 and 0.520, b 0.600 and 0.650)")
    assert "not told apart by 2 seeds" in E.compare(finals, "a", "c").sentence()
    assert E.values_text([math.inf, 0.9]) == "diverged and 0.900"


def test_no_verdict_on_a_gap_narrower_than_the_seeds_spread():
    """Two runs still at the unigram's level a few thousandths apart, in an experiment whose seeds spread over a
    tenth of a nat: ranges apart, but a gap another seed could close."""
    finals = {"post-norm": [3.019, 3.022], "no norm": [3.025, 3.027], "pre-norm": [2.44, 2.70]}
    gap = E.compare(finals, "post-norm", "no norm")
    assert gap.result == "unresolved" and E.lowest(finals) == "pre-norm"
    assert gap.sentence() == ("post-norm and no norm are not told apart by 2 seeds: their ranges of final validation "
                              "loss are 0.003 apart, no more than the 0.260 one arm's seeds spread over (post-norm "
                              "3.019 and 3.022, no norm 3.025 and 3.027)")
    assert E.compare(finals, "pre-norm", "no norm").result == "lower"          # 0.325 apart: more than the noise


def test_one_seed_measures_no_noise_and_gives_no_verdict():
    finals = {"a": [2.1], "b": [2.9]}
    assert E.seed_spread(finals) is None and E.compare(finals, "a", "b").result == "unresolved"
    assert E.lowest(finals) is None
    assert "one seed measures no noise" in E.compare(finals, "a", "b").sentence()
    assert E.seed_spread({"a": [math.inf, 2.0], "b": [1.0, 1.5]}) == 0.5     # a diverged seed is not noise


def test_yardsticks_name_the_runs_still_at_the_unigrams_level():
    sticks = E.Yardsticks(unigram=3.0, bigram=2.0)
    assert sticks.plateau == pytest.approx(2.9)  # a tenth of the way from the unigram down to the bigram
    finals = {"a": [2.95, 2.5], "b": [3.01, 2.91], "c": [2.2, math.inf]}
    lines = sticks.sentence(finals, seeds=(0, 1)).splitlines()
    assert lines[0].endswith("(unigram) 3.000, the previous byte (bigram) 2.000 nats/byte")
    assert lines[1].endswith(": a (seed 0); b (seeds 0 and 1)")  # a diverged run is not said to sit on the plateau
    assert sticks.sentence({"c": [2.2, 2.1]}, seeds=(0, 1)).endswith(": none")


def test_yardsticks_score_the_bytes_the_experiments_evaluate(corpus):
    sticks = E.yardsticks(corpus, eval_tokens=4096)
    scored = corpus.val[:4097]
    assert sticks.unigram == tinylm.data.unigram_nll(corpus.train, scored)
    assert sticks.bigram == tinylm.data.bigram_nll(corpus.train, scored)
    assert math.log(256) > sticks.unigram > sticks.bigram > corpus.floor


def test_largest_rise_is_the_climb_above_the_best_so_far():
    assert E.largest_rise([5.0, 3.0, 2.0, 4.5, 1.0, 1.5], after=2) == pytest.approx(2.5)
    assert E.largest_rise([5.0, 3.0, 2.0, 1.0], after=1) == 0.0


def test_the_moe_plot_has_one_whole_tick_per_expert():
    import matplotlib
    matplotlib.use("Agg")
    result = E.MoEResult(curves=E.Curves({}, {}, {}), expert_share=[[0.7, 0.2, 0.05, 0.05], [0.25] * 4])
    _, right = E.plot_moe(result)
    assert [t.get_text() for t in right.get_xticklabels()] == ["0", "1", "2", "3"]
