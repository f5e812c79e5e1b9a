#!/usr/bin/env bash
# The portal's tests. Builds the release egsd (reusing build/release when present), installs the
# portal's npm packages (npm ci) and assembles the portal into build/portal; runs the unit tests
# of its helpers (node --test), then the browser test: Debian's chromium (headless, through
# playwright-core) against a real egsd on a loopback port with the demo simulated fleet and a
# temp data dir. Screenshots go to build/portal-test/.
# Exits non-zero when a step fails or the page logs a console error. About a minute.
# EGSD=path uses an egsd that is already built (scripts/test.sh passes the one it built) instead.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --browser
if ! node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)'; then
  echo "portal-test: playwright-core needs node >= 20 (this is $(node --version))" >&2
  exit 1
fi
if [[ -z "${EGSD:-}" ]]; then
  cmake --preset release >/dev/null
  cmake --build --preset release -j "$(( $(nproc) < 2 ? $(nproc) : 2 ))" --target egsd
  EGSD=build/release/apps/egsd/egsd
fi
EGSD="$(cd "$(dirname "$EGSD")" && pwd)/$(basename "$EGSD")"
portal/assemble.sh build/portal
cd portal
node --test test/format.test.mjs test/admin.test.mjs
exec node test/browser.test.mjs --egsd "$EGSD" --portal-dir ../build/portal \
  --fleet ../deploy/fleets/demo.yaml --out ../build/portal-test
