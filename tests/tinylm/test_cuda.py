"""tinylm on a CUDA device agrees with tinylm on the CPU.

Skipped where torch sees no GPU (CI never has one). Run on a GPU machine with
`make test-cuda`; docs/benchmarks.md records the last such run. Each test computes the
same thing on both devices from the same weights and inputs, so the CPU
result is the independent reference; tolerances allow for a different kernel
order (cuBLAS, the SDPA kernels), not for a different computation.
"""
import copy
import dataclasses

import pytest
import torch

import tinylm
from tinylm import ModelConfig, Transformer

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no CUDA device")

# GQA (6 query heads over 2 kv heads) and every size different, as in the CPU tests.
CONFIG = ModelConfig(vocab_size=256, d_model=48, n_layers=3, n_heads=6, n_kv_heads=2, d_ff=136,
                     max_seq_len=96, rope_theta=500.0)
GPU = torch.device("cuda")


@pytest.fixture(autouse=True)
def exact_float32_matmuls():
    """TF32 would round matmul inputs to 10 mantissa bits: a different computation."""
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def model_pair(config=CONFIG, seed=3):
    torch.manual_seed(seed)
    cpu = Transformer(config).eval()
    return cpu, copy.deepcopy(cpu).to(GPU)


def tokens(shape, seed=5):
    return torch.randint(0, CONFIG.vocab_size, shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("attn_impl", ["sdpa", "reference"])
def test_logits_match_cpu(attn_impl):
    cpu, gpu = model_pair(dataclasses.replace(CONFIG, attn_impl=attn_impl))
    idx = tokens((3, 41))
    with torch.no_grad():
        torch.testing.assert_close(gpu(idx.to(GPU)).cpu(), cpu(idx), rtol=1e-4, atol=1e-4)


def test_kv_cache_decoding_matches_full_recompute_on_gpu():
    _, gpu = model_pair()
    prompt = tokens((2, 9)).to(GPU)
    cached = tinylm.generate(gpu, prompt, 32, temperature=0, use_cache=True)
    recomputed = tinylm.generate(gpu, prompt, 32, temperature=0, use_cache=False)
    assert cached.device.type == "cuda"
    assert torch.equal(cached, recomputed)


def test_cache_lives_on_the_model_device():
    _, gpu = model_pair()
    cache = tinylm.KVCache(gpu.config, batch_size=2, device=GPU)
    with torch.no_grad():
        step = gpu(tokens((2, 5)).to(GPU), cache=cache)
    assert step.device.type == "cuda" and step.shape == (2, 5, CONFIG.vocab_size)


def test_sampling_frequencies_match_softmax_on_gpu():
    """20 000 draws from one row: every token's frequency within 5 standard
    errors (plus 0.002 for tiny probabilities) of the closed-form softmax."""
    logits = torch.tensor([[2.0, 1.0, 0.5, 0.0, -1.0, -3.0]], device=GPU)
    gen = torch.Generator(device=GPU).manual_seed(0)
    draws = torch.stack([tinylm.sample_next(logits, temperature=0.7, generator=gen) for _ in range(20_000)])
    freq = torch.bincount(draws.flatten().cpu(), minlength=6).double() / draws.numel()
    expected = (logits.cpu().double() / 0.7).softmax(-1)[0]
    bound = 5 * (expected * (1 - expected) / draws.numel()).sqrt() + 0.002
    assert ((freq - expected).abs() <= bound).all(), f"frequencies {freq.tolist()} vs softmax {expected.tolist()}"


def test_training_steps_follow_the_cpu_trajectory():
    """Same weights, same batches (the sampler's generator lives on the CPU):
    the first losses agree; the trajectories drift apart only by rounding."""
    cpu, gpu = model_pair()
    data = tokens((5000,), seed=9)
    options = dict(steps=6, batch_size=4, seq_len=32, lr=1e-3, warmup_steps=2, eval_every=0)
    trainers = [tinylm.Trainer(m, data, **options) for m in (cpu, gpu)]
    losses = [[t.step() for _ in range(6)] for t in trainers]  # [cpu, gpu]
    assert losses[1][0] == pytest.approx(losses[0][0], rel=1e-5)
    assert losses[1] == pytest.approx(losses[0], rel=1e-3)
    assert losses[1][-1] < losses[1][0]


def test_evaluate_matches_cpu():
    cpu, gpu = model_pair()
    data = tokens((3001,), seed=4)
    on_cpu = tinylm.evaluate(cpu, data, batch_size=8, seq_len=64)
    on_gpu = tinylm.evaluate(gpu, data, batch_size=8, seq_len=64)
    assert on_gpu.tokens == on_cpu.tokens == 3000
    assert on_gpu.loss == pytest.approx(on_cpu.loss, rel=1e-5)


def test_hf_llama_on_gpu_matches_tinylm_on_gpu():
    pytest.importorskip("transformers")
    _, gpu = model_pair()
    hf = tinylm.to_hf_llama(copy.deepcopy(gpu).cpu()).to(GPU).eval()
    idx = tokens((2, 33)).to(GPU)
    with torch.no_grad():
        torch.testing.assert_close(gpu(idx), hf(idx).logits, rtol=1e-4, atol=1e-4)


def test_bfloat16_model_on_gpu_tracks_float32_and_generates():
    """The same forward path in bfloat16: logits stay close to float32's."""
    _, gpu = model_pair()
    half = copy.deepcopy(gpu).to(torch.bfloat16)
    idx = tokens((2, 33)).to(GPU)
    with torch.no_grad():
        torch.testing.assert_close(half(idx).float(), gpu(idx), rtol=0.1, atol=0.1)
    out = tinylm.generate(half, idx[:, :5], 16, temperature=0)
    assert out.shape == (2, 21) and out.device.type == "cuda"


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_forward_and_backward_on_gpu(dtype):
    """bf16/fp16 training on the GPU: finite gradients for every parameter, and
    loss and gradients near float32's from the same weights and batch."""
    _, gpu = model_pair()
    half = copy.deepcopy(gpu).to(dtype).train()
    idx = tokens((4, 64)).to(GPU)
    losses = []
    for model in (gpu.train(), half):
        logits = model(idx[:, :-1])
        loss = tinylm.next_token_loss(logits.float(), idx[:, 1:])
        loss.backward()
        losses.append(loss.item())
    assert losses[1] == pytest.approx(losses[0], rel=0.02)
    for (name, p32), p16 in zip(gpu.named_parameters(), half.parameters()):
        assert p16.grad.dtype == dtype and torch.isfinite(p16.grad).all(), name
        cosine = torch.nn.functional.cosine_similarity(p16.grad.float().flatten(), p32.grad.flatten(), dim=0)
        assert cosine > 0.95, f"{name}: gradient direction off in {dtype} (cosine {cosine:.3f})"


def test_compiled_training_on_gpu_follows_eager():
    """train(compile=True) on CUDA (inductor's Triton kernels) from the same
    weights and batches as eager: the losses agree to rounding."""
    _, first = model_pair()
    _, second = model_pair()
    data = tokens((5000,), seed=9)
    options = dict(steps=5, batch_size=4, seq_len=32, lr=1e-3, warmup_steps=2, eval_every=0)
    eager = tinylm.train(first, data, quiet=True, **options)
    compiled = tinylm.train(second, data, quiet=True, compile=True, **options)
    assert compiled.train_loss == pytest.approx(eager.train_loss, rel=1e-3)
