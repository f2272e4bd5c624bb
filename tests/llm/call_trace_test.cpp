// Call traces: to_json → call_trace_from_json gives back the same bytes (every optional field
// set, and none); a key the trace does not write (a renamed one) and wrong types are refused,
// naming the key and where the call was read.
#include "nl2sql/llm/trace.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace nl2sql::llm {
namespace {

using nlohmann::json;

LlmCallTrace full_call() {
  LlmCallTrace c;
  c.stage = "select";
  c.template_name = "select_pairwise";
  c.template_hash = "abc";
  c.profile = "big";
  c.model = "m-1";
  c.provider = "openai";
  c.prompt = "Which is better?";
  c.system = "You compare.";
  c.response = "{\"winner\": \"A\"}";
  c.reasoning = "thinking";
  c.answer_from_reasoning = true;
  c.prompt_rung = 2;
  c.error = "";
  c.prompt_tokens = 120;
  c.completion_tokens = 8;
  c.cached_tokens = 64;
  c.reasoning_tokens = 5;
  c.cost_usd = 0.00125;
  c.latency_s = 1.5;
  c.from_cache = true;
  c.temperature = 0.7;
  c.seed = 42;
  c.request_hash = "0123456789abcdef";
  c.shared_from = "q3";
  return c;
}

TEST(CallTrace, WritesBackTheBytesItRead) {
  for (const LlmCallTrace& c : {full_call(), LlmCallTrace{}}) {
    const json j = to_json(c);
    auto back = call_trace_from_json(j, "candidate dc#0");
    ASSERT_TRUE(back.is_ok()) << back.status().to_string();
    EXPECT_EQ(to_json(*back).dump(), j.dump());
  }
  auto back = call_trace_from_json(to_json(full_call()), "x");
  ASSERT_TRUE(back.is_ok());
  EXPECT_EQ(back->cached_tokens, 64);
  EXPECT_EQ(back->seed, 42);
  EXPECT_EQ(back->prompt_rung, 2);
  EXPECT_EQ(back->shared_from, "q3");
}

TEST(CallTrace, RenamedKeysAndWrongTypesAreRefusedNamed) {
  json j = to_json(full_call());
  j["template_name"] = j["template"];
  j.erase("template");
  auto renamed = call_trace_from_json(j, "candidate dc#0");
  ASSERT_FALSE(renamed.is_ok());
  EXPECT_NE(renamed.status().message().find("\"template_name\""), std::string::npos) << renamed.status().message();
  EXPECT_NE(renamed.status().message().find("candidate dc#0"), std::string::npos) << renamed.status().message();

  json wrong = to_json(full_call());
  wrong["cached_tokens"] = 1.5;
  auto fraction = call_trace_from_json(wrong, "x");
  ASSERT_FALSE(fraction.is_ok());
  EXPECT_NE(fraction.status().message().find("cached_tokens"), std::string::npos);
  EXPECT_FALSE(call_trace_from_json(json::array(), "x").is_ok());
}

}  // namespace
}  // namespace nl2sql::llm
