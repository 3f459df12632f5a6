"""Probes that verify_unseen.py adds for the fresh28 set: fresh27's (and through them fresh26's) extra probes,
which reach situations this set's mistakes are about too (float16 input with a float16 gain, a clip that bites,
padding, head_dim apart from d_model / n_heads). No check of the course is run."""
from __future__ import annotations

from benchmarks.unseen_probes_fresh27 import EXTRA_PROBES as FRESH27_PROBES

EXTRA_PROBES = dict(FRESH27_PROBES)
