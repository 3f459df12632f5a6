"""The MathJax that typesets math on the docs site and on the feedback pages,
served from their own folders: nothing is loaded from another host.

The files come from the installed package jupyter-server-mathjax (Jupyter's
own copy of MathJax 2.7); mathjax-config.js, beside this module, configures
it for both, and is read before MathJax.js. Only what that configuration
loads is copied: the combined configuration TeX-AMS-MML_HTMLorMML-full, its
HTML-CSS output, the STIX-Web fonts (the only ones the package has) and the
extensions (Safe among them), not the 2 MB of translations, the
accessibility extensions or the SVG output (whose own scripts the package
lacks).
"""
from __future__ import annotations

import shutil
from pathlib import Path

CONFIG_JS = Path(__file__).with_name("mathjax-config.js")
PARTS = ("MathJax.js", "LICENSE", "config", "jax/input", "jax/element", "jax/output/HTML-CSS", "fonts", "extensions")
LEFT_OUT = ("extensions/a11y",)
INSTALL_HINT = "pip install jupyter-server-mathjax (a dependency of the course: pip install -e .)"


class MathJaxUnavailable(RuntimeError):
    """jupyter-server-mathjax is not installed."""


def mathjax_files() -> dict[str, Path]:
    """Path inside a MathJax folder (MathJax.js, config/..., fonts/...) -> installed file."""
    try:
        import jupyter_server_mathjax
    except ImportError as err:
        raise MathJaxUnavailable(f"MathJax's files are not installed: {INSTALL_HINT}") from err
    static = Path(jupyter_server_mathjax.__file__).parent / "static"
    files = {}
    for part in PARTS:
        path = static / part
        for f in ([path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())):
            rel = f.relative_to(static).as_posix()
            if not rel.startswith(LEFT_OUT):
                files[rel] = f
    return files


def copy_mathjax(folder: Path) -> None:
    """MathJax and its configuration (as CONFIG_JS's name) in `folder`: a file
    is copied when it is missing or its size differs, so a second call costs
    only the stats."""
    sources = {**mathjax_files(), CONFIG_JS.name: CONFIG_JS}
    for rel, source in sources.items():
        dest = folder / rel
        if not dest.is_file() or dest.stat().st_size != source.stat().st_size:
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, dest)
