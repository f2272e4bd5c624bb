// Whole-dataset checks against the shared benchmark data (NL2SQL_DATA): gold against gold
// scores 100% under every metric, and Spider hardness counts equal the official ones.
#include <map>

#include <gtest/gtest.h>

#include "nl2sql/data/dataset.h"
#include "nl2sql/eval/evaluator.h"
#include "eval/hardness.h"
#include "support/test_env.h"

namespace nl2sql::eval {
namespace {

EvalReport gold_vs_gold(const data::Dataset& ds) {
  std::vector<Prediction> preds;
  for (const auto& q : ds.questions) preds.push_back({q.gold_sql, true, ""});
  EvalOptions opts;
  opts.metrics = {Metric::kBird, Metric::kSpiderTs, Metric::kRelaxed};
  opts.threads = 2;
  auto r = evaluate(ds, preds, opts);
  EXPECT_TRUE(r.is_ok());
  return std::move(*r);
}

void expect_all_correct(const EvalReport& r) {
  for (const auto& it : r.items) {
    EXPECT_FALSE(it.gold_unusable) << it.question_id << ": " << it.gold_error;
    for (const auto& [m, v] : it.verdicts) EXPECT_TRUE(v) << m << " " << it.question_id;
    EXPECT_EQ(it.outcome, "RES3") << it.question_id;
  }
}

TEST(OfficialData, SpiderDevGoldVsGoldIsPerfectAndHardnessCountsMatch) {
  NL2SQL_REQUIRE_DATA(data);
  data::DatasetSpec spec;
  spec.benchmark = data::Benchmark::kSpider;
  spec.data_dir = data / "spider";
  auto ds = data::load_dataset(spec);
  ASSERT_TRUE(ds.is_ok()) << ds.status().message();
  ASSERT_EQ(ds->questions.size(), 972u);  // 1034 minus wta_1's 62 (database absent)
  EXPECT_EQ(ds->skipped.size(), 62u);
  std::map<std::string, int> counts;
  for (const auto& q : ds->questions) ++counts[spider_hardness(q.spider_sql)];
  EXPECT_EQ(counts["easy"], 232);
  EXPECT_EQ(counts["medium"], 416);
  EXPECT_EQ(counts["hard"], 160);
  EXPECT_EQ(counts["extra"], 164);
  auto r = gold_vs_gold(*ds);
  EXPECT_EQ(r.items.size(), 972u);
  expect_all_correct(r);
}

TEST(OfficialData, BirdSuperheroGoldVsGoldIsPerfect) {
  NL2SQL_REQUIRE_DATA(data);
  data::DatasetSpec spec;
  spec.data_dir = data / "bird";
  auto ds = data::load_dataset(spec);
  ASSERT_TRUE(ds.is_ok()) << ds.status().message();
  ASSERT_EQ(ds->questions.size(), 129u);
  EXPECT_TRUE(ds->warnings.empty()) << ds->warnings.front();
  // every description CSV of the 11 databases is readable; superhero's are attached
  const auto& hero = ds->schemas.at("superhero");
  EXPECT_FALSE(hero.find_table("superhero")->columns[1].description.empty());
  auto r = gold_vs_gold(*ds);
  expect_all_correct(r);
}

TEST(OfficialData, BirdMiniDevLoadsAndSuperheroSubsetIsPerfect) {
  NL2SQL_REQUIRE_DATA(data);
  data::DatasetSpec spec;
  spec.data_dir = data / "bird";
  spec.split = "mini_dev";
  auto ds = data::load_dataset(spec);
  ASSERT_TRUE(ds.is_ok()) << ds.status().message();
  EXPECT_EQ(ds->total_questions, 500u);
  EXPECT_GT(ds->questions.size(), 0u);
  expect_all_correct(gold_vs_gold(*ds));
}

}  // namespace
}  // namespace nl2sql::eval
