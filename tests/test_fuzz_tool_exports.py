"""Seeded fuzzing of the tool exports' readers, as tests/test_fuzz_annotations.py does the others: a mutated file
(bytes flipped, cut short, tokens swapped for odd values, fields of other JSON types) may only be refused with the
reader's own error, AnnotationError, which rejects its image; any other exception would fail the whole job as a
crash. The CVAT and Label Studio documents hold keypoints (grouped points, skeletons, keypointlabels with relations
and parentID), so their rules are fuzzed too. AUGD_FUZZ_N sets the iterations per reader (default 1500)."""
from __future__ import annotations

import copy
import json
import os
import random

from augd.annotations.cvat import read_cvat
from augd.annotations.dota import read_dota
from augd.annotations.exports import ImageIndex
from augd.annotations.label_studio import _annotation
from augd.annotations.labelme import read_labelme
from augd.annotations.yolo_obb import read_yolo_obb
from tests.test_fuzz_annotations import ENCODINGS, JSON_VALUES, XML_TOKENS, YOLO_TOKENS, _flip, _refused_only

N = int(os.environ.get("AUGD_FUZZ_N", "1500"))
TOKENS = YOLO_TOKENS + ["car", "imagesource:x", "gsd:0.1", "gsd:nan", "", "1,2", "é"]


def _lines(rng: random.Random, widths) -> bytes:
    lines = [" ".join(rng.choice(TOKENS) for _ in range(rng.choice(widths))) for _ in range(rng.randrange(1, 4))]
    return "\n".join(lines).encode() if rng.random() < 0.9 else bytes(rng.randrange(256) for _ in range(30))


def test_fuzzed_dota_and_yolo_obb_labels_are_refused_with_annotation_errors_only(tmp_path):
    rng, path = random.Random(59), tmp_path / "x.txt"
    for _ in range(N):
        path.write_bytes(_lines(rng, [1, 8, 9, 10, 11, rng.randrange(20)]))
        _refused_only(lambda: read_dota(str(path), "labelTxt/x.txt"))
        _refused_only(lambda: read_yolo_obb(str(path), "labels/x.txt", ("a", "b"), (20, 30)))


LABELME = {"version": "5.4.1", "shapes": [
    {"label": "car", "shape_type": "rectangle", "points": [[1, 2], [9, 8]], "group_id": 1, "flags": {}},
    {"label": "left_eye", "shape_type": "point", "points": [[3, 4]], "group_id": 1},
    {"label": "ship", "shape_type": "polygon", "points": [[1, 2], [9, 2], [5, 9]]},
    {"label": "plane", "shape_type": "rotation", "points": [[1, 1], [5, 3], [4, 5], [0, 3]], "difficult": False}],
    "imagePath": "x.png", "imageData": None, "imageHeight": 20, "imageWidth": 30}
SHAPE_KEYS = ["label", "shape_type", "points", "difficult", "group_id"]
SHAPE_TYPES = ["rectangle", "polygon", "rotation", "point", "points", "circle", "line", "mask", None, 3]


def test_fuzzed_labelme_files_are_refused_with_annotation_errors_only(tmp_path):
    rng, path = random.Random(60), tmp_path / "x.json"
    for _ in range(N):
        doc = copy.deepcopy(LABELME)
        for _ in range(rng.randrange(1, 4)):
            shape = rng.choice(doc["shapes"])
            key = rng.choice(SHAPE_KEYS)
            value = rng.choice(SHAPE_TYPES) if key == "shape_type" and rng.random() < 0.5 else rng.choice(JSON_VALUES)
            shape[key] = copy.deepcopy(value)
        if rng.random() < 0.2:
            doc[rng.choice(["shapes", "imageHeight", "imageWidth"])] = copy.deepcopy(rng.choice(JSON_VALUES))
        data = json.dumps(doc).encode()
        path.write_bytes(_flip(rng, data) if rng.random() < 0.2 else data)
        _refused_only(lambda: read_labelme(str(path), "x.json"))


CVAT = ('<?xml version="1.0" encoding="utf-8"?>\n<annotations><version>1.1</version><meta><task><labels>'
        '<label><name>car</name></label><label><name>ship</name></label><label><name>face</name></label>'
        '<label><name>left_eye</name><parent>face</parent></label><label><name>nose</name><parent>face</parent>'
        '</label><label><name>light</name></label></labels></task></meta>'
        '<image id="0" name="a.png" width="30" height="20" subset="Train">'
        '<box label="car" xtl="1" ytl="2" xbr="9" ybr="8" rotation="30" group_id="1"></box>'
        '<points label="light" occluded="0" points="3,4" group_id="1"></points>'
        '<polygon label="ship" points="1,2;9,2;5,9" group_id="2"></polygon>'
        '<skeleton label="face" z_order="0" group_id="2"><points label="nose" outside="0" occluded="1" points="4,5">'
        '</points><points label="left_eye" outside="0" occluded="0" points="2,3"></points></skeleton>'
        '<skeleton label="face"><points label="nose" outside="0" occluded="0" points="7,8"></points>'
        '<points label="left_eye" outside="0" occluded="0" points="2,3"></points></skeleton></image></annotations>\n')
CVAT_TOKENS = [b'rotation="nan"', b'xtl="1e999"', b'points="1,2;;3"', b'points=""', b'name="../a.png"', b'name=""',
               b'label=""', b'<points label="car" points="1,1"/>', b'<tag label="car"/>', b"<track/>",
               b'width="-3"', b'width="x"', b"<image>", b"</image>", b'group_id="x"',
               b'group_id="99999999999999999999"', b'group_id="2"', b'outside="1"', b'outside="yes"', b'occluded="-1"',
               b'label="nose"', b'label="face"',
               b"<skeleton>", b"</skeleton>", b'points="nan,1"', b"<points/>"] + XML_TOKENS


def test_fuzzed_cvat_files_are_refused_with_annotation_errors_only(tmp_path):
    rng, path = random.Random(61), tmp_path / "annotations.xml"
    path.write_text(CVAT)   # unspoilt, it reads: the car's light, a framed skeleton, one framed by its points
    got = read_cvat(str(path), "annotations.xml")
    assert not got.rejected and [o.name for o in got.images[0][2].objects] == ["car", "face", "face"]
    for _ in range(N):
        data = CVAT.encode()
        kind = rng.randrange(4)
        if kind == 0:
            data = _flip(rng, data)
        elif kind == 1:
            tok = rng.choice([b'rotation="30"', b'xtl="1"', b'points="1,2;9,2;5,9"', b'name="a.png"', b"<box",
                              b'width="30"', b"<version>", b'label="car"', b'group_id="1"', b'group_id="2"',
                              b'outside="0"', b'occluded="1"', b'points="3,4"', b'label="nose"', b"<skeleton",
                              b"</points>", b"<parent>face</parent>"])
            data = data.replace(tok, rng.choice(CVAT_TOKENS), 1)
        elif kind == 2:
            data = data[:rng.randrange(len(data))]
        else:
            try:
                data = CVAT.replace("utf-8", rng.choice(ENCODINGS)).encode(rng.choice(ENCODINGS))
            except UnicodeEncodeError:
                pass
        path.write_bytes(data)
        _refused_only(lambda: read_cvat(str(path), "annotations.xml"))


TASK = {"id": 1, "data": {"image": "/data/upload/1/0000abcd-a.png"}, "annotations": [{"result": [
    {"type": "rectanglelabels", "original_width": 30, "original_height": 20, "image_rotation": 0,
     "value": {"x": 10, "y": 10, "width": 20, "height": 30, "rotation": 20, "rectanglelabels": ["car"]}},
    {"type": "polygonlabels", "original_width": 30, "original_height": 20, "id": "p",
     "value": {"points": [[1, 2], [50, 2], [20, 90]], "polygonlabels": ["ship"]}},
    {"type": "keypointlabels", "original_width": 30, "original_height": 20, "id": "k", "parentID": "p",
     "value": {"x": 20, "y": 30, "width": 1, "keypointlabels": ["left_eye"]}},
    {"type": "keypointlabels", "original_width": 30, "original_height": 20, "id": "j",
     "value": {"x": 25, "y": 35, "width": 1, "keypointlabels": ["nose"]}},
    {"type": "relation", "from_id": "p", "to_id": "j", "direction": "right", "labels": []}]}]}
NAMES = ("left_eye", "nose")
RESULT_KEYS = ["type", "original_width", "original_height", "image_rotation", "value", "id", "parentID", "from_id",
               "to_id"]
VALUE_KEYS = ["x", "y", "width", "height", "rotation", "rectanglelabels", "points", "polygonlabels",
              "keypointlabels"]
REFS = ["a.png", "../a.png", "/data/local-files/?d=..%2Fa.png", "s3://b/a.png", "http://h/x/a.png?d=", "", "?d=",
        "/data/upload/1/zzzzzzzz-a.png", "\x00", "a.png/..", "%2e%2e/a.png", "C:\\a.png", 5, None, ["a.png"]]


def test_fuzzed_label_studio_tasks_are_refused_with_annotation_errors_only():
    rng = random.Random(62)
    index = ImageIndex(["images/a.png", "images/train/b.png", "a.png"])
    kept = _annotation(TASK, "export.json: task 1", "export.json", (20, 30), NAMES).objects   # unspoilt, it reads
    assert kept[1].keypoints == ((6.0, 6.0, 2), (7.5, 7.0, 2)), kept
    for _ in range(N):
        task = copy.deepcopy(TASK)
        for _ in range(rng.randrange(1, 4)):
            r = rng.choice(task["annotations"][0]["result"])
            if rng.random() < 0.5:
                r[rng.choice(RESULT_KEYS)] = copy.deepcopy(rng.choice(JSON_VALUES + ["keypointlabels", "choices",
                                                                                     "relation", "p", "k"]))
            elif isinstance(r.get("value"), dict):
                r["value"][rng.choice(VALUE_KEYS)] = copy.deepcopy(rng.choice(JSON_VALUES))
        if rng.random() < 0.2:
            task[rng.choice(["annotations", "data"])] = copy.deepcopy(rng.choice(JSON_VALUES))
        _refused_only(lambda: _annotation(task, "export.json: task 1", "export.json", (20, 30), NAMES))
        _refused_only(lambda: index.find(rng.choice(REFS), "export.json: task 1"))
