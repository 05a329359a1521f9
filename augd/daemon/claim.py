"""Job folders move between rooms by rename only: inbox -> work (the claim) -> done | failed, or back to the
inbox (requeue on shutdown). Every rename is atomic on one filesystem, so a job folder is always in exactly one
room, whole, and a crash at any point leaves it somewhere the next start knows what to do with.

The claim first writes `.augd-claim.json` into the job (hidden: the job scan skips it) recording where it came
from, so a job recovered from work/ after a crash keeps its routing folder and knows its output was checked.
Each job's attempts are counted durably in work/.attempts/<job> (the daemon's own folder: a read-only job is
counted too): a job found in work/ at start-up ended the last process that ran it, and one that did so
`max_attempts` times is a poison job, dead-lettered to failed/ instead of run again. A new claim counts from 1.
While a job runs, the daemon's log lines also go to `.augd-job.log` in the job, so that the failure report of
a job that killed the process can say what it was doing.
"""
from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import logging
import os
import shutil
import stat
from dataclasses import asdict, dataclass

from augd.daemon.watcher import CLAIM_FILE, JobReady
from augd.errors import UntrustedFileError
from augd.files import read_capped
from augd.jobfolder import ERROR_FILE, FAILURE_FILE

log = logging.getLogger("augd.daemon")

__all__ = ["JOB_LOG", "Claimed", "claim", "fail", "finish", "last_log_lines", "next_attempt", "open_job_log",
           "recover", "requeue"]

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
    recovered: bool = False       # found in work/ at start-up
    attempts: int = 1             # processes that started this job (each recovery adds one)

    def meta(self) -> dict:
        d = asdict(self)
        del d["path"], d["recovered"], d["attempts"]
        return d


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _free_path(room: str, name: str) -> str:
    """room/name, or room/name.1, room/name.2, ... whichever does not exist yet."""
    path, n = os.path.join(room, name), 0
    while os.path.lexists(path):
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
    tmp = path + ".tmp"
    _own(tmp)
    with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _SAFE, 0o644), "w", encoding="utf-8") as fh:
        json.dump(obj, fh, indent=2, ensure_ascii=False, sort_keys=True)
        fh.write("\n")
        fh.flush()
        os.fsync(fh.fileno())  # this fd: reopening the name in a job folder (files.fsync_file) could meet a FIFO
    os.replace(tmp, path)


def claim(job: JobReady, work_dir: str, *, output_checked: bool = True) -> Claimed | None:
    """Move a ready job into work/. None when it is gone or is no longer the folder that was found ready
    (a new folder dropped under the same name is a new job; the watcher will emit it when it is ready)."""
    try:
        if os.stat(job.path, follow_symlinks=False).st_ino != job.inode:
            return None
        dest = _free_path(work_dir, job.name)
        c = Claimed(path=dest, name=job.name, route=job.route, inbox_relpath=job.relpath, claimed_at=_now(),
                    output_checked=output_checked)
        try:
            _write_json(os.path.join(job.path, CLAIM_FILE), c.meta())
        except PermissionError as exc:  # a read-only drop still runs; a crash recovery then forgets its route
            log.warning("cannot write %s into %s (%s); claiming it without", CLAIM_FILE, job.path, exc)
        os.rename(job.path, dest)
    except FileNotFoundError:
        return None
    _count(c)
    return c


def recover(work_dir: str) -> list[Claimed]:
    """Jobs left in work/ by a crash or a forced exit, oldest claim first."""
    out = []
    try:
        names = sorted(os.listdir(work_dir))
    except FileNotFoundError:
        return out
    counted = set()
    for name in names:
        path = os.path.join(work_dir, name)
        if name.startswith(".") or not os.path.isdir(path) or os.path.islink(path):
            continue
        counted.add(name)
        try:
            meta = json.loads(read_capped(os.path.join(path, CLAIM_FILE), 64 * 1024, "claim"))
            c = Claimed(path=path, recovered=True, attempts=_attempts(path), **{k: meta[k] for k in
                        ("name", "route", "inbox_relpath", "claimed_at", "output_checked")})
        except (OSError, UntrustedFileError, ValueError, KeyError, TypeError):
            # Claimed by hand, or the claim file was lost: run it as a plain job, and check its output again.
            c = Claimed(path=path, name=name, route=None, inbox_relpath=name, claimed_at=_now(),
                        output_checked=False, recovered=True, attempts=_attempts(path))
        out.append(c)
    for name in _counted(work_dir) - counted:  # the job left work/ before its counter was removed
        _uncount(os.path.join(work_dir, name))
    out.sort(key=lambda c: c.claimed_at)
    return out


ATTEMPTS_DIR = ".attempts"


def _counter(job_path: str) -> str:
    work, name = os.path.split(job_path)
    return os.path.join(work, ATTEMPTS_DIR, name)


def _count(c: Claimed) -> None:
    os.makedirs(os.path.dirname(_counter(c.path)), exist_ok=True)
    _write_json(_counter(c.path), {"attempts": c.attempts})


def _attempts(job_path: str) -> int:
    """Processes that started this job so far; 1 when uncounted (it was claimed, so it may have started)."""
    try:
        return max(1, int(json.loads(read_capped(_counter(job_path), 4096, "attempts"))["attempts"]))
    except (OSError, UntrustedFileError, ValueError, KeyError, TypeError):
        return 1


def _counted(work_dir: str) -> set[str]:
    try:
        return {n for n in os.listdir(os.path.join(work_dir, ATTEMPTS_DIR)) if not n.endswith(".tmp")}
    except OSError:
        return set()


def _uncount(job_path: str) -> None:
    try:
        os.unlink(_counter(job_path))
        os.rmdir(os.path.dirname(_counter(job_path)))  # work/ stays empty between jobs (one thread claims)
    except OSError:
        pass  # never there, already gone (recover() sweeps what is left), or other jobs still counted


def next_attempt(c: Claimed) -> Claimed:
    """Count one more attempt of a recovered job, durably, before it runs (a crash during it counts)."""
    c = dataclasses.replace(c, attempts=c.attempts + 1)
    _count(c)
    return c


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


def requeue(c: Claimed, inbox: str) -> str:
    """Put a claimed job back where it was dropped (shutdown before it finished). Returns the new path."""
    dest = _free_path(inbox, c.inbox_relpath)
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    return _move(c, dest)


def finish(c: Claimed, done_dir: str, on_success: str) -> str | None:
    """After success: move to done/ (returns the path) or delete."""
    if on_success == "delete":
        shutil.rmtree(c.path)
        _uncount(c.path)
        return None
    return _move(c, _free_path(done_dir, c.name))


def fail(c: Claimed, failed_dir: str, failure: dict, text: str) -> str:
    """Write failure.json (machine) and error.txt (human) into the job, then move it to failed/."""
    failure = {"job": c.name, "inbox_path": c.inbox_relpath, "claimed_at": c.claimed_at, "failed_at": _now(),
               **failure}
    try:
        _write_json(os.path.join(c.path, FAILURE_FILE), failure)
        error_txt = os.path.join(c.path, ERROR_FILE)
        _own(error_txt)
        with os.fdopen(os.open(error_txt, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _SAFE, 0o644), "w",
                       encoding="utf-8") as fh:
            fh.write(text.rstrip("\n") + "\n")
    except OSError as exc:  # a read-only job folder must still leave work/
        log.error("cannot write the failure report into %s: %s", c.path, exc)
    return _move(c, _free_path(failed_dir, c.name))


def _move(c: Claimed, dest: str) -> str:
    """The job leaves work/ (by rename, so it is always whole in one room) and its attempts stop counting."""
    os.rename(c.path, dest)
    _uncount(c.path)
    return dest
