"""Does the Dask executor earn its keep? `augd run --executor dask` against Beam on Dask (`--executor beam --
--runner=DaskRunner`), what a user with a Dask cluster runs instead, on the same running cluster; the host's
own executor (`processes`) and `dask` with a local cluster of its own started per job for context. Whole
processes, alternating, `--rounds` times (issue 45).

    python -m bench.dask                       # 1000 images, the heavy chain with `colour: fast`, 2 workers
    python -m bench.dask --n 3000 --rounds 3 --chain seed

The clusters: for each row that runs on one, a dask.distributed LocalCluster of `--workers` single-threaded worker
processes, started here and warmed by a small untimed job (its workers import TensorFlow once, with that row's
engine settings, which cannot change in a process afterwards). Each
row's wall seconds from launch to exit (bench.whole.timed), img/s over the images written, and each run's
bytes checked against the first run's (processes, with the default rows). Figures only: no timing is asserted anywhere.
"""
from __future__ import annotations

import argparse
import contextlib
import filecmp
import os
import shutil
import statistics
import sys
import tempfile

from bench.common import header, machine, write_json
from bench.data import DEFAULT_CACHE
from bench.whole import WALL, _augd_cmd, _subreaper, job_folder, timed, write_pipelines

ROWS = ("processes", "dask_cluster", "beam_dask", "dask_local")
ON_CLUSTER = ("dask_cluster", "beam_dask")


def _cmd(row: str, job: str, pipeline: str, out: str, workers: int, address: str | None) -> list[str]:
    base = _augd_cmd() + ["run", job, "--pipeline", pipeline, "--out", out, "--overwrite", "--quiet",
                          "--workers", str(workers)]
    return base + {
        "processes": ["--executor", "processes"],
        "dask_cluster": ["--executor", "dask", "--", "--scheduler", address],
        "beam_dask": ["--executor", "beam", "--", "--runner=DaskRunner", f"--dask_client_address={address}",
                      f"--dask_npartitions={4 * workers}"],
        "dask_local": ["--executor", "dask"],
    }[row]


def _shards(out: str) -> dict[str, str]:
    job = os.path.join(out, os.listdir(out)[0])
    return {f: os.path.join(job, f) for f in sorted(os.listdir(job)) if ".tfrecord" in f}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1000, help="images in the job (default 1000)")
    ap.add_argument("--chain", choices=("seed", "heavy"), default="heavy")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--rows", default=",".join(ROWS), help=f"any of {','.join(ROWS)}")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    rows = [r for r in args.rows.split(",") if r]
    import distributed
    _subreaper()
    work = tempfile.mkdtemp(prefix="augd-bench-dask-")
    saved = dict(os.environ)
    try:
        job = os.path.join(work, "images")
        job_folder(args.n, 0, DEFAULT_CACHE, job)
        small = os.path.join(work, "small")
        job_folder(20, 1, DEFAULT_CACHE, small)
        pipeline = write_pipelines(work, "fast")[args.chain]
        with contextlib.ExitStack() as stack:
            address = {}
            for row in rows:   # a cluster of its own for each row that runs on one, warmed by a small job (its
                if row in ON_CLUSTER:   # workers import TensorFlow once, with that row's engine settings)
                    cluster = stack.enter_context(distributed.LocalCluster(
                        n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=None,
                        scheduler_port=0, host="127.0.0.1"))
                    os.environ.clear()
                    os.environ.update(saved)   # distributed's MALLOC_TRIM_THRESHOLD_ is for its workers only
                    address[row] = cluster.scheduler_address
                timed(_cmd(row, small, pipeline, os.path.join(work, "warm"), args.workers, address.get(row)),
                      timeout=900, logs=os.path.join(work, f"warm-{row}"))
            print(f"bench.dask: {args.n} images, chain {args.chain}, {args.workers} workers, clusters {address}")
            results: dict[str, list[dict]] = {r: [] for r in rows}
            reference = None
            for k in range(args.rounds):
                for row in (rows if k % 2 == 0 else rows[::-1]):
                    out = os.path.join(work, f"out-{row}")
                    shutil.rmtree(out, ignore_errors=True)
                    r = timed(_cmd(row, job, pipeline, out, args.workers, address.get(row)), timeout=3600,
                              logs=os.path.join(work, f"log-{row}-{k}"))
                    if r["rc"] == 0:
                        shards = _shards(out)
                        if reference is None:
                            os.makedirs(os.path.join(work, "ref"), exist_ok=True)
                            reference = {f: os.path.join(work, "ref", f) for f in shards}
                            for f, p in shards.items():
                                shutil.copyfile(p, reference[f])
                        same = shards.keys() == reference.keys() and all(
                            filecmp.cmp(p, reference[f], shallow=False) for f, p in shards.items())
                        r["same_bytes"] = same
                    results[row].append(r)
                    print(f"  round {k + 1} {row:<14} {r.get(WALL, float('nan')):8.2f} s  "
                          f"{r.get('cores_busy', float('nan')):.2f} cores busy  "
                          f"{'same bytes' if r.get('same_bytes') else r.get('error', 'DIFFERENT BYTES')}")
    finally:
        os.environ.clear()
        os.environ.update(saved)
        shutil.rmtree(work, ignore_errors=True)
    summary = {**header("bench.dask", argv), "machine": machine(), "n": args.n, "chain": args.chain,
               "workers": args.workers, "rows": {}}
    print(f"\n{'row':<16}{'wall s':>10}{'img/s':>10}{'/ beam_dask':>13}  runs")
    walls = {r: [x[WALL] for x in results[r] if x.get("rc") == 0] for r in rows}
    base = statistics.median(walls["beam_dask"]) if walls.get("beam_dask") else None
    for r in rows:
        if not walls[r]:
            print(f"{r:<16}{'failed':>10}  {results[r][-1].get('error')}")
            continue
        w = statistics.median(walls[r])
        speed = base / w if base else float("nan")
        summary["rows"][r] = {WALL: w, "images_per_second": round(args.n / w, 2), "vs_beam_dask": round(speed, 3),
                              "runs": walls[r], "same_bytes": all(x.get("same_bytes") for x in results[r])}
        print(f"{r:<16}{w:>10.2f}{args.n / w:>10.1f}{speed:>13.3f}  {' '.join(f'{x:.2f}' for x in walls[r])}")
    if args.json:
        write_json(args.json, summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
