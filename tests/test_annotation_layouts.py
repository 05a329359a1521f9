"""Annotation layouts: which format a folder is (the registry's formats and ranks, as every help text and the docs'
table give them, and each layout's markers in the executor's estimate) and masks paired with their images, checked
against real files written by tests/annotated.py and tests/exports.py (the images of tests/test_annotations_read.py)."""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import cv2
import numpy as np
import pytest

from augd.annotations import AnnotationError
from augd.annotations.labelmap import LabelMap
from augd.annotations.layout import detect_format, read_job
from augd.annotations.masks import read_mask
from tests.annotated import Img, coco_job, masks_job, voc_job, yolo_job
from tests.exports import Rot, cvat_job, dota_job, label_studio_job, labelme_job, yolo_obb_job
from tests.splitfolders import as_split_folders
from tests.test_annotations_read import BLUE, GREEN, IMAGES, RED

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("voc", [False, True])
def test_mask_jobs_pair_masks_and_check_their_size(tmp_path, voc):
    expect = masks_job(str(tmp_path), IMAGES, voc=voc)
    top, masks = ("JPEGImages", "SegmentationClass") if voc else ("images", "masks")
    job = read_job(str(tmp_path))
    assert job.format == "masks" and job.rejected == {} and job.image_dirs == (top,) and masks in job.skip
    for rel, mask in expect.items():
        ann = job.annotations[rel]
        assert np.array_equal(read_mask(ann.mask, mask.shape, ann.source), mask)
    bad = tmp_path / masks / ("a.png" if voc else "train/a.png")
    cv2.imwrite(str(bad), np.zeros((10, 10), np.uint8))
    assert read_job(str(tmp_path)).rejected == {
        f"{top}/{'' if voc else 'train/'}a.png": f"{masks}/{'' if voc else 'train/'}a.png: the mask is 10x10 but "
                                                 f"{top}/{'' if voc else 'train/'}a.png is 80x60; a mask must match "
                                                 f"its image pixel for pixel"}


def test_voc_with_segmentation_masks(tmp_path):
    voc_job(str(tmp_path), IMAGES[:2], masks="P")
    job = read_job(str(tmp_path))
    ann = job.annotations["JPEGImages/a.png"]
    assert ann.source == "Annotations/a.xml" and ann.mask.endswith("SegmentationClass/a.png")
    assert "SegmentationClass" in job.skip


def test_classification_jobs_are_not_detected(tmp_path):
    for cls in ("cat", "dog"):
        (tmp_path / cls).mkdir()
        cv2.imwrite(str(tmp_path / cls / "x.png"), np.zeros((8, 8, 3), np.uint8))
    (tmp_path / "dog" / "x.txt").write_text("notes, not labels\n")          # no classes.txt: not YOLO
    (tmp_path / "cat" / "x.xml").write_text("<metadata/>")                 # not <annotation>: not VOC
    (tmp_path / "meta.json").write_text('{"source": "camera"}')            # no `images`: not COCO
    assert detect_format(str(tmp_path)) is None and read_job(str(tmp_path)) is None
    with pytest.raises(AnnotationError, match="no masks annotations: expected JPEGImages/ with SegmentationClass/"):
        read_job(str(tmp_path), "masks")


def test_the_format_registry_is_what_every_place_offers(tmp_path):
    """The formats are the registry's (augd/annotations/layout.py): the `annotations: format:` values, the schema
    and `augd run --annotations` list them, and each, named on a folder without it, says what it expects."""
    from augd.annotations.layout import REGISTRY
    from augd.schema import ANNOTATION_FORMATS, AnnotationsConfig
    from augd.schema.jsonschema import pipeline_schema

    from augd.annotations.tfrecords import FORMAT as RECORDS

    assert ANNOTATION_FORMATS == ("auto", *REGISTRY, RECORDS, "none")   # records: read in place, not a layout
    import importlib
    import pkgutil

    import augd.annotations as package
    from augd.annotations.reading import AnnotationFormat
    declared = {m.name for m in pkgutil.iter_modules(package.__path__)
                if isinstance(getattr(importlib.import_module(f"augd.annotations.{m.name}"), "FORMAT", None),
                              AnnotationFormat)}
    assert declared == set(REGISTRY), "a module that declares a FORMAT is in REGISTRY, and back"
    docs = (REPO / "docs" / "pipelines.md").read_text()
    table = [(int(r), name) for r, name in re.findall(r"^\| (\d+) \| `(\w+)` \|", docs, re.M)]
    assert table == sorted((lay.rank, name) for name, f in REGISTRY.items() for lay in f.layouts), \
        "docs/pipelines.md's table of formats says what the registry does"
    for name in ANNOTATION_FORMATS:
        assert AnnotationsConfig(format=name).format == name
    assert json.dumps(list(ANNOTATION_FORMATS)) in json.dumps(pipeline_schema())
    ranks = [layout.rank for f in REGISTRY.values() for layout in f.layouts]
    assert len(set(ranks)) == len(ranks), "one order across all formats' layouts"
    (tmp_path / "x.png").write_bytes(b"")
    for name, fmt in REGISTRY.items():
        # named, YOLO takes any folder as labels beside images, and asks for its class names first
        expected = "no class names" if name == "yolo" else f"no {name} annotations: {fmt.expected}"
        with pytest.raises(AnnotationError, match=re.escape(expected)):
            read_job(str(tmp_path), name)


def _words(text: str) -> str:
    return " ".join(text.split())


def test_every_help_text_schema_and_docs_list_names_every_registered_format(capsys):
    """Where augd lists the formats in words (`augd run --help`, `augd check --help`, the schema), each names every
    registered one, from the registry; the docs list them in one table (the test above)."""
    from augd.annotations.layout import REGISTRY, in_words
    from augd.cli import build_parser
    from augd.schema import ANNOTATION_FORMATS
    from augd.schema.jsonschema import pipeline_schema

    helps = {}
    for verb in ("run", "check"):
        with pytest.raises(SystemExit):
            build_parser().parse_args([verb, "--help"])
        helps[verb] = _words(capsys.readouterr().out)
    for where, text in {**helps, "schema": json.dumps(pipeline_schema())}.items():
        assert in_words() in text and all(f in text for f in ANNOTATION_FORMATS), where
    for name, fmt in REGISTRY.items():
        assert fmt.title and fmt.markers and fmt.expected, f"{name}: its title, markers and expected are its own"


#: A job of each registered layout, by its rank (tests/annotated.py's writers; the test below wants one per rank).
LAYOUT_JOBS = {
    10: lambda root: voc_job(root, IMAGES), 60: lambda root: voc_job(root, IMAGES, beside=True),
    20: lambda root: yolo_job(root, IMAGES), 70: lambda root: yolo_job(root, IMAGES, beside=True),
    30: lambda root: coco_job(root, IMAGES), 40: lambda root: masks_job(root, IMAGES, voc=True),
    50: lambda root: masks_job(root, IMAGES),
    15: lambda root: dota_job(root, ROTATED), 21: lambda root: yolo_obb_job(root, ROTATED),
    71: lambda root: yolo_obb_job_beside(root), 65: lambda root: labelme_job(root, ROTATED),
    16: lambda root: (dota_job(root, ROTATED), as_split_folders(root, "labelTxt")),
    25: lambda root: (yolo_job(root, IMAGES, names="data.yaml"), as_split_folders(root, "labels", ROBOFLOW)),
    26: lambda root: (yolo_obb_job(root, ROTATED), as_split_folders(root, "labels", ROBOFLOW)),
    35: lambda root: cvat_job(root, ROTATED), 36: lambda root: label_studio_job(root, ROTATED),
}
#: Roboflow's split folders: val/ ships as valid/.
ROBOFLOW = {"val": "valid"}
#: IMAGES with oriented boxes, for the tool exports (DOTA and YOLO-OBB take 4 corners only).
ROTATED = [Img("a.png", 60, 80, [("dog", (0, 0, 20, 15), RED), Rot("cat", 55, 30, 30, 14, 30, BLUE)], split="train"),
           Img("b.png", 50, 64, [("cat", (30, 20, 64, 50), GREEN), Rot("dog", 12, 10, 10, 6, -15, RED)], split="val"),
           Img("c.jpg", 48, 48, [("bird", (0, 0, 48, 48), BLUE)], split="train")]


def yolo_obb_job_beside(root: str) -> dict:
    """YOLO-OBB with each .txt beside its image (images/ and labels/ folded into one tree)."""
    out = yolo_obb_job(root, ROTATED)
    for dirpath, _, names in os.walk(os.path.join(root, "labels")):
        for n in names:
            src = os.path.join(dirpath, n)
            os.replace(src, os.path.join(root, "images", os.path.relpath(src, os.path.join(root, "labels"))))
    return out


def test_each_layout_s_markers_make_the_executor_estimate_an_annotated_job(tmp_path):
    """augd.job.executors.choice.estimate_folder knows an annotated job, before anything is read, by the files each
    registered format's markers name (split folders too), and counts only its images."""
    from augd.annotations.layout import REGISTRY
    from augd.job.executors.choice import estimate_folder
    from augd.schema import parse_pipeline
    from tests.jobfiles import pipeline_yaml

    ranks = {lay.rank: (name, lay) for name, f in REGISTRY.items() for lay in f.layouts}
    assert set(LAYOUT_JOBS) == set(ranks), "a job writer for every registered layout"
    spec = parse_pipeline(pipeline_yaml(variants=1, keep_original=False), "t.yaml")
    for rank, (name, layout) in sorted(ranks.items()):
        root = str(tmp_path / str(rank))
        LAYOUT_JOBS[rank](root)
        if layout.auto:
            assert detect_format(root) == name, rank
        else:   # found only when named: auto reads its files as another format's (YOLO-OBB's as YOLO's)
            assert detect_format(root) not in (None, name), rank
        job = read_job(root, name)
        assert job.format == name and not job.rejected and len(job.annotations) == len(IMAGES), (rank, job.rejected)
        c = estimate_folder(root, spec)
        assert c.annotated and c.images == len(IMAGES), (rank, c)
    (tmp_path / "classes" / "a").mkdir(parents=True)
    cv2.imwrite(str(tmp_path / "classes" / "a" / "x.png"), np.zeros((8, 8, 3), np.uint8))
    (tmp_path / "classes" / "a" / "notes.txt").write_text("no label file")
    assert not estimate_folder(str(tmp_path / "classes"), spec).annotated


def test_yolo_with_masks_and_a_fixed_map_for_coco(tmp_path):
    yolo_job(str(tmp_path / "y"), IMAGES[:2], masks="L")
    job = read_job(str(tmp_path / "y"))
    assert job.format == "yolo" and {"labels", "masks", "classes.txt"} <= job.skip
    assert job.annotations["images/val/b.png"].mask.endswith("masks/val/b.png")
    coco_job(str(tmp_path / "c"), IMAGES[:2])
    fixed = LabelMap({"cat": 17, "dog": 18})
    job = read_job(str(tmp_path / "c"), "coco", label_map=fixed)
    assert job.label_map is fixed and job.rejected == {} and job.splits["images/val/b.png"] == "validation"


def test_stem_collisions_split_conflicts_and_orphan_masks(tmp_path):
    imgs = [Img("x.png", 20, 20, [("dog", (1, 1, 5, 5), RED)], split="train"),
            Img("y.png", 20, 20, [("dog", (1, 1, 5, 5), RED)], split="train")]
    voc_job(str(tmp_path), imgs, masks="L")
    cv2.imwrite(str(tmp_path / "JPEGImages" / "x.jpg"), np.zeros((20, 20, 3), np.uint8))
    (tmp_path / "ImageSets" / "Main" / "val.txt").write_text("y\n")
    cv2.imwrite(str(tmp_path / "SegmentationClass" / "z.png"), np.zeros((20, 20), np.uint8))
    job = read_job(str(tmp_path))
    assert job.rejected == {
        "JPEGImages/x.jpg": "Annotations/x.xml: pairs with 2 images of one name (JPEGImages/x.jpg, "
                            "JPEGImages/x.png); keep one",
        "JPEGImages/x.png": "Annotations/x.xml: pairs with 2 images of one name (JPEGImages/x.jpg, "
                            "JPEGImages/x.png); keep one",
        "JPEGImages/y.png": "ImageSets/Main/val.txt: y is also listed in ImageSets/Main/train.txt; an image "
                            "belongs to one split",
        "SegmentationClass/z.png": "SegmentationClass/z.png: a mask for a missing image: no JPEGImages/z.*",
    }
    assert job.annotations == {}
