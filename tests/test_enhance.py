"""PIL's enhancers and AutoAugment's colour steps (augd/ops/enhance.py) do what they say, by the pixels, through the
real compiled graph (this host's kernels; tests/kernel_parity.py holds the other kernel to the same pixels), and
agree with PIL's own ImageEnhance / ImageOps where PIL has the operation."""
from __future__ import annotations

import cv2
import numpy as np
from PIL import Image, ImageEnhance, ImageOps

from tests.helpers import make_image, run


def _scene() -> np.ndarray:
    """Solid saturated rectangles on mid grey with a checkered patch: colour, edges and texture to act on."""
    img = np.full((48, 64, 3), 120, np.uint8)
    img[4:20, 4:28] = (220, 40, 40)
    img[24:44, 30:60] = (40, 200, 60)
    img[8:18, 36:56][(np.indices((10, 20)).sum(0) % 2) == 0] = (30, 30, 200)
    return img


def test_color_zero_is_grey_one_is_unchanged_and_two_matches_pil():
    img = _scene()
    grey = run([{"random_color": {"lower": 0.0, "upper": 0.0, "p": 1.0}}], img).astype(int)
    assert np.abs(grey[..., 0] - grey[..., 1]).max() <= 1 and np.abs(grey[..., 1] - grey[..., 2]).max() <= 1
    assert np.array_equal(run([{"random_color": {"lower": 1.0, "upper": 1.0, "p": 1.0}}], img), img)
    ours = run([{"random_color": {"lower": 2.0, "upper": 2.0, "p": 1.0}}], img).astype(int)
    pil = np.asarray(ImageEnhance.Color(Image.fromarray(img)).enhance(2.0)).astype(int)
    assert np.abs(ours - pil).max() <= 2


def test_sharpness_smooths_at_zero_sharpens_above_one_and_keeps_the_border_as_pil_does():
    img = _scene()
    for factor in (0.0, 2.0):
        ours = run([{"random_sharpness": {"lower": factor, "upper": factor, "p": 1.0}}], img).astype(int)
        pil = np.asarray(ImageEnhance.Sharpness(Image.fromarray(img)).enhance(factor)).astype(int)
        assert np.abs(ours - pil).max() <= 1, factor
        assert np.array_equal(ours[0], img[0]) and np.array_equal(ours[:, -1], img[:, -1])   # the border as it was
    patch = (slice(9, 17), slice(37, 55))   # inside the checkered patch
    smooth = run([{"random_sharpness": {"lower": 0.0, "upper": 0.0, "p": 1.0}}], img)
    sharp = run([{"random_sharpness": {"lower": 2.0, "upper": 2.0, "p": 1.0}}], img)
    assert smooth[patch].astype(float).std() < img[patch].astype(float).std() < sharp[patch].astype(float).std()


def test_autocontrast_stretches_each_channel_to_full_range_and_leaves_a_flat_channel():
    img = make_image()
    low = (img.astype(np.float32) * 0.4 + 60).astype(np.uint8)   # each channel squeezed into ~60-160
    low[..., 2] = 90                                              # blue: one value
    out = run([{"autocontrast": {"p": 1.0}}], low)
    assert out[..., :2].reshape(-1, 2).min(0).tolist() == [0, 0]
    assert out[..., :2].reshape(-1, 2).max(0).tolist() == [255, 255]
    assert (out[..., 2] == 90).all()
    pil = np.asarray(ImageOps.autocontrast(Image.fromarray(low))).astype(int)   # PIL too leaves a flat channel
    assert np.abs(out.astype(int) - pil).max() <= 1


def test_autocontrast_s_cpu_kernel_stretches_a_view_of_any_layout():
    """The kernel works in place on the image's rows: a flipped or cropped view (not C-contiguous) is stretched as
    its contiguous copy is, not reshaped to a copy that is dropped."""
    from augd.ops.enhance import AutoContrast
    op = AutoContrast(AutoContrast.Params())
    base = (make_image().astype(np.float32) * 0.4 + 60) / 255.0
    for view in (base[:, ::-1], base[::2, 3:-5], np.asfortranarray(base)):
        assert not view.flags.c_contiguous
        want = op.apply_np(np.ascontiguousarray(view), None)
        got = op.apply_np(view, None)
        assert np.allclose(got, want) and got.min() == 0.0 and got.max() == 1.0


def test_a_colour_op_alone_runs_on_uint8_and_gives_the_float_runs_pixels(monkeypatch):
    """One colour op on alone (a policy's draw) skips the float passes: a table of levels (autocontrast,
    solarize_add) gives the float run's pixels exactly, a matrix pass (colour, contrast, brightness) and sharpness'
    one filter within a level; the policies' identity leaves the image as it is. The float run is forced by a second
    op on (gamma 1)."""
    from augd.ops import REGISTRY
    img = make_image(96, 128)
    assert np.array_equal(run([{"identity": {}}], img), img)
    gamma1 = {"random_gamma": {"gamma": [1.0, 1.0]}}
    assert np.array_equal(run([{"identity": {}}, gamma1], img), img)
    floated = []   # the ops whose float kernel ran (the graph's NumPy run is this process' own Python)
    for name in ("autocontrast", "solarize_add", "random_color", "random_contrast", "random_brightness",
                 "random_sharpness"):
        kernel = REGISTRY[name].apply_np
        monkeypatch.setattr(REGISTRY[name], "apply_np",
                            lambda self, x, p, kernel=kernel, name=name:
                            (x.shape[:2] == img.shape[:2] and floated.append(name)) or kernel(self, x, p))
    for op, exact in (({"autocontrast": {"p": 1.0}}, True), ({"solarize_add": {"addition": 60}}, True),
                      ({"random_color": {"lower": 1.4, "upper": 1.4}}, False),
                      ({"random_contrast": {"lower": 0.6, "upper": 0.6}}, False),
                      ({"random_brightness": {"max_delta": 0.2}}, False),
                      ({"random_sharpness": {"lower": 0.5, "upper": 0.5}}, False)):
        floated.clear()
        alone = run([op], img, seed=7).astype(int)
        assert not floated and not np.array_equal(alone, img), op
        floats = run([op, gamma1], img, seed=7).astype(int)
        assert floated == [next(iter(op))], op
        diff = np.abs(alone - floats)
        assert diff.max() == 0 if exact else diff.max() <= 1, (op, int(diff.max()))


def test_solarize_add_adds_below_the_threshold_only():
    img = np.zeros((8, 256, 3), np.uint8)
    img[:] = np.arange(256, dtype=np.uint8)[None, :, None]        # every level once per row
    out = run([{"solarize_add": {"addition": 40, "threshold": 128, "p": 1.0}}], img).astype(int)
    levels = np.arange(256)
    want = np.where(levels < 128, np.minimum(levels + 40, 255), levels)
    assert (out == want[None, :, None]).all()


def test_median_blur_removes_isolated_specks_and_keeps_a_straight_edge():
    img = np.full((40, 60, 3), 60, np.uint8)
    img[:, 30:] = 200                                            # a vertical edge
    rng = np.random.default_rng(0)
    ys, xs = rng.integers(3, 37, 30), np.r_[rng.integers(3, 27, 15), rng.integers(33, 57, 15)]
    specks = img.copy()
    specks[ys, xs] = np.where(rng.random((30, 1)) < 0.5, 0, 255)   # salt and pepper, away from the edge
    for k in (3, 5):
        out = run([{"median_blur": {"ksize": k, "p": 1.0}}], specks)
        assert np.array_equal(out, img), k                         # every speck gone, the edge where it was
        assert np.array_equal(out, cv2.medianBlur(specks, k))      # OpenCV's own, on the 8-bit image
