#!/usr/bin/env bash
# See venturi work in one command, on a fresh machine.
#
# Creates .venv, installs venturi into it, and runs `venturi quickstart`: a
# throwaway PostgreSQL cluster (from the server binaries in
# /usr/lib/postgresql/*/bin or $PATH) is started, a queue is migrated, an
# order's worth of jobs is enqueued and drained by a real worker, and the
# cluster is removed again.  Extra arguments go to `venturi quickstart`,
# e.g. `bash scripts/quickstart.sh --dsn postgresql://me@localhost/mydb`.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip >/dev/null 2>&1 || true
.venv/bin/python -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps .
.venv/bin/python -m pip install --quiet --disable-pip-version-check .
exec .venv/bin/venturi quickstart "$@"
