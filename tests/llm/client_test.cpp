// llm::Client against the in-process fake server: answers, every retry and error path,
// concurrency and rate limits, cancellation, and secret redaction.
#include "nl2sql/llm/client.h"

#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "support/fake_openai_server.h"
#include "nl2sql/core/log.h"
#include "support/test_env.h"

namespace nl2sql::llm {
namespace {

using testing::completion_body;
using testing::FakeOpenAiServer;
using testing::FakeReply;
using namespace std::chrono_literals;

LlmSettings settings_for(const std::string& base_url, int max_attempts = 3) {
  LlmSettings s;
  ModelProfile p;
  p.name = "main";
  p.base_url = base_url;
  p.model = "fake-model";
  p.api_key_env = "";
  p.price_in_per_mtok = 2.0;
  p.price_out_per_mtok = 8.0;
  p.timeout_s = 5;
  s.profiles["main"] = p;
  s.default_profile = "main";
  s.retry.max_attempts = max_attempts;
  s.retry.base_delay_s = 1.0;
  s.cache.mode = CacheMode::kOff;
  return s;
}

ChatRequest ask(const std::string& text, const std::string& qid = "q1") {
  ChatRequest r;
  r.role = "generate";
  r.messages = {{"system", "You write SQL."}, {"user", text}};
  r.stage = "generate";
  r.question_id = qid;
  return r;
}

struct Harness {
  explicit Harness(FakeOpenAiServer::Script script, int max_attempts = 3)
      : server(std::move(script)), clock(std::make_shared<ManualClock>()) {
    settings = settings_for(server.base_url(), max_attempts);
  }
  std::unique_ptr<Client> client() {
    ClientOptions o;
    o.clock = clock;
    auto c = Client::create(settings, o);
    EXPECT_TRUE(c.is_ok()) << c.status().to_string();
    return std::move(c).value();
  }
  FakeOpenAiServer server;
  std::shared_ptr<ManualClock> clock;
  LlmSettings settings;
};

TEST(LlmClient, ParsesAnswerUsageAndCost) {
  Harness h([](const httplib::Request&, int64_t) {
    return FakeReply{200, completion_body("```sql\nSELECT 1\n```", "stop", 1000, 500)};
  });
  auto client = h.client();
  auto r = client->chat(ask("How many?"));
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->text(), "```sql\nSELECT 1\n```");
  EXPECT_EQ(r->usage.prompt_tokens, 1000);
  EXPECT_EQ(r->usage.completion_tokens, 500);
  EXPECT_NEAR(r->cost_usd, (1000 * 2.0 + 500 * 8.0) / 1e6, 1e-12);
  EXPECT_EQ(r->attempts, 1);
  EXPECT_EQ(r->provider, "openai");
  EXPECT_FALSE(r->simulated());
  auto body = nlohmann::json::parse(h.server.bodies().at(0));
  EXPECT_EQ(body["model"], "fake-model");
  EXPECT_EQ(body["messages"][1]["content"], "How many?");
  EXPECT_EQ(body["temperature"], 0.0);
  EXPECT_EQ(body["max_tokens"], 4096);  // the generate role's default budget
  EXPECT_FALSE(body.contains("n"));
  EXPECT_EQ(h.server.authorizations().at(0), "");  // no key configured: no header
  auto totals = client->accounting().total();
  EXPECT_EQ(totals.calls, 1);
  EXPECT_EQ(totals.prompt_tokens, 1000);
  EXPECT_EQ(client->accounting().by_stage().at("generate").completion_tokens, 500);
  EXPECT_EQ(client->accounting().by_question().at("q1").calls, 1);
}

TEST(LlmClient, RequestBodyCarriesOverrides) {
  ModelProfile p;
  p.model = "m";
  p.temperature = 0.2;
  ChatRequest r;
  r.messages = {{"user", "hi"}};
  r.temperature = 0.9;
  r.top_p = 0.5;
  r.max_tokens = 64;
  r.n = 3;
  r.seed = 11;
  r.stop = {";"};
  auto body = nlohmann::json::parse(build_chat_body(p, r));
  EXPECT_EQ(body["temperature"], 0.9);
  EXPECT_EQ(body["top_p"], 0.5);
  EXPECT_EQ(body["max_tokens"], 64);
  EXPECT_EQ(body["n"], 3);
  EXPECT_EQ(body["seed"], 11);
  EXPECT_EQ(body["stop"], nlohmann::json::array({";"}));
  EXPECT_EQ(body["messages"], nlohmann::json::parse(R"([{"role":"user","content":"hi"}])"));
}

TEST(LlmClient, SamplesOfOnePromptCarryTheirOwnSeed) {
  ModelProfile p;
  p.model = "m";
  p.temperature = 0.7;
  ChatRequest r;
  r.messages = {{"user", "hi"}};
  // Sample 0 as before; later samples at a temperature above 0 carry their index as the seed.
  EXPECT_FALSE(nlohmann::json::parse(build_chat_body(p, r)).contains("seed"));
  r.sample_index = 2;
  auto second = nlohmann::json::parse(build_chat_body(p, r));
  EXPECT_EQ(second["seed"], 2);
  r.sample_index = 3;
  EXPECT_NE(build_chat_body(p, r), second.dump());
  // An explicit seed wins; temperature 0, or a profile that omits seed or temperature, sends none.
  r.seed = 11;
  EXPECT_EQ(nlohmann::json::parse(build_chat_body(p, r))["seed"], 11);
  r.seed.reset();
  r.temperature = 0.0;
  EXPECT_FALSE(nlohmann::json::parse(build_chat_body(p, r)).contains("seed"));
  r.temperature.reset();
  p.omit = {"seed"};
  EXPECT_FALSE(nlohmann::json::parse(build_chat_body(p, r)).contains("seed"));
  p.omit = {"temperature"};
  EXPECT_FALSE(nlohmann::json::parse(build_chat_body(p, r)).contains("seed"));
}

TEST(LlmClient, HonoursRetryAfterOn429) {
  Harness h([](const httplib::Request&, int64_t seq) {
    if (seq == 0) return FakeReply{429, R"({"error":{"message":"slow down"}})", {{"Retry-After", "7"}}};
    return FakeReply{200, completion_body("SELECT 2")};
  });
  auto client = h.client();
  auto r = client->chat(ask("q"));
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->attempts, 2);
  EXPECT_EQ(h.server.requests(), 2);
  EXPECT_EQ(h.clock->total_slept(), std::chrono::seconds(7));
}

TEST(LlmClient, RetriesServerErrorsWithBoundedJitteredBackoffThenFails) {
  Harness h([](const httplib::Request&, int64_t) {
    return FakeReply{500, R"({"error":{"message":"boom"}})"};
  }, /*max_attempts=*/4);
  auto client = h.client();
  auto r = client->chat(ask("q"));
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(call_error_kind(r.status()), CallErrorKind::kServer);
  EXPECT_EQ(r.status().code(), ErrorCode::kUnavailable);
  EXPECT_NE(r.status().message().find("boom"), std::string::npos);
  EXPECT_NE(r.status().message().find("after 4 attempts"), std::string::npos);
  EXPECT_EQ(h.server.requests(), 4);
  // Three backoffs: attempt k waits in [base*2^(k-1)/2, base*2^(k-1)], sliced into <= 250 ms.
  double total = std::chrono::duration<double>(h.clock->total_slept()).count();
  EXPECT_GE(total, 0.5 + 1.0 + 2.0);
  EXPECT_LE(total, 1.0 + 2.0 + 4.0);
  EXPECT_EQ(client->accounting().total().errors, 1);
}

TEST(LlmClient, SlowAnswerPastTimeoutIsATimeout) {
  Harness h([](const httplib::Request&, int64_t) {
    return FakeReply{200, completion_body("late"), {}, 600ms};
  }, /*max_attempts=*/1);
  h.settings.profiles["main"].timeout_s = 0.15;
  auto client = h.client();
  auto r = client->chat(ask("q"));
  // Not "late": the client gave up before the answer came (and did not retry).
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(call_error_kind(r.status()), CallErrorKind::kTimeout) << r.status().to_string();
  EXPECT_EQ(r.status().code(), ErrorCode::kTimeout);
  EXPECT_EQ(h.server.requests(), 1);
}

TEST(LlmClient, MalformedAnswersAreTypedErrorsAndNotRetried) {
  struct Case {
    std::string body;
    CallErrorKind kind;
  };
  std::vector<Case> cases = {
      {completion_body("SELECT 1").substr(0, 40), CallErrorKind::kNotJson},  // truncated JSON
      {"<html>Bad gateway</html>", CallErrorKind::kNotJson},
      {R"({"choices":[]})", CallErrorKind::kEmptyChoices},
      {R"({"object":"chat.completion"})", CallErrorKind::kMissingField},
      {R"({"choices":[{"message":{"role":"assistant"}}]})", CallErrorKind::kMissingField},
      {completion_body(""), CallErrorKind::kEmptyContent},
      {completion_body("SELECT name FROM t WHERE", "length"), CallErrorKind::kTruncated},
  };
  for (const auto& c : cases) {
    Harness h([&](const httplib::Request&, int64_t) { return FakeReply{200, c.body}; });
    auto client = h.client();
    auto r = client->chat(ask("q"));
    ASSERT_FALSE(r.is_ok()) << c.body;
    EXPECT_EQ(call_error_kind(r.status()), c.kind) << r.status().to_string();
    EXPECT_TRUE(is_malformed_answer(call_error_kind(r.status())));
    // A cut answer is asked once more with a doubled budget; nothing else is retried.
    EXPECT_EQ(h.server.requests(), c.kind == CallErrorKind::kTruncated ? 2 : 1);
  }
}

TEST(LlmClient, TruncatedAnswerAcceptedWhenAsked) {
  Harness h([](const httplib::Request&, int64_t) {
    return FakeReply{200, completion_body("partial", "length")};
  });
  auto client = h.client();
  auto req = ask("q");
  req.accept_truncated = true;
  auto r = client->chat(req);
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->finish_reasons.at(0), "length");
}

TEST(LlmClient, UnauthorizedIsNotRetriedAndNamesProfileStatusAndServerMessage) {
  Harness h([](const httplib::Request&, int64_t) {
    return FakeReply{401, R"({"error":{"message":"Incorrect API key provided"}})"};
  });
  auto client = h.client();
  auto r = client->chat(ask("q"));
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(call_error_kind(r.status()), CallErrorKind::kAuth);
  EXPECT_EQ(r.status().code(), ErrorCode::kPermission);
  const std::string m = r.status().message();
  EXPECT_NE(m.find("\"main\""), std::string::npos) << m;
  EXPECT_NE(m.find("HTTP 401"), std::string::npos) << m;
  EXPECT_NE(m.find("Incorrect API key provided"), std::string::npos) << m;
  EXPECT_EQ(h.server.requests(), 1);
  EXPECT_EQ(h.clock->total_slept(), ManualClock::Duration(0));
}

TEST(LlmClient, BadRequestIsNotRetried) {
  Harness h([](const httplib::Request&, int64_t) {
    return FakeReply{400, R"({"error":{"message":"unknown model"}})"};
  });
  auto client = h.client();
  auto r = client->chat(ask("q"));
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(call_error_kind(r.status()), CallErrorKind::kHttpClient);
  EXPECT_EQ(h.server.requests(), 1);
}

TEST(LlmClient, ConnectionRefusedIsRetriedThenAConnectionError) {
  int port;
  {
    FakeOpenAiServer probe([](const httplib::Request&, int64_t) { return FakeReply{}; });
    port = probe.port();
  }  // closed: nothing listens there now
  LlmSettings s = settings_for("http://127.0.0.1:" + std::to_string(port) + "/v1", 2);
  ClientOptions o;
  auto clock = std::make_shared<ManualClock>();
  o.clock = clock;
  auto client = Client::create(s, o).value();
  auto r = client->chat(ask("q"));
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(call_error_kind(r.status()), CallErrorKind::kConnection) << r.status().to_string();
  EXPECT_EQ(clock->sleeps().empty(), false);
}

TEST(LlmClient, NeverMoreInFlightThanTheProfileAllows) {
  Harness h([](const httplib::Request&, int64_t) {
    return FakeReply{200, completion_body("SELECT 1"), {}, 40ms};
  });
  h.settings.profiles["main"].max_in_flight = 3;
  auto client = h.client();
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 12; ++i)
    threads.emplace_back([&, i] {
      if (client->chat(ask("q" + std::to_string(i))).is_ok()) ++ok;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 12);
  EXPECT_LE(h.server.peak_in_flight(), 3);
  EXPECT_GE(h.server.peak_in_flight(), 2);  // the limit is not serialising everything
  EXPECT_LE(client->peak_in_flight(), 3);
}

TEST(LlmClient, ThirtyTwoInFlightReallyRunConcurrently) {
  // The server holds the first requests until 32 are in flight at once (a barrier with a
  // timeout), so the test proves 32 concurrent calls without depending on timing.
  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0;
  FakeOpenAiServer server([&](const httplib::Request&, int64_t) {
    std::unique_lock lock(mu);
    ++arrived;
    cv.notify_all();
    cv.wait_for(lock, 5s, [&] { return arrived >= 32; });
    return FakeReply{200, completion_body("SELECT 1")};
  }, /*threads=*/48);
  auto s = settings_for(server.base_url());
  s.profiles["main"].max_in_flight = 32;
  ClientOptions o;
  o.clock = std::make_shared<ManualClock>();
  auto client = Client::create(s, o).value();
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 64; ++i) {
    threads.emplace_back([&, i] {
      if (client->chat(ask("q" + std::to_string(i))).is_ok()) ++ok;
    });
    // cpp-httplib listens with a tiny backlog: 32 simultaneous connects would overflow it and
    // cost a 1 s SYN retransmit. Staggering the first connections keeps the test fast.
    if (i < 32) std::this_thread::sleep_for(2ms);
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 64);
  EXPECT_EQ(server.peak_in_flight(), 32);
  EXPECT_EQ(client->peak_in_flight(), 32);
}

// Waits (bounded) until `n` callers are queued on `limit`.
bool wait_for_waiters(InFlightLimit& limit, int64_t n) {
  for (int i = 0; i < 5000 && limit.waiting() < n; ++i) std::this_thread::sleep_for(1ms);
  return limit.waiting() == n;
}

TEST(InFlightLimit, AFreedSlotGoesToTheLowestRankThenTheEarliestArrival) {
  InFlightLimit limit(1);
  ASSERT_TRUE(limit.acquire().is_ok());
  std::mutex mu;
  std::vector<std::string> served;
  std::vector<std::thread> threads;
  // Queued in this order while the only slot is held.
  const std::vector<std::pair<std::string, int64_t>> callers = {
      {"rank2", 2}, {"rank0-first", 0}, {"rank1", 1}, {"rank0-second", 0}};
  for (const auto& [name, rank] : callers) {
    threads.emplace_back([&, name = name, rank = rank] {
      ASSERT_TRUE(limit.acquire(SlotPriority{rank}).is_ok());
      {
        std::lock_guard lock(mu);
        served.push_back(name);
      }
      limit.release();
    });
    ASSERT_TRUE(wait_for_waiters(limit, static_cast<int64_t>(threads.size())));
  }
  limit.release();
  for (auto& t : threads) t.join();
  EXPECT_EQ(served, (std::vector<std::string>{"rank0-first", "rank0-second", "rank1", "rank2"}));
  EXPECT_EQ(limit.in_flight(), 0);
  EXPECT_EQ(limit.peak(), 1);
}

TEST(InFlightLimit, ANewcomerDoesNotTakeASlotPastTheQueueAndCancelWakesEveryWaiter) {
  InFlightLimit limit(1);
  ASSERT_TRUE(limit.acquire().is_ok());
  std::atomic<int> cancelled{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&] {
      if (limit.acquire().code() == ErrorCode::kCancelled) ++cancelled;
    });
    ASSERT_TRUE(wait_for_waiters(limit, i + 1));
  }
  limit.cancel();
  for (auto& t : threads) t.join();
  EXPECT_EQ(cancelled.load(), 3);
  EXPECT_EQ(limit.waiting(), 0);
  EXPECT_EQ(limit.acquire().code(), ErrorCode::kCancelled);
}

TEST(LlmClient, GlobalLimitCapsAllProfilesTogether) {
  Harness h([](const httplib::Request&, int64_t) {
    return FakeReply{200, completion_body("SELECT 1"), {}, 30ms};
  });
  auto second = h.settings.profiles["main"];
  second.name = "other";
  h.settings.profiles["other"] = second;
  h.settings.profiles["main"].max_in_flight = 4;
  h.settings.profiles["other"].max_in_flight = 4;
  h.settings.max_in_flight = 2;
  auto client = h.client();
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&, i] {
      auto req = ask("q" + std::to_string(i));
      req.profile = i % 2 ? "main" : "other";
      EXPECT_TRUE(client->chat(req).is_ok());
    });
  for (auto& t : threads) t.join();
  EXPECT_LE(h.server.peak_in_flight(), 2);
}

// A transport that answers at once, for rate-limit arithmetic without a network.
class InstantTransport : public Transport {
 public:
  Result<HttpResponse> post(const HttpRequest&) override {
    ++posts;
    return HttpResponse{200, {}, completion_body("SELECT 1", "stop", 100, 20)};
  }
  std::atomic<int> posts{0};
};

TEST(LlmClient, RequestsPerMinuteBucketWaitsOnTheInjectedClock) {
  auto s = settings_for("http://127.0.0.1:9/v1");
  s.profiles["main"].rpm = 60;  // one per second after a burst of 60
  auto clock = std::make_shared<ManualClock>();
  auto transport = std::make_shared<InstantTransport>();
  ClientOptions o;
  o.clock = clock;
  o.transport = transport;
  auto client = Client::create(s, o).value();
  for (int i = 0; i < 60; ++i) ASSERT_TRUE(client->chat(ask("q" + std::to_string(i))).is_ok());
  EXPECT_EQ(clock->total_slept(), ManualClock::Duration(0));
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(client->chat(ask("more" + std::to_string(i))).is_ok());
  double slept = std::chrono::duration<double>(clock->total_slept()).count();
  EXPECT_NEAR(slept, 10.0, 0.3);  // 10 more requests at 1/s
  EXPECT_EQ(transport->posts.load(), 70);
}

TEST(LlmClient, TokensPerMinuteBucketCountsCompletionTokens) {
  auto s = settings_for("http://127.0.0.1:9/v1");
  s.profiles["main"].tpm = 1200;  // 20 tokens per second
  auto clock = std::make_shared<ManualClock>();
  ClientOptions o;
  o.clock = clock;
  o.transport = std::make_shared<InstantTransport>();
  auto client = Client::create(s, o).value();
  // Each call costs 100 prompt + 20 completion = 120 tokens: 10 calls drain 1200 tokens.
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(client->chat(ask("q" + std::to_string(i))).is_ok());
  EXPECT_EQ(clock->total_slept(), ManualClock::Duration(0));
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(client->chat(ask("r" + std::to_string(i))).is_ok());
  double slept = std::chrono::duration<double>(clock->total_slept()).count();
  // Five more calls need 600 tokens at 20/s: about 30 s, give or take one call's worth.
  EXPECT_GE(slept, 24.0);
  EXPECT_LE(slept, 36.0);
}

TEST(LlmClient, CancelStopsNewCalls) {
  Harness h([](const httplib::Request&, int64_t) { return FakeReply{200, completion_body("x")}; });
  auto client = h.client();
  client->cancel();
  auto r = client->chat(ask("q"));
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(call_error_kind(r.status()), CallErrorKind::kCancelled);
  EXPECT_EQ(h.server.requests(), 0);
}

TEST(LlmClient, ExternalCancelFlagAbandonsBackoff) {
  std::atomic<bool> stop{false};
  Harness h([&](const httplib::Request&, int64_t) {
    stop.store(true);  // "Ctrl-C" arrives while the first attempt is in flight
    return FakeReply{503, "{}"};
  }, 5);
  ClientOptions o;
  o.clock = h.clock;
  o.cancel_flag = &stop;
  auto client = Client::create(h.settings, o).value();
  auto r = client->chat(ask("q"));
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(call_error_kind(r.status()), CallErrorKind::kCancelled);
  EXPECT_EQ(h.server.requests(), 1);
}

TEST(LlmClient, CancelAbandonsAnInFlightRequestPromptly) {
  // The server holds its answer for a minute (cut short when the test ends).
  Harness h([](const httplib::Request&, int64_t) {
    return FakeReply{200, completion_body("too late"), {}, 60000ms};
  });
  auto client = h.client();
  Result<ChatResponse> result = internal_error("not run");
  std::thread caller([&] { result = client->chat(ask("q")); });
  for (int i = 0; i < 2000 && h.server.in_flight() == 0; ++i) std::this_thread::sleep_for(5ms);
  ASSERT_EQ(h.server.in_flight(), 1);
  client->cancel();
  caller.join();
  // The call ended while the server was still holding the answer: abandoned, not awaited.
  EXPECT_EQ(h.server.in_flight(), 1);
  ASSERT_FALSE(result.is_ok());
  EXPECT_EQ(call_error_kind(result.status()), CallErrorKind::kCancelled) << result.status().to_string();
}

TEST(LlmClient, EmbeddingsKeepInputOrder) {
  Harness h([](const httplib::Request& req, int64_t) {
    EXPECT_EQ(req.path, "/v1/embeddings");
    return FakeReply{200, R"({"data":[{"index":1,"embedding":[0.5,0.25]},{"index":0,"embedding":[1,2]}],"usage":{"prompt_tokens":6}})"};
  });
  auto client = h.client();
  EmbeddingRequest e;
  e.inputs = {"first", "second"};
  auto r = client->embed(e);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  ASSERT_EQ(r->vectors.size(), 2u);
  EXPECT_EQ(r->vectors[0], (std::vector<float>{1, 2}));
  EXPECT_EQ(r->vectors[1], (std::vector<float>{0.5f, 0.25f}));
  EXPECT_EQ(r->usage.prompt_tokens, 6);
}

// --- secrets ---

std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(LlmClient, ApiKeyIsSentButNeverWrittenAnywhere) {
  const std::string key = "sk-test-7Hq2ZpL9wX4vN8rT1";
  ::setenv("NL2SQL_TEST_LLM_KEY", key.c_str(), 1);
  nl2sql::testing::TempDir tmp;
  core::init_logging({"debug", false, (tmp / "run.log").string()});
  {
    // The server echoes what it received, as some proxies do in their error messages.
    FakeOpenAiServer server([](const httplib::Request& req, int64_t seq) {
      if (seq == 0) return FakeReply{200, completion_body("SELECT 1")};
      if (seq == 1) return FakeReply{500, R"({"error":{"message":"bad header )" + req.get_header_value("Authorization") + R"("}})"};
      return FakeReply{401, R"({"error":{"message":"invalid key )" + req.get_header_value("Authorization") + R"("}})"};
    });
    core::Config config(nlohmann::json::parse(R"({"llm":{"models":{"main":{
        "base_url":")" + server.base_url() + R"(","model":"m","api_key_env":"NL2SQL_TEST_LLM_KEY"}},
        "retry":{"max_attempts":2,"base_delay_s":0.001},
        "cache":{"mode":"read-write","path":")" + (tmp / "cache.sqlite").string() + R"("}}})"));
    ClientOptions o;
    o.clock = std::make_shared<ManualClock>();
    auto client = Client::from_config(config, o);
    ASSERT_TRUE(client.is_ok()) << client.status().to_string();
    auto ok = (*client)->chat(ask("first"));
    ASSERT_TRUE(ok.is_ok());
    auto bad = (*client)->chat(ask("second"));
    ASSERT_FALSE(bad.is_ok());
    EXPECT_EQ(call_error_kind(bad.status()), CallErrorKind::kAuth);
    EXPECT_EQ(bad.status().message().find(key), std::string::npos) << bad.status().message();
    spdlog::error("failure: {}", bad.status().message());
    spdlog::info("a careless caller formats the key: {}", key);  // the redactor still catches it
    ASSERT_EQ(server.authorizations().at(0), "Bearer " + key);  // the key was really used
    auto cache = ResponseCache::open(tmp / "cache.sqlite", false);
    ASSERT_TRUE(cache.is_ok());
    ASSERT_TRUE((*cache)->export_jsonl(tmp / "export.jsonl").is_ok());
    spdlog::default_logger()->flush();
  }
  core::init_logging({"warn", false, ""});
  int files = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(tmp.path())) {
    if (!entry.is_regular_file()) continue;
    ++files;
    EXPECT_EQ(slurp(entry.path()).find(key), std::string::npos) << entry.path();
  }
  EXPECT_GE(files, 3);  // log, cache, export (plus WAL files)
  EXPECT_NE(slurp(tmp / "run.log").find("***"), std::string::npos);
  ::unsetenv("NL2SQL_TEST_LLM_KEY");
}

// --- configuration ---

TEST(LlmSettingsTest, ProfilesRolesAndDefaults) {
  core::Config config(nlohmann::json::parse(R"({"llm":{
      "models":{"big":{"base_url":"http://127.0.0.1:8000/v1","model":"qwen","rpm":30,"max_in_flight":8},
                "small":{"base_url":"http://127.0.0.1:11434/v1","model":"llama","temperature":0.7}},
      "default_profile":"big",
      "roles":{"select":"small"},
      "cache":{"mode":"replay","path":"x.sqlite"},
      "sim":{"p_sel":0.8,"p_correct_by":{"query_plan/challenging":0.3}}}})"));
  auto s = load_llm_settings(config);
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  EXPECT_EQ((*s->resolve("select", ""))->name, "small");
  EXPECT_EQ((*s->resolve("generate", ""))->name, "big");  // unmapped role -> default profile
  EXPECT_EQ((*s->resolve("select", "big"))->name, "big");  // explicit profile wins
  EXPECT_EQ(s->profiles.at("big").rpm, 30);
  EXPECT_EQ(s->profiles.at("small").temperature, 0.7);
  EXPECT_EQ(s->cache.mode, CacheMode::kReplay);
  EXPECT_DOUBLE_EQ(s->sim.p_sel, 0.8);
  EXPECT_DOUBLE_EQ(s->sim.p_correct_for("query_plan", "challenging"), 0.3);
  EXPECT_DOUBLE_EQ(s->sim.p_correct_for("query_plan", "simple"), 0.6);
  auto missing = s->resolve("", "nope");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(call_error_kind(missing.status()), CallErrorKind::kConfig);
}

TEST(LlmSettingsTest, ErrorsNameTheKey) {
  struct Case {
    const char* json;
    const char* key;
  };
  for (auto c : {Case{R"({"llm":{"models":{"a":{"model":"m","rpm":"fast"}}}})", "llm.models.a.rpm"},
                 Case{R"({"llm":{"models":{"a":{"model":"m","tmperature":1}}}})", "llm.models.a.tmperature"},
                 Case{R"({"llm":{"models":{"a":{"model":"m"}},"roles":{"generat":"a"}}})", "llm.roles.generat"},
                 Case{R"({"llm":{"models":{"a":{"model":"m"}},"roles":{"fix":"b"}}})", "llm.roles.fix"},
                 Case{R"({"llm":{"cache":{"mode":"sometimes"}}})", "llm.cache.mode"},
                 Case{R"({"llm":{"sim":{"p_sel":1.5}}})", "llm.sim.p_sel"}}) {
    auto s = load_llm_settings(core::Config(nlohmann::json::parse(c.json)));
    ASSERT_FALSE(s.is_ok()) << c.json;
    EXPECT_NE(s.status().message().find(c.key), std::string::npos) << s.status().message();
  }
}

TEST(LlmSettingsTest, DefaultProfileComesFromOpenAiEnvironment) {
  ::setenv("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1", 1);
  auto s = load_llm_settings(core::Config());
  ::unsetenv("OPENAI_BASE_URL");
  ASSERT_TRUE(s.is_ok());
  EXPECT_EQ(s->profiles.at("default").base_url, "http://127.0.0.1:8080/v1");
  EXPECT_EQ(s->profiles.at("default").api_key_env, "OPENAI_API_KEY");
}

TEST(LlmSettingsTest, SimProfileIsLabelled) {
  auto s = load_llm_settings(core::Config(nlohmann::json::parse(
      R"({"llm":{"models":{"offline":{"provider":"sim"}}}})")));
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  EXPECT_EQ(s->profiles.at("offline").provider, "sim");
  EXPECT_EQ(s->profiles.at("offline").base_url, kSimBaseUrl);
}

}  // namespace
}  // namespace nl2sql::llm
