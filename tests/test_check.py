"""`augd check` on datasets with planted problems, as a user runs it before a job (a real process): a photo copied
from train into validation (resized and re-encoded: a leak), a box 2 px past the border (repaired by rule), a box
far outside (a job would reject it), a file that is no image, an EXIF-rotated photo, a class missing from a fixed
label map; and the same datasets clean, exit 0."""
from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest
from PIL import Image

from augd.checkcmd import check_dataset
from augd.check.hashing import hash_file, near_pairs

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "augd" / "samples" / "demo"
VOC = REPO / "augd" / "samples" / "detection"


def _check(*args):
    return subprocess.run([sys.executable, "-m", "augd", "check", *map(str, args)], capture_output=True, text=True,
                          timeout=300)


def _copy(src: Path, dst: Path, scale: float, quality: int) -> None:
    im = cv2.imread(str(src))
    cv2.imwrite(str(dst), cv2.resize(im, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA),
                [cv2.IMWRITE_JPEG_QUALITY, quality])


def _rotated(src: Path, dst: Path) -> None:
    exif = Image.Exif()
    exif[0x0112] = 6
    buf = io.BytesIO()
    Image.open(src).save(buf, "JPEG", quality=92, exif=exif.tobytes())
    dst.write_bytes(buf.getvalue())


@pytest.fixture()
def classes(tmp_path) -> Path:
    """The demo photos as train/ and validation/ class folders (half each)."""
    root = tmp_path / "classes"
    for k, f in enumerate(sorted(DEMO.glob("*/*.jpg"))):
        split = "train" if k % 2 == 0 else "validation"
        (root / split / f.parent.name).mkdir(parents=True, exist_ok=True)
        shutil.copy(f, root / split / f.parent.name / f.name)
    return root


def test_a_clean_split_set_passes_and_a_copied_photo_across_splits_is_a_leak(classes, tmp_path):
    r = _check(classes, "--json", tmp_path / "clean.json")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "across splits" in r.stdout and "verdict: nothing a job would fail on" in r.stdout
    clean = json.loads((tmp_path / "clean.json").read_text())
    assert clean["duplicates"]["across_splits"] == 0 and clean["problems"] == {"leak": 0, "rejected": 0}
    assert clean["splits"]["train"]["images"] + clean["splits"]["validation"]["images"] == 20
    # plant: a train photo, resized by 0.6 and re-encoded at quality 60, in validation under another name
    src = classes / "train" / "space" / "astronaut_0.jpg"
    _copy(src, classes / "validation" / "space" / "holiday_photo.jpg", 0.6, 60)
    r = _check(classes, "--json", tmp_path / "leak.json")
    assert r.returncode == 1, r.stdout + r.stderr
    assert re.search(r"train/space/astronaut_0\.jpg \(train\) ~ validation/space/holiday_photo\.jpg \(validation\): "
                     r"\d bits apart", r.stdout), r.stdout
    assert "1 across splits (a leak: the same image trains and validates)" in r.stdout
    got = json.loads((tmp_path / "leak.json").read_text())
    assert got["problems"]["leak"] == 1
    assert _check(classes, "--fail-on", "rejected").returncode == 0   # leaks need not fail the exit code


def test_a_voc_set_with_planted_problems(tmp_path):
    root = tmp_path / "voc"
    shutil.copytree(VOC, root)
    xmls = sorted((root / "Annotations").glob("*.xml"))
    for xml, past in ((xmls[0], 2), (xmls[1], 40)):     # a near miss (repaired), and far out (rejected)
        text = xml.read_text()
        xml.write_text(re.sub(r"<xmax>\d+</xmax>", f"<xmax>{160 + past}</xmax>", text, count=1))
    (root / "JPEGImages" / "scene_005.jpg").write_bytes(b"\xff\xd8\xff\xe0 not a jpeg at all")
    _rotated(VOC / "JPEGImages" / "scene_006.jpg", root / "JPEGImages" / "scene_006.jpg")   # (its boxes now lie)
    r = _check(root, "--json", tmp_path / "voc.json")
    assert r.returncode == 1
    out = r.stdout
    assert "repairs (annotations.repair standard): 1 object(s) in 1 image(s): clipped=1" in out
    assert "JPEGImages/scene_000.jpg: clipped=1" in out
    assert re.search(r"a job would reject \d input\(s\): ", out) and "scene_001" in out and "scene_005" in out
    assert "passes the border of the 160x120 image by more than 4 pixels" in out
    got = json.loads((tmp_path / "voc.json").read_text())
    reasons = {r["path"]: r["reason"] for r in got["rejected"]}
    assert reasons["JPEGImages/scene_001.jpg"] == "bad_annotation" and "JPEGImages/scene_005.jpg" in reasons
    assert got["repairs"]["by_reason"] == {"clipped": 1}
    sizes = got["splits"]["train"]["box_sizes"]
    assert sum(sizes.values()) == sum(got["splits"]["train"]["objects"].values()) and sizes["small"] > 0
    # a fixed label map without `blue`: its objects are listed, their images would be rejected
    (root / "lm.pbtxt").write_text('item { id: 1 name: "red" }\nitem { id: 2 name: "green" }\n')
    r = _check(root, "--label-map", "lm.pbtxt")
    assert "classes missing from the label map: blue (" in r.stdout, r.stdout
    (root / "lm.pbtxt").unlink()


def test_check_and_the_job_count_and_word_the_same(tmp_path):
    """Issue 57: what augd check says a job would meet is what `augd run` then reports, split by split: the images
    it writes (the rejected ones apart), each rejection counted in its split, with the same reason and words; two
    truncated JPEGs (one cut in its tables, which made TensorFlow's libjpeg print "Improper call to JPEG library in
    state 201" on the run's stderr, one cut in its pixels) among them."""
    root = tmp_path / "voc"
    shutil.copytree(VOC, root)
    xml = root / "Annotations" / "scene_001.xml"
    xml.write_text(re.sub(r"<xmax>\d+</xmax>", "<xmax>200</xmax>", xml.read_text(), count=1))   # far out
    for name, keep in (("scene_002", 300), ("scene_003", 900)):   # its Huffman tables cut; its pixels cut
        jpg = root / "JPEGImages" / f"{name}.jpg"
        jpg.write_bytes(jpg.read_bytes()[:keep])
    (root / "JPEGImages" / "scene_005.jpg").write_bytes(b"\xff\xd8\xff\xe0 not a jpeg at all")
    r = _check(root, "--json", tmp_path / "check.json")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "  train: 2 images (4 rejected), " in r.stdout, r.stdout
    checked = json.loads((tmp_path / "check.json").read_text())
    run = subprocess.run([sys.executable, "-m", "augd", "run", str(root), "-p", "detection-ssd", "-o",
                          str(tmp_path / "out"), "--executor", "threads", "--workers", "1"], capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Improper call" not in run.stderr + run.stdout, run.stderr[-3000:]
    m = json.loads((tmp_path / "out" / "voc" / "manifest.json").read_text())
    assert {s: (v["images"], v["rejected"]) for s, v in m["splits"].items()} == \
        {s: (v["images"], v["rejected"]) for s, v in checked["splits"].items()} == {"train": (2, 4),
                                                                                     "validation": (2, 0)}
    assert [(x["path"], x["reason"], x["message"]) for x in m["inputs"]["rejected_files"]] == \
        [(x["path"], x["reason"], x["message"]) for x in checked["rejected"]]
    cut = {x["path"]: x["message"] for x in checked["rejected"] if x["reason"] == "undecodable"}
    assert set(cut) == {"JPEGImages/scene_002.jpg", "JPEGImages/scene_003.jpg"}
    assert set(cut.values()) == {"truncated or corrupt JPEG data: its header reads, its pixels do not decode"}
    objects = {c["name"]: c["objects_in"] for c in m["annotations"]["classes"]}   # the job read them, rejected apart
    assert objects == {c: sum(v["objects"].get(c, 0) for v in checked["splits"].values()) for c in objects}


def test_exif_rotated_images_are_counted(tmp_path):
    root = tmp_path / "c" / "cat"
    root.mkdir(parents=True)
    for k, f in enumerate(sorted(DEMO.glob("animals_food/*.jpg"))[:3]):
        (_rotated if k == 0 else shutil.copy)(f, root / f.name)
    report = check_dataset(str(tmp_path / "c"))
    assert report.splits["all"].rotated == 1 and report.exit_code() == 0


def test_an_image_whose_pixels_do_not_decode_is_one_a_job_would_reject(tmp_path):
    root = tmp_path / "c" / "cat"
    root.mkdir(parents=True)
    photos = sorted(DEMO.glob("animals_food/*.jpg"))[:2]
    shutil.copy(photos[0], root / "whole.jpg")
    (root / "cut.jpg").write_bytes(photos[1].read_bytes()[:900])   # its header reads, its pixels are gone
    report = check_dataset(str(tmp_path / "c"))
    assert [(p, r) for p, r, _ in report.rejected] == [("cat/cut.jpg", "undecodable")] and report.exit_code() == 1


def test_the_hash_survives_resizing_and_reencoding_and_tells_photos_apart(tmp_path):
    photos = sorted(DEMO.glob("*/*.jpg"))
    hashes = []
    for k, f in enumerate(photos):
        im = cv2.imread(str(f))
        hashes.append(hash_file(str(f), *im.shape[:2]))
        for scale, q in ((0.3, 90), (0.6, 40), (1.7, 50), (2.5, 80)):
            _copy(f, tmp_path / f"{k}.jpg", scale, q)
            h, w = cv2.imread(str(tmp_path / f"{k}.jpg")).shape[:2]
            assert bin(hashes[-1] ^ hash_file(str(tmp_path / f"{k}.jpg"), h, w)).count("1") <= 6, (f.name, scale, q)
    pairs = near_pairs(hashes)
    # the only pair among the demo's 20: two overlapping crops of one Hubble field
    assert [(photos[i].name, photos[j].name) for i, j, _ in pairs] == [("hubble_deep_field_1.jpg",
                                                                       "hubble_deep_field_3.jpg")]
    assert hash_file(str(tmp_path / "none.jpg")) is None
    (tmp_path / "bad.jpg").write_bytes(b"garbage")
    assert hash_file(str(tmp_path / "bad.jpg")) is None


def test_near_pairs_finds_each_close_pair_once_in_many():
    rng = np.random.default_rng(0)
    hashes = [int(v) for v in rng.integers(0, 2 ** 63, 3000, dtype=np.int64)]
    hashes[7], hashes[2999] = hashes[1500] ^ 0b1011, hashes[3] ^ (1 << 40)
    hashes[11] = None
    assert near_pairs(hashes) == [(3, 2999, 1), (7, 1500, 3)]


def _run(*args):
    return subprocess.run([sys.executable, "-m", "augd", "run", *map(str, args)], capture_output=True, text=True,
                          timeout=300)


def test_augd_run_check_fails_a_leaking_job_and_writes_nothing_or_its_report_beside_the_manifest(classes, tmp_path):
    _copy(classes / "train" / "space" / "rocket_0.jpg", classes / "validation" / "space" / "launch.jpg", 0.7, 70)
    r = _run(classes, "-p", "classify-light", "-o", tmp_path / "out", "--check", "--quiet", "--workers", "1")
    assert r.returncode == 1 and "the dataset check found leak=1" in r.stderr, r.stderr[-2000:]
    assert "check_failed" in r.stderr or "launch.jpg" in r.stderr
    assert not (tmp_path / "out" / "classes").exists()
    r = _run(classes, "-p", "classify-light", "-o", tmp_path / "out", "--check", "", "--quiet", "--workers", "1")
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads((tmp_path / "out" / "classes" / "check.json").read_text())
    assert got["problems"] == {"leak": 1, "rejected": 0} and got["duplicates"]["pairs"][0]["splits"] == \
        ["train", "validation"]


def test_the_daemon_runs_the_check_when_its_config_asks(classes, tmp_path):
    from tests.daemon_harness import Daemon, write_config
    _copy(classes / "train" / "space" / "rocket_0.jpg", classes / "validation" / "space" / "launch.jpg", 0.7, 70)
    cfg = write_config(tmp_path / "d", check={"fail_on": ["leak"]})
    d = Daemon(cfg).start()
    try:
        d.wait_ready()
        shutil.copytree(classes, d.inbox / "leaky")
        (d.inbox / "leaky" / "_READY").touch()
        failed = d.wait_failed("leaky", timeout=120)
        failure = json.loads((failed / "failure.json").read_text())
        assert failure["reason"] == "check_failed" and "the dataset check found leak=1" in failure["message"], failure
        assert "launch.jpg" in (failed / "error.txt").read_text()   # the whole report, for people
    finally:
        d.stop()
