"""Polygons in the plane, in plain Python floats: what a move inside a rectangle (in_boxes' shift, turn, shear or
flip of one box's pixels) does to a shape. The plan composes its covers with them (augd.engine.plan: what the moves
leave empty) and the annotations move their shapes with them (augd.annotations.geometry), so both read one
definition. A polygon is a list of (x, y) in pixel edges; a rectangle (x0, y0, x1, y1); a move's map 6 floats
(a, b, c, d, e, f: x' = a x + b y + c, y' = d x + e y + f) taking a point inside its rectangle to where its pixel
lands. No NumPy: a shape is a handful of vertices, and plain floats move them faster than array calls would.
"""
from __future__ import annotations

import math

__all__ = ["Move", "affine", "clip_box", "left_empty", "move_shapes", "outline", "polygon_area", "within"]

Point = tuple[float, float]
#: A move inside a rectangle: (the rectangle, its map as 6 floats).
Move = tuple[tuple[float, float, float, float], tuple[float, ...]]

_INF = math.inf


def outline(rect) -> list:
    """A rectangle (x0, y0, x1, y1) as a polygon, clockwise as shown (y down)."""
    x0, y0, x1, y1 = rect
    return [(x0, y0), (x1, y0), (x1, y1), (x0, y1)]


def polygon_area(poly) -> float:
    """The area the closed polygon encloses (shoelace; a self-crossing one's lobes may cancel)."""
    poly = list(poly)
    return abs(sum(p[0] * q[1] - q[0] * p[1] for p, q in zip(poly, poly[1:] + poly[:1]))) / 2.0


def affine(t, poly) -> list:
    """The points through the map t (6 floats)."""
    a, b, c, d, e, f = t[:6]
    return [(a * x + b * y + c, d * x + e * y + f) for x, y in poly]


def within(poly, rect) -> list:
    """A convex polygon clipped to a rectangle (x0, y0, x1, y1)."""
    x0, y0, x1, y1 = rect
    for a, b in (((x0, y1), (x0, y0)), ((x0, y0), (x1, y0)), ((x1, y0), (x1, y1)), ((x1, y1), (x0, y1))):
        poly = _half(poly, a, b, outside=False) if poly else poly
    return poly


def clip_box(poly, x0: float, y0: float, x1: float, y1: float) -> list:
    """Sutherland-Hodgman: any polygon (convex or not) clipped to the box [x0, x1] x [y0, y1], whose bounds may be
    infinite (a half-plane, a strip); [] when nothing is left. A non-convex polygon cut in two comes back as one
    ring whose parts meet along the cut (zero-width bridges: no area, no pixel centre inside)."""
    for axis, bound, upper in ((0, x0, False), (0, x1, True), (1, y0, False), (1, y1, True)):
        if not poly:
            break
        if math.isinf(bound):
            continue
        inside = [(p[axis] <= bound) if upper else (p[axis] >= bound) for p in poly]
        if all(inside):
            continue
        out = []
        prev, prev_in = poly[-1], inside[-1]
        for cur, cur_in in zip(poly, inside):
            if cur_in != prev_in:
                r = (bound - prev[axis]) / (cur[axis] - prev[axis])
                out.append((bound, prev[1] + r * (cur[1] - prev[1])) if axis == 0 else
                           (prev[0] + r * (cur[0] - prev[0]), bound))
            if cur_in:
                out.append(cur)
            prev, prev_in = cur, cur_in
        poly = out
    return poly


def move_shapes(polys, moves, clip: bool = True) -> list:
    """Polygons after moves inside rectangles, each in turn: a polygon's part outside a move's rectangle stays
    where it is (as up to 4 pieces: left of it, right of it, above and below it), its part inside goes where the
    move takes its pixels, cut to the rectangle (what a move takes out of its box is gone, as its pixels are) unless
    `clip` is False (the whole moved shape, had nothing cut it). A polygon clear of a rectangle stays as it is."""
    out = [list(p) for p in polys]
    for rect, t in moves:
        x0, y0, x1, y1 = rect
        nxt = []
        for poly in out:
            xs, ys = [p[0] for p in poly], [p[1] for p in poly]
            if not poly or max(xs) <= x0 or min(xs) >= x1 or max(ys) <= y0 or min(ys) >= y1:
                nxt.append(poly)
                continue
            inside = clip_box(poly, x0, y0, x1, y1)
            if not (min(xs) >= x0 and max(xs) <= x1 and min(ys) >= y0 and max(ys) <= y1):
                for box in ((-_INF, -_INF, x0, _INF), (x1, -_INF, _INF, _INF), (x0, -_INF, x1, y0),
                            (x0, y1, x1, _INF)):
                    piece = clip_box(poly, *box)
                    if len(piece) >= 3 and polygon_area(piece) > 0.0:
                        nxt.append(piece)
            moved = affine(t, inside) if len(inside) >= 3 else []
            moved = clip_box(moved, x0, y0, x1, y1) if clip and moved else moved
            if len(moved) >= 3 and polygon_area(moved) > 0.0:
                nxt.append(moved)
        out = nxt
    return out


def left_empty(rect, kept) -> list:
    """What of a box (x0, y0, x1, y1) the convex polygon `kept` (its content, where moves left it) does not cover,
    as convex polygons: the box clipped by the outside of each edge of `kept` in turn."""
    box = outline(rect)
    if len(kept) < 3 or polygon_area(kept) <= 1e-9:
        return [tuple(box)]
    kept = list(kept)
    if sum(p[0] * q[1] - q[0] * p[1] for p, q in zip(kept, kept[1:] + kept[:1])) < 0:
        kept.reverse()   # clockwise on screen (y down) like the box, so "inside" is on the same side of each edge
    rest, out = box, []
    for a, b in zip(kept, kept[1:] + kept[:1]):
        if abs(b[0] - a[0]) + abs(b[1] - a[1]) < 1e-9:
            continue   # a vertex twice (clipping repeats a corner it passes through): no edge
        piece = _half(rest, a, b, outside=True)
        if len(piece) >= 3 and polygon_area(piece) > 1e-6:
            out.append(tuple(piece))
        rest = _half(rest, a, b, outside=False)
    return out


def _half(poly, a, b, outside: bool) -> list:
    """A convex polygon clipped to one side of the line through a and b (Sutherland-Hodgman): the side where
    the box's own edges keep their inside (the cross product of (b - a) and (p - a) >= 0), or the other with
    `outside`."""
    def side(p):
        v = (b[0] - a[0]) * (p[1] - a[1]) - (b[1] - a[1]) * (p[0] - a[0])
        return -v if outside else v
    out = []
    for p, q in zip(poly, poly[1:] + poly[:1]):
        sp, sq = side(p), side(q)
        if sp >= 0:
            out.append(p)
        if (sp >= 0) != (sq >= 0):
            t = sp / (sp - sq)
            out.append((p[0] + t * (q[0] - p[0]), p[1] + t * (q[1] - p[1])))
    return out
