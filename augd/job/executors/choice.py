"""What `--executor auto` (and the daemon's `executor: auto`) runs a job on: the executor and worker count that
finish it first, start-up included, by a small cost model of the job and the host.

The model (constants below, measured with `python -m bench.crossover` and bench.whole, bench/README.md):
- a job is `records` records from `images` images of `source_bytes` bytes on average; one record costs
  `record_seconds` of CPU (`JobCost`, estimated from the chain and the image sizes: a fixed Python cost, the
  source's decode, and one pass over the output's pixels per pixel step: the fused warp, each colour op (all of
  them one under `colour: fast`), each pixel op, the encode);
- threads run one process: it imports TensorFlow (`import_seconds`), then its threads share one GIL: each record
  holds it for `gil_seconds` (its Python: reading, checks, Example building, the OpenCV steps' glue, more with
  boxes and masks to move), so threads keep at most record_seconds / gil_seconds cores busy. A chain whose time is
  in pixel kernels (which release the GIL) keeps every core busy on threads, and then threads win: no second
  import, no record sent between processes;
- worker processes import TensorFlow each, all at once (as many at a time as there are cores: a second import on
  a free core costs no wall), pay SPAWN_SECONDS each to start and PARENT_SECONDS per record in the parent (the
  result's trip back, the framing), and keep min(workers, cores) cores busy. A warm pool (the daemon's) has paid
  its start-up. Their parent plans the job while they import; a threads job plans after its import.

Choices that are not the model's: a GPU host runs threads (one process owns the device, the GPU path's rule),
and so does a host with one usable core or one worker; worker processes are only as many as the memory that
is available holds (WORKER_BYTES each). Every choice is written to the manifest (`graph.choice`) and the log,
with its estimates.
"""
from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass

from augd.defaults import ExecutorKind
from augd.files import count_files
from augd.host import usable_cpus

__all__ = ["Choice", "Divert", "Host", "JobCost", "choose", "estimate_folder", "for_job", "job_cost", "plan_cost",
           "tiling"]

#: The GIL a record holds: a fixed part, a part per op of its chain and per output pixel (the Python around each
#: kernel and the arrays it hands on), more for a job with annotations (boxes, masks and keypoints moved in
#: Python) and per partner image. Fitted to threads against processes at 30000 records of every shipped pipeline
#: (bench.crossover) and to the seed chain with `colour: fast` (bench.whole): threads keep ~1.2 (detection-ssd) to
#: 2 (seed-classifier, whose exact colour ops run outside the GIL) of 2 cores busy.
GIL_SECONDS = 0.0015
GIL_SECONDS_PER_OP = 0.00025
GIL_SECONDS_PER_PIXEL = 4e-9
ANNOTATED_GIL_SECONDS = 0.0015
PARTNER_GIL_SECONDS = 0.001
#: CPU seconds of one TensorFlow import and the engine's start (one process), where not measured here.
IMPORT_SECONDS = 2.5
#: Start of one worker process (spawn, unpickling its start-up) beside its import; the parent plans meanwhile,
#: where a threads job plans after its import, so a cold pool starts about as soon as threads do (bench.crossover).
SPAWN_SECONDS = 0.05
#: What a record costs more on worker processes: its trip back to the parent (pickled), the parent's share.
PARENT_SECONDS = 0.0005
#: The Python cost of one record whatever its pixels (plan, read, checks, Example, hash).
RECORD_SECONDS = 0.001
#: Decode of one source pixel, and one pass of a pixel step over one output pixel (libjpeg-turbo and OpenCV on one
#: core). With RECORD_SECONDS, fitted to the per-record CPU of seed-classifier, geometric-heavy and detection-ssd on
#: the bench's photos (~565 kpx at ~5 px per byte; 11.4, 4.5 and 3.7 ms measured, 11.2, 3.7, 4.5 estimated).
DECODE_SECONDS_PER_PIXEL = 3e-9
PASS_SECONDS_PER_PIXEL = 2.7e-9
#: Decoded pixels per byte of an encoded photo (JPEG q90-95: 4-6; PNG less; a guess where no header was read).
PIXELS_PER_BYTE = 5.0
#: Headers a tiled job's folder estimate reads (its first images'): tiles come in whole numbers per image.
TILE_HEADERS = 32
#: Images a planned tiled job's cost counts the tiles of (spread over the plan): tiles_of costs ~50 us for a 12 MP
#: image in 640 px tiles, so every image of a 100k-image job would cost seconds before its first record.
TILE_SAMPLE = 1000
#: The largest first record a records job's estimate reads for its keys (an image's record: a few MB at most).
RECORD_PEEK_BYTES = 64 << 20
#: A worker process' resident memory with TensorFlow loaded and a graph built (~600 MB measured) plus headroom.
WORKER_BYTES = 700 * 1024 * 1024


@dataclass(frozen=True)
class JobCost:
    """What a job will cost: `records` records of `record_seconds` CPU each, from `images` images; `annotated`: the
    job moves boxes, masks or keypoints with the pixels."""
    images: int
    records: int
    record_seconds: float
    annotated: bool = False
    #: of record_seconds, what holds the GIL (threads serialize it)
    gil_seconds: float = GIL_SECONDS

    @property
    def cpu_seconds(self) -> float:
        return self.records * self.record_seconds


@dataclass(frozen=True)
class Host:
    """What the job may use: `cores` (augd.host.usable_cpus), `workers` asked for (or the cores), whether the device
    is a GPU, the bytes of memory available, and a warm pool of that many workers (the daemon's) if any."""
    cores: int
    workers: int
    gpu: bool = False
    memory_available: int | None = None
    warm_workers: int = 0
    #: this process has TensorFlow and an engine already (threads start at once)
    engine_ready: bool = False
    import_seconds: float = IMPORT_SECONDS

    @classmethod
    def here(cls, workers: int | None = None, gpu: bool = False, warm_workers: int = 0,
             engine_ready: bool = False) -> "Host":
        cores = usable_cpus()
        return cls(cores, workers or cores, gpu, memory_available(), warm_workers, engine_ready)


@dataclass(frozen=True)
class Choice:
    """The executor (never auto) and its worker count, why, and the estimated seconds of each option weighed."""
    kind: ExecutorKind
    workers: int
    why: str
    estimates: tuple[tuple[str, float], ...] = ()
    requested: str = "auto"

    def to_dict(self) -> dict:
        return {"requested": self.requested, "executor": self.kind.value, "workers": self.workers, "why": self.why,
                "estimated_seconds": {k: round(v, 2) for k, v in self.estimates}}

    def served_by(self, pool_size: int | None) -> "Choice":
        """This choice (a daemon's, made once) as each job runs it: on the warm pool of `pool_size` workers; a
        processes choice without one on threads."""
        if pool_size:
            return dataclasses.replace(self, kind=ExecutorKind.PROCESSES, workers=pool_size,
                                       why="the daemon's warm pool")
        if self.kind is ExecutorKind.PROCESSES:   # its pool could not start
            return dataclasses.replace(self, kind=ExecutorKind.THREADS, why="worker processes could not start")
        return self   # threads, or an executor that brings its own workers (Dask, Beam)

    def line(self) -> str:
        return f"executor {self.kind.value} x{self.workers} ({self.requested}): {self.why}"


def choose(requested, cost: JobCost | None, host: Host) -> Choice:
    """The executor for a job. Any kind but auto is what was asked, with the workers asked for. auto: threads on
    a GPU host, with one core or one worker, or where memory holds fewer than two worker processes; else the faster
    of threads and worker processes (2 up to the cores and the workers asked for) by the model. `cost` None: the
    job is not known yet (the daemon warming its pool), as if it were large."""
    try:
        kind = ExecutorKind(requested)
    except ValueError:
        raise ValueError(f"executor must be one of {[k.value for k in ExecutorKind]}; got {requested!r}") from None
    if kind is not ExecutorKind.AUTO:
        return Choice(kind, host.workers, "asked for", requested=kind.value)
    threads = lambda why, est=(): Choice(ExecutorKind.THREADS, host.workers, why, est)  # noqa: E731
    if host.gpu:
        return threads("a GPU host: one process owns the device")
    if host.workers < 2 or host.cores < 2:
        return threads(f"{min(host.workers, host.cores)} worker(s) on {host.cores} usable core(s): nothing to run "
                       "beside the first")
    held = _memory_workers(host)
    if held < 2 and not host.warm_workers:
        return threads(f"memory: {_mb(host.memory_available)} available holds fewer than 2 worker processes "
                       f"(~{_mb(WORKER_BYTES)} each)")
    if cost is None:   # the daemon's pool, before any job: the workers configured, as memory allows
        return Choice(ExecutorKind.PROCESSES, min(host.workers, held), "no job to weigh: a warm pool pays for "
                      "every job after the first")
    most = host.warm_workers or min(host.workers, host.cores, held)
    t = threads_seconds(cost, host)
    options = {w: processes_seconds(cost, host, w) for w in ([most] if host.warm_workers else range(2, most + 1))}
    w = min(options, key=options.get)
    est = (("threads", t), (f"processes x{w}", options[w]))
    what = f"{cost.records} records x {cost.record_seconds * 1e3:.1f} ms CPU (estimated)"
    if options[w] < t:
        warm = f" (a pool of {w} worker processes is running)" if host.warm_workers else ""
        return Choice(ExecutorKind.PROCESSES, w, f"{what}: processes ~{options[w]:.1f} s{warm} against threads "
                      f"~{t:.1f} s", est)
    return threads(f"{what}: threads ~{t:.1f} s against processes ~{options[w]:.1f} s", est)


@dataclass(frozen=True)
class Divert:
    """Where a daemon sends its larger jobs: those of at least `min_files` files run on `kind` (the config's `beam:`
    block, or `executor: beam`: Apache Beam), the others on the daemon's own choice."""
    kind: ExecutorKind
    min_files: int = 0


def for_job(local: Choice, path: str, divert: Divert | None) -> Choice:
    """The daemon's executor for the job at `path`: `divert`'s for a job of at least its min_files files (names
    only are counted), else `local` (the choice the daemon warmed its pool for, as the job is served)."""
    if divert is None or count_files(path, divert.min_files) < divert.min_files:
        return local
    return Choice(divert.kind, local.workers, f"a job of {divert.min_files} files or more goes to "
                  f"{divert.kind.value}", requested=divert.kind.value)


def threads_seconds(cost: JobCost, host: Host) -> float:
    """One import (none if this process has its engine), then the records on as many cores as the GIL lets
    threads keep busy (at most the workers and the cores)."""
    start = 0.0 if host.engine_ready else host.import_seconds
    busy = min(host.workers, host.cores, cost.record_seconds / max(cost.gil_seconds, 1e-9))
    return start + cost.cpu_seconds / busy


def processes_seconds(cost: JobCost, host: Host, workers: int) -> float:
    """`workers` imports, `cores` at a time (none if the pool is warm), their spawns, then the records and the
    parent's share of each on min(workers, cores) cores."""
    start = 0.0 if host.warm_workers else \
        host.import_seconds * math.ceil(workers / host.cores) + SPAWN_SECONDS * workers
    busy = min(workers, host.cores)
    return start + cost.records * (cost.record_seconds + PARENT_SECONDS) / busy


def _memory_workers(host: Host) -> int:
    return host.cores if host.memory_available is None else int(host.memory_available // WORKER_BYTES)


def _mb(n: int | None) -> str:
    return "?" if n is None else f"{n / (1024 * 1024):.0f} MB"


def memory_available() -> int | None:
    """Bytes that new processes can take: the kernel's MemAvailable, capped by what the cgroup's limit leaves."""
    from augd.job.resources import host_memory_bytes, rss_bytes
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            avail = next(int(line.split()[1]) * 1024 for line in fh if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError, IndexError):
        return None
    return max(0, min(avail, host_memory_bytes() - rss_bytes()))


def job_cost(spec, images: int, source_bytes: float, source_pixels: float | None = None,
             annotated: bool = False, originals: int = 0, sizes: Sequence[tuple[int, int]] = (),
             planned: int | None = None) -> JobCost:
    """A job's cost from its chain: `images` images of `source_bytes` encoded bytes on average (and
    `source_pixels` decoded pixels where known; else PIXELS_PER_BYTE per byte); `annotated`: with boxes, masks
    or keypoints; `originals`: of the images, those of splits the pipeline does not augment (one record each);
    `sizes`: (height, width) of images of the job where their headers were read (a tiled chain's tiles);
    `planned`: the records a plan holds (its images' variants), where it is known, for the count from `images`."""
    from augd.job.resources import output_bound
    from augd.job.units import variants_of
    src = source_pixels if source_pixels is not None else source_bytes * PIXELS_PER_BYTE
    per_image, n_tiles = len(variants_of(spec)), 1
    if spec.tile is not None:   # each variant of each tile a record of a tile's pixels
        n_tiles, src = tiling(spec.tile, sizes, src)
    out = output_bound(spec.ops)
    aug_px = min(out(int(src)), out.pixels) if out.pixels else out(int(src))
    steps, ops, partners = _pixel_steps(spec.ops, spec.colour == "fast")
    # a record: its Python, its decode (each augmented record decodes what its window needs: a crop decodes its
    # window alone), the chain's passes over its output and the encode (~2 passes); the original a decode (the
    # check that its bytes can be stored as they are) and the same encode where they cannot
    augmented = RECORD_SECONDS + src * DECODE_SECONDS_PER_PIXEL + aug_px * (steps + 2) * PASS_SECONDS_PER_PIXEL
    original = RECORD_SECONDS + src * (DECODE_SECONDS_PER_PIXEL + 2 * PASS_SECONDS_PER_PIXEL)
    n_aug = per_image - int(spec.keep_original)
    seconds = (n_aug * augmented + int(spec.keep_original) * original) / max(1, per_image)
    gil = (GIL_SECONDS + ops * GIL_SECONDS_PER_OP + aug_px * GIL_SECONDS_PER_PIXEL + partners * PARTNER_GIL_SECONDS
           + annotated * ANNOTATED_GIL_SECONDS)
    records = planned if planned is not None else (images - originals) * per_image + originals
    return JobCost(images, round(records * n_tiles), seconds, annotated, min(gil, seconds))


def _pixel_steps(nodes, fast: bool) -> tuple[float, float, float]:
    """(passes over the pixels, ops, partner images) of one record of the chain: the fused warp (once, if any op
    moves pixels), each colour op (one for all that fold under `colour: fast`), each pixel op, each partner's
    decode; each at its probability (a one_of's children: their mean)."""
    from augd.ops import REGISTRY, Kind
    warp, colour, other, ops, partners = 0.0, 0.0, 0.0, 0.0, 0.0
    stack = [(n, 1.0) for n in nodes]
    while stack:
        node, p = stack.pop()
        p *= getattr(node.params, "p", 1.0)
        if node.children:
            share = 1.0 / len(node.children) if node.name == "one_of" else 1.0
            stack.extend((c, p * share) for c in node.children)
            continue
        op = REGISTRY[node.name]
        ops += p
        if op.kind is Kind.GEOMETRY:
            warp = max(warp, p)
        elif op.kind is Kind.COLOUR:
            colour = max(colour, p) if fast and getattr(op, "foldable", lambda: False)() else colour + p
        else:   # a pixel op; a partner op decodes its partners (copy_paste's count is per instance: ~1)
            n = getattr(op, "partners", 0)
            n = n if isinstance(n, int) else 1
            other, partners = other + p * (1 + n), partners + p * n
    return warp + colour + other, ops, partners


def plan_cost(plan) -> JobCost:
    """A planned job's cost: its records as planned (a tiled job's variants for each tile: its images' mean tiles,
    counted on at most ~TILE_SAMPLE of them spread over the plan), its images' bytes and, where their headers were
    read, their pixels."""
    from augd.annotations.tree import upright
    images = plan.images
    sizes = [upright(i.header)[:2] for i in images if i.header is not None and i.header.width]
    sizes = sizes[::max(1, math.ceil(len(sizes) / TILE_SAMPLE))]
    mean = lambda xs: sum(xs) / len(xs) if xs else None  # noqa: E731
    return job_cost(plan.spec, len(images), mean([i.size for i in images]) or 0.0, mean([h * w for h, w in sizes]),
                    plan.detection is not None, sizes=sizes, planned=sum(g.records for g in plan.groups))


def tiling(tile, sizes: Sequence[tuple[int, int]], pixels: float) -> tuple[float, float]:
    """(tiles per image, pixels per tile record) under `tile`: the mean over images of `sizes` (height, width),
    where headers were read; else one 4:3 image of `pixels`. Tiles come in whole numbers, so the mean of a few
    real sizes is far nearer than the tiles of their mean size (6870 records of 600 photos against 5400)."""
    from augd.schema.tile import tiles_of_header
    sizes = sizes or [(max(1, round(math.sqrt(pixels * 0.75))), max(1, round(math.sqrt(pixels / 0.75))))]
    count = area = 0
    for h, w in sizes:
        tiles = tiles_of_header(tile, h, w)
        count, area = count + len(tiles), area + sum(t.out_h * t.out_w for t in tiles)
    return count / len(sizes), area / count


def estimate_folder(path: str, spec, sample: int = 1000) -> JobCost:
    """A job's cost before its plan (no header read): its image files counted by name, their mean size from the
    first `sample` of them (a stat each: start-up stays bounded however large the job); TFRecord files at its root
    (found by contents) by their records, counted from their framing (the first `sample` records' lengths, the
    rest of their bytes at that mean), a compressed one as one record per ~100 KB. A file that marks the job as
    annotated in a registered format (augd.annotations.layout.marks_annotated: VOC's XMLs, YOLO's label files,
    COCO's JSON, ...) makes it an annotated one, and is no image (nor stat'ed). A tiled chain's tiles per image
    are counted on the headers of its first TILE_HEADERS images."""
    from augd.annotations.layout import marks_annotated
    from augd.annotations.tfrecords import shard_split
    from augd.annotations.tree import IMAGE_EXTENSIONS, read_image_header, stem, upright
    from augd.io.lite import sniff_shard
    from augd.io.scan import SPLIT_FOLDERS
    images, sized, size, annotated, originals, heads = 0, 0, 0, False, 0, []
    shards: list[tuple[str, str]] = []
    for root, _, files in os.walk(path):
        folder = "" if root == path else os.path.relpath(root, path).replace(os.sep, "/")
        top = folder.split("/")[0]
        plain = top in SPLIT_FOLDERS and not spec.augments(SPLIT_FOLDERS[top])   # a split folder written as it is
        stems = {stem(f) for f in files if os.path.splitext(f)[1].lower() in IMAGE_EXTENSIONS}
        for f in files:
            ext = os.path.splitext(f)[1].lower()
            if marks_annotated(folder, f, stems):
                annotated = True
                continue
            originals += plain and ext in IMAGE_EXTENSIONS
            if ext in IMAGE_EXTENSIONS and sized >= sample:
                images += 1
                continue
            full = os.path.join(root, f)
            try:
                if ext not in IMAGE_EXTENSIONS:
                    if root == path and (kind := sniff_shard(full)) is not None:
                        shards.append((full, kind))
                    continue
                n = os.path.getsize(full)
            except OSError:
                continue
            images, sized, size = images + 1, sized + 1, size + n
            if spec.tile is not None and len(heads) < TILE_HEADERS:
                heads.append(full)
    mean = size / sized if sized else 0.0
    sizes = [upright(h)[:2] for h in (read_image_header(path, f) for f in heads) if h is not None and h.width]
    if shards:   # a records job: its records are its images
        records, record_bytes = _shard_records(shards, sample)
        annotated = annotated or (bool(records) and _records_annotated(shards))
        if records:
            mean = (mean * images + record_bytes) / (images + records)
            images += records
            plain = [s for s in shards if not spec.augments(shard_split(os.path.basename(s[0])))]
            originals += _shard_records(plain, sample)[0] if plain else 0
    return job_cost(spec, images, mean, annotated=annotated, originals=originals, sizes=sizes)


def _records_annotated(shards: list[tuple[str, str]]) -> bool:
    """Whether a records job moves objects, by its first plain shard's first record: the keys that make it a
    detection job (the OD API's boxes, masks; augd.annotations.tfrecords). A classification shard (TF-slim's, an
    augd classification output) moves none, and its threads hold the GIL far less. Where the first record cannot be
    read (compressed shards only, a broken frame, one over RECORD_PEEK_BYTES), as the OD API's records are: yes."""
    from augd.annotations.tfrecords import DETECTION_KEYS
    from augd.io.lite import decode_example, frames
    path = next((p for p, kind in sorted(shards) if kind == "none"), None)   # the same on every file system
    if path is None:
        return True
    try:
        first = next(frames(path, RECORD_PEEK_BYTES), None)
        keys = decode_example(first.data) if first is not None and first.data is not None else None
    except (OSError, ValueError):
        keys = None
    return keys is None or any(k in keys for k in DETECTION_KEYS)


def _shard_records(shards: list[tuple[str, str]], sample: int) -> tuple[int, float]:
    """(records, their bytes) of TFRecord files [(path, compression)]: a plain file's framing walked for its first
    records (12 bytes read a record, its data skipped), the rest of its bytes at their mean length; a compressed
    file's bytes as records of ~100 KB."""
    records, total, walked, walked_bytes, unwalked = 0, 0.0, 0, 0, 0
    for path, kind in shards:
        try:
            size = os.path.getsize(path)
            if kind != "none":
                records += size // 100_000 + (size > 0)
                total += size
                continue
            with open(path, "rb") as fh:
                pos = 0
                while pos + 16 <= size and walked < sample:
                    head = fh.read(12)
                    if len(head) < 12:
                        break
                    length = int.from_bytes(head[:8], "little")
                    if pos + 16 + length > size:
                        break
                    fh.seek(length + 4, os.SEEK_CUR)
                    pos, walked, walked_bytes, records = pos + 16 + length, walked + 1, walked_bytes + length, \
                        records + 1
                unwalked += size - pos
                total += pos
        except OSError:
            continue
    if unwalked and walked:
        more = int(unwalked / (walked_bytes / walked + 16))
        records, total = records + more, total + unwalked
    return records, total
