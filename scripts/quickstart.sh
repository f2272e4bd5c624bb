#!/usr/bin/env bash
# The main job on the bundled mini set: set-up, build, then evaluate on the mini BIRD-format
# dataset. Until the full pipeline (`nl2sql run`) lands, this evaluates the gold SQL as the
# predictions, plus a deliberately imperfect prediction file, and prints where the reports are.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
OUT=${OUT:-runs/quickstart}
mkdir -p "$OUT"
DATA=$(scripts/build_mini_dataset.sh "$OUT/mini_bird")
# Predictions in the official BIRD format (keyed by question position), one of them wrong.
python3 - "$DATA/dev.json" "$OUT/predict_dev.json" <<'PY'
import json, sys
qs = json.load(open(sys.argv[1]))
pred = {str(i): q["SQL"] + "\t----- bird -----\t" + q["db_id"] for i, q in enumerate(qs)}
pred["2"] = "SELECT name FROM district ORDER BY population ASC LIMIT 1\t----- bird -----\tregional_schools"
json.dump(pred, open(sys.argv[2], "w"), indent=1)
PY
build/nl2sql eval --benchmark bird --data "$DATA" --pred "$OUT/predict_dev.json" \
  --metric all --out "$OUT/eval" --cache-dir "$OUT/cache"
echo "quickstart: reports in $OUT/eval (eval.md, eval.json, eval.csv)"
