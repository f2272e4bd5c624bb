#include "nl2sql/report/compare.h"
#include "nl2sql/run/run_data.h"

#include <gtest/gtest.h>

#include "report/run_fixture.h"
#include "support/test_env.h"

namespace nl2sql::report {
namespace {

using nlohmann::json;

TEST(McNemar, ExactBinomialForFewDiscordantPairs) {
  // b=1, c=5: P[X<=1] = (1 + 6) / 64, two-sided p = 14/64.
  McNemar m = mcnemar(1, 5);
  EXPECT_EQ(m.method, "exact_binomial");
  EXPECT_NEAR(m.p_value, 0.21875, 1e-12);
  // b=2, c=8: (1 + 10 + 45) / 1024 * 2
  EXPECT_NEAR(mcnemar(8, 2).p_value, 0.109375, 1e-12);
  EXPECT_DOUBLE_EQ(mcnemar(0, 0).p_value, 1.0);
  EXPECT_DOUBLE_EQ(mcnemar(3, 3).p_value, 1.0);  // capped at 1
}

TEST(McNemar, ChiSquareWithContinuityCorrectionFrom25) {
  // b=10, c=20: (|10-20|-1)^2 / 30 = 2.7, p = erfc(sqrt(1.35)) = 0.1003482...
  McNemar m = mcnemar(10, 20);
  EXPECT_EQ(m.method, "chi2_continuity");
  EXPECT_NEAR(m.statistic, 2.7, 1e-12);
  EXPECT_NEAR(m.p_value, 0.10034824646229074, 1e-9);
  EXPECT_EQ(mcnemar(13, 12).method, "chi2_continuity");  // b + c = 25
  EXPECT_EQ(mcnemar(12, 12).method, "exact_binomial");   // 24 < 25
}

TEST(PairedBootstrap, DegenerateAndDeterministic) {
  std::vector<int> a = {1, 0, 1, 0, 1, 0, 1, 0}, b = a;
  auto ci = paired_bootstrap_diff(a, b, 500, 1);
  EXPECT_DOUBLE_EQ(ci.low, 0);
  EXPECT_DOUBLE_EQ(ci.high, 0);
  std::vector<int> zeros(8, 0), ones(8, 1);
  ci = paired_bootstrap_diff(zeros, ones, 500, 1);
  EXPECT_DOUBLE_EQ(ci.low, 100);
  EXPECT_DOUBLE_EQ(ci.high, 100);
  std::vector<int> c = {1, 1, 1, 0, 1, 1, 1, 0};  // +25 points on average, paired
  auto x = paired_bootstrap_diff(a, c, 1000, 9), y = paired_bootstrap_diff(a, c, 1000, 9);
  EXPECT_DOUBLE_EQ(x.low, y.low);
  EXPECT_LE(x.low, 25);
  EXPECT_GE(x.high, 25);
  EXPECT_GE(x.low, 0);  // b is never worse than a on any question
}

run::RunData make_run(const std::string& name, const std::vector<std::pair<std::string, bool>>& answers) {
  run::RunData r;
  r.name = name;
  r.manifest = {{"benchmark", "bird"}, {"simulated", false}};
  int64_t i = 0;
  for (const auto& [id, ok] : answers)
    r.records.push_back(testing::typed(json{{"question_id", id}, {"index", i++}, {"db_id", "db"}, {"status", "ok"},
                                            {"verdict", {{"verdicts", {{"bird", ok}}}, {"outcome", ok ? "RES3" : "RES2"}}}}));
  return r;
}

TEST(CompareRuns, CommonQuestionsFlipsAndDifference) {
  run::RunData a = make_run("A", {{"q1", true}, {"q2", true}, {"q3", false}, {"q4", false}, {"q5", true}});
  run::RunData b = make_run("B", {{"q1", true}, {"q2", false}, {"q3", true}, {"q4", true}, {"q6", true}});
  json cmp = compare_runs({a, b}, CompareOptions{});
  EXPECT_EQ(cmp["common_questions"], 4);  // q1..q4
  EXPECT_DOUBLE_EQ(cmp["runs"][0]["ex_all"].get<double>(), 60.0);
  EXPECT_DOUBLE_EQ(cmp["runs"][0]["ex_common"].get<double>(), 50.0);
  EXPECT_DOUBLE_EQ(cmp["runs"][1]["ex_common"].get<double>(), 75.0);
  const json& c = cmp["comparisons"][0];
  EXPECT_DOUBLE_EQ(c["diff"].get<double>(), 25.0);
  EXPECT_EQ(c["mcnemar"]["b"], 1);  // q2
  EXPECT_EQ(c["mcnemar"]["c"], 2);  // q3, q4
  EXPECT_NEAR(c["mcnemar"]["p_value"].get<double>(), 1.0, 1e-12);  // 2 * (1 + 3) / 8 capped
  ASSERT_EQ(c["flipped"].size(), 3u);
  EXPECT_EQ(c["flipped"][0]["question_id"], "q2");
  EXPECT_TRUE(c["flipped"][0]["baseline"].get<bool>());
  EXPECT_FALSE(c["flipped"][0]["run"].get<bool>());
  std::string md = compare_markdown(cmp);
  EXPECT_NE(md.find("| B | 5 | 80.00 | 75.00 |"), std::string::npos) << md;
  EXPECT_NE(md.find("+25.00"), std::string::npos);
  EXPECT_NE(md.find("| q3 | db | ✗ | ✓ |"), std::string::npos);
  EXPECT_EQ(md.find("SIMULATED"), std::string::npos);
}

}  // namespace
}  // namespace nl2sql::report
