"""Checks for notebook 10: summed NLL and token count, evaluation (mean NLL,
perplexity, bits per byte), and the bigram baseline.

References: F.cross_entropy(reduction="sum") and counts of non-padding
targets, math.exp of the token-weighted mean NLL, and bigram counts made
with torch.bincount on the pairs (never tinylm's own code).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .core import Check, randn, seeded
from .kv_cache import ForwardLog, tiny_model


def _as_float_tensor(value) -> torch.Tensor | None:
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return value.detach().double().reshape(())
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return torch.tensor(float(value), dtype=torch.float64)
    return None


def check_nll_sum_and_count(nll_sum_and_count, *, seed: int = 0, batch: int = 3, seq: int = 6, vocab: int = 9,
                            ignore_index: int = -100) -> None:
    """nll_sum_and_count(logits, targets, ignore_index) -> (sum of NLL over
    non-ignored targets, number of non-ignored targets)."""
    __tracebackhide__ = True
    chk = Check("nll_sum_and_count", expects="a pair (total NLL in nats, number of scored tokens)")
    logits = randn(batch, seq, vocab, seed=seed) * 2
    targets = torch.randint(vocab, (batch, seq), generator=seeded(seed))
    for b in range(batch):
        targets[b, seq - 2 * b:] = ignore_index  # row b ends with 2b padding positions
    out = chk.call(nll_sum_and_count, logits, targets, ignore_index)
    if not (isinstance(out, (tuple, list)) and len(out) == 2):
        chk._stop(f"nll_sum_and_count returned {type(out).__name__}; it should return a pair (nll_sum, count)")
    total, count = (_as_float_tensor(v) for v in out)
    flat, tgt = logits.flatten(0, 1).double(), targets.flatten()
    valid = tgt != ignore_index
    want_total = F.cross_entropy(flat[valid], tgt[valid], reduction="sum")
    padded_as_class = (lambda: F.cross_entropy(flat, tgt, reduction="sum")) if 0 <= ignore_index < vocab else None
    chk.compare("NLL sum", total if total is not None else out[0], want_total, atol=1e-4, rtol=1e-5, variants={
        "mean instead of sum: return the summed NLL, so batches can be combined by token count":
            lambda: want_total / valid.sum(),
        **({"padding counted: the padding positions are scored too; pass ignore_index to F.cross_entropy":
            padded_as_class} if padded_as_class else {}),
    })
    chk.compare("token count", count if count is not None else out[1], valid.sum().double(), atol=0, rtol=0, variants={
        "padding counted: count only the targets != ignore_index": torch.tensor(float(tgt.numel()), dtype=torch.float64),
    })
    chk.finish()


# ---------------------------------------------------------------- evaluate

def _eval_case(seed: int, batch_sizes: tuple, seq: int, vocab: int):
    """Batches of different sizes; some rows end with -100 padding."""
    batches = []
    for i, b in enumerate(batch_sizes):
        x = torch.randint(vocab, (b, seq), generator=seeded(seed + 10 + i))
        y = torch.randint(vocab, (b, seq), generator=seeded(seed + 20 + i))
        y[0, seq - 1 - i:] = -100
        batches.append((x, y))
    return batches


def _ref_eval(model, batches):
    """Per-batch (nll sum, count, numel), in eval mode, float64."""
    model.eval()
    rows = []
    with torch.no_grad():
        for x, y in batches:
            logits = model(x).double()  # (b, T, V)
            nll = F.cross_entropy(logits.flatten(0, 1), y.flatten(), ignore_index=-100, reduction="sum")
            rows.append((nll, int((y != -100).sum()), y.numel()))
    return rows


def check_evaluate(evaluate, *, seed: int = 0, batch_sizes: tuple = (3, 1, 2), seq: int = 7,
                   bytes_per_token: float = 1.5, dropout: float = 0.3) -> None:
    """evaluate(model, batches, bytes_per_token) -> {"loss", "perplexity",
    "bits_per_byte"} on a model handed over in train mode with dropout."""
    __tracebackhide__ = True
    model = tiny_model(seed, dropout=dropout, vocab=19, d_model=16, n_heads=2)
    batches = _eval_case(seed, batch_sizes, seq, 19)
    rows = _ref_eval(model, batches)
    total, count = sum(r[0] for r in rows), sum(r[1] for r in rows)
    loss = total / count
    per_batch = torch.stack([r[0] / r[1] for r in rows])                     # mean NLL of each batch
    want = {"loss": loss, "perplexity": loss.exp(), "bits_per_byte": loss / math.log(2) / bytes_per_token}
    variants = {
        "loss": {
            "per-batch means averaged: batches of different sizes get equal weight; sum the NLL and the token "
            "counts over all batches, divide once": per_batch.mean(),
            "padding counted: -100 targets must not count as tokens": total / sum(r[2] for r in rows),
        },
        "perplexity": {
            "mean of per-batch exp: perplexity is exp of the mean NLL over all tokens, not the mean of each batch's "
            "perplexity (exp is convex, so that overestimates)": per_batch.exp().mean(),
            "perplexity is exp(mean NLL) in nats; 2 ** loss treats the loss as bits": 2 ** loss,
        },
        "bits_per_byte": {
            "bits per byte: convert nats to bits by dividing by ln 2 (not multiplying)": loss * math.log(2) / bytes_per_token,
            "bits per byte: divide by bytes_per_token too": loss / math.log(2),
            "bits per byte uses log10": loss / math.log(10) / bytes_per_token,
        },
    }
    chk = Check("evaluate", expects='a dict with "loss", "perplexity" and "bits_per_byte" (floats)')
    model.train()
    log = ForwardLog(model)
    try:
        got = chk.call(evaluate, model, batches, bytes_per_token)
    finally:
        log.close()
    if not (isinstance(got, dict) and set(want) <= set(got)):
        chk._stop(f"evaluate returned {type(got).__name__}; it should return a dict with keys {sorted(want)}")
    dropout_on = any(c["training"] for c in log.calls)
    for key in want:
        value = _as_float_tensor(got[key])
        chk.compare(key, value if value is not None else got[key], want[key], atol=1e-5, rtol=1e-5,
                    variants=variants[key])
    chk.require("dropout off (eval mode)", log.calls and not dropout_on,
                "some forward passes ran in train mode",
                diagnosis="dropout on during evaluation: call model.eval() first, or the loss is that of a randomly "
                          "damaged network and changes from run to run")
    chk.require("no autograd graph (torch.no_grad)", log.calls and not any(c["grad"] for c in log.calls),
                "forward passes recorded gradients: wrap the loop in torch.no_grad()")
    chk.require("train mode restored afterwards", model.training,
                "the model was left in eval mode; restore it with model.train(was_training)")
    # Batch-size invariance: the same rows in one batch give the same loss.
    x_all = torch.cat([x for x, _ in batches])
    y_all = torch.cat([y for _, y in batches])
    model.train()
    one = chk.call(evaluate, model, [(x_all, y_all)], bytes_per_token)
    one_loss = _as_float_tensor(one.get("loss")) if isinstance(one, dict) else None
    same = one_loss is not None and abs(float(one_loss) - float(loss)) < 1e-5
    chk.require("same loss when the same rows are batched differently", same,
                "regrouping the rows into one batch changed the loss",
                diagnosis=None if same or dropout_on else "per-batch means averaged: weight every token equally, not every batch")
    chk.finish()


# ---------------------------------------------------------------- bigram

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
    got = chk.call(bigram_nll, train, val, alpha)
    value = _as_float_tensor(got)
    t, v = train.long(), val.long()
    counts = torch.bincount(t[:-1] * 256 + t[1:], minlength=65536).view(256, 256).double()

    def nll(table):
        return -table.log()[v[:-1], v[1:]].mean()

    chk.compare(f"{n_train} train bytes, {n_val} val bytes", value if value is not None else got,
                ref_bigram_nll(train, val, alpha), atol=1e-6, rtol=1e-6, variants={
        "bigram normalised over the whole table (a joint p(a, b)), not per previous byte (p(b | a))":
            lambda: nll((counts + alpha) / (counts + alpha).sum()),
        "bigram direction swapped: p(b | a) normalises over the NEXT byte b for each previous byte a":
            lambda: nll((counts + alpha) / (counts.sum(0, keepdim=True) + 256 * alpha)),
        "smoothing missing from the denominator: add 256 * alpha (alpha for each possible next byte)":
            lambda: nll((counts + alpha) / (counts.sum(1, keepdim=True) + alpha)),
        "log base 2: NLL in nats uses the natural log": lambda: ref_bigram_nll(train, val, alpha) / math.log(2),
    })
    chk.finish()
