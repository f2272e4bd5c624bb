#!/usr/bin/env bash
# The test command: set-up (every package: scripts/setup.sh all), build, then every test tier
# with ctest.
#   scripts/test.sh             fast + slow tiers (slow tests skip visibly without NL2SQL_DATA)
#   TIER=fast scripts/test.sh   fast tier only (ctest -L fast)
#   SANITIZE=1 scripts/test.sh  then a second stage: the library and the fast tier built with
#                               -fsanitize=address,undefined (-O1, no recovery from UB, leak
#                               checks on) in ${SANITIZE_BUILD_DIR:-build-asan}; CI sets this.
#   SANITIZE=only               the sanitizer stage alone.
# The sanitizer stage builds the layers and the CLI as a unity build (-DNL2SQL_UNITY=ON, as the
# quickstart does), so a name two sources of one layer both define at file scope fails here
# rather than in a user's first build; the normal build keeps one translation unit per file,
# which checks that each source includes what it uses.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh all
BUILD_DIR=${BUILD_DIR:-build}
SANITIZE=${SANITIZE:-0}

if [ "$SANITIZE" != only ]; then
  scripts/build.sh
  if [ -z "${NL2SQL_DATA:-}" ]; then
    echo "test: NL2SQL_DATA is not set: data tests will be SKIPPED (set it to the shared data folder)"
  fi
  label_args=()
  if [ "${TIER:-all}" = "fast" ]; then label_args=(-L fast); fi
  (cd "$BUILD_DIR" && ctest --output-on-failure -j "${JOBS:-$(nproc)}" "${label_args[@]}")
fi

if [ "$SANITIZE" = 1 ] || [ "$SANITIZE" = only ]; then
  SAN_DIR=${SANITIZE_BUILD_DIR:-build-asan}
  echo "test: sanitizer stage (ASan + UBSan, fast tier) in $SAN_DIR"
  started=$(date +%s)
  # Line tables (-g1) are enough for ASan's stack traces and build much faster than -g;
  # benchmarks are left out of this build.
  BUILD_DIR="$SAN_DIR" BUILD_TYPE=Debug \
    CMAKE_ARGS="-DNL2SQL_SANITIZE=ON -DNL2SQL_UNITY=ON -DNL2SQL_BUILD_BENCH=OFF -DCMAKE_CXX_FLAGS_DEBUG=-g1 ${CMAKE_ARGS:-}" \
    scripts/build.sh
  built=$(date +%s)
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:check_initialization_order=1:detect_stack_use_after_return=0}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
  (cd "$SAN_DIR" && ctest --output-on-failure -j "${JOBS:-$(nproc)}" -L fast)
  finished=$(date +%s)
  echo "test: sanitizer stage passed: build $((built - started)) s, fast tier $((finished - built)) s"
fi
