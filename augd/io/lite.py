"""Reading TFRecord files and tf.train.Examples without TensorFlow, for the verbs that must answer at once
(`augd inspect`): TensorFlow takes seconds to import and prints start-up noise. Local files only; the record
framing (length, crc, data, crc) and the Example's protobuf wire format are both small and fixed.
"""
from __future__ import annotations

import gzip
import os
import struct
import zlib
from dataclasses import dataclass
from typing import Callable, Iterator

import google_crc32c
from augd.io import upb, wire as protowire   # "wire" names wire types below
from augd.io.wire import Budget as _Budget, fields as _fields, length_delimited as _len, signed as _signed, \
    varint as _varint

__all__ = ["KEYPOINT_KEYS", "MIX_KEYS", "OBB_KEYS", "OBJECT_KEYS", "POLYGON_KEYS", "SEGMENTATION_KEYS", "TEXT_KEYS",
           "TILE_KEYS", "Frame", "decode_example", "feature_value", "frames", "iter_records", "masked_crc",
           "sniff_shard", "value_offsets"]

#: Keys whose bytes are text (as augd.io.records.parse_example returns them).
TEXT_KEYS = ("image/format", "image/colorspace", "image/class/text", "image/filename", "image/source_id",
             "image/key/sha256", "augd/pipeline", "augd/pipeline_sha256")

#: The Object Detection API's keypoint keys (keypoint jobs only): K points per object in the job's order, x and y
#: normalized (0 for a point not visible), COCO's visibility 0/1/2, and each object's count of labelled points.
KEYPOINT_KEYS = ("image/object/keypoint/x", "image/object/keypoint/y", "image/object/keypoint/visibility",
                 "image/object/keypoint/num")

#: The per-object keys of an ignored object's record (docs/records.md: it shows, under the occlusion rule): weight
#: 0 in the OD API's image/object/weight (ignored in its loss), is_crowd 1 (COCO's and Model Garden's "ignore in
#: evaluation"), and augd's own key saying why ("" for a kept object).
IGNORE_KEYS = ("image/object/weight", "image/object/is_crowd", "augd/object/ignored")

#: Oriented boxes (records with an oriented object: docs/records.md): each object's 4 corners, x1 y1 to x4 y4 as
#: DOTA names them, normalized to the stored image, clockwise as shown from the top-most (augd.annotations.oriented).
OBB_KEYS = tuple(f"image/object/obb/{a}{k}" for k in range(1, 5) for a in "xy")

#: Polygons (jobs with annotations.polygon_keys: docs/records.md#polygons): every vertex of every ring of every
#: object, x and y normalized to the stored image, each ring's vertex count and each object's ring count (0: none).
POLYGON_KEYS = ("image/object/polygon/x", "image/object/polygon/y", "image/object/polygon/num_vertices",
                "image/object/polygon/num_rings")

#: The Object Detection API's per-object keys (detection records), and augd's: always read back as lists (one
#: value per object, or per keypoint, ring or vertex), class texts and ignore reasons as str.
OBJECT_KEYS = ("image/object/bbox/xmin", "image/object/bbox/ymin", "image/object/bbox/xmax",
               "image/object/bbox/ymax", "image/object/class/label", "image/object/class/text",
               "image/object/difficult", "image/object/truncated", "image/object/mask", *IGNORE_KEYS,
               *KEYPOINT_KEYS, *OBB_KEYS, *POLYGON_KEYS)

#: A mixed record's keys (partner ops: mosaic, mixup, cutmix), always read back as lists: its partners'
#: image/source_id, and for classification each source's label, class text and share (the image first).
MIX_KEYS = ("augd/partners", "augd/mix/label", "augd/mix/text", "augd/mix/weight")

#: A tile's keys (pipelines with `tile:`, docs/pipelines.md#tile): its index (row-major; -1: the whole image), its
#: top-left in the upright source image, record pixels per source pixel, and the source's upright size.
TILE_KEYS = ("augd/tile/index", "augd/tile/x", "augd/tile/y", "augd/tile/scale", "augd/tile/source_height",
             "augd/tile/source_width")

#: DeepLab's semantic mask keys: the PNG and its format ("png").
SEGMENTATION_KEYS = ("image/segmentation/class/encoded", "image/segmentation/class/format")


#: How many times its size a compressed shard may inflate to (records of encoded images barely compress).
INFLATE_RATIO = 100
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


def masked_crc(data: bytes) -> bytes:
    """TFRecord's masked CRC-32C of `data`, as the 4 bytes the framing stores."""
    crc = google_crc32c.value(data)
    return struct.pack("<I", (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF)


def _framed(head: bytes) -> bool:
    return len(head) >= 12 and masked_crc(head[:8]) == head[8:12]


def sniff_shard(path: str) -> str | None:
    """How the file at `path` is a TFRecord file, by its contents: "none" (plain), "gzip" or "zlib" (TensorFlow's
    two compressions) when its first record's length frames with its checksum, which no image, text or other
    file does by chance (1 in 2**32); None otherwise, and for an empty file."""
    with open(path, "rb") as fh:
        head = fh.read(12)
        if _framed(head):
            return "none"
        zlib_header = len(head) > 1 and head[0] & 0x0F == 8 and (head[0] << 8 | head[1]) % 31 == 0
        if head[:2] != b"\x1f\x8b" and not zlib_header:
            return None   # neither a GZIP nor a ZLIB header: nothing more is read
        head += fh.read(64 * 1024)   # a compressed stream's first block may hold its Huffman tables first
    for kind, wbits in (("gzip", 16 + zlib.MAX_WBITS), ("zlib", zlib.MAX_WBITS)):
        try:
            if _framed(zlib.decompressobj(wbits).decompress(head, 12)):
                return kind
        except zlib.error:
            pass
    return None


def inflate(path: str, compression: str, dest: str, cap: int | None = None, why: str = "",
            beat: Callable[[], None] | None = None) -> str:
    """Inflate a GZIP or ZLIB TFRecord file into `dest` (plain: its records can then be read in place, by offset),
    at most `cap` bytes (default max(1 GiB, INFLATE_RATIO x its size); `why` says where a cap comes from), 1 MiB
    at a time whatever the stream's ratio, calling `beat` after each (it may raise to stop). Returns "" or what
    went wrong: a truncated or corrupt stream, a full disk or the cap keep what inflated before (frames then
    reports the tail that is lost), within 64 KiB of input of where it broke."""
    wbits = 16 + zlib.MAX_WBITS if compression == "gzip" else zlib.MAX_WBITS
    d = zlib.decompressobj(wbits)
    with open(path, "rb") as src, open(dest, "wb") as out:
        if cap is None:
            cap = max(1 << 30, INFLATE_RATIO * os.fstat(src.fileno()).st_size)
            why = why or f"{INFLATE_RATIO}x its size, at least 1 GiB"
        written = 0
        try:
            while chunk := src.read(1 << 16):
                while chunk:
                    got = d.decompress(chunk, 1 << 20)   # a bomb's 64 KiB is 64 MiB inflated: a slice at a time
                    chunk = d.unconsumed_tail
                    if d.eof:   # concatenated GZIP members: one after another
                        chunk = d.unused_data
                        if chunk:
                            d = zlib.decompressobj(wbits)
                    written += len(got)
                    if written > cap:
                        return f"it inflates past {cap} bytes ({why}): what inflated before is read"
                    out.write(got)
                    if beat is not None:
                        beat()
            out.write(d.flush())
        except zlib.error as exc:
            return f"the {compression} stream is corrupt ({exc}); what inflated before it is read"
        except OSError as exc:
            return f"cannot inflate it into {os.path.dirname(dest)} ({exc.strerror or exc}); what inflated is read"
    return "" if d.eof else f"the {compression} stream ends early (the file is truncated); what inflated is read"


@dataclass(frozen=True)
class Frame:
    """One record of a plain TFRecord file, as `frames` reads it."""
    index: int            # its place in the file, from 0
    offset: int           # where its data starts in the file
    data: bytes | None    # None: it cannot be read (`error` says why)
    error: str = ""
    lost: bool = False    # the framing broke here: nothing after it can be read (a truncated or corrupt tail)


def frames(path: str, max_bytes: int | None = None, limit: str = "the reader's limit") -> Iterator[Frame]:
    """Every record of the plain TFRecord file at `path`, each checked against both its checksums. A record whose
    data fails its checksum is reported and skipped (its length is trusted: its own checksum held), and so is one
    longer than `max_bytes`, before any of it is read (`limit` says where that bound comes from); a length that
    fails its checksum, or a file ending inside a record, ends the file with a Frame that is `lost`."""
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        pos = index = 0
        while pos < size:
            head = fh.read(12)
            left = size - pos
            if len(head) < 12:
                yield Frame(index, pos, None, f"the file ends inside its header ({left} bytes left): the shard is "
                                              f"truncated", True)
                return
            if not _framed(head):
                yield Frame(index, pos, None, f"its length fails its checksum at byte {pos}: the framing is broken "
                                              f"and the rest of the shard ({left} bytes) cannot be read", True)
                return
            (length,) = struct.unpack("<Q", head[:8])
            if length + 16 > left:
                yield Frame(index, pos + 12, None, f"the file ends inside it (it needs {length + 16} bytes, {left} are "
                                                   f"left): the shard is truncated", True)
                return
            if max_bytes is not None and length > max_bytes:
                yield Frame(index, pos + 12, None, f"it holds {length} bytes, more than a record may ({max_bytes} "
                                                   f"bytes: {limit}); it is "
                                                   f"not read")
                fh.seek(pos + 16 + length)
            else:
                data = fh.read(length)
                ok = fh.read(4) == masked_crc(data)
                yield Frame(index, pos + 12, data if ok else None, "" if ok else "its data fails its checksum: the "
                                                                                "record is corrupt")
            pos, index = pos + 16 + length, index + 1


def value_offsets(serialized: bytes, keys) -> dict[str, list[tuple[int, int]]]:
    """{key: [(offset, length) in `serialized`, a tf.train.Example, of each value of its bytes feature]} for
    `keys` (a key absent: not in the dict): where image/encoded's bytes lie in a record, so a worker reads them in
    place."""
    message = upb.parsed(serialized)
    upb.forget(serialized)   # its last use: the slot no longer holds a record that may be large
    if message is not None:
        # counted as the reader below counts at least (3 fields an entry, a wanted one's list and values more)
        out, features = {}, message.features.feature
        left = protowire.MAX_RECORD_FIELDS - 1 - 3 * len(features)
        for key in keys:
            if key in features:
                kind = features[key].WhichOneof("kind")
                values = features[key].bytes_list.value if kind == "bytes_list" else []
                left -= 2 + len(values)
                if left < 0:
                    break
                out[key] = [(_find(serialized, v), len(v)) for v in values]
        else:
            if left >= 0:
                return out
    want = {k.encode("utf-8"): k for k in keys}
    buf, out, budget = memoryview(serialized), {}, _Budget()
    for number, wire, features, at in _fields(buf, 0, len(buf), budget):
        if number != 1:
            continue
        for _, e_wire, entry, e_at in _fields(buf, at, at + len(_len(wire, features)), budget):
            got, value_at, value = None, 0, b""
            for n, v_wire, v, v_at in _fields(buf, e_at, e_at + len(_len(e_wire, entry)), budget):
                if n == 1:
                    got = bytes(_len(v_wire, v))
                elif n == 2:
                    value, value_at = _len(v_wire, v), v_at
            if got in want:
                spans = out.setdefault(want[got], [])
                for kind, k_wire, body, b_at in _fields(buf, value_at, value_at + len(value), budget):
                    if kind == 1:
                        spans += [(v_at, len(_len(w, v))) for _, w, v, v_at in
                                  _fields(buf, b_at, b_at + len(_len(k_wire, body)), budget)]
    return out


def _find(serialized: bytes, value: bytes) -> int:
    """Where `value`, a bytes value of the record, lies in it: a record written back byte for byte holds each value
    verbatim, and any copy of its bytes is it. Found by its first 64 bytes (a search for a whole 100 KB image takes
    ~50 us), checked whole."""
    at = serialized.find(value[:64])
    return at if serialized[at:at + len(value)] == value else serialized.find(value)


def _values(feature) -> list:
    kind = feature.WhichOneof("kind")
    return list(getattr(feature, kind).value) if kind else []


def _feature(buf: bytes, budget: _Budget) -> list:
    """A Feature's values: BytesList (1), FloatList (2) or Int64List (3), packed or not."""
    for kind, wire, body, _ in _fields(buf, budget=budget):
        values: list = []
        for _, wire, v, _ in _fields(_len(wire, body), budget=budget):
            if kind == 1:
                values.append(bytes(_len(wire, v)))
            elif kind == 2 and wire in (2, 5):
                values += list(struct.unpack(f"<{len(v) // 4}f", v)) if wire == 2 else [struct.unpack("<f", v)[0]]
            elif kind == 3 and wire == 2:
                pos = 0
                while pos < len(v):
                    budget.take()
                    x, pos = _varint(v, pos)
                    values.append(_signed(x))
            elif kind == 3 and wire == 0:
                values.append(_signed(v))
            else:
                raise ValueError(f"a value of wire type {wire} in a feature list of kind {kind}")
        return values
    return []


def decode_example(serialized: bytes) -> dict:
    """The same dict as augd.io.records.parse_example, without TensorFlow. ValueError for a malformed one."""
    try:
        return _decode_example(serialized)
    except (IndexError, struct.error, UnicodeDecodeError, ValueError, TypeError, AttributeError) as exc:
        raise ValueError(f"malformed tf.train.Example ({exc})") from None


def _decode_example(serialized: bytes) -> dict:
    message = upb.parsed(serialized)
    if message is not None:
        # counted as the reader counts, or more (the message 1; an entry, its key, its value and its kind 4; each
        # bytes value, a packed int list and each int, a packed float list): a record near the bound goes to the
        # reader, which says whether it is over
        out, left = {}, protowire.MAX_RECORD_FIELDS - 1
        for key, feature in message.features.feature.items():
            values = _values(feature)
            kind = feature.WhichOneof("kind")
            left -= 4 + (len(values) if kind == "bytes_list" else 1 + len(values) if kind == "int64_list" else 1)
            if left < 0:
                break
            out[key] = feature_value(key, values)
        else:
            return out
    out: dict = {}
    budget = _Budget()
    for number, wire, features, _ in _fields(serialized, budget=budget):
        if number != 1:
            continue
        # map<string, Feature> entries: key 1, value 2
        for _, e_wire, entry, _ in _fields(_len(wire, features), budget=budget):
            key, values = "", []
            for n, v_wire, v, _ in _fields(_len(e_wire, entry), budget=budget):
                if n == 1:
                    key = bytes(_len(v_wire, v)).decode("utf-8", "surrogateescape")
                elif n == 2:
                    values = _feature(_len(v_wire, v), budget)
            out[key] = feature_value(key, values)
    return out


def feature_value(key: str, values: list):
    """A feature's Python value, the same from both readers: one value bare, several as a list, text keys as str;
    the per-object keys always as a list."""
    if key in OBJECT_KEYS or key in MIX_KEYS:
        if key in ("image/object/class/text", "augd/object/ignored", "augd/partners", "augd/mix/text"):
            if not all(isinstance(v, bytes) for v in values):   # a FloatList where text goes
                raise ValueError(f"{key} holds numbers, where it holds text (a bytes list)")
            return [v.decode("utf-8", "surrogateescape") for v in values]
        return list(values)
    value = values[0] if len(values) == 1 else values
    if (key in TEXT_KEYS or key == SEGMENTATION_KEYS[1]) and isinstance(value, bytes):
        value = value.decode("utf-8", "surrogateescape")
    return value
