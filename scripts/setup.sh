#!/usr/bin/env bash
# Installs, with apt-get, exactly the Debian packages nl2sql needs to build, test and benchmark.
# Idempotent: does nothing when everything is already installed.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libsqlite3-dev sqlite3
  libcurl4-openssl-dev
  nlohmann-json3-dev
  libcli11-dev
  libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev googletest
  libbenchmark-dev
  libxxhash-dev
  libcpp-httplib-dev          # in-process fake LLM server for tests
  python3
  clang libclang-rt-14-dev   # libFuzzer targets (slow test tier)
  chromium                   # headless browser check of report.html (slow test tier)
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
