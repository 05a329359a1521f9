"""Where `--executor auto` should switch from threads to worker processes: the same `augd run` (whole process,
imports included) on threads and on processes, for jobs of several sizes, alternating, `--rounds` times.

    python -m bench.crossover                        # 100, 300, 1000 and 3000 images, seed and heavy (~10 min)
    python -m bench.crossover --sizes 300,1000 --chains heavy --rounds 3

Each row: the job's records (one per image: variants 1, no original), each executor's median wall seconds, and
processes / threads (below 1: processes are faster). The smallest size from which processes win at every
larger size is printed per chain: augd.defaults.AUTO_MIN_RECORDS should sit there. Figures only.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile

from bench.common import default_workers, header, machine, write_json
from bench.data import DEFAULT_CACHE
from bench.whole import WALL, _pipelines, _subreaper, job_folder, run_augd

EXECUTORS = ("threads", "processes")


def measure(sizes, chains, rounds, workers, cache, tmp=None, timeout=1800.0) -> dict:
    work = tempfile.mkdtemp(prefix="augd-crossover-", dir=tmp)
    rows = []
    try:
        pipelines = _pipelines(work, "exact")
        for n in sizes:
            job = os.path.join(work, f"n{n}", "images")
            job_folder(n, 0, cache, job)
            for chain in chains:
                walls: dict[str, list[float]] = {e: [] for e in EXECUTORS}
                for _ in range(rounds):
                    for e in EXECUTORS:
                        r = run_augd(job, pipelines[chain], os.path.join(work, "out"), executor=e,
                                     workers=workers, timeout=timeout, expect=n)
                        if "error" in r:
                            raise RuntimeError(f"{n} images, {chain}, {e}: {r['error']}")
                        walls[e].append(r[WALL])
                med = {e: statistics.median(w) for e, w in walls.items()}
                rows.append({"images": n, "chain": chain, "walls": walls, "median": med,
                             "ratio": round(med["processes"] / med["threads"], 3)})
                print(f"  {n:>6} {chain:<6} threads {med['threads']:7.2f} s  processes {med['processes']:7.2f} s  "
                      f"processes/threads {rows[-1]['ratio']:.3f}", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {"rows": rows, "crossover": {c: crossover([r for r in rows if r["chain"] == c]) for c in chains}}


def crossover(rows: list[dict]) -> int | None:
    """The smallest job size from which processes are faster at it and every larger size measured."""
    best = None
    for r in sorted(rows, key=lambda r: r["images"], reverse=True):
        if r["ratio"] >= 1:
            break
        best = r["images"]
    return best


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.crossover", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--sizes", default="100,300,1000,3000", help="job sizes in images (comma-separated)")
    ap.add_argument("--chains", default="seed,heavy", help="seed, heavy or both")
    ap.add_argument("--rounds", type=int, default=2, help="runs of each executor per size (alternating)")
    ap.add_argument("--workers", type=int, default=default_workers())
    ap.add_argument("--cache", default=DEFAULT_CACHE)
    ap.add_argument("--tmp", default=None)
    ap.add_argument("--json", default=None, help="write every figure to this JSON file")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    chains = [c.strip() for c in args.chains.split(",")]
    if bad := [c for c in chains if c not in ("seed", "heavy")]:
        ap.error(f"--chains: unknown {bad}; known: seed, heavy")
    _subreaper()
    result = {**header("python -m bench.crossover", argv), "machine": machine(), "workers": args.workers,
              **measure(sizes, chains, args.rounds, args.workers, args.cache, args.tmp)}
    print(f"\n{'images':>6}  {'chain':<6} {'threads s':>10} {'processes s':>12} {'proc/threads':>13}")
    for r in result["rows"]:
        print(f"{r['images']:>6}  {r['chain']:<6} {r['median']['threads']:>10.2f} {r['median']['processes']:>12.2f} "
              f"{r['ratio']:>13.3f}")
    print("\nprocesses faster from (images): " + json.dumps(result["crossover"]))
    if args.json:
        write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
