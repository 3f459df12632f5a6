"""nbgrader configuration for the tinylm course.

nbgrader finds this file from its working directory, so every nbgrader
command runs from autograder/ (python -m autograder does that for you).
The course root is the repository root: solutions/ holds the source
notebooks, notebooks/ the released ones, and everything that concerns
students (submissions, autograded copies, feedback, the gradebook) lives in
the git-ignored .course/ folder.
"""
import os

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
COURSE_DATA = os.path.join(ROOT, ".course")

# nbgrader cannot create the gradebook's folder itself: without it the
# formgrader hangs on "Loading, please wait..." on a fresh clone.
os.makedirs(COURSE_DATA, exist_ok=True)

c = get_config()  # noqa: F821  (injected by traitlets when nbgrader loads this file)

c.CourseDirectory.course_id = "tinylm"
c.CourseDirectory.root = ROOT
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "notebooks"
c.CourseDirectory.submitted_directory = os.path.join(COURSE_DATA, "submitted")
c.CourseDirectory.autograded_directory = os.path.join(COURSE_DATA, "autograded")
c.CourseDirectory.feedback_directory = os.path.join(COURSE_DATA, "feedback")
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(COURSE_DATA, "gradebook.db")

# Output-free release notebooks that are byte-identical run to run: drop the
# per-cell execution metadata (timestamps) along with the outputs.
c.ClearOutput.remove_metadata_fields = {"collapsed", "scrolled", "execution", "ExecuteTime"}

# Solution stubs in the released notebooks.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}

# A check must never take long; a hung cell fails instead of blocking a class run.
c.Execute.timeout = 120

# The course's late policy (.course/deadlines.toml, see autograder/grading/deadlines.py)
# also in nbgrader's own autograde, so its totals (score minus late penalty) are the course's.
c.AssignLatePenalties.plugin_class = "autograder.grading.deadlines.LatePolicyPlugin"
