"""Apply a Program's steps (augd.engine.plan) to an image, as graph code traced once per job.

CPU hosts (kernel 'opencv'): each maximal run of Geo, Colour and NumPy-capable Seeded steps is ONE
tf.numpy_function whose body is OpenCV/NumPy, which release the GIL in their heavy calls: warps, exact flips,
colour runs (one float pass, or one uint8 colour matrix with `colour: fast`), and the pixel ops that draw nothing
in the graph (SeededOp.apply_np: lookup tables, windows). GPU hosts (kernel 'tf'): every step is TF ops. Seeded
steps that draw per pixel (noise) are TF ops on both. Identity and flips never resample.
"""
from __future__ import annotations

import functools

import numpy as np

from augd.engine.kernels import warp_np, warp_tf
from augd.engine.placement import host_step
from augd.engine.plan import FLIP_X, FLIP_XY, FLIP_Y, GENERAL, IDENTITY, Colour, Geo, Program, Seeded
from augd.lazycv import cv2
from augd.ops import Domain
from augd.ops._tf import tf

__all__ = ["apply_program", "fold_colour", "to_float", "to_uint8"]

_CV_FLIP = {FLIP_X: 1, FLIP_Y: 0, FLIP_XY: -1}


def to_float(image):
    return image if image.dtype == tf.float32 else tf.cast(image, tf.float32) * (1.0 / 255.0)


def to_uint8(image):
    if image.dtype == tf.uint8:
        return image
    return tf.cast(tf.clip_by_value(tf.round(image * 255.0), 0.0, 255.0), tf.uint8)


def fold_colour(ops, floats, ints, mean) -> np.ndarray:
    """The 3x4 matrix (RGB in [0, 1] units) of a run of foldable colour ops that are on for this image.
    `mean`: the run's input image mean per channel; contrast needs the mean at its own point."""
    a, b = np.eye(3), np.zeros(3)
    mean = np.asarray(mean, np.float64)
    for op, params, on in ops:
        if ints[on]:
            A, B = op.affine(floats[params], (a @ mean + b) if op.needs_mean else None)
            a, b = A @ a, A @ b + B
    return np.hstack([a, b[:, None]])


def _fast_groups(ops):
    """Split a colour step's ColourSlots into runs: (True, foldable ops) or (False, [one op])."""
    groups: list = []
    for slot in ops:
        if slot.op.foldable() and groups and groups[-1][0]:
            groups[-1][1].append(slot)
        else:
            groups.append((slot.op.foldable(), [slot]))
    return groups


# ---- CPU hosts: NumPy / OpenCV inside one numpy_function per run of steps ----

def _geo_np(step: Geo, img, floats, ints):
    code = ints[step.code]
    if code == IDENTITY:
        return img
    if code != GENERAL:
        return cv2.flip(img, _CV_FLIP[code])
    m = np.array(floats[step.matrix]).reshape(3, 3)
    return warp_np(img, m, round(floats[step.out_h]), round(floats[step.out_w]), step.fill, step.interp)


_NO_CHANGE = np.hstack([np.eye(3), np.zeros((3, 1))])


def _colour_np(groups, img, floats, ints):
    """groups: the step's ops as (foldable, ops) runs (_fast_groups, or one exact run). One op on alone (a policy's
    draw, a `p`) rounds once either way: one whose matrix is its meaning runs as a matrix pass, one with a uint8
    kernel (a table of levels, sharpness' one filter) as that, not as float passes over the image."""
    groups = [(f, on) for f, ops in groups if (on := [s for s in ops if ints[s[2]]])]
    if len(groups) == 1 and len(groups[0][1]) == 1 and not groups[0][0]:
        op, params, _ = groups[0][1][0]
        if op.affine_exact:
            groups = [(True, groups[0][1])]
        elif op.apply_u8 is not None:
            return op.apply_u8(img, floats[params])
    x = None  # float32 image in [0, 1] while exact ops run
    for foldable, ops in groups:
        if foldable:
            if x is not None:
                img, x = cv2.convertScaleAbs(x, alpha=255.0), None
            mean = np.array(cv2.mean(img)[:3]) / 255.0 if any(op.needs_mean for op, _, _ in ops) else _NO_CHANGE[:, 3]
            m = fold_colour(ops, floats, ints, mean)
            if np.array_equal(m, _NO_CHANGE):   # the policies' identity; a brightness of 0
                continue
            m[:, 3] *= 255.0
            img = cv2.transform(img, m.astype(np.float32))  # rounds and saturates to uint8
            continue
        if x is None:
            x = img.astype(np.float32)
            x *= np.float32(1.0 / 255.0)
        for op, params, _ in ops:
            x = op.apply_np(x, floats[params])
    return img if x is None else cv2.convertScaleAbs(x, alpha=255.0)  # rounds and saturates


def _seeded_np(step: Seeded, img, floats, ints):
    if not ints[step.on]:
        return img
    return step.op.apply_np(img, floats[step.region] if step.region is not None else None)


def _run_np(steps, img, floats, ints):
    """steps: Geo and Seeded steps and colour groups (see apply_program), run in order on one image. The plan
    is read as Python numbers: this runs under the GIL, where NumPy scalars cost ~10x more."""
    floats, ints = floats.tolist(), ints.tolist()
    owned = False   # the input is TF's buffer: a seeded kernel, which may write in place, gets a copy of its own
    for step in steps:
        if isinstance(step, Seeded):
            if not owned and ints[step.on]:
                img, owned = np.array(img, order="C"), True
            out = _seeded_np(step, img, floats, ints)
        elif isinstance(step, Geo):
            out = _geo_np(step, img, floats, ints)
        else:
            out = _colour_np(step, img, floats, ints)
        owned, img = owned or out is not img, out
    return img


# ---- GPU hosts (and AUGD_KERNELS=tf): TF ops ----

def _geo_tf(step: Geo, image, floats, ints):
    m = tf.cast(tf.reshape(floats[step.matrix], [3, 3]), tf.float32)
    size = tf.cast(tf.round(floats[step.size]), tf.int32)
    image = to_uint8(image)
    out = tf.switch_case(tf.cast(ints[step.code], tf.int32), [
        lambda: image,
        lambda: tf.reverse(image, [1]),
        lambda: tf.reverse(image, [0]),
        lambda: tf.reverse(image, [0, 1]),
        lambda: warp_tf(image, m, size[0], size[1], step.fill, step.interp),
    ])
    out.set_shape([None, None, 3])
    return out


def _colour_tf(step: Colour, fast: bool, image, floats, ints):
    x = to_float(image)
    for foldable, ops in (_fast_groups(step.ops) if fast else [(False, step.ops)]):
        if foldable:
            mean = tf.reduce_mean(tf.cast(x, tf.float64), axis=[0, 1])
            with host_step("colour_matrix"):   # 3 means in, 12 numbers out: the pixels stay where they are
                m = tf.numpy_function(functools.partial(fold_colour, ops), [floats, ints, mean], tf.float64,
                                      stateful=False)
            m = tf.cast(tf.reshape(m, [3, 4]), tf.float32)
            x = tf.clip_by_value(tf.einsum("hwc,dc->hwd", x, m[:, :3]) + m[:, 3], 0.0, 1.0)
            continue
        for op, at, on in ops:
            params = tf.cast(floats[at], tf.float32)
            x = tf.cond(ints[on] > 0, lambda op=op, x=x, params=params: op.apply_tf(x, params), lambda x=x: x)
            x.set_shape([None, None, 3])
    return x


def _seeded_tf(step: Seeded, image, floats, ints):
    x = to_float(image) if step.op.domain is Domain.FLOAT else to_uint8(image)
    args = (x, ints[step.seed]) + ((floats[step.region],) if step.region is not None else ())

    def apply():
        if step.op.host_step:   # only the op itself: the coin and an image it skips stay on the device
            with host_step(step.op.name):
                return step.op.apply(*args)
        return step.op.apply(*args)

    out = tf.cond(ints[step.on] > 0, apply, lambda: x)
    out.set_shape([None, None, 3])
    return out


def _np_capable(step) -> bool:
    if isinstance(step, Seeded):
        return step.op.apply_np is not None and step.op.domain is Domain.UINT8
    return isinstance(step, Geo) or (isinstance(step, Colour) and all(slot.op.apply_np for slot in step.ops))


def apply_program(program: Program, image, floats, ints, kernel: str, colour: str = "exact"):
    """Graph code: the program's steps on `image` with this image's plan (floats, ints); returns uint8."""
    fast = colour == "fast"
    steps = list(program.steps)
    k = 0
    while k < len(steps):
        step = steps[k]
        if kernel == "opencv" and _np_capable(step):
            run = []  # grouped here, once, not per image
            while k < len(steps) and _np_capable(steps[k]):
                s = steps[k]
                run.append(s if isinstance(s, (Geo, Seeded)) else (_fast_groups(s.ops) if fast else [(False, s.ops)]))
                k += 1
            image = tf.numpy_function(functools.partial(_run_np, tuple(run)),
                                      [to_uint8(image), floats, ints], tf.uint8, stateful=False)
        else:
            k += 1
            if isinstance(step, Geo):
                image = _geo_tf(step, image, floats, ints)
            elif isinstance(step, Colour):
                image = _colour_tf(step, fast, image, floats, ints)
            else:
                image = _seeded_tf(step, image, floats, ints)
        image.set_shape([None, None, 3])
    return to_uint8(image)
