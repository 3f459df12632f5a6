import pytest
import torch

from tinylm import ByteTokenizer


@pytest.mark.parametrize("text", ["", "hello", "naïve café", "日本語 ✓ 🙂", "tab\tnew\nline\x00nul"])
def test_round_trip_is_lossless(text):
    tok = ByteTokenizer()
    ids = tok.encode(text)
    assert ids.dtype == torch.long and ids.dim() == 1
    assert ids.tolist() == list(text.encode("utf-8"))  # the ids are the UTF-8 bytes
    assert tok.decode(ids) == text
    assert tok.decode(ids.tolist()) == text


def test_invalid_utf8_decodes_to_replacement_char():
    assert ByteTokenizer().decode([104, 0xFF, 105]) == "h\ufffdi"


def test_bad_inputs():
    tok = ByteTokenizer()
    with pytest.raises(TypeError, match="str"):
        tok.encode(b"bytes")
    with pytest.raises(ValueError, match=r"\[0, 256\)"):
        tok.decode([65, 256])
    with pytest.raises(ValueError, match="1-D"):
        tok.decode(torch.zeros(2, 3, dtype=torch.long))
