#!/usr/bin/env bash
# Builds the release preset and runs the scheduling-core demo: a small fleet, the Tiresias
# 60-job trace submitted as GPU provision requests, with each request's quote and the resulting
# schedule. (egsd, the server, replaces this demo once it exists.)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target egs-demo
TRACES="${EGS_TRACES_DIR:-$(cd .. && pwd)/shared/traces}"
exec build/release/apps/egs-demo/egs-demo --traces "$TRACES" "$@"
