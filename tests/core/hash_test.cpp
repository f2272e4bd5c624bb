#include "nl2sql/core/hash.h"

#include <gtest/gtest.h>

#include "nl2sql/core/files.h"
#include "nl2sql/core/log.h"

namespace nl2sql::core {
namespace {

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(KeyHasher, FieldBoundariesMatter) {
  KeyHasher a, b;
  EXPECT_NE(a.add("ab").add("c").hex(), b.add("a").add("bc").hex());
}

TEST(DecodeText, BomUtf8AndLatin1) {
  EXPECT_EQ(decode_text("\xEF\xBB\xBFid,name"), "id,name");
  EXPECT_EQ(decode_text("caf\xC3\xA9"), "caf\xC3\xA9");          // UTF-8 kept
  EXPECT_EQ(decode_text("caf\xE9"), "caf\xC3\xA9");              // Latin-1 re-encoded
  EXPECT_FALSE(is_valid_utf8("\xC0\xAF"));                       // overlong
}

TEST(Redaction, SecretsAndUrlCredentials) {
  register_secret("sk-test-SECRET-123456");
  EXPECT_EQ(redact("Authorization: Bearer sk-test-SECRET-123456"), "Authorization: Bearer ***");
  EXPECT_EQ(mask_url("https://user:pw@example.org/v1?api_key=abc&x=1"),
            "https://***@example.org/v1?api_key=***&x=1");
}

}  // namespace
}  // namespace nl2sql::core
