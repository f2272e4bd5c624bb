#!/usr/bin/env bash
# The test command: set-up, build, then every test tier with ctest.
#   scripts/test.sh            fast + slow tiers (slow tests skip visibly without NL2SQL_DATA)
#   TIER=fast scripts/test.sh  fast tier only (ctest -L fast)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
BUILD_DIR=${BUILD_DIR:-build}
if [ -z "${NL2SQL_DATA:-}" ]; then
  echo "test: NL2SQL_DATA is not set: data tests will be SKIPPED (set it to the shared data folder)"
fi
label_args=()
if [ "${TIER:-all}" = "fast" ]; then label_args=(-L fast); fi
cd "$BUILD_DIR"
ctest --output-on-failure -j "${JOBS:-$(nproc)}" "${label_args[@]}"
