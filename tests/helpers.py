"""Shapes shared by the tests: every axis a different size, so a transpose
or a reduction over the wrong axis cannot pass by accident (batch 3, seq 11,
query heads 4, kv heads 2, head_dim 10, d_model 40, d_ff 128, vocab 256)."""
import itertools

BATCH, SEQ = 3, 11


# The check modules of notebooks 06-10, exercised by checks/test_checks_part2.py;
# checks/test_framework_check.py covers the others.
PART_2_CHECK_MODULES = frozenset(f"autograder.checks.{m}" for m in (
    "kv_cache", "gqa", "sampling", "sampling_generate", "left_padding", "training", "training_accumulation", "training_schedule", "perplexity", "perplexity_bigram"))
# The checks of the accounting exercises (03, 05, 06, 07, 09), exercised by checks/test_accounting.py.
ACCOUNTING_CHECK_MODULE = "autograder.checks.accounting"


def assert_stub_gets_not_implemented_message(check, n_functions: int) -> None:
    """Every learner function a stub raising NotImplementedError: the check
    must fail with the short message, as an AssertionError (nbgrader: zero)."""
    import pytest

    from autograder.checks import CheckFailed

    def stub(*args, **kwargs):
        raise NotImplementedError()

    with pytest.raises(CheckFailed) as err:
        check(*[stub] * n_functions)
    assert "not implemented yet" in str(err.value)
    assert isinstance(err.value, AssertionError)


def check_failure(check, fn, **kwargs):
    """The CheckFailed a check raises for `fn` (its printed table silenced), or None when it passes."""
    import contextlib
    import io

    from autograder.checks import CheckFailed
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            check(fn, **kwargs)
    except CheckFailed as err:
        return err
    return None


def diagnosis_texts(err) -> str:
    """A failure's likely bugs, measured facts, candidates and regime, joined: what a learner reads as the diagnosis."""
    d = err.diagnosis.to_dict()
    return " | ".join([*(d.get("likely_bugs") or []), *(d.get("facts") or []), *(d.get("candidates") or []),
                       (d.get("regime") or {}).get("text", "")])


def run_cell(source: str, ns: dict) -> str:
    """What a notebook cell prints when run in namespace ns; a cell that is a
    check raises CheckFailed on a mismatch, whose message counts too."""
    import contextlib
    import io

    from autograder.checks import CheckFailed

    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(source, "<cell>", "exec"), ns)
    except CheckFailed as err:
        return out.getvalue() + f"CheckFailed: {err}"
    return out.getvalue()


def run_as_cell(ns: dict, source: str, number: int) -> None:
    """Execute `source` as IPython executes a notebook cell: compiled under a
    cell pseudo-file name that linecache knows, in namespace ns."""
    import linecache
    filename = f"/tmp/ipykernel_4242/{number}.py"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), ns)


_defined_cells = itertools.count(1)


def define_in_cell(source: str, name: str, ns: dict | None = None):
    """Define `name` from `source` as a notebook cell would (run_as_cell: its
    lines readable by the tracer), in `ns` or else a namespace holding torch,
    F and math; what the cell defined under `name`."""
    import math

    import torch
    import torch.nn.functional as F
    ns = {"torch": torch, "F": F, "math": math} if ns is None else ns
    run_as_cell(ns, source, 10_000 + next(_defined_cells))
    return ns[name]


def run_solution_notebook(assignment: str, course_dir, monkeypatch, gids=None) -> dict:
    """Setup and solution answer cells of a notebook, run in its own folder
    of course_dir (the course_dir fixture), then its checks (which save the
    answers into mylm/); the notebook's namespace."""
    import contextlib
    import io

    from autograder import course, specimens
    from autograder.authoring.gates import run_check
    from autograder.notebook_format import read, setup_cells

    folder = course_dir / assignment
    folder.mkdir(exist_ok=True)
    monkeypatch.chdir(folder)
    nb = read(course.source_notebook(assignment))
    ns = {"__name__": "__main__"}
    with contextlib.redirect_stdout(io.StringIO()):
        for cell in setup_cells(nb):
            exec(cell.source, ns)
        for n, (gid, code) in enumerate(specimens.solution_answers(assignment).items()):
            if gids is None or gid in gids:
                run_as_cell(ns, code, 1000 * int(assignment[:2]) + n)
                run_check(assignment, gid, ns)
    return ns


def once_per_session(tmp_path_factory, name: str, produce) -> dict:
    """produce(folder) -> JSON-able dict, run once per test session even
    under pytest-xdist: the first worker that asks runs it (under a file
    lock) in a folder of the session's shared temporary folder and leaves
    the outcome there; the others read it. The outcome gets "folder"."""
    import fcntl
    import json
    import os
    from pathlib import Path

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # shared by all workers of this session
    out, folder = root / f"{name}.json", root / name
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not out.is_file():
            folder.mkdir(exist_ok=True)
            out.write_text(json.dumps({**produce(folder), "folder": str(folder)}))
    outcome = json.loads(out.read_text())
    outcome["folder"] = Path(outcome["folder"])
    return outcome


def greedy_with_cache(model, prompt, n: int, cache, *, feed_last: bool = False):
    """A right generate_greedy (prefill, then one token per step through the caller's cache); feed_last also feeds
    the last new token, whose logits nothing reads."""
    import torch
    cache.reset()
    idx, fed = prompt, prompt
    with torch.no_grad():
        for _ in range(n):
            fed = model(fed, cache=cache)[:, -1].argmax(-1, keepdim=True)
            idx = torch.cat((idx, fed), 1)
        if feed_last:
            model(fed, cache=cache)
    return idx


def left_padded(prompts, pad_id: int = 0):
    """A batch of 1-d prompts padded on the left: (ids, mask, positions), each (B, T). The positions count each
    row from 0 at its first real token (pads at 0). Written here, apart from tinylm's own line, since the tests
    hold tinylm to it."""
    import torch
    B, T = len(prompts), max(len(p) for p in prompts)
    ids = torch.full((B, T), pad_id, dtype=torch.long)
    mask = torch.zeros(B, T, dtype=torch.bool)
    positions = torch.zeros(B, T, dtype=torch.long)
    for b, p in enumerate(prompts):
        ids[b, T - len(p):], mask[b, T - len(p):] = p, True
        positions[b, T - len(p):] = torch.arange(len(p))
    return ids, mask, positions


def need_pretrained_weights() -> None:
    """Skip the calling test when SmolLM2's weights are not installed, with the
    reason; fail instead under TINYLM_REQUIRE_PRETRAINED=1 (CI)."""
    import os

    import pytest

    from tinylm import pretrained

    reason = pretrained.why_unavailable()
    if reason is None:
        return
    if os.environ.get("TINYLM_REQUIRE_PRETRAINED") == "1":
        pytest.fail(f"TINYLM_REQUIRE_PRETRAINED=1, but: {reason}")
    pytest.skip(reason)


def import_cycles(edges) -> list[str]:
    """Every cycle of an import graph {module: the modules it imports}, each as 'a -> b -> a'."""
    # a package's __init__ importing its own modules is not a cycle with them
    edges = {src: {d for d in dsts if not src.startswith(d + ".")} for src, dsts in edges.items()}
    found, state = [], {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = "open"
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == "open":
                found.append(" -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = "done"

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])
    return found
