"""What the daemon reports as it works, as values: the job worker and the daemon emit them (`Metrics.record`), and
one place turns each into metrics (augd/daemon/metrics.py, `Metrics.record`). A new metric of something already
reported is a change to metrics.py alone; a new kind of report is a value here, its emit where it happens and its
case in `record`. (The log lines are augd.daemon.logs.event's: for people and log pipelines, not counted.)"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from augd.errors import FailureReason

if TYPE_CHECKING:
    from augd.job import ImageOutcome, JobReport

__all__ = ["AlreadyCommitted", "ClaimFailed", "ClaimLost", "ConnectionClosed", "Ended", "Event", "Failed", "Image",
           "Progressed", "Started", "Succeeded", "TakenOver"]


@dataclass(frozen=True)
class Started:
    """A job started running (its pipeline resolved)."""


@dataclass(frozen=True)
class Ended:
    """The runner holds no job any more (whatever became of it)."""


@dataclass(frozen=True)
class Progressed:
    images_per_second: float


@dataclass(frozen=True)
class Image:
    """One image of the running job processed."""
    outcome: ImageOutcome


@dataclass(frozen=True)
class Succeeded:
    """The running job committed: what only its report knows (rejections by the scan, bytes written)."""
    report: JobReport
    seconds: float


@dataclass(frozen=True)
class AlreadyCommitted:
    """A job taken over whose own commit had landed before its holder died: a success, with no report."""


@dataclass(frozen=True)
class Failed:
    reason: FailureReason
    seconds: float


@dataclass(frozen=True)
class ClaimFailed:
    """A ready job could not be claimed for a transient reason; it stays in the inbox."""


@dataclass(frozen=True)
class TakenOver:
    """A job in work/ whose holder was gone was taken over."""


@dataclass(frozen=True)
class ClaimLost:
    """This daemon no longer holds a job it held (taken over by another, or its records removed)."""


@dataclass(frozen=True)
class ConnectionClosed:
    """The HTTP server closed a connection on its own (augd.daemon.httpconn.DROP_REASONS)."""
    reason: str


Event = (Started | Ended | Progressed | Image | Succeeded | AlreadyCommitted | Failed | ClaimFailed | TakenOver
         | ClaimLost | ConnectionClosed)
