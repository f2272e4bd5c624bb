// Model profiles, roles and the rest of the `llm.*` configuration, read once from core::Config
// into plain values. A profile is one endpoint + model + sampling defaults + prices + limits;
// a role (generate, fix, select, …) names the profile that serves it. API keys are read here,
// from the environment variable the profile names (never from the config file), and registered
// with the log redactor at once. With no `llm.models` at all, a profile "default" is built from
// OPENAI_BASE_URL / OPENAI_API_KEY. Values only: safe to share read-only between threads.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "nl2sql/core/config.h"
#include "nl2sql/core/status.h"
#include "nl2sql/llm/transport.h"

namespace nl2sql::llm {

inline constexpr const char* kDefaultBaseUrl = "https://api.openai.com/v1";
inline constexpr const char* kSimBaseUrl = "sim://";

// What a server refuses or needs differs (OpenAI o-series/gpt-5 reject `max_tokens` and any
// non-default temperature; vLLM takes `chat_template_kwargs`; Azure wants `api-version` in the
// query and its key in an `api-key` header): a profile shapes its requests.
// A profile's batch endpoint (key `batch`: `true` or an object of these): its chat requests are
// gathered into jobs of the OpenAI Batch API (/v1/files + /v1/batches, JSONL lines with
// `custom_id`) instead of being sent one by one (src/llm/batch_queue.h).
struct BatchSettings {
  bool enabled = false;
  std::string window = "24h";          // completion_window (OpenAI accepts only "24h")
  int64_t max_requests = 50000;        // requests per job (OpenAI's limit)
  int64_t max_bytes = 200000000;       // JSONL bytes per job (OpenAI's limit: 200 MB)
  double gather_ms = 200;              // a job is sent when no request came for this long
  double poll_s = 5;                   // first wait between two looks at a job; doubles
  double poll_max_s = 60;              // up to this
};

struct ModelProfile {
  std::string name;
  std::string provider = "openai";  // "openai" (any compatible server) or "sim"
  std::string base_url = kDefaultBaseUrl;
  std::string model;
  std::string api_key_env;          // name of the env variable; empty: no Authorization header
  std::string api_key;              // read from api_key_env; never logged or written
  double temperature = 0.0;
  double top_p = 1.0;
  // The completion budget for every role of this profile when set in the config; else the
  // role's budget from llm.role_max_tokens (see LlmSettings::output_budget).
  std::optional<int64_t> max_tokens;
  std::map<std::string, int64_t> role_max_tokens;  // role -> budget, wins over max_tokens
  std::string max_tokens_field = "max_tokens";     // or "max_completion_tokens"
  std::set<std::string> omit;                      // request fields never sent
  std::string extra_body = "{}";                   // JSON object merged into every request
  // Extra HTTP headers; values were read from the config or, for "${VAR}", the environment,
  // and are registered as secrets (never logged or written).
  std::vector<std::pair<std::string, std::string>> headers;
  std::vector<std::pair<std::string, std::string>> query;  // URL query parameters
  int64_t context_tokens = 0;       // the server's context window; 0 = unknown (no budget)
  double price_in_per_mtok = 0.0;   // USD per million prompt tokens
  double price_out_per_mtok = 0.0;  // USD per million completion tokens
  // USD per million prompt tokens the provider's prefix cache served; unset: the input price.
  std::optional<double> price_cached_in_per_mtok;
  // Factor on the cost of an answer that came from a batch job (OpenAI bills batches at 0.5).
  double batch_discount = 1.0;
  BatchSettings batch;
  int64_t max_in_flight = 16;
  double rpm = 0;                   // requests per minute, 0 = unlimited
  double tpm = 0;                   // tokens per minute, 0 = unlimited
  double timeout_s = 600;           // total per HTTP attempt (generous: reasoning is slow)
  // Streaming only: no byte for this long ends the attempt (a dead server), while a server
  // that is still writing may take up to timeout_s. Without streaming the server sends
  // nothing until the answer is complete, so only timeout_s applies.
  double idle_timeout_s = 120;
  bool stream = false;              // ask for server-sent events (stream: true)
  std::string embedding_model;      // for embed(); empty: `model`
};

struct RetryPolicy {
  int max_attempts = 5;             // total HTTP attempts per call
  double base_delay_s = 1.0;        // first backoff; doubles per attempt, full jitter on top half
  double max_delay_s = 60.0;        // cap on one backoff and on an honoured Retry-After
};

enum class CacheMode { kReadWrite, kReadOnly, kOff, kReplay };
const char* cache_mode_name(CacheMode mode);
Result<CacheMode> parse_cache_mode(const std::string& text);

struct CacheSettings {
  CacheMode mode = CacheMode::kReadWrite;
  std::string path = ".nl2sql/llm_cache.sqlite";
};

// Probabilities of the offline `sim` provider (see sim.h).
struct SimSettings {
  int64_t seed = 0;
  double p_correct = 0.6;                            // generators, default
  std::map<std::string, double> p_correct_by;        // "<generator>", "<difficulty>" or
                                                     // "<generator>/<difficulty>"
  double p_fix = 0.5;
  double p_sel = 0.71;
  double p_hallucinate = 0.25;
  double p_correct_for(const std::string& generator, const std::string& difficulty) const;
};

// Completion budgets by role when neither the request nor the profile sets one: chain-of-thought
// roles need room to reason (a reasoning model needs more still: set the profile's max_tokens).
inline constexpr int64_t kDefaultOutputBudget = 1024;
const std::map<std::string, int64_t>& default_role_budgets();

struct LlmSettings {
  std::map<std::string, ModelProfile> profiles;
  std::map<std::string, std::string> roles;  // role -> profile name
  std::map<std::string, int64_t> role_max_tokens;  // llm.role_max_tokens over the defaults
  // Stop the run when the same non-retryable 4xx answer repeats on this many consecutive calls
  // of one profile (0 = never).
  int64_t stop_after_repeated_errors = 8;
  // A profile whose endpoint stopped answering (connection errors, or the same 5xx, on call
  // after call) is probed one request at a time for this long before the run stops (exit 4).
  double endpoint_down_wait_s = 12;
  bool preflight = true;                     // one real request per used profile before a run
  std::string default_profile = "default";
  int64_t max_in_flight = 64;                // across all profiles
  // Cap on one HTTP response body (llm.max_response_bytes; see kDefaultMaxResponseBytes).
  size_t max_response_bytes = kDefaultMaxResponseBytes;
  RetryPolicy retry;
  CacheSettings cache;
  SimSettings sim;

  // The profile for a role (falling back to default_profile) or an explicit profile name.
  Result<const ModelProfile*> resolve(const std::string& role, const std::string& profile) const;
  // The completion budget of a call for `role` served by `profile`: the profile's
  // role_max_tokens, else its max_tokens, else llm.role_max_tokens / the role defaults.
  int64_t output_budget(const ModelProfile& profile, const std::string& role) const;
};

// "https://h/v1/" -> "https://h/v1"; a pasted ".../chat/completions" is cut back to the root.
std::string normalize_base_url(std::string url);

// Reads `llm.*`. Errors name the key (e.g. "llm.models.big.rpm must be a number").
Result<LlmSettings> load_llm_settings(const core::Config& config);

// The roles the pipeline uses; unknown roles in llm.roles are rejected (typo guard).
bool is_known_role(const std::string& role);

}  // namespace nl2sql::llm
