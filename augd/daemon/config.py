"""The daemon's config file: YAML -> a frozen, validated `DaemonConfig`, errors naming file, line and key.

Relative paths are taken relative to the config file's folder (with no config file: the current directory),
so a unit file or a container can point at one file and get the same layout wherever it is started from.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from augd import defaults
from augd.daemon.httpconn import ConnLimits
from augd.defaults import ExecutorKind
from augd.engine.options import EngineOptions
from augd.errors import SpecError
from augd.io import is_url
from augd.job.executors import Divert, traits
from augd.job.resources import job_memory_bytes
from augd.labels import LabelMapError, label_map
from augd.schema import (Annotations, AnnotationsConfig, YamlDoc, find_pipeline, is_pipeline_path, load_pipeline,
                       read_yaml_file, validate)

__all__ = ["BeamConfig", "DaemonConfig", "Settings", "load_settings", "RESTART_KEYS"]

#: Keys a SIGHUP cannot change in a running daemon (they are read once at start-up).
RESTART_KEYS = ("data_dir", "inbox", "work", "done", "failed", "out", "polling", "metrics_bind", "metrics_port",
                "http_request_timeout_seconds", "http_idle_timeout_seconds", "http_max_connections", "engine",
                "claim_lease_seconds")


class CheckConfig(BaseModel):
    """The daemon's `check:` block: augd check before every job (augd.check)."""
    model_config = ConfigDict(extra="forbid", frozen=True)
    fail_on: list[Literal["leak", "rejected"]] = Field(["leak", "rejected"], description="what fails the job: "
                                                       "leak (near-duplicates across splits), rejected (an input a "
                                                       "job would reject); [] only writes the report")


class BeamConfig(BaseModel):
    """The `beam:` block: jobs with at least `min_files` files run on Apache Beam (augd/job/executors/beam.py)."""
    model_config = ConfigDict(extra="forbid", frozen=True)

    min_files: int = Field(0, ge=0, description="jobs with at least this many files go to Beam (0: every job)")
    options: list[str] = Field(default_factory=list, description="Beam pipeline options, e.g. "
                               "[--runner=DataflowRunner, --project=P, --region=R, --temp_location=gs://...]; "
                               "none: the DirectRunner in the daemon's process")


class DaemonConfig(BaseModel):
    """Every key of `augd serve --config FILE`. The defaults live in augd.defaults."""
    model_config = ConfigDict(extra="forbid", frozen=True)

    data_dir: str = Field(defaults.DAEMON_DATA_DIR, description="base of the folders below that are not set")
    inbox: str | None = Field(None, description="drop job folders here (default DATA_DIR/inbox)")
    work: str | None = Field(None, description="claimed jobs while they run (default DATA_DIR/work)")
    done: str | None = Field(None, description="job folders after success (default DATA_DIR/done)")
    failed: str | None = Field(None, description="job folders after failure, with failure.json and error.txt "
                                                 "(default DATA_DIR/failed)")
    out: str | None = Field(None, description="output root, any tf.io.gfile URL (default DATA_DIR/out)")
    pipelines_dir: str | None = Field(None, description="extra pipelines, by name; override the built-in ones "
                                                        "(default DATA_DIR/pipelines, when it exists)")
    default_pipeline: str = Field(defaults.DEFAULT_PIPELINE, description="pipeline name or file for jobs that "
                                                                        "name none")
    warm_up: Literal["auto", "on", "off"] = Field(
        "auto", description="before reporting ready, run default_pipeline's graph and each in pipelines_dir once on "
        "a small image, so the first job does not wait while the GPU driver compiles TensorFlow's kernels (Hopper "
        "and newer); auto: on GPU hosts only")
    settle_seconds: float = Field(defaults.SETTLE_SECONDS, gt=0, description="quiet time before a job without "
                                                                             "_READY is ready")
    rescan_seconds: float = Field(defaults.RESCAN_SECONDS, gt=0, description="full inbox rescan period")
    polling: bool = Field(False, description="poll the inbox instead of inotify (NFS/SMB)")
    on_success: Literal["move", "delete"] = Field(defaults.ON_SUCCESS, description="what to do with a done job")
    job_timeout_seconds: float | None = Field(defaults.JOB_TIMEOUT_SECONDS, gt=0, description="null: no limit")
    grace_seconds: float = Field(defaults.GRACE_SECONDS, ge=0, description="SIGTERM: time to finish the job")
    max_pixels: int = Field(defaults.MAX_PIXELS, ge=1, description="reject larger images")
    job_memory_mb: Literal["auto"] | int | None = Field(
        "auto", description="memory one job may add to the daemon's resident size; auto: half the host's "
                            "(cgroup-aware); null: no limit")
    labels: list[str] | str | None = Field(None, description="fixed label map for jobs whose augd.yaml and "
                                                            "pipeline give none: class names, or a labels file")
    annotations: AnnotationsConfig | None = Field(None, description="detection jobs: settings under every "
                                                                    "job's and pipeline's own (label_map: relative "
                                                                    "to this file)")
    status_preview: bool | None = Field(None, description="show the last job's first images on the status page "
                                                          "(/preview.png); null: only when metrics_bind is "
                                                          "loopback, since they are pictures of the data")
    max_rejected: float | None = Field(None, ge=0.0, le=1.0, description="fail a job (writing nothing) when "
                                       "more than this fraction of its inputs is rejected; null: never")
    check: CheckConfig | None = Field(None, description="run augd check on each job first: its report as check.json "
                                                      "beside the manifest; a job with what fail_on names fails "
                                                      "(check_failed), writing nothing; null: no check")
    max_attempts: int = Field(defaults.MAX_ATTEMPTS, ge=1, description="a job that ended the process this many "
                                                                       "times goes to failed/ (reason crashed)")
    claim_lease_seconds: float = Field(defaults.CLAIM_LEASE_SECONDS, ge=1, le=86400, description="daemons sharing "
                                       "these folders from other machines or containers: a job whose holder's "
                                       "heartbeat has not changed for this long is taken over")
    workers: int | None = Field(None, ge=1, description="parallel images within a job: worker processes or threads "
                                                      "(null: all cores)")
    executor: ExecutorKind = Field(
        ExecutorKind.AUTO, description="processes: a pool of worker processes kept across jobs, each with its own "
        "graph; threads: every job in the daemon's process; auto: processes on CPU hosts with 2 or more workers, "
        "threads on GPU hosts; beam: jobs go to Apache Beam (pip install 'augd[beam]'), as the beam: block says; "
        "dask: jobs run on a dask.distributed cluster (pip install 'augd[dask]'; executor_options names one)")
    beam: BeamConfig | None = Field(None, description="Apache Beam's settings; a beam: block also sends jobs of at "
                                                      "least min_files files to Beam under any executor; null with "
                                                      "an executor other than beam: every job runs on this host")
    executor_options: dict[ExecutorKind, list[str]] = Field(
        default_factory=dict, description="each executor's own options, by executor, as `augd run --executor E -- "
        "OPTIONS` takes them (only executors that take options: docs/design.md), e.g. {beam: [--runner=...]}")
    engine: EngineOptions = Field(default_factory=EngineOptions, description="engine options (augd.engine."
                                  "EngineOptions); keys left out: their AUGD_* environment variable, else the "
                                  "default; a key set to null is null (gpu_memory_mb: null grows as needed)")
    metrics_bind: str = Field(defaults.METRICS_BIND, description="HTTP bind address")
    metrics_port: int | None = Field(defaults.METRICS_PORT, ge=0, le=65535, description="HTTP port; null: "
                                                                                       "no HTTP server")
    http_request_timeout_seconds: float = Field(
        defaults.HTTP_REQUEST_TIMEOUT_SECONDS, gt=0, le=3600, description="an HTTP request must arrive whole "
        "within this time of its first byte, and a reply be read within it; slower clients are closed")
    http_idle_timeout_seconds: float = Field(defaults.HTTP_IDLE_TIMEOUT_SECONDS, gt=0, le=3600,
                                             description="idle keep-alive HTTP connections are closed after this")
    http_max_connections: int = Field(
        defaults.HTTP_MAX_CONNECTIONS, ge=defaults.HTTP_THREADS * 2, le=65536, description="HTTP connections open "
        "at once (at most a quarter of the open-files limit); over it, the one waiting longest without a whole "
        "request is closed")
    health_stale_seconds: float = Field(defaults.HEALTH_STALE_SECONDS, gt=0,
                                        description="/healthz fails when the loop is quiet this long")
    log_format: Literal["text", "json"] = Field(defaults.LOG_FORMAT, description="log line format")
    log_level: Literal["debug", "info", "warning", "error"] = Field("info", description="log level")

    @field_validator("job_memory_mb", mode="before")
    @classmethod
    def _memory(cls, v):
        if v == "auto" or v is None or (type(v) is int and v >= 1):
            return v
        raise ValueError("must be auto, null or a whole number of MB >= 1")


@dataclass(frozen=True)
class Settings:
    """A validated config with every folder resolved to an absolute path (out may stay a URL)."""
    config: DaemonConfig
    source: str          # config file path, or "<defaults>"
    inbox: str
    work: str
    done: str
    failed: str
    out: str
    pipelines_dir: str
    default_pipeline: str
    labels: tuple[str, ...] | None = None   # the config's label map, its file read
    annotations: Annotations | None = None  # the config's annotation settings, a label_map file made absolute

    def __getattr__(self, name):  # settle_seconds, workers, ...: straight from the config
        return getattr(self.config, name)

    @property
    def status_preview_on(self) -> bool:
        if self.config.status_preview is not None:
            return self.config.status_preview
        return self.config.metrics_bind in ("127.0.0.1", "::1", "localhost") or \
            self.config.metrics_bind.startswith("127.")

    @property
    def http_limits(self) -> ConnLimits:
        c = self.config
        return ConnLimits(request_timeout=c.http_request_timeout_seconds, idle_timeout=c.http_idle_timeout_seconds,
                          max_connections=c.http_max_connections)

    @property
    def divert(self) -> Divert | None:
        """Which jobs go to Beam (augd.job.executors.for_job chooses): with a `beam:` block, those of at least its
        min_files files; with `executor: beam` and no block, every job."""
        if self.config.beam is not None:
            return Divert(ExecutorKind.BEAM, self.config.beam.min_files)
        return Divert(ExecutorKind.BEAM) if self.config.executor is ExecutorKind.BEAM else None

    def executor_args(self, kind) -> tuple[str, ...]:
        """The options of executor `kind` (its `executor_options:` entry; Beam's also from the beam: block)."""
        kind = ExecutorKind(kind)
        if kind is ExecutorKind.BEAM and self.config.beam is not None and self.config.beam.options:
            return tuple(self.config.beam.options)
        return tuple(self.config.executor_options.get(kind, ()))

    @property
    def local_executor(self) -> ExecutorKind:
        """The executor of the jobs that stay on this host: the configured one, or auto where that one is where jobs
        are diverted to (`executor: beam`: the jobs below the beam: block's min_files)."""
        divert = self.divert
        return ExecutorKind.AUTO if divert is not None and divert.kind is self.config.executor else \
            self.config.executor

    @property
    def engine_options(self):
        """The engine's options: the environment's, then the keys the config's `engine:` block sets over them."""
        return EngineOptions.from_env(**self.config.engine.set_fields())

    @property
    def job_memory_bytes(self) -> int | None:
        return job_memory_bytes(self.config.job_memory_mb)

    def search_dirs(self) -> tuple[str, ...]:
        return (self.pipelines_dir,) if os.path.isdir(self.pipelines_dir) else ()

    def restart_changes(self, new: "Settings") -> list[str]:
        """Keys that differ in `new` but need a restart to take effect."""
        return [k for k in RESTART_KEYS if getattr(self.config, k) != getattr(new.config, k)]


def load_settings(path: str | None) -> Settings:
    """Read and validate a config file (None: the built-in defaults under the current directory)."""
    if path is None:
        doc = YamlDoc(source="<defaults>", data={}, lines={})
        base = os.getcwd()
    else:
        doc = read_yaml_file(path, "config file")
        base = os.path.dirname(os.path.abspath(path))
    data = {} if doc.data is None else doc.data
    if not isinstance(data, dict):
        raise doc.error((), f"a daemon config must be a YAML mapping of keys; got {type(data).__name__}")
    return _resolve(validate(DaemonConfig, doc, data), doc, base)


def _resolve(cfg: DaemonConfig, doc: YamlDoc, base: str) -> Settings:
    data_dir = os.path.normpath(os.path.join(base, os.path.expanduser(cfg.data_dir)))

    def folder(key: str) -> str:
        value = getattr(cfg, key)
        if value is None:
            return os.path.join(data_dir, key)
        if is_url(value):
            if key != "out":
                raise doc.error((key,), f"must be a local folder (jobs are claimed by rename); got {value!r}")
            return value.rstrip("/")
        return os.path.normpath(os.path.join(base, os.path.expanduser(value.removeprefix("file://"))))

    paths = {k: folder(k) for k in ("inbox", "work", "done", "failed", "out")}
    local = ("inbox", "work", "done", "failed")
    for i, a in enumerate(local):
        for b in local[i + 1:]:
            if paths[a] == paths[b] or paths[b].startswith(paths[a] + os.sep) or \
                    paths[a].startswith(paths[b] + os.sep):
                key = b if getattr(cfg, b) is not None else a
                raise doc.error((key,), f"{a} and {b} must be separate folders, neither inside the other; "
                                        f"got {paths[a]!r} and {paths[b]!r}")
    pipelines_dir = folder("pipelines_dir") if cfg.pipelines_dir else os.path.join(data_dir, "pipelines")
    default = cfg.default_pipeline
    if is_pipeline_path(default):
        default = os.path.normpath(os.path.join(base, os.path.expanduser(default)))
    try:
        labels = label_map(cfg.labels, base, f"{doc.source}: labels")
    except LabelMapError as exc:
        raise doc.error(("labels",), str(exc).split(": labels: ", 1)[-1]) from None
    annotations = None
    if cfg.annotations is not None:
        annotations = Annotations.from_config(cfg.annotations, base)
        lm = annotations.label_map
        if isinstance(lm, str) and not os.path.isfile(lm):
            raise doc.error(("annotations", "label_map"), f"{lm} is not a file")
    _check_executors(cfg, doc)
    settings = Settings(config=cfg, source=doc.source, pipelines_dir=pipelines_dir, default_pipeline=default,
                        labels=labels, annotations=annotations, **paths)
    _check_default_pipeline(settings, doc)
    return settings


def _check_executors(cfg: DaemonConfig, doc: YamlDoc) -> None:
    """Refuse at start what the daemon cannot run: an executor its traits keep out of the daemon or whose extra is
    not installed, options for an executor that takes none, Beam's options in two places."""
    used = [(("executor",), cfg.executor)] + [(("beam",), ExecutorKind.BEAM)] * (cfg.beam is not None)
    for key, kind in used:
        t = traits(kind)
        if not t.daemon:
            raise doc.error(key, f"the {kind.value} executor does not run inside the daemon (augd run --executor "
                                 f"{kind.value} does); allowed here: " +
                                 ", ".join(k.value for k in ExecutorKind if traits(k).daemon))
        if t.missing(kind):
            instead = "or remove the beam: block" if key == ("beam",) else "or choose another executor"
            raise doc.error(key, f"{t.missing(kind)} ({instead})")
    for kind, options in cfg.executor_options.items():
        t = traits(kind)
        if t.options is None:
            raise doc.error(("executor_options", kind.value), f"the {kind.value} executor takes no options; those "
                            "that do: " + ", ".join(k.value for k in ExecutorKind if traits(k).options))
        try:
            if t.check_options is not None and not t.missing(kind):
                t.check_options(tuple(options))
        except ValueError as exc:
            raise doc.error(("executor_options", kind.value), str(exc)) from None
    if cfg.beam is not None and cfg.beam.options and ExecutorKind.BEAM in cfg.executor_options:
        raise doc.error(("executor_options", "beam"), "Beam's options are set twice: here and in beam: options; "
                                                      "keep one")


def _check_default_pipeline(settings: Settings, doc: YamlDoc) -> None:
    try:
        load_pipeline(find_pipeline(settings.default_pipeline, settings.search_dirs()))
    except SpecError as exc:
        raise doc.error(("default_pipeline",), f"cannot be used: {exc}") from None
