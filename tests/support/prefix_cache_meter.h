// A fake endpoint's own accounting, as a server with a prefix cache (vLLM's automatic prefix
// caching) would keep it: the tests' fake servers and fake_llm_server_tool count a request's
// prompt in their own tokens, serve from the cache the longest prefix that an earlier request
// already sent (in whole blocks, as vLLM caches whole blocks), and bill what they reported.
//
// Tokens: the chat messages as one text ("<|role|>\n" + content + "\n" per message), one token
// per 4 bytes (the last one shorter). Cache: the hash of every block-aligned prefix of every
// prompt admitted so far (a chain hash: block k's hash seeds block k+1's), so a prompt's cached
// part is found by walking its own block hashes until one is missing; memory is 8 bytes per
// distinct block, not the prompts. At least one prompt token is always computed (as vLLM does,
// a fully cached prompt still recomputes its last block).
//
// Thread-safe (one mutex); admit() is the request's arrival: later requests see its blocks.
#pragma once

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "nl2sql/core/hash.h"

namespace nl2sql::llm::testing {

inline constexpr int64_t kFakeBytesPerToken = 4;

inline int64_t fake_tokens(std::string_view text) {
  return static_cast<int64_t>((text.size() + kFakeBytesPerToken - 1) / kFakeBytesPerToken);
}

// The prompt of a Chat Completions request body as the fake tokenizes it ("" when unreadable).
inline std::string fake_prompt_text(const std::string& body) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  std::string out;
  if (!j.is_object() || !j.contains("messages") || !j["messages"].is_array()) return out;
  for (const auto& m : j["messages"]) {
    if (!m.is_object()) continue;
    out += "<|" + m.value("role", std::string()) + "|>\n";
    if (m.contains("content") && m["content"].is_string()) out += m["content"].get<std::string>();
    out += "\n";
  }
  return out;
}

// What one request is billed for, in the fake's tokens.
struct FakeCharge {
  int64_t prompt_tokens = 0, cached_tokens = 0, completion_tokens = 0, reasoning_tokens = 0;
  double cost_usd(double in_per_mtok, double cached_per_mtok, double out_per_mtok) const {
    return (static_cast<double>(prompt_tokens - cached_tokens) * in_per_mtok +
            static_cast<double>(cached_tokens) * cached_per_mtok +
            static_cast<double>(completion_tokens) * out_per_mtok) /
           1e6;
  }
};

class PrefixCacheMeter {
 public:
  // block_tokens: the cache's granularity (vLLM's default block is 16 tokens; 1 = token-exact).
  explicit PrefixCacheMeter(int64_t block_tokens = 16) : block_bytes_(block_tokens * kFakeBytesPerToken) {}

  // The prompt's tokens and the part an earlier prompt's prefix serves; records its blocks.
  FakeCharge admit(std::string_view prompt) {
    FakeCharge c;
    c.prompt_tokens = fake_tokens(prompt);
    const size_t blocks = prompt.size() / static_cast<size_t>(block_bytes_);
    std::lock_guard lock(mu_);
    uint64_t h = 0;
    size_t matched = 0;
    bool matching = true;
    for (size_t b = 0; b < blocks; ++b) {
      h = core::xxh64(prompt.substr(b * static_cast<size_t>(block_bytes_), static_cast<size_t>(block_bytes_)), h);
      const bool seen = !blocks_.insert(h).second;
      matching = matching && seen;
      if (matching) matched = b + 1;
    }
    const int64_t block_tokens = block_bytes_ / kFakeBytesPerToken;
    c.cached_tokens = static_cast<int64_t>(matched) * block_tokens;
    // The last token is always computed: a whole cached prompt gives back its last block.
    if (c.cached_tokens >= c.prompt_tokens) c.cached_tokens = std::max<int64_t>(0, c.cached_tokens - block_tokens);
    return c;
  }

 private:
  int64_t block_bytes_;
  std::mutex mu_;
  std::unordered_set<uint64_t> blocks_;  // guarded by mu_
};

// How the usage block reports the provider's breakdown.
enum class UsageShape {
  kOpenAi,    // prompt_tokens_details.cached_tokens, completion_tokens_details.reasoning_tokens
  kDeepSeek,  // prompt_cache_hit_tokens / prompt_cache_miss_tokens (+ completion details)
  kNone,      // prompt and completion tokens only (details null, as vLLM with the option off)
};

inline nlohmann::json usage_json(const FakeCharge& c, UsageShape shape) {
  nlohmann::json u = {{"prompt_tokens", c.prompt_tokens},
                      {"completion_tokens", c.completion_tokens},
                      {"total_tokens", c.prompt_tokens + c.completion_tokens}};
  switch (shape) {
    case UsageShape::kOpenAi:
      u["prompt_tokens_details"] = {{"cached_tokens", c.cached_tokens}};
      u["completion_tokens_details"] = {{"reasoning_tokens", c.reasoning_tokens}};
      break;
    case UsageShape::kDeepSeek:
      u["prompt_cache_hit_tokens"] = c.cached_tokens;
      u["prompt_cache_miss_tokens"] = c.prompt_tokens - c.cached_tokens;
      u["completion_tokens_details"] = {{"reasoning_tokens", c.reasoning_tokens}};
      break;
    case UsageShape::kNone:
      u["prompt_tokens_details"] = nullptr;
      break;
  }
  return u;
}

// A Chat Completions body with one choice and the given usage block.
inline std::string completion_body_with_usage(const std::string& content, const nlohmann::json& usage) {
  nlohmann::json j = {{"id", "chatcmpl-fake"},
                      {"object", "chat.completion"},
                      {"choices", {{{"index", 0},
                                    {"message", {{"role", "assistant"}, {"content", content}}},
                                    {"finish_reason", "stop"}}}},
                      {"usage", usage}};
  return j.dump();
}

}  // namespace nl2sql::llm::testing
