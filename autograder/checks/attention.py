"""Checks for notebook 03: causal mask, head split/merge, causal attention,
and the full multi-head self-attention layer."""
from __future__ import annotations

import itertools
import math

import torch
import torch.nn.functional as F

from .contracts import Contract, Edge, call_keeping_inputs, defaults, run_contract
from .framework.check import CandidatesVariant, Check
from .framework.measure import close_to, describe_factor, fit_scale, randn, tol_for
from .references.attention import attention_steps, causal_mask_steps, ref_mask
from .spies import first_call_arguments


def check_causal_mask(causal_mask, *, cases: tuple = ((5, 5), (3, 7), (1, 6))) -> None:
    """causal_mask(q_len, kv_len) -> bool (q_len, kv_len), True = may attend."""
    __tracebackhide__ = True
    chk = Check("causal_mask", expects="a bool tensor (q_len, kv_len), True where query i may attend to key j")
    for q_len, kv_len in cases:
        got = chk.call(causal_mask, q_len, kv_len)
        want = ref_mask(q_len, kv_len)
        ones = torch.ones(q_len, kv_len, dtype=torch.bool)
        if isinstance(got, torch.Tensor) and got.dtype != torch.bool and tuple(got.shape) == (q_len, kv_len):
            chk.diagnose("the mask must be a bool tensor (True = may attend), not 0/1 or -inf floats; "
                         "build it with dtype=torch.bool")
        chk.compare(f"q_len={q_len}, kv_len={kv_len}", got, want, variants={
            "mask off by one: the diagonal is excluded, so a token cannot attend to itself (use j <= i, not j < i)":
                lambda: ones.tril(kv_len - q_len - 1),
            "mask off by one: each token also sees the next token (j <= i + 1)":
                lambda: ones.tril(kv_len - q_len + 1),
            "mask inverted: True must mean 'may attend' (the past), not 'masked' (the future)":
                lambda: ~want,
            "mask transposed: it lets each query see the future (upper triangle) instead of the past":
                lambda: ones.tril(kv_len - q_len).T if q_len == kv_len else ones.triu(0),
            "mask aligned top-left: with q_len < kv_len the queries are the LAST q_len positions, so use "
            "tril(diagonal=kv_len - q_len)":
                lambda: ones.tril(0),
        })
        if not chk.rows[-1].ok and not chk.rows[-1].note:  # no known bug reproduced this case: measure it
            _explain_mask(chk, got, q_len, kv_len)
    run_contract(chk, causal_mask, CAUSAL_MASK)
    chk.finish()


def _explain_mask(chk: Check, got, q_len: int, kv_len: int) -> None:
    """Say which triangle, with which diagonal, the learner's mask is."""
    if not isinstance(got, torch.Tensor):
        return
    if tuple(got.shape) == (kv_len, q_len) and q_len != kv_len:
        chk.diagnose_at("mask (kv_len, q_len)", (q_len, kv_len), _transposed_mask_words)
        return
    if tuple(got.shape) != (q_len, kv_len):
        return
    ones = torch.ones(q_len, kv_len, dtype=torch.bool)
    expected = kv_len - q_len
    right = ones.tril(expected)
    if got.dtype != torch.bool:  # a float or int mask: its pattern is only read when its values are 0/1
        values = sorted({float(v) for v in got.detach().cpu().flatten().tolist()})
        if not set(values) <= {0.0, 1.0}:
            chk.measured(f"your mask is {got.dtype} with values other than 0 and 1: a float mask is ADDED to the scores "
                         "(0 or -inf); causal_mask returns bool, True = may attend")
            return
        if torch.equal(got.detach().cpu() != 0, right):
            chk.measured(f"your mask is {got.dtype} 0/1 in the right pattern where checked: only its dtype is wrong")
            return
    allowed = got.detach().cpu() != 0
    if torch.equal(allowed, right):
        return
    diagonals = [d for d in range(-kv_len, kv_len + 1) if torch.equal(allowed, ones.tril(d))]
    if diagonals and not torch.equal(ones.tril(diagonals[0]), right):
        # several diagonals give the same mask when it is all False or all True: name them all, the code's is one
        which = (f"tril(diagonal={diagonals[0]})" if len(diagonals) == 1 else
                 f"tril(diagonal=d) for every d from {diagonals[0]} to {diagonals[-1]}, the same mask: "
                 + ("no query may attend to any key" if not allowed.any() else "every query attends to every key"))
        chk.measured(f"for q_len={q_len}, kv_len={kv_len} your mask is {which}; expected "
                     f"tril(diagonal=kv_len - q_len) = tril(diagonal={expected})")
        return
    for diag in range(-kv_len, kv_len + 1):
        if torch.equal(allowed, ones.triu(diag)) and not torch.equal(allowed, ones.tril(expected)):
            chk.diagnose_at("mask triu", (diag, q_len, kv_len), _upper_triangle_words)
            return


def _transposed_mask_words(sizes: list[tuple[int, int]]) -> str:
    """The mask built (kv_len, q_len), said once for every (q_len, kv_len) it was measured at."""
    if len(sizes) == 1:
        (q_len, kv_len), = sizes
        return (f"the mask has shape {(kv_len, q_len)} = (kv_len, q_len): rows are queries and columns keys, so build "
                f"it as (q_len, kv_len) = {(q_len, kv_len)}")
    shapes = " and ".join(f"{(kv, q)} for q_len={q}, kv_len={kv}" for q, kv in sizes)
    return (f"the mask has shape (kv_len, q_len): {shapes}; rows are queries and columns keys, so build it as "
            "(q_len, kv_len)")


def _upper_triangle_words(found: list[tuple[int, int, int]]) -> str:
    """The upper triangle kept, said once for every (diagonal, q_len, kv_len) it was measured at."""
    which = (f"triu(diagonal={found[0][0]})" if len(found) == 1 else
             " and ".join(f"triu(diagonal={d}) for q_len={q}, kv_len={kv}" for d, q, kv in found))
    return (f"your mask keeps the upper triangle ({which}): True above the diagonal lets queries see the future; use "
            "tril, the lower triangle")


def good_split_any(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """A correct split_heads, for re-running a later exercise without the learner's."""
    return _split_ref(x, n_heads)


def _split_ref(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    B, T, d = x.shape
    return x.unflatten(-1, (n_heads, d // n_heads)).permute(0, 2, 1, 3)  # (B, H, T, hd)


def check_split_merge(split_heads, merge_heads, *, seed: int = 0, batch: int = 2, seq: int = 5,
                      n_heads: int = 3, head_dim: int = 4) -> None:
    """split_heads (B, T, d) -> (B, H, T, hd) and merge_heads, its inverse."""
    __tracebackhide__ = True
    d = n_heads * head_dim
    x = randn(batch, seq, d, seed=seed)
    want = _split_ref(x, n_heads)
    chk = Check("split_heads / merge_heads", expects=f"(batch, heads, seq, head_dim) = {(batch, n_heads, seq, head_dim)}")
    chk.fn_name = "split_heads"
    chk.names = {"B": batch, "T": seq, "d": d}  # the docstring's (B, T, d): a size unpacked into another letter shows
    got = chk.call(split_heads, x, n_heads)
    chk.compare(f"split {tuple(x.shape)} -> (B, H, T, hd)", got, want, variants={
        "wrong layout after reshape: your result is x's memory read straight as (B, H, T, hd), as a reshape or "
        "view to that shape reads it, so each 'head' holds pieces of several positions; the memory is laid out "
        "(B, T, H, hd), and (B, H, T, hd) is that layout with axes 1 and 2 swapped: transpose(1, 2), which no "
        "reshape or view does":
            lambda: x.reshape(batch, n_heads, seq, head_dim),
        "head_dim and heads swapped: reshape (B, T, d) to (B, T, H, hd), not (B, T, hd, H)":
            lambda: x.unflatten(-1, (head_dim, n_heads)).permute(0, 3, 1, 2),
    })
    _explain_layout(chk, got, want, {"batch": batch, "heads": n_heads, "seq": seq, "head_dim": head_dim},
                    "(batch, heads, seq, head_dim)")
    chk.fn_name = "merge_heads"
    chk.names = {"B": batch, "H": n_heads, "T": seq, "hd": head_dim}  # the docstring's (B, H, T, hd)
    chk.expects = f"(batch, seq, d_model) = {(batch, seq, d)}"
    y = randn(batch, n_heads, seq, head_dim, seed=seed + 1)
    merged = chk.call(merge_heads, y)
    want_merged = y.permute(0, 2, 1, 3).flatten(2)  # (B, H, T, hd) -> (B, T, H, hd) -> (B, T, d)
    chk.compare(f"merge {tuple(y.shape)} -> (B, T, d)", merged, want_merged, variants={
        "wrong layout after reshape: y.reshape(B, T, d) straight from (B, H, T, hd) mixes tokens across heads; "
        "transpose(1, 2) to (B, T, H, hd) first": lambda: y.reshape(batch, seq, d),
        "head_dim and heads swapped when merging: (B, T, hd, H) flattened interleaves the heads' features; "
        "transpose(1, 2) gives (B, T, H, hd), then reshape": lambda: y.permute(0, 2, 3, 1).reshape(batch, seq, d),
    })
    _merge_read_order(chk, merged, y, want_merged)
    roundtrip = chk.call(merge_heads, chk.call(split_heads, x, n_heads))
    chk.compare("merge(split(x)) == x", roundtrip, x)
    chk.fn_name = "split_heads"
    run_contract(chk, split_heads, SPLIT_HEADS)
    chk.fn_name = "merge_heads"
    run_contract(chk, merge_heads, MERGE_HEADS)
    chk.fn_name = "split_heads / merge_heads"
    chk.finish()


def _merge_read_order(chk: Check, merged, y: torch.Tensor, want: torch.Tensor) -> None:
    """A merge with the right shape and the wrong values that is y's values read in another axis order and
    flattened: that order, found among all of them (y's sizes all differ, so one order at most gives it)."""
    row = chk.rows[-1]
    if row.ok or chk.reproduced.get(row.name) or not isinstance(merged, torch.Tensor) or merged.shape != want.shape:
        return
    names = ("batch", "heads", "seq", "head_dim")
    for order in itertools.permutations(range(4)):
        if order[0] == 0 and order != (0, 2, 1, 3) \
                and torch.equal(merged, y.permute(*order).reshape(want.shape)):
            read = ", ".join(names[i] for i in order)
            chk.diagnose(f"wrong layout after transpose: your merge_heads returns y's values read in the axis order "
                         f"({read}), y.permute{order}, flattened to (B, T, d); a row of (B, T, d) holds one "
                         "position's heads side by side: (batch, seq, heads, head_dim), y.transpose(1, 2), then "
                         "reshape")
            return


def _explain_layout(chk: Check, got, want: torch.Tensor, sizes: dict[str, int], expected: str) -> None:
    """Name the axes of a wrongly shaped split by their sizes (all different)."""
    if not isinstance(got, torch.Tensor) or got.shape == want.shape or got.dim() != want.dim():
        return
    names = {size: name for name, size in sizes.items()}
    if len(names) != len(sizes) or not all(n in names for n in got.shape):
        return
    order = [names[n] for n in got.shape]
    layout = f"({', '.join(order)})"
    perm = [list(want.shape).index(n) for n in got.shape]
    if torch.equal(got, want.permute(*perm)):
        chk.diagnose(f"the values are right but the axes are in the order {layout}; expected {expected}: "
                     "transpose/permute them into place")
    else:
        chk.measured(f"your output's axes are {layout} (by their sizes); expected {expected}")


def _attention_variants(q, k, v):
    """Wrong attention formulas on the same inputs."""
    Tq, Tk, hd = q.shape[-2], k.shape[-2], q.shape[-1]
    mask = ref_mask(Tq, Tk)
    ones = torch.ones(Tq, Tk, dtype=torch.bool)

    def attn(scale=1 / math.sqrt(hd), m=mask, dim=-1, fill=float("-inf")):
        s = (q @ k.transpose(-2, -1)) * scale
        if m is not None:
            s = s.masked_fill(~m, fill)
        return s.softmax(dim) @ v

    def naive_softmax():
        s = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
        e = s.masked_fill(~mask, float("-inf")).exp()
        return (e / e.sum(-1, keepdim=True)) @ v

    def mask_after_softmax():
        w = ((q @ k.transpose(-2, -1)) / math.sqrt(hd)).softmax(-1) * mask
        return w @ v

    return {
        "softmax over the wrong dim: the weights of each query must sum to 1 over the keys (dim=-1), "
        "not over the queries (dim=-2)": lambda: attn(dim=-2),
        # What is measured is scale 1: no division, or a division by a number that comes out 1 (sqrt(hd // H)).
        "missing scale: your output is attention with the scores unscaled (no division, or one by a number that "
        "comes out 1): divide the scores by sqrt(head_dim) before the softmax": lambda: attn(scale=1.0),
        # What is measured is the scale the scores come out with; more than one way of writing gives each.
        CandidatesVariant(
            "wrong scale: your output is attention with the scores divided by head_dim, not sqrt(head_dim); "
            "candidates: (1) a division by head_dim; (2) sqrt(head_dim) divided twice, on the scores and again "
            "before the softmax, or on q and on k each"): lambda: attn(scale=1 / hd),
        CandidatesVariant(
            "wrong scale: your output is attention with the scores multiplied by sqrt(head_dim), not divided by it; "
            "candidates: (1) a multiplication by sqrt(head_dim) where the division belongs; (2) a division by the "
            "scale factor itself, head_dim ** -0.5"): lambda: attn(scale=math.sqrt(hd)),
        "no causal mask reaches the softmax: every query sees the future": lambda: attn(m=None),
        "mask off by one: the diagonal is masked, so a token cannot see itself": lambda: attn(m=ones.tril(Tk - Tq - 1)),
        "mask off by one: each query also sees the next key": lambda: attn(m=ones.tril(Tk - Tq + 1)),
        "mask broadcast wrong: the transposed mask lets queries see the future instead of the past":
            lambda: attn(m=mask.T if Tq == Tk else ones.triu(0)),
        "mask aligned top-left: with fewer queries than keys, queries are the LAST Tq positions "
        "(tril(diagonal=Tk - Tq))": lambda: attn(m=ones.tril(0)),
        "mask applied after the softmax: zeroing weights afterwards leaves rows that no longer sum to 1; "
        "fill the scores with -inf before the softmax": mask_after_softmax,
        "masked scores filled with 0 (or a number that close to it) instead of -inf: exp(0) = 1 still gives future "
        "keys weight":
            lambda: attn(fill=0.0),
        "hand-written softmax without subtracting the row maximum: exp() of large scores overflows to inf "
        "(use scores.softmax(dim=-1), or subtract scores.amax(-1, keepdim=True) first)": naive_softmax,
        "mask inverted: the allowed keys were filled with -inf (masked_fill(mask, ...)); fill where the mask is "
        "False: masked_fill(~mask, float('-inf'))": lambda: attn(m=~mask),
        "weights applied to the keys instead of the values: return weights @ v": lambda: attn().new_zeros(0)
        if v.shape != k.shape else _weights(q, k, mask) @ k,
    }


def _weights(q, k, mask):
    s = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    return s.masked_fill(~mask, float("-inf")).softmax(-1)


AXIS_NAMES = ("batch", "heads", "queries", "keys")


def explain_attention_weights(chk: Check, attention, seed: int = 5, batch: int = 2, heads: int = 3, seq: int = 6,
                              head_dim: int = 4, dtype=torch.float32) -> None:
    """Read the learner's attention weights directly: with v = identity
    (v[j] = e_j), output row i IS query i's weights over the keys. Then
    measure the axis they sum to 1 over, weight on future keys, the
    diagonal, and the softmax temperature fitted against q·kᵀ. q and k are
    those of attention_cases(seed, ...)'s first case, so a check passing its
    own sizes measures the inputs of its table's first row."""
    _, q, k, _ = next(attention_cases(seed, batch, heads, seq, head_dim, dtype))
    eye = torch.eye(seq, dtype=dtype).expand(batch, heads, seq, seq).contiguous()  # (B, H, Tk, Tk)
    w = chk.probe(attention, q, k, eye)
    if not (isinstance(w, torch.Tensor) and w.shape == (batch, heads, seq, seq)):
        return
    w = w.detach().double()
    allowed = ref_mask(seq, seq).expand(batch, heads, seq, seq)
    last_nan = bool(torch.isnan(w[..., -1, :]).all())
    if last_nan:
        chk.diagnose("the last query's weights are NaN: all its scores were -inf, yet it may see every key; the mask "
                     "is inverted (fill where the mask is False: masked_fill(~mask, float('-inf')))")
        return
    filled = torch.nan_to_num(w, nan=0.0)
    sums = [a for a in range(4) if bool(torch.allclose(filled.sum(a)[allowed.any(a)], torch.ones(()).double(), atol=1e-4))]
    if torch.isnan(w).any():
        # Masked entries became NaN (e.g. a softmax over an axis where all of them are -inf): read the
        # weights of the last query alone, which may see every key, so nothing in it is masked.
        last = chk.probe(attention, q[:, :, -1:], k, eye)
        if isinstance(last, torch.Tensor) and last.shape == (batch, heads, 1, seq) and torch.isfinite(last).all():
            last = last.detach().double()
            sums = [a for a in (0, 1, 3) if bool(torch.allclose(last.sum(a), torch.ones(()).double(), atol=1e-4))]
        else:
            chk.measured("your attention weights contain NaN")
            return
    if 3 not in sums:
        if sums:
            _explain_weights_on_another_axis(chk, filled, q.double(), k.double(), allowed, sums[0])
        else:
            row = filled.sum(-1)
            chk.measured(f"your attention weights do not sum to 1 over the keys (row sums {float(row.min()):.3g} to "
                         f"{float(row.max()):.3g}) nor over any other axis")
            _explain_scaled_weights(chk, filled, q.double(), k.double(), allowed, float(row.mean()))
        return
    future = filled.masked_fill(allowed, 0.0)
    if float(future.max()) > 1e-6:
        b, h, i, j = (int(t) for t in torch.nonzero(future == future.max())[0])
        # The leak is measured; what lets it through is not: several codes give it.
        chk.candidates(f"future leak: query {i} puts weight {float(future.max()):.2f} on key {j} > {i} (measured): "
                       "keys after a query must get exactly 0 weight; candidates: no mask applied, a mask of another "
                       "orientation or offset (transposed, triu, shifted), or masked scores filled with a finite "
                       "value instead of -inf before the softmax")
        return
    diag = filled.diagonal(dim1=-2, dim2=-1)
    if float(diag.abs().max()) == 0.0:
        chk.diagnose("the diagonal is masked: every query gives weight 0 to its own key, but a token may attend to "
                     "itself (key j <= query i)")
        return
    _fit_temperature(chk, filled, q.double(), k.double(), allowed, head_dim, seq)


def _explain_scaled_weights(chk: Check, filled, q, k, allowed, total: float) -> None:
    """Weights (read with v = identity) whose every row sums to one number, not 1: each row is the masked softmax of
    the scores, unscaled or divided by sqrt(head_dim), times that number. Unscaled scores times 1/sqrt(head_dim) is
    the scale applied after the softmax (to the weights or to the output) instead of to the scores: the weights are
    recomputed from q and k under that reading and compared with the learner's, so the cause is confirmed."""
    hd = q.shape[-1]
    for scale, words in ((1.0, "unscaled scores"), (1 / math.sqrt(hd), "scores divided by sqrt(head_dim)")):
        soft = (q @ k.transpose(-2, -1) * scale).masked_fill(~allowed, float("-inf")).softmax(-1)
        if not torch.allclose(filled, soft * total, rtol=1e-4, atol=1e-6):
            continue
        if scale == 1.0 and abs(total * math.sqrt(hd) - 1) < 1e-4:
            chk.diagnose(f"the 1/sqrt(head_dim) scale is applied after the softmax, not to the scores (measured: "
                         f"with v the identity your weights are the softmax of the unscaled masked scores divided by "
                         f"sqrt({hd}), so each row sums to {total:.3g}): divide the scores by sqrt(head_dim) before "
                         "the softmax, and take the softmax's weights as they are: each row then sums to 1")
        else:
            chk.measured(f"with v the identity your weights are the softmax of the masked {words} times {total:.3g}")
        return


def _explain_weights_on_another_axis(chk: Check, filled, q, k, allowed, axis: int) -> None:
    """The weights read with v = identity sum to 1 over `axis`, not over the keys. Over the queries two codes give
    that: a softmax over the queries, or right weights transposed before the product with v. Each is confirmed by
    rebuilding it from q and k and comparing it with what the learner's function applied to v; neither matching
    leaves both as candidates."""
    if axis != 2:
        chk.diagnose(f"your attention weights sum to 1 over axis {axis} ({AXIS_NAMES[axis]}), not over the keys: "
                     "take the softmax over the last axis, scores.softmax(dim=-1)")
        return
    scores = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).masked_fill(~allowed, float("-inf"))
    if torch.allclose(filled, scores.softmax(-1).transpose(-2, -1), atol=1e-5):
        chk.diagnose("the attention weights are right but transposed before the product with v (measured: with v "
                     "the identity your output is the reference's weights with their last two axes swapped, so it "
                     "sums to 1 over the queries): multiply weights @ v as the softmax gives them")
    elif torch.allclose(filled, scores.softmax(-2), atol=1e-5):
        chk.diagnose("softmax over the queries (axis 2) instead of the keys (measured: with v the identity your "
                     "output is the masked scores' softmax over axis 2): take it over the last axis, "
                     "scores.softmax(dim=-1)")
    else:
        chk.candidates("your attention weights (read with v the identity) sum to 1 over axis 2 (queries), not over "
                       "the keys; candidates: a softmax over the queries, or weights transposed (their last two axes "
                       "swapped) before the product with v")


def _fit_temperature(chk: Check, w, q, k, allowed, head_dim: int, seq: int) -> None:
    """log w = c·(q·k) - log Z per row: fit c by least squares on the allowed
    entries of each row (centred per row), for scores q·kᵀ and k·qᵀ."""
    keep = allowed & (w > 0)
    log_w = torch.where(keep, w.clamp_min(1e-300).log(), torch.zeros_like(w))
    count = keep.sum(-1, keepdim=True).clamp_min(1)

    def fit(scores):
        centred_s = torch.where(keep, scores - (scores * keep).sum(-1, keepdim=True) / count, torch.zeros_like(w))
        centred_l = torch.where(keep, log_w - (log_w * keep).sum(-1, keepdim=True) / count, torch.zeros_like(w))
        return fit_scale(centred_l, centred_s)

    straight, swapped = fit(q @ k.transpose(-2, -1)), fit(k @ q.transpose(-2, -1))
    if straight is not None and straight[1] < 1e-3:
        c = straight[0]
        if abs(c * math.sqrt(head_dim) - 1) > 0.01:
            named = {"1 (no scaling: divide by sqrt(head_dim))": 1.0, f"1/head_dim = 1/{head_dim}": 1 / head_dim,
                     f"sqrt(head_dim) = sqrt({head_dim})": math.sqrt(head_dim),
                     # the probe's q and k are equally long: which of the two lengths was read is not measured
                     f"1/sqrt(T) = 1/sqrt({seq}) (the sequence length, q's and k's alike in this probe, not "
                     "head_dim)": 1 / math.sqrt(seq)}
            chk.measured(f"your scores are scaled by {describe_factor(c, named)}; expected 1/sqrt(head_dim) = "
                         f"1/sqrt({head_dim}) = {1 / math.sqrt(head_dim):.3g}")
    elif swapped is not None and swapped[1] < 1e-3 and (straight is None or straight[1] > 1e-2):
        chk.diagnose("your scores are k·qᵀ (transposed scores): score[i, j] must be q_i·k_j, q @ k.transpose(-2, -1)")


def attention_cases(seed: int, batch: int, heads: int, seq: int, head_dim: int, dtype):
    """(label, q, k, v): self-attention, then queries that are the last few
    positions of a longer key sequence (the KV-cache situation)."""
    q = randn(batch, heads, seq, head_dim, seed=seed, dtype=dtype)
    k = randn(batch, heads, seq, head_dim, seed=seed + 1, dtype=dtype) * 1.5  # spread scores so a scale bug shows
    v = randn(batch, heads, seq, head_dim, seed=seed + 2, dtype=dtype)
    yield f"B={batch} H={heads} T={seq} hd={head_dim}", q, k, v
    yield f"last {seq - 3} queries of {seq} keys", q[:, :, 3:], k, v
    # Scores in the hundreds: exp() overflows float32 unless the softmax subtracts the row maximum.
    yield "large scores (q x 60)", q * 60, k, v


def check_causal_attention(causal_attention, *, seed: int = 0, batch: int = 2, heads: int = 3, seq: int = 7,
                           head_dim: int = 4, dtype=torch.float32) -> None:
    """causal_attention(q, k, v) against F.scaled_dot_product_attention, plus
    a causality probe: changing future keys/values leaves earlier outputs alone.
    On failure the learner's attention weights are read out and measured."""
    __tracebackhide__ = True
    chk = Check("causal_attention", expects="(batch, heads, q_len, head_dim) attention outputs")
    chk.axes = {"batch": batch, "heads": heads, "kv_len": seq, "head_dim": head_dim, "q_len": seq - 3}
    chk.result_axes = ("batch", "heads", "queries", "head_dim")

    def explain(err=None):
        explain_attention_weights(chk, causal_attention, seed, batch, heads, seq, head_dim, dtype)  # row 1's inputs
        return None

    for label, q, k, v in attention_cases(seed, batch, heads, seq, head_dim, dtype):
        mask = ref_mask(q.shape[-2], k.shape[-2])
        want = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        rectangular = q.shape[-2] < k.shape[-2] and chk.passed
        got = call_keeping_inputs(chk, causal_attention, q, k, v, on_error=(lambda err, tq=q.shape[-2]: (
            f"it fails only when there are fewer queries than keys (q_len={tq}, kv_len={seq}): the mask must be "
            f"(q_len, kv_len), causal_mask(q.shape[-2], k.shape[-2]), with query i at position kv_len - q_len + i"))
            if rectangular else explain)
        chk.compare(label, got, want, variants=_attention_variants(q, k, v))
    # Causality, whatever the formula: replace keys/values after position t.
    q, k, v = next(attention_cases(seed, batch, heads, seq, head_dim, dtype))[1:]
    t = seq // 2
    k2, v2 = k.clone(), v.clone()
    k2[:, :, t + 1:] += 5.0
    v2[:, :, t + 1:] -= 7.0
    a, b = chk.call(causal_attention, q, k, v), chk.call(causal_attention, q, k2, v2)
    finite = all(isinstance(o, torch.Tensor) and bool(torch.isfinite(o).all()) for o in (a, b))
    if finite and a.shape == b.shape == q.shape:  # NaN outputs are reported by the rows above, not as a leak
        chk.require(f"outputs 0..{t} ignore keys after {t}", torch.allclose(a[:, :, :t + 1], b[:, :, :t + 1], atol=1e-5),
                    "changing future keys/values changed earlier outputs")
    if chk.passed:
        _future_far_above(chk, causal_attention, q, k, v, t)
    cases = list(attention_cases(seed, batch, heads, seq, head_dim, dtype))
    chk.upstream(causal_attention, {"causal_mask": lambda q_len, kv_len=None: ref_mask(q_len, q_len if kv_len is None else kv_len)},
                 rerun=lambda: all(close_to(causal_attention(q_, k_, v_), F.scaled_dot_product_attention(
                     q_, k_, v_, attn_mask=ref_mask(q_.shape[-2], k_.shape[-2])), *tol_for(dtype)) for _, q_, k_, v_ in cases),
                 labels={"causal_mask": "exercise 1"})
    if not chk.passed and not chk.likely_bugs():
        explain()
    run_contract(chk, causal_attention, CAUSAL_ATTENTION)
    chk.finish()


def _future_far_above(chk: Check, causal_attention, q, k, v, t: int) -> None:
    """Keys after position t whose scores lie about 1e5 above every other key's: a masked key gets weight 0 whatever
    its score, which a mask of -inf gives and a finite one (-1e4 added, BERT's) does not."""
    queries = q.abs() + 0.5                                  # every query positive: q · k grows with k
    far = k.clone()
    far[:, :, t + 1:] = 2e5 / q.shape[-1] ** 0.5             # scores of at least 0.5 · 2e5 for every query
    a, b = chk.call(causal_attention, queries, k, v), chk.call(causal_attention, queries, far, v)
    if not all(isinstance(o, torch.Tensor) and o.shape == q.shape for o in (a, b)):
        return
    if not bool(torch.isfinite(b[:, :, :t + 1]).all()):
        chk.require(f"outputs 0..{t} finite when keys after {t} score about 1e5 above the rest", False,
                    "earlier outputs hold inf or nan")
        chk.candidates(f"outputs 0..{t} hold inf or nan once the keys after {t} score about 1e5 above the rest "
                       "(measured), though a masked key's score must not matter; candidates: the masked scores hold a "
                       "finite value (added or filled, not -inf), or the softmax overflows (exp taken without each "
                       "row's maximum subtracted), or both")
        return
    chk.require(f"outputs 0..{t} ignore keys after {t} that score about 1e5 above the rest",
                torch.allclose(a[:, :, :t + 1], b[:, :, :t + 1], atol=1e-5), "the far higher future keys changed them",
                diagnosis=f"a masked key still gets weight when its score is high enough (measured: outputs 0..{t} "
                          f"change once the keys after {t} score about 1e5 above the rest, and not when those keys "
                          "move by 5, the row above): the masked scores hold a finite value, added or filled, which a "
                          "large score outweighs; fill them with -inf, scores.masked_fill(~mask, float('-inf'))")


def _mha_ref(x, w_q, w_k, w_v, w_o, n_heads):
    q, k, v = (_split_ref(F.linear(x, w), n_heads) for w in (w_q, w_k, w_v))  # each (B, H, T, hd)
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)           # (B, H, T, hd)
    return F.linear(y.permute(0, 2, 1, 3).flatten(2), w_o)                   # (B, T, d)


def check_self_attention(self_attention, *, seed: int = 0, batch: int = 2, seq: int = 6, n_heads: int = 3,
                         head_dim: int = 4, dtype=torch.float32) -> None:
    """self_attention(x, w_q, w_k, w_v, w_o, n_heads): projections, heads,
    causal attention, merge and output projection, against torch built-ins."""
    __tracebackhide__ = True
    d = n_heads * head_dim
    x = randn(batch, seq, d, seed=seed, dtype=dtype)
    w_q, w_k, w_v, w_o = (randn(d, d, seed=seed + i, dtype=dtype) / math.sqrt(d) for i in range(1, 5))
    chk = Check("self_attention", expects=f"(batch, seq, d_model) = {(batch, seq, d)}")
    attended = F.scaled_dot_product_attention(*(_split_ref(F.linear(x, w), n_heads) for w in (w_q, w_k, w_v)),
                                              is_causal=True)  # (B, H, T, hd): what merge_heads takes
    handed = lambda err=None: _merge_heads_handed(self_attention, (x, w_q, w_k, w_v, w_o, n_heads), attended)  # noqa: E731
    got = chk.call(self_attention, x, w_q, w_k, w_v, w_o, n_heads, on_error=handed)

    def with_layout(split, merge):
        q, k, v = (split(F.linear(x, w)) for w in (w_q, w_k, w_v))
        return F.linear(merge(F.scaled_dot_product_attention(q, k, v, is_causal=True)), w_o)

    def with_qkv(wq, wk, wv, heads=n_heads):
        q, k, v = (_split_ref(F.linear(x, w), heads) for w in (wq, wk, wv))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)   # (B, heads, T, d / heads)
        return F.linear(y.permute(0, 2, 1, 3).flatten(2), w_o)

    good_split = lambda t: _split_ref(t, n_heads)              # noqa: E731  (B, T, d) -> (B, H, T, hd)
    good_merge = lambda y: y.permute(0, 2, 1, 3).flatten(2)   # noqa: E731  (B, H, T, hd) -> (B, T, d)

    def transposed(qkv=True, out=True):
        q, k, v = (good_split(x @ w if qkv else F.linear(x, w)) for w in (w_q, w_k, w_v))
        y = good_merge(F.scaled_dot_product_attention(q, k, v, is_causal=True))
        return y @ w_o if out else F.linear(y, w_o)
    chk.compare(f"x {tuple(x.shape)}, {n_heads} heads", got, _mha_ref(x, w_q, w_k, w_v, w_o, n_heads), variants={
        "wrong layout after reshape: (B, T, d) viewed directly as (B, H, T, hd); reshape to (B, T, H, hd) then "
        "transpose(1, 2)": lambda: with_layout(lambda t: t.reshape(batch, n_heads, seq, head_dim), good_merge),
        "wrong layout after reshape: heads merged with reshape(B, T, d) without transpose(1, 2) first":
            lambda: with_layout(good_split, lambda y: y.reshape(batch, seq, d)),
        "transposed weight in the q/k/v projections: nn.Linear weights are [d_out, d_in], so a projection is "
        "x @ W.T": lambda: transposed(out=False),
        "transposed weight in every projection: nn.Linear weights are [d_out, d_in], so a projection is x @ W.T":
            lambda: transposed(out=True),
        "transposed weight in the output projection: your output is y @ w_o; nn.Linear's [d_out, d_in] weight is "
        "applied as y @ w_o.T, F.linear(y, w_o)": lambda: transposed(qkv=False),
        "key and value projections swapped: k = x @ w_k.T, v = x @ w_v.T": lambda: with_qkv(w_q, w_v, w_k),
        "query and key projections swapped: q = x @ w_q.T, k = x @ w_k.T (the scores come out transposed, and the "
        "causal mask then keeps the other triangle of them)": lambda: with_qkv(w_k, w_q, w_v),
        "keys computed from the query projection (w_q) instead of w_k": lambda: with_qkv(w_q, w_q, w_v),
        "one head: the features must be split into n_heads heads of head_dim = d_model // n_heads":
            lambda: with_qkv(w_q, w_k, w_v, heads=1),
        "output projection w_o missing": lambda: good_merge(F.scaled_dot_product_attention(
            *(good_split(F.linear(x, w)) for w in (w_q, w_k, w_v)), is_causal=True)),
        "no causal mask: every token sees the future": lambda: F.linear(good_merge(F.scaled_dot_product_attention(
            *(good_split(F.linear(x, w)) for w in (w_q, w_k, w_v)))), w_o),
    })
    want = _mha_ref(x, w_q, w_k, w_v, w_o, n_heads)
    if not chk.passed and (said := handed()) is not None:
        chk.diagnose(said)
    chk.upstream(self_attention, {
        "split_heads": good_split_any, "merge_heads": good_merge,
        "causal_attention": lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=ref_mask(q.shape[-2], k.shape[-2])),
    }, rerun=lambda: close_to(self_attention(x, w_q, w_k, w_v, w_o, n_heads), want, *tol_for(dtype)),
        labels={"split_heads": "exercise 2", "merge_heads": "exercise 2", "causal_attention": "exercise 3"})
    run_contract(chk, self_attention, SELF_ATTENTION)
    chk.finish()


def _merge_heads_handed(self_attention, args: tuple, attended: torch.Tensor) -> str | None:
    """What the learner's self_attention hands its merge_heads, set beside the
    attention output merge_heads takes, (B, H, T, hd): that output with axes 1
    and 2 exchanged (a transpose taken before the merge, which transposes
    again) is named; anything else is left to the other lines."""
    received = first_call_arguments(self_attention, "merge_heads", lambda: self_attention(*args))
    given = next(iter(received.values()), None) if received else None
    swapped = attended.transpose(1, 2)
    if not isinstance(given, torch.Tensor) or given.shape == attended.shape or given.shape != swapped.shape \
            or not close_to(given, swapped, *tol_for(given.dtype)):
        return None
    return (f"your self_attention hands merge_heads the attention output with axes 1 and 2 exchanged (measured: "
            f"its merge_heads call gets {tuple(given.shape)}, the attention output (B, H, T, hd) = "
            f"{tuple(attended.shape)} transposed): merge_heads takes (B, H, T, hd) and makes the (B, T, H, hd) order "
            "itself; hand it the attention output as it is")


def split_heads_steps(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    B, T, d = x.shape
    return x.reshape(B, T, n_heads, d // n_heads).transpose(1, 2)  # (B, H, T, hd)


def merge_heads_steps(y: torch.Tensor) -> torch.Tensor:
    B, H, T, hd = y.shape
    return y.transpose(1, 2).reshape(B, T, H * hd)


def self_attention_steps(x, w_q, w_k, w_v, w_o, n_heads: int) -> torch.Tensor:
    q, k, v = (split_heads_steps(F.linear(x, w), n_heads) for w in (w_q, w_k, w_v))
    return F.linear(merge_heads_steps(attention_steps(q, k, v)), w_o)


def _mask_cases():
    return [(f"q_len={q}, kv_len={kv}", (q, kv), {}) for q, kv in defaults(check_causal_mask)["cases"]]


def _split_cases():
    p = defaults(check_split_merge)
    x = randn(p["batch"], p["seq"], p["n_heads"] * p["head_dim"], seed=p["seed"])
    return [("split", (x, p["n_heads"]), {})]


def _merge_cases():
    p = defaults(check_split_merge)
    return [("merge", (randn(p["batch"], p["n_heads"], p["seq"], p["head_dim"], seed=p["seed"] + 1),), {})]


def _attention_contract_cases():
    p = defaults(check_causal_attention)
    return [(label, (q, k, v), {}) for label, q, k, v in
            attention_cases(p["seed"], p["batch"], p["heads"], p["seq"], p["head_dim"], p["dtype"])]


def _self_attention_cases():
    p = defaults(check_self_attention)
    d = p["n_heads"] * p["head_dim"]
    x = randn(p["batch"], p["seq"], d, seed=p["seed"], dtype=p["dtype"])
    weights = tuple(randn(d, d, seed=p["seed"] + i, dtype=p["dtype"]) / math.sqrt(d) for i in range(1, 5))
    return [("self-attention", (x, *weights, p["n_heads"]), {})]


CAUSAL_MASK = Contract("causal_mask", causal_mask_steps, _mask_cases, names=("q_len", "kv_len"), dtypes=())
# Pure layout and plain matrix products: float64 shows a fixed dtype as well as bfloat16 would, at a third of the cost.
SPLIT_HEADS = Contract("split_heads", split_heads_steps, _split_cases, names=("x", "n_heads"), batch=("x",),
                       views=("x",), grad=("x",), dtypes=(torch.float64,), params=(("n_heads", 1),))
MERGE_HEADS = Contract("merge_heads", merge_heads_steps, _merge_cases, names=("y",), batch=("y",), views=("y",),
                       grad=("y",), dtypes=(torch.float64,))


def _far_below_zero(a: dict) -> dict:
    """q + c and k - c along the all-ones direction, in float64: every score
    gains -c² · sqrt(hd) (about -10^5) plus terms linear in c, so each query's
    allowed scores all lie far below zero while their gaps stay ordinary."""
    q, k, v = (a[n].detach().double() for n in ("q", "k", "v"))
    c = math.sqrt(1e5 / math.sqrt(q.shape[-1]))
    return {**a, "q": q + c, "k": k - c, "v": v}


def _wider_heads(a: dict) -> dict:
    """The visible q, k and v with their first two features repeated: head_dim 6. At the visible 4 a scale written
    as hd / 2 (`hd ** 1/2` parses so) equals sqrt(hd); at no other size does it."""
    return {**a, **{n: torch.cat((a[n], a[n][..., :2]), dim=-1) for n in ("q", "k", "v")}}


CAUSAL_ATTENTION = Contract("causal_attention", attention_steps, _attention_contract_cases, names=("q", "k", "v"),
                            batch=("q", "k", "v"), views=("q", "k", "v"), grad=("q", "k", "v"), scale=("q",),
                            dtypes=(torch.float64, torch.bfloat16, torch.float16), edges=(
                                Edge("scores far below zero", "for queries and keys whose allowed scores all lie near "
                                     "-10^5 (q + c and k - c, float64): the masked positions must still get no weight",
                                     _far_below_zero),
                                Edge("head_dim 6", "for head_dim 6 (the visible q, k and v with their first two "
                                     "features repeated)", _wider_heads)), elsewhere=True)
SELF_ATTENTION = Contract("self_attention", self_attention_steps, _self_attention_cases,
                          names=("x", "w_q", "w_k", "w_v", "w_o", "n_heads"), batch=("x",), views=("x",),
                          grad=("x", "w_q", "w_k", "w_v", "w_o"), dtypes=(torch.float64,), params=(("n_heads", 1),))
