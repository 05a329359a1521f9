"""The per-image work every executor calls (threads in run_job, worker processes, Beam's DoFn), in three steps:

1. load: each image read again and held to its scan (augd.io.reread), its variants sorted into those the graph
   makes and the original stored as its own bytes (graph_variants), a tiled job's tiles cut (augd.job.tiles);
2. run: every variant of every image (each tile an image of its own, a partner op's variant on its canvas:
   augd.job.mixing) in one call of the job's graph;
3. write: each image's records: its objects through the annotations' one entry point
   (augd.annotations.objects.ImageObjects: moved with the pixels, occluded, written), then its Examples.

At the bottom of augd/job: the orchestrator (run.py) and the workers import it, it imports neither."""
from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from augd.annotations import AnnotationError
from augd.annotations.objects import Detection, ImageObjects, ObjectCounts
from augd.errors import RejectReason, tf_error_message
from augd.formats import passthrough_ok
from augd.io import InputImage, RejectedInput
from augd.io.reread import read_scanned
from augd.job.mixing import Partners, mixed_variant
from augd.job.report import TileCounts
from augd.job.tiles import cut_tiles
from augd.job.units import variants_of
from augd.schema import PipelineSpec
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


def _rejected(img: InputImage, data: bytes | None, reason, message: str, **kw) -> ImageOutcome:
    return ImageOutcome(img, bytes_read=len(data or b""), rejected=RejectedInput(img.relpath, reason, message), **kw)


@dataclass
class _Loaded:
    """One image read and checked, before the graph: its bytes, the variants of its records (`variants`, in order)
    and those the graph makes, and a tiled job's tiles (with the whole image's objects, which cut them)."""
    index: int
    img: InputImage
    data: bytes
    stages: dict
    variants: list[int]
    through_graph: list[int]
    passthrough: bool
    cut: object = None                        # augd.job.tiles.Cut
    objects: ImageObjects | None = None

    @property
    def parts(self) -> tuple:
        """The record sources' tiles (None: the image itself)."""
        return self.cut.parts if self.cut is not None else (None,)

    def sources(self, detection: Detection | None):
        """(image, its bytes, the detection view its objects are found in) for each record source: its kept tiles,
        or itself."""
        if self.cut is None:
            return [(self.img, self.data, detection)]
        return [(p.image, p.data, p.objects.det if p.objects is not None else detection) for p in self.cut.parts]


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
    its image's objects, moved with its pixels. `partners`: the job's pools when its chain leads with a partner
    op (mosaic, mixup, cutmix): each augmented variant runs on its mix's canvas. `variants`: the images'
    variants, or one list per image (class balance)."""
    # the Example's protos load TensorFlow: imported where the graph runs, so that the parent of worker processes
    # (augd.job.workers) never loads it
    from augd.io.records import make_example
    per_image = variants if variants and isinstance(variants[0], (list, tuple)) else [variants] * len(imgs)
    outcomes, loaded = {}, []
    for k, img in enumerate(imgs):
        got = _load(k, spec, img, per_image[k], detection)
        if isinstance(got, ImageOutcome):
            outcomes[k] = got
        else:
            loaded.append(got)
    items, mixes = _graph_items(compiled, spec, loaded, detection, partners)
    # A detection job's results carry the Geo steps their plan used: the annotations move by them, unplanned.
    results = iter(compiled.process_many(items, geometry=True) if detection is not None else
                   compiled.process_many(items))
    for one in loaded:
        got = {(j, v): next(results) for j in range(len(one.parts)) for v in one.through_graph}
        outcomes[one.index] = _image_records(compiled, spec, one, got, mixes, detection, make_example)
    return [outcomes[k] for k in range(len(imgs))]


def _load(k: int, spec: PipelineSpec, img: InputImage, variants, detection: Detection | None):
    """The image read and checked (a _Loaded), or the ImageOutcome rejecting it."""
    t0 = time.perf_counter()
    data, why = read_scanned(img)
    if why is not None:
        return ImageOutcome(img, bytes_read=len(data or b""), rejected=why)
    stages = dict.fromkeys(STAGES, 0.0)
    stages["read"] = time.perf_counter() - t0
    if spec.tile is None:
        through_graph, passthrough = graph_variants(spec, img, variants)
        return _Loaded(k, img, data, stages, variants_of(spec) if variants is None else list(variants),
                       through_graph, passthrough)
    try:
        objects = detection.for_image(img) if detection is not None else None
    except AnnotationError as exc:
        return _rejected(img, data, RejectReason.BAD_ANNOTATION, str(exc))
    cut = cut_tiles(spec, img, data, objects)
    if cut is None:
        return _rejected(img, data, RejectReason.UNDECODABLE, f"OpenCV cannot decode this {img.header.format} "
                         f"image, or decodes another size than its header's; a pipeline with tile: decodes each image "
                         f"once with OpenCV (JPEG, PNG, BMP, WebP, TIFF): convert it to one of those")
    if not cut.parts:
        return _rejected(img, data, RejectReason.NEGATIVE, f"none of its {cut.counts.tiles} tiles holds an object, "
                         f"and tile.empty ({spec.tile.empty:g}: the share of empty tiles kept) kept none of them; "
                         f"raise it to keep more negatives", tiles=cut.counts)
    stages["decode"] += cut.seconds
    vs = variants_of(spec) if variants is None else list(variants)
    return _Loaded(k, img, data, stages, vs, vs, False, cut, objects)


def _graph_items(compiled: Compiled, spec: PipelineSpec, loaded: list[_Loaded], detection: Detection | None,
                 partners: Partners | None) -> tuple[list, dict]:
    """(the graph's work items, in order: each source's variants; the partner op's Mixed of each variant that
    has one, by (image index, source, variant))."""
    # Box-aware ops (random_crop's min_object_covered) draw from the image's boxes: the graph's plan gets the
    # same ones as the annotations' geometry (ImageObjects.variant), so both draw the same windows.
    boxed = detection is not None and compiled.program.uses_boxes
    mix = compiled.program.mix if partners is not None else None
    items, mixes = [], {}
    for one in loaded:
        for j, (image, pixels, det) in enumerate(one.sources(detection)):
            for v in one.through_graph:
                m = mixed_variant(mix, spec.seed, image, pixels, v, partners, det, boxed) if mix is not None and v \
                    else None
                if m is None:
                    items.append((pixels, image.relpath, v, image.header, det.boxes(image) if boxed else None))
                    continue
                mixes[one.index, j, v] = m
                one.stages["read"] += m.read_seconds
                one.stages["decode"] += m.compose_seconds
                items.append((m.data, image.relpath, v, m.header, m.boxes if boxed else None))
    return items, mixes


def _image_records(compiled: Compiled, spec: PipelineSpec, one: _Loaded, got: dict, mixes: dict,
                   detection: Detection | None, make_example) -> ImageOutcome:
    """The image's outcome from its graph results `got` ((source, variant) -> Result or the exception that
    rejects it): its objects through the annotations' entry point for every record, then its Examples."""
    img, data, stages = one.img, one.data, one.stages
    bad = next((r for r in got.values() if isinstance(r, Exception)), None)
    if bad is not None:
        return _rejected(img, data, RejectReason.UNDECODABLE, tf_error_message(bad))
    records = []   # (source, variant, its Result or None, its Mixed or None, payload, format, height, width)
    for j in range(len(one.parts)):
        for v in one.variants:
            r = got.get((j, v))
            if r is not None:
                for name, sec in zip(("decode", "augment", "encode"), r.stage_seconds):
                    stages[name] += sec
            if v == 0 and one.passthrough:
                h, w = (r.height, r.width) if r is not None else (img.header.height, img.header.width)
                records.append((j, v, r, None, data, img.header.format, h, w))
            else:
                records.append((j, v, r, mixes.get((one.index, j, v)), r.payload, spec.output.format, r.height,
                                r.width))
    objects, counts = one.objects, None
    written = [None] * len(records)
    try:
        if one.cut is None and detection is not None:
            objects = detection.for_image(img)
        if objects is not None:
            written = [_objects_of_record(compiled, spec, one.parts[j].objects if one.cut is not None else objects, v, r, m,
                                h, w) for j, v, r, m, _, _, h, w in records]
            for part in one.parts if one.cut is not None else ():
                objects.add(part.objects)
            counts = objects.counts()
    except AnnotationError as exc:
        # its objects cannot be written right (a singular warp, a mask that will not warp, a record whose
        # objects fail RecordObjects.check): the image goes, not the job. Any other exception is a bug in
        # augd, not bad data: it fails the job as crashed, with its traceback.
        return _rejected(img, data, RejectReason.BAD_ANNOTATION, str(exc))
    source_sha = hashlib.sha256(data).hexdigest()
    examples = []
    for (j, v, r, m, payload, fmt, h, w), objs in zip(records, written):
        part = one.parts[j]
        extra = {"tile": part.tile.record_keys(one.cut.height, one.cut.width)} if part is not None else {}
        if objs is not None:
            extra["objects"] = objs
        if m is not None:
            extra.update(m.record_keys(objects is None))
        examples.append(make_example(
            encoded=payload, fmt=fmt, height=h, width=w, label=img.label, label_text=img.label_text,
            filename=img.relpath, source_sha256=source_sha, variant=v, pipeline=spec.name,
            pipeline_sha256=spec.sha256, **extra))
    return ImageOutcome(img, records=tuple(examples), bytes_read=len(data), stage_seconds=stages, objects=counts,
                        tiles=one.cut.counts if one.cut is not None else None)


def _objects_of_record(compiled: Compiled, spec: PipelineSpec, mine: ImageObjects | None, v: int, r, m, h: int, w: int):
    """One record's RecordObjects (None: its source holds no objects: a tile's, in a classification job)."""
    if not mine:
        return None
    return mine.of_result(spec, compiled.program, v, r, h, w, mixed=m)
