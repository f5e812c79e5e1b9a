#!/usr/bin/env bash
# CPU time of egs-agent at a 1 s interval against the fake NVML (8 GPUs, every field and the
# event API offered), reporting to a real egsd on loopback. Prints the agent's user+system CPU
# time over the run (from /proc/<pid>/stat, after a 3 s warm-up) as a share of one core.
#
#   bench/agent_cpu.sh [BUILD_DIR] [SECONDS]     (defaults: build/dev 60)
set -euo pipefail
build=${1:-build/dev}
seconds=${2:-60}
agent=$build/apps/egs-agent/egs-agent
egsd=$build/apps/egsd/egsd
nvml_dir=$build/src/agent/fake_nvml
for f in "$agent" "$egsd" "$nvml_dir/libnvidia-ml.so.1"; do
  [[ -e $f ]] || { echo "missing $f: build egs-agent, egsd and fake_nvml first" >&2; exit 1; }
done
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT

cat >"$work/fleet.yaml" <<'YAML'
projects: [{name: bench}]
shapes: [{name: h100x8, gpuModel: H100, gpusPerNode: 8, memoryPerGpuMiB: 81920}]
clusters:
  - {name: c, project: bench, provider: simulated, pools: [{shape: h100x8, count: 1, namePrefix: node-}]}
workspaces: [{name: w, project: bench, namespaces: [w]}]
YAML
gpus=""
for i in 0 1 2 3 4 5 6 7; do
  gpus+="{\"uuid\": \"GPU-bench-$i\", \"name\": \"NVIDIA H100 80GB HBM3\", \"memoryTotalMiB\": 81559,"
  gpus+=" \"memoryUsedMiB\": 40000, \"utilization\": 70, \"powerMw\": 500000, \"temperatureC\": 66,"
  gpus+=" \"smClockMHz\": 1980, \"eccCorrected\": 1, \"eccUncorrected\": 0, \"migMode\": 0}"
  [[ $i -lt 7 ]] && gpus+=","
done
echo "{\"gpus\": [$gpus]}" >"$work/nvml.json"

"$egsd" --listen 127.0.0.1:0 --data-dir "$work/data" --fleet "$work/fleet.yaml" \
  --admin-token-file "$work/token" --log-level warn >"$work/egsd.out" 2>"$work/egsd.log" &
for _ in $(seq 100); do grep -q "egsd is up" "$work/egsd.out" && break; sleep 0.1; done
url=$(grep -o 'http://[0-9.:]*' "$work/egsd.out" | head -1)
admin=$(cat "$work/token")
node=$(curl -sf -H "Authorization: Bearer $admin" "$url/apis/egs.dev/v1alpha1/nodes" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["items"][0]["metadata"]["name"])')
curl -sf -H "Authorization: Bearer $admin" -H 'Content-Type: application/json' \
  -d "{\"spec\": {\"user\": \"system:node:$node\", \"role\": \"node\"}}" \
  "$url/apis/egs.dev/v1alpha1/tokens" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["status"]["token"])' >"$work/node-token"

EGS_FAKE_NVML_SCRIPT=$work/nvml.json LD_LIBRARY_PATH=$nvml_dir \
  "$agent" --server "$url" --token-file "$work/node-token" --node "$node" --interval 1s \
  --log-level warn 2>"$work/agent.log" &
pid=$!
sleep 3
tck=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
c0=$(cpu); t0=$(date +%s.%N)
sleep "$seconds"
c1=$(cpu); t1=$(date +%s.%N)
samples=$(curl -sf -H "Authorization: Bearer $admin" \
  "$url/apis/egs.dev/v1alpha1/nodes/$node/telemetry?resolution=raw&since=10m" |
  python3 -c 'import json,sys; print(sum(len(s["points"]) for s in json.load(sys.stdin)["series"]))')
python3 - "$c0" "$c1" "$t0" "$t1" "$tck" "$samples" <<'PY'
import sys
c0, c1, t0, t1, tck, samples = map(float, sys.argv[1:])
cpu = (c1 - c0) / tck
wall = t1 - t0
print(f"agent CPU {cpu:.2f} s over {wall:.1f} s = {100 * cpu / wall:.3f} % of a core; "
      f"egsd holds {int(samples)} raw samples of the node")
PY
[[ -s $work/agent.log ]] && { echo "agent log:"; cat "$work/agent.log"; } || true
