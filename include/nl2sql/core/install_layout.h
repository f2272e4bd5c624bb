// Where the data files the binary reads at run time live: the bundled prompt templates and the
// config schema (configs/schema/). They are found from the executable's own location
// (/proc/self/exe), never from a path compiled in: an installed binary reads
// <prefix>/share/nl2sql/ beside its bin/ folder, and a binary of a build tree reads
// <build>/share/nl2sql/, which CMake links to the source tree's prompts/ and configs/ at
// configure time. NL2SQL_PROMPTS and NL2SQL_SCHEMA_DIR point elsewhere. Safe from any thread.
#pragma once

#include <filesystem>
#include <optional>

namespace nl2sql::core {

// The running executable (/proc/self/exe resolved); empty when it cannot be read.
std::filesystem::path executable_path();

// The nearest `share/nl2sql` folder holding `prompts/`, looked for in the executable's folder
// and its two parents (bin/ of an install; the build tree for build/, build/tests/ and
// build/scripts/bench/ binaries); nullopt when there is none.
std::optional<std::filesystem::path> share_dir();

// Where share_dir() looks first: <executable folder>/../share/nl2sql (named in errors when
// nothing was found).
std::filesystem::path expected_share_dir();

}  // namespace nl2sql::core
