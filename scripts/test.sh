#!/usr/bin/env bash
# Run venturi's whole test suite on a fresh machine.
#
# Creates .venv, installs venturi (as a built package, so missing package data
# fails the tests) with its test dependencies, and runs pytest.  The tests
# start and stop their own throwaway PostgreSQL cluster from the server
# binaries in /usr/lib/postgresql/*/bin (set VENTURI_TEST_URL to use another).
# Extra arguments go to pytest, e.g. `bash scripts/test.sh tests/unit -x`.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip >/dev/null 2>&1 || true
.venv/bin/python -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps .
.venv/bin/python -m pip install --quiet --disable-pip-version-check '.[test]'
# Run from tests/ so the installed package, not the source tree, is imported.
exec .venv/bin/pytest -c "$PWD/setup.cfg" --rootdir "$PWD" "$@"
