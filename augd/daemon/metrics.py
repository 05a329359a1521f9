"""Every Prometheus metric of augd, created against an injected CollectorRegistry.

The daemon emits what happens as values (augd/daemon/events.py) and `Metrics.record` is the one place that turns
them into metrics; the figures come from the same values `augd run` writes into manifest.json (ImageOutcome per
image while a job runs, its JobReport when it commits), so a scrape and the manifests agree. Imports no
TensorFlow.
Metric names are a contract (docs/metrics.md): change them only with a deprecation.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

from augd.daemon import events as ev
from augd.daemon.httpconn import DROP_REASONS
from augd.errors import FailureReason
from augd.stages import STAGES

if TYPE_CHECKING:
    from augd.job.report import JobReport

__all__ = ["HOLDERS", "JOB_RESULTS", "IMAGE_RESULTS", "METRIC_NAMES", "QUEUE_STATES", "JobTally", "Metrics"]

JOB_RESULTS = ("success", "failed")
IMAGE_RESULTS = ("written", "rejected")
QUEUE_STATES = ("ready", "waiting")
#: Up to 8 hours: jobs range from a handful of images to a whole dataset.
JOB_BUCKETS = (1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400, 28800, float("inf"))
#: Per image and stage: from a 64 px thumbnail on a GPU to a 100 MP TIFF on a small CPU.
STAGE_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
                 float("inf"))

#: Every augd metric family (as scraped: counters without their _total suffix is how the parser names them).
METRIC_NAMES = (
    "augd_build_info", "augd_jobs_total", "augd_job_duration_seconds", "augd_images_total",
    "augd_records_written_total", "augd_rejected_inputs_total", "augd_bytes_read_total", "augd_bytes_written_total",
    "augd_stage_seconds", "augd_queue_jobs", "augd_inflight_jobs", "augd_current_job_images_per_second",
    "augd_last_success_timestamp_seconds", "augd_graph_builds_total", "augd_graph_traces_total",
    "augd_device_memory_bytes", "augd_job_failures_total", "augd_http_connections_closed_total",
    "augd_owner_info", "augd_work_jobs", "augd_jobs_taken_over_total", "augd_claims_lost_total",
    "augd_claim_failures_total",
)
#: Who holds a job in work/, as augd_work_jobs counts them (augd/daemon/claims/records.py).
HOLDERS = ("this", "other", "none")


class _DeviceMemory:
    """augd_device_memory_bytes{device}, read at scrape time from a provider (TensorFlow's memory info for
    GPUs); no sample at all where the provider reports nothing (CPU)."""

    def __init__(self, provider: Callable[[], dict] | None):
        self.provider = provider

    def describe(self):
        return [GaugeMetricFamily("augd_device_memory_bytes", "Device memory in use by TensorFlow, in bytes.",
                                  labels=["device"])]

    def collect(self):
        fam = GaugeMetricFamily("augd_device_memory_bytes", "Device memory in use by TensorFlow, in bytes.",
                                labels=["device"])
        if self.provider is not None:
            try:
                for device, used in sorted(self.provider().items()):
                    fam.add_metric([device], float(used))
            except Exception:  # noqa: BLE001 - a scrape must not fail because a device query did
                pass
        yield fam


class Metrics:
    """m = Metrics(CollectorRegistry()); m.build_info(...); m.record(events.Started()); m.record(events.Image(o)) ..."""

    def __init__(self, registry: CollectorRegistry, *, device_memory: Callable[[], dict] | None = None,
                 process_collectors: bool = True):
        self.registry = r = registry
        if process_collectors:
            ProcessCollector(registry=r)
            PlatformCollector(registry=r)
            GCCollector(registry=r)
        self.build = Gauge("augd_build_info", "augd build: version, TensorFlow version and device; always 1.",
                           ["version", "tensorflow_version", "device"], registry=r)
        self.jobs = Counter("augd_jobs_total", "Jobs finished, by result.", ["result"], registry=r)
        self.failures = Counter("augd_job_failures_total", "Failed jobs, by reason (one of failure.json's).",
                                ["reason"], registry=r)
        self.job_duration = Histogram("augd_job_duration_seconds", "Wall time of finished jobs (claim to result).",
                                      buckets=JOB_BUCKETS, registry=r)
        self.images = Counter("augd_images_total", "Input images processed, by result.", ["result"], registry=r)
        self.records = Counter("augd_records_written_total", "TFRecord records written.", registry=r)
        self.rejected = Counter("augd_rejected_inputs_total", "Input files rejected, by reason.", ["reason"],
                                registry=r)
        self.bytes_read = Counter("augd_bytes_read_total", "Bytes of input images read.", registry=r)
        self.bytes_written = Counter("augd_bytes_written_total", "Bytes of TFRecord shards committed.", registry=r)
        self.stage = Histogram("augd_stage_seconds", "Time per image in each stage.", ["stage"],
                               buckets=STAGE_BUCKETS, registry=r)
        self.queue = Gauge("augd_queue_jobs", "Jobs in the inbox: ready (queued) or waiting (still settling).",
                           ["state"], registry=r)
        self.inflight = Gauge("augd_inflight_jobs", "Jobs running now.", registry=r)
        self.current_ips = Gauge("augd_current_job_images_per_second",
                                 "Images per second of the running job (0 when idle).", registry=r)
        self.last_success = Gauge("augd_last_success_timestamp_seconds",
                                  "Unix time of the last successful job (0: none yet).", registry=r)
        self.graph_builds = Counter("augd_graph_builds_total",
                                    "TensorFlow graphs built (one per job and process running it).", registry=r)
        self.graph_traces = Counter("augd_graph_traces_total", "tf.function traces (one per graph when shapes are "
                                                               "dynamic, as they should be).", registry=r)
        self.http_closed = Counter("augd_http_connections_closed_total", "HTTP connections the server closed on its "
                                   "own, by reason: timeout (no whole request in time), evicted (over "
                                   "http_max_connections), reset (by the client), accept_error (EMFILE...), "
                                   "too_large.", ["reason"], registry=r)
        self.owner = Gauge("augd_owner_info", "This daemon as its claim records, the log and /status name it: host, "
                           "pid and boot id; always 1.", ["host", "pid", "boot_id"], registry=r)
        self.work_jobs = Gauge("augd_work_jobs", "Job folders in work/, by holder: this daemon, another live one, "
                               "none (waiting to be taken over).", ["holder"], registry=r)
        self.taken_over = Counter("augd_jobs_taken_over_total", "Jobs this daemon took over from work/ because "
                                  "their holder was gone (a crash, kill -9, another daemon's lapsed lease).",
                                  registry=r)
        self.claims_lost = Counter("augd_claims_lost_total", "Jobs this daemon gave up because another daemon took "
                                   "them over (its own heartbeat lapsed past claim_lease_seconds), or their claim "
                                   "records were removed under it.", registry=r)
        self.claim_failures = Counter("augd_claim_failures_total", "Claims of ready jobs that failed for a "
                                      "transient reason (work/ or its claim records not writable, a full disk); "
                                      "each job stays in the inbox and the next rescan retries it.", registry=r)
        r.register(_DeviceMemory(device_memory))
        self._tally = JobTally(self)    # the running job's (Started makes a new one)
        # Known label values start at 0, so rate() and ratios work from the first scrape.
        from augd.io import REJECT_REASONS
        for v in FailureReason:
            self.failures.labels(v.value)
        for v in JOB_RESULTS:
            self.jobs.labels(v)
        for v in IMAGE_RESULTS:
            self.images.labels(v)
        for v in REJECT_REASONS:
            self.rejected.labels(v)
        for v in STAGES:
            self.stage.labels(v)
        for v in QUEUE_STATES:
            self.queue.labels(v)
        for v in DROP_REASONS:
            self.http_closed.labels(v)
        for v in HOLDERS:
            self.work_jobs.labels(v)

    def build_info(self, version: str, tensorflow_version: str, device: str) -> None:
        self.build.clear()
        self.build.labels(version, tensorflow_version, device).set(1)

    def queue_sources(self, ready: Callable[[], float], waiting: Callable[[], float]) -> None:
        """augd_queue_jobs read at scrape time."""
        self.queue.labels("ready").set_function(ready)
        self.queue.labels("waiting").set_function(waiting)

    def owner_sources(self, host: str, pid: int, boot_id: str, holders: Callable[[], dict]) -> None:
        """augd_owner_info, and augd_work_jobs read at scrape time from `holders()` ({holder: jobs})."""
        self.owner.labels(host, str(pid), boot_id).set(1)
        for h in HOLDERS:
            self.work_jobs.labels(h).set_function(lambda h=h: holders().get(h, 0))

    def record(self, e: ev.Event) -> None:
        """What each event the daemon emits counts (the one place a metric is recorded)."""
        match e:
            case ev.Started():
                self._tally = JobTally(self)
                self.inflight.set(1)
            case ev.Image(outcome):
                self._tally.image(outcome)
            case ev.Progressed(ips):
                self.current_ips.set(ips)
            case ev.Succeeded(report, seconds):
                self._tally.succeeded(report, seconds)
            case ev.AlreadyCommitted():
                self.jobs.labels("success").inc()
            case ev.Failed(reason, seconds):
                self.jobs.labels("failed").inc()
                self.failures.labels(str(reason)).inc()
                self.job_duration.observe(seconds)
            case ev.Ended():
                self.inflight.set(0)
                self.current_ips.set(0)
            case ev.ClaimFailed():
                self.claim_failures.inc()
            case ev.TakenOver():
                self.taken_over.inc()
            case ev.ClaimLost():
                self.claims_lost.inc()
            case ev.ConnectionClosed(reason):
                self.http_closed.labels(reason).inc()
            case _:
                raise TypeError(f"not a daemon event: {e!r}")


class JobTally:
    """(Metrics.record's, per job) Counts one job's images as they are processed, then settles with its report: images rejected by the
    scan (before any image is processed) and bytes written are only known there."""

    def __init__(self, metrics: Metrics):
        self.m = metrics
        self.rejected_by_reason: dict[str, int] = {}
        self.written = 0
        self.records = 0
        self.bytes_read = 0

    def image(self, outcome) -> None:
        """One augd.job.ImageOutcome."""
        m = self.m
        self.bytes_read += outcome.bytes_read
        m.bytes_read.inc(outcome.bytes_read)
        if outcome.rejected is not None:
            reason = outcome.rejected.reason
            self.rejected_by_reason[reason] = self.rejected_by_reason.get(reason, 0) + 1
            m.images.labels("rejected").inc()
            m.rejected.labels(reason).inc()
        else:
            self.written += 1
            self.records += len(outcome.records)
            m.images.labels("written").inc()
            m.records.inc(len(outcome.records))
        if outcome.stage_seconds and outcome.rejected is None:
            for stage in STAGES:
                m.stage.labels(stage).observe(outcome.stage_seconds.get(stage, 0.0))

    def succeeded(self, report: JobReport, duration: float) -> None:
        """Add what only the report knows; the totals then equal its figures (and manifest.json's)."""
        m = self.m
        by_reason: dict[str, int] = {}
        for r in report.inputs.rejected_files:
            by_reason[r.reason] = by_reason.get(r.reason, 0) + 1
        for reason, n in by_reason.items():
            extra = n - self.rejected_by_reason.get(reason, 0)
            if extra > 0:
                m.rejected.labels(reason).inc(extra)
                m.images.labels("rejected").inc(extra)
        if report.inputs.written > self.written:
            m.images.labels("written").inc(report.inputs.written - self.written)
        if report.records.written > self.records:
            m.records.inc(report.records.written - self.records)
        if report.bytes.read > self.bytes_read:
            m.bytes_read.inc(report.bytes.read - self.bytes_read)
        m.bytes_written.inc(report.bytes.written)
        m.graph_builds.inc(report.graph.builds)
        m.graph_traces.inc(report.graph.traces)
        m.jobs.labels("success").inc()
        m.job_duration.observe(duration)
        m.last_success.set(time.time())
