"""Classification jobs through the partner ops and class balance (augd/ops/mixing.py, augd/job/mixing.py,
augd/job/balance.py), by the pixels: a mixed record names both labels with the shares its pixels show, the loader
turns them into soft targets, rare partners come up more often, and balance evens a skewed job's classes.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import cv2
import numpy as np
import pytest

from augd.schema import parse_pipeline
from tests.annotated import Img, Shape, voc_job
from tests.test_mixing import (CLASS_COLOURS, GREY, PALETTE, TOL, _files, check_boxes, colours_of, pipeline, records,
                               run)
from tests.test_mixing import classes_job  # noqa: F401  (a fixture)


@pytest.mark.parametrize("op", ["mosaic", "cutmix", "mixup"])
def test_classification_records_name_both_labels_with_the_shares_the_pixels_show(classes_job, tmp_path, op):
    out = run(classes_job, pipeline(op, variants=2), tmp_path / "out", executor="threads")
    names = sorted(CLASS_COLOURS)                  # labels.txt: class folders in sorted order
    checked = 0
    for r in records(out):
        if r["augd/variant"] == 0:
            assert "augd/mix/label" not in r
            continue
        labels, texts, shares = r["augd/mix/label"], r["augd/mix/text"], r["augd/mix/weight"]
        assert labels[0] == r["image/class/label"] and [names[k] for k in labels] == texts
        assert len(r["augd/partners"]) == len(labels) - 1 and abs(sum(shares) - 1.0) < 1e-5
        px = r["pixels"].astype(float)
        per_class = {}
        for name, share in zip(texts, shares):
            per_class[name] = per_class.get(name, 0.0) + share
        if op == "mixup":   # every pixel is the blend of the two colours by their shares
            want = sum(share * np.array(CLASS_COLOURS[t]) for t, share in zip(texts, shares))
            assert np.abs(px - want).max() <= 2.0
        else:               # each class's share is its share of the (non-fill) pixels
            counts = {n: np.all(np.abs(px - c) <= TOL, axis=2).sum() for n, c in CLASS_COLOURS.items()}
            total = sum(counts.values())
            for name in CLASS_COLOURS:
                assert abs(counts[name] / total - per_class.get(name, 0.0)) <= 0.04, (name, counts, per_class)
        checked += 1
    assert checked == 9 * 2


def test_the_loader_turns_mixed_labels_into_soft_one_hot_targets(classes_job, tmp_path):
    import augd.data
    out = run(classes_job, pipeline("cutmix", variants=2), tmp_path / "out", executor="threads")
    want = []
    for r in records(out):
        row = np.zeros(3, np.float32)
        if r["augd/variant"] == 0:
            row[r["image/class/label"]] = 1.0
        else:
            for k, share in zip(r["augd/mix/label"], r["augd/mix/weight"]):
                row[k] += share
        want.append(row)
    ds = augd.data.load(str(out), image_size=(32, 32), batch_size=None, labels="one_hot")
    got = [y.numpy() for _, y in ds]
    assert len(got) == len(want) and sum(np.max(g) < 1.0 for g in got) >= 9
    assert sorted(map(tuple, np.round(got, 5))) == sorted(map(tuple, np.round(want, 5)))
    ints = [int(y) for _, y in augd.data.load(str(out), image_size=(32, 32), batch_size=None, labels="int")]
    assert sorted(ints) == sorted(int(r["image/class/label"]) for r in records(out))


def test_rare_partners_draw_the_rare_class_more_often(tmp_path):
    """partners: rare weighs each image by 1 / its split's count of its rarest class: with 7 red images to 1
    blue, the blue one partners far more often than a uniform draw gives it."""
    root = tmp_path / "job"
    for name, colour, n in (("red", (235, 20, 20), 7), ("blue", (20, 20, 235), 1)):
        (root / name).mkdir(parents=True)
        for i in range(n):
            rgb = np.full((32, 32, 3), colour, np.uint8)
            cv2.imwrite(str(root / name / f"{name}{i}.png"), rgb[..., ::-1])
    blue = hashlib.sha256((root / "blue" / "blue0.png").read_bytes()).hexdigest()
    counts = {}
    for how in ("uniform", "rare"):
        spec = parse_pipeline(f"name: t\nseed: 1\nvariants: 6\nkeep_original: false\nops:\n"
                              f"  - mixup: {{partners: {how}}}\n")
        out = run(root, spec, tmp_path / how, executor="threads")
        counts[how] = sum(r["augd/partners"].count(blue) for r in records(out))
    assert counts["rare"] >= 2 * counts["uniform"] and counts["rare"] >= 15, counts


# --- class balance ------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def skewed(tmp_path_factory) -> Path:
    """14 red images to 2 blue (7:1), in class folders."""
    root = tmp_path_factory.mktemp("skew") / "job"
    for name, colour, n in (("red", (235, 20, 20), 14), ("blue", (20, 20, 235), 2)):
        (root / name).mkdir(parents=True)
        for i in range(n):
            cv2.imwrite(str(root / name / f"{name}{i}.png"), np.full((24, 32 + i, 3), colour[::-1], np.uint8))
    return root


def test_balance_brings_a_seven_to_one_ratio_within_two_to_one(skewed, tmp_path):
    import json
    import subprocess
    import sys
    spec = parse_pipeline("name: b\nseed: 2\nvariants: 2\nbalance: {max_variants: 20}\noutput: {format: png}\n"
                          "ops:\n  - random_flip_left_right: {}\n")
    out = run(skewed, spec, tmp_path / "a", executor="threads")
    per = {}
    for r in records(out):
        per[r["image/class/text"]] = per.get(r["image/class/text"], 0) + 1
    assert per == {"red": 14 * 3, "blue": 2 * 15}                     # blue: 2 x 14 / 2 = 14 variants each
    assert max(per.values()) / min(per.values()) <= 2.0
    m = json.loads((out / "manifest.json").read_text())
    assert m["balance"]["all"]["before"] == {"blue": 6, "red": 42} and m["balance"]["all"]["after"] == per
    assert m["records"]["written"] == sum(per.values())
    blue = {r["augd/variant"] for r in records(out) if r["image/class/text"] == "blue"}
    assert blue == set(range(15))                                      # variants 0..14, each seeded as any
    # the same bytes on worker processes and on a rerun; inspect prints the counts
    assert _files(run(skewed, spec, tmp_path / "b", executor="processes", workers=2)) == _files(out)
    shown = subprocess.run([sys.executable, "-m", "augd", "inspect", str(out)], capture_output=True, text=True,
                           env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert "balance (all): before blue=6, red=42; after blue=30, red=42" in shown.stdout, shown.stdout + shown.stderr


def test_balance_counts_objects_in_a_detection_job(tmp_path):
    """6 images with a cat each, one of them with an owl too: the owl's image gets max_variants (4, below the
    6 its 1:6 ratio asks), the others `variants`; the boxes of every variant still match the pixels."""
    import json
    imgs = [Img(f"im{i}.png", 64, 80, (Shape("cat", (6 + i, 8, 30 + i, 30), PALETTE[i]),)
                + ((Shape("owl", (40, 30, 70, 56), PALETTE[10]),) if i == 3 else ()), background=GREY)
            for i in range(6)]
    voc_job(str(tmp_path / "job"), imgs)
    spec = parse_pipeline("name: b\nseed: 2\nvariants: 1\nkeep_original: false\nbalance: {max_variants: 4}\n"
                          "output: {format: png}\nops:\n  - random_rotation: {degrees: 10}\n")
    out = run(tmp_path / "job", spec, tmp_path / "out", executor="threads")
    b = json.loads((out / "manifest.json").read_text())["balance"]["all"]
    assert b == {"before": {"cat": 6, "owl": 1}, "after": {"cat": 9, "owl": 4}, "images_with_more_variants": 1}
    recs = records(out)
    assert len(recs) == 9 and check_boxes(recs, colours_of(imgs)) >= 13
