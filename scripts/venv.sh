# Sourced by the scripts: a local virtual environment with Python 3.11, created on first use.
VENV="${PVEGYM_VENV:-.venv}"
if [ ! -x "$VENV/bin/python" ]; then
  PYBIN="$(command -v python3.11 || command -v python3)"
  "$PYBIN" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
fi
PY="$VENV/bin/python"
export PYTHONHASHSEED=0
