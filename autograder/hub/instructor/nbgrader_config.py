"""nbgrader settings of the instructor's server on the course hub: the
exchange, then the course's own config (course root, gradebook, folders).
The server runs in the instructor's home folder, where nbgrader would not
find autograder/nbgrader_config.py by itself."""
import os

c = get_config()  # noqa: F821
c.CourseDirectory.course_id = "tinylm"
c.Exchange.root = os.environ["TINYLM_HUB_EXCHANGE"]
load_subconfig(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..",  # noqa: F821
                            "nbgrader_config.py"))
# Collect through the course's intake (autograder/grading/intake/exchange.py): the
# student id is the owner of the inbound folder, and no link is followed.
c.ExchangeFactory.collect = "autograder.grading.intake.exchange.CourseCollect"
