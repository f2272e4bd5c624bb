// Outlines of a query: the clauses the simulator's plans, fact sheets and critiques come from,
// and the defect a critique names for a candidate against gold.
#include "sim/outline.h"

#include <gtest/gtest.h>

namespace nl2sql::sim::detail {
namespace {

const std::string kGold =
    "SELECT DISTINCT T1.name, AVG(T2.score) FROM schools AS T1 INNER JOIN scores AS T2 ON T1.id = T2.school_id "
    "WHERE T1.county = 'Alameda' AND T2.year BETWEEN 2000 AND 2010 GROUP BY T1.name HAVING COUNT(*) > 1 "
    "ORDER BY AVG(T2.score) DESC LIMIT 3";

TEST(SimOutline, SplitsTheOuterClauses) {
  SqlOutline o = outline_of(kGold);
  EXPECT_TRUE(o.distinct);
  EXPECT_EQ(o.tables, (std::vector<std::string>{"schools", "scores"}));
  EXPECT_EQ(o.joins, (std::vector<std::string>{"T1.id = T2.school_id"}));
  // BETWEEN … AND … stays one filter.
  EXPECT_EQ(o.filters, (std::vector<std::string>{"T1.county = 'Alameda'", "T2.year BETWEEN 2000 AND 2010"}));
  EXPECT_EQ(o.select_items, (std::vector<std::string>{"T1.name", "AVG(T2.score)"}));
  EXPECT_EQ(o.group_by, (std::vector<std::string>{"T1.name"}));
  EXPECT_EQ(o.having, "COUNT(*) > 1");
  EXPECT_EQ(o.order_by, "AVG(T2.score) DESC");
  EXPECT_EQ(o.limit, "3");
}

TEST(SimOutline, DefectNamesTheFirstRealDifference) {
  EXPECT_EQ(describe_defect(kGold, kGold), "");
  // Keyword case and spacing are no difference; literal case is.
  EXPECT_EQ(describe_defect("select   distinct T1.name, AVG(T2.score) FROM schools AS T1 INNER JOIN scores AS T2 "
                            "ON T1.id = T2.school_id WHERE T1.county = 'Alameda' AND T2.year BETWEEN 2000 AND 2010 "
                            "GROUP BY T1.name HAVING COUNT(*) > 1 ORDER BY AVG(T2.score) DESC LIMIT 3",
                            kGold),
            "");
  const std::string lower_literal = "SELECT name FROM schools WHERE county = 'alameda'";
  EXPECT_NE(describe_defect(lower_literal, "SELECT name FROM schools WHERE county = 'Alameda'").find("county = 'Alameda'"),
            std::string::npos);
  EXPECT_EQ(describe_defect("SELECT name FROM schools", "SELECT name FROM schools AS T1 JOIN scores AS T2 ON T1.id = T2.id"),
            "The query does not read table scores, which the question needs.");
  EXPECT_EQ(describe_defect("SELECT name, city FROM schools", "SELECT name FROM schools"),
            "The query should return 1 column(s): name.");
}

TEST(SimOutline, PlanAndLedgerFollowTheGold) {
  auto plan = plan_of(kGold);
  ASSERT_TRUE(plan["steps"].is_array());
  EXPECT_EQ(plan["steps"][0], "Read table(s) schools, scores.");
  EXPECT_EQ(plan["expected_columns"], nlohmann::json::array({"T1.name", "AVG(T2.score)"}));
  auto ledger = ledger_of(kGold, "Alameda is a county");
  EXPECT_EQ(ledger["required_tables"], nlohmann::json::array({"schools", "scores"}));
  EXPECT_EQ(ledger["business_rules"], nlohmann::json::array({"Alameda is a county"}));
  EXPECT_EQ(ledger["sub_questions"].size(), 4u);  // two filters, the grouping, the output
  EXPECT_TRUE(contains_key({"T1.County = 'Alameda'"}, "t1.county = 'Alameda'"));
  EXPECT_FALSE(contains_key({"T1.county = 'Alameda'"}, "T1.county = 'alameda'"));
}

}  // namespace
}  // namespace nl2sql::sim::detail
