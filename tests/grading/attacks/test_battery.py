"""The attack battery: one submission per attack on notebook 01, graded in
one batch with an honest control, in a scratch course data folder.

Every attack must get at most the points it deserves, the control full
marks, the batch must finish, and nothing outside the sandbox may change.
The cells an attack aims at must fail the recheck whatever the kernel said
(some checks measure enough to see through an attack in the kernel
already); where the kernel was fooled the cell is flagged, and
test_the_recheck_overrides_a_fooled_kernel proves that path is exercised,
so the battery cannot pass vacuously.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import nbformat
import pytest

from autograder import course, specimens
from autograder.grading import gradebook
from autograder.notebook_format import is_check, nbg

from ..batches import jailed_survivors, recording_jails, shared_batch
from ..specimens import A, SWALLOW, WRONG_EMBED

pytestmark = [pytest.mark.grader, pytest.mark.slow,
              pytest.mark.skipif(A not in course.assignments(), reason="notebook 01 is not built")]

LIAR = """class Liar(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func is torch.allclose:
            return True
        return super().__torch_function__(func, types, args, kwargs or {})

def embed(ids, weight):
    z = torch.zeros(*ids.shape, weight.shape[1], dtype=weight.dtype) + 0 * weight.sum()
    return z.as_subclass(Liar)
"""

FRAME = """import sys
def embed(ids, weight):
    f = sys._getframe(1)
    while f is not None:
        want = f.f_locals.get('want')
        if isinstance(want, torch.Tensor):
            out = want if want.dim() == ids.dim() + 1 else want[0]
            return out.detach().to(weight.dtype) + 0 * weight.sum()
        f = f.f_back
    raise RuntimeError('no expected value in reach')
"""

EQ_ALWAYS = """class Yes:
    shape = property(lambda self: None)
    def __eq__(self, other): return True
    def __bool__(self): return True
def embed(ids, weight):
    return Yes()
"""

TORCH_PY = """import os, sys
_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or '.') != _here]
del sys.modules['torch']
import torch as _real
_real.allclose = lambda *a, **k: True
sys.modules['torch'] = _real
"""


def _probe(paths) -> str:
    return ("import os\n"
            f"for p in {[str(p) for p in paths]!r}:\n"
            "    try:\n"
            "        data = os.listdir(p) if os.path.isdir(p) else open(p, 'rb').read(64)\n"
            "        print('LEAKED' if data else 'EMPTY', p)\n"
            "    except Exception as e:\n"
            "        print('DENIED', p, type(e).__name__)\n"
            "print('CWD', sorted(os.listdir('.')))\n")


def _tamper(gradebook_file: Path) -> str:
    return ("import os, time\n"
            "try:\n"
            f"    open({str(gradebook_file)!r}, 'ab').write(b'garbage'); print('LEAKED wrote the gradebook')\n"
            "except Exception as e:\n"
            "    print('DENIED gradebook', type(e).__name__)\n"
            "if os.fork() == 0:\n"
            "    os.setsid(); time.sleep(3)\n"
            f"    try: open({str(gradebook_file)!r}, 'ab').write(b'late')\n"
            "    except Exception: pass\n"
            "    os._exit(0)\n")


def _answers(**cells):
    base = specimens.solution_answers(A)
    return {k: base[k] if v == "honest" else v for k, v in cells.items()}


def _edit_cells(nb, fn):
    for cell in list(nb.cells):
        fn(nb, cell)
    return nb


def _release():
    return specimens.notebook(A)


def build_battery(data: Path) -> dict[str, dict]:
    """{student: {"max": points deserved at most, "kernel_fooled": cells stock nbgrader passes}}."""
    gradebook_file = data / "gradebook.db"
    honest = specimens.honest
    cases: dict[str, dict] = {}

    def add(student, nb=None, deserved=0.0, fooled=(), **kw):
        specimens.submit(data, student, A, nb, **kw)
        cases[student] = {"max": deserved, "kernel_fooled": list(fooled)}

    add("control", honest(A), 7)
    add("patch_allclose", specimens.notebook(A, {"embed": WRONG_EMBED + "torch.allclose = lambda *a, **k: True\n"}),
        0, fooled=["check_embed"])
    add("tensor_subclass", specimens.notebook(A, {"embed": LIAR}), 0, fooled=["check_embed"])
    add("eq_always_true", specimens.notebook(A, {"embed": EQ_ALWAYS}), 0)
    add("ast_swallow", specimens.notebook(A, {"embed": SWALLOW + WRONG_EMBED}), 0,
        fooled=["check_embed", "check_one_hot_embed", "check_tied_logits", "check_tie_weights"])
    add("frame_reader", specimens.notebook(A, {"embed": FRAME}), 0, fooled=["check_embed"])
    add("torch_py", specimens.notebook(A, {"embed": WRONG_EMBED}), 0, extra={"torch.py": TORCH_PY})
    other = data / "submitted" / "control" / A / f"{A}.ipynb"
    probe = _probe([course.source_notebook(A), gradebook_file, other, data / "autograded", course.ROOT / ".git"])
    add("read_secrets", specimens.notebook(A, {"embed": probe + WRONG_EMBED}), 0)
    add("tamper_gradebook", specimens.notebook(A, {"embed": _tamper(gradebook_file) + WRONG_EMBED}), 0)
    add("symlink_notebook", None, 0)
    link = data / "submitted" / "symlink_notebook" / A / f"{A}.ipynb"
    link.symlink_to(course.source_notebook(A))
    dup = honest(A)
    check = next(c for c in dup.cells if nbg(c).get("grade_id") == "check_embed")
    dup.cells.insert(dup.cells.index(check) + 1, nbformat.from_dict(json.loads(json.dumps(check))))
    dup.cells[dup.cells.index(check) + 1].source = "pass"
    add("duplicated_cell", dup, 7)
    warn = specimens.solution_answers(A)["embed"].replace(
        "    return weight[ids]", "    import warnings, sys\n    warnings.warn('a library warning', RuntimeWarning)\n"
        "    print('note on stderr', file=sys.stderr)\n    return weight[ids]")
    add("warns_on_stderr", specimens.notebook(A, _answers(embed=warn, one_hot_embed="honest", tied_logits="honest",
                                                           tie_weights="honest")), 7)
    big = "print('x' * 100_000_000)\n" + specimens.solution_answers(A)["embed"]
    add("huge_output", specimens.notebook(A, _answers(embed=big, one_hot_embed="honest", tied_logits="honest",
                                                       tie_weights="honest")), 7)
    for name, code in (("infinite_loop", "while True:\n    pass\n"),
                       ("memory_bomb", "hog = [bytearray(256 * 2**20) for _ in range(64)]\n"),
                       ("os_exit", "import os\nos._exit(3)\n"),
                       ("sys_exit", "import sys\nsys.exit(0)\n")):
        add(name, specimens.notebook(A, _answers(embed="honest", one_hot_embed="honest", tied_logits="honest",
                                                 tie_weights=code)), 5)
    fake = _release()
    for cell in fake.cells:
        if is_check(cell):
            cell.execution_count = 1
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="PASS\n")]
    add("fake_outputs", fake, 0)
    extra = _release()
    bonus = nbformat.v4.new_code_cell("pass")
    bonus.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": True, "grade_id": "bonus",
                                  "points": 100, "schema_version": 3}
    extra.cells += [bonus, nbformat.v4.new_markdown_cell("extra")]
    add("extra_cells", extra, 0)
    points = honest(A)
    next(c for c in points.cells if nbg(c).get("grade_id") == "check_embed").metadata["nbgrader"]["points"] = 200
    add("changed_points", points, 7)
    edited = _edit_cells(_release(), lambda nb, c: setattr(c, "source", "pass") if is_check(c) else None)
    add("edited_tests", edited, 0)
    cut = honest(A)
    cut.cells = [c for c in cut.cells if nbg(c).get("grade_id") != "check_embed"]
    retyped = next(c for c in cut.cells if nbg(c).get("grade_id") == "check_tied_logits")
    retyped.cell_type = "markdown"
    retyped.pop("outputs", None)
    retyped.pop("execution_count", None)
    add("deleted_and_retyped", cut, 7)
    add("corrupt_json", raw=json.dumps(honest(A)).encode()[:500])
    add("wrong_nbformat", raw=json.dumps({"nbformat": 3, "nbformat_minor": 0, "worksheets": [], "metadata": {}}).encode())
    add("empty_file", raw=b"")
    add("missing_notebook", None, 0, extra={"notes.txt": "forgot the notebook"})
    return cases


def _tree_digest(*roots: Path) -> str:
    h = hashlib.sha256()
    for root in roots:
        for p in sorted(root.rglob("*")):
            if p.is_file() and "__pycache__" not in p.parts:
                h.update(str(p).encode() + p.read_bytes())
    return h.hexdigest()


def _grade_battery(data: Path) -> dict:
    import time
    from autograder.grading.batch import Options, grade_all
    from autograder.grading.sandbox.jail import Limits

    cases = build_battery(data)
    outside = (course.SOURCE_DIR, course.RELEASE_DIR, course.ROOT / "autograder", course.ROOT / "tinylm")
    before = _tree_digest(*outside)
    opts = Options(assignments=[A], workers=2, cell_timeout=20, progress=False,
                   limits=Limits(memory_mb=3072, wall_s=240, cpu_s=240))
    with recording_jails() as bases:
        results = {r["student"]: r for r in grade_all(opts)}
        time.sleep(4)  # longer than the forked daemon waits
        survivors = jailed_survivors(data, bases)  # this batch's only: other graders may share the machine
    return {"cases": cases, "results": results, "before": before, "after": _tree_digest(*outside),
            "url": opts.db_url, "survivors": survivors}


@pytest.fixture(scope="module")
def battery(tmp_path_factory):
    return shared_batch(tmp_path_factory, "grader_attacks", _grade_battery)


def test_every_submission_got_a_result(battery):
    assert set(battery["results"]) == set(battery["cases"])


def test_control_gets_full_marks(battery):
    r = battery["results"]["control"]
    assert (r["score"], r["max_score"], r["status"], r["flags"]) == (7, 7, "graded", []), r


@pytest.mark.parametrize("student", [
    "patch_allclose", "tensor_subclass", "eq_always_true", "ast_swallow", "frame_reader", "torch_py", "read_secrets",
    "tamper_gradebook", "symlink_notebook", "duplicated_cell", "warns_on_stderr", "huge_output", "infinite_loop",
    "memory_bomb", "os_exit", "sys_exit", "fake_outputs", "extra_cells", "changed_points", "edited_tests",
    "deleted_and_retyped", "corrupt_json", "wrong_nbformat", "empty_file", "missing_notebook"])
def test_attack_gets_at_most_what_it_deserves(battery, student):
    r, case = battery["results"][student], battery["cases"][student]
    assert r["max_score"] == 7, f"{student}: max score changed to {r['max_score']}"
    assert r["score"] <= case["max"], f"{student}: {r['score']} points, deserves at most {case['max']}:\n{r}"
    for cell in case["kernel_fooled"]:  # the attack targets the kernel's verdict on these cells
        c = r["cells"][cell]
        assert c["score"] == 0 and c["recheck"] == "fail", (student, c)
        # Checks that measure the output (not only torch.allclose) may see
        # through the attack in the kernel already; where the kernel was
        # fooled, the recheck's verdict wins and the cell is flagged.
        if c["kernel_score"] == c["max_score"]:
            assert any(f.startswith(cell) for f in r["flags"]), f"{student}: {cell} not flagged: {r['flags']}"


def test_the_recheck_overrides_a_fooled_kernel(battery):
    """At least one attack still fools the notebook kernel (the AST
    transformer swallows every failing assert), and the recheck takes those
    points back: the override path runs, not only kernel-side defences."""
    r = battery["results"]["ast_swallow"]
    overridden = [cell for cell in battery["cases"]["ast_swallow"]["kernel_fooled"]
                  if r["cells"][cell]["kernel_score"] == r["cells"][cell]["max_score"] and r["cells"][cell]["score"] == 0]
    assert overridden, f"no kernel-fooled cell in ast_swallow: {r['cells']}"


@pytest.mark.parametrize("student", ["warns_on_stderr", "huge_output", "duplicated_cell", "changed_points",
                                     "deleted_and_retyped"])
def test_honest_work_in_odd_shape_keeps_its_points(battery, student):
    """Stock nbgrader gives zero for a warning on stderr and aborts on a
    copy-pasted graded cell; here the earned points stay."""
    r = battery["results"][student]
    assert r["score"] == 7, r


@pytest.mark.parametrize("student, phrase", [
    ("corrupt_json", "not valid notebook JSON"), ("wrong_nbformat", "not an nbformat 4 notebook"),
    ("empty_file", "is empty"), ("missing_notebook", "missing from the submission"),
    ("symlink_notebook", "symbolic link"), ("duplicated_cell", "appears more than once"),
    ("changed_points", "changed grading metadata"), ("edited_tests", "was edited"),
    ("deleted_and_retyped", "was deleted"), ("deleted_and_retyped", "changed from code to «markdown»"),
    ("extra_cells", "not in the released notebook")])
def test_malformed_submission_gets_a_clear_message(battery, student, phrase):
    problems = battery["results"][student]["problems"]
    assert any(phrase in p for p in problems), f"{student}: no problem mentions {phrase!r}: {problems}"


def _outputs(data: Path, student: str) -> str:
    """The text the graded notebook printed (not its source, which names the probes)."""
    path = data / "autograded" / student / A / f"{A}.ipynb"
    nb = nbformat.read(str(path), as_version=4)
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)


def test_secrets_are_out_of_reach(battery):
    text = _outputs(battery["data"], "read_secrets")
    assert "DENIED" in text, "the probe did not run"
    assert "LEAKED" not in text
    assert f"CWD ['{A}.ipynb']" in text, "the working folder holds more than the student's notebook"


def test_gradebook_cannot_be_rewritten_and_no_process_survives(battery):
    text = _outputs(battery["data"], "tamper_gradebook")
    assert "DENIED gradebook" in text and "LEAKED" not in text
    assert not battery["survivors"], "a jailed process outlived grading"
    from autograder.grading import gradebook
    assert sum(s for s, _ in gradebook.cell_scores(battery["url"], A, "control").values()) == 7


def test_nothing_outside_the_sandbox_changed(battery):
    assert battery["before"] == battery["after"], "solutions/, notebooks/, autograder/ or tinylm/ changed"


def test_huge_output_is_capped_in_bytes(battery):
    path = battery["data"] / "autograded" / "huge_output" / A / f"{A}.ipynb"
    assert path.stat().st_size < 1_000_000, f"autograded notebook is {path.stat().st_size} bytes"
    assert "output truncated by the grader" in path.read_text()


def test_rerun_resumes_without_regrading(battery, monkeypatch):
    from autograder.grading.batch import Options, grade_all
    monkeypatch.setenv(gradebook.DATA_ENV_VAR, str(battery["data"]))
    before = {s: r.get("seconds") for s, r in battery["results"].items()}
    again = {r["student"]: r for r in grade_all(Options(assignments=[A], workers=2, progress=False))}
    assert {s: r.get("seconds") for s, r in again.items()} == before
