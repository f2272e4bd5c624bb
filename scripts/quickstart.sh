#!/usr/bin/env bash
# The main job on the bundled mini set: set-up (only what building and running need), a Release
# unity build of the `nl2sql` binary alone (no tests) in build-release/, then the whole pipeline
# (`nl2sql run --config configs/quickstart.json`) with the offline `sim` provider, and where the
# report is; each step's time is printed. Rerunning resumes (nothing is redone); FORCE_NEW=1
# starts over. The test build (`scripts/test.sh`) is separate, in build/.
# The accuracy it prints is SIMULATED (gold-derived answers): it shows the machinery, not a model.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-release}
OUT=${OUT:-runs/quickstart}
timings=()
seconds_since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
step() {  # step NAME COMMAND…: runs it, prints and records how long it took
  local name=$1 started
  shift
  started=$(date +%s.%N)
  "$@"
  timings+=("$(printf '%-8s' "$name") $(seconds_since "$started") s")
  echo "quickstart: $name took $(seconds_since "$started") s"
}

step setup scripts/setup.sh runtime
step build env BUILD_DIR="$BUILD_DIR" BUILD_TYPE=Release TARGET=nl2sql \
  CMAKE_ARGS="-DNL2SQL_BUILD_TESTS=OFF -DNL2SQL_UNITY=ON ${CMAKE_ARGS:-}" scripts/build.sh
mkdir -p "$OUT"
DATA=$(scripts/build_mini_dataset.sh "$OUT/mini_bird")
step run "$BUILD_DIR/nl2sql" run --config configs/quickstart.json --benchmark bird --data "$DATA" \
  --out "$OUT/run" --index-dir "$OUT/index" ${FORCE_NEW:+--force-new}
echo
echo "quickstart: step times:"
printf '  %s\n' "${timings[@]}"
echo "quickstart: open $OUT/run/report.html (also report.md, report.json, per_question.csv)"
echo "next, with a real endpoint: OPENAI_BASE_URL=http://localhost:8000/v1 OPENAI_MODEL=<model> \\"
echo "  $BUILD_DIR/nl2sql run --config configs/chase.json --benchmark bird --data <BIRD dev folder> --questions 0-49"
