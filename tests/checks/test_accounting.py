"""The accounting exercises (parameters, FLOPs, bytes): their measurements
agree with independent references (Hugging Face's Llama built on the meta
device, a real optimizer step, a real KV cache, published counts), a correct
answer passes every check, each usual mistake is named, and the timing
helpers judge noise without ever failing on it."""
from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

import tinylm
from autograder import checks
from autograder.checks import CheckFailed
from autograder.checks.framework.check import Check
from autograder.checks import accounting as acc
from tinylm import measure
from tinylm.presets import LLAMA3_8B, SMOLLM2_135M

from ..helpers import ACCOUNTING_CHECK_MODULE, assert_stub_gets_not_implemented_message

transformers = pytest.importorskip("transformers")


def _hf_meta(config: tinylm.ModelConfig):
    with torch.device("meta"):
        return transformers.LlamaForCausalLM(tinylm.hf_llama_config(config))


# -- the measurements against independent references ---------------------------------


@pytest.mark.parametrize("config", [SMOLLM2_135M, LLAMA3_8B], ids=["SmolLM2-135M", "Llama-3-8B"])
def test_parameter_measurement_equals_transformers_llama(config):
    assert sum(acc.config_parameters(config).values()) == _hf_meta(config).num_parameters()


def test_published_counts():
    # SmolLM2-135M's Hugging Face page and Meta's Llama 3 model card round these to "135M" and "8B".
    assert round(sum(acc.config_parameters(SMOLLM2_135M).values()) / 1e6) == 135
    assert round(sum(acc.config_parameters(LLAMA3_8B).values()) / 1e9) == 8


def test_smollm2_preset_is_the_installed_model():
    if tinylm.pretrained.why_unavailable():
        pytest.skip("SmolLM2 weights not installed")
    installed = tinylm.pretrained.pretrained_config(max_seq_len=SMOLLM2_135M.max_seq_len)
    fields = ("vocab_size", "d_model", "n_layers", "n_heads", "n_kv_heads", "d_ff", "rope_theta", "tie_embeddings")
    assert all(getattr(installed, f) == getattr(SMOLLM2_135M, f) for f in fields), installed


def test_components_cover_every_parameter_and_the_tied_head_once():
    tied = tinylm.ModelConfig(d_model=32, n_layers=3, n_heads=4, n_kv_heads=2)
    counts = acc.measure_parameters(tinylm.Transformer(tied))
    assert sum(counts.values()) == tinylm.Transformer(tied).num_parameters() and counts["lm_head"] == 0
    assert set(counts) == set(acc.COMPONENTS)
    untied = acc.measure_parameters(tinylm.Transformer(dataclasses.replace(tied, tie_embeddings=False)))
    assert untied["lm_head"] == untied["embedding"] == 256 * 32


def test_attention_flop_measurement_equals_a_real_layer():
    """The written-out layer of the check against tinylm's own Attention module (reference path) on the CPU."""
    B, T, d, H = 2, 24, 48, 6
    config = tinylm.ModelConfig(d_model=d, n_layers=1, n_heads=H, max_seq_len=T, attn_impl="reference")
    layer = tinylm.Attention(config)
    cos, sin = tinylm.rope_cache(config.head_dim, T)
    x = torch.randn(B, T, d)
    with FlopCounterMode(display=False) as counter:
        layer(x, cos, sin)
    assert sum(acc.measured_attention_flops(B, T, d, H).values()) == counter.get_total_flops()


def test_kv_cache_measurement_equals_transformers_cache():
    """Bytes of what Hugging Face's cache holds after a prefill of T tokens (a real forward pass, CPU)."""
    config = tinylm.ModelConfig(d_model=48, n_layers=3, n_heads=6, n_kv_heads=2, max_seq_len=64)
    hf = transformers.LlamaForCausalLM(tinylm.hf_llama_config(config)).eval()
    T = 37
    with torch.no_grad():
        cache = hf(torch.randint(256, (2, T)), use_cache=True).past_key_values
    held = sum(layer.keys.nbytes + layer.values.nbytes for layer in cache.layers)
    assert held == acc.kv_cache_nbytes(config, T, batch_size=2)


@pytest.mark.parametrize("n_layers", [2, 3], ids=["measured whole", "measured per layer"])
def test_train_flops_measurement_equals_transformers_eager_llama(n_layers):
    config = tinylm.ModelConfig(d_model=32, n_layers=n_layers, n_heads=4, n_kv_heads=2, max_seq_len=16)
    hf_config = tinylm.hf_llama_config(config)
    hf_config._attn_implementation = "eager"  # its attention as matmuls: the fused kernel is not counted on the CPU
    hf = transformers.LlamaForCausalLM(hf_config)
    ids = torch.randint(256, (3, 16))
    with FlopCounterMode(display=False) as counter:
        logits = hf(ids).logits
        F.cross_entropy(logits.flatten(0, 1), ids.flatten()).backward()
    # Hugging Face builds its cos/sin table at every call (a matmul in some transformers releases, a broadcast
    # product in others); tinylm reads a table made once. The model's own FLOPs are the rest.
    table = sum(counter.get_flop_counts().get("LlamaForCausalLM.model.rotary_emb", {}).values())
    assert acc.measured_train_step(config, 3, 16)["flops"] == counter.get_total_flops() - table


@pytest.mark.parametrize("config, batch_size, seq_len", [
    (tinylm.ModelConfig(vocab_size=70, d_model=40, n_layers=5, n_heads=4, n_kv_heads=1, tie_embeddings=False), 3, 9),
    (SMOLLM2_135M, 2, 64)], ids=["5 layers, MQA, untied", "SmolLM2-135M"])
def test_a_train_step_measured_per_layer_equals_the_whole_model(config, batch_size, seq_len):
    whole = acc.meta_model(config, attn_impl="reference", max_seq_len=seq_len)
    flops = acc.train_step_flops(whole, batch_size, seq_len, keep_grads=True)
    assert acc.measured_train_step(config, batch_size, seq_len) == {"flops": flops, **acc.adamw_step_state(whole)}


def test_per_layer_measures_one_and_two_layers_only():
    asked = []

    def measure(config):
        asked.append(config.n_layers)
        return {"count": 7 + 5 * config.n_layers}

    assert acc.per_layer(measure, tinylm.ModelConfig(n_layers=9)) == {"count": 7 + 5 * 9}
    assert sorted(asked) == [1, 2]
    assert acc.per_layer(measure, tinylm.ModelConfig(n_layers=2)) == {"count": 17} and asked[-1] == 2


def test_meta_adamw_step_bytes_equal_a_real_step():
    config = tinylm.ModelConfig(d_model=32, n_layers=2, n_heads=4, tie_embeddings=False, max_seq_len=8)
    model = tinylm.Transformer(config)
    optimizer = torch.optim.AdamW(model.parameters())
    ids = torch.randint(256, (2, 8))
    F.cross_entropy(model(ids).flatten(0, 1), ids.flatten()).backward()
    optimizer.step()
    assert acc.training_state_nbytes(model, optimizer) == acc.after_one_adamw_step(config)


def test_saved_activations_count_the_saved_input_not_the_weight():
    layer = torch.nn.Linear(16, 8)
    x = torch.randn(5, 16, requires_grad=True)
    assert acc.saved_activation_bytes(layer, x) == x.nbytes  # the linear saves its input and its (excluded) weight


def test_block_flops_split_adds_up_to_the_block():
    config = dataclasses.replace(SMOLLM2_135M, attn_impl="reference", max_seq_len=64)
    block = tinylm.Block(config)
    cos, sin = tinylm.rope_cache(config.head_dim, 64, config.rope_theta)
    with FlopCounterMode(display=False) as counter:
        block(torch.randn(1, 64, config.d_model), cos, sin)
    split = acc.block_flops(SMOLLM2_135M, 64)
    assert split["attention"] + split["mlp"] == counter.get_total_flops() and split["mlp"] == 6 * 64 * 576 * 1536


# -- correct answers pass; the usual mistakes are named --------------------------------


def _params(c):
    L, d, V, hd = c.n_layers, c.d_model, c.vocab_size, c.head_dim
    return {"embedding": V * d, "attention": L * 2 * d * hd * (c.n_heads + c.n_kv_heads), "mlp": 3 * L * d * c.d_ff,
            "norms": (2 * L + 1) * d, "lm_head": 0 if c.tie_embeddings else V * d}


def _attention_flops(B, T, d, H):
    return {"qkv_proj": 6 * B * T * d * d, "scores": 2 * B * T * T * d, "mix": 2 * B * T * T * d,
            "out_proj": 2 * B * T * d * d}


def _kv_bytes(c, T, B=1, dtype=torch.float32):
    return 2 * c.n_layers * c.n_kv_heads * c.head_dim * T * B * dtype.itemsize


def _decode(c, T, dtype=torch.bfloat16):
    return {"weights": sum(_params(c).values()) * dtype.itemsize, "kv_cache": _kv_bytes(c, T, 1, dtype)}


def _train(c, B, T):
    p = _params(c)
    n = sum(p.values())
    matmul = n - p["norms"] - (0 if c.tie_embeddings else p["embedding"])
    return {"flops": 6 * B * T * matmul + 12 * c.n_layers * B * T * T * c.n_heads * c.head_dim,
            "weights": 4 * n, "grads": 4 * n, "adam_moments": 8 * n}


CORRECT = [
    (checks.check_attention_flops, _attention_flops),
    (checks.check_param_counts, _params),
    (checks.check_kv_cache_bytes, _kv_bytes),
    (checks.check_decode_bytes_per_token, _decode),
    (checks.check_train_step_costs, _train),
]


@pytest.mark.parametrize("check, answer", CORRECT, ids=[c.__name__ for c, _ in CORRECT])
def test_a_correct_answer_passes(check, answer, capsys):
    check(answer)
    assert "PASS" in capsys.readouterr().out


@pytest.mark.parametrize("check, answer", CORRECT, ids=[c.__name__ for c, _ in CORRECT])
def test_stub_gives_a_short_not_implemented_message(check, answer):
    assert_stub_gets_not_implemented_message(check, 1)


def test_every_accounting_check_is_exercised():
    public = {n for n in dir(checks) if n.startswith("check_") and getattr(checks, n).__module__ == ACCOUNTING_CHECK_MODULE == acc.__name__}
    assert public == {c.__name__ for c, _ in CORRECT}


def _changed(answer, key, how):
    def wrong(*args):
        value = answer(*args)
        value[key] = how(value[key], *args)
        return value
    return wrong


MISTAKES = [
    (checks.check_param_counts, _changed(_params, "lm_head", lambda v, c: c.vocab_size * c.d_model),
     "the tied head counted twice"),
    (checks.check_param_counts, _changed(_params, "attention", lambda v, c: 4 * c.n_layers * c.d_model ** 2),
     "k_proj and v_proj sized like q_proj"),
    (checks.check_param_counts, _changed(_params, "mlp", lambda v, c: v * 2 // 3), "SwiGLU's third matrix forgotten"),
    (checks.check_param_counts,
     _changed(_params, "attention", lambda v, c: v + c.n_layers * (2 * c.d_model + 2 * c.n_kv_heads * c.head_dim)),
     "biases that do not exist"),
    (checks.check_param_counts, _changed(_params, "norms", lambda v, c: v - c.d_model), "final norm"),
    (checks.check_attention_flops, lambda *a: {k: v // 2 for k, v in _attention_flops(*a).items()},
     "the factor 2 of a multiply-add"),
    (checks.check_attention_flops, _changed(_changed(_attention_flops, "scores", lambda v, *a: 0), "mix",
                                            lambda v, *a: 0), "the attention matmuls are missing"),
    (checks.check_attention_flops, _changed(_changed(_attention_flops, "scores", lambda v, B, T, d, H: v // T), "mix",
                                            lambda v, B, T, d, H: v // T), "counted without T"),
    (checks.check_kv_cache_bytes, lambda c, T, B, dtype: _kv_bytes(c, T, B, dtype) // 2, "K and V both"),
    (checks.check_kv_cache_bytes, lambda c, T, B, dtype: _kv_bytes(c, T, B, dtype) // c.n_layers, "per layer"),
    (checks.check_kv_cache_bytes, lambda c, T, B, dtype: _kv_bytes(c, T, B) // 1, "dtype is ignored (4 bytes"),
    (checks.check_kv_cache_bytes, lambda c, T, B, dtype: _kv_bytes(c, T, B, dtype) * c.n_heads // c.n_kv_heads,
     "n_heads instead of n_kv_heads"),
    (checks.check_decode_bytes_per_token,
     _changed(_decode, "weights", lambda v, c, T, dt: v + (c.vocab_size * c.d_model * dt.itemsize
                                                            if c.tie_embeddings else 0)), "the tied head counted twice"),
    (checks.check_decode_bytes_per_token,
     _changed(_decode, "kv_cache", lambda v, c, T, dt: v * c.n_heads // c.n_kv_heads), "n_heads instead of n_kv_heads"),
    (checks.check_decode_bytes_per_token, _changed(_decode, "kv_cache", lambda v, c, T, dt: v // dt.itemsize),
     "numbers, not bytes"),
    (checks.check_decode_bytes_per_token,  # RoPE's cos and sin tables counted as weights
     _changed(_decode, "weights", lambda v, c, T, dt: v + 2 * c.max_seq_len * c.head_dim * dt.itemsize),
     "the model's buffers rope_cos and rope_sin are counted as weights"),
    (checks.check_kv_cache_bytes,  # a query cached with each key and value
     lambda c, T, B, dtype: _kv_bytes(c, T, B, dtype) * (c.n_heads + 2 * c.n_kv_heads) // (2 * c.n_kv_heads),
     "2 vectors of n_kv_heads·head_dim (a key's or a value's size, k_proj's and v_proj's output) and 1 of "
     "n_heads·head_dim"),
    (checks.check_train_step_costs, _changed(_train, "flops", lambda v, c, B, T: v // 3), "the forward pass only"),
    (checks.check_train_step_costs,
     _changed(_train, "flops", lambda v, c, B, T: v - 12 * c.n_layers * B * T * T * c.d_model),
     "the attention matmuls are missing"),
    (checks.check_train_step_costs,
     _changed(_train, "weights", lambda v, c, B, T: v + (4 * c.vocab_size * c.d_model if c.tie_embeddings else 0)),
     "the tied head counted twice"),
]


@pytest.mark.parametrize("check, wrong, phrase", MISTAKES, ids=[f"{c.__name__}:{p[:30]}" for c, _, p in MISTAKES])
def test_a_usual_mistake_is_named(check, wrong, phrase):
    with pytest.raises(CheckFailed) as err:
        check(wrong)
    assert f"Likely bug: " in str(err.value) and phrase in str(err.value), str(err.value)


TIED = [
    (checks.check_attention_flops, _changed(_changed(_attention_flops, "scores", lambda v, *a: v // 2), "mix",
                                            lambda v, *a: v // 2), ("halved for the causal mask", "multiply-add")),
    (checks.check_train_step_costs,
     _changed(_train, "flops", lambda v, c, B, T: v - 6 * c.n_layers * B * T * T * c.n_heads * c.head_dim),
     ("halved for the causal mask", "one of attention's two T × T matmuls")),
    # half the moments' bytes: one moment at 4 bytes, or two at 2 bytes each
    (checks.check_train_step_costs, _changed(_train, "adam_moments", lambda v, *a: v // 2),
     ("one moment only", "the moments counted at 2 bytes each")),
]


@pytest.mark.parametrize("check, wrong, causes", TIED, ids=[c.__name__ for c, _, _ in TIED])
def test_a_count_two_mistakes_give_alike_names_both_as_candidates(check, wrong, causes):
    """Half the attention's FLOPs is both the causal triangle and one of its two matmuls (or a missing
    multiply-add factor), half the moments' bytes both one moment and two at 2 bytes: the count is said as
    measured, each cause as a candidate, neither as certain."""
    with pytest.raises(CheckFailed) as err:
        check(wrong)
    text = str(err.value)
    said = next(line for line in text.splitlines() if "candidates" in line)
    assert said.strip().startswith("Candidates:") and all(c in said for c in causes), text
    assert not any(c in line for line in text.splitlines() if line.strip().startswith("Likely bug:") for c in causes), text


def _train_one_query_short(c, B, T):
    """seq_len - 1 tokens per sequence, each attending to all T keys."""
    value = _train(c, B, T)
    value["flops"] = 6 * B * (T - 1) * (value["flops"] - 12 * c.n_layers * B * T * T * c.n_heads * c.head_dim) // (6 * B * T) \
        + 12 * c.n_layers * B * (T - 1) * T * c.n_heads * c.head_dim
    return value


def _attention_scores_one_key_more(batch, seq_len, d_model, n_heads):
    return {**_attention_flops(batch, seq_len, d_model, n_heads), "scores": 2 * batch * seq_len * (seq_len + 1) * d_model}


PART_OFF = [
    (checks.check_train_step_costs, _train_one_query_short,
     ("the part that grows with T² ", "counts 256·255 instead of 256²", "the part in proportion to T ",
      "counts 255 instead of 256")),
    (checks.check_attention_flops, _attention_scores_one_key_more,
     ("with seq_len = 16, the part that grows with seq_len²", "counts 16·17 instead of 16²")),
]


@pytest.mark.parametrize("check, wrong, phrases", PART_OFF, ids=[c.__name__ for c, _, _ in PART_OFF])
def test_a_size_off_by_one_in_one_part_of_a_count_is_measured(check, wrong, phrases):
    # a size is named as the learner's own function names it
    with pytest.raises(CheckFailed) as err:
        check(wrong)
    assert all(p in str(err.value) for p in phrases), str(err.value)


def _attention_causal_triangle(B, T, d, H):
    """Scores and mix counted over the T(T + 1) / 2 pairs the causal mask keeps, 2 FLOPs each per feature."""
    return {**_attention_flops(B, T, d, H), "scores": B * T * (T + 1) * d, "mix": B * T * (T + 1) * d}


def test_counting_the_causal_triangle_is_measured_with_its_candidates_not_named_as_certain():
    with pytest.raises(CheckFailed) as err:
        checks.check_attention_flops(_attention_causal_triangle)
    message, d = str(err.value), err.value.diagnosis
    # the ratio is T-dependent: (16 + 1) / 32 at T = 16 and (40 + 1) / 80 at T = 40 are both read as one fact
    line = next(l for l in message.splitlines() if "(T + 1) / (2T)" in l)
    assert line.strip().startswith("Candidates: scores and mix:") and "T = 16, 40" in line and "candidates:" in line
    assert not d.likely_bugs and "Likely bug" not in message, message
    assert "counted twice over" not in message and "halved" not in message, message


@pytest.mark.parametrize("check, wrong, phrase", MISTAKES[-4:], ids=[p[:30] for _, _, p in MISTAKES[-4:]])
def test_a_count_off_for_another_reason_is_not_read_as_an_off_by_one(check, wrong, phrase):
    with pytest.raises(CheckFailed) as err:
        check(wrong)
    assert "off by one" not in str(err.value) and "instead of" not in str(err.value).split("Likely bug")[0], str(err.value)


# -- a count read as its measurement with a named part left out, added or scaled ------------------


def _attention_flops_n_minus_1(B, T, d, H):
    """A dot product of n terms counted as n multiplications and n - 1 additions: m·p·(2n - 1) per matmul."""
    hd = d // H
    return {"qkv_proj": 3 * B * T * d * (2 * d - 1), "scores": B * H * T * T * (2 * hd - 1),
            "mix": B * H * T * hd * (2 * T - 1), "out_proj": B * T * d * (2 * d - 1)}


def _decode_vocabulary_in_numbers(c, T, dtype=torch.bfloat16):
    p = _params(c)
    vocabulary = p["embedding"] + p["lm_head"]
    return {**_decode(c, T, dtype), "weights": vocabulary + (sum(p.values()) - vocabulary) * dtype.itemsize}


def _decode_embedding_one_row(c, T, dtype=torch.bfloat16):
    value = _decode(c, T, dtype)
    if not c.tie_embeddings:
        value["weights"] -= (c.vocab_size - 1) * c.d_model * dtype.itemsize
    return value


def _train_memory_of_matmul_weights(c, B, T):
    p = _params(c)
    n = sum(p.values()) - p["norms"] - (0 if c.tie_embeddings else p["embedding"])
    return {**_train(c, B, T), "weights": 4 * n, "grads": 4 * n, "adam_moments": 8 * n}


def _kv_bytes_capped(c, T, B=1, dtype=torch.float32):
    return _kv_bytes(c, min(T, c.max_seq_len), B, dtype)


PARTS_READ = [
    (checks.check_attention_flops, _attention_flops_n_minus_1,
     ("qkv_proj, scores, mix and out_proj: your count leaves out exactly one per output element of each matmul",
      "2n FLOPs")),
    (checks.check_decode_bytes_per_token, _decode_vocabulary_in_numbers,
     ("weights: the vocabulary matrices, ", "are counted in numbers, not bytes")),
    (checks.check_decode_bytes_per_token, _decode_embedding_one_row,
     ("the embedding (tok_emb.weight), ", "is counted as the one row a lookup reads")),
    (checks.check_train_step_costs, _train_memory_of_matmul_weights,
     ("weights, grads and adam_moments: your count leaves out exactly the parameters that no matmul multiplies, "
      "320 parameters for d_model 64", "whether a matmul multiplies it or not")),
    (checks.check_kv_cache_bytes, _kv_bytes_capped, ("the cache is counted for config.max_seq_len positions",)),
]


@pytest.mark.parametrize("check, wrong, phrases", PARTS_READ, ids=[w.__name__ for _, w, _ in PARTS_READ])
def test_a_count_off_by_a_named_part_is_read_so(check, wrong, phrases):
    with pytest.raises(CheckFailed) as err:
        check(wrong)
    assert "Likely bug: " in str(err.value) and all(p in str(err.value) for p in phrases), str(err.value)


def test_the_parameters_no_matmul_multiplies_are_measured():
    tied, untied = (tinylm.ModelConfig(d_model=64, n_layers=2, n_heads=4, tie_embeddings=t) for t in (True, False))
    assert "tok_emb.weight" in acc.multiplied_roles(tied) and "tok_emb.weight" not in acc.multiplied_roles(untied)
    assert "lm_head.weight" in acc.multiplied_roles(untied)
    assert not any("norm" in role for role in acc.multiplied_roles(tied) | acc.multiplied_roles(untied))


def test_parts_read_only_what_one_change_explains():
    config = tinylm.ModelConfig(d_model=64, n_layers=2, n_heads=4)
    parts = acc.parameter_parts(config)
    gains = (2 * config.n_layers + 1) * config.d_model
    left_out = acc.parts_apart(parts, 1000 - gains, 1000, "parameters")
    assert {r.same for r in left_out} == {(True, frozenset({"attn_norm.weight in every block",
                                                            "mlp_norm.weight in every block", "norm.weight"}))}
    assert not acc.parts_apart(parts, 1000 - 7, 1000, "parameters") and not acc.parts_apart(parts, 5, 5, "parameters")
    # q_proj and o_proj have the same numbers: a count without one of them is read as either, so neither is said
    q = config.n_layers * config.d_model ** 2
    findings = acc.Findings()
    findings.add("attention", acc.parts_apart([p for p in parts if "proj" in p.name and "every" in p.name],
                                              -q, 0, "parameters"))
    chk = Check("f")
    assert not findings.name(chk) and not chk.diagnoses


def _params_with_kv_heads(kv_heads):
    """param_counts with n_kv_heads replaced by kv_heads(config) in the attention."""
    def wrong(c):
        counts = _params(c)
        counts["attention"] = c.n_layers * 2 * c.d_model * c.head_dim * (c.n_heads + kv_heads(c))
        return counts
    return wrong


def test_a_count_that_reads_another_size_for_one_config_field_is_measured():
    # the group size n_heads // n_kv_heads taken for the number of kv heads: 1, 3 and 4 in the failing cases
    with pytest.raises(CheckFailed) as err:
        checks.check_param_counts(_params_with_kv_heads(lambda c: c.n_heads // c.n_kv_heads))
    said = str(err.value)
    assert "a model with n_kv_heads = 1 instead of 4" in said and "n_kv_heads = 4 instead of 8 for Llama-3-8B" in said
    assert "your count reads config.n_rep" in said and "Likely bug" not in said, said


def test_a_field_read_as_no_one_size_in_every_case_names_the_values_only():
    # n_kv_heads read as 2, 3 and 4 in the three failing cases: no other size of the config is that in all three
    with pytest.raises(CheckFailed) as err:
        checks.check_param_counts(_params_with_kv_heads(lambda c: {4: 2, 2: 3, 3: 3, 8: 4}[c.n_kv_heads]))
    said = str(err.value)
    assert "n_kv_heads = 2 instead of 4" in said and "reads another number where it needs config.n_kv_heads" in said, said


def test_a_count_no_config_field_explains_is_not_read_as_one():
    with pytest.raises(CheckFailed) as err:
        checks.check_param_counts(_changed(_params, "attention", lambda v, c: v + 7))
    assert "no other size of the config" not in str(err.value) and "your count reads" not in str(err.value), str(err.value)


def test_a_wrong_return_type_is_named():
    with pytest.raises(CheckFailed, match="should return a dict with the keys"):
        checks.check_param_counts(lambda c: sum(_params(c).values()))
    with pytest.raises(CheckFailed, match="missing: 'lm_head'"):
        checks.check_param_counts(lambda c: {k: v for k, v in _params(c).items() if k != "lm_head"})
    with pytest.raises(CheckFailed, match=r"return a Python int"):
        checks.check_kv_cache_bytes(lambda c, T, B, dtype: torch.tensor(_kv_bytes(c, T, B, dtype)))


def test_an_integral_float_is_read_as_a_count(capsys):
    checks.check_kv_cache_bytes(lambda c, T, B, dtype: float(_kv_bytes(c, T, B, dtype)))
    assert "PASS" in capsys.readouterr().out


# -- the timing helpers: a verdict, never a failure on noise ---------------------------


def test_verdicts():
    assert measure.against_prediction(10.0, (10.5, 1.0)) == "agrees within the spread of the repeats"
    assert measure.against_prediction(10.0, (25.0, 1.0)) == "measured 2.5x the prediction"
    assert measure.against_prediction(10.0, (3.0, 3.5)).startswith(measure.TOO_NOISY)      # spread > median
    assert measure.against_prediction(10.0, (14.0, 5.0)).startswith(measure.TOO_NOISY)     # wide, hides the gap
    assert measure.against_prediction(10.0, (30.0, 5.0)) == "measured 3x the prediction"   # stands out of it
    assert measure.clearly_more((1.0, 0.1), (2.0, 0.1)) and not measure.clearly_more((1.0, 0.6), (2.0, 0.6))


def test_timed_ms_leaves_out_the_extremes(monkeypatch):
    # A scripted clock, so a busy machine cannot stretch a run: each run advances it by its delay, in seconds.
    clock = [0.0]
    monkeypatch.setattr(measure.time, "perf_counter", lambda: clock[0])
    delays = iter([0, 0.0, 0.001, 0.002, 0.001, 0.001, 0.003, 0.05])  # warm-up, then one fast and one slow outlier

    def run():
        clock[0] += next(delays)

    median, spread = measure.timed_ms(run)
    # Sorted: 0, 1, 1, 1, 2, 3, 50 ms; the middle run is 1 ms and the kept range, 0 and 50 left out, is 1 to 3 ms.
    assert median == pytest.approx(1.0) and spread == pytest.approx(2.0)
    with pytest.raises(ValueError, match="at least 3 runs"):
        measure.timed_ms(lambda: None, repeats=2)


def test_rate_and_throughput_are_positive():
    low, spread = measure.rate(100, (10.0, 2.0))
    assert low == pytest.approx(1e4) and spread > 0
    flops, _ = measure.matmul_throughput(size=64, repeats=3)
    bandwidth, _ = measure.copy_bandwidth(megabytes=1, repeats=3)
    assert flops > 0 and bandwidth > 0
