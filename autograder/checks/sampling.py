"""Checks for notebook 08: top-k, top-p, sample_next and generate.

Filters are compared with closed-form masks. A sampler cannot be compared
draw by draw, so sample_next is judged by its *distribution*: many draws
from one row of logits, whose frequencies must match the closed-form
probabilities softmax(top_p(top_k(logits / T))) within sampling noise
(about 5 standard deviations), and its support must be exactly the kept set.
Wrong orders and off-by-ones give other closed-form distributions, which
name the bug when the frequencies match them instead.
"""
from __future__ import annotations

import torch

from .core import Check, randn, seeded
from .kv_cache import ForwardLog, ref_greedy, tiny_model

NEG_INF = float("-inf")


def ref_top_k(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Keep logits >= the k-th largest (ties with it kept), the rest -inf."""
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


def check_top_k_filter(top_k_filter, *, seed: int = 0, batch: int = 3, vocab: int = 11, ks: tuple = (3, 5, 1),
                       dtype=torch.float32) -> None:
    __tracebackhide__ = True
    chk = Check("top_k_filter", expects="logits of the same shape, -inf outside the k largest")
    x = _filter_cases(seed, batch, vocab, dtype)
    for k in ks:
        got = chk.call(top_k_filter, x.clone(), k)
        kept = ref_top_k(x, k)
        idx = x.topk(k, dim=-1).indices
        variants = {"top-k off by one: keeps k - 1 tokens": lambda: ref_top_k(x, k - 1)} if k > 1 else {}
        chk.compare(f"k={k} on {tuple(x.shape)}", got, kept, variants=variants | {
            "top-k off by one: keeps k + 1 tokens": lambda: ref_top_k(x, k + 1),
            "keeps the k smallest logits instead of the k largest": lambda: -ref_top_k(-x, k),
            "ties with the k-th largest dropped: keep every logit >= the k-th largest value":
                lambda: torch.full_like(x, NEG_INF).scatter(-1, idx, x.gather(-1, idx)),
            "filtered entries set to 0 instead of -inf: exp(0) = 1 still gives them probability":
                lambda: kept.masked_fill(kept == NEG_INF, 0.0),
            "returns probabilities instead of logits: filter the logits, softmax comes last":
                lambda: kept.softmax(-1),
        })
    chk.finish()


def check_top_p_filter(top_p_filter, *, seed: int = 1, batch: int = 3, vocab: int = 11,
                       ps: tuple = (0.05, 0.5, 0.9), dtype=torch.float32) -> None:
    __tracebackhide__ = True
    chk = Check("top_p_filter", expects="logits of the same shape, -inf outside the nucleus")
    x = randn(batch, vocab, seed=seed, dtype=dtype) * 2
    for p in ps:
        got = chk.call(top_p_filter, x.clone(), p)
        want = ref_top_p(x, p)
        chk.compare(f"p={p} on {tuple(x.shape)}", got, want, variants={
            "top-p drops the crossing token: keep the token whose probability takes the running sum past p "
            "(sum of the tokens before it < p), or a small p keeps nothing": lambda: ref_top_p(x, p, keep_crossing=False),
            "cumulative sum taken over unsorted probabilities: sort descending first": lambda: x.masked_fill(
                x.softmax(-1).cumsum(-1) - x.softmax(-1) >= p, NEG_INF),
            "nucleus computed on logits, not probabilities: softmax before the cumulative sum":
                lambda: _nucleus(x, p, x),
            "keeps the least likely tokens: sort in descending order": lambda: _nucleus(x, p, x.softmax(-1), descending=False),
        })
    chk.finish()


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
    raw = row.double()
    out = {
        "sampling before the transforms: draw from the softmax of the logits after temperature, top-k and top-p, "
        "not from the raw logits": lambda: raw.softmax(-1),
        "temperature applied after softmax: dividing probabilities by T changes nothing once they are "
        "renormalised; divide the logits": lambda: ref_distribution(row, 1.0, k, p),
        "temperature multiplied instead of divided: logits / T": lambda: ref_distribution(row * T * T, T, k, p),
    }
    if k is not None:
        out["top-k off by one: keeps k + 1 tokens"] = lambda: ref_distribution(row, T, k + 1, p)
        if k > 1:
            out["top-k off by one: keeps k - 1 tokens"] = lambda: ref_distribution(row, T, k - 1, p)
        out["top-k ignored"] = lambda: ref_distribution(row, T, None, p)
    if p is not None:
        out["top-p drops the crossing token"] = lambda: ref_top_p((raw / T) if k is None else ref_top_k(raw / T, k),
                                                                    p, keep_crossing=False).softmax(-1)
        out["top-p ignored"] = lambda: ref_distribution(row, T, k, None)
    if k is not None and p is not None:
        out["top-p applied before top-k: the order is temperature, top-k, top-p"] = \
            lambda: ref_top_k(ref_top_p(raw / T, p), k).softmax(-1)
    return out


SETTINGS = ((1.0, None, None), (0.5, None, None), (2.0, 4, None), (0.8, None, 0.6), (1.4, 5, 0.8))


def check_sample_next(sample_next, *, seed: int = 2, vocab: int = 9, n_draws: int = 20000,
                      settings: tuple = SETTINGS, dtype=torch.float32) -> None:
    """Greedy at T = 0; otherwise the frequencies of n_draws samples from one
    row of logits must match the closed-form distribution of each setting."""
    __tracebackhide__ = True
    chk = Check("sample_next", expects="token ids of shape (batch,)")
    batch = randn(4, vocab, seed=seed, dtype=dtype) * 2
    got = chk.call(sample_next, batch, 0.0, None, None, seeded(0))
    chk.compare("temperature 0 = argmax", got, batch.argmax(-1), variants={
        "temperature 0 must be greedy: return logits.argmax(-1) without sampling": lambda: batch.argmin(-1)})
    row = torch.linspace(2.5, -1.5, vocab, dtype=torch.float64)[torch.randperm(vocab, generator=seeded(seed))].to(dtype)
    noise = 5 * (0.25 / n_draws) ** 0.5   # 5 standard deviations of a frequency
    for T, k, p in settings:
        label = f"T={T}" + (f", top_k={k}" if k else "") + (f", top_p={p}" if p else "")
        draws = chk.call(sample_next, row.expand(n_draws, vocab).clone(), T, k, p, seeded(seed + 1))
        if not (isinstance(draws, torch.Tensor) and draws.shape == (n_draws,) and not draws.is_floating_point()):
            chk._stop(f"sample_next returned {_describe(draws)} for {n_draws} rows of logits; it should return "
                      f"integer token ids of shape ({n_draws},)")
        freq = torch.bincount(draws.long().cpu(), minlength=vocab)[:vocab].double() / n_draws
        want = ref_distribution(row, T, k, p)
        chk.compare(f"{label}: frequencies", freq, want, atol=noise, rtol=0,
                    variants=_distribution_variants(row, T, k, p))
        outside = int((want[draws.long().cpu().clamp(0, vocab - 1)] == 0).sum())
        chk.require(f"{label}: no draw outside the kept tokens", outside == 0,
                    f"{outside} draws picked tokens that the filters remove")
    a = chk.call(sample_next, row.expand(64, vocab).clone(), 1.0, None, None, seeded(7))
    b = chk.call(sample_next, row.expand(64, vocab).clone(), 1.0, None, None, seeded(7))
    chk.require("same generator seed, same draws", isinstance(a, torch.Tensor) and torch.equal(a, b),
                "two calls with identically seeded generators gave different tokens",
                diagnosis="the generator is not used: pass generator=generator to torch.multinomial")
    chk.finish()


def _describe(x) -> str:
    if isinstance(x, torch.Tensor):
        return f"a {x.dtype} tensor of shape {tuple(x.shape)}"
    return type(x).__name__


# ---------------------------------------------------------------- generate

def check_generate(generate, *, seed: int = 3, batch: int = 2, prompt_len: int = 4, max_new_tokens: int = 7,
                   dropout: float = 0.5) -> None:
    """generate(model, prompt, max_new_tokens, temperature, top_k, top_p,
    generator) on a model *in train mode with dropout*: greedy output must
    equal eval-mode greedy decoding, the mode must be restored, and seeded
    sampling must be reproducible."""
    __tracebackhide__ = True
    model = tiny_model(seed, dropout=dropout)
    prompt = torch.randint(model.config.vocab_size, (batch, prompt_len), generator=seeded(seed))
    want = ref_greedy(model.eval(), prompt, max_new_tokens)
    model.train()
    chk = Check("generate", expects=f"token ids (batch, prompt_len + max_new_tokens) = {(batch, prompt_len + max_new_tokens)}")
    log = ForwardLog(model)
    try:
        got = chk.call(generate, model, prompt, max_new_tokens, 0.0, None, None, None)
    finally:
        log.close()
    in_train = sum(c["training"] for c in log.calls)
    chk.compare(f"greedy, {batch}x{prompt_len} prompt + {max_new_tokens} new", got, want)
    chk.require("dropout off while generating (eval mode)", log.calls and not in_train,
                f"{in_train} of {len(log.calls)} forward passes ran in train mode",
                diagnosis="dropout left on during generation: the model was in train mode, so every step samples "
                          "from a randomly damaged network; call model.eval() before decoding")
    chk.require("no autograd graph (torch.no_grad or inference_mode)", log.calls and not any(c["grad"] for c in log.calls),
                "forward passes recorded gradients: wrap decoding in torch.no_grad()")
    chk.require("train mode restored afterwards", model.training,
                "the model was left in eval mode; remember model.training and restore it with model.train(was_training)")
    model.train()
    runs = [chk.call(generate, model, prompt, max_new_tokens, 1.0, 8, 0.9, seeded(s)) for s in (11, 11, 12)]
    ok = all(isinstance(r, torch.Tensor) and r.shape == want.shape for r in runs)
    chk.require("sampling: prompt kept at the front", ok and all(torch.equal(r[:, :prompt_len].cpu(), prompt) for r in runs),
                "the returned ids must start with the prompt")
    chk.require("sampling: same seed, same tokens", ok and torch.equal(runs[0], runs[1]),
                "two runs with identically seeded generators differ", diagnosis=None if not ok or in_train else
                "pass the generator on to sample_next")
    chk.finish()
