"""The CPU kernels of the pixel ops that draw nothing in the graph (SeededOp.apply_np, run by CPU hosts) against
their TF kernels (apply, run by GPU hosts, and by CPU hosts before they had one): the same pixels exactly, where
both are integer arithmetic (tables, windows, whole-pixel shifts); within rounding where apply_np resamples with
OpenCV (in_boxes' turns, shears and fractional shifts). Cases from the registry (tests/test_ops.py's OP_CASES), so a
new op with a CPU kernel is held here too; random images with a flat channel, on regions the ops draw themselves."""
from __future__ import annotations

import numpy as np
import pytest

from augd.ops import REGISTRY, ColourOp, SeededOp
from augd.ops.boxes import OPERATIONS
from augd.ops.sampling import generator
from tests.test_ops import OP_CASES

#: in_boxes' operations, each at a value its slots may hold; the resampled ones are judged within rounding
IN_BOXES = {"rotate": 25.0, "shear_x": 0.3, "shear_y": -0.2, "translate_x": 17.0, "translate_y": -9.0,
            "flip": 0.0, "solarize": 100.0, "equalize": 0.0}
RESAMPLED = {"rotate", "shear_x", "shear_y"}


def _cases() -> dict:
    out = {name: OP_CASES[name][0] for name, cls in sorted(REGISTRY.items())
           if issubclass(cls, SeededOp) and cls(cls.Params(**OP_CASES[name][0])).apply_np is not None}
    out.update({f"in_boxes {op}": {"op": op, "value": v, "box_p": 0.8} for op, v in IN_BOXES.items()})
    out["in_boxes translate_x 7.4 px"] = {"op": "translate_x", "value": 7.4, "box_p": 0.8}
    out["box_cutout one"] = {"boxes": "one", "fraction": 0.6}
    return out


CASES = _cases()


def _images():
    rng = np.random.default_rng(60)
    for k, (h, w) in enumerate([(97, 131), (64, 48), (120, 160)]):
        img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        img[..., k % 3] = 77 if k else img[..., k % 3]   # a single-valued channel: equalize keeps it
        boxes = np.array([[5, 7, 40, 50], [30, 20, 90 % w + 8, 60], [w - 20, h - 30, w, h], [0, 0, 3, 4]], np.float64)
        yield img, np.clip(boxes, 0, [w, h, w, h])


def test_every_op_with_a_cpu_kernel_is_a_case():
    ops = {name.split(" ")[0] for name in CASES}
    assert {"solarize", "posterize", "equalize", "invert", "cutout", "box_cutout", "in_boxes",
            "random_black_patches"} <= ops
    assert set(IN_BOXES) == set(OPERATIONS)
    assert REGISTRY["coarse_dropout"](REGISTRY["coarse_dropout"].Params(fill="random")).apply_np is None


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_cpu_kernel_gives_the_tf_kernels_pixels(case):
    from augd.ops._tf import tf
    name = case.split(" ")[0]
    cls = REGISTRY[name]
    op = cls(cls.Params(**CASES[case]))
    exact = not (name == "in_boxes" and (op.params.op in RESAMPLED or op.params.value != round(op.params.value)))
    seed = tf.constant([1, 2], tf.int64)
    for i, (img, boxes) in enumerate(_images()):
        for draw in range(4):
            h, w = img.shape[:2]
            rng = generator((i, draw))
            if op.uses_boxes:
                region = op.region(rng, h, w, boxes=boxes)
            elif op.covers:
                region = op.region(rng, h, w)
            else:
                region = None
            args = (tf.constant(img), seed) + ((tf.constant(region, tf.float64),) if region is not None else ())
            want = op.apply(*args).numpy().astype(int)
            got = op.apply_np(img.copy(), list(region) if region is not None else None).astype(int)
            assert got.shape == want.shape
            if exact:
                assert np.array_equal(got, want), (case, i, draw, int(np.abs(got - want).max()))
            else:   # OpenCV's fixed-point bilinear weights against TF's float ones
                diff = np.abs(got - want)
                assert diff.mean() <= 1.0 and (diff > 2).mean() <= 0.02, (case, i, draw, diff.mean())


U8_CASES = {name: OP_CASES[name][0] for name, cls in sorted(REGISTRY.items())
            if issubclass(cls, ColourOp) and cls.apply_u8 is not None}
#: factors the registry's row leaves out: smoothing (below 1), where the float run's ties are most common (0.5)
U8_CASES["random_sharpness smoothing"] = {"lower": 0.0, "upper": 1.0}


def test_the_colour_ops_with_a_uint8_kernel_are_cases():
    assert {"autocontrast", "solarize_add", "random_sharpness"} <= {name.split()[0] for name in U8_CASES}
    assert {n for n, cls in REGISTRY.items() if issubclass(cls, ColourOp) and cls.affine_exact} >= {
        "identity", "random_brightness", "random_contrast", "random_color", "random_grayscale"}
    assert not REGISTRY["random_saturation"].affine_exact and not REGISTRY["random_hue"].affine_exact   # models


@pytest.mark.parametrize("name", sorted(U8_CASES))
def test_a_colour_op_s_uint8_kernel_is_its_float_kernel_then_the_round(name):
    """apply_u8 gives what the colour run's float path gives for the op alone (the image to float32, apply_np,
    cv2.convertScaleAbs), on random images, narrow ones, flat channels and thin ones: bit for bit (a table of levels),
    or, for an op whose u8_exact is False (its arithmetic in another order), the same pixels except a value on a half
    level, which the two may round apart: there they differ by one level and the exact value (apply_np in float64)
    lies within float32's error of the half."""
    import cv2
    cls = REGISTRY[name.split()[0]]
    op = cls(cls.Params(**U8_CASES[name]))
    rng = np.random.default_rng(61)
    for k in range(40):
        h, w = (int(v) for v in rng.integers(1, 200, 2))
        if k % 10 == 9:
            h = int(rng.integers(1, 4))   # rows that are all border, or nearly
        img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        if k % 3 == 0:
            img = (img // 4 + rng.integers(0, 190)).astype(np.uint8)   # a narrow range of levels
        if k % 4 == 0:
            img[..., k % 3] = 77
        params = list(op.draw(generator((k, 0)))) if k else [0.5] * op.n_params   # a half first: most ties
        x = img.astype(np.float32)
        x *= np.float32(1.0 / 255.0)
        want = cv2.convertScaleAbs(op.apply_np(x, params), alpha=255.0)
        got = op.apply_u8(img, params)
        assert got.shape == want.shape and got.dtype == np.uint8, (name, k)
        if op.u8_exact:
            assert np.array_equal(got, want), (name, k)
            continue
        exact = op.apply_np(img.astype(np.float64) / 255.0, params) * 255.0
        off = got != want
        half = np.abs(exact - np.floor(exact) - 0.5) < 1e-3
        assert np.abs(got.astype(int) - want).max() <= 1 and not (off & ~half).any(), (name, k)


def test_sharpness_s_uint8_kernel_keeps_the_border_smooths_at_zero_and_sharpens_above_one():
    """The one filter is PIL's blend: at 0 the smoothed image, at 1 the image itself, the border as it was."""
    import cv2
    from augd.ops.enhance import _SMOOTH
    cls = REGISTRY["random_sharpness"]
    op = cls(cls.Params(lower=0.0, upper=2.0))
    img = np.random.default_rng(7).integers(0, 256, (30, 41, 3), dtype=np.uint8)
    assert np.array_equal(op.apply_u8(img, [1.0]), img)
    smooth = cv2.filter2D(img.astype(np.float64), -1, _SMOOTH.astype(np.float64))
    inner = (slice(1, -1), slice(1, -1))
    assert np.abs(op.apply_u8(img, [0.0])[inner].astype(float) - smooth[inner]).max() <= 0.5 + 1e-6
    sharp = op.apply_u8(img, [2.0])
    assert np.array_equal(sharp[0], img[0]) and np.array_equal(sharp[-1], img[-1])
    assert np.array_equal(sharp[:, 0], img[:, 0]) and np.array_equal(sharp[:, -1], img[:, -1])
    assert sharp[inner].astype(float).std() > img[inner].astype(float).std()
