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
  // The first 64 bits of hex() as a number: the seed derived from the fields added (every
  // derived seed of the tool is one of these, except the per-stage seeds of stage_seed below).
  uint64_t seed();     // finishes, as hex()

 private:
  void* state_;
};

// A question's seed for one stage of a run ("context", "generate", "fix#<candidate id>",
// "select"): the run seed (run.seed), the question id and the stage, so reruns, shards and
// `nl2sql generate` on one question agree.
inline uint64_t stage_seed(uint64_t run_seed, const std::string& question_id, const std::string& stage) {
  return xxh64(question_id + '\x1f' + stage, run_seed);
}

std::string sha256_hex(std::string_view data);
Result<std::string> sha256_file(const std::filesystem::path& path);
// XXH3-128 of a file's bytes, streamed.
Result<std::string> xxh128_file(const std::filesystem::path& path);

// SplitMix64: a tiny deterministic stream of draws, identical on every platform (retry jitter,
// the simulator's draws). Not thread-safe; one per stream.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next_u64() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }  // [0, 1)
  uint64_t below(uint64_t n) { return n == 0 ? 0 : next_u64() % n; }              // [0, n)

 private:
  uint64_t state_;
};

}  // namespace nl2sql::core
