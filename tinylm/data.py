"""The course corpus: short stories from a stochastic grammar with a known entropy.

Why a generated corpus? Because we know its true probability distribution,
we can compute the *floor*: the exact entropy per byte of the held-out text.
No model, however large, can have a lower expected validation loss than that,
so notebook 10 can say how far a learner's model is from perfect, not only
how it compares with another model.

How the floor is exact. Every story is produced by a sequence of random
choices (which opening, which animal, which verb, ...). Each choice emits a
piece of text, and the probability of the story is the product of the
probabilities of its choices. That product is the probability of the *text*
only if no other choice sequence produces the same text: the grammar must be
unambiguous. `parse_story` recovers every choice sequence that produces a
given text (a depth-first search over the same grammar, pruned by matching
text); the tests run it on thousands of stories and require exactly one parse
each. Then  log p(text) = sum of log p(choice), and the floor of a split is
  -sum over stories of log p(story) / number of bytes of the split.

What the grammar makes a model learn, from short range to long range:
- spelling of a ~100-word vocabulary (within a word, the rest is forced);
- word-class order (article, adjective, noun, verb, preposition);
- "a"/"an" chosen by the next word's first letter;
- number agreement: "the crows hide", "the crow hides", also across a
  relative clause: "The crows, who find a lamp, hide it..." (20-40 bytes back);
- an echo: "..., or so the crows say." copies the subject of the sentence
  30-60 bytes back and makes "say" agree with it;
- the hero's invented name ("Kesk", "Tapi") is chosen once per story and then
  reused in later sentences: copying it from far back is worth several nats.

Any UTF-8 text file can be used instead of the grammar: `load_text(path)`.
Nothing here downloads anything.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import math
import os
import random
from dataclasses import dataclass
from pathlib import Path

import torch

__all__ = [
    "Corpus",
    "Story",
    "course_corpus",
    "load_text",
    "sample_story",
    "parse_story",
    "cache_dir",
    "unigram_nll",
    "bigram_nll",
    "GRAMMAR_VERSION",
]

# Bump when the grammar changes: it is part of the cache key, so old cached
# corpora are never mistaken for new ones.
GRAMMAR_VERSION = 2

# ---------------------------------------------------------------------------
# Word lists. Weights are relative (normalised per choice point), Zipf-like so
# that unigram and bigram baselines have something to find. Word classes are
# disjoint, so a word's spelling tells its class.
# ---------------------------------------------------------------------------

# (singular, plural, weight): the animals that act in the stories.
ANIMALS = [
    ("fox", "foxes", 6), ("crow", "crows", 5), ("otter", "otters", 4),
    ("goat", "goats", 4), ("hare", "hares", 3), ("owl", "owls", 3),
    ("mouse", "mice", 3), ("wolf", "wolves", 2), ("bear", "bears", 2),
    ("frog", "frogs", 2), ("badger", "badgers", 1), ("heron", "herons", 1),
]
# (singular, plural, weight): the things they act on.
THINGS = [
    ("lamp", "lamps", 6), ("key", "keys", 5), ("boat", "boats", 4),
    ("coin", "coins", 4), ("basket", "baskets", 3), ("rope", "ropes", 3),
    ("map", "maps", 3), ("bell", "bells", 2), ("drum", "drums", 2),
    ("kettle", "kettles", 2), ("apple", "apples", 2), ("egg", "eggs", 1),
    ("acorn", "acorns", 1),
]
ADJECTIVES = [
    ("red", 5), ("old", 5), ("small", 4), ("golden", 3), ("heavy", 2),
    ("broken", 2), ("shiny", 2), ("wooden", 2), ("tiny", 1), ("strange", 1),
]
# (base form, third person singular, weight)
VERBS = [
    ("find", "finds", 6), ("carry", "carries", 5), ("hide", "hides", 4),
    ("mend", "mends", 3), ("paint", "paints", 3), ("sell", "sells", 3),
    ("guard", "guards", 2), ("drop", "drops", 2), ("polish", "polishes", 1),
    ("borrow", "borrows", 1), ("watch", "watches", 2),
]
PLACES = [
    ("a quiet village", 4), ("a deep forest", 4), ("a town by the sea", 3),
    ("a valley of mist", 2), ("a hut on a hill", 2), ("a busy market town", 1),
]
OPENINGS = [("Once upon a time", 6), ("Long ago", 3), ("One cold morning", 2),
            ("In the old days", 1)]
# Optional place phrase after the object; the empty option is the most likely.
PREPOSITIONS = [
    ("", 8), (" near the river", 2), (" under the bridge", 2), (" in the barn", 2),
    (" behind the mill", 1), (" at the market", 1), (" by the well", 1),
]
UTTERANCES = [
    ("I am hungry", 3), ("Look at the sky", 2), ("We should go home", 2),
    ("What a day", 2), ("Where is my hat", 1), ("This is not mine", 1),
]
ENDINGS = [
    (" went home and slept.", 3), (" was never bored again.", 2),
    (" told the tale for years.", 1),
]
# Names: a consonant-vowel syllable plus a tail that starts with a consonant,
# so the split point is forced ("Ta|pi", "Ke|sk").
NAME_HEADS = ["Ta", "Mo", "Li", "Bu", "Ke", "Ro", "Pe", "Ni", "Sa", "Do"]
NAME_TAILS = ["m", "ra", "lo", "vy", "sk", "ndo", "pi", "zu"]

# Story layout probabilities.
P_SUBJECT_IS_HERO = 0.4  # the hero's name as a sentence subject
P_PLURAL_SUBJECT = 0.35  # "the crows" rather than "the crow"
P_RELATIVE = 0.25  # "The crow, who finds a lamp, hides ..."
P_ECHO = 0.25  # "..., or so the crow says."
MIN_SENTENCES = 2
P_STOP = 0.25  # after MIN_SENTENCES, chance to end after each sentence


class Choice:
    """One choice point: option texts with probabilities (normalised here)."""

    __slots__ = ("texts", "logp", "cum")

    def __init__(self, texts: list[str], weights: list[float]):
        if len(texts) != len(weights) or not texts:
            raise ValueError("texts and weights must be non-empty and of equal length")
        total = float(sum(weights))
        self.texts = texts
        self.logp = [math.log(w / total) for w in weights]
        # Cumulative probabilities for inverse-CDF sampling with one uniform draw.
        acc, self.cum = 0.0, []
        for w in weights:
            acc += w / total
            self.cum.append(acc)


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def _article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def _table(rows) -> Choice:
    """A Choice from (text, weight) rows."""
    return Choice([t for t, _ in rows], [w for _, w in rows])


# Fixed choice points (their options never depend on the story so far).
_OPENING = _table(OPENINGS)
_PLACE = _table(PLACES)
_HEAD = Choice(NAME_HEADS, [1] * len(NAME_HEADS))
_TAIL = Choice(NAME_TAILS, [1] * len(NAME_TAILS))
_SPEECH = Choice(['"', ""], [1, 5])  # a line of speech, or an action sentence
_UTTERANCE = _table(UTTERANCES)
_TIME = Choice(["", "Then ", "Later, ", "At dawn, "], [5, 2, 1, 1])
_RELATIVE = Choice([", who ", " "], [P_RELATIVE, 1 - P_RELATIVE])
_ECHO = Choice([", or so ", "."], [P_ECHO, 1 - P_ECHO])
_PREP = _table(PREPOSITIONS)
_MORE = Choice([" ", " In the end, "], [1 - P_STOP, P_STOP])  # another sentence, or the end
_ENDING = _table(ENDINGS)
_VERB = {plural: Choice([base if plural else s3 for base, s3, _ in VERBS],
                        [w for _, _, w in VERBS]) for plural in (False, True)}

# Noun phrases "a red lamp", "an old key", "an apple", "the keys", "two maps".
# "a"/"an" depends on the next word, so the indefinite article is written by
# whichever choice picks that next word: the adjective choice offers
# "a red " / "an old " / "" (no adjective), and after "" the noun choice
# offers "a lamp" / "an apple". Every option is written as it is chosen.
_ADJ_W = [5] + [w for _, w in ADJECTIVES]  # index 0: no adjective
_ADJ = {
    False: Choice([""] + [f"{a} " for a, _ in ADJECTIVES], _ADJ_W),
    True: Choice([""] + [f"{_article(a)} {a} " for a, _ in ADJECTIVES], _ADJ_W),
}


def _noun_table(rows, plural: bool, article: bool) -> Choice:
    words = [pl if plural else sg for sg, pl, _ in rows]
    texts = [f"{_article(w)} {w}" if article else w for w in words]
    return Choice(texts, [w for _, _, w in rows])


_THING = {(p, a): _noun_table(THINGS, p, a) for p in (False, True) for a in (False, True)}
_HERO_ANIMAL = _noun_table(ANIMALS, plural=False, article=True)
_HERO_ANIMAL_BARE = _noun_table(ANIMALS, plural=False, article=False)
# Object determiners: (text, plural, indefinite "a" still to be written)
_DETS = [("the ", False, False), ("the ", True, False), ("", False, True), ("two ", True, False)]
_DET = Choice([t for t, _, _ in _DETS], [4, 2, 3, 1])


def _subject_choice(hero_name: str, capital: bool) -> tuple[Choice, list]:
    """Sentence subject: the hero's name, or 'the <animal>' (sg or pl).

    The hero is only ever called by name, so "the fox" is another animal even
    in a story whose hero is a fox, and the name (capitalised, no "the")
    cannot be confused with it. Returns the choice and, per option,
    (text for the echo, is_plural).
    """
    texts, weights, meta = [hero_name], [P_SUBJECT_IS_HERO], [(hero_name, False)]
    total = sum(w for _, _, w in ANIMALS)
    for sg, pl, w in ANIMALS:
        for plural, form, p in ((False, sg, 1 - P_PLURAL_SUBJECT), (True, pl, P_PLURAL_SUBJECT)):
            text = "the " + form
            texts.append(_cap(text) if capital else text)
            weights.append((1 - P_SUBJECT_IS_HERO) * p * w / total)
            meta.append((text, plural))
    return Choice(texts, weights), meta


# ---------------------------------------------------------------------------
# The story program. It talks to a "tape" with two calls: pick(choice) makes a
# choice, writes its text and returns the option's index; emit(text) writes
# fixed text. Sampling and parsing run this same program with different tapes.
# ---------------------------------------------------------------------------


def _verb_phrase(t, plural: bool) -> None:
    """'finds a red lamp', 'hide two keys' (the verb agrees with the subject)."""
    t.pick(_VERB[plural])
    t.emit(" ")
    _, obj_plural, indefinite = _DETS[t.pick(_DET)]
    adj = t.pick(_ADJ[indefinite])
    t.pick(_THING[(obj_plural, indefinite and adj == 0)])


def _story(t) -> None:
    # "Once upon a time, in a deep forest, there lived an old fox called Tapi."
    t.pick(_OPENING)
    t.emit(", in ")
    t.pick(_PLACE)
    t.emit(", there lived ")
    adj = t.pick(_ADJ[True])
    t.pick(_HERO_ANIMAL if adj == 0 else _HERO_ANIMAL_BARE)
    t.emit(" called ")
    name = _HEAD.texts[t.pick(_HEAD)] + _TAIL.texts[t.pick(_TAIL)]
    t.emit(".")
    # Subject options include the hero's name: built once per story.
    subj_cap, meta = _subject_choice(name, capital=True)
    subj_low, _ = _subject_choice(name, capital=False)
    n = 0
    while True:
        if n < MIN_SENTENCES:
            t.emit(" ")
        elif t.pick(_MORE) == 1:
            break
        if t.pick(_SPEECH) == 0:
            # '"What a day," said the crows.'
            t.pick(_UTTERANCE)
            t.emit('," said ')
            t.pick(subj_low)
            t.emit(".")
        else:
            # "[Then ]the crows[, who find a lamp,] hide two keys[ in the barn][, or so the crows say]."
            subj = t.pick(subj_cap if t.pick(_TIME) == 0 else subj_low)
            echo, plural = meta[subj]
            if t.pick(_RELATIVE) == 0:
                _verb_phrase(t, plural)
                t.emit(", ")
            _verb_phrase(t, plural)
            t.pick(_PREP)
            if t.pick(_ECHO) == 0:
                # The echo copies the subject and makes "say" agree with it.
                t.emit(f"{echo} {'say' if plural else 'says'}.")
        n += 1
    # "In the end, Tapi went home and slept.": the hero's name once more.
    t.emit(name)
    t.pick(_ENDING)
    t.emit("\n")


# ---------------------------------------------------------------------------
# Sampling and parsing: two tapes for the same story program.
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Story:
    """One generated story: its text, exact log-probability, and the choices made."""

    text: str
    logp: float  # natural log of the probability of `text` under the grammar
    choices: tuple[int, ...]  # option index at each choice point, in order


class _SampleTape:
    def __init__(self, rng: random.Random):
        self.rng, self.parts, self.choices, self.logp = rng, [], [], 0.0

    def pick(self, c: Choice) -> int:
        # Inverse CDF with one uniform draw; min() guards the last cumulative
        # value being 0.9999999999999999 after float rounding.
        i = min(bisect.bisect_right(c.cum, self.rng.random()), len(c.cum) - 1)
        self.parts.append(c.texts[i])
        self.choices.append(i)
        self.logp += c.logp[i]
        return i

    def emit(self, text: str) -> None:
        self.parts.append(text)


class _Mismatch(Exception):
    """The choices so far write text that differs from the text being parsed."""


class _ParseTape:
    """Replays a prefix of choices, then follows every option that matches the text.

    Each run of the story program follows one path; every other option that
    also matches the text at a choice point is queued as a new prefix (a fork),
    which a later run explores. Runs that write text differing from the target
    stop at once, so forks are cheap.
    """

    def __init__(self, text: str, prefix: list[int], forks: list[list[int]]):
        self.text, self.prefix, self.forks = text, prefix, forks
        self.pos, self.choices, self.logp = 0, [], 0.0

    def emit(self, text: str) -> None:
        if not self.text.startswith(text, self.pos):
            raise _Mismatch
        self.pos += len(text)

    def pick(self, c: Choice) -> int:
        k = len(self.choices)
        if k < len(self.prefix):
            i = self.prefix[k]
        else:
            matches = [j for j, s in enumerate(c.texts) if self.text.startswith(s, self.pos)]
            if not matches:
                raise _Mismatch
            i = matches[0]
            self.forks.extend(self.choices + [j] for j in matches[1:])
        self.emit(c.texts[i])
        self.choices.append(i)
        self.logp += c.logp[i]
        return i


def sample_story(rng: random.Random) -> Story:
    """Draw one story (one line of text, ending in a newline) from the grammar."""
    tape = _SampleTape(rng)
    _story(tape)
    return Story("".join(tape.parts), tape.logp, tuple(tape.choices))


def parse_story(text: str) -> list[Story]:
    """Every way the grammar can produce exactly `text` (a list of parses).

    An unambiguous grammar gives exactly one parse for every text it
    generates; a text it cannot generate gives an empty list. The search is
    exhaustive, so a second parse, if one exists, is found.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    parses, todo = [], [[]]
    while todo:
        tape = _ParseTape(text, todo.pop(), todo)
        try:
            _story(tape)
        except _Mismatch:
            continue
        if tape.pos == len(text):  # the whole text, not only a prefix of it
            parses.append(Story(text, tape.logp, tuple(tape.choices)))
    return parses


# ---------------------------------------------------------------------------
# Corpora
# ---------------------------------------------------------------------------

UNIFORM_NLL = math.log(256)  # nats/byte of a model that knows nothing


def unigram_nll(train: torch.Tensor, val: torch.Tensor, alpha: float = 0.5) -> float:
    """Mean NLL (nats/byte) on `val` of add-alpha byte frequencies fit on `train`."""
    counts = torch.bincount(train.long(), minlength=256).double() + alpha
    logp = (counts / counts.sum()).log()
    return -logp[val.long()].mean().item()


def bigram_nll(train: torch.Tensor, val: torch.Tensor, alpha: float = 0.5) -> float:
    """Mean NLL (nats/byte) on `val` of add-alpha bigrams p(b | a) fit on `train`.

    The first byte of `val` has no previous byte and is scored by the unigram.
    """
    train, val = train.long(), val.long()
    pairs = torch.bincount(train[:-1] * 256 + train[1:], minlength=256 * 256)
    counts = pairs.double().view(256, 256) + alpha  # [previous byte, next byte]
    logp = (counts / counts.sum(dim=1, keepdim=True)).log()
    total = -logp[val[:-1], val[1:]].sum().item()
    total += unigram_nll(train, val[:1], alpha) # the first byte
    return total / len(val)


@dataclass(frozen=True, eq=False)
class Corpus:
    """Train and validation bytes (uint8 tensors) and, if known, the floor.

    `floor` is the exact entropy of the validation text under its source in
    nats/byte (None for plain text, whose source is unknown). A model that
    sees the whole validation split as one context cannot beat it on average;
    a model that sees windows of `seq_len` bytes pays a little more at the
    start of each window, so its reachable loss is slightly above the floor.
    """

    name: str
    train: torch.Tensor  # (N_train,) uint8
    val: torch.Tensor  # (N_val,) uint8
    floor: float | None = None

    vocab_size = 256

    def text(self, split: str = "train") -> str:
        """The text of a split ("train" or "val")."""
        if split not in ("train", "val"):
            raise ValueError(f"split must be 'train' or 'val', got {split!r}")
        return bytes(getattr(self, split).tolist()).decode("utf-8", errors="replace")

    def baselines(self, alpha: float = 0.5) -> dict[str, float]:
        """Validation NLL in nats/byte of simple models fit on the train split.

        uniform: ln 256; unigram and bigram: add-`alpha` smoothed byte counts;
        floor: the true entropy of the source (None for plain text).
        """
        if not alpha > 0:
            raise ValueError(f"alpha must be > 0 (add-alpha smoothing), got {alpha}")
        return {
            "uniform": UNIFORM_NLL,
            "unigram": unigram_nll(self.train, self.val, alpha),
            "bigram": bigram_nll(self.train, self.val, alpha),
            "floor": self.floor,
        }

    def __repr__(self) -> str:
        floor = "unknown" if self.floor is None else f"{self.floor:.4f} nats/byte"
        return (f"Corpus({self.name!r}, train={len(self.train):,} bytes, "
                f"val={len(self.val):,} bytes, floor={floor})")


def cache_dir() -> Path:
    """Where generated corpora are cached: $TINYLM_CACHE, else <repo>/.cache.

    Outside a source checkout (an installed package), ~/.cache/tinylm.
    """
    env = os.environ.get("TINYLM_CACHE")
    if env:
        return Path(env)
    repo = Path(__file__).resolve().parents[1]
    if (repo / "pyproject.toml").exists():
        return repo / ".cache"
    return Path.home() / ".cache" / "tinylm"


def _generate(rng: random.Random, n_bytes: int) -> tuple[str, float]:
    """Whole stories until at least n_bytes; returns (text, total log-prob)."""
    parts, logp, size = [], 0.0, 0
    while size < n_bytes:
        story = sample_story(rng)
        parts.append(story.text)
        logp += story.logp
        size += len(story.text)  # ASCII: one byte per character
    return "".join(parts), logp


def _as_tensor(data: bytes) -> torch.Tensor:
    return torch.frombuffer(bytearray(data), dtype=torch.uint8)


def course_corpus(seed: int = 0, train_bytes: int = 2_000_000, val_bytes: int = 200_000,
                  cache: bool = True) -> Corpus:
    """The course corpus: generated stories, deterministic from `seed`.

    Train and validation are drawn from separate random streams, as whole
    stories, so no story is shared and the validation floor is exact:
    floor = -log p(validation text) / number of validation bytes.
    About 2.2 MB takes a few seconds to generate; the result is cached under
    `cache_dir()` (set TINYLM_CACHE to move it; cache=False to skip).
    """
    for pname, value, low in (("train_bytes", train_bytes, 1), ("val_bytes", val_bytes, 1)):
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise ValueError(f"{pname} must be a positive int, got {value!r}")
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    name = f"course-v{GRAMMAR_VERSION}-seed{seed}-{train_bytes}-{val_bytes}"
    folder = cache_dir()
    paths = {k: folder / f"{name}.{k}" for k in ("train.txt", "val.txt", "json")}
    if cache and all(p.exists() for p in paths.values()):
        info = json.loads(paths["json"].read_text())
        train = paths["train.txt"].read_bytes()
        val = paths["val.txt"].read_bytes()
        # A truncated or edited cache file is regenerated, not trusted.
        if hashlib.sha256(train + val).hexdigest() == info.get("sha256"):
            return Corpus(name, _as_tensor(train), _as_tensor(val), info["floor"])
    # String seeds are hashed with SHA-512 by `random`: stable across versions.
    train_text, _ = _generate(random.Random(f"tinylm-course/{seed}/train"), train_bytes)
    val_text, val_logp = _generate(random.Random(f"tinylm-course/{seed}/val"), val_bytes)
    train, val = train_text.encode("ascii"), val_text.encode("ascii")
    floor = -val_logp / len(val)
    if cache:
        folder.mkdir(parents=True, exist_ok=True)
        info = {"floor": floor, "sha256": hashlib.sha256(train + val).hexdigest(),
                "grammar_version": GRAMMAR_VERSION}
        for key, content in (("train.txt", train), ("val.txt", val),
                             ("json", json.dumps(info).encode())):
            tmp = paths[key].with_suffix(f".tmp{os.getpid()}")
            tmp.write_bytes(content)
            os.replace(tmp, paths[key])  # atomic: readers never see half a file
    return Corpus(name, _as_tensor(train), _as_tensor(val), floor)


def load_text(path, val_fraction: float = 0.1, min_bytes: int = 1024) -> Corpus:
    """A Corpus from any UTF-8 text file: the last `val_fraction` is validation.

    The split is contiguous (the end of the file), so validation text never
    appears in training. The floor is unknown (None).
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or Path, got {type(path).__name__}")
    if not (isinstance(val_fraction, (int, float)) and 0 < val_fraction < 1):
        raise ValueError(f"val_fraction must be between 0 and 1 (exclusive), got {val_fraction!r}")
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"load_text: no such file: {path} (check the path, "
                                f"relative to {Path.cwd()})")
    if not path.is_file():
        raise ValueError(f"load_text: {path} is not a regular file; pass a text file")
    data = path.read_bytes()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(
            f"load_text: {path} is not UTF-8 text (invalid byte 0x{data[e.start]:02x} at "
            f"offset {e.start}); convert it first, e.g. iconv -f latin1 -t utf-8") from None
    if len(data) < min_bytes:
        raise ValueError(f"load_text: {path} is too short ({len(data)} bytes); need at "
                         f"least min_bytes={min_bytes} to make train and validation splits")
    cut = len(data) - max(1, round(len(data) * val_fraction))
    # Do not cut a multi-byte character in two: step back to its first byte.
    while cut > 0 and data[cut] & 0b1100_0000 == 0b1000_0000:
        cut -= 1
    if cut < 2 or len(data) - cut < 2:
        raise ValueError(f"load_text: val_fraction={val_fraction} leaves a split of under "
                         f"2 bytes in {path}; use a value nearer 0.1")
    return Corpus(path.name, _as_tensor(data[:cut]), _as_tensor(data[cut:]), None)
