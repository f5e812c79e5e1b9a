#!/usr/bin/env bash
# Offline validation of deploy/ (no cluster, no Helm): installs deploy/test's npm packages
# (npm ci: kubernetes-models, ajv, yaml), then deploy/test/validate.mjs renders the kustomize
# overlay, base and managed-cluster with `kubectl kustomize` and validates every object and the
# CRDs against the Kubernetes schemas, the examples against the generated CRD schema, and the
# Helm chart's structure and values. When the generator is built (EGS_CRDGEN, or the dev
# build's), also checks that the committed CRDs are what it prints (crd_test.cc does too).
# About 4 s after npm ci (npm ci itself: a few seconds with a warm npm cache).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v kubectl >/dev/null; then
  echo "deploy-test: kubectl is needed (kubectl kustomize renders the manifests)" >&2
  exit 1
fi
gen="${EGS_CRDGEN:-build/dev/apps/egs-crdgen/egs-crdgen}"
if [[ -x "$gen" ]]; then
  echo "== committed CRDs match $gen"
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
  "$gen" --out-dir "$out" >/dev/null
  for f in "$out"/*.yaml; do
    for dir in deploy/crds deploy/helm/egs/crds; do
      if ! diff -u "$dir/$(basename "$f")" "$f"; then
        echo "deploy-test: $dir/$(basename "$f") is stale; run scripts/gen-crds.sh" >&2
        exit 1
      fi
    done
  done
fi
echo "== npm ci (deploy/test)"
(cd deploy/test && npm ci --no-audit --no-fund --loglevel=error)
echo "== offline validation"
node deploy/test/validate.mjs
