"""python -m autograder COMMAND

  build [NN ...]   build and execute solutions/ from autograder/authoring/notebook_src/
  release          regenerate notebooks/ from solutions/ with nbgrader, then
                   verify the result equals a fresh generation
  check-release    exit 1 if notebooks/ differs from a fresh generation
  doctor           is this environment ready for the course? (exit 1 if not)

and the commands of autograder/grading/cli.py: collect, grade, feedback,
export, release-solutions, report (the instructor's) and check (the
learner's self-check, autograder/selfcheck.py).
"""
from __future__ import annotations

import argparse
import sys

from . import course


def cmd_build(args) -> int:
    from .authoring.build import build
    build(args.names, run=not args.no_run)
    return 0


def cmd_release(args) -> int:
    course.generate()  # also registers the assignments in the gradebook
    for a in course.assignments():
        print(f"released {course.release_notebook(a).relative_to(course.ROOT)}")
    return cmd_check_release(args)


def cmd_check_release(args) -> int:
    problems = course.release_diff()
    for p in problems:
        print(p)
    if problems:
        print("notebooks/ is out of date: run `python -m autograder release`.")
        return 1
    print(f"notebooks/ equals a fresh generation ({len(course.assignments())} assignments).")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder", description="tinylm course tools")
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build and execute solutions/ from autograder/authoring/notebook_src/")
    b.add_argument("names", nargs="*")
    b.add_argument("--no-run", action="store_true")
    b.set_defaults(func=cmd_build)
    sub.add_parser("release", help="regenerate notebooks/ from solutions/").set_defaults(func=cmd_release)
    sub.add_parser("check-release", help="fail if notebooks/ is stale").set_defaults(func=cmd_check_release)
    from . import doctor
    d = sub.add_parser("doctor", help="check Python, torch, Jupyter and nbgrader's extensions; exit 1 on a problem")
    doctor.add_arguments(d)
    d.set_defaults(func=doctor.main)
    from .grading.cli import add_commands
    add_commands(sub)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
