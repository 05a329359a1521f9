"""Masks through whole detection jobs: VOC SegmentationClass masks and COCO polygons through `augd run` into the
DeepLab and Object Detection API mask keys, each record's masks judged against its own decoded pixels (the synthetic
jobs and the readers of tests/test_detection_job.py).
"""
from __future__ import annotations

import cv2
import numpy as np
import pytest

from tests.test_detection_job import (COLOURS, PIPELINE, TOLERANCE, _covered, _mask_scenes,
                                      assert_boxes_match_pixels, read_records, run)
from tests.daemon_harness import no_leaked_children, no_leaked_children_module  # noqa: F401
from tests.test_detection_job import pipeline  # noqa: F401  (a fixture)


@pytest.mark.parametrize("moves", [False, True], ids=["chain", "moves inside boxes"])
def test_semantic_masks_cover_their_pixels_in_every_variant(tmp_path, pipeline, moves):
    """VOC SegmentationClass masks through `augd run`: each record's DeepLab mask, decoded, marks >= 98 % of
    each class's coloured pixels with that class's index; where in_boxes turns and shifts each box's pixels too."""
    import tensorflow as tf

    from tests.annotated import classes_of, voc_job
    scenes = _mask_scenes()
    voc_job(str(tmp_path / "seg"), scenes, masks="P")
    if moves:
        pipeline = tmp_path / "moves.yaml"
        pipeline.write_text(PIPELINE.replace("  - random_brightness",
                                             "  - in_boxes: {op: rotate, value: 25, box_p: 1}\n"
                                             "  - in_boxes: {op: translate_y, value: 9, box_p: 1}\n"
                                             "  - random_brightness"))
    m = run(tmp_path / "seg", tmp_path / "out", pipeline)
    assert m["inputs"]["rejected"] == 0
    classes = classes_of(scenes)
    records = read_records(tmp_path / "out" / "seg")
    assert len(records) == len(scenes) * 4
    for r in records:
        assert r["image/segmentation/class/format"] == b"png"
        mask = tf.io.decode_png(r["image/segmentation/class/encoded"], channels=1).numpy()[..., 0]
        assert mask.shape == r["pixels"].shape[:2]
        for name in ("red", "blue"):
            share = _covered(r["pixels"], mask, name, classes.index(name) + 1)
            assert share >= 0.98, f"{r['image/filename']} variant {r['augd/variant']}: {name} {share:.3f}"
            # and the class only where its colour is (within 2 px: the mask is nearest, the pixels blend)
            hit = np.all(np.abs(r["pixels"].astype(int) - COLOURS[name]) < TOLERANCE, axis=2).astype(np.uint8)
            near = cv2.dilate(hit, np.ones((5, 5), np.uint8)).astype(bool)
            stray = int(((mask == classes.index(name) + 1) & ~near).sum())
            assert stray <= 0.02 * max(int(hit.sum()), 1), f"{r['image/filename']}: {name} labelled {stray} px away"


def test_instance_masks_cover_their_objects_in_every_variant(tmp_path, pipeline):
    """COCO polygons through `augd run`: each object's instance mask PNG (image/object/mask), decoded, covers
    >= 98 % of its colour's pixels, and the boxes still agree with the pixels."""
    import tensorflow as tf

    from tests.annotated import coco_job
    coco_job(str(tmp_path / "inst"), _mask_scenes())
    run(tmp_path / "inst", tmp_path / "out", pipeline)
    records = read_records(tmp_path / "out" / "inst")
    assert assert_boxes_match_pixels(records) > 0
    checked = 0
    for r in records:
        texts = [t.decode() for t in r["image/object/class/text"]]
        masks = r["image/object/mask"]
        assert len(masks) == len(texts)
        for name, png in zip(texts, masks):
            mask = tf.io.decode_png(png, channels=1).numpy()[..., 0]
            share = _covered(r["pixels"], mask, name, 1)
            assert share >= 0.98, f"{r['image/filename']} variant {r['augd/variant']}: {name} {share:.3f}"
            checked += 1
    assert checked >= len(records)
