"""randaugment and trivial_augment (augd/ops/policies.py): what they expand to, that their draws cover their
operations and are what the preview says, and, on a detection job judged by the pixels, that every record a
geometric operation made keeps its boxes on its objects."""
from __future__ import annotations

import collections
import json

import cv2
import numpy as np
import pytest

from augd.engine import Engine
from augd.job import JobOptions, run_job
from augd.ops.policies import randaugment_ops, trivial_augment_ops
from augd.schema import parse_pipeline
from tests.annotated import Img, Shape, voc_job
from tests.helpers import make_image, png

GEOMETRY = {"random_affine"}
COLOURS = {"red": (230, 30, 30), "green": (30, 210, 30), "blue": (30, 30, 230)}


def _spec(policy: str, variants: int = 1, fmt: str = "raw"):
    return parse_pipeline(f"name: pol\nseed: 3\nvariants: {variants}\nkeep_original: false\n"
                          f"output: {{format: {fmt}, shards: 1}}\nops:\n  - {policy}\n", "pol.yaml")


def test_a_policy_expands_to_its_operations_and_serializes_as_its_parameters():
    ra = _spec("randaugment: {n: 3, m: 12}")
    node = ra.ops[0]
    assert [c.name for c in node.children] == ["one_of"] * 3
    assert [next(iter(o)) for o in randaugment_ops(12)] == [c.name for c in node.children[0].children]
    assert len(node.children[0].children) == len(trivial_augment_ops()) == 14
    assert ra.normalized()["ops"] == [{"randaugment": {"p": 1.0, "n": 3, "m": 12}}]
    again = parse_pipeline(json.dumps({**ra.normalized(), "name": "pol"}), "again.yaml")
    assert again.sha256 == ra.sha256 and again.ops[0].children == node.children
    weak = {next(iter(o)): o for o in randaugment_ops(0)}
    assert weak["posterize"]["posterize"]["bits"] == 8 and weak["solarize"]["solarize"]["threshold"] == 255
    strong = {next(iter(o)): o for o in randaugment_ops(30)}
    assert strong["posterize"]["posterize"]["bits"] == 4 and strong["solarize"]["solarize"]["threshold"] == 0


@pytest.mark.parametrize("policy", ["randaugment: {n: 1, m: 20}", "trivial_augment: {}"])
def test_a_policy_draws_each_of_its_operations_and_the_preview_names_them(policy):
    spec = _spec(policy)
    compiled = Engine().compile(spec)
    img = make_image(64, 80)
    seen, outputs = collections.Counter(), set()
    for v in range(120):
        chosen = [d.name for d in compiled.explain(f"img{v}.png", 1, 64, 80) if d.applied and d.depth >= 1
                  and d.name not in ("one_of",)]
        seen.update({c.split(":")[0] for c in chosen})
        r = compiled.process(png(img), f"img{v}.png", 1)
        outputs.add(hash(r.payload))
    names = _leaves(randaugment_ops(20) if "rand" in policy else trivial_augment_ops())
    assert set(seen) <= names and len(seen) >= 10, seen
    # RandAugment's magnitude is fixed (its draws: which op, which sign, a shift's or brightness' amount);
    # TrivialAugment's is drawn from each op's whole range
    assert len(outputs) >= (25 if "rand" in policy else 80), f"{len(outputs)} different images of 120"
    compiled.close()


def _leaves(ops: list[dict]) -> set[str]:
    """The operations (not the one_of composites around them) of a policy's list."""
    out = set()
    for op in ops:
        (name, body), = op.items()
        out |= _leaves(body["ops"]) if name == "one_of" else {name}
    return out


def _scenes(root) -> None:
    imgs = []
    for i in range(4):
        rng = np.random.default_rng(i)
        shapes = []
        for k, (cls, colour) in enumerate(COLOURS.items()):
            x0, y0 = 20 + 90 * k + int(rng.integers(0, 10)), 40 + int(rng.integers(0, 60))
            shapes.append(Shape(cls, (x0, y0, x0 + int(rng.integers(30, 50)), y0 + int(rng.integers(30, 50))), colour))
        imgs.append(Img(f"im{i}.png", 200, 300, tuple(shapes)))
    voc_job(str(root), imgs)


def _extent(pixels, colour):
    c = int(np.argmax(colour))
    x = pixels.astype(np.int32)
    lead = ((x[:, :, c] - np.maximum(x[:, :, (c + 1) % 3], x[:, :, (c + 2) % 3])) > 60).astype(np.uint8)
    lead = cv2.morphologyEx(lead, cv2.MORPH_OPEN, np.ones((3, 3), np.uint8))
    ys, xs = np.nonzero(lead)
    return None if not len(xs) else (xs.min(), ys.min(), xs.max() + 1, ys.max() + 1)


@pytest.mark.parametrize("policy", ["randaugment: {n: 2, m: 20}", "trivial_augment: {}"])
def test_boxes_follow_the_geometric_operations_a_policy_draws(tmp_path, policy):
    from tests.test_tiles import _records
    _scenes(tmp_path / "voc")
    spec = _spec(policy, variants=12, fmt="png")
    run_job(str(tmp_path / "voc"), spec, str(tmp_path / "out"), JobOptions(workers=1, executor="threads"))
    compiled = Engine().compile(spec)
    judged = 0
    for r in _records(tmp_path / "out" / "voc"):
        decisions = compiled.explain(r["image/filename"], r["augd/variant"], 200, 300)
        applied = {d.name for d in decisions if d.applied and d.depth >= 1} - {"one_of"}
        if not applied & GEOMETRY or applied - GEOMETRY - {"identity"}:
            continue   # a colour operation changes hues: judge the records that only moved pixels
        h, w = r["pixels"].shape[:2]
        for cls, x0, y0, x1, y1 in zip(r["image/object/class/text"], r["image/object/bbox/xmin"],
                                       r["image/object/bbox/ymin"], r["image/object/bbox/xmax"],
                                       r["image/object/bbox/ymax"]):
            seen = _extent(r["pixels"], COLOURS[cls])
            box = (x0 * w, y0 * h, x1 * w, y1 * h)
            assert seen is not None and np.abs(np.subtract(seen, box)).max() <= 3, (applied, cls, box, seen)
            judged += 1
    compiled.close()
    assert judged >= 12, judged
