"""scripts/gpu-check.sh, the one command for a GPU host (issue 28), run here where there is none: it says so,
runs every part a CPU can (the GPU tests skip, both jobs and the bench rows run on the CPU), judges nothing,
exits 0 and writes its JSON report. Its nvidia-smi reading and sampling are checked against a stand-in
nvidia-smi on PATH that prints what the real one prints for `--query-gpu ... --format=csv,noheader,nounits`."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench import gpu_check

REPO = Path(__file__).resolve().parent.parent


def test_on_a_host_without_a_gpu_the_check_runs_the_cpu_parts_and_exits_0(tmp_path):
    if gpu_check.nvidia_smi_gpus():
        pytest.skip("this host has a GPU: scripts/gpu-check.sh judges it instead")
    report = tmp_path / "report.json"
    p = subprocess.run(["scripts/gpu-check.sh", str(report), "--n", "12"], cwd=REPO, capture_output=True,
                       text=True, timeout=600, env={**os.environ, "AUGD_GPU_CHECK_SETUP": "0"})
    assert p.returncode == 0, p.stderr[-3000:]
    assert "no GPU here" in p.stderr
    r = json.loads(report.read_text())
    assert r["gpu"] == {"present": False, "nvidia_smi": []} and r["tensorflow"]["gpus"] == []
    assert r["tests"]["returncode"] == 0 and r["tests"]["counts"].get("skipped", 0) >= 4   # tests/test_gpu.py
    assert not r["tests"]["counts"].get("failed") and not r["tests"]["counts"].get("passed")
    assert [(j["job"], j["returncode"], j["device"]) for j in r["jobs"]] == [("demo", 0, "CPU"), ("detection", 0, "CPU")]
    assert all(j["stage_devices"]["augment"].startswith("CPU") and j["records"] > 0 for j in r["jobs"])
    b = r["bench"]
    assert b["images"] == 12 and b["codec_images_per_second"] > 0 and b["augd_seed_images_per_second"] > 0
    assert b["ratio"]["judged"] is False and b["ratio"]["target"] == 0.8
    assert [v["verdict"] for v in r["verdicts"]] == ["NONE"] and r["nvidia_smi"]["phases"] == {}
    # where each op ran, from TensorFlow's placement log: here the graph a GPU host traces, run on the CPU
    place = {row["pipeline"]: row for row in r["placement"]}
    assert set(place) == {"seed-classifier", "detection-ssd"} and not any("error" in row for row in place.values())
    assert all(row["unplanned"] and not row["gpu"] for row in place.values())   # a CPU host: all of it on the CPU
    assert all(row["static"]["augment"] == "GPU (as placed)" for row in place.values())
    assert "ImageProjectiveTransformV3" in place["detection-ssd"]["unplanned"]
    # what the GPU buys: the CPU rows ran, the GPU rows and the kernel cache's are said to be left out
    buys = r["buys"]
    assert [row["row"] for row in buys["rows"]] == ["buys codec floor", "buys CPU, worker processes"]
    assert all(row["images_per_second"] > 0 and row["cpu_seconds_per_image"] > 0 for row in buys["rows"])
    assert buys["rows"][1]["records"] == 12 and buys["rows"][1]["executor"] == "processes"
    assert "no GPU" in buys["gpu_rows"] and "no GPU" in buys["first_record"]["skipped"]


FAKE_SMI = """#!/bin/sh
# a stand-in for nvidia-smi: one H200, busier at each call (a counter file)
n=$(cat "$0.count" 2>/dev/null || echo 0); echo $((n + 1)) > "$0.count"
case "$*" in
  *--query-gpu*) echo "0, NVIDIA H200, $((n * 10 % 100)), $((1000 + n)), 143771, 580.159.04" ;;
  *) echo "GPU 0: NVIDIA H200 (UUID: GPU-0)" ;;
esac
"""


@pytest.fixture
def fake_smi(tmp_path, monkeypatch):
    exe = tmp_path / "bin" / "nvidia-smi"
    exe.parent.mkdir()
    exe.write_text(FAKE_SMI)
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{exe.parent}{os.pathsep}{os.environ['PATH']}")
    return exe


def test_nvidia_smi_rows_are_read_and_sampled_per_phase(fake_smi):
    [gpu] = gpu_check.nvidia_smi_gpus()
    assert gpu == {"index": 0, "name": "NVIDIA H200", "utilization_percent": 0.0, "memory_used_mib": 1000.0,
                   "memory_total_mib": 143771.0, "driver": "580.159.04"}
    def calls() -> int:   # the stand-in rewrites its counter: a read may meet it empty
        text = (fake_smi.parent / "nvidia-smi.count").read_text().strip()
        return int(text) if text.isdigit() else 0

    sampler = gpu_check.Sampler(True)
    with sampler.phase("job demo"):
        deadline = time.monotonic() + 10
        while calls() < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
    phase = sampler.phases["job demo"]
    assert phase["samples"] >= 3 and phase["utilization_percent_max"] >= 20 and phase["memory_used_mib_max"] > 1001


def test_on_a_gpu_host_a_job_left_on_the_cpu_fails_its_verdict():
    """The verdicts a GPU host gets: TensorFlow must see the GPU, every GPU test pass, each job's augment stage
    run on the GPU with nothing left to the CPU and nvidia-smi see it busy, the bench row reach its target."""
    report = {
        "tensorflow": {"version": "2.21.0", "cuda": "12.5.1", "gpus": ["/physical_device:GPU:0"]},
        "tests": {"returncode": 0, "counts": {"passed": 4}, "summary": "4 passed"},
        "jobs": [{"job": "demo", "returncode": 0, "device": "GPU:0 (NVIDIA H200)",
                  "stage_devices": {"augment": "GPU:0 (NVIDIA H200)"}},
                 {"job": "detection", "returncode": 0, "device": "GPU:0 (NVIDIA H200)",
                  "stage_devices": {"augment": "GPU:0 (NVIDIA H200); on the CPU: PyFunc"}}],
        "nvidia_smi": {"phases": {"job demo": {"utilization_percent_max": 35.0},
                                  "job detection": {"utilization_percent_max": 0.0}}},
        "bench": {"ratio": {"value": 0.85}, "augd_seed_images_per_second": 850, "codec_images_per_second": 1000},
        "placement": [{"pipeline": "seed-classifier", "gpu": ["ImageProjectiveTransformV3"], "host_steps": {},
                       "unplanned": []},
                      {"pipeline": "detection-ssd", "gpu": ["ImageProjectiveTransformV3"], "host_steps": {},
                       "unplanned": ["ResizeArea"]}],
    }
    got = {v["check"]: v["verdict"] for v in gpu_check.verdicts(report, gpu=True)}
    assert got == {"TensorFlow sees the GPU": "PASS", "GPU tests": "PASS", "job demo on the GPU": "PASS",
                   "job demo keeps the GPU busy": "PASS", "job detection on the GPU": "FAIL",
                   "job detection keeps the GPU busy": "FAIL", "bench: augd seed / codec floor": "PASS",
                   "placement of seed-classifier": "PASS", "placement of detection-ssd": "FAIL"}


def test_the_check_refuses_an_unknown_part():
    p = subprocess.run([sys.executable, "-m", "bench.gpu_check", "--skip", "gpus"], cwd=REPO, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 2 and "--skip: unknown part(s) gpus; allowed: tests, jobs, placement, bench, buys" in p.stderr
