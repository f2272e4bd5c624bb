// The estimate before a run (pipeline/estimate.h) against the real counts of runs: the bundled mini
// BIRD set run against a fake endpoint that answers about the questions (near-gold SQL, so the
// fixer and the tournament work as with a model; usage counted as a provider would), once with a
// CHASE-like config and once with an SSEV-like one, questions 0-9 and 10-20 as two runs. For
// questions 10-20: without a previous run, the rendered stages' (context, generation) expected
// calls and prompt tokens are within ±20% of the run's and the totals (calls, tokens, dollars) lie
// in [low, high]; with the run of questions 0-9 as the previous run, every total's expected value
// is within ±20% too. The estimates send no request (the server counts them).
#include <gtest/gtest.h>

#include <atomic>
#include <tuple>

#include "nl2sql/pipeline/estimate.h"
#include "nl2sql/run/run_data.h"
#include "support/fake_openai_server.h"
#include "support/gold_answers.h"
#include "support/mini_run.h"
#include "support/prefix_cache_meter.h"
#include "support/test_env.h"

namespace nl2sql::testing {
namespace {

namespace fs = std::filesystem;
using llm::testing::FakeOpenAiServer;
using llm::testing::FakeReply;

// A fake endpoint answering the mini set's questions near gold, with usage in its own tokens.
class GoldServer {
 public:
  explicit GoldServer(const fs::path& data)
      : server_([this](const httplib::Request& req, int64_t) {
          const std::string text = llm::testing::gold_answer_text(gold_, req.body);
          llm::testing::FakeCharge c;
          c.prompt_tokens = llm::testing::fake_tokens(llm::testing::fake_prompt_text(req.body));
          c.completion_tokens = llm::testing::fake_tokens(text);
          return FakeReply(200, llm::testing::completion_body_with_usage(
                                    text, llm::testing::usage_json(c, llm::testing::UsageShape::kNone)));
        }) {
    EXPECT_TRUE(llm::testing::load_gold((data / "dev.json").string(), gold_));
  }
  std::string url() const { return server_.base_url(); }
  int64_t requests() const { return server_.requests(); }

 private:
  llm::testing::GoldMap gold_;
  FakeOpenAiServer server_;
};

core::Config chase_like(const std::string& url) {
  return core::Config(nlohmann::json::parse(R"({
    "llm": {"models": {"default": {"base_url": ")" + url + R"(", "model": "fake", "api_key_env": "",
                                   "price_in_per_mtok": 1.0, "price_out_per_mtok": 4.0}},
            "cache": {"mode": "off"}, "preflight": false, "retry": {"max_attempts": 1}},
    "context": {"keywords": {"llm": true}, "column_filter": {"enabled": true}},
    "generate": {"generators": [
      {"name": "dc", "samples": 3, "temperature": 0.5, "shuffle": true},
      {"name": "qp", "samples": 3, "temperature": 0.5, "shuffle": true},
      {"name": "os", "samples": 3, "temperature": 0.5, "shuffle": true}]},
    "fix": {"enabled": true, "max_rounds": 3},
    "select": {"method": "tournament", "tournament": {"both_orders": true}},
    "run": {"selectors": ["tournament", "self_consistency"], "primary_selector": "tournament", "curve_points": [1]}
  })"));
}

core::Config ssev_like(const std::string& url) {
  auto profile = [&](const std::string& model) {
    return R"({"base_url": ")" + url + R"(", "model": ")" + model +
           R"(", "api_key_env": "", "price_in_per_mtok": 0.5, "price_out_per_mtok": 2.0})";
  };
  return core::Config(nlohmann::json::parse(R"({
    "llm": {"models": {"expert_a": )" + profile("a") + R"(, "expert_b": )" + profile("b") +
                                            R"(, "expert_c": )" + profile("c") + R"(},
            "default_profile": "expert_a", "cache": {"mode": "off"}, "preflight": false,
            "retry": {"max_attempts": 1}},
    "generate": {"generators": [{"name": "ssev", "profiles": ["expert_a", "expert_b", "expert_c"], "samples": 1}]},
    "fix": {"enabled": true, "max_rounds": 3},
    "select": {"method": "wma", "wma": {"experts": "profile"}},
    "run": {"selectors": ["wma", "naive_vote", "self_consistency"], "primary_selector": "wma", "curve_points": [1]}
  })"));
}

struct Actual {
  double calls = 0, prompt_tokens = 0, completion_tokens = 0, cost_usd = 0;
};

// The run's real figures: in total, and for the stages the estimate renders (context, generate).
struct RunFigures {
  Actual total, rendered;
};

RunFigures actual_of(const fs::path& run_dir) {
  auto data = run::load_run(run_dir);
  EXPECT_TRUE(data.is_ok()) << data.status().message();
  RunFigures f;
  if (!data) return f;
  for (const auto& r : data->records)
    for (const auto& [stage, u] : r.usage)
      for (Actual* a : {&f.total, stage == "context" || stage == "generate" ? &f.rendered : nullptr}) {
        if (!a) continue;
        a->calls += static_cast<double>(u.calls);
        a->prompt_tokens += static_cast<double>(u.prompt_tokens);
        a->completion_tokens += static_cast<double>(u.completion_tokens);
        a->cost_usd += u.cost_usd;
      }
  return f;
}

void expect_in_range(const pipeline::Range& r, double actual, const std::string& what) {
  EXPECT_LE(r.low, actual) << what;
  EXPECT_GE(r.high, actual) << what;
}

void expect_near(double expected, double actual, const std::string& what) {
  EXPECT_NEAR(expected, actual, 0.2 * actual) << what << ": expected " << expected << ", actual " << actual;
}

pipeline::Range rendered(const pipeline::Estimate& e, const char* part) {
  pipeline::Range out;
  for (const char* stage : {"context", "generate"}) {
    auto it = e.stages.find(stage);
    if (it == e.stages.end()) continue;
    out += std::string(part) == "calls" ? it->second.calls : it->second.prompt_tokens;
  }
  return out;
}

// Runs `config` over the first half of the mini set (the previous run) and over the second half
// against the gold server, then estimates the second half without a previous run and with the
// first half's; the server counts every request the estimates would have sent.
void check_estimate_against_run(core::Config (*make)(const std::string&), const std::string& label) {
  TempDir dir;
  const fs::path data = build_mini_bird(dir / "mini");
  GoldServer server(data);
  const core::Config config = make(server.url());
  auto first = mini_run_options(config, data, dir / "first", dir / "index");
  first.filter.ranges = "0-9";
  ASSERT_TRUE(run_and_report(first).is_ok());
  auto second = mini_run_options(config, data, dir / "second", dir / "index");
  second.filter.ranges = "10-20";
  auto summary = run_and_report(second);
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  ASSERT_EQ(summary->finished, 11u);
  const RunFigures actual = actual_of(dir / "second");
  const int64_t sent = server.requests();
  ASSERT_GT(actual.total.calls, 0);

  pipeline::EstimateOptions e;
  e.run = second;
  e.run.out_dir = dir / "no-run-here";
  auto fresh = pipeline::estimate_run(e);
  ASSERT_TRUE(fresh.is_ok()) << fresh.status().message();
  EXPECT_EQ(server.requests(), sent) << label << ": the estimate sent requests";
  EXPECT_FALSE(fs::exists(dir / "no-run-here")) << "the estimate wrote into the run folder";
  EXPECT_EQ(fresh->questions, 11u);
  EXPECT_EQ(fresh->basis, "defaults");
  // What the estimate renders is near the run without any previous run; the rest lies in range.
  expect_near(rendered(*fresh, "calls").expected, actual.rendered.calls, label + " rendered calls");
  expect_near(rendered(*fresh, "prompt").expected, actual.rendered.prompt_tokens, label + " rendered prompt tokens");
  expect_in_range(fresh->total.calls, actual.total.calls, label + " calls, no previous run");
  expect_in_range(fresh->total.prompt_tokens, actual.total.prompt_tokens, label + " prompt tokens, no previous run");
  expect_in_range(fresh->total.completion_tokens, actual.total.completion_tokens, label + " completion tokens");
  expect_in_range(fresh->total.cost_usd, actual.total.cost_usd, label + " cost, no previous run");

  e.previous_run = dir / "first";  // the same config on other questions: its per-question means
  auto learnt = pipeline::estimate_run(e);
  ASSERT_TRUE(learnt.is_ok()) << learnt.status().message();
  EXPECT_EQ(server.requests(), sent);
  EXPECT_EQ(learnt->basis, "previous run");
  EXPECT_EQ(learnt->previous_questions, 10u);
  EXPECT_TRUE(learnt->notes.empty()) << learnt->notes.front();
  for (const auto& [range, value, what] :
       {std::tuple{learnt->total.calls, actual.total.calls, "calls"},
        std::tuple{learnt->total.prompt_tokens, actual.total.prompt_tokens, "prompt tokens"},
        std::tuple{learnt->total.completion_tokens, actual.total.completion_tokens, "completion tokens"},
        std::tuple{learnt->total.cost_usd, actual.total.cost_usd, "cost"}}) {
    expect_in_range(range, value, label + " " + what + ", previous run");
    expect_near(range.expected, value, label + " " + what + ", previous run");
  }
}

TEST(Estimate, ChaseLikeConfigAgainstTheRealCountsOfARun) { check_estimate_against_run(chase_like, "chase-like"); }

TEST(Estimate, SsevConfigAgainstTheRealCountsOfARun) { check_estimate_against_run(ssev_like, "ssev"); }

TEST(Estimate, NamedPreviousRunMustHoldARun) {
  TempDir dir;
  const fs::path data = build_mini_bird(dir / "mini");
  pipeline::EstimateOptions e;
  e.run = mini_run_options(chase_like("http://127.0.0.1:9/v1"), data, dir / "run", dir / "index");
  e.previous_run = dir / "nothing";
  auto r = pipeline::estimate_run(e);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("holds no run"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace nl2sql::testing
