"""The tinylm course's grading side: nbgrader config, the check functions
used by every notebook exercise, the notebook builder, and the CLI
(`python -m autograder ...`)."""
