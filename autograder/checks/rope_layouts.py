"""Checks for notebook 04's checkpoint exercises: weights stored in the
interleaved RoPE layout (Meta's original Llama checkpoints, GGUF files)
converted to the half layout tinylm's rotate_half expects, the rows of each
head's query and key projections reordered.

The reference for the interleaved layout is Meta's own rotation, written
apart from the half pairing: features (2i, 2i+1) as one complex number."""
from __future__ import annotations

import torch
import torch.nn.functional as F

import itertools
import re

from .contracts import call_keeping_inputs
from ..learner_values import describe
from .framework.check import Check
from ..diagnosis_record import candidates
from .framework.calling import guarded_call
from .framework.measure import randn
from .references.rope import ref_angles, ref_rotate


def meta_rotate(x: torch.Tensor, start_pos: int = 0, theta: float = 10000.0) -> torch.Tensor:
    """The interleaved rotation of Meta's Llama code: features (2i, 2i+1) of x (..., T, hd) as the complex number
    x[2i] + j·x[2i+1], turned by pos · theta^(-2i/hd). Written apart from ref_rotate's half pairing."""
    hd, T = x.shape[-1], x.shape[-2]
    z = torch.view_as_complex(x.double().reshape(*x.shape[:-1], hd // 2, 2).contiguous())  # (..., T, hd/2)
    angles = ref_angles(hd, torch.arange(start_pos, start_pos + T), theta)                  # (T, hd/2)
    return torch.view_as_real(z * torch.polar(torch.ones_like(angles), angles)).flatten(-2).to(x.dtype)


def evens_then_odds(n: int) -> torch.Tensor:
    """Indices 0, 2, 4, ..., 1, 3, 5, ...: interleaved pair i = (2i, 2i+1) lands at (i, i + n/2)."""
    return torch.cat((torch.arange(0, n, 2), torch.arange(1, n, 2)))


def half_rows(n_heads: int, head_dim: int) -> torch.Tensor:
    """For each row of a weight in the half layout, the row of the interleaved weight it comes from: each head's
    block of head_dim rows reordered evens then odds, the heads left in place."""
    return torch.cat([h * head_dim + evens_then_odds(head_dim) for h in range(n_heads)])


def interleaved_rows(n_heads: int, head_dim: int) -> torch.Tensor:
    """The inverse of half_rows: from the half layout back to the interleaved one."""
    return torch.argsort(half_rows(n_heads, head_dim))


# Row orders a wrong conversion gives, each a function of (n_heads, head_dim) -> source row of every output row.
WRONG_ROW_ORDERS = {
    "the permutation taken over the whole matrix instead of per head (evens then odds of all n_heads · head_dim rows "
    "mixes the heads); reshape to (n_heads, head_dim/2, 2, d_in), swap the middle axes (transpose(1, 2)) and reshape "
    "back, so each head is reordered on its own":
        lambda nh, hd: evens_then_odds(nh * hd),
    "the inverse permutation applied (half -> interleaved, what a converter to Meta's or GGUF's layout does): row "
    "i + head_dim/2 of a head must come from row 2i + 1, i.e. view(n_heads, head_dim/2, 2, d_in).transpose(1, 2), "
    "not view(n_heads, 2, head_dim/2, d_in).transpose(1, 2)": interleaved_rows,
    "the rows left in Meta's order (no permutation): the half-split rotation then pairs the wrong features":
        lambda nh, hd: torch.arange(nh * hd),
}


def _row_order(out, w) -> torch.Tensor | None:
    """Which row of w each row of `out` is (measured: w's rows all differ), or None when out is not w's rows
    reordered."""
    if not isinstance(out, torch.Tensor) or out.shape != w.shape:
        return None
    same = (out.double()[:, None, :] - w.double()[None, :, :]).abs().amax(-1) < 1e-6  # (rows_out, rows_w)
    if not bool((same.sum(-1) == 1).all()):
        return None
    return same.float().argmax(-1)


def _named_row_order(order: torch.Tensor, n_heads: int, head_dim: int) -> str | None:
    for bug, rows in WRONG_ROW_ORDERS.items():
        if torch.equal(order, rows(n_heads, head_dim)):
            return bug
    return None


AXIS_WORDS = ("head", "pair", "member of the pair")


def _axes_read(order: torch.Tensor, n_heads: int, head_dim: int) -> str | None:
    """The order in which the axes of the (n_heads, head_dim/2, 2) view of the rows are read to give `order`, in
    words, when exactly one order other than the half layout's gives it."""
    view = torch.arange(n_heads * head_dim).view(n_heads, head_dim // 2, 2)
    fits = [perm for perm in itertools.permutations(range(3)) if perm != (0, 2, 1)
            and torch.equal(view.permute(perm).reshape(-1), order)]
    return ", ".join(AXIS_WORDS[a] for a in fits[0]) if len(fits) == 1 else None


def _explain_rows(chk: Check, fn, n_heads: int, head_dim: int, d_in: int) -> None:
    """Measure the learner's function on a weight whose rows each hold their own index: the row order it gives,
    named when it is a known wrong one, else said as measured."""
    rows = n_heads * head_dim
    w = torch.arange(rows, dtype=torch.float32)[:, None] * 100 + torch.arange(d_in, dtype=torch.float32)  # row r: 100r + col
    out = chk.probe(fn, w.clone(), n_heads)
    if not isinstance(out, torch.Tensor) or out.shape != w.shape:
        return
    order = _row_order(out, w)
    if order is None:
        cols = _row_order(out.T, w.T)
        if cols is not None and not torch.equal(cols, torch.arange(d_in)):
            chk.diagnose("the columns (d_in axis) reordered instead of the rows: nn.Linear weights are [out, in], and "
                         "the q or k features that RoPE pairs are the rows (measured on a weight whose entries name "
                         "their row and column)")
        elif cols is None:
            _entries_moved_across(chk, out, w)
        return
    bug = _named_row_order(order, n_heads, head_dim)
    if bug:
        chk.diagnose(f"{bug} (measured: your rows come in exactly that order, on a weight whose row r names r)")
        return
    axes = _axes_read(order, n_heads, head_dim)
    if axes:
        chk.diagnose(f"your rows are the interleaved weight viewed as (n_heads, head_dim/2, 2) = (head, pair, "
                     f"member of the pair) and read with its axes in the order ({axes}) (measured: exactly your row "
                     "order, on a weight whose row r names r); the half layout reads them (head, member of the pair, "
                     "pair), view(n_heads, head_dim // 2, 2, d_in).transpose(1, 2): the heads' axis stays first, so "
                     "each head keeps its own block of rows")
        return
    crossed = any(int(order[r]) // head_dim != r // head_dim for r in range(rows))
    chk.measured(f"your function reorders the rows (on a weight whose row r names r): output rows 0..{head_dim - 1} "
                 f"(head 0) come from rows {order[:head_dim].tolist()}, where the half layout takes "
                 f"{half_rows(n_heads, head_dim)[:head_dim].tolist()}"
                 + ("; some rows move to another head's block" if crossed else ""))


def _entries_moved_across(chk: Check, out: torch.Tensor, w: torch.Tensor) -> None:
    """Every entry of w once, but rows that mix entries of several rows and columns: what row 0 holds, measured
    on a weight whose entry at row r, column c is 100r + c, and the reorderings that give that as candidates."""
    if not torch.equal(out.flatten().sort().values, w.flatten().sort().values):
        return
    first = out[0].long()
    rows, cols = sorted(set((first // 100).tolist())), (first % 100).tolist()
    if len(rows) < 2:
        return
    chk.candidates(f"your output holds every entry of w once, but a row of it mixes entries of several rows of w "
                   f"(measured on a weight whose entry at row r, column c is 100r + c: your row 0 holds entries of "
                   f"rows {rows} from columns {cols}); candidates: an axis swap that moves the d_in axis among the "
                   "row axes (transpose(-2, -1) or .mT of the (n_heads, head_dim/2, 2, d_in) view, where the two "
                   "pair axes, 1 and 2, are the ones to swap), or a reshape that splits d_in")


def check_interleaved_to_half(interleaved_to_half, *, seed: int = 0, n_heads: int = 3, head_dim: int = 8,
                              d_in: int = 10, batch: int = 2, seq: int = 5, start_pos: int = 3,
                              theta: float = 10000.0, dtype=torch.float32) -> None:
    """interleaved_to_half(w, n_heads): a q or k projection weight (n_heads · head_dim, d_in) of a checkpoint in
    the interleaved RoPE layout, its rows reordered per head into the half-split layout. Checked by what the
    weight is for: Meta's interleaved rotation of x @ w.T equals the half rotation of x @ yours.T (features
    evens then odds) in every head, and the inverse reordering gives w back."""
    __tracebackhide__ = True
    chk = Check("interleaved_to_half", expects=f"a tensor shaped like w (n_heads · head_dim, d_in) = "
                                               f"{(n_heads * head_dim, d_in)}, w's rows reordered")
    chk.axes = {"n_heads": n_heads, "head_dim": head_dim, "d_in": d_in, "n_heads·head_dim": n_heads * head_dim}
    w = randn(n_heads * head_dim, d_in, seed=seed, dtype=dtype)
    x = randn(batch, seq, d_in, seed=seed + 1, dtype=dtype)

    def heads(weight):  # (B, T, d_in) -> (B, n_heads, T, head_dim)
        return (x @ weight.T).view(batch, seq, n_heads, head_dim).transpose(1, 2)
    got = call_keeping_inputs(chk, interleaved_to_half, w, n_heads,
                              on_error=_shape_read_swapped(interleaved_to_half, w, n_heads, head_dim))
    want_rot = meta_rotate(heads(w), start_pos, theta)[..., evens_then_odds(head_dim)]  # (B, nh, T, hd)
    if isinstance(got, torch.Tensor) and got.shape == w.shape:
        chk.compare(f"{n_heads} heads of {head_dim}: half rotation of x @ yours.T = Meta's rotation of x @ w.T",
                    ref_rotate(heads(got), start_pos, theta), want_rot)
        back = got[interleaved_rows(n_heads, head_dim)]
        chk.compare("inverse: your rows put back in the interleaved order give w", back, w)
    else:
        chk.compare("reordered weight", got, w[half_rows(n_heads, head_dim)])
    if not chk.passed:
        _explain_rows(chk, interleaved_to_half, n_heads, head_dim, d_in)
    chk.finish()


def _shape_read_swapped(fn, w: torch.Tensor, n_heads: int, head_dim: int):
    """An error hint for a reshape that failed: when the size it asked for last, where a row's d_in entries go, is
    w.shape[0] (the rows) and not w.shape[1], that is measured, and whether the same function gives the right rows of
    a square weight, whose two sizes agree whichever way they are read; the code that did it stays a candidate (the
    sizes unpacked swapped, or w.shape[0] written for d_in, give the same error and the same square result)."""
    def hint(err):
        found = re.search(r"shape '\[([-\d, ]+)\]' is invalid for input of size (\d+)", str(err))
        rows, d_in = w.shape
        if not found or rows == d_in:
            return None
        asked = [int(v) for v in found.group(1).split(",")]
        if asked[-1] != rows or int(found.group(2)) != w.numel():
            return None
        fact = (f"the reshape that raised asks for {asked} of w's {w.numel()} entries: its last size, where a row's "
                f"d_in entries go, is {rows} = w.shape[0], the n_heads·head_dim rows, while d_in = w.shape[1] = "
                f"{d_in}")
        square = randn(rows, rows, seed=7, dtype=w.dtype)
        try:
            out = guarded_call(fn, (square.clone(), n_heads))
        except Exception:  # noqa: BLE001: no confirmation; the measured sizes stay a fact with its candidate
            out = None
        right = square[half_rows(n_heads, head_dim)]
        if isinstance(out, torch.Tensor) and out.shape == square.shape and torch.equal(out, right):
            fact += (f"; on a square weight {tuple(square.shape)}, where w.shape[0] = w.shape[1], your function "
                     "returns the right rows")
        return candidates(f"{fact} (candidates: w's two sizes unpacked the wrong way round, d_in, rows = w.shape "
                          "where w is (n_heads · head_dim, d_in); w.shape[0] used where d_in belongs)")
    return hint


def _meta_attention(x, wq, wk, wv, wo, n_heads, n_kv, rotate):
    """Llama attention with the given rotation: x (B, T, d) -> (B, T, d)."""
    B, T, _ = x.shape
    hd = wq.shape[0] // n_heads

    def heads(weight, n):
        return (x @ weight.T).view(B, T, n, hd).transpose(1, 2)  # (B, n, T, hd)
    q, k, v = rotate(heads(wq, n_heads)), rotate(heads(wk, n_kv)), heads(wv, n_kv)
    k, v = k.repeat_interleave(n_heads // n_kv, dim=1), v.repeat_interleave(n_heads // n_kv, dim=1)
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, nh, T, hd)
    return y.transpose(1, 2).reshape(B, T, n_heads * hd) @ wo.T


def _weight_causes(name: str, got, given: torch.Tensor, n_heads: int, n_kv: int, head_dim: int) -> list[str]:
    """What the learner's returned weight `name` measurably is, as causes (compared with the weight it was given)."""
    if not isinstance(got, torch.Tensor) or got.shape != given.shape:
        return []
    same = lambda t: torch.allclose(got.double(), t.double(), atol=1e-6, rtol=0)  # noqa: E731
    rotated = {"q_proj": ("wq", n_heads, "n_heads"), "k_proj": ("wk", n_kv, "n_kv_heads")}
    if name in rotated:
        source, n, field = rotated[name]
        if same(given):
            forgot = ("k not permuted (forgetting k): the keys are rotated too, so wk's rows need the same per-head "
                      "reordering as wq's" if name == "k_proj" else
                      "q not permuted: the queries are rotated, so wq's rows need the per-head reordering")
            return [f"{forgot}, with {field} = {n} heads (measured: your {name} is {source} unchanged)"]
        if name == "k_proj" and n != n_heads and given.shape[0] % n_heads == 0 and (given.shape[0] // n_heads) % 2 == 0 \
                and same(given[half_rows(n_heads, given.shape[0] // n_heads)]):
            return [f"k permuted with n_heads = {n_heads} heads instead of n_kv_heads = {n_kv}: wk holds "
                    f"n_kv_heads · head_dim rows, one block per key/value head (measured: your k_proj is wk reordered "
                    f"as {n_heads} blocks)"]
        for bug, rows in WRONG_ROW_ORDERS.items():
            if same(given[rows(n, head_dim)]):
                return [f"{bug} (measured: your {name} is {source} reordered that way)"]
        per, rest = divmod(given.shape[1], n)
        if not rest and per % 2 == 0 and same(given[:, half_rows(n, per)]):
            return [f"{source}'s columns (its input features) are permuted instead of its rows (measured: your {name} "
                    f"is {source} with its rows unchanged and its {given.shape[1]} columns reordered evens then odds "
                    f"in {n} blocks): a Linear weight is [d_out, d_in] and the rotated pairs are output features, "
                    f"rows, so permute the rows, interleaved_to_half({source}, {field})"]
        return []
    source = {"v_proj": "wv", "o_proj": "wo"}[name]
    if same(given):
        return []
    what = ("values are never rotated, so wv's rows stay as they are" if name == "v_proj" else
            "the attention output is in v's order, which nothing reordered, so wo stays as it is")
    per_head, rest = divmod(given.shape[0], n_kv if name == "v_proj" else n_heads)
    if not rest and per_head % 2 == 0 and same(given[half_rows(given.shape[0] // per_head, per_head)]):
        return [f"{name[0]} permuted too: {what} (measured: your {name} is {source} with its rows reordered per "
                "head)"]
    if name == "o_proj" and same(given[:, half_rows(n_heads, head_dim)]):
        return [f"o permuted too: {what} (measured: your o_proj is wo with its columns reordered per head)"]
    return []


def _meta_to_hf_case(chk: Check, meta_to_hf_attention, seed: int, n_heads: int, n_kv_heads: int, head_dim: int,
                     d_model: int, batch: int, seq: int, theta: float, passed_with: tuple[int, int] | None) -> bool:
    """One grouping of heads: the rows of the attention and of each weight; passed_with: the first grouping's
    (n_heads, n_kv_heads), which passed, when this is the second (its rows are labelled by its grouping). False
    when the result is not four weights (nothing more to measure)."""
    first = passed_with is None
    tag = "" if first else f" ({n_heads} query heads, {n_kv_heads} kv head{'s' if n_kv_heads > 1 else ''})"
    given = {"q_proj": randn(n_heads * head_dim, d_model, seed=seed),
             "k_proj": randn(n_kv_heads * head_dim, d_model, seed=seed + 1),
             "v_proj": randn(n_kv_heads * head_dim, d_model, seed=seed + 2),
             "o_proj": randn(d_model, n_heads * head_dim, seed=seed + 3) / 2}
    x = randn(batch, seq, d_model, seed=seed + 4)
    group = None if first else candidates(
        f"it passes with {passed_with[0]} query heads over {passed_with[1]} kv heads, where the group size n_heads "
        f"// n_kv_heads equals n_kv_heads, and fails with {n_heads} over {n_kv_heads}, where they differ "
        f"({n_heads // n_kv_heads} and {n_kv_heads}); candidates: the group size used where n_kv_heads belongs "
        "(keys are permuted in n_kv_heads blocks, queries in n_heads blocks), or the reverse")
    out = call_keeping_inputs(chk, meta_to_hf_attention, *given.values(), n_heads, n_kv_heads,
                              on_error=None if first else lambda err: group)
    ok = chk.require("returns four weights" + tag, isinstance(out, (tuple, list)) and len(out) == 4
                     and all(isinstance(t, torch.Tensor) for t in out),
                     f"returned {describe(out)}", diagnosis="return the four weights as a tuple: "
                     "return q_proj, k_proj, v_proj, o_proj")
    if not ok:
        return False
    got = dict(zip(given, out))
    shapes = all(got[n].shape == given[n].shape for n in given)
    want = _meta_attention(x, *given.values(), n_heads, n_kv_heads, lambda t: meta_rotate(t, 0, theta))
    if shapes:
        heads = f"{n_heads} query heads, {n_kv_heads} kv head{'s' if n_kv_heads > 1 else ''}"
        chk.compare(f"attention with the half rotation = Meta's ({heads})",
                    _meta_attention(x, *got.values(), n_heads, n_kv_heads, lambda t: ref_rotate(t, 0, theta)),
                    want)
    hd = head_dim
    right = {"q_proj": given["q_proj"][half_rows(n_heads, hd)], "k_proj": given["k_proj"][half_rows(n_kv_heads, hd)],
             "v_proj": given["v_proj"], "o_proj": given["o_proj"]}
    split = _split_elsewhere(got, right)
    for name in given:
        if not chk.compare(name + tag, got[name], right[name], variants=split.get(name)):
            for cause in _weight_causes(name, got[name], given[name], n_heads, n_kv_heads, hd):
                chk.diagnose(cause)
    if not first and not chk.passed and not chk.diagnoses:
        chk.candidates(group.text)
    return True


def _split_elsewhere(got: dict, right: dict) -> dict:
    """{name: variants} for q_proj and k_proj when they are the right rows in
    the right order, cut at another row (a joint conversion split in halves):
    each output's variant is the right rows cut where the learner's were."""
    q, k = got["q_proj"], got["k_proj"]
    rows = right["q_proj"].shape[0]
    joined = torch.cat((right["q_proj"], right["k_proj"]))
    if q.dim() != 2 or k.dim() != 2 or q.shape[0] == rows or q.shape[1] != joined.shape[1] or \
            k.shape[1] != joined.shape[1] or q.shape[0] + k.shape[0] != joined.shape[0]:
        return {}
    cut = q.shape[0]
    halves = f": {cut} is half of their {joined.shape[0]} rows, as chunk(2) cuts them" if 2 * cut == joined.shape[0] \
        else ""
    said = (f"q_proj and k_proj are split at row {cut}, not {rows} (measured: q_proj with k_proj after it is the right "
            f"q_proj with the right k_proj after it, the rows in order){halves}; the queries have n_heads·head_dim = "
            f"{rows} rows and the keys n_kv_heads·head_dim = {joined.shape[0] - rows}: split at {rows}, or convert "
            "each alone")
    return {"q_proj": {said: lambda: joined[:cut]}, "k_proj": {said: lambda: joined[cut:]}}


def check_meta_to_hf_attention(meta_to_hf_attention, *, seed: int = 0, n_heads: int = 4, n_kv_heads: int = 2,
                               head_dim: int = 8, d_model: int = 24, batch: int = 3, seq: int = 5,
                               theta: float = 10000.0) -> None:
    """meta_to_hf_attention(wq, wk, wv, wo, n_heads, n_kv_heads) -> (q_proj, k_proj, v_proj, o_proj): one layer of
    a checkpoint in the interleaved layout, converted for the half rotation. The attention built from the returned
    weights with the half rotation equals Meta's attention (interleaved rotation) on the given weights."""
    __tracebackhide__ = True
    chk = Check("meta_to_hf_attention", expects="a tuple (q_proj, k_proj, v_proj, o_proj) of weights shaped like "
                                                "(wq, wk, wv, wo)")
    chk.axes = {"n_heads": n_heads, "n_kv_heads": n_kv_heads, "head_dim": head_dim, "d_model": d_model}
    # A second grouping whose group size n_heads // n_kv_heads differs from n_kv_heads: in the first the two agree
    # (4 over 2), so a key permutation built from the wrong one of them shows only here.
    # Only a conversion right on the first is tried on the second, so a mistake the first shows is told once.
    if _meta_to_hf_case(chk, meta_to_hf_attention, seed, n_heads, n_kv_heads, head_dim, d_model, batch, seq, theta,
                        passed_with=None) and chk.passed and n_heads // n_kv_heads == n_kv_heads:
        _meta_to_hf_case(chk, meta_to_hf_attention, seed, 3 * n_kv_heads, n_kv_heads, head_dim, d_model, batch, seq,
                         theta, passed_with=(n_heads, n_kv_heads))
    if chk.passed and n_kv_heads > 1:  # one kv head (multi-query attention): its keys are rotated, and permuted, too
        _meta_to_hf_case(chk, meta_to_hf_attention, seed, n_heads, 1, head_dim, d_model, batch, seq, theta,
                         passed_with=(n_heads, n_kv_heads))
    chk.finish()
