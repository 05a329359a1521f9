"""Decoding inside the job graph, including crop-aware JPEG decoding.

When a chain starts with geometry (a random crop, a resize, ...), the matrix of that leading run can be
sampled from the JPEG header's size alone. Its output then covers a known window of the source, so
only that window is decoded (tf.io.decode_and_crop_jpeg), and at a reduced DCT scale (1/2, 1/4, 1/8)
when each output pixel spans that many source pixels: pixels that will be cropped or averaged away are
never decoded. The warp that follows gets the matrix re-expressed in the decoded window's coordinates.
"""
from __future__ import annotations

import os

from augd.engine.chain import _State, border_rule, first_geometry_run, run_chain
from augd.engine.kernels import shrink_matrix_tf
from augd.ops._tf import tf

__all__ = ["crop_decode_enabled", "decode_full", "decode_for_chain", "orient"]

_RATIOS = (1, 2, 4, 8)


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


def _footprint(m, oh, ow):
    """Bounding box (x0, y0, x1, y1) in source pixel coordinates of everything the warp samples."""
    xs = tf.stack([-0.5, ow - 0.5, -0.5, ow - 0.5])
    ys = tf.stack([-0.5, -0.5, oh - 0.5, oh - 0.5])
    pts = m @ tf.stack([xs, ys, tf.ones([4])])
    px, py = pts[0] / pts[2], pts[1] / pts[2]
    return tf.reduce_min(px), tf.reduce_min(py), tf.reduce_max(px), tf.reduce_max(py)


def _crop_decode(data, lead: _State, h, w):
    """Decode only the window the leading warp reads, at the coarsest DCT scale that keeps at least
    one decoded pixel per output pixel. Returns the image and the matrix in its coordinates."""
    m = lead.m
    scale = tf.minimum(tf.norm(m[:2, 0]), tf.norm(m[:2, 1]))
    ridx = tf.reduce_sum(tf.cast(tf.constant(_RATIOS[1:], tf.float32) <= scale, tf.int32))
    r = tf.gather(tf.constant(_RATIOS, tf.float32), ridx)
    x0, y0, x1, y1 = _footprint(m, lead.h, lead.w)
    inside = (x0 >= 0.0) & (y0 >= 0.0) & (x1 <= w - 1.0) & (y1 <= h - 1.0)
    if not isinstance(lead.fill, int):
        # reflect / wrap / nearest borders need the image's own edges: keep the whole frame.
        x0, y0, x1, y1 = (tf.where(inside, v, d) for v, d in ((x0, 0.0), (y0, 0.0), (x1, w), (y1, h)))
    # Window in decoded (1/r scale) pixels, with a one-pixel margin for bilinear taps, clamped.
    sh, sw = tf.math.ceil(h / r), tf.math.ceil(w / r)
    u0 = tf.clip_by_value(tf.floor((x0 + 0.5) / r - 0.5) - 1.0, 0.0, sw - 1.0)
    v0 = tf.clip_by_value(tf.floor((y0 + 0.5) / r - 0.5) - 1.0, 0.0, sh - 1.0)
    u1 = tf.clip_by_value(tf.math.ceil((x1 + 0.5) / r - 0.5) + 2.0, u0 + 1.0, sw)
    v1 = tf.clip_by_value(tf.math.ceil((y1 + 0.5) / r - 0.5) + 2.0, v0 + 1.0, sh)
    window = tf.cast(tf.stack([v0, u0, v1 - v0, u1 - u0]), tf.int32)

    def dec(ratio):
        return lambda: tf.io.decode_and_crop_jpeg(data, window, channels=3, ratio=ratio)

    img = tf.switch_case(ridx, [dec(k) for k in _RATIOS])
    img.set_shape([None, None, 3])
    return img, shrink_matrix_tf(r, u0, v0) @ m  # a DCT-scaled decode samples like a box shrink


def decode_for_chain(data, seed, orientation, nodes, kernel: str):
    """Decode for the augmentation chain. Returns (state, n) where state may hold a pending warp for the
    chain's first n nodes (already sampled); the caller runs nodes[n:] on it."""
    n = first_geometry_run(nodes) if crop_decode_enabled() else 0
    if n == 0:
        return _State(image=decode_full(data, orientation), kernel=kernel), 0
    lead_nodes = nodes[:n]
    fill, interp = border_rule(nodes[0])

    def sample_lead(h, w):  # the leading run's matrix needs only the source size
        return run_chain(lead_nodes, _State(image=None, m=tf.eye(3), h=h, w=w, fill=fill, interp=interp,
                                            kernel=kernel), seed)

    is_jpeg = tf.equal(tf.strings.substr(data, 0, 3), b"\xff\xd8\xff")

    def fast():
        shape = tf.cast(tf.io.extract_jpeg_shape(data), tf.float32)
        h, w = shape[0], shape[1]
        lead = sample_lead(h, w)
        img, m = _crop_decode(data, lead, h, w)
        return img, m, lead.h, lead.w

    def full():
        img = decode_full(data, orientation)
        shape = tf.cast(tf.shape(img), tf.float32)
        lead = sample_lead(shape[0], shape[1])
        return img, lead.m, lead.h, lead.w

    img, m, oh, ow = tf.cond(is_jpeg & tf.equal(orientation, 1), fast, full)
    img.set_shape([None, None, 3])
    return _State(image=img, m=m, h=oh, w=ow, fill=fill, interp=interp, kernel=kernel), n
