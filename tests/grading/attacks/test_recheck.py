"""The recheck's own attack battery: hostile submissions aimed at
the trusted recheck process, with honest controls, graded in one batch.

* "not rechecked" no longer keeps the kernel's score: a learner's request
  that makes the trusted side raise NotRecheckable (a check's callback given
  an nn.Module, the check's model given a module as its cache) comes back to
  the learner's code as an error, and a cell the recheck cannot confirm
  scores zero and is flagged for a hand regrade (05, 06, 08, 10);
* a reply that would inflate in the trusted process (a deflated tensor
  written straight onto the protocol pipe by the learner's code) is refused
  before decoding;
* a forged parameter name in a reply ('__class__.double') is refused instead
  of being followed with getattr/setattr in the trusted process;
* every reply the trusted side cannot decode or use fails its exercise with
  one fixed message (UNREADABLE_REPLY), whatever its bytes: a decoding
  error's text would quote them (a forged tag carried another notebook's
  hidden tests onto a feedback page);
* honest work with a helper function in a code cell of its own keeps its
  points: the recheck runs the learner's own cells too, in the jail.

The unit tests below prove each bound without grading; the batch proves the
same through `grade`, each attack behind an AST transformer that makes the
notebook kernel pass every check, so only the recheck stands between the
attack and the points.
"""
from __future__ import annotations

import io
import os
import zipfile

import pytest
import torch
from torch import nn

from autograder import course, specimens
from autograder.notebook_format import is_check, nbg, read
from ..batches import shared_batch
from ..specimens import SWALLOW

# The AST transformer of tests/grading/specimens.py, installed only where there is
# an IPython kernel: in the recheck child the rest of the cell still runs,
# so the attack reaches the trusted side instead of failing on a NameError.
KERNEL_HOOK = "get_ipython().ast_transformers.append(Swallow())"
assert KERNEL_HOOK in SWALLOW, "specimens.SWALLOW changed: update this test"
SWALLOW_IN_KERNEL = SWALLOW.replace(KERNEL_HOOK, f"try:\n    {KERNEL_HOOK}\nexcept NameError:\n    pass")
NOTEBOOKS = ("01_embeddings", "05_swiglu", "06_kv_cache", "08_sampling", "10_perplexity")

# The learner's code runs in the recheck child, whose protocol descriptors
# are locals of autograder.grading.recheck.child.main, a few frames up the stack;
# a forged reply is framed as autograder.grading.wire frames (8-byte big-endian length).
FIND_PROTOCOL = """import sys, os, io, struct, zipfile, torch
def protocol_out():
    f = sys._getframe()
    while f is not None:
        if 'proto_out' in f.f_locals:
            return f.f_locals['proto_out']
        f = f.f_back
    return None

def send_forged(message_bytes):
    data = struct.pack('!Q', len(message_bytes)) + message_bytes
    fd = protocol_out()
    while data:
        data = data[os.write(fd, data):]
    os._exit(0)
"""

# torch.save writes a zip archive with stored (uncompressed) entries; this
# rewrites one so that its tensor of `numel` zeros is deflated: 4 * numel
# bytes decode from a few kilobytes per megabyte.
INFLATED = """def inflated_reply(numel):
    marker = 1234567  # a tensor of this many elements, renamed to `numel` in the pickle
    buf = io.BytesIO()
    torch.save(('result', ('T', torch.zeros(marker), False), [], [], [], []), buf)
    src = zipfile.ZipFile(io.BytesIO(buf.getvalue()))
    out = io.BytesIO()
    with zipfile.ZipFile(out, 'w', compression=zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            if info.filename.endswith('data.pkl'):
                pkl = src.read(info).replace(struct.pack('<i', marker), struct.pack('<i', numel))
                dst.writestr(info.filename, pkl)
            elif '/data/' in info.filename:
                entry = zipfile.ZipInfo(info.filename)
                entry.compress_type = zipfile.ZIP_DEFLATED
                with dst.open(entry, 'w', force_zip64=True) as w:
                    left = 4 * numel
                    while left:
                        w.write(bytes(min(left, 1 << 20)))
                        left -= min(left, 1 << 20)
            else:
                dst.writestr(info.filename, src.read(info))
    return out.getvalue()
"""


def _exec(source: str) -> dict:
    ns: dict = {}
    exec(compile(source, "<attack helpers>", "exec"), ns)
    return ns


# --------------------------------------------------------------------------
# unit tests: each bound on its own, in this process

def test_a_compressed_reply_is_refused_before_decoding():
    from autograder.grading.recheck.protocol import load_plain
    helpers = _exec(FIND_PROTOCOL + INFLATED)
    data = helpers["inflated_reply"](1 << 20)  # 4 MiB of zeros decoded
    assert torch.load(io.BytesIO(data), weights_only=True)[1][1].numel() == 1 << 20, "the crafted archive is not real"
    assert len(data) < (1 << 20) // 10, "the crafted archive is not compressed"
    with pytest.raises(ValueError, match="compressed"):
        load_plain(data)


def test_a_reply_over_the_limit_is_refused_and_one_under_it_loads():
    from autograder.grading.recheck.protocol import load_plain
    buf = io.BytesIO()
    torch.save(("result", torch.arange(1000.0)), buf)
    with pytest.raises(ValueError, match="over the 2000-byte limit"):
        load_plain(buf.getvalue(), limit=2000)
    assert torch.equal(load_plain(buf.getvalue(), limit=1 << 20)[1], torch.arange(1000.0))


def test_a_broadcast_view_larger_than_the_limit_is_refused():
    """A stride-0 view costs one element on the pipe, and its full size when a check compares it."""
    from autograder.grading.recheck.protocol import load_plain
    buf = io.BytesIO()
    torch.save(("result", torch.zeros(1).expand(1 << 20)), buf)
    with pytest.raises(ValueError, match="tensors span 4194304 bytes"):
        load_plain(buf.getvalue(), limit=1 << 20)


def test_forged_parameter_names_are_refused_and_nothing_is_replaced():
    from autograder.grading.recheck.parent import mirror_modules, parameter_names
    double, emb_double = torch.Tensor.double, nn.Embedding.double
    emb = nn.Embedding(3, 2)
    names = parameter_names([emb])
    for forged in ("__class__.double", "weight.__class__.double", "_parameters", "double"):
        with pytest.raises(ValueError, match="not a parameter of the check's module"):
            mirror_modules([emb], [(0, forged, 1, torch.zeros(1), False)], names)
    assert torch.Tensor.double is double and nn.Embedding.double is emb_double
    honest = torch.ones(3, 2)
    mirror_modules([emb], [(0, "weight", 7, honest, True)], names)
    assert torch.equal(emb.weight.detach(), honest)


def test_a_learners_module_with_forged_names_is_refused():
    from autograder.grading.recheck.parent import remote_module
    for forged in ("__class__.double", "_parameters.w", "a._b", "a..b", "0x.w"):
        with pytest.raises(ValueError, match="dotted path"):
            remote_module(None, 1, "Forged", [(forged, 1, torch.zeros(1), False)])
    made = remote_module(None, 1, "Honest", [("blocks.0.norm.weight", 1, torch.ones(2), True)])
    assert [n for n, _ in made.named_parameters()] == ["blocks.0.norm.weight"]


def test_a_learners_module_names_do_not_reach_a_checks_message():
    """Parameter names are free identifiers: a kernel could spell text it saw
    with them, and a failing check describes the module it was given."""
    from autograder.checks.core import describe
    from autograder.grading.recheck.parent import remote_module
    made = remote_module(None, 1, "Transformer", [("hidden_test_said_seq_is_7.weight", 1, torch.ones(2), True)])
    assert "hidden_test" not in describe(made) and "hidden_test" not in repr(made)
    assert "Transformer" in describe(made)


def test_a_renamed_parameter_is_rechecked_and_its_name_is_counted_not_quoted():
    """A module the recheck stands in for answers an unknown attribute by
    refusing the recheck: the name check reads registered submodules only, so
    a renamed projection is graded, and its free name is not quoted."""
    from autograder.checks import check_attention_module
    from autograder.checks.references.modules import plain_tensors
    from autograder.grading.recheck.parent import remote_module
    made = remote_module(None, 1, "Attention", [("QZXMARK_proj.weight", 1, torch.ones(2), True)])
    assert plain_tensors(made, ["k_proj.weight"]) == []

    class Renamed(nn.Module):  # the check stops at the names, before any forward pass
        def __init__(self, config):
            super().__init__()
            inner, kv = config.n_heads * config.head_dim, config.n_kv_heads * config.head_dim
            self.q_proj = nn.Linear(config.d_model, inner, bias=False)
            self.QZXMARK_proj = nn.Linear(config.d_model, kv, bias=False)
            self.v_proj = nn.Linear(config.d_model, kv, bias=False)
            self.o_proj = nn.Linear(inner, config.d_model, bias=False)
    Renamed.recheck_trace = staticmethod(lambda args, kwargs: None)  # as the recheck's proxy carries it
    with pytest.raises(AssertionError) as err:
        check_attention_module(Renamed)
    assert "QZXMARK" not in str(err.value) and "unexpected 1 name of your own" in str(err.value), str(err.value)
    assert "missing ['k_proj.weight']" in str(err.value)


def test_an_optimizer_state_must_match_the_checks_optimizer():
    from autograder.grading.recheck.parent import load_optimizer_states
    model = nn.Linear(2, 2)
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    model(torch.ones(1, 2)).sum().backward()
    opt.step()
    honest = opt.state_dict()
    fresh = torch.optim.AdamW(model.parameters(), lr=0.1)
    load_optimizer_states([fresh], [(0, honest)])
    assert torch.equal(fresh.state_dict()["state"][0]["exp_avg"], honest["state"][0]["exp_avg"])
    extra_key = {"state": honest["state"], "param_groups": [{**honest["param_groups"][0], "injected": 1}]}
    for forged in (extra_key, {"state": {}, "param_groups": []}, {"state": {9: {}}, "param_groups": honest["param_groups"]}):
        with pytest.raises(ValueError, match="does not match"):
            load_optimizer_states([fresh], [(0, forged)])
    with pytest.raises(ValueError, match="no optimizer"):
        load_optimizer_states([model], [(0, honest)])


class _Pipe:
    """The parent's end of a child that is only a pipe: what it is sent can be read back."""

    def __init__(self):
        self.read_end, write_end = os.pipe()
        self.stdin = os.fdopen(write_end, "wb")


def _served(serve: str, message, **child_fields):
    import pickle
    from autograder.grading.recheck.parent import Child
    from autograder.grading.wire import receive
    child = Child.__new__(Child)  # no process: only the serving code under test
    child.proc, child.unreachable, child.callbacks, child.remote = _Pipe(), None, [], []
    for k, v in child_fields.items():
        setattr(child, k, v)
    getattr(child, serve)(message)
    child.proc.stdin.close()
    reply = receive(child.proc.read_end)
    os.close(child.proc.read_end)
    return pickle.loads(reply), child


def test_a_callback_that_cannot_carry_the_learners_object_answers_the_learner():
    """Given an nn.Module, the check's callback raises NotRecheckable (a
    BaseException) in the parent; the learner's request gets an error back
    instead of the exception escaping into the check as "not rechecked"."""
    from autograder.grading.recheck.protocol import NotRecheckable, to_plain

    def check_helper(h):
        raise NotRecheckable("the check uses `.shape` of the learner's Linear")

    reply, child = _served("_serve_callback", ("callback", 0, to_plain((1.0,)), to_plain({})), callbacks=[check_helper])
    assert reply[0] == "raise" and "NotRecheckable" in reply[1]
    assert "cannot carry" in child.unreachable


def test_a_remote_call_that_cannot_carry_the_learners_object_answers_the_learner():
    from autograder.grading.recheck.protocol import NotRecheckable, to_plain

    class Model:
        def __call__(self, *args, **kwargs):
            raise NotRecheckable("the check uses `.reset` of the learner's Linear")

    reply, _ = _served("_serve_remote", ("remote", 0, "call", "", to_plain(()), to_plain({}), False), remote=[Model()])
    assert reply[0] == "raise" and "NotRecheckable" in reply[1]


def test_unconfirmed_cells_score_zero_and_are_flagged_for_a_hand_regrade():
    from autograder.grading.grade import reconcile
    kernel = {"a": (2.0, 2.0), "b": (3.0, 3.0), "c": (1.0, 1.0), "d": (4.0, 4.0), "e": (0.0, 5.0)}
    maxima = {cell: m for cell, (_, m) in kernel.items()}
    recheck = {"a": {"status": "pass", "message": ""}, "b": {"status": "not rechecked", "message": "uses .foo"},
               "d": {"status": "fail", "message": "wrong"}, "e": {"status": "not rechecked", "message": "x"}}
    result = {"flags": [], "cells": {}}
    final = reconcile(kernel, recheck, maxima, result)
    assert final == {"a": 2.0, "b": 0.0, "c": 0.0, "d": 0.0, "e": 0.0}
    regrade = [f for f in result["flags"] if "hand regrade" in f]
    assert [f.split(":")[0] for f in regrade] == ["b", "c"], result["flags"]
    assert "uses .foo" in regrade[0] and "no verdict" in regrade[1]
    assert not any(f.startswith("e:") for f in result["flags"]), "a cell the kernel gave nothing has nothing to regrade"

    errored = {"flags": [], "cells": {}}
    error = {"__error__": {"status": "error", "message": "the recheck did not complete: MemoryError"}}
    assert reconcile(kernel, error, maxima, errored) == dict.fromkeys(kernel, 0.0)
    assert all("MemoryError" in f and "hand regrade" in f for f in errored["flags"]) and len(errored["flags"]) == 4

    off = {"flags": [], "cells": {}}
    assert reconcile(kernel, None, maxima, off) == {c: s for c, (s, _) in kernel.items()}, "recheck off: kernel scores"


def test_the_trusted_process_runs_under_a_memory_limit(monkeypatch):
    """recheck_submission starts the trusted process with --memory-mb (at
    least the floor), and under that limit an allocation past it fails."""
    import subprocess
    import sys
    from autograder.grading.recheck import run as recheck
    from autograder.grading.sandbox.jail import Limits
    seen = {}

    def fake_run(cmd, **kwargs):
        seen["cmd"] = cmd
        return subprocess.CompletedProcess(cmd, 0, stdout="{}\n", stderr="")

    monkeypatch.setattr(recheck.subprocess, "run", fake_run)
    recheck.recheck_submission("01_embeddings", "nb.ipynb", Limits(memory_mb=1024))
    cmd = seen["cmd"]
    assert cmd[cmd.index("--memory-mb") + 1] == str(recheck.TRUSTED_MEMORY_FLOOR_MB)
    probe = ("from autograder.grading.recheck.run import limit_memory\nlimit_memory(2048)\n"
             "try:\n    hog = bytearray(3 * 2**30)\n    print('allocated')\nexcept MemoryError:\n    print('refused')\n")
    monkeypatch.undo()
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "refused", out


@pytest.mark.skipif("01_embeddings" not in course.assignments(), reason="notebook 01 is not built")
def test_the_learners_own_cells_are_found_in_notebook_order():
    from autograder.grading.recheck.run import learner_cells
    a = "01_embeddings"
    source, release = read(course.source_notebook(a)), read(course.release_notebook(a))
    nb = _with_helper_cells(specimens.honest(a))
    added = learner_cells(nb, [source, release])
    assert added == {None: [TOP_HELPER], "embed": [ROW_HELPER]}, added
    assert learner_cells(specimens.honest(a), [source, release]) == {}, "the course's own demo cells are not the learner's"


# --------------------------------------------------------------------------
# the batch

TOP_HELPER = "ROW_AXIS = 0  # a learner's constant, in a cell of its own above everything"
ROW_HELPER = "def lookup_rows(weight, ids):\n    return weight.index_select(ROW_AXIS, ids.reshape(-1)).reshape(*ids.shape, -1)\n"


def _with_helper_cells(nb):
    """Honest 01 whose embed calls a helper defined in a cell the learner
    added right after the answer cell, which reads a constant from a cell
    the learner added at the very top."""
    import nbformat
    answer = next(c for c in nb.cells if nbg(c).get("grade_id") == "embed")
    answer.source = "def embed(ids, weight):\n    return lookup_rows(weight, ids)\n"
    nb.cells.insert(nb.cells.index(answer) + 1, nbformat.v4.new_code_cell(ROW_HELPER))
    nb.cells.insert(0, nbformat.v4.new_code_cell(TOP_HELPER))
    return nb


def _unconfirmable(assignment: str, grade_id: str) -> str:
    """A wrong answer whose request makes the trusted side raise
    NotRecheckable, catching whatever comes back."""
    request = {"pre_norm_block": "attn(torch.nn.Linear(1, 1))",
               "generate_greedy": "model(prompt, cache=torch.nn.Linear(1, 1))",
               "generate": "model(prompt, cache=torch.nn.Linear(1, 1))",
               "evaluate": "model(next(iter(batches))[0], cache=torch.nn.Linear(1, 1))"}[grade_id]
    wrong = {"pre_norm_block": "x",
             "generate_greedy": "torch.cat([prompt, prompt[:, :1].repeat(1, max_new_tokens)], dim=1)",
             "generate": "torch.cat([prompt, prompt[:, :1].repeat(1, max_new_tokens)], dim=1)",
             "evaluate": "{'loss': 0.0, 'perplexity': 1.0, 'bits_per_byte': 0.0}"}[grade_id]
    signature = specimens.solution_answers(assignment)[grade_id].split("\n")[0]
    return (f"{SWALLOW_IN_KERNEL}{signature}\n    try:\n        {request}\n    except BaseException:\n        pass\n"
            f"    return {wrong}\n")


INFLATE_EMBED = SWALLOW_IN_KERNEL + FIND_PROTOCOL + INFLATED + """
def embed(ids, weight):
    if protocol_out() is None:  # in the notebook kernel: wrong, and passed by the AST transformer
        return torch.zeros(*ids.shape, weight.shape[1], dtype=weight.dtype)
    send_forged(inflated_reply(1 << 27))  # 512 MiB of float32 zeros once decoded
"""

FORGE_TIE = SWALLOW_IN_KERNEL + FIND_PROTOCOL + """
def tie_weights(tok_emb, lm_head):
    if protocol_out() is None:  # in the notebook kernel: nothing tied, passed by the AST transformer
        return None
    buf = io.BytesIO()
    torch.save(('result', ('v', None), [(0, '__class__.double', 1, torch.zeros(1), False)], [], [], []), buf)
    send_forged(buf.getvalue())
"""


def _points(assignment: str) -> dict[str, float]:
    return {nbg(c)["grade_id"]: float(nbg(c)["points"]) for c in read(course.source_notebook(assignment)).cells
            if is_check(c)}


def _check_of(assignment: str, answer_id: str) -> str:
    from autograder.authoring.gates import exercises
    return next(nbg(ex.check)["grade_id"] for ex in exercises(read(course.source_notebook(assignment)))
                if ex.grade_id == answer_id)


def build_battery(data) -> dict[str, dict]:
    """{student: {"assignment", "max": points deserved at most, "target": the check the attack aims at}}."""
    cases: dict[str, dict] = {}

    def add(student, assignment, nb, target=None):
        specimens.submit(data, student, assignment, nb)
        total = sum(_points(assignment).values())
        cases[student] = {"assignment": assignment, "target": target,
                          "max": total - (_points(assignment)[target] if target else 0)}

    for a in NOTEBOOKS:
        add(f"control_{a[:2]}", a, specimens.honest(a))
    add("helper_cells", "01_embeddings", _with_helper_cells(specimens.honest("01_embeddings")))
    for a, answer in (("05_swiglu", "pre_norm_block"), ("06_kv_cache", "generate_greedy"), ("08_sampling", "generate"),
                      ("10_perplexity", "evaluate")):
        nb = specimens.notebook(a, {**specimens.solution_answers(a), answer: _unconfirmable(a, answer)})
        add(f"unconfirmable_{a[:2]}", a, nb, _check_of(a, answer))
    honest01 = specimens.solution_answers("01_embeddings")
    add("inflated_reply", "01_embeddings", specimens.notebook("01_embeddings", {**honest01, "embed": INFLATE_EMBED}),
        "check_embed")
    add("forged_names", "01_embeddings", specimens.notebook("01_embeddings", {**honest01, "tie_weights": FORGE_TIE}),
        "check_tie_weights")
    return cases


def _grade_battery(data) -> dict:
    from autograder.grading.batch import Options, grade_all
    from autograder.grading.sandbox.jail import Limits
    cases = build_battery(data)
    opts = Options(assignments=sorted({c["assignment"] for c in cases.values()}), workers=2, cell_timeout=60,
                   progress=False, limits=Limits(memory_mb=3072, wall_s=300, cpu_s=300))
    results = {r["student"]: r for r in grade_all(opts)}
    return {"cases": cases, "results": results}


@pytest.fixture(scope="module")
def battery(tmp_path_factory):
    missing = [a for a in NOTEBOOKS if a not in course.assignments()]
    if missing:
        pytest.skip(f"notebooks {missing} are not built")
    return shared_batch(tmp_path_factory, "grader_attacks_recheck", _grade_battery)


@pytest.mark.parametrize("student", [f"control_{a[:2]}" for a in NOTEBOOKS] + ["helper_cells"])
@pytest.mark.grader
@pytest.mark.slow
def test_honest_work_gets_full_marks_and_no_flag(battery, student):
    r = battery["results"][student]
    assert (r["score"], r["status"], r["flags"]) == (r["max_score"], "graded", []), r
    assert r["max_score"] == battery["cases"][student]["max"] > 0
    assert all(c["recheck"] == "pass" for c in r["cells"].values()), r["cells"]


@pytest.mark.parametrize("student", ["unconfirmable_05", "unconfirmable_06", "unconfirmable_08", "unconfirmable_10",
                                     "inflated_reply", "forged_names"])
@pytest.mark.grader
@pytest.mark.slow
def test_attack_gets_at_most_what_it_deserves(battery, student):
    """The kernel passes the targeted check (the AST transformer swallows its
    failure); the recheck takes the points back and the cell is flagged."""
    r, case = battery["results"][student], battery["cases"][student]
    assert r["score"] <= case["max"], f"{student}: {r['score']} points, deserves at most {case['max']}:\n{r}"
    assert r["status"] == "graded", f"{student}: not graded: {r['problems']}"
    c = r["cells"][case["target"]]
    assert c["kernel_score"] == c["max_score"] > 0, f"{student}: the kernel was not fooled, the attack proves nothing: {c}"
    assert c["score"] == 0 and c["recheck"] == "fail", (student, c)
    assert any(f.startswith(case["target"]) for f in r["flags"]), r["flags"]


@pytest.mark.parametrize("student", ["unconfirmable_05", "unconfirmable_06", "unconfirmable_08", "unconfirmable_10"])
@pytest.mark.grader
@pytest.mark.slow
def test_an_unconfirmable_request_is_named(battery, student):
    c = battery["results"][student]["cells"][battery["cases"][student]["target"]]
    assert "cannot carry" in c["message"] and "hand regrade" in c["message"], c


@pytest.mark.grader
@pytest.mark.slow
def test_an_inflating_reply_is_refused_undecoded(battery):
    """Refused before inflating (test_a_compressed_reply_is_refused_before_decoding
    shows the cause); the verdict says only the fixed words."""
    from autograder.grading.recheck.protocol import UNREADABLE_REPLY
    c = battery["results"]["inflated_reply"]["cells"]["check_embed"]
    assert UNREADABLE_REPLY in c["message"] and "compressed" not in c["message"], c


@pytest.mark.grader
@pytest.mark.slow
def test_a_forged_parameter_name_is_refused(battery):
    from autograder.grading.recheck.protocol import UNREADABLE_REPLY
    c = battery["results"]["forged_names"]["cells"]["check_tie_weights"]
    assert UNREADABLE_REPLY in c["message"] and "__class__" not in c["message"], c


def test_a_test_cell_reports_every_failing_call_and_passes_only_when_all_do():
    from autograder.grading.recheck.run import run_check

    def check(ok, why):
        if not ok:
            raise AssertionError(why)

    ns = {"check": check}
    both = run_check("check(False, 'visible call: bug A')\ncheck(False, 'hidden call: bug B')\n", ns)
    assert both["status"] == "fail" and "bug A" in both["message"] and "bug B" in both["message"]
    later_pass = run_check("check(False, 'only the first')\ncheck(True, '')\n", ns)
    assert later_pass["status"] == "fail", "a passing call after a failing one must not pass the cell"
    assert run_check("check(True, '')\ncheck(True, '')\n", ns) == {"status": "pass", "message": ""}
    stopped = run_check("x = check(False, 'setup failed')\ncheck(x, 'after')\n", ns)
    assert stopped["status"] == "fail" and "after" not in stopped["message"], "a failing assignment stops the cell"


# --------------------------------------------------------------------------
# forged replies: no byte of them reaches a verdict

# Stands for text the learner's kernel read and passed to its recheck child
# (the hidden tests of another notebook, through a side channel).
SECRET = "HiddenTestSaysSeqIs7AndHeadsAre3"


class _ScriptedChild:
    """A child process that is two pipes: the reply it "sends" is written
    before the call, and what the parent sends is left unread."""

    def __init__(self, reply: bytes):
        from autograder.grading.wire import send
        self.to_parent_r, to_parent_w = os.pipe()
        send(to_parent_w, reply)
        os.close(to_parent_w)
        self.from_parent_r, from_parent_w = os.pipe()
        os.set_blocking(from_parent_w, False)  # a request the scripted child never reads must not block the test
        self.stdin = os.fdopen(from_parent_w, "wb")
        self.stdout = os.fdopen(self.to_parent_r, "rb")
        self.killed = False

    def poll(self):
        return 0 if self.killed else None

    def kill(self):
        self.killed = True

    def wait(self):
        return 0


def _scripted(reply: bytes):
    from autograder.grading.recheck.parent import Child
    child = Child.__new__(Child)
    child.proc, child.unreachable, child.callbacks, child.remote, child.dead = _ScriptedChild(reply), None, [], [], None
    child.timeout, child.end, child.replay = 10.0, float("inf"), []
    return child


def _saved(value) -> bytes:
    buf = io.BytesIO()
    torch.save(value, buf)
    return buf.getvalue()


def _pickle_naming(global_name: str) -> bytes:
    """A torch.save archive whose pickle asks for the global `global_name`
    (weights_only refuses it, naming it in its error)."""
    import pickle
    data = _saved(("result", ("v", None), [], [], [], []))
    archive = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as dst:
        for info in archive.infolist():
            body = archive.read(info)
            if info.filename.endswith("data.pkl"):
                body = b"\x80\x02c" + f"{global_name}\n{global_name}\n".encode() + b")R." + pickle.STOP
            dst.writestr(info, body)
    return out.getvalue()


FORGED_REPLIES = {
    "an unknown value tag": lambda: _saved(("result", (SECRET, 1), [], [], [], [])),
    "a reference that is no number": lambda: _saved(("result", ("ref", SECRET), [], [], [], [])),
    "a pickle naming a global": lambda: _pickle_naming(SECRET),
    "a forged parameter name": lambda: _saved(("result", ("v", None), [(0, SECRET, 1, torch.zeros(1), False)],
                                               [], [], [])),
    "a dotted name of tensor attributes": lambda: _saved(("result", ("v", None), [(0, "T.abs.add", 1, torch.zeros(1),
                                                                                   False)], [], [], [])),
    "a learner module with a forged name": lambda: _saved(("result", ("module", 1, "Linear",
                                                                      [(SECRET + "..x", 1, torch.zeros(1), False)]),
                                                           [], [], [], [])),
    "a short reply": lambda: _saved(("result",)),
    "an optimizer state for no optimizer": lambda: _saved(("result", ("v", None), [], [(0, {SECRET: 1})], [], [])),
    "no archive at all": lambda: SECRET.encode() * 4,
    "a deflated archive": lambda: _exec(FIND_PROTOCOL + INFLATED)["inflated_reply"](1 << 16),
    "a callback request of the wrong shape": lambda: _saved(("callback", SECRET)),
}


@pytest.mark.parametrize("forged", sorted(FORGED_REPLIES))
def test_every_unreadable_reply_is_one_fixed_message(forged):
    """Whatever a reply holds, decoding it fails with the same words: a
    decoding error's own text (an unexpected tag, a global's name, an
    int() of a string, a parameter name) is made of the child's bytes."""
    from autograder.grading.recheck.parent import call_child, make_proxy
    from autograder.grading.recheck.protocol import UNREADABLE_REPLY
    from autograder.grading.recheck.run import run_check
    child = _scripted(FORGED_REPLIES[forged]())
    with pytest.raises(RuntimeError) as raised:
        call_child(child, ("call", "embed"), (torch.zeros(2, dtype=torch.long), nn.Embedding(3, 2)), {})
    assert str(raised.value) == UNREADABLE_REPLY and raised.value.__cause__ is None
    assert child.proc.killed, "a child that sent an unreadable reply is ended (the next call starts a fresh one)"
    verdict = run_check("embed(ids, weight)\n", {"embed": make_proxy(_scripted(FORGED_REPLIES[forged]()), "embed"),
                                                  "ids": torch.zeros(2, dtype=torch.long), "weight": nn.Embedding(3, 2)})
    assert verdict == {"status": "fail", "message": UNREADABLE_REPLY, "diagnoses": []}, verdict  # no check measured anything


def test_the_forged_bytes_would_have_reached_the_verdict_without_the_rule():
    """The control: decoding these replies raises errors that quote the
    child's bytes, so the fixed message above is what keeps them out."""
    from autograder.grading.recheck.parent import from_plain
    from autograder.grading.recheck.protocol import load_plain, shown_path
    quoted = []
    for build in (FORGED_REPLIES["an unknown value tag"], FORGED_REPLIES["a reference that is no number"]):
        try:
            from_plain(load_plain(build())[1], child=_scripted(b""))
        except Exception as err:  # noqa: BLE001
            quoted.append(str(err))
    try:
        load_plain(FORGED_REPLIES["a pickle naming a global"]())
    except Exception as err:  # noqa: BLE001
        quoted.append(str(err))
    assert all(SECRET in text for text in quoted), quoted
    assert shown_path("T.abs.add") == "'T.abs.add'", "a name spelled from tensor attributes is learner-chosen text"


def test_a_well_formed_reply_of_the_scripted_child_is_read():
    """The control of the scripted child: an honest reply decodes, so the
    fixed message above comes from the forged bytes, not from the set-up."""
    from autograder.grading.recheck.parent import call_child
    from autograder.grading.recheck.protocol import to_plain
    rows = torch.arange(6.0).reshape(3, 2)
    child = _scripted(_saved(("result", to_plain(rows[:2]), [], [], [], [])))
    got = call_child(child, ("call", "embed"), (torch.zeros(2, dtype=torch.long), nn.Embedding(3, 2)), {})
    assert torch.equal(got, rows[:2]) and not child.proc.killed
