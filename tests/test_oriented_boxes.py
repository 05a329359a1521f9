"""Oriented boxes as a target kind (augd/annotations/oriented.py), judged by the pixels: DOTA scenes of solid rotated
rectangles (one hue per class, on black: the warps' own fill) run through real jobs, one per geometric op family
(flips, quarter turns, rotations, shears, perspective, crops, pads, a cutout, mosaic, tiles, in_boxes' turns and
shifts inside each box); every record is read back with TensorFlow and each oriented box (image/object/obb/*) is
held to its object's pixels both ways: each box lies on a piece of its class' colour, its corners within 2 px of the
minimum-area rectangle of that piece's pixels (or, for a cut or bent shape, a tie: judge()), and each piece a viewer
can see has its box. The instance masks of the same objects stay within 3 % of their pixels, each weighed by its
coverage (4-4.5 % for pieces a crop or a mosaic cuts small: AREA).

`python -m tests.test_oriented_boxes` prints, per family, the corners' error (max and median, px) and the masks'
area error; then the tiles' boxes mapped back to their sources (below: tiles of larger scenes, no pixel moved,
every box held to the rectangle drawn in the source by its record's augd/tile keys).
"""
from __future__ import annotations

import math
import statistics

import cv2
import numpy as np
import pytest
import tensorflow as tf

import augd.data
from augd.annotations.oriented import min_area_rect, raster_rect
from augd.io.lite import OBB_KEYS
from augd.job import JobOptions, run_job
from augd.schema import parse_pipeline
from tests.annotated import Img
from tests.exports import Rot, corners, dota_job
from tests.hues import CLASSES, class_pixels, coverage

H, W = 200, 240
#: a piece of an object smaller than this (px), or thinner (its minimum-area rectangle's short side), may go without
#: a box: the job's min_size and a blend's edge decide there, not the oriented box
LEAST_PIXELS, LEAST_SIDE = 40, 4
#: a piece thinner than this (px) is a sliver: the rule takes off its tips thinner than min_size (2), which can be
#: most of its length, so its box is judged only for being there (both ways), not by its corners
THIN = 6
FAMILIES = {
    "flip": "- random_flip_left_right: {}\n  - random_flip_up_down: {}",
    "rotation90": "- random_rotation90: {}",
    "rotation": "- random_rotation: {degrees: [-35, 35]}",
    "shear": "- random_affine: {shear: [-20, 20], shear_y: [-10, 10], scale: [0.8, 1.1]}",
    "perspective": "- random_perspective: {scale: [0.05, 0.1]}",
    "crop": "- random_crop: {size: [160, 200], area: [0.3, 0.7]}",
    "pad": "- random_pad_image: {max_size: [320, 360], fill: 0}",
    "cutout": "- random_rotation: {degrees: [-20, 20]}\n  - cutout: {size: 40, fill: 0}",
    "mosaic": "- mosaic: {size: [240, 280], scale: [1.5, 1.5]}",
    "tile": "- random_rotation: {degrees: [-20, 20]}\ntile: {size: 120, overlap: 0.2, empty: 1.0}",
    # in_boxes: each box's own pixels turned, sheared, shifted, flipped, and the shapes there with them
    "in_boxes turns": "- in_boxes: {op: rotate, value: 30, box_p: 1.0}\n  - in_boxes: {op: shear_y, value: 0.3, "
                      "box_p: 0.5}",
    "in_boxes shifts": "- random_rotation: {degrees: [-20, 20]}\n  - in_boxes: {op: translate_x, value: 14, box_p: "
                       "1.0}\n  - in_boxes: {op: flip, box_p: 0.5}",
}
#: families that bend a rectangle (a parallelogram, a quadrilateral), or cut it at its box's edge without truncating
#: it (truncated is the canvas' word; a move inside a box cuts by the box): its refit may tie
BENT = ("shear", "perspective", "in_boxes turns", "in_boxes shifts")
#: the instance masks' area error allowed (share of the object's pixels, each weighed by its coverage): a mask is
#: whole pixels, nearest-neighbour, so a piece cut small at a canvas' or a tile's edge, mostly edge, differs by a
#: pixel's rounding along it (measured by `python -m tests.test_oriented_boxes`: crop 2.6 %, mosaic 3.0 %)
AREA = {f: 0.03 for f in FAMILIES} | {"crop": 0.04, "mosaic": 0.045}
PIPELINE = """name: obb
seed: 7
variants: VARIANTS
keep_original: false
output: {format: png, shards: 1}
annotations: {format: dota, min_visibility: 0, min_size: 2}
ops:
  OPS
"""


def scenes(n: int = 4, seed: int = 0) -> list[Img]:
    """n images of 4 rotated rectangles, one per class, each in its own quarter (they never touch)."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        shapes = []
        for k, (cls, colour) in enumerate(CLASSES.items()):
            cx, cy = (k % 2 + 0.5) * W / 2 + rng.uniform(-8, 8), (k // 2 + 0.5) * H / 2 + rng.uniform(-6, 6)
            shapes.append(Rot(cls, cx, cy, rng.uniform(40, 64), rng.uniform(20, 30), rng.uniform(-90, 90), colour))
        out.append(Img(f"s{i}.png", H, W, tuple(shapes), background=(0, 0, 0)))
    return out


def corner_error(a, b) -> float:
    """The largest distance between matched corners of two rectangles, over their cyclic orders either way."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    return min(float(np.linalg.norm(a - np.roll(r, s, axis=0), axis=1).max())
               for r in (b, b[::-1]) for s in range(4))


def records(folder) -> list[dict]:
    out = []
    for shard in sorted(folder.glob("*.tfrecord")):
        for raw in tf.data.TFRecordDataset(str(shard)):
            f = tf.train.Example.FromString(raw.numpy()).features.feature
            rgb = tf.io.decode_png(f["image/encoded"].bytes_list.value[0]).numpy()
            h, w = rgb.shape[:2]
            xy = [list(f[k].float_list.value) for k in OBB_KEYS]
            boxes = [[(xy[2 * c][k] * w, xy[2 * c + 1][k] * h) for c in range(4)] for k in range(len(xy[0]))]
            out.append({"pixels": rgb, "texts": [t.decode() for t in f["image/object/class/text"].bytes_list.value],
                        "obb": boxes, "masks": list(f["image/object/mask"].bytes_list.value),
                        "truncated": list(f["image/object/truncated"].int64_list.value),
                        "keys": set(f.keys()), "filename": f["image/filename"].bytes_list.value[0].decode(),
                        "tile": {k[len("augd/tile/"):]: (f[k].int64_list.value or f[k].float_list.value)[0]
                                 for k in f.keys() if k.startswith("augd/tile/")}})
    return out


def judge(recs) -> dict:
    """Each record's oriented boxes against its pixels (see the module docstring): the corners' errors (px) of whole
    objects and of cut ones (truncated), the masks' area errors (share of the pixels), and what failed either way.
    The minimum-area rectangle of a cut piece (or of a sheared or bent one) can have two near-equal solutions a
    pixel's difference in the shape flips between: a box more than 2 px from the pixels' rectangle still passes
    as a tie when it holds the piece (95 % of its pixels) with no more than 8 % more area."""
    out = {"whole": [], "cut": [], "ties": [], "bad": [], "tiny": 0, "areas": [], "unmatched": [], "missing": []}
    # "tiny": pieces under LEAST_PIXELS or THIN, whose boxes are only held to being on them
    for i, r in enumerate(recs):
        h, w = r["pixels"].shape[:2]
        pieces = {}
        for cls, hit in class_pixels(r["pixels"]).items():
            n, labels = cv2.connectedComponents(hit.astype(np.uint8), connectivity=8)
            pieces[cls] = [labels == k for k in range(1, n)]
        claimed = set()
        for k, (cls, obb) in enumerate(zip(r["texts"], r["obb"])):
            drawn = cv2.fillPoly(np.zeros((h, w), np.uint8), [np.round(np.array(obb) * 8).astype(np.int32)], 1,
                                 shift=3) > 0
            overlaps = [int((p & drawn).sum()) for p in pieces[cls]]
            if not overlaps or max(overlaps) == 0:
                out["unmatched"].append((i, k, cls, obb))
                continue
            j = int(np.argmax(overlaps))
            claimed.add((cls, j))
            piece = pieces[cls][j]
            rect = raster_rect(piece)
            if piece.sum() < LEAST_PIXELS or _short(rect) < THIN:
                out["tiny"] += 1
                continue
            err = corner_error(obb, rect)
            out["cut" if r["truncated"][k] else "whole"].append(err)
            if err > 2.0:
                held = overlaps[j] / piece.sum()
                ratio = _area(obb) / _area(rect)
                out["ties" if held >= 0.95 and ratio <= 1.08 else "bad"].append(
                    (i, k, cls, round(err, 2), round(held, 3), round(ratio, 3)))
            if r["masks"] and piece.sum() >= 200:
                mask = tf.io.decode_png(r["masks"][k], channels=1).numpy()[..., 0] > 0
                covered = coverage(r["pixels"], cls, piece)
                out["areas"].append(abs(int(mask.sum()) - covered) / covered)
        for cls, ps in pieces.items():
            for j, p in enumerate(ps):
                short = _short(raster_rect(p))
                if (cls, j) not in claimed and p.sum() >= LEAST_PIXELS and short >= LEAST_SIDE:
                    out["missing"].append((i, cls, int(p.sum()), round(short, 1)))
    return out


def _short(c) -> float:
    return min(math.dist(c[0], c[1]), math.dist(c[1], c[2]))


def _area(c) -> float:
    return math.dist(c[0], c[1]) * math.dist(c[1], c[2])


def run_family(tmp_path, family: str, variants: int = 3, images: int = 4) -> dict:
    job = tmp_path / "job"
    dota_job(str(job), scenes(images))
    text = PIPELINE.replace("VARIANTS", str(variants)).replace("OPS", FAMILIES[family])
    run_job(str(job), parse_pipeline(text), str(tmp_path / "out"), JobOptions(name="t", workers=1))
    recs = records(tmp_path / "out" / "t")
    assert recs and all(set(OBB_KEYS) <= r["keys"] for r in recs if r["texts"])
    return {**judge(recs), "records": len(recs)}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_each_oriented_box_lies_on_its_objects_pixels(tmp_path, family):
    got = run_family(tmp_path, family)
    assert not got["unmatched"], got["unmatched"][:3]
    assert not got["missing"], got["missing"][:3]
    assert not got["bad"], (family, got["bad"][:3])
    # a whole rectangle stays a rectangle through these: its box is its pixels' within 2 px, no tie allowed
    if family not in BENT:
        assert got["whole"] and max(got["whole"]) <= 2.0, (family, sorted(got["whole"])[-5:])
    assert max(got["areas"]) <= AREA[family], (family, sorted(got["areas"])[-5:])


# -- tiles: each oriented box maps back to its source ----------------------------------------------------------

#: the tiles test's sources (h, w), and its tiles: 256 px sharing 64 px with a neighbour (a quarter), so an object
#: under 64 px across upright is whole in at least one; the whole image too, its height rounded (600 x 0.4375)
BIG = (600, 800)
TILES = "{size: 256, overlap: 0.25, empty: 1.0, full_image: 350}"
#: no pixel moves: the record's points are the tile's as cut (a brightness factor keeps black black, hue its hue)
TILED = PIPELINE.replace("VARIANTS", "1").replace("keep_original: false", "keep_original: true").replace(
    "OPS", f"- random_brightness_scale: {{lower: 0.7, upper: 1.0}}\ntile: {TILES}")


def big_scenes(n: int = 2, per: int = 20, seed: int = 1) -> list[Img]:
    """n BIG images of `per` rotated rectangles, 24-40 x 10-18 px (under 44 px across), that never touch, all inside
    the image, wherever they fall across the tiles' borders."""
    rng = np.random.default_rng(seed)
    h, w = BIG
    out = []
    for i in range(n):
        shapes = []
        while len(shapes) < per:
            cls = list(CLASSES)[len(shapes) % len(CLASSES)]
            r = Rot(cls, rng.uniform(24, w - 24), rng.uniform(24, h - 24), rng.uniform(24, 40), rng.uniform(10, 18),
                    rng.uniform(-90, 90), CLASSES[cls])
            if all(math.dist((r.cx, r.cy), (o.cx, o.cy)) > _reach(r) + _reach(o) + 3 for o in shapes):
                shapes.append(r)
        out.append(Img(f"big{i}.png", h, w, tuple(shapes), background=(0, 0, 0)))
    return out


def _reach(r: Rot) -> float:
    return math.hypot(r.w, r.h) / 2


def to_source(r: dict, points) -> np.ndarray:
    """A record's points (px of the record) in px of its upright source by its augd/tile keys: x / scale + tile x;
    the whole image's height is rounded, so its y goes by the source's height (docs/records.md)."""
    t, (h, w) = r["tile"], r["pixels"].shape[:2]
    p = np.asarray(points, float)
    sy = t["scale"] if t["index"] >= 0 else h / t["source_height"]
    return np.stack([t["x"] + p[:, 0] / t["scale"], t["y"] + p[:, 1] / sy], axis=1)


def _within(poly, point, tol: float) -> bool:
    """The point lies in the convex polygon or within tol px of it."""
    return cv2.pointPolygonTest(np.asarray(poly, np.float32), tuple(map(float, point)), True) >= -tol


def map_back(recs, truth: dict[str, Img]) -> dict:
    """Each record's oriented boxes mapped back to the source and held to the rectangles drawn there: a whole
    object's corners (their error, px); a cut one's piece (the rectangle's part in the tile's window): the share of
    it its box holds (a piece of LEAST_PIXELS or more: tips thinner than min_size are trimmed off), the box's area
    over the piece's minimum-area rectangle's, and whether the box lies in its rectangle or in the tile (1 px: a
    rectangle a border cuts refits along its own sides or along the border, so it pokes out of the other); the
    tiles each object is whole in."""
    out = {"whole": [], "full": [], "held": [], "excess": [], "inside": [], "bad": [], "whole_in": {}}
    for r in recs:
        img, t = truth[r["filename"]], r["tile"]
        h, w = r["pixels"].shape[:2]
        (x0, y0), (x1, y1) = to_source(r, [(0, 0), (w, h)])     # the tile's window in the source
        tile = np.array([(x0, y0), (x1, y0), (x1, y1), (x0, y1)], np.float32)
        for k, (cls, obb) in enumerate(zip(r["texts"], r["obb"])):
            got = to_source(r, obb)
            near = min((o for o in img.shapes if o.cls == cls),
                       key=lambda o: math.dist((o.cx, o.cy), got.mean(axis=0)))
            src = np.array(corners(near), np.float32)
            if not r["truncated"][k]:
                err = corner_error(got, src)
                out["full" if t["index"] < 0 else "whole"].append(err)
                if err <= 0.5 and t["index"] >= 0:
                    out["whole_in"].setdefault((r["filename"], near), set()).add(t["index"])
                elif err > 0.5:
                    out["bad"].append((r["filename"], t["index"], k, "whole", round(err, 3)))
                continue
            area, piece = cv2.intersectConvexConvex(src, tile)
            held = cv2.intersectConvexConvex(got.astype(np.float32), piece)[0] / area
            excess = _area(got) / _area(cv2.boxPoints(cv2.minAreaRect(piece))) - 1
            inside = all(_within(src, p, 1.0) for p in got), all(_within(tile, p, 1.0) for p in got)
            out["inside"].append(inside)
            out["excess"].append(excess)
            if area >= LEAST_PIXELS:
                out["held"].append(held)
            if not (held >= (0.95 if area >= LEAST_PIXELS else 0.5) and excess <= 0.02 and any(inside)):
                out["bad"].append((r["filename"], t["index"], k, "cut", round(held, 3), round(excess, 3), inside))
    return out


def run_tiles(tmp_path, images: int = 2) -> dict:
    job = tmp_path / "job"
    truth = {f"images/{img.name}": img for img in big_scenes(images)}
    dota_job(str(job), truth.values())
    run_job(str(job), parse_pipeline(TILED), str(tmp_path / "out"), JobOptions(name="t", workers=1))
    recs = records(tmp_path / "out" / "t")
    return {**map_back(recs, truth), "truth": truth, "pixels": judge(recs), "records": len(recs)}


def test_a_tiles_oriented_boxes_map_back_to_their_source_by_its_tile_keys(tmp_path):
    """Tiles of DOTA scenes, a colour op the only op: every oriented box, mapped back to the source by its record's
    augd/tile keys (docs/records.md), is where the rectangle drawn there lies: a whole one its corners within 0.5 px
    (the whole image's too), a piece a border cut the minimum-area rectangle of the rectangle's part in the tile;
    and each object whole in at least one tile (the overlap is wider than any). Held to the pixels as well."""
    got = run_tiles(tmp_path)
    assert not got["bad"], got["bad"][:5]
    assert len(got["held"]) >= 20, "the scenes must put objects across the tiles' borders"
    assert max(got["whole"]) <= 0.5 and max(got["full"]) <= 0.5 and len(got["full"]) == 2 * 2 * 20
    every = {(rel, o) for rel, img in got["truth"].items() for o in img.shapes}
    assert every == set(got["whole_in"]), sorted(every - set(got["whole_in"]), key=str)[:3]
    px = got["pixels"]
    assert not px["unmatched"] and not px["missing"] and not px["bad"], {k: px[k][:3] for k in ("unmatched",
                                                                                                 "missing", "bad")}


def test_the_refit_rule_in_numbers():
    """The rule itself: a rectangle comes back as itself whatever its turn, corners clockwise from the top-most;
    a sheared rectangle (a parallelogram) as the smallest rectangle holding it; pixels as their unit squares."""
    r = Rot("red", 50.0, 40.0, 30.0, 10.0, 30.0)
    got = min_area_rect(corners(r))
    assert corner_error(got, corners(r)) < 1e-3
    assert got[0][1] == min(p[1] for p in got) and _clockwise(got)
    upright = min_area_rect([(10, 5), (30, 5), (30, 15), (10, 15)])
    assert np.allclose(upright, [(10, 5), (30, 5), (30, 15), (10, 15)], atol=1e-4)
    # a sheared 20 x 10 rectangle: of the rectangles holding it (30 x 10 upright, 28.3 x 14.1 along its slant),
    # the smaller
    assert np.allclose(min_area_rect([(0, 0), (20, 0), (30, 10), (10, 10)]), [(0, 0), (30, 0), (30, 10), (0, 10)],
                       atol=1e-4)
    # a thin one (area 80): along its slant, 2.83 x 31.1 = 88, far less than upright (24 x 20)
    assert np.allclose(min_area_rect([(0, 0), (4, 0), (24, 20), (20, 20)]), [(2, -2), (24, 20), (22, 22), (0, 0)],
                       atol=1e-4)
    mask = np.zeros((10, 10), np.uint8)
    mask[2:5, 3:8] = 1
    assert np.allclose(raster_rect(mask), [(3, 2), (8, 2), (8, 5), (3, 5)], atol=1e-4)


def _clockwise(c) -> bool:
    """Clockwise as shown (y down): the shoelace sum is positive."""
    return sum(c[k][0] * c[(k + 1) % 4][1] - c[(k + 1) % 4][0] * c[k][1] for k in range(4)) > 0


def test_augd_data_load_returns_the_oriented_boxes(tmp_path):
    """`oriented=True` adds each box's 4 corners as normalized (y, x), moved with the resize; padded with -1."""
    job = tmp_path / "job"
    dota_job(str(job), scenes(2))
    run_job(str(job), parse_pipeline(PIPELINE.replace("VARIANTS", "1").replace("OPS", FAMILIES["rotation"])),
            str(tmp_path / "out"), JobOptions(name="t", workers=1))
    recs = records(tmp_path / "out" / "t")
    ds = augd.data.load(str(tmp_path / "out" / "t"), image_size=(H // 2, W), resize="pad", batch_size=None,
                        boxes="padded", max_boxes=6, oriented=True)
    for (image, target), r in zip(ds, recs):
        got = target["oriented_boxes"].numpy()
        assert got.shape == (6, 4, 2) and (got[len(r["obb"]):] == -1).all()
        # pad: the image shrinks by half into the middle of the width
        want = [[((y / 2) / (H // 2), (x / 2 + W / 4) / W) for x, y in obb] for obb in r["obb"]]
        assert np.allclose(got[:len(r["obb"])], want, atol=1e-4)


@pytest.mark.parametrize("masks", [True, False])
def test_records_read_back_keep_their_oriented_boxes(tmp_path, masks):
    """augd's own output as a job's input (TFRecord shards) stays a job of oriented boxes: each object moves as what
    showed of it (its instance mask) and is refit by the same rule; a record of another writer with the keys and no
    masks moves each object as its 4 corners. Judged by the pixels, as the families above."""
    job = tmp_path / "job"
    dota_job(str(job), scenes(3))
    first = PIPELINE.replace("VARIANTS", "0").replace("keep_original: false", "keep_original: true").replace(
        "OPS", "- random_flip_left_right: {}")
    run_job(str(job), parse_pipeline(first), str(tmp_path / "first"), JobOptions(name="t", workers=1))
    src = tmp_path / "first" / "t"
    if not masks:   # another writer's records: the obb keys, no instance masks
        again = tmp_path / "foreign"
        again.mkdir()
        with tf.io.TFRecordWriter(str(again / "data.tfrecord")) as out:
            for shard in sorted(src.glob("*.tfrecord")):
                for raw in tf.data.TFRecordDataset(str(shard)).as_numpy_iterator():
                    ex = tf.train.Example.FromString(raw)
                    del ex.features.feature["image/object/mask"]
                    out.write(ex.SerializeToString())
        src = again
    text = PIPELINE.replace("format: dota", "format: tfrecord").replace("VARIANTS", "2").replace(
        "OPS", FAMILIES["rotation"])
    run_job(str(src), parse_pipeline(text), str(tmp_path / "again"), JobOptions(name="t", workers=1))
    recs = records(tmp_path / "again" / "t")
    assert len(recs) == 6 and all(set(OBB_KEYS) <= r["keys"] for r in recs)
    got = judge(recs)
    assert not got["unmatched"] and not got["missing"] and not got["bad"], got
    assert max(got["whole"]) <= 2.0, sorted(got["whole"])[-5:]


def test_a_records_oriented_box_that_cannot_be_used_rejects_its_record(tmp_path):
    """Untrusted records: obb lists of another length than the boxes', or a corner that is no finite number,
    reject their record (bad_annotation, naming the key), the job going on."""
    import json

    from tests.hostile_records import det_record, f_list, records_job
    corners = {k.replace("/", "__"): f_list(0.3) for k in OBB_KEYS}
    bad = [det_record(90, **{**corners, "image__object__obb__x2": f_list(0.3, 0.4)}),
           det_record(91, **{**corners, "image__object__obb__y4": f_list(float("nan"))})]
    records_job(tmp_path / "job", bad)
    run_job(str(tmp_path / "job"), parse_pipeline(PIPELINE.replace("format: dota", "format: tfrecord").replace(
        "VARIANTS", "1").replace("OPS", FAMILIES["rotation"])), str(tmp_path / "out"),
        JobOptions(name="t", workers=1))
    m = json.loads((tmp_path / "out" / "t" / "manifest.json").read_text())
    why = {r["path"]: (r["reason"], r["message"]) for r in m["inputs"]["rejected_files"]}
    assert m["inputs"]["written"] == 6 and len(why) == 2, why
    assert all(reason == "bad_annotation" and "image/object/obb" in msg for reason, msg in why.values()), why


def test_beside_an_oriented_box_every_object_of_its_record_has_one(tmp_path):
    """A LabelMe image of a rectangle, a rotated rectangle and a polygon: its record gives all three an oriented
    box, the rectangle's and the polygon's their upright box's corners; the read-back key lists stay aligned."""
    from tests.exports import labelme_job
    from tests.test_tool_exports import scenes as tool_scenes
    job = tmp_path / "job"
    labelme_job(str(job), tool_scenes("labelme")[:1])
    text = PIPELINE.replace("format: dota", "format: labelme").replace("VARIANTS", "1").replace(
        "OPS", "- random_flip_left_right: {probability: 1.0}")
    run_job(str(job), parse_pipeline(text), str(tmp_path / "out"), JobOptions(name="t", workers=1))
    (rec,) = [r for shard in sorted((tmp_path / "out" / "t").glob("*.tfrecord"))
              for r in tf.data.TFRecordDataset(str(shard)).as_numpy_iterator()]
    f = tf.train.Example.FromString(rec).features.feature
    texts = [t.decode() for t in f["image/object/class/text"].bytes_list.value]
    box = np.stack([f[f"image/object/bbox/{k}"].float_list.value for k in ("xmin", "ymin", "xmax", "ymax")], 1)
    obb = np.stack([f[k].float_list.value for k in OBB_KEYS], 1).reshape(-1, 4, 2)
    assert sorted(texts) == ["car", "plane", "ship"] and obb.shape == (3, 4, 2)
    for name, b, o in zip(texts, box, obb):
        upright = [(b[0], b[1]), (b[2], b[1]), (b[2], b[3]), (b[0], b[3])]
        assert np.allclose(o, upright, atol=1e-6) == (name != "plane"), (name, o, b)


def test_inspect_counts_and_outlines_them_and_the_preview_draws_them(tmp_path):
    """`augd inspect` counts the oriented boxes and `--dump` outlines each along its turned sides (in its class'
    colour, where no upright box's outline runs); the preview's sheet draws them over the variant as the record
    holds them."""
    import subprocess
    import sys

    from augd.inspect import _colour
    from augd.preview.sheet import KEPT_COLOUR, preview_rows
    job = tmp_path / "job"
    dota_job(str(job), scenes(1))
    text = PIPELINE.replace("VARIANTS", "1").replace("OPS", "- random_rotation: {degrees: [20, 20]}")
    run_job(str(job), parse_pipeline(text), str(tmp_path / "out"), JobOptions(name="t", workers=1))
    out = tmp_path / "out" / "t"
    (rec,) = records(out)
    res = subprocess.run([sys.executable, "-m", "augd", "inspect", str(out), "--dump", "1", str(tmp_path / "look")],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "oriented boxes (image/object/obb/*): 4 in 1 records" in res.stdout
    (png,) = (tmp_path / "look").glob("*.png")
    drawn = cv2.imread(str(png))
    ids = {name: k + 1 for k, name in enumerate(sorted(CLASSES))}      # the label map: the names used, sorted
    for cls, obb in zip(rec["texts"], rec["obb"]):
        for a, b in zip(obb, obb[1:] + obb[:1]):
            x, y = int((a[0] + b[0]) / 2), int((a[1] + b[1]) / 2)
            near = drawn[max(y - 1, 0):y + 2, max(x - 1, 0):x + 2].reshape(-1, 3).astype(int)
            assert np.abs(near - _colour(ids[cls])).sum(axis=1).min() <= 90, (cls, (x, y), near)
    (row,) = preview_rows(parse_pipeline(text), [str(job / "images" / "s0.png")], variants=1,
                          relpaths=["images/s0.png"], root=str(job))
    sheet = row.tiles[-1].image
    for obb in rec["obb"]:
        a, b = obb[0], obb[1]
        x, y = int((a[0] + b[0]) / 2), int((a[1] + b[1]) / 2)
        near = sheet[max(y - 1, 0):y + 2, max(x - 1, 0):x + 2].reshape(-1, 3).astype(int)
        assert np.abs(near - KEPT_COLOUR).sum(axis=1).min() <= 90, ((x, y), near)


if __name__ == "__main__":
    import pathlib
    import tempfile

    def stats(v) -> str:
        return f"{max(v):5.2f} {statistics.median(v):5.2f}" if v else "    -     -"

    print(f"{'family':16} {'records':>7} {'whole: max median':>17} {'cut: max median':>15} ties bad tiny "
          f"{'mask area: max median':>21} unmatched missing")
    for fam in FAMILIES:
        with tempfile.TemporaryDirectory() as d:
            g = run_family(pathlib.Path(d), fam)
        a = g["areas"]
        print(f"{fam:16} {g['records']:7d} {len(g['whole']):5d} {stats(g['whole'])} {len(g['cut']):3d} "
              f"{stats(g['cut'])} {len(g['ties']):4d} {len(g['bad']):3d} {g['tiny']:4d} {len(a):5d} "
              f"{100 * max(a):6.2f}% {100 * statistics.median(a):6.2f}% {len(g['unmatched']):9d} "
              f"{len(g['missing']):7d}")
    with tempfile.TemporaryDirectory() as d:
        g = run_tiles(pathlib.Path(d))
    n_obj = sum(len(img.shapes) for img in g["truth"].values())
    print(f"\ntiles {TILES} of {len(g['truth'])} {BIG[1]}x{BIG[0]} images, {n_obj} objects, {g['records']} records, "
          f"mapped back by their augd/tile keys:\n  whole in a tile: {len(g['whole'])} boxes, corners max "
          f"{max(g['whole']):.3f} px; the whole image: {len(g['full'])}, max {max(g['full']):.3f} px\n"
          f"  cut: {len(g['inside'])} boxes, in their rectangle {sum(a for a, _ in g['inside'])}, in the tile "
          f"{sum(b for _, b in g['inside'])}; of the {len(g['held'])} pieces of {LEAST_PIXELS} px or more, the "
          f"share held min {min(g['held']):.3f}; area over the piece's minimum-area rectangle max "
          f"{max(g['excess']):+.3f}\n  objects whole in at least one tile: {len(g['whole_in'])} of {n_obj}; "
          f"bad: {len(g['bad'])}")
