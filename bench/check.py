"""`augd check` against what a user runs instead to find duplicate photos, whole processes, side by side.

    python -m bench.check                       # 3000 photos (the bench's data set as VOC), 3 rounds (~2 min)
    python -m bench.check --n 1000 --rounds 2

Rows, each a whole process, alternating, median of --rounds:
- `augd check` on the VOC copy of the bench's photos (bench.data.build_voc: 0.2-0.9 MP JPEGs, 3 boxes each): the
  scan, every annotation read and checked, every image hashed on all cores, every pair compared;
- the user's script (this module run as `--user`): what imagehash.phash does (PIL: open, to grey, a 32 x 32
  Lanczos resize, a 2-D DCT, the 8 x 8 low frequencies against their median) on a process pool of all cores, then
  every pair compared with NumPy: a careful user's duplicate finder, without reading any annotation.
Prints images per second of each and augd / user. Figures only (no target is asserted anywhere).
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys

import numpy as np

from bench.common import default_workers

WALL = "wall_seconds"


def _phash(path: str) -> int:
    from PIL import Image
    import cv2
    img = Image.open(path).convert("L").resize((32, 32), Image.Resampling.LANCZOS)
    low = cv2.dct(np.asarray(img, np.float32))[:8, :8].ravel()
    return int.from_bytes(np.packbits(low > np.median(low[1:])).tobytes(), "big")


def user_script(root: str, workers: int) -> int:
    """The user's duplicate finder: every image under `root`, hashed on a pool, pairs within 8 bits printed."""
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs
                   if f.lower().endswith((".jpg", ".jpeg", ".png")))
    with mp.get_context("forkserver").Pool(workers) as pool:
        hashes = np.array(pool.map(_phash, files, chunksize=32), np.uint64)
    pairs = 0
    for i in range(len(hashes)):
        pairs += int((np.bitwise_count(hashes[i] ^ hashes[i + 1:]) <= 8).sum())
    print(f"{len(files)} images, {pairs} near-duplicate pairs")
    return len(files)


def measure(n: int, rounds: int, workers: int, cache: str, timeout: float = 900.0) -> dict:
    from bench.data import build_dataset, build_voc
    from bench.whole import _augd_cmd, timed
    voc = build_voc(build_dataset(n, 0, cache), 0)
    logs = os.path.join(os.path.dirname(voc), "check-log")
    cmds = {"augd_check": _augd_cmd() + ["check", voc, "--workers", str(workers), "--fail-on", ""],
            "user_script": [sys.executable, "-m", "bench.check", "--user", voc, "--workers", str(workers)]}
    walls: dict[str, list[float]] = {k: [] for k in cmds}
    for _ in range(rounds):
        for name, cmd in cmds.items():
            r = timed(cmd, timeout=timeout, logs=logs)
            if "error" in r:
                raise RuntimeError(f"{name}: {r}")
            walls[name].append(r[WALL])
    med = {k: statistics.median(v) for k, v in walls.items()}
    out = {"images": n, "workers": workers, "walls": walls,
           "images_per_second": {k: round(n / v, 1) for k, v in med.items()},
           "augd_over_user": round(med["user_script"] / med["augd_check"], 3)}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.check", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=default_workers())
    ap.add_argument("--cache", default=None)
    ap.add_argument("--user", default=None, metavar="DIR", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.user:
        user_script(args.user, args.workers)
        return 0
    from bench.data import DEFAULT_CACHE
    r = measure(args.n, args.rounds, args.workers, args.cache or DEFAULT_CACHE)
    ips = r["images_per_second"]
    print(f"{r['images']} images, {r['workers']} workers: augd check {ips['augd_check']} img/s, the user's script "
          f"{ips['user_script']} img/s: augd / user {r['augd_over_user']} (walls {r['walls']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
