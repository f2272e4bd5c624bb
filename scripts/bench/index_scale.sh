#!/usr/bin/env bash
# Value index build at BIRD scale (issue 22): `nl2sql index --force` on BIRD superhero scaled
# x1, x30, x100 and x300 (copies made here by tools/scale_db.py, never committed) against the
# DISTINCT-scan floor, i.e. the same `SELECT DISTINCT col FROM t WHERE typeof(col) = 'text'` over
# every text column the index reads, and nothing else, run two ways:
#   - sqlite3 shell: the sqlite3 command-line shell, rows streamed to /dev/null (the time floor);
#   - values held: Python's sqlite3 module fetching each column's values into a list and keeping
#     them all (what any indexer holds at least: the values themselves).
# Prints, per factor, wall time and peak RSS (median of REPEATS runs, /usr/bin/time), the index
# file size, the ratios index / floor, then the growth exponents: the least-squares slope of
# log(wall) and log(RSS) over log(factor).
#
#   NL2SQL_DATA=/path/to/data [BUILD_DIR=build] [THREADS=2] scripts/bench/index_scale.sh [REPEATS] [FACTORS]
#   (defaults: 5 repeats, factors "1 30 100 300")
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${NL2SQL_DATA:?set NL2SQL_DATA to the folder holding spider/ and bird/}"
REPEATS=${1:-5}
FACTORS=${2:-"1 30 100 300"}
BIN=${BUILD_DIR:-build}/nl2sql
THREADS=${THREADS:-2}
SCALE_DB=${SCALE_DB:-$NL2SQL_DATA/../tools/scale_db.py}
[ -x "$BIN" ] || { echo "build first: $BIN missing" >&2; exit 2; }
command -v sqlite3 >/dev/null || { echo "the sqlite3 shell is needed for the floor (apt install sqlite3)" >&2; exit 2; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
SRC="$NL2SQL_DATA/bird/dev_databases/superhero"

# The floor's queries: every column the index scans (text by declared type, not identifier-named:
# the same columns `nl2sql index` reports indexed on superhero).
floor_sql() {
  sqlite3 -readonly "$1" "SELECT 'SELECT DISTINCT \"' || p.name || '\" FROM \"' || m.name || '\" WHERE typeof(\"' || p.name || '\") = ''text'';'
    FROM sqlite_master m, pragma_table_info(m.name) p
    WHERE m.type = 'table' AND (upper(p.type) LIKE '%TEXT%' OR upper(p.type) LIKE '%CHAR%' OR upper(p.type) LIKE '%CLOB%')
      AND NOT (lower(p.name) = 'id' OR lower(p.name) LIKE '%\_id' ESCAPE '\' OR p.name GLOB '*Id' OR p.name GLOB '*ID')"
}
cat > "$WORK/held.py" <<'PY'
import sqlite3, sys
db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
held = [[r[0] for r in db.execute(q)] for q in open(sys.argv[2]).read().splitlines() if q.strip()]
print(sum(map(len, held)))
PY

# median_run OUT CMD...: runs CMD REPEATS times, writes "wall_s rss_kb" (medians) to OUT.
median_run() {
  local out=$1; shift
  : > "$WORK/runs"
  for _ in $(seq "$REPEATS"); do
    /usr/bin/time -f "%e %M" -o "$WORK/t" "$@" >/dev/null 2>"$WORK/stderr" || { cat "$WORK/stderr" >&2; exit 1; }
    cat "$WORK/t" >> "$WORK/runs"
  done
  python3 - "$WORK/runs" > "$out" <<'PY'
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
print(statistics.median(r[0] for r in rows), statistics.median(r[1] for r in rows))
PY
}

echo "factor,index_wall_s,index_rss_kb,index_file_mb,shell_wall_s,shell_rss_kb,held_wall_s,held_rss_kb" > "$WORK/table.csv"
for F in $FACTORS; do
  D="$WORK/bird_x$F"
  mkdir -p "$D/dev_databases/superhero"
  cp "$NL2SQL_DATA/bird/dev.json" "$NL2SQL_DATA/bird/dev_tables.json" "$D/"
  cp -r "$SRC/database_description" "$D/dev_databases/superhero/"
  DB="$D/dev_databases/superhero/superhero.sqlite"
  if [ "$F" = 1 ]; then cp "$SRC/superhero.sqlite" "$DB"; else python3 "$SCALE_DB" "$SRC/superhero.sqlite" "$DB" --factor "$F" >/dev/null; fi
  floor_sql "$DB" > "$WORK/floor.sql"
  # Warm-up: the database file in the page cache for all three.
  cat "$DB" > /dev/null
  "$BIN" --log-level error index --benchmark bird --data "$D" --db superhero --force --threads "$THREADS" --index-dir "$WORK/index" >/dev/null
  median_run "$WORK/index.t" "$BIN" --log-level error index --benchmark bird --data "$D" --db superhero --force \
    --threads "$THREADS" --index-dir "$WORK/index"
  median_run "$WORK/shell.t" sh -c "sqlite3 -readonly '$DB' < '$WORK/floor.sql'"
  median_run "$WORK/held.t" python3 "$WORK/held.py" "$DB" "$WORK/floor.sql"
  SIZE=$(du -m "$WORK/index/superhero.vidx" | cut -f1)
  read -r IW IR < "$WORK/index.t"; read -r SW SR < "$WORK/shell.t"; read -r HW HR < "$WORK/held.t"
  echo "$F,$IW,$IR,$SIZE,$SW,$SR,$HW,$HR" >> "$WORK/table.csv"
  echo "== x$F done (index ${IW} s, ${IR} KB; shell floor ${SW} s, ${SR} KB; values-held floor ${HW} s, ${HR} KB)"
  # One copy at a time on disk.
  rm -rf "$D"
done

python3 - "$WORK/table.csv" "$REPEATS" "$THREADS" <<'PY'
import csv, math, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print(f"\nnl2sql index --force (threads {sys.argv[3]}) vs the DISTINCT-scan floor; medians of {sys.argv[2]} runs")
print("| factor | index wall s | index RSS MB | file MB | sqlite3 shell s / MB | values held s / MB | wall / shell | wall / held | RSS / shell | RSS / held |")
print("|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    # /usr/bin/time reports wall time in hundredths: a 0.00 s floor is taken as 0.01 s.
    f = {k: max(float(v), 0.01) for k, v in r.items()}
    print(f"| x{int(f['factor'])} | {f['index_wall_s']:.2f} | {f['index_rss_kb']/1024:.0f} | {int(f['index_file_mb'])} | "
          f"{f['shell_wall_s']:.2f} / {f['shell_rss_kb']/1024:.0f} | {f['held_wall_s']:.2f} / {f['held_rss_kb']/1024:.0f} | "
          f"{f['index_wall_s']/f['shell_wall_s']:.2f} | {f['index_wall_s']/f['held_wall_s']:.2f} | "
          f"{f['index_rss_kb']/f['shell_rss_kb']:.2f} | {f['index_rss_kb']/f['held_rss_kb']:.2f} |")
def slope(key):
    pts = [(math.log(float(r['factor'])), math.log(max(float(r[key]), 1e-3))) for r in rows]
    if len(pts) < 2: return float('nan')
    mx = sum(x for x, _ in pts) / len(pts); my = sum(y for _, y in pts) / len(pts)
    den = sum((x - mx) ** 2 for x, _ in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / den if den else float('nan')
print("\ngrowth exponents (log-log least-squares slope over the factors):")
for key, label in [("index_wall_s", "index wall"), ("index_rss_kb", "index peak RSS"),
                   ("shell_wall_s", "sqlite3 shell wall"), ("held_rss_kb", "values-held RSS")]:
    print(f"  {label:<20} {slope(key):.2f}")
PY
