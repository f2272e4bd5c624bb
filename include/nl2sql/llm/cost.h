// The one cost formula: what a call's tokens cost at a profile's prices. Every price in nl2sql
// comes from here — a chat answer's, a failed call's spend, a simulated answer's estimate, an
// embedding batch's, the money a cache hit saved (pipeline) — so a change of pricing (a new
// token class, a new discount) lands once. Pure function; thread-safe.
#pragma once

#include "nl2sql/llm/profile.h"
#include "nl2sql/llm/types.h"

namespace nl2sql::llm {

// What `usage` costs at the profile's prices: uncached prompt tokens at price_in_per_mtok,
// cached ones at price_cached_in_per_mtok (the input price when unset), completion tokens
// (reasoning included) at price_out_per_mtok. Cached tokens are part of prompt_tokens (clamped
// to it); a server that reports none bills the whole prompt uncached.
// An answer read from a batch job (`batched`) costs that times the profile's batch_discount.
double cost_usd(const ModelProfile& profile, const Usage& usage, bool batched = false);

}  // namespace nl2sql::llm
