// What the parts of llm::Client share (client.cpp, client_dispatch.cpp, client_chat_http.cpp,
// client_retry.cpp, client_preflight.cpp): the per-profile state — in-flight limit, rate
// buckets, overload back-pressure, endpoint health, repeated refusals — each part guarded by
// its named mutex; one call's way through the retry loop (PostCall); and the small estimates
// and labels every part uses. Private to the llm layer.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>

#include "batch_queue.h"
#include "nl2sql/core/log.h"
#include "nl2sql/llm/client.h"

namespace nl2sql::llm {

// Overload answers one call may meet before it fails (each lowers the profile's in-flight
// limit and waits with backoff; none spends the retry budget meant for real errors).
inline constexpr int kMaxOverloadRetries = 20;

// Endpoint health: kDownAfterFailures failed attempts in a row (connection errors, timeouts, or
// 5xx that are not overload), with no answer between them, across the profile's calls, mark the
// endpoint down. Its calls then wait instead of spending their retries, and one of them at a
// time probes it with backoff until it answers or llm.endpoint_down_wait_s has passed, which
// stops the run.
inline constexpr int64_t kDownAfterFailures = 6;

struct Client::ProfileState {
  ProfileState(const ModelProfile& p, int64_t global_max, const std::shared_ptr<Clock>& clock)
      : limit(p.max_in_flight > 0 ? p.max_in_flight : global_max),
        requests(p.rpm, clock),
        tokens(p.tpm, clock),
        ceiling(p.max_in_flight > 0 ? p.max_in_flight : global_max),
        level(static_cast<double>(ceiling)),
        lowest(ceiling) {}
  InFlightLimit limit;
  TokenBucket requests;
  TokenBucket tokens;
  // Overload back-pressure (note_overload / note_answered): `limit` follows `level`.
  std::mutex load_mu;
  const int64_t ceiling;              // the configured limit
  double level;                       // guarded by load_mu
  int64_t lowest;                     // guarded by load_mu
  int64_t overloads = 0;              // guarded by load_mu
  bool decreased_once = false;        // guarded by load_mu
  Clock::TimePoint last_decrease{};   // guarded by load_mu
  // Endpoint health (note_endpoint_failure / note_endpoint_answer / await_endpoint).
  std::mutex health_mu;
  std::condition_variable health_cv;  // signalled when the endpoint answers again
  int64_t failed_in_a_row = 0;        // guarded by health_mu
  bool down = false;                  // guarded by health_mu
  bool probing = false;               // guarded by health_mu: a call is probing it
  Clock::TimePoint down_since{};      // guarded by health_mu
  std::set<std::string> streak_questions;  // guarded by health_mu: questions of the failed streak
  // The same non-retryable refusal on consecutive calls (reset by any answered call).
  std::mutex refusals_mu;
  std::string last_refusal;  // guarded by refusals_mu
  int64_t repeated = 0;      // guarded by refusals_mu
  // A batch profile's queue (llm.models.*.batch); null for the others. Set at construction.
  std::unique_ptr<BatchQueue> batch;
};

// One call's way through post_with_retries: what it sends and what it has met so far. Owned by
// the calling thread.
struct Client::PostCall {
  PostCall(const ModelProfile& p, ProfileState& st, const HttpRequest& h, double estimated, const std::string& l,
           int* attempts_out, int max, SlotPriority prio, const std::string& q)
      : profile(p),
        state(st),
        http(h),
        estimated_tokens(estimated),
        label(l),
        attempts(attempts_out),
        max_attempts(max),
        priority(prio),
        question(q),
        where("model profile \"" + p.name + "\" at " + core::mask_url(p.base_url)) {}
  const ModelProfile& profile;
  ProfileState& state;
  const HttpRequest& http;
  double estimated_tokens;
  const std::string& label;  // the call as error messages name it
  int* attempts;             // HTTP attempts made (every one, overloads and probes included)
  int max_attempts;
  SlotPriority priority;
  const std::string& question;
  std::string where;         // "model profile "x" at <masked URL>"
  int timeouts = 0;
  int counted = 0;    // attempts that spend the retry budget
  int overloads = 0;  // overload answers: retried apart from that budget
  int probes = 0;     // attempts made as the down endpoint's probe
  bool prober = false;
};

inline double seconds_between(Clock::TimePoint a, Clock::TimePoint b) {
  return std::chrono::duration<double>(b - a).count();
}

// Tokens from characters (4 a token): what limits, budgets and missing usage go by.
inline int64_t estimate_tokens(size_t chars) { return static_cast<int64_t>((chars + 3) / 4); }

inline size_t prompt_chars(const ChatRequest& r) {
  size_t n = 0;
  for (const auto& m : r.messages) n += m.content.size() + 4;
  return n;
}

// The hash of what a server received for a chat call: the endpoint and the body, byte for byte
// (a trace's request_hash; a batch line's custom_id).
std::string request_hash_of(const ModelProfile& profile, const std::string& body);

// The call as error messages and logs name it: profile, model, stage, question, sample.
std::string describe_call(const ModelProfile& p, const ChatRequest& r);

}  // namespace nl2sql::llm
