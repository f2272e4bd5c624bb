#!/usr/bin/env bash
# Separating-instance benchmark (issues 7 and 38): fraction of differing pairs separated,
# instance size (rows median, p95, max) and time per pair with and without the two queries'
# executions, on Spider dev and BIRD superhero, then on a x300 scaled copy of superhero
# generated here in a temporary folder (never committed). Two sets of pairs: gold against
# mutated gold (the sim taxonomy), and the real-style pairs of
# scripts/bench/fixtures/separating_pairs.jsonl, per class. --before runs both as the search was
# before issue 38 (same binary).
#
#   NL2SQL_DATA=/path/to/data [SCALE_DB=tools/scale_db.py] BUILD_DIR=build scripts/bench/select_separating.sh [--no-scale] [--factor 300] [--before] [--pairs-only]
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${NL2SQL_DATA:?set NL2SQL_DATA to the folder holding spider/ and bird/}"
BIN=${BUILD_DIR:-build}/scripts/bench/bench_select_separating_bench
if [ ! -x "$BIN" ]; then  # benchmarks are off in a default build
  cmake -S . -B "${BUILD_DIR:-build}" -G Ninja -DNL2SQL_BUILD_BENCH=ON >/dev/null
  cmake --build "${BUILD_DIR:-build}" -j "${JOBS:-$(nproc)}" --target bench_select_separating_bench
fi
SCALE=1
FACTOR=300
EXTRA=()
RUN_MUTATIONS=1
PAIRS=scripts/bench/fixtures/separating_pairs.jsonl
while [ $# -gt 0 ]; do
  case "$1" in
    --no-scale) SCALE=0; shift ;;
    --factor) FACTOR=$2; shift 2 ;;
    --before) EXTRA+=(--before); shift ;;
    --pairs-only) RUN_MUTATIONS=0; shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
SCALE_DB=${SCALE_DB:-$NL2SQL_DATA/../tools/scale_db.py}
[ -x "$BIN" ] || { echo "build first: $BIN missing" >&2; exit 2; }

echo "== real-style pairs: Spider dev + BIRD superhero"
"$BIN" --pairs "$PAIRS" --spider "$NL2SQL_DATA/spider" --bird "$NL2SQL_DATA/bird" "${EXTRA[@]}"
if [ "$RUN_MUTATIONS" = 1 ]; then
  echo "== mutation pairs: Spider dev + BIRD superhero"
  "$BIN" --spider "$NL2SQL_DATA/spider" --bird "$NL2SQL_DATA/bird" --bird-db superhero "${EXTRA[@]}"
fi

if [ "$SCALE" = 1 ]; then
  WORK=$(mktemp -d)
  trap 'rm -rf "$WORK"' EXIT
  SRC="$NL2SQL_DATA/bird/dev_databases/superhero/superhero.sqlite"
  echo "== BIRD superhero x$FACTOR (generated in a temporary folder)"
  python3 "$SCALE_DB" --factor "$FACTOR" "$SRC" "$WORK/superhero.sqlite" >/dev/null
  ls -l "$WORK/superhero.sqlite" | awk '{printf "   scaled database: %.0f MB\n", $5 / 1048576}'
  echo "== real-style pairs: superhero x$FACTOR"
  "$BIN" --pairs "$PAIRS" --bird "$NL2SQL_DATA/bird" --bird-db superhero --db-path "$WORK/superhero.sqlite" "${EXTRA[@]}"
  if [ "$RUN_MUTATIONS" = 1 ]; then
    echo "== mutation pairs: superhero x$FACTOR"
    "$BIN" --bird "$NL2SQL_DATA/bird" --bird-db superhero --db-path "$WORK/superhero.sqlite" "${EXTRA[@]}"
  fi
fi
