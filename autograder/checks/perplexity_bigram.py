"""Checks for notebook 10's bigram baseline: a table of byte-pair counts
from train, add-alpha smoothed, scored on val, against the closed-form
count-and-normalise reference; a wrong table is read back from the learner's
own NLLs (the counts each pair was given) and from another training text."""
from __future__ import annotations

import math

import torch

from .contracts import Contract, defaults, run_contract
from ..diagnosis_record import candidates
from ..learner_values import shown_size
from .framework.calling import guarded_call
from .framework.check import Check
from .framework.measure import seeded
from .references.hints import call_with_hints
from .perplexity import as_float_tensor, require_number


def ref_bigram_nll(train: torch.Tensor, val: torch.Tensor, alpha: float) -> torch.Tensor:
    """Mean over the pairs (a, b) of val of -ln (count(a, b) + alpha) / (count(a, .) + 256 alpha)."""
    train, val = train.long(), val.long()
    counts = torch.bincount(train[:-1] * 256 + train[1:], minlength=65536).view(256, 256).double()  # [prev, next]
    logp = ((counts + alpha) / (counts.sum(1, keepdim=True) + 256 * alpha)).log()
    return -logp[val[:-1], val[1:]].mean()


def _markov_bytes(n: int, seed: int) -> torch.Tensor:
    """Bytes from a small random Markov chain over 'a'..'h', so that bigrams matter."""
    gen = seeded(seed)
    trans = torch.rand(8, 8, generator=gen) ** 3 + 0.01  # (prev, next), peaked
    out = [0]
    for _ in range(n - 1):
        out.append(int(torch.multinomial(trans[out[-1]], 1, generator=gen)))
    return (torch.tensor(out) + ord("a")).to(torch.uint8)


def check_bigram_nll(bigram_nll, *, seed: int = 0, n_train: int = 3000, n_val: int = 400, alpha: float = 0.5) -> None:
    __tracebackhide__ = True
    chk = Check("bigram_nll", expects="a float: mean NLL in nats per predicted byte")
    train, val = _markov_bytes(n_train, seed), _markov_bytes(n_val, seed + 1)
    for a in (alpha, alpha / 5):
        _bigram_row(chk, bigram_nll, train, val, a, f"{n_train} train bytes, {n_val} val bytes, alpha={a:g}")
    if not chk.passed:
        _measure_counts(chk, bigram_nll, (alpha, alpha / 5))
    if chk.passed:  # the pairs of bytes train has seen are scored right: the rows below measure the one it has not
        _unseen_previous_byte_rows(chk, bigram_nll, train, val, (alpha, alpha / 5))
    if chk.passed:
        _another_training_text(chk, bigram_nll, train, _markov_bytes(n_train, seed + 2), val, alpha)
    run_contract(chk, bigram_nll, BIGRAM_NLL)
    chk.finish()


# An error about a mask is the uint8 index itself (torch reads a uint8 index as a boolean mask); other uint8
# errors may come from the arithmetic as well, so they get both candidates.
UINT8 = [(r"mask", "a uint8 tensor is used as an index, and torch reads a uint8 index as a boolean mask, not as byte "
                   "values (measured: your error is about a mask): convert every byte tensor that indexes or is "
                   "computed with to .long() before any indexing or arithmetic (uint8 arithmetic wraps around at 256 too: prev * 256 would)"),
         (r"uint8|overflow", candidates("your error is about uint8 values; candidates: arithmetic on the uint8 bytes "
                                        "wraps at 256 (prev * 256), or a uint8 tensor indexes as a boolean mask; convert "
                                        "train and val with .long() first"))]


def _bigram_row(chk: Check, bigram_nll, train, val, alpha, label) -> None:
    got = call_with_hints(chk, bigram_nll, train, val, alpha, hints=UINT8)
    value = as_float_tensor(got)
    t, v = train.long(), val.long()
    counts = torch.bincount(t[:-1] * 256 + t[1:], minlength=65536).view(256, 256).double()

    def nll(table):
        return -table.log()[v[:-1], v[1:]].mean()

    if len(chk.rows) == 0:
        require_number(chk, "bigram_nll's result", got, float, "return the mean with .item()")
    chk.compare(label, value if value is not None else got,
                ref_bigram_nll(train, val, alpha), atol=1e-6, rtol=1e-6, variants={
        "pairs scored backwards: p(next | prev) is probs[prev, next] = probs[val[:-1], val[1:]]":
            lambda: -((counts + alpha) / (counts.sum(1, keepdim=True) + 256 * alpha)).log()[v[1:], v[:-1]].mean(),
        "the alpha argument is not used (a constant in its place): smooth with the alpha passed in":
            lambda: ref_bigram_nll(train, val, 0.5),
        "uint8 arithmetic: prev * 256 overflows in uint8, so every pair lands in row 0; convert with .long() first":
            lambda: nll(((torch.bincount(t[1:], minlength=65536).view(256, 256).double() + alpha) /
                         (torch.bincount(t[1:], minlength=65536).view(256, 256).double().sum(1, keepdim=True) + 256 * alpha))),
        "bigram normalised over the whole table (a joint p(a, b)), not per previous byte (p(b | a))":
            lambda: nll((counts + alpha) / (counts + alpha).sum()),
        "bigram direction swapped: p(b | a) normalises over the NEXT byte b for each previous byte a":
            lambda: nll((counts + alpha) / (counts.sum(0, keepdim=True) + 256 * alpha)),
        "the denominator's smoothing is alpha once, not 256 * alpha: add alpha for each of the 256 possible next "
        "bytes, the previous byte's count + 256 * alpha":
            lambda: nll((counts + alpha) / (counts.sum(1, keepdim=True) + alpha)),
        "smoothing missing from the numerator: add alpha to every count too, (counts + alpha) / (row total + "
        "256 * alpha), or a pair train never shows gets probability 0":
            lambda: nll(counts / (counts.sum(1, keepdim=True) + 256 * alpha)),
        "log base 2: NLL in nats uses the natural log": lambda: ref_bigram_nll(train, val, alpha) / math.log(2),
        f"your result is the {len(val) - 1} pairs' summed NLL divided by {len(val)}, len(val), the bytes (measured: "
        f"exactly the mean times {len(val) - 1}/{len(val)}): the mean is over the pairs, len(val) - 1": lambda: ref_bigram_nll(train, val, alpha) * (len(val) - 1) / len(val),
    })


def _implied_counts(bigram_nll, train, pair: bytes, alphas) -> tuple[float, float] | None:
    """(count of `pair`, total of its previous byte's row) that the learner's table holds, read off the NLL of
    the one pair at two alphas: p = (c + alpha) / (n + 256·alpha) is linear in c and n. None when a call
    fails or gives no finite number."""
    val = torch.tensor(list(pair), dtype=torch.uint8)
    ps = []
    for alpha in alphas:
        try:
            value = as_float_tensor(guarded_call(bigram_nll, (train.clone(), val.clone(), alpha)))
        except Exception:  # noqa: BLE001: a probe that raises measures nothing; the rows above said why
            return None
        if value is None or not math.isfinite(float(value)):
            return None
        ps.append(math.exp(-float(value)))
    (a1, a2), (p1, p2) = alphas, ps
    if abs(p2 - p1) < 1e-12:
        return None
    total = (a1 * (256 * p1 - 1) - a2 * (256 * p2 - 1)) / (p2 - p1)
    return a1 * (256 * p1 - 1) + p1 * total, total


def _measure_counts(chk: Check, bigram_nll, alphas) -> None:
    """What the learner's table counts, measured on a train text whose pairs repeat: 'ab' 20 times and 'ac' once
    (row 'a' totals 21), 'ba' 20 times (row 'b' totals 20). Said when the counts it implies are whole numbers
    that differ from train's."""
    train = torch.tensor(list(b"ab" * 20 + b"ac"), dtype=torch.uint8)
    truth = {b"ab": (20, 21), b"ac": (1, 21), b"ba": (20, 20)}
    read = {pair: _implied_counts(bigram_nll, train, pair, alphas) for pair in truth}
    if any(r is None or any(abs(x - round(x)) > 1e-3 or round(x) < 0 for x in r) for r in read.values()):
        return
    yours = {pair: (round(c), round(n)) for pair, (c, n) in read.items()}
    if yours == truth:
        return
    said = "; ".join(f"'{pair.decode()}': count {shown_size(yours[pair][0])} of a row total "
                     f"{shown_size(yours[pair][1])}, train has "
                     f"{truth[pair][0]} of {truth[pair][1]}" for pair in truth if yours[pair] != truth[pair])
    if all(yours[pair][0] == truth[pair][0] for pair in truth):
        _wrong_row_totals(chk, yours, truth, said)
        return
    if _previous_given_next(chk, bigram_nll, alphas, train, read, said):
        return
    fact = (f"your table's counts are not train's (measured on train = 'ab' * 20 + 'ac', each count read off your "
            f"NLL of one pair at two alphas, p = (count + alpha) / (row total + 256·alpha): {said})")
    other = torch.tensor(list(b"ba" * 7 + b"bb"), dtype=torch.uint8)  # no pair of the probes' rows in common
    if all(_implied_counts(bigram_nll, other, pair, alphas) == read[pair] for pair in truth):
        # the same counts whatever train holds: they come from the one pair each probe scores, val itself
        own = all(counted == (1, 1) for counted in yours.values())
        chk.diagnose(f"{fact}; another train text ('ba' * 7 + 'bb') gives the very same counts, so your table "
                     "does not depend on train" + (": each probe's val is its one pair, and 1 of 1 is that pair's "
                                                   "own count" if own else "") +
                     "; count the pairs of train, the first argument, and score val's")
        return
    if all(c == min(t, 1) for (c, _), (t, _) in zip(yours.values(), truth.values())):
        chk.diagnose(f"{fact}: each distinct pair is counted once, however often it occurs (measured for every "
                     "pair); an indexed += (counts[prev, next] += 1) writes a repeated index once: count with "
                     "torch.bincount, or index_put_(..., accumulate=True)")
    else:  # which step miscounts is not measured: the fact and what a right table holds
        chk.measured(f"{fact}: count every (previous, next) pair of train once per occurrence, and each row's "
                     "total is the sum of its counts")


def _read_backwards(text: bytes, pairs) -> dict:
    """{pair (prev, next): (count of (next, prev), times prev follows any byte)} in `text`: what a table of the
    previous byte given the next gives each pair."""
    counts: dict[bytes, int] = {}
    for a, b in zip(text, text[1:]):
        counts[bytes((a, b))] = counts.get(bytes((a, b)), 0) + 1
    return {pair: (counts.get(pair[::-1], 0), sum(c for p, c in counts.items() if p[1:] == pair[:1])) for pair in pairs}


def _previous_given_next(chk: Check, bigram_nll, alphas, train: torch.Tensor, read: dict, said: str) -> bool:
    """Every pair (prev, next) read as the count of (next, prev) over the times prev follows any byte: the probability
    of the previous byte given the next, on the probe's text and on one whose pairs are not symmetric (where a
    last pair left out gives other counts). Two routes give it alike (a table normalised over its columns read at
    [next, prev]; pairs counted as [next, prev] in a table read at [prev, next]): said as candidates."""
    if any(tuple(round(x) for x in read[pair]) != want
           for pair, want in _read_backwards(bytes(train.tolist()), read).items()):
        return False
    asymmetric = b"aab" * 10 + b"c"
    for pair, want in _read_backwards(asymmetric, (b"ab", b"ba", b"aa")).items():
        got = _implied_counts(bigram_nll, torch.tensor(list(asymmetric), dtype=torch.uint8), pair, alphas)
        if got is None or abs(got[0] - want[0]) > 1e-3 or abs(got[1] - want[1]) > 1e-3:
            return False
    chk.measured(f"the counts your NLL implies are not train's (measured on train = 'ab' * 20 + 'ac', each read off "
                 f"your NLL of one pair at two alphas, p = (count + alpha) / (row total + 256·alpha): {said}); for "
                 "every pair (prev, next) they are the count of (next, prev) over the times prev follows any byte: "
                 "your NLL scores the previous byte given the next one")
    chk.candidates("two candidates give these: a table normalised over its columns (dim=0) and read at [next, "
                   "prev], or pairs counted into counts[next, prev] and read at [prev, next]; count counts[prev, "
                   "next], normalise each row "
                   "(dim=1) and read probs[prev, next]")
    return True


def _wrong_row_totals(chk: Check, yours: dict, truth: dict, said: str) -> None:
    """Every count right, some row totals not: said as such, and the total
    of the NEXT byte's row named only when every pair reads exactly that."""
    row_total = {pair[0]: total for pair, (_, total) in truth.items()}  # previous byte -> its row's total in train
    by_next = all(yours[pair][1] == row_total.get(pair[1], 0) for pair in truth)
    fact = (f"your table's counts are train's, but the totals they are divided by are not their rows' (measured on "
            f"train = 'ab' * 20 + 'ac', each read off your NLL of one pair at two alphas, p = (count + alpha) / (row "
            f"total + 256·alpha): {said})")
    if by_next:
        chk.diagnose(f"{fact}: each pair is divided by the total of its NEXT byte's row (measured for every pair): "
                     "a row total of shape (256,) broadcasts along the last axis; keep the axis, counts.sum(1, "
                     "keepdim=True), so each row is divided by its own total")
    else:
        chk.measured(fact)


def _another_training_text(chk: Check, bigram_nll, first, other, val, alpha: float) -> None:
    """The counts come from the train of each call: after the calls above,
    another training text scores val under its own counts."""
    label = f"another training text ({len(other)} bytes), the same val, alpha={alpha:g}"
    got = as_float_tensor(call_with_hints(chk, bigram_nll, other, val, alpha, hints=UINT8))
    if chk.compare(label, got, ref_bigram_nll(other, val, alpha), atol=1e-6, rtol=1e-6) or got is None:
        return
    if torch.allclose(got.double(), ref_bigram_nll(first, val, alpha), atol=1e-6, rtol=1e-6):
        chk.diagnose("your bigram_nll scores val under the counts of an earlier call's train (measured: handed "
                     "another training text, it gives the NLL under the counts of the text this check passed first): "
                     "what it counts is kept between calls (a default argument, a global, an attribute); count the "
                     "train it is given at every call")


def _unseen_previous_byte_rows(chk: Check, bigram_nll, train, val, alphas) -> None:
    """val with a byte train never has ('z'): its row of the table has no
    counts, so add-alpha smoothing makes it uniform, 1/256 for every next
    byte. A wrong value is measured: with every other pair scored right (the
    rows above), the total count that row's probability implies,
    alpha / p - 256·alpha, when it is the same whole number for each alpha."""
    __tracebackhide__ = True
    unseen = ord("z")
    at = len(val) // 2
    odd = torch.cat((val[:at], torch.tensor([unseen], dtype=val.dtype), val[at:]))
    pairs = len(odd) - 1
    totals = []
    for alpha in alphas:
        want = ref_bigram_nll(train, odd, alpha)
        label = f"val with a byte train never has ('z', as a previous byte), alpha={alpha:g}"
        value = call_with_hints(chk, bigram_nll, train, odd, alpha, hints=UINT8)
        got = as_float_tensor(value)
        if chk.compare(label, got if got is not None else value, want, atol=1e-6, rtol=1e-6) or got is None:
            continue
        others = float(want) * pairs + math.log(1 / 256)  # the reference's NLL of every other pair
        log_p = others - float(got) * pairs                # the log-probability yours gives next to 'z'
        if -700 < log_p < 0:
            totals.append(alpha / math.exp(log_p) - 256 * alpha)
    if totals and len(totals) == len(alphas) and all(abs(t - round(totals[0])) < 1e-4 for t in totals):
        total = round(totals[0])
        chk.diagnose(f"a previous byte train never has gets the probabilities of a row whose total count is {total} "
                     f"(measured: with every other pair scored right, your NLL implies p(next | 'z') = alpha / ({total}"
                     f" + 256·alpha) for each alpha tried): that row has no counts, so add-alpha smoothing gives (0 + "
                     f"alpha) / (0 + 256·alpha) = 1/256, the uniform row; the 256·alpha already keeps every "
                     f"denominator above 0, so no clamp or + 1 on the row totals is needed")


# -- contracts: the regimes each exercise promises, and its step-by-step reference ---------------
def bigram_steps(train: torch.Tensor, val: torch.Tensor, alpha: float = 0.5) -> float:
    train, val = train.long(), val.long()
    pairs = train[:-1] * 256 + train[1:]                                       # prev * 256 + next
    counts = torch.bincount(pairs, minlength=256 * 256).view(256, 256).double()  # [prev, next]
    probs = (counts + alpha) / (counts.sum(dim=1, keepdim=True) + 256 * alpha)   # each row sums to 1
    logp = probs.log()
    return -logp[val[:-1], val[1:]].mean().item()


def _bigram_cases():
    p = defaults(check_bigram_nll)
    return [("bytes", (_markov_bytes(p["n_train"], p["seed"]), _markov_bytes(p["n_val"], p["seed"] + 1), p["alpha"]), {})]


def _same_number(got, want) -> bool:
    try:
        return math.isclose(float(got), float(want), rel_tol=1e-6, abs_tol=1e-9)
    except (TypeError, ValueError, RuntimeError):
        return False


BIGRAM_NLL = Contract("bigram_nll", bigram_steps, _bigram_cases, names=("train", "val", "alpha"), dtypes=(),
                      same=_same_number, params=(("alpha", 2.0),), elsewhere=False)  # counts of corpus bytes, on the CPU
