// Test suites built on real benchmark databases (NL2SQL_DATA): gold scores 100% on its own suite
// under spider-ts, and fresh held-out candidates find few neighbours the suite misses.
#include <gtest/gtest.h>

#include <algorithm>

#include "nl2sql/eval/evaluator.h"
#include "nl2sql/eval/testsuite.h"
#include "support/test_env.h"

namespace nl2sql::eval {
namespace {

void expect_gold_full_marks(const data::Dataset& ds, const std::filesystem::path& suite,
                            const std::vector<std::string>& dbs) {
  data::Dataset subset = ds;
  subset.questions.clear();
  for (const auto& q : ds.questions)
    if (std::find(dbs.begin(), dbs.end(), q.db_id) != dbs.end()) subset.questions.push_back(q);
  ASSERT_FALSE(subset.questions.empty());
  std::vector<Prediction> gold;
  for (const auto& q : subset.questions) gold.push_back({q.gold_sql, true, ""});
  EvalOptions opts;
  opts.metrics = {Metric::kSpiderTs};
  opts.test_suite = suite;
  auto r = evaluate(subset, gold, opts);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  for (const auto& item : r->items) {
    EXPECT_TRUE(item.verdicts.at("spider_ts")) << item.question_id << " failed on " << item.ts_failed_on << ": "
                                               << item.ts_failure;
    EXPECT_GT(item.ts_databases, 1u) << item.question_id;
  }
}

TEST(TestSuiteOnBenchmarks, SpiderDevGoldIsRightOnItsSuiteAndHeldOutCandidatesFindLittle) {
  NL2SQL_REQUIRE_DATA(data);
  data::DatasetSpec spec;
  spec.benchmark = data::Benchmark::kSpider;
  spec.data_dir = data / "spider";
  auto ds = data::load_dataset(spec);
  ASSERT_TRUE(ds.is_ok()) << ds.status().message();
  testing::TempDir dir;
  SuiteOptions o;
  o.out_dir = dir / "suite";
  o.databases = {"concert_singer", "pets_1", "singer", "world_1"};
  o.held_out = 30;
  auto built = build_test_suite(*ds, o);
  ASSERT_TRUE(built.is_ok()) << built.status().message();
  size_t by_suite = 0, missed = 0, by_original = 0;
  for (const auto& s : *built) {
    ASSERT_EQ(s.action, "built") << s.db_id << ": " << s.error;
    by_suite += s.summary["neighbours"]["told_apart_by_suite"].get<size_t>();
    by_original += s.summary["neighbours"]["told_apart_by_original"].get<size_t>();
    missed += s.summary["held_out"]["told_apart_by_held_out_only"].get<size_t>();
  }
  EXPECT_GT(by_suite, by_original);  // the variants tell apart what the original cannot
  EXPECT_GE(static_cast<double>(by_suite) / static_cast<double>(by_suite + missed), 0.98);
  expect_gold_full_marks(*ds, o.out_dir, o.databases);
}

TEST(TestSuiteOnBenchmarks, BirdSuperheroGoldIsRightOnItsSuite) {
  NL2SQL_REQUIRE_DATA(data);
  data::DatasetSpec spec;
  spec.benchmark = data::Benchmark::kBird;
  spec.data_dir = data / "bird";
  auto ds = data::load_dataset(spec);
  ASSERT_TRUE(ds.is_ok()) << ds.status().message();
  testing::TempDir dir;
  SuiteOptions o;
  o.out_dir = dir / "suite";
  o.databases = {"superhero"};
  o.candidates = 60;
  auto built = build_test_suite(*ds, o);
  ASSERT_TRUE(built.is_ok()) << built.status().message();
  ASSERT_EQ(built->at(0).action, "built") << built->at(0).error;
  const auto& n = built->at(0).summary["neighbours"];
  EXPECT_GT(n["told_apart_by_suite"].get<size_t>(), n["told_apart_by_original"].get<size_t>());
  expect_gold_full_marks(*ds, o.out_dir, o.databases);
}

}  // namespace
}  // namespace nl2sql::eval
