// The provider's own accounting over a whole run (issue 39): against an endpoint with a prefix
// cache that reports cached and reasoning tokens (OpenAI's shape on some answers, DeepSeek's on
// others), report.json's cost is the endpoint's own bill at the same prices, and its cached and
// reasoning tokens are the ones the endpoint reported, preflight included.
#include <gtest/gtest.h>

#include <mutex>

#include "nl2sql/core/config.h"
#include "nl2sql/core/files.h"
#include "nl2sql/pipeline/pipeline.h"
#include "support/fake_openai_server.h"
#include "support/mini_run.h"
#include "support/prefix_cache_meter.h"
#include "support/test_env.h"

namespace nl2sql::pipeline {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using llm::testing::FakeCharge;
using llm::testing::FakeOpenAiServer;
using llm::testing::FakeReply;

constexpr double kIn = 1.0, kCached = 0.25, kOut = 4.0;

// Bills every answer as a prefix-cached server would, and keeps the totals of what it reported.
struct PrefixCachedEndpoint {
  llm::testing::PrefixCacheMeter meter{16};
  std::mutex mu;
  FakeCharge total;  // guarded by mu
  double bill = 0;   // guarded by mu
  FakeOpenAiServer server{[this](const httplib::Request& req, int64_t seq) {
    FakeCharge c = meter.admit(llm::testing::fake_prompt_text(req.body));
    const std::string sql = seq % 3 == 0 ? "SELECT count(*) FROM school" : seq % 3 == 1 ? "SELECT name FROM district"
                                                                                        : "SELECT name FROM school";
    const std::string text = "Answer: A\n```json\n[\"school\"]\n```\n```sql\n" + sql + "\n```";
    c.reasoning_tokens = seq % 4;
    c.completion_tokens = llm::testing::fake_tokens(text) + c.reasoning_tokens;
    {
      std::lock_guard lock(mu);
      total.prompt_tokens += c.prompt_tokens;
      total.cached_tokens += c.cached_tokens;
      total.completion_tokens += c.completion_tokens;
      total.reasoning_tokens += c.reasoning_tokens;
      bill += c.cost_usd(kIn, kCached, kOut);
    }
    const auto shape = seq % 2 ? llm::testing::UsageShape::kDeepSeek : llm::testing::UsageShape::kOpenAi;
    return FakeReply(200, llm::testing::completion_body_with_usage(text, llm::testing::usage_json(c, shape)));
  }};
};

TEST(ProviderUsageRun, ReportCostIsTheBillOfAPrefixCachedEndpoint) {
  testing::TempDir dir;
  const fs::path data = testing::build_mini_bird(dir.path() / "mini");
  PrefixCachedEndpoint endpoint;
  core::Config config(json::parse(R"({
    "llm": {"models": {"fake": {"base_url": "", "model": "fake-coder", "api_key_env": "",
                                "price_in_per_mtok": 1.0, "price_cached_in_per_mtok": 0.25,
                                "price_out_per_mtok": 4.0}},
            "default_profile": "fake", "preflight": true,
            "retry": {"max_attempts": 1, "base_delay_s": 0.01, "max_delay_s": 0.01}},
    "context": {"keywords": {"llm": true}},
    "generate": {"generators": [{"name": "baseline", "samples": 2}, {"name": "dc", "samples": 2}]},
    "fix": {"enabled": true, "max_rounds": 1},
    "select": {"method": "tournament"},
    "run": {"threads": 3}
  })"));
  config.set("llm.models.fake.base_url", endpoint.server.base_url());
  config.set("llm.cache.mode", "read-write");
  config.set("llm.cache.path", (dir.path() / "cache.sqlite").string());
  RunOptions o = testing::mini_run_options(config, data, dir.path() / "run", dir.path() / "index");
  o.filter.ranges = "0-5";
  auto summary = testing::run_and_report(o);
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  const json usage = testing::read_json_file(dir.path() / "run" / "report.json").at("usage");
  const json& t = usage.at("total");
  std::lock_guard lock(endpoint.mu);
  ASSERT_GT(endpoint.total.cached_tokens, 0) << "the endpoint served nothing from its cache: the test checks nothing";
  ASSERT_GT(endpoint.total.reasoning_tokens, 0);
  EXPECT_EQ(t.at("calls").get<double>(), static_cast<double>(endpoint.server.requests()));
  EXPECT_EQ(t.at("prompt_tokens").get<double>(), static_cast<double>(endpoint.total.prompt_tokens));
  EXPECT_EQ(t.at("cached_tokens").get<double>(), static_cast<double>(endpoint.total.cached_tokens));
  EXPECT_EQ(t.at("calls_reporting_cached").get<double>(), static_cast<double>(endpoint.server.requests()));
  EXPECT_EQ(t.at("reasoning_tokens").get<double>(), static_cast<double>(endpoint.total.reasoning_tokens));
  EXPECT_NEAR(t.at("cost_usd").get<double>(), endpoint.bill, 1e-9);
  EXPECT_NEAR(summary->cost_usd, endpoint.bill, 1e-9);
  // At list price for every prompt token the report would have overstated the bill.
  const double list = (static_cast<double>(endpoint.total.prompt_tokens) * kIn +
                       static_cast<double>(endpoint.total.completion_tokens) * kOut) / 1e6;
  EXPECT_GT(list - endpoint.bill, 1e-6);
  // The preflight's request is billed too, and its breakdown is kept in the run-wide usage.
  ASSERT_TRUE(usage.at("stages").contains("preflight"));
  EXPECT_EQ(usage.at("stages").at("preflight").at("calls_reporting_cached").get<double>(), 1);
  auto md = core::read_file(dir.path() / "run" / "report.md");
  ASSERT_TRUE(md.is_ok()) << md.status().message();
  EXPECT_NE(md->find("of which cached by the provider"), std::string::npos);
}

}  // namespace
}  // namespace nl2sql::pipeline
