#include <gtest/gtest.h>

#include <map>

#include "nl2sql/db/executor.h"
#include "nl2sql/sql/lineage.h"
#include "nl2sql/sql/parser.h"
#include "support/lineage_database.h"
#include "support/test_env.h"

namespace nl2sql::sql {
namespace {

class SqlLineage : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = dir_ / "t.sqlite";
    nl2sql::testing::build_database(db_, R"(
      CREATE TABLE singer (singer_id INTEGER PRIMARY KEY, name TEXT, country TEXT, age INT);
      CREATE TABLE concert (venue TEXT, singer_id INT);
      INSERT INTO singer VALUES (1, 'A', 'France', 30), (2, 'B', 'Spain', 70), (3, 'C', 'Spain', 50);
      INSERT INTO concert VALUES ('v1', 1), ('v2', 2), ('v3', 2), ('v4', 3);
    )");
    schema_ = std::move(*db::inspect_schema(db_));
  }
  LineageRows rows(const std::string& sql, Lineage* out = nullptr) {
    auto q = parse_query(sql);
    EXPECT_TRUE(q.is_ok());
    auto l = rewrite_lineage(*q->select, schema_);
    EXPECT_TRUE(l.is_ok()) << l.status().message();
    if (!l.is_ok()) return {};
    if (out) *out = *l;
    db::ExecutorOptions opts;
    opts.immutable = false;
    db::Executor exec(opts);
    auto r = collect_lineage_rows(*l, db_, exec);
    EXPECT_TRUE(r.is_ok()) << r.status().message();
    return r.is_ok() ? *r : LineageRows{};
  }
  nl2sql::testing::TempDir dir_;
  std::filesystem::path db_;
  Schema schema_;
};

using Ids = std::set<int64_t>;

TEST_F(SqlLineage, WitnessRowsOfJoinsGroupsAndTopK) {
  Lineage l;
  auto r = rows("SELECT name FROM singer WHERE age > 40", &l);
  EXPECT_TRUE(l.exact());
  EXPECT_EQ(r["singer"], (Ids{2, 3}));
  r = rows("SELECT c.venue FROM singer AS s JOIN concert AS c ON s.singer_id = c.singer_id "
           "WHERE s.country = 'Spain' AND c.venue <> 'v4'");
  EXPECT_EQ(r["singer"], (Ids{2}));
  EXPECT_EQ(r["concert"], (Ids{2, 3}));
  r = rows("SELECT singer_id, count(*) FROM concert GROUP BY singer_id HAVING count(*) > 1");
  EXPECT_EQ(r["concert"], (Ids{2, 3}));
  EXPECT_EQ(r.count("singer"), 0u);
  r = rows("SELECT name FROM singer ORDER BY age DESC LIMIT 1");
  EXPECT_EQ(r["singer"], (Ids{2}));
  r = rows("SELECT DISTINCT country FROM singer ORDER BY country LIMIT 1");
  EXPECT_EQ(r["singer"], (Ids{1}));
  // Rows read by a WHERE subquery are witnesses too (the average reads every singer).
  r = rows("SELECT name FROM singer WHERE age > (SELECT avg(age) FROM singer)", &l);
  EXPECT_TRUE(l.exact());
  EXPECT_EQ(r["singer"], (Ids{1, 2, 3}));
  r = rows("SELECT venue FROM concert WHERE singer_id IN (SELECT singer_id FROM singer WHERE country = 'France')");
  EXPECT_EQ(r["concert"], (Ids{1}));
  EXPECT_EQ(r["singer"], (Ids{1}));
}

// What a witness selects does not change its rows: it returns its rowid columns alone unless
// GROUP BY, HAVING or a kept ORDER BY names an output column, so queries that differ only in
// their select list have one witness text. Only the top query's plain witness has one row per
// result row.
TEST_F(SqlLineage, WitnessTextIsTheSameForQueriesThatDifferOnlyInWhatTheySelect) {
  auto witnesses = [&](const std::string& sql) {
    auto q = parse_query(sql);
    EXPECT_TRUE(q.is_ok());
    auto l = rewrite_lineage(*q->select, schema_);
    EXPECT_TRUE(l.is_ok()) << l.status().message();
    return l.is_ok() ? l->queries : std::vector<WitnessQuery>{};
  };
  auto text = [&](const std::string& sql) {
    auto w = witnesses(sql);
    return w.empty() ? std::string() : w[0].sql;
  };
  // Plain, no cut: the select list, DISTINCT and ORDER BY go.
  EXPECT_EQ(text("SELECT name FROM singer WHERE age > 40"),
            text("SELECT DISTINCT singer_id, name, age FROM singer WHERE age > 40 ORDER BY age"));
  EXPECT_EQ(text("SELECT name FROM singer WHERE age > 40").find("name"), std::string::npos);
  EXPECT_NE(text("SELECT name FROM singer WHERE age > 40"), text("SELECT name FROM singer WHERE age > 50"));
  // Cut by LIMIT in an order that names no output column: the order stays, the list goes.
  EXPECT_EQ(text("SELECT name FROM singer ORDER BY age DESC LIMIT 1"),
            text("SELECT name, country FROM singer ORDER BY age DESC LIMIT 1"));
  // An alias or a position named by ORDER BY, GROUP BY or HAVING keeps the output columns.
  EXPECT_NE(text("SELECT name, age AS a FROM singer ORDER BY a DESC LIMIT 1"),
            text("SELECT name, age AS a, country FROM singer ORDER BY a DESC LIMIT 1"));
  EXPECT_NE(text("SELECT country, count(*) AS n FROM singer GROUP BY 1 HAVING n > 1"),
            text("SELECT country, count(*) AS n, max(age) FROM singer GROUP BY 1 HAVING n > 1"));
  // Grouped, naming nothing: shared too.
  EXPECT_EQ(text("SELECT country FROM singer GROUP BY country ORDER BY count(*) DESC LIMIT 1"),
            text("SELECT country, max(age) FROM singer GROUP BY country ORDER BY count(*) DESC LIMIT 1"));
  // The rows each witness finds are still the query's.
  EXPECT_EQ(rows("SELECT name, country FROM singer ORDER BY age DESC LIMIT 1")["singer"], (Ids{2}));
  EXPECT_EQ(rows("SELECT name, age AS a FROM singer ORDER BY a LIMIT 1")["singer"], (Ids{1}));
  // One row per result row: the top query's plain witness only.
  auto sub = witnesses("SELECT name FROM singer WHERE age = (SELECT max(age) FROM singer WHERE country = 'Spain')");
  ASSERT_EQ(sub.size(), 2u);
  EXPECT_EQ(sub[0].rows_are_output + sub[1].rows_are_output, 1);
  auto grouped = witnesses("SELECT count(*) FROM singer WHERE age > 100");
  ASSERT_EQ(grouped.size(), 1u);
  EXPECT_FALSE(grouped[0].rows_are_output);
  auto compound = witnesses("SELECT name FROM singer UNION SELECT venue FROM concert");
  ASSERT_EQ(compound.size(), 2u);
  EXPECT_FALSE(compound[0].rows_are_output || compound[1].rows_are_output);
}

TEST_F(SqlLineage, CorrelatedSubqueriesInWhereAreDecorrelated) {
  // EXISTS: the concert rows are those meeting a kept singer, not every concert.
  Lineage l;
  auto r = rows("SELECT name FROM singer AS s WHERE EXISTS (SELECT 1 FROM concert AS c WHERE "
                "c.singer_id = s.singer_id AND c.venue = 'v4')", &l);
  EXPECT_TRUE(l.exact());
  EXPECT_EQ(r["concert"], (Ids{4}));  // concert rowid 4 is ('v4', 3)
  EXPECT_EQ(r["singer"], (Ids{3}));
  // A correlated scalar subquery compared in WHERE: the concerts of the singers kept.
  r = rows("SELECT name FROM singer AS s WHERE s.age > 40 AND (SELECT COUNT(*) FROM concert AS c "
           "WHERE c.singer_id = s.singer_id) >= 1", &l);
  EXPECT_TRUE(l.exact());
  EXPECT_EQ(r["concert"], (Ids{2, 3, 4}));
  EXPECT_EQ(r["singer"], (Ids{2, 3}));
  // NOT EXISTS: the rows that would exclude an outer row are those meeting any singer; said.
  r = rows("SELECT name FROM singer AS s WHERE NOT EXISTS (SELECT 1 FROM concert AS c WHERE "
           "c.singer_id = s.singer_id AND c.venue = 'v1')", &l);
  EXPECT_FALSE(l.exact());
  EXPECT_EQ(r["concert"], (Ids{1}));
  // Clashing aliases (the subquery reuses an outer alias, correlated through another one):
  // no decorrelation, the whole-table fallback, reported.
  r = rows("SELECT s.name FROM singer AS s JOIN concert AS k ON k.singer_id = s.singer_id WHERE "
           "EXISTS (SELECT 1 FROM concert AS s WHERE s.venue = k.venue AND s.singer_id = 3)", &l);
  EXPECT_FALSE(l.exact());
  EXPECT_EQ(r["concert"].size(), 4u);
  EXPECT_EQ(r["singer"], (Ids{3}));
}

TEST_F(SqlLineage, FallbacksAreReported) {
  Lineage l;
  // A correlated subquery outside WHERE (in the select list): every row of its tables.
  auto r = rows("SELECT name, (SELECT COUNT(*) FROM concert AS c WHERE c.singer_id = s.singer_id) "
                "FROM singer AS s WHERE s.country = 'Spain'", &l);
  EXPECT_FALSE(l.exact());
  EXPECT_EQ(r["concert"].size(), 4u);  // every concert row: over-approximation
  EXPECT_EQ(r["singer"], (Ids{2, 3}));
  rows("SELECT x FROM (SELECT name AS x FROM singer WHERE age < 60) LIMIT 1", &l);
  EXPECT_FALSE(l.exact());
  auto bad = parse_query("SELECT a FROM nowhere");
  EXPECT_FALSE(rewrite_lineage(*bad->select, schema_).is_ok());
}

TEST_F(SqlLineage, SubDatabaseHoldsOnlyWitnessRows) {
  auto r = rows("SELECT c.venue FROM singer AS s JOIN concert AS c ON s.singer_id = c.singer_id WHERE s.age > 60");
  auto sub = dir_ / "sub.sqlite";
  ASSERT_TRUE(testing::build_lineage_database(db_, r, sub).is_ok());
  db::ExecutorOptions opts;
  opts.immutable = false;
  db::Executor exec(opts);
  auto all = exec.run(sub, "SELECT (SELECT count(*) FROM singer), (SELECT count(*) FROM concert)");
  ASSERT_TRUE(all.ok()) << all.error;
  EXPECT_EQ(all.result.rows[0][0].i, 1);
  EXPECT_EQ(all.result.rows[0][1].i, 2);
  auto again = exec.run(sub, "SELECT c.venue FROM singer AS s JOIN concert AS c ON s.singer_id = c.singer_id WHERE s.age > 60");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again.result.rows.size(), 2u);
}

// A grouped witness over a table above the budget keeps whole groups, those whose key hashes
// into bucket 0 of m; under the budget, or when the sample keeps no group, the lineage is exact.
TEST_F(SqlLineage, LargeGroupedWitnessesKeepAHashSampleOfWholeGroups) {
  auto db = dir_ / "sales.sqlite";
  nl2sql::testing::build_database(db, R"(
    CREATE TABLE sale (id INTEGER PRIMARY KEY, shop INTEGER, amount INTEGER);
    WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 399)
    INSERT INTO sale SELECT i + 1, i % 50, i FROM n;)");
  Schema schema = std::move(*db::inspect_schema(db));
  db::ExecutorOptions eo;
  eo.immutable = false;
  db::Executor exec(eo);
  auto lineage = [&](const std::string& sql, int64_t budget) {
    LineageOptions o;
    o.table_rows = {{"SALE", 400}};  // any case
    o.group_budget = budget;
    auto q = parse_query(sql);
    EXPECT_TRUE(q.is_ok());
    auto l = rewrite_lineage(*q->select, schema, o);
    EXPECT_TRUE(l.is_ok()) << l.status().message();
    return *l;
  };
  auto shops_of = [&](const std::set<int64_t>& ids) {
    std::map<int64_t, int> per_shop;
    for (int64_t id : ids) ++per_shop[(id - 1) % 50];
    return per_shop;
  };
  const std::string grouped = "SELECT shop, SUM(amount) FROM sale GROUP BY shop HAVING COUNT(*) >= 8";
  Lineage l = lineage(grouped, 40);  // 400 rows / 40: 1 bucket in 10
  ASSERT_EQ(l.queries.size(), 1u);
  EXPECT_EQ(l.queries[0].sample_one_in, 10);
  EXPECT_FALSE(l.queries[0].exact_sql.empty());
  EXPECT_FALSE(l.exact());
  ASSERT_EQ(l.sampled.size(), 1u);
  EXPECT_NE(l.sampled[0].find("1 key bucket in 10"), std::string::npos) << l.sampled[0];
  auto r = collect_lineage_rows(l, db, exec);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  auto kept = shops_of((*r)["sale"]);
  auto expected = exec.run(db, "SELECT DISTINCT shop FROM sale WHERE nl2sql_hash(shop) % 10 = 0");
  ASSERT_TRUE(expected.ok()) << expected.error;
  ASSERT_GT(expected.result.rows.size(), 0u);
  ASSERT_LT(expected.result.rows.size(), 50u);
  EXPECT_EQ(kept.size(), expected.result.rows.size());
  for (const auto& row : expected.result.rows) EXPECT_EQ(kept[row[0].i], 8) << "shop " << row[0].i;  // whole

  // Under the budget: exact, every group.
  l = lineage(grouped, 400);
  EXPECT_TRUE(l.exact());
  EXPECT_EQ(l.queries[0].sample_one_in, 0);
  auto all = collect_lineage_rows(l, db, exec);
  ASSERT_TRUE(all.is_ok());
  EXPECT_EQ(shops_of((*all)["sale"]).size(), 50u);

  // DISTINCT … LIMIT becomes GROUP BY 1: the positional key is the column it names.
  l = lineage("SELECT DISTINCT shop FROM sale ORDER BY shop DESC LIMIT 2", 40);
  EXPECT_EQ(l.queries[0].sample_one_in, 10);
  EXPECT_NE(l.queries[0].sql.find("NL2SQL_HASH(shop)"), std::string::npos) << l.queries[0].sql;
  r = collect_lineage_rows(l, db, exec);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  kept = shops_of((*r)["sale"]);
  EXPECT_EQ(kept.size(), 2u);  // the top two shops of the sample
  for (const auto& [shop, n] : kept) EXPECT_EQ(n, 8);

  // A group the sample misses: run_witness falls back to the exact query.
  auto miss = exec.run(db, "SELECT shop FROM sale WHERE nl2sql_hash(shop) % 10 <> 0 LIMIT 1");
  ASSERT_TRUE(miss.ok() && !miss.result.rows.empty());
  const int64_t shop = miss.result.rows[0][0].i;
  l = lineage("SELECT COUNT(*) FROM sale WHERE shop = " + std::to_string(shop) + " GROUP BY shop", 40);
  ASSERT_EQ(l.queries[0].sample_one_in, 10);
  auto sampled_only = exec.run(db, l.queries[0].sql);
  ASSERT_TRUE(sampled_only.ok());
  EXPECT_TRUE(sampled_only.result.rows.empty());
  r = collect_lineage_rows(l, db, exec);
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(shops_of((*r)["sale"]), (std::map<int64_t, int>{{shop, 8}}));

  // An aggregate without GROUP BY is one group: a rowid-hash sample of its rows, falling back to
  // the exact query when the sample keeps none of them (a selective WHERE).
  l = lineage("SELECT COUNT(*) FROM sale", 40);
  ASSERT_EQ(l.queries[0].sample_one_in, 10);
  EXPECT_NE(l.sampled[0].find("rows of sale in the single group: 1 rowid bucket in 10"), std::string::npos)
      << l.sampled[0];
  r = collect_lineage_rows(l, db, exec);
  ASSERT_TRUE(r.is_ok());
  auto sampled_rows = exec.run(db, "SELECT count(*) FROM sale WHERE nl2sql_hash(rowid) % 10 = 0");
  ASSERT_TRUE(sampled_rows.ok());
  EXPECT_EQ(static_cast<int64_t>((*r)["sale"].size()), sampled_rows.result.rows[0][0].i);
  EXPECT_GT((*r)["sale"].size(), 10u);
  EXPECT_LT((*r)["sale"].size(), 80u);
  auto missed = exec.run(db, "SELECT id FROM sale WHERE nl2sql_hash(rowid) % 10 <> 0 LIMIT 1");
  ASSERT_TRUE(missed.ok());
  const int64_t id = missed.result.rows[0][0].i;
  l = lineage("SELECT MAX(amount) FROM sale WHERE id = " + std::to_string(id), 40);
  ASSERT_EQ(l.queries[0].sample_one_in, 10);
  r = collect_lineage_rows(l, db, exec);
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ((*r)["sale"], (std::set<int64_t>{id}));
  // Ungrouped witnesses, HAVING on the single group and keys that cannot move to WHERE are
  // never sampled.
  EXPECT_TRUE(lineage("SELECT amount FROM sale WHERE shop = 3", 40).exact());
  EXPECT_TRUE(lineage("SELECT COUNT(*) FROM sale HAVING COUNT(*) > 300", 40).exact());
  EXPECT_TRUE(lineage("SELECT shop FROM sale GROUP BY (SELECT 1) , shop", 40).exact());
}

}  // namespace
}  // namespace nl2sql::sql
