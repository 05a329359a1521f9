"""Where the seed chain's time goes beyond the warp floor (issue 60, item 2), in process, one worker thread.

    python -m bench.seed_profile [--n 300] [--colour fast|exact] [--rounds 2] [--tf-threads 1]

The bench's photos (bench/data.py); CPU per image: the warp floor's steps and the colour floor's (the warp floor
plus cv2.mean, one cv2.transform colour matrix and a cv2.flip: the seed chain's other passes done by OpenCV), then
augd's seed chain (`variants: 1`, `keep_original: false`) through run_job with one thread: the process's CPU, the
graph's stages (the manifest's stage_seconds: wall, so under load they include waits) and the thread CPU of the
NumPy run's parts (augd.engine.chain's kernels, wrapped here). TensorFlow runs on one thread, as each worker of
the default run on 2 cores does (augd.job.workers.pool gives each its share of the cores), unless AUGD_TF_THREADS
or `--tf-threads` says otherwise. `--tf-threads 0` leaves TensorFlow's default (a thread per core), which costs this
one worker thread more CPU an image: its ops hop between threads. Figures only.
"""
from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import shutil
import tempfile
import time

import cv2
import numpy as np


def _floors(files) -> dict:
    rng = np.random.default_rng(0)
    m3 = np.array([[0.9, 0.1, 0.0, 5], [0.05, 0.9, 0.05, -3], [0.0, 0.1, 0.95, 2]], np.float32)
    t: dict = collections.defaultdict(float)
    for f in files:
        c0 = time.thread_time()
        with open(f, "rb") as fh:
            img = cv2.imdecode(np.frombuffer(fh.read(), np.uint8), cv2.IMREAD_COLOR)
        c1 = time.thread_time()
        cv2.mean(img)
        img = cv2.transform(img, m3)
        c2 = time.thread_time()
        h, w = img.shape[:2]
        m = cv2.getRotationMatrix2D((w / 2, h / 2), float(rng.uniform(-10, 10)), 1.0)
        out = cv2.warpAffine(img, m, (w, h), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT)
        c3 = time.thread_time()
        out = cv2.flip(out, 1)
        c4 = time.thread_time()
        cv2.imencode(".jpg", out, [cv2.IMWRITE_JPEG_QUALITY, 90])
        c5 = time.thread_time()
        for k, v in zip(("decode", "colour", "warp", "flip", "encode"), (c1 - c0, c2 - c1, c3 - c2, c4 - c3, c5 - c4)):
            t[k] += v
    return {k: v / len(files) * 1e3 for k, v in t.items()}


def main(argv=None) -> int:
    from bench.box_ops_cpu import TF_THREADS_HELP, job_cpu_ms, worker_engine
    from bench.data import build_dataset
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--colour", choices=("fast", "exact"), default="fast")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--tf-threads", type=int, default=None, help=TF_THREADS_HELP)
    args = ap.parse_args(argv)
    files = sorted(glob.glob(os.path.join(build_dataset(max(args.n, 200)), "*", "*")))[:args.n]
    cv2.setNumThreads(1)
    f = _floors(files)
    warp = f["decode"] + f["warp"] + f["encode"]
    print("floors, CPU ms an image: " + ", ".join(f"{k} {v:.2f}" for k, v in f.items())
          + f"; warp floor {warp:.2f}, colour floor {sum(f.values()):.2f}, the same with the flip in the warp's matrix"
          f" (bench.workloads' colour pool) {sum(f.values()) - f['flip']:.2f}")

    from augd.engine import chain
    from augd.schema import parse_pipeline
    parts: dict = collections.defaultdict(float)

    def wrap(name, fn):
        def timed(*a, **k):
            c = time.thread_time()
            try:
                return fn(*a, **k)
            finally:
                parts[name] += time.thread_time() - c
        return timed
    chain._geo_np = wrap("warp + flip", chain._geo_np)
    chain._colour_np = wrap("colour", chain._colour_np)
    chain._run_np = wrap("NumPy run", chain._run_np)
    here = os.path.dirname(os.path.abspath(chain.__file__))
    with open(os.path.join(here, "..", "pipelines", "seed-classifier.yaml"), encoding="utf-8") as fh:
        doc = fh.read().replace("variants: 4", "variants: 1").replace("keep_original: true", "keep_original: false")
    spec = parse_pipeline(doc.replace("colour: exact", f"colour: {args.colour}"), "seed")
    job, tiny, out = tempfile.mkdtemp(), tempfile.mkdtemp(), tempfile.mkdtemp()
    try:
        for k, p in enumerate(files):
            d = os.path.join(job, os.path.basename(os.path.dirname(p)))
            os.makedirs(d, exist_ok=True)
            os.link(p, os.path.join(d, os.path.basename(p)))
            # the same job over 16 x 16 photos: what augd does an image beside its pixels' work
            os.makedirs(os.path.join(tiny, os.path.basename(d)), exist_ok=True)
            cv2.imwrite(os.path.join(tiny, os.path.basename(d), f"{k:05d}.jpg"), np.full((16, 16, 3), k % 256, np.uint8))
        engine = worker_engine(args.tf_threads)
        threads = engine.options.tf_threads
        for _ in range(args.rounds):
            parts.clear()
            cpu = job_cpu_ms(job, spec, len(files), out, engine)
            with open(os.path.join(out, "p", "manifest.json"), encoding="utf-8") as fh:
                stages = json.load(fh)["timing"].get("stage_seconds", {})
            print(f"augd seed, colour: {args.colour}, TensorFlow threads {threads or 'default'}: CPU {cpu:.2f} ms an "
                  "image; stages (wall) "
                  + " ".join(f"{k} {v / len(files) * 1e3:.2f}" for k, v in stages.items()) + "; NumPy run (CPU) "
                  + " ".join(f"{k} {v / len(files) * 1e3:.2f}" for k, v in parts.items()))
            own = job_cpu_ms(tiny, spec, len(files), out, engine)
            floor = sum(f.values()) - f["flip"]
            print(f"  the same job over 16 x 16 photos (its plan, read, hashes, record, graph call, writer): {own:.2f} ms"
                  f" an image; colour floor (flip in the warp) {floor:.2f} + that = {floor + own:.2f}; augd / colour "
                  f"floor {floor / cpu:.3f}, / (colour floor + job's own) {(floor + own) / cpu:.3f} (CPU)")
    finally:
        for d in (job, tiny, out):
            shutil.rmtree(d)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
