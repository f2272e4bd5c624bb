// Plan-to-text: the converter on plans of joins, subqueries, GROUP BY and temp B-trees (as
// rows, so the test does not depend on the SQLite version's plan choices), and explain_query
// on a real database for the steps the AST adds.
#include <gtest/gtest.h>

#include "nl2sql/generate/query_plan.h"
#include "support/test_env.h"

namespace nl2sql::generate {
namespace {

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + "\n";
  return s;
}

TEST(PlanSteps, JoinScanThenPrimaryKeyLookup) {
  std::vector<PlanRow> rows = {{2, 0, "SCAN school AS T1"},
                               {4, 0, "SEARCH district AS T2 USING INTEGER PRIMARY KEY (rowid=?)"}};
  auto steps = plan_steps(rows);
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0], "1. Scan every row of table school (alias T1).");
  EXPECT_EQ(steps[1],
            "2. For each row so far, look up the matching rows of table district (alias T2) by its primary key "
            "where rowid=? (? = the value from the condition or the join).");
}

TEST(PlanSteps, IndexesAndAutomaticIndex) {
  auto steps = plan_steps({{3, 0, "SEARCH s USING INDEX idx_s_city (city=?)"},
                           {7, 0, "SEARCH t USING AUTOMATIC COVERING INDEX (sid=?)"},
                           {9, 0, "SCAN u USING COVERING INDEX idx_u"}});
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_NE(steps[0].find("through index idx_s_city where city=?"), std::string::npos) << steps[0];
  EXPECT_NE(steps[1].find("temporary index SQLite builds"), std::string::npos) << steps[1];
  EXPECT_NE(steps[2].find("in the order of index idx_u"), std::string::npos) << steps[2];
}

TEST(PlanSteps, GroupByOrderByAndDistinctUseTempBTrees) {
  auto steps = plan_steps({{2, 0, "SCAN product"},
                           {5, 0, "USE TEMP B-TREE FOR GROUP BY"},
                           {9, 0, "USE TEMP B-TREE FOR DISTINCT"},
                           {12, 0, "USE TEMP B-TREE FOR ORDER BY"},
                           {14, 0, "USE TEMP B-TREE FOR RIGHT PART OF ORDER BY"}});
  ASSERT_EQ(steps.size(), 5u);
  EXPECT_EQ(steps[1], "2. Sort the rows into groups with a temporary B-tree (GROUP BY).");
  EXPECT_EQ(steps[2], "3. Drop duplicate rows with a temporary B-tree (DISTINCT).");
  EXPECT_EQ(steps[3], "4. Sort the result rows with a temporary B-tree (ORDER BY).");
  EXPECT_NE(steps[4].find("remaining ORDER BY terms"), std::string::npos);
}

TEST(PlanSteps, SubqueriesNestWithHierarchicalNumbers) {
  auto steps = plan_steps({{2, 0, "SCAN book"},
                           {4, 0, "LIST SUBQUERY 1"},
                           {6, 4, "SCAN loan"},
                           {10, 0, "CORRELATED SCALAR SUBQUERY 2"},
                           {13, 10, "SEARCH r USING INDEX ir (book_id=?)"},
                           {20, 0, "SCALAR SUBQUERY 3"},
                           {22, 20, "SCAN price"}});
  ASSERT_EQ(steps.size(), 7u);
  EXPECT_EQ(steps[1], "2. Build the value list of an IN (…) subquery:");
  EXPECT_EQ(steps[2], "   2.1. Scan every row of table loan.");
  EXPECT_NE(steps[3].find("again for every outer row"), std::string::npos);
  EXPECT_EQ(steps[4].rfind("   3.1. Look up", 0), 0u) << steps[4];
  EXPECT_EQ(steps[5], "4. Compute a scalar subquery once:");
  EXPECT_EQ(steps[6], "   4.1. Scan every row of table price.");
}

TEST(PlanSteps, CompoundAndMaterializedSubqueries) {
  auto steps = plan_steps({{1, 0, "COMPOUND QUERY"},
                           {2, 1, "LEFT-MOST SUBQUERY"},
                           {4, 2, "SCAN a"},
                           {8, 1, "UNION USING TEMP B-TREE"},
                           {10, 8, "SCAN b"},
                           {20, 0, "MATERIALIZE sub"},
                           {22, 20, "SCAN c"},
                           {30, 0, "SCAN sub"},
                           {40, 0, "SCAN CONSTANT ROW"},
                           {50, 0, "SOMETHING NEW"}});
  const std::string s = joined(steps);
  EXPECT_NE(s.find("1. Combine the results of several SELECT statements:"), std::string::npos) << s;
  EXPECT_NE(s.find("   1.1. First SELECT:"), std::string::npos) << s;
  EXPECT_NE(s.find("      1.1.1. Scan every row of table a."), std::string::npos) << s;
  EXPECT_NE(s.find("   1.2. Then add the next SELECT's rows without duplicates (UNION):"), std::string::npos) << s;
  EXPECT_NE(s.find("2. Compute subquery sub into a temporary table:"), std::string::npos) << s;
  EXPECT_NE(s.find("Produce one constant row"), std::string::npos) << s;
  EXPECT_NE(s.find("Plan step: SOMETHING NEW."), std::string::npos) << s;
}

TEST(PlanTree, RendersLikeTheShell) {
  auto tree = render_plan_tree({{2, 0, "SCAN a"}, {4, 0, "LIST SUBQUERY 1"}, {6, 4, "SCAN b"}});
  EXPECT_EQ(tree, "QUERY PLAN\n|--SCAN a\n`--LIST SUBQUERY 1\n   `--SCAN b\n");
}

class ExplainQuery : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = dir_ / "shop.sqlite";
    testing::build_database(db_,
                            "CREATE TABLE customer (id INTEGER PRIMARY KEY, name TEXT, city TEXT);"
                            "CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER REFERENCES customer(id),"
                            " amount REAL);"
                            "INSERT INTO customer VALUES (1,'Ann','Lyon'),(2,'Bo','Nice');"
                            "INSERT INTO orders VALUES (1,1,10),(2,1,5),(3,2,7);");
  }
  testing::TempDir dir_;
  std::filesystem::path db_;
  db::Executor ex_;
};

TEST_F(ExplainQuery, JoinGroupOrderLimit) {
  auto t = explain_query(ex_, db_,
                         "SELECT T1.name, SUM(T2.amount) FROM customer AS T1 JOIN orders AS T2 ON T1.id = T2.customer_id "
                         "WHERE T1.city = 'Lyon' GROUP BY T1.id HAVING COUNT(*) > 1 ORDER BY SUM(T2.amount) DESC LIMIT 1");
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  const std::string s = t->text();
  EXPECT_NE(s.find("Preparation: open the tables"), std::string::npos) << s;
  EXPECT_NE(s.find("customer"), std::string::npos);
  EXPECT_NE(s.find("orders"), std::string::npos);
  EXPECT_NE(s.find("Match rows on T1.id = T2.customer_id."), std::string::npos) << s;
  EXPECT_NE(s.find("Keep only the rows where T1.city = 'Lyon'."), std::string::npos) << s;
  EXPECT_NE(s.find("Form one group per value of T1.id."), std::string::npos) << s;
  EXPECT_NE(s.find("Keep only the groups where COUNT(*) > 1."), std::string::npos) << s;
  EXPECT_NE(s.find("Order the rows by SUM(T2.amount) descending."), std::string::npos) << s;
  EXPECT_NE(s.find("Keep the first 1 row(s)."), std::string::npos) << s;
  EXPECT_NE(s.find("Deliver T1.name, SUM(T2.amount)."), std::string::npos) << s;
  EXPECT_NE(t->tree.find("QUERY PLAN\n"), std::string::npos);
  EXPECT_FALSE(t->rows.empty());
}

TEST_F(ExplainQuery, SubqueryPlanHasNestedStep) {
  auto t = explain_query(ex_, db_, "SELECT name FROM customer WHERE id NOT IN (SELECT customer_id FROM orders)");
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  EXPECT_NE(t->text().find("subquery"), std::string::npos) << t->text();
  EXPECT_NE(t->text().find(".1. "), std::string::npos) << t->text();
}

TEST_F(ExplainQuery, FailuresAreErrors) {
  EXPECT_FALSE(explain_query(ex_, db_, "SELECT nope FROM customer").is_ok());
  EXPECT_FALSE(explain_query(ex_, db_, "DELETE FROM customer").is_ok());
  EXPECT_FALSE(explain_query(ex_, db_, "SELEC 1").is_ok());
}

}  // namespace
}  // namespace nl2sql::generate
