#include "retry_policy.h"

#include <algorithm>
#include <cmath>
#include <cctype>
#include <cstdlib>
#include <ctime>

#include "nl2sql/core/log.h"
#include "nl2sql/core/text.h"

namespace nl2sql::llm {

bool retryable_status(int status) { return status == 408 || status == 429 || status >= 500; }

// A refusal because the prompt (plus the output budget) exceeds the model's context: OpenAI's
// code context_length_exceeded, vLLM's "maximum context length is N tokens", llama.cpp-server's
// "exceeds the available context size", Anthropic-style "prompt is too long", 413s.
bool is_context_overflow(int status, const std::string& body, const std::string& error_type) {
  // llama.cpp-server names it whatever the status (older builds answer it with a 500).
  if (error_type == "exceed_context_size_error") return true;
  if (status != 400 && status != 413 && status != 422) return false;
  const std::string b = core::lower(body.substr(0, 4096));
  for (const char* marker : {"context_length_exceeded", "maximum context length", "context length",
                             "context size", "context window", "prompt is too long",
                             "too many tokens", "exceeds the context", "reduce the length"})
    if (b.find(marker) != std::string::npos) return true;
  return status == 413;
}

// A server too busy for the call just now, which will take it later: 429 and 503 (OpenAI, Azure,
// vLLM, Ollama's "server busy" past OLLAMA_MAX_QUEUE), 529 (overloaded), and llama.cpp-server's
// 500 "Context size has been exceeded." when its parallel slots share one KV cache (-np with
// -c) and the requests in flight fill it: a prompt that fits alone fails only under load. The
// answer to all of them is fewer requests at once, not a failed call.
bool is_overload(int status, const std::string& body) {
  if (status == 429 || status == 503 || status == 529) return true;
  if (status < 500) return false;
  const std::string b = core::lower(body.substr(0, 4096));
  return b.find("context size has been exceeded") != std::string::npos || b.find("server busy") != std::string::npos;
}

// The same refusal repeated: status and message with numbers blanked (a context error quotes
// each prompt's length; an unknown-model error is identical every time).
std::string refusal_signature(int status, const std::string& message) {
  std::string sig = std::to_string(status) + ":";
  // A run of digits is one '#': "9001 tokens" and "12 tokens" are the same refusal.
  for (char c : message.substr(0, 200)) {
    const bool digit = std::isdigit(static_cast<unsigned char>(c));
    if (!digit) sig.push_back(c);
    else if (sig.back() != '#') sig.push_back('#');
  }
  return sig;
}

// What to change in the config, for the refusals a misconfigured profile meets first.
std::string refusal_hint(const ModelProfile& p, int status, const std::string& message) {
  const std::string m = core::lower(message);
  const std::string key = "llm.models." + p.name;
  if (m.find("max_completion_tokens") != std::string::npos && !p.omit.count("max_tokens"))
    return " — set " + key + ".max_tokens_field to \"max_completion_tokens\"";
  for (const char* field : {"temperature", "top_p", "seed", "stop"})
    if (m.find(std::string("'") + field + "'") != std::string::npos ||
        m.find(std::string("\"") + field + "\"") != std::string::npos ||
        m.find(std::string("param: ") + field) != std::string::npos)
      if (m.find("unsupported") != std::string::npos || m.find("not supported") != std::string::npos ||
          m.find("does not support") != std::string::npos || m.find("extra") != std::string::npos)
        return std::string(" — add \"") + field + "\" to " + key + ".omit";
  if (m.find("extra inputs are not permitted") != std::string::npos || m.find("unrecognized request argument") != std::string::npos)
    return " — the server refuses a field: compare " + key + ".extra_body and .omit with what it accepts";
  if (status == 404 && (m.find("model") != std::string::npos || m.find("not found") != std::string::npos))
    return " — check " + key + ".model (\"" + p.model + "\") against the server's model list, and the base URL (" +
           core::mask_url(p.base_url) + ", which should end in /v1 or the deployment path)";
  if (m.find("model") != std::string::npos && (m.find("does not exist") != std::string::npos || m.find("not found") != std::string::npos))
    return " — check " + key + ".model (\"" + p.model + "\")";
  if (m.find("api-version") != std::string::npos || m.find("api version") != std::string::npos)
    return " — set " + key + ".query.api-version";
  return "";
}

// Seconds to wait from a Retry-After header: delta-seconds or an HTTP-date (RFC 9110).
std::optional<double> retry_after_seconds(const std::string& value) {
  char* end = nullptr;
  double secs = std::strtod(value.c_str(), &end);
  if (end != value.c_str() && secs >= 0) return secs;
  std::tm tm{};
  const char* rest = strptime(value.c_str(), "%a, %d %b %Y %H:%M:%S", &tm);
  if (!rest) return std::nullopt;
  const std::time_t when = timegm(&tm);
  const std::time_t now = std::time(nullptr);
  return std::max(0.0, static_cast<double>(when - now));
}

FailedAttempt classify_http_failure(int status, const std::string& body, const std::string& error_type,
                                    int64_t in_flight_limit) {
  const bool overflow = is_context_overflow(status, body, error_type);
  // A window too small for this request alone is the context-length path; the same words
  // under load, with requests of others in flight, are overload.
  const bool alone_too_large = status >= 500 && status != 503 && status != 529 && in_flight_limit == 1 &&
                               core::lower(body).find("context size") != std::string::npos;
  if (!overflow && is_overload(status, body) && !alone_too_large)
    return {Reaction::kWaitOverload, status == 429 ? CallErrorKind::kRateLimited : CallErrorKind::kServer, false};
  if (!retryable_status(status) || overflow) {
    const CallErrorKind kind = (status == 401 || status == 403) ? CallErrorKind::kAuth
                               : overflow                       ? CallErrorKind::kContextLength
                                                                : CallErrorKind::kHttpClient;
    return {Reaction::kRefuse, kind, false};
  }
  return {Reaction::kRetry, status == 408 ? CallErrorKind::kTimeout : CallErrorKind::kServer, status >= 500};
}

FailedAttempt classify_transport_failure(ErrorCode code) {
  switch (code) {
    case ErrorCode::kCancelled: return {Reaction::kCancel, CallErrorKind::kCancelled, false};
    // The answer outgrew llm.max_response_bytes: the same request would bring the same flood.
    case ErrorCode::kRejected: return {Reaction::kRefuse, CallErrorKind::kServer, false};
    case ErrorCode::kTimeout: return {Reaction::kRetry, CallErrorKind::kTimeout, true};
    case ErrorCode::kUnavailable: return {Reaction::kRetry, CallErrorKind::kConnection, true};
    default: return {Reaction::kRefuse, CallErrorKind::kConnection, false};
  }
}

std::optional<double> requested_wait_s(const std::map<std::string, std::string>& headers) {
  // retry-after-ms (OpenAI, Azure) is the precise one; Retry-After is seconds or an HTTP-date.
  if (auto ms = headers.find("retry-after-ms"); ms != headers.end()) {
    char* end = nullptr;
    double v = std::strtod(ms->second.c_str(), &end);
    if (end != ms->second.c_str() && v >= 0) return v / 1000.0;
  }
  if (auto it = headers.find("retry-after"); it != headers.end()) return retry_after_seconds(it->second);
  return std::nullopt;
}

double backoff_s(const RetryPolicy& policy, int attempt, std::optional<double> requested, double u) {
  if (requested) return std::min(*requested, policy.max_delay_s);
  const double exp = std::min(policy.max_delay_s, policy.base_delay_s * std::pow(2.0, attempt - 1));
  return exp * (0.5 + 0.5 * u);
}

double probe_delay_s(int probes, double down_for_s, double down_wait_s) {
  return std::min({0.5 * std::pow(2.0, std::min(probes - 1, 4)), 4.0, std::max(0.05, down_wait_s - down_for_s)});
}

}  // namespace nl2sql::llm
