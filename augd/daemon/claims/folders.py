"""Job folders move between rooms by rename only: inbox -> work (the claim) -> done | failed, or back to the
inbox (requeue on shutdown). Every rename is atomic on one filesystem, so a job folder is always in exactly one
room, whole, and a crash at any point leaves it somewhere a daemon knows what to do with.

The claim first writes `.augd-claim.json` into the job (hidden: the job scan skips it) recording where it came
from, so a job taken over from work/ keeps its routing folder and knows its output was checked. Who runs a job in
work/, and how many processes started it, is in the daemon's own folder, `work/.claims/<job>/`
(records.py: a read-only job is counted too): the name is reserved there before the rename, so several
daemons sharing the folders never claim one name twice; a job whose holder is gone is taken over, and one that
ended its holder `max_attempts` times is a poison job, dead-lettered to failed/ instead of run again. A new claim
counts from 1 (taking a job over and recovering it: recovery.py). While a job runs, the daemon's log lines also go to `.augd-job.log` in the job, so that the failure
report of a job that killed the process can say what it was doing.
"""
from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import json
import logging
import os
import secrets
import shutil
import stat
from dataclasses import asdict, dataclass

from augd.daemon.claims.records import Leases
from augd.daemon.logs import TextFormatter
from augd.daemon.watcher import JobReady
from augd.errors import UntrustedFileError
from augd.files import read_capped
from augd.io.jobfs import folder_identity
from augd.jobfolder import CLAIM_FILE, ERROR_FILE, FAILURE_FILE
from augd.owner import Owner

log = logging.getLogger("augd.daemon")

__all__ = ["CLAIM_FILE", "JOB_LOG", "Claimed", "claim", "claim_meta", "fail", "finish", "folder_state", "job_log",
           "last_log_lines", "now_iso", "open_job_log", "requeue", "still_ready"]

#: The job's own log while it runs (hidden: the job scan skips it); it moves with the job to done/ or failed/.
JOB_LOG = ".augd-job.log"


@dataclass(frozen=True)
class Claimed:
    """A job folder in work/."""
    path: str                 # its folder in work/
    name: str                 # the job's name: output goes to <out>/<name>/
    route: str | None         # pipeline named by its inbox routing folder
    inbox_relpath: str        # where it came from, relative to the inbox (requeue puts it back there)
    claimed_at: str
    output_checked: bool = True   # no complete output of this name existed when it was claimed
    recovered: bool = False       # taken over from work/ (its holder was gone)
    attempts: int = 1             # processes that started this job (each takeover adds one)
    identity: tuple[int, int] | None = None   # (device, inode) of its folder: replaced, it is not this job
    taken_from: str | None = None  # the holder it was taken over from (host:pid), when it had one
    holder: Owner | None = None    # ... and that holder, whose leftovers (temp output, scratch) are swept

    @property
    def key(self) -> str:
        """Its folder's name in work/, which names its claim records."""
        return os.path.basename(self.path)

    def meta(self) -> dict:
        d = asdict(self)
        del d["path"], d["recovered"], d["attempts"], d["identity"], d["taken_from"], d["holder"]
        return d


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _free_path(room: str, name: str, taken=os.path.lexists) -> str:
    """room/name, or room/name.1, room/name.2, ... whichever is not `taken` yet (default: does not exist)."""
    path, n = os.path.join(room, name), 0
    while taken(path):
        n += 1
        path = os.path.join(room, f"{name}.{n}")
    return path


def _own(path: str) -> None:
    """Make way for a file the daemon writes inside a job folder: whatever the job put at that name that is not
    a plain file of its own (a FIFO would block the daemon, a symlink or a hard link would make it write
    elsewhere) is removed first."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
        shutil.rmtree(path) if stat.S_ISDIR(st.st_mode) else os.unlink(path)


_SAFE = os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


def _write_json(path: str, obj) -> None:
    tmp = f"{path}.{secrets.token_hex(4)}.tmp"   # its own: two daemons may claim one folder at once
    with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _SAFE, 0o644), "w", encoding="utf-8",
                   errors="backslashreplace") as fh:   # a non-UTF-8 name's surrogate: its \udcXX JSON escape
        json.dump(obj, fh, indent=2, ensure_ascii=False, sort_keys=True)
        fh.write("\n")
        fh.flush()
        os.fsync(fh.fileno())  # this fd: reopening the name in a job folder (files.fsync_file) could meet a FIFO
    os.replace(tmp, path)


def claim(job: JobReady, leases: Leases, *, output_checked: bool = True) -> Claimed | None:
    """Move a ready job into work/. None when it is gone or is no longer the folder that was found ready (a new
    folder dropped under the same name is a new job; the watcher will emit it when it is ready), or when another
    daemon claimed it first."""
    try:
        if os.stat(job.path, follow_symlinks=False).st_ino != job.inode:
            return None
    except FileNotFoundError:
        return None
    key = None
    try:
        while key is None:
            dest = _free_path(leases.work, job.name, lambda p: leases.taken(os.path.basename(p)))
            key = os.path.basename(dest) if leases.reserve(os.path.basename(dest)) else None
        c = Claimed(path=dest, name=job.name, route=job.route, inbox_relpath=job.relpath, claimed_at=now_iso(),
                    output_checked=output_checked)
        try:
            _write_json(os.path.join(job.path, CLAIM_FILE), c.meta())
        except PermissionError as exc:  # a read-only drop still runs; a takeover then forgets its route
            log.warning("cannot write %s into %s (%s); claiming it without", CLAIM_FILE, job.path, exc)
        if os.stat(job.path, follow_symlinks=False).st_ino != job.inode:
            raise FileNotFoundError(job.path)
        os.rename(job.path, dest)
    except FileNotFoundError:   # gone: claimed by another daemon, or removed
        if key is not None:
            leases.release(key)
        return None
    except BaseException:
        if key is not None:
            leases.release(key)
        raise
    return dataclasses.replace(c, identity=folder_identity(dest))


def still_ready(job: JobReady) -> bool:
    """Whether the ready job's folder is still in the inbox, unclaimed (a claim that failed left it there)."""
    try:
        return os.stat(job.path, follow_symlinks=False).st_ino == job.inode
    except OSError:
        return False


def claim_meta(path: str) -> dict | None:
    """The claim file's fields, checked (the job folder is the user's: a name must stay a plain folder name, the
    inbox path inside the inbox), else None."""
    try:
        meta = json.loads(read_capped(os.path.join(path, CLAIM_FILE), 64 * 1024, "claim"))
        meta = {k: meta[k] for k in ("name", "route", "inbox_relpath", "claimed_at", "output_checked")}
    except (OSError, UntrustedFileError, ValueError, KeyError, TypeError):
        return None
    name, route, rel = meta["name"], meta["route"], meta["inbox_relpath"]
    plain = isinstance(name, str) and name not in ("", ".", "..") and "/" not in name and not name.startswith(".")
    if not plain or not (route is None or isinstance(route, str)) or not isinstance(rel, str) or \
            not isinstance(meta["claimed_at"], str) or not isinstance(meta["output_checked"], bool) or \
            os.path.isabs(rel) or any(p in ("", ".", "..") for p in rel.split("/")):
        return None
    return meta


def folder_state(c: Claimed) -> str:
    """"here", "gone" (removed or moved away from work/) or "replaced" (another folder under its name)."""
    now = folder_identity(c.path)
    return "gone" if now is None else "here" if c.identity is None or now == c.identity else "replaced"


def open_job_log(c: Claimed):
    """The job's own log, opened for appending (never through a symlink, never blocking)."""
    path = os.path.join(c.path, JOB_LOG)
    _own(path)
    return os.fdopen(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _SAFE, 0o644), "a", encoding="utf-8")


def last_log_lines(c: Claimed, n: int = 20) -> list[str]:
    """The last lines the daemon logged while this job ran (from its earlier attempts too)."""
    try:
        with os.fdopen(os.open(os.path.join(c.path, JOB_LOG), os.O_RDONLY | _SAFE), "rb") as fh:
            st = os.fstat(fh.fileno())
            if not stat.S_ISREG(st.st_mode):
                return []
            fh.seek(max(0, st.st_size - 64 * 1024))  # enough for n lines, bounded
            return fh.read(64 * 1024).decode("utf-8", "replace").splitlines()[-n:]
    except OSError:
        return []


def requeue(c: Claimed, inbox: str, leases: Leases) -> str | None:
    """Put a claimed job back where it was dropped (shutdown before it finished). Returns the new path."""
    dest = _free_path(inbox, c.inbox_relpath)
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    return _move(c, dest, leases)


def finish(c: Claimed, done_dir: str, on_success: str, leases: Leases) -> str | None:
    """After success: move to done/ (returns the path) or delete. A folder that left work/ after its commit (the
    output is whole: every image was read before the commit checked the folder) leaves nothing to move: None."""
    if folder_state(c) != "here":
        leases.release(c.key)
        return None
    if on_success == "delete":
        shutil.rmtree(c.path)
        leases.release(c.key)
        return None
    return _move(c, _free_path(done_dir, c.name), leases)


def fail(c: Claimed, failed_dir: str, failure: dict, text: str, leases: Leases) -> str | None:
    """Write failure.json (machine) and error.txt (human) into the job, then move it to failed/. A folder gone
    from work/ leaves nothing to move or write into: None (the failure is in the log, /status and the metrics)."""
    if folder_state(c) == "gone":
        leases.release(c.key)
        return None
    failure = {"job": c.name, "inbox_path": c.inbox_relpath, "claimed_at": c.claimed_at, "failed_at": now_iso(),
               **failure}
    try:
        _write_json(os.path.join(c.path, FAILURE_FILE), failure)
        error_txt = os.path.join(c.path, ERROR_FILE)
        _own(error_txt)
        with os.fdopen(os.open(error_txt, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _SAFE, 0o644), "w",
                       encoding="utf-8", errors="backslashreplace") as fh:
            fh.write(text.rstrip("\n") + "\n")
    except OSError as exc:  # a read-only job folder must still leave work/
        log.error("cannot write the failure report into %s: %s", c.path, exc)
    return _move(c, _free_path(failed_dir, c.name), leases)


def _move(c: Claimed, dest: str, leases: Leases) -> str | None:
    """The job leaves work/ (by rename, so it is always whole in one room), and its claim records with it. None
    when its folder left work/ by other means just now."""
    try:
        os.rename(c.path, dest)
    except FileNotFoundError:
        if os.path.lexists(c.path):
            raise   # the destination's room is gone: the job stays in work/
        dest = None
    leases.release(c.key)
    return dest


@contextlib.contextmanager
def job_log(c: Claimed):
    """While the job runs, the daemon's log lines (but those about other jobs) also go to the job's own log, so
    that a job that takes the process down leaves its last words where its failure report can read them."""
    try:
        handler = logging.StreamHandler(open_job_log(c))
    except OSError as exc:  # a read-only job folder still runs
        log.warning("cannot write %s into %s: %s", JOB_LOG, c.path, exc)
        yield
        return
    handler.setFormatter(TextFormatter())
    # This job's lines, and the job's own threads' (the runner and its image workers), not the watcher's.
    handler.addFilter(lambda r: getattr(r, "job", None) == c.name or (
        not hasattr(r, "job") and r.threadName.startswith(("augd-runner", "augd-img"))))
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)
        handler.close()
        handler.stream.close()

