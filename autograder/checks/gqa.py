"""Checks for notebook 07: grouped-query attention.

Reference: F.scaled_dot_product_attention(enable_gqa=True), which maps query
head h to kv head h // (n_heads // n_kv_heads), and torch's repeat_interleave.
"""
from __future__ import annotations

import re

import torch
import torch.nn.functional as F

from .contracts import Contract, defaults, run_contract
from ..diagnosis_record import Evidence, candidates, confirmed, measured
from ..learner_values import known_sizes, shown_size
from .framework.check import Check
from .framework.failure import CheckFailed
from .framework.measure import randn
from .references.attention import attention_steps, repeat_kv_steps
from .references.attention_step import attention_step_check
from .references.heads import TILED, head_mismatch_fact, ref_repeat_kv
from .references.hints import call_with_hints, finish_with_upstream
from .spies import attention_operands



def head_sources(got: torch.Tensor, x: torch.Tensor) -> list | None:
    """For each head of `got` (B, H, T, hd), the head of x (B, n_kv, T, hd)
    it is a copy of (None for a head that copies none); None if shapes differ."""
    if not isinstance(got, torch.Tensor) or got.dim() != 4 or got.shape[0] != x.shape[0] or got.shape[2:] != x.shape[2:]:
        return None
    g = got.detach().cpu().double()
    return [next((j for j in range(x.shape[1]) if torch.allclose(g[:, h], x[:, j].double(), atol=1e-6)), None)
            for h in range(got.shape[1])]

# Matched against the learner's own error: torch's text for expanding an axis
# whose size is not 1.
EXPAND_SIZES = re.compile(r"Target sizes: \[([-\d, ]+)\]\.\s+Tensor sizes: \[([\d, ]+)\]")


def _expand_hint(error: str) -> Evidence | None:
    """What an expand that raised was asked, read from torch's error: with no axis of size 1 in the tensor the
    missing unsqueeze is the cause; with one, the sizes asked do not line up with the tensor's axes (the same
    error), and that is what is said."""
    found = EXPAND_SIZES.search(error)
    if found is None:
        return None
    target, tensor = ([int(n) for n in group.split(",") if n.strip()] for group in found.groups())
    if 1 not in tensor:
        return confirmed(f"expand can only grow an axis of size 1, and your tensor of sizes {tensor} has none "
                         "(measured: the sizes in the error): insert one first, "
                         "x[:, :, None].expand(B, n_kv, n_rep, T, hd), then reshape")
    tensor = [1] * (len(target) - len(tensor)) + tensor  # expand may add leading axes
    asked = [(i, t, n) for i, (t, n) in enumerate(zip(target, tensor)) if n != 1 and t not in (n, -1)]
    if not asked:
        return None
    i, t, n = asked[0]
    ones = ", ".join(f"dim {j}, asked for {target[j]}" for j, m in enumerate(tensor) if m == 1)
    grown = [j for j, m in enumerate(tensor) if m == 1]
    kept_asked = [size for j, size in enumerate(target) if j not in grown]
    kept_have = [m for j, m in enumerate(tensor) if j not in grown]
    if sorted(kept_asked) == sorted(kept_have):
        # the sizes are the tensor's own, in another order: the unsqueeze and the expand are right as written, the
        # sizes passed to them are not
        return candidates(f"expand was asked for sizes {target} of a tensor of sizes {tensor}: apart from the new "
                          f"axis, the sizes asked are the tensor's own in another order (dim {i} has {n} entries "
                          f"where {t} are asked); candidates: the names were read from x.shape in another order "
                          "than (B, n_kv, T, hd), or expand is given them in another order than (B, n_kv, n_rep, T, "
                          "hd)")
    return measured(f"expand was asked for sizes {target} of a tensor of sizes {tensor}: dim {i} has {n} entries "
                    f"where {t} are asked, and only an axis of size 1 grows (yours: {ones}); each size lines up "
                    "with its own axis, n_rep with the new one: x[:, :, None].expand(B, n_kv, n_rep, T, hd), then "
                    "reshape")


EXPAND_HINT = (r"expanded size|must match the existing size", _expand_hint)


def _heads_returned_words(found: list[tuple[str, int, int]]) -> str:
    """Another number of heads returned, said once for every (heads, n_kv, n_rep) it was measured at."""
    if len(found) == 1:
        (heads, n_kv, n_rep), = found
        return (f"{heads} heads returned for n_kv={n_kv}, n_rep={n_rep}: each of the n_kv kv heads is repeated n_rep "
                f"times, n_kv * n_rep = {n_kv * n_rep} heads")
    each = " and ".join(f"{heads} for n_kv={n_kv}, n_rep={n_rep} (n_kv * n_rep = {n_kv * n_rep})"
                        for heads, n_kv, n_rep in found)
    return f"heads returned: {each}; each of the n_kv kv heads is repeated n_rep times, n_kv * n_rep heads"

def _name_mapping(chk: Check, read: list, n_kv: int, n_rep: int, who: str) -> None:
    want = [h // n_rep for h in range(n_kv * n_rep)]
    if read == want:
        chk.measured(f"n_rep={n_rep}: {who} h reads kv head h // n_rep, {read}, as expected")
        return
    chk.measured(f"n_rep={n_rep}: {who} h reads kv head {read}; expected {want} (h // n_rep)")
    if read == [h % n_kv for h in range(n_kv * n_rep)]:
        chk.diagnose(TILED)


def check_repeat_kv(repeat_kv, *, seed: int = 0, batch: int = 2, n_kv: int = 3, seq: int = 5, head_dim: int = 4,
                    n_reps: tuple = (2, 4, 1), dtype=torch.float32) -> None:
    """repeat_kv(x, n_rep): (B, n_kv, T, hd) -> (B, n_kv * n_rep, T, hd); the
    measured map from output head to input kv head names ordering bugs."""
    __tracebackhide__ = True
    chk = Check("repeat_kv", expects="(batch, n_kv * n_rep, seq, head_dim), each kv head repeated n_rep times in place")
    x = randn(batch, n_kv, seq, head_dim, seed=seed, dtype=dtype)
    for n_rep in n_reps:
        got = call_with_hints(chk, repeat_kv, x, n_rep, hints=[EXPAND_HINT])
        variants = {TILED: lambda r=n_rep: x.repeat(1, r, 1, 1)}
        variants |= {f"repeated along the wrong dim ({d}, the {axis} axis); repeat the kv-head axis, dim=1":
                     (lambda d=d, r=n_rep: x.repeat_interleave(r, dim=d))
                     for d, axis in ((0, "batch"), (2, "sequence"), (3, "head_dim"))}
        want = x.repeat_interleave(n_rep, dim=1)
        if not chk.compare(f"n_kv={n_kv}, n_rep={n_rep}", got, want, variants=variants):
            read = head_sources(got, x)
            if isinstance(got, torch.Tensor) and got.dim() == 4 and got.shape[1] != n_kv * n_rep and read is not None:
                chk.diagnose_at("heads returned", (shown_size(got.shape[1], known_sizes(x.shape, want.shape)), n_kv, n_rep),
                                _heads_returned_words)
            elif read is not None and None not in read:
                _name_mapping(chk, read, n_kv, n_rep, "output head")
    run_contract(chk, repeat_kv, REPEAT_KV)
    chk.finish()


def _probe_reads(gqa_attention, chk: Check, q: torch.Tensor, n_kv: int) -> list | None:
    """Which kv head each query head reads: with v constant = j + 1 on kv head
    j, any attention weights (rows summing to 1) give output j + 1 on the
    query heads that read kv head j, and 0 on a head that reads none."""
    B, H, T, hd = q.shape
    k = randn(B, n_kv, T, hd, seed=99, dtype=q.dtype)
    v = torch.arange(1, n_kv + 1, dtype=q.dtype)[None, :, None, None].expand(B, n_kv, T, hd).clone()
    out = chk.probe(gqa_attention, q, k, v)
    if not isinstance(out, torch.Tensor) or out.shape != q.shape:
        return None
    per_head = out.detach().double().cpu().mean((0, 2, 3))                        # (H,)
    spread = (out.detach().double().cpu() - per_head[None, :, None, None]).abs().max()
    # written so that nan fails: a comparison with nan is False, so `spread > 1e-4` would let it through
    if not (spread <= 1e-4 and (per_head - per_head.round()).abs().max() <= 1e-4):
        return None
    read = [int(r) - 1 for r in per_head.round()]
    if all(r == -1 for r in read):
        chk.measured(f"with v constant j + 1 on kv head j, your output is 0 on every one of the {H} query heads: "
                     "none reads a kv head (attention over an empty set of keys and values gives 0)")
    return read if all(0 <= r < n_kv for r in read) else None


def check_gqa_attention(gqa_attention, *, seed: int = 0, batch: int = 2, n_heads: int = 6, seq: int = 5,
                        head_dim: int = 4, kv_heads: tuple = (2, 1, 6), dtype=torch.float32) -> None:
    """gqa_attention(q, k, v): causal attention with fewer kv heads, against
    F.scaled_dot_product_attention(enable_gqa=True); MQA and MHA as the two
    ends. A failure caused by the learner's repeat_kv (exercise 1) says so."""
    __tracebackhide__ = True
    finish_with_upstream("gqa_attention", lambda: _body_gqa_attention(gqa_attention, seed, batch, n_heads, seq, head_dim,
                                                                      kv_heads, dtype),
                         gqa_attention, {"repeat_kv": ref_repeat_kv}, {"repeat_kv": "exercise 1"})


def _body_gqa_attention(gqa_attention, seed, batch, n_heads, seq, head_dim, kv_heads, dtype) -> Check:
    chk = Check("gqa_attention", expects="(batch, n_heads, seq, head_dim) attention outputs")
    q = randn(batch, n_heads, seq, head_dim, seed=seed, dtype=dtype)
    for n_kv in kv_heads:
        k = randn(batch, n_kv, seq, head_dim, seed=seed + 1, dtype=dtype) * 1.5
        v = randn(batch, n_kv, seq, head_dim, seed=seed + 2, dtype=dtype)
        rep = n_heads // n_kv
        want = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        kr, vr = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
        try:
            got = call_with_hints(chk, gqa_attention, q, k, v, inputs_row=True, hints=[EXPAND_HINT])
        except CheckFailed as err:
            why = _unrepeated(chk, gqa_attention, q, k, v, kr, vr, want)
            if why is None:
                raise
            raise err.with_line(why) from None
        kind = "MQA" if n_kv == 1 else "MHA" if n_kv == n_heads else "GQA"
        scale_variants = {f"scores scaled by {label}; expected 1/sqrt(head_dim) = 1/{head_dim ** 0.5:.3g}":
                          (lambda sc=sc: F.scaled_dot_product_attention(q, kr, vr, is_causal=True, scale=sc))
                          for label, sc in ((f"1/head_dim = 1/{head_dim}", 1 / head_dim), ("1 (no scaling)", 1.0))}
        if not chk.compare(f"{kind}: {n_heads} q heads, {n_kv} kv heads", got, want, variants={
            TILED: lambda: F.scaled_dot_product_attention(q, k.repeat(1, rep, 1, 1), v.repeat(1, rep, 1, 1), is_causal=True),
            "no causal mask reaches the softmax: every query sees the future": lambda: F.scaled_dot_product_attention(
                q, k, v, enable_gqa=True),
            "only the keys were repeated to the query heads with the right mapping; repeat the values the same way":
                lambda: F.scaled_dot_product_attention(q, kr, v.repeat(1, rep, 1, 1), is_causal=True),
            "keys and values exchanged: the scores are taken with the values and the weights average the keys; the "
            "scores are q·kᵀ with the keys, the weights average the values":
                lambda: F.scaled_dot_product_attention(q, vr, kr, is_causal=True),
        } | scale_variants) and 1 < n_kv < n_heads:
            read = _probe_reads(gqa_attention, chk, q, n_kv)
            if read is not None:
                _name_mapping(chk, read, n_kv, rep, "query head")
    run_contract(chk, gqa_attention, GQA_ATTENTION)
    return chk


def _unrepeated(chk: Check, gqa_attention, q, k, v, kr, vr, want) -> Evidence | None:
    """Which of k and v the learner's attention leaves unrepeated, measured by
    handing it the other one already repeated to the query heads."""
    def right_with(k_in, v_in):
        out = chk.probe(gqa_attention, q, k_in, v_in)
        return isinstance(out, torch.Tensor) and out.shape == want.shape and torch.allclose(out, want, atol=1e-5)
    if right_with(k, vr):
        return confirmed("the values are not repeated (measured: with v already repeated to the query heads your "
                         "function is right): v = repeat_kv(v, n_rep), like k")
    if right_with(kr, v):
        return confirmed("the keys are not repeated (measured: with k already repeated to the query heads your "
                         "function is right): k = repeat_kv(k, n_rep), like v")
    return head_mismatch_fact(str(chk.errors[-1] if chk.errors else ""),
                              attention_operands(gqa_attention, lambda: gqa_attention(q, k, v)))


def check_gqa_step(gqa_step, **kw) -> None:
    """The cached attention step of notebook 06 with n_kv_heads < n_heads:
    the cache must hold the kv heads only."""
    __tracebackhide__ = True
    kw.setdefault("batch", 3)
    kw.setdefault("n_heads", 4)
    kw.setdefault("n_kv_heads", 2)
    kw.setdefault("head_dim", 6)
    attention_step_check(gqa_step, fn_name="gqa_step", **kw)


# -- contracts: the regimes each exercise promises, and its step-by-step reference ---------------
def gqa_attention_steps(q, k, v):
    n_rep = q.shape[1] // k.shape[1]
    return attention_steps(q, repeat_kv_steps(k, n_rep), repeat_kv_steps(v, n_rep))


def _repeat_kv_cases():
    p = defaults(check_repeat_kv)
    x = randn(p["batch"], p["n_kv"], p["seq"], p["head_dim"], seed=p["seed"], dtype=p["dtype"])
    return [(f"n_rep={r}", (x, r), {}) for r in p["n_reps"] if r > 1]


def _gqa_cases():
    p = defaults(check_gqa_attention)
    q = randn(p["batch"], p["n_heads"], p["seq"], p["head_dim"], seed=p["seed"], dtype=p["dtype"])
    n_kv = p["kv_heads"][0]
    k = randn(p["batch"], n_kv, p["seq"], p["head_dim"], seed=p["seed"] + 1, dtype=p["dtype"]) * 1.5
    v = randn(p["batch"], n_kv, p["seq"], p["head_dim"], seed=p["seed"] + 2, dtype=p["dtype"])
    return [(f"{n_kv} kv heads", (q, k, v), {})]


REPEAT_KV = Contract("repeat_kv", repeat_kv_steps, _repeat_kv_cases, names=("x", "n_rep"), batch=("x",), views=("x",),
                     grad=("x",), ones=(("x", 1, "x with one kv head (MQA, n_kv_heads = 1)"),))
GQA_ATTENTION = Contract("gqa_attention", gqa_attention_steps, _gqa_cases, names=("q", "k", "v"),
                         batch=("q", "k", "v"), views=("q", "k", "v"), grad=("q", "k", "v"))
