"""tf.train.Examples and TFRecord frames written by hand, byte for byte, for the hostile-input tests and the
bench (bench/hostile.py): TensorFlow's writer cannot write an 11-byte varint, a length that lies or a class text
that is no UTF-8, and importing it takes seconds. A leaf: imports augd.io.lite only.

    rec = example({"image/encoded": b_list(png), "image/object/class/label": i_list(1)})
    Path("x.tfrecord").write_bytes(frame(rec) + frame(rec))
"""
from __future__ import annotations

import struct

import cv2
import numpy as np

from augd.io.lite import masked_crc

__all__ = ["LABEL_MAP", "b_list", "classification_job", "det_record", "drop_mixed_inbox", "drop_ready",
           "drop_slow_scan", "example", "f_list", "frame", "i_list", "i_raw", "ld", "many_objects_job", "png",
           "records_job", "sparse_record", "varint", "zeros_gz"]


def varint(n: int) -> bytes:
    """Any non-negative int as a varint of as many bytes as it takes (2**70: 11 bytes, which protobuf refuses)."""
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


def ld(field: int, payload: bytes) -> bytes:
    """A length-delimited field."""
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def b_list(*values: bytes) -> bytes:
    """A Feature holding a BytesList."""
    return ld(1, b"".join(ld(1, v) for v in values))


def f_list(*values: float) -> bytes:
    """A Feature holding a packed FloatList."""
    return ld(2, ld(1, struct.pack(f"<{len(values)}f", *values)))


def i_list(*values: int) -> bytes:
    """A Feature holding a packed Int64List (negative values as two's complement, as protobuf writes them)."""
    return i_raw(b"".join(varint(v & (2**64 - 1)) for v in values))


def i_raw(varints: bytes) -> bytes:
    """A Feature holding a packed Int64List of these bytes as they are (a varint of any length)."""
    return ld(3, ld(1, varints))


def example(features: dict[str, bytes]) -> bytes:
    """A tf.train.Example of these Features (each the bytes of one, as the *_list helpers make them)."""
    return ld(1, b"".join(ld(1, ld(1, k.encode()) + ld(2, f)) for k, f in features.items()))


def frame(data: bytes) -> bytes:
    """One TFRecord record: length, its masked crc, the data, its masked crc."""
    head = struct.pack("<Q", len(data))
    return head + masked_crc(head) + data + masked_crc(data)


def png(seed: int, h: int = 24, w: int = 32) -> bytes:
    rgb = np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)
    ok, buf = cv2.imencode(".png", rgb)
    assert ok
    return buf.tobytes()


def det_record(i: int, *, text: bytes | None = b"red", label: bytes | None = None, **more: bytes) -> bytes:
    """A small Object Detection API record: a 32x24 PNG and one box; its class by `text` (a BytesList value) and
    `label` (an Int64List Feature, i_list(1)); `more`: features added or replacing these (key with / as __)."""
    feats = {"image/encoded": b_list(png(i)), "image/format": b_list(b"png"),
             "image/source_id": b_list(f"s{i:05d}".encode()),
             "image/object/bbox/xmin": f_list(0.1), "image/object/bbox/ymin": f_list(0.2),
             "image/object/bbox/xmax": f_list(0.6), "image/object/bbox/ymax": f_list(0.7)}
    if text is not None:
        feats["image/object/class/text"] = b_list(text)
    if label is not None:
        feats["image/object/class/label"] = label
    feats.update({k.replace("__", "/"): v for k, v in more.items()})
    return example(feats)


# ---- whole jobs: good records with hostile ones among them ------------------------------------------------------

#: A label map naming the good records' class.
LABEL_MAP = "item {\n  id: 1\n  name: 'red'\n}\n"


def records_job(root, bad=(), *, good: int = 6, label_map: str | None = None, name: str = "data.tfrecord"):
    """A records job at `root`: `good` small detection records (det_record 0..good-1, class red), then `bad`,
    in one plain shard; `label_map` beside it when given."""
    from pathlib import Path
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    (root / name).write_bytes(b"".join(frame(r) for r in [det_record(i) for i in range(good)] + list(bad)))
    if label_map is not None:
        (root / "label_map.pbtxt").write_text(label_map)
    return root


def classification_job(root, labels_txt: bytes | None = None, *, good: int = 6, more=()):
    """TF-slim's classification records (image/class/label 0 or 1, image/class/text as `more` adds), labels.txt
    beside them when given."""
    from pathlib import Path
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    recs = [example({"image/encoded": b_list(png(i)), "image/class/label": i_list(i % 2)}) for i in range(good)]
    (root / "data.tfrecord").write_bytes(b"".join(frame(r) for r in recs + list(more)))
    if labels_txt is not None:
        (root / "labels.txt").write_bytes(labels_txt)
    return root


def zeros_gz(path, claimed: int, inflated: int) -> None:
    """A GZIP shard whose one record claims `claimed` bytes, followed by `inflated` zero bytes and, when they are
    the whole record, its data's checksum (then a whole, sound record of zeros)."""
    import zlib

    import google_crc32c
    head = struct.pack("<Q", claimed)
    c = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    crc, chunk, left = 0, bytes(1 << 24), inflated
    with open(path, "wb") as fh:
        fh.write(c.compress(head + masked_crc(head)))
        while left > 0:
            piece = chunk[:min(left, len(chunk))]
            crc = google_crc32c.extend(crc, piece)
            fh.write(c.compress(piece))
            left -= len(piece)
        if inflated == claimed:
            fh.write(c.compress(struct.pack("<I", (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF)))
        fh.write(c.flush())


def sparse_record(path, claimed: int) -> None:
    """A plain shard of one record claiming `claimed` bytes (its length's checksum right), a hole on disk."""
    head = struct.pack("<Q", claimed)
    with open(path, "wb") as fh:
        fh.write(head + masked_crc(head))
        fh.truncate(12 + claimed + 4)


def many_objects_job(root, records: int, objects: int):
    """A records job that takes its scan a while: `records` records of a 1x1 PNG and `objects` boxes each."""
    from pathlib import Path
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    img = png(0, 1, 1)
    boxes = {k: f_list(*[v] * objects) for k, v in (("image/object/bbox/xmin", 0.0), ("image/object/bbox/ymin", 0.0),
                                                     ("image/object/bbox/xmax", 1.0), ("image/object/bbox/ymax", 1.0))}
    texts = b_list(*[b"red"] * objects)
    with open(root / "many.tfrecord", "wb") as fh:
        for i in range(records):
            fh.write(frame(example({"image/encoded": b_list(img), "image/source_id": b_list(b"m%d" % i), **boxes,
                                    "image/object/class/text": texts})))
    return root


def drop_ready(inbox, rel: str, build) -> None:
    """Build a job beside the inbox (`build(path)`), mark it ready (_READY), rename it in: an atomic drop."""
    import os
    from pathlib import Path
    inbox = Path(inbox)
    tmp = inbox.parent / f".staging-{rel.replace('/', '-')}"
    build(tmp)
    (tmp / "_READY").write_text("")
    (inbox / rel).parent.mkdir(parents=True, exist_ok=True)
    os.rename(tmp, inbox / rel)


def drop_slow_scan(inbox) -> None:
    """The mixed inbox's h-slowscan: 80,000 records to read and check, longer than a job_timeout_seconds of 5."""
    drop_ready(inbox, "h-slowscan", lambda p: many_objects_job(p, 80_000, 2))


def drop_mixed_inbox(inbox, slow_scan: bool = True) -> dict[str, int]:
    """Issue 56's mixed inbox, dropped at once: hostile records jobs, hostile side files, a record claiming 1 GiB,
    a GZIP bomb, a scan of 80,000 records (longer than a job_timeout_seconds of 5; left out with slow_scan=False)
    and two good folder jobs. Returns {job: the good records it holds} for the jobs that hold any (the rest fail as
    a whole)."""
    from tests.daemon_harness import drop_job
    kp = {"image__object__keypoint__x": f_list(0.3), "image__object__keypoint__y": f_list(0.4)}
    bad = [det_record(90, text=b"blue", label=i_raw(varint(2**70))), det_record(91, text=b"d\xffg"),
           det_record(92, **kp, image__object__keypoint__visibility=i_list(99)), b"\xff" * 320_000]
    drop_ready(inbox, "h-records", lambda p: records_job(p, bad))
    drop_ready(inbox, "h-labelmap", lambda p: records_job(
        p, label_map="item {\n  id: 99999999999999999999999\n  name: 'red'\n}\n"))
    drop_ready(inbox, "h-labelstxt", lambda p: classification_job(p, b"0:d\xffg\n1:cat\n"))
    drop_ready(inbox, "h-sparse", lambda p: (records_job(p, label_map=LABEL_MAP),
                                             sparse_record(p / "big.tfrecord", 1 << 30)))
    drop_ready(inbox, "h-gzip", lambda p: (records_job(p), zeros_gz(p / "z.tfrecord.gz", 3 << 30, 200 << 20)))
    if slow_scan:
        drop_slow_scan(inbox)
    drop_job(inbox, "good-a", n=3, seed=1)
    drop_job(inbox, "good-b", n=3, seed=2)
    return {"h-records": 6, "h-labelmap": 6, "h-labelstxt": 6, "h-sparse": 6, "h-gzip": 6, "good-a": 3,
            "good-b": 3}
