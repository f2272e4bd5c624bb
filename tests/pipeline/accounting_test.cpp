// Accounting that matches the server (issue 21, item 4): with the curves' selector re-runs on,
// every request a logging endpoint answers is counted once in report.json, in the stage that
// made it, with the server's tokens and the profile's prices, and the run's own total (the CLI
// line) agrees; answers served from the response cache are not calls: they are counted apart
// with the money they saved.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <fstream>
#include <sstream>

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

// Counts what it answered: requests and the tokens its usage blocks reported.
struct LoggingEndpoint {
  std::atomic<int64_t> prompt_tokens{0}, completion_tokens{0};
  FakeOpenAiServer server{[this](const httplib::Request& req, int64_t seq) {
    const int in = static_cast<int>(req.body.size() % 997) + 50, out = static_cast<int>(seq % 7) + 3;
    prompt_tokens += in;
    completion_tokens += out;
    const std::string sql = seq % 3 == 0 ? "SELECT count(*) FROM school" : seq % 3 == 1 ? "SELECT name FROM district"
                                                                                          : "SELECT name FROM school";
    return FakeReply(200, llm::testing::completion_body(
                              "Answer: A\n```json\n[\"school\"]\n```\n```sql\n" + sql + "\n```", "stop", in, out));
  }};
};

core::Config config_for(const std::string& base_url, const std::string& cache_mode, const fs::path& cache) {
  core::Config config(json::parse(R"({
    "llm": {"models": {"fake": {"base_url": "", "model": "fake-coder", "api_key_env": "",
                                "price_in_per_mtok": 3.0, "price_out_per_mtok": 15.0}},
            "default_profile": "fake", "preflight": false,
            "retry": {"max_attempts": 1, "base_delay_s": 0.01, "max_delay_s": 0.01}},
    "context": {"keywords": {"llm": true}},
    "generate": {"generators": [{"name": "baseline", "samples": 2}, {"name": "dc", "samples": 2}]},
    "fix": {"enabled": true, "max_rounds": 1},
    "select": {"method": "tournament"},
    "run": {"selectors": ["tournament", "self_consistency"], "threads": 3, "curve_selector": true,
            "curve_points": [1, 2, 3, 4]}
  })"));
  config.set("llm.models.fake.base_url", base_url);
  config.set("llm.cache.mode", cache_mode);
  config.set("llm.cache.path", cache.string());
  return config;
}

TEST(Accounting, ReportCountsEveryRequestTheServerAnsweredAndCacheHitsApart) {
  testing::TempDir dir;
  const fs::path data = testing::build_mini_bird(dir.path() / "mini");
  LoggingEndpoint endpoint;
  const fs::path cache = dir.path() / "cache.sqlite";

  // With the preflight on: its one request per profile belongs to no question, and is counted too.
  core::Config with_preflight = config_for(endpoint.server.base_url(), "read-write", cache);
  with_preflight.set("llm.preflight", true);
  RunOptions o = testing::mini_run_options(with_preflight, data, dir.path() / "run", dir.path() / "index");
  o.filter.ranges = "0-5";
  auto summary = testing::run_and_report(o);
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  const json usage = testing::read_json_file(dir.path() / "run" / "report.json").at("usage");
  const json& total = usage.at("total");
  ASSERT_GT(endpoint.server.requests(), 0);
  EXPECT_EQ(total.at("calls").get<double>(), static_cast<double>(endpoint.server.requests()));
  EXPECT_EQ(total.at("prompt_tokens").get<double>(), static_cast<double>(endpoint.prompt_tokens.load()));
  EXPECT_EQ(total.at("completion_tokens").get<double>(), static_cast<double>(endpoint.completion_tokens.load()));
  const double server_cost = (static_cast<double>(endpoint.prompt_tokens.load()) * 3.0 +
                              static_cast<double>(endpoint.completion_tokens.load()) * 15.0) / 1e6;
  EXPECT_NEAR(total.at("cost_usd").get<double>(), server_cost, 1e-9);
  EXPECT_NEAR(summary->cost_usd, server_cost, 1e-9);  // the CLI line's figure
  // The curves' re-runs of the tournament are a stage of their own; their pairs were all asked by
  // the pool's tournament, whose verdicts they reuse, so they send no request.
  ASSERT_TRUE(usage.at("stages").contains("preflight"));
  EXPECT_EQ(usage.at("stages").at("preflight").at("calls").get<double>(), 1);
  ASSERT_TRUE(usage.at("stages").contains("curves"));
  EXPECT_EQ(usage.at("stages").at("curves").at("calls").get<double>(), 0);
  // The curves' re-runs repeat some of the tournament's requests: those were answered from the
  // response cache, with no request, and are counted apart.
  const double hits = total.value("cache_hits", 0.0), saved = total.value("saved_usd", 0.0);

  // The same questions again in a new folder: every answer comes from the cache.
  const int64_t requests_before = endpoint.server.requests();
  RunOptions again = testing::mini_run_options(config_for(endpoint.server.base_url(), "read-write", cache), data,
                                               dir.path() / "again", dir.path() / "index");
  again.filter.ranges = o.filter.ranges;
  auto cached = testing::run_and_report(again);
  ASSERT_TRUE(cached.is_ok()) << cached.status().message();
  EXPECT_EQ(endpoint.server.requests(), requests_before);
  const json t2 = testing::read_json_file(dir.path() / "again" / "report.json").at("usage").at("total");
  EXPECT_EQ(t2.at("calls").get<double>(), 0);
  EXPECT_EQ(t2.at("cost_usd").get<double>(), 0);
  // Every request of the first run but its preflight (which is never cached) is now a hit.
  const json& preflight = usage.at("stages").at("preflight");
  EXPECT_EQ(t2.at("cache_hits").get<double>(), static_cast<double>(requests_before) - 1 + hits);
  EXPECT_NEAR(t2.at("saved_usd").get<double>(), server_cost - preflight.at("cost_usd").get<double>() + saved, 1e-9);
  EXPECT_EQ(t2.at("cache_prompt_tokens").get<double>(),
            static_cast<double>(endpoint.prompt_tokens.load()) - preflight.at("prompt_tokens").get<double>() +
                total.value("cache_prompt_tokens", 0.0));
  EXPECT_EQ(cached->cost_usd, 0);
}

// A server that cuts some answers at their budget (asked again with twice the budget: both
// attempts are processed) and dies after `dies_after` requests (connections reset: nothing
// processed); it counts the tokens of every answer it gave.
struct DyingEndpoint {
  std::atomic<int64_t> prompt_tokens{0}, completion_tokens{0};
  std::atomic<int64_t> dies_after{1 << 30};
  FakeOpenAiServer server{[this](const httplib::Request& req, int64_t seq) {
    if (seq >= dies_after.load()) return FakeReply(200, "");  // reset by the fault plan: not processed
    const int in = static_cast<int>(req.body.size() % 997) + 50, out = static_cast<int>(seq % 7) + 3;
    prompt_tokens += in;
    completion_tokens += out;
    if (seq % 11 == 5)
      return FakeReply(200, llm::testing::completion_body("Let me think about the school table", "length", in, out));
    const std::string sql = seq % 3 == 0 ? "SELECT count(*) FROM school" : "SELECT name FROM district";
    return FakeReply(200, llm::testing::completion_body(
                              "Answer: A\n```json\n[\"school\"]\n```\n```sql\n" + sql + "\n```", "stop", in, out));
  }};
};

// Every token the server processed is in the report: cut answers asked again, questions a stop
// interrupted (their stored stages included), and, after the resume, both invocations together.
TEST(Accounting, AStoppedRunAndItsResumeReportEveryTokenTheServerProcessed) {
  testing::TempDir dir;
  const fs::path data = testing::build_mini_bird(dir.path() / "mini");
  DyingEndpoint endpoint;
  endpoint.dies_after = 70;
  llm::testing::FaultPlan dead;
  for (int64_t seq = 70; seq < 70 + 100000; ++seq) dead.at_call[seq] = llm::testing::Fault::kReset;
  endpoint.server.set_faults(dead);
  core::Config config = config_for(endpoint.server.base_url(), "read-write", dir.path() / "cache.sqlite");
  config.set("llm.retry.max_attempts", 2);
  config.set("llm.endpoint_down_wait_s", 0.3);
  RunOptions o = testing::mini_run_options(config, data, dir.path() / "run", dir.path() / "index");
  auto totals = [&] {
    return testing::read_json_file(dir.path() / "run" / "report.json").at("usage").at("total");
  };
  auto stopped = testing::run_and_report(o);
  ASSERT_TRUE(stopped.is_ok()) << stopped.status().message();
  ASSERT_FALSE(stopped->fatal_error.empty()) << "the endpoint never died: the test checks nothing";
  EXPECT_GT(stopped->interrupted + stopped->not_started, 0u);
  // Answers still on their way when the run stopped are abandoned unread: the server counted
  // them, the client cannot (a slow machine leaves a few). Everything read is counted.
  auto near_server = [&](const json& t) {
    for (const auto& [key, server] : {std::pair<const char*, int64_t>{"prompt_tokens", endpoint.prompt_tokens.load()},
                                      {"completion_tokens", endpoint.completion_tokens.load()}}) {
      EXPECT_LE(t.at(key).get<double>(), static_cast<double>(server)) << key;
      EXPECT_GE(t.at(key).get<double>(), 0.97 * static_cast<double>(server)) << key;
    }
  };
  json t = totals();
  near_server(t);

  endpoint.dies_after = 1 << 30;
  endpoint.server.set_faults(llm::testing::FaultPlan{});
  auto resumed = testing::run_and_report(o);
  ASSERT_TRUE(resumed.is_ok()) << resumed.status().message();
  EXPECT_TRUE(resumed->fatal_error.empty()) << resumed->fatal_error;
  EXPECT_EQ(resumed->failed, 0u);
  t = totals();
  near_server(t);
  const double cost = (t.at("prompt_tokens").get<double>() * 3.0 + t.at("completion_tokens").get<double>() * 15.0) / 1e6;
  EXPECT_NEAR(t.at("cost_usd").get<double>(), cost, 1e-9);
}

// A stop that cancels one sample of a generator while its other sample was answered: the
// generator returns the cancellation, not the answered sample, yet the answer's tokens were
// processed by the server and read by the client — the interrupted question's usage keeps them.
TEST(Accounting, AnAnswerWhoseSiblingCallAStopCancelledIsCounted) {
  testing::TempDir dir;
  const fs::path data = testing::build_mini_bird(dir.path() / "mini");
  std::atomic<int64_t> prompt_tokens{0}, completion_tokens{0};
  std::mutex mu;
  std::condition_variable cv;
  bool released = false;
  FakeOpenAiServer server([&](const httplib::Request& req, int64_t seq) {
    if (seq > 0) {  // held until the test has stopped the run, then reset: never processed
      std::unique_lock lock(mu);
      cv.wait_for(lock, std::chrono::seconds(20), [&] { return released; });
      return FakeReply(200, "");
    }
    const int in = static_cast<int>(req.body.size() % 997) + 50, out = 7;
    prompt_tokens += in;
    completion_tokens += out;
    return FakeReply(200, llm::testing::completion_body("```sql\nSELECT name FROM school\n```", "stop", in, out));
  });
  llm::testing::FaultPlan reset_after_first;
  for (int64_t seq = 1; seq < 100; ++seq) reset_after_first.at_call[seq] = llm::testing::Fault::kReset;
  server.set_faults(reset_after_first);
  core::Config config = config_for(server.base_url(), "read-write", dir.path() / "cache.sqlite");
  config.set("context.keywords.llm", false);
  config.set("generate.generators", json::parse(R"([{"name": "baseline", "samples": 2}])"));
  config.set("fix.enabled", false);
  config.set("run.threads", 1);
  config.set("llm.retry.max_attempts", 3);  // the held request's retry meets the stop: cancelled
  std::atomic<bool> cancel{false};
  RunOptions o = testing::mini_run_options(config, data, dir.path() / "run", dir.path() / "index");
  o.filter.ranges = "0-0";
  o.cancel = &cancel;
  std::thread stopper([&] {
    // Both samples are on the wire and the first is answered: give the client a moment to read
    // it, then stop the run, then let the held request fail.
    for (int i = 0; i < 2000 && (server.requests() < 2 || completion_tokens.load() == 0); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    cancel = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    {
      std::lock_guard lock(mu);
      released = true;
    }
    cv.notify_all();
  });
  auto stopped = testing::run_and_report(o);
  stopper.join();
  ASSERT_TRUE(stopped.is_ok()) << stopped.status().message();
  ASSERT_EQ(server.requests(), 2) << "the generator's two samples, and nothing after the stop";
  ASSERT_GT(completion_tokens.load(), 0);
  EXPECT_EQ(stopped->interrupted, 1u);
  const json t = testing::read_json_file(dir.path() / "run" / "report.json").at("usage").at("total");
  EXPECT_EQ(t.at("calls").get<double>(), 2);  // the answered call and the cancelled one
  EXPECT_EQ(t.at("prompt_tokens").get<double>(), static_cast<double>(prompt_tokens.load()));
  EXPECT_EQ(t.at("completion_tokens").get<double>(), static_cast<double>(completion_tokens.load()));
  EXPECT_NEAR(t.at("cost_usd").get<double>(),
              (static_cast<double>(prompt_tokens.load()) * 3.0 + static_cast<double>(completion_tokens.load()) * 15.0) / 1e6,
              1e-9);
}

}  // namespace
}  // namespace nl2sql::pipeline
