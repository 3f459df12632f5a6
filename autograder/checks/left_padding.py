"""Check for notebook 06's batched decoding of left-padded prompts:
generate_left_padded(model, prompts, max_new_tokens, cache, pad_id).

The reference is independent of the code under test: each prompt decoded
alone (no padding, no mask, no cache), greedily. The model the learner's
function receives is a stand-in (PaddedBatchSpy) that records what every
forward call is handed (ids, the cache's length, positions, attention mask)
and passes it on. A failing row is explained from those records, and a
cause is named as certain only when the learner's function, run again with
that part replaced by the right values, gives every row the reference;
otherwise the records are said as measured facts with the candidates.
"""
from __future__ import annotations

import torch

import tinylm

from ..diagnosis_record import confirmed, measured
from .framework.check import Check
from .framework.measure import seeded
from ..learner_values import describe
from .references.generation import (EVAL_MODE_GRAD_ON, TRAIN_MODE_NO_GRAD, handed_over_in_train_mode_without_grad,
                                    mode_given_back, ref_greedy, tiny_model)
from .framework.calling import WITHOUT, quiet_call


class PaddedBatchSpy(tinylm.Transformer):
    """Stands in for the model handed to the learner's left-padded decoding:
    every forward call is recorded (the ids, the KV cache's length at entry,
    the positions and the attention mask it was given, as copies) and passed
    on to the real model unchanged, or, for a counterfactual re-run, with the
    positions and/or the mask replaced by the right ones for the slots the
    call covers. `pads` (one per row) is read from the first call's width;
    the right values assume the prompts sit at the end of that width (left
    padding), which is only what the caller compares against, never assumed
    of the learner's ids.

    A tinylm.Transformer by type only (none of its own layers are built): so
    that the grader's trusted recheck keeps it, like the check's model in
    the other decoding exercises, in the trusted process, where its records
    are read."""

    def __init__(self, model: torch.nn.Module, lengths: list[int], fix: tuple = (), limit: int = 64):
        torch.nn.Module.__init__(self)
        self.inner, self.lengths, self.fix, self.limit = model, list(lengths), set(fix), limit
        self.config = model.config
        self.calls: list[dict] = []
        self.pads: list[int] | None = None

    def forward(self, idx, cache=None, positions=None, attention_mask=None):
        if len(self.calls) >= self.limit:
            raise RuntimeError(f"the check stopped the decoding after {self.limit} forward passes of the model, more "
                               "than max_new_tokens allows: does the loop stop after max_new_tokens steps?")
        start = cache.length if isinstance(cache, tinylm.KVCache) else 0
        if self.pads is None and isinstance(idx, torch.Tensor) and idx.dim() == 2:
            self.pads = [max(idx.shape[1] - n, 0) for n in self.lengths]
        copy_of = lambda t: t.detach().clone().cpu() if isinstance(t, torch.Tensor) else t  # noqa: E731
        self.calls.append({"idx": copy_of(idx), "start": start, "positions": copy_of(positions),
                           "mask": copy_of(attention_mask), "cached": cache is not None})
        if self.pads is not None and isinstance(idx, torch.Tensor) and idx.dim() == 2:
            if "positions" in self.fix:
                positions = self.right_positions(start, idx.shape[1]).to(idx.device)
            if "mask" in self.fix:
                attention_mask = self.right_mask(start + idx.shape[1]).to(idx.device)
        return self.inner(idx, cache=cache, positions=positions, attention_mask=attention_mask)

    def right_mask(self, width: int) -> torch.Tensor:
        """(B, width) bool: slot j of row b is a real token from slot pads[b] on."""
        slots = torch.arange(width)
        return torch.stack([slots >= p for p in self.pads])

    def right_positions(self, start: int, n: int) -> torch.Tensor:
        """(B, n): slots start .. start + n - 1 of each row, counted from 0 at the row's first real token (0 on pads)."""
        slots = torch.arange(start, start + n)
        return torch.stack([(slots - p).clamp(min=0) for p in self.pads])


# ---------------------------------------------------------------- left-padded batch decoding

POS_PROMPT = "positions counted from the padded start"
# the prompt's positions right, a new token's counted from the padded start (the cache's length, pads included)
POS_DECODE = "new tokens' positions counted from the padded start"
MASK_NONE = "pad keys not masked"
MASK_AS_REAL = "pad keys marked as real tokens"
MASK_RIGHT = "mask built for right padding"
MASK_NOT_CARRIED = "mask not carried into the cached steps"


def _span(a: int, b: int) -> str:
    return f"slot {a}" if a == b else f"slots {a}..{b}"


class _PaddedCalls:
    """What the learner's decoding handed the model, call by call (a
    PaddedBatchSpy's record), read against the right values for a left-padded
    batch: each finding is (cause it names, which part a counterfactual
    replaces: "positions" or "mask", the measured fact)."""

    def __init__(self, spy: PaddedBatchSpy, prompts: list[torch.Tensor]):
        self.spy, self.prompts = spy, prompts
        self.findings: list[tuple[str, str, str]] = []
        self.layout = None  # a fact when the first call's ids are not the prompts padded on the left

    def read(self) -> None:
        calls, spy = self.spy.calls, self.spy
        if not calls or spy.pads is None:
            return
        first = calls[0]["idx"]
        if not all(torch.equal(first[b, p:].long(), prompt) for b, (p, prompt) in enumerate(zip(spy.pads, self.prompts))):
            rows = [b for b, (p, prompt) in enumerate(zip(spy.pads, self.prompts)) if not torch.equal(first[b, p:].long(), prompt)]
            right = all(torch.equal(first[b, :len(prompt)].long(), prompt) for b, prompt in enumerate(self.prompts))
            self.layout = (f"the first forward pass gets ids of shape {tuple(first.shape)} whose row {rows[0]} does not end "
                           "with its prompt" + (" (every prompt sits at the start of its row: padded on the right)"
                                                if right else ""))
            return
        self._positions(calls)
        self._masks(calls)

    def _positions(self, calls) -> None:
        spy = self.spy
        for i, call in enumerate(calls):
            idx = call["idx"]
            if not isinstance(idx, torch.Tensor) or idx.dim() != 2:
                return
            n = idx.shape[1]
            slots = torch.arange(call["start"], call["start"] + n).expand(idx.shape[0], n)
            given = call["positions"]
            if given is not None and (not isinstance(given, torch.Tensor) or tuple(given.shape) != tuple(idx.shape)):
                return
            got = slots if given is None else given.long()
            want = spy.right_positions(call["start"], n)
            real = slots >= torch.tensor(spy.pads)[:, None]
            bad = ((got != want) & real).any(-1).nonzero().flatten().tolist()
            below = ((got < 0) & ~real).any(-1).nonzero().flatten().tolist()
            if not bad and below and given is not None:
                # every real token's position right, the padding's below 0: never read, but no table row -1 exists
                b = below[0]
                where = "the prompt's forward pass" if i == 0 else f"decoding step {i} (forward call {i + 1})"
                self.findings.append(("positions", "positions", (
                    f"at {where}, row {b}'s {spy.pads[b]} padding slots are given positions "
                    f"{sorted(set(got[b][~real[b]].tolist()))} (your positions), below 0, and every real token the "
                    "right one: the model takes a position in [0, max_seq_len) at every slot, pads included, though "
                    "a pad's is never read; clamp them, (mask.cumsum(-1) - 1).clamp(min=0)")))
                return
            if not bad:
                continue
            b = bad[0]
            j = int(((got[b] != want[b]) & real[b]).nonzero()[0])  # the first real slot given a wrong position
            where = "the prompt's forward pass" if i == 0 else f"decoding step {i} (forward call {i + 1})"
            source = "no positions passed, so tinylm counts slots" if given is None else "your positions"
            padded_start = bool(((got == slots) | ~real).all()) and any(spy.pads)
            fact = (f"at {where}, row {b}'s token in slot {int(slots[b, j])} is given position {int(got[b, j])} "
                    f"({source}), but it is token {int(want[b, j])} of its row counted from its first real token "
                    f"(row {b} has {spy.pads[b]} pads in front)")
            before = calls[i - 1]["positions"] if i else None
            if (given is not None and isinstance(before, torch.Tensor) and before.dim() == 2
                    and before.shape[0] == idx.shape[0] and j == 0):
                last, fed = int(before[b, -1]), before.shape[1]
                if fed > 1 and int(got[b, 0]) == last + fed:
                    fact += (f"; that is its position at the call before, {last}, plus {fed}, the number of tokens "
                             "that call was fed, where the next token's position is one more")
            cause = (POS_DECODE if i else POS_PROMPT) if padded_start else "positions"
            self.findings.append((cause, "positions", fact))
            return

    def _masks(self, calls) -> None:
        spy = self.spy
        for i, call in enumerate(calls):
            idx, given = call["idx"], call["mask"]
            if not isinstance(idx, torch.Tensor) or idx.dim() != 2:
                return
            width = call["start"] + idx.shape[1]
            want = spy.right_mask(width)
            where = "the prompt's forward pass" if i == 0 else f"decoding step {i} (forward call {i + 1})"
            if given is None:
                if not any(spy.pads):
                    return
                if i > 0 and calls[0]["mask"] is not None:
                    self.findings.append((MASK_NOT_CARRIED, "mask", f"the prompt's forward pass gets an attention_mask, "
                                          f"{where} gets none, so its new token attends to the padding keys kept in the "
                                          "cache"))
                else:
                    self.findings.append((MASK_NONE, "mask", f"{where} gets no attention_mask, so every query attends "
                                          "to the padding"))
                return
            if not isinstance(given, torch.Tensor) or given.is_floating_point() or tuple(given.shape) != tuple(want.shape):
                return  # tinylm's own message reaches the learner as the error of their call
            mask = given.bool()
            if torch.equal(mask, want):
                continue
            b = int((mask != want).any(-1).nonzero()[0])
            p, n = spy.pads[b], width - spy.pads[b]
            right = torch.stack([torch.arange(width) < width - pads for pads in spy.pads])
            if torch.equal(mask, ~want):
                self.findings.append(("mask inverted", "mask", f"at {where} your attention_mask is True at the padding and "
                                      "False at the real tokens: tinylm's attention_mask (like Hugging Face's) is True, "
                                      "or 1, at real tokens; PyTorch's key_padding_mask is the opposite convention"))
            elif torch.equal(mask, right):
                self.findings.append((MASK_RIGHT, "mask", f"at {where} row {b}'s attention_mask is True at "
                                      f"{_span(0, n - 1)} and False after, the layout of a right-padded row; its padding "
                                      f"is in front, {_span(0, p - 1)}"))
            elif bool(mask[~want].all()):
                self.findings.append((MASK_AS_REAL, "mask", f"at {where} your attention_mask marks the padding as real "
                                      f"(row {b}: True at its pads, {_span(0, p - 1)})"))
            else:
                wrong = (mask[b] != want[b]).nonzero().flatten().tolist()
                self.findings.append(("mask", "mask", f"at {where} row {b}'s attention_mask is wrong at slots "
                                      f"{wrong[:6]} (it has {p} pads in front, then {n} real tokens)"))
            return


def _longest_first(fn, model, prompts, max_new_tokens: int, pad_id: int, alone):
    """For a call that raised on prompts whose first is not the longest: the same prompts handed over longest
    first. Where that re-run gives every prompt its decoding alone, the order of the prompts is what made the call
    raise: the width follows the first prompt (confirmed); where it only runs, that is said as measured."""
    lengths = [len(p) for p in prompts]
    order = sorted(range(len(prompts)), key=lambda b: -lengths[b])  # stable: ties keep their order
    if lengths[0] == max(lengths):
        return None
    out = _rerun_in_order(fn, model, prompts, order, max_new_tokens, pad_id)
    if out is None:
        return None
    said = ", ".join(str(lengths[b]) for b in order)
    rows_right = tuple(out.shape) == tuple(alone.shape) and torch.equal(out.long().cpu(), alone[order])
    if not rows_right:
        return measured(f"with the prompts of {', '.join(map(str, lengths))} tokens your function raises; handed the "
                        f"same prompts longest first ({said}) it runs: the raise depends on which prompt comes first")
    return confirmed(f"the padded width is the first prompt's length, not the longest prompt's (measured: with prompts "
                     f"of {', '.join(map(str, lengths))} tokens your function raises; handed the same prompts longest "
                     f"first ({said}) it returns every prompt's tokens decoded alone): each row must hold the longest "
                     "prompt, T = max(len(p) for p in prompts)")


def _rerun_in_order(fn, model, prompts, order, max_new_tokens: int, pad_id: int):
    spy = PaddedBatchSpy(model, [len(prompts[b]) for b in order], limit=4 * max_new_tokens + 4)
    out = quiet_call(fn, spy, [prompts[b].clone() for b in order], max_new_tokens,
                     tinylm.KVCache(model.config, len(prompts)), pad_id)
    return out if isinstance(out, torch.Tensor) else None


def _rerun_restores(fn, model, prompts, lengths, max_new_tokens, pad_id, alone, fix) -> bool:
    """The learner's function run again with the positions and/or the mask it hands the model replaced by the right
    ones: True when every row then equals decoding its prompt alone."""
    spy = PaddedBatchSpy(model, lengths, fix=fix, limit=4 * max_new_tokens + 4)
    cache = tinylm.KVCache(model.config, len(prompts))
    out = quiet_call(fn, spy, [p.clone() for p in prompts], max_new_tokens, cache, pad_id)
    return isinstance(out, torch.Tensor) and tuple(out.shape) == tuple(alone.shape) and torch.equal(out.long().cpu(), alone)


def _from_train_mode_without_grad(chk: Check, fn, model, prompts, lengths, max_new_tokens: int, pad_id: int,
                                  alone: torch.Tensor) -> None:
    """The model handed over in train mode under torch.no_grad(): each
    prompt's tokens as decoded alone, the train mode given back, grad mode
    left off."""
    spy = PaddedBatchSpy(model, lengths, limit=4 * max_new_tokens + 4)
    label = TRAIN_MODE_NO_GRAD
    with handed_over_in_train_mode_without_grad(spy):
        got = chk.call(fn, spy, [p.clone() for p in prompts], max_new_tokens,
                       tinylm.KVCache(model.config, len(prompts)), pad_id, row_label=label)
        shaped = isinstance(got, torch.Tensor) and tuple(got.shape) == tuple(alone.shape)
        same = shaped and torch.equal(got.long().cpu(), alone)
        chk.require(f"{label}: new tokens = each prompt decoded alone", same,
                    "" if same else "other tokens than each prompt decoded alone" if shaped else f"returned {describe(got)}")
        mode_given_back(chk, "generate_left_padded", spy, True, label)


def _eval_mode_given_back(chk: Check, fn, model, prompts, lengths, max_new_tokens: int, pad_id: int) -> None:
    """The model handed over wholly in eval mode with gradients on, as a
    notebook hands it after model.eval(): the eval mode given back (a
    model.train() at the end switches it whatever mode it came in; the
    check's model has no dropout, so no token shows it)."""
    spy = PaddedBatchSpy(model, lengths, limit=4 * max_new_tokens + 4)
    spy.eval()
    chk.call(fn, spy, [p.clone() for p in prompts], max_new_tokens, tinylm.KVCache(model.config, len(prompts)), pad_id,
             row_label=EVAL_MODE_GRAD_ON)
    mode_given_back(chk, "generate_left_padded", spy, False, EVAL_MODE_GRAD_ON)


def _pad_id_as_a_real_token(chk: Check, fn, model, prompts, lengths, max_new_tokens: int, pad_id: int,
                            alone: torch.Tensor) -> None:
    """A prompt that holds the pad id as a real token (a tokenizer may give a
    real text that id): it is attended to and counted like any other token,
    as the padding is where it was put, not wherever the id occurs."""
    held = [p.clone() for p in prompts]
    b = max(range(len(held)), key=lambda i: len(held[i]))
    held[b][1] = pad_id  # inside the prompt: not at its start, where it could pass for one more pad
    alone = alone.clone()  # the other prompts' decodings alone are the caller's; only prompt b changed
    alone[b] = ref_greedy(model, held[b][None], max_new_tokens)[0, len(held[b]):]
    spy = PaddedBatchSpy(model, lengths, limit=4 * max_new_tokens + 4)
    label = f"prompt {b} holds the pad id {pad_id} as a real token"
    got = chk.call(fn, spy, [p.clone() for p in held], max_new_tokens, tinylm.KVCache(model.config, len(held)),
                   pad_id, row_label=label)
    calls = _PaddedCalls(spy, held)
    calls.read()
    same = isinstance(got, torch.Tensor) and tuple(got.shape) == tuple(alone.shape) and torch.equal(got.long().cpu(), alone)
    chk.require(f"{label}: new tokens = each prompt decoded alone, mask and positions as for any token",
                same and calls.layout is None and not calls.findings,
                "see below" if calls.findings else "other tokens than each prompt decoded alone")
    first = spy.calls[0] if spy.calls else None
    if not calls.findings or first is None or not isinstance(first["mask"], torch.Tensor):
        return
    ids, mask = first["idx"], first["mask"].bool()
    if torch.equal(mask, ids != pad_id) and not torch.equal(mask, spy.right_mask(ids.shape[1])):
        slot = spy.pads[b] + 1
        chk.diagnose(f"the padding read off the ids: at the prompt's forward pass your attention_mask is False at row "
                     f"{b}'s slot {slot}, a real token whose id is the pad id (measured: the mask equals ids != "
                     "pad_id, so a real token with that id is taken for padding); mark the padding where it is put, "
                     "from each prompt's length")
    else:
        for _, _, fact in calls.findings:
            chk.measured(fact)


def _second_call(chk: Check, fn, model, prompts, lengths, max_new_tokens: int, pad_id: int, alone: torch.Tensor,
                 cache: tinylm.KVCache) -> None:
    """The cache of the first call handed to a second one, as a notebook
    decoding batch after batch does: the same new tokens as from an empty
    cache. A cache found not empty at the second call's first forward pass is
    named as the cause only when the same call, on that cache emptied by the
    check, gives every row its prompt decoded alone."""
    label = "a second call with the cache the first call used"
    limit = 4 * max_new_tokens + 4
    spy = PaddedBatchSpy(model, lengths, limit=limit)

    def stale(_err=None) -> str | None:
        start = spy.calls[0]["start"] if spy.calls else 0
        if start == 0:
            return None
        cache.reset()
        again = quiet_call(fn, PaddedBatchSpy(model, lengths, limit=limit), [p.clone() for p in prompts],
                           max_new_tokens, cache, pad_id)
        if not (isinstance(again, torch.Tensor) and tuple(again.shape) == tuple(alone.shape)
                and torch.equal(again.long().cpu(), alone)):
            return None
        return (f"the cache is not emptied at the start of a call (measured: the second call's first forward pass "
                f"finds cache.length = {start}, the entries the first call left, where an emptied cache holds 0; "
                "on the same cache emptied by the check, the same call gives every "
                "row its prompt decoded alone): call cache.reset() before the prompt's forward pass, since a caller "
                "may hand over a cache that holds an earlier batch")

    got = chk.call(fn, spy, [p.clone() for p in prompts], max_new_tokens, cache, pad_id, row_label=label,
                   on_error=stale)
    shaped = isinstance(got, torch.Tensor) and tuple(got.shape) == tuple(alone.shape)
    same = shaped and torch.equal(got.long().cpu(), alone)
    chk.require(f"{label}: new tokens = each prompt decoded alone", same,
                "" if same else "other tokens than each prompt decoded alone" if shaped else f"returned {describe(got)}")
    if not same:
        cause = stale()
        if cause:
            chk.diagnose(cause)
        elif spy.calls and spy.calls[0]["start"]:
            chk.measured(f"the second call's first forward pass finds cache.length = {spy.calls[0]['start']}, the "
                         "entries the first call left")


def check_generate_left_padded(generate_left_padded, *, seed: int = 4, lengths: tuple = (3, 7, 5),
                               max_new_tokens: int = 6, vocab: int = 29, n_kv_heads: int = 1, pad_id: int = 0) -> None:
    """generate_left_padded(model, prompts, max_new_tokens, cache, pad_id) on prompts
    of different lengths: greedy new tokens (B, max_new_tokens), each row
    equal to decoding its prompt alone (an independent reference: no padding,
    no mask, no cache), and the positions handed to the model counted from 0
    at each row's first real token. A failing row is explained from what the
    function hands the model (a stand-in records every call), and a cause is
    named only when re-running the function with that part replaced by the
    right values gives every row the reference."""
    __tracebackhide__ = True
    B = len(lengths)
    chk = Check("generate_left_padded", expects="a (number of prompts, max_new_tokens) tensor of new token ids, one row "
                                                "per prompt",
                gradients=WITHOUT)
    model = tiny_model(seed, vocab=vocab, n_kv_heads=n_kv_heads, max_seq_len=max(lengths) + max_new_tokens + 4)
    g = seeded(seed)
    prompts = [torch.randint(1, vocab, (n,), generator=g) for n in lengths]  # ids >= 1: the pad id never occurs
    alone = torch.stack([ref_greedy(model, p[None], max_new_tokens)[0, len(p):] for p in prompts])  # (B, new)
    spy = PaddedBatchSpy(model, lengths, limit=4 * max_new_tokens + 4)
    cache = tinylm.KVCache(model.config, B)
    def what_the_calls_were_handed(_err) -> None:
        """The forward calls made before the error are read as after a return: a finding on the positions or the
        mask is a cause only when a re-run with that part replaced by the right values gives every row its prompt
        decoded alone, a measured fact otherwise."""
        calls = _PaddedCalls(spy, prompts)
        calls.read()
        if calls.findings and not calls.layout:
            _explain_left_padded(chk, calls, generate_left_padded, model, prompts, list(lengths), max_new_tokens,
                                 pad_id, alone, raised=True)
        elif not calls.findings:
            return _longest_first(generate_left_padded, model, prompts, max_new_tokens, pad_id, alone)

    got = chk.call(generate_left_padded, spy, [p.clone() for p in prompts], max_new_tokens, cache, pad_id,
                   on_error=what_the_calls_were_handed)
    pads = [max(lengths) - n for n in lengths]
    if not (isinstance(got, torch.Tensor) and tuple(got.shape) == (B, max_new_tokens)):
        chk.compare(f"new tokens of {B} prompts", got, alone)
        if isinstance(got, torch.Tensor) and got.dim() == 2 and got.shape[0] == B and got.shape[1] > max_new_tokens:
            chk.measured(f"your function returns {got.shape[1]} columns per row; it should return only the "
                         f"{max_new_tokens} new tokens, without the padded prompt")
        chk.finish()
        return
    ok = [chk.compare(f"prompt {b}: {n} tokens after {p} pads, new tokens = that prompt decoded alone", got[b].long(),
                      alone[b], dtype=got.dtype) for b, (n, p) in enumerate(zip(lengths, pads))]
    differs = [b for b in range(B) if not ok[b]]
    if differs:
        b = differs[0]
        first = int((got[b].long().cpu() != alone[b]).nonzero()[0])
        chk.measured(f"prompt {b}'s new tokens follow its decoding alone up to new token {first}, which differs "
                     f"(rows {differs} differ; the max|diff| column compares token ids, a distance that means nothing)")
    calls = _PaddedCalls(spy, prompts)
    calls.read()
    for part, name in (("positions", "positions handed to the model: 0 at each row's first real token, then one more "
                                      "per token"),
                       ("mask", "attention mask handed to the model: False at the padding, True at real tokens, at every "
                                "call")):
        chk.require(name, calls.layout is None and not any(f[1] == part for f in calls.findings),
                    "see below" if calls.layout is None else "the ids are not left-padded prompts")
    if all(ok):
        for cause, part, fact in calls.findings:
            why = ("RoPE scores depend only on differences of positions, which a shift of a whole row keeps; a model "
                   "with learned absolute positions (GPT-2) reads them as they are" if part == "positions" else
                   "this model happens to pick the same tokens; the attention weights on the padding are not zero")
            chk.diagnose(f"{_CAUSE_TEXT.get(cause, cause)} (measured: {fact}); your tokens still equal decoding each "
                         f"prompt alone here: {why}" + _fix_for(cause))
        if chk.passed:
            _second_call(chk, generate_left_padded, model, prompts, lengths, max_new_tokens, pad_id, alone, cache)
        if chk.passed:
            _pad_id_as_a_real_token(chk, generate_left_padded, model, prompts, lengths, max_new_tokens, pad_id, alone)
        if chk.passed:
            _single_prompt(chk, generate_left_padded, model, prompts[1], max_new_tokens, pad_id, alone[1:2])
        if chk.passed:
            _from_train_mode_without_grad(chk, generate_left_padded, model, prompts, lengths, max_new_tokens, pad_id,
                                          alone)
        if chk.passed:
            _eval_mode_given_back(chk, generate_left_padded, model, prompts, lengths, max_new_tokens, pad_id)
        chk.finish()
        return
    _explain_left_padded(chk, calls, generate_left_padded, model, prompts, list(lengths), max_new_tokens, pad_id, alone)
    chk.finish()


def _single_prompt(chk: Check, generate_left_padded, model, prompt, max_new_tokens: int, pad_id: int, alone) -> None:
    """One prompt in the list, as a chat hands it: no padding, and a batch axis of one, which a squeeze() meant for
    another axis takes away too."""
    label = f"a single prompt ({len(prompt)} tokens, no padding) + {max_new_tokens} new"
    got = chk.call(generate_left_padded, model, [prompt.clone()], max_new_tokens, tinylm.KVCache(model.config, 1),
                   pad_id, row_label=label)
    chk.compare(label, got, alone)


def _explain_left_padded(chk, calls, fn, model, prompts, lengths, max_new_tokens, pad_id, alone,
                         raised: bool = False) -> None:
    if not calls.spy.calls:
        chk.measured("your function never calls the model it is given: decode with it, model(ids, cache=..., "
                     "positions=..., attention_mask=...)")
        return
    if calls.layout:
        chk.measured(calls.layout + "; put each prompt at the END of its row, the pad id in front (left padding)")
        return
    parts = list(dict.fromkeys(part for _, part, _ in calls.findings))
    tries = [(part,) for part in parts] + ([tuple(parts)] if len(parts) > 1 else [])
    restored = next((fix for fix in tries if _rerun_restores(fn, model, prompts, lengths, max_new_tokens, pad_id, alone,
                                                             fix)), None)
    named = {"positions": "the positions", "mask": "the attention mask"}
    for cause, part, fact in calls.findings:
        if restored is not None and part in restored:
            replaced = " and ".join(named[p] for p in restored)
            chk.diagnose(f"{_CAUSE_TEXT.get(cause, cause)} (measured: {fact}; with only {replaced} your function hands the model replaced by the "
                         "right ones, every row equals its prompt decoded alone)" + _fix_for(cause))
        else:
            chk.measured(fact)
    if restored is None and calls.findings:
        chk.candidates("with the positions and the mask your function hands the model replaced by the right ones, "
                       + ("its output still is not" if raised else "the rows still differ from") + " each prompt "
                       "decoded alone: something else differs too; candidates: the "
                       "next token taken from another position than each call's last ([:, -1]), a new token fed back to "
                       "another row, the cache rebuilt or not advanced between steps")
    elif not calls.findings:
        chk.candidates("the positions and the attention mask your function hands the model are right at every call, yet "
                       "rows differ from decoding each prompt alone; candidates: the next token taken from another "
                       "position than each call's last ([:, -1]), a new token fed back to another row, the cache rebuilt "
                       "or not advanced between steps, the mask not grown by one real column per new token")


_CAUSE_TEXT = {"positions": "wrong positions handed to the model", "mask": "wrong attention mask handed to the model"}


def _fix_for(cause: str) -> str:
    return {POS_PROMPT: ": count each row from 0 at its first real token, positions = (mask.cumsum(-1) - 1).clamp(min=0), "
                        "and give each new token one more than its row's last position, not the padded length",
            POS_DECODE: ": give each new token one more than its row's last position (positions[:, -1:] + 1), not "
                        "the padded length (the cache's length counts the pads)",
            MASK_NONE: ": pass attention_mask (True at real tokens, False at the padding) to every forward call",
            MASK_AS_REAL: ": keep the padding False in the attention_mask of every call, the decoding steps' as well "
                          "as the prompt's (the prompt's mask with one True column appended per new token)",
            MASK_RIGHT: ": the padding is in front (left padding), so a row of n real tokens in width T is False at "
                        "slots 0..T-n-1 and True after",
            MASK_NOT_CARRIED: ": at every cached step pass the whole mask so far, one True column appended per new "
                              "token (width = cached + new)",
            "mask inverted": ": True (or 1) at real tokens, False at the padding"}.get(cause, "")
