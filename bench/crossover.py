"""Does `--executor auto` pick the executor that finishes first? The default `augd run` (no executor, no workers:
what a user types) against the executor auto did not pick, whole processes, imports included, for every shipped
pipeline and job sizes from 300 to 30,000 records, alternating, `--rounds` times.

    python -m bench.crossover                                  # every pipeline, 300, 3000, 30000 records (~45 min)
    python -m bench.crossover --sizes 300,1000 --pipelines seed-classifier,geometric-heavy --rounds 3

Data: the bench's photos (bench.data, ~565 kpx each), in class folders for the classification pipelines and as
the VOC copy (boxes, semantic masks) for the detection, pose and segmentation ones; a job of R records holds
ceil(R / records per image) images (the base set of 1000 cycled under new names, hard links). Each row: the
records, what auto picked (executor x workers) and its estimates, each executor's median wall seconds (auto's
pick is timed as the default run itself), and default / best of the two: the issue's bound is 1.05. Figures
only: no timing is asserted anywhere.
"""
from __future__ import annotations

import argparse
import math
import os
import shutil
import statistics
import sys
import tempfile

from bench.common import header, machine, write_json
from bench.data import DEFAULT_CACHE, build_dataset, build_voc, dataset_files, link_tree
from bench.whole import WALL, _subreaper, run_augd

BASE = 1000
SIZES = (300, 3000, 30000)
#: within this of the best of threads and processes (issue 46)
WITHIN = 1.05
ANNOTATED = ("detection", "pose", "segmentation")


def pipelines() -> dict[str, int]:
    """Every shipped pipeline -> records per image."""
    from augd.job.units import variants_of
    from augd.schema import builtin_pipelines, load_pipeline
    return {name: len(variants_of(load_pipeline(path))) for name, path in sorted(builtin_pipelines().items())}


def job(kind: str, images: int, cache: str, dest: str) -> str:
    """A job folder of `images` of the base set: class folders, or the VOC copy (JPEGImages, Annotations,
    SegmentationClass; cycled copies keep each stem's three files together)."""
    base = build_dataset(BASE, 0, cache, quiet=True)
    if os.path.isdir(dest):
        return dest
    if kind == "folder":
        files = dataset_files(base)
        for k in range(math.ceil(images / len(files))):
            link_tree(base, dest, files[:images - k * len(files)], prefix=f"c{k}-")
        return dest
    voc = build_voc(base, 0, quiet=True)
    stems = sorted(os.path.splitext(f)[0] for f in os.listdir(os.path.join(voc, "JPEGImages")))
    for part, ext in (("JPEGImages", ".jpg"), ("Annotations", ".xml"), ("SegmentationClass", ".png")):
        os.makedirs(os.path.join(dest, part))
        for i in range(images):
            stem = stems[i % len(stems)]
            os.link(os.path.join(voc, part, stem + ext), os.path.join(dest, part, f"c{i // len(stems)}-{stem}{ext}"))
    return dest


def measure(sizes, names, rounds, cache, tmp=None, timeout=3600.0, log=sys.stderr) -> list[dict]:
    work = tempfile.mkdtemp(prefix="augd-crossover-", dir=tmp)
    per_image, rows = pipelines(), []
    try:
        for name in names:
            kind = "voc" if name.startswith(ANNOTATED) else "folder"
            for records in sizes:
                images = math.ceil(records / per_image[name])
                folder = job(kind, images, cache, os.path.join(work, f"{kind}-{images}", "job"))
                runs: dict[str, list] = {"default": [], "other": []}
                picked = other = None
                for _ in range(rounds):
                    r = run_augd(folder, name, os.path.join(work, "out"), executor=None, workers=None,
                                 timeout=timeout, expect=images)
                    if "error" in r:
                        raise RuntimeError(f"{name}, {records} records, default: {r['error']}")
                    picked = r["manifest"]["executor"]
                    choice = r["manifest"]["choice"]
                    other = "threads" if picked == "processes" else "processes"
                    o = run_augd(folder, name, os.path.join(work, "out"), executor=other, workers=None,
                                 timeout=timeout, expect=images)
                    if "error" in o:
                        raise RuntimeError(f"{name}, {records} records, {other}: {o['error']}")
                    runs["default"].append(r[WALL])
                    runs["other"].append(o[WALL])
                med = {k: statistics.median(v) for k, v in runs.items()}
                row = {"pipeline": name, "records": images * per_image[name], "images": images, "picked": picked,
                       "workers": choice["workers"], "why": choice["why"], "estimates": choice["estimated_seconds"],
                       "walls": runs, picked: med["default"], other: med["other"],
                       "default_over_best": round(med["default"] / min(med.values()), 3)}
                rows.append(row)
                print(_line(row), file=log, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return rows


def _line(r: dict) -> str:
    est = r["estimates"]
    guess = "  ".join(f"{k} ~{v:.1f}" for k, v in est.items())
    ok = "met" if r["default_over_best"] <= WITHIN else "NOT met"
    return (f"{r['pipeline']:<21} {r['records']:>6} {r['picked'] + ' x' + str(r['workers']):<12} "
            f"{r['threads']:>9.2f} {r['processes']:>11.2f} {r['default_over_best']:>8.3f} {ok:<8} {guess}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.crossover", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)), help="job sizes in records (comma-separated)")
    ap.add_argument("--pipelines", default=None, help="shipped pipelines (comma-separated; default: all)")
    ap.add_argument("--rounds", type=int, default=1, help="runs of each executor per point (alternating)")
    ap.add_argument("--cache", default=DEFAULT_CACHE)
    ap.add_argument("--tmp", default=None)
    ap.add_argument("--json", default=None, help="write every figure to this JSON file")
    args = ap.parse_args(argv)
    known = pipelines()
    names = [p.strip() for p in args.pipelines.split(",")] if args.pipelines else list(known)
    if bad := [p for p in names if p not in known]:
        ap.error(f"--pipelines: unknown {bad}; shipped: {', '.join(known)}")
    _subreaper()
    head = (f"{'pipeline':<21} {'records':>6} {'auto picked':<12} {'threads s':>9} {'processes s':>11} "
            f"{'dflt/best':>8} {'≤ 1.05':<8} auto's estimates, s")
    print(head, file=sys.stderr, flush=True)
    rows = measure([int(s) for s in args.sizes.split(",")], names, args.rounds, args.cache, args.tmp)
    print("\n" + head)
    for r in rows:
        print(_line(r))
    met = sum(r["default_over_best"] <= WITHIN for r in rows)
    print(f"\ndefault within {WITHIN} of the best: {met} of {len(rows)} points")
    if args.json:
        write_json(args.json, {**header("python -m bench.crossover", argv), "machine": machine(), "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
