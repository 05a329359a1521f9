"""The per-image plan: every random decision of an image, drawn in NumPy before a pixel is touched.

`Program(nodes)` flattens the chain once per job into static steps, the shape the graph is built from:

  Geo      consecutive GeometryOps with one border rule -> one matrix, ONE warp
  Colour   consecutive ColourOps                         -> one pass (one OpenCV call on CPU hosts)
  Seeded   a SeededOp (pixel ops, per-pixel noise)       -> graph code fed a stateless seed

Composites are flattened too: each leaf is gated by its composite's choice, so a one_of of two flips
stays inside its neighbours' warp. `Program.plan(seed, h, w, crop, boxes)` returns the per-image values of
every step as two flat arrays (floats, ints), laid out at compile time; the steps and the constants
below name every slot. Drawing here instead of in graph ops keeps the graph small and the draws a pure
function of the seed.

When the chain starts with geometry and the source is a JPEG in its stored orientation, the plan also
picks the decode window and DCT scale (see augd.engine.decode): the leading warp then reads only the
pixels it needs, decoded at the coarsest scale that keeps one decoded pixel per output pixel.

Box-aware ops (GeometryOp.uses_boxes: random_crop with min_object_covered) draw from the image's boxes too: the
plan moves the source boxes through the matrices of the ops before them, so the graph's plan and the
annotations' geometry (both given the same boxes) draw the same windows. A chain without such an op never
looks at boxes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from augd.engine.kernels import box_shrink_matrix
from augd.ops import REGISTRY, ColourOp, CompositeOp, GeometryOp, Op, PartnerOp, SeededOp
from augd.ops.base import Fill, Interpolation
from augd.ops.sampling import coin, generator, tf_seed
from augd.planar import affine, left_empty, move_shapes, outline, within
from augd.schema import OpNode

__all__ = ["AnnotationPlan", "Colour", "ColourSlot", "Geo", "Program", "Seeded", "DECODE_MODE",
           "DECODE_RATIOS", "SOURCE_SIZE", "WINDOW", "IDENTITY", "FLIP_X", "FLIP_Y", "FLIP_XY", "GENERAL"]

#: DCT scale denominators libjpeg decodes at.
DECODE_RATIOS = (1, 2, 4, 8)
#: Geo step codes: what the warp amounts to for this image (identity and flips are exact, no resampling).
IDENTITY, FLIP_X, FLIP_Y, FLIP_XY, GENERAL = range(5)

# ---- the plan's layout: the only place that knows where a value lives ----
#: ints[DECODE_MODE]: 0 decodes the whole image; k > 0 only the WINDOW, at DCT scale 1/DECODE_RATIOS[k - 1].
DECODE_MODE = 0
#: ints[WINDOW]: the decode window's y, x, height, width, in DCT-scaled pixels.
WINDOW = slice(1, 5)
#: ints[SOURCE_SIZE]: the source height and width the plan was made for (the graph re-plans if the decoded
#: image differs).
SOURCE_SIZE = slice(5, 7)
_HEADER_INTS = 7


@dataclass(frozen=True)
class Geo:
    """Consecutive GeometryOps with one border rule: one matrix, one warp."""
    fill: Fill            # the ops' GeometryOp.fill
    interp: Interpolation  # their GeometryOp.interpolation
    matrix: slice         # floats: the 3x3 matrix (output -> input pixels), row-major
    out_h: int            # floats: the output height
    out_w: int            # floats: the output width (at out_h + 1)
    code: int             # ints: IDENTITY .. GENERAL

    @classmethod
    def at(cls, f: int, i: int, fill: Fill, interp: Interpolation) -> tuple[Geo, int, int]:
        """The step whose floats start at f and ints at i, and the floats and ints it takes."""
        return cls(fill, interp, slice(f, f + 9), f + 9, f + 10, i), 11, 1

    @property
    def size(self) -> slice:
        """floats: (out_h, out_w), for graph code that reads both at once."""
        return slice(self.out_h, self.out_w + 1)


class ColourSlot(NamedTuple):
    """One op of a Colour step (a tuple: the per-image loops unpack it)."""
    op: ColourOp
    params: slice         # floats: what op.draw() returned
    on: int               # ints: whether the op applies to this image


@dataclass
class Colour:
    """Consecutive ColourOps: one pass over the image."""
    ops: list[ColourSlot] = field(default_factory=list)


@dataclass(frozen=True)
class Seeded:
    """One SeededOp: graph code fed its on-flag and a stateless seed (and, for an op that covers a rectangle,
    the rectangle drawn here)."""
    op: SeededOp
    on: int               # ints: whether the op applies to this image
    seed: slice           # ints: its stateless seed (two words)
    region: slice | None = None   # floats: x0, y0, x1, y1 of each rectangle it covers (SeededOp.covers), else None
    geo_before: int = 0   # how many Geo steps come before it: where its rectangle lies among the warps

    @classmethod
    def at(cls, i: int, f: int, op: SeededOp, geo_before: int) -> tuple[Seeded, int, int]:
        """The step whose ints start at i and floats at f, and the ints and floats it takes."""
        n = op.region_size() if op.covers or op.uses_boxes else 0
        return cls(op, i, slice(i + 1, i + 3), slice(f, f + n) if n else None, geo_before), 3, n


@dataclass
class _Leaf:
    p: float
    node: OpNode
    op: Op
    step: int = -1                              # index of its step in Program.steps (composites: none)
    slot: ColourSlot | Seeded | None = None     # where a colour or seeded op's values go
    children: list = field(default_factory=list)
    #: the numbers it and everything under it take from the generator for an image it does not apply to, its coin
    #: included (None: not the same for every image size: the walk then draws them); see Program._skips
    off: int | None = None
    geo_steps: tuple = ()                       # the Geo steps of its leaves, made (as identity) where it is skipped
    geo_index: int = 0                          # a geometric op's: how many Geo steps come before its own


class Program:
    """A chain flattened into steps, and the per-image planner that fills in their values."""

    def __init__(self, nodes):
        nodes = list(nodes)
        #: a leading PartnerOp (mosaic, mixup, cutmix) with p > 0, or None. It is not a step: the job draws its
        #: partners and lays out the canvas (augd/job/mixing.py) that the steps below then run on.
        self.mix: PartnerOp | None = None
        if nodes and issubclass(REGISTRY[nodes[0].name], PartnerOp):
            node = nodes.pop(0)
            self.mix = REGISTRY[node.name](node.params) if node.params.p > 0 else None
        self.steps: list[Geo | Colour | Seeded] = []
        self.n_floats, self.n_ints = 0, _HEADER_INTS
        self.tree = [leaf for n in nodes if (leaf := self._add(n)) is not None]
        self._skips()
        self.leads_with_geometry = bool(self.steps) and isinstance(self.steps[0], Geo)
        #: some op draws from the image's boxes: plan() then needs them (detection jobs pass them)
        self.uses_boxes = any(isinstance(leaf.op, (GeometryOp, SeededOp)) and leaf.op.uses_boxes
                              for leaf in _leaves(self.tree))

    def _add(self, node: OpNode) -> _Leaf | None:
        """The one dispatch on an op's contract: where its per-image values live and which step runs it."""
        if node.params.p <= 0.0:
            return None  # p=0 is the identity: nothing is planned or traced
        last = self.steps[-1] if self.steps else None
        op = REGISTRY[node.name](node.params)
        leaf = _Leaf(p=node.params.p, node=node, op=op)
        if isinstance(op, CompositeOp):
            leaf.children = [self._add(c) for c in node.children]
            return leaf
        if isinstance(op, GeometryOp):
            if op.starts_warp or not (isinstance(last, Geo) and (repr(last.fill), last.interp) ==
                                      (repr(op.fill), op.interpolation)):
                step, nf, ni = Geo.at(self.n_floats, self.n_ints, op.fill, op.interpolation)
                self.steps.append(step)
                self.n_floats += nf
                self.n_ints += ni
            leaf.geo_index = sum(isinstance(s, Geo) for s in self.steps) - 1
        elif isinstance(op, ColourOp):
            if not isinstance(last, Colour):
                self.steps.append(Colour())
            leaf.slot = ColourSlot(op, slice(self.n_floats, self.n_floats + op.n_params), self.n_ints)
            self.steps[-1].ops.append(leaf.slot)
            self.n_floats += op.n_params
            self.n_ints += 1
        elif isinstance(op, PartnerOp):
            raise TypeError(f"op {node.name!r} combines images: it must lead the chain (the spec checks this)")
        elif isinstance(op, SeededOp):
            leaf.slot, ni, nf = Seeded.at(self.n_ints, self.n_floats, op, sum(isinstance(s, Geo) for s in self.steps))
            self.steps.append(leaf.slot)
            self.n_ints += ni
            self.n_floats += nf
        else:
            raise TypeError(f"op {node.name!r} has no contract the engine knows: {type(op).__mro__}")
        leaf.step = len(self.steps) - 1
        return leaf

    def _skips(self) -> None:
        """Each node's `off`: a policy walks ~40 ops an image to apply 2, each drawing its numbers (~8 us); one that
        does not apply, with everything under it, then takes its count from the generator at once and writes
        nothing (an op off is read by no kernel, no cover and no annotation). The count is the walk's own, off, over
        _PROBES: one that differs (an op whose draws follow the image, against the rule of Op.skip) keeps drawing."""
        def count(leaf, seed, size):
            rng = generator(seed)
            self._walk((leaf,), False, rng, np.zeros(self.n_floats), np.zeros(self.n_ints, np.int64), {}, list(size))
            return rng._n
        leaves = list(_leaves(self.tree))
        counts = [{count(leaf, seed, size) for seed, size in _PROBES} for leaf in leaves]   # before any is used
        for leaf, got in zip(leaves, counts):
            leaf.off = got.pop() if len(got) == 1 else None
            leaf.geo_steps = tuple(sorted({x.step for x in _leaves([leaf])
                                           if not x.children and isinstance(self.steps[x.step], Geo)}))

    # ---- per image ----

    def plan(self, seed, h, w, crop=False, boxes=None, geometry: list | None = None,
             covers: list | None = None, floor: list | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(floats, ints) for one image of size (h, w). crop: the source is a JPEG whose leading warp may
        decode only its window (augd.engine.decode). boxes: the image's boxes, (xmin, ymin, xmax, ymax) in
        source pixel edges, for box-aware ops (None, or a chain without one: they draw as without boxes).
        geometry: a list to extend with what geometry() returns for the same draw, in the SOURCE's coordinates
        (taken before crop rewrites step 0 into the decode window's), so a caller that plans the graph's image
        also has its annotations' steps without drawing the plan again (None: not built, nothing paid).
        covers: a list to extend with what covers() returns for the same draw; floor: a list to extend with the
        draw's own least visibility, its keypoint events and its moves inside boxes (annotation_plan's third, fourth
        and fifth; the moves only where `covers` is asked for too)."""
        rng = generator(seed)
        floats = np.zeros(self.n_floats, np.float64)
        ints = np.zeros(self.n_ints, np.int64)
        geo: dict[int, list] = {}                 # step -> [matrix, in_h, in_w, out_h, out_w]
        size, least = [float(h), float(w), float(h), float(w)], [0.0, []]   # the op's input's (h, w), the source's
        self._walk(self.tree, True, rng, floats, ints, geo, size, self._tracked(boxes, h, w), least)
        ints[WINDOW] = (0, 0, h, w)               # whole image (DECODE_MODE 0), full scale
        ints[SOURCE_SIZE] = (h, w)
        if geometry is not None:   # geometry()'s steps: each Geo step in order, sizes rounded as the graph does
            geometry.extend((geo[k][0].copy(), float(round(geo[k][3])), float(round(geo[k][4])))
                            for k in sorted(geo))
        inside = self._covers(floats, ints, covers) if covers is not None else ()
        if floor is not None:
            floor.extend((least[0], tuple(least[1]), tuple(inside)))
        for k, (m, ih, iw, oh, ow) in geo.items():
            step = self.steps[k]
            if k == 0 and crop:
                m, ih, iw = self._window(m, ih, iw, oh, ow, step.fill, ints)
            floats[step.matrix] = m.ravel()
            floats[step.size] = oh, ow
            ints[step.code] = _classify(m, ih, iw, oh, ow)
        return floats, ints

    def _covers(self, floats, ints, covers: list) -> list:
        """Extends `covers` with what the applied seeded ops overwrite, and returns their moves inside rectangles in
        order, as (the number of Geo steps before it, rectangle, map): annotation_plan's fifth. Each move takes the
        covers of its Geo step drawn before it where it takes their pixels (a hole, an earlier move's grey: even
        another box's, where boxes overlap), then greys what it leaves empty of its own rectangle; so the covers of
        a step are what shows grey after all its moves (a shift there and back greys only the far strip)."""
        start, inside = len(covers), []
        for s in self.steps:
            if not (isinstance(s, Seeded) and s.region is not None and ints[s.on]):
                continue
            values = floats[s.region]
            covers.extend((s.geo_before, r) for r in s.op.hidden(values))
            for rect, t in s.op.moves(values):
                inside.append((s.geo_before, rect, t))
                covers[start:] = [got for k, c in covers[start:] for got in _moved_cover(k, c, s.geo_before, rect, t)]
                covers.extend((s.geo_before, piece) for piece in left_empty(rect, within(affine(t, outline(rect)),
                                                                                           rect)))
        return inside

    def geometry(self, seed, h, w, boxes=None) -> list[tuple[np.ndarray, float, float]]:
        """Every Geo step of plan(seed, h, w, boxes=boxes) in order, as (3x3 matrix taking the step's OUTPUT pixel
        centres to its INPUT pixel centres, out_h, out_w), in the source's coordinates (no decode window). Read
        from the plan's own arrays, so annotations (augd.annotations.geometry) move by the numbers the graph
        warps with; sizes are rounded as the graph rounds them. Pass the boxes the graph's plan was given."""
        out: list = []
        self.plan(seed, h, w, False, boxes, out)
        return out

    def covers(self, seed, h, w, boxes=None) -> list[tuple[int, tuple]]:
        """The rectangles of plan(seed, h, w, boxes=boxes) that ops covering one (cutout) overwrite, as (the
        number of geometry() steps before it, (x0, y0, x1, y1) in pixel edges of that step's output: the
        source's when 0)."""
        out: list = []
        self.plan(seed, h, w, False, boxes, None, out)
        return out

    def annotation_plan(self, seed, h, w, boxes=None) -> "AnnotationPlan":
        """(geometry(), covers(), the highest own min_visibility of the geometric ops it applied: a crop's overlap
        threshold, GeometryOp.min_visibility, 0.0 for none; its keypoint events: ("mirror" or "turn" (a quarter
        turn), the number of geometry() steps before the one that made it) in the order its ops applied them; its
        moves inside boxes in order, each (the number of geometry() steps before it, its rectangle, its augd.planar
        map)) of one draw of plan(seed, h, w, boxes=boxes). The job drops objects under the higher of that
        min_visibility and its annotations.min_visibility."""
        steps: list = []
        covers: list = []
        floor: list = []
        self.plan(seed, h, w, False, boxes, steps, covers, floor)
        return AnnotationPlan(steps, covers, floor[0], floor[1], floor[2])

    @property
    def has_covers(self) -> bool:
        return any(isinstance(s, Seeded) and s.region is not None for s in self.steps)

    def _tracked(self, boxes, h, w) -> list | None:
        """The one-item holder of the boxes the walk moves along (None: no box-aware op, or no boxes)."""
        if not self.uses_boxes or boxes is None:
            return None
        b = np.asarray(boxes, np.float64).reshape(-1, 4)
        return [_clip(b, float(h), float(w))]

    def _walk(self, leaves, active, rng, floats, ints, geo, size, boxes=None, least=None) -> None:
        for leaf in leaves:
            if leaf is None:
                continue
            on = coin(rng, leaf.p) and active   # its draws are taken whether or not it applies (skipped: at once)
            if not on and leaf.off is not None:
                rng.advance(leaf.off - 1)
                for k in leaf.geo_steps:   # a Geo step its ops all skipped is still a step, the identity
                    if k not in geo:
                        geo[k] = [np.eye(3), size[0], size[1], size[0], size[1]]
                continue
            if leaf.children:
                for child, chosen in zip(leaf.children, leaf.op.choose(rng, len(leaf.children))):
                    self._walk((child,), on and chosen, rng, floats, ints, geo, size, boxes, least)
                continue
            step = self.steps[leaf.step]
            if isinstance(step, Geo):
                g = geo.get(leaf.step)
                if g is None:   # not setdefault: its default, made for every op drawn, cost ~1 us each
                    g = geo[leaf.step] = [np.eye(3), size[0], size[1], size[0], size[1]]
                if not on:
                    _sample(leaf.op, rng, size, None, skip=True)
                    continue
                m, oh, ow = _sample(leaf.op, rng, size, boxes[0] if boxes is not None else None)
                g[0] = g[0] @ m
                if least is not None:
                    least[0] = max(least[0], leaf.op.min_visibility)
                    mirror = m[0, 0] * m[1, 1] < m[0, 1] * m[1, 0]   # a negative determinant
                    if leaf.op.quarter_turn or mirror:   # kept in order: flips and turns need not commute
                        least[1].append(("turn" if leaf.op.quarter_turn else "mirror", leaf.geo_index))
                size[0], size[1] = g[3], g[4] = float(oh), float(ow)
                if boxes is not None:
                    boxes[0] = _moved(boxes[0], m, size[0], size[1])
            elif isinstance(step, Colour):
                slot = leaf.slot
                floats[slot.params] = leaf.op.draw(rng)
                ints[slot.on] = on
            else:
                ints[step.on] = on
                ints[step.seed] = tf_seed(rng)
                if step.region is not None:   # drawn for the canvas the graph's op will see
                    floats[step.region] = _region(leaf.op, rng, size, boxes, on)

    @staticmethod
    def _window(m, h, w, oh, ow, fill, ints):
        """Decode only the source window the leading warp reads, at the coarsest DCT scale that keeps at
        least one decoded pixel per output pixel. Writes ints[DECODE_MODE] and ints[WINDOW]; returns the
        matrix in the decoded window's coordinates and the window's size."""
        scale = min(math.hypot(m[0, 0], m[1, 0]), math.hypot(m[0, 1], m[1, 1]))
        ridx = sum(1 for r in DECODE_RATIOS[1:] if r <= scale)
        r = DECODE_RATIOS[ridx]
        corners = m @ np.array([[-0.5, ow - 0.5, -0.5, ow - 0.5], [-0.5, -0.5, oh - 0.5, oh - 0.5], [1, 1, 1, 1]])
        px, py = corners[0] / corners[2], corners[1] / corners[2]
        x0, y0, x1, y1 = px.min(), py.min(), px.max(), py.max()
        inside = x0 >= 0.0 and y0 >= 0.0 and x1 <= w - 1.0 and y1 <= h - 1.0
        if not isinstance(fill, int) and not inside:
            x0, y0, x1, y1 = 0.0, 0.0, w, h   # reflect / wrap / nearest need the image's own edges
        # Window in decoded (1/r scale) pixels, clamped, with a margin for the bilinear taps of the warp,
        # which may itself box-shrink the window by k = floor(scale / r) first (a tap then spans k pixels).
        pad = 1.0 + max(1, math.floor(scale / r))
        sh, sw = math.ceil(h / r), math.ceil(w / r)
        u0 = min(max(math.floor((x0 + 0.5) / r - 0.5) - pad, 0.0), sw - 1.0)
        v0 = min(max(math.floor((y0 + 0.5) / r - 0.5) - pad, 0.0), sh - 1.0)
        u1 = min(max(math.ceil((x1 + 0.5) / r - 0.5) + pad + 1.0, u0 + 1.0), sw)
        v1 = min(max(math.ceil((y1 + 0.5) / r - 0.5) + pad + 1.0, v0 + 1.0), sh)
        whole = ridx == 0 and (v0, u0, v1, u1) == (0.0, 0.0, sh, sw)
        ints[DECODE_MODE] = 0 if whole else ridx + 1
        ints[WINDOW] = (v0, u0, v1 - v0, u1 - u0)
        # A DCT-scaled decode samples like a box shrink by r.
        return box_shrink_matrix(r, u0, v0) @ m, v1 - v0, u1 - u0


#: the (seed, [h, w, source h, source w]) an op's count of numbers is taken at, off (Program._skips): sizes wide,
#: tall, square, one pixel, and a canvas other than its source
_PROBES = (((1, 2), (64.0, 96.0, 64.0, 96.0)), ((3, 4), (1531.0, 977.0, 800.0, 1200.0)), ((5, 6), (1.0, 1.0, 1.0, 1.0)),
           ((7, 8), (333.0, 333.0, 4000.0, 3000.0)))


def _leaves(tree):
    for leaf in tree:
        if leaf is not None:
            yield leaf
            yield from _leaves(leaf.children)


def _sample(op: GeometryOp, rng, size, boxes, skip: bool = False):
    """op.sample for the current (h, w) (size: [h, w, source h, source w]); a box-aware op also gets the boxes
    (None where it does not apply), one sized by the source the source's size. skip: op.skip, its draws alone."""
    extra = {"boxes": boxes} if op.uses_boxes else {}
    if op.uses_source:
        extra["source"] = (size[2], size[3])
    return (op.skip if skip else op.sample)(rng, size[0], size[1], **extra)


def _region(op: SeededOp, rng, size, boxes, on: bool):
    """op.region for the current (h, w); an op acting inside boxes also gets them (None where it does not apply)."""
    extra = {"boxes": boxes[0] if on and boxes is not None else None} if op.uses_boxes else {}
    return op.region(rng, int(round(size[0])), int(round(size[1])), **extra)


def _clip(boxes: np.ndarray, h: float, w: float) -> np.ndarray:
    """Boxes clipped to an (h, w) image, the empty ones dropped."""
    b = np.column_stack([np.clip(boxes[:, 0], 0, w), np.clip(boxes[:, 1], 0, h),
                         np.clip(boxes[:, 2], 0, w), np.clip(boxes[:, 3], 0, h)])
    return b[(b[:, 2] > b[:, 0]) & (b[:, 3] > b[:, 1])]


def _moved(boxes: np.ndarray, m: np.ndarray, oh: float, ow: float) -> np.ndarray:
    """Pixel-edge boxes of an op's input -> its (oh, ow) output: the axis-aligned extent of their corners
    through the inverse of m (m takes output pixel centres to input ones; edges sit 0.5 px off centres)."""
    if not len(boxes):
        return boxes
    inv = np.linalg.inv(m)
    xs = boxes[:, [0, 2, 2, 0]] - 0.5
    ys = boxes[:, [1, 1, 3, 3]] - 0.5
    p = inv @ np.stack([xs.ravel(), ys.ravel(), np.ones(xs.size)])
    px, py = (p[0] / p[2]).reshape(xs.shape) + 0.5, (p[1] / p[2]).reshape(ys.shape) + 0.5
    return _clip(np.column_stack([px.min(1), py.min(1), px.max(1), py.max(1)]), oh, ow)


class AnnotationPlan(NamedTuple):
    """What the annotations of one draw move by (Program.annotation_plan): its Geo steps, its covers, its own least
    visibility, its keypoint events and its moves inside boxes, each (Geo steps before it, rectangle, map)."""
    steps: list
    covers: list
    least: float
    events: tuple
    moves: tuple


def _moved_cover(k: int, cover, at: int, rect, t) -> list:
    """A cover (k, rectangle or polygon) after a move inside `rect` at Geo step `at`: as it was where the move
    does not reach it, else its pieces (augd.planar.move_shapes: the grey it drew moves with the pixels)."""
    poly = outline(cover) if not isinstance(cover[0], (tuple, list)) else list(cover)
    x0, y0, x1, y1 = rect
    xs, ys = [p[0] for p in poly], [p[1] for p in poly]
    if k != at or max(xs) <= x0 or min(xs) >= x1 or max(ys) <= y0 or min(ys) >= y1:
        return [(k, cover)]
    return [(k, tuple(map(tuple, piece))) for piece in move_shapes([poly], [(rect, t)])]


def _classify(m, ih, iw, oh, ow) -> int:
    """IDENTITY, an exact flip, or GENERAL (a real resampling)."""
    if (round(oh), round(ow)) != (round(ih), round(iw)):
        return GENERAL
    for code, sx, sy in ((IDENTITY, 1, 1), (FLIP_X, -1, 1), (FLIP_Y, 1, -1), (FLIP_XY, -1, -1)):
        target = np.array([[sx, 0, (iw - 1) if sx < 0 else 0], [0, sy, (ih - 1) if sy < 0 else 0], [0, 0, 1]])
        if np.abs(m - target).max() < 1e-5:
            return code
    return GENERAL
