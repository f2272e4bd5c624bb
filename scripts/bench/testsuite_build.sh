#!/usr/bin/env bash
# Benchmark of `nl2sql testsuite build` (distilled test suites): on Spider dev, BIRD superhero
# and superhero x300 (made now by shared/tools/scale_db.py, never committed) it prints
#  - coverage: neighbour queries told apart from their gold by the original database alone, by
#    the suite, by any screened candidate, and the held-out estimate (fresh candidates, 100 by
#    default, on what the suite does not tell apart);
#  - suite size: variants per database, rows, bytes; build time per database and peak RSS;
#  - gold on its own suite (spider-ts EX, must be 100%);
#  - evaluation time of gold predictions with the suite vs without it (whole command, median of
#    REPEATS, ratio).
#   NL2SQL_DATA=/path/to/shared/data scripts/bench/testsuite_build.sh [REPEATS] [HELD_OUT]
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${NL2SQL_DATA:?set NL2SQL_DATA to the shared data folder}"
REPEATS=${1:-3}
HELD_OUT=${2:-100}
BIN=${BIN:-build/nl2sql}
[ -x "$BIN" ] || scripts/build.sh
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
SCALE_TOOL="$NL2SQL_DATA/../tools/scale_db.py"

python3 - "$NL2SQL_DATA/bird/dev.json" "$WORK/bird_pred.json" <<'PY'
import json, sys
qs = json.load(open(sys.argv[1]))
json.dump({str(i): q["SQL"] + "\t----- bird -----\t" + q["db_id"] for i, q in enumerate(qs)}, open(sys.argv[2], "w"))
PY
cut -f1 "$NL2SQL_DATA/spider/dev_gold.sql" > "$WORK/spider_pred.sql"

# build LABEL OUT DATASET_ARGS... : builds the suite, prints its manifest's figures.
build() {
  local label=$1 out=$2; shift 2
  local s e
  s=$(date +%s.%N)
  /usr/bin/time -f "%M" -o "$WORK/rss" "$BIN" --log-level error testsuite build "$@" --out "$out" \
    --held-out "$HELD_OUT" --progress off > "$WORK/build.txt"
  e=$(date +%s.%N)
  python3 - "$label" "$out/manifest.json" "$(cat "$WORK/rss")" "$s" "$e" <<'PY'
import json, sys
label, path, rss, s, e = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
m = json.load(open(path))
t = m["total"]
dbs = [d for d in m["databases"].values() if d.get("action") != "failed"]
per_db = [d["seconds"]["total"] for d in dbs]
variants = [len(d["variants"]) for d in dbs]
print(f"{label}: {len(dbs)} database(s), {t['variants']} variants ({min(variants)}-{max(variants)} per database), "
      f"{t['variant_rows']} rows, {t['variant_bytes']/1024:.0f} KiB")
print(f"  build: {e - s:.1f} s whole command, {sum(per_db)/len(per_db):.1f} s per database on average "
      f"(max {max(per_db):.1f} s), peak RSS {rss/1024:.0f} MiB")
for d in dbs:
    if len(dbs) == 1:
        print("  phases:", ", ".join(f"{k} {v:.1f} s" for k, v in d["seconds"].items()))
runs = t["neighbours_run_on_original"]
print(f"  neighbours that run on the original: {runs}; told apart from gold by the original alone "
      f"{t['told_apart_by_original']} ({100*t['told_apart_by_original']/max(1,runs):.1f}%), by the suite "
      f"{t['told_apart_by_suite']} ({100*t['told_apart_by_suite']/max(1,runs):.1f}%), by any screened candidate "
      f"{t['told_apart_by_any_candidate']}")
if t["original_coverage"] is None:
    print(f"  coverage (suite / any candidate): {100*t['coverage']:.2f}% (neighbours not run on the original)")
else:
    print(f"  coverage (suite / any candidate): {100*t['coverage']:.2f}%; original alone {100*t['original_coverage']:.2f}%")
if "held_out_coverage" in t:
    print(f"  held-out estimate: {t['told_apart_by_held_out_only']} neighbour(s) told apart only by fresh candidates; "
          f"coverage {100*t['held_out_coverage']:.2f}%")
rej = {}
for d in dbs:
    for k, v in d["candidates"]["rejected"].items():
        rej[k] = rej.get(k, 0) + v
gen = sum(d["candidates"]["generated"] for d in dbs)
print(f"  candidates generated {gen}, rejected {rej}; gold queries left out "
      f"{sum(len(d['golds_left_out']) for d in dbs)}, unstable golds reported {sum(len(d['unstable_golds']) for d in dbs)}")
PY
}

# evaluate LABEL SUITE DATASET_ARGS... : gold vs gold with and without the suite.
evaluate() {
  local label=$1 suite=$2; shift 2
  "$BIN" --log-level error eval --no-cache --metric spider-ts "$@" --test-suite "$suite" --out "$WORK/eval" > /dev/null
  python3 -c "
import json; s = json.load(open('$WORK/eval/eval.json'))['summary']
t = s.get('test_suite', {})
print(f\"  gold on its own suite: spider-ts EX {s['metrics']['spider_ts']['overall']['ex']:.2f}% \"
      f\"(on the original databases alone {t.get('ex_original_only', float('nan')):.2f}%; \"
      f\"{len(t.get('passes_original_fails_variant', []))} question(s) pass there but fail on a variant)\")"
  local with=() without=() s e
  for i in $(seq "$REPEATS"); do
    s=$(date +%s.%N); "$BIN" --log-level error eval --no-cache --metric spider-ts "$@" > /dev/null; e=$(date +%s.%N)
    without+=("$(python3 -c "print($e-$s)")")
    s=$(date +%s.%N); "$BIN" --log-level error eval --no-cache --metric spider-ts "$@" --test-suite "$suite" > /dev/null; e=$(date +%s.%N)
    with+=("$(python3 -c "print($e-$s)")")
  done
  python3 - "${without[*]}" "${with[*]}" <<'PY'
import statistics, sys
a = [float(x) for x in sys.argv[1].split()]
b = [float(x) for x in sys.argv[2].split()]
ratios = [y / x for x, y in zip(a, b)]
print(f"  eval (gold predictions, no cache, whole command): without the suite {statistics.median(a):.2f} s, "
      f"with it {statistics.median(b):.2f} s, ratio {statistics.median(ratios):.2f} (median of {len(a)} A/B pairs)")
PY
}

echo "== Spider dev"
SPIDER=(--benchmark spider --data "$NL2SQL_DATA/spider")
build spider_dev "$WORK/suite_spider" "${SPIDER[@]}"
evaluate spider_dev "$WORK/suite_spider" "${SPIDER[@]}" --pred "$WORK/spider_pred.sql"

echo "== BIRD superhero"
BIRD=(--benchmark bird --data "$NL2SQL_DATA/bird")
build superhero "$WORK/suite_bird" "${BIRD[@]}"
evaluate superhero "$WORK/suite_bird" "${BIRD[@]}" --pred "$WORK/bird_pred.json"

if [ -f "$SCALE_TOOL" ]; then
  echo "== BIRD superhero x300 (generated now)"
  mkdir -p "$WORK/scaled/dev_databases/superhero"
  cp "$NL2SQL_DATA/bird/dev.json" "$NL2SQL_DATA/bird/dev_tables.json" "$WORK/scaled/"
  python3 "$SCALE_TOOL" "$NL2SQL_DATA/bird/dev_databases/superhero/superhero.sqlite" \
    "$WORK/scaled/dev_databases/superhero/superhero.sqlite" --factor 300 | tail -1
  SCALED=(--benchmark bird --data "$WORK/scaled")
  # Checking every neighbour on the original is most of the time at this scale (each one is a
  # query over 2.9M rows): by default the suite is built without it; SCALED_ORIGINAL_CHECK=1
  # builds it with the check too (about 13 minutes on 2 cores).
  build superhero_x300 "$WORK/suite_scaled" "${SCALED[@]}" --no-original-check
  if [ "${SCALED_ORIGINAL_CHECK:-0}" = 1 ]; then
    build superhero_x300_checked "$WORK/suite_scaled_checked" "${SCALED[@]}"
  fi
  REPEATS=1 evaluate superhero_x300 "$WORK/suite_scaled" "${SCALED[@]}" --pred "$WORK/bird_pred.json" --timeout 120
fi
