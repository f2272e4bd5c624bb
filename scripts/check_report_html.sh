#!/usr/bin/env bash
# Loads a report.html in headless Chromium (Debian's `chromium`), writes the rendered DOM next
# to the screenshot (OUT.dom.html) and a PNG screenshot (OUT.png), and checks that the page
# rendered its SVG charts with data points and raised no script error (the page's
# window.onerror hook counts errors into <body data-errors>; data-ready="1" is set on load).
# Usage: scripts/check_report_html.sh REPORT.html OUT.png
# Exit: 0 ok, 1 check failed, 2 usage, 77 chromium missing (tests treat it as a skip).
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 REPORT.html OUT.png" >&2
  exit 2
fi
report=$(realpath "$1")
png=$(realpath -m "$2")
dom="${png%.png}.dom.html"
browser=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
if [ -z "$browser" ]; then
  echo "check_report_html: chromium not found (install it with scripts/setup.sh)" >&2
  exit 77
fi
# A private profile so concurrent checks do not share state; removed on exit.
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
flags=(--headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run
       --user-data-dir="$profile" --virtual-time-budget=5000 --hide-scrollbars)
"$browser" "${flags[@]}" --dump-dom "file://$report" > "$dom" 2> "$profile/dump.log" || {
  echo "check_report_html: chromium --dump-dom failed:" >&2; tail -5 "$profile/dump.log" >&2; exit 1; }
"$browser" "${flags[@]}" --window-size=1280,2400 --screenshot="$png" "file://$report" 2> "$profile/shot.log" >/dev/null || {
  echo "check_report_html: chromium --screenshot failed:" >&2; tail -5 "$profile/shot.log" >&2; exit 1; }

fail=0
grep -q 'data-ready="1"' "$dom" || { echo "check_report_html: the load handler did not run (no data-ready=\"1\")" >&2; fail=1; }
grep -q 'data-errors="0"' "$dom" || { echo "check_report_html: script errors: $(grep -o 'data-errors="[0-9]*"' "$dom" | head -1)" >&2; fail=1; }
charts=$(grep -o '<svg class="chart"' "$dom" | wc -l)
points=$(grep -o 'class="pt"\|class="bar"' "$dom" | wc -l)
[ "$charts" -gt 0 ] || { echo "check_report_html: no SVG chart in the rendered page" >&2; fail=1; }
[ "$points" -gt 0 ] || { echo "check_report_html: the charts have no data points" >&2; fail=1; }
[ -s "$png" ] || { echo "check_report_html: no screenshot written" >&2; fail=1; }
echo "check_report_html: $charts charts, $points data marks, screenshot $png, DOM $dom"
exit $fail
