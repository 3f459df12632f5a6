"""JupyterHub for the tinylm course: every user a Unix account, nbgrader's
exchange in a shared folder. tests/hub/ starts a hub with this very file.

Put the course in a folder every user can read (e.g. /srv/tinylm, owned by
the instructor), with its venv inside it; docs/instructors.md gives
every step and the permissions. Then, as root:

    TINYLM_HUB_INSTRUCTORS=alice TINYLM_HUB_STUDENTS=bob,carol \\
        /srv/tinylm/.venv/bin/python -m jupyterhub -f /srv/tinylm/autograder/hub/jupyterhub_config.py

Settings read from the environment (defaults in brackets):
  TINYLM_HUB_INSTRUCTORS   comma-separated Unix users who run the formgrader
  TINYLM_HUB_STUDENTS      comma-separated Unix users who take the course
  TINYLM_HUB_EXCHANGE      nbgrader's exchange folder [/srv/nbgrader/exchange]
  TINYLM_HUB_STATE         the hub's database and cookie secret [/srv/jupyterhub]
Everything else about where the hub listens is JupyterHub's own
command-line options (--JupyterHub.bind_url=..., as the test does).
"""
import os
import sys
from pathlib import Path

HUB_CONFIG_DIR = Path(__file__).resolve().parent
COURSE_ROOT = HUB_CONFIG_DIR.parents[1]


def _users(variable: str) -> set[str]:
    return {name.strip() for name in os.environ.get(variable, "").split(",") if name.strip()}


INSTRUCTORS = _users("TINYLM_HUB_INSTRUCTORS")
STUDENTS = _users("TINYLM_HUB_STUDENTS")
EXCHANGE = os.environ.get("TINYLM_HUB_EXCHANGE", "/srv/nbgrader/exchange")
STATE = Path(os.environ.get("TINYLM_HUB_STATE", "/srv/jupyterhub"))
if INSTRUCTORS & STUDENTS:
    raise SystemExit(f"TINYLM_HUB_INSTRUCTORS and TINYLM_HUB_STUDENTS share {sorted(INSTRUCTORS & STUDENTS)}: "
                     "a user is either the instructor or a student")
if not INSTRUCTORS:
    raise SystemExit("TINYLM_HUB_INSTRUCTORS is empty: name the Unix user(s) who run the formgrader")



def _data_files_found() -> bool:
    """JupyterHub looks for its templates and static files in a share/jupyterhub
    above its package folder or sys.prefix; a venv made by copying packages
    (not by pip) may have none, and then every page answers 500."""
    try:
        from jupyterhub._data import DATA_FILES_PATH
    except ImportError:  # a future layout: let JupyterHub report it
        return True
    return bool(DATA_FILES_PATH)


if not _data_files_found():
    raise SystemExit(f"JupyterHub's templates and static files (share/jupyterhub) were not found above its package "
                     f"folder or {sys.prefix}: install jupyterhub with pip into the venv that runs the hub "
                     f"(pip install -e '.[dev]'), or set c.JupyterHub.data_files_path to the folder that holds them")

c = get_config()  # noqa: F821  (injected by traitlets)

# Log in with the Unix account's password (PAM): the same users who own the
# files in the exchange and in their home folders. Only the roster may log in.
c.JupyterHub.authenticator_class = "pam"
c.Authenticator.allowed_users = INSTRUCTORS | STUDENTS

# Each user's server is a process running as that Unix user, started from the
# course's venv (the interpreter running the hub), in the user's home folder.
c.JupyterHub.spawner_class = "localprocess"
c.Spawner.cmd = [sys.executable, "-m", "jupyterhub.singleuser"]
c.Spawner.default_url = "/lab"
# A cold start imports JupyterLab and nbgrader on a busy machine.
c.Spawner.start_timeout = 180
c.Spawner.http_timeout = 180

c.JupyterHub.db_url = "sqlite:///" + str(STATE / "jupyterhub.sqlite")
c.JupyterHub.cookie_secret_file = str(STATE / "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = str(STATE / "jupyterhub.pid")


def _course_environment(spawner) -> None:
    """What a user's server and kernels need: the course's packages on the
    path, nbgrader's exchange, and per role a Jupyter config folder
    (autograder/hub/student or autograder/hub/instructor) that sets the
    exchange and, for students, switches the instructor's tools off."""
    role = "instructor" if spawner.user.name in INSTRUCTORS else "student"
    spawner.environment.update({
        "PYTHONPATH": str(COURSE_ROOT),
        "JUPYTER_CONFIG_PATH": str(HUB_CONFIG_DIR / role),
        "TINYLM_HUB_EXCHANGE": EXCHANGE,
        # nbgrader shells out to `alembic` (the gradebook) from the venv's bin/
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"]),
        "OMP_NUM_THREADS": "1",
    })
    if role == "instructor":
        # The formgrader links notebooks relative to the server's root: the course root.
        spawner.notebook_dir = str(COURSE_ROOT)


c.Spawner.pre_spawn_hook = _course_environment
