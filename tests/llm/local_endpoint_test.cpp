// The outside programs' local endpoint: OpenAI-shaped answers and errors, 401 for a token no
// session holds, calls attributed to the session's question and stage and traced, repeats sent
// as samples, and a replayed session that reaches no server.
#include "nl2sql/llm/local_endpoint.h"

#include <gtest/gtest.h>

#include "nl2sql/llm/client.h"
#include "support/fake_openai_server.h"
#include "support/test_env.h"

namespace nl2sql::llm {
namespace {

using nlohmann::json;
using testing::completion_body;
using testing::FakeOpenAiServer;
using testing::FakeReply;

struct Harness {
  Harness()
      : server([](const httplib::Request& req, int64_t seq) {
          auto body = json::parse(req.body);
          return FakeReply{200, completion_body("answer " + std::to_string(seq) + " to " +
                                                body["messages"].back()["content"].get<std::string>())};
        }) {}
  std::unique_ptr<Client> client(CacheMode mode) {
    LlmSettings s;
    ModelProfile p;
    p.name = "main";
    p.base_url = server.base_url();
    p.model = "fake-model";
    p.api_key_env = "";
    s.profiles["main"] = p;
    s.default_profile = "main";
    s.retry.max_attempts = 1;
    s.cache.mode = mode;
    s.cache.path = (tmp / "llm.sqlite").string();
    auto c = Client::create(s);
    EXPECT_TRUE(c.is_ok()) << c.status().to_string();
    return c.is_ok() ? std::move(c).value() : nullptr;
  }
  nl2sql::testing::TempDir tmp;
  FakeOpenAiServer server;
};

httplib::Result post(const std::string& base_url, const std::string& token, const json& body) {
  httplib::Client http(base_url.substr(0, base_url.size() - 3));  // without "/v1"
  httplib::Headers h = {{"Authorization", "Bearer " + token}};
  return http.Post("/v1/chat/completions", h, body.dump(), "application/json");
}

json chat(const std::string& text, const std::string& model = "") {
  json b = {{"messages", {{{"role", "system"}, {"content", "be brief"}}, {{"role", "user"}, {"content", text}}}},
            {"temperature", 0.5}};
  if (!model.empty()) b["model"] = model;
  return b;
}

TEST(LocalEndpoint, AnswersASessionsCallsThroughTheClientAndTracesThem) {
  Harness h;
  auto client = h.client(CacheMode::kOff);
  auto ep = LocalEndpoint::start(client.get());
  ASSERT_TRUE(ep.is_ok()) << ep.status().message();
  const std::string token = (*ep)->open({"q7", "generate", "generate", "mine", {}});
  auto r = post((*ep)->base_url(), token, chat("hello", "main"));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json a = json::parse(r->body);
  EXPECT_EQ(a["object"], "chat.completion");
  EXPECT_EQ(a["choices"][0]["message"]["content"], "answer 0 to hello");
  EXPECT_EQ(a["usage"]["total_tokens"], 15);
  // The same request again is another sample, not the same draw.
  auto again = post((*ep)->base_url(), token, chat("hello"));
  ASSERT_TRUE(again);
  ASSERT_EQ(again->status, 200) << again->body;
  auto calls = (*ep)->close(token);
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].stage, "generate");
  EXPECT_EQ(calls[0].template_name, "outside:mine");
  EXPECT_EQ(calls[0].prompt, "hello");
  EXPECT_EQ(calls[0].system, "be brief");
  EXPECT_EQ(calls[0].profile, "main");
  EXPECT_EQ(calls[1].response, "answer 1 to hello");
  EXPECT_EQ(client->accounting().question("q7").calls, 2);
  EXPECT_EQ(client->accounting().by_stage()["generate"].calls, 2);
  // Its token is dead once the session is closed.
  auto late = post((*ep)->base_url(), token, chat("hello"));
  ASSERT_TRUE(late);
  EXPECT_EQ(late->status, 401);
  EXPECT_EQ(h.server.requests(), 2);
}

TEST(LocalEndpoint, RefusesUnknownTokensModelsAndBadBodies) {
  Harness h;
  auto client = h.client(CacheMode::kOff);
  auto ep = LocalEndpoint::start(client.get());
  ASSERT_TRUE(ep.is_ok());
  auto r = post((*ep)->base_url(), "made-up", chat("x"));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "invalid_api_key");
  const std::string token = (*ep)->open({"q1", "select", "select", "sel", {}});
  r = post((*ep)->base_url(), token, chat("x", "gpt-nonexistent"));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "model_not_found");
  r = post((*ep)->base_url(), token, json{{"messages", json::array()}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  r = post((*ep)->base_url(), token, json{{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"stream", true}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  // An alias stands for the session while bound.
  (*ep)->bind("worker-token", token);
  httplib::Client http((*ep)->base_url().substr(0, (*ep)->base_url().size() - 3));
  auto models = http.Get("/v1/models", {{"Authorization", "Bearer worker-token"}});
  ASSERT_TRUE(models);
  ASSERT_EQ(models->status, 200);
  EXPECT_EQ(json::parse(models->body)["data"][0]["id"], "main");
  (*ep)->unbind("worker-token");
  models = http.Get("/v1/models", {{"Authorization", "Bearer worker-token"}});
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 401);
  EXPECT_EQ(h.server.requests(), 0);
}

TEST(LocalEndpoint, AReplayedSessionReachesNoServer) {
  Harness h;
  {
    auto client = h.client(CacheMode::kReadWrite);
    auto ep = LocalEndpoint::start(client.get());
    ASSERT_TRUE(ep.is_ok());
    const std::string token = (*ep)->open({"q2", "generate", "generate", "mine", {}});
    ASSERT_EQ(post((*ep)->base_url(), token, chat("first"))->status, 200);
    ASSERT_EQ(post((*ep)->base_url(), token, chat("first"))->status, 200);
    (*ep)->close(token);
  }
  ASSERT_EQ(h.server.requests(), 2);
  auto client = h.client(CacheMode::kReplay);
  auto ep = LocalEndpoint::start(client.get());
  ASSERT_TRUE(ep.is_ok());
  const std::string token = (*ep)->open({"q2", "generate", "generate", "mine", {}});
  auto a = post((*ep)->base_url(), token, chat("first"));
  auto b = post((*ep)->base_url(), token, chat("first"));
  ASSERT_EQ(a->status, 200) << a->body;
  ASSERT_EQ(b->status, 200) << b->body;
  EXPECT_EQ(json::parse(a->body)["choices"][0]["message"]["content"], "answer 0 to first");
  EXPECT_EQ(json::parse(b->body)["choices"][0]["message"]["content"], "answer 1 to first");
  // A request never recorded is a replay miss: refused, and the client is stopped.
  auto miss = post((*ep)->base_url(), token, chat("never asked"));
  ASSERT_TRUE(miss);
  EXPECT_EQ(miss->status, 503);
  EXPECT_EQ(h.server.requests(), 2);
  auto calls = (*ep)->close(token);
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_TRUE(calls[0].from_cache);
  EXPECT_FALSE(calls[2].error.empty());
}

}  // namespace
}  // namespace nl2sql::llm
