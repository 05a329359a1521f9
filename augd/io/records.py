"""The record schema: one tf.train.Example per stored image (docs/records.md).

gfile style, as TF-slim's and inception's converters write it, so their readers (and the seed reader, which
parses only image/encoded, height, width and class/label and calls tf.image.decode_jpeg) work unchanged.
decode_jpeg also decodes PNG, so PNG records satisfy that reader too. Raw records carry `image/raw`
(HxWxC uint8, row-major) instead of `image/encoded`.

Detection records add the keys of the TF Object Detection API's dataset_tools converters (normalized boxes,
1-based label ids, class texts, difficult, truncated, one PNG per instance mask, keypoints as its COCO converter
writes them), augd's oriented boxes (image/object/obb/*) and DeepLab's semantic mask keys.
"""
from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

import tensorflow as tf

from augd.io.lite import KEYPOINT_KEYS, OBJECT_KEYS, SEGMENTATION_KEYS  # noqa: F401 - re-exported: their one home
from augd.io.lite import OBB_KEYS, POLYGON_KEYS, TILE_KEYS
from augd.io.lite import TEXT_KEYS as _TEXT_KEYS, feature_value  # one schema for both readers

if TYPE_CHECKING:
    from augd.io.objects import RecordObjects

__all__ = ["DETECTION_FEATURES", "FEATURES", "OBJECT_KEYS", "PAYLOAD_FORMATS", "INT_KEYS",
           "SEGMENTATION_KEYS", "make_example", "parse_example"]

PAYLOAD_FORMATS = ("jpeg", "png", "raw")
INT_KEYS = ("image/height", "image/width", "image/channels", "image/class/label", "augd/variant")
_BYTES_KEYS = ("image/encoded", "image/raw")

#: For tf.io.parse_single_example: every key. Exactly one of image/encoded and image/raw is present in a
#: record, so both default to b"".
FEATURES = {
    **{k: tf.io.FixedLenFeature([], tf.string, default_value=b"") for k in _BYTES_KEYS},
    **{k: tf.io.FixedLenFeature([], tf.string) for k in _TEXT_KEYS},
    **{k: tf.io.FixedLenFeature([], tf.int64) for k in INT_KEYS},
}


#: For tf.io.parse_single_example: the detection keys (the Object Detection API's TfExampleDecoder reads the
#: object keys as VarLenFeature; DeepLab reads the segmentation keys as fixed strings).
DETECTION_FEATURES = {
    **{k: tf.io.VarLenFeature(tf.float32) for k in ("image/object/bbox/xmin", "image/object/bbox/ymin",
                                                     "image/object/bbox/xmax", "image/object/bbox/ymax")},
    "image/object/class/label": tf.io.VarLenFeature(tf.int64),
    "image/object/class/text": tf.io.VarLenFeature(tf.string),
    "image/object/difficult": tf.io.VarLenFeature(tf.int64),
    "image/object/truncated": tf.io.VarLenFeature(tf.int64),
    "image/object/mask": tf.io.VarLenFeature(tf.string),
    "image/object/weight": tf.io.VarLenFeature(tf.float32),
    "image/object/is_crowd": tf.io.VarLenFeature(tf.int64),
    "augd/object/ignored": tf.io.VarLenFeature(tf.string),
    "image/object/keypoint/x": tf.io.VarLenFeature(tf.float32),
    "image/object/keypoint/y": tf.io.VarLenFeature(tf.float32),
    "image/object/keypoint/visibility": tf.io.VarLenFeature(tf.int64),
    "image/object/keypoint/num": tf.io.VarLenFeature(tf.int64),
    **{k: tf.io.VarLenFeature(tf.float32) for k in OBB_KEYS},
    **{k: tf.io.VarLenFeature(tf.float32 if k.endswith(("/x", "/y")) else tf.int64) for k in POLYGON_KEYS},
    "image/segmentation/class/encoded": tf.io.FixedLenFeature([], tf.string, default_value=b""),
    "image/segmentation/class/format": tf.io.FixedLenFeature([], tf.string, default_value=b""),
}


def _text(s: str) -> bytes:
    # surrogateescape keeps non-UTF-8 file names (os.fsdecode'd) byte-exact in image/filename.
    return s.encode("utf-8", "surrogateescape")


def make_example(
    *,
    encoded: bytes,
    fmt: str,
    height: int,
    width: int,
    channels: int = 3,
    label: int,
    label_text: str,
    filename: str,
    source_sha256: str,
    variant: int,
    pipeline: str,
    pipeline_sha256: str,
    objects: RecordObjects | None = None,
    partners: tuple[str, ...] = (),
    mix: tuple[tuple[int, str, float], ...] = (),
    tile: dict | None = None,
) -> bytes:
    """Serialized tf.train.Example for one stored image; `objects` adds the detection keys (None: a
    classification record, byte for byte as before detection existed). A record made by a partner op names its
    `partners` (their image/source_id) and, for classification, its `mix`: each source's (label, text, share),
    the image first. `tile` (augd.schema.tile.Tile.record_keys): where a tile's pixels lie in its source image."""
    if fmt not in PAYLOAD_FORMATS:
        raise ValueError(f"fmt must be one of {PAYLOAD_FORMATS}; got {fmt!r}")
    if fmt == "raw" and len(encoded) != height * width * channels:
        raise ValueError(f"raw image of {len(encoded)} bytes is not {height}x{width}x{channels}")
    ex = tf.train.Example()
    f = ex.features.feature
    f["image/raw" if fmt == "raw" else "image/encoded"].bytes_list.value.append(encoded)
    for key, value in (
        ("image/format", fmt), ("image/colorspace", "RGB"), ("image/class/text", label_text),
        ("image/filename", filename), ("image/source_id", source_sha256),
        ("image/key/sha256", hashlib.sha256(encoded).hexdigest()), ("augd/pipeline", pipeline),
        ("augd/pipeline_sha256", pipeline_sha256),
    ):
        f[key].bytes_list.value.append(_text(value))
    for key, value in (
        ("image/height", height), ("image/width", width), ("image/channels", channels),
        ("image/class/label", label), ("augd/variant", variant),
    ):
        f[key].int64_list.value.append(int(value))
    if objects is not None:
        _add_objects(f, objects)
    if partners:
        f["augd/partners"].bytes_list.value.extend(_text(p) for p in partners)
    if mix:
        f["augd/mix/label"].int64_list.value.extend(int(m[0]) for m in mix)
        f["augd/mix/text"].bytes_list.value.extend(_text(m[1]) for m in mix)
        f["augd/mix/weight"].float_list.value.extend(float(m[2]) for m in mix)
    if tile is not None:
        for name, value in tile.items():
            key = f"augd/tile/{name}"
            assert key in TILE_KEYS, key
            if name == "scale":
                f[key].float_list.value.append(float(value))
            else:
                f[key].int64_list.value.append(int(value))
    # deterministic=True: map fields serialize in key order, so equal records give equal bytes everywhere.
    return ex.SerializeToString(deterministic=True)


def _add_objects(f, objects: RecordObjects) -> None:
    """The detection keys. Every object key is written even for an image with no object (a negative), as the
    Object Detection API's converters do: empty lists."""
    objects.check()
    for k, key in enumerate(("image/object/bbox/xmin", "image/object/bbox/ymin", "image/object/bbox/xmax",
                             "image/object/bbox/ymax")):
        f[key].float_list.SetInParent()
        f[key].float_list.value.extend(b[k] for b in objects.boxes)
    for key, values in (("image/object/class/label", objects.labels), ("image/object/difficult", objects.difficult),
                        ("image/object/truncated", objects.truncated)):
        f[key].int64_list.SetInParent()
        f[key].int64_list.value.extend(int(v) for v in values)
    f["image/object/class/text"].bytes_list.SetInParent()
    f["image/object/class/text"].bytes_list.value.extend(_text(t) for t in objects.texts)
    if objects.weights:
        f["image/object/weight"].float_list.value.extend(objects.weights)
    if objects.crowd:
        f["image/object/is_crowd"].int64_list.value.extend(objects.crowd)
    if objects.ignored:
        f["augd/object/ignored"].bytes_list.value.extend(_text(t) for t in objects.ignored)
    if objects.masks:
        f["image/object/mask"].bytes_list.value.extend(objects.masks)
    if objects.num_keypoints:
        points = [p for pts in objects.keypoints for p in pts]
        for key, values in (("image/object/keypoint/x", [p[0] for p in points]),
                            ("image/object/keypoint/y", [p[1] for p in points])):
            f[key].float_list.SetInParent()
            f[key].float_list.value.extend(values)
        for key, values in (("image/object/keypoint/visibility", [p[2] for p in points]),
                            ("image/object/keypoint/num", [sum(p[2] > 0 for p in pts) for pts in objects.keypoints])):
            f[key].int64_list.SetInParent()
            f[key].int64_list.value.extend(int(v) for v in values)
    if objects.oriented:
        for k, key in enumerate(OBB_KEYS):
            f[key].float_list.value.extend(c[k // 2][k % 2] for c in objects.oriented)
    if objects.polygons is not None:   # asked for: every record of the job holds the keys, empty or not
        rings = [ring for obj in objects.polygons for ring in obj]
        xs, ys, nv, nr = POLYGON_KEYS
        for key, values in ((xs, [p[0] for r in rings for p in r]), (ys, [p[1] for r in rings for p in r])):
            f[key].float_list.SetInParent()
            f[key].float_list.value.extend(values)
        for key, values in ((nv, [len(r) for r in rings]), (nr, [len(obj) for obj in objects.polygons])):
            f[key].int64_list.SetInParent()
            f[key].int64_list.value.extend(values)
    if objects.segmentation is not None:
        f["image/segmentation/class/encoded"].bytes_list.value.append(objects.segmentation)
        f["image/segmentation/class/format"].bytes_list.value.append(b"png")


def parse_example(serialized: bytes) -> dict:
    """Python values of one record: ints for int keys, bytes for image data, str for the rest."""
    ex = tf.train.Example.FromString(serialized)
    out: dict = {}
    for key, feat in ex.features.feature.items():
        kind = feat.WhichOneof("kind")
        out[key] = feature_value(key, list(getattr(feat, kind).value) if kind else [])
    return out
