#!/usr/bin/env bash
# The outside-program protocol's overhead (issue 37): the built-in `baseline` generator against
# the same generator as an outside program (scripts/bench/outside_baseline.py: the same template,
# its calls through nl2sql's local endpoint), both against the same fake OpenAI server
# (scripts/bench/fake_llm_server_tool.cpp, answering each question's gold with LATENCY_MS of
# latency), cache off, fixer off, self-consistency. Prints, per variant, the wall time and the
# CPU per question (nl2sql and its children: the Python copies), and the ratios.
#   scripts/bench/outside_overhead.sh                   the bundled mini set (21 questions)
#   NL2SQL_DATA=… SPIDER=1 scripts/bench/outside_overhead.sh   Spider dev questions QUESTIONS (0-99)
#   LATENCY_MS=50 SAMPLES=3 WORKERS=8 THREADS=8 REPEATS=3 SKIP_BUILD=1 BUILD_DIR=build
set -euo pipefail
cd "$(dirname "$0")/../.."
LATENCY=${LATENCY_MS:-50}
SAMPLES=${SAMPLES:-3}
WORKERS=${WORKERS:-8}
THREADS=${THREADS:-8}
REPEATS=${REPEATS:-3}
BUILD_DIR=${BUILD_DIR:-build}
. scripts/bench/fake_server_lib.sh
fake_bench_build
BIN=$(realpath "$BIN")
if [ -n "${SPIDER:-}" ]; then
  : "${NL2SQL_DATA:?set NL2SQL_DATA to the benchmark data folder}"
  DATA_ARGS=(--benchmark spider --data "$NL2SQL_DATA/spider" --questions "${QUESTIONS:-0-99}")
  GOLD=$NL2SQL_DATA/spider/dev.json
else
  DATA=$(scripts/build_mini_dataset.sh "$WORK/mini")
  DATA_ARGS=(--benchmark bird --data "$DATA")
  GOLD=$DATA/dev.json
fi
fake_server_start "$WORK/server.log" --latency-ms "$LATENCY" --gold "$GOLD"
BASE='{"llm": {"models": {"main": {"base_url": "'$URL'", "model": "fake-model", "api_key_env": ""}},
                "default_profile": "main", "cache": {"mode": "off"}, "preflight": false},
       "fix": {"enabled": false}, "run": {"threads": '$THREADS', "selectors": ["self_consistency"], "curve_points": [1]}}'
echo "$BASE" >"$WORK/base.json"
builtin='[{"name": "baseline", "samples": '$SAMPLES', "temperature": 0.7}]'
outside='[{"name": "command", "label": "baseline", "samples": '$SAMPLES', "temperature": 0.7, "workers": '$WORKERS',
           "argv": ["python3", "'$PWD'/scripts/bench/outside_baseline.py"]}]'
python3 - "$BIN" "$WORK" "$REPEATS" "$builtin" "$outside" "${DATA_ARGS[@]}" <<'PY'
import json, os, resource, subprocess, sys, time
bin_, work, repeats, builtin, outside = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
data_args = sys.argv[6:]
def once(name, gens, i):
    out = os.path.join(work, f"run-{name}-{i}")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    subprocess.run([bin_, "--log-level", "warn", "run", "--config", os.path.join(work, "base.json"), *data_args,
                    "--set", "generate.generators=" + gens, "--out", out, "--index-dir", os.path.join(work, "index"),
                    "--progress", "off"], check=True, stdout=subprocess.DEVNULL)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    rep = json.load(open(os.path.join(out, "report.json")))
    return wall, cpu, rep["n_questions"], rep["usage"]["total"]["calls"], rep["ex"]["overall"]["ex"]
once("warm", builtin, 0)  # builds the value index once
res = {}
for name, gens in (("builtin", builtin), ("outside", outside)):
    runs = [once(name, gens, i) for i in range(repeats)]
    walls = sorted(r[0] for r in runs); cpus = sorted(r[1] for r in runs)
    n, calls, ex = runs[0][2], runs[0][3], runs[0][4]
    res[name] = (walls[len(walls) // 2], cpus[len(cpus) // 2], n)
    print(f"{name:8s}: {n} questions, {calls:.0f} calls, EX {ex:.1f}%; wall median {walls[len(walls)//2]:.2f} s "
          f"(runs {', '.join(f'{w:.2f}' for w in walls)}); CPU per question {1000 * cpus[len(cpus)//2] / n:.1f} ms")
b, o = res["builtin"], res["outside"]
print(f"outside / built-in: wall x{o[0] / b[0]:.2f}, CPU per question +{1000 * (o[1] - b[1]) / o[2]:.1f} ms "
      f"(x{o[1] / max(b[1], 1e-9):.2f})")
PY
