"""The Object Detection API's pads (augd/ops/pads.py), by the pixels, on both kernels: the image lands unresampled at
a whole-pixel place on a canvas of its mean colour; canvas sizes and places are drawn in the API's half-open ranges;
after a crop, the pad sized by the source (random_crop_pad_image) is filled with the crop's mean; boxes stay on
their colours."""
from __future__ import annotations

import numpy as np
import pytest

from augd.engine import image_seed
from augd.engine.plan import Program
from tests.helpers import build, make_image, png, spec_for

H, W = 48, 64


def _through(ops, kernels, variants=range(1, 13)):
    graph = build(spec_for(ops), kernels=kernels)
    img = make_image(H, W, seed=3)
    for v in variants:
        r = graph.process(png(img), "p.png", v)
        out = np.frombuffer(r.payload, np.uint8).reshape(r.height, r.width, 3)
        steps = graph.program.geometry(image_seed(1, "p.png", v), H, W)
        yield img, out, steps


@pytest.mark.parametrize("kernels", ["opencv", "tf"])
@pytest.mark.parametrize("op", [{"random_pad_image": {"max_size": [80, 100]}},
                                {"random_absolute_pad_image": {"max_height_padding": 30, "max_width_padding": 30}}])
def test_the_image_lands_unresampled_on_a_canvas_of_its_mean_colour(op, kernels):
    mean = make_image(H, W, seed=3).reshape(-1, 3).mean(axis=0)
    sizes = set()
    for img, out, steps in _through([op], kernels):
        (m, oh, ow), = steps
        x0, y0 = -int(m[0, 2]), -int(m[1, 2])
        assert np.array_equal(m[:2, :2], np.eye(2)) and out.shape == (oh, ow, 3)
        assert np.array_equal(out[y0:y0 + H, x0:x0 + W], img)          # the image itself, pixel for pixel
        rest = np.ones(out.shape[:2], bool)
        rest[y0:y0 + H, x0:x0 + W] = False
        if rest.any():
            assert np.abs(out[rest].astype(float) - mean).max() <= 0.51   # its mean colour, rounded
        sizes.add(out.shape)
    assert len(sizes) > 3


def test_sizes_and_places_are_drawn_in_the_apis_half_open_ranges():
    """random_pad_image: height in [min, max), place in [0, canvas - image): tf.random.uniform's int32 ranges."""
    program = Program(spec_for([{"random_pad_image": {"min_size": [50, 64], "max_size": [54, 68]}}]).ops)
    heights, tops = set(), set()
    for i in range(400):
        (m, oh, ow), = program.geometry((i, 1), H, W)
        heights.add(int(oh))
        tops.add((int(oh), -int(m[1, 2])))
        assert 64 <= ow < 68 and 0 <= -m[0, 2] < max(ow - W, 1)
    assert heights == {50, 51, 52, 53}
    assert {t for h, t in tops if h == 53} == {0, 1, 2, 3, 4}   # never flush with the bottom, as the API
    assert {t for h, t in tops if h == 50} == {0, 1}


@pytest.mark.parametrize("kernels", ["opencv", "tf"])
@pytest.mark.parametrize("fill", ["mean", 0])
def test_a_crop_then_a_pad_sized_by_the_source_fills_with_the_crops_mean(kernels, fill):
    """ssd_random_crop_pad's step: a crop at its own size, then a canvas of 1-2x the SOURCE's sides, filled with
    the cropped window's mean colour (or black: the pad never fuses into the crop's warp, which would show the
    source beyond the window)."""
    ops = [{"random_crop": {"area": [0.2, 0.5], "sampler": "tf"}},
           {"random_pad_image": {"min_ratio": [1.0, 1.0], "max_ratio": [2.0, 2.0], "fill": fill}}]
    for img, out, steps in _through(ops, kernels):
        (crop, ch, cw), (pad, oh, ow) = steps
        cx, cy, px, py = int(crop[0, 2]), int(crop[1, 2]), -int(pad[0, 2]), -int(pad[1, 2])
        window = img[cy:cy + int(ch), cx:cx + int(cw)]
        assert H <= oh < 2 * H and W <= ow < 2 * W                      # of the source, not of the crop
        assert np.array_equal(out[py:py + int(ch), px:px + int(cw)], window)
        rest = np.ones(out.shape[:2], bool)
        rest[py:py + int(ch), px:px + int(cw)] = False
        colour = window.reshape(-1, 3).mean(axis=0) if fill == "mean" else np.zeros(3)
        assert np.abs(out[rest].astype(float) - colour).max() <= 0.51


def test_sizes_or_ratios_not_both_and_a_clear_error():
    from augd.schema import SpecError, parse_pipeline
    with pytest.raises(SpecError, match="not both"):
        parse_pipeline("name: t\nops:\n  - random_pad_image: {max_size: [9, 9], max_ratio: [2, 2]}\n", "t.yaml")
    with pytest.raises(SpecError, match="max_height_padding"):
        parse_pipeline("name: t\nops:\n  - random_absolute_pad_image: {max_height_padding: 5000, "
                       "max_width_padding: 1}\n", "t.yaml")
