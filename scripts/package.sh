#!/usr/bin/env bash
# Builds the Debian package: a Release build of the `nl2sql` binary alone in
# ${BUILD_DIR:-build-release}, then CPack's DEB generator. The package installs /usr/bin/nl2sql
# and /usr/share/nl2sql/ (prompts, configs, docs); its dependencies are the Debian runtime
# libraries the binary links, as dpkg-shlibdeps reads them. Prints the .deb's path.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-release}
BUILD_DIR="$BUILD_DIR" BUILD_TYPE=Release TARGET=nl2sql \
  CMAKE_ARGS="-DNL2SQL_BUILD_TESTS=OFF ${CMAKE_ARGS:-}" scripts/build.sh
(cd "$BUILD_DIR" && cpack -G DEB >/dev/null)
ls -1 "$BUILD_DIR"/nl2sql_*.deb
