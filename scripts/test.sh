#!/usr/bin/env bash
# Runs every test: builds the dev preset (Debug, -Werror) and the asan preset (ASan + UBSan),
# runs CTest on both (unit and scenario labels), checks formatting and the clock rule, runs
# the portal's browser test (scripts/portal-test.sh) and the Prometheus integration test
# (scripts/prometheus-test.sh, ~15 s) against the dev build's egsd.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh

echo "== clock rule: only src/common/real_clock.cc reads the system clock"
if grep -rnE 'system_clock::now|steady_clock::now|high_resolution_clock::now|\btime\(nullptr\)|gettimeofday|clock_gettime' \
    src apps --include='*.cc' --include='*.h' | grep -v '^src/common/real_clock.cc:'; then
  echo "error: system clock read outside src/common/real_clock.cc" >&2
  exit 1
fi

echo "== format check"
files=$(git ls-files 'src/*.cc' 'src/*.h' 'apps/*.cc' 'apps/*.h' 'bench/*.cc' 'tests/*.cc' 'tests/*.h' 2>/dev/null || true)
if [[ -n "$files" ]]; then
  clang-format --dry-run --Werror $files
fi

for preset in dev asan; do
  echo "== build $preset"
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset" -j "$(nproc)"
  echo "== test $preset"
  ctest --preset "$preset" -j "$(nproc)"
done

echo "== portal browser test"
EGSD=build/dev/apps/egsd/egsd scripts/portal-test.sh

echo "== prometheus integration test"
EGSD=build/dev/apps/egsd/egsd scripts/prometheus-test.sh
