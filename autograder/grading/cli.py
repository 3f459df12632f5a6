"""The instructor and learner commands of `python -m autograder`:

  collect SOURCE     import submissions from a folder or an LMS zip
  grade              autograde in parallel, sandboxed, rechecked, resumable
  feedback           HTML feedback per student, without hidden tests
  export             grades as CSV (per exercise, per notebook, total)
  release-solutions  publish one solution notebook (no hidden tests) after its due date
  report             the class report for the instructor (HTML, CSV, JSON)
  check NOTEBOOK     learner self-check in a fresh kernel (autograder/selfcheck.py)

The grading library raises GradingError (errors.py) for what the instructor
must fix; only this module turns it into an exit status and one message.
"""
from __future__ import annotations

import argparse
import math
import os
from functools import wraps
from pathlib import Path

from .. import course
from . import deadlines, gradebook
from .errors import GradingError
from .escape import printable
from .records import find_submissions, load_result


def _assignments(names: list[str] | None) -> list[str]:
    known = course.assignments()
    if not names:
        return known
    picked = [a for a in known if any(a == n or a.startswith(n) for n in names)]
    unknown = [n for n in names if not any(a == n or a.startswith(n) for a in known)]
    if unknown:
        raise SystemExit(f"unknown assignment(s) {unknown}; the course has {known}")
    return picked


def _megabytes(value: float, option: str) -> int:
    if not value > 0:
        raise SystemExit(f"{option} must be a positive number of megabytes, got {value}")
    return int(value * 2**20)


# Each command imports what it runs: `python -m autograder` builds every
# command's parser, and the grading engines (nbgrader, zmq, torch through the
# checks) would slow the start of every other command.

def cmd_collect(args) -> int:
    from .intake.collect import collect, format_report
    assignments = _assignments(args.assignments)
    report = collect(Path(args.source), assignments, args.id_pattern, args.assignment,
                     max_submission_bytes=_megabytes(args.max_submission_mb, "--max-submission-mb"),
                     max_collection_bytes=_megabytes(args.max_total_mb, "--max-total-mb"),
                     times=Path(args.times) if args.times else None)
    print(format_report(report, assignments))
    return 0


def cmd_grade(args) -> int:
    from .batch import Options, grade_all
    from .grade import summary
    from .sandbox.jail import Limits
    limits = Limits(memory_mb=args.memory_mb, wall_s=args.timeout, cpu_s=max(math.ceil(args.timeout), 60))
    opts = Options(assignments=_assignments(args.assignments), students=args.student or None,
                   workers=args.workers, cell_timeout=args.cell_timeout, limits=limits, db_url=args.db_url or "",
                   force=args.force, recheck=not args.no_recheck, progress=not args.no_progress, warm=not args.cold,
                   scheduler=args.scheduler or "", skip_tail=not args.every_cell)
    results = grade_all(opts)
    print(summary(results))
    return 0


def cmd_feedback(args) -> int:
    from .publish.feedback import write_feedback
    results = [r for r in map(load_result, find_submissions(_assignments(args.assignments), args.student or None)) if r]
    if not results:
        print("no graded submissions yet: run `python -m autograder grade` first")
        return 1
    for path in write_feedback(results):
        print(f"wrote {printable(path.relative_to(course.ROOT) if path.is_relative_to(course.ROOT) else path)}")
    return 0


def cmd_export(args) -> int:
    from .publish.export import export
    for path in export(gradebook.db_url(args.db_url), Path(args.out or gradebook.folder("exports"))):
        print(f"wrote {printable(path)}")
    return 0


def cmd_release_solutions(args) -> int:
    from .publish.solutions import release_solutions
    picked = _assignments([args.assignment])
    if len(picked) != 1:
        raise SystemExit(f"{args.assignment!r} names {len(picked)} assignments ({picked}): give one")
    where = release_solutions(picked[0], force=args.force, exchange=args.exchange, out=args.out)
    print(f"released the solutions of {picked[0]} to {where}")
    return 0


def cmd_report(args) -> int:
    from .publish.report import RiskRule, build_report, load, write_report
    url = gradebook.db_url(args.db_url)
    data = load(url, _assignments(args.assignments) if args.assignments else None, late=deadlines.lateness_lookup())
    report = build_report(data, RiskRule(missing=args.at_risk_missing, below_percent=args.at_risk_below))
    for path in write_report(report, Path(args.out or gradebook.folder("reports")), url):
        print(f"wrote {printable(path)}")
    return 0


def cmd_check(args) -> int:
    from ..selfcheck import main
    return main(args.notebook, args.cell_timeout)


def _seconds(text: str) -> float:
    """A positive, finite number of seconds (argparse names the option on error)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: give a positive number of seconds, e.g. 600")
    return value


def _without_traceback(command):
    """An instructor command that checks deadlines.toml first, and whose
    GradingError ends it with the message, not a traceback: a bad deadlines
    or LMS times file as "error: ..." (naming the file and the line), any
    other as it is."""
    @wraps(command)
    def run(args) -> int:
        try:
            deadlines.load()
            return command(args)
        except deadlines.DeadlinesError as err:
            raise SystemExit(f"error: {err}") from None
        except GradingError as err:
            raise SystemExit(str(err)) from None
    return run


def add_commands(sub) -> None:
    from .intake.collect import MAX_COLLECTION_BYTES, MAX_SUBMISSION_BYTES
    db_help = f"gradebook URL (default: ${gradebook.ENV_VAR} or SQLite in .course/)"

    c = sub.add_parser("collect", help="import submissions from a folder or an LMS zip")
    c.add_argument("source", help="folder <student>/<assignment>/... or a .zip export")
    c.add_argument("--assignments", nargs="*", help="limit to these assignments (default: all)")
    c.add_argument("--assignment", help="zip only: put every notebook in this assignment")
    c.add_argument("--id-pattern", default=r"^(?P<student>[^_/]+)_",
                   help="zip only: regex with a `student` group, matched on each entry's first path part")
    c.add_argument("--max-submission-mb", type=float, default=MAX_SUBMISSION_BYTES / 2**20,
                   help="most megabytes imported per student and assignment (default %(default)g)")
    c.add_argument("--max-total-mb", type=float, default=MAX_COLLECTION_BYTES / 2**20,
                   help="most megabytes imported by one collect run (default %(default)g)")
    c.add_argument("--times", metavar="CSV", help="the LMS export's submission times: columns student, assignment, "
                   "submitted_at (ISO 8601); without it a time is collect's own clock, or unknown")
    c.set_defaults(func=_without_traceback(cmd_collect))

    g = sub.add_parser("grade", help="autograde collected submissions (sandboxed, parallel, resumable)")
    g.add_argument("assignments", nargs="*", help="assignment names or prefixes, e.g. 01 04_rope (default: all)")
    g.add_argument("--student", action="append", help="grade only this student (repeatable)")
    g.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="parallel submissions (default: cores)")
    g.add_argument("--timeout", type=_seconds, default=600, help="wall-clock seconds per submission (default 600)")
    g.add_argument("--cell-timeout", type=int, default=120, help="seconds per notebook cell (default 120)")
    g.add_argument("--memory-mb", type=int, default=4096, help="address-space limit per process (default 4096)")
    g.add_argument("--force", action="store_true", help="regrade submissions already graded")
    g.add_argument("--no-recheck", action="store_true", help="skip the out-of-process recheck (not recommended)")
    g.add_argument("--no-progress", action="store_true")
    g.add_argument("--every-cell", action="store_true",
                   help="also run the cells after a notebook's last graded cell (they cannot change a grade; "
                        "by default they are left out, each with a note)")
    g.add_argument("--cold", action="store_true",
                   help="start nbgrader and the recheck afresh per submission instead of in warm worker processes")
    g.add_argument("--db-url", help=db_help)
    g.add_argument("--scheduler", metavar="ADDRESS", help="grade on the Dask cluster of this scheduler, e.g. "
                   "tcp://HOST:8786: one task per submission, a PostgreSQL --db-url (see autograder/grading/engines/cluster.py)")
    g.set_defaults(func=_without_traceback(cmd_grade))

    f = sub.add_parser("feedback", help="HTML feedback per student (no hidden tests)")
    f.add_argument("assignments", nargs="*")
    f.add_argument("--student", action="append")
    f.set_defaults(func=_without_traceback(cmd_feedback))

    e = sub.add_parser("export", help="grades as CSV: per exercise, per notebook, total")
    e.add_argument("--out", help="output folder (default: exports/ in the course data folder)")
    e.add_argument("--db-url", help=db_help)
    e.set_defaults(func=_without_traceback(cmd_export))

    r = sub.add_parser("release-solutions", help="publish one solution notebook (no hidden tests) after its due date")
    r.add_argument("assignment", help="one assignment name or prefix, e.g. 01")
    r.add_argument("--force", action="store_true", help="release even before the due date")
    r.add_argument("--exchange", help="nbgrader's exchange folder (default: $TINYLM_HUB_EXCHANGE, set on the hub)")
    r.add_argument("--out", help="write a folder here instead (default without an exchange: "
                   "released_solutions/ in the course data folder)")
    r.set_defaults(func=_without_traceback(cmd_release_solutions))

    r = sub.add_parser("report", help="the class report (instructor only): HTML, CSV and JSON")
    r.add_argument("assignments", nargs="*", help="assignment names or prefixes (default: all in the gradebook)")
    r.add_argument("--out", help="output folder (default: reports/ in the course data folder)")
    r.add_argument("--db-url", help=db_help)
    r.add_argument("--at-risk-missing", type=int, default=2, metavar="N",
                   help="at risk when missing at least N notebooks (default %(default)s)")
    r.add_argument("--at-risk-below", type=float, default=50.0, metavar="PERCENT",
                   help="at risk when the average score is below PERCENT (default %(default)g)")
    r.set_defaults(func=_without_traceback(cmd_report))

    k = sub.add_parser("check", help="self-check one notebook in a fresh kernel")
    k.add_argument("notebook")
    k.add_argument("--cell-timeout", type=int, default=300)
    k.set_defaults(func=cmd_check)
