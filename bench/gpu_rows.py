"""Two parts of the GPU check (bench/gpu_check.py) that answer questions a static report cannot:

* **where each op actually ran**: a child process runs a pipeline's graph with TensorFlow's placement log on
  (`tf.debugging.set_log_device_placement`) and `augd.engine.placement.placed` reads it: every node of the
  augment stage on the GPU, the planned host steps by name, and any *unplanned* host op (a fail on a GPU host);
* **what the GPU buys**: one table on the same photos, each row a whole `augd run` process (or the codec pool):
  the codec floor on all cores, CPU-only worker processes, the GPU with threads, with 2 and with all-core worker
  processes; each with img/s, CPU-seconds per image and nvidia-smi's utilisation (mean, max); then the time to
  the first record of a fresh process with a cold and with a warm kernel cache (CUDA_CACHE_PATH).

Every child is a process started from a file (`python -m augd`), never from standard input: a process pool whose
main module is standard input cannot start its workers.
"""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import yaml

from bench.common import REPO

__all__ = ["first_record", "gpu_buys", "placement_log"]

_PLACEMENT = """
import json, sys
import tensorflow as tf
tf.debugging.set_log_device_placement(True)
from augd.engine import Engine, EngineOptions
from augd.schema import find_pipeline, load_pipeline
engine = Engine(EngineOptions.from_env())
compiled = engine.compile(load_pipeline(find_pipeline(sys.argv[1])), as_gpu_host=engine.device.kind != "GPU")
datas = [open(p, "rb").read() for p in sys.argv[2:]]
compiled.process_many([(d, f"p{i}.jpg", v, None) for i, d in enumerate(datas) for v in range(4)])
print("STATIC " + json.dumps(compiled.stage_devices), flush=True)
"""


def placement_log(pipeline: str, photos: list[str], env: dict | None = None) -> dict:
    """Where the augment stage of `pipeline` ran, from TensorFlow's placement log of a child process (a CPU host
    traces the graph a GPU host would, and runs it all on the CPU: nothing to judge there)."""
    from augd.engine.placement import placed
    env = {**(env or os.environ), "TF_CPP_MIN_LOG_LEVEL": "0", "PYTHONPATH": REPO}
    try:
        p = subprocess.run([sys.executable, "-c", _PLACEMENT, pipeline, *photos], capture_output=True, text=True,
                           cwd=REPO, env=env, timeout=600)
    except subprocess.TimeoutExpired:
        return {"pipeline": pipeline, "error": "killed after 600 s"}
    if p.returncode != 0:
        return {"pipeline": pipeline, "error": (p.stderr.strip().splitlines() or ["no output"])[-1][:500]}
    lines = (p.stdout + "\n" + p.stderr).splitlines()
    got = placed(lines)
    static = next((json.loads(ln[7:]) for ln in lines if ln.startswith("STATIC ")), None)
    return {"pipeline": pipeline, "static": static, "gpu": sorted(got["gpu"]),
            "host_steps": {k: sorted(v) for k, v in sorted(got["host"].items())}, "unplanned": sorted(got["unplanned"])}


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _augd_run(folder: str, spec: str, out: str, env: dict, *args: str) -> dict:
    """One whole `augd run` process: its wall and CPU seconds (its workers included) and its manifest."""
    cpu0, t0 = _children_cpu(), time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "augd", "run", folder, "-p", spec, "-o", out, "--quiet", *args],
                       capture_output=True, text=True, cwd=REPO, env=env, timeout=1800)
    wall, cpu = time.perf_counter() - t0, _children_cpu() - cpu0
    row = {"returncode": p.returncode, "wall_seconds": round(wall, 2), "cpu_seconds": round(cpu, 2)}
    manifests = [os.path.join(d, "manifest.json") for d, _, fs in os.walk(out) if "manifest.json" in fs]
    if p.returncode == 0 and manifests:
        with open(manifests[0], encoding="utf-8") as fh:
            m = json.load(fh)
        row.update(records=m["records"]["written"], device=m["device"], executor=m["graph"]["executor"],
                   job_images_per_second=m["timing"]["images_per_second"],
                   first_record_seconds=m["timing"].get("first_record_seconds"))
    else:
        row["error"] = (p.stderr.strip().splitlines() or ["no output"])[-1][:500]
    return row


def _seed_spec(tmp: str) -> str:
    from bench.augd_runs import spec_doc
    path = os.path.join(tmp, "bench-seed.yaml")
    with open(path, "w", encoding="utf-8") as fh:
        yaml.safe_dump(spec_doc("seed"), fh)
    return path


def gpu_buys(folder: str, files: list[str], workers: int, gpu: bool, sampler, tmp: str) -> dict:
    """The table: each row with img/s (whole process), CPU-s per image and nvidia-smi's utilisation over it. On a
    host without a GPU the GPU rows are left out (said so); the CPU rows still run."""
    from bench.workloads import run_pool
    spec, n, rows = _seed_spec(tmp), len(files), []

    def add(name: str, row: dict):
        phase = sampler.phases.get(name, {})
        if row.get("wall_seconds"):
            row["images_per_second"] = round(n / row["wall_seconds"], 2)
            row["cpu_seconds_per_image"] = round(row["cpu_seconds"] / n, 4)
        rows.append({"row": name, **row, "utilization_percent_mean": phase.get("utilization_percent_mean"),
                     "utilization_percent_max": phase.get("utilization_percent_max")})

    cpu0 = _children_cpu()
    with sampler.phase("buys codec floor"):
        t0 = time.perf_counter()
        codec = run_pool("codec", [os.path.join(folder, f) for f in files], processes=workers)
        wall = time.perf_counter() - t0   # the pool's start-up included, as a whole process's would be
    add("buys codec floor", {"processes": workers, "wall_seconds": round(wall, 2),
                             "cpu_seconds": round(_children_cpu() - cpu0, 2),
                             "pool_images_per_second": codec["images_per_second"]})
    plan = [("buys CPU, worker processes", "cpu", "processes", workers)]
    if gpu:
        plan += [("buys GPU, threads", "gpu", "threads", workers),
                 ("buys GPU, 2 worker processes", "gpu", "processes", 2),
                 (f"buys GPU, {workers} worker processes", "gpu", "processes", workers)]
    for name, device, executor, w in plan:
        out = tempfile.mkdtemp(prefix="buys-", dir=tmp)
        with sampler.phase(name):
            row = _augd_run(folder, spec, out, {**os.environ, "AUGD_DEVICE": device}, "--executor", executor,
                            "--workers", str(w))
        add(name, {"device_asked": device, "executor_asked": executor, "workers": w, **row})
    return {"images": n, "spec": "the seed chain, one record per image (bench.augd_runs SPECS['seed'])",
            "rows": rows, "gpu_rows": "run" if gpu else "left out: no GPU here"}


def first_record(folder: str, gpu: bool, tmp: str) -> dict:
    """A fresh `augd run` on the demo photos twice with one new kernel cache (CUDA_CACHE_PATH): cold, then warm.
    What a user waits for the first record on a new host, and after the driver kept what it compiled."""
    if not gpu:
        return {"skipped": "no GPU here: there are no kernels for the driver to compile"}
    cache = tempfile.mkdtemp(prefix="cuda-cache-", dir=tmp)
    env = {**os.environ, "AUGD_DEVICE": "gpu", "CUDA_CACHE_PATH": cache, "CUDA_CACHE_MAXSIZE": str(4 << 30),
           "CUDA_CACHE_DISABLE": "0"}
    out = {}
    for kind in ("cold", "warm"):
        row = _augd_run(folder, "seed-classifier", tempfile.mkdtemp(prefix=f"first-{kind}-", dir=tmp), env)
        out[kind] = {k: row.get(k) for k in ("returncode", "wall_seconds", "first_record_seconds", "error") if k in row}
    out["cache_bytes"] = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(cache) for f in fs)
    return out
