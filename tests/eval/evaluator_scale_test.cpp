// The evaluator on answers larger than its row cap (compared on row hashes, same verdicts as
// the exact comparison) and the work it skips: no prediction run after gold timed out.
#include <gtest/gtest.h>

#include "nl2sql/eval/evaluator.h"
#include "support/jsonl_dataset.h"
#include "support/test_env.h"

namespace nl2sql::eval {
namespace {

using testing::jsonl_dataset;

class EvaluatorScaleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::build_database(dir_ / "dbs" / "d" / "d.sqlite", R"(
      CREATE TABLE big(x INTEGER, y TEXT, z REAL);
      WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 250)
      INSERT INTO big SELECT i, 'v' || (i % 7), i * 1.0 FROM n;
      CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, score INTEGER);
      INSERT INTO t VALUES (1,'a',10),(2,'b',10),(3,'c',5),(4,'d',1);)");
  }
  testing::TempDir dir_;
};

// Gold answers of 250 rows with a row cap of 100: every pair is judged as the exact
// comparison (row cap 0: everything kept) judges it, and a gold larger than the cap is correct
// against itself.
TEST_F(EvaluatorScaleTest, AnswersPastTheRowCapGetTheExactComparisonsVerdicts) {
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {"SELECT x FROM big", "SELECT x FROM big"},                             // gold vs gold
      {"SELECT x FROM big", "SELECT x FROM big ORDER BY x DESC"},             // row order
      {"SELECT x FROM big", "SELECT z FROM big"},                             // 1 == 1.0
      {"SELECT x FROM big", "SELECT CAST(x AS TEXT) FROM big"},               // '1' != 1
      {"SELECT x FROM big", "SELECT x FROM big WHERE x > 1"},                 // one row missing
      {"SELECT x FROM big", "SELECT x, y FROM big"},                          // extra column (RES5)
      {"SELECT x, y FROM big", "SELECT y, x FROM big"},                       // columns swapped
      {"SELECT y FROM big", "SELECT y FROM big WHERE x <= 7"},                // duplicates vs set
      {"SELECT x FROM big ORDER BY x", "SELECT x FROM big ORDER BY x DESC"},  // ORDER BY rule
      {"SELECT x FROM big ORDER BY x", "SELECT z FROM big ORDER BY z"},
      {"SELECT y, x FROM big ORDER BY x", "SELECT x, y FROM big ORDER BY x"},
      {"SELECT x FROM big", "SELECT x FROM big LIMIT 80"},                    // small vs large
      {"SELECT x FROM big LIMIT 80", "SELECT x FROM big"},
  };
  std::vector<std::string> lines;
  std::vector<Prediction> preds;
  for (size_t i = 0; i < pairs.size(); ++i) {
    lines.push_back(R"({"question_id": "q)" + std::to_string(i) + R"(", "db_id": "d", "sql": ")" + pairs[i].first + "\"}");
    preds.push_back({pairs[i].second, true, ""});
  }
  const data::Dataset ds = jsonl_dataset(dir_.path(), lines);
  EvalOptions hashed;
  hashed.metrics = {Metric::kBird, Metric::kSpiderTs, Metric::kRelaxed};
  hashed.pred_limits.row_cap = 100;
  hashed.threads = 1;
  EvalOptions exact = hashed;
  exact.pred_limits.row_cap = 0;
  auto h = evaluate(ds, preds, hashed);
  auto e = evaluate(ds, preds, exact);
  ASSERT_TRUE(h.is_ok() && e.is_ok());
  for (size_t i = 0; i < pairs.size(); ++i) {
    SCOPED_TRACE(pairs[i].first + " / " + pairs[i].second);
    const auto& a = h->items[i];
    const auto& b = e->items[i];
    EXPECT_EQ(a.verdicts, b.verdicts);
    EXPECT_EQ(a.outcome, b.outcome);
    EXPECT_DOUBLE_EQ(a.soft_f1, b.soft_f1);
    EXPECT_EQ(a.pred_status, "ok");
    EXPECT_EQ(a.pred_rows, b.pred_rows);
    EXPECT_EQ(a.gold_rows, b.gold_rows);
  }
  // Hand-checked verdicts (bird, spider_ts, relaxed) of a few pairs.
  using V = std::map<std::string, bool>;
  EXPECT_EQ(h->items[0].verdicts, (V{{"bird", true}, {"spider_ts", true}, {"relaxed", true}}));
  EXPECT_EQ(h->items[0].gold_rows, 250u);
  EXPECT_EQ(h->items[0].pred_rows, 250u);
  EXPECT_EQ(h->items[0].outcome, "RES3");
  EXPECT_EQ(h->items[2].verdicts, (V{{"bird", true}, {"spider_ts", true}, {"relaxed", true}}));
  EXPECT_EQ(h->items[3].verdicts, (V{{"bird", false}, {"spider_ts", false}, {"relaxed", false}}));
  EXPECT_EQ(h->items[4].outcome, "RES2");
  EXPECT_EQ(h->items[5].outcome, "RES5");
  EXPECT_EQ(h->items[6].verdicts, (V{{"bird", false}, {"spider_ts", true}, {"relaxed", true}}));
  EXPECT_EQ(h->items[7].verdicts, (V{{"bird", true}, {"spider_ts", false}, {"relaxed", true}}));
  EXPECT_EQ(h->items[8].verdicts, (V{{"bird", true}, {"spider_ts", false}, {"relaxed", true}}));
  EXPECT_EQ(h->items[9].verdicts, (V{{"bird", true}, {"spider_ts", true}, {"relaxed", true}}));
  EXPECT_EQ(h->items[10].verdicts, (V{{"bird", false}, {"spider_ts", true}, {"relaxed", true}}));
  EXPECT_EQ(h->items[11].verdicts.at("bird"), false);
  EXPECT_EQ(h->items[12].verdicts.at("bird"), false);
  EXPECT_EQ(h->summary["metrics"]["bird"]["overall"]["correct"], 6);
}

// The row cap used to decide: a prediction over it was RES6 even when it equals gold.
TEST_F(EvaluatorScaleTest, GoldLargerThanTheRowCapScoresCorrectAgainstItself) {
  const data::Dataset ds = jsonl_dataset(dir_.path(), {R"({"question_id": "big", "db_id": "d", "sql": "SELECT x, y FROM big"})"});
  EvalOptions opts;
  opts.pred_limits.row_cap = 100;
  opts.cache_file = dir_ / "cache" / "results.sqlite";
  for (int run = 0; run < 2; ++run) {  // the second run with the cache written by the first
    auto r = evaluate(ds, {{"SELECT x, y FROM big", true, ""}}, opts);
    ASSERT_TRUE(r.is_ok());
    EXPECT_TRUE(r->items[0].verdicts.at("bird")) << "run " << run;
    EXPECT_EQ(r->items[0].outcome, "RES3");
    EXPECT_EQ(r->items[0].pred_rows, 250u);
  }
}

// A run's selection keeps the prediction's rows: past the cap it still gets a row-cap status
// (as before hashing), while the verdict is taken on the whole answer.
TEST_F(EvaluatorScaleTest, AJudgedCandidatePastTheCapReachesTheCallerAsRowCap) {
  const data::Dataset ds = jsonl_dataset(dir_.path(), {R"({"question_id": "big", "db_id": "d", "sql": "SELECT x FROM big"})"});
  EvalOptions opts;
  opts.pred_limits.row_cap = 100;
  ItemJudge judge(ds.benchmark, opts);
  const auto& q = ds.questions[0];
  const auto path = ds.db_paths.at("d");
  const auto fp = *db::database_fingerprint(path);
  const Prediction pred{"SELECT x FROM big ORDER BY x DESC", true, ""};
  auto judged = judge.judge({.question = q, .db_path = path, .fingerprint = fp, .prediction = pred, .keep_prediction_run = true});
  const auto& out = judged.prediction_run;
  EXPECT_TRUE(judged.item.verdicts.at("bird"));
  EXPECT_EQ(out.status, db::ExecStatus::kRowCap);
  EXPECT_TRUE(out.result.rows.empty());
  EXPECT_EQ(out.digest, nullptr);
}

// Gold that times out decides every verdict (0, RES6): the prediction is not executed. The
// judge counts the queries it sends to SQLite.
TEST_F(EvaluatorScaleTest, NoPredictionRunAfterGoldTimedOut) {
  const std::string endless =
      "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT count(*) FROM n";
  const data::Dataset ds = jsonl_dataset(dir_.path(), {R"({"question_id": "slow", "db_id": "d", "sql": ")" + endless + "\"}"});
  EvalOptions opts;
  opts.metrics = {Metric::kBird, Metric::kSpiderTs, Metric::kRelaxed};
  opts.gold_limits.timeout_s = 0.2;
  opts.pred_limits.timeout_s = 0.2;
  ItemJudge judge(ds.benchmark, opts);
  const auto& q = ds.questions[0];
  const auto path = ds.db_paths.at("d");
  const auto fp = *db::database_fingerprint(path);
  const Prediction pred{"SELECT x FROM big", true, ""};
  auto item = judge.judge({.question = q, .db_path = path, .fingerprint = fp, .prediction = pred}).item;
  EXPECT_EQ(item.gold_status, "timeout");
  EXPECT_EQ(item.pred_status, "not_run");
  EXPECT_EQ(item.outcome, "RES6");
  for (const auto& [metric, v] : item.verdicts) EXPECT_FALSE(v) << metric;
  EXPECT_EQ(judge.executions(), 1u) << "gold only";
  // A caller that keeps the prediction's result (a run's selection) still gets it.
  auto out = judge.judge({.question = q, .db_path = path, .fingerprint = fp, .prediction = pred, .keep_prediction_run = true})
                 .prediction_run;
  EXPECT_EQ(judge.executions(), 3u) << "gold again (timeouts are not cached) and the prediction";
  EXPECT_TRUE(out.ok());
  EXPECT_EQ(out.result.rows.size(), 250u);
}

// The tie check runs its probe, never gold's own text a second time; with a cache, a second
// judgement of the same question runs nothing for gold.
TEST_F(EvaluatorScaleTest, TieCheckDoesNotReExecuteGold) {
  const data::Dataset ds = jsonl_dataset(dir_.path(), {R"({"question_id": "tie", "db_id": "d", "sql": "SELECT name FROM t ORDER BY score DESC LIMIT 1"})"});
  const auto& q = ds.questions[0];
  const auto path = ds.db_paths.at("d");
  const auto fp = *db::database_fingerprint(path);
  EvalOptions opts;
  auto cache = db::ResultCache::open(dir_ / "cache.sqlite");
  ASSERT_TRUE(cache.is_ok());
  ItemJudge judge(ds.benchmark, opts, cache->get());
  const Prediction two{"SELECT name FROM t WHERE id = 2", true, ""}, one{"SELECT name FROM t WHERE id = 1", true, ""};
  auto item = judge.judge({.question = q, .db_path = path, .fingerprint = fp, .prediction = two}).item;
  EXPECT_TRUE(item.gold_tie_dependent);
  EXPECT_EQ(judge.executions(), 3u) << "gold, its tie probe, the prediction";
  item = judge.judge({.question = q, .db_path = path, .fingerprint = fp, .prediction = one}).item;
  EXPECT_TRUE(item.gold_tie_dependent);
  EXPECT_TRUE(item.gold_cached);
  EXPECT_EQ(judge.executions(), 4u) << "the new prediction only";
}

// Gold `… ORDER BY keys LIMIT 1` whose first row has keys of its own: the tie probe's first row
// is gold's answer, so gold's text is not run at all. Where SQLite could order two rows as a
// tie (NOCASE text, 3 vs 3.0) or the limit is not 1, gold runs; the answer is gold's in every case.
TEST_F(EvaluatorScaleTest, TieProbeAnswersGoldOnlyWhenItsFirstRowIsUnique) {
  testing::TempDir dir;
  testing::build_database(dir / "dbs" / "k" / "k.sqlite", R"(
    CREATE TABLE k(name TEXT, s INTEGER, c TEXT COLLATE NOCASE, v);
    INSERT INTO k VALUES ('p', 7, 'a', 3), ('q', 2, 'A', 3.0), ('r', 9, 'b', 4);)");
  const std::vector<std::pair<std::string, size_t>> golds = {
      {"SELECT name FROM k ORDER BY s LIMIT 1", 1},                  // q (2) before p (7)
      {"SELECT name, c FROM k ORDER BY s DESC LIMIT 1", 1},          // r
      {"SELECT name FROM k WHERE s > 100 ORDER BY s LIMIT 1", 1},    // no row
      {"SELECT name FROM k ORDER BY c LIMIT 1", 2},                  // 'a' = 'A' under NOCASE
      {"SELECT name FROM k ORDER BY v LIMIT 1", 2},                  // 3 = 3.0
      {"SELECT name FROM k ORDER BY s LIMIT 1 OFFSET 1", 2},         // not LIMIT 1 alone
      {"SELECT name FROM k ORDER BY s LIMIT 2", 2},
  };
  std::vector<std::string> lines;
  for (size_t i = 0; i < golds.size(); ++i)
    lines.push_back(R"({"question_id": "g)" + std::to_string(i) + R"(", "db_id": "k", "sql": ")" + golds[i].first + "\"}");
  const data::Dataset ds = jsonl_dataset(dir.path(), lines);
  const auto path = ds.db_paths.at("k");
  const auto fp = *db::database_fingerprint(path);
  db::Executor plain;
  for (size_t i = 0; i < golds.size(); ++i) {
    SCOPED_TRACE(golds[i].first);
    ItemJudge judge(ds.benchmark, EvalOptions{});
    const auto g = judge.gold(ds.questions[i], path, fp);
    EXPECT_EQ(judge.executions(), golds[i].second);
    const auto direct = plain.run(path, golds[i].first);
    ASSERT_TRUE(g.result.ok() && direct.ok());
    EXPECT_EQ(g.result.result.rows, direct.result.rows);
    EXPECT_EQ(g.result.result.columns.size(), direct.result.columns.size());
    EXPECT_TRUE(g.tie_checked);
  }
}

}  // namespace
}  // namespace nl2sql::eval
