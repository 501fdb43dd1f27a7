#!/usr/bin/env bash
# The main job: installs pvegym into .venv if needed, then runs the headline experiment
# (experiments/field-scenarios.toml) into results/field-scenarios/ (or --out DIR). Extra arguments
# go to `pvegym run`; its last line names the report it wrote.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh
"$PY" -m pip install -q -c constraints.txt -e .
"$VENV/bin/pvegym" run experiments/field-scenarios.toml --workers 2 "$@"
if ! "$PY" -c "import torch, stable_baselines3" 2>/dev/null; then
  echo "pvegym train and --policy learned need the rl extra: $VENV/bin/pip install -e '.[rl]'"
fi
