// Whole-benchmark checks of the parser and printer on every gold query: parse coverage, the
// print→parse fixpoint, and same result for the printed SQL where the database is present.
#include <algorithm>
#include <map>

#include <gtest/gtest.h>

#include "nl2sql/db/executor.h"
#include "nl2sql/sql/normalize.h"
#include "nl2sql/sql/parser.h"
#include "nl2sql/sql/printer.h"
#include "sql/gold_queries.h"
#include "support/test_env.h"

namespace nl2sql::sql {
namespace {

using testing::same_result;

TEST(SqlGold, ParsesPrintsAndExecutesAllGoldQueries) {
  NL2SQL_REQUIRE_DATA(data);
  auto gold = testing::load_gold_queries(data);
  ASSERT_FALSE(gold.empty());
  struct Counts {
    int total = 0, parsed = 0, fixpoint = 0, executed = 0, same = 0, gold_failed = 0;
    int normalized_same = 0;
  };
  std::map<std::string, Counts> counts;
  db::ExecutorOptions opts;
  opts.limits.timeout_s = 20;
  db::Executor exec(opts);
  for (const auto& q : gold) {
    Counts& c = counts[q.dataset];
    ++c.total;
    auto r = parse(q.sql);
    if (!r.is_ok() || !r->is_query()) {
      ADD_FAILURE() << q.dataset << "#" << q.index << " does not parse: " << q.sql << "\n"
                    << (r.is_ok() ? "not a query" : r.status().message());
      continue;
    }
    ++c.parsed;
    std::string printed = to_sql(*r);
    auto r2 = parse(printed);
    if (!r2.is_ok()) {
      ADD_FAILURE() << q.dataset << "#" << q.index << " printed SQL does not parse: " << printed
                    << "\n" << r2.status().message();
      continue;
    }
    if (to_sql(*r2) != printed) {
      ADD_FAILURE() << q.dataset << "#" << q.index << " not a fixpoint:\n" << printed << "\n"
                    << to_sql(*r2);
      continue;
    }
    ++c.fixpoint;
    if (!q.db) continue;
    auto original = exec.run(*q.db, q.sql);
    if (!original.ok()) {
      ++c.gold_failed;  // a gold query that itself fails here proves nothing either way
      continue;
    }
    ++c.executed;
    auto reprinted = exec.run(*q.db, printed);
    bool ordered = !r->select->order_by.empty();
    if (reprinted.ok() && same_result(original.result, reprinted.result, ordered)) {
      ++c.same;
    } else {
      ADD_FAILURE() << q.dataset << "#" << q.index << " different result after printing:\n"
                    << q.sql << "\n" << printed << "\n" << reprinted.error;
    }
    // The normal form (aliases renamed, AND/OR operands sorted, names lower-cased) must keep
    // the result too.
    std::string normalized = normalized_sql(*r->select);
    auto renormalized = exec.run(*q.db, normalized);
    if (renormalized.ok() && same_result(original.result, renormalized.result, ordered)) {
      ++c.normalized_same;
    } else {
      ADD_FAILURE() << q.dataset << "#" << q.index << " different result after normalizing:\n"
                    << q.sql << "\n" << normalized << "\n" << renormalized.error;
    }
  }
  for (const auto& [name, c] : counts) {
    std::printf("[sql-gold] %-13s total %5d parsed %5d fixpoint %5d executed %5d same-result %5d"
                " normalized-same %5d (gold itself failed: %d)\n",
                name.c_str(), c.total, c.parsed, c.fixpoint, c.executed, c.same, c.normalized_same,
                c.gold_failed);
    EXPECT_EQ(c.parsed, c.total) << name;
    EXPECT_EQ(c.fixpoint, c.total) << name;
    EXPECT_EQ(c.same, c.executed) << name;
    EXPECT_EQ(c.normalized_same, c.executed) << name;
  }
}

}  // namespace
}  // namespace nl2sql::sql
