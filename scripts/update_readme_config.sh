#!/usr/bin/env bash
# Regenerates README.md's "Config keys" table (between <!-- config-keys --> markers) from the
# schema fragments in configs/schema/ via `nl2sql config keys`. Run after adding a config key;
# tests/core/readme_config_test.cpp fails when the table misses a key.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/nl2sql}
table=$(NL2SQL_SCHEMA_DIR=configs/schema "$BIN" config keys)
python3 - "$table" <<'PY'
import sys
table = sys.argv[1]
text = open("README.md", encoding="utf-8").read()
begin, end = "<!-- config-keys -->", "<!-- /config-keys -->"
i, j = text.index(begin), text.index(end)
text = text[: i + len(begin)] + "\n" + table.rstrip("\n") + "\n" + text[j:]
open("README.md", "w", encoding="utf-8").write(text)
PY
echo "README.md config table: $(printf '%s\n' "$table" | grep -c '^| `') keys"
