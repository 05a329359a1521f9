"""The shapes annotation tools draw, as augd's objects: an axis-aligned rectangle is a box, a polygon a polygon (its
box the points' extent), and an oriented box (DOTA's and YOLO-OBB's 4 corners, LabelMe's `rotation` shape, CVAT's
`box` with a `rotation`, Label Studio's rectangle with a `rotation`) an oriented object (oriented_object): its exact
4 corners are its polygon, which augd moves vertex by vertex, clips to the canvas and writes as an instance mask with
the box of what shows, and its record adds the minimum-area rectangle of what shows (augd.annotations.oriented).
The corners are computed here and only here.

Image coordinates: x right, y down, pixel-edge units (augd.annotations.model); a rotation of +θ degrees turns
clockwise as the image is shown (CVAT's and Label Studio's sense). TensorFlow-free.
"""
from __future__ import annotations

import dataclasses
import math

from augd.annotations.model import AnnotationError, Object, Polygon
from augd.planar import polygon_area

__all__ = ["box_object", "oriented_object", "polygon_area", "polygon_object", "refused_shape", "rotated_corners"]


def rotated_corners(x0: float, y0: float, x1: float, y1: float, degrees: float, about: str = "centre") -> Polygon:
    """The 4 corners (top-left, top-right, bottom-right, bottom-left before turning) of the rectangle x0..x1 x
    y0..y1 turned `degrees` clockwise about its centre (CVAT) or about its top-left corner (`about="corner"`: Label
    Studio's results)."""
    cx, cy = ((x0 + x1) / 2, (y0 + y1) / 2) if about == "centre" else (x0, y0)
    c, s = math.cos(math.radians(degrees)), math.sin(math.radians(degrees))
    # y points down, so the usual rotation matrix turns clockwise on screen
    return tuple((cx + (x - cx) * c - (y - cy) * s, cy + (x - cx) * s + (y - cy) * c)
                 for x, y in ((x0, y0), (x1, y0), (x1, y1), (x0, y1)))


def polygon_object(name: str, points, at: str, what: str = "polygon", difficult: bool = False) -> Object:
    """An object whose shape is the polygon `points` ((x, y), ... in pixel-edge units; at least 3): its box is
    their extent. `what` names the shape in messages ("rotated box"); AnnotationError, naming `at`, when it
    encloses no area."""
    points = tuple((float(x), float(y)) for x, y in points)
    if len(points) < 3:
        raise AnnotationError(f"{at}: a {what} of {len(points)} point(s); it needs at least 3")
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    box = (min(xs), min(ys), max(xs), max(ys))
    if box[2] <= box[0] or box[3] <= box[1] or polygon_area(points) <= 0:
        raise AnnotationError(f"{at}: the {what} {_shown(points)} encloses no area")
    return Object(name=name, box=box, polygons=(points,), difficult=difficult)


def oriented_object(name: str, corners, at: str, what: str = "oriented box", difficult: bool = False) -> Object:
    """An oriented box given by its 4 corners (pixel-edge units, in the tool's order): a polygon_object marked
    oriented. A quadrilateral that is no exact rectangle (DOTA's hand-drawn corners) is kept as drawn: its oriented
    box in the records is the minimum-area rectangle of what shows of it."""
    if len(corners) != 4:
        raise AnnotationError(f"{at}: an {what} of {len(corners)} point(s); it has 4 corners")
    return dataclasses.replace(polygon_object(name, corners, at, what, difficult), oriented=True)


def box_object(name: str, x0: float, y0: float, x1: float, y1: float, at: str, difficult: bool = False) -> Object:
    """An axis-aligned box (pixel-edge units); AnnotationError when x1 < x0 or y1 < y0 (an empty box, x1 == x0,
    is left to the checks against the image: annotations.repair drops it)."""
    if x1 < x0 or y1 < y0:
        raise AnnotationError(f"{at}: the rectangle ({x0:g}, {y0:g}) to ({x1:g}, {y1:g}) is inverted: its right or "
                              f"bottom edge lies before its left or top")
    return Object(name=name, box=(x0, y0, x1, y1), difficult=difficult)


def refused_shape(at: str, kind: str, tool: str, hint: str = "") -> AnnotationError:
    """Why a shape augd cannot carry as an object rejects its image (never dropped in silence); `hint`: what the
    user can do in this tool."""
    if kind in ("point", "points", "keypoint", "keypointlabels"):
        why = ("a point is no object; augd reads keypoints only as points of an object (COCO person keypoints, YOLO "
               "pose, LabelMe and CVAT points grouped with their shape, CVAT skeletons, Label Studio keypoints "
               "related to their region): " + (hint or "export them so, or remove the points"))
    else:
        why = "augd reads rectangles, rotated rectangles and polygons of it: convert or remove this shape"
    return AnnotationError(f"{at}: a {kind} shape; {why} ({tool})")


def _shown(points) -> str:
    text = ", ".join(f"({x:g}, {y:g})" for x, y in points[:6])
    return f"[{text}{', ...' if len(points) > 6 else ''}]"
