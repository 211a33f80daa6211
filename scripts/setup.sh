#!/usr/bin/env bash
# Create ./.venv (Python 3.11) and install qortex with its test, bench, graph and distributed extras.
# Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.qortex-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/pip install -q --upgrade pip
  # the CPU wheel first: a looser torch requirement would pull CUDA packages
  .venv/bin/pip install -q torch==2.13.0
  .venv/bin/pip install -q -e '.[test,bench,graph,distributed]'
  touch "$stamp"
fi
