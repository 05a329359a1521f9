"""The user's script: what a user would write instead of `augd run`, timed as a whole process by bench.whole.

    python -m bench.user_script DIR --chain seed|heavy --out FILE.tfrecord [--workers 2]

A process pool of Albumentations workers (bench.workloads.CHAINS: the same chains as the bench's pools), each
reading a file, decoding it with OpenCV, running the chain and encoding JPEG q90; the workers return the encoded
bytes and the parent writes one gfile-style tf.train.Example per image (image/encoded, format, height, width,
channels, class/label, class/text, filename) through one tf.io.TFRecordWriter, in input order.

Written the way a careful user would: Albumentations imported at the top, the pool forked before TensorFlow is
imported (so the workers neither import it nor inherit its threads, and start while the parent imports it),
OpenCV single-threaded in each worker (one process per core), results streamed with imap in chunks. It does
not hash, shard, fsync or write a manifest, as augd does. Prints one JSON line (images, records, bytes) on stdout.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys

import cv2
import numpy as np

from bench.common import default_workers  # light: loads neither augd nor OpenCV
from bench.workloads import CHAINS, JPEG_Q  # sets NO_ALBUMENTATIONS_UPDATE before the import below

import albumentations  # noqa: E402 - imported once here, before the fork, as a script's top would

EXTENSIONS = (".jpg", ".jpeg", ".png")
_state: dict = {}


def scan(root: str) -> tuple[list[tuple[str, int]], list[str]]:
    """(relative path, label) of every image, and the class names: one sub-folder per class, sorted; images
    directly in `root` get label 0 and class name ''."""
    classes = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
    items = [(f, 0) for f in sorted(os.listdir(root))
             if f.lower().endswith(EXTENSIONS) and os.path.isfile(os.path.join(root, f))]
    for label, c in enumerate(classes):
        items += [(os.path.join(c, f), label) for f in sorted(os.listdir(os.path.join(root, c)))
                  if f.lower().endswith(EXTENSIONS)]
    return items, classes or [""]


def _init(chain: str, seed: int, counter) -> None:
    with counter.get_lock():
        index = counter.value
        counter.value += 1
    cv2.setNumThreads(1)
    _state["transform"] = CHAINS[chain](seed * 1000 + index)


def augment(path: str) -> tuple[bytes, int, int]:
    """One image: read, decode, the chain, encode JPEG q90; (encoded bytes, height, width)."""
    with open(path, "rb") as fh:
        img = cv2.imdecode(np.frombuffer(fh.read(), np.uint8), cv2.IMREAD_COLOR)
    if img is None:
        raise ValueError(f"{path}: cv2.imdecode failed")
    out = _state["transform"](image=img)["image"]
    ok, buf = cv2.imencode(".jpg", out, JPEG_Q)
    if not ok:
        raise ValueError(f"{path}: cv2.imencode failed")
    return buf.tobytes(), out.shape[0], out.shape[1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.user_script", description=__doc__.splitlines()[0])
    ap.add_argument("input", help="image folder: class sub-folders, or images directly")
    ap.add_argument("--chain", choices=sorted(CHAINS), required=True)
    ap.add_argument("--out", required=True, help="the TFRecord file to write")
    ap.add_argument("--workers", type=int, default=default_workers())
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--start-method", default="fork" if "fork" in mp.get_all_start_methods() else "spawn",
                    choices=mp.get_all_start_methods())
    args = ap.parse_args(argv)
    items, classes = scan(args.input)
    if not items:
        ap.error(f"no image in {args.input}")
    ctx = mp.get_context(args.start_method)
    counter = ctx.Value("i", 0)
    chunk = max(1, min(16, len(items) // (args.workers * 8)))
    pool = ctx.Pool(args.workers, initializer=_init, initargs=(args.chain, args.seed, counter))
    try:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        import tensorflow as tf  # after the fork: the workers never hold TensorFlow

        def b(v):
            return tf.train.Feature(bytes_list=tf.train.BytesList(value=[v]))

        def i64(v):
            return tf.train.Feature(int64_list=tf.train.Int64List(value=[v]))

        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        records = out_bytes = 0
        paths = [os.path.join(args.input, rel) for rel, _ in items]
        with tf.io.TFRecordWriter(args.out) as writer:
            for (rel, label), (data, h, w) in zip(items, pool.imap(augment, paths, chunksize=chunk)):
                ex = tf.train.Example(features=tf.train.Features(feature={
                    "image/encoded": b(data), "image/format": b(b"jpeg"), "image/height": i64(h),
                    "image/width": i64(w), "image/channels": i64(3), "image/class/label": i64(label),
                    "image/class/text": b(classes[label].encode()), "image/filename": b(rel.encode()),
                }))
                writer.write(ex.SerializeToString())
                records += 1
                out_bytes += len(data)
        pool.close()
    except BaseException:
        pool.terminate()
        raise
    finally:
        pool.join()
    print(json.dumps({"images": len(items), "records": records, "image_bytes_out": out_bytes,
                      "file_bytes": os.path.getsize(args.out), "workers": args.workers, "chain": args.chain,
                      "start_method": args.start_method, "albumentations": albumentations.__version__}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
