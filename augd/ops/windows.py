"""Where a crop's window lies: the samplers of random_crop (augd.ops.geometry) that draw a window, on its own or
until it holds enough of some box. TensorFlow-free: plain Python on the image's generator."""
from __future__ import annotations

import math

import numpy as np

from augd.ops.sampling import uniform

__all__ = ["covering", "tf_window", "uniform_int"]


def uniform_int(rng, n: int) -> int:
    """An integer in [0, n) (TensorFlow's random->Uniform(n))."""
    return min(int(rng.random() * n), n - 1)


def _tf_crop(rng, h: int, w: int, area, aspect: float):
    """tensorflow/core/kernels/image/sample_distorted_bounding_box_op.cc's GenerateRandomCrop, line for line:
    (x, y, width, height) in whole pixels, or None when this aspect allows no window in the area range."""
    min_area, max_area = area[0] * w * h, area[1] * w * h
    height = round(math.sqrt(min_area / aspect))     # lrintf: to nearest, ties to even, as Python's round
    max_height = round(math.sqrt(max_area / aspect))
    if round(max_height * aspect) > w:
        max_height = int((w + 0.5 - 1e-7) / aspect)
        if round(max_height * aspect) > w:
            max_height -= 1
    max_height = min(max_height, h)
    height = min(height, max_height)
    if height < max_height:
        height += uniform_int(rng, max_height - height + 1)
    width = round(height * aspect)
    if width * height < min_area:
        height += 1
        width = round(height * aspect)
    if width * height > max_area:
        height -= 1
        width = round(height * aspect)
    if not (min_area <= width * height <= max_area) or width > w or height > h or width <= 0 or height <= 0:
        return None
    y = uniform_int(rng, h - height) if height < h else 0
    x = uniform_int(rng, w - width) if width < w else 0
    return x, y, width, height


def tf_window(rng, h, w, area, aspect, cover, boxes, attempts: int):
    """tf.image.sample_distorted_bounding_box (use_image_if_no_bounding_boxes, as the OD API calls it): up to
    `attempts` times an aspect uniform in its range and a crop for it; the first that holds at least `cover` of
    some box's area (of the whole image where there is no box; any window when cover is None), else the whole
    image. (x0, y0, width, height) in input pixels."""
    hi, wi = int(round(h)), int(round(w))
    if boxes is None or not len(boxes):
        boxes = np.array([[0.0, 0.0, float(wi), float(hi)]])
    areas = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    for _ in range(attempts):
        crop = _tf_crop(rng, hi, wi, area, uniform(rng, *aspect))
        if crop is None:
            continue
        if cover is None:
            return crop
        x0, y0, cw, ch = crop
        ix = np.minimum(boxes[:, 2], x0 + cw) - np.maximum(boxes[:, 0], x0)
        iy = np.minimum(boxes[:, 3], y0 + ch) - np.maximum(boxes[:, 1], y0)
        held = np.maximum(ix, 0.0) * np.maximum(iy, 0.0)
        if ((areas > 0) & (held >= cover * areas)).any():
            return crop
    return 0.0, 0.0, float(wi), float(hi)


def covering(first, rng, h, w, boxes, cover, attempts, draw):
    """SSD's crop (the OD API's random_crop_image through tf.image.sample_distorted_bounding_box): the first of
    `attempts` windows that holds at least `cover` of some box's area, else the whole image. The first candidate
    is the window drawn without boxes (the main generator's four draws, so the ops after it draw the same numbers
    whether or not the image has boxes); the others come from a fork of the generator, a pure function of the
    seed, whose draws no later op sees."""
    area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    keep = area > 0
    if not keep.any():
        return first
    boxes, need = boxes[keep], cover * area[keep]

    def holds(win):
        x0, y0, cw, ch = win
        ix = np.minimum(boxes[:, 2], x0 + cw) - np.maximum(boxes[:, 0], x0)
        iy = np.minimum(boxes[:, 3], y0 + ch) - np.maximum(boxes[:, 1], y0)
        return bool((np.maximum(ix, 0.0) * np.maximum(iy, 0.0) >= need).any())

    if holds(first):
        return first
    more = rng.fork()
    for _ in range(attempts - 1):
        win = draw(more, h, w)
        if holds(win):
            return win
    return 0.0, 0.0, w, h
