"""Check for notebook 08's generate: a decoding loop that hands each step's
last logits to sample_next, compared with a reference loop on a tiny model
(greedy at temperature 0, the same draws from the caller's generator
otherwise, which must be drawn from while torch's global generator is left
alone), from eval mode under no_grad as well as from train mode, and
interrupted halfway, which must give the model its mode back.
"""
from __future__ import annotations

import contextlib
import copy
import inspect
import io

import torch

from .contracts import locate_call
from ..learner_values import describe
from .sampling import ref_sample_next
from .sampling_probes import flatter_with_dropout, from_eval_mode_without_grad, hands_probabilities
from .spies import crossed_arguments, first_call_arguments
from .framework.calling import WITHOUT, guarded_call, random_states_watched
from .framework.check import Check, RAISE_LOCATORS
from .framework.explain.notebook_names import say_notebook_generator
from .framework.measure import mode_split, seeded
from .references.generation import (ForwardLog, greedy_with, measure_length, mode_calls_watched, mode_not_a_flag,
                                    modes_mixed, ref_greedy, tiny_model, train_mode_restored)
from .references.hints import finish_with_upstream

def _crossed_to_sampler(generate, model, prompt, max_new_tokens) -> str | None:
    """After generate raised with top_k and top_p set: whether it handed sample_next one in the other's place."""
    args = (model, prompt, max_new_tokens, 1.0, 8, 0.9, seeded(11))
    try:
        given = dict(inspect.signature(generate).bind(*args).arguments)
    except (TypeError, ValueError):
        return None
    received = first_call_arguments(generate, "sample_next", lambda: generate(*args))
    return crossed_arguments("generate", given, "sample_next", received)


DROPOUT_LEFT_ON = ("dropout left on during generation: the model was in train mode, so every step samples from a "
                   "randomly damaged network; call model.eval() before decoding")


def greedy_generate_steps(model, prompt, max_new_tokens, temperature=0.0, top_k=None, top_p=None, generator=None):
    """generate at temperature 0, step by step, as a right answer takes the
    steps: eval mode, the last position's logits, argmax, append; the mode restored."""
    was_training = model.training
    model.eval()
    try:
        return ref_greedy(model, prompt, max_new_tokens)
    finally:
        model.train(was_training)


def _locate_generate(fn, args: tuple, kwargs: dict):
    """The learner's first wrong line of a greedy generate call (temperature
    0: the steps are the reference's); a sampling call's steps are not."""
    if len(args) < 4 or args[3] != 0 or any(a is not None for a in args[4:]):
        return None
    return locate_call(fn, greedy_generate_steps, args, kwargs, "generate")


RAISE_LOCATORS["generate"] = _locate_generate


def _body_generate(generate, seed, batch, prompt_len, max_new_tokens, dropout) -> Check:
    model = tiny_model(seed, dropout=dropout)
    prompt = torch.randint(model.config.vocab_size, (batch, prompt_len), generator=seeded(seed))
    want = ref_greedy(model.eval(), prompt, max_new_tokens)
    model.train()
    chk = Check("generate", expects=f"token ids (batch, prompt_len + max_new_tokens) = {(batch, prompt_len + max_new_tokens)}",
                gradients=WITHOUT)
    log = ForwardLog(model, limit=2 * max_new_tokens)  # bounded: a wrong loop is stopped, not waited for
    try:
        with mode_calls_watched(model, generate) as first_calls:
            got = chk.call(generate, model, prompt, max_new_tokens, 0.0, None, None, None,
                           on_error=lambda err: mode_not_a_flag(model, first_calls))
    finally:
        log.close()
    in_train = sum(c["training"] for c in log.calls)
    ok = chk.compare(f"greedy, {batch}x{prompt_len} prompt + {max_new_tokens} new", got, want, variants={
        "the logits of the first position are used: the next token is predicted by the LAST position, logits[:, -1]":
            lambda: greedy_with(model.eval(), prompt, max_new_tokens, lambda m, i: m(i)[:, 0]),
        "only the last token is fed, without a cache: the model then sees no context; feed the whole sequence, "
        "model(idx)[:, -1]": lambda: greedy_with(model.eval(), prompt, max_new_tokens, lambda m, i: m(i[:, -1:])[:, -1]),
    })
    model.train()
    if not ok:
        measure_length(chk, got, prompt, max_new_tokens, want)
        chk.locate_with(lambda: _locate_generate(generate, (model, prompt, max_new_tokens, 0.0, None, None, None), {}))
    mixed = modes_mixed(log.calls)
    chk.require("dropout off while generating (eval mode)", log.calls and not in_train,
                f"{in_train} of {len(log.calls)} forward passes ran in train mode",
                diagnosis=f"dropout left on during generation: {mixed}" if mixed else DROPOUT_LEFT_ON)
    chk.require("no autograd graph (torch.no_grad)", log.calls and not any(c["grad"] for c in log.calls),
                "forward passes recorded gradients",
                diagnosis="decoding records an autograd graph: wrap the loop in torch.no_grad()")
    log2 = ForwardLog(model, limit=2 * max_new_tokens)
    try:
        with mode_calls_watched(model, generate) as mode_calls:
            again = chk.call(generate, model, prompt, max_new_tokens, 0.0, None, None, None)
    finally:
        log2.close()
    restores = train_mode_restored(chk, model, mode_calls, "generate")
    if not ok and not in_train and isinstance(again, torch.Tensor) and isinstance(got, torch.Tensor) \
            and not torch.equal(again, got):
        chk.candidates("greedy decoding (temperature 0) gives different tokens on each call (measured): sample_next "
                       "must get the temperature as it is, 0 included, and top_k and top_p; candidates: they are not "
                       "passed on, or 0 is replaced on the way, as `temperature or 1.0` does")
    from_eval_mode_without_grad(chk, generate, model, prompt, max_new_tokens)
    if ok:
        _batch_of_one(chk, generate, model, prompt[:1], max_new_tokens, want[:1])
    _interrupted(chk, generate, model, prompt, max_new_tokens, restores)
    model.train()
    log3 = ForwardLog(model, limit=3 * 2 * max_new_tokens)
    generators = [seeded(s) for s in (11, 11, 12)]
    try:
        runs, watched = [], []
        for g in generators:
            with random_states_watched(g) as seen:
                runs.append(chk.call(generate, model, prompt, max_new_tokens, 1.0, 8, 0.9, g,
                                     on_error=lambda err: _crossed_to_sampler(generate, model, prompt, max_new_tokens)))
            watched.append(seen)
    finally:
        log3.close()
    shaped = all(isinstance(r, torch.Tensor) and r.shape == want.shape for r in runs)
    chk.require("sampling: prompt kept at the front", shaped and all(torch.equal(r[:, :prompt_len].cpu(), prompt) for r in runs),
                "the returned ids must start with the prompt")
    same = shaped and torch.equal(runs[0], runs[1])
    notebooks = shaped and not same and not in_train and say_notebook_generator(
        chk, generate, (model, prompt, max_new_tokens, 1.0, 8, 0.9, seeded(11)))
    chk.require("sampling: same seed, same tokens", same,
                "two runs with identically seeded generators differ",
                diagnosis=None if same or not shaped or in_train or notebooks else
                "the generator is not used: pass it on to sample_next")
    if shaped and same and not any(c["training"] for c in log3.calls) and getattr(generate, "recheck_trace", None) is None:
        _callers_generator_only(chk, watched[0])
    _plain_sampling(chk, generate, model, prompt)
    if chk.passed:
        _global_generator_without_one(chk, generate, model, prompt)
    if chk.passed:  # a temperature other than 1: one that is applied twice or not at all is right at 1
        # sharper logits and more draws: T = 2 and T = 4 expect counts more than 12 standard deviations apart
        _plain_sampling(chk, generate, model, prompt, copies=1024, sharpen=16.0, temperature=2.0)
    return chk


def _batch_of_one(chk: Check, generate, model, prompt, max_new_tokens: int, want) -> None:
    """One prompt alone, (1, T), as a chat decodes it: the batch axis is as
    long as the axes a squeeze() would take away with it."""
    label = f"greedy, a batch of one ({prompt.shape[0]}x{prompt.shape[1]}) + {max_new_tokens} new"
    got = chk.call(generate, model, prompt, max_new_tokens, 0.0, None, None, None, row_label=label)
    model.train()
    chk.compare(label, got, want)


def _callers_generator_only(chk: Check, seen: dict) -> None:
    """A sampling call given a caller's generator (its forward passes in eval
    mode, so no dropout draws): the generator's state moved during the call,
    and the state of torch's global generator did not."""
    facts = []
    if seen["global"]:
        facts.append("given a generator, your generate still changes the state of torch's global generator "
                     "(measured: torch.get_rng_state() differs before and after a sampling call with generator=a "
                     "seeded torch.Generator, every forward pass in eval mode): the caller's own random stream (a "
                     "seeded training run's dropout, its batches) then changes with every call; draw only from the "
                     "generator (a torch.manual_seed, or a random call without generator=, changes the global state)")
    if not seen["caller's"]:
        facts.append("your generate never draws from the generator it is given (measured: generator.get_state() is the "
                     "same before and after a sampling call at temperature 1): pass it on to sample_next, which draws "
                     "with it")
    chk.require("sampling: draws from the caller's generator only", not facts,
                "torch's global generator moved" if seen["global"] else "the caller's generator did not move",
                diagnosis=facts[0] if facts else None)
    for fact in facts[1:]:
        chk.diagnose(fact)


def _global_generator_without_one(chk: Check, generate, model, prompt, copies: int = 64) -> None:
    """Two sampling calls without a generator, torch's global generator seeded apart before each: the draws must
    come from it, so they differ (64 copies of each prompt row at temperature 1: two independent draws agree on
    every one of them with a probability far below 1e-6 for the check's model). The caller's global state is put
    back afterwards."""
    prompts = prompt.repeat(copies, 1)
    saved = torch.random.get_rng_state()
    runs = []
    try:
        for global_seed in (21, 22):
            torch.manual_seed(global_seed)
            runs.append(chk.call(generate, model, prompts, 1, 1.0, None, None, None,
                                 row_label="sampling without a generator"))
    finally:
        torch.random.set_rng_state(saved)
    model.train()
    shaped = all(isinstance(r, torch.Tensor) and tuple(r.shape) == (len(prompts), prompt.shape[1] + 1) for r in runs)
    same = shaped and torch.equal(runs[0], runs[1])
    chk.require("sampling without a generator: draws from torch's global generator", shaped and not same,
                "the same tokens under two global seeds" if same else "not a token tensor of the expected shape",
                diagnosis="your generate draws the same tokens whatever torch's global random state (measured: two "
                          f"calls without a generator, {len(prompts)} draws each, torch.manual_seed set apart before "
                          "each, give identical tokens): with generator=None the draws must come from torch's global "
                          "generator, which the caller seeds (torch.manual_seed); a generator seeded inside the "
                          "function makes every such call repeat the same text" if same else None)


def _plain_sampling(chk: Check, generate, model, prompt, copies: int = 64, sharpen: float = 8.0,
                    temperature: float = 1.0) -> None:
    """Sampling at `temperature` with no filter, the first new token of `copies` copies of each prompt row, from the
    model with its final norm's gain times `sharpen` (logits that far from uniform make a flattened distribution
    show): how often the most likely token is drawn, against the softmax's own probability. The count is a sum of
    independent Bernoulli draws; more than 6 standard deviations from its mean, on either side, happens to a right
    answer with a probability below 1e-6 for the check's model (the exact tails), whereas a greedy answer draws that
    token every time and one that flattens the softmax draws it a few times."""
    sharp = copy.deepcopy(model)
    with torch.no_grad():
        sharp.norm.weight.mul_(sharpen)
    prompts = prompt.repeat(copies, 1)
    sharp.eval()
    with torch.no_grad():
        logits = sharp(prompts)[:, -1].double()                   # (copies·B, V)
    sharp.train()
    probs = (logits / temperature).softmax(-1)
    log = ForwardLog(sharp)
    try:
        with mode_calls_watched(sharp, generate) as mode_calls:
            got = chk.call(generate, sharp, prompts, 1, temperature, None, None, seeded(13))
    finally:
        log.close()
    # every pass in train mode although the code switches to eval mode: the switch comes after the pass
    late = ("the switch to eval mode comes after the forward pass (measured: your code calls model.eval() or "
            "model.train(False) during the call, and the one forward pass of one new token ran in train mode): switch "
            "before the first forward pass" if log.calls and all(c["training"] for c in log.calls) and
            any(kind == "eval" or mode is False for kind, mode in mode_calls or ()) else None)  # None: not watched
    shaped = isinstance(got, torch.Tensor) and tuple(got.shape) == (len(prompts), prompt.shape[1] + 1)
    top_p, top = probs.max(-1)
    mean, sd = _count_expected(top_p)
    hits = int((got[:, -1].cpu() == top).sum()) if shaped else 0
    if chk.require(f"plain sampling (temperature {temperature:g}, no filter) draws from the softmax",
                   shaped and abs(hits - mean) <= 6 * sd,
                   f"returned {describe(got)}" if not shaped else f"{hits} of {len(prompts)} draws are the most likely "
                   f"token, the softmax expects {mean:.1f} ± {sd:.1f}"):
        return
    if not shaped:
        return
    if temperature != 1:
        _temperature_read(chk, logits, top, hits, temperature, len(prompts))
        return
    measured = (f"with temperature 1 and neither top_k nor top_p, {hits} of {len(prompts)} draws are the most likely "
                f"token, where the model's softmax gives it {mean / len(prompts):.2g} on average (so {mean:.1f} ± "
                f"{sd:.1f} of them)")
    if hits == len(prompts):
        chk.diagnose(f"your generate decodes greedily when no filter is set (measured: {measured}): temperature and "
                     "the generator are ignored, so plain sampling never happens; sample from softmax(logits / "
                     "temperature) whenever temperature > 0, with or without top_k and top_p (temperature 0 alone "
                     "means greedy)")
    elif hits > mean:
        chk.measured(f"{measured}: the draws are sharper than the distribution")
    elif any(c["training"] for c in log.calls):
        left_on = [d for d in chk.diagnoses if d.startswith("dropout left on during generation")]
        if flatter_with_dropout(chk, generate, sharp, prompts, top, mean, sd, measured,
                                modes_mixed(log.calls) or late) and left_on:
            for said in left_on:  # the measured line says the same cause: one cause, one line
                chk.diagnoses.remove(said)
    else:
        twice = probs.softmax(-1).gather(1, top[:, None]).squeeze(1)   # a softmax of the probabilities
        t_mean, t_sd = _count_expected(twice)
        if abs(hits - t_mean) <= 6 * t_sd and hands_probabilities(generate, sharp, prompts):
            chk.diagnose(f"your draws are flatter than the model's distribution (measured: {measured}), as flat as a "
                         f"softmax taken of the probabilities (which expects {t_mean:.1f} ± {t_sd:.1f}), and what "
                         "generate hands sample_next is probabilities (measured: every row non-negative, summing to "
                         "1): its softmax flattens them; hand it the logits of the last position, model(idx)[:, -1, :], "
                         "as they are")
        elif abs(hits - t_mean) <= 6 * t_sd:
            chk.candidates(f"{measured}: the draws are flatter than the distribution, as flat as a softmax taken of the "
                           f"probabilities would make them ({t_mean:.1f} ± {t_sd:.1f}); candidates: probabilities "
                           "sampled as if they were logits (a second softmax), or logits of another position or context "
                           "than the whole prompt's last (the model fed fewer tokens than it needs)")
        else:
            chk.measured(f"{measured}: the draws are flatter than the distribution")


def _count_expected(p: torch.Tensor) -> tuple[float, float]:
    """The mean and standard deviation of how many draws hit, one independent draw per row with probability p."""
    return float(p.sum()), float((p * (1 - p)).sum().sqrt())


def _temperature_read(chk: Check, logits, top, hits: int, temperature: float, draws: int) -> None:
    """Draws at a temperature other than 1 that the softmax at that temperature does not expect: read against the
    temperature not applied and applied twice (divided by T²), each expecting its own count of the most likely
    token (6 standard deviations, as above); said as candidates, since other codes give a temperature alike."""
    def expected(t):
        return _count_expected((logits / t).softmax(-1).gather(1, top[:, None]).squeeze(1))
    mean, _ = expected(temperature)
    measured = (f"with temperature {temperature:g} and neither top_k nor top_p, {hits} of {draws} draws are the most "
                f"likely token, where softmax(logits / {temperature:g}) expects {mean:.1f}")
    readings = ((1.0, "the temperature not applied"),
                (temperature ** 2, f"the logits divided by the temperature twice (T² = {temperature ** 2:g}: before "
                                   "sample_next, which divides them again)"))
    fits = [(t, words, m, sd) for t, words in readings for m, sd in [expected(t)] if abs(hits - m) <= 6 * sd]
    if len(fits) == 1:
        t, words, m, sd = fits[0]
        chk.candidates(f"{measured}; {hits} is as many as softmax(logits / {t:g}) expects ({m:.1f} ± {sd:.1f}); "
                       f"candidates: {words}, or another step that scales the logits so")
    else:
        chk.measured(f"{measured}: the draws follow another distribution")


def _interrupted(chk: Check, generate, model, prompt, max_new_tokens: int, restores: bool = True) -> None:
    """A generation that an exception stops midway (the model's second
    forward pass raises, as a KeyboardInterrupt or a bad argument would):
    the model must still come back in the mode it came in (train).
    `restores`: whether a generation that ends normally gives the mode
    back; where it does not, a try/finally is not what is missing."""
    model.train()
    stop = ForwardLog(model, limit=1)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            guarded_call(generate, (model, prompt, max_new_tokens, 0.0, None, None, None), {})
    except Exception:  # noqa: BLE001: the check's own stop, or an error of the learner's the rows above report
        pass
    finally:
        stop.close()
    split = mode_split(model)
    restored = model.training and split is None
    model.train()
    if len(stop.calls) == 1:  # the stop did happen inside the decoding loop
        chk.require("train mode restored when generation is interrupted", restored,
                    "an exception in the second forward pass left the model in eval mode",
                    diagnosis=split or (None if not restores else
                                        "an exception during generation leaves the model in eval mode (measured: "
                                        "the check raised in the second forward pass): restore the mode in a "
                                        "try/finally, `try: ... finally: model.train(was_training)`, so it is "
                                        "restored however the loop ends"))


def check_generate(generate, *, seed: int = 3, batch: int = 2, prompt_len: int = 4, max_new_tokens: int = 7,
                   dropout: float = 0.5) -> None:
    """generate(model, prompt, max_new_tokens, temperature, top_k, top_p,
    generator) on a model *in train mode with dropout*: greedy output must
    equal eval-mode greedy decoding, the mode must be restored, and seeded
    sampling must be reproducible."""
    __tracebackhide__ = True
    finish_with_upstream("generate", lambda: _body_generate(generate, seed, batch, prompt_len, max_new_tokens, dropout),
                         generate, {"sample_next": ref_sample_next}, {"sample_next": "exercise 3"})
