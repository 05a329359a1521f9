"""Issue 17's rows and verdicts in one run: the floors, Albumentations, augd in process, and whole processes.

    python -m bench.whole                          # 3000 images: the verdict (~10 min on 2 cores)
    python -m bench.whole --n 300                  # a quick look
    python -m bench.whole --n 300 --only user_seed,run_seed_processes,run_seed_threads

Rows, in this order in each round (the pools and the subprocesses before TensorFlow loads in this process):
  warp colour crop crop_same albu_seed albu_heavy   bench.bench's process pools over the job's files (clock after
           warm-up)
  user_seed run_seed_default run_seed_processes run_seed_threads
  user_heavy run_heavy_default run_heavy_processes run_heavy_threads
      whole processes, wall clock from launch to exit, imports included: the user's script (bench.user_script:
      an Albumentations pool writing through tf.io.TFRecordWriter) and `augd run JOB --pipeline P --out O
      --overwrite --quiet --workers W --executor E`; the default rows without --executor and --workers (what a
      user types: `auto`, every usable core)
  scale    that `augd run` (--scale-chain, --scale-executor; default: the default run) under taskset: 1 core
           (with --workers 1 unless the default run), then 2 cores (rows scale_1core, scale_2cores)
  small    the demo job (augd/samples/demo, 20 images, seed-classifier), --executor auto and threads,
           alternating, 3 runs each after one untimed run (rows small_auto, small_threads)
  augd_seed augd_seed_fast augd_heavy augd_heavy_fast   run_job in this process, as bench.bench
CPU time of a whole process: its os.wait4 rusage (itself and every child it reaped), plus what it left behind
(this process is their subreaper). Figures only: nothing here asserts a timing.
"""
from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import yaml

from bench.common import REPO, default_workers, header, machine, write_json
from bench.data import DEFAULT_CACHE, build_dataset, dataset_files, link_tree

__all__ = ["ROWS", "TARGETS", "job_folder", "main", "run_augd", "timed", "write_pipelines"]

DEMO = os.path.join(REPO, "augd", "samples", "demo")
POOLS = ("warp", "colour", "crop", "crop_same", "albu_seed", "albu_heavy")
WHOLE = ("user_seed", "run_seed_default", "run_seed_processes", "run_seed_threads", "user_heavy", "run_heavy_default",
         "run_heavy_processes", "run_heavy_threads", "scale", "small", "det", "tf_import")
INPROC = ("augd_seed", "augd_seed_fast", "augd_heavy", "augd_heavy_fast")
ROWS = POOLS + WHOLE + INPROC
#: The base data set's largest size: a larger --n cycles it under new file names (hard links).
BASE_MAX = 1000
SMALL_RUNS = 3
IPS, WALL, BUSY = "images_per_second", "wall_seconds", "cores_busy"
#: (numerator, denominator or None, figure, bound, target, label): issue 17's targets.
TARGETS = (
    ("augd_seed_fast", "warp", IPS, ">=", 0.9, "augd seed, colour: fast / warp floor"),
    # issue 60's like-for-like: a chain that colours, then warps, cannot pass the colour floor (bench/README.md)
    ("augd_seed_fast", "colour", IPS, ">=", 0.9, "augd seed, colour: fast / colour floor"),
    ("augd_seed", "warp", IPS, ">=", 0.5, "augd seed, colour: exact / warp floor"),
    ("augd_heavy", "crop", IPS, ">=", 0.95, "augd heavy / crop floor"),
    ("augd_heavy_fast", "crop", IPS, ">=", 0.95, "augd heavy, colour: fast / crop floor"),
    # issue 60's like-for-like: the crop floor at augd's quality (the crop floor enlarges small windows)
    ("augd_heavy", "crop_same", IPS, ">=", 0.95, "augd heavy / crop floor at augd's decode scale"),
    ("augd_heavy_fast", "crop_same", IPS, ">=", 0.95, "augd heavy, colour: fast / crop floor, augd's scale"),
    ("augd_heavy", "albu_heavy", IPS, ">=", 1.3, "augd heavy / Albumentations heavy pool"),
    ("augd_heavy_fast", "albu_heavy", IPS, ">=", 1.3, "augd heavy, colour: fast / Albumentations heavy pool"),
    ("run_seed_default", "user_seed", IPS, ">=", 1.4, "augd run seed, the default run / user's script (whole)"),
    ("run_heavy_default", "user_heavy", IPS, ">=", 1.0, "augd run heavy, the default run / user's script"),
    ("run_heavy_default", "bound_heavy", IPS, ">=", 0.8, "augd run heavy, the default run / the heavy bound"),
    ("run_heavy_default", "bound_heavy_same", IPS, ">=", 0.8,
     "augd run heavy, the default run / the heavy bound, augd's scale"),
    ("run_seed_processes", "user_seed", IPS, ">=", 1.4, "augd run seed, processes / user's script (whole)"),
    ("run_seed_threads", "user_seed", IPS, ">=", 1.4, "augd run seed, threads / user's script (whole)"),
    ("run_heavy_processes", "user_heavy", IPS, ">=", 1.4, "augd run heavy, processes / user's script"),
    ("run_heavy_threads", "user_heavy", IPS, ">=", 1.4, "augd run heavy, threads / user's script"),
    ("scale_2cores", None, BUSY, ">=", 1.9, "scaling: cores busy on 2 cores (CPU s / wall s)"),
    ("scale_2cores", "scale_1core", IPS, ">=", 1.85, "scaling: 2 cores / 1 core (img/s)"),
    # issue 46's like-for-like: 1.85 is above the bound when one import runs before the work (bench/README.md)
    ("scale_2cores", "bound_scale", IPS, ">=", 0.9, "scaling: 2 cores / their bound (one import, then W halved)"),
    ("small_auto", "small_threads", WALL, "<=", 1.10, "demo job wall time, --executor auto / threads"),
    ("det_boxes", "det_plain", WALL, "<=", 1.10, "VOC boxes / plain job, wall (whole, processes)"),
)
CONTEXT = (
    ("crop", "albu_heavy", IPS, "crop floor / Albumentations heavy pool"),
    ("crop_same", "crop", IPS, "crop floor at augd's decode scale / crop floor"),
    ("user_seed", "albu_seed", IPS, "user's script seed (whole) / its pool (in process)"),
    ("user_heavy", "albu_heavy", IPS, "user's script heavy (whole) / its pool (in process)"),
    ("run_seed_processes", "run_seed_threads", IPS, "augd run seed, processes / threads"),
    ("run_heavy_processes", "run_heavy_threads", IPS, "augd run heavy, processes / threads"),
    ("bound_scale", "scale_1core", IPS, "scaling bound: (import + W) / (import + W / 2), W = 1 core's wall - import"),
    *((r, None, BUSY, f"cores busy: {r}") for r in WHOLE[:8] + ("scale_1core",)),
    ("bound_seed", "user_seed", IPS, "bound: n / (one TF import + n / warp floor), / user's script seed"),
    ("bound_heavy", "user_heavy", IPS, "bound: n / (one TF import + n / crop floor), / user's script heavy"),
    ("bound_heavy_same", "user_heavy", IPS, "bound at augd's decode scale / user's script heavy"),
    ("det_boxes", "det_plain", "cpu_seconds", "VOC boxes / plain job, CPU (whole, processes)"),
    ("det_masks", "det_plain", WALL, "VOC boxes + masks / plain job, wall (whole, processes)"),
    ("det_masks", "det_plain", "cpu_seconds", "VOC boxes + masks / plain job, CPU (whole, processes)"),
)
#: the detection rows' job folders: what each holds of the VOC copy (the same photos, the same relative paths)
DET_PARTS = {"det_plain": ("JPEGImages",), "det_boxes": ("JPEGImages", "Annotations"),
             "det_masks": ("JPEGImages", "Annotations", "SegmentationClass")}


def _augd_cmd() -> list[str]:  # the venv's console script, as a user runs it
    exe = os.path.join(os.path.dirname(sys.executable), "augd")
    return [exe] if os.path.exists(exe) else [sys.executable, "-m", "augd"]


def _kill_group(pgid: int, sig=signal.SIGKILL) -> bool:
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def _subreaper() -> bool:
    """Reap our orphaned descendants here, not in init (Linux PR_SET_CHILD_SUBREAPER): their CPU time counts."""
    try:
        import ctypes
        return ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


ORPHAN_GRACE = 10.0  # seconds what a run leaves behind may take to exit after it, before it is killed


def timed(cmd: list[str], *, timeout: float, logs: str, repo: str = REPO) -> dict:
    """Run `cmd` in its own session; wall clock from launch to exit, CPU time from os.wait4's rusage: the
    process and every child it reaped, plus (this process being a subreaper) any process of its session it left
    behind, reaped here after it. stdout and stderr go to `logs`.out/.err. `repo`: the checkout whose augd it runs
    (another one's for a before/after row)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [repo, os.environ.get("PYTHONPATH")])))
    with open(logs + ".out", "wb") as out, open(logs + ".err", "wb") as err:
        t0, launched = time.perf_counter(), time.time()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL, cwd=repo, env=env,
                                start_new_session=True)
    timer = threading.Timer(timeout, _kill_group, (proc.pid,))
    timer.start()
    cpu, left, status, wall = [0.0, 0.0], [], None, None
    try:
        while True:  # every child of the run's process group: the run itself, then what it left behind
            try:
                pid, st, ru = os.wait4(-proc.pid, 0)
            except ChildProcessError:
                break
            now = time.perf_counter()
            cpu[pid != proc.pid] += ru.ru_utime + ru.ru_stime
            if pid == proc.pid:
                status, wall, rss = st, now - t0, ru.ru_maxrss
                timer.cancel()
                timer = threading.Timer(ORPHAN_GRACE, _kill_group, (proc.pid,))
                timer.start()
            else:
                left.append(round(now - t0 - wall, 3) if wall is not None else 0.0)
    finally:
        timer.cancel()
    proc.returncode = rc = os.waitstatus_to_exitcode(status)
    total = cpu[0] + cpu[1]
    r = {"command": " ".join(cmd), "rc": rc, "launched": launched, WALL: round(wall, 3), "cpu_seconds": round(total, 3),
         BUSY: round(total / wall, 3), "max_rss_mb": round(rss / 1024, 1)}
    if left:  # e.g. multiprocessing's resource tracker, which exits when its pipe closes
        r["left_behind"] = {"processes": len(left), "cpu_seconds": round(cpu[1], 3), "exited_after_seconds": left}
    if _kill_group(proc.pid, 0):  # without a subreaper: something of its session runs on, its CPU not counted
        r["still_running_after_exit"] = _kill_group(proc.pid)
    if rc != 0:
        with open(logs + ".err", "rb") as fh:
            tail = [ln for ln in fh.read()[-4000:].decode("utf-8", "replace").strip().splitlines()
                    if not re.match(r"[IWE]\d{4} |WARNING: All log messages before absl", ln)]  # TF's log noise
        why = "SIGKILL (the --timeout, or out of memory)" if rc == -signal.SIGKILL else f"exit status {rc}"
        r["error"] = f"{why}: {tail[-1] if tail else '(no message on stderr)'}"
    return r


def _rate(r: dict, images: int) -> dict:
    r.update({} if "error" in r else {"images": images, IPS: round(images / r[WALL], 2)})
    return r


def run_augd(job: str, pipeline: str, out: str, *, executor: str | None, workers: int | None, timeout: float,
             cpus: list[int] | None = None, expect: int | None = None) -> dict:
    """`augd run` as a whole process (under taskset when `cpus`), checked against its manifest. `executor` or
    `workers` None: no such flag (the default run)."""
    cmd = (["taskset", "-c", ",".join(map(str, cpus))] if cpus else []) + _augd_cmd() + [
        "run", job, "--pipeline", pipeline, "--out", out, "--overwrite", "--quiet"]
    cmd += ["--executor", executor] if executor else []
    cmd += ["--workers", str(workers)] if workers else []
    try:
        r = timed(cmd, timeout=timeout, logs=out + "-log")
        if "error" in r:
            return r
        with open(os.path.join(out, os.path.basename(job.rstrip(os.sep)), "manifest.json"), encoding="utf-8") as fh:
            m = json.load(fh)
        written = m["inputs"]["written"]
        r["manifest"] = {"images_per_second": m["timing"]["images_per_second"], WALL: m["timing"]["wall_seconds"],
                         "records": m["records"]["written"], "graph_builds": m["graph"].get("builds"),
                         "executor": m.get("executor", m["graph"].get("executor")),
                         "choice": m["graph"].get("choice")}
        first = m["timing"].get("first_record_seconds")
        if first is not None:   # the manifest's start (to the ms) + its first record, from this process's launch
            started = datetime.datetime.fromisoformat(m["created"]).timestamp()
            r["first_record_seconds"] = round(started + first - r["launched"], 3)
        if expect is not None and written != expect:
            r["error"] = f"wrote {written} of {expect} images ({m['inputs']['rejected']} rejected)"
        return _rate(r, written)
    except (OSError, KeyError, ValueError) as exc:
        return {"command": " ".join(cmd), "error": f"{type(exc).__name__}: {exc}"}
    finally:
        shutil.rmtree(out, ignore_errors=True)


def run_user(job: str, chain: str, work: str, *, workers: int, seed: int, timeout: float, expect: int) -> dict:
    out = os.path.join(work, f"user-{chain}.tfrecord")
    cmd = [sys.executable, "-m", "bench.user_script", job, "--chain", chain, "--out", out, "--workers",
           str(workers), "--seed", str(seed)]
    try:
        r = timed(cmd, timeout=timeout, logs=out)
        if "error" in r:
            return r
        with open(out + ".out", encoding="utf-8") as fh:
            said = json.loads(fh.read().strip().splitlines()[-1])
        r["script"] = said
        if said["records"] != expect:
            r["error"] = f"wrote {said['records']} of {expect} records"
        return _rate(r, said["records"])
    except (OSError, KeyError, ValueError, IndexError) as exc:
        return {"command": " ".join(cmd), "error": f"{type(exc).__name__}: {exc}"}
    finally:
        if os.path.exists(out):
            os.unlink(out)


def _small(work: str, timeout: float) -> dict:
    """The demo, --executor auto and threads alternating, SMALL_RUNS each after one untimed run."""
    out = os.path.join(work, "small")
    run = lambda e: run_augd(DEMO, "seed-classifier", out, executor=e, workers=None, timeout=timeout)  # noqa: E731
    first = run("threads")
    if "error" in first:
        return {"small_auto": first, "small_threads": first}
    runs: dict[str, list[dict]] = {"auto": [], "threads": []}
    for _ in range(SMALL_RUNS):
        for e in ("auto", "threads"):
            runs[e].append(run(e))
    rows = {}
    for e, rs in runs.items():
        if bad := [r for r in rs if "error" in r]:
            rows[f"small_{e}"] = bad[0]
            continue
        walls = [r[WALL] for r in rs]
        wall = statistics.median(walls)
        rows[f"small_{e}"] = {"images": rs[0]["images"], WALL: wall, IPS: round(rs[0]["images"] / wall, 2),
                              "runs_wall_seconds": walls, BUSY: statistics.median(r[BUSY] for r in rs),
                              "executor_in_manifest": [r["manifest"]["executor"] for r in rs],
                              "command": rs[0]["command"]}
    return rows


def write_pipelines(work: str, colour: str) -> dict[str, str]:
    """chain -> a pipeline YAML written from bench.augd_runs' spec (variants 1, keep_original false, q90)."""
    from bench.augd_runs import spec_doc
    paths = {}
    for chain in ("seed", "heavy"):
        name = chain + ("_fast" if colour == "fast" else "")
        doc = spec_doc(name)
        paths[chain] = os.path.join(work, f"{name}.yaml")
        with open(paths[chain], "w", encoding="utf-8") as fh:
            yaml.safe_dump(doc, fh, sort_keys=False)
    return paths


def job_folder(n: int, seed: int, cache: str, dest: str) -> list[str]:
    """`n` images at `dest`: the data set of min(n, BASE_MAX) images, cycled under new names (hard links)."""
    base = build_dataset(min(n, BASE_MAX), seed, cache)
    files = dataset_files(base)
    for k in range(-(-n // len(files))):
        link_tree(base, dest, files[:n - k * len(files)], prefix=f"c{k}-")
    return dataset_files(dest)


def _detection(work: str, pipeline: str, args) -> dict:
    """The heavy chain on the VOC copy of --n photos (bench.data.build_voc), whole `augd run` on processes: the
    photos alone, with their boxes, and with boxes and semantic masks (issue 16's bounds, issue 28's item 3)."""
    from bench.data import build_voc
    voc = build_voc(build_dataset(args.n, args.seed, args.cache), args.seed)
    rows = {}
    for name, parts in DET_PARTS.items():
        job = os.path.join(work, "det", name)
        if not os.path.isdir(job):   # hard links under the same names: an XML names its image
            for part in parts:
                os.makedirs(os.path.join(job, part))
                for f in os.listdir(os.path.join(voc, part)):
                    os.link(os.path.join(voc, part, f), os.path.join(job, part, f))
        rows[name] = run_augd(job, pipeline, os.path.join(work, "out"), executor="processes", workers=args.workers,
                              timeout=args.timeout, expect=args.n)
    return rows


def _one_round(selected, job, files, work, pipelines, args) -> dict:
    from bench.bench import one_round as bench_round
    figures = bench_round([s for s in selected if s in POOLS], job, files, args.workers, work, args.seed)
    cpus = sorted(os.sched_getaffinity(0))
    for name in (s for s in WHOLE if s in selected):
        print(f"  {name} ...", file=sys.stderr, flush=True)
        kw = {"timeout": args.timeout}
        if name.startswith("user_"):
            got = {name: run_user(job, name[5:], work, workers=args.workers, seed=args.seed, expect=len(files), **kw)}
        elif name.startswith("run_"):
            _, chain, executor = name.split("_")
            default = executor == "default"
            got = {name: run_augd(job, pipelines[chain], os.path.join(work, "out"),
                                  executor=None if default else executor, workers=None if default else args.workers,
                                  expect=len(files), **kw)}
        elif name == "scale":
            if len(cpus) < 2:
                err = {"error": f"needs 2 CPUs, this process may use {cpus}"}
                got = {"scale_1core": err, "scale_2cores": err}
            else:
                default = args.scale_executor == "default"
                got = {f"scale_{k}core{'s' if k > 1 else ''}": run_augd(
                    job, pipelines[args.scale_chain], os.path.join(work, "out"),
                    executor=None if default else args.scale_executor, workers=None if default else k,
                    cpus=cpus[:k], expect=len(files), **kw) for k in (1, 2)}
        elif name == "det":
            got = _detection(work, pipelines["heavy"], args)
        elif name == "tf_import":   # what every process that runs a TensorFlow graph pays before its first image
            got = {name: _rate(timed([sys.executable, "-c", "import tensorflow"], timeout=args.timeout,
                                     logs=os.path.join(work, "tf-import")), len(files))}
        else:
            got = _small(work, args.timeout)
        for k, r in got.items():
            print(f"  {k:<20} " + (f"ERROR: {r['error']}" if "error" in r else f"{r[IPS]:>8.1f} img/s, {r[WALL]} s, "
                                   f"{r[BUSY]:.2f} cores busy"), file=sys.stderr, flush=True)
        figures.update(got)
    figures.update(bench_round([s for s in selected if s in INPROC], job, files, args.workers, work, args.seed))
    _bounds(figures, len(files))
    return figures


def _bounds(figures: dict, n: int) -> None:
    """The most a whole process that runs its graph in TensorFlow can reach: one TensorFlow import on the critical
    path (never less: no image before it), then the images at the codec floor's rate (the pools: all cores)."""
    tf = figures.get("tf_import", {})
    for bound, floor in (("seed", "warp"), ("heavy", "crop"), ("heavy_same", "crop_same")):
        if WALL in tf and IPS in figures.get(floor, {}):
            figures[f"bound_{bound}"] = {IPS: round(n / (tf[WALL] + n / figures[floor][IPS]), 2)}
    # 2 cores against 1: the import runs on one core whatever the count (each process imports on its own), only
    # the rest of the 1-core run can halve
    one = figures.get("scale_1core", {})
    if WALL in tf and WALL in one and one[WALL] > tf[WALL]:
        figures["bound_scale"] = {IPS: round(n / (tf[WALL] + (one[WALL] - tf[WALL]) / 2), 2)}


def _value(rnd: dict, a: str, b: str | None, key: str) -> float | str:
    """The ratio a/b of figure `key` in one round (or a's figure when b is None), or why there is none."""
    for name in (a, b):
        if name is not None and name not in rnd:
            return f"{name} not run"
    for name in (a, b):
        if name is not None and "error" in rnd[name]:
            return f"{name} failed"
    return rnd[a][key] if b is None else rnd[a][key] / rnd[b][key]


def summarize(rounds: list[dict]) -> dict:
    names = [n for n in dict.fromkeys(k for r in rounds for k in r)]
    rates = {n: [r[n][IPS] for r in rounds if n in r and IPS in r[n]] for n in names}
    out = {IPS: {n: round(statistics.median(v), 2) if v else None for n, v in rates.items()},
           "errors": {n: r[n]["error"] for r in rounds for n in r if "error" in r[n]}, "targets": [], "context": []}
    for key, table in (("targets", TARGETS), ("context", [(a, b, f, None, None, lbl) for a, b, f, lbl in CONTEXT])):
        for a, b, fig, bound, target, label in table:
            vals = [_value(r, a, b, fig) for r in rounds]
            nums = [v for v in vals if not isinstance(v, str)]
            if not nums and all(v.endswith("not run") for v in vals):
                continue
            row = {"ratio": label, "figure": fig, "target": target, "bound": bound,
                   "rounds": [v if isinstance(v, str) else round(v, 3) for v in vals]}
            if not nums:
                row.update(value=None, verdict=f"n/a ({vals[-1]})")
            else:
                v = statistics.median(nums)
                met = target is None or (v >= target if bound == ">=" else v <= target)
                row.update(value=round(v, 3), verdict="info" if target is None else ("met" if met else "NOT met"))
            out[key].append(row)
    return out


def _print(summary: dict, rounds: list[dict], labels: dict, out=sys.stdout) -> None:
    p = lambda *a: print(*a, file=out)  # noqa: E731
    p(f"\n{'row':<62} {'img/s':>8} {'wall s':>8} {'busy':>5}  runs")
    p("-" * 100)
    last = rounds[-1]
    for name, v in summary[IPS].items():
        r = last.get(name, {})
        if "error" in r:
            p(f"{labels.get(name, name):<62} ERROR: {r['error']}")
            continue
        allr = [x[name][IPS] for x in rounds if IPS in x.get(name, {})]
        runs = " ".join(f"{x:.0f}" for x in allr) if len(allr) > 1 else ""
        busy = f"{r[BUSY]:>5.2f}" if BUSY in r and name not in POOLS + INPROC else " " * 5
        p(f"{labels.get(name, name):<62} {v:>8.1f} {r.get(WALL, 0):>8.2f} {busy}  {runs}")
        if "manifest" in r:
            m = r["manifest"]
            ex = m["executor"] or "(not in the manifest)"
            p(f"    in-job {m['images_per_second']} img/s over {m[WALL]} s, executor {ex}, graph builds "
              f"{m['graph_builds']}, max RSS {r['max_rss_mb']} MB"
              + (f", first record {r['first_record_seconds']} s after launch" if "first_record_seconds" in r else "")
              + (f", left {r['left_behind']}" if r.get("left_behind") else "")
              + (", PROCESSES STILL RUNNING after its exit (killed; CPU not counted)"
                 if r.get("still_running_after_exit") else ""))
            if (m.get("choice") or {}).get("requested") == "auto":
                p(f"    auto picked {m['choice']['executor']} x{m['choice']['workers']}: {m['choice']['why']}")
        if "runs_wall_seconds" in r:
            p(f"    wall s per run {r['runs_wall_seconds']}, executor in the manifest {r['executor_in_manifest']}")
    p(f"\n{'ratio (median over rounds)':<62} {'value':>8}  {'target':>7}  verdict")
    p("-" * 100)
    for row in summary["targets"] + summary["context"]:
        tgt = f"{row['bound']} {row['target']}" if row["target"] is not None else ""
        val = f"{row['value']:>8.3f}" if row["value"] is not None else f"{'-':>8}"
        p(f"{row['ratio']:<62} {val}  {tgt:>7}  {row['verdict']}")


def main(argv=None) -> int:
    from bench.bench import LABELS
    ap = argparse.ArgumentParser(prog="python -m bench.whole", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--n", type=int, default=int(os.environ.get("BENCH_WHOLE_N", 3000)),
                    help="images in the job (default 3000, the verdict's size; env BENCH_WHOLE_N)")
    ap.add_argument("--only", default=",".join(ROWS), help=f"comma-separated subset of: {', '.join(ROWS)}")
    ap.add_argument("--repeat", type=int, default=1, help="rounds; figures and ratios are medians over rounds")
    ap.add_argument("--workers", type=int, default=default_workers(),
                    help="pool processes and augd workers (default: the CPUs this process may use)")
    ap.add_argument("--colour", choices=("exact", "fast"), default="exact",
                    help="colour mode of the whole-process augd runs (default exact: the seed pipeline's own)")
    ap.add_argument("--scale-chain", choices=("seed", "heavy"), default="seed")
    ap.add_argument("--scale-executor", choices=("default", "processes", "threads", "auto"), default="default",
                    help="the scale rows' executor (default: none given, nor --workers: the default run)")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds one subprocess may run (default 1800)")
    ap.add_argument("--seed", type=int, default=0, help="data set seed (default 0)")
    ap.add_argument("--cache", default=DEFAULT_CACHE, help="data set cache folder (default bench/.data)")
    ap.add_argument("--tmp", default=None, help="folder for the job copy and outputs (default: system temp)")
    ap.add_argument("--json", default=None, help="write every figure to this JSON file")
    args = ap.parse_args(argv)
    selected = [s.strip() for s in args.only.split(",") if s.strip()]
    if unknown := [s for s in selected if s not in ROWS]:
        ap.error(f"--only: unknown row(s) {', '.join(unknown)}; known: {', '.join(ROWS)}")
    if missing := [m for m in ("skimage", "albumentations") if importlib.util.find_spec(m) is None]:
        ap.error(f"missing {', '.join(missing)}: install the bench extra (pip install -e '.[bench]')")
    labels = {**LABELS, **{f"user_{c}": f"user's script, {c} chain (whole process)" for c in ("seed", "heavy")},
              **{f"run_{c}_{e}": f"augd run, {c} chain, --executor {e} (whole process)" for c in ("seed", "heavy")
                 for e in ("processes", "threads")},
              **{f"run_{c}_default": f"augd run, {c} chain, the default run (no --executor, --workers)"
                 for c in ("seed", "heavy")},
              "scale_1core": f"augd run {args.scale_chain} {args.scale_executor}, taskset 1 core",
              "scale_2cores": f"augd run {args.scale_chain} {args.scale_executor}, taskset 2 cores",
              "bound_scale": "bound, 2 cores: n / (one TF import + (1 core's wall - import) / 2)",
              "small_auto": "demo job (20 images), --executor auto, median of 3",
              "small_threads": "demo job (20 images), --executor threads, median of 3",
              "tf_import": "python -c 'import tensorflow' (whole process; IPS: n images / its wall)",
              "bound_seed": "bound, seed: n / (one TF import + n / warp floor)",
              "bound_heavy": "bound, heavy: n / (one TF import + n / crop floor)",
              "bound_heavy_same": "bound, heavy: n / (TF import + n / crop floor, augd's scale)",
              **{r: f"augd run heavy on the VOC copy: {' + '.join(p)} (whole, processes)" for r, p in DET_PARTS.items()}}
    reaper = _subreaper()
    work = tempfile.mkdtemp(prefix="augd-whole-", dir=args.tmp)
    try:
        job = os.path.join(work, "images")
        files = job_folder(args.n, args.seed, args.cache, job)
        pipelines = write_pipelines(work, args.colour)
        print(f"job: {len(files)} images in {job}; pipelines {pipelines}", file=sys.stderr)
        result = {**header("python -m bench.whole", argv), "machine": machine(), "subreaper": reaper,
                  "images": len(files), "workers": args.workers,
                  "colour": args.colour, "rounds": []}
        for i in range(args.repeat):
            print(f"round {i + 1}/{args.repeat}", file=sys.stderr, flush=True)
            result["rounds"].append(_one_round(selected, job, files, work, pipelines, args))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result["summary"] = summarize(result["rounds"])
    mach, load = result["machine"], " ".join(f"{x:.2f}" for x in result["machine"]["load_average_at_start"] or ())
    print(f"\nmachine: {mach['cpu_count']} cpus ({mach['cpu_model']}), load average at start {load}, augd "
          f"{mach['augd_commit']}; "
          f"{len(files)} images, workers {args.workers}, augd run colour {args.colour}, {args.repeat} round(s)")
    _print(result["summary"], result["rounds"], labels)
    print("\n" + json.dumps({k: result["summary"][k] for k in (IPS, "targets", "errors")}))
    if args.json:
        write_json(args.json, result)
        print(f"\nfigures written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
