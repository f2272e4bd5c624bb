// Logging: spdlog to stderr, optionally as JSON lines (--log-json). Every message passes through
// the secret redactor before it reaches a sink, so an API key registered with
// register_secret() never appears in a log even if a caller formats it by mistake.
// All functions are thread-safe.
#pragma once

#include <string>
#include <string_view>

#include <spdlog/spdlog.h>

namespace nl2sql::core {

struct LogOptions {
  std::string level = "info";  // trace, debug, info, warn, error, off
  bool json = false;
  std::string file;            // optional: also log to this file
};

void init_logging(const LogOptions& options);

// Secrets: values (API keys) that must never be written anywhere. Registering is idempotent;
// values shorter than 6 characters are ignored (they would redact ordinary words).
void register_secret(const std::string& value);
// Replaces every registered secret in text with "***".
std::string redact(std::string_view text);
// "https://user:pass@host/v1?api_key=x" -> "https://***@host/v1?api_key=***".
std::string mask_url(std::string_view url);

}  // namespace nl2sql::core
