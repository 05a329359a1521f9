"""Reading TFRecord files and tf.train.Examples without TensorFlow, for the verbs that must answer at once
(`augd inspect`): TensorFlow takes seconds to import and prints start-up noise. Local files only; the record
framing (length, crc, data, crc) and the Example's protobuf wire format are both small and fixed.
"""
from __future__ import annotations

import gzip
import os
import struct
from typing import Iterator

__all__ = ["KEYPOINT_KEYS", "MIX_KEYS", "OBJECT_KEYS", "SEGMENTATION_KEYS", "TEXT_KEYS", "decode_example",
           "feature_value", "iter_records"]

#: Keys whose bytes are text (as augd.io.records.parse_example returns them).
TEXT_KEYS = ("image/format", "image/colorspace", "image/class/text", "image/filename", "image/source_id",
             "image/key/sha256", "augd/pipeline", "augd/pipeline_sha256")

#: The Object Detection API's keypoint keys (keypoint jobs only): K points per object in the job's order, x and y
#: normalized (0 for a point not visible), COCO's visibility 0/1/2, and each object's count of labelled points.
KEYPOINT_KEYS = ("image/object/keypoint/x", "image/object/keypoint/y", "image/object/keypoint/visibility",
                 "image/object/keypoint/num")

#: The Object Detection API's per-object keys (detection records): always read back as lists, one value per
#: object, class texts as str.
OBJECT_KEYS = ("image/object/bbox/xmin", "image/object/bbox/ymin", "image/object/bbox/xmax",
               "image/object/bbox/ymax", "image/object/class/label", "image/object/class/text",
               "image/object/difficult", "image/object/truncated", "image/object/mask", "image/object/weight",
               *KEYPOINT_KEYS)

#: A mixed record's keys (partner ops: mosaic, mixup, cutmix), always read back as lists: its partners'
#: image/source_id, and for classification each source's label, class text and share (the image first).
MIX_KEYS = ("augd/partners", "augd/mix/label", "augd/mix/text", "augd/mix/weight")

#: DeepLab's semantic mask keys: the PNG and its format ("png").
SEGMENTATION_KEYS = ("image/segmentation/class/encoded", "image/segmentation/class/format")


#: Largest record read from a compressed file, whose size says nothing: a corrupt length must not allocate GBs.
MAX_GZIP_RECORD = 1 << 30


def iter_records(path: str) -> Iterator[bytes]:
    """The records of one TFRecord file (GZIP when it ends in .gz). Raises ValueError on a truncated or corrupt
    file (a length past the file's end is refused before anything is read)."""
    gz = path.endswith(".gz")
    with (gzip.open if gz else open)(path, "rb") as fh:
        left = MAX_GZIP_RECORD if gz else None
        size = None if gz else os.fstat(fh.fileno()).st_size
        while True:
            head = fh.read(12)  # uint64 length, uint32 masked crc of the length
            if not head:
                return
            if len(head) < 12:
                raise ValueError(f"{path}: truncated record header")
            (length,) = struct.unpack("<Q", head[:8])
            room = left if gz else size - fh.tell() - 4
            if length > room:
                raise ValueError(f"{path}: corrupt record: its length {length} runs past the file")
            data = fh.read(length)
            if len(data) < length or len(fh.read(4)) < 4:  # the data, then its masked crc
                raise ValueError(f"{path}: truncated record ({len(data)} of {length} bytes)")
            yield data


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def _fields(buf: bytes) -> Iterator[tuple[int, int, object]]:
    """(field number, wire type, value) of one protobuf message: ints for varints, bytes for the rest."""
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 2:
            n, pos = _varint(buf, pos)
            if pos + n > end:
                raise ValueError("a field runs past the end of its message")
            value, pos = buf[pos:pos + n], pos + n
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        yield number, wire, value


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def _feature(buf: bytes) -> list:
    """A Feature's values: BytesList (1), FloatList (2) or Int64List (3), packed or not."""
    for kind, _, body in _fields(buf):
        values: list = []
        for _, wire, v in _fields(body):
            if kind == 1:
                values.append(bytes(v))
            elif kind == 2:
                values += list(struct.unpack(f"<{len(v) // 4}f", v)) if wire == 2 else [struct.unpack("<f", v)[0]]
            elif kind == 3 and wire == 2:
                pos = 0
                while pos < len(v):
                    x, pos = _varint(v, pos)
                    values.append(_signed(x))
            elif kind == 3:
                values.append(_signed(v))
        return values
    return []


def decode_example(serialized: bytes) -> dict:
    """The same dict as augd.io.records.parse_example, without TensorFlow. ValueError for a malformed one."""
    try:
        return _decode_example(serialized)
    except (IndexError, struct.error, UnicodeDecodeError) as exc:
        raise ValueError(f"malformed tf.train.Example ({exc})") from None


def _decode_example(serialized: bytes) -> dict:
    out: dict = {}
    for number, _, features in _fields(serialized):
        if number != 1:
            continue
        for _, _, entry in _fields(features):  # map<string, Feature> entries: key = 1, value = 2
            key, values = "", []
            for n, _, v in _fields(entry):
                if n == 1:
                    key = bytes(v).decode("utf-8", "surrogateescape")
                elif n == 2:
                    values = _feature(v)
            out[key] = feature_value(key, values)
    return out


def feature_value(key: str, values: list):
    """A feature's Python value, the same from both readers: one value bare, several as a list, text keys as str;
    the per-object keys always as a list."""
    if key in OBJECT_KEYS or key in MIX_KEYS:
        if key in ("image/object/class/text", "augd/partners", "augd/mix/text"):
            return [v.decode("utf-8", "surrogateescape") for v in values]
        return list(values)
    value = values[0] if len(values) == 1 else values
    if (key in TEXT_KEYS or key == SEGMENTATION_KEYS[1]) and isinstance(value, bytes):
        value = value.decode("utf-8", "surrogateescape")
    return value
