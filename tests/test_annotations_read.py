"""Reading annotations (VOC, COCO, YOLO) and label maps, checked against real files: synthetic images whose coloured
regions are the objects (tests/annotated.py), decoded back to find where each colour is. Semantic masks and which
layout a folder is: tests/test_annotation_layouts.py."""
from __future__ import annotations

import dataclasses
import json
import os
import re

import cv2
import numpy as np
import pytest

from augd.annotations import Annotation, AnnotationError
from augd.annotations.coco import rle_decode
from augd.annotations.labelmap import LabelMap
from augd.annotations.layout import detect_format, read_job
from tests.annotated import (
    Img, Shape, boxes, coco_job, decoded, region_box, voc_job, voc_xml, yolo_job,
)

RED, GREEN, BLUE = (220, 30, 30), (30, 200, 30), (30, 30, 220)

# Odd cases on purpose: a box on the first pixel row/column, one ending at the last, a full-image box, a triangle.
IMAGES = [
    Img("a.png", 60, 80, [("dog", (0, 0, 20, 15), RED), ("cat", ((40, 10), (79, 12), (60, 59)), BLUE)], split="train"),
    Img("b.png", 50, 64, [("cat", (30, 20, 64, 50), GREEN), ("dog", (5, 5, 12, 9), RED)], split="val"),
    Img("c.jpg", 48, 48, [("bird", (0, 0, 48, 48), BLUE)], split="train"),
]


# ---------------------------------------------------------------------------------------------------------- VOC

@pytest.mark.parametrize("beside", [False, True])
def test_voc_boxes_match_the_pixels(tmp_path, beside):
    expect = voc_job(str(tmp_path), IMAGES, beside=beside)
    job = read_job(str(tmp_path))
    assert detect_format(str(tmp_path)) == "voc" and job.format == "voc" and job.rejected == {}
    assert job.label_map.ids == {"bird": 1, "cat": 2, "dog": 3}            # VOC: names sorted
    for rel, objs in expect.items():
        rgb = decoded(str(tmp_path / rel))
        got = boxes(job, rel)
        assert [n for n, _ in got] == [n for n, _ in objs]
        for (name, box), shape in zip(got, next(i for i in IMAGES if rel.endswith(i.name)).objects()):
            tol = 40 if rel.endswith(".jpg") else 0
            assert np.allclose(box, region_box(rgb, shape.colour, tol), atol=1 if tol or shape.is_polygon else 0)
    # VOC's 1-based, inclusive corners: the full-image box of c.jpg is xmin=1..xmax=48, i.e. edges 0..48
    c = "JPEGImages/c.jpg" if not beside else "train/c.jpg"
    assert boxes(job, c) == [("bird", (0.0, 0.0, 48.0, 48.0))]
    if beside:
        assert job.image_dirs == ("",) and {"train/a.xml", "val/b.xml", "train/c.xml"} <= job.skip
        assert job.splits == {"train/a.png": "train", "val/b.png": "validation", "train/c.jpg": "train"}
    else:
        assert job.image_dirs == ("JPEGImages",) and {"Annotations", "ImageSets"} <= job.skip
        assert job.splits == {"JPEGImages/a.png": "train", "JPEGImages/b.png": "validation",
                              "JPEGImages/c.jpg": "train"}


def test_voc_flags_negatives_and_fixed_label_map(tmp_path):
    img = Img("d.png", 30, 30, [Shape("dog", (1, 1, 10, 10), RED, difficult=True, truncated=True),
                                Shape("cat", (12, 12, 20, 20), GREEN)])
    voc_job(str(tmp_path), [img, Img("neg.png", 20, 20)], annotate={"d.png"})
    lm = LabelMap({"cat": 7, "dog": 3})
    job = read_job(str(tmp_path), "voc", label_map=lm)
    d = job.annotations["JPEGImages/d.png"].objects
    assert (d[0].difficult, d[0].truncated, d[1].difficult, d[1].truncated) == (True, True, False, False)
    assert job.annotations["JPEGImages/neg.png"] == Annotation()        # no XML: a negative, source ""
    assert job.label_map is lm


BAD_VOC = [
    ("<annotation><object><name>dog</name>", r"Annotations/x.xml:1: invalid XML"),
    ('<!DOCTYPE a [<!ENTITY e "x">]><annotation/>', r"Annotations/x.xml: refused: a DTD"),
    ("<annotation><object><name>dog</name><bndbox><xmin>12</xmin><ymin>1</ymin><xmax>10</xmax><ymax>5</ymax>"
     "</bndbox></object></annotation>", r"Annotations/x.xml: object 1 \(dog\): xmax 10 < xmin 12"),
    ("<annotation><object><name>dog</name><bndbox><xmin>1</xmin><ymin>nan</ymin><xmax>10</xmax><ymax>5</ymax>"
     "</bndbox></object></annotation>", r"Annotations/x.xml: object 1 \(dog\): <ymin> is 'nan', not a finite"),
    ("<annotation><object><name>ok</name><bndbox><xmin>1</xmin><ymin>1</ymin><xmax>2</xmax><ymax>2</ymax></bndbox>"
     "</object><object><name>dog</name><bndbox><xmin>1</xmin><ymin>1</ymin><xmax>32</xmax><ymax>5</ymax>"
     "</bndbox></object></annotation>", r"Annotations/x.xml: object 2 \(dog\): box \(0, 0, 32, 5\) passes the "
                                        r"border of the 30x20 image by more than 1 pixel"),
    ("<annotation><size><width>40</width><height>20</height></size></annotation>",
     r"Annotations/x.xml: states the image is 40x20 \(width x height\) but JPEGImages/x.png is 30x20"),
    ("<annotation><object><name>dog</name></object></annotation>", r"object 1 \(dog\): no <bndbox>"),
    ("<notvoc/>", r"the root element is <notvoc>"),
]


@pytest.mark.parametrize("xml, words", BAD_VOC)
def test_voc_bad_annotation_rejects_its_image_only(tmp_path, xml, words):
    voc_job(str(tmp_path), [Img("x.png", 20, 30), Img("ok.png", 20, 30, [("dog", (2, 2, 8, 8), RED)])])
    (tmp_path / "Annotations" / "x.xml").write_text(xml)
    job = read_job(str(tmp_path))
    assert list(job.rejected) == ["JPEGImages/x.png"]
    assert re.search(words, job.rejected["JPEGImages/x.png"]), job.rejected
    assert "JPEGImages/x.png" not in job.annotations and boxes(job, "JPEGImages/ok.png") == [("dog", (2, 2, 8, 8))]


@pytest.mark.parametrize("encoding, declared, words", [
    ("utf-16-be", "UTF-16-BE", "multi-byte encodings are not supported"),   # no byte order mark: a ValueError
    ("utf-16", "bogus", "unknown encoding: bogus"),                          # a LookupError
])
def test_voc_xml_in_an_encoding_expat_cannot_read_rejects_its_image_only(tmp_path, encoding, declared, words):
    # pyexpat raised these past the XML reader, which failed the whole job as a crash (found by fuzzing)
    voc_job(str(tmp_path), [Img("x.png", 20, 30), Img("ok.png", 20, 30, [("dog", (2, 2, 8, 8), RED)])])
    (tmp_path / "Annotations" / "x.xml").write_bytes(
        f'<?xml version="1.0" encoding="{declared}"?><annotation/>'.encode(encoding))
    job = read_job(str(tmp_path))
    assert list(job.rejected) == ["JPEGImages/x.png"]
    assert f"Annotations/x.xml: invalid XML: {words}" in job.rejected["JPEGImages/x.png"]
    assert boxes(job, "JPEGImages/ok.png") == [("dog", (2, 2, 8, 8))]


def test_voc_one_pixel_slack_is_clipped(tmp_path):
    voc_job(str(tmp_path), [Img("x.png", 20, 30)])
    # xmin=0 is edge -1 and xmax=31 edge 31: within a pixel of the border, so clipped to the image
    (tmp_path / "Annotations" / "x.xml").write_text(
        "<annotation><object><name>dog</name><bndbox><xmin>0</xmin><ymin>1</ymin><xmax>31</xmax><ymax>20</ymax>"
        "</bndbox></object></annotation>")
    assert boxes(read_job(str(tmp_path)), "JPEGImages/x.png") == [("dog", (0.0, 0.0, 30.0, 20.0))]


def test_voc_class_ids_do_not_depend_on_which_images_are_readable(tmp_path):
    voc_job(str(tmp_path), [Img("z.png", 20, 20, [("aardvark", (1, 1, 5, 5), RED)], split="train"),
                            Img("y.png", 20, 20, [("bee", (1, 1, 5, 5), RED)], split="train"),
                            Img("x.png", 20, 20, [("dog", (1, 1, 5, 5), RED)], split="train")])
    (tmp_path / "JPEGImages" / "z.png").write_bytes(b"not an image")      # the scan rejects it
    (tmp_path / "ImageSets" / "Main" / "val.txt").write_text("y\n")        # y: rejected before it is read
    job = read_job(str(tmp_path))
    assert job.label_map.ids == {"aardvark": 1, "bee": 2, "dog": 3}
    assert sorted(job.annotations) == ["JPEGImages/x.png"] and list(job.rejected) == ["JPEGImages/y.png"]


def test_voc_unknown_class_missing_image_and_outside_link(tmp_path, tmp_path_factory):
    voc_job(str(tmp_path), [Img("x.png", 20, 30, [("dog", (1, 1, 5, 5), RED)]),
                            Img("y.png", 20, 30, [("cat", (1, 1, 5, 5), RED)])])
    (tmp_path / "Annotations" / "gone.xml").write_text(voc_xml(Img("gone.png", 20, 30)))
    outside = tmp_path_factory.mktemp("elsewhere") / "y.xml"
    outside.write_text((tmp_path / "Annotations" / "y.xml").read_text())
    os.remove(tmp_path / "Annotations" / "y.xml")
    os.symlink(outside, tmp_path / "Annotations" / "y.xml")
    job = read_job(str(tmp_path), label_map=LabelMap.from_names(["cat"]))
    assert job.rejected == {
        "Annotations/gone.xml": "Annotations/gone.xml: an annotation for a missing image: no gone.* in JPEGImages/",
        "JPEGImages/x.png": "Annotations/x.xml: object 1 (dog): class 'dog' is not in the label map (cat)",
        "JPEGImages/y.png": "Annotations/y.xml: a link to a file outside the job folder",
    }


def test_exif_orientation_is_the_size_boxes_are_checked_against(tmp_path):
    from PIL import Image
    voc_job(str(tmp_path), [Img("r.jpg", 20, 40, [("dog", (1, 1, 5, 5), RED)])])
    exif = Image.Exif()
    exif[0x0112] = 6   # stored 40 wide, shown 20 wide x 40 high
    Image.open(tmp_path / "JPEGImages" / "r.jpg").save(tmp_path / "JPEGImages" / "r.jpg", exif=exif, quality=95)
    job = read_job(str(tmp_path))
    assert job.rejected["JPEGImages/r.jpg"] == ("Annotations/r.xml: states the image is 40x20 (width x height) but "
                                                "JPEGImages/r.jpg is 20x40 upright (EXIF orientation 6); its boxes "
                                                "would not fit the pixels")


# --------------------------------------------------------------------------------------------------------- COCO

def test_coco_polygons_rle_and_crowd(tmp_path):
    tri = ((40, 10), (79, 12), (60, 59))
    imgs = [Img("a.png", 60, 80, [("dog", (0, 0, 20, 15), RED), Shape("cat", tri, BLUE, rle="string", crowd=True)]),
            Img("b.png", 50, 64, [Shape("cat", (30, 20, 64, 50), GREEN, rle="list"),
                                  ("dog", ((2, 2), (25, 4), (10, 30)), RED)]),
            Img("neg.png", 20, 20)]
    coco_job(str(tmp_path), imgs)
    job = read_job(str(tmp_path))
    assert detect_format(str(tmp_path)) == "coco" and job.rejected == {}
    assert job.label_map.ids == {"dog": 1, "cat": 2} and job.image_dirs == ("images",)
    assert job.skip == frozenset({"instances.json"})
    a, b = job.annotations["images/a.png"].objects, job.annotations["images/b.png"].objects
    rgb = decoded(str(tmp_path / "images" / "a.png"))
    assert a[0].box == region_box(rgb, RED) and a[0].polygons == (((0, 0), (20, 0), (20, 15), (0, 15)),)
    assert a[1].crowd and a[1].polygons == () and isinstance(a[1].rle["counts"], str)
    assert np.array_equal(rle_decode(a[1].rle), np.all(rgb == BLUE, axis=-1))        # the mask is the pixels
    rgb_b = decoded(str(tmp_path / "images" / "b.png"))
    assert not b[0].crowd and np.array_equal(rle_decode(b[0].rle), np.all(rgb_b == GREEN, axis=-1))
    assert b[1].polygons == (((2.0, 2.0), (25.0, 4.0), (10.0, 30.0)),) and b[1].box == (2, 2, 25, 30)
    assert job.annotations["images/neg.png"].objects == () and job.annotations["images/neg.png"].source


def test_coco_refusals_reject_images_not_the_job(tmp_path):
    imgs = [Img(f"{k}.png", 20, 30, [("dog", (1, 1, 9, 9), RED)]) for k in "abcdef"]
    coco_job(str(tmp_path), imgs, image_dir="")
    data = json.loads((tmp_path / "instances.json").read_text())
    data["images"][1]["id"] = data["images"][2]["id"] = 2                      # b and c share id 2
    data["images"].append({"id": 99, "file_name": "nowhere/z.png", "width": 30, "height": 20})
    data["annotations"][3]["category_id"] = 42                                  # d: unknown category
    data["annotations"][4]["bbox"] = [1, 1, 40, 5]                              # e: past the border
    data["annotations"].append({"id": 77, "image_id": 1234, "category_id": 1, "bbox": [1, 1, 2, 2]})
    data["annotations"].append({"id": 78, "image_id": 6, "category_id": 1, "bbox": [1, 1, 0, 2]})  # f: empty
    (tmp_path / "instances.json").write_text(json.dumps(data))
    job = read_job(str(tmp_path))
    assert sorted(job.annotations) == ["a.png"]
    assert job.rejected["b.png"] == "instances.json: images[1] (id 2): image id 2 is also used by images[2] " \
                                    "('c.png'); their annotations cannot be told apart"
    assert job.rejected["c.png"] == "instances.json: images[2] (id 2): image id 2 is also used by images[1] " \
                                    "('b.png'); their annotations cannot be told apart"
    assert job.rejected["d.png"] == "instances.json: annotations[3] (id 4, category 42): category_id 42 is not in " \
                                    "`categories`"
    assert job.rejected["e.png"].startswith("instances.json: annotations[4] (id 5, dog): box (1, 1, 41, 6) passes")
    assert job.rejected["f.png"] == "instances.json: annotations[7] (id 78, dog): box (1, 1, 1, 3) is empty: width " \
                                    "0, height 2 (annotations.repair: standard drops such boxes)"
    assert job.rejected["instances.json"] == (               # c's annotation: its image id 3 is now gone
        "instances.json: annotations[2] names image id 3, which is not in `images`; "
        "instances.json: annotations[6] names image id 1234, which is not in `images`; instances.json: image id 99 "
        "names 'nowhere/z.png', which is not in the job folder (file_name is relative to the job folder)")


@pytest.mark.parametrize("category", [{"id": 1}, [1], 1.0, True])
def test_coco_category_id_of_another_type_rejects_its_image(tmp_path, category):
    # a list or an object was looked up as a key: TypeError, which failed the job (found by fuzzing read_coco)
    coco_job(str(tmp_path), [Img(f"{k}.png", 20, 30, [("dog", (1, 1, 9, 9), RED)]) for k in "ab"], image_dir="")
    data = json.loads((tmp_path / "instances.json").read_text())
    data["annotations"][1]["category_id"] = category
    (tmp_path / "instances.json").write_text(json.dumps(data))
    job = read_job(str(tmp_path))
    assert sorted(job.annotations) == ["a.png"]
    assert job.rejected["b.png"] == (f"instances.json: annotations[1] (id 2, category {category!r}): category_id "
                                     f"{category!r} is not in `categories`")


def test_coco_that_is_broken_fails_the_read_even_in_auto_and_other_json_is_passed_over(tmp_path):
    coco_job(str(tmp_path), IMAGES[:1])
    (tmp_path / "meta.json").write_text('[{"source": "camera"}]')          # valid JSON, no COCO: passed over
    assert read_job(str(tmp_path)).skip == frozenset({"instances.json"})
    (tmp_path / "instances.json").write_text('{"images": [')
    for call in (detect_format, read_job, lambda root: read_job(root, "coco")):
        with pytest.raises(AnnotationError, match=r"^instances.json:1: invalid JSON"):
            call(str(tmp_path))                      # never a classification job whose records lack the boxes
    coco_job(str(tmp_path), IMAGES[:1])
    data = json.loads((tmp_path / "instances.json").read_text())
    data["categories"].append({"id": 9, "name": "dog"})
    (tmp_path / "instances.json").write_text(json.dumps(data))
    with pytest.raises(AnnotationError, match=r"^instances.json: categories\[2\]: category name 'dog' is also id 1"):
        read_job(str(tmp_path))


def test_coco_split_from_the_json_name_and_category_zero(tmp_path):
    coco_job(str(tmp_path), IMAGES[:2], json_name="instances_val2017.json")
    data = json.loads((tmp_path / "instances_val2017.json").read_text())
    data["categories"].append({"id": 0, "name": "unused"})
    (tmp_path / "instances_val2017.json").write_text(json.dumps(data))
    job = read_job(str(tmp_path))
    assert set(job.splits.values()) == {"validation"} and "unused" not in job.label_map.ids


def test_coco_negatives_on_disk_get_their_folder_split(tmp_path):
    coco_job(str(tmp_path), IMAGES[:2])                 # images/train/a.png, images/val/b.png; instances.json
    cv2.imwrite(str(tmp_path / "images" / "train" / "neg.png"), np.zeros((8, 8, 3), np.uint8))
    job = read_job(str(tmp_path))
    assert job.annotations["images/train/neg.png"] == Annotation() and job.rejected == {}
    assert job.splits == {"images/train/a.png": "train", "images/train/neg.png": "train",
                          "images/val/b.png": "validation"}


@pytest.mark.parametrize("val_categories, words", [
    ([{"id": 18, "name": "dog"}], "val.json: category 'dog' is id 18 here but 1 in train.json"),
    ([{"id": 1, "name": "cat"}], "val.json: category id 1 is 'cat' here but 'dog' in train.json")])
def test_coco_files_must_agree_on_names_and_ids(tmp_path, val_categories, words):
    coco_job(str(tmp_path), [Img("a.png", 20, 20, [("dog", (1, 1, 5, 5), RED)])], json_name="train.json")
    coco_job(str(tmp_path), [Img("b.png", 20, 20)], json_name="val.json")
    data = json.loads((tmp_path / "val.json").read_text())
    (tmp_path / "val.json").write_text(json.dumps({**data, "categories": val_categories}))
    with pytest.raises(AnnotationError, match=f"^{re.escape(words)}$"):
        read_job(str(tmp_path))


def test_polygons_within_the_slack_are_clipped_like_boxes(tmp_path):
    from augd.annotations.occlusion import Rule
    from augd.annotations.targets import transform
    poly = ((-0.5, 2.0), (30.8, 2.0), (15.0, 20.5))    # passes the 30x20 image's border by under a pixel
    coco_job(str(tmp_path), [Img(f"{k}.png", 20, 30, [("dog", poly, RED)]) for k in "ab"])
    data = json.loads((tmp_path / "instances.json").read_text())
    data["annotations"][1]["segmentation"] = [[-1, 5, 0, 5, 0, 10]]        # b: a polygon on the border only
    (tmp_path / "instances.json").write_text(json.dumps(data))
    job = read_job(str(tmp_path))
    (obj,) = job.annotations["images/a.png"].objects
    xs, ys = [p[0] for p in obj.polygons[0]], [p[1] for p in obj.polygons[0]]
    assert obj.box == (0.0, 2.0, 30.0, 20.0) == (min(xs), min(ys), max(xs), max(ys)) and not obj.truncated
    out, _, dropped = transform(job.annotations["images/a.png"], [(np.eye(3), 20.0, 30.0)],
                                rule=Rule(min_visibility=0.999))
    assert not dropped and not out.objects[0].truncated and out.objects[0].box == obj.box
    assert not out.objects[0].ignored   # the identity keeps the whole polygon: nothing under the rule
    assert job.rejected == {"images/b.png": "instances.json: annotations[1] (id 2, dog): its polygons lie outside "
                                            "the 30x20 image (on its border at most)"}


# --------------------------------------------------------------------------------------------------------- YOLO

@pytest.mark.parametrize("beside, names", [(False, "data.yaml"), (True, "classes.txt")])
def test_yolo_boxes_match_the_pixels(tmp_path, beside, names):
    expect = yolo_job(str(tmp_path), IMAGES, beside=beside, names=names)
    job = read_job(str(tmp_path))
    assert detect_format(str(tmp_path)) == "yolo" and job.rejected == {}
    assert job.label_map.ids == {"dog": 1, "cat": 2, "bird": 3}          # YOLO: the names file's order
    for rel, objs in expect.items():
        got = boxes(job, rel)
        assert [n for n, _ in got] == [n for n, _ in objs]
        for (_, box), (_, want) in zip(got, objs):
            assert np.allclose(box, want, atol=1e-3)
    # a box on the border (c.jpg covers the whole image: 0.5 0.5 1 1) is fine
    full = "train/c.jpg" if beside else "images/train/c.jpg"
    assert np.allclose(boxes(job, full)[0][1], (0, 0, 48, 48))
    assert job.splits[full] == "train"
    assert (names in job.skip) and (("labels" in job.skip) != beside)


def test_yolo_polygons_and_refusals(tmp_path):
    yolo_job(str(tmp_path), [dataclasses.replace(IMAGES[0], split="")], polygons=True)
    lines = (tmp_path / "labels" / "a.txt").read_text().splitlines()
    assert len(lines[1].split()) == 7
    job = read_job(str(tmp_path), "yolo")
    cat = job.annotations["images/a.png"].objects[1]
    assert np.allclose(cat.box, (40, 10, 79, 59), atol=1e-3) and len(cat.polygons[0]) == 3
    for text, words in [("5 0.5 0.5 0.1 0.1\n", "labels/a.txt: line 1: class 5 is not a class index 0..1"),
                        ("0 0.5 0.5 0.1\n", "labels/a.txt: line 1 (dog): 4 fields"),
                        ("0 0.5 0.5 0.1 0.1\n1 1.05 0.5 0.2 0.2\n",
                         "labels/a.txt: line 2 (cat): box (76, 24, 92, 36) passes the border of the 80x60 image"),
                        ("0 0.5 nan 0.1 0.1\n", "line 1 (dog): value 2 is 'nan', not a finite number")]:
        (tmp_path / "labels" / "a.txt").write_text(text)
        rejected = read_job(str(tmp_path)).rejected
        assert list(rejected) == ["images/a.png"] and words in rejected["images/a.png"], rejected
    (tmp_path / "labels" / "zz.txt").write_text("0 0.5 0.5 0.1 0.1\n")
    assert "labels/zz.txt" in read_job(str(tmp_path)).rejected
    os.remove(tmp_path / "classes.txt")
    with pytest.raises(AnnotationError, match="no class names"):
        read_job(str(tmp_path))
    (tmp_path / "data.yaml").write_text("names: [dog\n")    # the file's path in the job, never this machine's
    with pytest.raises(AnnotationError, match=r"^data\.yaml:") as err:
        read_job(str(tmp_path))
    assert str(tmp_path) not in str(err.value)
