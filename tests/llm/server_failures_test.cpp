// Inference servers as untidy as real ones, seen from llm::Client: llama.cpp-server's parallel
// slots sharing one context (HTTP 500 "Context size has been exceeded." under load), an error
// event inside a stream, an answer stopped at the context window (llama.cpp's "truncated"), an
// answer cut at its budget and asked again, and an endpoint that dies and comes back. The
// messages and fields are the servers' own (llama.cpp tools/server, vLLM, OpenAI).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include "support/fake_openai_server.h"
#include "nl2sql/core/config.h"
#include "nl2sql/llm/client.h"

namespace nl2sql::llm {
namespace {

using nlohmann::json;
using testing::completion_body;
using testing::FakeOpenAiServer;
using testing::FakeReply;
using namespace std::chrono_literals;

const char* kSharedContextFull =
    R"({"error":{"code":500,"message":"Context size has been exceeded.","type":"server_error"}})";

LlmSettings one_profile(const std::string& base_url, int64_t max_in_flight = 16) {
  LlmSettings s;
  ModelProfile p;
  p.name = "llamacpp";
  p.base_url = base_url;
  p.model = "tiny";
  p.api_key_env = "";
  p.timeout_s = 5;
  p.max_in_flight = max_in_flight;
  s.profiles["llamacpp"] = p;
  s.default_profile = "llamacpp";
  s.max_in_flight = 64;
  s.retry.max_attempts = 3;
  s.retry.base_delay_s = 0.005;
  s.retry.max_delay_s = 0.02;
  s.cache.mode = CacheMode::kOff;
  return s;
}

ChatRequest ask(int i = 0) {
  ChatRequest r;
  r.role = "generate";
  r.messages = {{"user", "Write the query " + std::to_string(i) + "."}};
  r.stage = "generate";
  r.question_id = "q" + std::to_string(i);
  return r;
}

std::unique_ptr<Client> make_client(const LlmSettings& s, std::shared_ptr<Clock> clock = nullptr) {
  ClientOptions o;
  o.clock = clock ? clock : std::make_shared<SystemClock>();
  o.stop_on_fatal_error = true;
  auto c = Client::create(s, o);
  EXPECT_TRUE(c.is_ok()) << c.status().to_string();
  return std::move(c).value();
}

// llama.cpp-server with 4 slots sharing one KV cache: a fifth request at once fills it.
TEST(ServerFailures, SharedSlotContextFullIsBackPressureAndEveryCallIsAnswered) {
  std::atomic<int> active{0};
  std::atomic<int> refused{0};
  FakeOpenAiServer server(
      [&](const httplib::Request&, int64_t) {
        if (active.fetch_add(1) >= 4) {
          active.fetch_sub(1);
          ++refused;
          return FakeReply(500, kSharedContextFull);
        }
        std::this_thread::sleep_for(15ms);
        active.fetch_sub(1);
        return FakeReply(200, completion_body("```sql\nSELECT 1\n```", "stop", 100, 20));
      },
      /*threads=*/40);
  auto client = make_client(one_profile(server.base_url(), /*max_in_flight=*/32));
  std::vector<std::future<Result<ChatResponse>>> calls;
  for (int i = 0; i < 32; ++i)
    calls.push_back(std::async(std::launch::async, [&, i] { return client->chat(ask(i)); }));
  int ok = 0;
  for (auto& c : calls) {
    auto r = c.get();
    EXPECT_TRUE(r.is_ok()) << r.status().message();
    ok += r.is_ok();
  }
  EXPECT_EQ(ok, 32);
  ASSERT_GT(refused.load(), 0) << "the fake never overflowed: the test checks nothing";
  auto loads = client->profile_loads();
  ASSERT_EQ(loads.size(), 1u);
  EXPECT_EQ(loads[0].overloads, refused.load());
  EXPECT_EQ(loads[0].max_in_flight, 32);
  EXPECT_LT(loads[0].lowest_in_flight, 32) << "overload lowered the requests in flight";
  // Overload retries spend no attempt budget (3 attempts would have failed most calls here).
  EXPECT_EQ(client->accounting().total().errors, 0);
}

// A prompt the slot's window cannot hold even alone stays the context-length path.
TEST(ServerFailures, AWindowTooSmallForTheRequestAloneIsAContextLengthRefusal) {
  FakeOpenAiServer server([](const httplib::Request&, int64_t) {
    return FakeReply(400, R"({"error":{"code":400,"message":"request (4390 tokens) exceeds the available context size (4096 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":4390,"n_ctx":4096}})");
  });
  auto client = make_client(one_profile(server.base_url()));
  auto r = client->chat(ask());
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(call_error_kind(r.status()), CallErrorKind::kContextLength) << r.status().message();
  EXPECT_EQ(server.requests(), 1);
}

std::string sse(const std::vector<json>& events, bool done = true) {
  std::string s;
  for (const auto& e : events) s += "data: " + e.dump() + "\n\n";
  if (done) s += "data: [DONE]\n\n";
  return s;
}

json delta(const std::string& text) {
  return {{"choices", {{{"index", 0}, {"delta", {{"content", text}}}}}}};
}

// vLLM and llama.cpp report a failure after the 200 headers as an error event in the stream.
TEST(ServerFailures, AnErrorEventInAStreamIsRetriedAsItsStatusWouldBe) {
  FakeOpenAiServer server([](const httplib::Request&, int64_t seq) {
    if (seq == 0)
      return FakeReply(200, sse({delta("SEL"), {{"error", {{"code", 503}, {"message", "Service Unavailable"}, {"type", "unavailable_error"}}}}}, false),
                       {{"Content-Type", "text/event-stream"}});
    if (seq == 1)
      return FakeReply(200, sse({{{"error", {{"code", 500}, {"message", "Internal server error"}, {"type", "server_error"}}}}}, false),
                       {{"Content-Type", "text/event-stream"}});
    json last = delta(" 1\n```");
    last["choices"][0]["finish_reason"] = "stop";
    json usage = {{"choices", json::array()}, {"usage", {{"prompt_tokens", 30}, {"completion_tokens", 6}}}};
    return FakeReply(200, sse({delta("```sql\nSELECT"), last, usage}), {{"Content-Type", "text/event-stream"}});
  });
  LlmSettings s = one_profile(server.base_url());
  s.profiles["llamacpp"].stream = true;
  auto client = make_client(s);
  auto r = client->chat(ask());
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->attempts, 3);
  EXPECT_NE(r->text().find("SELECT 1"), std::string::npos);
  EXPECT_EQ(client->profile_loads()[0].overloads, 1) << "the 503 inside the stream is overload";

  // A client error inside the stream is refused as the same 400 would be: not retried.
  FakeOpenAiServer refusing([](const httplib::Request&, int64_t) {
    return FakeReply(200, sse({{{"error", {{"code", 400}, {"message", "invalid grammar"}, {"type", "invalid_request_error"}}}}}, false),
                     {{"Content-Type", "text/event-stream"}});
  });
  s.profiles["llamacpp"].base_url = refusing.base_url();
  auto client2 = make_client(s);
  auto refused = client2->chat(ask());
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(call_error_kind(refused.status()), CallErrorKind::kHttpClient) << refused.status().message();
  EXPECT_EQ(refusing.requests(), 1);
}

// llama.cpp stops at the slot's window (prompt + generated = n_ctx) and says so: doubling the
// budget cannot help, and the tokens it processed are counted.
TEST(ServerFailures, AnAnswerStoppedAtTheWindowIsNotRetriedWithADoubledBudget) {
  FakeOpenAiServer server([](const httplib::Request&, int64_t) {
    json body = json::parse(completion_body("Let me think about the tables", "length", 1590, 2505));
    body["truncated"] = true;
    return FakeReply(200, body.dump());
  });
  LlmSettings s = one_profile(server.base_url());
  s.profiles["llamacpp"].price_in_per_mtok = 1.0;
  s.profiles["llamacpp"].price_out_per_mtok = 2.0;
  auto client = make_client(s);
  CallSpend spent;
  auto r = client->chat(ask(), &spent);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(call_error_kind(r.status()), CallErrorKind::kContextLength) << r.status().message();
  EXPECT_NE(r.status().message().find("context window"), std::string::npos) << r.status().message();
  EXPECT_EQ(r.status().message().find("raise llm.models"), std::string::npos) << "not the output-budget advice";
  EXPECT_EQ(server.requests(), 1) << "no second request with a doubled max_tokens";
  EXPECT_EQ(spent.usage.prompt_tokens, 1590);
  EXPECT_EQ(spent.usage.completion_tokens, 2505);
  auto total = client->accounting().total();
  EXPECT_EQ(total.prompt_tokens, 1590) << "a failed call's tokens are counted";
  EXPECT_EQ(total.completion_tokens, 2505);
  EXPECT_NEAR(total.cost_usd, (1590 * 1.0 + 2505 * 2.0) / 1e6, 1e-12);

  // Without the flag, prompt + answer reaching context_tokens is the same stop.
  FakeOpenAiServer silent([](const httplib::Request&, int64_t) {
    return FakeReply(200, completion_body("Let me think", "length", 1590, 2505));
  });
  s.profiles["llamacpp"].base_url = silent.base_url();
  s.profiles["llamacpp"].context_tokens = 4096;
  auto client2 = make_client(s);
  auto r2 = client2->chat(ask());
  ASSERT_FALSE(r2.is_ok());
  EXPECT_EQ(call_error_kind(r2.status()), CallErrorKind::kContextLength) << r2.status().message();
  EXPECT_EQ(silent.requests(), 1);
}

// An answer cut at its budget is asked again with twice the budget: both attempts were
// processed and billed, and both are counted.
TEST(ServerFailures, EveryAttemptOfACallIsCounted) {
  FakeOpenAiServer server([](const httplib::Request&, int64_t seq) {
    if (seq == 0) return FakeReply(200, completion_body("Thinking about it", "length", 300, 1024));
    return FakeReply(200, completion_body("```sql\nSELECT 1\n```", "stop", 300, 700));
  });
  auto client = make_client(one_profile(server.base_url()));
  auto r = client->chat(ask());
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(server.requests(), 2);
  EXPECT_EQ(r->usage.prompt_tokens, 600);
  EXPECT_EQ(r->usage.completion_tokens, 1724);
  EXPECT_EQ(client->accounting().total().prompt_tokens, 600);
  EXPECT_EQ(client->accounting().total().completion_tokens, 1724);
}

// A port on 127.0.0.1 where a server listened a moment ago: connections are refused now.
int closed_port() {
  FakeOpenAiServer gone([](const httplib::Request&, int64_t) { return FakeReply(200, completion_body("x")); });
  return gone.port();
}

// A dead endpoint: the calls stop sending, one probes with backoff, and after
// llm.endpoint_down_wait_s the client stops with the profile named — a handful of requests.
TEST(ServerFailures, ADeadEndpointStopsTheClientAfterAFewProbes) {
  const int port = closed_port();
  LlmSettings s = one_profile("http://127.0.0.1:" + std::to_string(port) + "/v1");
  s.endpoint_down_wait_s = 1.0;
  auto client = make_client(s);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::future<Result<ChatResponse>>> calls;
  for (int i = 0; i < 12; ++i)
    calls.push_back(std::async(std::launch::async, [&, i] { return client->chat(ask(i)); }));
  for (auto& c : calls) EXPECT_FALSE(c.get().is_ok());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(secs, 5.0);
  ASSERT_TRUE(client->fatal_error().has_value());
  EXPECT_NE(client->fatal_error()->message().find("stopped answering"), std::string::npos)
      << client->fatal_error()->message();
  EXPECT_NE(client->fatal_error()->message().find("\"llamacpp\""), std::string::npos);
  // 12 calls with 3 attempts each would be 36 posts; down, they wait while one probes.
  EXPECT_LE(client->accounting().total().attempts, 24);
}

// The endpoint restarts while it is probed: the calls go on and every one is answered.
TEST(ServerFailures, AnEndpointThatComesBackWhileProbedLosesNoCall) {
  const int port = closed_port();
  LlmSettings s = one_profile("http://127.0.0.1:" + std::to_string(port) + "/v1");
  s.endpoint_down_wait_s = 8.0;
  auto client = make_client(s);
  std::vector<std::future<Result<ChatResponse>>> calls;
  for (int i = 0; i < 8; ++i)
    calls.push_back(std::async(std::launch::async, [&, i] { return client->chat(ask(i)); }));
  std::this_thread::sleep_for(700ms);
  FakeOpenAiServer back([](const httplib::Request&, int64_t) {
    return FakeReply(200, completion_body("```sql\nSELECT 1\n```"));
  }, 16, port);
  for (auto& c : calls) {
    auto r = c.get();
    EXPECT_TRUE(r.is_ok()) << r.status().message();
  }
  EXPECT_FALSE(client->fatal_error().has_value());
  client.reset();  // its keep-alive connections closed before the server stops
}

TEST(ServerFailures, InFlightLimitCanBeLoweredAndRaised) {
  InFlightLimit limit(4);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(limit.acquire().is_ok());
  limit.set_max(2);
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    ASSERT_TRUE(limit.acquire().is_ok());
    got = true;
  });
  limit.release();  // 3 in flight, over the new limit of 2: the waiter keeps waiting
  limit.release();  // 2: still at the limit
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(got.load());
  limit.release();  // 1: a slot under the limit goes to the waiter
  waiter.join();
  EXPECT_TRUE(got.load());
  EXPECT_EQ(limit.in_flight(), 2);
  limit.set_max(8);
  EXPECT_EQ(limit.max(), 8);
}

// An output budget as large as the window leaves the prompt no room: refused at config check,
// naming both keys (it used to pass and shrink every prompt budget to its floor).
TEST(ServerFailures, AnOutputBudgetThatFillsTheWindowIsRefusedAtConfigCheck) {
  core::Config config(json::parse(R"({"llm": {"models": {"local": {"base_url": "http://127.0.0.1:9/v1",
      "model": "m", "api_key_env": "", "context_tokens": 4096, "max_tokens": 4096}}, "default_profile": "local"}})"));
  auto s = load_llm_settings(config);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.status().message().find("llm.models.local.max_tokens"), std::string::npos) << s.status().message();
  EXPECT_NE(s.status().message().find("llm.models.local.context_tokens"), std::string::npos) << s.status().message();
  config.set("llm.models.local.max_tokens", 1024);
  config.set("llm.models.local.role_max_tokens", json{{"generate", 8192}});
  auto role = load_llm_settings(config);
  ASSERT_FALSE(role.is_ok());
  EXPECT_NE(role.status().message().find("role_max_tokens.generate"), std::string::npos) << role.status().message();
  config.set("llm.models.local.role_max_tokens", json::object());
  EXPECT_TRUE(load_llm_settings(config).is_ok());
}

}  // namespace
}  // namespace nl2sql::llm
