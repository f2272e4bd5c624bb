#!/usr/bin/env bash
# Configures and builds nl2sql into ${BUILD_DIR:-build} (Release-with-debug-info, Ninja).
# BUILD_TYPE, CMAKE_ARGS and JOBS change that; TARGET builds one target (e.g. nl2sql) instead
# of everything.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} ${CMAKE_ARGS:-} >/dev/null
cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}" ${TARGET:+--target "$TARGET"}
