#!/usr/bin/env bash
# The report's cost against the endpoint's own bill (issue 39): `nl2sql run --config
# configs/chase.json` against the fake OpenAI server (scripts/bench/fake_llm_server_tool.cpp)
# reporting usage as a provider with a prefix cache does (--prefix-cache: the longest prefix, in
# whole blocks of BLOCK tokens of the server's own tokenizer, that an earlier request sent is
# reported as cached, as vLLM's automatic prefix caching serves it), optionally with REASONING
# reasoning tokens per answer, in the usage shape SHAPE (openai | deepseek). The server bills
# every answer at the prices below; the run is given the same prices with --set, and the script
# prints the report's cost (report.json usage.total.cost_usd) beside the server's bill, and what
# the report would say at list price for every prompt token, and the report's prefix_share (the
# most a prefix cache could serve, in characters). Two runs:
#   spider_dev      Spider dev questions QUESTIONS (default the first 100: 0-99);
#   superhero       BIRD superhero, a seeded sample of SAMPLE questions (default 30, seed 1).
#   NL2SQL_DATA=… scripts/bench/provider_bill.sh
#   PRICE_IN=1.00 PRICE_CACHED=0.25 PRICE_OUT=4.00 (USD per million tokens), BLOCK=16,
#   REASONING=0, SHAPE=openai, LATENCY_MS=5, SKIP_BUILD=1 (use BUILD_DIR as it is),
#   SKIP_SPIDER=1 / SKIP_BIRD=1
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${NL2SQL_DATA:?set NL2SQL_DATA to the benchmark data folder}"
QUESTIONS=${QUESTIONS:-0-99}
SAMPLE=${SAMPLE:-30}
PRICE_IN=${PRICE_IN:-1.00}
PRICE_CACHED=${PRICE_CACHED:-0.25}
PRICE_OUT=${PRICE_OUT:-4.00}
BLOCK=${BLOCK:-16}
REASONING=${REASONING:-0}
SHAPE=${SHAPE:-openai}
LATENCY=${LATENCY_MS:-5}
. scripts/bench/fake_server_lib.sh
fake_bench_build
echo "fake server: prefix cache in blocks of $BLOCK tokens, $REASONING reasoning tokens per answer, usage shape $SHAPE;" \
     "prices USD/Mtok: input $PRICE_IN, cached $PRICE_CACHED, output $PRICE_OUT"

measure() {  # label, gold file, then run arguments
  local label=$1 gold=$2; shift 2
  fake_server_start "$WORK/server-$label.log" --latency-ms "$LATENCY" --gold "$gold" --prefix-cache "$BLOCK" \
    --usage-shape "$SHAPE" --reasoning-tokens "$REASONING" --price-in "$PRICE_IN" --price-cached "$PRICE_CACHED" \
    --price-out "$PRICE_OUT" --bill "$WORK/bill-$label.json"
  local url=$URL
  env OPENAI_BASE_URL="$url" OPENAI_API_KEY=bench-key "$BIN" --log-level warn run --config configs/chase.json "$@" \
    --out "$WORK/run-$label" --index-dir "$WORK/index-$label" --progress off \
    --set "llm.models={\"default\":{\"model\":\"fake-model\",\"price_in_per_mtok\":$PRICE_IN,\"price_cached_in_per_mtok\":$PRICE_CACHED,\"price_out_per_mtok\":$PRICE_OUT}}" \
    --set llm.cache.path="$WORK/llm-$label.sqlite" >"$WORK/stdout-$label" 2>"$WORK/stderr-$label" || {
      echo "run failed:"; tail -20 "$WORK/stderr-$label"; exit 1; }
  fake_server_stop
  python3 - "$label" "$WORK/run-$label/report.json" "$WORK/bill-$label.json" "$PRICE_IN" "$PRICE_OUT" <<'PY'
import json, sys
label, report, bill = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
price_in, price_out = float(sys.argv[4]), float(sys.argv[5])
t = report["usage"]["total"]
cost, billed = t["cost_usd"], bill["cost_usd"]
list_price = (t["prompt_tokens"] * price_in + t["completion_tokens"] * price_out) / 1e6
print(f"{label}: {len(report.get('questions', []))} questions, {t['calls']:.0f} calls "
      f"(server: {bill['requests']} requests); prompt tokens {t['prompt_tokens']:.0f} "
      f"(server {bill['prompt_tokens']}), cached {t['cached_tokens']:.0f} (server {bill['cached_tokens']}, "
      f"{100 * bill['cached_tokens'] / max(1, bill['prompt_tokens']):.1f}%), completion {t['completion_tokens']:.0f} "
      f"(server {bill['completion_tokens']}), reasoning {t['reasoning_tokens']:.0f} (server {bill['reasoning_tokens']})")
same = round(cost, 2) == round(billed, 2) and abs(cost - billed) < 0.005
print(f"  report cost ${cost:.4f}, endpoint bill ${billed:.4f}: difference ${cost - billed:+.6f}, "
      f"{'equal to the cent' if same else 'NOT equal to the cent'}; at list price for every prompt token ${list_price:.4f}")
ps = report["usage"].get("prefix_share") or {}
if ps.get("share") is not None:
    print(f"  prefix share {100 * ps['share']:.1f}% ({ps['prefix_chars']} of {ps['prompt_chars']} prompt characters of "
          f"{ps['requests']} requests repeat an earlier request's prefix, blocks of {ps['block_chars']})")
PY
}

if [ -z "${SKIP_SPIDER:-}" ]; then
  measure spider_dev "$NL2SQL_DATA/spider/dev.json" --benchmark spider --data "$NL2SQL_DATA/spider" --questions "$QUESTIONS"
fi
if [ -z "${SKIP_BIRD:-}" ]; then
  measure superhero "$NL2SQL_DATA/bird/dev.json" --benchmark bird --data "$NL2SQL_DATA/bird" --db superhero \
    --sample "$SAMPLE" --seed 1
fi
