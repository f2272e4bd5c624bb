#!/usr/bin/env bash
# Selection measured on the same candidate pools (issue: selection), with the offline `sim`
# provider — SIMULATED answers derived from gold: this validates the machinery, not any model.
# `nl2sql run` with the CHASE generators at 7 samples each (21 candidates per question) and every
# selector side by side, on Spider dev and BIRD superhero. Prints per selector: EX, LLM calls per
# question; the oracle and adversarial bounds; the tournament's pairwise binary accuracy on the
# model-decided pairs where exactly one candidate is correct.
#   NL2SQL_DATA=… scripts/bench/selectors_sim.sh [SPIDER_QUESTIONS=0-1033] [BIRD_QUESTIONS=all]
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${NL2SQL_DATA:?set NL2SQL_DATA to the benchmark data folder}"
SPIDER_Q=${1:-}
BIRD_Q=${2:-}
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} >/dev/null
cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}" --target nl2sql
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
SETS=(--set 'llm.models={"sim":{"provider":"sim"}}' --set llm.default_profile=sim --set llm.cache.mode=off
      --set 'run.selectors=["tournament","self_consistency","ranker","separating_instances","wma","rwma","naive_vote"]'
      --set run.primary_selector=tournament --set run.curve_selector=false)

measure() {  # label, then dataset arguments
  local label=$1; shift
  local s e
  s=$(date +%s.%N)
  "$BUILD_DIR/nl2sql" --log-level error run --config configs/chase.json "$@" --out "$WORK/$label" \
    --index-dir "$WORK/index" --progress off "${SETS[@]}" >/dev/null
  e=$(date +%s.%N)
  python3 - "$WORK/$label/run.sqlite" "$label" "$(python3 -c "print($e-$s)")" <<'PY'
import json, sqlite3, sys
db, label, wall = sys.argv[1], sys.argv[2], float(sys.argv[3])
recs = [json.loads(p) for (p,) in sqlite3.connect(db).execute("SELECT payload FROM stages WHERE stage='final'")]
n = len(recs)
cands = sum(len(r.get("candidates", [])) for r in recs)
print(f"== {label} (SIMULATED): {n} questions, {cands / max(n, 1):.1f} candidates/question, wall {wall:.0f} s")
sels = {}
for r in recs:
    for name, s in (r.get("selections") or {}).items():
        d = sels.setdefault(name, [0, 0])
        d[0] += bool(s.get("correct")); d[1] += s.get("llm_calls", 0)
for name, (ok, calls) in sorted(sels.items(), key=lambda x: -x[1][0]):
    print(f"  {name:22s} EX {100 * ok / n:6.2f}%   LLM calls/question {calls / n:6.1f}")
oracle = sum(bool(r.get("bounds", {}).get("oracle")) for r in recs)
adv = sum(bool(r.get("bounds", {}).get("adversarial")) for r in recs)
print(f"  {'oracle (upper bound)':22s} EX {100 * oracle / n:6.2f}%")
print(f"  {'adversarial (lower)':22s} EX {100 * adv / n:6.2f}%")
right = total = 0
for r in recs:
    correct = {c["id"]: c.get("correct") for c in r.get("candidates", [])}
    t = (r.get("selections") or {}).get("tournament", {}).get("explanation", {})
    for d in t.get("decisions", []):
        if d.get("by") != "model": continue
        a, b = correct.get(d["a"]), correct.get(d["b"])
        if a is None or b is None or a == b: continue
        total += 1
        right += correct.get(d["winner"]) is True
if total:
    print(f"  tournament pairwise binary accuracy: {100 * right / total:.2f}% of {total} model-decided (correct, incorrect) pairs")
PY
}

measure spider_dev --benchmark spider --data "$NL2SQL_DATA/spider" ${SPIDER_Q:+--questions "$SPIDER_Q"}
measure bird_superhero --benchmark bird --data "$NL2SQL_DATA/bird" --db superhero ${BIRD_Q:+--questions "$BIRD_Q"}
