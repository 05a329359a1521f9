#!/usr/bin/env bash
# README command 1: set up, then augment the built-in sample photos with the seed pipeline.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
.venv/bin/augd run augd/samples/demo --pipeline seed-classifier --out augd-demo/out --overwrite "$@"
.venv/bin/augd inspect augd-demo/out/demo
echo "Output: augd-demo/out/demo (shards, labels.txt, manifest.json, _SUCCESS)"
