// core::percent_encode: the unreserved set passes, everything else is %XX, and the result is
// byte for byte what libcurl's escaping gave the query values of a profile before (so URLs
// built from llm.models.*.query do not change).
#include "nl2sql/core/percent_encoding.h"

#include <curl/curl.h>
#include <gtest/gtest.h>

#include <string>

namespace nl2sql::core {
namespace {

TEST(PercentEncode, UnreservedPassAndTheRestIsUpperCaseHex) {
  EXPECT_EQ(percent_encode(""), "");
  EXPECT_EQ(percent_encode("AZaz09-._~"), "AZaz09-._~");
  EXPECT_EQ(percent_encode("2024-10-21"), "2024-10-21");
  EXPECT_EQ(percent_encode("a b+c&d=e/f?g#h"), "a%20b%2Bc%26d%3De%2Ff%3Fg%23h");
  EXPECT_EQ(percent_encode("caf\xc3\xa9"), "caf%C3%A9");
  EXPECT_EQ(percent_encode(std::string("a\0b", 3)), "a%00b");
  EXPECT_EQ(percent_encode("%41"), "%2541");
}

TEST(PercentEncode, MatchesLibcurlForEveryByte) {
  std::string all;
  for (int c = 0; c < 256; ++c) all.push_back(static_cast<char>(c));
  for (const std::string& s : {all, std::string("api-version"), std::string("key with spaces & ümlauts")}) {
    char* escaped = curl_easy_escape(nullptr, s.c_str(), static_cast<int>(s.size()));
    ASSERT_NE(escaped, nullptr);
    EXPECT_EQ(percent_encode(s), std::string(escaped));
    curl_free(escaped);
  }
}

}  // namespace
}  // namespace nl2sql::core
