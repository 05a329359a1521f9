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
