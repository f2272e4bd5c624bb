#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/test_env.h"

namespace nl2sql {
namespace {

using nl2sql::testing::run_nl2sql;

TEST(SqlCommand, FormatParseTablesLineage) {
  auto r = run_nl2sql("sql format 'select  a,b from T where (x=1)'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "SELECT a, b FROM T WHERE x = 1\n");
  r = run_nl2sql("sql format --normalize 'SELECT S.a FROM t AS S WHERE b = 1 AND a = 2'");
  EXPECT_EQ(r.out, "SELECT t1.a FROM t AS t1 WHERE a = 2 AND b = 1\n");

  r = run_nl2sql("sql parse --json 'SELECT count(*) FROM t'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"spider_hardness\": \"easy\""), std::string::npos) << r.out;

  r = run_nl2sql("sql parse 'SELECT a FROM WHERE'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("line 1, column"), std::string::npos) << r.err;

  nl2sql::testing::TempDir dir;
  auto db = dir / "t.sqlite";
  nl2sql::testing::build_database(db, "CREATE TABLE t (a INT, b TEXT); INSERT INTO t VALUES (1, 'x'), (2, 'y');");
  r = run_nl2sql("sql tables --db " + db.string() + " \"SELECT a FROM t WHERE b = 'y'\"");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("columns: t.a t.b"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("literal: t.b = y"), std::string::npos) << r.out;

  r = run_nl2sql("sql lineage --run --db " + db.string() + " \"SELECT a FROM t WHERE b = 'y'\"");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("rows of t (1): 2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("exact: yes"), std::string::npos) << r.out;

  // --group-budget: t has 2 rows, so a budget of 1 samples 1 key bucket in 2.
  r = run_nl2sql("sql lineage --group-budget 1 --db " + db.string() + " \"SELECT b, count(*) FROM t GROUP BY b\"");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("NL2SQL_HASH(b) % 2 = 0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sampled: groups over t: 1 key bucket in 2"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("exact: yes"), std::string::npos) << r.out;
  r = run_nl2sql("sql lineage --group-budget -1 --db " + db.string() + " \"SELECT b FROM t GROUP BY b\"");
  EXPECT_NE(r.exit_code, 0);
}

TEST(SqlCommand, NeighboursAndWhetherTheDatabaseTellsThemApart) {
  nl2sql::testing::TempDir dir;
  auto db = dir / "t.sqlite";
  nl2sql::testing::build_database(db, "CREATE TABLE t (a INT, b TEXT, c INT); INSERT INTO t VALUES (1, 'x', 5), (3, 'y', 5);");
  auto r = run_nl2sql("sql neighbours --run --db " + db.string() + " \"SELECT b FROM t WHERE a > 2\"");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // Nobody has a = 2, so >= 2 answers the same; < 2 does not.
  EXPECT_NE(r.out.find("comparison\tsame answer\tSELECT b FROM t WHERE a >= 2\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("comparison\ttold apart\tSELECT b FROM t WHERE a < 2\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("column\ttold apart\tSELECT b FROM t WHERE c > 2\n"), std::string::npos) << r.out;
  r = run_nl2sql("sql neighbours --json --max 2 --db " + db.string() + " \"SELECT b FROM t WHERE a > 2\"");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out).size(), 2u);
  r = run_nl2sql("sql neighbours --db " + db.string() + " \"DELETE FROM t\"");
  EXPECT_EQ(r.exit_code, 2);
}

}  // namespace
}  // namespace nl2sql
