"""Issue 18, item 1 (second half): splits in one job. Top folders train/, validation/ (or val/), test/ holding
class folders (TFDS ImageFolder's layout) give one shard set per split and one label map; `split:` shares
assign a job without them by a stable hash of each path; only train is augmented unless `augment_splits` says
otherwise (issue 57: the other splits are written as they are)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from augd.errors import FailureReason, JobFailed
from augd.io import parse_example, read_records, split_of
from augd.job import JobOptions, run_job
from augd.schema import parse_pipeline
from tests.daemon_harness import make_image

PIPE = ("name: sp\nseed: 3\nvariants: 2\nkeep_original: true\noutput: {shards: 2, format: png}\n"
        "ops:\n  - random_flip_left_right: {}\n")


def _tree(root: Path, files: dict[str, int]) -> Path:
    for rel, seed in files.items():
        make_image(root / rel, seed=seed)
    return root


def _split_job(root: Path) -> Path:
    files = {f"train/{c}/{c}{i}.png": 10 * k + i for k, c in enumerate(("cat", "dog")) for i in range(3)}
    files.update({"val/cat/v0.png": 50, "test/dog/t0.png": 60, "test/dog/t1.png": 61, "train/loose.png": 70})
    return _tree(root, files)


def _records_by_shard(out: Path) -> dict[str, list[dict]]:
    return {p.name: [parse_example(r) for r in read_records(str(p))] for p in sorted(out.glob("*.tfrecord"))}


def test_split_folders_give_one_shard_set_per_split_and_one_label_map(tmp_path):
    job = _split_job(tmp_path / "job")
    (job / "stray.png").write_bytes((job / "val" / "cat" / "v0.png").read_bytes())
    spec = parse_pipeline(PIPE)   # no augment_splits: train only, the default
    r = run_job(str(job), spec, str(tmp_path / "out"), JobOptions(workers=2)).report
    out = tmp_path / "out" / "job"
    shards = _records_by_shard(out)
    assert sorted(shards) == [f"job-{s}-0000{i}-of-00002.tfrecord" for s in ("test", "train", "validation")
                              for i in (0, 1)]
    assert (out / "labels.txt").read_text() == "0:cat\n1:dog\n"
    assert {s: (v.images, v.records) for s, v in r.splits.items()} == {
        "train": (7, 21), "validation": (1, 1), "test": (2, 2)}
    assert r.splits["train"].shards == ("job-train-00000-of-00002.tfrecord", "job-train-00001-of-00002.tfrecord")
    assert {s: (v["augmented"], v["variants"]) for s, v in r.to_dict()["splits"].items()} == {
        "train": (True, [0, 1, 2]), "validation": (False, [0]), "test": (False, [0])}
    for name, recs in shards.items():
        split = name.split("-")[1]
        folder = {"train": "train/", "validation": "val/", "test": "test/"}[split]
        assert all(x["image/filename"].startswith(folder) for x in recs), name
        if split != "train":  # the default: the others are written as they are, their originals only
            assert {x["augd/variant"] for x in recs} <= {0}  # (one of the two shards may be empty)
            assert all(x["image/encoded"] == (job / x["image/filename"]).read_bytes() for x in recs), name
    train = [x for n, recs in shards.items() if "-train-" in n for x in recs]
    assert {x["augd/variant"] for x in train} == {0, 1, 2}
    labels = {x["image/filename"]: x["image/class/label"] for recs in shards.values() for x in recs}
    assert labels["test/dog/t0.png"] == labels["train/dog/dog0.png"] == 1 and labels["val/cat/v0.png"] == 0
    assert labels["train/loose.png"] == -1  # a file directly in a split folder: unlabeled, in that split
    assert [(x.relpath, x.reason) for x in r.inputs.rejected_files] == [("stray.png", "outside_splits")]


def test_split_jobs_write_the_same_bytes_whatever_the_workers(tmp_path):
    job = _split_job(tmp_path / "job")
    spec = parse_pipeline(PIPE)
    for w in (1, 3):
        run_job(str(job), spec, str(tmp_path / f"w{w}"), JobOptions(workers=w))
    one, three = (sorted((tmp_path / f"w{w}" / "job").glob("*.tfrecord")) for w in (1, 3))
    assert [p.name for p in one] == [p.name for p in three]
    assert all(a.read_bytes() == b.read_bytes() for a, b in zip(one, three))


def test_split_shares_assign_by_a_stable_hash_of_the_path():
    paths = [f"cls{i % 3}/img{i:04d}.jpg" for i in range(2000)]
    shares = (("train", 0.8), ("validation", 0.1), ("test", 0.1))
    first = [split_of(p, shares) for p in paths]
    assert first == [split_of(p, shares) for p in paths], "a re-run assigns the same"
    for name, share in shares:
        assert abs(first.count(name) / len(paths) - share) < 0.03, name
    assert split_of("cls0/img0000.jpg", shares) == first[0], "independent of the other images"


def test_a_job_without_split_folders_is_split_by_shares(tmp_path):
    job = _tree(tmp_path / "job", {f"{c}/{c}{i}.png": 10 * k + i for k, c in enumerate(("a", "b")) for i in range(8)})
    spec = parse_pipeline(PIPE + "split: {train: 0.75, validation: 0.25}\n")
    m = run_job(str(job), spec, str(tmp_path / "out")).report
    expect = {}
    for i in range(8):
        for c in ("a", "b"):
            s = split_of(f"{c}/{c}{i}.png", (("train", 0.75), ("validation", 0.25)))
            expect[s] = expect.get(s, 0) + 1
    assert {s: v.images for s, v in m.splits.items()} == expect
    assert m.pipeline["split"] == {"train": 0.75, "validation": 0.25}
    (job / "a" / "late.png").write_bytes((job / "a" / "a0.png").read_bytes())  # an added image moves no other
    m2 = run_job(str(job), spec, str(tmp_path / "out2")).report
    added = split_of("a/late.png", (("train", 0.75), ("validation", 0.25)))
    assert {s: v.images for s, v in m2.splits.items()} == {s: n + (s == added) for s, n in expect.items()}


def test_split_folders_and_split_shares_together_are_refused(tmp_path):
    job = _split_job(tmp_path / "job")
    with pytest.raises(JobFailed, match="has split folders") as e:
        run_job(str(job), parse_pipeline(PIPE + "split: {train: 0.5, test: 0.5}\n"), str(tmp_path / "out"))
    assert e.value.reason is FailureReason.BAD_PIPELINE


def test_a_class_called_test_alone_is_a_class_not_a_split(tmp_path):
    job = _tree(tmp_path / "job", {"test/x.png": 1, "other/y.png": 2})
    m = run_job(str(job), parse_pipeline(PIPE), str(tmp_path / "out")).report
    assert "splits" not in m.to_dict() and [c.name for c in m.classes] == ["other", "test"]
    assert sorted(os.listdir(tmp_path / "out" / "job"))[1:3] == ["job-00000-of-00002.tfrecord",
                                                                  "job-00001-of-00002.tfrecord"]


def test_the_loader_reads_one_split(tmp_path):
    import augd.data
    job = _split_job(tmp_path / "job")
    # a pipeline that asks for every split to be augmented gets it
    run_job(str(job), parse_pipeline(PIPE + "augment_splits: [train, validation, test]\n"), str(tmp_path / "out"))
    ds, info = augd.data.load(str(tmp_path / "out" / "job"), split="test", image_size=(16, 16), batch_size=None,
                              with_info=True)
    assert sum(1 for _ in ds) == 6 and info.split_records == {"test": 6, "train": 21, "validation": 3}


def test_the_split_layout_is_decided_by_folder_names_alone(tmp_path):
    """An empty test/ (or one holding only loose files) must not turn train/'s classes into a class "train";
    val/ beside validation/ is one split twice and is refused."""
    from augd.io import scan_job
    job = _tree(tmp_path / "job", {"train/cat/a.png": 1, "train/dog/b.png": 2, "validation/c.png": 3})
    (job / "test").mkdir()
    scan = scan_job(str(job))
    assert scan.splits == ("train", "validation", "test") and scan.classes == ("cat", "dog")
    assert {i.relpath: (i.split, i.label) for i in scan.images} == {
        "train/cat/a.png": ("train", 0), "train/dog/b.png": ("train", 1), "validation/c.png": ("validation", -1)}
    _tree(job, {"val/cat/d.png": 4})
    with pytest.raises(JobFailed, match="both val/ and validation/") as e:
        scan_job(str(job))
    assert e.value.reason is FailureReason.BAD_LABELS


def test_roboflows_classification_export_splits_by_its_valid_folder(tmp_path):
    """Roboflow's (and Ultralytics') classification export: train/, valid/, test/ of class folders; valid/ is the
    validation split, as val/ is (one name table for the scan and the annotation layouts)."""
    from augd.io import scan_job
    job = _tree(tmp_path / "job", {"train/cat/a.png": 1, "train/dog/b.png": 2, "valid/cat/c.png": 3,
                                   "test/dog/d.png": 4})
    scan = scan_job(str(job))
    assert scan.classes == ("cat", "dog")
    assert {i.relpath: (i.split, i.label) for i in scan.images} == {
        "train/cat/a.png": ("train", 0), "train/dog/b.png": ("train", 1), "valid/cat/c.png": ("validation", 0),
        "test/dog/d.png": ("test", 1)}
    _tree(job, {"val/cat/e.png": 5})
    with pytest.raises(JobFailed, match="both val/ and valid/ hold the validation split") as e:
        scan_job(str(job))
    assert e.value.reason is FailureReason.BAD_LABELS


def test_a_split_job_named_like_a_pipeline_is_not_taken_for_a_misspelt_routing_folder(tmp_path):
    from augd.daemon.routing import resolve_pipeline
    for name in ("normalise", "normalize-v2"):
        job = _tree(tmp_path / name, {"train/cat/a.png": 1, "val/cat/b.png": 2})
        spec, how = resolve_pipeline(str(job), None, "normalize")
        assert (spec.name, how) == ("normalize", "default"), name
