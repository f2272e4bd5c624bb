#!/usr/bin/env bash
# Builds and runs one libFuzzer target (clang++, -fsanitize=fuzzer,address,undefined) for a
# bounded time.
#   tests/fuzz/run_fuzz.sh TARGET [OUT_DIR] [SECONDS]
#   tests/fuzz/run_fuzz.sh list
# Targets: sql_parser (parser + printer fixpoint), llm_answers (the answer reader: SQL, JSON, winner,
# instance answer rows, keyword and column-filter answers), config (loader, extends, --set,
# schema validation), predictions (prediction-file readers in every format).
# The translation units a target exercises are compiled here with coverage and sanitizers;
# whatever else they call is linked from the g++-built library ($NL2SQL_LIB, default
# build/libnl2sql_lib.a: build it first with scripts/build.sh). OUT_DIR (default build-fuzz)
# receives objects, binaries, the working corpus (OUT_DIR/corpus/TARGET) and crash artifacts;
# the committed seeds in tests/fuzz/corpus/TARGET are read, never written.
# Exit status is libFuzzer's (0: no crash). FUZZ_CXX picks the compiler, FUZZ_FLAGS adds
# libFuzzer options (e.g. -runs=1000).
set -euo pipefail
cd "$(dirname "$0")/../.."
TARGET=${1:?usage: tests/fuzz/run_fuzz.sh TARGET [OUT_DIR] [SECONDS]}
OUT=${2:-build-fuzz}
SECONDS_TO_RUN=${3:-60}
CXX=${FUZZ_CXX:-clang++}
LIB=${NL2SQL_LIB:-build/libnl2sql_lib.a}

SQL_SRCS="src/sql/lexer.cpp src/sql/parser.cpp src/sql/printer.cpp src/sql/ast.cpp src/sql/normalize.cpp src/sql/features.cpp src/core/text.cpp"
case "$TARGET" in
  list) echo "sql_parser llm_answers config predictions"; exit 0 ;;
  sql_parser) SRCS=$SQL_SRCS; USE_LIB=0; MAX_LEN=4096 ;;
  llm_answers)
    SRCS="src/llm/answer.cpp src/select/separating_instance.cpp src/context/llm_calls.cpp src/context/column_filter.cpp"
    USE_LIB=1; MAX_LEN=8192 ;;
  config) SRCS="src/core/config.cpp src/core/config_schema.cpp src/core/files.cpp"; USE_LIB=1; MAX_LEN=8192 ;;
  predictions) SRCS="src/eval/evaluator.cpp src/data/dataset.cpp src/core/files.cpp"; USE_LIB=1; MAX_LEN=8192 ;;
  *) echo "run_fuzz: unknown target '$TARGET' (try: list)" >&2; exit 2 ;;
esac
if [ "$USE_LIB" = 1 ] && [ ! -f "$LIB" ]; then
  echo "run_fuzz: $LIB not found: build the library first (scripts/build.sh) or set NL2SQL_LIB" >&2
  exit 2
fi

mkdir -p "$OUT/obj/$TARGET" "$OUT/corpus/$TARGET"
FLAGS=(-std=c++20 -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
       -Iinclude -Isrc
       $(pkg-config --cflags spdlog fmt))
objs=()
for src in $SRCS; do
  obj="$OUT/obj/$TARGET/$(echo "$src" | tr / _).o"
  if [ ! -f "$obj" ] || [ "$src" -nt "$obj" ] || [ -n "$(find include src -name '*.h' -newer "$obj" | head -1)" ]; then
    "$CXX" "${FLAGS[@]}" -fsanitize=fuzzer-no-link -c "$src" -o "$obj"
  fi
  objs+=("$obj")
done
bin="$OUT/${TARGET}_fuzz"
libs=()
if [ "$USE_LIB" = 1 ]; then
  libs=("$LIB" $(pkg-config --libs spdlog fmt sqlite3 libcurl libxxhash) -pthread)
fi
"$CXX" "${FLAGS[@]}" -fsanitize=fuzzer "tests/fuzz/${TARGET}_fuzz.cpp" "${objs[@]}" "${libs[@]}" -o "$bin"

# The config target validates against the schema of this checkout (the binary is not in a tree
# that has share/nl2sql beside it).
export NL2SQL_SCHEMA_DIR="$PWD/configs/schema"
exec "$bin" "$OUT/corpus/$TARGET" "tests/fuzz/corpus/$TARGET" -max_total_time="$SECONDS_TO_RUN" \
  -max_len="$MAX_LEN" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$OUT/${TARGET}-" ${FUZZ_FLAGS:-}
