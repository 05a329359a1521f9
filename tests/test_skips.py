"""What the per-image work skips for ops that do not apply gives what doing them did: the plan's walk (an op off, with
everything under it, takes its count of numbers at once: Program._skips) and the annotations' steps (a step of ops
that did not apply moves no point: augd.annotations.geometry.forward).
"""
import json

import numpy as np
import pytest

from augd.annotations import geometry
from augd.annotations.geometry import edge9, forward
from augd.engine.explain import explain
from augd.engine.plan import Colour, Program, Seeded, _leaves
from augd.ops.sampling import image_seed
from augd.schema import parse_pipeline
from tests.test_ops import OP_CASES


def _plans(program, seed, h, w, boxes):
    """Everything of one image's plan a kernel, a cover or an annotation reads: the values of the ops that apply
    (an op off is read by none), every Geo step, the covers, the least visibility, the keypoint events, the moves."""
    floats, ints = program.plan(seed, h, w, True, boxes)
    for step in program.steps:
        for slot in step.ops if isinstance(step, Colour) else [step] if isinstance(step, Seeded) else []:
            if not ints[slot.on]:   # ColourSlot.params; Seeded.seed and its region
                for at in (getattr(slot, "params", None), getattr(slot, "region", None)):
                    if at is not None:
                        floats[at] = 0.0
                if isinstance(slot, Seeded):
                    ints[slot.seed] = 0
    a = program.annotation_plan(seed, h, w, boxes)
    return floats.tolist(), ints.tolist(), [(m.tolist(), oh, ow) for m, oh, ow in a.steps], repr(a[1:])


CHAINS_WITH_OPS_OFF = {
    **{f"autoaugment {v}": [{"autoaugment": {"policy": v}}] for v in ("v0", "v1", "v2", "v3")},
    "randaugment": [{"randaugment": {"n": 2, "m": 9}}],
    "trivial_augment": [{"trivial_augment": {}}],
    # every op once, one of them an image, each at p 0.5, then every op at p 0.5 in turn
    "every op": [{"one_of": {"ops": [{n: c[0]} for n, c in sorted(OP_CASES.items())]}},
                 *({n: {**c[0], "p": 0.5}} for n, c in sorted(OP_CASES.items()))],
}


@pytest.mark.parametrize("chain", sorted(CHAINS_WITH_OPS_OFF))
def test_a_plan_that_skips_its_ops_off_plans_what_drawing_them_did(chain):
    """Program._skips: an op (or a composite with all under it) that does not apply to an image takes its count of
    numbers from the generator at once. The plan must be what drawing them one by one gives, for every image size
    and box: the values of the ops that apply, every step's matrix and size, covers, visibility, events and moves."""
    spec = parse_pipeline(json.dumps({"name": "off", "ops": CHAINS_WITH_OPS_OFF[chain]}))
    fast, slow = Program(spec.ops), Program(spec.ops)
    leaves = list(_leaves(slow.tree))
    assert any(leaf.off is not None for leaf in leaves)   # the skip is in play
    for leaf in leaves:
        leaf.off = None
    rng = np.random.default_rng(5)
    for k in range(60):
        h, w = int(rng.integers(8, 900)), int(rng.integers(8, 900))
        h, w = (h, h) if k % 4 == 0 else (h % 9 + 5, w % 9 + 5) if k % 7 == 0 else (h, w)   # squares, a few pixels
        n = int(rng.integers(0, 5))
        x0, y0 = rng.uniform(0, w - 4, n), rng.uniform(0, h - 4, n)
        boxes = np.column_stack([x0, y0, x0 + rng.uniform(2, w / 2, n), y0 + rng.uniform(2, h / 2, n)]) if n else None
        seed = image_seed(7, f"im{k}.jpg", 1)
        assert _plans(fast, seed, h, w, boxes) == _plans(slow, seed, h, w, boxes), (chain, k, h, w)
        assert [d.values for d in explain(fast, seed, h, w, boxes)] == [d.values for d in explain(slow, seed, h, w, boxes)]


def _shapes(rng, n, h, w):
    """n polygons (3-6 vertices) scattered over and past an h x w canvas."""
    return [[(float(x), float(y)) for x, y in zip(rng.uniform(-0.2 * w, 1.2 * w, k), rng.uniform(-0.2 * h, 1.2 * h, k))]
            for k in rng.integers(3, 7, n)]


def test_a_step_of_ops_that_did_not_apply_moves_no_point_and_cuts_nothing():
    """forward() passes over an identity step on the canvas of the step before it. The result must be forward()'s
    over the steps without it; an identity step first (the source's own canvas, which shapes may overrun) or onto
    another canvas (a crop at the origin, a pad) still clips and still says what it cut."""
    rng = np.random.default_rng(11)
    eye = np.eye(3)
    for case in range(200):
        h, w = float(rng.integers(20, 300)), float(rng.integers(20, 300))
        turn = np.array([[np.cos(a := rng.uniform(-0.5, 0.5)), -np.sin(a), w / 4], [np.sin(a), np.cos(a), -h / 5],
                         [0.0, 0.0, 1.0]])
        real = [(turn, h, w), (np.array([[0.8, 0.1, 3.0], [-0.1, 0.9, 2.0], [0, 0, 1.0]]), h * 0.7, w * 0.8)]
        kept = [real[0], (eye, h, w), (eye, h, w), real[1], (eye, h * 0.7, w * 0.8)]   # idle steps between
        polys = _shapes(rng, int(rng.integers(1, 4)), h, w)
        calls = []
        with pytest.MonkeyPatch.context() as mp:   # and the idle steps map no point at all
            mp.setattr(geometry, "_map", lambda t, p, _map=geometry._map: calls.append(t) or _map(t, p))
            got = forward(polys, [edge9(m) for m, _, _ in kept], kept)
            idle = len(calls)
            assert got == forward(polys, [edge9(m) for m, _, _ in real], real), case
            assert idle == len(calls) - idle, case
        cut = forward(polys, [edge9(eye)], [(eye, h, w)])[2]   # the first step judges the source's shapes
        assert cut == any(x < 0 or y < 0 or x > w or y > h for p in polys for x, y in p), case
        smaller = [real[0], (eye, h / 2, w / 2)]   # the same matrix onto a smaller canvas: a crop, which clips
        clipped = forward(polys, [edge9(m) for m, _, _ in smaller], smaller)[0]
        assert all(0 <= x <= w / 2 + 1e-9 and 0 <= y <= h / 2 + 1e-9 for p in clipped for x, y in p), case


def test_an_op_whose_count_of_numbers_follows_the_image_keeps_drawing_them(monkeypatch):
    """Against Op.skip's rule: an op that took one number more on a square image. _skips must see its count vary and
    leave it drawing (off None, and its composites too), so that the plan stays what drawing every number gives."""
    from augd.ops import REGISTRY
    cls = REGISTRY["random_rotation"]
    real = cls.skip

    def square_draws_more(self, rng, h, w, **extra):
        real(self, rng, h, w, **extra)
        if h == w:
            rng.random()
    monkeypatch.setattr(cls, "skip", square_draws_more)
    ops = [{"one_of": {"ops": [{"random_rotation": {"degrees": 10}}, {"random_flip_left_right": {}}]}},
           {"random_rotation": {"degrees": 5, "p": 0.5}}, {"random_brightness": {"max_delta": 0.2}}]
    spec = parse_pipeline(json.dumps({"name": "follows", "ops": ops}))
    fast, slow = Program(spec.ops), Program(spec.ops)
    leaves = list(_leaves(fast.tree))
    assert [leaf.off is None for leaf in leaves] == [True, True, False, True, False]
    for leaf in _leaves(slow.tree):
        leaf.off = None
    for k in range(40):
        side = int(np.random.default_rng(k).integers(8, 400))
        seed = image_seed(3, f"im{k}.jpg", 1)
        assert _plans(fast, seed, side, side, None) == _plans(slow, seed, side, side, None), k
