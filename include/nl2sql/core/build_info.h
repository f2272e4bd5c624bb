// What this binary is: the project version, the git commit it was built from ("-dirty" when
// the checkout had changes to tracked files, "unknown" when built outside a git checkout) and
// the CMake build type. Written at build time by cmake/build_info.cmake; printed by
// `nl2sql --version` and recorded in every run manifest, so a benchmark figure
// names the code that produced it. Immutable; safe from any thread.
#pragma once

#include <string>

namespace nl2sql::core {

struct BuildInfo {
  std::string version;     // e.g. "0.1.0"
  std::string commit;      // e.g. "84329c3a1b2c" or "84329c3a1b2c-dirty"
  std::string build_type;  // Release, RelWithDebInfo, Debug …

  // "0.1.0 (commit 84329c3a1b2c, Release)"
  std::string line() const { return version + " (commit " + commit + ", " + build_type + ")"; }
};

const BuildInfo& build_info();

}  // namespace nl2sql::core
