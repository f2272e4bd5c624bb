#!/usr/bin/env bash
# Builds and runs the SQL parser fuzzer (libFuzzer, clang++) for a bounded time.
#   tests/fuzz/run_sql_fuzz.sh [OUT_DIR] [SECONDS]
# OUT_DIR (default build-fuzz) receives the binary and the working corpus; the committed seeds
# in tests/fuzz/seeds are read but never written. Exit status is libFuzzer's (0: no crash).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-build-fuzz}
SECONDS_TO_RUN=${2:-60}
CXX=${FUZZ_CXX:-clang++}
mkdir -p "$OUT/corpus"
SRCS="src/sql/lexer.cpp src/sql/parser.cpp src/sql/printer.cpp src/sql/ast.cpp src/sql/normalize.cpp src/sql/features.cpp"
if [ ! -x "$OUT/sql_parser_fuzz" ] || [ -n "$(find $SRCS tests/fuzz/sql_parser_fuzz.cpp include/nl2sql/sql -newer "$OUT/sql_parser_fuzz" 2>/dev/null)" ]; then
  "$CXX" -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -Iinclude -Isrc $SRCS tests/fuzz/sql_parser_fuzz.cpp -o "$OUT/sql_parser_fuzz"
fi
exec "$OUT/sql_parser_fuzz" "$OUT/corpus" tests/fuzz/seeds -max_total_time="$SECONDS_TO_RUN" \
  -max_len=4096 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$OUT/"
