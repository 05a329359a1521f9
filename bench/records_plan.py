"""The plan of a records job in process (read_records_job: frames, checksums, Examples, the images' offsets), with
protobuf's C parser (upb) and with augd.io.lite's own reader, alternated round by round; medians.

    python -m bench.records_plan RECORDS_DIR [--rounds 5]
    python -m bench.records_plan --voc bench/.data/n600-s0-voc [--rounds 5]

RECORDS_DIR: a folder of augd's shards, e.g. the bench's VOC set written as records of its originals
(`augd run bench/.data/n600-s0-voc -p P -o OUT` with P = `{name: originals, variants: 0, keep_original: true,
ops: []}`). --voc VOC_DIR: the records a user of the OD API brings instead, written first into a temporary folder
as create_pascal_tf_record.py writes them (its keys, its feature dict through TensorFlow's Python writer, whose
feature order is its own, not sorted). Figures only.
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import xml.etree.ElementTree as ET


def write_odapi_records(voc: str, dest: str) -> int:
    """The VOC folder's photos and boxes as create_pascal_tf_record.py's dict_to_tf_example writes them, one shard
    (dest/pascal_train.record); the records written."""
    import hashlib

    import tensorflow as tf
    b = lambda v: tf.train.Feature(bytes_list=tf.train.BytesList(value=v))  # noqa: E731
    f = lambda v: tf.train.Feature(float_list=tf.train.FloatList(value=v))  # noqa: E731
    i = lambda v: tf.train.Feature(int64_list=tf.train.Int64List(value=v))  # noqa: E731
    names = sorted(os.listdir(os.path.join(voc, "Annotations")))
    classes: dict[str, int] = {}
    with tf.io.TFRecordWriter(os.path.join(dest, "pascal_train.record")) as w:
        for name in names:
            root = ET.parse(os.path.join(voc, "Annotations", name)).getroot()
            with open(os.path.join(voc, "JPEGImages", root.findtext("filename")), "rb") as fh:
                data = fh.read()
            width, height = int(root.findtext("size/width")), int(root.findtext("size/height"))
            objs = root.findall("object")
            box = lambda k, side: [float(o.findtext(f"bndbox/{k}")) / side for o in objs]  # noqa: E731
            text = [o.findtext("name") for o in objs]
            w.write(tf.train.Example(features=tf.train.Features(feature={
                "image/height": i([height]), "image/width": i([width]),
                "image/filename": b([root.findtext("filename").encode()]),
                "image/source_id": b([root.findtext("filename").encode()]),
                "image/key/sha256": b([hashlib.sha256(data).hexdigest().encode()]),
                "image/encoded": b([data]), "image/format": b([b"jpeg"]),
                "image/object/bbox/xmin": f(box("xmin", width)), "image/object/bbox/xmax": f(box("xmax", width)),
                "image/object/bbox/ymin": f(box("ymin", height)), "image/object/bbox/ymax": f(box("ymax", height)),
                "image/object/class/text": b([t.encode() for t in text]),
                "image/object/class/label": i([classes.setdefault(t, len(classes) + 1) for t in text]),
                "image/object/difficult": i([int(o.findtext("difficult")) for o in objs]),
                "image/object/truncated": i([int(o.findtext("truncated")) for o in objs]),
                "image/object/view": b([o.findtext("pose").encode() for o in objs]),
            })).SerializeToString())
    return len(names)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", nargs="?")
    ap.add_argument("--voc", help="a VOC folder: time the OD API's records of it (written first)")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    if (args.root is None) == (args.voc is None):
        ap.error("give RECORDS_DIR or --voc VOC_DIR")
    with tempfile.TemporaryDirectory() as tmp:
        root = args.root
        if args.voc:
            root = tmp
            print(f"{write_odapi_records(args.voc, tmp)} OD API records written (TensorFlow's Python writer)")
        return _time(root, args.rounds)


def _time(root: str, rounds: int) -> int:
    from augd.annotations.tfrecords import read_records_job
    from augd.io import upb as fast
    upb = fast.example_class
    times: dict[str, list[float]] = {"reader": [], "upb": []}
    taken = 0
    for _ in range(rounds):
        for mode in times:
            fast.example_class = upb if mode == "upb" else (lambda: None)
            t = time.perf_counter()
            job = read_records_job(root, max_pixels=1 << 28)
            times[mode].append(time.perf_counter() - t)
    fast.example_class = upb
    from augd.io.lite import frames
    for shard in sorted(os.listdir(root)):   # how many of the records upb's answer is taken for
        if not os.path.isfile(os.path.join(root, shard)):
            continue
        for fr in frames(os.path.join(root, shard)):
            taken += fr.data is not None and fast.parsed(fr.data) is not None
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"{len(job.scan.images)} records: the reader's own {med['reader']:.3f} s, upb {med['upb']:.3f} s "
          f"({med['reader'] / med['upb']:.2f}x); upb's answer taken for {taken} of them")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
