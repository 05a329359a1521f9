"""The annotation tools' exports (DOTA, YOLO-OBB, LabelMe, CVAT for images 1.1, Label Studio JSON), each written as
the tool writes it (tests/exports.py), through a real job into records and back through augd.data.load. Truth in
the pixels: every object is a solid shape of its own colour (an axis-aligned rectangle, a rectangle turned by its
format's own rotation convention, a polygon); each comes back with its class, its polygon's area within 3 % of
its pixels, its instance mask within 3 % of them, and its box around them."""
from __future__ import annotations

import json
import re

import cv2
import numpy as np
import pytest
import tensorflow as tf

import augd.data
from augd.annotations.layout import detect_format, read_job
from augd.annotations.shapes import polygon_area
from augd.job import JobOptions, run_job
from augd.schema import parse_pipeline
from tests.annotated import Img, Shape
from tests.exports import Rot, cvat_job, dota_job, label_studio_job, labelme_job, yolo_obb_job

RED, GREEN, BLUE = (230, 20, 20), (20, 200, 20), (20, 20, 230)
COLOURS = {"car": RED, "plane": BLUE, "ship": GREEN}
WRITERS = {"dota": dota_job, "yolo_obb": yolo_obb_job, "labelme": labelme_job, "cvat": cvat_job,
           "label_studio": label_studio_job}
PIPELINE = """name: tools
seed: 3
variants: 1
keep_original: true
output: {format: png, shards: 1}
annotations: {format: FORMAT, min_visibility: 0, min_size: 1}
ops:
  - random_flip_left_right: {}
"""


def scenes(fmt: str) -> list[Img]:
    """Three images, each a rectangle, a turned rectangle and a polygon (a quad where the format takes 4 corners
    only), apart from one another; splits train and val."""
    out = []
    for i, deg in enumerate((30, -20, 115)):
        quad = ((70 + i, 44), (92, 48), (88, 70), (66, 66))
        poly = quad if fmt in ("dota", "yolo_obb") else ((70 + i, 44), (92, 46), (94, 60), (84, 72), (66, 64))
        out.append(Img(f"s{i}.png", 80, 100, (Shape("car", (6 + i, 6, 30, 24 + i), RED),
                                              Rot("plane", 38, 52, 30 - i, 12, deg, BLUE),
                                              Shape("ship", poly, GREEN)), split="train" if i < 2 else "val"))
    return out


def _pixels(rgb: np.ndarray, colour) -> np.ndarray:
    return np.all(np.abs(rgb.astype(int) - np.asarray(colour)) <= 40, axis=-1)


def _records(folder) -> list[dict]:
    out = []
    for shard in sorted(folder.glob("*.tfrecord")):
        for raw in tf.data.TFRecordDataset(str(shard)):
            f = tf.train.Example.FromString(raw.numpy()).features.feature
            out.append({"pixels": tf.io.decode_png(f["image/encoded"].bytes_list.value[0]).numpy(),
                        "texts": [t.decode() for t in f["image/object/class/text"].bytes_list.value],
                        "masks": list(f["image/object/mask"].bytes_list.value)})
    return out


@pytest.mark.parametrize("fmt", sorted(WRITERS))
def test_an_export_through_a_job_keeps_each_shape_on_its_pixels(tmp_path, fmt):
    job = tmp_path / "job"
    written = WRITERS[fmt](str(job), scenes(fmt))
    # read: every object with its class; each polygon's area within 3 % of its drawn pixels
    read = read_job(str(job), fmt)
    assert read.format == fmt and read.rejected == {} and len(read.annotations) == 3
    assert detect_format(str(job)) == ("yolo" if fmt == "yolo_obb" else fmt)   # YOLO-OBB: named only
    assert set(read.splits.values()) == {"train", "validation"}
    for rel, ann in read.annotations.items():
        rgb = cv2.imread(str(job / rel))[:, :, ::-1]
        assert sorted(o.name for o in ann.objects) == ["car", "plane", "ship"], rel
        for o in ann.objects:
            hit = _pixels(rgb, COLOURS[o.name])
            ys, xs = np.nonzero(hit)
            # the pixels painted are those whose centres lie inside: their extent is the shape's within a pixel
            assert np.allclose(o.box, (xs.min(), ys.min(), xs.max() + 1, ys.max() + 1), atol=1.0), (fmt, rel, o)
            if o.name == "car" and fmt not in ("dota", "yolo_obb"):   # theirs: 4 corners, an unturned box too
                assert not o.polygons
            else:
                assert abs(polygon_area(o.polygons[0]) - hit.sum()) <= 0.03 * hit.sum(), (fmt, rel, o.name)
    # through a real job: records whose masks hold each object's pixels, and augd.data.load's boxes around them
    result = run_job(str(job), parse_pipeline(PIPELINE.replace("FORMAT", fmt)), str(tmp_path / "out"),
                     JobOptions(name="t", workers=1))
    manifest = json.loads((tmp_path / "out" / "t" / "manifest.json").read_text())
    assert manifest["inputs"]["rejected"] == 0 and manifest["inputs"]["written"] == 3, manifest["inputs"]
    records = _records(tmp_path / "out" / "t")
    assert len(records) == manifest["records"]["written"] == 5   # validation images are not augmented
    for r in records:
        assert sorted(r["texts"]) == ["car", "plane", "ship"]
        for name, png in zip(r["texts"], r["masks"]):
            mask = tf.io.decode_png(png, channels=1).numpy()[..., 0] > 0
            hit = _pixels(r["pixels"], COLOURS[name])
            assert abs(int(mask.sum()) - int(hit.sum())) <= 0.03 * hit.sum(), (fmt, name, mask.sum(), hit.sum())
            assert (mask & hit).sum() >= 0.97 * hit.sum(), (fmt, name)
    ds = augd.data.load(result.out_dir, "train+validation", image_size=(80, 100), batch_size=None, boxes="padded",
                        max_boxes=4, bounding_box_format="xyxy")
    names = {int(k): v for k, v in re.findall(r"id: (\d+)\s+name: '(\w+)'",
                                             (tmp_path / "out" / "t" / "label_map.pbtxt").read_text())}
    seen = 0
    for image, target in ds:
        image = np.round(image.numpy() * 255).astype(int) if image.dtype != tf.uint8 else image.numpy()
        for box, label in zip(target["boxes"].numpy(), target["labels"].numpy()):
            if label < 0:
                continue
            name = names[int(label)]
            ys, xs = np.nonzero(_pixels(image, COLOURS[name]))
            assert abs(box[0] - xs.min()) <= 1 and abs(box[2] - (xs.max() + 1)) <= 1, (fmt, name, box)
            assert abs(box[1] - ys.min()) <= 1 and abs(box[3] - (ys.max() + 1)) <= 1, (fmt, name, box)
            seen += 1
    assert seen == 15
    assert set(written) == set(read.annotations)


def test_labelme_points_grouped_with_a_shape_are_its_keypoints_through_a_mirror(tmp_path):
    """LabelMe's `point` shapes sharing a group_id with one rectangle are that object's keypoints, named by their
    labels: through a job with random mirrors, each record's left_light lies on the marker now at the left (the
    mirror swaps left_ and right_ names, as COCO's), right_light on the other; an ungrouped point rejects its
    image."""
    yellow, cyan = (240, 240, 20), (20, 240, 240)
    job = tmp_path / "job"
    labelme_job(str(job), [Img(f"k{i}.png", 60, 80, (Shape("car", (10 + i, 20, 60, 44), RED),)) for i in range(4)])
    for i in range(4):
        png = job / f"k{i}.png"
        rgb = cv2.imread(str(png))[:, :, ::-1].copy()
        rgb[30:32, 14 + i:16 + i] = yellow      # left light: pixels 14..15 (+i), centre x = 15 + i
        rgb[30:32, 52:54] = cyan                # right light: centre x = 53
        cv2.imwrite(str(png), rgb[:, :, ::-1].copy())
        doc = json.loads((job / f"k{i}.json").read_text())
        doc["shapes"][0]["group_id"] = 7
        doc["shapes"] += [{"label": "right_light", "shape_type": "point", "points": [[53, 31]], "group_id": 7},
                          {"label": "left_light", "shape_type": "point", "points": [[15 + i, 31]], "group_id": 7}]
        if i == 3:
            doc["shapes"][-1]["group_id"] = None
        (job / f"k{i}.json").write_text(json.dumps(doc))
    read = read_job(str(job), "labelme")
    assert read.keypoints.names == ("left_light", "right_light") and read.keypoints.flip == (1, 0)
    assert read.keypoints.classes == ("car",)
    assert "k3.json: shapes[2] (left_light): a point shape; a point is no object" in read.rejected["k3.png"]
    assert read.annotations["k0.png"].objects[0].keypoints == ((15.0, 31.0, 2), (53.0, 31.0, 2))
    spec = parse_pipeline(PIPELINE.replace("FORMAT", "labelme").replace("variants: 1", "variants: 4"))
    run_job(str(job), spec, str(tmp_path / "out"), JobOptions(name="k", workers=1))
    flipped = 0
    for shard in sorted((tmp_path / "out" / "k").glob("*.tfrecord")):
        for raw in tf.data.TFRecordDataset(str(shard)):
            f = tf.train.Example.FromString(raw.numpy()).features.feature
            rgb = tf.io.decode_png(f["image/encoded"].bytes_list.value[0]).numpy()
            h, w = rgb.shape[:2]
            xs = [x * w for x in f["image/object/keypoint/x"].float_list.value]
            ys = [y * h for y in f["image/object/keypoint/y"].float_list.value]
            assert list(f["image/object/keypoint/visibility"].int64_list.value) == [2, 2]
            assert xs[0] < xs[1], xs
            for x, y in zip(xs, ys):   # each point on a marker's 2x2 pixels (their shared corner)
                marker = rgb[round(y) - 1:round(y) + 1, round(x) - 1:round(x) + 1].reshape(-1, 3).tolist()
                assert all(tuple(p) in (yellow, cyan) for p in marker), (x, y, marker)
            flipped += tuple(rgb[round(ys[0]), round(xs[0])]) == cyan
    assert flipped > 0, "a mirror put the cyan light on the left at least once"
