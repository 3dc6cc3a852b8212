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
source scripts/venv.sh "[test]"
# The pytest script (unlike `python -m pytest`) keeps the source tree off
# sys.path, so the tests import the installed package.
exec .venv/bin/pytest -c "$PWD/setup.cfg" --rootdir "$PWD" "$@"
