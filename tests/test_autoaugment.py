"""AutoAugment for detection (augd/ops/policies.py `autoaugment`) and the ops it needs (augd/ops/boxes.py:
`in_boxes`, `box_cutout`, `cutout`; random_affine's pixel shifts; `random_brightness_scale`), judged by the pixels
of synthetic scenes: solid rectangles on white, each with a darker stripe of its own hue at its left edge, so that a
flip inside a box shows and a colour's extent is its object's, stripe and all."""
from __future__ import annotations

import collections
import json
import re

import cv2
import numpy as np
import pytest

from augd.engine import Engine
from augd.engine.explain import explain
from augd.job import JobOptions, run_job
from augd.ops.policies import AUTOAUGMENT, autoaugment_op
from augd.schema import parse_pipeline
from tests.annotated import Img, Shape, coco_job, voc_job
from tests.test_tiles import _boxes, _records

H, W = 160, 240
COLOURS = {"red": (230, 30, 30), "blue": (30, 30, 230)}
STRIPES = {"red": (120, 10, 10), "blue": (10, 10, 120)}
GREY = 128


def _spec(ops: list, variants: int = 1, seed: int = 5):
    return parse_pipeline(json.dumps({"name": "aa", "seed": seed, "variants": variants, "keep_original": False,
                                      "output": {"format": "png", "shards": 1}, "ops": ops}), "aa.yaml")


def _scene(root, n: int = 3, coco: bool = False) -> dict:
    """n images of 4 objects each (no two touching), a stripe 10 px wide at each object's left edge. Returns
    {image relpath: (the source pixels, [(class, (x0, y0, x1, y1)), ...])}."""
    imgs = []
    for i in range(n):
        rng = np.random.default_rng(10 + i)
        shapes = []
        for k in range(4):
            cls = list(COLOURS)[k % 2]
            x0, y0 = 12 + 56 * k + int(rng.integers(0, 6)), 20 + int(rng.integers(0, 70))
            shapes.append(Shape(cls, (x0, y0, x0 + 36 + int(rng.integers(0, 8)), y0 + 30 + int(rng.integers(0, 20))),
                                COLOURS[cls]))
        imgs.append(Img(f"im{i}.png", H, W, tuple(shapes)))
    expected = (coco_job if coco else voc_job)(str(root), imgs)
    out = {}
    for img, (rel, boxes) in zip(imgs, sorted(expected.items())):
        px = cv2.imread(str(root / rel))[:, :, ::-1].copy()
        for s in img.objects():
            x0, y0, x1, y1 = s.geom
            px[y0:y1, x0:x0 + 10] = STRIPES[s.cls]
        cv2.imwrite(str(root / rel), px[:, :, ::-1])
        out[rel.split("/")[-1]] = (px, [(s.cls, s.geom) for s in img.objects()])
    return out


def _job(tmp_path, ops, variants=2, n=3):
    scene = _scene(tmp_path / "voc", n)
    spec = _spec(ops, variants)
    run_job(str(tmp_path / "voc"), spec, str(tmp_path / "out"), JobOptions(workers=1, executor="threads"))
    return scene, _records(tmp_path / "out" / "voc"), spec


def _lead(px, colour, margin: int = 60) -> np.ndarray:
    """Where the colour's channel leads the others by `margin` (its hue, whatever the levels)."""
    c = int(np.argmax(colour))
    x = px.astype(np.int32)
    return (x[:, :, c] - np.maximum(x[:, :, (c + 1) % 3], x[:, :, (c + 2) % 3])) > margin


def _extent(mask) -> tuple | None:
    ys, xs = np.nonzero(mask)
    return None if not len(xs) else (xs.min(), ys.min(), xs.max() + 1, ys.max() + 1)


def _source(scene, r):
    return scene[r["image/filename"].split("/")[-1]]


def _equalized(ch: np.ndarray) -> np.ndarray:
    """PIL.ImageOps.equalize of one channel (uint8): each box's own histogram."""
    hist = np.bincount(ch.ravel(), minlength=256)
    nonzero = hist[hist > 0]
    step = (nonzero.sum() - nonzero[-1]) // 255
    if not step:
        return ch
    lut = np.clip(np.concatenate([[0], ((np.cumsum(hist) + step // 2) // step)[:-1]]), 0, 255)
    return lut[ch].astype(np.uint8)


def test_flip_solarize_and_equalize_inside_boxes_change_only_the_boxes_pixels(tmp_path):
    ops = [{"one_of": {"ops": [{"in_boxes": {"op": "flip"}}, {"in_boxes": {"op": "solarize", "value": 100}},
                               {"in_boxes": {"op": "equalize"}}]}}]
    scene, records, spec = _job(tmp_path, ops, variants=6)
    compiled = Engine().compile(spec)
    seen = collections.Counter()
    for r in records:
        src, objects = _source(scene, r)
        out = r["pixels"]
        (op,) = [d.params.op for d in compiled.explain(r["image/filename"], r["augd/variant"], H, W,
                                                       [b for _, b in objects]) if d.name == "in_boxes" and d.applied]
        seen[op] += 1
        inside = np.zeros((H, W), bool)
        for _, (x0, y0, x1, y1) in objects:
            inside[y0:y1, x0:x1] = True
            block = src[y0:y1, x0:x1]
            want = {"flip": block[:, ::-1], "solarize": np.where(block >= 100, 255 - block, block),
                    "equalize": np.dstack([_equalized(block[..., c]) for c in range(3)])}[op]
            assert np.array_equal(out[y0:y1, x0:x1], want), (op, r["image/filename"])
            assert not np.array_equal(want, block)
        assert np.array_equal(out[~inside], src[~inside]), op
        assert np.allclose(sorted(b for _, b in _boxes(r)), sorted(b for _, b in objects), atol=1e-3)   # kept
    assert set(seen) == {"flip", "solarize", "equalize"}, seen
    compiled.close()


@pytest.mark.parametrize("op, size", [("translate_x", {"value": 12}), ("translate_y", {"value": 12}),
                                      ("translate_x", {"value": 48, "reference": 960})])   # 48 px at 960: 12 at 240
def test_a_shift_inside_boxes_leaves_grey_and_the_box_shrinks_to_what_shows(tmp_path, op, size):
    scene, records, _ = _job(tmp_path, [{"in_boxes": {"op": op, **size, "fill": GREY}}], variants=3)
    for r in records:
        src, objects = _source(scene, r)
        got = sorted(_boxes(r), key=lambda cb: cb[1][0])
        assert len(got) == len(objects)
        for (cls, box), (_, (x0, y0, x1, y1)) in zip(got, sorted(objects, key=lambda o: o[1][0])):
            shown = np.zeros((H, W), bool)
            shown[y0:y1, x0:x1] = True
            seen = _extent(shown & _lead(r["pixels"], COLOURS[cls]))
            assert np.abs(np.subtract(seen, box)).max() <= 1, (cls, box, seen)
            side = (box[2] - box[0], x1 - x0) if op == "translate_x" else (box[3] - box[1], y1 - y0)
            assert side[0] == pytest.approx(side[1] - 12, abs=1)
            strip = r["pixels"][y0:y1, x0:x1].reshape(-1, 3)
            assert (np.abs(strip.astype(int) - GREY).max(1) <= 1).sum() >= 12 * min(x1 - x0, y1 - y0)


def test_holes_inside_boxes_stay_inside_them_and_boxes_keep_what_shows(tmp_path):
    ops = [{"one_of": {"ops": [{"box_cutout": {"boxes": "each", "size": 16, "fill": GREY}},
                               {"box_cutout": {"boxes": "one", "fraction": 0.9, "fill": GREY}},
                               {"cutout": {"size": 60, "fill": GREY}}]}}]
    scene, records, spec = _job(tmp_path, ops, variants=8)
    compiled = Engine().compile(spec)
    kinds = collections.Counter()
    for r in records:
        src, objects = _source(scene, r)
        out = r["pixels"]
        (d,) = [d for d in compiled.explain(r["image/filename"], r["augd/variant"], H, W, [b for _, b in objects])
                if d.depth == 1 and d.applied]
        grey = np.abs(out.astype(int) - GREY).max(2) <= 1
        inside = np.zeros((H, W), bool)
        for _, (x0, y0, x1, y1) in objects:
            inside[y0:y1, x0:x1] = True
        changed = (out != src).any(2)
        assert changed.any() and grey[changed].all()   # every pixel changed is a hole's grey
        if d.name == "box_cutout" and d.params.boxes == "each":
            assert not (changed & ~inside).any()       # cut by each box
            kinds["each"] += 1
            assert sum(changed[y0:y1, x0:x1].any() for _, (x0, y0, x1, y1) in objects) == 4
        elif d.name == "box_cutout":
            kinds["one"] += 1
            labels = cv2.connectedComponents(changed.astype(np.uint8))[0] - 1
            assert labels == 1 and sum(changed[y0:y1, x0:x1].any() for _, (x0, y0, x1, y1) in objects) >= 1
        else:
            kinds["cutout"] += 1
        for cls, box in _boxes(r):   # the occlusion rule: each box is the extent of what still shows of it
            near = np.zeros((H, W), bool)
            bx0, by0, bx1, by1 = (int(round(v)) for v in box)
            near[max(by0 - 2, 0):by1 + 2, max(bx0 - 2, 0):bx1 + 2] = True
            seen = _extent(near & _lead(out, COLOURS[cls]))
            assert seen is not None and np.abs(np.subtract(seen, box)).max() <= 1, (d.name, cls, box, seen)
    assert set(kinds) == {"each", "one", "cutout"}, kinds
    compiled.close()


def test_every_operation_of_the_policies_maps_with_the_od_apis_levels():
    names = {name for subs in AUTOAUGMENT.values() for sub in subs for name, _, _ in sub}
    assert len(names) == 22, sorted(names)   # the paper's 22; the OD API has three more _Only_BBoxes, unused
    for name in names | {"Rotate_Only_BBoxes", "TranslateX_Only_BBoxes", "Solarize_Only_BBoxes"}:
        autoaugment_op(name, 0.5, 6)
    assert [len(AUTOAUGMENT[p]) for p in ("v0", "v1", "v2", "v3")] == [5, 20, 15, 15]
    affine = autoaugment_op("TranslateX_BBox", 0.6, 4)["one_of"]
    assert affine["p"] == 0.6 and [o["random_affine"]["shift_x"] for o in affine["ops"]] == [[100.0, 100.0],
                                                                                            [-100.0, -100.0]]
    assert autoaugment_op("Rotate_BBox", 0.6, 10)["one_of"]["ops"][0]["random_affine"]["rotate"] == [30.0, 30.0]
    shear = autoaugment_op("ShearY_BBox", 1.0, 2)["one_of"]["ops"][1]["random_affine"]["shear_y"][0]
    assert np.tan(np.radians(shear)) == pytest.approx(-0.06, abs=1e-5)
    assert autoaugment_op("TranslateY_Only_BBoxes", 0.6, 6) == {"in_boxes": {"op": "translate_y", "value": 72.0,
                                                                             "box_p": 0.2, "fill": 128}}
    assert autoaugment_op("Cutout", 0.8, 8) == {"cutout": {"size": 160, "fill": 128, "p": 0.8}}
    assert autoaugment_op("BBox_Cutout", 1.0, 4)["box_cutout"]["fraction"] == 0.3
    assert autoaugment_op("Cutout_Only_BBoxes", 0.4, 6)["box_cutout"]["size"] == 60
    assert autoaugment_op("Color", 1.0, 6) == {"random_color": {"lower": 1.18, "upper": 1.18, "p": 1.0}}
    assert autoaugment_op("Brightness", 0.8, 10)["random_brightness_scale"]["lower"] == 1.9
    assert autoaugment_op("Solarize", 0.8, 8)["solarize"]["threshold"] == 204
    assert autoaugment_op("SolarizeAdd", 0.4, 4)["solarize_add"]["addition"] == 44
    assert autoaugment_op("Posterize", 0.8, 2)["posterize"]["bits"] == 4
    assert autoaugment_op("ShearX_BBox", 0.4, 0) == {"identity": {"p": 0.4}}
    # augd's own `scale: image`: the ops that draw pixels take them as written for a 640 px side
    scaled = {name: autoaugment_op(name, 0.5, 6, reference=640) for name in names}
    pixels = {"TranslateX_BBox", "TranslateY_BBox", "TranslateY_Only_BBoxes", "Cutout", "Cutout_Only_BBoxes"}
    for name, op in scaled.items():
        said = json.dumps(op)
        assert ('"reference": 640' in said) == (name in pixels), (name, said)
        assert json.loads(said.replace(', "reference": 640', "")) == autoaugment_op(name, 0.5, 6), name


def test_autoaugment_scaled_to_the_image_is_augds_own_option_and_moves_by_the_images_side(tmp_path):
    """`scale: image` (not the published policy, said so in its name and the preview): a level-10 shift of 250 px
    at 640 is 250 * 240 / 640 = 93.75 px on a 240 px image, which the pixels show; the default serializes as
    before."""
    assert _spec([{"autoaugment": {"policy": "v3"}}]).normalized()["ops"] == [
        {"autoaugment": {"p": 1.0, "policy": "v3"}}]
    spec = _spec([{"autoaugment": {"policy": "v3", "scale": "image"}}])
    assert spec.normalized()["ops"] == [{"autoaugment": {"p": 1.0, "policy": "v3", "scale": "image"}}]
    from augd.engine.plan import Program
    from augd.ops import REGISTRY
    top = explain(Program(spec.ops), (1, 7), H, W, [])[0]
    assert REGISTRY["autoaugment"](spec.ops[0].params).describe(top)[0].startswith(
        "autoaugment v3 scaled to the image #")
    shift = autoaugment_op("TranslateX_BBox", 1.0, 10, reference=640)["one_of"]["ops"]
    scene, records, _ = _job(tmp_path, [{"one_of": {"ops": shift}}], variants=4)
    moved = collections.Counter()
    for r in records:
        src, objects = _source(scene, r)
        for cls, (x0, y0, x1, y1) in objects:
            here = _extent(_lead(src, COLOURS[cls]) & _box_mask(x0, y0, x1, y1))
            for dx in (-93.75, 93.75):   # the object where the shift puts it, if it still shows there whole
                if 0 <= x0 + dx and x1 + dx <= W:
                    there = _extent(_lead(r["pixels"], COLOURS[cls]) & _box_mask(x0 + dx, y0, x1 + dx, y1))
                    if there is not None and abs((there[2] - there[0]) - (here[2] - here[0])) <= 1:
                        assert abs(there[0] - (here[0] + dx)) <= 1, (cls, here, there, dx)
                        moved[dx > 0] += 1
    assert moved[True] and moved[False], moved


def _box_mask(x0, y0, x1, y1) -> np.ndarray:
    m = np.zeros((H, W), bool)
    m[max(int(y0), 0):min(int(np.ceil(y1)), H), max(int(x0), 0):min(int(np.ceil(x1)), W)] = True
    return m


@pytest.mark.parametrize("policy", ["v0", "v1", "v2", "v3"])
def test_a_policy_expands_serializes_and_the_preview_names_each_sub_policy(policy):
    spec = _spec([{"autoaugment": {"policy": policy}}])
    node = spec.ops[0]
    assert [c.name for c in node.children] == ["sequence"] * len(AUTOAUGMENT[policy])
    assert spec.normalized()["ops"] == [{"autoaugment": {"p": 1.0, "policy": policy}}]
    again = parse_pipeline(json.dumps({**spec.normalized(), "name": "aa"}), "again.yaml")
    assert again.sha256 == spec.sha256 and again.ops[0].children == node.children
    from augd.engine.plan import Program
    from augd.ops import REGISTRY
    program, op = Program(spec.ops), REGISTRY["autoaugment"](node.params)
    drawn = collections.Counter()
    boxes = [(10.0, 10.0, 60.0, 50.0), (100.0, 40.0, 150.0, 90.0)]
    for seed in range(300):
        top = explain(program, (seed, 7), H, W, boxes)[0]
        (k,) = top.picked
        drawn[k] += 1
        line = op.describe(top)[0]
        assert line.startswith(f"autoaugment {policy} #{k + 1}: ") and AUTOAUGMENT[policy][k][0][0] in line
    assert sorted(drawn) == list(range(len(AUTOAUGMENT[policy]))), drawn


#: what moves or hides pixels without changing a colour's hue: records drawing only these are judged by the pixels
_JUDGED = {"random_affine", "cutout", "box_cutout", "identity"} | {
    f"in_boxes {op}" for op in ("rotate", "shear_x", "shear_y", "translate_x", "translate_y", "flip")}


@pytest.mark.parametrize("policy", ["v0", "v1", "v2", "v3"])
def test_every_box_a_policy_moves_stays_on_its_object(tmp_path, policy):
    scene, records, spec = _job(tmp_path, [{"autoaugment": {"policy": policy}}], variants=16)
    compiled = Engine().compile(spec)
    judged = 0
    for r in records:
        src, objects = _source(scene, r)
        applied = {d.name if d.name != "in_boxes" else f"in_boxes {d.params.op}"
                   for d in compiled.explain(r["image/filename"], r["augd/variant"], H, W, [b for _, b in objects])
                   if d.applied and d.depth >= 2 and d.name not in ("one_of",)}
        if applied - _JUDGED:
            continue
        out = r["pixels"]
        h, w = out.shape[:2]
        for cls, box in _boxes(r):
            near = np.zeros((h, w), bool)
            bx0, by0, bx1, by1 = (int(round(v)) for v in box)
            near[max(by0 - 3, 0):by1 + 3, max(bx0 - 3, 0):bx1 + 3] = True
            seen = _extent(near & _lead(out, COLOURS[cls]))
            assert seen is not None and np.abs(np.subtract(seen, box)).max() <= 3, (applied, cls, box, seen)
            judged += 1
        for cls, colour in COLOURS.items():   # and no object shows more than min_visibility of itself unboxed
            n, _, stats, _ = cv2.connectedComponentsWithStats(_lead(out, colour).astype(np.uint8))
            for x, y, bw, bh, area in stats[1:n]:
                if area >= 400:   # the least object is 36 x 30 px; min_visibility 0.3 of it, 324 px, may go
                    assert any(c == cls and b[0] - 3 <= x and b[1] - 3 <= y and x + bw <= b[2] + 3 and
                               y + bh <= b[3] + 3 for c, b in _boxes(r)), (applied, cls, (x, y, bw, bh))
    compiled.close()
    assert judged >= 12, judged


def test_the_policies_that_move_inside_boxes_run_on_a_job_with_masks(tmp_path):
    """v0 and v1 move pixels inside boxes, and the masks with them (tests/test_polygon_keys.py judges that by the
    pixels): a COCO job with instance masks runs them as it runs v3."""
    scene = _scene(tmp_path / "coco", 2, coco=True)
    moved = collections.Counter()
    for policy in ("v0", "v1", "v3"):
        spec = _spec([{"autoaugment": {"policy": policy}}], variants=8)
        run_job(str(tmp_path / "coco"), spec, str(tmp_path / policy), JobOptions(workers=1, executor="threads"))
        manifest = json.loads((tmp_path / policy / "coco" / "manifest.json").read_text())
        assert manifest["records"]["written"] == 2 * 8, policy
        compiled = Engine().compile(spec)
        for r in _records(tmp_path / policy / "coco"):
            drawn = compiled.explain(r["image/filename"], r["augd/variant"], H, W, [b for _, b in _source(scene, r)[1]])
            moved[policy] += sum(d.name == "in_boxes" and d.applied and d.params.op not in ("solarize", "equalize")
                                 for d in drawn)
        compiled.close()
    assert moved["v0"] and moved["v1"] and not moved["v3"], moved   # the runs did move pixels inside boxes


def test_the_preview_with_the_job_draws_from_its_boxes_and_shows_each_records_boxes(tmp_path):
    """`augd preview --root`: a box-aware op draws from the image's boxes as in the job (a flip inside each box
    shows), and each tile names and outlines the boxes its record carries."""
    from augd.preview import preview_rows
    scene = _scene(tmp_path / "voc", 1)
    (name, (src, objects)), = scene.items()
    # the cutout takes all, or all but a sliver of what lies at the image's edge: no box kept, the sliver ignored
    spec = _spec([{"in_boxes": {"op": "flip"}}, {"cutout": {"size": 400}}], variants=2)
    row, = preview_rows(spec, [tmp_path / "voc" / "JPEGImages" / name], relpaths=[f"JPEGImages/{name}"],
                        root=tmp_path / "voc")
    assert all(tuple(row.tiles[0].image[y0, x0]) == (255, 230, 0) for _, (x0, y0, _, _) in objects)   # the input's
    for tile in row.tiles[1:]:
        assert re.fullmatch(r"0 box\(es\)|(\d+) box\(es\), \1 ignored", tile.lines[-1]), tile.lines[-1]
        assert any(line.startswith("in boxes: flip × 4") for line in tile.lines)
    spec = _spec([{"in_boxes": {"op": "flip"}}], variants=2)
    row, = preview_rows(spec, [tmp_path / "voc" / "JPEGImages" / name], relpaths=[f"JPEGImages/{name}"],
                        root=tmp_path / "voc")
    for tile in row.tiles[1:]:
        assert tile.lines[-1] == "4 box(es)"
        for _, (x0, y0, x1, y1) in objects:   # inside the drawn outline, the box's pixels mirrored
            assert np.array_equal(tile.image[y0 + 3:y1 - 3, x0 + 3:x1 - 3], src[y0:y1, x0:x1][:, ::-1][3:-3, 3:-3])
            assert tuple(tile.image[y0, x0]) == (255, 230, 0)   # the record's box, outlined
