// The one cost formula (cost.h) as every caller uses it: a chat answer's tokens, an embedding
// batch (prompt tokens only), a profile without prices, cached tokens at their own price.
#include "nl2sql/llm/cost.h"

#include <gtest/gtest.h>

namespace nl2sql::llm {
namespace {

ModelProfile priced(double in, double out, std::optional<double> cached = std::nullopt) {
  ModelProfile p;
  p.price_in_per_mtok = in;
  p.price_out_per_mtok = out;
  p.price_cached_in_per_mtok = cached;
  return p;
}

TEST(Cost, ChatTokensAtTheProfilesPrices) {
  Usage u;
  u.prompt_tokens = 2'000;
  u.completion_tokens = 500;
  EXPECT_DOUBLE_EQ(cost_usd(priced(2.5, 10.0), u), (2'000 * 2.5 + 500 * 10.0) / 1e6);
  EXPECT_EQ(cost_usd(priced(0, 0), u), 0.0);
  // Reasoning tokens are inside completion_tokens: not billed twice.
  u.reasoning_tokens = 400;
  EXPECT_DOUBLE_EQ(cost_usd(priced(2.5, 10.0), u), (2'000 * 2.5 + 500 * 10.0) / 1e6);
}

TEST(Cost, CachedTokensAtTheirOwnPrice) {
  Usage u;
  u.prompt_tokens = 2'000;
  u.cached_tokens = 1'500;
  EXPECT_DOUBLE_EQ(cost_usd(priced(2.0, 8.0, 0.5), u), (500 * 2.0 + 1'500 * 0.5) / 1e6);
  u.cached_tokens = -3;  // nonsense from a server: billed uncached
  EXPECT_DOUBLE_EQ(cost_usd(priced(2.0, 8.0, 0.5), u), 2'000 * 2.0 / 1e6);
}

TEST(Cost, EmbeddingsArePromptTokensAtTheInputPrice) {
  Usage u;
  u.prompt_tokens = 12'345;
  // What the client charged for embeddings before it used the one formula, to the bit.
  EXPECT_EQ(cost_usd(priced(0.13, 99.0), u), static_cast<double>(u.prompt_tokens) * 0.13 / 1e6);
}

}  // namespace
}  // namespace nl2sql::llm
