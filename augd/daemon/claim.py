"""Job folders move between rooms by rename only: inbox -> work (the claim) -> done | failed, or back to the
inbox (requeue on shutdown). Every rename is atomic on one filesystem, so a job folder is always in exactly one
room, whole, and a crash at any point leaves it somewhere the next start knows what to do with.

The claim first writes `.augd-claim.json` into the job (hidden: the job scan skips it) recording where it came
from, so a job recovered from work/ after a crash keeps its routing folder and knows its output was checked.
It also counts the job's attempts, durably: a job found in work/ at start-up ended the last process that ran
it, and one that did so `max_attempts` times is a poison job, dead-lettered to failed/ instead of run again.
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
from dataclasses import asdict, dataclass

from augd.daemon.watcher import CLAIM_FILE, JobReady

log = logging.getLogger("augd.daemon")

__all__ = ["JOB_LOG", "Claimed", "claim", "fail", "finish", "last_log_lines", "next_attempt", "recover",
           "requeue"]

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
        del d["path"], d["recovered"]
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


def _write_json(path: str, obj) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(obj, fh, indent=2, ensure_ascii=False, sort_keys=True)
        fh.write("\n")
        fh.flush()
        os.fsync(fh.fileno())
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
    return c


def recover(work_dir: str) -> list[Claimed]:
    """Jobs left in work/ by a crash or a forced exit, oldest claim first."""
    out = []
    try:
        names = sorted(os.listdir(work_dir))
    except FileNotFoundError:
        return out
    for name in names:
        path = os.path.join(work_dir, name)
        if name.startswith(".") or not os.path.isdir(path) or os.path.islink(path):
            continue
        try:
            with open(os.path.join(path, CLAIM_FILE), encoding="utf-8") as fh:
                meta = json.load(fh)
            c = Claimed(path=path, recovered=True, attempts=int(meta.get("attempts", 1)), **{k: meta[k] for k in
                        ("name", "route", "inbox_relpath", "claimed_at", "output_checked")})
        except (OSError, ValueError, KeyError, TypeError):
            # Claimed by hand, or the claim file was lost: run it as a plain job, and check its output again.
            c = Claimed(path=path, name=name, route=None, inbox_relpath=name, claimed_at=_now(),
                        output_checked=False, recovered=True)
        out.append(c)
    out.sort(key=lambda c: c.claimed_at)
    return out


def next_attempt(c: Claimed) -> Claimed:
    """Count one more attempt of a recovered job, durably, before it runs (a crash during it counts)."""
    c = dataclasses.replace(c, attempts=c.attempts + 1)
    _write_json(os.path.join(c.path, CLAIM_FILE), c.meta())
    return c


def last_log_lines(c: Claimed, n: int = 20) -> list[str]:
    """The last lines the daemon logged while this job ran (from its earlier attempts too)."""
    try:
        with open(os.path.join(c.path, JOB_LOG), "rb") as fh:
            fh.seek(max(0, os.fstat(fh.fileno()).st_size - 64 * 1024))  # enough for n lines, bounded
            return fh.read().decode("utf-8", "replace").splitlines()[-n:]
    except OSError:
        return []


def requeue(c: Claimed, inbox: str) -> str:
    """Put a claimed job back where it was dropped (shutdown before it finished). Returns the new path."""
    dest = _free_path(inbox, c.inbox_relpath)
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    os.rename(c.path, dest)
    return dest


def finish(c: Claimed, done_dir: str, on_success: str) -> str | None:
    """After success: move to done/ (returns the path) or delete."""
    if on_success == "delete":
        shutil.rmtree(c.path)
        return None
    dest = _free_path(done_dir, c.name)
    os.rename(c.path, dest)
    return dest


def fail(c: Claimed, failed_dir: str, failure: dict, text: str) -> str:
    """Write failure.json (machine) and error.txt (human) into the job, then move it to failed/."""
    failure = {"job": c.name, "inbox_path": c.inbox_relpath, "claimed_at": c.claimed_at, "failed_at": _now(),
               **failure}
    try:
        _write_json(os.path.join(c.path, "failure.json"), failure)
        with open(os.path.join(c.path, "error.txt"), "w", encoding="utf-8") as fh:
            fh.write(text.rstrip("\n") + "\n")
    except OSError as exc:  # a read-only job folder must still leave work/
        log.error("cannot write the failure report into %s: %s", c.path, exc)
    dest = _free_path(failed_dir, c.name)
    os.rename(c.path, dest)
    return dest
