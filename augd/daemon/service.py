"""The daemon: wires config, watcher, runner, metrics, HTTP and signals, and owns the main thread.

Threads: the main thread (signals, reload, shutdown, the claim records' heartbeat), augd-watcher (emits
JobReady), augd-runner (claims, takes over and runs jobs, one at a time; the health heartbeat), augd-http.
Start-up: folders -> HTTP (/readyz 503) -> TensorFlow -> stale temp outputs removed -> watcher (start-up scan) ->
runner (jobs in work/ whose holder is gone first) -> READY=1.
"""
from __future__ import annotations

import dataclasses
import datetime
import logging
import os
import queue
import time

from prometheus_client import CollectorRegistry

import augd
from augd import defaults
from augd.daemon import claims, warmup
from augd.daemon.claims import Leases
from augd.daemon.config import RESTART_KEYS, Settings, load_settings
from augd.daemon.events import ConnectionClosed
from augd.daemon.http import StatusServer
from augd.daemon.logs import event, lost_streams, setup_logging
from augd.daemon.metrics import Metrics
from augd.daemon.sdnotify import Notifier
from augd.daemon.signals import SignalState
from augd.daemon.watcher import Watcher
from augd.daemon.worker import JobWorker, Pause, no_pause
from augd.host import raise_open_files
from augd.engine import Engine
from augd.errors import AugdError, CancelCause, SpecError
from augd.schema import known_pipelines

log = logging.getLogger("augd.daemon")

__all__ = ["Daemon"]


def _iso(t: float) -> str:
    """Unix seconds -> ISO-8601 UTC, to the second: 2025-01-31T12:00:00Z."""
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class Daemon:
    """Daemon(settings, config_path).serve(). `registry`, `notifier` and `pause` (worker.Pause: where tests stall
    the daemon on purpose) are seams for tests; the defaults are the production ones."""

    def __init__(self, settings: Settings, config_path: str | None = None, *, registry=None, notifier=None,
                 pause: Pause = no_pause):
        self.settings = settings
        self.config_path = config_path
        self.registry = registry or CollectorRegistry()
        self.notifier = notifier or Notifier()
        self.pause = pause
        self.device = None
        self.metrics = Metrics(self.registry, device_memory=self._device_memory)
        self.jobs: queue.Queue = queue.Queue()
        self.leases = Leases(settings.work, settings.claim_lease_seconds)
        self._holders_at: tuple[float, dict] = (float("-inf"), {})
        me = self.leases.me
        self.metrics.owner_sources(me.host, me.pid, me.boot_id, self._holders)
        self.watcher = Watcher(settings.inbox, self.jobs, routes=self._routes,
                               settle_seconds=settings.settle_seconds, rescan_seconds=settings.rescan_seconds,
                               polling=settings.polling)
        self.worker = JobWorker(settings, self.jobs, self.leases, self.metrics, self.notifier,
                                waiting=lambda: self.watcher.waiting, pause=pause, retry=self.watcher.retry)
        self.metrics.queue_sources(ready=self.jobs.qsize, waiting=lambda: self.watcher.waiting)
        self.http = None
        # a stop signal to the whole process group ends the workers too: none may be replaced meanwhile
        self.signals = SignalState(on_stop=self.worker.drain_pool)
        self.ready = False
        self.warmed: list[dict] | None = None   # warm-up rows (augd.daemon.warmup); None: not warmed up
        self.started = time.time()
        self.stopping = False

    # -- what HTTP reads -------------------------------------------------------------------------------------
    def _routes(self) -> set[str]:
        return known_pipelines(self.settings.search_dirs())

    def _holders(self) -> dict:
        """{holder: jobs in work/} for augd_work_jobs: this daemon, another live one, none (to be taken over).
        One look at work/ serves a whole scrape (each of the three samples asks)."""
        now = time.monotonic()
        if now - self._holders_at[0] > 1.0:
            out: dict = {}
            for j in self.leases.view():
                out[j["state"]] = out.get(j["state"], 0) + 1
            self._holders_at = (now, out)
        return self._holders_at[1]

    def _device_memory(self) -> dict:
        if self.device is None or self.device.kind != "GPU":
            return {}
        import tensorflow as tf
        return {"GPU:0": tf.config.experimental.get_memory_info("GPU:0")["current"]}

    def health(self) -> tuple[bool, dict]:
        age = time.monotonic() - self.worker.heartbeat
        limit = self.settings.health_stale_seconds
        return age <= limit, {"last_tick_seconds_ago": round(age, 3), "limit_seconds": limit}

    def readiness(self) -> tuple[bool, dict]:
        return self.ready and not self.stopping, {"tensorflow": self.device is not None, "watching": self.ready,
                                                  "stopping": self.stopping}

    def status(self) -> dict:
        """/status: the JSON the status page renders. Times are Unix seconds with an ISO-8601 UTC twin (`*_iso`)."""
        cur = self.worker.current
        now = time.time()
        current = None
        if cur is not None:
            p = cur.progress
            current = {"job": cur.name, "pipeline": cur.pipeline, "pipeline_chosen_by": cur.chosen_by,
                       "running_seconds": round(now - cur.started, 3), "attempt": cur.attempt,
                       "holder": self.leases.me.label,
                       "started": round(cur.started, 3), "started_iso": _iso(cur.started)}
            if p is not None:
                current.update(total=p.total, done=p.done, written=p.written, rejected=p.rejected,
                               records=p.records, images_per_second=round(p.images_per_second, 2))
        with self.jobs.mutex:
            queued = [j.relpath for j in self.jobs.queue]
        settling = self.watcher.settling
        last = [{**r, "finished_iso": _iso(r["finished"])} if "finished" in r else dict(r)
                for r in list(self.worker.last_results)]
        return {"version": augd.__version__, "state": "stopping" if self.stopping else
                ("running" if cur else ("idle" if self.ready else "starting")),
                "device": self.device.name if self.device else None, "warm_up": self.warmed,
                "time": round(now, 3), "time_iso": _iso(now),
                "started": round(self.started, 3), "started_iso": _iso(self.started),
                "uptime_seconds": round(now - self.started, 1),
                "queue": {"ready": len(queued), "waiting": len(settling), "jobs": queued},
                "settling": settling,  # the waiting jobs by name (beside "queue", whose keys scripts may pin)
                "current": current, "last_jobs": last,
                # ready jobs whose claim failed for a transient reason: each retried by the next rescan
                "claim_retries": [{**r, "last_iso": _iso(r["last"])} for r in list(self.worker.claim_retries.values())
                                  if os.path.isdir(os.path.join(self.settings.inbox, r["job"]))],
                "last_preview": {"job": self.worker.last_preview[0], "finished": round(self.worker.last_preview[1], 3),
                                 "url": f"/preview.png?t={self.worker.last_preview[1]:.3f}"}
                if self.worker.last_preview else None,
                "folders": {k: getattr(self.settings, k) for k in ("inbox", "work", "done", "failed", "out")},
                # this daemon as claim records name it, and every job in work/ with its holder (several daemons
                # may share the folders)
                "owner": {**self.leases.me.to_dict(), "label": self.leases.me.label},
                "work": self.leases.view(),
                "http": self.http.connections if self.http is not None else None,
                # standard streams the log could not be written to (a log reader that went away), else {}
                "log_streams_lost": lost_streams()}

    # -- start-up --------------------------------------------------------------------------------------------
    def _prepare_folders(self) -> None:
        s = self.settings
        for key in ("inbox", "work", "done", "failed"):
            os.makedirs(getattr(s, key), exist_ok=True)
        dev = os.stat(s.inbox).st_dev
        for key in ("work", "done", "failed"):
            if os.stat(getattr(s, key)).st_dev != dev:
                raise AugdError(f"{key} ({getattr(s, key)}) is on another filesystem than the inbox ({s.inbox}); "
                                f"jobs move between them by rename, which must stay on one filesystem")

    def start(self) -> None:
        s = self.settings
        self._prepare_folders()
        soft, _ = raise_open_files()   # the HTTP server takes at most a quarter: the jobs keep the rest
        if s.metrics_port is not None:
            try:
                self.http = StatusServer(self.registry, s.metrics_bind, s.metrics_port, health=self.health,
                                         ready=self.readiness, status=self.status, version=augd.__version__,
                                         preview=lambda: self.worker.last_preview and self.worker.last_preview[2],
                                         limits=s.http_limits,
                                         on_drop=lambda why: self.metrics.record(ConnectionClosed(why))).start()
            except OSError as exc:
                raise AugdError(f"cannot serve metrics on {s.metrics_bind}:{s.metrics_port}: "
                                f"{exc.strerror or exc} (set metrics_port, or null to turn the server off)") from None
            event("http_listening", "serving /metrics /healthz /readyz /status on http://%s:%d/ (at most %d "
                  "connections; open files: %d)", s.metrics_bind, self.http.port, self.http.connections["max"], soft,
                  bind=s.metrics_bind, port=self.http.port, max_connections=self.http.connections["max"],
                  open_files_limit=soft)
        self.pause("startup", lambda: self.signals.stops > 0)
        if self.signals.stops:
            return
        try:
            self.worker.engine = engine = Engine(s.engine_options)
        except ValueError as exc:  # a bad AUGD_* value, or device: gpu without one
            raise AugdError(f"cannot set up the engine: {exc}") from None
        self.device = engine.device
        self.worker.warm_pool()   # the workers import TensorFlow while the inbox is scanned
        if warmup.wanted(s.config.warm_up, self.device.kind):
            self.warmed = warmup.warm_up(engine, warmup.configured_pipelines(s.default_pipeline, s.pipelines_dir),
                                         s.search_dirs(), lambda: self.signals.stops > 0, self.notifier.notify)
        self.metrics.build_info(augd.__version__, self.device.tf_version, self.device.name)
        for path in claims.sweep_leftovers(s.out):   # temp outputs and scratch of this machine's dead processes
            event("stale_temp_removed", "removed stale temp output %s", path, path=path)
        self.watcher.start()
        self.worker.heartbeat = time.monotonic()
        self.worker.start()   # its first step takes over the jobs in work/ whose holder is gone
        self.ready = True
        self.notifier.notify("READY=1", f"STATUS={self.worker.status_line()}")
        event("ready", "augd %s watching %s (out: %s; this daemon is %s)", augd.__version__, s.inbox, s.out,
              self.leases.me.label, inbox=s.inbox, out=s.out, owner=self.leases.me.label)

    # -- main loop -------------------------------------------------------------------------------------------
    def serve(self) -> int:
        """Run until SIGTERM/SIGINT (exit 0) or a runner crash (exit 1). Call from the main thread."""
        self.signals.install()
        try:
            self.start()
            while self.signals.stops == 0:
                self.signals.wait(0.5)
                if self.signals.reloads:
                    self.signals.reloads = 0
                    self.reload()
                self._signals_logged()
                self._renew()
                if self.ready and not self.worker.alive():
                    log.error("the job runner stopped unexpectedly; exiting")
                    return 1
            return self.shutdown()
        finally:
            self.close()

    def _renew(self) -> None:
        """The heartbeat of the claim records this daemon holds, while its job runner lives (a hung one is the
        watchdog's to end: /healthz, systemd's WatchdogSec; gaps between its ticks, a long commit say, must not
        let another daemon take a job that runs); jobs found taken over are stopped here."""
        if not self.ready or not self.worker.alive():
            return
        try:
            lost = self.leases.renew()
        except Exception:  # noqa: BLE001 - the main loop must outlive a bad beat; the next one tries again
            log.exception("renewing the claim records failed; trying again at the next beat")
            return
        if lost:
            self.worker.lost(lost)

    def _signals_logged(self) -> None:
        """SIGUSR1: the status in one line; a signal augd ignores: one line saying so."""
        sig = self.signals
        if sig.status_dumps:
            sig.status_dumps = 0
            try:
                st = self.status()
            except Exception:  # noqa: BLE001 - a status line is not worth the daemon
                log.exception("SIGUSR1: cannot gather the status")
                return
            cur = st["current"]
            event("status", "SIGUSR1: %s; jobs in work/: %s", self.worker.status_line(),
                  ", ".join(f"{w['job']} ({w['holder'] or 'no holder'})" for w in st["work"]) or "none",
                  state=st["state"], current=cur and cur["job"], queue=st["queue"]["jobs"],
                  settling=st["settling"], work=st["work"], device=st["device"])
        for name in sig.take_ignored():
            event("signal_ignored", "%s received: ignored, now and from here on without a line (augd acts on "
                  "SIGTERM, SIGINT, SIGHUP and SIGUSR1; docs/daemon.md)", name, level=logging.WARNING, signal=name)

    def shutdown(self) -> int:
        self.stopping = True
        s = self.settings
        self.notifier.notify("STOPPING=1")
        event("stopping", "stopping (%s): taking no new job; the current one has %gs to finish",
              getattr(self.signals, "last", "signal"), s.grace_seconds, grace_seconds=s.grace_seconds)
        self.worker.stop_taking()
        self.watcher.stop()
        deadline = time.monotonic() + s.grace_seconds
        while self.worker.alive() and time.monotonic() < deadline and self.signals.stops < 2:
            self.worker.join(0.2)
            self._renew()   # the job finishing in its grace period is still this daemon's
        if self.worker.alive():
            why = "second signal" if self.signals.stops >= 2 else "grace period over"
            if (cur := self.worker.current) is not None:
                event("aborting", "%s: cancelling job %s; it goes back to the inbox", why, cur.name, job=cur.name)
            deadline = time.monotonic() + defaults.ABORT_WAIT_SECONDS
            while self.worker.alive() and time.monotonic() < deadline:
                self.worker.cancel_current(CancelCause.SHUTDOWN)  # again and again: the job may not have started yet
                self.worker.join(0.2)
        if self.worker.alive():
            log.warning("the current job did not stop in %gs; exiting with it in work/ (it runs again at the next "
                        "start)", defaults.ABORT_WAIT_SECONDS)
        event("stopped", "stopped")
        return 0

    def close(self) -> None:
        if not self.worker.alive():
            self.worker.close_pool()   # else the job still runs on it (its worker thread is a daemon thread)
        self.signals.restore()
        self.watcher.stop()
        if self.http is not None:
            self.http.stop()
        self.notifier.close()

    def reload(self) -> None:
        """SIGHUP: re-read the config file. Pipelines are read per job anyway; the queue is kept."""
        if self.config_path is None:
            event("reload", "SIGHUP: no config file to reload (running on defaults)")
            return
        try:
            new = load_settings(self.config_path)
        except SpecError as exc:
            log.error("SIGHUP: config not reloaded, keeping the running one: %s", exc)
            return
        old = self.settings
        kept = old.restart_changes(new)
        if kept:
            log.warning("SIGHUP: %s changed but need a restart; keeping the running values", ", ".join(kept))
            cfg = new.config.model_copy(update={k: getattr(old.config, k) for k in RESTART_KEYS})
            new = dataclasses.replace(new, config=cfg, **{k: getattr(old, k) for k in
                                                          ("inbox", "work", "done", "failed", "out")})
        self.settings = new
        self.worker.settings = new
        self.watcher.configure(settle_seconds=new.settle_seconds, rescan_seconds=new.rescan_seconds)
        setup_logging(new.log_format, new.log_level)
        event("reloaded", "SIGHUP: config reloaded from %s", self.config_path, config=self.config_path)
