"""Geometric ops (augd.ops.base.GeometryOp). Each samples a 3x3 matrix mapping *output* pixel coordinates
to *input* ones (pixel centres at integers, the convention of ImageProjectiveTransformV3) plus its output
size, and says its border fill and interpolation. The engine multiplies consecutive matrices and resamples
once: one warp, one interpolation."""
from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, TypeAdapter, WithJsonSchema, model_serializer, model_validator

import numpy as np

from augd.ops.base import (Fill, GeometryOp, Interpolation, Kind, OpParams, ScaledPixels, Size, range_of,
                           register_op)
from augd.ops.sampling import coin, log_uniform, uniform
from augd.ops.windows import covering, tf_window, uniform_int
from augd.ops.words import signed, size


def _both(v):
    return (v, v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v


_Fraction = Annotated[float, Field(ge=0.0, le=1.0)]
#: [x, y] maximum shifts as fractions of width and height; one number means both.
Shift = Annotated[tuple[_Fraction, _Fraction], BeforeValidator(_both), WithJsonSchema(
    {"anyOf": [TypeAdapter(_Fraction).json_schema(), TypeAdapter(tuple[_Fraction, _Fraction]).json_schema()]})]


def fill_field(default: Fill = 0):
    return Field(default, description="0-255 constant, mean (the input's mean colour), or reflect | nearest | wrap")


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


class _Coin(OpParams):
    probability: float = Field(0.5, ge=0.0, le=1.0, description="the flip's own coin (0.5 as tf.image's)")

    @model_serializer(mode="wrap")
    def _without_default(self, handler):
        # absent at 0.5: a pipeline without it keeps its serialized form and sha256
        out = handler(self)
        if self.probability == 0.5:
            out.pop("probability", None)
        return out


class _Flip(GeometryOp):
    """A mirror along `axis` (0: x, left-right; 1: y, up-down) on its own coin."""
    axis: int
    Params = _Coin

    def sample(self, rng, h, w):
        if not coin(rng, self.params.probability):
            return np.eye(3), h, w
        m = np.eye(3)
        m[self.axis, self.axis], m[self.axis, 2] = -1.0, (w, h)[self.axis] - 1.0
        return mat(m), h, w

    def describe(self, drawn):
        a = self.axis   # its own coin, not p's
        return [self.label if drawn.matrix[a, a] < 0 else f"{self.label}: no (coin)"]


@register_op("random_flip_left_right", Kind.GEOMETRY)
class FlipLeftRight(_Flip):
    """Mirror horizontally with `probability` (default 0.5, as tf.image's); p gates it: p × probability overall.
    The OD API's random_horizontal_flip sets its own probability."""
    label = "flip LR"
    axis = 0


@register_op("random_flip_up_down", Kind.GEOMETRY)
class FlipUpDown(_Flip):
    """Mirror vertically with `probability` (default 0.5, as tf.image's); p gates it: p × probability overall.
    The OD API's random_vertical_flip sets its own probability."""
    label = "flip UD"
    axis = 1


@register_op("random_rotation", Kind.GEOMETRY)
class RandomRotation(GeometryOp):
    """Rotate about the centre by an angle from [-degrees, degrees] or [low, high] (positive = counter-clockwise)."""
    label = "rot"

    class Params(OpParams):
        degrees: range_of(-360.0, 360.0, symmetric=True) = Field((-10.0, 10.0), description="angle range")
        fill: Fill = fill_field()

    @property
    def fill(self):
        return self.params.fill

    def sample(self, rng, h, w):
        a = uniform(rng, *self.params.degrees) * (math.pi / 180.0)
        return about_centre(rotation(a), h, w), h, w

    def describe(self, drawn):
        m = drawn.matrix
        return [f"{self.label} {signed(math.degrees(math.atan2(m[1, 0], m[0, 0])), 1)}°"]


@register_op("random_rotation90", Kind.GEOMETRY)
class RandomRotation90(GeometryOp):
    """A quarter turn counter-clockwise (the Object Detection API's random_rotation90, tf.image.rot90): height and
    width swap, every pixel moves whole (no resampling); `p` is the API's `probability` (its default: 0.5)."""
    label = "rot90"
    example = "- random_rotation90: {p: 0.5}"
    quarter_turn = True

    class Params(OpParams):
        pass

    def sample(self, rng, h, w):
        # output (x', y') <- input (w - 1 - y', x'): np.rot90's out[i, j] = in[j, w - 1 - i]
        return mat([[0, -1, w - 1.0], [1, 0, 0], [0, 0, 1]]), w, h

    def describe(self, drawn):
        return [self.label]


#: random_affine's parameters added after its first form: drawn last and serialized only when set
_LATER_AFFINE = ("shear_y", "shift_x", "shift_y")


@register_op("random_affine", Kind.GEOMETRY)
class RandomAffine(GeometryOp):
    """Scale, shear, rotate and translate about the centre in one matrix; size kept."""
    label = "affine"

    class Params(ScaledPixels):   # shift_x, shift_y: pixels, scaled to the image with a `reference`
        scale: range_of(0.05, 20.0) = Field((0.9, 1.1), description="zoom range (log-uniform)")
        translate: Shift = Field((0.0, 0.0), description="max shift as a fraction of [width, height] (not a range: "
                                                         "[0.2, 0.1] shifts x up to 20 %, y up to 10 %)")
        shear: range_of(-80.0, 80.0, symmetric=True) = Field((0.0, 0.0), description="x shear angle range, degrees")
        shear_y: range_of(-80.0, 80.0, symmetric=True) = Field((0.0, 0.0), description="y shear angle range, "
                                                                                       "degrees")
        rotate: range_of(-360.0, 360.0, symmetric=True) = Field((0.0, 0.0), description="angle range, degrees")
        shift_x: range_of(-8192.0, 8192.0, symmetric=True) = Field((0.0, 0.0), description="x shift range in "
                                                                   "pixels, added to translate's ([v, v]: exactly v)")
        shift_y: range_of(-8192.0, 8192.0, symmetric=True) = Field((0.0, 0.0), description="y shift range in "
                                                                   "pixels, added to translate's")
        fill: Fill = fill_field()

        @model_serializer(mode="wrap")
        def _without_default(self, handler):
            # absent when unset: a pipeline without them keeps its serialized form and sha256
            out = handler(self)
            for key in _LATER_AFFINE:
                if tuple(getattr(self, key)) == (0.0, 0.0):
                    out.pop(key, None)
            if self.reference is None:
                out.pop("reference", None)
            return out

    @property
    def fill(self):
        return self.params.fill

    def _draws(self, rng, h, w):
        pr = self.params
        sc = log_uniform(rng, *pr.scale)
        sh = math.tan(uniform(rng, *pr.shear) * (math.pi / 180.0))
        rot = uniform(rng, *pr.rotate) * (math.pi / 180.0)
        tx = uniform(rng, -pr.translate[0], pr.translate[0]) * w
        ty = uniform(rng, -pr.translate[1], pr.translate[1]) * h
        # drawn last and only when set: a chain without them draws what it always drew
        shy = math.tan(uniform(rng, *pr.shear_y) * (math.pi / 180.0)) if tuple(pr.shear_y) != (0.0, 0.0) else 0.0
        tx += pr.pixels(uniform(rng, *pr.shift_x), h, w) if tuple(pr.shift_x) != (0.0, 0.0) else 0.0
        ty += pr.pixels(uniform(rng, *pr.shift_y), h, w) if tuple(pr.shift_y) != (0.0, 0.0) else 0.0
        return sc, sh, rot, tx, ty, shy

    def skip(self, rng, h, w):
        self._draws(rng, h, w)

    def sample(self, rng, h, w):
        sc, sh, rot, tx, ty, shy = self._draws(rng, h, w)
        fwd = translate(tx, ty) @ about_centre(rotation(rot) @ mat([[1, 0, 0], [shy, 1, 0], [0, 0, 1]])
                                               @ mat([[1, sh, 0], [0, 1, 0], [0, 0, 1]])
                                               @ mat([[sc, 0, 0], [0, sc, 0], [0, 0, 1]]), h, w)
        return np.linalg.inv(fwd), h, w

    def describe(self, drawn):
        # The parts are read back from the matrix the graph warps with, not re-drawn: A = scale R Shy Shx.
        ih, iw = drawn.in_size
        fwd = np.linalg.inv(drawn.matrix)
        a = fwd[:2, :2]
        scale = math.sqrt(abs(np.linalg.det(a)))
        base, turn = math.atan2(a[1, 0], a[0, 0]), math.acos(min(1.0, scale / math.hypot(a[0, 0], a[1, 0])))
        pr = self.params
        fits = []
        for rot in (base, base - turn, base + turn):   # R^T (a00, a10) = scale (1, shy): two roots may fit
            c, s = math.cos(rot), math.sin(rot)
            shx, shy = (c * a[0, 1] + s * a[1, 1]) / scale, (-s * a[0, 0] + c * a[1, 0]) / scale
            miss = abs((-s * a[0, 1] + c * a[1, 1]) / scale - (1.0 + shx * shy))
            drawable = all(lo - 1e-6 <= math.degrees(v) <= hi + 1e-6 for v, (lo, hi) in (
                (math.atan(shx), pr.shear), (math.atan(shy), pr.shear_y), (rot, pr.rotate)))
            fits.append((miss > 1e-6, not drawable, abs(shx) + abs(shy), rot, shx, shy))
        *_, rot, shx, shy = min(fits)   # the one the ranges could draw, with the least shear
        centre = np.array([(iw - 1.0) / 2.0, (ih - 1.0) / 2.0])
        tx, ty = fwd[:2, 2] - centre + a @ centre
        out = [f"{self.label} ×{scale:.2f} rot {signed(math.degrees(rot), 1)}°"]
        if (tuple(pr.shear), tuple(pr.translate)) != ((0.0, 0.0), (0.0, 0.0)) or any(
                tuple(getattr(pr, key)) != (0.0, 0.0) for key in _LATER_AFFINE):
            y = f",{signed(math.degrees(math.atan(shy)), 1)}°" if tuple(pr.shear_y) != (0.0, 0.0) else ""
            out.append(f"  shear {signed(math.degrees(math.atan(shx)), 1)}°{y} shift {signed(tx, 0)},{signed(ty, 0)}")
        return out


@register_op("random_crop", Kind.GEOMETRY)
class RandomCrop(GeometryOp):
    """Inception-style crop: a window of random area fraction and aspect ratio, resized to `size` or kept at its own
    size (box-aware: SSD's). `sampler: tf` draws windows as tf.image.sample_distorted_bounding_box does (what the OD
    API's random_crop_image and ssd_random_crop call)."""
    example = ("- random_crop: {size: [300, 300], area: [0.1, 1.0], aspect: [0.5, 2.0], min_object_covered: 0.5}\n"
               "- random_crop: {area: [0.1, 1.0], aspect: [0.5, 2.0], min_object_covered: 0.3, sampler: tf}")
    label = "crop"

    class Params(OpParams):
        size: Size | None = Field(None, description="output [height, width]; unset: the window's own size, in whole "
                                                    "pixels, unresampled (as the OD API keeps it)")
        area: range_of(0.001, 1.0) = Field((0.08, 1.0), description="window area as a fraction of the image")
        aspect: range_of(0.05, 20.0) = Field((3 / 4, 4 / 3), description="window width/height (log-uniform; "
                                                                         "uniform with sampler: tf)")
        sampler: Literal["augd", "tf"] = Field("augd", description="augd: area uniform, aspect log-uniform, clamped "
                                               "into the image; tf: tf.image.sample_distorted_bounding_box's (aspect "
                                               "uniform, then a whole-pixel height uniform in what the area range "
                                               "allows; a window that does not fit is redrawn, up to attempts)")
        min_object_covered: float | None = Field(
            None, ge=0.0, le=1.0, description="with boxes: the window must hold at least this fraction of some box's "
                                              "area (tf.image.sample_distorted_bounding_box); unset: boxes are ignored")
        attempts: int = Field(100, ge=1, le=10000, description="windows drawn for min_object_covered before the "
                                                               "whole image is taken")
        min_visibility: float | None = Field(
            None, ge=0.0, le=1.0, description="when this crop applies, objects left with under this share of "
                                              "themselves are dropped, above annotations.min_visibility (the OD "
                                              "API's per-crop overlap_thresh); unset: the job's alone")

        @model_validator(mode="after")
        def _attempts_need_cover(self):
            if "attempts" in self.model_fields_set and self.min_object_covered is None and self.sampler != "tf":
                raise ValueError("attempts applies only with min_object_covered or sampler: tf; set both or neither")
            return self

        @model_serializer(mode="wrap")
        def _without_unset_cover(self, handler):
            # Absent unless set: a pipeline without them keeps its serialized form and sha256.
            out = handler(self)
            if self.min_object_covered is None and self.sampler != "tf":
                out.pop("attempts", None)
            if self.min_object_covered is None:
                out.pop("min_object_covered", None)
            if self.size is None:
                out.pop("size", None)
            if self.sampler == "augd":
                out.pop("sampler", None)
            if self.min_visibility is None:
                out.pop("min_visibility", None)
            return out

    @property
    def size_limit(self):
        return self.params.size

    @property
    def uses_boxes(self):
        return self.params.min_object_covered is not None

    def _draw(self, rng, h, w):
        """One candidate window (x0, y0, width, height) in input pixel edges: four draws."""
        area = uniform(rng, *self.params.area) * h * w
        r = log_uniform(rng, *self.params.aspect)
        # Clamping keeps the window inside the image; it slightly favours full-width/height windows.
        cw = min(math.sqrt(area * r), w)
        ch = min(math.sqrt(area / r), h)
        x0 = uniform(rng, 0.0, 1.0) * (w - cw)
        y0 = uniform(rng, 0.0, 1.0) * (h - ch)
        return x0, y0, cw, ch

    def sample(self, rng, h, w, boxes=None):
        p = self.params
        if p.sampler == "tf":
            rng.random()   # one draw of its own: this op's fork is not another op's
            win = tf_window(rng.fork(), h, w, p.area, p.aspect, p.min_object_covered,
                            None if boxes is None else np.asarray(boxes, np.float64), p.attempts)
        else:
            win = self._draw(rng, h, w)
            if p.min_object_covered is not None and boxes is not None and len(boxes):
                win = covering(win, rng, h, w, np.asarray(boxes, np.float64), p.min_object_covered, p.attempts,
                                self._draw)
        x0, y0, cw, ch = win
        if p.size is None:   # the window itself, in whole pixels: a translation, no resampling
            x0, y0 = float(math.floor(x0)), float(math.floor(y0))
            cw, ch = float(max(min(round(cw), w - x0), 1)), float(max(min(round(ch), h - y0), 1))
            return translate(x0, y0), ch, cw
        oh, ow = (float(v) for v in p.size)
        return window(y0, x0, ch, cw, oh, ow), oh, ow

    def describe(self, drawn):
        m, (ih, iw), (oh, ow) = drawn.matrix, drawn.in_size, drawn.out_size
        cw, ch = m[0, 0] * ow, m[1, 1] * oh  # the window, back from window()'s matrix
        x0, y0 = m[0, 2] - 0.5 * m[0, 0] + 0.5, m[1, 2] - 0.5 * m[1, 1] + 0.5
        return [f"{self.label} {cw * ch / (ih * iw):.2f} area @ ({x0:.0f},{y0:.0f})",
                f"  {size((ch, cw))} → {size((oh, ow))}"]


@register_op("random_crop_to_aspect_ratio", Kind.GEOMETRY)
class RandomCropToAspectRatio(GeometryOp):
    """The Object Detection API's random_crop_to_aspect_ratio: the largest window of `aspect_ratio` (width/height)
    the image holds, at a uniform whole-pixel place, unresampled."""
    label = "aspect crop"
    example = "- random_crop_to_aspect_ratio: {aspect_ratio: 1.0}"

    class Params(OpParams):
        aspect_ratio: float = Field(1.0, gt=0.0, le=100.0, description="the window's width / height")
        min_visibility: float | None = Field(
            None, ge=0.0, le=1.0, description="when this crop applies, objects left with under this share of "
                                              "themselves are dropped, above annotations.min_visibility (the OD "
                                              "API's per-crop overlap_thresh); unset: the job's alone")

    def sample(self, rng, h, w):
        a, hi, wi = self.params.aspect_ratio, int(round(h)), int(round(w))
        th = hi if wi / hi >= a else max(int(round(wi / a)), 1)    # as the API: round(width / aspect)
        tw = wi if wi / hi <= a else max(int(round(hi * a)), 1)
        y0, x0 = uniform_int(rng, hi - th + 1), uniform_int(rng, wi - tw + 1)
        return translate(float(x0), float(y0)), float(th), float(tw)

    def describe(self, drawn):
        return [f"{self.label} {size(drawn.out_size)}"]


@register_op("random_expand", Kind.GEOMETRY)
class RandomExpand(GeometryOp):
    """SSD's zoom-out: the image at a random place on a canvas `ratio` times its size (per side), filled with `fill`."""
    example = "- random_expand: {ratio: [1, 4], p: 0.5}"

    starts_warp = True   # its canvas is filled, not the source beyond an earlier crop

    class Params(OpParams):
        ratio: range_of(1.0, 16.0) = Field((1.0, 4.0), description="canvas side as a multiple of the image's "
                                                                   "(uniform; SSD and the OD API: [1, 4])")
        fill: Annotated[int, Field(ge=0, le=255)] = Field(
            0, description="grey level 0-255 of the canvas; 0 shares the warp of the crops, flips and resizes "
                           "beside it (their border is 0), another grey (the OD API pads with the mean) runs "
                           "its own warp")

    @property
    def fill(self):
        return self.params.fill

    @property
    def growth(self):
        return self.params.ratio[1]

    def sample(self, rng, h, w):
        r = uniform(rng, *self.params.ratio)
        oh, ow = max(float(round(h * r)), h), max(float(round(w * r)), w)
        # Whole-pixel offsets: the image lands on the canvas unresampled (as the OD API pads it).
        left = min(math.floor(uniform(rng, 0.0, 1.0) * (ow - w + 1.0)), ow - w)
        top = min(math.floor(uniform(rng, 0.0, 1.0) * (oh - h + 1.0)), oh - h)
        return translate(-left, -top), oh, ow

    def describe(self, drawn):
        return [self.label]  # the name alone, as the preview has always written it (ratio and place not shown)


@register_op("center_crop", Kind.GEOMETRY)
class CenterCrop(GeometryOp):
    """Cut the central `size` window (integer offsets: no resampling); smaller images are padded with fill."""
    label = "center crop"

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

    def describe(self, drawn):
        return [f"{self.label} {size(drawn.out_size)}"]


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

    def describe(self, drawn):
        return [f"{self.label} {size(drawn.in_size)} → {size(drawn.out_size)}"]


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

    def describe(self, drawn):
        return [self.label]  # the name alone, as the preview has always written it (factors not shown)
