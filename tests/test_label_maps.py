"""Issue 18, item 1 (first half): label maps that hold across jobs. A fixed map (a labels.txt, a list in the job's
augd.yaml, the pipeline, the daemon config or `augd run --labels`) gives every job the same ids; a class folder
missing from it fails the job naming the folder; a class of the map with no images keeps its id."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from augd.errors import JobFailed, SpecError
from augd.io import parse_example
from augd.labels import LabelMapError, label_map, parse_labels_txt
from augd.schema import parse_pipeline
from tests.daemon_harness import (Daemon, drop_job, make_image, manifest, no_leaked_children,  # noqa: F401
                                  no_leaked_children_module, write_config)
from tests.jobfiles import augd, records

PIPE = "name: {name}\nvariants: 0\nkeep_original: true\noutput: {{shards: 1}}\nops: []\n"


def _labels_of(out_dir: Path) -> dict[str, int]:
    """relative path -> label, read back from the records themselves."""
    return {ex["image/filename"]: int(ex["image/class/label"])
            for ex in (parse_example(r) for r in records(str(out_dir)))}


def _job(root: Path, classes: dict[str, int]) -> Path:
    for cls, n in classes.items():
        for i in range(n):
            make_image(root / cls / f"{cls}{i}.png", seed=hash((cls, i)) % 1000)
    return root


def test_a_train_and_a_validation_job_share_ids_through_labels_txt(tmp_path):
    """The case docs/pipelines.md tells: `coffee` was 2 in train and 1 in a validation set without `cat`."""
    _job(tmp_path / "train", {"cat": 2, "coffee": 2, "dog": 1})
    _job(tmp_path / "validation", {"coffee": 1, "dog": 1})
    out = tmp_path / "out"
    assert augd("run", str(tmp_path / "train"), "-p", "normalize", "-o", str(out), "-q").returncode == 0
    labels_txt = out / "train" / "labels.txt"
    r = augd("run", str(tmp_path / "validation"), "-p", "normalize", "-o", str(out), "-q", "--labels", str(labels_txt))
    assert r.returncode == 0, r.stderr
    assert (out / "validation" / "labels.txt").read_text() == labels_txt.read_text() == "0:cat\n1:coffee\n2:dog\n"
    assert _labels_of(out / "validation") == {"coffee/coffee0.png": 1, "dog/dog0.png": 2}
    m = manifest(out, "validation")
    assert [(c["label"], c["name"], c["images"]) for c in m["classes"]] == [(0, "cat", 0), (1, "coffee", 1),
                                                                            (2, "dog", 1)]
    assert m["pipeline"]["labels"] == ["cat", "coffee", "dog"]


def test_a_class_folder_missing_from_the_map_fails_the_job_naming_it(tmp_path):
    _job(tmp_path / "job", {"cat": 1, "ferret": 1})
    r = augd("run", str(tmp_path / "job"), "-p", "normalize", "-o", str(tmp_path / "out"), "--labels", "cat,dog")
    assert r.returncode == 1
    assert "class folder(s) 'ferret' not in the label map (cat, dog)" in r.stderr
    assert not (tmp_path / "out" / "job").exists()
    from augd.job import run_job
    with pytest.raises(JobFailed) as e:
        run_job(str(tmp_path / "job"), parse_pipeline(PIPE.format(name="p") + "labels: [cat]\n"), str(tmp_path / "o"))
    assert e.value.reason == "bad_labels"


def test_label_map_files_and_lists_are_checked(tmp_path):
    assert parse_labels_txt("0:cat\n1:dog\n", "l.txt") == ("cat", "dog")
    assert parse_labels_txt("cat\ndog\n", "l.txt") == ("cat", "dog")
    for text, says in (("0:cat\n2:dog\n", "ids must be 0, 1, 2"), ("cat\ncat\n", "listed twice"), ("", "empty"),
                       ("0:a/b\n", "folder name")):
        with pytest.raises(LabelMapError, match=says):
            parse_labels_txt(text, "l.txt")
    with pytest.raises(LabelMapError, match="cannot read"):
        label_map("missing.txt", str(tmp_path), "x")
    with pytest.raises(SpecError, match=r"p.yaml:6: labels: class 'cat' is listed twice"):
        parse_pipeline(PIPE.format(name="p") + "labels: [cat, cat]\n", "p.yaml")


def test_a_pipeline_without_labels_keeps_its_identity():
    plain = parse_pipeline(PIPE.format(name="p"))
    assert "labels" not in plain.normalized()
    assert plain.with_labels(None) is plain
    assert plain.with_labels(("a",)).sha256 != plain.sha256  # the ids are part of what the records mean


def test_in_the_daemon_the_jobs_map_wins_over_the_pipelines_over_the_configs(tmp_path):
    cfg = write_config(tmp_path, settle_seconds=0.5, labels=["ant", "bee", "cat"])
    (tmp_path / "pipelines" / "mapped.yaml").write_text(PIPE.format(name="mapped") + "labels: [cat, bee]\n")
    d = Daemon(cfg).start()
    try:
        d.wait_ready(timeout=120)
        jobs = {"by-config": ("by-config", None), "by-pipeline": ("mapped/by-pipeline", None),
                "by-job-list": ("by-job-list", "labels: [bee]\n"),
                "by-job-file": ("mapped/by-job-file", "labels: my-labels.txt\n")}
        for name, (rel, job_yaml) in jobs.items():
            staging = tmp_path / "staging" / name
            drop_job(staging.parent, name, n=1, classes=("bee",))
            if job_yaml:
                (staging / "augd.yaml").write_text(job_yaml)
                (staging / "my-labels.txt").write_text("0:zebra\n1:bee\n")
            (tmp_path / "inbox" / rel).parent.mkdir(parents=True, exist_ok=True)
            os.rename(staging, tmp_path / "inbox" / rel)
        for name in jobs:
            d.wait_done(name, timeout=90)
        got = {name: json.loads((d.out / name / "manifest.json").read_text())["pipeline"]["labels"]
               for name in jobs}
        assert got == {"by-config": ["ant", "bee", "cat"], "by-pipeline": ["cat", "bee"], "by-job-list": ["bee"],
                       "by-job-file": ["zebra", "bee"]}
        assert _labels_of(d.out / "by-config") == {"bee/img0000.png": 1}
        assert _labels_of(d.out / "by-job-file") == {"bee/img0000.png": 1}
    finally:
        assert d.stop() == 0, d.log_tail()
