"""The detection user's script: what they would write instead of an augd mosaic job, timed as a whole process by
bench.mixing.

    python -m bench.user_mosaic VOC_DIR --out FILE.tfrecord [--size 640] [--workers 2] [--floor]

Albumentations 2.0's `Mosaic` (target_size and cell_shape `--size`, fit_mode cover: each cell a piece of its
image, the grid cropped around a centre in (0.3, 0.7)) then `HorizontalFlip`, in a process pool: each worker reads
its image and 3 partners drawn at random from the whole set, decodes each whole with OpenCV (Albumentations
takes decoded arrays), runs the transform with the boxes (pascal_voc) and encodes JPEG q90. The parent reads the
VOC XMLs up front and writes one Object Detection API Example per image (image and object keys) through one
tf.io.TFRecordWriter, in input order. Written the way bench.user_script is (pool forked before TensorFlow is
imported, OpenCV single-threaded per worker, imap in chunks). Prints one JSON line (images, records, boxes).

--floor: the mosaic's codec floor instead: the same reads and 4 whole decodes, then the top-left size x size of
the image encoded (no transform, no boxes): what any mosaic that decodes its partners whole costs at least.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import sys
import xml.etree.ElementTree as ET

import cv2
import numpy as np

from bench.common import default_workers
from bench.workloads import JPEG_Q  # sets NO_ALBUMENTATIONS_UPDATE before the import below

import albumentations as A  # noqa: E402

_state: dict = {}


def read_voc(root: str) -> list[tuple[str, list, list]]:
    """(image path, [[xmin, ymin, xmax, ymax], ...] in pixel edges, [class, ...]) per image, sorted."""
    out = []
    for name in sorted(os.listdir(os.path.join(root, "Annotations"))):
        tree = ET.parse(os.path.join(root, "Annotations", name))
        boxes, labels = [], []
        for obj in tree.findall("object"):
            b = obj.find("bndbox")
            boxes.append([float(b.find(k).text) - (1 if k in ("xmin", "ymin") else 0)
                          for k in ("xmin", "ymin", "xmax", "ymax")])
            labels.append(obj.find("name").text)
        out.append((os.path.join(root, "JPEGImages", os.path.splitext(name)[0] + ".jpg"), boxes, labels))
    return out


def _init(items, size: int, seed: int, counter, floor: bool = False) -> None:
    with counter.get_lock():
        index = counter.value
        counter.value += 1
    cv2.setNumThreads(1)
    _state["items"], _state["rng"], _state["floor"] = items, random.Random(seed * 1000 + index), floor
    _state["size"] = size
    _state["transform"] = A.Compose(
        [A.Mosaic(target_size=(size, size), cell_shape=(size, size), fit_mode="cover", p=1.0),
         A.HorizontalFlip(p=0.5)],
        bbox_params=A.BboxParams(format="pascal_voc", label_fields=["labels"], min_visibility=0.0), seed=seed + index)


def _load(item) -> dict:
    path, boxes, labels = item
    with open(path, "rb") as fh:
        img = cv2.imdecode(np.frombuffer(fh.read(), np.uint8), cv2.IMREAD_COLOR)
    if img is None:
        raise ValueError(f"{path}: cv2.imdecode failed")
    return {"image": img, "bboxes": np.array(boxes, np.float32).reshape(-1, 4), "labels": labels}


def augment(i: int):
    """Image i and 3 random partners: the mosaic, encoded; (bytes, h, w, boxes normalized, labels)."""
    items, rng = _state["items"], _state["rng"]
    primary = _load(items[i])
    partners = [_load(items[rng.randrange(len(items))]) for _ in range(3)]
    if _state["floor"]:
        out = {"image": np.ascontiguousarray(cv2.resize(primary["image"], (_state["size"],) * 2,
                                                        interpolation=cv2.INTER_NEAREST)),
               "bboxes": [], "labels": []}
    else:
        out = _state["transform"](**primary, mosaic_metadata=partners)
    img = out["image"]
    ok, buf = cv2.imencode(".jpg", img, JPEG_Q)
    if not ok:
        raise ValueError("cv2.imencode failed")
    h, w = img.shape[:2]
    boxes = [(b[0] / w, b[1] / h, b[2] / w, b[3] / h) for b in out["bboxes"]]
    return buf.tobytes(), h, w, boxes, list(out["labels"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.user_mosaic", description=__doc__.splitlines()[0])
    ap.add_argument("input", help="a Pascal VOC folder (JPEGImages/, Annotations/)")
    ap.add_argument("--out", required=True, help="the TFRecord file to write")
    ap.add_argument("--size", type=int, default=640)
    ap.add_argument("--workers", type=int, default=default_workers())
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--floor", action="store_true", help="the codec floor: decodes and an encode, no transform")
    args = ap.parse_args(argv)
    items = read_voc(args.input)
    counter = mp.get_context("fork").Value("i", 0)
    pool = mp.get_context("fork").Pool(args.workers, _init, (items, args.size, args.seed, counter,
                                                                    args.floor))
    import tensorflow as tf   # after the fork, as bench.user_script: the workers never import it

    classes = sorted({c for _, _, labels in items for c in labels})
    n = boxes_total = 0
    with tf.io.TFRecordWriter(args.out) as writer:
        for (data, h, w, boxes, labels) in pool.imap(augment, range(len(items)), chunksize=4):
            f = {"image/encoded": [data], "image/format": [b"jpeg"], "image/height": [h], "image/width": [w],
                 "image/object/bbox/xmin": [b[0] for b in boxes], "image/object/bbox/ymin": [b[1] for b in boxes],
                 "image/object/bbox/xmax": [b[2] for b in boxes], "image/object/bbox/ymax": [b[3] for b in boxes],
                 "image/object/class/text": [c.encode() for c in labels],
                 "image/object/class/label": [classes.index(c) + 1 for c in labels]}
            feature = {}
            for k, v in f.items():
                if k.startswith("image/object/bbox"):
                    feature[k] = tf.train.Feature(float_list=tf.train.FloatList(value=v))
                elif isinstance(v[0] if v else 0, bytes) or k.endswith(("text", "format", "encoded")):
                    feature[k] = tf.train.Feature(bytes_list=tf.train.BytesList(value=v))
                else:
                    feature[k] = tf.train.Feature(int64_list=tf.train.Int64List(value=v))
            writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
            n += 1
            boxes_total += len(boxes)
    pool.close()
    pool.join()
    print(json.dumps({"images": n, "records": n, "boxes": boxes_total}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
