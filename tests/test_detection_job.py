"""Detection jobs end to end: VOC, COCO and YOLO folders through `augd run` (and `augd serve`) into records whose
boxes, read back with a tf.data parser on the Object Detection API's keys, agree with their decoded pixels.

Each synthetic image holds at most one solid rectangle per class, in a colour no background or fill can take,
so the extent of a colour in a decoded record is that object's true box, whatever the chain did to it.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from tests.daemon_harness import (Daemon, manifest, no_leaked_children, no_leaked_children_module,  # noqa: F401
                                  write_config)

REPO = Path(__file__).resolve().parent.parent
#: Class -> RGB. Background greys (100-160) and the black rotation fill are > TOLERANCE from each in a channel.
COLOURS = {"red": (230, 30, 30), "green": (30, 220, 30), "blue": (30, 30, 230)}
TOLERANCE = 60
#: A box with a side under this (a rectangle the crop or rotation left as a sliver or a wedge) is only checked
#: for having pixels: the thin tip of a wedge, under half a pixel wide, blends below any colour threshold.
SLIVER = 6
PIPELINE = """name: det-test
seed: 7
variants: 3
output: {format: png, shards: 2}
ops:
  - random_crop: {size: [72, 88], area: [0.5, 1.0], aspect: [0.8, 1.25]}
  - random_rotation: {degrees: 10}
  - random_flip_left_right: {}
  - random_brightness: {max_delta: 0.02}
annotations: {min_visibility: 0, min_size: 1}   # the geometry judged by the pixels: every remnant keeps its box
"""


# --- synthetic jobs ------------------------------------------------------------------------------------------

def scene(seed: int, w: int = 96, h: int = 80) -> tuple[np.ndarray, list]:
    """(RGB image, [(class, (x0, y0, x1, y1))]) in pixel-edge units; one rectangle per class at most."""
    rng = np.random.default_rng(seed)
    img = np.empty((h, w, 3), np.uint8)
    img[:] = (100 + 60 * np.arange(w) / w).astype(np.uint8)[None, :, None]
    objects, taken = [], []
    for name in rng.permutation(list(COLOURS))[:int(rng.integers(1, 4))]:
        for _ in range(50):
            bw, bh = int(rng.integers(12, 30)), int(rng.integers(10, 26))
            x0, y0 = int(rng.integers(2, w - bw - 2)), int(rng.integers(2, h - bh - 2))
            box = (x0, y0, x0 + bw, y0 + bh)
            if all(box[2] + 4 <= b[0] or b[2] + 4 <= box[0] or box[3] + 4 <= b[1] or b[3] + 4 <= box[1]
                   for b in taken):
                break
        else:
            continue
        img[box[1]:box[3], box[0]:box[2]] = COLOURS[str(name)]
        objects.append((str(name), box))
        taken.append(box)
    return img, objects


def _write(path: Path, rgb: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    assert cv2.imwrite(str(path), rgb[:, :, ::-1])


def _voc_xml(name: str, w: int, h: int, objects) -> str:
    objs = "".join(f"<object><name>{n}</name><difficult>0</difficult><truncated>0</truncated><bndbox>"
                   f"<xmin>{x0 + 1}</xmin><ymin>{y0 + 1}</ymin><xmax>{x1}</xmax><ymax>{y1}</ymax></bndbox></object>"
                   for n, (x0, y0, x1, y1) in objects)
    return (f"<annotation><filename>{name}</filename><size><width>{w}</width><height>{h}</height><depth>3</depth>"
            f"</size>{objs}</annotation>")


def make_voc(root: Path, n: int = 6, seed: int = 0) -> Path:
    for i in range(n):
        img, objects = scene(seed * 100 + i)
        _write(root / "JPEGImages" / f"im{i:02d}.png", img)
        (root / "Annotations").mkdir(parents=True, exist_ok=True)
        (root / "Annotations" / f"im{i:02d}.xml").write_text(_voc_xml(f"im{i:02d}.png", 96, 80, objects))
    return root


def make_coco(root: Path, n: int = 6, seed: int = 1) -> Path:
    cats = {name: k for k, name in enumerate(COLOURS, 1)}
    images, anns = [], []
    for i in range(n):
        img, objects = scene(seed * 100 + i)
        _write(root / "images" / f"im{i:02d}.png", img)
        images.append({"id": i + 1, "file_name": f"images/im{i:02d}.png", "width": 96, "height": 80})
        for name, (x0, y0, x1, y1) in objects:
            anns.append({"id": len(anns) + 1, "image_id": i + 1, "category_id": cats[name], "iscrowd": 0,
                         "bbox": [x0, y0, x1 - x0, y1 - y0], "area": (x1 - x0) * (y1 - y0)})
    (root / "instances.json").write_text(json.dumps({
        "images": images, "annotations": anns, "categories": [{"id": k, "name": c} for c, k in cats.items()]}))
    return root


def make_yolo(root: Path, n: int = 6, seed: int = 2) -> Path:
    names = list(COLOURS)
    (root / "labels").mkdir(parents=True, exist_ok=True)
    for i in range(n):
        img, objects = scene(seed * 100 + i)
        _write(root / "images" / f"im{i:02d}.png", img)
        (root / "labels" / f"im{i:02d}.txt").write_text("".join(
            f"{names.index(c)} {(x0 + x1) / 2 / 96:.6f} {(y0 + y1) / 2 / 80:.6f} {(x1 - x0) / 96:.6f} "
            f"{(y1 - y0) / 80:.6f}\n" for c, (x0, y0, x1, y1) in objects))
    (root / "classes.txt").write_text("\n".join(names) + "\n")
    return root


MAKERS = {"voc": make_voc, "coco": make_coco, "yolo": make_yolo}


# --- running and reading back ------------------------------------------------------------------------------------

def augd(*args, check: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": str(REPO)}
    p = subprocess.run([sys.executable, "-m", "augd", *map(str, args)], capture_output=True, text=True, env=env)
    if check:
        assert p.returncode == 0, p.stderr[-3000:]
    return p


def run(job: Path, out: Path, pipeline: Path, *extra) -> dict:
    augd("run", job, "--pipeline", pipeline, "--out", out, "--quiet", *extra)
    return json.loads((out / job.name / "manifest.json").read_text())


def read_records(folder: Path) -> list[dict]:
    """Every record through tf.data with the Object Detection API's keys (VarLenFeature), decoded."""
    import tensorflow as tf

    from augd.io.records import DETECTION_FEATURES, FEATURES
    files = sorted(str(p) for p in folder.glob("*.tfrecord*"))
    spec = {**FEATURES, **DETECTION_FEATURES}
    ds = tf.data.TFRecordDataset(files).map(lambda s: tf.io.parse_single_example(s, spec))
    out = []
    for ex in ds:
        dense = {k: tf.sparse.to_dense(v).numpy() if isinstance(v, tf.SparseTensor) else v.numpy()
                 for k, v in ex.items()}
        dense["pixels"] = tf.io.decode_image(ex["image/encoded"], channels=3).numpy()
        out.append(dense)
    return out


def region(pixels: np.ndarray, name: str):
    """(x0, y0, x1, y1) pixel-edge extent of the pixels of a class's colour, and how many there are."""
    hit = np.all(np.abs(pixels.astype(int) - COLOURS[name]) < TOLERANCE, axis=2)
    ys, xs = np.nonzero(hit)
    if not len(xs):
        return None, 0
    return (xs.min(), ys.min(), xs.max() + 1, ys.max() + 1), len(xs)


def assert_boxes_match_pixels(records: list[dict]) -> int:
    """Every record's boxes within 2 px of its colours' extents; a class without a box has no real region."""
    checked = 0
    for r in records:
        h, w = r["pixels"].shape[:2]
        assert (h, w) == (r["image/height"], r["image/width"])
        texts = [t.decode() for t in r["image/object/class/text"]]
        boxes = np.stack([r[f"image/object/bbox/{k}"] for k in ("xmin", "ymin", "xmax", "ymax")], axis=-1)
        where = f"{r['image/filename'].decode()} variant {r['augd/variant']}"
        for name in COLOURS:
            extent, count = region(r["pixels"], name)
            if name not in texts:
                assert count < 9, f"{where}: {count} {name} pixels but no {name} box"
                continue
            box = boxes[texts.index(name)] * [w, h, w, h]
            assert extent is not None, f"{where}: a {name} box {box} but no {name} pixel"
            if min(box[2] - box[0], box[3] - box[1]) < SLIVER:
                continue
            assert np.abs(np.array(extent) - box).max() <= 2.0, f"{where}: {name} box {box} vs pixels {extent}"
            checked += 1
    return checked


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("pipe") / "det-test.yaml"
    p.write_text(PIPELINE)
    return p


# --- the tests --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["voc", "coco", "yolo"])
def test_job_boxes_agree_with_decoded_pixels_in_every_variant(tmp_path, pipeline, fmt):
    job = MAKERS[fmt](tmp_path / f"{fmt}job")
    m = run(job, tmp_path / "out", pipeline)
    a = m["annotations"]
    assert a["format"] == fmt and a["bad_annotations"] == 0 and m["inputs"]["rejected"] == 0
    assert [c["name"] for c in a["classes"]] == sorted(COLOURS) if fmt == "voc" else list(COLOURS)
    records = read_records(tmp_path / "out" / job.name)
    assert len(records) == 6 * 4 and sorted({int(r["augd/variant"]) for r in records}) == [0, 1, 2, 3]
    assert assert_boxes_match_pixels(records) >= 6 * 4
    assert a["objects"]["out"] == sum(len(r["image/object/class/label"]) for r in records)
    label_map = (tmp_path / "out" / job.name / "label_map.pbtxt").read_text()
    ids = {c["name"]: c["id"] for c in a["classes"]}
    for r in records:  # ids are the label map's (1-based), texts its names
        for label, text in zip(r["image/object/class/label"], r["image/object/class/text"]):
            assert ids[text.decode()] == label >= 1 and f"name: '{text.decode()}'" in label_map


def test_bad_annotations_are_quarantined_with_reasons_and_the_job_succeeds(tmp_path, pipeline):
    job = make_voc(tmp_path / "bad", n=6)
    (job / "Annotations" / "im00.xml").write_text("<annotation><object>")      # does not parse
    xml = (job / "Annotations" / "im01.xml").read_text()
    xmin = re.search(r"<xmin>(\d+)</xmin>", xml)[1]
    (job / "Annotations" / "im01.xml").write_text(re.sub(r"<xmax>\d+</xmax>", f"<xmax>{xmin}</xmax>", xml, 1))
    _write(job / "JPEGImages" / "im09.png", np.full((80, 96, 3), 128, np.uint8))  # no annotation: a negative
    lm = tmp_path / "label_map.pbtxt"
    present = {n for i in range(2, 6) for n, _ in scene(i)[1]}
    kept = sorted(present)[:-1]                                                  # one class missing from the map
    lm.write_text("".join(f"item {{ id: {k} name: '{n}' }}\n" for k, n in enumerate(kept, 1)))
    m = run(job, tmp_path / "out", pipeline, "--label-map", lm)
    bad = {f["path"]: f for f in m["inputs"]["rejected_files"]}
    assert bad["JPEGImages/im00.png"]["reason"] == "bad_annotation" and "im00.xml" in bad["JPEGImages/im00.png"][
        "message"]
    assert bad["JPEGImages/im01.png"]["reason"] == "bad_annotation"
    missing = sorted(present)[-1]
    unknown = [f for f in bad.values() if repr(missing) in f["message"]]
    assert unknown and all(f["reason"] == "bad_annotation" for f in unknown)
    a = m["annotations"]
    assert a["bad_annotations"] == len(bad) and a["negatives"] == {"kept": 1, "rejected": 0}
    assert [c["name"] for c in a["classes"]] == kept
    assert m["inputs"]["written"] == 7 - len(bad)
    assert assert_boxes_match_pixels(read_records(tmp_path / "out" / "bad")) > 0


def test_negatives_rejected_when_the_setting_says_so(tmp_path, pipeline):
    job = make_yolo(tmp_path / "neg", n=3)
    (job / "labels" / "im00.txt").write_text("")   # YOLO's negative: an empty label file
    (job / "augd.yaml").write_text("annotations: {negatives: reject}\n")
    from augd.daemon.routing import resolve_pipeline
    spec, _ = resolve_pipeline(str(job), str(pipeline), "tiny")
    assert spec.annotations.value("negatives") == "reject"
    p = tmp_path / "reject.yaml"
    p.write_text(PIPELINE.replace("annotations: {", "annotations: {negatives: reject, "))
    m = run(job, tmp_path / "out", p)
    assert m["annotations"]["negatives"] == {"kept": 0, "rejected": 1}
    assert [(f["path"], f["reason"]) for f in m["inputs"]["rejected_files"]] == [("images/im00.png", "negative")]


def test_same_shard_bytes_for_one_and_three_workers(tmp_path, pipeline):
    job = make_coco(tmp_path / "det", n=8)
    run(job, tmp_path / "w1", pipeline, "--workers", "1")
    run(job, tmp_path / "w3", pipeline, "--workers", "3")
    shards = sorted(p.name for p in (tmp_path / "w1" / "det").glob("*.tfrecord*"))
    assert shards and shards == sorted(p.name for p in (tmp_path / "w3" / "det").glob("*.tfrecord*"))
    for s in shards + ["label_map.pbtxt"]:
        assert (tmp_path / "w1" / "det" / s).read_bytes() == (tmp_path / "w3" / "det" / s).read_bytes(), s


def test_classification_jobs_are_unchanged(tmp_path):
    from augd.schema import load_pipeline
    pipeline = tmp_path / "plain.yaml"
    pipeline.write_text(PIPELINE[:PIPELINE.index("annotations:")])   # a pipeline that says nothing of annotations
    spec = load_pipeline(pipeline)
    assert spec.annotations is None and "annotations" not in spec.normalized()
    for cls in ("cats", "dogs"):
        for i in range(2):
            _write(tmp_path / "cls" / cls / f"{i}.png", scene(i)[0])
    m = run(tmp_path / "cls", tmp_path / "out", pipeline)
    out = tmp_path / "out" / "cls"
    assert "annotations" not in m and not (out / "label_map.pbtxt").exists() and (out / "labels.txt").exists()
    from augd.io.lite import decode_example, iter_records
    for shard in out.glob("*.tfrecord*"):
        for rec in iter_records(str(shard)):
            assert not any(k.startswith("image/object") for k in decode_example(rec))


def test_inspect_counts_objects_and_dump_draws_boxes(tmp_path, pipeline):
    job = make_voc(tmp_path / "ins", n=3)
    m = run(job, tmp_path / "out", pipeline)
    p = augd("inspect", tmp_path / "out" / "ins", "--dump", "4", tmp_path / "dump")
    total = m["annotations"]["objects"]["out"]
    assert f"objects: {total} in 12 detection records" in p.stdout, p.stdout
    assert "boxes per image" in p.stdout
    for c in m["annotations"]["classes"]:
        if c["objects_out"]:
            assert f"{c['id']}:{c['name']}={c['objects_out']}" in p.stdout
    dumped = sorted((tmp_path / "dump").glob("*.png"))
    assert len(dumped) == 4
    records = {(r["image/filename"].decode(), int(r["augd/variant"])): r
               for r in read_records(tmp_path / "out" / "ins")}
    for path in dumped:   # 00000-v0-im00.png: a box drawn changes the pixels on its edge
        variant, stem = path.stem.split("-", 2)[1:]
        r = records[(f"JPEGImages/{stem}.png", int(variant[1:]))]
        img = cv2.imread(str(path))[:, :, ::-1]
        assert img.shape == r["pixels"].shape
        h, w = img.shape[:2]
        for x0, y0 in zip(r["image/object/bbox/xmin"], r["image/object/bbox/ymin"]):
            x, y = min(int(round(x0 * w)), w - 1), min(int(round(y0 * h)), h - 1)
            assert np.any(img[y, x] != r["pixels"][y, x]), f"{path.name}: no box drawn at ({x}, {y})"


def test_settings_layer_job_over_pipeline_over_daemon(tmp_path):
    from augd.daemon.routing import resolve_pipeline
    from augd.schema import Annotations, parse_pipeline
    p = tmp_path / "p.yaml"
    p.write_text("name: p\nops: []\nannotations: {min_size: 3}\n")
    job = tmp_path / "job"
    job.mkdir()
    (job / "augd.yaml").write_text("annotations: {format: yolo}\n")
    daemon = Annotations(format="voc", label_map=("a", "b"), min_size=5.0)
    spec, _ = resolve_pipeline(str(job), str(p), "tiny", annotations=daemon)
    assert spec.annotations.normalized() == {"format": "yolo", "label_map": ["a", "b"], "min_visibility": 0.3,
                                             "min_size": 3.0, "negatives": "keep"}
    assert parse_pipeline("name: p\nops: []\n").sha256 != spec.sha256
    (job / "augd.yaml").write_text("annotations: {label_map: ../outside.pbtxt}\n")
    with pytest.raises(Exception, match="outside the job folder"):
        resolve_pipeline(str(job), str(p), "tiny")


def test_daemon_runs_voc_coco_and_yolo_jobs_dropped_into_the_inbox(tmp_path):
    d = Daemon(write_config(tmp_path, settle_seconds=1.0)).start()
    try:
        d.wait_ready()
        (tmp_path / "pipelines" / "det-test.yaml").write_text(PIPELINE)
        staging = tmp_path / "staging"
        for fmt, make in MAKERS.items():
            make(staging / fmt, n=3)
            (d.inbox / "det-test").mkdir(parents=True, exist_ok=True)
            os.rename(staging / fmt, d.inbox / "det-test" / fmt)
        for fmt in MAKERS:
            d.wait_done(fmt, timeout=180)
            m = manifest(d.out, fmt)
            assert m["annotations"]["format"] == fmt and m["inputs"]["rejected"] == 0
            assert (d.out / fmt / "label_map.pbtxt").is_file()
            assert assert_boxes_match_pixels(read_records(d.out / fmt)) >= 6
    finally:
        assert d.stop() == 0, d.log_tail()


_BUG_HOOK = """
import augd.annotations.targets as targets
_transform = targets.transform


def transform(ann, *a, **k):      # a bug in augd, as a test plants it: not bad user data
    if (ann.source or "").endswith("im01.xml"):
        raise ValueError("planted bug while moving im01's boxes")
    return _transform(ann, *a, **k)


targets.transform = transform
"""


@pytest.mark.parametrize("executor", ["threads", "processes"])
def test_a_bug_while_moving_annotations_fails_the_job_as_crashed_not_as_bad_data(tmp_path, executor):
    """Anything but an AnnotationError (here a ValueError planted in augd's own code, in the daemon and in its
    worker processes through sitecustomize) is no bad_annotation: the job goes to failed/ as `crashed` with the
    traceback in error.txt, nothing of it reaches out/, and the daemon runs the next job."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(_BUG_HOOK)
    cfg = write_config(tmp_path, settle_seconds=0.5, executor=executor, workers=2 if executor == "processes" else 1)
    d = Daemon(cfg, env={"PYTHONPATH": f"{hook}{os.pathsep}{REPO}"}).start()
    try:
        d.wait_ready(timeout=120)
        (tmp_path / "pipelines" / "det-test.yaml").write_text(PIPELINE)
        staging = tmp_path / "staging"
        make_voc(staging / "det-test" / "buggy", n=3)
        make_coco(staging / "det-test" / "fine", n=2)
        (d.inbox / "det-test").mkdir(parents=True)
        os.rename(staging / "det-test" / "buggy", d.inbox / "det-test" / "buggy")
        failed = d.wait_failed("buggy", timeout=180)
        failure = json.loads((failed / "failure.json").read_text())
        assert failure["reason"] == "crashed", failure
        error = (failed / "error.txt").read_text()
        assert "planted bug while moving im01's boxes" in error and "Traceback" in error, error
        assert not (d.out / "buggy").exists() and not any(p.name.startswith(".buggy") for p in d.out.iterdir())
        os.rename(staging / "det-test" / "fine", d.inbox / "det-test" / "fine")
        d.wait_done("fine", timeout=180)
        assert manifest(d.out, "fine")["inputs"]["written"] == 2
    finally:
        assert d.stop() == 0, d.log_tail()


# --- masks: the scenes and the judge of tests/test_detection_masks_job.py (and test_records_input) ---------------

def _mask_scenes():
    from tests.annotated import Img, Shape
    return [Img(f"m{i}.png", 80, 96, (
        Shape("red", (10 + 3 * i, 8, 46 + 2 * i, 40), COLOURS["red"]),
        Shape("blue", ((52.0, 30.0), (90.0, 44.0 + i), (70.0, 74.0), (50.0, 66.0)), COLOURS["blue"]),
    ), background=(128, 128, 128)) for i in range(4)]


def _covered(pixels: np.ndarray, mask: np.ndarray, name: str, value) -> float:
    """The share of a colour's pixels (shrunk by a pixel: the warp blends edges, the mask is nearest) that the
    mask marks with `value`."""
    hit = np.all(np.abs(pixels.astype(int) - COLOURS[name]) < TOLERANCE, axis=2).astype(np.uint8)
    core = cv2.erode(hit, np.ones((3, 3), np.uint8)).astype(bool)
    return float(np.mean(mask[core] == value)) if core.any() else 1.0


# --- review fixes: unread images, orphan files, annotation errors that reject an image ------------------------

def test_image_the_reader_cannot_see_is_rejected_and_orphan_files_do_not_count_against_max_rejected(
        tmp_path, pipeline):
    """An image the scan reads by content but the annotation reader never saw (.jfif) is `bad_annotation`
    naming the extensions read, not an unlabeled negative; its XML, and the XML of a JPEGImages/ image that is
    missing, are listed but not counted against max_rejected."""
    job = make_voc(tmp_path / "voc", n=6)
    (job / "JPEGImages" / "im05.png").rename(job / "JPEGImages" / "im05.jfif")
    (job / "JPEGImages" / "im04.png").unlink()                    # a partial JPEGImages/: im04.xml is an orphan
    m = run(job, tmp_path / "out", pipeline, "--max-rejected", "0.2")   # 1 of 5 images: 20 %
    bad = {f["path"]: f for f in m["inputs"]["rejected_files"]}
    assert set(bad) == {"JPEGImages/im05.jfif", "Annotations/im05.xml", "Annotations/im04.xml"}
    assert bad["JPEGImages/im05.jfif"]["reason"] == "bad_annotation"
    assert ".jpg" in bad["JPEGImages/im05.jfif"]["message"] and ".jfif" in bad["JPEGImages/im05.jfif"]["message"]
    assert "missing image" in bad["Annotations/im04.xml"]["message"]
    i = m["inputs"]
    assert i["written"] == 4 and i["seen"] == i["written"] + i["rejected"]
    assert m["annotations"]["negatives"]["kept"] == 0
    p = augd("run", job, "--pipeline", pipeline, "--out", tmp_path / "out2", "--quiet", "--max-rejected", "0.1",
             check=False)
    assert p.returncode != 0 and "1 of 5 inputs were rejected" in p.stderr, p.stderr[-2000:]


def test_annotation_errors_while_writing_reject_their_image_not_the_job(tmp_path, pipeline, monkeypatch):
    """In process (run_job): a mask over Pillow's pixel limit (DecompressionBombError) and a 16-bit mask with a
    negative index (named, not the max) each reject their own image as bad_annotation; the others are written.
    A ValueError while moving an image's annotation (a singular warp: a bug in augd, not bad data) is no
    bad_annotation: it fails the job, and nothing is written."""
    from PIL import Image

    import augd.annotations.masks as masks
    import augd.annotations.objects as objects
    import augd.annotations.targets as targets
    from augd.job import JobOptions, run_job
    from augd.schema import load_pipeline
    from tests.annotated import Img, voc_job

    scenes = _mask_scenes()
    scenes[1] = Img("m1.png", 160, 192, scenes[1].shapes, background=(128, 128, 128))   # its mask: a "bomb"
    voc_job(str(tmp_path / "seg"), scenes, masks="P")
    seg = tmp_path / "seg" / "SegmentationClass"
    wide = np.asarray(Image.open(seg / "m2.png")).astype(np.uint16)
    wide[0, 0] = 400
    Image.fromarray(wide).save(seg / "m2.png")                                        # a 16-bit mask
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 8000)    # 80x96 masks pass; 160x192 > 2x: DecompressionBombError

    class Shifted:     # Pillow never decodes a PNG to negative values: shift the 16-bit mask's down by 7
        def __getattr__(self, name):
            return getattr(np, name)

        def asarray(self, x, *a, **k):
            out = np.asarray(x, *a, **k)
            return out.astype(np.int32) - 7 if isinstance(x, Image.Image) and x.mode.startswith("I") else out
    monkeypatch.setattr(masks, "np", Shifted())
    transform = targets.transform

    def singular(ann, *a, **k):
        if "m3" in (ann.source or ""):
            raise ValueError("the affine matrix is singular")
        return transform(ann, *a, **k)
    monkeypatch.setattr(objects, "transform", singular)   # where the job calls it

    with pytest.raises(ValueError, match="singular"):
        run_job(str(tmp_path / "seg"), load_pipeline(pipeline), str(tmp_path / "out"), JobOptions(workers=1))
    assert not os.path.exists(tmp_path / "out") or os.listdir(tmp_path / "out") == [], "nothing half-written"

    monkeypatch.setattr(objects, "transform", transform)
    result = run_job(str(tmp_path / "seg"), load_pipeline(pipeline), str(tmp_path / "out"), JobOptions(workers=1))
    bad = {r.relpath: r for r in result.report.inputs.rejected_files}
    assert set(bad) == {"JPEGImages/m1.png", "JPEGImages/m2.png"}
    assert all(r.reason == "bad_annotation" for r in bad.values())
    assert "too large" in bad["JPEGImages/m1.png"].message
    assert "class index -7;" in bad["JPEGImages/m2.png"].message
    assert result.report.inputs.written == 2 and result.report.annotations.bad_annotations == 2
