"""Decoding inside the job graph, including crop-aware JPEG decoding.

When a chain starts with geometry (a random crop, a resize, ...), the matrix of that leading run can be
planned from the JPEG header's size alone. Its output then covers a known window of the source, so
only that window is decoded (tf.io.decode_and_crop_jpeg), and at a reduced DCT scale (1/2, 1/4, 1/8)
when each output pixel spans that many source pixels: pixels that will be cropped or averaged away are
never decoded. The plan (augd.engine.plan) re-expresses the warp's matrix in the window's coordinates.
"""
from __future__ import annotations

import os

from augd.engine.plan import DECODE_RATIOS, Program
from augd.ops._tf import tf

__all__ = ["crop_decode_enabled", "decode_full", "decode_planned", "orient"]


def crop_decode_enabled() -> bool:
    """AUGD_CROP_DECODE=0 turns crop-aware decoding off (tests compare both paths)."""
    return os.environ.get("AUGD_CROP_DECODE", "1").strip() not in ("0", "false", "no")


def orient(image, orientation):
    """Apply EXIF orientation (1-8) exactly, with no resampling."""
    t = lambda x: tf.transpose(x, [1, 0, 2])  # noqa: E731
    branches = [
        lambda: image,                                   # 0: invalid -> as is
        lambda: image,                                   # 1: normal
        lambda: tf.reverse(image, [1]),                  # 2: mirrored
        lambda: tf.reverse(image, [0, 1]),               # 3: rotated 180
        lambda: tf.reverse(image, [0]),                  # 4: mirrored vertically
        lambda: t(image),                                # 5: transposed
        lambda: tf.reverse(t(image), [1]),               # 6: rotated 90 CW to display
        lambda: tf.reverse(t(image), [0, 1]),            # 7: transversed
        lambda: tf.reverse(t(image), [0]),               # 8: rotated 90 CCW to display
    ]
    idx = tf.where((orientation >= 1) & (orientation <= 8), orientation, 0)
    out = tf.switch_case(idx, branches)
    out.set_shape([None, None, 3])
    return out


def decode_full(data, orientation):
    img = tf.io.decode_image(data, channels=3, expand_animations=False)
    img.set_shape([None, None, 3])
    return orient(img, orientation)


def decode_planned(data, seed, orientation, program: Program, floats, ints):
    """Decode for the augmentation chain under the plan made from the header: (image, floats, ints).
    When the plan chose a window (the chain starts with geometry and the source is a JPEG in its stored
    orientation), only that window is decoded, at the plan's DCT scale. A full decode whose size differs
    from the plan's (a header that cannot be trusted, or no header) is re-planned in the graph."""

    def replan(h, w):
        f, i = tf.numpy_function(program.plan, [seed, h, w, tf.constant(False)], [tf.float64, tf.int64],
                                 stateful=False)
        f.set_shape([program.n_floats])
        i.set_shape([program.n_ints])
        return f, i

    # A plan that chose a window has a non-zero ratio or origin, or a window smaller than the source.
    windowed = tf.reduce_any(tf.not_equal(ints[0:5], tf.concat([tf.zeros([3], tf.int64), ints[5:7]], 0)))

    def full():
        img = decode_full(data, orientation)
        shape = tf.cast(tf.shape(img)[:2], tf.int64)
        same = tf.reduce_all(tf.equal(shape, ints[5:7])) & tf.logical_not(windowed)
        f, i = tf.cond(same, lambda: (floats, ints), lambda: replan(shape[0], shape[1]))
        return img, f, i

    if not (program.leads_with_geometry and crop_decode_enabled()):
        return full()

    def window():
        win = tf.cast(ints[1:5], tf.int32)
        img = tf.switch_case(tf.cast(ints[0], tf.int32), [
            (lambda r=r: tf.io.decode_and_crop_jpeg(data, win, channels=3, ratio=r)) for r in DECODE_RATIOS])
        img.set_shape([None, None, 3])
        return img, floats, ints

    def jpeg_as_planned():  # libjpeg's own reading of the size agrees with the header the plan used
        shape = tf.cast(tf.io.extract_jpeg_shape(data)[:2], tf.int64)
        return tf.reduce_all(tf.equal(shape, ints[5:7]))

    is_jpeg = tf.equal(tf.strings.substr(data, 0, 3), b"\xff\xd8\xff")
    use_window = tf.cond(windowed & is_jpeg & tf.equal(orientation, 1), jpeg_as_planned, lambda: False)
    img, floats, ints = tf.cond(use_window, window, full)
    img.set_shape([None, None, 3])
    return img, floats, ints
