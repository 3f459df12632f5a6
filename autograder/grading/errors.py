"""The one error the grading library raises for a problem the instructor
must fix (a gradebook that cannot be opened, an unreachable cluster, a bad
collection source, a release refused): the message says what and how.
Only the command line (grading/cli.py) turns it into an exit status."""


class GradingError(Exception):
    """A grading command cannot go on; str(error) is the whole message."""
