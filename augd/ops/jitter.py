"""Scale jitter as the Object Detection API's detectors train with it (augd.ops.base.GeometryOp): its
random_image_scale (the whole image by one ratio), EfficientDet's large-scale jitter (`random_scale_crop_and_pad_to_square`) and CenterNet's square crop by scale
(`random_square_crop_by_scale`), each read line by line from the API's core/preprocessor.py. Both are a scale and
a whole-pixel window, one warp like every geometric op; what falls outside the image is black, as the API pads."""
from __future__ import annotations

import math

import numpy as np
from pydantic import Field

from augd.ops.base import GeometryOp, Kind, OpParams, register_op
from augd.ops.geometry import translate, window
from augd.ops.sampling import uniform
from augd.ops.windows import uniform_int
from augd.ops.words import size

__all__ = ["RandomImageScale", "RandomScaleCropAndPadToSquare", "RandomSquareCropByScale"]


@register_op("random_image_scale", Kind.GEOMETRY)
class RandomImageScale(GeometryOp):
    """The Object Detection API's random_image_scale: the whole image scaled by one ratio drawn from
    [min_scale_ratio, max_scale_ratio], its aspect kept, to int(h x ratio) by int(w x ratio) as the API truncates
    (area-prefiltered where it shrinks)."""
    label = "scale"
    example = "- random_image_scale: {min_scale_ratio: 0.5, max_scale_ratio: 2.0}"

    class Params(OpParams):
        min_scale_ratio: float = Field(0.5, gt=0.0, le=8.0, description="lowest ratio")
        max_scale_ratio: float = Field(2.0, gt=0.0, le=8.0, description="highest ratio")
        ordered = (("min_scale_ratio", "max_scale_ratio"),)

    def sample(self, rng, h, w):
        r = uniform(rng, self.params.min_scale_ratio, self.params.max_scale_ratio)
        oh, ow = float(max(int(h * r), 1)), float(max(int(w * r), 1))
        return window(0.0, 0.0, h, w, oh, ow), oh, ow

    def describe(self, drawn):
        return [f"{self.label} {size(drawn.in_size)} → {size(drawn.out_size)}"]


class _ScaleRange(OpParams):
    scale_min: float = Field(0.1, gt=0.0, le=10.0, description="lowest scale")
    scale_max: float = Field(2.0, gt=0.0, le=10.0, description="highest scale")
    ordered = (("scale_min", "scale_max"),)


@register_op("random_scale_crop_and_pad_to_square", Kind.GEOMETRY)
class RandomScaleCropAndPadToSquare(GeometryOp):
    """EfficientDet's large-scale jitter: the image scaled so its longer side is output_size x a scale uniform in
    [scale_min, scale_max], an output_size square window of it at a uniform whole-pixel place (where it is larger),
    padded with black at the bottom and right (where it is smaller)."""
    label = "jitter"
    example = "- random_scale_crop_and_pad_to_square: {output_size: 512, scale_min: 0.1, scale_max: 2.0}"

    starts_warp = True   # the API pads black, whatever an earlier op left beyond its output

    class Params(_ScaleRange):
        output_size: int = Field(512, ge=1, le=16384, description="the square output's side")

    @property
    def size_limit(self):
        return (self.params.output_size, self.params.output_size)

    def sample(self, rng, h, w):
        p, out = self.params, self.params.output_size
        r = uniform(rng, p.scale_min, p.scale_max)
        longer = max(h, w)
        sh, sw = max(int(r * out * h / longer), 1), max(int(r * out * w / longer), 1)   # tf.cast truncates
        oy = int(max(0.0, sh - out) * rng.random())
        ox = int(max(0.0, sw - out) * rng.random())
        sy, sx = h / sh, w / sw   # input pixels per scaled pixel; the window starts at scaled (ox, oy)
        return window(oy * sy, ox * sx, out * sy, out * sx, float(out), float(out)), float(out), float(out)

    def describe(self, drawn):
        return [f"{self.label} {size(drawn.in_size)} → {size(drawn.out_size)}"]


def _crop_border(border: int, side: int) -> int:
    """The API's _get_crop_border: the largest max_border / 2^k under half the side, k >= 0."""
    i = math.ceil(math.log(2.0 * border / side) / math.log(2.0))
    divisor = int(min(max(2.0 ** i, 1.0), float(border)))
    return int(border) // divisor


@register_op("random_square_crop_by_scale", Kind.GEOMETRY)
class RandomSquareCropByScale(GeometryOp):
    """CenterNet's square crop: a side of the longer image side x one of num_scales scales evenly spaced in
    [scale_min, scale_max], centred on a whole pixel at least max_border (halved until it fits) from the edges,
    unresampled; what falls outside the image is black. (The API also leaves the image's last row and column out
    of the crop; augd keeps them.)"""
    label = "square crop"
    example = "- random_square_crop_by_scale: {scale_min: 0.6, scale_max: 1.3}"

    starts_warp = True   # the API pads black, whatever an earlier op left beyond its output

    class Params(_ScaleRange):
        scale_min: float = Field(0.6, gt=0.0, le=10.0, description="lowest scale")
        scale_max: float = Field(1.3, gt=0.0, le=10.0, description="highest scale")
        num_scales: int = Field(8, ge=1, le=1000, description="scales evenly spaced in [scale_min, scale_max]")
        max_border: int = Field(128, ge=1, le=100000, description="pixels from the edges no centre lies in (halved "
                                                                  "until under half the side)")

    def sample(self, rng, h, w):
        p = self.params
        hi, wi = int(round(h)), int(round(w))
        scales = np.linspace(p.scale_min, p.scale_max, p.num_scales, dtype=np.float32)   # tf.linspace's float32
        scale = float(scales[uniform_int(rng, p.num_scales)])
        side = max(int(scale * max(hi, wi)), 1)
        hb, wb = _crop_border(p.max_border, hi), _crop_border(p.max_border, wi)
        yc = hb + uniform_int(rng, max(hi - 2 * hb + 1, 1))
        xc = wb + uniform_int(rng, max(wi - 2 * wb + 1, 1))
        half = side // 2
        return translate(float(xc - half), float(yc - half)), float(side), float(side)

    def describe(self, drawn):
        return [f"{self.label} {size(drawn.out_size)}"]
