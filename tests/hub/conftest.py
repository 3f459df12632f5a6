"""The hub test drives the same Chromium as tests/browser (Debian's, never a
download; skipped or failed with the reason when it is missing)."""
