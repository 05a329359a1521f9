#!/usr/bin/env bash
# The one command to run on a GPU host (docs/operations.md#checking-a-gpu-host): set up .venv with the gpu extra,
# run the GPU-marked tests, a demo and a detection job on the GPU, the bench's GPU row, nvidia-smi sampled
# throughout, and write one JSON report (default gpu-check.json; bench/gpu_check.py says what is in it).
# On a host without a GPU it says so, runs what a CPU can, and exits 0.
#   scripts/gpu-check.sh [REPORT.json] [bench.gpu_check options: --n 400 --workers N --skip tests,jobs,bench]
# AUGD_GPU_CHECK_SETUP=0 uses .venv as it is (no install).
set -euo pipefail
cd "$(dirname "$0")/.."
report="gpu-check.json"
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then report="$1"; shift; fi   # a first argument that is no option
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  extras="gpu,test,bench"          # tensorflow[and-cuda]: TensorFlow's own CUDA and cuDNN wheels
else
  extras="test"                    # what scripts/test.sh installs: no CUDA wheels on a CPU host
fi
if [ "${AUGD_GPU_CHECK_SETUP:-1}" != 0 ]; then
  scripts/setup.sh "$extras"
fi
exec .venv/bin/python -m bench.gpu_check --json "$report" "$@"
