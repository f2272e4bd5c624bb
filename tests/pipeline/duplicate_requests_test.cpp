// No identical request twice (issue 21, item 3), checked from the server's side: a logging
// endpoint keeps every request body it received, and report.json's duplicate_requests equals the
// number of bodies it saw again byte for byte; the os generator's per-database example prompts
// are sent once per run (a per-run memo); `nl2sql show-question` lists a question's recorded
// calls with the prompts the server received, in order (issue 21, item 7).
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <map>
#include <sstream>
#include <mutex>
#include <set>
#include <vector>

#include "nl2sql/core/config.h"
#include "nl2sql/pipeline/pipeline.h"
#include "support/fake_openai_server.h"
#include "support/mini_run.h"
#include "support/test_env.h"

namespace nl2sql::pipeline {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using llm::testing::FakeOpenAiServer;
using llm::testing::FakeReply;

// Keeps every body in arrival order and answers by what the prompt asks for.
struct LoggingEndpoint {
  std::mutex mu;
  std::vector<std::string> bodies;  // guarded by mu
  // Answers to generation prompts: SQL that runs on regional_schools unless `broken` is in the
  // prompt's sample (set by the test through the answer function).
  std::function<std::string(const std::string& user_prompt, const json& body)> answer;
  FakeOpenAiServer server{[this](const httplib::Request& req, int64_t) {
    std::string user;
    {
      std::lock_guard lock(mu);
      bodies.push_back(req.body);
    }
    auto j = json::parse(req.body, nullptr, false);
    if (j.is_object())
      for (const auto& m : j.value("messages", json::array()))
        if (m.value("role", "") == "user") user = m.value("content", "");
    return FakeReply(200, llm::testing::completion_body(answer(user, j), "stop", 40, 8));
  }};

  // Requests whose body the server had already received, byte for byte.
  int64_t repeats() {
    std::lock_guard lock(mu);
    std::set<std::string> seen;
    int64_t n = 0;
    for (const auto& b : bodies) n += seen.insert(b).second ? 0 : 1;
    return n;
  }
  std::vector<std::string> user_prompts() {
    std::lock_guard lock(mu);
    std::vector<std::string> out;
    for (const auto& b : bodies) {
      auto j = json::parse(b);
      for (const auto& m : j.at("messages"))
        if (m.at("role") == "user") out.push_back(m.at("content").get<std::string>());
    }
    return out;
  }
};

std::string slurp(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string sql_answer(const std::string& sql) { return "```sql\n" + sql + "\n```"; }

core::Config config_for(const std::string& base_url, const std::string& generators_json) {
  core::Config config(json::parse(R"({
    "llm": {"models": {"fake": {"base_url": "", "model": "fake-coder", "api_key_env": "", "temperature": 0}},
            "default_profile": "fake", "preflight": false,
            "retry": {"max_attempts": 1, "base_delay_s": 0.01, "max_delay_s": 0.01},
            "cache": {"mode": "off"}},
    "context": {"keywords": {"llm": false}, "retrieval": {"max_values": 0}},
    "fix": {"enabled": true, "max_rounds": 1},
    "select": {"method": "self_consistency"},
    "run": {"selectors": ["self_consistency"], "threads": 1}
  })"));
  config.set("llm.models.fake.base_url", base_url);
  config.set("generate.generators", json::parse(generators_json));
  return config;
}

json run_usage(const core::Config& config, const testing::TempDir& dir, const fs::path& data,
               const std::string& ranges, const std::string& name) {
  RunOptions o = testing::mini_run_options(config, data, dir.path() / name, dir.path() / "index");
  o.filter.ranges = ranges;
  auto summary = testing::run_and_report(o);
  EXPECT_TRUE(summary.is_ok()) << summary.status().message();
  return testing::read_json_file(dir.path() / name / "report.json").at("usage");
}

TEST(DuplicateRequests, ReportCountsExactlyTheRepeatsTheServerReceived) {
  testing::TempDir dir;
  const fs::path data = testing::build_mini_bird(dir.path() / "mini");
  {
    // Three samples of one prompt at the profile's temperature 0 and no seed: the bodies are
    // byte-identical, so each question sends its prompt 3 times, 2 of them repeats.
    LoggingEndpoint endpoint;
    endpoint.answer = [](const std::string&, const json&) { return sql_answer("SELECT count(*) FROM school"); };
    const json usage = run_usage(config_for(endpoint.server.base_url(), R"([{"name": "baseline", "samples": 3}])"),
                                 dir, data, "0-2", "repeats");
    ASSERT_EQ(endpoint.server.requests(), 9);  // 3 questions x 3 samples, nothing to fix
    EXPECT_EQ(endpoint.repeats(), 6);
    EXPECT_EQ(usage.at("total").at("duplicate_requests").get<int64_t>(), 6);
    EXPECT_EQ(usage.at("stages").at("generate").at("duplicate_requests").get<int64_t>(), 6);
    const std::string md = slurp(dir.path() / "repeats" / "report.md");
    EXPECT_NE(md.find("**Warning:** 6 request(s) repeated a request body"), std::string::npos);
  }
  {
    // One sample per question: every body differs (the questions differ).
    LoggingEndpoint endpoint;
    endpoint.answer = [](const std::string&, const json&) { return sql_answer("SELECT count(*) FROM school"); };
    const json usage = run_usage(config_for(endpoint.server.base_url(), R"([{"name": "baseline", "samples": 1}])"),
                                 dir, data, "0-2", "single");
    ASSERT_EQ(endpoint.server.requests(), 3);
    EXPECT_EQ(endpoint.repeats(), 0);
    EXPECT_EQ(usage.at("total").at("duplicate_requests").get<int64_t>(), 0);
    const std::string md = slurp(dir.path() / "single" / "report.md");
    EXPECT_EQ(md.find("**Warning:**"), std::string::npos);
  }
}

TEST(OsExamplesMemo, TwoQuestionsOnOneDatabaseMakeOneExampleCall) {
  testing::TempDir dir;
  const fs::path data = testing::build_mini_bird(dir.path() / "mini");
  LoggingEndpoint endpoint;
  std::atomic<int> example_calls{0};
  endpoint.answer = [&](const std::string& prompt, const json&) {
    if (prompt.find("You write practice examples") != std::string::npos) {
      ++example_calls;
      return std::string("Question: How many schools are there?\nSQL: SELECT count(*) FROM school\n");
    }
    return sql_answer("SELECT count(*) FROM school");
  };
  // Two threads: the second question may ask while the first one's example call is in flight.
  core::Config config = config_for(
      endpoint.server.base_url(),
      R"([{"name": "os", "samples": 1, "general_examples": 2, "filtered_examples": 0}])");
  config.set("run.threads", 2);
  const json usage = run_usage(config, dir, data, "0-1", "os");  // both on regional_schools
  EXPECT_EQ(example_calls.load(), 1);
  EXPECT_EQ(endpoint.server.requests(), 3);  // one example call, one generation per question
  EXPECT_EQ(endpoint.repeats(), 0);
  EXPECT_EQ(usage.at("total").at("duplicate_requests").get<int64_t>(), 0);
  // Accounting counts the one call the server answered.
  EXPECT_EQ(usage.at("total").at("calls").get<double>(), 3.0);
  EXPECT_EQ(usage.at("total").at("prompt_tokens").get<double>(), 3.0 * 40);
  // The other question's record keeps the shared answer, marked as not sent by it.
  const json report = testing::read_json_file(dir.path() / "os" / "report.json");
  int shared = 0, sent = 0;
  for (const auto& q : report.at("questions"))
    for (const auto& c : q.at("candidates"))
      for (const auto& call : c.at("calls"))
        if (call.at("stage") == "os_examples_general") {
          if (call.value("shared_from", std::string()).empty()) ++sent;
          else ++shared;
        }
  EXPECT_EQ(sent, 1);
  EXPECT_EQ(shared, 1);
}

TEST(ShowQuestion, ListsEveryRecordedCallOfTheQuestionWithThePromptsTheServerReceived) {
  testing::TempDir dir;
  const fs::path data = testing::build_mini_bird(dir.path() / "mini");
  LoggingEndpoint endpoint;
  // Sample 1 of question 0 (the request with seed 1: the samples go out together, so not the
  // third to arrive) answers a query that does not run: the fixer asks once more.
  endpoint.answer = [](const std::string& prompt, const json& body) {
    if (prompt.find("Extract") != std::string::npos || prompt.find("keyword") != std::string::npos)
      return std::string("```json\n[\"schools\"]\n```");
    if (body.value("seed", int64_t{0}) == 1 && prompt.find("The query that was tried:") == std::string::npos)
      return sql_answer("SELECT nope FROM school");
    return sql_answer("SELECT count(*) FROM school");
  };
  core::Config config = config_for(endpoint.server.base_url(), R"([{"name": "baseline", "samples": 2, "temperature": 0.7}])");
  config.set("context.keywords.llm", true);
  (void)run_usage(config, dir, data, "0", "show");
  const std::vector<std::string> sent = endpoint.user_prompts();
  ASSERT_EQ(sent.size(), 4u);  // keywords, baseline#0, baseline#1, its fix

  const fs::path run = dir.path() / "show";
  const std::string qid = testing::read_json_file(run / "report.json").at("questions").at(0).at("question_id").get<std::string>();
  auto r = testing::run_nl2sql("show-question '" + run.string() + "' '" + qid + "' --format json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json shown = json::parse(r.out);
  ASSERT_EQ(shown.at("calls").size(), 4u);
  const char* stages[] = {"context", "generate", "generate", "fix"};
  const char* owners[] = {"", "baseline#0", "baseline#1", "baseline#1"};
  for (size_t i = 0; i < 4; ++i) {
    const json& c = shown.at("calls").at(i);
    EXPECT_EQ(c.at("n").get<size_t>(), i + 1);
    EXPECT_EQ(c.at("pipeline_stage"), stages[i]) << i;
    EXPECT_EQ(c.at("owner"), owners[i]) << i;
    EXPECT_EQ(c.at("prompt").get<std::string>(), sent[i]) << i;  // what the server received
    EXPECT_EQ(c.at("origin"), "sent");
    EXPECT_EQ(c.at("model"), "fake-coder");
    EXPECT_EQ(c.at("prompt_tokens").get<int64_t>(), 40);
    EXPECT_FALSE(c.at("request_hash").get<std::string>().empty());
  }
  EXPECT_DOUBLE_EQ(shown.at("calls").at(1).at("temperature").get<double>(), 0.7);
  EXPECT_DOUBLE_EQ(shown.at("calls").at(0).at("temperature").get<double>(), 0.0);  // the profile's
  EXPECT_NE(shown.at("calls").at(2).at("response").get<std::string>().find("SELECT nope"), std::string::npos);

  // --stage keeps one stage; the text view groups by stage and owner and shows the prompt.
  auto fix_only = testing::run_nl2sql("show-question '" + run.string() + "' '" + qid + "' --stage fix --format json");
  ASSERT_EQ(fix_only.exit_code, 0) << fix_only.err;
  const json f = json::parse(fix_only.out);
  ASSERT_EQ(f.at("calls").size(), 1u);
  EXPECT_EQ(f.at("calls").at(0).at("prompt").get<std::string>(), sent[3]);
  auto text = testing::run_nl2sql("show-question '" + run.string() + "' '" + qid + "'");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("model calls recorded: 4 (4 sent)"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("== generate: baseline#1 =="), std::string::npos);
  EXPECT_NE(text.out.find("== fix: baseline#1 =="), std::string::npos);
  EXPECT_NE(text.out.find(sent[1].substr(0, 200)), std::string::npos);

  // An unknown question is a clear error.
  auto missing = testing::run_nl2sql("show-question '" + run.string() + "' no-such-question");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("no finished question \"no-such-question\""), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace nl2sql::pipeline
