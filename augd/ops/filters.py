"""Albumentations' blur, noise and local-contrast staples: `motion_blur` (a line kernel at an angle), `iso_noise`
(a camera sensor's noise: hue jitter and Poisson brightness noise) and `clahe` (contrast-limited adaptive
histogram equalization of the luma). `motion_blur` and `clahe` are colour ops with both kernels, TF (the GPU path)
and OpenCV (the CPU path), held to the same pixels by tests/kernel_parity.py; `iso_noise` draws per pixel in the
graph from a stateless seed, the same TF code on both. None moves a pixel: boxes, masks and keypoints stay."""
from __future__ import annotations

import math

import numpy as np
from pydantic import Field, model_validator

from augd.lazycv import cv2
from augd.ops._tf import tf
from augd.ops.base import ColourOp, Domain, Kind, OpParams, SeededOp, range_of, register_op
from augd.ops.colour import LUMA, _clip, _np_clip
from augd.ops.sampling import uniform
from augd.ops.tfrand import split as tf_split, uniform as tf_uniform

__all__ = ["Clahe", "IsoNoise", "MotionBlur", "motion_kernel"]


def motion_kernel(size: int, k: float, angle: float) -> np.ndarray:
    """A size x size kernel (float32, sums to 1) of a line k px long through its centre at `angle` degrees,
    anti-aliased across its width; zero outside k (so one static size serves every drawn length)."""
    r = (size - 1) / 2.0
    y, x = np.mgrid[0:size, 0:size].astype(np.float64) - r
    a = math.radians(angle)
    along, across = x * math.cos(a) + y * math.sin(a), -x * math.sin(a) + y * math.cos(a)
    w = np.clip(1.0 - np.abs(across), 0.0, 1.0) * (np.abs(along) <= (k - 1) / 2.0 + 1e-9)
    return (w / w.sum()).astype(np.float32)


def _motion_kernel_tf(size: int, k, angle):
    """motion_kernel in graph ops (the same float64 arithmetic), for the TF kernel."""
    r = (size - 1) / 2.0
    grid = tf.range(size, dtype=tf.float64) - r
    y, x = grid[:, None], grid[None, :]
    a = tf.cast(angle, tf.float64) * (math.pi / 180.0)
    along, across = x * tf.cos(a) + y * tf.sin(a), -x * tf.sin(a) + y * tf.cos(a)
    w = tf.clip_by_value(1.0 - tf.abs(across), 0.0, 1.0) * tf.cast(
        tf.abs(along) <= (tf.cast(k, tf.float64) - 1.0) / 2.0 + 1e-9, tf.float64)
    return tf.cast(w / tf.reduce_sum(w), tf.float32)


@register_op("motion_blur", Kind.COLOUR)
class MotionBlur(ColourOp):
    """Blur along a line k px long (k odd, from `ksize`) at an angle from `angle` degrees: a camera or object
    moving during the exposure (Albumentations' MotionBlur, centred). Edges reflect (OpenCV's default border)."""
    example = "- motion_blur: {ksize: [3, 9], angle: [0, 180]}"

    class Params(OpParams):
        ksize: range_of(3, 31, kind=int) = Field((3, 7), description="[low, high] odd line length, pixels")
        angle: range_of(-360.0, 360.0) = Field((0.0, 180.0), description="[low, high] direction, degrees")

        @model_validator(mode="after")
        def _odd(self):
            if any(k % 2 == 0 for k in self.ksize):
                raise ValueError(f"ksize must be odd; got {list(self.ksize)}")
            return self

    label = "motion_blur"
    n_params = 2

    def describe(self, drawn):
        return [f"{self.label} {int(drawn.values[0])} px at {drawn.values[1]:.0f}°"]

    def draw(self, rng):
        lo, hi = self.params.ksize
        k = lo + 2 * min(int(uniform(rng, 0.0, (hi - lo) // 2 + 1)), (hi - lo) // 2)
        return (float(k), uniform(rng, *self.params.angle))

    def apply_tf(self, image, params):
        size = self.params.ksize[1]
        kernel = _motion_kernel_tf(size, params[0], params[1])
        r = size // 2
        h, w = tf.shape(image)[0], tf.shape(image)[1]

        def blurred():
            padded = tf.pad(image[None], [[0, 0], [r, r], [r, r], [0, 0]], mode="REFLECT")
            out = tf.nn.depthwise_conv2d(padded, tf.tile(kernel[:, :, None, None], [1, 1, 3, 1]), [1, 1, 1, 1],
                                         "VALID")
            return _clip(out[0])
        return tf.cond(tf.logical_and(h > r, w > r), blurred, lambda: image)   # too small to reflect: as it is

    def apply_np(self, x, params):
        size = self.params.ksize[1]
        if min(x.shape[:2]) <= size // 2:
            return x
        kernel = motion_kernel(size, float(params[0]), float(params[1]))
        return _np_clip(cv2.filter2D(x, -1, kernel, borderType=cv2.BORDER_REFLECT_101))


@register_op("iso_noise", Kind.COLOUR)
class IsoNoise(SeededOp):
    """A camera sensor's noise at high ISO (Albumentations' ISONoise, in HSV): each pixel's hue moved by a normal
    of sigma `color_shift` x `intensity` (turns of the hue circle), and its value brightened by Poisson noise of
    mean std(value) x `intensity` x 255 levels (its normal approximation), scaled by how far the value is from
    white."""
    example = "- iso_noise: {color_shift: [0.01, 0.05], intensity: [0.1, 0.5]}"

    class Params(OpParams):
        color_shift: range_of(0.0, 1.0) = Field((0.01, 0.05), description="[low, high] hue noise, turns")
        intensity: range_of(0.0, 2.0) = Field((0.1, 0.5), description="[low, high] strength of both noises")

    domain = Domain.FLOAT

    def apply(self, image, seed):
        s_c, s_i, s_h, s_v = tf_split(seed, 4)
        shift, strength = tf_uniform(s_c, *self.params.color_shift), tf_uniform(s_i, *self.params.intensity)
        hsv = tf.image.rgb_to_hsv(image)
        hue, sat, val = hsv[..., 0], hsv[..., 1], hsv[..., 2]
        hue = tf.math.floormod(hue + shift * strength * tf.random.stateless_normal(tf.shape(hue), s_h), 1.0)
        lam = tf.math.reduce_std(val) * strength * 255.0
        noise = tf.maximum(lam + tf.sqrt(lam) * tf.random.stateless_normal(tf.shape(val), s_v), 0.0) / 255.0
        val = tf.minimum(val + noise * (1.0 - val), 1.0)
        return _clip(tf.image.hsv_to_rgb(tf.stack([hue, sat, val], -1)))


def _clahe_tf(luma, clip: float, grid: int):
    """OpenCV's CLAHE of an HxW uint8 luma (as int32), step for step: the image reflected (101) to a multiple of
    the grid, each tile's 256-bin histogram clipped and its excess spread evenly (the remainder one level at a
    time, OpenCV's stride), each tile's cumulative table, then each pixel from its four nearest tiles' tables,
    bilinear in float32 and rounded half to even (cvRound)."""
    h, w = tf.shape(luma)[0], tf.shape(luma)[1]
    ph, pw = (-h) % grid, (-w) % grid
    # reflected in float32: MirrorPad has no int32 GPU kernel
    padded = tf.cast(tf.pad(tf.cast(luma, tf.float32), [[0, ph], [0, pw]], mode="REFLECT"), tf.int32)
    th, tw = (h + ph) // grid, (w + pw) // grid
    area = th * tw
    tiles = tf.reshape(tf.transpose(tf.reshape(padded, [grid, th, grid, tw]), [0, 2, 1, 3]), [grid * grid, -1])
    ids = tiles + 256 * tf.range(grid * grid)[:, None]
    hist = tf.reshape(tf.math.bincount(tf.reshape(ids, [-1]), minlength=256 * grid * grid,
                                       maxlength=256 * grid * grid), [grid * grid, 256])
    limit = tf.maximum(tf.cast(clip * tf.cast(area, tf.float32) / 256.0, tf.int32), 1)
    excess = tf.reduce_sum(tf.maximum(hist - limit, 0), axis=1, keepdims=True)
    hist = tf.minimum(hist, limit) + excess // 256
    residual = excess - (excess // 256) * 256
    step = tf.maximum(256 // tf.maximum(residual, 1), 1)
    levels = tf.range(256)[None, :]
    hist += tf.cast((levels % step == 0) & (levels // step < residual) & (residual > 0), tf.int32)
    lut = tf.cast(tf.clip_by_value(tf.round(tf.cast(tf.cumsum(hist, axis=1), tf.float32) *
                                            (255.0 / tf.cast(area, tf.float32))), 0, 255), tf.float32)

    def axis(n, t):
        f = (tf.cast(tf.range(n), tf.float32) + 0.5) / tf.cast(t, tf.float32) - 0.5   # OpenCV: x * inv_tw - 0.5
        lo = tf.cast(tf.floor(f), tf.int32)
        return tf.maximum(lo, 0), tf.minimum(lo + 1, grid - 1), f - tf.floor(f)
    y1, y2, ya = axis(h, th)
    x1, x2, xa = axis(w, tw)

    def at(ty, tx):
        return tf.gather(tf.reshape(lut, [-1]), (ty[:, None] * grid + tx[None, :]) * 256 + luma)
    xa, ya = xa[None, :], ya[:, None]
    top = at(y1, x1) * (1.0 - xa) + at(y1, x2) * xa
    bottom = at(y2, x1) * (1.0 - xa) + at(y2, x2) * xa
    return tf.clip_by_value(tf.round(top * (1.0 - ya) + bottom * ya), 0.0, 255.0)


@register_op("clahe", Kind.COLOUR)
class Clahe(ColourOp):
    """Contrast-limited adaptive histogram equalization of the luma (OpenCV's CLAHE on a `grid` x `grid` of tiles,
    its clip limit drawn from `clip_limit`), each channel moved by the luma's change: local contrast raised where
    a global curve would wash out (Albumentations' CLAHE, Keras' and torchvision's equalize, locally)."""
    example = "- clahe: {clip_limit: [1, 4], grid: 8}"

    class Params(OpParams):
        clip_limit: range_of(1.0, 40.0) = Field((1.0, 4.0), description="[low, high] histogram clip limit (OpenCV's "
                                                                        "clipLimit)")
        grid: int = Field(8, ge=1, le=32, description="tiles per side (OpenCV's tileGridSize)")

    label = "clahe"
    n_params = 1

    def describe(self, drawn):
        return [f"{self.label} clip {drawn.values[0]:.1f}, {self.params.grid}x{self.params.grid}"]

    def draw(self, rng):
        return (uniform(rng, *self.params.clip_limit),)

    def apply_tf(self, image, params):
        luma = tf.round(tf.reduce_sum(image * tf.constant(LUMA, tf.float32), axis=-1) * 255.0)
        grid = self.params.grid

        def equalized():
            out = _clahe_tf(tf.cast(luma, tf.int32), params[0], grid)
            return _clip(image + ((out - luma) / 255.0)[..., None])
        h, w = tf.shape(image)[0], tf.shape(image)[1]
        return tf.cond(tf.logical_and(h >= 2 * grid, w >= 2 * grid), equalized, lambda: image)

    def apply_np(self, x, params):
        grid = self.params.grid
        if min(x.shape[:2]) < 2 * grid:
            return x
        luma = np.rint(cv2.transform(x, LUMA.astype(np.float32)[None]).reshape(x.shape[:2]) * 255.0)
        out = cv2.createCLAHE(float(params[0]), (grid, grid)).apply(luma.astype(np.uint8)).astype(np.float32)
        x += ((out - luma) / 255.0)[..., None]
        return _np_clip(x)
