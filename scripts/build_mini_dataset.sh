#!/usr/bin/env bash
# Builds the bundled mini BIRD-format dataset (tests/fixtures/mini_bird) into a folder:
#   scripts/build_mini_dataset.sh OUT_DIR
# OUT_DIR/dev.json, dev_tables.json, dev_databases/<db>/<db>.sqlite + database_description/.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/build_mini_dataset.sh OUT_DIR}
mkdir -p "$out"
cp tests/fixtures/mini_bird/dev.json tests/fixtures/mini_bird/dev_tables.json "$out/"
for dir in tests/fixtures/mini_bird/dev_databases/*/; do
  db=$(basename "$dir")
  mkdir -p "$out/dev_databases/$db"
  cp -r "$dir/database_description" "$out/dev_databases/$db/"
  rm -f "$out/dev_databases/$db/$db.sqlite"
  sqlite3 "$out/dev_databases/$db/$db.sqlite" < "$dir/$db.sql"
done
echo "$out"
