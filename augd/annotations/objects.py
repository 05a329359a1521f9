"""One image's objects through its variants: the annotations' one entry point for the per-image work. A job's
annotations (Detection, read once before the run) give each image an ImageObjects, which moves its objects with
the pixels of every variant (targets.py, through geometry.py's maps), lets the one occlusion rule decide what
covers hid (occlusion.py), and writes what is left as the record's objects (RecordObjects).

Variant 0 (the original) keeps its annotation untouched; an augmented variant maps it through
`Program.geometry(seed, h, w)`, the same steps the graph warps its pixels with, drawn from the same per-image
seed and the image's upright size. An annotation that cannot be trusted rejects its image (`bad_annotation`),
never the job. TensorFlow-free.
"""
from __future__ import annotations

import collections
import dataclasses
from dataclasses import dataclass, field

import numpy as np

from augd import defaults
from augd.annotations.geometry import corners, warp_mask, warp_moved
from augd.annotations.masks import mask_png, read_mask
from augd.annotations.model import Annotation, AnnotationError, KeypointSchema, Object
from augd.annotations.occlusion import HIDDEN, KEPT, Rule, hide_in_masks
from augd.annotations.targets import OBB, OUTLINES, SEMANTIC_MASK, instance_masks, transform
from augd.annotations.tree import IMAGE_EXTENSIONS, extension, upright
from augd.io.inputs import InputImage, RejectedInput
from augd.io.objects import RecordObjects
from augd.ops.base import Mix, Placement
from augd.ops.sampling import image_seed

__all__ = ["Detection", "ImageObjects", "ObjectCounts", "placement_steps", "source_boxes"]


@dataclass(frozen=True)
class ObjectCounts:
    """One written image of a detection job: its objects per class name in its annotation and in its records
    (every variant: kept and ignored), the objects the transforms dropped and those its records ignore by reason
    (augd.annotations.occlusion's DROP_REASONS, IGNORE_REASONS), and whether it is a negative."""
    objects_in: dict[str, int]
    objects_out: dict[str, int]
    dropped: dict[str, int]
    negative: bool
    points_in: int = 0                 # a keypoint job's labelled keypoints in its annotation, and in its records
    points_out: int = 0
    ignored: dict[str, int] = field(default_factory=dict)          # by reason
    ignored_out: dict[str, int] = field(default_factory=dict)      # by class name (part of objects_out)


@dataclass(frozen=True)
class Detection:
    """A detection job's annotations, read once before the run (shared read-only by the worker threads)."""
    layout: object                        # augd.annotations.layout.AnnotatedJob
    label_map: object                     # augd.annotations.labelmap.LabelMap
    settings: object                      # the spec's annotation keys (augd.schema.Annotations: defaults via .value)
    annotations: dict[str, Annotation]    # image relpath -> its annotation, for the images kept
    max_pixels: int = defaults.MAX_PIXELS  # the job's: a larger semantic mask is a bad annotation
    keypoints: KeypointSchema | None = None  # the format's, with `keypoint_flip` applied; None: no keypoints
    rule: Rule = Rule()                   # what each object's fate is judged by (rule_of: the settings and output)

    @property
    def format(self) -> str:
        return self.layout.format

    def attach(self, images) -> tuple[list[InputImage], list[RejectedInput], int]:
        """(the images kept, the ones rejected here, negatives rejected): an image the annotation reader did not
        read (an extension outside IMAGE_EXTENSIONS that the scan reads by content) or with an object of a class
        missing from the map is `bad_annotation` (the reader checked each box against its image); an image with
        no object and no mask is a negative, kept or rejected per `negatives`."""
        kept, rejected, negatives = [], [], 0
        reject_negatives = self.settings.value("negatives") == "reject"
        for img in images:
            ann = self.layout.annotations.get(img.relpath)
            try:
                if ann is None:
                    raise AnnotationError(_unread(img.relpath, self.format))
                _check_labels(ann, img, self.label_map)
            except AnnotationError as exc:
                rejected.append(RejectedInput(img.relpath, "bad_annotation", str(exc)))
                continue
            if not ann.objects and ann.mask is None and reject_negatives:
                rejected.append(RejectedInput(img.relpath, "negative", "no object annotated, and the job's "
                                                                      "annotations.negatives is reject"))
                negatives += 1
                continue
            self.annotations[img.relpath] = ann
            kept.append(img)
        return kept, rejected, negatives

    def boxes(self, img: InputImage) -> tuple:
        """The image's boxes in upright source pixel edges, as box-aware ops (random_crop's min_object_covered)
        draw from them: the graph's plan and the annotations' geometry both take these."""
        return source_boxes(self.annotations.get(img.relpath) or Annotation())

    def for_image(self, img: InputImage) -> "ImageObjects":
        """The per-image helper that writes its variants' objects (reads its semantic mask, if any)."""
        return ImageObjects(self, img, self.annotations.get(img.relpath) or Annotation())

    def partner(self, img: InputImage) -> "ImageObjects":
        """for_image for a partner of a mix: a semantic mask that cannot be used (it rejects that image in its own
        turn) does not reject the image that drew it: the partner's tile then has no class (255)."""
        try:
            return self.for_image(img)
        except AnnotationError:
            return ImageObjects(self, img, dataclasses.replace(self.annotations.get(img.relpath) or Annotation(),
                                                               mask=None))


def source_boxes(ann: Annotation) -> tuple:
    """Every object's (xmin, ymin, xmax, ymax), crowd and difficult ones included (as the OD API's crops see them)."""
    return tuple(tuple(o.box) for o in ann.objects)


def _unread(relpath: str, fmt: str) -> str:
    """Why an image the scan reads has no annotation read for it (the reader finds images by extension)."""
    ext = extension(relpath.rsplit("/", 1)[-1])
    if ext in IMAGE_EXTENSIONS:
        return (f"{relpath}: its {fmt} annotation was not read (its header could not be read then); drop the job "
                f"again")
    return (f"{relpath}: the {fmt} annotations are read for images named {', '.join(sorted(IMAGE_EXTENSIONS))} "
            f"only, and this one's extension is {ext or 'none'}: rename it so its annotation is read")


def _check_labels(ann: Annotation, img: InputImage, label_map) -> None:
    """AnnotationError when an object's class is missing from the label map (the reader checked the boxes)."""
    where = ann.source or img.relpath
    for k, o in enumerate(ann.objects, 1):
        label_map.id_of(o.name, f"{where}: object {k}")


class ImageObjects:
    """One image's annotation and the objects each of its variants' records carry."""

    def __init__(self, det: Detection, img: InputImage, ann: Annotation, *, size: tuple[int, int] | None = None,
                 mask=None):
        """`size` and `mask` (its semantic mask's pixels): a tile's, given (of_tile); else the image's own, its
        mask read from the annotation's file."""
        self.det, self.img, self.ann = det, img, ann
        self.h, self.w = size or upright(img.header)[:2]
        self.mask = mask if mask is not None else None if ann.mask is None else read_mask(
            ann.mask, (self.h, self.w), ann.source or ann.mask, max_pixels=det.max_pixels)
        self.instances = any(o.polygons or o.rle for o in ann.objects)
        self.out: collections.Counter = collections.Counter()
        self.dropped: collections.Counter = collections.Counter()   # by reason (occlusion.DROP_REASONS)
        self.ignored: collections.Counter = collections.Counter()   # written with weight 0, by reason
        self.ignored_out: collections.Counter = collections.Counter()   # ... by class name
        self.cut: collections.Counter = collections.Counter()       # a tile's: what its edge cut off, by reason
        self.points_out = 0

    def variant(self, spec, program, variant: int, out_h: int, out_w: int, *, replanned: bool = False,
                steps=None, covers=None, mixed=None, least: float = 0.0, events: tuple = (), moves: tuple = ()):
        """The RecordObjects of one variant stored at out_h x out_w. AnnotationError when the graph re-planned
        the variant (`replanned`: its decoded size is not its header's, so its geometry, and any box-aware crop,
        is not the one drawn here), or the stored size is not the one the plan gives. `steps`: the Geo steps the
        graph's plan used (Result.geometry, as Program.geometry gives them); None draws them again here, and
        `covers` (Result.covers: the cutouts' rectangles), `least` (Result.min_visibility: its crops' own
        overlap threshold), `events` (Result.events: its mirrors and quarter turns in order) and `moves`
        (Result.moves: in_boxes' moves) with them.
        `mixed` (augd.job.mixing.Mixed): the variant ran on a partner op's canvas, and `steps` start from it: the
        objects of the image and its partners each move into their tile first."""
        if mixed is not None:
            return self._mixed(mixed, steps or (), covers or (), out_h, out_w, program.mix is not None, least, events,
                               moves)
        if variant == 0:
            ann, seg, steps = self.ann, self.mask, []
            masks = instance_masks(ann, self.h, self.w, []) if self.instances else []
        else:
            if replanned:
                raise AnnotationError(f"{self.img.relpath}: variant {variant}: its decoded size is not the "
                                      f"{self.w}x{self.h} of its header, so the graph re-planned its geometry; its "
                                      f"boxes would not match")
            if steps is None:
                seed, boxes = image_seed(spec.seed, self.img.relpath, variant), (
                    source_boxes(self.ann) if program.uses_boxes else None)
                steps, covers, least, events, moves = program.annotation_plan(seed, self.h, self.w, boxes)
            ann, seg, masks = self._moved(steps, covers or (), least=least, events=events, moves=moves)
        want = (round(steps[-1][1]), round(steps[-1][2])) if steps else (self.h, self.w)
        if variant and want != (out_h, out_w):
            raise AnnotationError(f"{self.img.relpath}: variant {variant} decoded to {out_w}x{out_h}, not the "
                                  f"{want[1]}x{want[0]} its header's size plans for; its boxes would not match")
        return self._written(ann, seg, masks, out_h, out_w, (1.0,) * len(ann.objects) if program.mix else ())

    def of_result(self, spec, program, variant: int, r, out_h: int, out_w: int, mixed=None):
        """variant() of a record the job's graph made: `r` its augd.engine.Result (the plan it drew: geometry,
        covers, least visibility, keypoint events, moves inside boxes), or None to draw the plan again here."""
        if r is None:
            return self.variant(spec, program, variant, out_h, out_w, mixed=mixed)
        return self.variant(spec, program, variant, out_h, out_w, replanned=r.replanned, steps=r.geometry,
                            covers=r.covers, mixed=mixed, least=r.min_visibility, events=r.events, moves=r.moves)

    def of_tile(self, tile, image: InputImage) -> "ImageObjects":
        """One tile's objects (augd.schema.tile.Tile) as an image's own: those reaching its window moved into it and
        clipped there by the occlusion rule (what the tile cuts off is its `cut`, counted with this image's drops
        when the tile is written), its semantic mask cut (or shrunk) with it. The chain then moves them as any
        image's. `image`: the tile as an image (its seed path, its header); a partner op finds its objects under
        that path in the child's view of the job's annotations."""
        s, kp = self.det.settings, self.det.keypoints
        ann, seg, cut = transform(self._reaching(tile), [tile.step], rule=self.det.rule, mask=self.mask,
                                  flip=kp.flip if kp else None, size=(self.h, self.w),
                                  box_rotation=s.value("box_rotation"), rotation=kp.rotation if kp else None)
        ann = Annotation(ann.objects, None, self.ann.source or self.img.relpath)
        det = dataclasses.replace(self.det, annotations=collections.ChainMap({image.relpath: ann},
                                                                             self.det.annotations))
        child = ImageObjects(det, image, ann, size=(tile.out_h, tile.out_w), mask=seg)
        child.cut = cut
        return child

    def held(self) -> int:
        """How many objects it holds (a tile's, as cut); a semantic mask showing a class other than 0 (the
        background) counts as one."""
        n = len(self.ann.objects)
        if not n and self.mask is not None:
            n = int(((self.mask != 0) & (self.mask != 255)).any())
        return n

    def add(self, tile: "ImageObjects") -> None:
        """A written tile's counts into its image's: what the tile cut off and what its records hold."""
        self.dropped.update(tile.cut)
        self.dropped.update(tile.dropped)
        self.out.update(tile.out)
        self.ignored.update(tile.ignored)
        self.ignored_out.update(tile.ignored_out)
        self.points_out += tile.points_out

    def _reaching(self, tile) -> Annotation:
        """The annotation with only the objects whose box overlaps the tile's window."""
        return dataclasses.replace(self.ann, objects=tuple(
            o for o in self.ann.objects
            if o.box[0] < tile.x1 and o.box[2] > tile.x0 and o.box[1] < tile.y1 and o.box[3] > tile.y0))

    def _written(self, ann, seg, masks, out_h, out_w, weights=()):
        self.out.update(o.name for o in ann.objects)
        self.ignored.update(o.ignored for o in ann.objects if o.ignored)
        self.ignored_out.update(o.name for o in ann.objects if o.ignored)
        self.points_out += _labelled(ann)
        kp = self.det.keypoints
        return _record_objects(ann, seg, masks, out_h, out_w, self.det.label_map, self.ann.source or self.img.relpath,
                               len(kp.names) if kp else 0, weights, self.det.settings.value("polygon_keys"))

    def _moved(self, steps, covers=(), ann=None, masks=False, semantic=True, least: float = 0.0, events=(),
               moves=()):
        """(the annotation through `steps`, its semantic mask, its objects' instance masks). `ann`: the objects to
        move, if not all of this image's (a mix's pasted object alone), their masks from them; `masks`:
        instance masks even for an annotation without polygons or RLE (a mix with one that has them);
        `semantic`: False leaves the semantic mask out (None); `least`: the steps' own min_visibility (a crop's),
        applied where it is above the job's; `events`: their mirrors and quarter turns, in order; `moves`: in_boxes'
        moves between them."""
        s = self.det.settings
        kp = self.det.keypoints
        src = self.ann if ann is None else ann
        out, seg, dropped = transform(src, steps, rule=self.det.rule.stricter(least),
                                      mask=self.mask if semantic else None, flip=kp.flip if kp else None,
                                      covers=covers, size=(self.h, self.w), box_rotation=s.value("box_rotation"),
                                      rotation=kp.rotation if kp else None, events=events, moves=moves)
        self.dropped.update(dropped)
        if not (self.instances or masks) or not src.objects:
            return out, seg, []
        # a box alone, beside objects with masks (in this image, or in a mix): its own rectangle
        src = dataclasses.replace(src, objects=tuple(
            o if o.polygons or o.rle is not None else dataclasses.replace(o, polygons=(corners(o.box),))
            for o in src.objects))
        got = instance_masks(src, self.h, self.w, steps, moves)   # one per input object: keep the survivors'
        masks = hide_in_masks([got[i] for i in out.extra[KEPT]], out.objects, out.extra[HIDDEN])
        return out, seg, masks

    def _mixed(self, mixed, steps, covers, out_h: int, out_w: int, weighted: bool, least: float = 0.0, events=(),
               moves=()):
        """The RecordObjects of a variant made on a mix's canvas: each placed source's objects through its tile
        and then the steps after the partner op (a paste hides what it lands on: a cover on the canvas);
        a blend's objects weighted by their image's share (image/object/weight); the semantic masks laid on the
        canvas as the pixels are (a blend's: the heavier image's where both have one), then moved once."""
        mix, drawn = mixed.drawn.mix, mixed.drawn
        total = sum(p.weight for p, ok in zip(mix.placements, mixed.placed) if ok) or 1.0
        parts = [(k, p, self if k == 0 else self.det.partner(img))
                 for k, (p, img, ok) in enumerate(zip(mix.placements, drawn.sources, mixed.placed)) if ok]
        any_masks = any(part.instances for _, _, part in parts)
        shifted = tuple((n + 2, r) for n, r in covers)   # the program's covers count the two placement steps
        moved_in = tuple((n + 2, r, t) for n, r, t in moves)
        events = tuple((e, n + 2) for e, n in events)   # the same two steps come before the chain's flips and turns
        on_canvas = [(0, r, t) for n, r, t in moves if n == 0]   # the chain's moves before its first step
        objects, masks, weights = [], [], []
        for k, p, part in parts:
            # a pasted object alone (copy_paste), or the whole source; what later pastes hide is a cover on the
            # canvas (after its two placement steps), judged with the rest of the chain's by the one rule
            ann = part.ann if p.obj < 0 else dataclasses.replace(part.ann, objects=(part.ann.objects[p.obj],))
            hidden = mixed.hidden(k)
            if hidden is not None and on_canvas:   # the pastes hid it before the chain moved inside boxes
                hidden = warp_moved(hidden.astype(np.uint8), [], on_canvas, fill=0) > 0
            pasted = ((2, hidden),) if hidden is not None and hidden.any() else ()
            part_steps = placement_steps(p, mix) + list(steps)
            moved, _, got = part._moved(part_steps, pasted + shifted, ann, any_masks, semantic=False, least=least,
                                        events=events, moves=moved_in)
            objects += moved.objects
            masks += got
            weights += [p.weight / total if mix.blend else 1.0] * len(moved.objects)
            if part is not self:
                self.dropped.update(part.dropped)
        masked = any(part.mask is not None for _, _, part in parts)
        seg = _canvas_mask(mix, parts, steps, mixed.alphas, moves) if masked else None
        ann = dataclasses.replace(self.ann, objects=tuple(objects))
        return self._written(ann, seg, masks, out_h, out_w, tuple(weights) if weighted else ())

    def counts(self):
        """What the image adds to the manifest's annotations block."""
        return ObjectCounts(dict(collections.Counter(o.name for o in self.ann.objects)), dict(self.out),
                            dict(self.dropped), not self.ann.objects and self.ann.mask is None, _labelled(self.ann),
                            self.points_out, dict(self.ignored), dict(self.ignored_out))


def _labelled(ann: Annotation) -> int:
    return sum(p[2] > 0 for o in ann.objects for p in o.keypoints)


def _canvas_mask(mix, parts, steps, alphas, moves=()):
    """The semantic mask of a mix, laid on its canvas as the pixels are (each tile its source's mask, 255 where a
    source has none or does not reach; a blend: the heavier source's where both have a class; a pasted object:
    its own pixels), then moved by the steps after the partner op (and in_boxes' moves between them)."""
    canvas = np.full((mix.height, mix.width), 255, np.uint8)
    for k, p, part in sorted(parts, key=lambda t: t[1].weight) if mix.blend else parts:
        x0, y0, x1, y1 = p.rect
        tile = np.full((y1 - y0, x1 - x0), 255, np.uint8) if part.mask is None else \
            warp_mask(part.mask, [(p.matrix, y1 - y0, x1 - x0)], fill=255)   # a paste without a mask hides
        if k in alphas:
            shows = alphas[k] > 0.5
            canvas[y0:y1, x0:x1][shows] = tile[shows]
        elif part.mask is None and mix.blend:
            continue
        elif mix.blend:
            region = canvas[y0:y1, x0:x1]
            region[tile != 255] = tile[tile != 255]
        else:
            canvas[y0:y1, x0:x1] = tile
    return SEMANTIC_MASK.move(canvas, steps, moves) if steps or moves else canvas


def _record_objects(ann: Annotation, seg, masks, h: int, w: int, label_map, where: str, num_keypoints: int = 0,
                    weights=(), polygons: bool = False):
    objs: tuple[Object, ...] = ann.objects
    # a record with an oriented object gives every object an oriented box (an upright one its box's corners)
    oriented = tuple(OBB.corners(o) for o in objs) if any(o.oriented for o in objs) else ()
    return RecordObjects.from_objects(objs, h, w, {o.name: label_map.id_of(o.name, where) for o in objs},
                                      masks=tuple(mask_png(m) for m in masks),
                                      segmentation=mask_png(seg) if seg is not None else None,
                                      num_keypoints=num_keypoints, weights=weights, oriented=oriented,
                                      polygons=tuple(OUTLINES.rings(o) for o in objs) if polygons else None)


def placement_steps(p: Placement, mix: Mix) -> list[tuple[np.ndarray, float, float]]:
    """A placement as annotation steps (Program.geometry's form): the source into its tile (clipped to it), then
    the tile into the canvas."""
    th, tw = p.size
    shift = np.array([[1, 0, -p.rect[0]], [0, 1, -p.rect[1]], [0, 0, 1]], np.float64)
    return [(p.matrix, float(th), float(tw)), (shift, float(mix.height), float(mix.width))]


