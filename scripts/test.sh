#!/usr/bin/env bash
# README command 2: set up with the test extra, then run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh test
exec .venv/bin/python -m pytest -q "$@"
