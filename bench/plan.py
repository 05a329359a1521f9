"""What a detection job's plan costs before its first image, and who reads its annotation files.

    python -m bench.plan                     # the 3000-image VOC copy (bench.data.build_voc), 5 rounds
    python -m bench.plan --n 1000 --rounds 9

The same images planned three ways (`augd.job.units.plan_job`: the scan, and for a detection job its annotations
read and checked), rounds interleaved, medians printed:

  plain     JPEGImages/ alone: a classification job of the same images (the floor: the scan)
  here      JPEGImages/ + Annotations/, read by this process alone (`augd run`, whose early pool is still loading
            TensorFlow while it plans: this read overlaps that import)
  workers   the same, with a warm pool of --workers processes (the daemon's, between jobs) reading the XMLs and
            their images' headers in chunks (augd.job.workers.pool.chunked_map)

For each: wall seconds, and this process' CPU seconds (what the parent spends before the first batch can be cut;
the workers' CPU is theirs). The annotations' cost is each detection row less `plain`.
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

from bench.common import default_workers
from bench.data import DEFAULT_CACHE, build_dataset, build_voc

__all__ = ["main"]


def _parent_cpu() -> float:
    t = os.times()
    return t.user + t.system


def _job(voc: str, dest: str, parts) -> str:
    for part in parts:
        os.makedirs(os.path.join(dest, part))
        for f in os.listdir(os.path.join(voc, part)):
            os.link(os.path.join(voc, part, f), os.path.join(dest, part, f))
    return dest


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.plan", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--n", type=int, default=3000, help="images in the data set (default 3000)")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    ap.add_argument("--workers", type=int, default=default_workers())
    ap.add_argument("--cache", default=DEFAULT_CACHE)
    args = ap.parse_args(argv)

    from augd.engine import EngineOptions
    from augd.job.units import plan_job
    from augd.job.workers.pool import ProcessPool, chunked_map
    from augd.schema import load_pipeline

    voc = build_voc(build_dataset(args.n, 0, args.cache))
    spec = load_pipeline(os.path.join(os.path.dirname(__file__), os.pardir, "pipelines", "geometric-heavy.yaml"))
    with tempfile.TemporaryDirectory(prefix="augd-plan-") as tmp, ProcessPool(args.workers, EngineOptions()) as pool:
        plain = _job(voc, os.path.join(tmp, "plain"), ("JPEGImages",))
        boxes = _job(voc, os.path.join(tmp, "boxes"), ("JPEGImages", "Annotations"))
        while pool.ready_workers() < args.workers:   # warm: every worker up, as between the daemon's jobs
            if not pool.usable:
                raise SystemExit("the worker pool could not start")
            time.sleep(0.05)
        rows = {"plain": (plain, None), "here": (boxes, None), "workers": (boxes, chunked_map(pool))}
        figures = {name: {"wall": [], "cpu": []} for name in rows}
        for job, p in rows.values():   # the first of each: file system caches, imports
            plan_job(job, spec, None, 10 ** 9, p)
        for _ in range(args.rounds):
            for name, (job, p) in rows.items():
                c0, t0 = _parent_cpu(), time.perf_counter()
                plan = plan_job(job, spec, None, 10 ** 9, p)
                figures[name]["wall"].append(time.perf_counter() - t0)
                figures[name]["cpu"].append(_parent_cpu() - c0)
                assert len(plan.images) == args.n
        calls = pool.calls
    med = {name: {k: statistics.median(v) for k, v in f.items()} for name, f in figures.items()}
    print(f"bench.plan: {args.n} images, {args.rounds} rounds, {args.workers} workers "
          f"({calls} chunks read on them); medians")
    print(f"{'row':<10}{'wall s':>9}{'parent CPU s':>14}{'annotations s':>15}   rounds (wall)")
    for name, m in med.items():
        extra = "" if name == "plain" else f"{m['wall'] - med['plain']['wall']:.3f}"
        rounds = " ".join(f"{w:.3f}" for w in figures[name]["wall"])
        print(f"{name:<10}{m['wall']:>9.3f}{m['cpu']:>14.3f}{extra:>15}   {rounds}")
    print(f"workers / here, wall: {med['workers']['wall'] / med['here']['wall']:.3f}; annotations' share: "
          f"{(med['workers']['wall'] - med['plain']['wall']) / (med['here']['wall'] - med['plain']['wall']):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
