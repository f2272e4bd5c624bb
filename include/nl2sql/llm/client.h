// llm::Client: the one way to call a model. A stage builds a ChatRequest (role, messages,
// sample index, tags) and calls chat(); the client resolves the role to a profile, consults the
// response cache, waits for an in-flight slot (global and per profile) and for the profile's
// request/token buckets, posts through the injected Transport, retries transient failures
// (429, 5xx, connection errors, timeouts) with exponential backoff and jitter — honouring
// Retry-After — up to RetryPolicy::max_attempts, parses the OpenAI Chat Completions answer into
// a ChatResponse or a typed error (see CallErrorKind), records usage, cost and latency in
// accounting(), and stores the answer in the cache. Profiles with provider "sim" are answered
// by the SimProvider (never cached, labelled simulated).
//
// Thread-safe: call chat() from as many threads as you like; they block while waiting for
// slots. cancel() (or the external cancel flag, which a signal handler may set) makes new and
// waiting calls return kCancelled and abandons in-flight HTTP requests.
// Secrets: API keys go only into the Authorization header handed to the transport; every
// error message passes through core::redact and URLs through core::mask_url.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "nl2sql/core/config.h"
#include "nl2sql/core/status.h"
#include "nl2sql/llm/accounting.h"
#include "nl2sql/llm/clock.h"
#include "nl2sql/llm/profile.h"
#include "nl2sql/llm/rate_limit.h"
#include "nl2sql/llm/response_cache.h"
#include "nl2sql/llm/sim_provider.h"
#include "nl2sql/llm/transport.h"
#include "nl2sql/llm/types.h"

namespace nl2sql::llm {

struct ClientOptions {
  std::shared_ptr<Transport> transport;  // default: CurlTransport
  std::shared_ptr<Clock> clock;          // default: SystemClock
  // Default: opened from settings.cache (nullptr when the mode is off).
  std::shared_ptr<ResponseCache> cache;
  const std::atomic<bool>* cancel_flag = nullptr;  // e.g. set by a SIGINT handler
  uint64_t jitter_seed = 0x9e3779b97f4a7c15ULL;
  // A 401/403 means every later call will fail the same way: when set, the first one cancels
  // the client (in-flight and later calls end kCancelled) and is kept as fatal_error(), so a
  // long run stops early instead of recording every remaining question as failed.
  bool stop_on_auth_error = false;
};

class Client {
 public:
  // Opens the cache per settings (unless options.cache is given). Fails on a cache that cannot
  // be opened, or on replay/read-only mode without an existing cache file.
  static Result<std::unique_ptr<Client>> create(LlmSettings settings, ClientOptions options = {});
  // load_llm_settings(config) + create().
  static Result<std::unique_ptr<Client>> from_config(const core::Config& config,
                                                     ClientOptions options = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  Result<ChatResponse> chat(const ChatRequest& request);
  Result<EmbeddingResponse> embed(const EmbeddingRequest& request);

  void cancel();
  bool cancelled() const;
  // The auth failure that stopped the client (ClientOptions::stop_on_auth_error), if any. Its
  // message names the profile and the key's environment variable, never the key.
  std::optional<Status> fatal_error() const;

  Accounting& accounting() { return accounting_; }
  const LlmSettings& settings() const { return settings_; }
  // True when any profile a role maps to is simulated (reports label the run).
  bool any_simulated() const;
  // Peak requests in flight across all profiles (for tests and benchmarks).
  int64_t peak_in_flight() { return global_limit_.peak(); }

 private:
  struct ProfileState;
  Client(LlmSettings settings, ClientOptions options);
  Result<ChatResponse> chat_uncached(const ModelProfile& profile, ProfileState& state,
                                     const ChatRequest& request, int* attempts);
  Result<HttpResponse> post_with_retries(const ModelProfile& profile, ProfileState& state,
                                         const HttpRequest& http, double estimated_tokens,
                                         const std::string& call_label, int* attempts);
  Clock::Duration backoff(int attempt, const HttpResponse* response);
  void record(const ChatRequest& request, const Result<ChatResponse>& result, int attempts = 0);

  LlmSettings settings_;
  ClientOptions options_;
  std::atomic<bool> cancelled_{false};
  InFlightLimit global_limit_;
  std::map<std::string, std::unique_ptr<ProfileState>> states_;  // fixed after construction
  SimProvider sim_;
  Accounting accounting_;
  std::mutex jitter_mu_;
  uint64_t jitter_state_;  // guarded by jitter_mu_
  mutable std::mutex fatal_mu_;
  std::optional<Status> fatal_;  // guarded by fatal_mu_
};

// Parses an OpenAI Chat Completions response body (exposed for tests).
Result<ChatResponse> parse_chat_completion(const std::string& body, bool accept_truncated);
// Parses an OpenAI embeddings response body with `inputs` vectors (exposed for tests).
Result<EmbeddingResponse> parse_embeddings(const std::string& body, size_t inputs,
                                           const std::string& label);
// Builds the request body (exposed for tests).
std::string build_chat_body(const ModelProfile& profile, const ChatRequest& request);
// Extracts the SQL from a model answer: the last ```sql block, else the last ``` block, else
// the whole text trimmed (for stages parsing answers; sim answers follow the same format).
std::string extract_sql_block(const std::string& answer);

}  // namespace nl2sql::llm
