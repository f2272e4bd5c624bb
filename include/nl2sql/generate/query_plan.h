// Query-plan text: SQLite's EXPLAIN QUERY PLAN tree turned into readable, numbered steps, the
// reasoning format of the query-plan (QP) chain-of-thought generator. The converter is pure
// (plan rows in, steps out) so it is tested on plans of joins, subqueries, GROUP BY and temp
// B-trees; explain_query() runs the plan through db::Executor (read-only) and adds what the
// plan does not show — the filter, grouping, ordering and the columns delivered — from the
// parsed query. `nl2sql explain --db PATH "SQL"` prints both. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "nl2sql/core/status.h"
#include "nl2sql/db/executor.h"

namespace nl2sql::generate {

struct PlanRow {
  int64_t id = 0;
  int64_t parent = 0;
  std::string detail;
};

// The rows of an EXPLAIN QUERY PLAN result (columns id, parent, detail; others ignored).
std::vector<PlanRow> plan_rows(const db::ResultSet& result);

// The plan as an indented tree, one node per line ("|--" / "`--" like the sqlite3 shell).
std::string render_plan_tree(const std::vector<PlanRow>& rows);

// One readable step per plan node, numbered hierarchically ("1.", "2.1.") and indented by depth.
std::vector<std::string> plan_steps(const std::vector<PlanRow>& rows);

struct QueryPlanText {
  std::vector<PlanRow> rows;
  std::string tree;
  std::vector<std::string> steps;  // preparation, plan steps, then filter/group/order/deliver
  std::string text() const;        // steps joined by newlines
};

// Plans `sql` on `db` and describes it. Fails when the query does not plan (SQLite's message),
// is not a read-only query (rejected), or does not parse.
Result<QueryPlanText> explain_query(const db::Executor& executor, const std::filesystem::path& db,
                                    const std::string& sql);

}  // namespace nl2sql::generate
