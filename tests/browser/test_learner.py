"""A learner works through notebook 01 in the browser: fills in the answers,
runs everything, breaks an answer, and uses nbgrader's Validate button in
JupyterLab and in Notebook 7."""
from __future__ import annotations

import re

from .lab import BROWSER, NotebookPage, answers, cell_count, check_cells, saved_sources

pytestmark = BROWSER

NB = "01_embeddings"
ANSWERS = answers(NB)
CHECKS = check_cells(NB)
N_CELLS = cell_count(NB)
SETUP_CELL = 1
# A wrong embed that the check knows by name: ids shifted by one.
RIGHT_LOOKUP, WRONG_LOOKUP = "return weight[ids]", "return weight[(ids + 1) % weight.shape[0]]"
SHIFT_DIAGNOSIS = "Likely bug: token ids shifted by +1"


def fill_all_answers(nb: NotebookPage) -> None:
    for a in ANSWERS:
        nb.type_into(a.index, a.text)


def assert_saved_answers(path, expected: dict[int, str]) -> None:
    """What the browser typed is what the file holds: the UI really edited the notebook."""
    sources = saved_sources(path)
    for index, text in expected.items():
        assert sources[index] == text, f"cell {index} on disk differs from what was typed:\n{sources[index]!r}"


def test_learner_fills_in_the_answers_runs_all_and_every_check_passes(page, learner_server, fresh_notebook):
    path, rel = fresh_notebook(NB)
    nb = NotebookPage(page, N_CELLS).open(learner_server.page_url(f"lab/tree/{rel}"))
    page.shots("opened")
    assert "raise NotImplementedError()" in nb.cell(ANSWERS[0].index).inner_text(), "the release notebook should show stubs"

    fill_all_answers(nb)
    nb.cell(ANSWERS[-1].index).scroll_into_view_if_needed()
    page.shots("answers-filled")
    nb.save(path)
    assert_saved_answers(path, {a.index: a.text for a in ANSWERS})

    nb.run_all_from_menu()
    prompts = nb.code_prompts()
    assert all(re.fullmatch(r"\[\d+\]:", p) for p in prompts), f"not every code cell ran: {prompts}"
    for (index, source), a in zip(CHECKS, ANSWERS):
        out = nb.output(index)
        assert re.search(rf"^PASS {a.function}: (\d+)/\1 checks(; saved to mylm/\S+ \(.+\))?$", out, re.M), \
            f"check cell {index} ({source.splitlines()[0]}) did not pass:\n{out}"
        assert "FAIL" not in out, out
    nb.cell(CHECKS[0][0]).scroll_into_view_if_needed()
    page.shots("checks-passed")
    assert nb.error_outputs() == [], f"a cell raised or wrote to stderr:\n{nb.error_outputs()[0]}"


def test_learner_breaks_an_answer_and_sees_the_named_bug(page, learner_server, fresh_notebook):
    embed = next(a for a in ANSWERS if a.function == "embed")
    assert RIGHT_LOOKUP in embed.text, "the reference embed changed: update RIGHT_LOOKUP"
    broken = embed.text.replace(RIGHT_LOOKUP, WRONG_LOOKUP)
    check_index = next(i for i, src in CHECKS if src.startswith("check_embed("))

    path, rel = fresh_notebook(NB)
    nb = NotebookPage(page, N_CELLS).open(learner_server.page_url(f"lab/tree/{rel}"))
    nb.run_cell(SETUP_CELL)
    nb.type_into(embed.index, broken)
    nb.run_cell(embed.index)
    nb.run_cell(check_index)
    out = nb.output(check_index)
    nb.cell(check_index).scroll_into_view_if_needed()
    page.shots("named-diagnosis")
    assert "CheckFailed" in out, f"the broken embed should fail its check:\n{out}"
    assert "embed failed" in out and SHIFT_DIAGNOSIS in out, f"the check did not name the bug:\n{out}"
    assert re.search(r"ids \(2, 5\), weight \(11, 7\) +ok +ok +FAIL", out), f"no failing table row:\n{out}"

    # Validate before submitting: nbgrader re-runs the saved notebook on the server.
    nb.save(path)
    assert_saved_answers(path, {embed.index: broken})
    dialog = nb.validate()
    text = dialog.inner_text()
    page.shots("validate-failed")
    assert "The following cell failed" in text, text
    assert "check_embed(embed)" in text and SHIFT_DIAGNOSIS in text, f"Validate did not show the named bug:\n{text}"
    assert "Success" not in text


def test_learner_validates_a_finished_notebook_in_notebook7(page, learner_server, fresh_notebook):
    """The same course in the Notebook 7 interface: answers typed there, then Validate succeeds."""
    path, rel = fresh_notebook(NB)
    nb = NotebookPage(page, N_CELLS).open(learner_server.page_url(f"notebooks/{rel}"))
    assert page.locator("body[data-notebook='notebooks']").count() == 1, "this is not the Notebook 7 interface"
    page.shots("notebook7-opened")
    fill_all_answers(nb)
    nb.save(path)
    assert_saved_answers(path, {a.index: a.text for a in ANSWERS})
    dialog = nb.validate()
    text = dialog.inner_text()
    page.shots("notebook7-validate-passed")
    assert "Success! Your notebook passes all the tests." in text, f"Validate did not pass the solved notebook:\n{text}"
