"""A tiny seeded model and the reference greedy decoding the generation,
sampling, training and evaluation checks drive the learner's code with;
ForwardLog counts and bounds the forward calls a learner's loop makes."""
from __future__ import annotations

import contextlib
import copy
import sys

import torch

from ...diagnosis_record import confirmed, measured
from ...learner_values import describe
from .. import trace
from ..framework.calling import quiet_call
from ..framework.check import Check
from ..framework.failure import CheckStopped
from ..framework.measure import mode_split, randn
from ..learner_code import is_learners_file


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
    `limit`, the call after the limit-th raises TooManyForwardCalls. With
    `submodules`, each call also records "in_train": (submodules in train
    mode, submodules, Dropout layers among those in train mode), the flags
    the pass really ran with (the top flag alone may say otherwise)."""

    def __init__(self, model, limit: int | None = None, submodules: bool = False):
        self.calls: list[dict] = []
        self.limit = limit
        self.submodules = submodules
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
        if self.submodules:
            parts = list(module.modules())[1:]
            on = [m for m in parts if m.training]
            self.calls[-1]["in_train"] = (len(on), len(parts), sum(isinstance(m, torch.nn.Dropout) for m in on))

    def close(self):
        self.handle.remove()


def modes_mixed(calls: list[dict]) -> str | None:
    """For forward passes a ForwardLog recorded (each with its "training"
    flag): where some ran in train mode and the others in eval mode, what
    that measures and the fix (the mode is switched, but after a forward
    pass or back again inside the loop, so "call model.eval()" is already
    done); None where they all ran in one mode."""
    train = [i + 1 for i, c in enumerate(calls) if c["training"]]
    if not train or len(train) == len(calls):
        return None
    which = (f"the first {len(train)}" if train == list(range(1, len(train) + 1)) else
             f"from pass {train[0]} on" if train == list(range(train[0], len(calls) + 1)) else
             "passes " + ", ".join(map(str, train[:6])) + (", ..." if len(train) > 6 else ""))
    return (f"the mode is switched, but not for every pass (measured: {len(train)} of the {len(calls)} forward passes "
            f"ran in train mode, {which}, and the others in eval mode): switch to eval mode once, before the first "
            "forward pass, and give the caller's mode back only after the last")


def eval_flag_alone(calls: list[dict], fn_name: str) -> str | None:
    """For forward passes a ForwardLog(submodules=True) recorded: where the
    top module's flag said eval mode while submodules ran in train mode,
    what that measures and the fix; None where no pass ran so."""
    split = [c for c in calls if not c["training"] and c.get("in_train", (0,))[0]]
    if not split:
        return None
    on, parts, drop = split[0]["in_train"]
    passes = "every forward pass" if len(split) == len(calls) else f"{len(split)} of the {len(calls)} forward passes"
    among = f", {drop} Dropout layer{'s' if drop > 1 else ''} among them," if drop else ""
    head = "dropout on during evaluation" if drop else "submodules in train mode during evaluation"
    return (f"{head}: only the model's own flag says eval mode (measured: at {passes} of your "
            f"{fn_name}, model.training was False, yet {on} of its {parts} submodules{among} were in train mode): "
            "the flag is each module's own, so setting the attribute model.training changes that one module's; "
            "model.eval() sets every submodule's")


def flag_line(fn, model, rest: tuple, came_in_training: bool = True) -> trace.Located | None:
    """The learner's line that assigns the model's training flag itself (not
    through train() or eval(), whose own assignments are torch's lines),
    seen by calling fn(copy of model, *copies of rest) again, the copy
    handed over in `came_in_training` mode, with nn.Module.__setattr__
    watched. Not in the grader's recheck (the call runs elsewhere)."""
    if getattr(fn, "recheck_trace", None) is not None:
        return None
    twin = copy.deepcopy(model).train(came_in_training)
    found: list[trace.Located] = []
    setattr_ = torch.nn.Module.__setattr__

    def watched(self, name, value):
        caller = sys._getframe(1)
        if name == "training" and self is twin and not found and is_learners_file(caller.f_code.co_filename):
            code = caller.f_code
            found.append(trace.Located(code.co_filename, caller.f_lineno, getattr(code, "co_qualname", code.co_name),
                                       trace.source_line(code.co_filename, caller.f_lineno),
                                       [f"measured: the call run again sets model.training = {value!r} here"],
                                       kind="flag"))
        setattr_(self, name, value)

    torch.nn.Module.__setattr__ = watched
    try:
        with torch.random.fork_rng(devices=[]):
            quiet_call(fn, twin, *copy.deepcopy(rest))
    finally:
        torch.nn.Module.__setattr__ = setattr_
    return found[0] if found else None


# The caller's other entry state for a decoder: a training loop that decodes a sample between steps.
TRAIN_MODE_NO_GRAD = "a model handed over in train mode, under torch.no_grad()"
# A decoder's usual entry state, as a notebook hands it over after model.eval(), gradients on.
EVAL_MODE_GRAD_ON = "a model handed over in eval mode, gradients on"


@contextlib.contextmanager
def handed_over_in_train_mode_without_grad(model):
    """Run the block with `model` in train mode under torch.no_grad(), as a
    training loop that decodes a sample between steps hands it over; the
    model is in eval mode again afterwards, whatever the block left. The
    checks' models have no dropout, so greedy tokens are the same in either
    mode, and Check.call measures the torch settings a call leaves changed."""
    model.train()
    try:
        with torch.no_grad():
            yield
    finally:
        model.eval()


# A model handed over in train mode and given back in eval mode, where the model's own mode calls were not seen
# (the grader's recheck, or a mode set another way): the two codes that do it behave the same (each ends in eval
# mode), so neither is named as certain.
LEFT_IN_EVAL = ("a model handed over in train mode comes back in eval mode (measured); candidates: the mode is never "
                "given back at the end (end with model.train(was_training)), or the mode given back was read after "
                "model.eval() had already changed it (model.training is then False: read was_training = "
                "model.training before model.eval())")


@contextlib.contextmanager
def mode_calls_watched(model, fn):
    """The train()/eval() calls made on `model` itself while the block runs,
    in order: ("eval", False) for model.eval(), ("train", mode) for
    model.train(mode) (the train(False) inside eval() is not counted
    again). nn.Module's two methods are wrapped for the block and put back
    after it; each wrapper calls the original, so the learner's call does
    what it would without them. Under the grader's recheck the model runs
    in the learner's process: nothing is watched and the list stays None."""
    if getattr(fn, "recheck_trace", None) is not None:
        yield None
        return
    calls: list[tuple[str, bool]] = []
    train, evaluate = torch.nn.Module.train, torch.nn.Module.eval
    inside_eval = []

    def spy_train(self, mode=True):
        if self is model and not inside_eval:
            calls.append(("train", mode))  # as handed over: a non-bool is what makes torch's train() raise
        return train(self, mode)

    def spy_eval(self):
        if self is not model:
            return evaluate(self)
        calls.append(("eval", False))
        inside_eval.append(True)
        try:
            return evaluate(self)
        finally:
            inside_eval.pop()

    torch.nn.Module.train, torch.nn.Module.eval = spy_train, spy_eval
    try:
        yield calls
    finally:
        torch.nn.Module.train, torch.nn.Module.eval = train, evaluate


def mode_not_a_flag(model, calls: list | None):
    """For a raising call watched by mode_calls_watched: the value its last model.train(...) call was handed,
    where it is not a bool (torch's train() rejects it). The bound method model.train itself is said as the
    cause: the flag is model.training."""
    if not calls or calls[-1][0] != "train" or isinstance(calls[-1][1], bool):
        return None
    handed = calls[-1][1]
    if handed == model.train:  # the model's own bound method, not the flag
        return confirmed("the mode given back is the method model.train, not the flag (measured: model.train(...) was "
                         "handed the bound method model.train itself, and train() takes a bool): read the flag, "
                         "was_training = model.training (the attribute), before model.eval()")
    return measured(f"model.train(...) was handed {describe(handed)}, not a bool (True or False)")


def _left_in_eval_cause(fn_name: str, calls: list | None) -> str | None:
    """The cause of a model handed over in train mode and left in eval mode,
    read off the model's own mode calls during the call; None where they
    do not show it (no calls seen, or a last call that is neither)."""
    if not calls or calls[-1][1]:
        return None
    if calls[-1][0] == "eval" or len(calls) == 1:
        return (f"the mode is never given back: {fn_name} switches the model handed over in train mode to eval mode "
                f"and makes no later train() call on it (measured: its calls on the model were "
                f"{_calls_said(calls)}); end with model.train(was_training), in a `finally:`, reading was_training = "
                "model.training first")
    return (f"the mode given back is the one model.eval() had just set: {fn_name} gives the model back with "
            f"model.train(False) although it came in train mode (measured: its calls on the model were "
            f"{_calls_said(calls)}, so the value handed to the last one is the eval mode, not the mode the model came "
            "in); give back the mode read before model.eval(): was_training = model.training before it, and "
            "model.train(was_training) at the end")


def _calls_said(calls: list) -> str:
    return ", then ".join("model.eval()" if kind == "eval" else f"model.train({mode})" for kind, mode in calls)


def train_mode_restored(chk: Check, model, calls: list | None = None, fn_name: str = "your function") -> bool:
    """The row "train mode restored afterwards" for a call handed `model` in train mode: the model and every
    submodule in train mode after it. A mode set on the top module alone is said as measured; a model left in eval
    mode gets the cause its mode calls (`calls`, from mode_calls_watched) show, or, where they show none, the two
    codes that leave it so, as candidates. The model is left as the call left it."""
    split = mode_split(model)
    restored = chk.require("train mode restored afterwards", model.training and split is None,
                           "the model was left in eval mode" if split is None else "submodules left in eval mode",
                           diagnosis=split)
    if not restored and split is None:
        cause = _left_in_eval_cause(fn_name, calls)
        if cause:
            chk.diagnose(cause)
        else:
            chk.candidates(LEFT_IN_EVAL)
    return restored


def mode_given_back(chk: Check, fn_name: str, model, came_in_training: bool, label: str,
                    cause: str | None = None) -> bool:
    """The row for a call handed `model` in one mode (model.training was
    `came_in_training`): the caller gets that mode back, every submodule's
    too; `cause`, where the caller measured why it was not, is said in place
    of the measured modes. The model is put back in that mode afterwards,
    whatever the call left, so the check's next call starts from the state
    it names."""
    split = mode_split(model)
    left = model.training
    came, now = ("train" if came_in_training else "eval"), ("train" if left else "eval")
    kept = left == came_in_training and split is None
    model.train(came_in_training)
    effect = ("a training loop that decodes between steps then trains without dropout" if came_in_training else
              "an evaluation that runs next then has dropout on")
    return chk.require(f"{label}: {came} mode given back", kept,
                       f"the model was in {came} mode before the call and in {now} mode after it" if split is None
                       else "submodules left in another mode",
                       diagnosis=split or cause or f"{fn_name} leaves a model that came in {came} mode in {now} mode (measured: "
                       f"model.training is {came_in_training} before the call, {left} after it): {effect}; a function "
                       "that switches the mode must give the caller's back, was_training = model.training first and "
                       "model.train(was_training) in a `finally:` at the end")
