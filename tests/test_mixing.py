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


# --- a classification job (tests/test_mixing_classes.py mixes it; tests/test_copy_paste.py is refused on it) -----

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


# --- the scenes as PNGs (tests/test_copy_paste.py pastes them too) ---------------------------------------------

def png_scenes(imgs) -> list[Img]:
    """The scenes as PNGs in one split: a paste can leave a 1-px strip of an object showing, which JPEG's
    subsampled chroma would blur past the colour tolerance."""
    return [dataclasses.replace(i, name=i.name.replace(".jpg", ".png"), split="") for i in imgs]


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
