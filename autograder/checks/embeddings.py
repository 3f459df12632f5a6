"""Checks for notebook 01: embedding lookup, one-hot form, tied output head."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import math

from .contracts import Contract, defaults, run_contract
from ..learner_values import describe
from .framework.calling import measuring_call
from .framework.check import Check
from .framework.watch import first_line_where
from .framework.measure import gradient_reaches, randn


def _ids(batch: int, seq: int, vocab: int, seed: int) -> torch.Tensor:
    return torch.randint(0, vocab, (batch, seq), generator=torch.Generator().manual_seed(seed))


def _lookup_cases(seed: int, batch: int, seq: int, vocab: int, d_model: int, dtype):
    weight = randn(vocab, d_model, seed=seed, dtype=dtype)
    ids = _ids(batch, seq, vocab, seed + 1)
    ids[0, 0], ids[-1, -1] = 0, vocab - 1  # the first and last rows of the table must be reachable
    return ids, weight


def embed_steps(ids: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """The lookup as one row of weight per id: (..., ) ids -> (..., d)."""
    rows = weight.index_select(0, ids.reshape(-1))            # (n, d)
    return rows.reshape(*ids.shape, weight.shape[-1])


def one_hot_steps(ids: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """The same numbers as a product: one_hot(ids) (..., V) @ weight (V, d)."""
    one_hot = F.one_hot(ids, num_classes=weight.shape[0]).to(weight.dtype)
    return one_hot @ weight


def _lookup_contract(name: str, steps, check) -> Contract:
    def cases():
        p = defaults(check)
        ids, weight = _lookup_cases(p["seed"], p["batch"], p["seq"], p["vocab"], p["d_model"], p["dtype"])
        return [(f"ids {tuple(ids.shape)}", (ids, weight), {})]
    return Contract(name, steps, cases, names=("ids", "weight"), batch=("ids",), leading=("ids",), cast=("weight",),
                    views=("ids", "weight"), grad=("weight",))


def _check_lookup(name: str, fn, seed: int, batch: int, seq: int, vocab: int, d_model: int, dtype) -> None:
    __tracebackhide__ = True
    ids, weight = _lookup_cases(seed, batch, seq, vocab, d_model, dtype)
    chk = Check(name, expects=f"a (batch, seq, d_model) = {(batch, seq, d_model)} tensor of rows of weight")
    chk.axes = {"batch": batch, "seq": seq, "vocab": vocab, "d_model": d_model}
    want = F.embedding(ids, weight)  # torch's own lookup, the reference
    got = chk.call(fn, ids, weight)
    if not chk.compare(f"ids {tuple(ids.shape)}, weight {tuple(weight.shape)}", got, want, variants={
        "looked up columns instead of rows: weight is [vocab, d_model], so token i is weight[i], not weight[:, i]":
            lambda: weight.T[ids] if vocab == d_model else weight[:, ids].permute(1, 2, 0),
        "lookup of the transposed ids (batch and seq swapped)": lambda: weight[ids.T],
        "one number per id, read from the table flattened (measured: your result is weight.flatten()[ids], as "
        "torch.take(weight, ids) gives: torch.take has no axis argument, unlike np.take): a row per id is "
        "weight[ids]": lambda: weight.flatten()[ids],
    }):
        _explain_lookup(chk, got, ids, weight, want)
    # A single sequence without batch axis must work too: lookup is elementwise.
    one = chk.call(fn, ids[0], weight, error_hints=_width_hints(ids[0], vocab))
    chk.compare(f"ids {tuple(ids[0].shape)} (no batch axis)", one, want[0])
    # Ids that never reach the last row: the result still has vocab-wide meaning.
    low = ids % (vocab // 2)
    chk.compare(f"ids all below {vocab // 2}", chk.call(fn, low, weight, error_hints=_width_hints(low, vocab)),
                F.embedding(low, weight))
    if dtype != torch.float64:  # the result keeps weight's dtype (the hidden tests use float64)
        w64 = weight.double()
        chk.compare("float64 weight", chk.call(fn, ids, w64), F.embedding(ids, w64))
    if isinstance(got, torch.Tensor):
        w = weight.clone().requires_grad_(True)
        out = chk.call(fn, ids, w)
        chk.require("gradient reaches weight", gradient_reaches(out, w),
                    "the output is detached from weight, so the embedding could never be trained",
                    diagnosis=_gradient_cut(out))
    # A one-hot built by comparison gives a zero row for an id past the table, F.one_hot raises: both are right
    # for one_hot_embed; a row of the table is not.
    _id_past_the_table(chk, fn, ids, weight, zero_row_ok=name == "one_hot_embed")
    run_contract(chk, fn, CONTRACTS[name])
    chk.finish()


def _gradient_cut(out) -> str:
    """Why the result carries no gradient: an integer result is measured; otherwise examples, worded as such."""
    if isinstance(out, torch.Tensor) and not (out.is_floating_point() or out.is_complex()):
        return (f"the result does not depend on weight through autograd: it is {out.dtype} (measured), and an integer "
                "tensor carries no gradient: the step that makes that dtype cuts it")
    return ("the result does not depend on weight through autograd (for example a .detach(), .data, a new tensor "
            "built from .tolist(), or a new Parameter wrapping the table, as nn.Embedding.from_pretrained makes, "
            "cuts the gradient)")


def _id_past_the_table(chk: Check, fn, ids: torch.Tensor, weight: torch.Tensor, zero_row_ok: bool = False) -> None:
    """An id the table has no row for (vocab, one past the last) must raise, as weight[ids] and F.embedding do: a
    row returned for it is a wrong embedding no later step can notice. Which row was read is measured.
    zero_row_ok: a row of zeros there is right too (a one-hot built by comparison has no 1 for that id)."""
    vocab = weight.shape[0]
    bad = ids.clone()
    bad[0, 1] = vocab
    try:
        out = measuring_call(fn, (bad, weight))
    except Exception:  # noqa: BLE001: any error is right here: the id has no row
        out = None
    row = out[0, 1] if isinstance(out, torch.Tensor) and out.dim() == 3 and out.shape[:2] == ids.shape else None
    zero = zero_row_ok and row is not None and not bool(row.abs().sum())
    if chk.require(f"id {vocab} (past the table's {vocab} rows) raises" + (" or reads a zero row" if zero_row_ok else ""),
                   out is None or zero, f"returned {describe(out)}"):
        return
    if row is None:  # no embedding per id came back (another shape): the row's note says what did, no more is known
        return
    read = [k for k in range(vocab) if row.shape == weight[k].shape and torch.equal(row.to(weight.dtype), weight[k])]
    # A clamp or a wrap is said only when every other id still reads its own row: a shift of every id (ids - 1)
    # also reads the last row for id vocab.
    rest = torch.ones(ids.shape, dtype=torch.bool)
    rest[0, 1] = False
    others_right = torch.equal(out[rest].to(weight.dtype), weight[ids[rest]])
    how = {vocab - 1: "the last row: the id was clamped into the table", 0: "the first row: the id wrapped around modulo vocab"}
    said = (f"row {read[0]}, {how.get(read[0], 'a row of another token') if others_right else 'the row of another id'}"
            if read else "no row of the table")
    fix = "with no clamp or modulo" if others_right and read and read[0] in how else "as they are"
    chk.diagnose(f"your {chk.fn_name} returns an embedding for id {vocab}, which the table ({vocab} rows, ids 0 to "
                 f"{vocab - 1}) has no row for (measured: at that position your result holds {said}): an id past the "
                 "table is a bug upstream (a tokenizer with more ids than the model), and weight[ids] raises on it; "
                 f"look the ids up{'' if fix == 'as they are' else ' as they are,'} {fix}, so the error shows where it happens")


def _width_hints(ids: torch.Tensor, vocab: int) -> list:
    """error_hints for a call on ids missing the last token (the full ids
    worked): named only when the learner's error is a shape mismatch that
    mentions the width max(ids) + 1, which is F.one_hot's default."""
    top = int(ids.max())
    if top >= vocab - 1:
        return []
    width = rf"(?=[\s\S]*(?<!\d){top + 1}(?!\d))"
    return [(width + r"[\s\S]*(cannot be multiplied|must match|size mismatch|shape)",
             f"it fails when the largest id in ids is {top} < vocab - 1 = {vocab - 1}, and your error names the width "
             f"{top + 1}: the one-hot width came from the ids (F.one_hot's default is max(ids) + 1 = {top + 1}), not "
             "from the vocabulary; pass num_classes=weight.shape[0]")]


def _explain_lookup(chk: Check, got, ids: torch.Tensor, weight: torch.Tensor, want: torch.Tensor) -> None:
    """Measure what a wrong lookup returned: shifted rows, flattened axes, a scale."""
    if not isinstance(got, torch.Tensor):
        return
    vocab = weight.shape[0]
    if got.dtype != want.dtype:
        str_dtype = lambda d: str(d).removeprefix("torch.")
        chk.measured(f"your result is {str_dtype(got.dtype)}, the weight is {str_dtype(weight.dtype)}: the rows must "
                     "keep the weight's dtype")
        if not got.is_floating_point() and want.is_floating_point():
            chk.diagnose(f"your rows are {str_dtype(got.dtype)} numbers: the weight was cast to the integer dtype of "
                         "the ids (every value truncated); cast the integer side to weight.dtype instead, never the weight")
        return
    if got.shape == want.shape:
        for shift in (-2, -1, 1, 2):
            if torch.allclose(got, weight[(ids + shift) % vocab]):
                sign = "+" if shift > 0 else "-"
                chk.diagnose(f"token ids shifted by {shift:+d}: your rows are weight[ids {sign} {abs(shift)}]; token i "
                             "is row i of weight (ids start at 0), so look up weight[ids]")
                return
        d = weight.shape[1]
        chk.explain_scale("the lookup", got, want, {"sqrt(d_model)": math.sqrt(d), "1/sqrt(d_model)": 1 / math.sqrt(d)})
    elif got.numel() == want.numel() and torch.allclose(got.reshape(want.shape), want):
        chk.diagnose(f"right rows, wrong shape {tuple(got.shape)}: the (batch, seq) axes were flattened; keep the ids' "
                     f"shape, (batch, seq) -> (batch, seq, d_model) (weight[ids] does)")


def check_embed(embed, *, seed: int = 0, batch: int = 2, seq: int = 5, vocab: int = 11, d_model: int = 7,
                dtype=torch.float32) -> None:
    """embed(ids, weight) -> weight[ids], checked against F.embedding."""
    __tracebackhide__ = True
    _check_lookup("embed", embed, seed, batch, seq, vocab, d_model, dtype)


def check_one_hot_embed(one_hot_embed, *, seed: int = 1, batch: int = 3, seq: int = 4, vocab: int = 13,
                        d_model: int = 6, dtype=torch.float32) -> None:
    """one_hot_embed(ids, weight) = one_hot(ids) @ weight: same numbers as a lookup."""
    __tracebackhide__ = True
    _check_lookup("one_hot_embed", one_hot_embed, seed, batch, seq, vocab, d_model, dtype)


def tied_logits_steps(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return x @ weight.T  # (..., d) @ (d, V)


def _tied_cases():
    p = defaults(check_tied_logits)
    return [(f"vocab {v}", (randn(p["batch"], p["seq"], p["d_model"], seed=p["seed"] + 1, dtype=p["dtype"]) * 1,
                            randn(v, p["d_model"], seed=p["seed"], dtype=p["dtype"])), {})
            for v in (p["d_model"], p["vocab"])]


def check_tied_logits(tied_logits, *, seed: int = 2, batch: int = 2, seq: int = 3, vocab: int = 9,
                      d_model: int = 5, dtype=torch.float32) -> None:
    """tied_logits(x, weight) = x @ weight.T, checked with einsum, plus a
    square case (vocab == d_model) where a transposed weight runs silently."""
    __tracebackhide__ = True
    chk = Check("tied_logits", expects=f"(batch, seq, vocab) logits, here {(batch, seq, vocab)}")
    # The square case runs first: there a transposed weight runs silently and can be named.
    for label, v in ((f"square: vocab = d_model = {d_model}", d_model), (f"vocab {vocab} != d_model {d_model}", vocab)):
        weight = randn(v, d_model, seed=seed, dtype=dtype)
        x = randn(batch, seq, d_model, seed=seed + 1, dtype=dtype)
        want = torch.einsum("btd,vd->btv", x, weight)  # score of token v = <x, embedding of v>
        got = chk.call(tied_logits, x, weight)
        chk.compare(label, got, want, variants={
            "transposed weight: multiplied by weight instead of weight.T (the embedding is [vocab, d_model], "
            "the head needs [d_model, vocab]; F.linear(x, w) computes x @ w.T itself, so it takes weight as it is)":
                lambda: x @ weight,
            "softmax applied: tied_logits returns raw scores (logits), not probabilities":
                lambda: (x @ weight.T).softmax(-1),
            "log_softmax applied: the result is log-probabilities; tied_logits returns raw scores (logits)":
                lambda: (x @ weight.T).log_softmax(-1),
            "each row's maximum subtracted (softmax's overflow guard): softmax, argmax and the loss cannot tell, "
            "but tied_logits returns the scores themselves, x @ weight.T; the guard belongs inside the softmax":
                lambda: want - want.amax(-1, keepdim=True),
            "each row centred on its mean: softmax, argmax and the loss cannot tell, but tied_logits returns the "
            "scores themselves, x @ weight.T": lambda: want - want.mean(-1, keepdim=True),
        })
        _shifted_per_row(chk, got, want)
        chk.explain_scale("the tensor of logits", got, want, {"1/sqrt(d_model)": 1 / math.sqrt(d_model),
                                                    "sqrt(d_model)": math.sqrt(d_model)})
    run_contract(chk, tied_logits, TIED_LOGITS)
    chk.finish()


def _shifted_per_row(chk, got, want) -> None:
    """A failing result that is the reference plus one constant per row (a shift softmax cannot see), said as
    measured where no named variant gave it."""
    row = chk.rows[-1]
    if row.ok or chk.reproduced.get(row.name) or not isinstance(got, torch.Tensor) or got.shape != want.shape \
            or not got.is_floating_point():
        return
    shift = (got.detach().double() - want.double())                      # (B, T, V)
    if torch.allclose(shift, shift[..., :1].expand_as(shift), atol=1e-5, rtol=0):
        constants = shift[..., 0]
        same = torch.allclose(constants, constants.flatten()[:1].expand_as(constants), atol=1e-5, rtol=0)
        added = f"{float(constants.flatten()[0]):.4g} added to every logit" if same else \
            "a constant added to each row (not the same in every row)"
        chk.measured(f"your logits are x @ weight.T with {added}: softmax, argmax and the loss cannot tell them "
                     "apart, but the logits themselves differ")


def check_tie_weights(tie_weights, *, vocab: int = 10, d_model: int = 6, seed: int = 3) -> None:
    """tie_weights(tok_emb, lm_head) makes lm_head use the very same Parameter."""
    __tracebackhide__ = True
    torch.manual_seed(seed)
    emb, head = nn.Embedding(vocab, d_model), nn.Linear(d_model, vocab, bias=False)
    chk = Check("tie_weights", expects="nothing (it changes lm_head in place) or lm_head")
    before = emb.weight.detach().clone()
    head_before, head_values = head.weight, head.weight.detach().clone()
    head_names = set(vars(head)) | set(head._parameters)
    returned = chk.call(tie_weights, emb, head)
    hw = head.weight
    if hw is head_before and torch.equal(hw.detach(), head_values) and torch.equal(emb.weight.detach(), before):
        # Measured on the module itself: a name the call added to lm_head that holds the embedding is an
        # assignment under another name (the layer reads only .weight); the name is the learner's, not said.
        elsewhere = any(getattr(head, name, None) is emb.weight
                        for name in (set(vars(head)) | set(head._parameters)) - head_names)
        fix = "assign the attribute in place: lm_head.weight = tok_emb.weight"
        if returned is not None:
            chk.diagnose("lm_head.weight is unchanged after the call: tie_weights returned a value, but nothing "
                         "reads it; " + fix)
        elif _rebinds_the_head(tie_weights, vocab, d_model):
            chk.diagnose("lm_head.weight is unchanged after the call: rebinding a name inside the function "
                         "(lm_head = ...; measured: when the call returns, its name for the head holds another "
                         "object) does not change the caller's module; " + fix)
        elif elsewhere:
            chk.diagnose("lm_head.weight is unchanged after the call, which gave lm_head a new attribute holding "
                         "tok_emb.weight under a name other than weight, one the layer never reads; " + fix)
        else:
            chk.candidates("lm_head.weight is unchanged after the call, the same tensor with the same values; "
                           "candidates: a name rebound inside the function (lm_head = ...), which does not change "
                           "the caller's module; an assignment to a copy; no assignment. " + fix[0].upper() + fix[1:])
    same = hw is emb.weight
    chk.require("lm_head.weight is tok_emb.weight", same,
                f"lm_head.weight is a separate tensor of shape {tuple(hw.shape)}",
                diagnosis=None if chk.diagnoses or chk.candidate_lines else _tie_diagnosis(
                    hw, emb.weight, storage_read=getattr(tie_weights, "recheck_trace", None) is None))
    if not chk.require("embedding values unchanged", torch.equal(emb.weight.detach(), before),
                       "tok_emb.weight changed: tie by sharing the embedding, do not overwrite it"):
        if torch.equal(emb.weight.detach(), head_values):
            # Identity is read only where the modules are the learner's own: the grader's recheck brings the
            # parameters back into the check's modules, where the values still show which way the tie went.
            own = getattr(tie_weights, "recheck_trace", None) is None
            held = "is now the head's own Parameter" if own and emb.weight is head_before else \
                "now holds the values lm_head.weight had before the call"
            chk.diagnose(f"the embedding was overwritten with the head's random weights (measured: tok_emb.weight "
                         f"{held}; tok_emb.weight = lm_head.weight ties them the wrong way round)")
        else:
            chk.candidates("tok_emb.weight holds other values after the call (measured); candidates: the shared "
                           "weight written to after tying (an init of lm_head.weight re-initialises the embedding it "
                           "is), or the embedding's values replaced some other way")
    params = {id(p) for p in nn.ModuleList([emb, head]).parameters()}
    chk.require("parameters counted once", len(params) == 1,
                f"{len(params)} distinct parameters, expected 1 shared one")
    if same:
        chk.require("the shared weight trains (requires_grad)", emb.weight.requires_grad,
                    "tok_emb.weight.requires_grad is False after the call",
                    diagnosis="the shared weight no longer trains (measured: requires_grad is False after tie_weights): "
                              "once tied, lm_head.weight IS tok_emb.weight, so freezing the head freezes the embedding "
                              "too; leave requires_grad alone (the optimizer sees the one Parameter once anyway)")
    if same and emb.weight.requires_grad:  # one gradient step through both uses lands in the one shared tensor
        ids = torch.tensor([[1, 2]])
        head(emb(ids)).sum().backward()
        chk.require("both uses accumulate into one .grad", emb.weight.grad is not None,
                    "the shared weight got no gradient")
    chk.finish()


def _rebinds_the_head(tie_weights, vocab: int, d_model: int) -> bool:
    """Whether tie_weights, run again on fresh modules, returns with its
    second parameter's name bound to an object other than the head it was
    given (measured on the call's own frame as it returns)."""
    code = getattr(tie_weights, "__code__", None)
    if code is None or code.co_argcount < 2 or getattr(tie_weights, "recheck_trace", None) is not None:
        return False  # no frame of the learner's here (the grader's recheck runs it in the sandbox): not measured
    emb, head = nn.Embedding(vocab, d_model), nn.Linear(d_model, vocab, bias=False)
    name = code.co_varnames[1]
    found = first_line_where(tie_weights, (emb, head), lambda seen: seen is code, lambda frame, event: (
        frame.f_locals[name] is not head if event == "return" and name in frame.f_locals else None))
    return found is not None and found[2]


def _tie_diagnosis(head_weight: torch.Tensor, emb_weight: torch.Tensor, storage_read: bool = True) -> str:
    """What lm_head.weight holds instead of the embedding's Parameter. storage_read: whether the two tensors' storages
    can be compared (not where the grader's recheck brought the head back from the learner's process)."""
    if tuple(head_weight.shape) == tuple(emb_weight.T.shape) and torch.equal(head_weight.detach(), emb_weight.detach().T):
        # .T of the table is a view of its storage, .T.clone() a copy: the values alone do not tell them apart
        held = ("" if not storage_read else ", a view of the embedding's storage (measured)"
                if head_weight.data_ptr() == emb_weight.data_ptr() else ", a copy of its values (measured)")
        return (f"transposed weight: lm_head.weight holds weight.T{held}, of shape [d_model, vocab] in a "
                "Parameter of its own; nn.Linear(d_model, vocab) stores [d_out, d_in] = [vocab, d_model], the "
                "embedding's own shape, so no transpose is needed: assign the Parameter itself, lm_head.weight = "
                "tok_emb.weight")
    if tuple(head_weight.shape) == tuple(emb_weight.shape) and torch.equal(head_weight.detach(), emb_weight.detach()):
        if not storage_read:
            return ("head is not the embedding's Parameter: lm_head.weight is a Parameter of its own holding the "
                    "embedding's values (a copy, or a second Parameter over the same storage; the recheck cannot "
                    "read which), so parameters() yields two; assign the Parameter itself: lm_head.weight = "
                    "tok_emb.weight")
        if head_weight.data_ptr() == emb_weight.data_ptr() and not isinstance(head_weight, torch.nn.Parameter):
            # the Parameter deleted, then .data assigned: a plain tensor attribute, outside parameters()
            return ("head is a plain tensor, not the embedding's Parameter: lm_head.weight is a tensor over the "
                    "embedding's storage (measured: the same memory, not a Parameter, requires_grad "
                    f"{head_weight.requires_grad}), so lm_head has no parameter and the head's use of the weights "
                    "sends no gradient to the table; assign the Parameter itself, not its .data: lm_head.weight = "
                    "tok_emb.weight")
        if head_weight.data_ptr() == emb_weight.data_ptr():
            # tied through .data: one storage, so the values stay equal, but two Parameter objects
            return ("head shares the storage, not a share of the Parameter: lm_head.weight is a second Parameter over "
                    "the embedding's storage (measured: the same memory, another object), so the values stay equal, but "
                    "parameters() yields two Parameters: an optimizer keeps two states and updates the same numbers "
                    "twice per step; assign the Parameter itself: lm_head.weight = tok_emb.weight")
        if not isinstance(head_weight, torch.nn.Parameter):
            return ("head is a copy, not a share: lm_head.weight is a plain tensor (not a Parameter) holding a copy "
                    "of the values, equal today; lm_head has no parameter, so the head never trains and the two drift "
                    "apart as the table does; assign the Parameter itself: lm_head.weight = tok_emb.weight")
        return ("head is a copy, not a share: lm_head.weight holds a copy of the values in a Parameter of its own (a "
                "clone, a new Parameter, or values copied into the head's) with equal values today, but the two will "
                "drift apart during training and the model holds vocab x d_model parameters twice; "
                "assign the Parameter itself: lm_head.weight = tok_emb.weight")
    return "lm_head.weight was not replaced by the embedding's Parameter: assign lm_head.weight = tok_emb.weight"


CONTRACTS = {"embed": _lookup_contract("embed", embed_steps, check_embed),
             "one_hot_embed": _lookup_contract("one_hot_embed", one_hot_steps, check_one_hot_embed)}
# x is (B, T, d) by the exercise's docstring, no more: an einsum written for three axes is right, so no regime
# adds a leading axis in front.
TIED_LOGITS = Contract("tied_logits", tied_logits_steps, _tied_cases, names=("x", "weight"), batch=("x",),
                       views=("x", "weight"), grad=("x", "weight"))
