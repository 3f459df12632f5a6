"""The course as an instructor runs it: JupyterHub (PAM logins, one Unix
user per person, each server running as its user) with nbgrader's exchange,
an instructor and two students, driven in Chromium.

The instructor releases notebook 01 from the formgrader; each student logs
in, fetches it from the Assignments tab, types the answers (student 1 the
reference answers, student 2 with embed's ids shifted by one), validates
and submits; student 2 then tries the exchange's three attacks (a submission
whose notebook links to the reference solution, one that links to student
1's submission, a folder named after student 1 holding a blank notebook);
the instructor collects from the formgrader (the course's intake refuses
the three and reports them, and nobody's points change), grades with
`python -m autograder grade` (as root, as docs/instructors.md says),
writes the feedback and releases it from the formgrader; each student
fetches the feedback and reads their score, student 2 the named bug.
Past the due date the instructor runs `release-solutions` in a terminal
(through the exchange) and a student fetches the solution notebook with
nbgrader: no hidden test in it.

Screenshots of every step: artifacts/hub/<run>/ (the path is printed).
Run time: 2 min 54 s and 4 min 25 s in two runs on 2 cores shared with
other work (three Lab servers, two graded submissions). Needs root (it creates and removes the users), Chromium, and
configurable-http-proxy in .node/ (.ci/run installs it); skips with the
reason otherwise.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from autograder.notebook_format import HIDDEN_BLOCK, read

from ..browser.lab import CELLS, NotebookPage, answers, cell_count
from ..browser.test_learner import RIGHT_LOOKUP, SHIFT_DIAGNOSIS, WRONG_LOOKUP
from .course_hub import ROOT, CourseHub, User, why_not_runnable

pytestmark = [pytest.mark.hub, pytest.mark.grader, pytest.mark.slow, pytest.mark.long]

NB = "01_embeddings"
ANSWERS = answers(NB)
N_CELLS = cell_count(NB)
ARTIFACTS = ROOT / "artifacts" / "hub"
LOGIN_TIMEOUT_MS = 240_000  # the hub starts the user's server on first login


def _points() -> dict[str, float]:
    nb = json.loads((ROOT / "notebooks" / NB / f"{NB}.ipynb").read_text())
    return {c["metadata"]["nbgrader"]["grade_id"]: c["metadata"]["nbgrader"]["points"]
            for c in nb["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("grade")}


def _cannot_run(reason: str):
    """Skip with the reason; fail instead under TINYLM_REQUIRE_HUB=1 (.ci/run sets it once npm installed the proxy)."""
    if os.environ.get("TINYLM_REQUIRE_HUB") == "1":
        pytest.fail(f"hub test required (TINYLM_REQUIRE_HUB=1) but {reason}", pytrace=False)
    pytest.skip(f"hub test skipped: {reason}")


@pytest.fixture(scope="module")
def hub():
    reason = why_not_runnable()
    if reason:
        _cannot_run(reason)
    h = CourseHub(ARTIFACTS)
    folder = h.artifacts
    # Where this run's screenshots go (shown with -s, -rA, or when the test fails).
    print(f"\nhub test artifacts (screenshots, hub log): {folder}")
    try:
        h.create_users()
        h.make_exchange()
        h.install_course()
        h.robot_settings()
        reason = h.python_for_users()
        if reason:
            _cannot_run(reason)
        # The instructor's one-time set-up: notebooks/ generated, assignments in the gradebook.
        h.as_user(h.instructor, str(h.bin / "python"), "-m", "autograder", "release", cwd=h.course)
        h.start()
        yield h
    finally:
        h.stop()
        h.remove(keep_logs=folder)


class Person:
    """One user's browser session on the hub; screenshots numbered across the whole run."""

    counter = 0

    def __init__(self, browser, hub: CourseHub, user: User):
        self.hub, self.user = hub, user
        self.context = browser.new_context(viewport={"width": 1400, "height": 900})
        self.context.set_default_timeout(120_000)
        self.page = self.context.new_page()

    def shot(self, step: str) -> None:
        Person.counter += 1
        path = self.hub.artifacts / f"{Person.counter:02d}-{self.user.name.split('-')[0]}-{step}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(path))

    def url(self, path: str) -> str:
        return f"{self.hub.url}/user/{self.user.name}/{path.lstrip('/')}"

    def log_in(self) -> None:
        """The hub's login form with the Unix password; the hub starts the server and opens Lab."""
        self.page.goto(f"{self.hub.url}/hub/login")
        self.page.fill("#username_input", self.user.name)
        self.page.fill("#password_input", self.user.password)
        self.shot("login")
        self.page.click("#login_submit")
        self.page.wait_for_url(re.compile(rf".*/user/{re.escape(self.user.name)}/lab.*"), timeout=LOGIN_TIMEOUT_MS)
        self.page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Nbgrader$")).wait_for()

    def formgrader_action(self, column: str, expected: str) -> str:
        """Click the icon in `column` (release, collect, release-feedback) of
        notebook 01's row in Manage Assignments; return the dialog's text."""
        self.page.goto(self.url("formgrader"))
        row = self.page.locator("tr", has=self.page.get_by_role("link", name=NB, exact=True))
        row.locator(f"td.{column} a").click()
        dialog = self.page.locator(".modal-dialog")
        dialog.wait_for()
        # Bootstrap fades and slides the dialog in: screenshot it once it has arrived.
        self.page.wait_for_function("""() => {
            const modal = document.querySelector('.modal.in'), box = modal && modal.querySelector('.modal-dialog');
            return box !== null && getComputedStyle(modal).opacity === '1'
                && ['none', 'matrix(1, 0, 0, 1, 0, 0)'].includes(getComputedStyle(box).transform);
        }""")
        self.shot(column)
        text = dialog.inner_text()
        assert expected in text, f"formgrader {column} did not succeed:\n{text}\n{self.hub.log_tail()}"
        dialog.get_by_role("button", name="OK").click()
        return text

    def assignments_tab(self):
        self.page.goto(self.url("lab"))
        self.page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Nbgrader$")).click()
        self.page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Assignment List$")).click()
        panel = self.page.locator("#released_assignments_list")
        panel.wait_for()
        return self.page


def student_has_no_instructor_tools(person: Person) -> None:
    """The shipped student config switches the formgrader and Create
    Assignment off, and the course folder hides the answers."""
    page = person.page
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Nbgrader$")).click()
    items = [t.strip() for t in page.locator(".lm-Menu-itemLabel").all_inner_texts() if t.strip()]
    page.keyboard.press("Escape")
    assert "Assignment List" in items and "Formgrader" not in items, f"a student's Nbgrader menu: {items}"
    response = page.request.get(person.url("formgrader"))
    assert response.status == 404, f"a student's server serves the formgrader (HTTP {response.status})"
    solution = person.hub.course / "solutions" / NB / f"{NB}.ipynb"
    with pytest.raises(RuntimeError, match="Permission denied"):
        person.hub.as_user(person.user, "cat", str(solution))


def student_works(person: Person, typed: dict[int, str]) -> str:
    """Fetch, open, type the answers, save, Validate, submit; return Validate's text."""
    page = person.assignments_tab()
    page.locator("#released_assignments_list .list_item", has_text=NB).get_by_role("button", name="Fetch").click()
    fetched = page.locator("#fetched_assignments_list .list_item", has_text=NB).first
    fetched.wait_for()
    person.shot("fetched")
    notebook = person.user.home / NB / f"{NB}.ipynb"
    assert notebook.is_file(), f"Fetch did not put {NB} into the student's home: {list(person.user.home.iterdir())}"

    fetched.locator("a.assignment-notebooks-link").click()
    page.locator(f"#nbgrader-tinylm-{NB} .nested_list_item a", has_text=NB).click()
    nb = NotebookPage(page, N_CELLS)
    page.wait_for_function(f"() => document.querySelectorAll('{CELLS}').length === {N_CELLS}", timeout=240_000)
    nb.wait_idle()
    for index, text in typed.items():
        nb.type_into(index, text)
    person.shot("answers-typed")
    nb.save(notebook)
    on_disk = [c["source"] if isinstance(c["source"], str) else "".join(c["source"])
               for c in json.loads(notebook.read_text())["cells"]]
    assert all(on_disk[i] == t for i, t in typed.items()), "what was typed is not what the notebook holds"
    dialog = nb.validate()
    text = dialog.inner_text()
    person.shot("validated")
    dialog.get_by_role("button", name=re.compile("OK|Close|Dismiss", re.I)).first.click()

    page = person.assignments_tab()
    page.locator("#fetched_assignments_list .list_item", has_text=NB).get_by_role("button", name="Submit").first.click()
    page.locator("#submitted_assignments_list .list_item", has_text=NB).first.wait_for()
    person.shot("submitted")
    return text


def student_reads_feedback(person: Person) -> str:
    """Fetch Feedback in the Assignments tab, follow "(view feedback)" to
    the folder it brought, open the page in Lab; return the page's text."""
    page = person.assignments_tab()
    submitted = page.locator("#submitted_assignments_list")
    submitted.get_by_role("button", name="Fetch Feedback").first.click()
    view = submitted.get_by_text("(view feedback)")
    view.wait_for()
    person.shot("feedback-fetched")
    pages = list((person.user.home / NB / "feedback").glob(f"*/{NB}.html"))
    assert len(pages) == 1, f"Fetch Feedback should bring one page into ~/{NB}/feedback/<time>/: {pages}"
    view.click()  # the file browser goes to the feedback folder
    page.locator(".jp-DirListing-item", has_text=f"{NB}.html").dblclick()
    feedback = page.frame_locator(".jp-HTMLViewer iframe")
    feedback.get_by_text(f"Feedback: {NB}").wait_for()
    person.shot("feedback")
    # Lab's viewer runs no script of the page: the notebook's math is the page's own MathML
    assert feedback.locator(".jp-RenderedMarkdown math").count() > 0, "no MathML in the feedback page"
    prose = "\n".join(feedback.locator(".jp-RenderedMarkdown").all_inner_texts())
    assert not re.findall(r"\\(?:mathrm|frac|text)\b", prose), "TeX left in the feedback page's prose"
    text = feedback.locator("body").inner_text()
    if SHIFT_DIAGNOSIS in text:  # student 2: scroll to where the page names the bug
        feedback.get_by_text(SHIFT_DIAGNOSIS).first.scroll_into_view_if_needed()
        person.shot("feedback-diagnosis")
    return text


def exchange_attacks(hub: CourseHub, honest: User, attacker: User) -> list[str]:
    """The attacker's three folders in the exchange's inbound, made as that
    user, each newer than every real submission: their names."""
    inbound = hub.exchange / "tinylm" / "inbound"
    theirs = next(inbound.glob(f"{honest.name}+{NB}+*"))
    stamp = "2099-01-01 00:00:00.000000 UTC"
    attacks = {f"{attacker.name}+{NB}+{stamp}+linkref": hub.course / "solutions" / NB / f"{NB}.ipynb",
               f"{attacker.name}+{NB}+{stamp}+linkpeer": theirs / f"{NB}.ipynb",
               f"{honest.name}+{NB}+{stamp}+impostor": None}
    blank = hub.course / "notebooks" / NB / f"{NB}.ipynb"
    for name, target in attacks.items():
        folder = inbound / name
        make = f"cp {blank!s} '{folder}/{NB}.ipynb'" if target is None else f"ln -s '{target}' '{folder}/{NB}.ipynb'"
        hub.as_user(attacker, "bash", "-c", f"mkdir '{folder}' && {make}")
    return list(attacks)


def test_a_class_on_the_hub_releases_submits_grades_and_returns_feedback(browser, hub):
    points = _points()
    embed = next(a for a in ANSWERS if a.function == "embed")
    assert RIGHT_LOOKUP in embed.text, "the reference embed changed: update RIGHT_LOOKUP in tests/browser/test_learner.py"
    right = {a.index: a.text for a in ANSWERS}
    wrong = {**right, embed.index: embed.text.replace(RIGHT_LOOKUP, WRONG_LOOKUP)}
    instructor = Person(browser, hub, hub.instructor)
    students = [Person(browser, hub, s) for s in hub.students]
    try:
        the_class_runs(hub, instructor, students, points, right, wrong)
    except BaseException:
        for person in (instructor, *students):
            person.shot("FAILED")  # what each screen showed when the test failed
        raise


def the_class_runs(hub, instructor, students, points, right, wrong):
    max_score = sum(points.values())

    # 1. The instructor releases notebook 01 to the exchange from the formgrader.
    instructor.log_in()
    instructor.page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Nbgrader$")).click()
    assert "Formgrader" in instructor.page.locator(".lm-Menu-itemLabel").all_inner_texts()
    instructor.page.keyboard.press("Escape")
    instructor.formgrader_action("release", f"Successfully released '{NB}'")
    assert (hub.exchange / "tinylm" / "outbound" / NB / f"{NB}.ipynb").is_file()

    # 2. Each student fetches, answers, validates and submits.
    reports = []
    for person, typed in zip(students, (right, wrong)):
        person.log_in()
        student_has_no_instructor_tools(person)
        reports.append(student_works(person, typed))
    assert "Success! Your notebook passes all the tests." in reports[0], reports[0]
    assert "check_embed(embed)" in reports[1] and SHIFT_DIAGNOSIS in reports[1], \
        f"Validate did not name student 2's bug:\n{reports[1]}"

    # 2b. Student 2 attacks the exchange, as nbgrader's own Collect allowed: newer folders in inbound
    #     (writable by every student) that link to the reference solution and to student 1's submission,
    #     and one named after student 1.
    attacks = exchange_attacks(hub, *hub.students)

    # 3. The instructor collects from the formgrader: nbgrader's layout is the grader's, through the
    #    course's intake, which refuses the three attacks and reports them.
    collected = instructor.formgrader_action("collect", f"Successfully collected submissions of '{NB}'")
    submitted = hub.course / ".course" / "submitted"
    assert sorted(p.name for p in submitted.iterdir() if p.is_dir()) == sorted(s.name for s in hub.students)
    refused = (hub.course / ".course" / "exchange-intake.log").read_text()
    for name in attacks:
        assert name in refused, f"the attack {name} was not refused and reported:\n{refused}\n{collected}"
    reference = (hub.course / "solutions" / NB / f"{NB}.ipynb").read_bytes()
    for student in hub.students:
        assert (submitted / student.name / NB / f"{NB}.ipynb").read_bytes() != reference

    # 4. Grading and feedback pages with the course's grader, as root in the course folder.
    env = {"PATH": f"{sys.prefix}/bin:/usr/bin:/bin", "PYTHONPATH": str(hub.course), "OMP_NUM_THREADS": "1"}
    for args in (["grade", NB, "--workers", "2", "--no-progress"], ["feedback", NB]):
        proc = subprocess.run([sys.executable, "-m", "autograder", *args], cwd=hub.course, env=env,
                              capture_output=True, text=True, timeout=900)
        (hub.artifacts / f"autograder-{args[0]}.log").write_text(proc.stdout + proc.stderr)
        assert proc.returncode == 0, f"python -m autograder {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"
    results = {s.name: json.loads((hub.course / ".course" / "results" / NB / f"{s.name}.json").read_text())
               for s in hub.students}
    expected = {hub.students[0].name: max_score, hub.students[1].name: max_score - points["check_embed"]}
    assert {n: r["score"] for n, r in results.items()} == expected, json.dumps(results, indent=1)[:3000]

    # 5. The instructor releases the feedback from the formgrader.
    instructor.formgrader_action("release-feedback", f"Successfully released feedback of '{NB}'")

    # 6. Each student fetches the feedback and reads their score.
    texts = [student_reads_feedback(person) for person in students]
    for person, text in zip(students, texts):
        score = expected[person.user.name]
        assert re.search(rf"Score:\s*{score:g}\s*/\s*{max_score:g}", text), f"{person.user.name}'s feedback:\n{text[:2000]}"
    assert SHIFT_DIAGNOSIS not in texts[0], "student 1's feedback names a bug they did not make"
    assert SHIFT_DIAGNOSIS in texts[1], f"student 2's feedback does not name the bug:\n{texts[1][:3000]}"

    # 7. Past the due date, the instructor releases the solutions through the exchange (a terminal on
    #    the hub); a student fetches them with nbgrader: the answers, no hidden test.
    deadlines_file = hub.course / ".course" / "deadlines.toml"
    deadlines_file.write_text(f"[due]\n{NB} = 2026-01-01T00:00:00Z\n[late]\npolicy = \"zero\"\n")
    os.chown(deadlines_file, hub.instructor.uid, -1)
    released = hub.as_user(hub.instructor, str(hub.bin / "python"), "-m", "autograder", "release-solutions", NB,
                           cwd=hub.course).stdout
    assert f"outbound/{NB}_solution" in released, released
    student = hub.students[0]
    hub.as_user(student, str(hub.bin / "python"), "-m", "nbgrader", "fetch_assignment", f"{NB}_solution",
                "--course", "tinylm")
    fetched = (student.home / f"{NB}_solution" / f"{NB}.ipynb").read_text()
    hidden = [line.strip() for c in read(ROOT / "solutions" / NB / f"{NB}.ipynb").cells
              for block in HIDDEN_BLOCK.findall(c.source) for line in block.splitlines() if len(line.strip()) >= 12]
    assert hidden and not [line for line in hidden if line in fetched], "a hidden test reached the students"
    assert "BEGIN SOLUTION" not in fetched and RIGHT_LOOKUP in fetched
