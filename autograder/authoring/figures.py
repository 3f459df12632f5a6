"""The README's picture is a figure a committed reference notebook drew:
written from that notebook's output, byte for byte, so it changes exactly
when the notebook is rebuilt (`make figures`; tests/course/test_docs.py fails when
the committed PNG differs from the notebook's)."""
from __future__ import annotations

import argparse
import base64
from dataclasses import dataclass
from pathlib import Path

import nbformat

from autograder import course

IMAGES = course.ROOT / "docs" / "images"


@dataclass(frozen=True)
class Figure:
    file: str            # under docs/images/
    assignment: str      # the reference notebook in solutions/
    cell_contains: str   # a line of the cell that draws it (a figure cell, not an answer)


FIGURES = (
    Figure("training.png", "09_training", 'ax.plot(history["val_step"], history["val_loss"]'),
)


def figure_png(figure: Figure) -> bytes:
    """The first PNG output of the cell whose source contains `cell_contains`."""
    nb = nbformat.read(course.source_notebook(figure.assignment), as_version=4)
    cells = [c for c in nb.cells if c.cell_type == "code" and figure.cell_contains in c.source]
    if len(cells) != 1:
        raise LookupError(f"{figure.file}: {len(cells)} cells of {figure.assignment} contain {figure.cell_contains!r}; "
                          "expected exactly one: update FIGURES in autograder/authoring/figures.py")
    for output in cells[0].get("outputs", []):
        if "image/png" in output.get("data", {}):
            return base64.b64decode(output["data"]["image/png"])
    raise LookupError(f"{figure.file}: that cell of {figure.assignment} has no PNG output: rebuild the notebook "
                      f"(python -m autograder build {figure.assignment})")


def stale_figures() -> list[str]:
    return [f.file for f in FIGURES if not (IMAGES / f.file).is_file() or (IMAGES / f.file).read_bytes() != figure_png(f)]


def write_figures() -> None:
    IMAGES.mkdir(parents=True, exist_ok=True)
    for figure in FIGURES:
        (IMAGES / figure.file).write_bytes(figure_png(figure))
        print(f"docs/images/{figure.file}  <- solutions/{figure.assignment} ({figure.cell_contains!r})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a committed figure differs from its notebook")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_figures()
        for name in stale:
            print(f"docs/images/{name} differs from its notebook's output: run `make figures`")
        return 1 if stale else 0
    write_figures()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
