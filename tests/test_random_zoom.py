"""random_zoom (Keras' RandomZoom): its matrix, and its pixels through the real compiled graph. Added after ops
came to own their meaning, it touched augd/ops/geometry.py, this file and its OP_CASES row in test_ops.py."""
import cv2
import numpy as np
import pytest

from augd.ops import REGISTRY
from augd.ops.sampling import generator
from tests.helpers import build, make_image, png, run, spec_for

H, W = 48, 64


def _op(**params):
    return REGISTRY["random_zoom"](REGISTRY["random_zoom"].Params(**params))


def _zooms(op, n=200):
    """(zy, zx) per draw, read back from the matrix; each keeps the image centre fixed."""
    out = []
    for i in range(n):
        m, oh, ow = op.sample(generator((i, 3 * i + 1)), float(H), float(W))
        assert (oh, ow) == (H, W)
        centre = np.array([(W - 1) / 2, (H - 1) / 2, 1.0])
        assert np.allclose(m @ centre, centre) and m[0, 1] == m[1, 0] == 0.0
        out.append((m[1, 1], m[0, 0]))
    return np.array(out)


def test_zoom_is_one_plus_a_factor_from_each_range():
    z = _zooms(_op(height_factor=[-0.3, -0.1], width_factor=[0.2, 0.4]))
    assert z[:, 0].min() >= 0.7 - 1e-12 and z[:, 0].max() <= 0.9 + 1e-12
    assert z[:, 1].min() >= 1.2 - 1e-12 and z[:, 1].max() <= 1.4 + 1e-12
    assert np.ptp(z[:, 0]) > 0.15 and np.ptp(z[:, 1]) > 0.15   # the whole range is used


def test_without_width_factor_the_aspect_is_kept():
    z = _zooms(_op(height_factor=0.25))                       # a scalar x means [-x, x], as in Keras
    assert np.array_equal(z[:, 0], z[:, 1])
    assert z[:, 0].min() < 0.85 and z[:, 0].max() > 1.15


@pytest.mark.parametrize("kernel", ["opencv", "tf"])
def test_zooming_in_magnifies_the_centre(kernel, monkeypatch):
    """factor -0.5: the output is the central half of the image, scaled up 2x (as cv2.resize of that window
    computes it, away from the window's edges, where resize clamps and the warp reads on); with only
    width_factor it is stretched horizontally alone."""
    img = make_image(H, W, seed=4)
    cases = [({"height_factor": [-0.5, -0.5]}, img[12:36, 16:48]),
             ({"height_factor": [0.0, 0.0], "width_factor": [-0.5, -0.5]}, img[:, 16:48])]
    for params, window in cases:
        c = build(spec_for([{"random_zoom": params}]), kernels=kernel)
        r = c.process(png(img), "a.png", 1)
        out = np.frombuffer(r.payload, np.uint8).reshape(r.height, r.width, 3).astype(int)
        ref = cv2.resize(window, (W, H), interpolation=cv2.INTER_LINEAR).astype(int)
        assert out.shape == ref.shape
        d = np.abs(out - ref)[2:-2, 2:-2]
        assert d.max() <= 2 and d.mean() <= 0.5, (params, d.max(), d.mean())


def test_zooming_out_shrinks_the_image_about_its_centre_inside_the_fill():
    """factor +0.5 on linear ramps (which bilinear sampling reproduces exactly): output pixel x shows input
    pixel cx + 1.5 (x - cx); what falls outside the source is the fill."""
    y, x = np.mgrid[0:H, 0:W]
    ramp = np.stack([2 * x + 40, 3 * y + 20, np.full_like(x, 90)], -1).astype(np.uint8)
    out = run([{"random_zoom": {"height_factor": [0.5, 0.5], "fill": 200}}], ramp).astype(float)
    sx, sy = (W - 1) / 2 + 1.5 * (x - (W - 1) / 2), (H - 1) / 2 + 1.5 * (y - (H - 1) / 2)
    inside = (sx >= 0) & (sx <= W - 1) & (sy >= 0) & (sy <= H - 1)
    outside = (sx < -1) | (sx > W) | (sy < -1) | (sy > H)
    assert np.abs(out[..., 0] - (2 * sx + 40))[inside].max() <= 1
    assert np.abs(out[..., 1] - (3 * sy + 20))[inside].max() <= 1
    assert (out[outside] == 200).all() and outside.sum() > 0.3 * H * W
    reflected = run([{"random_zoom": {"height_factor": [0.5, 0.5], "fill": "reflect"}}], ramp)
    assert (reflected[outside] != 200).any() and np.array_equal(reflected[inside], out[inside].astype(np.uint8))


def test_same_seed_same_pixels_other_seeds_differ():
    img = make_image(H, W)
    ops = [{"random_zoom": {"height_factor": 0.3, "width_factor": 0.3, "fill": "reflect"}}]
    a = run(ops, img, relpath="a.png")
    assert np.array_equal(a, run(ops, img, relpath="a.png"))
    assert all(not np.array_equal(a, run(ops, img, relpath=f"o{i}.png")) for i in range(4))
    assert not np.array_equal(a, run(ops, img, relpath="a.png", seed=2))


def test_it_fuses_with_its_neighbours_into_one_warp():
    """Like every GeometryOp: one Geo step with its neighbours when the border rule matches."""
    from augd.engine.plan import Geo, Program
    same = Program(spec_for([{"random_rotation": {"degrees": 5}}, {"random_zoom": {}},
                             {"random_flip_left_right": {}}]).ops)
    assert len(same.steps) == 1 and isinstance(same.steps[0], Geo)
    other = Program(spec_for([{"random_rotation": {"degrees": 5}}, {"random_zoom": {"fill": "wrap"}}]).ops)
    assert [s.fill for s in other.steps] == [0, "wrap"]
