#include "nl2sql/eval/evaluator.h"

#include <fstream>

#include <gtest/gtest.h>

#include "support/jsonl_dataset.h"
#include "support/test_env.h"

namespace nl2sql::eval {
namespace {

using testing::jsonl_dataset;

class EvaluatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::build_database(dir_ / "dbs" / "d" / "d.sqlite",
                            "CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, score INTEGER);"
                            "INSERT INTO t VALUES (1,'a',10),(2,'b',10),(3,'c',5),(4,'d',1);");
    ds_ = jsonl_dataset(dir_.path(), {R"({"question_id": "tie", "db_id": "d", "sql": "SELECT name FROM t ORDER BY score DESC LIMIT 1"})",
                               R"({"question_id": "notie", "db_id": "d", "sql": "SELECT name FROM t ORDER BY score ASC LIMIT 1"})",
                               R"({"question_id": "broken", "db_id": "d", "sql": "SELECT nope FROM t"})",
                               R"({"question_id": "unordered", "db_id": "d", "sql": "SELECT name FROM t LIMIT 1"})",
                               R"({"question_id": "alias", "db_id": "d", "sql": "SELECT name, score AS s FROM t ORDER BY s DESC, 1 LIMIT 1"})"});
  }
  testing::TempDir dir_;
  data::Dataset ds_;
};

TEST_F(EvaluatorTest, FlagsTieDependentGoldAndUnusableGold) {
  std::vector<Prediction> preds;
  for (const auto& q : ds_.questions) preds.push_back({q.gold_sql, true, ""});
  EvalOptions opts;
  opts.metrics = {Metric::kBird, Metric::kRelaxed};
  opts.cache_file = dir_ / "cache" / "results.sqlite";
  for (int run = 0; run < 2; ++run) {  // the second run answers from the cache
    auto r = evaluate(ds_, preds, opts);
    ASSERT_TRUE(r.is_ok());
    EXPECT_TRUE(r->items[0].gold_tie_dependent) << "run " << run;
    EXPECT_FALSE(r->items[1].gold_tie_dependent) << "run " << run;
    EXPECT_TRUE(r->items[2].gold_unusable);
    EXPECT_TRUE(r->items[3].gold_tie_dependent) << "LIMIT without ORDER BY";
    EXPECT_FALSE(r->items[4].gold_tie_dependent) << "second key breaks the tie";
    EXPECT_EQ(r->items[2].outcome, "RES6");
    const auto& overall = r->summary["metrics"]["bird"]["overall"];
    EXPECT_EQ(overall["n"], 5);
    EXPECT_EQ(overall["correct"], 4);
    EXPECT_EQ(overall["n_usable_gold"], 4);
    EXPECT_DOUBLE_EQ(overall["ex_usable_gold"].get<double>(), 100.0);
    if (run == 1) {
      EXPECT_TRUE(r->items[0].gold_cached);
      EXPECT_TRUE(r->items[0].pred_cached);
    }
  }
}

// Cases met in real published prediction files, each scored as its official evaluator scores
// it (notes: evaluator-semantics.md, "Found on real published prediction files").
class OfficialQuirksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::build_database(dir_ / "dbs" / "d" / "d.sqlite",
                            "CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, score INTEGER);"
                            "INSERT INTO t VALUES (1,'a',10),(2,'b',10),(3,'c',5),(4,'d',1);");
    ds_ = jsonl_dataset(dir_.path(), {R"({"question_id": "tens", "db_id": "d", "sql": "SELECT name FROM t WHERE score = 10"})",
                               R"({"question_id": "none", "db_id": "d", "sql": "SELECT name FROM t WHERE score > 100"})",
                               R"({"question_id": "five", "db_id": "d", "sql": "SELECT name FROM t WHERE score = 5"})"});
  }
  // Verdicts of one prediction per question, under both official metrics.
  std::vector<ItemResult> score(const std::vector<std::string>& sqls, EvalOptions opts = {}) {
    std::vector<Prediction> preds;
    for (const auto& s : sqls) preds.push_back({s, true, ""});
    if (opts.metrics == std::vector<Metric>{Metric::kBird}) opts.metrics = {Metric::kBird, Metric::kSpiderTs};
    auto r = evaluate(ds_, preds, opts);
    EXPECT_TRUE(r.is_ok()) << r.status().message();
    return r.is_ok() ? r->items : std::vector<ItemResult>{};
  }
  testing::TempDir dir_;
  data::Dataset ds_;
};

TEST_F(OfficialQuirksTest, TextAfterTheFirstStatementIsReadAsEachEvaluatorReadsIt) {
  // bird (Python's one-statement rule): `q;;` and `q; prose` are errors; spider-ts without
  // keep-distinct scores the first statement.
  auto items = score({"SELECT name FROM t WHERE score = 10;;", "SELECT name FROM t WHERE score > 100; \\end{code} Comment: done",
                      "SELECT name FROM t WHERE score = 5; -- the answer"});
  ASSERT_EQ(items.size(), 3u);
  EXPECT_FALSE(items[0].verdicts.at("bird"));
  EXPECT_TRUE(items[0].verdicts.at("spider_ts"));
  EXPECT_EQ(items[0].outcome, "RES1");  // bird is primary on a JSONL benchmark
  EXPECT_NE(items[0].error.find("one statement at a time"), std::string::npos) << items[0].error;
  EXPECT_FALSE(items[1].verdicts.at("bird"));
  EXPECT_TRUE(items[1].verdicts.at("spider_ts"));
  EXPECT_TRUE(items[2].verdicts.at("bird"));  // a comment after the statement is fine everywhere
  EXPECT_TRUE(items[2].verdicts.at("spider_ts"));
  // With keep-distinct the test-suite evaluator applies Python's rule too.
  EvalOptions keep;
  keep.metrics = {Metric::kSpiderTs, Metric::kBird};
  keep.keep_distinct = true;
  items = score({"SELECT name FROM t WHERE score = 10;;", "SELECT name FROM t WHERE score > 100; \\end{code}",
                 "SELECT name FROM t WHERE score = 5;"},
                keep);
  EXPECT_FALSE(items[0].verdicts.at("spider_ts"));
  EXPECT_FALSE(items[1].verdicts.at("spider_ts"));
  EXPECT_TRUE(items[2].verdicts.at("spider_ts"));
  // spider-ts primary: a correct first statement is RES3 and its note says why.
  EvalOptions ts;
  ts.metrics = {Metric::kSpiderTs};
  items = score({"SELECT name FROM t WHERE score = 10; SELECT 1", "", ""}, ts);
  EXPECT_EQ(items[0].outcome, "RES3");
  EXPECT_NE(items[0].note.find("first statement"), std::string::npos) << items[0].note;
}

TEST_F(OfficialQuirksTest, AnEmptyPredictionIsAQueryWithNoRowsForBirdOnly) {
  auto items = score({"", "", " ;"});
  EXPECT_FALSE(items[0].verdicts.at("bird"));  // gold has rows
  EXPECT_TRUE(items[1].verdicts.at("bird"));   // gold has none: Python returns [] for ""
  EXPECT_EQ(items[1].outcome, "RES3");
  EXPECT_FALSE(items[1].verdicts.at("spider_ts"));  // the test-suite code fails on it: 0
  EXPECT_FALSE(items[2].verdicts.at("bird"));
  // A non-string value in predict_dev.json runs as " " on financial in the official script.
  std::vector<Prediction> preds = {{"SELECT name FROM t WHERE score = 10", true, ""}, {" ", true, "financial"}, {"", false, ""}};
  EvalOptions opts;
  opts.metrics = {Metric::kBird};
  auto r = evaluate(ds_, preds, opts);
  ASSERT_TRUE(r.is_ok());
  EXPECT_TRUE(r->items[0].verdicts.at("bird"));
  EXPECT_FALSE(r->items[1].verdicts.at("bird"));  // gold would run on financial, not here
  EXPECT_FALSE(r->items[2].verdicts.at("bird"));  // absent: no prediction
}

TEST_F(OfficialQuirksTest, PlugValueTriesGoldsValuesInThePredictionsSlots) {
  EvalOptions ts;
  ts.metrics = {Metric::kSpiderTs};
  auto items = score({"SELECT name FROM t WHERE score = 11", "SELECT name FROM t WHERE score > 1", "SELECT name FROM t WHERE score = 6"}, ts);
  for (const auto& it : items) EXPECT_FALSE(it.verdicts.at("spider_ts")) << it.question_id;
  ts.plug_value = true;
  items = score({"SELECT name FROM t WHERE score = 11", "SELECT name FROM t WHERE score > 1", "SELECT name FROM t WHERE id = 6"}, ts);
  EXPECT_TRUE(items[0].verdicts.at("spider_ts"));
  EXPECT_NE(items[0].note.find("plugged"), std::string::npos) << items[0].note;
  EXPECT_TRUE(items[1].verdicts.at("spider_ts"));
  EXPECT_FALSE(items[2].verdicts.at("spider_ts"));  // the wrong column stays wrong with gold's 5
}

// A distilled test suite: the question's folder holds the original and variants; spider-ts is
// correct only when gold and prediction agree on every file (the official rule), bird still
// judges the original. SQLite side files beside them are not databases of the suite.
TEST(TestSuiteFolders, SpiderTsMustAgreeOnEveryDatabaseFileOfTheFolder) {
  nl2sql::testing::TempDir dir;
  const std::string schema = "CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, score INTEGER);";
  testing::build_database(dir / "dbs" / "d" / "d.sqlite", schema + "INSERT INTO t VALUES (1,'a',10),(2,'b',10),(3,'c',5),(4,'d',1);");
  testing::build_database(dir / "dbs" / "d" / "d_v1.sqlite", schema + "INSERT INTO t VALUES (1,'a',10),(2,'b',7),(3,'c',5);");
  std::ofstream(dir / "dbs" / "d" / "old.sqlite-journal") << "not a database";  // side files of no database here
  std::ofstream(dir / "dbs" / "d" / "d_v2.sqlite-shm") << "not a database";
  const auto ds = jsonl_dataset(dir.path(), {R"({"question_id": "tens", "db_id": "d", "sql": "SELECT name FROM t WHERE score = 10"})",
                                      R"({"question_id": "also", "db_id": "d", "sql": "SELECT name FROM t WHERE score = 10"})"});
  ASSERT_EQ(ds.db_variants.at("d").size(), 1u);
  EXPECT_EQ(ds.db_variants.at("d")[0].filename(), "d_v1.sqlite");

  EvalOptions opts;
  opts.metrics = {Metric::kSpiderTs, Metric::kBird};
  auto r = evaluate(ds, {{"SELECT name FROM t WHERE id <= 2", true, ""}, {"SELECT name FROM t WHERE score >= 10", true, ""}}, opts);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  const auto& lucky = r->items[0];
  EXPECT_TRUE(lucky.verdicts.at("bird"));        // right on the one database BIRD looks at
  EXPECT_FALSE(lucky.verdicts.at("spider_ts"));  // wrong on the variant
  EXPECT_TRUE(lucky.ts_original);
  EXPECT_EQ(lucky.ts_databases, 2u);
  EXPECT_EQ(lucky.ts_failed_on, "d_v1.sqlite");
  EXPECT_NE(lucky.ts_failure.find("gold: (a) / prediction: (a) (b)"), std::string::npos) << lucky.ts_failure;
  EXPECT_TRUE(r->items[1].verdicts.at("spider_ts"));
  const auto& suite = r->summary["test_suite"];
  EXPECT_EQ(suite["questions_on_a_suite"], 2);
  EXPECT_DOUBLE_EQ(suite["ex_original_only"].get<double>(), 100.0);
  ASSERT_EQ(suite["passes_original_fails_variant"].size(), 1u);
  EXPECT_EQ(suite["passes_original_fails_variant"][0]["question_id"], "tens");
  EXPECT_DOUBLE_EQ(r->summary["metrics"]["spider_ts"]["overall"]["ex"].get<double>(), 50.0);
}

// eval.test_suite: the suite lives in a folder of its own (official layout); its <db_id>.sqlite
// is the original's copy and not a variant.
TEST(TestSuiteFolders, ASuiteFolderOfItsOwnGivesTheVariants) {
  nl2sql::testing::TempDir dir;
  const std::string schema = "CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, score INTEGER);";
  const std::string rows = "INSERT INTO t VALUES (1,'a',10),(2,'b',10),(3,'c',5),(4,'d',1);";
  testing::build_database(dir / "dbs" / "d" / "d.sqlite", schema + rows);
  testing::build_database(dir / "suite" / "d" / "d.sqlite", schema + rows);
  testing::build_database(dir / "suite" / "d" / "d_1.sqlite", schema + "INSERT INTO t VALUES (1,'a',10),(2,'b',7);");
  const auto ds = jsonl_dataset(dir.path(), {R"({"question_id": "tens", "db_id": "d", "sql": "SELECT name FROM t WHERE score = 10"})"});
  EXPECT_TRUE(ds.db_variants.empty());
  EvalOptions opts;
  opts.metrics = {Metric::kSpiderTs};
  const std::vector<Prediction> lucky = {{"SELECT name FROM t WHERE id <= 2", true, ""}};
  auto plain = evaluate(ds, lucky, opts);
  ASSERT_TRUE(plain.is_ok());
  EXPECT_TRUE(plain->items[0].verdicts.at("spider_ts"));  // no suite: the original alone
  opts.test_suite = dir / "suite";
  auto suite = evaluate(ds, lucky, opts);
  ASSERT_TRUE(suite.is_ok()) << suite.status().message();
  EXPECT_FALSE(suite->items[0].verdicts.at("spider_ts"));
  EXPECT_EQ(suite->items[0].ts_databases, 2u);  // the original + d_1 (the suite's d.sqlite is the original)
  EXPECT_EQ(suite->items[0].ts_failed_on, "d_1.sqlite");
  opts.test_suite = dir / "nowhere";
  EXPECT_FALSE(evaluate(ds, lucky, opts).is_ok());
}

TEST(Bootstrap, DeterministicAndBracketsTheMean) {
  std::vector<int> v(200, 0);
  for (size_t i = 0; i < 120; ++i) v[i] = 1;  // 60%
  auto a = bootstrap_ci(v, 1000, 7), b = bootstrap_ci(v, 1000, 7);
  EXPECT_EQ(a.low, b.low);
  EXPECT_EQ(a.high, b.high);
  EXPECT_LT(a.low, 60.0);
  EXPECT_GT(a.high, 60.0);
  // normal approximation: ±1.96 * sqrt(.6*.4/200) = ±6.8 points
  EXPECT_NEAR(a.high - a.low, 13.6, 3.0);
  auto all = bootstrap_ci(std::vector<int>(50, 1), 1000, 7);
  EXPECT_EQ(all.low, 100.0);
}

}  // namespace
}  // namespace nl2sql::eval
