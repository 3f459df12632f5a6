"""python -m autograder.grading.recheck ASSIGNMENT NOTEBOOK [--timeout S] [--total S] [--memory-mb MB]
prints the verdicts as JSON (run.main); with --child alone, the jailed child
(child.main), which imports nothing of the trusted side."""
import sys

from autograder.grading.recheck.protocol import CHILD_FLAG

if sys.argv[1:] == [CHILD_FLAG]:
    from autograder.grading.recheck.child import main
    sys.exit(main())
from autograder.grading.recheck.run import main

sys.exit(main())
