"""One graded batch of notebook 03 (B) shared by the tests of what a page
may say and of honest notebooks in odd shapes (graded once per session):

* values_*: answers that return (or raise) every kind of value, each
  carrying a marker the learner's code builds at run time (so the marker is
  in no cell's text, and a page that shows it took it from a verdict);
* ipython, bom, zoë-müller: honest answers written with IPython syntax,
  saved with a byte order mark, and collected from a folder whose name is
  decomposed (as an Apple system writes it);
* nested, crowded, bad_json: notebooks the intake refuses with its reason.

After grading: the feedback pages, the export and the class report."""
from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path

from autograder import specimens

B = "03_causal_attention"
NUMBER = 6023301422529
NUMBER_TEXT = "(3011650711264 * 2 + 1)"          # NUMBER, as the learner's code computes it
SIZE_TEXT = "(917262 + 1)"                        # an axis size no input has: 917263
MARK = "QZX" + "MARK"
MARK_TEXT = '("QZX" + "MARK")'
ZOE = "zoë-müller"


def markers() -> list[str]:
    """What no page may show: the marker, the size, and any 7 digits of NUMBER in a row."""
    digits = str(NUMBER)
    return [MARK.lower(), "917263", *(digits[i:i + 7] for i in range(len(digits) - 6))]


def shown(text: str) -> list[str]:
    """The markers in text (case aside; digits grouped with , or _ read as one number)."""
    text = re.sub(r"(?<=\d)[,_](?=\d)", "", text).lower()
    return [m for m in markers() if m in text]


def _answers(causal_mask: str, split_heads: str, causal_attention: str, self_attention: str, flops: str
             ) -> dict[str, str]:
    """Answer cells whose functions return (or do) the given expressions."""
    return {
        "causal_mask": f"def causal_mask(q_len, kv_len=None):\n    {causal_mask}\n",
        "split_heads": (f"def split_heads(x, n_heads):\n    {split_heads}\n\n\n"
                        f"def merge_heads(y):\n    {split_heads}\n"),
        "causal_attention": f"def causal_attention(q, k, v):\n    {causal_attention}\n",
        "self_attention": f"def self_attention(x, w_q, w_k, w_v, w_o, n_heads):\n    {self_attention}\n",
        "attention_flops": f"def attention_flops(batch, seq_len, d_model, n_heads):\n    {flops}\n",
    }


VALUES = {
    "values_a": _answers(f"return {NUMBER_TEXT}",
                         f"return float('0.' + str({NUMBER_TEXT}))",
                         f"return {MARK_TEXT} + '-str'",
                         f"return ({MARK_TEXT} + '-bytes').encode()",
                         f"return [{NUMBER_TEXT}, {MARK_TEXT}]"),
    "values_b": _answers(f"return {{{MARK_TEXT}: {NUMBER_TEXT}}}",
                         f"return (torch.zeros(0, {SIZE_TEXT}), torch.zeros(3, 2))",
                         "return None",
                         f"return type({MARK_TEXT} + 'Object', (), {{'__repr__': lambda self: {MARK_TEXT}}})()",
                         f"raise ValueError({MARK_TEXT} + ' ' + str({NUMBER_TEXT}))"),
    "values_c": _answers(f"return torch.zeros(0, {SIZE_TEXT}, dtype=torch.bool)",
                         f"raise RuntimeError('mat1 and mat2 shapes cannot be multiplied (6x8 and ' + "
                         f"str({NUMBER_TEXT})[:7] + 'x4)')",
                         f"return type({MARK_TEXT} + 'Module', (torch.nn.Module,), {{'forward': lambda self, x: x}})()",
                         f"return complex({NUMBER_TEXT}, 1)",
                         f"return {{'qkv_proj': {NUMBER_TEXT}, 'scores': {NUMBER_TEXT} + 1, 'mix': 1, 'out_proj': 1}}"),
}


def ipython_notebook():
    """Honest answers as a learner writes them in Jupyter: a cell magic
    heading an answer, line magics, and shell escapes in a helper cell."""
    import nbformat
    answers = specimens.solution_answers(B)
    answers["causal_attention"] = "%%time\n" + answers["causal_attention"]
    answers["split_heads"] = "%timeit -n 1 -r 1 sum(range(10))\n" + answers["split_heads"]
    answers["self_attention"] = answers["self_attention"] + "\n\ncheck = %time 1 + 1\n"
    nb = specimens.notebook(B, answers)
    nb.cells.insert(1, nbformat.v4.new_code_cell("%matplotlib inline\n!echo preparing\nscale_note = 'ok'\n"))
    return nb


def produce(data: Path) -> dict:
    from autograder.grading.batch import Options, grade_all
    from autograder.grading.grade import summary
    from autograder.grading.intake.collect import collect
    from autograder.grading.publish import report
    from autograder.grading.publish.export import export
    from autograder.grading.publish.feedback import write_feedback
    from autograder.grading.sandbox.jail import Limits

    sources = {}
    for student, answers in VALUES.items():
        sources[student] = "\n".join(answers.values())
        specimens.submit(data, student, B, specimens.notebook(B, answers))
    specimens.submit(data, "ipython", B, ipython_notebook())
    specimens.submit(data, "bom", B, raw=b"\xef\xbb\xbf" + json.dumps(specimens.honest(B)).encode())
    inbox = data.parent / f"{data.name}-inbox" / unicodedata.normalize("NFD", ZOE) / B
    inbox.mkdir(parents=True)
    (inbox / f"{B}.ipynb").write_text(json.dumps(specimens.honest(B)))
    collected = sorted(collect(inbox.parent.parent, [B]).found)
    honest = json.dumps(specimens.honest(B))
    nested = "[" * 100_000 + "]" * 100_000
    specimens.submit(data, "nested", B, raw=honest.replace('"metadata": {', f'"metadata": {{"deep": {nested}, ', 1).encode())
    crowded = specimens.honest(B)
    crowded.cells += [{"cell_type": "raw", "metadata": {}, "source": ""}] * 250_000
    specimens.submit(data, "crowded", B, raw=json.dumps(crowded).encode())
    specimens.submit(data, "bad_json", B, raw=b'{"cells": [')

    opts = Options(assignments=[B], workers=2, cell_timeout=60, progress=False,
                   limits=Limits(wall_s=300, cpu_s=300))  # the default memory: a CUDA build of torch maps 3.2 GB
    results = grade_all(opts)
    write_feedback(results)
    export(opts.db_url, data / "exports")
    report.write_report(report.build_report(report.load(opts.db_url, [B])), data / "report", opts.db_url)
    return {"results": {r["student"]: r for r in results}, "summary": summary(results), "sources": sources,
            "collected": collected}


def pages(data: Path) -> dict[str, str]:
    """Every page the batch left, by path: result files, feedback, export, class report."""
    found = {}
    for folder in ("results", "feedback", "exports", "report"):
        for path in sorted((data / folder).rglob("*")) if (data / folder).is_dir() else []:
            if path.is_file() and path.suffix in (".json", ".html", ".csv"):
                found[path.relative_to(data).as_posix()] = path.read_text(encoding="utf-8")
    return found
