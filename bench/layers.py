"""Where a job's time goes beyond its graph: the same images through three layers, in one process.

    python -m bench.layers                         # heavy chain, colour: fast, 1000 images, 3 rounds
    python -m bench.layers --chain seed_fast --rounds 5

  graph    the job's compiled graph: every image's bytes read beforehand, then batches of 16 through
           `Compiled.process_many` (which plans each image), one thread per worker (the engine's ceiling)
  images   `augd.job.process_images`: the same, plus the rest of the per-image Python a job does (read and
           re-check the file, hash the source and the output, build the tf.train.Example)
  job      `augd.job.run_job` on the folder: plus the scan, the compile and first call, the shard writer,
           fsync and commit; once per executor of --executor (threads: this process' thread pool over its
           graph; processes: a warm pool of worker processes kept across the rounds, as the daemon keeps one,
           each worker with its own graph per job; a cold pool's start-up is bench.whole's to measure)

For each: img/s, CPU ms per image and the cores kept busy (CPU time / wall time; CPU time of this process and
of its children, so a processes job counts its workers). The rounds are interleaved;
medians are printed. Figures only: on a shared machine, compare layers within one run.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time

from bench.augd_runs import make_spec
from bench.bench import AUGD
from bench.common import default_workers
from bench.data import DEFAULT_CACHE, build_dataset, dataset_files, link_tree

__all__ = ["main"]

BATCH = 16


def _live_children_cpu() -> float:
    """CPU seconds of this process' running children (a warm pool's workers), from /proc (0 where there is none)."""
    tick, total = os.sysconf("SC_CLK_TCK"), 0.0
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return 0.0
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/children") as fh:
                kids = fh.read().split()
        except OSError:
            continue
        for pid in kids:
            try:
                with open(f"/proc/{pid}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += (int(fields[11]) + int(fields[12])) / tick   # utime, stime
    return total


def _cpu() -> float:
    """CPU seconds of this process and of its children, running (a warm pool's workers) or reaped."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system + _live_children_cpu()


def _timed(fn) -> dict:
    c0, t0 = _cpu(), time.perf_counter()
    n = fn()
    wall, cpu = time.perf_counter() - t0, _cpu() - c0
    return {"images_per_second": n / wall, "cpu_ms_per_image": cpu / n * 1e3, "cores_busy": cpu / wall}


def _threads(work, n_items: int, workers: int) -> int:
    """Run work(lo, hi) over contiguous slices of range(n_items), one thread each."""
    step = -(-n_items // workers)
    threads = [threading.Thread(target=work, args=(lo, min(lo + step, n_items))) for lo in range(0, n_items, step)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return n_items


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.layers", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--chain", choices=[n.removeprefix("augd_") for n in AUGD], default="heavy_fast",
                    help="one of the bench's augd chains (default heavy_fast)")
    ap.add_argument("--n", type=int, default=1000, help="images in the data set (default 1000)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    ap.add_argument("--workers", type=int, default=default_workers())
    ap.add_argument("--cache", default=DEFAULT_CACHE)
    ap.add_argument("--executor", default="threads,processes",
                    help="the job layer's executors, comma-separated: threads, processes (default both)")
    args = ap.parse_args(argv)
    executors = [e.strip() for e in args.executor.split(",") if e.strip()]
    if not executors or any(e not in ("threads", "processes") for e in executors):
        ap.error(f"--executor {args.executor!r}: allowed: threads, processes, or both joined by a comma")

    from augd.engine import Engine, EngineOptions
    from augd.io import read_bytes, scan_job
    from augd.job import JobOptions, process_images, run_job
    from augd.job.workers.pool import ProcessPool

    data_dir = build_dataset(args.n, 0, args.cache)
    spec = make_spec(args.chain)
    images = scan_job(data_dir).images
    engine = Engine(EngineOptions.from_env())
    compiled = engine.compile(spec)
    items = [(read_bytes(i), i.relpath, 1, i.header) for i in images]
    tmp = tempfile.mkdtemp(prefix="augd-layers-")
    pool = ProcessPool(args.workers, engine.options) if "processes" in executors else None
    try:
        job_dir = os.path.join(tmp, "in")
        link_tree(data_dir, job_dir, dataset_files(data_dir))

        def graph_only(lo, hi):
            for k in range(lo, hi, BATCH):
                compiled.process_many(items[k:min(k + BATCH, hi)])

        def with_python(lo, hi):
            for k in range(lo, hi, BATCH):
                process_images(compiled, spec, images[k:min(k + BATCH, hi)])

        def job(executor):
            def run():
                run_job(job_dir, spec, os.path.join(tmp, "out"), JobOptions(
                    name="layers", workers=args.workers, overwrite=True, executor=executor), engine=engine,
                    pool=pool if executor == "processes" else None)
                return len(images)
            return run

        layers = {"graph": lambda: _threads(graph_only, len(images), args.workers),
                  "images": lambda: _threads(with_python, len(images), args.workers),
                  **{f"job/{e}": job(e) for e in executors}}
        graph_only(0, min(2 * BATCH, len(images)))  # the first call's one-off instantiation
        for e in executors:                          # and the process's first job of each kind
            job(e)()
        figures: dict = {name: [] for name in layers}
        for r in range(args.rounds):
            for name, fn in layers.items():
                figures[name].append(_timed(fn))
            print(f"round {r + 1}/{args.rounds}: " + ", ".join(
                f"{n} {f[-1]['images_per_second']:.0f}" for n, f in figures.items()), file=sys.stderr, flush=True)
    finally:
        if pool is not None:
            pool.close()
        compiled.close()
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"\n{args.chain}, {len(images)} images, {args.workers} workers, medians of {args.rounds} rounds")
    print(f"{'layer':<14} {'img/s':>8} {'CPU ms/img':>11} {'cores busy':>11} {'vs graph':>9}")
    base = statistics.median(f["images_per_second"] for f in figures["graph"])
    for name, runs in figures.items():
        med = {k: statistics.median(f[k] for f in runs) for k in runs[0]}
        print(f"{name:<14} {med['images_per_second']:>8.1f} {med['cpu_ms_per_image']:>11.2f} "
              f"{med['cores_busy']:>11.2f} {med['images_per_second'] / base:>9.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
