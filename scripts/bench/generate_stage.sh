#!/usr/bin/env bash
# Generate + fix stage benchmark (issue 6), with the offline `sim` provider: per generator, how
# many candidates execute before and after the execution-feedback fixer, the first candidate's
# EX before/after fixing, and the upper-bound EX (some candidate equals gold) as the candidate
# pool grows (1, 3, 7, 21 candidates round-robin over dc, qp and os with 7 samples each) on
# Spider dev and BIRD superhero; generate + fix stage time per question (run.threads=1: one
# question at a time, so a stage's latency is its own work).
# The answers are SIMULATED (gold-derived with a controlled error rate): the numbers validate
# the machinery — extraction, execution, fixing, judging — not any model.
#
# Everything comes from the product itself: `nl2sql run` (report.json: the generators section,
# the curves, each candidate's verdict and stage latencies) and `nl2sql eval` for the first
# candidates' SQL as generated, before the fixer touched it. Two runs per dataset: the pool
# (dc, qp, os) whose curve is the upper bound, and the two baselines (baseline; ssev with two
# experts) beside it.
#
#   NL2SQL_DATA=/path/to/data BUILD_DIR=build scripts/bench/generate_stage.sh [--max-questions N]
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${NL2SQL_DATA:?set NL2SQL_DATA to the folder holding spider/ and bird/}"
BIN=${BUILD_DIR:-build}/nl2sql
SPIDER_Q=()
while [ $# -gt 0 ]; do
  case "$1" in
    --max-questions) SPIDER_Q=(--questions "0-$(($2 - 1))"); shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -x "$BIN" ] || { echo "build first: $BIN missing" >&2; exit 2; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
COMMON=(--set 'llm.models={"sim":{"provider":"sim"},"sim2":{"provider":"sim"}}' --set llm.default_profile=sim
        --set llm.cache.mode=off --set fix.max_rounds=3 --set run.curve_selector=false
        --set 'run.curve_points=[1,3,7,21]' --set run.threads=1)
POOL=(--set 'generate.generators=[{"name":"dc","samples":7,"shuffle":true},{"name":"qp","samples":7,"shuffle":true},{"name":"os","samples":7,"shuffle":true}]')
BASELINES=(--set 'generate.generators=[{"name":"baseline"},{"name":"ssev","profiles":["sim","sim2"]}]')

run() {  # label, then arguments of nl2sql run
  local label=$1; shift
  /usr/bin/time -f "   $label: %e s wall, %M KB max RSS" \
    "$BIN" --log-level error run --config configs/base.json "${COMMON[@]}" "$@" --out "$WORK/$label" \
      --index-dir "$WORK/index" --progress off >/dev/null
}

# The first candidate of each generator, as extracted before fixing, scored by nl2sql eval.
first_before() {  # label, then dataset arguments
  local label=$1; shift
  python3 - "$WORK/$label/report.json" "$WORK/$label-first" <<'PY'
import json, sys
report, out = sys.argv[1], sys.argv[2]
firsts = {}
for q in json.load(open(report))["questions"]:
    for c in q.get("candidates", []):
        if c.get("sample_index") == 0 and c["generator"] not in firsts.get(q["question_id"], {}):
            firsts.setdefault(q["question_id"], {})[c["generator"]] = c.get("original_sql") or c.get("sql") or ""
gens = sorted({g for per in firsts.values() for g in per})
for g in gens:
    with open(f"{out}.{g}.jsonl", "w") as f:
        for qid, per in firsts.items():
            if g in per:
                f.write(json.dumps({"question_id": qid, "sql": per[g]}) + "\n")
print(" ".join(gens))
PY
}

summarize() {  # label
  python3 - "$WORK/$1" <<'PY'
import glob, json, os, sys
base = sys.argv[1]
r = json.load(open(base + "/report.json"))
qs = [q for q in r["questions"] if q.get("status") == "ok" and not q.get("verdict", {}).get("gold_unusable")]
n = len(qs)
ids = {q["question_id"] for q in qs}
before = {}
for path in glob.glob(base + "-first.*.eval/eval.json"):
    g = path.split("-first.")[1].split(".eval")[0]
    before[g] = sum(1 for it in json.load(open(path))["items"]
                    if it["question_id"] in ids and it["verdicts"].get(r["primary_metric"]))
def pct(a, b): return 100.0 * a / b if b else 0.0
print(f"   {n} questions{' -- SIMULATED answers (sim provider): machinery check, not a model' if r.get('simulated') else ''}")
print(f"   {'generator':<10} {'cands':>6} {'exec before':>11} {'exec after':>11} {'rounds':>7} {'EX1 before':>10} {'EX1 after':>10} {'any EX':>7}")
for g, s in sorted(r["generators"].items()):
    first_after = sum(1 for q in qs for c in q["candidates"]
                      if c["generator"] == g and c.get("sample_index") == 0 and c.get("correct"))
    print(f"   {g:<10} {s['candidates']:>6} {s['executable_before_fix_pct']:>10.1f}% {s['executable_after_fix_pct']:>10.1f}%"
          f" {s['fix_rounds'] / max(s['candidates'], 1):>7.2f} {pct(before.get(g, 0), n):>9.1f}% {pct(first_after, n):>9.1f}%"
          f" {s['upper_bound_pct']:>6.1f}%")
curve = " ".join(f"{p['k']} cand {p['upper']:.1f}%" for p in r.get("curves", []))
if curve: print(f"   upper bound EX (some candidate equals gold), round-robin over the run's generators: {curve}")
lat = r.get("latency_s", {})
ms = 1000 * sum(lat.get(s, {}).get("mean", 0.0) for s in ("generate", "fix"))
print(f"   generate + fix stage time per question: {ms:.2f} ms (one question at a time; sim answers computed in-process, no LLM latency)")
PY
}

measure() {  # slug, title, benchmark, data folder, then arguments only the run takes
  local slug=$1 title=$2 bench=$3 data=$4; shift 4
  echo "== $title (sim)"
  for part in pool baselines; do
    local label="$slug-$part" sets
    if [ "$part" = pool ]; then sets=("${POOL[@]}"); else sets=("${BASELINES[@]}"); fi
    run "$label" "${sets[@]}" --benchmark "$bench" --data "$data" "$@"
    for g in $(first_before "$label"); do
      "$BIN" --log-level error eval --benchmark "$bench" --data "$data" --pred "$WORK/$label-first.$g.jsonl" \
        --pred-format jsonl --out "$WORK/$label-first.$g.eval" --no-cache >/dev/null
    done
    summarize "$label"
  done
}

measure spider "Spider dev" spider "$NL2SQL_DATA/spider" "${SPIDER_Q[@]}"
measure bird "BIRD dev, superhero" bird "$NL2SQL_DATA/bird" --db superhero
