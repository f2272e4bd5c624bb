#!/usr/bin/env bash
# Agentic generators (issue 9): tokens and LLM latency per question for each generator, p50/p90/p95,
# from one `nl2sql run --config configs/agentic_chase.json` (dc, qp, os, agent, recap in one pool)
# against the fake OpenAI server with a fixed latency (default 50 ms). The server answers every
# request with the same kind of canned text (a verdict line, a JSON array, one of five SQL
# queries), so the agentic loops see real executions of that SQL and escalate or stop as they
# would; what is measured is the cost of the loops' shape, not any model's accuracy.
# Per question and generator: tokens = prompt + completion tokens of all its candidates' calls;
# LLM latency = the sum of those calls' latencies (a generator's samples and steps run one after
# another inside the question; generators run in parallel). Also model calls per candidate.
# Runs on the bundled mini set (21 questions); with NL2SQL_DATA set, also on a seeded sample of
# BIRD superhero questions.
#   [NL2SQL_DATA=…] [SKIP_BUILD=1] scripts/bench/agentic_bench.sh [LATENCY_MS=50] [SUPERHERO_SAMPLE=30]
set -euo pipefail
cd "$(dirname "$0")/../.."
LATENCY=${1:-50}
SAMPLE=${2:-30}
IN_FLIGHT=16
BUILD_DIR=${BUILD_DIR:-build}
if [ -z "${SKIP_BUILD:-}" ]; then  # SKIP_BUILD=1: use the binaries already in BUILD_DIR
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} -DNL2SQL_BUILD_BENCH=ON >/dev/null
  cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}" --target nl2sql fake_llm_server_tool
fi
BIN=$BUILD_DIR/nl2sql
WORK=$(mktemp -d)
SERVER_PID=
trap '[ -n "$SERVER_PID" ] && kill $SERVER_PID 2>/dev/null; rm -rf "$WORK"' EXIT

# The bundled mini set, built from its SQL scripts.
MINI=$WORK/mini
cp -r tests/fixtures/mini_bird "$MINI"
for d in "$MINI"/dev_databases/*/; do
  name=$(basename "$d")
  python3 -c 'import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.executescript(open(sys.argv[2]).read()); c.commit()' \
    "$d/$name.sqlite" "$d/$name.sql"
  rm "$d/$name.sql"
done

start_server() {
  "$BUILD_DIR/scripts/bench/fake_llm_server_tool" "$LATENCY" >"$WORK/server.url" 2>"$WORK/server.log" &
  SERVER_PID=$!
  for _ in $(seq 200); do [ -s "$WORK/server.url" ] && break; sleep 0.05; done
  URL=$(cat "$WORK/server.url")
}
stop_server() {
  kill -TERM "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=
  : >"$WORK/server.url"
}
echo "fake server: ${LATENCY} ms per request, $IN_FLIGHT requests in flight (canned answers: not a model)"

bench() {  # label, then run arguments
  local label=$1; shift
  local out="$WORK/run-$label"
  start_server
  /usr/bin/time -f "%e" -o "$WORK/time-$label" \
    env OPENAI_API_KEY=bench-key "$BIN" --log-level warn run --config configs/agentic_chase.json "$@" --out "$out" \
      --index-dir "$WORK/index" --progress off \
      --set "llm.models={\"bench\":{\"base_url\":\"$URL\",\"model\":\"fake-model\",\"max_in_flight\":$IN_FLIGHT}}" \
      --set llm.default_profile=bench --set llm.max_in_flight=$IN_FLIGHT \
      --set llm.cache.path="$WORK/llm-$label.sqlite" --set run.threads=8 \
      >"$WORK/stdout-$label" 2>"$WORK/stderr-$label" || { echo "run failed:"; tail -20 "$WORK/stderr-$label"; exit 1; }
  stop_server
  python3 - "$out/run.sqlite" "$(cat "$WORK/time-$label")" "$label" <<'PY'
import json, sqlite3, sys
from collections import defaultdict
db, wall, label = sys.argv[1], float(sys.argv[2]), sys.argv[3]
tokens = defaultdict(list); latency = defaultdict(list); calls = defaultdict(list); steps = defaultdict(lambda: defaultdict(int))
n = 0
for (payload,) in sqlite3.connect(db).execute("SELECT payload FROM stages WHERE stage = 'final'"):
    r = json.loads(payload); n += 1
    per_tok = defaultdict(int); per_lat = defaultdict(float)
    for c in r.get("candidates", []):
        g = c.get("generator", "?")
        cs = c.get("calls") or []
        calls[g].append(len(cs))
        for x in cs:
            per_tok[g] += x.get("prompt_tokens", 0) + x.get("completion_tokens", 0)
            per_lat[g] += x.get("latency_s", 0.0)
            if g in ("agent", "recap"): steps[g][x.get("stage", "?")] += 1
    for g in per_tok:
        tokens[g].append(per_tok[g]); latency[g].append(per_lat[g])
def pct(v, p):
    v = sorted(v); k = min(len(v) - 1, max(0, round(p / 100 * (len(v) - 1))))
    return v[k]
print(f"{label}: {n} questions, wall {wall:.1f} s")
print(f"  {'generator':10} {'tokens/question p50/p90/p95':>30} {'LLM latency s/question p50/p90/p95':>38} {'calls/candidate p50/p95/max':>28}")
for g in sorted(tokens):
    t, l, c = tokens[g], latency[g], calls[g]
    print(f"  {g:10} {pct(t,50):>10} {pct(t,90):>9} {pct(t,95):>9} {pct(l,50):>12.2f} {pct(l,90):>12.2f} {pct(l,95):>12.2f}"
          f" {pct(c,50):>10} {pct(c,95):>8} {max(c):>8}")
for g in sorted(steps):
    print(f"  {g} calls by stage: " + ", ".join(f"{k} {v}" for k, v in sorted(steps[g].items())))
PY
}

bench mini --benchmark bird --data "$MINI"
if [ -n "${NL2SQL_DATA:-}" ]; then
  bench superhero --benchmark bird --data "$NL2SQL_DATA/bird" --db superhero --sample "$SAMPLE" --seed 1
fi
