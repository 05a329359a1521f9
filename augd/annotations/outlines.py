"""What shows of an object as polygons: the rings a record's polygon keys hold (`annotations: {polygon_keys: true}`,
docs/records.md#polygons), and what an oriented box is refit to (augd.annotations.oriented).

* An object with polygons moved as geometry (every vertex through each step, clipped by each canvas and tile:
  augd.annotations.targets) shows as those rings clipped to its box. The box is the occlusion rule's, trimmed where
  what shows is thinner than min_size, so no ring reaches past its own object's box.
* An object whose polygons a cover cut (occlusion.uncovered keeps what shows as an RLE mask) or that came as an
  RLE mask shows as its mask's outer outline within its box, each pixel a unit square, traced at a quarter pixel
  and simplified within a quarter pixel. A hole a cover makes inside an object is in its mask, not in its rings.
* A box alone has no ring: its box says all there is.

Rings are in pixel-edge units of the output image. TensorFlow-free.
"""
from __future__ import annotations

import math

import numpy as np

from augd.annotations.geometry import clip_polygon
from augd.annotations.model import Object
from augd.annotations.rle import rle_decode
from augd.annotations.shapes import polygon_area
from augd.lazycv import cv2

__all__ = ["Ring", "clipped_rings", "rings", "traced_rings"]

Ring = tuple[tuple[float, float], ...]
#: Pixels traced per side (the outline of the pixels' centres, so a quarter pixel is the most it lies inside the
#: pixels' edges); a window larger than _FINE_MAX pixels is traced at 1 (its half-pixel inset is a tiny share).
_FINE, _FINE_MAX = 4, 1 << 20


def clipped_rings(obj: Object) -> tuple[Ring, ...]:
    """An object's polygons clipped to its box, the rings of 3 vertices or more."""
    x0, y0, x1, y1 = obj.box
    out = []
    for poly in obj.polygons:
        ring = clip_polygon([(px - x0, py - y0) for px, py in poly], x1 - x0, y1 - y0)
        if len(ring) >= 3:
            out.append(tuple((float(x + x0), float(y + y0)) for x, y in ring))
    return tuple(out)


def traced_rings(mask: np.ndarray, box) -> tuple[Ring, ...]:
    """The outer outlines of a 0/1 mask's pixels within `box` (x0, y0, x1, y1: pixel edges), in image pixels."""
    c0, r0 = max(int(math.floor(box[0])), 0), max(int(math.floor(box[1])), 0)
    win = np.ascontiguousarray(mask[r0:int(math.ceil(box[3])), c0:int(math.ceil(box[2]))] > 0, np.uint8)
    if not win.any():
        return ()
    k = _FINE if win.size <= _FINE_MAX else 1
    fine = np.repeat(np.repeat(win, k, axis=0), k, axis=1) if k > 1 else win
    found, _ = cv2.findContours(fine, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
    out = []
    for c in found:
        c = cv2.approxPolyDP(c, 1.0 if k > 1 else 0.25, True).reshape(-1, 2).astype(np.float64)
        if len(c) >= 3:
            out.append(tuple(((x + 0.5) / k + c0, (y + 0.5) / k + r0) for x, y in c.tolist()))
    return tuple(out)


def rings(obj: Object) -> tuple[Ring, ...]:
    """What shows of an object as rings (the module docstring): its clipped polygons, its mask's outline, or ();
    a ring of no area (a polygon clipped to a line) is left out, as the records' readers leave it out."""
    got = clipped_rings(obj) if obj.polygons else traced_rings(rle_decode(obj.rle), obj.box) \
        if obj.rle is not None else ()
    return tuple(r for r in got if polygon_area(r) > 0)
