// Whole-benchmark checks of the analyses: referenced columns against SQLite's authorizer,
// and Spider hardness on our AST against the official rule applied to Spider's parsed "sql".
#include <sqlite3.h>

#include <map>

#include <gtest/gtest.h>

#include "eval/hardness.h"
#include "nl2sql/sql/analysis.h"
#include "nl2sql/sql/features.h"
#include "nl2sql/sql/parser.h"
#include "sql/gold_queries.h"
#include "support/test_env.h"

namespace nl2sql::sql {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

struct AuthReads {
  std::set<ColumnRead> columns;
  std::set<std::string> tables;
};

int collect_reads(void* arg, int action, const char* a1, const char* a2, const char*, const char*) {
  auto* reads = static_cast<AuthReads*>(arg);
  if (action == SQLITE_READ && a1) {
    reads->tables.insert(lower(a1));
    if (a2 && *a2) reads->columns.insert({lower(a1), lower(a2)});
  }
  return SQLITE_OK;
}

// Prepares `sql` on its own read-only handle and returns what the authorizer saw.
std::optional<AuthReads> authorizer_reads(const std::filesystem::path& db, const std::string& sql) {
  sqlite3* h = nullptr;
  if (sqlite3_open_v2(db.string().c_str(), &h, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    sqlite3_close_v2(h);
    return std::nullopt;
  }
  AuthReads reads;
  sqlite3_set_authorizer(h, collect_reads, &reads);
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(h, sql.c_str(), -1, &stmt, nullptr);
  sqlite3_finalize(stmt);
  sqlite3_close_v2(h);
  if (rc != SQLITE_OK) return std::nullopt;
  return reads;
}

TEST(SqlGoldAnalysis, ReferencedColumnsEqualAuthorizerReads) {
  NL2SQL_REQUIRE_DATA(data);
  auto gold = testing::load_gold_queries(data);
  std::map<std::string, Schema> schemas;
  std::map<std::string, std::pair<int, int>> counts;  // dataset -> (checked, equal)
  int shown = 0;
  for (const auto& q : gold) {
    if (!q.db) continue;
    auto auth = authorizer_reads(*q.db, q.sql);
    if (!auth) continue;  // gold that SQLite itself rejects
    auto key = q.db->string();
    if (!schemas.count(key)) {
      auto s = db::inspect_schema(*q.db);
      ASSERT_TRUE(s.is_ok()) << s.status().message();
      schemas[key] = std::move(*s);
    }
    auto r = parse(q.sql);
    ASSERT_TRUE(r.is_ok() && r->is_query()) << q.sql;
    References refs = analyze_references(*r->select, schemas[key]);
    std::set<ColumnRead> ours;
    for (const auto& [t, c] : refs.columns) ours.insert({lower(t), lower(c)});
    std::set<std::string> our_tables;
    for (const auto& t : refs.tables) our_tables.insert(lower(t));
    auto& [checked, equal] = counts[q.dataset];
    ++checked;
    if (ours == auth->columns && our_tables == auth->tables) {
      ++equal;
    } else if (shown++ < 30) {
      std::string diff;
      for (const auto& c : auth->columns)
        if (!ours.count(c)) diff += " missing " + c.first + "." + c.second;
      for (const auto& c : ours)
        if (!auth->columns.count(c)) diff += " extra " + c.first + "." + c.second;
      for (const auto& t : auth->tables)
        if (!our_tables.count(t)) diff += " missing-table " + t;
      for (const auto& t : our_tables)
        if (!auth->tables.count(t)) diff += " extra-table " + t;
      ADD_FAILURE() << q.dataset << "#" << q.index << ": " << q.sql << "\n" << diff;
    }
  }
  for (const auto& [name, c] : counts) {
    std::printf("[sql-authorizer] %-13s checked %5d equal %5d\n", name.c_str(), c.first, c.second);
    EXPECT_EQ(c.first, c.second) << name;
    EXPECT_GT(c.first, 0);
  }
}

TEST(SqlGoldAnalysis, SpiderHardnessMatchesOfficialRuleOnDev) {
  NL2SQL_REQUIRE_DATA(data);
  auto gold = testing::load_gold_queries(data);
  std::map<std::string, int> ours_present, official_present;
  int compared = 0, agree = 0, shown = 0;
  for (const auto& q : gold) {
    if (q.dataset != "spider-dev" || q.spider_sql.is_null()) continue;
    auto r = parse(q.sql);
    ASSERT_TRUE(r.is_ok() && r->is_query()) << q.sql;
    std::string ours = spider_hardness(*r->select);
    std::string official = eval::spider_hardness(q.spider_sql);
    ++compared;
    if (ours == official) {
      ++agree;
    } else if (shown++ < 30) {
      auto c = spider_hardness_components(*r->select);
      auto o = eval::spider_hardness_components(q.spider_sql);
      ADD_FAILURE() << "spider-dev#" << q.index << ": ours " << ours << " (" << c.component1 << ","
                    << c.component2 << "," << c.others << ") official " << official << " ("
                    << o.component1 << "," << o.component2 << "," << o.others << ")\n" << q.sql;
    }
    if (q.db) {
      ++ours_present[ours];
      ++official_present[official];
    }
  }
  std::printf("[sql-hardness] spider-dev compared %d agree %d\n", compared, agree);
  for (const char* h : {"easy", "medium", "hard", "extra"})
    std::printf("[sql-hardness] DB present: %-6s ours %4d official-rule %4d\n", h, ours_present[h],
                official_present[h]);
  EXPECT_GT(compared, 0);
  EXPECT_EQ(agree, compared);
  EXPECT_EQ(ours_present, official_present);
}

}  // namespace
}  // namespace nl2sql::sql
