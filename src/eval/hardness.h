// Spider hardness (easy / medium / hard / extra) from a question's parsed "sql" field, by the
// official evaluation.py rule, quirks included: its aggregate count reads the first element of
// WHERE and HAVING condition units, which is the NOT flag, and the 'and'/'or' connectives of
// HAVING, so those count as aggregates. Pure function.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "nl2sql/sql/features.h"

namespace nl2sql::eval {

// The counts of the official rule, read from Spider's parsed "sql" field; the rule itself is
// sql::spider_hardness_level (shared with the counts read from our own parse).
sql::SpiderHardness spider_hardness_components(const nlohmann::json& sql);
// "easy" | "medium" | "hard" | "extra"; "" when `sql` is not a parsed Spider query.
std::string spider_hardness(const nlohmann::json& sql);

}  // namespace nl2sql::eval
