"""Notebook 09's steps read by their calls: the order in which one call ran zero_grad, backward passes,
clip_grad_norm_ and optimizer.step (each seen by a hook or a pass-through stand-in, with the learner's line that
made it), and, for train_step, the gradient its update follows, read with plain SGD at lr 1 (whose update IS the
gradient it is handed) on fresh copies of the check's model, with and without gradients left in .grad before the
call and with a grad_clip that binds or does not. A cause is said only where these runs confirm it."""
from __future__ import annotations

import contextlib
import io
import sys
import sysconfig

import torch
import torch.nn.functional as F

from . import trace
from .framework.calling import globals_of, quiet_call, refuse_delegation
from .framework.check import Check
from .learner_code import is_learners_file

_PYTHONS_OWN = tuple({sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]})
NO_BOUND = 1e6   # a grad_clip far above any gradient norm here: clipping leaves the gradient as it is


def _learners_place(frame) -> tuple[str, int, str] | None:
    """The innermost frame of the learner's code at or above `frame`: (file, line, function). Python's own library
    is not the learner's either (a context manager's frame may sit between)."""
    while frame is not None:
        code = frame.f_code
        if is_learners_file(code.co_filename) and not code.co_filename.startswith(_PYTHONS_OWN):
            return code.co_filename, frame.f_lineno, getattr(code, "co_qualname", code.co_name)
        frame = frame.f_back
    return None


def recorded_calls(fn, args: tuple, model, opt, name: str) -> list[tuple[str, tuple | None]] | None:
    """fn(*args) once, its printing silenced, with every backward pass (a hook on the model's first parameter,
    which every forward pass reaches), zero_grad (of `opt` or `model`), clip_grad_norm_ and opt.step recorded in
    the order they ran, each with the learner's line that called it (None for a backward pass, whose hook runs
    inside autograd). The stand-ins pass every call through, so the call computes what it would otherwise. None
    when no backward pass was seen (the call ran elsewhere, e.g. in the grader's separate process, or raised
    first); the order up to an error is still returned."""
    events: list[tuple[str, tuple | None]] = []
    first = next(model.parameters())
    handles = [first.register_post_accumulate_grad_hook(lambda p: events.append(("backward", None))),
               opt.register_step_pre_hook(lambda o, a, k: events.append(("step", _learners_place(sys._getframe(1)))))]
    for owner in (opt, model):
        def zero(*a, _original=owner.zero_grad, **k):
            events.append(("zero_grad", _learners_place(sys._getframe(1))))
            return _original(*a, **k)
        owner.zero_grad = zero  # an instance attribute: found before the class's method
    clip = torch.nn.utils.clip_grad_norm_

    def counted_clip(*a, **k):
        events.append(("clip", _learners_place(sys._getframe(1))))
        return clip(*a, **k)
    spots = [(vars(torch.nn.utils), "clip_grad_norm_")]
    for g in globals_of(fn):
        spots += [(g, key) for key, value in list(g.items()) if value is clip]
    try:
        for space, key in spots:
            space[key] = counted_clip
        with contextlib.redirect_stdout(io.StringIO()), refuse_delegation(name, fn):
            fn(*args)
    except Exception:  # noqa: BLE001: the order seen up to an error is still the order
        pass
    finally:
        for space, key in spots:
            space[key] = clip
        for handle in handles:
            handle.remove()
        for owner in (opt, model):
            vars(owner).pop("zero_grad", None)
    return events if any(e == "backward" for e, _ in events) else None


def order_text(events: list[str]) -> str:
    return ", ".join(events)


def _flat(grads) -> torch.Tensor:
    return torch.cat([g.detach().flatten() for g in grads]).double()


def _clipped(v: torch.Tensor, bound: float) -> torch.Tensor:
    """v scaled as clip_grad_norm_ scales it (its epsilon included)."""
    return v * min(1.0, bound / (float(v.norm()) + 1e-6))


def _close(a: torch.Tensor | None, b: torch.Tensor) -> bool:
    return a is not None and a.shape == b.shape and bool(torch.allclose(a, b, atol=1e-6, rtol=1e-4))


class _Probe:
    """Fresh copies of the check's model, stepped by the learner's train_step with SGD at lr 1: the update each
    call makes is the gradient its optimizer.step() was handed."""

    def __init__(self, train_step, new_model, leave_gradients, x, y, seed: int):
        self.fn, self.new_model, self.leave, self.x, self.y, self.seed = train_step, new_model, leave_gradients, x, y, seed

    def _fresh(self, left: bool):
        model = self.new_model()
        model.train()
        if left:
            self.leave(model)
        return model, torch.optim.SGD(model.parameters(), lr=1.0)

    def batch_gradient(self) -> torch.Tensor:
        """This batch's gradient on the fresh model, dropout drawn as the learner's call draws it."""
        model, _ = self._fresh(False)
        torch.manual_seed(self.seed)
        F.cross_entropy(model(self.x).flatten(0, 1), self.y.flatten()).backward()
        return _flat(p.grad for p in model.parameters())

    def left_gradient(self) -> torch.Tensor:
        model, _ = self._fresh(True)
        return _flat(p.grad for p in model.parameters())

    def followed(self, left: bool, bound: float, calls: list | None = None):
        """(the gradient the learner's update followed, .grad after the call as one vector or None when every
        .grad is None); None when the call raised. calls: filled with the order of the step's calls."""
        model, opt = self._fresh(left)
        before = torch.cat([p.detach().flatten() for p in model.parameters()]).double()
        torch.manual_seed(self.seed)
        args = (model, opt, self.x.clone(), self.y.clone(), bound)
        if calls is not None:
            seen = recorded_calls(self.fn, args, model, opt, "train_step")
            calls.extend(seen or [])
        elif quiet_call(self.fn, *args) is None:
            return None
        after = torch.cat([p.detach().flatten() for p in model.parameters()]).double()
        grads = [p.grad for p in model.parameters()]
        left_over = None if all(g is None for g in grads) else _flat(
            g if g is not None else torch.zeros_like(p) for g, p in zip(grads, model.parameters()))
        return before - after, left_over


def _place(events: list, name: str, after: str | None = None):
    """The learner's line of the first `name` call (the first after an `after` call, where given)."""
    start = next((i for i, (e, _) in enumerate(events) if e == after), -1) + 1 if after else 0
    return next((where for e, where in events[start:] if e == name and where is not None), None)


def _located(places: list, order: list[str]):
    places = [p for p in places if p is not None]
    if not places or any(p[0] != places[0][0] for p in places):
        return None
    (file, line, function), also = places[0], places[1][1] if len(places) > 1 and places[1][1] != places[0][1] else None
    facts = [f"in this order: {order_text(order)}; a step runs zero_grad, backward, clip, step"]
    return trace.Located(file, line, function, trace.source_line(file, line), facts, kind="misplaced", also=also,
                         also_code=trace.source_line(file, also) if also else "")


def explain_step(chk: Check, train_step, new_model, leave_gradients, x, y, seed: int, grad_clip: float) -> None:
    """What a failing train_step's update follows, measured on fresh copies of the check's model, and the causes
    those runs confirm: a clip that acts on the gradients .grad held before backward (this batch's gradient goes
    unclipped on a fresh model; with gradients left in .grad, those are clipped and this batch's added unclipped),
    and gradients left before the call added in (with a bound that does not bind, the update is this batch's
    gradient on a fresh model and those gradients plus it when they are left), zero_grad placed after the step
    where the order of the calls, or the gradients emptied when the call returns, shows it."""
    probe = _Probe(train_step, new_model, leave_gradients, x, y, seed)
    fresh_free, fresh_bound = probe.followed(False, NO_BOUND), probe.followed(False, grad_clip)
    calls: list = []
    left_free, left_bound = probe.followed(True, NO_BOUND), probe.followed(True, grad_clip, calls)
    if None in (fresh_free, fresh_bound, left_free, left_bound):
        return
    g, left = probe.batch_gradient(), probe.left_gradient()
    norm = float(g.norm())
    unclipped_first = norm > grad_clip * 1.001 and _close(fresh_bound[0], g)
    clips_before = unclipped_first and _close(left_bound[0], _clipped(left, grad_clip) + g)
    added = _close(fresh_free[0], g) and _close(left_free[0], left + g)
    if not (clips_before or added):
        return
    said = []
    if unclipped_first:
        said.append(f"with no gradient in .grad before the call, this batch's gradient unclipped (its global norm, "
                    f"{norm:.4g}, is above grad_clip = {grad_clip:g})")
    if added:
        said.append(f"with gradients left in .grad before the call (as step 2 of the check is handed), those "
                    f"gradients plus this batch's, where grad_clip = {NO_BOUND:g} leaves both as they are")
    if clips_before:
        said.append(f"with those gradients left and grad_clip = {grad_clip:g}, those gradients clipped to "
                    "grad_clip plus this batch's gradient unclipped")
    chk.measured("your step's update follows (measured on fresh copies of the model, stepped by SGD at lr 1, whose "
                 "update is the gradient it is handed): " + "; ".join(said))
    order = [e for e, _ in calls]
    seen = f" (measured, in this order: {order_text(order)})" if calls else ""
    places = []
    backward_at = order.index("backward") if "backward" in order else None
    if clips_before:
        before_backward = backward_at is not None and "clip" in order[:backward_at]
        chk.diagnose(f"clip_grad_norm_ runs before loss.backward(){seen if before_backward else ''}: it clips the "
                     "gradients .grad holds before this batch's are added, and this batch's gradient reaches "
                     "optimizer.step() unclipped (measured above, with and without gradients left in .grad); call "
                     "it after loss.backward(), just before optimizer.step()")
        if before_backward:
            places.append(_place(calls, "clip"))
    if added:
        zero_after_step = "step" in order and "zero_grad" in order[order.index("step"):] and \
            "zero_grad" not in order[:backward_at]
        emptied = left_bound[1] is None or not bool(left_bound[1].any())
        if zero_after_step:
            chk.diagnose(f"optimizer.zero_grad() runs after optimizer.step(), not before loss.backward(){seen}: the "
                         "gradients a caller left in .grad are added to this batch's (measured above, with and "
                         "without gradients left); call optimizer.zero_grad() before loss.backward()")
            places.append(_place(calls, "zero_grad", after="step"))
        elif emptied:
            chk.diagnose("the gradients are zeroed after optimizer.step(), not before loss.backward() (measured: "
                         ".grad is empty when the call returns, and the update added the gradients left in .grad "
                         "before the call to this batch's): call optimizer.zero_grad() before loss.backward()")
        else:
            chk.diagnose("no zero_grad() before loss.backward(): the gradients a caller left in .grad are added to "
                         "this batch's (measured above, with and without gradients left); call "
                         "optimizer.zero_grad() before loss.backward()")
    if chk.located is None:
        chk.located = _located(places, order)
