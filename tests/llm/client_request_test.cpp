// What the client hands its Transport and what it charges, seen through a recording transport:
// query values percent-encoded into the URL without any HTTP library (core::percent_encode),
// the body the wire format builds, the Authorization header, and embeddings priced by the one
// cost formula.
#include <gtest/gtest.h>

#include <mutex>
#include <vector>

#include <nlohmann/json.hpp>

#include "nl2sql/llm/client.h"
#include "support/fake_openai_server.h"

namespace nl2sql::llm {
namespace {

// Keeps every request and answers each with `reply`.
class RecordingTransport : public Transport {
 public:
  explicit RecordingTransport(std::string reply) : reply_(std::move(reply)) {}
  Result<HttpResponse> post(const HttpRequest& request) override {
    std::lock_guard lock(mu_);
    requests_.push_back(request);
    return HttpResponse{200, {}, reply_};
  }
  std::vector<HttpRequest> requests() {
    std::lock_guard lock(mu_);
    return requests_;
  }

 private:
  std::string reply_;
  std::mutex mu_;
  std::vector<HttpRequest> requests_;  // guarded by mu_
};

LlmSettings azure_like() {
  LlmSettings s;
  ModelProfile p;
  p.name = "main";
  p.base_url = "https://example.invalid/openai/deployments/d1";
  p.model = "gpt-4o";
  p.api_key = "sk-test-key";
  p.query = {{"api-version", "2024-10-21"}, {"tag", "a b&c=d/é"}};
  p.price_in_per_mtok = 0.13;
  s.profiles["main"] = p;
  s.default_profile = "main";
  s.cache.mode = CacheMode::kOff;
  return s;
}

std::unique_ptr<Client> client_with(const std::shared_ptr<Transport>& transport) {
  ClientOptions o;
  o.transport = transport;
  o.clock = std::make_shared<ManualClock>();
  return Client::create(azure_like(), o).value();
}

TEST(ClientRequest, QueryValuesArePercentEncodedIntoTheUrl) {
  auto transport = std::make_shared<RecordingTransport>(testing::completion_body("SELECT 1"));
  auto client = client_with(transport);
  ChatRequest r;
  r.messages = {{"user", "hi"}};
  ASSERT_TRUE(client->chat(r).is_ok());
  const auto sent = transport->requests();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].url,
            "https://example.invalid/openai/deployments/d1/chat/completions?api-version=2024-10-21&tag=a%20b%26c%3Dd%2F%C3%A9");
  bool bearer = false;
  for (const auto& [k, v] : sent[0].headers) bearer = bearer || (k == "Authorization" && v == "Bearer sk-test-key");
  EXPECT_TRUE(bearer);
  const auto body = nlohmann::json::parse(sent[0].body);
  EXPECT_EQ(body["model"], "gpt-4o");
  EXPECT_EQ(body["messages"][0]["content"], "hi");
}

TEST(ClientRequest, EmbeddingsArePricedByTheOneCostFormula) {
  auto transport = std::make_shared<RecordingTransport>(
      R"({"data": [{"index": 0, "embedding": [0.1, 0.2]}], "usage": {"prompt_tokens": 12345}})");
  auto client = client_with(transport);
  EmbeddingRequest e;
  e.inputs = {"schools in Alameda"};
  e.stage = "retrieve";
  auto r = client->embed(e);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->usage.prompt_tokens, 12345);
  EXPECT_EQ(r->cost_usd, cost_usd(client->settings().profiles.at("main"), r->usage));
  EXPECT_EQ(r->cost_usd, 12345 * 0.13 / 1e6);
  const auto sent = transport->requests();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].url.rfind("https://example.invalid/openai/deployments/d1/embeddings?api-version=2024-10-21&", 0), 0u);
  EXPECT_EQ(nlohmann::json::parse(sent[0].body)["input"][0], "schools in Alameda");
}

}  // namespace
}  // namespace nl2sql::llm
