#!/usr/bin/env bash
# The main job: installs pvegym into .venv if needed, then runs the headline experiment
# (experiments/field-scenarios.toml) into results/field-scenarios/. Extra arguments go to `pvegym run`.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh
"$PY" -m pip install -q -e .
"$VENV/bin/pvegym" run experiments/field-scenarios.toml --workers 2 "$@"
echo "report: results/field-scenarios/summary.md (plots in results/field-scenarios/plots/)"
