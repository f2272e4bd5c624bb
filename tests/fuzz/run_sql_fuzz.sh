#!/usr/bin/env bash
# Kept for tests/sql/fuzz_slowtest.cpp: the SQL parser target of run_fuzz.sh.
#   tests/fuzz/run_sql_fuzz.sh [OUT_DIR] [SECONDS]
set -euo pipefail
exec "$(dirname "$0")/run_fuzz.sh" sql_parser "${1:-build-fuzz}" "${2:-60}"
