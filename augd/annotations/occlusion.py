"""The one occlusion rule, and the three fates it gives every object (docs/pipelines.md, "What becomes of an
object").

Every op that hides pixels (cutouts, holes, black patches, a paste, cutmix's patch, the grey that in_boxes leaves)
reports what it hides as covers, and every crop, pad, tile and mosaic cuts by its canvas. Whatever did it, each
object then has one fate, decided by what a viewer can see of it:

* kept: it shows, at least `min_visibility` of itself: its box is the extent of what shows;
* ignored: it still shows (each side of what shows at least `min_size` px, and `strip` px), but less than
  `min_visibility` of itself (why: IGNORE_REASONS): written like a kept one, its box of what shows, its mask and
  keypoints as they show, but with weight 0, so that a detector learns it neither as an object nor as background
  (the OD API's target assigner gives an anchor matched to a weight-0 box no loss either way);
* dropped: nothing a viewer can see is left (why: DROP_REASONS): no part on the canvas, what is left thinner than
  `min_size`, or nothing past the covers. A part beside a cover counts as showing where it is at least `min_size`
  px thick, and `strip` px (the least a strip of colour must be for the output's encoding to keep its hue: JPEG's
  4:2:0 chroma averages 2x2 blocks), so a box never stretches across a cover to hold a sliver the encoding blurs
  away; a sliver a crop leaves at the canvas' edge counts where it is `min_size` thick (thick_box).

`Rule.low_visibility` says what an object under the rule becomes: ignored (the default), dropped (the OD API's own
behaviour: its crops drop what falls under overlap_thresh) or kept as any other. An object's `visible` is the share
of itself as annotated that still shows, carried through every stage that cuts it (a tile, then the chain; a
paste, then the canvas), so the rule judges the whole way, not each step alone. TensorFlow-free.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from augd.annotations.geometry import as_polygon, forward, mask_extent, rasterise, warp_moved
from augd.annotations.model import IGNORE_REASONS, Object
from augd.annotations.rle import rle_decode, rle_encode
from augd.lazycv import cv2

__all__ = ["DROP_REASONS", "HIDDEN", "IGNORE_REASONS", "KEPT", "LOW_VISIBILITY", "Rule", "hidden_by", "hide_in_masks",
           "thick_box", "uncovered"]

#: transform() writes the indices (into the input's objects) of the objects they kept or ignored under
#: this key of the output annotation's `extra`, so a caller can pair them with instance_masks() of the input.
KEPT = "augd/kept_objects"
#: ... and transform() under this one the output's HxW bool mask of the pixels its covers overwrote (None: none),
#: so that a caller takes them off the objects' instance masks too.
HIDDEN = "augd/hidden_pixels"

#: What an object under the rule becomes (annotations.low_visibility).
LOW_VISIBILITY = ("ignore", "drop", "keep")
#: Why an object is dropped, in the order they are checked: outside: no part of it left on the canvas; small: a
#: side of what is left is under min_size px; covered: nothing of it shows past the covers (remnants thinner than
#: min_size, and detached strips thinner than `strip`, not counting). With low_visibility: drop, an object under the
#: rule is dropped too, for its IGNORE_REASONS reason (cut, covered, keypoints).
DROP_REASONS = ("outside", "cut", "small", "covered", "keypoints")


@dataclass(frozen=True)
class Rule:
    """The thresholds a job judges its objects by (its annotations settings), and what becomes of one under them."""
    min_visibility: float = 0.0
    min_size: float = 1.0
    min_keypoints: int = 0
    low_visibility: str = "ignore"
    strip: float = 0.0

    def __post_init__(self):
        if self.low_visibility not in LOW_VISIBILITY:
            raise ValueError(f"low_visibility must be one of {', '.join(LOW_VISIBILITY)}; got {self.low_visibility!r}")

    def stricter(self, least: float) -> "Rule":
        """The rule with a step's own min_visibility (a crop's overlap threshold) where it is above the job's."""
        return self if least <= self.min_visibility else dataclasses.replace(self, min_visibility=least)

    @property
    def seen(self) -> float:
        """The least side of what shows of an object under the rule for a viewer to see it (else it is dropped as
        small): min_size, or the output's strip where that is more (a 2-px sliver of colour does not survive JPEG)."""
        return max(self.min_size, self.strip, 1.0)

    def ignores(self, share: float, under: bool = False) -> bool:
        """Whether an object showing `share` of itself (or `under` the rule whatever its share) is ignored."""
        return self.low_visibility == "ignore" and (under or share < self.min_visibility)

    def fate(self, obj: Object, share: float, reason: str, under: bool = False) -> Object | str:
        """`obj` (its box already what shows) showing `share` of itself as annotated: itself, itself ignored for
        `reason`, or `reason` when the rule drops it ("small" when what shows is too thin to see: Rule.seen).
        `under`: it falls under the rule whatever its share (too few keypoints). An object an earlier stage put
        under the rule keeps that stage's reason."""
        obj = dataclasses.replace(obj, visible=share) if share != obj.visible else obj
        if not (under or share < self.min_visibility) or self.low_visibility == "keep":
            return obj
        reason = obj.ignored or reason
        if self.low_visibility == "drop":
            return reason
        if min(obj.box[2] - obj.box[0], obj.box[3] - obj.box[1]) < self.seen:
            return "small"
        return dataclasses.replace(obj, ignored=reason)


def hidden_by(covers, maps, steps, size: tuple[int, int], moves=()) -> np.ndarray | None:
    """The output's HxW bool mask of the pixels the covers overwrote (None: no cover): each cover (k, shape),
    overwritten after the first k steps and the moves inside boxes there (a rectangle (x0, y0, x1, y1) or a polygon
    ((x, y), ...), rasterised at pixel centres; or a raster, an HxW bool array of step k-1's output: what a paste
    hid), moved through the steps after it, and the later moves inside boxes, as the pixels it filled moved.
    `size`: the output's (h, w) when there are no steps."""
    if not covers:
        return None
    oh, ow = (int(round(steps[-1][1])), int(round(steps[-1][2]))) if steps else size
    out = np.zeros((oh, ow), np.uint8)   # 0/1, every cover set in it: no canvas of its own each
    for k, shape in covers:
        later = [(j - k, r, t) for j, r, t in moves if j > k]
        if isinstance(shape, np.ndarray):
            out |= warp_moved(shape.astype(np.uint8), steps[k:], later, fill=0) > 0 if k < len(steps) or later \
                else np.asarray(shape, bool)   # 0/1 in the canvas whatever the raster's values
            continue
        clipped, _, _ = forward((as_polygon(shape),), maps[k:], steps[k:], later)
        rasterise([p for p in clipped if len(p) >= 3], oh, ow, out=out)
    return out.view(bool)


def hide_in_masks(masks: list[np.ndarray], objects, hidden: np.ndarray | None) -> list[np.ndarray]:
    """The written objects' instance masks (instance_masks of the source, theirs) without what the covers hid
    (transform's extra[HIDDEN]) nor what their box, the extent of what counts, leaves out (a tip too thin to
    count, a pixel the nearest-neighbour warp set just past the shape): a mask and its box agree."""
    for m, obj in zip(masks, objects):
        c0, r0, c1, r1 = pixels_of(obj.box, *m.shape)
        if hidden is not None:
            m[hidden] = 0
        m[:r0], m[r1:], m[:, :c0], m[:, c1:] = 0, 0, 0, 0
    return masks


def pixels_of(box, h: int, w: int) -> tuple[int, int, int, int]:
    """The rows and columns whose pixel centres lie inside a box in pixel edges: (c0, r0, c1, r1), half-open."""
    return (min(max(int(np.ceil(box[0] - 0.5)), 0), w), min(max(int(np.ceil(box[1] - 0.5)), 0), h),
            min(max(int(np.ceil(box[2] - 0.5)), 0), w), min(max(int(np.ceil(box[3] - 0.5)), 0), h))


def thickness(rule: Rule, box) -> float:
    """How thick a part of an object beside a cover must be to count as showing: min_size, or the output's strip
    (a thinner strip of colour blurs into what borders it, and must not stretch a box across the cover), but never
    more than the object's own thinner side (a thin pole cut in two still shows)."""
    return max(rule.min_size, min(rule.strip, box[2] - box[0], box[3] - box[1]))


def showing(visible: np.ndarray, size: float) -> np.ndarray:
    """The pixels of `visible` (2-D bool: an object's window) that count as showing: those of a part at least
    `size` pixels thick both ways (a morphological opening by a square of that side, outside the window counting
    as hidden: a 2-px strip along the object's own edge is thin; a whole object of at least that size is its own
    opening)."""
    k = int(np.ceil(size))
    if k < 2 or not visible.any():
        return visible
    # An erosion and a dilation whose anchors mirror each other: cv2.morphologyEx's opening by an even square
    # anchors both at its centre and moves what it keeps one pixel right and down.
    square, a = np.ones((k, k), np.uint8), k // 2
    kept = cv2.erode(visible.astype(np.uint8), square, anchor=(a, a), borderType=cv2.BORDER_CONSTANT, borderValue=0)
    return cv2.dilate(kept, square, anchor=(k - 1 - a, k - 1 - a), borderType=cv2.BORDER_CONSTANT,
                      borderValue=0).astype(bool)


def uncovered(obj: Object, hidden: np.ndarray, rule: Rule, region: tuple = ()) -> tuple[Object, float] | None:
    """(the object, in the output's coordinates, with what `hidden` (the output's HxW bool: what covers overwrote)
    hides taken off, the share of it still showing), or None when nothing of it shows. An object with polygons or an
    RLE mask keeps the pixels still showing (as an RLE mask: its box becomes their extent); a box alone keeps the
    extent of its pixels still showing. What shows is what is at least `thickness` px thick; one cut becomes
    truncated (its keypoints are the caller's: transform moves them past the covers itself). `region`: where a box
    alone lies when it is no longer upright (its rotated corners), else its box."""
    h, w = hidden.shape
    c0, r0, c1, r1 = pixels_of(obj.box, h, w)
    under = hidden[r0:r1, c0:c1]
    if not under.any():
        return obj, 1.0
    if obj.polygons or obj.rle is not None or region:
        # the whole shape lies in its box (its extent): the work is the box's pixels
        drawn = obj.polygons or obj.rle is None
        src = None if drawn else rle_decode(obj.rle)
        win = rasterise(obj.polygons or region, h, w, window=(c0, r0, c1, r1)) if drawn else src[r0:r1, c0:c1]
        if not win[under].any():
            return obj, 1.0       # the covers take its box's corners, not the shape itself (a turn in its box)
        full = int(win.sum())
        win[under] = 0
        win[:] = showing(win > 0, thickness(rule, obj.box))
        ext = mask_extent(win)
        if ext is None or not full:
            return None
        box, share = (ext[0] + c0, ext[1] + r0, ext[2] + c0, ext[3] + r0), float(win.sum()) / full
        if obj.polygons or obj.rle is not None:
            if src is None:   # the whole raster for its RLE, the window as the covers left it
                src = rasterise(obj.polygons, h, w)
                src[r0:r1, c0:c1] = win
            return dataclasses.replace(obj, box=box, polygons=(), rle=rle_encode(src), truncated=True), share
        return dataclasses.replace(obj, box=box, truncated=True), share   # a box alone stays a box
    visible = showing(~under, thickness(rule, obj.box))
    if not visible.any():
        return None
    rows, cols = np.flatnonzero(visible.any(axis=1)), np.flatnonzero(visible.any(axis=0))
    x0, y0, x1, y1 = obj.box
    box = (max(x0, float(c0 + cols[0])), max(y0, float(r0 + rows[0])), min(x1, float(c0 + cols[-1] + 1)),
           min(y1, float(r0 + rows[-1] + 1)))
    return dataclasses.replace(obj, box=box, truncated=True), float(visible.mean())


def thick_box(obj: Object, region: tuple, min_size: float, seen: float = 0.0) -> tuple | None:
    """The box of what a canvas left of an object, less the parts thinner than `min_size` (a sliver a crop leaves
    at the canvas' edge narrows to a tip no viewer sees), or None when nothing is at least `min_size` px thick, or,
    for one under the rule (`seen`: Rule.seen), `seen` px. Its shape: its polygons, its RLE mask, or `region` (a box
    alone as its corners went, clipped); an upright box is its own. A side no thin part reaches keeps its exact
    value (the shapes are rasterised at pixel centres only to find the thin parts)."""
    x0, y0, x1, y1 = obj.box
    if min(x1 - x0, y1 - y0) < max(min_size, seen):
        return None
    shape = obj.polygons or (region if region and not _upright(region) else ())
    if not shape and obj.rle is None:
        return obj.box
    c0, r0 = int(np.floor(x0)), int(np.floor(y0))
    h, w = int(np.ceil(y1)) - r0, int(np.ceil(x1)) - c0
    if shape:
        src = rasterise([[(x - c0, y - r0) for x, y in p] for p in shape], h, w) > 0
    else:
        src = rle_decode(obj.rle)[r0:r0 + h, c0:c0 + w] > 0
    if seen and not showing(src, seen).any():
        return None
    raw, thick = mask_extent(src), mask_extent(showing(src, min_size))
    if thick is None:
        return None
    # each side where the thin parts reached further moves in to the thick part's edge (in whole pixels)
    return tuple(float(t + (c0, r0)[k % 2]) if t != r else v for k, (v, r, t) in enumerate(zip(obj.box, raw, thick)))


def _upright(region) -> bool:
    """Whether a box alone's clipped corners are still an upright rectangle (4 corners, 2 distinct x and y)."""
    return len(region) == 1 and len(region[0]) == 4 and len({p[0] for p in region[0]}) == 2 \
        and len({p[1] for p in region[0]}) == 2
