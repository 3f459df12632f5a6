"""A course copy graded with PYTHONPATH while the venv's editable install
points at another checkout (the hub test's layout, an instructor's course
folder): the jailed `python -I` imports from the install, so that
checkout's packages must be readable in the jail, and its secrets hidden
there like ROOT's (the deny-list fallback covers them)."""
from __future__ import annotations

import json
import importlib.metadata

from autograder import course
from autograder.grading import gradebook
from autograder.grading.sandbox import jail, kernel


class _Dist:
    def __init__(self, info):
        self.info = info

    def read_text(self, name):
        return json.dumps(self.info) if name == "direct_url.json" else None


def _installed_at(monkeypatch, info):
    monkeypatch.setattr(importlib.metadata, "distribution", lambda name: _Dist(info))


def test_another_editable_checkout_is_readable_and_its_secrets_hidden(monkeypatch, tmp_path):
    other = tmp_path / "clone"
    for sub in ("solutions", "autograder/authoring/notebook_src", ".git", "tinylm"):
        (other / sub).mkdir(parents=True)
    _installed_at(monkeypatch, {"url": other.as_uri(), "dir_info": {"editable": True}})
    assert course.course_roots() == [course.ROOT, other.resolve()]
    shown = jail.needed_paths()
    # its packages, never the checkout itself (which holds solutions/, .git and the course data)
    assert {str(other.resolve() / "tinylm"), str(other.resolve() / "autograder")} <= set(shown)
    assert not [p for p in shown if other.resolve().is_relative_to(p)], shown
    hidden = kernel.hidden_paths(gradebook.db_url())
    for sub in ("solutions", "autograder/authoring/notebook_src", ".git"):
        assert other.resolve() / sub in hidden, sub


def test_a_plain_install_or_the_same_checkout_adds_nothing(monkeypatch, tmp_path):
    _installed_at(monkeypatch, {"url": tmp_path.as_uri(), "archive_info": {}})
    assert course.course_roots() == [course.ROOT]
    _installed_at(monkeypatch, {"url": course.ROOT.as_uri(), "dir_info": {"editable": True}})
    assert course.course_roots() == [course.ROOT]
