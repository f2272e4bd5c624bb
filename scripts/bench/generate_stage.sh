#!/usr/bin/env bash
# Generate + fix stage benchmark (issue 6), with the offline `sim` provider: per generator, how
# many candidates execute before and after the execution-feedback fixer, the first candidate's
# EX before/after fixing, and the upper-bound EX (some candidate equals gold) as the candidate
# pool grows (1, 3, 7, 21 candidates round-robin over dc, qp and os with 7 samples each) on
# Spider dev and BIRD superhero; stage time per question excluding reported LLM latency.
# The answers are SIMULATED (gold-derived with a controlled error rate): the numbers validate
# the machinery — extraction, execution, fixing, judging — not any model.
#
#   NL2SQL_DATA=/path/to/data BUILD_DIR=build scripts/bench/generate_stage.sh [--max-questions N]
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${NL2SQL_DATA:?set NL2SQL_DATA to the folder holding spider/ and bird/}"
BIN=${BUILD_DIR:-build}/nl2sql
MAX=()
while [ $# -gt 0 ]; do
  case "$1" in
    --max-questions) MAX=(--max-questions "$2"); shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -x "$BIN" ] || { echo "build first: $BIN missing" >&2; exit 2; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cat > "$WORK/sim.json" <<'JSON'
{
  "llm": {"models": {"sim": {"provider": "sim"}, "sim2": {"provider": "sim"}},
          "default_profile": "sim", "cache": {"mode": "off"}},
  "generate": {"generators": [
    {"name": "baseline"},
    {"name": "dc", "samples": 7, "shuffle": true},
    {"name": "qp", "samples": 7, "shuffle": true},
    {"name": "os", "samples": 7, "shuffle": true},
    {"name": "ssev", "profiles": ["sim", "sim2"]}
  ]},
  "fix": {"max_rounds": 3}
}
JSON
POOL=(--pool dc --pool qp --pool os)
echo "== Spider dev (sim)"
/usr/bin/time -f "   /usr/bin/time: %e s wall, %M KB max RSS" \
  "$BIN" generate --config "$WORK/sim.json" --benchmark spider --data "$NL2SQL_DATA/spider" --bench "${POOL[@]}" \
  "${MAX[@]}" --json-out "$WORK/spider.json"
echo "== BIRD dev, superhero (sim)"
/usr/bin/time -f "   /usr/bin/time: %e s wall, %M KB max RSS" \
  "$BIN" generate --config "$WORK/sim.json" --benchmark bird --data "$NL2SQL_DATA/bird" --db superhero --bench \
  "${POOL[@]}" "${MAX[@]}" --json-out "$WORK/bird.json"
