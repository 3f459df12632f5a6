"""The names the checks framework had in one module before it was layered
(see framework/__init__.py), kept importable for the grader, the benchmarks,
the tests and notebooks written against them. Code inside autograder.checks
imports from the layer that defines a name, never from here. CALL_TIME_LIMIT
and PRINT_LIMIT are settings: set them on framework.calling."""
from __future__ import annotations

from ..diagnosis_record import Diagnosis  # noqa: F401
from ..learner_values import (describe, known_sizes, shown_shape)  # noqa: F401
from .learner_code import (LearnerTimeout, is_learners_file, walk_traceback)  # noqa: F401
from .trace import size_one_axis  # noqa: F401
from .framework.measure import (ACTIVATIONS, KNOWN_FACTORS, LOG_BASE_CONSTANTS, TOLERANCES, axis_groups, close_to,
                                describe_factor, fit_scale, gradient_reaches, identify_activation, matching_variants,
                                mode_split, parameter_dtypes, parameter_problems, permutation_of, python_number_problem,
                                randn, reached_by_gradient, seeded, shorten, sums_to_one_axes, tol_for)  # noqa: F401
from .framework.failure import (CheckFailed, CheckStopped, DIAGNOSIS_LOG_ENV, Delegation, learner_frames,
                                render_failure, show_check, unique_lines)  # noqa: F401
from .framework.calling import (argument_names, call_giving_inputs_back, changed, delegation_message, given_back,
                                globals_of, guarded_call, independent_copy, keeping_the_random_stream, measuring_call,
                                refuse_delegation, tensors_named, torch_settings, torch_settings_kept, unshared,
                                )  # noqa: F401
from .framework.explain.layout import LAYOUT  # noqa: F401
from .framework.check import (CallRecord, Check, FAIL_HOOKS, INPUTS_ROW, PASS_HOOKS, RAISE_LOCATORS, Row,
                              SETTINGS_ROW)  # noqa: F401
