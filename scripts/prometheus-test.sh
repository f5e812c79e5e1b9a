#!/usr/bin/env bash
# Prometheus integration test: a real Prometheus (Debian's package) scrapes a real egsd.
#   1. installs prometheus (scripts/install-deps.sh --prometheus; skips with a message only when
#      the package cannot be installed),
#   2. starts egsd (the demo fleet with 1 s provisioning and telemetry, a temp data dir, a
#      loopback port), issues a node token and posts a telemetry batch for one node with it, as
#      an agent would, and creates a request whose nodes then report the simulated fleet's
#      telemetry,
#   3. runs `promtool check metrics` on egsd's /metrics: no parse errors, and no lint problem
#      except the camelCase label names and _TOTAL counters that DCGM-exporter compatibility
#      requires (modelName, Hostname, UUID; DCGM_FI_DEV_ECC_*_VOL_TOTAL),
#   4. starts Prometheus on loopback scraping egsd every second, waits for a scrape and checks
#      PromQL answers through Prometheus's HTTP API: the posted utilization, the API counter, and
#      the simulated power of the request's GPUs under its workspace and gpr labels.
# About 10-20 s. EGSD=path picks the egsd binary (default: the asan build).
set -euo pipefail
cd "$(dirname "$0")/.."
EGSD="${EGSD:-build/asan/apps/egsd/egsd}"

if ! scripts/install-deps.sh --prometheus >/dev/null 2>&1 || ! command -v prometheus >/dev/null ||
  ! command -v promtool >/dev/null; then
  echo "prometheus-test: SKIP: Debian's prometheus package could not be installed"
  exit 0
fi

work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "prometheus-test: FAIL: $*" >&2
  echo "--- egsd log" >&2; tail -20 "$work/egsd.log" >&2 || true
  echo "--- prometheus log" >&2; tail -20 "$work/prometheus.log" >&2 || true
  exit 1
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# 2. egsd, a node token and one telemetry batch.
egsd_port=$(free_port)
sed -e 's/provisioningTime: .*/provisioningTime: 1s/' -e 's/telemetryInterval: .*/telemetryInterval: 1s/' \
  -e 's/precheckFailureRate: .*/precheckFailureRate: 0/' deploy/fleets/demo.yaml >"$work/fleet.yaml"
"$EGSD" --listen "127.0.0.1:$egsd_port" --data-dir "$work/data" --fleet "$work/fleet.yaml" \
  --admin-token-file "$work/admin" --log-level warn >"$work/egsd.log" 2>&1 &
pids+=($!)
base="http://127.0.0.1:$egsd_port"
for _ in $(seq 100); do curl -sf "$base/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
curl -sf "$base/healthz" >/dev/null || fail "egsd did not start"
admin=$(cat "$work/admin")
api="$base/apis/egs.dev/v1alpha1"
node=$(curl -sf -H "Authorization: Bearer $admin" "$api/nodes?limit=1" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["items"][0]["metadata"]["name"])')
node_token=$(curl -sf -H "Authorization: Bearer $admin" -H "Content-Type: application/json" -X POST "$api/tokens" \
  -d "{\"spec\":{\"user\":\"system:node:$node\",\"role\":\"node\"}}" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["status"]["token"])')
code=$(curl -s -o "$work/ingest.json" -w '%{http_code}' -H "Authorization: Bearer $node_token" \
  -H "Content-Type: application/json" -X POST "$api/nodes/$node/telemetry" \
  -d '{"samples":[{"gpu":0,"utilization":77.5,"powerW":512,"temperatureC":66,"memoryUsedMiB":4096,"memoryTotalMiB":81920,"smClockMHz":1410}]}')
[[ "$code" == 202 ]] || fail "ingest answered $code: $(cat "$work/ingest.json")"
code=$(curl -s -o "$work/gpr.json" -w '%{http_code}' -H "Authorization: Bearer $admin" \
  -H "Content-Type: application/json" -X POST "$api/namespaces/vision/gpuprovisionrequests" \
  -d '{"apiVersion":"egs.dev/v1alpha1","kind":"GPUProvisionRequest","metadata":{"name":"prom-run"},"spec":{"shape":"8xa100-40gb","nodes":1,"duration":"1h","priority":100}}')
[[ "$code" == 201 ]] || fail "GPR create answered $code: $(cat "$work/gpr.json")"

# 3. promtool on egsd's exposition.
curl -sf "$base/metrics" >"$work/metrics.txt" || fail "GET /metrics failed"
set +e
promtool check metrics <"$work/metrics.txt" >"$work/promtool.txt" 2>&1
rc=$?
set -e
if [[ $rc -ne 0 && $rc -ne 3 ]]; then fail "promtool could not parse /metrics: $(cat "$work/promtool.txt")"; fi
if grep -v -E "^DCGM_FI_DEV_[A-Z_]+ (label names should be written in 'snake_case' not 'camelCase'|counter metrics should have \"_total\" suffix)$" \
  "$work/promtool.txt" | grep -q .; then
  fail "promtool check metrics: $(cat "$work/promtool.txt")"
fi
echo "prometheus-test: promtool check metrics: ok (DCGM-compatible names only: $(wc -l <"$work/promtool.txt") lint notes)"

# 4. Prometheus scraping egsd.
prom_port=$(free_port)
cat >"$work/prometheus.yml" <<YAML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: egsd
    static_configs:
      - targets: ["127.0.0.1:$egsd_port"]
YAML
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
  --web.listen-address="127.0.0.1:$prom_port" >"$work/prometheus.log" 2>&1 &
pids+=($!)
query() {
  curl -sf -G "http://127.0.0.1:$prom_port/api/v1/query" --data-urlencode "query=$1" 2>/dev/null |
    python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "")' 2>/dev/null || true
}
util=""
deadline=$((SECONDS + 30))
while ((SECONDS < deadline)); do
  util=$(query "DCGM_FI_DEV_GPU_UTIL{Hostname=\"$node\",gpu=\"0\",job=\"egsd\"}")
  [[ -n "$util" ]] && break
  sleep 0.2
done
[[ "$util" == "77.5" ]] || fail "PromQL DCGM_FI_DEV_GPU_UTIL for $node gpu 0: got '$util', want 77.5"
ingested=$(query "sum(egs_api_requests_total{resource=\"nodes/telemetry\",code=\"202\"})")
[[ "$ingested" == "1" ]] || fail "PromQL egs_api_requests_total for the ingest: got '$ingested', want 1"
power=""
deadline=$((SECONDS + 20))
while ((SECONDS < deadline)); do
  power=$(query 'sum(DCGM_FI_DEV_POWER_USAGE{workspace="vision",gpr="prom-run",modelName="A100"})')
  [[ -n "$power" ]] && break
  sleep 0.2
done
[[ -n "$power" ]] || fail "no DCGM_FI_DEV_POWER_USAGE for the request's GPUs (workspace/gpr labels)"
python3 -c "import sys; p=float('$power'); sys.exit(0 if 8*40 <= p <= 8*410 else 1)" ||
  fail "simulated power of 8 A100s is $power W"
# The request's own telemetry through the query API.
gpus=$(curl -sf -H "Authorization: Bearer $admin" \
  "$api/namespaces/vision/gpuprovisionrequests/prom-run/telemetry" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["summary"]["gpus"])')
[[ "$gpus" == 8 ]] || fail "GPR telemetry summary covers $gpus GPUs, want 8"
up=$(query 'up{job="egsd"}')
[[ "$up" == "1" ]] || fail "up{job=\"egsd\"} is '$up'"
echo "prometheus-test: ok (Prometheus $(prometheus --version 2>&1 | head -1 | awk '{print $3}') scraped egsd; PromQL: posted utilization $util, the request's 8 GPUs draw $power W)"
