"""MkDocs hooks (mkdocs.yml `hooks:`): the site's home page is README.md and
its notebook pages are the release notebooks of notebooks/, read where they
are, so neither is copied into docs/ and neither can drift from it. Only the
release notebooks are added: never solutions/, which hold the answers and the
hidden tests."""
from __future__ import annotations

import re
from pathlib import Path

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
RELEASE_DIR = ROOT / "notebooks"
# the assignments are the release folders NN_name/NN_name.ipynb (a learner's
# notebooks/mylm/ or checkpoints are not pages)
NOTEBOOK = re.compile(r"^\d\d_[a-z0-9_]+$")


def release_notebooks() -> list[Path]:
    return sorted(p / f"{p.name}.ipynb" for p in RELEASE_DIR.iterdir() if NOTEBOOK.match(p.name) and (p / f"{p.name}.ipynb").is_file())


def readme_as_home_page(text: str) -> str:
    """README.md links into docs/ as a file in the repository's root does;
    the site's home page sits inside docs/."""
    return re.sub(r"\]\(docs/", "](", text)


# before mkdocs-jupyter's on_files (priority 0), which turns .ipynb files into pages
@event_priority(100)
def on_files(files: Files, config) -> Files:
    home = (ROOT / "README.md").read_text(encoding="utf-8")
    files.append(File.generated(config, "index.md", content=readme_as_home_page(home)))
    for notebook in release_notebooks():
        # a File read from the repository root (not File.generated: mkdocs-jupyter
        # finds a notebook's path from src_dir, which a generated file lacks)
        files.append(File(notebook.relative_to(ROOT).as_posix(), src_dir=str(ROOT), dest_dir=config["site_dir"],
                          use_directory_urls=config["use_directory_urls"]))
    return files


def on_page_markdown(markdown: str, page, config, files) -> str:
    # docs/*.md link to the README as ../README.md (right on GitHub); on the site it is the home page
    return markdown.replace("](../README.md", "](index.md")
