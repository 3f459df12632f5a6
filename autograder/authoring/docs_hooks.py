"""MkDocs hooks (mkdocs.yml `hooks:`): the site's home page is README.md and
its notebook pages are the release notebooks of notebooks/, read where they
are, so neither is copied into docs/ and neither can drift from it. Only the
release notebooks are added: never solutions/, which hold the answers and the
hidden tests.

Three more things the plugins do not do for this site:
- math: MathJax is copied into the site (assets/mathjax/) by
  autograder.mathjax, which the feedback pages share, so a page loads
  nothing from another host; autograder/mathjax-config.js (served as
  assets/javascripts/mathjax-config.js) configures it for every page. mkdocs-jupyter's own MathJax tag (an empty src since 0.24.8)
  is taken out of the notebook pages;
- the notebook pages' table of contents is rebuilt from the headings of the
  rendered page (mkdocs-jupyter drops code spans from the headings it lists,
  so "Exercise 1: `swiglu`" became a link to #exercise-1, which no heading has);
- every in-page link of every page (table of contents included) must land on
  an element: one that does not is a warning, which `mkdocs build --strict`
  (make docs) turns into an error.
"""
from __future__ import annotations

import html
import logging
import re
from pathlib import Path

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files
from mkdocs.structure.toc import get_toc

from autograder import mathjax

ROOT = Path(__file__).resolve().parents[2]
RELEASE_DIR = ROOT / "notebooks"
# the assignments are the release folders NN_name/NN_name.ipynb (a learner's
# notebooks/mylm/ or checkpoints are not pages)
NOTEBOOK = re.compile(r"^\d\d_[a-z0-9_]+$")
MATHJAX_DEST = "assets/mathjax"
MATHJAX_CONFIG_DEST = "assets/javascripts/mathjax-config.js"  # mkdocs.yml's extra_javascript
MKDOCS_JUPYTER_MATHJAX = re.compile(r"<!-- Load mathjax -->.*?<!-- End of mathjax configuration -->", re.S)
HEADING = re.compile(r'<h([1-6]) id="([^"]+)"[^>]*>(.*?)</h\1>', re.S)
ANCHOR_LINK = re.compile(r'<a class="anchor-link"[^>]*>.*?</a>', re.S)
IN_PAGE_LINK = re.compile(r'href="#([^"]+)"')
TARGET = re.compile(r'\b(?:id|name)="([^"]+)"')

log = logging.getLogger("mkdocs.hooks.tinylm_docs")


def release_notebooks() -> list[Path]:
    return sorted(p / f"{p.name}.ipynb" for p in RELEASE_DIR.iterdir() if NOTEBOOK.match(p.name) and (p / f"{p.name}.ipynb").is_file())


def readme_as_home_page(text: str) -> str:
    """README.md links into docs/ as a file in the repository's root does;
    the site's home page sits inside docs/."""
    return re.sub(r"\]\(docs/", "](", text)


def mathjax_files() -> dict[str, Path]:
    """site path -> installed file, for the MathJax the site serves itself and its configuration."""
    try:
        files = {f"{MATHJAX_DEST}/{rel}": path for rel, path in mathjax.mathjax_files().items()}
    except mathjax.MathJaxUnavailable as err:
        raise SystemExit(f"the docs need MathJax: {err}") from err
    return {**files, MATHJAX_CONFIG_DEST: mathjax.CONFIG_JS}


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
    for dest, source in mathjax_files().items():
        files.append(File.generated(config, dest, abs_src_path=str(source)))
    return files


def on_page_markdown(markdown: str, page, config, files) -> str:
    # docs/*.md link to the README as ../README.md (right on GitHub); on the site it is the home page
    return markdown.replace("](../README.md", "](index.md")


def heading_text(inner_html: str) -> str:
    """A heading's text as the reader sees it: tags dropped (code spans keep their text), the ¶ link left out."""
    return html.unescape(re.sub(r"<[^>]+>", "", ANCHOR_LINK.sub("", inner_html))).strip()


def toc_tokens(page_html: str) -> list[dict]:
    """The table of contents of a rendered page, nested by heading level, each
    entry pointing at the id its heading has."""
    root: list[dict] = []
    stack: list[dict] = []
    for level, anchor, inner in HEADING.findall(page_html):
        token = {"level": int(level), "id": anchor, "name": heading_text(inner), "children": []}
        while stack and stack[-1]["level"] >= token["level"]:
            stack.pop()
        (stack[-1]["children"] if stack else root).append(token)
        stack.append(token)
    return root


def is_notebook_page(page) -> bool:
    return page.file.src_uri.endswith(".ipynb")


def on_page_content(content: str, page, config, files) -> str:
    if not is_notebook_page(page):
        return content
    page.toc = get_toc(toc_tokens(content))
    return MKDOCS_JUPYTER_MATHJAX.sub("", content)


def links_without_target(page_html: str) -> list[str]:
    """The in-page links (href="#...") of a page that no element's id (or an anchor's name) answers."""
    targets = set(TARGET.findall(page_html))
    return sorted({html.unescape(a) for a in IN_PAGE_LINK.findall(page_html)} - {html.unescape(t) for t in targets})


def on_post_page(output: str, page, config) -> str:
    for anchor in links_without_target(output):
        log.warning(f"{page.file.src_uri}: the in-page link #{anchor} has no element with that id")
    return output
