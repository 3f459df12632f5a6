"""The decoder's residual stream measured stage by stage: forward hooks keep
each block's input and output and the final norm's, and the first stage that
differs from the reference's is explained by measurement (a stage that never
ran, a stage handed something other than its predecessor's output, a block
wrong on its own or called with other arguments, a stream into block 0 that
is not the embedding of the ids)."""
from __future__ import annotations

import math
import sys

import torch

import tinylm

from . import trace
from .framework.calling import guarded_call
from .learner_code import is_learners_file
from .framework.check import Check


def record_stages(module, config):
    """Forward hooks that keep the residual stream: each block's input (and
    the other arguments it was called with) and output, the final norm's
    input and output; "embedding" is block 0's input. In the grader's
    recheck the module is a stand-in whose parts never run: nothing is seen."""
    seen: dict = {}

    def keep(name):
        return lambda mod, args, out: seen.__setitem__(name, out)

    def keep_input(name):
        def hook(mod, args, kwargs):
            seen[f"{name} input"] = args[0] if args else next(iter(kwargs.values()), None)
            seen[f"{name} arguments"] = (args, kwargs)
            seen[f"{name} called at"] = _learners_caller()
        return hook
    hooks = [module.get_submodule("blocks.0").register_forward_pre_hook(
        lambda mod, args: seen.__setitem__("embedding", args[0] if args else None))]
    for i in range(config.n_layers):
        block = module.get_submodule(f"blocks.{i}")
        hooks.append(block.register_forward_pre_hook(keep_input(f"block {i}"), with_kwargs=True))
        hooks.append(block.register_forward_hook(keep(f"block {i}")))
    norm = module.get_submodule("norm")
    hooks.append(norm.register_forward_pre_hook(keep_input("final norm"), with_kwargs=True))
    hooks.append(norm.register_forward_hook(keep("final norm")))
    return seen, hooks


def _learners_caller():
    """(file, line, function) of the innermost frame of the learner's code on the stack: the line that called the
    module whose hook runs (torch's own frames and this module's are passed over), or None."""
    frame = sys._getframe(1)
    while frame is not None and not (is_learners_file(frame.f_code.co_filename)
                                     and frame.f_code.co_filename != __file__):
        frame = frame.f_back
    if frame is None:
        return None
    code = frame.f_code
    return code.co_filename, frame.f_lineno, getattr(code, "co_qualname", code.co_name)


def compare_stages(chk: Check, seen: dict, stages: list, module=None, config=None, idx=None, head=None) -> None:
    """One row per stage the hooks saw; the first one that differs is
    explained by measurement (_explain_stages). A stage whose module never
    ran (e.g. the norm computed without self.norm) gets no row: only the
    logits decide. head: the reference's lm_head weight."""
    __tracebackhide__ = True
    for name, want in stages:
        if name in seen:
            chk.compare(name, seen[name], want)
    if not chk.passed and "embedding" in seen:  # False in the grader's recheck, where the parts never run here
        _explain_stages(chk, seen, stages, module, config, idx)
    elif not chk.passed and head is not None:
        _logits_without_the_final_norm(chk, seen.get("logits"), stages, head)


def _logits_without_the_final_norm(chk: Check, got, stages: list, head: torch.Tensor) -> None:
    """Where the stages are not observed (the grader's recheck runs the forward in the learner's process): logits
    equal to the last block's output times the head, measured, with the two causes that give them."""
    last_block = [x for name, x in stages if name.startswith("block ")][-1]
    if near(got, last_block @ head.T):
        chk.candidates("the logits are the last block's output times the tied embedding, without the final norm "
                       "(measured: they equal the reference's logits with self.norm left out); candidates: self.norm "
                       "never ran, or its result is not what the head reads; the logits are "
                       "tied_logits(self.norm(x), self.lm_head.weight)")


def near(a, b) -> bool:
    return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape
            and torch.allclose(a.detach().double(), b.detach().double(), atol=1e-4, rtol=1e-3))


def _scale_between(got, want) -> float | None:
    """c where got equals c times want (c not 1), measured; None when no one number relates them."""
    if not (isinstance(got, torch.Tensor) and isinstance(want, torch.Tensor) and got.shape == want.shape):
        return None
    g, w = got.detach().double().cpu(), want.detach().double().cpu()
    norm = float((w * w).sum())
    if norm == 0.0:
        return None
    c = float((g * w).sum()) / norm
    return c if abs(c - 1) > 1e-3 and torch.allclose(g, c * w, rtol=1e-4, atol=1e-6) else None


def _factor_words(scale: float, config) -> str:
    """'times 5.657 = sqrt(d_model)', naming the model's size where the factor is its square root or its inverse."""
    root = config.d_model ** 0.5 if config is not None else None
    named = "" if root is None else " = sqrt(d_model)" if math.isclose(scale, root, rel_tol=1e-4) else \
        " = 1/sqrt(d_model)" if math.isclose(scale, 1 / root, rel_tol=1e-4) else ""
    return f"times {scale:.4g}{named}"


def _place_received(chk: Check, got, module, idx, kind: str, facts: list[str]) -> None:
    """The learner's line whose value a stage received (`got`, measured at its input), found by running the
    forward again on the same ids (the same ids give the same stream)."""
    if module is None or idx is None or not isinstance(got, torch.Tensor):
        return
    received = got.detach()

    def is_received(v) -> bool:
        return isinstance(v, torch.Tensor) and v.shape == received.shape and v.dtype == received.dtype \
            and torch.equal(v.detach(), received)
    forward = getattr(type(module).forward, "__code__", None)
    with torch.no_grad():  # in the model's own forward: the stage's code holds the value as its argument
        found = trace.line_making(module, (idx,), is_received, facts, kind, within=lambda code: code is forward)
    if found is not None:
        chk.located = found


def _into_block_0(chk: Check, got, want, module, idx, config) -> None:
    """Block 0's input is not the embedding of the ids: by what factor, when one relates them, and the learner's line
    whose value block 0 receives."""
    scale = _scale_between(got, want)
    if scale is None:
        chk.diagnose("the stream entering block 0 differs from the embedding of the ids (measured at block 0's "
                     "input): x = embed(idx, self.tok_emb.weight) goes into the first block unchanged")
    else:
        chk.diagnose(f"the stream entering block 0 is the embedding of the ids {_factor_words(scale, config)} "
                     "(measured at block 0's input): x = embed(idx, self.tok_emb.weight) goes into the first block "
                     "unscaled")
    _place_received(chk, got, module, idx, "block_input", [])


def _explain_stages(chk: Check, seen: dict, stages: list, module, config, idx=None) -> None:
    """Where the learner's stream first leaves the reference's, measured at
    the hooks: a stage that never ran, a stage whose input is not its
    predecessor's output (and what it is instead), or a stage whose output
    differs although its input matched (and whether the block itself is
    wrong or is called with other arguments)."""
    ref = dict(stages)
    n_layers = sum(1 for name, _ in stages if name.startswith("block "))
    if not near(seen.get("embedding"), ref["embedding"]):
        _into_block_0(chk, seen.get("embedding"), ref["embedding"], module, idx, config)
        return
    previous = ("the embedding", ref["embedding"], None)  # (what, its right output, its input)
    for i in range(n_layers):
        got_in = seen.get(f"block {i} input")
        if got_in is None:
            chk.diagnose(f"block {i} never ran (measured: its forward was not called, of {n_layers} blocks): every "
                         "block in self.blocks runs, in order: for i, block in enumerate(self.blocks)")
            return
        if not near(got_in, previous[1]):
            _wired_wrongly(chk, f"block {i}", got_in, previous, module, idx, config)
            return
        got_out, want_out = seen.get(f"block {i}"), ref[f"block {i}"]
        if not near(got_out, want_out):
            said, other = _block_alone(module, config, i, got_in, want_out, seen.get(f"block {i} arguments"))
            chk.diagnose(said)
            caller = seen.get(f"block {i} called at")
            if other and caller is not None:
                file, line, function = caller
                chk.located = trace.Located(file, line, function, trace.source_line(file, line),
                                            [f"block {i} is called here; given the rope tables, no cache and index "
                                             f"{i} it gives the right output (measured); the arguments that differ "
                                             f"here: {other}"], kind="call")
            return
        previous = (f"block {i}", want_out, got_in)
    norm_in = seen.get("final norm input")
    if norm_in is None:
        chk.diagnose("self.norm never ran (measured: the final norm's forward was not called): the logits are "
                     "computed from self.norm(x), the last block's output normalised, never from the stream itself")
    elif not near(norm_in, previous[1]):
        _wired_wrongly(chk, "the final norm", norm_in, previous, module, idx, config)
    elif not near(seen.get("final norm"), ref["final norm"]):
        chk.diagnose("self.norm's output differs while its input (the last block's output) matched (measured): "
                     "the final norm is an RMSNorm(config.d_model, config.norm_eps) applied to the whole stream")
    elif "logits" in ref and not near(seen.get("logits"), ref["logits"]):  # else the failure is not the stream's
        chk.diagnose("the logits differ while the final norm's output matched (measured): the head is "
                     "tied_logits(self.norm(x), self.lm_head.weight), the normalised stream times the tied embedding")


def _wired_wrongly(chk: Check, stage: str, got_in, previous, module, idx, config) -> None:
    """What a stage received instead of its predecessor's output, and the learner's line that made it."""
    what, right_out, right_in = previous
    heard = f"{stage} does not receive {what}'s output (measured at its input)"
    scale = _scale_between(got_in, right_out)
    if right_in is not None and near(got_in, right_in + right_out):
        chk.diagnose(f"{heard}: it receives {what}'s input plus its output, x + block(x), so the residual is added a "
                     f"second time; a Block already returns x plus its branches: x = block(x, ...)")
    elif right_in is not None and near(got_in, right_in):
        chk.diagnose(f"{heard}: it receives {what}'s input, so {what}'s output is dropped: x = block(x, ...)")
    elif scale is not None:
        chk.diagnose(f"{heard}: it receives {what}'s output {_factor_words(scale, config)}: the stream goes from "
                     f"{what} into {stage} unscaled")
    else:
        chk.diagnose(f"{heard}: the stream is changed between them")
    _place_received(chk, got_in, module, idx, "received", [f"{stage} receives this value where {what}'s output "
                                                           "belongs"])


def _block_alone(module, config, i: int, x, want, arguments) -> tuple[str, str | None]:
    """A block whose output differs although its input matched: is the
    block itself wrong, or is it called with other arguments? Measured by
    running the learner's own block i on the same input with the reference's
    rope tables, no cache and its index."""
    differs = f"block {i}'s output differs while its input matched (measured)"
    if module is None or config is None:
        return f"{differs}: run check_block", None
    cos, sin = tinylm.rope_cache(config.head_dim, config.max_seq_len, config.rope_theta)
    try:
        with torch.no_grad():
            alone = guarded_call(module.get_submodule(f"blocks.{i}"), (x, cos, sin, None, i))
    except Exception:  # noqa: BLE001: a block that cannot run on its own says no more than the row
        return f"{differs}: run check_block", None
    if not near(alone, want):
        return f"{differs}, and your Block gives that output on its own too: the Block is wrong; run check_block", None
    args, kwargs = arguments or ((), {})
    given = list(args) + list(kwargs.values())
    other = []
    for k, (name, right) in enumerate((("x", x), ("cos", cos), ("sin", sin), ("cache", None), ("the layer index", i))):
        if k >= len(given):
            continue
        value = given[k]
        if isinstance(right, torch.Tensor):
            if not (isinstance(value, torch.Tensor) and value.shape[-1] == right.shape[-1]
                    and near(value[:x.shape[1]], right[:x.shape[1]])):
                other.append(name)
        elif name == "the layer index" and value != right:
            other.append(f"{name} (not {i})")
    shown = ", ".join(other) if other else "its arguments or what is done with its output"
    return (f"{differs}, yet your Block alone, given the same input with the rope tables, no cache and index {i}, "
            f"gives the right output: the Transformer's call of block {i} differs in {shown}"), shown if other else None
