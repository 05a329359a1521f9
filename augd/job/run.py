"""One job end to end: scan -> engine -> records -> shards -> atomic commit -> manifest.

The same function serves `augd run`, the daemon, and (later) a Beam runner's DoFn via
`process_images`. Images go to the graph in small batches (one call per ~50 ms of work); memory
is bounded: at most workers * INFLIGHT_PER_WORKER batches are in flight, and results are written in a
fixed order as soon as they are ready.
"""
from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Callable

import augd
from augd import defaults, jobfolder
from augd.annotations import AnnotationError
from augd.engine import Compiled, release_memory
from augd.errors import CancelCause, FailureReason, JobCancelled, JobFailed, Rejected, tf_error_message
from augd.formats import passthrough_ok, read_header
from augd.io import (SPLITS, AtomicOutput, InputImage, OutputExists, RejectedInput, ShardWriter,
                     is_url, local_path, make_example, read_bytes, scan_job, shard_count, shuffled_order, split_of,
                     write_text)
from augd.job.detection import Detection, prepare
from augd.job.report import (AnnotationReport, ByteCounts, ClassObjects, GraphInfo, Inputs, JobProgress, JobReport,
                             ObjectCounts, RecordCounts, ShardSet, Tally, Timing, iso_utc, labels_txt,
                             reasons_summary)
from augd.job.resources import MemoryGuard, SpaceCheck, check_memory, image_memory, output_bound
from augd.spec import PipelineSpec
from augd.stages import STAGES

log = logging.getLogger("augd.job")

__all__ = ["Cancel", "ImageOutcome", "JobOptions", "JobResult", "JobWatch", "process_images", "run_job",
           "variants_of"]


@dataclass(frozen=True)
class ImageOutcome:
    """What became of one input image: its records, or why it was rejected."""
    image: InputImage
    records: tuple[bytes, ...] = ()
    rejected: RejectedInput | None = None
    bytes_read: int = 0
    stage_seconds: dict = field(default_factory=dict)
    objects: ObjectCounts | None = None     # a detection job's image: its objects in and out


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
    rejected; `gpu_memory_mb`: cap on the GPU's memory; `memory_limit`: bytes the process' resident memory may
    grow by while the job runs (augd.job.resources), None: no limit; `max_rejected`: the largest fraction of the
    inputs that may be rejected, above it the job fails and commits nothing."""
    name: str | None = None
    workers: int | None = None
    overwrite: bool = False
    max_pixels: int = defaults.MAX_PIXELS
    gpu_memory_mb: int | None = None
    memory_limit: int | None = None
    max_rejected: float | None = None


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


def variants_of(spec: PipelineSpec) -> list[int]:
    """Variant indices written per image: 0 is the original (when kept), 1..N the augmented copies."""
    return ([0] if spec.keep_original else []) + list(range(1, spec.variants + 1))


def _changed_since_scan(img: InputImage, data: bytes) -> str | None:
    """Why the bytes read are not the file the scan checked (size, format, dimensions, orientation), or None.
    A file swapped after the scan (say, for a decompression bomb) is never decoded on the old header's word."""
    try:
        header = read_header(data)
    except Rejected as exc:
        header, why = None, str(exc)
    if len(data) == img.size and header == img.header:
        return None
    now = f"{len(data)} bytes, " + (f"{header.width}x{header.height} {header.format}" if header else why)
    return (f"the file changed after the job was scanned (was {img.size} bytes, {img.header.width}x"
            f"{img.header.height} {img.header.format}; now {now}); drop the job again")


def _read_checked(img: InputImage):
    """(bytes, None) or (None, ImageOutcome rejecting the image) when it cannot be read or has changed."""
    try:
        data = read_bytes(img)
    except OSError as exc:
        return None, ImageOutcome(img, rejected=RejectedInput(img.relpath, "unreadable", f"cannot read: {exc}"))
    changed = _changed_since_scan(img, data)
    if changed:
        return None, ImageOutcome(img, bytes_read=len(data), rejected=RejectedInput(img.relpath, "unreadable",
                                                                                    changed))
    return data, None


def _graph_variants(spec: PipelineSpec, img: InputImage, variants: list[int] | None = None) -> tuple[list[int], bool]:
    """(variants that go through the graph, whether variant 0 stores the source bytes). The original is
    stored as its own bytes when they already decode to the stored RGB image (no generation loss, no
    encode). With augmented variants, decoding them proves the image sound; with none, variant 0 goes
    through the graph once to prove the same, and its re-encoded payload is dropped for the source bytes."""
    variants = variants_of(spec) if variants is None else variants
    passthrough = 0 in variants and spec.output.format != "raw" and passthrough_ok(img.header)
    if passthrough and len(variants) > 1:
        return [v for v in variants if v != 0], True
    return variants, passthrough


def process_images(compiled: Compiled, spec: PipelineSpec, imgs, variants: list[int] | None = None,
                   detection: Detection | None = None) -> list[ImageOutcome]:
    """All records of a few images, with one graph call for all of their variants. Never raises for bad
    input: a bad image becomes a rejection and the others are unaffected. `detection`: each record also carries
    its image's objects, moved with its pixels (augd.job.detection)."""
    fmt = spec.output.format
    work, outcomes = [], {}
    for k, img in enumerate(imgs):
        t0 = time.perf_counter()
        data, rejected = _read_checked(img)
        if rejected:
            outcomes[k] = rejected
            continue
        stages = dict.fromkeys(STAGES, 0.0)
        stages["read"] = time.perf_counter() - t0
        graph_variants, passthrough = _graph_variants(spec, img, variants)
        work.append((k, img, data, stages, graph_variants, passthrough))
    # Box-aware ops (random_crop's min_object_covered) draw from the image's boxes: the graph's plan gets the
    # same ones as the annotations' geometry (ImageObjects.variant), so both draw the same windows.
    boxed = detection is not None and compiled.program.uses_boxes
    items = [(data, img.relpath, v, img.header, detection.boxes(img) if boxed else None)
             for _, img, data, _, vs, _ in work for v in vs]
    # A detection job's results carry the Geo steps their plan used: the annotations move by them, unplanned.
    results = iter(compiled.process_many(items, geometry=True) if detection is not None else
                   compiled.process_many(items))
    for k, img, data, stages, graph_variants, passthrough in work:
        got = {v: next(results) for v in graph_variants}
        bad = next((r for r in got.values() if isinstance(r, Exception)), None)
        if bad is not None:
            outcomes[k] = ImageOutcome(img, bytes_read=len(data), rejected=RejectedInput(
                img.relpath, "undecodable", tf_error_message(bad)))
            continue
        source_sha = hashlib.sha256(data).hexdigest()
        records = []
        try:
            objects = detection.for_image(img) if detection is not None else None
            for v in variants_of(spec) if variants is None else variants:
                r = got.get(v)
                if r is not None:
                    for name, sec in zip(("decode", "augment", "encode"), r.stage_seconds):
                        stages[name] += sec
                if v == 0 and passthrough:
                    payload, out_fmt = data, img.header.format
                    h, w = (r.height, r.width) if r is not None else (img.header.height, img.header.width)
                else:
                    payload, out_fmt, h, w = r.payload, fmt, r.height, r.width
                extra = {"objects": objects.variant(spec, compiled.program, v, h, w, replanned=bool(r and r.replanned),
                                                    steps=r.geometry if r is not None else None)
                         } if objects else {}
                records.append(make_example(
                    encoded=payload, fmt=out_fmt, height=h, width=w, label=img.label, label_text=img.label_text,
                    filename=img.relpath, source_sha256=source_sha, variant=v, pipeline=spec.name,
                    pipeline_sha256=spec.sha256, **extra))
        except ValueError as exc:  # AnnotationError, or a ValueError moving or checking its annotation
            if detection is None and not isinstance(exc, AnnotationError):
                raise
            # its objects cannot be written right (a singular warp, a mask that will not warp, a record whose
            # objects fail RecordObjects.check): the image goes, not the job
            outcomes[k] = ImageOutcome(img, bytes_read=len(data), rejected=RejectedInput(
                img.relpath, "bad_annotation", str(exc)))
            continue
        outcomes[k] = ImageOutcome(img, records=tuple(records), bytes_read=len(data), stage_seconds=stages,
                                   objects=objects.counts() if objects else None)
    return [outcomes[k] for k in range(len(imgs))]


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
        per_record = (time.perf_counter() - t0) / (len(batch) * self.per_image)
        old = self.seconds_per_record
        self.seconds_per_record = per_record if old is None else 0.7 * old + 0.3 * per_record
        return out


def _tf_errors():
    import tensorflow as tf  # already loaded by the engine when a job runs
    return tf.errors


def _estimate_bytes(spec: PipelineSpec, images, n: int | None = None) -> int:
    """The shard count's size estimate: part of the output's identity (it decides the shards), so unchanged.
    `n`: records per image (default: the pipeline's variants)."""
    n = len(variants_of(spec)) if n is None else n
    if spec.output.format == "raw":
        return sum(i.header.width * i.header.height * 3 for i in images) * n
    return sum(i.size for i in images) * n


def _image_cost(spec: PipelineSpec, variants_for: Callable[[str], list[int]]):
    largest = output_bound(spec.ops)

    def cost(img: InputImage) -> int:
        pixels = img.header.width * img.header.height
        return image_memory(pixels, largest(pixels), len(_graph_variants(spec, img, variants_for(img.split))[0]))
    return cost


def _split_images(scan, spec: PipelineSpec, input_dir: str) -> list[tuple[str, list[InputImage]]]:
    """[(split, its images)] in SPLITS order: the job's split folders, or a `split:` setting's stable hash of
    each path (so a re-run or an added image never moves an image between splits); [("", all)] without."""
    images = list(scan.images)
    if spec.split:
        if scan.splits:
            raise JobFailed(f"{input_dir}: the job has split folders ({', '.join(scan.splits)}) and the pipeline "
                            f"sets split: {dict(spec.split)}; use one or the other", reason=FailureReason.BAD_PIPELINE)
        images = [dataclasses.replace(i, split=split_of(i.relpath, spec.split)) for i in images]
    elif not scan.splits:
        return [("", images)]
    return [(s, [i for i in images if i.split == s]) for s in SPLITS if any(i.split == s for i in images)]


def _check_rejected(input_dir: str, seen: int, rejected: list, max_rejected: float | None,
                    not_inputs: frozenset[str] = frozenset()) -> None:
    """JobFailed (too_many_rejected) when more than `max_rejected` of the inputs were rejected. `not_inputs`: the
    rejected files that are no input image (a detection job's orphan or broken annotation files): listed in the
    manifest, but left out of the fraction on both sides."""
    if not_inputs:
        seen -= sum(r.relpath in not_inputs for r in rejected)
        rejected = [r for r in rejected if r.relpath not in not_inputs]
    if max_rejected is None or not seen or len(rejected) / seen <= max_rejected:
        return
    reasons = reasons_summary(r.reason for r in rejected)
    raise JobFailed(f"{input_dir}: {len(rejected)} of {seen} inputs were rejected ({len(rejected) / seen:.1%}), more "
                    f"than max_rejected={max_rejected:g} allows ({reasons}; first: {rejected[0].relpath}: "
                    f"{rejected[0].message}); nothing was written", reason=FailureReason.TOO_MANY_REJECTED)


def _write_all(compiled, spec, order, writer, workers, tally: Tally, watch: JobWatch,
               memory: tuple | None = None, before_writing=None, variants: list[int] | None = None,
               detection: Detection | None = None) -> None:
    """Process batches of images on a thread pool (TF and OpenCV release the GIL) and write their records in
    `order`. A bounded window of batches keeps memory flat whatever the job size; with `memory` (limit,
    cost per image, guard), batches also fly only while their budget fits the limit, and the job stops
    when the guard saw the process outgrow it. `before_writing(results)` sees each batch's results before
    they are written."""
    window = workers * defaults.INFLIGHT_PER_WORKER
    limit, cost, guard = memory or (None, None, None)
    batches = _Batches(order, spec, cost, variants, detection)
    index = 0
    cancel, on_image, on_progress = watch.cancel, watch.on_image, watch.on_progress
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="augd-img") as pool:
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
                    pending.append((pool.submit(batches.timed, compiled, spec, batch),
                                    sum(map(cost, batch)) if cost else 0))
                if not pending:
                    return
                if cancel is not None and cancel.is_set():
                    raise JobCancelled(cancel.cause)
                results = pending.popleft()[0].result()
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


def _label_map_file(spec: PipelineSpec):
    """The scan's `ignore`: a job's own label map file named by `annotations.label_map` is no input."""
    lm = spec.annotations.label_map if spec.annotations is not None else None
    if not isinstance(lm, str) or os.path.isabs(lm):
        return None
    rel = os.path.normpath(lm).replace(os.sep, "/")
    return lambda relpath: relpath == rel


def _annotation_report(detection: Detection, tally: Tally, rejected, negatives_rejected: int) -> AnnotationReport:
    names = detection.label_map.names()
    return AnnotationReport(
        format=detection.format, label_map=jobfolder.LABEL_MAP_FILE,
        classes=tuple(ClassObjects(detection.label_map.id_of(n, jobfolder.LABEL_MAP_FILE), n, tally.objects_in[n],
                                   tally.objects_out[n]) for n in names),
        dropped=tally.dropped, negatives_kept=tally.negatives, negatives_rejected=negatives_rejected,
        bad_annotations=sum(r.reason == "bad_annotation" for r in rejected))


def run_job(input_dir: str, spec: PipelineSpec, out_root: str, options: JobOptions | None = None,
            watch: JobWatch | None = None) -> JobResult:
    """Run one job into `out_root`/name/. Raises JobFailed (with its reason) when no complete output can be
    produced; bad images are rejected and listed, they never fail the job on their own."""
    opts, watch = options or JobOptions(), watch or JobWatch()
    started = time.time()
    t_start = time.perf_counter()
    input_dir = input_dir.rstrip("/") or "/"
    name = opts.name or os.path.basename(input_dir)
    detection = prepare(input_dir, spec, opts.max_pixels)
    scan = scan_job(input_dir, max_pixels=opts.max_pixels, classes=spec.labels, ignore=_label_map_file(spec),
                    skip_names=jobfolder.CONTROL_FILES, skip_anywhere=jobfolder.MARKERS,
                    layout=detection.layout if detection else None)
    negatives_rejected = 0
    if detection is not None:
        kept, refused, negatives_rejected = detection.attach(scan.images)
        scan = dataclasses.replace(scan, images=tuple(kept),
                                   rejected=tuple(sorted(scan.rejected + tuple(refused), key=lambda r: r.relpath)))
    if not scan.images:
        reasons = "; ".join(f"{r.relpath}: {r.message}" for r in scan.rejected[:5]) or "the folder holds no files"
        raise JobFailed(f"{input_dir}: no valid image to process ({len(scan.rejected)} rejected: {reasons})",
                        reason=FailureReason.NO_VALID_INPUT)
    workers = max(1, opts.workers or os.cpu_count() or 1)
    memory_limit = opts.memory_limit

    def variants_for(split: str) -> list[int]:  # splits left out of augment_splits keep only their originals
        return [0] if split and spec.augment_splits is not None and split not in spec.augment_splits \
            else variants_of(spec)

    groups = []  # (split, its images in their seeded order, shard count, records per image)
    for split, images in _split_images(scan, spec, input_dir):
        order = [images[i] for i in shuffled_order([i.relpath for i in images], spec.seed)]
        n = len(variants_for(split))
        groups.append((split, order, shard_count(_estimate_bytes(spec, order, n), spec.output.shards), n))
    everything = [img for _, order, _, _ in groups for img in order]
    cost = _image_cost(spec, variants_for) if memory_limit else None
    budget = int(memory_limit * defaults.MEMORY_BUDGET_SHARE) if memory_limit else None
    if cost:
        check_memory(cost, everything, budget, memory_limit)
    state = JobProgress(name=name, total=len(everything))
    tally = Tally(state)
    tally.add_scan(scan)
    compiled = None
    try:
        with AtomicOutput(out_root, name, overwrite=opts.overwrite) as out:
            # Built once the output is known to be writable: a run that may not write fails before the graph.
            compiled = Compiled(spec, gpu_memory_mb=opts.gpu_memory_mb)
            check = None if is_url(out.tmp_dir) else SpaceCheck(local_path(out.tmp_dir),
                                                                [(order, n) for _, order, _, n in groups])
            shards = ShardSet()
            with (MemoryGuard(memory_limit) if memory_limit else nullcontext()) as guard:
                for split, order, count, _ in groups:  # one shard set per split: <job>-train-00000-of-00004...
                    with ShardWriter(out.tmp_dir, f"{name}-{split}" if split else name, count,
                                     spec.output.compression) as writer:
                        _write_all(compiled, spec, order, writer, workers, tally, watch,
                                   (budget, cost, guard) if memory_limit else None, check, variants_for(split),
                                   detection)
                    shards.add(split, writer)
            if state.written == 0:
                first = tally.rejected[0]
                raise JobFailed(f"{input_dir}: none of {len(everything)} images could be decoded "
                                f"(first: {first.relpath}: {first.message})", reason=FailureReason.NO_VALID_INPUT)
            rejected = list(scan.rejected) + tally.rejected
            seen = len(scan.images) + len(scan.rejected)
            _check_rejected(input_dir, seen, rejected, opts.max_rejected, scan.not_inputs)
            report = JobReport(
                augd_version=augd.__version__, tensorflow_version=compiled.device.tf_version,
                device=compiled.device.name, job=name, input=input_dir, created=iso_utc(started),
                pipeline=spec.normalized(), pipeline_sha256=spec.sha256, seed=spec.seed,
                classes=tally.classes(scan.classes), unlabeled=tally.unlabeled(),
                inputs=Inputs(seen, state.written, tuple(sorted(rejected, key=lambda r: r.relpath))),
                records=RecordCounts(sum(shards.records), tuple(variants_of(spec))), shards=shards.shards(),
                splits=shards.splits(tally) if groups[0][0] else {},
                bytes=ByteCounts(tally.bytes_read, shards.bytes_written),
                graph=GraphInfo(compiled.builds, compiled.traces, compiled.stage_devices),
                timing=Timing.measured(time.perf_counter() - t_start, state.written, tally.stages),
                annotations=_annotation_report(detection, tally, rejected, negatives_rejected) if detection else None)
            if scan.classes:
                write_text(f"{out.tmp_dir}/labels.txt", labels_txt(scan.classes))
            if detection is not None:
                write_text(f"{out.tmp_dir}/{jobfolder.LABEL_MAP_FILE}", detection.label_map.to_pbtxt())
            write_text(f"{out.tmp_dir}/manifest.json", report.to_json())
            out.commit()
    except OutputExists as exc:
        raise JobFailed(str(exc), reason=FailureReason.OUTPUT_EXISTS) from None
    except (OSError, _tf_errors().OpError) as exc:
        msg = tf_error_message(exc) if not isinstance(exc, OSError) else str(exc)
        raise JobFailed(f"cannot write output under {out_root}: {msg}", reason=FailureReason.OUTPUT_ERROR) from None
    finally:
        if compiled is not None:
            compiled.close()
            release_memory()  # a long-lived process (the daemon) stays flat from job to job
    return JobResult(name=name, out_dir=out.dest, report=report)
