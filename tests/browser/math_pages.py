"""What the docs-site and feedback-page tests share: a folder served on
loopback, a page that may not reach another host, and the detectors of
typeset math, raw TeX and MathJax's errors in a notebook's markdown
(class jp-RenderedMarkdown on both kinds of page)."""
from __future__ import annotations

import contextlib
import re
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlparse

import pytest

LOOPBACK = {"127.0.0.1", "localhost"}


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@contextlib.contextmanager
def served(folder: Path):
    """The URL (ending in /) of `folder` served over HTTP on loopback, until the block ends."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_QuietHandler, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        thread.join()


def refuse_other_hosts(page):
    """Refuse every request `page` makes to another host; page.left_loopback lists them."""
    page.left_loopback = []

    def route(r):
        url = urlparse(r.request.url)
        if url.scheme in ("http", "https", "ws", "wss") and url.hostname not in LOOPBACK:
            page.left_loopback.append(r.request.url)
            r.abort()
        else:
            r.continue_()
    page.route("**/*", route)
    return page


@pytest.fixture
def offline_page(page):
    """The browser page with every request to another host refused; page.left_loopback lists them."""
    return refuse_other_hosts(page)


def wait_for_math(page) -> None:
    """Until MathJax has loaded and finished the typesetting it queued at start-up."""
    page.wait_for_function("() => window.MathJax && window.MathJax.isReady === true")
    page.evaluate("() => new Promise(done => MathJax.Hub.Queue(() => done(true)))")


# In a notebook's markdown cells, outside code: text MathJax should have replaced.
RAW_MATH = """() => [...document.querySelectorAll('.jp-RenderedMarkdown')].map(cell => {
    const copy = cell.cloneNode(true);
    copy.querySelectorAll('code, pre, script, .MathJax, .MathJax_Display, .MathJax_Preview').forEach(e => e.remove());
    return copy.textContent;
}).join('\\n')"""
TYPESET = "() => document.querySelectorAll('.jp-RenderedMarkdown .MathJax').length"
# MathJax's own errors: a box for a script that failed, and in typeset math a TeX
# error (noErrors: <merror>) or an undefined macro (noUndefined: drawn in red)
MATH_ERRORS = """() => [...document.querySelectorAll('.MathJax_Error, .MathJax')]
    .filter(e => e.classList.contains('MathJax_Error') || /merror|mathcolor="red"/.test(e.getAttribute('data-mathml') || ''))
    .map(e => e.textContent)"""
# what a reader would call raw TeX: a $$, or $...$ around something (not a lone dollar in a sentence)
RAW_TEX = re.compile(r"\$\$|\$[^$\s][^$]*\$")
# a TeX escape whose backslash the reader sees (in typeset math too: MathJax draws it as text)
VISIBLE_ESCAPES = r"() => document.body.innerText.match(/\\[_%&#]/g) || []"
