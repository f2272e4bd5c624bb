#!/usr/bin/env bash
# Value retrieval benchmark (issues 4 and 22): recall@5/10/20 of the index (LSH bands + the
# short-value deletion table), the LSH bands alone and exhaustive edit distance, with query CPU
# time (p50, p95 per retrieve() call) and the exhaustive/index time ratio, on Spider dev and BIRD
# superhero; on superhero also every gold literal written in the question or evidence asked with a
# one-letter typo of each kind (deletion, substitution, insertion, transposition), as written,
# lowercased and alone; index build wall time and peak RSS for all Spider databases + superhero;
# the same on a x300 BIRD-scale copy of superhero, generated here in a temporary folder (never
# committed). The build against its DISTINCT-scan floor and its growth are in index_scale.sh.
#
#   NL2SQL_DATA=/path/to/data [SCALE_DB=tools/scale_db.py] [X300_QUESTIONS=20] BUILD_DIR=build scripts/bench/context_recall.sh [--threads N] [--no-scale]
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${NL2SQL_DATA:?set NL2SQL_DATA to the folder holding spider/ and bird/}"
BIN=${BUILD_DIR:-build}/nl2sql
THREADS=2
SCALE=1
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) THREADS=$2; shift 2 ;;
    --no-scale) SCALE=0; shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
# The scaling tool ships beside the shared data folder (tools/scale_db.py).
SCALE_DB=${SCALE_DB:-$NL2SQL_DATA/../tools/scale_db.py}
[ -x "$BIN" ] || { echo "build first: $BIN missing" >&2; exit 2; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
SPIDER=(--benchmark spider --data "$NL2SQL_DATA/spider")
BIRD=(--benchmark bird --data "$NL2SQL_DATA/bird")

echo "== index build: all Spider databases (cold, --force)"
/usr/bin/time -f "   /usr/bin/time: %e s wall, %M KB max RSS" \
  "$BIN" index "${SPIDER[@]}" --all-databases --force --threads "$THREADS" --index-dir "$WORK/index" | tail -n 12
echo "== index build: BIRD superhero (cold, --force)"
/usr/bin/time -f "   /usr/bin/time: %e s wall, %M KB max RSS" \
  "$BIN" index "${BIRD[@]}" --db superhero --force --threads "$THREADS" --index-dir "$WORK/index" | tail -n 8
echo "== index check: all fresh (load + fingerprint only)"
/usr/bin/time -f "   /usr/bin/time: %e s wall, %M KB max RSS" \
  "$BIN" index "${SPIDER[@]}" --all-databases --index-dir "$WORK/index" | tail -n 3

echo "== recall: Spider dev"
"$BIN" retrieve "${SPIDER[@]}" --recall --index-dir "$WORK/index" --recall-json "$WORK/spider.json"
echo "== recall: BIRD dev, superhero"
"$BIN" retrieve "${BIRD[@]}" --recall --typos --db superhero --index-dir "$WORK/index" --recall-json "$WORK/superhero.json"

if [ "$SCALE" = 1 ]; then
  echo "== x300 BIRD-scale copy of superhero"
  X="$WORK/bird_x300"
  mkdir -p "$X/dev_databases/superhero"
  cp "$NL2SQL_DATA/bird/dev.json" "$NL2SQL_DATA/bird/dev_tables.json" "$X/"
  cp -r "$NL2SQL_DATA/bird/dev_databases/superhero/database_description" "$X/dev_databases/superhero/"
  python3 "$SCALE_DB" "$NL2SQL_DATA/bird/dev_databases/superhero/superhero.sqlite" \
    "$X/dev_databases/superhero/superhero.sqlite" --factor 300 | tail -n 3
  /usr/bin/time -f "   /usr/bin/time: %e s wall, %M KB max RSS" \
    "$BIN" index --benchmark bird --data "$X" --db superhero --force --threads "$THREADS" --index-dir "$WORK/index_x300" | tail -n 8
  # The exhaustive baseline costs ~1 us per (keyword, value) pair: 278k values x ~25 keywords
  # per question, so the x300 recall is measured on the first X300_QUESTIONS questions.
  "$BIN" retrieve --benchmark bird --data "$X" --recall --typos --db superhero --index-dir "$WORK/index_x300" \
    --max-questions "${X300_QUESTIONS:-20}"
fi
