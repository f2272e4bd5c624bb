// What a server sends back must not carry a credential into an error message, and must not be
// allowed to exhaust memory: a 400 body echoing the Authorization header with the key across
// the 300-character cut, a Basic-auth header from URL userinfo echoed back, and an answer far
// larger than llm.max_response_bytes.
#include <gtest/gtest.h>
#include <stdlib.h>

#include "support/fake_openai_server.h"
#include "nl2sql/core/log.h"
#include "nl2sql/llm/client.h"

namespace nl2sql::llm {
namespace {

using nlohmann::json;
using testing::completion_body;
using testing::FakeOpenAiServer;
using testing::FakeReply;

LlmSettings profile_at(const std::string& base_url, const std::string& key_env) {
  json j = {{"llm", {{"models", {{"main", {{"base_url", base_url}, {"model", "m"}, {"api_key_env", key_env}}}}},
                     {"retry", {{"max_attempts", 2}, {"base_delay_s", 0.001}, {"max_delay_s", 0.002}}},
                     {"cache", {{"mode", "off"}}}}}};
  auto s = load_llm_settings(core::Config(j));
  EXPECT_TRUE(s.is_ok()) << s.status().to_string();
  return *s;
}

std::unique_ptr<Client> make_client(const LlmSettings& s) {
  ClientOptions o;
  o.clock = std::make_shared<ManualClock>();
  auto c = Client::create(s, o);
  EXPECT_TRUE(c.is_ok()) << c.status().to_string();
  return std::move(c).value();
}

ChatRequest ask() {
  ChatRequest r;
  r.role = "generate";
  r.messages = {{"user", "Write the query."}};
  r.stage = "generate";
  r.question_id = "q1";
  return r;
}

// Before: the body was cut at 300 characters and then redacted, so "sk-ECHO-cut-7c41d9e2"
// (20 of the key's 28 characters) reached the error message and from there every report.
TEST(SecretEcho, AKeyAcrossTheCutOfAnEchoedBodyIsRedacted) {
  const std::string key = "sk-ECHO-cut-7c41d9e2b5a8f036";
  setenv("NL2SQL_ECHO_TEST_KEY", key.c_str(), 1);
  for (size_t at : {280u, 285u, 292u, 296u, 299u}) {
    FakeOpenAiServer server([at](const httplib::Request& req, int64_t) {
      // A FastAPI-style validation error, not JSON-shaped like OpenAI's, echoing its input.
      std::string auth = "Authorization: " + req.get_header_value("Authorization");
      return FakeReply(400, std::string(at - 22, '-') + auth + " is not valid for this route");
    });
    auto client = make_client(profile_at(server.base_url(), "NL2SQL_ECHO_TEST_KEY"));
    auto r = client->chat(ask());
    ASSERT_FALSE(r.is_ok());
    const std::string m = r.status().message();
    EXPECT_NE(m.find("HTTP 400"), std::string::npos) << m;
    EXPECT_EQ(m.find("ECHO-cut"), std::string::npos) << "key starting at " << at << ": " << m;
    EXPECT_EQ(m.find("7c41d9e2"), std::string::npos) << "key starting at " << at << ": " << m;
  }
  unsetenv("NL2SQL_ECHO_TEST_KEY");
}

// Before: curl sent "Basic " + base64("tester:pw-ECHO-91b2"), the server echoed it, and the
// message carried it; the base URL's password was written in clear text.
TEST(SecretEcho, BasicCredentialsFromTheUrlAreRedactedWhenEchoed) {
  FakeOpenAiServer server([](const httplib::Request& req, int64_t) {
    return FakeReply(400, json{{"error", {{"message", "bad header " + req.get_header_value("Authorization")}}}}.dump());
  });
  std::string url = server.base_url();
  url.insert(url.find("://") + 3, "tester:pw-ECHO-91b2@");
  auto client = make_client(profile_at(url, ""));
  auto r = client->chat(ask());
  ASSERT_FALSE(r.is_ok());
  const std::string m = r.status().message();
  EXPECT_NE(m.find("bad header Basic ***"), std::string::npos) << "the server did see Basic auth: " << m;
  EXPECT_EQ(m.find("dGVzdGVy"), std::string::npos) << m;  // base64 of "tester:..."
  EXPECT_EQ(m.find("pw-ECHO-91b2"), std::string::npos) << m;
  EXPECT_EQ(core::redact_json(json{{"base_url", url}}).dump().find("pw-ECHO"), std::string::npos);
}

// Before: the body was read whole, however large. Now the transfer stops at the cap.
TEST(SecretEcho, AnAnswerLargerThanTheCapIsRefusedWithTheKeyNamed) {
  const std::string big = completion_body(std::string(400 * 1024, 'x'));
  for (bool declared : {true, false}) {
    FakeOpenAiServer server([&](const httplib::Request&, int64_t) {
      FakeReply reply(200, big);
      reply.chunked = !declared;
      return reply;
    });
    LlmSettings s = profile_at(server.base_url(), "");
    s.max_response_bytes = 64 * 1024;
    auto client = make_client(s);
    auto r = client->chat(ask());
    ASSERT_FALSE(r.is_ok());
    const std::string m = r.status().message();
    EXPECT_NE(m.find("65536 bytes"), std::string::npos) << m;
    EXPECT_NE(m.find("llm.max_response_bytes"), std::string::npos) << m;
    EXPECT_EQ(server.requests(), 1) << "not retried: the same request brings the same flood";
    // Under the cap the same answer is fine.
    s.max_response_bytes = 1 << 20;
    auto ok = make_client(s)->chat(ask());
    EXPECT_TRUE(ok.is_ok()) << ok.status().to_string();
  }
}

TEST(SecretEcho, TheCapIsAConfigKeyWithASaneFloor) {
  EXPECT_EQ(profile_at("http://h/v1", "").max_response_bytes, kDefaultMaxResponseBytes);
  json j = {{"llm", {{"max_response_bytes", 10}}}};
  auto s = load_llm_settings(core::Config(j));
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.status().message().find("llm.max_response_bytes"), std::string::npos);
}

}  // namespace
}  // namespace nl2sql::llm
