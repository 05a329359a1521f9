"""motion_blur, clahe and iso_noise (augd/ops/filters.py) do what they say, by the pixels, through the real compiled
graph (this host's kernels; tests/kernel_parity.py holds the other kernel to the same pixels), and agree with
OpenCV where OpenCV has the operation."""
from __future__ import annotations

import cv2
import numpy as np

from augd.ops.filters import motion_kernel
from tests.helpers import make_image, run


def test_motion_blur_spreads_a_dot_along_a_line_of_its_length_and_angle():
    img = np.zeros((41, 41, 3), np.uint8)
    img[20, 20] = 255
    flat = run([{"motion_blur": {"ksize": [7, 7], "angle": [0, 0]}}], img)[..., 0].astype(int)
    lit = np.argwhere(flat > 0)
    assert set(lit[:, 0]) == {20} and (lit[:, 1].min(), lit[:, 1].max()) == (17, 23), lit
    assert np.abs(flat[20, 17:24] - 255 / 7).max() <= 1 and flat.sum() == np.clip(flat.sum(), 250, 260)
    upright = run([{"motion_blur": {"ksize": [5, 5], "angle": [90, 90]}}], img)[..., 1]
    assert set(np.argwhere(upright > 0)[:, 1]) == {20} and np.count_nonzero(upright) == 5
    slanted = run([{"motion_blur": {"ksize": [9, 9], "angle": [45, 45]}}], img)[..., 2].astype(int)
    ys, xs = np.nonzero(slanted > 10)
    assert np.corrcoef(xs, ys)[0, 1] > 0.9, "45 degrees: the trail runs down and to the right (y points down)"


def test_motion_blur_matches_opencvs_filter2d_with_its_kernel():
    img = make_image(60, 80)
    out = run([{"motion_blur": {"ksize": [9, 9], "angle": [30, 30]}}], img).astype(int)
    ref = cv2.filter2D(img.astype(np.float32), -1, motion_kernel(9, 9, 30.0), borderType=cv2.BORDER_REFLECT_101)
    assert np.abs(out - np.rint(ref)).max() <= 1
    k = motion_kernel(9, 5, 30.0)
    assert abs(k.sum() - 1) < 1e-6 and np.count_nonzero(k.sum(0)) <= 5 + 2   # length 5 in a 9x9 kernel


def test_clahe_of_a_grey_image_is_opencvs_clahe_and_raises_local_contrast():
    rng = np.random.default_rng(0)
    grey = np.clip(np.add.outer(np.linspace(60, 120, 96), np.linspace(0, 40, 128)) + rng.normal(0, 4, (96, 128)),
                   0, 255).astype(np.uint8)
    img = np.repeat(grey[..., None], 3, axis=2)
    out = run([{"clahe": {"clip_limit": [2, 2], "grid": 4}}], img).astype(int)
    ref = cv2.createCLAHE(2.0, (4, 4)).apply(grey).astype(int)
    assert np.abs(out[..., 0] - ref).max() <= 1 and np.array_equal(out[..., 0], out[..., 2])
    detail = lambda x: (x - cv2.blur(x, (9, 9))).std()   # noqa: E731 - local contrast: what a tile's curve raises
    assert detail(out[..., 0].astype(np.float32)) > 1.3 * detail(grey.astype(np.float32))


def test_iso_noise_moves_hues_and_brightens_but_keeps_white():
    img = make_image(64, 64)
    img[:8] = 255
    out = run([{"iso_noise": {"color_shift": [0.05, 0.05], "intensity": [0.6, 0.6]}}], img)
    assert np.array_equal(out[:8], img[:8]), "white has no room left to brighten"
    body = (slice(8, None),)
    hsv_in, hsv_out = (cv2.cvtColor(x[body], cv2.COLOR_RGB2HSV_FULL).astype(int) for x in (img, out))
    hue = np.abs((hsv_out[..., 0] - hsv_in[..., 0] + 128) % 256 - 128)
    assert np.median(hue) >= 1 and hue.max() >= 8, "the hue jitters pixel by pixel"
    assert hsv_out[..., 2].mean() > hsv_in[..., 2].mean() + 2, "Poisson noise brightens"
    again = run([{"iso_noise": {"color_shift": [0.05, 0.05], "intensity": [0.6, 0.6]}}], img)
    assert np.array_equal(out, again)
