"""The framework every check is built from, lowest layer first: measure
(numbers and tolerances), failure (CheckFailed and its rendering), calling
(calling the learner's code and giving its inputs back), explain (the
measurement explainers of a failing row), check (the Check class and its
row table). See docs/contributing.md, "How the checks are layered"."""
