#!/usr/bin/env bash
# Benchmark of `nl2sql eval` (issue: foundation). Gold-vs-gold on Spider dev and BIRD superhero,
# cold (empty result cache) and warm (second run), with --threads 2; then BIRD superhero at
# BIRD scale (superhero x300, made now by shared/tools/scale_db.py, never committed).
# Prints questions/s, the warm/cold ratio, peak RSS, and the share of cold time spent inside
# SQLite (the rest is our overhead).
#   NL2SQL_DATA=/path/to/shared/data scripts/bench/eval_throughput.sh [REPEATS]
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${NL2SQL_DATA:?set NL2SQL_DATA to the shared data folder}"
REPEATS=${1:-5}
BIN=build/nl2sql
[ -x "$BIN" ] || scripts/build.sh
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
SCALE_TOOL="$NL2SQL_DATA/../tools/scale_db.py"

python3 - "$NL2SQL_DATA/bird/dev.json" "$WORK/bird_pred.json" <<'PY'
import json, sys
qs = json.load(open(sys.argv[1]))
json.dump({str(i): q["SQL"] + "\t----- bird -----\t" + q["db_id"] for i, q in enumerate(qs)}, open(sys.argv[2], "w"))
PY

# one_run LABEL CACHE_DIR ARGS... → prints "wall_s qps exec_ms rss_kb"
one_run() {
  local cache=$1; shift
  local out="$WORK/out.json"
  /usr/bin/time -f "%M" -o "$WORK/rss" "$BIN" --log-level error eval --threads 2 --metric all \
    --cache-dir "$cache" --out "$WORK/report" "$@" >/dev/null
  python3 - "$WORK/report/eval.json" "$(cat "$WORK/rss")" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))["summary"]["timing"]
print(t["wall_s"], t["questions_per_s"], t["sqlite_exec_ms_total"], sys.argv[2])
PY
}

bench() {
  local label=$1; shift
  local cold=() warm=() exec=() rss=0
  for i in $(seq "$REPEATS"); do
    local cache="$WORK/cache_${label}_$i"
    rm -rf "$cache"
    read -r w q e r < <(one_run "$cache" "$@")
    cold+=("$w"); exec+=("$e"); rss=$r
    read -r w2 q2 e2 r2 < <(one_run "$cache" "$@")
    warm+=("$w2")
  done
  python3 - "$label" "${cold[*]}" "${warm[*]}" "${exec[*]}" "$rss" "$@" <<'PY'
import statistics, sys
label, cold, warm, exe, rss = sys.argv[1], [float(x) for x in sys.argv[2].split()], [float(x) for x in sys.argv[3].split()], [float(x) for x in sys.argv[4].split()], int(sys.argv[5])
import json
c, w, e = statistics.median(cold), statistics.median(warm), statistics.median(exe)
print(f"{label}: cold {c*1000:.1f} ms, warm {w*1000:.1f} ms (median of {len(cold)}); "
      f"warm/cold speed-up {c/w:.1f}x; SQLite share of cold thread-time {100*e/1000/(2*c):.0f}% "
      f"(2 threads); peak RSS {rss/1024:.0f} MiB")
PY
}

nq() { python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]))))" "$1"; }
echo "== questions/s = evaluated questions / evaluation wall time (dataset loading excluded; whole-command time below)"
bench spider_dev --benchmark spider --data "$NL2SQL_DATA/spider" --pred "$NL2SQL_DATA/spider/dev_gold.sql"
bench bird_superhero --benchmark bird --data "$NL2SQL_DATA/bird" --pred "$WORK/bird_pred.json"

echo "== whole command (process start to exit), cold cache, median of $REPEATS"
for label in spider bird; do
  times=()
  for i in $(seq "$REPEATS"); do
    rm -rf "$WORK/wc"
    if [ $label = spider ]; then args=(--benchmark spider --data "$NL2SQL_DATA/spider" --pred "$NL2SQL_DATA/spider/dev_gold.sql")
    else args=(--benchmark bird --data "$NL2SQL_DATA/bird" --pred "$WORK/bird_pred.json"); fi
    s=$(date +%s.%N); "$BIN" --log-level error eval --threads 2 --metric all --cache-dir "$WORK/wc" "${args[@]}" >/dev/null; e=$(date +%s.%N)
    times+=("$(python3 -c "print($e-$s)")")
  done
  python3 -c "import statistics,sys; print(f'$label whole command: {statistics.median([float(x) for x in sys.argv[1:]])*1000:.0f} ms')" "${times[@]}"
done

if [ -f "$SCALE_TOOL" ]; then
  echo "== BIRD scale: superhero x300 (generated now)"
  mkdir -p "$WORK/scaled/dev_databases/superhero"
  cp "$NL2SQL_DATA/bird/dev.json" "$NL2SQL_DATA/bird/dev_tables.json" "$WORK/scaled/"
  cp -r "$NL2SQL_DATA/bird/dev_databases/superhero/database_description" "$WORK/scaled/dev_databases/superhero/"
  python3 "$SCALE_TOOL" "$NL2SQL_DATA/bird/dev_databases/superhero/superhero.sqlite" \
    "$WORK/scaled/dev_databases/superhero/superhero.sqlite" --factor 300 | tail -2
  REPEATS=1 bench bird_superhero_x300 --benchmark bird --data "$WORK/scaled" --pred "$WORK/bird_pred.json" --timeout 120
fi
