// Model profiles, roles and the rest of the `llm.*` configuration, read once from core::Config
// into plain values. A profile is one endpoint + model + sampling defaults + prices + limits;
// a role (generate, fix, select, …) names the profile that serves it. API keys are read here,
// from the environment variable the profile names (never from the config file), and registered
// with the log redactor at once. With no `llm.models` at all, a profile "default" is built from
// OPENAI_BASE_URL / OPENAI_API_KEY. Values only: safe to share read-only between threads.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "nl2sql/core/config.h"
#include "nl2sql/core/status.h"

namespace nl2sql::llm {

inline constexpr const char* kDefaultBaseUrl = "https://api.openai.com/v1";
inline constexpr const char* kSimBaseUrl = "sim://";

struct ModelProfile {
  std::string name;
  std::string provider = "openai";  // "openai" (any compatible server) or "sim"
  std::string base_url = kDefaultBaseUrl;
  std::string model;
  std::string api_key_env;          // name of the env variable; empty: no Authorization header
  std::string api_key;              // read from api_key_env; never logged or written
  double temperature = 0.0;
  double top_p = 1.0;
  int64_t max_tokens = 1024;
  double price_in_per_mtok = 0.0;   // USD per million prompt tokens
  double price_out_per_mtok = 0.0;  // USD per million completion tokens
  int64_t max_in_flight = 16;
  double rpm = 0;                   // requests per minute, 0 = unlimited
  double tpm = 0;                   // tokens per minute, 0 = unlimited
  double timeout_s = 120;
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

struct LlmSettings {
  std::map<std::string, ModelProfile> profiles;
  std::map<std::string, std::string> roles;  // role -> profile name
  std::string default_profile = "default";
  int64_t max_in_flight = 64;                // across all profiles
  RetryPolicy retry;
  CacheSettings cache;
  SimSettings sim;

  // The profile for a role (falling back to default_profile) or an explicit profile name.
  Result<const ModelProfile*> resolve(const std::string& role, const std::string& profile) const;
};

// Reads `llm.*`. Errors name the key (e.g. "llm.models.big.rpm must be a number").
Result<LlmSettings> load_llm_settings(const core::Config& config);

// The roles the pipeline uses; unknown roles in llm.roles are rejected (typo guard).
bool is_known_role(const std::string& role);

}  // namespace nl2sql::llm
