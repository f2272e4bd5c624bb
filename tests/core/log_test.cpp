// The secret redactor: every registered value is caught in the forms a server echoes it in
// (plain, base64 at any alignment, percent-encoded), also when someone cut the text inside it;
// URL userinfo is stripped anywhere in a text and in every string of a JSON document.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "nl2sql/core/log.h"

namespace nl2sql::core {
namespace {

// Each test registers its own values: the registry is process-wide.
TEST(Redact, PlainBase64AndPercentEncodedForms) {
  const std::string key = "sk-REDACT1-a9f3/c7e+5b21=d0";
  register_secret(key);
  EXPECT_EQ(redact("k=" + key + "."), "k=***.");
  EXPECT_EQ(redact("b64 c2stUkVEQUNUMS1hOWYzL2M3ZSs1YjIxPWQw end").find("UkVEQUNU"), std::string::npos);
  // base64 of the key inside a longer base64 text, at each byte alignment.
  for (const std::string prefix : {"", "x", "xy", "xyz"}) {
    std::string blob = prefix + key + "tail";
    // Encode with the redactor's own input-independent check: the key's middle must vanish.
    static const char* a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string b;
    for (size_t i = 0; i + 2 < blob.size(); i += 3) {
      uint32_t n = (uint8_t(blob[i]) << 16) | (uint8_t(blob[i + 1]) << 8) | uint8_t(blob[i + 2]);
      for (int k = 3; k >= 0; --k) b.push_back(a[(n >> (6 * k)) & 63]);
    }
    std::string out = redact("Authorization: Basic " + b);
    EXPECT_NE(out.find("***"), std::string::npos) << "prefix \"" << prefix << "\": " << out;
    EXPECT_LT(out.size(), b.size()) << out;
  }
  EXPECT_EQ(redact("q=sk-REDACT1-a9f3%2Fc7e%2B5b21%3Dd0&x"), "q=***&x");
  EXPECT_EQ(redact("q=sk-REDACT1-a9f3%2fc7e%2b5b21%3dd0&x"), "q=***&x");
}

TEST(Redact, AKeyCutByAnotherWriterLosesTheVisiblePieceToo) {
  const std::string key = "sk-REDACT2-4f8a1c9e2b7d5e6f";
  register_secret(key);
  // Cut at the end (with or without a closing quote / ellipsis) and at the start.
  EXPECT_EQ(redact("Bearer " + key.substr(0, 20)), "Bearer ***");
  EXPECT_EQ(redact("said \"Bearer " + key.substr(0, 12) + "\""), "said \"Bearer ***\"");
  EXPECT_EQ(redact("Bearer " + key.substr(0, 14) + "\xE2\x80\xA6"), "Bearer ***\xE2\x80\xA6");
  EXPECT_EQ(redact(key.substr(9) + " rest"), "*** rest");
  // Fewer than 8 characters at an edge, and pieces in the middle of a text, are left alone.
  EXPECT_EQ(redact("x sk-REDA"), "x sk-REDA");
  EXPECT_EQ(redact("a sk-REDACT2-4f8a b"), "a sk-REDACT2-4f8a b");
}

TEST(Redact, JsonKeysLoseWholeSecretsButNotNamesThatMatchAPiece) {
  // A key whose tail is a config name: edge redaction used to turn the key "metadata" of a
  // saved config into "***", so a reader of the config saw the section as absent.
  const std::string key = "sk-REDACT5-metadata";
  register_secret(key);
  const auto in = nlohmann::json::parse(R"({"context": {"metadata": {"enabled": true}}, ")" + key +
                                        R"(": 1, "note": "metadata"})");
  const auto out = redact_json(in);
  EXPECT_TRUE(out["context"].contains("metadata"));
  EXPECT_EQ(out["context"]["metadata"]["enabled"], true);
  EXPECT_TRUE(out.contains("***"));  // a whole secret as a key is still replaced
  EXPECT_FALSE(out.dump().find(key) != std::string::npos);
}

TEST(Redact, RedactBeforeCuttingNeverLeavesAPrefix) {
  const std::string key = "sk-REDACT3-93e1a7c05d2f11aa";
  register_secret(key);
  std::string body(290, '.');
  body += "Bearer ";
  body += key;
  body += " more";
  for (size_t cut : {295u, 300u, 305u, 310u, 320u}) {
    std::string out = redact_and_cut(body, cut);
    EXPECT_LE(out.size(), cut);
    EXPECT_EQ(out.find("REDACT3"), std::string::npos) << cut << ": " << out;
    EXPECT_EQ(out.find("93e1a7c0"), std::string::npos) << cut << ": " << out;
  }
  EXPECT_EQ(redact_and_cut("h\xC3\xA9llo", 2), "h");  // never inside a UTF-8 sequence
}

TEST(Redact, UrlCredentialsAreRegisteredAndStripped) {
  register_url_credentials("http://alice:s3cr3t-pw@proxy.example:8080/v1");
  EXPECT_EQ(redact("pw s3cr3t-pw"), "pw ***");
  EXPECT_EQ(redact("Basic YWxpY2U6czNjcjN0LXB3"), "Basic ***");  // base64("alice:s3cr3t-pw")
  EXPECT_EQ(redact("alice:s3cr3t-pw"), "***");
  // A short password is not redacted as a word, but its Basic form and the URL are.
  register_url_credentials("https://bob:pass@h/v1");
  EXPECT_EQ(redact("Basic Ym9iOnBhc3M="), "Basic ***");
  EXPECT_EQ(strip_url_credentials("see https://bob:pass@h/v1 and ftp://x@y/z"),
            "see https://***@h/v1 and ftp://***@y/z");
  EXPECT_EQ(strip_url_credentials("http://h/v1?api_key=1"), "http://h/v1?api_key=1");
}

TEST(Redact, JsonDocumentsLoseCredentialsAndSecretsEverywhere) {
  register_secret("hdr-REDACT5-value-77");
  nlohmann::json config = {
      {"llm", {{"models", {{"m", {{"base_url", "http://carol:hunter2-pw@host/v1"},
                                  {"headers", {{"X-Api-Key", "hdr-REDACT5-value-77"}}},
                                  {"temperature", 0.5},
                                  {"omit", {"seed", "Bearer hdr-REDACT5-value-77"}}}}}}}}};
  std::string out = redact_json(config).dump();
  EXPECT_EQ(out.find("hunter2"), std::string::npos) << out;
  EXPECT_EQ(out.find("carol"), std::string::npos) << out;
  EXPECT_EQ(out.find("REDACT5"), std::string::npos) << out;
  EXPECT_NE(out.find("http://***@host/v1"), std::string::npos) << out;
  EXPECT_NE(out.find("0.5"), std::string::npos) << out;
}

}  // namespace
}  // namespace nl2sql::core
