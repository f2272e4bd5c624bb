#!/usr/bin/env bash
# Builds and runs the LLM layer benchmark (scripts/bench/llm_client_bench.cpp):
# 2,000 calls at 32 in flight against a 100 ms fake server, then a cache replay of the same calls.
# Usage: scripts/bench/llm_bench.sh [calls] [in_flight] [latency_ms] [replay_passes]
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} -DNL2SQL_BUILD_BENCH=ON >/dev/null
cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}" --target bench_llm_client_bench
exec "$BUILD_DIR/scripts/bench/bench_llm_client_bench" "$@"
