#!/usr/bin/env bash
# Fault-mode run: `nl2sql run --config configs/chase.json` on the bundled mini set (or, with
# NL2SQL_DATA set and SPIDER=1, a Spider dev subset) against fake_llm_server_tool in fault mode,
# then prints the figures: requests the server answered, faults it injected by kind, model calls
# the run made, calls that failed after their retries (by reason), retries, questions finished.
# A second pass (FAIL_401_AFTER, default 400) shows the 401 stop: exit code 4 and the message,
# then a resume against a healthy server finishing the run.
#   scripts/bench/fault_run.sh [FAULT_RATE=0.2] [FAULT_SEED=7] [LATENCY_MS=5]
set -euo pipefail
cd "$(dirname "$0")/../.."
RATE=${1:-0.2}
SEED=${2:-7}
LATENCY=${3:-5}
FAIL_401_AFTER=${FAIL_401_AFTER:-400}
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} -DNL2SQL_BUILD_BENCH=ON >/dev/null
cmake --build "$BUILD_DIR" -j "${JOBS:-1}" --target nl2sql fake_llm_server_tool >/dev/null
BIN=$BUILD_DIR/nl2sql
WORK=$(mktemp -d)
SERVER_PID=
trap '[ -n "$SERVER_PID" ] && kill $SERVER_PID 2>/dev/null; rm -rf "$WORK"' EXIT

if [ "${SPIDER:-0}" = 1 ]; then
  : "${NL2SQL_DATA:?SPIDER=1 needs NL2SQL_DATA}"
  DATASET=(--benchmark spider --data "$NL2SQL_DATA/spider" --questions "${QUESTIONS:-0-49}")
else
  DATASET=(--benchmark bird --data "$(scripts/build_mini_dataset.sh "$WORK/mini")")
fi

start_server() {  # extra fault flags
  "$BUILD_DIR/scripts/bench/fake_llm_server_tool" --latency-ms "$LATENCY" "$@" >"$WORK/server.url" 2>"$WORK/server.log" &
  SERVER_PID=$!
  for _ in $(seq 200); do [ -s "$WORK/server.url" ] && break; sleep 0.05; done
  URL=$(cat "$WORK/server.url")
}
stop_server() {  # leaves the server's closing lines in $WORK/server.log
  kill -TERM "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=
  : >"$WORK/server.url"
}
run() {  # out folder, then extra arguments; prints the exit code
  set +e
  env OPENAI_API_KEY=fault-run-key "$BIN" --log-level error run --config configs/chase.json "${DATASET[@]}" \
    --out "$1" --index-dir "$WORK/index" --progress off \
    --set "llm.models={\"flaky\":{\"base_url\":\"$URL\",\"model\":\"fake-model\",\"max_in_flight\":8}}" \
    --set llm.default_profile=flaky --set llm.cache.path="$WORK/llm.sqlite" \
    --set llm.retry.base_delay_s=0.01 --set llm.retry.max_delay_s=0.05 \
    --set run.threads=8 "${@:2}" >"$WORK/stdout" 2>"$WORK/stderr"
  echo $?
  set -e
}
figures() {  # run folder
  python3 - "$1/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
f = r.get("llm_faults", {})
calls = sum(int(v.get("calls", 0)) for v in r["usage"]["stages"].values())
print(f"  questions finished: {r['n_questions']}/{r['n_expected']} ({len(r['errors'])} failed)")
print(f"  model calls in the records: {calls}")
print(f"  failed after retries: {f.get('failed_calls')} {json.dumps(f.get('failed_by_kind', {}))}")
print(f"  retries: {f.get('retries')}; questions affected: {f.get('questions_affected')}")
PY
}

echo "== fault mode: rate $RATE, seed $SEED, ${LATENCY} ms per answer"
start_server --fault-rate "$RATE" --fault-seed "$SEED"
code=$(run "$WORK/run")
stop_server
echo "  server: $(tr '\n' ' ' <"$WORK/server.log")"
echo "  nl2sql exit code: $code"
grep -E "model calls this invocation|EX " "$WORK/stdout" | sed 's/^/  /' || true
figures "$WORK/run"

echo "== 401 after $FAIL_401_AFTER requests, then resume with a healthy server"
start_server --fail-401-after "$FAIL_401_AFTER"
code=$(run "$WORK/run401" --set llm.cache.mode=off)
stop_server
echo "  server: $(tr '\n' ' ' <"$WORK/server.log")"
echo "  nl2sql exit code: $code (4 = stopped by an auth failure)"
grep -E "stopped early|finished questions" "$WORK/stdout" | sed 's/^/  /' || true
PORT=${URL%/v1}; PORT=${PORT##*:}
start_server --port "$PORT"  # the same URL: the resume check compares the config
code=$(run "$WORK/run401" --set llm.cache.mode=off)
stop_server
echo "  resume exit code: $code"
grep -E "resumed" "$WORK/stdout" | sed 's/^/  /' || true
figures "$WORK/run401"
