"""The hub test drives the same Chromium as tests/browser (Debian's, never a
download; skipped or failed with the reason when it is missing)."""
from ..browser.conftest import browser  # noqa: F401  (the fixture, shared)
