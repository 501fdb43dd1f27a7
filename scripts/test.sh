#!/usr/bin/env bash
# The test suite: creates .venv if needed, installs pvegym with its dev, rl and ray extras, then runs
# the linters (ruff), the type checker (mypy) and pytest on every core. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh
"$PY" -m pip install -q -c constraints.txt -e ".[dev,rl,ray,tensorboard]"
echo "== ruff"; "$VENV/bin/ruff" check . && "$VENV/bin/ruff" format --check .
echo "== mypy"; "$VENV/bin/mypy"
echo "== pytest"
set +e
"$PY" -m pytest -n auto "$@"  # one worker per core (pytest-xdist); -n 0 runs serially
rc=$?
set -e
# pytest exits 5 when a selected subset collects no test: that is not a failure of the suite
if [ "$rc" -eq 5 ]; then rc=0; fi
exit "$rc"
