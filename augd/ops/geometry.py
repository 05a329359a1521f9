"""Geometric ops (augd.ops.base.GeometryOp). Each samples a 3x3 matrix mapping *output* pixel coordinates
to *input* ones (pixel centres at integers, the convention of ImageProjectiveTransformV3) plus its output
size, and says its border fill and interpolation. The engine multiplies consecutive matrices and resamples
once: one warp, one interpolation."""
from __future__ import annotations

import math
from typing import Annotated

from pydantic import BeforeValidator, Field, TypeAdapter, WithJsonSchema

import numpy as np

from augd.ops.base import Fill, GeometryOp, Interpolation, Kind, OpParams, Size, range_of, register_op
from augd.ops.sampling import coin, log_uniform, uniform


def _both(v):
    return (v, v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v


_Fraction = Annotated[float, Field(ge=0.0, le=1.0)]
#: [x, y] maximum shifts as fractions of width and height; one number means both.
Shift = Annotated[tuple[_Fraction, _Fraction], BeforeValidator(_both), WithJsonSchema(
    {"anyOf": [TypeAdapter(_Fraction).json_schema(), TypeAdapter(tuple[_Fraction, _Fraction]).json_schema()]})]


def fill_field(default: Fill = 0):
    return Field(default, description="0-255 constant, or reflect | nearest | wrap")


def mat(rows):
    return np.array(rows, np.float64)


def translate(tx, ty):
    return mat([[1, 0, tx], [0, 1, ty], [0, 0, 1]])


def about_centre(a, h, w):
    """Conjugate a linear map so it acts about the image centre."""
    cx, cy = (w - 1.0) / 2.0, (h - 1.0) / 2.0
    return translate(cx, cy) @ a @ translate(-cx, -cy)


def rotation(radians):
    c, s = math.cos(radians), math.sin(radians)
    return mat([[c, -s, 0], [s, c, 0], [0, 0, 1]])


def window(y0, x0, ch, cw, oh, ow):
    """Output (oh, ow) samples the source window [y0, y0+ch) x [x0, x0+cw) (half-pixel centres)."""
    sx, sy = cw / ow, ch / oh
    return mat([[sx, 0, x0 + 0.5 * sx - 0.5], [0, sy, y0 + 0.5 * sy - 0.5], [0, 0, 1]])


@register_op("random_flip_left_right", Kind.GEOMETRY)
class FlipLeftRight(GeometryOp):
    """Mirror horizontally with probability 0.5 (tf.image.random_flip_left_right); p gates that: p × 0.5 overall."""
    class Params(OpParams):
        pass

    def sample(self, rng, h, w):
        return (mat([[-1, 0, w - 1.0], [0, 1, 0], [0, 0, 1]]) if coin(rng, 0.5) else np.eye(3)), h, w


@register_op("random_flip_up_down", Kind.GEOMETRY)
class FlipUpDown(GeometryOp):
    """Mirror vertically with probability 0.5 (tf.image.random_flip_up_down); p gates that: p × 0.5 overall."""
    class Params(OpParams):
        pass

    def sample(self, rng, h, w):
        return (mat([[1, 0, 0], [0, -1, h - 1.0], [0, 0, 1]]) if coin(rng, 0.5) else np.eye(3)), h, w


@register_op("random_rotation", Kind.GEOMETRY)
class RandomRotation(GeometryOp):
    """Rotate about the centre by an angle from [-degrees, degrees] or [low, high] (positive = counter-clockwise)."""
    class Params(OpParams):
        degrees: range_of(-360.0, 360.0, symmetric=True) = Field((-10.0, 10.0), description="angle range")
        fill: Fill = fill_field()

    @property
    def fill(self):
        return self.params.fill

    def sample(self, rng, h, w):
        a = uniform(rng, *self.params.degrees) * (math.pi / 180.0)
        return about_centre(rotation(a), h, w), h, w


@register_op("random_affine", Kind.GEOMETRY)
class RandomAffine(GeometryOp):
    """Scale, shear, rotate and translate about the centre in one matrix; size kept."""
    class Params(OpParams):
        scale: range_of(0.05, 20.0) = Field((0.9, 1.1), description="zoom range (log-uniform)")
        translate: Shift = Field((0.0, 0.0), description="max shift as a fraction of [width, height] (not a range: "
                                                         "[0.2, 0.1] shifts x up to 20 %, y up to 10 %)")
        shear: range_of(-80.0, 80.0, symmetric=True) = Field((0.0, 0.0), description="x shear angle range, degrees")
        rotate: range_of(-360.0, 360.0, symmetric=True) = Field((0.0, 0.0), description="angle range, degrees")
        fill: Fill = fill_field()

    @property
    def fill(self):
        return self.params.fill

    def sample(self, rng, h, w):
        pr = self.params
        sc = log_uniform(rng, *pr.scale)
        sh = math.tan(uniform(rng, *pr.shear) * (math.pi / 180.0))
        rot = uniform(rng, *pr.rotate) * (math.pi / 180.0)
        tx = uniform(rng, -pr.translate[0], pr.translate[0]) * w
        ty = uniform(rng, -pr.translate[1], pr.translate[1]) * h
        fwd = translate(tx, ty) @ about_centre(rotation(rot) @ mat([[1, sh, 0], [0, 1, 0], [0, 0, 1]])
                                               @ mat([[sc, 0, 0], [0, sc, 0], [0, 0, 1]]), h, w)
        return np.linalg.inv(fwd), h, w


@register_op("random_crop", Kind.GEOMETRY)
class RandomCrop(GeometryOp):
    """Inception-style crop: a window of random area fraction and aspect ratio, resized to `size`."""
    class Params(OpParams):
        size: Size = Field(description="output [height, width]")
        area: range_of(0.001, 1.0) = Field((0.08, 1.0), description="window area as a fraction of the image")
        aspect: range_of(0.05, 20.0) = Field((3 / 4, 4 / 3), description="window width/height (log-uniform)")

    @property
    def size_limit(self):
        return self.params.size

    def sample(self, rng, h, w):
        area = uniform(rng, *self.params.area) * h * w
        r = log_uniform(rng, *self.params.aspect)
        # Clamping keeps the window inside the image; it slightly favours full-width/height windows.
        cw = min(math.sqrt(area * r), w)
        ch = min(math.sqrt(area / r), h)
        x0 = uniform(rng, 0.0, 1.0) * (w - cw)
        y0 = uniform(rng, 0.0, 1.0) * (h - ch)
        oh, ow = (float(v) for v in self.params.size)
        return window(y0, x0, ch, cw, oh, ow), oh, ow


@register_op("center_crop", Kind.GEOMETRY)
class CenterCrop(GeometryOp):
    """Cut the central `size` window (integer offsets: no resampling); smaller images are padded with fill."""
    class Params(OpParams):
        size: Size = Field(description="output [height, width]")
        fill: Fill = fill_field()

    @property
    def fill(self):
        return self.params.fill

    @property
    def size_limit(self):
        return self.params.size

    def sample(self, rng, h, w):
        oh, ow = (float(v) for v in self.params.size)
        x0, y0 = math.floor((w - ow) / 2.0), math.floor((h - oh) / 2.0)
        return translate(x0, y0), oh, ow


@register_op("resize", Kind.GEOMETRY)
class Resize(GeometryOp):
    """Resize to `size`; keep_aspect fits inside it. Downscaling is area-prefiltered (no aliasing)."""
    class Params(OpParams):
        size: Size = Field(description="[height, width]; with keep_aspect the box the image must fit in")
        keep_aspect: bool = Field(False, description="scale uniformly to fit inside size")
        method: Interpolation = Field("bilinear", description="interpolation")

    @property
    def interpolation(self):
        return self.params.method

    @property
    def size_limit(self):
        return self.params.size  # with keep_aspect, the box the output fits in

    def sample(self, rng, h, w):
        bh, bw = (float(v) for v in self.params.size)
        if self.params.keep_aspect:
            s = min(bh / h, bw / w)
            oh, ow = max(float(round(h * s)), 1.0), max(float(round(w * s)), 1.0)
        else:
            oh, ow = bh, bw
        return window(0.0, 0.0, h, w, oh, ow), oh, ow


@register_op("random_zoom", Kind.GEOMETRY)
class RandomZoom(GeometryOp):
    """Zoom about the centre by 1 + a factor from the range, per axis (Keras' RandomZoom: -0.2 zooms in 20 %)."""
    class Params(OpParams):
        height_factor: range_of(-0.9, 0.9, symmetric=True) = Field(
            (-0.2, 0.2), description="vertical zoom range: negative zooms in, positive out (x means [-x, x])")
        width_factor: range_of(-0.9, 0.9, symmetric=True) | None = Field(
            None, description="horizontal zoom range; unset: the vertical zoom (aspect kept)")
        fill: Fill = fill_field()

    @property
    def fill(self):
        return self.params.fill

    def sample(self, rng, h, w):
        zy = 1.0 + uniform(rng, *self.params.height_factor)
        zx = zy if self.params.width_factor is None else 1.0 + uniform(rng, *self.params.width_factor)
        # Output pixel (x, y) reads the input at the centre plus (zx, zy) times its offset from the centre.
        return about_centre(mat([[zx, 0, 0], [0, zy, 0], [0, 0, 1]]), h, w), h, w
