// PreSQL linking: the union over several PreSQL of the tables and columns they reference,
// resolved through aliases and subqueries; unparsable PreSQL is reported and contributes nothing.
#include <gtest/gtest.h>

#include "generate/schema_linking.h"
#include "support/test_env.h"

namespace nl2sql::generate {
namespace {

class SchemaLinking : public ::testing::Test {
 protected:
  void SetUp() override {
    auto db = dir_ / "s.sqlite";
    testing::build_database(db,
                            "CREATE TABLE school (school_id INTEGER PRIMARY KEY, name TEXT, district_id INTEGER, kind TEXT);"
                            "CREATE TABLE district (district_id INTEGER PRIMARY KEY, name TEXT, region TEXT, population INTEGER);"
                            "CREATE TABLE score (school_id INTEGER, year INTEGER, avg_math REAL);");
    auto s = db::inspect_schema(db);
    ASSERT_TRUE(s.is_ok()) << s.status().message();
    schema_ = std::move(*s);
  }
  testing::TempDir dir_;
  sql::Schema schema_;
};

TEST_F(SchemaLinking, UnionOverExpertsThroughAliases) {
  auto link = link_schema({"SELECT T1.name FROM school AS T1 JOIN district AS T2 ON T1.district_id = T2.district_id "
                           "WHERE T2.region = 'east'",
                           "SELECT name FROM school WHERE kind = 'vocational'"},
                          schema_);
  EXPECT_EQ(link.tables, (std::set<std::string>{"district", "school"}));
  EXPECT_EQ(link.columns, (std::set<std::string>{"district.district_id", "district.region", "school.district_id",
                                                 "school.kind", "school.name"}));
  EXPECT_TRUE(link.unparsed.empty());
}

TEST_F(SchemaLinking, SubqueriesAndCountStarTables) {
  auto link = link_schema({"SELECT COUNT(*) FROM score",
                           "SELECT name FROM district WHERE population = (SELECT MAX(population) FROM district)"},
                          schema_);
  EXPECT_EQ(link.tables, (std::set<std::string>{"district", "score"}));
  // score is read without a named column: its first column keeps it in the pruned rendering.
  EXPECT_TRUE(link.columns.count("score.school_id"));
  EXPECT_TRUE(link.columns.count("district.population"));
  EXPECT_TRUE(link.columns.count("district.name"));
  EXPECT_FALSE(link.columns.count("district.region"));
}

TEST_F(SchemaLinking, UnparsableQueriesAreReportedNotLinked) {
  auto link = link_schema({"SELEC name FORM school", "SELECT avg_math FROM score WHERE year = 2023"}, schema_);
  ASSERT_EQ(link.unparsed.size(), 1u);
  EXPECT_NE(link.unparsed[0].find("query 1"), std::string::npos);
  EXPECT_EQ(link.tables, (std::set<std::string>{"score"}));
  EXPECT_EQ(link.columns, (std::set<std::string>{"score.avg_math", "score.year"}));
}

TEST_F(SchemaLinking, NothingLinkedWhenNoQueries) {
  auto link = link_schema({}, schema_);
  EXPECT_TRUE(link.tables.empty());
  EXPECT_TRUE(link.columns.empty());
}

}  // namespace
}  // namespace nl2sql::generate
