#!/usr/bin/env bash
# Assembles the portal egsd serves (--portal-dir): our files plus the ES modules of preact and
# htm copied from node_modules (installed by `npm ci`; third-party code is never committed).
# Usage: portal/assemble.sh [OUT_DIR]   (default build/portal). Installs the npm packages first
# when node_modules is missing or older than package-lock.json.
set -euo pipefail
OUT="$(realpath -m "${1:-$(dirname "$0")/../build/portal}")"
cd "$(dirname "$0")"
if [[ "$OUT" == "/" || "$OUT" == "$PWD" ]]; then echo "assemble.sh: refusing to replace $OUT" >&2; exit 2; fi
if [[ ! -d node_modules || package-lock.json -nt node_modules/.package-lock.json ]]; then
  npm ci --no-audit --no-fund --loglevel=error
fi
rm -rf "$OUT"
mkdir -p "$OUT/vendor" "$OUT/src/views"
cp index.html app.css "$OUT/"
cp src/*.js "$OUT/src/"
cp src/views/*.js "$OUT/src/views/"
cp node_modules/preact/dist/preact.module.js node_modules/preact/hooks/dist/hooks.module.js \
  node_modules/htm/dist/htm.module.js "$OUT/vendor/"
# The vendored files end with a sourceMappingURL whose map we do not ship: drop that line.
sed -i '/^\/\/# sourceMappingURL=/d' "$OUT"/vendor/*.js
echo "portal assembled in $OUT"
