"""Annotations through the same geometry as the pixels.

The steps are augd.engine.plan.Program.geometry(seed, h, w): each Geo step of the image's plan as (3x3 matrix
taking that step's OUTPUT pixel centres to its INPUT pixel centres, out_h, out_w), the numbers the graph warps
with. Boxes (as their 4 corners), polygons and the outline of RLE masks go forward through each step's inverse
and are clipped to that step's canvas before the next (a part warped off the canvas is gone, as its pixels are);
masks are warped by the same matrices with nearest-neighbour sampling. Points are in pixel-edge units
(augd.annotations.model), matrices in pixel-centre units: a point e maps as inverse(m) @ (e - 0.5) + 0.5.

Between steps, a move inside a box (in_boxes' shift, turn, shear or flip: `moves`, as
Program.annotation_plan gives them, each (the number of steps before it, its rectangle, its augd.planar map))
takes what lies inside its rectangle where its pixels go, cut to the rectangle: a polygon's part there moves
(augd.planar.move_shapes), a point there moves or is gone, a mask's window is warped like the pixels. A move is
piecewise (inside the box, and not outside it), so the walk stops at each. TensorFlow-free (NumPy and OpenCV).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from augd.annotations.rle import rle_encode
from augd.lazycv import cv2
from augd.planar import affine, clip_box, move_shapes

__all__ = ["CUT_EPS", "Points", "Step", "apply_map", "area", "as_polygon", "clip_polygon", "corners", "edge9",
           "edge_map", "extent", "forward", "mask_extent", "mirrors", "move_outline", "move_points", "rasterise",
           "rle_encode", "rle_outline", "warp_mask", "warp_moved"]

#: A Geo step: (matrix output centre -> input centre, out_h, out_w), as Program.geometry returns them.
Step = tuple[np.ndarray, float, float]

#: A vertex further than this outside a canvas (px) counts as cut (truncated); closer is rounding noise.
CUT_EPS = 1e-6


def edge_map(m: np.ndarray) -> np.ndarray:
    """The 3x3 map taking a step's INPUT pixel-edge coordinates to its OUTPUT ones: the inverse of m (output
    centres -> input centres) between half-pixel shifts. Affine m is inverted in closed form, so the exact
    flips and identities of the plan give exact coordinates (a flip maps x to w - x, with no rounding)."""
    return np.array(edge9(m)).reshape(3, 3)


def edge9(m) -> tuple:
    """edge_map as 9 Python floats, row-major (what the per-object code reads)."""
    (a, b, tx), (c, d, ty), (g, h, i) = np.asarray(m, np.float64).tolist()
    if g == 0.0 and h == 0.0 and i != 0.0:
        a, b, c, d, tx, ty = a / i, b / i, c / i, d / i, tx / i, ty / i
        det = a * d - b * c
        if det == 0.0:
            raise ValueError(f"a geometry step's matrix is singular: {np.asarray(m).tolist()}")
        ia, ib, ic, id_ = d / det, -b / det, -c / det, a / det
        # x' = inv (x - 0.5) - inv t + 0.5, the constant summed so that integers stay integers
        return (ia, ib, (-(ia * tx + ib * ty) + 0.5) - 0.5 * (ia + ib),
                ic, id_, (-(ic * tx + id_ * ty) + 0.5) - 0.5 * (ic + id_), 0.0, 0.0, 1.0)
    shift = np.array([[1.0, 0.0, 0.5], [0.0, 1.0, 0.5], [0.0, 0.0, 1.0]])
    back = np.array([[1.0, 0.0, -0.5], [0.0, 1.0, -0.5], [0.0, 0.0, 1.0]])
    return tuple((shift @ np.linalg.inv(np.asarray(m, np.float64)) @ back).ravel().tolist())


def apply_map(t: np.ndarray, pts: np.ndarray) -> np.ndarray:
    """Points (N x 2) through the 3x3 map t."""
    if not len(pts):
        return pts
    xy = pts @ t[:2, :2].T + t[:2, 2]
    if t[2, 0] == 0.0 and t[2, 1] == 0.0 and t[2, 2] == 1.0:
        return xy
    wgt = pts @ t[2, :2] + t[2, 2]
    return xy / wgt[:, None]


# Boxes and polygons are a handful of vertices: plain Python floats move and clip them several times faster than
# NumPy calls would (its per-call cost dominates at this size), which keeps annotations cheap beside the pixels.

Points = list[tuple[float, float]]


def _map(t: tuple, pts: Points) -> Points:
    """Points through a 3x3 map given as 9 floats (row-major). Affine maps divide by 1.0: exact."""
    a, b, c, d, e, f, g, h, i = t
    return [((a * x + b * y + c) / (g * x + h * y + i), (d * x + e * y + f) / (g * x + h * y + i)) for x, y in pts]


def clip_polygon(poly: Points, w: float, h: float) -> Points:
    """Sutherland-Hodgman: the polygon clipped to [0, w] x [0, h]; [] when nothing is left. A polygon already
    inside comes back as it is (no arithmetic on its vertices)."""
    return clip_box(poly, 0.0, 0.0, w, h)


def _outside(pts: Points, w: float, h: float) -> bool:
    return any(x < -CUT_EPS or y < -CUT_EPS or x > w + CUT_EPS or y > h + CUT_EPS for x, y in pts)


def extent(polys) -> tuple[float, float, float, float] | None:
    pts = [p for poly in polys for p in poly]
    if not pts:
        return None
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    return float(min(xs)), float(min(ys)), float(max(xs)), float(max(ys))


def area(box) -> float:
    return 0.0 if box is None else max(box[2] - box[0], 0.0) * max(box[3] - box[1], 0.0)


def corners(box) -> Points:
    x0, y0, x1, y1 = (float(v) for v in box)
    return [(x0, y0), (x1, y0), (x1, y1), (x0, y1)]


def as_polygon(shape) -> Points:
    """A cover's shape as a polygon: a rectangle (x0, y0, x1, y1) as its 4 corners, a polygon ((x, y), ...) as it
    is (an op that hides more than rectangles, such as in_boxes' turned corners, says so)."""
    if len(shape) and isinstance(shape[0], (tuple, list)):
        return [(float(x), float(y)) for x, y in shape]
    return corners(shape)


def _inside(pt, shape) -> bool:
    """Whether a point lies in a cover: a rectangle's [x0, x1) x [y0, y1), a polygon (even-odd rule), or a raster
    (HxW bool: its pixel holding the point)."""
    if isinstance(shape, np.ndarray):
        r, c = int(np.floor(pt[1])), int(np.floor(pt[0]))
        return 0 <= r < shape.shape[0] and 0 <= c < shape.shape[1] and bool(shape[r, c])
    if not (len(shape) and isinstance(shape[0], (tuple, list))):
        x0, y0, x1, y1 = shape
        return x0 <= pt[0] < x1 and y0 <= pt[1] < y1
    x, y, hit, pts = pt[0], pt[1], False, list(shape)
    for (ax, ay), (bx, by) in zip(pts, pts[1:] + pts[:1]):
        if (ay <= y) != (by <= y) and x < ax + (y - ay) * (bx - ax) / (by - ay):
            hit = not hit
    return hit


def _at(moves) -> dict:
    """The moves by the number of steps before them, each step's in order."""
    at: dict[int, list] = {}
    for k, rect, t in moves:
        at.setdefault(int(k), []).append((rect, t))
    return at


_IDENTITY9 = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0)


def forward(polys, maps, steps, moves=()) -> tuple[list, list, bool]:
    """(clipped polygons, unclipped polygons, cut?) after every step (and the moves inside boxes between them:
    the unclipped ones moved whole, cut by no box either)."""
    clipped = [[(float(x), float(y)) for x, y in p] for p in polys]
    free = clipped
    cut = False
    at = _at(moves)
    for k in range(len(steps) + 1):
        if k in at:
            clipped, free = move_shapes(clipped, at[k]), move_shapes(free, at[k], clip=False)
        if k == len(steps):
            break
        t, (_, oh, ow) = maps[k], steps[k]
        if k and t == _IDENTITY9 and steps[k - 1][1:] == (oh, ow):
            continue   # a step of ops that did not apply (a policy's ~10 a record): the same points on the same canvas
        free = [_map(t, p) for p in free]
        moved = free if clipped is free else [_map(t, p) for p in clipped]
        if any(_outside(p, ow, oh) for p in moved):
            cut = True
        clipped = [clip_polygon(p, ow, oh) for p in moved]
        if all(a is b for a, b in zip(clipped, moved)):
            clipped = moved          # nothing clipped: the clipped polygons are still the free ones
    return clipped, free, cut


def _in_box(pt, moves, clip: bool = True, turned=None, k: int = 0):
    """A point after moves inside boxes, each in turn: moved where it lies in a move's rectangle (edges included),
    then gone (None) where it leaves it, unless `clip` is False. `turned`: a list to extend with (k, the move's
    index among `moves`) for each mirroring move (a flip inside a box) that took it; `k`: the steps before them."""
    for j, ((x0, y0, x1, y1), t) in enumerate(moves):
        if pt is not None and x0 <= pt[0] <= x1 and y0 <= pt[1] <= y1:
            pt = affine(t, [pt])[0]
            if turned is not None and t[0] * t[4] - t[1] * t[3] < 0:
                turned.append((k, j))
            if clip and not (x0 - CUT_EPS <= pt[0] <= x1 + CUT_EPS and y0 - CUT_EPS <= pt[1] <= y1 + CUT_EPS):
                return None
    return pt


def move_points(points, maps, steps, covers=(), moves=(), mirrored: list | None = None) -> list:
    """Each point after every step, or None once a step's canvas ([0, w] x [0, h], edges included: a flip maps
    0 to w) does not hold it, a move inside a box takes it out of the box, or a cover takes it: cut off, it stays
    gone even if a later step would bring its position back. `covers`: (k, shape): a rectangle (x0, y0, x1, y1), a
    polygon ((x, y), ...) or a raster (an HxW bool array of step k-1's output) overwritten after the first k steps
    (in edge units of step k-1's output, the source's for k = 0), holding the points with x0 <= x < x1, y0 <= y <
    y1 (a rectangle's), or inside it; the moves after the first k steps go before those covers (a cover drawn
    before a move has moved with it: Program.annotation_plan). `mirrored`: a list to extend with, for each point,
    the flips inside a box that took it (the steps before each, its index among theirs), in order."""
    at: dict[int, list] = {}
    for k, rect in covers:
        at.setdefault(k, []).append(rect)
    inside = _at(moves)
    out = []
    for x, y in points:
        pt, turned = (float(x), float(y)), []
        for k in range(len(steps) + 1):
            if k in inside:
                pt = _in_box(pt, inside[k], turned=turned, k=k)
            if pt is None or any(_inside(pt, shape) for shape in at.get(k, ())):
                pt = None
                break
            if k == len(steps):
                break
            (t, (_, oh, ow)) = maps[k], steps[k]
            pt = _map(t, [pt])[0]
            if not (-CUT_EPS <= pt[0] <= ow + CUT_EPS and -CUT_EPS <= pt[1] <= oh + CUT_EPS):
                pt = None
                break
            pt = (min(max(pt[0], 0.0), float(ow)), min(max(pt[1], 0.0), float(oh)))
        out.append(pt)
        if mirrored is not None:
            mirrored.append(tuple(turned))
    return out


def move_outline(pts: np.ndarray, maps, steps, moves=()) -> tuple[np.ndarray, bool]:
    """(points N x 2 through every step and the moves inside boxes between them, none clipped; whether a step's
    canvas would cut them): the whole moved object an RLE mask's outline measures."""
    at, cut = _at(moves), False
    for k in range(len(steps) + 1):
        if k in at and len(pts):
            pts = np.array([_in_box((float(x), float(y)), at[k], clip=False) for x, y in pts.tolist()])
        if k == len(steps):
            break
        (t, (_, oh, ow)) = maps[k], steps[k]
        pts = apply_map(np.array(t).reshape(3, 3), pts)
        cut = cut or bool(len(pts)) and bool((pts.min(axis=0) < -CUT_EPS).any() or pts[:, 0].max() > ow + CUT_EPS
                                             or pts[:, 1].max() > oh + CUT_EPS)
    return pts, cut


def mirrors(steps) -> bool:
    """Whether the steps together mirror the image: their matrices' product has a negative determinant (a
    flip, a transpose; a rotation or a scale never)."""
    det = 1.0
    for m, _, _ in steps:
        (a, b), (c, d) = np.asarray(m, np.float64)[:2, :2].tolist()   # a 2x2: LAPACK's call costs ~5 us, this ~1
        det *= a * d - b * c
    return det < 0.0


def rle_outline(mask: np.ndarray) -> np.ndarray:
    """Points whose extent under any affine map is the mask's: the 4 corners of each row's first and last pixel."""
    rows = np.flatnonzero(mask.any(axis=1))
    if not len(rows):
        return np.zeros((0, 2))
    sub = mask[rows] > 0
    first = sub.argmax(axis=1)
    last = sub.shape[1] - 1 - sub[:, ::-1].argmax(axis=1)
    r = rows.astype(np.float64)
    xs = np.concatenate([first, first, last + 1, last + 1]).astype(np.float64)
    ys = np.concatenate([r, r + 1, r, r + 1])
    return np.stack([xs, ys], axis=1)


def mask_extent(mask: np.ndarray) -> tuple[float, float, float, float] | None:
    rows, cols = np.flatnonzero(mask.any(axis=1)), np.flatnonzero(mask.any(axis=0))
    if not len(rows):
        return None
    return float(cols[0]), float(rows[0]), float(cols[-1] + 1), float(rows[-1] + 1)


def warp_mask(mask: np.ndarray, steps: Sequence[Step], *, fill: int) -> np.ndarray:
    """An HxW uint8 mask through the steps with nearest-neighbour sampling of the pixels' matrices (as
    augd.engine.kernels.warp_np applies them, without its box prefilter: labels are never averaged), `fill` where
    a step reads outside its input. Several steps are sampled once, through all their matrices, and a pixel whose
    read falls off an intermediate canvas gets `fill`: rounding once keeps the mask within half a pixel of the
    pixels' edges (rounding per step drifts by up to a pixel after two warps)."""
    out = np.ascontiguousarray(mask, np.uint8)
    if out.ndim != 2:
        raise ValueError(f"a mask must be HxW; got shape {out.shape}")
    steps = [(np.asarray(m, np.float64), int(round(oh)), int(round(ow))) for m, oh, ow in steps]
    steps = [(m, oh, ow) for k, (m, oh, ow) in enumerate(steps)
             if not (np.array_equal(m, np.eye(3)) and (oh, ow) == (steps[k - 1][1:] if k else out.shape))]
    if not steps:
        return out
    m = steps[0][0]
    for step in steps[1:]:
        m = m @ step[0]                        # the last output's pixel centres -> the source's
    oh, ow = steps[-1][1], steps[-1][2]
    out = _warp_once(out, m, oh, ow, fill)
    # A pixel whose read falls off an intermediate canvas is outside the image, as in the pixels: the part of
    # the output that canvas covers is its rectangle mapped forward, a quadrilateral, filled exactly at centres.
    maps = [edge_map(step[0]) for step in steps] if len(steps) > 1 else []
    t = np.eye(3)
    for k in range(len(steps) - 2, -1, -1):    # canvas k (edge units) -> the last output: the later steps' maps
        t = t @ maps[k + 1]
        _, ch, cw = steps[k]
        quad = apply_map(t, np.array(corners((0.0, 0.0, cw, ch))))
        if not _covers(quad, ow, oh):
            out[rasterise([quad], oh, ow) == 0] = fill
    return out


def warp_moved(mask: np.ndarray, steps: Sequence[Step], moves=(), *, fill: int) -> np.ndarray:
    """warp_mask through the steps with the moves inside boxes between them: the steps between two moves warped at
    once, each move's window warped like its pixels (nearest neighbour), `fill` where it reads outside the box."""
    if not moves:
        return warp_mask(mask, steps, fill=fill)
    out, done = np.array(mask, np.uint8), 0       # its own copy: the moves write into it
    for k, here in sorted(_at(moves).items()):
        if done < k:
            out = warp_mask(out, steps[done:k], fill=fill)
        for rect, t in here:
            _move_window(out, rect, t, fill)
        done = k
    return warp_mask(out, steps[done:], fill=fill)


def _move_window(mask: np.ndarray, rect, t, fill: int) -> None:
    """One box's window of a mask moved in place by a planar map (content at p lands at t(p), pixel edges): each of
    its pixels reads where the inverse takes its centre, as the pixels' own warp does. A window holding only `fill`
    stays as it is (an object's mask far from the box: the usual case)."""
    h, w = mask.shape
    x0, y0 = max(int(round(rect[0])), 0), max(int(round(rect[1])), 0)
    x1, y1 = min(int(round(rect[2])), w), min(int(round(rect[3])), h)
    win = mask[y0:y1, x0:x1]
    if x1 <= x0 or y1 <= y0 or not (win != fill).any():
        return
    a, b, c, d, e, f = t[:6]
    # the window's pixel centres (indices) -> edges, through the inverse map, back to indices
    s = np.array([[1.0, 0.0, x0 + 0.5], [0.0, 1.0, y0 + 0.5], [0.0, 0.0, 1.0]])
    m = np.linalg.inv(s) @ np.linalg.inv(np.array([[a, b, c], [d, e, f], [0.0, 0.0, 1.0]])) @ s
    win[:] = cv2.warpAffine(np.ascontiguousarray(win), m[:2], (x1 - x0, y1 - y0),
                            flags=cv2.INTER_NEAREST | cv2.WARP_INVERSE_MAP, borderMode=cv2.BORDER_CONSTANT,
                            borderValue=fill)


def _covers(quad: np.ndarray, w: float, h: float) -> bool:
    """Whether the convex quadrilateral contains the whole [0, w] x [0, h] canvas."""
    canvas = np.array(corners((0.0, 0.0, w, h)))
    sides = []
    for a, b in zip(quad, np.roll(quad, -1, axis=0)):
        sides.append((b[0] - a[0]) * (canvas[:, 1] - a[1]) - (b[1] - a[1]) * (canvas[:, 0] - a[0]))
    sides = np.array(sides)
    return bool((sides >= 0).all() or (sides <= 0).all())


def _warp_once(mask: np.ndarray, m: np.ndarray, oh: int, ow: int, fill: int) -> np.ndarray:
    flags = cv2.INTER_NEAREST | cv2.WARP_INVERSE_MAP
    if abs(m[2, 0]) < 1e-12 and abs(m[2, 1]) < 1e-12:
        return cv2.warpAffine(mask, m[:2] / m[2, 2], (ow, oh), flags=flags, borderMode=cv2.BORDER_CONSTANT,
                              borderValue=fill)
    return cv2.warpPerspective(mask, m, (ow, oh), flags=flags, borderMode=cv2.BORDER_CONSTANT, borderValue=fill)


def rasterise(polygons, h: int, w: int, out: np.ndarray | None = None, window=None) -> np.ndarray:
    """HxW uint8 0/1: the pixels whose centres lie inside any of the polygons (even-odd rule within each), in
    pixel-edge units. Exact at pixel centres: a box [2, 5] covers columns 2, 3 and 4. Each polygon is worked over
    the rows and columns its extent spans alone (the same arithmetic as over the whole canvas, in the canvas'
    coordinates): a small shape on a large image costs its own size. `window` (c0, r0, c1, r1): only those rows
    and columns of the HxW raster, the same pixels (a box's window costs the box). `out`: the uint8 array to set
    them in (or-ed with what it holds), of the window's shape: several rasters into one without a canvas each."""
    wc0, wr0, wc1, wr1 = window if window is not None else (0, 0, w, h)
    out = np.zeros((wr1 - wr0, wc1 - wc0), np.uint8) if out is None else out
    for poly in polygons:
        p = np.asarray(poly, np.float64).reshape(-1, 2)
        if len(p) < 3 or not np.isfinite(p).all():
            continue
        q = np.roll(p, -1, axis=0)
        upright = (p[:, 0] == q[:, 0]) ^ (p[:, 1] == q[:, 1])   # each edge vertical or horizontal, not a point
        if len(p) == 4 and upright.all() and (p[0, 0] == q[0, 0]) == (p[2, 0] == q[2, 0]) != (p[1, 0] == q[1, 0]):
            # an upright rectangle (boxes, holes, what a box alone covers): its centres' rows and columns, as the
            # crossings below find them
            (c0, r0), (c1, r1) = (np.clip(np.ceil(p.min(axis=0) - 0.5), (wc0, wr0), (wc1, wr1)).astype(int),
                                  np.clip(np.ceil(p.max(axis=0) - 0.5), (wc0, wr0), (wc1, wr1)).astype(int))
            out[r0 - wr0:r1 - wr0, c0 - wc0:c1 - wc0] = 1
            continue
        r0, r1 = max(int(np.floor(p[:, 1].min())) - 1, wr0), min(int(np.ceil(p[:, 1].max())) + 1, wr1)
        c0, c1 = max(int(np.floor(p[:, 0].min())) - 1, wc0), min(int(np.ceil(p[:, 0].max())) + 1, wc1)
        if r1 <= r0 or c1 <= c0:
            continue
        yc = np.arange(r0, r1, dtype=np.float64) + 0.5
        (x0, y0), (x1, y1) = p.T, q.T
        lo, hi = np.minimum(y0, y1), np.maximum(y0, y1)
        hit = (yc[:, None] >= lo) & (yc[:, None] < hi)           # rows x edges, half-open: each vertex once
        r, e = np.nonzero(hit)
        if not len(r):
            continue
        x = x0[e] + (yc[r] - y0[e]) * (x1[e] - x0[e]) / (y1[e] - y0[e])
        col = np.clip(np.ceil(x - 0.5), wc0, wc1).astype(np.int64)   # first pixel whose centre is right of x
        order = np.lexsort((col, r))              # per row, its crossings left to right: inside between pairs
        rows, starts, stops = r[order][0::2], col[order][0::2], col[order][1::2]
        if len(rows) < 2 or (np.diff(rows) > 0).all():   # one span a row (convex shapes): one comparison
            lo, hi = np.full(r1 - r0, wc1), np.full(r1 - r0, wc0)
            lo[rows], hi[rows] = starts, stops
            cols = np.arange(c0, c1)
            out[r0 - wr0:r1 - wr0, c0 - wc0:c1 - wc0] |= ((cols >= lo[:, None]) & (cols < hi[:, None])).view(np.uint8)
        else:
            for row, a, b in zip(rows.tolist(), starts.tolist(), stops.tolist()):
                out[r0 - wr0 + row, a - wc0:b - wc0] = 1
    return out
