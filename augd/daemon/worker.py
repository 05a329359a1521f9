"""The job worker: one thread that takes JobReady values off the queue and runs each job to its outcome.

claim (inbox -> work) -> pipeline -> run_job -> done/ (or deleted) | failed/ with failure.json + error.txt,
or back to the inbox when shutdown cancels it. A job in work/ whose holder is gone (this daemon's last process,
or another daemon sharing the folders: augd/daemon/claims) is taken over at start-up and by the rescans while
idle; after `max_attempts` processes started it, it goes to failed/ (reason crashed) instead of taking the daemon
down again. A job another daemon took over from this one is left to it. It is also the daemon's heartbeat:
`tick()` runs every TICK_SECONDS while idle and after every image while a job runs, and feeds /healthz and
systemd's watchdog, so a hang anywhere in the work stops both.
"""
from __future__ import annotations

import collections
import logging
import queue
import threading
import time
import traceback
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from augd import defaults
from augd.daemon import claims
from augd.daemon import events as ev
from augd.daemon.claims import Claimed, Leases, Verdict
from augd.daemon.logs import event
from augd.daemon.metrics import Metrics
from augd.daemon.outcomes import Outcome, Outcomes
from augd.daemon.routing import resolve_pipeline
from augd.daemon.sdnotify import Notifier, watchdog_interval
from augd.daemon.watcher import JobReady
from augd.errors import CancelCause, FailureReason, JobCancelled, JobFailed, SpecError
from augd.io import is_complete
from augd.job.executors import Choice, ExecutorKind, Host, choose, for_job, traits
from augd.job.options import Cancel

if TYPE_CHECKING:
    from augd.job import JobProgress

log = logging.getLogger("augd.daemon")

__all__ = ["JobWorker", "Outcome", "Pause", "RunningJob", "no_pause"]

#: A seam for tests: called with a point's name ("startup" before TensorFlow loads, "loop" on every tick of the
#: work loop, "beat" at every beat of a job outside its images: each record or file its scan reads, each file its
#: commit syncs, "image" after each image a running job wrote) and a should_stop() it must return on; it may block
#: there to stall the daemon (or hold a job mid-way) on purpose.
Pause = Callable[[str, Callable[[], bool]], None]


def no_pause(point: str, should_stop: Callable[[], bool]) -> None:
    """The default Pause: never waits."""


#: Images of each finished job drawn on the status page's preview sheet (its first ones, with 3 variants each).
PREVIEW_IMAGES = 3


@dataclass
class RunningJob:
    """The job the worker runs now, as /status shows it; `progress` is None until its first image."""
    name: str
    pipeline: str
    chosen_by: str          # how the pipeline was chosen (routing folder, augd.yaml, default)
    started: float          # Unix seconds
    attempt: int
    key: str                # its folder's name in work/ (its claim records')
    progress: JobProgress | None = None


class JobWorker(Outcomes):
    """worker = JobWorker(settings, q, leases, metrics, notifier); worker.start(); ... worker.stop_taking()"""

    def __init__(self, settings, jobs: "queue.Queue[JobReady]", leases: Leases, metrics: Metrics, notifier: Notifier,
                 waiting=lambda: 0, pause: Pause = no_pause, retry=lambda job: None):
        self.settings = settings            # replaced whole on SIGHUP
        self.jobs = jobs
        self.leases = leases
        self.metrics = metrics
        self.notifier = notifier
        self.waiting = waiting
        self.pause = pause
        self.retry = retry                  # (JobReady) -> None: the watcher emits the job again at its next rescan
        self.claim_retries: dict[str, dict] = {}   # relpath -> the last transient claim failure, for /status
        self._lost_counted: dict[str, str] = {}   # job key -> why it was lost (said once)
        self.heartbeat = time.monotonic()
        self.last_results: collections.deque = collections.deque(maxlen=20)
        self.current: RunningJob | None = None
        self.engine = None                  # the daemon's Engine, set once TensorFlow is loaded (Daemon.start)
        self.choice = None                  # what warm_pool chose (augd.job.executors.Choice)
        self.pool = None                    # its worker processes (augd.job.workers.pool.ProcessPool), kept across jobs
        self.last_preview: tuple[str, float, bytes] | None = None  # (job, finished, PNG) of its first images
        self._stop = threading.Event()
        self._draining = False              # the daemon is stopping: its workers are not replaced
        self._cancel: Cancel | None = None
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._last_ping = 0.0
        self._ping_every = min(watchdog_interval() or defaults.TICK_SECONDS, defaults.TICK_SECONDS)
        self._last_status = ""
        self._last_progress_log = 0.0

    # -- lifecycle -------------------------------------------------------------------------------------------
    def start(self) -> "JobWorker":
        self._thread = threading.Thread(target=self._loop, name="augd-runner", daemon=True)
        self._thread.start()
        return self

    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def join(self, timeout: float | None = None) -> bool:
        if self._thread is not None:
            self._thread.join(timeout)
        return not self.alive()

    def warm_pool(self) -> None:
        """Start (or resize, or stop) the pool of worker processes the settings ask for; called at start and
        before each job, so a SIGHUP's new `workers` or `executor` applies from the next job."""
        from augd.job.workers.pool import ProcessPool
        # no job to weigh: a pool that stays warm pays for every job (threads on a GPU host, one core, short memory)
        self.choice = choose(self.settings.local_executor, None, Host.here(self.settings.workers,
                                                                           self.engine.device.kind == "GPU"))
        want, workers = traits(self.choice.kind).pool, self.choice.workers
        if self.pool is not None and (not want or self.pool.size != workers or not self.pool.usable):
            self.close_pool()
        if want and self.pool is None:
            try:
                self.pool = ProcessPool(workers, self.engine.options)
            except OSError as exc:  # no processes to be had (limits, memory): the job runs on threads
                log.error("cannot start %d worker processes (%s); running jobs on threads", workers, exc)
                self.choice = Choice(ExecutorKind.THREADS, workers, f"{workers} worker processes could not start "
                                     f"({exc})", requested=self.choice.requested)
                return
            event("workers_started", "started %d worker processes (pids %s)", workers,
                  " ".join(map(str, self.pool.pids())), workers=workers)
            if self._draining:   # the stop signal came while it started
                self.pool.drain()

    def _unwatched(self, c, spec, options, watch):
        """run_job on an executor that does not call the JobWatch (Beam: its traits), on a thread of its own, this
        one ticking meanwhile (the health check and systemd's watchdog see a live daemon through a long pipeline).
        It is not cancelled: it runs to its end (and commits only if this daemon still holds the job)."""
        from augd.job import run_job
        s, done = self.settings, {}

        def run() -> None:
            try:
                done["result"] = run_job(c.path, spec, s.out, options, watch, engine_options=self.engine.options)
            except BaseException as exc:  # noqa: BLE001 - re-raised on the runner thread below
                done["error"] = exc

        t = threading.Thread(target=run, name=f"augd-{options.executor.value}", daemon=True)
        t.start()
        while t.is_alive():
            t.join(defaults.TICK_SECONDS)
            self.tick()
        if "error" in done:
            raise done["error"]
        return done["result"]

    def drain_pool(self) -> None:
        """Shutting down (called from the stop signal's handler: no locks): the pool replaces no worker that dies
        from here on, and a job that loses its workers so goes back to the inbox."""
        self._draining = True
        if self.pool is not None:
            self.pool.drain()

    def close_pool(self) -> None:
        pool, self.pool = self.pool, None
        if pool is not None:
            pool.close()

    def stop_taking(self) -> None:
        """Take no new job; the current one runs on."""
        self._stop.set()

    def cancel_current(self, cause: CancelCause) -> bool:
        """Cancel the running job between two images: SHUTDOWN requeues it, TIMEOUT fails it, LOST leaves it to
        the daemon that took it over."""
        with self._lock:
            return self._cancel is not None and self._cancel.set(cause)

    # -- heartbeat -------------------------------------------------------------------------------------------
    def _beat(self) -> None:
        """A job's beat outside its images (its scan, its check, its commit: JobWatch.on_beat), a tick at most
        every BEAT_SECONDS (a scan beats per record)."""
        self.pause("beat", self._stop.is_set)
        if time.monotonic() - self.heartbeat >= defaults.BEAT_SECONDS:
            self.tick()

    def tick(self) -> None:
        self.pause("loop", self._stop.is_set)
        now = time.monotonic()
        self.heartbeat = now
        if now - self._last_ping >= self._ping_every:
            self._last_ping = now
            self.notifier.notify("WATCHDOG=1")
        status = self.status_line()
        if status != self._last_status:
            self._last_status = status
            self.notifier.notify(f"STATUS={status}")

    def status_line(self) -> str:
        ready, waiting = self.jobs.qsize(), self.waiting()
        cur = self.current
        if cur is None:
            head = "stopping" if self._stop.is_set() else "idle"
        else:
            p = cur.progress
            head = f"running {cur.name}" + (f" ({p.done}/{p.total} images)" if p is not None else "")
        return f"{head}; queue: {ready} ready, {waiting} settling"

    # -- the loop --------------------------------------------------------------------------------------------
    def _loop(self) -> None:
        next_rescan = 0.0
        try:
            while not self._stop.is_set():
                self.tick()
                if time.monotonic() >= next_rescan:   # jobs left in work/ go first, at start-up and while idle
                    took = self._take_over()
                    next_rescan = 0.0 if took else time.monotonic() + min(self.settings.rescan_seconds,
                                                                          self.leases.lease_seconds / 4)
                    continue
                try:
                    job = self.jobs.get(timeout=defaults.TICK_SECONDS)
                except queue.Empty:
                    continue
                if self._stop.is_set():
                    break  # it stays in the inbox; the next start finds it again
                self._guarded(self._take, job, job.relpath)
        except Exception:  # noqa: BLE001 - log it; the main thread sees the runner gone and exits non-zero
            log.exception("job runner crashed")
            raise
        finally:
            self.current = None
            self.tick()

    def _guarded(self, step, job, where: str) -> None:
        """Run a step; an OSError (a room not writable, a full disk) leaves the job where it is, and it is tried
        again: a ready job still in the inbox by the watcher's next rescan, one in work/ by this daemon's next
        takeover rescan."""
        try:
            step(job)
        except OSError as exc:
            self.current = None
            self.metrics.record(ev.Ended())
            if isinstance(job, JobReady) and claims.still_ready(job):
                return self._claim_failed(job, exc)
            again = self.leases.abandon()
            log.error("job %s: %s; %s", where, exc, "it stays in work/ and the next rescan runs it again" if again
                      else "it stays where it is")

    def _claim_failed(self, job: JobReady, exc: OSError) -> None:
        self.metrics.record(ev.ClaimFailed())
        entry = self.claim_retries.setdefault(job.relpath, {"job": job.relpath, "failures": 0})
        entry.update(failures=entry["failures"] + 1, error=str(exc), last=round(time.time(), 3))
        event("claim_failed", "job %s: cannot claim it (%s); it stays in the inbox, and the next rescan (within "
              "%gs) claims it again", job.relpath, exc, self.settings.rescan_seconds, level=logging.WARNING,
              job=job.name, error=str(exc), failures=entry["failures"])
        self.retry(job)

    def _take_over(self) -> bool:
        """Run one job in work/ whose holder is gone, now held by this daemon; False when there was none."""
        try:
            c = claims.take_over(self.leases)
        except OSError as exc:
            log.error("cannot look for jobs to take over in %s: %s", self.settings.work, exc)
            return False
        if c is not None:
            self._guarded(self._recover, c, c.name)
        return c is not None

    def _recover(self, c: Claimed) -> Outcome:
        """A job in work/ whose holder is gone: run again, dead-lettered or given up, as claims.recover rules."""
        s = self.settings
        self.metrics.record(ev.TakenOver())
        r = claims.recover(c, self.leases, s.out, s.max_attempts)
        for path in r.swept:
            event("stale_temp_removed", "removed stale temp output %s", path, path=path)
        c = r.claimed
        if r.verdict is Verdict.DEAD_LETTER:
            return self._dead_letter(c, r.why)
        if r.verdict is Verdict.LOST:
            return self._lost(c, time.monotonic())
        event("job_recovered", "job %s found in work/: running it again (attempt %d of %d) as its holder %s is gone",
              c.name, c.attempts, s.max_attempts, c.taken_from or "(none recorded)", job=c.name, attempt=c.attempts,
              taken_from=c.taken_from)
        return self._run(c)

    def _take(self, job: JobReady) -> Outcome:
        s = self.settings
        taken = claims.take(job, self.leases, s.out)
        c, clash = taken.claimed, taken.clash
        self.claim_retries.pop(job.relpath, None)
        if c is None:
            event("job_skipped", "job %s is gone (another daemon claimed it, or it was removed) or was replaced before "
                  "it was claimed", job.relpath, job=job.name)
            return Outcome.SKIPPED
        event("job_claimed", "claimed %s -> %s", job.relpath, c.path, job=c.name, trigger=job.trigger,
              waited_seconds=round(time.time() - job.seen_at, 3) if job.seen_at else None)
        if clash:
            return self._fail(c, time.monotonic(), FailureReason.OUTPUT_EXISTS, None,
                              f"{s.out}/{c.name} already holds a complete output of an earlier job named "
                              f"{c.name!r}. augd never overwrites an output: rename the job folder (or remove the "
                              f"old output) and drop it again.")
        return self._run(c)

    def _run(self, c: Claimed) -> Outcome:
        with claims.job_log(c):
            return self._run_logged(c)

    def _run_logged(self, c: Claimed) -> Outcome:
        s = self.settings
        t0 = time.monotonic()
        if c.recovered and is_complete(f"{s.out}/{c.name}"):
            if c.output_checked:  # our own commit landed just before the crash: the job is done
                event("job_done", "job %s was already committed before the restart", c.name, job=c.name)
                self.metrics.record(ev.AlreadyCommitted())
                return self._finish(c, t0, None, "already committed before the restart")
            return self._fail(c, t0, FailureReason.OUTPUT_EXISTS, None, f"{s.out}/{c.name} already holds a "
                              f"complete output; rename the job folder (or remove the old output) and drop it again.")
        try:
            spec, how = resolve_pipeline(c.path, c.route, s.default_pipeline, s.search_dirs(), s.labels,
                                         s.annotations)
        except SpecError as exc:
            return self._fail(c, t0, FailureReason.BAD_PIPELINE, None, f"the job's pipeline is invalid: {exc}")
        cancel = Cancel()
        with self._lock:
            self._cancel = cancel
            self.current = RunningJob(name=c.name, pipeline=spec.name, chosen_by=how, started=time.time(),
                                      attempt=c.attempts, key=c.key)
        from augd.preview import JobSheet
        sheet = JobSheet(spec, PREVIEW_IMAGES if s.status_preview_on else 0)  # the status page's picture of it
        self._lost_counted.pop(c.key, None)
        timer = None
        if s.job_timeout_seconds:
            timer = threading.Timer(s.job_timeout_seconds, self.cancel_current, (CancelCause.TIMEOUT,))
            timer.daemon = True
            timer.start()
        event("job_started", "job %s started: pipeline %s (by %s)", c.name, spec.name, how, job=c.name,
              pipeline=spec.name, pipeline_by=how)
        self.metrics.record(ev.Started())
        self._last_progress_log = time.monotonic()
        try:
            result = self._execute(c, spec, cancel, sheet)
        except Exception as exc:  # noqa: BLE001 - a crash of one job must not stop the daemon
            return self._ended_by(c, t0, spec, exc)
        finally:
            if timer is not None:
                timer.cancel()
            with self._lock:
                self._cancel = None
            self.metrics.record(ev.Ended())
        return self._done(c, t0, spec, result, sheet)

    def _execute(self, c: Claimed, spec, cancel, sheet):
        """run_job on the executor the one chooser gives (augd.job.executors.for_job: the warm pool's choice, or
        where the job's size diverts it), watched where the executor calls the JobWatch."""
        from augd.job import JobOptions, JobWatch, run_job
        s = self.settings

        def on_image(o) -> None:
            self.metrics.record(ev.Image(o))
            sheet.add(o)
            self.tick()
            self.pause("image", cancel.is_set)   # tests hold a job here after an image, until it is cancelled
        self.warm_pool()
        local = self.choice.served_by(self.pool.size if self.pool else None)
        choice = for_job(local, c.path, s.divert)
        options = JobOptions(name=c.name, workers=s.workers, max_pixels=s.max_pixels,
                             memory_limit=s.job_memory_bytes, max_rejected=s.max_rejected,
                             executor=choice.kind, root=c.identity, executor_args=s.executor_args(choice.kind),
                             choice=choice, check=None if s.check is None else tuple(s.check.fail_on))
        if choice is not local:
            event("job_diverted", "job %s goes to %s (%s)", c.name, choice.kind.value,
                  " ".join(options.executor_args) or "its default options", job=c.name,
                  executor=choice.kind.value)
        if not traits(options.executor).watch:
            return self._unwatched(c, spec, options, JobWatch(before_commit=lambda: self._still_held(c)))
        return run_job(c.path, spec, s.out, options,
                       JobWatch(on_image=on_image, on_progress=self._progress, cancel=cancel,
                                before_commit=lambda: self._still_held(c), on_beat=self._beat),
                       self.engine, self.pool)

    def _ended_by(self, c: Claimed, t0: float, spec, exc: Exception) -> Outcome:
        """What a job's run that raised becomes (called in its except block: a crash keeps its traceback)."""
        s = self.settings
        if isinstance(exc, JobCancelled):
            if exc.cause is CancelCause.LOST:
                return self._lost(c, t0)
            if exc.cause is CancelCause.SHUTDOWN:
                return self._requeue(c)
            return self._fail(c, t0, FailureReason.TIMEOUT, spec.name,
                              f"the job ran longer than job_timeout_seconds={s.job_timeout_seconds:g} and was "
                              f"cancelled {exc.where or f'after {self._done_images()} images'}; split it, or raise "
                              f"the limit.")
        if isinstance(exc, JobFailed):
            if exc.reason is FailureReason.WORKER_LOST and self._draining:
                return self._requeue(c)   # its workers were stopped with the daemon: not the job's fault
            return self._fail(c, t0, exc.reason, spec.name, str(exc))
        return self._fail(c, t0, FailureReason.CRASHED, spec.name, f"augd crashed on this job: {exc!r}\n\n"
                          + traceback.format_exc())

    def _done(self, c: Claimed, t0: float, spec, result, sheet) -> Outcome:
        duration = time.monotonic() - t0
        r = result.report
        self.metrics.record(ev.Succeeded(r, duration))
        if (png := sheet.png(c.name)) is not None:
            self.last_preview = (c.name, time.time(), png)
        event("job_done", "job %s done: %d/%d images, %d records, %d rejected, %.1f img/s -> %s", c.name,
              r.inputs.written, r.inputs.seen, r.records.written, r.inputs.rejected,
              r.inputs.written / duration if duration > 0 else 0.0, result.out_dir, job=c.name,
              pipeline=spec.name, images=r.inputs.written, rejected=r.inputs.rejected,
              records=r.records.written, seconds=round(duration, 3), output=result.out_dir)
        return self._finish(c, t0, result, None)

    def _done_images(self) -> int:
        cur = self.current
        return cur.progress.done if cur and cur.progress is not None else 0

    def _progress(self, p: JobProgress) -> None:
        if self.current is not None:
            self.current.progress = p
        self.metrics.record(ev.Progressed(p.images_per_second))
        now = time.monotonic()
        if now - self._last_progress_log >= defaults.PROGRESS_LOG_SECONDS:
            self._last_progress_log = now
            event("job_progress", "job %s: %d/%d images, %.1f img/s", p.name, p.done, p.total, p.images_per_second,
                  job=p.name, done=p.done, total=p.total, images_per_second=round(p.images_per_second, 2))
