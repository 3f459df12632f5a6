"""Checks for notebook 08: top-k, top-p, sample_next and generate.

Filters are compared with closed-form masks. A sampler cannot be compared
draw by draw, so sample_next is judged by its *distribution*: many draws
from one row of logits, whose frequencies must match the closed-form
probabilities softmax(top_p(top_k(logits / T))) within sampling noise
(about 5 standard deviations), and its support must be exactly the kept set.
Wrong orders and off-by-ones give other closed-form distributions, which
name the bug when the frequencies match them instead; measurements of the
draws (how many distinct tokens, the temperature fitted to the frequencies,
whether each row gets its own draw) name the rest. Filters are judged row by
row from the kept set: its size, whether it is the most likely tokens,
whether the right values come back in sorted order.
"""
from __future__ import annotations

import math

import torch

from . import trace
from .contracts import Contract, Edge, defaults, run_contract
from ..diagnosis_record import Evidence, confirmed, measured
from ..learner_values import describe
from .sampling_draws import NO_TEMPERATURE_EFFECT, measure_draws
from .sampling_probes import quiet_call, wrong_axis_hints
from .spies import first_call_arguments
from .framework.check import CandidatesVariant, Check
from .framework.explain.notebook_names import say_notebook_generator
from .framework.measure import permutation_of, randn, seeded
from .references.hints import call_with_hints, finish_with_upstream

NEG_INF = float("-inf")


def ref_top_k(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Keep logits >= the k-th largest (ties with it kept), the rest -inf; k
    larger than the vocabulary keeps every token."""
    k = min(k, logits.shape[-1])
    kth = logits.sort(dim=-1, descending=True).values[..., k - 1:k]  # (..., 1)
    return logits.masked_fill(logits < kth, NEG_INF)


def ref_top_p(logits: torch.Tensor, p: float, keep_crossing: bool = True) -> torch.Tensor:
    """Keep the most likely tokens until their mass reaches p, the one that crosses p included."""
    probs = logits.double().softmax(-1)
    sorted_p, order = probs.sort(dim=-1, descending=True)
    before = sorted_p.cumsum(-1) - sorted_p                      # mass of the strictly more likely tokens
    drop = before >= p if keep_crossing else sorted_p.cumsum(-1) > p
    return logits.masked_fill(drop.scatter(-1, order, drop), NEG_INF)


def _filter_cases(seed: int, batch: int, vocab: int, dtype):
    x = randn(batch, vocab, seed=seed, dtype=dtype) * 2
    x[0, 1] = x[0, 2] = x[0].max() + 1  # a tie at the top
    x[1, 3] = x[1, 5] = x[1].sort(descending=True).values[2]  # a tie at rank 3
    return x




TOPK_MINUS = ("top-k off by one: keeps k - 1 tokens, the k-th largest itself is dropped (`<=` instead of `<`, or the "
              "(k-1)-th value as the threshold)")
TOPK_PLUS = "top-k off by one: keeps k + 1 tokens (sort(...)[k] is the (k+1)-th largest; index k - 1)"
TIES = "ties with the k-th largest dropped: keep every logit >= the k-th largest value"
CROSSING = ("top-p drops the crossing token: keep the token whose probability takes the running sum past p (drop only "
            "where the mass BEFORE a token is >= p), or a small p keeps nothing")


def _kept(t: torch.Tensor) -> torch.Tensor:
    """Which entries a filter kept: everything that is not -inf."""
    return t != NEG_INF


def _rows(mask: torch.Tensor) -> list[int]:
    return mask.reshape(-1, mask.shape[-1]).sum(-1).tolist()


def diagnose_filter(chk: Check, got, x: torch.Tensor, want: torch.Tensor, what: str, rank_scores: torch.Tensor,
                    k: int | None = None, p: float | None = None, label: str = "") -> tuple[list, list] | None:
    """Measure a failing filter output row by row: what it keeps (the set, its
    size, whether it is a top prefix by `rank_scores`) and what it puts in the
    kept and dropped entries; name the bug the measurements show. For top-k,
    a kept set of the most likely tokens of another size is returned as
    (tokens kept per row, the right counts), for the caller to judge over
    every failing row."""
    if not isinstance(got, torch.Tensor) or got.shape != x.shape:
        if isinstance(got, torch.Tensor) and got.shape[:-1] == x.shape[:-1] and got.shape[-1] < x.shape[-1]:
            chk.diagnose_at(f"{what} kept values only", tuple(got.shape), lambda shapes, what=what: (
                f"{what} returned only the kept values, shape{'s' if len(shapes) > 1 else ''} "
                f"{' and '.join(filter(None, (', '.join(str(s) for s in shapes[:-1]), str(shapes[-1]))))}: return a tensor shaped like the logits with -inf in the "
                "dropped entries (masked_fill)"))
        return
    g = got.detach().double().cpu()
    xd, wd = x.double(), want.double()
    if bool(torch.isfinite(g).all()) and bool((g >= 0).all()) and torch.allclose(g.sum(-1), torch.ones(()).double(), atol=1e-4):
        chk.diagnose(f"{what} returns probabilities (rows sum to 1), not logits: filter the logits; the softmax comes "
                     "later, in sample_next")
        return
    kept_want = _kept(wd)
    if torch.equal(g[kept_want], xd[kept_want]) and bool((g[~kept_want] == 0).all()) and bool((~kept_want).any()):
        chk.diagnose(f"{what}: filtered entries set to 0 instead of -inf; exp(0) = 1 still gives them probability")
        return
    if permutation_of(g, wd):
        # "sorted" only where the rows are: a permutation of another kind is stated as such
        in_order = bool((g[..., :-1] >= g[..., 1:]).all())
        chk.diagnose(f"{what} keeps the right set of values but returns them "
                     + ("in sorted order, largest first," if in_order else "at other places,")
                     + " not at their vocabulary positions: the result is the input logits, -inf at the dropped "
                     "entries (a mask computed in sorted order goes back with mask.scatter(-1, order, mask))")
        return
    kept = _kept(g)
    if not torch.equal(g[kept], xd[kept]):
        # Not -inf is not the same as kept: entries the filter should drop but left finite, at a value of their
        # own, are said as such, apart from changed values among the entries it should keep.
        left = kept & ~kept_want & (g != xd)
        if not bool(left.any()):
            chk.measured(f"{what} changes the values of the logits it keeps; kept entries must be the input logits "
                         "unchanged")
            return
        said = f"{what} gives "
        if any(fact.startswith(said) for fact in chk.facts):
            return  # said once, with the first row that shows it
        dropped = kept & ~kept_want
        share = float(g.double().softmax(-1)[dropped].max())  # the most a dropped entry gets from a softmax
        stem = (f"{said}{'the' if bool(kept[~kept_want].all()) else 'some'} entries it should drop finite values, "
                "not -inf, " + (f"so softmax still gives them probability (up to {share:.3g})" if share > 0 else
                                "to which softmax gives 0 here only because exp underflows"))
        held = g[dropped].unique()
        held = (f"{float(held[0]):.3g}" if held.numel() == 1 else
                f"values from {float(held.min()):.3g} to {float(held.max()):.3g}")
        chk.measured(f"{stem} ({label + ': ' if label else ''}{'no entry is -inf; ' if bool(kept.all()) else ''}"
                     f"they hold {held}; the entries it should keep are "
                     f"{'the input logits unchanged' if torch.equal(g[kept_want], xd[kept_want]) else 'changed too'})"
                     "; dropped entries must be -inf")
        return
    n_got, n_want = _rows(kept), _rows(kept_want)
    chk.measured(f"{label}: tokens kept per row: {n_got}; expected {n_want}")
    s = rank_scores.double().reshape(-1, x.shape[-1])
    k2 = kept.reshape(s.shape)

    def prefix(scores):  # each row keeps its largest entries by `scores` (of tied ones at the edge, any)
        return all(bool(scores[r][k2[r]].min() >= scores[r][~k2[r]].max()) for r in range(len(s))
                   if 0 < k2[r].sum() < s.shape[-1])

    partial = all(0 < int(k2[r].sum()) < s.shape[-1] for r in range(len(s)))
    if not prefix(s) and prefix(-s) and partial:
        chk.candidates(f"{what} keeps the least likely tokens of every row (measured): the order it ranks them in or "
                       "the side of the threshold it keeps is reversed; candidates: a sort in ascending order (sort "
                       "descending, largest first), or a comparison the wrong way round (drop the tokens below the "
                       "threshold: logits < threshold)")
    elif not prefix(s) and prefix(-s):
        chk.measured(f"{what} keeps the least likely tokens in the rows it filters, and other rows whole")
    elif not prefix(s):
        chk.measured(f"{what} keeps a set that is not the most likely tokens of its row")
    elif k is not None:
        return n_got, n_want  # a count: named from every failing row and the counts law (KeptCounts), not this row alone
    else:
        probs = xd.softmax(-1).reshape(s.shape)
        sp = probs.sort(-1, descending=True).values
        before = (sp.cumsum(-1) - sp)
        n_strict = [int((b < p).sum()) for b in before]       # the right count
        if all(a in (b, b - 1) for a, b in zip(n_got, n_strict)) and n_got != n_strict:
            # A count one short on these rows fits other mistakes too (a nucleus taken on the logits keeps as many
            # on some rows): the rows' fact is stated here, and the cause named only by the variant that
            # reproduces every failing row. A row that keeps nothing is said as such (below): that it stops before
            # the crossing token says no more there.
            short = [r for r, (a, b) in enumerate(zip(n_got, n_strict)) if a == b - 1 and a > 0]
            if short:
                chk.measured(f"{label}: in row{'s' if len(short) > 1 else ''} {', '.join(map(str, short))} your "
                             "filter keeps the most likely tokens up to, not including, the one whose probability "
                             "takes the running sum past p")


def check_top_k_filter(top_k_filter, *, seed: int = 0, batch: int = 3, vocab: int = 11, ks: tuple = (3, 5, 1),
                       dtype=torch.float32) -> None:
    """Per row: the kept set must be every logit >= the row's k-th largest;
    also on a single row (V,) and a (2, 2, V) batch: the last axis only."""
    __tracebackhide__ = True
    chk = Check("top_k_filter", expects="logits of the same shape, -inf outside the k largest")
    x = _filter_cases(seed, batch, vocab, dtype)
    shapes = [(f"k={k} on {tuple(x.shape)}", x, k) for k in ks]
    shapes += [(f"k={ks[0]} on one row {tuple(x[-1].shape)}", x[-1], ks[0]),
               (f"k={ks[0]} on {(2, 2, vocab)}", randn(2, 2, vocab, seed=seed + 5, dtype=dtype) * 2, ks[0]),
               # the edges: every token kept (k equal to the vocabulary, and larger, which torch.topk refuses)
               (f"k={vocab}, the whole vocabulary, on {tuple(x.shape)}", x, vocab),
               (f"k={vocab + 4}, more than the {vocab} tokens, on {tuple(x.shape)}", x, vocab + 4)]
    law = KeptCounts(top_k_filter, vocab, dtype)

    def off_by(c, wrong):  # an off-by-one is named only when the counts law shows it at every k and batch size
        return lambda: wrong() if not chk.passed and law.fit() == (c, False) else None
    counts = []  # (k, tokens kept per row, the right counts) of each failing row that keeps the most likely tokens
    for label, xs, k in shapes[:-2]:
        got = call_with_hints(chk, top_k_filter, xs.clone(), k, hints=wrong_axis_hints(top_k_filter, xs, k, ref_top_k),
                              inputs_row=True)
        want = ref_top_k(xs, k)
        flat = xs.reshape(-1, xs.shape[-1])
        variants = {TOPK_MINUS: off_by(-1, lambda: ref_top_k(xs, k - 1))} if k > 1 else {}
        if flat.shape[0] > 1:
            variants["threshold taken over the whole batch (the k-th largest of all rows together): take topk on "
                     "the last axis, one threshold per row, values[..., -1:]"] = \
                lambda: xs.masked_fill(xs < xs.flatten().topk(k).values[-1], NEG_INF)
        ok = chk.compare(label, got, want, variants=variants | {
            TOPK_PLUS: off_by(1, lambda: ref_top_k(xs, min(k + 1, xs.shape[-1]))),
            TIES: lambda: torch.full_like(xs, NEG_INF).scatter(-1, xs.topk(k, -1).indices, xs.gather(-1, xs.topk(k, -1).indices)),
        })
        if not ok:
            counted = diagnose_filter(chk, got, xs, want, "top_k_filter", xs, k=k, label=label)
            if counted is not None:
                counts.append((k, *counted))
    if counts:
        explain_kept_counts(chk, law, counts)
    # The edges come last: a filter that raises on k past the vocabulary stops the check, after the rows above
    # have been read.
    for label, xs, k in shapes[-2:]:
        hints = k_past_vocabulary_hints(top_k_filter, xs, k) if k > xs.shape[-1] else ()
        got = call_with_hints(chk, top_k_filter, xs.clone(), k, hints=hints, row_label=label)
        want = ref_top_k(xs, k)
        if not chk.compare(label, got, want):  # every token kept: no smaller set to mistake it for
            diagnose_filter(chk, got, xs, want, "top_k_filter", xs, k=k, label=label)
    run_contract(chk, top_k_filter, TOP_K_FILTER)
    chk.finish()


def k_past_vocabulary_hints(fn, logits: torch.Tensor, k: int) -> list:
    """The hint for a top_k_filter that raises when k is larger than the
    vocabulary: named as that only when the learner's own function, given the
    same logits with k equal to the vocabulary, keeps every token (measured);
    otherwise the fact."""
    vocab = logits.shape[-1]

    def bug() -> Evidence:
        out = quiet_call(fn, logits.clone(), vocab)
        if isinstance(out, torch.Tensor) and out.shape == logits.shape and torch.equal(out.detach().cpu(), logits):
            return confirmed(f"top-k larger than the vocabulary raises (measured: your filter raises for k={k} on "
                             f"{vocab} tokens, and keeps every token for k={vocab}): k can exceed the vocabulary (a "
                             "setting made for a larger model); clamp it, k = min(k, logits.shape[-1]), which keeps "
                             "every token")
        return measured(f"your filter raises for k={k} on {vocab} tokens, and with k={vocab} it does not return the "
                        "logits whole either; k larger than the vocabulary must keep every token: clamp it, "
                        "k = min(k, logits.shape[-1])")
    return [(r"[\s\S]", bug)]  # whatever the error says: the measurement decides


class KeptCounts:
    """How many tokens the learner's top_k_filter keeps per row, measured on
    logits without ties (every row a permutation of distinct values) over a
    grid of k and batch sizes, a batch of one included: the count a right
    filter keeps is k whatever the batch. fit() reads the law the counts
    follow, k + c, or min(k + c, batch) when the batch size bounds it."""

    BATCHES = (1, 2, 3, 5)

    def __init__(self, top_k_filter, vocab: int, dtype):
        self.fn, self.vocab, self.dtype = top_k_filter, vocab, dtype
        self.ks = tuple(k for k in (1, 2, 3, 5, 8) if k < vocab)
        self._counts: dict | None = None

    def counts(self) -> dict:
        """{(batch, k): tokens kept in each row}, for the calls whose rows all keep their most likely tokens,
        as many in every row; empty when a call keeps another set."""
        if self._counts is None:
            self._counts = self._measure()
        return self._counts

    def _measure(self) -> dict:
        found = {}
        g = seeded(1234)
        for b in self.BATCHES:
            logits = torch.stack([torch.randperm(self.vocab, generator=g) for _ in range(b)]).to(self.dtype) / 2
            for k in self.ks:
                got = quiet_call(self.fn, logits.clone(), k)
                if not isinstance(got, torch.Tensor) or got.shape != logits.shape:
                    continue
                kept = _kept(got.detach().cpu())
                rows = set(_rows(kept))
                if len(rows) != 1 or not torch.equal(got.detach().cpu()[kept].double(), logits[kept].double()):
                    return {}
                n = rows.pop()
                top = logits >= logits.topk(n, -1).values[..., -1:] if n else torch.zeros_like(kept)
                if not torch.equal(top, kept):
                    return {}  # not the n most likely tokens of each row
                found[(b, k)] = n
        return found

    def fit(self) -> tuple[int, bool] | None:
        """(c, bounded): every measured count is k + c (bounded: min(k + c, batch)); None when none fits or too
        few calls ran to tell (at least two batch sizes, one of them a batch of one, and three values of k)."""
        counts = self.counts()
        if len({b for b, _ in counts}) < 2 or 1 not in {b for b, _ in counts} or len({k for _, k in counts}) < 3:
            return None
        for bounded in (False, True):
            for c in (0, -1, 1):
                if all(n == max(0, min(k + c, b) if bounded else k + c) for (b, k), n in counts.items()):
                    return c, bounded
        return None

    def table(self) -> str:
        counts = self.counts()
        batches = sorted({b for b, _ in counts})
        per_k = "; ".join(f"k={k}: " + ", ".join(str(counts[(b, k)]) if (b, k) in counts else "-" for b in batches)
                          for k in self.ks)
        return (f"tokens kept per row on logits without ties ({self.vocab} tokens) for batches of "
                f"{', '.join(map(str, batches))} rows: {per_k}")


def explain_kept_counts(chk: Check, law: KeptCounts, counts: list) -> None:
    """Name a wrong number of kept tokens from the law its counts follow at
    every k and batch size (never from one row): an off-by-one in k, a bound
    by the batch size; or, where the counts are right without ties, ties
    with the k-th largest dropped in every failing row."""
    fit = law.fit()
    if fit == (0, False):
        differing = [(k, a, b) for k, got, want in counts for a, b in zip(got, want) if a != b]
        if differing and all(a == k < b for k, a, b in differing):
            chk.diagnose(TIES)
        return
    if not law.counts():
        return
    chk.measured(law.table())
    if fit is None:
        if law.counts() and all(n == law.vocab - k + 1 for (_, k), n in law.counts().items()):
            chk.diagnose("the threshold is the row's k-th SMALLEST logit, not its k-th largest (measured: your filter "
                         "keeps the vocab - k + 1 most likely tokens of each row, at every k and batch size in the "
                         "table above): take the k-th largest, logits.topk(k, dim=-1).values[..., -1:] (largest=False, "
                         "or an ascending sort, gives the smallest)")
        return
    c, bounded = fit
    count = {0: "k", -1: "k - 1", 1: "k + 1"}[c]
    if not bounded:
        chk.diagnose(TOPK_MINUS if c < 0 else TOPK_PLUS)
        return
    alone = "only its argmax" if 1 + c > 0 else "nothing"
    chk.diagnose(f"k is clamped by the batch size: your filter keeps min({count}, batch size) tokens per row "
                 f"(measured: the count follows the number of rows, logits.size(0)), so a batch of one keeps {alone}; "
                 "a bound on k is the vocabulary size, the last axis: min(k, logits.size(-1))"
                 + ("" if c == 0 else f"; besides, {TOPK_MINUS if c < 0 else TOPK_PLUS}"))


def check_top_p_filter(top_p_filter, *, seed: int = 1, batch: int = 3, vocab: int = 11,
                       ps: tuple = (0.05, 0.5, 0.9), dtype=torch.float32) -> None:
    """Per row: the kept set must be the most likely tokens up to and
    including the one whose probability takes the running sum past p."""
    __tracebackhide__ = True
    chk = Check("top_p_filter", expects="logits of the same shape, -inf outside the nucleus")
    x = randn(batch, vocab, seed=seed, dtype=dtype) * 2
    cases = [(f"p={p} on {tuple(x.shape)}", x, p) for p in ps]
    cases.append((f"p={ps[1 % len(ps)]} on one row {tuple(x[-1].shape)}", x[-1], ps[1 % len(ps)]))
    # the edges: at least one token per row, each row as if alone
    sure, flat = _nucleus_edges(seed, vocab, dtype)
    cases += [(f"p=0.5 on {tuple(sure.shape)}: rows 0 and 3 hold one token of more than p, row 2 a tie at the top",
               sure, 0.5),
              (f"p=0.001 on {tuple(flat.shape)}: one token per row, row 1 nearly flat", flat, 0.001)]
    edges = {label for label, _, _ in cases[-2:]}
    coupled = []  # (p, wrong rows, those right when filtered alone) of each failing batch
    for label, xs, p in cases:
        got = call_with_hints(chk, top_p_filter, xs.clone(), p, hints=wrong_axis_hints(top_p_filter, xs, p, ref_top_p),
                              inputs_row=True)
        want = ref_top_p(xs, p)
        probs = xs.double().softmax(-1)
        sorted_p, order = probs.sort(-1, descending=True)
        variants = {
            CROSSING: lambda: ref_top_p(xs, p, keep_crossing=False),
            "cumulative sum taken over unsorted probabilities: sort descending first": lambda: xs.masked_fill(
                xs.softmax(-1).cumsum(-1) - xs.softmax(-1) >= p, NEG_INF),
            "nucleus computed on logits, not probabilities: softmax before the cumulative sum":
                lambda: _nucleus(xs, p, xs),
            "p replaced by 1 - p: the nucleus holds mass p, drop where the mass before a token is >= p":
                lambda: _nucleus(xs, 1 - p, probs),
            "mask mapped back with gather (the inverse permutation): use drop_sorted.scatter(-1, order, drop_sorted)":
                lambda: xs.masked_fill((sorted_p.cumsum(-1) - sorted_p >= p).gather(-1, order), NEG_INF),
            "mask left in sorted order: it is applied to the logits in vocabulary order; map it back with "
            "mask.scatter(-1, order, mask)": lambda: xs.masked_fill(sorted_p.cumsum(-1) - sorted_p >= p, NEG_INF),
        }
        if xs.dim() > 1:
            variants["softmax over the wrong axis (the batch axis): probabilities are over the vocabulary, dim=-1"] = \
                lambda: _nucleus_sorted_softmax0(xs, p)
        if not chk.compare(label, got, want, variants=variants):
            diagnose_filter(chk, got, xs, want, "top_p_filter", xs, p=p, label=label)
            _measure_nucleus(chk, got, xs, p)
            if xs.dim() > 1 and xs.shape[0] > 1:
                coupled += _rows_alone(chk, top_p_filter, got, xs, p, want, label in edges)
    if coupled and all(fine == wrong for _, wrong, fine in coupled):
        p, rows, _ = coupled[0]
        # Every wrong row is right on its own, so the per-row rule (the crossing token included) is not the cause.
        chk.diagnoses[:] = [d for d in chk.diagnoses if d != CROSSING]
        chk.diagnose(f"rows are not filtered independently (measured: with p={p}, row(s) {rows} keep the right tokens "
                     "when filtered alone, as a batch of one, and other tokens inside the batch): every step must work "
                     "per row on the last axis; an index such as drop[0], drop[0, 0] or a flattened view's [0] on a "
                     "(B, V) mask reaches the first row only, where drop[..., 0] reaches the first column of every row")
    else:
        for p, _, fine in coupled:
            if fine:
                chk.measured(f"p={p}: row(s) {fine} keep the right tokens when filtered alone (a batch of one) and "
                             "other tokens inside the batch")
    run_contract(chk, top_p_filter, TOP_P_FILTER)
    chk.finish()


def _nucleus_edges(seed: int, vocab: int, dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Two (4, vocab) batches for top-p's edges. The first (for p = 0.5): rows
    0 and 3 put more than 0.99 of their mass on one token (at different
    places), row 1 is ordinary, row 2 has two tokens tied at the top (each
    below p, so both are kept whichever the sort puts first). The second
    (for a tiny p): the same rows 0 and 3, row 1 nearly flat, row 2 ordinary;
    each row keeps its top token alone."""
    x = randn(4, vocab, seed=seed + 31, dtype=dtype) * 2
    sure = x.clone()
    sure[0, 1] = sure[0].max() + 10
    sure[3, -1] = sure[3].max() + 10
    # row 2: two tokens tied on top (about 0.2 each, so a running sum passes p = 0.5 only at the third token), the
    # rest spread thinner
    probs = (randn(vocab, seed=seed + 33, dtype=torch.float64) * 0.3).softmax(-1) * 0.6
    probs[[0, 4]] = 0.2
    sure[2] = (probs / probs.sum()).log().to(dtype)
    flat = sure.clone()
    flat[1] = randn(vocab, seed=seed + 32, dtype=dtype) * 0.1
    flat[2] = x[2]
    return sure, flat


def _rows_alone(chk: Check, top_p_filter, got, x: torch.Tensor, p: float, want: torch.Tensor, edge: bool) -> list:
    """On an edge batch, the rows the learner's filter left empty (a fact);
    on any batch, each wrong row filtered alone (a (1, V) batch): returns
    [(p, wrong rows, those of them right alone)] when a row is wrong."""
    if not isinstance(got, torch.Tensor) or got.shape != x.shape:
        return []
    kept, right = _kept(got.detach().cpu()), _kept(want)
    empty = (~kept).all(-1).nonzero().flatten().tolist()
    if empty and edge:
        top = x.double().softmax(-1).max(-1).values
        chk.measured(f"p={p}: row(s) {empty} keep no token at all (every logit -inf, so sampling gives NaN); their most "
                     f"likely token holds {[round(float(top[r]), 3) for r in empty]}, where top-p keeps the token that "
                     "crosses p, even one that alone holds more than p")
    wrong = [r for r in range(x.shape[0]) if not torch.equal(kept[r], right[r])]
    alone = [quiet_call(top_p_filter, x[r:r + 1].clone(), p) for r in wrong]
    fine = [r for r, out in zip(wrong, alone) if isinstance(out, torch.Tensor) and out.shape == (1, x.shape[-1])
            and torch.equal(_kept(out.detach().cpu())[0], right[r])]
    return [(p, wrong, fine)] if wrong else []


def _nucleus_sorted_softmax0(x, p):
    """Top-p with the sorted logits' softmax taken over axis 0 (the bug)."""
    s, order = x.sort(-1, descending=True)
    pr = s.softmax(0)
    drop = pr.cumsum(-1) - pr >= p
    return x.masked_fill(drop.scatter(-1, order, drop), NEG_INF)


def _measure_nucleus(chk: Check, got, x: torch.Tensor, p: float) -> None:
    """Probability mass the learner's kept set holds per row, against p."""
    if not isinstance(got, torch.Tensor) or got.shape != x.shape:
        return
    probs = x.double().softmax(-1).reshape(-1, x.shape[-1])
    kept = _kept(got.detach().cpu()).reshape(probs.shape)
    mass = [round(float(probs[r][kept[r]].sum()), 3) for r in range(len(probs))]
    chk.measured(f"p={p}: probability mass of the tokens kept per row: {mass}")


def _nucleus(x, p, scores, descending=True):
    """Top-p of x with the running sum taken over `scores` in the given order."""
    s, order = scores.sort(-1, descending=descending)
    drop = s.cumsum(-1) - s >= p
    return x.masked_fill(drop.scatter(-1, order, drop), NEG_INF)


# ---------------------------------------------------------------- sample_next

def ref_distribution(logits: torch.Tensor, temperature: float, top_k=None, top_p=None) -> torch.Tensor:
    """Closed form: softmax(top_p(top_k(logits / T))), in float64."""
    z = logits.double() / temperature
    if top_k is not None:
        z = ref_top_k(z, top_k)
    if top_p is not None:
        z = ref_top_p(z, top_p)
    return z.softmax(-1)


def _distribution_variants(row, T, k, p):
    """Every known wrong distribution, offered on EVERY failing setting (a
    variant that does not apply to a setting, e.g. top-k off by one without
    top-k, is offered as None and so cannot match there): a bug is named only
    when it explains all the failing settings, not the one it happens to fit."""
    raw = row.double()
    out = {
        "sampling before the transforms: draw from the softmax of the logits after temperature, top-k and top-p, "
        "not from the raw logits": lambda: raw.softmax(-1),
        CandidatesVariant(NO_TEMPERATURE_EFFECT): lambda: ref_distribution(row, 1.0, k, p),
        "temperature multiplied instead of divided: logits / T": lambda: ref_distribution(row * T * T, T, k, p),
    }
    def filtered_then_tempered():
        z = raw if k is None else ref_top_k(raw, k)
        return ((z if p is None else ref_top_p(z, p)) / T).softmax(-1)

    has_k, has_p = k is not None, p is not None
    out |= {
        "top-k off by one: keeps k + 1 tokens": (lambda: ref_distribution(row, T, k + 1, p)) if has_k else None,
        "top-k off by one: keeps k - 1 tokens": (lambda: ref_distribution(row, T, k - 1, p)) if has_k and k > 1 else None,
        "top-k ignored": (lambda: ref_distribution(row, T, None, p)) if has_k else None,
        "top-p drops the crossing token": (lambda: ref_top_p((raw / T) if k is None else ref_top_k(raw / T, k), p,
                                                             keep_crossing=False).softmax(-1)) if has_p else None,
        "top-p ignored": (lambda: ref_distribution(row, T, k, None)) if has_p else None,
        **_order_or_skipped(raw, T, k, p),
        "temperature applied after top-k/top-p filtering: the nucleus must be taken from the tempered "
        "distribution; divide the logits by T first, then filter": filtered_then_tempered if has_p else None,
    }
    return out


ORDER = "top-p applied before top-k: the order is temperature, top-k, top-p"
ORDER_OR_SKIPPED = CandidatesVariant(
    "with top_k and top_p both set, your draws follow top-k alone; candidates: top-p skipped when top-k is set (an "
    "elif, or a return inside the top-k branch), or top-p applied before top-k (here the two give the same draws); "
    "the order is temperature, top-k, top-p, both applied")


def _order_or_skipped(raw: torch.Tensor, T: float, k, p) -> dict:
    """With both filters set: top-p applied first, and top-p skipped (an
    elif after the top-k branch) give one distribution where the nucleus of
    the full distribution holds the k survivors; then the draws cannot tell
    the two apart, and both are offered as one variant naming them as
    candidates."""
    # Both keys are offered on every setting (None where they do not apply), so that each is named only when it
    # explains every failing setting, as every variant here.
    if k is None or p is None:
        return {ORDER: None, ORDER_OR_SKIPPED: None}
    made: list = []

    def first_p_and_alike():  # computed once, when a variant is first tried (a failing or a refuting row)
        if not made:
            first_p = ref_top_k(ref_top_p(raw / T, p), k).softmax(-1)
            made.append((first_p, torch.allclose(first_p.double(), ref_distribution(raw, T, k, None).double(),
                                                 atol=1e-9)))
        return made[0]

    return {ORDER: lambda: None if first_p_and_alike()[1] else first_p_and_alike()[0],
            ORDER_OR_SKIPPED: lambda: first_p_and_alike()[0] if first_p_and_alike()[1] else None}


# (0.5, top_p) next to (2.0, top_p): a temperature below and above 1 moves the nucleus in opposite directions, so
# "temperature after the filters" and "top-p drops the crossing token" (which agree at T=2) give different draws.
# A temperature near 0 (0.005) on logits as close together: sampled, not greedy, and divided by as it is.
SETTINGS = ((1.0, None, None), (0.5, None, None), (2.0, 4, None), (2.0, None, 0.7), (0.5, None, 0.8), (1.4, 5, 0.8),
            (0.005, None, None))
# Below it, the logits are scaled by the temperature: logits / T is the same spread as at T = 1. The known wrong
# distributions are not offered there: on logits so close most of them are near uniform, and alike.
CLOSE_LOGITS_BELOW = 0.05


def ref_sample_next(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    """A correct sampler built on the closed-form filters (for upstream attribution)."""
    if temperature == 0:
        return logits.argmax(-1)
    z = logits / temperature
    z = ref_top_k(z, top_k) if top_k is not None else z
    z = ref_top_p(z, top_p) if top_p is not None else z
    return torch.multinomial(z.softmax(-1), 1, generator=generator).squeeze(-1)


def _body_sample_next(sample_next, seed, vocab, n_draws, settings, dtype) -> Check:
    chk = Check("sample_next", expects="token ids of shape (batch,)")
    batch = randn(4, vocab, seed=seed, dtype=dtype) * 2
    got = call_with_hints(chk, sample_next, batch, 0.0, None, None, seeded(0), hints=[
        (r"ZeroDivision|inf|nan|probability tensor", "temperature 0 must be greedy: return logits.argmax(-1) before "
                                                    "dividing by the temperature (logits / 0 is inf)")])
    if not chk.compare("temperature 0 = argmax", got, batch.argmax(-1), variants={
        "temperature 0 must be greedy: return logits.argmax(-1) without sampling": lambda: batch.argmin(-1),
        "the greedy argmax is taken over the batch axis (dim=0): it gives a row index for each vocabulary entry; "
        "take it over the vocabulary, logits.argmax(dim=-1)": lambda: batch.argmax(0),
        "the largest logits themselves, not their positions: logits.max(dim=-1) returns (values, indices), and the "
        "token is the index, logits.argmax(dim=-1)": lambda: batch.max(-1).values}) and not chk.diagnoses:
        _non_finite_at_temperature_zero(chk, sample_next, batch)
    # Rows peaked at different tokens: each row must get its own draw.
    tops = torch.arange(4) * 2 % vocab                                   # a different token per row (vocab >= 7)
    peaked = torch.full((4, vocab), -30.0, dtype=dtype).scatter(-1, tops[:, None], 0.0)
    own = chk.call(sample_next, peaked.clone(), 1.0, None, None, seeded(seed))
    rows_ok = isinstance(own, torch.Tensor) and own.shape == (4,) and torch.equal(own.long().cpu(), tops)
    chk.require("4 rows, each peaked at another token: one draw per row", rows_ok,
                f"{int((own.long().cpu() == tops).sum())} of 4 rows drew their peak" if isinstance(own, torch.Tensor)
                and own.shape == (4,) else f"got {describe(own, (4,))}",
                diagnosis=None if rows_ok or not isinstance(own, torch.Tensor) or own.numel() != 4 or len(set(own.flatten().tolist())) > 1
                else "every row got the same token: draw one token per row, torch.multinomial on the whole (B, V) "
                     "probability matrix")
    shared = not rows_ok and isinstance(own, torch.Tensor) and own.numel() == 4 and len(set(own.flatten().tolist())) == 1
    row = torch.linspace(2.5, -1.5, vocab, dtype=torch.float64)[torch.randperm(vocab, generator=seeded(seed))].to(dtype)
    noise = 5 * (0.25 / n_draws) ** 0.5   # 5 standard deviations of a frequency
    for T, k, p in settings:
        label = f"T={T}" + (f", top_k={k}" if k else "") + (f", top_p={p}" if p else "")
        close = T < CLOSE_LOGITS_BELOW
        label += f" (logits {T:g} times as spread)" if close else ""
        tempered = row * T if close else row
        draws = call_with_hints(chk, sample_next, tempered.expand(n_draws, vocab).clone(), T, k, p, seeded(seed + 1),
                                inputs_row=True)
        if not (isinstance(draws, torch.Tensor) and draws.shape == (n_draws,) and not draws.is_floating_point()):
            hint = (" (torch.multinomial returns (B, 1): .squeeze(-1))"
                    if isinstance(draws, torch.Tensor) and draws.shape == (n_draws, 1) else
                    f" (measured: {draws.numel()} draw{'s' if draws.numel() != 1 else ''} for {n_draws} rows: an index "
                    "such as [0] on multinomial's (B, 1) result keeps the first row only; [:, 0] or .squeeze(-1) "
                    "keeps one draw per row)"
                    if isinstance(draws, torch.Tensor) and 0 < draws.numel() < n_draws else "")
            chk._stop(f"sample_next returned {describe(draws, (n_draws, vocab))} for {n_draws} rows of logits; it should return "
                      f"integer token ids of shape ({n_draws},){hint}")
        freq = torch.bincount(draws.long().cpu(), minlength=vocab)[:vocab].double() / n_draws
        want = ref_distribution(tempered, T, k, p)
        if not chk.compare(f"{label}: frequencies", freq, want, atol=noise, rtol=0,
                           variants=None if close else _distribution_variants(tempered, T, k, p)):
            measure_draws(chk, draws, freq, want, tempered, T, n_draws, label, own_rows=not shared, near_zero=close,
                           again=lambda s, T=T, k=k, p=p, r=tempered: quiet_call(sample_next, r.expand(64, vocab).clone(),
                                                                                 T, k, p, seeded(s)))
            _measure_filter_inputs(chk, sample_next, tempered.expand(4, vocab).clone(), T, k, p)
        outside = int((want[draws.long().cpu().clamp(0, vocab - 1)] == 0).sum())
        chk.require(f"{label}: no draw outside the kept tokens", outside == 0,
                    f"{outside} draws picked tokens that the filters remove")
    a = chk.call(sample_next, row.expand(64, vocab).clone(), 1.0, None, None, seeded(7))
    b = chk.call(sample_next, row.expand(64, vocab).clone(), 1.0, None, None, seeded(7))
    same = isinstance(a, torch.Tensor) and torch.equal(a, b)
    notebooks = not same and say_notebook_generator(chk, sample_next,
                                                    (row.expand(64, vocab).clone(), 1.0, None, None, seeded(7)))
    chk.require("same generator seed, same draws", same,
                "two calls with identically seeded generators gave different tokens",
                diagnosis=None if notebooks else "the generator is not used: draw the sample with it "
                                                 "(torch.multinomial(..., generator=generator))")
    run_contract(chk, sample_next, SAMPLE_NEXT)
    return chk


def _non_finite_at_temperature_zero(chk: Check, sample_next, batch: torch.Tensor) -> None:
    """The learner's line after which a tensor first holds inf or nan, the call at temperature 0 run again on the
    same finite logits (not where the grader's recheck runs it: its frames are in the learner's process)."""
    if getattr(sample_next, "recheck_trace", None) is not None:
        return
    spoiled = lambda v: isinstance(v, torch.Tensor) and v.is_floating_point() and not bool(torch.isfinite(v).all())  # noqa: E731
    found = trace.line_making(sample_next, (batch.clone(), 0.0, None, None, seeded(0)), spoiled, [], "spoiled")
    if found is None:
        return
    chk.located = found
    chk.diagnose(f"at temperature 0 a tensor of your sample_next holds inf or nan from line {found.line} on "
                 "(measured: the call run again on the same finite logits); an argmax over inf or nan need not give "
                 "the largest logit's position, and yours do not (the row above): temperature 0 is greedy, so return logits.argmax(-1) before any "
                 "step divides by the temperature")


def check_sample_next(sample_next, *, seed: int = 2, vocab: int = 9, n_draws: int = 20000,
                      settings: tuple = SETTINGS, dtype=torch.float32) -> None:
    """Greedy at T = 0; one draw per row; otherwise the frequencies of n_draws
    samples from one row of logits must match the closed-form distribution
    of each setting (within 5 standard deviations of a frequency)."""
    __tracebackhide__ = True
    finish_with_upstream("sample_next", lambda: _body_sample_next(sample_next, seed, vocab, n_draws, settings, dtype),
                         sample_next, {"top_k_filter": ref_top_k, "top_p_filter": ref_top_p},
                         {"top_k_filter": "exercise 1", "top_p_filter": "exercise 2"})


def _measure_filter_inputs(chk: Check, sample_next, logits: torch.Tensor, T: float, k, p) -> None:
    """What sample_next hands each filter it calls under the name `logits`:
    said when that is a probability distribution (every row >= 0 and
    summing to 1) or log-probabilities (exp of them sums to 1), not logits."""
    for callee, used in (("top_k_filter", k), ("top_p_filter", p)):
        if not used or any(callee in fact for fact in chk.facts):
            continue
        received = first_call_arguments(sample_next, callee, lambda: sample_next(logits.clone(), T, k, p, seeded(0)))
        given = (received or {}).get("logits")
        if not isinstance(given, torch.Tensor) or not given.is_floating_point() or given.numel() == 0:
            continue
        g = given.detach().double()
        ones = torch.ones(g.shape[:-1], dtype=torch.float64)
        if bool((g >= 0).all()) and torch.allclose(g.sum(-1), ones, atol=1e-4):
            what = "probabilities (every row >= 0 and summing to 1)"
        elif bool((g <= 0).all()) and torch.allclose(g.exp().sum(-1), ones, atol=1e-4):
            what = "log-probabilities (exp of every row sums to 1)"
        else:
            continue
        chk.measured(f"sample_next hands {callee} {what} as its `logits` (measured on its first call): the filter "
                     "takes logits and applies its own softmax; pass it the (temperature-scaled) logits")


# -- contracts: the regimes each exercise promises, and its step-by-step reference ---------------
def top_k_steps(logits: torch.Tensor, k: int) -> torch.Tensor:
    kth = logits.sort(dim=-1, descending=True).values[..., k - 1:k]   # (..., 1): the k-th largest
    return logits.masked_fill(logits < kth, NEG_INF)


def top_p_steps(logits: torch.Tensor, p: float) -> torch.Tensor:
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    probs = sorted_logits.softmax(dim=-1)
    before = probs.cumsum(dim=-1) - probs                  # mass of the strictly more likely tokens
    drop_sorted = before >= p
    drop = drop_sorted.scatter(-1, order, drop_sorted)
    return logits.masked_fill(drop, NEG_INF)


def sure_draw(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    """What sample_next must return when top_k=1 leaves one token per row: that token."""
    return logits.argmax(dim=-1)


def _top_k_cases():
    p = defaults(check_top_k_filter)
    return [(f"k={p['ks'][0]}", (_filter_cases(p["seed"], p["batch"], p["vocab"], p["dtype"]), p["ks"][0]), {})]


def _top_p_cases():
    p = defaults(check_top_p_filter)
    return [(f"p={p['ps'][1]}", (randn(p["batch"], p["vocab"], seed=p["seed"], dtype=p["dtype"]) * 2, p["ps"][1]), {})]


def _sure_draw_cases():
    p = defaults(check_sample_next)
    logits = randn(3, p["vocab"], seed=p["seed"] + 11, dtype=p["dtype"]) * 2
    return [("top_k=1: one token left per row", (logits, 1.0, 1, None, None), {})]


def _dyadic_nucleus(logits: torch.Tensor) -> dict:
    """Logits of `logits`' shape whose probabilities are 1/2, 1/4, 1/8, 1/8
    (exact in every float dtype), on other tokens in each row, the rest -inf
    (as top-k filtering leaves them); with p = 0.75 the mass before the third
    token is exactly p."""
    rows = logits.reshape(-1, logits.shape[-1])
    made = torch.full(rows.shape, float("-inf"), dtype=logits.dtype)
    levels = torch.tensor([0.0, -1.0, -2.0, -2.0], dtype=torch.float64) * math.log(2)
    for r in range(rows.shape[0]):
        made[r, (torch.arange(4) * 2 + r) % rows.shape[-1]] = levels.to(logits.dtype)
    return {"logits": made.reshape(logits.shape), "p": 0.75}


def _same_ids(got, want) -> bool:
    return (isinstance(got, torch.Tensor) and not got.is_floating_point() and tuple(got.shape) == tuple(want.shape)
            and bool(torch.equal(got.long().cpu(), want.long().cpu())))


TOP_K_FILTER = Contract("top_k_filter", top_k_steps, _top_k_cases, names=("logits", "k"), batch=("logits",),
                        leading=("logits",), views=("logits",), grad=("logits",), shift=("logits",), scale=("logits",),
                        params=(("k", 1), ("k", lambda a: a["logits"].shape[-1])))  # greedy, and every token kept
TOP_P_FILTER = Contract("top_p_filter", top_p_steps, _top_p_cases, names=("logits", "p"), batch=("logits",),
                        leading=("logits",), views=("logits",), grad=("logits",), dtypes=(torch.float64,),
                        shift=("logits",), scale=("logits",), params=(("p", 0.9), ("p", 1.0)), edges=(
                            Edge("mass exactly p", "when the mass before a token is exactly p (probabilities 1/2, "
                                 "1/4, 1/8, 1/8 and p = 0.75: the nucleus is the first two tokens, whose mass reaches "
                                 "p; a token is dropped when the mass before it is >= p, not only when it is > p)",
                                 lambda a: _dyadic_nucleus(a["logits"])),))
# Judged on a sure draw (top_k=1); the generator's promises on a real draw (no top-k, temperature 1).
SAMPLE_NEXT = Contract("sample_next", sure_draw, _sure_draw_cases,
                       names=("logits", "temperature", "top_k", "top_p", "generator"), batch=("logits",),
                       views=("logits",), same=_same_ids, locate=False, shift=("logits",), scale=("logits",),
                       generator="generator", draws=lambda a: {**a, "top_k": None, "temperature": 1.0},
                       params=(("temperature", 0.0),),  # greedy: the same sure token, the same shape
                       fixed=(("top_k", "the check's rows judge the filters on real draws; here top_k=1 makes the "
                               "draw sure"),))
