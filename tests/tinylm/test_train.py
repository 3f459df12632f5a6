"""get_batch, the learning-rate schedule, the training loop and exact resume."""
import math

import matplotlib
import pytest
import torch

from tinylm import ModelConfig, Transformer
from tinylm.training import History, TrainConfig, Trainer, get_batch, load_model, lr_at, plot_history, train

matplotlib.use("Agg")


def _model(seed=0):
    torch.manual_seed(seed)
    return Transformer(ModelConfig(d_model=24, n_layers=2, n_heads=2, d_ff=40, max_seq_len=32))


def _text(n=3000):
    # Repetitive text: a model that learns anything drops far below ln 256.
    return torch.tensor(list(b"the cat sat on the mat. " * (n // 24 + 1)), dtype=torch.uint8)[:n]


def test_get_batch_shapes_and_shift():
    data = torch.arange(1000)  # each token is its own position
    x, y = get_batch(data, batch_size=5, seq_len=7, generator=torch.Generator().manual_seed(1))
    assert x.shape == y.shape == (5, 7) and x.dtype == y.dtype == torch.long
    assert torch.equal(y, x + 1)  # targets are the next tokens
    assert torch.equal(x[:, 1:], x[:, :-1] + 1)  # contiguous windows
    assert (x[:, 0] >= 0).all() and (y[:, -1] <= 999).all()


def test_get_batch_is_seeded_and_reaches_both_ends():
    data = torch.arange(20)
    draw = lambda seed: get_batch(data, 3, 4, torch.Generator().manual_seed(seed))
    assert torch.equal(draw(5)[0], draw(5)[0]) and not torch.equal(draw(5)[0], draw(6)[0])
    starts = torch.cat([get_batch(data, 50, 4, torch.Generator().manual_seed(s))[0][:, 0] for s in range(10)])
    assert starts.min() == 0 and starts.max() == 20 - 4 - 1  # the last full window (x and y)
    x, y = get_batch(torch.arange(5), 2, 4)  # exactly one window fits
    assert torch.equal(x, torch.arange(4).expand(2, 4)) and torch.equal(y, x + 1)


def test_get_batch_bad_input():
    with pytest.raises(ValueError, match="too few"):
        get_batch(torch.arange(8), 2, 8)
    with pytest.raises(ValueError, match="batch_size"):
        get_batch(torch.arange(80), 0, 8)
    with pytest.raises(TypeError, match="integer"):
        get_batch(torch.rand(80), 2, 8)


def test_lr_schedule_closed_form():
    c = TrainConfig(steps=111, lr=1e-2, min_lr=1e-3, warmup_steps=10)
    assert lr_at(0, c) == pytest.approx(1e-3)  # lr / warmup_steps
    assert lr_at(4, c) == pytest.approx(5e-3)
    assert lr_at(9, c) == pytest.approx(1e-2)  # peak at the end of warmup
    assert lr_at(10, c) == pytest.approx(1e-2)
    assert lr_at(60, c) == pytest.approx((1e-2 + 1e-3) / 2)  # half way down the cosine (100 steps)
    assert lr_at(110, c) == pytest.approx(1e-3)  # min_lr at the last step
    after = [lr_at(s, c) for s in range(10, 111)]
    assert all(a >= b for a, b in zip(after, after[1:]))


def test_weight_decay_on_matrices_only():
    trainer = Trainer(_model(), _text(), steps=2, seq_len=16)
    decay, no_decay = trainer.optimizer.param_groups
    assert decay["weight_decay"] > 0 and no_decay["weight_decay"] == 0
    assert all(p.dim() >= 2 for p in decay["params"]) and all(p.dim() == 1 for p in no_decay["params"])
    ids = [id(p) for g in (decay, no_decay) for p in g["params"]]
    assert sorted(ids) == sorted(id(p) for p in trainer.model.parameters())  # each exactly once


def test_gradients_are_clipped():
    trainer = Trainer(_model(), _text(), steps=3, seq_len=16, grad_clip=1e-3, lr=1e-4)
    trainer.step()
    norm = math.sqrt(sum(p.grad.pow(2).sum().item() for p in trainer.model.parameters()))
    assert trainer.history.grad_norm[-1] > 1e-3  # the recorded norm is before clipping
    assert norm <= 1e-3 * 1.0001


def test_training_learns_and_records_history():
    data, val = _text(4000), _text(600)
    model = _model()
    history = train(model, data, val, steps=60, batch_size=8, seq_len=24, lr=1e-2,
                    warmup_steps=5, eval_every=20, quiet=True)
    assert history.step == list(range(1, 61)) and len(history.train_loss) == 60
    assert history.val_step == [20, 40, 60]
    assert history.val_loss[-1] < 0.5 * math.log(256)
    assert all(b >= a for a, b in zip(history.time, history.time[1:]))
    assert plot_history(history, floor=0.3) is not None
    assert plot_history(history, x="time") is not None


def test_resume_gives_the_same_losses_as_an_uninterrupted_run(tmp_path):
    data, val = _text(3000), _text(500)
    options = dict(steps=10, batch_size=4, seq_len=16, lr=5e-3, warmup_steps=3, eval_every=3)
    full = train(_model(seed=1), data, val, quiet=True, **options)

    ckpt = tmp_path / "run.pt"
    first = Trainer(_model(seed=1), data, val, **options)
    first.run(steps=6, quiet=True, checkpoint_path=ckpt)  # stops after 6 of 10 steps
    # A different initial model: everything must come from the checkpoint.
    resumed = train(_model(seed=99), data, val, resume_from=ckpt, quiet=True, **options)
    assert resumed.train_loss == full.train_loss  # exactly, not approximately
    assert resumed.val_loss == full.val_loss and resumed.val_step == full.val_step


def test_checkpoint_is_plain_data_and_rebuilds_the_model(tmp_path):
    model = _model()
    trainer = Trainer(model, _text(), steps=2, seq_len=16)
    trainer.step()
    path = tmp_path / "sub" / "c.pt"
    trainer.save(path)
    state = torch.load(path, weights_only=True)  # no pickled code
    assert state["step"] == 1 and state["model_config"]["d_model"] == 24
    rebuilt = load_model(path)
    x = torch.randint(0, 256, (2, 9))
    assert torch.equal(rebuilt(x), model.eval()(x))
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        load_model(tmp_path / "nope.pt")


def test_time_limit_stops_early():
    history = train(_model(), _text(), steps=10_000, seq_len=16, time_limit=0.3, quiet=True)
    assert 1 <= len(history.step) < 10_000 and history.time[-1] >= 0.3


def test_bad_options():
    with pytest.raises(TypeError, match="unknown training option"):
        Trainer(_model(), _text(), stepz=3)
    with pytest.raises(ValueError, match="max_seq_len"):
        Trainer(_model(), _text(), seq_len=64)
    with pytest.raises(ValueError, match="min_lr"):
        TrainConfig(lr=1e-3, min_lr=1e-2)
    with pytest.raises(ValueError, match="steps"):
        TrainConfig(steps=0)
    assert isinstance(History(), History)


def test_resume_honours_steps_and_lr_given_as_keywords(tmp_path):
    """Options passed with resume_from override the checkpoint's: more steps
    continue the run, a new lr sets the schedule's peak from there on."""
    data = _text(3000)
    options = dict(steps=6, batch_size=4, seq_len=16, lr=5e-3, warmup_steps=2, eval_every=0)
    ckpt = tmp_path / "run.pt"
    train(_model(), data, quiet=True, checkpoint_path=ckpt, **options)
    longer = train(_model(), data, quiet=True, resume_from=ckpt, **{**options, "steps": 9, "lr": 1e-3})
    assert longer.step == list(range(1, 10))
    assert longer.lr[6:] == [lr_at(s, TrainConfig(**{**options, "steps": 9, "lr": 1e-3})) for s in range(6, 9)]
    assert longer.lr[:6] == [lr_at(s, TrainConfig(**options)) for s in range(6)]  # the saved history is kept
    with pytest.raises(ValueError, match="steps=4 is fewer than the 6 steps already done"):
        train(_model(), data, quiet=True, resume_from=ckpt, **{**options, "steps": 4})
    with pytest.raises(ValueError, match="seed"):
        train(_model(), data, quiet=True, resume_from=ckpt, **{**options, "seed": 5})


@pytest.mark.slow
def test_compiled_training_follows_eager_training_and_the_model_compiles_whole():
    """train(compile=True): torch.compile traces the model (no graph break:
    the token-id check reads no values while compiling) and the losses track
    eager training from the same weights and batches."""
    data = _text(3000)
    options = dict(steps=4, batch_size=4, seq_len=16, lr=5e-3, warmup_steps=1, eval_every=0)
    eager = train(_model(), data, quiet=True, **options)
    compiled = train(_model(), data, quiet=True, compile=True, **options)
    assert compiled.train_loss == pytest.approx(eager.train_loss, rel=1e-4)
    explanation = torch._dynamo.explain(_model())(torch.randint(0, 256, (2, 16)))
    assert explanation.graph_count == 1 and explanation.graph_break_count == 0, explanation.break_reasons
