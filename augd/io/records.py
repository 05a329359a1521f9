"""The record schema: one tf.train.Example per stored image (docs/records.md).

gfile style, as TF-slim's and inception's converters write it, so their readers (and the seed reader, which
parses only image/encoded, height, width and class/label and calls tf.image.decode_jpeg) work unchanged.
decode_jpeg also decodes PNG, so PNG records satisfy that reader too. Raw records carry `image/raw`
(HxWxC uint8, row-major) instead of `image/encoded`.
"""
from __future__ import annotations

import hashlib

import tensorflow as tf

from augd.io.lite import TEXT_KEYS as _TEXT_KEYS, feature_value  # one schema for both readers

__all__ = ["FEATURES", "PAYLOAD_FORMATS", "INT_KEYS", "make_example", "parse_example"]

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
) -> bytes:
    """Serialized tf.train.Example for one stored image."""
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
    # deterministic=True: map fields serialize in key order, so equal records give equal bytes everywhere.
    return ex.SerializeToString(deterministic=True)


def parse_example(serialized: bytes) -> dict:
    """Python values of one record: ints for int keys, bytes for image data, str for the rest."""
    ex = tf.train.Example.FromString(serialized)
    out: dict = {}
    for key, feat in ex.features.feature.items():
        kind = feat.WhichOneof("kind")
        out[key] = feature_value(key, list(getattr(feat, kind).value) if kind else [])
    return out
