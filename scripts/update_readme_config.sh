#!/usr/bin/env bash
# The old name of scripts/update_docs.sh, kept so existing habits and notes keep working: the
# config keys table moved from README.md to docs/config-reference.md, and the same script now
# also regenerates docs/cli-reference.md. See scripts/update_docs.sh.
set -euo pipefail
exec "$(dirname "$0")/update_docs.sh" "$@"
