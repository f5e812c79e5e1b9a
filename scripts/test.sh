#!/usr/bin/env bash
# Runs every test: builds the asan preset (Debug, -Werror, ASan + UBSan; the benchmarks are
# built by the dev and release presets, not here), runs CTest on it (unit and scenario labels),
# compiles egsd, egsctl and egs-sim with the release flags (preset release-check), checks formatting and
# the clock rule, runs the portal's browser test (scripts/portal-test.sh) and the Prometheus
# integration test (scripts/prometheus-test.sh, ~15 s) against that build's egsd, and the
# offline validation of deploy/ (scripts/deploy-test.sh, ~5 s after npm ci).
# EGS_TEST_PRESETS="dev asan" also builds and tests the dev preset (same flags without the
# sanitizers; CI runs only asan, which is the stricter of the two, to stay in its time budget).
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

PRESETS=${EGS_TEST_PRESETS:-asan}
for preset in $PRESETS; do
  echo "== build $preset"
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset" -j "$(nproc)"
  echo "== test $preset"
  ctest --preset "$preset" -j "$(nproc)"
done

# The release preset is what scripts/run.sh builds. GCC finds some warnings (maybe-uninitialized
# after inlining) only with optimization, which the asan preset does not use: compile the
# binaries users run with the release flags (-O2, -Werror), without debug info to save time.
echo "== release-flags build (egsd, egsctl, egs-sim)"
cmake --preset release-check >/dev/null
cmake --build --preset release-check -j "$(nproc)"

echo "== portal browser test"
LAST=${PRESETS##* }
EGSD=build/$LAST/apps/egsd/egsd scripts/portal-test.sh

echo "== prometheus integration test"
EGSD=build/$LAST/apps/egsd/egsd scripts/prometheus-test.sh

echo "== deploy manifests (offline validation)"
EGS_CRDGEN=build/$LAST/apps/egs-crdgen/egs-crdgen scripts/deploy-test.sh
