#!/usr/bin/env bash
# Benchmark of `nl2sql eval` at BIRD scale (issue 22): gold-vs-gold on BIRD superhero scaled
# x1, x30, x100 and x300 (made now by shared/tools/scale_db.py, never committed; the 127 questions
# whose gold finishes at x300), against a
# FLOOR: scripts/bench/bird_floor.py, a minimal Python-sqlite3 evaluator applying the official
# BIRD rule (prediction then gold on one connection, set equality, 2 processes), nothing else.
# Both execute every query (`nl2sql eval --no-cache`), 2 threads / 2 processes.
# Prints per factor: the median wall time and peak RSS of both, the median of the per-pair ratio
# eval/floor (runs alternate eval, floor, eval, floor ...), and whether every per-question verdict
# agrees with the floor's; then the growth table with the fitted exponent (least squares on
# log wall / log RSS against log factor).
#   NL2SQL_DATA=/path/to/shared/data scripts/bench/eval_scale.sh [REPEATS]   (FACTORS="1 30 100 300")
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${NL2SQL_DATA:?set NL2SQL_DATA to the shared data folder}"
REPEATS=${1:-5}
FACTORS=${FACTORS:-"1 30 100 300"}
BIN=${BIN:-build/nl2sql}
[ -x "$BIN" ] || scripts/build.sh
SCALE_TOOL="$NL2SQL_DATA/../tools/scale_db.py"
[ -f "$SCALE_TOOL" ] || { echo "missing $SCALE_TOOL" >&2; exit 1; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
SRC="$NL2SQL_DATA/bird"

# The questions: superhero's, without those whose gold does not finish at x300 (EXCLUDE, question
# ids: 730 and 738 run past 120 s there), so every factor evaluates the same 127 questions;
# predictions = gold, keyed by position in that file.
EXCLUDE=${EXCLUDE:-"730 738"}
python3 - "$SRC/dev.json" "$WORK/dev.json" "$WORK/pred.json" "$EXCLUDE" <<'PY'
import json, sys
drop = {int(x) for x in sys.argv[4].split()}
qs = [q for q in json.load(open(sys.argv[1])) if q["db_id"] == "superhero" and q["question_id"] not in drop]
json.dump(qs, open(sys.argv[2], "w"), indent=1)
json.dump({str(i): q["SQL"] + "\t----- bird -----\t" + q["db_id"] for i, q in enumerate(qs)}, open(sys.argv[3], "w"))
PY

# timed OUT_FILE CMD... : appends "wall_s rss_kb" of one run
timed() {
  local out=$1; shift
  /usr/bin/time -f "%e %M" -o "$WORK/t" "$@" >/dev/null 2>"$WORK/stderr" || { cat "$WORK/stderr" >&2; exit 1; }
  cat "$WORK/t" >>"$out"
}

echo "factor eval_wall_s eval_rss_mb floor_wall_s floor_rss_mb ratio_wall verdicts" >"$WORK/table"
for f in $FACTORS; do
  D="$WORK/x$f"
  mkdir -p "$D/dev_databases/superhero"
  cp "$WORK/dev.json" "$SRC/dev_tables.json" "$D/"
  cp -r "$SRC/dev_databases/superhero/database_description" "$D/dev_databases/superhero/"
  if [ "$f" = 1 ]; then
    cp "$SRC/dev_databases/superhero/superhero.sqlite" "$D/dev_databases/superhero/"
  else
    python3 "$SCALE_TOOL" "$SRC/dev_databases/superhero/superhero.sqlite" \
      "$D/dev_databases/superhero/superhero.sqlite" --factor "$f" >/dev/null
  fi
  EVAL=("$BIN" --log-level error eval --benchmark bird --data "$D" --pred "$WORK/pred.json"
        --metric bird --threads 2 --no-cache --out "$WORK/report_x$f")
  FLOOR=(python3 scripts/bench/bird_floor.py "$D/dev.json" "$D/dev_databases" "$WORK/pred.json"
         "$WORK/floor_x$f.json" --procs 2)
  "${EVAL[@]}" >/dev/null; "${FLOOR[@]}" 2>/dev/null  # warm-up (page cache)
  : >"$WORK/e$f"; : >"$WORK/p$f"
  for i in $(seq "$REPEATS"); do
    timed "$WORK/e$f" "${EVAL[@]}"
    timed "$WORK/p$f" "${FLOOR[@]}"
  done
  python3 - "$f" "$WORK/e$f" "$WORK/p$f" "$WORK/report_x$f/eval.json" "$WORK/floor_x$f.json" >>"$WORK/table" <<'PY'
import json, statistics, sys
f, e, p, report, floor = sys.argv[1:]
E = [tuple(map(float, l.split())) for l in open(e)]
P = [tuple(map(float, l.split())) for l in open(p)]
ratios = [a[0] / b[0] for a, b in zip(E, P)]
items = json.load(open(report))["items"]
fl = json.load(open(floor))
agree = sum(1 for it in items if int(bool(it["verdicts"].get("bird"))) == fl.get(str(it["question_id"]), -1))
runs = sum(1 for it in items if it["gold_status"] == "ok")
correct = sum(1 for it in items if it["verdicts"].get("bird"))
print(f, statistics.median(x[0] for x in E), statistics.median(x[1] for x in E) / 1024,
      statistics.median(x[0] for x in P), statistics.median(x[1] for x in P) / 1024,
      statistics.median(ratios),
      f"{agree}/{len(items)}_agree;eval_correct={correct};floor_correct={sum(fl.values())};gold_runs={runs}")
PY
done

python3 - "$WORK/table" "$REPEATS" <<'PY'
import math, sys
rows = [l.split() for l in open(sys.argv[1])][1:]
print(f"== nl2sql eval vs the Python-sqlite3 floor, gold vs gold, BIRD superhero, median of {sys.argv[2]} (2 threads / 2 processes)")
print("| factor | eval wall s | eval RSS MB | floor wall s | floor RSS MB | eval/floor (median of pairs) | verdicts |")
print("|---|---|---|---|---|---|---|")
for r in rows:
    print(f"| x{r[0]} | {float(r[1]):.2f} | {float(r[2]):.0f} | {float(r[3]):.2f} | {float(r[4]):.0f} | {float(r[5]):.2f} | {r[6].replace('_', ' ').replace(';', ', ')} |")
sys.path.insert(0, "scripts/bench")
from growth_fit import fit
if len(rows) >= 2:
    fs = [float(r[0]) for r in rows]
    print(f"growth exponent (log-log fit over x{', x'.join(r[0] for r in rows)}): "
          f"eval wall {fit(fs, [float(r[1]) for r in rows]):.2f}, eval RSS {fit(fs, [float(r[2]) for r in rows]):.2f}; "
          f"floor wall {fit(fs, [float(r[3]) for r in rows]):.2f}")
PY
