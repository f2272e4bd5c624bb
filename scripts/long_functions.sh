#!/usr/bin/env bash
# Functions longer than N lines (default 100) in a source tree, by universal-ctags' line spans
# (first to last line of each function definition): the count, then each one, longest last.
#   scripts/long_functions.sh [DIR=src] [N=100]
# Before/after a change: git archive REV src | tar -x -C TMP, then run it on TMP/src.
set -euo pipefail
dir=${1:-src}
limit=${2:-100}
command -v ctags >/dev/null || { echo "long_functions: needs universal-ctags (apt-get install universal-ctags)" >&2; exit 2; }
ctags -R --languages=C++ --kinds-C++=f --fields=+ne -x --_xformat='%{line} %{end} %{input} %{name}' "$dir" |
  awk -v limit="$limit" '{ n = $2 - $1 + 1; if (n > limit) print n, $3 ":" $1, $4 }' | sort -n |
  awk -v limit="$limit" '{ lines[NR] = $0; if ($1 > 200) over++ }
       END { printf "%d functions over %d lines (%d over 200)\n", NR, limit, over + 0;
             for (i = 1; i <= NR; i++) print "  " lines[i] }'
