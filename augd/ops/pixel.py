"""Ops on uint8 pixels (SeededOps on Domain.UINT8): bit-level and histogram transforms, cutout and JPEG artefacts.

Those that draw nothing in the graph also have a NumPy/OpenCV kernel (SeededOp.apply_np), which CPU hosts run with
the warps and colour steps around them: the same integer arithmetic as their TF kernel, so the same bytes, at a
fraction of its cost (a lookup table or a window's slice instead of whole-image planes of int32: bench/README.md).
"""
from __future__ import annotations

import math
from typing import Annotated, Literal

import numpy as np
from pydantic import Field

from augd.lazycv import cv2
from augd.ops._tf import tf
from augd.ops.base import Kind, OpParams, SeededOp, range_of, register_op
from augd.ops.sampling import log_uniform, uniform


@register_op("solarize", Kind.PIXEL)
class Solarize(SeededOp):
    """Invert every pixel value at or above `threshold` (PIL.ImageOps.solarize)."""
    class Params(OpParams):
        threshold: int = Field(128, ge=0, le=256, description="0-255; 256 leaves the image unchanged")

    def apply(self, image, seed):
        return tf.where(tf.cast(image, tf.int32) >= self.params.threshold, 255 - image, image)

    def apply_np(self, image, region=None):
        return lut_np(image, solarize_lut(self.params.threshold))


@register_op("posterize", Kind.PIXEL)
class Posterize(SeededOp):
    """Keep only the top `bits` bits of each channel (PIL.ImageOps.posterize)."""
    class Params(OpParams):
        bits: int = Field(4, ge=1, le=8)

    def apply(self, image, seed):
        mask = (0xFF << (8 - self.params.bits)) & 0xFF
        return tf.bitwise.bitwise_and(image, tf.constant(mask, tf.uint8))

    def apply_np(self, image, region=None):
        return np.bitwise_and(image, np.uint8((0xFF << (8 - self.params.bits)) & 0xFF), out=image)


@register_op("equalize", Kind.PIXEL)
class Equalize(SeededOp):
    """Histogram-equalize each channel (the PIL / torchvision algorithm)."""
    class Params(OpParams):
        pass

    def apply(self, image, seed):
        # concat, not stack: TensorFlow's GPU Pack has no uint8 kernel (Concat does)
        return tf.concat([self._channel(image[..., c])[..., None] for c in range(3)], axis=-1)

    @staticmethod
    def _channel(ch):
        flat = tf.reshape(tf.cast(ch, tf.int32), [-1])
        hist = tf.math.bincount(flat, minlength=256, maxlength=256, dtype=tf.int32)
        nonzero = tf.boolean_mask(hist, hist > 0)
        step = (tf.reduce_sum(nonzero) - nonzero[-1]) // 255
        safe = tf.maximum(step, 1)
        lut = (tf.cumsum(hist) + safe // 2) // safe
        lut = tf.clip_by_value(tf.concat([[0], lut[:-1]], 0), 0, 255)
        out = tf.cast(tf.gather(lut, tf.cast(ch, tf.int32)), tf.uint8)
        return tf.where(step > 0, out, ch)  # a single-valued channel stays as it is

    def apply_np(self, image, region=None):
        return equalize_np(image)


@register_op("channel_shuffle", Kind.PIXEL)
class ChannelShuffle(SeededOp):
    """Permute R, G, B randomly."""
    class Params(OpParams):
        pass

    def apply(self, image, seed):
        perm = tf.argsort(tf.random.stateless_uniform([3], seed))
        # gathered in float32: TensorFlow's GPU Gather has no uint8 kernel; the values stay exact
        return tf.cast(tf.gather(tf.cast(image, tf.float32), perm, axis=-1), tf.uint8)


@register_op("invert", Kind.PIXEL)
class Invert(SeededOp):
    """Negative: 255 - value."""
    class Params(OpParams):
        pass

    def apply(self, image, seed):
        return 255 - image

    def apply_np(self, image, region=None):
        return np.subtract(np.uint8(255), image, out=image)


@register_op("random_erasing", Kind.PIXEL)
class RandomErasing(SeededOp):
    """Cutout: overwrite one random rectangle (area and aspect ranges) with a constant or noise. The rectangle is
    drawn on the host, so a keypoint it covers is written as not visible."""
    covers = True

    class Params(OpParams):
        area: range_of(0.0, 1.0) = Field((0.02, 0.33), description="rectangle area as a fraction of the image")
        aspect: range_of(0.05, 20.0) = Field((0.3, 3.3), description="width/height (log-uniform)")
        value: int | Literal["random"] = Field(0, description="0-255 fill, or 'random' noise")

    def region(self, rng, h, w):
        area = uniform(rng, *self.params.area) * h * w
        r = log_uniform(rng, *self.params.aspect)
        ew, eh = min(math.sqrt(area * r), w), min(math.sqrt(area / r), h)
        x0 = math.floor(uniform(rng, 0.0, 1.0) * (w - ew))
        y0 = math.floor(uniform(rng, 0.0, 1.0) * (h - eh))
        return float(x0), float(y0), float(x0 + round(ew)), float(y0 + round(eh))

    def apply(self, image, seed, region=None):
        shape = tf.shape(image)
        x0, y0, x1, y1 = tf.unstack(tf.cast(region, tf.float32))
        ys = tf.range(tf.cast(shape[0], tf.float32))[:, None, None]
        xs = tf.range(tf.cast(shape[1], tf.float32))[None, :, None]
        inside = (ys >= y0) & (ys < y1) & (xs >= x0) & (xs < x1)
        if self.params.value == "random":
            fill = tf.cast(tf.random.stateless_uniform(shape, seed, 0, 256, dtype=tf.int32), tf.uint8)
        else:
            fill = tf.fill(shape, tf.constant(self.params.value, tf.uint8))
        return tf.where(inside, fill, image)

    def describe(self, drawn):
        if not drawn.values:
            return [self.label]
        x0, y0, x1, y1 = drawn.values
        return [f"{self.label} {x1 - x0:g}x{y1 - y0:g} at ({x0:g}, {y0:g})"]


@register_op("random_black_patches", Kind.PIXEL)
class RandomBlackPatches(SeededOp):
    """The Object Detection API's random_black_patches: up to `max_black_patches` square patches, each there with
    `probability`, of side `size_to_image_ratio` x the image's shorter side, at a uniform place that fits. Unlike
    the OD API, which leaves boxes as they are, boxes, masks and keypoints lose what a patch hides."""
    covers = True
    example = "- random_black_patches: {max_black_patches: 10, probability: 0.5, size_to_image_ratio: 0.1}"

    class Params(OpParams):
        max_black_patches: int = Field(10, ge=1, le=64, description="patches tried per image")
        probability: float = Field(0.5, ge=0.0, le=1.0, description="the chance of each patch")
        size_to_image_ratio: float = Field(0.1, gt=0.0, lt=1.0, description="a patch's side over the image's "
                                                                             "shorter side")
        value: int = Field(0, ge=0, le=255, description="the patches' grey level (the OD API's: 0)")

    def holes(self) -> int:
        return self.params.max_black_patches

    def region(self, rng, h, w):
        p = self.params
        side = int(min(h, w) * p.size_to_image_ratio)    # the OD API truncates: box_size is an int
        out = []
        for _ in range(p.max_black_patches):
            on = uniform(rng, 0.0, 1.0) <= p.probability
            y0 = int(uniform(rng, 0.0, 1.0 - p.size_to_image_ratio) * h)
            x0 = int(uniform(rng, 0.0, 1.0 - p.size_to_image_ratio) * w)
            out += [float(x0), float(y0), float(x0 + side), float(y0 + side)] if on and side > 0 else [0.0] * 4
        return tuple(out)

    def apply(self, image, seed, region=None):
        return fill_holes(image, region, self.params.value)

    def apply_np(self, image, region=None):
        return fill_holes_np(image, region, self.params.value)

    def describe(self, drawn):
        return [f"{self.label} {_holes_drawn(drawn)}" if drawn.values else self.label]


@register_op("coarse_dropout", Kind.PIXEL)
class CoarseDropout(SeededOp):
    """Albumentations' CoarseDropout: a number of holes drawn from `holes`, each of a height and a width drawn as
    fractions of the image's, at a uniform place inside it, filled with `fill` (a grey level, or 'random' noise).
    Boxes, masks and keypoints lose what the holes hide (the occlusion rule: `min_visibility`)."""
    covers = True
    example = "- coarse_dropout: {holes: [1, 8], height: [0.05, 0.15], width: [0.05, 0.15]}"

    class Params(OpParams):
        holes: range_of(1, 64, kind=int) = Field((1, 8), description="[low, high] number of holes")
        height: range_of(0.0, 1.0) = Field((0.05, 0.15), description="[low, high] hole height / image height")
        width: range_of(0.0, 1.0) = Field((0.05, 0.15), description="[low, high] hole width / image width")
        fill: Annotated[int, Field(ge=0, le=255)] | Literal["random"] = Field(0, description="0-255 grey level, "
                                                                                          "or 'random' noise")

    def holes(self) -> int:
        return self.params.holes[1]

    def region(self, rng, h, w):
        p = self.params
        n = min(p.holes[1], p.holes[0] + int(uniform(rng, 0.0, 1.0) * (p.holes[1] - p.holes[0] + 1)))
        out = []
        for k in range(p.holes[1]):
            hh = max(1, round(uniform(rng, *p.height) * h))
            hw = max(1, round(uniform(rng, *p.width) * w))
            y0 = math.floor(uniform(rng, 0.0, 1.0) * (h - hh + 1))
            x0 = math.floor(uniform(rng, 0.0, 1.0) * (w - hw + 1))
            out += [float(x0), float(y0), float(x0 + hw), float(y0 + hh)] if k < n else [0.0] * 4
        return tuple(out)

    def apply(self, image, seed, region=None):
        if self.params.fill != "random":
            return fill_holes(image, region, self.params.fill)
        # noise drawn over the whole image, then shown in the holes: the draw is the image's (its bytes kept)
        fill = tf.cast(tf.random.stateless_uniform(tf.shape(image), seed, 0, 256, dtype=tf.int32), tf.uint8)
        return tf.where(_in_holes(image, region), fill, image)

    @property
    def apply_np(self):
        """The grey holes' CPU kernel; noise is drawn in the graph (None: TF's kernel on both)."""
        if self.params.fill == "random":
            return None
        return lambda image, region=None: fill_holes_np(image, region, self.params.fill)

    def describe(self, drawn):
        return [f"{self.label} {_holes_drawn(drawn)} hole(s)" if drawn.values else self.label]


def fill_holes(image, region, value: int):
    """The image with each of the region's holes ((x0, y0, x1, y1) each, the pixels whose index lies in
    [x0, x1) x [y0, y1); an empty hole, x1 <= x0, none) set to the grey `value`: one slice update per hole drawn, so
    the work is the holes' pixels, not image-sized planes (the same pixels as tf.where over _in_holes)."""
    shape = tf.shape(image)
    rects = tf.reshape(tf.cast(region, tf.float32), [-1, 4])
    rects = tf.boolean_mask(rects, rects[:, 2] > rects[:, 0])
    hw = tf.cast(tf.stack([shape[1], shape[0], shape[1], shape[0]]), tf.float32)
    rects = tf.cast(tf.clip_by_value(tf.math.ceil(rects), 0.0, hw), tf.int32)   # pixel indices, in the image

    def body(k, img):
        x0, y0, x1, y1 = tf.unstack(rects[k])
        x1, y1 = tf.maximum(x1, x0), tf.maximum(y1, y0)
        return k + 1, update_window(img, x0, y0, x1, y1, tf.fill([y1 - y0, x1 - x0, 3], tf.constant(value, tf.uint8)))

    return tf.while_loop(lambda k, _: k < tf.shape(rects)[0], body, [tf.constant(0), image],
                         shape_invariants=[tf.TensorShape([]), tf.TensorShape([None, None, 3])])[1]


def fill_holes_np(image, region, value: int):
    """fill_holes' CPU kernel (the same holes: indices from the float32 values' ceiling, clipped to the image)."""
    h, w = image.shape[:2]
    rects = np.asarray(region, np.float32).reshape(-1, 4)
    rects = np.clip(np.ceil(rects[rects[:, 2] > rects[:, 0]]), 0, np.array([w, h, w, h], np.float32)).astype(int)
    for x0, y0, x1, y1 in rects.tolist():
        image[y0:y1, x0:x1] = value
    return image


def lut_np(image, table):
    """A 256-entry uint8 table (per channel when 256 x 3) applied to every value of a uint8 HxWx3 array."""
    return cv2.LUT(image, table.reshape(256, 1, -1))


def solarize_lut(threshold: float) -> np.ndarray:
    """Solarize's table: each value at or above the threshold (compared in float32, as the TF kernel does)
    inverted."""
    v = np.arange(256)
    return np.where(v.astype(np.float32) >= np.float32(threshold), 255 - v, v).astype(np.uint8)


def equalize_np(image):
    """Equalize._channel's integer arithmetic per channel, applied as one table (a single-valued channel kept)."""
    luts = np.empty((256, 3), np.uint8)
    for c in range(3):
        hist = _histogram(image, c)
        total, last = int(hist.sum()), int(hist[np.flatnonzero(hist)[-1]])
        step = (total - last) // 255
        if step <= 0:
            luts[:, c] = np.arange(256)
            continue
        lut = (np.cumsum(hist) + step // 2) // step
        luts[:, c] = np.clip(np.concatenate(([0], lut[:-1])), 0, 255)
    return lut_np(image, luts)


def _histogram(image, c: int) -> np.ndarray:
    """Channel c's 256 counts (int64). OpenCV's counts are float32: exact below 2**24 pixels, NumPy's past it."""
    if image.shape[0] * image.shape[1] < 1 << 24:
        return cv2.calcHist([image], [c], None, [256], [0, 256]).ravel().astype(np.int64)
    return np.bincount(image[..., c].ravel(), minlength=256)


def update_window(image, x0, y0, x1, y1, value):
    """The image with its window [y0, y1) x [x0, x1) replaced by `value` (of that window's shape): a strided
    slice update, which writes the window's pixels only (TensorFlow reuses the image's buffer where nothing else
    holds it)."""
    return tf.raw_ops.TensorStridedSliceUpdate(input=image, begin=tf.stack([y0, x0, 0]), end=tf.stack([y1, x1, 3]),
                                               strides=tf.constant([1, 1, 1]), value=value)


def _in_holes(image, region):
    """Which pixels (H x W x 1, bool) fall in any of the region's holes: (x0, y0, x1, y1) each, an empty hole
    (x1 <= x0) none."""
    shape = tf.shape(image)
    rects = tf.reshape(tf.cast(region, tf.float32), [-1, 4])
    rects = tf.boolean_mask(rects, rects[:, 2] > rects[:, 0])   # only the drawn ones: one H x W plane each
    ys = tf.range(tf.cast(shape[0], tf.float32))[:, None, None]
    xs = tf.range(tf.cast(shape[1], tf.float32))[None, :, None]
    return tf.reduce_any((ys >= rects[:, 1]) & (ys < rects[:, 3]) & (xs >= rects[:, 0]) & (xs < rects[:, 2]),
                         axis=-1, keepdims=True)


def _holes_drawn(drawn) -> int:
    return sum(1 for k in range(0, len(drawn.values), 4) if drawn.values[k + 2] > drawn.values[k])


@register_op("random_jpeg_quality", Kind.PIXEL)
class RandomJpegQuality(SeededOp):
    """Re-compress through JPEG at a quality drawn from the range, to teach robustness to artefacts."""
    host_step = True    # TensorFlow's JPEG codec runs on the CPU only
    class Params(OpParams):
        quality: range_of(1, 100, kind=int) = Field((50, 95), description="[low, high] JPEG quality")

    def apply(self, image, seed):
        lo, hi = self.params.quality
        q = tf.random.stateless_uniform([], seed, lo, hi + 1, dtype=tf.int32)
        return tf.image.adjust_jpeg_quality(image, q)
