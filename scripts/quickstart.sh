#!/usr/bin/env bash
# The main job on the bundled mini set: set-up, build, then the whole pipeline
# (`nl2sql run --config configs/quickstart.json`) with the offline `sim` provider, and where the
# report is. Rerunning resumes (nothing is redone); FORCE_NEW=1 starts over.
# The accuracy it prints is SIMULATED (gold-derived answers): it shows the machinery, not a model.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
OUT=${OUT:-runs/quickstart}
mkdir -p "$OUT"
DATA=$(scripts/build_mini_dataset.sh "$OUT/mini_bird")
build/nl2sql run --config configs/quickstart.json --benchmark bird --data "$DATA" \
  --out "$OUT/run" --index-dir "$OUT/index" ${FORCE_NEW:+--force-new}
echo
echo "quickstart: open $OUT/run/report.html (also report.md, report.json, per_question.csv)"
echo "next, with a real endpoint: OPENAI_BASE_URL=http://localhost:8000/v1 OPENAI_MODEL=<model> \\"
echo "  build/nl2sql run --config configs/chase.json --benchmark bird --data <BIRD dev folder> --questions 0-49"
