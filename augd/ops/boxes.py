"""Ops that act where the objects are (AutoAugment for detection, Zoph et al. 2019): `in_boxes` (an operation on
each box's own pixels: its `*_Only_BBoxes` family), `box_cutout` (holes inside boxes: its BBox_Cutout and
Cutout_Only_BBoxes), and `cutout` (DeVries & Taylor's square hole of a fixed size, its Cutout).

They are SeededOps that draw on the host from the boxes the chain before them has moved (SeededOp.uses_boxes: the
plan hands them over), so the graph and the annotations see the same draw. Their pixels are TF ops on both kernels.
What they overwrite reaches the annotations through `hidden()` by the one occlusion rule (a hole, or the strip a
shift inside a box leaves empty); what moves inside a box (`moves()`) moves the polygons, masks, keypoints and
oriented boxes there with it (augd.annotations.geometry). An image without boxes is left as it is.
"""
from __future__ import annotations

import math
from typing import Literal

import numpy as np
from pydantic import Field, model_validator

from augd.lazycv import cv2
from augd.ops._tf import tf
from augd.ops.base import Kind, ScaledPixels, SeededOp, register_op
from augd.ops.pixel import Equalize, equalize_np, fill_holes, fill_holes_np, lut_np, solarize_lut, update_window
from augd.ops.sampling import coin
from augd.ops.words import signed

__all__ = ["BoxCutout", "Cutout", "InBoxes", "MAX_BOXES"]

#: the most boxes one image's op acts on (its plan's slots); boxes past it are left as they are
MAX_BOXES = 100

#: in_boxes' operations: what `value` means for each, and whether it moves pixels (then the annotations inside
#: the box move with them)
OPERATIONS = {
    "rotate": ("degrees, about the box's centre; a random sign", True),
    "shear_x": ("shear factor (tan), about the box's centre; a random sign", True),
    "shear_y": ("shear factor (tan), about the box's centre; a random sign", True),
    "translate_x": ("pixels; a random sign", True),
    "translate_y": ("pixels; a random sign", True),
    "flip": ("unused: left-right", True),
    "solarize": ("threshold, 0-256: values at or above it inverted", False),
    "equalize": ("unused", False),
}
_SIGNED = {"rotate", "shear_x", "shear_y", "translate_x", "translate_y"}


def _rects(boxes, h: int, w: int):
    """The whole-pixel rectangles (x0, y0, x1, y1) that boxes in pixel edges cover, at least one pixel each."""
    for b in np.asarray(boxes, np.float64).reshape(-1, 4)[:MAX_BOXES]:
        x0, y0 = min(math.floor(b[0]), w - 1), min(math.floor(b[1]), h - 1)
        yield x0, y0, max(min(math.ceil(b[2]), w), x0 + 1), max(min(math.ceil(b[3]), h), y0 + 1)


def _picked(rng, boxes, h, w, p: float) -> list:
    """The boxes drawn for this image, each with probability p, in a random order (the OD API shuffles them: where
    boxes overlap, the last one applied shows). Draws from a fork: the count depends on the boxes."""
    rng.random()   # one draw of its own: this op's fork is not another op's
    if boxes is None or not len(boxes):
        return []
    sub = rng.fork()
    rects = [r for r in _rects(boxes, h, w) if coin(sub, p)]
    order = sorted(range(len(rects)), key=sub.random(len(rects)).__getitem__)
    return [rects[k] for k in order]


def _mover(op: str, value: float, rect) -> tuple:
    """The map (6 floats, augd.planar) taking points inside a box (pixel edges) to where in_boxes' operation moves
    its pixels: each output pixel reads where the op's matrix takes it (about the box's centre), so content moves by
    the inverse."""
    x0, y0, x1, y1 = rect
    cx, cy = (x0 + x1) / 2.0, (y0 + y1) / 2.0
    if op == "translate_x":
        return (1.0, 0.0, value, 0.0, 1.0, 0.0)
    if op == "translate_y":
        return (1.0, 0.0, 0.0, 0.0, 1.0, value)
    if op == "flip":
        return (-1.0, 0.0, float(x0 + x1), 0.0, 1.0, 0.0)
    if op == "rotate":
        c, s = math.cos(math.radians(value)), math.sin(math.radians(value))
        a, b, d, e = c, s, -s, c
    elif op == "shear_x":
        a, b, d, e = 1.0, -value, 0.0, 1.0
    else:
        a, b, d, e = 1.0, 0.0, -value, 1.0
    return (a, b, cx - a * cx - b * cy, d, e, cy - d * cx - e * cy)


def _slots(rects, n: int) -> list[float]:
    out = [float(v) for r in rects for v in r]
    return out + [0.0] * (4 * n - len(out))


@register_op("in_boxes", Kind.PIXEL)
class InBoxes(SeededOp):
    """An operation on each box's own pixels, each box with probability `box_p`, the box kept (AutoAugment's
    `*_Only_BBoxes`): rotate, shear_x, shear_y, translate_x, translate_y, flip, solarize or equalize. What moves
    out of a box is cut off and what it leaves empty is `fill`; a shift's empty strip hides what it covered."""
    example = "- in_boxes: {op: translate_y, value: 72, box_p: 0.2}"
    uses_boxes = True
    label = "in boxes"

    class Params(ScaledPixels):
        op: Literal[tuple(OPERATIONS)] = Field(description="the operation: " + "; ".join(
            f"{k}: {v[0]}" for k, v in OPERATIONS.items()))
        value: float = Field(0.0, ge=-8192.0, le=8192.0, description="its magnitude (see op)")
        box_p: float = Field(1.0, ge=0.0, le=1.0, description="the chance of each box (AutoAugment: p / 3)")
        fill: int = Field(128, ge=0, le=255, description="grey level of what a move leaves empty")

    @property
    def moves_pixels(self) -> bool:
        return OPERATIONS[self.params.op][1]

    def region_size(self) -> int:
        return 4 * MAX_BOXES + 1   # the boxes' rectangles, then the signed value

    def region(self, rng, h, w, boxes=None):
        p = self.params
        sign = -1.0 if p.op in _SIGNED and coin(rng, 0.5) else 1.0   # one sign for every box, as the OD API's
        value = p.pixels(p.value, h, w) if p.op in ("translate_x", "translate_y") else p.value
        return tuple(_slots(_picked(rng, boxes, h, w, p.box_p), MAX_BOXES)) + (sign * value,)

    def hidden(self, values):
        """Nothing of its own: what its moves leave empty is composed by the plan from moves()."""
        return []

    def moves(self, values):
        """Each picked box's rectangle and where its operation takes the pixels inside it (augd.planar.Move): a
        shift, a rotation or a shear about its centre, a flip. What a move leaves empty (`fill`) hides what stood
        there; the plan greys it and carries the grey drawn before (Program._covers), so two moves of one box grey
        what the pair leaves, and hands the moves in order to the annotations, whose shapes inside the box move too."""
        op = self.params.op
        v = float(values[-1])
        if not self.moves_pixels or (op in _SIGNED and v == 0.0):
            return []
        return [(r, _mover(op, v, r)) for r in super().hidden(values[:-1])]

    def apply(self, image, seed, region=None):
        rects = tf.cast(tf.reshape(region[:4 * MAX_BOXES], [MAX_BOXES, 4]), tf.int32)
        value = tf.cast(region[-1], tf.float32)
        n = tf.reduce_sum(tf.cast(rects[:, 2] > rects[:, 0], tf.int32))   # the picked ones lead

        def body(k, img):   # each box's window alone: the work is the boxes' pixels, not the image's
            x0, y0, x1, y1 = tf.unstack(rects[k])
            return k + 1, update_window(img, x0, y0, x1, y1, self._inside(img[y0:y1, x0:x1], value))

        _, out = tf.while_loop(lambda k, _: k < n, body, [tf.constant(0), image],
                               shape_invariants=[tf.TensorShape([]), tf.TensorShape([None, None, 3])])
        return out

    def _inside(self, x, value):
        """The operation on one box's pixels (uint8, h x w x 3), same size out."""
        op = self.params.op
        if op == "flip":
            return tf.reverse(x, [1])
        if op == "equalize":
            return tf.concat([Equalize._channel(x[..., c])[..., None] for c in range(3)], axis=-1)
        if op == "solarize":
            return tf.where(tf.cast(x, tf.float32) >= value, 255 - x, x)
        h, w = tf.cast(tf.shape(x)[0], tf.float32), tf.cast(tf.shape(x)[1], tf.float32)
        cx, cy = (w - 1.0) / 2.0, (h - 1.0) / 2.0
        one, zero = tf.constant(1.0), tf.constant(0.0)
        if op == "rotate":   # output -> input pixel centres, about the box's centre
            c, s = tf.cos(value * (math.pi / 180.0)), tf.sin(value * (math.pi / 180.0))
            a = [c, -s, cx - c * cx + s * cy, s, c, cy - s * cx - c * cy]
        elif op == "shear_x":
            a = [one, value, -value * cy, zero, one, zero]
        elif op == "shear_y":
            a = [one, zero, zero, value, one, -value * cx]
        elif op == "translate_x":
            a = [one, zero, -value, zero, one, zero]
        else:
            a = [one, zero, zero, zero, one, -value]
        flat = tf.stack(a + [zero, zero])[tf.newaxis]
        out = tf.raw_ops.ImageProjectiveTransformV3(
            images=tf.cast(x, tf.float32)[tf.newaxis], transforms=flat, output_shape=tf.shape(x)[:2],
            fill_value=float(self.params.fill), interpolation="BILINEAR", fill_mode="CONSTANT")[0]
        return tf.cast(tf.clip_by_value(tf.round(out), 0.0, 255.0), tf.uint8)

    def apply_np(self, image, region):
        """The CPU kernel: each picked box's window in turn (the picked ones lead), as apply does."""
        value = np.float32(region[-1])
        for k in range(0, 4 * MAX_BOXES, 4):
            x0, y0, x1, y1 = (int(v) for v in region[k:k + 4])
            if x1 <= x0:
                break
            image[y0:y1, x0:x1] = self._inside_np(np.ascontiguousarray(image[y0:y1, x0:x1]), value)
        return image

    def _inside_np(self, x, value):
        """_inside on one box's pixels (a uint8 h x w x 3 array of its own), same size out. Flips, solarize,
        equalize and whole-pixel shifts are exact (a bilinear sample at a whole-pixel offset is the pixel); turns,
        shears and fractional shifts are OpenCV's bilinear warp, as every other warp on a CPU host."""
        op = self.params.op
        if op == "flip":
            return cv2.flip(x, 1)
        if op == "equalize":
            return equalize_np(x)
        if op == "solarize":
            return lut_np(x, solarize_lut(value))
        h, w = x.shape[:2]
        fill = self.params.fill
        if op in ("translate_x", "translate_y") and value == np.round(value):
            d = int(value)
            out = np.full_like(x, fill)
            if op == "translate_x" and abs(d) < w:
                out[:, max(d, 0):w + min(d, 0)] = x[:, max(-d, 0):w - max(d, 0)]
            elif op == "translate_y" and abs(d) < h:
                out[max(d, 0):h + min(d, 0)] = x[max(-d, 0):h - max(d, 0)]
            return out
        cx, cy, v = (w - 1.0) / 2.0, (h - 1.0) / 2.0, float(value)
        if op == "rotate":   # output -> input pixel centres, about the box's centre, as _inside
            c, s = math.cos(math.radians(v)), math.sin(math.radians(v))
            m = [[c, -s, cx - c * cx + s * cy], [s, c, cy - s * cx - c * cy]]
        elif op == "shear_x":
            m = [[1.0, v, -v * cy], [0.0, 1.0, 0.0]]
        elif op == "shear_y":
            m = [[1.0, 0.0, 0.0], [v, 1.0, -v * cx]]
        elif op == "translate_x":
            m = [[1.0, 0.0, -v], [0.0, 1.0, 0.0]]
        else:
            m = [[1.0, 0.0, 0.0], [0.0, 1.0, -v]]
        return cv2.warpAffine(x, np.array(m, np.float64), (w, h), flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
                              borderMode=cv2.BORDER_CONSTANT, borderValue=(fill, fill, fill))

    def describe(self, drawn):
        picked = sum(1 for k in range(0, 4 * MAX_BOXES, 4) if drawn.values and drawn.values[k + 2] > drawn.values[k])
        value = f" {signed(drawn.values[-1], 2)}" if drawn.values and self.params.op in _SIGNED else ""
        return [f"{self.label}: {self.params.op}{value} × {picked} box(es)"]


@register_op("box_cutout", Kind.PIXEL)
class BoxCutout(SeededOp):
    """Holes inside boxes, filled with `fill`: one box drawn among them with a hole of `fraction` of its sides,
    centred at a uniform point of it and cut by the image's edge (AutoAugment's BBox_Cutout), or each box with
    probability `box_p` with a hole of `size` px cut by the box (its Cutout_Only_BBoxes). Boxes, masks and keypoints
    lose what the holes hide (the occlusion rule: `min_visibility`)."""
    example = ("- box_cutout: {boxes: one, fraction: 0.3}\n"
               "- box_cutout: {boxes: each, size: 60, box_p: 0.13}")
    covers = True
    uses_boxes = True
    label = "box cutout"

    class Params(ScaledPixels):
        boxes: Literal["one", "each"] = Field("one", description="one box drawn among them, or each box")
        fraction: float | None = Field(None, gt=0.0, le=1.0, description="the hole's sides over the box's")
        size: int | None = Field(None, ge=1, le=8192, description="the hole's side in pixels")
        box_p: float = Field(1.0, ge=0.0, le=1.0, description="each: the chance of each box")
        fill: int = Field(128, ge=0, le=255, description="the holes' grey level")

        @model_validator(mode="after")
        def _one_size(self):
            if (self.fraction is None) == (self.size is None):
                raise ValueError("give the hole's size as exactly one of fraction (of the box's sides) or size (px)")
            return self

    def holes(self) -> int:
        return 1 if self.params.boxes == "one" else MAX_BOXES

    def region(self, rng, h, w, boxes=None):
        p = self.params
        if p.boxes == "one":
            rects = _picked(rng, boxes, h, w, 1.0)
            rects = rects[:1]   # the first of a random order: one box drawn uniformly
            clip = (0, 0, w, h)
        else:
            rects = _picked(rng, boxes, h, w, p.box_p)
        sub = rng.fork()
        out = []
        for x0, y0, x1, y1 in rects:
            bw, bh = x1 - x0, y1 - y0
            hw, hh = ((int(p.fraction * bw / 2), int(p.fraction * bh / 2)) if p.fraction is not None else
                      (int(p.pixels(p.size, h, w)) // 2,) * 2)
            cx = x0 + min(int(sub.random() * bw), bw - 1)
            cy = y0 + min(int(sub.random() * bh), bh - 1)
            c0, r0, c1, r1 = clip if p.boxes == "one" else (x0, y0, x1, y1)
            hole = (max(cx - hw, c0), max(cy - hh, r0), min(cx + hw, c1), min(cy + hh, r1))
            if hole[2] > hole[0] and hole[3] > hole[1]:
                out.append(hole)
        return tuple(_slots(out, self.holes()))

    def apply(self, image, seed, region=None):
        return fill_holes(image, region, self.params.fill)

    def apply_np(self, image, region=None):
        return fill_holes_np(image, region, self.params.fill)

    def describe(self, drawn):
        holes = sum(1 for k in range(0, len(drawn.values), 4) if drawn.values[k + 2] > drawn.values[k])
        return [f"{self.label} {holes} hole(s)"]


@register_op("cutout", Kind.PIXEL)
class Cutout(SeededOp):
    """Cutout (DeVries & Taylor 2017): a square hole of `size` px centred at a uniform pixel of the image, cut by
    its edge, filled with `fill` (AutoAugment's Cutout). Boxes, masks and keypoints lose what it hides."""
    example = "- cutout: {size: 160, fill: 128}"
    covers = True

    class Params(ScaledPixels):
        size: int = Field(64, ge=1, le=8192, description="the hole's side in pixels")
        fill: int = Field(128, ge=0, le=255, description="its grey level")

    def region(self, rng, h, w):
        half = int(self.params.pixels(self.params.size, h, w)) // 2
        cy, cx = min(int(rng.random() * h), h - 1), min(int(rng.random() * w), w - 1)
        return float(max(cx - half, 0)), float(max(cy - half, 0)), float(min(cx + half, w)), float(min(cy + half, h))

    def apply(self, image, seed, region=None):
        return fill_holes(image, region, self.params.fill)

    def apply_np(self, image, region=None):
        return fill_holes_np(image, region, self.params.fill)

    def describe(self, drawn):
        x0, y0, x1, y1 = drawn.values
        return [f"{self.label} {x1 - x0:g}x{y1 - y0:g} at ({x0:g}, {y0:g})"]
