# Sourced by the scripts in this folder: create .venv if needed and install
# venturi into it as a built package (so missing package data shows up),
# with the extras named in $1 (e.g. "[test]"; empty for none).
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip >/dev/null 2>&1 || true
.venv/bin/python -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps .
.venv/bin/python -m pip install --quiet --disable-pip-version-check ".${1:-}"
