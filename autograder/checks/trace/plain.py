"""A trace as plain data: what the grader's jailed recheck process sends back
of the learner's run (plain_trace), and the Trace the trusted side rebuilds
from it, checked field by field (from_plain_trace)."""
from __future__ import annotations

import torch
from .raised import locate_error
from .record import LEAF, MAX_OPS, tensors_in, Op, Trace

def plain_trace(t: Trace) -> dict:
    """A trace as plain data (str, int, float, bool, tensors, lists, dicts):
    what the grader's jailed process sends back (see from_plain_trace)."""
    outputs = tensors_in(t.result)
    return {"ops": [[op.name[:60], op.file[:200], op.line, op.function[:120], list(op.inputs), list(op.slots),
                     list(op.outputs), {k: v for k, v in op.kwargs.items() if isinstance(v, (int, float, bool))
                                        or (isinstance(v, tuple) and all(isinstance(n, int) for n in v))},
                     [list(sh) for sh in op.input_shapes], op.grad_in, op.number_out, op.factory, op.grad_out,
                     [[f[:200], ln, fn[:120], n] for f, ln, fn, n in op.stack[:16]], op.raised, op.inside]
                    for op in t.ops[:MAX_OPS]],
            "result": list(outputs),
            "owners": [[t.producer.get(id(o), -1), t.slot.get(id(o), 0)] for o in outputs],
            "returned": list(t.returned) if t.returned else None,
            "truncated": bool(t.truncated), "error": type(t.error).__name__ if t.error is not None else None,
            "raised": _raise_place(t.error), "leaves": list(t.leaves[:MAX_OPS]), "failed": t.failed}


def _raise_place(err) -> list | None:
    found = locate_error(err) if err is not None else None
    return [found.file, found.line, found.function] if found is not None else None


def from_plain_trace(data, files: set[str]) -> Trace:
    """The Trace a jailed process sent (plain_trace), checked field by field.
    Only lines of `files` (the submission's own cells, whose text the grader
    holds) are kept as places; a malformed trace is an incomplete one."""
    try:
        ops = []
        leaves = [t for t in data.get("leaves") or [] if isinstance(t, torch.Tensor)][:MAX_OPS]
        for i, row in enumerate(data["ops"][:MAX_OPS]):
            name, file, line, function, inputs, slots, outputs, kwargs, shapes, gin, num, fac, gout = row[:13]
            stack, raised, inside = (row[13], row[14], row[15]) if len(row) == 16 else ([], False, False)
            known = isinstance(file, str) and file in files and type(line) is int
            # an earlier op, a call input (<= -2), a leaf the trace sent (LEAF - k) or an unknown one (-1)
            ints = [j for j in inputs if type(j) is int and j < i and (j > LEAF or LEAF - j < len(leaves))]
            if len(ints) != len(inputs) or not all(isinstance(o, torch.Tensor) for o in outputs):
                raise ValueError("malformed op")
            frames = tuple((f, ln, str(fn)[:120], n) for f, ln, fn, n in stack[:16]
                           if isinstance(f, str) and f in files and type(ln) is int and type(n) is int)
            ops.append(Op(i, str(name)[:60], file if known else "", line if known else 0, str(function)[:120] if known
                          else "", ints, list(outputs), [int(k) for k in slots if type(k) is int],
                          {str(k): v for k, v in dict(kwargs).items()}, [tuple(int(n) for n in sh) for sh in shapes],
                          bool(gin), bool(num), bool(fac), bool(gout), frames, raised is True, inside is True))
        result = [t for t in data["result"] if isinstance(t, torch.Tensor)]
        producer = {id(t): int(o[0]) for t, o in zip(result, data["owners"]) if type(o[0]) is int and o[0] < len(ops)}
        slot = {id(t): int(o[1]) for t, o in zip(result, data["owners"]) if type(o[1]) is int}
        returned = data.get("returned")
        returned = (returned[0], returned[1], str(returned[2])) if (isinstance(returned, list) and len(returned) == 3
                                                                     and returned[0] in files and type(returned[1]) is int) else None
        error = Exception(str(data["error"])[:80]) if data.get("error") else None
        raised = data.get("raised")
        raised = (raised[0], raised[1], str(raised[2])[:120]) if (isinstance(raised, list) and len(raised) == 3
                                                                   and raised[0] in files and type(raised[1]) is int) else None
        failed = data.get("failed")
        failed = failed if type(failed) is int and 0 <= failed < len(ops) and ops[failed].raised else None
        return Trace(ops, producer, tuple(result) if len(result) != 1 else result[0], error, [], bool(data["truncated"]),
                     list(result), returned, slot, raised, leaves, failed)
    except (KeyError, TypeError, ValueError, IndexError):
        return Trace([], {}, None, None, [], True, [])
