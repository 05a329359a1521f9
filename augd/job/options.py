"""How a job is run and followed (JobOptions, JobWatch, Cancel) and what it gives back (JobResult): the values
that `augd run`, the daemon, the bench and every executor pass around. A leaf of augd/job."""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable

from augd import defaults
from augd.defaults import ExecutorKind
from augd.errors import CancelCause, JobCancelled

__all__ = ["Cancel", "ExecutorKind", "JobOptions", "JobResult", "JobWatch"]


@dataclass(frozen=True)
class JobOptions:
    """How to run a job. `name`: the output folder's (default: the input folder's name); `workers`: images in
    parallel (default: all usable cores); `overwrite`: replace a complete output; `max_pixels`: larger images are
    rejected; `memory_limit`: bytes the process' resident memory may grow by while the job runs
    (augd.job.resources), None: no limit; `max_rejected`: the largest fraction of the inputs that may be rejected,
    above it the job fails and commits nothing; `executor`: an ExecutorKind (or its value); `executor_args`: the
    executor's own options (Beam's pipeline options, e.g. --runner=DataflowRunner). Beam sizes its own workers and
    memory: `workers` and `memory_limit` apply to threads and processes. `check`: run `augd check` on the job first
    (augd.check), its report as check.json beside the manifest, and fail the job (check_failed, writing nothing)
    when it finds what `check` names (leak, rejected; () never fails); None: no check. `choice`: the executor
    already chosen (an augd.job.executors.Choice: `augd run`'s before its early pool, the daemon's for its warm
    pool); None: run_job chooses from `executor` and the job's plan."""
    name: str | None = None
    workers: int | None = None
    overwrite: bool = False
    max_pixels: int = defaults.MAX_PIXELS
    memory_limit: int | None = None
    max_rejected: float | None = None
    executor: ExecutorKind = ExecutorKind.AUTO
    executor_args: tuple[str, ...] = ()
    check: tuple[str, ...] | None = None
    #: The job folder's (device, inode) when it was claimed (the daemon's); None: taken as the job starts. The
    #: commit happens only while the folder is still that one.
    root: tuple[int, int] | None = None
    choice: object = None       # augd.job.executors.Choice (this module is a leaf of augd/job)

    def __post_init__(self):
        try:
            object.__setattr__(self, "executor", ExecutorKind(self.executor))
        except ValueError:
            raise ValueError(f"executor must be one of {[k.value for k in ExecutorKind]}; got {self.executor!r}") \
                from None
        object.__setattr__(self, "executor_args", tuple(self.executor_args))
        if self.check is not None:
            from augd.check import FAIL_ON
            if bad := [k for k in self.check if k not in FAIL_ON]:
                raise ValueError(f"check: {bad}: expected some of {list(FAIL_ON)}")
            object.__setattr__(self, "check", tuple(self.check))


@dataclass(frozen=True)
class JobResult:
    """A committed job: its name, its output folder, and what it did (manifest.json holds the same report)."""
    name: str
    out_dir: str
    report: "JobReport"  # noqa: F821 - augd.job.report, imported where the result is built


class Cancel:
    """A job's cancel signal: `set(cause)` stops it between two images with JobCancelled(cause). The first
    cause set is the one that counts."""

    def __init__(self):
        self._event = threading.Event()
        self._lock = threading.Lock()
        self.cause: CancelCause | None = None

    def set(self, cause: CancelCause) -> bool:
        """Ask the job to stop; False when it was asked already."""
        with self._lock:
            if self._event.is_set():
                return False
            self.cause = cause
            self._event.set()
            return True

    def is_set(self) -> bool:
        return self._event.is_set()


@dataclass(frozen=True)
class JobWatch:
    """What a caller follows of a running job, every part optional: each image's outcome (in output order), the
    live progress after it, and the cancel signal. (Beam's runner reports no image until its pipeline ends: a
    Beam job is followed by its end only, and runs to it.)"""
    on_image: Callable | None = None       # (ImageOutcome) -> None
    on_progress: Callable | None = None    # (JobProgress) -> None
    cancel: Cancel | None = None
    #: Called just before the commit, may raise to stop it (JobCancelled): the daemon checks it still holds the job.
    before_commit: Callable[[], None] | None = None
    #: () -> None, called as the job works outside its images: each record or file its scan reads, each chunk its
    #: check hashes, each file its commit syncs (the daemon's heartbeat: a long scan is no hang).
    on_beat: Callable[[], None] | None = None

    def beat(self) -> None:
        """The job is working: `on_beat`, then JobCancelled if it was cancelled (the scan's and the check's
        beats: job_timeout_seconds covers them)."""
        self.tick()
        if self.cancel is not None and self.cancel.is_set():
            raise JobCancelled(self.cancel.cause, "before its first image, while it read and checked its inputs")

    def tick(self) -> None:
        """The job is working, where it cannot stop (its commit): `on_beat` alone."""
        if self.on_beat is not None:
            self.on_beat()
