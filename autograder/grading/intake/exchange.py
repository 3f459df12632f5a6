"""The course's intake of nbgrader's exchange: nbgrader's Collect, made safe.

On a hub, students reach the course data folder only through Collect, which
runs with the instructor's rights. nbgrader's own Collect follows symbolic
links (a link to solutions/ or to another student's submission is copied as
that file) and takes the student id from the inbound folder's name, in a
folder every student may write (mode 733), so a folder named after someone
else replaces their submission. `CourseCollect` takes its place for the
formgrader's Collect button and `nbgrader collect` alike
(autograder/hub/instructor/nbgrader_config.py sets
`c.ExchangeFactory.collect`):

* the student id is the login of the Unix user who owns the inbound folder;
  a folder whose name says another student is refused and reported, and
  copied for neither;
* nothing is followed: every folder and file is opened without following a
  link (O_NOFOLLOW, relative to the folder already opened), so a link,
  however it is placed or swapped in meanwhile, is refused and reported;
  only regular files are copied, within collect's caps (files per
  submission, bytes per file and per submission);
* the submission's time is the latest change time (ctime) of its files and
  folders, which the kernel sets and no user can set back, kept when
  plausible (not before the assignment's release in the exchange, not after
  this collect), else "time unknown" (deadlines.py); the student's own
  timestamp.txt is kept for nbgrader's release_feedback (it names the page
  after it) when it is a short time text, and never used as the time.

Refusals go to nbgrader's log (the formgrader shows it) and to
`exchange-intake.log` in the course data folder.

Why not an exchange with per-student permissions (ngshare) instead: it
needs a service of its own beside the hub, and the default exchange's
folders stay as they are for fetching, submitting and feedback; what made
Collect unsafe was how it read the inbound folder, which this replaces.
"""
from __future__ import annotations

import datetime as dt
import errno
import fnmatch
import os
import pwd
import shutil
import stat

from nbgrader.exchange.default.collect import ExchangeCollect

from .. import deadlines, gradebook
from .collect import MAX_FILE_BYTES, MAX_SUBMISSION_BYTES, student_id
from ..escape import printable
from ..records import digest
from .notebook import MAX_SUBMISSION_FILES

UTC = dt.timezone.utc
OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
OPEN_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK   # non-blocking: a FIFO swapped in cannot hang the copy


class Refused(Exception):
    """A submission the intake does not take; the message says why."""


def owner_login(uid: int) -> str | None:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return None


def read_submission(inbound_fd: int, name: str) -> tuple[dict[str, bytes], float]:
    """The regular files of the inbound folder `name` ({relative path:
    bytes}) and its latest change time, read without following any link.
    Raises Refused for a link, a special file, or a submission over a cap."""
    files: dict[str, bytes] = {}
    changed, total, count = 0.0, 0, 0

    def walk(parent_fd: int, entry: str, rel: str) -> None:
        nonlocal changed, total, count
        try:
            fd = os.open(entry, OPEN_DIR, dir_fd=parent_fd)
        except OSError as err:
            if err.errno in (errno.ELOOP, errno.ENOTDIR):
                raise Refused(f"{rel or name}: a symbolic link or not a folder; links are never followed") from None
            raise
        try:
            info = os.fstat(fd)
            changed = max(changed, info.st_ctime)
            for child in sorted(os.listdir(fd)):
                count += 1
                if count > MAX_SUBMISSION_FILES:
                    raise Refused(f"{name}: more than {MAX_SUBMISSION_FILES} files and folders")
                path = f"{rel}/{child}" if rel else child
                kind = os.lstat(child, dir_fd=fd).st_mode
                if stat.S_ISLNK(kind):
                    raise Refused(f"{path}: a symbolic link; links are never followed")
                if stat.S_ISDIR(kind):
                    walk(fd, child, path)
                elif stat.S_ISREG(kind):
                    data, when = _read_file(fd, child, path)
                    total += len(data)
                    if total > MAX_SUBMISSION_BYTES:
                        raise Refused(f"{name}: over {MAX_SUBMISSION_BYTES // 2**20} MB")
                    files[path], changed = data, max(changed, when)
                else:
                    raise Refused(f"{path}: not a regular file")
        finally:
            os.close(fd)

    walk(inbound_fd, name, "")
    return files, changed


def _read_file(dir_fd: int, child: str, path: str) -> tuple[bytes, float]:
    try:
        fd = os.open(child, OPEN_FILE, dir_fd=dir_fd)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise Refused(f"{path}: a symbolic link; links are never followed") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Refused(f"{path}: not a regular file")
        if info.st_size > MAX_FILE_BYTES:
            raise Refused(f"{path}: over {MAX_FILE_BYTES // 2**20} MB")
        with os.fdopen(os.dup(fd), "rb") as fh:
            data = fh.read(MAX_FILE_BYTES + 1)
        if len(data) > MAX_FILE_BYTES:
            raise Refused(f"{path}: over {MAX_FILE_BYTES // 2**20} MB")
        return data, os.fstat(fd).st_ctime
    finally:
        os.close(fd)


class CourseCollect(ExchangeCollect):
    """nbgrader's Collect with the course's intake (see the module docstring)."""

    def init_src(self):
        if self.coursedir.course_id == "":
            self.fail("No course id specified. Re-run with --course flag.")
        self.course_path = os.path.join(self.root, self.coursedir.course_id)
        self.inbound_path = os.path.join(self.course_path, "inbound")
        if not os.path.isdir(self.inbound_path):
            self.fail(f"Course not found: {self.inbound_path}")
        self.refusals: list[str] = []
        wanted = f"{self.coursedir.student_id or '*'}+{self.coursedir.assignment_id}+*"
        by_owner: dict[str, list[dict]] = {}
        self.inbound_fd = os.open(self.inbound_path, OPEN_DIR)
        for name in sorted(os.listdir(self.inbound_fd)):
            if not fnmatch.fnmatchcase(name, wanted):
                continue
            named = name.split("+", 1)[0]
            info = os.lstat(name, dir_fd=self.inbound_fd)
            owner = owner_login(info.st_uid)
            if stat.S_ISLNK(info.st_mode):
                self._refuse(f"{name}: a symbolic link in the exchange (owned by {owner}); links are never followed")
            elif not stat.S_ISDIR(info.st_mode):
                self._refuse(f"{name}: not a folder")
            elif owner != named:
                self._refuse(f"{name}: named for {named!r} but written by {owner!r}; a submission is its owner's "
                             "own, so it is not collected for either")
            elif student_id(owner) != owner:
                self._refuse(f"{name}: the owner's login {owner!r} is not a safe student id")
            else:
                by_owner.setdefault(owner, []).append({"username": owner, "filename": name,
                                                        "timestamp": info.st_ctime})
        # newest first: the newest submission that is not refused is collected
        self.src_records = [sorted(records, key=lambda r: -r["timestamp"]) for records in by_owner.values()]

    def copy_files(self):
        if not self.src_records:
            self.log.warning(f"No submissions of '{self.coursedir.assignment_id}' for course "
                             f"'{self.coursedir.course_id}' to collect")
        released = _release_time(self.course_path, self.coursedir.assignment_id)
        try:
            for records in self.src_records:
                any(self._take(record, released) for record in records)
        finally:
            os.close(self.inbound_fd)
            self._write_log()

    def _take(self, record: dict, released: float | None) -> bool:
        """Collect one submission folder; False when it is refused (then the
        student's next newest one is tried)."""
        student, assignment = record["username"], self.coursedir.assignment_id
        try:
            files, changed = read_submission(self.inbound_fd, record["filename"])
        except Refused as err:
            self._refuse(f"{record['filename']} (of {student}): {err}; nothing of this submission was collected")
            return False
        now = dt.datetime.now(UTC).timestamp()
        dest = gradebook.folder("submitted") / student / assignment
        shutil.rmtree(dest, ignore_errors=True)
        (dest.parent / f".{assignment}.original.ipynb").unlink(missing_ok=True)
        for rel, data in files.items():
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        removed = deadlines.sane_timestamp_file(dest)
        if removed:
            self.log.warning(f"{printable(student)}: {removed}")
        if released is not None and changed < released:
            when, why = None, f"its files last changed before the assignment's release in the exchange at " \
                              f"{deadlines.when_text(dt.datetime.fromtimestamp(released, UTC))}"
        elif changed > now:
            when, why = None, "its files changed after this collect began"
        else:
            when, why = dt.datetime.fromtimestamp(changed, UTC), ""
        notebook = dest / f"{assignment}.ipynb"
        deadlines.record_time(student, assignment, digest(notebook), when,
                              deadlines.SOURCE_EXCHANGE if when else "", why)
        self.log.info(f"Collecting submission: {printable(student)} {assignment} "
                      f"({deadlines.when_text(when) if when else 'time unknown: ' + why})")
        return True

    def _refuse(self, why: str) -> None:
        self.refusals.append(why)
        self.log.warning(f"refused: {printable(why)}")

    def _write_log(self) -> None:
        if not self.refusals:
            return
        log = gradebook.data_dir() / "exchange-intake.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        stamp = dt.datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        with open(log, "a", encoding="utf-8") as fh:
            fh.writelines(f"{stamp} {self.coursedir.assignment_id} refused: {printable(why)}\n"
                          for why in self.refusals)


def _release_time(course_path: str, assignment: str) -> float | None:
    """When the assignment was released into the exchange (its outbound
    folder's change time), if it is there."""
    try:
        return os.lstat(os.path.join(course_path, "outbound", assignment)).st_ctime
    except OSError:
        return None
