"""Two nbgrader preprocessors that run after Execute during `grade`.

- StderrIsNotFailure: stock nbgrader scores a test cell zero when anything
  reached stderr, so a correct answer that triggers a library warning loses
  its points. Failure must come from an exception: stderr text is kept,
  relabelled as stdout with a "[stderr]" prefix.
- CapOutputBytes: stock LimitOutput counts lines only, so one 100 MB line is
  kept in the autograded notebook, the gradebook and the feedback. This caps
  every cell's outputs in bytes.
"""
from __future__ import annotations

import json

from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Integer

TRUNCATED = "\n... output truncated by the grader: {n} bytes over the {cap}-byte limit ...\n"


class StderrIsNotFailure(NbGraderPreprocessor):
    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code":
            for out in cell.get("outputs", []):
                if out.get("output_type") == "stream" and out.get("name") == "stderr":
                    out["name"] = "stdout"
                    out["text"] = "".join(f"[stderr] {line}" for line in out["text"].splitlines(True))
        return cell, resources


class CapOutputBytes(NbGraderPreprocessor):
    max_bytes = Integer(64 * 1024, help="most bytes of output kept per cell").tag(config=True)

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code":
            return cell, resources
        budget, kept = self.max_bytes, []
        for out in cell.get("outputs", []):
            size = len(json.dumps(out))
            if size <= budget:
                kept.append(out)
                budget -= size
                continue
            if out.get("output_type") == "stream":  # keep the head of the text
                out["text"] = out["text"][: max(budget - 200, 0)] + TRUNCATED.format(n=size - budget, cap=self.max_bytes)
                kept.append(out)
            elif out.get("output_type") == "error":  # the verdict needs the error: keep its name and a short message
                out["evalue"] = str(out.get("evalue", ""))[:2000]
                out["traceback"] = [t[:2000] for t in out.get("traceback", [])[-5:]]
                kept.append(out)
            else:
                kept.append({"output_type": "stream", "name": "stdout",
                             "text": TRUNCATED.format(n=size - budget, cap=self.max_bytes)})
            budget = 0
        cell["outputs"] = kept
        return cell, resources


def autograde_preprocessors() -> list[str]:
    """nbgrader's own list with ours inserted right after Execute."""
    return ["nbgrader.preprocessors.Execute", "autograder.preprocessors.StderrIsNotFailure",
            "autograder.preprocessors.CapOutputBytes", "nbgrader.preprocessors.IgnorePattern",
            "nbconvert.preprocessors.ClearMetadataPreprocessor", "nbgrader.preprocessors.LimitOutput",
            "nbgrader.preprocessors.SaveAutoGrades", "nbgrader.preprocessors.AssignLatePenalties",
            "nbgrader.preprocessors.CheckCellMetadata"]
