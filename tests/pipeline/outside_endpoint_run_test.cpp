// The issue's first done-when, as a test: the Python example generator (examples/
// outside_generator.py), asking its model through nl2sql's local endpoint, gives the same report
// twice — the second time replayed from the response cache with zero requests reaching the
// model's server — and every call it made is in the records with its question and stage, and in
// report.json's usage. A program's call with a made-up token is refused (401).
#include <gtest/gtest.h>

#include <fstream>

#include "nl2sql/core/config.h"
#include "nl2sql/core/files.h"
#include "nl2sql/data/dataset.h"
#include "nl2sql/pipeline/pipeline.h"
#include "nl2sql/run/run_data.h"
#include "support/fake_openai_server.h"
#include "support/mini_run.h"
#include "support/test_env.h"

namespace nl2sql::pipeline {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using llm::testing::completion_body;
using llm::testing::FakeOpenAiServer;
using llm::testing::FakeReply;

class OutsideEndpointRun : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ds = testing::load_mini_bird(dir_ / "mini");
    ASSERT_TRUE(ds.is_ok()) << ds.status().message();
    data_ = dir_ / "mini";
    ds_ = std::move(*ds);
  }
  // The model: gold for the question its prompt names (so the reports have something to score).
  FakeReply answer(const httplib::Request& req) const {
    auto body = json::parse(req.body);
    const std::string prompt = body["messages"].back()["content"].get<std::string>();
    for (const auto& q : ds_.questions)
      if (prompt.find("Question: " + q.question + "\n") != std::string::npos)
        return FakeReply{200, completion_body("Step by step.\n```sql\n" + q.gold_sql + "\n```")};
    return FakeReply{200, completion_body("```sql\nSELECT 1\n```")};
  }
  core::Config config(const std::string& base_url, const std::string& cache_mode, const fs::path& program) const {
    core::Config c(json::parse(R"({
      "llm": {"models": {"main": {"model": "fake-model", "api_key_env": ""}}, "default_profile": "main",
              "retry": {"max_attempts": 1}},
      "fix": {"enabled": false}, "run": {"curve_points": [1, 2], "selectors": ["self_consistency"]}
    })"));
    c.set("llm.models.main.base_url", base_url);
    c.set("llm.cache.mode", cache_mode);
    c.set("llm.cache.path", (dir_ / "cache.sqlite").string());
    c.set("generate.generators", json::array({{{"name", "command"},
                                               {"label", "py"},
                                               {"samples", 2},
                                               {"temperature", 0.7},
                                               {"workers", 2},
                                               {"argv", {"python3", program.string()}}}}));
    return c;
  }
  testing::TempDir dir_;
  fs::path data_;
  data::Dataset ds_;
};

// What a report says about the run's answers (not when, where or how fast it ran).
json comparable(const json& report) {
  json out;
  for (const char* k : {"ex", "metrics", "outcomes", "errors", "bounds", "curves", "selectors", "generators",
                        "n_questions", "primary_metric"})
    out[k] = report.value(k, json());
  for (auto& [name, sel] : out["selectors"].items()) sel.erase("latency_p50_s");
  return out;
}

TEST_F(OutsideEndpointRun, ThePythonExampleGivesTheSameReportReplayedWithNoRequest) {
  FakeOpenAiServer server([this](const httplib::Request& req, int64_t) { return answer(req); });
  const fs::path program = fs::path(NL2SQL_SOURCE_DIR) / "examples" / "outside_generator.py";
  ASSERT_TRUE(fs::exists(program)) << program;
  const fs::path first = dir_ / "recorded";
  auto a = testing::run_and_report(testing::mini_run_options(config(server.base_url(), "read-write", program),
                                                             data_, first, dir_ / "index"));
  ASSERT_TRUE(a.is_ok()) << a.status().message();
  EXPECT_EQ(a->failed, 0u);
  const int64_t sent = server.requests();
  const int64_t n = static_cast<int64_t>(ds_.questions.size());
  EXPECT_GE(sent, 2 * n);  // two samples per question (and the preflight)
  auto data = run::load_run(first);
  ASSERT_TRUE(data.is_ok()) << data.status().message();
  for (const auto& r : data->records) {
    ASSERT_EQ(r.candidates.size(), 2u) << r.question_id;
    const auto& calls = r.candidates[0].calls;
    ASSERT_EQ(calls.size(), 2u) << r.question_id;
    for (const auto& c : calls) {
      EXPECT_EQ(c.stage, "generate");
      EXPECT_EQ(c.template_name, "outside:py");
      EXPECT_NE(c.prompt.find(r.question), std::string::npos);
    }
    EXPECT_TRUE(r.correct(run::primary_metric(data->manifest))) << r.question_id;
  }
  auto rep1 = core::read_json_file(first / "report.json");
  ASSERT_TRUE(rep1.is_ok());
  EXPECT_EQ((*rep1)["usage"]["stages"]["generate"]["calls"].get<double>(), static_cast<double>(2 * n));

  // Replayed: same report, nothing reaches the server.
  const fs::path second = dir_ / "replayed";
  auto b = testing::run_and_report(testing::mini_run_options(config(server.base_url(), "replay", program), data_,
                                                             second, dir_ / "index"));
  ASSERT_TRUE(b.is_ok()) << b.status().message();
  EXPECT_EQ(b->failed, 0u);
  EXPECT_EQ(server.requests(), sent);
  auto rep2 = core::read_json_file(second / "report.json");
  ASSERT_TRUE(rep2.is_ok());
  EXPECT_EQ(comparable(*rep1), comparable(*rep2));
  EXPECT_EQ((*rep2)["usage"]["stages"]["generate"]["cache_hits"].get<double>(), static_cast<double>(2 * n));
  auto replayed = run::load_run(second);
  ASSERT_TRUE(replayed.is_ok());
  for (size_t i = 0; i < replayed->records.size(); ++i) {
    EXPECT_EQ(replayed->records[i].prediction, data->records[i].prediction);
    EXPECT_EQ(replayed->records[i].candidates[0].sql, data->records[i].candidates[0].sql);
  }
}

TEST_F(OutsideEndpointRun, AReplayMissOfTheProgramStopsTheRunAsOtherMissesDo) {
  FakeOpenAiServer server([this](const httplib::Request& req, int64_t) { return answer(req); });
  const fs::path program = fs::path(NL2SQL_SOURCE_DIR) / "examples" / "outside_generator.py";
  auto a = run(testing::mini_run_options(config(server.base_url(), "read-write", program), data_, dir_ / "rec",
                                         dir_ / "index"));
  ASSERT_TRUE(a.is_ok()) << a.status().message();
  const int64_t sent = server.requests();
  // A third sample was never recorded: the program's call misses, and the run stops (exit 4).
  core::Config more = config(server.base_url(), "replay", program);
  more.set("generate.generators", json::array({{{"name", "command"}, {"label", "py"}, {"samples", 3},
                                                {"temperature", 0.7}, {"argv", {"python3", program.string()}}}}));
  auto b = run(testing::mini_run_options(more, data_, dir_ / "miss", dir_ / "index"));
  ASSERT_TRUE(b.is_ok()) << b.status().message();
  EXPECT_NE(b->fatal_error.find("replay"), std::string::npos) << b->fatal_error;
  EXPECT_EQ(server.requests(), sent);
}

// A program that tries a made-up token, then the request's own and the environment's.
constexpr const char* kTokens = R"PY(
import json, os, sys, urllib.request, urllib.error
def status(url, key):
    req = urllib.request.Request(url + "/models", headers={"Authorization": "Bearer " + key})
    try:
        with urllib.request.urlopen(req) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
for line in sys.stdin:
    req = json.loads(line)
    seen = [status(req["base_url"], "made-up"), status(req["base_url"], req["api_key"]),
            status(os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"])]
    leaked = [k for k in os.environ if os.environ[k] == "sk-real-secret-123"]
    print(json.dumps({"question_id": req["question_id"],
                      "candidates": [{"sql": "SELECT 1", "reasoning": json.dumps([seen, leaked, os.environ["OPENAI_MODEL"]])}]}),
          flush=True)
)PY";

TEST_F(OutsideEndpointRun, TokensOfAnotherQuestionOrMadeUpAreRefusedAndNoRealKeyIsSeen) {
  FakeOpenAiServer server([this](const httplib::Request& req, int64_t) { return answer(req); });
  ::setenv("NL2SQL_OUTSIDE_TEST_KEY", "sk-real-secret-123", 1);
  const fs::path program = dir_ / "tokens.py";
  std::ofstream(program) << kTokens;
  core::Config c = config(server.base_url(), "off", program);
  c.set("llm.models.main.api_key_env", "NL2SQL_OUTSIDE_TEST_KEY");
  const fs::path out = dir_ / "tokens";
  auto r = run(testing::mini_run_options(c, data_, out, dir_ / "index"));
  ::unsetenv("NL2SQL_OUTSIDE_TEST_KEY");
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  auto data = run::load_run(out);
  ASSERT_TRUE(data.is_ok());
  for (const auto& rec : data->records) {
    ASSERT_FALSE(rec.candidates.empty());
    json seen = json::parse(rec.candidates[0].reasoning);
    EXPECT_EQ(seen[0], json::array({401, 200, 200})) << rec.question_id;
    EXPECT_EQ(seen[1], json::array()) << rec.question_id;
    EXPECT_EQ(seen[2], "main");
  }
}

}  // namespace
}  // namespace nl2sql::pipeline
