# Sourced by the benchmarks that run nl2sql against the fake OpenAI server
# (scripts/bench/fake_llm_server_tool.cpp); not a command of its own.
#   . scripts/bench/fake_server_lib.sh   (from the repository root, after `set -euo pipefail`)
# Defines: BUILD_DIR (default build), BIN (default $BUILD_DIR/nl2sql), SERVER_BIN, WORK (a scratch
# folder removed at exit, with the server stopped), and
#   fake_bench_build                  builds nl2sql and the fake server unless SKIP_BUILD is set
#                                     (BUILD_TYPE default RelWithDebInfo, JOBS default nproc)
#   fake_server_start LOG ARGS…       starts the server with ARGS, its stderr to LOG; sets SERVER_PID, URL
#   fake_server_stop [LOG]            stops it (SIGTERM) and waits; with LOG, sets REQUESTS to the
#                                     request count the server printed there
BUILD_DIR=${BUILD_DIR:-build}
fake_bench_build() {
  [ -n "${SKIP_BUILD:-}" ] && return 0
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" -DNL2SQL_BUILD_BENCH=ON >/dev/null
  cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}" --target nl2sql fake_llm_server_tool
}
BIN=${BIN:-$BUILD_DIR/nl2sql}
SERVER_BIN=$BUILD_DIR/scripts/bench/fake_llm_server_tool
WORK=$(mktemp -d)
SERVER_PID=
URL=
trap '[ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null; rm -rf "$WORK"' EXIT

fake_server_start() {
  local log=$1
  shift
  : >"$WORK/server.url"
  "$SERVER_BIN" "$@" >"$WORK/server.url" 2>"$log" &
  SERVER_PID=$!
  for _ in $(seq 200); do [ -s "$WORK/server.url" ] && break; sleep 0.05; done
  [ -s "$WORK/server.url" ] || { echo "the fake server did not start:"; tail -5 "$log"; exit 1; } >&2
  URL=$(cat "$WORK/server.url")
}

fake_server_stop() {
  [ -n "$SERVER_PID" ] || return 0
  kill -TERM "$SERVER_PID"
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=
  : >"$WORK/server.url"
  if [ -n "${1:-}" ]; then
    REQUESTS=$(sed -n 's/^fake_llm_server_tool: \([0-9]*\) requests$/\1/p' "$1")
  fi
}
