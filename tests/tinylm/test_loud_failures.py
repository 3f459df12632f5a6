"""tinylm never goes wrong without saying so. Each test fails on code that
would: a wrong answer, a run that goes on with
NaN, or an error that names something the caller cannot change."""
import numpy as np
import pytest
import torch

import tinylm
from tinylm import KVCache, ModelConfig, Trainer, TrainingDiverged, Transformer, generate, load_model, sample_next
from tinylm.__main__ import main

PROMPT = torch.tensor([[5, 17, 99, 3, 42, 7]])  # (1, 6)


@pytest.fixture
def model(config):
    return Transformer(config).eval()


@pytest.fixture
def data(gen):
    return torch.randint(0, 256, (4000,), generator=gen)


def _first_step_logits(monkeypatch, model, **generate_options):
    """Run generate and return the logits (B, V) its first step sampled from."""
    seen = []
    real_sample_next = tinylm.sampling.sample_next

    def recording(logits, *args, **kwargs):
        seen.append(logits.float().clone())
        return real_sample_next(logits, *args, **kwargs)

    monkeypatch.setattr(tinylm.sampling, "sample_next", recording)
    out = generate(model, PROMPT, **generate_options)
    return out, seen[0]


# --- generate inside torch.autocast ---------------------------------------------

@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_generate_under_autocast_runs_and_matches_float32(monkeypatch, model, dtype):
    """generate builds its own cache, so it must build it in the dtype the k/v
    projections produce under autocast; the caller has no way to."""
    steps = 12
    reference, reference_logits = _first_step_logits(monkeypatch, model, max_new_tokens=steps, temperature=0)
    with torch.autocast("cpu", dtype=dtype):
        out, logits = _first_step_logits(monkeypatch, model, max_new_tokens=steps, temperature=0)
    assert out.shape == reference.shape == (1, PROMPT.shape[1] + steps)
    torch.testing.assert_close(logits, reference_logits, rtol=0, atol=0.05)
    assert torch.equal(out[:, :PROMPT.shape[1] + 1], reference[:, :PROMPT.shape[1] + 1])  # the first new token


def test_generate_under_autocast_with_the_cache_off_agrees_with_the_cache(model):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        cached = generate(model, PROMPT, 8, temperature=0)
        uncached = generate(model, PROMPT, 8, temperature=0, use_cache=False)
    assert cached.shape == uncached.shape == (1, PROMPT.shape[1] + 8)


# --- greedy decoding of a broken model ----------------------------------------

def test_greedy_decoding_of_a_nan_model_raises_like_sampling(model):
    with torch.no_grad():
        model.blocks[0].mlp.up_proj.weight[0, 0] = float("nan")
    with pytest.raises(ValueError, match="holds NaN"):
        generate(model, PROMPT, 4, temperature=1.0)
    with pytest.raises(ValueError, match="holds NaN"):
        generate(model, PROMPT, 4, temperature=0)


def test_greedy_sample_next_refuses_nan_and_fully_masked_rows():
    logits = torch.zeros(2, 10)
    logits[1, 3] = float("nan")
    with pytest.raises(ValueError, match="row 1 of logits holds NaN"):
        sample_next(logits, temperature=0)
    with pytest.raises(ValueError, match="no finite logit"):
        sample_next(torch.full((1, 10), float("-inf")), temperature=0)


# --- sampling options: checked always, numpy integers welcome, bools refused ---

@pytest.mark.parametrize("options, parameter", [
    (dict(top_k=0), "top_k"), (dict(top_k=2.5), "top_k"), (dict(top_k=True), "top_k"),
    (dict(top_p=0.0), "top_p"), (dict(top_p=1.5), "top_p"), (dict(top_p=True), "top_p")])
@pytest.mark.parametrize("temperature", [0, 0.8])
def test_bad_top_k_and_top_p_are_refused_even_when_greedy(options, parameter, temperature):
    with pytest.raises(ValueError, match=parameter):
        sample_next(torch.zeros(2, 10), temperature=temperature, **options)


def test_numpy_integers_are_accepted_as_top_k_and_max_new_tokens(model):
    logits = torch.randn(3, 50, generator=torch.Generator().manual_seed(1))
    plain = sample_next(logits, 1.0, top_k=5, generator=torch.Generator().manual_seed(2))
    numpy = sample_next(logits, 1.0, top_k=np.int64(5), generator=torch.Generator().manual_seed(2))
    assert torch.equal(plain, numpy)
    assert generate(model, PROMPT, np.int64(3), temperature=0).shape == (1, PROMPT.shape[1] + 3)


def test_max_new_tokens_true_is_refused_not_taken_as_one(model):
    with pytest.raises(ValueError, match="max_new_tokens must be an integer"):
        generate(model, PROMPT, True)


def test_a_prompt_longer_than_max_seq_len_is_blamed_not_max_new_tokens(model, config):
    prompt = torch.zeros(config.max_seq_len + 3, dtype=torch.long)
    with pytest.raises(ValueError, match=rf"prompt holds {config.max_seq_len + 3} tokens.*max_seq_len={config.max_seq_len}"):
        generate(model, prompt, 5)


def test_cli_sample_with_a_too_long_prompt_blames_the_prompt(tmp_path, capsys, config, data):
    path = tmp_path / "m.pt"
    Trainer(Transformer(config), data, seq_len=16).save(path)
    prompt = "x" * (config.max_seq_len + 7)
    assert main(["sample", "--checkpoint", str(path), "--prompt", prompt, "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert f"--prompt is {config.max_seq_len + 7} tokens" in err and f"max_seq_len is {config.max_seq_len}" in err
    assert "max-new-tokens" not in err and "max_new_tokens" not in err


# --- training that diverges ---------------------------------------------------

TRAIN = dict(steps=8, batch_size=4, seq_len=16, lr=3e-3, warmup_steps=2, eval_every=0)


def test_float16_training_is_refused_with_the_alternatives(config, data):
    """AdamW on float16 weights reaches NaN within a few steps at lr=3e-3;
    the Trainer says so instead of running on."""
    with pytest.raises(TypeError, match=r"float16.*bfloat16"):
        tinylm.train(Transformer(config).to(torch.float16), data, quiet=True, **TRAIN)


def test_bfloat16_training_stays_finite_at_an_ordinary_learning_rate(config, data):
    history = tinylm.train(Transformer(config).to(torch.bfloat16), data, quiet=True, **TRAIN)
    assert len(history.train_loss) == TRAIN["steps"] and np.isfinite(history.train_loss).all()


def test_a_nan_loss_stops_training_with_the_step_and_the_causes(config, data):
    model = Transformer(config)
    with torch.no_grad():
        model.blocks[1].attn.q_proj.weight[0, 0] = float("nan")
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    trainer = Trainer(model, data, **TRAIN)
    with pytest.raises(TrainingDiverged, match=r"step 1: loss nan.*lr=.*learning rate too high"):
        trainer.run(quiet=True)
    assert trainer.step_count == 0 and trainer.history.train_loss == []
    for name, p in model.named_parameters():  # the failed step updated nothing
        torch.testing.assert_close(p, before[name], rtol=0, atol=0, equal_nan=True)


def test_a_diverged_run_is_a_one_line_error_in_the_cli(tmp_path, capsys):
    text = tmp_path / "t.txt"
    text.write_text("abc " * 400, encoding="utf-8")
    assert main(["train", "--preset", "tiny", "--text", str(text), "--steps", "3", "--seq-len", "16",
                 "--lr", "1e30", "--warmup-steps", "0", "--eval-every", "0", "--quiet", "--device", "cpu",
                 "--out", str(tmp_path / "m.pt")]) == 2
    assert "training diverged" in capsys.readouterr().err


# --- checkpoints of a DistributedDataParallel model ---------------------------

def test_a_checkpoint_written_around_ddp_loads_with_load_model(tmp_path, config, data):
    import torch.distributed as dist

    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        ddp = torch.nn.parallel.DistributedDataParallel(Transformer(config))
        trainer = Trainer(ddp, data, **{**TRAIN, "steps": 2})
        trainer.run(quiet=True)
        trainer.save(tmp_path / "m.pt")
    finally:
        dist.destroy_process_group()
    loaded = load_model(tmp_path / "m.pt")
    for name, p in ddp.module.state_dict().items():
        torch.testing.assert_close(loaded.state_dict()[name], p, rtol=0, atol=0)
    resumed = Trainer(Transformer(config), data, **TRAIN)
    resumed.load(tmp_path / "m.pt")  # and a plain model resumes the run
    assert resumed.step_count == 2


# --- the Hugging Face export's special tokens -----------------------------------

def _model_that_always_predicts_byte_2() -> Transformer:
    """Untied head whose row 2 lines up with a direction every hidden state
    shares, so byte 0x02 is the greedy choice at every step."""
    model = Transformer(ModelConfig(vocab_size=256, d_model=32, n_layers=1, n_heads=2, n_kv_heads=1,
                                    d_ff=64, max_seq_len=64, tie_embeddings=False)).eval()
    with torch.no_grad():
        model.blocks[0].attn.o_proj.weight.zero_()   # the residual stream is the embedding itself
        model.blocks[0].mlp.down_proj.weight.zero_()
        model.tok_emb.weight[:, 0] = 1.0              # every token: a large first coordinate
        model.lm_head.weight[2, 0] = 5.0
    return model


def test_hf_generate_on_an_exported_byte_model_does_not_stop_at_byte_2():
    pytest.importorskip("transformers")
    model = _model_that_always_predicts_byte_2()
    hf = tinylm.to_hf_llama(model)
    assert hf.config.eos_token_id is None and hf.config.bos_token_id is None
    prompt = torch.tensor([[65, 66, 67]])
    with torch.no_grad():
        out = hf.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=10, do_sample=False)
    assert out.shape == (1, 13) and (out[0, 3:] == 2).all()
    assert torch.equal(out, generate(model, prompt, 10, temperature=0))


def test_hf_export_takes_a_real_tokenizers_ids(config):
    pytest.importorskip("transformers")
    hf = tinylm.to_hf_llama(Transformer(config), bos_token_id=1, eos_token_id=2)
    assert (hf.config.bos_token_id, hf.config.eos_token_id) == (1, 2)
    with pytest.raises(ValueError, match="eos_token_id must be a token id in"):
        tinylm.hf_llama_config(config, eos_token_id=config.vocab_size)


# --- token ids out of range under torch.compile -------------------------------

@pytest.mark.slow
def test_out_of_range_ids_under_torch_compile_name_the_vocabulary():
    model = Transformer(ModelConfig(vocab_size=256, d_model=32, n_layers=1, n_heads=2, n_kv_heads=1, d_ff=64,
                                    max_seq_len=16)).eval()
    compiled = torch.compile(model)
    with torch.no_grad():
        assert compiled(torch.tensor([[1, 2, 3]])).shape == (1, 3, 256)
        with pytest.raises(RuntimeError, match=r"token id outside the vocabulary \[0, 256\).*ModelConfig.vocab_size"):
            compiled(torch.tensor([[1, 2, 300]]))


def test_kv_cache_dtype_message_names_autocast(config):
    with pytest.raises(TypeError, match="get_autocast_dtype"):
        KVCache(config, 1).update(0, torch.zeros(1, config.n_kv_heads, 1, config.head_dim, dtype=torch.bfloat16),
                                  torch.zeros(1, config.n_kv_heads, 1, config.head_dim, dtype=torch.bfloat16))
