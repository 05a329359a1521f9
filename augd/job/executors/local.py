"""The write loop of the executors that hand out batches from this process (threads, processes, dask): images go
to the graph in small batches (one call per ~BATCH_SECONDS of work); memory is bounded: at most
workers * INFLIGHT_PER_WORKER batches are in flight (and, with a memory limit, only as many as its budget holds),
and results are written in the job's order as soon as they are ready. A subclass only submits a batch and gives
its results back."""
from __future__ import annotations

import time
from collections import deque
from contextlib import nullcontext
from typing import Callable

from augd import defaults
from augd.annotations.objects import Detection
from augd.errors import JobCancelled
from augd.io import InputImage, ShardWriter, is_url, local_path
from augd.job.images import ImageOutcome, graph_variants, process_images
from augd.job.options import JobWatch
from augd.job.report import GraphInfo, ShardSet, Tally
from augd.job.resources import MemoryGuard, SpaceCheck, check_memory, image_memory, output_bound
from augd.job.units import JobPlan, tiles_per_image, variants_of
from augd.schema import PipelineSpec
from augd.schema.tile import tiles_of_header

__all__ = ["Batches", "LocalExecutor"]


class Batches:
    """Hands out the next batch of images, sized so one graph call takes ~BATCH_SECONDS: fast chains get
    up to GRAPH_BATCH records a call (the per-call cost vanishes), slow ones one image a call (progress,
    cancellation and the spread over workers stay fine-grained). Starts at one image until timed."""

    def __init__(self, order, spec: PipelineSpec, cost: Callable[[InputImage], int] | None = None,
                 variants: list[int] | None = None, detection: Detection | None = None, partners=None,
                 variants_of_image: Callable | None = None):
        self.order, self.next_index = order, 0
        self.detection, self.partners = detection, partners
        self.variants = variants_of(spec) if variants is None else variants
        #: an image's variants (class balance gives some images more)
        self.variants_of = variants_of_image or (lambda img: self.variants)
        self.spec = spec
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
        budget, size = min(records, defaults.GRAPH_BATCH), 0   # records a call, at least one image
        for img in self.order[self.next_index:]:
            budget -= max(1, len(self.variants_of(img))) * tiles_per_image(self.spec, img)
            if budget < 0 and size:
                break
            size += 1
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

    def variants_for(self, batch) -> list:
        """process_images' `variants` for a batch: the one list its images share, or one list per image."""
        lists = [list(self.variants_of(img)) for img in batch]
        return lists[0] if all(v == lists[0] for v in lists) else lists

    def records_in(self, batch) -> int:
        return sum(max(1, len(self.variants_of(img))) * tiles_per_image(self.spec, img) for img in batch)

    def timed(self, compiled, spec, batch):
        """process_images, timed for the next batches' size (run on a worker thread)."""
        t0 = time.perf_counter()
        out = process_images(compiled, spec, batch, self.variants_for(batch), self.detection, self.partners)
        self.observe(time.perf_counter() - t0, self.records_in(batch))
        return out

    def observe(self, seconds: float, records: int) -> None:
        per_record = seconds / max(1, records)
        old = self.seconds_per_record
        self.seconds_per_record = per_record if old is None else 0.7 * old + 0.3 * per_record


def _image_cost(spec: PipelineSpec, variants_for: Callable[[InputImage], list[int]], partners=None):
    """Memory budgeted per image: its decode and outputs for each variant in the graph call; with a partner op,
    also the largest image of its split once (partners are decoded one at a time) and each variant's canvas."""
    largest = output_bound(spec.ops)
    biggest = {s: max(i.header.width * i.header.height for i in pool) for s, pool in partners.pools.items()
               if pool} if partners is not None else {}

    def cost(img: InputImage) -> int:
        pixels = img.header.width * img.header.height
        n = len(graph_variants(spec, img, list(variants_for(img)))[0])
        if spec.tile is not None:   # decoded once; each tile's raw pixels, its variants' outputs
            h = img.header
            return pixels * 3 + sum(image_memory(t.out_h * t.out_w, largest(t.out_h * t.out_w), n)
                                    for t in tiles_of_header(spec.tile, h.height, h.width, h.orientation))
        mixing = image_memory(biggest[img.split], largest(pixels) * n, 1) if img.split in biggest else 0
        return image_memory(pixels, largest(pixels), n) + mixing
    return cost


class LocalExecutor:
    """An Executor over this host's workers. Subclasses set `workers` and implement submit (a batch -> a handle),
    result (the handle -> its outcomes, raising what the workers raised), graph and close; `device` is the
    report's. `memory_limit`: bytes the job may add to this process (checked before any worker starts)."""
    workers: int
    device = None

    def __init__(self, plan: JobPlan, memory_limit: int | None):
        self.spec, self.detection, self.memory_limit = plan.spec, plan.detection, memory_limit
        self.partners = plan.partners
        self.cost = self.budget = None
        if memory_limit:
            groups = {g.split: g for g in plan.groups}
            self.cost = _image_cost(plan.spec, lambda img: groups[img.split].variants_of(img), plan.partners)
            self.budget = int(memory_limit * defaults.MEMORY_BUDGET_SHARE)
            check_memory(self.cost, plan.images, self.budget, memory_limit)

    def submit(self, batches: Batches, batch):
        raise NotImplementedError

    def result(self, batches: Batches, handle) -> list[ImageOutcome]:
        raise NotImplementedError

    def graph(self) -> GraphInfo:
        raise NotImplementedError

    def report(self):
        return self.graph(), self.device

    def close(self) -> None:
        pass

    def write(self, plan: JobPlan, out_dir: str, tally: Tally, watch: JobWatch) -> ShardSet:
        check = None if is_url(out_dir) else SpaceCheck(local_path(out_dir),
                                                        [(g.order, g.records / max(1, len(g.order)))
                                                         for g in plan.groups])
        shards = ShardSet()
        with (MemoryGuard(self.memory_limit) if self.memory_limit else nullcontext()) as guard:
            for g in plan.groups:  # one shard set per split
                with ShardWriter(out_dir, g.prefix(plan.name), g.shards, plan.spec.output.compression) as writer:
                    self._write_all(Batches(list(g.order), plan.spec, self.cost, list(g.variants), self.detection,
                                            self.partners, g.variants_of), writer, tally, watch, guard, check)
                shards.add(g.split, writer)
        return shards

    def _write_all(self, batches: Batches, writer, tally: Tally, watch: JobWatch, guard, before_writing) -> None:
        """Process the batches and write their records in order, as augd.job.units.record_slots places them
        (ShardWriter: record k to shard k % count). A bounded window of batches keeps memory flat whatever the
        job size; with a memory limit, batches also fly only while their budget fits, and the job stops when the
        guard saw the process outgrow it. `before_writing(results)` sees each batch's results before they are
        written."""
        window = self.workers * defaults.INFLIGHT_PER_WORKER
        limit, cost = self.budget, self.cost
        index = 0
        cancel, on_image, on_progress = watch.cancel, watch.on_image, watch.on_progress
        pending: deque = deque()   # (handle, budgeted bytes)
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
                    pending.append((self.submit(batches, batch), sum(map(cost, batch)) if cost else 0))
                if not pending:
                    return
                if cancel is not None and cancel.is_set():
                    raise JobCancelled(cancel.cause)
                results = self.result(batches, pending.popleft()[0])
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
