"""The kinds of target an image's annotation carries, and each one's way through a job's geometry.

A target kind says how it moves through a step's matrix (the 3x3 maps of the pixels: augd/annotations/
geometry.py), how it is clipped to each step's canvas, and which record keys it writes (augd/io/lite.py names
every key). Two families:

* an object's SHAPE gives the object its box in the output: its polygons when it has any, else its RLE mask,
  else its box's 4 corners (SHAPES, tried in order: the first the object carries). A shape returns what is
  visible, the extent of the whole moved object (min_visibility's measure) and whether a canvas cut it;
* an oriented object (OBB) moves as its 4-corner polygon, and its record adds its refit oriented box;
* where a job asks, a record adds what shows of each object as rings (OUTLINES: its moved polygons, its mask's
  outline);
* an object's KEYPOINTS ride along: points through the same maps, a point a canvas cuts off becomes not visible
  (visibility 0, coordinates 0, as COCO writes it), and a net mirror swaps left and right (the schema's flip);
* the RASTERS are warped like the pixels: the objects' instance masks and the image's semantic mask.

A new kind of target is a class here beside its family, its field on augd.annotations.model.Object, and its keys
in io/lite.py; tests/test_annotation_geometry.py holds every kind's keys against the records' schema.
TensorFlow-free.
"""
from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np

from augd.annotations.geometry import (Step, area, corners, edge9, extent, forward, mask_extent, mirrors,
                                       move_outline, move_points, rasterise, rle_outline, warp_moved)
from augd.annotations.model import Annotation, AnnotationError, Object
from augd.annotations.occlusion import (DROP_REASONS, HIDDEN, IGNORE_REASONS, KEPT, Rule, hidden_by, hide_in_masks,
                                        thick_box, uncovered)
from augd.annotations.oriented import oriented_corners
from augd.annotations.outlines import rings as outline_rings
from augd.annotations.rle import rle_decode, rle_encode

__all__ = ["DROP_REASONS", "HIDDEN", "IGNORE_REASONS", "INSTANCE_MASKS", "KEPT", "KEYPOINTS", "KINDS", "OBB",
           "OUTLINES", "SEMANTIC_MASK", "SHAPES", "WEIGHTS", "Moved", "Rule", "Shape", "hidden_by", "hide_in_masks",
           "instance_masks", "transform"]

Box = tuple[float, float, float, float]
_BOX_KEYS = ("image/object/bbox/xmin", "image/object/bbox/ymin", "image/object/bbox/xmax",
             "image/object/bbox/ymax", "image/object/class/label", "image/object/class/text",
             "image/object/difficult", "image/object/truncated")


@dataclass(frozen=True)
class Moved:
    """An object's shape after every step: the extent of what is visible (None: nothing), the extent of the
    whole moved object had no canvas cut it, whether one did, the Object fields the shape rewrites, and where a
    box alone now lies (its corners through the steps, clipped: what a cover is judged against)."""
    box: Box | None
    whole: Box | None
    cut: bool
    changes: dict
    region: tuple = ()


class Shape(Protocol):
    """A kind of object shape (see the module docstring)."""
    name: str
    keys: tuple[str, ...]        # the record keys it writes

    def carries(self, obj: Object) -> bool: ...

    def move(self, obj: Object, maps: list[tuple], steps: Sequence[Step], moves=()) -> Moved:
        """`maps`: each step's edge map as 9 floats (geometry.edge9), `steps` the steps themselves, `moves` the
        moves inside boxes between them (augd.annotations.geometry)."""


class _Polygons:
    """COCO or YOLO polygons: every vertex through each step, clipped to its canvas (Sutherland-Hodgman); the
    box is the extent of what is left, so it stays tight after a rotation. A move inside a box takes the part
    there with its pixels (a polygon a box's edge crosses becomes its pieces)."""
    name, keys = "polygons", ("image/object/mask",)

    def carries(self, obj: Object) -> bool:
        return bool(obj.polygons)

    def move(self, obj, maps, steps, moves=()) -> Moved:
        clipped, free, cut = forward(obj.polygons, maps, steps, moves)
        polys = tuple(tuple(p) for p in clipped if len(p) >= 3)
        return Moved(extent(clipped), extent(free), cut, {"polygons": polys})


class _RleMask:
    """A COCO RLE instance mask: warped like the pixels (nearest neighbour), the box is its pixels' extent where
    they land; the outline of its rows measures the whole object (a point set: moved, never clipped)."""
    name, keys = "rle", ("image/object/mask",)

    def carries(self, obj: Object) -> bool:
        return obj.rle is not None

    def move(self, obj, maps, steps, moves=()) -> Moved:
        src = rle_decode(obj.rle)
        pts, cut = move_outline(rle_outline(src), maps, steps, moves)
        whole = (*pts.min(axis=0), *pts.max(axis=0)) if len(pts) else None
        warped = warp_moved(src, steps, moves, fill=0)
        return Moved(mask_extent(warped), whole, cut, {"rle": rle_encode(warped)})


class _Box:
    """A box alone: its 4 corners through each step, clipped like a polygon; the box is their extent. A move inside
    a box leaves it where it is (AutoAugment's *_Only_BBoxes keep the box): what the move leaves empty is a cover,
    which the occlusion rule judges it by."""
    name, keys = "box", _BOX_KEYS

    def carries(self, obj: Object) -> bool:
        return True

    def move(self, obj, maps, steps, moves=()) -> Moved:
        clipped, free, cut = forward((corners(obj.box),), maps, steps)
        return Moved(extent(clipped), extent(free), cut, {}, tuple(tuple(p) for p in clipped if len(p) >= 3))


class _EllipseBox(_Box):
    """A box alone taken as the ellipse inscribed in it (box_rotation: ellipse): ELLIPSE_VERTICES points on it
    through each step, clipped; the box is their extent. Used only where a step turns or shears (through flips,
    scales and crops the inscribed ellipse's extent is the box's own, and a crop would cut its corners short)."""
    name = "ellipse"

    def move(self, obj, maps, steps, moves=()) -> Moved:
        x0, y0, x1, y1 = obj.box
        cx, cy, a, b = (x0 + x1) / 2, (y0 + y1) / 2, (x1 - x0) / 2, (y1 - y0) / 2
        t = np.linspace(0.0, 2 * np.pi, ELLIPSE_VERTICES, endpoint=False)
        ring = list(zip((cx + a * np.cos(t)).tolist(), (cy + b * np.sin(t)).tolist()))
        clipped, free, cut = forward((ring,), maps, steps)
        return Moved(extent(clipped), extent(free), cut, {}, tuple(tuple(p) for p in clipped if len(p) >= 3))


def _turns(steps) -> bool:
    """Whether any step rotates or shears (an off-diagonal term in its matrix)."""
    return any(abs(m[0][1]) > 1e-9 * (abs(m[0][0]) + abs(m[1][1])) or abs(m[1][0]) > 1e-9 * (abs(m[0][0])
               + abs(m[1][1])) for m, _, _ in steps)


class _Keypoints:
    """An object's points through every step; one that leaves a step's canvas ([0, w] x [0, h], closed so that
    a mirror keeps a border point) or that a cutout overwrites is gone: (0, 0, 0). After a net mirror (the
    steps' product has a negative determinant: a flip, never a rotation) point i takes the position of point
    flip[i]: a mirrored left hand is the right hand."""
    name = "keypoints"
    keys = ("image/object/keypoint/x", "image/object/keypoint/y", "image/object/keypoint/visibility",
            "image/object/keypoint/num")

    def move(self, points, maps, steps, mirrored: bool, flip, covers=(), rotation=None, events=(), moves=()) -> tuple:
        """`rotation`: the job's keypoint_rotation, point i taking point rotation[i]'s place at each quarter turn
        (the OD API's keypoint_rot_permutation): with one, the flips and the turns permute in the order they
        happen, as the API's steps do: `events` gives the image's, ("mirror" or "turn", the steps before the one
        that made it); without, a net mirror swaps once. A point inside a box that in_boxes moves goes with its
        pixels; a flip inside a box that took most of the object's points the record still holds mirrors the object
        too, in its place among the image's steps (without a rotation only their number counts)."""
        labelled = [k for k, p in enumerate(points) if p[2] > 0]
        flips: list = []
        moved = move_points([points[k][:2] for k in labelled], maps, steps, covers, moves, flips)
        out = [(0.0, 0.0, 0)] * len(points)
        for k, xy in zip(labelled, moved):
            if xy is not None:
                out[k] = (xy[0], xy[1], points[k][2])
        shown = [f for f, xy in zip(flips, moved) if xy is not None]   # the points the record holds: what swaps
        took = Counter(m for f in shown for m in f)   # each flip inside a box: the shown points it took
        inner = [(k, "mirror") for (k, j), n in sorted(took.items()) if 2 * n > len(shown)]
        if rotation is None:
            return tuple(out[j] for j in flip) if mirrored != (len(inner) % 2 == 1) else tuple(out)
        # a move after k steps comes before the events of step k (its k + 0.5); a stable sort keeps each one's order
        for _, e in sorted([(k + 0.5, e) for e, k in events] + inner, key=lambda t: t[0]):
            out = [out[j] for j in (rotation if e == "turn" else flip)]
        return tuple(out)


class _OrientedBoxes:
    """An oriented object (Object.oriented) moves as its 4-corner polygon (_Polygons); its record adds the
    minimum-area rectangle of what shows of it (augd.annotations.oriented: the refit rule), and every other object
    of that record its box's corners."""
    name = "oriented_boxes"
    keys = tuple(f"image/object/obb/{a}{k}" for k in range(1, 5) for a in "xy")   # x1, y1, ..., y4

    def corners(self, obj: Object):
        return oriented_corners(obj)


class _Outlines:
    """What shows of each object as rings, in records of a job that asks (annotations.polygon_keys): its polygons
    clipped to its box, its mask's outline, or none (augd.annotations.outlines)."""
    name = "polygon_keys"
    keys = ("image/object/polygon/x", "image/object/polygon/y", "image/object/polygon/num_vertices",
            "image/object/polygon/num_rings")

    def rings(self, obj: Object):
        return outline_rings(obj)


class _InstanceMasks:
    """One 0/1 raster per object (from its polygons, its RLE, or its box), warped with fill 0."""
    name, keys = "instance_masks", ("image/object/mask",)

    def move(self, ann: Annotation, h: int, w: int, steps: Sequence[Step], moves=()) -> list[np.ndarray]:
        return instance_masks(ann, h, w, steps, moves)


class _SemanticMask:
    """The image's HxW class indices, warped by nearest neighbour; 255 (ignore) where a step reads outside, and
    where a move inside a box leaves grey."""
    name, keys = "semantic_mask", ("image/segmentation/class/encoded", "image/segmentation/class/format")

    def move(self, mask: np.ndarray, steps: Sequence[Step], moves=()) -> np.ndarray:
        return warp_moved(mask, steps, moves, fill=255)


class _Weights:
    """Each object's fate in its record (augd.annotations.occlusion): its weight (0 when it is ignored, else 1 or
    its image's share of a blend: mixup, augd/job/mixing.py), is_crowd (COCO's iscrowd, or ignored: "ignore it in
    evaluation") and augd's own word on why it is ignored; they ride along with the object."""
    name, keys = "weights", ("image/object/weight", "image/object/is_crowd", "augd/object/ignored")


SHAPES: tuple[Shape, ...] = (_Polygons(), _RleMask(), _Box())
KEYPOINTS = _Keypoints()
OBB = _OrientedBoxes()
OUTLINES = _Outlines()
INSTANCE_MASKS = _InstanceMasks()
SEMANTIC_MASK = _SemanticMask()
ELLIPSE = _EllipseBox()
ELLIPSE_VERTICES = 64   # the inscribed ellipse as a polygon: its extent within 0.12 % of the true one
#: Every kind, for what holds them all against the records (their keys).
WEIGHTS = _Weights()
KINDS = (*SHAPES, KEYPOINTS, OBB, OUTLINES, INSTANCE_MASKS, SEMANTIC_MASK, WEIGHTS)


def _move(obj: Object, maps, steps, rule: Rule, points, hidden, ellipse: bool = False, moves=()) -> Object | str:
    """One object in the output's coordinates (kept, or ignored: occlusion.Rule.fate), or the reason it is dropped
    (DROP_REASONS). `points`: (mirrored, flip or None for no swap, covers, rotation, events); `hidden`: the output's
    pixels the covers overwrote; `ellipse`: a box alone moves as its inscribed ellipse (the steps turn, and
    box_rotation says so); `moves`: the moves inside boxes between the steps."""
    shape = next(s for s in SHAPES if s.carries(obj))
    if ellipse and shape is SHAPES[-1]:
        shape = ELLIPSE
    moved = shape.move(obj, maps, steps, moves)
    box, whole = moved.box, area(moved.whole)
    if box is None or whole <= 0.0 or area(box) <= 0.0:
        return "outside"
    if min(box[2] - box[0], box[3] - box[1]) < rule.min_size:
        return "small"
    new = dataclasses.replace(obj, box=box, truncated=obj.truncated or moved.cut, **moved.changes)
    share, reason, covered = obj.visible * min(area(box) / whole, 1.0), "cut", False
    if hidden is not None:   # of what the canvases left, the covers may hide more
        got = uncovered(new, hidden, rule, region=moved.region)
        if got is None:
            return "covered"
        covered = got[0] is not new     # what shows of it is then what the cover's rule left
        new, shown = got
        reason = "cut" if share < rule.min_visibility else "covered"
        share *= shown
    if obj.keypoints:
        mirrored, flip, covers, rotation, events = points
        new = dataclasses.replace(new, keypoints=KEYPOINTS.move(obj.keypoints, maps, steps, mirrored,
                                                                flip or range(len(obj.keypoints)), covers, rotation,
                                                                events, moves))
        if share >= rule.min_visibility and sum(p[2] > 0 for p in new.keypoints) < rule.min_keypoints:
            reason = "keypoints"
    under = reason == "keypoints"
    ignoring = rule.ignores(share, under)
    if (moved.cut or ignoring) and not covered:   # what a canvas left of it shows where it is min_size thick
        box = thick_box(new, moved.region, rule.min_size, rule.seen if ignoring else 0.0)
        if box is None:
            return "small"
        new = dataclasses.replace(new, box=box)
    return rule.fate(new, share, reason, under)


def transform(ann: Annotation, steps: Sequence[Step], *, rule: Rule = Rule(), mask: np.ndarray | None = None,
              flip: Sequence[int] | None = None, covers=(), size: tuple[int, int] | None = None,
              box_rotation: str = "corners", rotation: Sequence[int] | None = None,
              events: Sequence[tuple[str, int]] = (), moves=()) -> tuple[Annotation, np.ndarray | None, Counter]:
    """(the annotation in the output image's coordinates, the warped semantic mask or None, objects dropped by
    reason: a Counter of DROP_REASONS).

    Each object's box (its 4 corners; its polygons when it has any, for a tight box; the outline of its RLE
    mask, whose box is then the extent of the warped mask) goes through every step and is clipped to that
    step's canvas; its new box is the axis-aligned extent of what is left, `truncated` is set when clipping cut
    it. `covers` (Program.covers: what the cutouts overwrote) hide what they overwrite by the one occlusion rule
    (augd.annotations.occlusion): an object's box becomes the extent of its part still showing, its mask loses
    those pixels, the keypoints under them are no longer labelled. Then `rule` decides each object's fate: kept,
    ignored (`ignored` set to its IGNORE_REASONS reason: it shows, but under min_visibility of itself, or with
    fewer than min_keypoints points) or dropped (DROP_REASONS). Objects written carry their clipped polygons and
    their warped RLE mask in output coordinates, and `visible`, the share of them as annotated still showing;
    `extra[KEPT]` lists their input indices. `mask` (HxW uint8 class indices of the source) is warped with
    nearest-neighbour sampling, 255 outside; `size`: the source's (h, w), needed for covers when there are no
    steps. Keypoints (the job's schema's `flip`) move as the _Keypoints kind says. `box_rotation`: "ellipse" moves
    a box alone as its inscribed ellipse where a step turns or shears (_EllipseBox); "corners" as its 4 corners.
    `rotation`, `events`: the job's keypoint_rotation and the plan's mirrors and quarter turns in order, each with
    the number of steps before its own. `moves` (Program.annotation_plan's fifth): in_boxes' moves between the
    steps, which take the polygons, masks and keypoints inside each box with its pixels (a box alone stays: what
    they leave empty is among the covers)."""
    maps = [edge9(m) for m, _, _ in steps] if ann.objects else []
    points = (mirrors(steps), None if flip is None else tuple(flip), tuple(covers),
              None if rotation is None else tuple(rotation), tuple(events))
    hidden = hidden_by(covers, maps, steps, size, moves) if covers and ann.objects else None
    if hidden is not None and not hidden.any():
        hidden = None
    kept, objects, dropped = [], [], Counter()
    ellipse = box_rotation == "ellipse" and _turns(steps)
    for k, obj in enumerate(ann.objects):
        new = _move(obj, maps, steps, rule, points, hidden, ellipse, moves)
        if isinstance(new, str):
            dropped[new] += 1
        else:
            kept.append(k)
            objects.append(new)
    extra = {**ann.extra, KEPT: tuple(kept), HIDDEN: hidden}
    out = dataclasses.replace(ann, objects=tuple(objects), extra=extra)
    warped = None if mask is None else SEMANTIC_MASK.move(mask, steps, moves)
    return out, warped, dropped


def instance_masks(ann: Annotation, h: int, w: int, steps: Sequence[Step], moves=()) -> list[np.ndarray]:
    """One HxW uint8 0/1 mask per object (H, W: the last step's output, or h, w without steps), rasterised from
    its polygons, its RLE or, for an object with neither, its box, in the h x w source, then warped with the
    image (fill 0), and moved inside boxes with it (`moves`). [] when no object has a polygon or an RLE mask."""
    if not any(o.polygons or o.rle is not None for o in ann.objects):
        return []
    out = []
    for k, obj in enumerate(ann.objects):
        if obj.polygons:
            src = rasterise(obj.polygons, h, w)
        elif obj.rle is not None:
            src = rle_decode(obj.rle)
            if src.shape != (h, w):
                raise AnnotationError(f"{ann.source or '?'}: object {k + 1} ({obj.name}): RLE mask of "
                                      f"{src.shape[0]}x{src.shape[1]} on an image of {h}x{w}")
        else:
            src = rasterise([corners(obj.box)], h, w)
        out.append((warp_moved(src, steps, moves, fill=0) > 0).astype(np.uint8))
    return out
