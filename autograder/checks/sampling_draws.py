"""What a sampler's draws are, where their frequencies are not the
distribution's: one token for every row (no draw at all, or one draw shared
by the batch, told apart by generators of other seeds), more tokens than the
filters keep, the softmax over another set of tokens, or of the logits at
another temperature (fitted, and said only where it reproduces every drawn
token's frequency within the draws' noise)."""
from __future__ import annotations

import math
from typing import Any, Callable

import torch

from .framework.check import Check

# The draws follow T = 1 whatever the temperature: measured, by the distributions or by the fitted temperature;
# which of two codes gives it is not.
NO_TEMPERATURE_EFFECT = (
    "the temperature has no effect on the draws (they follow T = 1 at every T); candidates: the temperature never "
    "applied, or applied after the softmax, where dividing probabilities by T changes nothing once they are "
    "renormalised; divide the logits by T, before the top-k / top-p filters and the softmax")


# How many generators of other seeds a draw that gave every row one token is made again with.
SHARED_DRAW_SEEDS = 6


def _tokens_of_other_generators(again: Callable[[int], Any]) -> set[int] | None:
    """The tokens calls with generators of other seeds give, where each call
    gives all its rows one token; None where a call does not (or raises)."""
    tokens = set()
    for seed in range(1000, 1000 + SHARED_DRAW_SEEDS):
        got = again(seed)
        if not isinstance(got, torch.Tensor) or got.numel() == 0 or got.is_floating_point() or \
                len(set(got.flatten().tolist())) != 1:
            return None
        tokens.add(int(got.flatten()[0]))
    return tokens


SHARED_DRAW = "one draw shared by the whole batch"


def _shared_draw(places: list, n_draws: int) -> str:
    """The shared draw, measured at each setting in `places` ((label, tokens drawn over the calls) pairs)."""
    tokens = set().union(*(drawn for _, drawn in places))
    return (f"{SHARED_DRAW} (measured: at {'; '.join(label for label, _ in places)}, every one of the {n_draws} rows "
            f"of a call got one token, and the same call with generators of {SHARED_DRAW_SEEDS} other seeds gave "
            f"every row one token each time, not always the same one ({_listed_tokens(tokens)} over the calls)): the "
            "draw is random but made once for all rows; draw one token per row, torch.multinomial on the whole "
            "(B, V) probability matrix")


NO_DRAW = "no randomness: every draw is the most likely token (argmax)"


def _no_draw(places: list) -> str:
    """No draw at all, measured at each setting in `places` ((label, the softmax's probability of that token))."""
    shares = sorted(share for _, share in places)
    given = f"{shares[0]:.2f}" if len(shares) == 1 else f"{shares[0]:.2f} to {shares[-1]:.2f}"
    return (f"{NO_DRAW} (measured: every row, at {'; '.join(label for label, _ in places)}, and with generators of "
            f"{SHARED_DRAW_SEEDS} other seeds, where the softmax gives that token {given}); sample with "
            "torch.multinomial(probs, 1, generator=generator) unless temperature == 0")


def _listed_tokens(tokens: set[int]) -> str:
    ordered = sorted(tokens)
    return "token " + str(ordered[0]) if len(ordered) == 1 else \
        "tokens " + ", ".join(str(t) for t in ordered[:-1]) + f" and {ordered[-1]}"


def _fitted_temperature(freq: torch.Tensor, row: torch.Tensor, n_draws: int) -> float | None:
    """T_eff with freq ≈ softmax(row / T_eff): least squares of log freq on the
    logits over the tokens drawn often enough (None if under 3 such tokens)."""
    ok = freq * n_draws >= 30
    if int(ok.sum()) < 3:
        return None
    z, lf = row.double()[ok], freq[ok].log()
    z, lf = z - z.mean(), lf - lf.mean()
    slope = float((z * lf).sum() / (z * z).sum())
    return 1 / slope if slope > 1e-6 else math.inf


def measure_draws(chk: Check, draws: torch.Tensor, freq: torch.Tensor, want: torch.Tensor, row: torch.Tensor,
                   T: float, n_draws: int, label: str, own_rows: bool = True,
                   again: Callable[[int], Any] | None = None, near_zero: bool = False) -> None:
    """What the learner's draws are: how random, from how many tokens, at
    which effective temperature. own_rows: whether rows peaked at different
    tokens each drew their own peak (a draw shared by the batch does not);
    again(seed): the same call with a generator of another seed, to tell a
    draw shared by the rows from no draw at all; near_zero: a temperature near 0
    on logits as close, where logits divided by far less than T are drawn as
    greedily as no draw at all."""
    distinct = int((freq > 0).sum())
    if distinct == 1 and float(want.max()) < 0.99:
        token = int(freq.argmax())
        if not own_rows:
            return  # one token for every row: the shared draw is said by its own row, whichever token it hit
        other = _tokens_of_other_generators(again) if again is not None else None
        if other is not None and other != {token}:
            chk.diagnose_at(SHARED_DRAW, (label, frozenset(other | {token})), lambda places: _shared_draw(places, n_draws))
        elif token == int(row.argmax()) and other == {token} and near_zero and not chk.places.get(NO_DRAW):
            chk.candidates(f"{label}: every row drew the most likely token, with generators of {SHARED_DRAW_SEEDS} "
                           f"other seeds too, where softmax(logits / {T}) gives it {float(want[token]):.2f}; "
                           "candidates: a temperature this small taken as greedy (only temperature 0 is), or the "
                           "logits divided by far less than the temperature (by it twice, by its square)")
        elif token == int(row.argmax()) and other == {token}:
            chk.diagnose_at(NO_DRAW, (label, float(want[token])), _no_draw)
        else:
            chk.measured(f"{label}: every one of the {n_draws} rows got token {token}, where the softmax gives it "
                         f"{float(want[token]):.2f}: one token for the whole batch")
        return
    support = int((want > 0).sum())
    if distinct > support:
        chk.measured(f"{label}: draws landed on {distinct} different tokens; the filters allow {support}")
    drawn = freq > 0
    if not torch.equal(drawn, want > 0):
        # Another kept set: a temperature fitted over it says nothing of the division, so the frequencies are
        # compared with the given temperature's softmax over the very tokens drawn first.
        within = torch.zeros_like(freq)
        within[drawn] = (row.double()[drawn] / T).softmax(-1)
        if torch.allclose(freq, within, rtol=0, atol=5 * (0.25 / n_draws) ** 0.5):
            chk.measured(f"{label}: over the {distinct} tokens your draws landed on, the frequencies are "
                         f"softmax(logits / {T}), the temperature given; the filters at temperature {T} keep "
                         f"{support} tokens, so the set of tokens kept is what differs")
            return
    t_eff = _fitted_temperature(freq, row, n_draws)
    if t_eff is not None and support > 2 and distinct <= support:
        # A least-squares slope exists for any frequencies: the temperature is printed only where its softmax
        # reproduces every drawn token's frequency within the draws' noise, and otherwise the closest any
        # temperature on a grid comes.
        bound = 5 * (0.25 / n_draws) ** 0.5   # 5 standard deviations of a frequency, at its widest
        grid = torch.cat((torch.tensor([t_eff], dtype=torch.float64), torch.logspace(-2, 2, 929, dtype=torch.float64)))
        fitted = torch.zeros(len(grid), len(freq), dtype=torch.float64)
        fitted[:, drawn] = (row.double()[drawn] / grid[:, None]).softmax(-1)
        off = (fitted - freq.double()).abs().amax(-1)
        if float(off[0]) > bound:
            best = int(off.argmin())
            if float(off[best]) > bound:
                floored = torch.zeros(len(freq), dtype=torch.float64)
                floored[drawn] = torch.floor(row.double()[drawn] / T).softmax(-1)
                if float((floored - freq.double()).abs().max()) <= bound:
                    chk.measured(f"{label}: your frequencies follow softmax(floor(logits / {T})), the tempered "
                                 f"logits rounded down to whole numbers as `logits // {T}` gives them (every drawn "
                                 f"token within {bound:.3f}, 5 standard deviations of {n_draws} draws), and no "
                                 "softmax(logits / T) does: divide with /")
                    return
                chk.measured(f"{label}: no softmax(logits / T) gives your frequencies: at every T from 0.01 to 100 "
                             f"(1% steps, and the least-squares fit {t_eff:.2f}) some drawn token is off by "
                             f"{float(off.min()):.3f} or more, beyond the draws' noise ({bound:.3f} = 5 standard "
                             f"deviations of {n_draws} draws); expected temperature {T}")
                return
            t_eff = float(grid[best])
        if math.isinf(t_eff):  # no slope: the logits play no part in the draws
            chk.measured(f"{label}: your frequencies are the same for each of the {distinct} tokens drawn (every one "
                         f"within {bound:.3f}, 5 standard deviations of {n_draws} draws), whatever their logits: "
                         f"what softmax gives at a temperature far above the logits; expected temperature {T}")
            return
        chk.measured(f"{label}: your frequencies follow softmax(logits / {t_eff:.2f}) (every drawn token within "
                     f"{bound:.3f}, 5 standard deviations of {n_draws} draws); expected temperature {T}")
        if T != 1 and abs(t_eff - 1) < 0.1 * max(1, abs(T - 1)) and abs(t_eff - T) > 0.2 * abs(T - 1):
            chk.candidates(NO_TEMPERATURE_EFFECT)
        elif abs(t_eff * T - 1) < 0.15 and abs(T - 1) > 0.2:
            chk.diagnose("temperature multiplied instead of divided: logits / T")
