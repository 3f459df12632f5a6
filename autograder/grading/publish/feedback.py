"""`python -m autograder feedback`: one HTML page per student and notebook.

Made from the autograded notebook and the grade result, not with nbgrader's
generate_feedback, which shows the hidden tests' source. What the page
shows, and why:

* A summary on top: the score per exercise, what the intake found and the
  recheck's flags, all from the result file the trusted side wrote
  (.course/results/<assignment>/<student>.json).
* Test cells: their visible part only, and under each the trusted verdict
  (score, recheck status, the recheck's diagnosis). Never their output. The
  diagnosis is read from the fields the recheck stored (CheckFailed.diagnosis:
  the rows that failed, the regime, measured facts, likely bugs); the line of
  the learner's code it located is their own text, shown escaped, cut to
  LOCATED_CAP characters and framed "From your notebook" like their markdown.
  A result file without fields shows the recheck's message.
* Answer and other code cells: their source, never their output.
  Outputs of the grading run are written by the learner's code, which can
  read the test cell the kernel runs (an IPython pre_run_cell hook,
  linecache, the caller's frame) and print it, hidden tests included, in
  the test cell's output or in any later cell's; it can also print a fake
  verdict. So no output of the grading run reaches the page.
* Markdown cells: rendered, then sanitised with nh3 (the maintained binding
  of the Ammonia sanitiser; nbconvert's own SanitizeHTML uses bleach, which
  is deprecated): no script, style, event-handler attribute, class, id,
  image or javascript: URL survives, so learner text cannot run code or
  dress itself up as the grader's banner. Each is shown in a frame marked
  "From your notebook", its headings demoted to bold paragraphs: a
  heading "Score: 8 / 8" in the notebook would otherwise look like the
  grader's own. Only the grader's banner has headings. Their math is
  MathML, converted when the page is written (autograder/mathml.py): the
  page needs no script and no file beside it. A fragment that does not
  convert stays TeX, for the MathJax copied into the feedback folder then.
* Every message from the result file is dropped if it quotes a line of the
  hidden tests (defence in depth: the trusted side should never put one
  there), and the whole page body goes through nh3 once more.
"""
from __future__ import annotations

import html
import re
import shutil
from pathlib import Path

import nbformat
import nh3

from ... import course, diagnosis_text, mathjax, mathml
from .. import deadlines, gradebook
from ...notebook_format import HIDDEN_BLOCK, is_check, nbg, read, visible_part
from ..escape import MARKDOWN_TAGS, PAGE_ATTRIBUTES, sanitized
from ..records import CellResult, GradeResult

PAGE_CSS = """
body { font-family: system-ui, sans-serif; max-width: 60rem; margin: 2rem auto; padding: 0 1rem; color: #222; }
table.grader-summary { border-collapse: collapse; margin: 1rem 0; }
table.grader-summary td, table.grader-summary th { border: 1px solid #bbb; padding: 0.2rem 0.6rem; }
.grader-banner { border: 2px solid #335; background: #eef; padding: 0.5rem 1rem; }
.cell { margin: 1rem 0; }
.cell-source { border-left: 3px solid #ccc; padding-left: 0.6rem; }
.verdict { border: 1px solid #335; background: #f4f4fb; padding: 0.3rem 0.6rem; margin-top: 0.3rem; }
.verdict-pass { border-color: #272; }
.verdict-fail { border-color: #a22; }
.learner-markdown { border: 1px dashed #999; background: #fafafa; padding: 0.2rem 0.8rem; }
.learner-label { font-size: 0.75rem; color: #666; text-transform: uppercase; letter-spacing: 0.05em; }
.learner-heading { font-weight: bold; }
.diagnosis { margin-top: 0.3rem; }
math { font-size: 1.1em; }
math[display="block"] { margin: 0.6rem 0; }
math [mathvariant="monospace"] { font-family: monospace; }
"""
OUTPUTS_NOTE = ("Outputs of the grading run are not shown: code in a notebook can print anything there, "
                "including text that is not its own. Run your notebook in Jupyter to see your outputs; "
                "the verdicts on this page come from the grader.")
WITHHELD = "(message withheld: it quoted the grader's hidden test code)"
LEARNER_LABEL = "From your notebook"
# MathJax (autograder/mathjax-config.js), on a page with TeX left unconverted,
# typesets math inside this class only, which only a markdown cell's frame
# carries: the learner's markdown lost every class when nh3 cleaned it, and
# code, verdicts and the banner are under PAGE_CLASS, which MathJax ignores.
MATH_CLASS, PAGE_CLASS = "jp-RenderedMarkdown", "grader-page"
# A feedback folder holds one copy of MathJax once a page needs it; a page sits
# two folders below it (<student>/<assignment>/<assignment>.html).
MATHJAX_FOLDER = "mathjax"
MATHJAX_FROM_PAGE = f"../../{MATHJAX_FOLDER}"
MATHJAX_SCRIPTS = (f'<script src="{MATHJAX_FROM_PAGE}/{mathjax.CONFIG_JS.name}"></script>'
                   f'<script src="{MATHJAX_FROM_PAGE}/MathJax.js"></script>')
PAGE_TAGS = MARKDOWN_TAGS | mathml.MATHML_TAGS
HEADING_TAG = re.compile(r"<(/?)h[1-6]>")


def hidden_test_lines(assignment: str) -> set[str]:
    """The non-trivial lines of the assignment's hidden tests, stripped."""
    path = course.source_notebook(assignment)
    if not path.is_file():
        return set()
    source = read(path)
    return {line.strip() for cell in source.cells if is_check(cell)
            for block in HIDDEN_BLOCK.findall(cell.source) for line in block.splitlines() if len(line.strip()) >= 12}


def _message(text: str, hidden: set[str]) -> str:
    """A message from the result file, escaped; withheld if it quotes hidden tests."""
    return html.escape(WITHHELD if any(line in text for line in hidden) else text)


def _clean_markdown(source: str, math: mathml.MathPage) -> str:
    """A learner's markdown cell as safe HTML, its headings demoted (after
    nh3, which left every tag bare of attributes) and framed as the learner's;
    its math converted by `math`, put in place after the cleaning."""
    clean = nh3.clean(math.markdown(source), tags=MARKDOWN_TAGS, attributes={"a": {"href", "title"}})
    demoted = HEADING_TAG.sub(lambda m: "</p>" if m.group(1) else '<p class="learner-heading">', math.fill(clean))
    return (f'<div class="learner-markdown"><div class="learner-label">{html.escape(LEARNER_LABEL)}</div>'
            f'<div class="{MATH_CLASS}">{demoted}</div></div>')


def _code(source: str) -> str:
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer
    return highlight(source, PythonLexer(), HtmlFormatter())


def _verdict(cell_result: CellResult | None, hidden: set[str]) -> str:
    if cell_result is None:
        return '<div class="verdict">No verdict was recorded for this test cell.</div>'
    status = "pass" if cell_result["recheck"] == "pass" and cell_result["score"] == cell_result["max_score"] else "fail"
    text = (f"Score {cell_result['score']:g} / {cell_result['max_score']:g}; "
            f"independent recheck: {html.escape(str(cell_result['recheck']))}")
    diagnoses = [d for d in cell_result.get("diagnoses") or [] if isinstance(d, dict)]
    message = cell_result.get("message") or ""
    if diagnoses:
        detail = "".join(_diagnosis_html(d, hidden) for d in diagnoses)
    else:
        detail = f"<br>{_message(message, hidden)}" if message else ""
    return f'<div class="verdict verdict-{status}">{text}{detail}</div>'


LOCATED_CAP = 160


def _quotes_hidden(texts: list[str], hidden: set[str]) -> bool:
    return any(line in t for t in texts for line in hidden)


def _diagnosis_html(d: dict, hidden: set[str]) -> str:
    """One failing check call, from its fields: the check's own words escaped,
    the located line framed as the learner's text."""
    def strings(key) -> list[str]:
        value = d.get(key)
        return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []
    regime = d.get("regime") if isinstance(d.get("regime"), dict) else {}
    located = d.get("located") if isinstance(d.get("located"), dict) else {}
    words = [str(d.get("exercise") or ""), *strings("failed_rows"), str(regime.get("text") or ""), *strings("facts"),
             *strings("candidates"), *strings("likely_bugs"), str(d.get("stop") or ""), *[f for f in located.get("facts") or [] if isinstance(f, str)]]
    if _quotes_hidden(words + [str(located.get("code") or ""), str(located.get("also_code") or "")], hidden):
        return f'<div class="diagnosis">{html.escape(WITHHELD)}</div>'
    head = diagnosis_text.headline(d)
    body = html.escape(head) if head else ""
    # the notebook's lines (diagnosis_text), the learner's own text left out of the Where line, their line framed below
    for line in diagnosis_text.lines(d, learners_text=False):
        body += ("<br>" if body and not body.endswith("</div>") else "") + html.escape(str(line))
        if line.kind == diagnosis_text.WHERE:
            body += _located_html(located)
    return f'<div class="diagnosis">{body}</div>'


def _located_html(located: dict) -> str:
    """The learner's line a diagnosis points at: their text, escaped, capped, framed as theirs ("" when the
    record keeps no learner text, as the recheck's verdicts do: the line is in the cell above)."""
    if not located or type(located.get("line")) is not int or not located.get("code"):
        return ""
    def cut(text) -> str:
        text = str(text)
        return text if len(text) <= LOCATED_CAP else text[:LOCATED_CAP - 1] + "…"
    shown = f"line {located['line']}: {cut(located['code'])}"
    if type(located.get("also")) is int and located.get("also_code"):
        shown += f"\nline {located['also']}: {cut(located['also_code'])}"
    return (f'<div class="learner-markdown"><div class="learner-label">{html.escape(LEARNER_LABEL)}</div>'
            f"<pre>{html.escape(shown)}</pre></div>")


def summary_html(result: GradeResult, hidden: set[str]) -> str:
    rows = "".join(f"<tr><td>{html.escape(cell)}</td><td>{c['score']:g}</td><td>{c['max_score']:g}</td>"
                   f"<td>{html.escape(str(c['recheck']))}</td></tr>" for cell, c in result.get("cells", {}).items())
    notes = result.get("problems", []) + result.get("flags", [])
    notes_html = ("<p><strong>Notes from the grader</strong></p><ul>"
                  + "".join(f"<li>{_message(n, hidden)}</li>" for n in notes) + "</ul>") if notes else ""
    late = result.get("late") or {}
    late_html = (f'<br><strong>Late:</strong> {html.escape(late["text"])}; penalty {late["penalty"]:g}, '
                 f'score after it {late["final_score"]:g} / {result["max_score"]:g}') if late.get("late_by") else ""
    return (f'<div class="grader-banner"><h1>Feedback: {html.escape(result["assignment"])}</h1>'
            f'<p><strong>Student:</strong> {html.escape(result["student"])}<br>'
            f'<strong>Score:</strong> {result["score"]:g} / {result["max_score"]:g}{late_html}</p>'
            '<table class="grader-summary"><tr><th>exercise</th><th>score</th><th>out of</th>'
            f'<th>independent recheck</th></tr>{rows}</table>{notes_html}'
            f'<p><em>{html.escape(OUTPUTS_NOTE)}</em></p></div>')


def cells_html(nb: nbformat.NotebookNode, result: GradeResult, hidden: set[str], math: mathml.MathPage) -> str:
    parts = []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            parts.append(f'<div class="cell">{_clean_markdown(cell.source, math)}</div>')
        elif cell.cell_type == "code" and is_check(cell):
            source = visible_part(cell.source).rstrip() + "\n"
            verdict = _verdict(result.get("cells", {}).get(nbg(cell).get("grade_id")), hidden)
            parts.append(f'<div class="cell"><div class="cell-source">{_code(source)}</div>{verdict}</div>')
        elif cell.cell_type == "code":
            parts.append(f'<div class="cell"><div class="cell-source">{_code(cell.source)}</div></div>')
        else:  # raw cells: shown as text, never interpreted
            parts.append(f'<div class="cell"><pre>{html.escape(cell.source)}</pre></div>')
    return "\n".join(parts)


def render(result: GradeResult, hidden: set[str]) -> tuple[str, list[str]]:
    """One student's page, and the TeX fragments on it left unconverted (the
    page then loads MathJax); `hidden`: hidden_test_lines of their assignment."""
    from pygments.formatters import HtmlFormatter

    path = gradebook.folder("autograded") / result["student"] / result["assignment"] / f"{result['assignment']}.ipynb"
    nb = read(path) if path.is_file() else nbformat.v4.new_notebook()
    math = mathml.MathPage()
    body = sanitized(summary_html(result, hidden) + cells_html(nb, result, hidden, math),
                     tags=PAGE_TAGS, attributes={**PAGE_ATTRIBUTES, **mathml.MATHML_ATTRIBUTES})
    css = PAGE_CSS + HtmlFormatter().get_style_defs(".highlight")
    scripts = MATHJAX_SCRIPTS if math.unconverted else ""
    page = (f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>Feedback: '
            f'{html.escape(result["assignment"])} ({html.escape(result["student"])})</title>'
            f"<style>{css}</style>{scripts}</head>\n<body class=\"{PAGE_CLASS}\">{body}</body></html>\n")
    return page, math.unconverted


def write_feedback(results: list[GradeResult]) -> list[Path]:
    written, mathjax_copied = [], False
    hidden = {a: hidden_test_lines(a) for a in {r["assignment"] for r in results}}  # one read per notebook
    rules = deadlines.load()
    for r in results:
        late = deadlines.lateness(r["student"], r["assignment"], rules)
        r = {**r, "late": {**deadlines.late_fields(late, late.penalty(r["score"]), r["score"]), "text": late.describe()}}
        dest = gradebook.folder("feedback") / r["student"] / r["assignment"] / f"{r['assignment']}.html"
        dest.parent.mkdir(parents=True, exist_ok=True)
        page, unconverted = render(r, hidden[r["assignment"]])
        if unconverted and not mathjax_copied:
            mathjax.copy_mathjax(gradebook.folder("feedback") / MATHJAX_FOLDER)
            mathjax_copied = True
        dest.write_text(page, encoding="utf-8")
        # `nbgrader release_feedback` (the hub's exchange) names each page after the
        # submission's timestamp and secret, which `nbgrader collect` left beside it.
        submitted = gradebook.folder("submitted") / r["student"] / r["assignment"]
        for name in ("timestamp.txt", "submission_secret.txt"):
            if (submitted / name).is_file():
                shutil.copy(submitted / name, dest.parent / name)
        written.append(dest)
    return written
