"""The GPU check (issue 28): what `scripts/gpu-check.sh` runs once its set-up is done, on a GPU host, in a few
minutes, into one JSON report.

    python -m bench.gpu_check --json gpu-check.json [--n 400] [--workers N]

1. facts: the GPUs nvidia-smi lists, and what TensorFlow sees (a driver whose GPU TensorFlow cannot use is the
   first thing to catch: the work would run on the CPU with the GPU at 0 %);
2. tests: the GPU-marked tests (`pytest -m gpu tests/test_gpu.py`), in a child process;
3. jobs: `augd run` on the demo photos (seed-classifier) and on the VOC detection sample (detection-ssd), with
   `AUGD_DEVICE=gpu` on a GPU host; each manifest's device and graph.stage_devices (verdict: the augment stage
   on the GPU, no op of it left to the CPU), while nvidia-smi is sampled (utilisation, memory);
4. placement: where each op of those jobs' augment stage actually ran, from TensorFlow's placement log in a child
   process (bench/gpu_rows.py), beside the static report (verdict: no unplanned host op);
5. bench: the codec floor (OpenCV decode + encode, a process pool) against augd's seed chain on the same
   photos, the GPU row of bench.bench (target >= 0.8 on a GPU; a figure only on a CPU), sampled the same way;
6. buys: what the GPU buys, on the same photos: the codec floor, CPU-only worker processes, the GPU with threads,
   with 2 and with all-core worker processes (img/s, CPU-s per image, utilisation), and the time to the first
   record with a cold and a warm kernel cache (bench/gpu_rows.py).

On a host without a GPU it says so, runs every part a CPU can (the GPU tests skip, the jobs and the bench run
on the CPU, nothing is judged) and exits 0. On a GPU host it exits 1 when a verdict fails. Figures only; no
timing is asserted anywhere but in the bench row's verdict, on a GPU.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from bench.common import REPO, default_workers, header, machine, write_json

__all__ = ["Sampler", "main", "nvidia_smi_gpus"]

GPU_TARGET = 0.8       # augd seed / codec floor, on a GPU (bench.bench's CONTEXT row)
SAMPLE_SECONDS = 0.25
#: Where the GPU-marked tests live (one file: collecting the whole suite to find them would cost more than them).
GPU_TESTS = "tests/test_gpu.py"
JOBS = (("demo", "augd/samples/demo", "seed-classifier"), ("detection", "augd/samples/detection", "detection-ssd"))
PARTS = ("tests", "jobs", "placement", "bench", "buys")
_QUERY = "--query-gpu=index,name,utilization.gpu,memory.used,memory.total,driver_version"


def _smi(*args: str, timeout: float = 10.0) -> str | None:
    """nvidia-smi's output, or None where it is missing or fails (no driver, no GPU)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        p = subprocess.run([exe, *args], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return p.stdout if p.returncode == 0 else None


def nvidia_smi_gpus() -> list[dict]:
    """Each GPU nvidia-smi lists: index, name, utilisation %, memory used and total (MiB), driver. [] when none."""
    out = _smi(_QUERY, "--format=csv,noheader,nounits")
    rows = []
    for line in (out or "").splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 6:
            rows.append({"index": int(parts[0]), "name": parts[1], "utilization_percent": _num(parts[2]),
                         "memory_used_mib": _num(parts[3]), "memory_total_mib": _num(parts[4]),
                         "driver": parts[5]})
    return rows


def _num(text: str):
    try:
        return float(text)
    except ValueError:
        return None   # "[N/A]"


class Sampler:
    """nvidia-smi sampled on a thread every SAMPLE_SECONDS while a phase runs: `with sampler.phase("name"):`.
    Each phase's samples are summarised (utilisation max and mean, memory max); nothing when there is no GPU."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.phases: dict[str, dict] = {}

    def phase(self, name: str):
        return _Phase(self, name)


class _Phase:
    def __init__(self, sampler: Sampler, name: str):
        self.sampler, self.name, self.samples = sampler, name, []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"nvidia-smi {name}", daemon=True)

    def _run(self):
        while not self.stop.is_set():
            t = time.monotonic()
            for g in nvidia_smi_gpus():
                self.samples.append(g)
            self.stop.wait(max(0.0, SAMPLE_SECONDS - (time.monotonic() - t)))

    def __enter__(self):
        if self.sampler.enabled:
            self.thread.start()
        return self

    def __exit__(self, *exc):
        if self.sampler.enabled:
            self.stop.set()
            self.thread.join()
            util = [s["utilization_percent"] for s in self.samples if s["utilization_percent"] is not None]
            mem = [s["memory_used_mib"] for s in self.samples if s["memory_used_mib"] is not None]
            self.sampler.phases[self.name] = {
                "samples": len(self.samples), "utilization_percent_max": max(util, default=None),
                "utilization_percent_mean": round(sum(util) / len(util), 1) if util else None,
                "memory_used_mib_max": max(mem, default=None)}
        return False




def _run(cmd: list[str], env: dict | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    """A child process; one that outlives `timeout` is killed and reads as failed (rc 124), never a lost report."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=env, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        return subprocess.CompletedProcess(cmd, 124, out, f"killed after {timeout:.0f} s")


def _python(code: str) -> subprocess.CompletedProcess:
    return _run([sys.executable, "-c", code], timeout=300)


def tensorflow_facts() -> dict:
    """TensorFlow's version, whether it was built with CUDA, the GPUs it sees (in a child process)."""
    p = _python("import json, tensorflow as tf\n"
                "print(json.dumps({'version': tf.__version__, 'built_with_cuda': tf.test.is_built_with_cuda(), "
                "'gpus': [d.name for d in tf.config.list_physical_devices('GPU')], "
                "'cuda': tf.sysconfig.get_build_info().get('cuda_version'), "
                "'cudnn': tf.sysconfig.get_build_info().get('cudnn_version')}))")
    if p.returncode != 0:
        return {"error": (p.stderr.strip().splitlines() or ["TensorFlow did not start"])[-1]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def run_tests() -> dict:
    """The GPU-marked tests (GPU_TESTS); their summary line and exit status (5: none collected: a failure)."""
    t0 = time.perf_counter()
    p = _run([sys.executable, "-m", "pytest", "-q", "-m", "gpu", "-rs", "-p", "no:cacheprovider", GPU_TESTS])
    lines = [ln for ln in p.stdout.splitlines() if ln.strip()]
    summary = next((ln.strip("= ") for ln in reversed(lines) if re.search(r"\d+ (passed|failed|skipped)", ln)),
                   lines[-1] if lines else "")
    counts = {k: int(v) for v, k in re.findall(r"(\d+) (passed|failed|skipped|errors?|deselected)", summary)}
    return {"command": f"python -m pytest -q -m gpu {GPU_TESTS}", "returncode": p.returncode, "summary": summary,
            "counts": counts, "seconds": round(time.perf_counter() - t0, 1),
            "tail": "\n".join(lines[-30:]) if p.returncode not in (0,) else ""}


def run_jobs(tmp: str, gpu: bool, sampler: Sampler) -> list[dict]:
    """Each of JOBS through `augd run` (AUGD_DEVICE=gpu on a GPU host), with its manifest's device facts."""
    rows = []
    env = {**os.environ, "AUGD_DEVICE": "gpu" if gpu else "auto"}
    for name, input_dir, pipeline in JOBS:
        out = os.path.join(tmp, f"job-{name}")
        t0 = time.perf_counter()
        with sampler.phase(f"job {name}"):
            p = _run([sys.executable, "-m", "augd", "run", os.path.join(REPO, input_dir), "-p", pipeline, "-o", out,
                      "--quiet"], env=env)
        row = {"job": name, "pipeline": pipeline, "returncode": p.returncode,
               "seconds": round(time.perf_counter() - t0, 2), "device_asked": env["AUGD_DEVICE"]}
        manifest = os.path.join(out, os.path.basename(input_dir), "manifest.json")
        if p.returncode == 0 and os.path.exists(manifest):
            with open(manifest, encoding="utf-8") as fh:
                m = json.load(fh)
            row.update(device=m["device"], stage_devices=m["graph"]["stage_devices"], records=m["records"]["written"],
                       images_per_second=m["timing"]["images_per_second"], executor=m["graph"]["executor"])
        else:
            row["error"] = (p.stderr.strip().splitlines() or ["no output"])[-1][:500]
        rows.append(row)
    return rows


def _bench_photos(n: int, tmp: str) -> tuple[str, list[str], str]:
    """(folder, relative files, what they are): bench.data's data set of mixed sizes where scikit-image is
    installed (the bench extra), else the demo photos repeated to n."""
    try:
        import skimage  # noqa: F401 - bench.data draws its photos from scikit-image's samples
    except ImportError:
        src = os.path.join(REPO, "augd", "samples", "demo")
        photos = sorted(os.path.relpath(os.path.join(d, f), src) for d, _, fs in os.walk(src) for f in fs)
        folder = os.path.join(tmp, "photos")
        files = []
        for i in range(n):
            rel = f"{i:05d}-{os.path.basename(photos[i % len(photos)])}"
            shutil.copyfile(os.path.join(src, photos[i % len(photos)]), os.path.join(_mkdir(folder), rel))
            files.append(rel)
        return folder, files, f"the {len(photos)} demo photos repeated to {n} (no scikit-image: not the bench set)"
    from bench.data import build_dataset, dataset_files
    folder = build_dataset(n, 0, quiet=True)
    return folder, dataset_files(folder), f"bench.data's data set of {n} photos of mixed sizes"


def _mkdir(path: str) -> str:
    os.makedirs(path, exist_ok=True)
    return path


def run_bench(photos: tuple, workers: int, tmp: str, gpu: bool, sampler: Sampler) -> dict:
    """The codec floor (a pool, before TensorFlow loads here) and augd's seed chain on the same photos."""
    from bench.workloads import run_pool
    folder, files, what = photos
    with sampler.phase("bench codec"):
        codec = run_pool("codec", [os.path.join(folder, f) for f in files], processes=workers, warmup=2)
    os.environ["AUGD_DEVICE"] = "gpu" if gpu else "auto"   # read by EngineOptions.from_env in run_augd
    from bench.augd_runs import run_augd
    with sampler.phase("bench augd_seed"):
        seed = run_augd("seed", folder, files, workers=workers, tmp=tmp)
    ratio = seed["images_per_second"] / codec["images_per_second"] if codec["images_per_second"] else None
    ratio = round(ratio, 3) if ratio is not None else None
    return {"photos": what, "images": len(files), "workers": workers,
            "codec_images_per_second": codec["images_per_second"],
            "augd_seed_images_per_second": seed["images_per_second"], "device": seed["device"],
            "stage_devices": (seed.get("graph") or {}).get("stage_devices"),
            "ratio": {"name": "augd seed / codec floor", "value": ratio,
                      "target": GPU_TARGET, "judged": gpu}}


def verdicts(report: dict, gpu: bool) -> list[dict]:
    """What the check concludes, each with PASS/FAIL on a GPU host; on a CPU host nothing is judged."""
    if not gpu:
        return [{"check": "a GPU", "verdict": "NONE", "why": "no GPU here: nvidia-smi lists none, so only the "
                                                             "parts a CPU can run ran; nothing is judged"}]
    out = []

    def judge(check: str, ok: bool, why: str):
        out.append({"check": check, "verdict": "PASS" if ok else "FAIL", "why": why})

    tf = report["tensorflow"]
    judge("TensorFlow sees the GPU", bool(tf.get("gpus")), f"TensorFlow {tf.get('version')}, built with CUDA "
          f"{tf.get('cuda')}: {tf.get('gpus') or tf.get('error') or 'no GPU'}")
    t = report.get("tests")
    if t is not None:   # left out with --skip tests: not judged
        judge("GPU tests", t["returncode"] == 0 and t["counts"].get("passed", 0) > 0
              and not t["counts"].get("skipped"), t["summary"])
    for row in report.get("placement", []):
        judge(f"placement of {row['pipeline']}", "error" not in row and bool(row["gpu"]) and not row["unplanned"],
              row.get("error") or f"on the GPU: {len(row['gpu'])} op types; host steps: "
              f"{', '.join(row['host_steps']) or 'none'}; unplanned host ops: {', '.join(row['unplanned']) or 'none'}")
    for job in report.get("jobs", []):
        augment = (job.get("stage_devices") or {}).get("augment", "")
        judge(f"job {job['job']} on the GPU", job["returncode"] == 0 and augment.startswith("GPU")
              and "on the CPU" not in augment, job.get("error") or f"device {job.get('device')}, stages "
              f"{job.get('stage_devices')}")
        phase = report["nvidia_smi"]["phases"].get(f"job {job['job']}", {})
        judge(f"job {job['job']} keeps the GPU busy", (phase.get("utilization_percent_max") or 0) > 0,
              f"nvidia-smi utilisation max {phase.get('utilization_percent_max')} %, memory max "
              f"{phase.get('memory_used_mib_max')} MiB over {phase.get('samples')} samples")
    b = report.get("bench")
    if b and b["ratio"]["value"] is not None:
        judge("bench: augd seed / codec floor", b["ratio"]["value"] >= GPU_TARGET,
              f"{b['ratio']['value']} (target >= {GPU_TARGET}): augd {b['augd_seed_images_per_second']} img/s, "
              f"codec floor {b['codec_images_per_second']} img/s")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.gpu_check", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--json", default="gpu-check.json", help="the report (default gpu-check.json)")
    ap.add_argument("--n", type=int, default=int(os.environ.get("AUGD_GPU_CHECK_IMAGES", 400)),
                    help="photos for the bench rows (default 400, or AUGD_GPU_CHECK_IMAGES)")
    ap.add_argument("--workers", type=int, default=default_workers(),
                    help="pool processes and augd workers (default: the CPUs this process may use)")
    ap.add_argument("--skip", default="", help=f"comma-separated parts to leave out: {', '.join(PARTS)}")
    args = ap.parse_args(argv)
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    unknown = skip - set(PARTS)
    if unknown:
        ap.error(f"--skip: unknown part(s) {', '.join(sorted(unknown))}; allowed: {', '.join(PARTS)}")
    gpus = nvidia_smi_gpus()
    gpu = bool(gpus)
    say = lambda *a: print("gpu-check:", *a, file=sys.stderr, flush=True)  # noqa: E731
    say(f"{len(gpus)} GPU(s): {', '.join(g['name'] for g in gpus)}" if gpu else
        "no GPU here (nvidia-smi lists none): running the parts a CPU host can run; nothing is judged")
    sampler = Sampler(gpu)
    report = {**header("python -m bench.gpu_check", argv), "machine": machine(),
              "gpu": {"present": gpu, "nvidia_smi": gpus}, "tensorflow": tensorflow_facts()}
    say(f"TensorFlow {report['tensorflow'].get('version')}: GPUs {report['tensorflow'].get('gpus')}")
    tmp = tempfile.mkdtemp(prefix="augd-gpu-check-")
    try:
        if "tests" not in skip:
            say("the GPU-marked tests ...")
            report["tests"] = run_tests()
            say(report["tests"]["summary"])
        if "jobs" not in skip:
            report["jobs"] = run_jobs(tmp, gpu, sampler)
            for j in report["jobs"]:
                say(f"job {j['job']}: rc {j['returncode']}, device {j.get('device')}, stages {j.get('stage_devices')}")
        if "placement" not in skip:
            from bench.gpu_rows import placement_log
            demo = sorted(os.path.join(d, f) for d, _, fs in os.walk(os.path.join(REPO, JOBS[0][1])) for f in fs)
            report["placement"] = [placement_log(pipeline, demo[:4]) for _, _, pipeline in JOBS]
            for row in report["placement"]:
                say(f"placement of {row['pipeline']}: " + (
                    row.get("error") or (f"host steps {row['host_steps']}, unplanned host ops {row['unplanned']}" if gpu
                                         else f"{len(row['unplanned'])} op types, all on the CPU (no GPU here)")))
        photos = _bench_photos(args.n, tmp) if {"bench", "buys"} - skip else None
        if "bench" not in skip:
            say(f"bench rows on {args.n} photos ...")
            report["bench"] = run_bench(photos, args.workers, tmp, gpu, sampler)
            b = report["bench"]
            say(f"codec floor {b['codec_images_per_second']} img/s, augd seed {b['augd_seed_images_per_second']} "
                f"img/s: {b['ratio']['value']}" + (f" (target >= {GPU_TARGET})" if gpu else " (judged on a GPU only)"))
        if "buys" not in skip:
            from bench.gpu_rows import first_record, gpu_buys
            say(f"what the GPU buys, on {args.n} photos ...")
            report["buys"] = gpu_buys(photos[0], photos[1], args.workers, gpu, sampler, tmp)
            report["buys"]["first_record"] = first_record(os.path.join(REPO, JOBS[0][1]), gpu, tmp)
            for r in report["buys"]["rows"]:
                say(f"{r['row']}: {r.get('images_per_second')} img/s, {r.get('cpu_seconds_per_image')} CPU-s/img, "
                    f"GPU {r.get('utilization_percent_mean')} % mean, {r.get('utilization_percent_max')} % max"
                    + (f" ({r['error']})" if r.get("error") else ""))
            say(f"first record: {report['buys']['first_record']}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    report["nvidia_smi"] = {"sample_seconds": SAMPLE_SECONDS, "phases": sampler.phases}
    report["verdicts"] = verdicts(report, gpu)
    write_json(args.json, report)
    for v in report["verdicts"]:
        say(f"{v['verdict']:<5} {v['check']}: {v['why']}")
    say(f"report: {args.json}")
    return 1 if any(v["verdict"] == "FAIL" for v in report["verdicts"]) else 0


if __name__ == "__main__":
    sys.exit(main())
