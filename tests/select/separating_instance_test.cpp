// Separating instances on a hand-built database where the answers are known: a case-mismatched
// literal, a wrong join key, COUNT vs COUNT(DISTINCT), a subquery in WHERE; the in-memory
// instance leaves the source untouched; and the duel selector with the `sim` model picks the
// candidate that agrees with gold. D′'s database and answer format: instance_database_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
#include <set>

#include <nlohmann/json.hpp>

#include "nl2sql/core/config.h"
#include "nl2sql/core/hash.h"
#include "nl2sql/data/dataset.h"
#include "nl2sql/db/result_compare.h"
#include "nl2sql/llm/client.h"
#include "nl2sql/select/selector.h"
#include "nl2sql/select/separating_instance.h"
#include "nl2sql/sim/simulator.h"
#include "support/explanation_check.h"
#include "support/fake_openai_server.h"
#include "support/test_env.h"

namespace nl2sql::select {
namespace {

const char* kBank = R"(
CREATE TABLE district (district_id INTEGER PRIMARY KEY, a2 TEXT, a3 TEXT);
CREATE TABLE account (account_id INTEGER PRIMARY KEY, district_id INTEGER REFERENCES district,
                      frequency TEXT);
CREATE TABLE client (client_id INTEGER PRIMARY KEY, name TEXT, district_id INTEGER);
CREATE TABLE loan (loan_id INTEGER PRIMARY KEY, client_id INTEGER REFERENCES client, amount INTEGER);
INSERT INTO district VALUES (1, 'Praha', 'Prague'), (2, 'Kolin', 'east Bohemia'),
  (3, 'Pisek', 'south Bohemia'), (4, 'Nachod', 'east Bohemia'), (5, 'Brno', 'south Moravia');
INSERT INTO account VALUES (10, 1, 'monthly'), (11, 2, 'monthly'), (12, 2, 'weekly'),
  (13, 3, 'monthly'), (14, 4, 'monthly'), (15, 4, 'weekly'), (16, 5, 'monthly'),
  (17, 2, 'monthly'), (18, 3, 'weekly'), (19, 1, 'monthly');
INSERT INTO client VALUES (100, 'Ana', 1), (101, 'Ben', 2), (102, 'Cyril', 3), (103, 'Dana', 4),
  (104, 'Emil', 5), (105, 'Fran', 2);
INSERT INTO loan VALUES (1000, 100, 800), (1001, 101, 2500), (1002, 101, 9000), (1003, 103, 6000),
  (1004, 104, 1200), (1005, 105, 300);
)";

class SeparatingInstanceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = tmp_ / "bank.sqlite";
    nl2sql::testing::build_database(db_, kBank);
    auto b = InstanceBuilder::open(db_, executor_);
    ASSERT_TRUE(b.is_ok()) << b.status().to_string();
    builder_ = std::make_unique<InstanceBuilder>(std::move(*b));
  }

  SeparatingInstance separate(const std::string& a, const std::string& b, uint64_t seed = 1) {
    auto la = builder_->lineage(a);
    auto lb = builder_->lineage(b);
    EXPECT_TRUE(la.is_ok()) << la.status().to_string();
    EXPECT_TRUE(lb.is_ok()) << lb.status().to_string();
    EXPECT_FALSE(db::relaxed_equal(la->result, lb->result)) << "the fixture pair must differ on D";
    auto s = builder_->separate(*la, *lb, seed);
    EXPECT_TRUE(s.is_ok()) << s.status().to_string();
    return *s;
  }

  // Every row of D′ is a row of D.
  void expect_subset(const SeparatingInstance& s) {
    for (const auto& [table, rows] : s.instance.tables) {
      auto all = executor_.run(db_, "SELECT * FROM " + table);
      ASSERT_TRUE(all.ok());
      for (const auto& row : rows.rows) {
        bool present = false;
        for (const auto& r : all.result.rows) present = present || r == row;
        EXPECT_TRUE(present) << table;
      }
    }
  }

  Result<Selection> bohemia_duels(data::Question& q, const std::string& select);

  nl2sql::testing::TempDir tmp_;
  std::filesystem::path db_;
  db::Executor executor_;
  std::unique_ptr<InstanceBuilder> builder_;
};

TEST_F(SeparatingInstanceTest, CaseMismatchedLiteral) {
  const std::string base =
      "SELECT COUNT(*) FROM account JOIN district ON account.district_id = district.district_id "
      "WHERE account.frequency = 'monthly' AND district.a3 = ";
  auto before = core::sha256_file(db_);
  auto s = separate(base + "'East Bohemia'", base + "'east Bohemia'");
  ASSERT_TRUE(s.found) << s.failure;
  // (1, 2) sampling for COUNT; the wrong literal matches nothing, so only the right side's
  // terms exist: up to two (account, district) terms.
  EXPECT_LE(s.instance.rows(), 4u);
  ASSERT_EQ(s.answer_a.rows.size(), 1u);
  EXPECT_EQ(s.answer_a.rows[0][0].i, 0);
  EXPECT_GE(s.answer_b.rows[0][0].i, 1);
  expect_subset(s);
  EXPECT_EQ(*core::sha256_file(db_), *before);  // the source database is never written
}

TEST_F(SeparatingInstanceTest, WrongJoinKey) {
  auto s = separate(
      "SELECT account.account_id FROM account JOIN district ON account.district_id = "
      "district.district_id WHERE district.a3 = 'south Bohemia'",
      "SELECT account.account_id FROM account JOIN district ON account.account_id = "
      "district.district_id WHERE district.a3 = 'south Bohemia'");
  ASSERT_TRUE(s.found) << s.failure;
  EXPECT_LE(s.instance.rows(), 4u);
  // The right join yields accounts 13 or 18 (district 3); the wrong one nothing (no account id 3).
  EXPECT_TRUE(s.answer_b.rows.empty());
  ASSERT_FALSE(s.answer_a.rows.empty());
  for (const auto& r : s.answer_a.rows) EXPECT_TRUE(r[0].i == 13 || r[0].i == 18);
  expect_subset(s);
}

TEST_F(SeparatingInstanceTest, CountVersusCountDistinct) {
  auto s = separate("SELECT COUNT(district_id) FROM account WHERE frequency = 'monthly'",
                    "SELECT COUNT(DISTINCT district_id) FROM account WHERE frequency = 'monthly'");
  ASSERT_TRUE(s.found) << s.failure;
  // Only two accounts of the same district separate them.
  ASSERT_TRUE(s.instance.tables.count("account"));
  const auto& acc = s.instance.tables.at("account");
  EXPECT_GE(acc.rows.size(), 2u);
  EXPECT_LE(s.instance.rows(), 6u);
  EXPECT_GT(s.answer_a.rows[0][0].i, s.answer_b.rows[0][0].i);
  expect_subset(s);
}

TEST_F(SeparatingInstanceTest, SubqueryInWhere) {
  auto s = separate(
      "SELECT name FROM client WHERE client_id IN (SELECT client_id FROM loan WHERE amount > 1000)",
      "SELECT name FROM client WHERE client_id IN (SELECT client_id FROM loan WHERE amount > 5000)");
  ASSERT_TRUE(s.found) << s.failure;
  // A client row and the loan that puts it in the subquery's answer must both be there.
  ASSERT_TRUE(s.instance.tables.count("client"));
  ASSERT_TRUE(s.instance.tables.count("loan"));
  EXPECT_LE(s.instance.rows(), 6u);
  // Emil (loan 1200) is in A only; Ben/Dana are in both, so A ⊋ B on D′.
  EXPECT_GT(s.answer_a.rows.size(), s.answer_b.rows.size());
  expect_subset(s);
}

TEST_F(SeparatingInstanceTest, CorrelatedExistsInWhere) {
  // The correlated form of the same pair: lineage decorrelates it, so the loan rows drawn are
  // those that meet a client, not any loan of the table.
  const std::string a =
      "SELECT name FROM client AS c WHERE EXISTS (SELECT 1 FROM loan AS l WHERE l.client_id = "
      "c.client_id AND l.amount > 1000)";
  const std::string b =
      "SELECT name FROM client AS c WHERE EXISTS (SELECT 1 FROM loan AS l WHERE l.client_id = "
      "c.client_id AND l.amount > 5000)";
  auto la = builder_->lineage(a);
  ASSERT_TRUE(la.is_ok()) << la.status().to_string();
  EXPECT_TRUE(la->fallbacks.empty()) << la->fallbacks.front();
  for (uint64_t seed : {1u, 2u, 3u, 4u, 5u}) {
    auto s = separate(a, b, seed);
    ASSERT_TRUE(s.found) << s.failure;
    ASSERT_TRUE(s.instance.tables.count("loan"));
    EXPECT_LE(s.instance.rows(), 6u);
    EXPECT_GT(s.answer_a.rows.size(), s.answer_b.rows.size());
    expect_subset(s);
  }
}

TEST_F(SeparatingInstanceTest, KnownResultSkipsTheRunOnD) {
  const std::string sql = "SELECT name FROM client WHERE district_id = 2";
  std::vector<LineageTerm> terms;
  {  // dropped before the next lineage, so its witness is not shared but run again
    auto without = builder_->lineage(sql);
    ASSERT_TRUE(without.is_ok());
    EXPECT_EQ(without->result.rows.size(), 2u);  // Ben, Fran
    terms = without->witnesses.at(0)->terms;
  }
  db::ResultSet known;
  known.columns = {"name"};
  known.rows = {{db::Value::text("Ben")}, {db::Value::text("Fran")}};
  auto with = builder_->lineage(sql, &known);
  ASSERT_TRUE(with.is_ok());
  EXPECT_TRUE(with->result.rows.empty());  // not run again
  EXPECT_EQ(with->witnesses_run, 1);
  EXPECT_EQ(with->witnesses.at(0)->terms, terms);  // the same witness either way
}

// Two queries that differ only in their select list (another column, an extra one, DISTINCT)
// keep the same rows: their plain witnesses have one text, run once while a lineage holds it.
TEST_F(SeparatingInstanceTest, AWitnessTextIsRunOnceWhileALineageHoldsIt) {
  {
    auto a = builder_->lineage("SELECT name FROM client WHERE district_id = 2");
    auto b = builder_->lineage("SELECT DISTINCT client_id, name FROM client WHERE district_id = 2");
    auto c = builder_->lineage("SELECT name FROM client WHERE district_id = 3");
    ASSERT_TRUE(a.is_ok() && b.is_ok() && c.is_ok());
    EXPECT_EQ(a->witnesses_run, 1);
    EXPECT_EQ(b->witnesses_run, 0);
    EXPECT_EQ(b->witnesses_shared, 1);
    EXPECT_EQ(a->witnesses.at(0).get(), b->witnesses.at(0).get());
    EXPECT_EQ(a->witnesses.at(0)->terms.size(), 2u);
    EXPECT_EQ(c->witnesses_run, 1);  // another WHERE: another witness
    // A LIMIT cuts rows in ORDER BY order of what is selected: not shared.
    auto d = builder_->lineage("SELECT name FROM client WHERE district_id = 2 ORDER BY name LIMIT 1");
    ASSERT_TRUE(d.is_ok());
    EXPECT_EQ(d->witnesses_run, 1);
    EXPECT_EQ(d->witnesses.at(0)->terms.size(), 1u);
  }
  // Once no lineage holds it, the memo keeps nothing: the witness runs again.
  auto e = builder_->lineage("SELECT client_id FROM client WHERE district_id = 2");
  ASSERT_TRUE(e.is_ok());
  EXPECT_EQ(e->witnesses_run, 1);
  EXPECT_EQ(e->witnesses_shared, 0);
}

// An empty result on D means the query's own plain witness is empty: it is not run. A grouped
// witness (COUNT over no rows still answers a row) and a subquery's witness still run. The
// instance search separates such a query from one with rows.
TEST_F(SeparatingInstanceTest, AnEmptyResultNeedsNoRunOfItsOwnWitness) {
  const std::string none = "SELECT name FROM client WHERE district_id = 99";
  const std::string some = "SELECT name FROM client WHERE district_id = 2";
  db::ResultSet empty;
  empty.columns = {"name"};
  auto n = builder_->lineage(none, &empty);
  auto ran = builder_->lineage(none + " AND 1 = 1");  // the same rows, run on D
  ASSERT_TRUE(n.is_ok() && ran.is_ok());
  EXPECT_EQ(n->witnesses_empty, 1);
  EXPECT_EQ(n->witnesses_run, 0);
  EXPECT_TRUE(n->witnesses.at(0)->terms.empty());
  EXPECT_TRUE(ran->witnesses.at(0)->terms.empty());

  db::ResultSet zero;
  zero.columns = {"COUNT(*)"};
  zero.rows = {{db::Value::integer(0)}};
  auto counted = builder_->lineage("SELECT COUNT(*) FROM client WHERE district_id = 99", &zero);
  ASSERT_TRUE(counted.is_ok());
  EXPECT_EQ(counted->witnesses_empty, 0);
  EXPECT_EQ(counted->witnesses_run, 1);

  const std::string with_sub = "SELECT name FROM client WHERE district_id = (SELECT MAX(district_id) + 90 FROM district)";
  auto sub = builder_->lineage(with_sub, &empty);
  ASSERT_TRUE(sub.is_ok());
  EXPECT_EQ(sub->witnesses_empty, 1);  // its own witness
  EXPECT_EQ(sub->witnesses_run, 1);    // the subquery's rows still matter

  auto s = builder_->lineage(some);
  ASSERT_TRUE(s.is_ok());
  auto inst = builder_->separate(*s, *n, 7);
  ASSERT_TRUE(inst.is_ok()) << inst.status().to_string();
  EXPECT_TRUE(inst->found) << inst->failure;
  EXPECT_FALSE(inst->answer_a.rows.empty());
  EXPECT_TRUE(inst->answer_b.rows.empty());
}

// The terms of a query's lineage, read from its witness rows as they stream in: one term per
// joined tuple, sorted and unique per witness; a grouped witness records each term's group, and
// a group whose rowid lists do not line up (an outer join's NULLs) is one term.
TEST_F(SeparatingInstanceTest, LineageTermsOfJoinsGroupsAndOuterJoins) {
  const auto& tables = builder_->schema().tables;
  auto index = [&](const char* name) {
    return static_cast<uint32_t>(builder_->schema().find(name) - tables.data());
  };
  const uint32_t client = index("client"), loan = index("loan"), district = index("district");
  auto term = [](std::initializer_list<std::pair<uint32_t, int64_t>> rows) { return LineageTerm(rows); };

  // A self-join: (101, 105) and (105, 101) make the same term, kept once; (c, c) is one row.
  auto self = builder_->lineage("SELECT c1.name FROM client c1 JOIN client c2 ON c1.district_id = c2.district_id");
  ASSERT_TRUE(self.is_ok()) << self.status().to_string();
  ASSERT_EQ(self->witnesses.size(), 1u);
  EXPECT_EQ(self->witnesses[0]->terms,
            (std::vector<LineageTerm>{term({{client, 100}}), term({{client, 101}}),
                                      term({{client, 101}, {client, 105}}), term({{client, 102}}),
                                      term({{client, 103}}), term({{client, 104}}), term({{client, 105}})}));
  EXPECT_EQ(self->witnesses[0]->group_of, std::vector<uint32_t>(7, QueryLineage::kNoGroup));

  // Grouped: district 2's loans (client 101 twice, 105 once) share a group, the others not.
  auto grouped = builder_->lineage(
      "SELECT c.district_id, COUNT(*) FROM client c JOIN loan l ON l.client_id = c.client_id GROUP BY c.district_id");
  ASSERT_TRUE(grouped.is_ok()) << grouped.status().to_string();
  ASSERT_EQ(grouped->witnesses.size(), 1u);
  const auto& terms = grouped->witnesses[0]->terms;
  const auto& groups = grouped->witnesses[0]->group_of;
  std::vector<LineageTerm> expected = {term({{client, 100}, {loan, 1000}}), term({{client, 101}, {loan, 1001}}),
                                       term({{client, 101}, {loan, 1002}}), term({{client, 103}, {loan, 1003}}),
                                       term({{client, 104}, {loan, 1004}}), term({{client, 105}, {loan, 1005}})};
  std::sort(expected.begin(), expected.end());
  ASSERT_EQ(terms, expected);
  auto group = [&](const LineageTerm& t) {
    return groups[static_cast<size_t>(std::lower_bound(terms.begin(), terms.end(), t) - terms.begin())];
  };
  const uint32_t district2 = group(term({{client, 101}, {loan, 1001}}));
  EXPECT_NE(district2, QueryLineage::kNoGroup);
  EXPECT_EQ(group(term({{client, 101}, {loan, 1002}})), district2);
  EXPECT_EQ(group(term({{client, 105}, {loan, 1005}})), district2);
  std::set<uint32_t> others = {group(term({{client, 100}, {loan, 1000}})), group(term({{client, 103}, {loan, 1003}})),
                               group(term({{client, 104}, {loan, 1004}}))};
  EXPECT_EQ(others.size(), 3u);
  EXPECT_FALSE(others.count(district2));

  // Outer joins: district 3's client 102 has no loan, so its lists (1 district, 1 client, no
  // loan) do not line up and the group is one term of two rows.
  auto outer = builder_->lineage(
      "SELECT d.a2, COUNT(l.loan_id) FROM district d LEFT JOIN client c ON c.district_id = d.district_id "
      "LEFT JOIN loan l ON l.client_id = c.client_id GROUP BY d.district_id");
  ASSERT_TRUE(outer.is_ok()) << outer.status().to_string();
  ASSERT_EQ(outer->witnesses.size(), 1u);
  const auto& outer_terms = outer->witnesses[0]->terms;
  EXPECT_TRUE(std::binary_search(outer_terms.begin(), outer_terms.end(), term({{district, 3}, {client, 102}})));
  EXPECT_TRUE(std::binary_search(outer_terms.begin(), outer_terms.end(),
                                 term({{district, 2}, {client, 105}, {loan, 1005}})));
  EXPECT_EQ(outer_terms.size(), 7u);  // districts 1, 2 (three loans), 4 and 5 by loan; 3 whole
  EXPECT_TRUE(std::is_sorted(outer_terms.begin(), outer_terms.end()));
}

// With a tiny group budget the grouped lineage is a sample of whole groups; the instance is
// drawn from the kept groups and still verified, and the lineage says it was sampled.
TEST_F(SeparatingInstanceTest, SampledGroupLineageStillSeparates) {
  InstanceOptions o;
  o.lineage_group_budget = 3;  // account: 10 rows, so 1 key bucket in 4
  auto b = InstanceBuilder::open(db_, executor_, o);
  ASSERT_TRUE(b.is_ok());
  const std::string qa = "SELECT district_id, COUNT(*) FROM account GROUP BY district_id";
  const std::string qb = "SELECT district_id, COUNT(*) FROM account WHERE frequency = 'monthly' GROUP BY district_id";
  auto la = b->lineage(qa), lb = b->lineage(qb);
  ASSERT_TRUE(la.is_ok() && lb.is_ok());
  ASSERT_EQ(la->sampled.size(), 1u);
  EXPECT_NE(la->sampled[0].find("1 key bucket in 4"), std::string::npos) << la->sampled[0];
  EXPECT_TRUE(builder_->lineage(qa)->sampled.empty());  // the default budget: exact here
  auto kept = executor_.run(db_, "SELECT district_id FROM district WHERE nl2sql_hash(district_id) % 4 = 0 "
                                 "AND district_id IN (2, 3, 4)");  // districts with a weekly account
  ASSERT_TRUE(kept.ok()) << kept.error;
  std::set<int64_t> kept_ids;
  for (const auto& r : kept.result.rows) kept_ids.insert(r[0].i);
  ASSERT_FALSE(kept_ids.empty()) << "fixture: the sample should keep a district with a weekly account";
  for (uint64_t seed : {1, 2, 3}) {
    auto s = b->separate(*la, *lb, seed);
    ASSERT_TRUE(s.is_ok());
    ASSERT_TRUE(s->found) << s->failure;
    EXPECT_FALSE(db::relaxed_equal(s->answer_a, s->answer_b));
    expect_subset(*s);
    // A weekly account of a kept district separates (A counts it, B does not).
    const auto& acc = s->instance.tables.at("account");
    bool weekly_of_kept = false;
    for (const auto& row : acc.rows)
      weekly_of_kept = weekly_of_kept || (row[2].s == "weekly" && kept_ids.count(row[1].i));
    EXPECT_TRUE(weekly_of_kept);
  }
}

// HAVING COUNT(*) >= 3 holds for district 2 only (accounts 11, 12, 17): the two queries share
// every term and differ in shape, so D′ needs the whole group. Two random terms never do; the
// whole-group attempts (from attempt 5) find it long before the sample grows (attempt 14).
TEST_F(SeparatingInstanceTest, HavingNeedsTheWholeGroup) {
  for (uint64_t seed : {1, 2, 3}) {
    auto s = separate("SELECT district_id FROM account GROUP BY district_id HAVING COUNT(*) >= 3",
                      "SELECT district_id, MIN(frequency) FROM account GROUP BY district_id HAVING COUNT(*) >= 3",
                      seed);
    ASSERT_TRUE(s.found) << s.failure;
    EXPECT_LE(s.attempts, 6);
    std::set<int64_t> ids;
    for (const auto& row : s.instance.tables.at("account").rows) ids.insert(row[0].i);
    EXPECT_EQ(ids, (std::set<int64_t>{11, 12, 17}));
    expect_subset(s);
  }
}

// Top district by number of accounts (2: three accounts) vs by highest account id (1: account
// 19). With (M, N) = (1, 2) D′ always holds more rows of district 1, so both answer 1; the
// swapped attempts (2 rows of district 2, 1 of district 1) separate.
TEST_F(SeparatingInstanceTest, SwappedSampleSizesSeparateTopKByCount) {
  for (uint64_t seed : {1, 2, 3, 4}) {
    auto s = separate("SELECT district_id FROM account GROUP BY district_id ORDER BY COUNT(*) DESC LIMIT 1",
                      "SELECT district_id FROM account GROUP BY district_id ORDER BY MAX(account_id) DESC LIMIT 1",
                      seed);
    ASSERT_TRUE(s.found) << s.failure;
    EXPECT_LT(s.attempts, 14) << "seed " << seed;  // before the sample grows
    ASSERT_EQ(s.answer_a.rows.size(), 1u);
    EXPECT_EQ(s.answer_a.rows[0][0].i, 2);
    EXPECT_LE(s.instance.rows(), 3u);
    expect_subset(s);
  }
}

// The shapes real candidates differ by (issue 38), on a table of 300 readings where random
// rows rarely show the difference: one tie at the lowest value, 40 rows of site 7, a percentage.
class RealStylePairsTest : public SeparatingInstanceTest {
 protected:
  void SetUp() override {
    db_ = tmp_ / "readings.sqlite";
    nl2sql::testing::build_database(db_, R"(
CREATE TABLE reading (id INTEGER PRIMARY KEY, site INTEGER, value INTEGER, flag TEXT);
WITH RECURSIVE k(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM k WHERE n < 300)
INSERT INTO reading SELECT n, CASE WHEN n <= 40 THEN 7 ELSE n % 50 END, 1000 + n * 3,
                           CASE WHEN n % 3 = 0 THEN 'bad' ELSE 'ok' END FROM k;
UPDATE reading SET value = 1003 WHERE id = 250;
)");
    reopen();
  }
  void reopen() {
    auto b = InstanceBuilder::open(db_, executor_, options_);
    ASSERT_TRUE(b.is_ok()) << b.status().to_string();
    builder_ = std::make_unique<InstanceBuilder>(std::move(*b));
  }
  InstanceOptions options_;
};

// Rows 1 and 250 tie at the lowest value: D′ needs both, and nothing else.
TEST_F(RealStylePairsTest, TiedRowsAtTheExtreme) {
  for (uint64_t seed : {1, 2, 3}) {
    auto s = separate("SELECT id FROM reading ORDER BY value LIMIT 1",
                      "SELECT id FROM reading WHERE value = (SELECT MIN(value) FROM reading)", seed);
    ASSERT_TRUE(s.found) << s.failure;
    std::set<int64_t> ids;
    for (const auto& row : s.instance.tables.at("reading").rows) ids.insert(row[0].i);
    EXPECT_EQ(ids, (std::set<int64_t>{1, 250}));
    expect_subset(s);
  }
}

// LIMIT 5 without ORDER BY against no LIMIT: six matching rows, shrunk from the draw that found them.
TEST_F(RealStylePairsTest, LimitWithoutOrderByNeedsOneRowMore) {
  auto s = separate("SELECT id FROM reading WHERE site = 7 LIMIT 5", "SELECT id FROM reading WHERE site = 7");
  ASSERT_TRUE(s.found) << s.failure;
  EXPECT_EQ(s.instance.rows(), 6u);
  EXPECT_EQ(s.answer_a.rows.size(), 5u);
  expect_subset(s);
}

// A whole-table percentage against its integer-division twin: they differ only when the share
// of 'bad' rows is not a whole percentage, which no draw of 2 or 4 rows is; the growing draws
// find one of 8 rows long before the sampling grows (attempt 28), and shrinking leaves a
// handful (1-minimal: every row left is needed).
TEST_F(RealStylePairsTest, WholeTableAggregateIsShrunk) {
  for (uint64_t seed : {1, 2, 3}) {
    auto s = separate("SELECT CAST(SUM(CASE WHEN flag = 'bad' THEN 1 ELSE 0 END) AS REAL) * 100 / COUNT(*) FROM reading",
                      "SELECT SUM(CASE WHEN flag = 'bad' THEN 1 ELSE 0 END) * 100 / COUNT(*) FROM reading", seed);
    ASSERT_TRUE(s.found) << s.failure;
    EXPECT_LT(s.attempts, 14);
    EXPECT_LE(s.instance.rows(), 7u);
    expect_subset(s);
  }
}

// Over max_rows the search gives up with the reason; the duel is then a draw (too_large).
TEST_F(RealStylePairsTest, AnInstanceOverMaxRowsIsNone) {
  options_.max_rows = 5;
  reopen();
  auto s = separate("SELECT id FROM reading WHERE site = 7 LIMIT 5", "SELECT id FROM reading WHERE site = 7");
  EXPECT_FALSE(s.found);
  EXPECT_TRUE(s.too_large);
  EXPECT_EQ(s.too_large_rows, 6u);
  EXPECT_NE(s.failure.find("max_rows 5"), std::string::npos) << s.failure;
  EXPECT_EQ(s.to_json()["too_large_rows"], 6);
}

// A large D (issue 38, time at BIRD scale): with sample_rows below its tables' sizes the search
// works on a sample of D first. Heroes (240) and their powers (720, a foreign key to hero):
// every table is "large" here. The sampled path must give the verdicts the plain path gives,
// with instances made of D's own rows that separate the queries.
class LargeDatabaseTest : public SeparatingInstanceTest {
 protected:
  void SetUp() override {
    db_ = tmp_ / "heroes.sqlite";
    nl2sql::testing::build_database(db_, R"(
CREATE TABLE hero (id INTEGER PRIMARY KEY, name TEXT, height INTEGER, team INTEGER);
CREATE TABLE power (hero_id INTEGER REFERENCES hero(id), power TEXT);
WITH RECURSIVE k(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM k WHERE n < 240)
INSERT INTO hero SELECT n, 'hero' || (n % 90), 150 + (n * 37) % 61, n % 7 FROM k;
WITH RECURSIVE k(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM k WHERE n < 720)
INSERT INTO power SELECT 1 + (n * 7) % 240, 'power' || (n % 13) FROM k;
)");
  }
  std::unique_ptr<InstanceBuilder> open_with(int64_t sample_rows) {
    InstanceOptions o;
    o.sample_rows = sample_rows;
    auto b = InstanceBuilder::open(db_, executor_, o);
    EXPECT_TRUE(b.is_ok()) << b.status().to_string();
    return std::make_unique<InstanceBuilder>(std::move(*b));
  }
  // The pair's instance from `builder`, with both queries' results on D given as the selector
  // gives them.
  SeparatingInstance separate_with(const InstanceBuilder& builder, const std::string& a, const std::string& b) {
    auto ra = executor_.run(db_, a);
    auto rb = executor_.run(db_, b);
    EXPECT_TRUE(ra.ok() && rb.ok());
    EXPECT_FALSE(db::relaxed_equal(ra.result, rb.result)) << "the fixture pair must differ on D";
    auto la = builder.lineage(a, &ra.result);
    auto lb = builder.lineage(b, &rb.result);
    EXPECT_TRUE(la.is_ok() && lb.is_ok());
    auto s = builder.separate(*la, *lb, 7);
    EXPECT_TRUE(s.is_ok()) << s.status().to_string();
    return *s;
  }
  // D′ separates: both queries, run on a new database holding it, give the recorded answers,
  // and these differ.
  void expect_separates(const InstanceBuilder& builder, const SeparatingInstance& s, const std::string& a,
                        const std::string& b) {
    auto ra = builder.run_on(s.instance, a);
    auto rb = builder.run_on(s.instance, b);
    ASSERT_TRUE(ra.is_ok() && rb.is_ok());
    EXPECT_TRUE(db::relaxed_equal(*ra, s.answer_a));
    EXPECT_TRUE(db::relaxed_equal(*rb, s.answer_b));
    EXPECT_FALSE(db::relaxed_equal(*ra, *rb));
  }
};

TEST_F(LargeDatabaseTest, TheSampledPathGivesThePlainPathsVerdictsWithRowsOfD) {
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {"SELECT name FROM hero ORDER BY height LIMIT 1", "SELECT name FROM hero WHERE height = (SELECT MIN(height) FROM hero)"},
      {"SELECT T1.name, COUNT(*) FROM hero AS T1 JOIN power AS T2 ON T1.id = T2.hero_id GROUP BY T1.name",
       "SELECT T1.name, COUNT(*) FROM hero AS T1 JOIN power AS T2 ON T1.id = T2.hero_id GROUP BY T1.id"},
      {"SELECT team FROM hero GROUP BY team HAVING COUNT(*) > 34", "SELECT DISTINCT team FROM hero"},
      {"SELECT name FROM hero WHERE team = 3 LIMIT 5", "SELECT name FROM hero WHERE team = 3"},
      {"SELECT CAST(SUM(CASE WHEN team = 2 THEN 1 ELSE 0 END) AS REAL) * 100 / COUNT(*) FROM hero",
       "SELECT SUM(CASE WHEN team = 2 THEN 1 ELSE 0 END) * 100 / COUNT(*) FROM hero"},
      {"SELECT COUNT(*) FROM hero AS T1 JOIN power AS T2 ON T1.id = T2.hero_id WHERE T1.team = 1",
       "SELECT COUNT(DISTINCT T1.id) FROM hero AS T1 JOIN power AS T2 ON T1.id = T2.hero_id WHERE T1.team = 1"},
  };
  const auto before = core::sha256_file(db_);
  auto plain = open_with(0);
  auto sampled = open_with(60);
  int on_sample = 0;
  for (const auto& [a, b] : pairs) {
    SCOPED_TRACE(a + " | " + b);
    auto p = separate_with(*plain, a, b);
    auto s = separate_with(*sampled, a, b);
    EXPECT_FALSE(p.on_sample);
    EXPECT_EQ(s.found, p.found) << s.failure;
    ASSERT_TRUE(s.found) << s.failure;
    EXPECT_LE(s.instance.rows(), 30u);
    on_sample += s.on_sample ? 1 : 0;
    expect_subset(s);
    expect_separates(*sampled, s, a, b);
  }
  // The sample (about 20 heroes) separates the threshold, percentage and COUNT pairs itself;
  // a tie, a sixth row of one team or a repeated name may be missing from it, and those pairs
  // are separated on D (the next test forces that case).
  EXPECT_GE(on_sample, 3);
  EXPECT_EQ(*core::sha256_file(db_), *before);  // D is only read
}

// A pair that differs only on rows the sample left out: equal on the sample, so the lineages on
// D are taken and the search runs on D.
TEST_F(LargeDatabaseTest, APairEqualOnTheSampleIsSeparatedOnD) {
  auto sampled = open_with(60);
  auto ids = sampled->lineage("SELECT id FROM hero");
  ASSERT_TRUE(ids.is_ok());
  ASSERT_TRUE(ids->on_sample) << "a table over sample_rows makes a sample";
  std::set<int64_t> kept;
  for (const auto& row : ids->on_sample->result.rows) kept.insert(row[0].i);
  EXPECT_GT(kept.size(), 0u);
  EXPECT_LT(kept.size(), 240u);
  int64_t left_out = 1;
  while (kept.count(left_out)) ++left_out;
  const std::string a = "SELECT name FROM hero WHERE id = " + std::to_string(left_out);
  const std::string b = a + " AND team < 0";
  auto s = separate_with(*sampled, a, b);
  ASSERT_TRUE(s.found) << s.failure;
  EXPECT_FALSE(s.on_sample);
  expect_subset(s);
  expect_separates(*sampled, s, a, b);
}

// A database whose tables are all within sample_rows has no sample: the plain path, unchanged.
TEST_F(LargeDatabaseTest, ASmallDatabaseHasNoSample) {
  auto b = open_with(1000);
  auto l = b->lineage("SELECT id FROM hero");
  ASSERT_TRUE(l.is_ok());
  EXPECT_FALSE(l->on_sample);
  EXPECT_FALSE(l->witnesses.empty());
}

TEST_F(SeparatingInstanceTest, SameSeedSameInstance) {
  const std::string a = "SELECT COUNT(district_id) FROM account WHERE frequency = 'monthly'";
  const std::string b = "SELECT COUNT(DISTINCT district_id) FROM account WHERE frequency = 'monthly'";
  auto s1 = separate(a, b, 99), s2 = separate(a, b, 99);
  EXPECT_EQ(s1.instance.to_json(), s2.instance.to_json());
  EXPECT_EQ(s1.attempts, s2.attempts);
}

TEST_F(SeparatingInstanceTest, EquivalentQueriesFailCleanly) {
  auto la = builder_->lineage("SELECT name FROM client WHERE district_id = 2");
  auto lb = builder_->lineage("SELECT name FROM client WHERE district_id + 0 = 2");
  ASSERT_TRUE(la.is_ok() && lb.is_ok());
  auto s = builder_->separate(*la, *lb, 3);
  ASSERT_TRUE(s.is_ok());
  EXPECT_FALSE(s->found);
  EXPECT_GT(s->attempts, 42);  // the growing draws, then 42 sampled
  EXPECT_NE(s->failure.find(std::to_string(s->attempts) + " attempts"), std::string::npos);
}

TEST_F(SeparatingInstanceTest, MemoryDatabaseRefusesWrites) {
  auto inst = builder_->fetch({{"client", {100, 101}}});
  ASSERT_TRUE(inst.is_ok());
  auto mem = MemoryDatabase::create(builder_->schema(), *inst);
  ASSERT_TRUE(mem.is_ok());
  auto ok = (*mem)->run("SELECT COUNT(*) FROM client");
  ASSERT_TRUE(ok.is_ok());
  EXPECT_EQ(ok->rows[0][0].i, 2);
  EXPECT_FALSE((*mem)->run("DELETE FROM client").is_ok());
  EXPECT_FALSE((*mem)->run("SELECT 1; DELETE FROM client").is_ok());
  EXPECT_EQ((*mem)->run("SELECT COUNT(*) FROM client")->rows[0][0].i, 2);
}

TEST(SampleSizes, FollowTheAggregatesOfEitherQuery) {
  EXPECT_EQ(sample_sizes("SELECT SUM(CASE WHEN x THEN 1 END) FROM t", "SELECT 1"), std::make_pair(3, 4));
  EXPECT_EQ(sample_sizes("SELECT count(*) FROM t", "SELECT 1"), std::make_pair(1, 2));
  EXPECT_EQ(sample_sizes("SELECT a FROM t", "SELECT b FROM t"), std::make_pair(1, 1));
}

// The duel selector with the `sim` model (gold read by the simulator only) on four candidates
// for "How many monthly accounts are in east Bohemia?"; `select` is extra config under "select".
Result<Selection> SeparatingInstanceTest::bohemia_duels(data::Question& q, const std::string& select) {
  core::Config config(nlohmann::json::parse(R"({"select":)" + select + R"(,"llm":{
      "models":{"offline":{"provider":"sim"}},
      "roles":{"nl_eval":"offline"},
      "cache":{"mode":"off"},
      "sim":{"seed":3,"p_hallucinate":0.0}}})"));
  llm::ClientOptions co;
  auto simulator = sim::attach(co, llm::load_llm_settings(config)->sim);
  auto client = llm::Client::from_config(config, co);
  if (!client.is_ok()) return client.status();
  auto sel = make_selector_named("separating_instances", config,
                                 {client->get(), &executor_, {}, nullptr});
  if (!sel.is_ok()) return sel.status();
  auto schema = data::read_schema_from_database(db_, "bank");
  if (!schema.is_ok()) return schema.status();
  q.question_id = "7";
  q.db_id = "bank";
  q.question = "How many monthly accounts are in east Bohemia?";
  const std::string base =
      "SELECT COUNT(*) FROM account JOIN district ON account.district_id = district.district_id "
      "WHERE account.frequency = 'monthly' AND district.a3 = ";
  q.gold_sql = base + "'east Bohemia'";
  simulator->add(q, db_);  // the simulator reads gold itself; the selector gets the task only
  const data::Task task = q.task();
  SelectionInput in;
  in.question = &task;
  in.schema = &*schema;
  in.db_path = db_;
  in.generator_order = {"dc", "qp"};
  in.seed = 11;
  std::vector<std::string> sqls = {base + "'East Bohemia'",  // wrong, largest cluster
                                   base + "'EAST BOHEMIA'", q.gold_sql,
                                   "SELECT COUNT(*) FROM account WHERE frequency = 'monthly'"};
  for (size_t i = 0; i < sqls.size(); ++i) {
    PoolCandidate c;
    c.id = "c" + std::to_string(i);
    c.generator = i < 2 ? "dc" : "qp";
    c.sql = sqls[i];
    c.result = std::make_shared<const db::ExecutionResult>(executor_.run(db_, sqls[i]));
    in.candidates.push_back(std::move(c));
  }
  return (*sel)->select(in);
}

TEST_F(SeparatingInstanceTest, DuelSelectorWithSimPicksTheCandidateAgreeingWithGold) {
  data::Question q;
  auto s = bohemia_duels(q, "{}");
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  // The selector never saw gold: no duel of its explanation mentions it.
  EXPECT_EQ(s->explanation.dump().find("gold"), std::string::npos);
  EXPECT_FALSE(s->duel_instances.empty());
  check_duels_against_gold(*s, db_, executor_, q.gold_sql);
  nl2sql::testing::expect_explanation_round_trips(s->explanation, "separating_instances");
  EXPECT_EQ(s->chosen, 2);
  EXPECT_EQ(s->explanation["decided_by"], "duels");
  // Two clusters among three representatives... c0 and c1 agree (both 0), so 3 results:
  // 0, the gold count and the unfiltered count → 3 duels × 3 asks.
  EXPECT_EQ(s->explanation["duels"].size(), 3u);
  EXPECT_EQ(s->llm_calls(), 9);
  bool kept_instance = false;
  for (const auto& d : s->explanation["duels"])
    kept_instance = kept_instance || (d.contains("instance") && d["instance"]["found"] == true &&
                                      d.contains("majority"));
  EXPECT_TRUE(kept_instance);
  // Gold's answer on each instance, added by the caller that holds gold (the pipeline), is kept
  // beside the model's (never in the prompt).
  for (const auto& d : s->explanation["duels"]) {
    if (!d.contains("majority")) continue;
    ASSERT_TRUE(d.contains("gold_answer"));
    ASSERT_TRUE(d["model_agrees_with_gold"].is_boolean());
    EXPECT_EQ(d["model_agrees_with_gold"].get<bool>(), d["majority"] == d["gold_answer"]);
  }
  for (const auto& c : s->calls) EXPECT_EQ(c.prompt.find(q.gold_sql), std::string::npos);
  EXPECT_EQ(s->calls[0].provider, "sim");
  EXPECT_EQ(s->calls[0].template_name, "evaluate_on_instance");
}

// The paper votes over answers sampled at the model's temperature: every ask of a duel goes out
// at select.separating_instances.temperature with a seed of its own, so no two requests are the
// same; at temperature 0 the answers would repeat one answer, and the model is asked once.
// With select.separating_instances.max_rows = 1 the duel of 'East Bohemia' against gold, which
// needs a monthly account and its east Bohemia district on D′ (two rows), is a draw recorded as
// too_large and asked nothing; the two duels against the count without the district are decided
// by one account row and still asked.
TEST_F(SeparatingInstanceTest, ADuelOverMaxRowsIsADrawRecordedAsTooLarge) {
  data::Question q;
  auto s = bohemia_duels(q, R"({"separating_instances":{"max_rows":1}})");
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  nl2sql::testing::expect_explanation_round_trips(s->explanation, "separating_instances");
  size_t too_large = 0, asked = 0;
  for (const auto& d : s->explanation["duels"]) {
    if (d.value("draw", "") == "too_large") {
      ++too_large;
      EXPECT_EQ(d["instance"]["too_large_rows"], 2) << d.dump();
      EXPECT_FALSE(d.contains("model_answers"));
    }
    if (d.contains("model_answers")) {
      ++asked;
      EXPECT_EQ(d["instance"]["rows"], 1) << d.dump();
    }
  }
  EXPECT_EQ(too_large, 1u);
  EXPECT_EQ(asked, 2u);
  EXPECT_EQ(s->llm_calls(), 6);
}

TEST_F(SeparatingInstanceTest, VotesAreSampledWithDistinctSeedsOrAskedOnceAtTemperatureZero) {
  std::mutex mu;
  std::vector<std::string> bodies;
  llm::testing::FakeOpenAiServer server([&](const httplib::Request& req, int64_t) {
    std::lock_guard lock(mu);
    bodies.push_back(req.body);
    return llm::testing::FakeReply(200, llm::testing::completion_body("```json\n[[2]]\n```"));
  });
  auto pool = [&](const data::Task& task, const data::Schema& schema) {
    SelectionInput in;
    in.question = &task;
    in.schema = &schema;
    in.db_path = db_;
    in.generator_order = {"dc", "qp"};
    in.seed = 11;
    const std::string base =
        "SELECT COUNT(*) FROM account JOIN district ON account.district_id = district.district_id "
        "WHERE account.frequency = 'monthly' AND district.a3 = ";
    for (const std::string& sql : {base + "'East Bohemia'", base + "'east Bohemia'",
                                   std::string("SELECT COUNT(*) FROM account WHERE frequency = 'monthly'")}) {
      PoolCandidate c;
      c.id = "c" + std::to_string(in.candidates.size());
      c.generator = in.candidates.empty() ? "dc" : "qp";
      c.sql = sql;
      c.result = std::make_shared<const db::ExecutionResult>(executor_.run(db_, sql));
      in.candidates.push_back(std::move(c));
    }
    return in;
  };
  auto schema = data::read_schema_from_database(db_, "bank");
  ASSERT_TRUE(schema.is_ok());
  data::Task task;
  task.question_id = "7";
  task.db_id = "bank";
  task.question = "How many monthly accounts are in east Bohemia?";
  auto run_with = [&](const std::string& select_json) -> Selection {
    core::Config config(nlohmann::json::parse(R"({"llm":{"models":{"m":{"base_url":")" + server.base_url() +
                                              R"(","model":"judge","api_key_env":""}},"default_profile":"m",
                                              "cache":{"mode":"off"},"retry":{"max_attempts":1}},"select":)" +
                                              select_json + "}"));
    auto client = llm::Client::from_config(config, {});
    EXPECT_TRUE(client.is_ok()) << client.status().to_string();
    auto sel = make_selector_named("separating_instances", config, {client->get(), &executor_, {}, nullptr});
    EXPECT_TRUE(sel.is_ok()) << sel.status().to_string();
    auto s = (*sel)->select(pool(task, *schema));
    EXPECT_TRUE(s.is_ok()) << s.status().to_string();
    return *s;
  };

  auto sampled = run_with("{}");
  const size_t duels = sampled.explanation["duels"].size();
  ASSERT_GT(duels, 0u);
  std::vector<std::string> seen;
  {
    std::lock_guard lock(mu);
    seen.swap(bodies);
  }
  ASSERT_EQ(seen.size(), duels * 3);
  EXPECT_EQ(std::set<std::string>(seen.begin(), seen.end()).size(), seen.size()) << "an identical request was sent twice";
  std::set<int64_t> seeds;
  for (const auto& b : seen) {
    auto j = nlohmann::json::parse(b);
    EXPECT_DOUBLE_EQ(j.at("temperature").get<double>(), 0.7);
    seeds.insert(j.at("seed").get<int64_t>());
  }
  EXPECT_EQ(seeds.size(), seen.size());

  auto greedy = run_with(R"({"separating_instances": {"temperature": 0}})");
  std::lock_guard lock(mu);
  EXPECT_EQ(bodies.size(), greedy.explanation["duels"].size());  // one ask per duel
  for (const auto& b : bodies) EXPECT_DOUBLE_EQ(nlohmann::json::parse(b).at("temperature").get<double>(), 0.0);
}

}  // namespace
}  // namespace nl2sql::select
