// Small text helpers every layer uses: ASCII case mapping (bytes ≥ 0x80 are left alone, so
// UTF-8 stays intact) and whitespace squashing. Pure functions.
#pragma once

#include <string>
#include <string_view>

namespace nl2sql::core {

std::string lower(std::string_view s);
std::string upper(std::string_view s);
// Runs of whitespace become one space; leading and trailing whitespace goes.
std::string squash_spaces(std::string_view s);

}  // namespace nl2sql::core
