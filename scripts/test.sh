#!/usr/bin/env bash
# README command 2: set up with the test extra, then run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh test
# TF Model Garden's detection decoder, one of the record readers tests/test_fates.py holds the records against:
# tf-models-official without its dependencies (the decoder needs TensorFlow and tf-keras alone; the package's own
# list pulls Model Garden's whole training stack), and the tf-keras of the installed TensorFlow.
if ! .venv/bin/python -c "import importlib.util as u, sys; sys.exit(not (u.find_spec('official') and u.find_spec('tf_keras')))"; then
  tf=$(.venv/bin/python -c "import importlib.metadata as m; print('.'.join(m.version('tensorflow').split('.')[:2]))")
  .venv/bin/python -m pip install -q --no-deps "tf-models-official==2.20.0" "tf-keras==${tf}.*" 2>&1 | grep -v '^WARNING: Location' || true
fi
# Two pytest workers, a test file each at a time (--dist loadfile: a file's fixtures and its daemons stay in one
# process): most long tests wait on daemons and child processes, so two of them overlap on 2 cores (24.9 -> 15.6
# minutes on this project's 2-core machine). AUGD_TEST_WORKERS=0 runs them in this process, one after another
# (what --pdb and -s need).
exec .venv/bin/python -m pytest -q -n "${AUGD_TEST_WORKERS:-2}" --dist loadfile "$@"
