"""Notebook 10's honest comparison with the floor: the story-aligned
windows score exactly the bytes whose floor is computed, each with the context
the floor has, on the validation split the course ships.

The functions are taken from the notebook's source file, so the test checks
the code the learner reads, not a copy of it."""
from __future__ import annotations

import ast

import pytest
import torch

import tinylm
from autograder import course

SOURCE = course.NOTEBOOK_SOURCES / "10_perplexity.py"
NEWLINE = ord("\n")
SEQ_LEN, CONTEXT = 256, 128


def _notebook_function(name):
    tree = ast.parse(SOURCE.read_text())
    node = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name), None)
    assert node is not None, f"{SOURCE.name} no longer defines {name}()"
    scope = {"torch": torch, "tinylm": tinylm}
    exec(compile(ast.Module([node], []), str(SOURCE), "exec"), scope)
    return scope[name]


@pytest.fixture(scope="module")
def val():
    return tinylm.course_corpus().val


def _scored_in_order(pairs):
    return torch.cat([y[y != -100] for _, y in pairs])


def _context_violations(pairs, context):
    """Windows whose first scored byte sees neither the newline that starts its
    story nor `context` bytes of that story, or that see bytes of an earlier story."""
    bad = []
    for i, (x, y) in enumerate(pairs):
        first = int((y != -100).nonzero()[0])
        seen = x[: first + 1]                      # inputs up to the first scored target
        newlines = (seen == NEWLINE).nonzero().flatten().tolist()
        story_start = newlines == [0]              # the window opens with the story's newline, none after
        deep_inside = not newlines and len(seen) >= context
        if not (story_start or deep_inside):
            bad.append(i)
    return bad


def test_every_validation_story_parses_once_and_the_floor_is_their_sum(val):
    """The shipped split is whole stories, each with one parse; the floor over
    all of them is the corpus's floor, so a floor over a subset is exact too."""
    corpus = tinylm.course_corpus()
    text = corpus.text("val")
    stories = text.splitlines(keepends=True)
    assert len(stories) > 100 and text.endswith("\n") and "".join(stories) == text
    parses = [tinylm.data.parse_story(s) for s in stories]
    assert all(len(p) == 1 for p in parses), "a validation story has no parse or more than one"
    story_floor = _notebook_function("story_floor")
    assert story_floor(val) == pytest.approx(corpus.floor, rel=1e-12)
    part = val[: sum(len(s) for s in stories[:10])]
    assert story_floor(part) == pytest.approx(-sum(p[0].logp for p in parses[:10]) / len(part), rel=1e-12)


def test_story_windows_score_each_byte_once_with_its_story_context(val):
    story_windows = _notebook_function("story_windows")
    pairs = story_windows(val, SEQ_LEN, CONTEXT)
    assert all(x.shape == (SEQ_LEN,) and y.shape == (SEQ_LEN,) for x, y in pairs)
    assert torch.equal(_scored_in_order(pairs), val.long()), "scored bytes are not the split, once each, in order"
    n_stories = int((val == NEWLINE).sum())
    assert len(pairs) > n_stories, "no story longer than a window: the sliding part is untested"
    assert not _context_violations(pairs, CONTEXT)
    for x, y in pairs:  # a target is the byte after its input
        scored = (y != -100).nonzero().flatten()
        assert torch.equal(y[scored[:-1]], x[scored[1:]])


def test_the_context_check_fires_on_consecutive_windows(val):
    """Non-overlapping windows (the notebook's old evaluation) cut stories: the
    context check must say so, or the test above proves nothing."""
    windows = _notebook_function("windows")
    data = val[: 40 * SEQ_LEN + 1]
    pairs = [(x, y) for xb, yb in windows(data, SEQ_LEN, 8) for x, y in zip(xb, yb)]
    assert torch.equal(_scored_in_order(pairs), data[1:].long())
    assert len(_context_violations(pairs, CONTEXT)) > len(pairs) // 2
