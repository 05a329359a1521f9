"""Issue 60, item 1: the box-aware ops and the detection policies at the price of a plain chain. Whole `augd run`
processes on the bench's VOC copy (photos with 3-7 random boxes each: bench/data.py), one record per image, each
pipeline alternated with the plain detection chain (crop, flip, brightness) round by round; medians of the rounds
and each pipeline's ratio to the plain chain in the same round. The reference a user would run instead of augd's
`randaugment`: Keras 3's RandAugment layer in a tf.data pipeline into a TFRecordWriter (bench/user_randaugment.py),
same photos, JPEG records.

    python -m bench.box_ops [--n 600] [--rounds 3] [--only NAME,...]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

PLAIN = [{"random_crop": {"area": [0.5, 1.0]}}, {"random_flip_left_right": {}},
         {"random_brightness": {"max_delta": 0.1}}]
#: name -> the ops of its pipeline (each alone, as issue 60 measured them)
PIPELINES = {
    "plain": PLAIN,
    # the whole photo decoded and encoded, and nothing else moved: what a box op alone costs at least
    "whole photo (flip)": [{"random_flip_left_right": {}}],
    "in_boxes translate_x 40": [{"in_boxes": {"op": "translate_x", "value": 40, "box_p": 0.5}}],
    "in_boxes rotate 30": [{"in_boxes": {"op": "rotate", "value": 30, "box_p": 0.5}}],
    "box_cutout each 40": [{"box_cutout": {"boxes": "each", "size": 40, "box_p": 0.5}}],
    "autoaugment v0": [{"autoaugment": {"policy": "v0"}}],
    "autoaugment v1": [{"autoaugment": {"policy": "v1"}}],
    "randaugment n2 m9": [{"randaugment": {"n": 2, "m": 9}}],
}


def _voc_boxes_only(voc_dir: str, dest: str) -> str:
    """The VOC copy without its semantic masks (the rows price the boxes' ops, not the masks moved with them):
    JPEGImages and Annotations."""
    for sub in ("JPEGImages", "Annotations"):   # hard links: a job refuses symlinks out of its folder
        os.makedirs(os.path.join(dest, sub), exist_ok=True)
        for name in os.listdir(os.path.join(voc_dir, sub)):
            os.link(os.path.join(voc_dir, sub, name), os.path.join(dest, sub, name))
    return dest


def _run(name: str, voc: str, tmp: str, workers: int) -> float:
    doc = {"name": "box-ops", "seed": 60, "variants": 1, "keep_original": False,
           "output": {"format": "jpeg", "quality": 90}, "ops": PIPELINES[name]}
    pipe = os.path.join(tmp, "p.yaml")
    with open(pipe, "w", encoding="utf-8") as fh:
        json.dump(doc, fh)
    out = os.path.join(tmp, "out")
    subprocess.run(["rm", "-rf", out], check=True)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "augd", "run", voc, "-p", pipe, "-o", out, "--quiet", "--workers",
                    str(workers)], check=True)
    return time.perf_counter() - t0


def _keras(voc: str, tmp: str) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "bench.user_randaugment", os.path.join(voc, "JPEGImages"),
                    os.path.join(tmp, "keras.tfrecord")], check=True)
    return time.perf_counter() - t0


def main(argv=None) -> int:
    from bench.common import default_workers
    from bench.data import build_dataset, build_voc
    ap = argparse.ArgumentParser(prog="python -m bench.box_ops", description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=600)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=default_workers())
    ap.add_argument("--only", default="", help="pipeline names, comma-separated (plain always runs)")
    ap.add_argument("--no-keras", action="store_true", help="leave out Keras 3's RandAugment reference")
    args = ap.parse_args(argv)
    only = [s.strip() for s in args.only.split(",") if s.strip()] or [n for n in PIPELINES if n != "plain"]
    times: dict[str, list[float]] = {n: [] for n in ["plain", *only] + ([] if args.no_keras else ["keras"])}
    ratios: dict[str, list[float]] = {n: [] for n in times if n != "plain"}
    with tempfile.TemporaryDirectory() as tmp:
        voc = _voc_boxes_only(build_voc(build_dataset(args.n)), os.path.join(tmp, "voc"))
        for r in range(args.rounds):
            for name in times:
                times[name].append(_keras(voc, tmp) if name == "keras" else _run(name, voc, tmp, args.workers))
            for name in ratios:
                ratios[name].append(times[name][-1] / times["plain"][-1])
            print(f"round {r + 1}: " + ", ".join(f"{n} {t[-1]:.2f} s" for n, t in times.items()), file=sys.stderr)
    print(f"| pipeline ({args.n} photos, {args.workers} workers) | seconds (median of {args.rounds}) | "
          f"/ plain (median) |\n|---|---|---|")
    for name, t in times.items():
        label = "Keras 3 RandAugment(num_ops=2, factor 0.9) in tf.data -> TFRecordWriter" if name == "keras" else name
        ratio = "1.00" if name == "plain" else f"{statistics.median(ratios[name]):.2f}"
        print(f"| {label} | {statistics.median(t):.2f} | {ratio} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
