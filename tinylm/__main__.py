"""python -m tinylm COMMAND

  doctor   check that this environment is ready for the course
"""
from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tinylm", description="tinylm course tools")
    sub = parser.add_subparsers(dest="command", required=True)

    from . import doctor
    d = sub.add_parser("doctor", help="check Python, torch, Jupyter and nbgrader's extensions; exit 1 on a problem")
    doctor.add_arguments(d)
    d.set_defaults(func=doctor.main)

    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
