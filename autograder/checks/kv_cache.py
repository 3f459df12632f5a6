"""Checks for notebook 06 (KV cache) and the cached attention step of 07.

The reference for anything cached is a full recompute: run attention over
the whole sequence at once with F.scaled_dot_product_attention(is_causal=True)
and RoPE written with complex numbers, then slice out the positions a cached
step should produce. A cached step is correct exactly when it reproduces
that slice, whatever the learner does inside.
"""
from __future__ import annotations

import contextlib
import io
import re
import sys

import torch
import torch.nn.functional as F

from . import trace
from .attention import ref_mask
from .contracts import Contract, Edge, call_keeping_inputs, defaults, run_contract
from ..learner_values import describe
from .learner_code import is_learners_file
from .rope import ref_angles, ref_rotate, rotated_after_update, rotated_with_the_cache
from .spies import attention_heads, unrepeated_bug
from .framework.calling import guarded_call
from .framework.check import Check
from .framework.failure import CheckFailed, CheckStopped
from .framework.measure import randn, seeded


# --------------------------------------------------------------------------
# helpers shared by the part-2 checks (06-10)

def call_with_hints(chk: Check, fn, *args, hints=(), inputs_row: bool = False, **kwargs):
    """chk.call, but when the learner's code raises, an error whose text
    matches one of `hints` ((regex, likely bug, or a measurement giving one
    or None) pairs) ends with that bug.
    `inputs_row`: the table also shows the inputs-unchanged row
    (contracts.call_keeping_inputs)."""
    __tracebackhide__ = True
    try:
        if inputs_row:
            return call_keeping_inputs(chk, fn, *args, **kwargs)
        return chk.call(fn, *args, **kwargs)
    except CheckFailed as err:
        if chk.error_measured:
            raise  # the error was explained by measuring the call, not guessed from its text
        for pattern, bug in hints:
            if re.search(pattern, err.error_text()) and (bug := bug() if callable(bug) else bug):
                raise (err.with_line(bug) if bug.startswith("Measured:") else err.with_likely_bug(bug)) from None
        raise


# A broadcast error at dimension 1 of (B, heads, T, ·) is a head-count
# mismatch, whichever tensor it comes from: the error text does not say
# whether k, v or both lacked the repetition, so only the fact is stated.
HEAD_MISMATCH = re.compile(r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\) at non-singleton "
                           r"dimension (?:1|-3)\b")


def head_mismatch_fact(text: str) -> str | None:
    m = HEAD_MISMATCH.search(text)
    if m is None:
        return None
    return (f"Measured: the error is on the head axis (dimension 1): {m.group(1)} heads met {m.group(2)}, so the keys "
            "or the values (or both) are not repeated to the query heads; each of k and v needs "
            "repeat_kv(..., n_rep) with n_rep = n_heads // n_kv_heads before attention")


def _passes(body) -> bool:
    try:
        return body().passed
    except CheckFailed:
        return False


def finish_with_upstream(name: str, body, fn, references: dict, labels: dict) -> None:
    """Run a check `body()` (builds and fills a Check, or stops with
    CheckFailed); when it fails and `fn` calls an earlier exercise of this
    notebook that is wrong (references: {name: correct version}), the
    earlier one is named first (Check.upstream re-runs body with the
    correct versions in place of the learner's)."""
    __tracebackhide__ = True
    try:
        chk = body()
    except CheckFailed as err:
        probe = Check(name)
        probe.errors.append("stopped")
        if probe.upstream(fn, references, lambda: _passes(body), labels):
            raise err.with_likely_bug(probe.diagnoses[0]) from None
        raise
    if not chk.passed:
        chk.upstream(fn, references, lambda: _passes(body), labels)
    chk.finish()


# --------------------------------------------------------------------------
# cache_update(past_k, past_v, k, v) -> (k_all, v_all)
# --------------------------------------------------------------------------

AXES = ("batch", "head", "sequence", "head_dim")


def call_naming_cat_axis(chk: Check, fn, *args):
    """chk.call, but a torch.cat along the wrong axis (which usually raises,
    since past and new lengths differ) is named as the bug it is."""
    __tracebackhide__ = True
    try:
        return chk.call(fn, *args)
    except CheckFailed as err:
        text = err.error_text()
        m = re.search(r"except in dimension (-?\d+)", text)
        if m and m.group(1) not in ("2", "-2") and "concatenated along the wrong axis" not in str(err):
            raise err.with_likely_bug(f"KV cache concatenated along the wrong axis (dim={m.group(1)}); "
                                      "new positions go along the sequence axis, dim=2 of (B, n_kv, T, hd)") from None
        fact = head_mismatch_fact(text)
        if fact:
            bug = unrepeated_bug(attention_heads(fn, lambda: fn(*args)))
            raise (err.with_likely_bug(bug) if bug else err.with_line(fact)) from None
        if re.search(r"must match the size of tensor|shape of the mask|attn_mask", text) and len(args) == 6:
            found = _attention_inputs(fn, args)
            if found is not None:
                raise found(err) from None
        if rotated := rotated_after_update(text, args):
            raise err.with_likely_bug(rotated) from None
        raise


def _attention_inputs(fn, args):
    """For an attention step (x, attn, cos, sin, past_k, past_v) that raised
    where the mask meets the scores: measured from the call that raised, is
    the mask (T_new, T_past + T_new) and do the keys span every position?
    A function err -> CheckFailed with what the shapes show, or None when
    the raising call cannot be read."""
    x, past_k = args[0], args[4]
    new, total = int(x.shape[1]), int(past_k.shape[2]) + int(x.shape[1])
    with contextlib.redirect_stdout(io.StringIO()):
        recorded = trace.record_learner(fn, args, call=lambda *a: guarded_call(fn, a))
    if recorded.failed is None:
        return None
    failed = recorded.ops[recorded.failed]
    masks = [s for s, (j, slot) in zip(failed.input_shapes, zip(failed.inputs, failed.slots))
             if _is_bool(recorded, j, slot) and len(s) >= 2]
    floats = [s for s, (j, slot) in zip(failed.input_shapes, zip(failed.inputs, failed.slots))
              if not _is_bool(recorded, j, slot) and len(s) == 4]
    if masks and tuple(masks[0][-2:]) != (new, total):
        return lambda err: err.with_likely_bug(
            f"the mask does not fit the scores: yours is {tuple(masks[0])} (measured where your code raised), the "
            f"scores are (T_new, T_past + T_new) = ({new}, {total}): use causal_mask(T_new, T_past + T_new), where "
            "T_past = past_k.shape[2] is the number of cached positions")
    short = [s for s in floats[1:] if s[-2] == new != total]
    if masks and short:
        return lambda err: err.with_likely_bug(
            f"the keys or values attention reads have {new} positions (measured where your code raised: shape "
            f"{tuple(short[0])}), while the mask has T_past + T_new = {total}: the cached positions are missing; "
            "attend over k_all and v_all, the cache after the step")
    return None


def _is_bool(recorded, j: int, slot: int) -> bool:
    if j >= 0 and slot < len(recorded.ops[j].outputs):
        return recorded.ops[j].outputs[slot].dtype == torch.bool
    if j <= trace.LEAF and trace.LEAF - j < len(recorded.leaves):
        return recorded.leaves[trace.LEAF - j].dtype == torch.bool
    if -2 - j >= 0 and -2 - j < len(recorded.inputs):
        return recorded.inputs[-2 - j].dtype == torch.bool
    return False


def measure_growth(chk: Check, name: str, got, past: torch.Tensor, new: torch.Tensor) -> None:
    """Which axis of the learner's cache grew, measured from the shapes."""
    if not isinstance(got, torch.Tensor):
        return
    if got.dim() == past.dim() + 1:
        chk.diagnose(f"{name} has {got.dim()} axes: torch.stack adds a new axis; torch.cat((past, new), dim=2) appends "
                     "along the existing sequence axis")
        return
    if got.dim() != past.dim():
        return
    grew = [d for d in range(past.dim()) if got.shape[d] == past.shape[d] + new.shape[d] and got.shape[d] != past.shape[d]]
    if grew and 2 not in grew:
        chk.diagnose(f"KV cache concatenated along the wrong axis: your {name} grew along dim={grew[0]} (the "
                     f"{AXES[grew[0]]} axis); new positions go along the sequence axis, dim=2 of (B, n_kv, T, hd)")


def check_cache_update(cache_update, *, seed: int = 0, batch: int = 2, heads: int = 3, past: int = 5,
                       new: int = 4, head_dim: int = 6, dtype=torch.float32) -> None:
    """Appending along the sequence axis (2) of (B, n_kv, T, hd)."""
    __tracebackhide__ = True
    chk = Check("cache_update", expects="a pair (k_all, v_all), each (batch, kv_heads, past + new, head_dim)")
    pk, pv = (randn(batch, heads, past, head_dim, seed=seed + i, dtype=dtype) for i in (0, 1))
    cases = ((f"{new} cached + {new} new", pk[:, :, :new], pv[:, :, :new], new),
             (f"{past} cached + 1 new", pk, pv, 1),
             ("empty cache + prefill", pk[:, :, :0], pv[:, :, :0], new))
    for label, past_k, past_v, n in cases:
        k, v = (randn(batch, heads, n, head_dim, seed=seed + 10 + i, dtype=dtype) for i in (0, 1))
        out = call_naming_cat_axis(chk, cache_update, past_k, past_v, k, v)
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            chk._stop(f"cache_update returned {describe(out)}; it should return a pair (k_all, v_all)")
        want = {"k": torch.cat((past_k, k), dim=2), "v": torch.cat((past_v, v), dim=2)}
        other = {"k": "v", "v": "k"}
        for name, got, old, fresh in (("k", out[0], past_k, k), ("v", out[1], past_v, v)):
            ok = chk.compare(f"{label}: {name}_all", got, want[name], variants={
                f"KV cache concatenated along the wrong axis (dim={d}, the {AXES[d]} axis); new positions go along "
                "the sequence axis, dim=2 of (B, n_kv, T, hd)": (lambda d=d, o=old, f=fresh: torch.cat((o, f), dim=d))
                for d in (0, 1, 3)
            } | {
                "new entries placed before the cached ones: cat((past, new)), not cat((new, past))":
                    torch.cat((fresh, old), dim=2),
                "the cache is overwritten instead of appended to: return the past entries followed by the new ones":
                    fresh,
                "the cache is returned unchanged: the new entries are lost; return torch.cat((past, new), dim=2)":
                    old,
                "k_all and v_all swapped: return (k_all, v_all) in that order": want[other[name]],
                f"{name}_all appends the new {'keys' if name == 'v' else 'values'} instead of the new "
                f"{'values' if name == 'v' else 'keys'}: {name}_all = cat((past_{name}, {name}), dim=2)":
                    torch.cat((old, k if name == "v" else v), dim=2),
            })
            if not ok:
                measure_growth(chk, f"{name}_all", got, old, fresh)
    run_contract(chk, cache_update, CACHE_UPDATE)
    chk.finish()


# --------------------------------------------------------------------------
# attention_step(x, attn, cos, sin, past_k, past_v) -> (y, k_all, v_all)
# --------------------------------------------------------------------------

def _tables(head_dim: int, n_pos: int, dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Half-split cos/sin (n_pos, hd) computed in float64, then cast: a float64
    check is not limited by float32 angles."""
    a = ref_angles(head_dim, torch.arange(n_pos), 10000.0)
    a = torch.cat((a, a), dim=-1)
    return a.cos().to(dtype), a.sin().to(dtype)


def _seeded_attention(d_model: int, n_heads: int, n_kv: int, seed: int, dtype):
    """A tinylm.Attention with seeded weights of unit-variance outputs."""
    import tinylm

    cfg = tinylm.ModelConfig(vocab_size=16, d_model=d_model, n_layers=1, n_heads=n_heads, n_kv_heads=n_kv,
                             max_seq_len=64)
    attn = tinylm.Attention(cfg)
    with torch.no_grad():
        for i, lin in enumerate((attn.q_proj, attn.k_proj, attn.v_proj, attn.o_proj)):
            lin.weight.copy_(randn(*lin.weight.shape, seed=seed + i) / lin.weight.shape[1] ** 0.5)
    return attn.to(dtype).eval()


def _heads(t: torch.Tensor, n: int) -> torch.Tensor:
    return t.unflatten(-1, (n, -1)).transpose(1, 2)  # (B, T, n*hd) -> (B, n, T, hd)


def _attend(q, k, v, mask=None, tile=False):
    """Attention of q (B, H, Tq, hd) over k, v (B, n_kv, Tk, hd); `mask` (Tq, Tk)
    or None; tile=True maps query head h to kv head h % n_kv (the tiling bug)."""
    rep = q.shape[1] // k.shape[1]
    if tile:
        k, v = k.repeat(1, rep, 1, 1), v.repeat(1, rep, 1, 1)
    else:
        k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


TILED = ("GQA head repetition wrong: x.repeat (tiling) gives kv heads in the order 0, 1, 0, 1, so query head h reads "
         "kv head h % n_kv; each kv head must serve a contiguous group of query heads (repeat_interleave, h // n_rep)")
RESTART = ("positions restart at 0: the new tokens are rotated as if they were the first ones; pass "
           "start_pos = number of cached positions to apply_rope")


def ref_cache_update(past_k, past_v, k, v):
    """Correct exercise 1 of notebook 06 (for upstream attribution)."""
    return torch.cat((past_k, k), dim=2), torch.cat((past_v, v), dim=2)


def ref_repeat_kv(x, n_rep):
    """Correct exercise 1 of notebook 07 (for upstream attribution)."""
    return x.repeat_interleave(n_rep, dim=1)


def _rotation_offset(got_new: torch.Tensor, raw: torch.Tensor, limit: int) -> int | None:
    """The start position s for which got_new == raw rotated from s (None if none fits)."""
    for s in range(limit):
        if got_new.shape == raw.shape and torch.allclose(got_new.double(), ref_rotate(raw, s).double(), atol=1e-4, rtol=1e-4):
            return s
    return None


def check_attention_step(attention_step, *, seed: int = 0, batch: int = 2, n_heads: int = 3, n_kv_heads: int | None = None,
                         head_dim: int = 4, steps: tuple = (5, 3, 1, 1), dtype=torch.float32,
                         fn_name: str = "attention_step") -> None:
    """Feed a sequence chunk by chunk (prefill, then decode steps) and compare
    each step's output and cache with a full recompute of the whole sequence.
    Each step starts from the *reference* cache, so every row judges one step.
    A failure caused by the earlier exercise the step calls (cache_update in
    06, repeat_kv in 07) names that exercise."""
    __tracebackhide__ = True
    references = {"cache_update": ref_cache_update, "repeat_kv": ref_repeat_kv}
    finish_with_upstream(fn_name, lambda: _body_attention_step(attention_step, seed, batch, n_heads, n_kv_heads, head_dim,
                                                               steps, dtype, fn_name),
                         attention_step, references, {"cache_update": "exercise 1", "repeat_kv": "exercise 1"})


def _measure_cache_length(chk: Check, label: str, caches: dict, past: int, new: int) -> None:
    """The positions each returned cache holds (axis 2) when that is not past + new, said with what it equals."""
    for name, got in caches.items():
        if not isinstance(got, torch.Tensor) or got.dim() != 4 or got.shape[2] == past + new:
            continue
        length = int(got.shape[2])
        what = (" (the new positions only: the cached ones are not in it)" if length == new and past else
                " (the cached positions only: the new ones are not in it)" if length == past and new else "")
        chk.measured(f"{label}: your {name} holds {length} positions{what}; expected past + new = {past} + {new} = "
                     f"{past + new}")


def _body_attention_step(attention_step, seed, batch, n_heads, n_kv_heads, head_dim, steps, dtype, fn_name) -> Check:
    n_kv = n_heads if n_kv_heads is None else n_kv_heads
    d = n_heads * head_dim
    total = sum(steps)
    attn = _seeded_attention(d, n_heads, n_kv, seed, dtype)
    x = randn(batch, total, d, seed=seed + 7, dtype=dtype) * 2  # (B, T, d)
    cos, sin = _tables(head_dim, total + 8, dtype)
    W = {n: getattr(attn, f"{n}_proj").weight.detach() for n in "qkvo"}
    q_all = ref_rotate(_heads(F.linear(x, W["q"]), n_heads))          # (B, H, T, hd), positions 0..T-1
    k_raw = _heads(F.linear(x, W["k"]), n_kv)                          # (B, n_kv, T, hd), before RoPE
    k_all = ref_rotate(k_raw)
    v_all = _heads(F.linear(x, W["v"]), n_kv)
    merge = lambda y: F.linear(y.transpose(1, 2).flatten(2), W["o"])  # noqa: E731  (B, H, T, hd) -> (B, T, d)
    rep = n_heads // n_kv

    chk = Check(fn_name, expects="(y, k_all, v_all): y (batch, new, d_model) and the cache after the step, "
                                 "k_all and v_all (batch, kv_heads, past + new, head_dim)")
    first_bad, start = None, 0
    for i, n in enumerate(steps):
        end = start + n
        label = f"step {i}: {n} new after {start}" if start else f"step {i}: prefill {n}"
        past_k, past_v = k_all[:, :, :start].clone(), v_all[:, :, :start].clone()
        out = call_naming_cat_axis(chk, attention_step, x[:, start:end], attn, cos, sin, past_k, past_v)
        if not (isinstance(out, (tuple, list)) and len(out) == 3):
            chk._stop(f"{fn_name} returned {describe(out)}; it should return (y, k_all, v_all)")
        y, k_got, v_got = out
        xs = x[:, start:end]
        q_new = q_all[:, :, start:end]
        q0 = ref_rotate(_heads(F.linear(xs, W["q"]), n_heads), 0)   # new queries rotated as if at 0
        k0 = torch.cat((k_all[:, :, :start], ref_rotate(k_raw[:, :, start:end], 0)), dim=2)
        K, V = k_all[:, :, :end], v_all[:, :, :end]
        mask = ref_mask(n, end)
        y_variants = {
            RESTART: lambda: merge(_attend(q0, k0, V, mask)),
            "queries rotated as if they started at position 0: pass start_pos to apply_rope for q as well as k":
                lambda: merge(_attend(q0, K, V, mask)),
            "mask wrong for the new tokens: it is aligned top-left (is_causal=True, or tril without offset), so a "
            "new token cannot see the cached keys; use causal_mask(new, past + new), which is bottom-right aligned":
                lambda: merge(_attend(q_new, K, V, torch.ones(n, end, dtype=torch.bool).tril())),
            "mask wrong for the new tokens: no mask, so each new token also sees the new tokens after it":
                lambda: merge(_attend(q_new, K, V)),
            "mask inverted: in F.scaled_dot_product_attention a boolean mask is True where a query MAY attend":
                lambda: merge(_attend(q_new, K, V, ~mask)),
            "the mask is 0/1 floats, not bool: SDPA adds a float mask to the scores (+1 where allowed, nothing "
            "masked); pass the bool mask itself (True = may attend)": lambda: merge(_attend(q_new, K, V, mask.to(q_new.dtype))),
            "the cached keys are ignored: attention runs over the new tokens only; attend over k_all, v_all":
                lambda: merge(_attend(q_new, k_all[:, :, start:end], v_all[:, :, start:end], ref_mask(n, n))),
            "heads merged without transposing back: (B, nh, T, hd) -> y.transpose(1, 2).reshape(B, T, d)":
                lambda: F.linear(_attend(q_new, K, V, mask).reshape(batch, n, d), W["o"]),
            "o_proj missing: the merged heads go through attn.o_proj": lambda: _attend(q_new, K, V, mask).transpose(1, 2).flatten(2),
            "heads split without the transpose: view(B, T, n_heads, hd).transpose(1, 2), not view(B, n_heads, T, hd)":
                lambda: merge(_attend(ref_rotate(F.linear(xs, W["q"]).view(batch, n_heads, n, head_dim), start), K, V, mask)),
        }
        if rep > 1:
            y_variants[TILED] = lambda: merge(_attend(q_new, K, V, mask, tile=True))
        ok = chk.compare(f"{label}: y", y, merge(_attend(q_new, K, V, mask)), variants=y_variants)
        cache_variants = lambda ref, raw: {  # noqa: E731
            "KV cache concatenated along the wrong axis (dim=1, the head axis); new positions go along dim=2":
                lambda: torch.cat((ref[:, :, :start], ref[:, :, start:end]), dim=1),
            "KV cache concatenated along the wrong axis (dim=3, the head_dim axis); new positions go along dim=2":
                lambda: torch.cat((ref[:, :, :start], ref[:, :, start:end]), dim=3),
            "expanded K/V stored in the cache: store the n_kv_heads keys and values, and repeat them for the "
            "query heads only inside attention (the cache is n_heads / n_kv_heads times larger otherwise)":
                lambda: ref[:, :, :end].repeat_interleave(rep, 1),
        } | raw
        k_ok = chk.compare(f"{label}: k_all", k_got, K, variants=cache_variants(k_all, {
            RESTART: k0,
            "keys cached before RoPE: rotate the new keys, then append them (cached keys are never rotated again)":
                torch.cat((k_all[:, :, :start], k_raw[:, :, start:end]), dim=2),
        }))
        if not k_ok and n > 1 and isinstance(k_got, torch.Tensor) and k_got.shape == K.shape:
            s = _rotation_offset(k_got[:, :, start:end].detach().cpu(), k_raw[:, :, start:end], total + 4)
            after = rotated_with_the_cache(k_got, k_all, start, n, s)
            if after:
                chk.diagnose(after)
            elif s is not None and s != start:
                chk.diagnose(f"the new keys are rotated for positions {s}..{s + n - 1}, not {start}..{end - 1}: RoPE "
                             f"positions of the new tokens start at the number of cached positions, "
                             f"start_pos = past_k.shape[2]")
        ok &= k_ok
        ok &= chk.compare(f"{label}: v_all", v_got, V, variants=cache_variants(v_all, {
            "RoPE applied to values: only queries and keys are rotated": lambda: torch.cat(
                (v_all[:, :, :start], ref_rotate(v_all[:, :, start:end], start)), dim=2),
            "values computed with k_proj: v = attn.v_proj(x)": lambda: torch.cat(
                (v_all[:, :, :start], k_raw[:, :, start:end]), dim=2),
        }))
        _measure_cache_length(chk, label, {"k_all": k_got, "v_all": v_got}, start, n)
        if not ok and first_bad is None:
            first_bad = label
        start = end
    if first_bad is not None:
        chk.measured(f"the first step that differs from a full recompute: {first_bad}")
    run_contract(chk, attention_step, STEP_CONTRACTS[fn_name])
    return chk


# --------------------------------------------------------------------------
# generate_greedy(model, prompt, max_new_tokens, cache) -> (B, T + n)
# --------------------------------------------------------------------------

def tiny_model(seed: int, *, d_model: int = 24, n_layers: int = 2, n_heads: int = 3, n_kv_heads: int | None = None,
               vocab: int = 29, max_seq_len: int = 48, dropout: float = 0.0, dtype=torch.float32):
    """A small tinylm.Transformer with seeded weights large enough that its
    argmax is far from ties (random init at std 0.02 gives near-flat logits)."""
    import tinylm

    cfg = tinylm.ModelConfig(vocab_size=vocab, d_model=d_model, n_layers=n_layers, n_heads=n_heads,
                             n_kv_heads=n_kv_heads, max_seq_len=max_seq_len, dropout=dropout)
    model = tinylm.Transformer(cfg)
    with torch.no_grad():
        for i, (name, p) in enumerate(sorted(model.named_parameters())):
            if p.dim() >= 2:
                p.copy_(randn(*p.shape, seed=seed * 100 + i) / p.shape[1] ** 0.5)
    return model.to(dtype).eval()


def ref_greedy(model, prompt: torch.Tensor, n: int) -> torch.Tensor:
    """Greedy decoding by full recompute: no cache at all."""
    idx = prompt
    with torch.no_grad():
        for _ in range(n):
            nxt = model(idx)[:, -1].argmax(-1)              # (B,)
            idx = torch.cat((idx, nxt[:, None]), dim=1)     # (B, T + 1)
    return idx


def greedy_with(model, prompt, n, pick):
    """Greedy decoding where pick(model, idx) gives the (B, V) logits used."""
    idx = prompt
    with torch.no_grad():
        for _ in range(n):
            idx = torch.cat((idx, pick(model, idx).argmax(-1)[:, None]), dim=1)
    return idx


def measure_length(chk: Check, got, prompt: torch.Tensor, max_new_tokens: int, want: torch.Tensor) -> None:
    """What the returned token ids are, measured against the prompt and the
    right sequence `want`: only the new tokens, the prompt with too few or
    too many, or a sequence that lost its beginning (the right sequence's tail)."""
    batch, prompt_len = prompt.shape
    if not isinstance(got, torch.Tensor) or got.dim() != 2 or got.shape[0] != batch:
        return
    n, expected = got.shape[1], prompt_len + max_new_tokens
    g, w = got.detach().cpu(), want.detach().cpu()
    starts = n >= prompt_len and torch.equal(g[:, :prompt_len], prompt.cpu())
    if n == expected:
        return
    if starts:
        chk.diagnose(f"your result is the prompt followed by {n - prompt_len} new tokens; max_new_tokens = "
                     f"{max_new_tokens} new tokens are expected (one per loop step)")
    elif n == max_new_tokens and torch.equal(g, w[:, prompt_len:]):
        chk.diagnose(f"returned only the {n} new tokens: return the prompt followed by them, "
                     f"(batch, prompt_len + max_new_tokens)")
    elif n < expected and torch.equal(g, w[:, expected - n:]):
        chk.diagnose(f"your result holds only the last {n} of the {expected} tokens (the prompt's {prompt_len} and "
                     f"{max_new_tokens} new ones), and they are right: the sequence loses its earlier tokens at "
                     "each step; keep appending to the whole sequence, idx = torch.cat((idx, next_id), dim=1)")
    else:
        chk.measured(f"your result has {n} tokens per row and does not begin with the prompt; expected the prompt's "
                     f"{prompt_len} tokens followed by {max_new_tokens} new ones ({expected})")


class TooManyForwardCalls(CheckStopped):
    """Raised inside the learner's decoding loop once it has called the model
    more often than its max_new_tokens allow: a wrong loop (one that never
    appends, or decodes far past max_new_tokens) is stopped in a fraction of a
    second instead of running until the cell's timeout."""


class ForwardLog:
    """Records every forward call of a model: input length, cache length at
    entry, train mode, grad mode. Used to see *how* a learner decodes. With
    `limit`, the call after the limit-th raises TooManyForwardCalls."""

    def __init__(self, model, limit: int | None = None):
        self.calls: list[dict] = []
        self.limit = limit
        self.handle = model.register_forward_pre_hook(self._hook, with_kwargs=True)

    def _hook(self, module, args, kwargs):
        if self.limit is not None and len(self.calls) >= self.limit:
            raise TooManyForwardCalls(
                f"the check stopped the decoding after {self.limit} forward passes of the model, more than "
                "max_new_tokens allows (one pass per new token, the first one the prefill): does the loop stop "
                "after max_new_tokens steps, and does every step append its token?")
        idx = args[0] if args else kwargs.get("idx")
        cache = args[1] if len(args) > 1 else kwargs.get("cache")
        self.calls.append({"len": idx.shape[-1] if isinstance(idx, torch.Tensor) else None, "cache": cache,
                           "cache_len": None if cache is None else cache.length,
                           "training": module.training, "grad": torch.is_grad_enabled()})

    def close(self):
        self.handle.remove()


def _first_divergence(got: torch.Tensor, want: torch.Tensor, prompt_len: int) -> str:
    if not isinstance(got, torch.Tensor) or got.shape != want.shape:
        return "the output shape"
    cols = (got.cpu() != want).any(0).nonzero()
    return "none" if not len(cols) else f"new token {int(cols[0]) - prompt_len}"


def check_generate_greedy(generate_greedy, *, seed: int = 0, batch: int = 2, prompts: tuple = (5, 3),
                          max_new_tokens: int = 6, n_kv_heads: int | None = None) -> None:
    """Two prompts, one KVCache reused between them (as a server would):
    tokens must equal greedy full recompute, decode steps must feed one token."""
    __tracebackhide__ = True
    import tinylm

    model = tiny_model(seed, n_kv_heads=n_kv_heads)
    cache = tinylm.KVCache(model.config, batch)
    chk = Check("generate_greedy", expects=f"token ids (batch, prompt_len + {max_new_tokens})")
    for p, T in enumerate(prompts):
        prompt = torch.randint(model.config.vocab_size, (batch, T), generator=seeded(seed + p))
        want = ref_greedy(model, prompt, max_new_tokens)
        log = ForwardLog(model, limit=2 * max_new_tokens)  # bounded: a wrong loop is stopped, not waited for
        try:
            got = chk.call(generate_greedy, model, prompt, max_new_tokens, cache)
        except CheckFailed as err:
            if p > 0 and "KVCache is full" in str(err):
                raise err.with_likely_bug("cache not reset between prompts: the second prompt found "
                                          "the first one's positions still in the cache; call cache.reset() before the prefill") from None
            raise
        finally:
            log.close()
        where = _first_divergence(got, want, T)
        label = f"prompt {p + 1} ({batch}x{T}) + {max_new_tokens} new"
        if not chk.compare(label, got, want, variants={
            "the logits of the first position are used: the next token is predicted by the LAST position, logits[:, -1]":
                lambda: greedy_with(model, prompt, max_new_tokens,
                                            lambda m, i: m(i)[:, 0 if i.shape[1] == T else -1]),
            "argmin instead of argmax: greedy decoding picks the LARGEST logit":
                lambda: greedy_with(model, prompt, max_new_tokens, lambda m, i: -m(i)[:, -1]),
        }):
            chk.rows[-1].note = f"first diverging step: {where}"
            chk.measured(f"prompt {p + 1}: the first token that differs from greedy full recompute: {where}")
            measure_length(chk, got, prompt, max_new_tokens, want)
            if log.calls and log.calls[0]["cache_len"] == 0 and log.calls[0]["len"] not in (None, T):
                chk.diagnose(f"the prefill fed {log.calls[0]['len']} of the prompt's {T} tokens (measured: the first "
                             f"forward call): prefill the whole prompt in one pass, model(prompt, cache=cache), so "
                             "every prompt token is in the cache before decoding")
            if p > 0 and log.calls and log.calls[0]["cache_len"]:
                chk.diagnose(f"cache not reset between prompts: prompt {p + 1} started with "
                             f"{log.calls[0]['cache_len']} stale positions in the cache; call cache.reset() first")
        decode = log.calls[1:]
        uses_cache = len(log.calls) >= 2 and all(c["cache_len"] is not None and c["len"] == 1 for c in decode)
        if any(c["cache_len"] is None for c in log.calls):
            why = ("the cache is not used: prefill with model(prompt, cache=cache), then feed only the newest token, "
                   "model(next_id, cache=cache)")
        else:
            why = ("the whole sequence is fed again at each decode step although the cache already holds it: the "
                   "positions are stored twice; decode steps must pass only the newest token, shape (B, 1)")
        chk.require(f"prompt {p + 1}: prefill once, then one token per step with the cache", uses_cache or len(log.calls) < 2,
                    "see the likely bug below", diagnosis=None if uses_cache else why)
        with_grad = sum(c["grad"] for c in log.calls)
        chk.require(f"prompt {p + 1}: no autograd graph (torch.no_grad)", not with_grad,
                    f"{with_grad} of {len(log.calls)} forward calls ran with gradients on",
                    diagnosis=f"the model runs with gradients on while decoding (measured: {with_grad} of "
                              f"{len(log.calls)} forward calls had torch.is_grad_enabled()): every step keeps its "
                              "graph, so memory grows with each token; wrap the loop in `with torch.no_grad():`")
    _greedy_in_bfloat16(chk, generate_greedy, seed, batch, prompts[0], max_new_tokens, n_kv_heads)
    if chk.passed:
        _greedy_at_capacity(chk, generate_greedy, seed, batch, prompts[0], n_kv_heads)
    run_contract(chk, generate_greedy, GENERATE_GREEDY)
    chk.finish()


def _greedy_at_capacity(chk: Check, generate_greedy, seed: int, batch: int, T: int, n_kv_heads,
                        max_seq_len: int = 12) -> None:
    """A request at the cache's edge: T + max_new_tokens = max_seq_len + 1, which the reference serves (its last new
    token is returned, never fed back). A decoder that feeds that token too may say the cache is full instead: an
    honest refusal. What it may not do is come back with fewer tokens than asked."""
    import tinylm
    model = tiny_model(seed, n_kv_heads=n_kv_heads, max_seq_len=max_seq_len)
    n = max_seq_len + 1 - T
    prompt = torch.randint(model.config.vocab_size, (batch, T), generator=seeded(seed + 7))
    want = ref_greedy(model, prompt, n)
    label = f"a full cache: {T} + {n} tokens = max_seq_len + 1 (the last new token is never fed)"
    try:
        got = guarded_call(generate_greedy, (model, prompt, n, tinylm.KVCache(model.config, batch)))
    except Exception as err:  # noqa: BLE001: the cache's own refusal is an answer; any other error is reported
        if "KVCache is full" in str(err):
            chk.require(label, True, "")
            return
        got = chk.call(generate_greedy, model, prompt, n, tinylm.KVCache(model.config, batch), row_label=label)
    if chk.compare(label, got, want) or not isinstance(got, torch.Tensor) or got.dim() != 2:
        return
    if got.shape[1] < want.shape[1] and torch.equal(got.cpu(), want[:, :got.shape[1]]):
        chk.diagnose(f"at the cache's edge your generate_greedy returns {got.shape[1] - T} new tokens for "
                     f"max_new_tokens = {n} (measured: prompt length {T}, max_seq_len {max_seq_len}; the tokens it "
                     f"returns are right): a request comes back whole or not at all. T + max_new_tokens = max_seq_len "
                     "+ 1 fits, as the last new token is never fed back"
                     + (", so no cap of max_seq_len - T is needed" if got.shape[1] == max_seq_len else "")
                     + "; a request the cache cannot hold makes the model raise, as it should, rather than coming "
                     "back short")


def _line_making(fn, args: tuple, made, what: str) -> trace.Located | None:
    """The learner's line after which one of its locals first holds an object made(value) accepts, seen by running
    fn(*args) again under a line tracer (an error it raises again is the check's own call's to report)."""
    found, last = [], {}

    def local(frame, event, arg):
        if found:
            return None
        if event in ("line", "return"):
            line = last.get(frame)
            if line is not None and any(made(v) for v in frame.f_locals.values()):
                code = frame.f_code
                found.append(trace.Located(code.co_filename, line, getattr(code, "co_qualname", code.co_name),
                                           trace.source_line(code.co_filename, line), [what], kind="role"))
            last[frame] = frame.f_lineno
        return local

    previous = sys.gettrace()
    sys.settrace(lambda frame, event, arg: local if is_learners_file(frame.f_code.co_filename) else None)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            guarded_call(fn, args)
    except Exception:  # noqa: BLE001: the call's error is reported by the check's own call
        pass
    finally:
        sys.settrace(previous)
    return found[0] if found else None


def _stable_prefix(runs: list[torch.Tensor]) -> int:
    """How many leading tokens every run has in common (greedy decodings of one model in several summation orders)."""
    same = torch.stack([r == runs[0] for r in runs]).all(0).all(0)
    return int(same.long().cumprod(0).sum())


def _greedy_in_bfloat16(chk: Check, generate_greedy, seed: int, batch: int, T: int, max_new_tokens: int,
                        n_kv_heads) -> None:
    """A bfloat16 model with the caller's cache in bfloat16 (a half-precision model is decoded so): the decoding runs
    and returns token ids; its tokens are judged as far as bfloat16 greedy decoding is stable (full recompute and a
    cached decode agree: past a near tie another summation order may pick the other token, which is no mistake)."""
    import tinylm
    model = tiny_model(seed, n_kv_heads=n_kv_heads, dtype=torch.bfloat16)
    cache = tinylm.KVCache(model.config, batch, dtype=torch.bfloat16)
    prompt = torch.randint(model.config.vocab_size, (batch, T), generator=seeded(seed))
    log = ForwardLog(model, limit=2 * max_new_tokens)

    def another_cache(err) -> str | None:
        used = next((c["cache"] for c in log.calls if c["cache"] is not None and c["cache"] is not cache), None)
        if used is None:
            return None
        # the line that made the cache, found by running the same call again (shown in place of the raising line)
        again = (tiny_model(seed, n_kv_heads=n_kv_heads, dtype=torch.bfloat16), prompt, max_new_tokens,
                 tinylm.KVCache(model.config, batch, dtype=torch.bfloat16))
        chk.located = _line_making(generate_greedy, again, lambda v: isinstance(v, type(used)) and v is not again[3],
                                   "a cache of its own, not the caller's") or chk.located
        keys = getattr(used, "k", None)
        held = f" holding {keys.dtype} on {keys.device}" if isinstance(keys, torch.Tensor) else ""
        return ("generate_greedy hands the model a cache of its own, not the one it was given (measured: the cache= "
                f"of the model's forward calls is another object{held}, where the model and the caller's cache are "
                "bfloat16): build no cache; reset the caller's, cache.reset(), and pass it on: the caller built it with "
                "the model's dtype and device, where a new KVCache takes its defaults, float32 on the CPU")
    try:
        got = chk.call(generate_greedy, model, prompt, max_new_tokens, cache, on_error=another_cache,
                       row_label="bfloat16 model and cache")
    finally:
        log.close()
    want = ref_greedy(model, prompt, max_new_tokens)
    stable = T + _stable_prefix([want, generate_greedy_steps(model, prompt, max_new_tokens, cache)])
    shaped = isinstance(got, torch.Tensor) and got.shape == want.shape and got.dtype == want.dtype
    chk.require("bfloat16 model and cache: decodes the same tokens",
                shaped and torch.equal(got[:, :stable].cpu(), want[:, :stable]),
                f"returned {describe(got)}" if not shaped else
                f"differs within the first {stable - T} new tokens, where bfloat16 greedy decoding is stable")


# -- contracts: the regimes each exercise promises, and its step-by-step reference ---------------
def generate_greedy_steps(model, prompt, max_new_tokens, cache):
    """Greedy decoding with a cache of its own (the learner's is theirs):
    prefill the prompt, then one token per step."""
    import tinylm
    weight = next(model.parameters())
    own = tinylm.KVCache(model.config, prompt.shape[0], device=weight.device, dtype=weight.dtype)
    idx, step_input = prompt, prompt
    with torch.no_grad():
        for _ in range(max_new_tokens):
            logits = model(step_input, cache=own)[:, -1]          # (B, V)
            next_id = logits.argmax(dim=-1, keepdim=True)         # (B, 1)
            idx = torch.cat((idx, next_id), dim=1)                # (B, T + 1)
            step_input = next_id
    return idx


def _generate_greedy_cases():
    import tinylm
    p = defaults(check_generate_greedy)
    model = tiny_model(p["seed"], n_kv_heads=p["n_kv_heads"])
    prompt = torch.randint(model.config.vocab_size, (p["batch"], p["prompts"][0]), generator=seeded(p["seed"]))
    return [("prompt 1", (model, prompt, p["max_new_tokens"], tinylm.KVCache(model.config, p["batch"])), {})]


# Located only: a decoding loop's regimes are its rows (two prompts, one cache between them).
GENERATE_GREEDY = Contract("generate_greedy", generate_greedy_steps, _generate_greedy_cases,
                           names=("model", "prompt", "max_new_tokens", "cache"), dtypes=(),
                           fixed=(("max_new_tokens", "the cache a case holds serves one call: lengths vary in the "
                                   "check's rows"),))


def cache_update_steps(past_k, past_v, k, v):
    return torch.cat((past_k, k), dim=2), torch.cat((past_v, v), dim=2)


def _cache_update_cases():
    p = defaults(check_cache_update)
    b, h, hd, seed, dtype = p["batch"], p["heads"], p["head_dim"], p["seed"], p["dtype"]
    past_k, past_v = (randn(b, h, p["past"], hd, seed=seed + i, dtype=dtype) for i in (0, 1))
    k, v = (randn(b, h, 1, hd, seed=seed + 10 + i, dtype=dtype) for i in (0, 1))
    return [("cached + 1 new", (past_k, past_v, k, v), {})]


CACHE_UPDATE = Contract("cache_update", cache_update_steps, _cache_update_cases, names=("past_k", "past_v", "k", "v"),
                        batch=("past_k", "past_v", "k", "v"), views=("k", "v", "past_k"), edges=(
                            Edge("empty cache", "for an empty cache (the prefill: past_k and past_v hold 0 positions)",
                                 lambda a: {**a, "past_k": a["past_k"][:, :, :0].clone(),
                                            "past_v": a["past_v"][:, :, :0].clone()}),))


def attention_step_steps(x, attn, cos, sin, past_k, past_v):
    """One cached attention step written out: project, split heads, rotate
    the new q and k from start = past length, append to the cache, attend
    (kv heads repeated to the query heads, mask bottom-right), merge, o_proj."""
    from .attention import attention_steps, repeat_kv_steps
    from .rope import apply_rope_steps
    B, T, _ = x.shape
    start = past_k.shape[2]
    H, K, hd = attn.n_heads, attn.n_kv_heads, attn.head_dim
    q = F.linear(x, attn.q_proj.weight).view(B, T, H, hd).transpose(1, 2)
    k = F.linear(x, attn.k_proj.weight).view(B, T, K, hd).transpose(1, 2)
    v = F.linear(x, attn.v_proj.weight).view(B, T, K, hd).transpose(1, 2)
    q, k = apply_rope_steps(q, cos, sin, start), apply_rope_steps(k, cos, sin, start)
    k_all, v_all = torch.cat((past_k, k), dim=2), torch.cat((past_v, v), dim=2)
    y = attention_steps(q, repeat_kv_steps(k_all, H // K), repeat_kv_steps(v_all, H // K))
    y = y.transpose(1, 2).reshape(B, T, H * hd)
    return F.linear(y, attn.o_proj.weight), k_all, v_all


def _step_cases(check, **fixed):
    """A decode step of the visible check's sequence: new tokens after its first chunk is cached."""
    def cases():
        p = {**defaults(check), **fixed}
        n_heads, head_dim, seed, batch = p["n_heads"], p["head_dim"], p["seed"], p["batch"]
        n_kv = n_heads if p.get("n_kv_heads") is None else p["n_kv_heads"]
        d, total = n_heads * head_dim, sum(p["steps"])
        attn = _seeded_attention(d, n_heads, n_kv, seed, p["dtype"])
        x = randn(batch, total, d, seed=seed + 7, dtype=p["dtype"]) * 2
        cos, sin = _tables(head_dim, total + 8, p["dtype"])
        start = p["steps"][0]
        sizes = {batch, n_heads, n_kv, head_dim}  # new tokens of a size of their own, so no two axes look alike
        end = start + next((t for t in range(2, total - start + 1) if t not in sizes), 1)
        with torch.no_grad():
            past_k = ref_rotate(_heads(F.linear(x[:, :start], attn.k_proj.weight), n_kv))
            past_v = _heads(F.linear(x[:, :start], attn.v_proj.weight), n_kv)
        return [(f"{end - start} new after {start}", (x[:, start:end].clone(), attn, cos, sin, past_k, past_v), {})]
    return cases


STEP_NAMES = ("x", "attn", "cos", "sin", "past_k", "past_v")


def _grouping(n_heads: int, n_kv_heads: int) -> Edge:
    """The visible step again with another head grouping (a module of its own, its own inputs and cache)."""
    def transform(args: dict) -> dict:
        p = {"batch": args["x"].shape[0], "head_dim": args["attn"].head_dim, "dtype": args["x"].dtype,
             "n_heads": n_heads, "n_kv_heads": n_kv_heads}
        (_, case, _), = _step_cases(check_attention_step, **p)()
        return dict(zip(STEP_NAMES, case))
    group = n_heads // n_kv_heads
    return Edge(f"{n_heads} heads over {n_kv_heads} kv heads",
                f"for {n_heads} query heads over {n_kv_heads} kv heads ({n_kv_heads} groups of {group})", transform)


def _step_contract(name: str, cases, edges: tuple = ()) -> Contract:
    return Contract(name, attention_step_steps, cases, names=STEP_NAMES,
                    batch=("x", "past_k", "past_v"), views=("x",), dtypes=(), edges=edges)


STEP_CONTRACTS = {
    "attention_step": _step_contract("attention_step", _step_cases(check_attention_step)),
    # The visible grouping has n_kv_heads² = n_heads: a group size taken for the group count passes it.
    "gqa_step": _step_contract("gqa_step", _step_cases(check_attention_step, batch=3, n_heads=4, n_kv_heads=2, head_dim=6),
                               edges=(_grouping(6, 2),)),
}
