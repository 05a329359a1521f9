"""One job end to end: scan -> engine -> records -> shards -> atomic commit -> manifest.

`run_job` serves `augd run` and the daemon, on threads in this process or on worker processes (augd.workers.pool);
the per-image work every executor calls (worker processes and Beam's DoFn too) is augd/job/images.py. Images go
to the graph in small batches (one call per ~50 ms of work); memory is bounded: at most workers *
INFLIGHT_PER_WORKER batches are in flight, and results are written in a fixed order as soon as they are ready.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Callable

from augd import defaults
from augd.engine import Engine, EngineOptions, release_memory
from augd.errors import CancelCause, FailureReason, JobCancelled, JobFailed, tf_error_message
from augd.host import usable_cpus
from augd.io import (AtomicOutput, InputImage, OutputExists, ShardWriter, is_url, local_path)
from augd.job.detection import Detection
from augd.job.finish import build_report, check_outcome, write_sidecars
from augd.job.images import ImageOutcome, graph_variants, process_images
from augd.job.report import GraphInfo, JobProgress, JobReport, ShardSet, Tally
from augd.workers.pool import ProcessPool, WorkerError, WorkerLost, choose_executor
from augd.job.resources import MemoryGuard, SpaceCheck, check_memory, image_memory, output_bound
from augd.job.units import plan_job, variants_of
from augd.spec import PipelineSpec

log = logging.getLogger("augd.job")

__all__ = ["Cancel", "ImageOutcome", "JobOptions", "JobResult", "JobWatch", "build_report", "check_outcome",
           "process_images", "run_job", "variants_of", "write_sidecars"]


@dataclass(frozen=True)
class JobResult:
    """A committed job: its name, its output folder, and what it did (manifest.json holds the same report)."""
    name: str
    out_dir: str
    report: JobReport


@dataclass(frozen=True)
class JobOptions:
    """How to run a job. `name`: the output folder's (default: the input folder's name); `workers`: images in
    parallel (default: all cores); `overwrite`: replace a complete output; `max_pixels`: larger images are
    rejected; `memory_limit`: bytes the process' resident memory may
    grow by while the job runs (augd.job.resources), None: no limit; `max_rejected`: the largest fraction of the
    inputs that may be rejected, above it the job fails and commits nothing; `executor`: "processes" (worker
    processes, each with its own graph), "threads" (one process) or "auto" (augd.workers.pool.choose_executor)."""
    name: str | None = None
    workers: int | None = None
    overwrite: bool = False
    max_pixels: int = defaults.MAX_PIXELS
    memory_limit: int | None = None
    max_rejected: float | None = None
    executor: str = "auto"


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
    live progress after it, and the cancel signal."""
    on_image: Callable[[ImageOutcome], None] | None = None
    on_progress: Callable[[JobProgress], None] | None = None
    cancel: Cancel | None = None


class _Batches:
    """Hands out the next batch of images, sized so one graph call takes ~BATCH_SECONDS: fast chains get
    up to GRAPH_BATCH records a call (the per-call cost vanishes), slow ones one image a call (progress,
    cancellation and the spread over workers stay fine-grained). Starts at one image until timed."""

    def __init__(self, order, spec: PipelineSpec, cost: Callable[[InputImage], int] | None = None,
                 variants: list[int] | None = None, detection: Detection | None = None):
        self.order, self.next_index = order, 0
        self.detection = detection
        self.variants = variants_of(spec) if variants is None else variants
        self.per_image = max(1, len(self.variants))
        self.seconds_per_record: float | None = None
        self.cost = cost        # memory budgeted per image; None: no memory limit

    def next_cost(self) -> int:
        return self.cost(self.order[self.next_index]) if self.next_index < len(self.order) else 0

    def take(self, room: int | None = None):
        """The next batch, cut to `room` bytes of memory budget (but never empty while images remain)."""
        if self.next_index >= len(self.order):
            return None
        records = 1
        if self.seconds_per_record is not None:
            records = int(defaults.BATCH_SECONDS / max(self.seconds_per_record, 1e-6))
        size = max(1, min(records, defaults.GRAPH_BATCH) // self.per_image)
        batch = self.order[self.next_index:self.next_index + size]
        if room is not None:
            fits, used = 0, 0
            for img in batch:
                used += self.cost(img)
                if used > room and fits:
                    break
                fits += 1
            batch = batch[:fits]
        self.next_index += len(batch)
        return batch

    def timed(self, compiled, spec, batch):
        """process_images, timed for the next batches' size (run on a worker thread)."""
        t0 = time.perf_counter()
        out = process_images(compiled, spec, batch, self.variants, self.detection)
        self.observe(time.perf_counter() - t0, len(batch))
        return out

    def observe(self, seconds: float, images: int) -> None:
        per_record = seconds / (images * self.per_image)
        old = self.seconds_per_record
        self.seconds_per_record = per_record if old is None else 0.7 * old + 0.3 * per_record


class _Threads:
    """The executor in one process: batches on a thread pool over one graph (TF and OpenCV release the GIL)."""

    def __init__(self, compiled, spec: PipelineSpec, workers: int):
        self.compiled, self.spec, self.workers = compiled, spec, workers
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="augd-img")

    def submit(self, batches: _Batches, batch):
        return self._pool.submit(batches.timed, self.compiled, self.spec, batch)

    def result(self, batches: _Batches, future) -> list[ImageOutcome]:
        return future.result()

    def graph(self) -> GraphInfo:
        c = self.compiled
        return GraphInfo(c.builds, c.traces, c.stage_devices, "threads",
                         ({"pid": os.getpid(), "builds": c.builds, "traces": c.traces, "threads": self.workers},))

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


class _Processes:
    """The executor over worker processes (augd.workers.pool): each builds the job's graph at its first batch."""

    def __init__(self, pool: ProcessPool, spec: PipelineSpec, detection: Detection | None, own: bool):
        self.pool, self.own, self.workers = pool, own, pool.size
        self.job = pool.start_job(spec, detection)

    def submit(self, batches: _Batches, batch):
        try:
            return self.pool.submit(self.job, batch, batches.variants)
        except WorkerLost as exc:
            raise JobFailed(f"worker processes died: {exc}", reason=FailureReason.WORKER_LOST) from None

    def result(self, batches: _Batches, future) -> list[ImageOutcome]:
        try:
            outcomes, seconds = future.result()
        except WorkerLost as exc:
            raise JobFailed(f"worker processes died: {exc}", reason=FailureReason.WORKER_LOST) from None
        except WorkerError as exc:
            raise JobFailed(f"a worker process failed: {exc}", reason=FailureReason.CRASHED) from None
        batches.observe(seconds, len(outcomes))
        return outcomes

    def graph(self) -> GraphInfo:
        workers = tuple(sorted(self.job.workers.values(), key=lambda w: w["pid"]))
        return GraphInfo(sum(w["builds"] for w in workers), sum(w["traces"] for w in workers),
                         self.job.stage_devices, "processes", workers)

    def close(self) -> None:
        self.pool.end_job(self.job)
        if self.own:
            self.pool.close()


def _tf_errors():
    import tensorflow as tf  # already loaded by the engine when a job runs
    return tf.errors


def _image_cost(spec: PipelineSpec, variants_for: Callable[[str], list[int]]):
    largest = output_bound(spec.ops)

    def cost(img: InputImage) -> int:
        pixels = img.header.width * img.header.height
        return image_memory(pixels, largest(pixels), len(graph_variants(spec, img, variants_for(img.split))[0]))
    return cost


def _write_all(runner, spec, order, writer, tally: Tally, watch: JobWatch,
               memory: tuple | None = None, before_writing=None, variants: list[int] | None = None,
               detection: Detection | None = None) -> None:
    """Process batches of images on the runner (_Threads or _Processes) and write their records in `order`, as
    augd.job.units.record_slots places them (ShardWriter: record k to shard k % count). A bounded window of
    batches keeps memory flat whatever the job size; with `memory` (limit, cost per image, guard), batches also
    fly only while their budget fits the limit, and the job stops when the guard saw the process outgrow it. `before_writing(results)` sees each batch's results before
    they are written."""
    window = runner.workers * defaults.INFLIGHT_PER_WORKER
    limit, cost, guard = memory or (None, None, None)
    batches = _Batches(order, spec, cost, variants, detection)
    index = 0
    cancel, on_image, on_progress = watch.cancel, watch.on_image, watch.on_progress
    pending: deque = deque()   # (future, budgeted bytes)
    try:
        while True:
            if guard is not None and guard.tripped.is_set():
                raise guard.error()
            while len(pending) < window:
                room = None if limit is None else limit - sum(c for _, c in pending)
                if room is not None and pending and batches.next_cost() > room:
                    break
                if (batch := batches.take(room)) is None:
                    break
                pending.append((runner.submit(batches, batch), sum(map(cost, batch)) if cost else 0))
            if not pending:
                return
            if cancel is not None and cancel.is_set():
                raise JobCancelled(cancel.cause)
            results = runner.result(batches, pending.popleft()[0])
            if before_writing is not None:
                before_writing(results)
            for res in results:
                if not res.rejected:
                    t_w = time.perf_counter()
                    for rec in res.records:
                        writer.write(index, rec)
                        index += 1
                    res.stage_seconds["write"] = time.perf_counter() - t_w
                tally.add(res)
                if on_image:
                    on_image(res)
                if on_progress:
                    on_progress(tally.progress)
    finally:
        for f, _ in pending:
            f.cancel()


def run_job(input_dir: str, spec: PipelineSpec, out_root: str, options: JobOptions | None = None,
            watch: JobWatch | None = None, engine: Engine | None = None, pool: ProcessPool | None = None) -> JobResult:
    """Run one job into `out_root`/name/. Raises JobFailed (with its reason) when no complete output can be
    produced; bad images are rejected and listed, they never fail the job on their own. `engine`: the Engine to
    compile the job's graph with (default: one with the default EngineOptions); its options go to the worker
    processes. `pool`: a warm ProcessPool to run on (the daemon's), else one is started for the job when the
    executor is processes."""
    opts, watch = options or JobOptions(), watch or JobWatch()
    started = time.time()
    t_start = time.perf_counter()
    plan = plan_job(input_dir, spec, opts.name, opts.max_pixels)
    name, detection = plan.name, plan.detection
    workers = opts.workers or usable_cpus()
    memory_limit = opts.memory_limit
    everything = plan.images
    cost = _image_cost(spec, {g.split: list(g.variants) for g in plan.groups}.__getitem__) if memory_limit else None
    budget = int(memory_limit * defaults.MEMORY_BUDGET_SHARE) if memory_limit else None
    if cost:
        check_memory(cost, everything, budget, memory_limit)
    state = JobProgress(name=name, total=len(everything))
    tally = Tally(state)
    tally.add_scan(plan.scan)
    engine = engine or Engine(EngineOptions())
    records = sum(len(g.order) * len(g.variants) for g in plan.groups)
    executor = choose_executor(opts.executor, engine.device.kind, pool.size if pool else workers, records, pool is not None)
    compiled = runner = None
    try:
        with AtomicOutput(out_root, name, overwrite=opts.overwrite) as out:
            # Built once the output is known to be writable: a run that may not write fails before the graph.
            if executor == "processes":
                runner = _Processes(pool or ProcessPool(workers, engine.options), spec, detection, own=pool is None)
            else:
                compiled = engine.compile(spec)
                runner = _Threads(compiled, spec, workers)
            check = None if is_url(out.tmp_dir) else SpaceCheck(local_path(out.tmp_dir),
                                                                [(g.order, len(g.variants)) for g in plan.groups])
            shards = ShardSet()
            with (MemoryGuard(memory_limit) if memory_limit else nullcontext()) as guard:
                for g in plan.groups:  # one shard set per split
                    with ShardWriter(out.tmp_dir, g.prefix(name), g.shards, spec.output.compression) as writer:
                        _write_all(runner, spec, list(g.order), writer, tally, watch,
                                   (budget, cost, guard) if memory_limit else None, check, list(g.variants),
                                   detection)
                    shards.add(g.split, writer)
            rejected = check_outcome(plan, tally, opts.max_rejected)
            report = build_report(plan, tally, shards, runner.graph(), engine.device, started,
                                  time.perf_counter() - t_start, rejected)
            write_sidecars(out.tmp_dir, plan, report)
            out.commit()
    except OutputExists as exc:
        raise JobFailed(str(exc), reason=FailureReason.OUTPUT_EXISTS) from None
    except (OSError, _tf_errors().OpError) as exc:
        msg = tf_error_message(exc) if not isinstance(exc, OSError) else str(exc)
        raise JobFailed(f"cannot write output under {out_root}: {msg}", reason=FailureReason.OUTPUT_ERROR) from None
    finally:
        if runner is not None:
            runner.close()   # threads: waits for running batches before their graph goes
        if compiled is not None:
            compiled.close()
            release_memory()  # a long-lived process (the daemon) stays flat from job to job
    return JobResult(name=name, out_dir=out.dest, report=report)
