"""The course corpus: unambiguous grammar, exact log-probabilities, splits, cache, load_text."""
import math
import random

import pytest
import torch

from tinylm import data
from tinylm.data import Choice, course_corpus, load_text, parse_story, sample_story


def _stories(n, seed):
    rng = random.Random(seed)
    return [sample_story(rng) for _ in range(n)]


def _check_unique_parses(stories):
    # The exhaustive parser finds *every* choice sequence that writes a text.
    # Exactly one, equal to the sampled one, means log p(text) = log p(choices).
    for story in stories:
        parses = parse_story(story.text)
        assert len(parses) == 1, f"{len(parses)} parses of {story.text!r}"
        assert parses[0].choices == story.choices
        assert parses[0].logp == pytest.approx(story.logp, abs=1e-9)
    # The sample is varied enough to mean something: distinct stories.
    assert len({s.text for s in stories}) > 0.99 * len(stories)


def test_parser_recovers_every_choice():
    _check_unique_parses(_stories(300, seed=11))


@pytest.mark.slow
def test_parser_recovers_every_choice_of_thousands_of_stories():
    _check_unique_parses(_stories(3000, seed=12))


def test_parser_finds_a_second_parse_when_the_grammar_is_ambiguous(monkeypatch):
    # If two options wrote the same text, the sampled log-probability would
    # undercount: the test above must be able to fail. Make "Then " ambiguous.
    monkeypatch.setattr(data, "_TIME", Choice(["", "Then ", "Then "], [5, 2, 2]))
    rng = random.Random(3)
    story = next(s for s in iter(lambda: sample_story(rng), None) if " Then " in s.text)
    assert len(parse_story(story.text)) >= 2


def test_parser_rejects_text_the_grammar_cannot_write():
    story = _stories(1, seed=5)[0]
    assert parse_story("To be or not to be.\n") == []
    assert parse_story(story.text[:-1]) == []  # a prefix is not a story
    assert parse_story(story.text + "x") == []  # nor is a story with more text


def test_log_probability_of_a_hand_written_story():
    # Computed by hand from the weight tables in tinylm/data.py.
    text = ('Long ago, in a deep forest, there lived a fox called Tam. Tam finds a lamp. '
            '"What a day," said Tam. In the end, Tam went home and slept.\n')
    expected = sum(math.log(p) for p in [
        3 / 12,  # "Long ago" among openings 6, 3, 2, 1
        4 / 16,  # "a deep forest" among places 4, 4, 3, 2, 2, 1
        5 / 32,  # no adjective (5) among 5 + adjectives summing to 27
        6 / 36,  # "fox" among animals summing to 36
        1 / 10, 1 / 8,  # name "Ta" + "m"
        5 / 6, 5 / 9, 0.4,  # not speech; no time phrase; the hero as subject
        0.75, 6 / 32,  # no relative clause; "finds" among verbs summing to 32
        3 / 10, 5 / 32, 6 / 38,  # determiner "a"; no adjective; "lamp" among things (38)
        8 / 17, 0.75,  # no prepositional phrase; no echo
        1 / 6, 2 / 11, 0.4,  # speech; "What a day" among utterances (11); said by the hero
        0.25, 3 / 6,  # stop after two sentences; "went home and slept."
    ])
    (parse,) = parse_story(text)
    assert parse.logp == pytest.approx(expected, rel=1e-12)


def test_choice_probabilities_sum_to_one():
    choices = [v for v in vars(data).values() if isinstance(v, Choice)]
    choices += [c for d in (data._VERB, data._ADJ, data._THING) for c in d.values()]
    choices += [data._subject_choice(name, cap)[0] for name in ("Tam", "Bundo") for cap in (False, True)]
    assert len(choices) > 20
    for c in choices:
        assert math.fsum(math.exp(lp) for lp in c.logp) == pytest.approx(1.0, abs=1e-12)


def test_corpus_is_deterministic_and_the_splits_are_whole_disjoint_stories():
    a = course_corpus(seed=4, train_bytes=30_000, val_bytes=9_000, cache=False)
    b = course_corpus(seed=4, train_bytes=30_000, val_bytes=9_000, cache=False)
    c = course_corpus(seed=5, train_bytes=30_000, val_bytes=9_000, cache=False)
    assert torch.equal(a.train, b.train) and torch.equal(a.val, b.val) and a.floor == b.floor
    assert not torch.equal(a.train[:1000], c.train[:1000])
    assert a.train.dtype == torch.uint8 and 30_000 <= len(a.train) < 32_000 and 9_000 <= len(a.val) < 11_000
    train_lines, val_lines = a.text("train").splitlines(), a.text("val").splitlines()
    assert a.text("val").endswith("\n") and not set(train_lines[:20]) & set(val_lines)
    # The floor is the exact entropy of the validation text, recomputed here
    # through the parser rather than the sampler.
    logp = sum(parse_story(line + "\n")[0].logp for line in val_lines)
    assert a.floor == pytest.approx(-logp / len(a.val), rel=1e-9)


def test_corpus_cache_is_used_and_a_damaged_cache_is_regenerated(tmp_path, monkeypatch):
    monkeypatch.setenv("TINYLM_CACHE", str(tmp_path))
    first = course_corpus(seed=1, train_bytes=5_000, val_bytes=2_000)
    files = sorted(p.name for p in tmp_path.iterdir())
    assert len(files) == 3 and all(name.startswith(first.name) for name in files)
    train_file = next(tmp_path.glob("*.train.txt"))
    train_file.write_bytes(b"tampered")
    again = course_corpus(seed=1, train_bytes=5_000, val_bytes=2_000)
    assert torch.equal(again.train, first.train) and again.floor == first.floor
    assert train_file.read_bytes() != b"tampered"


def test_baselines_closed_form():
    # train "abab...": unigram p(a) = p(b) = (n + alpha) / (2n + 256 alpha).
    n, alpha = 500, 0.5
    train = torch.tensor(list(b"ab" * n), dtype=torch.uint8)
    val = torch.tensor(list(b"abab"), dtype=torch.uint8)
    corpus = data.Corpus("toy", train, val)
    p_uni = (n + alpha) / (2 * n + 256 * alpha)
    # bigram: "a" is followed by "b" n times, "b" by "a" n - 1 times.
    p_ab = (n + alpha) / (n + 256 * alpha)
    p_ba = (n - 1 + alpha) / (n - 1 + 256 * alpha)
    expected_bigram = -(math.log(p_uni) + math.log(p_ab) * 2 + math.log(p_ba)) / 4
    got = corpus.baselines(alpha=alpha)
    assert got["uniform"] == pytest.approx(math.log(256))
    assert got["unigram"] == pytest.approx(-math.log(p_uni))
    assert got["bigram"] == pytest.approx(expected_bigram)
    assert got["floor"] is None


def test_course_corpus_baselines_are_ordered():
    corpus = course_corpus(seed=2, train_bytes=60_000, val_bytes=20_000, cache=False)
    b = corpus.baselines()
    assert b["floor"] < b["bigram"] < b["unigram"] < b["uniform"]


@pytest.mark.parametrize("kwargs", [dict(train_bytes=0), dict(val_bytes=-5), dict(train_bytes=2.5)])
def test_course_corpus_bad_sizes(kwargs):
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        course_corpus(cache=False, **kwargs)


def test_load_text_splits_at_the_end_on_a_character_boundary(tmp_path):
    text = "ab" * 500 + "é" * 40 + "xyz" * 100  # é is 2 bytes in UTF-8
    path = tmp_path / "t.txt"
    path.write_text(text, encoding="utf-8")
    for fraction in (0.1, 0.2, 0.2375, 0.5):
        corpus = load_text(path, val_fraction=fraction)
        raw = bytes(corpus.train.tolist()) + bytes(corpus.val.tolist())
        assert raw == text.encode("utf-8") and corpus.floor is None
        # Both halves decode on their own: no character was cut in two.
        assert corpus.text("train") + corpus.text("val") == text
        assert abs(len(corpus.val) - fraction * len(raw)) <= 1


def test_load_text_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        load_text(tmp_path / "missing.txt")
    with pytest.raises(ValueError, match="not a regular file"):
        load_text(tmp_path)
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("café ".encode("latin-1") * 400)
    with pytest.raises(ValueError, match="not UTF-8.*offset 3"):
        load_text(latin1)
    short = tmp_path / "short.txt"
    short.write_text("too short")
    with pytest.raises(ValueError, match="too short"):
        load_text(short)
    with pytest.raises(ValueError, match="val_fraction"):
        load_text(latin1, val_fraction=1.5)
    with pytest.raises(TypeError, match="path"):
        load_text(42)
