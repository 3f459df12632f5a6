"""BPETokenizer: the byte-level BPE tokenizer of a pretrained model (GPT-2
style, as SmolLM2 uses), built with Hugging Face's `tokenizers` library from
a vocabulary and merge list such as a GGUF file stores.

Unlike the course's ByteTokenizer (one id per byte), ids here stand for
learned byte sequences: common words are one token, rare ones several.
"""
from __future__ import annotations

# The pre-tokenizers this class implements, by GGUF's tokenizer.ggml.pre name.
# "smollm" splits every digit off first, then applies GPT-2's regex (llama.cpp
# groups it with StarCoder for this reason); "gpt2" is the regex alone.
SPLIT_DIGITS = {"smollm": True, "starcoder": True, "gpt2": False, "default": False}
# SmolLM2's chat template, when the conversation starts without a system turn.
DEFAULT_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


class BPETokenizer:
    """encode(text) -> ids, decode(ids) -> text, chat_ids(message) -> the
    ChatML prompt ids SmolLM2-Instruct was fine-tuned on."""

    def __init__(self, tokens: list[str], merges: list[str], special_ids: list[int],
                 eos_id: int, bos_id: int | None = None, pre_tokenizer: str = "smollm"):
        from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

        if pre_tokenizer not in SPLIT_DIGITS:
            raise ValueError(f"BPETokenizer: pre-tokenizer {pre_tokenizer!r} is not supported; "
                             f"known: {sorted(SPLIT_DIGITS)}.")
        vocab = {token: i for i, token in enumerate(tokens)}
        pairs = [tuple(m.split(" ")) for m in merges]
        self._tok = Tokenizer(models.BPE(vocab=vocab, merges=pairs))
        byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        self._tok.pre_tokenizer = (pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
                                   if SPLIT_DIGITS[pre_tokenizer] else byte_level)
        self._tok.decoder = decoders.ByteLevel()
        # Control tokens (<|im_start|>, ...) are matched whole in the text,
        # before BPE, so a chat prompt's markers become single ids.
        self._tok.add_special_tokens([AddedToken(tokens[i], special=True, normalized=False) for i in special_ids])
        self.tokens = list(tokens)
        self.vocab_size = len(tokens)
        self.eos_id = eos_id
        self.bos_id = bos_id
        self.special_ids = frozenset(special_ids)

    def encode(self, text: str) -> list[int]:
        if not isinstance(text, str):
            raise TypeError(f"BPETokenizer.encode: text must be a str, got {type(text).__name__}.")
        return self._tok.encode(text, add_special_tokens=False).ids

    def decode(self, ids, skip_special: bool = False) -> str:
        """ids: a list of ints or a 1-D tensor. skip_special drops the
        control tokens (<|im_end|>, ...) from the text."""
        if hasattr(ids, "tolist"):
            ids = ids.tolist()
        bad = [i for i in ids if not isinstance(i, int) or not 0 <= i < self.vocab_size]
        if bad:
            raise ValueError(f"BPETokenizer.decode: id {bad[0]!r} is outside the vocabulary [0, {self.vocab_size}).")
        return self._tok.decode(ids, skip_special_tokens=skip_special)

    def chat_text(self, user_message: str, system: str | None = None) -> str:
        """The prompt in SmolLM2's ChatML form, ending where the assistant's
        answer begins."""
        system = DEFAULT_SYSTEM if system is None else system
        return (f"<|im_start|>system\n{system}<|im_end|>\n"
                f"<|im_start|>user\n{user_message}<|im_end|>\n"
                f"<|im_start|>assistant\n")

    def chat_ids(self, user_message: str, system: str | None = None) -> list[int]:
        """chat_text's ids: what transformers' apply_chat_template(...,
        add_generation_prompt=True) gives for one user turn."""
        return self.encode(self.chat_text(user_message, system))

    def bytes_per_token(self, text: str) -> float:
        """UTF-8 bytes per token of `text`: the factor between nats per token
        and nats per byte, so models with different tokenizers compare."""
        ids = self.encode(text)
        if not ids:
            raise ValueError("BPETokenizer.bytes_per_token: text is empty.")
        return len(text.encode("utf-8")) / len(ids)

    def __repr__(self) -> str:
        return f"BPETokenizer(vocab_size={self.vocab_size}, eos_id={self.eos_id}, bos_id={self.bos_id})"
