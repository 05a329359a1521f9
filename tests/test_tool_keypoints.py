"""Keypoints as the annotation tools export them (tests/exports.py writes each as the tool does): CVAT's one-point
<points> grouped with a box and its skeletons (framed by a grouped box, or by their points alone), Label Studio's
keypointlabels related to their rectangle (a relation either way, or parentID). Truth in the pixels: each point is
a 4x4 dot of its own hue on a grey object; through a real job with mirrors and turns, each record's labelled point
lies on the hue of its dot (the mirrored one's partner on a mirror: left_ and right_ swap, COCO's rule), an
occluded point keeps visibility 1 on its dot, and a point not labelled stays 0 0 0."""
from __future__ import annotations

import colorsys
import json

import numpy as np
import pytest
import tensorflow as tf

from augd.annotations.layout import read_job
from augd.job import JobOptions, run_job
from augd.schema import parse_pipeline
from tests.annotated import Img, Shape
from tests.exports import Keyed, cvat_job, label_studio_job

YELLOW, CYAN, MAGENTA, GREEN, ORANGE = (255, 255, 0), (0, 255, 255), (255, 0, 255), (0, 255, 0), (255, 128, 0)
GREY, LIGHT = (120, 120, 120), (190, 190, 190)
PIPELINE = """name: kp
seed: 5
variants: 4
keep_original: true
output: {format: png, shards: 1}
annotations: {format: FORMAT, min_visibility: 0, min_size: 1}
ops:
  - random_flip_left_right: {}
  - random_rotation: {degrees: [-12, 12]}
"""


def _car(i: int, link: str = "relation") -> Keyed:
    """A grey car whose lights are grouped points: the left one yellow, the right one cyan."""
    return Keyed(Shape("car", (8, 10, 52, 42), GREY),
                 (("left_light", 14 + i, 30, 2, YELLOW), ("right_light", 46, 30, 2, CYAN)), link=link)


def _face(framed: bool) -> Keyed:
    """A skeleton `face`: left eye magenta (visible), right eye green (occluded), nose orange (outside: not
    labelled); framed by a light `head` box, or by its points alone (then the nose is labelled, for an extent)."""
    nose = ("nose", 75, 40, 0 if framed else 2, ORANGE)
    return Keyed(Shape("head", (60, 8, 90, 56), LIGHT) if framed else None,
                 (("left_eye", 68, 20, 2, MAGENTA), ("right_eye", 82, 20, 1, GREEN), nose), skeleton="face")


def _hue(rgb) -> float:
    h, s, v = colorsys.rgb_to_hsv(*(np.asarray(rgb, float) / 255))
    return h * 360 if s > 0.5 and v > 0.5 else -1.0   # grey, black or a blur of them: no hue


HUES = {c: _hue(c) for c in (YELLOW, CYAN, MAGENTA, GREEN, ORANGE)}


def _on(rgb: np.ndarray, x: float, y: float):
    """The dot colour whose hue the 2x2 pixels around the point (x, y) (pixel edges) share, else None."""
    cx, cy = int(round(x)), int(round(y))
    patch = rgb[max(cy - 1, 0):cy + 1, max(cx - 1, 0):cx + 1].reshape(-1, 3).mean(axis=0)
    hue = _hue(patch)
    near = [c for c, h in HUES.items() if hue >= 0 and min(abs(hue - h), 360 - abs(hue - h)) <= 12]
    return near[0] if near else None


def _records(folder) -> list[dict]:
    out = []
    for shard in sorted(folder.glob("*.tfrecord")):
        for raw in tf.data.TFRecordDataset(str(shard)):
            f = tf.train.Example.FromString(raw.numpy()).features.feature
            rgb = tf.io.decode_png(f["image/encoded"].bytes_list.value[0]).numpy()
            h, w = rgb.shape[:2]
            pts = list(zip((x * w for x in f["image/object/keypoint/x"].float_list.value),
                           (y * h for y in f["image/object/keypoint/y"].float_list.value),
                           f["image/object/keypoint/visibility"].int64_list.value))
            texts = [t.decode() for t in f["image/object/class/text"].bytes_list.value]
            k = len(pts) // max(len(texts), 1)
            out.append({"rgb": rgb, "points": {t: pts[j * k:(j + 1) * k] for j, t in enumerate(texts)}})
    return out


def _check(records: list[dict], names: tuple, pairs: dict) -> int:
    """Every labelled point on a dot of its own pair's hues, the left one left of the right one; returns how many
    records show a mirror (a left_ point on the colour drawn for its right_ partner)."""
    mirrored = 0
    for r in records:
        for cls, pts in r["points"].items():
            if cls not in pairs:
                assert all(v == 0 for *_, v in pts), (cls, pts)   # an object without points: all not labelled
                continue
            got = {}
            for name, (x, y, v) in zip(names, pts):
                if v == 0:
                    assert (x, y) == (0, 0), (name, x, y)
                    continue
                got[name] = (x, y, v, _on(r["rgb"], x, y))
            for left, (lc, rc) in pairs[cls].items():
                right = left.replace("left", "right")
                (lx, _, lv, lon), (rx, _, rv, ron) = got[left], got[right]
                assert lx < rx and {lon, ron} == {lc, rc}, (cls, got)
                mirrored += lon == rc
                # the occlusion flag travels with its dot: the green eye is the occluded one
                assert cls != "face" or (lv, rv) == ((1, 2) if lon == GREEN else (2, 1)), got
    return mirrored


def _run(tmp_path, fmt: str) -> list[dict]:
    spec = parse_pipeline(PIPELINE.replace("FORMAT", fmt))
    run_job(str(tmp_path / "job"), spec, str(tmp_path / "out"), JobOptions(name="kp", workers=1))
    manifest = json.loads((tmp_path / "out" / "kp" / "manifest.json").read_text())
    assert manifest["inputs"]["rejected"] == 0, manifest["inputs"]
    return _records(tmp_path / "out" / "kp")


def test_cvat_grouped_points_and_skeletons_are_keypoints_on_their_dots_through_mirrors_and_turns(tmp_path):
    images = [Img(f"c{i}.png", 64, 96, (_car(i), _face(framed=i % 2 == 0))) for i in range(4)]
    cvat_job(str(tmp_path / "job"), images)
    read = read_job(str(tmp_path / "job"), "cvat")
    assert read.rejected == {}
    # the skeleton's points in <meta>'s order (written in reverse inside each <skeleton>), then the grouped points
    names = ("left_eye", "right_eye", "nose", "left_light", "right_light")
    assert read.keypoints.names == names and read.keypoints.flip == (1, 0, 2, 4, 3)
    assert read.keypoints.classes == ("car", "face")
    # head frames face and is no object; the label map: the classes, not the point labels
    assert sorted(read.label_map.names()) == ["car", "face", "head"]
    framed = read.annotations["images/c0.png"].objects
    assert [o.name for o in framed] == ["car", "face"] and framed[1].box == (60, 8, 90, 56)
    assert framed[1].keypoints == ((68, 20, 2), (82, 20, 1), (0, 0, 0), (0, 0, 0), (0, 0, 0))
    assert framed[0].keypoints == ((0, 0, 0),) * 3 + ((14, 30, 2), (46, 30, 2))
    bare = read.annotations["images/c1.png"].objects[1]   # no box: the extent of its labelled points
    assert bare.box == (68, 20, 82, 40) and bare.keypoints[2] == (75, 40, 2)
    records = _run(tmp_path, "cvat")
    assert len(records) == 4 * 5
    mirrored = _check(records, names, {"car": {"left_light": (YELLOW, CYAN)},
                                       "face": {"left_eye": (MAGENTA, GREEN)}})
    assert 0 < mirrored < 2 * len(records), mirrored
    for r in records:   # the nose: not labelled where the head frames the face, on its orange dot elsewhere
        nose = r["points"]["face"][2]
        assert nose[2] == 0 or _on(r["rgb"], nose[0], nose[1]) == ORANGE, nose


@pytest.mark.parametrize("link", ["relation", "back", "parent"])
def test_label_studio_keypoints_of_a_region_are_on_their_dots_through_mirrors_and_turns(tmp_path, link):
    images = [Img(f"l{i}.png", 64, 96, (_car(i, link), Shape("ship", (62, 12, 88, 50), LIGHT)))
              for i in range(3)]
    label_studio_job(str(tmp_path / "job"), images)
    read = read_job(str(tmp_path / "job"), "label_studio")
    assert read.rejected == {}
    assert read.keypoints.names == ("left_light", "right_light") and read.keypoints.flip == (1, 0)
    assert read.keypoints.classes == ("car",)
    car, ship = read.annotations["images/l2.png"].objects
    assert np.allclose(car.keypoints, ((16, 30, 2), (46, 30, 2))) and ship.keypoints == ()
    records = _run(tmp_path, "label_studio")
    assert len(records) == 3 * 5
    mirrored = _check(records, ("left_light", "right_light"), {"car": {"left_light": (YELLOW, CYAN)}})
    assert 0 < mirrored < len(records), mirrored


def _edit(path, old: str, new: str, count: int = 1) -> None:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, count))


def _results(path, fn) -> None:
    doc = json.loads(path.read_text())
    fn(doc[0]["annotations"][0]["result"])
    path.write_text(json.dumps(doc).replace('"INFINITE"', "1e400"))


CV_SKEL = '<skeleton label="face" source="manual" z_order="0" group_id="2">'
#: (format, the spoiling of the first image's keypoints, a fragment of the message that rejects it). CVAT's first
#: image: <box> 1 car (group 1), <points> 2 and 3 its lights, <box> 4 head (group 2), <skeleton> 5 face.
HOSTILE = {
    "cvat sub-label not in meta": ("cvat", lambda p: _edit(p, '<points label="nose"', '<points label="chin"'),
                                   "annotations.xml: c0.png: <skeleton> 5 (face): <points> 1 (chin): 'chin' is not "
                                   "a point of skeleton 'face' in <meta> (left_eye, right_eye, nose)"),
    "cvat two points of one name": ("cvat", lambda p: _edit(p, '<points label="right_light"',
                                                            '<points label="left_light"'),
                                    "annotations.xml: c0.png: <points> 3 (left_light): group_id 1 has two points "
                                    "named 'left_light'"),
    "cvat two skeleton points of one name": ("cvat", lambda p: _edit(p, '<points label="nose"',
                                                                     '<points label="left_eye"'),
                                             "<skeleton> 5 (face): <points> 3 (left_eye): the skeleton has two "
                                             "points named 'left_eye'"),
    "cvat a group of two boxes": ("cvat", lambda p: _edit(p, CV_SKEL, '<box label="head" xtl="1" ytl="1" xbr="5" '
                                                                      'ybr="5" group_id="2"></box>' + CV_SKEL),
                                  "annotations.xml: c0.png: group_id 2 holds 2 boxes or polygons and a skeleton; "
                                  "a group is one object"),
    "cvat non-finite point": ("cvat", lambda p: _edit(p, 'points="14.00,30.00"', 'points="nan,30.00"'),
                              "annotations.xml: c0.png: <points> 2 (left_light): points[0] x is 'nan', not a finite "
                              "number"),
    "cvat ungrouped point": ("cvat", lambda p: _edit(p, 'points="14.00,30.00" z_order="0" group_id="1"',
                                                     'points="14.00,30.00" z_order="0"'),
                             "<points> 2 (left_light): a points shape; a point is no object; augd reads keypoints "
                             "only as points of an object (COCO person keypoints, YOLO pose, LabelMe and CVAT points "
                             "grouped with their shape, CVAT skeletons, Label Studio keypoints related to their "
                             "region): give the point the group_id of its object's box or polygon"),
    "cvat several points in one": ("cvat", lambda p: _edit(p, 'points="14.00,30.00"', 'points="14,30;20,30"'),
                                   "<points> 2 (left_light): a points shape; a point is no object; augd reads "
                                   "keypoints only as points of an object (COCO person keypoints, YOLO pose, LabelMe "
                                   "and CVAT points grouped with their shape, CVAT skeletons, Label Studio keypoints "
                                   "related to their region): this one holds 2 points"),
    "cvat skeleton with nothing labelled": ("cvat", lambda p: _edit(p, 'outside="0"', 'outside="1"', 2),
                                            "<skeleton> 5 (face): a skeleton with no labelled point"),
    "cvat outside 2": ("cvat", lambda p: _edit(p, 'outside="0"', 'outside="2"'),
                       "<skeleton> 5 (face): <points> 2 (right_eye): outside is '2'; it must be 0 or 1"),
    "ls related to nothing": ("label_studio", lambda p: _results(p, lambda rs: [rs.remove(r) for r in list(rs)
                                                                                if r["type"] == "relation"]),
                              "export.json: task 1 (id 1): result[1]: a keypointlabels shape; a point is no object"
                              "; augd reads keypoints only as points of an object (COCO person keypoints, YOLO pose, "
                              "LabelMe and CVAT points grouped with their shape, CVAT skeletons, Label Studio "
                              "keypoints related to their region): relate the keypoint to its object's rectangle or "
                              "polygon"),
    "ls related to two": ("label_studio", lambda p: _results(p, lambda rs: rs.append(
        {"from_id": "r1", "to_id": "k0_0", "type": "relation", "direction": "right", "labels": []})),
        "export.json: task 1 (id 1): result[1] (left_light): a keypoint related to 2 rectangles or polygons"),
    "ls two of one name": ("label_studio", lambda p: _results(p, lambda rs: rs[3]["value"].update(
        keypointlabels=["left_light"])),
        "export.json: task 1 (id 1): result[3] (left_light): its region has two keypoints named 'left_light'"),
    "ls non-finite": ("label_studio", lambda p: _results(p, lambda rs: rs[1]["value"].update(x="INFINITE")),
                      "export.json: task 1 (id 1): result[1] (left_light): x is inf; it must be a finite number"),
    "ls parent of nothing": ("label_studio", lambda p: _results(p, lambda rs: [
        rs.remove(r) for r in list(rs) if r["type"] == "relation"] and rs[1].update(parentID="zz")),
        "relate the keypoint to its object's rectangle or polygon (a relation between the two regions), or remove "
        "it (its parentID 'zz' names no rectangle or polygon of this annotation)"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_bad_keypoint_rejects_its_image_naming_the_file_the_shape_and_what_is_allowed(tmp_path, case):
    fmt, spoil, message = HOSTILE[case]
    job = tmp_path / "job"
    if fmt == "cvat":
        cvat_job(str(job), [Img(f"c{i}.png", 64, 96, (_car(i), _face(framed=True))) for i in range(3)])
        spoil(job / "annotations.xml")
    else:
        label_studio_job(str(job), [Img(f"c{i}.png", 64, 96, (_car(i), Shape("ship", (62, 12, 88, 50), LIGHT)))
                                    for i in range(3)])
        spoil(job / "export.json")
    read = read_job(str(job), fmt)
    assert list(read.rejected) == ["images/c0.png"], read.rejected
    assert message in read.rejected["images/c0.png"], read.rejected
    assert sorted(read.annotations) == ["images/c1.png", "images/c2.png"]
    assert all(o.keypoints for a in read.annotations.values() for o in a.objects if o.name in ("car", "face"))
