#!/usr/bin/env bash
# Quick start 1: set up, ingest the bundled sample documents (offline, no API key), answer a sample query.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export QORTEX_HOME=${QORTEX_HOME:-$PWD/.qortex-home}
.venv/bin/qortex ingest samples/docs
.venv/bin/qortex query "Which city was the wife of Pierre Curie born in?" --top-k 3
