// Spider hardness (easy / medium / hard / extra) from a question's parsed "sql" field, by the
// official evaluation.py rule, quirks included: its aggregate count reads the first element of
// WHERE and HAVING condition units, which is the NOT flag, and the 'and'/'or' connectives of
// HAVING, so those count as aggregates. Pure function.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace nl2sql::eval {

struct HardnessComponents {
  int component1 = 0;
  int component2 = 0;
  int others = 0;
};

HardnessComponents spider_hardness_components(const nlohmann::json& sql);
// "easy" | "medium" | "hard" | "extra"; "" when `sql` is not a parsed Spider query.
std::string spider_hardness(const nlohmann::json& sql);

}  // namespace nl2sql::eval
