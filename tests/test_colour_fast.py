"""`colour: fast`: runs of colour ops folded into one 3x4 colour matrix applied in one pass over uint8."""
import colorsys

import numpy as np
import pytest

from augd.engine.chain import fold_colour
from augd.engine.plan import ColourSlot
from augd.ops import REGISTRY
from tests.helpers import build, compiled, make_image, png, run, spec_for

SEED_COLOUR = [{"random_saturation": {"lower": 0.8, "upper": 1.2}}, {"random_brightness": {"max_delta": 0.125}},
               {"random_contrast": {"lower": 0.8, "upper": 1.2}}, {"random_hue": {"max_delta": 0.2}}]


def _affine(name, value, mean=(0.5, 0.5, 0.5)):
    op = REGISTRY[name](REGISTRY[name].Params())
    return op.affine((value,), np.asarray(mean))


@pytest.mark.parametrize("op", [
    {"random_brightness": {"max_delta": 0.1}},
    {"random_contrast": {"lower": 0.7, "upper": 0.9}},
])
def test_brightness_and_contrast_keep_their_exact_meaning(op):
    """Without clipping in between, the fast path computes what the exact path does (within rounding)."""
    img = make_image(40, 50, seed=2)
    for i in range(4):
        fast = run([op], img, relpath=f"{i}.png", colour="fast").astype(int)
        exact = run([op], img, relpath=f"{i}.png").astype(int)
        assert np.abs(fast - exact).max() <= 1


@pytest.mark.parametrize("name,value", [("random_saturation", 0.6), ("random_saturation", 1.3), ("random_hue", 0.17),
                                        ("random_hue", -0.4)])
def test_saturation_and_hue_keep_grey_grey_and_luma(name, value):
    """Luma blend and YIQ rotation both move colours around the grey axis: greys stay put, luma is kept."""
    a, b = _affine(name, value)
    for g in (0.0, 0.3, 1.0):
        assert np.allclose(a @ np.full(3, g) + b, g, atol=1e-6)
    luma = np.array([0.299, 0.587, 0.114])
    rgb = np.random.default_rng(0).random((20, 3))
    assert np.allclose((rgb @ a.T + b) @ luma, rgb @ luma, atol=2e-3)


def test_saturation_is_a_blend_with_the_luma():
    a, b = _affine("random_saturation", 0.0)
    rgb = np.array([0.9, 0.2, 0.1])
    grey = rgb @ np.array([0.2989, 0.5870, 0.1140]) / 0.9999
    assert np.allclose(a @ rgb + b, grey)


@pytest.mark.parametrize("delta", [0.05, 0.1, -0.08])
def test_hue_turns_the_way_tf_image_does(delta):
    """Positive delta moves hue the same way as tf.image.adjust_hue (red towards yellow), by about delta."""
    a, b = _affine("random_hue", delta)
    for rgb in ((0.8, 0.3, 0.3), (0.3, 0.7, 0.4), (0.35, 0.4, 0.8)):
        h0 = colorsys.rgb_to_hsv(*rgb)[0]
        h1 = colorsys.rgb_to_hsv(*np.clip(a @ np.array(rgb) + b, 0, 1))[0]
        turn = (h1 - h0 + 0.5) % 1.0 - 0.5
        assert np.sign(turn) == np.sign(delta) and abs(turn - delta) < 0.6 * abs(delta), (rgb, turn)


def test_contrast_uses_the_mean_at_its_own_point_in_the_run():
    """brightness then contrast: contrast pivots on the brightened mean, as op-by-op application would."""
    ops = [ColourSlot(REGISTRY["random_brightness"](REGISTRY["random_brightness"].Params()), slice(0, 1), 0),
           ColourSlot(REGISTRY["random_contrast"](REGISTRY["random_contrast"].Params()), slice(1, 2), 1)]
    floats, ints = np.array([0.1, 0.5]), np.array([1, 1])
    m = fold_colour(ops, floats, ints, np.array([0.4, 0.5, 0.6]))
    x = np.array([0.2, 0.3, 0.9])
    step = x + 0.1
    expected = 0.5 * (step - (np.array([0.4, 0.5, 0.6]) + 0.1)) + np.array([0.4, 0.5, 0.6]) + 0.1
    assert np.allclose(m[:, :3] @ x + m[:, 3], expected)


def _reference_fast(img, floats, ints, slots):
    """The documented fast model, op by op in float64 with the running mean, one clip at the end."""
    x = img.astype(np.float64) / 255.0
    luma = np.array([0.2989, 0.5870, 0.1140]) / 0.9999
    yiq = np.array([[0.299, 0.587, 0.114], [0.596, -0.274, -0.322], [0.211, -0.523, 0.312]])
    for slot in slots:
        if not ints[slot.on]:
            continue
        name, (v,) = slot.op.name, floats[slot.params]
        if name == "random_saturation":
            x = v * x + (1 - v) * (x @ luma)[..., None]
        elif name == "random_brightness":
            x = x + v
        elif name == "random_contrast":
            mean = x.mean(axis=(0, 1))
            x = v * (x - mean) + mean
        else:
            a = -2 * np.pi * v
            rot = np.array([[1, 0, 0], [0, np.cos(a), -np.sin(a)], [0, np.sin(a), np.cos(a)]])
            x = x @ (np.linalg.inv(yiq) @ rot @ yiq).T
    return np.clip(np.round(x * 255.0), 0, 255)


def test_fast_seed_colours_match_the_documented_model():
    """The whole folded run through the real graph equals the model applied op by op (within rounding):
    luma blend, brightness, contrast about the mean at its point, YIQ hue rotation, one clip."""
    from augd.engine.plan import Program
    from augd.ops.sampling import image_seed
    img = make_image(60, 80, seed=5)
    spec = spec_for(SEED_COLOUR, colour="fast")
    program = Program(spec.ops)
    (step,) = program.steps
    assert [slot.op.name for slot in step.ops] == [next(iter(o)) for o in SEED_COLOUR]
    for i in range(6):
        floats, ints = program.plan(image_seed(1, f"{i}.png", 1), 60, 80)
        ref = _reference_fast(img, floats, ints, step.ops)
        fast = run(SEED_COLOUR, img, relpath=f"{i}.png", colour="fast").astype(int)
        assert np.abs(fast - ref).max() <= 2, np.abs(fast - ref).max()
        exact = run(SEED_COLOUR, img, relpath=f"{i}.png").astype(int)
        assert not np.array_equal(fast, exact)  # a different model of saturation and hue


@pytest.mark.parametrize("chain", [
    SEED_COLOUR + [{"random_rotation": {"degrees": 10}}],
    [{"random_crop": {"size": [40, 40], "area": [0.3, 1.0]}}, *SEED_COLOUR, {"random_gamma": {"p": 0.5}},
     {"random_grayscale": {"p": 0.3}}],
])
def test_fast_colour_agrees_between_tf_and_opencv_kernels(chain, monkeypatch):
    img = make_image(97, 131, seed=9)
    outs = {}
    for kernel in ("tf", "opencv"):
        c = build(spec_for(chain, colour="fast"), kernels=kernel)
        outs[kernel] = [c.process(png(img), f"k{i}.png", 1) for i in range(4)]
    for a, b in zip(outs["tf"], outs["opencv"]):
        x = np.frombuffer(a.payload, np.uint8).astype(int)
        y = np.frombuffer(b.payload, np.uint8).astype(int)
        d = np.abs(x - y)
        assert d.mean() <= 1.0 and (d > 2).mean() <= 0.02, (d.mean(), (d > 2).mean())


def test_colour_mode_is_part_of_the_pipeline_hash():
    assert spec_for(SEED_COLOUR).sha256 != spec_for(SEED_COLOUR, colour="fast").sha256
    assert spec_for(SEED_COLOUR, colour="fast").normalized()["colour"] == "fast"


def test_fast_mode_leaves_non_colour_chains_alone():
    img = make_image(30, 40, seed=1)
    chain = [{"random_rotation": {"degrees": 20}}, {"invert": {}}]
    assert np.array_equal(run(chain, img, colour="fast"), run(chain, img))
    assert compiled(chain, colour="fast").graph is not None
