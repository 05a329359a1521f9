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


def test_the_colour_ops_with_a_uint8_kernel_are_cases():
    assert {"autocontrast", "solarize_add"} <= set(U8_CASES)
    assert {n for n, cls in REGISTRY.items() if issubclass(cls, ColourOp) and cls.affine_exact} >= {
        "identity", "random_brightness", "random_contrast", "random_color", "random_grayscale"}
    assert not REGISTRY["random_saturation"].affine_exact and not REGISTRY["random_hue"].affine_exact   # models


@pytest.mark.parametrize("name", sorted(U8_CASES))
def test_a_colour_op_s_uint8_kernel_is_its_float_kernel_then_the_round_bit_for_bit(name):
    """apply_u8 (a table of levels) gives what the colour run's float path gives for the op alone (the image to
    float32, apply_np, cv2.convertScaleAbs): the same pixels, on random images, narrow ones and flat channels."""
    import cv2
    cls = REGISTRY[name]
    op = cls(cls.Params(**U8_CASES[name]))
    rng = np.random.default_rng(61)
    for k in range(40):
        h, w = (int(v) for v in rng.integers(1, 200, 2))
        img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        if k % 3 == 0:
            img = (img // 4 + rng.integers(0, 190)).astype(np.uint8)   # a narrow range of levels
        if k % 4 == 0:
            img[..., k % 3] = 77
        params = list(op.draw(generator((k, 0))))
        x = img.astype(np.float32)
        x *= np.float32(1.0 / 255.0)
        want = cv2.convertScaleAbs(op.apply_np(x, params), alpha=255.0)
        assert np.array_equal(op.apply_u8(img, params), want), (name, k)
