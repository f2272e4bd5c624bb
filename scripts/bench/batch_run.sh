#!/usr/bin/env bash
# A batch profile against a synchronous one (issue 39, part 4): `nl2sql run --config
# configs/chase.json` on Spider dev questions QUESTIONS (default 0-99) twice against the fake
# OpenAI server (scripts/bench/fake_llm_server_tool.cpp, answering from the gold queries by the
# request's hash, so the same request gets the same answer either way): once synchronously, once
# with the profile's `batch` key on, the fake's Batch API completing each job BATCH_LATENCY_MS
# (default 2000) after it was created. Prints, per run, the wall time, the calls and the cost of
# report.json, the batch jobs the server saw; then whether the two runs decided alike per
# question (prediction, verdicts, candidates' SQL and verdicts, selections), read from their run
# stores' final records.
#   NL2SQL_DATA=… scripts/bench/batch_run.sh
#   LATENCY_MS=5 (a synchronous answer's latency), GATHER_MS=200, POLL_S=0.25, POLL_MAX_S=1,
#   THREADS (run.threads; default the config's), SKIP_BUILD=1 (use BUILD_DIR as it is)
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${NL2SQL_DATA:?set NL2SQL_DATA to the benchmark data folder}"
QUESTIONS=${QUESTIONS:-0-99}
BATCH_LATENCY=${BATCH_LATENCY_MS:-2000}
LATENCY=${LATENCY_MS:-5}
GATHER_MS=${GATHER_MS:-200}
POLL_S=${POLL_S:-0.25}
POLL_MAX_S=${POLL_MAX_S:-1}
. scripts/bench/fake_server_lib.sh
fake_bench_build

run_once() {  # label, profile JSON
  local label=$1 profile=$2
  fake_server_start "$WORK/server-$label.log" --latency-ms "$LATENCY" --batch-latency-ms "$BATCH_LATENCY" \
    --gold "$NL2SQL_DATA/spider/dev.json"
  local start end
  start=$(date +%s.%N)
  env OPENAI_BASE_URL="$URL" OPENAI_API_KEY=bench-key "$BIN" --log-level warn run --config configs/chase.json \
    --benchmark spider --data "$NL2SQL_DATA/spider" --questions "$QUESTIONS" \
    --out "$WORK/run-$label" --index-dir "$WORK/index" --progress off \
    --set "llm.models={\"default\":$profile}" --set llm.cache.mode=off ${THREADS:+--set run.threads=$THREADS} \
    >"$WORK/stdout-$label" 2>"$WORK/stderr-$label" || { echo "run failed:"; tail -20 "$WORK/stderr-$label"; exit 1; }
  end=$(date +%s.%N)
  fake_server_stop "$WORK/server-$label.log"
  local jobs
  jobs=$(sed -n 's/^batch: jobs=\([0-9]*\) lines=\([0-9]*\)$/\1 jobs, \2 lines/p' "$WORK/server-$label.log")
  python3 - "$label" "$WORK/run-$label/report.json" "$start" "$end" "$REQUESTS" "$jobs" "$(head -1 "$WORK/stdout-$label")" <<'PY'
import json, sys
label, report, start, end, requests, jobs, line = sys.argv[1], json.load(open(sys.argv[2])), *sys.argv[3:]
t = report["usage"]["total"]
print(f"{label}: wall {float(end) - float(start):.1f} s; report: {t['calls']:.0f} calls, cost ${t['cost_usd']:.4f}; "
      f"server: {requests} synchronous requests, batch {jobs}; {line}")
PY
}

PRICES='"model":"fake-model","price_in_per_mtok":1.0,"price_out_per_mtok":4.0'
run_once sync "{$PRICES}"
run_once batch "{$PRICES,\"batch\":{\"gather_ms\":$GATHER_MS,\"poll_s\":$POLL_S,\"poll_max_s\":$POLL_MAX_S},\"batch_discount\":0.5}"

python3 - "$WORK/run-sync/run.sqlite" "$WORK/run-batch/run.sqlite" <<'PY'
import json, sqlite3, sys
def decisions(path):
    out = {}
    for qid, payload in sqlite3.connect(path).execute("SELECT question_id, payload FROM stages WHERE stage = 'final'"):
        r = json.loads(payload)
        out[qid] = {
            "prediction": r.get("prediction"),
            "verdict": (r.get("verdict") or {}).get("verdicts"),
            "candidates": [(c.get("id"), c.get("sql"), (c.get("judged") or {}).get("verdicts")) for c in r.get("candidates", [])],
            "selections": {k: (v.get("candidate_id"), v.get("sql")) for k, v in (r.get("selections") or {}).items()},
        }
    return out
a, b = decisions(sys.argv[1]), decisions(sys.argv[2])
differ = [q for q in sorted(set(a) | set(b)) if a.get(q) != b.get(q)]
cands = sum(len(v["candidates"]) for v in a.values())
print(f"questions: {len(a)} synchronous, {len(b)} batch; candidates {cands}; "
      f"questions deciding differently: {len(differ)} {differ[:10]}")
sys.exit(1 if differ or len(a) != len(b) else 0)
PY
