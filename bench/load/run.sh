#!/usr/bin/env bash
# Starts egsd (release build) on a loopback port with a generated fleet at the scheduling-core
# benchmark's scale (5,000 nodes of 8 GPUs in 20 pools: 2 clusters x 10 shapes x 250 nodes),
# runs egsd-load against it and stops it. The data directory is a fresh temporary one.
# Extra arguments go to egsd-load (e.g. --queued 2000 --seconds 3). With EGS_LOAD_SHADOW_DEPTH=N
# egsd plans with shadow plans of depth N (scheduler.shadowDepth). With EGS_LOAD_DATABASE set
# (a libpq connection string), egsd keeps its state there instead of SQLite (--database), e.g.
#   scripts/with-postgres.sh bash -c 'EGS_LOAD_DATABASE="$EGS_TEST_POSTGRES" bench/load/run.sh'
# Usage: bench/load/run.sh [egsd-load flags...]
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/install-deps.sh >/dev/null
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target egsd egsd-load >/dev/null

WORK=$(mktemp -d /tmp/egsd-load.XXXXXX)
EGSD_PID=""
cleanup() {
  if [[ -n "$EGSD_PID" ]]; then kill "$EGSD_PID" 2>/dev/null || true; wait "$EGSD_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

{
  echo "projects: [{name: bench}]"
  echo "shapes:"
  for s in $(seq 0 9); do
    echo "  - {name: shape-$s, gpuModel: H100, gpusPerNode: 8, memoryPerGpuMiB: 81920}"
  done
  echo "clusters:"
  for c in a b; do
    echo "  - name: cluster-$c"
    echo "    project: bench"
    echo "    provider: simulated"
    echo "    pools:"
    for s in $(seq 0 9); do
      echo "      - {shape: shape-$s, count: 250, namePrefix: $c-s$s-}"
    done
  done
  echo "workspaces:"
  for w in bench bench-list; do
    echo "  - name: $w"
    echo "    project: bench"
    echo "    namespaces: [$w]"
    echo "    policy: {maxNodesPerRequest: 250, maxDuration: 4000h, maxActiveRequests: 1000000, minPriority: 0, maxPriority: 999}"
  done
  echo "simulation: {provisioningTime: 1s, precheckFailureRate: 0, releaseTime: 1s, telemetryInterval: 60s}"
} > "$WORK/fleet.yaml"

# One token drives all the load: lift the per-token rate limit (default 200/s), which would
# otherwise be what is measured.
echo "rateLimit: {perSecond: 1000000, burst: 1000000}" > "$WORK/egsd.yaml"
# EGS_LOAD_SHADOW_DEPTH=N runs egsd with shadow plans (scheduler.shadowDepth) instead of
# conservative backfill.
if [[ -n "${EGS_LOAD_SHADOW_DEPTH:-}" ]]; then
  echo "scheduler: {shadowDepth: $EGS_LOAD_SHADOW_DEPTH}" >> "$WORK/egsd.yaml"
fi
START=$(date +%s.%N)
DATABASE=()
STORE=SQLite
if [[ -n "${EGS_LOAD_DATABASE:-}" ]]; then DATABASE=(--database "$EGS_LOAD_DATABASE"); STORE=PostgreSQL; fi
build/release/apps/egsd/egsd --config "$WORK/egsd.yaml" --listen 127.0.0.1:0 --data-dir "$WORK/data" --fleet "$WORK/fleet.yaml" \
  --admin-token-file "$WORK/token" --log-level warn "${DATABASE[@]}" > "$WORK/egsd.out" 2> "$WORK/egsd.log" &
EGSD_PID=$!
for _ in $(seq 1 600); do
  if grep -q "egsd is up" "$WORK/egsd.out" 2>/dev/null; then break; fi
  if ! kill -0 "$EGSD_PID" 2>/dev/null; then cat "$WORK/egsd.log" >&2; exit 1; fi
  sleep 0.1
done
URL=$(grep -o 'http://[0-9.:]*' "$WORK/egsd.out" | head -1)
echo "egsd at $URL after $(awk "BEGIN {printf \"%.1f\", $(date +%s.%N) - $START}") s (first start: loads the fleet of 5,000 nodes, 20 pools); $(nproc) cores shared by egsd and the client; store: $STORE"
build/release/bench/load/egsd-load --server "$URL" --token "$(cat "$WORK/token")" "$@"
