// The wire format (openai_chat.h) read on its own, on answers shaped as real servers send them:
// an OpenAI completion with cached and reasoning token details, a DeepSeek one with cache
// hit/miss counts, a vLLM reasoning answer whose content is empty, parts arrays, finish reasons,
// refusal bodies (OpenAI, vLLM, llama.cpp server, a proxy's HTML page) and an error event inside
// a llama.cpp stream; and the JSON-level entry points a wrapper around the same bodies uses.
#include "nl2sql/llm/openai_chat.h"

#include <gtest/gtest.h>

namespace nl2sql::llm {
namespace {

using nlohmann::json;

const OpenAiChat kWire;

TEST(OpenAiChat, ReadsAnOpenAiCompletionWithTokenDetails) {
  const std::string body = R"({
    "id": "chatcmpl-AbC123", "object": "chat.completion", "created": 1733000000, "model": "gpt-4o-2024-08-06",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "```sql\nSELECT 1\n```", "refusal": null},
                 "logprobs": null, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 2006, "completion_tokens": 300, "total_tokens": 2306,
              "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0},
              "completion_tokens_details": {"reasoning_tokens": 192, "audio_tokens": 0,
                                            "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}},
    "system_fingerprint": "fp_50cad350e4"})";
  auto r = kWire.read_chat(body, /*streamed=*/false, /*accept_truncated=*/false);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->text(), "```sql\nSELECT 1\n```");
  EXPECT_EQ(r->finish_reasons, std::vector<std::string>{"stop"});
  EXPECT_EQ(r->usage.prompt_tokens, 2006);
  EXPECT_EQ(r->usage.completion_tokens, 300);
  EXPECT_EQ(r->usage.cached_tokens, 1920);
  EXPECT_EQ(r->usage.reasoning_tokens, 192);
  EXPECT_FALSE(r->answer_from_reasoning.front());
}

TEST(OpenAiChat, ReadsDeepSeekCacheCountsAndReasoningContent) {
  const std::string body = R"({"id": "x", "model": "deepseek-reasoner",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "SELECT 2",
                 "reasoning_content": "The user wants two."}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 500, "completion_tokens": 90, "prompt_cache_hit_tokens": 448,
              "prompt_cache_miss_tokens": 52,
              "completion_tokens_details": {"reasoning_tokens": 60}}})";
  auto r = kWire.read_chat(body, false, false);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->text(), "SELECT 2");
  EXPECT_EQ(r->reasoning.front(), "The user wants two.");
  EXPECT_EQ(r->usage.cached_tokens, 448);
  EXPECT_EQ(r->usage.reasoning_tokens, 60);
}

TEST(OpenAiChat, EmptyContentFallsBackToTheReasoningTail) {
  // vLLM with a reasoning parser that never saw the end of thinking.
  const std::string body = R"({"choices": [{"index": 0, "message": {"role": "assistant", "content": null,
    "reasoning": "Let me think.\nFinal: SELECT 3"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 10, "completion_tokens": 20, "prompt_tokens_details": null}})";
  auto r = kWire.read_chat(body, false, false);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_TRUE(r->answer_from_reasoning.front());
  EXPECT_EQ(r->text(), "Let me think.\nFinal: SELECT 3");
  EXPECT_FALSE(r->usage.cached_tokens.has_value());  // null details: unknown, not zero
}

TEST(OpenAiChat, ContentPartsAndThinkingParts) {
  const json answer = json::parse(R"({"choices": [{"index": 0, "finish_reason": "stop", "message": {
      "role": "assistant",
      "content": [{"type": "thinking", "thinking": [{"type": "text", "text": "hmm"}]},
                  {"type": "text", "text": "SELECT "}, {"type": "text", "text": "4"}]}}]})");
  auto r = read_chat_completion(answer, false);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->text(), "SELECT 4");
  EXPECT_EQ(r->reasoning.front(), "hmm");
  // The text entry point reads the same answer the same way.
  auto from_text = parse_chat_completion(answer.dump(), false);
  ASSERT_TRUE(from_text.is_ok());
  EXPECT_EQ(from_text->choices, r->choices);
}

TEST(OpenAiChat, FinishReasonLengthIsAnErrorUnlessCutAnswersAreAccepted) {
  const std::string body = R"({"choices": [{"index": 0, "message": {"role": "assistant", "content": "SELECT a, b"},
                                            "finish_reason": "length"}], "truncated": true})";
  auto refused = kWire.read_chat(body, false, false);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(call_error_kind(refused.status()), CallErrorKind::kTruncated);
  auto kept = kWire.read_chat(body, false, true);
  ASSERT_TRUE(kept.is_ok()) << kept.status().message();
  EXPECT_EQ(kept->finish_reasons.front(), "length");
  EXPECT_TRUE(kept->window_truncated);  // llama.cpp's flag: the window, not the budget
}

TEST(OpenAiChat, MalformedAnswersHaveTypedErrors) {
  EXPECT_EQ(call_error_kind(kWire.read_chat("<html>502</html>", false, false).status()), CallErrorKind::kNotJson);
  EXPECT_EQ(call_error_kind(kWire.read_chat(R"({"object": "chat.completion"})", false, false).status()),
            CallErrorKind::kMissingField);
  EXPECT_EQ(call_error_kind(kWire.read_chat(R"({"choices": []})", false, false).status()),
            CallErrorKind::kEmptyChoices);
  EXPECT_EQ(call_error_kind(
                kWire.read_chat(R"({"choices": [{"message": {"content": "  "}, "finish_reason": "stop"}]})", false, false)
                    .status()),
            CallErrorKind::kEmptyContent);
}

// OpenAI's structured refusal (content null, the reason in message.refusal; streamed as
// delta.refusal) fails as empty content that says the model refused, and why.
TEST(OpenAiChat, AStructuredRefusalSaysTheModelRefused) {
  auto r = kWire.read_chat(
      R"({"choices": [{"message": {"role": "assistant", "content": null, "refusal": "I can't help with that."},
                       "finish_reason": "stop"}], "usage": {"prompt_tokens": 20, "completion_tokens": 6}})",
      false, false);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(call_error_kind(r.status()), CallErrorKind::kEmptyContent);
  EXPECT_NE(r.status().message().find("the model refused (\"I can't help with that.\")"), std::string::npos)
      << r.status().message();
  const std::string sse =
      "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null,\"refusal\":\"\"}}]}\n\n"
      "data: {\"choices\":[{\"index\":0,\"delta\":{\"refusal\":\"I can't \"}}]}\n\n"
      "data: {\"choices\":[{\"index\":0,\"delta\":{\"refusal\":\"help.\"},\"finish_reason\":\"stop\"}]}\n\n"
      "data: [DONE]\n\n";
  auto streamed = kWire.read_chat(sse, /*streamed=*/true, false);
  ASSERT_FALSE(streamed.is_ok());
  EXPECT_NE(streamed.status().message().find("the model refused (\"I can't help.\")"), std::string::npos)
      << streamed.status().message();
}

TEST(OpenAiChat, ReadsAStreamWithUsageInTheLastChunk) {
  const std::string sse =
      "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n"
      "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"think\"}}]}\n\n"
      "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"SELECT \"}}]}\n\n"
      "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"5\"},\"finish_reason\":\"stop\"}]}\n\n"
      "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":3,"
      "\"prompt_tokens_details\":{\"cached_tokens\":0}}}\n\n"
      "data: [DONE]\n\n";
  auto r = kWire.read_chat(sse, /*streamed=*/true, false);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->text(), "SELECT 5");
  EXPECT_EQ(r->reasoning.front(), "think");
  EXPECT_EQ(r->usage.prompt_tokens, 7);
  EXPECT_EQ(r->usage.cached_tokens, 0);
}

TEST(OpenAiChat, AnErrorEventInAStreamIsThePlainErrorItStandsFor) {
  HttpResponse streamed;
  streamed.status = 200;
  streamed.headers = {{"content-type", "text/event-stream"}};
  streamed.body =
      "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"SEL\"}}]}\n\n"
      "data: {\"error\":{\"code\":503,\"message\":\"Loading model\",\"type\":\"unavailable_error\"}}\n\n";
  auto plain = kWire.error_in_stream(streamed);
  ASSERT_TRUE(plain.has_value());
  EXPECT_EQ(plain->status, 503);
  const ServerError e = kWire.read_error(plain->body);
  EXPECT_EQ(e.message, "Loading model");
  EXPECT_EQ(e.type, "unavailable_error");
  // No code: a server error; a stream without an error event has none.
  streamed.body = "data: {\"error\":\"boom\"}\n\n";
  ASSERT_TRUE(kWire.error_in_stream(streamed).has_value());
  EXPECT_EQ(kWire.error_in_stream(streamed)->status, 500);
  streamed.body = "data: {\"choices\":[]}\n\ndata: [DONE]\n\n";
  EXPECT_FALSE(kWire.error_in_stream(streamed).has_value());
}

TEST(OpenAiChat, RefusalBodiesGiveTheServersOwnWords) {
  // OpenAI.
  ServerError openai = kWire.read_error(R"({"error": {"message": "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.", "type": "invalid_request_error", "param": "max_tokens", "code": "unsupported_parameter"}})");
  EXPECT_EQ(openai.type, "invalid_request_error");
  EXPECT_NE(openai.message.find("Use 'max_completion_tokens' instead."), std::string::npos);
  // llama.cpp server.
  ServerError llama = kWire.read_error(R"({"error": {"code": 400, "message": "the request exceeds the available context size, try increasing it", "type": "exceed_context_size_error", "n_prompt_tokens": 9000, "n_ctx": 8192}})");
  EXPECT_EQ(llama.type, "exceed_context_size_error");
  // A bare string error and a proxy's page: the body's start, on one line.
  EXPECT_EQ(kWire.read_error(R"({"error": "model not found"})").message, "model not found");
  ServerError html = kWire.read_error("<html>\n<body>502 Bad Gateway</body>\n</html>");
  EXPECT_EQ(html.type, "");
  EXPECT_EQ(html.message.find('\n'), std::string::npos);
  EXPECT_NE(html.message.find("502 Bad Gateway"), std::string::npos);
  EXPECT_EQ(kWire.read_error("").message, "(empty body)");
}

TEST(OpenAiChat, BodyAsJsonAndAsTextAgree) {
  ModelProfile p;
  p.model = "m";
  p.max_tokens_field = "max_completion_tokens";
  p.omit = {"top_p"};
  p.extra_body = R"({"reasoning_effort": "low"})";
  ChatRequest r;
  r.messages = {{"user", "hi"}};
  r.max_tokens = 100;
  const json body = chat_body_json(p, r);
  EXPECT_EQ(json::parse(build_chat_body(p, r)), body);
  EXPECT_EQ(json::parse(kWire.chat_body(p, r)), body);
  EXPECT_EQ(body["max_completion_tokens"], 100);
  EXPECT_FALSE(body.contains("top_p"));
  EXPECT_EQ(body["reasoning_effort"], "low");
  EXPECT_EQ(kWire.chat_path(), "/chat/completions");
}

TEST(OpenAiChat, Embeddings) {
  EXPECT_EQ(json::parse(kWire.embeddings_body("e", {"a", "b"})), json::parse(R"({"model": "e", "input": ["a", "b"]})"));
  auto r = kWire.read_embeddings(
      R"({"object": "list", "data": [{"object": "embedding", "index": 1, "embedding": [0.5]},
                                    {"object": "embedding", "index": 0, "embedding": [0.25]}],
          "usage": {"prompt_tokens": 4, "total_tokens": 4}})",
      2, "test");
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->vectors[0], std::vector<float>{0.25f});
  EXPECT_EQ(r->vectors[1], std::vector<float>{0.5f});
  EXPECT_EQ(r->usage.prompt_tokens, 4);
  EXPECT_EQ(call_error_kind(kWire.read_embeddings(R"({"data": []})", 1, "test").status()),
            CallErrorKind::kMissingField);
}

}  // namespace
}  // namespace nl2sql::llm
