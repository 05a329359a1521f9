"""Tiling large images (issue 44): `augd run` of a pipeline with `tile: {size: 640, overlap: 0.2}` on 4000x3000
JPEGs, every tile kept and stored as a JPEG record, against what a user runs instead:

* `opencv_pool`, the floor: the same tiles cut and JPEG-encoded by OpenCV in a process pool of `--workers`
  (each image decoded once, each tile encoded at the same quality, the bytes appended to a file per worker): no
  TFRecord framing, no Example, no checks;
* `sahi`: SAHI's own slicing, `sahi.slicing.slice_image` per image, as its `slice_coco` runs it (one process,
  PIL, a JPEG file per tile, saved by a thread pool at PIL's default quality, 75), where `sahi` imports (`pip
  install --no-deps sahi shapely pybboxes fire termcolor`: its own requirements pull opencv-python beside augd's
  headless OpenCV); `augd_q75` is augd at SAHI's quality, its like for like.

Whole processes, alternating, `--rounds` times; each row's wall seconds from launch to exit (bench.whole.timed),
tiles/s, and augd's against each. Figures only: no timing is asserted anywhere. `--baseline DIR` adds the row
`augd_baseline`: the same job run by another checkout's augd (before/after a change, on the same images and in the
same rounds; `git worktree add` or `git archive | tar -x` of the commit before).

    python -m bench.tiles                     # 12 images of 4000x3000, 2 workers, 3 rounds
    python -m bench.tiles --n 24 --rounds 2
    python -m bench.tiles --n 48 --rows augd,augd_baseline,opencv_pool --baseline /tmp/augd-main
"""
from __future__ import annotations

import argparse
import importlib
import os
import shutil
import statistics
import sys
import tempfile

import numpy as np

from bench.common import header, machine, write_json
from bench.whole import WALL, _augd_cmd, _subreaper, timed

ROWS = ("augd", "opencv_pool", "sahi", "augd_q75")   # and augd_baseline, with --baseline
SIZE, OVERLAP, QUALITY = 640, 0.2, 90
PIPELINE = """name: tiled
description: every 640x640 tile of each image, kept and stored as JPEG
variants: 0
keep_original: true
output: {{format: jpeg, quality: {quality}}}
tile: {{size: {size}, overlap: {overlap}, empty: 1.0}}
ops: []
"""


def _images(folder: str, n: int, h: int = 3000, w: int = 4000) -> list[str]:
    """`n` photo-like JPEGs (q92): a smooth gradient, mild noise and 60 small squares of 16-60 px each."""
    import cv2
    os.makedirs(folder, exist_ok=True)
    out = []
    for k in range(n):
        rng = np.random.default_rng(k)
        yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
        base = np.stack([90 + 60 * np.sin(xx / (300 + 40 * c) + k) * np.cos(yy / 410) for c in range(3)], -1)
        img = np.clip(base + rng.normal(0, 6, (h, w, 3)), 0, 255).astype(np.uint8)
        for _ in range(60):
            s = int(rng.integers(16, 61))
            x, y = int(rng.integers(0, w - s)), int(rng.integers(0, h - s))
            img[y:y + s, x:x + s] = rng.integers(0, 256, 3)
        path = os.path.join(folder, f"img{k:03d}.jpg")
        cv2.imwrite(path, img, [cv2.IMWRITE_JPEG_QUALITY, 92])
        out.append(path)
    return out


def _floor_one(args) -> int:
    """One image for opencv_pool: decoded once, each tile encoded, the bytes appended to this worker's file."""
    import cv2

    from augd.schema.tile import TileSpec, tiles_of
    cv2.setNumThreads(1)
    path, out_dir = args
    img = cv2.imread(path, cv2.IMREAD_COLOR)
    tiles = tiles_of(TileSpec(size=SIZE, overlap=OVERLAP), *img.shape[:2])
    with open(os.path.join(out_dir, f"worker-{os.getpid()}.bin"), "ab") as fh:
        for t in tiles:
            ok, buf = cv2.imencode(".jpg", img[t.y0:t.y1, t.x0:t.x1], [cv2.IMWRITE_JPEG_QUALITY, QUALITY])
            fh.write(buf.tobytes())
    return len(tiles)


def _run_floor(job: str, out: str, workers: int) -> int:
    from concurrent.futures import ProcessPoolExecutor
    os.makedirs(out, exist_ok=True)
    paths = sorted(os.path.join(job, "all", f) for f in os.listdir(os.path.join(job, "all")))
    with ProcessPoolExecutor(workers) as pool:
        return sum(pool.map(_floor_one, [(p, out) for p in paths]))


def _run_sahi(job: str, out: str) -> int:
    from sahi.slicing import slice_image
    os.makedirs(out, exist_ok=True)
    n = 0
    for f in sorted(os.listdir(os.path.join(job, "all"))):
        got = slice_image(image=os.path.join(job, "all", f), output_file_name=f[:-4], output_dir=out,
                          slice_height=SIZE, slice_width=SIZE, overlap_height_ratio=OVERLAP,
                          overlap_width_ratio=OVERLAP, out_ext=".jpg", verbose=False)
        n += len(got)
    return n


def _cmd(row: str, job: str, out: str, pipeline: str, workers: int) -> list[str]:
    if row.startswith("augd"):
        if row == "augd_q75":
            pipeline = pipeline.replace(".yaml", "-q75.yaml")
        return _augd_cmd() + ["run", job, "--pipeline", pipeline, "--out", out, "--overwrite", "--quiet"]
    return [sys.executable, "-m", "bench.tiles", "--child", row, "--job", job, "--out", out, "--workers",
            str(workers)]


def _tiles_written(row: str, out: str, log: str) -> int:
    if row.startswith("augd"):
        import json
        job = os.path.join(out, os.listdir(out)[0])
        with open(os.path.join(job, "manifest.json"), encoding="utf-8") as fh:
            return json.load(fh)["records"]["written"]
    with open(log + ".out", encoding="utf-8") as fh:
        return int(fh.read().split()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=12, help="4000x3000 images in the job (default 12)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rows", default=",".join(ROWS), help=f"any of {','.join(ROWS)},augd_baseline")
    ap.add_argument("--baseline", default=None, help="another checkout of augd: its run is the row augd_baseline")
    ap.add_argument("--json", default=None)
    ap.add_argument("--child", choices=("opencv_pool", "sahi"), help=argparse.SUPPRESS)
    ap.add_argument("--job", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:   # one timed run of a reference row, in its own process
        print(_run_floor(args.job, args.out, args.workers) if args.child == "opencv_pool" else
              _run_sahi(args.job, args.out))
        return 0
    rows = [r for r in args.rows.split(",") if r]
    if args.baseline and "augd_baseline" not in rows:
        rows.insert(1, "augd_baseline")
    if "augd_baseline" in rows and not (args.baseline and os.path.isdir(os.path.join(args.baseline, "augd"))):
        ap.error(f"the augd_baseline row needs --baseline, a checkout of augd (a folder holding augd/); got "
                 f"{args.baseline!r}")
    if "sahi" in rows:
        try:
            importlib.import_module("sahi.slicing")
        except ImportError as exc:
            print(f"bench.tiles: no sahi row ({exc}); pip install --no-deps sahi shapely pybboxes fire termcolor")
            rows.remove("sahi")
    _subreaper()
    work = tempfile.mkdtemp(prefix="augd-bench-tiles-")
    try:
        job = os.path.join(work, "images")
        _images(os.path.join(job, "all"), args.n)
        pipeline = os.path.join(work, "tiled.yaml")
        for path, quality in ((pipeline, QUALITY), (pipeline.replace(".yaml", "-q75.yaml"), 75)):
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(PIPELINE.format(quality=quality, size=SIZE, overlap=OVERLAP))
        mb = sum(os.path.getsize(os.path.join(job, "all", f)) for f in os.listdir(os.path.join(job, "all"))) / 1e6
        print(f"bench.tiles: {args.n} images of 4000x3000 ({mb:.0f} MB of JPEG), tiles of {SIZE} overlapping "
              f"{OVERLAP}, JPEG q{QUALITY}, {args.workers} workers")
        results: dict[str, list[dict]] = {r: [] for r in rows}
        for k in range(args.rounds):
            for row in (rows if k % 2 == 0 else rows[::-1]):
                out = os.path.join(work, f"out-{row}")
                shutil.rmtree(out, ignore_errors=True)
                log = os.path.join(work, f"log-{row}-{k}")
                repo = {"repo": os.path.abspath(args.baseline)} if row == "augd_baseline" else {}
                r = timed(_cmd(row, job, out, pipeline, args.workers), timeout=3600, logs=log, **repo)
                if r["rc"] == 0:
                    r["tiles"] = _tiles_written(row, out, log)
                results[row].append(r)
                print(f"  round {k + 1} {row:<14} {r.get(WALL, float('nan')):8.2f} s  {r.get('tiles', '?')} tiles  "
                      f"{r.get('cores_busy', float('nan')):.2f} cores busy  {r.get('error', '')}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    summary = {**header("bench.tiles", argv), "machine": machine(), "n": args.n, "workers": args.workers, "rows": {}}
    walls = {r: [x[WALL] for x in results[r] if x.get("rc") == 0] for r in rows}
    mine = statistics.median(walls["augd"]) if walls.get("augd") else None
    print(f"\n{'row':<14}{'wall s':>9}{'tiles/s':>10}{'augd / row':>12}  runs")
    for r in rows:
        if not walls[r]:
            print(f"{r:<14}{'failed':>9}  {results[r][-1].get('error')}")
            continue
        w = statistics.median(walls[r])
        tiles = results[r][-1]["tiles"]
        speed = w / mine if mine else float("nan")
        summary["rows"][r] = {WALL: w, "tiles": tiles, "tiles_per_second": round(tiles / w, 1),
                              "augd_speed_ratio": round(speed, 3), "runs": walls[r]}
        print(f"{r:<14}{w:>9.2f}{tiles / w:>10.1f}{speed:>12.3f}  {' '.join(f'{x:.2f}' for x in walls[r])}")
    if args.json:
        write_json(args.json, summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
