#!/usr/bin/env bash
# Regenerates the generated parts of docs/ from the built binary (BIN, default build/nl2sql):
#   docs/config-reference.md  the config keys table, between <!-- config-keys --> and
#                             <!-- /config-keys -->, from the schema fragments in configs/schema/
#                             (`nl2sql config keys`);
#   docs/cli-reference.md     `nl2sql --help` and `nl2sql <command> [<subcommand>] --help` for every
#                             command and subcommand the binary lists, one heading and one fenced
#                             block each, between <!-- cli-reference --> and <!-- /cli-reference -->.
# Everything outside the markers is left alone. Run after adding or changing a config key, a
# command or a flag; tests/core/readme_config_test.cpp fails when either reference misses one.
#   [BIN=build/nl2sql] scripts/update_docs.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/nl2sql}
if [ ! -x "$BIN" ]; then
  echo "update_docs: $BIN not found: build first (scripts/build.sh) or set BIN" >&2
  exit 2
fi
NL2SQL_SCHEMA_DIR=configs/schema python3 - "$BIN" <<'PY'
import re
import subprocess
import sys

BIN = sys.argv[1]


def replace_between(path, name, body):
    begin, end = f"<!-- {name} -->", f"<!-- /{name} -->"
    text = open(path, encoding="utf-8").read()
    i, j = text.index(begin), text.index(end)
    text = text[: i + len(begin)] + "\n" + body.rstrip("\n") + "\n" + text[j:]
    open(path, "w", encoding="utf-8").write(text)


def run(*args):
    return subprocess.run([BIN, *args], check=True, capture_output=True, text=True).stdout


# The config keys table.
table = run("config", "keys")
replace_between("docs/config-reference.md", "config-keys", table)
keys = sum(1 for line in table.splitlines() if line.startswith("| `"))


def help_of(words):
    # CLI11 prints the binary's path in the usage line: show it as `nl2sql`.
    text = run(*words, "--help")
    return re.sub(r"^Usage: \S+", "Usage: nl2sql", text, count=1, flags=re.M).rstrip("\n")


def subcommands(help_text):
    # The names listed under "Subcommands:" (two spaces, the name, then its description).
    names, inside = [], False
    for line in help_text.splitlines():
        if line.startswith("Subcommands:"):
            inside = True
        elif inside and not line.strip():
            inside = False
        elif inside:
            m = re.match(r"^  (\S+)", line)
            if m:
                names.append(m.group(1))
    return names


sections = []


def document(words):
    # `nl2sql` and its commands are level-2 headings, a command's subcommands level 3.
    text = help_of(words)
    title = " ".join(["nl2sql", *words])
    level = "#" * min(max(len(words), 1) + 1, 4)
    sections.append(f"{level} {title}\n\n```text\n{text}\n```\n")
    for name in subcommands(text):
        document([*words, name])


document([])
replace_between("docs/cli-reference.md", "cli-reference", "\n" + "\n".join(sections))
print(f"docs/config-reference.md: {keys} config keys")
print(f"docs/cli-reference.md: {len(sections)} help texts")
PY
