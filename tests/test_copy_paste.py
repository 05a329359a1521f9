"""copy_paste (augd/ops/mixing.py, augd/job/mixing.py): partners' objects pasted by their masks (COCO polygons) or
their crops (VOC boxes), by the pixels: every box, pasted or under a paste, is its object's visible pixels, each
instance mask covers its object, edges feather, and a job without annotations is refused.
"""
from __future__ import annotations

import dataclasses

import cv2
import numpy as np
import pytest

from augd.schema import parse_pipeline
from tests.annotated import Img, coco_job, voc_job
from tests.test_mixing import (GREY, KEEP_REMNANTS, SLACK, TOL, check_boxes, colours_of, png_scenes, records, run,
                               scenes)
from tests.test_mixing import classes_job, voc  # noqa: F401  (fixtures)


def polygon_scenes() -> list[Img]:
    """The scenes with each image's second object a pentagon (its instance mask is not its box)."""
    out = []
    for img in scenes():
        first, second = img.objects()
        x0, y0, x1, y1 = second.geom
        w, h = x1 - x0, y1 - y0     # a blunt pentagon: no vertex so sharp that its tip is all edge pixels
        quad = ((x0, y0 + h // 3), (x0 + w // 3, y0), (x1, y0 + h // 4), (x1 - w // 4, y1), (x0, y1 - h // 5))
        out.append(dataclasses.replace(img, split="", shapes=(first, dataclasses.replace(second, geom=quad))))
    return out


@pytest.mark.parametrize("layout", ["coco", "voc"])
def test_copy_paste_boxes_and_masks_agree_with_the_pixels(tmp_path, layout):
    """COCO polygons paste by their masks, VOC boxes by their crops: every box (pasted or under a paste) is its
    object's visible pixels; each instance mask covers its object's pixels."""
    import tensorflow as tf
    imgs = png_scenes(polygon_scenes() if layout == "coco" else scenes())
    (coco_job if layout == "coco" else voc_job)(str(tmp_path / "job"), imgs)
    spec = parse_pipeline("name: cp\nseed: 3\nvariants: 3\noutput: {format: png}\nops:\n"
                          "  - copy_paste: {objects: [2, 3], scale: [0.6, 1.2]}\n  - random_flip_left_right: {}\n"
                          + KEEP_REMNANTS)
    out = run(tmp_path / "job", spec, tmp_path / "out", executor="threads")
    recs = [r for r in records(out) if r["augd/variant"] > 0]
    # a polygon's vertex shows as a few edge pixels, blended: its box (the polygon's extent) may lie 3 px out
    assert check_boxes(recs, colours_of(imgs), 3.0 if layout == "coco" else SLACK) >= len(recs) * 2
    own = {img.name: len(img.objects()) for img in imgs}
    pasted = [len(r["image/object/class/text"]) - own[r["image/filename"].rsplit("/", 1)[-1]] for r in recs]
    # 2 or 3 drawn; one that fits nowhere without overlapping another paste is left out (and not read)
    assert sum(pasted) >= len(recs) and all(len(r["augd/partners"]) <= 3 for r in recs)
    assert sum(len(r["augd/partners"]) for r in recs) >= len(recs) * 1.5
    if layout == "coco":
        for r in recs:
            px = r["pixels"].astype(int)
            masks = [tf.io.decode_png(m, channels=1).numpy()[..., 0] for m in r["image/object/mask"]]
            assert len(masks) == len(r["image/object/class/text"])
            for colour in colours_of(imgs):
                hit = np.all(np.abs(px - colour) <= TOL, axis=2).astype(np.uint8)
                n, parts = cv2.connectedComponents(cv2.erode(hit, np.ones((3, 3), np.uint8)))
                for k in range(1, n):
                    core = parts == k
                    if core.sum() >= 9:
                        assert max(float(np.mean(m[core] > 0)) for m in masks) >= 0.98


def test_copy_paste_feathers_edges_and_refuses_a_job_without_annotations(voc, classes_job, tmp_path):
    from augd.errors import FailureReason, JobFailed
    spec = parse_pipeline("name: cp\nseed: 3\nvariants: 1\nkeep_original: false\noutput: {format: png}\nops:\n"
                          "  - copy_paste: {objects: [1, 1], scale: [2.0, 2.0], feather: 2}\n")
    out = run(voc, spec, tmp_path / "out", executor="threads")
    soft = 0
    for r in records(out):
        px = r["pixels"].astype(int)
        for colour in colours_of(scenes()):
            if np.all(np.abs(px - colour) <= TOL, axis=2).sum() < 9:
                continue
            d = np.abs(px - colour).max(axis=2)
            soft += int(((d > TOL) & (d < 80) & (np.abs(px - GREY).max(axis=2) > 20)).sum())   # blended edges
    assert soft > 100
    with pytest.raises(JobFailed) as err:
        run(classes_job, spec, tmp_path / "cls", executor="threads")
    assert err.value.reason is FailureReason.BAD_PIPELINE and "copy_paste" in str(err.value)


def test_copy_paste_mixes_objects_with_and_without_masks(tmp_path):
    """A COCO set where one class has polygons and the other none (box-only annotations): pasting either kind
    onto either gives every object an instance mask (a box-only one its rectangle), and boxes match pixels."""
    import json
    imgs = png_scenes(polygon_scenes())
    coco_job(str(tmp_path / "job"), imgs)
    path = tmp_path / "job" / "instances.json"
    data = json.loads(path.read_text())
    cat = next(c["id"] for c in data["categories"] if c["name"] == "cat")
    for a in data["annotations"]:
        if a["category_id"] == cat:
            a.pop("segmentation")
    path.write_text(json.dumps(data))
    spec = parse_pipeline("name: cp\nseed: 5\nvariants: 3\nkeep_original: false\noutput: {format: png}\nops:\n"
                          "  - copy_paste: {objects: [2, 3]}\n" + KEEP_REMNANTS)
    out = run(tmp_path / "job", spec, tmp_path / "out", executor="threads")
    recs = records(out)
    assert len(recs) == 8 * 3
    assert all(len(r["image/object/mask"]) == len(r["image/object/class/text"]) for r in recs)
    assert check_boxes(recs, colours_of(imgs), 3.0) >= len(recs) * 2
