"""Every default in one place, so docs, config and CLI cannot drift apart."""
import enum

#: Pillow's decompression-bomb limit: (1024 * 1024 * 1024 // 4 // 3) pixels.
MAX_PIXELS = 89_478_485
#: Aim of `shards: auto`: bytes per TFRecord shard (TF's own input guides suggest 100-200 MB).
TARGET_SHARD_BYTES = 128 * 1024 * 1024
#: Graph calls (batches) in flight per worker: bounds memory while keeping every core busy.
INFLIGHT_PER_WORKER = 2
#: Records per graph call at most: each call costs Python and GIL time, so batching pays; more adds latency and
#: memory, not speed (bench/README.md).
GRAPH_BATCH = 16
#: Batches are sized to take about this long, so slow chains still report progress image by image.
BATCH_SECONDS = 0.05
#: JPEG quality of re-encoded images when a pipeline's `output.quality` is not set.
JPEG_QUALITY = 90
#: The splits a job with splits augments when its pipeline sets no `augment_splits`: validation and test sets are
#: written as they are (originals only), so the metrics read on them measure the data, not the augmentation.
AUGMENT_SPLITS = ("train",)

# --- `augd serve`: the drop-folder daemon (every key of its config file defaults to one of these) ---

#: With no config file, every daemon folder lives under this one, relative to the current directory.
DAEMON_DATA_DIR = "augd-data"
#: A job folder without a _READY marker is ready once its whole tree has not changed (names, sizes, mtimes)
#: for this long, as observed by the daemon itself (copied mtimes are never trusted).
SETTLE_SECONDS = 10.0
#: Full rescan of the inbox, on top of filesystem events (which can be dropped, or never come on NFS/SMB).
RESCAN_SECONDS = 30.0
#: How often watchdog's polling observer walks the inbox when `polling: true`.
POLL_INTERVAL_SECONDS = 2.0
#: A job still running after this long is cancelled (between two images) and sent to failed/. None = no limit.
JOB_TIMEOUT_SECONDS = 6 * 3600.0
#: After the first SIGTERM/SIGINT the current job may run this long to finish before it is cancelled and requeued.
GRACE_SECONDS = 30.0
#: After a job is cancelled, how long shutdown waits for it to stop (it stops between two images) before exiting
#: with the job left in work/ (the next start runs it again).
ABORT_WAIT_SECONDS = 15.0
#: Pipeline of jobs that name none (by augd.yaml or by inbox sub-folder).
DEFAULT_PIPELINE = "normalize"
#: After a successful job, its input folder is moved to done/ ("move") or deleted ("delete").
ON_SUCCESS = "move"
#: HTTP server of /metrics, /healthz, /readyz, /status. 127.0.0.1 keeps it private; use 0.0.0.0 in a container.
METRICS_BIND = "127.0.0.1"
#: A fixed port, so Prometheus targets stay stable. Outside 9100-9999 (the exporter range, fully allocated).
METRICS_PORT = 7464
#: A request head must arrive whole within this many seconds of its first byte (slow or stalled clients are closed),
#: and a reply the client does not read is abandoned after as long.
HTTP_REQUEST_TIMEOUT_SECONDS = 10.0
#: A kept-alive HTTP connection with no new request for this long is closed (Prometheus reconnects per scrape).
HTTP_IDLE_TIMEOUT_SECONDS = 5.0
#: HTTP connections open at once (also capped to a quarter of the open-files limit: the jobs keep the rest).
HTTP_MAX_CONNECTIONS = 128
#: Threads that answer whole HTTP requests; clients still sending theirs hold none.
HTTP_THREADS = 4
#: /healthz answers 503 when the work loop has not ticked for this long (it ticks every TICK_SECONDS while
#: idle, and after every image while a job runs).
HEALTH_STALE_SECONDS = 60.0
#: Period of the daemon's work loop while idle (healthz heartbeat, sd_notify WATCHDOG=1, STATUS=).
TICK_SECONDS = 1.0
#: A job's beats outside its images (each record its scan reads, each file its commit syncs) tick the loop at most
#: this often.
BEAT_SECONDS = 0.1
#: A progress log line at most this often while a job runs.
PROGRESS_LOG_SECONDS = 10.0
#: Marker file: a job folder holding it is ready at once, without waiting to settle.
READY_MARKER = "_READY"
#: Per-job settings file at a job's root (names or embeds its pipeline).
JOB_CONFIG = "augd.yaml"
#: Daemon log lines: "text" (human) or "json" (one object per line).
LOG_FORMAT = "text"

# --- resource bounds: one job must not take the host (or the daemon) down ---

#: A job whose processing ended the daemon's process this many times (kill -9, the OOM killer, a crash in a
#: codec) is moved to failed/ with reason `crashed` instead of being run again at every start.
MAX_ATTEMPTS = 3
#: A job in work/ held by a daemon on another machine (or container) is taken over when its claim record has not
#: been renewed (every sixth of this) for this long: well above a network filesystem's attribute cache (NFS: 3-60 s).
CLAIM_LEASE_SECONDS = 90.0
#: Signals whose default action would end the daemon (or a worker process) without a word, and which mean nothing
#: to augd: ignored, with one log line in the daemon (docs/daemon.md: every signal and what it does).
IGNORED_SIGNALS = ("SIGUSR2", "SIGALRM", "SIGVTALRM", "SIGPROF", "SIGIO", "SIGPWR", "SIGSTKFLT")
#: Default memory limit of one job ("auto"): this share of the host's memory (the cgroup limit where one is
#: set, else physical RAM), counted as growth of the process' resident memory over its size at the job's start.
JOB_MEMORY_SHARE = 0.5
#: Working memory budgeted per image and graph variant in flight, per pixel of source plus output, from the
#: header and the chain's sizes alone (no decode); float-heavy steps (a wide blur) take more, and the sampled
#: limit catches them (bench/README.md).
BYTES_PER_PIXEL_IN_FLIGHT = 8
#: Share of a job's memory limit its images in flight may be budgeted; the rest is the job's fixed cost (its
#: graph, TensorFlow's and the encoder's buffers, the shard writer).
MEMORY_BUDGET_SHARE = 0.75
#: How often a running job's resident memory is sampled against its limit.
MEMORY_SAMPLE_SECONDS = 0.05
#: Before a job writes its first record, the output filesystem must hold its estimated size (extrapolated from
#: its first records) times this, plus the reserve below (room for the manifest and the filesystem's own).
SPACE_MARGIN = 1.10
SPACE_RESERVE_BYTES = 1024 * 1024

# --- Files a job supplies are untrusted: every parser is bounded (augd/parsing/) ---

#: Largest YAML file read (pipelines, augd.yaml, daemon config): the biggest real one is ~2 KB.
YAML_MAX_BYTES = 1024 * 1024
#: Deepest YAML nesting (collections, aliases expanded): shipped pipelines reach 8; the composer recurses.
YAML_MAX_DEPTH = 64
#: Most YAML nodes after alias expansion: stops "billion laughs" (a 1 KB file expanding to 10^9 nodes).
YAML_MAX_NODES = 100_000
#: Most scalar text after alias expansion: 10^5 aliases of one 1 MB string would be 100 GB in an error message.
YAML_MAX_CHARS = 4 * YAML_MAX_BYTES
#: Largest JSON file read: COCO instance files are legitimately hundreds of MB (train2017: 448 MB).
JSON_MAX_BYTES = 512 * 1024 * 1024
#: Deepest JSON nesting: COCO reaches 4; readers of it may recurse.
JSON_MAX_DEPTH = 64
#: Largest XML file read: a Pascal VOC annotation is a few KB; single-file exports (CVAT) run to tens of MB.
XML_MAX_BYTES = 64 * 1024 * 1024
#: Largest protobuf text file read (`augd import-config`'s pipeline.config): a real one is ~5 KB.
PBTXT_MAX_BYTES = 1024 * 1024
#: Deepest protobuf text nesting: the OD API's configs reach 6; the parser recurses.
PBTXT_MAX_DEPTH = 64

# --- TFRecord shards as input (augd/annotations/tfrecords.py): what one job may spend reading them ---

#: One record is read whole and decoded into Python values (a float list ~8x its bytes): it may take at most
#: 1/RECORD_MEMORY_SHARE of the job's memory limit (job_memory_mb, --max-memory-mb) ...
RECORD_MEMORY_SHARE = 16
#: ... and never more than this (an image within max_pixels, its masks and boxes take far less).
MAX_RECORD_BYTES = 256 * 1024 * 1024
#: A job's GZIP and ZLIB shards together inflate into at most SCRATCH_RATIO x their size on disk (records of
#: encoded images barely compress), at least SCRATCH_MIN_BYTES: one budget per job, however many shards.
SCRATCH_RATIO = 100
SCRATCH_MIN_BYTES = 64 * 1024 * 1024

class ExecutorKind(str, enum.Enum):
    """Where a job's images run (augd/job/executors/): the one list of executor names, for `augd run --executor`,
    the daemon's `executor:` key and the bench. A new executor adds its value here and a module of that name
    under augd/job/executors/."""
    AUTO = "auto"              # threads or processes, by what the job costs on this host (executors/choice.py)
    THREADS = "threads"        # one process, one graph, a thread pool
    PROCESSES = "processes"    # worker processes, each with its own graph (augd.job.workers.pool)
    BEAM = "beam"              # Apache Beam: the DirectRunner here, or any runner its pipeline options name
    DASK = "dask"              # a dask.distributed cluster: a local one of `workers` processes, or a running one

    def __str__(self) -> str:
        return self.value

    __format__ = str.__format__


EXECUTORS = tuple(k.value for k in ExecutorKind)
