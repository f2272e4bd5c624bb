// The provider's own accounting (issue 39): cached prompt tokens and reasoning tokens read from
// every usage shape servers send (OpenAI/Azure/xAI/vLLM/OpenRouter details objects, DeepSeek's
// cache hit/miss counts, the last chunk of a stream), unknown rather than zero where a server
// says nothing; the one cost formula pricing cached tokens at their own price (the input price
// when none is set); accounting summing both with how many calls reported them; and a client
// against a fake server with a prefix cache billing exactly what the server bills.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "nl2sql/llm/accounting.h"
#include "nl2sql/llm/client.h"
#include "nl2sql/llm/response_cache.h"
#include "support/fake_openai_server.h"
#include "support/prefix_cache_meter.h"

namespace nl2sql::llm {
namespace {

using nlohmann::json;

std::string answer_with_usage(const json& usage) {
  json j = {{"choices", {{{"index", 0}, {"message", {{"role", "assistant"}, {"content", "SELECT 1"}}}, {"finish_reason", "stop"}}}},
            {"usage", usage}};
  return j.dump();
}

TEST(ProviderUsage, OpenAiShapeGivesCachedAndReasoningTokens) {
  auto r = parse_chat_completion(answer_with_usage(json::parse(R"({
      "prompt_tokens": 2006, "completion_tokens": 300, "total_tokens": 2306,
      "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0},
      "completion_tokens_details": {"reasoning_tokens": 256, "accepted_prediction_tokens": 0}})")),
                                 false);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->usage.prompt_tokens, 2006);
  EXPECT_EQ(r->usage.completion_tokens, 300);
  EXPECT_EQ(r->usage.cached_tokens, 1920);
  EXPECT_EQ(r->usage.reasoning_tokens, 256);
}

TEST(ProviderUsage, NullOrAbsentDetailsStayUnknownNotZero) {
  // vLLM with prompt-token details off sends the object as null.
  Usage null_details = read_usage(json::parse(R"({"prompt_tokens": 50, "completion_tokens": 7,
      "prompt_tokens_details": null, "completion_tokens_details": null})"));
  EXPECT_EQ(null_details.prompt_tokens, 50);
  EXPECT_FALSE(null_details.cached_tokens.has_value());
  EXPECT_FALSE(null_details.reasoning_tokens.has_value());
  Usage absent = read_usage(json::parse(R"({"prompt_tokens": 50, "completion_tokens": 7})"));
  EXPECT_FALSE(absent.cached_tokens.has_value());
  EXPECT_FALSE(absent.reasoning_tokens.has_value());
  // A details object without the field (or with a null one) says nothing either.
  Usage partial = read_usage(json::parse(R"({"prompt_tokens": 50, "completion_tokens": 7,
      "prompt_tokens_details": {"cached_tokens": null}, "completion_tokens_details": {"audio_tokens": 0}})"));
  EXPECT_FALSE(partial.cached_tokens.has_value());
  EXPECT_FALSE(partial.reasoning_tokens.has_value());
  // A reported zero is a known zero.
  Usage zero = read_usage(json::parse(R"({"prompt_tokens": 50, "completion_tokens": 7,
      "prompt_tokens_details": {"cached_tokens": 0}})"));
  EXPECT_EQ(zero.cached_tokens, 0);
}

TEST(ProviderUsage, DeepSeekCacheHitAndMissCounts) {
  Usage u = read_usage(json::parse(R"({"prompt_tokens": 1200, "completion_tokens": 90,
      "prompt_cache_hit_tokens": 1024, "prompt_cache_miss_tokens": 176,
      "completion_tokens_details": {"reasoning_tokens": 60}})"));
  EXPECT_EQ(u.prompt_tokens, 1200);
  EXPECT_EQ(u.cached_tokens, 1024);
  EXPECT_EQ(u.reasoning_tokens, 60);
  // Without prompt_tokens, hit + miss is the prompt.
  Usage no_total = read_usage(json::parse(R"({"completion_tokens": 9,
      "prompt_cache_hit_tokens": 64, "prompt_cache_miss_tokens": 36})"));
  EXPECT_EQ(no_total.prompt_tokens, 100);
  EXPECT_EQ(no_total.cached_tokens, 64);
}

TEST(ProviderUsage, StreamedAnswerTakesUsageFromTheLastChunk) {
  // stream_options.include_usage: every chunk carries "usage": null but the last, whose choices
  // are empty.
  const std::string body =
      "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"SELECT \"}}],\"usage\":null}\n\n"
      "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"1\"},\"finish_reason\":\"stop\"}],\"usage\":null}\n\n"
      "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":400,\"completion_tokens\":20,"
      "\"prompt_tokens_details\":{\"cached_tokens\":384},\"completion_tokens_details\":{\"reasoning_tokens\":12}}}\n\n"
      "data: [DONE]\n\n";
  auto r = parse_chat_stream(body, false);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->text(), "SELECT 1");
  EXPECT_EQ(r->usage.prompt_tokens, 400);
  EXPECT_EQ(r->usage.cached_tokens, 384);
  EXPECT_EQ(r->usage.reasoning_tokens, 12);
  // A stream whose usage has no details leaves them unknown.
  const std::string plain =
      "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"SELECT 1\"},\"finish_reason\":\"stop\"}]}\n\n"
      "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":400,\"completion_tokens\":20,\"prompt_tokens_details\":null}}\n\n"
      "data: [DONE]\n\n";
  auto p = parse_chat_stream(plain, false);
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  EXPECT_FALSE(p->usage.cached_tokens.has_value());
}

TEST(ProviderUsage, CostPricesCachedTokensAtTheirOwnPriceDefaultingToTheInputPrice) {
  ModelProfile p;
  p.price_in_per_mtok = 1.0;
  p.price_out_per_mtok = 4.0;
  Usage u;
  u.prompt_tokens = 1'000'000;
  u.completion_tokens = 500'000;
  u.cached_tokens = 600'000;
  // No cached price: cached tokens cost what other prompt tokens cost.
  EXPECT_NEAR(cost_usd(p, u), 1.0 + 2.0, 1e-12);
  p.price_cached_in_per_mtok = 0.25;
  // 400k uncached × 1.00 + 600k cached × 0.25 + 500k × 4.00.
  EXPECT_NEAR(cost_usd(p, u), 0.4 + 0.15 + 2.0, 1e-12);
  // Unknown cached tokens: all billed uncached.
  u.cached_tokens.reset();
  EXPECT_NEAR(cost_usd(p, u), 1.0 + 2.0, 1e-12);
  // A server reporting more cached than prompt tokens cannot make the prompt cost negative.
  u.cached_tokens = 2'000'000;
  EXPECT_NEAR(cost_usd(p, u), 0.25 + 2.0, 1e-12);
}

TEST(ProviderUsage, ProfileReadsTheCachedPriceAndRejectsANegativeOne) {
  core::Config config(json::parse(R"({"llm": {"models": {
      "a": {"base_url": "http://127.0.0.1:1/v1", "model": "m", "price_in_per_mtok": 1.0},
      "b": {"base_url": "http://127.0.0.1:1/v1", "model": "m", "price_in_per_mtok": 1.0,
            "price_cached_in_per_mtok": 0.1}}, "default_profile": "a"}})"));
  auto s = load_llm_settings(config);
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  EXPECT_FALSE(s->profiles.at("a").price_cached_in_per_mtok.has_value());
  EXPECT_EQ(s->profiles.at("b").price_cached_in_per_mtok, 0.1);
  config.set("llm.models.b.price_cached_in_per_mtok", -1.0);
  auto bad = load_llm_settings(config);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("llm.models.b.price_cached_in_per_mtok"), std::string::npos)
      << bad.status().message();
}

TEST(ProviderUsage, SumsStayUnknownUntilACallReports) {
  Usage a, b;
  a.prompt_tokens = 10;
  b.prompt_tokens = 20;
  a += b;
  EXPECT_FALSE(a.cached_tokens.has_value());
  b.cached_tokens = 16;
  a += b;
  EXPECT_EQ(a.cached_tokens, 16);
  EXPECT_FALSE(a.reasoning_tokens.has_value());
}

TEST(ProviderUsage, AccountingCountsTheCallsThatReported) {
  Accounting acc;
  auto call = [](int64_t prompt, std::optional<int64_t> cached, std::optional<int64_t> reasoning) {
    UsageTotals t;
    t.calls = 1;
    Usage u;
    u.prompt_tokens = prompt;
    u.completion_tokens = 10;
    u.cached_tokens = cached;
    u.reasoning_tokens = reasoning;
    t.add_usage(u);
    return t;
  };
  acc.record("generate", "q1", call(100, 64, std::nullopt));
  acc.record("generate", "q2", call(100, std::nullopt, std::nullopt));
  acc.record("select", "q1", call(50, 0, 7));
  const UsageTotals t = acc.total();
  EXPECT_EQ(t.prompt_tokens, 250);
  EXPECT_EQ(t.cached_tokens, 64);
  EXPECT_EQ(t.calls_reporting_cached, 2);
  EXPECT_EQ(t.reasoning_tokens, 7);
  EXPECT_EQ(t.calls_reporting_reasoning, 1);
  EXPECT_EQ(acc.by_stage().at("generate").calls_reporting_reasoning, 0);
  const json j = acc.to_json();
  EXPECT_EQ(j["by_stage"]["generate"]["cached_tokens"], 64);
  EXPECT_EQ(j["by_stage"]["generate"]["calls_reporting_cached"], 1);
  EXPECT_EQ(j["by_stage"]["select"]["reasoning_tokens"], 7);
}

TEST(ProviderUsage, ResponseCacheKeepsTheBreakdownAndReadsOldEntries) {
  ChatResponse r;
  r.choices = {"SELECT 1"};
  r.finish_reasons = {"stop"};
  r.reasoning = {""};
  r.answer_from_reasoning = {false};
  r.usage.prompt_tokens = 100;
  r.usage.completion_tokens = 9;
  r.usage.cached_tokens = 64;
  r.usage.reasoning_tokens = 3;
  auto back = response_from_json(response_to_json(r));
  ASSERT_TRUE(back.is_ok());
  EXPECT_EQ(back->usage.cached_tokens, 64);
  EXPECT_EQ(back->usage.reasoning_tokens, 3);
  // An entry written before the breakdown existed.
  auto old = response_from_json(json::parse(R"({"choices": ["SELECT 1"], "finish_reasons": ["stop"],
      "usage": {"prompt_tokens": 100, "completion_tokens": 9}})"));
  ASSERT_TRUE(old.is_ok());
  EXPECT_EQ(old->usage.prompt_tokens, 100);
  EXPECT_FALSE(old->usage.cached_tokens.has_value());
  EXPECT_FALSE(old->usage.reasoning_tokens.has_value());
}

// A client against a server with a prefix cache: every call's cost is the server's own bill.
TEST(ProviderUsage, ClientCostEqualsTheBillOfAServerWithAPrefixCache) {
  testing::PrefixCacheMeter meter(4);
  std::mutex mu;
  testing::FakeCharge billed;
  double bill = 0;
  const double in = 1.0, cached_price = 0.25, out = 4.0;
  testing::FakeOpenAiServer server([&](const httplib::Request& req, int64_t seq) {
    testing::FakeCharge c = meter.admit(testing::fake_prompt_text(req.body));
    const std::string text = "```sql\nSELECT " + std::to_string(seq) + "\n```";
    c.reasoning_tokens = 5;
    c.completion_tokens = testing::fake_tokens(text) + c.reasoning_tokens;
    {
      std::lock_guard lock(mu);
      billed.prompt_tokens += c.prompt_tokens;
      billed.cached_tokens += c.cached_tokens;
      bill += c.cost_usd(in, cached_price, out);
    }
    return testing::FakeReply(
        200, testing::completion_body_with_usage(
                 text, testing::usage_json(c, seq % 2 ? testing::UsageShape::kDeepSeek : testing::UsageShape::kOpenAi)));
  });
  LlmSettings s;
  ModelProfile p;
  p.name = "main";
  p.base_url = server.base_url();
  p.model = "fake-model";
  p.price_in_per_mtok = in;
  p.price_cached_in_per_mtok = cached_price;
  p.price_out_per_mtok = out;
  p.timeout_s = 5;
  s.profiles["main"] = p;
  s.default_profile = "main";
  s.cache.mode = CacheMode::kOff;
  auto created = Client::create(s);
  ASSERT_TRUE(created.is_ok()) << created.status().message();
  Client& client = **created;
  const std::string schema(3000, 'x');
  double total = 0;
  for (int i = 0; i < 6; ++i) {
    ChatRequest r;
    r.role = "generate";
    r.stage = "generate";
    r.question_id = "q" + std::to_string(i);
    r.messages = {{"system", "You write SQL.\n" + schema}, {"user", "Question number " + std::to_string(i)}};
    auto answer = client.chat(r);
    ASSERT_TRUE(answer.is_ok()) << answer.status().message();
    ASSERT_TRUE(answer->usage.cached_tokens.has_value());
    EXPECT_EQ(answer->usage.reasoning_tokens, 5);
    if (i > 0) {
      EXPECT_GT(*answer->usage.cached_tokens, 700);  // the shared system prompt
    }
    total += answer->cost_usd;
  }
  ASSERT_GT(billed.cached_tokens, 0);
  EXPECT_NEAR(total, bill, 1e-12);
  const UsageTotals t = client.accounting().total();
  EXPECT_EQ(t.cached_tokens, billed.cached_tokens);
  EXPECT_EQ(t.calls_reporting_cached, 6);
  EXPECT_EQ(t.reasoning_tokens, 30);
  EXPECT_NEAR(t.cost_usd, bill, 1e-12);
}

}  // namespace
}  // namespace nl2sql::llm
