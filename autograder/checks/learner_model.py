"""Build the learner's model from their saved answers (mylm/, see answers.py).

    model = learner_model(config)        # prints which piece is whose, in one line
    cache = learner_cache(model, batch_size=1)

The decoder is the learner's notebook-05 `Transformer` when it was saved
with a passing check, else tinylm.Transformer. In the learner's decoder each
function it calls by name (embed, tied_logits, rms_norm, apply_rope,
rope_cache, causal_attention, swiglu) is bound to the learner's passing
version where one exists and to tinylm's otherwise. For a grouped-query
config (n_kv_heads < n_heads) the learner's causal_attention (notebook 03,
one key head per query head) gets the keys and values repeated by their
repeat_kv (notebook 07); notebook 07's gqa_attention is not used: it assumes
as many keys as queries (is_causal), which a KV cache breaks. The KV cache
of the learner's decoder stores keys and values with notebook 06's
cache_update.

A saved module whose file was changed after its checks passed (its hash in
the manifest differs) is not loaded: its pieces are tinylm's, and the
report says why. A piece whose latest check run failed is the last passing
version, and the report says that too.

While grading (NBGRADER_EXECUTION set) the model is tinylm's, so each
notebook is graded on its own exercises only.
"""
from __future__ import annotations

import contextlib
import copy
import importlib.util
import inspect
import io
import os
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

import tinylm

from . import answers
from .. import mylm_manifest

# name -> (the piece it belongs to, the notebook whose answer defines it)
FUNCTIONS = {
    "embed": ("embedding", "01"), "tied_logits": ("embedding", "01"),
    "rms_norm": ("RMSNorm", "02"),
    "causal_attention": ("attention", "03"),
    "rope_cache": ("RoPE", "04"), "apply_rope": ("RoPE", "04"),
    "swiglu": ("SwiGLU", "05"),
    "cache_update": ("KV cache", "06"),
    "repeat_kv": ("GQA", "07"),
}
DECODER = "Transformer"  # notebook 05's class


@dataclass
class Choice:
    function: object
    yours: bool
    notebook: str   # the notebook that teaches it
    source: str     # "nb04_rope" or "tinylm"


def _load(folder: Path) -> dict[str, types.ModuleType]:
    """A fresh import of every saved notebook module, as mylm.<name>."""
    package = types.ModuleType("mylm")
    package.__path__ = [str(folder)]
    sys.modules["mylm"] = package
    modules = {}
    edited = set(mylm_manifest.edited(folder))
    for path in sorted(folder.glob("nb[0-9][0-9]_*.py")):
        if path.stem in edited:
            continue  # not the code its checks verified: report() says so
        name = f"mylm.{path.stem}"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as err:  # noqa: BLE001: a broken saved file costs that notebook's pieces, nothing more
            print(f"(mylm/{path.name} does not import: {type(err).__name__}: {err}; using tinylm's pieces instead)")
            continue
        modules[path.stem] = module
        setattr(package, path.stem, module)
    return modules


def _choices(config: tinylm.ModelConfig, modules: dict, passing: dict[str, str],
             reference_for: frozenset = frozenset()) -> dict[str, Choice]:
    def pick(name: str, fallback) -> Choice:
        piece, nb = FUNCTIONS[name]
        module = modules.get(passing.get(name, ""))
        if name not in reference_for and module is not None and callable(getattr(module, name, None)):
            return Choice(getattr(module, name), True, nb, module.__name__)
        return Choice(fallback, False, nb, "tinylm")

    choices = {name: pick(name, getattr(tinylm.attention if name == "repeat_kv" else tinylm, name, None))
               for name in FUNCTIONS}
    attention = choices["causal_attention"]
    if config.n_kv_heads == config.n_heads:
        del choices["repeat_kv"]  # no grouped heads: nothing to repeat
    elif attention.yours:  # notebook 03's attention wants one key head per query head: repeat them first
        choices["causal_attention"] = Choice(_grouped(attention.function, choices["repeat_kv"].function), True,
                                             attention.notebook, attention.source)
    else:
        del choices["repeat_kv"]  # tinylm's causal_attention repeats them itself
    return choices


def _grouped(causal_attention, repeat_kv):
    """causal_attention for n_kv_heads < n_heads: keys and values repeated to the query heads first."""
    def grouped_attention(q, k, v):
        n_rep = q.shape[1] // k.shape[1]
        return causal_attention(q, repeat_kv(k, n_rep), repeat_kv(v, n_rep))  # (B, nh, Tq, hd)
    grouped_attention.__module__ = causal_attention.__module__
    return grouped_attention


def _bind(modules: dict, choices: dict[str, Choice]) -> None:
    """Point every saved module's global names at the chosen functions."""
    for module in modules.values():
        for name, choice in choices.items():
            if name in vars(module):
                setattr(module, name, choice.function)


def _reference(nb: str, edited: set[str]) -> str:
    if nb in edited:
        return f"reference (mylm/'s notebook-{nb} file was changed after its check passed: re-run its check in {nb})"
    return f"reference (finish {nb} to use yours)"


def _yours(nb: str, names: list[str], failing: set[str]) -> str:
    stale = sorted(set(names) & failing)
    if stale:
        return f"yours ({nb}, the last version that passed; your latest {', '.join(stale)} failed its check)"
    return f"yours ({nb})"


def report(choices: dict[str, Choice] | None, decoder: Choice, edited: set[str] = frozenset(),
           failing: set[str] = frozenset()) -> str:
    """'embedding: yours (01) · RMSNorm: reference (finish 02 to use yours) · ...'.
    edited: notebooks ('02') whose saved file was changed after its checks
    passed; failing: saved names whose latest check run failed."""
    if choices is None:
        return decoder.source
    pieces: dict[str, dict[str, Choice]] = {}
    for name, choice in choices.items():
        pieces.setdefault(FUNCTIONS[name][0], {})[name] = choice
    parts = []
    for piece, chosen in pieces.items():
        nb = next(iter(chosen.values())).notebook
        if all(c.yours for c in chosen.values()):
            parts.append(f"{piece}: {_yours(nb, list(chosen), failing)}")
        elif any(c.yours for c in chosen.values()):
            parts.append(f"{piece}: partly yours (finish {nb} to use all of yours)")
        else:
            parts.append(f"{piece}: {_reference(nb, edited)}")
    parts.append(f"decoder: {_yours('05', [DECODER], failing)}" if decoder.yours else f"decoder: {_reference('05', edited)}")
    return " · ".join(parts)


def learner_model(config: tinylm.ModelConfig, device=None, *, quiet: bool = False,
                  reference_for: frozenset = frozenset()) -> nn.Module:
    """The learner's model for `config` (see the module docstring); its
    `.learner_report` says which piece is whose, and is printed unless quiet.
    reference_for: names (of FUNCTIONS, or "Transformer") to take from tinylm
    even where the learner's passing answer exists (to find which piece owns
    a bug, see check_model_agrees)."""
    if os.environ.get("NBGRADER_EXECUTION"):
        model, text = tinylm.Transformer(config), "grading: tinylm's reference model, so each notebook is graded on its own exercises"
    else:
        folder = answers.mylm_dir()
        passing = answers.passing(folder)
        modules = _load(folder) if passing else {}
        choices = _choices(config, modules, passing, frozenset(reference_for))
        _bind(modules, choices)
        decoder_module = None if DECODER in reference_for else modules.get(passing.get(DECODER, ""))
        decoder_cls = getattr(decoder_module, DECODER, None)
        if decoder_cls is not None:
            model = decoder_cls(config)
            text = report(choices, Choice(decoder_cls, True, "05", decoder_module.__name__),
                          {m[2:4] for m in mylm_manifest.edited(folder)}, mylm_manifest.failing_since(folder))
            model.learner_choices = choices
        else:
            model = tinylm.Transformer(config)
            edited = passing.get(DECODER) in mylm_manifest.edited(folder)
            why = (f"no answers saved in {folder} yet" if not passing else
                   f"mylm/{passing[DECODER]}.py was changed after its check passed (re-run the check in 05 to save "
                   f"your decoder again)" if edited else "your decoder (05) is not saved yet")
            saved = sorted({FUNCTIONS[name] for name in passing if name in FUNCTIONS}, key=lambda piece: piece[1])
            text = (f"tinylm's model: {why}; every piece in it is tinylm's, " + (
                f"yours ({', '.join(f'{piece} ({nb})' for piece, nb in saved)}) join it once your decoder is saved "
                "(finish 05)" if saved else "the reference (finish 01-05 to build yours)"))
    model.learner_report = text
    if not quiet:
        print(text)
    return model.to(device) if device is not None else model


class LearnerCache:
    """A KV cache for the learner's decoder: per layer, the keys and values so
    far, grown by the learner's cache_update (notebook 06) or tinylm's
    equivalent. Same interface as tinylm.KVCache for the model: length,
    reset(), update(layer, k, v), advance(n)."""

    def __init__(self, config: tinylm.ModelConfig, batch_size: int, cache_update, device=None, dtype=torch.float32):
        self.config, self.batch_size, self.max_seq_len = config, batch_size, config.max_seq_len
        self.cache_update, self.device, self.dtype = cache_update, device, dtype
        self.reset()

    def reset(self) -> None:
        empty = torch.zeros(self.batch_size, self.config.n_kv_heads, 0, self.config.head_dim, device=self.device,
                            dtype=self.dtype)  # (B, n_kv, 0, hd)
        self.k = [empty] * self.config.n_layers
        self.v = [empty] * self.config.n_layers
        self.length = 0

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor):
        if self.length + k.shape[2] > self.max_seq_len:
            raise ValueError(f"the cache holds {self.length} of max_seq_len={self.max_seq_len} positions and cannot "
                             f"take {k.shape[2]} more: call cache.reset() for a new prompt, or generate fewer tokens.")
        self.k[layer], self.v[layer] = self.cache_update(self.k[layer], self.v[layer], k, v)  # (B, n_kv, T_all, hd)
        return self.k[layer], self.v[layer]

    def advance(self, n_new: int) -> None:
        self.length += n_new


def _concatenate(past_k, past_v, k, v):
    """tinylm's side of cache_update: append along the sequence axis."""
    return torch.cat((past_k, k), dim=2), torch.cat((past_v, v), dim=2)


def learner_cache(model: nn.Module, batch_size: int, device=None):
    """A cache that fits `model`: tinylm.KVCache for tinylm's model, LearnerCache for the learner's."""
    device = device if device is not None else next(model.parameters()).device
    choices = getattr(model, "learner_choices", None)
    if choices is None:
        return tinylm.KVCache(model.config, batch_size, device=device)
    update = choices["cache_update"].function if choices["cache_update"].yours else _concatenate
    return LearnerCache(model.config, batch_size, update, device=device)


@contextlib.contextmanager
def swapped(module: types.ModuleType, name: str, function):
    """Put `function` in place of module.<name> for the duration of a with block
    (e.g. the learner's apply_rope inside tinylm.attention)."""
    saved = getattr(module, name)
    setattr(module, name, function)
    try:
        yield
    finally:
        setattr(module, name, saved)


def learner_function(name: str, fallback, *, quiet: bool = False):
    """The learner's saved, passing `name` (e.g. notebook 08's generate), else
    `fallback`; prints whose it is unless quiet. The reference while grading."""
    passing = {} if os.environ.get("NBGRADER_EXECUTION") else answers.passing()
    folder = answers.mylm_dir()
    module = _load(folder).get(passing[name]) if name in passing else None
    function = getattr(module, name, None)
    if not quiet:
        if function:
            print(f"{name}: {_yours(passing[name][2:4], [name], mylm_manifest.failing_since(folder))}")
        elif name in passing and passing[name] in mylm_manifest.edited(folder):
            print(f"{name}: {_reference(passing[name][2:4], {passing[name][2:4]})}; using {fallback.__module__}'s")
        else:
            print(f"{name}: reference ({fallback.__module__})")
    return function or fallback


# ---------------------------------------------------------------------------
# properties of the learner's whole model, checked where a later notebook uses
# it, with the bug traced back to the notebook whose answer owns it

def cached_matches_full(model: nn.Module, ids: torch.Tensor, atol: float = 1e-4) -> bool:
    """The last position's logits from a prefill of T - 1 tokens and one cached
    decode step equal those of the full forward pass of all T tokens."""
    with torch.no_grad():
        full = model(ids)[:, -1]                                  # (B, V), no cache
        cache = learner_cache(model, batch_size=ids.shape[0])
        model(ids[:, :-1], cache=cache)                           # prefill T - 1 positions
        step = model(ids[:, -1:], cache=cache)[:, -1]             # decode the last one from the cache
    return bool(torch.allclose(full, step, atol=atol))


def reload_gives_same_logits(model: nn.Module, x: torch.Tensor) -> bool:
    """A checkpoint round trip: model's state_dict through torch.save and
    torch.load(weights_only=True) into a copy whose parameters were first
    overwritten with noise (as a fresh build's would be); both give the same
    eval-mode logits on x only if the state_dict holds every weight forward uses."""
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    buffer.seek(0)
    twin = copy.deepcopy(model)
    with torch.no_grad():
        for p in _every_parameter(twin, set()):
            p.normal_()
    twin.load_state_dict(torch.load(buffer, map_location="cpu", weights_only=True))
    with torch.no_grad():
        return torch.equal(model.eval()(x), twin.eval()(x))


def _every_parameter(module: nn.Module, seen: set):
    """module's parameters, also those of modules kept in plain lists, tuples
    or dicts (which nn.Module does not register, so state_dict misses them)."""
    if id(module) in seen:
        return
    seen.add(id(module))
    yield from module.parameters(recurse=False)
    for value in [*module._modules.values(), *vars(module).values()]:
        items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else [value]
        for item in items:
            if isinstance(item, nn.Module):
                yield from _every_parameter(item, seen)


def _owner_pieces(model: nn.Module) -> list[str]:
    """The learner's own pieces in `model`: each function of theirs it uses, then their decoder."""
    choices = getattr(model, "learner_choices", None) or {}
    names = [name for name, choice in choices.items() if choice.yours]
    return names + ([DECODER] if choices and type(model) is not tinylm.Transformer else [])


def _rebuilt_without(model: nn.Module, names: set[str]) -> nn.Module:
    """The learner's model again, with tinylm's version of `names`, holding model's weights."""
    device = next(model.parameters()).device
    twin = learner_model(model.config, device, quiet=True, reference_for=frozenset(names))
    twin.load_state_dict(model.state_dict())
    return twin.eval() if not model.training else twin


def _own_check_diagnosis(name: str, module) -> str | None:
    """The last line of the failure message of `name`'s own notebook check run on the saved answer
    (None when it passes or there is no such check); no answer is saved by this run."""
    from autograder import checks
    from .framework.check import PASS_HOOKS
    runs = {DECODER: [("check_attention_module", "Attention"), ("check_block", "Block"), ("check_decoder", DECODER)]}
    saved = PASS_HOOKS[:]
    PASS_HOOKS.clear()
    try:
        for check_name, attr in runs.get(name, [(f"check_{name}", name)]):
            check, subject = getattr(checks, check_name, None), getattr(module, attr, None)
            if check is None or subject is None:
                continue
            try:
                with contextlib.redirect_stdout(io.StringIO()):
                    check(subject)
            except AssertionError as err:
                lines = [line.strip() for line in str(err).strip().splitlines() if line.strip()]
                return f"{attr}: {lines[-1]}" if lines else None
    finally:
        PASS_HOOKS[:] = saved
    return None


def owner_of_failure(model: nn.Module, holds) -> str:
    """Which of the learner's pieces makes `holds(model)` False: rebuilt with
    tinylm's version of one piece at a time (weights kept), the first piece
    whose replacement makes it True owns the bug; the message names its
    notebook and, where that notebook's own check now fails on it, the check's diagnosis."""
    pieces = _owner_pieces(model)
    if not pieces:
        return "every piece of this model is tinylm's, so the cause is not in your answers"
    for name in pieces:
        try:
            ok = holds(_rebuilt_without(model, {name}))
        except Exception:  # noqa: BLE001: a rebuild that cannot run says nothing about this piece
            continue
        if ok:
            nb = "05" if name == DECODER else FUNCTIONS[name][1]
            what = "notebook-05 decoder (Attention, Block, Transformer)" if name == DECODER else f"notebook-{nb} `{name}`"
            module = sys.modules.get(type(model).__module__) if name == DECODER else inspect.getmodule(
                model.learner_choices[name].function)
            found = _own_check_diagnosis(name, module) if module is not None else None
            detail = f" Its check, run again now, says: {found}" if found else ""
            return (f"your {what} causes it: with tinylm's {name} in its place (every other piece yours, same "
                    f"weights) it holds. Fix it in {nb} and rerun that notebook's check.{detail}")
    return ("no single piece of yours explains it (each replaced by tinylm's alone, it still fails): "
            f"your pieces here are {', '.join(pieces)}; rerun their notebooks' checks")


def check_model_agrees(label: str, holds, model: nn.Module) -> None:
    """Print `label: True`, or raise CheckFailed with `label: False` and the
    piece of the learner's model that owns the bug (owner_of_failure)."""
    __tracebackhide__ = True
    ok = bool(holds(model))
    print(f"{label}: {ok}")
    if not ok:
        from .framework.failure import CheckFailed
        from ..diagnosis_record import Diagnosis
        owner = owner_of_failure(model, holds)
        raise CheckFailed(head=f"{label}: False",
                          diagnosis=Diagnosis(label, rows=[label], failed_rows=[label], likely_bugs=[owner]))


def require_agreement(label: str, ok: bool, owner: str) -> None:
    """Print `label: True`, or raise CheckFailed naming `owner`, the exercise whose answer this cell uses."""
    __tracebackhide__ = True
    print(f"{label}: {bool(ok)}")
    if not ok:
        from .framework.failure import CheckFailed
        from ..diagnosis_record import Diagnosis
        raise CheckFailed(head=f"{label}: False",
                          diagnosis=Diagnosis(label, rows=[label], failed_rows=[label], likely_bugs=[owner]))
