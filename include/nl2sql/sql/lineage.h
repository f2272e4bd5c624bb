// Lineage rewriting: which base-table rows a query's result depends on.
//
// rewrite_lineage(Q) produces witness queries. Each returns, per output row (or per group),
// one column per base-table occurrence in the FROM clause holding that occurrence's rowid
// (plain rows) or a comma-separated list of rowids (grouped rows: group_concat); a grouped
// witness, or a plain one cut by LIMIT/OFFSET, returns the original output columns before them
// (a plain witness's rows do not depend on what it selects, so two queries that differ only in
// their select list have the same witness text). The rewrite keeps joins, WHERE, GROUP BY/HAVING and
// ORDER BY … LIMIT, so only the rows of the kept output rows/groups are witnesses; DISTINCT
// without aggregation becomes GROUP BY over the output columns. Rows read by subqueries are
// witnesses too: an uncorrelated subquery (in WHERE, HAVING, SELECT, ON) contributes its own
// lineage, computed recursively.
//
// A correlated subquery in a WHERE clause is decorrelated: its witness is the subquery's FROM
// joined to the enclosing query's FROM, filtered by the subquery's WHERE and the outer WHERE's
// conjuncts that hold no subquery (only the subquery's own under NOT / NOT IN, where the rows
// that matter are those that would exclude an outer row), returning the rowids of both — the
// inner rows that meet some outer row that may be kept. This
// needs a single plain core (no GROUP BY/HAVING/compound, no nested subquery) over base
// tables whose names and aliases do not clash with the outer ones.
// Where an exact rewrite is not possible the result over-approximates, and says so in
// `fallbacks` (one reason per use):
//  - any other correlated subquery, recursive CTE, view, or WITHOUT ROWID table: every row of
//    each base table it reads;
//  - derived table (subquery in FROM) or CTE reference: the whole lineage of that subquery,
//    not only the rows the outer query keeps;
//  - compound query (UNION/INTERSECT/EXCEPT): each member's lineage without the compound's
//    ORDER BY/LIMIT; DISTINCT over groups: every group.
// Sampling (LineageOptions::group_budget): a grouped witness over a table of more rows than
// the budget keeps only the groups whose GROUP BY key hashes into bucket 0 of m (m = rows /
// budget, rounded up), through the executor's nl2sql_hash(); groups stay whole, so HAVING and
// the aggregates see every row of a kept group. The key hash is the same for every query, so two
// queries grouping by the same key keep the same groups. With ORDER BY … LIMIT the kept output
// groups are the best of the sample, not of D. An aggregate without GROUP BY (one group) keeps
// the large table's rows whose rowid hashes into bucket 0 (not with HAVING). Reported in
// `sampled`; run_witness falls back to the exact query when the sample keeps no row. At BIRD scale the exact witness of a grouped
// join costs as much as the query (seconds: the GROUP BY sorts every joined row).
// Over-approximating never drops a witness of a monotone query, but for queries with negation
// (NOT IN, NOT EXISTS, EXCEPT, outer joins with IS NULL tests) extra rows can change the result:
// the consumer verifies by executing Q on the sub-database (the tests do, with a file built from
// the witness rows: tests/support/lineage_database.h).
// Pure functions except run_witness and collect_lineage_rows (run SQL through db::Executor).
#pragma once

#include <charconv>
#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "nl2sql/core/status.h"
#include "nl2sql/db/executor.h"
#include "nl2sql/sql/analysis.h"
#include "nl2sql/sql/ast.h"

namespace nl2sql::sql {

struct WitnessQuery {
  std::string sql;                  // empty when all_rows_of is set
  std::vector<std::string> tables;  // base table of each trailing rowid column
  bool grouped = false;             // rowid columns hold comma-separated lists
  std::string all_rows_of;          // fallback: every row of this table is a witness
  // A decorrelated subquery's witness: when SQLite will not run `sql`, every row of these
  // tables is a witness instead (the over-approximation the rewrite would otherwise use).
  std::vector<std::string> all_rows_on_error;
  // Sampled witness (see above): `sql` keeps groups in 1 of `sample_one_in` key buckets and
  // `exact_sql` is the same query without the sample; 0 and empty when exact.
  int64_t sample_one_in = 0;
  std::string exact_sql;
  // Each row of this witness is one row of the query's result (before DISTINCT): the top
  // query's own plain witness. When the result is empty, so is the witness.
  bool rows_are_output = false;
  // The top query's own witness (plain or grouped): its rows or groups make the output rows,
  // where the other witnesses' rows are read by subqueries.
  bool of_top_query = false;
};

struct Lineage {
  std::vector<WitnessQuery> queries;
  std::vector<std::string> fallbacks;  // reasons an over-approximation was used
  std::vector<std::string> sampled;    // grouped witnesses that keep a sample of their groups
  bool exact() const { return fallbacks.empty() && sampled.empty(); }
};

struct LineageOptions {
  // Rows of the base tables (schema names, any case); tables not listed count as small.
  std::map<std::string, int64_t> table_rows;
  // Most rows of its largest table a grouped witness aggregates whole; 0: never sample.
  int64_t group_budget = 0;
};

Result<Lineage> rewrite_lineage(const Select& select, const Schema& schema,
                                const LineageOptions& options = {});

// LineageOptions::table_rows for `select`: the row count of every base table it reads, counted
// in `db` (SQLite counts from the smallest b-tree: milliseconds for millions of rows). `cache`,
// when given, keeps counts across calls on the same database.
Result<std::map<std::string, int64_t>> count_table_rows(const Select& select, const Schema& schema,
                                                        const std::filesystem::path& db,
                                                        const db::Executor& executor,
                                                        std::map<std::string, int64_t>* cache = nullptr);

// Runs one witness query (not an all_rows_of one): the sampled SQL, then the exact SQL when the
// sample kept no group.
db::ExecutionResult run_witness(const WitnessQuery& q, const std::filesystem::path& db,
                                const db::Executor& executor, const db::QueryLimits& limits);
// The same with every row handed to `sink` as it is read (Executor::run's row sink), none kept:
// a witness at BIRD scale has millions of rows. When the sample kept no group, `sink` has seen
// the sample's rows (none holds a rowid) and then sees the exact query's.
db::ExecutionResult run_witness(const WitnessQuery& q, const std::filesystem::path& db,
                                const db::Executor& executor, const db::QueryLimits& limits,
                                const db::RowSink& sink);

// Calls f(rowid) for each rowid a witness cell holds: an integer, or a comma-separated list (a
// grouped witness's group_concat); any other value holds none. False on a malformed list.
template <typename F>
bool for_each_rowid(const db::Value& v, F&& f) {
  if (v.type == db::ValueType::kInteger) {
    f(v.i);
  } else if (v.type == db::ValueType::kText) {
    const char* p = v.s.data();
    const char* e = p + v.s.size();
    while (p < e) {
      int64_t id = 0;
      auto [next, ec] = std::from_chars(p, e, id);
      if (ec != std::errc()) return false;
      f(id);
      p = next;
      while (p < e && *p == ',') ++p;
    }
  }
  return true;
}

// table -> rowids of the witness rows.
using LineageRows = std::map<std::string, std::set<int64_t>>;

// Runs the witness queries against `db` and gathers the rowids.
Result<LineageRows> collect_lineage_rows(const Lineage& lineage, const std::filesystem::path& db,
                                         const db::Executor& executor);

}  // namespace nl2sql::sql
