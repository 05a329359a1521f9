"""Near-miss annotations repaired by rule (augd/annotations/repair.py), as a user meets them: boxes a pixel or two
past the border (what several annotation tools export), duplicate label rows, empty boxes. Repaired and counted by
default (the manifest's annotations.repairs, `augd inspect`); `repair: none` rejects those images as before; what
is further out stays a rejection whose message names the limit."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from augd.annotations.layout import read_job
from augd.annotations.repair import border
from tests.annotated import Img, Shape, coco_job, yolo_job

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "augd" / "samples" / "detection"
RED, GREEN = (220, 30, 30), (30, 200, 30)


def _near_miss_voc(root: Path, past: int, n: int = 3) -> list[str]:
    """The shipped VOC sample with the first object's xmax of `n` images `past` pixels beyond the right edge."""
    shutil.copytree(SAMPLE, root)
    changed = []
    for xml in sorted((root / "Annotations").glob("*.xml"))[:n]:
        text = xml.read_text()
        width = int(re.search(r"<width>(\d+)</width>", text).group(1))
        xml.write_text(re.sub(r"<xmax>\d+</xmax>", f"<xmax>{width + past}</xmax>", text, count=1))
        changed.append(f"JPEGImages/{xml.stem}.jpg")
    return changed


def _augd(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "augd", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


def test_boxes_two_pixels_past_the_border_are_clipped_and_counted_not_rejected(tmp_path):
    changed = _near_miss_voc(tmp_path / "voc", past=2)
    pipe = tmp_path / "p.yaml"
    pipe.write_text("name: near\nseed: 1\nvariants: 1\noutput: {format: png}\nops:\n  - random_flip_left_right: {}\n")
    r = _augd("run", tmp_path / "voc", "-p", pipe, "-o", tmp_path / "out", "--quiet", "--executor", "threads")
    assert r.returncode == 0, r.stderr[-2000:]
    m = json.loads((tmp_path / "out" / "voc" / "manifest.json").read_text())
    assert m["inputs"]["rejected_files"] == []
    assert m["annotations"]["repairs"] == {"objects": 3, "by_reason": {"clipped": 3},
                                           "images": {c: {"clipped": 1} for c in changed}}
    shown = _augd("inspect", tmp_path / "out" / "voc")
    assert "annotations repaired: 3 object(s) in 3 image(s): clipped=3" in shown.stdout, shown.stdout
    assert all(f"    {c}: clipped=1" in shown.stdout for c in changed)
    # the same job, strict: the three images are rejected with today's message
    strict = tmp_path / "strict.yaml"
    strict.write_text(pipe.read_text() + "annotations: {repair: none}\n")
    r = _augd("run", tmp_path / "voc", "-p", strict, "-o", tmp_path / "strict", "--quiet", "--executor", "threads")
    assert r.returncode == 0, r.stderr[-2000:]
    m = json.loads((tmp_path / "strict" / "voc" / "manifest.json").read_text())
    rejected = {x["path"]: x["message"] for x in m["inputs"]["rejected_files"]}
    assert sorted(rejected) == changed and all("by more than 1 pixel" in v for v in rejected.values()), rejected
    assert m["annotations"]["repairs"]["objects"] == 0


def test_farther_out_stays_a_rejection_that_names_the_limit(tmp_path):
    changed = _near_miss_voc(tmp_path / "voc", past=9, n=1)
    job = read_job(str(tmp_path / "voc"), repair=True)
    assert list(job.rejected) == changed and not job.repaired
    assert "passes the border of the 160x120 image by more than 4 pixels (annotations.repair clips up to 4 px or " \
           "0.5% of a side" in job.rejected[changed[0]]


def test_the_limit_grows_with_the_side_on_large_images(tmp_path):
    """0.5 % of a 2400 px side is 12 px: 10 px past it is clipped, 14 px is refused."""
    assert border(160) == 4.0 and border(2400) == 12.0
    imgs = [Img("wide.png", 40, 2400, [Shape("dog", (2300, 5, 2410, 30), RED)]),
            Img("far.png", 40, 2400, [Shape("dog", (2300, 5, 2414, 30), RED)])]
    coco_job(str(tmp_path), imgs)
    job = read_job(str(tmp_path), repair=True)
    assert job.repaired == {"images/wide.png": {"clipped": 1}} and list(job.rejected) == ["images/far.png"]
    assert job.annotations["images/wide.png"].objects[0].box == (2300.0, 5.0, 2400.0, 30.0)


def test_duplicate_rows_and_empty_boxes_are_dropped_and_counted(tmp_path):
    yolo_job(str(tmp_path / "yolo"), [Img("a.png", 60, 80, [Shape("dog", (10, 10, 40, 40), RED),
                                                            Shape("cat", (45, 5, 75, 50), GREEN)])])
    labels = tmp_path / "yolo" / "labels" / "a.txt"
    rows = labels.read_text().splitlines()
    labels.write_text("\n".join([rows[0], rows[1], rows[0], rows[0], "1 0.5 0.5 0 0.2"]) + "\n")  # 2 dupes, 1 empty
    job = read_job(str(tmp_path / "yolo"), repair=True)
    assert job.repaired == {"images/a.png": {"degenerate": 1, "duplicate": 2}}
    assert [o.name for o in job.annotations["images/a.png"].objects] == ["dog", "cat"]
    strict = read_job(str(tmp_path / "yolo"))
    assert "images/a.png" in strict.rejected and "labels/a.txt: line 5 (cat): box (40, 24, 40, 36) is empty" in \
        strict.rejected["images/a.png"], strict.rejected
    coco_job(str(tmp_path / "coco"), [Img("b.png", 40, 40, [Shape("dog", (5, 5, 20, 20), RED)])])
    data = json.loads((tmp_path / "coco" / "instances.json").read_text())
    data["annotations"].append({**data["annotations"][0], "id": 9, "bbox": [3, 3, 0, 10]})
    data["annotations"].append({**data["annotations"][0], "id": 10, "bbox": [3, 3, -1, 10]})   # inverted: no
    (tmp_path / "coco" / "instances.json").write_text(json.dumps(data))
    job = read_job(str(tmp_path / "coco"), repair=True)
    assert "must be >= 0" in job.rejected["images/b.png"] and not job.repaired
    data["annotations"].pop()
    (tmp_path / "coco" / "instances.json").write_text(json.dumps(data))
    job = read_job(str(tmp_path / "coco"), repair=True)
    assert job.repaired == {"images/b.png": {"degenerate": 1}}
    assert np.allclose(job.annotations["images/b.png"].objects[0].box, (5, 5, 20, 20))


def test_a_later_message_still_names_the_right_object_after_a_duplicate_is_dropped(tmp_path):
    """Dropping objects keeps each survivor's own words for it (a label map check names line 3, not line 2)."""
    from augd.annotations.labelmap import LabelMap
    yolo_job(str(tmp_path), [Img("a.png", 60, 80, [Shape("dog", (10, 10, 40, 40), RED),
                                                   Shape("cat", (45, 5, 75, 50), GREEN)])])
    labels = tmp_path / "labels" / "a.txt"
    rows = labels.read_text().splitlines()
    labels.write_text("\n".join([rows[0], rows[0], rows[1]]) + "\n")
    job = read_job(str(tmp_path), repair=True, label_map=LabelMap({"dog": 1}))
    assert "labels/a.txt: line 3 (cat)" in job.rejected["images/a.png"], job.rejected


@pytest.mark.parametrize("value", ["standard", "none"])
def test_repair_is_a_pipeline_setting_kept_out_of_the_sha_unless_set(value):
    from augd.schema import parse_pipeline
    plain = parse_pipeline("name: t\nannotations: {min_size: 2}\nops: []\n", "t.yaml")
    set_ = parse_pipeline(f"name: t\nannotations: {{min_size: 2, repair: {value}}}\nops: []\n", "t.yaml")
    assert plain.annotations.value("repair") == "standard" and set_.annotations.value("repair") == value
    assert "repair" not in plain.normalized()["annotations"] and set_.normalized()["annotations"]["repair"] == value
