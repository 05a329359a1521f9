"""Partner ops (mosaic, mixup, cutmix: augd/ops/mixing.py, augd/job/mixing.py) through run_job, by the pixels.

Every object of every scene has a colour of its own (so a record's box can be told apart from every other object's
by its pixels) on a grey background; the partners' sources are PNGs and large JPEGs (decoded at a reduced DCT scale
for their tile). After each op every box agrees within 2 px with the extent of its object's colour in the decoded
record, no visible coloured object is left without its box, masks cover their objects' pixels, no partner crosses
a split, and threads, worker processes and a rerun write the same bytes.
"""
from __future__ import annotations

import dataclasses
import hashlib
import itertools
import os
from pathlib import Path

import cv2
import numpy as np
import pytest

from augd.io.lite import decode_example, iter_records
from augd.job import JobOptions, run_job
from augd.schema import SpecError, parse_pipeline
from tests.annotated import Img, Shape, coco_job, voc_job

GREY = (128, 128, 128)
#: 19 colours at least 100 apart in some channel, none near the grey background (nor a blend of one with it) or the
#: black a rotation fills with
PALETTE = [c for c in itertools.product((20, 120, 235), repeat=3) if c.count(120) <= 1 and c != (20, 20, 20)]
TOL = 30        # a channel's distance from an object's colour still counted as its pixel
SLACK = 2.0     # px between a box and its object's pixel extent (bilinear edges, reduced JPEG decodes)


def scenes() -> list[Img]:
    """8 images, 6 train (4 of them large JPEGs) and 2 val; each holds 2 objects of colours of their own. The
    class `owl` lives in val only."""
    out, colours = [], iter(PALETTE)
    for i in range(8):
        big = i in (1, 3, 4, 5)
        h, w, k = (240, 300, 3.5) if big else (64, 80, 1.0)
        split = "train" if i < 6 else "val"
        second = "owl" if split == "val" else "dog"
        shapes = (Shape("cat", tuple(int(v * k) for v in (6 + i, 8, 30 + i, 30)), next(colours)),
                  Shape(second, tuple(int(v * k) for v in (40, 24 + i, 70, 56)), next(colours)))
        out.append(Img(f"im{i}.{'jpg' if big else 'png'}", h, w, shapes, split=split, background=GREY))
    return out


def records(folder: Path) -> list[dict]:
    out = []
    for name in sorted(os.listdir(folder)):
        if ".tfrecord" in name:
            for r in iter_records(str(folder / name)):
                ex = decode_example(r)
                ex["pixels"] = cv2.imdecode(np.frombuffer(ex["image/encoded"], np.uint8), cv2.IMREAD_COLOR)[..., ::-1]
                out.append(ex)
    return out


def _extent(hit: np.ndarray):
    ys, xs = np.nonzero(hit)
    return None if not len(xs) else np.array([xs.min(), ys.min(), xs.max() + 1, ys.max() + 1], float)


def check_boxes(recs, objects, slack: float = SLACK) -> int:
    """Each box holds pixels of one object colour of its class whose extent (within the box and SLACK around it)
    is the box, within SLACK; each patch of an object colour of more than a sliver lies in such a box of its class
    (an image may show twice in a mosaic of a small split). `objects`: {colour: class}. Returns the boxes checked."""
    checked = 0
    for r in recs:
        px = r["pixels"].astype(int)
        h, w = px.shape[:2]
        where = f"{r['image/filename']} variant {r['augd/variant']}"
        boxes = np.stack([r[f"image/object/bbox/{k}"] for k in ("xmin", "ymin", "xmax", "ymax")], -1).reshape(-1, 4)
        boxes = boxes * [w, h, w, h]
        texts = r["image/object/class/text"]
        hits = {c: np.all(np.abs(px - c) <= TOL, axis=2) for c in objects}
        matched = []
        for k, b in enumerate(boxes):
            if min(b[2] - b[0], b[3] - b[1]) < 3:   # a sliver: its pixels are edges, blended
                matched.append((texts[k], b))
                continue
            x0, y0 = (max(int(v - slack - 1), 0) for v in b[:2])
            x1, y1 = int(min(b[2] + slack + 1, w)), int(min(b[3] + slack + 1, h))
            ok = False
            for colour, cls in objects.items():
                ext = _extent(hits[colour][y0:y1, x0:x1]) if cls == texts[k] else None
                if ext is not None and np.abs(ext + [x0, y0, x0, y0] - b).max() <= slack:
                    ok = True
                    matched.append((cls, b))
                    break
            assert ok, f"{where}: {texts[k]} box {b.tolist()} is no object's pixel extent"
            checked += 1
        for colour, cls in objects.items():
            n, _, stats, _ = cv2.connectedComponentsWithStats(hits[colour].astype(np.uint8), connectivity=8)
            for x, y, cw, ch, area in stats[1:]:
                if area < 9:
                    continue
                ext = np.array([x, y, x + cw, y + ch], float)
                assert any(c == cls and np.all(ext[:2] >= b[:2] - slack) and np.all(ext[2:] <= b[2:] + slack)
                           for c, b in matched), f"{where}: {cls} {colour} shows at {ext} in no {cls} box"
    return checked


def colours_of(images) -> dict:
    return {s.colour: s.cls for img in images for s in img.objects()}


PIPELINES = {
    "mosaic": "  - mosaic: {size: [128, 128]}\n  - random_flip_left_right: {}\n  - random_rotation: {degrees: 8}\n",
    "cutmix": "  - cutmix: {area: [0.2, 0.5]}\n  - random_flip_left_right: {}\n",
    "mixup": "  - mixup: {weight: [0.3, 0.5]}\n",
}


#: These tests judge the geometry by the pixels: every remnant keeps its box (an object with any pixel showing has
#: one), so the drop rule's defaults (min_visibility 0.3, min_size 2: tests/test_occlusion.py) are turned off.
KEEP_REMNANTS = "annotations: {min_visibility: 0, min_size: 1}\n"


def pipeline(op: str, variants: int = 3, fmt: str = "png"):
    # validation augmented too (not the default): its records must draw their partners from validation alone
    return parse_pipeline(f"name: t-{op}\nseed: 5\nvariants: {variants}\noutput: {{format: {fmt}}}\n"
                          f"augment_splits: [train, validation]\nops:\n{PIPELINES[op]}{KEEP_REMNANTS}")


@pytest.fixture(scope="module")
def voc(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("mix") / "job"
    voc_job(str(root), scenes())
    return root


def run(job: Path, spec, out: Path, **options) -> Path:
    run_job(str(job), spec, str(out), JobOptions(**options))
    return out / job.name


@pytest.mark.parametrize("op", ["mosaic", "cutmix"])
def test_boxes_agree_with_the_pixels_of_every_object_after_the_op(voc, tmp_path, op):
    out = run(voc, pipeline(op), tmp_path / "out", executor="threads")
    recs = records(out)
    assert len(recs) == 8 * 4            # the original and 3 variants
    mixed = [r for r in recs if r.get("augd/partners")]
    assert sorted(r["augd/variant"] for r in mixed) == sorted([1, 2, 3] * 8)     # p = 1: every variant
    n = check_boxes(recs, colours_of(scenes()))
    assert n >= len(recs) * 2
    if op == "mosaic":   # a mosaic holds the objects of 4 images: more than one image's
        assert np.mean([len(r["image/object/class/text"]) for r in recs]) > 3
        assert {r["pixels"].shape[:2] for r in mixed} == {(128, 128)}


def test_cutmix_shrinks_or_drops_what_its_patch_covers(voc, tmp_path):
    """The image's objects under the patch lose the covered part: the check above holds only if they do; here,
    some object must have been cut (its box smaller than its source box) for the test to mean anything."""
    out = run(voc, pipeline("cutmix"), tmp_path / "out", executor="threads")
    src = {s.colour: s for img in scenes() for s in img.objects()}
    cut = 0
    for r in records(out):
        px = r["pixels"].astype(int)
        for colour, s in src.items():
            hit = np.all(np.abs(px - colour) <= TOL, axis=2)
            if hit.sum() >= 9 and r["image/filename"].endswith(tuple(img.name for img in scenes()
                                                                    if s in img.objects())):
                x0, y0, x1, y1 = s.geom
                cut += (hit.sum() < 0.9 * (x1 - x0) * (y1 - y0))
    assert cut > 0


def test_mixup_writes_both_images_objects_with_their_weights(voc, tmp_path):
    out = run(voc, pipeline("mixup"), tmp_path / "out", executor="threads")
    by_sha = {}
    for img in scenes():
        path = voc / "JPEGImages" / img.name
        by_sha[hashlib.sha256(path.read_bytes()).hexdigest()] = img
    for r in records(out):
        if r["augd/variant"] == 0:
            continue
        [partner_sha] = r["augd/partners"]
        own = next(img for img in scenes() if r["image/filename"].endswith(img.name))
        partner = by_sha[partner_sha]
        assert partner.split == own.split and partner.name != own.name
        weights = r["image/object/weight"]
        n_own = len(own.objects())
        assert len(weights) == n_own + len(partner.objects())
        lam = weights[n_own]
        assert 0.3 - 1e-6 <= lam <= 0.5 + 1e-6 and all(abs(w - (1 - lam)) < 1e-5 for w in weights[:n_own])
        # the image's own objects stay where they were; their pixels are the blend of their colour and the partner's
        for s, x0, y0, x1, y1 in zip(own.objects(), r["image/object/bbox/xmin"], r["image/object/bbox/ymin"],
                                     r["image/object/bbox/xmax"], r["image/object/bbox/ymax"]):
            h, w = r["pixels"].shape[:2]
            assert np.allclose([x0 * w, y0 * h, x1 * w, y1 * h], s.geom, atol=0.01)
            cy, cx = int((s.geom[1] + s.geom[3]) / 2), int((s.geom[0] + s.geom[2]) / 2)
            blended = r["pixels"][cy, cx].astype(float)
            assert np.all(np.abs(blended - ((1 - lam) * np.array(s.colour) + lam * np.array(GREY))) <= 12) or \
                np.any(np.abs(blended - (1 - lam) * np.array(s.colour)) > 0)   # a partner object may lie beneath


def test_no_partner_crosses_a_split(voc, tmp_path):
    """Val's own class (owl) and colours never reach a train record, and every record's partners are images of
    its own split."""
    out = run(voc, pipeline("mosaic"), tmp_path / "out", executor="threads")
    split_of = {hashlib.sha256((voc / "JPEGImages" / img.name).read_bytes()).hexdigest(): img.split
                for img in scenes()}
    val_colours = [s.colour for img in scenes() if img.split == "val" for s in img.objects()]
    seen = {"train": 0, "val": 0}
    for name in os.listdir(out):
        if ".tfrecord" not in name:
            continue
        split = "val" if "-validation-" in name else "train"
        for r in records_of(out / name):
            for sha in r.get("augd/partners", []):
                assert split_of[sha] == split, f"{name}: a {split_of[sha]} partner in a {split} record"
                seen[split] += 1
            if split == "train":
                assert "owl" not in r["image/object/class/text"]
                px = r["pixels"].astype(int)
                assert all(np.all(np.abs(px - c) <= TOL, axis=2).sum() == 0 for c in val_colours)
    assert seen["train"] and seen["val"]


def records_of(path: Path) -> list[dict]:
    out = []
    for rec in iter_records(str(path)):
        ex = decode_example(rec)
        ex["pixels"] = cv2.imdecode(np.frombuffer(ex["image/encoded"], np.uint8), cv2.IMREAD_COLOR)[..., ::-1]
        out.append(ex)
    return out


def _files(folder: Path) -> dict:
    return {n: (folder / n).read_bytes() for n in sorted(os.listdir(folder)) if n != "manifest.json"}


@pytest.mark.parametrize("op", ["mosaic", "mixup", "cutmix"])
def test_threads_processes_and_a_rerun_write_the_same_bytes(voc, tmp_path, op):
    spec = pipeline(op, variants=2, fmt="jpeg")
    a = _files(run(voc, spec, tmp_path / "a", executor="threads", workers=2))
    b = _files(run(voc, spec, tmp_path / "b", executor="processes", workers=2))
    c = _files(run(voc, spec, tmp_path / "c", executor="threads", workers=1))
    assert a == b == c and any(".tfrecord" in n for n in a)


def test_a_worker_killed_during_a_mosaic_job_loses_and_doubles_nothing(voc, tmp_path):
    import signal

    from augd.engine import Engine
    from augd.job import JobWatch
    from augd.job.workers.pool import ProcessPool
    spec = pipeline("mosaic", variants=2, fmt="jpeg")
    want = _files(run(voc, spec, tmp_path / "ref", executor="threads", workers=2))
    killed = []

    def kill_one(outcome):   # after the first image is written, kill -9 a worker that holds a batch
        if not killed:
            busy = [w.process.pid for w in p._workers if w.tasks] or p.pids()
            os.kill(busy[0], signal.SIGKILL)
            killed.append(busy[0])

    with ProcessPool(2, Engine().options) as p:
        run_job(str(voc), spec, str(tmp_path / "out"), JobOptions(workers=2, executor="processes"),
                JobWatch(on_image=kill_one), pool=p)
        assert p.restarts >= 1 and killed[0] not in p.pids()
    assert _files(tmp_path / "out" / voc.name) == want


def test_beam_writes_the_same_bytes_with_a_mosaic(voc, tmp_path):
    """Beam's workers draw the same partners (the plan carries the pools) and so write the same bytes."""
    pytest.importorskip("apache_beam")
    spec = pipeline("mosaic", variants=2, fmt="jpeg")
    a = _files(run(voc, spec, tmp_path / "a", executor="threads", workers=2))
    b = _files(run(voc, spec, tmp_path / "b", executor="beam", executor_args=(
        "--runner=DirectRunner", "--direct_running_mode=multi_processing", "--direct_num_workers=2")))
    assert a == b


def test_instance_and_semantic_masks_follow_the_mosaic(tmp_path):
    """COCO polygons: each object's instance mask covers its colour's pixels in the mosaic record."""
    import tensorflow as tf
    imgs = [dataclasses.replace(i, split="") for i in scenes()]
    coco_job(str(tmp_path / "coco"), imgs)
    out = run(tmp_path / "coco", pipeline("mosaic"), tmp_path / "out", executor="threads")
    colours = colours_of(imgs)
    checked = 0
    for r in records(out):
        px = r["pixels"].astype(int)
        assert len(r["image/object/mask"]) == len(r["image/object/class/text"])
        masks = [tf.io.decode_png(m, channels=1).numpy()[..., 0] for m in r["image/object/mask"]]
        for colour in colours:
            hit = np.all(np.abs(px - colour) <= TOL, axis=2).astype(np.uint8)
            n, parts = cv2.connectedComponents(cv2.erode(hit, np.ones((3, 3), np.uint8)))
            for k in range(1, n):   # each showing of the object (an image may show twice in a mosaic)
                core = parts == k
                if core.sum() < 9:
                    continue
                best = max(float(np.mean(m[core] > 0)) for m in masks)
                assert best >= 0.98, f"{r['image/filename']} v{r['augd/variant']}: {colour} mask covers {best:.3f}"
                checked += 1
    assert checked > 8


def test_voc_semantic_masks_are_laid_like_the_pixels(tmp_path):
    import tensorflow as tf
    imgs = scenes()
    voc_job(str(tmp_path / "seg"), imgs, masks="P")
    out = run(tmp_path / "seg", pipeline("mosaic"), tmp_path / "out", executor="threads")
    classes = ["cat", "dog", "owl"]   # tests.annotated.classes_of: in order of first appearance, index k + 1
    for r in records(out):
        mask = tf.io.decode_png(r["image/segmentation/class/encoded"], channels=1).numpy()[..., 0]
        px = r["pixels"].astype(int)
        for s in (s for img in imgs for s in img.objects()):
            hit = np.all(np.abs(px - s.colour) <= TOL, axis=2).astype(np.uint8)
            core = cv2.erode(hit, np.ones((3, 3), np.uint8)).astype(bool)
            if core.sum() >= 9:
                assert np.mean(mask[core] == classes.index(s.cls) + 1) >= 0.98
        grey = np.all(np.abs(px - GREY) <= 4, axis=2)
        assert np.mean(mask[grey] == 0) >= 0.95 or not grey.any()   # the images' background stays background


@pytest.mark.parametrize("yaml, where", [
    ("  - random_flip_left_right: {}\n  - mosaic: {size: [64, 64]}\n", "ops[1].mosaic"),
    ("  - one_of:\n      ops:\n        - mixup: {}\n        - cutmix: {}\n", "ops[0].one_of.ops[0].mixup"),
])
def test_a_partner_op_anywhere_but_first_is_refused_naming_where(yaml, where):
    with pytest.raises(SpecError) as err:
        parse_pipeline(f"name: bad\nops:\n{yaml}")
    assert where in str(err.value) and "must be the first op" in str(err.value)


# --- classification: both labels and their shares, and the loader's soft targets --------------------------------

CLASS_COLOURS = {"red": (235, 20, 20), "blue": (20, 20, 235), "green": (20, 235, 20)}


@pytest.fixture(scope="module")
def classes_job(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("cls") / "job"
    for c, (name, colour) in enumerate(CLASS_COLOURS.items()):
        for i in range(3):
            (root / name).mkdir(parents=True, exist_ok=True)
            rgb = np.empty((40 + 8 * i, 56 + 4 * c, 3), np.uint8)
            rgb[:] = colour
            cv2.imwrite(str(root / name / f"{name}{i}.png"), rgb[..., ::-1])
    return root


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


# --- copy_paste: objects of partners pasted by their masks ------------------------------------------------------

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


def png_scenes(imgs) -> list[Img]:
    """The scenes as PNGs in one split: a paste can leave a 1-px strip of an object showing, which JPEG's
    subsampled chroma would blur past the colour tolerance."""
    return [dataclasses.replace(i, name=i.name.replace(".jpg", ".png"), split="") for i in imgs]


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


def test_preview_with_root_shows_the_records_the_job_writes(voc, tmp_path):
    """augd preview --root plans the job: its partners (same split) and annotations, so each tile is the record."""
    from augd.preview import preview_rows
    spec = pipeline("mosaic", variants=2)
    out = run(voc, spec, tmp_path / "out", executor="threads")
    want = {(r["image/filename"], r["augd/variant"]): r["pixels"] for r in records(out)}
    names = ["im2.png", "im7.png"]                    # a train and a val image
    rows = preview_rows(spec, [voc / "JPEGImages" / n for n in names], relpaths=[f"JPEGImages/{n}" for n in names],
                        root=voc)
    for row in rows:
        tiles = [t for t in row.tiles if t.variant]
        assert len(tiles) == 2 and any(line.startswith("+ im") for line in tiles[0].lines)
        for t in tiles:
            assert np.array_equal(t.image, want[row.relpath, t.variant])


def test_preview_of_copy_paste_without_the_job_says_to_give_it(voc, tmp_path):
    """Without --root the sheet's images have no annotations, so copy_paste would paste nothing: said, not done."""
    from tests.jobfiles import augd
    r = augd("preview", "detection-copy-paste", voc / "JPEGImages" / "im2.png",
             "--out", tmp_path / "s.png")
    assert r.returncode == 2 and not (tmp_path / "s.png").exists()
    assert "ops[0].copy_paste pastes annotated objects" in r.stderr and "--root JOB_FOLDER" in r.stderr, r.stderr


def test_a_partner_gone_mid_job_leaves_its_tile_to_the_fill_and_brings_nothing(tmp_path):
    """A partner deleted after the job was planned: the records drawing it name it as '' and show neither its
    pixels nor its boxes (the check fails on a box without its object's pixels); nothing else is lost."""
    from augd.engine import Engine
    from augd.job.images import process_images
    from augd.job.units import plan_job
    imgs = [Img(f"im{i}.png", 64, 80, (Shape("cat", (10 + i, 10, 40, 40), PALETTE[i]),), background=GREY)
            for i in range(6)]
    voc_job(str(tmp_path / "job"), imgs)
    spec = parse_pipeline("name: m\nseed: 1\nvariants: 3\nkeep_original: false\noutput: {format: png}\n"
                          "ops:\n  - mosaic: {size: [128, 128]}\n" + KEEP_REMNANTS)
    plan = plan_job(str(tmp_path / "job"), spec, None, 10 ** 8)
    (tmp_path / "job" / plan.images[-1].relpath).unlink()
    compiled = Engine().compile(spec)
    try:
        outcomes = process_images(compiled, spec, plan.images[:-1], [1, 2, 3], plan.detection, plan.partners)
    finally:
        compiled.close()
    assert not any(o.rejected for o in outcomes)
    recs = []
    for o in outcomes:
        for rec in o.records:
            ex = decode_example(rec)
            ex["pixels"] = cv2.imdecode(np.frombuffer(ex["image/encoded"], np.uint8), cv2.IMREAD_COLOR)[..., ::-1]
            recs.append(ex)
    assert len(recs) == 15 and sum(r["augd/partners"].count("") for r in recs) >= 3
    assert check_boxes(recs, colours_of(imgs)) >= 15


@pytest.mark.parametrize("orientation", [1, 3, 6, 8])
def test_a_reduced_partner_decode_lands_where_the_full_decode_does(orientation):
    """A partner decoded at 1/8 DCT scale, EXIF-rotated, placed by its matrix: the same tile as the full decode
    gives (a side that is no multiple of 8 leaves a partial block, which a flip moves to the front)."""
    import io

    from PIL import Image

    from augd.engine.kernels import warp_np
    from augd.engine.hostdecode import decode_scaled
    from augd.formats import read_header
    w, h = 1001, 603
    yy, xx = np.mgrid[0:h, 0:w]
    rgb = np.stack([xx * 255 // w, yy * 255 // h, np.full_like(xx, 128)], -1).astype(np.uint8)
    im = Image.fromarray(rgb)
    exif = im.getexif()
    exif[0x0112] = orientation
    buf = io.BytesIO()
    im.save(buf, "JPEG", quality=98, exif=exif)
    data = buf.getvalue()
    m = np.array([[8.0, 0, 3.5], [0, 8.0, 3.5], [0, 0, 1]])   # tile pixel -> source: 1/8 scale
    uh, uw = (w, h) if orientation >= 5 else (h, w)
    pixels, moved = decode_scaled(data, read_header(data), m)
    assert pixels.shape[:2] == (-(-uh // 8), -(-uw // 8))      # decoded at 1/8
    reduced = warp_np(pixels, moved, uh // 8, uw // 8, "nearest", "bilinear").astype(float)
    full = warp_np(cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR), m, uh // 8, uw // 8, "nearest",
                   "bilinear").astype(float)
    assert np.abs(reduced - full)[1:-1, 1:-1].mean() < 1.0


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


def test_a_mosaic_needs_two_pixels_a_side():
    with pytest.raises(SpecError, match=r"ops\[0\]\.mosaic.*each side must be at least 2"):
        parse_pipeline("name: m\nops:\n  - mosaic: {size: [1, 64]}\n")


def test_a_partner_with_a_bad_mask_rejects_only_itself(tmp_path):
    """A semantic mask cut short rejects its own image (bad_annotation), never the images that drew it
    as a partner: their tile of it has no class (255)."""
    import json
    imgs = png_scenes(scenes())
    voc_job(str(tmp_path / "seg"), imgs, masks="P")
    bad = tmp_path / "seg" / "SegmentationClass" / "im2.png"
    bad.write_bytes(bad.read_bytes()[:60])   # its header (the right size) read at the scan, its pixels cut off
    out = run(tmp_path / "seg", pipeline("mosaic", variants=2), tmp_path / "out", executor="threads")
    m = json.loads((out / "manifest.json").read_text())
    assert [(r["path"], r["reason"]) for r in m["inputs"]["rejected_files"]] == [("JPEGImages/im2.png",
                                                                                  "bad_annotation")]
    assert m["inputs"]["written"] == 7
