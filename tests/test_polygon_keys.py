"""Polygons out (annotations: {polygon_keys: true}, docs/records.md#polygons), judged by the pixels: COCO scenes of
solid polygons (a triangle, a pentagon, a concave L, a hexagon: one hue per class, on black) through a real job per
geometric op family (tests.test_oriented_boxes.FAMILIES: flips, quarter turns, rotations, shears, perspective, crops,
pads, a cutout, mosaic, tiles, in_boxes' turns and shifts inside each box); every record is read back with TensorFlow
and each object's rings are held to its object's pixels both ways: the rings' area within 3 % of the pixels of its
class they lie on (each pixel weighed by the share of it the object covers, as its brightness on black says:
coverage()), every ring inside its object's box, and every piece a viewer can see lies under some object's rings.
augd.data.load returns the same rings.

`python -m tests.test_polygon_keys` prints, per family, the area error (max and median) and the pieces judged.
"""
from __future__ import annotations

import json
import math
import statistics

import cv2
import numpy as np
import pytest
import tensorflow as tf

import augd.data
from augd.io.lite import POLYGON_KEYS
from augd.job import JobOptions, run_job
from augd.schema import parse_pipeline
from tests.annotated import Img, Shape, _write, _write_image, coco_json
from tests.exports import paint
from tests.hues import CLASSES, class_pixels, coverage
from tests.test_oriented_boxes import FAMILIES, H, W

#: the area error allowed (share of the object's pixels, each weighed by its coverage: coverage())
AREA = 0.03
#: a piece under this many pixels (a sliver a canvas or a cover cut) is judged for being under rings, not by area
LEAST = 200
PIPELINE = """name: poly
seed: 7
variants: VARIANTS
keep_original: false
output: {format: png, shards: 1}
annotations: {format: coco, min_visibility: 0, min_size: 2, polygon_keys: true}
ops:
  OPS
"""


def _outline(kind: str, cx: float, cy: float, r: float, turn: float) -> tuple:
    if kind == "l":   # concave: a square of side 2r less its top-right quarter
        pts = [(-r, -r), (0, -r), (0, 0), (r, 0), (r, r), (-r, r)]
    else:
        n = {"triangle": 3, "pentagon": 5, "hexagon": 6}[kind]
        pts = [(r * math.cos(2 * math.pi * k / n), r * math.sin(2 * math.pi * k / n)) for k in range(n)]
    c, s = math.cos(turn), math.sin(turn)
    return tuple((cx + x * c - y * s, cy + x * s + y * c) for x, y in pts)


def scenes(n: int = 4, seed: int = 0) -> list[Img]:
    """n images of 4 polygons, one per class and kind, each in its own quarter (they never touch)."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        shapes = []
        for k, ((cls, colour), kind) in enumerate(zip(CLASSES.items(), ("triangle", "pentagon", "l", "hexagon"))):
            cx, cy = (k % 2 + 0.5) * W / 2 + rng.uniform(-6, 6), (k // 2 + 0.5) * H / 2 + rng.uniform(-5, 5)
            shapes.append(Shape(cls, _outline(kind, cx, cy, rng.uniform(24, 34) * (0.7 if kind == "l" else 1),
                                              rng.uniform(0, 2 * math.pi)), colour))
        out.append(Img(f"p{i}.png", H, W, tuple(shapes), background=(0, 0, 0)))
    return out


def coco_job(root: str, images) -> None:
    """A COCO job of polygons, each image painted by pixel centres (tests.exports.paint: a pixel is the object's
    when its centre lies inside the polygon, so its pixels' count is the polygon's area, give or take its edge)."""
    rels = [f"images/{img.name}" for img in images]
    for img, rel in zip(images, rels):
        _write_image(f"{root}/{rel}", paint(img))
    _write(f"{root}/instances.json", json.dumps(coco_json(images, rels)))


def rings_of(f, h: int, w: int) -> list[list[np.ndarray]]:
    """Each object's rings in pixels of an h x w record, from the polygon keys of a tf.train.Example's features."""
    xs, ys, nv, nr = (list(getattr(f[k], "float_list" if k.endswith(("/x", "/y")) else "int64_list").value)
                      for k in POLYGON_KEYS)
    assert sum(nv) == len(xs) == len(ys) and sum(nr) == len(nv), "the counts add up"
    pts = np.stack([np.array(xs) * w, np.array(ys) * h], axis=-1) if xs else np.zeros((0, 2))
    starts = np.cumsum([0, *nv])
    flat = [pts[starts[j]:starts[j + 1]] for j in range(len(nv))]
    ring_starts = np.cumsum([0, *nr])
    return [flat[ring_starts[k]:ring_starts[k + 1]] for k in range(len(nr))]


def records(folder) -> list[dict]:
    out = []
    for shard in sorted(folder.glob("*.tfrecord")):
        for raw in tf.data.TFRecordDataset(str(shard)):
            f = tf.train.Example.FromString(raw.numpy()).features.feature
            rgb = tf.io.decode_png(f["image/encoded"].bytes_list.value[0]).numpy()
            h, w = rgb.shape[:2]
            boxes = list(zip(*(f[f"image/object/bbox/{k}"].float_list.value for k in ("xmin", "ymin", "xmax",
                                                                                         "ymax"))))
            out.append({"pixels": rgb, "texts": [t.decode() for t in f["image/object/class/text"].bytes_list.value],
                        "masks": list(f["image/object/mask"].bytes_list.value),
                        "labels": list(f["image/object/class/label"].int64_list.value),
                        "rings": rings_of(f, h, w), "boxes": [(b[0] * w, b[1] * h, b[2] * w, b[3] * h)
                                                              for b in boxes]})
    return out


def area(rings) -> float:
    """The rings' area (shoelace; the rings of one object never overlap)."""
    return sum(abs(float(np.dot(r[:, 0], np.roll(r[:, 1], -1)) - np.dot(r[:, 1], np.roll(r[:, 0], -1)))) / 2
               for r in rings)


def judge(recs) -> dict:
    """Each object's rings against its pixels (see the module docstring): the area errors (share of the pixels), the
    rings outside their box, objects on no pixel of their class, and pieces under no rings."""
    out = {"areas": [], "outside": [], "unmatched": [], "missing": [], "small": 0}
    for i, r in enumerate(recs):
        h, w = r["pixels"].shape[:2]
        pieces = {}
        for cls, hit in class_pixels(r["pixels"]).items():
            n, labels = cv2.connectedComponents(hit.astype(np.uint8), connectivity=8)
            pieces[cls] = [labels == k for k in range(1, n)]
        claimed = set()
        for k, (cls, rings, box) in enumerate(zip(r["texts"], r["rings"], r["boxes"])):
            if any((ring[:, 0] < box[0] - 1e-3).any() or (ring[:, 0] > box[2] + 1e-3).any() or
                   (ring[:, 1] < box[1] - 1e-3).any() or (ring[:, 1] > box[3] + 1e-3).any() for ring in rings):
                out["outside"].append((i, k, cls))
            drawn = cv2.fillPoly(np.zeros((h, w), np.uint8), [np.round(ring * 8).astype(np.int32) for ring in rings],
                                 1, shift=3) > 0 if rings else np.zeros((h, w), bool)
            # its pieces: those of its class mostly under its rings (a cover may split an object in two)
            mine = [j for j, p in enumerate(pieces[cls]) if (p & drawn).sum() > 0.5 * p.sum()]
            if not mine:
                out["unmatched"].append((i, k, cls, len(rings)))
                continue
            claimed.update((cls, j) for j in mine)
            pixels = sum(int(pieces[cls][j].sum()) for j in mine)
            if pixels < LEAST:
                out["small"] += 1
                continue
            covered = coverage(r["pixels"], cls, np.logical_or.reduce([pieces[cls][j] for j in mine]))
            out["areas"].append(abs(area(rings) - covered) / covered)
        for cls, ps in pieces.items():
            for j, p in enumerate(ps):
                if (cls, j) not in claimed and p.sum() >= 40:
                    out["missing"].append((i, cls, int(p.sum())))
    return out


def run_family(tmp_path, family: str, variants: int = 3, images: int = 4) -> list[dict]:
    job = tmp_path / "job"
    coco_job(str(job), scenes(images))
    text = PIPELINE.replace("VARIANTS", str(variants)).replace("OPS", FAMILIES[family])
    run_job(str(job), parse_pipeline(text), str(tmp_path / "out"), JobOptions(name="t", workers=1))
    return records(tmp_path / "out" / "t")


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_each_objects_rings_are_its_pixels(tmp_path, family):
    got = judge(run_family(tmp_path, family))
    assert not got["unmatched"], got["unmatched"][:3]
    assert not got["missing"], got["missing"][:3]
    assert not got["outside"], got["outside"][:3]
    assert got["areas"] and max(got["areas"]) <= AREA, (family, sorted(got["areas"])[-5:])


@pytest.mark.parametrize("op, value", [("rotate", 30), ("shear_x", 0.4), ("translate_y", 14), ("flip", 0)])
def test_a_move_inside_boxes_takes_each_objects_mask_and_rings_with_its_pixels(tmp_path, op, value):
    """in_boxes' moves, every box picked: each object's instance mask is where its pixels went (IoU >= 0.9 with
    its piece of its class' pixels), and its rings too (judge)."""
    job = tmp_path / "job"
    coco_job(str(job), scenes(3))
    text = PIPELINE.replace("VARIANTS", "2").replace("OPS", f"- in_boxes: {{op: {op}, value: {value}, box_p: 1.0}}")
    run_job(str(job), parse_pipeline(text), str(tmp_path / "out"), JobOptions(name="t", workers=1))
    recs = records(tmp_path / "out" / "t")
    got = judge(recs)
    assert not got["unmatched"] and not got["missing"] and not got["outside"], got
    assert max(got["areas"]) <= AREA, (op, sorted(got["areas"])[-5:])
    judged = 0
    for r in recs:
        pieces = class_pixels(r["pixels"])
        assert len(r["masks"]) == len(r["texts"]) == 4, "no move hides a whole object"
        for cls, png, box in zip(r["texts"], r["masks"], r["boxes"]):
            mask = tf.io.decode_png(png, channels=1).numpy()[..., 0] > 0
            near = np.zeros_like(mask)
            near[max(int(box[1]) - 2, 0):int(math.ceil(box[3])) + 2, max(int(box[0]) - 2, 0):int(box[2]) + 3] = True
            piece = pieces[cls] & near
            iou = (piece & mask).sum() / (piece | mask).sum()
            assert iou >= 0.9, (op, cls, round(float(iou), 3))
            judged += 1
    assert judged == 3 * 2 * 4


def test_augd_data_load_gives_the_rings_the_records_hold(tmp_path):
    """augd.data.load(..., polygons=True): per object its rings as a RaggedTensor [n, (rings), (vertices), 2] of
    normalized (y, x), the records' own values; with "pad" they move as the boxes do."""
    recs = run_family(tmp_path, "rotation", variants=2, images=2)
    out = str(tmp_path / "out" / "t")
    ds = augd.data.load(out, image_size=None, batch_size=None, boxes="ragged", polygons=True)
    got = [t["polygons"] for _, t in ds]
    assert len(got) == len(recs)
    for r, p in zip(recs, got):
        h, w = r["pixels"].shape[:2]
        assert p.shape[0] == len(r["rings"]) and p.ragged_rank == 2
        for rings, loaded in zip(r["rings"], p.to_list()):
            assert len(rings) == len(loaded)
            for ring, yx in zip(rings, loaded):
                assert np.allclose(np.array(yx)[:, ::-1] * (w, h), ring, atol=1e-3)
    padded = augd.data.load(out, image_size=(W * 2, W * 2), resize="pad", batch_size=4, boxes="padded",
                            max_boxes=8, polygons=True)
    x, t = next(iter(padded))
    assert t["polygons"].shape[0] == 4 and t["polygons"].ragged_rank == 3
    assert t["polygons"].row_lengths(axis=1).numpy().tolist() == [8] * 4, "max_boxes objects in every record"
    first = t["polygons"][0].to_list()
    assert len(first) == 8 and all(not rings for rings in first[len(recs[0]["rings"]):]), "padding: no ring"
    h, w = recs[0]["pixels"].shape[:2]
    scale = 2 * W / max(h, w)
    for rings, loaded in zip(recs[0]["rings"], first):
        for ring, yx in zip(rings, loaded):
            px = np.array(yx)[:, ::-1] * 2 * W - ((2 * W - w * scale) / 2, (2 * W - h * scale) / 2)
            assert np.allclose(px / scale, ring, atol=0.05)


def test_augd_data_load_crops_skips_and_batches_the_rings_with_their_boxes(tmp_path):
    """resize="crop" moves the rings as it moves the boxes (normalized to the centre crop, never clipped),
    ignored="skip" leaves out an ignored object's rings with its box, and a ragged batch holds each record's."""
    job = tmp_path / "job"
    coco_job(str(job), scenes(3))
    text = PIPELINE.replace("min_visibility: 0,", "min_visibility: 0.8,").replace("VARIANTS", "3").replace(
        "OPS", "- random_crop: {size: [140, 170], area: [0.3, 0.6]}")
    run_job(str(job), parse_pipeline(text), str(tmp_path / "out"), JobOptions(name="t", workers=1))
    recs, out, size = records(tmp_path / "out" / "t"), str(tmp_path / "out" / "t"), 96
    kept = augd.data.load(out, image_size=(size, size), resize="crop", batch_size=None, boxes="ragged",
                          polygons=True, weights=True)
    skipped = augd.data.load(out, image_size=(size, size), resize="crop", batch_size=None, boxes="ragged",
                             polygons=True, ignored="skip")
    ignored = 0
    for r, (_, k), (_, s) in zip(recs, kept, skipped):
        h, w = r["pixels"].shape[:2]
        scale = max(size / h, size / w)
        new = np.maximum(np.round(np.array([h, w]) * scale), size)
        off = (new - size) // 2
        live = k["weights"].numpy() > 0
        ignored += int((~live).sum())
        # the crop drops a box it leaves no area of, and the rings with it
        corners = [np.clip((np.array([[b[1], b[0]], [b[3], b[2]]]) * new / (h, w) - off) / size, 0, 1)
                   for b in r["boxes"]]
        inside = [(c[1] > c[0]).all() for c in corners]
        assert k["polygons"].shape[0] == sum(inside) == len(live)
        for rings, loaded in zip([x for x, on in zip(r["rings"], inside) if on], k["polygons"].to_list()):
            assert len(rings) == len(loaded)
            for ring, yx in zip(rings, loaded):
                want = (ring[:, ::-1] * new / (h, w) - off) / size
                assert np.allclose(np.array(yx), want, atol=1e-4)
        assert s["polygons"].to_list() == [p for p, on in zip(k["polygons"].to_list(), live) if on]
        assert s["boxes"].shape[0] == int(live.sum())
    assert ignored >= 2, "the crops must leave some objects under min_visibility"
    batch = next(iter(augd.data.load(out, image_size=(size, size), resize="crop", batch_size=2, boxes="ragged",
                                     polygons=True)))[1]
    assert batch["polygons"].ragged_rank == 3 and batch["polygons"].nrows() == 2
    assert batch["polygons"].row_lengths(axis=1).numpy().tolist() == batch["boxes"].row_lengths().numpy().tolist()


def test_a_tiles_rings_map_back_to_their_source_by_its_tile_keys(tmp_path):
    """Tiles of polygon scenes, a colour op the only op: every ring mapped back to the source by its record's
    augd/tile keys (docs/records.md) lies where the polygon drawn there does: a whole object's vertices are the
    polygon's own (within 0.01 px), a cut one's inside both the polygon and its tile (within 0.01 px), and each
    object is whole in at least one tile (the overlap is wider than any)."""
    rng = np.random.default_rng(3)
    kinds = ("triangle", "pentagon", "l", "hexagon")
    images = []
    for i in range(2):
        shapes = []
        for r in range(4):
            for c in range(5):
                k = (r * 5 + c) % 4
                cls, colour = list(CLASSES.items())[k]
                cx, cy = c * 160 + rng.uniform(25, 135), r * 150 + rng.uniform(25, 125)
                shapes.append(Shape(cls, _outline(kinds[k], cx, cy, rng.uniform(12, 20), rng.uniform(0, 6.3)),
                                    colour))
        images.append(Img(f"big{i}.png", 600, 800, tuple(shapes), background=(0, 0, 0)))
    coco_job(str(tmp_path / "job"), images)
    text = PIPELINE.replace("VARIANTS", "1").replace("OPS", "- random_brightness: {max_delta: 0.1}\ntile: "
                                                     "{size: 256, overlap: 0.25, empty: 1.0}")
    run_job(str(tmp_path / "job"), parse_pipeline(text), str(tmp_path / "out"), JobOptions(name="t", workers=1))
    truth = {img.name: [np.array(s.geom) for s in img.shapes] for img in images}
    whole_in, cut = set(), 0
    for shard in sorted((tmp_path / "out" / "t").glob("*.tfrecord")):
        for raw in tf.data.TFRecordDataset(str(shard)):
            f = tf.train.Example.FromString(raw.numpy()).features.feature
            if f["augd/tile/index"].int64_list.value[0] < 0:
                continue
            h, w = f["image/height"].int64_list.value[0], f["image/width"].int64_list.value[0]
            tx, ty = f["augd/tile/x"].int64_list.value[0], f["augd/tile/y"].int64_list.value[0]
            scale = f["augd/tile/scale"].float_list.value[0]
            name = f["image/filename"].bytes_list.value[0].decode().rsplit("/", 1)[-1].split("#")[0]
            for rings in rings_of(f, h, w):
                back = [ring / scale + (tx, ty) for ring in rings]
                pts = np.concatenate(back)
                # its source polygon: the one holding its vertices
                j = min(range(len(truth[name])), key=lambda j: -min(
                    cv2.pointPolygonTest(truth[name][j].astype(np.float32), tuple(map(float, p)), True) for p in pts))
                poly = truth[name][j]
                assert min(cv2.pointPolygonTest(poly.astype(np.float32), tuple(map(float, p)), True)
                           for p in pts) >= -0.01, (name, j)
                assert (pts >= (tx - 0.01, ty - 0.01)).all() and (pts <= (tx + w + 0.01, ty + h + 0.01)).all()
                if len(back) == 1 and len(back[0]) == len(poly) and \
                        np.abs(np.sort(back[0], axis=0) - np.sort(poly, axis=0)).max() <= 0.01:
                    whole_in.add((name, j))
                else:
                    cut += 1
    assert cut >= 10, "the scenes must put objects across the tiles' borders"
    assert whole_in == {(n, j) for n, polys in truth.items() for j in range(len(polys))}


def test_inspect_counts_the_rings_and_dump_outlines_them(tmp_path):
    """`augd inspect` counts the rings, the objects holding them and the records with the keys; `--dump` outlines
    each ring in its class' colour."""
    import subprocess
    import sys

    from augd.inspect import _colour
    job = tmp_path / "job"
    coco_job(str(job), scenes(1))
    text = PIPELINE.replace("VARIANTS", "1").replace("OPS", "- random_rotation: {degrees: [20, 20]}")
    run_job(str(job), parse_pipeline(text), str(tmp_path / "out"), JobOptions(name="t", workers=1))
    out = tmp_path / "out" / "t"
    (rec,) = records(out)
    res = subprocess.run([sys.executable, "-m", "augd", "inspect", str(out), "--dump", "1", str(tmp_path / "look")],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "polygons (image/object/polygon/*): 4 rings of 4 objects in 1 records" in res.stdout, res.stdout
    (png,) = (tmp_path / "look").glob("*.png")
    drawn = cv2.imread(str(png))
    for cls, label, rings in zip(rec["texts"], rec["labels"], rec["rings"]):
        ring = rings[0]
        # the middle of the ring's longest edge: an upright box's outline does not run there
        a, b = max(zip(ring, np.roll(ring, -1, axis=0)), key=lambda e: np.linalg.norm(e[0] - e[1]))
        x, y = int(round((a[0] + b[0]) / 2)), int(round((a[1] + b[1]) / 2))
        near = drawn[max(y - 1, 0):y + 2, max(x - 1, 0):x + 2].reshape(-1, 3).astype(int)
        assert np.abs(near - np.array(_colour(label))).sum(axis=1).min() <= 90, (cls, (x, y), near)


def test_worker_processes_write_the_same_polygon_keys(tmp_path):
    """The rings are made where the records are (the job's parent or its workers): threads and processes write the
    same bytes."""
    coco_job(str(tmp_path / "job"), scenes(2))
    spec = parse_pipeline(PIPELINE.replace("VARIANTS", "2").replace("OPS", FAMILIES["cutout"]))
    shards = {}
    for kind in ("threads", "processes"):
        run_job(str(tmp_path / "job"), spec, str(tmp_path / kind), JobOptions(name="t", workers=2, executor=kind))
        shards[kind] = {p.name: p.read_bytes() for p in (tmp_path / kind / "t").glob("*.tfrecord")}
    assert shards["threads"] and shards["threads"] == shards["processes"]
    assert sum(len(rings) for r in records(tmp_path / "processes" / "t") for rings in r["rings"]) > 0


def test_a_job_that_does_not_ask_writes_no_polygon_key_and_load_says_so(tmp_path):
    job = tmp_path / "job"
    coco_job(str(job), scenes(1))
    text = PIPELINE.replace(", polygon_keys: true", "").replace("VARIANTS", "1").replace("OPS", FAMILIES["flip"])
    run_job(str(job), parse_pipeline(text), str(tmp_path / "out"), JobOptions(name="t", workers=1))
    for shard in (tmp_path / "out" / "t").glob("*.tfrecord"):
        for raw in tf.data.TFRecordDataset(str(shard)):
            assert not set(POLYGON_KEYS) & set(tf.train.Example.FromString(raw.numpy()).features.feature)
    ds = augd.data.load(str(tmp_path / "out" / "t"), image_size=None, batch_size=None, boxes="ragged",
                        polygons=True)
    _, t = next(iter(ds))
    assert t["polygons"].shape[0] == t["boxes"].shape[0] and t["polygons"].values.shape[0] == 0, "no ring"
    with pytest.raises(augd.data.DataError, match="polygons=True without boxes"):
        augd.data.load(str(tmp_path / "out" / "t"), image_size=None, batch_size=None, polygons=True)


@pytest.mark.parametrize("masks", [True, False], ids=["augd's records", "polygon keys alone"])
def test_records_with_polygon_keys_read_back_as_input_move_their_rings(tmp_path, masks):
    """augd's output as a job's input (TFRecord shards): each object moves as its rings (what showed of it, exact),
    with its instance mask beside them or (another writer's records) without; judged by the pixels again."""
    job = tmp_path / "job"
    coco_job(str(job), scenes(3))
    first = PIPELINE.replace("VARIANTS", "1").replace("OPS", FAMILIES["crop"])
    run_job(str(job), parse_pipeline(first), str(tmp_path / "first"), JobOptions(name="t", workers=1))
    src = tmp_path / "first" / "t"
    if not masks:
        src = tmp_path / "foreign"
        src.mkdir()
        with tf.io.TFRecordWriter(str(src / "data.tfrecord")) as out:
            for shard in sorted((tmp_path / "first" / "t").glob("*.tfrecord")):
                for raw in tf.data.TFRecordDataset(str(shard)).as_numpy_iterator():
                    ex = tf.train.Example.FromString(raw)
                    del ex.features.feature["image/object/mask"]
                    out.write(ex.SerializeToString())
    text = PIPELINE.replace("format: coco", "format: tfrecord").replace("VARIANTS", "2").replace(
        "OPS", FAMILIES["rotation"])
    run_job(str(src), parse_pipeline(text), str(tmp_path / "again"), JobOptions(name="t", workers=1))
    recs = records(tmp_path / "again" / "t")
    got = judge(recs)
    assert len(recs) == 6 and not got["unmatched"] and not got["missing"] and not got["outside"], got
    assert max(got["areas"]) <= AREA, sorted(got["areas"])[-5:]


def test_read_back_an_object_moves_as_its_rings_only_where_they_say_what_its_mask_says():
    """A record holding rings and masks: an object whose mask is its rings' pixels (give or take the edge's pixel)
    moves as the rings, exact; one whose mask has a hole the rings do not (a cover's: rings are outer outlines)
    moves as the mask, to the pixel."""
    from augd.annotations.recordobjects import ObjectReader
    h, w = 60, 80
    ring = [(10.0, 10.0), (50.0, 10.0), (50.0, 50.0), (10.0, 50.0)]
    whole = np.zeros((h, w), np.uint8)
    whole[10:50, 10:50] = 1
    whole[10, 10:50] = 0                      # a pixel row along the edge: a nearest-neighbour warp's difference
    holed = whole.copy()
    holed[20:40, 20:40] = 0                   # a cover's hole: 400 px inside the rings
    got = []
    for mask in (whole, holed):
        ex = {"image/object/bbox/xmin": [10 / w], "image/object/bbox/ymin": [10 / h], "image/object/bbox/xmax":
              [50 / w], "image/object/bbox/ymax": [50 / h], "image/object/class/text": ["red"],
              "image/object/mask": [cv2.imencode(".png", mask)[1].tobytes()],
              "image/object/polygon/x": [x / w for x, _ in ring], "image/object/polygon/y": [y / h for _, y in ring],
              "image/object/polygon/num_vertices": [4], "image/object/polygon/num_rings": [1]}
        (obj,) = ObjectReader(None).annotation(ex, "r#0", (h, w), 1, None, False).objects
        got.append(obj)
    assert got[0].polygons and got[0].rle is None
    assert np.allclose(got[0].polygons[0], ring, atol=1e-3)
    assert not got[1].polygons and got[1].rle is not None


def test_a_records_polygons_that_cannot_be_used_reject_its_record(tmp_path):
    """Untrusted records: ring counts for another number of objects, counts that do not add up to the vertices, a
    vertex that is no finite number: each rejects its record (bad_annotation, naming the keys), the job going on."""
    from tests.hostile_records import det_record, f_list, i_list, records_job
    ring = {"image__object__polygon__x": f_list(0.1, 0.3, 0.2), "image__object__polygon__y": f_list(0.1, 0.1, 0.3),
            "image__object__polygon__num_vertices": i_list(3), "image__object__polygon__num_rings": i_list(1)}
    bad = [det_record(90, **{**ring, "image__object__polygon__num_rings": i_list(1, 1)}),
           det_record(91, **{**ring, "image__object__polygon__num_vertices": i_list(4)}),
           det_record(92, **{**ring, "image__object__polygon__y": f_list(0.1, float("nan"), 0.3)})]
    records_job(tmp_path / "job", bad)
    run_job(str(tmp_path / "job"), parse_pipeline(PIPELINE.replace("format: coco", "format: tfrecord").replace(
        "VARIANTS", "1").replace("OPS", FAMILIES["rotation"])), str(tmp_path / "out"),
        JobOptions(name="t", workers=1))
    m = json.loads((tmp_path / "out" / "t" / "manifest.json").read_text())
    why = {r["path"]: (r["reason"], r["message"]) for r in m["inputs"]["rejected_files"]}
    assert m["inputs"]["written"] == 6 and len(why) == 3, why
    assert all(reason == "bad_annotation" and "image/object/polygon" in msg for reason, msg in why.values()), why


if __name__ == "__main__":
    import pathlib
    import tempfile
    for fam in sorted(FAMILIES):
        with tempfile.TemporaryDirectory() as d:
            g = judge(run_family(pathlib.Path(d), fam))
        print(f"{fam:16s} area error max {max(g['areas']) * 100:5.2f} %  median "
              f"{statistics.median(g['areas']) * 100:5.2f} %  pieces {len(g['areas'])} (+{g['small']} small)  "
              f"unmatched {len(g['unmatched'])}  missing {len(g['missing'])}  outside {len(g['outside'])}")
