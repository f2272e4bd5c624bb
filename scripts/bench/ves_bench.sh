#!/usr/bin/env bash
# Benchmark of `nl2sql eval --metric ves,rves` (issue 23) against a Python reimplementation of
# the official timing loops (scripts/bench/ves_reference.py: the same repeats, fresh connection
# per query, prediction then gold, one pair at a time), on BIRD superhero and on superhero x300
# (made now by shared/tools/scale_db.py, never committed). Predictions (VES_PRED): `varied`
# (default) keeps gold for a third of the questions and wraps the rest in a costlier query with
# the same answer, so ratios spread over R-VES's bins; `gold` uses gold throughout (every ratio
# near 1, the hardest case for the boundary at 1). Every pair is correct. VES_PRED=FILE takes a
# real prediction file instead (BIRD's predict_dev.json: keys are question indexes in dev.json,
# values SQL with an optional "\t----- bird -----\tdb_id"), e.g. a published model's output.
# Prints, per database: whole-command seconds of each tool and their ratio, EX verdicts of both, the
# scores, how many per-question R-VES rewards agree (and how many of the others nl2sql flagged
# as near a boundary), and the steps variants' time and their equality across two runs.
#   NL2SQL_DATA=/path/to/shared/data scripts/bench/ves_bench.sh [REPEATS] [REPEATS_X300]
# Defaults: 100 repeats (the official number) on superhero, 3 on superhero x300 (100 rounds of
# 129 pairs at 2.9M rows take hours).
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${NL2SQL_DATA:?set NL2SQL_DATA to the shared data folder}"
REPEATS=${1:-100}
REPEATS_X300=${2:-3}
BIN=build/nl2sql
[ -x "$BIN" ] || scripts/build.sh
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
SCALE_TOOL="$NL2SQL_DATA/../tools/scale_db.py"
REF=scripts/bench/ves_reference.py

# make_preds DEV_JSON OUT: VES_PRED=gold (every ratio near 1) or varied (default): a third of
# the questions keep gold, the others wrap it in a query that also counts one table once
# (hero_power or superhero), so the same answer costs more and ratios spread over R-VES's bins.
make_preds() {
  python3 - "$1" "$2" "${VES_PRED:-varied}" "$NL2SQL_DATA/bird/dev.json" <<'PY'
import json, os, sys
qs = json.load(open(sys.argv[1]))
mode = sys.argv[3]
if os.path.isfile(mode):
    # A real prediction file, keyed by index in the full dev.json: re-keyed by index in this
    # (possibly filtered) question list.
    full = {q["question_id"]: i for i, q in enumerate(json.load(open(sys.argv[4])))}
    given = json.load(open(mode))
    json.dump({str(i): given[str(full[q["question_id"]])] for i, q in enumerate(qs)
               if str(full[q["question_id"]]) in given}, open(sys.argv[2], "w"))
    sys.exit(0)
def pred(i, sql):
    sql = sql.strip().rstrip(";")
    if mode == "gold" or i % 3 == 0:
        return sql
    table = "hero_power" if i % 3 == 1 else "superhero"
    return f"SELECT * FROM ({sql}) WHERE (SELECT COUNT(*) FROM {table}) >= 0"
json.dump({str(i): pred(i, q["SQL"]) + "\t----- bird -----\t" + q["db_id"] for i, q in enumerate(qs)}, open(sys.argv[2], "w"))
PY
}
make_preds "$NL2SQL_DATA/bird/dev.json" "$WORK/pred.json"

now() { date +%s.%N; }

# bench LABEL DATA_DIR REPEATS
bench() {
  local label=$1 data=$2 repeats=$3
  echo "== $label: $repeats repeats, 1 thread, no result cache; CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); load $(cut -d' ' -f1 /proc/loadavg)"
  local s e t_nl t_ref_ves t_ref_rves t_steps1 t_steps2
  s=$(now)
  "$BIN" --log-level error eval --benchmark bird --data "$data" --pred "$WORK/pred.json" --metric ves,rves \
    --ves-repeats "$repeats" --threads 1 --no-cache --timeout 600 --out "$WORK/$label-nl" >/dev/null
  e=$(now); t_nl=$(python3 -c "print($e-$s)")
  s=$(now)
  python3 "$REF" --questions "$data/dev.json" --db-root "$data/dev_databases" --pred "$WORK/pred.json" \
    --metric ves --repeats "$repeats" --out "$WORK/$label-ref-ves.json" 2>/dev/null
  e=$(now); t_ref_ves=$(python3 -c "print($e-$s)")
  s=$(now)
  python3 "$REF" --questions "$data/dev.json" --db-root "$data/dev_databases" --pred "$WORK/pred.json" \
    --metric rves --repeats "$repeats" --out "$WORK/$label-ref-rves.json" 2>/dev/null
  e=$(now); t_ref_rves=$(python3 -c "print($e-$s)")
  # The reference against itself: how often does the official rule disagree with its own rerun?
  python3 "$REF" --questions "$data/dev.json" --db-root "$data/dev_databases" --pred "$WORK/pred.json" \
    --metric rves --repeats "$repeats" --out "$WORK/$label-ref-rves2.json" 2>/dev/null
  s=$(now)
  "$BIN" --log-level error eval --benchmark bird --data "$data" --pred "$WORK/pred.json" --metric ves-steps,rves-steps \
    --threads 2 --cache-dir "$WORK/$label-cache" --timeout 600 --out "$WORK/$label-steps1" >/dev/null
  e=$(now); t_steps1=$(python3 -c "print($e-$s)")
  s=$(now)
  "$BIN" --log-level error eval --benchmark bird --data "$data" --pred "$WORK/pred.json" --metric ves-steps,rves-steps \
    --threads 1 --no-cache --timeout 600 --out "$WORK/$label-steps2" >/dev/null
  e=$(now); t_steps2=$(python3 -c "print($e-$s)")
  python3 - "$WORK" "$label" "$t_nl" "$t_ref_ves" "$t_ref_rves" "$t_steps1" "$t_steps2" <<'PY'
import json, sys
work, label, t_nl, t_rv, t_rr, t_s1, t_s2 = sys.argv[1], sys.argv[2], *map(float, sys.argv[3:])
nl = json.load(open(f"{work}/{label}-nl/eval.json"))
rv = json.load(open(f"{work}/{label}-ref-ves.json"))
rr = json.load(open(f"{work}/{label}-ref-rves.json"))
eff = nl["summary"]["efficiency"]["metrics"]
print(f"  nl2sql ves+rves (one timing loop serves both): {t_nl:.1f} s; reference ves {t_rv:.1f} s + rves {t_rr:.1f} s "
      f"= {t_rv + t_rr:.1f} s; reference / nl2sql = {(t_rv + t_rr) / t_nl:.2f}x")
print(f"  VES   nl2sql {eff['ves']['overall']['score']:.2f} (95% CI {eff['ves']['overall']['ci95'][0]:.2f}-"
      f"{eff['ves']['overall']['ci95'][1]:.2f}), reference {rv['score']:.2f}")
print(f"  R-VES nl2sql {eff['rves']['overall']['score']:.2f} (95% CI {eff['rves']['overall']['ci95'][0]:.2f}-"
      f"{eff['rves']['overall']['ci95'][1]:.2f}), reference {rr['score']:.2f}")
ok_nl = {it["question_id"] for it in nl["items"] if it["efficiency"]["status"] == "ok"}
ok_ref = {q for q, v in rr["questions"].items() if v.get("status") == "ok"}
print(f"  EX (pairs timed): nl2sql {len(ok_nl)}, reference {len(ok_ref)} of {len(rr['questions'])}; "
      f"verdicts differ on {len(ok_nl ^ ok_ref)}")
same = differ = flagged = 0
for it in nl["items"]:
    q = it["question_id"]
    ours = it["efficiency"]["scores"]["rves"]
    ref = rr["questions"].get(q)
    if ref is None:
        continue
    if abs(ours["reward"] - ref["reward"]) < 1e-9:
        same += 1
    else:
        differ += 1
        flagged += ours["near_boundary"]
print(f"  per-question R-VES rewards: {same} equal, {differ} differ, of which {flagged} flagged near a boundary by nl2sql "
      f"({eff['rves']['near_boundary']} flagged in all)")
rr2 = json.load(open(f"{work}/{label}-ref-rves2.json"))
ours = {it["question_id"]: it["efficiency"]["scores"]["rves"] for it in nl["items"]}
self_same = self_differ = self_flagged = 0
for q, a in rr["questions"].items():
    b = rr2["questions"].get(q)
    if b is None:
        continue
    if abs(a["reward"] - b["reward"]) < 1e-9:
        self_same += 1
    else:
        self_differ += 1
        self_flagged += bool(ours.get(q, {}).get("near_boundary"))
print(f"  reference against its own rerun: {self_same} equal, {self_differ} differ, of which {self_flagged} flagged by nl2sql")
s1 = json.load(open(f"{work}/{label}-steps1/eval.json"))
def ranks(v):
    order = sorted(range(len(v)), key=lambda i: v[i])
    r = [0.0] * len(v)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return r
def rho(a, b):
    ra, rb = ranks(a), ranks(b)
    n = len(a); ma = sum(ra) / n; mb = sum(rb) / n
    sab = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    saa = sum((x - ma) ** 2 for x in ra); sbb = sum((y - mb) ** 2 for y in rb)
    return sab / (saa * sbb) ** 0.5 if saa and sbb else float("nan")
steps_by_q = {it["question_id"]: it["efficiency"]["scores"] for it in s1["items"]}
for timed, counted in (("ves", "ves_steps"), ("rves", "rves_steps")):
    pairs = [(it["efficiency"]["scores"][timed]["ratio"], steps_by_q[it["question_id"]][counted]["ratio"])
             for it in nl["items"] if it["efficiency"]["scores"][timed]["ratio"] > 0
             and steps_by_q.get(it["question_id"], {}).get(counted, {}).get("ratio", 0) > 0]
    if len(pairs) >= 2:
        print(f"  Spearman of per-question ratios, {timed} against {counted}: "
              f"{rho([p[0] for p in pairs], [p[1] for p in pairs]):.3f} over {len(pairs)} pairs")
s2 = json.load(open(f"{work}/{label}-steps2/eval.json"))
e1, e2 = s1["summary"]["efficiency"]["metrics"], s2["summary"]["efficiency"]["metrics"]
r1 = [it["efficiency"]["scores"] for it in s1["items"]]
r2 = [it["efficiency"]["scores"] for it in s2["items"]]
print(f"  steps: ves-steps {e1['ves_steps']['overall']['score']:.2f}, rves-steps {e1['rves_steps']['overall']['score']:.2f}; "
      f"{t_s1:.1f} s (2 threads, cold cache) and {t_s2:.1f} s (1 thread, no cache); "
      f"second run identical per question: {r1 == r2}; timed ves+rves / steps = {t_nl / t_s2:.1f}x")
PY
}

bench superhero "$NL2SQL_DATA/bird" "$REPEATS"

if [ -f "$SCALE_TOOL" ]; then
  mkdir -p "$WORK/scaled/dev_databases/superhero"
  cp "$NL2SQL_DATA/bird/dev.json" "$NL2SQL_DATA/bird/dev_tables.json" "$WORK/scaled/"
  cp -r "$NL2SQL_DATA/bird/dev_databases/superhero/database_description" "$WORK/scaled/dev_databases/superhero/" 2>/dev/null || true
  python3 "$SCALE_TOOL" "$NL2SQL_DATA/bird/dev_databases/superhero/superhero.sqlite" \
    "$WORK/scaled/dev_databases/superhero/superhero.sqlite" --factor 300 | tail -1
  # At x300 some gold queries take tens of seconds (two pass 120 s): both tools time only the
  # questions whose gold ran within X300_MAX_MS (default 2000) in a first EX pass, listed here.
  "$BIN" --log-level error eval --benchmark bird --data "$WORK/scaled" --pred "$WORK/pred.json" --threads 2 \
    --no-cache --timeout 10 --out "$WORK/x300-probe" >/dev/null
  python3 - "$WORK/x300-probe/eval.json" "$WORK/scaled/dev.json" "$WORK/pred.json" "${X300_MAX_MS:-2000}" <<'PY'
import json, sys
items = json.load(open(sys.argv[1]))["items"]
fast = {it["question_id"] for it in items if it["gold_status"] == "ok" and it["timings_ms"]["gold"] <= float(sys.argv[4])}
qs = [q for q in json.load(open(sys.argv[2])) if str(q["question_id"]) in fast]
json.dump(qs, open(sys.argv[2], "w"))
print(f"superhero x300: {len(qs)} of {len(items)} questions have gold within {sys.argv[4]} ms; both tools time those")
PY
  make_preds "$WORK/scaled/dev.json" "$WORK/pred.json"
  bench superhero_x300 "$WORK/scaled" "$REPEATS_X300"
fi
