// Hashing: fast non-cryptographic digests (XXH3) for cache keys and fingerprints, and SHA-256
// for the integrity checks users can reproduce with `sha256sum`. All functions are pure and
// thread-safe.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "nl2sql/core/status.h"

namespace nl2sql::core {

uint64_t xxh64(std::string_view data, uint64_t seed = 0);
// 128-bit XXH3 digest as 32 lowercase hex characters.
std::string xxh128_hex(std::string_view data);

// Incremental 128-bit hasher for keys built from several fields; each field is length-prefixed
// so ("ab","c") and ("a","bc") differ.
class KeyHasher {
 public:
  KeyHasher();
  ~KeyHasher();
  KeyHasher(const KeyHasher&) = delete;
  KeyHasher& operator=(const KeyHasher&) = delete;
  KeyHasher& add(std::string_view field);
  KeyHasher& add(int64_t v);
  std::string hex();  // finishes; the hasher must not be used afterwards

 private:
  void* state_;
};

std::string sha256_hex(std::string_view data);
Result<std::string> sha256_file(const std::filesystem::path& path);
// XXH3-128 of a file's bytes, streamed.
Result<std::string> xxh128_file(const std::filesystem::path& path);

}  // namespace nl2sql::core
