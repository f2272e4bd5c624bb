// The whole pipeline against servers that answer like real reasoning models, and against
// misconfigured ones: every answer shape gives the EX of plain fenced answers (the draft in the
// reasoning is never taken), a failed preflight or a repeated refusal stops the run in a few
// requests with the server's words, questions whose every model call failed are failed (and
// retried by a rerun), and a secret header value reaches no file.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <sstream>

#include "support/fake_openai_server.h"
#include "nl2sql/core/config.h"
#include "nl2sql/data/dataset.h"
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

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// How a server wraps the final SQL (and a wrong draft before it).
enum class Shape {
  kPlainFence,
  kLoneCloseThink,      // R1/QwQ template: "<think>" was in the prompt, only "</think>" comes back
  kThinkBlock,          // <think>…</think> in the content
  kReasoningField,      // vLLM/DeepSeek reasoning_content beside content
  kReasoningOnly,       // content null, everything in reasoning (tail holds the answer)
  kContentParts,        // content as an array of text parts
  kHarmony,             // gpt-oss channels in the text
  kDraftThenFinalFence, // a draft fence, then "Final SQL:" and the final fence
  kSemicolonAndProse,   // the final query followed by ';' and an explanation inside the fence
  kFinalAnswerTag,      // <FINAL_ANSWER>…</FINAL_ANSWER>
};

const std::vector<std::pair<Shape, const char*>> kShapes = {
    {Shape::kPlainFence, "plain fence"},
    {Shape::kLoneCloseThink, "lone </think>"},
    {Shape::kThinkBlock, "<think> block"},
    {Shape::kReasoningField, "reasoning_content field"},
    {Shape::kReasoningOnly, "reasoning only, null content"},
    {Shape::kContentParts, "content parts"},
    {Shape::kHarmony, "harmony channels"},
    {Shape::kDraftThenFinalFence, "draft fence then final"},
    {Shape::kSemicolonAndProse, "semicolon and prose"},
    {Shape::kFinalAnswerTag, "FINAL_ANSWER tag"},
};

constexpr const char* kDraft = "SELECT 'draft' FROM sqlite_master";

json answer_body(Shape shape, const std::string& sql) {
  json message = {{"role", "assistant"}};
  const std::string fence = "```sql\n" + sql + "\n```";
  const std::string draft = "```sql\n" + std::string(kDraft) + "\n```";
  switch (shape) {
    case Shape::kPlainFence: message["content"] = "Reasoning.\n" + fence; break;
    case Shape::kLoneCloseThink:
      message["content"] = "Okay, first try:\n" + draft + "\nHmm, wrong table.\n</think>\n\n" + fence; break;
    case Shape::kThinkBlock:
      message["content"] = "<think>\nMaybe " + draft + "\n</think>\nThe query:\n" + fence; break;
    case Shape::kReasoningField:
      message["reasoning_content"] = "Draft:\n" + draft + "\nNo.";
      message["content"] = "\n\n" + fence;
      break;
    case Shape::kReasoningOnly:
      message["content"] = nullptr;
      message["reasoning_content"] = "First " + draft + " was wrong. Final SQL:\n" + fence;
      break;
    case Shape::kContentParts:
      message["content"] = json::array({{{"type", "text"}, {"text", "Here it is.\n```sql\n"}},
                                        {{"type", "text"}, {"text", sql + "\n```"}}});
      break;
    case Shape::kHarmony:
      message["content"] = "<|channel|>analysis<|message|>Try " + draft + "<|end|><|start|>assistant" +
                           "<|channel|>final<|message|>" + fence + "<|return|>";
      break;
    case Shape::kDraftThenFinalFence:
      message["content"] = "Draft:\n" + draft + "\nThat misses a filter.\n\nFinal SQL:\n" + fence; break;
    case Shape::kSemicolonAndProse:
      message["content"] = "```sql\n" + sql + ";\n-- This query counts the rows.\nNote: it uses an index.\n```"; break;
    case Shape::kFinalAnswerTag:
      message["content"] = "Thinking: " + draft + " is not it.\n<FINAL_ANSWER>\n" + sql + "\n</FINAL_ANSWER>"; break;
  }
  return {{"id", "chatcmpl-x"},
          {"object", "chat.completion"},
          {"choices", {{{"index", 0}, {"message", message}, {"finish_reason", "stop"}}}},
          {"usage", {{"prompt_tokens", 100}, {"completion_tokens", 50}}}};
}

// Characters / 4 of the messages, as both the client and this server estimate tokens.
int64_t prompt_tokens_of(const std::string& body) {
  json j = json::parse(body);
  size_t chars = 0;
  for (const auto& m : j["messages"]) chars += m["content"].get<std::string>().size() + 8;
  return static_cast<int64_t>((chars + 3) / 4);
}

class EndpointRun : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = testing::build_mini_bird(dir_ / "mini");
    data::DatasetSpec spec;
    spec.benchmark = data::Benchmark::kBird;
    spec.data_dir = data_;
    auto ds = data::load_dataset(spec);
    ASSERT_TRUE(ds.is_ok()) << ds.status().message();
    for (const auto& q : ds->questions) gold_.emplace_back(q.question, q.gold_sql);
    // Longest question first, so a question that is a prefix of another never wins.
    std::sort(gold_.begin(), gold_.end(), [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  }
  // The gold SQL of the question the prompt is about.
  std::string gold_for(const std::string& body) const {
    json j = json::parse(body);
    std::string prompt;
    for (const auto& m : j["messages"]) prompt += m["content"].get<std::string>();
    for (const auto& [question, sql] : gold_)
      if (prompt.find(question) != std::string::npos) return sql;
    return "SELECT 0";
  }
  core::Config config(const std::string& base_url, bool preflight = true) {
    core::Config c(json::parse(R"({
      "llm": {"models": {"srv": {"base_url": "", "model": "reasoner", "api_key_env": ""}},
              "default_profile": "srv", "cache": {"mode": "off"},
              "retry": {"max_attempts": 2, "base_delay_s": 0.01, "max_delay_s": 0.01}},
      "generate": {"generators": [{"name": "baseline", "samples": 1}]},
      "fix": {"enabled": false},
      "select": {"method": "self_consistency"},
      "run": {"threads": 4, "curve_points": [1]}
    })"));
    c.set("llm.models.srv.base_url", base_url);
    c.set("llm.preflight", preflight);
    return c;
  }
  // The largest prompt of a plain run (no budget), in estimated tokens; 0 when the run failed.
  int64_t largest_prompt_tokens() {
    int64_t largest = 0;
    std::mutex mu;
    FakeOpenAiServer probe([&](const httplib::Request& req, int64_t) {
      std::lock_guard lock(mu);
      largest = std::max(largest, prompt_tokens_of(req.body));
      return FakeReply(200, answer_body(Shape::kPlainFence, gold_for(req.body)).dump());
    });
    auto plain = testing::run_and_report(options(config(probe.base_url()), dir_ / "probe"));
    return plain.is_ok() ? largest : 0;
  }
  RunOptions options(const core::Config& c, const fs::path& out) {
    return testing::mini_run_options(c, data_, out, dir_ / "index");
  }
  testing::TempDir dir_;
  fs::path data_;
  std::vector<std::pair<std::string, std::string>> gold_;
};

TEST_F(EndpointRun, EveryReasoningShapeScoresLikePlainFencedAnswers) {
  std::optional<size_t> plain_correct;
  for (const auto& [shape, name] : kShapes) {
    FakeOpenAiServer server([&, shape = shape](const httplib::Request& req, int64_t) {
      return FakeReply(200, answer_body(shape, gold_for(req.body)).dump());
    });
    fs::path out = dir_ / ("run_" + std::to_string(static_cast<int>(shape)));
    auto summary = testing::run_and_report(options(config(server.base_url()), out));
    ASSERT_TRUE(summary.is_ok()) << name << ": " << summary.status().message();
    EXPECT_EQ(summary->failed, 0u) << name;
    EXPECT_EQ(summary->finished, 21u) << name;
    if (!plain_correct) {
      plain_correct = summary->correct;
      // Gold answered back is right wherever gold itself runs.
      EXPECT_GE(summary->correct, 18u) << name;
    }
    EXPECT_EQ(summary->correct, *plain_correct) << name;
    auto data = run::load_run(out);
    ASSERT_TRUE(data.is_ok());
    for (const auto& r : testing::written_records(*data))
      for (const auto& c : r["candidates"])
        EXPECT_EQ(c["sql"].get<std::string>().find("'draft'"), std::string::npos) << name << ": " << c["sql"];
  }
}

TEST_F(EndpointRun, QuestionsDoTheirLocalWorkWhileThePreflightIsAnsweredButSendNothingBeforeIt) {
  // The preflight is held until a question has run SQL (gold runs from a question's start), at
  // most 10 s: a run that started its questions only after the preflight never gets there.
  std::mutex mu;
  std::condition_variable cv;
  bool executed = false;
  int sent_during_preflight = 0;
  bool preflight_answered = false;
  FakeOpenAiServer server([&](const httplib::Request& req, int64_t) {
    std::unique_lock lock(mu);
    if (req.body.find("Reply with the single word OK.") != std::string::npos) {
      cv.wait_for(lock, std::chrono::seconds(10), [&] { return executed; });
      preflight_answered = true;
      return FakeReply(200, answer_body(Shape::kPlainFence, "OK").dump());
    }
    if (!preflight_answered) ++sent_during_preflight;
    return FakeReply(200, answer_body(Shape::kPlainFence, gold_for(req.body)).dump());
  });
  RunOptions o = options(config(server.base_url()), dir_ / "run");
  bool executed_before_answer = false;
  o.db_fault_injector = [&](uint64_t, std::string_view) {
    std::lock_guard lock(mu);
    if (!preflight_answered) executed_before_answer = true;
    executed = true;
    cv.notify_all();
    return Status::ok();
  };
  auto summary = testing::run_and_report(o);
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_TRUE(summary->fatal_error.empty()) << summary->fatal_error;
  EXPECT_EQ(summary->finished, 21u);
  EXPECT_TRUE(executed_before_answer) << "no question ran SQL while the preflight was answered";
  EXPECT_EQ(sent_during_preflight, 0) << "a question's call went out before the preflight passed";
}

TEST_F(EndpointRun, AFailedPreflightStopsBeforeTheFirstQuestionAndARerunResumes) {
  std::atomic<bool> fixed{false};
  FakeOpenAiServer server([&](const httplib::Request& req, int64_t) {
    if (!fixed) return FakeReply(404, R"({"error":{"message":"The model `reasoner` does not exist or you do not have access to it.","type":"invalid_request_error","code":"model_not_found"}})");
    return FakeReply(200, answer_body(Shape::kPlainFence, gold_for(req.body)).dump());
  });
  fs::path out = dir_ / "run";
  auto stopped = testing::run_and_report(options(config(server.base_url()), out));
  ASSERT_TRUE(stopped.is_ok()) << stopped.status().message();
  EXPECT_NE(stopped->fatal_error.find("preflight"), std::string::npos) << stopped->fatal_error;
  EXPECT_NE(stopped->fatal_error.find("does not exist"), std::string::npos) << stopped->fatal_error;
  EXPECT_NE(stopped->fatal_error.find("\"srv\""), std::string::npos) << stopped->fatal_error;
  EXPECT_EQ(stopped->finished, 0u);
  EXPECT_EQ(server.requests(), 1);  // one request, not 21 failed questions
  fixed = true;
  auto resumed = testing::run_and_report(options(config(server.base_url()), out));
  ASSERT_TRUE(resumed.is_ok()) << resumed.status().message();
  EXPECT_TRUE(resumed->fatal_error.empty());
  EXPECT_EQ(resumed->finished, 21u);
}

TEST_F(EndpointRun, TheSameRefusalRepeatedStopsTheRunEarly) {
  FakeOpenAiServer server([](const httplib::Request&, int64_t) {
    return FakeReply(400, R"({"object":"error","message":"[{'type': 'extra_forbidden', 'loc': ('body', 'top_k'), 'msg': 'Extra inputs are not permitted'}]","type":"BadRequestError","param":null,"code":400})");
  });
  core::Config c = config(server.base_url(), /*preflight=*/false);
  c.set("llm.stop_after_repeated_errors", 5);
  c.set("run.threads", 1);
  auto summary = testing::run_and_report(options(c, dir_ / "run"));
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_NE(summary->fatal_error.find("Extra inputs are not permitted"), std::string::npos) << summary->fatal_error;
  EXPECT_NE(summary->fatal_error.find("5 calls in a row"), std::string::npos) << summary->fatal_error;
  EXPECT_LE(server.requests(), 6);
  EXPECT_LT(summary->finished, 21u);
}

TEST_F(EndpointRun, QuestionsWhoseEveryCallFailedAreFailedAndARerunRetriesThem) {
  std::atomic<bool> up{false};
  FakeOpenAiServer server([&](const httplib::Request& req, int64_t) {
    if (!up) return FakeReply(503, R"({"error":{"message":"model is loading"}})");
    return FakeReply(200, answer_body(Shape::kPlainFence, gold_for(req.body)).dump());
  });
  fs::path out = dir_ / "run";
  auto down = testing::run_and_report(options(config(server.base_url(), /*preflight=*/false), out));
  ASSERT_TRUE(down.is_ok()) << down.status().message();
  EXPECT_EQ(down->finished, 21u);
  EXPECT_EQ(down->failed, 21u);
  EXPECT_EQ(down->correct, 0u);
  auto data = run::load_run(out);
  ASSERT_TRUE(data.is_ok());
  for (const auto& r : testing::written_records(*data)) {
    EXPECT_EQ(r["status"], "error");
    EXPECT_NE(r["error"].get<std::string>().find("model is loading"), std::string::npos) << r["error"];
    // The failed call stays accounted for: in the candidate's trace and in the record's faults.
    ASSERT_EQ(r["candidates"].size(), 1u) << r.dump();
    EXPECT_NE(r["candidates"][0]["calls"][0].value("error", "").find("model is loading"), std::string::npos);
    EXPECT_EQ(r["llm_faults"]["failed_calls"], 1) << r["llm_faults"].dump();
  }
  up = true;
  auto again = testing::run_and_report(options(config(server.base_url(), false), out));
  ASSERT_TRUE(again.is_ok()) << again.status().message();
  EXPECT_EQ(again->failed, 0u);
  EXPECT_EQ(again->resumed, 0u);
  EXPECT_GE(again->correct, 18u);
}

TEST_F(EndpointRun, PromptsAreFittedToTheContextWindowAndCounted) {
  const int64_t largest = largest_prompt_tokens();
  ASSERT_GT(largest, 200);
  // A server (vLLM's words) whose window leaves room for 70% of the largest prompt plus the
  // generate role's 4096-token budget.
  const int64_t out_budget = 4096;
  const int64_t fits = largest * 7 / 10;
  const int64_t window = (fits + 64 + out_budget) * 10 / 9 + 1;
  std::atomic<int> refused{0};
  FakeOpenAiServer server([&](const httplib::Request& req, int64_t) {
    const int64_t asked = prompt_tokens_of(req.body) + json::parse(req.body).value("max_tokens", int64_t{0});
    if (asked > window) {
      ++refused;
      return FakeReply(400, json{{"object", "error"},
                                 {"message", "This model's maximum context length is " + std::to_string(window) +
                                                 " tokens. However, you requested " + std::to_string(asked) + " tokens."},
                                 {"type", "BadRequestError"}, {"code", 400}}.dump());
    }
    return FakeReply(200, answer_body(Shape::kPlainFence, gold_for(req.body)).dump());
  });
  core::Config c = config(server.base_url());
  c.set("llm.models.srv.context_tokens", window);
  fs::path out = dir_ / "run";
  auto summary = testing::run_and_report(options(c, out));
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_EQ(summary->failed, 0u);
  EXPECT_EQ(refused.load(), 0);  // every prompt was fitted before it was sent
  auto data = run::load_run(out);
  ASSERT_TRUE(data.is_ok());
  int degraded = 0;
  for (const auto& r : testing::written_records(*data))
    for (const auto& cand : r["candidates"])
      for (const auto& call : cand["calls"]) degraded += call.value("prompt_rung", 0) > 0;
  EXPECT_GT(degraded, 0);
  json report = json::parse(read_all(out / "report.json"));
  EXPECT_EQ(report["usage"]["stages"]["generate"].value("degraded_prompts", 0.0), degraded) << report["usage"].dump();
  EXPECT_NE(read_all(out / "report.md").find("lightened to fit"), std::string::npos);
}

TEST_F(EndpointRun, AnOverflowWithoutAKnownWindowIsAskedAgainOneRungLighter) {
  // llama.cpp-server's refusal for prompts longer than its -c; nothing configured on our side.
  const int64_t largest = largest_prompt_tokens();
  ASSERT_GT(largest, 0);
  const int64_t limit = largest * 9 / 10;
  std::atomic<int> refused{0};
  FakeOpenAiServer server([&](const httplib::Request& req, int64_t) {
    if (prompt_tokens_of(req.body) > limit) {
      ++refused;
      return FakeReply(400, R"({"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error"}})");
    }
    return FakeReply(200, answer_body(Shape::kPlainFence, gold_for(req.body)).dump());
  });
  fs::path out = dir_ / "run";
  auto summary = testing::run_and_report(options(config(server.base_url()), out));
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_GT(refused.load(), 0);
  EXPECT_EQ(summary->failed, 0u);
  auto data = run::load_run(out);
  ASSERT_TRUE(data.is_ok());
  int retried = 0;
  for (const auto& r : testing::written_records(*data))
    for (const auto& cand : r["candidates"])
      for (const auto& call : cand["calls"]) retried += call.value("prompt_rung", 0) > 0;
  EXPECT_EQ(retried, refused.load());  // each refused prompt was asked once more, and fitted
}

TEST_F(EndpointRun, ASecretHeaderEchoedByTheServerReachesNoFile) {
  const char* secret = "hdr-secret-8d41f0c2a9e37b65";
  setenv("NL2SQL_ENDPOINT_RUN_SECRET", secret, 1);
  // FastAPI-style validation errors echo the request back, headers included.
  FakeOpenAiServer server([&](const httplib::Request& req, int64_t seq) {
    if (seq % 2 == 1)
      return FakeReply(422, json{{"detail", {{{"msg", "bad"}, {"input", req.get_header_value("X-Api-Key")}}}}}.dump());
    return FakeReply(200, answer_body(Shape::kPlainFence, gold_for(req.body)).dump());
  });
  core::Config c = config(server.base_url());
  c.set("llm.models.srv.headers", json{{"X-Api-Key", "${NL2SQL_ENDPOINT_RUN_SECRET}"}});
  c.set("llm.stop_after_repeated_errors", 0);
  c.set("llm.cache", json{{"mode", "read-write"}, {"path", (dir_ / "cache.sqlite").string()}});
  fs::path out = dir_ / "run";
  auto summary = testing::run_and_report(options(c, out));
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  size_t files = 0;
  for (const auto& dir : {out, dir_.path()}) {
    for (const auto& entry : fs::recursive_directory_iterator(dir)) {
      if (!entry.is_regular_file() || entry.path().string().find("/mini/") != std::string::npos) continue;
      ++files;
      EXPECT_EQ(read_all(entry.path()).find(secret), std::string::npos) << entry.path();
    }
  }
  EXPECT_GT(files, 3u);
}

}  // namespace
}  // namespace nl2sql::pipeline
