"""bench.box_ops's pipelines in process, one worker thread: CPU per image, which a shared machine moves far less
than the whole processes' wall time (issue 60, item 1).

    python -m bench.box_ops_cpu [--n 200] [--rounds 1] [--only NAMES] [--tf-threads 1]

The bench's VOC copy without its masks (bench.box_ops), one record per image, each pipeline through run_job
(threads, one worker) in this process, one engine for all; the process's CPU seconds (TensorFlow's threads
included) per image, and each pipeline's over the plain chain's in the same round; medians over rounds.
TensorFlow runs on one thread, as each worker process of the default run on 2 cores does (worker_engine), unless
AUGD_TF_THREADS or `--tf-threads` says otherwise. Figures only.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import tempfile


TF_THREADS_HELP = "TensorFlow's threads (0: its default, one per core; default: AUGD_TF_THREADS, else 1)"


def worker_engine(tf_threads: int | None = None):
    """An Engine whose TensorFlow runs on `tf_threads` threads; None: AUGD_TF_THREADS where set, else 1, as each
    worker process of the default run on 2 cores runs it (augd.job.workers.pool gives each its share of the
    cores). With TensorFlow's default (a thread per core) one worker thread pays ~0.3-1 ms of CPU an image more:
    its ops hop between threads, which no worker of the default run does."""
    from augd.engine import Engine, EngineOptions
    options = EngineOptions.from_env()
    if tf_threads is None:   # what the environment set (a blank AUGD_TF_THREADS sets nothing), else 1
        tf_threads = options.tf_threads if "tf_threads" in options.model_fields_set else 1
    return Engine(options.replace(tf_threads=tf_threads))


def cpu_ms(voc: str, ops: list, n: int, out: str, engine, colour: str | None = None) -> float:
    """One job of `ops` over the VOC folder through run_job in this process (one worker thread, one record an
    image): the process's CPU milliseconds an image."""
    from augd.schema import parse_pipeline
    doc = {"name": "box-ops", "seed": 60, "variants": 1, "keep_original": False,
           "output": {"format": "jpeg", "quality": 90}, "ops": ops, **({"colour": colour} if colour else {})}
    return job_cpu_ms(voc, parse_pipeline(json.dumps(doc)), n, out, engine)


def job_cpu_ms(job: str, spec, n: int, out: str, engine) -> float:
    """run_job of `spec` over `job` in this process (one worker thread, job name "p"): the process's CPU
    milliseconds for each of `n` images."""
    from augd.job import JobOptions, run_job
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    run_job(job, spec, out, JobOptions(name="p", workers=1, overwrite=True, executor="threads"), engine=engine)
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    return (r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime) / n * 1e3


def main(argv=None) -> int:
    from bench.box_ops import PIPELINES, _voc_boxes_only
    from bench.data import build_dataset, build_voc
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--only", default="", help="pipeline names, comma-separated (plain always runs)")
    ap.add_argument("--tf-threads", type=int, default=None, help=TF_THREADS_HELP)
    args = ap.parse_args(argv)
    names = ["plain", *([s.strip() for s in args.only.split(",") if s.strip()] or
                        [n for n in PIPELINES if n != "plain"])]
    engine = worker_engine(args.tf_threads)
    ms: dict[str, list[float]] = {n: [] for n in names}
    ratios: dict[str, list[float]] = {n: [] for n in names}
    with tempfile.TemporaryDirectory() as tmp:
        voc = _voc_boxes_only(build_voc(build_dataset(args.n)), os.path.join(tmp, "voc"))
        for _ in range(args.rounds):
            for name in names:
                ms[name].append(cpu_ms(voc, PIPELINES[name], args.n, os.path.join(tmp, "out"), engine))
            for name in names:
                ratios[name].append(ms[name][-1] / ms["plain"][-1])
    print(f"| pipeline ({args.n} photos, 1 thread, TensorFlow threads {engine.options.tf_threads or 'default'}) "
          f"| CPU ms an image (median of {args.rounds}) | / plain |\n"
          "|---|---|---|")
    for name in names:
        print(f"| {name} | {statistics.median(ms[name]):.2f} | {statistics.median(ratios[name]):.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
