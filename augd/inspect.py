"""`augd inspect`: what is in a TFRecord file or an output folder, and a way to look at the images."""
from __future__ import annotations

import collections
import os
import statistics

from augd.io.scan import is_url

__all__ = ["inspect_paths"]


def _shards(path: str) -> list[str]:
    if is_url(path):  # object stores need tf.io.gfile
        import tensorflow as tf
        isdir, listdir, exists = tf.io.gfile.isdir, tf.io.gfile.listdir, tf.io.gfile.exists
    else:
        isdir, listdir, exists = os.path.isdir, os.listdir, os.path.exists
    if isdir(path):
        files = sorted(f for f in listdir(path) if ".tfrecord" in f)
        if not files:
            raise ValueError(f"{path}: no *.tfrecord files in this folder")
        return [os.path.join(path, f) for f in files]
    if not exists(path):
        raise ValueError(f"{path}: no such file or folder")
    return [path]


def _readers(path: str):
    """(records of a shard, its parser): without TensorFlow for local files, so inspect answers at once."""
    if is_url(path):
        from augd.io import parse_example, read_records
        return read_records, parse_example
    from augd.io.lite import decode_example, iter_records
    return iter_records, decode_example


def inspect_paths(paths, *, dump=None, out) -> int:
    n_dump, dump_dir = (int(dump[0]), dump[1]) if dump else (0, None)
    if dump_dir:
        os.makedirs(dump_dir, exist_ok=True)
    dumped = 0
    for path in paths:
        shards = _shards(path)
        read_records, parse_example = _readers(path)
        keys: set = set()
        labels: collections.Counter = collections.Counter()
        formats: collections.Counter = collections.Counter()
        variants: collections.Counter = collections.Counter()
        heights, widths, sizes = [], [], []
        per_shard = []
        for shard in shards:
            n = 0
            for rec in read_records(shard):
                ex = parse_example(rec)
                n += 1
                keys.update(ex)
                labels[(ex.get("image/class/label"), ex.get("image/class/text", ""))] += 1
                formats[ex.get("image/format")] += 1
                variants[ex.get("augd/variant")] += 1
                heights.append(ex["image/height"])
                widths.append(ex["image/width"])
                data = ex.get("image/encoded", ex.get("image/raw", b""))
                sizes.append(len(data))
                if dumped < n_dump:
                    _dump(ex, data, dump_dir, dumped)
                    dumped += 1
            per_shard.append((os.path.basename(shard), n))
        total = sum(n for _, n in per_shard)
        print(f"{path}: {total} records in {len(shards)} shard(s)", file=out)
        for name, n in per_shard:
            print(f"  {name}: {n}", file=out)
        if path and os.path.isfile(os.path.join(path, "_SUCCESS")):
            print("  _SUCCESS present: output is complete", file=out)
        if not total:
            continue
        print(f"  keys: {', '.join(sorted(keys))}", file=out)
        print("  labels: " + ", ".join(f"{lab}:{txt or '-'}={n}" for (lab, txt), n in sorted(labels.items())),
              file=out)
        print("  formats: " + ", ".join(f"{k}={v}" for k, v in sorted(formats.items())), file=out)
        print("  variants: " + ", ".join(f"{k}={v}" for k, v in sorted(variants.items())), file=out)
        print(f"  height min/median/max: {min(heights)}/{statistics.median(heights):g}/{max(heights)}; "
              f"width: {min(widths)}/{statistics.median(widths):g}/{max(widths)}", file=out)
        print(f"  payload bytes: total {sum(sizes)}, mean {sum(sizes) / total:.0f}", file=out)
    if dump_dir:
        print(f"wrote {dumped} image(s) to {dump_dir}", file=out)
    return 0


def _dump(ex: dict, data: bytes, directory: str, i: int) -> None:
    import numpy as np
    import cv2
    base = f"{i:05d}-v{ex.get('augd/variant', 0)}-{os.path.basename(str(ex.get('image/filename', 'img')))}"
    fmt = ex.get("image/format")
    if fmt == "raw":
        arr = np.frombuffer(data, np.uint8).reshape(ex["image/height"], ex["image/width"], 3)
        cv2.imwrite(os.path.join(directory, base.rsplit(".", 1)[0] + ".png"), arr[:, :, ::-1])
    else:
        with open(os.path.join(directory, base.rsplit(".", 1)[0] + (".png" if fmt == "png" else ".jpg")), "wb") as f:
            f.write(data)
