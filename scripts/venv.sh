# Sourced by the scripts in this folder: create the virtual environment $VENV
# (default .venv) if needed and install venturi into it as a built package (so
# missing package data shows up), with the extras named in $1 (e.g.
# "[test,embedded]"; empty for none).
#
#   PYTHON        the interpreter for a new venv (default python3); an existing
#                 venv of another Python version is recreated
#   VENTURI_PINS  requirement specifiers installed together with venturi, e.g.
#                 "sqlalchemy==2.0.23" (the CI matrix's cells set it)
PYTHON="${PYTHON:-python3}"
VENV="${VENV:-.venv}"
_venv_version() { "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null; }
if [ -x "$VENV/bin/python" ] && [ "$(_venv_version "$VENV/bin/python")" != "$(_venv_version "$PYTHON")" ]; then
    echo "venv.sh: $VENV is Python $(_venv_version "$VENV/bin/python"), not $(_venv_version "$PYTHON"): recreating it" >&2
    rm -rf "$VENV"
fi
if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"
fi
_pip() { "$VENV/bin/python" -m pip --disable-pip-version-check "$@"; }
_pip install --quiet --upgrade pip >/dev/null 2>&1 || true
# Output of an earlier build would be packaged as if it were source.
rm -rf build ./*.egg-info
# shellcheck disable=SC2086  # VENTURI_PINS is a list of specifiers
if _pip install --quiet --force-reinstall --no-deps . &&
    _pip install --quiet ".${1:-}" ${VENTURI_PINS:-}; then
    _status=0
else
    _status=$?
fi
rm -rf build ./*.egg-info
if [ "$_status" -ne 0 ]; then
    echo "venv.sh: installing venturi${1:-} into $VENV failed" >&2
    exit "$_status"
fi
