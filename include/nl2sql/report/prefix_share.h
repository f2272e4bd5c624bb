// The prefix share of a run: of the prompt text its requests sent, the part that repeats the
// longest prefix of an earlier request of the run — the most a provider's prefix cache (vLLM's
// automatic prefix caching, OpenAI's and DeepSeek's prompt caches) could serve, whatever the
// cache's size. Requests are taken in record order (question by question, each question's calls
// in the order they were made), so the figure is the same on every reading of a run. Every
// prompt the run asked for counts, whether a server or nl2sql's response cache answered it (a
// warm rerun or a resumed run gets the figure of a cold one: it describes the prompts' layout);
// an answer a memo shared from another question counts there. Measured in
// characters of the messages (system, then user), in whole blocks of `block_chars` (64 by
// default: about vLLM's 16-token block), as a prefix cache serves whole blocks.
//
// PrefixIndex keeps one 64-bit hash per distinct block-aligned prefix (a chain hash: block k's
// hash seeds block k+1's) in an open-addressing table, never the texts: about 16 bytes per
// distinct block, so a BIRD-dev-sized run (~50k requests of ~6 KB) stays in tens of MB. A hash
// collision can only lengthen a found prefix, by a block, with odds of 2^-64 per probe.
// Not thread-safe; a plain value.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "nl2sql/run/run_data.h"

namespace nl2sql::report {

inline constexpr size_t kPrefixBlockChars = 64;

class PrefixIndex {
 public:
  explicit PrefixIndex(size_t block_chars = kPrefixBlockChars);
  // The characters of `text`'s longest prefix, in whole blocks, that an earlier text added here
  // began with; then remembers `text`'s own prefixes.
  size_t add(std::string_view text);
  size_t distinct_blocks() const { return size_; }

 private:
  bool contains(uint64_t hash) const;
  void insert(uint64_t hash);

  size_t block_chars_;
  std::vector<uint64_t> slots_;  // 0 = empty; a hash of 0 is stored as 1
  size_t size_ = 0;
};

struct PrefixShareCounts {
  int64_t requests = 0;
  int64_t prompt_chars = 0;  // characters of the messages sent
  int64_t prefix_chars = 0;  // of them, the longest earlier prefix of each request
  double share() const { return prompt_chars > 0 ? static_cast<double>(prefix_chars) / static_cast<double>(prompt_chars) : 0.0; }
};

struct PrefixShare {
  PrefixShareCounts total;
  std::map<std::string, PrefixShareCounts> by_stage;  // by the usage stage of the request
};

PrefixShare prefix_share(const run::RunData& run, size_t block_chars = kPrefixBlockChars);

}  // namespace nl2sql::report
