"""Keypoints (COCO person keypoints, Ultralytics pose) through the geometry into the Object Detection API's keys.

The truth is in the pixels (tests/posed.py): each point is a dot of its own colour, so wherever a chain moved
the pixels, a record's visible point must sit on its dot; a mirror (told apart from a rotation by the pixels
alone: the turn of three dots flips) must swap left and right; a dot the crop pushed out must be not visible.
"""
from __future__ import annotations

import json
import math
import subprocess
import sys
from multiprocessing import resource_tracker
from pathlib import Path

import cv2
import numpy as np
import pytest

from augd.annotations.occlusion import Rule
from augd.annotations import AnnotationError, Object
from augd.annotations.model import KeypointSchema, flip_from_names
from augd.annotations.targets import transform
from augd.io import read_records
from augd.io.records import parse_example
from augd.job import JobOptions, run_job
from augd.schema import parse_pipeline
from tests.daemon_harness import no_leaked_children_module  # noqa: F401
from tests.posed import (COLOURS, DOT, FLIP, NAMES, SKELETON, TOLERANCE, chirality, coco_pose_job, dot_centre,
                         people, yolo_pose_job)

REPO = Path(__file__).resolve().parent.parent
# The in-process worker pool below starts multiprocessing's resource tracker, which lives as long as pytest: started
# first, it is no child this module leaks (the daemon's children are what no_leaked_children_module is about).
resource_tracker.ensure_running()
CHAIN = """name: kp-test
seed: 5
variants: 5
output: {format: png, shards: 2}
ops:
  - random_crop: {size: [72, 88], area: [0.35, 1.0], aspect: [0.8, 1.25]}
  - random_rotation: {degrees: 30}
  - random_flip_left_right: {}
"""


def _rgb(ex: dict) -> np.ndarray:
    return cv2.cvtColor(cv2.imdecode(np.frombuffer(ex["image/encoded"], np.uint8), cv2.IMREAD_COLOR),
                        cv2.COLOR_BGR2RGB)


def _near(rgb: np.ndarray, x: float, y: float, colour, r: int = 1) -> bool:
    """Whether a pixel of `colour` lies within r pixels of the pixel holding (x, y) (pixel-edge units)."""
    h, w = rgb.shape[:2]
    c, row = min(int(x), w - 1), min(int(y), h - 1)
    patch = rgb[max(row - r, 0):row + r + 1, max(c - r, 0):c + r + 1].astype(np.int32)
    return bool((np.abs(patch - np.array(colour)) < TOLERANCE).all(axis=-1).any())


def _solid(rgb: np.ndarray, colour) -> bool:
    """Whether a whole 3x3 block of `colour` is in the image (the middle of a dot, at any scale >= 1)."""
    mask = (np.abs(rgb.astype(np.int32) - np.array(colour)) < TOLERANCE).all(axis=-1).astype(np.uint8)
    return bool(cv2.erode(mask, np.ones((3, 3), np.uint8), borderValue=0).any())


def _border_distance(rgb, p) -> float:
    h, w = rgb.shape[:2]
    return min(p[0], p[1], w - p[0], h - p[1])


def check_records(records, truth: dict) -> dict:
    """Every record's keypoints against its pixels (see the module docstring); what the records showed."""
    seen = {"records": 0, "mirrored": 0, "kept": 0, "cut": 0, "visible": 0}
    for rec in records:
        ex = parse_example(rec)
        src = [(c + 0.5, r + 0.5) for c, r in truth[ex["image/filename"]]]
        rgb = _rgb(ex)
        h, w = rgb.shape[:2]
        xs, ys = ex["image/object/keypoint/x"], ex["image/object/keypoint/y"]
        vis = ex["image/object/keypoint/visibility"]
        assert len(xs) == len(ys) == len(vis) == len(NAMES) * len(ex["image/object/bbox/xmin"])
        if not vis:
            continue
        assert ex["image/object/keypoint/num"] == [sum(v > 0 for v in vis)]
        centres = [c if c is not None and _border_distance(rgb, c) > 2 * DOT + 3 else None
                   for c in (dot_centre(rgb, i, least=12) for i in range(len(NAMES)))]   # whole dots only
        turn = chirality(centres)
        if turn is None:       # under three dots left: nothing tells a mirror from a rotation here
            continue
        sign, idx = turn
        a, b, c = (src[i] for i in idx)
        mirrored = sign != np.sign((b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0]))
        seen["records"] += 1
        seen["mirrored" if mirrored else "kept"] += 1
        for i in range(len(NAMES)):
            j = FLIP[i] if mirrored else i        # record point i carries the dot drawn for source point j
            where = f"{ex['image/filename']} variant {ex['augd/variant']} point {i} ({NAMES[i]})"
            if vis[i]:
                seen["visible"] += 1
                x, y = xs[i] * w, ys[i] * h
                assert _near(rgb, x, y, COLOURS[j]), f"{where}: ({x:.1f}, {y:.1f}) is not on dot {j}"
            else:
                seen["cut"] += 1
                assert xs[i] == ys[i] == 0.0, where
                # its dot's middle is gone (off the canvas, or under a cutout): no 3x3 of it is left, or what
                # is left lies at the border
                left = dot_centre(rgb, j, least=1)
                assert left is None or not _solid(rgb, COLOURS[j]) or _border_distance(rgb, left) < 2 * DOT + 3, \
                    f"{where}: not visible, but its dot is at {left} inside the {w}x{h} image"
            full = dot_centre(rgb, j, least=20)
            if full is not None and _border_distance(rgb, full) > 2 * DOT + 3:
                assert vis[i], f"{where}: its dot is in the image at {full}, but the point is not visible"
    return seen


def _run(job: Path, out: Path, chain: str = CHAIN, **options):
    res = run_job(str(job), parse_pipeline(chain), str(out), JobOptions(**options))
    return res, out / job.name


@pytest.fixture(scope="module")
def coco(tmp_path_factory):
    root = tmp_path_factory.mktemp("coco") / "people"
    truth = coco_pose_job(str(root), people(8, seed=1))
    out = tmp_path_factory.mktemp("coco-out")
    _, folder = _run(root, out, workers=1, executor="threads")
    return root, {f"{k}": v for k, v in truth.items()}, folder


def test_coco_keypoints_sit_on_their_dots_after_crop_rotation_and_flips(coco):
    _, truth, folder = coco
    seen = check_records(read_records(folder), truth)
    # the chain did what the test is about: mirrors and not, points cut off and kept
    assert seen["records"] >= 30 and seen["mirrored"] >= 5 and seen["kept"] >= 5, seen
    assert seen["cut"] >= 3 and seen["visible"] >= 100, seen


def test_a_yolo_pose_job_swaps_by_its_flip_idx_and_sits_on_its_dots(tmp_path):
    truth = yolo_pose_job(str(tmp_path / "pose"), people(6, seed=2))
    res, folder = _run(tmp_path / "pose", tmp_path / "out", workers=1)
    m = json.loads((folder / "manifest.json").read_text())
    assert m["annotations"]["format"] == "yolo"
    assert m["annotations"]["keypoints"]["flip"] == list(FLIP)
    assert m["annotations"]["keypoints"]["names"] == list(NAMES)
    seen = check_records(read_records(folder), truth)
    assert seen["records"] >= 20 and seen["mirrored"] >= 3 and seen["kept"] >= 3, seen


def test_a_flip_swaps_left_and_right_exactly_and_a_rotation_never_does(tmp_path):
    scenes = people(4, seed=3)
    truth = coco_pose_job(str(tmp_path / "p"), scenes)
    flip = "name: f\nseed: 1\nvariants: 6\nkeep_original: false\noutput: {format: png}\nops:\n" \
           "  - random_flip_left_right: {}\n"
    _, folder = _run(tmp_path / "p", tmp_path / "flip", flip, workers=1)
    flipped = 0
    for rec in read_records(folder):
        ex = parse_example(rec)
        src = truth[ex["image/filename"]]
        w = ex["image/width"]
        xs = ex["image/object/keypoint/x"]
        mirrored = abs(xs[0] * w - (w - (src[0][0] + 0.5))) < 1e-4
        flipped += mirrored
        for i in range(len(NAMES)):
            j = FLIP[i] if mirrored else i
            want = (w - (src[j][0] + 0.5)) if mirrored else src[j][0] + 0.5
            assert math.isclose(xs[i] * w, want, abs_tol=1e-4), (ex["image/filename"], i)
            assert math.isclose(ex["image/object/keypoint/y"][i] * ex["image/height"], src[j][1] + 0.5,
                                abs_tol=1e-4)
    assert 0 < flipped < 24
    rot = "name: r\nseed: 2\nvariants: 4\nkeep_original: false\noutput: {format: png}\nops:\n" \
          "  - random_rotation: {degrees: 60}\n"
    _, folder = _run(tmp_path / "p", tmp_path / "rot", rot, workers=1)
    seen = check_records(read_records(folder), truth)
    assert seen["mirrored"] == 0 and seen["kept"] >= 12, seen


def test_a_point_a_cutout_covers_is_not_visible_wherever_the_cutout_falls_in_the_chain(tmp_path):
    truth = coco_pose_job(str(tmp_path / "p"), people(8, seed=9))
    # the cutout between two warps (its rectangle lies in the rotated canvas, before the flip) and after both
    for k, ops in enumerate(("  - random_rotation: {degrees: 15}\n  - random_erasing: {area: [0.15, 0.3]}\n"
                             "  - random_flip_left_right: {}\n",
                             "  - random_flip_left_right: {}\n  - random_erasing: {area: [0.15, 0.3], value: 255}\n")):
        chain = f"name: cut\nseed: {k}\nvariants: 6\nkeep_original: false\noutput: {{format: png}}\nops:\n{ops}"
        _, folder = _run(tmp_path / "p", tmp_path / f"o{k}", chain, workers=1)
        seen = check_records(read_records(folder), truth)
        assert seen["cut"] >= 8 and seen["records"] >= 20 and seen["mirrored"] >= 4, (ops, seen)


def _obj(points) -> Object:
    return Object(name="person", box=(10.0, 10.0, 30.0, 30.0), keypoints=tuple(points))


def _shift(dx: float, h: float = 40.0, w: float = 40.0):
    """A step that moves the image by dx pixels (output centre -> input centre: x - dx)."""
    return (np.array([[1.0, 0.0, -dx], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]), h, w)


def test_points_inside_a_box_move_with_its_pixels_and_a_flip_there_swaps_them(tmp_path):
    """in_boxes turns, shifts and flips each person's own box: every visible point sits on its dot, one whose dot a
    move took out of the box is not visible, and a flip inside the box mirrors the person (left and right swap)."""
    truth = coco_pose_job(str(tmp_path / "p"), people(6, seed=4))
    chain = "name: ib\nseed: 3\nvariants: 6\nkeep_original: false\noutput: {format: png}\nops:\n" \
            "  - in_boxes: {op: rotate, value: 12, box_p: 1.0}\n  - in_boxes: {op: flip, box_p: 0.5}\n" \
            "  - in_boxes: {op: translate_x, value: 6, box_p: 0.5}\n"
    _, folder = _run(tmp_path / "p", tmp_path / "out", chain, workers=1)
    seen = check_records(read_records(folder), truth)
    assert seen["records"] >= 15 and seen["mirrored"] >= 5 and seen["kept"] >= 5, seen
    assert seen["cut"] >= 3 and seen["visible"] >= 60, seen


def test_a_point_pushed_off_the_canvas_is_not_visible_and_stays_gone():
    from augd.annotations import Annotation
    ann = Annotation(objects=(_obj([(12.0, 12.0, 2), (35.0, 20.0, 1), (0.0, 0.0, 0)]),))
    out, _, _ = transform(ann, [_shift(10.0)], flip=(0, 1, 2))
    assert out.objects[0].keypoints == ((22.0, 12.0, 2), (0.0, 0.0, 0), (0.0, 0.0, 0))
    # off the canvas after the first step, back over it after the second: gone, as its pixels are
    out, _, _ = transform(ann, [_shift(10.0), _shift(-10.0)], flip=(0, 1, 2))
    assert out.objects[0].keypoints == ((12.0, 12.0, 2), (0.0, 0.0, 0), (0.0, 0.0, 0))
    # an object left with fewer labelled points than min_keypoints still shows: ignored (weight 0), its points as
    # they are; with low_visibility drop, dropped
    out, _, dropped = transform(ann, [_shift(10.0)], flip=(0, 1, 2), rule=Rule(min_keypoints=2))
    assert not dropped and out.objects[0].ignored == "keypoints" and out.objects[0].keypoints[0] == (22.0, 12.0, 2)
    out, _, dropped = transform(ann, [_shift(10.0)], flip=(0, 1, 2), rule=Rule(min_keypoints=2, low_visibility="drop"))
    assert out.objects == () and dropped == {"keypoints": 1}


def test_flip_pairs_come_from_the_names_and_must_pair_the_points():
    assert flip_from_names(NAMES) == FLIP
    assert flip_from_names(("nose", "Left_ear", "Right_ear", "leftmost")) == (0, 2, 1, 3)
    with pytest.raises(AnnotationError, match="not a pairing"):
        KeypointSchema(("a", "b", "c"), (1, 2, 0))
    with pytest.raises(AnnotationError, match="skeleton edge"):
        KeypointSchema(("a", "b"), (0, 1), ((0, 2),))


def test_keypoint_flip_in_the_pipeline_overrides_the_names_and_is_checked(tmp_path):
    coco_pose_job(str(tmp_path / "p"), people(2, seed=4))
    chain = CHAIN + "annotations: {keypoint_flip: [0, 1, 2, 3, 4]}\n"
    _, folder = _run(tmp_path / "p", tmp_path / "o1", chain, workers=1)
    assert json.loads((folder / "manifest.json").read_text())["annotations"]["keypoints"]["flip"] == [0, 1, 2, 3, 4]
    from augd.errors import JobFailed
    with pytest.raises(JobFailed, match="not a pairing of the 5 points") as err:
        _run(tmp_path / "p", tmp_path / "o2", CHAIN + "annotations: {keypoint_flip: [1, 0]}\n", workers=1)
    assert err.value.reason == "bad_labels" and "left_eye" in str(err.value)


def _coco_with(tmp_path: Path, edit) -> Path:
    root = tmp_path / "bad"
    coco_pose_job(str(root), people(3, seed=5))
    doc = json.loads((root / "person_keypoints.json").read_text())
    edit(doc)
    (root / "person_keypoints.json").write_text(json.dumps(doc))
    return root


@pytest.mark.parametrize("edit, message", [
    (lambda d: d["annotations"][1].update(keypoints=d["annotations"][1]["keypoints"][:-3]),
     r"annotations\[1\] \(id 2, person\): keypoints has 12 numbers; its category's 5 points need 15"),
    (lambda d: d["annotations"][1]["keypoints"].__setitem__(3, 500),
     r"annotations\[1\] \(id 2, person\): keypoint 2 \(left_eye\) at \(500.5, [\d.]+\) lies outside the 96x80"),
    (lambda d: d["annotations"][1]["keypoints"].__setitem__(5, 3),
     r"annotations\[1\] \(id 2, person\): keypoint 2 \(left_eye\): visibility 3"),
])
def test_a_malformed_keypoint_rejects_its_image_naming_the_file_object_and_point(tmp_path, edit, message):
    root = _coco_with(tmp_path, edit)
    res, folder = _run(root, tmp_path / "out", workers=1)
    rejected = json.loads((folder / "manifest.json").read_text())["inputs"]["rejected_files"]
    assert [(r["path"], r["reason"]) for r in rejected] == [("images/p01.png", "bad_annotation")], rejected
    assert rejected[0]["message"].startswith("person_keypoints.json: ")
    import re
    assert re.search(message, rejected[0]["message"]), rejected[0]["message"]


def test_a_nan_keypoint_and_a_short_pose_line_reject_their_image(tmp_path):
    from augd.errors import JobFailed
    # NaN is not JSON: a COCO file holding one cannot be read at all, and says so (nothing is written)
    root = _coco_with(tmp_path, lambda d: d["annotations"][2]["keypoints"].__setitem__(0, float("nan")))
    with pytest.raises(JobFailed, match="person_keypoints.json: invalid JSON: non-standard constant NaN"):
        _run(root, tmp_path / "out", workers=1)
    yolo_pose_job(str(tmp_path / "y"), people(3, seed=6))
    short, nan = (tmp_path / "y" / "labels" / f"p0{k}.txt" for k in (1, 2))
    short.write_text(" ".join(short.read_text().split()[:-3]) + "\n")
    fields = nan.read_text().split()
    nan.write_text(" ".join(fields[:7] + ["nan"] + fields[8:]) + "\n")
    res, folder = _run(tmp_path / "y", tmp_path / "out2", workers=1)
    rejected = json.loads((folder / "manifest.json").read_text())["inputs"]["rejected_files"]
    assert [r["path"] for r in rejected] == ["images/p01.png", "images/p02.png"], rejected
    assert "labels/p01.txt: line 1 (person): 17 fields; a pose line is `class cx cy w h` and 5 points of 3 " \
        "numbers (20 fields" in rejected[0]["message"], rejected
    assert "labels/p02.txt: line 1 (person): value 7 is 'nan', not a finite number" in rejected[1]["message"], rejected


def test_records_carry_the_api_keys_and_the_label_map_names_the_points(coco):
    import tensorflow as tf
    from augd.annotations.labelmap import LabelMap
    from augd.io.records import DETECTION_FEATURES
    root, truth, folder = coco
    rec = next(iter(read_records(folder)))
    f = tf.io.parse_single_example(rec, DETECTION_FEATURES)
    n = int(tf.size(f["image/object/bbox/xmin"].values))
    for key in ("x", "y", "visibility"):
        assert int(tf.size(f[f"image/object/keypoint/{key}"].values)) == n * len(NAMES)
    assert f["image/object/keypoint/num"].values.numpy().tolist() == [
        int((f["image/object/keypoint/visibility"].values.numpy() > 0).sum())]
    pbtxt = (folder / "label_map.pbtxt").read_text()
    assert "keypoints {\n    id: 1\n    label: 'left_eye'\n  }" in pbtxt
    assert LabelMap.read_pbtxt(folder / "label_map.pbtxt").ids == {"person": 1}
    m = json.loads((folder / "manifest.json").read_text())["annotations"]["keypoints"]
    assert m["names"] == list(NAMES) and m["skeleton"] == [list(e) for e in SKELETON]
    assert m["classes"] == ["person"] and m["labelled"]["in"] == 8 * len(NAMES)
    assert 0 < m["labelled"]["out"] <= 6 * m["labelled"]["in"]


def test_the_loader_gives_padded_keypoints_that_follow_the_resize(coco):
    import augd.data
    _, _, folder = coco
    ds = augd.data.load(str(folder), image_size=(64, 64), resize="pad", batch_size=4, labels=None,
                        unlabeled="keep", boxes="padded", max_boxes=3, keypoints="padded")
    images, target = next(iter(ds))
    assert target["keypoints"].shape == (4, 3, len(NAMES), 2)
    assert target["keypoint_visibility"].shape == (4, 3, len(NAMES))
    assert target["keypoint_visibility"].dtype.name == "int32"
    assert (target["keypoint_visibility"].numpy()[:, 1:] == 0).all()     # one person an image: the rest padding
    # each visible point still sits on its dot in the padded, resized image
    raw = augd.data.load(str(folder), image_size=None, batch_size=None, labels=None, unlabeled="keep",
                         boxes="padded", max_boxes=3, keypoints="padded")
    for (img, t), (small, ts) in zip(raw.take(4), augd.data.load(
            str(folder), image_size=(64, 64), resize="pad", batch_size=None, labels=None, unlabeled="keep",
            boxes="padded", max_boxes=3, keypoints="padded").take(4)):
        h, w = img.shape[:2]
        scale = min(64 / h, 64 / w)
        for i in range(len(NAMES)):
            if t["keypoint_visibility"][0, i]:
                y, x = t["keypoints"][0, i].numpy() * (h, w)
                ys, xs = ts["keypoints"][0, i].numpy() * 64
                assert abs(ys - (y * scale + (64 - round(h * scale)) // 2)) < 0.6
                assert abs(xs - (x * scale + (64 - round(w * scale)) // 2)) < 0.6
    crop = augd.data.load(str(folder), image_size=(40, 80), resize="crop", batch_size=None, labels=None,
                          unlabeled="keep", boxes="padded", max_boxes=3, keypoints="padded")
    hidden = 0
    for (_, t), (_, tc) in zip(raw, crop):     # the crop hides the points outside it, and only those
        h, w = t["keypoints"].shape[:2]
        for i in range(len(NAMES)):
            y, x = tc["keypoints"][0, i].numpy()
            if tc["keypoint_visibility"][0, i]:
                assert 0.0 <= y <= 1.0 and 0.0 <= x <= 1.0
            elif t["keypoint_visibility"][0, i]:
                hidden += 1
                assert x == y == 0.0
    assert hidden > 0
    with pytest.raises(augd.data.DataError, match="keypoints='padded' with boxes=None"):
        augd.data.load(str(folder), image_size=64, labels=None, unlabeled="keep", keypoints="padded")


def test_inspect_counts_the_keypoints_and_its_dump_draws_the_skeleton(coco, tmp_path):
    _, _, folder = coco
    out = subprocess.run([sys.executable, "-m", "augd", "inspect", str(folder), "--dump", "2", str(tmp_path)],
                         capture_output=True, text=True, timeout=120, cwd=REPO)
    assert out.returncode == 0, out.stderr
    labelled = json.loads((folder / "manifest.json").read_text())["annotations"]["keypoints"]["labelled"]["out"]
    assert f"keypoints: {labelled} labelled in 48 records" in out.stdout, out.stdout   # originals included
    first = sorted(tmp_path.glob("00000-*.png"))[0]
    drawn = cv2.imread(str(first))
    ex = parse_example(next(iter(read_records(folder))))
    w, h = ex["image/width"], ex["image/height"]
    xs, ys, vis = (ex[f"image/object/keypoint/{k}"] for k in ("x", "y", "visibility"))
    for a, b in SKELETON:     # the middle of each edge between two visible points is white
        if vis[a] and vis[b]:
            mx, my = (xs[a] + xs[b]) / 2 * w, (ys[a] + ys[b]) / 2 * h
            patch = drawn[max(int(my) - 1, 0):int(my) + 2, max(int(mx) - 1, 0):int(mx) + 2].astype(int)
            assert (patch.min(axis=-1) > 200).any(), (a, b)


def test_every_executor_and_worker_count_writes_the_same_keypoint_bytes(coco, tmp_path):
    root, _, folder = coco
    want = {p.name: p.read_bytes() for p in folder.iterdir() if p.name != "manifest.json"}
    runs = [{"workers": 2, "executor": "threads"}, {"workers": 2, "executor": "processes"}]
    try:
        import apache_beam  # noqa: F401
        runs.append({"workers": 1, "executor": "beam",
                     "executor_args": ("--runner=DirectRunner", "--direct_num_workers=1")})
    except ImportError:
        pass
    for k, options in enumerate(runs):
        _, got = _run(root, tmp_path / str(k), **options)
        assert {p.name: p.read_bytes() for p in got.iterdir() if p.name != "manifest.json"} == want, options
        mine = json.loads((got / "manifest.json").read_text())["annotations"]
        assert mine == json.loads((folder / "manifest.json").read_text())["annotations"], options


def _solid_dots(rgb: np.ndarray, colour) -> list[tuple[float, float]]:
    """Centres (pixel edges) of each patch of `colour` that holds a whole 3x3 block: the middle of a dot."""
    mask = (np.abs(rgb.astype(np.int32) - np.array(colour)) < TOLERANCE).all(axis=-1).astype(np.uint8)
    core = cv2.erode(mask, np.ones((3, 3), np.uint8), borderValue=0)
    n, labels, _, cents = cv2.connectedComponentsWithStats(mask, connectivity=8)
    return [tuple(cents[k] + 0.5) for k in range(1, n) if core[labels == k].any()]


@pytest.mark.parametrize("ops", ["  - mosaic: {size: [160, 192]}\n",
                                 "  - cutmix: {area: [0.25, 0.5]}\n",
                                 "  - mosaic: {size: [160, 192]}\n  - random_rotation: {degrees: 12}\n"])
def test_keypoints_of_every_tile_and_patch_sit_on_their_dots_after_a_mix(tmp_path, ops):
    """A mix lays several people on one canvas, each with the same five dot colours: every visible point of
    every object sits on a dot of its colour, and every dot whose middle shows is some object's visible point of
    that index (a point under a cutmix patch is not visible; the patch's own people bring theirs)."""
    coco_pose_job(str(tmp_path / "p"), people(6, seed=4))
    chain = (f"name: kp-mix\nseed: 3\nvariants: 4\nkeep_original: false\noutput: {{format: png}}\nops:\n{ops}"
             "annotations: {min_visibility: 0, min_size: 1}\n")   # every dot showing belongs to some object
    _, folder = _run(tmp_path / "p", tmp_path / "out", chain, workers=1)
    objects = points = 0
    for rec in read_records(folder):
        ex = parse_example(rec)
        rgb = _rgb(ex)
        h, w = rgb.shape[:2]
        where = f"{ex['image/filename']} variant {ex['augd/variant']}"
        n = len(ex["image/object/bbox/xmin"])
        xs, ys = (np.reshape(ex[f"image/object/keypoint/{a}"], (n, len(NAMES))) for a in ("x", "y"))
        vis = np.reshape(ex["image/object/keypoint/visibility"], (n, len(NAMES)))
        objects += n
        for i in range(len(NAMES)):
            got = [(xs[k, i] * w, ys[k, i] * h) for k in range(n) if vis[k, i]]
            points += len(got)
            for x, y in got:
                assert _near(rgb, x, y, COLOURS[i]), f"{where}: point {i} at ({x:.1f}, {y:.1f}) is on no dot {i}"
            for cx, cy in _solid_dots(rgb, COLOURS[i]):
                assert any(abs(cx - x) <= DOT + 1.5 and abs(cy - y) <= DOT + 1.5 for x, y in got), \
                    f"{where}: dot {i} shows at ({cx:.1f}, {cy:.1f}) but no object's point {i} is there"
    assert objects >= 2 * 24 and points >= 100, (objects, points)   # the mixes brought partners' people


ROT = (1, 2, 3, 4, 0)   # a keypoint_rotation that does not commute with FLIP: the order of the steps shows


_MIRRORS = {"mirror": "  - random_flip_left_right: {probability: 1.0}\n",
            # a flip of each box's own pixels (AutoAugment's Flip_Only_BBoxes): one person a photo, its box round
            # its dots, so the flip takes all of them
            "flip inside its box": "  - in_boxes: {op: flip, box_p: 1.0}\n"}


_TURN = "  - random_rotation90: {p: 1.0}\n"


def _in_order(order: str) -> tuple[str, list[int]]:
    """(the ops of `order`, "turn, then M" or "M, then turn" for a mirror M of _MIRRORS; the source point whose dot
    each point i must sit on: the two permutations composed in that order)."""
    first, second = order.split(", then ")
    if first == "turn":
        return _TURN + _MIRRORS[second], [ROT[FLIP[i]] for i in range(len(NAMES))]
    return _MIRRORS[first] + _TURN, [FLIP[ROT[i]] for i in range(len(NAMES))]


def _pose_records(tmp_path, scenes, seed: int, variants: int, annotations: str, ops: str):
    """(example, its RGB pixels) of each record of a COCO pose job of `scenes` through `ops`."""
    root = tmp_path / "people"
    coco_pose_job(str(root), scenes)
    spec = parse_pipeline(f"name: rot\nseed: {seed}\nvariants: {variants}\nkeep_original: false\n"
                          f"output: {{format: png}}\nannotations: {{{annotations}}}\nops:\n{ops}", "rot.yaml")
    run_job(str(root), spec, str(tmp_path / "out"), JobOptions(workers=1, executor="threads"))
    for rec in read_records(str(next((tmp_path / "out" / "people").glob("*.tfrecord*")))):
        ex = parse_example(rec)
        yield ex, _rgb(ex)


# "turn, then flip inside its box" passed before the flip found its place too (it was applied last); "flip inside
# its box, then turn" is the one that holds the order
@pytest.mark.parametrize("order", ["turn, then mirror", "mirror, then turn", "turn, then flip inside its box",
                                   "flip inside its box, then turn"])
def test_a_quarter_turn_permutes_the_points_by_keypoint_rotation_in_the_order_of_the_steps(tmp_path, order):
    """The OD API's random_rotation90 with keypoint_rot_permutation: at each quarter turn point i takes point
    ROT[i]'s place, and a mirror point FLIP[i]'s (the whole image's, or the person's box's own pixels'), in the
    order the chain applies them. Each record's point i must sit on the dot drawn for the source point the two
    permutations, composed in that order, name."""
    ops, source = _in_order(order)
    checked = 0
    for ex, rgb in _pose_records(tmp_path, people(4, seed=3), 2, 2, f"keypoint_rotation: {list(ROT)}", ops):
        h, w = rgb.shape[:2]
        assert (h, w) == (96, 80)   # a quarter turn of the 80 x 96 source
        xs, ys = ex["image/object/keypoint/x"], ex["image/object/keypoint/y"]
        vis = ex["image/object/keypoint/visibility"]
        for i in range(len(NAMES)):
            assert vis[i], (ex["image/filename"], i)
            assert _near(rgb, xs[i] * w, ys[i] * h, COLOURS[source[i]]), (ex["image/filename"], i, source[i])
            checked += 1
    assert checked == 4 * 2 * len(NAMES)


@pytest.mark.parametrize("order", ["flip inside its box, then turn", "turn, then flip inside its box",
                                   "flip inside its box alone"])
def test_after_a_mosaic_a_flip_inside_a_box_and_a_quarter_turn_permute_in_their_order(tmp_path, order):
    """The same on a mosaic's canvas, whose two placement steps come before the chain's, and whose tiles cut some
    people (the only test here of a flip judged by the points a record still shows): every visible point i of every
    person sits on the dot of the source point the flip inside its box and the quarter turn, composed in the
    chain's order, name (the flip alone, without keypoint_rotation: FLIP[i])."""
    alone = order.endswith("alone")
    ops, source = (_MIRRORS["flip inside its box"], list(FLIP)) if alone else _in_order(order)
    rotation = "" if alone else f"keypoint_rotation: {list(ROT)}, "
    checked = 0
    for ex, rgb in _pose_records(tmp_path, people(6, seed=4), 3, 3, f"{rotation}min_visibility: 0, min_size: 1",
                                 "  - mosaic: {size: [160, 192]}\n" + ops):
        h, w = rgb.shape[:2]
        n = len(ex["image/object/bbox/xmin"])
        xs, ys = (np.reshape(ex[f"image/object/keypoint/{a}"], (n, len(NAMES))) for a in ("x", "y"))
        vis = np.reshape(ex["image/object/keypoint/visibility"], (n, len(NAMES)))
        for k in range(n):
            for i in range(len(NAMES)):
                if vis[k, i]:
                    assert _near(rgb, xs[k, i] * w, ys[k, i] * h, COLOURS[source[i]]), \
                        (ex["image/filename"], ex["augd/variant"], k, i, source[i])
                    checked += 1
    assert checked >= 6 * 3 * len(NAMES), checked   # the mosaics brought partners' people too


def test_a_keypoint_rotation_must_permute_the_points(tmp_path):
    root = tmp_path / "people"
    coco_pose_job(str(root), people(1, seed=3))
    spec = parse_pipeline("name: rot\nannotations: {keypoint_rotation: [0, 0, 1, 2, 3]}\nops: []\n", "rot.yaml")
    with pytest.raises(Exception, match=r"keypoint rotation \[0, 0, 1, 2, 3\] is not a permutation of the 5 points"):
        run_job(str(root), spec, str(tmp_path / "out"), JobOptions(workers=1, executor="threads"))
