#include "nl2sql/core/log.h"

#include <mutex>
#include <regex>
#include <set>
#include <shared_mutex>

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>

namespace nl2sql::core {
namespace {

std::shared_mutex g_secrets_mu;
std::set<std::string>& secrets() {
  static std::set<std::string> s;  // guarded by g_secrets_mu
  return s;
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
  if (value.size() < 6) return;
  std::unique_lock lock(g_secrets_mu);
  secrets().insert(value);
}

std::string redact(std::string_view text) {
  std::string out(text);
  std::shared_lock lock(g_secrets_mu);
  for (const auto& s : secrets()) {
    size_t pos = 0;
    while ((pos = out.find(s, pos)) != std::string::npos) {
      out.replace(pos, s.size(), "***");
      pos += 3;
    }
  }
  return out;
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
