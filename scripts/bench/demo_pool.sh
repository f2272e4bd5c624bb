#!/usr/bin/env bash
# What choosing dc/qp demonstrations per question costs (issue 21): `nl2sql generate` for one
# question with dc and qp (offline `sim` provider, no value index) with the demonstrations chosen
# from Spider's train split (the pool of 3,521 pairs read, masked and linked once, then the
# question ranked against every pair and the chosen qp pairs planned) against the same command
# with `demos.enabled=false` (the fixed demonstrations: no pool). Two settings:
#   spider   Spider dev question 5; the pool is the run's own train split;
#   bird300  a BIRD superhero question on superhero scaled x300 (2.9M rows, made here with
#            SCALE_TOOL), the pool named explicitly as Spider's train split (BIRD has none).
# Prints the median wall time of RUNS runs of each command (after one warm-up) and the ratio.
#
#   NL2SQL_DATA=/path/to/data SCALE_TOOL=/path/to/scale_db.py BUILD_DIR=build RUNS=5 scripts/bench/demo_pool.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${NL2SQL_DATA:?set NL2SQL_DATA to the folder holding spider/ and bird/}"
: "${SCALE_TOOL:?set SCALE_TOOL to the database scaling script (SRC DST --factor N)}"
BIN=${BUILD_DIR:-build}/nl2sql
RUNS=${RUNS:-5}
[ -x "$BIN" ] || { echo "build first: $BIN missing" >&2; exit 2; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

SIM=(--set 'llm.models={"sim":{"provider":"sim"}}' --set llm.default_profile=sim --set llm.cache.mode=off)
POOL_OWN='generate.generators=[{"name":"dc"},{"name":"qp"}]'
POOL_SPIDER='generate.generators=[{"name":"dc","demos":{"benchmark":"spider","data":"'$NL2SQL_DATA'/spider"}},{"name":"qp","demos":{"benchmark":"spider","data":"'$NL2SQL_DATA'/spider"}}]'
FIXED='generate.generators=[{"name":"dc","demos":{"enabled":false}},{"name":"qp","demos":{"enabled":false}}]'

median_wall() {  # the median wall seconds of RUNS runs of the command, after one warm-up
  "$@" >/dev/null 2>&1
  for _ in $(seq "$RUNS"); do
    /usr/bin/time -f "%e" "$@" 2>&1 >/dev/null | tail -1
  done | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}

compare() {  # label, generators with a pool, then the dataset arguments
  local label=$1 pool=$2; shift 2
  local a b
  a=$(median_wall "$BIN" --log-level error generate --config configs/base.json "${SIM[@]}" --set "$pool" --no-index "$@")
  b=$(median_wall "$BIN" --log-level error generate --config configs/base.json "${SIM[@]}" --set "$FIXED" --no-index "$@")
  echo "$label: per-question pool ${a} s, fixed demonstrations ${b} s (median of $RUNS), ratio $(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.2f", a / b}')"
}

compare spider "$POOL_OWN" --benchmark spider --data "$NL2SQL_DATA/spider" --question-id 5

mkdir -p "$WORK/bird/dev_databases/superhero"
cp "$NL2SQL_DATA/bird/dev.json" "$NL2SQL_DATA/bird/dev_tables.json" "$WORK/bird/"
python3 "$SCALE_TOOL" "$NL2SQL_DATA/bird/dev_databases/superhero/superhero.sqlite" \
  "$WORK/bird/dev_databases/superhero/superhero.sqlite" --factor 300 >/dev/null
compare bird300 "$POOL_SPIDER" --benchmark bird --data "$WORK/bird" --question-id 717
