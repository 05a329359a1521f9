"""Ops that combine an image with partner images of its split (augd.ops.base.PartnerOp): mosaic, mixup, cutmix.

Each samples a Mix: the canvas size and, for the image and each partner, the tile it shows and the matrix from
that tile's pixels to the source's, the same 3x3 convention as a GeometryOp's. The job (augd/job/mixing.py)
draws the partners, decodes each one at the scale its tile needs and lays out the canvas; boxes, masks and
keypoints move through the same matrices (augd/annotations/objects.py)."""
from __future__ import annotations

import math

import numpy as np
from typing import Annotated, Literal

from pydantic import Field, model_serializer, model_validator

from augd.ops.base import Kind, Mix, OpParams, PartnerOp, Placement, Size, range_of, register_op
from augd.ops.sampling import log_uniform, uniform


#: COCO's object sizes: the square root of the area, in pixels
_SIZES = {"small": (0.0, 32.0), "medium": (32.0, 96.0), "large": (96.0, math.inf)}


def _placed(scale: float, ix0: float, iy0: float, rect) -> np.ndarray:
    """Tile pixel centres -> source pixel centres, for a source scaled by `scale` whose top-left edge lands at
    (ix0, iy0) of the canvas, seen through the tile `rect` (its x0, y0 in the canvas)."""
    return np.array([[1 / scale, 0, (rect[0] + 0.5 - ix0) / scale - 0.5],
                     [0, 1 / scale, (rect[1] + 0.5 - iy0) / scale - 0.5], [0, 0, 1]], np.float64)


def _covering(h: float, w: float, ph: float, pw: float, rect) -> np.ndarray:
    """A ph x pw partner scaled to cover an h x w canvas, centred (its aspect kept, the overhang cut), seen through
    the tile `rect`."""
    s = max(h / ph, w / pw)
    return _placed(s, (w - pw * s) / 2, (h - ph * s) / 2, rect)


class PartnerParams(OpParams):
    partners: Literal["uniform", "rare"] = Field(
        "uniform", description="how partners are drawn from the image's split: uniform, or rare (an image's "
                               "chance 1 / the split's count of its rarest class: rare classes come more often)")


@register_op("mosaic", Kind.MIX)
class Mosaic(PartnerOp):
    """Four images on one canvas (YOLOv4's mosaic): the image and 3 partners in a 2x2 grid around a random centre."""
    example = "- mosaic: {size: [640, 640], center: [0.25, 0.75], scale: [1.0, 1.0]}"
    partners = 3

    class Params(PartnerParams):
        size: Size = Field(description="the canvas [height, width]")
        center: range_of(0.05, 0.95) = Field(
            (0.25, 0.75), description="where the tiles meet, as a fraction of each side (uniform): YOLOv5's range, "
                                      "so no tile is under a quarter of a side")
        scale: range_of(0.1, 4.0) = Field(
            (1.0, 1.0), description="each image's size against a half canvas (1: its longer side fills half the "
                                    "canvas), drawn per tile")
        fill: int = Field(114, ge=0, le=255, description="grey level where no image lands (YOLO's 114)")

        @model_validator(mode="after")
        def _two_by_two(self):
            if min(self.size) < 2:
                raise ValueError(f"size {list(self.size)}: each side must be at least 2 (a 2x2 grid of tiles)")
            return self

    @property
    def size_limit(self):
        return self.params.size

    def sample(self, rng, sizes, boxes=None) -> Mix:
        H, W = self.params.size
        cx = min(max(round(uniform(rng, *self.params.center) * W), 1), W - 1)
        cy = min(max(round(uniform(rng, *self.params.center) * H), 1), H - 1)
        out = []
        # tile k: its rect, and which corner of the image sits on the centre (-1: the image ends there, +1: starts)
        for (h, w), (rect, sx, sy) in zip(sizes, (((0, 0, cx, cy), -1, -1), ((cx, 0, W, cy), 1, -1),
                                                  ((0, cy, cx, H), -1, 1), ((cx, cy, W, H), 1, 1))):
            s = min(H / 2 / h, W / 2 / w) * uniform(rng, *self.params.scale)
            ix0 = cx - w * s if sx < 0 else cx
            iy0 = cy - h * s if sy < 0 else cy
            out.append(Placement(_placed(s, ix0, iy0, rect), rect))
        return Mix(H, W, tuple(out), fill=self.params.fill)

    def describe(self, drawn):
        mix = drawn.mix
        cx, cy = mix.placements[0].rect[2:]
        return [f"{self.label} {mix.width}x{mix.height}", f"centre {cx},{cy}"]


@register_op("mixup", Kind.MIX)
class MixUp(PartnerOp):
    """A weighted blend with one partner (scaled to cover the image); the objects of both, each weighted."""
    example = "- mixup: {weight: [0.3, 0.5]}"

    class Params(PartnerParams):
        weight: range_of(0.0, 1.0) = Field(
            (0.4, 0.6), description="the partner's share of each pixel (uniform); the image keeps the rest")

    def sample(self, rng, sizes, boxes=None) -> Mix:
        (h, w), (ph, pw) = sizes
        lam = uniform(rng, *self.params.weight)
        full = (0, 0, int(w), int(h))
        return Mix(int(h), int(w), (Placement(np.eye(3), full, 1.0 - lam),
                                    Placement(_covering(h, w, ph, pw, full), full, lam)), blend=True)

    def describe(self, drawn):
        return [f"{self.label} {drawn.mix.placements[1].weight:.2f}"]


@register_op("cutmix", Kind.MIX)
class CutMix(PartnerOp):
    """A rectangle of one partner (scaled to cover the image) pasted over the image (CutMix)."""
    example = "- cutmix: {area: [0.1, 0.4]}"

    class Params(PartnerParams):
        area: range_of(0.01, 1.0) = Field((0.1, 0.4), description="the patch's area as a fraction of the image")
        aspect: range_of(0.1, 10.0) = Field((0.5, 2.0), description="the patch's width/height (log-uniform)")

    def sample(self, rng, sizes, boxes=None) -> Mix:
        (h, w), (ph, pw) = sizes
        area = uniform(rng, *self.params.area) * h * w
        r = log_uniform(rng, *self.params.aspect)
        cw = max(1, min(round(math.sqrt(area * r)), int(w)))
        ch = max(1, min(round(math.sqrt(area / r)), int(h)))
        x0 = min(int(uniform(rng, 0.0, 1.0) * (w - cw + 1)), int(w) - cw)
        y0 = min(int(uniform(rng, 0.0, 1.0) * (h - ch + 1)), int(h) - ch)
        patch = (x0, y0, x0 + cw, y0 + ch)
        return Mix(int(h), int(w), (Placement(np.eye(3), (0, 0, int(w), int(h))),
                                    Placement(_covering(h, w, ph, pw, patch), patch)))

    def describe(self, drawn):
        x0, y0, x1, y1 = drawn.mix.placements[1].rect
        return [f"{self.label} {x1 - x0}x{y1 - y0}", f"at {x0},{y0}"]


@register_op("copy_paste", Kind.MIX)
class CopyPaste(PartnerOp):
    """Objects of partner images pasted onto the image by their instance masks (COCO polygons or RLE; a box-only
    set pastes box crops), scaled and placed at random (Ghiasi et al., CVPR 2021). Detection jobs only. For small
    objects (Kisantal et al. 2019: +7.1 % relative AP on COCO's small ones): `size` picks objects of a size,
    `copies` pastes each several times, `place: free` only where no object of the image is hidden."""
    example = "- copy_paste: {objects: [1, 3], size: small, copies: [1, 3], place: free, partners: rare}"
    needs_boxes = True

    class Params(PartnerParams):
        objects: tuple[Annotated[int, Field(ge=1, le=16)], Annotated[int, Field(ge=1, le=16)]] = Field(
            (1, 3), description="how many objects are pasted, [min, max] (uniform), each from its own partner")
        scale: range_of(0.1, 4.0) = Field((0.5, 1.5), description="each pasted object's size against its own")
        feather: float = Field(0.0, ge=0.0, le=16.0, description="soften each paste's edge over this many pixels "
                                                                 "(a Gaussian's sigma; 0: a hard edge)")
        size: Literal["any", "small", "medium", "large"] | range_of(0.0, 100000.0) = Field(
            "any", description="which objects a partner gives, by the square root of their box's area in the "
                               "partner: COCO's small (< 32 px), medium (32-96) or large (>= 96), or [low, high] "
                               "pixels; a partner with none gives none")
        copies: tuple[Annotated[int, Field(ge=1, le=8)], Annotated[int, Field(ge=1, le=8)]] = Field(
            (1, 1), description="how many times each picked object is pasted, [min, max] (uniform), each copy at "
                                "its own place and scale")
        place: Literal["anywhere", "free"] = Field(
            "anywhere", description="anywhere: a paste may hide the image's objects (the occlusion rule then "
                                    "shrinks or drops them); free: only where it covers no object of the image")

        ordered = (("objects",), ("copies",))

        @model_serializer(mode="wrap")
        def _without_defaults(self, handler):
            # absent when unset: a pipeline without them keeps its serialized form and sha256
            out = handler(self)
            for key, default in (("size", "any"), ("copies", [1, 1]), ("place", "anywhere")):
                if out.get(key) == default:
                    out.pop(key)
            return out

    @property
    def partners(self) -> int:
        return self.params.objects[1] * self.params.copies[1]

    @property
    def repeats(self) -> int:
        return self.params.copies[1]

    def _sized(self, cand) -> list[tuple[int, tuple]]:
        """(index, box) of a partner's objects of the asked size."""
        size = self.params.size
        if size == "any":
            return list(enumerate(cand))
        lo, hi = _SIZES[size] if isinstance(size, str) else size
        return [(k, b) for k, b in enumerate(cand) if lo <= math.sqrt(max(b[2] - b[0], 0) * max(b[3] - b[1], 0)) < hi]

    def sample(self, rng, sizes, boxes=None) -> Mix:
        h, w = sizes[0]
        pr = self.params
        lo, hi = pr.objects
        n = lo + min(int(rng.random() * (hi - lo + 1)), hi - lo)
        out, taken = [Placement(np.eye(3), (0, 0, int(w), int(h)))], []
        own = [] if pr.place == "anywhere" or boxes is None else [tuple(b) for b in boxes[0]]
        reps = self.repeats
        for g in range(pr.objects[1]):
            j = 1 + g * reps   # the group's slots: its partner, repeated (augd.job.mixing.draw)
            cand = self._sized(boxes[j]) if boxes is not None and j < len(sizes) else []
            if g + 1 > n or not cand:
                out += [None] * reps
                continue
            k, (bx0, by0, bx1, by1) = cand[min(int(rng.random() * len(cand)), len(cand) - 1)]
            copies = 1 if reps == 1 else pr.copies[0] + min(int(rng.random() * (pr.copies[1] - pr.copies[0] + 1)),
                                                             pr.copies[1] - pr.copies[0])
            for c in range(reps):
                out.append(self._placed(rng, k, (bx0, by0, bx1, by1), h, w, taken, own) if c < copies else None)
        return Mix(int(h), int(w), tuple(out), feather=pr.feather)

    def _placed(self, rng, k: int, box, h: float, w: float, taken: list, own: list):
        """One copy of object k: its scale and a place where it overlaps no other paste (nor, with place: free,
        any object of the image); None when 10 tries find none."""
        bx0, by0, bx1, by1 = box
        bw, bh = bx1 - bx0, by1 - by0
        s = min(uniform(rng, *self.params.scale), w / bw, h / bh)
        pw, ph = max(1, min(round(bw * s), int(w))), max(1, min(round(bh * s), int(h)))
        for _ in range(10):   # pastes never overlap one another: each covers only the image
            x0, y0 = min(int(rng.random() * (w - pw + 1)), int(w) - pw), min(int(rng.random() * (h - ph + 1)),
                                                                          int(h) - ph)
            r = (x0, y0, x0 + pw, y0 + ph)
            if not any(r[0] < t[2] and t[0] < r[2] and r[1] < t[3] and t[1] < r[3] for t in taken + own):
                taken.append(r)
                sx, sy = pw / bw, ph / bh
                m = np.array([[1 / sx, 0, bx0 + 0.5 / sx - 0.5], [0, 1 / sy, by0 + 0.5 / sy - 0.5], [0, 0, 1]],
                             np.float64)
                return Placement(m, r, 1.0, k)
        return None

    def describe(self, drawn):
        pasted = [p for p in drawn.mix.placements[1:] if p is not None]
        if self.repeats == 1:
            return [f"{self.label} {len(pasted)} object(s)"]
        groups = {(k - 1) // self.repeats for k, p in enumerate(drawn.mix.placements) if k and p is not None}
        return [f"{self.label} {len(pasted)} copies of {len(groups)} object(s)"]
