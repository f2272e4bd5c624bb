// The pipeline over real HTTP (libcurl → the in-process fake OpenAI server): every stage's calls
// reach the server, the run is not labelled simulated, the API key never reaches the run folder,
// and a server that fails every call still yields one recorded (wrong) result per question.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <mutex>
#include <set>
#include <type_traits>
#include <fstream>
#include <sstream>

#include "support/fake_openai_server.h"
#include "nl2sql/core/config.h"
#include "nl2sql/data/dataset.h"
#include "nl2sql/fix/fixer.h"
#include "nl2sql/generate/generator.h"
#include "nl2sql/select/selector.h"
#include "nl2sql/pipeline/pipeline.h"
#include "nl2sql/run/run_data.h"
#include "support/records.h"
#include "support/mini_run.h"
#include "support/test_env.h"

namespace nl2sql::pipeline {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using llm::testing::FakeOpenAiServer;
using llm::testing::FakeReply;

const char* kKey = "sk-test-5f0c1e0b9d2a4c7e";

core::Config make_config(const std::string& base_url) {
  core::Config config(json::parse(R"({
    "llm": {"models": {"fake": {"base_url": "", "model": "fake-coder", "api_key_env": "NL2SQL_PIPELINE_TEST_KEY",
                                "price_in_per_mtok": 1.0, "price_out_per_mtok": 2.0}},
            "default_profile": "fake", "cache": {"mode": "off"},
            "retry": {"max_attempts": 1, "base_delay_s": 0.01, "max_delay_s": 0.01}},
    "context": {"keywords": {"llm": true}},
    "generate": {"generators": [{"name": "baseline", "samples": 2}, {"name": "dc", "samples": 1}]},
    "fix": {"enabled": true, "max_rounds": 2},
    "select": {"method": "tournament"},
    "run": {"selectors": ["tournament", "self_consistency"], "threads": 4}
  })"));
  config.set("llm.models.fake.base_url", base_url);
  return config;
}

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class PipelineHttp : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("NL2SQL_PIPELINE_TEST_KEY", kKey, 1);
    data_ = testing::build_mini_bird(dir_ / "mini");
  }
  RunOptions options(const core::Config& config, const fs::path& out) {
    return testing::mini_run_options(config, data_, out, dir_ / "index");
  }
  testing::TempDir dir_;
  fs::path data_;
};

TEST_F(PipelineHttp, EveryStageCallsTheServerAndTheKeyStaysOutOfTheRunFolder) {
  // Answers every prompt with text each stage can read: a verdict line for the tournament, a
  // JSON list for keywords and a final SQL block; the SQL alternates so candidates differ.
  FakeOpenAiServer server([](const httplib::Request&, int64_t seq) {
    std::string sql = seq % 3 == 0 ? "SELECT count(*) FROM school" : "SELECT name FROM district";
    return FakeReply(200, llm::testing::completion_body("Answer: A\n```json\n[\"school\"]\n```\n```sql\n" + sql + "\n```"));
  });
  fs::path out = dir_ / "run";
  auto summary = run(options(make_config(server.base_url()), out));
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_EQ(summary->finished, 21u);
  EXPECT_EQ(summary->failed, 0u);
  EXPECT_FALSE(summary->simulated);
  EXPECT_GT(summary->cost_usd, 0.0);
  // keywords + 3 generation calls per question at least.
  EXPECT_GE(server.requests(), 21 * 4);
  for (const auto& auth : server.authorizations()) EXPECT_EQ(auth, std::string("Bearer ") + kKey);

  auto data = run::load_run(out);
  ASSERT_TRUE(data.is_ok()) << data.status().message();
  EXPECT_FALSE(data->manifest.value("simulated", true));
  size_t with_calls = 0;
  for (const auto& r : testing::written_records(*data)) {
    ASSERT_EQ(r["candidates"].size(), 3u) << r.dump();
    with_calls += !r["context"]["calls"].empty();
    for (const auto& c : r["candidates"]) EXPECT_EQ(c["calls"][0]["provider"], "openai");
  }
  EXPECT_EQ(with_calls, 21u);
  for (const auto& entry : fs::recursive_directory_iterator(out)) {
    if (!entry.is_regular_file()) continue;
    EXPECT_EQ(read_all(entry.path()).find(kKey), std::string::npos) << entry.path().filename();
  }
}

TEST_F(PipelineHttp, AServerFailingEveryCallStopsAtThePreflight) {
  FakeOpenAiServer server([](const httplib::Request&, int64_t) {
    return FakeReply(500, R"({"error": {"message": "overloaded"}})");
  });
  auto summary = run(options(make_config(server.base_url()), dir_ / "run"));
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_EQ(summary->finished, 0u);
  EXPECT_NE(summary->fatal_error.find("overloaded"), std::string::npos) << summary->fatal_error;
  EXPECT_EQ(server.requests(), 1);  // llm.retry.max_attempts is 1 here
}

// Without the preflight, the same 500 on every call across questions is a dead endpoint: the
// run stops (exit 4) after probing it, with nothing recorded as answered.
TEST_F(PipelineHttp, AServerFailingEveryCallStopsTheRunWithoutThePreflight) {
  FakeOpenAiServer server([](const httplib::Request&, int64_t) {
    return FakeReply(500, R"({"error": {"message": "internal error"}})");
  });
  fs::path out = dir_ / "run";
  core::Config config = make_config(server.base_url());
  config.set("llm.preflight", false);
  config.set("llm.endpoint_down_wait_s", 0.3);
  auto summary = run(options(config, out));
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_NE(summary->fatal_error.find("stopped answering"), std::string::npos) << summary->fatal_error;
  EXPECT_EQ(summary->correct, 0u);
  EXPECT_EQ(summary->finished + summary->interrupted + summary->not_started, 21u);
  EXPECT_LT(server.requests(), 60) << "probed, not hammered";
  auto data = run::load_run(out);
  ASSERT_TRUE(data.is_ok());
  for (const auto& r : testing::written_records(*data)) {
    EXPECT_EQ(r["prediction"], "") << r["question_id"];
    // The failure is kept in the trace, not dropped.
    bool error_kept = r.value("status", "") == "error";
    for (const auto& c : r.value("candidates", json::array()))
      error_kept = error_kept || !c.value("extraction_error", "").empty() ||
                   (!c["calls"].empty() && !c["calls"][0].value("error", "").empty());
    EXPECT_TRUE(error_kept) << r.dump();
  }
}

// Gold never enters a stage's input, by construction: the stage inputs hold a data::Task, which
// has no gold field, and data::Question (which has) is not what they take.
static_assert(std::is_same_v<decltype(generate::GenerationInput::question), const data::Task*>);
static_assert(std::is_same_v<decltype(fix::FixInput::question), const data::Task*>);
static_assert(std::is_same_v<decltype(select::SelectionInput::question), const data::Task*>);

// And in a real-model run with every model-calling stage on (LLM keywords, column filter, the
// three generators and the agents, the fixer, the tournament, the ranker and separating-instance
// duels), no request the server receives holds any question's gold SQL.
TEST_F(PipelineHttp, NoRequestOfARealModelRunHoldsGold) {
  std::mutex mu;
  std::vector<std::string> bodies;
  FakeOpenAiServer server([&](const httplib::Request& req, int64_t seq) {
    {
      std::lock_guard lock(mu);
      bodies.push_back(req.body);
    }
    std::string sql = seq % 2 == 0 ? "SELECT count(*) FROM school" : "SELECT name FROM district";
    return FakeReply(200, llm::testing::completion_body(
                              "Answer: A\n```json\n{\"keywords\": [\"school\"], \"relevant\": true, \"ranking\": [0, 1]}\n```\n"
                              "```text\n3\n```\n```sql\n" + sql + "\n```"));
  });
  core::Config config = make_config(server.base_url());
  config.set("context.column_filter.enabled", true);
  config.set("generate.generators", json::parse(R"([{"name": "dc"}, {"name": "qp"}, {"name": "os"},
      {"name": "agent"}, {"name": "recap"}])"));
  config.set("run.selectors", json::parse(R"(["tournament", "ranker", "separating_instances"])"));
  config.set("run.primary_selector", "tournament");
  auto summary = run(options(config, dir_ / "run"));
  ASSERT_TRUE(summary.is_ok()) << summary.status().to_string();
  EXPECT_FALSE(summary->simulated);

  data::DatasetSpec spec;
  spec.data_dir = data_;
  auto ds = data::load_dataset(spec);
  ASSERT_TRUE(ds.is_ok());
  ASSERT_GE(ds->questions.size(), 3u);
  std::lock_guard lock(mu);
  ASSERT_GT(bodies.size(), 10 * ds->questions.size());  // every stage called the server
  std::set<std::string> stages;
  for (const auto& body : bodies) {
    const std::string text = json::parse(body).dump();  // escapes as the body does
    for (const auto& q : ds->questions) {
      const std::string gold = json(q.gold_sql).dump();
      EXPECT_EQ(text.find(gold.substr(1, gold.size() - 2)), std::string::npos)
          << "question " << q.question_id << "'s gold SQL is in a request";
    }
  }
}

}  // namespace
}  // namespace nl2sql::pipeline
