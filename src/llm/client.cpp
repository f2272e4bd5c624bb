#include "nl2sql/llm/client.h"

#include "nl2sql/core/hash.h"

#include <curl/curl.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <set>
#include <thread>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "nl2sql/core/log.h"

namespace nl2sql::llm {
namespace {

using json = nlohmann::json;

double seconds_between(Clock::TimePoint a, Clock::TimePoint b) {
  return std::chrono::duration<double>(b - a).count();
}

int64_t estimate_tokens(size_t chars) { return static_cast<int64_t>((chars + 3) / 4); }

size_t prompt_chars(const ChatRequest& r) {
  size_t n = 0;
  for (const auto& m : r.messages) n += m.content.size() + 4;
  return n;
}

// The server's own explanation, from {"error":{"message":…}} or the body's start; redacted
// before it is cut (a key echoed across the cut would no longer be recognised after it).
std::string server_message(const std::string& body) {
  auto j = json::parse(body, nullptr, false);
  if (!j.is_discarded() && j.is_object() && j.contains("error")) {
    const auto& e = j["error"];
    if (e.is_object() && e.contains("message") && e["message"].is_string())
      return core::redact_and_cut(e["message"].get<std::string>(), 2000);
    if (e.is_string()) return core::redact_and_cut(e.get<std::string>(), 2000);
  }
  std::string s = core::redact_and_cut(body, 300);
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s.empty() ? "(empty body)" : s;
}

bool retryable_status(int status) { return status == 408 || status == 429 || status >= 500; }

std::string lower_text(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A refusal because the prompt (plus the output budget) exceeds the model's context: OpenAI's
// code context_length_exceeded, vLLM's "maximum context length is N tokens", llama.cpp-server's
// "exceeds the available context size", Anthropic-style "prompt is too long", 413s.
bool is_context_overflow(int status, const std::string& body) {
  if (status != 400 && status != 413 && status != 422) return false;
  const std::string b = lower_text(body.substr(0, 4096));
  for (const char* marker : {"context_length_exceeded", "maximum context length", "context length",
                             "context size", "context window", "prompt is too long",
                             "too many tokens", "exceeds the context", "reduce the length"})
    if (b.find(marker) != std::string::npos) return true;
  return status == 413;
}

// The same refusal repeated: status and message with numbers blanked (a context error quotes
// each prompt's length; an unknown-model error is identical every time).
std::string refusal_signature(int status, const std::string& message) {
  std::string sig = std::to_string(status) + ":";
  for (char c : message.substr(0, 200)) sig.push_back(std::isdigit(static_cast<unsigned char>(c)) ? '#' : c);
  return sig;
}

// What to change in the config, for the refusals a misconfigured profile meets first.
std::string refusal_hint(const ModelProfile& p, int status, const std::string& message) {
  const std::string m = lower_text(message);
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

// The last `max_chars` of a reasoning text, starting at a line boundary when one is near.
std::string reasoning_tail(const std::string& reasoning, size_t max_chars = 6000) {
  if (reasoning.size() <= max_chars) return reasoning;
  size_t start = reasoning.size() - max_chars;
  size_t nl = reasoning.find('\n', start);
  if (nl != std::string::npos && nl - start < 400) start = nl + 1;
  return reasoning.substr(start);
}

// Message content as servers send it: a string, null, or an array of parts ({"type":"text",
// "text":…}; Mistral-style {"type":"thinking", "thinking":[…]} parts are reasoning).
void read_content(const json& content, std::string& text, std::string& reasoning) {
  if (content.is_string()) {
    text = content.get<std::string>();
    return;
  }
  if (!content.is_array()) return;
  for (const auto& part : content) {
    if (part.is_string()) {
      text += part.get<std::string>();
      continue;
    }
    if (!part.is_object()) continue;
    const std::string type = part.contains("type") && part["type"].is_string() ? part["type"].get<std::string>() : "text";
    if (type == "thinking" || type == "reasoning") {
      std::string inner, ignored;
      for (const char* k : {"thinking", "reasoning", "text"})
        if (part.contains(k)) read_content(part[k], inner, ignored);
      reasoning += inner;
    } else if (part.contains("text") && part["text"].is_string()) {
      text += part["text"].get<std::string>();
    }
  }
}

// reasoning_content (DeepSeek, older vLLM, llama.cpp-server), reasoning (vLLM, Ollama,
// OpenRouter, LM Studio), or OpenRouter's reasoning_details parts.
std::string read_reasoning(const json& message) {
  std::string out;
  for (const char* k : {"reasoning_content", "reasoning"})
    if (message.contains(k) && message[k].is_string() && out.empty()) out = message[k].get<std::string>();
  if (out.empty() && message.contains("reasoning_details") && message["reasoning_details"].is_array())
    for (const auto& d : message["reasoning_details"])
      if (d.is_object() && d.contains("text") && d["text"].is_string()) out += d["text"].get<std::string>();
  return out;
}

// Text outside reasoning: drops what precedes a lone closing think tag and any closed
// <think>/<thinking>/<reasoning> block (enough to judge completeness; stages read answers
// through the answer reader).
std::string outside_reasoning(const std::string& text) {
  std::string t = text;
  const std::string low = lower_text(t);
  for (const char* close : {"</think>", "</thinking>", "</reasoning>"}) {
    size_t p = low.rfind(close);
    if (p != std::string::npos) {
      t = t.substr(p + std::char_traits<char>::length(close));
      break;
    }
  }
  return t;
}

std::string describe_call(const ModelProfile& p, const ChatRequest& r) {
  std::string s = "profile \"" + p.name + "\" (model " + p.model + ")";
  if (!r.stage.empty()) s += ", stage " + r.stage;
  if (!r.question_id.empty()) s += ", question " + r.question_id;
  s += ", sample " + std::to_string(r.sample_index);
  return s;
}

// Applies the profile's sampling defaults and the role's output budget so the cache key and
// the body agree.
ChatRequest with_defaults(const LlmSettings& settings, const ModelProfile& p, ChatRequest r) {
  if (!r.temperature) r.temperature = p.temperature;
  if (!r.top_p) r.top_p = p.top_p;
  if (!r.max_tokens) r.max_tokens = settings.output_budget(p, r.role);
  if (r.n < 1) r.n = 1;
  return r;
}

}  // namespace

struct Client::ProfileState {
  ProfileState(const ModelProfile& p, const std::shared_ptr<Clock>& clock)
      : limit(p.max_in_flight), requests(p.rpm, clock), tokens(p.tpm, clock) {}
  InFlightLimit limit;
  TokenBucket requests;
  TokenBucket tokens;
  // The same non-retryable refusal on consecutive calls (reset by any answered call).
  std::mutex refusals_mu;
  std::string last_refusal;  // guarded by refusals_mu
  int64_t repeated = 0;      // guarded by refusals_mu
};

std::string build_chat_body(const ModelProfile& profile, const ChatRequest& request) {
  json messages = json::array();
  for (const auto& m : request.messages) messages.push_back({{"role", m.role}, {"content", m.content}});
  json body = {{"model", profile.model}, {"messages", messages}};
  auto sent = [&](const char* field) { return !profile.omit.count(field); };
  if (sent("temperature")) body["temperature"] = request.temperature.value_or(profile.temperature);
  if (sent("top_p")) body["top_p"] = request.top_p.value_or(profile.top_p);
  if (sent("max_tokens"))
    body[profile.max_tokens_field] =
        request.max_tokens.value_or(profile.max_tokens.value_or(kDefaultOutputBudget));
  if (request.n > 1 && sent("n")) body["n"] = request.n;
  if (request.seed && sent("seed")) {
    body["seed"] = *request.seed;
  } else if (request.sample_index > 0 && sent("seed") && body.contains("temperature") &&
             body["temperature"].get<double>() > 0) {
    // Samples of one prompt would otherwise go out byte for byte the same: the sample's own
    // seed tells them apart at the server (and makes each sample reproducible where the server
    // honours seeds). Sample 0 is sent as it always was.
    body["seed"] = request.sample_index;
  }
  if (!request.stop.empty() && sent("stop")) body["stop"] = request.stop;
  if (profile.stream) {
    body["stream"] = true;
    body["stream_options"] = {{"include_usage", true}};
  }
  // extra_body last, merged deeply: chat_template_kwargs, reasoning_effort, top_k, …
  json extra = json::parse(profile.extra_body, nullptr, false);
  if (extra.is_object()) body.merge_patch(extra);
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

bool has_complete_answer(const std::string& text) {
  const std::string t = outside_reasoning(text);
  const std::string low = lower_text(t);
  if (low.find("</final_answer>") != std::string::npos || low.find("</answer>") != std::string::npos)
    return true;
  // Fences: complete when at least one closed and the text does not end inside an open one.
  size_t markers = 0;
  for (size_t p = t.find("```"); p != std::string::npos; p = t.find("```", p + 3)) ++markers;
  if (markers >= 2 && markers % 2 == 0) return true;
  // A bare JSON value that parses whole.
  size_t b = t.find_first_of("{[");
  size_t e = t.find_last_of("}]");
  if (b != std::string::npos && e != std::string::npos && e > b &&
      !json::parse(t.substr(b, e - b + 1), nullptr, false).is_discarded())
    return true;
  return false;
}

Result<ChatResponse> parse_chat_completion(const std::string& body, bool accept_truncated) {
  auto j = json::parse(body, nullptr, false);
  if (j.is_discarded()) {
    std::string start = core::redact_and_cut(body, 80);
    return make_call_error(CallErrorKind::kNotJson,
                           "the answer is not JSON (or is truncated JSON), " +
                               std::to_string(body.size()) + " bytes starting \"" + start + "\"");
  }
  if (!j.is_object() || !j.contains("choices") || !j["choices"].is_array())
    return make_call_error(CallErrorKind::kMissingField, "the answer has no \"choices\" array");
  const auto& choices = j["choices"];
  if (choices.empty()) return make_call_error(CallErrorKind::kEmptyChoices, "\"choices\" is empty");
  ChatResponse r;
  for (size_t i = 0; i < choices.size(); ++i) {
    const auto& c = choices[i];
    if (!c.is_object() || !c.contains("message") || !c["message"].is_object() ||
        !c["message"].contains("content"))
      return make_call_error(CallErrorKind::kMissingField,
                             "choices[" + std::to_string(i) + "] has no message.content");
    const auto& message = c["message"];
    const auto& content = message["content"];
    if (!content.is_null() && !content.is_string() && !content.is_array())
      return make_call_error(CallErrorKind::kMissingField,
                             "choices[" + std::to_string(i) +
                                 "].message.content is neither a string nor an array of parts");
    std::string text, reasoning;
    read_content(content, text, reasoning);
    if (reasoning.empty()) reasoning = read_reasoning(message);
    std::string finish = c.contains("finish_reason") && c["finish_reason"].is_string()
                             ? c["finish_reason"].get<std::string>()
                             : "";
    const bool blank = text.find_first_not_of(" \t\r\n") == std::string::npos;
    const bool has_reasoning = reasoning.find_first_not_of(" \t\r\n") != std::string::npos;
    if (finish == "length" && !accept_truncated)
      return make_call_error(CallErrorKind::kTruncated,
                             "choices[" + std::to_string(i) +
                                 "] stopped at max_tokens (finish_reason \"length\")" +
                                 (blank && has_reasoning ? " while still reasoning: no answer yet" : ""));
    bool from_reasoning = false;
    if (blank && has_reasoning) {
      // Everything went into the reasoning field (a reasoning parser that missed the end of
      // thinking, or a model that answered inside it): its tail is the best answer there is;
      // the trace says so.
      text = reasoning_tail(reasoning);
      from_reasoning = true;
    } else if (blank && finish != "length") {
      return make_call_error(CallErrorKind::kEmptyContent,
                             "choices[" + std::to_string(i) + "].message.content is empty");
    }
    // Blank with "length" (read only when the caller accepts cut answers): the budget was spent
    // before any answer — OpenAI's reasoning models return no reasoning text to fall back on.
    r.choices.push_back(std::move(text));
    r.finish_reasons.push_back(std::move(finish));
    r.reasoning.push_back(std::move(reasoning));
    r.answer_from_reasoning.push_back(from_reasoning);
  }
  if (j.contains("usage") && j["usage"].is_object()) {
    const auto& u = j["usage"];
    if (u.contains("prompt_tokens") && u["prompt_tokens"].is_number_integer())
      r.usage.prompt_tokens = u["prompt_tokens"].get<int64_t>();
    if (u.contains("completion_tokens") && u["completion_tokens"].is_number_integer())
      r.usage.completion_tokens = u["completion_tokens"].get<int64_t>();
  }
  return r;
}

Result<ChatResponse> parse_chat_stream(const std::string& body, bool accept_truncated) {
  // Rebuilds the non-streamed answer shape from the events, then reads it like one.
  std::map<int64_t, json> messages;
  std::map<int64_t, std::string> finish;
  json usage;
  bool done = false;
  size_t events = 0;
  for (size_t p = 0; p < body.size();) {
    size_t nl = body.find('\n', p);
    std::string line = body.substr(p, nl == std::string::npos ? std::string::npos : nl - p);
    p = nl == std::string::npos ? body.size() : nl + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.rfind("data:", 0) != 0) continue;  // comments (": keep-alive"), event:, id:
    std::string data = line.substr(5);
    if (!data.empty() && data.front() == ' ') data.erase(0, 1);
    if (data == "[DONE]") {
      done = true;
      break;
    }
    json chunk = json::parse(data, nullptr, false);
    if (chunk.is_discarded())
      return make_call_error(CallErrorKind::kNotJson, "a streamed event is not JSON: \"" + core::redact_and_cut(data, 80) + "\"");
    ++events;
    if (chunk.is_object() && chunk.contains("error"))
      return make_call_error(CallErrorKind::kServer, "the stream carried an error: " + core::redact_and_cut(chunk["error"].dump(), 300));
    if (chunk.contains("usage") && chunk["usage"].is_object()) usage = chunk["usage"];
    if (!chunk.contains("choices") || !chunk["choices"].is_array()) continue;
    for (const auto& c : chunk["choices"]) {
      const int64_t index = c.contains("index") && c["index"].is_number_integer() ? c["index"].get<int64_t>() : 0;
      json& m = messages[index];
      if (m.is_null()) m = {{"content", ""}, {"reasoning_content", ""}};
      if (c.contains("delta") && c["delta"].is_object()) {
        const auto& d = c["delta"];
        std::string text, reasoning;
        if (d.contains("content")) read_content(d["content"], text, reasoning);
        if (reasoning.empty()) reasoning = read_reasoning(d);
        m["content"] = m["content"].get<std::string>() + text;
        m["reasoning_content"] = m["reasoning_content"].get<std::string>() + reasoning;
      }
      if (c.contains("finish_reason") && c["finish_reason"].is_string())
        finish[index] = c["finish_reason"].get<std::string>();
    }
  }
  if (events == 0) return make_call_error(CallErrorKind::kNotJson, "the stream held no data events");
  if (!done && finish.empty())
    return make_call_error(CallErrorKind::kNotJson, "the stream ended before [DONE] and before any finish_reason (cut off)");
  json whole = {{"choices", json::array()}};
  for (auto& [index, m] : messages) {
    json c = {{"index", index}, {"message", m}};
    if (finish.count(index)) c["finish_reason"] = finish[index];
    whole["choices"].push_back(std::move(c));
  }
  if (!usage.is_null()) whole["usage"] = usage;
  return parse_chat_completion(whole.dump(-1, ' ', false, json::error_handler_t::replace), accept_truncated);
}

Client::Client(LlmSettings settings, ClientOptions options)
    : settings_(std::move(settings)),
      options_(std::move(options)),
      global_limit_(settings_.max_in_flight),
      jitter_state_(options_.jitter_seed) {
  for (const auto& [name, p] : settings_.profiles)
    states_[name] = std::make_unique<ProfileState>(p, options_.clock);
}

Client::~Client() = default;

Result<std::unique_ptr<Client>> Client::create(LlmSettings settings, ClientOptions options) {
  if (!options.clock) options.clock = std::make_shared<SystemClock>();
  if (!options.transport) options.transport = make_curl_transport();
  if (!options.cache && settings.cache.mode != CacheMode::kOff) {
    const bool read_only = settings.cache.mode != CacheMode::kReadWrite;
    auto cache = ResponseCache::open(settings.cache.path, read_only);
    if (!cache) return cache.status().with_context("config key \"llm.cache.path\"");
    options.cache = std::shared_ptr<ResponseCache>(std::move(cache).value());
  }
  return std::unique_ptr<Client>(new Client(std::move(settings), std::move(options)));
}

Result<std::unique_ptr<Client>> Client::from_config(const core::Config& config,
                                                    ClientOptions options) {
  auto settings = load_llm_settings(config);
  if (!settings) return settings.status();
  return create(std::move(settings).value(), std::move(options));
}

void Client::cancel() {
  cancelled_.store(true);
  global_limit_.cancel();
  for (auto& [name, st] : states_) st->limit.cancel();
  options_.transport->cancel();
}

bool Client::cancelled() const {
  return cancelled_.load() || (options_.cancel_flag && options_.cancel_flag->load());
}

std::optional<Status> Client::fatal_error() const {
  std::lock_guard lock(fatal_mu_);
  return fatal_;
}

std::vector<std::string> Client::profiles_for(const std::vector<std::string>& roles,
                                              const std::vector<std::string>& named_profiles) const {
  std::set<std::string> out;
  for (const auto& role : roles)
    if (auto p = settings_.resolve(role, ""); p) out.insert((*p)->name);
  for (const auto& name : named_profiles)
    if (auto p = settings_.resolve("", name); p) out.insert((*p)->name);
  return {out.begin(), out.end()};
}

std::optional<int64_t> Client::prompt_budget(const std::string& role, const std::string& profile,
                                             std::optional<int64_t> max_tokens) const {
  auto p = settings_.resolve(role, profile);
  if (!p || (*p)->context_tokens <= 0 || (*p)->provider == "sim") return std::nullopt;
  const int64_t out = max_tokens.value_or(settings_.output_budget(**p, role));
  // The chat template and role markers take a few dozen tokens; token counts are estimated
  // from characters, so keep a tenth in reserve as well.
  const int64_t margin = 64 + (*p)->context_tokens / 10;
  return std::max<int64_t>(256, (*p)->context_tokens - out - margin);
}

bool Client::any_simulated(const std::vector<std::string>& used_profiles) const {
  for (const auto& name : used_profiles) {
    auto it = settings_.profiles.find(name);
    if (it != settings_.profiles.end() && it->second.provider == "sim") return true;
  }
  return false;
}

bool Client::any_simulated() const {
  std::vector<std::string> roles;
  for (const auto& [role, budget] : default_role_budgets()) roles.push_back(role);
  return any_simulated(profiles_for(roles));
}

std::optional<Status> Client::held_back() {
  if (!gate_.valid()) return std::nullopt;
  const std::shared_future<Status> gate = gate_;  // each thread reads through its own copy
  const Status& open = gate.get();
  if (open.is_ok()) return std::nullopt;
  stop_with(open);
  return make_call_error(CallErrorKind::kCancelled, "not sent: " + open.message());
}

void Client::stop_with(const Status& fatal) {
  bool first = false;
  {
    std::lock_guard lock(fatal_mu_);
    if (!fatal_) {
      fatal_ = fatal;
      first = true;
    }
  }
  // Stopped before any caller returns: a second refused call must not return (and let its
  // question store a stage) while the first is still logging, before the client reads as
  // cancelled. cancel() is idempotent.
  cancel();
  if (first)
    spdlog::error("{}: stopping every model call (rerun the same command to resume once it is fixed)",
                  fatal.message());
}

HttpRequest Client::http_request(const ModelProfile& profile, const std::string& path) const {
  HttpRequest http;
  http.url = profile.base_url + path;
  if (!profile.query.empty()) {
    std::string q;
    for (const auto& [k, v] : profile.query) {
      char* ek = curl_easy_escape(nullptr, k.c_str(), static_cast<int>(k.size()));
      char* ev = curl_easy_escape(nullptr, v.c_str(), static_cast<int>(v.size()));
      q += (q.empty() ? "" : "&") + std::string(ek ? ek : "") + "=" + std::string(ev ? ev : "");
      curl_free(ek);
      curl_free(ev);
    }
    http.url += (http.url.find('?') == std::string::npos ? "?" : "&") + q;
  }
  http.headers.push_back({"Content-Type", "application/json"});
  bool own_auth = false;
  for (const auto& [k, v] : profile.headers) {
    own_auth = own_auth || lower_text(k) == "authorization";
    http.headers.push_back({k, v});
  }
  if (!profile.api_key.empty() && !own_auth)
    http.headers.push_back({"Authorization", "Bearer " + profile.api_key});
  http.timeout = std::chrono::milliseconds(static_cast<int64_t>(profile.timeout_s * 1000));
  http.max_response_bytes = settings_.max_response_bytes;
  if (profile.stream)
    http.idle_timeout = std::chrono::milliseconds(static_cast<int64_t>(profile.idle_timeout_s * 1000));
  return http;
}

void Client::record(const ChatRequest& request, const Result<ChatResponse>& result, int attempts) {
  UsageTotals t;
  t.calls = 1;
  if (!result) {
    t.errors = 1;
    t.attempts = attempts;
    t.retries = std::max(0, attempts - 1);
    t.errors_by_kind[call_error_kind_name(call_error_kind(result.status()))] = 1;
  } else {
    const auto& r = *result;
    t.cache_hits = r.from_cache ? 1 : 0;
    t.simulated = r.simulated() ? 1 : 0;
    t.attempts = r.attempts;
    t.retries = std::max(0, r.attempts - 1);
    t.prompt_tokens = r.usage.prompt_tokens;
    t.completion_tokens = r.usage.completion_tokens;
    t.cost_usd = r.cost_usd;
    t.latency_s = r.latency_s;
  }
  accounting_.record(request.stage, request.question_id, t);
}

Result<ChatResponse> Client::chat(const ChatRequest& request_in) {
  if (cancelled()) {
    cancel();
    Result<ChatResponse> r = make_call_error(CallErrorKind::kCancelled, "shutdown requested");
    record(request_in, r);
    return r;
  }
  auto resolved = settings_.resolve(request_in.role, request_in.profile);
  if (!resolved) return resolved.status();
  const ModelProfile& profile = **resolved;
  if (request_in.messages.empty())
    return make_call_error(CallErrorKind::kConfig,
                           describe_call(profile, request_in) + ": a request needs messages");

  if (profile.provider == "sim") {
    if (!options_.simulator)
      return make_call_error(CallErrorKind::kConfig,
                             describe_call(profile, request_in) +
                                 ": profile is simulated (provider \"sim\") but no simulator is attached here");
    auto r = options_.simulator->answer(request_in);
    if (r) {
      r->provider = "sim";
      r->temperature = request_in.temperature.value_or(profile.temperature);
      r->seed = request_in.seed;
      r->profile = profile.name;
      r->model = profile.model;
      r->usage.prompt_tokens = estimate_tokens(prompt_chars(request_in));
      int64_t out = 0;
      for (const auto& c : r->choices) out += estimate_tokens(c.size());
      r->usage.completion_tokens = out;
      // What a model at this profile's prices would have charged for these (estimated) tokens:
      // lets budgets (--max-cost-usd) and cost reports be exercised offline.
      r->cost_usd = (static_cast<double>(r->usage.prompt_tokens) * profile.price_in_per_mtok +
                     static_cast<double>(out) * profile.price_out_per_mtok) / 1e6;
    }
    record(request_in, r);
    return r;
  }

  const ChatRequest request = with_defaults(settings_, profile, request_in);
  ResponseCache* cache = settings_.cache.mode == CacheMode::kOff ? nullptr : options_.cache.get();
  std::string key;
  if (cache) {
    key = ResponseCache::key_for(profile, request);
    auto hit = cache->lookup(key);
    if (!hit) {
      Result<ChatResponse> r = hit.status();  // already a kCache error
      record(request, r);
      return r;
    }
    if (hit->has_value()) {
      ChatResponse r = std::move(**hit);
      r.from_cache = true;
      r.provider = "openai";
      r.profile = profile.name;
      r.model = profile.model;
      r.cost_usd = 0.0;  // nothing was spent
      r.latency_s = 0.0;
      r.temperature = request.temperature;
      r.seed = request.seed;
      r.request_hash.clear();
      r.attempts = 0;
      Result<ChatResponse> out(std::move(r));
      record(request, out);
      return out;
    }
    if (settings_.cache.mode == CacheMode::kReplay) {
      std::string first_user;
      for (const auto& m : request.messages)
        if (m.role == "user") { first_user = m.content; break; }
      if (first_user.size() > 120) first_user = core::redact_and_cut(first_user, 120) + "…";
      std::replace(first_user.begin(), first_user.end(), '\n', ' ');
      Result<ChatResponse> r = make_call_error(
          CallErrorKind::kReplayMiss,
          "cache mode is replay and this call was never recorded: " +
              describe_call(profile, request) + ", key " + key + ", prompt \"" + first_user +
              "\" (cache " + cache->path().string() + ")");
      // A replayed run is only the recorded run when every call was recorded: one miss stops
      // the run loudly (exit 4) instead of scoring a question without its model's answer.
      if (options_.stop_on_fatal_error) stop_with(r.status());
      record(request, r);
      return r;
    }
  }

  int attempts = 0;
  auto result = chat_uncached(profile, *states_.at(profile.name), request, &attempts);
  if (result && cache && settings_.cache.mode == CacheMode::kReadWrite) {
    Status st = cache->store(key, profile.name, profile.model,
                             ResponseCache::canonical_request(profile, request), *result);
    if (!st) spdlog::warn("llm cache: could not store an answer: {}", st.message());
  }
  record(request, result, attempts);
  return result;
}

Result<ChatResponse> Client::chat_uncached(const ModelProfile& profile, ProfileState& state,
                                           const ChatRequest& request_in, int* attempts_out) {
  ChatRequest request = request_in;
  if (auto held = held_back()) return *held;
  HttpRequest http = http_request(profile, "/chat/completions");
  const auto start = options_.clock->now();
  const double estimated = static_cast<double>(estimate_tokens(prompt_chars(request)));
  int& attempts = *attempts_out;
  attempts = 0;
  bool budget_doubled = false;
  Result<ChatResponse> parsed = internal_error("not sent");
  for (;;) {  // at most twice: the second time with a doubled budget after finish_reason "length"
    http.body = build_chat_body(profile, request);
    int these = 0;
    auto posted = post_with_retries(profile, state, http, estimated, describe_call(profile, request), &these,
                                    0, priority_ ? priority_(request) : SlotPriority{});
    attempts += these;
    if (!posted) return posted.status();
    // Read cut answers too: a complete final answer before the cut is salvaged below.
    parsed = profile.stream ? parse_chat_stream(posted->body, /*accept_truncated=*/true)
                            : parse_chat_completion(posted->body, /*accept_truncated=*/true);
    if (!parsed)
      return Status(parsed.status().code(),
                    core::redact(parsed.status().message() + " (" + describe_call(profile, request) + ")"));
    bool cut = false, salvageable = true, empty = false;
    for (size_t i = 0; i < parsed->choices.size(); ++i) {
      const bool blank = parsed->choices[i].find_first_not_of(" \t\r\n") == std::string::npos;
      empty = empty || blank;
      if (parsed->finish_reasons[i] != "length") continue;
      cut = true;
      const bool complete = !blank && !parsed->answer_from_reasoning[i] && has_complete_answer(parsed->choices[i]);
      salvageable = salvageable && complete;
    }
    if (!cut || (request.accept_truncated && !empty)) break;
    if (salvageable) {
      spdlog::debug("llm profile {}: answer cut at {} tokens after a complete final answer: kept ({})",
                    profile.name, request.max_tokens.value_or(0), describe_call(profile, request));
      break;
    }
    if (budget_doubled || profile.omit.count("max_tokens") || !request.max_tokens) {
      const bool reasoning_only = std::any_of(parsed->answer_from_reasoning.begin(),
                                              parsed->answer_from_reasoning.end(), [](bool b) { return b; });
      return make_call_error(
          CallErrorKind::kTruncated,
          "model profile \"" + profile.name + "\": the answer stopped at the output budget of " +
              std::to_string(request.max_tokens.value_or(0)) + " tokens (finish_reason \"length\")" +
              (reasoning_only ? " while still reasoning" : empty ? " before any answer (spent reasoning)" : "") +
              (budget_doubled ? " even after doubling it" : "") +
              "; raise llm.models." + profile.name + ".max_tokens (or role_max_tokens) (" +
              describe_call(profile, request) + ")");
    }
    spdlog::info("llm profile {}: answer cut at {} tokens without a final answer; retrying once with {} ({})",
                 profile.name, *request.max_tokens, *request.max_tokens * 2, describe_call(profile, request));
    request.max_tokens = *request.max_tokens * 2;
    budget_doubled = true;
  }
  ChatResponse r = std::move(parsed).value();
  if (r.usage.prompt_tokens == 0 && r.usage.completion_tokens == 0) {
    // Some servers omit usage; estimate so cost and tpm stay meaningful (reasoning included:
    // it was generated and billed).
    r.usage.prompt_tokens = static_cast<int64_t>(estimated);
    for (size_t i = 0; i < r.choices.size(); ++i)
      r.usage.completion_tokens += estimate_tokens(r.choices[i].size() + (r.answer_from_reasoning[i] ? 0 : r.reasoning[i].size()));
  }
  state.tokens.charge(static_cast<double>(r.usage.completion_tokens) +
                      (static_cast<double>(r.usage.prompt_tokens) - estimated));
  r.cost_usd = (static_cast<double>(r.usage.prompt_tokens) * profile.price_in_per_mtok +
                static_cast<double>(r.usage.completion_tokens) * profile.price_out_per_mtok) /
               1e6;
  r.latency_s = seconds_between(start, options_.clock->now());
  r.attempts = attempts;
  r.provider = "openai";
  r.profile = profile.name;
  r.model = profile.model;
  r.temperature = request.temperature;
  r.seed = request.seed;
  {
    // What the server received, byte for byte (the endpoint included: the same body sent to two
    // servers is two requests). Retries of a failed attempt repost the same body and are counted
    // as retries, not here.
    core::KeyHasher h;
    h.add(profile.base_url).add(http.body);
    r.request_hash = h.hex();
  }
  return r;
}

Clock::Duration Client::backoff(int attempt, const HttpResponse* response) {
  const auto& rp = settings_.retry;
  if (response) {
    std::optional<double> secs;
    // retry-after-ms (OpenAI, Azure) is the precise one; Retry-After is seconds or an HTTP-date.
    if (auto ms = response->headers.find("retry-after-ms"); ms != response->headers.end()) {
      char* end = nullptr;
      double v = std::strtod(ms->second.c_str(), &end);
      if (end != ms->second.c_str() && v >= 0) secs = v / 1000.0;
    }
    if (!secs)
      if (auto it = response->headers.find("retry-after"); it != response->headers.end())
        secs = retry_after_seconds(it->second);
    if (secs) {
      return std::chrono::duration_cast<Clock::Duration>(
          std::chrono::duration<double>(std::min(*secs, rp.max_delay_s)));
    }
  }
  double exp = std::min(rp.max_delay_s, rp.base_delay_s * std::pow(2.0, attempt - 1));
  double u;
  {
    std::lock_guard lock(jitter_mu_);
    core::SplitMix64 rng(jitter_state_);
    jitter_state_ = rng.next_u64();
    u = rng.uniform();
  }
  double secs = exp * (0.5 + 0.5 * u);  // jitter over the upper half: spreads, never collapses
  return std::chrono::duration_cast<Clock::Duration>(std::chrono::duration<double>(secs));
}

Result<HttpResponse> Client::post_with_retries(const ModelProfile& profile, ProfileState& state,
                                               const HttpRequest& http, double estimated_tokens,
                                               const std::string& call_label, int* attempts,
                                               int max_attempts_override, SlotPriority priority) {
  const int max_attempts = max_attempts_override > 0 ? max_attempts_override : settings_.retry.max_attempts;
  int timeouts = 0;
  auto is_cancelled = [this] { return cancelled(); };
  for (int attempt = 1;; ++attempt) {  // bounded by max_attempts
    if (cancelled()) return make_call_error(CallErrorKind::kCancelled, "shutdown requested (" + call_label + ")");
    Status st = state.requests.acquire(1, is_cancelled);
    if (st) st = state.tokens.acquire(estimated_tokens, is_cancelled);
    if (!st) return make_call_error(CallErrorKind::kCancelled, st.message() + " (" + call_label + ")");

    Result<HttpResponse> posted = internal_error("not sent");
    {
      // Profile slot first, then global: the global count is then exactly what is on the wire.
      if (Status p = state.limit.acquire(priority); !p)
        return make_call_error(CallErrorKind::kCancelled, p.message() + " (" + call_label + ")");
      InFlightSlot profile_slot(&state.limit);
      if (Status g = global_limit_.acquire(priority); !g)
        return make_call_error(CallErrorKind::kCancelled, g.message() + " (" + call_label + ")");
      InFlightSlot global_slot(&global_limit_);
      *attempts = attempt;
      spdlog::debug("llm POST {} ({}, attempt {}/{})", core::mask_url(http.url), call_label,
                    attempt, max_attempts);
      posted = options_.transport->post(http);
    }

    CallErrorKind kind;
    std::string what;
    const HttpResponse* response = nullptr;
    if (!posted) {
      ErrorCode code = posted.status().code();
      if (code == ErrorCode::kCancelled)
        return make_call_error(CallErrorKind::kCancelled, core::redact(posted.status().message()));
      what = core::redact(posted.status().message());
      // The answer outgrew llm.max_response_bytes: the same request would bring the same
      // flood, so it is not retried.
      if (code == ErrorCode::kRejected)
        return make_call_error(CallErrorKind::kServer, "model profile \"" + profile.name + "\" at " +
                                                           core::mask_url(profile.base_url) + ": " + what +
                                                           " (" + call_label + "); not retried");
      kind = code == ErrorCode::kTimeout ? CallErrorKind::kTimeout : CallErrorKind::kConnection;
      // A timed-out attempt may have cost the server minutes of generation: one more try at
      // most, whatever llm.retry.max_attempts says.
      if (kind == CallErrorKind::kTimeout && ++timeouts >= 2)
        return make_call_error(kind, "model profile \"" + profile.name + "\" at " +
                                         core::mask_url(profile.base_url) + ": " + what + " twice (timeout_s " +
                                         fmt::format("{:g}", profile.timeout_s) + "; " + call_label + ")");
      if (code != ErrorCode::kTimeout && code != ErrorCode::kUnavailable)
        return make_call_error(kind, what + " (" + call_label + ")");
    } else if (posted->status >= 200 && posted->status < 300) {
      std::lock_guard lock(state.refusals_mu);
      state.repeated = 0;
      state.last_refusal.clear();
      return posted;
    } else {
      response = &*posted;
      const int status = posted->status;
      what = "HTTP " + std::to_string(status) + ": " + core::redact(server_message(posted->body));
      if (!retryable_status(status)) {
        kind = (status == 401 || status == 403) ? CallErrorKind::kAuth
               : is_context_overflow(status, posted->body) ? CallErrorKind::kContextLength
                                                           : CallErrorKind::kHttpClient;
        std::string hint = kind == CallErrorKind::kAuth
                               ? " (check the API key in env " +
                                     (profile.api_key_env.empty() ? std::string("(none configured)")
                                                                  : profile.api_key_env) + ")"
                               : "";
        if (hint.empty()) hint = refusal_hint(profile, status, server_message(posted->body));
        Status refused = make_call_error(kind, "model profile \"" + profile.name + "\" at " +
                                                   core::mask_url(profile.base_url) + " refused the call: " +
                                                   what + hint + " (" + call_label + "); not retried");
        if (kind == CallErrorKind::kAuth && options_.stop_on_fatal_error) stop_with(refused);
        if (kind != CallErrorKind::kAuth && options_.stop_on_fatal_error &&
            settings_.stop_after_repeated_errors > 0) {
          int64_t repeated = 0;
          {
            std::lock_guard lock(state.refusals_mu);
            const std::string sig = refusal_signature(status, server_message(posted->body));
            state.repeated = sig == state.last_refusal ? state.repeated + 1 : 1;
            state.last_refusal = sig;
            repeated = state.repeated;
          }
          if (repeated >= settings_.stop_after_repeated_errors)
            stop_with(make_call_error(
                kind, "model profile \"" + profile.name + "\" at " + core::mask_url(profile.base_url) +
                          " refused " + std::to_string(repeated) + " calls in a row the same way: " + what +
                          " (model " + profile.model + "; llm.stop_after_repeated_errors = " +
                          std::to_string(settings_.stop_after_repeated_errors) + ")"));
        }
        return refused;
      }
      kind = status == 429 ? CallErrorKind::kRateLimited : CallErrorKind::kServer;
    }
    if (attempt >= max_attempts) {
      return make_call_error(kind, "model profile \"" + profile.name + "\" at " +
                                       core::mask_url(profile.base_url) + ": " + what + " after " +
                                       std::to_string(attempt) + " attempts (" + call_label + ")");
    }
    Clock::Duration wait = backoff(attempt, response);
    spdlog::warn("llm profile {}: {} (attempt {}/{}); retrying in {:.2f} s", profile.name, what,
                 attempt, max_attempts, std::chrono::duration<double>(wait).count());
    // Sleep in slices so a shutdown is noticed within a quarter second.
    const Clock::Duration slice = std::chrono::milliseconds(250);
    while (wait.count() > 0) {
      if (cancelled()) return make_call_error(CallErrorKind::kCancelled, "shutdown requested during backoff (" + call_label + ")");
      Clock::Duration d = std::min(wait, slice);
      options_.clock->sleep_for(d);
      wait -= d;
    }
  }
}

PreflightResult Client::preflight_one(const std::string& name) {
  PreflightResult r;
  r.profile = name;
  auto it = settings_.profiles.find(name);
  if (it == settings_.profiles.end()) {
    r.error = "no model profile \"" + name + "\"";
    return r;
  }
  const ModelProfile& profile = it->second;
  r.model = profile.model;
  r.endpoint = core::mask_url(profile.base_url + "/chat/completions");
  if (profile.provider == "sim") {
    r.simulated = r.ok = true;
    r.note = "simulated (sim provider): not called";
    return r;
  }
  // The shape of a real call (the fields a generation sends), with a small budget: a reasoning
  // model may spend it all thinking, and that is fine here — the server accepted the request.
  ChatRequest request;
  request.profile = name;
  request.stage = "preflight";
  request.messages = {{"user", "Reply with the single word OK."}};
  request.temperature = profile.temperature;
  request.top_p = profile.top_p;
  request.max_tokens = std::min<int64_t>(64, settings_.output_budget(profile, "generate"));
  HttpRequest http = http_request(profile, "/chat/completions");
  http.body = build_chat_body(profile, request);
  if (auto body = json::parse(http.body, nullptr, false); body.is_object())
    for (const auto& [k, v] : body.items())
      if (k != "messages") r.fields.push_back(k);
  const auto start = options_.clock->now();
  int attempts = 0;
  auto posted = post_with_retries(profile, *states_.at(name), http, 16, "preflight of profile \"" + name + "\"",
                                  &attempts, /*max_attempts=*/std::min(2, settings_.retry.max_attempts));
  r.latency_s = seconds_between(start, options_.clock->now());
  Result<ChatResponse> parsed = posted ? (profile.stream ? parse_chat_stream(posted->body, true)
                                                         : parse_chat_completion(posted->body, true))
                                       : Result<ChatResponse>(posted.status());
  UsageTotals t;
  t.calls = 1;
  t.attempts = attempts;
  t.retries = std::max(0, attempts - 1);
  if (!parsed) {
    r.error = core::redact(parsed.status().message());
    t.errors = 1;
    t.errors_by_kind[call_error_kind_name(call_error_kind(parsed.status()))] = 1;
  } else {
    r.ok = true;
    r.answer = core::redact_and_cut(parsed->text(), 200);
    const bool blank = parsed->text().find_first_not_of(" \t\r\n") == std::string::npos;
    if (parsed->finish_reasons.front() == "length")
      r.note = parsed->answer_from_reasoning.front() || blank
                   ? "the check's 64-token budget went to reasoning before any answer (fine: the request was accepted)"
                   : "answer cut at the check's 64-token budget";
    else if (parsed->answer_from_reasoning.front())
      r.note = "the content was empty: the answer came from the reasoning field";
    t.prompt_tokens = parsed->usage.prompt_tokens;
    t.completion_tokens = parsed->usage.completion_tokens;
    t.cost_usd = (static_cast<double>(t.prompt_tokens) * profile.price_in_per_mtok +
                  static_cast<double>(t.completion_tokens) * profile.price_out_per_mtok) / 1e6;
    t.latency_s = r.latency_s;
  }
  accounting_.record(request.stage, "", t);
  return r;
}

std::vector<PreflightResult> Client::preflight(const std::vector<std::string>& profiles) {
  // Each profile's check on its own thread: a config with several endpoints waits for the
  // slowest, not for their sum.
  std::vector<std::future<PreflightResult>> checks;
  checks.reserve(profiles.size());
  for (const auto& name : profiles)
    checks.push_back(std::async(std::launch::async, [this, &name] { return preflight_one(name); }));
  std::vector<PreflightResult> out;
  out.reserve(checks.size());
  for (auto& c : checks) out.push_back(c.get());
  return out;
}

Result<EmbeddingResponse> Client::embed(const EmbeddingRequest& request) {
  if (cancelled()) return make_call_error(CallErrorKind::kCancelled, "shutdown requested");
  auto resolved = settings_.resolve(request.role, request.profile);
  if (!resolved) return resolved.status();
  const ModelProfile& profile = **resolved;
  if (profile.provider == "sim")
    return make_call_error(CallErrorKind::kConfig,
                           "profile \"" + profile.name + "\" is simulated: sim has no embeddings");
  const std::string model = profile.embedding_model.empty() ? profile.model : profile.embedding_model;
  HttpRequest http = http_request(profile, "/embeddings");
  http.idle_timeout = std::chrono::milliseconds(0);
  http.body = json{{"model", model}, {"input", request.inputs}}.dump(-1, ' ', false, json::error_handler_t::replace);
  size_t chars = 0;
  for (const auto& s : request.inputs) chars += s.size();
  const auto start = options_.clock->now();
  int attempts = 0;
  std::string label = "profile \"" + profile.name + "\" (embeddings, model " + model + ")";
  const std::optional<Status> held = held_back();
  auto posted = held ? Result<HttpResponse>(*held)
                     : post_with_retries(profile, *states_.at(profile.name), http,
                                         static_cast<double>(estimate_tokens(chars)), label, &attempts);
  UsageTotals t;
  t.calls = 1;
  t.attempts = attempts;
  t.retries = std::max(0, attempts - 1);
  if (!posted) {
    t.errors = 1;
    t.errors_by_kind[call_error_kind_name(call_error_kind(posted.status()))] = 1;
    accounting_.record(request.stage, request.question_id, t);
    return posted.status();
  }
  auto parsed = parse_embeddings(posted->body, request.inputs.size(), label);
  if (!parsed) {
    t.errors = 1;
    t.errors_by_kind[call_error_kind_name(call_error_kind(parsed.status()))] = 1;
    accounting_.record(request.stage, request.question_id, t);
    return parsed.status();
  }
  EmbeddingResponse r = std::move(parsed).value();
  if (r.usage.prompt_tokens == 0) r.usage.prompt_tokens = estimate_tokens(chars);
  r.cost_usd = static_cast<double>(r.usage.prompt_tokens) * profile.price_in_per_mtok / 1e6;
  r.latency_s = seconds_between(start, options_.clock->now());
  t.prompt_tokens = r.usage.prompt_tokens;
  t.cost_usd = r.cost_usd;
  t.latency_s = r.latency_s;
  accounting_.record(request.stage, request.question_id, t);
  return r;
}

Result<EmbeddingResponse> parse_embeddings(const std::string& body, size_t inputs,
                                           const std::string& label) {
  auto j = json::parse(body, nullptr, false);
  if (j.is_discarded())
    return make_call_error(CallErrorKind::kNotJson, "embeddings answer is not JSON (" + label + ")");
  if (!j.is_object() || !j.contains("data") || !j["data"].is_array())
    return make_call_error(CallErrorKind::kMissingField, "embeddings answer has no \"data\" array (" + label + ")");
  EmbeddingResponse r;
  r.vectors.resize(inputs);
  size_t position = 0;
  for (const auto& d : j["data"]) {
    size_t idx = d.contains("index") && d["index"].is_number_integer() ? d["index"].get<size_t>() : position;
    ++position;
    if (idx >= r.vectors.size() || !d.contains("embedding") || !d["embedding"].is_array())
      return make_call_error(CallErrorKind::kMissingField, "embeddings answer: bad item " + std::to_string(position - 1) + " (" + label + ")");
    for (const auto& x : d["embedding"]) {
      if (!x.is_number()) return make_call_error(CallErrorKind::kMissingField, "embeddings answer: a value is not a number (" + label + ")");
      r.vectors[idx].push_back(x.get<float>());
    }
  }
  for (size_t i = 0; i < r.vectors.size(); ++i)
    if (r.vectors[i].empty())
      return make_call_error(CallErrorKind::kMissingField, "embeddings answer lacks input " + std::to_string(i) + " (" + label + ")");
  if (j.contains("usage") && j["usage"].is_object() && j["usage"].contains("prompt_tokens") &&
      j["usage"]["prompt_tokens"].is_number_integer())
    r.usage.prompt_tokens = j["usage"]["prompt_tokens"].get<int64_t>();
  return r;
}

}  // namespace nl2sql::llm
