// SSEV's weighted-majority voting through the whole pipeline (issue 21, item 1): three expert
// profiles behind one fake server, one of them always wrong. The weights are keyed by what
// select.wma.experts names (here: the profile), ε comes from the number of experts, every update
// multiplies the wrong expert's weight by (1 − ε) as the paper's rule says, the trajectory
// is rebuilt on resume, and each expert's failing SQL is repaired by that expert's own model.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>

#include "nl2sql/core/config.h"
#include "nl2sql/pipeline/pipeline.h"
#include "nl2sql/select/selector.h"
#include "support/fake_openai_server.h"
#include "support/mini_run.h"
#include "support/test_env.h"

namespace nl2sql::pipeline {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using llm::testing::FakeOpenAiServer;
using llm::testing::FakeReply;

core::Config ssev_config(const std::string& base_url) {
  core::Config config(json::parse(R"({
    "llm": {"models": {"expert_a": {"base_url": "", "model": "model-a"},
                       "expert_b": {"base_url": "", "model": "model-b"},
                       "expert_c": {"base_url": "", "model": "model-c"}},
            "default_profile": "expert_a", "cache": {"mode": "off"}, "preflight": false,
            "retry": {"max_attempts": 1, "base_delay_s": 0.01, "max_delay_s": 0.01}},
    "generate": {"generators": [{"name": "ssev", "profiles": ["expert_a", "expert_b", "expert_c"], "samples": 1}]},
    "fix": {"enabled": true, "max_rounds": 1},
    "select": {"method": "wma", "wma": {"experts": "profile"}},
    "run": {"selectors": ["wma", "rwma", "naive_vote"], "primary_selector": "wma", "threads": 3,
            "curve_selector": false}
  })"));
  for (const char* p : {"expert_a", "expert_b", "expert_c"})
    config.set(std::string("llm.models.") + p + ".base_url", base_url);
  return config;
}

// Experts A and B answer each question's gold SQL; expert C writes SQL that does not run, and
// when asked to fix it, a query that runs and is wrong. Records which model each fix went to.
class ScriptedExperts {
 public:
  explicit ScriptedExperts(const fs::path& dev_json) {
    for (const auto& q : testing::read_json_file(dev_json)) gold_.emplace_back(q.at("question").get<std::string>(), q.at("SQL").get<std::string>());
  }
  FakeReply answer(const httplib::Request& req) {
    json body = json::parse(req.body);
    const std::string model = body.value("model", "");
    const std::string prompt = body.at("messages").back().at("content").get<std::string>();
    const bool fix = prompt.find("The query that was tried") != std::string::npos;
    std::string sql = "SELECT 1";
    for (const auto& [question, gold] : gold_)
      if (prompt.find(question) != std::string::npos) sql = gold;
    if (model == "model-c") sql = fix ? "SELECT 'the wrong expert'" : "SELECT broken_col FROM school";
    if (fix) {
      std::lock_guard lock(mu_);
      if (prompt.find("broken_col") != std::string::npos) fixes_of_broken_.push_back(model);
    }
    return FakeReply(200, llm::testing::completion_body("```json\n[\"school\"]\n```\n```sql\n" + sql + "\n```"));
  }
  std::vector<std::string> fixes_of_broken() const {
    std::lock_guard lock(mu_);
    return fixes_of_broken_;
  }

 private:
  std::vector<std::pair<std::string, std::string>> gold_;
  mutable std::mutex mu_;
  std::vector<std::string> fixes_of_broken_;
};

TEST(ExpertWeights, ConfiguredExpertCountFollowsWhatAnExpertIs) {
  core::Config c(json::parse(R"({"generate": {"generators": [
      {"name": "ssev", "profiles": ["a", "b", "c"]}, {"name": "dc", "profiles": ["a"]}, {"name": "qp"}]}})"));
  c.set("select.wma.experts", "profile");
  EXPECT_EQ(*select::configured_expert_count(c), 4);  // a, b, c and the profile qp writes with
  c.set("select.wma.experts", "generator");
  EXPECT_EQ(*select::configured_expert_count(c), 3);
  c.set("select.wma.expert_count", 7);
  EXPECT_EQ(*select::configured_expert_count(c), 7);
  c.set("select.wma.experts", "model");
  EXPECT_FALSE(select::configured_experts(c).is_ok());
}

TEST(ExpertWeights, AnAlwaysWrongExpertLosesWeightByTheRuleAndRepairsItsOwnSql) {
  testing::TempDir dir;
  const fs::path data = testing::build_mini_bird(dir.path() / "mini");
  ScriptedExperts experts(data / "dev.json");
  FakeOpenAiServer server([&](const httplib::Request& req, int64_t) { return experts.answer(req); });
  const core::Config config = ssev_config(server.base_url());

  const int questions = 6;
  RunOptions o = testing::mini_run_options(config, data, dir.path() / "run", dir.path() / "index");
  o.filter.ranges = "0-5";
  auto first = run(o);
  ASSERT_TRUE(first.is_ok()) << first.status().message();
  ASSERT_EQ(first->finished, static_cast<size_t>(questions));
  const json after_run = testing::read_json_file(dir.path() / "run" / "weights.json");
  // Rerun: every question is resumed, and the weights are rebuilt by replaying the stored verdicts.
  fs::remove(dir.path() / "run" / "weights.json");
  auto again = run(o);
  ASSERT_TRUE(again.is_ok()) << again.status().message();
  EXPECT_EQ(again->resumed, static_cast<size_t>(questions));
  EXPECT_EQ(testing::read_json_file(dir.path() / "run" / "weights.json"), after_run);

  // ε from n = 3 experts (the profiles), m = horizon × best_expert_error = 1000 × 0.3.
  const double eps = std::sqrt(std::log(3.0) / 300.0);
  json w = testing::read_json_file(dir.path() / "run" / "weights.json");
  EXPECT_NEAR(w.at("epsilon").get<double>(), eps, 1e-12);
  ASSERT_EQ(w.at("trajectory").size(), static_cast<size_t>(questions));
  for (int t = 0; t < questions; ++t) {
    const json& step = w.at("trajectory")[static_cast<size_t>(t)];
    SCOPED_TRACE("step " + std::to_string(t));
    EXPECT_EQ(step.at("correct"), json({{"expert_a", true}, {"expert_b", true}, {"expert_c", false}}));
    EXPECT_NEAR(step.at("weights").at("expert_c").get<double>(), std::pow(1.0 - eps, t + 1), 1e-12);
    EXPECT_DOUBLE_EQ(step.at("weights").at("expert_a").get<double>(), 1.0);
    EXPECT_DOUBLE_EQ(step.at("weights").at("expert_b").get<double>(), 1.0);
  }

  // Every repair of expert C's broken SQL was asked of expert C's model, never of the default.
  auto fixes = experts.fixes_of_broken();
  EXPECT_GE(fixes.size(), static_cast<size_t>(questions));
  EXPECT_EQ(std::set<std::string>(fixes.begin(), fixes.end()), std::set<std::string>{"model-c"});
}

}  // namespace
}  // namespace nl2sql::pipeline
