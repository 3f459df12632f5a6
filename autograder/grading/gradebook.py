"""Where the gradebook lives, and the few gradebook operations the CLI needs.

SQLite in the git-ignored course data folder by default. A course server
points every command at PostgreSQL with `--db-url` or the environment
variable TINYLM_GRADEBOOK_URL, e.g.
postgresql+psycopg://grader:secret@localhost/tinylm (SQLAlchemy 2 needs the
psycopg 3 driver named explicitly).
"""
from __future__ import annotations

import logging
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

from .. import course
from .errors import GradingError

ENV_VAR = "TINYLM_GRADEBOOK_URL"
DATA_ENV_VAR = "TINYLM_COURSE_DATA"
COURSE_ID = "tinylm"


def data_dir() -> Path:
    """The course data folder (submissions, autograded copies, results,
    feedback, the SQLite gradebook): .course/ unless $TINYLM_COURSE_DATA
    names another (tests use a scratch folder)."""
    return Path(os.environ.get(DATA_ENV_VAR) or course.COURSE_DATA).resolve()


def folder(name: str) -> Path:
    return data_dir() / name


def db_url(explicit: str | None = None) -> str:
    url = explicit or os.environ.get(ENV_VAR) or "sqlite:///" + str(data_dir() / "gradebook.db")
    if url.startswith("postgresql://"):  # SQLAlchemy 2 would pick psycopg2, which we do not install
        url = "postgresql+psycopg://" + url[len("postgresql://"):]
    return url


def redacted(url: str) -> str:
    """The URL with any password replaced, for messages and logs."""
    if "@" in url and ":" in url.split("//", 1)[-1].split("@", 1)[0]:
        scheme, rest = url.split("//", 1)
        user = rest.split("@", 1)[0].split(":", 1)[0]
        return f"{scheme}//{user}:***@{rest.split('@', 1)[1]}"
    return url


@contextmanager
def open_gradebook(url: str):
    from nbgrader.api import Gradebook

    try:
        _create_if_new(url)
        gb = Gradebook(url, course_id=COURSE_ID)
    except Exception as err:
        raise GradingError(f"cannot open the gradebook at {redacted(url)}: {str(err).splitlines()[0]}\n"
                         f"  Check --db-url / {ENV_VAR}; for PostgreSQL the server must run and the database exist.")
    try:
        yield gb
    finally:
        gb.close()


def _create_if_new(url: str) -> None:
    """Give a new database nbgrader's tables and its schema's revision, as
    nbgrader's Gradebook does for one without tables, except that Gradebook
    asks a second Python for the revision (`alembic heads`: about 5 s, once
    per new gradebook), which alembic's library reads here from nbgrader's
    migration scripts in a fraction of a second."""
    from sqlalchemy import create_engine, inspect, text

    engine = create_engine(url, future=True)
    try:
        if inspect(engine).get_table_names():
            return
        # imported only here: every grading fork opens the gradebook, and alembic is not preloaded there
        from alembic.script import ScriptDirectory
        from nbgrader.api import Base
        from nbgrader.dbutil import ALEMBIC_DIR

        revision = ScriptDirectory(ALEMBIC_DIR).get_current_head()
        with engine.begin() as connection:
            Base.metadata.create_all(bind=connection)
            connection.execute(text("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)"))
            connection.execute(text("INSERT INTO alembic_version (version_num) VALUES (:revision)"),
                               {"revision": revision})
    finally:
        engine.dispose()


def ensure_assignments(url: str, assignments: list[str]) -> None:
    """Autograding needs each assignment's cells in the gradebook. Register the
    missing ones as `nbgrader generate_assignment` does, with its converter
    and the course's nbgrader config, into a scratch release folder
    (notebooks/ is untouched); in this process, which has nbgrader loaded
    already (a CLI process per assignment took about 3 s each)."""
    with open_gradebook(url) as gb:
        known = {a.name for a in gb.assignments}
    missing = [a for a in assignments if a not in known]
    if not missing:
        return
    from nbgrader.converters import GenerateAssignment
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.utils import capture_log

    course.COURSE_DATA.mkdir(exist_ok=True)
    data_dir().mkdir(parents=True, exist_ok=True)
    log = logging.getLogger("tinylm-register")
    log.propagate = False  # nbgrader's progress lines; capture_log keeps them for an error
    with tempfile.TemporaryDirectory(prefix="tinylm-register-") as tmp:
        config = course.nbgrader_config()
        config.CourseDirectory.db_url = url
        config.CourseDirectory.release_directory = tmp
        coursedir = CourseDirectory(config=config)
        for a in missing:
            coursedir.assignment_id = a
            converter = GenerateAssignment(coursedir=coursedir, config=config, log=log)
            converter.force = True
            outcome = capture_log(converter)
            if not outcome["success"]:  # nbgrader's log says why; its traceback's last line names the error
                said = outcome["log"].strip() or outcome.get("error", "").strip().splitlines()[-1]
                raise GradingError(f"cannot register {a} in the gradebook {redacted(url)}:\n{said}")


def cell_scores(url: str, assignment: str, student: str) -> dict[str, tuple[float, float]]:
    """{grade cell id: (auto score, max_score)} of one submission as the
    notebook kernel scored it; {} if ungraded."""
    from nbgrader.api import MissingEntry

    with open_gradebook(url) as gb:
        try:
            nb = gb.find_submission_notebook(assignment, assignment, student)
        except MissingEntry:
            return {}
        return {g.name: (float(g.auto_score or 0), float(g.max_score)) for g in nb.grades}


def override(url: str, assignment: str, student: str, scores: dict[str, float], hold: bool = False) -> None:
    """Make the gradebook hold exactly `scores`: a manual score (which takes
    precedence in nbgrader) where it differs from the auto score, none where
    they agree. Creates the submission when nbgrader could not grade it.
    hold: a manual score on every cell, equal or not; nbgrader's autograde
    keeps manual scores, so they stand while it writes the kernel's."""
    with open_gradebook(url) as gb:
        _ensure_student(gb, student)
        sub = gb.update_or_create_submission(assignment, student)
        nb = next(n for n in sub.notebooks if n.name == assignment)
        for grade in nb.grades:
            if grade.name in scores:
                same = not hold and grade.auto_score is not None and float(grade.auto_score) == scores[grade.name]
                grade.manual_score = None if same else scores[grade.name]
                grade.needs_manual_grade = False  # the verdict is the grader's (flags in the result say why)
        gb.db.commit()


def _ensure_student(gb, student: str) -> None:
    """The student's row, made if missing. Two workers grading two notebooks
    of one student may both find it missing: the second insert fails on the
    unique id (nbgrader rolls it back), and the row the first one made stands."""
    from nbgrader.api import InvalidEntry

    try:
        gb.update_or_create_student(student)
    except InvalidEntry:
        gb.find_student(student)


def class_grades(url: str) -> tuple[list[str], list[tuple[str, str, float]], list[dict]]:
    """(student ids, (assignment, grade cell, max_score) of every grade cell,
    one row per (student, assignment, grade cell) as table() gives them), in
    three queries: walking nbgrader's objects as table() does issues a
    query per submission and takes most of a minute for 500 students."""
    from nbgrader.api import Assignment, BaseCell, Grade, GradeCell, Notebook, Student, SubmittedAssignment, \
        SubmittedNotebook

    with open_gradebook(url) as gb:
        students = sorted(s for (s,) in gb.db.query(Student.id))
        cells = [(a, c, float(m)) for a, c, m in gb.db.query(Assignment.name, GradeCell.name, GradeCell.max_score)
                 .join(Notebook, GradeCell.notebook_id == Notebook.id)
                 .join(Assignment, Notebook.assignment_id == Assignment.id)]
        grades = (gb.db.query(SubmittedAssignment.student_id, Assignment.name, BaseCell.name, Grade.score,
                              Grade.max_score)
                  .select_from(Grade)
                  .join(SubmittedNotebook, Grade.notebook_id == SubmittedNotebook.id)
                  .join(SubmittedAssignment, SubmittedNotebook.assignment_id == SubmittedAssignment.id)
                  .join(Assignment, SubmittedAssignment.assignment_id == Assignment.id)
                  .join(BaseCell, Grade.cell_id == BaseCell.id))
        rows = [{"student": s, "assignment": a, "cell": c, "score": float(score), "max_score": float(mx)}
                for s, a, c, score, mx in grades]
    return students, cells, rows


def table(url: str) -> list[dict]:
    """One row per (student, assignment, grade cell), for export."""
    rows = []
    with open_gradebook(url) as gb:
        for assignment in gb.assignments:
            for sub in assignment.submissions:
                for nb in sub.notebooks:
                    for g in nb.grades:
                        rows.append({"student": sub.student.id, "assignment": assignment.name, "cell": g.name,
                                     "score": float(g.score), "max_score": float(g.max_score)})
    return rows


def record_lateness(url: str, due: dict, late: dict) -> None:
    """Write the course's due dates (assignment -> aware UTC) and, per graded
    (student, assignment), (submitted_at, extension, penalty) into the
    gradebook: nbgrader then counts the same seconds late and subtracts the
    same penalty in its totals (it stores naive UTC)."""
    from nbgrader.api import MissingEntry

    def naive(when):
        return when.replace(tzinfo=None) if when is not None else None

    with open_gradebook(url) as gb:
        for a in gb.assignments:
            a.duedate = naive(due.get(a.name))
        for (student, assignment), (submitted_at, extension, penalty) in late.items():
            try:
                sub = gb.find_submission(assignment, student)
            except MissingEntry:
                continue
            sub.timestamp, sub.extension = naive(submitted_at), extension
            for nb in sub.notebooks:
                nb.late_submission_penalty = penalty or None
        gb.db.commit()
