"""Checks for notebook 06 (KV cache) and the cached attention step of 07.

The reference for anything cached is a full recompute: run attention over
the whole sequence at once with F.scaled_dot_product_attention(is_causal=True)
and RoPE written with complex numbers, then slice out the positions a cached
step should produce. A cached step is correct exactly when it reproduces
that slice, whatever the learner does inside.
"""
from __future__ import annotations


import torch

from . import trace
from .contracts import Contract, Edge, defaults, run_contract
from ..learner_values import describe
from .framework.calling import WITHOUT, guarded_call
from .framework.check import Check
from .framework.failure import CheckFailed
from .framework.measure import randn, seeded
from .references.attention_step import call_naming_cat_axis, cache_growth, diagnose_growth, wrong_cat_axis
from .references.attention_step import attention_step_check
from .references.generation import (EVAL_MODE_GRAD_ON, TRAIN_MODE_NO_GRAD, ForwardLog, greedy_with,
                                    handed_over_in_train_mode_without_grad, measure_length, mode_given_back,
                                    ref_greedy, tiny_model)


# --------------------------------------------------------------------------
# attention_step(x, attn, cos, sin, past_k, past_v) -> (y, k_all, v_all)
# --------------------------------------------------------------------------

def check_attention_step(attention_step, *, seed: int = 0, batch: int = 2, n_heads: int = 3, n_kv_heads: int | None = None,
                         head_dim: int = 4, steps: tuple = (5, 3, 1, 1), dtype=torch.float32,
                         fn_name: str = "attention_step") -> None:
    """Feed a sequence chunk by chunk (prefill, then decode steps) and compare
    each step's output and cache with a full recompute of the whole sequence
    (references.attention_step, which gqa_step's check shares)."""
    __tracebackhide__ = True
    attention_step_check(attention_step, seed=seed, batch=batch, n_heads=n_heads, n_kv_heads=n_kv_heads,
                         head_dim=head_dim, steps=steps, dtype=dtype, fn_name=fn_name)


# --------------------------------------------------------------------------
# cache_update(past_k, past_v, k, v) -> (k_all, v_all)
# --------------------------------------------------------------------------



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
        grown: dict[tuple[str, int], list[str]] = {}  # how a cache grew -> which of k_all, v_all grew so
        for name, got, old, fresh in (("k", out[0], past_k, k), ("v", out[1], past_v, v)):
            ok = chk.compare(f"{label}: {name}_all", got, want[name], variants={
                wrong_cat_axis(d): (lambda d=d, o=old, f=fresh: torch.cat((o, f), dim=d)) for d in (0, 1, 3)
            } | {
                "new entries placed before the cached ones: the cache's entries come first, then the new ones, "
                "torch.cat((past, new), dim=2) with past the cache":
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
            how = None if ok else cache_growth(got, old, fresh)
            if how is not None:
                grown.setdefault(how, []).append(f"{name}_all")
        diagnose_growth(chk, grown, label)
    run_contract(chk, cache_update, CACHE_UPDATE)
    chk.finish()


# --------------------------------------------------------------------------
# attention_step(x, attn, cos, sin, past_k, past_v) -> (y, k_all, v_all)
# --------------------------------------------------------------------------



# --------------------------------------------------------------------------
# generate_greedy(model, prompt, max_new_tokens, cache) -> (B, T + n)
# --------------------------------------------------------------------------



def _first_divergence(got: torch.Tensor, want: torch.Tensor, prompt_len: int) -> str | None:
    """The first new token that differs ("none" where every one is equal); None where the shapes differ (the
    length is measured apart)."""
    if not isinstance(got, torch.Tensor) or got.shape != want.shape:
        return None
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
    chk = Check("generate_greedy", expects=f"token ids (batch, prompt_len + {max_new_tokens})", gradients=WITHOUT)
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
            chk.rows[-1].note = f"first diverging step: {where}" if where else "another shape"
            if where:
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
        without = [i for i, c in enumerate(log.calls) if c["cache_len"] is None]
        if without:
            # The calls may pass cache=cache already, with a name that holds None: the fix says what it must hold.
            which = ("every one of its calls" if len(without) == len(log.calls) else "the prefill" if without == [0]
                     else f"{len(without)} of its {len(log.calls)} calls, the first of them call {without[0] + 1}")
            why = (f"the cache is not used: the model is called without one (cache=None) at {which} (measured on its "
                   "calls): every call must pass a KVCache object as cache=, the prefill model(prompt, cache=cache), "
                   "then only the newest token, model(next_id, cache=cache)")
        else:
            why = ("the whole sequence is fed again at each decode step although the cache already holds it: the "
                   "cached positions are stored again at every step; decode steps must pass only the newest token, "
                   "shape (B, 1)")
        chk.require(f"prompt {p + 1}: prefill once, then one token per step with the cache", uses_cache or len(log.calls) < 2,
                    "see the likely bug below", diagnosis=None if uses_cache else why)
        _no_forward_after_the_last_token(chk, log, got, T, max_new_tokens, f"prompt {p + 1}")
        with_grad = sum(c["grad"] for c in log.calls)
        chk.require(f"prompt {p + 1}: no autograd graph (torch.no_grad)", not with_grad,
                    f"{with_grad} of {len(log.calls)} forward calls ran with gradients on",
                    diagnosis=f"the model runs with gradients on while decoding (measured: {with_grad} of "
                              f"{len(log.calls)} forward calls had torch.is_grad_enabled()): every step keeps its "
                              "graph, so memory grows with each token; wrap the loop in `with torch.no_grad():`")
    _greedy_in_bfloat16(chk, generate_greedy, seed, batch, prompts[0], max_new_tokens, n_kv_heads)
    if chk.passed:
        _greedy_batch_of_one(chk, generate_greedy, model, seed, prompts[0], max_new_tokens)
    if chk.passed:
        _no_new_token(chk, generate_greedy, model, seed, batch, prompts[0])
    if chk.passed:
        _greedy_at_capacity(chk, generate_greedy, seed, batch, prompts[0], n_kv_heads)
    if chk.passed:
        _from_train_mode_without_grad(chk, generate_greedy, model, cache, seed, batch, prompts[0], max_new_tokens)
    if chk.passed:
        _eval_mode_given_back(chk, generate_greedy, model, cache, seed, batch, prompts[0], max_new_tokens)
    if chk.passed:
        _stale_cache_handed_over(chk, generate_greedy, model, seed, batch, prompts[0], max_new_tokens)
    run_contract(chk, generate_greedy, GENERATE_GREEDY)
    chk.finish()


def _greedy_batch_of_one(chk: Check, generate_greedy, model, seed: int, T: int, max_new_tokens: int) -> None:
    """One prompt alone, (1, T), with a cache built for one row, as a chat
    decodes: the batch axis is then as long as the position axis that a
    squeeze() meant for it takes away too."""
    import tinylm
    prompt = torch.randint(model.config.vocab_size, (1, T), generator=seeded(seed + 7))
    want = ref_greedy(model, prompt, max_new_tokens)
    label = f"a batch of one (1x{T}) + {max_new_tokens} new"
    got = chk.call(generate_greedy, model, prompt, max_new_tokens, tinylm.KVCache(model.config, 1), row_label=label)
    chk.compare(label, got, want)


def _no_new_token(chk: Check, generate_greedy, model, seed: int, batch: int, T: int) -> None:
    """max_new_tokens = 0: the prompt comes back as it is, (batch, T), whatever the loop does before its first
    step (a prefill outside the loop must not add a token of its own)."""
    import tinylm
    prompt = torch.randint(model.config.vocab_size, (batch, T), generator=seeded(seed + 9))
    label = f"max_new_tokens = 0: the prompt ({batch}x{T}) as it is"
    got = chk.call(generate_greedy, model, prompt, 0, tinylm.KVCache(model.config, batch), row_label=label)
    if not chk.compare(label, got, prompt) and isinstance(got, torch.Tensor) and got.dim() == 2 \
            and got.shape[0] == batch and got.shape[1] > T:
        extra = got.shape[1] - T
        chk.measured(f"asked for no new token, your generate_greedy returns {extra} more column"
                     f"{'s' if extra > 1 else ''} after the prompt")
        _place_the_first_extra_column(chk, generate_greedy, model, prompt)


def _place_the_first_extra_column(chk: Check, generate_greedy, model, prompt: torch.Tensor) -> None:
    """The learner's line after which a tensor first holds the prompt and a column past it, in the call with
    max_new_tokens = 0 run again (a fresh cache, the model's mode given back)."""
    import tinylm
    if getattr(generate_greedy, "recheck_trace", None) is not None or chk.located is not None:
        return
    batch, T = prompt.shape
    grown = lambda v: isinstance(v, torch.Tensor) and not v.is_floating_point() and v.dim() == 2 \
        and v.shape[0] == batch and v.shape[1] > T and torch.equal(v[:, :T].cpu(), prompt)  # noqa: E731
    mode = model.training
    try:
        found = trace.line_making(generate_greedy, (model, prompt.clone(), 0, tinylm.KVCache(model.config, batch)),
                                  grown, [], "appended")
    finally:
        model.train(mode)
    if found is not None:
        chk.located = found


def _no_forward_after_the_last_token(chk: Check, log: ForwardLog, got, T: int, n: int, label: str) -> None:
    """n new tokens take n forward calls: the prefill gives the first, each
    fed token the next, and the last is returned, never fed. A loop that
    feeds it too runs the model once more than needed, and a request at the
    cache's edge (T + n = max_seq_len + 1) no longer fits."""
    calls = len(log.calls)
    if chk.require(f"{label}: {n} forward calls for {n} new tokens (the last one is returned, not fed)",
                   calls <= n, f"{calls} forward calls"):
        return
    last = log.calls[-1]
    # The last call found T + n - 1 positions cached and fed one more: the position of the n-th new token, the
    # last one returned (the count of tokens returned being right).
    if calls == n + 1 and isinstance(got, torch.Tensor) and got.dim() == 2 and got.shape[1] == T + n \
            and last["len"] == 1 and last["cache_len"] == T + n - 1:
        chk.diagnose(f"the last new token is fed back to the model (measured: {calls} forward calls for "
                     f"max_new_tokens = {n}, the last of them with T + {n - 1} positions in the cache for a prompt of "
                     "T tokens, so it fed the position of the last token your generate_greedy returns): its logits "
                     "are never used, and a request with T + max_new_tokens = max_seq_len + 1, which fits, finds the "
                     "cache full; feed a token only when another is to be generated")
    else:
        chk.measured(f"{label}: your generate_greedy called the model {calls} times for max_new_tokens = {n}; "
                     f"the prefill and one call per new token but the last make {n}")


def _from_train_mode_without_grad(chk: Check, generate_greedy, model, cache, seed: int, batch: int, T: int,
                                  max_new_tokens: int) -> None:
    """The model handed over in train mode under torch.no_grad(): greedy
    decoding's tokens, the train mode given back, grad mode left off."""
    prompt = torch.randint(model.config.vocab_size, (batch, T), generator=seeded(seed))
    want = ref_greedy(model, prompt, max_new_tokens)
    with handed_over_in_train_mode_without_grad(model):
        got = chk.call(generate_greedy, model, prompt, max_new_tokens, cache, row_label=TRAIN_MODE_NO_GRAD)
        chk.compare(f"{TRAIN_MODE_NO_GRAD}: tokens", got, want)
        mode_given_back(chk, "generate_greedy", model, True, TRAIN_MODE_NO_GRAD)


def _eval_mode_given_back(chk: Check, generate_greedy, model, cache, seed: int, batch: int, T: int,
                          max_new_tokens: int) -> None:
    """The model handed over in eval mode with gradients on, as the visible
    calls hand it: the eval mode given back (a model.train() at the end
    switches it whatever mode it came in; the checks' model has no dropout,
    so no token shows it)."""
    prompt = torch.randint(model.config.vocab_size, (batch, T), generator=seeded(seed + 3))
    model.eval()
    chk.call(generate_greedy, model, prompt, max_new_tokens, cache, row_label=EVAL_MODE_GRAD_ON)
    mode_given_back(chk, "generate_greedy", model, False, EVAL_MODE_GRAD_ON)


def _stale_cache_handed_over(chk: Check, generate_greedy, model, seed: int, batch: int, T: int,
                             max_new_tokens: int, stale: int = 3) -> None:
    """A cache that arrives holding positions (a caller's own prefill, a
    generation stopped halfway): the tokens are the prompt's alone, so the
    function empties the cache before its prefill. Calls that each leave
    the cache empty pass the reused-cache rows without doing so."""
    import tinylm
    cache = tinylm.KVCache(model.config, batch)
    with torch.no_grad():
        model(torch.randint(model.config.vocab_size, (batch, stale), generator=seeded(seed + 11)), cache=cache)
    prompt = torch.randint(model.config.vocab_size, (batch, T), generator=seeded(seed + 5))
    want = ref_greedy(model, prompt, max_new_tokens)
    label = f"a cache handed over holding {stale} positions of an earlier text"
    log = ForwardLog(model, limit=2 * max_new_tokens)
    try:
        got = chk.call(generate_greedy, model, prompt, max_new_tokens, cache, row_label=label)
    finally:
        log.close()
    if not chk.compare(f"{label}: tokens", got, want) and log.calls and log.calls[0]["cache_len"]:
        chk.diagnose(f"the cache is not emptied before the prefill (measured: handed a cache holding {stale} "
                     f"positions, your generate_greedy's first forward call found {log.calls[0]['cache_len']} in it, "
                     "so the prompt was placed after them): call cache.reset() at the start, before the prefill")


def _greedy_at_capacity(chk: Check, generate_greedy, seed: int, batch: int, T: int, n_kv_heads,
                        max_seq_len: int = 12) -> None:
    """A request at the cache's edge: T + max_new_tokens = max_seq_len + 1, which the reference serves (its last new
    token is returned, never fed back; a decoder that feeds it too fails the forward-count rows before this). A
    refusal by the cache here is an honest one; what a decoder may not do is come back with fewer tokens than asked."""
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
        chk.located = trace.line_making(generate_greedy, again,
                                        lambda v: isinstance(v, type(used)) and v is not again[3],
                                        ["a cache of its own, not the caller's"], "role") or chk.located
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


