// `nl2sql eval`'s console summary, written by the eval layer (report_to_console): its lines
// from a summarized report, and the EX that --fail-under compares.
#include <gtest/gtest.h>

#include "nl2sql/eval/evaluator.h"
#include "nl2sql/eval/report.h"

namespace nl2sql::eval {
namespace {

// Three questions: two correct under bird, one under relaxed only; one gold unusable.
EvalReport three_items() {
  EvalReport r;
  r.benchmark = "bird";
  r.split = "dev";
  r.metrics = {Metric::kBird, Metric::kRelaxed};
  r.wall_s = 2.0;
  for (int i = 0; i < 3; ++i) {
    ItemResult it;
    it.question_id = std::to_string(i);
    it.db_id = "d";
    it.verdicts["bird"] = i < 2;
    it.verdicts["relaxed"] = true;
    it.outcome = i < 2 ? "RES3" : "RES2";
    it.soft_f1 = i < 2 ? 1.0 : 0.5;
    r.items.push_back(it);
  }
  r.items[2].gold_unusable = true;
  summarize(r, EvalOptions{});
  return r;
}

TEST(ConsoleReport, ListsCountsEveryMetricAndTheTime) {
  const std::string text = report_to_console(three_items());
  EXPECT_EQ(text.rfind("bird dev: 3 questions evaluated, 0 skipped, 1 gold unusable\n", 0), 0u) << text;
  EXPECT_NE(text.find("  bird       EX  66.67%  95% CI ["), std::string::npos) << text;
  EXPECT_NE(text.find("(2/3)\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  relaxed    EX 100.00%"), std::string::npos) << text;
  EXPECT_LT(text.find("  bird "), text.find("  relaxed "));
  EXPECT_NE(text.find("  (RES3 + RES5) / n on the rule codes  66.67%\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  soft-F1     83.33\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("test suite"), std::string::npos);
  EXPECT_EQ(text.find("efficiency"), std::string::npos);
  const std::string last = "  2.000 s, 1.5 questions/s\n";
  ASSERT_GE(text.size(), last.size());
  EXPECT_EQ(text.substr(text.size() - last.size()), last) << text;
}

TEST(ConsoleReport, FailUnderComparesTheFirstMetricByName) {
  EXPECT_NEAR(first_metric_ex(three_items()), 200.0 / 3, 1e-9);
  EvalReport none = three_items();
  none.summary["metrics"] = nlohmann::json::object();
  EXPECT_EQ(first_metric_ex(none), 0.0);
}

}  // namespace
}  // namespace nl2sql::eval
