// llm::Client: the one way to call a model. A stage builds a ChatRequest (role, messages,
// sample index, tags) and calls chat(); the client resolves the role to a profile, consults the
// response cache, waits for an in-flight slot (global and per profile) and for the profile's
// request/token buckets, posts through the injected Transport, retries transient failures
// (429, 5xx, connection errors, timeouts) with exponential backoff and jitter — honouring
// Retry-After — up to RetryPolicy::max_attempts, parses the OpenAI Chat Completions answer into
// a ChatResponse or a typed error (see CallErrorKind), records usage, cost and latency in
// accounting(), and stores the answer in the cache. Profiles with provider "sim" are answered
// by the attached llm::Simulator (src/sim/; never cached, labelled simulated).
//
// Thread-safe: call chat() from as many threads as you like; they block while waiting for
// slots. cancel() (or the external cancel flag, which a signal handler may set) makes new and
// waiting calls return kCancelled and abandons in-flight HTTP requests.
// Secrets: API keys go only into the Authorization header handed to the transport; every
// error message passes through core::redact and URLs through core::mask_url.
//
// The client is written in parts, one job each: the wire format (openai_chat.h: request bodies,
// answers, usage, refusals, stream errors), the retry policy (retry_policy.h, applied by
// post_with_retries in client_retry.cpp), the cache / simulator dispatch (client_dispatch.cpp),
// the HTTP chat call and its cut-answer rule (client_chat_http.cpp), the preflight
// (client_preflight.cpp) and the one cost formula (cost.h); src/llm/README.md maps them.
#pragma once

#include <atomic>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "nl2sql/core/config.h"
#include "nl2sql/core/status.h"
#include "nl2sql/llm/accounting.h"
#include "nl2sql/llm/batch_journal.h"
#include "nl2sql/llm/clock.h"
#include "nl2sql/llm/cost.h"
#include "nl2sql/llm/openai_chat.h"
#include "nl2sql/llm/profile.h"
#include "nl2sql/llm/rate_limit.h"
#include "nl2sql/llm/response_cache.h"
#include "nl2sql/llm/simulator.h"
#include "nl2sql/llm/transport.h"
#include "nl2sql/llm/types.h"

namespace nl2sql::llm {

struct ClientOptions {
  std::shared_ptr<Transport> transport;  // default: CurlTransport
  // Answers the profiles whose provider is "sim" (src/sim/, sim::attach); without it such a
  // profile's calls fail as a configuration error.
  std::shared_ptr<const Simulator> simulator;
  std::shared_ptr<Clock> clock;          // default: SystemClock
  // Default: opened from settings.cache (nullptr when the mode is off).
  std::shared_ptr<ResponseCache> cache;
  const std::atomic<bool>* cancel_flag = nullptr;  // e.g. set by a SIGINT handler
  uint64_t jitter_seed = 0x9e3779b97f4a7c15ULL;
  // A 401/403 means every later call will fail the same way, and so does the same refusal
  // (400 unknown model, unsupported parameter, …) repeated on llm.stop_after_repeated_errors
  // consecutive calls of one profile: when set, such a failure cancels the client (in-flight
  // and later calls end kCancelled) and is kept as fatal_error(), so a long run stops early
  // instead of recording every remaining question as failed.
  bool stop_on_fatal_error = false;
};

// The outcome of one preflight request to a profile (see Client::preflight).
struct PreflightResult {
  std::string profile;
  std::string endpoint;                // masked URL the request went to
  std::string model;
  std::vector<std::string> fields;     // top-level body fields sent
  // OK when the profile answered (or is simulated); else the server's refusal or the transport
  // error, as the call failed with (its CallErrorKind included).
  Status status;
  bool simulated = false;              // sim profiles are not called
  double latency_s = 0;
  std::string answer;                  // the first choice's text (cut), when answered
  std::string note;                    // e.g. "answer cut at the check's budget"
};

// How hard a profile's endpoint pushed back: overload answers (429, 503, llama.cpp's shared-slot
// "Context size has been exceeded.") and the in-flight limit they brought it down to.
struct ProfileLoad {
  std::string profile;
  int64_t max_in_flight = 0;     // configured (llm.models.*.max_in_flight, else llm.max_in_flight)
  int64_t lowest_in_flight = 0;  // the lowest limit reached
  int64_t overloads = 0;         // overload answers received
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

  // `spent`, when given, receives what the server processed for the call over all its attempts
  // (see CallSpend), whether it succeeded or not.
  Result<ChatResponse> chat(const ChatRequest& request, CallSpend* spent = nullptr);
  Result<EmbeddingResponse> embed(const EmbeddingRequest& request);

  void cancel();
  bool cancelled() const;
  // The failure that stopped the client (ClientOptions::stop_on_fatal_error), if any. Its
  // message names the profile (and for 401/403 the key's environment variable, never the key)
  // and quotes the server.
  std::optional<Status> fatal_error() const;

  // One small real request per named profile, bypassing the cache, with at most two attempts,
  // sent exactly as the profile shapes every request (so a refused field or an unknown model
  // shows here, in seconds, not as a run of failed questions). Sim profiles are reported as
  // simulated without a call. Calls are accounted under stage "preflight". The profiles are
  // checked side by side; the results come in the order asked.
  std::vector<PreflightResult> preflight(const std::vector<std::string>& profiles);
  // Holds every call that would go to an endpoint (answers from the cache or the simulator are
  // not held) until `open` is ready: an OK status lets them go; an error stops the client with
  // it (as stop()) and the held calls fail as cancelled. Set before the first call. A run holds
  // its questions' calls until its preflight passed, while they do their local work.
  void hold_calls_until(std::shared_future<Status> open) { gate_ = std::move(open); }
  // Stops the client for good: fatal_error() is `fatal` (the first one given), every call in
  // progress or to come fails as cancelled.
  void stop_with(const Status& fatal);

  // Tokens a prompt may take for a call of `role` (or to `profile`): the profile's
  // context_tokens minus the call's output budget and a margin for the chat template;
  // nullopt when the window is unknown (context_tokens 0) or the profile is simulated.
  std::optional<int64_t> prompt_budget(const std::string& role, const std::string& profile,
                                       std::optional<int64_t> max_tokens = std::nullopt) const;

  // The profiles that `roles` (and explicitly named profiles) resolve to.
  std::vector<std::string> profiles_for(const std::vector<std::string>& roles,
                                        const std::vector<std::string>& named_profiles = {}) const;

  Accounting& accounting() { return accounting_; }
  const LlmSettings& settings() const { return settings_; }
  // True when any of these profiles is simulated (reports label the run).
  bool any_simulated(const std::vector<std::string>& used_profiles) const;
  // … of the profiles every known role resolves to (llm.roles, else the default profile): a
  // sim profile that is defined but serves no role does not make a run simulated.
  bool any_simulated() const;
  // How requests waiting for an in-flight slot are ordered (lowest first; ties first come, first
  // served, which is also the default). Set before the first call.
  using PriorityFn = std::function<SlotPriority(const ChatRequest&)>;
  void set_priority(PriorityFn fn) { priority_ = std::move(fn); }
  // Where batch profiles (llm.models.*.batch) record their jobs until they ended, and find the
  // jobs of an earlier run to pick up (BatchJournal). Set before the first call.
  void set_batch_journal(std::shared_ptr<BatchJournal> journal);
  // Batch jobs submitted so far, across profiles (tests and benchmarks).
  int64_t batch_jobs();
  // Peak requests in flight across all profiles (for tests and benchmarks).
  int64_t peak_in_flight() { return global_limit_.peak(); }
  // Per profile: overload answers and the in-flight limit they brought it to (reports).
  std::vector<ProfileLoad> profile_loads();

 private:
  struct ProfileState;
  struct PostCall;
  Client(LlmSettings settings, ClientOptions options);

  // The cache / simulator dispatch (client_dispatch.cpp).
  Result<ChatResponse> answer_simulated(const ModelProfile& profile, const ChatRequest& request, CallSpend* spent);
  // A cache hit, a cache error or (in replay mode) the miss that fails the call; nullopt: ask
  // the endpoint.
  std::optional<Result<ChatResponse>> answer_from_cache(const ModelProfile& profile, const ChatRequest& request,
                                                        ResponseCache& cache, const std::string& key);

  // The HTTP chat call with the cut-answer rule (client_chat_http.cpp). `spent`: what the
  // server processed over every attempt and what it costs (batched answers discounted).
  Result<ChatResponse> chat_uncached(const ModelProfile& profile, ProfileState& state,
                                     const ChatRequest& request, int* attempts, CallSpend* spent);
  // One attempt of a batch profile: the answer line from its batch job, or — for a line that
  // failed, or a job that ended without it — one synchronous call through the retry loop.
  // `batched`: the answer came from the job.
  Result<HttpResponse> post_batched(const ModelProfile& profile, ProfileState& state, const HttpRequest& http,
                                    double estimated_tokens, const ChatRequest& request, int* attempts,
                                    bool* batched);

  // Overload back-pressure and endpoint health (client_retry.cpp).
  void note_overload(const ModelProfile& profile, ProfileState& state);
  void note_answered(ProfileState& state);
  // True when the endpoint is (now) taken for down.
  // `no_answer`: no HTTP answer at all (connection error, timeout), not a 5xx.
  bool note_endpoint_failure(const ModelProfile& profile, ProfileState& state, const std::string& what,
                             const std::string& question, bool no_answer);
  void note_endpoint_answer(const ModelProfile& profile, ProfileState& state);
  // Waits while the endpoint is down, unless this call becomes (or is) its prober.
  Status await_endpoint(ProfileState& state, bool& prober);
  void give_up_probing(ProfileState& state, bool& prober);

  // The retry loop (client_retry.cpp): posts until an answer, a refusal, or the policy gives up.
  Result<HttpResponse> post_with_retries(const ModelProfile& profile, ProfileState& state,
                                         const HttpRequest& http, double estimated_tokens,
                                         const std::string& call_label, int* attempts,
                                         int max_attempts = 0, SlotPriority priority = {},
                                         const std::string& question = "");
  // Its units: each returns the call's final error, or OK to go on.
  Status wait_for_turn(PostCall& call);  // cancellation, a down endpoint, rate buckets
  Result<HttpResponse> send_in_slots(PostCall& call);
  void note_success(PostCall& call);
  Status end_of_transport_failure(PostCall& call, ErrorCode code, CallErrorKind kind, const std::string& what);
  Status wait_out_overload(PostCall& call, CallErrorKind kind, const std::string& what,
                           const HttpResponse& response);
  Status refusal(PostCall& call, CallErrorKind kind, const std::string& what, int status,
                 const std::string& server_message);
  Status probe_down_endpoint(PostCall& call, CallErrorKind kind, const std::string& what);
  Status back_off(PostCall& call, CallErrorKind kind, const std::string& what, const HttpResponse* response);
  // Sleeps in slices so a shutdown is noticed within a quarter second; false: cancelled meanwhile.
  bool sleep_unless_cancelled(Clock::Duration wait);
  Clock::Duration backoff(int attempt, const HttpResponse* response);

  // The preflight (client_preflight.cpp).
  PreflightResult preflight_one(const std::string& profile);

  HttpRequest http_request(const ModelProfile& profile, const std::string& path) const;
  // Waits for the gate of hold_calls_until; the error a held call fails with when it closed.
  std::optional<Status> held_back();
  void record(const ChatRequest& request, const Result<ChatResponse>& result, int attempts = 0,
              const CallSpend& spent = {});

  LlmSettings settings_;
  ClientOptions options_;
  std::unique_ptr<const WireFormat> wire_;  // OpenAiChat
  std::atomic<bool> cancelled_{false};
  InFlightLimit global_limit_;
  PriorityFn priority_;
  std::map<std::string, std::unique_ptr<ProfileState>> states_;  // fixed after construction
  Accounting accounting_;
  std::mutex jitter_mu_;
  uint64_t jitter_state_;  // guarded by jitter_mu_
  mutable std::mutex fatal_mu_;
  std::optional<Status> fatal_;  // guarded by fatal_mu_
  std::shared_future<Status> gate_;  // written before the first call, then only read
};

// True when a (possibly cut) answer already holds a complete final answer outside its
// reasoning: a closed fence, a closed <FINAL_ANSWER>/<answer> tag, or a whole JSON value,
// and the text does not end inside an open fence.
bool has_complete_answer(const std::string& text);

}  // namespace nl2sql::llm
