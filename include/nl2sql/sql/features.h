// SQL feature tags (for report breakdowns) and Spider's hardness rule, both computed on our AST.
//
// spider_hardness() reproduces the official Spider evaluation.py classification, quirks
// included (see notes on evaluator semantics): component1 counts WHERE, GROUP BY, ORDER BY,
// LIMIT, extra FROM tables, OR connectives and LIKE conditions of the top-level query;
// component2 counts subqueries used as condition operands plus a compound's right-hand side;
// "others" counts aggregates the way the official code does — SELECT items that are
// aggregates, ORDER BY aggregates, but in WHERE and HAVING it counts NOT-conditions, and in
// HAVING also every AND/OR connective — plus more than one SELECT item, WHERE condition or GROUP
// BY key. AND/OR trees are read flat, left to right, as Spider's parser reads them.
// Pure functions.
#pragma once

#include <string>
#include <vector>

#include "nl2sql/sql/ast.h"

namespace nl2sql::sql {

struct Features {
  int tables = 0;          // FROM items (base tables, subqueries, CTE references) in all scopes
  int joins = 0;           // JOINs and comma joins in all scopes
  int subqueries = 0;      // nested SELECTs (FROM, expressions, CTE bodies)
  int max_nesting = 0;     // 0 for a flat query
  bool aggregation = false;
  bool group_by = false;
  bool having = false;
  bool order_by = false;
  bool limit = false;
  bool order_by_limit = false;  // top-level ORDER BY with LIMIT ("top-k")
  bool set_operation = false;
  bool distinct = false;
  bool case_expr = false;
  bool window = false;
  bool cte = false;
  bool like = false;
  bool negation = false;   // NOT IN / NOT LIKE / NOT EXISTS / NOT BETWEEN / NOT …

  // Short tags: "join", "nested", "aggregation", "group_by", "having", "order_by_limit",
  // "set_op", "distinct", "case", "window", "cte", "like", "negation"; "simple" when none.
  std::vector<std::string> tags() const;
};

Features compute_features(const Select& select);

struct SpiderHardness {
  int component1 = 0;
  int component2 = 0;
  int others = 0;
};

SpiderHardness spider_hardness_components(const Select& select);
// The official rule from the three counts: "easy" | "medium" | "hard" | "extra". The one place
// the thresholds live; eval's reader of Spider's parsed "sql" field counts the same components.
std::string spider_hardness_level(const SpiderHardness& h);
// spider_hardness_level(spider_hardness_components(select)).
std::string spider_hardness(const Select& select);

// True for count/sum/avg/min/max/total/group_concat/string_agg calls (not windowed).
bool is_aggregate_call(const Expr& e);

}  // namespace nl2sql::sql
