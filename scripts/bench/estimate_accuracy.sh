#!/usr/bin/env bash
# `nl2sql run --estimate` against the run it estimates (issue 39): for each case the estimate is
# made first (no endpoint called: the fake server's request count is checked to stay at zero),
# then the run is made against the fake OpenAI server (scripts/bench/fake_llm_server_tool.cpp,
# --gold: near-gold answers, so the fixer and the tournament work; --prefix-cache: usage reported
# in the server's own tokens), and the script prints, for calls, prompt and completion tokens
# and dollars, the estimate's low / expected / high beside the run's real figure (report.json
# usage.total), the expected value's error and whether the real figure lies in the range. Then
# the estimate again with the run as its previous run (--estimate-from), and the bill of the run.
# The fake server is no model: completion tokens and the shares of fixed candidates and distinct
# results are the fake's, not a model's (the stated defaults of the estimate are not fitted to it).
# Cases:
#   spider_chase    configs/chase.json, Spider dev questions QUESTIONS (default 0-99);
#   superhero_chase configs/chase.json, BIRD superhero, a seeded sample of SAMPLE (default 30, seed 1);
#   spider_ssev     configs/ssev.json (its three experts pointed at the fake server), Spider dev QUESTIONS.
#   NL2SQL_DATA=… scripts/bench/estimate_accuracy.sh
#   PRICE_IN=1.00 PRICE_OUT=4.00 (USD per million tokens), LATENCY_MS=5, SKIP_BUILD=1,
#   SKIP_SPIDER=1 / SKIP_BIRD=1 / SKIP_SSEV=1
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${NL2SQL_DATA:?set NL2SQL_DATA to the benchmark data folder}"
QUESTIONS=${QUESTIONS:-0-99}
SAMPLE=${SAMPLE:-30}
PRICE_IN=${PRICE_IN:-1.00}
PRICE_OUT=${PRICE_OUT:-4.00}
LATENCY=${LATENCY_MS:-5}
. scripts/bench/fake_server_lib.sh
fake_bench_build
echo "fake server with near-gold answers; prices USD/Mtok: input $PRICE_IN, output $PRICE_OUT"

profile() {  # JSON of one profile at the fake server
  echo "{\"base_url\":\"$1\",\"model\":\"fake-$2\",\"api_key_env\":\"\",\"price_in_per_mtok\":$PRICE_IN,\"price_out_per_mtok\":$PRICE_OUT}"
}

measure() {  # label, gold file, config, then run arguments
  local label=$1 gold=$2 config=$3; shift 3
  fake_server_start "$WORK/server-$label.log" --latency-ms "$LATENCY" --gold "$gold" --prefix-cache 16 \
    --price-in "$PRICE_IN" --price-cached "$PRICE_IN" --price-out "$PRICE_OUT" --bill "$WORK/bill-$label.json"
  local url=$URL models
  if [ "$config" = configs/ssev.json ]; then
    models="{\"expert_a\":$(profile "$url" a),\"expert_b\":$(profile "$url" b),\"expert_c\":$(profile "$url" c)}"
  else
    models="{\"default\":$(profile "$url" default)}"
  fi
  local common=(--config "$config" "$@" --index-dir "$WORK/index-$label" --set "llm.models=$models"
                --set llm.cache.path="$WORK/llm-$label.sqlite")
  local t0 t1
  t0=$(date +%s.%N)
  "$BIN" --log-level warn run "${common[@]}" --out "$WORK/run-$label" --estimate --json >"$WORK/estimate-$label.json" \
    2>"$WORK/estimate-stderr-$label" || { echo "estimate failed:"; tail -20 "$WORK/estimate-stderr-$label"; exit 1; }
  t1=$(date +%s.%N)
  "$BIN" --log-level warn run "${common[@]}" --out "$WORK/run-$label" --progress off >"$WORK/stdout-$label" \
    2>"$WORK/stderr-$label" || { echo "run failed:"; tail -20 "$WORK/stderr-$label"; exit 1; }
  "$BIN" --log-level warn run "${common[@]}" --out "$WORK/run-$label" --estimate --json \
    --estimate-from "$WORK/run-$label" >"$WORK/learnt-$label.json" 2>/dev/null
  fake_server_stop
  python3 - "$label" "$WORK/estimate-$label.json" "$WORK/learnt-$label.json" "$WORK/run-$label/report.json" \
    "$WORK/bill-$label.json" "$t0" "$t1" <<'PY'
import json, sys
label, est, learnt, report, bill, t0, t1 = sys.argv[1:8]
secs = float(t1) - float(t0)
est, learnt, report, bill = (json.load(open(f)) for f in (est, learnt, report, bill))
t = report["usage"]["total"]
n = len(report.get("questions", []))
# The server's requests include the preflight (one per profile): the estimate counts the questions' calls.
print(f"{label}: {n} questions; estimate made in {secs:.1f} s; the run sent {bill['requests']} requests "
      f"(report: {t['calls']:.0f} calls)")
for name, e in (("no previous run", est), ("previous run: this one", learnt)):
    print(f"  estimate, {name} ({e['questions']} questions, basis {e['basis']}):")
    for key, actual in (("calls", t["calls"]), ("prompt_tokens", t["prompt_tokens"]),
                        ("completion_tokens", t["completion_tokens"]), ("cost_usd", t["cost_usd"])):
        r = e[key]
        err = 100 * (r["expected"] - actual) / actual if actual else 0
        inside = r["low"] <= actual <= r["high"]
        fmt = "{:,.4f}" if key == "cost_usd" else "{:,.0f}"
        print(f"    {key:<18} low {fmt.format(r['low']):>14}  expected {fmt.format(r['expected']):>14}  "
              f"high {fmt.format(r['high']):>14}  actual {fmt.format(actual):>14}  "
              f"error {err:+6.1f}%  {'in range' if inside else 'OUT OF RANGE'}")
PY
}

if [ -z "${SKIP_SPIDER:-}" ]; then
  measure spider_chase "$NL2SQL_DATA/spider/dev.json" configs/chase.json --benchmark spider --data "$NL2SQL_DATA/spider" \
    --questions "$QUESTIONS"
fi
if [ -z "${SKIP_BIRD:-}" ]; then
  measure superhero_chase "$NL2SQL_DATA/bird/dev.json" configs/chase.json --benchmark bird --data "$NL2SQL_DATA/bird" \
    --db superhero --sample "$SAMPLE" --seed 1
fi
if [ -z "${SKIP_SSEV:-}" ]; then
  measure spider_ssev "$NL2SQL_DATA/spider/dev.json" configs/ssev.json --benchmark spider --data "$NL2SQL_DATA/spider" \
    --questions "$QUESTIONS"
fi
