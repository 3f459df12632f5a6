"""`python -m autograder feedback`: one HTML page per student and notebook.

Made from the autograded notebook and the grade result, not with nbgrader's
generate_feedback, which shows the hidden tests' source. Here every test
cell shows only its visible part; its printed check tables stay (they show
shapes, pass/fail and differences, never expected values); an error output
keeps its exception name and message but not its traceback, whose frames
would quote hidden test lines. A summary on top gives the score per
exercise, what the intake found, and the recheck's flags.
"""
from __future__ import annotations

import html
import shutil
from pathlib import Path

import nbformat

from . import gradebook
from .notebook_gates import HIDDEN_BLOCK, is_check, visible_part



def sanitize(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    for cell in nb.cells:
        if "BEGIN HIDDEN TESTS" in cell.source or is_check(cell):
            cell.source = visible_part(HIDDEN_BLOCK.sub("", cell.source)).rstrip() + "\n"
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                out["traceback"] = [f"{out.get('ename', 'Error')}: {out.get('evalue', '')}"]
    return nb


def summary_markdown(result: dict) -> str:
    lines = [f"# Feedback: {result['assignment']}",
             f"**Student:** {result['student']}  \n**Score:** {result['score']:g} / {result['max_score']:g}", "",
             "| exercise | score | out of | independent recheck |", "|---|---|---|---|"]
    for cell, c in result.get("cells", {}).items():
        lines.append(f"| {cell} | {c['score']:g} | {c['max_score']:g} | {c['recheck']} |")
    notes = result.get("problems", []) + result.get("flags", [])
    if notes:
        lines += ["", "**Notes from the grader**", ""] + [f"- {html.escape(n)}" for n in notes]
    return "\n".join(lines)


def render(result: dict) -> str:
    from nbconvert import HTMLExporter

    path = gradebook.folder("autograded") / result["student"] / result["assignment"] / f"{result['assignment']}.ipynb"
    if path.is_file():
        nb = sanitize(nbformat.read(str(path), as_version=4))
    else:
        nb = nbformat.v4.new_notebook()
    nb.cells.insert(0, nbformat.v4.new_markdown_cell(summary_markdown(result)))
    body, _ = HTMLExporter(template_name="lab").from_notebook_node(nb)
    return body


def write_feedback(results: list[dict]) -> list[Path]:
    written = []
    for r in results:
        dest = gradebook.folder("feedback") / r["student"] / r["assignment"] / f"{r['assignment']}.html"
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(render(r), encoding="utf-8")
        # `nbgrader release_feedback` (the hub's exchange) names each page after the
        # submission's timestamp and secret, which `nbgrader collect` left beside it.
        submitted = gradebook.folder("submitted") / r["student"] / r["assignment"]
        for name in ("timestamp.txt", "submission_secret.txt"):
            if (submitted / name).is_file():
                shutil.copy(submitted / name, dest.parent / name)
        written.append(dest)
    return written
