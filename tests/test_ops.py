"""Every registered op, through the real compiled graph: dtype, channels, shape, p, ranges, determinism."""
import math

import numpy as np
import pytest

from augd.engine.explain import explain
from augd.ops import REGISTRY, Kind, Op, PartnerOp, SeededOp
from tests.helpers import make_image, run, spec_for

H, W = 48, 64

# op name -> (params, output shape for a (H, W) input: (h, w), ((least h, most h), (least w, most w)) or None =
# unchanged, always_changes)
# "always_changes" is False for ops whose own semantics include a coin (flips) or a random choice.
OP_CASES = {
    "random_brightness": ({"max_delta": 0.2}, None, True),
    "random_contrast": ({"lower": 0.5, "upper": 0.7}, None, True),
    "random_saturation": ({"lower": 0.2, "upper": 0.4}, None, True),
    "random_hue": ({"max_delta": 0.3}, None, False),
    "random_gamma": ({"gamma": [1.5, 2.0]}, None, True),
    "random_grayscale": ({}, None, True),
    "random_color": ({"lower": 0.2, "upper": 0.4}, None, True),
    "random_sharpness": ({"lower": 1.8, "upper": 2.0}, None, True),
    "autocontrast": ({}, None, True),
    "median_blur": ({"ksize": [3, 5]}, None, True),
    "motion_blur": ({"ksize": [5, 9], "angle": [0, 180]}, None, True),
    "clahe": ({"clip_limit": [3, 4], "grid": 4}, None, True),
    "iso_noise": ({"color_shift": [0.05, 0.1], "intensity": [0.5, 0.8]}, None, True),
    "solarize_add": ({"addition": [60, 90], "threshold": 128}, None, True),
    "random_flip_left_right": ({}, None, False),
    "random_flip_up_down": ({}, None, False),
    "random_rotation": ({"degrees": [10, 20]}, None, True),
    "random_rotation90": ({}, (W, H), True),
    "random_image_scale": ({"min_scale_ratio": 1.5, "max_scale_ratio": 1.5}, (72, 96), True),
    "random_pixel_value_scale": ({"minval": 0.5, "maxval": 0.8}, None, True),
    "random_scale_crop_and_pad_to_square": ({"output_size": 40, "scale_min": 0.5, "scale_max": 1.5}, (40, 40), True),
    "random_square_crop_by_scale": ({"scale_min": 0.5, "scale_max": 0.5, "max_border": 8}, (32, 32), True),
    "random_crop_to_aspect_ratio": ({"aspect_ratio": 0.5}, (48, 24), True),
    "random_affine": ({"scale": [1.2, 1.3], "shear": 5, "shear_y": 5, "rotate": 5, "translate": [0.1, 0.1]}, None,
                      True),
    "random_perspective": ({"scale": [0.1, 0.15]}, None, True),
    "random_crop": ({"size": [32, 40], "area": [0.3, 0.6]}, (32, 40), True),
    "center_crop": ({"size": [30, 30]}, (30, 30), True),
    "resize": ({"size": [24, 100]}, (24, 100), True),
    "random_zoom": ({"height_factor": [-0.4, -0.2]}, None, True),
    "random_expand": ({"ratio": [2, 2]}, (96, 128), True),
    "random_pad_image": ({"min_size": [60, 70], "max_size": [60, 90], "fill": "mean"}, ((60, 60), (70, 89)), True),
    "random_absolute_pad_image": ({"max_height_padding": 12, "max_width_padding": 20}, ((H, H + 11), (W, W + 19)),
                                  True),
    "gaussian_blur": ({"sigma": [1.0, 2.0]}, None, True),
    "gaussian_noise": ({"std": [0.05, 0.1]}, None, True),
    "random_jpeg_quality": ({"quality": [10, 30]}, None, True),
    "random_erasing": ({"area": [0.1, 0.2], "value": 0}, None, True),
    "random_black_patches": ({"max_black_patches": 4, "probability": 1.0, "size_to_image_ratio": 0.3}, None, True),
    "coarse_dropout": ({"holes": [2, 4], "height": [0.1, 0.3], "width": [0.1, 0.3], "fill": "random"}, None, True),
    "channel_shuffle": ({}, None, False),
    "solarize": ({"threshold": 100}, None, True),
    "posterize": ({"bits": 3}, None, True),
    "equalize": ({}, None, True),
    "invert": ({}, None, True),
    "one_of": ({"ops": [{"invert": {}}, {"posterize": {"bits": 1}}]}, None, True),
    "some_of": ({"n": 1, "ops": [{"resize": {"size": [20, 20]}}, {"invert": {}}]}, None, True),
    "sequence": ({"ops": [{"random_rotation": {"degrees": [5, 5]}}, {"invert": {}}]}, None, True),
    "identity": ({}, None, False),
    "randaugment": ({"n": 2, "m": 15}, None, False),     # identity may be drawn twice
    "trivial_augment": ({}, None, False),
    "autoaugment": ({"policy": "v2"}, None, False),       # a sub-policy's ops each have their own p
    "random_brightness_scale": ({"lower": 0.5, "upper": 0.7}, None, True),
    "cutout": ({"size": 20}, None, True),
    "in_boxes": ({"op": "flip"}, None, False),
    "box_cutout": ({"boxes": "each", "size": 8}, None, False),
}

#: ops that act inside an image's boxes only: an image without boxes (these cases) is left as it is; their pixels
#: are judged on detection jobs (tests/test_autoaugment.py)
BOX_OPS = {"in_boxes", "box_cutout"}


def _op(name, **extra):
    return {name: {**OP_CASES[name][0], **extra}}


#: ops that combine the image with partner images of its job: tested through jobs, by their pixels
#: (tests/test_mixing.py), as no single image can run them
PARTNER_OPS = {"mosaic", "mixup", "cutmix", "copy_paste"}


def test_every_registered_op_has_a_case():
    assert set(OP_CASES) | PARTNER_OPS == set(REGISTRY), "add the new op to OP_CASES (and to its tests)"
    assert {n for n, c in REGISTRY.items() if issubclass(c, PartnerOp)} == PARTNER_OPS
    assert len([n for n, c in REGISTRY.items() if c.kind is not Kind.COMPOSITE]) >= 20


def test_every_registered_op_describes_its_own_draws():
    """`augd preview` writes Op.describe under each tile: no op falls back to a shared default, except a
    SeededOp's (its values are drawn in the graph from a seed, so its name is all the plan knows), a FactorOp's
    and a DeltaOp's (its one value is the factor or the delta it drew) and a flip's (whether its coin flipped)."""
    from augd.ops.colour import DeltaOp, FactorOp
    from augd.ops.geometry import _Flip
    for name, cls in REGISTRY.items():
        owner = next(k for k in cls.__mro__ if "describe" in vars(k))
        assert owner in (cls, SeededOp, FactorOp, DeltaOp, _Flip), \
            f"{name}: define describe() in its class ({owner.__name__}'s)"
        assert owner is not Op


@pytest.mark.parametrize("name", sorted(OP_CASES))
def test_describe_names_the_op_and_reads_the_plan(name):
    from augd.engine.plan import Program
    program = Program(spec_for([_op(name, p=1.0)]).ops)
    for seed in range(6):
        d = explain(program, (seed, 3), H, W)[0]
        assert (d.name, d.applied) == (name, True)
        lines = REGISTRY[name](d.params).describe(d)
        assert lines and all(isinstance(s, str) and s.strip() for s in lines), lines
        assert lines[0].startswith(REGISTRY[name].label), lines


@pytest.mark.parametrize("name", sorted(OP_CASES))
def test_dtype_channels_and_shape(name):
    img = make_image(H, W)
    shape = OP_CASES[name][1] or (H, W)
    for seed_path in ("a.png", "b.png", "c.png"):
        out = run([_op(name)], img, relpath=seed_path)
        assert out.dtype == np.uint8 and out.shape[2] == 3
        if name == "some_of":  # some_of may or may not resize
            continue
        if isinstance(shape[0], tuple):
            assert all(lo <= n <= hi for n, (lo, hi) in zip(out.shape[:2], shape)), (name, out.shape)
        else:
            assert out.shape[:2] == shape, (name, out.shape)


@pytest.mark.parametrize("name", sorted(OP_CASES))
def test_p0_is_identity(name):
    img = make_image(H, W)
    assert np.array_equal(run([_op(name, p=0.0)], img), img)


@pytest.mark.parametrize("name", sorted(OP_CASES))
def test_p1_applies(name):
    img = make_image(H, W)
    always = OP_CASES[name][2]
    changed = []
    for i in range(8):
        out = run([_op(name, p=1.0)], img, relpath=f"img{i}.png")
        changed.append(out.shape != img.shape or not np.array_equal(out, img))
    if name == "identity" or name in BOX_OPS:   # the policies' "no change", exactly; no box, nothing to change
        assert not any(changed), changed
        return
    assert all(changed) if always else any(changed), changed


@pytest.mark.parametrize("name", ["random_brightness", "random_rotation", "random_crop", "gaussian_noise",
                                  "one_of", "random_erasing"])
def test_same_seed_same_pixels_other_seed_differs(name):
    img = make_image(H, W)
    a = run([_op(name)], img, relpath="a.png")
    assert np.array_equal(a, run([_op(name)], img, relpath="a.png"))
    others = [run([_op(name)], img, relpath=f"o{i}.png") for i in range(10)]  # one_of: 2 outcomes
    assert any(o.shape != a.shape or not np.array_equal(o, a) for o in others)
    assert not np.array_equal(a, run([_op(name)], img, relpath="a.png", seed=2)) or name == "one_of"


def test_p_half_applies_about_half_the_time():
    img = make_image(H, W)
    applied = sum(not np.array_equal(run([{"invert": {"p": 0.5}}], img, relpath=f"{i}.png"), img)
                  for i in range(60))
    assert 15 <= applied <= 45, applied


# ---- sampled parameters stay inside their ranges (property checks over many seeds) ----

def _rngs(n):
    from augd.ops.sampling import generator
    return [generator((i, 7 * i + 1)) for i in range(n)]


def test_brightness_delta_within_range():
    grey = np.full((8, 8, 3), 128, np.uint8)
    deltas = [(run([{"random_brightness": {"max_delta": 0.1}}], grey, relpath=f"{i}").astype(float) - 128).mean()
              for i in range(40)]
    assert max(abs(d) for d in deltas) <= 0.1 * 255 + 0.5
    assert min(deltas) < -5 and max(deltas) > 5  # the whole range is used


@pytest.mark.parametrize("degrees", [[-10, 10], [5, 15]])
def test_rotation_angle_within_range(degrees):
    op = REGISTRY["random_rotation"](REGISTRY["random_rotation"].Params(degrees=degrees))
    angles = []
    for rng in _rngs(100):
        m, oh, ow = op.sample(rng, 48.0, 64.0)
        angles.append(math.degrees(math.atan2(float(m[1, 0]), float(m[0, 0]))))
        assert (float(oh), float(ow)) == (48.0, 64.0)
    assert degrees[0] - 1e-4 <= min(angles) and max(angles) <= degrees[1] + 1e-4
    assert max(angles) - min(angles) > 0.6 * (degrees[1] - degrees[0])


def test_random_crop_window_inside_image_and_area_in_range():
    P = REGISTRY["random_crop"].Params
    op = REGISTRY["random_crop"](P(size=[50, 50], area=[0.2, 0.5], aspect=[0.75, 1.333]))
    h, w = 120.0, 200.0
    for rng in _rngs(100):
        m, oh, ow = op.sample(rng, h, w)
        corners = np.array([[-0.5, -0.5, 1], [49.5, 49.5, 1]]) @ m.T
        (x0, y0, _), (x1, y1, _) = corners
        assert -0.5 - 1e-3 <= x0 < x1 <= w - 0.5 + 1e-3 and -0.5 - 1e-3 <= y0 < y1 <= h - 0.5 + 1e-3
        area = (x1 - x0) * (y1 - y0) / (h * w)
        assert 0.2 - 1e-3 <= area <= 0.5 + 1e-3, area
        assert (float(oh), float(ow)) == (50.0, 50.0)


def test_contrast_factor_within_range():
    img = make_image(H, W)
    std0 = img.astype(float).std(axis=(0, 1))
    for i in range(20):
        out = run([{"random_contrast": {"lower": 0.5, "upper": 0.8}}], img, relpath=str(i)).astype(float)
        ratio = (out.std(axis=(0, 1)) / std0).mean()
        assert 0.5 - 0.03 <= ratio <= 0.8 + 0.03, ratio


def test_one_of_weights_are_respected():
    img = make_image(8, 8)
    ops = [{"one_of": {"weights": [0, 1], "ops": [{"invert": {}}, {"posterize": {"bits": 1}}]}}]
    for i in range(10):
        assert np.array_equal(run(ops, img, relpath=str(i)), img & 0x80)


def test_some_of_applies_exactly_n():
    img = np.full((4, 4, 3), 100, np.uint8)
    ops = [{"some_of": {"n": 2, "ops": [{"random_brightness": {"max_delta": 0.0}},  # no-op marker
                                        {"invert": {}}, {"invert": {}}, {"solarize": {"threshold": 0}}]}}]
    outs = {int(run(ops, img, relpath=str(i))[0, 0, 0]) for i in range(30)}
    # two of {noop, invert, invert, solarize(all)} -> 100 (two inverts, or noop+... pairs) or 155
    assert outs <= {100, 155} and len(outs) == 2


def test_the_od_apis_value_scale_and_image_scale_mean_what_the_api_means():
    """random_pixel_value_scale: each value times its own factor from [minval, maxval]; random_image_scale: one
    ratio for both sides, each truncated as the API's int(h x ratio) does."""
    grey = np.full((40, 50, 3), 200, np.uint8)
    out = run([{"random_pixel_value_scale": {"minval": 0.5, "maxval": 0.8}}], grey).astype(float) / 200
    assert 0.5 - 0.01 <= out.min() and out.max() <= 0.8 + 0.01 and out.std() > 0.05
    assert not np.array_equal(out[..., 0], out[..., 1])   # per value, not per pixel
    img = make_image(H, W)
    for i in range(8):
        out = run([{"random_image_scale": {"min_scale_ratio": 0.5, "max_scale_ratio": 2.0}}], img, relpath=f"s{i}.png")
        oh, ow = out.shape[:2]
        lo, hi = max(oh / H, ow / W), min((oh + 1) / H, (ow + 1) / W)   # the ratios r with int(H r), int(W r)
        assert lo < hi and 0.5 * H - 1 <= oh <= 2 * H, (oh, ow)          # == (oh, ow): there is one


@pytest.mark.parametrize("name,axis", [("random_flip_left_right", 0), ("random_flip_up_down", 1)])
def test_a_flips_own_coin_is_its_probability(name, axis):
    """The OD API's random_horizontal_flip / random_vertical_flip { probability }: the flip's own coin (0.5 by
    default, which the pipeline's serialized form leaves out)."""
    from augd.engine.plan import Program
    for prob in (0.5, 0.8, 0.1):
        spec = spec_for([{name: {"probability": prob}}])
        program = Program(spec.ops)
        flips = np.mean([program.geometry((i, 1), H, W)[0][0][axis, axis] < 0 for i in range(2000)])
        assert abs(flips - prob) < 0.04, (prob, flips)
        assert ("probability" in str(spec.ops[0].params.model_dump())) == (prob != 0.5)


@pytest.mark.parametrize("scale, shx, shy, rot", [(1.1, 8.0, 0.0, -20.0), (0.9, -12.0, 15.0, 30.0),
                                                  (1.0, 0.0, -25.0, 5.0), (1.3, 20.0, 20.0, -60.0)])
def test_random_affine_describes_the_scale_shears_and_rotation_its_matrix_holds(scale, shx, shy, rot):
    """describe reads the drawn parts back from the matrix the graph warps with (A = scale R Shy Shx)."""
    from types import SimpleNamespace

    from augd.ops.geometry import about_centre, mat, rotation
    t = lambda d: math.tan(math.radians(d))  # noqa: E731
    fwd = about_centre(rotation(math.radians(rot)) @ mat([[1, 0, 0], [t(shy), 1, 0], [0, 0, 1]])
                       @ mat([[1, t(shx), 0], [0, 1, 0], [0, 0, 1]]) @ mat([[scale, 0, 0], [0, scale, 0], [0, 0, 1]]),
                       H, W)
    op = REGISTRY["random_affine"](REGISTRY["random_affine"].Params(shear=20, shear_y=30, rotate=90))
    lines = op.describe(SimpleNamespace(matrix=np.linalg.inv(fwd), in_size=(H, W)))
    assert lines == [f"affine ×{scale:.2f} rot {rot:+.1f}°", f"  shear {shx:+.1f}°,{shy:+.1f}° shift +0,+0"], lines


@pytest.mark.parametrize("name", sorted(n for n, cls in REGISTRY.items() if cls.kind is Kind.GEOMETRY))
def test_a_geometry_op_skipped_draws_what_it_would_have_drawn(name):
    """An op that does not apply (its p, an unchosen child) takes the same numbers from the image's generator
    without making its matrix (GeometryOp.skip): every later op draws what it would have."""
    from augd.ops.sampling import generator
    cls = REGISTRY[name]
    op = cls(cls.Params(**OP_CASES[name][0]))
    extra = {"boxes": None} if op.uses_boxes else {}
    if op.uses_source:
        extra["source"] = (float(H), float(W))
    for seed in range(20):
        a, b = generator((seed, 1)), generator((seed, 1))
        op.skip(a, float(H), float(W), **extra)
        op.sample(b, float(H), float(W), **extra)
        assert a.random() == b.random(), (name, seed)

