#!/usr/bin/env bash
# Installs, with apt-get, the Debian packages nl2sql needs. Idempotent: does nothing when they
# are already installed.
#   scripts/setup.sh runtime   what building and running the `nl2sql` binary need (quickstart)
#   scripts/setup.sh all       also the tests, fuzzing, benchmarks and packaging (test.sh; default)
set -euo pipefail
PROFILE=${1:-all}

RUNTIME=(
  build-essential cmake ninja-build pkg-config
  libsqlite3-dev sqlite3     # sqlite3: scripts/build_mini_dataset.sh builds the mini set with it
  libcurl4-openssl-dev
  nlohmann-json3-dev
  libcli11-dev
  libspdlog-dev libfmt-dev
  libxxhash-dev
  libcpp-httplib-dev          # the outside programs' local endpoint (and the tests' fake LLM server)
)
TEST_ONLY=(
  libgtest-dev libgmock-dev googletest
  libbenchmark-dev
  python3
  clang libclang-rt-14-dev   # libFuzzer targets (slow test tier)
  chromium                   # headless browser check of report.html (slow test tier)
  file                       # scripts/package.sh: dpkg-shlibdeps reads the binary's libraries
)
case "$PROFILE" in
  runtime) PACKAGES=("${RUNTIME[@]}") ;;
  all) PACKAGES=("${RUNTIME[@]}" "${TEST_ONLY[@]}") ;;
  *) echo "usage: scripts/setup.sh [runtime|all]" >&2; exit 2 ;;
esac

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages of profile $PROFILE present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
