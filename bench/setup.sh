#!/usr/bin/env bash
# Create bench/.venv: the peers (requirements.txt) plus venturi itself (editable).
#
#   bash bench/setup.sh            # uses python3.12 (oban-py needs >= 3.12), else python3
#   PYTHON=/path/to/python bash bench/setup.sh
#
# The peers go into this venv only, never into venturi's own dependencies.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if [ -z "${PYTHON:-}" ]; then
    # A pyenv shim may exist without a runnable interpreter behind it: try it.
    PYTHON=python3
    for candidate in python3.12 /root/.pyenv/versions/3.12*/bin/python3.12; do
        if "$candidate" -c "" >/dev/null 2>&1; then PYTHON="$candidate"; break; fi
    done
fi
if [ ! -x "$here/.venv/bin/python" ]; then
    "$PYTHON" -m venv "$here/.venv"
fi
pip=("$here/.venv/bin/python" -m pip --disable-pip-version-check --quiet)
"${pip[@]}" install --upgrade pip >/dev/null 2>&1 || true
"${pip[@]}" install -r "$here/requirements.txt"
"${pip[@]}" install -e "$here/.."
"$here/.venv/bin/python" -c "import venturi_sa, alembic_venturi, pgqueuer, procrastinate, bq; print('bench venv ready:', __import__('sys').version.split()[0])"
