#include "nl2sql/sql/neighbours.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "nl2sql/sql/parser.h"
#include "nl2sql/sql/printer.h"
#include "support/test_env.h"

namespace nl2sql::sql {
namespace {

class Neighbours : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = dir_ / "t.sqlite";
    nl2sql::testing::build_database(db_, R"(
      CREATE TABLE singer (singer_id INTEGER PRIMARY KEY, name TEXT, country TEXT, age INT);
      CREATE TABLE concert (concert_id INT, singer_id INT REFERENCES singer(singer_id), year INT, venue TEXT);
    )");
    auto s = db::inspect_schema(db_);
    ASSERT_TRUE(s.is_ok()) << s.status().message();
    schema_ = std::move(*s);
  }
  std::vector<Neighbour> of(const std::string& sql, NeighbourOptions o = {}) {
    auto r = parse_query(sql);
    EXPECT_TRUE(r.is_ok()) << r.status().message();
    if (!r.is_ok()) return {};
    return neighbour_queries(*r->select, schema_, o);
  }
  // neighbour text -> kind
  std::map<std::string, std::string> by_text(const std::string& sql) {
    std::map<std::string, std::string> m;
    for (auto& n : of(sql)) m[n.sql] = n.kind;
    return m;
  }
  nl2sql::testing::TempDir dir_;
  std::filesystem::path db_;
  Schema schema_;
};

TEST_F(Neighbours, OneModificationOfEachKindAtEachPlace) {
  auto m = by_text("SELECT name FROM singer WHERE age > 30 AND country = 'France' ORDER BY age DESC LIMIT 3");
  const std::string tail = " ORDER BY age DESC LIMIT 3";
  EXPECT_EQ(m["SELECT name FROM singer WHERE age >= 30 AND country = 'France'" + tail], "comparison");
  EXPECT_EQ(m["SELECT name FROM singer WHERE age < 30 AND country = 'France'" + tail], "comparison");
  EXPECT_EQ(m["SELECT name FROM singer WHERE age > 30 AND country != 'France'" + tail], "comparison");
  EXPECT_EQ(m["SELECT name FROM singer WHERE country = 'France'" + tail], "predicate");
  EXPECT_EQ(m["SELECT name FROM singer WHERE age > 30" + tail], "predicate");
  EXPECT_EQ(m["SELECT name FROM singer WHERE age > 30 OR country = 'France'" + tail], "predicate");
  EXPECT_EQ(m["SELECT name FROM singer" + tail], "predicate");
  EXPECT_EQ(m["SELECT name FROM singer WHERE age > 31 AND country = 'France'" + tail], "literal");
  EXPECT_EQ(m["SELECT name FROM singer WHERE age > 29 AND country = 'France'" + tail], "literal");
  EXPECT_EQ(m["SELECT name FROM singer WHERE age > 30 AND country = 'Francf'" + tail], "literal");
  EXPECT_EQ(m["SELECT DISTINCT name FROM singer WHERE age > 30 AND country = 'France'" + tail], "distinct");
  EXPECT_EQ(m["SELECT name FROM singer WHERE age > 30 AND country = 'France' ORDER BY age ASC LIMIT 3"], "order");
  EXPECT_EQ(m["SELECT name FROM singer WHERE age > 30 AND country = 'France' ORDER BY age DESC LIMIT 4"], "limit");
  EXPECT_EQ(m["SELECT name FROM singer WHERE age > 30 AND country = 'France' ORDER BY age DESC"], "limit");
  // Columns: another column of the same table and type class (text for name, numeric for age).
  EXPECT_EQ(m["SELECT country FROM singer WHERE age > 30 AND country = 'France'" + tail], "column");
  EXPECT_EQ(m["SELECT name FROM singer WHERE singer_id > 30 AND country = 'France'" + tail], "column");
  EXPECT_EQ(m["SELECT name FROM singer WHERE age > 30 AND country = 'France' ORDER BY singer_id DESC LIMIT 3"], "column");
  EXPECT_FALSE(m.count("SELECT age FROM singer WHERE age > 30 AND country = 'France'" + tail));  // not the name's class
}

TEST_F(Neighbours, EveryNeighbourParsesDiffersFromGoldAndIsListedOnce) {
  const std::string gold =
      "SELECT T1.name, count(*) FROM singer AS T1 JOIN concert AS T2 ON T1.singer_id = T2.singer_id "
      "WHERE T2.year IN (2014, 2015) AND T2.venue LIKE '%Hall%' GROUP BY T1.singer_id HAVING count(*) > 1 "
      "UNION SELECT name, 0 FROM singer WHERE NOT EXISTS (SELECT 1 FROM concert WHERE concert.singer_id = singer.singer_id)";
  auto ns = of(gold);
  ASSERT_GT(ns.size(), 20u);
  auto g = parse_query(gold);
  ASSERT_TRUE(g.is_ok());
  const std::string gold_text = to_sql(*g->select);
  std::set<std::string> seen, kinds;
  for (const auto& n : ns) {
    auto r = parse_query(n.sql);
    EXPECT_TRUE(r.is_ok()) << n.sql;
    EXPECT_NE(n.sql, gold_text);
    EXPECT_TRUE(seen.insert(n.sql).second) << "twice: " << n.sql;
    kinds.insert(n.kind);
  }
  for (const char* k : {"comparison", "predicate", "negation", "distinct", "column", "join key", "join",
                        "compound", "literal"})
    EXPECT_TRUE(kinds.count(k)) << k;
  std::set<std::string> texts(seen);
  EXPECT_TRUE(texts.count(
      "SELECT T1.name, COUNT(*) FROM singer AS T1 LEFT JOIN concert AS T2 ON T1.singer_id = T2.singer_id WHERE T2.year "
      "IN (2014, 2015) AND T2.venue LIKE '%Hall%' GROUP BY T1.singer_id HAVING COUNT(*) > 1 UNION SELECT name, 0 FROM "
      "singer WHERE NOT EXISTS (SELECT 1 FROM concert WHERE concert.singer_id = singer.singer_id)"));
  // The LIKE pattern keeps its wildcards; NOT IN and NOT EXISTS flip; UNION becomes UNION ALL.
  auto has = [&](const std::string& part) {
    for (const auto& t : texts)
      if (t.find(part) != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(has("LIKE '%Halm%'"));
  EXPECT_TRUE(has("T2.year NOT IN (2014, 2015)"));
  EXPECT_TRUE(has("UNION ALL SELECT"));
  EXPECT_TRUE(has("WHERE EXISTS (SELECT 1"));
  EXPECT_TRUE(has("ON T1.singer_id = T2.concert_id"));  // join key: another numeric column of concert
}

TEST_F(Neighbours, AggregatesSwapAndCountStarKeepsItsShape) {
  auto m = by_text("SELECT max(age), count(*), count(country), avg(age) FROM singer");
  EXPECT_EQ(m["SELECT MIN(age), COUNT(*), COUNT(country), AVG(age) FROM singer"], "aggregate");
  EXPECT_EQ(m["SELECT MAX(age), COUNT(*), COUNT(DISTINCT country), AVG(age) FROM singer"], "aggregate");
  EXPECT_EQ(m["SELECT MAX(age), COUNT(*), COUNT(country), SUM(age) FROM singer"], "aggregate");
  for (const auto& [text, kind] : m) EXPECT_EQ(text.find("COUNT(DISTINCT *)"), std::string::npos) << text;
}

TEST_F(Neighbours, AColumnNamedByTwoTablesIsNotReplaced) {
  // singer_id without a qualifier is ambiguous in this join: no column neighbour of it.
  for (const auto& n : of("SELECT count(*) FROM singer JOIN concert USING (singer_id) WHERE singer_id > 3"))
    if (n.kind == "column") {
      EXPECT_EQ(n.sql.find("WHERE singer_id > 3"), std::string::npos) << n.sql;
    }
}

TEST_F(Neighbours, CapKeepsAnEvenShareAndIsDeterministic) {
  const std::string gold = "SELECT name, country, age FROM singer WHERE age > 30 AND name = 'x' ORDER BY age LIMIT 2";
  auto all = of(gold);
  NeighbourOptions few;
  few.max_neighbours = 5;
  auto capped = of(gold, few);
  ASSERT_LE(capped.size(), 5u);
  ASSERT_GE(capped.size(), 4u);
  std::set<std::string> kinds;
  for (const auto& n : capped) kinds.insert(n.kind);
  EXPECT_GE(kinds.size(), 2u);  // spread over the enumeration, not its first sites only
  auto again = of(gold, few);
  ASSERT_EQ(again.size(), capped.size());
  for (size_t i = 0; i < capped.size(); ++i) EXPECT_EQ(again[i].sql, capped[i].sql);
  EXPECT_GT(all.size(), capped.size());
}

TEST(PerturbText, MovesTheLastLetterOrDigitAndKeepsWildcards) {
  EXPECT_EQ(perturb_text("France"), "Francf");
  EXPECT_EQ(perturb_text("Baz"), "Baa");
  EXPECT_EQ(perturb_text("ABZ"), "ABA");
  EXPECT_EQ(perturb_text("1999"), "1990");
  EXPECT_EQ(perturb_text("%Hall%"), "%Halm%");
  EXPECT_EQ(perturb_text("a_"), "b_");
  EXPECT_EQ(perturb_text("x\xc3\xa9"), "y\xc3\xa9");  // é is left whole
  EXPECT_EQ(perturb_text(""), "x");
  EXPECT_EQ(perturb_text("%"), "%x");
}

TEST(TypeClass, FollowsSqliteAffinity) {
  EXPECT_EQ(type_class("INTEGER"), "numeric");
  EXPECT_EQ(type_class("bigint"), "numeric");
  EXPECT_EQ(type_class("VARCHAR(20)"), "text");
  EXPECT_EQ(type_class("text"), "text");
  EXPECT_EQ(type_class("REAL"), "numeric");
  EXPECT_EQ(type_class("NUMERIC(10,2)"), "numeric");
  EXPECT_EQ(type_class("BLOB"), "other");
  EXPECT_EQ(type_class(""), "other");
}

}  // namespace
}  // namespace nl2sql::sql
