"""Grade a class: every collected submission of the chosen assignments,
skipping those graded already, on warm worker processes of this machine
(grading/engines/warm_pool.py), cold processes (Options.warm False), or a Dask
cluster (Options.scheduler, grading/engines/cluster.py). One submission's grading
is grading/grade.py; this module only decides where each one runs, so the
engines import grade and grade imports none of them. The command is
`python -m autograder grade` (grading/cli.py)."""
from __future__ import annotations

import contextlib
import sys
from concurrent.futures import ThreadPoolExecutor, as_completed

from . import deadlines, gradebook
from .engines.cluster import grade_on_cluster, require_shared_gradebook
from .engines.warm_pool import WarmPool
from .grade import Options, safe_grade_one
from .intake.notebook import rejection
from .records import GradeResult, find_submissions, load_result, original_digest
from .sandbox.jail import keep_view_warm

__all__ = ["Options", "grade_all"]


def grade_all(opts: Options) -> list[GradeResult]:
    opts.db_url = gradebook.db_url(opts.db_url or None)
    if opts.scheduler:
        require_shared_gradebook(opts.db_url)
    gradebook.ensure_assignments(opts.db_url, opts.assignments)
    # A broken deadlines.toml stops the run before anything is graded; nbgrader's
    # autograde gets the due dates, so its own late penalty (LatePolicyPlugin) applies.
    deadlines.apply(opts.db_url, {})
    subs = find_submissions(opts.assignments, opts.students)
    todo, results = [], []
    for sub in subs:
        done = load_result(sub)
        if done and not opts.force and done.get("digest") in (original_digest(sub), None):
            results.append(done)
        else:
            todo.append(sub)
    where = f"on the Dask cluster at {opts.scheduler}" if opts.scheduler else f"with {opts.workers} workers"
    print(f"{len(subs)} submissions, {len(subs) - len(todo)} already graded, {len(todo)} to grade "
          f"{where} (gradebook {gradebook.redacted(opts.db_url)})")
    bar = _progress(len(todo), opts.progress)
    # Rejected whole at intake (too many files): graded here, in a moment,
    # so no engine copies them anywhere (grade_one rejects them as well).
    crowded = [sub for sub in todo if rejection(sub.folder)]
    todo = [sub for sub in todo if sub not in crowded]
    for sub in crowded:
        results.append(safe_grade_one(sub, opts))
        bar.update(1)
    if opts.scheduler:
        results += grade_on_cluster(todo, opts, lambda _result: bar.update(1))
    elif todo:
        results += _grade_here(todo, opts, bar)
    bar.close()
    deadlines.annotate(opts.db_url, results)   # every run: a new extension or policy needs no regrade
    return sorted(results, key=lambda r: (r["assignment"], r["student"]))


def _grade_here(todo: list, opts: Options, bar) -> list[GradeResult]:
    """On this machine: warm worker processes (threads only wait on them), or
    the cold per-submission processes with Options.warm False."""
    workers = max(1, min(opts.workers, len(todo)))
    results = []
    # Every job checks the page cache before it starts (Jail.reserve); once a
    # batch the pass also runs where a file was added or written since the
    # last one, which that check does not see.
    keep_view_warm(force=True)
    with contextlib.ExitStack() as stack:
        grade_one = safe_grade_one
        if opts.warm:
            grade_one = stack.enter_context(WarmPool(workers)).grade
        with ThreadPoolExecutor(max_workers=workers) as pool:
            futures = {pool.submit(grade_one, s, opts): s for s in todo}
            for fut in as_completed(futures):
                results.append(fut.result())
                bar.update(1)
    return results


def _progress(total: int, enabled: bool):
    from tqdm import tqdm
    return tqdm(total=total, unit="nb", desc="grading", disable=not enabled or total == 0, file=sys.stderr)
