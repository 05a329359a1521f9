"""Issue 59: DOTA's download (`train/images/` + `train/labelTxt/`, `val/...`, `test/images/` without labels) and
Roboflow's YOLO and YOLO-OBB exports (`train/images/` + `train/labels/`, `valid/...`, `test/...`, data.yaml) dropped
in as they are: real jobs (augd.job.run_job, `augd check` as a user runs it), each split's records in its own
shards, oriented boxes on their drawn corners; DOTA's test images rejected (unlabelled is no negative), counted in
the test split by the job and by `augd check` alike; `format: auto` not misled by class folders named after splits.

`python -m tests.test_split_folders` prints the DOTA job's per-split counts and the worst corner error."""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest
import tensorflow as tf

from augd.annotations import AnnotationError
from augd.annotations.layout import detect_format, read_job
from augd.io.lite import OBB_KEYS
from augd.job import JobOptions, run_job
from augd.schema import parse_pipeline
from tests.annotated import Img, yolo_job
from tests.exports import corners, dota_job, yolo_obb_job
from tests.splitfolders import as_split_folders
from tests.test_oriented_boxes import corner_error, scenes

PIPELINE = """name: sf
seed: 5
variants: 2
keep_original: true
output: {format: png, shards: 1}
annotations: {format: FORMAT, min_visibility: 0, min_size: 2}
ops:
  - random_flip_left_right: {}
"""
#: DOTA's download in small: 3 train scenes, 2 val, 2 test (the test split ships without labelTxt/)
COUNTS = {"train": 3, "val": 2, "test": 2}
UNLABELLED = "test/ has no labelTxt/ folder, so none of its images is labelled"


def _scenes(counts: dict[str, int]) -> list[Img]:
    out, k = [], 0
    for split, n in counts.items():
        for img in scenes(n, seed=len(out)):
            out.append(dataclasses.replace(img, name=f"p{k:04d}.png", split=split))
            k += 1
    return out


def dota_download(root: Path) -> dict[str, Img]:
    """DOTA's layout as downloaded: {image path in the job: its scene}."""
    imgs = _scenes(COUNTS)
    written = dota_job(str(root), imgs)
    moved = as_split_folders(str(root), "labelTxt", unlabelled=("test",))
    return {moved[rel]: img for rel, img in written.items()}


def _records(out: Path) -> dict[str, list[dict]]:
    """{shard name: its records (filename, variant, oriented boxes in pixels)}."""
    got = {}
    for shard in sorted(out.glob("*.tfrecord")):
        recs = []
        for raw in tf.data.TFRecordDataset(str(shard)):
            f = tf.train.Example.FromString(raw.numpy()).features.feature
            h, w = f["image/height"].int64_list.value[0], f["image/width"].int64_list.value[0]
            xy = [list(f[k].float_list.value) for k in OBB_KEYS]
            recs.append({"filename": f["image/filename"].bytes_list.value[0].decode(),
                         "variant": f["augd/variant"].int64_list.value[0],
                         "texts": [t.decode() for t in f["image/object/class/text"].bytes_list.value],
                         "obb": [[(xy[2 * c][k] * w, xy[2 * c + 1][k] * h) for c in range(4)]
                                 for k in range(len(xy[0]))]})
        got[shard.name] = recs
    return got


def run_dota(tmp_path: Path) -> dict:
    """The DOTA download through a real job (format auto): what a test judges and __main__ prints."""
    job = tmp_path / "dota"
    truth = dota_download(job)
    assert detect_format(str(job)) == "dota"
    report = run_job(str(job), parse_pipeline(PIPELINE.replace("FORMAT", "auto")), str(tmp_path / "out"),
                     JobOptions(name="d", workers=1)).report
    shards = _records(tmp_path / "out" / "d")
    worst = 0.0
    for recs in shards.values():
        for r in recs:
            if r["variant"] == 0:   # the original: its oriented boxes are the corners drawn
                drawn = {s.cls: corners(s) for s in truth[r["filename"]].shapes}
                assert sorted(r["texts"]) == sorted(drawn), r["filename"]
                worst = max([worst] + [corner_error(box, drawn[c]) for c, box in zip(r["texts"], r["obb"])])
    manifest = json.loads((tmp_path / "out" / "d" / "manifest.json").read_text())
    return {"truth": truth, "report": report, "shards": shards, "worst": worst, "manifest": manifest, "job": job}


def test_dota_as_downloaded_writes_each_split_in_its_own_shards_and_rejects_the_unlabelled_test(tmp_path):
    got = run_dota(tmp_path)
    shards, manifest = got["shards"], got["manifest"]
    assert sorted(shards) == ["d-train-00000-of-00001.tfrecord", "d-validation-00000-of-00001.tfrecord"]
    train, val = shards["d-train-00000-of-00001.tfrecord"], shards["d-validation-00000-of-00001.tfrecord"]
    assert {r["filename"] for r in train} == {p for p in got["truth"] if p.startswith("train/images/")}
    assert {r["filename"] for r in val} == {p for p in got["truth"] if p.startswith("val/images/")}
    assert len(train) == COUNTS["train"] * 3 and len(val) == COUNTS["val"]   # originals + 2 variants; val as it is
    assert {r["variant"] for r in val} == {0}
    assert all(len(r["obb"]) == len(r["texts"]) == 4 for r in train + val), "every object has its oriented box"
    assert got["worst"] <= 1.0, got["worst"]
    splits = {s: (v["images"], v["records"], v["rejected"]) for s, v in manifest["splits"].items()}
    assert splits["train"] == (3, 9, 0) and splits["validation"] == (2, 2, 0), splits
    rejected = manifest["inputs"]["rejected_files"]
    test = sorted(p for p in got["truth"] if p.startswith("test/"))
    assert [x["path"] for x in rejected] == test and {x["reason"] for x in rejected} == {"bad_annotation"}
    assert all(x["message"].startswith(f"{x['path']}: {UNLABELLED}") and "add test/labelTxt/" in x["message"]
               for x in rejected), rejected
    assert "test" not in splits, "a split without an image to write gets no shard set (its rejections: above)"
    assert manifest["annotations"]["format"] == "dota"
    # augd check, as a user runs it, lists the same: the same rejections in the same words, the same split counts
    r = subprocess.run([sys.executable, "-m", "augd", "check", str(got["job"]), "--json", str(tmp_path / "c.json")],
                       capture_output=True, text=True, timeout=300)
    checked = json.loads((tmp_path / "c.json").read_text())
    assert [(x["path"], x["reason"], x["message"]) for x in checked["rejected"]] == \
        [(x["path"], x["reason"], x["message"]) for x in rejected], r.stdout
    assert {s: (v["images"], v["rejected"]) for s, v in checked["splits"].items()} == \
        {s: (v["images"], v["rejected"]) for s, v in manifest["splits"].items()} | {"test": (0, len(test))}, r.stdout
    assert UNLABELLED in r.stdout, r.stdout


@pytest.mark.parametrize("fmt", ["yolo", "yolo_obb"])
def test_roboflow_exports_go_in_as_they_are_valid_is_the_validation_split(tmp_path, fmt):
    job = tmp_path / fmt
    imgs = [dataclasses.replace(img, split=s) for img, s in zip(_scenes({"": 4}), ("train", "train", "val", "test"))]
    if fmt == "yolo":
        yolo_job(str(job), [dataclasses.replace(i, shapes=tuple(s.shape for s in i.shapes)) for i in imgs],
                 names="data.yaml")
    else:
        yolo_obb_job(str(job), imgs)
    (job / "data.yaml").write_text((job / "data.yaml").read_text() + "train: ../train/images\nval: ../valid/images\n"
                                   "test: ../test/images\n")
    (job / "README.roboflow.txt").write_text("exported from roboflow\n")
    as_split_folders(str(job), "labels", {"val": "valid"})
    assert detect_format(str(job)) == "yolo"   # YOLO-OBB's corners are YOLO polygons: auto reads them as yolo
    run_job(str(job), parse_pipeline(PIPELINE.replace("FORMAT", fmt)), str(tmp_path / "out"),
            JobOptions(name="r", workers=1))
    shards = _records(tmp_path / "out" / "r")
    files = {name.split("-")[1]: sorted({r["filename"] for r in recs}) for name, recs in shards.items()}
    assert files == {"train": ["train/images/p0000.png", "train/images/p0001.png"],
                     "validation": ["valid/images/p0002.png"], "test": ["test/images/p0003.png"]}
    assert all(len(r["texts"]) == 4 for recs in shards.values() for r in recs)
    oriented = [len(r["obb"]) for recs in shards.values() for r in recs]
    assert oriented == ([4] * len(oriented) if fmt == "yolo_obb" else [0] * len(oriented))
    manifest = json.loads((tmp_path / "out" / "r" / "manifest.json").read_text())
    assert manifest["inputs"]["rejected_files"] == [] and manifest["annotations"]["format"] == fmt


def _png(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(path), np.zeros((20, 24, 3), np.uint8))


def test_class_folders_named_after_splits_stay_a_classification_job(tmp_path):
    for rel in ("train/cat/a.png", "train/dog/b.png", "val/cat/c.png", "test/dog/d.png"):
        _png(tmp_path / "cls" / rel)
    assert detect_format(str(tmp_path / "cls")) is None and read_job(str(tmp_path / "cls")) is None
    # images/ alone in a split folder is a class called images: no labelTxt/ or labels/, no annotations
    for rel in ("train/images/a.png", "val/images/b.png"):
        _png(tmp_path / "images_class" / rel)
    assert detect_format(str(tmp_path / "images_class")) is None
    # a root folder that names no split: not the split layout (as a classification job's split folders)
    dota_download(tmp_path / "extra")
    _png(tmp_path / "extra" / "notes" / "x.png")
    assert detect_format(str(tmp_path / "extra")) is None
    with pytest.raises(AnnotationError, match="no dota annotations: expected DOTA's own split folders"):
        read_job(str(tmp_path / "extra"), "dota")


def test_split_layout_refusals_negatives_and_stray_images(tmp_path):
    root = tmp_path / "dota"
    truth = dota_download(root)
    first = sorted(p for p in truth if p.startswith("train/"))[0]
    os.unlink(root / "train" / "labelTxt" / (Path(first).stem + ".txt"))   # a labelled split's image alone: negative
    _png(root / "train" / "loose.png")                                    # outside train/images/
    (root / "val" / "labelTxt" / "zz.txt").write_text("1 1 9 1 9 9 1 9 car 0\n")   # no image
    job = read_job(str(root))
    assert job.annotations[first].objects == () and job.splits[first] == "train"
    assert job.rejected["train/loose.png"] == ("train/loose.png: outside train/images/; in the split layout train/'s "
                                               "images are in train/images/ and their .txt files in train/labelTxt/")
    assert job.rejected["val/labelTxt/zz.txt"] == ("val/labelTxt/zz.txt: an annotation for a missing image: no zz.* "
                                                   "in val/images/")
    assert {p: job.splits[p] for p in truth} == {p: {"train": "train", "val": "validation", "test": "test"}[
        p.split("/")[0]] for p in truth}
    os.rename(root / "val", root / "valid")
    (root / "val" / "images").mkdir(parents=True)
    with pytest.raises(AnnotationError, match=r"both val/ and valid/ hold the validation split; merge them"):
        read_job(str(root))


def test_each_roboflow_split_folder_pairs_its_own_masks(tmp_path):
    red = (220, 30, 30)
    imgs = [Img("a.png", 20, 24, [("dog", (1, 1, 9, 9), red)], split="train"),
            Img("b.png", 20, 24, [("cat", (2, 2, 9, 9), red)], split="val")]
    yolo_job(str(tmp_path), imgs, names="data.yaml", masks="L")
    as_split_folders(str(tmp_path), "labels", {"val": "valid"})
    for old, new in (("train", "train"), ("val", "valid")):
        os.rename(tmp_path / "masks" / old, tmp_path / new / "masks")
    os.rmdir(tmp_path / "masks")
    job = read_job(str(tmp_path))
    assert job.rejected == {} and {"train/masks", "valid/masks", "train/labels", "valid/labels"} <= job.skip
    assert {k: os.path.relpath(a.mask, tmp_path) for k, a in job.annotations.items()} == {
        "train/images/a.png": "train/masks/a.png", "valid/images/b.png": "valid/masks/b.png"}


if __name__ == "__main__":
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        got = run_dota(Path(d))
        for split, v in got["manifest"]["splits"].items():
            print(f"{split}: images {v['images']}, records {v['records']}, rejected {v['rejected']}")
        print(f"oriented boxes of the originals: worst corner error {got['worst']:.3f} px")
