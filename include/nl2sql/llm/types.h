// Value types of a model call: the request a stage builds (messages, sampling overrides, the
// sample index that makes repeated samples distinct, the tags accounting groups by, and the
// CallTag saying what the call is for), the response the client hands
// back (choices, token usage, cost, latency, where it came from), and the typed error kinds a
// caller can branch on. All are plain values: cheap to copy, not synchronised.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nl2sql/core/status.h"
#include "nl2sql/llm/call_tag.h"

namespace nl2sql::llm {

struct Message {
  std::string role;  // "system" | "user" | "assistant"
  std::string content;
  bool operator==(const Message&) const = default;
};

// What a stage asks for. Sampling fields left empty take the profile's values.
struct ChatRequest {
  std::string role;     // a role from llm.roles (generate, fix, select, …): picks the profile
  std::string profile;  // or a profile name directly; wins over `role` when set
  std::vector<Message> messages;
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<int64_t> max_tokens;
  std::optional<int64_t> seed;
  std::vector<std::string> stop;
  int n = 1;                  // choices per call (most servers support n; sim returns n)
  int64_t sample_index = 0;   // distinct samples of one prompt use distinct indices
  std::string template_hash;  // PromptTemplate::hash() of the template the prompt came from
  bool accept_truncated = false;  // finish_reason "length" is an error unless set
  // Accounting tags.
  std::string stage;
  std::string question_id;
  // What the call is for; read by the simulator only (ignored by real models, not part of the
  // cache key). Never holds gold.
  CallTag tag;
};

// Tokens as the server reported them. cached_tokens (the part of the prompt the provider's own
// prefix cache served, billed at the cached price) and reasoning_tokens (the part of the
// completion spent thinking, already inside completion_tokens) are unknown, not zero, when the
// server did not say: a sum is known when any of its parts was.
struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  std::optional<int64_t> cached_tokens;
  std::optional<int64_t> reasoning_tokens;
  Usage& operator+=(const Usage& o) {
    prompt_tokens += o.prompt_tokens;
    completion_tokens += o.completion_tokens;
    if (o.cached_tokens) cached_tokens = cached_tokens.value_or(0) + *o.cached_tokens;
    if (o.reasoning_tokens) reasoning_tokens = reasoning_tokens.value_or(0) + *o.reasoning_tokens;
    return *this;
  }
};

// What the server processed for one call over all its attempts — an answer cut at its budget
// and asked again with a larger one, an answer that stopped at the window, an answer no reader
// could use — and what that costs at the profile's prices: what the provider bills, whether the
// call succeeded or not. Zero for cache hits; estimated for simulated answers.
struct CallSpend {
  Usage usage;
  double cost_usd = 0.0;
};

struct ChatResponse {
  std::vector<std::string> choices;  // message contents, at least one, none empty
  std::vector<std::string> finish_reasons;
  // Per choice, the reasoning the server returned beside the content (vLLM/DeepSeek
  // `reasoning_content`, OpenRouter/Ollama `reasoning`); "" when none. Kept for traces and
  // counted in tokens, never parsed for the answer.
  std::vector<std::string> reasoning;
  // Per choice: the content was empty and choices[i] is the tail of the reasoning instead
  // (a reasoning model that ran out of budget or a server that put everything in reasoning).
  std::vector<bool> answer_from_reasoning;
  // The server said the answer was cut by its context window, not by max_tokens (llama.cpp's
  // "truncated": true).
  bool window_truncated = false;
  Usage usage;
  double cost_usd = 0.0;
  double latency_s = 0.0;      // wall time of the call including retries (0 for cache hits)
  int attempts = 0;            // HTTP attempts made (0 for cache hits and sim)
  bool from_cache = false;
  std::string provider;        // "openai" (any compatible server) or "sim" (simulated!)
  std::string profile;
  std::string model;
  // The sampling the request went out with (the profile's defaults filled in) and, for an answer
  // a server gave, request_hash: XXH3-128 of the endpoint and the exact body last posted — two
  // calls with the same hash were byte-identical requests (reports count them as duplicates).
  // Empty for cache hits and simulated answers: nothing was sent.
  std::optional<double> temperature;
  std::optional<int64_t> seed;
  std::string request_hash;
  const std::string& text() const { return choices.front(); }
  bool simulated() const { return provider == "sim"; }
};

struct EmbeddingRequest {
  std::string role;
  std::string profile;
  std::vector<std::string> inputs;
  std::string stage;
  std::string question_id;
};

struct EmbeddingResponse {
  std::vector<std::vector<float>> vectors;  // one per input, same order
  Usage usage;
  double cost_usd = 0.0;
  double latency_s = 0.0;
};

// Typed failure kinds. Every error the client returns is a Status whose message starts with
// "[<kind>] " so callers branch with call_error_kind(status) instead of parsing text.
enum class CallErrorKind {
  kNone,
  kConfig,          // unknown role/profile, missing API key                (kInvalidInput)
  kHttpClient,      // HTTP 400/404/422…: not retried                       (kInvalidInput)
  kContextLength,   // HTTP 400/413 saying the prompt exceeds the context     (kInvalidInput)
  kAuth,            // HTTP 401/403: not retried                            (kPermission)
  kRateLimited,     // HTTP 429 after the last attempt                      (kUnavailable)
  kServer,          // HTTP 5xx after the last attempt                      (kUnavailable)
  kConnection,      // refused/reset/DNS after the last attempt             (kUnavailable)
  kTimeout,         // the profile's timeout_s passed on the last attempt   (kTimeout)
  kCancelled,       // shutdown requested                                   (kCancelled)
  kNotJson,         // body is not JSON (or truncated JSON)                 (kInvalidInput)
  kMissingField,    // JSON without choices[].message.content etc.          (kInvalidInput)
  kEmptyChoices,    // "choices": []                                        (kInvalidInput)
  kEmptyContent,    // content "" or null                                   (kInvalidInput)
  kTruncated,       // finish_reason "length" (and accept_truncated unset)  (kInvalidInput)
  kReplayMiss,      // cache mode replay and the call was never recorded    (kNotFound)
  kCache,           // the cache file could not be read or written          (kIo)
};

const char* call_error_kind_name(CallErrorKind kind);
Status make_call_error(CallErrorKind kind, std::string message);
// kNone for OK statuses and for statuses not made by make_call_error.
CallErrorKind call_error_kind(const Status& status);
// True for malformed-answer kinds (kNotJson … kTruncated): the server answered, badly.
bool is_malformed_answer(CallErrorKind kind);
// True for a call the server never answered — rate limits, 5xx, connection errors, timeouts,
// cancellation, an unreadable cache — after its retries: asking again may well succeed, so a
// stage that lost one is incomplete, not finished (a refusal, a malformed or cut answer is an
// answer: asking again gets the same).
bool is_lost_call(CallErrorKind kind);
// The same, by the kind's name as accounting counts it (call_error_kind_name).
bool is_lost_call_kind_name(const std::string& name);

}  // namespace nl2sql::llm
