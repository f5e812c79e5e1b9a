#!/usr/bin/env bash
# Builds the release preset and runs egsd, the embedded default: SQLite under .egs-data/ and the
# demo simulated fleet (deploy/fleets/demo.yaml: 2 clusters, 3 shapes, 64+ nodes, 4 workspaces).
# Serves the web portal under /portal/ (npm packages installed with `npm ci`, assembled into
# build/portal). Prints the URLs and, on the first start, the admin token (also kept in
# .egs-data/admin-token).
# Extra arguments go to egsd (e.g. --listen 127.0.0.1:9090). `scripts/run.sh --demo` runs the
# older scheduling-core demo on the Tiresias trace instead.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset release >/dev/null
if [[ "${1:-}" == "--demo" ]]; then
  shift
  cmake --build --preset release -j "$(nproc)" --target egs-demo
  TRACES="${EGS_TRACES_DIR:-$(cd .. && pwd)/shared/traces}"
  exec build/release/apps/egs-demo/egs-demo --traces "$TRACES" "$@"
fi
cmake --build --preset release -j "$(nproc)" --target egsd egsctl
portal/assemble.sh build/portal >/dev/null
DATA="${EGS_DATA_DIR:-$PWD/.egs-data}"
LISTEN="${EGS_LISTEN:-127.0.0.1:8080}"
mkdir -p "$DATA"
TLS=()
SCHEME=http
# EGS_TLS=1 serves https with a self-signed certificate made once in the data directory; stock
# kubectl sends its token only over https (kubectl --certificate-authority=$DATA/tls.crt ...).
if [[ "${EGS_TLS:-0}" == "1" ]]; then
  if [[ ! -s "$DATA/tls.crt" ]]; then
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 365 \
      -subj "/CN=${LISTEN%:*}" -addext "subjectAltName=IP:${LISTEN%:*}" \
      -keyout "$DATA/tls.key" -out "$DATA/tls.crt" 2>/dev/null
    chmod 600 "$DATA/tls.key"
  fi
  TLS=(--tls-cert-file "$DATA/tls.crt" --tls-key-file "$DATA/tls.key")
  SCHEME=https
fi
if [[ -s "$DATA/admin-token" ]]; then
  echo "admin token (from an earlier start): $(cat "$DATA/admin-token")"
fi
echo "portal: $SCHEME://$LISTEN/portal/ (sign in with a token)"
echo "egsctl: build/release/apps/egsctl/egsctl --server $SCHEME://$LISTEN --token <token> get gpr -A"
exec build/release/apps/egsd/egsd --listen "$LISTEN" --data-dir "$DATA" \
  --fleet deploy/fleets/demo.yaml --admin-token-file "$DATA/admin-token" \
  --portal-dir build/portal "${TLS[@]}" "$@"
