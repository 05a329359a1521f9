"""Keypoint jobs as users run them: COCO person keypoints and Ultralytics pose folders through `augd run` with the
shipped pose pipeline, through a real daemon's inbox, and the label files that disagree (tests/posed.py draws them;
tests/test_keypoints.py holds the geometry's truth in the pixels).
"""
from __future__ import annotations

import json
import subprocess
import sys
from multiprocessing import resource_tracker
from pathlib import Path

import pytest

from augd.io import read_records
from augd.io.records import parse_example
from augd.job import JobOptions, run_job
from augd.schema import parse_pipeline
from tests.daemon_harness import Daemon, no_leaked_children_module, write_config  # noqa: F401
from tests.posed import FLIP, NAMES, coco_pose_job, people, yolo_pose_job

REPO = Path(__file__).resolve().parent.parent
# started before any test: multiprocessing's resource tracker lives as long as pytest, no child this module leaks
resource_tracker.ensure_running()
CHAIN = "name: kp-jobs\nseed: 5\nvariants: 5\noutput: {format: png, shards: 2}\nops:\n  - random_flip_left_right: {}\n"


def _pose_jobs(root: Path) -> dict[str, str]:
    coco_pose_job(str(root / "people"), people(3, seed=7))
    yolo_pose_job(str(root / "poses"), people(3, seed=8))
    return {"people": "coco", "poses": "yolo"}


def _check_pose_output(folder: Path, fmt: str) -> None:
    m = json.loads((folder / "manifest.json").read_text())
    assert m["annotations"]["format"] == fmt and m["inputs"]["rejected"] == 0
    kp = m["annotations"]["keypoints"]
    assert kp["names"] == list(NAMES) and kp["flip"] == list(FLIP) and kp["labelled"]["out"] > 0
    records = [parse_example(r) for r in read_records(folder)]
    assert len(records) == 3 * 5 and all(len(r["image/object/keypoint/x"]) == len(NAMES) for r in records)
    assert {r["image/height"] for r in records if r["augd/variant"]} == {512}


def test_augd_run_writes_a_coco_and_a_yolo_pose_job_with_the_pose_pipeline(tmp_path):
    for name, fmt in _pose_jobs(tmp_path).items():
        out = subprocess.run([sys.executable, "-m", "augd", "run", str(tmp_path / name), "--pipeline", "pose",
                              "--out", str(tmp_path / "datasets")], capture_output=True, text=True, timeout=300,
                             cwd=REPO)
        assert out.returncode == 0, out.stderr[-3000:]
        _check_pose_output(tmp_path / "datasets" / name, fmt)


def test_a_real_daemon_writes_a_coco_and_a_yolo_pose_job_dropped_into_its_inbox(tmp_path):
    jobs = _pose_jobs(tmp_path / "stage")
    d = Daemon(write_config(tmp_path / "d", settle_seconds=0.5)).start()
    try:
        d.wait_ready()
        (d.inbox / "pose").mkdir(parents=True, exist_ok=True)
        for name in jobs:
            (tmp_path / "stage" / name).rename(d.inbox / "pose" / name)
        for name, fmt in jobs.items():
            d.wait_done(name, timeout=240)
            _check_pose_output(d.out / name, fmt)
    finally:
        assert d.stop() == 0, d.log_tail()


def test_yolo_points_without_visibility_and_coco_categories_that_disagree(tmp_path):
    from augd.annotations.yolo import read_yolo
    label = tmp_path / "a.txt"
    label.write_text("0 0.5 0.5 0.5 0.5 0.25 0.5 0 0\n")
    ann = read_yolo(str(label), "labels/a.txt", ("person",), (80, 100), (2, 2))
    assert ann.objects[0].keypoints == ((25.0, 40.0, 2), (0.0, 0.0, 0))     # (0, 0) in a 2-number point: none
    coco_pose_job(str(tmp_path / "p"), people(2, seed=10))
    doc = json.loads((tmp_path / "p" / "person_keypoints.json").read_text())
    doc["categories"].append({"id": 2, "name": "cat", "keypoints": ["nose", "tail"]})
    (tmp_path / "p" / "person_keypoints.json").write_text(json.dumps(doc))
    from augd.errors import JobFailed
    with pytest.raises(JobFailed, match="category 'cat' names the keypoints \\['nose', 'tail'\\] but 'person'") as err:
        run_job(str(tmp_path / "p"), parse_pipeline(CHAIN), str(tmp_path / "o"), JobOptions(workers=1))
    assert err.value.reason == "bad_labels"
