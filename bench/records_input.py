"""A job whose input is TFRecord shards against the same images as a folder, whole processes, side by side.

    python -m bench.records_input                  # 1000 photos (the bench's VOC set), 3 rounds (~4 min)
    python -m bench.records_input --n 3000 --rounds 2
    python -m bench.records_input --no-masks       # the same set without its class masks

The VOC copy of the bench's photos (bench.data.build_voc: 0.2-0.9 MP JPEGs, 3 boxes and a class mask each) is
written once as augd records of its originals (`variants: 0`, `keep_original: true`: the source JPEG bytes,
boxes and masks in the records), plain and GZIP. Rows, each `augd run ... --pipeline P` as a user runs it,
alternating, median of --rounds: the VOC folder, the plain shards, the GZIP shards. Prints records in, images
written, rejects by reason and images per second of each, the records' rate over the folder's, and whether the
shards the records job wrote are the folder job's, byte for byte. Figures only (nothing asserted). With masks, the
records hold the masks augd wrote (Pillow's filtered grey PNGs), which its mask reader decodes slower than the VOC
set's own palette PNGs: --no-masks (a copy of the set without SegmentationClass/) compares the reading alone.
"""
from __future__ import annotations

import argparse
import filecmp
import json
import os
import statistics
import sys

from bench.common import default_workers

WALL = "wall_seconds"
PIPELINE = """name: records-bench
seed: 5
variants: 1
keep_original: false
output: {format: jpeg, quality: 90}
ops:
  - random_crop: {size: [320, 320], area: [0.3, 1.0]}
  - random_flip_left_right: {}
  - random_brightness: {max_delta: 0.1}
"""
ORIGINALS = "name: originals\nvariants: 0\nkeep_original: true\noutput: {{compression: {c}}}\nops: []\n"


def _records(voc: str, compression: str, workers: int, logs: str) -> str:
    """The VOC set as augd records of its originals (built once): <voc>-records-<compression>/<name>/."""
    from bench.whole import _augd_cmd, timed
    out = f"{voc}-records-{compression}"
    folder = os.path.join(out, os.path.basename(voc))
    if not os.path.exists(os.path.join(folder, "_SUCCESS")):
        spec = os.path.join(os.path.dirname(voc), f"originals-{compression}.yaml")
        with open(spec, "w") as fh:
            fh.write(ORIGINALS.format(c=compression))
        r = timed(_augd_cmd() + ["run", voc, "-p", spec, "-o", out, "--overwrite", "--quiet", "--workers",
                                 str(workers)], timeout=1800, logs=logs)
        if "error" in r:
            raise RuntimeError(f"writing the records: {r}")
    return folder


def _without_masks(voc: str) -> str:
    """<voc>-boxes/: the VOC set's images (hard links) and boxes, no SegmentationClass/ (built once)."""
    import shutil
    out = voc + "-boxes"
    if not os.path.exists(os.path.join(out, "done")):
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(os.path.join(voc, "Annotations"), os.path.join(out, "Annotations"))
        os.makedirs(os.path.join(out, "JPEGImages"))
        for name in os.listdir(os.path.join(voc, "JPEGImages")):
            os.link(os.path.join(voc, "JPEGImages", name), os.path.join(out, "JPEGImages", name))
        open(os.path.join(out, "done"), "w").close()
    return out


def measure(n: int, rounds: int, workers: int, cache: str, timeout: float = 1800.0, masks: bool = True) -> dict:
    from bench.data import build_dataset, build_voc
    from bench.whole import _augd_cmd, timed
    voc = build_voc(build_dataset(n, 0, cache), 0)
    voc = voc if masks else _without_masks(voc)
    base = os.path.dirname(voc)
    logs = os.path.join(base, "records-log")
    spec = os.path.join(base, "records-bench.yaml")
    with open(spec, "w") as fh:
        fh.write(PIPELINE)
    inputs = {"folder": voc, "records": _records(voc, "none", workers, logs),
              "records_gzip": _records(voc, "gzip", workers, logs)}
    outs = {k: os.path.join(base, f"records-bench-out-{k}") for k in inputs}
    walls: dict[str, list[float]] = {k: [] for k in inputs}
    for _ in range(rounds):
        for name, src in inputs.items():
            cmd = _augd_cmd() + ["run", src, "-p", spec, "-o", outs[name], "--overwrite", "--quiet", "--workers",
                                 str(workers)]
            r = timed(cmd, timeout=timeout, logs=logs)
            if "error" in r:
                raise RuntimeError(f"{name}: {r}")
            walls[name].append(r[WALL])
    job = os.path.basename(voc)
    rows = {}
    for name in inputs:
        with open(os.path.join(outs[name], job, "manifest.json")) as fh:
            m = json.load(fh)
        reasons: dict[str, int] = {}
        for r in m["inputs"]["rejected_files"]:
            reasons[r["reason"]] = reasons.get(r["reason"], 0) + 1
        rows[name] = {"in": m["inputs"]["seen"], "written": m["inputs"]["written"], "rejected": reasons,
                      "img_per_s": round(m["inputs"]["written"] / statistics.median(walls[name]), 1)}
    shards = sorted(f for f in os.listdir(os.path.join(outs["folder"], job)) if ".tfrecord" in f)
    same = {k: bool(shards) and all(filecmp.cmp(os.path.join(outs["folder"], job, f), os.path.join(outs[k], job, f),
                                                shallow=False) for f in shards) for k in ("records", "records_gzip")}
    return {"images": n, "workers": workers, "walls": walls, "rows": rows, "same_bytes": same,
            "records_over_folder": round(statistics.median(walls["folder"]) / statistics.median(walls["records"]), 3),
            "gzip_over_folder": round(statistics.median(walls["folder"]) / statistics.median(walls["records_gzip"]),
                                      3)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.records_input", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=default_workers())
    ap.add_argument("--cache", default=None)
    ap.add_argument("--no-masks", action="store_true", help="the VOC set without its class masks")
    args = ap.parse_args(argv)
    from bench.data import DEFAULT_CACHE
    r = measure(args.n, args.rounds, args.workers, args.cache or DEFAULT_CACHE, masks=not args.no_masks)
    for name, row in r["rows"].items():
        print(f"{name:13s} {row['in']} in, {row['written']} written, rejected {row['rejected'] or 0}, "
              f"{row['img_per_s']} img/s")
    print(f"records / folder {r['records_over_folder']}, gzip records / folder {r['gzip_over_folder']}; the same "
          f"shards as the folder job: {r['same_bytes']} (walls {r['walls']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
