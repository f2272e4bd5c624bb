#include "nl2sql/llm/cost.h"

#include <algorithm>

namespace nl2sql::llm {

double cost_usd(const ModelProfile& profile, const Usage& usage, bool batched) {
  const int64_t cached = std::clamp<int64_t>(usage.cached_tokens.value_or(0), 0, usage.prompt_tokens);
  const double cached_price = profile.price_cached_in_per_mtok.value_or(profile.price_in_per_mtok);
  return (static_cast<double>(usage.prompt_tokens - cached) * profile.price_in_per_mtok +
          static_cast<double>(cached) * cached_price +
          static_cast<double>(usage.completion_tokens) * profile.price_out_per_mtok) /
         1e6 * (batched ? profile.batch_discount : 1.0);
}

}  // namespace nl2sql::llm
