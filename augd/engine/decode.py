"""Decoding inside the job graph, including crop-aware JPEG decoding.

When a chain starts with geometry (a random crop, a resize, ...), the matrix of that leading run can be
planned from the JPEG header's size alone. Its output then covers a known window of the source, so
only that window is decoded (tf.io.decode_and_crop_jpeg), and at a reduced DCT scale (1/2, 1/4, 1/8)
when each output pixel spans that many source pixels: pixels that will be cropped or averaged away are
never decoded. The plan (augd.engine.plan) re-expresses the warp's matrix in the window's coordinates.
"""
from __future__ import annotations

from augd.engine.plan import DECODE_MODE, DECODE_RATIOS, SOURCE_SIZE, WINDOW, Program
from augd.engine.rawpixels import RAW_HEADER, RAW_MAGIC, RAW_MAX_SIDE
from augd.ops._tf import tf

__all__ = ["decode_full", "decode_planned", "decode_raw_pixels", "orient"]


# EXIF orientation -> (transpose?, flip rows?, flip columns?); 0 and 9 stand for any value outside 1-8.
_ORIENT = ((0, 0, 0), (0, 0, 0), (0, 0, 1), (0, 1, 1), (0, 1, 0), (1, 0, 0), (1, 0, 1), (1, 1, 1), (1, 1, 0),
           (0, 0, 0))


def orient(image, orientation):
    """Apply EXIF orientation (1-8) exactly, with no resampling: a transpose for 5-8, then the flips.
    Looked up rather than branched eight ways (a few ops trace in a fraction of the time), and only for
    images that need it: orientation 1 passes through untouched (even an identity transpose costs time)."""
    o = tf.clip_by_value(tf.cast(orientation, tf.int32), 0, 9)

    def turn():
        row = tf.gather(tf.constant(_ORIENT, tf.int32), o)
        x = tf.transpose(image, tf.where(row[0] > 0, [1, 0, 2], [0, 1, 2]))
        return tf.reverse(x, tf.boolean_mask(tf.constant([0, 1]), row[1:] > 0))  # one pass for both flips

    out = tf.cond((o >= 2) & (o <= 8), turn, lambda: image)
    out.set_shape([None, None, 3])
    return out


def decode_raw_pixels(data):
    """A canvas the host handed over as raw pixels (augd.engine.rawpixels): its header checked against its length
    before anything is read or allocated (a failed check is that image's decode error), then one copy."""
    n = tf.cast(tf.strings.length(data), tf.int64)
    has_header = tf.debugging.Assert(n >= RAW_HEADER, ["raw pixels: truncated header; bytes:", n])
    with tf.control_dependencies([has_header]):
        h, w, c = tf.unstack(tf.cast(tf.io.decode_raw(tf.strings.substr(data, len(RAW_MAGIC), 12), tf.int32),
                                     tf.int64), 3)
    # int32 reads a side past 2**31 as negative; the bound keeps h * w * 3 inside an int64
    fits = ((c == 3) & (h > 0) & (w > 0) & (h <= RAW_MAX_SIDE) & (w <= RAW_MAX_SIDE)
            & tf.equal(h * w * 3, n - RAW_HEADER))
    check = tf.debugging.Assert(fits, ["raw pixels: a header's (height, width, channels) that do not fit the bytes "
                                       "after it:", h, w, c, n - RAW_HEADER])
    with tf.control_dependencies([check]):
        flat = tf.io.decode_raw(data, tf.uint8)
    return tf.reshape(flat[RAW_HEADER:], tf.stack([h, w, 3]))   # a 64-byte start: Slice shares the buffer


def decode_full(data, orientation):
    """The image's upright RGB pixels: any format tf.io.decode_image reads, or the host's raw pixels."""
    img = tf.cond(tf.equal(tf.strings.substr(data, 0, len(RAW_MAGIC)), RAW_MAGIC), lambda: decode_raw_pixels(data),
                  lambda: tf.io.decode_image(data, channels=3, expand_animations=False))
    img.set_shape([None, None, 3])
    return orient(img, orientation)


def decode_planned(data, seed, orientation, program: Program, floats, ints, augment=True, crop: bool = True):
    """Decode for the augmentation chain under the plan made from the header: (image, floats, ints).
    When the plan chose a window (the chain starts with geometry and the source is a JPEG in its stored
    orientation), only that window is decoded, at the plan's DCT scale, provided libjpeg reads the size
    the plan was made for. A full decode whose size differs from the plan's (a header that cannot be
    trusted, or no header), or that replaces a planned window, is re-planned in the graph (for augmented
    variants: the original's empty plan is never used). crop: EngineOptions.crop_decode."""

    def replan(h, w):
        f, i = tf.numpy_function(program.plan, [seed, h, w, tf.constant(False)], [tf.float64, tf.int64],
                                 stateful=False)
        f.set_shape([program.n_floats])
        i.set_shape([program.n_ints])
        return f, i

    def full():
        img = decode_full(data, orientation)
        shape = tf.cast(tf.shape(img)[:2], tf.int64)
        stale = augment & (tf.reduce_any(tf.not_equal(shape, ints[SOURCE_SIZE])) | (ints[DECODE_MODE] > 0))
        f, i = tf.cond(stale, lambda: replan(shape[0], shape[1]), lambda: (floats, ints))
        return img, f, i

    if not (program.leads_with_geometry and crop):
        return full()

    def window(ratio):
        img = tf.io.decode_and_crop_jpeg(data, tf.cast(ints[WINDOW], tf.int32), channels=3, ratio=ratio)
        img.set_shape([None, None, 3])
        return img, floats, ints

    def as_planned():  # libjpeg's own reading of the size agrees with the header the plan used
        return tf.reduce_all(tf.equal(tf.cast(tf.io.extract_jpeg_shape(data)[:2], tf.int64), ints[SOURCE_SIZE]))

    is_jpeg = tf.equal(tf.strings.substr(data, 0, 3), b"\xff\xd8\xff")
    use = tf.cond((ints[DECODE_MODE] > 0) & is_jpeg, as_planned, lambda: False)
    img, floats, ints = tf.switch_case(tf.cast(tf.where(use, ints[DECODE_MODE], 0), tf.int32),
                                       [full] + [(lambda r=r: window(r)) for r in DECODE_RATIOS])
    img.set_shape([None, None, 3])
    return img, floats, ints
