// eval::options_from_config: the eval.* keys of a config, with the schema's defaults, as the
// EvalOptions that `nl2sql run` and `nl2sql eval` both judge with.
#include <gtest/gtest.h>

#include "nl2sql/eval/evaluator.h"

namespace nl2sql::eval {
namespace {

core::Config config_of(const std::string& text) { return core::Config(nlohmann::json::parse(text)); }

TEST(EvalOptionsFromConfig, DefaultsAreTheSchemasAndAutoIsTheCallersChoice) {
  auto o = options_from_config(core::Config(), "spider-ts,relaxed");
  ASSERT_TRUE(o.is_ok()) << o.status().message();
  EXPECT_EQ(o->metrics, (std::vector<Metric>{Metric::kSpiderTs, Metric::kRelaxed}));
  EXPECT_DOUBLE_EQ(o->pred_limits.timeout_s, 30.0);
  EXPECT_DOUBLE_EQ(o->gold_limits.timeout_s, 30.0);
  EXPECT_EQ(o->pred_limits.row_cap, 100000u);
  EXPECT_EQ(o->gold_limits.row_cap, 0u);  // gold is never capped
  EXPECT_FALSE(o->keep_distinct);
  EXPECT_TRUE(o->check_ties);
}

TEST(EvalOptionsFromConfig, EveryKeyReachesItsOption) {
  auto o = options_from_config(
      config_of(R"({"eval": {"metrics": ["relaxed", "bird"], "timeout_s": 2.5, "row_cap": 7,
                              "keep_distinct": true, "check_ties": false}})"),
      "bird");
  ASSERT_TRUE(o.is_ok()) << o.status().message();
  EXPECT_EQ(o->metrics, (std::vector<Metric>{Metric::kRelaxed, Metric::kBird}));
  EXPECT_DOUBLE_EQ(o->pred_limits.timeout_s, 2.5);
  EXPECT_DOUBLE_EQ(o->gold_limits.timeout_s, 2.5);
  EXPECT_EQ(o->pred_limits.row_cap, 7u);
  EXPECT_TRUE(o->keep_distinct);
  EXPECT_FALSE(o->check_ties);
  auto comma = options_from_config(config_of(R"({"eval": {"metrics": "bird,spider-ts"}})"), "relaxed");
  ASSERT_TRUE(comma.is_ok());
  EXPECT_EQ(comma->metrics, (std::vector<Metric>{Metric::kBird, Metric::kSpiderTs}));
}

TEST(EvalOptionsFromConfig, EfficiencyMetricsAndTheJudgeSitBesideEx) {
  auto o = options_from_config(config_of(R"({"eval": {"metrics": ["ves", "rves-steps", "judge"], "ves_repeats": 7}})"),
                               "bird");
  ASSERT_TRUE(o.is_ok()) << o.status().message();
  EXPECT_EQ(o->metrics, (std::vector<Metric>{Metric::kBird}));  // only efficiency named: the auto metric added
  EXPECT_EQ(o->efficiency, (std::vector<EfficiencyMetric>{EfficiencyMetric::kVes, EfficiencyMetric::kRvesSteps}));
  EXPECT_TRUE(o->judge);
  EXPECT_EQ(o->ves_repeats, 7);
  auto d = options_from_config(core::Config(), "bird");
  ASSERT_TRUE(d.is_ok());
  EXPECT_EQ(d->ves_repeats, 100);
  EXPECT_TRUE(d->efficiency.empty());
  EXPECT_FALSE(d->judge);
  auto both = options_from_config(config_of(R"({"eval": {"metrics": "relaxed,rves"}})"), "bird");
  ASSERT_TRUE(both.is_ok());
  EXPECT_EQ(both->metrics, (std::vector<Metric>{Metric::kRelaxed}));
  EXPECT_EQ(both->efficiency, (std::vector<EfficiencyMetric>{EfficiencyMetric::kRves}));
}

TEST(EvalOptionsFromConfig, ErrorsNameTheKey) {
  auto bad_metric = options_from_config(config_of(R"({"eval": {"metrics": "exact"}})"), "bird");
  ASSERT_FALSE(bad_metric.is_ok());
  EXPECT_NE(bad_metric.status().message().find("eval.metrics"), std::string::npos) << bad_metric.status().message();
  auto bad_type = options_from_config(config_of(R"({"eval": {"keep_distinct": "yes"}})"), "bird");
  ASSERT_FALSE(bad_type.is_ok());
  EXPECT_NE(bad_type.status().message().find("eval.keep_distinct"), std::string::npos) << bad_type.status().message();
}

}  // namespace
}  // namespace nl2sql::eval
