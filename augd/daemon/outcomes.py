"""Where a job goes once the job worker is done with it: done/ (or deleted), failed/ with failure.json and
error.txt, back to the inbox (shutdown), or left to whoever holds it now (another daemon took it over, or its claim
records went away); each outcome recorded for /status (`last_results`) and the metrics. A part of JobWorker
(augd/daemon/worker.py), which owns what it reads: settings, leases, metrics, the current job.
"""
from __future__ import annotations

import enum
import logging
import time
from typing import TYPE_CHECKING

from augd.daemon import claims
from augd.daemon import events as ev
from augd.daemon.claims import Claimed
from augd.daemon.logs import event
from augd.errors import CancelCause, FailureReason, JobCancelled

if TYPE_CHECKING:
    from augd.job import JobResult

log = logging.getLogger("augd.daemon")

__all__ = ["Outcome", "Outcomes"]


class Outcome(str, enum.Enum):
    DONE = "done"
    FAILED = "failed"
    REQUEUED = "requeued"
    SKIPPED = "skipped"
    LOST = "lost"          # another daemon took it over


class Outcomes:
    """JobWorker's outcomes (a mixin: its attributes are the worker's)."""

    def lost(self, job_keys: list[str]) -> None:
        """The main loop's renewal found these held jobs no longer held (taken over by another daemon, or their
        claim records removed): stop the one running."""
        cur = self.current
        for key in job_keys:
            self._count_lost(key)
            if cur is not None and cur.key == key:
                self.cancel_current(CancelCause.LOST)

    def _count_lost(self, key: str) -> str:
        """Why this daemon no longer holds the job: said and counted once per job."""
        if key in self._lost_counted:
            return self._lost_counted[key]
        try:
            how = self.leases.lost_how(key)
        except OSError as exc:
            how = f"its claim records cannot be read ({exc})"
        self._lost_counted[key] = how
        self.metrics.record(ev.ClaimLost())
        log.error("job %s: this daemon no longer holds it: %s; stopping it here, committing nothing", key, how)
        return how

    def _record(self, c, outcome: Outcome, t0: float, **extra) -> None:
        self.last_results.appendleft({"job": c.name, "result": outcome.value, "finished": time.time(),
                                      "seconds": round(time.monotonic() - t0, 3), **extra})
        self.current = None

    def _still_held(self, c: Claimed) -> None:
        """Before the commit: stop (JobCancelled LOST) if another daemon took the job over meanwhile."""
        if not self._mine(c):
            raise JobCancelled(CancelCause.LOST)

    def _mine(self, c: Claimed) -> bool:
        """Whether this daemon still holds the job; True when its records cannot be read now (it held it last)."""
        try:
            return self.leases.holds(c.key)
        except OSError as exc:
            log.warning("job %s: cannot read its claim records (%s); going on as its holder", c.name, exc)
            return True

    def _lost(self, c: Claimed, t0: float) -> Outcome:
        """This daemon no longer holds the job: leave its folder, its records and its output to its holder (or,
        its records gone, to the next rescan's takeover)."""
        how = self._count_lost(c.key)
        self.leases.forget(c.key)
        event("job_lost", "job %s given up, nothing committed, its folder left in work/: %s", c.name, how,
              level=logging.WARNING, job=c.name, why=how)
        self._record(c, Outcome.LOST, t0)
        return Outcome.LOST

    def _finish(self, c, t0, result: JobResult | None, note: str | None) -> Outcome:
        s = self.settings
        if not self._mine(c):   # committed, then taken over: the folder is the new holder's to move
            return self._lost(c, t0)
        dest = claims.finish(c, s.done, s.on_success, self.leases)
        if dest is None and s.on_success != "delete":
            log.warning("job %s: its folder left work/ after its output was committed; nothing to move to done/",
                        c.name)
        extra = {"output": result.out_dir, "images": result.report.inputs.written,
                 "records": result.report.records.written} if result else {"note": note}
        self._record(c, Outcome.DONE, t0, moved_to=dest, **extra)
        return Outcome.DONE

    def _dead_letter(self, c: Claimed, why: str | None = None) -> Outcome:
        """A job that ended the process max_attempts times (or whose attempts cannot be counted): to failed/,
        with what it was doing last, instead of taking the daemon down again."""
        lines = claims.last_log_lines(c)
        last = lines[-1] if lines else None
        why = why or "it was killed or crashed while running it each time"
        return self._fail(
            c, time.monotonic(), FailureReason.CRASHED, None,
            f"the job ended the daemon's process {c.attempts} times (max_attempts={self.settings.max_attempts}): "
            f"{why}, so it is not run again. Last log line: "
            f"{last or '(none)'}\n\nThe daemon's last log lines while it ran (all of them are in {claims.JOB_LOG}):\n"
            + "\n".join(lines), last_log_line=last)

    def _fail(self, c, t0, reason: FailureReason, pipeline: str | None, message: str, **extra) -> Outcome:
        s = self.settings
        if not self._mine(c):   # another daemon took it over: its folder and outcome are theirs
            return self._lost(c, t0)
        duration = time.monotonic() - t0
        message = message.replace(c.path + "/", "")  # "augd.yaml:3: ...": the job folder moves on from work/
        self.metrics.record(ev.Failed(reason, duration))
        failure = {"reason": reason, "message": message.splitlines()[0] if message else reason,
                   "pipeline": pipeline, "route": c.route, "seconds": round(duration, 3),
                   "attempts": c.attempts, **extra}
        text = f"augd could not process job {c.name!r} (reason: {reason}).\n\n{message}\n"
        dest = claims.fail(c, s.failed, failure, text, self.leases)
        event("job_failed", "job %s failed (%s): %s%s", c.name, reason, failure["message"],
              "" if dest else " (its folder is gone from work/: nothing to move to failed/)", level=logging.WARNING,
              job=c.name, reason=reason, moved_to=dest)
        self._record(c, Outcome.FAILED, t0, reason=reason, message=failure["message"], moved_to=dest,
                     attempts=c.attempts)
        return Outcome.FAILED

    def _requeue(self, c) -> Outcome:
        if not self._mine(c):
            return self._lost(c, time.monotonic())
        try:
            dest = claims.requeue(c, self.settings.inbox, self.leases)
        except OSError as exc:
            log.error("cannot move job %s back to the inbox (%s); it stays in work/ and runs at the next start",
                      c.name, exc)
            self.current = None
            return Outcome.REQUEUED
        event("job_requeued", "job %s cancelled by shutdown, back in the inbox: %s", c.name, dest, job=c.name)
        self.current = None
        return Outcome.REQUEUED
