"""nbgrader settings of a student's server on the course hub (found through
JUPYTER_CONFIG_PATH, set by autograder/hub/jupyterhub_config.py)."""
import os

c = get_config()  # noqa: F821
c.CourseDirectory.course_id = "tinylm"
c.Exchange.root = os.environ["TINYLM_HUB_EXCHANGE"]
