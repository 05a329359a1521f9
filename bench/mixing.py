"""Issue 25's rows: a mosaic job against the script a detection user writes instead, whole processes.

    python -m bench.mixing                 # 1000 images of the VOC copy, 3 rounds (~6 min on 2 cores)
    python -m bench.mixing --n 300 --rounds 1

Rows, interleaved in each round, each a whole process timed from launch to exit (imports included), on the same
VOC copy of the bench's photos (bench.data.build_voc: ~5 boxes each; its masks left out), every one writing one 640x640 JPEG q90
record per image with its boxes:
  floor_mosaic  bench.user_mosaic --floor: the same process reading and decoding the image and 3 partners whole,
                then encoding a 640x640 image: the codec floor of a mosaic whose partners are decoded whole
  user_mosaic   bench.user_mosaic: an Albumentations 2.0 Mosaic + HorizontalFlip process pool (every partner
                decoded whole, as Albumentations takes arrays) writing through tf.io.TFRecordWriter
  run_mosaic    `augd run` with `mosaic: {size: [640, 640], scale: [2, 2]}` + `random_flip_left_right`
                (each image's longer side the canvas', a piece of each shown: Mosaic's cover cells), processes
  run_mixup     the same job with `mixup` then `resize` to 640x640 (one partner, blended)
  run_cutmix    the same with `cutmix` then `resize`
  run_copy_paste  the same with `copy_paste: {objects: [1, 3]}` (box crops: the VOC copy has no instance masks)
  run_single    augd's single-image row of the same output: `resize` to 640x640 + flip
Verdicts: run_mosaic / user_mosaic (target >= 1.3) and each mixing row / run_single (what taking partners costs).
Figures only: nothing here asserts a timing.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile

from bench.common import REPO, default_workers, header, machine, write_json
from bench.data import DEFAULT_CACHE, build_dataset, build_voc, link_tree, voc_files
from bench.whole import IPS, WALL, timed

ROWS = ("floor_mosaic", "user_mosaic", "run_mosaic", "run_mixup", "run_cutmix", "run_copy_paste", "run_single")
HEAD = "name: bench-{name}\nseed: 0\nvariants: 1\nkeep_original: false\noutput: {{format: jpeg, quality: 90}}\nops:\n"
CHAINS = {
    "run_mosaic": "  - mosaic: {size: [640, 640], scale: [2.0, 2.0]}\n  - random_flip_left_right: {}\n",
    "run_mixup": "  - mixup: {}\n  - resize: {size: [640, 640]}\n  - random_flip_left_right: {}\n",
    "run_cutmix": "  - cutmix: {}\n  - resize: {size: [640, 640]}\n  - random_flip_left_right: {}\n",
    "run_copy_paste": "  - copy_paste: {objects: [1, 3]}\n  - resize: {size: [640, 640]}\n"
                      "  - random_flip_left_right: {}\n",
    "run_single": "  - resize: {size: [640, 640]}\n  - random_flip_left_right: {}\n",
}


def command(row: str, voc: str, work: str, workers: int) -> list[str]:
    out = os.path.join(work, row)
    if row in ("user_mosaic", "floor_mosaic"):
        os.makedirs(out, exist_ok=True)
        return [sys.executable, "-m", "bench.user_mosaic", voc, "--out", os.path.join(out, "out.tfrecord"),
                "--workers", str(workers)] + (["--floor"] if row == "floor_mosaic" else [])
    pipe = os.path.join(work, f"{row}.yaml")
    with open(pipe, "w", encoding="utf-8") as fh:
        fh.write(HEAD.format(name=row) + CHAINS[row])
    return [sys.executable, "-m", "augd", "run", voc, "--pipeline", pipe, "--out", out, "--overwrite", "--quiet",
            "--workers", str(workers), "--executor", "processes"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.mixing", description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=default_workers())
    ap.add_argument("--only", default=",".join(ROWS))
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--cache", default=DEFAULT_CACHE)
    args = ap.parse_args(argv)
    rows = [r for r in args.only.split(",") if r]
    full = build_voc(build_dataset(args.n, 0, args.cache))
    got: dict = {r: [] for r in rows}
    with tempfile.TemporaryDirectory(prefix="augd-bench-mix-") as work:
        voc = os.path.join(work, "voc")     # photos and boxes: no masks, as the user's script writes none
        images = link_tree(full, voc, voc_files(full, ("xml",))) // 2
        print(f"bench.mixing: {images} images of the VOC copy, {args.workers} workers, {args.rounds} round(s)")
        for k in range(args.rounds):
            for row in rows:
                r = timed(command(row, voc, work, args.workers), timeout=3600, logs=os.path.join(work, row))
                if r["rc"] != 0:
                    print(f"{row}: failed (rc {r['rc']}): {r.get('error', '')}", file=sys.stderr)
                    continue
                r[IPS] = round(images / r[WALL], 2)
                got[row].append(r)
                print(f"  round {k + 1} {row:<12} {r[IPS]:8.2f} img/s  {r[WALL]:7.2f} s  cores busy "
                      f"{r['cores_busy']:.2f}")
    med = {r: statistics.median(x[IPS] for x in v) for r, v in got.items() if v}
    print("\nmedians (img/s, whole process):")
    for r, v in med.items():
        print(f"  {r:<12} {v:8.2f}")
    verdicts = []
    if "run_mosaic" in med and "user_mosaic" in med:
        ratio = med["run_mosaic"] / med["user_mosaic"]
        verdicts.append(("run_mosaic / user_mosaic", round(ratio, 3), ">= 1.3", ratio >= 1.3))
    for r in ("user_mosaic", "run_mosaic"):
        if r in med and "floor_mosaic" in med:
            verdicts.append((f"{r} / floor_mosaic", round(med[r] / med["floor_mosaic"], 3), "(the bound)", None))
    for r in ("run_mosaic", "run_mixup", "run_cutmix", "run_copy_paste"):
        if r in med and "run_single" in med:
            verdicts.append((f"{r} / run_single", round(med[r] / med["run_single"], 3), "(cost of partners)", None))
    print("\nverdicts:")
    for name, ratio, target, ok in verdicts:
        print(f"  {name:<28} {ratio:6.3f}  {target}{'' if ok is None else ('  met' if ok else '  NOT met')}")
    if args.json:
        write_json(args.json, {**header("python -m bench.mixing", argv), "machine": machine(), "images": images, "rows": got, "medians": med,
                               "verdicts": verdicts, "repo": REPO})
    return 0


if __name__ == "__main__":
    sys.exit(main())
