#!/usr/bin/env bash
# Behaviour check for refactors: runs simulated configs on the bundled mini set with two nl2sql
# binaries and compares their report.json, leaving out what legitimately differs between two
# runs (timings, creation time, tool version, config and prompt hashes, folder names and paths,
# and the manifest's record_version). Prints "<config> identical" or the top-level keys that
# differ, per config; exits 1 when any differs.
#   scripts/same_report.sh OLD_BINARY NEW_BINARY [CONFIG.json ...]
# Default configs: configs/quickstart.json. Every model profile of a config is replaced by the
# offline sim provider (and the LLM cache is off), so any shipped config runs here; the answers
# are SIMULATED: this checks that the same config gives the same report, not any model.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: scripts/same_report.sh OLD_BINARY NEW_BINARY [CONFIG.json ...]" >&2; exit 2; }
OLD=$1
NEW=$2
shift 2
CONFIGS=("$@")
[ ${#CONFIGS[@]} -gt 0 ] || CONFIGS=(configs/quickstart.json)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
DATA=$(scripts/build_mini_dataset.sh "$WORK/mini_bird")
status=0
for cfg in "${CONFIGS[@]}"; do
  name=$(basename "$cfg" .json)
  # The resolved config with every profile simulated.
  "$NEW" config show --config "$cfg" >"$WORK/$name.resolved.json"
  python3 - "$WORK/$name.resolved.json" "$WORK/$name.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
llm = c.setdefault("llm", {})
models = llm.setdefault("models", {})
for name in list(models) or ["sim"]:
    models[name] = {"provider": "sim"}
llm["cache"] = {"mode": "off"}
json.dump(c, open(sys.argv[2], "w"), indent=1)
PY
  for which in old new; do
    bin=$OLD
    [ "$which" = new ] && bin=$NEW
    "$bin" run --config "$WORK/$name.json" --benchmark bird --data "$DATA" --out "$WORK/$name-$which" \
      --index-dir "$WORK/index-$which" --progress off >"$WORK/$name-$which.log" 2>&1 || true
  done
  python3 - "$WORK/$name-old/report.json" "$WORK/$name-new/report.json" "$name" <<'PY' || status=1
import json, sys
SKIP = ('latency', 'seconds', 'wall', 'created', 'elapsed', '_s', 'time', 'tool_version', 'tool_commit', 'tool_build',
        'config_hash', 'prompt_hashes', 'templates', 'dir', 'path', 'name', 'title', 'record_version')
def strip(o):
    if isinstance(o, dict):
        return {k: strip(v) for k, v in o.items() if not any(t in k for t in SKIP)}
    if isinstance(o, list):
        return [strip(x) for x in o]
    return o
try:
    a = strip(json.load(open(sys.argv[1])))
    b = strip(json.load(open(sys.argv[2])))
except Exception as e:
    print(sys.argv[3], 'ERROR', e)
    sys.exit(1)
if a == b:
    print(sys.argv[3], 'identical')
else:
    print(sys.argv[3], 'DIFFER in', sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))[:20])
    sys.exit(1)
PY
done
exit $status
