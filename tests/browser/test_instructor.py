"""An instructor opens the formgrader from JupyterLab's Nbgrader menu and
sees the course's assignments."""
from __future__ import annotations

import re

from .lab import BROWSER, ROOT

pytestmark = BROWSER


def test_instructor_opens_the_formgrader(page, instructor_server):
    assignments = sorted(p.name for p in (ROOT / "solutions").iterdir() if p.is_dir())
    assert assignments, "no assignments in solutions/"
    page.goto(instructor_server.page_url("lab"))
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Nbgrader$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Formgrader$")).click()

    # The formgrader opens in a Lab tab, inside an iframe.
    frame = page.frame_locator("iframe").first
    frame.get_by_role("heading", name="Manage Assignments").first.wait_for()
    table = frame.locator("#main-table, table").first
    for name in assignments:
        table.get_by_text(name, exact=True).wait_for()  # rows load after the page
    page.shots("formgrader")
    rows = table.inner_text()
    assert "Loading, please wait" not in rows, f"the formgrader never loaded its table:\n{rows}"
    for name in assignments:
        assert re.search(rf"^{name}\s", rows, re.M), f"assignment {name} is not listed:\n{rows}"

    # Its own page too: under JupyterHub >= 4.1 the iframe is blocked and instructors use this URL.
    page.goto(instructor_server.page_url("formgrader"))
    page.get_by_text(assignments[0], exact=True).wait_for()
    page.shots("formgrader-own-page")
