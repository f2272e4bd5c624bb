// The curves' per-selector re-runs (run.curve_selectors) against a logging fake endpoint: the
// naive and DeepEye baselines re-run on every prefix and repeat send no byte-identical request,
// every request the server saw is counted once in report.json (select + curves), and each
// record holds one pick per repeat.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>
#include <map>

#include "nl2sql/core/config.h"
#include "nl2sql/pipeline/pipeline.h"
#include "nl2sql/run/run_data.h"
#include "support/fake_openai_server.h"
#include "support/mini_run.h"
#include "support/test_env.h"

namespace nl2sql::pipeline {
namespace {

namespace fs = std::filesystem;
using llm::testing::FakeOpenAiServer;
using llm::testing::FakeReply;
using nlohmann::json;

TEST(CurveSelectorsHttp, RepeatsAndPrefixesSendNoIdenticalRequestAndAreCountedOnce) {
  setenv("NL2SQL_CURVE_TEST_KEY", "sk-curve-test", 1);
  testing::TempDir dir;
  const fs::path data = testing::build_mini_bird(dir / "mini");
  // Three different queries in turn, so pools disagree; every answer also carries a verdict and a
  // chosen SQL, so the naive and pairwise readers find what they look for.
  FakeOpenAiServer server([](const httplib::Request& req, int64_t seq) {
    static const char* kSql[] = {"SELECT count(*) FROM school", "SELECT name FROM district",
                                 "SELECT count(*) FROM district"};
    const bool selecting = req.body.find("Candidate queries:") != std::string::npos ||
                           req.body.find("Query A:") != std::string::npos;
    const std::string sql = kSql[seq % 3];
    if (selecting)
      return FakeReply(
          200,
          llm::testing::completion_body(
              "```json\n" + json{{"winner", seq % 2 ? "A" : "B"}, {"sql", sql}}.dump() + "\n```"));
    return FakeReply(200, llm::testing::completion_body("```sql\n" + sql + "\n```"));
  });
  core::Config config(json::parse(R"({
    "llm": {"models": {"fake": {"base_url": "", "model": "fake-coder", "api_key_env": "NL2SQL_CURVE_TEST_KEY",
                                "price_in_per_mtok": 1.0, "price_out_per_mtok": 2.0}},
            "default_profile": "fake", "cache": {"mode": "off"}, "preflight": false,
            "retry": {"max_attempts": 1, "base_delay_s": 0.01, "max_delay_s": 0.01}},
    "generate": {"generators": [{"name": "baseline", "samples": 6}]},
    "fix": {"enabled": false},
    "select": {"method": "deepeye_selection", "deepeye_selection": {"top_k": 3}},
    "run": {"selectors": ["deepeye_selection", "alphasql_naive", "alphasql_consistency"], "threads": 2,
            "curve_points": [2, 4, 6], "curve_selector": true,
            "curve_selectors": ["deepeye_selection", "alphasql_naive", "alphasql_consistency"],
            "curve_repeats": 2, "curve_repeats_primary": 3}
  })"));
  config.set("llm.models.fake.base_url", server.base_url());
  auto options = testing::mini_run_options(config, data, dir / "run", dir / "index");
  options.filter.ranges = "0-3";
  auto summary = testing::run_and_report(options);
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();

  std::map<std::string, int> seen;
  int selecting = 0;
  // (Only the selectors' requests: the baseline generator's samples are not this test's concern.)
  for (const auto& b : server.bodies()) {
    if (b.find("Candidate queries:") == std::string::npos &&
        b.find("Query A:") == std::string::npos)
      continue;
    seen[b] += 1;
    ++selecting;
  }
  EXPECT_GT(selecting, 0);
  for (const auto& [body, n] : seen) EXPECT_EQ(n, 1) << body.substr(0, 400);

  std::ifstream in(dir / "run" / "report.json");
  json rep = json::parse(in);
  const json& stages = rep["usage"]["stages"];
  const double counted = stages.value("select", json::object()).value("calls", 0.0) +
                         stages.value("curves", json::object()).value("calls", 0.0);
  EXPECT_EQ(counted, selecting);
  EXPECT_EQ(rep["usage"]["total"]["calls"].get<double>(), static_cast<double>(server.requests()));

  auto run = run::load_run(dir / "run");
  ASSERT_TRUE(run.is_ok()) << run.status().message();
  ASSERT_EQ(run->records.size(), 4u);
  for (const auto& r : run->records) {
    for (int64_t k : {2, 4, 6}) {
      ASSERT_TRUE(r.curves.count(k));
      const auto& p = r.curves.at(k);
      EXPECT_EQ(p.selectors.at("deepeye_selection").size(), 3u);
      EXPECT_EQ(p.selectors.at("alphasql_naive").size(), 2u);
      EXPECT_EQ(p.selectors.at("alphasql_consistency").size(), 1u);
    }
  }
}

}  // namespace
}  // namespace nl2sql::pipeline
