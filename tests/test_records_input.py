"""TFRecord shards as a job's input (augd/annotations/tfrecords.py): the Object Detection API's records, TF-slim's
classification records and augd's own outputs, written here by TensorFlow's own writer, through `augd run`;
boxes, masks and keypoints judged by the decoded pixels after the chain; bad records rejected by name."""
from __future__ import annotations

import gzip
import json
import struct
import zlib
from pathlib import Path

import cv2
import numpy as np
import pytest

from tests.test_detection_job import (COLOURS, PIPELINE, _covered, assert_boxes_match_pixels, augd, make_voc,
                                      read_records, run, scene)

LABEL_MAP = "".join(f"item {{\n  id: {k}\n  name: '{n}'\n}}\n" for k, n in enumerate(COLOURS, 1))


def _png(rgb: np.ndarray) -> bytes:
    ok, buf = cv2.imencode(".png", rgb[:, :, ::-1])
    assert ok
    return buf.tobytes()


def odapi_example(i: int, rgb: np.ndarray, objects, *, masks: bool = True, keypoints: bool = True,
                  source_id: str | None = None) -> bytes:
    """A record as create_coco_tf_record.py writes it: PNG instance masks, 2 keypoints per object (the box's
    centre, visible, and a point not labelled)."""
    import tensorflow as tf

    h, w = rgb.shape[:2]

    def b(*v):
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=list(v)))

    def f(v):
        return tf.train.Feature(float_list=tf.train.FloatList(value=list(v)))

    def n(v):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=list(v)))

    ids = {c: k for k, c in enumerate(COLOURS, 1)}
    feat = {
        "image/encoded": b(_png(rgb)), "image/format": b(b"png"), "image/height": n([h]), "image/width": n([w]),
        "image/filename": b(f"im{i:02d}.png".encode()),
        "image/source_id": b((source_id if source_id is not None else str(1000 + i)).encode()),
        "image/object/bbox/xmin": f([x0 / w for _, (x0, _, _, _) in objects]),
        "image/object/bbox/ymin": f([y0 / h for _, (_, y0, _, _) in objects]),
        "image/object/bbox/xmax": f([x1 / w for _, (_, _, x1, _) in objects]),
        "image/object/bbox/ymax": f([y1 / h for _, (_, _, _, y1) in objects]),
        "image/object/class/text": b(*(c.encode() for c, _ in objects)),
        "image/object/class/label": n([ids[c] for c, _ in objects]),
        "image/object/is_crowd": n([0] * len(objects)),
    }
    if masks:
        pngs = []
        for _, (x0, y0, x1, y1) in objects:
            m = np.zeros((h, w), np.uint8)
            m[y0:y1, x0:x1] = 1
            pngs.append(cv2.imencode(".png", m)[1].tobytes())
        feat["image/object/mask"] = b(*pngs)
    if keypoints:
        feat["image/object/keypoint/x"] = f([v for _, (x0, _, x1, _) in objects for v in ((x0 + x1) / 2 / w, 0)])
        feat["image/object/keypoint/y"] = f([v for _, (_, y0, _, y1) in objects for v in ((y0 + y1) / 2 / h, 0)])
        feat["image/object/keypoint/visibility"] = n([v for _ in objects for v in (2, 0)])
    return tf.train.Example(features=tf.train.Features(feature=feat)).SerializeToString()


def write_shard(path: Path, records, compression: str = "") -> None:
    import tensorflow as tf

    path.parent.mkdir(parents=True, exist_ok=True)
    with tf.io.TFRecordWriter(str(path), tf.io.TFRecordOptions(compression_type=compression)) as w:
        for r in records:
            w.write(r)


def make_odapi(root: Path, n: int = 6, seed: int = 3, compression: str = "") -> Path:
    """OD API records in two train shards and one val shard (create_coco_tf_record's names), label map beside."""
    scenes = [scene(seed * 100 + i) for i in range(n)]
    examples = [odapi_example(i, *scenes[i]) for i in range(n)]
    cut = n * 2 // 3
    write_shard(root / "coco_train.record-00000-of-00002", examples[:cut:2], compression)
    write_shard(root / "coco_train.record-00001-of-00002", examples[1:cut:2], compression)
    write_shard(root / "coco_val.record-00000-of-00001", examples[cut:], compression)
    (root / "label_map.pbtxt").write_text(LABEL_MAP)
    return root


def test_odapi_records_boxes_masks_and_keypoints_agree_with_the_pixels_after_the_chain(tmp_path):
    p = tmp_path / "det-test.yaml"
    p.write_text(PIPELINE)
    job = make_odapi(tmp_path / "odapi")
    m = run(job, tmp_path / "out", p)
    a = m["annotations"]
    assert a["format"] == "tfrecord" and m["inputs"]["rejected"] == 0 and m["inputs"]["written"] == 6
    assert {c["name"]: c["id"] for c in a["classes"]} == {c: k for k, c in enumerate(COLOURS, 1)}
    records = read_records(tmp_path / "out" / "odapi")
    assert len(records) == 4 * 4 + 2   # train's 4 images augmented; validation's 2 (coco_val) as they are
    assert {r["augd/variant"] for r in records if r["image/filename"].decode() in ("1004", "1005")} == {0}
    assert {x.name.split("-")[1] for x in (tmp_path / "out" / "odapi").glob("*.tfrecord")} == {"train", "validation"}
    assert m["splits"]["train"]["images"] == 4 and m["splits"]["validation"]["images"] == 2
    assert {r["image/filename"].decode() for r in records} == {str(1000 + i) for i in range(6)}  # source ids
    assert assert_boxes_match_pixels(records) >= 4 * 4 + 2
    import tensorflow as tf
    masks = points = 0
    for r in records:
        texts = [t.decode() for t in r["image/object/class/text"]]
        for name, png in zip(texts, r["image/object/mask"]):
            mask = tf.io.decode_png(png, channels=1).numpy()[..., 0]
            assert _covered(r["pixels"], mask, name, 1) >= 0.98, f"{r['image/filename']}: {name}'s mask"
            masks += 1
        h, w = r["pixels"].shape[:2]
        xs, ys = r["image/object/keypoint/x"], r["image/object/keypoint/y"]
        vis = r["image/object/keypoint/visibility"]
        assert len(xs) == 2 * len(texts) and list(vis[1::2]) == [0] * len(texts)
        for k, name in enumerate(texts):
            if vis[2 * k]:   # the centre, where it is still labelled, lies on its object's colour
                x, y = int(xs[2 * k] * w), int(ys[2 * k] * h)
                near = r["pixels"][max(y - 1, 0):y + 2, max(x - 1, 0):x + 2].reshape(-1, 3).astype(int)
                assert (np.abs(near - COLOURS[name]).max(axis=1) < 60).any(), f"{r['image/filename']}: {name}"
                points += 1
    assert masks >= len(records) and points >= len(records)


def test_tf_slim_gzip_records_with_labels_txt_keep_their_labels(tmp_path):
    """TF-slim's classification records (GZIP, no source id), labels.txt beside: labels kept, splits from the
    shard names, identities <shard>#<index>."""
    import tensorflow as tf

    def example(label: int, seed: int) -> bytes:
        rgb = np.full((40, 48, 3), (40, 200, 40) if label else (200, 40, 40), np.uint8)
        rgb[seed % 30:seed % 30 + 8, 5:15] = 255
        enc = cv2.imencode(".jpg", rgb[:, :, ::-1])[1].tobytes()
        return tf.train.Example(features=tf.train.Features(feature={
            "image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(value=[enc])),
            "image/format": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"jpg"])),
            "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label])),
            "image/height": tf.train.Feature(int64_list=tf.train.Int64List(value=[40])),
            "image/width": tf.train.Feature(int64_list=tf.train.Int64List(value=[48])),
        })).SerializeToString()

    job = tmp_path / "flowers"
    write_shard(job / "flowers_train_00000-of-00001.tfrecord", [example(k % 2, k) for k in range(6)], "GZIP")
    write_shard(job / "flowers_validation_00000-of-00001.tfrecord", [example(1, 40), example(0, 41)], "GZIP")
    (job / "labels.txt").write_text("0:daisy\n1:rose\n")
    p = tmp_path / "cls.yaml"
    p.write_text("name: cls\nseed: 3\nvariants: 1\noutput: {format: jpeg, shards: 1}\nops:\n"
                 "  - random_flip_left_right: {}\n")
    m = json.loads((augd("run", job, "-p", p, "-o", tmp_path / "out", "--quiet") and
                    (tmp_path / "out" / "flowers" / "manifest.json")).read_text())
    assert m["inputs"]["rejected"] == 0 and m["inputs"]["written"] == 8
    assert [c["name"] for c in m["classes"]] == ["daisy", "rose"]
    got = {}
    for r in read_records(tmp_path / "out" / "flowers"):
        name = r["image/filename"].decode()
        assert name.startswith(("flowers_train_00000-of-00001.tfrecord#", "flowers_validation_00000-of-00001"))
        red = r["pixels"][..., 0].astype(int).mean() > r["pixels"][..., 1].astype(int).mean()
        assert int(r["image/class/label"]) == (0 if red else 1), name   # the label goes with its pixels
        got[name] = r["image/class/text"].decode()
    assert len(got) == 8 and set(got.values()) == {"daisy", "rose"}


def test_an_augd_output_re_augmented_gives_the_bytes_of_the_folder_job(tmp_path):
    """VOC folder -> originals only (variant 0, the source bytes) -> the chain gives the same shards, byte for
    byte, as the chain on the folder: same identities (image/filename), boxes, splits and seeds."""
    p = tmp_path / "det-test.yaml"
    p.write_text(PIPELINE)
    keep = tmp_path / "keep.yaml"
    keep.write_text("name: keep\nvariants: 0\nkeep_original: true\noutput: {format: png, shards: 2}\nops: []\n")
    job = make_voc(tmp_path / "scenes")
    run(job, tmp_path / "first", keep)
    direct = run(job, tmp_path / "direct", p)
    shards = sorted(x.name for x in (tmp_path / "direct" / "scenes").glob("*.tfrecord"))
    from augd.defaults import ExecutorKind
    from augd.job.executors import traits
    for executor in [k.value for k in ExecutorKind if k is not ExecutorKind.AUTO and not traits(k).missing(k)]:
        # every executor (the registry's) reads a record in place
        out = tmp_path / f"again-{executor}"
        again = run(tmp_path / "first" / "scenes", out, p, "--executor", executor)
        assert again["annotations"]["format"] == "tfrecord" and again["inputs"]["rejected"] == 0
        assert shards and shards == sorted(x.name for x in (out / "scenes").glob("*.tfrecord"))
        for name in shards:
            assert (tmp_path / "direct" / "scenes" / name).read_bytes() == (out / "scenes" / name).read_bytes(), \
                (executor, name)
        assert direct["annotations"]["objects"] == again["annotations"]["objects"]


def _frame(data: bytes) -> bytes:
    from augd.io.lite import masked_crc
    head = struct.pack("<Q", len(data))
    return head + masked_crc(head) + data + masked_crc(data)


def test_bad_records_are_rejected_by_name_and_the_job_goes_on(tmp_path):
    """A shard holding a good record, one whose data fails its checksum, one that is no Example, one with no
    image, one whose box lists disagree, then a truncated record: each rejected by shard#index and key."""
    import tensorflow as tf

    scenes = [scene(700 + i) for i in range(4)]
    good = [odapi_example(i, *scenes[i], masks=False, keypoints=False) for i in range(4)]
    corrupt = bytearray(_frame(good[1]))
    corrupt[40] ^= 0xFF
    noimage = tf.train.Example.FromString(good[2])
    del noimage.features.feature["image/encoded"]
    disagree = tf.train.Example.FromString(good[3])
    disagree.features.feature["image/object/bbox/ymin"].float_list.value.append(0.5)
    body = (_frame(good[0]) + bytes(corrupt) + _frame(b"\x07not a protobuf") + _frame(noimage.SerializeToString())
            + _frame(disagree.SerializeToString()) + _frame(good[1])[:50])
    job = tmp_path / "bad"
    job.mkdir()
    (job / "data.tfrecord").write_bytes(body)
    (job / "label_map.pbtxt").write_text(LABEL_MAP)
    (job / "stray.png").write_bytes(_png(scenes[0][0]))
    p = tmp_path / "det-test.yaml"
    p.write_text(PIPELINE)
    # an image beside the shards: `auto` would take the folder job; format tfrecord names the shards the input
    m = run(job, tmp_path / "out", p, "--max-rejected", "0.9", "--annotations", "tfrecord")
    rejected = {r["path"]: (r["reason"], r["message"]) for r in m["inputs"]["rejected_files"]}
    assert m["inputs"]["written"] == 1, rejected
    assert rejected["data.tfrecord#1"][0] == "bad_record" and "checksum" in rejected["data.tfrecord#1"][1]
    assert rejected["data.tfrecord#2"][0] == "bad_record" and "not a tf.train.Example" in rejected["data.tfrecord#2"][1]
    assert rejected["data.tfrecord#3"][0] == "bad_record" and "image/encoded" in rejected["data.tfrecord#3"][1]
    reason, message = rejected["1003"]
    assert reason == "bad_annotation" and "data.tfrecord#4" in message and "image/object/bbox/ymin" in message
    assert rejected["data.tfrecord#5+"][0] == "bad_record" and "truncated" in rejected["data.tfrecord#5+"][1]
    assert rejected["stray.png"][0] == "beside_records"
    assert len(read_records(tmp_path / "out" / "bad")) == 4


def test_augd_check_reads_shards_and_finds_a_leak_across_splits(tmp_path):
    scenes = [scene(900 + i) for i in range(3)]
    job = tmp_path / "leaky"
    write_shard(job / "x-train-00000-of-00001.tfrecord", [odapi_example(i, *scenes[i]) for i in range(3)])
    write_shard(job / "x-val-00000-of-00001.tfrecord", [odapi_example(9, *scenes[0], source_id="again")])
    (job / "label_map.pbtxt").write_text(LABEL_MAP)
    p = augd("check", job, "--json", tmp_path / "check.json", check=False)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "tfrecord, 4 images" in p.stdout and "1 across splits" in p.stdout
    report = json.loads((tmp_path / "check.json").read_text())
    pairs = report["duplicates"]["pairs"]
    assert any({d["a"], d["b"]} == {"1000", "again"} for d in pairs), pairs


@pytest.mark.parametrize("kind", ["gzip", "zlib", "none"])
def test_shards_are_found_by_their_contents_and_read_in_place(tmp_path, kind):
    from augd.io.lite import frames, inflate, sniff_shard, value_offsets
    rgb, objects = scene(5)
    rec = odapi_example(0, rgb, objects)
    plain = _frame(rec) * 2
    body = {"gzip": gzip.compress(plain), "zlib": zlib.compress(plain), "none": plain}[kind]
    path = tmp_path / "no-telling-name.bin"
    path.write_bytes(body)
    (tmp_path / "picture.png").write_bytes(_png(rgb))
    assert sniff_shard(str(path)) == kind and sniff_shard(str(tmp_path / "picture.png")) is None
    if kind != "none":
        assert inflate(str(path), kind, str(tmp_path / "plain")) == ""
        path = tmp_path / "plain"
    got = list(frames(str(path)))
    assert [f.index for f in got] == [0, 1] and all(f.data == rec and not f.error for f in got)
    [(start, size)] = value_offsets(rec, ("image/encoded",))["image/encoded"]
    data = path.read_bytes()
    assert data[got[1].offset + start:got[1].offset + start + size] == _png(rgb)
    if kind == "gzip":   # a truncated stream keeps what inflated; the tail is reported lost
        (tmp_path / "cut.gz").write_bytes(body[:len(body) * 3 // 4])
        assert "ends early" in inflate(str(tmp_path / "cut.gz"), "gzip", str(tmp_path / "cut"))
        assert list(frames(str(tmp_path / "cut")))[-1].lost


def test_the_daemon_runs_a_folder_of_records_dropped_into_the_inbox(tmp_path):
    from tests.daemon_harness import Daemon, manifest, write_config
    d = Daemon(write_config(tmp_path, settle_seconds=1.0)).start()
    try:
        d.wait_ready()
        (tmp_path / "pipelines" / "det-test.yaml").write_text(PIPELINE)
        make_odapi(tmp_path / "staging" / "shards", n=3, compression="GZIP")
        (d.inbox / "det-test").mkdir(parents=True, exist_ok=True)
        (tmp_path / "staging" / "shards").rename(d.inbox / "det-test" / "shards")
        d.wait_done("shards", timeout=180)
        m = manifest(d.out, "shards")
        assert m["annotations"]["format"] == "tfrecord" and m["inputs"]["rejected"] == 0
        assert m["inputs"]["written"] == 3 and set(m["splits"]) == {"train", "validation"}
        assert assert_boxes_match_pixels(read_records(d.out / "shards")) >= 3 * 4
    finally:
        assert d.stop() == 0, d.log_tail()


def test_float_masks_and_repeated_source_ids_read_directly(tmp_path):
    """The OD API's NUMERICAL_MASKS (floats, objects x height x width) become each object's mask; a second record
    of one source id takes <shard>#<index> as its identity; stated sizes are checked against the image."""
    import tensorflow as tf

    from augd.annotations.rle import rle_decode
    from augd.annotations.tfrecords import read_records_job
    rgb, objects = scene(11)
    h, w = rgb.shape[:2]
    ex = tf.train.Example.FromString(odapi_example(0, rgb, objects, masks=False, keypoints=False, source_id="same"))
    floats = np.zeros((len(objects), h, w), np.float32)
    for k, (_, (x0, y0, x1, y1)) in enumerate(objects):
        floats[k, y0:y1, x0:x1] = 1.0
    ex.features.feature["image/object/mask"].float_list.value.extend(floats.ravel().tolist())
    lying = tf.train.Example.FromString(ex.SerializeToString())
    lying.features.feature["image/height"].int64_list.value[0] = h + 10
    write_shard(tmp_path / "j" / "a.tfrecord", [ex.SerializeToString()] * 2 + [lying.SerializeToString()])
    job = read_records_job(str(tmp_path / "j"), max_pixels=10**8)
    assert [i.relpath for i in job.scan.images] == ["a.tfrecord#1", "same"]
    assert job.layout.format == "tfrecord" and "states the image is" in job.layout.rejected["a.tfrecord#2"]
    for obj, (name, (x0, y0, x1, y1)) in zip(job.layout.annotations["same"].objects, objects):
        mask = rle_decode(obj.rle)
        assert obj.name == name and obj.box == (x0, y0, x1, y1)
        assert mask.sum() == (x1 - x0) * (y1 - y0) and mask[y0:y1, x0:x1].all()


def test_semantic_masks_in_records_are_read_in_place_and_give_the_folder_jobs_bytes(tmp_path):
    """DeepLab's image/segmentation/class/encoded inside an augd output, re-augmented: the same shards as the
    VOC folder with SegmentationClass/ masks gives (the mask read from the record, in place)."""
    from tests.annotated import voc_job
    from tests.test_detection_job import _mask_scenes
    p = tmp_path / "det-test.yaml"
    p.write_text(PIPELINE)
    keep = tmp_path / "keep.yaml"
    keep.write_text("name: keep\nvariants: 0\nkeep_original: true\noutput: {format: png}\nops: []\n")
    voc_job(str(tmp_path / "seg"), _mask_scenes(), masks="P")
    run(tmp_path / "seg", tmp_path / "first", keep)
    run(tmp_path / "seg", tmp_path / "direct", p)
    again = run(tmp_path / "first" / "seg", tmp_path / "again", p)
    assert again["annotations"]["format"] == "tfrecord" and again["inputs"]["rejected"] == 0
    shards = sorted(x.name for x in (tmp_path / "direct" / "seg").glob("*.tfrecord"))
    assert shards and all((tmp_path / "direct" / "seg" / n).read_bytes() == (tmp_path / "again" / "seg" / n)
                          .read_bytes() for n in shards)
    assert all(r["image/segmentation/class/format"] == b"png" for r in read_records(tmp_path / "again" / "seg"))


def test_malformed_values_reject_their_record_never_the_job(tmp_path):
    """Untrusted records (the review's cases): a varint where the Example's message is, bytes where a box or
    label is, a class text that is no text, a NaN visibility, an empty mask PNG, a class text with spaces, a source
    id naming another record's fallback, a classification label that is a list: each rejects its own record."""
    import tensorflow as tf

    from augd.annotations.tfrecords import read_records_job
    rgb, objects = scene(21)
    base = odapi_example(0, rgb, objects, masks=False, keypoints=False, source_id="a.tfrecord#1")

    def edited(**features):
        ex = tf.train.Example.FromString(base)
        ex.features.feature["image/source_id"].bytes_list.value[:] = [b""]
        for key, value in features.items():
            ex.features.feature[key.replace("__", "/")].CopyFrom(value)
        return ex.SerializeToString()
    F = tf.train.Feature
    n = len(objects)
    bad = [
        b"\x08\x00",                                                                  # varint where features is
        edited(image__object__bbox__xmin=F(bytes_list=tf.train.BytesList(value=[b"x"] * n))),
        edited(image__object__class__text=F(int64_list=tf.train.Int64List(value=[7] * n))),
        edited(image__object__mask=F(bytes_list=tf.train.BytesList(value=[b""] * n))),
        edited(image__object__class__text=F(bytes_list=tf.train.BytesList(value=[b"red "] * n))),
        edited(image__object__keypoint__x=F(float_list=tf.train.FloatList(value=[0.5] * n)),
               image__object__keypoint__y=F(float_list=tf.train.FloatList(value=[0.5] * n)),
               image__object__keypoint__visibility=F(float_list=tf.train.FloatList(value=[float("nan")] * n))),
    ]
    write_shard(tmp_path / "j" / "a.tfrecord", [base, *bad])
    (tmp_path / "j" / "label_map.pbtxt").write_text(LABEL_MAP)
    job = read_records_job(str(tmp_path / "j"), max_pixels=10**8)
    kept = [i.relpath for i in job.scan.images if i.relpath not in job.layout.rejected]
    assert kept == ["a.tfrecord#1"] or kept == ["a.tfrecord#1~1"], kept   # the fallback stays unique
    assert len({i.relpath for i in job.scan.images}) == len(job.scan.images)
    reasons = {r.relpath: r.reason for r in job.scan.rejected}
    assert reasons.get("a.tfrecord#1") == "bad_record" and len(reasons) == len(bad), reasons
    label = tf.train.Example.FromString(base)
    label.features.feature["image/class/label"].int64_list.value[:] = [3, 5]
    write_shard(tmp_path / "c" / "c.tfrecord", [label.SerializeToString()])
    cls = read_records_job(str(tmp_path / "c"), fmt="none", max_pixels=10**8)
    assert not cls.scan.images and cls.scan.rejected[0].reason == "bad_annotation"
    assert "image/class/label is [3, 5]" in cls.scan.rejected[0].message


def test_a_stray_shard_in_a_folder_job_is_one_rejected_file(tmp_path):
    from augd.job.units import plan_job
    from augd.schema import parse_pipeline
    spec = parse_pipeline("name: t\nops: []\n", "t")
    job = make_voc(tmp_path / "voc", n=2)
    write_shard(job / "leftover.tfrecord", [odapi_example(0, *scene(1))])
    plan = plan_job(str(job), spec, None, 10**8)
    assert plan.detection.format == "voc" and len(plan.images) == 2   # the VOC layout reads its own folders
    for name in ("cat", "dog"):
        (tmp_path / "cls" / name).mkdir(parents=True)
        (tmp_path / "cls" / name / "x.png").write_bytes(_png(scene(2)[0]))
    write_shard(tmp_path / "cls" / "leftover.tfrecord", [odapi_example(0, *scene(1))])
    plan = plan_job(str(tmp_path / "cls"), spec, None, 10**8)
    assert plan.detection is None and plan.scan.classes == ("cat", "dog") and len(plan.images) == 2
    assert [(r.relpath, r.reason) for r in plan.scan.rejected] == [("leftover.tfrecord", "unknown_format")]


def test_format_tfrecord_takes_the_shards_or_says_there_are_none(tmp_path):
    from augd.errors import JobFailed
    from augd.job.units import plan_job
    from augd.schema import parse_pipeline
    spec = parse_pipeline("name: t\nops: []\nannotations: {format: tfrecord}\n", "t")
    job = make_voc(tmp_path / "voc", n=1)
    with pytest.raises(JobFailed, match="annotations.format is tfrecord and the folder's root holds no TFRecord"):
        plan_job(str(job), spec, None, 10**8)
    write_shard(job / "data.tfrecord", [odapi_example(0, *scene(1))])
    plan = plan_job(str(job), spec, None, 10**8)
    assert plan.detection.format == "tfrecord" and [i.relpath for i in plan.images] == ["1000"]
    assert {(r.relpath, r.reason) for r in plan.scan.rejected} == {("Annotations/", "beside_records"),
                                                                   ("JPEGImages/", "beside_records")}
