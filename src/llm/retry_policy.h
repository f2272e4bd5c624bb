// The retry policy: what the client does after an attempt that brought no usable answer, as
// pure functions of what came back, so that each rule is tested on its own (the loop that
// applies them, with its slots, sleeps and endpoint health, is Client::post_with_retries in
// client_retry.cpp).
//
// - An overload (429, 503, 529, llama.cpp's shared-slot "Context size has been exceeded.") is
//   waited out with fewer requests in flight, outside the retry budget.
// - A refusal (4xx, a context-length error whatever its status, 401/403) is not retried: the
//   same request gets the same answer.
// - Other failures (408, 5xx, connection errors, timeouts) are retried with exponential backoff
//   and jitter, honouring retry-after-ms / Retry-After; a timeout at most once more.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "nl2sql/core/status.h"
#include "nl2sql/llm/profile.h"
#include "nl2sql/llm/types.h"

namespace nl2sql::llm {

enum class Reaction {
  kWaitOverload,  // fewer requests in flight, wait, send again (no retry budget spent)
  kRefuse,        // fail now: asking again gets the same
  kRetry,         // back off and send again, within llm.retry.max_attempts
  kCancel,        // the client is shutting down
};

struct FailedAttempt {
  Reaction reaction = Reaction::kRetry;
  CallErrorKind kind = CallErrorKind::kServer;
  // No answer from the server at all, or a 5xx that is not overload: counts toward taking the
  // endpoint for down.
  bool endpoint_failed = false;
};

// An HTTP answer outside 2xx. `error_type` is the body's error type (WireFormat::read_error);
// `in_flight_limit` the profile's current in-flight limit: llama.cpp's "context size" words
// from a server taking one request at a time mean this request alone is too large.
FailedAttempt classify_http_failure(int status, const std::string& body, const std::string& error_type,
                                    int64_t in_flight_limit);
// A post that brought no HTTP answer, by the transport's error code.
FailedAttempt classify_transport_failure(ErrorCode code);

// The refusal because the prompt (plus the output budget) exceeds the model's context.
bool is_context_overflow(int status, const std::string& body, const std::string& error_type);
// A server too busy for the call just now, which will take it later.
bool is_overload(int status, const std::string& body);
bool retryable_status(int status);

// The same refusal repeated: status and message with numbers blanked.
std::string refusal_signature(int status, const std::string& message);
// What to change in the config for the refusals a misconfigured profile meets first
// (" — set llm.models.X.… "), "" when none applies.
std::string refusal_hint(const ModelProfile& profile, int status, const std::string& message);

// Seconds to wait from a Retry-After value: delta-seconds or an HTTP-date (RFC 9110).
std::optional<double> retry_after_seconds(const std::string& value);
// The wait an answer asks for: retry-after-ms (OpenAI, Azure), else Retry-After; nullopt when
// it asks for none. Header names lower-cased.
std::optional<double> requested_wait_s(const std::map<std::string, std::string>& headers);
// The backoff before attempt `attempt` + 1: the requested wait when there is one (capped at
// max_delay_s), else base_delay_s doubled per attempt (capped) with jitter `u` in [0, 1) over
// its upper half: spreads, never collapses.
double backoff_s(const RetryPolicy& policy, int attempt, std::optional<double> requested, double u);
// The wait before the next probe of a down endpoint: 0.5 s doubling per probe up to 4 s, never
// past the end of llm.endpoint_down_wait_s (and at least 50 ms).
double probe_delay_s(int probes, double down_for_s, double down_wait_s);

}  // namespace nl2sql::llm
