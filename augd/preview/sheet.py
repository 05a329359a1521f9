"""What a preview sheet holds: per image, the input tile and its variants' tiles, each with the drawn parameters
as text. The tiles come from the job's own compiled graph (preview_rows, before a job); augd.preview.records makes
rows from the records a job wrote (the daemon's sheet of its last job). Nothing here draws.

Every variant tile is THE record `augd run` writes for that (image, relative path, variant): it comes from
augd.engine.Compiled.process, decoded as a reader decodes it, and the text comes from the same plan
(Compiled.explain), each op saying its own draws (Op.describe).

The seed of a variant is keyed by the image's path relative to the job folder, so a preview shows a job's
records only for the same relative path. By default that is the file name (an image directly in the job
folder); `relpaths=` (the CLI's `--root JOB_FOLDER`) gives the paths of images inside class folders.
"""
from __future__ import annotations

import collections
import os
from dataclasses import dataclass, field

import numpy as np

from augd import defaults
from augd.drawing import box_outline, corners_outline
from augd.annotations import AnnotationError
from augd.errors import Rejected, tf_error_message
from augd.formats import passthrough_ok, read_header
from augd.io import InputImage, check_header
from augd.lazycv import cv2
from augd.ops import REGISTRY
from augd.ops._tf import tf
from augd.ops.words import plural, size

__all__ = ["MAX_DEFAULT_VARIANTS", "PreviewRow", "Tile", "describe_variant", "format_decisions", "preview_rows",
           "resolve_spec", "variant_count"]

#: Without --variants, a preview shows the pipeline's variants, at most this many.
MAX_DEFAULT_VARIANTS = 8
#: A tiled pipeline's sheet: the image with its tiles outlined, then at most this many of them, spread over it.
MAX_TILES = 6


@dataclass
class Tile:
    """One cell of the sheet before letterboxing. `image` is the exact pixels (None when there are none);
    `variant` is None for the input tile; `error` says why a tile has no image."""
    title: str
    image: np.ndarray | None = None
    lines: list[str] = field(default_factory=list)
    variant: int | None = None
    error: str | None = None


@dataclass
class PreviewRow:
    path: str
    relpath: str
    tiles: list[Tile]

    @property
    def error(self) -> str | None:
        return self.tiles[0].error


# ---- what the plan decided, in words ----

def format_decisions(decisions) -> list[str]:
    """Short lines for augd.engine.explain.Decision objects (Compiled.explain): what each op that the image
    reached drew, in its own words (Op.describe), indented under its composite; an op whose p coin said no
    is `LABEL: skipped (p=P)`; children a composite did not choose are left out."""
    lines = []
    for d in decisions:
        if not d.reached:
            continue
        pad = "  " * d.depth
        op = REGISTRY[d.name](d.params)  # the plan's own params: the op the graph ran
        if not d.applied:
            lines.append(f"{pad}{op.label}: skipped (p={d.params.p:g})")
        else:
            lines.extend(pad + s for s in op.describe(d))
    return lines


def describe_variant(compiled, relpath: str, variant: int, height: int, width: int, boxes=None) -> list[str]:
    """The drawn parameters of one variant as short lines, from the plan the job's graph receives for
    (relpath, variant) on an upright height × width image (augd.engine.Compiled.explain), given the image's boxes
    where it has some (box-aware ops draw from them)."""
    return format_decisions(compiled.explain(relpath, variant, height, width, boxes))


# ---- tiles: the engine's own pixels ----

def _source(path: str, max_pixels: int):
    """(bytes, header) of an image file the way a job accepts it, or Rejected naming what is wrong."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise Rejected("unreadable", f"cannot read: {exc.strerror or exc}") from None
    header = read_header(data)
    check_header(header, max_pixels)
    return data, header


def _decode_record(payload: bytes, fmt: str, height: int, width: int) -> np.ndarray:
    """A record's pixels as a reader gets them (augd.data decodes with tf.io.decode_image)."""
    if fmt == "raw":
        return np.frombuffer(payload, np.uint8).reshape(height, width, 3).copy()
    return tf.io.decode_image(payload, channels=3, expand_animations=False).numpy()


def resolve_spec(spec):
    """A PipelineSpec as is; a pipeline file or shipped pipeline name loaded."""
    if isinstance(spec, (str, os.PathLike)):
        from augd.schema import find_pipeline, load_pipeline
        return load_pipeline(find_pipeline(os.fspath(spec)))
    return spec


def variant_count(spec, variants: int | None) -> int:
    """The variants a sheet shows: `variants`, checked against the pipeline's, or its own capped."""
    if variants is None:
        return min(spec.variants, MAX_DEFAULT_VARIANTS)
    if not 0 <= variants <= spec.variants:
        raise ValueError(f"variants={variants}: pipeline {spec.name!r} writes {spec.variants} augmented "
                         f"variant(s) per image; ask for 0 to {spec.variants}")
    return variants


def preview_rows(spec, image_paths, *, variants: int | None = None, relpaths=None,
                 max_pixels: int = defaults.MAX_PIXELS, compiled=None, engine=None, root=None) -> list[PreviewRow]:
    """The sheet's content before letterboxing: per image, the input tile (decoded, upright, as the graph
    decodes it) and one tile per variant 1..N holding exactly the pixels of the record `augd run` writes for
    (image, relpath, variant), with the drawn parameters as text. `relpaths` (default: each file's name) are
    the paths relative to the job folder the seeds are keyed by. A bad image gives a row whose input tile
    holds the reason instead of pixels. `compiled`: a Compiled of `spec` to reuse; else one is built by `engine`
    (default: an Engine with the default options). `root`: the job folder; a partner op there reads its
    annotations (copy_paste pastes annotated objects)."""
    from augd.engine import Engine
    from augd.engine.decode import decode_full

    spec = resolve_spec(spec)
    n = variant_count(spec, variants)
    paths = [os.fspath(p) for p in image_paths]
    rels = [os.path.basename(p) for p in paths] if relpaths is None else [str(r) for r in relpaths]
    if len(rels) != len(paths):
        raise ValueError(f"{len(rels)} relpaths for {len(paths)} images")
    own = compiled is None
    compiled = (engine or Engine()).compile(spec) if own else compiled
    try:
        # the scratch folder held to the end: a records job's inflated shards live as long as it
        partners, detection, images, scratch = _partners(compiled, spec, paths, rels, max_pixels, root)
        mixing = (partners, detection, images)
        if spec.tile is not None:
            return [row for path, rel in zip(paths, rels) for row in _tiled_rows(compiled, spec, path, rel, n,
                                                                                  max_pixels, mixing)]
        return [_row(compiled, spec, path, rel, n, max_pixels, decode_full, mixing)
                for path, rel in zip(paths, rels)]
    finally:
        if own:
            compiled.close()


def _partners(compiled, spec, paths, rels, max_pixels, root=None):
    """(Partners, Detection or None, the job's images by relpath, the plan's scratch folder) for a chain led by a
    partner op. With `root`, the job's own plan: its splits' pools and annotations, so each tile is the record `augd
    run` writes; without, the sheet's images are the partners (one split). With `root`, any chain gets the job's
    annotations too (each variant's boxes are drawn); without, (None, None, {}, None) for a chain without one."""
    if root is not None:
        from augd.job.units import plan_job
        plan = plan_job(os.fspath(root), spec, None, max_pixels)
        return plan.partners, plan.detection, {i.relpath: i for i in plan.images}, plan.scratch
    if compiled.program.mix is None:
        return None, None, {}, None
    from augd.job.mixing import Partners
    pool = []
    for path, rel in zip(paths, rels):
        try:
            data, header = _source(path, max_pixels)
        except Rejected:
            continue
        pool.append(InputImage(rel, path, len(data), -1, "", header))
    return (Partners({"": tuple(pool)}) if pool else None), None, {i.relpath: i for i in pool}, None


def _mixed_items(compiled, spec, data, header, rel, wanted, mixing):
    """(graph items, per variant the lines naming its mix and partners) for the variants of one image."""
    partners, detection, images = mixing
    img = images.get(rel)
    if partners is None or img is None:   # an image the job would not hold (rejected by its scan)
        return [(data, rel, v, header) for v in wanted], {}
    from augd.engine.explain import Decision
    from augd.job.mixing import mixed_variant
    items, lines = [], {}
    for v in wanted:
        m = mixed_variant(compiled.program.mix, spec.seed, img, data, v, partners, detection)
        if m is None:
            items.append((data, rel, v, header))
            continue
        items.append((m.data, rel, v, m.header))
        op = compiled.program.mix
        named = [p.relpath.rsplit("/", 1)[-1] + ("" if ok else " (unreadable)")
                 for p, q, ok in zip(m.drawn.partners, m.drawn.mix.placements[1:], m.placed[1:]) if q is not None]
        times = collections.Counter(named)   # copy_paste's copies name their partner once, counted
        lines[v] = op.describe(Decision(op.name, op.params, 0, True, True, mix=m.drawn.mix)) + \
            [f"+ {p}" + (f" x{times[p]}" if times[p] > 1 else "") for p in dict.fromkeys(named)]
    return items, lines


def _row(compiled, spec, path, rel, n, max_pixels, decode_full, mixing=(None, None, {})) -> PreviewRow:
    try:
        data, header = _source(path, max_pixels)
        upright = decode_full(data, header.orientation).numpy()  # the graph's own decode, run eagerly
    except Rejected as exc:
        return PreviewRow(path, rel, [Tile(rel, error=str(exc))])
    except (tf.errors.OpError, ValueError) as exc:  # what TF's decoders raise for bad data
        return PreviewRow(path, rel, [Tile(rel, error=tf_error_message(exc))])
    h, w = upright.shape[:2]
    if not spec.keep_original:
        original = "v0: not written (keep_original)"
    elif spec.output.format != "raw" and passthrough_ok(header):  # as the job decides (augd.job.images.graph_variants)
        original = "v0: the file's own bytes"
    else:
        original = f"v0: re-encoded as {spec.output.format}"
    from augd.annotations.objects import source_boxes
    objects = _objects(mixing, rel)
    split = getattr(mixing[2].get(rel), "split", "")
    if not spec.augments(split):   # as the job plans it (augd.job.units): the original alone, no variants
        original = (f"{split}: written as it is, no variants (augment_splits: "
                    f"{', '.join(spec.augment_splits or defaults.AUGMENT_SPLITS)})")
    tiles = [Tile(rel, upright if objects is None else _with_boxes(upright, objects.ann.objects),
                  [f"input {size((h, w))}", original])]
    if not spec.augments(split):
        return PreviewRow(path, rel, tiles)
    wanted = list(range(1, n + 1))
    items, mixed = _mixed_items(compiled, spec, data, header, rel, wanted, mixing)
    boxes = source_boxes(objects.ann) if objects is not None and compiled.program.uses_boxes else None
    items = [it + (boxes,) if v not in mixed and boxes is not None else it for v, it in zip(wanted, items)]
    results = compiled.process_many(items, geometry=objects is not None)   # with the steps the annotations take
    for v, item, r in zip(wanted, items, results):
        if isinstance(r, Exception):
            tiles.append(Tile(f"v{v}", variant=v, error=tf_error_message(r)))
            continue
        pixels = _decode_record(r.payload, spec.output.format, r.height, r.width)
        # The graph plans from the decoded upright size (re-planning if the header disagreed): so does this; a
        # mixed variant's steps ran on its canvas.
        ih, iw = (item[3].height, item[3].width) if v in mixed else (h, w)
        lines = mixed.get(v, []) + describe_variant(compiled, rel, v, ih, iw, None if v in mixed else boxes)
        if objects is not None and v not in mixed:   # the record's own boxes, as augd run writes them
            pixels, lines = _outlined(pixels, lines, objects, spec, compiled.program, v, r)
        tiles.append(Tile(f"v{v}  {size((r.height, r.width))}", pixels, lines, variant=v))
    return PreviewRow(path, rel, tiles)


def _objects(mixing, rel: str):
    """The image's ImageObjects in the job's annotations (`--root` on a detection job), else None."""
    _, detection, images = mixing
    img = images.get(rel)
    if detection is None or img is None or rel not in detection.annotations:
        return None
    try:
        return detection.for_image(img)
    except AnnotationError:
        return None


#: kept boxes are outlined in this colour, ignored ones (weight 0: augd.annotations.occlusion) dashed in the other
KEPT_COLOUR, IGNORED_COLOUR = (255, 230, 0), (255, 0, 255)


def boxes_line(rec) -> str:
    """A record's boxes in words: "3 box(es)", or "3 box(es), 1 ignored" (RecordObjects)."""
    ignored = sum(bool(i) for i in rec.ignored)
    return f"{len(rec.boxes)} box(es)" + (f", {ignored} ignored" if ignored else "")


def _outlined(pixels: np.ndarray, lines: list, objects, spec, program, v: int, r=None, size=None) -> tuple:
    """(the pixels with variant v's record's objects outlined, the lines with its boxes line), or the lines with the
    reason it has none. `r`: the graph's result for the variant (its size, geometry, covers); else `size` (h, w) of
    variant 0 as it is."""
    try:
        rec = objects.of_result(spec, program, v, r, *(size if r is None else (r.height, r.width)))
    except AnnotationError as exc:
        return pixels, lines + [str(exc)]
    return _with_record(pixels, rec), lines + [boxes_line(rec)]


def _with_record(pixels: np.ndarray, rec) -> np.ndarray:
    """The pixels with a record's boxes and oriented boxes (RecordObjects, normalized) outlined (_with_boxes)."""
    h, w = pixels.shape[:2]
    return _with_boxes(pixels, [np.multiply(b, (w, h) * 2) for b in rec.boxes], rec.ignored,
                       [np.multiply(c, (w, h)) for c in rec.oriented])


def _with_boxes(pixels: np.ndarray, boxes, ignored=(), oriented=()) -> np.ndarray:
    """A copy of the pixels with each box (an Object's, or (xmin, ymin, xmax, ymax) in pixel edges) outlined:
    solid, or dashed in IGNORED_COLOUR for one whose `ignored` (its reason, or "") is set; and each box's oriented
    box (`oriented`: its 4 corners in pixel edges, a record's with an oriented object) outlined likewise."""
    out = np.ascontiguousarray(pixels).copy()
    line = max(1, round(max(out.shape[:2]) / 300))
    for k, b in enumerate(boxes):
        x0, y0, x1, y1 = (int(round(v)) for v in getattr(b, "box", b))
        ignored_ = bool(ignored and ignored[k] or getattr(b, "ignored", ""))
        box_outline(out, (x0, y0, x1 - 1, y1 - 1), IGNORED_COLOUR if ignored_ else KEPT_COLOUR, line, ignored_)
        if k < len(oriented):
            corners_outline(out, oriented[k], IGNORED_COLOUR if ignored_ else KEPT_COLOUR, line, ignored_)
    return out


def _tiled_rows(compiled, spec, path, rel, n, max_pixels, mixing=(None, None, {})) -> list[PreviewRow]:
    """A tiled pipeline's rows for one image: the image with every tile outlined, then up to MAX_TILES tiles
    spread over it (and the whole-image record), each as cut and its variants: the records `augd run` writes for
    them, with the job's annotations (`--root`) their objects outlined as each record holds them (without: every
    tile kept, as a classification job keeps them). A partner op (copy_paste) pastes the job's objects onto each
    tile, its partners named under it (its mixed variants' objects not outlined, as in an untiled row)."""
    from augd.engine.hostdecode import decode_upright
    from augd.engine.rawpixels import unpack_rgb
    from augd.job.tiles import cut_tiles
    try:
        data, header = _source(path, max_pixels)
    except Rejected as exc:
        return [PreviewRow(path, rel, [Tile(rel, error=str(exc))])]
    partners, detection, images = mixing
    img = images.get(rel) or InputImage(rel, path, len(data), -1, "", header)
    try:
        objects = detection.for_image(img) if detection is not None and img.relpath in detection.annotations else None
    except AnnotationError as exc:
        return [PreviewRow(path, rel, [Tile(rel, error=str(exc))])]
    cut = cut_tiles(spec, img, data, objects)
    if cut is None:
        return [PreviewRow(path, rel, [Tile(rel, error="OpenCV cannot decode it; a pipeline with tile: decodes "
                                                     "each image with OpenCV")])]
    overview = np.ascontiguousarray(decode_upright(data, img.header)[:, :, ::-1])
    line = max(1, round(max(cut.height, cut.width) / 400))
    for k, part in enumerate(p for p in cut.parts if not p.tile.full):
        t = part.tile
        cv2.rectangle(overview, (t.x0, t.y0), (t.x1 - 1, t.y1 - 1), (255, 0, 255) if k % 2 else (0, 200, 255), line)
    tiles = [p for p in cut.parts if not p.tile.full]
    shown = [tiles[i] for i in sorted({round(i) for i in np.linspace(0, len(tiles) - 1, min(MAX_TILES, len(tiles)))})]
    shown += [p for p in cut.parts if p.tile.full]
    t0 = tiles[0].tile
    rows = [PreviewRow(path, rel, [Tile(rel, overview, [
        f"input {size((cut.height, cut.width))}",
        f"{plural(cut.counts.tiles, 'tile')} of {size((t0.out_h, t0.out_w))}, "
        f"overlap {spec.tile.overlap:g}", f"below: {len(shown)} of them"])])]
    for part in shown:
        t, mine = part.tile, part.objects
        pixels = unpack_rgb(part.data).copy()   # the tile as the graph takes it (writable: outlines draw on it)
        title = f"whole x{t.scale:.3g}" if t.full else f"tile {t.index} at ({t.x0}, {t.y0})"
        lines = [f"{size((t.out_h, t.out_w))}", part.image.relpath.rsplit("/", 1)[-1]]
        if mine is not None:   # the job's annotations (--root): the tile's objects as its variant 0 record holds them
            pixels, lines = _outlined(pixels, lines, mine, spec, compiled.program, 0, size=(t.out_h, t.out_w))
        cells = [Tile(title, pixels, lines)]
        wanted = list(range(1, n + 1))
        det = mine.det if mine is not None else detection
        items, mixed = _mixed_items(compiled, spec, part.data, part.image.header, part.image.relpath, wanted,
                                    (partners, det, {part.image.relpath: part.image} if partners else {}))
        # as the job runs a tile (augd.job.images): box-aware ops draw from its boxes, its objects move by the steps
        boxes = det.boxes(part.image) if mine is not None and compiled.program.uses_boxes else None
        items = [it + (boxes,) if v not in mixed and boxes is not None else it for v, it in zip(wanted, items)]
        for v, r in zip(wanted, compiled.process_many(items, geometry=mine is not None)):
            if isinstance(r, Exception):
                cells.append(Tile(f"v{v}", variant=v, error=tf_error_message(r)))
                continue
            pixels = _decode_record(r.payload, spec.output.format, r.height, r.width)
            lines = mixed.get(v, []) + describe_variant(compiled, part.image.relpath, v, *(
                (items[v - 1][3].height, items[v - 1][3].width) if v in mixed else (t.out_h, t.out_w)))
            if mine is not None and v not in mixed:   # the record's own boxes, as augd run writes them
                pixels, lines = _outlined(pixels, lines, mine, spec, compiled.program, v, r)
            cells.append(Tile(f"v{v}  {size((r.height, r.width))}", pixels, lines, variant=v))
        rows.append(PreviewRow(path, rel, cells))
    return rows
