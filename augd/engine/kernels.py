"""Per-device resampling kernels behind one interface.

The GPU path stays in TensorFlow (ImageProjectiveTransformV3). On CPU hosts the warp runs in OpenCV,
inside the engine's NumPy segment (augd.engine.chain): several times faster than TF's float kernel, and
OpenCV releases the GIL while it works (bench/README.md). Both take the same matrix (output pixel ->
input pixel, centres at integers) and agree to within rounding (tested).
"""
from __future__ import annotations

import math

import numpy as np

from augd.lazycv import cv2
from augd.ops._tf import tf

__all__ = ["KERNELS", "box_shrink_matrix", "select_kernels", "shrink_matrix_tf", "warp_tf", "warp_np"]

KERNELS = ("tf", "opencv")
_FILL_MODES = {"reflect": "REFLECT", "nearest": "NEAREST", "wrap": "WRAP"}


def _fill_value(fill) -> float:
    return float(fill) if isinstance(fill, int) else 0.0


def box_shrink_matrix(k: float, x0: float = 0.0, y0: float = 0.0) -> np.ndarray:
    """Matrix taking source pixel coordinates to those of the image box-shrunk by k, minus a window origin
    (x0, y0) in the shrunk image: x -> (x + 0.5) / k - 0.5 - x0."""
    return np.array([[1 / k, 0, 0.5 / k - 0.5 - x0], [0, 1 / k, 0.5 / k - 0.5 - y0], [0, 0, 1]], np.float64)


def shrink_matrix_tf(k):
    """box_shrink_matrix in the graph (k a float tensor)."""
    return tf.reshape(tf.stack([1 / k, 0.0, 0.5 / k - 0.5, 0.0, 1 / k, 0.5 / k - 0.5, 0.0, 0.0, 1.0]), [3, 3])


def warp_tf(image, m, oh_i, ow_i, fill, interp: str):
    """TensorFlow kernel: uint8 in, uint8 out. Resamples in float (the kernel truncates uint8).
    fill: augd.ops.base.Fill; interp: "bilinear" | "nearest"."""
    scale = tf.minimum(tf.norm(m[:2, 0]), tf.norm(m[:2, 1]))
    k = tf.cast(tf.floor(scale), tf.int32)
    src = tf.cast(image, tf.float32)
    if fill == "mean":
        # The kernel's fill is one number for every channel: warp the image less its mean colour with 0 outside
        # and add the mean back (resampling is linear: inside, the same pixels; outside, the mean).
        mean = tf.reduce_mean(src, axis=[0, 1])
        src = src - mean

    def shrink():
        # An exact k x k box average (what an area resize by an integer factor is): strong downscales then do
        # not alias. The image is first extended to a multiple of k by repeating its last row and column.
        # A reshape and a mean, not tf.image.resize(method="area"): ResizeArea has no GPU kernel.
        shape = tf.shape(src)
        ph, pw = -shape[0] % k, -shape[1] % k
        padded = tf.concat([src, tf.repeat(src[-1:], ph, axis=0)], 0)
        padded = tf.concat([padded, tf.repeat(padded[:, -1:], pw, axis=1)], 1)
        blocks = tf.stack([(shape[0] + ph) // k, k, (shape[1] + pw) // k, k, 3])
        small = tf.reduce_mean(tf.reshape(padded, blocks), axis=[1, 3])
        return small, shrink_matrix_tf(tf.cast(k, tf.float32)) @ m

    src, mm = tf.cond(k >= 2, shrink, lambda: (src, m))
    flat = tf.reshape(mm / mm[2, 2], [9])[:8][tf.newaxis]
    mode = _FILL_MODES.get(fill, "CONSTANT")
    out = tf.raw_ops.ImageProjectiveTransformV3(
        images=src[tf.newaxis], transforms=flat, output_shape=tf.stack([oh_i, ow_i]),
        fill_value=_fill_value(fill), interpolation=interp.upper(), fill_mode=mode)[0]
    if fill == "mean":
        out = out + mean
    return tf.cast(tf.clip_by_value(tf.round(out), 0.0, 255.0), tf.uint8)


def warp_np(image: np.ndarray, m: np.ndarray, oh: int, ow: int, fill, interp: str) -> np.ndarray:
    """OpenCV kernel for CPU hosts, same contract as warp_tf, called from NumPy (GIL released inside)."""
    border = {"reflect": cv2.BORDER_REFLECT, "nearest": cv2.BORDER_REPLICATE,
              "wrap": cv2.BORDER_WRAP}.get(fill, cv2.BORDER_CONSTANT)
    value = (_fill_value(fill),) * 4 if fill != "mean" else (*cv2.mean(image)[:3], 0.0)   # before any shrink
    k = math.floor(min(math.hypot(m[0, 0], m[1, 0]), math.hypot(m[0, 1], m[1, 1])))
    if k >= 2:
        # An exact k x k box average. The image is first extended to a multiple of k by repeating its
        # last row and column: dropping the tail instead would leave the last output pixels sampling
        # past the shrunk image, i.e. blended with the fill.
        h, w = image.shape[:2]
        ph, pw = -h % k, -w % k
        if ph or pw:
            image = cv2.copyMakeBorder(image, 0, ph, 0, pw, cv2.BORDER_REPLICATE)
        image = cv2.resize(image, ((w + pw) // k, (h + ph) // k), interpolation=cv2.INTER_AREA)
        m = box_shrink_matrix(k) @ m
    nearest = interp == "nearest"
    flags = (cv2.INTER_NEAREST if nearest else cv2.INTER_LINEAR) | cv2.WARP_INVERSE_MAP
    # OpenCV's bilinear remap is faster on 4 channels than on 3 only where the map turns and reads well more
    # pixels than it writes; the RGBA round trip costs ~1 ns a pixel, and the bytes are the same either way.
    # Measured (one thread, the bench's photos; bench/README.md, issue 60): a turn of up to 10 degrees at the same
    # size, 3 channels 2.35 ms against 2.66 on 4; the same at half the pixels out, 1.47 against 1.28; a scale or a
    # shift alone, 3 channels 1.2-5x faster at every size; past ~8 input pixels per output pixel neither gains.
    px = image.shape[0] * image.shape[1]
    turned = abs(m[0, 1]) + abs(m[1, 0]) > 1e-9 * (abs(m[0, 0]) + abs(m[1, 1]))
    four = not nearest and turned and 1.5 * oh * ow <= px <= 8 * oh * ow
    if four:
        image = cv2.cvtColor(image, cv2.COLOR_RGB2RGBA)
    if abs(m[2, 0]) < 1e-12 and abs(m[2, 1]) < 1e-12:
        out = cv2.warpAffine(image, m[:2] / m[2, 2], (ow, oh), flags=flags, borderMode=border, borderValue=value)
    else:
        out = cv2.warpPerspective(image, m, (ow, oh), flags=flags, borderMode=border, borderValue=value)
    if four:
        out = cv2.cvtColor(out, cv2.COLOR_RGBA2RGB)
    return out.reshape(oh, ow, 3)


def select_kernels(choice: str, device_kind: str) -> str:
    """EngineOptions.kernels -> the family a graph uses: auto is 'tf' on GPU hosts, 'opencv' on CPU hosts."""
    if choice == "auto":
        return "tf" if device_kind == "GPU" else "opencv"
    if choice not in KERNELS:
        raise ValueError(f"kernels must be one of {['auto', *KERNELS]}; got {choice!r}")
    return choice
