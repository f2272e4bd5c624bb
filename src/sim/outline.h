// Outlines of a query (private to the sim layer): the outer query's clauses, from which the
// simulator derives plans, fact sheets and critiques of a candidate against gold.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace nl2sql::sim::detail {

// The outer query's clauses, split at its own parenthesis depth (subqueries stay inside the
// clause text). Tables are collected at every depth.
struct SqlOutline {
  std::vector<std::string> tables, joins, filters, select_items, group_by, measures;
  std::string having, order_by, limit;
  bool distinct = false;
};

SqlOutline outline_of(const std::string& sql);
// A clause's text case-folded outside string literals ('Alameda' and 'alameda' differ), and
// whether `v` holds `s` under that folding.
std::string key_of(const std::string& s);
bool contains_key(const std::vector<std::string>& v, const std::string& s);
// The first real difference of `current` against `gold`, as a reviewer would name it; "" when
// the outlines agree (the difference, if any, is then in literals or subqueries).
std::string describe_defect(const std::string& current, const std::string& gold);
// The fact sheet (agent ledger) and the plan a correct answer to `gold` would give.
nlohmann::json ledger_of(const std::string& gold, const std::string& evidence);
nlohmann::json plan_of(const std::string& gold);

}  // namespace nl2sql::sim::detail
