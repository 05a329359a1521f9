"""No slow-down, no growth (issue 7 item 3): figures from long runs, no assertions.

    python -m bench.soak                  # flatness over 3000 images + memory over 100 jobs
    python -m bench.soak --quick          # the same in about a minute (600 images, 30 jobs)
    python -m bench.soak --only memory --via serve

flatness  one job of --images images (the data set cycled under new file names), per-image completion times
          from run_job's on_image callback: mean time per image in the first 10 % vs the last 10 %
          (target: last <= 1.10 x first), and the same for the in-graph time per image.
memory    --jobs consecutive small jobs in one process: resident memory (VmRSS) after job --baseline-job
          and after the last (target: <= +50 MB), and graph builds (target: at most 1 per job and process, one
          per worker process in all through a daemon, which keeps the pipeline's graph; one per job in process).
          --via serve drops job folders into a real `augd serve` subprocess and reads its /proc status;
          --via inproc calls run_job in this process; --via auto (default) tries serve, and says so when it
          falls back to in-process.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from bench.common import REPO, default_workers, write_json
from bench.data import DEFAULT_CACHE, build_dataset, dataset_files, link_tree


def rss_mb(pid: int | str = "self") -> float:
    with open(f"/proc/{pid}/status", encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    raise RuntimeError(f"no VmRSS in /proc/{pid}/status")


def children(pid: int) -> list[int]:
    """Live child processes of pid (the daemon's worker processes; Linux /proc)."""
    out = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            out.append(int(entry))
    return out


def tree_rss_mb(pid: int) -> float:
    """RSS of pid and its children: the daemon with its worker processes (shared pages counted in each)."""
    total = rss_mb(pid)
    for child in children(pid):
        try:
            total += rss_mb(child)
        except (OSError, RuntimeError):   # it ended meanwhile
            pass
    return total


# ---------------------------------------------------------------------------------------------- flatness

def flatness(data_dir: str, files: list[str], images: int, pipeline: str, workers: int, tmp: str) -> dict:
    from augd.job import JobOptions, JobWatch, run_job

    from bench.augd_runs import make_spec
    spec = make_spec(pipeline)
    work = tempfile.mkdtemp(prefix="augd-soak-flat-", dir=tmp)
    try:
        copies = -(-images // len(files))
        job = os.path.join(work, "in")
        link_tree(data_dir, job, files, copies=copies)
        # Trim to exactly `images`: drop the surplus names of the last copy.
        surplus = copies * len(files) - images
        for rel in files[len(files) - surplus:]:
            cls, name = os.path.split(rel)
            os.unlink(os.path.join(job, cls, f"r{copies - 1}-{name}"))
        stamps: list[float] = []
        cpu: list[float] = []
        in_graph: list[float] = []

        def on_image(res) -> None:
            stamps.append(time.perf_counter())
            cpu.append(time.process_time())
            s = res.stage_seconds
            in_graph.append(s.get("decode", 0.0) + s.get("augment", 0.0) + s.get("encode", 0.0))

        load0 = os.getloadavg()
        t0 = time.perf_counter()
        res = run_job(job, spec, os.path.join(work, "out"), JobOptions(name="flat", workers=workers, overwrite=True),
                      JobWatch(on_image=on_image))
        wall = time.perf_counter() - t0
        load1 = os.getloadavg()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    n = len(stamps)
    # Wall time per image: the time between two consecutive completions (interval i ends image i + 1).
    intervals = [b - a for a, b in zip(stamps, stamps[1:])]
    # CPU time of this process per image: less moved by other processes on a shared machine than wall time.
    cpu_iv = [b - a for a, b in zip(cpu, cpu[1:])]
    k = max(1, n // 10)
    deciles = []
    for d in range(10):
        lo, hi = d * n // 10, (d + 1) * n // 10
        iv = slice(max(0, lo - 1), hi - 1)
        deciles.append({"decile": d + 1,
                        "wall_ms_per_image": round(1000 * statistics.fmean(intervals[iv]), 2),
                        "cpu_ms_per_image": round(1000 * statistics.fmean(cpu_iv[iv]), 2),
                        "in_graph_ms_per_image": round(1000 * statistics.fmean(in_graph[lo:hi]), 2)})
    first_w, last_w = statistics.fmean(intervals[:k]), statistics.fmean(intervals[-k:])
    first_g, last_g = statistics.fmean(in_graph[:k]), statistics.fmean(in_graph[-k:])
    first_c, last_c = statistics.fmean(cpu_iv[:k]), statistics.fmean(cpu_iv[-k:])
    return {"images": n, "pipeline": pipeline, "workers": workers, "wall_seconds": round(wall, 2),
            "images_per_second": round(n / wall, 2), "graph": res.report.graph.to_dict(),
            "wall_ms_per_image_first_10pct": round(1000 * first_w, 2),
            "wall_ms_per_image_last_10pct": round(1000 * last_w, 2),
            "wall_ratio_last_first": round(last_w / first_w, 3),
            "in_graph_ms_per_image_first_10pct": round(1000 * first_g, 2),
            "in_graph_ms_per_image_last_10pct": round(1000 * last_g, 2),
            "in_graph_ratio_last_first": round(last_g / first_g, 3),
            "cpu_ms_per_image_first_10pct": round(1000 * first_c, 2),
            "cpu_ms_per_image_last_10pct": round(1000 * last_c, 2),
            "cpu_ratio_last_first": round(last_c / first_c, 3),
            "load_average_before_after": [load0, load1], "deciles": deciles}


# ------------------------------------------------------------------------------------------------ memory

def _memory_inproc(data_dir, files, jobs, workers, tmp, pipeline, checkpoints) -> dict:
    from augd.engine import Engine, EngineOptions
    from augd.job import JobOptions, run_job

    from bench.augd_runs import make_spec
    spec = make_spec(pipeline)
    work = tempfile.mkdtemp(prefix="augd-soak-mem-", dir=tmp)
    rss, builds = {}, []
    try:
        for i in range(1, jobs + 1):
            job = os.path.join(work, f"job-{i:03d}")
            link_tree(data_dir, job, files, prefix=f"j{i}-")
            engine = Engine(EngineOptions.from_env())
            res = run_job(job, spec, os.path.join(work, "out"), JobOptions(name=f"job-{i:03d}", workers=workers),
                          engine=engine)
            builds.append({"counted": engine.builds, "manifest": res.report.graph.builds})
            shutil.rmtree(job)
            shutil.rmtree(res.out_dir)
            if i in checkpoints:
                rss[i] = round(rss_mb(), 1)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {"via": "inproc", "pid": os.getpid(), "rss_mb": rss, "builds": builds}


def _serve_config(root: str, pipeline_path: str, workers: int) -> str:
    import yaml
    cfg = {"data_dir": os.path.join(root, "data"), "metrics_port": None, "default_pipeline": pipeline_path,
           "rescan_seconds": 1.0, "workers": workers, "log_level": "warning"}
    path = os.path.join(root, "augd-serve.yaml")
    with open(path, "w", encoding="utf-8") as fh:
        yaml.safe_dump(cfg, fh)
    return path


def _wait_outcome(proc, data: str, name: str, deadline: float) -> str:
    """'done' or 'failed' once the daemon has moved the job there; raises when it dies or times out."""
    while time.monotonic() < deadline:
        for outcome in ("done", "failed"):
            if os.path.exists(os.path.join(data, outcome, name)):
                return outcome
        if proc.poll() is not None:
            raise RuntimeError(f"augd serve exited with status {proc.returncode}")
        time.sleep(0.05)
    raise RuntimeError(f"job {name} not finished by the deadline")


def _find_manifest(out: str, name: str) -> str | None:
    for root, _dirs, names in os.walk(out):
        if "_SUCCESS" in names and os.path.basename(root) == name:
            return os.path.join(root, "manifest.json")
    return None


def _memory_serve(data_dir, files, jobs, workers, tmp, pipeline, checkpoints, job_timeout) -> dict:
    import yaml

    from bench.augd_runs import spec_doc
    root = tempfile.mkdtemp(prefix="augd-soak-serve-", dir=tmp)
    doc = spec_doc(pipeline)
    pipe_path = os.path.join(root, f"{doc['name']}.yaml")
    with open(pipe_path, "w", encoding="utf-8") as fh:
        yaml.safe_dump(doc, fh, sort_keys=False)
    cfg = _serve_config(root, pipe_path, workers)
    data = os.path.join(root, "data")
    inbox, stage = os.path.join(data, "inbox"), os.path.join(root, "stage")
    os.makedirs(inbox, exist_ok=True)
    os.makedirs(stage)
    log = open(os.path.join(root, "serve.log"), "w+", encoding="utf-8")  # noqa: SIM115 - closed below
    env = {**os.environ, "PYTHONPATH": REPO + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen([sys.executable, "-m", "augd", "serve", "--config", cfg], cwd=root, env=env,
                            stdout=log, stderr=subprocess.STDOUT)
    rss, builds, outcomes, procs = {}, [], {}, {}
    try:
        for i in range(1, jobs + 1):
            name = f"job-{i:03d}"
            link_tree(data_dir, os.path.join(stage, name), files, prefix=f"j{i}-")
            open(os.path.join(stage, name, "_READY"), "w").close()
            os.rename(os.path.join(stage, name), os.path.join(inbox, name))
            outcome = _wait_outcome(proc, data, name, time.monotonic() + job_timeout)
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
            manifest = _find_manifest(os.path.join(data, "out"), name)
            if manifest:
                with open(manifest, encoding="utf-8") as fh:
                    graph = json.load(fh)["graph"]
                # per process that ran the job's images: at most one build each (the daemon's, or each worker's,
                # which keeps the pipeline's graph for the next job: 0 then)
                for w in graph.get("workers") or [{"builds": graph["builds"]}]:
                    builds.append({"manifest": w["builds"], "pid": w.get("pid")})
                shutil.rmtree(os.path.dirname(manifest))
            shutil.rmtree(os.path.join(data, outcome, name), ignore_errors=True)
            if i in checkpoints:
                rss[i] = round(tree_rss_mb(proc.pid), 1)
                procs[i] = 1 + len(children(proc.pid))
    except RuntimeError as exc:
        log.seek(0)
        tail = log.read()[-2000:]
        raise RuntimeError(f"{exc}; its log ends:\n{tail}") from None
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()
        shutil.rmtree(root, ignore_errors=True)
    return {"via": "serve", "pid": proc.pid, "rss_mb": rss, "builds": builds, "outcomes": outcomes,
            "processes": procs}


def memory(data_dir, files, *, jobs, job_images, baseline, workers, tmp, pipeline, via, job_timeout) -> dict:
    files = files[:job_images]
    checkpoints = sorted({1, baseline, jobs // 2, jobs} - {0})
    if via in ("serve", "auto"):
        try:
            out = _memory_serve(data_dir, files, jobs, workers, tmp, pipeline, checkpoints, job_timeout)
        except RuntimeError as exc:
            if via == "serve":
                raise
            print(f"soak: augd serve could not be measured ({exc}).\nsoak: FALLING BACK to {jobs} jobs "
                  f"in this process via run_job (--via inproc).", file=sys.stderr)
            out = _memory_inproc(data_dir, files, jobs, workers, tmp, pipeline, checkpoints)
            out["serve_error"] = str(exc).splitlines()[0]
    else:
        out = _memory_inproc(data_dir, files, jobs, workers, tmp, pipeline, checkpoints)
    per_job = [b.get("counted", b["manifest"]) for b in out["builds"]]
    processes = len({b["pid"] for b in out["builds"]}) if out["via"] == "serve" else jobs
    out.update(jobs=jobs, job_images=len(files), baseline_job=baseline,
               growth_mb=round(out["rss_mb"][jobs] - out["rss_mb"][baseline], 1),
               graph_builds_per_job={"min": min(per_job), "max": max(per_job), "total": sum(per_job),
                                     "processes": processes} if per_job else None)
    return out


def _report(flat: dict | None, mem: dict | None) -> None:
    if flat:
        print(f"\nflatness: {flat['images']} images in one job ({flat['pipeline']} chain, {flat['workers']} "
              f"workers): {flat['images_per_second']} img/s, graph {flat['graph']}")
        la = flat["load_average_before_after"]
        print(f"  load average (1/5/15 min) before {la[0][0]:.2f}/{la[0][1]:.2f}/{la[0][2]:.2f}, after "
              f"{la[1][0]:.2f}/{la[1][1]:.2f}/{la[1][2]:.2f} (this job alone adds about {flat['workers']})")
        print(f"  {'decile':>6} {'wall ms/img':>12} {'cpu ms/img':>11} {'in-graph ms/img':>16}")
        for d in flat["deciles"]:
            print(f"  {d['decile']:>6} {d['wall_ms_per_image']:>12.2f} {d['cpu_ms_per_image']:>11.2f} "
                  f"{d['in_graph_ms_per_image']:>16.2f}")
        for key, label, target in (("wall", "wall time between completions", True),
                                   ("cpu", "process CPU time per image", False),
                                   ("in_graph", "in-graph time per image", False)):
            r = flat[f"{key}_ratio_last_first"]
            verdict = f"target <= 1.10: {'PASS' if r <= 1.10 else 'FAIL'}" if target else "context"
            print(f"  {label:<32} first 10 % {flat[f'{key}_ms_per_image_first_10pct']:>7.2f} ms, last 10 % "
                  f"{flat[f'{key}_ms_per_image_last_10pct']:>7.2f} ms, ratio {r:.3f} ({verdict})")
    if mem:
        b, j = mem["baseline_job"], mem["jobs"]
        print(f"\nmemory: {j} consecutive jobs of {mem['job_images']} images, via {mem['via']} (pid {mem['pid']})")
        procs = mem.get("processes")
        print("  RSS MB after job " + ", ".join(f"{k}: {v}" for k, v in mem["rss_mb"].items()) +
              (f" (the daemon and its worker processes: {max(procs.values())} processes)" if procs else ""))
        g = mem["growth_mb"]
        print(f"  growth job {b} -> job {j}: {g:+.1f} MB (target <= +50 MB: {'PASS' if g <= 50 else 'FAIL'})")
        gb = mem["graph_builds_per_job"]
        # in process, a new engine per job builds one graph each; a daemon's worker builds the pipeline's graph
        # once and keeps it from job to job
        ok = gb and gb["max"] <= 1 and gb["total"] == gb["processes"]
        print(f"  graph builds per job and process: min {gb['min']}, max {gb['max']}; {gb['total']} in all for "
              f"{gb['processes']} processes or jobs (target: at most 1, and one per process (daemon) or job "
              f"(in process) in all: {'PASS' if ok else 'FAIL'})")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--only", choices=("flatness", "memory"), help="run one of the two (default: both)")
    ap.add_argument("--quick", action="store_true", help="about a minute: 600 images, 30 jobs of 8 images")
    ap.add_argument("--images", type=int, default=3000, help="flatness: images in the job (default 3000)")
    ap.add_argument("--dataset-n", type=int, default=1000, help="distinct images, cycled (default 1000)")
    ap.add_argument("--pipeline", choices=("seed", "heavy"), default="seed", help="chain (default seed)")
    ap.add_argument("--jobs", type=int, default=100, help="memory: consecutive jobs (default 100)")
    ap.add_argument("--job-images", type=int, default=20, help="memory: images per job (default 20)")
    ap.add_argument("--baseline-job", type=int, default=10, help="memory: compare against RSS after this job")
    ap.add_argument("--via", choices=("auto", "serve", "inproc"), default="auto", help="memory: see below")
    ap.add_argument("--job-timeout", type=float, default=300.0, help="serve: seconds to wait for one job")
    ap.add_argument("--workers", type=int, default=default_workers())
    ap.add_argument("--cache", default=DEFAULT_CACHE)
    ap.add_argument("--tmp", default=None)
    ap.add_argument("--json", default=None, help="write the figures to this JSON file")
    args = ap.parse_args(argv)
    if args.quick:
        args.images, args.dataset_n, args.jobs, args.job_images = 600, 200, 30, 8
    if not 1 <= args.baseline_job < args.jobs:
        ap.error("--baseline-job must be at least 1 and less than --jobs")
    data_dir = build_dataset(args.dataset_n, 0, args.cache)
    files = dataset_files(data_dir)
    tmp = args.tmp or tempfile.gettempdir()
    flat = mem = None
    if args.only in (None, "flatness"):
        flat = flatness(data_dir, files, args.images, args.pipeline, args.workers, tmp)
    if args.only in (None, "memory"):
        mem = memory(data_dir, files, jobs=args.jobs, job_images=args.job_images, baseline=args.baseline_job,
                     workers=args.workers, tmp=tmp, pipeline=args.pipeline, via=args.via,
                     job_timeout=args.job_timeout)
    _report(flat, mem)
    if args.json:
        write_json(args.json, {"flatness": flat, "memory": mem})
    return 0


if __name__ == "__main__":
    sys.exit(main())
