"""augd.io.records: the Example schema, read back by the seed reader, FEATURES and parse_example."""
import hashlib
import io

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from augd.formats import passthrough_ok, read_header
from augd.io.records import FEATURES, make_example, parse_example
from tests.jobfiles import seed_reader

ARR = np.random.default_rng(3).integers(0, 255, (23, 37, 3), np.uint8)


def encode(fmt: str, arr=ARR, mode="RGB", **kw) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(arr).convert(mode).save(buf, fmt, **kw)
    return buf.getvalue()


def example(encoded: bytes, fmt: str, **over) -> bytes:
    kw = dict(encoded=encoded, fmt=fmt, height=23, width=37, channels=3, label=4, label_text="cat",
              filename="cat/a.jpg", source_sha256=hashlib.sha256(b"src").hexdigest(), variant=2,
              pipeline="default", pipeline_sha256="ab" * 32)
    kw.update(over)
    return make_example(**kw)


@pytest.mark.parametrize("fmt", ["jpeg", "png"])
def test_seed_reader_reads_records(fmt):
    data = encode(fmt.upper())
    img, label = seed_reader(example(data, fmt))
    assert img.shape == (23, 37, 3) and int(label) == 4
    if fmt == "png":
        np.testing.assert_array_equal(img.numpy(), ARR)


@pytest.mark.parametrize("fmt,mode,kw,ok", [
    ("JPEG", "RGB", {}, True), ("JPEG", "RGB", {"progressive": True}, True), ("JPEG", "L", {}, False),
    ("JPEG", "CMYK", {}, False), ("PNG", "RGB", {}, True), ("PNG", "RGBA", {}, False), ("PNG", "L", {}, False),
    ("PNG", "P", {}, False), ("WEBP", "RGB", {}, False),
])
def test_passthrough_sources_satisfy_the_seed_reader(fmt, mode, kw, ok):
    """passthrough_ok promises that the source bytes can be stored as they are: check that promise."""
    data = encode(fmt, mode=mode, **kw)
    h = read_header(data)
    assert passthrough_ok(h) is ok
    if ok:
        img, _ = seed_reader(example(data, h.format, height=h.height, width=h.width))
        assert img.shape == (h.height, h.width, 3)


def test_all_keys_through_features_and_parse_example():
    data = encode("JPEG")
    s = example(data, "jpeg", filename="cat/ä b.jpg")
    parsed = tf.io.parse_single_example(s, FEATURES)
    assert set(parsed) == set(FEATURES)
    py = parse_example(s)
    assert py == {
        "image/encoded": data, "image/format": "jpeg", "image/height": 23, "image/width": 37,
        "image/channels": 3, "image/colorspace": "RGB", "image/class/label": 4, "image/class/text": "cat",
        "image/filename": "cat/ä b.jpg", "image/source_id": hashlib.sha256(b"src").hexdigest(),
        "image/key/sha256": hashlib.sha256(data).hexdigest(), "augd/variant": 2, "augd/pipeline": "default",
        "augd/pipeline_sha256": "ab" * 32,
    }
    for key, value in py.items():
        got = parsed[key].numpy()
        assert got == (value.encode() if isinstance(value, str) else value), key
    assert parsed["image/raw"].numpy() == b""


def test_raw_records():
    s = example(ARR.tobytes(), "raw")
    py = parse_example(s)
    assert "image/encoded" not in py and py["image/format"] == "raw"
    assert py["image/key/sha256"] == hashlib.sha256(ARR.tobytes()).hexdigest()
    f = tf.io.parse_single_example(s, FEATURES)
    img = tf.reshape(tf.io.decode_raw(f["image/raw"], tf.uint8), [f["image/height"], f["image/width"], 3])
    np.testing.assert_array_equal(img.numpy(), ARR)
    assert f["image/encoded"].numpy() == b""


def test_unlabeled_and_non_utf8_filename_round_trip():
    name = b"dir/bad\xff.jpg".decode("utf-8", "surrogateescape")
    py = parse_example(example(b"x", "jpeg", label=-1, label_text="", filename=name))
    assert (py["image/class/label"], py["image/class/text"], py["image/filename"]) == (-1, "", name)


def test_serialization_is_deterministic():
    a = example(encode("JPEG"), "jpeg")
    b = example(encode("JPEG"), "jpeg")
    assert a == b
    assert a != example(encode("JPEG"), "jpeg", variant=3)


@pytest.mark.parametrize("over,match", [
    ({"fmt": "gif"}, "fmt must be one of"),
    ({"fmt": "raw", "encoded": b"short"}, "is not 23x37x3"),
])
def test_invalid_arguments(over, match):
    with pytest.raises(ValueError, match=match):
        example(**{"encoded": b"x", **over})


# ---- detection records: the Object Detection API's keys ----

from augd.annotations import Object  # noqa: E402
from augd.io.lite import decode_example  # noqa: E402
from augd.io.objects import RecordObjects  # noqa: E402
from augd.io.records import DETECTION_FEATURES, OBJECT_KEYS  # noqa: E402

OD_KEYS = ("image/object/bbox/xmin", "image/object/bbox/ymin", "image/object/bbox/xmax", "image/object/bbox/ymax",
           "image/object/class/label", "image/object/class/text", "image/object/difficult", "image/object/truncated")


def mask_png(mask: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(mask).save(buf, "PNG")
    return buf.getvalue()


def detection(**over) -> RecordObjects:
    """Three objects of a 23 x 37 image, one off its right edge by half a pixel, the last a 'difficult' one."""
    objs = (Object("dog", (1.5, 2.0, 20.25, 22.0)), Object("cat", (30.0, 0.0, 37.5, 11.5), truncated=True),
            Object("dog", (0.0, 12.0, 5.0, 23.0), difficult=True))
    masks = tuple(mask_png((np.arange(23 * 37).reshape(23, 37) % (k + 2) == 0).astype(np.uint8)) for k in range(3))
    kw = dict(masks=masks, segmentation=mask_png(np.full((23, 37), 255, np.uint8)))
    kw.update(over)
    return RecordObjects.from_objects(objs, 23, 37, {"dog": 1, "cat": 2}, **kw)


def test_detection_record_round_trips_through_both_readers_and_tf_data():
    data = encode("JPEG")
    objects = detection()
    s = example(data, "jpeg", objects=objects)
    py = parse_example(s)
    assert py == decode_example(s)                       # the TF-free reader agrees, key for key
    assert py["image/object/class/label"] == [1, 2, 1] and py["image/object/class/text"] == ["dog", "cat", "dog"]
    assert py["image/object/difficult"] == [0, 0, 1] and py["image/object/truncated"] == [0, 1, 0]
    assert py["image/object/bbox/xmax"][1] == 1.0          # 37.5 / 37 clipped to the image
    want = [(1.5 / 37, 2 / 23, 20.25 / 37, 22 / 23), (30 / 37, 0.0, 1.0, 11.5 / 23), (0.0, 12 / 23, 5 / 37, 1.0)]
    got = list(zip(*(py[k] for k in OD_KEYS[:4])))
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert py["image/object/mask"] == list(objects.masks)
    assert py["image/segmentation/class/format"] == "png"
    # classification keys unchanged
    assert py["image/class/label"] == 4 and py["image/encoded"] == data

    # a tf.data parser with the Object Detection API's keys (VarLenFeature), as its decoder reads them
    ds = tf.data.Dataset.from_tensors(s).map(
        lambda x: tf.io.parse_single_example(x, {**FEATURES, **DETECTION_FEATURES}))
    parsed = next(iter(ds))
    boxes = tf.stack([tf.sparse.to_dense(parsed[k]) for k in ("image/object/bbox/ymin", "image/object/bbox/xmin",
                                                              "image/object/bbox/ymax", "image/object/bbox/xmax")], 1)
    np.testing.assert_allclose(boxes.numpy(), [(b[1], b[0], b[3], b[2]) for b in want], rtol=1e-6)
    assert tf.sparse.to_dense(parsed["image/object/class/label"]).numpy().tolist() == [1, 2, 1]
    assert tf.sparse.to_dense(parsed["image/object/class/text"]).numpy().tolist() == [b"dog", b"cat", b"dog"]
    masks = [tf.io.decode_png(m).numpy()[:, :, 0] for m in tf.sparse.to_dense(parsed["image/object/mask"]).numpy()]
    assert [m.shape for m in masks] == [(23, 37)] * 3 and int(masks[0].sum()) == (np.arange(23 * 37) % 2 == 0).sum()
    seg = tf.io.decode_png(parsed["image/segmentation/class/encoded"]).numpy()
    assert seg.shape == (23, 37, 1) and (seg == 255).all()


def test_negative_image_has_empty_object_lists_and_classification_records_have_none():
    s = example(encode("JPEG"), "jpeg", objects=RecordObjects.from_objects((), 23, 37, {}))
    py = parse_example(s)
    assert all(py[k] == [] for k in OD_KEYS) and "image/object/mask" not in py
    assert "image/segmentation/class/encoded" not in py and py == decode_example(s)
    parsed = tf.io.parse_single_example(s, DETECTION_FEATURES)
    assert tf.sparse.to_dense(parsed["image/object/bbox/xmin"]).numpy().size == 0
    plain = example(encode("JPEG"), "jpeg")
    assert plain == example(encode("JPEG"), "jpeg", objects=None)
    assert not any(k in parse_example(plain) for k in (*OBJECT_KEYS, "image/segmentation/class/encoded"))


def test_detection_records_are_deterministic():
    a = example(encode("PNG"), "png", objects=detection())
    assert a == example(encode("PNG"), "png", objects=detection())
    assert a != example(encode("PNG"), "png", objects=detection(segmentation=None))


@pytest.mark.parametrize("objects,match", [
    (RecordObjects(((0.1, 0.1, 0.5, 0.5),), (1, 2), ("a",), (0,), (0,)), "2 labels for 1 boxes"),
    (RecordObjects(((0.1, 0.1, 1.5, 0.5),), (1,), ("a",), (0,), (0,)), r"object 1 \(a\).*not normalized"),
    (RecordObjects(((0.1, float("nan"), 0.5, 0.5),), (1,), ("a",), (0,), (0,)), "not normalized"),
    (RecordObjects(((0.6, 0.1, 0.5, 0.5),), (1,), ("a",), (0,), (0,)), "max < min"),
    (RecordObjects(((0.1, 0.1, 0.5, 0.5),), (0,), ("a",), (0,), (0,)), "ids start at 1"),
    (RecordObjects(((0.1, 0.1, 0.5, 0.5),), (1,), ("a",), (0,), (0,), masks=(b"x", b"y")), "2 instance masks"),
])
def test_detection_records_refuse_what_would_misstate_the_annotations(objects, match):
    with pytest.raises(ValueError, match=match):
        example(b"x", "jpeg", objects=objects)


def test_protobufs_parser_and_the_readers_own_agree_and_the_reader_decides_what_is_not_canonical(monkeypatch):
    """decode_example and value_offsets take protobuf's C parser's answer for a record it writes back byte for
    byte, its features in any order (augd's own sorted, TensorFlow's Python in an order of its own); a record with
    unknown, repeated or unpacked fields, or a key twice, gets the reader's own answer (the same dict, or its
    error)."""
    from augd.io import lite, upb
    keys = ("image/encoded", "image/segmentation/class/encoded", "image/missing")
    data = encode("JPEG")
    s = example(data, "jpeg", objects=detection())
    unknown = s + b"\x10\x05"                           # Example field 2, a varint: ignored by both
    entry = b"\x0a\x05image\x12\x04\x1a\x02\x08\x07"      # "image": an int64 list of 7, unpacked
    repeated = s + b"\x0a" + bytes([len(entry) + 2]) + b"\x0a" + bytes([len(entry)]) + entry   # features again
    bad = s[:-3]                                          # cut inside a field
    parsed = tf.train.Example.FromString(s)
    shuffled = tf.train.Example(features=tf.train.Features(feature={   # as the OD API's scripts write theirs
        k: parsed.features.feature[k] for k in sorted(parsed.features.feature, key=lambda k: (len(k), k[::-1]))}))
    canonical = (s, parsed.SerializeToString(), shuffled.SerializeToString())   # sorted (augd's), TF's orders
    assert len(set(canonical)) == 3
    two = tf.train.Example(features=tf.train.Features(feature={k: tf.train.Feature(int64_list=tf.train.Int64List(
        value=[v])) for k, v in (("a", 1), ("b", 2))})).SerializeToString()
    twice = two.replace(b"\x0a\x01b", b"\x0a\x01a")    # the key "a" twice: the parser keeps one, the bytes hold two
    assert upb.parsed(s) is not None and all(upb.parsed(r) is None for r in (unknown, repeated, bad, twice))
    assert all(upb.parsed(r) is not None for r in canonical)
    fast = [(lite.decode_example(r), lite.value_offsets(r, keys)) for r in (*canonical, unknown, repeated, twice)]
    with pytest.raises(ValueError) as fast_error:
        lite.decode_example(bad)
    monkeypatch.setattr(upb, "example_class", lambda: None)
    slow = [(lite.decode_example(r), lite.value_offsets(r, keys)) for r in (*canonical, unknown, repeated, twice)]
    with pytest.raises(ValueError) as slow_error:
        lite.decode_example(bad)
    assert fast == slow and str(fast_error.value) == str(slow_error.value)
    (start, size), = fast[0][1]["image/encoded"]
    assert s[start:start + size] == data and "image/missing" not in fast[0][1]


def test_protobufs_parser_answers_only_within_the_readers_bound(monkeypatch):
    """A record of more fields and values than the reader holds (MAX_RECORD_FIELDS) gets the reader's error from
    decode_example whether protobuf's parser could read it or not; one well within the bound, the parser's answer
    (the same dict), in either feature order."""
    from augd.io import lite, upb, wire
    ex = tf.train.Example(features=tf.train.Features(feature={f"k{i:02d}": tf.train.Feature(
        int64_list=tf.train.Int64List(value=[i, i + 1])) for i in range(20)}))
    records = (ex.SerializeToString(deterministic=True), ex.SerializeToString())
    fast = upb.example_class
    for bound, over in ((40, True), (140, True), (141, False), (1000, False)):   # the reader: 1 + 20 x 7
        monkeypatch.setattr(wire, "MAX_RECORD_FIELDS", bound)
        for r in records:
            answers = []
            for cls in (fast, lambda: None):
                monkeypatch.setattr(upb, "example_class", cls)
                try:
                    answers.append(lite.decode_example(r))
                except ValueError as exc:
                    answers.append(str(exc))
            assert answers[0] == answers[1] and isinstance(answers[0], str) == over, (bound, answers[0])
