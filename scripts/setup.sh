#!/usr/bin/env bash
# Create .venv (once) and install augd into it, editable, with the given extras (default: none).
# Reinstalls only when pyproject.toml or the extras changed since the last install.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
py="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$py" -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip 2>&1 | grep -v '^WARNING: Location' || true
fi
stamp=".venv/.augd-installed"
want="$(cat pyproject.toml | sha256sum | cut -c1-16) extras=${extras}"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  spec="."
  [ -n "$extras" ] && spec=".[$extras]"
  echo "installing augd${extras:+ [$extras]} into .venv ..." >&2
  log=$(mktemp)
  if ! .venv/bin/python -m pip install -q -e "$spec" >"$log" 2>&1; then
    cat "$log" >&2; rm -f "$log"; exit 1
  fi
  rm -f "$log"
  echo "$want" > "$stamp"
fi
# augd's own bytecode, written here because an editable install writes none and PYTHONDONTWRITEBYTECODE (set in
# many images and CI machines) stops Python writing it at import: every `augd run` process and worker would
# otherwise compile augd's modules from source (~0.4 CPU-s each; bench/README.md). Stale files are redone.
.venv/bin/python -m compileall -q augd >/dev/null
