"""An oriented box in the records: the minimum-area rectangle of what shows of an oriented object.

An oriented object (Object.oriented: DOTA's and YOLO-OBB's corners, a tool's rotated rectangle) moves as the
polygon of its 4 corners, vertex by vertex, through every step (augd.annotations.targets), so what it becomes is
exact: a rectangle through flips, quarter turns, rotations and scales, a parallelogram through a shear, a
quadrilateral through a perspective warp, cut where a canvas, a cover or a tile's border cuts it. Its oriented box
is then refit by one rule, the one torchvision uses for a box an op has bent: the minimum-area rectangle
(cv2.minAreaRect) of what shows of the shape. For a rectangle nothing cuts that is the moved rectangle itself.
What shows is the occlusion rule's (augd.annotations.occlusion): the clipped polygon within the object's box (the
box is trimmed to where what shows is thick enough to count), or, where covers took pixels off it, its visible
pixels (each pixel a unit square) within the box.

The corners are written clockwise as the image is shown (y down), the top-most first (of two at the same height,
the left one): the order of an upright box's top-left, top-right, bottom-right, bottom-left. TensorFlow-free.
"""
from __future__ import annotations

import math

import numpy as np

from augd.annotations.geometry import corners
from augd.annotations.model import Object
from augd.annotations.outlines import clipped_rings
from augd.annotations.rle import rle_decode
from augd.lazycv import cv2

__all__ = ["Corners", "min_area_rect", "oriented_corners", "raster_rect"]

#: 4 corners (x, y) in pixel-edge units, clockwise as shown, the top-most first.
Corners = tuple[tuple[float, float], ...]
#: Two corners closer in height than this (px) are at the same height (the left one is first).
_LEVEL = 1e-6


def _ordered(pts) -> Corners:
    """The 4 corners of a rectangle clockwise as shown (y down: increasing atan2 about the centre), the top-most
    first."""
    cx, cy = sum(p[0] for p in pts) / 4, sum(p[1] for p in pts) / 4
    ring = sorted(pts, key=lambda p: math.atan2(p[1] - cy, p[0] - cx))
    first = min(range(4), key=lambda k: (round(ring[k][1] / _LEVEL), ring[k][0]))
    return tuple((float(ring[(first + k) % 4][0]), float(ring[(first + k) % 4][1])) for k in range(4))


def min_area_rect(points) -> Corners | None:
    """The minimum-area rectangle holding the points (x, y) (pixel-edge units), as its ordered corners; None for no
    point."""
    if len(points) == 0:
        return None
    pts = np.asarray(points, np.float64).reshape(-1, 2)
    origin = pts.min(axis=0)       # minAreaRect works in float32: near the origin, its rounding is well under a pixel
    rect = cv2.minAreaRect((pts - origin).astype(np.float32))
    return _ordered([tuple(p) for p in (cv2.boxPoints(rect).astype(np.float64) + origin)])


def raster_rect(mask: np.ndarray, offset=(0, 0)) -> Corners | None:
    """The minimum-area rectangle of a 0/1 mask's pixels, each the unit square it covers (so that it agrees with a
    polygon's in pixel-edge units); `offset`: the mask's top-left (x, y) in the image. None for an empty mask."""
    found, _ = cv2.findContours(np.ascontiguousarray(mask, np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
    if not found:
        return None
    centres = np.concatenate([c.reshape(-1, 2) for c in found]).astype(np.float64) + offset
    squares = (centres[:, None, :] + np.array([(0, 0), (1, 0), (0, 1), (1, 1)], np.float64)).reshape(-1, 2)
    return min_area_rect(squares)


def oriented_corners(obj: Object) -> Corners:
    """An object's oriented box in the output (its coordinates): an oriented object's minimum-area rectangle of
    what shows (the module docstring), any other object's box as its 4 corners (an upright oriented box)."""
    x0, y0, x1, y1 = obj.box
    if obj.oriented and obj.polygons:
        got = min_area_rect([p for ring in clipped_rings(obj) for p in ring])
    elif obj.oriented and obj.rle is not None:
        c0, r0 = max(int(math.floor(x0)), 0), max(int(math.floor(y0)), 0)
        got = raster_rect(rle_decode(obj.rle)[r0:int(math.ceil(y1)), c0:int(math.ceil(x1))], (c0, r0))
    else:
        got = None
    return got or _ordered(corners(obj.box))
