// The response cache: hits and misses through the client, modes (replay, read-only, off), two
// processes writing one file, export/import/prune and the `nl2sql cache` command.
#include "nl2sql/llm/response_cache.h"

#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include <gtest/gtest.h>

#include "support/fake_openai_server.h"
#include "nl2sql/llm/client.h"
#include "support/chat_response.h"
#include "support/test_env.h"

namespace nl2sql::llm {
namespace {

using testing::completion_body;
using testing::FakeOpenAiServer;
using testing::FakeReply;

struct CacheHarness {
  CacheHarness()
      : server([](const httplib::Request& req, int64_t seq) {
          auto body = nlohmann::json::parse(req.body);
          return FakeReply{200, completion_body("answer " + std::to_string(seq) + " to " +
                                                body["messages"].back()["content"].get<std::string>())};
        }) {}
  LlmSettings settings(CacheMode mode) {
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
    s.cache.path = (tmp / "cache" / "llm.sqlite").string();
    return s;
  }
  std::unique_ptr<Client> client(CacheMode mode) {
    ClientOptions o;
    o.clock = std::make_shared<ManualClock>();
    auto c = Client::create(settings(mode), o);
    EXPECT_TRUE(c.is_ok()) << c.status().to_string();
    return c.is_ok() ? std::move(c).value() : nullptr;
  }
  nl2sql::testing::TempDir tmp;
  FakeOpenAiServer server;
};

ChatRequest ask(const std::string& text, int64_t sample = 0) {
  ChatRequest r;
  r.messages = {{"user", text}};
  r.sample_index = sample;
  r.stage = "generate";
  r.question_id = "bird-dev-42";
  r.template_hash = "t1";
  return r;
}

TEST(LlmCache, SecondIdenticalCallIsAHitAndDistinctSamplesAreNot) {
  CacheHarness h;
  auto client = h.client(CacheMode::kReadWrite);
  auto first = client->chat(ask("q"));
  ASSERT_TRUE(first.is_ok()) << first.status().to_string();
  EXPECT_FALSE(first->from_cache);
  auto again = client->chat(ask("q"));
  ASSERT_TRUE(again.is_ok());
  EXPECT_TRUE(again->from_cache);
  EXPECT_EQ(again->text(), first->text());
  EXPECT_EQ(again->usage.prompt_tokens, first->usage.prompt_tokens);
  EXPECT_EQ(again->cost_usd, 0.0);
  EXPECT_EQ(h.server.requests(), 1);

  auto other_sample = client->chat(ask("q", 1));
  ASSERT_TRUE(other_sample.is_ok());
  EXPECT_FALSE(other_sample->from_cache);
  EXPECT_NE(other_sample->text(), first->text());
  auto other_template = ask("q");
  other_template.template_hash = "t2";
  EXPECT_FALSE(client->chat(other_template)->from_cache);
  auto other_temperature = ask("q");
  other_temperature.temperature = 0.8;
  EXPECT_FALSE(client->chat(other_temperature)->from_cache);
  EXPECT_EQ(h.server.requests(), 4);
  EXPECT_EQ(client->accounting().total().cache_hits, 1);

  // A new client (a rerun) replays from the file.
  auto rerun = h.client(CacheMode::kReadWrite);
  EXPECT_TRUE(rerun->chat(ask("q", 1))->from_cache);
  EXPECT_EQ(h.server.requests(), 4);
}

TEST(LlmCache, ReplayMissIsAnErrorNamingTheCall) {
  CacheHarness h;
  ASSERT_TRUE(h.client(CacheMode::kReadWrite)->chat(ask("recorded")).is_ok());
  auto replay = h.client(CacheMode::kReplay);
  auto hit = replay->chat(ask("recorded"));
  ASSERT_TRUE(hit.is_ok());
  EXPECT_TRUE(hit->from_cache);
  auto miss = replay->chat(ask("never asked before", 3));
  ASSERT_FALSE(miss.is_ok());
  EXPECT_EQ(call_error_kind(miss.status()), CallErrorKind::kReplayMiss);
  const std::string m = miss.status().message();
  EXPECT_NE(m.find("bird-dev-42"), std::string::npos) << m;
  EXPECT_NE(m.find("\"main\""), std::string::npos) << m;
  EXPECT_NE(m.find("sample 3"), std::string::npos) << m;
  EXPECT_NE(m.find("never asked before"), std::string::npos) << m;
  EXPECT_EQ(h.server.requests(), 1);
}

TEST(LlmCache, ReplayWithoutACacheFileFailsAtStart) {
  CacheHarness h;
  ClientOptions o;
  auto c = Client::create(h.settings(CacheMode::kReplay), o);
  ASSERT_FALSE(c.is_ok());
  EXPECT_NE(c.status().message().find("does not exist"), std::string::npos);
}

TEST(LlmCache, ReadOnlyAndOffNeverStore) {
  CacheHarness h;
  ASSERT_TRUE(h.client(CacheMode::kReadWrite)->chat(ask("seed")).is_ok());
  auto ro = h.client(CacheMode::kReadOnly);
  EXPECT_TRUE(ro->chat(ask("seed"))->from_cache);
  EXPECT_FALSE(ro->chat(ask("fresh"))->from_cache);
  EXPECT_FALSE(ro->chat(ask("fresh"))->from_cache);  // not stored
  auto off = h.client(CacheMode::kOff);
  EXPECT_FALSE(off->chat(ask("seed"))->from_cache);
  EXPECT_EQ(h.server.requests(), 4);
  auto cache = ResponseCache::open(h.settings(CacheMode::kReadWrite).cache.path, true).value();
  EXPECT_EQ(cache->stats()->entries, 1);
}

using nl2sql::testing::canned_response;

TEST(LlmCache, TwoProcessesWritingAtOnceLoseNothing) {
  nl2sql::testing::TempDir tmp;
  const auto path = tmp / "shared.sqlite";
  auto write_range = [&](const std::string& who) -> bool {
    auto cache = ResponseCache::open(path, false);
    if (!cache) return false;
    for (int i = 0; i < 300; ++i) {
      if (!(*cache)->store(who + std::to_string(i), "p", "m", "{}", canned_response(who)).is_ok()) return false;
      if (i < 100 && !(*cache)->store("shared" + std::to_string(i), "p", "m", "{}", canned_response(who)).is_ok())
        return false;
    }
    return true;
  };
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(write_range("child") ? 0 : 1);
  bool parent_ok = write_range("parent");
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_TRUE(parent_ok);
  auto cache = ResponseCache::open(path, true).value();
  EXPECT_EQ(cache->stats()->entries, 700);
  auto shared = cache->lookup("shared7");
  ASSERT_TRUE(shared.is_ok() && shared->has_value());
  EXPECT_TRUE((**shared).text() == "child" || (**shared).text() == "parent");
}

TEST(LlmCache, ManyThreadsShareOneCache) {
  nl2sql::testing::TempDir tmp;
  auto cache = std::shared_ptr<ResponseCache>(ResponseCache::open(tmp / "c.sqlite", false).value());
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        std::string key = std::to_string(t) + "/" + std::to_string(i);
        EXPECT_TRUE(cache->store(key, "p", "m", "{}", canned_response(key)).is_ok());
        auto got = cache->lookup(key);
        EXPECT_TRUE(got.is_ok() && got->has_value() && (**got).text() == key);
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(cache->stats()->entries, 400);
}

TEST(LlmCache, ExportImportPruneRoundTrip) {
  nl2sql::testing::TempDir tmp;
  auto a = ResponseCache::open(tmp / "a.sqlite", false).value();
  ASSERT_TRUE(a->store("k1", "big", "qwen", R"({"x":1})", canned_response("one")).is_ok());
  ASSERT_TRUE(a->store("k2", "small", "llama", R"({"x":2})", canned_response("two")).is_ok());
  EXPECT_EQ(*a->export_jsonl(tmp / "out.jsonl"), 2);
  auto b = ResponseCache::open(tmp / "b.sqlite", false).value();
  EXPECT_EQ(*b->import_jsonl(tmp / "out.jsonl"), 2);
  EXPECT_EQ(*b->import_jsonl(tmp / "out.jsonl"), 0);  // existing keys kept
  EXPECT_EQ((**b->lookup("k2")).text(), "two");
  EXPECT_EQ(b->stats()->entries_by_model.at("qwen"), 1);
  EXPECT_EQ(b->stats()->completion_tokens, 8);
  EXPECT_EQ(*b->prune(0, "llama", ""), 1);
  EXPECT_FALSE(b->lookup("k2")->has_value());
  EXPECT_EQ(*b->prune(1, "", ""), 0);  // nothing older than 1970
  {
    std::ofstream bad(tmp / "bad.jsonl");
    bad << R"({"key":"k9","request":{},"response":{"choices":["x"]}})" << "\n" << "not json\n";
  }
  auto r = b->import_jsonl(tmp / "bad.jsonl");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("bad.jsonl:2"), std::string::npos) << r.status().message();
  EXPECT_FALSE(b->lookup("k9")->has_value());  // the whole import rolled back
}

TEST(LlmCache, KeyDependsOnEverythingThatShapesTheAnswer) {
  ModelProfile p;
  p.base_url = "http://user:pw@127.0.0.1:1/v1";
  p.model = "m";
  ChatRequest r = ask("q");
  const auto base = ResponseCache::key_for(p, r);
  EXPECT_EQ(base, ResponseCache::key_for(p, r));
  auto changed = [&](auto mutate) {
    ModelProfile p2 = p;
    ChatRequest r2 = r;
    mutate(p2, r2);
    return ResponseCache::key_for(p2, r2) != base;
  };
  EXPECT_TRUE(changed([](ModelProfile& q, ChatRequest&) { q.model = "m2"; }));
  EXPECT_TRUE(changed([](ModelProfile& q, ChatRequest&) { q.base_url = "http://127.0.0.1:2/v1"; }));
  EXPECT_TRUE(changed([](ModelProfile&, ChatRequest& q) { q.messages[0].role = "system"; }));
  EXPECT_TRUE(changed([](ModelProfile&, ChatRequest& q) { q.top_p = 0.5; }));
  EXPECT_TRUE(changed([](ModelProfile&, ChatRequest& q) { q.max_tokens = 7; }));
  EXPECT_TRUE(changed([](ModelProfile&, ChatRequest& q) { q.seed = 1; }));
  EXPECT_TRUE(changed([](ModelProfile&, ChatRequest& q) { q.stop = {";"}; }));
  EXPECT_TRUE(changed([](ModelProfile&, ChatRequest& q) { q.sample_index = 1; }));
  EXPECT_TRUE(changed([](ModelProfile&, ChatRequest& q) { q.template_hash = "t2"; }));
  // Credentials in the URL and bookkeeping tags do not change the key.
  EXPECT_FALSE(changed([](ModelProfile& q, ChatRequest&) { q.base_url = "http://other:pw2@127.0.0.1:1/v1"; }));
  EXPECT_FALSE(changed([](ModelProfile&, ChatRequest& q) { q.stage = "fix"; q.question_id = "x"; }));
  EXPECT_EQ(ResponseCache::canonical_request(p, r).find("pw"), std::string::npos);
}

}  // namespace
}  // namespace nl2sql::llm
