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
source scripts/venv.sh ""
exec .venv/bin/venturi quickstart "$@"
