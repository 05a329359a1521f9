"""The annotation tools' exports as careless tools and attackers write them: each bad file, shape or task rejects
its image (or, for an export that cannot be read at all, fails the job) with a message naming the file, the line,
shape or task, and the value; the other images are read. Bounded like every reader: file sizes, JSON depth, no XML
DTD or entity, finite numbers only, image paths inside the job. TensorFlow-free."""
from __future__ import annotations

import json
import os
import re
import shutil

import pytest

from augd.annotations import AnnotationError
from augd.annotations.layout import read_job
from tests.test_tool_exports import WRITERS, scenes


def _edit(path: str, fn) -> None:
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    new = fn(text)
    assert new != text, path
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(new)


def _json(path: str, fn) -> None:
    with open(path) as fh:
        doc = json.load(fh)
    fn(doc)
    with open(path, "w") as fh:
        json.dump(doc, fh)


def _first_line(fn):
    return lambda text: "\n".join([fn(ln) if k == 2 else ln for k, ln in enumerate(text.split("\n"))])


def _sparse(path: str, size: int) -> None:
    with open(path, "r+b") as fh:
        fh.truncate(size)


DOTA, OBB = "labelTxt/train/s0.txt", "labels/train/s0.txt"
LM = "train/s0.json"
CV, LS = "annotations.xml", "export.json"
S0 = {"dota": "images/train/s0.png", "yolo_obb": "images/train/s0.png", "labelme": "train/s0.png",
      "cvat": "images/train/s0.png", "label_studio": "images/train/s0.png"}


#: (format, what is done to the job, the key rejected, a fragment of its message)
CASES = {
    "dota nan": ("dota", lambda r: _edit(f"{r}/{DOTA}", _first_line(lambda ln: "nan" + ln[ln.index(" "):])),
                 S0["dota"], "labelTxt/train/s0.txt: line 3 (car): value 1 is 'nan', not a finite number"),
    "dota fields": ("dota", lambda r: _edit(f"{r}/{DOTA}", _first_line(lambda ln: "1 2 3 4 5 6 car")),
                    S0["dota"], "line 3: 7 fields; a DOTA line is `x1 y1 x2 y2 x3 y3 x4 y4 class difficult`"),
    "dota difficult": ("dota", lambda r: _edit(f"{r}/{DOTA}", _first_line(lambda ln: ln[:-1] + "2")),
                       S0["dota"], "difficult is '2'; it must be 0 or 1"),
    "dota no area": ("dota", lambda r: _edit(f"{r}/{DOTA}", _first_line(lambda ln: "5 5 5 5 9 9 9 9 car 0")),
                     S0["dota"], "the oriented box [(5, 5), (5, 5), (9, 9), (9, 9)] encloses no area"),
    "dota outside": ("dota", lambda r: _edit(f"{r}/{DOTA}", _first_line(lambda ln: "5 5 500 5 500 9 5 9 car 0")),
                     S0["dota"], "line 3 (car): box (5, 5, 500, 9) passes the border of the 100x80 image"),
    "dota huge": ("dota", lambda r: _sparse(f"{r}/{DOTA}", 17 * 1024 * 1024), S0["dota"],
                  "exceeds the 16 MiB limit for DOTA label files (EXPORT_TEXT_MAX_BYTES)"),
    "dota orphan": ("dota", lambda r: shutil.copy(f"{r}/{DOTA}", f"{r}/labelTxt/train/zz.txt"),
                    "labelTxt/train/zz.txt", "an annotation for a missing image: no train/zz.* in images/"),
    "obb a yolo box": ("yolo_obb", lambda r: _edit(f"{r}/{OBB}", lambda t: "0 0.5 0.5 0.2 0.2\n" + t),
                       S0["yolo_obb"], "labels/train/s0.txt: line 1: 5 fields; a YOLO-OBB line is `class x1 y1"),
    "obb class": ("yolo_obb", lambda r: _edit(f"{r}/{OBB}", lambda t: "7" + t[1:]),
                  S0["yolo_obb"], "line 1: class 7 is not a class index 0..2"),
    "labelme point": ("labelme", lambda r: _json(f"{r}/{LM}", lambda d: d["shapes"].append(
        {"label": "car", "shape_type": "point", "points": [[3, 3]]})), S0["labelme"],
        "train/s0.json: shapes[3] (car): a point shape; a point is no object"),
    "labelme circle": ("labelme", lambda r: _json(f"{r}/{LM}", lambda d: d["shapes"][0].update(shape_type="circle")),
                       S0["labelme"], "shapes[0] (car): a circle shape; augd reads rectangles, rotated rectangles"),
    "labelme link out": ("labelme", lambda r: os.replace(f"{r}/{LM}", f"{r}/../outside.json") or
                         os.symlink(os.path.abspath(f"{r}/../outside.json"), f"{r}/{LM}"), S0["labelme"],
                         "train/s0.json: a link to a file outside the job folder"),
    "labelme label": ("labelme", lambda r: _json(f"{r}/{LM}", lambda d: d["shapes"][1].update(label=" car")),
                      S0["labelme"], "shapes[1]: label is ' car'; it must be a class name"),
    "labelme nan": ("labelme", lambda r: _edit(f"{r}/{LM}", lambda t: t.replace("80,", "NaN,", 1)), S0["labelme"],
                    "NaN and Infinity are not JSON"),
    "labelme deep": ("labelme", lambda r: _edit(f"{r}/{LM}", lambda t: t[:-1] + ', "x": ' + "[" * 500 + "]" * 500
                                                + "}"), S0["labelme"], "JSON nesting deeper than"),
    "labelme size": ("labelme", lambda r: _json(f"{r}/{LM}", lambda d: d.update(imageHeight=81)), S0["labelme"],
                     "train/s0.json: states the image is 100x81 (width x height) but train/s0.png is 100x80"),
    "labelme text number": ("labelme", lambda r: _json(f"{r}/{LM}", lambda d: d["shapes"][2]["points"][0].__setitem__(
        0, "70")), S0["labelme"], "shapes[2] (ship): points[0] x is '70'; it must be a finite number"),
    "cvat climbs": ("cvat", lambda r: _edit(f"{r}/{CV}", lambda t: t.replace('name="train/s0.png"',
                                                                              'name="../../etc/s0.png"')),
                    CV, "annotations.xml: <image> 1 (id 0): the name '../../etc/s0.png' is not a path inside the job"),
    "cvat label": ("cvat", lambda r: _edit(f"{r}/{CV}", lambda t: t.replace('label="car"', 'label="bus"', 1)),
                   S0["cvat"], "annotations.xml: train/s0.png: <box> 1 (bus): label 'bus' is not one of <meta>'s"),
    "cvat points": ("cvat", lambda r: _edit(f"{r}/{CV}", lambda t: t.replace(
        "</image>", '<points label="car" points="3,3;5,5"></points></image>', 1)), S0["cvat"],
        "<points> 4 (car): a points shape; a point is no object"),
    "cvat rotation": ("cvat", lambda r: _edit(f"{r}/{CV}", lambda t: re.sub(r'rotation="[^"]*"', 'rotation="inf"',
                                                                            t, count=1)),
                      S0["cvat"], "<box> 2 (plane): rotation is 'inf', not a finite number"),
    "cvat missing image": ("cvat", lambda r: os.remove(f"{r}/images/train/s1.png"), CV,
                           "annotations.xml: <image> 'train/s1.png' is not in the job folder"),
    "cvat unlisted image": ("cvat", lambda r: os.link(f"{r}/images/train/s1.png", f"{r}/images/train/s9.png"),
                            "images/train/s9.png", "images/train/s9.png: no <image> of annotations.xml names it: "
                                                   "not annotated"),
    "cvat size": ("cvat", lambda r: _edit(f"{r}/{CV}", lambda t: t.replace('width="100"', 'width="99"', 1)),
                  S0["cvat"], "annotations.xml: states the image is 99x80 (width x height) but images/train/s0.png"),
    "ls climbs": ("label_studio", lambda r: _json(f"{r}/{LS}", lambda d: d[0]["data"].update(
        image="/data/local-files/?d=../../s0.png")), LS, "export.json: task 1 (id 1): the image reference "
                                                         "'/data/local-files/?d=../../s0.png' climbs with .."),
    "ls two annotators": ("label_studio", lambda r: _json(f"{r}/{LS}", lambda d: d[0]["annotations"].append(
        d[0]["annotations"][0])), S0["label_studio"], "task 1 (id 1): annotations (not cancelled): 2, from several"),
    "ls keypoint": ("label_studio", lambda r: _json(f"{r}/{LS}", lambda d: d[0]["annotations"][0]["result"].append(
        {"type": "keypointlabels", "value": {"x": 1, "y": 2, "width": 1, "keypointlabels": ["car"]}})),
        S0["label_studio"], "task 1 (id 1): result[3]: a keypointlabels shape; a point is no object"),
    "ls turned image": ("label_studio", lambda r: _json(f"{r}/{LS}", lambda d: d[0]["annotations"][0]["result"][1]
                                                        .update(image_rotation=90)),
                        S0["label_studio"], "result[1]: image_rotation is 90: the image was turned in the editor"),
    "ls size": ("label_studio", lambda r: _json(f"{r}/{LS}", lambda d: [x.update(original_width=200) for x in
                                                                         d[0]["annotations"][0]["result"]]),
                S0["label_studio"], "export.json: states the image is 200x80 (width x height)"),
    "ls missing image": ("label_studio", lambda r: _json(f"{r}/{LS}", lambda d: d[0]["data"].update(
        image="/data/upload/1/00000000-nowhere.png")), LS,
        "task 1 (id 1): the image reference '/data/upload/1/00000000-nowhere.png' names no image in the job"),
    "ls unlisted image": ("label_studio", lambda r: _json(f"{r}/{LS}", lambda d: d.pop(1)), "images/train/s1.png",
                          "images/train/s1.png: no task of export.json names it: not annotated"),
    "ls twice": ("label_studio", lambda r: _json(f"{r}/{LS}", lambda d: d.append(dict(d[0], id=9))),
                 S0["label_studio"], "export.json: task 4 (id 9): images/train/s0.png is also the image of "
                                     "export.json: task 1 (id 1)"),
    "ls text number": ("label_studio", lambda r: _json(f"{r}/{LS}", lambda d: d[0]["annotations"][0]["result"][0]
                                                       ["value"].update(x="10")),
                       S0["label_studio"], "result[0] (car): x is '10'; it must be a finite number"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_bad_export_rejects_its_image_with_a_reason_naming_the_file_the_shape_and_the_value(tmp_path, case):
    fmt, spoil, key, message = CASES[case]
    root = str(tmp_path / "job")
    WRITERS[fmt](root, scenes(fmt))
    spoil(root)
    job = read_job(root, fmt)
    assert key in job.rejected, (case, job.rejected)
    assert message in job.rejected[key], (case, job.rejected[key])
    others = [i for i in job.annotations if i != key]
    assert len(others) >= 2 - (case in ("cvat missing image", "ls unlisted image")), (case, job.rejected)
    assert all(len(job.annotations[i].objects) == 3 for i in others)


#: An export that cannot be read at all fails the job (bad_labels), naming the file and the limit or the value.
WHOLE = {
    "cvat dtd": ("cvat", lambda r: _edit(f"{r}/{CV}", lambda t: t.replace(
        "<annotations>", '<!DOCTYPE annotations [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;">]><annotations>',
        1)), "annotations.xml: refused: a DTD (<!DOCTYPE annotations ...>)"),
    "cvat version": ("cvat", lambda r: _edit(f"{r}/{CV}", lambda t: t.replace("<version>1.1", "<version>1.0")),
                     "annotations.xml: CVAT XML version '1.0'; augd reads CVAT for images 1.1"),
    "cvat broken": ("cvat", lambda r: _edit(f"{r}/{CV}", lambda t: t[:len(t) // 2]),
                    "annotations.xml:2: invalid XML: unclosed token"),
    "ls huge": ("label_studio", lambda r: _sparse(f"{r}/{LS}", 600 * 1024 * 1024), "export.json: refused"),
    "cvat link out": ("cvat", lambda r: os.replace(f"{r}/{CV}", f"{r}/../outside.xml") or
                      os.symlink(os.path.abspath(f"{r}/../outside.xml"), f"{r}/{CV}"),
                      "annotations.xml: a link to a file outside the job folder"),
    "ls link out": ("label_studio", lambda r: os.replace(f"{r}/{LS}", f"{r}/../outside.json") or
                    os.symlink(os.path.abspath(f"{r}/../outside.json"), f"{r}/{LS}"),
                    "export.json: a link to a file outside the job folder"),
    "ls not an export": ("label_studio", lambda r: _json(f"{r}/{LS}", lambda d: d.__setitem__(0, 5)),
                         "export.json: not a Label Studio export"),
}


@pytest.mark.parametrize("case", sorted(WHOLE))
def test_an_export_that_cannot_be_read_fails_its_job_naming_the_file(tmp_path, case):
    fmt, spoil, message = WHOLE[case]
    root = str(tmp_path / "job")
    WRITERS[fmt](root, scenes(fmt))
    spoil(root)
    with pytest.raises(AnnotationError) as err:
        read_job(root, fmt)
    assert message in str(err.value)


def test_label_studio_ids_come_from_every_task_a_rejected_one_too(tmp_path):
    root = str(tmp_path / "job")
    WRITERS["label_studio"](root, scenes("label_studio"))
    _json(f"{root}/{LS}", lambda d: [r["value"].update(rectanglelabels=["airship"]) or r.update(image_rotation=90)
                                     for r in d[0]["annotations"][0]["result"][1:2]])
    job = read_job(root, "label_studio")
    assert "image_rotation" in job.rejected[S0["label_studio"]]
    assert list(job.label_map.ids) == ["airship", "car", "plane", "ship"]


def test_dota_difficult_is_voc_s_flag_and_headers_are_passed_over(tmp_path):
    root = str(tmp_path / "job")
    WRITERS["dota"](root, scenes("dota"))
    _edit(f"{root}/{DOTA}", _first_line(lambda ln: ln[:-1] + "1"))
    job = read_job(root, "dota")
    assert job.rejected == {}
    assert [o.difficult for o in job.annotations[S0["dota"]].objects] == [True, False, False]


#: One planted problem per format, for `augd check` (what a job would meet, by the same scan).
CHECKED = {"dota": "dota difficult", "yolo_obb": "obb class", "labelme": "labelme point", "cvat": "cvat label",
           "label_studio": "ls keypoint"}


@pytest.mark.parametrize("fmt", sorted(CHECKED))
def test_augd_check_names_the_format_counts_its_objects_and_lists_the_rejected_image(tmp_path, fmt):
    from augd.checkcmd import check_dataset

    _, spoil, key, message = CASES[CHECKED[fmt]]
    root = str(tmp_path / "job")
    WRITERS[fmt](root, scenes(fmt))
    spoil(root)
    report = check_dataset(root, fmt=fmt)
    assert report.kind == fmt
    assert {s: (v.images, v.rejected) for s, v in report.splits.items()} == {"train": (1, 1), "validation": (1, 0)}
    assert report.splits["validation"].objects == {"car": 1, "plane": 1, "ship": 1}
    assert [(p, r) for p, r, _ in report.rejected] == [(key, "bad_annotation")]
    assert message in report.rejected[0][2]
