"""On a GPU host only (skipped elsewhere; `scripts/gpu-check.sh` runs them with `-m gpu`, and looks for GPU-marked
tests in this file only): the engine takes the GPU, keeps TensorFlow from taking all of its memory, runs the
augment stage there and nowhere else, traces one graph for every image size, and writes what the CPU writes
within rounding.

No GPU has run these in this project's CI (it has none); they are written against TensorFlow's documented
behaviour and the engine's CPU tests, and the GPU check's JSON report says whether they passed where it ran."""
from __future__ import annotations

import functools
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / "augd" / "samples" / "demo"


@functools.lru_cache(maxsize=1)
def _tf_gpus() -> int:
    """GPUs TensorFlow sees, asked in a child process (this one's TensorFlow may be set up for the CPU); 0 at once
    where no nvidia-smi lists a GPU (no driver: TensorFlow would find none either)."""
    smi = shutil.which("nvidia-smi")
    if smi is None or subprocess.run([smi, "-L"], capture_output=True, timeout=30).returncode != 0:
        return 0
    p = subprocess.run([sys.executable, "-c", "import tensorflow as tf; print(len(tf.config.list_physical_devices("
                        "'GPU')))"], capture_output=True, text=True, timeout=120)
    return int(p.stdout.strip() or 0) if p.returncode == 0 else 0


@pytest.fixture(scope="module")
def gpu_run(tmp_path_factory):
    """(the GPU job's report, its records, the CPU job's records): the demo through seed-classifier, each in a
    process of its own (one process cannot hold a GPU engine and a CPU one)."""
    if not _tf_gpus():
        pytest.skip("no GPU that TensorFlow can use")
    root = tmp_path_factory.mktemp("gpu")
    code = ("import json, sys\nfrom augd.engine import Engine, EngineOptions\nfrom augd.job import JobOptions, run_job\n"
            "from augd.schema import find_pipeline, load_pipeline\n"
            "engine = Engine(EngineOptions(device=sys.argv[1]))\n"
            "r = run_job(sys.argv[2], load_pipeline(find_pipeline('seed-classifier')), sys.argv[3], "
            "JobOptions(name='demo'), engine=engine)\n"
            "print(json.dumps({'report': json.loads(r.report.to_json()), 'traces': engine.traces}))\n")
    out = {}
    for device in ("gpu", "cpu"):
        p = subprocess.run([sys.executable, "-c", code, device, str(DEMO), str(root / device)], capture_output=True,
                           text=True, timeout=600, cwd=REPO)
        assert p.returncode == 0, p.stderr[-3000:]
        out[device] = (json.loads(p.stdout.strip().splitlines()[-1]), root / device / "demo")
    return out


def _pixels(folder: Path) -> list[np.ndarray]:
    from PIL import Image

    from augd.io import parse_example, read_records
    return [np.asarray(Image.open(io.BytesIO(parse_example(r)["image/encoded"])).convert("RGB"), np.int16)
            for r in read_records(str(folder))]


def test_the_job_runs_its_augment_stage_on_the_gpu_and_nothing_there_falls_back_to_the_cpu(gpu_run):
    run, _ = gpu_run["gpu"]
    report = run["report"]
    assert report["device"].startswith("GPU"), report["device"]
    assert report["graph"]["stage_devices"]["augment"].startswith("GPU"), report["graph"]["stage_devices"]
    assert "on the CPU" not in report["graph"]["stage_devices"]["augment"]   # no op of the chain left to the CPU


def test_one_trace_for_every_image_size_on_the_gpu(gpu_run):
    run, _ = gpu_run["gpu"]
    assert run["traces"] == 1 and run["report"]["graph"]["builds"] == 1


def test_the_gpu_writes_what_the_cpu_writes_within_rounding(gpu_run):
    (gpu, gpu_dir), (cpu, cpu_dir) = gpu_run["gpu"], gpu_run["cpu"]
    assert gpu["report"]["records"] == cpu["report"]["records"]
    a, b = _pixels(gpu_dir), _pixels(cpu_dir)
    assert [x.shape for x in a] == [x.shape for x in b]
    for x, y in zip(a, b):   # TF kernels against OpenCV's, then JPEG: a few levels, never a different picture
        assert np.abs(x - y).mean() < 3.0


def test_tensorflow_grows_into_the_gpu_instead_of_taking_it_all():
    """The engine turns memory growth on (no gpu_memory_mb cap): TensorFlow's allocator reserves what the graph
    uses, not the card; nvidia-smi's per-process memory says what was reserved, where it can tell."""
    if not _tf_gpus():
        pytest.skip("no GPU that TensorFlow can use")
    code = ("import os, subprocess, tensorflow as tf\nfrom augd.engine import Engine, EngineOptions\n"
            "from augd.schema import find_pipeline, load_pipeline\n"
            "e = Engine(EngineOptions(device='gpu'))\ne.compile(load_pipeline(find_pipeline('seed-classifier')))\n"
            "gpu = tf.config.list_physical_devices('GPU')[0]\n"
            "print('growth', tf.config.experimental.get_memory_growth(gpu))\n"
            "q = subprocess.run(['nvidia-smi', '--query-compute-apps=pid,used_memory', '--format=csv,noheader,"
            "nounits'], capture_output=True, text=True)\n"
            "mine = [l.split(',')[1] for l in q.stdout.splitlines() if l.split(',')[0].strip() == str(os.getpid())]\n"
            "total = subprocess.run(['nvidia-smi', '--query-gpu=memory.total', '--format=csv,noheader,nounits', "
            "'-i', '0'], capture_output=True, text=True).stdout.strip()\n"
            "print('used', mine[0].strip() if mine else 'unknown', total)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert p.returncode == 0, p.stderr[-3000:]
    lines = dict(ln.split(" ", 1) for ln in p.stdout.strip().splitlines() if " " in ln)
    assert lines["growth"] == "True"
    used, total = lines["used"].split()
    if used != "unknown":    # some containers hide other pids from nvidia-smi
        assert float(used) < 0.5 * float(total), (used, total)
