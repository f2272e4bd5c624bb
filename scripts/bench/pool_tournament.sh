#!/usr/bin/env bash
# A candidate pool read from a file through the pairwise tournament and the curves over K (issue 37):
# POOL candidates per question for Spider dev questions QUESTIONS, against a fake OpenAI server that
# answers every call after LATENCY_MS (scripts/bench/fake_llm_server_tool.cpp: a pairwise verdict for
# a selection prompt). Two steps:
#   1. the pool: `nl2sql run` with the `baseline` generator sampling POOL candidates per question from
#      the offline sim provider (gold or a mistake of its taxonomy: SIMULATED candidates), collected
#      from report.json into {question_id: [sql, …]} — the layout published pools use;
#   2. the measured run: generator `file` reading that pool, fixer off, the tournament as primary
#      selector with curve points CURVE (each re-runs the tournament on the first k candidates),
#      RUN_THREADS questions at a time, a new LLM cache (the curves' pairs repeat the full pool's).
# The measured run goes twice: against an instant server (what the run costs besides the model: start,
# executions, curves, evaluation, reports) and at LATENCY_MS. Prints the requests the server received,
# the LLM-latency bound — requests × latency / requests in flight (RUN_THREADS, also the profile's
# max_in_flight), what a perfectly parallel client would need — the wall times and wall / bound.
#   NL2SQL_DATA=/path/to/data BUILD_DIR=build-bench scripts/bench/pool_tournament.sh
#   POOL=24 QUESTIONS=0-99 LATENCY_MS=200 RUN_THREADS=16 CURVE=1,3,6,12,24 SKIP_BUILD=1
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${NL2SQL_DATA:?set NL2SQL_DATA to the folder holding spider/}"
POOL=${POOL:-24}
QUESTIONS=${QUESTIONS:-0-99}
LATENCY=${LATENCY_MS:-200}
THREADS=${RUN_THREADS:-16}
CURVE=${CURVE:-1,3,6,12,24}
BUILD_DIR=${BUILD_DIR:-build-bench}
BUILD_TYPE=${BUILD_TYPE:-Release}
. scripts/bench/fake_server_lib.sh
fake_bench_build
BIN=$(realpath "$BIN")
start_server() {  # start_server LATENCY_MS LOG
  fake_server_start "$2" --latency-ms "$1" --gold "$NL2SQL_DATA/spider/dev.json"
}
config() {  # config GENERATORS SELECTION CACHE_DIR: a run config against the fake at $URL
  cat <<EOF
{"llm": {"models": {"main": {"base_url": "$URL", "model": "fake-model", "api_key_env": "", "max_in_flight": $THREADS}},
         "default_profile": "main", "cache": {"mode": "read-write", "path": "$3/llm_cache.sqlite"}, "preflight": false},
 "context": {"keywords": {"llm": false}},
 "generate": {"generators": $1},
 "fix": {"enabled": false},
 $2}
EOF
}
DATA_ARGS=(--benchmark spider --data "$NL2SQL_DATA/spider" --questions "$QUESTIONS" --index-dir "$WORK/index" --progress off)

echo "pool_tournament: making the pool ($POOL candidates per question, questions $QUESTIONS, the offline sim provider)"
cat >"$WORK/pool.config" <<EOF
{"llm": {"models": {"sim": {"provider": "sim"}}, "default_profile": "sim", "cache": {"mode": "off"}},
 "context": {"keywords": {"llm": false}},
 "generate": {"generators": [{"name": "baseline", "samples": $POOL, "temperature": 1.0}]},
 "fix": {"enabled": false},
 "run": {"threads": 2, "selectors": ["self_consistency"], "curve_points": [1]}}
EOF
"$BIN" --log-level error run --config "$WORK/pool.config" "${DATA_ARGS[@]}" --out "$WORK/pool_run" >/dev/null
python3 - "$WORK/pool_run/report.json" "$WORK/pool.json" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
pool, distinct = {}, []
for q in report["questions"]:
    sqls = [c["sql"] for c in q["candidates"] if c.get("sql")]
    if sqls:
        pool[q["question_id"]] = sqls
        distinct.append(len({c.get("cluster") for c in q["candidates"]}))
json.dump(pool, open(sys.argv[2], "w"), indent=1)
sizes = sorted(len(v) for v in pool.values())
print(f"pool_tournament: pool of {len(pool)} questions, {sum(sizes)} candidates "
      f"(min {sizes[0]}, max {sizes[-1]} per question), distinct results per question: "
      f"mean {sum(distinct) / len(distinct):.1f}, max {max(distinct)}")
PY

measured_run() {  # measured_run LATENCY_MS NAME: sets WALL and REQUESTS
  start_server "$1" "$WORK/server-$2.log"
  config '[{"name": "file", "label": "pool", "path": "'"$WORK/pool.json"'"}]' \
    '"select": {"method": "tournament"},
     "run": {"threads": '"$THREADS"', "selectors": ["tournament"], "primary_selector": "tournament", "curve_points": ['"$CURVE"']}' \
    "$WORK/cache-$2" >"$WORK/run-$2.config"
  /usr/bin/time -f "%e %U %S" -o "$WORK/time-$2" \
    "$BIN" --log-level error run --config "$WORK/run-$2.config" "${DATA_ARGS[@]}" --out "$WORK/run-$2" >/dev/null
  read -r WALL user sys <"$WORK/time-$2"
  CPU=$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.2f", u + s }')
  fake_server_stop "$WORK/server-$2.log"
}
echo "pool_tournament: the tournament over the pool, $THREADS questions at a time, curve points $CURVE;" \
     "first with an instant server (what the run costs besides the model), then at $LATENCY ms a call"
measured_run 0 instant
floor=$WALL
floor_cpu=$CPU
measured_run "$LATENCY" latency
python3 - "$WORK/run-latency/report.json" "$WALL" "$REQUESTS" "$LATENCY" "$THREADS" "$floor" "$CPU" "$floor_cpu" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
wall, requests, latency, threads, floor = float(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
cpu, floor_cpu = float(sys.argv[7]), float(sys.argv[8])
calls = {}
for q in report["questions"]:
    for stage, u in (q.get("usage") or {}).items():
        if isinstance(u, dict):
            calls[stage] = calls.get(stage, 0) + int(u.get("calls", 0))
bound = requests * latency / 1000.0 / threads
finished = sum(1 for q in report["questions"] if q["status"] == "ok")
sel = report.get("selectors", {})
print(f"pool_tournament: {finished}/{len(report['questions'])} questions ok; model calls per stage (records): {calls}")
print(f"pool_tournament: requests to the server {requests}; LLM-latency bound {requests} x {latency / 1000:.3f} s / "
      f"{threads} in flight = {bound:.1f} s")
print(f"pool_tournament: wall {wall:.1f} s, nl2sql's CPU {cpu:.1f} s (instant server: wall {floor:.1f} s, CPU "
      f"{floor_cpu:.1f} s); wall / bound {wall / bound:.2f}")
curves = report.get("curves") or {}
print("pool_tournament: curves over K: " + json.dumps(curves)[:400])
PY
