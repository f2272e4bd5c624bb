#include "nl2sql/eval/efficiency.h"

#include <sqlite3.h>

#include <cmath>

#include <gtest/gtest.h>

#include "nl2sql/eval/evaluator.h"
#include "support/jsonl_dataset.h"
#include "support/test_env.h"

namespace nl2sql::eval {
namespace {

// Hand-computed: sqrt(reward) × 100 with the mini-dev steps 1.25 / 1 / 0.75 / 0.5 / 0.25 / 0.
TEST(VesRewards, RvesStepTableAtEveryBoundary) {
  EXPECT_DOUBLE_EQ(rves_reward(0.0), 0.0);
  EXPECT_NEAR(rves_reward(0.01), 50.0, 1e-9);          // sqrt(0.25)
  EXPECT_NEAR(rves_reward(0.2499), 50.0, 1e-9);
  EXPECT_NEAR(rves_reward(0.25), 70.710678118, 1e-6);  // sqrt(0.5)
  EXPECT_NEAR(rves_reward(0.4999), 70.710678118, 1e-6);
  EXPECT_NEAR(rves_reward(0.5), 86.602540378, 1e-6);   // sqrt(0.75)
  EXPECT_NEAR(rves_reward(0.9999), 86.602540378, 1e-6);
  EXPECT_NEAR(rves_reward(1.0), 100.0, 1e-9);
  EXPECT_NEAR(rves_reward(1.9999), 100.0, 1e-9);
  EXPECT_NEAR(rves_reward(2.0), 111.803398875, 1e-6);  // sqrt(1.25)
  EXPECT_NEAR(rves_reward(1000.0), 111.803398875, 1e-6);
}

TEST(VesRewards, VesIsSquareRootOfTheRatio) {
  EXPECT_DOUBLE_EQ(ves_reward(0.0), 0.0);
  EXPECT_DOUBLE_EQ(ves_reward(4.0), 200.0);  // can exceed 100
  EXPECT_DOUBLE_EQ(ves_reward(0.25), 50.0);
  EXPECT_DOUBLE_EQ(ves_reward(1.0), 100.0);
}

TEST(VesOutliers, ALoneOutlierIsDroppedOnlyWhenBeyondThreeSigma) {
  // 19 × 1 and one 100: mean 5.95, σ = sqrt(500.95 − 35.4025) = 21.576…, mean + 3σ = 70.68:
  // the 100 goes, the mean of the rest is 1.
  std::vector<double> r(19, 1.0);
  r.push_back(100.0);
  auto f = drop_outliers(r);
  EXPECT_EQ(f.kept, 19u);
  EXPECT_DOUBLE_EQ(f.mean, 1.0);
  EXPECT_DOUBLE_EQ(f.sd, 0.0);
  // 4 × 1 and one 100: mean 20.8, σ = sqrt(2000.8 − 432.64) = 39.6, mean + 3σ = 139.6: kept.
  auto g = drop_outliers({1, 1, 1, 1, 100});
  EXPECT_EQ(g.kept, 5u);
  EXPECT_NEAR(g.mean, 20.8, 1e-12);
  EXPECT_NEAR(g.sd, 39.6, 1e-9);
  // A low one: 19 × 1 and 0: mean 0.95, σ = sqrt(0.95 − 0.9025) = 0.2179, mean − 3σ = 0.296.
  std::vector<double> low(19, 1.0);
  low.push_back(0.0);
  auto h = drop_outliers(low);
  EXPECT_EQ(h.kept, 19u);
  EXPECT_DOUBLE_EQ(h.mean, 1.0);
}

TEST(VesOutliers, IdenticalRatiosAreAllDroppedAndScoreZeroAsTheScript) {
  // σ = 0 and the bounds are strict: nothing is kept, the script divides by zero → 0.
  auto f = drop_outliers({2.0, 2.0, 2.0});
  EXPECT_EQ(f.kept, 0u);
  EXPECT_EQ(f.mean, 0.0);
  EXPECT_EQ(drop_outliers({}).kept, 0u);
}

TEST(VesOutliers, IntervalOfTheKeptMean) {
  // {1, 2, 3}: mean 2, σ = sqrt(2/3), half-width 1.96 σ / sqrt(3).
  auto f = drop_outliers({1, 2, 3});
  const double half = 1.96 * std::sqrt(2.0 / 3.0) / std::sqrt(3.0);
  EXPECT_NEAR(f.low, 2.0 - half, 1e-12);
  EXPECT_NEAR(f.high, 2.0 + half, 1e-12);
}

TEST(VesOutliers, RerunIntervalWidensWhenConsecutiveRoundsDrift) {
  // Ten rounds at 1 then ten at 2 (the machine changed half-way): mean 1.5, σ 0.5, all kept.
  // Four batches of five: means 1, 1, 2, 2; their sample variance 1/3, SE sqrt(1/3)/2; t(3 df)
  // 3.182 gives 0.9186, above the independent rounds' t(15 df, the table's step below 19)
  // 2.131 · 0.5·√(20/19) / √20 = 0.2444; ×√2 for the rerun.
  std::vector<double> drift(10, 1.0);
  drift.insert(drift.end(), 10, 2.0);
  auto f = drop_outliers(drift);
  ASSERT_EQ(f.kept, 20u);
  const double half = 3.182 * std::sqrt(1.0 / 3.0) / 2.0 * std::sqrt(2.0);
  EXPECT_NEAR(f.rerun_low, 1.5 - half, 1e-12);
  EXPECT_NEAR(f.rerun_high, 1.5 + half, 1e-12);
  EXPECT_NEAR(f.high - f.low, 2 * 1.96 * 0.5 / std::sqrt(20.0), 1e-12);  // the mean's CI is unchanged
  // The same values alternating: batch means 1.4, 1.6, 1.4, 1.6 vary less than independent
  // rounds would, so the rerun interval is the independent one ×√2.
  std::vector<double> alternating;
  for (int i = 0; i < 20; ++i) alternating.push_back(i % 2 == 0 ? 1.0 : 2.0);
  auto g = drop_outliers(alternating);
  const double iid = 2.131 * 0.5 * std::sqrt(20.0 / 19.0) / std::sqrt(20.0) * std::sqrt(2.0);
  EXPECT_NEAR(g.rerun_high - g.mean, iid, 1e-12);
  EXPECT_NEAR(g.mean - g.rerun_low, iid, 1e-12);
  // Fewer than ten kept rounds: no batches, only the independent half-width ×√2; three rounds
  // {1, 2, 3}: sample σ 1, t(2 df) 4.303.
  auto h = drop_outliers({1, 2, 3});
  EXPECT_NEAR(h.rerun_high - h.mean, 4.303 * 1.0 / std::sqrt(3.0) * std::sqrt(2.0), 1e-12);
}

TEST(VesStatistics, SpearmanWithTiesAndBootstrap) {
  EXPECT_NEAR(spearman({1, 2, 3, 4}, {10, 20, 30, 40}), 1.0, 1e-12);
  EXPECT_NEAR(spearman({1, 2, 3, 4}, {4, 3, 2, 1}), -1.0, 1e-12);
  // Ranks a = (1, 2.5, 2.5, 4), b = (1, 2, 3, 4): Σ(da·db) = 4.5, Σda² = 4.5, Σdb² = 5.
  EXPECT_NEAR(spearman({1, 2, 2, 3}, {1, 2, 3, 4}), 4.5 / std::sqrt(4.5 * 5.0), 1e-12);
  EXPECT_TRUE(std::isnan(spearman({1}, {1})));
  auto ci = bootstrap_mean_ci({5, 5, 5}, 200, 7);
  EXPECT_DOUBLE_EQ(ci.low, 5.0);
  EXPECT_DOUBLE_EQ(ci.high, 5.0);
  auto a = bootstrap_mean_ci({0, 100, 50, 25}, 500, 7), b = bootstrap_mean_ci({0, 100, 50, 25}, 500, 7);
  EXPECT_EQ(a.low, b.low);
  EXPECT_LT(a.low, 43.75);
  EXPECT_GT(a.high, 43.75);
}

TEST(VesMetricSpec, EfficiencyNamesSitBesideTheCorrectnessMetrics) {
  auto s = parse_metric_spec("bird,ves,rves-steps,rves_steps");
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  ASSERT_EQ(s->metrics.size(), 1u);
  EXPECT_EQ(s->metrics[0], Metric::kBird);
  ASSERT_EQ(s->efficiency.size(), 2u);
  EXPECT_EQ(s->efficiency[0], EfficiencyMetric::kVes);
  EXPECT_EQ(s->efficiency[1], EfficiencyMetric::kRvesSteps);
  auto alone = parse_metric_spec("rves");
  ASSERT_TRUE(alone.is_ok());
  EXPECT_TRUE(alone->metrics.empty());
  EXPECT_FALSE(parse_metric_spec("ves,nope").is_ok());
}

// A database with a table whose rows stream out at once unsorted and only after a full sort
// ordered: the same set of rows, first row fast for one and slow for the other.
class EfficiencyEvalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::build_database(
        dir_ / "dbs" / "d" / "d.sqlite",
        "CREATE TABLE t(id INTEGER PRIMARY KEY, x INTEGER, name TEXT);"
        "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 60000) "
        "INSERT INTO t SELECT i, (i * 7919) % 100003, 'n' || i FROM c;"
        "CREATE TABLE s(id INTEGER PRIMARY KEY, v INTEGER);"
        "INSERT INTO s VALUES (1, 10), (2, 20), (3, 30);");
  }
  data::Dataset dataset(const std::vector<std::string>& lines) { return testing::jsonl_dataset(dir_.path(), lines); }
  testing::TempDir dir_;
};

TEST_F(EfficiencyEvalTest, IncorrectTimeoutErrorAndMissingPairsScoreZero) {
  auto ds = dataset({R"({"question_id": "ok", "db_id": "d", "difficulty": "simple", "sql": "SELECT v FROM s WHERE v > 15"})",
                     R"({"question_id": "wrong", "db_id": "d", "difficulty": "simple", "sql": "SELECT v FROM s"})",
                     R"({"question_id": "error", "db_id": "d", "difficulty": "moderate", "sql": "SELECT v FROM s"})",
                     R"({"question_id": "missing", "db_id": "d", "difficulty": "moderate", "sql": "SELECT v FROM s"})",
                     R"({"question_id": "slow", "db_id": "d", "difficulty": "challenging", "sql": "SELECT 1"})"});
  ASSERT_EQ(ds.questions.size(), 5u);
  std::vector<PredictedSql> preds = {
      {"SELECT v FROM s WHERE v >= 20", true},
      {"SELECT v FROM s WHERE v > 15", true},
      {"SELECT nope FROM s", true},
      {"", false},
      // Returns 1 after counting to 10^9: never within a 0.05 s × 2 budget.
      {"WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 1000000000) "
       "SELECT max(i) / max(i) FROM c",
       true}};
  EfficiencyOptions o;
  o.metrics = {EfficiencyMetric::kVes, EfficiencyMetric::kRves, EfficiencyMetric::kVesSteps,
               EfficiencyMetric::kRvesSteps};
  o.repeats = 2;
  o.timeout_s = 0.05;
  auto r = measure_efficiency(ds, preds, o, nullptr);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  const std::vector<std::string> want = {"ok", "incorrect", "pred_error", "missing", "timeout"};
  for (size_t i = 0; i < want.size(); ++i) {
    const auto& item = r->items[i];
    EXPECT_EQ(item.status, want[i]) << item.question_id << ": " << item.error;
    for (const auto& [name, s] : item.scores) {
      if (i == 0) {
        EXPECT_GT(s.reward, 0.0) << name;
        EXPECT_GT(s.ratio, 0.0) << name;
      } else {
        EXPECT_EQ(s.reward, 0.0) << item.question_id << " " << name;
        EXPECT_EQ(s.ratio, 0.0) << item.question_id << " " << name;
      }
    }
  }
  EXPECT_EQ(r->items[0].scores.at("ves").rounds, 2u);
  // The overall score is the mean over all five questions, the zeros included.
  auto sum = efficiency_summary(*r, 100, 1);
  for (const char* m : {"ves", "rves", "ves_steps", "rves_steps"}) {
    EXPECT_NEAR(sum["metrics"][m]["overall"]["score"].get<double>(), r->items[0].scores.at(m).reward / 5.0, 1e-9) << m;
    EXPECT_EQ(sum["metrics"][m]["overall"]["count"].get<size_t>(), 5u);
    EXPECT_EQ(sum["metrics"][m]["by_difficulty"]["simple"]["count"].get<size_t>(), 2u);
    EXPECT_NEAR(sum["metrics"][m]["by_difficulty"]["simple"]["score"].get<double>(), r->items[0].scores.at(m).reward / 2.0, 1e-9);
    EXPECT_EQ(sum["metrics"][m]["by_difficulty"]["challenging"]["score"].get<double>(), 0.0);
  }
  const std::string table = efficiency_table(sum, "rves");
  EXPECT_NE(table.find("R-VES"), std::string::npos) << table;
  EXPECT_NE(table.find("challenging"), std::string::npos) << table;
}

TEST_F(EfficiencyEvalTest, GoldAgainstItselfScoresExactlyHundredOnSteps) {
  auto ds = dataset({R"({"question_id": "a", "db_id": "d", "sql": "SELECT v FROM s WHERE v > 15"})",
                     R"({"question_id": "b", "db_id": "d", "sql": "SELECT x FROM t ORDER BY x LIMIT 10"})",
                     R"({"question_id": "c", "db_id": "d", "sql": "SELECT count(*), sum(x) FROM t WHERE name LIKE 'n1%'"})"});
  std::vector<PredictedSql> preds;
  for (const auto& q : ds.questions) preds.push_back({q.gold_sql, true});
  EfficiencyOptions o;
  o.metrics = {EfficiencyMetric::kVesSteps, EfficiencyMetric::kRvesSteps};
  auto r = measure_efficiency(ds, preds, o, nullptr);
  ASSERT_TRUE(r.is_ok());
  for (const auto& item : r->items) {
    EXPECT_EQ(item.status, "ok");
    EXPECT_EQ(item.scores.at("ves_steps").ratio, 1.0);
    EXPECT_EQ(item.scores.at("rves_steps").reward, 100.0);
    EXPECT_GT(item.gold_counters.vm_steps, 0);
  }
  auto sum = efficiency_summary(*r, 100, 1);
  EXPECT_EQ(sum["metrics"]["ves_steps"]["overall"]["score"].get<double>(), 100.0);
  EXPECT_EQ(sum["metrics"]["rves_steps"]["overall"]["score"].get<double>(), 100.0);
  // The full scan over t and the sort are counted beside the steps.
  EXPECT_GT(r->items[1].gold_counters.sorts, 0);
  EXPECT_GT(r->items[2].gold_counters.fullscan_steps, 0);
}

TEST_F(EfficiencyEvalTest, StepsScoresAreTheSameAcrossRunsThreadsAndTheCache) {
  auto ds = dataset({R"({"question_id": "a", "db_id": "d", "sql": "SELECT x FROM t WHERE id < 5000 ORDER BY x"})",
                     R"({"question_id": "b", "db_id": "d", "sql": "SELECT count(*) FROM t WHERE x > 500"})",
                     R"({"question_id": "c", "db_id": "d", "sql": "SELECT v FROM s ORDER BY v DESC"})",
                     R"({"question_id": "d", "db_id": "d", "sql": "SELECT name FROM t WHERE id = 77"})"});
  // Equivalent predictions with other plans.
  std::vector<PredictedSql> preds = {{"SELECT x FROM t WHERE id + 0 < 5000", true},
                                     {"SELECT sum(x > 500) FROM t", true},
                                     {"SELECT v FROM s", true},
                                     {"SELECT name FROM t WHERE name = 'n77'", true}};
  EfficiencyOptions o;
  o.metrics = {EfficiencyMetric::kVesSteps, EfficiencyMetric::kRvesSteps};
  auto cache = db::ResultCache::open(dir_ / "cache.sqlite");
  ASSERT_TRUE(cache.is_ok());
  std::vector<std::vector<double>> runs;
  for (size_t threads : {1, 4, 2}) {
    for (db::ResultCache* c : {static_cast<db::ResultCache*>(nullptr), cache->get()}) {
      o.threads = threads;
      auto r = measure_efficiency(ds, preds, o, c);
      ASSERT_TRUE(r.is_ok());
      std::vector<double> v;
      for (const auto& item : r->items) {
        EXPECT_EQ(item.status, "ok") << item.question_id;
        v.push_back(item.scores.at("ves_steps").ratio);
        v.push_back(item.scores.at("rves_steps").ratio);
        v.push_back(static_cast<double>(item.pred_counters.fullscan_steps));
        v.push_back(static_cast<double>(item.gold_counters.sorts));
      }
      runs.push_back(v);
    }
  }
  for (size_t i = 1; i < runs.size(); ++i) EXPECT_EQ(runs[i], runs[0]) << "run " << i;
  // Not all ratios are 1: the counters tell the plans apart.
  EXPECT_NE(runs[0][1], 1.0);
  EXPECT_NE(runs[0][13], 1.0);
}

TEST_F(EfficiencyEvalTest, VesTimesTheFirstRowAndRvesTheWholeResult) {
  // gold streams its rows (first row at once); the prediction sorts the same set first.
  auto ds = dataset({R"({"question_id": "stream", "db_id": "d", "sql": "SELECT x FROM t"})"});
  std::vector<PredictedSql> preds = {{"SELECT x FROM t ORDER BY x", true}};
  EfficiencyOptions o;
  o.metrics = {EfficiencyMetric::kVes, EfficiencyMetric::kRves, EfficiencyMetric::kVesSteps,
               EfficiencyMetric::kRvesSteps};
  o.repeats = 3;
  auto r = measure_efficiency(ds, preds, o, nullptr);
  ASSERT_TRUE(r.is_ok());
  const auto& item = r->items[0];
  ASSERT_EQ(item.status, "ok") << item.error;
  // Steps (deterministic): up to the first row the prediction has read and sorted all 60,000
  // rows, gold a handful; over the whole result both read every row.
  const double first = item.scores.at("ves_steps").ratio, whole = item.scores.at("rves_steps").ratio;
  EXPECT_LT(first, 0.01) << "first-row steps: gold " << item.gold_counters.vm_steps_first_row << ", pred "
                         << item.pred_counters.vm_steps_first_row;
  EXPECT_GT(whole, 0.2);
  EXPECT_LT(whole, 1.0);
  // Timed: the first-row ratio is below the whole-result ratio (about 0.1 against 0.5 on an idle
  // machine). Only the order is asserted: clocks on a loaded machine are the benchmarks' business,
  // and the steps above are the deterministic check of the same difference.
  const double ves = item.scores.at("ves").ratio, rves = item.scores.at("rves").ratio;
  EXPECT_GT(ves, 0.0);
  EXPECT_LT(ves, rves) << "ves ratio " << ves << ", rves ratio " << rves;
}

// The scripts time each query on a plain sqlite3.connect connection, whose statements take and
// drop SQLite's shared lock (a fixed cost inside their clock). The timed rounds open the file the
// same way, read-only but with locking, never immutable=1: a writer's exclusive lock stops them
// (the script raises "database is locked" and scores 0), and the pair is timed once it is gone.
TEST_F(EfficiencyEvalTest, TimedRoundsTakeTheFileLocksAsTheScriptsConnectionsDo) {
  auto ds = dataset({R"({"question_id": "a", "db_id": "d", "sql": "SELECT v FROM s WHERE v > 15"})"});
  std::vector<PredictedSql> preds = {{"SELECT v FROM s WHERE v >= 20", true}};
  EfficiencyOptions o;
  o.metrics = {EfficiencyMetric::kVes, EfficiencyMetric::kRves};
  o.repeats = 2;
  sqlite3* writer = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ / "dbs" / "d" / "d.sqlite").string().c_str(), &writer), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(writer, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr), SQLITE_OK);
  auto locked = measure_efficiency(ds, preds, o, nullptr);
  sqlite3_exec(writer, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(writer);
  ASSERT_TRUE(locked.is_ok());
  const auto& l = locked->items[0];
  EXPECT_EQ(l.status, "ok");  // the correctness pass is no timing: it reads immutable
  EXPECT_EQ(l.timed_failure, "pred_error");
  EXPECT_NE(l.error.find("locked"), std::string::npos) << l.error;
  EXPECT_EQ(l.scores.at("ves").reward, 0.0);
  EXPECT_EQ(l.scores.at("rves").reward, 0.0);
  auto free = measure_efficiency(ds, preds, o, nullptr);
  ASSERT_TRUE(free.is_ok());
  EXPECT_TRUE(free->items[0].timed_failure.empty()) << free->items[0].error;
  EXPECT_GT(free->items[0].scores.at("ves").ratio, 0.0);
  EXPECT_EQ(free->items[0].scores.at("rves").rounds, 2u);
}

TEST_F(EfficiencyEvalTest, EvaluateReportsEfficiencyBesideEx) {
  auto ds = dataset({R"({"question_id": "a", "db_id": "d", "difficulty": "simple", "sql": "SELECT v FROM s WHERE v > 15"})",
                     R"({"question_id": "b", "db_id": "d", "difficulty": "moderate", "sql": "SELECT v FROM s"})"});
  std::vector<Prediction> preds = {{"SELECT v FROM s WHERE v > 15", true, ""}, {"SELECT 1", true, ""}};
  EvalOptions opts;
  opts.efficiency = {EfficiencyMetric::kRves, EfficiencyMetric::kRvesSteps};
  opts.ves_repeats = 3;
  auto r = evaluate(ds, preds, opts);
  ASSERT_TRUE(r.is_ok());
  const auto& e = r->summary["efficiency"];
  EXPECT_EQ(e["repeats"], 3);
  EXPECT_FALSE(e["cpu"].get<std::string>().empty());
  EXPECT_EQ(e["pairs"]["ok"], 1);
  EXPECT_EQ(e["pairs"]["incorrect"], 1);
  EXPECT_DOUBLE_EQ(e["metrics"]["rves_steps"]["overall"]["score"].get<double>(), 50.0);  // (100 + 0) / 2
  EXPECT_TRUE(e["metrics"]["rves"].contains("near_boundary"));
  EXPECT_TRUE(e["rank_correlation"].contains("rves~rves_steps"));
}

}  // namespace
}  // namespace nl2sql::eval
