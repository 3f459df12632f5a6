"""A course hub on loopback for tests/hub: three fresh Unix users, the
course folder an instructor would set up, nbgrader's exchange, and
JupyterHub started with the shipped autograder/hub/jupyterhub_config.py.

Everything lives in one scratch folder under /tmp (readable by the test's
users, unlike pytest's tmp_path) and is removed afterwards, users included.
User names carry a random suffix, so parallel runs never share one.
"""
from __future__ import annotations

import os
import pwd
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ..servers import LoggedServer, free_port

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
SITE_PACKAGES = next(p for p in map(Path, sys.path) if p.name == "site-packages" and p.is_relative_to(sys.prefix))
# The course files an instructor copies to the server (no .git, no .course).
COURSE_FOLDERS = ("autograder", "tinylm", "notebooks", "solutions")
# Only the instructor may read these: every answer, every hidden test, the gradebook.
INSTRUCTOR_ONLY = ("solutions", "autograder/authoring/notebook_src", ".course")
PROXY = ROOT / ".node" / "node_modules" / ".bin" / "configurable-http-proxy"


@dataclass
class User:
    name: str
    password: str
    home: Path

    @property
    def uid(self) -> int:
        return pwd.getpwnam(self.name).pw_uid


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def why_not_runnable() -> str | None:
    """The reason this machine cannot run a hub test, or None."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "the hub test creates Unix users and runs each user's server as that user: run it as root"
    for tool in ("useradd", "userdel", "chpasswd", "runuser"):
        if shutil.which(tool) is None:
            return f"{tool} not found (Debian: apt-get install passwd util-linux)"
    if not PROXY.exists():
        return (f"configurable-http-proxy not installed at {PROXY.relative_to(ROOT)}: "
                "npm install --prefix .node configurable-http-proxy (.ci/run does this)")
    try:
        import jupyterhub  # noqa: F401
    except ImportError:
        return "jupyterhub is not installed (pip install -e '.[dev]')"
    return None


class CourseHub:
    """The scratch folder, users, course copy, exchange and hub process."""

    def __init__(self, artifacts: Path) -> None:
        self.tag = secrets.token_hex(3)
        self.artifacts = artifacts / self.tag  # screenshots and logs of this run, kept afterwards
        self.scratch = Path(tempfile.mkdtemp(prefix=f"tinylm-hub-{self.tag}-"))
        os.chmod(self.scratch, 0o755)  # users reach their homes, the course and the exchange through it
        self.course = self.scratch / "course"
        self.exchange = self.scratch / "exchange"
        self.state = self.scratch / "hub"
        self.bin = VENV_BIN  # the users' Python: the course venv's, or a layer over it (see python_for_users)
        self.instructor = self._user("ins")
        self.students = [self._user("stu1"), self._user("stu2")]
        self.port = free_port()
        self.log_path = self.state / "jupyterhub.log"
        self.server = LoggedServer("jupyterhub", self.log_path)
        self.created: list[User] = []

    def _user(self, role: str) -> User:
        name = f"tl{role}-{self.tag}"
        return User(name, secrets.token_urlsafe(12), self.scratch / "home" / name)

    @property
    def users(self) -> list[User]:
        return [self.instructor, *self.students]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- set-up, in the order an administrator and the instructor would do it --

    def create_users(self) -> None:
        (self.scratch / "home").mkdir(mode=0o755)
        for u in self.users:
            run(["useradd", "--create-home", "--home-dir", str(u.home), "--shell", "/bin/bash", "--user-group", u.name])
            self.created.append(u)
            run(["chpasswd"], input=f"{u.name}:{u.password}\n")

    def make_exchange(self) -> None:
        """nbgrader's docs: a folder every user can write. The sticky bit
        (as on /tmp) keeps users from removing each other's entries."""
        self.exchange.mkdir()
        os.chmod(self.exchange, 0o1777)

    def install_course(self) -> None:
        """The instructor's copy of the course: readable by everyone (the
        students' kernels import tinylm and autograder.checks from it),
        except solutions, notebook sources and the course data."""
        self.course.mkdir()
        for folder in COURSE_FOLDERS:
            shutil.copytree(ROOT / folder, self.course / folder,
                            ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints", "mylm"))
        (self.course / ".course").mkdir()
        ins = pwd.getpwnam(self.instructor.name)
        for path in [self.course, *self.course.rglob("*")]:
            os.lchown(path, ins.pw_uid, ins.pw_gid)
        for rel in INSTRUCTOR_ONLY:
            os.chmod(self.course / rel, 0o700)

    def as_user(self, user: User, *cmd: str, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
        """Run a command as `user`, with the course environment the hub gives their server."""
        env = ["env", "-i", f"HOME={user.home}", f"USER={user.name}", f"PYTHONPATH={self.course}",
               f"PATH={self.bin}:/usr/local/bin:/usr/bin:/bin", "OMP_NUM_THREADS=1",
               f"TINYLM_HUB_EXCHANGE={self.exchange}",
               f"JUPYTER_CONFIG_PATH={self.course / 'autograder' / 'hub' / ('instructor' if user is self.instructor else 'student')}"]
        return run(["runuser", "-u", user.name, "--", *env, *cmd], cwd=cwd or user.home, timeout=timeout)

    def _users_can_import(self) -> str | None:
        """None if a student can start the users' Python and import what
        the hub's servers and the notebooks import; otherwise the error."""
        try:
            self.as_user(self.students[0], str(self.bin / "python"), "-c",
                         "import jupyterhub.singleuser, nbgrader, torch, tinylm, autograder.checks", timeout=120)
        except RuntimeError as err:
            return str(err)
        return None

    def python_for_users(self) -> str | None:
        """Give the hub's users a Python that runs the course; None when
        done, else why it cannot be done here (the test then skips).

        The course venv serves when every user can run it. When its
        interpreter lies where they cannot (a pyenv under /root, as on this
        project's machines), the test layers a venv of the system's
        interpreter of the same version over the course venv's packages
        (a .pth file), and where even those are out of reach (a clone under
        /root) over a hard-linked copy of them. The instructor's equivalent
        is installing the course with a Python every user can run, in a
        folder they can read (docs/instructors.md)."""
        first = self._users_can_import()
        if first is None:
            return None
        system_python = Path(f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")
        if not system_python.exists():
            return f"the hub's users cannot run the course's venv and there is no {system_python} to layer over it:\n{first}"
        layer = self.scratch / "venv"
        run([str(system_python), "-m", "venv", "--without-pip", str(layer)])
        site = layer / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
        # addsitedir also runs the course venv's own .pth files (its editable install of the course).
        packages = self._reachable(SITE_PACKAGES, layer / "course-site-packages")
        (site / "tinylm-course-venv.pth").write_text(f"import site; site.addsitedir({str(packages)!r})\n")
        self.bin = layer / "bin"
        # Jupyter finds its extensions and their config under sys.prefix: the course venv's.
        # JupyterHub finds its templates and static files (share/jupyterhub) by walking up
        # from its package folder, then from sys.prefix: neither reaches the course venv's
        # from a copy of its packages, so the layer's prefix gets them too (JupyterHub 6
        # answered every page with 500, TemplateNotFound: login.html, without them).
        for shared in ("etc/jupyter", "share/jupyter", "share/jupyterhub"):
            (layer / shared).parent.mkdir(parents=True, exist_ok=True)
            (layer / shared).symlink_to(self._reachable(Path(sys.prefix) / shared, layer / "course" / shared))
        # The course venv's console scripts start its unreadable interpreter: nbgrader needs
        # `alembic` on PATH (it creates the gradebook with it), so the layer gets its own.
        alembic = self.bin / "alembic"
        alembic.write_text(f"#!{self.bin / 'python'}\nimport sys\nfrom alembic.config import main\nsys.exit(main())\n")
        alembic.chmod(0o755)
        second = self._users_can_import()
        if second is not None:
            return f"the hub's users can read neither the course's venv nor a layer over it:\n{first}\n{second}"
        return None

    @staticmethod
    def _reachable(path: Path, copy: Path) -> Path:
        """`path` if every user can reach it (each folder above it searchable
        by others), else a copy of it at `copy`: hard links where the file
        system allows (instant, no space), a real copy otherwise."""
        if all(os.stat(p).st_mode & 0o001 for p in [path, *path.parents]):
            return path
        copy.parent.mkdir(parents=True, exist_ok=True)
        if subprocess.run(["cp", "-al", str(path), str(copy)], capture_output=True).returncode != 0:
            shutil.rmtree(copy, ignore_errors=True)
            run(["cp", "-a", str(path), str(copy)])
        for folder in [copy, *(p for p in copy.rglob("*") if p.is_dir())]:
            os.chmod(folder, 0o755)
        return copy

    def robot_settings(self) -> None:
        """Two JupyterLab user settings for a robot rather than a person (as
        in tests/browser): render every cell, so a cell is found by its
        position; written into each user's ~/.jupyter like their own."""
        for u in self.users:
            settings = u.home / ".jupyter" / "lab" / "user-settings" / "@jupyterlab" / "notebook-extension"
            settings.mkdir(parents=True)
            (settings / "tracker.jupyterlab-settings").write_text('{"windowingMode": "none"}')
            for path in [u.home / ".jupyter", *(u.home / ".jupyter").rglob("*")]:
                os.lchown(path, u.uid, pwd.getpwnam(u.name).pw_gid)

    # -- the hub --

    def start(self, timeout: float = 120) -> None:
        self.state.mkdir(mode=0o700)
        config = self.course / "autograder" / "hub" / "jupyterhub_config.py"
        env = dict(os.environ,
                   PATH=os.pathsep.join([str(self.bin), str(PROXY.parent), os.environ.get("PATH", "")]),
                   TINYLM_HUB_INSTRUCTORS=self.instructor.name,
                   TINYLM_HUB_STUDENTS=",".join(s.name for s in self.students),
                   TINYLM_HUB_EXCHANGE=str(self.exchange),
                   TINYLM_HUB_STATE=str(self.state))
        env.pop("PYTHONPATH", None)  # the users' servers get the course's path from the config
        cmd = [str(self.bin / "python"), "-m", "jupyterhub", "-f", str(config),
               f"--JupyterHub.bind_url={self.url}",
               f"--JupyterHub.hub_bind_url=http://127.0.0.1:{free_port()}",
               f"--ConfigurableHTTPProxy.api_url=http://127.0.0.1:{free_port()}",
               f"--ConfigurableHTTPProxy.command={PROXY}"]
        self.server.start(cmd, f"{self.url}/hub/api/", cwd=self.state, env=env, timeout=timeout)

    def log_tail(self, n: int = 60) -> str:
        return self.server.log_tail(n)

    def stop(self) -> None:
        """The hub and its proxy (one process group); then every process of
        the test's users (their servers and kernels run in their own groups)."""
        self.server.stop(grace_s=30)
        for u in self.created:
            subprocess.run(["pkill", "-KILL", "-u", u.name], capture_output=True)

    def remove(self, keep_logs: Path | None = None) -> None:
        """Remove the users and the scratch folder; the hub's log is copied to `keep_logs` first."""
        if keep_logs is not None and self.log_path.exists():
            keep_logs.mkdir(parents=True, exist_ok=True)
            shutil.copy(self.log_path, keep_logs / "jupyterhub.log")
        for u in self.created:
            for _ in range(10):  # userdel refuses while a process of the user is still exiting
                if subprocess.run(["userdel", u.name], capture_output=True).returncode == 0:
                    break
                time.sleep(0.5)
        shutil.rmtree(self.scratch, ignore_errors=True)
