// `nl2sql run --estimate` and `nl2sql sweep --estimate` as a user runs them: the config's endpoint
// is a fake server that counts requests — none reaches it; the JSON has calls, prompt_tokens,
// completion_tokens and cost_usd as {low, expected, high}; the run folder is not created.
#include <gtest/gtest.h>

#include <fstream>

#include "support/fake_openai_server.h"
#include "support/test_env.h"

namespace nl2sql::testing {
namespace {

namespace fs = std::filesystem;
using llm::testing::completion_body;
using llm::testing::FakeOpenAiServer;
using llm::testing::FakeReply;

std::string write_config(const fs::path& path, const std::string& url, int samples) {
  std::ofstream(path) << R"({
    "llm": {"models": {"fake": {"base_url": ")" << url << R"(", "model": "fake", "api_key_env": "",
                                "price_in_per_mtok": 2.0, "price_out_per_mtok": 8.0}},
            "default_profile": "fake", "retry": {"max_attempts": 1}},
    "context": {"keywords": {"llm": true}},
    "generate": {"generators": [{"name": "dc", "samples": )" << samples << R"(}]},
    "select": {"method": "tournament"}
  })";
  return path.string();
}

void expect_ranges(const nlohmann::json& j) {
  for (const char* key : {"calls", "prompt_tokens", "completion_tokens", "cost_usd"}) {
    ASSERT_TRUE(j.contains(key)) << key << " in " << j.dump();
    const auto& r = j[key];
    EXPECT_LE(r["low"].get<double>(), r["expected"].get<double>()) << key;
    EXPECT_LE(r["expected"].get<double>(), r["high"].get<double>()) << key;
    EXPECT_GT(r["high"].get<double>(), 0) << key;
  }
}

TEST(EstimateCli, RunEstimateCallsNoEndpoint) {
  TempDir dir;
  const auto data = build_mini_bird(dir / "mini");
  FakeOpenAiServer server([](const httplib::Request&, int64_t) { return FakeReply{200, completion_body("SELECT 1")}; });
  const std::string config = write_config(dir / "c.json", server.base_url(), 2);
  const std::string common = " --benchmark bird --data " + data.string() + " --index-dir " + (dir / "index").string() +
                             " --questions 0-4";
  auto r = run_nl2sql("run --config " + config + common + " --out " + (dir / "run").string() + " --estimate --json");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(server.requests(), 0);
  EXPECT_FALSE(fs::exists(dir / "run"));
  const auto j = nlohmann::json::parse(r.out);
  expect_ranges(j);
  EXPECT_EQ(j["questions"], 5);
  // Keywords (1) and two dc samples per question, at least: the calls the config decides.
  EXPECT_GE(j["calls"]["low"].get<double>(), 15);
  EXPECT_EQ(j["basis"], "defaults");

  auto text = run_nl2sql("run --config " + config + common + " --estimate");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("no endpoint called"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("total USD"), std::string::npos) << text.out;
  EXPECT_EQ(server.requests(), 0);

  auto misuse = run_nl2sql("run --config " + config + common + " --json");
  EXPECT_EQ(misuse.exit_code, 2) << misuse.err;
}

TEST(EstimateCli, SweepEstimateSumsItsConfigs) {
  TempDir dir;
  const auto data = build_mini_bird(dir / "mini");
  FakeOpenAiServer server([](const httplib::Request&, int64_t) { return FakeReply{200, completion_body("SELECT 1")}; });
  const std::string small = write_config(dir / "small.json", server.base_url(), 1);
  const std::string big = write_config(dir / "big.json", server.base_url(), 4);
  auto r = run_nl2sql("sweep " + small + " " + big + " --benchmark bird --data " + data.string() + " --index-dir " +
                      (dir / "index").string() + " --questions 0-2 --out " + (dir / "sweep").string() +
                      " --estimate --json");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(server.requests(), 0);
  const auto j = nlohmann::json::parse(r.out);
  expect_ranges(j);
  ASSERT_EQ(j["configs"].size(), 2u);
  const double a = j["configs"][0]["estimate"]["calls"]["expected"];
  const double b = j["configs"][1]["estimate"]["calls"]["expected"];
  EXPECT_LT(a, b);  // four samples cost more than one
  EXPECT_DOUBLE_EQ(j["calls"]["expected"].get<double>(), a + b);
  EXPECT_FALSE(fs::exists(dir / "sweep" / "small"));
}

}  // namespace
}  // namespace nl2sql::testing
