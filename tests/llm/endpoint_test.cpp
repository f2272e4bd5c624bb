// Real endpoints as they behave, not as a tidy fake would: OpenAI reasoning models that refuse
// max_tokens and non-default temperatures, vLLM/DeepSeek reasoning fields and null content,
// content as an array of parts, server-sent events, context-length refusals in the words of
// vLLM and llama.cpp-server, Retry-After as an HTTP date, answers cut at the budget, and the
// same refusal repeated until the run must stop. Each case is the server's own answer shape.
#include <gtest/gtest.h>

#include <mutex>

#include <chrono>

#include <condition_variable>
#include <stdlib.h>

#include <ctime>

#include "support/fake_openai_server.h"
#include "nl2sql/core/log.h"
#include "nl2sql/llm/client.h"
#include "support/test_env.h"

namespace nl2sql::llm {
namespace {

using nlohmann::json;
using testing::completion_body;
using testing::FakeOpenAiServer;
using testing::FakeReply;
using namespace std::chrono_literals;

LlmSettings one_profile(const std::string& base_url) {
  LlmSettings s;
  ModelProfile p;
  p.name = "main";
  p.base_url = base_url;
  p.model = "served-model";
  p.api_key_env = "";
  p.timeout_s = 5;
  s.profiles["main"] = p;
  s.default_profile = "main";
  s.retry.max_attempts = 3;
  s.retry.base_delay_s = 0.01;
  s.cache.mode = CacheMode::kOff;
  return s;
}

ChatRequest ask(const std::string& role = "generate") {
  ChatRequest r;
  r.role = role;
  r.messages = {{"user", "Write the query."}};
  r.stage = role;
  r.question_id = "q1";
  return r;
}

std::unique_ptr<Client> make_client(const LlmSettings& s, bool stop_on_fatal = false,
                                    std::shared_ptr<ManualClock> clock = nullptr) {
  ClientOptions o;
  o.clock = clock ? clock : std::make_shared<ManualClock>();
  o.stop_on_fatal_error = stop_on_fatal;
  auto c = Client::create(s, o);
  EXPECT_TRUE(c.is_ok()) << c.status().to_string();
  return std::move(c).value();
}

json message_body(const json& message, const std::string& finish = "stop") {
  return {{"id", "chatcmpl-1"},
          {"object", "chat.completion"},
          {"choices", {{{"index", 0}, {"message", message}, {"finish_reason", finish}}}},
          {"usage", {{"prompt_tokens", 12}, {"completion_tokens", 40}}}};
}

// OpenAI's answer to o-series / gpt-5 requests carrying fields those models refuse (the
// messages are OpenAI's own wording).
FakeReply openai_reasoning_model(const httplib::Request& req) {
  json body = json::parse(req.body);
  if (body.contains("max_tokens"))
    return {400, R"({"error":{"message":"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.","type":"invalid_request_error","param":"max_tokens","code":"unsupported_parameter"}})"};
  if (body.contains("temperature") && body["temperature"] != 1)
    return {400, R"({"error":{"message":"Unsupported value: 'temperature' does not support 0.0 with this model. Only the default (1) value is supported.","type":"invalid_request_error","param":"temperature","code":"unsupported_value"}})"};
  if (body.contains("top_p") && body["top_p"] != 1)
    return {400, R"({"error":{"message":"Unsupported parameter: 'top_p' is not supported with this model.","type":"invalid_request_error","param":"top_p","code":"unsupported_parameter"}})"};
  return {200, completion_body("```sql\nSELECT 1\n```")};
}

TEST(EndpointShaping, ProfileKeysShapeBodyUrlAndHeaders) {
  setenv("NL2SQL_ENDPOINT_TEST_TOKEN", "tok-2b7e151628aed2a6abf7", 1);
  FakeOpenAiServer server([](const httplib::Request& req, int64_t) {
    json echo = {{"path", req.path},
                 {"api_version", req.get_param_value("api-version")},
                 {"api_key", req.get_header_value("api-key")},
                 {"title", req.get_header_value("X-Title")},
                 {"authorization", req.get_header_value("Authorization")}};
    return FakeReply{200, completion_body(echo.dump())};
  });
  json cfg = json::parse(R"({"llm": {"models": {"az": {
      "model": "gpt-4o", "api_key_env": "",
      "max_tokens_field": "max_completion_tokens", "omit": ["temperature", "top_p"],
      "extra_body": {"reasoning_effort": "high", "chat_template_kwargs": {"enable_thinking": true},
                     "options": {"num_ctx": 16384}},
      "headers": {"api-key": "${NL2SQL_ENDPOINT_TEST_TOKEN}", "X-Title": "text2sql-bench"},
      "query": {"api-version": "2024-10-21"}, "max_tokens": 8192}},
      "cache": {"mode": "off"}}})");
  cfg["llm"]["models"]["az"]["base_url"] = server.base_url() + "/";  // a pasted trailing slash
  auto s = load_llm_settings(core::Config(cfg));
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  const ModelProfile& p = s->profiles.at("az");
  EXPECT_EQ(p.base_url, server.base_url());
  EXPECT_EQ(s->output_budget(p, "keywords"), 8192);
  auto client = make_client(*s);
  auto r = client->chat(ask());
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  json seen = json::parse(r->text());
  EXPECT_EQ(seen["path"], "/v1/chat/completions");  // not /v1//chat/completions
  EXPECT_EQ(seen["api_version"], "2024-10-21");
  EXPECT_EQ(seen["api_key"], "tok-2b7e151628aed2a6abf7");
  EXPECT_EQ(seen["title"], "text2sql-bench");
  EXPECT_EQ(seen["authorization"], "");
  json body = json::parse(server.bodies().at(0));
  EXPECT_FALSE(body.contains("temperature"));
  EXPECT_FALSE(body.contains("top_p"));
  EXPECT_FALSE(body.contains("max_tokens"));
  EXPECT_EQ(body["max_completion_tokens"], 8192);
  EXPECT_EQ(body["reasoning_effort"], "high");
  EXPECT_EQ(body["chat_template_kwargs"]["enable_thinking"], true);
  EXPECT_EQ(body["options"]["num_ctx"], 16384);
  // The header value is a secret: redacted wherever a message could carry it.
  EXPECT_EQ(core::redact("echo tok-2b7e151628aed2a6abf7 back").find("tok-2b7e151628aed2a6abf7"), std::string::npos);
  EXPECT_EQ(normalize_base_url("http://h:8000/v1/chat/completions"), "http://h:8000/v1");
}

TEST(EndpointShaping, ConfigErrorsNameTheKey) {
  auto error = [](const char* profile) {
    core::Config config(json::parse(std::string(R"({"llm": {"models": {"p": )") + profile + "}}}"));
    auto s = load_llm_settings(config);
    return s.is_ok() ? std::string() : s.status().message();
  };
  EXPECT_NE(error(R"({"model": "m", "max_tokens_field": "max_output"})").find("llm.models.p.max_tokens_field"), std::string::npos);
  EXPECT_NE(error(R"({"model": "m", "omit": ["messages"]})").find("llm.models.p.omit"), std::string::npos);
  EXPECT_NE(error(R"({"model": "m", "extra_body": {"model": "x"}})").find("llm.models.p.extra_body.model"), std::string::npos);
  EXPECT_NE(error(R"({"model": "m", "headers": {"k": "${NL2SQL_SURELY_UNSET_VAR}"}})").find("NL2SQL_SURELY_UNSET_VAR"), std::string::npos);
  EXPECT_NE(error(R"({"model": "m", "role_max_tokens": {"generat": 5}})").find("llm.models.p.role_max_tokens.generat"), std::string::npos);
}

TEST(EndpointShaping, RoleBudgetsFitChainOfThought) {
  LlmSettings s = one_profile("http://x/v1");
  const ModelProfile& p = s.profiles.at("main");
  EXPECT_GE(s.output_budget(p, "generate"), 4096);
  EXPECT_GE(s.output_budget(p, "fix"), 4096);
  EXPECT_EQ(s.output_budget(p, "keywords"), 1024);
  s.role_max_tokens["fix"] = 9000;
  EXPECT_EQ(s.output_budget(p, "fix"), 9000);
  s.profiles.at("main").role_max_tokens["fix"] = 12000;
  EXPECT_EQ(s.output_budget(s.profiles.at("main"), "fix"), 12000);
}

TEST(EndpointShaping, OSeriesRulesRefuseThePlainShapeAndAcceptTheShapedOne) {
  FakeOpenAiServer server([](const httplib::Request& req, int64_t) { return openai_reasoning_model(req); });
  LlmSettings plain = one_profile(server.base_url());
  auto refused = make_client(plain)->chat(ask());
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(call_error_kind(refused.status()), CallErrorKind::kHttpClient);
  // The server's words, then what to change in the config.
  EXPECT_NE(refused.status().message().find("set llm.models.main.max_tokens_field to \"max_completion_tokens\""),
            std::string::npos) << refused.status().message();
  LlmSettings half = plain;
  half.profiles.at("main").max_tokens_field = "max_completion_tokens";
  auto temperature = make_client(half)->chat(ask());
  ASSERT_FALSE(temperature.is_ok());
  EXPECT_NE(temperature.status().message().find("add \"temperature\" to llm.models.main.omit"), std::string::npos)
      << temperature.status().message();

  LlmSettings shaped = plain;
  shaped.profiles.at("main").max_tokens_field = "max_completion_tokens";
  shaped.profiles.at("main").omit = {"temperature", "top_p"};
  auto r = make_client(shaped)->chat(ask());
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(server.requests(), 3);
}

TEST(EndpointPreflight, SaysPerProfileWhatWasSentAndWhatTheServerAnswered) {
  FakeOpenAiServer good([](const httplib::Request&, int64_t) { return FakeReply{200, completion_body("OK")}; });
  FakeOpenAiServer o1([](const httplib::Request& req, int64_t) { return openai_reasoning_model(req); });
  FakeOpenAiServer ollama([](const httplib::Request&, int64_t) {
    return FakeReply{404, R"({"error":{"message":"model \"qwen3:8b\" not found, try pulling it first","type":"api_error","param":null,"code":null}})"};
  });
  LlmSettings s = one_profile(good.base_url());
  ModelProfile o = s.profiles.at("main");
  o.name = "o3";
  o.base_url = o1.base_url();
  s.profiles["o3"] = o;
  ModelProfile l = o;
  l.name = "local";
  l.base_url = ollama.base_url();
  s.profiles["local"] = l;
  ModelProfile sim;
  sim.name = "sim";
  sim.provider = "sim";
  sim.model = "sim";
  s.profiles["sim"] = sim;
  auto client = make_client(s);
  auto results = client->preflight({"main", "o3", "local", "sim"});
  ASSERT_EQ(results.size(), 4u);
  EXPECT_TRUE(results[0].status.is_ok());
  EXPECT_EQ(results[0].answer, "OK");
  EXPECT_NE(std::find(results[0].fields.begin(), results[0].fields.end(), "max_tokens"), results[0].fields.end());
  EXPECT_FALSE(results[1].status.is_ok());
  EXPECT_NE(results[1].status.message().find("Unsupported parameter: 'max_tokens'"), std::string::npos) << results[1].status.message();
  EXPECT_FALSE(results[2].status.is_ok());
  EXPECT_NE(results[2].status.message().find("not found, try pulling it first"), std::string::npos) << results[2].status.message();
  EXPECT_TRUE(results[3].status.is_ok());
  EXPECT_TRUE(results[3].simulated);
  // Refusals are not retried; each server saw exactly one request.
  EXPECT_EQ(o1.requests(), 1);
  EXPECT_EQ(ollama.requests(), 1);
  EXPECT_EQ(client->accounting().by_stage().at("preflight").calls, 3);
}

TEST(EndpointPreflight, ProfilesAreCheckedSideBySide) {
  // Each server holds its check until the other's has arrived (10 s at most): checks sent one
  // after another never get there.
  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0;
  bool together = true;
  auto held = [&](const httplib::Request&, int64_t) {
    std::unique_lock lock(mu);
    ++arrived;
    cv.notify_all();
    together = cv.wait_for(lock, std::chrono::seconds(10), [&] { return arrived >= 2; }) && together;
    return FakeReply{200, completion_body("OK")};
  };
  FakeOpenAiServer first(held), second(held);
  LlmSettings s = one_profile(first.base_url());
  ModelProfile other = s.profiles.at("main");
  other.name = "other";
  other.base_url = second.base_url();
  s.profiles["other"] = other;
  auto results = make_client(s)->preflight({"main", "other"});
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].profile, "main");
  EXPECT_EQ(results[1].profile, "other");
  EXPECT_TRUE(results[0].status.is_ok() && results[1].status.is_ok());
  EXPECT_TRUE(together) << "one profile's check waited for the other's answer";
}

TEST(EndpointPreflight, ADeadEndpointFailsInTwoAttempts) {
  int port;
  {
    FakeOpenAiServer probe([](const httplib::Request&, int64_t) { return FakeReply{}; });
    port = probe.port();
  }
  LlmSettings s = one_profile("http://127.0.0.1:" + std::to_string(port) + "/v1");
  s.retry.max_attempts = 10;
  auto clock = std::make_shared<ManualClock>();
  auto results = make_client(s, false, clock)->preflight({"main"});
  ASSERT_EQ(results.size(), 1u);
  EXPECT_FALSE(results[0].status.is_ok());
  EXPECT_NE(results[0].status.message().find("connection"), std::string::npos) << results[0].status.message();
  EXPECT_EQ(clock->sleeps().size(), 1u);  // one backoff: two attempts, not ten
}

TEST(EndpointFailures, TheSameRefusalRepeatedStopsTheClient) {
  FakeOpenAiServer server([](const httplib::Request&, int64_t) {
    return FakeReply{404, R"({"error":{"message":"The model `gpt-9` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}})"};
  });
  LlmSettings s = one_profile(server.base_url());
  s.stop_after_repeated_errors = 3;
  auto client = make_client(s, /*stop_on_fatal=*/true);
  int refused = 0, cancelled = 0;
  for (int i = 0; i < 10; ++i) {
    auto r = client->chat(ask());
    ASSERT_FALSE(r.is_ok());
    if (call_error_kind(r.status()) == CallErrorKind::kCancelled) ++cancelled;
    else ++refused;
  }
  EXPECT_EQ(refused, 3);
  EXPECT_EQ(cancelled, 7);
  EXPECT_EQ(server.requests(), 3);
  auto fatal = client->fatal_error();
  ASSERT_TRUE(fatal.has_value());
  EXPECT_NE(fatal->message().find("does not exist"), std::string::npos) << fatal->message();
  EXPECT_NE(fatal->message().find("\"main\""), std::string::npos);
  EXPECT_NE(fatal->message().find("3 calls in a row"), std::string::npos);
}

TEST(EndpointFailures, DifferentRefusalsOrAnAnswerInBetweenDoNotStop) {
  FakeOpenAiServer server([](const httplib::Request&, int64_t seq) {
    if (seq % 3 == 2) return FakeReply{200, completion_body("SELECT 1")};
    return FakeReply{400, R"({"error":{"message":"bad request"}})"};
  });
  LlmSettings s = one_profile(server.base_url());
  s.stop_after_repeated_errors = 3;
  auto client = make_client(s, true);
  for (int i = 0; i < 9; ++i) (void)client->chat(ask());
  EXPECT_FALSE(client->fatal_error().has_value());
  EXPECT_EQ(server.requests(), 9);
}

TEST(EndpointFailures, ContextOverflowIsItsOwnKindInEachServersWords) {
  const std::vector<std::string> bodies = {
      // vLLM
      R"({"object":"error","message":"This model's maximum context length is 8192 tokens. However, you requested 9216 tokens (5120 in the messages, 4096 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400})",
      // llama.cpp server
      R"({"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":9001,"n_ctx":8192}})",
      // OpenAI
      R"({"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}})"};
  for (const auto& b : bodies) {
    FakeOpenAiServer server([&](const httplib::Request&, int64_t) { return FakeReply{400, b}; });
    auto r = make_client(one_profile(server.base_url()))->chat(ask());
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(call_error_kind(r.status()), CallErrorKind::kContextLength) << b;
    EXPECT_EQ(server.requests(), 1);
  }
}

TEST(EndpointAnswers, ReasoningFieldsPartsAndNullContent) {
  struct Case {
    json message;
    std::string text, reasoning;
    bool from_reasoning;
  };
  const std::vector<Case> cases = {
      // vLLM / DeepSeek with a reasoning parser.
      {{{"role", "assistant"}, {"reasoning_content", "Draft: SELECT 0"}, {"content", "```sql\nSELECT 1\n```"}},
       "```sql\nSELECT 1\n```", "Draft: SELECT 0", false},
      // vLLM >= 0.10, Ollama, OpenRouter: "reasoning".
      {{{"role", "assistant"}, {"reasoning", "think think"}, {"content", "SELECT 2"}}, "SELECT 2", "think think", false},
      // Content as an array of parts (text parts joined; thinking parts are reasoning).
      {{{"role", "assistant"},
        {"content", json::array({{{"type", "thinking"}, {"thinking", json::array({{{"type", "text"}, {"text", "hmm"}}})}},
                                 {{"type", "text"}, {"text", "SELECT "}},
                                 {{"type", "text"}, {"text", "3"}}})}},
       "SELECT 3", "hmm", false},
      // Everything in the reasoning, content null: the tail of the reasoning, flagged.
      {{{"role", "assistant"}, {"content", nullptr}, {"reasoning_content", "So the answer is:\n```sql\nSELECT 4\n```"}},
       "So the answer is:\n```sql\nSELECT 4\n```", "So the answer is:\n```sql\nSELECT 4\n```", true},
  };
  for (const auto& c : cases) {
    auto r = parse_chat_completion(message_body(c.message).dump(), false);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string() << " " << c.message.dump();
    EXPECT_EQ(r->text(), c.text);
    EXPECT_EQ(r->reasoning.at(0), c.reasoning);
    EXPECT_EQ(r->answer_from_reasoning.at(0), c.from_reasoning);
  }
  // Null content and no reasoning at all is still an empty answer.
  auto empty = parse_chat_completion(message_body({{"role", "assistant"}, {"content", nullptr}}).dump(), false);
  ASSERT_FALSE(empty.is_ok());
  EXPECT_EQ(call_error_kind(empty.status()), CallErrorKind::kEmptyContent);
}

TEST(EndpointAnswers, ServerSentEventsAssembleLikeOneAnswer) {
  const std::string sse =
      ": keep-alive\n\n"
      "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"reasoning_content\":\"Let me \"}}]}\n\n"
      "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"think.\"}}]}\n\n"
      "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"```sql\\nSELECT \"}}]}\n\n"
      "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"5\\n```\"},\"finish_reason\":\"stop\"}]}\n\n"
      "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":9}}\n\n"
      "data: [DONE]\n\n";
  auto r = parse_chat_stream(sse, false);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->text(), "```sql\nSELECT 5\n```");
  EXPECT_EQ(r->reasoning.at(0), "Let me think.");
  EXPECT_EQ(r->usage.completion_tokens, 9);
  // Cut off mid-stream: an error, not half an answer.
  auto cut = parse_chat_stream(sse.substr(0, sse.find("SELECT ") + 20), false);
  EXPECT_FALSE(cut.is_ok());

  FakeOpenAiServer server([&](const httplib::Request& req, int64_t) {
    EXPECT_TRUE(json::parse(req.body).value("stream", false));
    return FakeReply{200, sse, {{"Content-Type", "text/event-stream"}}};
  });
  LlmSettings s = one_profile(server.base_url());
  s.profiles.at("main").stream = true;
  auto live = make_client(s)->chat(ask());
  ASSERT_TRUE(live.is_ok()) << live.status().to_string();
  EXPECT_EQ(live->text(), "```sql\nSELECT 5\n```");
}

TEST(EndpointAnswers, ACutAnswerWithACompleteFinalAnswerIsKept) {
  FakeOpenAiServer server([](const httplib::Request&, int64_t) {
    return FakeReply{200, completion_body("Reasoning…\n```sql\nSELECT 6\n```\nAlso, one could", "length")};
  });
  auto r = make_client(one_profile(server.base_url()))->chat(ask());
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->finish_reasons.at(0), "length");
  EXPECT_EQ(server.requests(), 1);
}

TEST(EndpointAnswers, ACutAnswerWithoutOneIsAskedOnceMoreWithADoubledBudget) {
  FakeOpenAiServer server([](const httplib::Request&, int64_t seq) {
    if (seq == 0) return FakeReply{200, message_body({{"role", "assistant"}, {"content", ""}, {"reasoning_content", "Still thinking about"}}, "length").dump()};
    return FakeReply{200, completion_body("```sql\nSELECT 7\n```")};
  });
  auto client = make_client(one_profile(server.base_url()));
  auto r = client->chat(ask());
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->text(), "```sql\nSELECT 7\n```");
  EXPECT_EQ(r->attempts, 2);
  EXPECT_EQ(json::parse(server.bodies().at(0))["max_tokens"], 4096);
  EXPECT_EQ(json::parse(server.bodies().at(1))["max_tokens"], 8192);

  FakeOpenAiServer always_cut([](const httplib::Request&, int64_t) {
    return FakeReply{200, message_body({{"role", "assistant"}, {"content", nullptr}, {"reasoning_content", "thinking"}}, "length").dump()};
  });
  auto failed = make_client(one_profile(always_cut.base_url()))->chat(ask());
  ASSERT_FALSE(failed.is_ok());
  EXPECT_EQ(call_error_kind(failed.status()), CallErrorKind::kTruncated);
  EXPECT_NE(failed.status().message().find("max_tokens"), std::string::npos) << failed.status().message();
  EXPECT_NE(failed.status().message().find("still reasoning"), std::string::npos) << failed.status().message();
  EXPECT_EQ(always_cut.requests(), 2);
}

TEST(EndpointAnswers, AnOSeriesAnswerSpentOnHiddenReasoningIsRetriedThenNamed) {
  // OpenAI's reasoning models return no reasoning text: a budget spent thinking is "length"
  // with empty content.
  FakeOpenAiServer server([](const httplib::Request& req, int64_t) {
    const int64_t budget = json::parse(req.body).value("max_completion_tokens", int64_t{0});
    if (budget < 8000) return FakeReply{200, message_body({{"role", "assistant"}, {"content", ""}}, "length").dump()};
    return FakeReply{200, completion_body("```sql\nSELECT 9\n```")};
  });
  LlmSettings s = one_profile(server.base_url());
  s.profiles.at("main").max_tokens_field = "max_completion_tokens";
  auto r = make_client(s)->chat(ask());
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->text(), "```sql\nSELECT 9\n```");
  EXPECT_EQ(server.requests(), 2);
  s.role_max_tokens["keywords"] = 1000;  // doubled to 2000: still spent
  auto cut = make_client(s)->chat(ask("keywords"));
  ASSERT_FALSE(cut.is_ok());
  EXPECT_EQ(call_error_kind(cut.status()), CallErrorKind::kTruncated);
  EXPECT_NE(cut.status().message().find("before any answer"), std::string::npos) << cut.status().message();
  // The preflight's small budget is spent the same way: still a pass (the request was accepted).
  auto pre = make_client(s)->preflight({"main"});
  ASSERT_EQ(pre.size(), 1u);
  EXPECT_TRUE(pre[0].status.is_ok()) << pre[0].status.message();
}

TEST(EndpointRetries, RetryAfterAsHttpDateAndRetryAfterMs) {
  // An HTTP-date 30 s ahead (second resolution: the wait is 29–31 s).
  std::time_t later = std::time(nullptr) + 30;
  char date[64];
  std::tm tm{};
  gmtime_r(&later, &tm);
  std::strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  std::string date_s = date;
  FakeOpenAiServer server([&](const httplib::Request&, int64_t seq) {
    if (seq == 0) return FakeReply{429, R"({"error":{"message":"rate"}})", {{"Retry-After", date_s}}};
    if (seq == 1) return FakeReply{429, R"({"error":{"message":"rate"}})", {{"retry-after-ms", "1500"}, {"Retry-After", "9"}}};
    return FakeReply{200, completion_body("SELECT 8")};
  });
  LlmSettings s = one_profile(server.base_url());
  s.retry.max_delay_s = 60;
  auto clock = std::make_shared<ManualClock>();
  auto r = make_client(s, false, clock)->chat(ask());
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  double total = std::chrono::duration<double>(clock->total_slept()).count();
  EXPECT_GE(total, 29 + 1.5 - 0.01);
  EXPECT_LE(total, 31 + 1.5 + 0.01);
}

TEST(EndpointRetries, ATimedOutCallIsRetriedAtMostOnce) {
  FakeOpenAiServer server([](const httplib::Request&, int64_t) {
    return FakeReply{200, completion_body("late"), {}, 500ms};
  });
  LlmSettings s = one_profile(server.base_url());
  s.retry.max_attempts = 5;
  s.profiles.at("main").timeout_s = 0.1;
  auto r = make_client(s)->chat(ask());
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(call_error_kind(r.status()), CallErrorKind::kTimeout);
  EXPECT_EQ(server.requests(), 2);
}

TEST(EndpointUse, SimulatedOnlyWhenARoleResolvesToASimProfile) {
  LlmSettings s = one_profile("http://127.0.0.1:9/v1");
  ModelProfile sim;
  sim.name = "unused_sim";
  sim.provider = "sim";
  sim.model = "sim";
  s.profiles["unused_sim"] = sim;
  auto client = make_client(s);
  EXPECT_FALSE(client->any_simulated());
  EXPECT_FALSE(client->any_simulated(client->profiles_for({"generate", "fix"})));
  EXPECT_TRUE(client->any_simulated(client->profiles_for({"generate"}, {"unused_sim"})));
}

}  // namespace
}  // namespace nl2sql::llm
