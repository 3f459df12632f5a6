"""How text the learner controls leaves the grader: on a terminal
(printable), inside one of the grader's own messages (quoted), and on an
HTML page (sanitized, with the tags and attributes a page may keep). Every
string taken from a submission (a student id, a grade id, a file name, an
output, a message) passes through one of these before anyone reads it."""
from __future__ import annotations

import unicodedata

import nh3

# Tags a learner's markdown (and a whole page) may keep: nh3's defaults less
# images (a picture of a fake score is still a fake score) and image maps.
MARKDOWN_TAGS = set(nh3.ALLOWED_TAGS) - {"img", "map", "area"}
PAGE_ATTRIBUTES = {"*": {"class"}, "a": {"href", "title"}}


def printable(text) -> str:
    """A learner-controlled string (student id, grade id, file name, message)
    made safe to print on a terminal: control and format characters (carriage
    return, ANSI escape, bidi overrides) appear as escapes like \\r or \\x1b
    instead of moving the cursor or recolouring what was printed before."""
    return "".join(ch if unicodedata.category(ch)[0] != "C" else
                   ascii(ch)[1:-1] if ch in "\r\n\t" or ord(ch) > 0xFF else f"\\x{ord(ch):02x}"
                   for ch in str(text))


def quoted(text, limit: int = 60) -> str:
    """A string taken from a submission (a grade id, a file name) inside one
    of the grader's messages: framed in « », shortened, control characters
    escaped, so that on a page or a terminal it reads as a quotation of the
    learner's, never as the grader's own words (the pages escape it too)."""
    text = printable(text)
    return "«" + (text[:limit] + "…" if len(text) > limit else text) + "»"


def sanitized(body: str, attributes: dict[str, set[str]] = PAGE_ATTRIBUTES, tags: set[str] = MARKDOWN_TAGS) -> str:
    """The second pass over a page made of escaped parts: whatever slipped
    through the per-part escaping, no script, style or event handler
    survives (class is kept for the page's own CSS; learner markdown lost
    its classes when it was cleaned). The feedback pages (which add the
    MathML of their math) and the class report use it."""
    return nh3.clean(body, tags=tags, attributes=attributes)
