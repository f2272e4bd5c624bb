#!/usr/bin/env bash
# Whole-pipeline benchmark (issue: nl2sql run). `nl2sql run --config configs/chase.json` against
# a fake OpenAI server with a fixed latency (default 100 ms) and 32 requests in flight, on the
# first 200 Spider dev questions, then on BIRD superhero at BIRD scale (superhero x300, made now
# by shared/tools/scale_db.py, never committed; a seeded sample of 30 of its questions).
# For each: wall time, the requests the server answered, the lower bound
#   max(requests x latency / in_flight, longest per-question critical path x latency)
# where a question's critical path counts the calls that must follow one another (context
# stages, the longest generator chain, the longest fixer chain, one selection round), the ratio
# wall / bound (target <= 1.15) and peak RSS.
#   NL2SQL_DATA=… scripts/bench/pipeline_bench.sh [SPIDER_QUESTIONS=0-199] [LATENCY_MS=100] [SCALE_SAMPLE=30]
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${NL2SQL_DATA:?set NL2SQL_DATA to the benchmark data folder}"
QUESTIONS=${1:-0-199}
LATENCY=${2:-100}
SCALE_SAMPLE=${3:-30}
IN_FLIGHT=32
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} -DNL2SQL_BUILD_BENCH=ON >/dev/null
cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}" --target nl2sql fake_llm_server_tool
BIN=$BUILD_DIR/nl2sql
WORK=$(mktemp -d)
trap '[ -n "$SERVER_PID" ] && kill $SERVER_PID 2>/dev/null; rm -rf "$WORK"' EXIT

SERVER_PID=
start_server() {  # one server per measured run, so its request count is that run's
  "$BUILD_DIR/scripts/bench/fake_llm_server_tool" "$LATENCY" >"$WORK/server.url" 2>"$WORK/server.log" &
  SERVER_PID=$!
  for _ in $(seq 200); do [ -s "$WORK/server.url" ] && break; sleep 0.05; done
  URL=$(cat "$WORK/server.url")
}
stop_server() {
  kill -TERM "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true
  : >"$WORK/server.url"
  sed -n 's/.*: \([0-9]*\) requests/\1/p' "$WORK/server.log"
}
echo "fake server: ${LATENCY} ms per request, $IN_FLIGHT requests in flight"

bench() {  # label, then run arguments
  local label=$1; shift
  local out="$WORK/run-$label"
  start_server
  /usr/bin/time -f "%e %M" -o "$WORK/time-$label" \
    env OPENAI_API_KEY=bench-key "$BIN" --log-level warn run --config configs/chase.json "$@" --out "$out" \
      --index-dir "$WORK/index" --progress off \
      --set "llm.models={\"bench\":{\"base_url\":\"$URL\",\"model\":\"fake-model\",\"max_in_flight\":$IN_FLIGHT}}" \
      --set llm.default_profile=bench \
      --set llm.max_in_flight=$IN_FLIGHT --set llm.cache.path="$WORK/llm-$label.sqlite" \
      --set run.threads=$IN_FLIGHT >"$WORK/stdout-$label" 2>"$WORK/stderr-$label" || {
        echo "run failed:"; tail -20 "$WORK/stderr-$label"; exit 1; }
  read -r wall rss_kb <"$WORK/time-$label"
  local requests
  requests=$(stop_server)
  python3 - "$out/run.sqlite" "$wall" "$rss_kb" "$LATENCY" "$IN_FLIGHT" "$label" "$requests" <<'PY'
import json, sqlite3, sys
db, wall, rss_kb, latency, in_flight, label = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]) / 1000, int(sys.argv[5]), sys.argv[6]
requests = int(sys.argv[7])
con = sqlite3.connect(db)
calls = 0; cached = 0; longest = 0; n = 0
for (payload,) in con.execute("SELECT payload FROM stages WHERE stage = 'final'"):
    r = json.loads(payload); n += 1
    def count(cs):
        global calls, cached
        for c in cs or []:
            if c.get("from_cache"): cached += 1
            else: calls += 1
    ctx = r.get("context", {}).get("calls", [])
    count(ctx)
    gen_depth = {}
    fix_depth = 0
    for c in r.get("candidates", []):
        count(c.get("calls"))
        gen_depth[c.get("generator")] = max(gen_depth.get(c.get("generator"), 0), len(c.get("calls") or []))
        rounds = c.get("fix_rounds") or []
        count([x.get("call", {}) for x in rounds if x.get("call")])
        fix_depth = max(fix_depth, len(rounds))
    sel_depth = 0
    for s in (r.get("selections") or {}).values():
        count(s.get("calls"))
        if s.get("calls"): sel_depth = 1
    ctx_depth = len({c.get("stage") for c in ctx})
    longest = max(longest, ctx_depth + max(gen_depth.values() or [0]) + fix_depth + sel_depth)
# Every request the server answered counts (also calls no trace keeps, e.g. the selector
# re-runs behind the curves).
bound = max(requests * latency / in_flight, longest * latency)
print(f"{label}: {n} questions, wall {wall:.1f} s, server requests {requests} "
      f"(traced calls {calls}, +{cached} cache hits), "
      f"longest critical path {longest} calls; lower bound {bound:.1f} s; "
      f"ratio wall/bound {wall / bound:.3f} (target <= 1.15); peak RSS {rss_kb / 1024:.0f} MiB")
PY
}

bench spider_dev --benchmark spider --data "$NL2SQL_DATA/spider" --questions "$QUESTIONS"

SCALE_TOOL="$NL2SQL_DATA/../tools/scale_db.py"
if [ -f "$SCALE_TOOL" ]; then
  mkdir -p "$WORK/scaled/dev_databases/superhero"
  cp "$NL2SQL_DATA/bird/dev.json" "$NL2SQL_DATA/bird/dev_tables.json" "$WORK/scaled/"
  cp -r "$NL2SQL_DATA/bird/dev_databases/superhero/database_description" "$WORK/scaled/dev_databases/superhero/"
  python3 "$SCALE_TOOL" "$NL2SQL_DATA/bird/dev_databases/superhero/superhero.sqlite" \
    "$WORK/scaled/dev_databases/superhero/superhero.sqlite" --factor 300 | tail -1
  bench superhero_x300 --benchmark bird --data "$WORK/scaled" --db superhero --sample "$SCALE_SAMPLE" --seed 1
fi
