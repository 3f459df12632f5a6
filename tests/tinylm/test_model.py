"""The whole Transformer: causality, tying, loss, dropout, initial loss."""
import dataclasses
import math

import pytest
import torch
import torch.nn.functional as F

from tinylm import RMSNorm, Transformer, generate, next_token_loss

from ..helpers import BATCH, SEQ


@pytest.mark.parametrize("attn_impl", ["sdpa", "reference"])
def test_changing_future_tokens_changes_no_earlier_logit(config, gen, attn_impl):
    model = Transformer(dataclasses.replace(config, attn_impl=attn_impl)).eval()
    idx = torch.randint(0, 256, (BATCH, SEQ), generator=gen)
    changed = idx.clone()
    changed[:, 6:] = torch.randint(0, 256, (BATCH, SEQ - 6), generator=gen)
    a, b = model(idx), model(changed)
    torch.testing.assert_close(a[:, :6], b[:, :6], rtol=0, atol=1e-6)
    assert not torch.allclose(a[:, 6:], b[:, 6:])


def test_implementations_agree(config, gen):
    model = Transformer(config).eval()
    idx = torch.randint(0, 256, (BATCH, SEQ), generator=gen)
    with_sdpa = model(idx)
    for block in model.blocks:
        block.attn.attn_impl = "reference"
    torch.testing.assert_close(model(idx), with_sdpa)


def test_tied_head_shares_storage_and_moves_with_one_step(config, gen):
    model = Transformer(config)
    assert model.lm_head.weight.data_ptr() == model.tok_emb.weight.data_ptr()
    untied = Transformer(dataclasses.replace(config, tie_embeddings=False))
    assert model.num_parameters() == untied.num_parameters() - config.vocab_size * config.d_model
    before = model.tok_emb.weight.detach().clone()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    idx = torch.randint(0, 256, (BATCH, SEQ + 1), generator=gen)
    next_token_loss(model(idx[:, :-1]), idx[:, 1:]).backward()
    opt.step()
    assert not torch.equal(model.tok_emb.weight, before)
    assert torch.equal(model.lm_head.weight, model.tok_emb.weight)


def test_loss_equals_cross_entropy_and_ignores_index(config, gen):
    logits = torch.randn(BATCH, SEQ, 256, generator=gen)
    targets = torch.randint(0, 256, (BATCH, SEQ), generator=gen)
    log_probs = logits.log_softmax(-1)
    manual = -log_probs.gather(-1, targets[..., None]).mean()
    torch.testing.assert_close(next_token_loss(logits, targets), manual)
    targets[0, :4] = -100
    keep = targets != -100
    manual = -log_probs[keep].gather(-1, targets[keep][:, None]).mean()
    torch.testing.assert_close(next_token_loss(logits, targets), manual)
    with pytest.raises(ValueError, match="vocab axis"):
        next_token_loss(logits, targets[:, 1:])


def test_fresh_model_loss_is_near_uniform(config, gen):
    """Small init gives near-uniform predictions: loss ≈ ln(256) = 5.545."""
    model = Transformer(config)
    idx = torch.randint(0, 256, (8, 33), generator=gen)
    loss = next_token_loss(model(idx[:, :-1]), idx[:, 1:])
    assert abs(loss.item() - math.log(256)) < 0.05


def test_dropout_is_random_in_train_and_off_in_eval(config, gen):
    model = Transformer(dataclasses.replace(config, dropout=0.3))
    idx = torch.randint(0, 256, (BATCH, SEQ), generator=gen)
    model.train()
    assert not torch.allclose(model(idx), model(idx))
    model.eval()
    assert torch.equal(model(idx), model(idx))


def test_state_dict_round_trip_keeps_tying(config, gen, tmp_path):
    model = Transformer(config)
    torch.save(model.state_dict(), tmp_path / "m.pt")
    other = Transformer(config)
    other.load_state_dict(torch.load(tmp_path / "m.pt", weights_only=True))
    idx = torch.randint(0, 256, (BATCH, SEQ), generator=gen)
    assert torch.equal(other(idx), model(idx))
    assert other.lm_head.weight is other.tok_emb.weight


def test_cross_entropy_gradient_flows_to_every_parameter(config, gen):
    model = Transformer(config)
    idx = torch.randint(0, 256, (BATCH, SEQ + 1), generator=gen)
    F.cross_entropy(model(idx[:, :-1]).flatten(0, 1), idx[:, 1:].flatten()).backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


class PlainRMSNorm(torch.nn.Module):
    """A learner's RMSNorm (notebook 02 swaps these into the model): the same
    math, written independently of tinylm.rms_norm."""

    def __init__(self, weight, eps):
        super().__init__()
        self.weight, self.eps = torch.nn.Parameter(weight.detach().clone()), eps

    def forward(self, x):
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)


def test_swapped_in_modules_are_used_not_bypassed(config, gen):
    """A foreign norm module runs in place of tinylm's, in forward and in decoding."""
    model = Transformer(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.uniform_(0.5, 1.5, generator=gen)
    prompt = torch.randint(0, 256, (BATCH, 5), generator=gen)
    with torch.no_grad():
        before, generated = model(prompt), generate(model, prompt, 8, temperature=0)
        for parent in [model, *model.blocks]:
            for name, child in list(parent.named_children()):
                if isinstance(child, RMSNorm):
                    setattr(parent, name, PlainRMSNorm(child.weight, child.eps))
        torch.testing.assert_close(model(prompt), before)
        assert torch.equal(generate(model, prompt, 8, temperature=0), generated)
        calls = []
        model.norm.register_forward_hook(lambda *args: calls.append(1))
        generate(model, prompt, 3, temperature=0)
    assert len(calls) == 3, "the swapped-in final norm must run at every step (prefill + 2 decoding steps)"


def test_training_after_generation_equals_training_without_it(config, gen):
    """Generation runs under inference_mode; a training step afterwards must
    neither trip over anything it left behind (autograd cannot save inference
    tensors) nor differ from a model that never generated."""
    model = Transformer(config)
    twin = Transformer(config)
    twin.load_state_dict(model.state_dict())
    prompt = torch.randint(0, 256, (BATCH, 5), generator=gen)
    generate(model, prompt, 4)
    idx = torch.randint(0, 256, (BATCH, SEQ), generator=gen)
    for m in (model, twin):
        next_token_loss(m(idx)[:, :-1], idx[:, 1:]).backward()
    for (name, p), q in zip(model.named_parameters(), twin.parameters()):
        torch.testing.assert_close(p.grad, q.grad, msg=name)


# --- one forward path, whatever the user does to the weights ---

def test_forward_sees_weights_changed_through_data(config, gen):
    """A hand-written optimizer or loader writes p.data, which bumps no
    version counter: a model that caches weights derived from its parameters
    would keep computing with the old ones."""
    model = Transformer(config).eval()
    idx = torch.randint(0, 256, (BATCH, SEQ), generator=gen)
    with torch.no_grad():
        before = model(idx)
        model.blocks[0].attn.q_proj.weight.data.zero_()
        after = model(idx)
    assert not torch.equal(before, after), "forward ignored a q_proj change made through .data"
    fresh = Transformer(config).eval()
    fresh.load_state_dict(model.state_dict())
    with torch.no_grad():
        torch.testing.assert_close(after, fresh(idx), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_forward_and_backward_on_cpu(config, gen, dtype):
    """bf16 and fp16 training: every gradient finite, and the half-precision
    logits and loss near float32's from the same weights."""
    model = Transformer(config)
    half = Transformer(config)
    half.load_state_dict(model.state_dict())
    half.to(dtype)
    idx = torch.randint(0, 256, (BATCH, SEQ), generator=gen)
    logits = half(idx)
    assert logits.dtype == dtype
    loss = next_token_loss(logits[:, :-1].float(), idx[:, 1:])
    loss.backward()
    for name, p in half.named_parameters():
        assert p.grad is not None and p.grad.dtype == dtype and torch.isfinite(p.grad).all(), name
    with torch.no_grad():
        reference = model(idx)
    torch.testing.assert_close(logits.float(), reference, rtol=0.05, atol=0.05)
    assert loss.item() == pytest.approx(next_token_loss(reference[:, :-1], idx[:, 1:]).item(), rel=0.02)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int16, torch.int32, torch.int64])
def test_any_integer_token_dtype_gives_the_same_logits(config, gen, dtype):
    """The course corpus is uint8: corpus.val[:16][None] goes straight in."""
    model = Transformer(config).eval()
    idx = torch.randint(0, 256, (BATCH, SEQ), generator=gen)
    with torch.no_grad():
        torch.testing.assert_close(model(idx.to(dtype)), model(idx), rtol=0, atol=0)


@pytest.mark.parametrize("module_name, function_name", [
    ("tinylm.attention", "apply_rope"), ("tinylm.attention", "causal_attention"),
    ("tinylm.norm", "rms_norm"), ("tinylm.mlp", "swiglu")])
def test_patched_module_level_functions_are_what_the_model_runs(config, gen, module_name, function_name):
    """Notebooks put a learner's function in place with
    unittest.mock.patch.object(module, name, fn): the model must then call
    it, in every layer, and its output must reach the logits."""
    import importlib
    from unittest import mock

    module = importlib.import_module(module_name)
    original = getattr(module, function_name)
    model = Transformer(dataclasses.replace(config, attn_impl="reference")).eval()
    idx = torch.randint(0, 256, (BATCH, SEQ), generator=gen)
    calls = []

    def learners(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs) * 1.5  # a visible change
    with torch.no_grad():
        before = model(idx)
        with mock.patch.object(module, function_name, learners):
            patched = model(idx)
        torch.testing.assert_close(model(idx), before)
    per_layer = {"apply_rope": 2, "causal_attention": 1, "rms_norm": 2, "swiglu": 1}[function_name]
    expected_calls = per_layer * config.n_layers + (function_name == "rms_norm")  # + the final norm
    assert len(calls) == expected_calls
    assert not torch.allclose(patched, before)
