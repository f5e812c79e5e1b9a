#!/usr/bin/env bash
# Regenerates the committed CRDs (deploy/crds and the Helm chart's crds/) from egsd's OpenAPI
# document with egs-crdgen (src/api/crd.h). Run after changing a schema in src/api/discovery.cc;
# src/api/crd_test.cc fails until the files match. EGS_CRDGEN=path uses a built generator.
set -euo pipefail
cd "$(dirname "$0")/.."
gen="${EGS_CRDGEN:-}"
if [[ -z "$gen" ]]; then
  cmake --preset dev >/dev/null
  cmake --build --preset dev --target egs-crdgen
  gen=build/dev/apps/egs-crdgen/egs-crdgen
fi
for dir in deploy/crds deploy/helm/egs/crds; do
  mkdir -p "$dir"
  "$gen" --out-dir "$dir"
done
