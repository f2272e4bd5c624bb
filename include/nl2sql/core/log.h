// Logging: spdlog to stderr, optionally as JSON lines (--log-json). Every message passes through
// the secret redactor before it reaches a sink, so an API key registered with
// register_secret() never appears in a log even if a caller formats it by mistake.
// All functions are thread-safe.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>
#include <spdlog/spdlog.h>

namespace nl2sql::core {

struct LogOptions {
  std::string level = "info";  // trace, debug, info, warn, error, off
  bool json = false;
  std::string file;            // optional: also log to this file
};

void init_logging(const LogOptions& options);

// Secrets: values (API keys, header values, URL passwords) that must never be written
// anywhere. Registering is idempotent; values shorter than 6 characters are ignored (they would
// redact ordinary words). Each secret is also recognised in the forms a server may echo it in:
// base64 (at any of the three byte alignments inside a longer base64 text, standard and URL
// alphabet) and percent-encoded.
void register_secret(const std::string& value);
// Registers the credentials of a URL's userinfo ("http://user:pass@host"): the password, the
// "user:pass" pair and its base64 (what curl sends as Basic auth). No-op without userinfo.
void register_url_credentials(std::string_view url);
// Replaces every registered secret form in text with "***". A text that starts or ends in the
// middle of a secret (someone else cut it) loses that piece too: a run of >= 8 characters at an
// edge (ignoring trailing quotes, dots and an ellipsis) that is a prefix (at the end) or a suffix
// (at the start) of a secret form is replaced. Redact a whole text *before* cutting it.
std::string redact(std::string_view text);
// redact(text), then cut to at most max_bytes (never inside a UTF-8 sequence).
std::string redact_and_cut(std::string_view text, size_t max_bytes);
// "https://user:pass@host/v1?api_key=x" -> "https://***@host/v1?api_key=***".
std::string mask_url(std::string_view url);
// Every URL inside text (not only at its start) loses its userinfo ("scheme://***@host"); then
// redact().
std::string strip_url_credentials(std::string_view text);
// A copy of a JSON document (a resolved config, a manifest) safe to write: every string value
// and key goes through strip_url_credentials. The one function writers of configs use.
nlohmann::json redact_json(const nlohmann::json& value);

}  // namespace nl2sql::core
