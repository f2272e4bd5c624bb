#include <gtest/gtest.h>

#include "nl2sql/sql/analysis.h"
#include "nl2sql/sql/features.h"
#include "nl2sql/sql/normalize.h"
#include "nl2sql/sql/parser.h"
#include "support/test_env.h"

namespace nl2sql::sql {
namespace {

class SqlAnalysis : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = dir_ / "t.sqlite";
    nl2sql::testing::build_database(db_, R"(
      CREATE TABLE singer (singer_id INTEGER PRIMARY KEY, name TEXT, country TEXT, age INT);
      CREATE TABLE concert (concert_id INT, singer_id INT, year TEXT, venue TEXT);
      CREATE VIEW old_singers AS SELECT name, age FROM singer WHERE age > 60;
      INSERT INTO singer VALUES (1, 'A', 'France', 30), (2, 'B', 'Spain', 70);
    )");
    auto s = db::inspect_schema(db_);
    ASSERT_TRUE(s.is_ok()) << s.status().message();
    schema_ = std::move(*s);
  }
  References refs(const std::string& sql) {
    auto r = parse(sql);
    EXPECT_TRUE(r.is_ok()) << r.status().message();
    return analyze_references(*r->select, schema_);
  }
  nl2sql::testing::TempDir dir_;
  std::filesystem::path db_;
  Schema schema_;
};

using Reads = std::set<ColumnRead>;

TEST_F(SqlAnalysis, SchemaIsReadFromTheDatabase) {
  ASSERT_EQ(schema_.tables.size(), 3u);
  const TableInfo* s = schema_.find("SINGER");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->columns.size(), 4u);
  EXPECT_EQ(s->rowid_alias, 0);
  EXPECT_TRUE(schema_.find("old_singers")->is_view);
  EXPECT_FALSE(db::inspect_schema(dir_ / "missing.sqlite").is_ok());
}

TEST_F(SqlAnalysis, ResolvesAliasesStarsCtesAndCorrelation) {
  EXPECT_EQ(refs("SELECT T1.name FROM singer AS T1 JOIN concert AS T2 ON T1.singer_id = T2.singer_id").columns,
            (Reads{{"singer", "name"}, {"singer", "singer_id"}, {"concert", "singer_id"}}));
  EXPECT_EQ(refs("SELECT * FROM concert").columns.size(), 4u);
  auto r = refs("WITH c AS (SELECT name AS n FROM singer) SELECT n FROM c ORDER BY n");
  EXPECT_EQ(r.columns, (Reads{{"singer", "name"}}));
  EXPECT_TRUE(r.unresolved.empty());
  r = refs("SELECT name FROM singer s WHERE EXISTS (SELECT 1 FROM concert c WHERE c.singer_id = s.singer_id)");
  EXPECT_TRUE(r.correlated);
  EXPECT_EQ(r.columns.count({"singer", "singer_id"}), 1u);
  // Views expand to their base tables; a result alias used in WHERE reads nothing.
  EXPECT_EQ(refs("SELECT name FROM old_singers").columns, (Reads{{"singer", "name"}, {"singer", "age"}}));
  EXPECT_EQ(refs("SELECT age * 2 AS a2 FROM singer WHERE a2 > 3").columns, (Reads{{"singer", "age"}}));
  EXPECT_EQ(refs("SELECT rowid FROM concert").columns, (Reads{{"concert", "ROWID"}}));
  EXPECT_EQ(refs("SELECT count(*) FROM singer").tables, (std::set<std::string>{"singer"}));
  EXPECT_FALSE(refs("SELECT nope FROM singer").unresolved.empty());
}

TEST_F(SqlAnalysis, LiteralsArePairedWithTheirColumns) {
  auto r = refs("SELECT name FROM singer WHERE country = \"France\" AND age BETWEEN 20 AND -5 "
                "AND name LIKE 'A%' AND singer_id IN (1, 2)");
  std::set<std::string> got;
  for (const auto& l : r.literals) got.insert(l.column.second + " " + l.op + " " + l.literal);
  EXPECT_EQ(got, (std::set<std::string>{"country = France", "age BETWEEN 20", "age BETWEEN -5",
                                         "name LIKE A%", "singer_id IN 1", "singer_id IN 2"}));
}

// The analysis must agree with SQLite's own authorizer (the slow test does this on all gold).
TEST_F(SqlAnalysis, FeatureTagsAndHardness) {
  auto q = parse_query(
      "SELECT country, count(*) FROM singer WHERE age > (SELECT avg(age) FROM singer) "
      "GROUP BY country HAVING count(*) > 1 ORDER BY count(*) DESC LIMIT 3");
  ASSERT_TRUE(q.is_ok());
  Features f = compute_features(*q->select);
  EXPECT_TRUE(f.aggregation);
  EXPECT_TRUE(f.group_by);
  EXPECT_TRUE(f.having);
  EXPECT_TRUE(f.order_by_limit);
  EXPECT_EQ(f.subqueries, 1);
  EXPECT_EQ(f.max_nesting, 1);
  auto tags = f.tags();
  EXPECT_NE(std::find(tags.begin(), tags.end(), "nested"), tags.end());
  EXPECT_EQ(spider_hardness(*q->select), "extra");
  EXPECT_EQ(spider_hardness(*parse_query("SELECT count(*) FROM singer")->select), "easy");
  EXPECT_EQ(spider_hardness(*parse_query("SELECT name FROM singer WHERE age > 3 AND country = 'x'")->select),
            "medium");
  auto j = parse_query("SELECT a FROM t JOIN u ON t.x = u.x WHERE t.y LIKE '%a%' OR t.z = 1");
  auto h = spider_hardness_components(*j->select);
  EXPECT_EQ(h.component1, 4);  // WHERE + 1 extra table + OR + LIKE
}

TEST(SqlNormalize, SpellingVariantsNormalizeTogether) {
  auto n = [](const std::string& s) {
    auto r = normalize_sql(s);
    EXPECT_TRUE(r.is_ok()) << s;
    return r.is_ok() ? *r : std::string();
  };
  std::string a = n("select T1.Name from Singer as T1 join Concert as T2 on T1.id = T2.sid "
                    "where T1.age > 3 and T2.year = '2014'");
  std::string b = n("SELECT s.name FROM singer s JOIN concert c ON s.id = c.sid WHERE (c.year = "
                    "'2014') AND ((s.age > 3))");
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, "SELECT t1.name FROM singer AS t1 JOIN concert AS t2 ON t1.id = t2.sid WHERE "
               "t1.age > 3 AND t2.year = '2014'");
  EXPECT_EQ(n("SELECT name FROM singer WHERE b = 1 OR a = 2"), n("select NAME from singer where a = 2 or b = 1"));
  // Different queries stay different; string literals keep their case.
  EXPECT_NE(n("SELECT a FROM t WHERE x = 'A'"), n("SELECT a FROM t WHERE x = 'a'"));
  EXPECT_NE(n("SELECT a FROM t WHERE x = \"A\""), n("SELECT a FROM t WHERE x = \"a\""));
  EXPECT_NE(n("SELECT a FROM t WHERE x = 1 AND (y = 2 OR z = 3)"),
            n("SELECT a FROM t WHERE (x = 1 AND y = 2) OR z = 3"));
  // Correlated qualifiers follow the outer alias.
  EXPECT_EQ(n("SELECT a FROM t AS x WHERE EXISTS (SELECT 1 FROM u AS y WHERE y.k = x.k)"),
            "SELECT a FROM t AS t1 WHERE EXISTS (SELECT 1 FROM u AS t2 WHERE t2.k = t1.k)");
}

}  // namespace
}  // namespace nl2sql::sql
