#include "nl2sql/core/log.h"

#include <algorithm>
#include <mutex>
#include <regex>
#include <set>
#include <shared_mutex>
#include <vector>

#include <nlohmann/json.hpp>

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>

namespace nl2sql::core {
namespace {

// Partial matches at a text's edge shorter than this are left alone: 8 characters of a random
// key are already specific, fewer would start eating ordinary words.
constexpr size_t kMinEdgeMatch = 8;
constexpr size_t kMinSecretSize = 6;

std::shared_mutex g_secrets_mu;
std::set<std::string>& secrets() {
  static std::set<std::string> s;  // registered values; guarded by g_secrets_mu
  return s;
}
// Every form of every secret, longest first (so a longer form is replaced before a shorter one
// that is part of it); guarded by g_secrets_mu.
std::vector<std::string>& secret_forms() {
  static std::vector<std::string> v;
  return v;
}

std::string base64(std::string_view in, bool url_alphabet) {
  static const char* kStd = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  static const char* kUrl = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  const char* a = url_alphabet ? kUrl : kStd;
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    uint32_t n = (uint32_t(uint8_t(in[i])) << 16) | (uint32_t(uint8_t(in[i + 1])) << 8) | uint8_t(in[i + 2]);
    for (int k = 3; k >= 0; --k) out.push_back(a[(n >> (6 * k)) & 63]);
  }
  if (i < in.size()) {
    uint32_t n = uint32_t(uint8_t(in[i])) << 16;
    if (i + 1 < in.size()) n |= uint32_t(uint8_t(in[i + 1])) << 8;
    out.push_back(a[(n >> 18) & 63]);
    out.push_back(a[(n >> 12) & 63]);
    out.push_back(i + 1 < in.size() ? a[(n >> 6) & 63] : '=');
    out.push_back('=');
  }
  return out;
}

std::string percent_encode(std::string_view in, bool lower_hex) {
  std::string out;
  for (unsigned char c : in) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      char buf[4];
      std::snprintf(buf, sizeof(buf), lower_hex ? "%%%02x" : "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

// The forms a server may echo a secret in. For base64 inside a longer text (a Basic-auth header,
// a base64 blob of the request), the secret's bytes may start at any offset mod 3: for each
// alignment, the characters that depend on the secret's bytes alone.
std::vector<std::string> forms_of(const std::string& value) {
  std::vector<std::string> out = {value};
  for (bool url : {false, true}) {
    out.push_back(base64(value, url));
    for (size_t k = 0; k < 3; ++k) {
      std::string padded = std::string(k, '\0') + value;
      std::string b = base64(padded, url);
      const size_t begin = (k * 8 + 5) / 6;      // characters touched by the padding bytes
      const size_t end = 4 * (padded.size() / 3);  // last group made only of known bytes
      if (end > begin) out.push_back(b.substr(begin, end - begin));
    }
  }
  out.push_back(percent_encode(value, false));
  out.push_back(percent_encode(value, true));
  std::vector<std::string> kept;
  for (auto& f : out)
    if (f.size() >= kMinSecretSize && std::find(kept.begin(), kept.end(), f) == kept.end()) kept.push_back(f);
  return kept;
}

void replace_all(std::string& text, const std::string& needle) {
  size_t pos = 0;
  while ((pos = text.find(needle, pos)) != std::string::npos) {
    text.replace(pos, needle.size(), "***");
    pos += 3;
  }
}

// A run of >= kMinEdgeMatch characters ending the text (before trailing quotes, dots, spaces and
// an ellipsis) that begins a secret form, and likewise one starting the text that ends a form.
void redact_edges(std::string& text, const std::vector<std::string>& forms) {
  size_t end = text.size();
  for (;;) {
    if (end >= 3 && text.compare(end - 3, 3, "\xE2\x80\xA6") == 0) { end -= 3; continue; }
    if (end > 0 && std::string_view(" .\"'\n\r\t)]}").find(text[end - 1]) != std::string_view::npos) { --end; continue; }
    break;
  }
  for (const auto& f : forms) {
    for (size_t len = std::min(f.size() - 1, end); len >= kMinEdgeMatch; --len) {
      if (text.compare(end - len, len, f, 0, len) == 0) {
        text.replace(end - len, len, "***");
        end = end - len + 3;
        break;
      }
    }
  }
  for (const auto& f : forms) {
    for (size_t len = std::min(f.size() - 1, text.size()); len >= kMinEdgeMatch; --len) {
      if (text.compare(0, len, f, f.size() - len, len) == 0) {
        text.replace(0, len, "***");
        break;
      }
    }
  }
}

std::string json_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(c);
        }
    }
  }
  return out;
}

// A sink wrapper that redacts secrets before handing the record to the real sinks.
class RedactingSink : public spdlog::sinks::base_sink<std::mutex> {
 public:
  RedactingSink(std::vector<spdlog::sink_ptr> inner, bool json)
      : inner_(std::move(inner)), json_(json) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    std::string text = redact(std::string_view(msg.payload.data(), msg.payload.size()));
    if (json_) {
      auto secs = std::chrono::duration<double>(msg.time.time_since_epoch()).count();
      text = fmt::format(R"({{"ts":{:.3f},"level":"{}","msg":"{}"}})", secs,
                         spdlog::level::to_string_view(msg.level), json_escape(text));
    }
    spdlog::details::log_msg copy(msg.time, msg.source, msg.logger_name, msg.level, text);
    for (auto& s : inner_)
      if (s->should_log(msg.level)) s->log(copy);
  }
  void flush_() override {
    for (auto& s : inner_) s->flush();
  }

 private:
  std::vector<spdlog::sink_ptr> inner_;
  bool json_;
};

}  // namespace

void register_secret(const std::string& value) {
  if (value.size() < kMinSecretSize) return;
  std::unique_lock lock(g_secrets_mu);
  if (!secrets().insert(value).second) return;
  auto& forms = secret_forms();
  for (auto& f : forms_of(value))
    if (std::find(forms.begin(), forms.end(), f) == forms.end()) forms.push_back(std::move(f));
  std::stable_sort(forms.begin(), forms.end(),
                   [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
}

void register_url_credentials(std::string_view url) {
  static const std::regex kUserInfo(R"(^[a-zA-Z][a-zA-Z0-9+.-]*://([^/@?#]*)@)");
  std::match_results<std::string_view::const_iterator> m;
  if (!std::regex_search(url.begin(), url.end(), m, kUserInfo)) return;
  const std::string userinfo = m[1].str();
  const auto colon = userinfo.find(':');
  if (colon == std::string::npos) {
    register_secret(userinfo);  // a token used as the user name
    return;
  }
  register_secret(userinfo.substr(colon + 1));
  register_secret(userinfo);
  // curl decodes %XX in userinfo before building the Basic header.
  std::string decoded;
  for (size_t i = 0; i < userinfo.size(); ++i) {
    if (userinfo[i] == '%' && i + 2 < userinfo.size() && std::isxdigit(static_cast<unsigned char>(userinfo[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(userinfo[i + 2]))) {
      decoded.push_back(static_cast<char>(std::stoi(userinfo.substr(i + 1, 2), nullptr, 16)));
      i += 2;
    } else {
      decoded.push_back(userinfo[i]);
    }
  }
  register_secret(decoded);
  register_secret(decoded.substr(decoded.find(':') + 1));
  register_secret(base64(decoded, false));
}

std::string redact(std::string_view text) {
  std::string out(text);
  std::shared_lock lock(g_secrets_mu);
  const auto& forms = secret_forms();
  if (forms.empty()) return out;
  for (const auto& f : forms) replace_all(out, f);
  redact_edges(out, forms);
  return out;
}

std::string redact_and_cut(std::string_view text, size_t max_bytes) {
  std::string out = redact(text);
  if (out.size() <= max_bytes) return out;
  size_t cut = max_bytes;
  while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) --cut;  // UTF-8 continuation
  out.resize(cut);
  return out;
}

std::string strip_url_credentials(std::string_view text) {
  static const std::regex kUserInfo(R"(([a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s"'?#]*@)");
  return redact(std::regex_replace(std::string(text), kUserInfo, "$1***@"));
}

namespace {
// An object key is a name (a config key, a field), never a cut piece of a secret: only whole
// forms are replaced there, so "metadata" survives a key that happens to end in "metadata".
std::string redact_key(const std::string& key) {
  // (URL credentials are registered as secrets too, so a URL key loses its userinfo here.)
  std::string out = key;
  std::shared_lock lock(g_secrets_mu);
  for (const auto& f : secret_forms()) replace_all(out, f);
  return out;
}
}  // namespace

nlohmann::json redact_json(const nlohmann::json& value) {
  if (value.is_string()) return strip_url_credentials(value.get<std::string>());
  if (value.is_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& v : value) out.push_back(redact_json(v));
    return out;
  }
  if (value.is_object()) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [k, v] : value.items()) out[redact_key(k)] = redact_json(v);
    return out;
  }
  return value;
}

std::string mask_url(std::string_view url) {
  std::string out(url);
  static const std::regex kUserInfo(R"(^([a-zA-Z][a-zA-Z0-9+.-]*://)[^/@]*@)");
  out = std::regex_replace(out, kUserInfo, "$1***@");
  static const std::regex kKeyParam(R"(([?&](?:api[_-]?key|key|token|access_token)=)[^&#]*)",
                                    std::regex::icase);
  out = std::regex_replace(out, kKeyParam, "$1***");
  return redact(out);
}

void init_logging(const LogOptions& options) {
  std::vector<spdlog::sink_ptr> inner;
  auto err = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  err->set_pattern(options.json ? "%v" : "[%H:%M:%S.%e] [%^%l%$] %v");
  inner.push_back(err);
  if (!options.file.empty()) {
    auto f = std::make_shared<spdlog::sinks::basic_file_sink_mt>(options.file);
    f->set_pattern(options.json ? "%v" : "[%Y-%m-%d %H:%M:%S.%e] [%l] %v");
    inner.push_back(f);
  }
  auto sink = std::make_shared<RedactingSink>(inner, options.json);
  sink->set_pattern("%v");
  auto logger = std::make_shared<spdlog::logger>("nl2sql", sink);
  logger->set_level(spdlog::level::from_str(options.level));
  logger->flush_on(spdlog::level::warn);
  spdlog::set_default_logger(logger);
}

}  // namespace nl2sql::core
