"""The cached attention step's check, shared by notebook 06's attention_step
and notebook 07's gqa_step (the same step with fewer kv heads): the
reference is a full recompute (attention over the whole sequence at once,
RoPE with complex numbers) sliced to the positions a cached step produces,
with the contracts (regimes) of the step and what a wrong cache measurably
does (its length, the axis it grows along, the rotation of its keys)."""
from __future__ import annotations

import contextlib
import io
import re

import torch
import torch.nn.functional as F

from .. import trace
from ...diagnosis_record import confirmed, measured
from ...learner_values import describe
from ..contracts import Contract, Edge, defaults, run_contract
from ..framework.calling import guarded_call
from ..framework.check import Check
from ..framework.failure import CheckFailed
from ..framework.measure import randn
from ..spies import attention_operands, unrepeated_bug
from .attention import ref_mask
from .heads import HEAD_MISMATCH, TILED, head_mismatch_fact, ref_repeat_kv
from .hints import finish_with_upstream
from .rope import ref_angles, ref_rotate, rotated_after_update, rotated_with_the_cache


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
        if m and len(args) == 6 and (widened := _widened_before_cache(fn, args, text)) is not None:
            raise err.with_line(widened) from None
        if HEAD_MISMATCH.search(text):
            operands = attention_operands(fn, lambda: fn(*args))
            bug = unrepeated_bug(operands and (operands["queries"], operands["keys"], operands["values"]))
            raise (err.with_likely_bug(bug) if bug else err.with_line(head_mismatch_fact(text, operands))) from None
        if re.search(r"must match the size of tensor|shape of the mask|attn_mask", text) and len(args) == 6:
            found = _attention_inputs(fn, args)
            if found is not None:
                raise found(err) from None
        if rotated := rotated_after_update(text, args):
            raise err.with_likely_bug(rotated) from None
        raise


def _widened_before_cache(fn, args, text: str):
    """For a step (x, attn, cos, sin, past_k, past_v) whose cat along the sequence axis raised on the head axis:
    the past has n_kv heads and the new tensor more. Measured from the error's sizes; the repetition before the
    cache is said as the cause only where the tracer, re-running the raising call, finds the new tensor the cat
    was handed and its heads are n_kv heads each copied n_heads // n_kv times (repeat_interleave or tiled)."""
    found = re.search(r"except in dimension (?:2|-2)\. Expected size (\d+) but got size (\d+) for tensor number 1", text)
    past_k = args[4]
    if found is None or past_k.dim() != 4 or int(past_k.shape[1]) != int(found.group(1)):
        return None
    n_kv, wide = int(found.group(1)), int(found.group(2))
    fact = (f"the cache update joins the past's {n_kv} kv heads with a new tensor of {wide} heads (measured: "
            f"torch.cat's sizes, past_k {tuple(past_k.shape)})")
    if wide <= n_kv or wide % n_kv:
        return measured(fact)
    rep = wide // n_kv
    with contextlib.redirect_stdout(io.StringIO()):
        recorded = trace.record_learner(fn, args, call=lambda *a: guarded_call(fn, a))
    new, which = None, "keys or values"
    if recorded.failed is not None:
        failed = recorded.ops[recorded.failed]
        for shape, j, slot in zip(failed.input_shapes, failed.inputs, failed.slots):
            if len(shape) == 4 and shape[1] == wide and j >= 0 and slot < len(recorded.ops[j].outputs):
                new = recorded.ops[j].outputs[slot]
        # the other operand is the call's past_k (input 4) or past_v (input 5): which cache raised
        tensors = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]  # call input k: the k-th tensor
        owners = {-2 - tensors.index(4): "keys", -2 - tensors.index(5): "values"}
        which = next((owners[j] for j in failed.inputs if j in owners), which)
    copies = new is not None and new.numel() > 0 and (
        torch.equal(new, new[:, ::rep].repeat_interleave(rep, dim=1)) or torch.equal(new, new[:, :n_kv].repeat(1, rep, 1, 1)))
    if not copies:
        return measured(fact)
    return confirmed(f"the new {which} are repeated to the {wide} query heads before the cache update (measured: "
                     f"torch.cat joins the past's {n_kv} kv heads with new {which} of {wide} heads, which are {n_kv} "
                     f"heads each copied {rep} times): the cache holds the {n_kv} kv heads; cache the unrepeated keys "
                     "and values, and repeat them (repeat_kv) only for the attention")


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
    mask_reads = [(s, j) for s, (j, slot) in zip(failed.input_shapes, zip(failed.inputs, failed.slots))
                  if _is_bool(recorded, j, slot) and len(s) >= 2]
    masks = [s for s, _ in mask_reads]
    floats = [s for s, (j, slot) in zip(failed.input_shapes, zip(failed.inputs, failed.slots))
              if not _is_bool(recorded, j, slot) and len(s) == 4]
    if masks and tuple(masks[0][-2:]) != (new, total):
        # The mask is the symptom; where its rows are the new tokens, its width says how many cached positions
        # the code counted, a number to set beside past_k's axes (which axis it was read from is the learner's).
        counted, past = int(masks[0][-1]) - new, int(past_k.shape[2])
        read = [str(a) for a in range(past_k.dim()) if a != 2 and int(past_k.shape[a]) == counted]
        # A width of T_new alone counts nothing: said as the cached positions left out, not as "0 counted".
        width = "" if int(masks[0][-2]) != new or counted == past else (
            f"; its width {new} is T_new alone: the {past} cached positions past_k holds (past_k.shape[2]) are left "
            "out") if counted == 0 else (
            f"; its width {int(masks[0][-1])} = {new} + {counted} counts {counted} cached positions where past_k holds "
            f"{past} (past_k.shape[2])" + (f", and {counted} is past_k.shape[{' or '.join(read)}]" if read else ""))
        kept = _kept_on(args[1], recorded, mask_reads[0][1])
        kept = "" if kept is None else (
            f"; it is the mask your code keeps on the attention module as attn.{kept} (measured: no operation of "
            f"this call made the mask it read, and attn.{kept} holds it), made at an earlier call and fitting that "
            "call's scores only: build the mask at every call")
        return lambda err: err.with_likely_bug(
            f"the mask does not fit the scores: yours is {tuple(masks[0])} (measured where your code raised), the "
            f"scores are (T_new, T_past + T_new) = ({new}, {total}){width}{kept}: use causal_mask(T_new, T_past + "
            "T_new), where T_past = past_k.shape[2] is the number of cached positions")
    short = [s for s in floats[1:] if s[-2] == new != total]
    if masks and short:
        return lambda err: err.with_likely_bug(
            f"the keys or values attention reads have {new} positions (measured where your code raised: shape "
            f"{tuple(short[0])}), while the mask has T_past + T_new = {total}: the cached positions are missing; "
            "attend over k_all and v_all, the cache after the step")
    return None


def _kept_on(module, recorded, j: int) -> str | None:
    """The name of the attribute (or buffer) of `module` holding the mask
    the raising call read, where that mask was made by no operation of the
    call (a leaf of the trace); None otherwise."""
    if not isinstance(module, torch.nn.Module) or j > trace.LEAF or trace.LEAF - j >= len(recorded.leaves):
        return None
    mask = recorded.leaves[trace.LEAF - j]
    held = {**vars(module), **dict(module.named_buffers(recurse=False))}
    return next((name for name, value in held.items() if isinstance(value, torch.Tensor) and value.dtype == mask.dtype
                 and value.shape == mask.shape and torch.equal(value.cpu(), mask.cpu())), None)


def _is_bool(recorded, j: int, slot: int) -> bool:
    if j >= 0 and slot < len(recorded.ops[j].outputs):
        return recorded.ops[j].outputs[slot].dtype == torch.bool
    if j <= trace.LEAF and trace.LEAF - j < len(recorded.leaves):
        return recorded.leaves[trace.LEAF - j].dtype == torch.bool
    if -2 - j >= 0 and -2 - j < len(recorded.inputs):
        return recorded.inputs[-2 - j].dtype == torch.bool
    return False


def wrong_cat_axis(d: int) -> str:
    """The known variant of a cache concatenated along axis d, not the sequence axis."""
    return (f"KV cache concatenated along the wrong axis (dim={d}, the {AXES[d]} axis); new positions go along the "
            "sequence axis, dim=2 of (B, n_kv, T, hd)")


def cache_growth(got, past: torch.Tensor, new: torch.Tensor) -> tuple[str, int] | None:
    """How the learner's cache grew, measured from the shapes: ("stack", its
    number of axes) for a new axis, ("axis", d) for growth along axis d
    other than the sequence's, None otherwise."""
    if not isinstance(got, torch.Tensor):
        return None
    if got.dim() == past.dim() + 1:
        return ("stack", got.dim())
    if got.dim() != past.dim():
        return None
    grew = [d for d in range(past.dim()) if got.shape[d] == past.shape[d] + new.shape[d] and got.shape[d] != past.shape[d]]
    return ("axis", grew[0]) if grew and 2 not in grew else None


def diagnose_growth(chk: Check, grown: dict[tuple[str, int], list[str]], case: str) -> None:
    """One line per way the caches grew, naming every cache that grew so
    (k_all and v_all) and the case it was measured in (a later case may
    raise, and show no shape): one cause is said once. A wrong axis measured
    here states the cause of that axis's known variant, which is not said again."""
    for (how, n), names in grown.items():
        said = " and ".join(names)
        if how == "stack":
            chk.diagnose(f"{said} {'has' if len(names) == 1 else 'each have'} {n} axes: torch.stack adds a new axis; "
                         "torch.cat((past, new), dim=2) appends along the existing sequence axis")
        else:
            chk.diagnose(f"KV cache concatenated along the wrong axis (dim={n}, the {AXES[n]} axis): your {said} "
                         f"grew along that axis (measured from {'its shape' if len(names) == 1 else 'their shapes'}, "
                         f"{case}); "
                         "new positions go along the sequence axis, dim=2 of (B, n_kv, T, hd)", states=[wrong_cat_axis(n)])


def _rotated_for_words(found: list[tuple[int, int, int, int]]) -> str:
    """New keys rotated for other positions, said once for every step it
    was measured at ((first, last) rotated for, (first, last) expected);
    when each step's start at 0 it is the known cause RESTART, said here."""
    restart = "positions restart at 0: " if all(first == 0 for first, *_ in found) else ""
    said = ", and ".join(f"{first}..{last}, not {start}..{end}" for first, last, start, end in found)
    # Rotated from 2·T_past on: the code has the offset already, and adds it a second time.
    if all(start > 0 and first == 2 * start and last - first == end - start for first, last, start, end in found):
        return (f"the new keys are rotated for positions {said}: each is shifted by the number of cached positions "
                "twice (measured: they start at 2·past_k.shape[2]); the offset belongs in one place, e.g. a slice "
                "cos[start_pos:] or a start_pos given to the rotation, not both")
    return (f"{restart}the new keys are rotated for positions {said}: RoPE positions of the new tokens start at the "
            "number of cached positions, start_pos = past_k.shape[2]")


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


def _attend(q, k, v, mask=None, tile=False, scale=None):
    """Attention of q (B, H, Tq, hd) over k, v (B, n_kv, Tk, hd); `mask` (Tq, Tk)
    or None; tile=True maps query head h to kv head h % n_kv (the tiling bug);
    scale: the scores' factor, 1/sqrt(hd) when None."""
    rep = q.shape[1] // k.shape[1]
    if tile:
        k, v = k.repeat(1, rep, 1, 1), v.repeat(1, rep, 1, 1)
    else:
        k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)


RESTART = ("positions restart at 0: the new tokens are rotated as if they were the first ones; pass "
           "start_pos = number of cached positions to apply_rope")


def _rotation_offset(got_new: torch.Tensor, raw: torch.Tensor, limit: int) -> int | None:
    """The start position s for which got_new == raw rotated from s (None if none fits)."""
    for s in range(limit):
        if got_new.shape == raw.shape and torch.allclose(got_new.double(), ref_rotate(raw, s).double(), atol=1e-4, rtol=1e-4):
            return s
    return None


def attention_step_check(attention_step, *, seed: int = 0, batch: int = 2, n_heads: int = 3, n_kv_heads: int | None = None,
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
            "the queries and the keys rotated one position apart (the queries one ahead, start_pos + 1, or the keys "
            "one behind): every score sees a distance off by one; rotate both from start_pos = past_k.shape[2]":
                lambda: merge(_attend(ref_rotate(_heads(F.linear(xs, W["q"]), n_heads), start + 1), K, V, mask)),
            "mask wrong for the new tokens: it is aligned top-left (is_causal=True, or tril without offset): new "
            "token i sees keys 0 .. i only, the first of the cache, where it must see keys 0 .. past + i (every "
            "cached key and the new ones up to itself); use causal_mask(new, past + new), which is bottom-right "
            "aligned":
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
            "the keys passed as the values too: attention mixes the cached keys (k_all); pass v_all as the "
            "values": lambda: merge(_attend(q_new, K, K, mask)),
            "the values passed as the keys too: the scores are q · v; pass k_all as the keys":
                lambda: merge(_attend(q_new, V, V, mask)),
            "the scores not scaled by 1/sqrt(head_dim) (scale=1.0, or a scale computed as 1 where head_dim "
            "belongs): F.scaled_dot_product_attention scales by 1/sqrt(head_dim) itself when scale is None":
                lambda: merge(_attend(q_new, K, V, mask, scale=1.0)),
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
            "keys split into heads without the transpose: view(B, T, n_kv_heads, hd).transpose(1, 2), not "
            "view(B, n_kv_heads, T, hd)": lambda: torch.cat(
                (k_all[:, :, :start], ref_rotate(F.linear(xs, W["k"]).view(batch, n_kv, n, head_dim), start)), dim=2),
            "the whole key cache rotated after appending (measured: your k_all is the cached keys and the new raw "
            "keys, appended, then rotated at positions 0 .. past + new - 1): the cached keys are stored rotated, so "
            "each is turned a second time; rotate the new keys only, from start_pos = past, then append them":
                ref_rotate(torch.cat((k_all[:, :, :start], k_raw[:, :, start:end]), dim=2)).to(K.dtype),
        }))
        if not k_ok and n > 1 and isinstance(k_got, torch.Tensor) and k_got.shape == K.shape:
            s = _rotation_offset(k_got[:, :, start:end].detach().cpu(), k_raw[:, :, start:end], total + 4)
            after = rotated_with_the_cache(k_got, k_all, start, n, s)
            if after:
                chk.diagnose(after)
            elif s is not None and s != start:
                chk.diagnose_at("new keys' positions", (s, s + n - 1, start, end - 1), _rotated_for_words,
                                states=[RESTART] if s == 0 else [])
        ok &= k_ok
        ok &= chk.compare(f"{label}: v_all", v_got, V, variants=cache_variants(v_all, {
            "RoPE applied to values: only queries and keys are rotated": lambda: torch.cat(
                (v_all[:, :, :start], ref_rotate(v_all[:, :, start:end], start)), dim=2),
            "values computed with k_proj: v = attn.v_proj(x)": lambda: torch.cat(
                (v_all[:, :, :start], k_raw[:, :, start:end]), dim=2),
            "the new keys, rotated, appended to the value cache (k where v belongs in the cache update): the "
            "value cache takes v, the values attn.v_proj(x) makes": lambda: torch.cat(
                (v_all[:, :, :start], k_all[:, :, start:end]), dim=2),
            "values split into heads without the transpose: view(B, T, n_kv_heads, hd).transpose(1, 2), not "
            "view(B, n_kv_heads, T, hd)": lambda: torch.cat(
                (v_all[:, :, :start], F.linear(xs, W["v"]).view(batch, n_kv, n, head_dim)), dim=2),
        }))
        _measure_cache_length(chk, label, {"k_all": k_got, "v_all": v_got}, start, n)
        if not ok and first_bad is None:
            first_bad = label
        start = end
    if first_bad is not None:
        chk.measured(f"the first step that differs from a full recompute: {first_bad}")
    run_contract(chk, attention_step, STEP_CONTRACTS[fn_name])
    return chk


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
        (_, case, _), = _step_cases(attention_step_check, **p)()
        return dict(zip(STEP_NAMES, case))
    group = n_heads // n_kv_heads
    return Edge(f"{n_heads} heads over {n_kv_heads} kv heads",
                f"for {n_heads} query heads over {n_kv_heads} kv heads ({n_kv_heads} groups of {group})", transform)


def _step_contract(name: str, cases, edges: tuple = ()) -> Contract:
    return Contract(name, attention_step_steps, cases, names=STEP_NAMES,
                    batch=("x", "past_k", "past_v"), views=("x",), dtypes=(), edges=edges)


STEP_CONTRACTS = {
    "attention_step": _step_contract("attention_step", _step_cases(attention_step_check)),
    # The visible grouping has n_kv_heads² = n_heads: a group size taken for the group count passes it.
    "gqa_step": _step_contract("gqa_step", _step_cases(attention_step_check, batch=3, n_heads=4, n_kv_heads=2, head_dim=6),
                               edges=(_grouping(6, 2),)),
}


def ref_cache_update(past_k, past_v, k, v):
    """Correct exercise 1 of notebook 06 (for upstream attribution)."""
    return torch.cat((past_k, k), dim=2), torch.cat((past_v, v), dim=2)
