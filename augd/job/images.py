"""The per-image work every executor calls (threads in run_job, worker processes, Beam's DoFn): read and
re-check an image, run its variants through the job's graph in one call, build its records (and its objects',
in a detection job). At the bottom of augd/job: the orchestrator (run.py) and the workers import it, it imports
neither."""
from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from augd.annotations import AnnotationError
from augd.errors import Rejected, RejectReason, tf_error_message, undecodable_pixels
from augd.formats import jpeg_ends_before_scan, passthrough_ok, read_header
from augd.io import InputImage, RejectedInput, read_bytes
from augd.io.jobfs import vanished
from augd.job.detection import Detection
from augd.job.mixing import Partners, mixed_variant
from augd.job.report import ObjectCounts, TileCounts
from augd.job.tiles import cut_tiles
from augd.job.units import variants_of
from augd.spec import PipelineSpec
from augd.stages import STAGES

if TYPE_CHECKING:
    from augd.engine import Compiled

__all__ = ["ImageOutcome", "graph_variants", "process_images"]


@dataclass(frozen=True)
class ImageOutcome:
    """What became of one input image: its records, or why it was rejected."""
    image: InputImage
    records: tuple[bytes, ...] = ()
    rejected: RejectedInput | None = None
    bytes_read: int = 0
    stage_seconds: dict = field(default_factory=dict)
    objects: ObjectCounts | None = None     # a detection job's image: its objects in and out
    tiles: TileCounts | None = None         # a tiled job's image: its tiles cut and kept



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
        if vanished(exc):   # not a reason of the image's own: the job fails (check_outcome), nothing is committed
            return None, ImageOutcome(img, rejected=RejectedInput(
                img.relpath, RejectReason.MISSING, f"listed when the job was scanned, gone when read: {exc}"))
        return None, ImageOutcome(img, rejected=RejectedInput(img.relpath, RejectReason.UNREADABLE,
                                                              f"cannot read: {exc}"))
    changed = _changed_since_scan(img, data)
    if changed:
        return None, ImageOutcome(img, bytes_read=len(data), rejected=RejectedInput(img.relpath,
                                                                                    RejectReason.UNREADABLE, changed))
    if img.header.format == "jpeg" and jpeg_ends_before_scan(data):   # TF's libjpeg would print on stderr
        return None, ImageOutcome(img, bytes_read=len(data), rejected=RejectedInput(
            img.relpath, RejectReason.UNDECODABLE, undecodable_pixels("jpeg")))
    return data, None


def graph_variants(spec: PipelineSpec, img: InputImage, variants: list[int] | None = None) -> tuple[list[int], bool]:
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
                   detection: Detection | None = None, partners: Partners | None = None) -> list[ImageOutcome]:
    """All records of a few images, with one graph call for all of their variants. Never raises for bad
    input: a bad image becomes a rejection and the others are unaffected. `detection`: each record also carries
    its image's objects, moved with its pixels (augd.job.detection). `partners`: the job's pools when its chain
    leads with a partner op (mosaic, mixup, cutmix): each augmented variant runs on its mix's canvas. `variants`:
    the images' variants, or one list per image (class balance)."""
    # the Example's protos load TensorFlow: imported where the graph runs, so that the parent of worker processes
    # (augd.job.workers) never loads it
    from augd.io.records import make_example
    fmt = spec.output.format
    work, outcomes = [], {}
    per_image = variants if variants and isinstance(variants[0], (list, tuple)) else [variants] * len(imgs)
    for k, img in enumerate(imgs):
        t0 = time.perf_counter()
        data, rejected = _read_checked(img)
        if rejected:
            outcomes[k] = rejected
            continue
        stages = dict.fromkeys(STAGES, 0.0)
        stages["read"] = time.perf_counter() - t0
        if spec.tile is not None:
            cut, objects, rejected = _tiles(spec, img, data, detection)
            if rejected:
                outcomes[k] = rejected
                continue
            stages["decode"] += cut.seconds
            vs = variants_of(spec) if per_image[k] is None else list(per_image[k])
            work.append((k, img, data, stages, vs, False, cut, objects))
            continue
        through_graph, passthrough = graph_variants(spec, img, per_image[k])
        work.append((k, img, data, stages, through_graph, passthrough, None, None))
    # Box-aware ops (random_crop's min_object_covered) draw from the image's boxes: the graph's plan gets the
    # same ones as the annotations' geometry (ImageObjects.variant), so both draw the same windows.
    boxed = detection is not None and compiled.program.uses_boxes
    mix = compiled.program.mix if partners is not None else None
    items, mixes = [], {}
    for k, img, data, stages, vs, _, cut, _ in work:
        # each tile an image of its own (its seed path, its pixels, its objects), else the image itself
        for j, (image, pixels, det) in enumerate(_sources(img, data, cut, detection)):
            for v in vs:
                m = mixed_variant(mix, spec.seed, image, pixels, v, partners, det, boxed) if mix is not None and v \
                    else None
                if m is None:
                    items.append((pixels, image.relpath, v, image.header, det.boxes(image) if boxed else None))
                    continue
                mixes[k, j, v] = m
                stages["read"] += m.read_seconds
                stages["decode"] += m.compose_seconds
                items.append((m.data, image.relpath, v, m.header, m.boxes if boxed else None))
    # A detection job's results carry the Geo steps their plan used: the annotations move by them, unplanned.
    results = iter(compiled.process_many(items, geometry=True) if detection is not None else
                   compiled.process_many(items))
    for k, img, data, stages, through_graph, passthrough, cut, objects in work:
        parts = cut.parts if cut is not None else (None,)
        got = {(j, v): next(results) for j in range(len(parts)) for v in through_graph}
        bad = next((r for r in got.values() if isinstance(r, Exception)), None)
        if bad is not None:
            outcomes[k] = ImageOutcome(img, bytes_read=len(data), rejected=RejectedInput(
                img.relpath, RejectReason.UNDECODABLE, tf_error_message(bad)))
            continue
        source_sha = hashlib.sha256(data).hexdigest()
        records = []
        try:
            if cut is None:
                objects = detection.for_image(img) if detection is not None else None
            for j, part in enumerate(parts):
                mine = objects if part is None else part.objects
                for v in variants_of(spec) if per_image[k] is None else per_image[k]:
                    r = got.get((j, v))
                    if r is not None:
                        for name, sec in zip(("decode", "augment", "encode"), r.stage_seconds):
                            stages[name] += sec
                    if v == 0 and passthrough:
                        payload, out_fmt = data, img.header.format
                        h, w = (r.height, r.width) if r is not None else (img.header.height, img.header.width)
                    else:
                        payload, out_fmt, h, w = r.payload, fmt, r.height, r.width
                    m = mixes.get((k, j, v))
                    extra = {"tile": part.tile.record_keys(cut.height, cut.width)} if part is not None else {}
                    if mine:
                        extra["objects"] = mine.variant(
                            spec, compiled.program, v, h, w, replanned=bool(r and r.replanned),
                            steps=r.geometry if r is not None else None, covers=r.covers if r is not None else None,
                            mixed=m, least=r.min_visibility if r is not None else 0.0,
                            events=r.events if r is not None else ())
                    if m is not None:
                        extra.update(m.record_keys(objects is None))
                    records.append(make_example(
                        encoded=payload, fmt=out_fmt, height=h, width=w, label=img.label, label_text=img.label_text,
                        filename=img.relpath, source_sha256=source_sha, variant=v, pipeline=spec.name,
                        pipeline_sha256=spec.sha256, **extra))
                if part is not None and objects is not None:
                    objects.add(part.objects)
        except AnnotationError as exc:
            # its objects cannot be written right (a singular warp, a mask that will not warp, a record whose
            # objects fail RecordObjects.check): the image goes, not the job. Any other exception is a bug in
            # augd, not bad data: it fails the job as crashed, with its traceback.
            outcomes[k] = ImageOutcome(img, bytes_read=len(data), rejected=RejectedInput(
                img.relpath, RejectReason.BAD_ANNOTATION, str(exc)))
            continue
        outcomes[k] = ImageOutcome(img, records=tuple(records), bytes_read=len(data), stage_seconds=stages,
                                   objects=objects.counts() if objects else None,
                                   tiles=cut.counts if cut is not None else None)
    return [outcomes[k] for k in range(len(imgs))]


def _sources(img: InputImage, data: bytes, cut, detection):
    """(image, its bytes, the detection view its objects are found in) for each record source of an image: its
    kept tiles, or itself."""
    if cut is None:
        return [(img, data, detection)]
    return [(p.image, p.data, p.objects.det if p.objects is not None else detection) for p in cut.parts]


def _tiles(spec: PipelineSpec, img: InputImage, data: bytes, detection: Detection | None):
    """(the image's kept tiles, its ImageObjects or None, None), or (None, None, the ImageOutcome rejecting it)."""
    try:
        objects = detection.for_image(img) if detection is not None else None
    except AnnotationError as exc:
        return None, None, ImageOutcome(img, bytes_read=len(data), rejected=RejectedInput(
            img.relpath, RejectReason.BAD_ANNOTATION, str(exc)))
    cut = cut_tiles(spec, img, data, objects)
    if cut is not None and not cut.parts:
        return None, None, ImageOutcome(img, bytes_read=len(data), rejected=RejectedInput(
            img.relpath, RejectReason.NEGATIVE, f"none of its {cut.counts.tiles} tiles holds an object, and "
            f"tile.empty ({spec.tile.empty:g}: the share of empty tiles kept) kept none of them; raise it to keep "
            f"more negatives"), tiles=cut.counts)
    if cut is None:
        return None, None, ImageOutcome(img, bytes_read=len(data), rejected=RejectedInput(
            img.relpath, RejectReason.UNDECODABLE, f"OpenCV cannot decode this {img.header.format} image, or decodes "
            f"another size than its header's; a pipeline with tile: decodes each image once with OpenCV (JPEG, PNG, "
            f"BMP, WebP, TIFF): convert it to one of those"))
    return cut, objects, None
