#!/usr/bin/env bash
# Times a clean build of the `nl2sql` binary alone, without ccache, the way a fresh machine
# builds it: a copy of the committed tree at REV (default HEAD) is configured in a scratch
# folder and `cmake --build --target nl2sql` runs with JOBS (default 2) jobs. Prints wall time
# and the compilers' CPU time (user + sys; the figure that load on a shared machine disturbs
# least: on an idle machine wall ≈ CPU / JOBS), and the binary's size.
#   scripts/bench/build_time.sh [REV] [BUILD_TYPE] [CMAKE_ARGS…]
#   scripts/bench/build_time.sh 84329c3 RelWithDebInfo                        # before issue 40
#   scripts/bench/build_time.sh HEAD Release -DNL2SQL_BUILD_TESTS=OFF         # the quickstart's build
set -euo pipefail
cd "$(dirname "$0")/../.."
REV=${1:-HEAD}
TYPE=${2:-Release}
shift $(( $# > 2 ? 2 : $# ))
scratch=$(mktemp -d "${TMPDIR:-/tmp}/nl2sql-build-time-XXXXXX")
trap 'rm -rf "$scratch"' EXIT
mkdir "$scratch/src"
git archive "$REV" | tar -x -C "$scratch/src"
export CCACHE_DISABLE=1
cmake -S "$scratch/src" -B "$scratch/build" -G Ninja -DCMAKE_BUILD_TYPE="$TYPE" "$@" >/dev/null
/usr/bin/time -f "%e %U %S" -o "$scratch/time" cmake --build "$scratch/build" -j "${JOBS:-2}" --target nl2sql >/dev/null
read -r wall user sys < "$scratch/time"
size=$(stat -c %s "$scratch/build/nl2sql")
awk -v r="$REV" -v t="$TYPE" -v w="$wall" -v u="$user" -v s="$sys" -v b="$size" -v j="${JOBS:-2}" -v l="$(cut -d' ' -f1-3 /proc/loadavg)" 'BEGIN {
  printf "build_time: %s %s: wall %.0f s, CPU %.0f s (user %.0f + sys %.0f; CPU / %d jobs = %.0f s), binary %.1f MB, load average at the end %s\n",
         r, t, w, u + s, u, s, j, (u + s) / j, b / 1e6, l }'
