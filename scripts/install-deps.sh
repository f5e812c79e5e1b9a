#!/usr/bin/env bash
# Installs the Debian packages EGS needs to build and test. Idempotent: packages already present
# are not fetched again, and apt-get update runs only when something is missing.
# `--browser` also installs Debian's chromium, which only the portal's browser test needs
# (scripts/portal-test.sh); node and npm (for the portal's npm packages) are installed from
# Debian when the machine has none. `--prometheus` also installs Debian's prometheus (the server
# and promtool), which only scripts/prometheus-test.sh needs. libpq builds the PostgreSQL store;
# the postgresql server runs only in tests, from throwaway directories (scripts/with-postgres.sh).
set -euo pipefail
BROWSER=0
PROMETHEUS=0
for arg in "$@"; do
  case "$arg" in
    --browser) BROWSER=1 ;;
    --prometheus) PROMETHEUS=1 ;;
    *) echo "install-deps: unknown flag $arg" >&2; exit 2 ;;
  esac
done

PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libgtest-dev libgmock-dev libbenchmark-dev librapidcheck-dev
  libfmt-dev libspdlog-dev nlohmann-json3-dev libyaml-cpp-dev
  libsqlite3-dev libsqlitecpp-dev libcpp-httplib-dev libssl-dev openssl
  libglpk-dev clang-format lld
  libpq-dev postgresql
)
if ((BROWSER)); then PACKAGES+=(chromium); fi
if ((PROMETHEUS)); then PACKAGES+=(prometheus); fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# kubectl drives egsd in the integration tests; Debian's kubernetes-client provides it when the
# machine has none.
if ! command -v kubectl >/dev/null 2>&1; then
  echo "install-deps: installing kubernetes-client (kubectl)"
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends kubernetes-client >/dev/null
fi
# The portal's npm packages (preact, htm; playwright-core for its test) need node and npm.
if ! command -v npm >/dev/null 2>&1; then
  echo "install-deps: installing nodejs and npm"
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
echo "install-deps: all build dependencies present"
